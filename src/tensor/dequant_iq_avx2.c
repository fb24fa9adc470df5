/* dequant_iq_avx2.c — AVX2 + F16C dequantization of the lattice i-quants
 * (iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s, iq1_s, iq1_m), the ternary types
 * (tq1_0, tq2_0) and mxfp4: eight grid values per vector, widened to
 * floats, then the scalar references' float operations in their order
 * (scale * grid, then the sign flip, so that even a NaN scale comes out as
 * the reference's). Bit for bit the same as
 * dequant_iq_ref.c / dequant_tq_ref.c (tests/test_tensor_iq.c). */
#include "tensor/dequant_avx2.h"
#include "tensor/iq_grids.h"

/* The sign bit in lane j where bit j of signs is set (flipped by XOR, as
 * the scalar reference's negation). */
static inline __m256 sign8(uint8_t signs) {
    const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    const __m256i set = _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(signs), bit), bit);
    return _mm256_castsi256_ps(_mm256_and_si256(set, _mm256_set1_epi32((int)0x80000000u)));
}

/* y[0..8) = ±(scale * grid), grid as 8 unsigned bytes in the low lanes. */
static inline void put8(float *y, __m128i grid, uint8_t signs, __m256 scale) {
    const __m256 g = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(grid));
    _mm256_storeu_ps(y, _mm256_xor_ps(_mm256_mul_ps(scale, g), sign8(signs)));
}

static inline __m128i grid8(const uint64_t *entry) { return _mm_loadl_epi64((const __m128i *)entry); }
static inline __m128i grid4x2(const uint32_t *a, const uint32_t *b) {
    return _mm_setr_epi32((int)*a, (int)*b, 0, 0);
}

void kld_dequant_iq2_xxs_avx2(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / KLD_QK_K; i++, b += KLD_BYTES_IQ2_XXS) {
        const float d = half_to_float(b);
        for (int g = 0; g < 8; g++) {
            const uint8_t *q = b + 2 + 8 * g;
            const uint32_t aux = kld_load_u32(q + 4);
            const __m256 db = _mm256_set1_ps(d * (0.5f + (float)(aux >> 28)) * 0.25f);
            for (int l = 0; l < 4; l++, dst += 8)
                put8(dst, grid8(&kld_iq2xxs_grid[q[l]]), kld_iq_signs8(aux >> (7 * l)), db);
        }
    }
}

void kld_dequant_iq2_xs_avx2(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / KLD_QK_K; i++, b += KLD_BYTES_IQ2_XS) {
        const float d = half_to_float(b);
        for (int g = 0; g < 8; g++) {
            const uint8_t sc = b[66 + g];
            const __m256 db[2] = {_mm256_set1_ps(d * (0.5f + (float)(sc & 0xF)) * 0.25f),
                                  _mm256_set1_ps(d * (0.5f + (float)(sc >> 4)) * 0.25f)};
            for (int l = 0; l < 4; l++, dst += 8) {
                const uint16_t q = kld_load_u16(b + 2 + 2 * (4 * g + l));
                put8(dst, grid8(&kld_iq2xs_grid[q & 511]), kld_iq_signs8(q >> 9), db[l / 2]);
            }
        }
    }
}

void kld_dequant_iq2_s_avx2(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / KLD_QK_K; i++, b += KLD_BYTES_IQ2_S) {
        const float d = half_to_float(b);
        const uint8_t *qs = b + 2, *signs = b + 34, *qh = b + 66, *scales = b + 74;
        for (int g = 0; g < 8; g++) {
            const __m256 db[2] = {_mm256_set1_ps(d * (0.5f + (float)(scales[g] & 0xF)) * 0.25f),
                                  _mm256_set1_ps(d * (0.5f + (float)(scales[g] >> 4)) * 0.25f)};
            for (int l = 0; l < 4; l++, dst += 8) {
                const int idx = qs[4 * g + l] | ((qh[g] << (8 - 2 * l)) & 0x300);
                put8(dst, grid8(&kld_iq2s_grid[idx]), signs[4 * g + l], db[l / 2]);
            }
        }
    }
}

