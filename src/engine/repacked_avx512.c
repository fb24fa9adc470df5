/* repacked_avx512.c — the one-row (decode) product over q4_K and q6_K
 * weights repacked at load (kernels.h layouts), 16 rows per vector.
 *
 * Why: the AVX2 kernel widens each 8-row record column through 8-lane
 * conversions and fused multiplies; on a CPU with full-width 512-bit pipes
 * that throughput, not memory, bounds decode. Here two records (rows 8g ..
 * 8g+15) share one vector: their 8-byte columns are joined into 16 bytes and
 * widened once. Each output is still one fma chain over k in order, with
 * the same weight values (mul·q − min for q4_K, mul·q for q6_K, as
 * repacked_avx2.c and the reference round them), so the bits are the
 * reference's. f16 keeps the AVX2 kernel: two conversions and two fmas per
 * column either way, bound by memory. */
#include "engine/kernels.h"
#include "engine/repacked_layout.h"
#include "tensor/types.h"

#include <immintrin.h>

/* Lanes i < n of 16 (none for n <= 0). */
static inline __mmask16 lanes16(int n) { return n <= 0 ? 0 : n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1); }

/* The chains of 16 rows start from y (its lanes in m) or from 0. */
static inline __m512 chain_start(const float *y, __mmask16 m, bool load) {
    return load ? _mm512_maskz_loadu_ps(m, y) : _mm512_setzero_ps();
}

/* 8 bytes at p then 8 at q as one 16-byte vector (rows 8g.. then 8g+8..). */
static inline __m128i join8(const uint8_t *p, const uint8_t *q) {
    const __m128i lo = _mm_loadl_epi64((const __m128i *)(const void *)p);
    return _mm_castpd_si128(_mm_loadh_pd(_mm_castsi128_pd(lo), (const double *)(const void *)q));
}

/* 8 halves at p then 8 at q, widened (exact). */
static inline __m512 widen16(const uint8_t *p, const uint8_t *q) {
    const __m128i lo = _mm_loadu_si128((const __m128i *)(const void *)p);
    const __m128i hi = _mm_loadu_si128((const __m128i *)(const void *)q);
    return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1));
}

/* ---- q4_K ---- */

typedef struct q4_group16 { __m512 mul, mul16, min; } q4_group16;

/* Rows of records r0 and r1, group s: d·sc, (d·sc)/16 and dmin·m. */
static inline q4_group16 q4_scales16(const uint8_t *r0, const uint8_t *r1, int s) {
    const __m512 d = widen16(r0 + Q4_D, r1 + Q4_D), dm = widen16(r0 + Q4_DMIN, r1 + Q4_DMIN);
    const __m512 sc = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(join8(r0 + Q4_SC + 8 * s, r1 + Q4_SC + 8 * s)));
    const __m512 m = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(join8(r0 + Q4_M + 8 * s, r1 + Q4_M + 8 * s)));
    q4_group16 g;
    g.mul = _mm512_mul_ps(d, sc);
    g.mul16 = _mm512_mul_ps(g.mul, _mm512_set1_ps(0.0625f));
    g.min = _mm512_mul_ps(dm, m);
    return g;
}

/* acc = its chain advanced over columns 2c and 2c+1 of 16 rows. */
static inline __m512 q4_pair16(const uint8_t *r0, const uint8_t *r1, int c, const q4_group16 *g, __m512 a0,
                               __m512 a1, __m512 acc) {
    const __m512i b = _mm512_cvtepu8_epi32(join8(r0 + Q4_Q + 8 * c, r1 + Q4_Q + 8 * c));
    const __m512 q0 = _mm512_cvtepi32_ps(_mm512_and_si512(b, _mm512_set1_epi32(0x0F)));
    const __m512 q1x16 = _mm512_cvtepi32_ps(_mm512_and_si512(b, _mm512_set1_epi32(0xF0)));
    const __m512 w0 = _mm512_fmsub_ps(g->mul, q0, g->min), w1 = _mm512_fmsub_ps(g->mul16, q1x16, g->min);
    return _mm512_fmadd_ps(a1, w1, _mm512_fmadd_ps(a0, w0, acc));
}

