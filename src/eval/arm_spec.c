/* arm_spec.c — an arm as named (kld_arm_spec, kld.h) → parsed and checked
 * once → opened into the arm interface by one function whatever its kind.
 * Every rule about which kinds pair up, and what applies to which kind,
 * lives here; commands only fill specs. */
#include "eval/arm.h"

#include "store/dump.h"

#include <stdio.h>
#include <string.h>

const char *kld_arm_kind_desc(kld_arm_kind kind) {
    switch (kind) {
    case KLD_ARM_MODEL: return "a model";
    case KLD_ARM_SELF: return "a self-flag session";
    case KLD_ARM_TEACHER: return "a saved teacher dump";
    case KLD_ARM_CANDIDATE: return "a candidate dump";
    case KLD_ARM_LLAMACPP_BASE: return "a llama.cpp base file";
    case KLD_ARM_ENDPOINT: return "a completions endpoint";
    case KLD_ARM_NONE: break;
    }
    return "no arm";
}

static bool runs_a_model(kld_arm_kind k) { return k == KLD_ARM_MODEL || k == KLD_ARM_SELF; }

/* The kldeval flag that names an arm of this kind in this role: messages
 * name what the user typed (the C API documents the correspondence). */
static const char *kind_flag(kld_arm_kind k, bool ref) {
    switch (k) {
    case KLD_ARM_MODEL: return ref ? "--ref/-m" : "--arm";
    case KLD_ARM_SELF: return "-m without --arm (self-flag)";
    case KLD_ARM_TEACHER: return "--reference-logits";
    case KLD_ARM_CANDIDATE: return "--arm-logits";
    case KLD_ARM_LLAMACPP_BASE: return "--llamacpp-base";
    case KLD_ARM_ENDPOINT: return ref ? "--ref-endpoint" : "--arm-endpoint";
    case KLD_ARM_NONE: break;
    }
    return ref ? "--ref" : "--arm";
}

kld_status kld_arm_spec_parse(const kld_arm_spec *s, const char *role, kld_arm_parsed *out,
                              kld_error *err) {
    memset(out, 0, sizeof *out);
    out->spec = *s;
    kld_levers_default(&out->levers);
    bool ref = !strcmp(role, "reference");
    out->role_ref = ref;
    const char *lever_flag = ref ? "--ref-lever" : !strcmp(role, "arm") ? "--lever/--arm-lever" : "--lever";
    if (s->kind < KLD_ARM_MODEL || s->kind > KLD_ARM_ENDPOINT)
        return kld_fail(err, KLD_ERR_ARG, "give one reference (--ref, --reference-logits, "
                        "--llamacpp-base or --ref-endpoint) and one arm (--arm, --arm-logits or "
                        "--arm-endpoint): no %s is given", role);
    const char *flag = kind_flag(s->kind, ref);
    if (s->kind != KLD_ARM_SELF && (!s->path || !*s->path))
        return kld_fail(err, KLD_ERR_ARG, "the %s (%s) has no path", role, flag);
    if (s->kind == KLD_ARM_SELF && s->path)
        return kld_fail(err, KLD_ERR_ARG, "the %s is a self-flag session over the reference's "
                        "weights: it takes no path of its own (got %s)", role, s->path);
    if (!runs_a_model(s->kind) && s->levers)
        return kld_fail(err, KLD_ERR_ARG, "%s '%s' applies to a model (--ref/-m or --arm), not to "
                        "%s %s (%s)", lever_flag, s->levers, flag, s->path,
                        kld_arm_kind_desc(s->kind));
    if (!runs_a_model(s->kind) && s->decode)
        return kld_fail(err, KLD_ERR_ARG, "--decode applies to a model arm, not to %s %s (%s)", flag,
                        s->path, kld_arm_kind_desc(s->kind));
    if (s->head && s->kind != KLD_ARM_TEACHER && s->kind != KLD_ARM_CANDIDATE)
        return kld_fail(err, KLD_ERR_ARG, "%s %s applies to a hidden-state dump, not to %s (%s)",
                        ref ? "--teacher-head" : "--arm-head", s->head, flag,
                        kld_arm_kind_desc(s->kind));
    if (s->kind != KLD_ARM_ENDPOINT && (s->endpoint_model || s->top_logprobs || s->api_key))
        return kld_fail(err, KLD_ERR_ARG, "%s applies to an endpoint (--arm-endpoint or --ref-endpoint), not to %s (%s)",
                        s->endpoint_model ? "--endpoint-model" : s->top_logprobs ? "--top-logprobs"
                                                                                 : "--api-key",
                        flag, kld_arm_kind_desc(s->kind));
    if (s->kind == KLD_ARM_ENDPOINT && s->top_logprobs < 0)
        return kld_fail(err, KLD_ERR_ARG, "--top-logprobs %d must be >= 1", (int)s->top_logprobs);
    if (s->kind == KLD_ARM_ENDPOINT && strncmp(s->path, "http://", 7) && strncmp(s->path, "https://", 8))
        return kld_fail(err, KLD_ERR_ARG, "%s %s: not an http:// or https:// URL", flag, s->path);
    if (s->prompt_len < 0)
        return kld_fail(err, KLD_ERR_ARG, "--prompt-len %lld must be >= 0", (long long)s->prompt_len);
    if (s->prompt_len > 0 && !s->decode)
        return kld_fail(err, KLD_ERR_ARG, "--prompt-len %lld applies to --decode",
                        (long long)s->prompt_len);
    kld_status st;
    if (s->levers && (st = kld_levers_parse(s->levers, &out->levers, err))) {
        kld_error_prefix(err, "%s", lever_flag);
        return st;
    }
    return KLD_OK;
}