void kld_dequant_iq3_xxs_avx2(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / KLD_QK_K; i++, b += KLD_BYTES_IQ3_XXS) {
        const float d = half_to_float(b);
        for (int g = 0; g < 8; g++) {
            const uint8_t *qs = b + 2 + 8 * g;
            const uint32_t aux = kld_load_u32(b + 66 + 4 * g);
            const __m256 db = _mm256_set1_ps(d * (0.5f + (float)(aux >> 28)) * 0.5f);
            for (int l = 0; l < 4; l++, dst += 8)
                put8(dst, grid4x2(&kld_iq3xxs_grid[qs[2 * l]], &kld_iq3xxs_grid[qs[2 * l + 1]]),
                     kld_iq_signs8(aux >> (7 * l)), db);
        }
    }
}

void kld_dequant_iq3_s_avx2(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / KLD_QK_K; i++, b += KLD_BYTES_IQ3_S) {
        const float d = half_to_float(b);
        const uint8_t *qh = b + 66, *signs = b + 74, *scales = b + 106;
        for (int g = 0; g < 8; g++) {
            const uint8_t *qs = b + 2 + 8 * g;
            const __m256 db =
                _mm256_set1_ps(d * (float)(1 + 2 * ((scales[g / 2] >> (4 * (g % 2))) & 0xF)));
            for (int l = 0; l < 4; l++, dst += 8) {
                const int i0 = qs[2 * l] | ((qh[g] << (8 - 2 * l)) & 256);
                const int i1 = qs[2 * l + 1] | ((qh[g] << (7 - 2 * l)) & 256);
                put8(dst, grid4x2(&kld_iq3s_grid[i0], &kld_iq3s_grid[i1]), signs[4 * g + l], db);
            }
        }
    }
}

/* y[0..8) = scale * (grid + delta), grid the 8 int8 values of iq1s_grid[idx]. */
static inline void put8_iq1(float *y, int idx, __m256 scale, float delta) {
    const __m256 g = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(grid8(&kld_iq1s_grid[idx])));
    _mm256_storeu_ps(y, _mm256_mul_ps(scale, _mm256_add_ps(g, _mm256_set1_ps(delta))));
}

void kld_dequant_iq1_s_avx2(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / KLD_QK_K; i++, b += KLD_BYTES_IQ1_S) {
        const float d = half_to_float(b);
        const uint8_t *qs = b + 2;
        for (int g = 0; g < 8; g++) {
            const uint16_t qh = kld_load_u16(b + 34 + 2 * g);
            const __m256 dl = _mm256_set1_ps(d * (float)(2 * ((qh >> 12) & 7) + 1));
            const float delta = qh & 0x8000 ? -0.125f : 0.125f;
            for (int l = 0; l < 4; l++, dst += 8)
                put8_iq1(dst, qs[4 * g + l] | (((qh >> (3 * l)) & 7) << 8), dl, delta);
        }
    }
}

void kld_dequant_iq1_m_avx2(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / KLD_QK_K; i++, b += KLD_BYTES_IQ1_M) {
        const uint8_t *qs = b, *qh = b + 32, *scales = b + 48;
        const uint16_t s0 = kld_load_u16(scales), s1 = kld_load_u16(scales + 2);
        const uint16_t s2 = kld_load_u16(scales + 4), s3 = kld_load_u16(scales + 6);
        const float d = _cvtsh_ss((uint16_t)((s0 >> 12) | ((s1 >> 8) & 0x00F0) |
                                             ((s2 >> 4) & 0x0F00) | (s3 & 0xF000)));
        for (int g = 0; g < 8; g++) {
            const uint16_t sc = kld_load_u16(scales + 2 * (g / 2));
            const __m256 dl[2] = {
                _mm256_set1_ps(d * (float)(2 * ((sc >> (6 * (g % 2))) & 7) + 1)),
                _mm256_set1_ps(d * (float)(2 * ((sc >> (6 * (g % 2) + 3)) & 7) + 1))};
            for (int l = 0; l < 4; l++, dst += 8) {
                const uint8_t h = (uint8_t)(qh[2 * g + l / 2] >> (4 * (l % 2)));
                put8_iq1(dst, qs[4 * g + l] | ((h & 7) << 8), dl[l / 2], h & 8 ? -0.125f : 0.125f);
            }
        }
    }
}

