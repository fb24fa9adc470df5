/* test_stats_llamacpp.c — the summary definitions against llama.cpp's
 * `--kl-divergence` statistics, on the 2,520 positions of the oracle base
 * file ../shared/oracle/aidreams260K/small-base.kld (decoded here, in the
 * test; reading base files in the product is a later issue):
 *  1. llama.cpp's own per-position values for the reference (nll_base from
 *     the uint16 records) give its printed "Mean PPL(base)" and error;
 *  2. a synthetic arm (the decoded log-probs plus a deterministic
 *     perturbation): per-position values computed llama.cpp's way, summary
 *     recomputed here with llama.cpp's formulas (raw sums, mean_and_uncertainty,
 *     covariance, percentile, RMS Δp, same top) and compared with ours;
 *  3. the reference against itself through kld_position_compute: KLD,
 *     reverse KLD and JSD exactly 0 everywhere, PPL as expected for the
 *     renormalised rows and close to llama.cpp's printed value. */
#include "testlib.h"

#include "eval/stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define BASE KT_SHARED "/oracle/aidreams260K/small-base.kld"
#define PRINTED KT_SHARED "/oracle/aidreams260K/small-kld-q8_0.txt"

typedef struct base_file {
    int n_ctx, n_vocab, n_chunk, nv, per_chunk;
    const int32_t *tokens; /* copies, aligned */
    const unsigned char *records;
    char *data;
} base_file;

static bool base_open(base_file *b) {
    size_t size;
    b->data = kt_read_file(BASE, &size);
    CHECK(size >= 20 && memcmp(b->data, "_logits_", 8) == 0, "%s: no _logits_ magic", BASE);
    if (size < 20) return false;
    b->n_ctx = (int)kld_load_u32(b->data + 8);
    b->n_vocab = (int)kld_load_u32(b->data + 12);
    b->n_chunk = (int)kld_load_u32(b->data + 16);
    b->nv = 2 * ((b->n_vocab + 1) / 2) + 4;
    b->per_chunk = b->n_ctx - 1 - b->n_ctx / 2;
    size_t want = 20 + (size_t)b->n_chunk * b->n_ctx * 4 +
                  (size_t)b->n_chunk * b->per_chunk * b->nv * 2;
    CHECK(b->n_ctx == 128 && b->n_vocab == 512 && b->n_chunk == 40 && size == want,
          "%s: n_ctx %d n_vocab %d n_chunk %d size %zu (want %zu)", BASE, b->n_ctx, b->n_vocab,
          b->n_chunk, size, want);
    if (size != want) return false;
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)b->n_chunk * b->n_ctx);
    for (int i = 0; i < b->n_chunk * b->n_ctx; i++) tok[i] = (int32_t)kld_load_u32(b->data + 20 + 4 * i);
    b->tokens = tok;
    b->records = (const unsigned char *)b->data + 20 + (size_t)b->n_chunk * b->n_ctx * 4;
    return true;
}

/* Decodes record k of chunk c into lp (float, as llama.cpp computes it) and
 * returns the next token. */
static int32_t base_record(const base_file *b, int c, int k, float *lp) {
    const unsigned char *r = b->records + ((size_t)c * b->per_chunk + k) * b->nv * 2;
    float scale = kld_load_f32(r), min_lp = kld_load_f32(r + 4);
    for (int i = 0; i < b->n_vocab; i++) lp[i] = scale * (float)kld_load_u16(r + 8 + 2 * i) + min_lp;
    return b->tokens[c * b->n_ctx + b->n_ctx / 2 + k + 1];
}

/* llama.cpp's mean_and_uncertainty and covariance, verbatim in meaning. */
static void mean_unc(double sum, double sum2, double n, double *m, double *u) {
    *m = sum / n;
    double v = sum2 / n - *m * *m;
    *u = v > 0 && n > 10 ? sqrt(v / (n - 1)) : 0.0;
}
static double covariance(double sa, double sb, double sab, double n) {
    return n < 10 ? 0.0 : (sab / n - (sa / n) * (sb / n)) / (n - 1);
}
static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
static double llama_percentile(const double *v, size_t n, double f) {
    if (f <= 0) return v[0];
    if (f >= 1) return v[n - 1];
    double p = f * (double)(n - 1);
    size_t ip = (size_t)p;
    p -= (double)ip;
    return (1 - p) * v[ip] + p * v[ip + 1 < n ? ip + 1 : n - 1];
}
static double llama_median(const double *v, size_t n) {
    return n % 2 == 0 ? 0.5 * (v[n / 2] + v[n / 2 - 1]) : v[n / 2];
}

