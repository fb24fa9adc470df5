/* dequant_avx2.h — lane helpers shared by the AVX2 + F16C row kernels
 * (dequant_avx2.c, dequant_iq_avx2.c); include only from *_avx2.c files. */
#ifndef KLD_TENSOR_DEQUANT_AVX2_H
#define KLD_TENSOR_DEQUANT_AVX2_H

#include "tensor/kernels.h"

#include <immintrin.h>

static inline float half_to_float(const uint8_t *p) { return _cvtsh_ss(kld_load_u16(p)); }

/* The low 8 int8 lanes of v as floats. */
static inline __m256 i8_to_ps(__m128i v) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)); }
static inline __m128i high64(__m128i v) { return _mm_unpackhi_epi64(v, v); }

/* y[0..15] = q * d */
static inline void store16_mul(float *y, __m128i q, __m256 d) {
    _mm256_storeu_ps(y, _mm256_mul_ps(i8_to_ps(q), d));
    _mm256_storeu_ps(y + 8, _mm256_mul_ps(i8_to_ps(high64(q)), d));
}

static inline __m128i lo_nibbles(__m128i q) { return _mm_and_si128(q, _mm_set1_epi8(0x0F)); }
static inline __m128i hi_nibbles(__m128i q) {
    return _mm_and_si128(_mm_srli_epi16(q, 4), _mm_set1_epi8(0x0F));
}

#endif
