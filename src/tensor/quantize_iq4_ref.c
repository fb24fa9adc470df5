/* quantize_iq4_ref.c — iq4_nl, iq4_xs (and mxfp4: a 4-bit table type too) quantizers, byte for byte as
 * llama.cpp's quantize_iq4_nl / quantize_iq4_xs without an importance matrix
 * (quantize_row_iq4_nl_impl with x^2 weights and 7 scale trials each way:
 * what llama-quantize writes; ggml's quantize_row_iq4_nl_ref uses no trials
 * and gives different bytes). */
#include "tensor/kernels.h"

#include <math.h>

#define GROUP_MAX_EPS 1e-15f
#define IQ4_NTRY 7

static inline int nearest_int(float x) {
    float v = x + 12582912.f; /* see quantize_k_ref.c */
    int32_t i;
    memcpy(&i, &v, 4);
    return (i & 0x007FFFFF) - 0x00400000;
}

/* Index of the level nearest to x (levels sorted; ties go up). */
static int best_level(const int8_t *val, float x) {
    if (x <= val[0]) return 0;
    if (x >= val[15]) return 15;
    int lo = 0, hi = 15;
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (x < val[mid]) hi = mid;
        else lo = mid;
    }
    return x - (float)val[hi - 1] < (float)val[hi] - x ? hi - 1 : hi;
}

/* Best scale for one 32-value block (0 for an all-zero block); fills L.
 * Weights are x^2, or with importance weights qw (ggml's imatrix path)
 * qw[j]·sqrt(sigma2 + x^2), sigma2 being twice the mean square of the
 * (super-)block. */
