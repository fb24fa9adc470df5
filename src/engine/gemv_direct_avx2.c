/* gemv_direct_avx2.c — the one-row product (decode) read straight from the
 * weight rows: f16, q8_0, q4_0, q4_K, q5_K and q6_K rows are widened in registers, 8 rows to a
 * vector, instead of being converted to an f32 panel first. Each output is
 * the microkernel's fma chain for mr = 1 over the exact to_float values:
 * f16 widening is exact, q4_K is (d·sc)·q − dmin·m, q6_K (d·sc)·q, q8_0 d·q — the
 * reference's operations in its order, unfused — so the results are the
 * reference's bits (test_engine_kernels compares them).
 *
 * 32 rows are read side by side as four groups of 8, whose chains are
 * independent (one fma chain alone is bound by the fma latency). Rows past
 * `rows` repeat the last row: read and computed, never stored. */
#include "engine/kernels.h"
#include "tensor/kernels.h"
#include "tensor/types.h"

#include <immintrin.h>
#include <math.h>

#define ROWS KLD_GEMV_ROWS
_Static_assert(ROWS == 32, "the kernels below unroll four groups of 8 rows");

static void row_pointers(const uint8_t *w, uint64_t rb, int rows, const uint8_t *p[ROWS]) {
    for (int r = 0; r < ROWS; r++) p[r] = w + (uint64_t)(r < rows ? r : rows - 1) * rb;
}

/* The chains' starting values: y[0..rows) when `load`, else zeros. */
static void start_rows(const float *y, int rows, bool load, float out[ROWS]) {
    memset(out, 0, sizeof(float) * ROWS);
    if (load) memcpy(out, y, sizeof(float) * (size_t)rows);
}

static void store_rows(float *y, int rows, const float acc[ROWS]) {
    for (int r = 0; r < rows; r++) y[r] = acc[r];
}

/* ---- 8 rows side by side ---- */

/* 32 bytes of each of the 8 rows p[i] + off, transposed within each
 * 128-bit lane by three rounds of interleaves of `bits`-wide elements (8
 * or 16), then twice and four times as wide. For bytes, t[j] holds all 8
 * rows of bytes 2j, 2j+1 (low lane) and 2j+16, 2j+17 (high lane), 8 bytes
 * per byte position; for 16-bit values, t[j] holds all 8 rows of value j
 * (low lane) and j+8 (high lane). */
static inline __attribute__((always_inline)) void transpose8_rows(const uint8_t *const *p, uint64_t off, int bits,
                                                                  __m256i t[8]) {
#define LD(i) _mm256_loadu_si256((const __m256i *)(const void *)(p[i] + off))
    const __m256i r0 = LD(0), r1 = LD(1), r2 = LD(2), r3 = LD(3), r4 = LD(4), r5 = LD(5), r6 = LD(6),
                  r7 = LD(7);
#undef LD
#define LO1(a, b) (bits == 8 ? _mm256_unpacklo_epi8(a, b) : _mm256_unpacklo_epi16(a, b))
#define HI1(a, b) (bits == 8 ? _mm256_unpackhi_epi8(a, b) : _mm256_unpackhi_epi16(a, b))
#define LO2(a, b) (bits == 8 ? _mm256_unpacklo_epi16(a, b) : _mm256_unpacklo_epi32(a, b))
#define HI2(a, b) (bits == 8 ? _mm256_unpackhi_epi16(a, b) : _mm256_unpackhi_epi32(a, b))
#define LO3(a, b) (bits == 8 ? _mm256_unpacklo_epi32(a, b) : _mm256_unpacklo_epi64(a, b))
#define HI3(a, b) (bits == 8 ? _mm256_unpackhi_epi32(a, b) : _mm256_unpackhi_epi64(a, b))
    const __m256i x01l = LO1(r0, r1), x01h = HI1(r0, r1), x23l = LO1(r2, r3), x23h = HI1(r2, r3);
    const __m256i x45l = LO1(r4, r5), x45h = HI1(r4, r5), x67l = LO1(r6, r7), x67h = HI1(r6, r7);
    /* rows 0-3 (y) and 4-7 (z) */
    const __m256i y0 = LO2(x01l, x23l), y1 = HI2(x01l, x23l), y2 = LO2(x01h, x23h), y3 = HI2(x01h, x23h);
    const __m256i z0 = LO2(x45l, x67l), z1 = HI2(x45l, x67l), z2 = LO2(x45h, x67h), z3 = HI2(x45h, x67h);
    t[0] = LO3(y0, z0), t[1] = HI3(y0, z0), t[2] = LO3(y1, z1), t[3] = HI3(y1, z1);
    t[4] = LO3(y2, z2), t[5] = HI3(y2, z2), t[6] = LO3(y3, z3), t[7] = HI3(y3, z3);
#undef LO1
#undef HI1
#undef LO2
#undef HI2
#undef LO3
#undef HI3
}

