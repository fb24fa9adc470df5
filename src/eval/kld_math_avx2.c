/* kld_math_avx2.c — AVX2+FMA kernels of the per-position math: a top-k scan
 * that filters eight logits per compare, and the exp/log work in double,
 * four lanes at a time, with polynomial exp and log (libm has no vector
 * versions under our flags). Agrees with kld_math_ref.c to ~1e-12 relative;
 * identical rows still give exactly zero divergences because both rows go
 * through the same operations and log(1) is exactly 0 here. */
#include "eval/kld_math_impl.h"

#include <immintrin.h>
#include <math.h>

/* fdlibm's split of ln 2: k * LN2_HI is exact for |k| < 2^11. */
#define LN2_HI 6.93147180369123816490e-01
#define LN2_LO 1.90821492927058770002e-10

/* exp(x) for x <= 708; 0 below -708 (and for -inf), where the true value is
 * under 1e-307 and contributes nothing to a probability sum. Range reduction
 * x = k ln2 + r, |r| <= ln2/2, then Taylor to degree 13 (truncation < 1e-17
 * relative). */
static inline __m256d exp4(__m256d x) {
    const __m256d lo = _mm256_set1_pd(-708.0);
    __m256d under = _mm256_cmp_pd(x, lo, _CMP_LT_OQ);
    x = _mm256_min_pd(_mm256_max_pd(x, lo), _mm256_set1_pd(708.0));
    __m256d k = _mm256_round_pd(_mm256_mul_pd(x, _mm256_set1_pd(1.4426950408889634074)),
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256d r = _mm256_fnmadd_pd(k, _mm256_set1_pd(LN2_HI), x);
    r = _mm256_fnmadd_pd(k, _mm256_set1_pd(LN2_LO), r);
    __m256d p = _mm256_set1_pd(1.0 / 6227020800.0);
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 479001600.0));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 39916800.0));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 3628800.0));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 362880.0));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 40320.0));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 5040.0));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 720.0));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 120.0));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 24.0));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 6.0));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(0.5));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0));
    __m256i e = _mm256_cvtepi32_epi64(_mm256_cvtpd_epi32(k));
    e = _mm256_slli_epi64(_mm256_add_epi64(e, _mm256_set1_epi64x(1023)), 52);
    return _mm256_andnot_pd(under, _mm256_mul_pd(p, _mm256_castsi256_pd(e)));
}

/* ln(u) for u >= 0 (u = 0 gives -1023 ln 2, which callers multiply by 0).
 * u = 2^e m with m in [sqrt(1/2), sqrt(2)); ln m = 2 atanh(f), f = (m-1)/(m+1),
 * |f| <= 0.172, series to f^23 (truncation < 1e-18). ln(1) is exactly 0. */
static inline __m256d log4(__m256d u) {
    __m256i bits = _mm256_castpd_si256(u);
    __m256i biased = _mm256_srli_epi64(bits, 52);
    __m256d m = _mm256_castsi256_pd(
        _mm256_or_si256(_mm256_and_si256(bits, _mm256_set1_epi64x(0x000FFFFFFFFFFFFFLL)),
                        _mm256_set1_epi64x(0x3FF0000000000000LL)));
    __m256d big = _mm256_cmp_pd(m, _mm256_set1_pd(1.4142135623730950488), _CMP_GT_OQ);
    m = _mm256_blendv_pd(m, _mm256_mul_pd(m, _mm256_set1_pd(0.5)), big);
    /* biased exponent (0..2047) to double: add to the bits of 2^52. */
    __m256d e = _mm256_sub_pd(
        _mm256_castsi256_pd(_mm256_add_epi64(biased, _mm256_set1_epi64x(0x4330000000000000LL))),
        _mm256_set1_pd(4503599627370496.0 + 1023.0));
    e = _mm256_add_pd(e, _mm256_and_pd(big, _mm256_set1_pd(1.0)));
    const __m256d one = _mm256_set1_pd(1.0);
    __m256d f = _mm256_div_pd(_mm256_sub_pd(m, one), _mm256_add_pd(m, one));
    __m256d f2 = _mm256_mul_pd(f, f);
    __m256d s = _mm256_set1_pd(1.0 / 23.0);
    s = _mm256_fmadd_pd(s, f2, _mm256_set1_pd(1.0 / 21.0));
    s = _mm256_fmadd_pd(s, f2, _mm256_set1_pd(1.0 / 19.0));
    s = _mm256_fmadd_pd(s, f2, _mm256_set1_pd(1.0 / 17.0));
    s = _mm256_fmadd_pd(s, f2, _mm256_set1_pd(1.0 / 15.0));
    s = _mm256_fmadd_pd(s, f2, _mm256_set1_pd(1.0 / 13.0));
    s = _mm256_fmadd_pd(s, f2, _mm256_set1_pd(1.0 / 11.0));
    s = _mm256_fmadd_pd(s, f2, _mm256_set1_pd(1.0 / 9.0));
    s = _mm256_fmadd_pd(s, f2, _mm256_set1_pd(1.0 / 7.0));
    s = _mm256_fmadd_pd(s, f2, _mm256_set1_pd(1.0 / 5.0));
    s = _mm256_fmadd_pd(s, f2, _mm256_set1_pd(1.0 / 3.0));
    s = _mm256_fmadd_pd(s, f2, one);
    __m256d lnm = _mm256_mul_pd(_mm256_add_pd(f, f), s);
    return _mm256_fmadd_pd(e, _mm256_set1_pd(LN2_HI),
                           _mm256_fmadd_pd(e, _mm256_set1_pd(LN2_LO), lnm));
}

