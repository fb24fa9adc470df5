/* repacked_avx2.c — the one-row product and the GEMM panel over weights
 * repacked at load (kernels.h: the f16 and q4_K layouts; weight_pack.c
 * writes them). A panel of 32 rows is one sequential stream whose columns
 * already hold 8 rows side by side, so neither kernel transposes. Both
 * evaluate exactly what the row-major kernels do: f16 widening is exact,
 * q4_K is (d·sc)·q − dmin·m unfused in the reference's order, and every
 * output is one fma chain over k in order — the reference's bits. */
#include "engine/kernels.h"
#include "engine/lanes_avx2.h"
#include "tensor/kernels.h"
#include "tensor/types.h"

#include <immintrin.h>

static inline __m256 widen8(const uint16_t *p) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
}


/* The four groups' chains start from y (masked to `rows`) or from 0, and
 * end there; rows past `rows` are the layout's zero padding. */
typedef struct chains {
    __m256 acc[4];
    __m256i mask[4];
} chains;

static inline void chains_start(chains *c, const float *y, int rows, bool load) {
    for (int g = 0; g < 4; g++) {
        c->mask[g] = lane_mask(rows - 8 * g);
        c->acc[g] = load ? _mm256_maskload_ps(y + 8 * g, c->mask[g]) : _mm256_setzero_ps();
    }
}

static inline void chains_store(const chains *c, float *y) {
    for (int g = 0; g < 4; g++) _mm256_maskstore_ps(y + 8 * g, c->mask[g], c->acc[g]);
}

/* ---- f16: column k is 64 bytes ---- */

#define F16_STEP(k)                                                      \
    do {                                                                 \
        const __m256 av = _mm256_broadcast_ss(a + (k));                  \
        const uint16_t *col = w + (k) * KLD_REPACK_ROWS;                 \
        acc0 = _mm256_fmadd_ps(av, widen8(col), acc0);                   \
        acc1 = _mm256_fmadd_ps(av, widen8(col + 8), acc1);               \
        acc2 = _mm256_fmadd_ps(av, widen8(col + 16), acc2);              \
        acc3 = _mm256_fmadd_ps(av, widen8(col + 24), acc3);              \
    } while (0)

static void gemv_f16(const uint8_t *panel, int rows, int64_t K, const float *a, float *y, bool load) {
    const uint16_t *w = (const uint16_t *)(const void *)panel;
    chains c;
    chains_start(&c, y, rows, load);
    __m256 acc0 = c.acc[0], acc1 = c.acc[1], acc2 = c.acc[2], acc3 = c.acc[3];
    int64_t k = 0;
    for (; k + 2 <= K; k += 2) {
        /* sequential already; 2 KiB ahead also carries the stream across pages */
        _mm_prefetch((const char *)(w + (k + 32) * KLD_REPACK_ROWS), _MM_HINT_T0);
        F16_STEP(k);
        F16_STEP(k + 1);
    }
    if (k < K) F16_STEP(k);
    c.acc[0] = acc0, c.acc[1] = acc1, c.acc[2] = acc2, c.acc[3] = acc3;
    chains_store(&c, y);
}

static void pack_f16(const uint8_t *panel, int64_t K, int col0, int nr, int64_t kb, int64_t kc, float *out) {
    (void)K;
    const uint16_t *w = (const uint16_t *)(const void *)panel + kb * KLD_REPACK_ROWS + col0;
    for (int64_t k = 0; k < kc; k++)
        for (int j = 0; j < nr; j += 8) _mm256_storeu_ps(out + k * nr + j, widen8(w + k * KLD_REPACK_ROWS + j));
}

/* ---- q4_K: records of 8 rows per super-block ---- */

enum { Q4_D = 0, Q4_DMIN = 16, Q4_SC = 32, Q4_M = 96, Q4_Q = 160 };
#define Q4_SUPER (4 * KLD_Q4KX8_BYTES) /* one super-block of the 32-row panel */

