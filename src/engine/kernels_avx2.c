/* kernels_avx2.c — AVX2/FMA twins of kernels_ref.c: a 6×16 register-blocked
 * GEMM microkernel, 8×8 transposes for panel packing, and the vectorised
 * exp used by softmax / SiLU / GELU / soft-cap. Every lane performs the
 * reference's operations in the reference's order, so results are equal
 * bit for bit (the test compares them). */
#include "engine/kernels.h"

#include "engine/lanes_avx2.h"
#include "tensor/types.h"

#include <immintrin.h>
#include <math.h>

#define EXP_HI 88.3762626647949f
#define EXP_LO (-87.3365447505531f)
#define LOG2E 1.44269504088896341f
#define LN2_HI 0.693359375f
#define LN2_LO (-2.12194440e-4f)

static inline __m256 exp8(__m256 x) {
    __m256 xc = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(EXP_LO)), _mm256_set1_ps(EXP_HI));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(LOG2E)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-LN2_HI), xc);
    r = _mm256_fmadd_ps(n, _mm256_set1_ps(-LN2_LO), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    __m256 z = _mm256_mul_ps(r, r);
    p = _mm256_fmadd_ps(p, z, r);
    p = _mm256_add_ps(p, _mm256_set1_ps(1.0f));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    __m256 y = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
    __m256 under = _mm256_cmp_ps(x, _mm256_set1_ps(EXP_LO), _CMP_LT_OQ);
    return _mm256_andnot_ps(under, y);
}

/* Mask with the first n (0..8) lanes set. */

/* ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)), as reduce8 in kernels_ref.c. */
static inline float hsum8(__m256 v) {
    __m128 a = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    __m128 b = _mm_add_ps(a, _mm_movehl_ps(a, a));
    __m128 c = _mm_add_ss(b, _mm_shuffle_ps(b, b, 1));
    return _mm_cvtss_f32(c);
}

static inline float hmax8(__m256 v) {
    __m128 a = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    __m128 b = _mm_max_ps(a, _mm_movehl_ps(a, a));
    __m128 c = _mm_max_ss(b, _mm_shuffle_ps(b, b, 1));
    return _mm_cvtss_f32(c);
}

/* ---- GEMM microkernel ---- */

/* Accumulators are named variables, not arrays, so that they stay in the
 * 12 ymm registers (GCC spills arrays of vectors to the stack). */
static inline __attribute__((always_inline)) void ukernel_tpl(const int MR, const bool full, int nr,
                                                              int64_t kc, const float *A,
                                                              int64_t lda, const float *B,
                                                              int64_t ldb, float *C, int64_t ldc,
                                                              bool load) {
    const __m256i mk0 = lane_mask(nr), mk1 = lane_mask(nr - 8);
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
           c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
#define LOADC(m, x0, x1)                                                                        \
    if (MR > m && load) {                                                                       \
        x0 = full ? _mm256_loadu_ps(C + m * ldc) : _mm256_maskload_ps(C + m * ldc, mk0);       \
        x1 = full ? _mm256_loadu_ps(C + m * ldc + 8) : _mm256_maskload_ps(C + m * ldc + 8, mk1); \
    }
    LOADC(0, c00, c01) LOADC(1, c10, c11) LOADC(2, c20, c21)
    LOADC(3, c30, c31) LOADC(4, c40, c41) LOADC(5, c50, c51)
#undef LOADC
    const float *a0 = A, *a1 = A + lda, *a2 = A + 2 * lda, *a3 = A + 3 * lda, *a4 = A + 4 * lda,
                *a5 = A + 5 * lda;
#pragma GCC unroll 4
    for (int64_t k = 0; k < kc; k++) {
        const __m256 b0 = full ? _mm256_loadu_ps(B) : _mm256_maskload_ps(B, mk0);
        const __m256 b1 = full ? _mm256_loadu_ps(B + 8) : _mm256_maskload_ps(B + 8, mk1);
        B += ldb;
        __m256 a;
#define STEP(m, p, x0, x1)                     \
    if (MR > m) {                              \
        a = _mm256_broadcast_ss(p + k);        \
        x0 = _mm256_fmadd_ps(a, b0, x0);       \
        x1 = _mm256_fmadd_ps(a, b1, x1);       \
    }
        STEP(0, a0, c00, c01) STEP(1, a1, c10, c11) STEP(2, a2, c20, c21)
        STEP(3, a3, c30, c31) STEP(4, a4, c40, c41) STEP(5, a5, c50, c51)
#undef STEP
    }
#define STOREC(m, x0, x1)                                     \
    if (MR > m) {                                             \
        if (full) {                                           \
            _mm256_storeu_ps(C + m * ldc, x0);                \
            _mm256_storeu_ps(C + m * ldc + 8, x1);            \
        } else {                                              \
            _mm256_maskstore_ps(C + m * ldc, mk0, x0);        \
            _mm256_maskstore_ps(C + m * ldc + 8, mk1, x1);    \
        }                                                     \
    }
    STOREC(0, c00, c01) STOREC(1, c10, c11) STOREC(2, c20, c21)
    STOREC(3, c30, c31) STOREC(4, c40, c41) STOREC(5, c50, c51)
#undef STOREC
}

