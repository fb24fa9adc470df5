/* bootstrap.c — see bootstrap.h. */
#include "eval/bootstrap.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const double FRACTIONS[KLD_BOOT_N] = {NAN, 0.5, 0.9, 0.95, 0.99, 0.999}; /* [0]: the mean */

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

typedef struct sample {
    size_t n, n_docs;
    double *kld;        /* sorted ascending */
    uint32_t *doc;      /* of each sorted value (a dense document number) */
    double *doc_kld;    /* per document: sum of KLD */
    uint64_t *doc_n;    /* positions */
    uint64_t *doc_top1; /* top-1 agreements */
    double *doc_lnr;    /* sum of nll_arm - nll_ref over positions with a next token */
    uint64_t *doc_nlnr;
    bool ppl;           /* reference NLLs known everywhere */
} sample;

static void sample_free(sample *s) {
    free(s->kld), free(s->doc), free(s->doc_kld), free(s->doc_n), free(s->doc_top1), free(s->doc_lnr),
        free(s->doc_nlnr);
}

typedef struct keyed {
    double v;
    uint32_t doc;
} keyed;

static int cmp_keyed(const void *a, const void *b) {
    const keyed *x = a, *y = b;
    if (x->v != y->v) return (x->v > y->v) - (x->v < y->v);
    return (x->doc > y->doc) - (x->doc < y->doc);
}

/* One pass over the records: per-document sums and the sorted KLD values. */
static kld_status collect(const kld_record_source *src, sample *s, kld_error *err) {
    memset(s, 0, sizeof *s);
    keyed *k = malloc((src->n ? src->n : 1) * sizeof *k);
    const size_t nd = src->n_docs ? src->n_docs : 1;
    uint32_t *dense = malloc(nd * sizeof *dense);
    s->doc_kld = calloc(nd, sizeof *s->doc_kld);
    s->doc_n = calloc(nd, sizeof *s->doc_n);
    s->doc_top1 = calloc(nd, sizeof *s->doc_top1);
    s->doc_lnr = calloc(nd, sizeof *s->doc_lnr);
    s->doc_nlnr = calloc(nd, sizeof *s->doc_nlnr);
    kld_status st = KLD_OK;
    if (!k || !dense || !s->doc_kld || !s->doc_n || !s->doc_top1 || !s->doc_lnr || !s->doc_nlnr)
        st = kld_fail(err, KLD_ERR_NOMEM, "bootstrap: out of memory");
    /* documents with >= 1 position get dense numbers */
    size_t doc = 0, i = 0;
    s->ppl = true;
    const kld_position *batch;
    size_t m;
    bool restart = true;
    while (st == KLD_OK && (st = src->next(src->user, restart, &batch, &m, err)) == KLD_OK && m > 0) {
        restart = false;
        for (size_t j = 0; j < m; j++, i++) {
            while (src->n_docs && doc + 1 < src->n_docs && src->doc_start[doc + 1] <= i) doc++;
            const kld_position *r = &batch[j];
            k[i] = (keyed){r->kld, (uint32_t)doc};
            s->doc_kld[doc] += r->kld;
            s->doc_n[doc]++;
            s->doc_top1[doc] += r->top_ref == r->top_arm;
            if (r->token >= 0) {
                const double ref = kld_position_nll_ref(r);
                if (isnan(ref) || isnan(r->nll_arm)) s->ppl = false;
                else s->doc_lnr[doc] += r->nll_arm - ref, s->doc_nlnr[doc]++;
            }
        }
    }
    if (st == KLD_OK) {
        s->n = i;
        /* renumber documents densely (empty ones are not units) */
        size_t u = 0;
        for (size_t d = 0; d < nd; d++) {
            dense[d] = (uint32_t)u;
            if (s->doc_n[d]) {
                s->doc_kld[u] = s->doc_kld[d], s->doc_n[u] = s->doc_n[d], s->doc_top1[u] = s->doc_top1[d];
                s->doc_lnr[u] = s->doc_lnr[d], s->doc_nlnr[u] = s->doc_nlnr[d];
                u++;
            }
        }
        s->n_docs = u;
        for (size_t j = 0; j < s->n; j++) k[j].doc = dense[k[j].doc];
        qsort(k, s->n, sizeof *k, cmp_keyed);
        s->kld = malloc((s->n ? s->n : 1) * sizeof *s->kld);
        s->doc = malloc((s->n ? s->n : 1) * sizeof *s->doc);
        if (!s->kld || !s->doc) st = kld_fail(err, KLD_ERR_NOMEM, "bootstrap: out of memory");
        for (size_t j = 0; st == KLD_OK && j < s->n; j++) s->kld[j] = k[j].v, s->doc[j] = k[j].doc;
    }
    free(k);
    free(dense);
    return st;
}

/* The value at rank h (0-based, fractional) of the replicate: the sorted
 * values each repeated w[doc] times, interpolated as kld_percentile_sorted
 * does. Walks on from the position and count given (ranks asked in
 * ascending order). */
