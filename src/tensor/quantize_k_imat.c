/* quantize_k_imat.c — the importance-weighted quantizers llama-quantize uses
 * with --imatrix for q4_0, q4_K and q5_K (ggml's quantize_row_*_impl with
 * quant_weights), byte for byte. qw holds one weight per column of the row
 * (llama.cpp's imatrix entry divided by its call count). The q6_K, iq4_nl
 * and iq4_xs variants sit beside their reference twins, which they share
 * code with. Float expressions keep ggml's order of evaluation. */
#include "tensor/kernels.h"

#include <math.h>

static inline int imin(int a, int b) { return a < b ? a : b; }
static inline int imax(int a, int b) { return a > b ? a : b; }

static inline int nearest_int(float x) {
    float v = x + 12582912.f; /* see quantize_k_ref.c */
    int32_t i;
    memcpy(&i, &v, 4);
    return (i & 0x007FFFFF) - 0x00400000;
}

/* Asymmetric levels 0..nmax with explicit weights: the min/max start, then
 * nstep+1 trial scales, keeping the weighted least-squares fit with the
 * smallest error (ggml's make_qkx3_quants, weights always given here). */
static float make_qkx3_quants(int n, int nmax, const float *x, const float *weights, uint8_t *L,
                              float *the_min, uint8_t *Laux, float rmin, float rdelta, int nstep) {
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
    if (max <= min) {
        memset(L, 0, (size_t)n);
        *the_min = -min;
        return 0.f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    float best_mad = 0;
    for (int i = 0; i < n; i++) {
        int l = nearest_int(iscale * (x[i] - min));
        L[i] = (uint8_t)imax(0, imin(nmax, l));
        float diff = scale * (float)L[i] + min - x[i];
        best_mad += weights[i] * (diff * diff);
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
            float mad = 0;
            for (int i = 0; i < n; i++) {
                float diff = this_scale * (float)Laux[i] + this_min - x[i];
                mad += weights[i] * (diff * diff);
            }
            if (mad < best_mad) {
                memcpy(L, Laux, (size_t)n);
                best_mad = mad;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

/* Non-negative levels 0..nmax for the 8 sub-block scales (or mins) of a
 * super-block, weighted by each sub-block's total weight: 9 trial scales,
 * then up to 5 sweeps of single-level coordinate descent (make_qp_quants). */
static float make_qp_quants(int n, int nmax, const float *x, uint8_t *L, const float *qw) {
    float max = 0;
    for (int i = 0; i < n; i++) max = max > x[i] ? max : x[i];
    if (!max) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = nmax / max;
    for (int i = 0; i < n; i++) L[i] = (uint8_t)nearest_int(iscale * x[i]);
    float scale = 1 / iscale;
    float best_mse = 0;
    for (int i = 0; i < n; i++) {
        float diff = x[i] - scale * (float)L[i];
        best_mse += qw[i] * diff * diff;
    }
    for (int is = -4; is <= 4; is++) {
        if (is == 0) continue;
        float iscale_is = (0.1f * (float)is + (float)nmax) / max;
        float scale_is = 1 / iscale_is;
        float mse = 0;
        for (int i = 0; i < n; i++) {
            int l = imin(nmax, nearest_int(iscale_is * x[i]));
            float diff = x[i] - scale_is * (float)l;
            mse += qw[i] * diff * diff;
        }
        if (mse < best_mse) {
            best_mse = mse;
            iscale = iscale_is;
        }
    }
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = imin(nmax, nearest_int(iscale * x[i]));
        L[i] = (uint8_t)l;
        float w = qw[i];
        sumlx += w * x[i] * (float)l;
        suml2 += w * (float)l * (float)l;
    }
    for (int itry = 0; itry < 5; itry++) {
        int n_changed = 0;
        for (int i = 0; i < n; i++) {
            float w = qw[i];
            float slx = sumlx - w * x[i] * (float)L[i];
            float sl2 = suml2 - w * (float)L[i] * (float)L[i];
            if (slx > 0 && sl2 > 0) {
                int new_l = imin(nmax, nearest_int(x[i] * sl2 / slx));
                if (new_l != L[i]) {
                    slx += w * x[i] * (float)new_l;
                    sl2 += w * (float)new_l * (float)new_l;
                    if (slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (uint8_t)new_l;
                        sumlx = slx;
                        suml2 = sl2;
                        n_changed++;
                    }
                }
            }
        }
        if (!n_changed) break;
    }
    return sumlx / suml2;
}

/* One q4_K / q5_K super-block header and levels L (0..nmax) with importance
 * weights qw[256]. */
static void k4_imat_block(const float *x, const float *qw, uint8_t *b, int nmax, uint8_t *L) {
    uint8_t Laux[32], Ls[8], Lm[8];
    float weights[32], sw[8], mins[8], scales[8];
    float sum_x2 = 0;
    for (int l = 0; l < KLD_QK_K; l++) sum_x2 += x[l] * x[l];
    const float sigma2 = 2 * sum_x2 / KLD_QK_K;
    for (int j = 0; j < 8; j++) {
        for (int l = 0; l < 32; l++)
            weights[l] = qw[32 * j + l] * sqrtf(sigma2 + x[32 * j + l] * x[32 * j + l]);
        float sumw = 0;
        for (int l = 0; l < 32; l++) sumw += weights[l];
        sw[j] = sumw;
        scales[j] = make_qkx3_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux,
                                     -0.9f, 0.05f, 36);
    }
    const float d_block = make_qp_quants(8, 63, scales, Ls, sw);
    const float m_block = make_qp_quants(8, 63, mins, Lm, sw);
    uint8_t *s = b + 4;
    for (int j = 0; j < 8; j++) {
        uint8_t ls = Ls[j] < 63 ? Ls[j] : 63, lm = Lm[j] < 63 ? Lm[j] : 63;
        if (j < 4) {
            s[j] = ls;
            s[j + 4] = lm;
        } else {
            s[j + 4] = (uint8_t)((ls & 0xF) | (lm & 0xF) << 4);
            s[j - 4] = (uint8_t)(s[j - 4] | (ls >> 4) << 6);
            s[j] = (uint8_t)(s[j] | (lm >> 4) << 6);
        }
    }
    kld_store_u16(b, kld_f32_to_f16(d_block));
    kld_store_u16(b + 2, kld_f32_to_f16(m_block));
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

void kld_quant_q4_k_imat(const float *x, void *dst, int64_t n_per_row, const float *qw) {
    uint8_t *b = dst;
    for (int64_t i = 0; i < n_per_row / KLD_QK_K;
         i++, x += KLD_QK_K, qw += KLD_QK_K, b += KLD_BYTES_Q4_K) {
        uint8_t L[KLD_QK_K];
        memset(b, 0, KLD_BYTES_Q4_K);
        k4_imat_block(x, qw, b, 15, L);
        uint8_t *q = b + 16;
        for (int j = 0; j < KLD_QK_K; j += 64, q += 32) {
            for (int l = 0; l < 32; l++) q[l] = (uint8_t)(L[j + l] | L[j + l + 32] << 4);
        }
    }
}

void kld_quant_q5_k_imat(const float *x, void *dst, int64_t n_per_row, const float *qw) {
    uint8_t *b = dst;
    for (int64_t i = 0; i < n_per_row / KLD_QK_K;
         i++, x += KLD_QK_K, qw += KLD_QK_K, b += KLD_BYTES_Q5_K) {
        uint8_t L[KLD_QK_K];
        memset(b, 0, KLD_BYTES_Q5_K);
        k4_imat_block(x, qw, b, 31, L);
        uint8_t *qh = b + 16, *ql = b + 48;
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

void kld_quant_q4_0_imat(const float *x, void *dst, int64_t n_per_row, const float *qw) {
    float sum_x2 = 0;
    for (int64_t j = 0; j < n_per_row; j++) sum_x2 += x[j] * x[j];
    const float sigma2 = sum_x2 / (float)n_per_row;
    uint8_t *b = dst;
    for (int64_t ib = 0; ib < n_per_row / 32; ib++, b += KLD_BYTES_Q4_0) {
        const float *xb = x + 32 * ib, *w = qw + 32 * ib;
        float weight[32];
        int8_t L[32];
        for (int j = 0; j < 32; j++) weight[j] = w[j] * sqrtf(sigma2 + xb[j] * xb[j]);
        float d = kld_make_qx_quants(32, 8, xb, L, weight);
        kld_store_u16(b, kld_f32_to_f16(d));
        for (int j = 0; j < 16; j++) b[2 + j] = (uint8_t)(L[j] | L[j + 16] << 4);
    }
}
