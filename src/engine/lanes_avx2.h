/* lanes_avx2.h — lane masks shared by the AVX2 kernel files (include only
 * from *_avx2.c files, which are compiled with -mavx2). */
#ifndef KLD_ENGINE_LANES_AVX2_H
#define KLD_ENGINE_LANES_AVX2_H

#include <immintrin.h>
#include <stdint.h>

/* Lanes i < n of 8 (none for n <= 0, all for n >= 8). */
static inline __m256i lane_mask(int64_t n) {
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n > 8 ? 8 : (int)n), idx);
}

#endif
