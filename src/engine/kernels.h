/* kernels.h — the engine's inner loops behind one dispatch table: the GEMM
 * microkernel, panel packing, and the exp-based row operations. Each entry
 * has a scalar reference (kernels_ref.c) and an AVX2/FMA twin
 * (kernels_avx2.c) that returns the same bits: both evaluate the same
 * fused multiply-adds in the same order. */
#ifndef KLD_ENGINE_KERNELS_H
#define KLD_ENGINE_KERNELS_H

#include "common/common.h"

#define KLD_MR 6  /* microkernel rows (activations) */
#define KLD_NR 16 /* microkernel columns (one packed panel) */

typedef struct kld_engine_kernels {
    const char *name;
    /* C[m][n] (m < mr <= KLD_MR, n < nr <= KLD_NR) =
     *   fma-chain over k = 0..kc-1 of A[m*lda + k] * B[k*ldb + n],
     * starting from C[m][n] when `load`, else from 0. Only the first nr
     * columns of B are read. */
    void (*ukernel)(int mr, int nr, int64_t kc, const float *A, int64_t lda, const float *B,
                    int64_t ldb, float *C, int64_t ldc, bool load);
    /* panel[k*16 + j] = src[j*ld + k] for j < rows (<= 16), 0 for rows <= j < 16. */
    void (*pack16)(const float *src, int64_t ld, int rows, int64_t kc, float *panel);
    /* In place: x = exp(x - max) / sum (entries of -inf become 0). */
    void (*softmax)(float *x, int64_t n);
    /* In place on gate: g = act(g) * up. */
    void (*silu_mul)(float *g, const float *up, int64_t n);
    void (*gelu_tanh_mul)(float *g, const float *up, int64_t n);
    /* In place: x = cap * tanh(x / cap). */
    void (*softcap)(float *x, int64_t n, float cap);
    /* sum_i exp(x[i] - mx), each exp in float, summed in 8 double lanes. */
    double (*sum_exp)(const float *x, int64_t n, float mx);
} kld_engine_kernels;

/* The set chosen once for this CPU (KLD_KERNELS=ref forces the scalar set). */
const kld_engine_kernels *kld_engine_kernels_get(void);
const kld_engine_kernels *kld_engine_kernels_ref(void);
/* The AVX2 set, or NULL when the CPU lacks AVX2/FMA/F16C. */
const kld_engine_kernels *kld_engine_kernels_avx2(void);
extern const kld_engine_kernels kld_engine_kernels_avx2_table;

/* Scalar exp with the kernels' exact arithmetic (for code outside the table). */
float kld_expf_ref(float x);

#endif
