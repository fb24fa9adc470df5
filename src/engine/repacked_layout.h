/* repacked_layout.h — byte offsets inside the repacked q4_K and q6_K
 * records (kernels.h describes the layouts) and the prefetch their
 * one-row kernels share; for repacked_avx2.c and repacked_avx512.c only
 * (they are compiled with SIMD flags). */
#ifndef KLD_ENGINE_REPACKED_LAYOUT_H
#define KLD_ENGINE_REPACKED_LAYOUT_H

#include "engine/kernels.h"

#include <immintrin.h>
#include <stdint.h>

/* q4_K record of 8 rows: d[8], dmin[8] (f16), sc[8][8], m[8][8], then the nibble pairs */
enum { Q4_D = 0, Q4_DMIN = 16, Q4_SC = 32, Q4_M = 96, Q4_Q = 160 };
#define Q4_SUPER (4 * KLD_Q4KX8_BYTES) /* one super-block of the 32-row panel */
/* q6_K record of 8 rows: d[8] (f16), sc[16][8], then q − 32 per column */
enum { Q6_D = 0, Q6_SC = 16, Q6_Q = 144 };
#define Q6_SUPER (4 * KLD_Q6KX8_BYTES)

/* Part `part` of `parts` of the super-block after the one at rec: its four
 * records are read as four streams side by side, which the hardware
 * prefetcher does not follow well. */
static inline void prefetch_next(const uint8_t *rec, int super_bytes, int part, int parts) {
    const uint8_t *p = rec + super_bytes + part * (super_bytes / parts);
    for (int l = 0; l < super_bytes / parts; l += 64) _mm_prefetch((const char *)(p + l), _MM_HINT_T0);
}

#endif
