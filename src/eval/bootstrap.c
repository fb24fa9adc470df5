/* bootstrap.c — see bootstrap.h. */
#include "eval/bootstrap.h"

#include <math.h>
#include <stdio.h>
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

/* From per-position arrays (doc: the document of each position, ascending,
 * < nd; lnr: nll_arm - nll_ref, NAN without a next token; ppl: false when a
 * reference NLL is unknown): per-document sums and the sorted KLD values,
 * documents without positions dropped. */
static kld_status sample_build(const double *kld, const uint32_t *doc, const uint8_t *top1, const double *lnr,
                               bool ppl, size_t n, size_t nd, sample *s, kld_error *err) {
    memset(s, 0, sizeof *s);
    s->ppl = ppl;
    nd = nd ? nd : 1;
    keyed *k = malloc((n ? n : 1) * sizeof *k);
    uint32_t *dense = malloc(nd * sizeof *dense);
    s->doc_kld = calloc(nd, sizeof *s->doc_kld);
    s->doc_n = calloc(nd, sizeof *s->doc_n);
    s->doc_top1 = calloc(nd, sizeof *s->doc_top1);
    s->doc_lnr = calloc(nd, sizeof *s->doc_lnr);
    s->doc_nlnr = calloc(nd, sizeof *s->doc_nlnr);
    s->kld = malloc((n ? n : 1) * sizeof *s->kld);
    s->doc = malloc((n ? n : 1) * sizeof *s->doc);
    kld_status st = KLD_OK;
    if (!k || !dense || !s->doc_kld || !s->doc_n || !s->doc_top1 || !s->doc_lnr || !s->doc_nlnr || !s->kld ||
        !s->doc)
        st = kld_fail(err, KLD_ERR_NOMEM, "bootstrap: out of memory");
    for (size_t i = 0; st == KLD_OK && i < n; i++) {
        const uint32_t d = doc[i];
        k[i] = (keyed){kld[i], d};
        s->doc_kld[d] += kld[i];
        s->doc_n[d]++;
        s->doc_top1[d] += top1[i];
        if (lnr && !isnan(lnr[i])) s->doc_lnr[d] += lnr[i], s->doc_nlnr[d]++;
    }
    if (st == KLD_OK) {
        size_t u = 0;
        for (size_t d = 0; d < nd; d++) {
            dense[d] = (uint32_t)u;
            if (s->doc_n[d]) {
                s->doc_kld[u] = s->doc_kld[d], s->doc_n[u] = s->doc_n[d], s->doc_top1[u] = s->doc_top1[d];
                s->doc_lnr[u] = s->doc_lnr[d], s->doc_nlnr[u] = s->doc_nlnr[d];
                u++;
            }
        }
        s->n = n;
        s->n_docs = u;
        for (size_t j = 0; j < n; j++) k[j].doc = dense[k[j].doc];
        qsort(k, n, sizeof *k, cmp_keyed);
        for (size_t j = 0; j < n; j++) s->kld[j] = k[j].v, s->doc[j] = k[j].doc;
    }
    free(k);
    free(dense);
    return st;
}

