/* repacked_avx2.c — the one-row product and the GEMM panel over weights
 * repacked at load (kernels.h: the f16, q4_K and q6_K layouts;
 * weight_pack.c writes them). A panel of 32 rows is one sequential stream
 * whose columns already hold 8 rows side by side, so neither kernel
 * transposes. Both evaluate exactly what the row-major kernels do: f16
 * widening is exact, q4_K is (d·sc)·q − dmin·m as the reference rounds it,
 * q6_K (d·sc)·q, and every output is one fma chain over k in order — the
 * reference's bits. */
#include "engine/kernels.h"
#include "engine/repacked_layout.h"
#include "engine/lanes_avx2.h"
#include "tensor/kernels.h"
#include "tensor/types.h"

#include <immintrin.h>

static inline __m256 widen8(const uint16_t *p) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
}

/* The four groups' chains, in named registers (-O2 keeps an indexed array
 * of vectors in memory), start from y (masked to `rows`) or from 0 and end
 * there; rows past `rows` are the layout's zero padding. */
static inline void chain_masks(int rows, __m256i mask[4]) {
    for (int g = 0; g < 4; g++) mask[g] = lane_mask(rows - 8 * g);
}

static inline __m256 chain_start(const float *y, __m256i mask, bool load) {
    return load ? _mm256_maskload_ps(y, mask) : _mm256_setzero_ps();
}

static inline void chains_store(float *y, const __m256i mask[4], __m256 a0, __m256 a1, __m256 a2, __m256 a3) {
    _mm256_maskstore_ps(y, mask[0], a0);
    _mm256_maskstore_ps(y + 8, mask[1], a1);
    _mm256_maskstore_ps(y + 16, mask[2], a2);
    _mm256_maskstore_ps(y + 24, mask[3], a3);
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
    __m256i mask[4];
    chain_masks(rows, mask);
    __m256 acc0 = chain_start(y, mask[0], load), acc1 = chain_start(y + 8, mask[1], load),
           acc2 = chain_start(y + 16, mask[2], load), acc3 = chain_start(y + 24, mask[3], load);
    int64_t k = 0;
    for (; k + 2 <= K; k += 2) {
        /* sequential already; 2 KiB ahead also carries the stream across pages */
        _mm_prefetch((const char *)(w + (k + 32) * KLD_REPACK_ROWS), _MM_HINT_T0);
        F16_STEP(k);
        F16_STEP(k + 1);
    }
    if (k < K) F16_STEP(k);
    chains_store(y, mask, acc0, acc1, acc2, acc3);
}

static void pack_f16(const uint8_t *panel, int64_t K, int col0, int nr, int64_t kb, int64_t kc, float *out) {
    (void)K;
    const uint16_t *w = (const uint16_t *)(const void *)panel + kb * KLD_REPACK_ROWS + col0;
    for (int64_t k = 0; k < kc; k++)
        for (int j = 0; j < nr; j += 8) _mm256_storeu_ps(out + k * nr + j, widen8(w + k * KLD_REPACK_ROWS + j));
}

/* ---- q4_K: records of 8 rows per super-block ---- */

/* The 8 rows' multipliers d·sc and mins dmin·m of group s (to_float's
 * products), and mul/16 for the high nibbles read in place (16·q). */
typedef struct q4_group { __m256 mul, mul16, min; } q4_group;

static inline q4_group q4_scales(const uint8_t *rec, int s) {
    const __m256 d = widen8((const uint16_t *)(const void *)(rec + Q4_D));
    const __m256 dm = widen8((const uint16_t *)(const void *)(rec + Q4_DMIN));
    const __m128i sc = _mm_loadl_epi64((const __m128i *)(const void *)(rec + Q4_SC + 8 * s));
    const __m128i m = _mm_loadl_epi64((const __m128i *)(const void *)(rec + Q4_M + 8 * s));
    q4_group r;
    r.mul = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(sc)));
    r.mul16 = _mm256_mul_ps(r.mul, _mm256_set1_ps(0.0625f));
    r.min = _mm256_mul_ps(dm, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(m)));
    return r;
}

/* Columns 2c and 2c+1 of the 8 rows: mul·q − min. Still to_float's value:
 * d·sc has at most 17 significant bits, so mul·q (21) is exact and the
 * fused and unfused forms round once, alike; mul/16 · 16q is mul·q. */
