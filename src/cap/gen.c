/* gen.c — a model ready for the capability tasks: the prompt prefill,
 * greedy generation of one prompt (gen_batch.c with one in flight:
 * bit-exact, the engine's logits do not depend on threads or chunking;
 * ties go to the lower id) and the teacher-forced next-token row MMLU is
 * scored from. */
#include "cap/run.h"
#include "chat/chat.h"

#include <stdio.h>
#include <stdlib.h>

kld_status kld_cap_lm_open(const char *path, int threads, int64_t n_ctx, kld_cap_lm *lm, kld_error *err) {
    memset(lm, 0, sizeof *lm);
    kld_status st = kld_model_open(path, NULL, &lm->model, err);
    if (st == KLD_OK) st = kld_tok_open_source(kld_model_source(lm->model), &lm->tok, err);
    if (st != KLD_OK) return kld_cap_lm_close(lm), st;
    const kld_hparams *hp = kld_model_hparams(lm->model);
    lm->n_vocab = hp->n_vocab;
    lm->n_ctx = n_ctx > 0 ? n_ctx : hp->n_ctx_train > 0 ? hp->n_ctx_train : 2048;
    if (hp->n_ctx_train > 0 && lm->n_ctx > hp->n_ctx_train) lm->n_ctx = hp->n_ctx_train;
    lm->chunk = lm->n_ctx < 256 ? lm->n_ctx : 256;
    st = kld_session_create(lm->model, lm->n_ctx, lm->chunk, threads, &lm->s, err);
    if (st != KLD_OK) return kld_cap_lm_close(lm), st;
    lm->logits = malloc((size_t)lm->n_vocab * sizeof(float));
    if (!lm->logits) return kld_cap_lm_close(lm), kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    kld_chat_template ct;
    if ((st = kld_chat_template_open(kld_model_source(lm->model), lm->tok, &ct, err)) != KLD_OK)
        return kld_cap_lm_close(lm), st;
    lm->chat_template = ct.text; /* the lm owns the strings from now on */
    lm->bos = ct.bos;
    lm->eos = ct.eos;
    return KLD_OK;
}

void kld_cap_lm_close(kld_cap_lm *lm) {
    for (int i = 0; i < lm->n_batch_s; i++) kld_session_free(lm->batch_s[i]);
    free(lm->batch_s);
    free(lm->logits);
    free(lm->chat_template);
    free(lm->bos);
    free(lm->eos);
    kld_session_free(lm->s);
    kld_tok_free(lm->tok);
    if (!lm->shares_model) kld_model_close(lm->model);
    memset(lm, 0, sizeof *lm);
}

kld_status kld_cap_prefill(kld_cap_lm *lm, kld_session *s, const char *prompt, bool add_bos,
                           int64_t room, float *logits, kld_tok_ids *ids, kld_error *err) {
    kld_status st = kld_tok_encode(lm->tok, prompt, strlen(prompt),
                                   (add_bos ? KLD_TOK_ADD_SPECIAL : 0) | KLD_TOK_PARSE_SPECIAL, ids, err);
    if (st != KLD_OK) return st;
    if (ids->n == 0) {
        int32_t b = kld_tok_bos(lm->tok);
        if (b < 0 || !kld_tok_ids_append(ids, &b, 1)) return kld_fail(err, KLD_ERR_ARG, "the prompt encodes to no tokens");
    }
    int64_t limit = lm->n_ctx - room;
    if (limit < 1) limit = 1;
    if ((int64_t)ids->n > limit) { /* keep the end: the question is last */
        memmove(ids->ids, ids->ids + (ids->n - (size_t)limit), (size_t)limit * sizeof(int32_t));
        ids->n = (size_t)limit;
    }
    kld_session_reset(s);
    const int64_t n = (int64_t)ids->n;
    for (int64_t i = 0; i < n; i += lm->chunk) {
        const int64_t c = n - i < lm->chunk ? n - i : lm->chunk;
        st = kld_session_eval_rows(s, ids->ids + i, c, c - 1, i + c == n ? logits : NULL, err);
        if (st != KLD_OK) return st;
    }
    return KLD_OK;
}

kld_status kld_cap_next_logits(kld_cap_lm *lm, const char *prompt, bool add_bos, kld_error *err) {
    kld_tok_ids ids = {0};
    kld_status st = kld_cap_prefill(lm, lm->s, prompt, add_bos, 1, lm->logits, &ids, err);
    kld_tok_ids_free(&ids);
    return st;
}

kld_status kld_cap_generate(kld_cap_lm *lm, const char *prompt, bool add_bos, int max_new,
                            const char *const *stops, char **text, kld_error *err) {
    const kld_cap_gen_item it = {.prompt = prompt, .add_bos = add_bos, .max_new = max_new, .stops = stops};
    size_t done = 0;
    *text = NULL;
    return kld_cap_generate_batch(lm, &it, 1, 1, NULL, text, &done, err);
}
