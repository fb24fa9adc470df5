/* attention.c — causal (optionally sliding-window) softmax attention for
 * one chunk, as blocked matrix products: per (head, block of query rows),
 * S = Q·K^T over the visible key range read in place from the transposed
 * K cache, scale / soft-cap / mask, exact float32 softmax, O = P·V.
 * The key range starts at a multiple of 16, so the softmax's lane sums see
 * every key in the same lane whatever the chunking; masked keys contribute
 * exact zeros. Rows therefore do not depend on chunk size or threads. */
#include "engine/gemm.h"
#include "engine/internal.h"

#include <math.h>

typedef struct attn_job {
    kld_session *s;
    int64_t il, n, pos;
    int64_t n_qblocks;
    bool swa;
} attn_job;

static void attn_task(void *ctx, int ith, int nth) {
    const attn_job *j = ctx;
    kld_session *s = j->s;
    const kld_hparams *hp = &s->model->hp;
    const kld_engine_kernels *kr = s->kr;
    const int64_t hd = hp->head_dim, hdv = hp->head_dim_v, nkv = hp->n_head_kv;
    const int64_t group = hp->n_head / nkv;
    const int64_t ldo = hp->n_head * hdv;
    const int64_t window = hp->sliding_window;
    const float scale = (float)hp->attn_scale, cap = (float)hp->attn_softcap;
    float *S = s->scratch + (size_t)ith * s->scratch_stride;
    const float *kt_layer = s->k_cache + (size_t)j->il * (size_t)(nkv * hd * s->ldk);
    const float *v_layer = s->v_cache + (size_t)j->il * (size_t)(nkv * s->n_ctx * hdv);
    const int64_t n_tasks = hp->n_head * j->n_qblocks;
    /* Round-robin over (head, query block): causal blocks grow with the
     * row index, so interleaving balances the threads. */
    for (int64_t t = ith; t < n_tasks; t += nth) {
        const int64_t h = t % hp->n_head, qb = t / hp->n_head;
        const int64_t kvh = h / group;
        const int64_t i0 = qb * KLD_ATTN_QB;
        const int64_t i1 = i0 + KLD_ATTN_QB < j->n ? i0 + KLD_ATTN_QB : j->n;
        const int64_t rows = i1 - i0;
        const int64_t p_first = j->pos + i0, hi = j->pos + i1;
        int64_t lo = 0;
        if (j->swa && p_first - window + 1 > 0) lo = p_first - window + 1;
        lo &= ~(int64_t)15;
        const int64_t L = hi - lo;
        const float *q = s->qkv + i0 * s->ld_qkv + h * hd;
        const float *kt = kt_layer + (size_t)(kvh * hd * s->ldk) + lo;
        kld_gemm_strided(kr, rows, L, hd, q, s->ld_qkv, kt, s->ldk, S, s->ldk);
        for (int64_t r = 0; r < rows; r++) {
            float *row = S + r * s->ldk;
            const int64_t p = j->pos + i0 + r;
            for (int64_t c = 0; c < L; c++) row[c] *= scale;
            if (cap > 0) kr->softcap(row, L, cap);
            for (int64_t c = 0; c < L; c++) {
                const int64_t key = lo + c;
                if (key > p || (j->swa && p - key >= window)) row[c] = -INFINITY;
            }
            kr->softmax(row, L);
        }
        const float *v = v_layer + (size_t)(kvh * s->n_ctx * hdv) + lo * hdv;
        kld_gemm_strided(kr, rows, hdv, L, S, s->ldk, v, hdv, s->attn + i0 * ldo + h * hdv, ldo);
    }
}

void kld_attention(kld_session *s, int64_t il, int64_t n, int64_t pos) {
    attn_job j = {
        .s = s, .il = il, .n = n, .pos = pos,
        .n_qblocks = (n + KLD_ATTN_QB - 1) / KLD_ATTN_QB,
        .swa = kld_hparams_layer_swa(&s->model->hp, il),
    };
    kld_pool_run(s->pool, attn_task, &j);
}
