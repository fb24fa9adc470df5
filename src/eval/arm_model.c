/* arm_model.c — the model-session arm: a loaded model and one session
 * (KV cache) on the evaluation's shared pool, producing dense logit rows
 * for the requested rows of each chunk only (the LM head skips the rest).
 * The session carries the arm's levers; a shared arm borrows another arm's
 * model (self-flag A/B on one weight load). With the decode path, tokens
 * past the window's prompt go through single-token decode steps. */
#include "eval/arm.h"
#include "eval/file_hash.h"

#include "eval/corpus.h"
#include "quant/quant.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>

typedef struct model_arm {
    kld_session *s;
    float *logits;
    int64_t chunk;
    bool owns_model;
    kld_levers levers;
    bool decode;
    int64_t prompt_len;
    bool want_hidden;
    float *hidden;          /* [chunk][n_embd] when want_hidden */
} model_arm;

static kld_status prepare(kld_arm *a, kld_pool *pool, int64_t max_len, int64_t chunk, int64_t passes,
                          kld_error *err) {
    model_arm *m = a->impl;
    m->chunk = chunk;
    /* the decode path reads the weights once per token: passes unknown */
    kld_session_opts so = {max_len, chunk, 0, pool, &m->levers, false, m->decode ? 0 : passes};
    kld_status st = kld_session_create_opts(a->model, &so, &m->s, err);
    if (st) return st;
    m->logits = malloc((size_t)chunk * (size_t)a->n_vocab * sizeof(float));
    if (!m->logits) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory for logits", a->path);
    if (m->want_hidden &&
        !(m->hidden = malloc((size_t)chunk * (size_t)kld_model_hparams(a->model)->n_embd * sizeof(float))))
        return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory for hidden states", a->path);
    return KLD_OK;
}

static kld_status begin(kld_arm *a, const kld_window *w, size_t wi, kld_error *err) {
    (void)w, (void)wi, (void)err;
    kld_session_reset(((model_arm *)a->impl)->s);
    return KLD_OK;
}

/* Decode path: window positions below prompt_len in one prefill call,
 * then one decode step per token, each writing its row when requested. */
static kld_status eval_decode(model_arm *m, int32_t n_vocab, const int32_t *tokens, int64_t c0,
                              int64_t n, int64_t r0, int64_t r1, kld_error *err) {
    int64_t np = m->prompt_len - c0;
    np = np < 0 ? 0 : np > n ? n : np;
    kld_status st = KLD_OK;
    if (np > 0) {
        if (r0 < c0 + np && r1 > r0)
            st = kld_session_eval_rows(m->s, tokens, np, r0 - c0, m->logits, err);
        else
            st = kld_session_eval(m->s, tokens, np, NULL, err);
    }
    for (int64_t i = np; i < n && st == KLD_OK; i++) {
        const int64_t p = c0 + i;
        float *row = p >= r0 && p < r1 ? m->logits + (size_t)(p - r0) * (size_t)n_vocab : NULL;
        st = kld_session_decode(m->s, tokens[i], row, err);
    }
    return st;
}

static kld_status eval(kld_arm *a, const int32_t *tokens, int64_t c0, int64_t n, int64_t r0,
                       int64_t r1, kld_rows *rows, kld_error *err) {
    model_arm *m = a->impl;
    double t0 = kld_now_s();
    kld_status st = m->decode ? eval_decode(m, a->n_vocab, tokens, c0, n, r0, r1, err)
                    : r1 > r0 ? kld_session_eval_hidden(m->s, tokens, n, r0 - c0, m->hidden,
                                                        m->logits, err)
                              : kld_session_eval(m->s, tokens, n, NULL, err);
    a->seconds += kld_now_s() - t0;
    a->tokens += (uint64_t)n;
    if (st) return st;
    *rows = (kld_rows){.kind = KLD_ROWS_DENSE, .row0 = r0, .n = r1 - r0, .n_vocab = a->n_vocab,
                       .logits = m->logits, .hidden = m->hidden};
    return KLD_OK;
}

static void model_free(kld_arm *a) {
    model_arm *m = a->impl;
    if (m) {
        kld_session_free(m->s);
        free(m->logits);
        free(m->hidden);
        if (m->owns_model) kld_model_close(a->model);
        free(m);
    }
}

