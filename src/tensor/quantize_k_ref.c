/* quantize_k_ref.c — reference quantizers for q2_K, q3_K, q4_K, q5_K and
 * q6_K, reproducing llama.cpp's quantize_row_*_ref (the path llama-quantize
 * takes without an importance matrix) byte for byte. The scale searches
 * below follow ggml's algorithms step by step; every float expression keeps
 * ggml's evaluation order, since a different order rounds differently and
 * changes chosen levels. */
#include "tensor/kernels.h"

#include <math.h>

#define GROUP_MAX_EPS 1e-15f

static inline int imin(int a, int b) { return a < b ? a : b; }
static inline int imax(int a, int b) { return a > b ? a : b; }

/* Round to nearest, ties to even, for |x| < 2^22: adding 1.5*2^23 leaves the
 * rounded integer in the low mantissa bits (ggml's nearest_int). */
static inline int nearest_int(float x) {
    float v = x + 12582912.f;
    int32_t i;
    memcpy(&i, &v, 4);
    return (i & 0x007FFFFF) - 0x00400000;
}

/* Signed levels -nmax..nmax-1 (stored +nmax) for a symmetric scale, refined
 * by a weighted least-squares fit over 18 nearby trial scales. Weights are
 * qw, or x^2 when qw is NULL (ggml's rmse_type 1). */