#define UK(MR, FULL)                                                                              \
    static void uk_##MR##_##FULL(int nr, int64_t kc, const float *A, int64_t lda, const float *B, \
                                 int64_t ldb, float *C, int64_t ldc, bool load) {                 \
        ukernel_tpl(MR, FULL, nr, kc, A, lda, B, ldb, C, ldc, load);                              \
    }
UK(1, 1) UK(2, 1) UK(3, 1) UK(4, 1) UK(5, 1) UK(6, 1)
UK(1, 0) UK(2, 0) UK(3, 0) UK(4, 0) UK(5, 0) UK(6, 0)
#undef UK

typedef void (*uk_fn)(int, int64_t, const float *, int64_t, const float *, int64_t, float *,
                      int64_t, bool);
static const uk_fn uk_full[KLD_MR + 1] = {NULL, uk_1_1, uk_2_1, uk_3_1, uk_4_1, uk_5_1, uk_6_1};
static const uk_fn uk_part[KLD_MR + 1] = {NULL, uk_1_0, uk_2_0, uk_3_0, uk_4_0, uk_5_0, uk_6_0};

static void ukernel_avx2(int mr, int nr, int64_t kc, const float *A, int64_t lda, const float *B,
                         int64_t ldb, float *C, int64_t ldc, bool load) {
    (nr == KLD_NR ? uk_full : uk_part)[mr](nr, kc, A, lda, B, ldb, C, ldc, load);
}

/* ---- packing ---- */

/* 8×8 transpose of rows r0..r7 (named values: an array would be spilled). */
#define TRANSPOSE8(r0, r1, r2, r3, r4, r5, r6, r7)                                  \
    do {                                                                            \
        __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);    \
        __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);    \
        __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);    \
        __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);    \
        __m256 u0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));             \
        __m256 u1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));             \
        __m256 u2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));             \
        __m256 u3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));             \
        __m256 u4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));             \
        __m256 u5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));             \
        __m256 u6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));             \
        __m256 u7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));             \
        r0 = _mm256_permute2f128_ps(u0, u4, 0x20);                                  \
        r1 = _mm256_permute2f128_ps(u1, u5, 0x20);                                  \
        r2 = _mm256_permute2f128_ps(u2, u6, 0x20);                                  \
        r3 = _mm256_permute2f128_ps(u3, u7, 0x20);                                  \
        r4 = _mm256_permute2f128_ps(u0, u4, 0x31);                                  \
        r5 = _mm256_permute2f128_ps(u1, u5, 0x31);                                  \
        r6 = _mm256_permute2f128_ps(u2, u6, 0x31);                                  \
        r7 = _mm256_permute2f128_ps(u3, u7, 0x31);                                  \
    } while (0)

/* Eight values of a row: float32, or f16 widened exactly. */
static inline __attribute__((always_inline)) __m256 load8(const void *p, bool f16) {
    return f16 ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)) : _mm256_loadu_ps((const float *)p);
}

