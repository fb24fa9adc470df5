/* dequant_iq_ref.c — scalar reference dequantization of llama.cpp's lattice
 * i-quants: iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s, iq1_s and iq1_m. Each
 * 256-value super-block has one f16 scale d and eight 32-value groups;
 * groups of 8 (or 4) values are an index into a grid (tensor/iq_grids.h)
 * plus sign bits. The float operations follow ggml's dequantize_row_* in
 * order and association — the group scale is (d * (0.5 + s)) * 0.25 for
 * iq2, (d * (0.5 + s)) * 0.5 for iq3_xxs, d * (1 + 2s) for iq3_s, the value
 * scale * grid with its sign flipped by the sign bit — which makes them
 * bit-exact. */
#include "tensor/iq_grids.h"
#include "tensor/kernels.h"

/* 8 values scale * grid[j], negated where bit j of signs is set. ggml
 * multiplies by -1.f, which GCC -O2 compiles to this sign flip; for finite
 * values the two are the same, and the flip keeps NaN results identical
 * between this file and the AVX2 one whatever the compiler does. */
static inline void put8(float *y, const uint8_t *grid, uint8_t signs, float scale) {
    for (int j = 0; j < 8; j++) {
        const float v = scale * (float)grid[j];
        y[j] = (signs >> j) & 1 ? -v : v;
    }
}

/* iq2_xxs: per group, 4 index bytes then a u32 with four 7-bit sign fields
 * and the 4-bit group scale on top. */
void kld_dequant_iq2_xxs_ref(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / KLD_QK_K; i++, b += KLD_BYTES_IQ2_XXS) {
        const float d = kld_half_to_float(kld_load_u16(b));
        for (int g = 0; g < 8; g++) {
            const uint8_t *q = b + 2 + 8 * g;
            const uint32_t aux = kld_load_u32(q + 4);
            const float db = d * (0.5f + (float)(aux >> 28)) * 0.25f;
            for (int l = 0; l < 4; l++, dst += 8)
                put8(dst, (const uint8_t *)&kld_iq2xxs_grid[q[l]], kld_iq_signs8(aux >> (7 * l)), db);
        }
    }
}

/* iq2_xs: u16 per 8 values, 9-bit grid index and 7 sign bits; a 4-bit
 * scale per 16 values. */
void kld_dequant_iq2_xs_ref(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / KLD_QK_K; i++, b += KLD_BYTES_IQ2_XS) {
        const float d = kld_half_to_float(kld_load_u16(b));
        const uint8_t *scales = b + 66;
        for (int g = 0; g < 8; g++) {
            const float db[2] = {d * (0.5f + (float)(scales[g] & 0xF)) * 0.25f,
                                 d * (0.5f + (float)(scales[g] >> 4)) * 0.25f};
            for (int l = 0; l < 4; l++, dst += 8) {
                const uint16_t q = kld_load_u16(b + 2 + 2 * (4 * g + l));
                put8(dst, (const uint8_t *)&kld_iq2xs_grid[q & 511], kld_iq_signs8(q >> 9), db[l / 2]);
            }
        }
    }
}

/* iq2_s: 10-bit grid index (8 low bits in qs, 2 high in qh) and 8 explicit
 * sign bits per 8 values. */
void kld_dequant_iq2_s_ref(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / KLD_QK_K; i++, b += KLD_BYTES_IQ2_S) {
        const float d = kld_half_to_float(kld_load_u16(b));
        const uint8_t *qs = b + 2, *signs = b + 34, *qh = b + 66, *scales = b + 74;
        for (int g = 0; g < 8; g++) {
            const float db[2] = {d * (0.5f + (float)(scales[g] & 0xF)) * 0.25f,
                                 d * (0.5f + (float)(scales[g] >> 4)) * 0.25f};
            for (int l = 0; l < 4; l++, dst += 8) {
                const int idx = qs[4 * g + l] | ((qh[g] << (8 - 2 * l)) & 0x300);
                put8(dst, (const uint8_t *)&kld_iq2s_grid[idx], signs[4 * g + l], db[l / 2]);
            }
        }
    }
}

/* iq3_xxs: two 4-value grid indices per 8 values; per group a u32 of four
 * 7-bit sign fields and the 4-bit scale. */
void kld_dequant_iq3_xxs_ref(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / KLD_QK_K; i++, b += KLD_BYTES_IQ3_XXS) {
        const float d = kld_half_to_float(kld_load_u16(b));
        for (int g = 0; g < 8; g++) {
            const uint8_t *qs = b + 2 + 8 * g;
            const uint32_t aux = kld_load_u32(b + 66 + 4 * g);
            const float db = d * (0.5f + (float)(aux >> 28)) * 0.5f;
            for (int l = 0; l < 4; l++, dst += 8) {
                uint8_t grid[8];
                memcpy(grid, &kld_iq3xxs_grid[qs[2 * l]], 4);
                memcpy(grid + 4, &kld_iq3xxs_grid[qs[2 * l + 1]], 4);
                put8(dst, grid, kld_iq_signs8(aux >> (7 * l)), db);
            }
        }
    }
}

