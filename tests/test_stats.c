/* test_stats.c — hand-computed checks of the KLD statistics: closed-form
 * divergences of 3-token distributions, exact zeros for self-comparison,
 * argument errors, and the accumulator's summary (mean, standard error,
 * percentiles, median for odd and even N, PPL and its paired ln-ratio error,
 * binomial error, Δp, document means, buckets, exact merge) against
 * independent computations written here. */
#include "testlib.h"

#include "eval/stats.h"
#include "tensor/types.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef kld_status (*compute_fn)(const float *, const float *, int32_t, int32_t, int,
                                 kld_position *, kld_error *);

static bool close_to(double a, double b, double tol) { return fabs(a - b) <= tol; }

/* ---- per-position math ---- */

static void check_closed_forms(compute_fn fn, const char *name) {
    kld_error err = {0};
    kld_position r;
    /* p = (1/2, 1/4, 1/4), q = (1/4, 1/2, 1/4); the arm is shifted by +100,
     * which a softmax must not see. */
    float x[3] = {logf(0.5f), logf(0.25f), logf(0.25f)};
    float y[3] = {logf(0.25f) + 100.0f, logf(0.5f) + 100.0f, logf(0.25f) + 100.0f};
    CHECK_OK(fn(x, y, 3, 2, 2, &r, &err), err);
    double kl = 0.5 * log(0.5 / 0.25) + 0.25 * log(0.25 / 0.5); /* = ln2 / 4 */
    double js = 0.5 * (0.5 * log(0.5 / 0.375) + 0.25 * log(0.25 / 0.375)) +
                0.5 * (0.25 * log(0.25 / 0.375) + 0.5 * log(0.5 / 0.375));
    /* float logits carry ~1e-8 relative error into the probabilities */
    CHECK(close_to(r.kld, kl, 1e-6), "%s: KLD %.12g, want %.12g", name, r.kld, kl);
    CHECK(close_to(r.kld_rev, kl, 1e-6), "%s: reverse KLD %.12g, want %.12g", name, r.kld_rev, kl);
    CHECK(close_to(r.jsd, js, 1e-6), "%s: JSD %.12g, want %.12g", name, r.jsd, js);
    CHECK(r.top_ref == 0 && r.top_arm == 1, "%s: top-1 %d/%d, want 0/1", name, r.top_ref, r.top_arm);
    /* top-2: ref {0, 1} (1 beats 2 on the tie), arm {1, 0} */
    CHECK(r.topk == 2 && r.topk_hits == 2, "%s: top-2 hits %d of %d, want 2", name, r.topk_hits,
          r.topk);
    CHECK(close_to(r.nll_ref, log(4.0), 1e-6) && close_to(r.nll_arm, log(4.0), 1e-6),
          "%s: nll %.9g %.9g, want ln 4", name, r.nll_ref, r.nll_arm);
    CHECK(close_to(r.p_ref_max, 0.5, 1e-6), "%s: p_ref_max %g", name, (double)r.p_ref_max);
    CHECK_OK(fn(x, y, 3, -1, 1, &r, &err), err);
    CHECK(r.topk_hits == 0 && isnan(r.nll_ref) && isnan(r.nll_arm) && r.token == -1,
          "%s: k=1 hits %d, nll %g (want 0, NaN)", name, r.topk_hits, r.nll_ref);

    /* Half the arm's mass where the reference has none:
     * p = (1, 0, 0), q = (1/2, 1/2, 0): KL(p||q) = ln 2, KL(q||p) = inf,
     * JSD = 1/2 ln(4/3) + 1/4 ln(2/3) + 1/4 ln 2. */
    float x2[3] = {3.0f, -INFINITY, -INFINITY};
    float y2[3] = {-7.0f, -7.0f, -INFINITY};
    CHECK_OK(fn(x2, y2, 3, 0, 1, &r, &err), err);
    double js2 = 0.5 * log(4.0 / 3.0) + 0.25 * log(2.0 / 3.0) + 0.25 * log(2.0);
    CHECK(close_to(r.kld, log(2.0), 1e-12), "%s: KLD %.15g, want ln 2", name, r.kld);
    CHECK(isinf(r.kld_rev) && r.kld_rev > 0, "%s: reverse KLD %g, want +inf", name, r.kld_rev);
    CHECK(close_to(r.jsd, js2, 1e-12), "%s: JSD %.15g, want %.15g", name, r.jsd, js2);
    CHECK(r.nll_ref == 0.0 && close_to(r.nll_arm, log(2.0), 1e-12), "%s: nll %g %g", name,
          r.nll_ref, r.nll_arm);

    /* Disjoint supports: KLD infinite both ways, JSD = ln 2 exactly its maximum. */
    float x3[3] = {0.0f, -INFINITY, -INFINITY};
    float y3[3] = {-INFINITY, 0.0f, -INFINITY};
    CHECK_OK(fn(x3, y3, 3, 1, 1, &r, &err), err);
    CHECK(isinf(r.kld) && isinf(r.kld_rev), "%s: disjoint KLD %g %g", name, r.kld, r.kld_rev);
    CHECK(close_to(r.jsd, log(2.0), 1e-15), "%s: disjoint JSD %.17g, want ln 2", name, r.jsd);
    CHECK(isinf(r.nll_ref) && r.nll_arm == 0.0, "%s: disjoint nll %g %g", name, r.nll_ref,
          r.nll_arm);

    /* All equal: top-1 is the first index, p_max = 1/n. */
    float e[5] = {2, 2, 2, 2, 2};
    CHECK_OK(fn(e, e, 5, 4, 3, &r, &err), err);
    CHECK(r.top_ref == 0 && r.top_arm == 0 && r.topk_hits == 3, "%s: ties top %d hits %d", name,
          r.top_ref, r.topk_hits);
    CHECK(close_to(r.p_ref_max, 0.2, 1e-7) && close_to(r.nll_ref, log(5.0), 1e-12),
          "%s: ties p_max %g nll %g", name, (double)r.p_ref_max, r.nll_ref);
}