static const kld_arm_ops model_ops = {prepare, begin, eval, model_free};

/* Over every tensor, as `inspect` counts them: the quantized-on-load plan's
 * when a policy was applied, else the stored tensors'. */
static double bits_per_weight(const kld_model *m) {
    const struct kld_quant_plan *plan = kld_model_quant_plan(m);
    if (plan) return kld_quant_plan_bpw(plan);
    const kld_source *src = kld_model_source(m);
    uint64_t bytes = 0, params = 0;
    for (size_t i = 0; i < src->n_tensors; i++) {
        bytes += src->tensors[i].nbytes;
        params += (uint64_t)kld_tensor_nelements(&src->tensors[i]);
    }
    return params ? 8.0 * (double)bytes / (double)params : 0.0;
}

/* pending: NULL hashes the file now; else *pending = a hashing job started
 * (sha256 is then null until kld_arm_desc fills it in). */
static json_t *model_desc(const char *path, const kld_model *m, kld_sha256_job **pending) {
    const kld_source *src = kld_model_source(m);
    json_t *o = json_pack("{s:s,s:s,s:s,s:I}", "kind", "model", "path", path, "format",
                          kld_format_name(src->format), "bytes", (json_int_t)src->file_bytes);
    struct stat sb;
    uint8_t d[32];
    char hex[65];
    /* the stored file's hash, also for MODEL@POLICY */
    const bool regular = stat(src->path, &sb) == 0 && S_ISREG(sb.st_mode);
    if (regular && pending && (*pending = kld_sha256_start(src->path))) {
        json_object_set_new(o, "sha256", json_null());
    } else if (regular && kld_sha256_file(src->path, d, NULL) == KLD_OK) {
        kld_hex_digest(d, hex);
        json_object_set_new(o, "sha256", json_string(hex));
    } else {
        json_object_set_new(o, "sha256", json_null());
    }
    const kld_hparams *hp = kld_model_hparams(m);
    json_object_set_new(o, "arch", json_string(hp->arch));
    json_object_set_new(o, "n_vocab", json_integer(hp->n_vocab));
    /* MODEL@POLICY: the policy is a defining input (null: the stored types) */
    json_object_set_new(o, "policy", kld_model_policy(m) ? json_string(kld_model_policy(m)) : json_null());
    json_object_set_new(o, "bits_per_weight", json_real(bits_per_weight(m)));
    /* quantized on load: the arm's size is its weights' at the policy, not the stored file's */
    const struct kld_quant_plan *plan = kld_model_quant_plan(m);
    if (plan) {
        json_object_set_new(o, "file_bytes", json_integer((json_int_t)src->file_bytes));
        json_object_set_new(o, "bytes", json_integer((json_int_t)plan->dst_bytes));
    }
    /* MODEL+ADAPTER[:SCALE]: the adapter is a defining input (absent: none) */
    if (kld_model_adapter(m)) {
        json_object_set_new(o, "adapter", json_string(kld_model_adapter(m)));
        if (kld_sha256_file(kld_model_adapter_file(m), d, NULL) == KLD_OK) {
            kld_hex_digest(d, hex);
            json_object_set_new(o, "adapter_sha256", json_string(hex));
        }
    }
    return o;
}

json_t *kld_arm_model_desc(const char *path, const kld_model *m) { return model_desc(path, m, NULL); }

/* The model's tokenizer, when it has one it can read: a model without one
 * still scores pre-tokenized ids. Running out of memory is an error. */
static kld_status open_tokenizer(kld_arm *a, kld_error *err) {
    kld_error tok_err = {0};
    kld_status st = kld_tok_open_source(kld_model_source(a->model), &a->tok, &tok_err);
    if (st == KLD_ERR_NOMEM) {
        *err = tok_err;
        return st;
    }
    if (st) a->tok = NULL;
    return KLD_OK;
}

