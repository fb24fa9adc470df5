/* cap_lm.c — the models of a capability run with their levers: each
 * generation session runs with the engine's levers (--ref-lever,
 * --arm-lever), and self-flag (`cap -m MODEL --lever kv=q8_0`, no --arm)
 * gives the arm a second session over the reference's weights, loaded once,
 * as `kldeval kl -m MODEL --lever` does. */
#include "cap/run.h"
#include "eval/arm.h"

#include <stdio.h>
#include <stdlib.h>

static kld_status new_session(kld_cap_lm *lm, const kld_levers *levers, int threads, kld_error *err) {
    kld_status st = levers ? kld_levers_check(levers, lm->model, err) : KLD_OK;
    if (st) return st;
    kld_session_opts so = {lm->n_ctx, lm->chunk, threads, NULL, levers, false, 0};
    return kld_session_create_opts(lm->model, &so, &lm->s, err);
}

kld_status kld_cap_lm_set_levers(kld_cap_lm *lm, const kld_levers *levers, int threads, kld_error *err) {
    if (!levers || kld_levers_is_reference(levers)) return KLD_OK;
    kld_status st = kld_levers_check(levers, lm->model, err);
    if (st) return st;
    kld_session_free(lm->s); /* first, so that two arenas are never held at once */
    lm->s = NULL;
    return new_session(lm, levers, threads, err);
}

kld_status kld_cap_lm_share(const kld_cap_lm *owner, const kld_levers *levers, int threads,
                            kld_cap_lm *lm, kld_error *err) {
    memset(lm, 0, sizeof *lm);
    lm->model = owner->model;
    lm->shares_model = true;
    lm->n_ctx = owner->n_ctx;
    lm->chunk = owner->chunk;
    lm->n_vocab = owner->n_vocab;
    kld_status st = kld_tok_open_source(kld_model_source(lm->model), &lm->tok, err);
    if (st == KLD_OK) st = new_session(lm, levers, threads, err);
    if (st != KLD_OK) return kld_cap_lm_close(lm), st;
    lm->logits = malloc((size_t)lm->n_vocab * sizeof(float));
    lm->chat_template = owner->chat_template ? kld_strdup(owner->chat_template) : NULL;
    lm->bos = kld_strdup(owner->bos ? owner->bos : "");
    lm->eos = kld_strdup(owner->eos ? owner->eos : "");
    if (!lm->logits || (owner->chat_template && !lm->chat_template) || !lm->bos || !lm->eos)
        return kld_cap_lm_close(lm), kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    return KLD_OK;
}

/* Both models as arm specs, parsed as kl's are (the levers named on error). */
static kld_status parse_arms(const kld_cap_run_opts *o, kld_arm_parsed *ref, kld_arm_parsed *arm,
                             kld_error *err) {
    kld_arm_spec r = {.kind = KLD_ARM_MODEL, .path = o->ref_path, .levers = o->ref_levers};
    kld_arm_spec a = {.kind = KLD_ARM_MODEL, .path = o->arm_path ? o->arm_path : o->ref_path,
                      .levers = o->arm_levers};
    kld_status st = kld_arm_spec_parse(&r, "reference", ref, err);
    return st ? st : kld_arm_spec_parse(&a, "arm", arm, err);
}

kld_status kld_cap_check_arms(const kld_cap_run_opts *o, kld_error *err) {
    kld_arm_parsed ref, arm;
    return parse_arms(o, &ref, &arm, err);
}

kld_status kld_cap_open_models(const kld_cap_run_opts *o, kld_cap_lm lm[2], int *n_arms, kld_error *err) {
    memset(lm, 0, 2 * sizeof *lm);
    kld_arm_parsed ref, arm;
    kld_status st = parse_arms(o, &ref, &arm, err);
    if (st) return st;
    const kld_levers ref_l = ref.levers, arm_l = arm.levers;
    const bool self_flag = !o->arm_path && (o->arm_levers || o->has_arm_sampler);
    *n_arms = o->arm_path || self_flag ? 2 : 1;
    st = kld_cap_lm_open(o->ref_path, o->threads, 0, &lm[0], err);
    if (st == KLD_OK) st = kld_cap_lm_set_levers(&lm[0], &ref_l, o->threads, err);
    if (st == KLD_OK && o->arm_path) {
        st = kld_cap_lm_open(o->arm_path, o->threads, 0, &lm[1], err);
        if (st == KLD_OK) st = kld_cap_lm_set_levers(&lm[1], &arm_l, o->threads, err);
    } else if (st == KLD_OK && self_flag) {
        st = kld_cap_lm_share(&lm[0], &arm_l, o->threads, &lm[1], err);
    }
    if (st != KLD_OK) {
        kld_cap_lm_close(&lm[1]);
        kld_cap_lm_close(&lm[0]);
    }
    return st;
}