kld_status kld_arm_pair_check(const kld_arm_parsed *ref, const kld_arm_parsed *arm,
                              kld_error *err) {
    kld_arm_kind r = ref->spec.kind, a = arm->spec.kind;
    if (r == KLD_ARM_SELF || r == KLD_ARM_CANDIDATE)
        return kld_fail(err, KLD_ERR_ARG, "%s cannot be the reference (%s)", kld_arm_kind_desc(r),
                        r == KLD_ARM_SELF ? "a self-flag session is the arm of a model reference"
                                          : "give it with --arm-logits and its teacher with "
                                            "--reference-logits");
    if (a == KLD_ARM_TEACHER || a == KLD_ARM_LLAMACPP_BASE)
        return kld_fail(err, KLD_ERR_ARG, "%s (%s) can only be the reference", kld_arm_kind_desc(a),
                        arm->spec.path);
    if (a == KLD_ARM_SELF && r != KLD_ARM_MODEL)
        return kld_fail(err, KLD_ERR_ARG, "a self-flag arm shares the reference model's weights: "
                        "the reference must be a model (--ref/-m), not %s (give --arm or "
                        "--arm-logits)", kind_flag(r, true));
    if (a == KLD_ARM_SELF && !arm->spec.levers && !arm->spec.decode)
        return kld_fail(err, KLD_ERR_ARG, "self-flag (-m MODEL without --arm) needs the candidate's "
                        "setting: --lever NAME=VALUE (levers: kv, kv_k, kv_v, act, kernels, "
                        "attention, attn_block, noise, lora) or --decode");
    if (a == KLD_ARM_CANDIDATE && r != KLD_ARM_TEACHER)
        return kld_fail(err, KLD_ERR_ARG, "--arm-logits %s is scored against its teacher: give "
                        "--reference-logits (not %s)", arm->spec.path, kind_flag(r, true));
    if (r == KLD_ARM_ENDPOINT && a != KLD_ARM_MODEL)
        return kld_fail(err, KLD_ERR_ARG, "--ref-endpoint %s is scored against a model arm (--arm), "
                        "not %s", ref->spec.path, kind_flag(a, false));
    if (a == KLD_ARM_ENDPOINT && r != KLD_ARM_MODEL)
        return kld_fail(err, KLD_ERR_ARG, "--arm-endpoint %s is scored against a model reference "
                        "(--ref/-m), not %s", arm->spec.path, kind_flag(r, true));
    if (r == KLD_ARM_LLAMACPP_BASE && a != KLD_ARM_MODEL)
        return kld_fail(err, KLD_ERR_ARG, "--llamacpp-base is scored against a model (--arm), not %s",
                        kind_flag(a, false));
    return KLD_OK;
}