static bool rel_close(double a, double b, double rel) {
    return fabs(a - b) <= rel * fabs(b) + 1e-300;
}

static void printed_ppl_base(double *ppl, double *err) {
    char *txt = kt_read_file(PRINTED, NULL);
    const char *p = strstr(txt, "Mean PPL(base)");
    *ppl = *err = NAN;
    CHECK(p && sscanf(p, "Mean PPL(base) : %lf ± %lf", ppl, err) == 2, "%s: no Mean PPL(base) line",
          PRINTED);
    free(txt);
}

int main(void) {
    base_file b;
    if (!base_open(&b)) return kt_finish();
    double printed_ppl, printed_err;
    printed_ppl_base(&printed_ppl, &printed_err);

    const int V = b.n_vocab;
    float *lp = malloc(sizeof(float) * (size_t)V), *arm = malloc(sizeof(float) * (size_t)V);
    kld_error err = {0};
    kld_stats *ll, *self;
    CHECK_OK(kld_stats_create(&ll, 1, &err), err);
    CHECK_OK(kld_stats_create(&self, 1, &err), err);

    /* llama.cpp's kl_divergence_result */
    double sum_nll = 0, sum_nll2 = 0, sum_nll_base = 0, sum_nll_base2 = 0, sum_nll_nll_base = 0;
    double sum_kld = 0, sum_kld2 = 0, sum_p_diff = 0, sum_p_diff2 = 0, sum_p_diff4 = 0;
    size_t n_same_top = 0, count = 0;
    size_t total = (size_t)b.n_chunk * b.per_chunk;
    double *kld_values = malloc(sizeof(double) * total), *p_diff_values = malloc(sizeof(double) * total);
    double sum_self_nll = 0; /* -log_softmax(lp)[tok], what self-comparison must give */
    bool self_zero = true, self_top = true;

    for (int c = 0; c < b.n_chunk; c++) {
        CHECK_OK(kld_stats_begin_doc(ll, &err), err);
        CHECK_OK(kld_stats_begin_doc(self, &err), err);
        for (int k = 0; k < b.per_chunk; k++) {
            int32_t tok = base_record(&b, c, k, lp);
            /* the synthetic arm: a smooth deterministic perturbation */
            for (int i = 0; i < V; i++)
                arm[i] = lp[i] + 0.3f * (float)sin(0.37 * i + 1.3 * (c * 63 + k)) + 2.0f;

            /* llama.cpp's log_softmax(n_vocab, logits, base_log_prob, tok, kld) */
            float max_logit = arm[0];
            int imax = 0;
            for (int i = 1; i < V; i++)
                if (arm[i] > max_logit) { max_logit = arm[i]; imax = i; }
            double sum_exp = 0.0;
            for (int i = 0; i < V; i++) sum_exp += expf(arm[i] - max_logit);
            const float log_sum_exp = (float)log(sum_exp);
            const float nll = max_logit + log_sum_exp - arm[tok];
            const float nll_base = -lp[tok];
            sum_nll += nll;
            sum_nll2 += (double)nll * nll;
            sum_nll_base += nll_base;
            sum_nll_base2 += (double)nll_base * nll_base;
            sum_nll_nll_base += (double)nll * nll_base;
            max_logit += log_sum_exp;
            double sum = 0;
            int imax_base = -1;
            float p_log_base_max = 0;
            for (int i = 0; i < V; i++) {
                if (i == 0 || lp[i] > p_log_base_max) { p_log_base_max = lp[i]; imax_base = i; }
                if (lp[i] > -16.f) sum += expf(lp[i]) * (lp[i] - arm[i] + max_logit);
            }
            sum_kld += sum;
            sum_kld2 += sum * sum;
            ++count;
            n_same_top += imax == imax_base;
            const float p_diff = expf(-nll) - expf(-nll_base);
            sum_p_diff += p_diff;
            sum_p_diff2 += (double)p_diff * p_diff;
            sum_p_diff4 += (double)p_diff * p_diff * p_diff * p_diff;
            kld_values[count - 1] = sum;
            p_diff_values[count - 1] = p_diff;

            /* the same values as our record */
            kld_position r;
            memset(&r, 0, sizeof r);
            r.kld = sum;
            r.kld_rev = sum;
            r.jsd = sum;
            r.nll_ref = nll_base;
            r.nll_arm = nll;
            r.token = tok;
            r.top_ref = imax_base;
            r.top_arm = imax;
            r.topk = 1;
            r.topk_hits = imax == imax_base;
            r.p_ref_max = expf(p_log_base_max);
            r.ctx_pos = (uint32_t)(b.n_ctx / 2 + k);
            CHECK_OK(kld_stats_add(ll, &r, &err), err);

            /* the reference against itself through the product's math */
            kld_position s;
            CHECK_OK(kld_position_compute(lp, lp, V, tok, 1, &s, &err), err);
            s.ctx_pos = r.ctx_pos;
            CHECK_OK(kld_stats_add(self, &s, &err), err);
            self_zero = self_zero && s.kld == 0.0 && s.kld_rev == 0.0 && s.jsd == 0.0;
            self_top = self_top && s.top_ref == imax_base && s.top_arm == imax_base;
            double lse = 0.0;
            for (int i = 0; i < V; i++) lse += exp((double)lp[i]);
            sum_self_nll += -(double)lp[tok] + log(lse);
        }
    }
    CHECK(count == 2520, "positions %zu, want 2520", count);

    kld_summary s;
    CHECK_OK(kld_stats_finalize(ll, &s, &err), err);
    const double N = (double)count;

    /* 1. the printed reference perplexity */
    printf("PPL(base) %.7f ± %.7f; llama.cpp printed %.6f ± %.6f\n", s.ppl_ref, s.ppl_ref_se,
           printed_ppl, printed_err);
    CHECK(fabs(s.ppl_ref - printed_ppl) <= 1e-6 && fabs(s.ppl_ref_se - printed_err) <= 1e-6,
          "PPL(base) %.7f ± %.7f, llama.cpp printed %.6f ± %.6f", s.ppl_ref, s.ppl_ref_se,
          printed_ppl, printed_err);

    /* 2. every statistic, llama.cpp's formulas on the same values */
    double lq, uq, lb, ub;
    mean_unc(sum_nll, sum_nll2, N, &lq, &uq);
    mean_unc(sum_nll_base, sum_nll_base2, N, &lb, &ub);
    double cov = covariance(sum_nll, sum_nll_base, sum_nll_nll_base, N);
    double ppl_q = exp(lq), ppl_b = exp(lb);
    double lr_unc = sqrt(uq * uq + ub * ub - 2.0 * cov);
    double ppl_cov = ppl_q * ppl_b * cov;
    double diff_unc = sqrt(ppl_q * uq * ppl_q * uq + ppl_b * ub * ppl_b * ub - 2.0 * ppl_cov);
    CHECK(rel_close(s.ppl_arm, ppl_q, 1e-12) && rel_close(s.ppl_arm_se, ppl_q * uq, 1e-9),
          "PPL(arm) %.12g ± %.12g, llama.cpp %.12g ± %.12g", s.ppl_arm, s.ppl_arm_se, ppl_q, ppl_q * uq);
    CHECK(rel_close(s.nll_cor, cov / (uq * ub), 1e-9), "cor %.12g, llama.cpp %.12g", s.nll_cor,
          cov / (uq * ub));
    CHECK(rel_close(s.ln_ppl_ratio, lq - lb, 1e-9) && rel_close(s.ln_ppl_ratio_se, lr_unc, 1e-6),
          "ln ratio %.12g ± %.12g, llama.cpp %.12g ± %.12g", s.ln_ppl_ratio, s.ln_ppl_ratio_se,
          lq - lb, lr_unc);
    CHECK(rel_close(s.ppl_ratio, exp(lq - lb), 1e-12) &&
              rel_close(s.ppl_ratio_se, exp(lq - lb) * lr_unc, 1e-6),
          "ratio %.12g ± %.12g", s.ppl_ratio, s.ppl_ratio_se);
    CHECK(rel_close(s.ppl_diff, ppl_q - ppl_b, 1e-9) && rel_close(s.ppl_diff_se, diff_unc, 1e-6),
          "diff %.12g ± %.12g, llama.cpp %.12g ± %.12g", s.ppl_diff, s.ppl_diff_se, ppl_q - ppl_b,
          diff_unc);

    double mk, uk;
    mean_unc(sum_kld, sum_kld2, N, &mk, &uk);
    qsort(kld_values, count, sizeof(double), cmp_d);
    qsort(p_diff_values, count, sizeof(double), cmp_d);
    CHECK(rel_close(s.kld.mean, mk, 1e-12) && rel_close(s.kld.se, uk, 1e-9),
          "KLD %.12g ± %.12g, llama.cpp %.12g ± %.12g", s.kld.mean, s.kld.se, mk, uk);
    CHECK(s.kld.max == kld_values[count - 1] && s.kld.min == kld_values[0] &&
              s.kld.median == llama_median(kld_values, count),
          "KLD max %g min %g median %g", s.kld.max, s.kld.min, s.kld.median);
    for (int i = 0; i < KLD_N_PCT; i++) {
        double f = kld_pct_fractions[i];
        CHECK(rel_close(s.kld.pct[i], llama_percentile(kld_values, count, f), 1e-14),
              "KLD %.1f%% %.12g, llama.cpp %.12g", 100 * f, s.kld.pct[i],
              llama_percentile(kld_values, count, f));
        /* dp: ours from the NLLs in double, llama.cpp's from expf in float */
        CHECK(fabs(s.dp.pct[i] - llama_percentile(p_diff_values, count, f)) <= 5e-7,
              "dp %.1f%% %.12g, llama.cpp %.12g", 100 * f, s.dp.pct[i],
              llama_percentile(p_diff_values, count, f));
    }

    /* our dp is recomputed from the NLLs in double; llama.cpp's in float */
    double mp, up, ms, us;
    mean_unc(sum_p_diff, sum_p_diff2, N, &mp, &up);
    mean_unc(sum_p_diff2, sum_p_diff4, N, &ms, &us);
    double rms = sqrt(ms), rms_unc = 0.5 / rms * us;
    CHECK(fabs(s.dp.mean - mp) <= 1e-7 && rel_close(s.dp.se, up, 1e-4),
          "dp %.10g ± %.10g, llama.cpp %.10g ± %.10g", s.dp.mean, s.dp.se, mp, up);
    CHECK(rel_close(s.dp_rms, rms, 1e-4) && rel_close(s.dp_rms_se, rms_unc, 1e-3),
          "RMS dp %.10g ± %.10g, llama.cpp %.10g ± %.10g", s.dp_rms, s.dp_rms_se, rms, rms_unc);
    double same = (double)n_same_top / N;
    CHECK(s.top1_agreement == same && rel_close(s.top1_se, sqrt(same * (1 - same) / (N - 1)), 1e-12),
          "same top %.12g ± %.12g, llama.cpp %.12g", s.top1_agreement, s.top1_se, same);
    CHECK(s.n_docs == 40 && s.n_docs_scored == 40 && s.by_pos[3].n + s.by_pos[4].n == count,
          "docs %llu, position buckets %llu + %llu", (unsigned long long)s.n_docs,
          (unsigned long long)s.by_pos[3].n, (unsigned long long)s.by_pos[4].n);

    /* 3. self-comparison through kld_position_compute */
    kld_summary z;
    CHECK_OK(kld_stats_finalize(self, &z, &err), err);
    CHECK(self_zero && z.kld.max == 0.0 && z.jsd.max == 0.0 && z.kld_rev.max == 0.0,
          "self-comparison: KLD not exactly 0 (max %g)", z.kld.max);
    CHECK(self_top && z.top1_agreement == 1.0 && z.topk_overlap == 1.0 && z.ln_ppl_ratio == 0.0 &&
              z.ln_ppl_ratio_se == 0.0 && z.dp_rms == 0.0 && z.nll_cor == 1.0,
          "self-comparison: top1 %g ln ratio %g ± %g cor %.17g", z.top1_agreement, z.ln_ppl_ratio,
          z.ln_ppl_ratio_se, z.nll_cor);
    double want_self = exp(sum_self_nll / N);
    CHECK(rel_close(z.ppl_ref, want_self, 1e-9), "self PPL %.10g, want %.10g", z.ppl_ref, want_self);
    /* the uint16 records hold log-probs that sum to 1 only to ~1e-4 */
    CHECK(rel_close(z.ppl_ref, printed_ppl, 1e-3), "self PPL %.6f far from llama.cpp's %.6f",
          z.ppl_ref, printed_ppl);

    kld_stats_free(ll);
    kld_stats_free(self);
    free(kld_values);
    free(p_diff_values);
    free(lp);
    free(arm);
    free((void *)b.tokens);
    free(b.data);
    return kt_finish();
}