/* Rows [half*8, half*8+8) × k-block [k, k+8) of src (float32, or f16 when f16; rows ld
 * elements apart) into the panel (missing rows 0). */
static inline __attribute__((always_inline)) void pack_8x8(const void *src, int64_t ld, int rows, int64_t k,
                                                            int half, float *panel, bool f16) {
    const size_t es = f16 ? 2 : 4, row = (size_t)ld * es;
    const char *p = (const char *)src + ((size_t)half * 8 * (size_t)ld + (size_t)k) * es;
    const int base = half * 8;
    const __m256 z = _mm256_setzero_ps();
    __m256 r0 = base + 0 < rows ? load8(p, f16) : z;
    __m256 r1 = base + 1 < rows ? load8(p + row, f16) : z;
    __m256 r2 = base + 2 < rows ? load8(p + 2 * row, f16) : z;
    __m256 r3 = base + 3 < rows ? load8(p + 3 * row, f16) : z;
    __m256 r4 = base + 4 < rows ? load8(p + 4 * row, f16) : z;
    __m256 r5 = base + 5 < rows ? load8(p + 5 * row, f16) : z;
    __m256 r6 = base + 6 < rows ? load8(p + 6 * row, f16) : z;
    __m256 r7 = base + 7 < rows ? load8(p + 7 * row, f16) : z;
    TRANSPOSE8(r0, r1, r2, r3, r4, r5, r6, r7);
    float *o = panel + k * KLD_NR + base;
    _mm256_storeu_ps(o, r0);
    _mm256_storeu_ps(o + KLD_NR, r1);
    _mm256_storeu_ps(o + 2 * KLD_NR, r2);
    _mm256_storeu_ps(o + 3 * KLD_NR, r3);
    _mm256_storeu_ps(o + 4 * KLD_NR, r4);
    _mm256_storeu_ps(o + 5 * KLD_NR, r5);
    _mm256_storeu_ps(o + 6 * KLD_NR, r6);
    _mm256_storeu_ps(o + 7 * KLD_NR, r7);
}

/* panel[k*16 + j] = src[j*ld + k] (float32, or f16 widened exactly) for j < rows, else 0. */
static inline __attribute__((always_inline)) void pack16(const void *src, int64_t ld, int rows, int64_t kc,
                                                          float *panel, bool f16) {
    int64_t k = 0;
    for (; k + 8 <= kc; k += 8) {
        pack_8x8(src, ld, rows, k, 0, panel, f16);
        pack_8x8(src, ld, rows, k, 1, panel, f16);
    }
    for (; k < kc; k++)
        for (int j = 0; j < KLD_NR; j++)
            panel[k * KLD_NR + j] = j >= rows ? 0.0f
                                    : f16     ? kld_f16_to_f32(((const uint16_t *)src)[j * ld + k])
                                              : ((const float *)src)[j * ld + k];
}

static void pack16_avx2(const float *src, int64_t ld, int rows, int64_t kc, float *panel) {
    pack16(src, ld, rows, kc, panel, false);
}

static void pack16_f16_avx2(const uint16_t *src, int64_t ld, int rows, int64_t kc, float *panel) {
    pack16(src, ld, rows, kc, panel, true);
}

/* ---- one activation row (decode) ---- */

_Static_assert(KLD_GEMV_ROWS <= KLD_NR_MAX, "the one-row panel fits gemm.c's scratch");

/* acc = the fma chain over columns [k, k+4) of the 8 rows at g (stride
 * KLD_GEMV_LD): the 128-bit halves of rows j and j+4 share a vector, and
 * 4×4 transposes within the lanes give one vector of 8 rows per column. */
static inline __attribute__((always_inline)) __m256 gemv_quad(const float *g, const float *a,
                                                              __m256 acc) {
#define PAIR(j) _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(g + (j) * KLD_GEMV_LD)), \
                                     _mm_loadu_ps(g + ((j) + 4) * KLD_GEMV_LD), 1)
    const __m256 t0 = PAIR(0), t1 = PAIR(1), t2 = PAIR(2), t3 = PAIR(3);
