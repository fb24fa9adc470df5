/* gemm.h — matrix products of the forward pass (internal). Weight products
 * dequantize W block-row by block-row into packed 16-column float panels
 * and run the microkernel over them; output tiles are split statically
 * over the pool's threads. Every output element is one fma chain over k in
 * order, so the result depends neither on the thread count nor on M. */
#ifndef KLD_ENGINE_GEMM_H
#define KLD_ENGINE_GEMM_H

#include "engine/kernels.h"
#include "engine/pool.h"
#include "tensor/tensor.h"

#define KLD_GEMM_KC 256 /* k-block: a multiple of every block size (256 for k-quants) */
#define KLD_GEMM_GROUP 8 /* panels dequantized together (128 output columns) */

/* Floats of per-thread scratch kld_gemm_weights needs. */
#define KLD_GEMM_SCRATCH_FLOATS \
    ((size_t)KLD_GEMM_GROUP * KLD_GEMM_KC * KLD_NR + (size_t)KLD_NR * KLD_GEMM_KC)

/* Rows below which the product dequantizes whole weight rows at a time
 * (sequential reads; decode steps are bound by dequantization). */
#define KLD_GEMM_SMALL_M 24

/* Floats of per-thread scratch for the small-M path with rows of K. */
static inline size_t kld_gemm_small_scratch_floats(int64_t K) {
    return (size_t)KLD_NR * (size_t)(K + 16) + (size_t)KLD_NR * KLD_GEMM_KC;
}

/* C[m][n] = sum_k A[m*lda + k] · W[n][k] for m < M, n < N = W->ne[1],
 * k < K = W->ne[0]. scratch: thread i uses scratch + i*scratch_stride
 * (at least KLD_GEMM_SCRATCH_FLOATS floats, 32-byte aligned; with
 * kld_gemm_small_scratch_floats(K) or more, small M takes the row path).
 * Both paths evaluate the same fma chain per element. */
void kld_gemm_weights(kld_pool *pool, const kld_engine_kernels *kr, const kld_tensor *W, int64_t M,
                      const float *A, int64_t lda, float *C, int64_t ldc, float *scratch,
                      size_t scratch_stride);

/* Single-threaded C[m][n] = sum_k A[m*lda + k] · B[k*ldb + n] (m < M,
 * n < N, k < K): B is read in place (attention's K^T and V caches). */
void kld_gemm_strided(const kld_engine_kernels *kr, int64_t M, int64_t N, int64_t K,
                      const float *A, int64_t lda, const float *B, int64_t ldb, float *C,
                      int64_t ldc);

#endif