static inline void q4_pair(const uint8_t *rec, int c, const q4_group *s, __m256 *w0, __m256 *w1) {
    const __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(rec + Q4_Q + 8 * c)));
    const __m256 q0 = _mm256_cvtepi32_ps(_mm256_and_si256(b, _mm256_set1_epi32(0x0F)));
    const __m256 q1x16 = _mm256_cvtepi32_ps(_mm256_and_si256(b, _mm256_set1_epi32(0xF0)));
    *w0 = _mm256_fmsub_ps(s->mul, q0, s->min);
    *w1 = _mm256_fmsub_ps(s->mul16, q1x16, s->min);
}

/* One group's chain over columns 2c and 2c+1 (in order). */
#define Q4_PAIR(acc, g)                                                                   \
    do {                                                                                  \
        __m256 w0, w1;                                                                    \
        q4_pair(rec + (g) * KLD_Q4KX8_BYTES, cc, &grp[g], &w0, &w1);                      \
        acc = _mm256_fmadd_ps(a1, w1, _mm256_fmadd_ps(a0, w0, acc));                      \
    } while (0)

static void gemv_q4_k(const uint8_t *panel, int rows, int64_t K, const float *a, float *y, bool load) {
    __m256i mask[4];
    chain_masks(rows, mask);
    __m256 acc0 = chain_start(y, mask[0], load), acc1 = chain_start(y + 8, mask[1], load),
           acc2 = chain_start(y + 16, mask[2], load), acc3 = chain_start(y + 24, mask[3], load);
    for (int64_t sb = 0; sb < K / 256; sb++) {
        const uint8_t *rec = panel + sb * Q4_SUPER;
        const float *ab = a + 256 * sb;
        for (int s = 0; s < 8; s++) {
            prefetch_next(rec, Q4_SUPER, s, 8);
            q4_group grp[4];
#pragma GCC unroll 4
            for (int g = 0; g < 4; g++) grp[g] = q4_scales(rec + g * KLD_Q4KX8_BYTES, s);
            for (int cc = 16 * s; cc < 16 * s + 16; cc++) {
                const __m256 a0 = _mm256_broadcast_ss(ab + 2 * cc), a1 = _mm256_broadcast_ss(ab + 2 * cc + 1);
                Q4_PAIR(acc0, 0);
                Q4_PAIR(acc1, 1);
                Q4_PAIR(acc2, 2);
                Q4_PAIR(acc3, 3);
            }
        }
    }
    chains_store(y, mask, acc0, acc1, acc2, acc3);
}

static void pack_q4_k(const uint8_t *panel, int64_t K, int col0, int nr, int64_t kb, int64_t kc, float *out) {
    (void)K;
    for (int64_t sb = kb / 256; sb < (kb + kc) / 256; sb++)
        for (int g = col0 / 8; g < (col0 + nr) / 8; g++) {
            const uint8_t *rec = panel + sb * Q4_SUPER + g * KLD_Q4KX8_BYTES;
            float *o = out + (sb * 256 - kb) * nr + 8 * g - col0;
            for (int s = 0; s < 8; s++) {
                const q4_group grp = q4_scales(rec, s);
                for (int cc = 16 * s; cc < 16 * s + 16; cc++) {
                    __m256 w0, w1;
                    q4_pair(rec, cc, &grp, &w0, &w1);
                    _mm256_storeu_ps(o + (2 * cc) * nr, w0);
                    _mm256_storeu_ps(o + (2 * cc + 1) * nr, w1);
                }
            }
        }
}

/* ---- q6_K: records of 8 rows per super-block ---- */

/* The 8 rows' multipliers d·sc of the 16 columns from 16j (to_float's product). */
static inline __m256 q6_scale(const uint8_t *rec, __m256 d, int j) {
    const __m128i sc = _mm_loadl_epi64((const __m128i *)(const void *)(rec + Q6_SC + 8 * j));
    return _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc)));
}

/* Column k of the 8 rows: mul·q. */
static inline __m256 q6_col(const uint8_t *rec, int k, __m256 mul) {
    const __m128i q = _mm_loadl_epi64((const __m128i *)(const void *)(rec + Q6_Q + 8 * k));
    return _mm256_mul_ps(mul, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)));
}

#define Q6_COL(acc, g) acc = _mm256_fmadd_ps(av, q6_col(rec + (g) * KLD_Q6KX8_BYTES, k, mul##g), acc)

