/* dequant_k_ref.c — scalar reference dequantization of the 256-value
 * super-block types: q2_K, q3_K, q4_K, q5_K, q6_K and iq4_xs. The float
 * operations follow ggml's to_float in order and association (e.g. q4_K is
 * (d*sc)*q - dmin*m, q6_K is (d*sc)*q), which is what makes them bit-exact. */
#include "tensor/kernels.h"

/* Scale j's low 4 bits are nibble j of bytes 0..7 (low nibbles first), its
 * high 2 bits are bit pair j/4 of byte 8 + j%4; done four scales per word. */
void kld_q3k_scales(const uint8_t *s, int8_t out[16]) {
    const uint32_t lo4 = 0x0F0F0F0F, lo2 = 0x03030303;
    const uint32_t a0 = kld_load_u32(s), a1 = kld_load_u32(s + 4), hi = kld_load_u32(s + 8);
    const uint32_t w[4] = {
        (a0 & lo4) | ((hi >> 0) & lo2) << 4,
        (a1 & lo4) | ((hi >> 2) & lo2) << 4,
        ((a0 >> 4) & lo4) | ((hi >> 4) & lo2) << 4,
        ((a1 >> 4) & lo4) | ((hi >> 6) & lo2) << 4,
    };
    for (int k = 0; k < 4; k++)
        for (int b = 0; b < 4; b++) out[4 * k + b] = (int8_t)((int)((w[k] >> (8 * b)) & 0xFF) - 32);
}

/* q2_K: 16 groups of 16; byte scales[g] holds the 4-bit scale (low) and min
 * (high). Value = (d*scale) * q - (dmin*min); q is 2 bits of qs, four
 * groups of 32 values per 32 bytes of qs, at shifts 0, 2, 4, 6. */
void kld_dequant_q2_k_ref(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / KLD_QK_K; i++, b += KLD_BYTES_Q2_K) {
        const uint8_t *scales = b, *q = b + 16;
        const float d = kld_half_to_float(kld_load_u16(b + 80));
        const float dmin = kld_half_to_float(kld_load_u16(b + 82));
        int is = 0;
        for (int half = 0; half < 2; half++, q += 32) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int k = 0; k < 2; k++) {
                    const uint8_t sc = scales[is++];
                    const float dl = d * (float)(sc & 0xF), ml = dmin * (float)(sc >> 4);
                    for (int l = 0; l < 16; l++)
                        *dst++ = dl * (float)((q[16 * k + l] >> shift) & 3) - ml;
                }
            }
        }
    }
}

/* q3_K: like q2_K but signed: q = 2 low bits - (high bit clear ? 4 : 0),
 * scales are 6-bit and signed (minus 32), value = (d*scale) * q. */
void kld_dequant_q3_k_ref(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / KLD_QK_K; i++, b += KLD_BYTES_Q3_K) {
        const uint8_t *hm = b, *q = b + 32;
        int8_t scales[16];
        kld_q3k_scales(b + 96, scales);
        const float d_all = kld_half_to_float(kld_load_u16(b + 108));
        int is = 0;
        uint8_t m = 1;
        for (int half = 0; half < 2; half++, q += 32) {
            for (int shift = 0; shift < 8; shift += 2, m = (uint8_t)(m << 1)) {
                for (int k = 0; k < 2; k++) {
                    const float dl = d_all * (float)scales[is++];
                    for (int l = 16 * k; l < 16 * k + 16; l++) {
                        int v = ((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4);
                        *dst++ = dl * (float)v;
                    }
                }
            }
        }
    }
}

/* q4_K: 8 groups of 32 with 6-bit scale and min; each 32 bytes of qs hold
 * two groups (low nibbles, then high nibbles). */