/* Byte rows, as the k-quants' unpackers read them. */
static inline __attribute__((always_inline)) void transpose8x32(const uint8_t *const *p, uint64_t off,
                                                                __m256i t[8]) {
    transpose8_rows(p, off, 8, t);
}

/* ---- f16 ---- */

/* acc = the chain over columns [c, c+16) of the 8 f16 rows p[0..7] (c is
 * the byte offset / 2): a 16-bit 8×8 transpose per 128-bit lane leaves
 * columns j and j+8 of all 8 rows in the two lanes of one vector. */
static inline __attribute__((always_inline)) __m256 f16_cols16(const uint8_t *const *p, uint64_t off,
                                                               const float *a, __m256 acc) {
    __m256i t[8];
    transpose8_rows(p, off, 16, t);
    const __m256i c0 = t[0], c1 = t[1], c2 = t[2], c3 = t[3], c4 = t[4], c5 = t[5], c6 = t[6], c7 = t[7];
#define FMA_LO(j, c) acc = _mm256_fmadd_ps(_mm256_broadcast_ss(a + (j)), _mm256_cvtph_ps(_mm256_castsi256_si128(c)), acc)
#define FMA_HI(j, c) acc = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 8 + (j)), _mm256_cvtph_ps(_mm256_extracti128_si256(c, 1)), acc)
    FMA_LO(0, c0); FMA_LO(1, c1); FMA_LO(2, c2); FMA_LO(3, c3);
    FMA_LO(4, c4); FMA_LO(5, c5); FMA_LO(6, c6); FMA_LO(7, c7);
    FMA_HI(0, c0); FMA_HI(1, c1); FMA_HI(2, c2); FMA_HI(3, c3);
    FMA_HI(4, c4); FMA_HI(5, c5); FMA_HI(6, c6); FMA_HI(7, c7);
#undef FMA_LO
#undef FMA_HI
    return acc;
}

/* 32 columns (one 64-byte line of each row) of group g of 8 rows. */
static inline __attribute__((always_inline)) __m256 f16_step(const uint8_t *const *p, int64_t step, const float *a,
                                                             __m256 acc) {
    const uint64_t off = (uint64_t)step * 64;
    for (int i = 0; i < 8; i++) __builtin_prefetch(p[i] + off + 512, 0, 0); /* 8 lines ahead */
    acc = f16_cols16(p, off, a + 32 * step, acc);
    return f16_cols16(p, off + 32, a + 32 * step + 16, acc);
}

