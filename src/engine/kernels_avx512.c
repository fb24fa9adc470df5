/* kernels_avx512.c — AVX-512 GEMM kernels: a 14×32 register-blocked
 * microkernel (28 zmm accumulators, two B vectors, one broadcast) and the
 * 32-column panel packing (16×16 transposes). Each output element is still
 * one fma chain over k in order, the reference's arithmetic, so results
 * equal kernels_ref.c bit for bit (tests/test_kernels_avx512.c compares
 * them). The row operations of the AVX-512 set are the AVX2 ones (see
 * kernels_ref.c, which assembles the table). */
#include "engine/gemm.h"
#include "engine/kernels.h"

#include <immintrin.h>
#include <math.h>

#define MR 14
#define NR 32

/* Accumulators are named variables so that they stay in registers. PACKED:
 * A rows KLD_GEMM_LDA apart and B rows NR apart (compile-time strides: one
 * pointer, constant displacements), B zero-padded to NR columns. */
static inline __attribute__((always_inline)) void
ukernel_tpl(const int M, const bool full, const bool packed, int nr, int64_t kc, const float *A,
            int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc, bool load) {
    if (packed) {
        lda = KLD_GEMM_LDA;
        ldb = NR;
    }
    const __mmask16 k0 = full ? (__mmask16)0xFFFF : (__mmask16)(nr >= 16 ? 0xFFFF : (1u << nr) - 1);
    const __mmask16 k1 = full ? (__mmask16)0xFFFF
                              : (__mmask16)(nr <= 16 ? 0 : nr >= 32 ? 0xFFFF : (1u << (nr - 16)) - 1);
    __m512 c00 = _mm512_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
           c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00, c60 = c00, c61 = c00,
           c70 = c00, c71 = c00, c80 = c00, c81 = c00, c90 = c00, c91 = c00, ca0 = c00, ca1 = c00,
           cb0 = c00, cb1 = c00, cc0 = c00, cc1 = c00, cd0 = c00, cd1 = c00;
#define LOADC(m, x0, x1)                                                    \
    if (M > m && load) {                                                    \
        x0 = full ? _mm512_loadu_ps(C + m * ldc)                            \
                  : _mm512_maskz_loadu_ps(k0, C + m * ldc);                 \
        x1 = full ? _mm512_loadu_ps(C + m * ldc + 16)                       \
                  : _mm512_maskz_loadu_ps(k1, C + m * ldc + 16);            \
    }
    LOADC(0, c00, c01) LOADC(1, c10, c11) LOADC(2, c20, c21) LOADC(3, c30, c31)
    LOADC(4, c40, c41) LOADC(5, c50, c51) LOADC(6, c60, c61) LOADC(7, c70, c71)
    LOADC(8, c80, c81) LOADC(9, c90, c91) LOADC(10, ca0, ca1) LOADC(11, cb0, cb1)
    LOADC(12, cc0, cc1) LOADC(13, cd0, cd1)
#undef LOADC
#pragma GCC unroll 4
    for (int64_t k = 0; k < kc; k++) {
        const __m512 b0 = packed || full ? _mm512_loadu_ps(B) : _mm512_maskz_loadu_ps(k0, B);
        const __m512 b1 = packed || full ? _mm512_loadu_ps(B + 16) : _mm512_maskz_loadu_ps(k1, B + 16);
        B += ldb;
        __m512 a;
#define STEP(m, x0, x1)                          \
    if (M > m) {                                 \
        a = _mm512_set1_ps(A[m * lda + k]);      \
        x0 = _mm512_fmadd_ps(a, b0, x0);         \
        x1 = _mm512_fmadd_ps(a, b1, x1);         \
    }
        STEP(0, c00, c01) STEP(1, c10, c11) STEP(2, c20, c21) STEP(3, c30, c31)
        STEP(4, c40, c41) STEP(5, c50, c51) STEP(6, c60, c61) STEP(7, c70, c71)
        STEP(8, c80, c81) STEP(9, c90, c91) STEP(10, ca0, ca1) STEP(11, cb0, cb1)
        STEP(12, cc0, cc1) STEP(13, cd0, cd1)
#undef STEP
    }
#define STOREC(m, x0, x1)                                          \
    if (M > m) {                                                   \
        if (full) {                                                \
            _mm512_storeu_ps(C + m * ldc, x0);                     \
            _mm512_storeu_ps(C + m * ldc + 16, x1);                \
        } else {                                                   \
            _mm512_mask_storeu_ps(C + m * ldc, k0, x0);            \
            _mm512_mask_storeu_ps(C + m * ldc + 16, k1, x1);       \
        }                                                          \
    }
    STOREC(0, c00, c01) STOREC(1, c10, c11) STOREC(2, c20, c21) STOREC(3, c30, c31)
    STOREC(4, c40, c41) STOREC(5, c50, c51) STOREC(6, c60, c61) STOREC(7, c70, c71)
    STOREC(8, c80, c81) STOREC(9, c90, c91) STOREC(10, ca0, ca1) STOREC(11, cb0, cb1)
    STOREC(12, cc0, cc1) STOREC(13, cd0, cd1)
#undef STOREC
}

