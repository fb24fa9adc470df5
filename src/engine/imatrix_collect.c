/* imatrix_collect.c — `kldeval imatrix`'s accumulation: a forward observer
 * sums the squares of every blk.* weight matrix's input columns in float,
 * row by row in token order as llama-imatrix does, over windows of n_ctx
 * tokens (the first token of each replaced by BOS), one batch per window.
 * With llama.cpp's numerics (levers kv=f16,act=q8: f16 KV cache, matmul
 * inputs rounded to the weight's vec_dot type) the upstream activations are
 * the ones llama-imatrix squares. */
#include "engine/internal.h"
#include "quant/quant.h"

#include <math.h>
#include <stdlib.h>

typedef struct acc {
    const kld_tensor *w;
    char name[96];
    int64_t n;
    float *values;
    int64_t *counts;
    int32_t ncall;
} acc;

typedef struct collector {
    const kld_model *m;
    acc *a;
    size_t n, cap;
    bool failed;
    kld_status st;
    char msg[256];
} collector;

static acc *find_acc(collector *c, const kld_tensor *W) {
    for (size_t i = 0; i < c->n; i++)
        if (c->a[i].w == W) return &c->a[i];
    char name[96];
    if (!kld_model_weight_name(c->m, W, name, sizeof name) || strncmp(name, "blk.", 4)) return NULL;
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 64;
        acc *p = realloc(c->a, cap * sizeof *p);
        if (!p) return NULL;
        c->a = p;
        c->cap = cap;
    }
    acc *e = &c->a[c->n];
    memset(e, 0, sizeof *e);
    e->w = W;
    snprintf(e->name, sizeof e->name, "%s", name);
    e->n = W->ne[0];
    e->values = calloc((size_t)e->n, sizeof *e->values);
    e->counts = calloc((size_t)e->n, sizeof *e->counts);
    if (!e->values || !e->counts) {
        free(e->values);
        free(e->counts);
        return NULL;
    }
    c->n++;
    return e;
}

static void observe(void *ctx, const kld_tensor *W, const float *A, int64_t n, int64_t lda) {
    collector *c = ctx;
    if (c->failed || n < 16) return; /* llama-imatrix skips batches under 16 rows */
    acc *e = find_acc(c, W);
    if (!e) return; /* the LM head, or out of memory (caught below by a missing entry) */
    e->ncall++;
    for (int64_t r = 0; r < n; r++) {
        const float *x = A + r * lda;
        for (int64_t j = 0; j < e->n; j++) {
            e->values[j] += x[j] * x[j];
            e->counts[j]++;
        }
    }
    for (int64_t j = 0; j < e->n; j++)
        if (!isfinite(e->values[j])) {
            c->failed = true;
            snprintf(c->msg, sizeof c->msg, "%s: a squared activation sum is not finite", e->name);
            return;
        }
}

kld_status kld_imatrix_collect(kld_model *model, const int32_t *ids, int64_t n_ids, int64_t n_ctx,
                               int64_t n_chunks, int32_t bos, int n_threads,
                               const kld_levers *levers, const char *dataset,
                               kld_imatrix_progress_fn progress, void *progress_ctx,
                               kld_imatrix **out, kld_error *err) {
    *out = NULL;
    if (n_ctx < 16 || n_ids < 2 * n_ctx)
        return kld_fail(err, KLD_ERR_ARG, "imatrix: %lld tokens are fewer than 2 windows of %lld "
                        "(and a window needs >= 16 tokens)", (long long)n_ids, (long long)n_ctx);
    int64_t max_chunks = n_ids / n_ctx;
    if (n_chunks <= 0 || n_chunks > max_chunks) n_chunks = max_chunks;
    kld_session *s = NULL;
    kld_session_opts so = {n_ctx, n_ctx, n_threads, NULL, levers, false, 0};
    kld_status st = kld_session_create_opts(model, &so, &s, err);
    if (st) return st;
    collector c = {.m = model};
    kld_session_observe(s, observe, &c);
    int32_t *win = malloc((size_t)n_ctx * sizeof *win);
    if (!win) st = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; !st && i < n_chunks; i++) {
        memcpy(win, ids + i * n_ctx, (size_t)n_ctx * sizeof *win);
        if (bos >= 0) win[0] = bos;
        kld_session_reset(s);
        st = kld_session_eval_rows(s, win, n_ctx, n_ctx, NULL, err); /* no logits needed */
        if (!st && c.failed) st = kld_fail(err, KLD_ERR_FORMAT, "imatrix: %s", c.msg);
        if (!st && progress) progress(progress_ctx, i + 1, n_chunks);
    }
    free(win);
    kld_session_free(s);
    kld_imatrix *im = NULL;
    if (!st && c.n == 0) st = kld_fail(err, KLD_ERR_ARG, "imatrix: the model has no blk.* matmuls");
    if (!st && (!(im = calloc(1, sizeof *im)) || !(im->e = calloc(c.n, sizeof *im->e))))
        st = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    for (size_t i = 0; !st && i < c.n; i++) {
        const acc *a = &c.a[i];
        kld_imatrix_entry *e = &im->e[i];
        e->name = kld_strdup(a->name);
        e->sums = malloc((size_t)a->n * sizeof(float));
        e->weights = malloc((size_t)a->n * sizeof(float));
        im->n++;
        if (!e->name || !e->sums || !e->weights) {
            st = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
            break;
        }
        e->ncall = a->ncall;
        e->n = a->n;
        for (int64_t j = 0; j < a->n; j++) {
            e->sums[j] = (a->values[j] / (float)a->counts[j]) * (float)a->ncall;
            e->weights[j] = e->sums[j] / (float)a->ncall;
        }
        if (a->ncall > im->chunks) im->chunks = a->ncall;
    }
    if (!st && dataset && !(im->dataset = kld_strdup(dataset)))
        st = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < c.n; i++) {
        free(c.a[i].values);
        free(c.a[i].counts);
    }
    free(c.a);
    if (st) {
        kld_imatrix_free(im);
        return st;
    }
    *out = im;
    return KLD_OK;
}

void kld_session_observe(kld_session *s, kld_matmul_observer fn, void *ctx) {
    s->observe = fn;
    s->observe_ctx = ctx;
}
