/* stats_summary.c — kld_stats_finalize: every statistic of the run summary,
 * computed from the stored position records (definitions in stats.h):
 * compensated two-pass means and standard errors, exact percentiles on
 * sorted copies, the paired perplexity statistics and the buckets. */
#include "eval/stats.h"

#include "common/common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const double kld_pct_fractions[KLD_N_PCT] = {0.001, 0.01, 0.05, 0.10, 0.25,
                                             0.75,  0.90, 0.95, 0.99, 0.999};

/* Neumaier-compensated sum: a million small KLD values lose no digits. */
typedef struct csum {
    double s, c;
} csum;

static void csum_add(csum *a, double x) {
    double t = a->s + x;
    if (fabs(a->s) >= fabs(x)) a->c += (a->s - t) + x;
    else a->c += (x - t) + a->s;
    a->s = t;
}

static double csum_get(const csum *a) { return a->s + a->c; }

void kld_mean_se(const double *x, size_t n, double *mean, double *se) {
    *mean = 0.0;
    *se = 0.0;
    if (n == 0) return;
    csum s = {0, 0};
    for (size_t i = 0; i < n; i++) csum_add(&s, x[i]);
    double m = csum_get(&s) / (double)n;
    csum v = {0, 0};
    for (size_t i = 0; i < n; i++) csum_add(&v, (x[i] - m) * (x[i] - m));
    double var = csum_get(&v) / (double)n; /* population variance */
    *mean = m;
    if (n >= 2) *se = sqrt(var / (double)(n - 1));
}

