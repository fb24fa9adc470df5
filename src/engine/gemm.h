/* gemm.h — matrix products of the forward pass (internal). Weight products
 * dequantize W k-block by k-block into packed nr-column float panels (nr of
 * the kernel set: 16 or 32; from the repacked copy when there is one),
 * copy each mr-row tile of activations into a
 * buffer with a cache-friendly stride, and run the microkernel over them;
 * panels are split statically over the pool's threads. Every output element
 * is one fma chain over k in order, so the result depends neither on the
 * thread count, nor on M, nor on the kernel set. */
#ifndef KLD_ENGINE_GEMM_H
#define KLD_ENGINE_GEMM_H

#include "engine/kernels.h"
#include "engine/pool.h"
#include "tensor/tensor.h"

#define KLD_GEMM_KC 256 /* k-block: a multiple of every block size (256 for k-quants) */
#define KLD_GEMM_NC 384 /* output columns dequantized together (a multiple of every nr) */
/* Row stride of the packed activation tile and of the dequantized weight
 * rows: 16 floats more than KC, so that the rows do not share L1 sets. */
#define KLD_GEMM_LDA (KLD_GEMM_KC + 16)


/* Floats of per-thread scratch kld_gemm_weights needs: the packed panels of
 * NC columns, the dequantized rows of one panel, one activation tile (the
 * one-row path's KLD_NR_MAX rows of KLD_GEMV_LD fit in the same space). */
#define KLD_GEMM_SCRATCH_FLOATS                                                          \
    ((size_t)KLD_GEMM_NC * KLD_GEMM_KC + (size_t)KLD_NR_MAX * KLD_GEMM_LDA +           \
     (size_t)KLD_MR_MAX * KLD_GEMM_LDA)
_Static_assert((size_t)KLD_NR_MAX * KLD_GEMV_LD <= KLD_GEMM_SCRATCH_FLOATS,
               "the one-row path's rows fit the scratch");

/* Rows below which each panel is multiplied as soon as it is packed (it
 * stays in L1; decode steps are bound by dequantization and packing). */
#define KLD_GEMM_SMALL_M 24

/* Per-thread scratch for rows of K (kept for the session's sizing: the
 * product no longer holds whole rows, so this is the plain scratch). */
static inline size_t kld_gemm_small_scratch_floats(int64_t K) {
    (void)K;
    return KLD_GEMM_SCRATCH_FLOATS;
}

/* C[m][n] = sum_k A[m*lda + k] · W[n][k] for m < M, n < N = W->ne[1],
 * k < K = W->ne[0]. scratch: thread i uses scratch + i*scratch_stride
 * (at least KLD_GEMM_SCRATCH_FLOATS floats, 32-byte aligned). */
void kld_gemm_weights(kld_pool *pool, const kld_engine_kernels *kr, const kld_tensor *W, int64_t M,
                      const float *A, int64_t lda, float *C, int64_t ldc, float *scratch,
                      size_t scratch_stride);

/* W's copy repacked at load (weight_pack.c): data NULL when there is none. */
typedef struct kld_repacked {
    const uint8_t *data;
    uint64_t panel_bytes; /* one panel of KLD_REPACK_ROWS rows */
} kld_repacked;

/* Bytes of one panel of `type`'s repacked layout for rows of K columns
 * (kernels.h), 0 when the type has none. */
uint64_t kld_repack_panel_bytes(uint32_t type, int64_t K);
/* Writes the rows of t to dst in its layout (kr->repack(t->type) must
 * exist): one panel bytes per KLD_REPACK_ROWS rows, panels split over the
 * threads. */
void kld_repack_matrix(kld_pool *pool, const kld_engine_kernels *kr, const kld_tensor *t, uint8_t *dst);
/* The same, reading W's repacked copy instead of its rows on sets with
 * kernels for the layout (the same bits, one sequential stream). */
void kld_gemm_weights_repacked(kld_pool *pool, const kld_engine_kernels *kr, const kld_tensor *W,
                               kld_repacked rp, int64_t M, const float *A, int64_t lda, float *C,
                               int64_t ldc, float *scratch, size_t scratch_stride);

/* Single-threaded C[m][n] = sum_k A[m*lda + k] · B[k*ldb + n] (m < M,
 * n < N, k < K): B is read in place (attention's K^T and V caches). */
void kld_gemm_strided(const kld_engine_kernels *kr, int64_t M, int64_t N, int64_t K,
                      const float *A, int64_t lda, const float *B, int64_t ldb, float *C,
                      int64_t ldc);

/* The same, continuing each output's fma chain from C's value (C += A·B,
 * one chain over several calls' k ranges in order). */
void kld_gemm_strided_acc(const kld_engine_kernels *kr, int64_t M, int64_t N, int64_t K,
                          const float *A, int64_t lda, const float *B, int64_t ldb, float *C,
                          int64_t ldc);

#endif