/* The 8 rows' multipliers d·sc and mins dmin·m of group s (to_float's products). */
static inline void q4_scales(const uint8_t *rec, int s, __m256 *mul, __m256 *min) {
    const __m256 d = widen8((const uint16_t *)(const void *)(rec + Q4_D));
    const __m256 dm = widen8((const uint16_t *)(const void *)(rec + Q4_DMIN));
    const __m128i sc = _mm_loadl_epi64((const __m128i *)(const void *)(rec + Q4_SC + 8 * s));
    const __m128i m = _mm_loadl_epi64((const __m128i *)(const void *)(rec + Q4_M + 8 * s));
    *mul = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(sc)));
    *min = _mm256_mul_ps(dm, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(m)));
}

/* Columns 2c and 2c+1 of the 8 rows: mul·q − min. */
static inline void q4_pair(const uint8_t *rec, int c, __m256 mul, __m256 min, __m256 *w0, __m256 *w1) {
    const __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(rec + Q4_Q + 8 * c)));
    const __m256 q0 = _mm256_cvtepi32_ps(_mm256_and_si256(b, _mm256_set1_epi32(0x0F)));
    const __m256 q1 = _mm256_cvtepi32_ps(_mm256_srli_epi32(b, 4));
    *w0 = _mm256_sub_ps(_mm256_mul_ps(mul, q0), min);
    *w1 = _mm256_sub_ps(_mm256_mul_ps(mul, q1), min);
}

/* One group's chain over columns 2c and 2c+1 (in order). */
#define Q4_PAIR(acc, g)                                                                   \
    do {                                                                                  \
        __m256 w0, w1;                                                                    \
        q4_pair(rec + (g) * KLD_Q4KX8_BYTES, cc, mul[g], min[g], &w0, &w1);               \
        acc = _mm256_fmadd_ps(a1, w1, _mm256_fmadd_ps(a0, w0, acc));                      \
    } while (0)

static void gemv_q4_k(const uint8_t *panel, int rows, int64_t K, const float *a, float *y, bool load) {
    chains c;
    chains_start(&c, y, rows, load);
    /* the chains in named registers: -O2 keeps an indexed array in memory */
    __m256 acc0 = c.acc[0], acc1 = c.acc[1], acc2 = c.acc[2], acc3 = c.acc[3];
    for (int64_t sb = 0; sb < K / 256; sb++) {
        const uint8_t *rec = panel + sb * Q4_SUPER;
        _mm_prefetch((const char *)(rec + Q4_SUPER), _MM_HINT_T0);
        _mm_prefetch((const char *)(rec + Q4_SUPER + 64), _MM_HINT_T0);
        const float *ab = a + 256 * sb;
        for (int s = 0; s < 8; s++) {
            __m256 mul[4], min[4];
#pragma GCC unroll 4
            for (int g = 0; g < 4; g++) q4_scales(rec + g * KLD_Q4KX8_BYTES, s, &mul[g], &min[g]);
            for (int cc = 16 * s; cc < 16 * s + 16; cc++) {
                const __m256 a0 = _mm256_broadcast_ss(ab + 2 * cc), a1 = _mm256_broadcast_ss(ab + 2 * cc + 1);
                Q4_PAIR(acc0, 0);
                Q4_PAIR(acc1, 1);
                Q4_PAIR(acc2, 2);
                Q4_PAIR(acc3, 3);
            }
        }
    }
    c.acc[0] = acc0, c.acc[1] = acc1, c.acc[2] = acc2, c.acc[3] = acc3;
    chains_store(&c, y);
}