/* One pass over the records into the arrays sample_build takes. */
static kld_status collect(const kld_record_source *src, sample *s, kld_error *err) {
    memset(s, 0, sizeof *s);
    const size_t n = src->n;
    double *kld = malloc((n ? n : 1) * sizeof *kld), *lnr = malloc((n ? n : 1) * sizeof *lnr);
    uint32_t *doc = malloc((n ? n : 1) * sizeof *doc);
    uint8_t *top1 = malloc(n ? n : 1);
    kld_status st = kld && lnr && doc && top1 ? KLD_OK : kld_fail(err, KLD_ERR_NOMEM, "bootstrap: out of memory");
    size_t d = 0, i = 0;
    bool ppl = true;
    const kld_position *batch;
    size_t m;
    bool restart = true;
    while (st == KLD_OK && (st = src->next(src->user, restart, &batch, &m, err)) == KLD_OK && m > 0) {
        restart = false;
        for (size_t j = 0; j < m && i < n; j++, i++) {
            while (src->n_docs && d + 1 < src->n_docs && src->doc_start[d + 1] <= i) d++;
            const kld_position *r = &batch[j];
            kld[i] = r->kld, doc[i] = (uint32_t)d, top1[i] = r->top_ref == r->top_arm, lnr[i] = NAN;
            if (r->token >= 0) {
                const double ref = kld_position_nll_ref(r);
                if (isnan(ref) || isnan(r->nll_arm)) ppl = false;
                else lnr[i] = r->nll_arm - ref;
            }
        }
    }
    if (st == KLD_OK) st = sample_build(kld, doc, top1, lnr, ppl, i, src->n_docs, s, err);
    free(kld), free(lnr), free(doc), free(top1);
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

/* One resample: each of the n documents drawn with replacement; w[d] its
 * multiplicity. */
static void draw(uint32_t *w, size_t n, uint64_t *rng) {
    memset(w, 0, n * sizeof *w);
    for (size_t d = 0; d < n; d++) w[splitmix64(rng) % n]++;
}

/* A replicate's statistics into v[KLD_BOOT_N + 2]: the KLD ones, top-1
 * agreement, the PPL ratio. */
static void replicate(const sample *s, const uint32_t *w, double *v) {
    double sk = 0, lnr = 0;
    uint64_t n = 0, top1 = 0, nl = 0;
    for (size_t d = 0; d < s->n_docs; d++) {
        if (!w[d]) continue;
        sk += w[d] * s->doc_kld[d], n += w[d] * s->doc_n[d], top1 += w[d] * s->doc_top1[d];
        lnr += w[d] * s->doc_lnr[d], nl += w[d] * s->doc_nlnr[d];
    }
    v[KLD_BOOT_MEAN] = sk / (double)n;
    size_t pos = 0;
    uint64_t seen = 0;
    for (int q = 1; q < KLD_BOOT_N; q++) v[q] = weighted_rank(s, w, FRACTIONS[q] * (double)(n - 1), &pos, &seen);
    v[KLD_BOOT_N] = (double)top1 / (double)n;
    v[KLD_BOOT_N + 1] = s->ppl && nl ? exp(lnr / (double)nl) : NAN;
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
        draw(w, s.n_docs, &rng);
        replicate(&s, w, vals + (size_t)r * nv);
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

static kld_paired_ci paired_ci(double diff, double *d, int n) {
    int le = 0, ge = 0;
    for (int i = 0; i < n; i++) le += d[i] <= 0, ge += d[i] >= 0;
    double p = (2.0 * (le < ge ? le : ge) + 1) / (double)(n + 1);
    return (kld_paired_ci){diff, interval(d, n), p < 1 ? p : 1};
}

kld_status kld_bootstrap_paired(const double *kld_a, const double *kld_b, const uint8_t *top1_a,
                                const uint8_t *top1_b, const uint32_t *block, size_t n, int replicates,
                                uint64_t seed, kld_paired_bootstrap *out, kld_error *err) {
    memset(out, 0, sizeof *out);
    out->replicates = replicates;
    out->seed = seed;
    out->n = n;
    if (replicates < 1) return kld_fail(err, KLD_ERR_ARG, "bootstrap: %d replicates", replicates);
    const size_t nb = n ? (size_t)block[n - 1] + 1 : 0;
    sample a, b;
    kld_status st = sample_build(kld_a, block, top1_a, NULL, false, n, nb, &a, err);
    kld_status st2 = st ? st : sample_build(kld_b, block, top1_b, NULL, false, n, nb, &b, err);
    if (st) memset(&b, 0, sizeof b);
    st = st2;
    out->n_blocks = a.n_docs;
    if (st == KLD_OK && a.n_docs < 2)
        st = kld_fail(err, KLD_ERR_ARG, "bootstrap: %zu window(s): nothing to resample", a.n_docs);
    const int nv = KLD_BOOT_N + 2;
    double *va = st ? NULL : malloc((size_t)nv * sizeof *va), *vb = st ? NULL : malloc((size_t)nv * sizeof *vb);
    double *d = st ? NULL : malloc((size_t)replicates * 4 * sizeof *d);
    uint32_t *w = st ? NULL : malloc(a.n_docs * sizeof *w);
    if (!st && (!va || !vb || !d || !w)) st = kld_fail(err, KLD_ERR_NOMEM, "bootstrap: out of memory");
    static const int pick[4] = {KLD_BOOT_MEAN, KLD_BOOT_P99, KLD_BOOT_P99_9, KLD_BOOT_N};
    uint64_t rng = seed;
    for (int r = 0; st == KLD_OK && r < replicates; r++) {
        draw(w, a.n_docs, &rng);
        replicate(&a, w, va);
        replicate(&b, w, vb);
        for (int q = 0; q < 4; q++) d[(size_t)q * replicates + r] = va[pick[q]] - vb[pick[q]];
    }
    if (st == KLD_OK) {
        /* the sample's own differences: every block once */
        for (size_t i = 0; i < a.n_docs; i++) w[i] = 1;
        replicate(&a, w, va);
        replicate(&b, w, vb);
        kld_paired_ci *dst[4] = {&out->mean, &out->p99, &out->p99_9, &out->top1};
        for (int q = 0; q < 4; q++) *dst[q] = paired_ci(va[pick[q]] - vb[pick[q]], d + (size_t)q * replicates, replicates);
    }
    free(va), free(vb), free(d), free(w);
    sample_free(&a);
    sample_free(&b);
    return st;
}

kld_status kld_bootstrap_paired_stats(const kld_stats *a, const kld_stats *b, int replicates, uint64_t seed,
                                      kld_paired_bootstrap *out, kld_error *err) {
    memset(out, 0, sizeof *out);
    kld_record_source sa, sb;
    kld_stats_source(a, &sa);
    kld_stats_source(b, &sb);
    if (sa.n != sb.n || sa.n_docs != sb.n_docs)
        return kld_fail(err, KLD_ERR_ARG, "paired bootstrap: the runs differ (%zu positions in %zu documents vs "
                        "%zu in %zu)", sa.n, sa.n_docs, sb.n, sb.n_docs);
    const size_t n = sa.n;
    double *ka = malloc((n ? n : 1) * sizeof *ka), *kb = malloc((n ? n : 1) * sizeof *kb);
    uint8_t *ta = malloc(n ? n : 1), *tb = malloc(n ? n : 1);
    uint32_t *block = malloc((n ? n : 1) * sizeof *block);
    kld_status st = ka && kb && ta && tb && block ? KLD_OK : kld_fail(err, KLD_ERR_NOMEM, "bootstrap: out of memory");
    for (size_t i = 0, d = 0; !st && i < n; i++) {
        while (sa.n_docs && d + 1 < sa.n_docs && sa.doc_start[d + 1] <= i) d++;
        if (sa.doc_start && sb.doc_start && sa.doc_start[d] != sb.doc_start[d])
            st = kld_fail(err, KLD_ERR_ARG, "paired bootstrap: document %zu starts at position %llu in one run "
                          "and %llu in the other", d, (unsigned long long)sa.doc_start[d],
                          (unsigned long long)sb.doc_start[d]);
        block[i] = (uint32_t)d;
    }
    /* both sources walked in step, batch by batch */
    size_t ia = 0, ib = 0, ma = 0, mb = 0, ja = 0, jb = 0;
    const kld_position *ba = NULL, *bb = NULL;
    bool ra = true, rb = true;
    while (!st && (ia < n || ib < n)) {
        if (ja == ma && ia < n) {
            if ((st = sa.next(sa.user, ra, &ba, &ma, err)) || !ma) break;
            ra = false, ja = 0;
        }
        if (jb == mb && ib < n) {
            if ((st = sb.next(sb.user, rb, &bb, &mb, err)) || !mb) break;
            rb = false, jb = 0;
        }
        for (; ja < ma && jb < mb && ia < n; ja++, jb++, ia++, ib++) {
            const kld_position *x = &ba[ja], *y = &bb[jb];
            if (x->token != y->token) {
                st = kld_fail(err, KLD_ERR_ARG, "paired bootstrap: the token streams differ at position %zu "
                              "(%d vs %d)", ia, (int)x->token, (int)y->token);
                break;
            }
            ka[ia] = x->kld, kb[ia] = y->kld, ta[ia] = x->top_ref == x->top_arm, tb[ia] = y->top_ref == y->top_arm;
        }
    }
    if (!st && (ia != n || ib != n))
        st = kld_fail(err, KLD_ERR_ARG, "paired bootstrap: read %zu and %zu of %zu positions", ia, ib, n);
    if (!st) {
        /* blocks numbered densely from 0 for kld_bootstrap_paired */
        st = kld_bootstrap_paired(ka, kb, ta, tb, block, n, replicates, seed, out, err);
    }
    free(ka), free(kb), free(ta), free(tb), free(block);
    return st;
}

static bool all_tied(const kld_paired_bootstrap *b) {
    const kld_paired_ci *m = &b->mean;
    return m->diff == 0 && m->ci.lo == 0 && m->ci.hi == 0;
}

const char *kld_paired_verdict_word(const kld_paired_bootstrap *b, const char *name_a, const char *name_b) {
    if (!b->replicates) return "-";
    if (all_tied(b)) return "same";
    if (b->mean.ci.lo > 0) return name_b;
    if (b->mean.ci.hi < 0) return name_a;
    return "n.d.";
}

void kld_paired_verdict(const kld_paired_bootstrap *b, const char *name_a, const char *name_b, char *buf,
                        size_t size) {
    const kld_paired_ci *m = &b->mean;
    if (!b->replicates) {
        snprintf(buf, size, "no verdict (fewer than 2 windows)");
        return;
    }
    if (all_tied(b)) {
        snprintf(buf, size, "not distinguishable: the same KLD at every position (ΔKLD exactly 0)");
        return;
    }
    if (m->ci.lo > 0 || m->ci.hi < 0) {
        snprintf(buf, size, "%s is closer to the reference (ΔKLD mean A − B %+.4g [%+.4g, %+.4g], p = %.2g)",
                 m->diff < 0 ? name_a : name_b, m->diff, m->ci.lo, m->ci.hi, m->p);
        return;
    }
    /* the interval's half width falls as 1/sqrt(N): where it would be |diff| */
    const double half = (m->ci.hi - m->ci.lo) / 2, ratio = m->diff != 0 ? half / fabs(m->diff) : INFINITY;
    const double need = (double)b->n * ratio * ratio;
    if (isfinite(need) && need < 1e15)
        snprintf(buf, size, "not distinguishable on %zu positions (ΔKLD mean %+.4g [%+.4g, %+.4g], p = %.2g); "
                 "about %.3g positions would resolve a difference of this size", b->n, m->diff, m->ci.lo,
                 m->ci.hi, m->p, need);
    else
        snprintf(buf, size, "not distinguishable on %zu positions (ΔKLD mean %+.4g [%+.4g, %+.4g], p = %.2g)",
                 b->n, m->diff, m->ci.lo, m->ci.hi, m->p);
}

static json_t *paired_ci_json(const kld_paired_ci *v) {
    return json_pack("{s:f, s:o, s:f}", "diff", v->diff, "ci95", pair(v->ci), "p", v->p);
}

json_t *kld_paired_bootstrap_json(const kld_paired_bootstrap *b) {
    if (!b->replicates) return json_object();
    return json_pack("{s:{s:o, s:o, s:o}, s:o, s:i, s:I, s:I, s:I}", "kld", "mean", paired_ci_json(&b->mean), "p99",
                     paired_ci_json(&b->p99), "p99_9", paired_ci_json(&b->p99_9), "top1", paired_ci_json(&b->top1),
                     "replicates", b->replicates, "seed", (json_int_t)b->seed, "n_positions", (json_int_t)b->n,
                     "n_blocks", (json_int_t)b->n_blocks);
}