double kld_percentile_sorted(const double *sorted, size_t n, double fraction) {
    if (n == 0) return NAN;
    if (fraction <= 0.0) return sorted[0];
    if (fraction >= 1.0) return sorted[n - 1];
    double h = fraction * (double)(n - 1);
    size_t i = (size_t)h;
    double w = h - (double)i;
    size_t j = i + 1 < n ? i + 1 : n - 1;
    return (1.0 - w) * sorted[i] + w * sorted[j];
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void dist_nan(kld_dist *d) {
    d->mean = d->se = d->min = d->median = d->max = NAN;
    for (int i = 0; i < KLD_N_PCT; i++) d->pct[i] = NAN;
}

/* Fills d from v[0..n), which it sorts. */
static void dist_of(double *v, size_t n, kld_dist *d) {
    if (n == 0) {
        dist_nan(d);
        return;
    }
    qsort(v, n, sizeof *v, cmp_double);
    kld_mean_se(v, n, &d->mean, &d->se);
    d->min = v[0];
    d->max = v[n - 1];
    d->median = kld_percentile_sorted(v, n, 0.5);
    for (int i = 0; i < KLD_N_PCT; i++) d->pct[i] = kld_percentile_sorted(v, n, kld_pct_fractions[i]);
}

static double binomial_se(double f, uint64_t n) {
    return n >= 2 ? sqrt(f * (1.0 - f) / (double)(n - 1)) : 0.0;
}

/* ---- buckets ---- */

static int conf_bucket(const kld_position *r) {
    int b = (int)((double)r->p_ref_max * KLD_CONF_BUCKETS);
    return b < 0 ? 0 : b >= KLD_CONF_BUCKETS ? KLD_CONF_BUCKETS - 1 : b;
}

/* [0,8) -> 0, [8,16) -> 1, [16,32) -> 2, ... */
static int pos_bucket(const kld_position *r) {
    if (r->ctx_pos < 8) return 0;
    int b = 31 - __builtin_clz(r->ctx_pos) - 2;
    return b < KLD_POS_BUCKETS ? b : KLD_POS_BUCKETS - 1;
}

/* Groups the records' KLD by bucket (a counting sort into scratch) and
 * fills mean, se, median and top-1 agreement of each bucket. */
static void fill_buckets(const kld_position *rec, size_t n, int nb,
                         int (*which)(const kld_position *), double *scratch, kld_bucket *out) {
    size_t count[KLD_POS_BUCKETS] = {0}, top1[KLD_POS_BUCKETS] = {0}, at[KLD_POS_BUCKETS];
    for (size_t i = 0; i < n; i++) {
        int b = which(&rec[i]);
        count[b]++;
        top1[b] += rec[i].top_ref == rec[i].top_arm;
    }
    size_t off = 0;
    for (int b = 0; b < nb; b++) {
        at[b] = off;
        off += count[b];
    }
    for (size_t i = 0; i < n; i++) scratch[at[which(&rec[i])]++] = rec[i].kld;
    off = 0;
    for (int b = 0; b < nb; b++) {
        kld_bucket *k = &out[b];
        k->n = count[b];
        if (count[b]) {
            double *v = scratch + off;
            qsort(v, count[b], sizeof *v, cmp_double);
            kld_mean_se(v, count[b], &k->kld_mean, &k->kld_se);
            k->kld_median = kld_percentile_sorted(v, count[b], 0.5);
            k->top1_agreement = (double)top1[b] / (double)count[b];
        } else {
            k->kld_mean = k->kld_se = k->kld_median = k->top1_agreement = NAN;
        }
        off += count[b];
    }
}

/* ---- perplexity statistics over the positions with a next token ---- */

static void ppl_stats(const kld_position *rec, size_t n, double *a, double *b, double *d,
                      kld_summary *s) {
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (rec[i].token < 0) continue;
        a[m] = rec[i].nll_ref;
        b[m] = rec[i].nll_arm;
        m++;
    }
    s->n_tokens = m;
    s->ref_nll_known = true;
    for (size_t i = 0; i < m; i++)
        if (isnan(a[i])) s->ref_nll_known = false;
    if (m > 0 && !s->ref_nll_known) { /* a saved teacher without next-token log-probs */
        double mb, ub;
        kld_mean_se(b, m, &mb, &ub);
        s->ppl_arm = exp(mb);
        s->ppl_arm_se = s->ppl_arm * ub;
        s->ppl_ref = s->ppl_ref_se = NAN;
        s->ln_ppl_ratio = s->ln_ppl_ratio_se = s->ppl_ratio = s->ppl_ratio_se = NAN;
        s->ppl_diff = s->ppl_diff_se = s->nll_cor = NAN;
        dist_nan(&s->dp);
        s->dp_rms = s->dp_rms_se = NAN;
        return;
    }
    if (m == 0) {
        s->ppl_ref = s->ppl_ref_se = s->ppl_arm = s->ppl_arm_se = NAN;
        s->ln_ppl_ratio = s->ln_ppl_ratio_se = s->ppl_ratio = s->ppl_ratio_se = NAN;
        s->ppl_diff = s->ppl_diff_se = s->nll_cor = NAN;
        dist_nan(&s->dp);
        s->dp_rms = s->dp_rms_se = NAN;
        return;
    }
    double ma, ua, mb, ub;
    kld_mean_se(a, m, &ma, &ua);
    kld_mean_se(b, m, &mb, &ub);
    csum va = {0, 0}, vb = {0, 0}, cab = {0, 0};
    for (size_t i = 0; i < m; i++) {
        csum_add(&va, (a[i] - ma) * (a[i] - ma));
        csum_add(&vb, (b[i] - mb) * (b[i] - mb));
        csum_add(&cab, (a[i] - ma) * (b[i] - mb));
    }
    double var_a = csum_get(&va) / (double)m, var_b = csum_get(&vb) / (double)m;
    double cov_pop = csum_get(&cab) / (double)m;
    double cov = m >= 2 ? cov_pop / (double)(m - 1) : 0.0; /* covariance of the two means */
    s->nll_cor = var_a > 0.0 && var_b > 0.0 ? cov_pop / sqrt(var_a * var_b) : 0.0;

    /* llama.cpp base rows: a next token below the 16-nat window gets the
     * window's floor as its NLL, so PPL(ref) is biased low; the arm's NLL at
     * those positions gives the best estimate the file allows */
    s->n_next_outside = 0;
    s->ppl_ref_filled = NAN;
    csum filled = {0, 0};
    for (size_t i = 0, k = 0; i < n; i++) {
        if (rec[i].token < 0) continue;
        bool out = rec[i].next_outside != 0;
        s->n_next_outside += out;
        csum_add(&filled, out ? b[k] : a[k]);
        k++;
    }
    if (s->n_next_outside) s->ppl_ref_filled = exp(csum_get(&filled) / (double)m);

    s->ppl_ref = exp(ma);
    s->ppl_ref_se = s->ppl_ref * ua;
    s->ppl_arm = exp(mb);
    s->ppl_arm_se = s->ppl_arm * ub;

    for (size_t i = 0; i < m; i++) d[i] = b[i] - a[i];
    double md, ud;
    kld_mean_se(d, m, &md, &ud);
    s->ln_ppl_ratio = mb - ma;
    s->ln_ppl_ratio_se = ud;
    s->ppl_ratio = exp(s->ln_ppl_ratio);
    s->ppl_ratio_se = s->ppl_ratio * ud;
    s->ppl_diff = s->ppl_arm - s->ppl_ref;
    double v = s->ppl_arm_se * s->ppl_arm_se + s->ppl_ref_se * s->ppl_ref_se -
               2.0 * s->ppl_arm * s->ppl_ref * cov;
    s->ppl_diff_se = v > 0.0 ? sqrt(v) : 0.0;

    /* dp = p_arm(next) - p_ref(next); d holds dp, a its squares */
    for (size_t i = 0; i < m; i++) {
        d[i] = exp(-b[i]) - exp(-a[i]);
        a[i] = d[i] * d[i];
    }
    double ms, us;
    kld_mean_se(a, m, &ms, &us);
    s->dp_rms = sqrt(ms);
    s->dp_rms_se = s->dp_rms > 0.0 ? 0.5 / s->dp_rms * us : 0.0;
    dist_of(d, m, &s->dp);
}