static void gemv_f16(const uint8_t *w, uint64_t rb, int rows, int64_t K, const float *a, float *y, bool load) {
    const uint8_t *p[ROWS];
    row_pointers(w, rb, rows, p);
    _Alignas(32) float acc[ROWS];
    start_rows(y, rows, load, acc);
    __m256 acc0 = _mm256_load_ps(acc), acc1 = _mm256_load_ps(acc + 8), acc2 = _mm256_load_ps(acc + 16),
           acc3 = _mm256_load_ps(acc + 24);
    /* Group g runs g steps behind group 0: rows 4 KiB apart (K = 2048)
     * would otherwise all read the same L1 set at once. (Passing the four
     * groups' transposed columns through a buffer, so that their chains
     * advance side by side, is ~20% faster from cache but ~10% slower
     * streaming from memory, which is what decode does.) */
    const int64_t steps = K / 32;
    for (int64_t t = 0; t < steps + 3; t++) {
        if (t < steps) acc0 = f16_step(p, t, a, acc0);
        if (t >= 1 && t - 1 < steps) acc1 = f16_step(p + 8, t - 1, a, acc1);
        if (t >= 2 && t - 2 < steps) acc2 = f16_step(p + 16, t - 2, a, acc2);
        if (t >= 3 && t - 3 < steps) acc3 = f16_step(p + 24, t - 3, a, acc3);
    }
    int64_t k = 32 * steps;
    for (; k + 16 <= K; k += 16) {
        const uint64_t off = (uint64_t)k * 2;
        acc0 = f16_cols16(p, off, a + k, acc0);
        acc1 = f16_cols16(p + 8, off, a + k, acc1);
        acc2 = f16_cols16(p + 16, off, a + k, acc2);
        acc3 = f16_cols16(p + 24, off, a + k, acc3);
    }
    _mm256_storeu_ps(acc, acc0);
    _mm256_storeu_ps(acc + 8, acc1);
    _mm256_storeu_ps(acc + 16, acc2);
    _mm256_storeu_ps(acc + 24, acc3);
    for (int r = 0; r < rows; r++) /* a column tail: the same chain, element by element */
        for (int64_t kk = k; kk < K; kk++) acc[r] = fmaf(a[kk], _cvtsh_ss(kld_load_u16(p[r] + 2 * kk)), acc[r]);
    store_rows(y, rows, acc);
}

/* ---- block types: one super-block of 8 rows transposed to column order ---- */

/* Stores v, laid out as transpose8x32's t[j], at its byte positions of q
 * (8 bytes per position). */
static inline __attribute__((always_inline)) void put_cols(int8_t *q, int j, __m256i v) {
    _mm_store_si128((__m128i *)(void *)(q + 16 * j), _mm256_castsi256_si128(v));
    _mm_store_si128((__m128i *)(void *)(q + 16 * j + 128), _mm256_extracti128_si256(v, 1));
}

/* dst[8*j + i] = byte j of r[i], for 8 rows of 16 bytes (scales). */
static inline __attribute__((always_inline)) void transpose8x16(const __m128i r[8], uint8_t dst[128]) {
    const __m128i x01l = _mm_unpacklo_epi8(r[0], r[1]), x01h = _mm_unpackhi_epi8(r[0], r[1]);
    const __m128i x23l = _mm_unpacklo_epi8(r[2], r[3]), x23h = _mm_unpackhi_epi8(r[2], r[3]);
    const __m128i x45l = _mm_unpacklo_epi8(r[4], r[5]), x45h = _mm_unpackhi_epi8(r[4], r[5]);
    const __m128i x67l = _mm_unpacklo_epi8(r[6], r[7]), x67h = _mm_unpackhi_epi8(r[6], r[7]);
    const __m128i y0 = _mm_unpacklo_epi16(x01l, x23l), y1 = _mm_unpackhi_epi16(x01l, x23l);
    const __m128i y2 = _mm_unpacklo_epi16(x01h, x23h), y3 = _mm_unpackhi_epi16(x01h, x23h);
    const __m128i z0 = _mm_unpacklo_epi16(x45l, x67l), z1 = _mm_unpackhi_epi16(x45l, x67l);
    const __m128i z2 = _mm_unpacklo_epi16(x45h, x67h), z3 = _mm_unpackhi_epi16(x45h, x67h);
    __m128i *d = (__m128i *)(void *)dst;
    _mm_store_si128(d + 0, _mm_unpacklo_epi32(y0, z0));
    _mm_store_si128(d + 1, _mm_unpackhi_epi32(y0, z0));
    _mm_store_si128(d + 2, _mm_unpacklo_epi32(y1, z1));
    _mm_store_si128(d + 3, _mm_unpackhi_epi32(y1, z1));
    _mm_store_si128(d + 4, _mm_unpacklo_epi32(y2, z2));
    _mm_store_si128(d + 5, _mm_unpackhi_epi32(y2, z2));
    _mm_store_si128(d + 6, _mm_unpacklo_epi32(y3, z3));
    _mm_store_si128(d + 7, _mm_unpackhi_epi32(y3, z3));
}

/* out[j][i] = f[i] · (float)scale j of row i (8 rows, n scales): per scale,
 * a vector over the rows. */