/* Deterministic pseudo-random logits (xorshift), roughly N(0, scale^2). */
static uint64_t rng_state = 88172645463325252ULL;
static double rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}
static void fill_logits(float *x, int n, double scale) {
    for (int i = 0; i < n; i++) x[i] = (float)(scale * (rnd() + rnd() + rnd() - 1.5) * 2.0);
}

static void check_self_zero(compute_fn fn, const char *name) {
    static const int sizes[] = {1, 2, 7, 8, 9, 31, 1000, 32000, 151936};
    kld_error err = {0};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int n = sizes[s];
        float *x = malloc(sizeof(float) * (size_t)n), *y = malloc(sizeof(float) * (size_t)n);
        fill_logits(x, n, 4.0);
        if (n > 3) x[n / 3] = -INFINITY; /* a masked token */
        memcpy(y, x, sizeof(float) * (size_t)n);
        int k = n < 10 ? n : 10;
        kld_position r;
        CHECK_OK(fn(x, y, n, n - 1, k, &r, &err), err);
        CHECK(r.kld == 0.0 && r.kld_rev == 0.0 && r.jsd == 0.0,
              "%s n=%d: self KLD %g rev %g JSD %g, want exact 0", name, n, r.kld, r.kld_rev, r.jsd);
        CHECK(r.nll_ref == r.nll_arm && r.top_ref == r.top_arm && r.topk_hits == k,
              "%s n=%d: self nll %g/%g top %d/%d hits %d", name, n, r.nll_ref, r.nll_arm, r.top_ref,
              r.top_arm, r.topk_hits);
        free(x);
        free(y);
    }
}

