/* gemm.c — drivers around the microkernel: per-thread panel ranges,
 * k-blocking, dequantization into packed panels (see gemm.h). */
#include "engine/gemm.h"

typedef struct gemm_job {
    const kld_engine_kernels *kr;
    const kld_tensor *W;
    const kld_type_info *ti;
    uint64_t row_bytes;
    int64_t M, N, K;
    const float *A;
    int64_t lda;
    float *C;
    int64_t ldc;
    float *scratch;
    size_t scratch_stride;
} gemm_job;

/* Packs rows [n0, n0+rows) × k-range [kb, kb+kc) of W into one panel. */
static void pack_panel(const gemm_job *j, int64_t n0, int rows, int64_t kb, int64_t kc, float *tmp,
                       float *panel) {
    const uint8_t *base = (const uint8_t *)j->W->data;
    if (j->W->type == KLD_TYPE_F32) {
        const float *src = (const float *)(const void *)(base + (uint64_t)n0 * j->row_bytes) + kb;
        j->kr->pack16(src, j->K, rows, kc, panel);
        return;
    }
    const uint64_t off = (uint64_t)(kb / j->ti->block_size) * (uint64_t)j->ti->type_size;
    for (int r = 0; r < rows; r++)
        j->ti->to_float(base + (uint64_t)(n0 + r) * j->row_bytes + off, tmp + (int64_t)r * KLD_GEMM_KC, kc);
    j->kr->pack16(tmp, KLD_GEMM_KC, rows, kc, panel);
}

static void gemm_task(void *ctx, int ith, int nth) {
    const gemm_job *j = ctx;
    const int64_t n_panels = (j->N + KLD_NR - 1) / KLD_NR;
    int64_t pb, pe;
    kld_split(n_panels, ith, nth, &pb, &pe);
    float *packed = j->scratch + (size_t)ith * j->scratch_stride;
    float *tmp = packed + (size_t)KLD_GEMM_GROUP * KLD_GEMM_KC * KLD_NR;
    for (int64_t g0 = pb; g0 < pe; g0 += KLD_GEMM_GROUP) {
        const int64_t g1 = g0 + KLD_GEMM_GROUP < pe ? g0 + KLD_GEMM_GROUP : pe;
        for (int64_t kb = 0; kb < j->K; kb += KLD_GEMM_KC) {
            const int64_t kc = j->K - kb < KLD_GEMM_KC ? j->K - kb : KLD_GEMM_KC;
            for (int64_t p = g0; p < g1; p++) {
                const int64_t rows = j->N - p * KLD_NR < KLD_NR ? j->N - p * KLD_NR : KLD_NR;
                pack_panel(j, p * KLD_NR, (int)rows, kb, kc, tmp,
                           packed + (p - g0) * KLD_GEMM_KC * KLD_NR);
            }
            for (int64_t m0 = 0; m0 < j->M; m0 += KLD_MR) {
                const int mr = (int)(j->M - m0 < KLD_MR ? j->M - m0 : KLD_MR);
                for (int64_t p = g0; p < g1; p++) {
                    const int64_t nr = j->N - p * KLD_NR < KLD_NR ? j->N - p * KLD_NR : KLD_NR;
                    j->kr->ukernel(mr, (int)nr, kc, j->A + m0 * j->lda + kb, j->lda,
                                   packed + (p - g0) * KLD_GEMM_KC * KLD_NR, KLD_NR,
                                   j->C + m0 * j->ldc + p * KLD_NR, j->ldc, kb > 0);
                }
            }
        }
    }
}

/* Small M: per panel, dequantize its 16 rows whole (sequential reads),
 * then pack and multiply k-block by k-block. */
static void gemm_small_task(void *ctx, int ith, int nth) {
    const gemm_job *j = ctx;
    const int64_t n_panels = (j->N + KLD_NR - 1) / KLD_NR;
    int64_t pb, pe;
    kld_split(n_panels, ith, nth, &pb, &pe);
    float *rows_buf = j->scratch + (size_t)ith * j->scratch_stride;
    /* Rows 16 floats longer than K: a power-of-two row length would put the
     * 16 rows pack16 reads into the same L1 sets. */
    const int64_t ldr = j->K + 16;
    float *panel = rows_buf + (size_t)KLD_NR * (size_t)ldr;
    const uint8_t *base = (const uint8_t *)j->W->data;
    for (int64_t p = pb; p < pe; p++) {
        const int64_t nr = j->N - p * KLD_NR < KLD_NR ? j->N - p * KLD_NR : KLD_NR;
        for (int64_t r = 0; r < nr; r++)
            j->ti->to_float(base + (uint64_t)(p * KLD_NR + r) * j->row_bytes, rows_buf + r * ldr, j->K);
        for (int64_t kb = 0; kb < j->K; kb += KLD_GEMM_KC) {
            const int64_t kc = j->K - kb < KLD_GEMM_KC ? j->K - kb : KLD_GEMM_KC;
            j->kr->pack16(rows_buf + kb, ldr, (int)nr, kc, panel);
            for (int64_t m0 = 0; m0 < j->M; m0 += KLD_MR) {
                const int mr = (int)(j->M - m0 < KLD_MR ? j->M - m0 : KLD_MR);
                j->kr->ukernel(mr, (int)nr, kc, j->A + m0 * j->lda + kb, j->lda, panel, KLD_NR,
                               j->C + m0 * j->ldc + p * KLD_NR, j->ldc, kb > 0);
            }
        }
    }
}

void kld_gemm_weights(kld_pool *pool, const kld_engine_kernels *kr, const kld_tensor *W, int64_t M,
                      const float *A, int64_t lda, float *C, int64_t ldc, float *scratch,
                      size_t scratch_stride) {
    const kld_type_info *ti = kld_type_info_get(W->type);
    gemm_job j = {
        .kr = kr, .W = W, .ti = ti, .M = M, .N = W->ne[1], .K = W->ne[0], .A = A, .lda = lda,
        .C = C, .ldc = ldc, .scratch = scratch, .scratch_stride = scratch_stride,
    };
    j.row_bytes = (uint64_t)(j.K / ti->block_size) * (uint64_t)ti->type_size;
    if (M <= 0) return;
    const bool small = M < KLD_GEMM_SMALL_M && scratch_stride >= kld_gemm_small_scratch_floats(j.K);
    kld_pool_run(pool, small ? gemm_small_task : gemm_task, &j);
}

void kld_gemm_strided(const kld_engine_kernels *kr, int64_t M, int64_t N, int64_t K,
                      const float *A, int64_t lda, const float *B, int64_t ldb, float *C,
                      int64_t ldc) {
    for (int64_t n0 = 0; n0 < N; n0 += KLD_NR) {
        const int nr = (int)(N - n0 < KLD_NR ? N - n0 : KLD_NR);
        for (int64_t m0 = 0; m0 < M; m0 += KLD_MR) {
            const int mr = (int)(M - m0 < KLD_MR ? M - m0 : KLD_MR);
            kr->ukernel(mr, nr, K, A + m0 * lda, lda, B + n0, ldb, C + m0 * ldc + n0, ldc, false);
        }
    }
}
