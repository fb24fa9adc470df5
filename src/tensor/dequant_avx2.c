/* dequant_avx2.c — AVX2 + F16C dequantization, one whole block per step:
 * quants are unpacked to int8 lanes, widened to int32, converted to float
 * and scaled with the same float operations as the scalar references
 * (separate multiply and add/subtract: ISO C mode means -ffp-contract=off,
 * so the compiler does not fuse them even though -mfma is on; the tests
 * compare every type against the references bit for bit). Only called
 * after kld_cpu_has_avx2(). */
#include "tensor/dequant_avx2.h"

/* y[0..15] = q * d + m */
static inline void store16_mul_add(float *y, __m128i q, __m256 d, __m256 m) {
    _mm256_storeu_ps(y, _mm256_add_ps(_mm256_mul_ps(i8_to_ps(q), d), m));
    _mm256_storeu_ps(y + 8, _mm256_add_ps(_mm256_mul_ps(i8_to_ps(high64(q)), d), m));
}

/* y[0..15] = d * q - m */
static inline void store16_mul_sub(float *y, __m128i q, __m256 d, __m256 m) {
    _mm256_storeu_ps(y, _mm256_sub_ps(_mm256_mul_ps(d, i8_to_ps(q)), m));
    _mm256_storeu_ps(y + 8, _mm256_sub_ps(_mm256_mul_ps(d, i8_to_ps(high64(q))), m));
}

static inline __m256i lo_nibbles256(__m256i q) { return _mm256_and_si256(q, _mm256_set1_epi8(0x0F)); }
static inline __m256i hi_nibbles256(__m256i q) {
    return _mm256_and_si256(_mm256_srli_epi16(q, 4), _mm256_set1_epi8(0x0F));
}

/* Bit e of bits (e = 0..31) → byte e = `value` if set, else 0. */
static inline __m256i bits_to_bytes(uint32_t bits, char value) {
    const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                          2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), shuf);
    v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
    return _mm256_and_si256(v, _mm256_set1_epi8(value));
}

/* Bytes of v with `mask` set → `value`, else 0. */
static inline __m256i mask_to_bytes(__m256i v, uint8_t mask, char value) {
    const __m256i m = _mm256_set1_epi8((char)mask);
    return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(v, m), m), _mm256_set1_epi8(value));
}

void kld_dequant_f32_avx2(const void *src, float *dst, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}

void kld_dequant_f16_avx2(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 2 * i))));
    for (; i < n; i++) dst[i] = half_to_float(p + 2 * i);
}

void kld_dequant_bf16_avx2(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p + 2 * i)));
        _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)));
    }
    for (; i < n; i++) dst[i] = kld_bf16_to_f32(kld_load_u16(p + 2 * i));
}

void kld_dequant_q4_0_avx2(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    const __m128i eight = _mm_set1_epi8(8);
    for (int64_t i = 0; i < n / 32; i++, b += KLD_BYTES_Q4_0, dst += 32) {
        const __m256 d = _mm256_set1_ps(half_to_float(b));
        const __m128i qs = _mm_loadu_si128((const __m128i *)(b + 2));
        store16_mul(dst, _mm_sub_epi8(lo_nibbles(qs), eight), d);
        store16_mul(dst + 16, _mm_sub_epi8(hi_nibbles(qs), eight), d);
    }
}

void kld_dequant_q4_1_avx2(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / 32; i++, b += KLD_BYTES_Q4_1, dst += 32) {
        const __m256 d = _mm256_set1_ps(half_to_float(b));
        const __m256 m = _mm256_set1_ps(half_to_float(b + 2));
        const __m128i qs = _mm_loadu_si128((const __m128i *)(b + 4));
        store16_mul_add(dst, lo_nibbles(qs), d, m);
        store16_mul_add(dst + 16, hi_nibbles(qs), d, m);
    }
}

void kld_dequant_q5_0_avx2(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / 32; i++, b += KLD_BYTES_Q5_0, dst += 32) {
        const __m256 d = _mm256_set1_ps(half_to_float(b));
        const __m256i hb = bits_to_bytes(kld_load_u32(b + 2), 0x10);
        const __m128i qs = _mm_loadu_si128((const __m128i *)(b + 6));
        const __m128i sixteen = _mm_set1_epi8(16);
        __m128i lo = _mm_or_si128(lo_nibbles(qs), _mm256_castsi256_si128(hb));
        __m128i hi = _mm_or_si128(hi_nibbles(qs), _mm256_extracti128_si256(hb, 1));
        store16_mul(dst, _mm_sub_epi8(lo, sixteen), d);
        store16_mul(dst + 16, _mm_sub_epi8(hi, sixteen), d);
    }
}