static void pack_q4_k(const uint8_t *panel, int64_t K, int col0, int nr, int64_t kb, int64_t kc, float *out) {
    (void)K;
    for (int64_t sb = kb / 256; sb < (kb + kc) / 256; sb++)
        for (int g = col0 / 8; g < (col0 + nr) / 8; g++) {
            const uint8_t *rec = panel + sb * Q4_SUPER + g * KLD_Q4KX8_BYTES;
            float *o = out + (sb * 256 - kb) * nr + 8 * g - col0;
            for (int s = 0; s < 8; s++) {
                __m256 mul, min, w0, w1;
                q4_scales(rec, s, &mul, &min);
                for (int cc = 16 * s; cc < 16 * s + 16; cc++) {
                    q4_pair(rec, cc, mul, min, &w0, &w1);
                    _mm256_storeu_ps(o + (2 * cc) * nr, w0);
                    _mm256_storeu_ps(o + (2 * cc + 1) * nr, w1);
                }
            }
        }
}

/* ---- writing the layouts ---- */

/* In place: r[j] = element j of each of r[0..7] (an 8×8 transpose of
 * 16-bit elements: three rounds of interleaves, 16, 32 and 64 bits wide). */
static inline void transpose8x8_u16(__m128i r[8]) {
    __m128i a[8], b[8];
    for (int i = 0; i < 4; i++) {
        a[2 * i] = _mm_unpacklo_epi16(r[2 * i], r[2 * i + 1]);
        a[2 * i + 1] = _mm_unpackhi_epi16(r[2 * i], r[2 * i + 1]);
    }
    for (int h = 0; h < 2; h++) /* h: rows 0-3, rows 4-7 */
        for (int i = 0; i < 2; i++) {
            b[4 * h + 2 * i] = _mm_unpacklo_epi32(a[4 * h + i], a[4 * h + 2 + i]);
            b[4 * h + 2 * i + 1] = _mm_unpackhi_epi32(a[4 * h + i], a[4 * h + 2 + i]);
        }
    for (int i = 0; i < 4; i++) {
        r[2 * i] = _mm_unpacklo_epi64(b[i], b[4 + i]);
        r[2 * i + 1] = _mm_unpackhi_epi64(b[i], b[4 + i]);
    }
}

static void repack_f16(const uint8_t *const *row, int64_t K, uint8_t *panel) {
    uint16_t *dst = (uint16_t *)(void *)panel;
    int64_t k = 0;
    for (; k + 8 <= K; k += 8)
        for (int g = 0; g < 4; g++) {
            __m128i r[8];
            for (int i = 0; i < 8; i++)
                r[i] = row[8 * g + i] ? _mm_loadu_si128((const __m128i *)(const void *)(row[8 * g + i] + 2 * k))
                                      : _mm_setzero_si128();
            transpose8x8_u16(r);
            for (int j = 0; j < 8; j++) _mm_storeu_si128((__m128i *)(void *)(dst + (k + j) * KLD_REPACK_ROWS + 8 * g), r[j]);
        }
    for (; k < K; k++)
        for (int r = 0; r < KLD_REPACK_ROWS; r++) {
            uint16_t v = 0;
            if (row[r]) memcpy(&v, row[r] + 2 * k, 2);
            dst[k * KLD_REPACK_ROWS + r] = v;
        }
}

/* 16 bytes of nibble pairs from 32 nibbles n[0..31] (one per byte, < 16):
 * byte i = n[2i] | n[2i+1] << 4. */
static inline __m128i nibble_pairs(__m128i n0, __m128i n1) {
    const __m128i lo = _mm_set1_epi16(0x000F), hi = _mm_set1_epi16(0x00F0);
    const __m128i p0 = _mm_or_si128(_mm_and_si128(n0, lo), _mm_and_si128(_mm_srli_epi16(n0, 4), hi));
    const __m128i p1 = _mm_or_si128(_mm_and_si128(n1, lo), _mm_and_si128(_mm_srli_epi16(n1, 4), hi));
    return _mm_packus_epi16(p0, p1);
}