static double weighted_rank(const sample *s, const uint32_t *w, double h, size_t *pos, uint64_t *seen) {
    const uint64_t i = (uint64_t)h;
    const double frac = h - (double)i;
    while (*pos < s->n && *seen + w[s->doc[*pos]] <= i) *seen += w[s->doc[(*pos)++]];
    const double a = s->kld[*pos < s->n ? *pos : s->n - 1];
    if (frac == 0) return a;
    /* the next rank: the same value while copies remain, else the next weighted one */
    size_t p = *pos;
    uint64_t seen2 = *seen;
    while (p < s->n && seen2 + w[s->doc[p]] <= i + 1) seen2 += w[s->doc[p++]];
    const double b = s->kld[p < s->n ? p : s->n - 1];
    return (1.0 - frac) * a + frac * b;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* 2.5% and 97.5% of the replicates' values (NANs excluded). */
static kld_ci interval(double *v, int n) {
    int m = 0;
    for (int i = 0; i < n; i++)
        if (!isnan(v[i])) v[m++] = v[i];
    if (m == 0) return (kld_ci){NAN, NAN};
    qsort(v, (size_t)m, sizeof *v, cmp_double);
    return (kld_ci){kld_percentile_sorted(v, (size_t)m, 0.025), kld_percentile_sorted(v, (size_t)m, 0.975)};
}

kld_status kld_bootstrap_run(const kld_record_source *src, int replicates, uint64_t seed, kld_bootstrap *out,
                             kld_error *err) {
    memset(out, 0, sizeof *out);
    out->replicates = replicates;
    out->seed = seed;
    if (replicates < 1) return kld_fail(err, KLD_ERR_ARG, "bootstrap: %d replicates", replicates);
    sample s;
    kld_status st = collect(src, &s, err);
    out->n_docs = s.n_docs;
    if (st == KLD_OK && s.n_docs < 2)
        st = kld_fail(err, KLD_ERR_ARG, "bootstrap: %zu document(s) with scored positions: nothing to resample",
                      s.n_docs);
    const int nv = KLD_BOOT_N + 2;
    double *vals = st ? NULL : malloc((size_t)replicates * nv * sizeof *vals);
    uint32_t *w = st ? NULL : malloc(s.n_docs * sizeof *w);
    if (!st && (!vals || !w)) st = kld_fail(err, KLD_ERR_NOMEM, "bootstrap: out of memory");
    uint64_t rng = seed;
    for (int r = 0; st == KLD_OK && r < replicates; r++) {
        memset(w, 0, s.n_docs * sizeof *w);
        for (size_t d = 0; d < s.n_docs; d++) w[splitmix64(&rng) % s.n_docs]++;
        double sk = 0, lnr = 0;
        uint64_t n = 0, top1 = 0, nl = 0;
        for (size_t d = 0; d < s.n_docs; d++) {
            if (!w[d]) continue;
            sk += w[d] * s.doc_kld[d], n += w[d] * s.doc_n[d], top1 += w[d] * s.doc_top1[d];
            lnr += w[d] * s.doc_lnr[d], nl += w[d] * s.doc_nlnr[d];
        }
        double *v = vals + (size_t)r * nv;
        v[KLD_BOOT_MEAN] = sk / (double)n;
        size_t pos = 0;
        uint64_t seen = 0;
        for (int q = 1; q < KLD_BOOT_N; q++)
            v[q] = weighted_rank(&s, w, FRACTIONS[q] * (double)(n - 1), &pos, &seen);
        v[KLD_BOOT_N] = (double)top1 / (double)n;
        v[KLD_BOOT_N + 1] = s.ppl && nl ? exp(lnr / (double)nl) : NAN;
    }
    if (st == KLD_OK) {
        double *col = malloc((size_t)replicates * sizeof *col);
        if (!col) st = kld_fail(err, KLD_ERR_NOMEM, "bootstrap: out of memory");
        for (int q = 0; col && q < nv; q++) {
            for (int r = 0; r < replicates; r++) col[r] = vals[(size_t)r * nv + q];
            kld_ci ci = interval(col, replicates);
            if (q < KLD_BOOT_N) out->kld[q] = ci;
            else if (q == KLD_BOOT_N) out->top1 = ci;
            else out->ppl_ratio = ci;
        }
        free(col);
    }
    free(vals);
    free(w);
    sample_free(&s);
    return st;
}

kld_status kld_bootstrap_stats(const kld_stats *st, int replicates, uint64_t seed, kld_bootstrap *out,
                               kld_error *err) {
    kld_record_source src;
    kld_stats_source(st, &src);
    return kld_bootstrap_run(&src, replicates, seed, out, err);
}

static json_t *pair(kld_ci c) {
    if (isnan(c.lo) || isnan(c.hi)) return json_null();
    return json_pack("[f, f]", c.lo, c.hi);
}

void kld_bootstrap_json(const kld_bootstrap *b, json_t *report) {
    static const char *const names[KLD_BOOT_N] = {"mean", "median", "p90", "p95", "p99", "p99_9"};
    json_t *ci = json_object();
    for (int q = 0; q < KLD_BOOT_N; q++) json_object_set_new(ci, names[q], pair(b->kld[q]));
    json_object_set_new(json_object_get(report, "kld"), "ci95", ci);
    json_object_set_new(report, "top1_agreement_ci95", pair(b->top1));
    json_object_set_new(report, "ppl_ratio_ci95", pair(b->ppl_ratio));
    json_object_set_new(report, "bootstrap",
                        json_pack("{s:i, s:I, s:s, s:I, s:s}", "replicates", b->replicates, "seed",
                                  (json_int_t)b->seed, "unit", "document (a window in stream/llamacpp chunking)",
                                  "n_units", (json_int_t)b->n_docs, "interval", "percentile, 95%"));
}

kld_status kld_bootstrap_report(json_t *report, const kld_record_source *src, int replicates, uint64_t seed,
                                kld_bootstrap *out, kld_error *err) {
    kld_bootstrap b;
    memset(&b, 0, sizeof b);
    if (out) *out = b;
    if (replicates <= 0 || src->n_docs < 2) return KLD_OK; /* nothing to resample: no intervals */
    kld_status st = kld_bootstrap_run(src, replicates, seed, &b, err);
    if (st == KLD_ERR_ARG) return KLD_OK; /* fewer than 2 documents with positions */
    if (st) return st;
    if (report) kld_bootstrap_json(&b, report);
    if (out) *out = b;
    return KLD_OK;
}