void kld_dequant_q5_1_avx2(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / 32; i++, b += KLD_BYTES_Q5_1, dst += 32) {
        const __m256 d = _mm256_set1_ps(half_to_float(b));
        const __m256 m = _mm256_set1_ps(half_to_float(b + 2));
        const __m256i hb = bits_to_bytes(kld_load_u32(b + 4), 0x10);
        const __m128i qs = _mm_loadu_si128((const __m128i *)(b + 8));
        store16_mul_add(dst, _mm_or_si128(lo_nibbles(qs), _mm256_castsi256_si128(hb)), d, m);
        store16_mul_add(dst + 16, _mm_or_si128(hi_nibbles(qs), _mm256_extracti128_si256(hb, 1)), d,
                        m);
    }
}

void kld_dequant_q8_0_avx2(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / 32; i++, b += KLD_BYTES_Q8_0, dst += 32) {
        const __m256 d = _mm256_set1_ps(half_to_float(b));
        store16_mul(dst, _mm_loadu_si128((const __m128i *)(b + 2)), d);
        store16_mul(dst + 16, _mm_loadu_si128((const __m128i *)(b + 18)), d);
    }
}

void kld_dequant_iq4_nl_avx2(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    const __m128i levels = _mm_loadu_si128((const __m128i *)kld_iq4nl_values);
    for (int64_t i = 0; i < n / 32; i++, b += KLD_BYTES_IQ4_NL, dst += 32) {
        const __m256 d = _mm256_set1_ps(half_to_float(b));
        const __m128i qs = _mm_loadu_si128((const __m128i *)(b + 2));
        store16_mul(dst, _mm_shuffle_epi8(levels, lo_nibbles(qs)), d);
        store16_mul(dst + 16, _mm_shuffle_epi8(levels, hi_nibbles(qs)), d);
    }
}

void kld_dequant_q2_k_avx2(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    const __m256i three = _mm256_set1_epi8(3);
    for (int64_t i = 0; i < n / KLD_QK_K; i++, b += KLD_BYTES_Q2_K) {
        const float d = half_to_float(b + 80), dmin = half_to_float(b + 82);
        float dl[16], ml[16];
        for (int g = 0; g < 16; g++) {
            dl[g] = d * (float)(b[g] & 0xF);
            ml[g] = dmin * (float)(b[g] >> 4);
        }
        int is = 0;
        for (int half = 0; half < 2; half++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(b + 16 + 32 * half));
            for (int shift = 0; shift < 8; shift += 2, is += 2, dst += 32) {
                const __m256i v = _mm256_and_si256(_mm256_srli_epi16(q, shift), three);
                store16_mul_sub(dst, _mm256_castsi256_si128(v), _mm256_set1_ps(dl[is]),
                                _mm256_set1_ps(ml[is]));
                store16_mul_sub(dst + 16, _mm256_extracti128_si256(v, 1),
                                _mm256_set1_ps(dl[is + 1]), _mm256_set1_ps(ml[is + 1]));
            }
        }
    }
}

void kld_dequant_q3_k_avx2(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    const __m256i three = _mm256_set1_epi8(3);
    for (int64_t i = 0; i < n / KLD_QK_K; i++, b += KLD_BYTES_Q3_K) {
        int8_t scales[16];
        kld_q3k_scales(b + 96, scales);
        const float d_all = half_to_float(b + 108);
        const __m256i hm = _mm256_loadu_si256((const __m256i *)b);
        int is = 0, bit = 0;
        for (int half = 0; half < 2; half++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(b + 32 + 32 * half));
            for (int shift = 0; shift < 8; shift += 2, is += 2, bit++, dst += 32) {
                /* subtract 4 where the high bit is clear */
                const __m256i four = _mm256_sub_epi8(_mm256_set1_epi8(4),
                                                     mask_to_bytes(hm, (uint8_t)(1u << bit), 4));
                const __m256i v =
                    _mm256_sub_epi8(_mm256_and_si256(_mm256_srli_epi16(q, shift), three), four);
                store16_mul(dst, _mm256_castsi256_si128(v), _mm256_set1_ps(d_all * (float)scales[is]));
                store16_mul(dst + 16, _mm256_extracti128_si256(v, 1),
                            _mm256_set1_ps(d_all * (float)scales[is + 1]));
            }
        }
    }
}

/* 32 values d*q - m from the 32 int8 lanes of v. */
static inline void store32_mul_sub(float *y, __m256i v, float d, float m) {
    const __m256 vd = _mm256_set1_ps(d), vm = _mm256_set1_ps(m);
    store16_mul_sub(y, _mm256_castsi256_si128(v), vd, vm);
    store16_mul_sub(y + 16, _mm256_extracti128_si256(v, 1), vd, vm);
}