static void gemv_q4_k(const uint8_t *panel, int rows, int64_t K, const float *a, float *y, bool load) {
    const __mmask16 m0 = lanes16(rows), m1 = lanes16(rows - 16);
    __m512 acc0 = chain_start(y, m0, load), acc1 = chain_start(y + 16, m1, load);
    for (int64_t sb = 0; sb < K / 256; sb++) {
        const uint8_t *r0 = panel + sb * Q4_SUPER, *r1 = r0 + KLD_Q4KX8_BYTES, *r2 = r1 + KLD_Q4KX8_BYTES,
                      *r3 = r2 + KLD_Q4KX8_BYTES;
        const float *ab = a + 256 * sb;
        for (int s = 0; s < 8; s++) {
            prefetch_next(r0, Q4_SUPER, s, 8);
            const q4_group16 g0 = q4_scales16(r0, r1, s), g1 = q4_scales16(r2, r3, s);
            for (int c = 16 * s; c < 16 * s + 16; c++) {
                const __m512 a0 = _mm512_set1_ps(ab[2 * c]), a1 = _mm512_set1_ps(ab[2 * c + 1]);
                acc0 = q4_pair16(r0, r1, c, &g0, a0, a1, acc0);
                acc1 = q4_pair16(r2, r3, c, &g1, a0, a1, acc1);
            }
        }
    }
    _mm512_mask_storeu_ps(y, m0, acc0);
    _mm512_mask_storeu_ps(y + 16, m1, acc1);
}

/* ---- q6_K ---- */

/* d·sc of the 16 rows of records r0, r1 for columns 16j.. (to_float's product). */
static inline __m512 q6_scale16(const uint8_t *r0, const uint8_t *r1, __m512 d, int j) {
    return _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(join8(r0 + Q6_SC + 8 * j, r1 + Q6_SC + 8 * j))));
}

static inline __m512 q6_col16(const uint8_t *r0, const uint8_t *r1, int k, __m512 mul, __m512 av, __m512 acc) {
    const __m512 q = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(join8(r0 + Q6_Q + 8 * k, r1 + Q6_Q + 8 * k)));
    return _mm512_fmadd_ps(av, _mm512_mul_ps(mul, q), acc);
}

static void gemv_q6_k(const uint8_t *panel, int rows, int64_t K, const float *a, float *y, bool load) {
    const __mmask16 m0 = lanes16(rows), m1 = lanes16(rows - 16);
    __m512 acc0 = chain_start(y, m0, load), acc1 = chain_start(y + 16, m1, load);
    for (int64_t sb = 0; sb < K / 256; sb++) {
        const uint8_t *r0 = panel + sb * Q6_SUPER, *r1 = r0 + KLD_Q6KX8_BYTES, *r2 = r1 + KLD_Q6KX8_BYTES,
                      *r3 = r2 + KLD_Q6KX8_BYTES;
        const float *ab = a + 256 * sb;
        const __m512 d0 = widen16(r0 + Q6_D, r1 + Q6_D), d1 = widen16(r2 + Q6_D, r3 + Q6_D);
        for (int j = 0; j < 16; j++) {
            prefetch_next(r0, Q6_SUPER, j, 16);
            const __m512 mul0 = q6_scale16(r0, r1, d0, j), mul1 = q6_scale16(r2, r3, d1, j);
            for (int k = 16 * j; k < 16 * j + 16; k++) {
                const __m512 av = _mm512_set1_ps(ab[k]);
                acc0 = q6_col16(r0, r1, k, mul0, av, acc0);
                acc1 = q6_col16(r2, r3, k, mul1, av, acc1);
            }
        }
    }
    _mm512_mask_storeu_ps(y, m0, acc0);
    _mm512_mask_storeu_ps(y + 16, m1, acc1);
}

kld_gemv_repacked_fn kld_avx512_gemv_repacked(uint32_t type) {
    if (type == KLD_TYPE_Q4_K) return gemv_q4_k;
    if (type == KLD_TYPE_Q6_K) return gemv_q6_k;
    return kld_avx2_gemv_repacked(type);
}
