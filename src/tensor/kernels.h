/* kernels.h — the per-type row kernels behind the type table (internal to
 * the tensor module; everything else reaches them through kld_type_info).
 * Block layouts are ggml's (ggml-common.h); each block is read byte-wise
 * because blocks inside a file mapping are not aligned. */
#ifndef KLD_TENSOR_KERNELS_H
#define KLD_TENSOR_KERNELS_H

#include "tensor/types.h"

#define KLD_QK_K 256 /* super-block size of the k-quants and iq4_xs */

/* Block sizes in bytes (values per block in the comment). */
enum {
    KLD_BYTES_Q4_0 = 18,   /* 32: d f16, qs[16] */
    KLD_BYTES_Q4_1 = 20,   /* 32: d, m f16, qs[16] */
    KLD_BYTES_Q5_0 = 22,   /* 32: d, qh[4], qs[16] */
    KLD_BYTES_Q5_1 = 24,   /* 32: d, m, qh[4], qs[16] */
    KLD_BYTES_Q8_0 = 34,   /* 32: d, qs[32] int8 */
    KLD_BYTES_Q2_K = 84,   /* 256: scales[16], qs[64], d, dmin */
    KLD_BYTES_Q3_K = 110,  /* 256: hmask[32], qs[64], scales[12], d */
    KLD_BYTES_Q4_K = 144,  /* 256: d, dmin, scales[12], qs[128] */
    KLD_BYTES_Q5_K = 176,  /* 256: d, dmin, scales[12], qh[32], qs[128] */
    KLD_BYTES_Q6_K = 210,  /* 256: ql[128], qh[64], scales[16] int8, d */
    KLD_BYTES_IQ4_NL = 18, /* 32: d, qs[16] */
    KLD_BYTES_IQ4_XS = 136, /* 256: d, scales_h u16, scales_l[4], qs[128] */
    KLD_BYTES_IQ2_XXS = 66, /* 256: d, qs u16[32] (per 32: 4 grid bytes, u32 signs+scale) */
    KLD_BYTES_IQ2_XS = 74,  /* 256: d, qs u16[32] (9-bit grid, 7-bit signs), scales[8] */
    KLD_BYTES_IQ2_S = 82,   /* 256: d, qs[32], signs[32], qh[8], scales[8] */
    KLD_BYTES_IQ3_XXS = 98, /* 256: d, qs[64], u32[8] signs+scale */
    KLD_BYTES_IQ3_S = 110,  /* 256: d, qs[64], qh[8], signs[32], scales[4] */
    KLD_BYTES_IQ1_S = 50,   /* 256: d, qs[32], qh u16[8] */
    KLD_BYTES_IQ1_M = 56,   /* 256: qs[32], qh[16], scales u16[4] (f16 d in their top nibbles) */
    KLD_BYTES_TQ1_0 = 54,   /* 256: qs[48] (5 trits per byte), qh[4] (4 per byte), d */
    KLD_BYTES_TQ2_0 = 66,   /* 256: qs[64] (2 bits per value), d */
    KLD_BYTES_MXFP4 = 17    /* 32: e (E8M0 scale), qs[16] (E2M1 nibbles) */
};

/* The 16 E2M1 values of mxfp4, doubled (ggml's kvalues_mxfp4); the scale
 * is halved to match (kld_e8m0_to_f32_half). */
extern const int8_t kld_mxfp4_values[16];

/* 2^(e-128), the E8M0 scale over two, as ggml's GGML_E8M0_TO_FP32_HALF:
 * e = 0 and 1 are the subnormals 2^-128 and 2^-127; never inf or NaN. */
