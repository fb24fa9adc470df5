/* arm_rows.c — the row facts that more than one arm or writer needs, in one
 * place so that they agree bit for bit: a dense row's logsumexp and argmax,
 * its top-k ids in a teacher dump's order, and a tokenizer's fingerprint. */
#include "eval/arm.h"

#include "eval/stats.h"
#include "tensor/types.h"

#include <math.h>
#include <openssl/evp.h>
#include <stdlib.h>

void kld_row_lse_argmax(const float *row, int32_t n, double *lse, int32_t *argmax) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (row[i] > row[best]) best = i;
    *argmax = best;
    *lse = isfinite(row[best]) ? kld_row_logsumexp(row, n, row[best]) : (double)row[best];
}

kld_status kld_row_as_f16(const float *row, int32_t n, double lse, int32_t argmax,
                          const int32_t *idx, int32_t k, float *val, double *lse_stored,
                          kld_error *err) {
    double mx = row[argmax], kept = 0.0, stored = 0.0;
    for (int32_t j = 0; j < k; j++) {
        double d = (double)row[idx[j]] - mx;
        uint16_t h = kld_f32_to_f16((float)d);
        if ((h & 0x7C00) == 0x7C00)
            return kld_fail(err, KLD_ERR_UNSUPPORTED,
                            "logit %g of id %d lies %g below the row's maximum: outside float16's "
                            "range (use float32 logits)", (double)row[idx[j]], (int)idx[j], -d);
        val[j] = kld_f16_to_f32(h);
        kept += exp(d);
        stored += exp((double)val[j]);
    }
    /* the ids not kept, from the full sum (exp(lse - mx) = sum_i exp(row_i - mx)) */
    double tail = k < n ? exp(lse - mx) - kept : 0.0;
    if (tail < 0.0) tail = 0.0;
    *lse_stored = log(stored + tail);
    return KLD_OK;
}

typedef struct ranked {
    float v;
    int32_t i;
} ranked;

static int by_rank(const void *pa, const void *pb) {
    const ranked *a = pa, *b = pb;
    if (a->v != b->v) return a->v > b->v ? -1 : 1;
    return (a->i > b->i) - (a->i < b->i);
}

kld_status kld_row_topk(const float *row, int32_t n, int32_t k, int32_t *idx, kld_error *err) {
    /* One scan keeping candidates in a buffer of 8k that is cut back to its
     * best k when full; anything below the k-th best of a cut can never
     * enter the top k. */
    size_t cap = (size_t)(8 * (int64_t)k < n ? 8 * (int64_t)k : n);
    ranked *r = malloc(cap * sizeof *r);
    if (!r) return kld_fail(err, KLD_ERR_NOMEM, "out of memory for a top-%d selection", (int)k);
    size_t m = 0;
    float floor_v = -INFINITY;
    bool cut = false;
    for (int32_t i = 0; i < n; i++) {
        if (cut && row[i] < floor_v) continue;
        r[m++] = (ranked){row[i], i};
        if (m == cap && i + 1 < n) {
            qsort(r, m, sizeof *r, by_rank);
            m = (size_t)k;
            floor_v = r[m - 1].v;
            cut = true;
        }
    }
    qsort(r, m, sizeof *r, by_rank);
    for (int32_t j = 0; j < k; j++) idx[j] = r[j].i;
    free(r);
    return KLD_OK;
}

void kld_tok_fingerprint(const kld_tokenizer *t, char hex[65]) {
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    unsigned char d[32];
    unsigned int dl = 0;
    int32_t n = kld_tok_n_vocab(t), specials[3] = {n, kld_tok_bos(t), kld_tok_eos(t)};
    EVP_DigestInit_ex(c, EVP_sha256(), NULL);
    EVP_DigestUpdate(c, "kldeval-tokenizer-1", 19);
    EVP_DigestUpdate(c, specials, sizeof specials);
    for (int32_t i = 0; i < n; i++) {
        size_t len = 0;
        const char *p = kld_tok_piece(t, i, &len);
        uint32_t head[2] = {p ? (uint32_t)len : UINT32_MAX, (uint32_t)kld_tok_type(t, i)};
        EVP_DigestUpdate(c, head, sizeof head);
        if (p && len) EVP_DigestUpdate(c, p, len);
    }
    EVP_DigestFinal_ex(c, d, &dl);
    EVP_MD_CTX_free(c);
    for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
}