static float make_qx_quants(int n, int nmax, const float *x, int8_t *L, const float *qw) {
    float amax;
    const float max = kld_signed_absmax(x, n, &amax);
    if (amax < GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = imax(-nmax, imin(nmax - 1, nearest_int(iscale * x[i])));
        L[i] = (int8_t)(l + nmax);
        float w = qw ? qw[i] : x[i] * x[i];
        sumlx += w * x[i] * (float)l;
        suml2 += w * (float)l * (float)l;
    }
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        iscale = -((float)nmax + 0.1f * (float)is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            int l = imax(-nmax, imin(nmax - 1, nearest_int(iscale * x[i])));
            float w = qw ? qw[i] : x[i] * x[i];
            sumlx += w * x[i] * (float)l;
            suml2 += w * (float)l * (float)l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++) {
                int l = nearest_int(iscale * x[i]);
                L[i] = (int8_t)(nmax + imax(-nmax, imin(nmax - 1, l)));
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* q3_K's sub-block fit: symmetric levels, then coordinate descent on single
 * levels (up to 5 sweeps) with x^2 weights. */
static float make_q3_quants(int n, int nmax, const float *x, int8_t *L) {
    float amax;
    const float max = kld_signed_absmax(x, n, &amax);
    if (amax < GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = imax(-nmax, imin(nmax - 1, nearest_int(iscale * x[i])));
        L[i] = (int8_t)l;
        float w = x[i] * x[i];
        sumlx += w * x[i] * (float)l;
        suml2 += w * (float)l * (float)l;
    }
    for (int itry = 0; itry < 5; itry++) {
        int n_changed = 0;
        for (int i = 0; i < n; i++) {
            float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * (float)L[i];
            if (slx > 0) {
                float sl2 = suml2 - w * (float)L[i] * (float)L[i];
                int new_l = imax(-nmax, imin(nmax - 1, nearest_int(x[i] * sl2 / slx)));
                if (new_l != L[i]) {
                    slx += w * x[i] * (float)new_l;
                    sl2 += w * (float)new_l * (float)new_l;
                    if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (int8_t)new_l;
                        sumlx = slx;
                        suml2 = sl2;
                        n_changed++;
                    }
                }
            }
        }
        if (!n_changed) break;
    }
    for (int i = 0; i < n; i++) L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* Asymmetric levels 0..nmax with scale and min (returned as -min in
 * *the_min): start from the min/max range, then try nstep+1 scales and keep
 * the weighted least-squares (scale, min) with the smallest error. */
float kld_make_qkx2_quants(int n, int nmax, const float *x, const float *weights, uint8_t *L,
                           float *the_min, uint8_t *Laux, float rmin, float rdelta, int nstep,
                           bool use_mad) {
    float min = x[0], max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        memset(L, 0, (size_t)n);
        *the_min = -min;
        return 0.f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; i++) {
        int l = nearest_int(iscale * (x[i] - min));
        L[i] = (uint8_t)imax(0, imin(nmax, l));
        float diff = scale * (float)L[i] + min - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        best_error += weights[i] * diff;
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * (float)is + (float)nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            int l = imax(0, imin(nmax, nearest_int(iscale * (x[i] - min))));
            Laux[i] = (uint8_t)l;
            float w = weights[i];
            sum_l += w * (float)l;
            sum_l2 += w * (float)l * (float)l;
            sum_xl += w * (float)l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < n; i++) {
                float diff = this_scale * (float)Laux[i] + this_min - x[i];
                diff = use_mad ? fabsf(diff) : diff * diff;
                cur_error += weights[i] * diff;
            }
            if (cur_error < best_error) {
                memcpy(L, Laux, (size_t)n);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

/* Packs 256 2-bit levels: byte l of each 32-byte run holds values l, l+32,
 * l+64, l+96 of its 128-value half at bits 0, 2, 4, 6 (q2_K and q3_K). */
static void pack_2bit(const uint8_t *L, uint8_t *qs) {
    for (int j = 0; j < KLD_QK_K; j += 128) {
        for (int l = 0; l < 32; l++)
            qs[j / 4 + l] = (uint8_t)(L[j + l] | L[j + l + 32] << 2 | L[j + l + 64] << 4 |
                                      L[j + l + 96] << 6);
    }
}

void kld_quant_q2_k_ref(const float *x, void *dst, int64_t n) {
    const float q4scale = 15.f;
    uint8_t *b = dst;
    for (int64_t i = 0; i < n / KLD_QK_K; i++, x += KLD_QK_K, b += KLD_BYTES_Q2_K) {
        uint8_t L[KLD_QK_K], Laux[16], *scales_out = b;
        float weights[16], mins[16], scales[16];
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < 16; j++) {
            for (int l = 0; l < 16; l++) weights[l] = fabsf(x[16 * j + l]);
            scales[j] = kld_make_qkx2_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux,
                                         -0.5f, 0.1f, 15, true);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        if (max_scale > 0) {
            float iscale = q4scale / max_scale;
            for (int j = 0; j < 16; j++) scales_out[j] = (uint8_t)nearest_int(iscale * scales[j]);
            kld_store_u16(b + 80, kld_f32_to_f16(max_scale / q4scale));
        } else {
            memset(scales_out, 0, 16);
            kld_store_u16(b + 80, kld_f32_to_f16(0.f));
        }
        if (max_min > 0) {
            float iscale = q4scale / max_min;
            for (int j = 0; j < 16; j++)
                scales_out[j] = (uint8_t)(scales_out[j] | nearest_int(iscale * mins[j]) << 4);
            kld_store_u16(b + 82, kld_f32_to_f16(max_min / q4scale));
        } else {
            kld_store_u16(b + 82, kld_f32_to_f16(0.f));
        }
        const float d_all = kld_half_to_float(kld_load_u16(b + 80));
        const float dmin_all = kld_half_to_float(kld_load_u16(b + 82));
        for (int j = 0; j < 16; j++) {
            const float d = d_all * (float)(scales_out[j] & 0xF);
            if (!d) continue;
            const float dm = dmin_all * (float)(scales_out[j] >> 4);
            for (int ii = 0; ii < 16; ii++) {
                int l = nearest_int((x[16 * j + ii] + dm) / d);
                L[16 * j + ii] = (uint8_t)imax(0, imin(3, l));
            }
        }
        pack_2bit(L, b + 16);
    }
}

void kld_quant_q3_k_ref(const float *x, void *dst, int64_t n) {
    uint8_t *b = dst;
    for (int64_t i = 0; i < n / KLD_QK_K; i++, x += KLD_QK_K, b += KLD_BYTES_Q3_K) {
        int8_t L[KLD_QK_K];
        float scales[16];
        uint8_t *hmask = b, *sc_out = b + 96;
        for (int j = 0; j < 16; j++) scales[j] = make_q3_quants(16, 4, x + 16 * j, L + 16 * j);
        float amax;
        const float max_scale = kld_signed_absmax(scales, 16, &amax);
        memset(sc_out, 0, 12);
        if (max_scale) {
            float iscale = -32.f / max_scale;
            for (int j = 0; j < 16; j++) {
                int8_t l8 = (int8_t)nearest_int(iscale * scales[j]);
                int l = imax(-32, imin(31, l8)) + 32;
                if (j < 8) sc_out[j] = (uint8_t)(l & 0xF);
                else sc_out[j - 8] = (uint8_t)(sc_out[j - 8] | (l & 0xF) << 4);
                l >>= 4;
                sc_out[j % 4 + 8] = (uint8_t)(sc_out[j % 4 + 8] | l << (2 * (j / 4)));
            }
            kld_store_u16(b + 108, kld_f32_to_f16(1 / iscale));
        } else {
            kld_store_u16(b + 108, kld_f32_to_f16(0.f));
        }
        int8_t sc[16];
        kld_q3k_scales(sc_out, sc);
        const float d_all = kld_half_to_float(kld_load_u16(b + 108));
        for (int j = 0; j < 16; j++) {
            const float d = d_all * (float)sc[j];
            if (!d) continue;
            for (int ii = 0; ii < 16; ii++) {
                int l = nearest_int(x[16 * j + ii] / d);
                L[16 * j + ii] = (int8_t)(imax(-4, imin(3, l)) + 4);
            }
        }
        /* high bit of value j goes to bit j/32 of hmask[j%32] */
        memset(hmask, 0, 32);
        uint8_t U[KLD_QK_K];
        for (int j = 0; j < KLD_QK_K; j++) {
            U[j] = (uint8_t)L[j];
            if (U[j] > 3) {
                hmask[j % 32] = (uint8_t)(hmask[j % 32] | 1u << (j / 32));
                U[j] = (uint8_t)(U[j] - 4);
            }
        }
        pack_2bit(U, b + 32);
    }
}

/* Shared by q4_K and q5_K: 8 sub-blocks of 32 with 6-bit scales and mins
 * (kld_k4_scale_min layout); fills levels L (0..nmax) and the header. */
static float qkx2_32_ref(int nmax, const float *x, const float *weights, uint8_t *L,
                         float *the_min, float rmin, float rdelta, int nstep) {
    uint8_t Laux[32];
    return kld_make_qkx2_quants(32, nmax, x, weights, L, the_min, Laux, rmin, rdelta, nstep, false);
}

static void quant_k4_block(const float *x, uint8_t *b, int nmax, float rmin, int nstep,
                           uint8_t *L, kld_qkx2_32_fn qkx2) {
    float weights[32], mins[8], scales[8];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; j++) {
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++) sum_x2 += x[32 * j + l] * x[32 * j + l];
        float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++) weights[l] = av_x + fabsf(x[32 * j + l]);
        scales[j] = qkx2(nmax, x + 32 * j, weights, L + 32 * j, &mins[j], rmin, 0.1f, nstep);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    uint8_t *s = b + 4;
    for (int j = 0; j < 8; j++) {
        uint8_t ls = (uint8_t)nearest_int(inv_scale * scales[j]);
        uint8_t lm = (uint8_t)nearest_int(inv_min * mins[j]);
        ls = ls < 63 ? ls : 63;
        lm = lm < 63 ? lm : 63;
        if (j < 4) {
            s[j] = ls;
            s[j + 4] = lm;
        } else {
            s[j + 4] = (uint8_t)((ls & 0xF) | (lm & 0xF) << 4);
            s[j - 4] = (uint8_t)(s[j - 4] | (ls >> 4) << 6);
            s[j] = (uint8_t)(s[j] | (lm >> 4) << 6);
        }
    }
    kld_store_u16(b, kld_f32_to_f16(max_scale / 63.f));
    kld_store_u16(b + 2, kld_f32_to_f16(max_min / 63.f));
    const float d_all = kld_half_to_float(kld_load_u16(b));
    const float dmin_all = kld_half_to_float(kld_load_u16(b + 2));
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        kld_k4_scale_min(j, s, &sc, &m);
        const float d = d_all * (float)sc;
        if (!d) continue;
        const float dm = dmin_all * (float)m;
        for (int ii = 0; ii < 32; ii++) {
            int l = nearest_int((x[32 * j + ii] + dm) / d);
            L[32 * j + ii] = (uint8_t)imax(0, imin(nmax, l));
        }
    }
}