#undef PAIR
    const __m256d a01 = _mm256_castps_pd(_mm256_unpacklo_ps(t0, t1));
    const __m256d b01 = _mm256_castps_pd(_mm256_unpackhi_ps(t0, t1));
    const __m256d a23 = _mm256_castps_pd(_mm256_unpacklo_ps(t2, t3));
    const __m256d b23 = _mm256_castps_pd(_mm256_unpackhi_ps(t2, t3));
    acc = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 0), _mm256_castpd_ps(_mm256_unpacklo_pd(a01, a23)), acc);
    acc = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 1), _mm256_castpd_ps(_mm256_unpackhi_pd(a01, a23)), acc);
    acc = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 2), _mm256_castpd_ps(_mm256_unpacklo_pd(b01, b23)), acc);
    acc = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 3), _mm256_castpd_ps(_mm256_unpackhi_pd(b01, b23)), acc);
    return acc;
}

/* y[n] (n < rows <= 32) = the fma chain over k < kc of a[k] · w[n*LD + k],
 * from y[n] when `load`, else from 0: the microkernel's chain for mr = 1
 * (fmaf is symmetric in its factors). Groups of 8 past `rows` are skipped;
 * lanes past it within a group are computed (the caller zeroes them) and
 * dropped. */
static void gemv_f32_avx2(const float *w, int rows, int64_t kc, const float *a, float *y,
                          bool load) {
    const __m256i mk0 = lane_mask(rows), mk1 = lane_mask(rows - 8), mk2 = lane_mask(rows - 16),
                  mk3 = lane_mask(rows - 24);
    __m256 acc0 = load ? _mm256_maskload_ps(y, mk0) : _mm256_setzero_ps();
    __m256 acc1 = load ? _mm256_maskload_ps(y + 8, mk1) : _mm256_setzero_ps();
    __m256 acc2 = load ? _mm256_maskload_ps(y + 16, mk2) : _mm256_setzero_ps();
    __m256 acc3 = load ? _mm256_maskload_ps(y + 24, mk3) : _mm256_setzero_ps();
    int64_t k = 0;
    const int64_t G = 8 * KLD_GEMV_LD; /* one group of 8 rows */
    if (rows > 24)
        for (; k + 4 <= kc; k += 4) {
            acc0 = gemv_quad(w + k, a + k, acc0);
            acc1 = gemv_quad(w + G + k, a + k, acc1);
            acc2 = gemv_quad(w + 2 * G + k, a + k, acc2);
            acc3 = gemv_quad(w + 3 * G + k, a + k, acc3);
        }
    else
        for (; k + 4 <= kc; k += 4) {
            acc0 = gemv_quad(w + k, a + k, acc0);
            if (rows > 8) acc1 = gemv_quad(w + G + k, a + k, acc1);
            if (rows > 16) acc2 = gemv_quad(w + 2 * G + k, a + k, acc2);
        }
    if (k < kc) { /* a k tail (kc not a multiple of 4): the same chain, element by element */
        float buf[KLD_GEMV_ROWS];
        _mm256_storeu_ps(buf, acc0);
        _mm256_storeu_ps(buf + 8, acc1);
        _mm256_storeu_ps(buf + 16, acc2);
        _mm256_storeu_ps(buf + 24, acc3);
        for (int n = 0; n < rows; n++)
            for (int64_t kk = k; kk < kc; kk++) buf[n] = fmaf(a[kk], w[n * KLD_GEMV_LD + kk], buf[n]);
        acc0 = _mm256_loadu_ps(buf);
        acc1 = _mm256_loadu_ps(buf + 8);
        acc2 = _mm256_loadu_ps(buf + 16);
        acc3 = _mm256_loadu_ps(buf + 24);
    }
    _mm256_maskstore_ps(y, mk0, acc0);
    _mm256_maskstore_ps(y + 8, mk1, acc1);
    _mm256_maskstore_ps(y + 16, mk2, acc2);
    _mm256_maskstore_ps(y + 24, mk3, acc3);
}

/* ---- row operations ---- */

