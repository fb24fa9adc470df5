/* quantize_k_imat.c — the importance-weighted quantizers llama-quantize uses
 * with --imatrix for q4_0, q4_1, q5_0, q5_1, q2_K, q3_K, q4_K and q5_K
 * (ggml's quantize_row_*_impl with
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
        scales[j] = kld_make_qkx2_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux,
                                         -0.9f, 0.05f, 36, false);
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

/* Packs 256 2-bit levels as q2_K/q3_K store them (byte l of each 32-byte run
 * holds values l, l+32, l+64, l+96 of its 128-value half). */
static void pack_2bit(const uint8_t *L, uint8_t *qs) {
    for (int j = 0; j < KLD_QK_K; j += 128)
        for (int l = 0; l < 32; l++)
            qs[j / 4 + l] = (uint8_t)(L[j + l] | L[j + l + 32] << 2 | L[j + l + 64] << 4 |
                                      L[j + l + 96] << 6);
}

void kld_quant_q2_k_imat(const float *x, void *dst, int64_t n_per_row, const float *qw) {
    uint8_t *b = dst;
    for (int64_t i = 0; i < n_per_row / KLD_QK_K;
         i++, x += KLD_QK_K, qw += KLD_QK_K, b += KLD_BYTES_Q2_K) {
        uint8_t L[KLD_QK_K], Laux[16], Ls[16], Lm[16];
        float mins[16], scales[16], sw[16] = {0}, weight[16];
        float sumx2 = 0;
        for (int j = 0; j < KLD_QK_K; j++) sumx2 += x[j] * x[j];
        const float sigma2 = sumx2 / KLD_QK_K;
        for (int j = 0; j < 16; j++) {
            for (int l = 0; l < 16; l++)
                weight[l] = qw[16 * j + l] * sqrtf(sigma2 + x[16 * j + l] * x[16 * j + l]);
            for (int l = 0; l < 16; l++) sw[j] += weight[l];
            scales[j] = kld_make_qkx2_quants(16, 3, x + 16 * j, weight, L + 16 * j, &mins[j], Laux,
                                         -0.9f, 0.05f, 36, false);
        }
        float dm = make_qp_quants(16, 15, scales, Ls, sw);
        float mm = make_qp_quants(16, 15, mins, Lm, sw);
        kld_store_u16(b + 80, kld_f32_to_f16(dm));
        kld_store_u16(b + 82, kld_f32_to_f16(mm));
        dm = kld_half_to_float(kld_load_u16(b + 80));
        mm = kld_half_to_float(kld_load_u16(b + 82));
        for (int j = 0; j < 16; j++) b[j] = (uint8_t)(Ls[j] | Lm[j] << 4);
        for (int j = 0; j < 16; j++) {
            const float d = dm * (float)(b[j] & 0xF);
            if (!d) continue;
            const float m = mm * (float)(b[j] >> 4);
            for (int ii = 0; ii < 16; ii++) {
                int l = nearest_int((x[16 * j + ii] + m) / d);
                L[16 * j + ii] = (uint8_t)imax(0, imin(3, l));
            }
        }
        pack_2bit(L, b + 16);
    }
}

void kld_quant_q3_k_imat(const float *x, void *dst, int64_t n_per_row, const float *qw) {
    uint8_t *b = dst;
    for (int64_t i = 0; i < n_per_row / KLD_QK_K;
         i++, x += KLD_QK_K, qw += KLD_QK_K, b += KLD_BYTES_Q3_K) {
        int8_t L[KLD_QK_K], Ls[16];
        float scales[16], weight[16], sw[16];
        uint8_t *hmask = b, *sc_out = b + 96;
        float sumx2 = 0;
        for (int j = 0; j < KLD_QK_K; j++) sumx2 += x[j] * x[j];
        const float sigma2 = 2 * sumx2 / KLD_QK_K;
        for (int j = 0; j < 16; j++) {
            for (int l = 0; l < 16; l++)
                weight[l] = qw[16 * j + l] * sqrtf(sigma2 + x[16 * j + l] * x[16 * j + l]);
            float sumw = 0;
            for (int l = 0; l < 16; l++) sumw += weight[l];
            sw[j] = sumw;
            scales[j] = kld_make_qx_quants(16, 4, x + 16 * j, L + 16 * j, weight);
        }
        memset(sc_out, 0, 12);
        const float d_block = kld_make_qx_quants(16, 32, scales, Ls, sw);
        for (int j = 0; j < 16; j++) {
            int l = Ls[j];
            if (j < 8) sc_out[j] = (uint8_t)(l & 0xF);
            else sc_out[j - 8] = (uint8_t)(sc_out[j - 8] | (l & 0xF) << 4);
            l >>= 4;
            sc_out[j % 4 + 8] = (uint8_t)(sc_out[j % 4 + 8] | l << (2 * (j / 4)));
        }
        kld_store_u16(b + 108, kld_f32_to_f16(d_block));
        int8_t sc[16];
        kld_q3k_scales(sc_out, sc);
        const float d_all = kld_half_to_float(kld_load_u16(b + 108));
        uint8_t U[KLD_QK_K];
        for (int j = 0; j < 16; j++) {
            const float d = d_all * (float)sc[j];
            if (!d) { /* ggml leaves these levels as make_qx_quants set them */
                for (int ii = 0; ii < 16; ii++) U[16 * j + ii] = (uint8_t)L[16 * j + ii];
                continue;
            }
            for (int ii = 0; ii < 16; ii++) {
                int l = nearest_int(x[16 * j + ii] / d);
                U[16 * j + ii] = (uint8_t)(imax(-4, imin(3, l)) + 4);
            }
        }
        /* high bit of value j goes to bit j/32 of hmask[j%32] */
        memset(hmask, 0, 32);
        for (int j = 0; j < KLD_QK_K; j++) {
            if (U[j] > 3) {
                hmask[j % 32] = (uint8_t)(hmask[j % 32] | 1u << (j / 32));
                U[j] = (uint8_t)(U[j] - 4);
            }
        }
        pack_2bit(U, b + 32);
    }
}

