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

/* ---- passes over a record source ---- */

typedef struct pass {
    const kld_record_source *src;
    const kld_position *b;
    size_t m, j, count;
    bool started, done;
    kld_status st;
    kld_error *err;
} pass;

static void pass_begin(pass *p, const kld_record_source *src, kld_error *err) {
    *p = (pass){.src = src, .err = err};
}

/* The next record of the pass, or NULL at its end or on an error (p->st).
 * A source must hand out exactly src->n records per pass. */
static const kld_position *pass_next(pass *p) {
    while (p->j == p->m) {
        if (p->done || p->st) return NULL;
        bool restart = !p->started;
        p->started = true;
        p->j = 0;
        if ((p->st = p->src->next(p->src->user, restart, &p->b, &p->m, p->err))) return NULL;
        if (p->m == 0) {
            p->done = true;
            if (p->count != p->src->n)
                p->st = kld_fail(p->err, KLD_ERR_FORMAT, "record source: %zu records in a pass, "
                                 "%zu announced", p->count, p->src->n);
            return NULL;
        }
        if (p->m > p->src->n - p->count) {
            p->st = kld_fail(p->err, KLD_ERR_FORMAT, "record source: more than the %zu records "
                             "announced", p->src->n);
            return NULL;
        }
    }
    p->count++;
    return &p->b[p->j++];
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

typedef struct bucket_tally {
    size_t count[KLD_POS_BUCKETS], top1[KLD_POS_BUCKETS], at[KLD_POS_BUCKETS];
} bucket_tally;

/* Mean, se, median and top-1 agreement of each bucket, whose KLD values
 * lie grouped in scratch (a counting sort in record order). */
static void finish_buckets(const bucket_tally *t, int nb, double *scratch, kld_bucket *out) {
    size_t off = 0;
    for (int b = 0; b < nb; b++) {
        kld_bucket *k = &out[b];
        k->n = t->count[b];
        if (t->count[b]) {
            double *v = scratch + off;
            qsort(v, t->count[b], sizeof *v, cmp_double);
            kld_mean_se(v, t->count[b], &k->kld_mean, &k->kld_se);
            k->kld_median = kld_percentile_sorted(v, t->count[b], 0.5);
            k->top1_agreement = (double)t->top1[b] / (double)t->count[b];
        } else {
            k->kld_mean = k->kld_se = k->kld_median = k->top1_agreement = NAN;
        }
        off += t->count[b];
    }
}

/* Both bucketings: one pass counts, one groups the KLD (confidence into v,
 * context position into w). */
static kld_status fill_buckets(const kld_record_source *src, double *v, double *w, kld_summary *s,
                               kld_error *err) {
    bucket_tally tc = {0}, tp = {0};
    pass p;
    const kld_position *r;
    pass_begin(&p, src, err);
    while ((r = pass_next(&p))) {
        int c = conf_bucket(r), q = pos_bucket(r);
        bool top1 = r->top_ref == r->top_arm;
        tc.count[c]++;
        tc.top1[c] += top1;
        tp.count[q]++;
        tp.top1[q] += top1;
    }
    if (p.st) return p.st;
    size_t oc = 0, op = 0;
    for (int b = 0; b < KLD_POS_BUCKETS; b++) {
        if (b < KLD_CONF_BUCKETS) tc.at[b] = oc, oc += tc.count[b];
        tp.at[b] = op, op += tp.count[b];
    }
    pass_begin(&p, src, err);
    while ((r = pass_next(&p))) {
        v[tc.at[conf_bucket(r)]++] = r->kld;
        w[tp.at[pos_bucket(r)]++] = r->kld;
    }
    if (p.st) return p.st;
    finish_buckets(&tc, KLD_CONF_BUCKETS, v, s->by_conf);
    finish_buckets(&tp, KLD_POS_BUCKETS, w, s->by_pos);
    return KLD_OK;
}

/* ---- perplexity statistics over the positions with a next token ---- */

static kld_status ppl_stats(const kld_record_source *src, double *a, double *b, double *d,
                            kld_summary *s, kld_error *err) {
    size_t m = 0;
    /* a: nll_ref as recorded, b: nll_arm, d: the reference NLL the statistics
     * pair with b (kld_position_nll_ref). They differ only at llama.cpp base
     * rows whose next token lies below the 16-nat window: the record holds
     * the window's floor there (llama.cpp's biased-low PPL(base)); PPL(ref),
     * the ratio, the difference and the correlation all take the estimate,
     * so that every per-position pair of the ratio is one of those behind
     * PPL(ref) and its standard error is the paired one of those pairs */
    s->n_next_outside = 0;
    s->ppl_ref_llamacpp = s->ppl_ref_llamacpp_se = NAN;
    pass p;
    const kld_position *r;
    pass_begin(&p, src, err);
    while ((r = pass_next(&p))) {
        if (r->token < 0) continue;
        a[m] = r->nll_ref;
        b[m] = r->nll_arm;
        d[m] = kld_position_nll_ref(r);
        s->n_next_outside += r->next_outside != 0;
        m++;
    }
    if (p.st) return p.st;
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
        return KLD_OK;
    }
    if (m == 0) {
        s->ppl_ref = s->ppl_ref_se = s->ppl_arm = s->ppl_arm_se = NAN;
        s->ln_ppl_ratio = s->ln_ppl_ratio_se = s->ppl_ratio = s->ppl_ratio_se = NAN;
        s->ppl_diff = s->ppl_diff_se = s->nll_cor = NAN;
        dist_nan(&s->dp);
        s->dp_rms = s->dp_rms_se = NAN;
        return KLD_OK;
    }
    if (s->n_next_outside) {
        double ml, ul;
        kld_mean_se(a, m, &ml, &ul);
        s->ppl_ref_llamacpp = exp(ml);
        s->ppl_ref_llamacpp_se = s->ppl_ref_llamacpp * ul;
    }
    double ma, ua, mb, ub;
    kld_mean_se(d, m, &ma, &ua);
    kld_mean_se(b, m, &mb, &ub);
    csum va = {0, 0}, vb = {0, 0}, cab = {0, 0};
    for (size_t i = 0; i < m; i++) {
        csum_add(&va, (d[i] - ma) * (d[i] - ma));
        csum_add(&vb, (b[i] - mb) * (b[i] - mb));
        csum_add(&cab, (d[i] - ma) * (b[i] - mb));
    }
    double var_a = csum_get(&va) / (double)m, var_b = csum_get(&vb) / (double)m;
    double cov_pop = csum_get(&cab) / (double)m;
    double cov = m >= 2 ? cov_pop / (double)(m - 1) : 0.0; /* covariance of the two means */
    s->nll_cor = var_a > 0.0 && var_b > 0.0 ? cov_pop / sqrt(var_a * var_b) : 0.0;

    s->ppl_ref = exp(ma);
    s->ppl_ref_se = s->ppl_ref * ua;
    s->ppl_arm = exp(mb);
    s->ppl_arm_se = s->ppl_arm * ub;

    for (size_t i = 0; i < m; i++) d[i] = b[i] - d[i];
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

    /* dp = p_arm(next) - p_ref(next) with the recorded nll_ref (llama.cpp's
     * definition; at a floor the two differ by less than e^-16); d holds dp,
     * a its squares */
    for (size_t i = 0; i < m; i++) {
        d[i] = exp(-b[i]) - exp(-a[i]);
        a[i] = d[i] * d[i];
    }
    double ms, us;
    kld_mean_se(a, m, &ms, &us);
    s->dp_rms = sqrt(ms);
    s->dp_rms_se = s->dp_rms > 0.0 ? 0.5 / s->dp_rms * us : 0.0;
    dist_of(d, m, &s->dp);
    return KLD_OK;
}

