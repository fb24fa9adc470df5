/* quantize_k_avx2.c — AVX2 q4_K / q5_K quantizers, byte for byte as the
 * scalar references (quantize_k_ref.c). The costly part is the scale
 * search of make_qkx2_quants: nstep+1 trial scales over a 32-value
 * sub-block. Here eight trials run at once, one per lane, each lane adding
 * its sums in the scalar order, with the same float operations (no FMA
 * contraction), so every lane's numbers are the scalar ones. The trials are
 * not independent — an accepted trial moves `min`, which later trials use —
 * so the lanes are a speculation: results are accepted in trial order, and
 * after an accepted trial the following ones are recomputed from it. */
/* No a*b+c may become an FMA (the scalar twin rounds twice): GCC does not
 * contract in ISO C mode (-std=c17, CMake's C_EXTENSIONS OFF); clang needs
 * the pragma. */
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif
#include "tensor/kernels.h"

#include <immintrin.h>
#include <math.h>

static inline int nearest_int(float x) {
    float v = x + 12582912.f;
    int32_t i;
    memcpy(&i, &v, 4);
    return (i & 0x007FFFFF) - 0x00400000;
}

/* nearest_int on 8 lanes: the same bit trick. */
static inline __m256i nearest_int8(__m256 x) {
    __m256i i = _mm256_castps_si256(_mm256_add_ps(x, _mm256_set1_ps(12582912.f)));
    return _mm256_sub_epi32(_mm256_and_si256(i, _mm256_set1_epi32(0x007FFFFF)),
                            _mm256_set1_epi32(0x00400000));
}

/* make_qkx2_quants for n = 32 and squared errors (use_mad false). */
static float qkx2_32(int nmax, const float *x, const float *weights, uint8_t *L, float *the_min,
                     float rmin, float rdelta, int nstep) {
    const int n = 32;
    float min = x[0], max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        memset(L, 0, (size_t)n);
        *the_min = -min;
        return 0.f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; i++) {
        int l = nearest_int(iscale * (x[i] - min));
        L[i] = (uint8_t)(l < 0 ? 0 : l > nmax ? nmax : l);
        float diff = scale * (float)L[i] + min - x[i];
        best_error += weights[i] * (diff * diff);
    }
    const __m256i zero = _mm256_setzero_si256(), top = _mm256_set1_epi32(nmax);
    int is = 0;
    while (is <= nstep) {
        /* lanes: trials is .. is+7 with the current min */
        float isc[8];
        for (int k = 0; k < 8; k++)
            isc[k] = (rmin + rdelta * (float)(is + k) + (float)nmax) / (max - min);
        const __m256 vis = _mm256_loadu_ps(isc), vmin = _mm256_set1_ps(min);
        __m256 s_l = _mm256_setzero_ps(), s_l2 = s_l, s_xl = s_l;
        for (int i = 0; i < n; i++) {
            const __m256 xi = _mm256_set1_ps(x[i]), wi = _mm256_set1_ps(weights[i]);
            __m256i li = nearest_int8(_mm256_mul_ps(vis, _mm256_sub_ps(xi, vmin)));
            li = _mm256_max_epi32(zero, _mm256_min_epi32(top, li));
            const __m256 lf = _mm256_cvtepi32_ps(li);
            const __m256 wl = _mm256_mul_ps(wi, lf);
            s_l = _mm256_add_ps(s_l, wl);
            s_l2 = _mm256_add_ps(s_l2, _mm256_mul_ps(wl, lf));
            s_xl = _mm256_add_ps(s_xl, _mm256_mul_ps(wl, xi));
        }
        const __m256 vsw = _mm256_set1_ps(sum_w), vsx = _mm256_set1_ps(sum_x);
        const __m256 D = _mm256_sub_ps(_mm256_mul_ps(vsw, s_l2), _mm256_mul_ps(s_l, s_l));
        __m256 sc = _mm256_div_ps(_mm256_sub_ps(_mm256_mul_ps(vsw, s_xl), _mm256_mul_ps(vsx, s_l)), D);
        __m256 mn = _mm256_div_ps(_mm256_sub_ps(_mm256_mul_ps(s_l2, vsx), _mm256_mul_ps(s_l, s_xl)), D);
        const __m256 pos = _mm256_cmp_ps(mn, _mm256_setzero_ps(), _CMP_GT_OQ);
        sc = _mm256_blendv_ps(sc, _mm256_div_ps(s_xl, s_l2), pos);
        mn = _mm256_blendv_ps(mn, _mm256_setzero_ps(), pos);
        __m256 err = _mm256_setzero_ps();
        for (int i = 0; i < n; i++) {
            const __m256 xi = _mm256_set1_ps(x[i]);
            __m256i li = nearest_int8(_mm256_mul_ps(vis, _mm256_sub_ps(xi, vmin)));
            li = _mm256_max_epi32(zero, _mm256_min_epi32(top, li));
            __m256 diff = _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(sc, _mm256_cvtepi32_ps(li)), mn), xi);
            err = _mm256_add_ps(err, _mm256_mul_ps(_mm256_set1_ps(weights[i]), _mm256_mul_ps(diff, diff)));
        }
        float Dv[8], scv[8], mnv[8], ev[8];
        _mm256_storeu_ps(Dv, D);
        _mm256_storeu_ps(scv, sc);
        _mm256_storeu_ps(mnv, mn);
        _mm256_storeu_ps(ev, err);
        int accepted = -1;
        for (int k = 0; k < 8 && is + k <= nstep; k++) {
            if (!(Dv[k] > 0)) continue;
            if (ev[k] < best_error) {
                accepted = k;
                break;
            }
        }
        if (accepted < 0) {
            is += 8;
            continue;
        }
        /* trial is+accepted wins: its levels, then the later trials from its min */
        const float isa = isc[accepted];
        for (int i = 0; i < n; i++) {
            int l = nearest_int(isa * (x[i] - min));
            L[i] = (uint8_t)(l < 0 ? 0 : l > nmax ? nmax : l);
        }
        best_error = ev[accepted];
        scale = scv[accepted];
        min = mnv[accepted];
        is += accepted + 1;
    }
    *the_min = -min;
    return scale;
}

