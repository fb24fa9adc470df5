/* arm_lcpp.c — a llama.cpp --kl-divergence-base file as an arm: its chunks
 * are the plan (first token replaced by BOS as llama-perplexity does, rows
 * n_ctx/2 .. n_ctx-2), and each chunk's rows are its decoded records. */
#include "eval/arm.h"

#include "store/lcpp_base.h"

#include <stdlib.h>

typedef struct lcpp_arm {
    kld_lcpp_base *b;
    const kld_lcpp_base_info *info;
    size_t wi;
    float *logp, *min_lp;
    uint16_t *codes;
} lcpp_arm;

static kld_status prepare(kld_arm *a, kld_pool *pool, int64_t max_len, int64_t chunk, int64_t passes,
                          kld_error *err) {
    (void)pool, (void)max_len, (void)passes;
    lcpp_arm *u = a->impl;
    size_t cells = (size_t)chunk * (size_t)u->info->n_vocab;
    u->logp = malloc(cells * sizeof *u->logp);
    u->codes = malloc(cells * sizeof *u->codes);
    u->min_lp = malloc((size_t)chunk * sizeof *u->min_lp);
    if (!u->logp || !u->codes || !u->min_lp)
        return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory for %lld decoded records", a->path,
                        (long long)chunk);
    return KLD_OK;
}

static kld_status begin(kld_arm *a, const kld_window *w, size_t wi, kld_error *err) {
    lcpp_arm *u = a->impl;
    if ((int64_t)wi >= u->info->n_chunk || w->len != u->info->n_ctx ||
        memcmp(w->tokens, kld_lcpp_base_tokens(u->b, (int64_t)wi), (size_t)w->len * sizeof(int32_t)))
        return kld_fail(err, KLD_ERR_MISMATCH, "%s: chunk %zu differs from the tokens the other arm reads",
                        a->path, wi);
    u->wi = wi;
    return KLD_OK;
}

static kld_status eval(kld_arm *a, const int32_t *tokens, int64_t c0, int64_t n, int64_t r0,
                       int64_t r1, kld_rows *rows, kld_error *err) {
    (void)tokens, (void)c0;
    lcpp_arm *u = a->impl;
    a->tokens += (uint64_t)n;
    *rows = (kld_rows){.kind = KLD_ROWS_LOGPROB, .row0 = r0, .n = r1 - r0, .n_vocab = a->n_vocab,
                       .logp = u->logp, .codes = u->codes};
    if (r1 <= r0) return KLD_OK;
    return kld_lcpp_base_read(u->b, (int64_t)u->wi, r0 - u->info->n_ctx / 2, r1 - r0, u->logp,
                              u->codes, u->min_lp, err);
}

static void lcpp_free(kld_arm *a) {
    lcpp_arm *u = a->impl;
    if (!u) return;
    kld_lcpp_base_close(u->b);
    free(u->logp);
    free(u->codes);
    free(u->min_lp);
    free(u);
}

static const kld_arm_ops lcpp_ops = {prepare, begin, eval, lcpp_free};

kld_status kld_arm_open_lcpp_base(const char *path, int32_t n_vocab_expected, int32_t bos,
                                  kld_arm **out, kld_error *err) {
    *out = NULL;
    kld_arm *a = kld_arm_new(&lcpp_ops, "llamacpp-base", path, sizeof(lcpp_arm), true);
    if (!a) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    lcpp_arm *u = a->impl;
    kld_plan *pl = a->plan;
    kld_status st = kld_lcpp_base_open(path, n_vocab_expected, &u->b, err);
    if (st) {
        kld_arm_free(a);
        return st;
    }
    u->info = kld_lcpp_base_info_of(u->b);
    a->n_vocab = u->info->n_vocab;
    a->desc = json_pack("{s:s,s:s,s:i,s:i,s:i}", "kind", "llamacpp-base", "path", path, "n_ctx",
                        (int)u->info->n_ctx, "n_vocab", (int)u->info->n_vocab, "n_chunk",
                        (int)u->info->n_chunk);
    pl->chunking = KLD_CHUNKING_LLAMACPP;
    snprintf(pl->note, sizeof pl->note,
             "%s: %d chunks of %d tokens, first token replaced by BOS, rows %d..%d scored", path,
             (int)u->info->n_chunk, (int)u->info->n_ctx, (int)(u->info->n_ctx / 2),
             (int)(u->info->n_ctx - 2));
    int32_t n_ctx = u->info->n_ctx;
    for (int64_t c = 0; c < u->info->n_chunk && !st; c++) {
        kld_window w = {kld_lcpp_base_tokens(u->b, c), n_ctx, n_ctx / 2, n_ctx - 1, bos, -1, true, NULL, 0};
        st = kld_plan_push(pl, &w, err);
    }
    if (st) {
        kld_arm_free(a);
        return st;
    }
    *out = a;
    return KLD_OK;
}