static void softmax_avx2(float *x, int64_t n) {
    __m256 vmax = _mm256_set1_ps(-INFINITY);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(x + i));
    float mx = hmax8(vmax);
    for (int64_t j = i; j < n; j++) mx = fmaxf(mx, x[j]);
    const __m256 vm = _mm256_set1_ps(mx);
    __m256 sum = _mm256_setzero_ps();
    for (i = 0; i + 8 <= n; i += 8) {
        __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
        _mm256_storeu_ps(x + i, e);
        sum = _mm256_add_ps(sum, e);
    }
    if (i < n) {
        __m256i mk = lane_mask(n - i);
        __m256 v = _mm256_maskload_ps(x + i, mk);
        __m256 e = _mm256_and_ps(exp8(_mm256_sub_ps(v, vm)), _mm256_castsi256_ps(mk));
        _mm256_maskstore_ps(x + i, mk, e);
        sum = _mm256_add_ps(sum, e);
    }
    const __m256 inv = _mm256_set1_ps(1.0f / hsum8(sum));
    for (i = 0; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), inv));
    for (; i < n; i++) x[i] *= _mm256_cvtss_f32(inv);
}

static inline __m256 silu8(__m256 x) {
    __m256 e = exp8(_mm256_xor_ps(x, _mm256_set1_ps(-0.0f)));
    return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

#define GELU_NEG_2K (-1.5957691216057308f)
#define GELU_C 0.044715f

static inline __m256 gelu8(__m256 x) {
    __m256 t = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
    __m256 inner = _mm256_fmadd_ps(t, _mm256_set1_ps(GELU_C), x);
    __m256 e = exp8(_mm256_mul_ps(inner, _mm256_set1_ps(GELU_NEG_2K)));
    return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

#define ACT_MUL(NAME, ACT)                                                                   \
    static void NAME(float *g, const float *up, int64_t n) {                                 \
        int64_t i = 0;                                                                       \
        for (; i + 8 <= n; i += 8)                                                           \
            _mm256_storeu_ps(g + i, _mm256_mul_ps(ACT(_mm256_loadu_ps(g + i)),               \
                                                  _mm256_loadu_ps(up + i)));                 \
        if (i < n) {                                                                         \
            __m256i mk = lane_mask(n - i);                                                   \
            __m256 r = _mm256_mul_ps(ACT(_mm256_maskload_ps(g + i, mk)),                     \
                                     _mm256_maskload_ps(up + i, mk));                        \
            _mm256_maskstore_ps(g + i, mk, r);                                               \
        }                                                                                    \
    }
ACT_MUL(silu_mul_avx2, silu8)
ACT_MUL(gelu_tanh_mul_avx2, gelu8)
#undef ACT_MUL

static inline __m256 softcap8(__m256 x, __m256 cap) {
    __m256 y = _mm256_div_ps(x, cap);
    __m256 sign = _mm256_and_ps(y, _mm256_set1_ps(-0.0f));
    __m256 a = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), y);
    __m256 e = exp8(_mm256_mul_ps(_mm256_set1_ps(-2.0f), a));
    __m256 one = _mm256_set1_ps(1.0f);
    __m256 t = _mm256_div_ps(_mm256_sub_ps(one, e), _mm256_add_ps(one, e));
    return _mm256_mul_ps(_mm256_or_ps(t, sign), cap);
}

static void softcap_avx2(float *x, int64_t n, float cap) {
    const __m256 vc = _mm256_set1_ps(cap);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, softcap8(_mm256_loadu_ps(x + i), vc));
    if (i < n) {
        __m256i mk = lane_mask(n - i);
        _mm256_maskstore_ps(x + i, mk, softcap8(_mm256_maskload_ps(x + i, mk), vc));
    }
}

static void scale_avx2(float *x, int64_t n, float s) {
    const __m256 vs = _mm256_set1_ps(s);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vs));
    for (; i < n; i++) x[i] *= s;
}

/* maxps(x, m) is x > m ? x : m, so a NaN in x never replaces m; the lanes'
 * maxima then give the row's (max is exact in any order; a -0 against a +0
 * may come out either way, which no caller tells apart). */