static void check_errors(void) {
    kld_error err = {0};
    kld_position r;
    float x[4] = {1, 2, 3, 4}, y[4] = {1, 2, 3, 4};
    CHECK(kld_position_compute(x, y, 4, 4, 1, &r, &err) == KLD_ERR_ARG, "next token 4 of 4 accepted");
    CHECK(kld_position_compute(x, y, 4, -2, 1, &r, &err) == KLD_ERR_ARG, "next token -2 accepted");
    CHECK(kld_position_compute(x, y, 4, 0, 5, &r, &err) == KLD_ERR_ARG, "top-5 of 4 accepted");
    CHECK(kld_position_compute(x, y, 4, 0, 0, &r, &err) == KLD_ERR_ARG, "top-0 accepted");
    CHECK(kld_position_compute(x, y, 0, -1, 1, &r, &err) == KLD_ERR_ARG, "n_vocab 0 accepted");
    y[2] = NAN;
    CHECK(kld_position_compute(x, y, 4, 0, 1, &r, &err) == KLD_ERR_ARG && strstr(err.msg, "arm logits[2]"),
          "NaN in the arm not named: %s", err.msg);
    y[2] = 3;
    x[1] = INFINITY;
    CHECK(kld_position_compute(x, y, 4, 0, 1, &r, &err) == KLD_ERR_ARG && strstr(err.msg, "ref logits[1]"),
          "+inf in the reference not named: %s", err.msg);
    float ninf[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
    CHECK(kld_position_compute(ninf, y, 4, 0, 1, &r, &err) == KLD_ERR_ARG &&
              strstr(err.msg, "no finite value"),
          "an all -inf row accepted: %s", err.msg);
    /* NaN inside the AVX2 scan's vector loop (21) and in its scalar tail (37) */
    float big[40], big2[40];
    fill_logits(big, 40, 1.0);
    memcpy(big2, big, sizeof big);
    big2[37] = NAN;
    CHECK(kld_position_compute(big, big2, 40, 0, 1, &r, &err) == KLD_ERR_ARG && strstr(err.msg, "[37]"),
          "NaN at 37 not found: %s", err.msg);
    big2[37] = 0;
    big2[21] = NAN;
    CHECK(kld_position_compute(big, big2, 40, 0, 1, &r, &err) == KLD_ERR_ARG && strstr(err.msg, "[21]"),
          "NaN at 21 not found: %s", err.msg);
}

/* ---- accumulator ---- */

static kld_position rec_of(double kld, int32_t token, double nll_ref, double nll_arm, bool same,
                           float pmax, uint32_t pos) {
    kld_position r;
    memset(&r, 0, sizeof r);
    r.kld = kld;
    r.kld_rev = 2.0 * kld;
    r.jsd = 0.25 * kld;
    r.token = token;
    r.nll_ref = token >= 0 ? nll_ref : NAN;
    r.nll_arm = token >= 0 ? nll_arm : NAN;
    r.top_ref = 5;
    r.top_arm = same ? 5 : 6;
    r.topk = 4;
    r.topk_hits = same ? 4 : 2;
    r.p_ref_max = pmax;
    r.ctx_pos = pos;
    return r;
}

/* Sorted-value percentile as the definition says, written out again. */
static double pct_def(const double *sorted, int n, double f) {
    double h = f * (n - 1);
    int i = (int)floor(h);
    if (i >= n - 1) return sorted[n - 1];
    return sorted[i] + (h - i) * (sorted[i + 1] - sorted[i]);
}

static void check_odd_even(void) {
    kld_error err = {0};
    /* odd N = 5 (added out of order): mean 3, population variance 2,
     * se = sqrt(2/4), median 3, p99 at h = 3.96 -> 4.96 */
    const double odd[5] = {4, 1, 5, 3, 2};
    kld_stats *st;
    CHECK_OK(kld_stats_create(&st, 4, &err), err);
    for (int i = 0; i < 5; i++) {
        kld_position r = rec_of(odd[i], 1, 1, 1, true, 0.5f, (uint32_t)i);
        CHECK_OK(kld_stats_add(st, &r, &err), err);
    }
    kld_summary s;
    CHECK_OK(kld_stats_finalize(st, &s, &err), err);
    CHECK(s.n_positions == 5 && s.kld.mean == 3.0, "odd: n %llu mean %g",
          (unsigned long long)s.n_positions, s.kld.mean);
    CHECK(close_to(s.kld.se, sqrt(0.5), 1e-15), "odd: se %.17g want sqrt(0.5)", s.kld.se);
    CHECK(s.kld.median == 3.0 && s.kld.min == 1.0 && s.kld.max == 5.0, "odd: median %g min %g max %g",
          s.kld.median, s.kld.min, s.kld.max);
    CHECK(close_to(s.kld.pct[8], 4.96, 1e-14), "odd: p99 %.17g want 4.96", s.kld.pct[8]);
    CHECK(close_to(s.kld.pct[0], 1.004, 1e-14), "odd: p0.1 %.17g want 1.004", s.kld.pct[0]);
    CHECK(s.kld.pct[4] == 2.0 && s.kld.pct[5] == 4.0, "odd: quartiles %g %g want 2 4", s.kld.pct[4],
          s.kld.pct[5]);
    CHECK(close_to(s.kld_rev.mean, 6.0, 1e-15) && close_to(s.jsd.mean, 0.75, 1e-15),
          "odd: reverse %g jsd %g", s.kld_rev.mean, s.jsd.mean);
    kld_stats_free(st);

    /* even N = 6: median = mean of the two middle values */
    double even[6] = {10, 1, 2, 5, 3, 4};
    CHECK_OK(kld_stats_create(&st, 4, &err), err);
    double sum = 0, sum2 = 0;
    for (int i = 0; i < 6; i++) {
        kld_position r = rec_of(even[i], 1, 1, 1, true, 0.5f, 0);
        CHECK_OK(kld_stats_add(st, &r, &err), err);
        sum += even[i];
        sum2 += even[i] * even[i];
    }
    CHECK_OK(kld_stats_finalize(st, &s, &err), err);
    double m = sum / 6, var = sum2 / 6 - m * m;
    double sorted[6] = {1, 2, 3, 4, 5, 10};
    CHECK(s.kld.median == 3.5, "even: median %g want 3.5", s.kld.median);
    CHECK(close_to(s.kld.mean, m, 1e-14) && close_to(s.kld.se, sqrt(var / 5), 1e-14),
          "even: mean %g se %.17g want %.17g", s.kld.mean, s.kld.se, sqrt(var / 5));
    for (int i = 0; i < KLD_N_PCT; i++)
        CHECK(close_to(s.kld.pct[i], pct_def(sorted, 6, kld_pct_fractions[i]), 1e-13),
              "even: pct %g = %.17g want %.17g", kld_pct_fractions[i], s.kld.pct[i],
              pct_def(sorted, 6, kld_pct_fractions[i]));
    kld_stats_free(st);
}

/* 14 positions in 3 documents (one empty) with given NLLs, plus 2 without a
 * next token; every statistic is recomputed here with llama.cpp's one-pass
 * formulas (N > 10, so they agree with the definitions). */
static void check_ppl_and_friends(void) {
    kld_error err = {0};
    const double nll_ref[14] = {2.1, 3.5, 0.7, 4.2, 1.9, 2.8, 5.1, 0.3, 2.2, 3.3, 1.1, 2.6, 4.4, 0.9};
    const double nll_arm[14] = {2.3, 3.4, 0.9, 4.8, 1.9, 3.1, 5.0, 0.6, 2.5, 3.2, 1.6, 2.6, 4.9, 1.0};
    const double kl[14] = {.01, .02, .03, .5, .04, .01, .2, .03, .06, .02, .11, .0, .3, .05};
    const bool same[14] = {1, 1, 1, 0, 1, 1, 1, 1, 0, 1, 0, 1, 1, 1};
    const float pmax[14] = {.05f, .15f, .95f, .55f, .55f, .35f, 1.0f, .99f, .12f, .45f, .58f, .77f, .3f, .91f};
    kld_stats *st;
    CHECK_OK(kld_stats_create(&st, 4, &err), err);
    int doc_of[16], pos = 0;
    for (int i = 0; i < 16; i++) {
        if (i == 0 || i == 6) { /* documents 0 (6 positions), 1 (empty), 2 (10 positions) */
            CHECK_OK(kld_stats_begin_doc(st, &err), err);
            if (i == 6) CHECK_OK(kld_stats_begin_doc(st, &err), err);
            pos = 0;
        }
        kld_position r;
        if (i == 3 || i == 11) {
            r = rec_of(0.25, -1, 0, 0, true, 0.5f, (uint32_t)(pos * 5));
        } else {
            int j = i - (i > 3) - (i > 11);
            r = rec_of(kl[j], 7, nll_ref[j], nll_arm[j], same[j], pmax[j], (uint32_t)(pos * 5));
        }
        doc_of[i] = i < 6 ? 0 : 2;
        CHECK_OK(kld_stats_add(st, &r, &err), err);
        pos++;
    }
    kld_summary s;
    CHECK_OK(kld_stats_finalize(st, &s, &err), err);
    CHECK(s.n_positions == 16 && s.n_tokens == 14 && s.n_docs == 3 && s.n_docs_scored == 2,
          "counts: %llu %llu %llu %llu", (unsigned long long)s.n_positions,
          (unsigned long long)s.n_tokens, (unsigned long long)s.n_docs,
          (unsigned long long)s.n_docs_scored);

    /* llama.cpp: mean_and_uncertainty and covariance on raw sums */
    double sa = 0, sa2 = 0, sb = 0, sb2 = 0, sab = 0, sd = 0, sd2 = 0, sd4 = 0;
    for (int j = 0; j < 14; j++) {
        double a = nll_ref[j], b = nll_arm[j], dp = exp(-b) - exp(-a);
        sa += a; sa2 += a * a; sb += b; sb2 += b * b; sab += a * b;
        sd += dp; sd2 += dp * dp; sd4 += dp * dp * dp * dp;
    }
    const double N = 14;
    double ma = sa / N, ua = sqrt((sa2 / N - ma * ma) / (N - 1));
    double mb = sb / N, ub = sqrt((sb2 / N - mb * mb) / (N - 1));
    double cov = (sab / N - ma * mb) / (N - 1);
    double lr_err = sqrt(ua * ua + ub * ub - 2 * cov);
    double ppl_a = exp(ma), ppl_b = exp(mb);
    double diff_err = sqrt(ppl_a * ua * ppl_a * ua + ppl_b * ub * ppl_b * ub - 2 * ppl_a * ppl_b * cov);
    CHECK(close_to(s.ppl_ref, ppl_a, 1e-12 * ppl_a) && close_to(s.ppl_ref_se, ppl_a * ua, 1e-10),
          "ppl_ref %.15g ± %.15g want %.15g ± %.15g", s.ppl_ref, s.ppl_ref_se, ppl_a, ppl_a * ua);
    CHECK(close_to(s.ppl_arm, ppl_b, 1e-12 * ppl_b) && close_to(s.ppl_arm_se, ppl_b * ub, 1e-10),
          "ppl_arm %.15g ± %.15g", s.ppl_arm, s.ppl_arm_se);
    CHECK(close_to(s.ln_ppl_ratio, mb - ma, 1e-14) && close_to(s.ln_ppl_ratio_se, lr_err, 1e-12),
          "ln ratio %.15g ± %.15g want %.15g ± %.15g", s.ln_ppl_ratio, s.ln_ppl_ratio_se, mb - ma,
          lr_err);
    CHECK(close_to(s.ppl_ratio, exp(mb - ma), 1e-13) &&
              close_to(s.ppl_ratio_se, exp(mb - ma) * lr_err, 1e-12),
          "ratio %.15g ± %.15g", s.ppl_ratio, s.ppl_ratio_se);
    CHECK(close_to(s.ppl_diff, ppl_b - ppl_a, 1e-12) && close_to(s.ppl_diff_se, diff_err, 1e-10),
          "diff %.15g ± %.15g want %.15g ± %.15g", s.ppl_diff, s.ppl_diff_se, ppl_b - ppl_a, diff_err);
    CHECK(close_to(s.nll_cor, cov / (ua * ub), 1e-12), "cor %.15g want %.15g", s.nll_cor,
          cov / (ua * ub));
    double mdp = sd / N, udp = sqrt((sd2 / N - mdp * mdp) / (N - 1));
    double ms = sd2 / N, ums = sqrt((sd4 / N - ms * ms) / (N - 1));
    CHECK(close_to(s.dp.mean, mdp, 1e-15) && close_to(s.dp.se, udp, 1e-13), "dp %.15g ± %.15g",
          s.dp.mean, s.dp.se);
    CHECK(close_to(s.dp_rms, sqrt(ms), 1e-14) && close_to(s.dp_rms_se, 0.5 / sqrt(ms) * ums, 1e-12),
          "dp rms %.15g ± %.15g want %.15g ± %.15g", s.dp_rms, s.dp_rms_se, sqrt(ms),
          0.5 / sqrt(ms) * ums);

    /* top-1 over all 16 positions: the two token-less ones match */
    double f = 13.0 / 16.0;
    CHECK(s.top1_agreement == f && close_to(s.top1_se, sqrt(f * (1 - f) / 15), 1e-15),
          "top1 %.15g ± %.15g", s.top1_agreement, s.top1_se);
    CHECK(close_to(s.topk_overlap, (13 * 1.0 + 3 * 0.5) / 16, 1e-15), "top-k overlap %.15g",
          s.topk_overlap);

    /* document means: doc 0 = records 0..5, doc 2 = records 6..15 */
    size_t n;
    const kld_position *rec = kld_stats_records(st, &n);
    double dm[3] = {0, 0, 0};
    int dc[3] = {0, 0, 0};
    for (int i = 0; i < 16; i++) {
        dm[doc_of[i]] += rec[i].kld;
        dc[doc_of[i]]++;
    }
    double d0 = dm[0] / dc[0], d2 = dm[2] / dc[2], dmean = (d0 + d2) / 2;
    CHECK(dc[1] == 0 && close_to(s.kld_doc_mean, dmean, 1e-15), "doc mean %.15g want %.15g",
          s.kld_doc_mean, dmean);
    CHECK(close_to(s.kld_doc_se, fabs(d0 - d2) / 2, 1e-15), "doc se %.15g want %.15g", s.kld_doc_se,
          fabs(d0 - d2) / 2);
    size_t first, count;
    kld_stats_doc_range(st, 1, &first, &count);
    CHECK(first == 6 && count == 0, "empty doc range %zu+%zu", first, count);

    /* buckets: count, mean, top-1 by hand */
    for (int b = 0; b < KLD_CONF_BUCKETS; b++) {
        uint64_t cnt = 0, hit = 0;
        double sum = 0;
        for (int i = 0; i < 16; i++) {
            int bi = (int)(rec[i].p_ref_max * 10.0);
            if ((bi > 9 ? 9 : bi) != b) continue;
            cnt++;
            sum += rec[i].kld;
            hit += rec[i].top_ref == rec[i].top_arm;
        }
        CHECK(s.by_conf[b].n == cnt, "conf bucket %d: n %llu want %llu", b,
              (unsigned long long)s.by_conf[b].n, (unsigned long long)cnt);
        if (cnt)
            CHECK(close_to(s.by_conf[b].kld_mean, sum / cnt, 1e-15) &&
                      close_to(s.by_conf[b].top1_agreement, (double)hit / cnt, 1e-15),
                  "conf bucket %d: mean %g top1 %g", b, s.by_conf[b].kld_mean,
                  s.by_conf[b].top1_agreement);
    }
    /* positions 0,5 | 10,15 | 20,25,30 | 35,40,45 ->[0,8) [8,16) [16,32) [32,64) */
    CHECK(s.by_pos[0].n == 4 && s.by_pos[1].n == 4 && s.by_pos[2].n == 5 && s.by_pos[3].n == 3 &&
              s.by_pos[4].n == 0,
          "position buckets %llu %llu %llu %llu", (unsigned long long)s.by_pos[0].n,
          (unsigned long long)s.by_pos[1].n, (unsigned long long)s.by_pos[2].n,
          (unsigned long long)s.by_pos[3].n);
    CHECK(s.by_pos[1].lo == 8 && s.by_pos[1].hi == 16 && s.by_pos[3].lo == 32,
          "position bucket bounds %g %g", s.by_pos[1].lo, s.by_pos[1].hi);

    /* merge: two shards give exactly the single-run summary */
    kld_stats *a, *b;
    CHECK_OK(kld_stats_create(&a, 4, &err), err);
    CHECK_OK(kld_stats_create(&b, 4, &err), err);
    for (size_t d = 0; d < kld_stats_doc_count(st); d++) {
        kld_stats *dst = d < 2 ? a : b;
        CHECK_OK(kld_stats_begin_doc(dst, &err), err);
        kld_stats_doc_range(st, d, &first, &count);
        for (size_t i = first; i < first + count; i++) CHECK_OK(kld_stats_add(dst, &rec[i], &err), err);
    }
    CHECK_OK(kld_stats_merge(a, b, &err), err);
    kld_summary sm;
    CHECK_OK(kld_stats_finalize(a, &sm, &err), err);
    CHECK(memcmp(&sm, &s, sizeof s) == 0, "merged summary differs from the single-run one");
    kld_stats_running run;
    kld_stats_get_running(a, &run);
    CHECK(run.n_positions == 16 && run.n_tokens == 14 && run.n_docs == 3 &&
              close_to(run.kld_mean, s.kld.mean, 1e-15) && run.top1_agreement == f &&
              close_to(run.ln_ppl_ratio, s.ln_ppl_ratio, 1e-14),
          "running values after merge: %g %g", run.kld_mean, run.top1_agreement);
    kld_stats *k3;
    CHECK_OK(kld_stats_create(&k3, 3, &err), err);
    CHECK(kld_stats_merge(a, k3, &err) == KLD_ERR_MISMATCH, "merge of different k accepted");
    CHECK(kld_stats_add(k3, &rec[0], &err) == KLD_ERR_MISMATCH, "record of k 4 into k 3 accepted");
    CHECK(kld_stats_finalize(k3, &sm, &err) == KLD_ERR_ARG, "finalize of nothing accepted");
    kld_stats_free(k3);
    CHECK(kld_stats_create(&k3, 0, &err) == KLD_ERR_ARG && k3 == NULL, "top-0 accumulator");
    kld_stats_free(a);
    kld_stats_free(b);
    kld_stats_free(st);
}

/* Next tokens below a llama.cpp base row's window (next_outside): the record
 * holds the window's floor F as nll_ref. PPL(ref) and every figure paired
 * with it take max(nll_arm, F) there, so the summary must equal, figure for
 * figure, that of the same records with nll_ref replaced by the estimate;
 * llama.cpp's PPL(base) (F itself) is kept beside it, and dp keeps F. The
 * standard error of the ln ratio is recomputed here from the pairs. */
static void check_next_outside(void) {
    enum { N = 40 };
    kld_error err = {0};
    kld_stats *base, *filled;
    CHECK_OK(kld_stats_create(&base, 4, &err), err);
    CHECK_OK(kld_stats_create(&filled, 4, &err), err);
    double raw[N], est[N], arm[N];
    int n_out = 0, n_floor = 0;
    for (int i = 0; i < N; i++) {
        bool out = i % 4 == 1;
        double floor_nll = 16.5 + 0.1 * (i % 3);
        arm[i] = out ? floor_nll + 2.0 + 6.0 * rnd() - (i == 9 ? 9.0 : 0.0) : 4.0 * rnd();
        raw[i] = out ? floor_nll : arm[i] + 0.2 * (rnd() - 0.4);
        est[i] = out ? (arm[i] > raw[i] ? arm[i] : raw[i]) : raw[i];
        n_out += out;
        n_floor += out && arm[i] < raw[i]; /* i = 9: the arm's NLL below the floor */
        kld_position r = rec_of(0.01 * (i % 5), 3, raw[i], arm[i], i % 3 != 0, 0.4f, (uint32_t)i);
        r.next_outside = out;
        r.truncated = 1;
        CHECK_OK(kld_stats_add(base, &r, &err), err);
        CHECK(kld_position_nll_ref(&r) == est[i], "position %d: estimate %.17g, want %.17g", i,
              kld_position_nll_ref(&r), est[i]);
        r.nll_ref = est[i];
        r.next_outside = 0;
        CHECK_OK(kld_stats_add(filled, &r, &err), err);
    }
    CHECK(n_out == 10 && n_floor == 1, "fixture: %d outside, %d with the arm below the floor", n_out,
          n_floor);
    kld_summary s, t;
    CHECK_OK(kld_stats_finalize(base, &s, &err), err);
    CHECK_OK(kld_stats_finalize(filled, &t, &err), err);
    CHECK(s.n_next_outside == 10 && t.n_next_outside == 0 && isnan(t.ppl_ref_llamacpp),
          "next tokens outside: %llu, %llu", (unsigned long long)s.n_next_outside,
          (unsigned long long)t.n_next_outside);
    const struct {
        const char *name;
        double a, b;
    } same[] = {{"ppl_ref", s.ppl_ref, t.ppl_ref}, {"ppl_ref_se", s.ppl_ref_se, t.ppl_ref_se},
                {"ppl_arm", s.ppl_arm, t.ppl_arm}, {"ln_ppl_ratio", s.ln_ppl_ratio, t.ln_ppl_ratio},
                {"ln_ppl_ratio_se", s.ln_ppl_ratio_se, t.ln_ppl_ratio_se},
                {"ppl_ratio", s.ppl_ratio, t.ppl_ratio}, {"ppl_ratio_se", s.ppl_ratio_se, t.ppl_ratio_se},
                {"ppl_diff", s.ppl_diff, t.ppl_diff}, {"ppl_diff_se", s.ppl_diff_se, t.ppl_diff_se},
                {"nll_cor", s.nll_cor, t.nll_cor}};
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++)
        CHECK(same[i].a == same[i].b, "%s: %.17g with the floors, %.17g with the estimates",
              same[i].name, same[i].a, same[i].b);

    /* independently: raw sums, as llama.cpp's mean_and_uncertainty */
    double sr = 0, sr2 = 0, se_ = 0, sd = 0, sd2 = 0, sdp = 0;
    for (int i = 0; i < N; i++) {
        double d = arm[i] - est[i];
        sr += raw[i]; sr2 += raw[i] * raw[i]; se_ += est[i];
        sd += d; sd2 += d * d;
        sdp += exp(-arm[i]) - exp(-raw[i]);
    }
    double mr = sr / N, ur = sqrt((sr2 / N - mr * mr) / (N - 1));
    double md = sd / N, ud = sqrt((sd2 / N - md * md) / (N - 1));
    CHECK(close_to(s.ppl_ref_llamacpp, exp(mr), 1e-12 * exp(mr)) &&
              close_to(s.ppl_ref_llamacpp_se, exp(mr) * ur, 1e-9 * exp(mr)),
          "llama.cpp's PPL(base) %.15g ± %.15g, want %.15g ± %.15g", s.ppl_ref_llamacpp,
          s.ppl_ref_llamacpp_se, exp(mr), exp(mr) * ur);
    CHECK(close_to(s.ppl_ref, exp(se_ / N), 1e-12 * s.ppl_ref) && s.ppl_ref > 2.0 * s.ppl_ref_llamacpp,
          "PPL(ref) %.15g, want %.15g (llama.cpp's %.6g)", s.ppl_ref, exp(se_ / N), s.ppl_ref_llamacpp);
    CHECK(close_to(s.ln_ppl_ratio, md, 1e-13) && close_to(s.ln_ppl_ratio_se, ud, 1e-12) &&
              close_to(s.ppl_ratio_se, exp(md) * ud, 1e-12),
          "ln ratio %.15g ± %.15g, want %.15g ± %.15g", s.ln_ppl_ratio, s.ln_ppl_ratio_se, md, ud);
    CHECK(close_to(s.dp.mean, sdp / N, 1e-15) && s.dp.mean != t.dp.mean,
          "dp keeps the recorded floor: %.17g, want %.17g", s.dp.mean, sdp / N);
    kld_stats_running run;
    kld_stats_get_running(base, &run);
    CHECK(close_to(run.ln_ppl_ratio, md, 1e-13), "running ln ratio %.15g, want %.15g",
          run.ln_ppl_ratio, md);
    kld_stats_free(base);
    kld_stats_free(filled);
}