/* Mean of per-document means (documents with >= 1 position), in record order. */
static kld_status doc_means(const kld_record_source *src, double *v, kld_summary *out,
                            kld_error *err) {
    size_t nd = 0, d = 0, i = 0, count = 0;
    csum s = {0, 0};
    pass p;
    const kld_position *r;
    pass_begin(&p, src, err);
    while ((r = pass_next(&p))) {
        while (d + 1 < src->n_docs && src->doc_start[d + 1] <= i) {
            if (count) v[nd++] = csum_get(&s) / (double)count;
            s = (csum){0, 0};
            count = 0;
            d++;
        }
        if (src->n_docs && i >= src->doc_start[0]) {
            csum_add(&s, r->kld);
            count++;
        }
        i++;
    }
    if (p.st) return p.st;
    if (count) v[nd++] = csum_get(&s) / (double)count;
    out->n_docs_scored = nd;
    kld_mean_se(v, nd, &out->kld_doc_mean, &out->kld_doc_se);
    return KLD_OK;
}

kld_status kld_stats_finalize(const kld_stats *st, kld_summary *out, kld_error *err) {
    kld_record_source src;
    kld_stats_source(st, &src);
    return kld_summary_from_source(&src, out, err);
}

/* Label-in-top-k of both rankings, ordered top-k agreement and the centred
 * logit distance. */