/* q4_K (nmax 15) and q5_K (nmax 31) rows with a given sub-block search. */
void kld_quant_k4_rows(const float *x, void *dst, int64_t n, int nmax, float rmin, int nstep,
                       kld_qkx2_32_fn qkx2) {
    uint8_t *b = dst;
    const int bytes = nmax == 15 ? KLD_BYTES_Q4_K : KLD_BYTES_Q5_K;
    for (int64_t i = 0; i < n / KLD_QK_K; i++, x += KLD_QK_K, b += bytes) {
        uint8_t L[KLD_QK_K];
        quant_k4_block(x, b, nmax, rmin, nstep, L, qkx2);
        if (nmax == 15) {
            uint8_t *q = b + 16;
            for (int j = 0; j < KLD_QK_K; j += 64, q += 32) {
                for (int l = 0; l < 32; l++) q[l] = (uint8_t)(L[j + l] | L[j + l + 32] << 4);
            }
            continue;
        }
        uint8_t *qh = b + 16, *ql = b + 48;
        memset(qh, 0, 32);
        uint8_t m1 = 1, m2 = 2;
        for (int j = 0; j < KLD_QK_K; j += 64, ql += 32) {
            for (int l = 0; l < 32; l++) {
                int l1 = L[j + l], l2 = L[j + l + 32];
                if (l1 > 15) { l1 -= 16; qh[l] |= m1; }
                if (l2 > 15) { l2 -= 16; qh[l] |= m2; }
                ql[l] = (uint8_t)(l1 | l2 << 4);
            }
            m1 = (uint8_t)(m1 << 2);
            m2 = (uint8_t)(m2 << 2);
        }
    }
}