/* 16 tq1_0 values from 16 bytes: trit = ((byte * pow3 mod 256) * 3) >> 8,
 * in 16-bit lanes, pow3 per lane; y = (trit - 1) * d. */
static inline void tq1_16(float *y, __m128i bytes, __m256i pow3, __m256 d) {
    __m256i w = _mm256_cvtepu8_epi16(bytes);
    w = _mm256_and_si256(_mm256_mullo_epi16(w, pow3), _mm256_set1_epi16(0xFF));
    w = _mm256_srli_epi16(_mm256_mullo_epi16(w, _mm256_set1_epi16(3)), 8);
    w = _mm256_sub_epi16(w, _mm256_set1_epi16(1));
    const __m256 lo = _mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(_mm256_castsi256_si128(w)));
    const __m256 hi = _mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(_mm256_extracti128_si256(w, 1)));
    _mm256_storeu_ps(y, _mm256_mul_ps(lo, d));
    _mm256_storeu_ps(y + 8, _mm256_mul_ps(hi, d));
}

void kld_dequant_tq1_0_avx2(const void *src, float *dst, int64_t n) {
    static const int16_t pow3[5] = {1, 3, 9, 27, 81};
    const uint8_t *b = src;
    /* the last 16 values: trit t of qh[m] is value 4t + m */
    const __m256i qh_pow3 = _mm256_setr_epi16(1, 1, 1, 1, 3, 3, 3, 3, 9, 9, 9, 9, 27, 27, 27, 27);
    for (int64_t i = 0; i < n / KLD_QK_K; i++, b += KLD_BYTES_TQ1_0) {
        const __m256 d = _mm256_set1_ps(half_to_float(b + 52));
        const __m128i q0 = _mm_loadu_si128((const __m128i *)b);
        const __m128i q1 = _mm_loadu_si128((const __m128i *)(b + 16));
        const __m128i q2 = _mm_loadu_si128((const __m128i *)(b + 32));
        for (int t = 0; t < 5; t++, dst += 32) {
            tq1_16(dst, q0, _mm256_set1_epi16(pow3[t]), d);
            tq1_16(dst + 16, q1, _mm256_set1_epi16(pow3[t]), d);
        }
        for (int t = 0; t < 5; t++, dst += 16) tq1_16(dst, q2, _mm256_set1_epi16(pow3[t]), d);
        tq1_16(dst, _mm_set1_epi32((int)kld_load_u32(b + 48)), qh_pow3, d);
        dst += 16;
    }
}

void kld_dequant_tq2_0_avx2(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    const __m256i three = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
    for (int64_t i = 0; i < n / KLD_QK_K; i++, b += KLD_BYTES_TQ2_0) {
        const __m256 d = _mm256_set1_ps(half_to_float(b + 64));
        for (int h = 0; h < 64; h += 32) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(b + h));
            for (int shift = 0; shift < 8; shift += 2, dst += 32) {
                const __m256i v =
                    _mm256_sub_epi8(_mm256_and_si256(_mm256_srli_epi16(q, shift), three), one);
                store16_mul(dst, _mm256_castsi256_si128(v), d);
                store16_mul(dst + 16, _mm256_extracti128_si256(v, 1), d);
            }
        }
    }
}

void kld_dequant_mxfp4_avx2(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    const __m128i levels = _mm_loadu_si128((const __m128i *)kld_mxfp4_values);
    for (int64_t i = 0; i < n / 32; i++, b += KLD_BYTES_MXFP4, dst += 32) {
        const __m256 d = _mm256_set1_ps(kld_e8m0_to_f32_half(b[0]));
        const __m128i qs = _mm_loadu_si128((const __m128i *)(b + 1));
        store16_mul(dst, _mm_shuffle_epi8(levels, lo_nibbles(qs)), d);
        store16_mul(dst + 16, _mm_shuffle_epi8(levels, hi_nibbles(qs)), d);
    }
}