static inline void scale_rows(const uint8_t *t, bool is_signed, __m256 f, int n, float out[][8]) {
    for (int j = 0; j < n; j++) {
        const __m128i b = _mm_loadl_epi64((const __m128i *)(const void *)(t + 8 * j));
        const __m256i v = is_signed ? _mm256_cvtepi8_epi32(b) : _mm256_cvtepu8_epi32(b);
        _mm256_storeu_ps(out[j], _mm256_mul_ps(f, _mm256_cvtepi32_ps(v)));
    }
}

static inline __m256 halves8(const uint8_t *const *p, uint64_t off) {
    const __m128i h = _mm_setr_epi16((short)kld_load_u16(p[0] + off), (short)kld_load_u16(p[1] + off),
                                     (short)kld_load_u16(p[2] + off), (short)kld_load_u16(p[3] + off),
                                     (short)kld_load_u16(p[4] + off), (short)kld_load_u16(p[5] + off),
                                     (short)kld_load_u16(p[6] + off), (short)kld_load_u16(p[7] + off));
    return _mm256_cvtph_ps(h);
}

/* One super-block of 8 rows in column order: q[8*k + i] the integer value
 * of column k in row i, and per group of columns the row vectors of its
 * multiplier d·sc (and, for q4_K, of dmin·m). */
typedef struct kblock8 {
    _Alignas(32) int8_t q[256 * 8];
    _Alignas(32) float mul[16][8];
    _Alignas(32) float min[8][8];
} kblock8;

/* The 6-bit scales and mins of q4_K and q5_K (12 bytes at off + 4, after d
 * and dmin) as B's multipliers d·sc and dmin·m. */
static void k4_scales8(const uint8_t *const *p, uint64_t off, kblock8 *B) {
    _Alignas(32) uint8_t st[128];
    __m128i sm[8];
    for (int i = 0; i < 8; i++) {
        /* the scale j < 4 is the low 6 bits of byte j, its min those of byte
         * j + 4; for j >= 4 the low 4 bits come from byte j + 4 (scale: low
         * nibble, min: high nibble), the high 2 from the top bits of bytes
         * j - 4 (scale) and j (min) */
        const uint8_t *s = p[i] + off + 4;
        const uint32_t a0 = kld_load_u32(s), a1 = kld_load_u32(s + 4), a2 = kld_load_u32(s + 8);
        const uint32_t lo6 = 0x3F3F3F3F, lo4 = 0x0F0F0F0F, lo2 = 0x03030303;
        sm[i] = _mm_setr_epi32((int)(a0 & lo6), (int)((a2 & lo4) | ((a0 >> 6) & lo2) << 4), (int)(a1 & lo6),
                               (int)(((a2 >> 4) & lo4) | ((a1 >> 6) & lo2) << 4));
    }
    transpose8x16(sm, st);
    scale_rows(st, false, halves8(p, off), 8, B->mul);
    scale_rows(st + 64, false, halves8(p, off + 2), 8, B->min);
}

/* q4_K (144 bytes: d, dmin, 12 bytes of 6-bit scales and mins, 128 of
 * nibbles; each 32 bytes of nibbles are two groups: low, then high). */
static void q4k_block8(const uint8_t *const *p, uint64_t off, kblock8 *B) {
    k4_scales8(p, off, B);
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int c = 0; c < 4; c++) {
        __m256i t[8];
        transpose8x32(p, off + 16 + 32 * (uint64_t)c, t);
        int8_t *q = B->q + 512 * c;
        for (int j = 0; j < 8; j++) {
            put_cols(q, j, _mm256_and_si256(t[j], m4));
            put_cols(q + 256, j, _mm256_and_si256(_mm256_srli_epi16(t[j], 4), m4));
        }
    }
}

/* Bits 4 of each byte: bit `bit` of each byte of v moved there (16-bit
 * shifts; what crosses into the next byte is masked off). */
static inline __m256i bit_to_16(__m256i v, int bit) {
    const __m256i m = _mm256_set1_epi8(0x10);
    return bit <= 4 ? _mm256_and_si256(_mm256_sll_epi16(v, _mm_cvtsi32_si128(4 - bit)), m)
                    : _mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(bit - 4)), m);
}