void kld_quant_q4_k_ref(const float *x, void *dst, int64_t n) {
    kld_quant_k4_rows(x, dst, n, 15, -1.f, 20, qkx2_32_ref);
}

void kld_quant_q5_k_ref(const float *x, void *dst, int64_t n) {
    kld_quant_k4_rows(x, dst, n, 31, -0.5f, 15, qkx2_32_ref);
}

float kld_make_qx_quants(int n, int nmax, const float *x, int8_t *L, const float *qw) {
    return make_qx_quants(n, nmax, x, L, qw);
}

/* q6_K blocks of n values; qw (n importance weights, or NULL for x^2) only
 * changes the sub-block scale fits, as in ggml's quantize_row_q6_K_impl. */
static float qx16_ref(const float *x, int8_t *L, const float *qw) {
    return make_qx_quants(16, 32, x, L, qw);
}

static void q6k_blocks(const float *x, void *dst, int64_t n, const float *qw, kld_qx16_fn qx) {
    uint8_t *b = dst;
    for (int64_t i = 0; i < n / KLD_QK_K; i++, x += KLD_QK_K, b += KLD_BYTES_Q6_K) {
        int8_t L[KLD_QK_K];
        float scales[16];
        float max_scale = 0, max_abs_scale = 0;
        const float *qwb = qw ? qw + i * KLD_QK_K : NULL;
        for (int ib = 0; ib < 16; ib++) {
            const float scale = qx(x + 16 * ib, L + 16 * ib, qwb ? qwb + 16 * ib : NULL);
            scales[ib] = scale;
            if (fabsf(scale) > max_abs_scale) {
                max_abs_scale = fabsf(scale);
                max_scale = scale;
            }
        }
        if (max_abs_scale < GROUP_MAX_EPS) {
            memset(b, 0, KLD_BYTES_Q6_K); /* d = +0 */
            continue;
        }
        int8_t *sc = (int8_t *)(b + 192);
        float iscale = -128.f / max_scale;
        kld_store_u16(b + 208, kld_f32_to_f16(1 / iscale));
        for (int ib = 0; ib < 16; ib++) sc[ib] = (int8_t)imin(127, nearest_int(iscale * scales[ib]));
        const float d_all = kld_half_to_float(kld_load_u16(b + 208));
        for (int j = 0; j < 16; j++) {
            const float d = d_all * (float)sc[j];
            if (!d) continue;
            for (int ii = 0; ii < 16; ii++) {
                int l = nearest_int(x[16 * j + ii] / d);
                L[16 * j + ii] = (int8_t)(imax(-32, imin(31, l)) + 32);
            }
        }
        uint8_t *ql = b, *qh = b + 128;
        for (int j = 0; j < KLD_QK_K; j += 128, ql += 64, qh += 32) {
            for (int l = 0; l < 32; l++) {
                const int v1 = L[j + l], v2 = L[j + l + 32], v3 = L[j + l + 64], v4 = L[j + l + 96];
                ql[l] = (uint8_t)((v1 & 0xF) | (v3 & 0xF) << 4);
                ql[l + 32] = (uint8_t)((v2 & 0xF) | (v4 & 0xF) << 4);
                qh[l] = (uint8_t)(v1 >> 4 | (v2 >> 4) << 2 | (v3 >> 4) << 4 | (v4 >> 4) << 6);
            }
        }
    }
}

void kld_quant_q6_k_ref(const float *x, void *dst, int64_t n) { q6k_blocks(x, dst, n, NULL, qx16_ref); }

void kld_quant_q6_k_with(const float *x, void *dst, int64_t n, kld_qx16_fn qx) {
    q6k_blocks(x, dst, n, NULL, qx);
}

void kld_quant_q6_k_imat(const float *x, void *dst, int64_t n_per_row, const float *qw) {
    q6k_blocks(x, dst, n_per_row, qw, qx16_ref);
}