static inline float kld_e8m0_to_f32_half(uint8_t e) {
    uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* The i-quants store 7 sign bits per 8 values; the eighth makes the count
 * of negative values even (ggml's ksigns_iq2xs table is this function). */
static inline uint8_t kld_iq_signs8(uint32_t seven) {
    seven &= 127;
    return (uint8_t)(seven | (uint32_t)__builtin_parity(seven) << 7);
}

/* The 16 non-linear levels of iq4_nl / iq4_xs (ggml's kvalues_iq4nl). */
extern const int8_t kld_iq4nl_values[16];

/* 6-bit scale and min j (0..7) of a q4_K/q5_K block's packed scales[12]. */
static inline void kld_k4_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* The value of x[0..n) with the largest magnitude (the first one on ties),
 * as ggml's quantizers pick it; its magnitude goes to *amax. */
static inline float kld_signed_absmax(const float *x, int n, float *amax) {
    float max = 0, a = 0;
    for (int i = 0; i < n; i++) {
        float ax = x[i] < 0 ? -x[i] : x[i];
        if (ax > a) {
            a = ax;
            max = x[i];
        }
    }
    *amax = a;
    return max;
}

/* The 16 signed 6-bit scales of a q3_K block (already minus 32). */
void kld_q3k_scales(const uint8_t *packed12, int8_t out[16]);

/* Scalar references (dequant_ref.c, dequant_k_ref.c). */
void kld_dequant_f32_ref(const void *src, float *dst, int64_t n);
void kld_dequant_f16_ref(const void *src, float *dst, int64_t n);
void kld_dequant_bf16_ref(const void *src, float *dst, int64_t n);
void kld_dequant_q4_0_ref(const void *src, float *dst, int64_t n);
void kld_dequant_q4_1_ref(const void *src, float *dst, int64_t n);
void kld_dequant_q5_0_ref(const void *src, float *dst, int64_t n);
void kld_dequant_q5_1_ref(const void *src, float *dst, int64_t n);
void kld_dequant_q8_0_ref(const void *src, float *dst, int64_t n);
void kld_dequant_iq4_nl_ref(const void *src, float *dst, int64_t n);
void kld_dequant_q2_k_ref(const void *src, float *dst, int64_t n);
void kld_dequant_q3_k_ref(const void *src, float *dst, int64_t n);
void kld_dequant_q4_k_ref(const void *src, float *dst, int64_t n);
void kld_dequant_q5_k_ref(const void *src, float *dst, int64_t n);
void kld_dequant_q6_k_ref(const void *src, float *dst, int64_t n);
void kld_dequant_iq4_xs_ref(const void *src, float *dst, int64_t n);
/* i-quants, ternary and mxfp4 (dequant_iq_ref.c, dequant_tq_ref.c). */
void kld_dequant_iq2_xxs_ref(const void *src, float *dst, int64_t n);
void kld_dequant_iq2_xs_ref(const void *src, float *dst, int64_t n);
void kld_dequant_iq2_s_ref(const void *src, float *dst, int64_t n);
void kld_dequant_iq3_xxs_ref(const void *src, float *dst, int64_t n);
void kld_dequant_iq3_s_ref(const void *src, float *dst, int64_t n);
void kld_dequant_iq1_s_ref(const void *src, float *dst, int64_t n);
void kld_dequant_iq1_m_ref(const void *src, float *dst, int64_t n);
void kld_dequant_tq1_0_ref(const void *src, float *dst, int64_t n);
void kld_dequant_tq2_0_ref(const void *src, float *dst, int64_t n);
void kld_dequant_mxfp4_ref(const void *src, float *dst, int64_t n);

/* AVX2 + F16C versions (dequant_avx2.c); same results bit for bit. */
void kld_dequant_f32_avx2(const void *src, float *dst, int64_t n);
void kld_dequant_f16_avx2(const void *src, float *dst, int64_t n);
void kld_dequant_bf16_avx2(const void *src, float *dst, int64_t n);
void kld_dequant_q4_0_avx2(const void *src, float *dst, int64_t n);
void kld_dequant_q4_1_avx2(const void *src, float *dst, int64_t n);
void kld_dequant_q5_0_avx2(const void *src, float *dst, int64_t n);
void kld_dequant_q5_1_avx2(const void *src, float *dst, int64_t n);
void kld_dequant_q8_0_avx2(const void *src, float *dst, int64_t n);
void kld_dequant_iq4_nl_avx2(const void *src, float *dst, int64_t n);
void kld_dequant_q2_k_avx2(const void *src, float *dst, int64_t n);
void kld_dequant_q3_k_avx2(const void *src, float *dst, int64_t n);
void kld_dequant_q4_k_avx2(const void *src, float *dst, int64_t n);
void kld_dequant_q5_k_avx2(const void *src, float *dst, int64_t n);
void kld_dequant_q6_k_avx2(const void *src, float *dst, int64_t n);
void kld_dequant_iq4_xs_avx2(const void *src, float *dst, int64_t n);
/* dequant_iq_avx2.c */
void kld_dequant_iq2_xxs_avx2(const void *src, float *dst, int64_t n);
void kld_dequant_iq2_xs_avx2(const void *src, float *dst, int64_t n);
void kld_dequant_iq2_s_avx2(const void *src, float *dst, int64_t n);
void kld_dequant_iq3_xxs_avx2(const void *src, float *dst, int64_t n);
void kld_dequant_iq3_s_avx2(const void *src, float *dst, int64_t n);
void kld_dequant_iq1_s_avx2(const void *src, float *dst, int64_t n);
void kld_dequant_iq1_m_avx2(const void *src, float *dst, int64_t n);
void kld_dequant_tq1_0_avx2(const void *src, float *dst, int64_t n);
void kld_dequant_tq2_0_avx2(const void *src, float *dst, int64_t n);
void kld_dequant_mxfp4_avx2(const void *src, float *dst, int64_t n);

/* Reference quantizers (quantize_ref.c, quantize_k_ref.c, quantize_iq4_ref.c). */
void kld_quant_f32_ref(const float *src, void *dst, int64_t n);
void kld_quant_f16_ref(const float *src, void *dst, int64_t n);
void kld_quant_bf16_ref(const float *src, void *dst, int64_t n);
void kld_quant_q4_0_ref(const float *src, void *dst, int64_t n);
void kld_quant_q4_1_ref(const float *src, void *dst, int64_t n);
void kld_quant_q5_0_ref(const float *src, void *dst, int64_t n);
void kld_quant_q5_1_ref(const float *src, void *dst, int64_t n);
void kld_quant_q8_0_ref(const float *src, void *dst, int64_t n);
void kld_quant_q2_k_ref(const float *src, void *dst, int64_t n);
void kld_quant_q3_k_ref(const float *src, void *dst, int64_t n);
void kld_quant_q4_k_ref(const float *src, void *dst, int64_t n);
void kld_quant_q5_k_ref(const float *src, void *dst, int64_t n);
void kld_quant_q6_k_ref(const float *src, void *dst, int64_t n);
void kld_quant_iq4_nl_ref(const float *src, void *dst, int64_t n);
void kld_quant_iq4_nl_cpy(const float *src, void *dst, int64_t n); /* ggml_cpy's bytes */
void kld_quant_mxfp4_ref(const float *src, void *dst, int64_t n);
void kld_quant_iq4_xs_ref(const float *src, void *dst, int64_t n);

/* Importance-weighted quantizers (quantize_k_imat.c and beside the _ref
 * twins): one row of n_per_row values, qw[n_per_row]. */
void kld_quant_q4_0_imat(const float *src, void *dst, int64_t n_per_row, const float *qw);
void kld_quant_q4_1_imat(const float *src, void *dst, int64_t n_per_row, const float *qw);
void kld_quant_q5_0_imat(const float *src, void *dst, int64_t n_per_row, const float *qw);
void kld_quant_q5_1_imat(const float *src, void *dst, int64_t n_per_row, const float *qw);
void kld_quant_q2_k_imat(const float *src, void *dst, int64_t n_per_row, const float *qw);
void kld_quant_q3_k_imat(const float *src, void *dst, int64_t n_per_row, const float *qw);
void kld_quant_q4_k_imat(const float *src, void *dst, int64_t n_per_row, const float *qw);
void kld_quant_q5_k_imat(const float *src, void *dst, int64_t n_per_row, const float *qw);
void kld_quant_q6_k_imat(const float *src, void *dst, int64_t n_per_row, const float *qw);
void kld_quant_iq4_nl_imat(const float *src, void *dst, int64_t n_per_row, const float *qw);
void kld_quant_iq4_xs_imat(const float *src, void *dst, int64_t n_per_row, const float *qw);

/* make_qkx2_quants for one 32-value sub-block with squared errors (the q4_K
 * / q5_K search): levels L, -min in *the_min, returns the scale. */
typedef float (*kld_qkx2_32_fn)(int nmax, const float *x, const float *weights, uint8_t *L,
                                float *the_min, float rmin, float rdelta, int nstep);
/* q4_K (nmax 15, rmin -1, nstep 20) / q5_K (31, -0.5, 15) rows with that search. */
void kld_quant_k4_rows(const float *x, void *dst, int64_t n, int nmax, float rmin, int nstep,
                       kld_qkx2_32_fn qkx2);
/* make_qx_quants(16, 32, x, L, qw) — q6_K's sub-block fit (qw NULL: x^2). */
typedef float (*kld_qx16_fn)(const float *x, int8_t *L, const float *qw);
/* q6_K rows (no importance weights) with that fit. */
void kld_quant_q6_k_with(const float *x, void *dst, int64_t n, kld_qx16_fn qx);
/* AVX2 twins (quantize_k_avx2.c), identical bytes. */
void kld_quant_q6_k_avx2(const float *src, void *dst, int64_t n);
void kld_quant_q4_k_avx2(const float *src, void *dst, int64_t n);
void kld_quant_q5_k_avx2(const float *src, void *dst, int64_t n);

/* ggml's make_qx_quants with rmse_type 1: signed levels (stored +nmax) and
 * the scale, weights qw or x^2 when NULL (quantize_k_ref.c). */
float kld_make_qx_quants(int n, int nmax, const float *x, int8_t *L, const float *qw);

/* kld_f16_to_f32, inlined into the row kernels (exact; NaNs made quiet as
 * ggml and VCVTPH2PS do). */
static inline float kld_half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1F;
    uint32_t mant = h & 0x3FF;
    uint32_t u;
    if (exp == 0x1F) {
        u = sign | 0x7F800000 | (mant ? 0x400000 | (mant << 13) : 0);
    } else if (exp == 0) {
        if (mant == 0) {
            u = sign;
        } else { /* subnormal: mant * 2^-24, normalised to a leading 1 at bit 10 */
            int shift = __builtin_clz(mant) - 21;
            u = sign | (uint32_t)(113 - shift) << 23 | ((mant << shift) & 0x3FF) << 13;
        }
    } else {
        u = sign | (exp + 112) << 23 | mant << 13;
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Little-endian half stores for the quantizers. */
static inline void kld_store_u16(void *p, uint16_t v) { memcpy(p, &v, 2); }

/* ggml's make_qkx2_quants (quantize_k_ref.c): asymmetric levels 0..nmax with
 * a scale and a min (returned as -min in *the_min), the best weighted fit of
 * nstep+1 trial scales; the error is squared, or absolute with use_mad. The
 * importance-weighted quantizers use it with their imatrix weights (ggml's
 * make_qkx3_quants is the same computation). */
float kld_make_qkx2_quants(int n, int nmax, const float *x, const float *weights, uint8_t *L,
                           float *the_min, uint8_t *Laux, float rmin, float rdelta, int nstep,
                           bool use_mad);

#endif