static void gemv_q6_k(const uint8_t *panel, int rows, int64_t K, const float *a, float *y, bool load) {
    __m256i mask[4];
    chain_masks(rows, mask);
    __m256 acc0 = chain_start(y, mask[0], load), acc1 = chain_start(y + 8, mask[1], load),
           acc2 = chain_start(y + 16, mask[2], load), acc3 = chain_start(y + 24, mask[3], load);
    for (int64_t sb = 0; sb < K / 256; sb++) {
        const uint8_t *rec = panel + sb * Q6_SUPER;
        const float *ab = a + 256 * sb;
        __m256 d[4];
        for (int g = 0; g < 4; g++) d[g] = widen8((const uint16_t *)(const void *)(rec + g * KLD_Q6KX8_BYTES + Q6_D));
        for (int j = 0; j < 16; j++) {
            prefetch_next(rec, Q6_SUPER, j, 16);
            const __m256 mul0 = q6_scale(rec, d[0], j), mul1 = q6_scale(rec + KLD_Q6KX8_BYTES, d[1], j),
                         mul2 = q6_scale(rec + 2 * KLD_Q6KX8_BYTES, d[2], j),
                         mul3 = q6_scale(rec + 3 * KLD_Q6KX8_BYTES, d[3], j);
            for (int k = 16 * j; k < 16 * j + 16; k++) {
                const __m256 av = _mm256_broadcast_ss(ab + k);
                Q6_COL(acc0, 0);
                Q6_COL(acc1, 1);
                Q6_COL(acc2, 2);
                Q6_COL(acc3, 3);
            }
        }
    }
    chains_store(y, mask, acc0, acc1, acc2, acc3);
}