/* q5_K (176 bytes: d, dmin, 12 bytes of scales as q4_K, 32 of high bits,
 * 128 of nibbles): the nibble of column 64·c + l (+ 32) gets bit 2c (2c+1)
 * of qh[l] as its fifth bit. */
static void q5k_block8(const uint8_t *const *p, uint64_t off, kblock8 *B) {
    k4_scales8(p, off, B);
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256i th[8];
    transpose8x32(p, off + 16, th);
    for (int c = 0; c < 4; c++) {
        __m256i t[8];
        transpose8x32(p, off + 48 + 32 * (uint64_t)c, t);
        int8_t *q = B->q + 512 * c;
        for (int j = 0; j < 8; j++) {
            put_cols(q, j, _mm256_or_si256(_mm256_and_si256(t[j], m4), bit_to_16(th[j], 2 * c)));
            put_cols(q + 256, j, _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(t[j], 4), m4),
                                                 bit_to_16(th[j], 2 * c + 1)));
        }
    }
}

/* q4_0 (eight 18-byte blocks per 256 columns: d, 16 bytes whose low
 * nibbles are columns 0-15 and high nibbles 16-31, each minus 8). */
static void q4_0_block8(const uint8_t *const *p, uint64_t off, kblock8 *B) {
    const __m128i m4 = _mm_set1_epi8(0x0F), k8 = _mm_set1_epi8(8);
    for (int b = 0; b < 8; b++) {
        const uint64_t o = off + (uint64_t)b * KLD_BYTES_Q4_0;
        _mm256_store_ps(B->mul[b], halves8(p, o));
        __m128i r[8];
        for (int i = 0; i < 8; i++) r[i] = _mm_loadu_si128((const __m128i *)(const void *)(p[i] + o + 2));
        _Alignas(16) uint8_t st[128];
        transpose8x16(r, st);
        int8_t *q = B->q + 256 * b;
        for (int j = 0; j < 8; j++) { /* byte positions 2j, 2j+1 */
            const __m128i v = _mm_load_si128((const __m128i *)(const void *)(st + 16 * j));
            _mm_store_si128((__m128i *)(void *)(q + 16 * j), _mm_sub_epi8(_mm_and_si128(v, m4), k8));
            _mm_store_si128((__m128i *)(void *)(q + 128 + 16 * j),
                            _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(v, 4), m4), k8));
        }
    }
}

/* q6_K (210 bytes: 128 of low nibbles, 64 of high bit pairs, 16 int8
 * scales, d). Per half of 128 columns, with its 64 bytes of ql and 32 of
 * qh: column 32·j + l (l < 32) is the low (j = 0, 1) or high (j = 2, 3)
 * nibble of ql[l + 32·(j & 1)], with bits 2j, 2j+1 of qh[l] above it,
 * minus 32. */
static void q6k_block8(const uint8_t *const *p, uint64_t off, kblock8 *B) {
    _Alignas(32) uint8_t st[128];
    __m128i sm[8];
    for (int i = 0; i < 8; i++) sm[i] = _mm_loadu_si128((const __m128i *)(const void *)(p[i] + off + 192));
    transpose8x16(sm, st);
    scale_rows(st, true, halves8(p, off + 208), 16, B->mul);
    const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30), k32 = _mm256_set1_epi8(32);
    for (int h = 0; h < 2; h++) {
        __m256i ta[8], tb[8], tc[8];
        transpose8x32(p, off + 64 * (uint64_t)h, ta);
        transpose8x32(p, off + 64 * (uint64_t)h + 32, tb);
        transpose8x32(p, off + 128 + 32 * (uint64_t)h, tc);
        int8_t *q = B->q + 1024 * h;
        for (int j = 0; j < 8; j++) {
            const __m256i A = ta[j], Bv = tb[j], C = tc[j];
            /* the bit pairs moved to bits 4-5 of each byte (16-bit shifts:
             * the bits crossing into the next byte are masked off) */
            const __m256i q1 = _mm256_or_si256(_mm256_and_si256(A, m4), _mm256_and_si256(_mm256_slli_epi16(C, 4), m30));
            const __m256i q2 = _mm256_or_si256(_mm256_and_si256(Bv, m4), _mm256_and_si256(_mm256_slli_epi16(C, 2), m30));
            const __m256i q3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(A, 4), m4), _mm256_and_si256(C, m30));
            const __m256i q4 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(Bv, 4), m4),
                                               _mm256_and_si256(_mm256_srli_epi16(C, 2), m30));
            put_cols(q, j, _mm256_sub_epi8(q1, k32));
            put_cols(q + 256, j, _mm256_sub_epi8(q2, k32));
            put_cols(q + 512, j, _mm256_sub_epi8(q3, k32));
            put_cols(q + 768, j, _mm256_sub_epi8(q4, k32));
        }
    }
}