/* iq3_s: 9-bit 4-value grid indices (ninth bit in qh, one byte per group),
 * explicit sign bytes, a 4-bit odd scale 1 + 2s per group. */
void kld_dequant_iq3_s_ref(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / KLD_QK_K; i++, b += KLD_BYTES_IQ3_S) {
        const float d = kld_half_to_float(kld_load_u16(b));
        const uint8_t *qh = b + 66, *signs = b + 74, *scales = b + 106;
        for (int g = 0; g < 8; g++) {
            const uint8_t *qs = b + 2 + 8 * g;
            const float db = d * (float)(1 + 2 * ((scales[g / 2] >> (4 * (g % 2))) & 0xF));
            for (int l = 0; l < 4; l++, dst += 8) {
                const int i0 = qs[2 * l] | ((qh[g] << (8 - 2 * l)) & 256);
                const int i1 = qs[2 * l + 1] | ((qh[g] << (7 - 2 * l)) & 256);
                uint8_t grid[8];
                memcpy(grid, &kld_iq3s_grid[i0], 4);
                memcpy(grid + 4, &kld_iq3s_grid[i1], 4);
                put8(dst, grid, signs[4 * g + l], db);
            }
        }
    }
}

/* 8 values scale * (grid[j] + delta), grid of int8 -1/0/1 (iq1_s, iq1_m). */
static inline void put8_iq1(float *y, int idx, float scale, float delta) {
    const int8_t *grid = (const int8_t *)&kld_iq1s_grid[idx];
    for (int j = 0; j < 8; j++) y[j] = scale * ((float)grid[j] + delta);
}

/* iq1_s: per group a u16 qh: four 3-bit index extensions, a 3-bit scale
 * (odd multiplier 2s + 1) and the sign of the ±1/8 shift. */
void kld_dequant_iq1_s_ref(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / KLD_QK_K; i++, b += KLD_BYTES_IQ1_S) {
        const float d = kld_half_to_float(kld_load_u16(b));
        const uint8_t *qs = b + 2;
        for (int g = 0; g < 8; g++) {
            const uint16_t qh = kld_load_u16(b + 34 + 2 * g);
            const float dl = d * (float)(2 * ((qh >> 12) & 7) + 1);
            const float delta = qh & 0x8000 ? -0.125f : 0.125f;
            for (int l = 0; l < 4; l++, dst += 8)
                put8_iq1(dst, qs[4 * g + l] | (((qh >> (3 * l)) & 7) << 8), dl, delta);
        }
    }
}

/* The f16 super-block scale of iq1_m: the top nibbles of its four u16
 * scale words, low word first. */
static inline float iq1m_scale(const uint8_t *scales) {
    const uint16_t s0 = kld_load_u16(scales), s1 = kld_load_u16(scales + 2);
    const uint16_t s2 = kld_load_u16(scales + 4), s3 = kld_load_u16(scales + 6);
    return kld_half_to_float((uint16_t)((s0 >> 12) | ((s1 >> 8) & 0x00F0) | ((s2 >> 4) & 0x0F00) |
                                        (s3 & 0xF000)));
}

/* iq1_m: no stored d (iq1m_scale); a 3-bit scale per 16 values; per 8
 * values a 3-bit index extension and a shift sign bit in a nibble of qh. */
void kld_dequant_iq1_m_ref(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / KLD_QK_K; i++, b += KLD_BYTES_IQ1_M) {
        const uint8_t *qs = b, *qh = b + 32, *scales = b + 48;
        const float d = iq1m_scale(scales);
        for (int g = 0; g < 8; g++) {
            const uint16_t sc = kld_load_u16(scales + 2 * (g / 2));
            const float dl[2] = {d * (float)(2 * ((sc >> (6 * (g % 2))) & 7) + 1),
                                 d * (float)(2 * ((sc >> (6 * (g % 2) + 3)) & 7) + 1)};
            for (int l = 0; l < 4; l++, dst += 8) {
                const uint8_t h = (uint8_t)(qh[2 * g + l / 2] >> (4 * (l % 2))); /* nibble l */
                put8_iq1(dst, qs[4 * g + l] | ((h & 7) << 8), dl[l / 2], h & 8 ? -0.125f : 0.125f);
            }
        }
    }
}