static void pack_q6_k(const uint8_t *panel, int64_t K, int col0, int nr, int64_t kb, int64_t kc, float *out) {
    (void)K;
    for (int64_t sb = kb / 256; sb < (kb + kc) / 256; sb++)
        for (int g = col0 / 8; g < (col0 + nr) / 8; g++) {
            const uint8_t *rec = panel + sb * Q6_SUPER + g * KLD_Q6KX8_BYTES;
            const __m256 d = widen8((const uint16_t *)(const void *)(rec + Q6_D));
            float *o = out + (sb * 256 - kb) * nr + 8 * g - col0;
            for (int j = 0; j < 16; j++) {
                const __m256 mul = q6_scale(rec, d, j);
                for (int k = 16 * j; k < 16 * j + 16; k++) _mm256_storeu_ps(o + k * nr, q6_col(rec, k, mul));
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

/* out[8 i + r] = byte i of in[r]: 16 bytes of each of 8 rows written as
 * 16 columns of 8 rows (three rounds of interleaves, 8, 16 and 32 bits). */
static inline void rows_side_by_side(const __m128i in[8], uint8_t *out) {
    __m128i a[8], c[8];
    for (int i = 0; i < 4; i++) {
        a[2 * i] = _mm_unpacklo_epi8(in[2 * i], in[2 * i + 1]);
        a[2 * i + 1] = _mm_unpackhi_epi8(in[2 * i], in[2 * i + 1]);
    }
    for (int h = 0; h < 2; h++)
        for (int i = 0; i < 2; i++) {
            c[4 * h + 2 * i] = _mm_unpacklo_epi16(a[4 * h + i], a[4 * h + 2 + i]);
            c[4 * h + 2 * i + 1] = _mm_unpackhi_epi16(a[4 * h + i], a[4 * h + 2 + i]);
        }
    for (int i = 0; i < 4; i++) {
        _mm_storeu_si128((__m128i *)(void *)(out + 32 * i), _mm_unpacklo_epi32(c[i], c[4 + i]));
        _mm_storeu_si128((__m128i *)(void *)(out + 32 * i + 16), _mm_unpackhi_epi32(c[i], c[4 + i]));
    }
}

/* q4_K: for each super-block, four records of 8 rows (kernels.h). */
static void repack_q4_k(const uint8_t *const *row, int64_t K, uint8_t *panel) {
    const __m128i m4 = _mm_set1_epi8(0x0F);
    for (int64_t sb = 0; sb < K / 256; sb++)
        for (int g = 0; g < 4; g++) {
            uint8_t *rec = panel + (sb * 4 + g) * KLD_Q4KX8_BYTES;
            __m128i pairs[8][8]; /* [j][r]: the 16 pair bytes of row r, columns 32j..32j+31 */
            memset(rec, 0, Q4_Q);
            for (int r = 0; r < 8; r++) {
                const uint8_t *b = row[8 * g + r];
                if (!b) {
                    for (int j = 0; j < 8; j++) pairs[j][r] = _mm_setzero_si128();
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
                    pairs[2 * h][r] = nibble_pairs(_mm_and_si128(x0, m4), _mm_and_si128(x1, m4));
                    pairs[2 * h + 1][r] = nibble_pairs(_mm_and_si128(_mm_srli_epi16(x0, 4), m4),
                                                       _mm_and_si128(_mm_srli_epi16(x1, 4), m4));
                }
            }
            /* rows side by side: 8 rows × 16 pair bytes → 16 pairs × 8 rows, per group of 32 columns */
            for (int j = 0; j < 8; j++) rows_side_by_side(pairs[j], rec + Q4_Q + 128 * j);
        }
}
/* q6_K: the 256 quants of one block as signed bytes q − 32, in column
 * order (kld_dequant_q6_k_ref: per half of 128 columns, column l and l+64
 * take ql[l]'s low and high nibble, l+32 and l+96 those of ql[l+32]; the
 * two high bits are qh[l]'s bit pairs 0, 2, 4, 6). */
static void q6_quants(const uint8_t *b, __m128i out[16]) {
    const __m128i m4 = _mm_set1_epi8(0x0F), m2 = _mm_set1_epi8(0x30), bias = _mm_set1_epi8(32);
    for (int half = 0; half < 2; half++) {
        const uint8_t *ql = b + 64 * half, *qh = b + 128 + 32 * half;
        for (int i = 0; i < 2; i++) { /* columns l = 16i..16i+15 of the half */
            const __m128i lo = _mm_loadu_si128((const __m128i *)(const void *)(ql + 16 * i));
            const __m128i hi = _mm_loadu_si128((const __m128i *)(const void *)(ql + 32 + 16 * i));
            const __m128i h = _mm_loadu_si128((const __m128i *)(const void *)(qh + 16 * i));
            /* bit pair p of qh moved to bits 4-5 (16-bit shifts: the mask drops what crosses bytes) */
            const __m128i h0 = _mm_and_si128(_mm_slli_epi16(h, 4), m2), h1 = _mm_and_si128(_mm_slli_epi16(h, 2), m2),
                          h2 = _mm_and_si128(h, m2), h3 = _mm_and_si128(_mm_srli_epi16(h, 2), m2);
            __m128i *o = out + 8 * half + i;
            o[0] = _mm_sub_epi8(_mm_or_si128(_mm_and_si128(lo, m4), h0), bias);
            o[2] = _mm_sub_epi8(_mm_or_si128(_mm_and_si128(hi, m4), h1), bias);
            o[4] = _mm_sub_epi8(_mm_or_si128(_mm_and_si128(_mm_srli_epi16(lo, 4), m4), h2), bias);
            o[6] = _mm_sub_epi8(_mm_or_si128(_mm_and_si128(_mm_srli_epi16(hi, 4), m4), h3), bias);
        }
    }
}

/* q6_K: for each super-block, four records of 8 rows (kernels.h). */
static void repack_q6_k(const uint8_t *const *row, int64_t K, uint8_t *panel) {
    for (int64_t sb = 0; sb < K / 256; sb++)
        for (int g = 0; g < 4; g++) {
            uint8_t *rec = panel + (sb * 4 + g) * KLD_Q6KX8_BYTES;
            __m128i q[16][8]; /* [j][r]: row r's quants of columns 16j..16j+15 */
            memset(rec, 0, Q6_Q);
            for (int r = 0; r < 8; r++) {
                const uint8_t *b = row[8 * g + r];
                __m128i rq[16];
                if (b) {
                    b += sb * KLD_BYTES_Q6_K;
                    memcpy(rec + Q6_D + 2 * r, b + 208, 2);
                    for (int j = 0; j < 16; j++) rec[Q6_SC + 8 * j + r] = b[192 + j];
                    q6_quants(b, rq);
                }
                for (int j = 0; j < 16; j++) q[j][r] = b ? rq[j] : _mm_setzero_si128();
            }
            for (int j = 0; j < 16; j++) rows_side_by_side(q[j], rec + Q6_Q + 128 * j);
        }
}

/* The repacked layout's kernels, one entry per type that has one. */
static const struct {
    kld_repack_fn repack;
    kld_gemv_repacked_fn gemv;
    kld_pack_repacked_fn pack;
} repacked[KLD_TYPE_COUNT] = {
    [KLD_TYPE_F16] = {repack_f16, gemv_f16, pack_f16},
    [KLD_TYPE_Q4_K] = {repack_q4_k, gemv_q4_k, pack_q4_k},
    [KLD_TYPE_Q6_K] = {repack_q6_k, gemv_q6_k, pack_q6_k},
};

kld_repack_fn kld_avx2_repack(uint32_t type) { return type < KLD_TYPE_COUNT ? repacked[type].repack : NULL; }

kld_gemv_repacked_fn kld_avx2_gemv_repacked(uint32_t type) {
    return type < KLD_TYPE_COUNT ? repacked[type].gemv : NULL;
}

kld_pack_repacked_fn kld_avx2_pack_repacked(uint32_t type) {
    return type < KLD_TYPE_COUNT ? repacked[type].pack : NULL;
}