typedef void (*uk_fn)(int, int64_t, const float *, int64_t, const float *, int64_t, float *,
                      int64_t, bool);

#define UK(M, FULL, PACKED)                                                                   \
    static void uk_##M##_##FULL##_##PACKED(int nr, int64_t kc, const float *A, int64_t lda,   \
                                           const float *B, int64_t ldb, float *C, int64_t ldc, \
                                           bool load) {                                       \
        ukernel_tpl(M, FULL, PACKED, nr, kc, A, lda, B, ldb, C, ldc, load);                   \
    }
#define UK_ALL(FULL, PACKED)                                                                     \
    UK(1, FULL, PACKED) UK(2, FULL, PACKED) UK(3, FULL, PACKED) UK(4, FULL, PACKED)              \
    UK(5, FULL, PACKED) UK(6, FULL, PACKED) UK(7, FULL, PACKED) UK(8, FULL, PACKED)              \
    UK(9, FULL, PACKED) UK(10, FULL, PACKED) UK(11, FULL, PACKED) UK(12, FULL, PACKED)           \
    UK(13, FULL, PACKED) UK(14, FULL, PACKED)                                                    \
    static const uk_fn uk_##FULL##_##PACKED[MR + 1] = {                                          \
        NULL,                  uk_1_##FULL##_##PACKED,  uk_2_##FULL##_##PACKED,                  \
        uk_3_##FULL##_##PACKED,  uk_4_##FULL##_##PACKED,  uk_5_##FULL##_##PACKED,                \
        uk_6_##FULL##_##PACKED,  uk_7_##FULL##_##PACKED,  uk_8_##FULL##_##PACKED,                \
        uk_9_##FULL##_##PACKED,  uk_10_##FULL##_##PACKED, uk_11_##FULL##_##PACKED,               \
        uk_12_##FULL##_##PACKED, uk_13_##FULL##_##PACKED, uk_14_##FULL##_##PACKED};
UK_ALL(1, 1)
UK_ALL(0, 1)
UK_ALL(1, 0)
UK_ALL(0, 0)
#undef UK_ALL
#undef UK

void kld_avx512_ukernel(int mr, int nr, int64_t kc, const float *A, int64_t lda, const float *B,
                        int64_t ldb, float *C, int64_t ldc, bool load) {
    const bool full = nr == NR, packed = lda == KLD_GEMM_LDA && ldb == NR;
    const uk_fn *t = packed ? (full ? uk_1_1 : uk_0_1) : (full ? uk_1_0 : uk_0_0);
    t[mr](nr, kc, A, lda, B, ldb, C, ldc, load);
}

/* ---- packing ---- */

