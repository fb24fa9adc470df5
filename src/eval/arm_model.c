/* arm_model.c — the model-session arm: a loaded model and one session
 * (KV cache) on the evaluation's shared pool, producing dense logit rows
 * for the requested rows of each chunk only (the LM head skips the rest). */
#include "eval/arm.h"

#include "eval/corpus.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>

typedef struct model_arm {
    kld_session *s;
    float *logits;
    int64_t chunk;
} model_arm;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static kld_status prepare(kld_arm *a, kld_pool *pool, int64_t max_len, int64_t chunk,
                          kld_error *err) {
    model_arm *m = a->impl;
    m->chunk = chunk;
    kld_status st = kld_session_create_shared(a->model, max_len, chunk, pool, &m->s, err);
    if (st) return st;
    m->logits = malloc((size_t)chunk * (size_t)a->n_vocab * sizeof(float));
    if (!m->logits) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory for logits", a->path);
    return KLD_OK;
}

static kld_status begin(kld_arm *a, const kld_window *w, size_t wi, kld_error *err) {
    (void)w, (void)wi, (void)err;
    kld_session_reset(((model_arm *)a->impl)->s);
    return KLD_OK;
}

static kld_status eval(kld_arm *a, const int32_t *tokens, int64_t c0, int64_t n, int64_t r0,
                       int64_t r1, kld_rows *rows, kld_error *err) {
    model_arm *m = a->impl;
    double t0 = now_s();
    kld_status st = r1 > r0 ? kld_session_eval_rows(m->s, tokens, n, r0 - c0, m->logits, err)
                            : kld_session_eval(m->s, tokens, n, NULL, err);
    a->seconds += now_s() - t0;
    a->tokens += (uint64_t)n;
    if (st) return st;
    *rows = (kld_rows){.kind = KLD_ROWS_DENSE, .row0 = r0, .n = r1 - r0, .n_vocab = a->n_vocab,
                       .logits = m->logits};
    return KLD_OK;
}

static void model_free(kld_arm *a) {
    model_arm *m = a->impl;
    if (m) {
        kld_session_free(m->s);
        free(m->logits);
        free(m);
    }
    kld_model_close(a->model);
}

static const kld_arm_ops model_ops = {prepare, begin, eval, model_free};

static json_t *model_desc(const char *path, const kld_model *m) {
    const kld_source *src = kld_model_source(m);
    json_t *o = json_pack("{s:s,s:s,s:s,s:I}", "kind", "model", "path", path, "format",
                          kld_format_name(src->format), "bytes", (json_int_t)src->file_bytes);
    struct stat sb;
    uint8_t d[32];
    char hex[65];
    if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && kld_sha256_file(path, d, NULL) == KLD_OK) {
        kld_hex_digest(d, hex);
        json_object_set_new(o, "sha256", json_string(hex));
    } else {
        json_object_set_new(o, "sha256", json_null());
    }
    const kld_hparams *hp = kld_model_hparams(m);
    json_object_set_new(o, "arch", json_string(hp->arch));
    json_object_set_new(o, "n_vocab", json_integer(hp->n_vocab));
    return o;
}

kld_status kld_arm_open_model(const char *path, kld_arm **out, kld_error *err) {
    *out = NULL;
    kld_arm *a = calloc(1, sizeof *a);
    model_arm *m = calloc(1, sizeof *m);
    if (!a || !m) {
        free(a);
        free(m);
        return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    }
    a->ops = &model_ops;
    a->kind = "model";
    a->impl = m;
    a->path = kld_strdup(path);
    kld_status st = a->path ? kld_model_open(path, NULL, &a->model, err)
                            : kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    if (st) {
        kld_arm_free(a);
        return st;
    }
    const kld_hparams *hp = kld_model_hparams(a->model);
    a->n_vocab = (int32_t)hp->n_vocab;
    a->n_ctx_train = hp->n_ctx_train;
    kld_error tok_err = {0};
    if (kld_tok_open_source(kld_model_source(a->model), &a->tok, &tok_err) != KLD_OK) a->tok = NULL;
    a->desc = model_desc(path, a->model);
    *out = a;
    return KLD_OK;
}

void kld_arm_free(kld_arm *a) {
    if (!a) return;
    if (a->ops && a->ops->free) a->ops->free(a);
    kld_tok_free(a->tok);
    json_decref(a->desc);
    if (a->plan) kld_plan_free(a->plan);
    free(a->plan);
    free(a->path);
    free(a);
}