static kld_status agreement(const kld_record_source *src, double *v, double *w, kld_summary *out,
                            kld_error *err) {
    uint64_t in_ref[KLD_LABEL_K_N] = {0}, in_arm[KLD_LABEL_K_N] = {0};
    size_t i = 0, nd = 0;
    pass p;
    const kld_position *r;
    out->n_rank_ref = out->n_rank_arm = 0;
    pass_begin(&p, src, err);
    while ((r = pass_next(&p))) {
        w[i++] = (double)r->topk_ordered / (double)r->topk;
        if (!isnan(r->dlogit)) v[nd++] = r->dlogit;
        out->n_rank_ref += r->rank_ref != KLD_RANK_UNKNOWN;
        out->n_rank_arm += r->rank_arm != KLD_RANK_UNKNOWN;
        for (int j = 0; j < KLD_LABEL_K_N; j++) {
            in_ref[j] += r->rank_ref != KLD_RANK_UNKNOWN && r->rank_ref < kld_label_k[j];
            in_arm[j] += r->rank_arm != KLD_RANK_UNKNOWN && r->rank_arm < kld_label_k[j];
        }
    }
    if (p.st) return p.st;
    kld_mean_se(w, i, &out->topk_ordered, &out->topk_ordered_se);
    out->n_dlogit = nd;
    if (nd) kld_mean_se(v, nd, &out->dlogit_mean, &out->dlogit_se);
    else out->dlogit_mean = out->dlogit_se = NAN;
    for (int j = 0; j < KLD_LABEL_K_N; j++) {
        out->label_topk_ref[j] = out->n_rank_ref ? (double)in_ref[j] / (double)out->n_rank_ref : NAN;
        out->label_topk_ref_se[j] = out->n_rank_ref ? binomial_se(out->label_topk_ref[j], out->n_rank_ref) : NAN;
        out->label_topk_arm[j] = out->n_rank_arm ? (double)in_arm[j] / (double)out->n_rank_arm : NAN;
        out->label_topk_arm_se[j] = out->n_rank_arm ? binomial_se(out->label_topk_arm[j], out->n_rank_arm) : NAN;
    }
    return KLD_OK;
}

/* Passes fill at most three arrays of n doubles; each statistic sees the
 * values in the order and with the arithmetic it always had. */
static kld_status summarize(const kld_record_source *src, double *v, double *w, double *x,
                            kld_summary *out, kld_error *err) {
    size_t n = src->n, i = 0;
    uint64_t top1 = 0, n_trunc = 0;
    pass p;
    const kld_position *r;
    pass_begin(&p, src, err);
    while ((r = pass_next(&p))) {
        v[i] = r->kld;
        w[i] = (double)r->topk_hits / (double)r->topk;
        top1 += r->top_ref == r->top_arm;
        i++;
    }
    if (p.st) return p.st;
    dist_of(v, n, &out->kld);
    kld_mean_se(w, n, &out->topk_overlap, &out->topk_se);
    out->top1_agreement = (double)top1 / (double)n;
    out->top1_se = binomial_se(out->top1_agreement, n);

    i = 0;
    uint64_t n_no_bound = 0;
    pass_begin(&p, src, err);
    while ((r = pass_next(&p))) {
        v[i] = r->kld_bound;
        w[i] = r->mass;
        x[i] = r->kld_rev;
        n_trunc += r->truncated != 0;
        n_no_bound += isnan(r->kld_bound);
        i++;
    }
    if (p.st) return p.st;
    out->n_truncated = n_trunc;
    out->n_no_bound = n_no_bound;
    /* a bound of some rows only is no bound of the run */
    if (n_no_bound) dist_nan(&out->kld_bound);
    else dist_of(v, n, &out->kld_bound);
    {
        kld_dist mass;
        dist_of(w, n, &mass);
        out->mass_mean = mass.mean;
        out->mass_min = mass.min;
        out->mass_p1 = mass.pct[1]; /* kld_pct_fractions[1] = 0.01 */
    }
    dist_of(x, n, &out->kld_rev);

    i = 0;
    pass_begin(&p, src, err);
    while ((r = pass_next(&p))) v[i++] = r->jsd;
    if (p.st) return p.st;
    dist_of(v, n, &out->jsd);

    kld_status st = doc_means(src, v, out, err);
    if (!st) st = ppl_stats(src, v, w, x, out, err);
    if (!st) st = fill_buckets(src, v, w, out, err);
    if (!st) st = agreement(src, v, w, out, err);
    if (st) return st;
    for (int b = 0; b < KLD_CONF_BUCKETS; b++) {
        out->by_conf[b].lo = (double)b / KLD_CONF_BUCKETS;
        out->by_conf[b].hi = (double)(b + 1) / KLD_CONF_BUCKETS;
    }
    for (int b = 0; b < KLD_POS_BUCKETS; b++) {
        out->by_pos[b].lo = b == 0 ? 0.0 : ldexp(1.0, b + 2);
        out->by_pos[b].hi = ldexp(1.0, b + 3);
    }
    return KLD_OK;
}

kld_status kld_summary_from_source(const kld_record_source *src, kld_summary *out, kld_error *err) {
    memset(out, 0, sizeof *out);
    size_t n = src->n;
    if (n == 0) return kld_fail(err, KLD_ERR_ARG, "kld_stats_finalize: no positions were scored");
    uint64_t bytes;
    if (!kld_mul_u64(n, 3 * sizeof(double), &bytes) || bytes > SIZE_MAX)
        return kld_fail(err, KLD_ERR_NOMEM, "kld_stats_finalize: %zu positions overflow", n);
    double *buf = malloc((size_t)bytes);
    if (!buf)
        return kld_fail(err, KLD_ERR_NOMEM, "kld_stats_finalize: cannot allocate scratch for %zu positions", n);
    out->n_positions = n;
    out->n_docs = src->n_docs;
    out->topk = src->topk;
    kld_status st = summarize(src, buf, buf + n, buf + 2 * n, out, err);
    free(buf);
    return st;
}
