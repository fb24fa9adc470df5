/* test_stats_simd.c — the AVX2 per-position kernels against the scalar
 * reference (libm exp/log, sequential sums) on pseudo-random logit rows of
 * many lengths (vector body, tails, 150k vocabularies), near-identical and
 * very different arms, masked (-inf) tokens and tied maxima. Integer outputs
 * must be equal; the divergences agree to a tight tolerance. */
#include "testlib.h"

#include "eval/stats.h"
#include "tensor/types.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;
static double rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}
static double gauss(void) { return (rnd() + rnd() + rnd() + rnd() - 2.0) * 1.7320508; }

static double worst_rel = 0.0;

/* |a - b| within 1e-15 absolute plus 1e-12 relative (the sums run over up
 * to 150k terms in different orders; exp/log differ by an ulp or two).
 * NaN (no next token) agrees with NaN. */
static bool agree(double a, double b) {
    if (a == b || (isnan(a) && isnan(b))) return true;
    double d = fabs(a - b), m = fabs(a) > fabs(b) ? fabs(a) : fabs(b);
    if (m > 1e-300 && d / m > worst_rel && d > 1e-15) worst_rel = d / m;
    return d <= 1e-15 + 1e-12 * m;
}

static void compare(const float *x, const float *y, int n, int next, int k, const char *what) {
    kld_error err = {0};
    kld_position a, b;
    CHECK_OK(kld_position_compute_ref(x, y, n, next, k, &a, &err), err);
    CHECK_OK(kld_position_compute_avx2(x, y, n, next, k, &b, &err), err);
    CHECK(a.top_ref == b.top_ref && a.top_arm == b.top_arm && a.topk_hits == b.topk_hits &&
              a.token == b.token,
          "%s n=%d: top %d/%d vs %d/%d, hits %d vs %d", what, n, a.top_ref, a.top_arm, b.top_ref,
          b.top_arm, a.topk_hits, b.topk_hits);
    CHECK(agree(a.kld, b.kld), "%s n=%d: KLD ref %.17g avx2 %.17g", what, n, a.kld, b.kld);
    CHECK(agree(a.kld_rev, b.kld_rev), "%s n=%d: reverse KLD ref %.17g avx2 %.17g", what, n,
          a.kld_rev, b.kld_rev);
    CHECK(agree(a.jsd, b.jsd), "%s n=%d: JSD ref %.17g avx2 %.17g", what, n, a.jsd, b.jsd);
    CHECK(agree(a.nll_ref, b.nll_ref) && agree(a.nll_arm, b.nll_arm),
          "%s n=%d: nll ref %.17g/%.17g avx2 %.17g/%.17g", what, n, a.nll_ref, a.nll_arm,
          b.nll_ref, b.nll_arm);
    CHECK(fabsf(a.p_ref_max - b.p_ref_max) <= 1e-7f * a.p_ref_max, "%s n=%d: p_max %g vs %g",
          what, n, (double)a.p_ref_max, (double)b.p_ref_max);
    CHECK(a.kld >= -1e-12 && a.jsd >= 0.0 && a.jsd <= log(2.0) + 1e-15,
          "%s n=%d: KLD %g JSD %g out of range", what, n, a.kld, a.jsd);
}

int main(void) {
    if (!kld_cpu_has_avx2()) {
        /* Nothing to compare on this CPU; the scalar path is tested in test_stats. */
        CHECK(strcmp(kld_math_kernel_name(), "ref") == 0, "avx2 chosen without AVX2");
        return kt_finish();
    }
    static const int sizes[] = {1, 2, 5, 8, 9, 15, 16, 17, 100, 513, 4096, 32000, 151936};
    static const double noise[] = {0.0, 1e-6, 1e-3, 0.05, 1.0, 5.0};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int n = sizes[s];
        float *x = malloc(sizeof(float) * (size_t)n), *y = malloc(sizeof(float) * (size_t)n);
        for (size_t e = 0; e < sizeof noise / sizeof noise[0]; e++) {
            /* peaked rows: scale 3 plus a few large logits, like trained models */
            for (int i = 0; i < n; i++) x[i] = (float)(3.0 * gauss() + (rnd() < 0.001 ? 12.0 : 0.0));
            for (int i = 0; i < n; i++) y[i] = x[i] + (float)(noise[e] * gauss()) + 0.5f;
            if (n > 20) { /* masked tokens in one or both rows, and a tied maximum */
                x[3] = -INFINITY;
                y[3] = -INFINITY;
                y[n / 2] = -INFINITY;
                x[n - 2] = x[n - 1] = 40.0f;
            }
            int k = n < KLD_TOPK_DEFAULT ? n : KLD_TOPK_DEFAULT;
            char what[64];
            snprintf(what, sizeof what, "noise %g", noise[e]);
            compare(x, y, n, (int)(rnd() * n), k, what);
            compare(y, x, n, -1, n < 64 ? n : 64, what);
        }
        free(x);
        free(y);
    }
    printf("worst relative ref/avx2 difference: %.3g\n", worst_rel);
    CHECK(strcmp(kld_math_kernel_name(), getenv("KLD_KERNELS") && !strcmp(getenv("KLD_KERNELS"), "ref")
                                              ? "ref" : "avx2") == 0,
          "dispatch chose %s", kld_math_kernel_name());
    return kt_finish();
}