/* q8_0 (eight 34-byte blocks per 256 columns: d, 32 int8). */
static void q8_0_block8(const uint8_t *const *p, uint64_t off, kblock8 *B) {
    for (int b = 0; b < 8; b++) {
        const uint64_t o = off + (uint64_t)b * KLD_BYTES_Q8_0;
        _mm256_store_ps(B->mul[b], halves8(p, o));
        __m256i t[8];
        transpose8x32(p, o + 2, t);
        for (int j = 0; j < 8; j++) put_cols(B->q + 256 * b, j, t[j]);
    }
}

/* The 8 rows' weights in column q (8 bytes): mul·q, minus min for q4_K and q5_K. */
static inline __attribute__((always_inline)) __m256 kweight(const int8_t *q, __m256 mul, __m256 min,
                                                            bool has_min) {
    const __m256 qf = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)q)));
    return has_min ? _mm256_sub_ps(_mm256_mul_ps(mul, qf), min) : _mm256_mul_ps(mul, qf);
}

/* The chains of four groups of 8 rows over one super-block's 256 columns:
 * w = mul·q, or mul·q − min (q4_K, q5_K), groups of 2^shift columns. */
static inline __attribute__((always_inline)) void kblock_chain(const kblock8 *B, const float *a, int shift,
                                                               bool has_min, __m256 acc[4]) {
    __m256 acc0 = acc[0], acc1 = acc[1], acc2 = acc[2], acc3 = acc[3];
    for (int g = 0; g < 256 >> shift; g++) {
        const __m256 m0 = _mm256_load_ps(B[0].mul[g]), m1 = _mm256_load_ps(B[1].mul[g]),
                     m2 = _mm256_load_ps(B[2].mul[g]), m3 = _mm256_load_ps(B[3].mul[g]);
        const __m256 n0 = has_min ? _mm256_load_ps(B[0].min[g]) : m0, n1 = has_min ? _mm256_load_ps(B[1].min[g]) : m1,
                     n2 = has_min ? _mm256_load_ps(B[2].min[g]) : m2, n3 = has_min ? _mm256_load_ps(B[3].min[g]) : m3;
        for (int k = g << shift; k < (g + 1) << shift; k++) {
            const __m256 ak = _mm256_broadcast_ss(a + k);
#define W(i, m, n) kweight(B[i].q + 8 * k, m, n, has_min)
            acc0 = _mm256_fmadd_ps(ak, W(0, m0, n0), acc0);
            acc1 = _mm256_fmadd_ps(ak, W(1, m1, n1), acc1);
            acc2 = _mm256_fmadd_ps(ak, W(2, m2, n2), acc2);
            acc3 = _mm256_fmadd_ps(ak, W(3, m3, n3), acc3);
#undef W
        }
    }
    acc[0] = acc0, acc[1] = acc1, acc[2] = acc2, acc[3] = acc3;
}

typedef void (*block8_fn)(const uint8_t *const *p, uint64_t off, kblock8 *B);