/* kld_stats_add_logits, and N = 1 (no standard error) */
static void check_add_logits(void) {
    kld_error err = {0};
    kld_stats *st;
    CHECK_OK(kld_stats_create(&st, 2, &err), err);
    float x[3] = {logf(0.5f), logf(0.25f), logf(0.25f)};
    CHECK_OK(kld_stats_add_logits(st, x, x, 3, 0, 42, &err), err);
    kld_summary s;
    CHECK_OK(kld_stats_finalize(st, &s, &err), err);
    CHECK(s.kld.mean == 0.0 && s.kld.se == 0.0 && s.top1_se == 0.0 && s.ppl_ref_se == 0.0 &&
              s.ln_ppl_ratio == 0.0 && s.ln_ppl_ratio_se == 0.0 && s.by_pos[3].n == 1,
          "single position: mean %g se %g ln ratio %g", s.kld.mean, s.kld.se, s.ln_ppl_ratio);
    CHECK(close_to(s.ppl_ref, 2.0, 1e-6) && s.ppl_ref == s.ppl_arm, "single position PPL %g %g",
          s.ppl_ref, s.ppl_arm);
    kld_stats_free(st);
}

/* Agreement measures of one position: the next token's rank (ties to the
 * lower id), ordered top-k agreement and the centred logit distance, and
 * their summary (label-in-top-k for k = 1, 5, 10 over known ranks). */