static float max_avx2(const float *x, int64_t n) {
    __m256 m0 = _mm256_set1_ps(-INFINITY), m1 = m0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        m0 = _mm256_max_ps(_mm256_loadu_ps(x + i), m0);
        m1 = _mm256_max_ps(_mm256_loadu_ps(x + i + 8), m1);
    }
    float lanes[8];
    _mm256_storeu_ps(lanes, _mm256_max_ps(m0, m1));
    float mx = -INFINITY;
    for (int c = 0; c < 8; c++) mx = lanes[c] > mx ? lanes[c] : mx;
    for (; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    return mx;
}

static double sum_exp_avx2(const float *x, int64_t n, float mx) {
    const __m256 vm = _mm256_set1_ps(mx);
    __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
        lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
        hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
    }
    if (i < n) {
        __m256i mk = lane_mask(n - i);
        __m256 e = _mm256_and_ps(exp8(_mm256_sub_ps(_mm256_maskload_ps(x + i, mk), vm)),
                                 _mm256_castsi256_ps(mk));
        lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
        hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
    }
    __m256d a = _mm256_add_pd(lo, hi); /* a0..a3 */
    __m128d b = _mm_add_pd(_mm256_castpd256_pd128(a), _mm256_extractf128_pd(a, 1));
    return _mm_cvtsd_f64(_mm_add_sd(b, _mm_unpackhi_pd(b, b)));
}

/* ---- base-2 softmax weights (base2_weight in kernels_ref.c) ----
 * Lane for lane the reference's operations: the double multiply, floor
 * (roundpd, exact like floor()), the polynomial as separate mul and add (no
 * fma: this file is compiled with -mfma, but in ISO C mode GCC does not
 * contract), one rounding to float, then the two-step power-of-two
 * scaling. Only the sum stays sequential: double addition in index order. */
#define LN2_D 0.6931471805599453

/* Sixteen lanes as four chains of four doubles, side by side: the
 * polynomial is a chain of 18 dependent operations, so one chain at a
 * time would leave the pipes idle. For chain i (lanes of s_i): p_i =
 * (float)p, j_i = (int)(n - K), INT32_MIN when n - K < -160. */
#define B2_START(i)                                                                           \
    const __m256d x##i = _mm256_mul_pd(_mm256_cvtps_pd(s##i), _mm256_set1_pd(KLD_LOG2E_D));  \
    const __m256d n##i = _mm256_round_pd(x##i, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);  \
    const __m256d jd##i = _mm256_sub_pd(n##i, K);                                             \
    const __m256d far##i = _mm256_cmp_pd(jd##i, _mm256_set1_pd(-160), _CMP_NGE_UQ);          \
    const __m128i j##i = _mm256_cvttpd_epi32(_mm256_blendv_pd(jd##i, _mm256_set1_pd(-0x1p31), far##i)); \
    const __m256d t##i = _mm256_mul_pd(_mm256_sub_pd(x##i, n##i), _mm256_set1_pd(LN2_D));     \
    __m256d p##i = _mm256_set1_pd(1.0 / 362880);
#define B2_STEP(c)                                                                            \
    do {                                                                                      \
        const __m256d cc = _mm256_set1_pd(c);                                                 \
        p0 = _mm256_add_pd(_mm256_mul_pd(p0, t0), cc);                                        \
        p1 = _mm256_add_pd(_mm256_mul_pd(p1, t1), cc);                                        \
        p2 = _mm256_add_pd(_mm256_mul_pd(p2, t2), cc);                                        \
        p3 = _mm256_add_pd(_mm256_mul_pd(p3, t3), cc);                                        \
    } while (0)

/* (float)p · 2^j as kld_scale_pow2 does it: j < -126 in two steps, 2^(j+64)
 * then 2^-64; j = INT32_MIN (a -inf score: n - K is -inf, or NaN for K =
 * -inf) gives 0. */
static inline __m256 base2_scale8(__m256 p, __m256i j) {
    const __m256i zero = _mm256_cmpeq_epi32(_mm256_set1_epi32(INT32_MIN), j);
    const __m256i two = _mm256_cmpgt_epi32(_mm256_set1_epi32(-126), j);
    const __m256 b = _mm256_blendv_ps(_mm256_set1_ps(1.0f), _mm256_set1_ps(0x1p-64f), _mm256_castsi256_ps(two));
    j = _mm256_add_epi32(j, _mm256_and_si256(two, _mm256_set1_epi32(64)));
    const __m256 a = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(j, _mm256_set1_epi32(127)), 23));
    return _mm256_andnot_ps(_mm256_castsi256_ps(zero), _mm256_mul_ps(_mm256_mul_ps(p, a), b));
}