/* q4_K: for each super-block, four records of 8 rows (kernels.h). */
static void repack_q4_k(const uint8_t *const *row, int64_t K, uint8_t *panel) {
    const __m128i m4 = _mm_set1_epi8(0x0F);
    for (int64_t sb = 0; sb < K / 256; sb++)
        for (int g = 0; g < 4; g++) {
            uint8_t *rec = panel + (sb * 4 + g) * KLD_Q4KX8_BYTES;
            __m128i pairs[8][8]; /* [row][16 column pairs]: pair bytes of row r, columns 32j..32j+31 */
            memset(rec, 0, Q4_Q);
            for (int r = 0; r < 8; r++) {
                const uint8_t *b = row[8 * g + r];
                if (!b) {
                    for (int j = 0; j < 8; j++) pairs[r][j] = _mm_setzero_si128();
                    continue;
                }
                b += sb * KLD_BYTES_Q4_K;
                memcpy(rec + Q4_D + 2 * r, b, 2);
                memcpy(rec + Q4_DMIN + 2 * r, b + 2, 2);
                for (int s = 0; s < 8; s++) kld_k4_scale_min(s, b + 4, &rec[Q4_SC + 8 * s + r], &rec[Q4_M + 8 * s + r]);
                /* 32 bytes of quants per 64 columns: the low nibbles are columns 0-31, the high ones 32-63 */
                for (int h = 0; h < 4; h++) {
                    const __m128i x0 = _mm_loadu_si128((const __m128i *)(const void *)(b + 16 + 32 * h));
                    const __m128i x1 = _mm_loadu_si128((const __m128i *)(const void *)(b + 32 + 32 * h));
                    pairs[r][2 * h] = nibble_pairs(_mm_and_si128(x0, m4), _mm_and_si128(x1, m4));
                    pairs[r][2 * h + 1] = nibble_pairs(_mm_and_si128(_mm_srli_epi16(x0, 4), m4),
                                                       _mm_and_si128(_mm_srli_epi16(x1, 4), m4));
                }
            }
            /* rows side by side: 8 rows × 16 pair bytes → 16 pairs × 8 rows, per group of 32 columns */
            for (int j = 0; j < 8; j++) {
                __m128i a[8], c[8];
                for (int i = 0; i < 4; i++) {
                    a[2 * i] = _mm_unpacklo_epi8(pairs[2 * i][j], pairs[2 * i + 1][j]);
                    a[2 * i + 1] = _mm_unpackhi_epi8(pairs[2 * i][j], pairs[2 * i + 1][j]);
                }
                for (int h = 0; h < 2; h++)
                    for (int i = 0; i < 2; i++) {
                        c[4 * h + 2 * i] = _mm_unpacklo_epi16(a[4 * h + i], a[4 * h + 2 + i]);
                        c[4 * h + 2 * i + 1] = _mm_unpackhi_epi16(a[4 * h + i], a[4 * h + 2 + i]);
                    }
                uint8_t *q = rec + Q4_Q + 128 * j;
                for (int i = 0; i < 4; i++) {
                    _mm_storeu_si128((__m128i *)(void *)(q + 32 * i), _mm_unpacklo_epi32(c[i], c[4 + i]));
                    _mm_storeu_si128((__m128i *)(void *)(q + 32 * i + 16), _mm_unpackhi_epi32(c[i], c[4 + i]));
                }
            }
        }
}

kld_repack_fn kld_avx2_repack(uint32_t type) {
    return type == KLD_TYPE_F16 ? repack_f16 : type == KLD_TYPE_Q4_K ? repack_q4_k : NULL;
}

kld_gemv_repacked_fn kld_avx2_gemv_repacked(uint32_t type) {
    return type == KLD_TYPE_F16 ? gemv_f16 : type == KLD_TYPE_Q4_K ? gemv_q4_k : NULL;
}

kld_pack_repacked_fn kld_avx2_pack_repacked(uint32_t type) {
    return type == KLD_TYPE_F16 ? pack_f16 : type == KLD_TYPE_Q4_K ? pack_q4_k : NULL;
}