static void check_agreement(compute_fn fn, const char *name) {
    kld_error err = {0};
    kld_position r;
    /* ref top-3 by value: 0 (4), 1 (3), 2 (2); arm: 0, 2, 1 */
    float x[12] = {4, 3, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0};
    float y[12] = {4, 2, 3, 1, 0, 0, 0, 0, 0, 0, 0, 0};
    CHECK_OK(fn(x, y, 12, 2, 3, &r, &err), err);
    CHECK(r.topk_hits == 3 && r.topk_ordered == 1, "%s: top-3 hits %d, ordered %d (want 3, 1)", name,
          r.topk_hits, r.topk_ordered);
    CHECK(r.rank_ref == 2 && r.rank_arm == 1, "%s: ranks of token 2: %d, %d (want 2, 1)", name,
          r.rank_ref, r.rank_arm);
    /* token 5 ties with 4 and 6..11 at 0: only id 4 comes before it among them */
    CHECK_OK(fn(x, y, 12, 5, 3, &r, &err), err);
    CHECK(r.rank_ref == 5 && r.rank_arm == 5, "%s: rank of token 5: %d, %d (want 5)", name, r.rank_ref,
          r.rank_arm);
    CHECK_OK(fn(x, y, 12, -1, 3, &r, &err), err);
    CHECK(r.rank_ref == KLD_RANK_UNKNOWN && r.rank_arm == KLD_RANK_UNKNOWN, "%s: no next token: ranks %d %d",
          name, r.rank_ref, r.rank_arm);
    /* centred: x mean 2, y mean 3; |(y-3)-(x-2)| = 1, 1, 2 */
    float a[3] = {1, 2, 3}, b[3] = {1, 2, 6}, c[3] = {101, 102, 103};
    CHECK_OK(fn(a, b, 3, 0, 1, &r, &err), err);
    CHECK(close_to(r.dlogit, 4.0 / 3.0, 1e-12), "%s: dlogit %.15g, want 4/3", name, r.dlogit);
    CHECK_OK(fn(a, c, 3, 0, 1, &r, &err), err);
    CHECK(r.dlogit == 0.0, "%s: a shifted row's dlogit %g, want 0", name, r.dlogit);
}