static inline double hsum(__m256d v) {
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

static void offer_scalar(const float *x, int32_t i, kld_topk *h, bool *bad) {
    float v = x[i];
    if (isnan(v) || v == INFINITY) *bad = true;
    if (!kld_topk_full(h) || v > kld_topk_threshold(h)) kld_topk_offer(h, v, i);
}

static void scan_avx2(const float *x, int32_t n, kld_topk *h, bool *bad) {
    int32_t i = 0;
    for (; i < n && !kld_topk_full(h); i++) offer_scalar(x, i, h, bad);
    const __m256 pinf = _mm256_set1_ps(INFINITY);
    __m256 thr = _mm256_set1_ps(kld_topk_threshold(h));
    __m256 flags = _mm256_setzero_ps();
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        flags = _mm256_or_ps(flags, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        flags = _mm256_or_ps(flags, _mm256_cmp_ps(v, pinf, _CMP_EQ_OQ));
        unsigned above = (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(v, thr, _CMP_GT_OQ));
        if (!above) continue; /* the common case once the heap holds large values */
        while (above) {
            int j = __builtin_ctz(above);
            above &= above - 1;
            if (x[i + j] > kld_topk_threshold(h)) kld_topk_offer(h, x[i + j], i + j);
        }
        thr = _mm256_set1_ps(kld_topk_threshold(h));
    }
    if (_mm256_movemask_ps(flags)) *bad = true;
    for (; i < n; i++) offer_scalar(x, i, h, bad);
}

/* The last n % 8 logits, padded with -inf (probability 0, every term 0). */
/* Eight floats of x and of y from index i; past n the lanes are -inf
 * (probability 0), so the last partial block needs no special case. */
static void load_pair(const float *x, const float *y, int32_t i, int32_t n, __m256 *xv, __m256 *yv) {
    if (i + 8 <= n) {
        *xv = _mm256_loadu_ps(x + i);
        *yv = _mm256_loadu_ps(y + i);
        return;
    }
    float tx[8], ty[8];
    for (int j = 0; j < 8; j++) {
        tx[j] = i + j < n ? x[i + j] : -INFINITY;
        ty[j] = i + j < n ? y[i + j] : -INFINITY;
    }
    *xv = _mm256_loadu_ps(tx);
    *yv = _mm256_loadu_ps(ty);
}

static void sum_exp_avx2(const float *x, const float *y, int32_t n, float mx, float my,
                         double out[2]) {
    const __m256d vmx = _mm256_set1_pd((double)mx), vmy = _mm256_set1_pd((double)my);
    __m256d sx0 = _mm256_setzero_pd(), sx1 = sx0, sy0 = sx0, sy1 = sx0;
    for (int32_t i = 0; i < n; i += 8) {
        __m256 xv, yv;
        load_pair(x, y, i, n, &xv, &yv);
        __m256d x0 = _mm256_cvtps_pd(_mm256_castps256_ps128(xv));
        __m256d x1 = _mm256_cvtps_pd(_mm256_extractf128_ps(xv, 1));
        __m256d y0 = _mm256_cvtps_pd(_mm256_castps256_ps128(yv));
        __m256d y1 = _mm256_cvtps_pd(_mm256_extractf128_ps(yv, 1));
        sx0 = _mm256_add_pd(sx0, exp4(_mm256_sub_pd(x0, vmx)));
        sx1 = _mm256_add_pd(sx1, exp4(_mm256_sub_pd(x1, vmx)));
        sy0 = _mm256_add_pd(sy0, exp4(_mm256_sub_pd(y0, vmy)));
        sy1 = _mm256_add_pd(sy1, exp4(_mm256_sub_pd(y1, vmy)));
    }
    out[0] = hsum(_mm256_add_pd(sx0, sx1));
    out[1] = hsum(_mm256_add_pd(sy0, sy1));
}

typedef struct div_acc {
    __m256d kld, rev, js;
} div_acc;

/* Four lanes of kld_math_kernels.divergences; the masks make p = 0 (or
 * q = 0) terms exactly 0 even when ln p - ln q is NaN or infinite. */
static inline void div4(__m256d xd, __m256d yd, __m256d vmx, __m256d vmy, __m256d vlsx,
                        __m256d vlsy, div_acc *a) {
    const __m256d zero = _mm256_setzero_pd(), one = _mm256_set1_pd(1.0);
    __m256d lp = _mm256_sub_pd(_mm256_sub_pd(xd, vmx), vlsx);
    __m256d lq = _mm256_sub_pd(_mm256_sub_pd(yd, vmy), vlsy);
    __m256d p = exp4(lp), q = exp4(lq);
    __m256d d = _mm256_sub_pd(lp, lq);
    __m256d pm = _mm256_cmp_pd(p, zero, _CMP_GT_OQ), qm = _mm256_cmp_pd(q, zero, _CMP_GT_OQ);
    a->kld = _mm256_add_pd(a->kld, _mm256_and_pd(pm, _mm256_mul_pd(p, d)));
    a->rev = _mm256_sub_pd(a->rev, _mm256_and_pd(qm, _mm256_mul_pd(q, d)));
    __m256d s = _mm256_add_pd(p, q);
    __m256d t = _mm256_and_pd(_mm256_cmp_pd(s, zero, _CMP_GT_OQ),
                              _mm256_div_pd(_mm256_sub_pd(q, p), s));
    __m256d u = _mm256_add_pd(one, t), v = _mm256_sub_pd(one, t);
    __m256d h = _mm256_add_pd(_mm256_mul_pd(u, log4(u)), _mm256_mul_pd(v, log4(v)));
    h = _mm256_max_pd(h, zero); /* h(t) >= 0; rounding of 1 +- t can dip below */
    a->js = _mm256_add_pd(a->js, _mm256_mul_pd(s, h));
}

static void divergences_avx2(const float *x, const float *y, int32_t n, float mx, float my,
                             double lsx, double lsy, double out[3]) {
    const __m256d vmx = _mm256_set1_pd((double)mx), vmy = _mm256_set1_pd((double)my);
    const __m256d vlsx = _mm256_set1_pd(lsx), vlsy = _mm256_set1_pd(lsy);
    div_acc a0 = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd()}, a1 = a0;
    for (int32_t i = 0; i < n; i += 8) {
        __m256 xv, yv;
        load_pair(x, y, i, n, &xv, &yv);
        div4(_mm256_cvtps_pd(_mm256_castps256_ps128(xv)), _mm256_cvtps_pd(_mm256_castps256_ps128(yv)),
             vmx, vmy, vlsx, vlsy, &a0);
        div4(_mm256_cvtps_pd(_mm256_extractf128_ps(xv, 1)), _mm256_cvtps_pd(_mm256_extractf128_ps(yv, 1)),
             vmx, vmy, vlsx, vlsy, &a1);
    }
    out[0] = hsum(_mm256_add_pd(a0.kld, a1.kld));
    out[1] = hsum(_mm256_add_pd(a0.rev, a1.rev));
    out[2] = hsum(_mm256_add_pd(a0.js, a1.js));
}

const kld_math_kernels kld_math_kernels_avx2 = {"avx2", scan_avx2, sum_exp_avx2, divergences_avx2};