static inline __attribute__((always_inline)) void gemv_kquant(const uint8_t *w, uint64_t rb, int rows, int64_t K,
                                                              const float *a, float *y, bool load, uint64_t block_bytes,
                                                              block8_fn unpack, int shift, bool has_min) {
    const uint8_t *p[ROWS];
    row_pointers(w, rb, rows, p);
    _Alignas(32) kblock8 B[4];
    const uint8_t *next = w + ROWS * rb;
    const uint64_t pf_share = K >= 256 ? (ROWS * rb / (uint64_t)(K / 256) + 63) / 64 * 64 : 0;
    _Alignas(32) float out[ROWS];
    start_rows(y, rows, load, out);
    __m256 acc[4] = {_mm256_load_ps(out), _mm256_load_ps(out + 8), _mm256_load_ps(out + 16), _mm256_load_ps(out + 24)};
    for (int64_t kb = 0; kb < K / 256; kb++) {
        const uint64_t off = (uint64_t)kb * block_bytes;
        /* the next 32 rows, one contiguous run, a share per block: the
         * strided reads of this panel are not a stream the prefetchers follow */
        for (uint64_t o = (uint64_t)kb * pf_share; o < (uint64_t)(kb + 1) * pf_share; o += 64)
            __builtin_prefetch(next + o, 0, 3);
        for (int g = 0; g < 4; g++) unpack(p + 8 * g, off, &B[g]);
        kblock_chain(B, a + 256 * kb, shift, has_min, acc);
    }
    for (int g = 0; g < 4; g++) _mm256_store_ps(out + 8 * g, acc[g]);
    store_rows(y, rows, out);
}

static void gemv_q4_k(const uint8_t *w, uint64_t rb, int rows, int64_t K, const float *a, float *y, bool load) {
    gemv_kquant(w, rb, rows, K, a, y, load, KLD_BYTES_Q4_K, q4k_block8, 5, true);
}

/* The 32-value block types: K need not be a multiple of 256, the last
 * (K mod 256) / 32 blocks are converted by the type's to_float one at a
 * time, continuing each row's chain. */
static inline __attribute__((always_inline)) void gemv_b32(const uint8_t *w, uint64_t rb, int rows, int64_t K,
                                                           const float *a, float *y, bool load, uint32_t type,
                                                           block8_fn unpack) {
    const kld_type_info *ti = kld_type_info_get(type);
    const uint64_t bytes = (uint64_t)ti->type_size;
    const int64_t K256 = K / 256 * 256;
    gemv_kquant(w, rb, rows, K256, a, y, load, 8 * bytes, unpack, 5, false);
    for (int r = 0; r < rows && K256 < K; r++) {
        const uint8_t *b = w + (uint64_t)r * rb + (uint64_t)(K256 / 32) * bytes;
        float acc = y[r], v[32]; /* the chain so far (or its start) */
        for (int64_t k = K256; k < K; k += 32, b += bytes) {
            kld_type_kernels_of(ti)->to_float(b, v, 32);
            for (int j = 0; j < 32; j++) acc = fmaf(a[k + j], v[j], acc);
        }
        y[r] = acc;
    }
}

static void gemv_q8_0(const uint8_t *w, uint64_t rb, int rows, int64_t K, const float *a, float *y, bool load) {
    gemv_b32(w, rb, rows, K, a, y, load, KLD_TYPE_Q8_0, q8_0_block8);
}

static void gemv_q4_0(const uint8_t *w, uint64_t rb, int rows, int64_t K, const float *a, float *y, bool load) {
    gemv_b32(w, rb, rows, K, a, y, load, KLD_TYPE_Q4_0, q4_0_block8);
}

static void gemv_q5_k(const uint8_t *w, uint64_t rb, int rows, int64_t K, const float *a, float *y, bool load) {
    gemv_kquant(w, rb, rows, K, a, y, load, KLD_BYTES_Q5_K, q5k_block8, 5, true);
}

static void gemv_q6_k(const uint8_t *w, uint64_t rb, int rows, int64_t K, const float *a, float *y, bool load) {
    gemv_kquant(w, rb, rows, K, a, y, load, KLD_BYTES_Q6_K, q6k_block8, 4, false);
}

/* The direct (row-major) GEMV of each type that has one. */
static const kld_gemv_direct_fn direct[KLD_TYPE_COUNT] = {
    [KLD_TYPE_F16] = gemv_f16,   [KLD_TYPE_Q8_0] = gemv_q8_0, [KLD_TYPE_Q4_0] = gemv_q4_0,
    [KLD_TYPE_Q5_K] = gemv_q5_k, [KLD_TYPE_Q4_K] = gemv_q4_k, [KLD_TYPE_Q6_K] = gemv_q6_k,
};

kld_gemv_direct_fn kld_avx2_gemv_direct(uint32_t type) { return type < KLD_TYPE_COUNT ? direct[type] : NULL; }