kld_status kld_arm_open_model(const char *path, kld_arm **out, kld_error *err) {
    *out = NULL;
    kld_arm *a = kld_arm_new(&model_ops, "model", path, sizeof(model_arm), false);
    if (!a) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    model_arm *m = a->impl;
    m->owns_model = true;
    kld_levers_default(&m->levers);
    kld_status st = kld_model_open(path, NULL, &a->model, err);
    if (st) {
        kld_arm_free(a);
        return st;
    }
    const kld_hparams *hp = kld_model_hparams(a->model);
    a->n_vocab = (int32_t)hp->n_vocab;
    a->n_ctx_train = hp->n_ctx_train;
    if ((st = open_tokenizer(a, err))) {
        kld_arm_free(a);
        return st;
    }
    /* hashed while the weights are repacked and the first windows run */
    a->desc = model_desc(path, a->model, &a->pending_sha);
    *out = a;
    return KLD_OK;
}

kld_status kld_arm_open_model_shared(kld_arm *owner, kld_arm **out, kld_error *err) {
    *out = NULL;
    if (!owner || owner->ops != &model_ops)
        return kld_fail(err, KLD_ERR_ARG, "a shared model arm needs an open model arm");
    kld_arm *a = kld_arm_new(&model_ops, "model", owner->path, sizeof(model_arm), false);
    if (!a) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    model_arm *m = a->impl;
    kld_levers_default(&m->levers);
    a->model = owner->model; /* borrowed: owns_model stays false */
    a->n_vocab = owner->n_vocab;
    a->n_ctx_train = owner->n_ctx_train;
    kld_status st = open_tokenizer(a, err);
    if (st) {
        kld_arm_free(a);
        return st;
    }
    a->desc = json_deep_copy(owner->desc);
    a->sha_from = owner->pending_sha ? owner : NULL;
    json_object_set_new(a->desc, "shares_weights", json_true());
    *out = a;
    return KLD_OK;
}

kld_status kld_arm_model_configure(kld_arm *a, const kld_levers *levers, bool decode,
                                   int64_t prompt_len, kld_error *err) {
    if (a->ops != &model_ops)
        return kld_fail(err, KLD_ERR_ARG, "%s: levers and --decode apply to model arms only", a->path);
    model_arm *m = a->impl;
    if (levers) {
        kld_status st = kld_levers_check(levers, a->model, err);
        if (st) return st;
        m->levers = *levers;
    }
    if (decode && prompt_len < 0)
        return kld_fail(err, KLD_ERR_ARG, "--prompt-len %lld must be >= 0", (long long)prompt_len);
    m->decode = decode;
    m->prompt_len = prompt_len;
    char buf[2048];
    kld_levers_format(&m->levers, buf, sizeof buf);
    json_object_set_new(a->desc, "levers", json_string(buf));
    kld_mem_plan mp; /* what one position costs in the cache with these levers */
    kld_error plan_err = {0};
    if (kld_mem_plan_compute_levers(a->model, 1, 1, 1, &m->levers, &mp, &plan_err) == KLD_OK) {
        json_object_set_new(a->desc, "kv_bytes_per_token", json_integer((json_int_t)mp.kv_token_bytes));
        json_object_set_new(a->desc, "kv_types", json_string(mp.kv_desc));
        /* the values one position caches: bits per value = bytes·8 / this */
        const kld_hparams *hp = kld_model_hparams(a->model);
        json_object_set_new(a->desc, "kv_values_per_token",
                            json_integer((json_int_t)kld_hp_kv_values_per_token(hp)));
    }
    json_object_set_new(a->desc, "path_kind", json_string(decode ? "decode" : "prefill"));
    if (decode) json_object_set_new(a->desc, "prompt_len", json_integer(prompt_len));
    return KLD_OK;
}

kld_status kld_arm_model_want_hidden(kld_arm *a, kld_error *err) {
    if (a->ops != &model_ops) return kld_fail(err, KLD_ERR_ARG, "%s: not a model arm", a->path);
    model_arm *m = a->impl;
    if (m->decode)
        return kld_fail(err, KLD_ERR_ARG, "%s: hidden states come from the prefill path, not "
                        "--decode", a->path);
    m->want_hidden = true;
    return KLD_OK;
}

kld_session *kld_arm_model_session(const kld_arm *a) {
    return a && a->ops == &model_ops ? ((model_arm *)a->impl)->s : NULL;
}