void kld_dequant_q4_k_ref(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / KLD_QK_K; i++, b += KLD_BYTES_Q4_K) {
        const float d = kld_half_to_float(kld_load_u16(b));
        const float dmin = kld_half_to_float(kld_load_u16(b + 2));
        const uint8_t *scales = b + 4, *q = b + 16;
        for (int g = 0; g < 8; g += 2, q += 32) {
            uint8_t sc, m;
            kld_k4_scale_min(g, scales, &sc, &m);
            const float d1 = d * (float)sc, m1 = dmin * (float)m;
            kld_k4_scale_min(g + 1, scales, &sc, &m);
            const float d2 = d * (float)sc, m2 = dmin * (float)m;
            for (int l = 0; l < 32; l++) *dst++ = d1 * (float)(q[l] & 0xF) - m1;
            for (int l = 0; l < 32; l++) *dst++ = d2 * (float)(q[l] >> 4) - m2;
        }
    }
}

/* q5_K: q4_K plus a fifth bit: group g's bit is bit g of qh[l]. */
void kld_dequant_q5_k_ref(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / KLD_QK_K; i++, b += KLD_BYTES_Q5_K) {
        const float d = kld_half_to_float(kld_load_u16(b));
        const float dmin = kld_half_to_float(kld_load_u16(b + 2));
        const uint8_t *scales = b + 4, *qh = b + 16, *ql = b + 48;
        for (int g = 0; g < 8; g += 2, ql += 32) {
            uint8_t sc, m;
            kld_k4_scale_min(g, scales, &sc, &m);
            const float d1 = d * (float)sc, m1 = dmin * (float)m;
            kld_k4_scale_min(g + 1, scales, &sc, &m);
            const float d2 = d * (float)sc, m2 = dmin * (float)m;
            const uint8_t u1 = (uint8_t)(1u << g), u2 = (uint8_t)(2u << g);
            for (int l = 0; l < 32; l++)
                *dst++ = d1 * (float)((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
            for (int l = 0; l < 32; l++)
                *dst++ = d2 * (float)((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
        }
    }
}

/* q6_K: 16 groups of 16 with int8 scales; per 128 values, 64 bytes of ql
 * (low 4 bits) and 32 of qh (2 bits each for the four 32-value quarters). */
void kld_dequant_q6_k_ref(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / KLD_QK_K; i++, b += KLD_BYTES_Q6_K) {
        const float d = kld_half_to_float(kld_load_u16(b + 208));
        const uint8_t *ql = b, *qh = b + 128;
        const int8_t *sc = (const int8_t *)(b + 192);
        for (int half = 0; half < 2; half++, dst += 128, ql += 64, qh += 32, sc += 8) {
            for (int l = 0; l < 32; l++) {
                const int is = l / 16;
                const int q1 = ((ql[l] & 0xF) | ((qh[l] >> 0) & 3) << 4) - 32;
                const int q2 = ((ql[l + 32] & 0xF) | ((qh[l] >> 2) & 3) << 4) - 32;
                const int q3 = ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
                const int q4 = ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
                dst[l] = d * (float)sc[is + 0] * (float)q1;
                dst[l + 32] = d * (float)sc[is + 2] * (float)q2;
                dst[l + 64] = d * (float)sc[is + 4] * (float)q3;
                dst[l + 96] = d * (float)sc[is + 6] * (float)q4;
            }
        }
    }
}

/* iq4_xs: 8 groups of 32, each with a 6-bit scale (4 low bits in scales_l,
 * 2 high in scales_h) minus 32; value = (d*scale) * level[nibble]. */
void kld_dequant_iq4_xs_ref(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / KLD_QK_K; i++, b += KLD_BYTES_IQ4_XS) {
        const float d = kld_half_to_float(kld_load_u16(b));
        const uint16_t scales_h = kld_load_u16(b + 2);
        const uint8_t *scales_l = b + 4, *qs = b + 8;
        for (int g = 0; g < 8; g++, qs += 16, dst += 32) {
            const int ls = ((scales_l[g / 2] >> 4 * (g % 2)) & 0xF) | ((scales_h >> 2 * g) & 3) << 4;
            const float dl = d * (float)(ls - 32);
            for (int j = 0; j < 16; j++) {
                dst[j] = dl * (float)kld_iq4nl_values[qs[j] & 0xF];
                dst[j + 16] = dl * (float)kld_iq4nl_values[qs[j] >> 4];
            }
        }
    }
}