/* A truncated row: the reference's rank within its subset (the top of the
 * distribution), "n or further" outside it when n >= 10, unknown when the
 * subset is smaller; the arm's rank unknown unless the row is full. */
static void check_truncated_ranks(void) {
    kld_error err = {0};
    int32_t idx[12];
    double lp[12], lq[12];
    float v[12];
    for (int j = 0; j < 12; j++) {
        idx[j] = 3 * j;
        v[j] = (float)(12 - j);
        lp[j] = lq[j] = -1.0 - j;
    }
    kld_trunc_row tr = {.n = 12, .idx = idx, .lp = lp, .lq = lq, .rank_ref = v, .rank_arm = v,
                        .top_ref = -1, .top_arm = -1, .next_token = 9, .logp_next_ref = -4,
                        .logp_next_arm = -4, .tail_ref = NAN, .tail_arm = NAN};
    kld_position r;
    CHECK_OK(kld_position_truncated(&tr, 10, &r, &err), err);
    CHECK(r.rank_ref == 3 && r.rank_arm == KLD_RANK_UNKNOWN && isnan(r.dlogit),
          "truncated: rank %d/%d of id 9 (want 3, unknown), dlogit %g", r.rank_ref, r.rank_arm, r.dlogit);
    tr.next_token = 10; /* not in the subset */
    CHECK_OK(kld_position_truncated(&tr, 10, &r, &err), err);
    CHECK(r.rank_ref == 12, "truncated: rank outside the subset %d, want 12", r.rank_ref);
    tr.n = 5;
    CHECK_OK(kld_position_truncated(&tr, 5, &r, &err), err);
    CHECK(r.rank_ref == KLD_RANK_UNKNOWN, "a 5-id subset: rank %d, want unknown", r.rank_ref);
    tr.n = 12;
    tr.full = true;
    tr.next_token = 9;
    CHECK_OK(kld_position_truncated(&tr, 10, &r, &err), err);
    CHECK(r.rank_ref == 3 && r.rank_arm == 3 && r.topk_ordered == 10, "a full row: ranks %d %d, ordered %d",
          r.rank_ref, r.rank_arm, r.topk_ordered);
}