kld_status kld_stats_finalize(const kld_stats *st, kld_summary *out, kld_error *err) {
    memset(out, 0, sizeof *out);
    size_t n;
    const kld_position *rec = kld_stats_records(st, &n);
    if (n == 0) return kld_fail(err, KLD_ERR_ARG, "kld_stats_finalize: no positions were scored");
    uint64_t bytes;
    if (!kld_mul_u64(n, 3 * sizeof(double), &bytes) || bytes > SIZE_MAX)
        return kld_fail(err, KLD_ERR_NOMEM, "kld_stats_finalize: %zu positions overflow", n);
    double *buf = malloc((size_t)bytes);
    if (!buf)
        return kld_fail(err, KLD_ERR_NOMEM, "kld_stats_finalize: cannot allocate scratch for %zu positions", n);
    double *v = buf, *w = buf + n, *x = buf + 2 * n;

    out->n_positions = n;
    out->n_docs = kld_stats_doc_count(st);
    out->topk = kld_stats_topk(st);

    uint64_t top1 = 0;
    for (size_t i = 0; i < n; i++) {
        v[i] = rec[i].kld;
        w[i] = (double)rec[i].topk_hits / (double)rec[i].topk;
        top1 += rec[i].top_ref == rec[i].top_arm;
    }
    dist_of(v, n, &out->kld);
    kld_mean_se(w, n, &out->topk_overlap, &out->topk_se);
    out->top1_agreement = (double)top1 / (double)n;
    out->top1_se = binomial_se(out->top1_agreement, n);

    uint64_t n_trunc = 0;
    for (size_t i = 0; i < n; i++) {
        v[i] = rec[i].kld_bound;
        w[i] = rec[i].mass;
        n_trunc += rec[i].truncated != 0;
    }
    out->n_truncated = n_trunc;
    dist_of(v, n, &out->kld_bound);
    {
        kld_dist mass;
        dist_of(w, n, &mass);
        out->mass_mean = mass.mean;
        out->mass_min = mass.min;
        out->mass_p1 = mass.pct[1]; /* kld_pct_fractions[1] = 0.01 */
    }

    for (size_t i = 0; i < n; i++) v[i] = rec[i].kld_rev;
    dist_of(v, n, &out->kld_rev);
    for (size_t i = 0; i < n; i++) v[i] = rec[i].jsd;
    dist_of(v, n, &out->jsd);

    /* mean of per-document means */
    size_t nd = 0;
    for (size_t doc = 0; doc < out->n_docs; doc++) {
        size_t first, count;
        kld_stats_doc_range(st, doc, &first, &count);
        if (!count) continue;
        csum s = {0, 0};
        for (size_t i = first; i < first + count; i++) csum_add(&s, rec[i].kld);
        v[nd++] = csum_get(&s) / (double)count;
    }
    out->n_docs_scored = nd;
    kld_mean_se(v, nd, &out->kld_doc_mean, &out->kld_doc_se);

    ppl_stats(rec, n, v, w, x, out);

    fill_buckets(rec, n, KLD_CONF_BUCKETS, conf_bucket, v, out->by_conf);
    for (int b = 0; b < KLD_CONF_BUCKETS; b++) {
        out->by_conf[b].lo = (double)b / KLD_CONF_BUCKETS;
        out->by_conf[b].hi = (double)(b + 1) / KLD_CONF_BUCKETS;
    }
    fill_buckets(rec, n, KLD_POS_BUCKETS, pos_bucket, v, out->by_pos);
    for (int b = 0; b < KLD_POS_BUCKETS; b++) {
        out->by_pos[b].lo = b == 0 ? 0.0 : ldexp(1.0, b + 2);
        out->by_pos[b].hi = ldexp(1.0, b + 3);
    }
    free(buf);
    return KLD_OK;
}