/* w[0..16) = the weights of in[0..16). */
static inline void base2_weight16(const float *in, __m256d K, float *w) {
    const __m256 a = _mm256_loadu_ps(in), b = _mm256_loadu_ps(in + 8);
    const __m128 s0 = _mm256_castps256_ps128(a), s1 = _mm256_extractf128_ps(a, 1);
    const __m128 s2 = _mm256_castps256_ps128(b), s3 = _mm256_extractf128_ps(b, 1);
    B2_START(0)
    B2_START(1)
    B2_START(2)
    B2_START(3)
    B2_STEP(1.0 / 40320);
    B2_STEP(1.0 / 5040);
    B2_STEP(1.0 / 720);
    B2_STEP(1.0 / 120);
    B2_STEP(1.0 / 24);
    B2_STEP(1.0 / 6);
    B2_STEP(0.5);
    B2_STEP(1.0);
    B2_STEP(1.0);
    _mm256_storeu_ps(w, base2_scale8(_mm256_set_m128(_mm256_cvtpd_ps(p1), _mm256_cvtpd_ps(p0)), _mm256_set_m128i(j1, j0)));
    _mm256_storeu_ps(w + 8, base2_scale8(_mm256_set_m128(_mm256_cvtpd_ps(p3), _mm256_cvtpd_ps(p2)), _mm256_set_m128i(j3, j2)));
}
#undef B2_START
#undef B2_STEP

/* The sum of w[0..16) in double as kernels_ref.c's group16_sum adds it:
 * j with j + 8, then + 4, + 2, + 1. */
static inline double group16_sum(const float *w) {
    const __m256 a = _mm256_loadu_ps(w), b = _mm256_loadu_ps(w + 8);
    const __m256d lo = _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(a)),
                                     _mm256_cvtps_pd(_mm256_castps256_ps128(b)));
    const __m256d hi = _mm256_add_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(a, 1)),
                                     _mm256_cvtps_pd(_mm256_extractf128_ps(b, 1)));
    const __m256d s4 = _mm256_add_pd(lo, hi);
    const __m128d s2 = _mm_add_pd(_mm256_castpd256_pd128(s4), _mm256_extractf128_pd(s4, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s2, _mm_unpackhi_pd(s2, s2)));
}

/* Groups of 16 summed pairwise, the groups in index order: one dependent
 * double add per 16 keys instead of 16 (rows start at multiples of 16 keys
 * and online blocks are multiples of 16, so the groups are the same keys in
 * every mode and the sums the same bits). */
static double base2_weights_avx2(float *x, int64_t n, double K, double sum) {
    const __m256d vK = _mm256_set1_pd(K);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        base2_weight16(x + i, vK, x + i);
        sum += group16_sum(x + i);
    }
    if (i < n) { /* the tail through a buffer padded with -inf (weights 0) */
        float in[16], w[16];
        for (int c = 0; c < 16; c++) in[c] = i + c < n ? x[i + c] : -INFINITY;
        base2_weight16(in, vK, w);
        for (int c = 0; i + c < n; c++) x[i + c] = w[c];
        sum += group16_sum(w);
    }
    return sum;
}

const kld_engine_kernels kld_engine_kernels_avx2_table = {
    "avx2", KLD_MR, KLD_NR, ukernel_avx2, pack16_avx2, pack16_avx2, gemv_f32_avx2, KLD_GEMV_ROWS, kld_avx2_gemv_direct, softmax_avx2, silu_mul_avx2, gelu_tanh_mul_avx2,
    softcap_avx2, scale_avx2, max_avx2, sum_exp_avx2, base2_weights_avx2, kld_avx2_gemv_repacked, kld_avx2_pack_repacked,
    kld_avx2_repack, pack16_f16_avx2,
};