static void check_agreement_summary(void) {
    kld_error err = {0};
    kld_stats *st = NULL;
    CHECK_OK(kld_stats_create(&st, 10, &err), err);
    /* ranks 0, 3, 7, 20 for the reference; the arm one place lower */
    const uint16_t ranks[4] = {0, 3, 7, 20};
    for (int i = 0; i < 5; i++) {
        kld_position r = {.kld = 0.01, .nll_ref = 1, .nll_arm = 1, .dlogit = i < 4 ? 0.5 * i : NAN,
                          .p_ref_max = 0.5f, .mass = 1, .token = i < 4 ? 1 : -1, .topk = 10,
                          .topk_hits = 10, .topk_ordered = (uint16_t)(2 * i),
                          .rank_ref = i < 4 ? ranks[i] : KLD_RANK_UNKNOWN,
                          .rank_arm = i < 4 ? (uint16_t)(ranks[i] + 1) : KLD_RANK_UNKNOWN};
        CHECK_OK(kld_stats_add(st, &r, &err), err);
    }
    kld_summary s;
    CHECK_OK(kld_stats_finalize(st, &s, &err), err);
    CHECK(s.n_rank_ref == 4 && s.n_rank_arm == 4, "known ranks %llu %llu", (unsigned long long)s.n_rank_ref,
          (unsigned long long)s.n_rank_arm);
    /* ref: top-1 {0}, top-5 {0,3}, top-10 {0,3,7}; arm (1,4,8,21): 0, 2, 3 */
    CHECK(s.label_topk_ref[0] == 0.25 && s.label_topk_ref[1] == 0.5 && s.label_topk_ref[2] == 0.75,
          "ref label-in-top-k %g %g %g", s.label_topk_ref[0], s.label_topk_ref[1], s.label_topk_ref[2]);
    CHECK(s.label_topk_arm[0] == 0.0 && s.label_topk_arm[1] == 0.5 && s.label_topk_arm[2] == 0.75,
          "arm label-in-top-k %g %g %g", s.label_topk_arm[0], s.label_topk_arm[1], s.label_topk_arm[2]);
    CHECK(close_to(s.topk_ordered, 0.4, 1e-15), "ordered top-k %g, want 0.4", s.topk_ordered);
    CHECK(s.n_dlogit == 4 && close_to(s.dlogit_mean, 0.75, 1e-15), "dlogit %g over %llu", s.dlogit_mean,
          (unsigned long long)s.n_dlogit);
    kld_stats_free(st);
}

int main(void) {
    check_agreement(kld_position_compute_ref, "ref");
    if (kld_cpu_has_avx2()) check_agreement(kld_position_compute_avx2, "avx2");
    check_agreement_summary();
    check_truncated_ranks();
    check_closed_forms(kld_position_compute_ref, "ref");
    check_self_zero(kld_position_compute_ref, "ref");
    if (kld_cpu_has_avx2()) {
        check_closed_forms(kld_position_compute_avx2, "avx2");
        check_self_zero(kld_position_compute_avx2, "avx2");
    }
    check_closed_forms(kld_position_compute, kld_math_kernel_name());
    check_errors();
    check_odd_even();
    check_ppl_and_friends();
    check_next_outside();
    check_add_logits();
    return kt_finish();
}