void kld_quant_q4_k_avx2(const float *x, void *dst, int64_t n) { kld_quant_k4_rows(x, dst, n, 15, -1.f, 20, qkx2_32); }

void kld_quant_q5_k_avx2(const float *x, void *dst, int64_t n) { kld_quant_k4_rows(x, dst, n, 31, -0.5f, 15, qkx2_32); }

/* make_qx_quants(16, 32, x, L, NULL) (q6_K): the 18 trial scales do not
 * depend on each other, only their acceptance does, so lanes compute all of
 * them and the acceptance runs in trial order on the lane results. */
static float qx16(const float *x, int8_t *L, const float *qw) {
    (void)qw; /* only the unweighted path is vectorized (kld_quant_q6_k_avx2) */
    const int n = 16, nmax = 32;
    float amax = 0, max = 0;
    for (int i = 0; i < n; i++) {
        float ax = x[i] < 0 ? -x[i] : x[i];
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < 1e-15f) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = nearest_int(iscale * x[i]);
        l = l < -nmax ? -nmax : l > nmax - 1 ? nmax - 1 : l;
        L[i] = (int8_t)(l + nmax);
        float w = x[i] * x[i];
        sumlx += w * x[i] * (float)l;
        suml2 += w * (float)l * (float)l;
    }
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    float isc[24], slx[24], sl2[24];
    int k = 0;
    for (int is = -9; is <= 9; is++)
        if (is) isc[k++] = -((float)nmax + 0.1f * (float)is) / max;
    for (; k < 24; k++) isc[k] = isc[17];
    const __m256i lo = _mm256_set1_epi32(-nmax), hi = _mm256_set1_epi32(nmax - 1);
    for (int v = 0; v < 3; v++) {
        const __m256 vis = _mm256_loadu_ps(isc + 8 * v);
        __m256 a = _mm256_setzero_ps(), b = _mm256_setzero_ps();
        for (int i = 0; i < n; i++) {
            const float w = x[i] * x[i];
            const __m256 wx = _mm256_set1_ps(w * x[i]), wv = _mm256_set1_ps(w);
            __m256i li = nearest_int8(_mm256_mul_ps(vis, _mm256_set1_ps(x[i])));
            li = _mm256_max_epi32(lo, _mm256_min_epi32(hi, li));
            const __m256 lf = _mm256_cvtepi32_ps(li);
            a = _mm256_add_ps(a, _mm256_mul_ps(wx, lf));
            b = _mm256_add_ps(b, _mm256_mul_ps(_mm256_mul_ps(wv, lf), lf));
        }
        _mm256_storeu_ps(slx + 8 * v, a);
        _mm256_storeu_ps(sl2 + 8 * v, b);
    }
    int chosen = -1;
    for (k = 0; k < 18; k++) {
        if (sl2[k] > 0 && slx[k] * slx[k] > best * sl2[k]) {
            chosen = k;
            scale = slx[k] / sl2[k];
            best = scale * slx[k];
        }
    }
    if (chosen >= 0)
        for (int i = 0; i < n; i++) {
            int l = nearest_int(isc[chosen] * x[i]);
            L[i] = (int8_t)(nmax + (l < -nmax ? -nmax : l > nmax - 1 ? nmax - 1 : l));
        }
    return scale;
}

void kld_quant_q6_k_avx2(const float *x, void *dst, int64_t n) { kld_quant_q6_k_with(x, dst, n, qx16); }