/* In-register 16×16 transpose: r[i] = row i on entry, column i on exit. */
static inline __attribute__((always_inline)) void transpose16(__m512 r[16]) {
    __m512 t[16];
#pragma GCC unroll 16
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    /* t[2i], t[2i+1]: rows 2i, 2i+1 interleaved (pairs of columns 4L+{0,1} and 4L+{2,3}). */
#pragma GCC unroll 16
    for (int g = 0; g < 4; g++) {
        r[4 * g + 0] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], _MM_SHUFFLE(1, 0, 1, 0));
        r[4 * g + 1] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], _MM_SHUFFLE(3, 2, 3, 2));
        r[4 * g + 2] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], _MM_SHUFFLE(1, 0, 1, 0));
        r[4 * g + 3] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    /* r[4g + j], 128-bit lane L: rows 4g..4g+3 at column 4L + j. */
#pragma GCC unroll 16
    for (int j = 0; j < 4; j++) {
        __m512 w0 = _mm512_shuffle_f32x4(r[j], r[4 + j], 0x88);
        __m512 w1 = _mm512_shuffle_f32x4(r[j], r[4 + j], 0xDD);
        __m512 w2 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0x88);
        __m512 w3 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0xDD);
        t[j] = _mm512_shuffle_f32x4(w0, w2, 0x88);      /* column j */
        t[8 + j] = _mm512_shuffle_f32x4(w0, w2, 0xDD);  /* column 8 + j */
        t[4 + j] = _mm512_shuffle_f32x4(w1, w3, 0x88);  /* column 4 + j */
        t[12 + j] = _mm512_shuffle_f32x4(w1, w3, 0xDD); /* column 12 + j */
    }
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) r[i] = t[i];
}

/* Element e of row r of src (float32, or f16 widened exactly when f16): 16 of them, or one. */
static inline __attribute__((always_inline)) __m512 load16(const void *src, int64_t ld, int64_t r, int64_t e, bool f16) {
    return f16 ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)((const uint16_t *)src + r * ld + e)))
               : _mm512_loadu_ps((const float *)src + r * ld + e);
}
static inline __attribute__((always_inline)) float load1(const void *src, int64_t ld, int64_t r, int64_t e, bool f16) {
    return f16 ? kld_f16_to_f32(((const uint16_t *)src)[r * ld + e]) : ((const float *)src)[r * ld + e];
}

/* panel[k*32 + j] = src[j*ld + k] for j < rows (<= 32), 0 for rows <= j < 32. */
static inline __attribute__((always_inline)) void pack32(const void *src, int64_t ld, int rows, int64_t kc,
                                                          float *panel, bool f16) {
    int64_t k = 0;
    for (; k + 16 <= kc; k += 16) {
        for (int half = 0; half < 2; half++) {
            __m512 r[16];
#pragma GCC unroll 16
            for (int i = 0; i < 16; i++)
                r[i] = half * 16 + i < rows ? load16(src, ld, half * 16 + i, k, f16) : _mm512_setzero_ps();
            transpose16(r);
#pragma GCC unroll 16
            for (int i = 0; i < 16; i++) _mm512_storeu_ps(panel + (k + i) * NR + half * 16, r[i]);
        }
    }
    for (; k < kc; k++)
        for (int j = 0; j < NR; j++) panel[k * NR + j] = j < rows ? load1(src, ld, j, k, f16) : 0.0f;
}

void kld_avx512_pack32(const float *src, int64_t ld, int rows, int64_t kc, float *panel) {
    pack32(src, ld, rows, kc, panel, false);
}

/* The same from f16 values. Each row gives only kc values here; gemm.c prefetches the next
 * block's rows. */
void kld_avx512_pack32_f16(const uint16_t *src, int64_t ld, int rows, int64_t kc, float *panel) {
    pack32(src, ld, rows, kc, panel, true);
}

/* ---- base-2 softmax weights (base2_weight in kernels_ref.c) ----
 * The AVX2 kernel's lane-for-lane arithmetic (kernels_avx2.c: the double
 * multiply, floor, the Taylor polynomial as separate multiplies and adds —
 * ISO C mode does not contract them —, one rounding to float, the two-step
 * power-of-two scaling) on 8 doubles per vector: at long context these
 * weights cost as much as the two attention products. */
#define LN2_D 0.6931471805599453

/* Lanes of s as doubles: p = (float)poly, j = (int)(n - K) (INT32_MIN when
 * n - K < -160 or not a number). */
