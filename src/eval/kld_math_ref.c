/* kld_math_ref.c — the scalar reference kernels of the per-position math
 * (libm exp/log, sequential double sums). The AVX2 kernels are tested
 * against these. */
#include "eval/kld_math_impl.h"

#include <math.h>

static void scan_ref(const float *x, int32_t n, kld_topk *h, bool *bad) {
    for (int32_t i = 0; i < n; i++) {
        float v = x[i];
        if (isnan(v) || v == INFINITY) *bad = true;
        if (!kld_topk_full(h) || v > kld_topk_threshold(h)) kld_topk_offer(h, v, i);
    }
}

static void sum_exp_ref(const float *x, const float *y, int32_t n, float mx, float my,
                        double out[2]) {
    double sx = 0.0, sy = 0.0;
    for (int32_t i = 0; i < n; i++) {
        sx += exp((double)x[i] - (double)mx);
        sy += exp((double)y[i] - (double)my);
    }
    out[0] = sx;
    out[1] = sy;
}

/* u ln u with 0 ln 0 = 0. */
static double xlogx(double u) { return u > 0.0 ? u * log(u) : 0.0; }

static void divergences_ref(const float *x, const float *y, int32_t n, float mx, float my,
                            double lsx, double lsy, double out[3]) {
    double kld = 0.0, rev = 0.0, js = 0.0;
    for (int32_t i = 0; i < n; i++) {
        double lp = ((double)x[i] - (double)mx) - lsx;
        double lq = ((double)y[i] - (double)my) - lsy;
        double p = exp(lp), q = exp(lq);
        double d = lp - lq;
        if (p > 0.0) kld += p * d;
        if (q > 0.0) rev -= q * d;
        double s = p + q;
        if (s > 0.0) {
            double t = (q - p) / s;
            /* h(t) >= 0; rounding of 1 +- t can make tiny values negative */
            js += s * fmax(xlogx(1.0 + t) + xlogx(1.0 - t), 0.0);
        }
    }
    out[0] = kld;
    out[1] = rev;
    out[2] = js;
}

const kld_math_kernels kld_math_kernels_ref = {"ref", scan_ref, sum_exp_ref, divergences_ref};