static float iq4_block_scale(const float *xb, uint8_t *L, const float *qw, float sigma2) {
    const int8_t *values = kld_iq4nl_values;
    float weight[32];
    for (int j = 0; j < 32; j++)
        weight[j] = qw ? qw[j] * sqrtf(sigma2 + xb[j] * xb[j]) : xb[j] * xb[j];
    float amax;
    const float max = kld_signed_absmax(xb, 32, &amax);
    if (amax < GROUP_MAX_EPS) {
        memset(L, 0, 32);
        return 0;
    }
    float d = -max / (float)values[0];
    float id = 1 / d;
    float sumqx = 0, sumq2 = 0;
    for (int j = 0; j < 32; j++) {
        int l = best_level(values, id * xb[j]);
        L[j] = (uint8_t)l;
        float q = values[l], w = weight[j];
        sumqx += w * q * xb[j];
        sumq2 += w * q * q;
    }
    d = sumqx / sumq2; /* unguarded, as ggml (zero importance weights give NaN there too) */
    float best = d * sumqx;
    for (int itry = -IQ4_NTRY; itry <= IQ4_NTRY; itry++) {
        id = (float)(itry + values[0]) / max;
        sumqx = sumq2 = 0;
        for (int j = 0; j < 32; j++) {
            int l = best_level(values, id * xb[j]);
            float q = values[l], w = weight[j];
            sumqx += w * q * xb[j];
            sumq2 += w * q * q;
        }
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    return d;
}

static void pack_nibbles(const uint8_t *L, uint8_t *q4, int n) {
    for (int i = 0; i < n / 32; i++) {
        for (int j = 0; j < 16; j++)
            q4[16 * i + j] = (uint8_t)(L[32 * i + j] | L[32 * i + 16 + j] << 4);
    }
}

static float sigma2_of(const float *x, int n) {
    float s = 0;
    for (int j = 0; j < n; j++) s += x[j] * x[j];
    return s * (2.f / (float)n);
}

static void iq4_nl_blocks(const float *x, void *dst, int64_t n, const float *qw) {
    uint8_t *b = dst;
    for (int64_t i = 0; i < n / 32; i++, x += 32, b += KLD_BYTES_IQ4_NL) {
        uint8_t L[32];
        float d = iq4_block_scale(x, L, qw ? qw + 32 * i : NULL, qw ? sigma2_of(x, 32) : 0);
        kld_store_u16(b, kld_f32_to_f16(d));
        /* requantize with the final scale (not its f16 rounding, as ggml) */
        float id = d ? 1 / d : 0;
        for (int j = 0; j < 32; j++) L[j] = (uint8_t)best_level(kld_iq4nl_values, id * x[j]);
        pack_nibbles(L, b + 2, 32);
    }
}

void kld_quant_iq4_nl_ref(const float *x, void *dst, int64_t n) { iq4_nl_blocks(x, dst, n, NULL); }

/* ggml's quantize_row_iq4_nl_ref, the CPU from_float of iq4_nl: what
 * ggml_cpy f32 → iq4_nl writes into a KV cache (quantize_row_iq4_nl_impl
 * with ntry = -1): the largest-magnitude value on the level -127 (d =
 * max / -127, the opposite sign of the trials' start), levels chosen once
 * with that d, then the weighted least-squares scale over those levels;
 * no trials and no requantization. */
void kld_quant_iq4_nl_cpy(const float *x, void *dst, int64_t n) {
    const int8_t *values = kld_iq4nl_values;
    uint8_t *b = dst;
    for (int64_t i = 0; i < n / 32; i++, x += 32, b += KLD_BYTES_IQ4_NL) {
        uint8_t L[32] = {0};
        float amax;
        const float max = kld_signed_absmax(x, 32, &amax);
        float d = 0;
        if (!(amax < GROUP_MAX_EPS)) { /* else ggml leaves d 0 (its levels are unset) */
            const float id = 1 / (max / (float)values[0]);
            float sumqx = 0, sumq2 = 0;
            for (int j = 0; j < 32; j++) {
                const int l = best_level(values, id * x[j]);
                L[j] = (uint8_t)l;
                const float q = values[l], w = x[j] * x[j];
                sumqx += w * q * x[j];
                sumq2 += w * q * q;
            }
            d = sumqx / sumq2;
        }
        kld_store_u16(b, kld_f32_to_f16(d));
        pack_nibbles(L, b + 2, 32);
    }
}

void kld_quant_iq4_nl_imat(const float *x, void *dst, int64_t n_per_row, const float *qw) {
    iq4_nl_blocks(x, dst, n_per_row, qw);
}

static void iq4_xs_blocks(const float *x, void *dst, int64_t n, const float *qw) {
    uint8_t *b = dst;
    for (int64_t i = 0; i < n / KLD_QK_K; i++, x += KLD_QK_K, b += KLD_BYTES_IQ4_XS) {
        uint8_t L[KLD_QK_K];
        float scales[8];
        float max_scale = 0, amax_scale = 0;
        const float *qwb = qw ? qw + i * KLD_QK_K : NULL;
        const float sigma2 = qw ? sigma2_of(x, KLD_QK_K) : 0;
        for (int ib = 0; ib < 8; ib++) {
            scales[ib] = iq4_block_scale(x + 32 * ib, L + 32 * ib, qwb ? qwb + 32 * ib : NULL, sigma2);
            if (fabsf(scales[ib]) > amax_scale) {
                amax_scale = fabsf(scales[ib]);
                max_scale = scales[ib];
            }
        }
        /* 6-bit signed block scales relative to d; levels redone per block */
        float d = -max_scale / 32;
        kld_store_u16(b, kld_f32_to_f16(d));
        float id = d ? 1 / d : 0.f;
        uint16_t scales_h = 0;
        uint8_t *scales_l = b + 4;
        memset(scales_l, 0, 4);
        for (int ib = 0; ib < 8; ib++) {
            int l = nearest_int(id * scales[ib]);
            l = l < -32 ? -32 : l > 31 ? 31 : l;
            float dl = d * (float)l;
            float idl = dl ? 1 / dl : 0.f;
            for (int j = 0; j < 32; j++)
                L[32 * ib + j] = (uint8_t)best_level(kld_iq4nl_values, idl * x[32 * ib + j]);
            l += 32;
            scales_l[ib / 2] = (uint8_t)(scales_l[ib / 2] | (l & 0xF) << 4 * (ib % 2));
            scales_h = (uint16_t)(scales_h | (l >> 4) << 2 * ib);
        }
        kld_store_u16(b + 2, scales_h);
        pack_nibbles(L, b + 8, KLD_QK_K);
    }
}

void kld_quant_iq4_xs_ref(const float *x, void *dst, int64_t n) { iq4_xs_blocks(x, dst, n, NULL); }

void kld_quant_iq4_xs_imat(const float *x, void *dst, int64_t n_per_row, const float *qw) {
    iq4_xs_blocks(x, dst, n_per_row, qw);
}

/* ggml's quantize_row_mxfp4_ref (what llama-quantize writes without an
 * imatrix, and ggml_cpy): the E8M0 exponent floor(log2(amax)) − 2 + 127
 * (0 for an all-zero block), each value the nearest E2M1 level times half
 * that power of two (first index on ties). */
void kld_quant_mxfp4_ref(const float *x, void *dst, int64_t n) {
    uint8_t *b = dst;
    for (int64_t i = 0; i < n / 32; i++, x += 32, b += KLD_BYTES_MXFP4) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++)
            if (amax < fabsf(x[j])) amax = fabsf(x[j]);
        const uint8_t e = amax > 0.0f ? (uint8_t)(floorf(log2f(amax)) - 2 + 127) : 0;
        const float d = kld_e8m0_to_f32_half(e);
        b[0] = e;
        for (int j = 0; j < 16; j++) {
            uint8_t q[2];
            for (int h = 0; h < 2; h++) {
                const float v = x[j + 16 * h];
                int best = 0;
                float best_err = fabsf((float)kld_mxfp4_values[0] * d - v);
                for (int l = 1; l < 16; l++) {
                    const float err = fabsf((float)kld_mxfp4_values[l] * d - v);
                    if (err < best_err) {
                        best = l;
                        best_err = err;
                    }
                }
                q[h] = (uint8_t)best;
            }
            b[1 + j] = (uint8_t)(q[0] | q[1] << 4);
        }
    }
}