/* q4_1 / q5_1: 32-value blocks with scale and min fitted by weighted least
 * squares; the levels come straight from the fit (no requantization). */
static void q_1_imat(const float *x, uint8_t *b, int64_t n_per_row, const float *qw, int nmax,
                     int block_bytes) {
    float sum_x2 = 0;
    for (int64_t j = 0; j < n_per_row; j++) sum_x2 += x[j] * x[j];
    const float sigma2 = sum_x2 / (float)n_per_row;
    for (int64_t ib = 0; ib < n_per_row / 32; ib++, b += block_bytes) {
        const float *xb = x + 32 * ib, *w = qw + 32 * ib;
        float weight[32], min;
        uint8_t L[32], Laux[32];
        for (int j = 0; j < 32; j++) weight[j] = w[j] * sqrtf(sigma2 + xb[j] * xb[j]);
        float d = kld_make_qkx2_quants(32, nmax, xb, weight, L, &min, Laux, -0.9f, 0.05f, 36, false);
        kld_store_u16(b, kld_f32_to_f16(d));
        kld_store_u16(b + 2, kld_f32_to_f16(-min));
        uint8_t *qs = b + (nmax == 15 ? 4 : 8);
        uint32_t qh = 0;
        for (int j = 0; j < 16; j++) {
            qs[j] = (uint8_t)((L[j] & 0xF) | (L[j + 16] & 0xF) << 4);
            qh |= (uint32_t)((L[j] & 0x10u) >> 4) << j;
            qh |= (uint32_t)((L[j + 16] & 0x10u) >> 4) << (j + 16);
        }
        if (nmax == 31) memcpy(b + 4, &qh, 4);
    }
}

void kld_quant_q4_1_imat(const float *x, void *dst, int64_t n_per_row, const float *qw) {
    q_1_imat(x, dst, n_per_row, qw, 15, KLD_BYTES_Q4_1);
}

void kld_quant_q5_1_imat(const float *x, void *dst, int64_t n_per_row, const float *qw) {
    q_1_imat(x, dst, n_per_row, qw, 31, KLD_BYTES_Q5_1);
}

void kld_quant_q5_0_imat(const float *x, void *dst, int64_t n_per_row, const float *qw) {
    float sum_x2 = 0;
    for (int64_t j = 0; j < n_per_row; j++) sum_x2 += x[j] * x[j];
    const float sigma2 = sum_x2 / (float)n_per_row;
    uint8_t *b = dst;
    for (int64_t ib = 0; ib < n_per_row / 32; ib++, b += KLD_BYTES_Q5_0) {
        const float *xb = x + 32 * ib, *w = qw + 32 * ib;
        float weight[32];
        int8_t L[32];
        for (int j = 0; j < 32; j++) weight[j] = w[j] * sqrtf(sigma2 + xb[j] * xb[j]);
        float d = kld_make_qx_quants(32, 16, xb, L, weight);
        kld_store_u16(b, kld_f32_to_f16(d));
        uint32_t qh = 0;
        for (int j = 0; j < 16; j++) {
            const uint8_t x0 = (uint8_t)L[j], x1 = (uint8_t)L[j + 16];
            b[6 + j] = (uint8_t)((x0 & 0x0F) | (x1 & 0x0F) << 4);
            qh |= (uint32_t)((x0 & 0x10u) >> 4) << j;
            qh |= (uint32_t)((x1 & 0x10u) >> 4) << (j + 16);
        }
        memcpy(b + 2, &qh, 4);
    }
}