bool kld_arm_spec_opens_second(const kld_arm_parsed *p) {
    return p->spec.kind == KLD_ARM_SELF || p->spec.kind == KLD_ARM_TEACHER ||
           p->spec.kind == KLD_ARM_LLAMACPP_BASE || p->spec.kind == KLD_ARM_ENDPOINT;
}

/* A dump of the kind the spec says (a teacher is not a candidate, and back). */
static kld_status open_dump(const kld_arm_parsed *p, const kld_arm *partner, kld_arm **out,
                            kld_error *err) {
    bool want_candidate = p->spec.kind == KLD_ARM_CANDIDATE;
    int64_t limit = !want_candidate && partner && partner->n_vocab > 0 ? partner->n_vocab : 0;
    kld_status st = kld_arm_open_dump_head(p->spec.path, p->spec.head, limit, out, err);
    if (st) return st;
    const kld_dump_meta *m = kld_dump_meta_of(kld_arm_dump(*out));
    if (m->candidate == want_candidate) return KLD_OK;
    kld_arm_free(*out);
    *out = NULL;
    if (want_candidate)
        return kld_fail(err, KLD_ERR_ARG, "%s is a teacher dump, not a candidate dump (make one "
                        "with kldeval dump --indices-from TEACHER)", p->spec.path);
    return kld_fail(err, KLD_ERR_ARG, "%s is a candidate dump: give it as the arm and its teacher "
                    "as the reference", p->spec.path);
}

kld_status kld_arm_open_spec(const kld_arm_parsed *p, kld_arm *partner, kld_arm **out,
                             kld_error *err) {
    *out = NULL;
    const kld_arm_spec *s = &p->spec;
    if (kld_arm_spec_opens_second(p) && !partner)
        return kld_fail(err, KLD_ERR_ARG, "%s opens after the arm it is compared with",
                        kld_arm_kind_desc(s->kind));
    kld_status st;
    switch (s->kind) {
    case KLD_ARM_MODEL:
    case KLD_ARM_SELF:
        st = s->kind == KLD_ARM_MODEL ? kld_arm_open_model(s->path, out, err)
                                      : kld_arm_open_model_shared(partner, out, err);
        if (!st) st = kld_arm_model_configure(*out, &p->levers, s->decode, s->prompt_len, err);
        break;
    case KLD_ARM_TEACHER:
    case KLD_ARM_CANDIDATE:
        return open_dump(p, partner, out, err);
    case KLD_ARM_LLAMACPP_BASE: {
        int32_t bos = partner->tok && kld_tok_adds_bos(partner->tok) ? kld_tok_bos(partner->tok) : -1;
        return kld_arm_open_lcpp_base(s->path, partner->n_vocab, bos, out, err);
    }
    case KLD_ARM_ENDPOINT:
        return kld_arm_open_endpoint(s->path, p->role_ref, s->endpoint_model,
                                     s->top_logprobs ? s->top_logprobs : 20, s->api_key, partner->n_vocab,
                                     out, err);
    default:
        return kld_fail(err, KLD_ERR_ARG, "no arm to open");
    }
    if (st) {
        kld_arm_free(*out);
        *out = NULL;
    }
    return st;
}

kld_status kld_arm_spec_open_model(const kld_arm_parsed *p, kld_model **out, kld_error *err) {
    *out = NULL;
    if (p->spec.kind != KLD_ARM_MODEL)
        return kld_fail(err, KLD_ERR_ARG, "%s is not a model", kld_arm_kind_desc(p->spec.kind));
    kld_status st = kld_model_open(p->spec.path, NULL, out, err);
    if (!st && (st = kld_levers_check(&p->levers, *out, err))) {
        kld_model_close(*out);
        *out = NULL;
    }
    return st;
}