static inline __m256 base2_poly8(__m256 s, __m512d K, __m256i *j) {
    const __m512d x = _mm512_mul_pd(_mm512_cvtps_pd(s), _mm512_set1_pd(KLD_LOG2E_D));
    const __m512d n = _mm512_roundscale_pd(x, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    const __m512d jd = _mm512_sub_pd(n, K);
    const __mmask8 far = _mm512_cmp_pd_mask(jd, _mm512_set1_pd(-160), _CMP_NGE_UQ);
    *j = _mm512_cvttpd_epi32(_mm512_mask_blend_pd(far, jd, _mm512_set1_pd(-0x1p31)));
    const __m512d t = _mm512_mul_pd(_mm512_sub_pd(x, n), _mm512_set1_pd(LN2_D));
    static const double c[] = {1.0 / 40320, 1.0 / 5040, 1.0 / 720, 1.0 / 120, 1.0 / 24, 1.0 / 6, 0.5, 1.0, 1.0};
    __m512d p = _mm512_set1_pd(1.0 / 362880);
#pragma GCC unroll 9
    for (int i = 0; i < 9; i++) p = _mm512_add_pd(_mm512_mul_pd(p, t), _mm512_set1_pd(c[i]));
    return _mm512_cvtpd_ps(p);
}

/* w[0..16) = the weights of in[0..16); returns them. */
static inline __m512 base2_weight16_512(const float *in, __m512d K) {
    __m256i j0, j1;
    /* two independent polynomial chains side by side */
    const __m256 p0 = base2_poly8(_mm256_loadu_ps(in), K, &j0), p1 = base2_poly8(_mm256_loadu_ps(in + 8), K, &j1);
    const __m512 p = _mm512_insertf32x8(_mm512_castps256_ps512(p0), p1, 1);
    __m512i j = _mm512_inserti32x8(_mm512_castsi256_si512(j0), j1, 1);
    /* p · 2^j as kld_scale_pow2: j < -126 in two steps (2^(j+64), then 2^-64); INT32_MIN gives 0 */
    const __mmask16 zero = _mm512_cmpeq_epi32_mask(j, _mm512_set1_epi32(INT32_MIN));
    const __mmask16 two = _mm512_cmplt_epi32_mask(j, _mm512_set1_epi32(-126));
    const __m512 b = _mm512_mask_blend_ps(two, _mm512_set1_ps(1.0f), _mm512_set1_ps(0x1p-64f));
    j = _mm512_mask_add_epi32(j, two, j, _mm512_set1_epi32(64));
    const __m512 a = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(j, _mm512_set1_epi32(127)), 23));
    return _mm512_maskz_mul_ps((__mmask16)~zero, _mm512_mul_ps(p, a), b);
}

/* The 16 weights' sum in double as group16_sum adds it: j with j + 8, + 4, + 2, + 1. */
static inline double group16_sum_512(__m512 w) {
    const __m512d s8 = _mm512_add_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(w)),
                                     _mm512_cvtps_pd(_mm512_extractf32x8_ps(w, 1)));
    const __m256d s4 = _mm256_add_pd(_mm512_castpd512_pd256(s8), _mm512_extractf64x4_pd(s8, 1));
    const __m128d s2 = _mm_add_pd(_mm256_castpd256_pd128(s4), _mm256_extractf128_pd(s4, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s2, _mm_unpackhi_pd(s2, s2)));
}

double kld_avx512_base2_weights(float *x, int64_t n, double K, double sum) {
    const __m512d vK = _mm512_set1_pd(K);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 w = base2_weight16_512(x + i, vK);
        _mm512_storeu_ps(x + i, w);
        sum += group16_sum_512(w);
    }
    if (i < n) { /* the tail through a buffer padded with -inf (weights 0) */
        float in[16];
        for (int c = 0; c < 16; c++) in[c] = i + c < n ? x[i + c] : -INFINITY;
        const __m512 w = base2_weight16_512(in, vK);
        _mm512_mask_storeu_ps(x + i, (__mmask16)((1u << (n - i)) - 1), w);
        sum += group16_sum_512(w);
    }
    return sum;
}