void kld_dequant_q4_k_avx2(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / KLD_QK_K; i++, b += KLD_BYTES_Q4_K) {
        const float d = half_to_float(b), dmin = half_to_float(b + 2);
        for (int g = 0; g < 8; g += 2, dst += 64) {
            uint8_t sc1, m1, sc2, m2;
            kld_k4_scale_min(g, b + 4, &sc1, &m1);
            kld_k4_scale_min(g + 1, b + 4, &sc2, &m2);
            const __m256i q = _mm256_loadu_si256((const __m256i *)(b + 16 + 16 * g));
            store32_mul_sub(dst, lo_nibbles256(q), d * (float)sc1, dmin * (float)m1);
            store32_mul_sub(dst + 32, hi_nibbles256(q), d * (float)sc2, dmin * (float)m2);
        }
    }
}

void kld_dequant_q5_k_avx2(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / KLD_QK_K; i++, b += KLD_BYTES_Q5_K) {
        const float d = half_to_float(b), dmin = half_to_float(b + 2);
        const __m256i qh = _mm256_loadu_si256((const __m256i *)(b + 16));
        for (int g = 0; g < 8; g += 2, dst += 64) {
            uint8_t sc1, m1, sc2, m2;
            kld_k4_scale_min(g, b + 4, &sc1, &m1);
            kld_k4_scale_min(g + 1, b + 4, &sc2, &m2);
            const __m256i q = _mm256_loadu_si256((const __m256i *)(b + 48 + 16 * g));
            const __m256i lo = _mm256_or_si256(lo_nibbles256(q), mask_to_bytes(qh, (uint8_t)(1u << g), 16));
            const __m256i hi = _mm256_or_si256(hi_nibbles256(q), mask_to_bytes(qh, (uint8_t)(2u << g), 16));
            store32_mul_sub(dst, lo, d * (float)sc1, dmin * (float)m1);
            store32_mul_sub(dst + 32, hi, d * (float)sc2, dmin * (float)m2);
        }
    }
}

/* 32 values from v, scaled by s0 (first 16) and s1 (last 16). */
static inline void store32_mul2(float *y, __m256i v, float s0, float s1) {
    store16_mul(y, _mm256_castsi256_si128(v), _mm256_set1_ps(s0));
    store16_mul(y + 16, _mm256_extracti128_si256(v, 1), _mm256_set1_ps(s1));
}

void kld_dequant_q6_k_avx2(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    const __m256i three = _mm256_set1_epi8(3), m32 = _mm256_set1_epi8(32);
    for (int64_t i = 0; i < n / KLD_QK_K; i++, b += KLD_BYTES_Q6_K) {
        const float d = half_to_float(b + 208);
        const int8_t *sc = (const int8_t *)(b + 192);
        float ds[16];
        for (int g = 0; g < 16; g++) ds[g] = d * (float)sc[g];
        for (int half = 0; half < 2; half++, dst += 128) {
            const uint8_t *ql = b + 64 * half, *qhp = b + 128 + 32 * half;
            const __m256i ql0 = _mm256_loadu_si256((const __m256i *)ql);
            const __m256i ql1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
            const __m256i qh = _mm256_loadu_si256((const __m256i *)qhp);
            /* (qh >> s) & 3, moved to bits 4-5: the mask keeps bits of the same byte */
#define QH_BITS(s) _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, s), three), 4)
            const __m256i q1 = _mm256_sub_epi8(_mm256_or_si256(lo_nibbles256(ql0), QH_BITS(0)), m32);
            const __m256i q2 = _mm256_sub_epi8(_mm256_or_si256(lo_nibbles256(ql1), QH_BITS(2)), m32);
            const __m256i q3 = _mm256_sub_epi8(_mm256_or_si256(hi_nibbles256(ql0), QH_BITS(4)), m32);
            const __m256i q4 = _mm256_sub_epi8(_mm256_or_si256(hi_nibbles256(ql1), QH_BITS(6)), m32);
#undef QH_BITS
            const float *s = ds + 8 * half;
            store32_mul2(dst, q1, s[0], s[1]);
            store32_mul2(dst + 32, q2, s[2], s[3]);
            store32_mul2(dst + 64, q3, s[4], s[5]);
            store32_mul2(dst + 96, q4, s[6], s[7]);
        }
    }
}

void kld_dequant_iq4_xs_avx2(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    const __m128i levels = _mm_loadu_si128((const __m128i *)kld_iq4nl_values);
    for (int64_t i = 0; i < n / KLD_QK_K; i++, b += KLD_BYTES_IQ4_XS) {
        const float d = half_to_float(b);
        const uint16_t scales_h = kld_load_u16(b + 2);
        for (int g = 0; g < 8; g++, dst += 32) {
            const int ls = ((b[4 + g / 2] >> 4 * (g % 2)) & 0xF) | ((scales_h >> 2 * g) & 3) << 4;
            const __m256 dl = _mm256_set1_ps(d * (float)(ls - 32));
            const __m128i qs = _mm_loadu_si128((const __m128i *)(b + 8 + 16 * g));
            store16_mul(dst, _mm_shuffle_epi8(levels, lo_nibbles(qs)), dl);
            store16_mul(dst + 16, _mm_shuffle_epi8(levels, hi_nibbles(qs)), dl);
        }
    }
}
