/* report_strata.c — each stratum's statistics in a kl report (JSON
 * "strata", a text table): the summary of the records whose mask holds the
 * stratum's bit, with its bootstrap intervals. The names come from the
 * report's config, so kl, merge and the library report them alike. */
#include "eval/bootstrap.h"
#include "eval/strata.h"
#include "report/report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The records of src with bit in their mask, as a source of their own:
 * documents keep their numbering (one without such records is empty). */
typedef struct filtered {
    const kld_record_source *src;
    uint16_t bit;
    kld_position *buf;
    size_t cap;
} filtered;

static kld_status filtered_next(void *user, bool restart, const kld_position **batch, size_t *m,
                                kld_error *err) {
    filtered *f = user;
    *m = 0;
    for (bool first = restart;; first = false) {
        const kld_position *b;
        size_t n;
        kld_status st = f->src->next(f->src->user, first, &b, &n, err);
        if (st || n == 0) return st;
        if (n > f->cap) {
            kld_position *g = realloc(f->buf, n * sizeof *g);
            if (!g) return kld_fail(err, KLD_ERR_NOMEM, "out of memory for a stratum");
            f->buf = g;
            f->cap = n;
        }
        for (size_t i = 0; i < n; i++)
            if (b[i].strata & f->bit) f->buf[(*m)++] = b[i];
        if (*m) {
            *batch = f->buf;
            return KLD_OK;
        }
    }
}

/* One pass: how many records the stratum has, where each document's begin. */
static kld_status filtered_source(filtered *f, kld_record_source *out, uint64_t **doc_start, kld_error *err) {
    *doc_start = calloc(f->src->n_docs ? f->src->n_docs : 1, sizeof **doc_start);
    if (!*doc_start) return kld_fail(err, KLD_ERR_NOMEM, "out of memory for a stratum");
    size_t i = 0, kept = 0, d = 0;
    const kld_position *b;
    size_t n;
    for (bool restart = true;; restart = false) {
        kld_status st = f->src->next(f->src->user, restart, &b, &n, err);
        if (st) return st;
        if (n == 0) break;
        for (size_t j = 0; j < n; j++, i++) {
            while (d < f->src->n_docs && f->src->doc_start[d] <= i) (*doc_start)[d++] = kept;
            kept += (b[j].strata & f->bit) != 0;
        }
    }
    while (d < f->src->n_docs) (*doc_start)[d++] = kept;
    *out = (kld_record_source){f, kept, f->src->topk, *doc_start, f->src->n_docs, filtered_next};
    return KLD_OK;
}

static kld_status one_stratum(json_t *strata, const char *name, uint16_t bit, const kld_record_source *src,
                              int replicates, uint64_t seed, kld_error *err) {
    filtered f = {src, bit, NULL, 0};
    kld_record_source fs;
    uint64_t *doc_start = NULL;
    kld_status st = filtered_source(&f, &fs, &doc_start, err);
    json_t *o = NULL;
    if (!st && fs.n == 0) {
        o = json_pack("{s:i}", "n_positions", 0);
    } else if (!st) {
        kld_summary sum;
        st = kld_summary_from_source(&fs, &sum, err);
        if (!st) o = kld_report_summary_json(&sum);
        if (!st && o) st = kld_bootstrap_report(o, &fs, replicates, seed, NULL, err);
    }
    if (!st && !o) st = kld_fail(err, KLD_ERR_NOMEM, "out of memory for the strata report");
    if (!st) json_object_set_new(strata, name, o);
    else json_decref(o);
    free(f.buf);
    free(doc_start);
    return st;
}

kld_status kld_strata_report(json_t *report, const kld_record_source *src, int replicates, uint64_t seed,
                             kld_error *err) {
    const json_t *names = json_object_get(json_object_get(report, "config"), "strata");
    if (!json_array_size(names)) return KLD_OK;
    json_t *strata = json_object();
    if (!strata || json_object_set_new(report, "strata", strata))
        return kld_fail(err, KLD_ERR_NOMEM, "out of memory for the strata report");
    for (size_t i = 0; i < json_array_size(names) && i < KLD_STRATA_MAX; i++) {
        kld_status st = one_stratum(strata, json_string_value(json_array_get(names, i)), (uint16_t)(1u << i), src,
                                    replicates, seed, err);
        if (st) return st;
    }
    return KLD_OK;
}

static double num(const json_t *o, const char *a, const char *b) {
    const json_t *v = json_object_get(o, a);
    if (b) v = json_object_get(v, b);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* "value [lo, hi]" of the mean's interval, or the value alone. */
static void mean_ci(FILE *f, const json_t *s) {
    const json_t *ci = json_object_get(json_object_get(json_object_get(s, "kld"), "ci95"), "mean");
    double m = num(s, "kld", "mean");
    if (json_array_size(ci) == 2)
        fprintf(f, " %11.5g [%.4g, %.4g]", m, json_number_value(json_array_get(ci, 0)),
                json_number_value(json_array_get(ci, 1)));
    else
        fprintf(f, " %11.5g ± %-13.4g", m, num(s, "kld", "stderr"));
}

void kld_strata_report_text(FILE *f, const json_t *report) {
    const json_t *strata = json_object_get(report, "strata");
    if (!json_object_size(strata)) return;
    const json_t *only = json_object_get(json_object_get(report, "config"), "score_only");
    fprintf(f, "\n====== KLD by stratum of the next token%s%s%s ======\n", only ? " (scored only: " : "",
            only ? json_string_value(only) : "", only ? ")" : "");
    fprintf(f, "%-18s %10s %-30s %11s %11s %9s\n", "stratum", "positions", " mean KLD [95% CI]", "median",
            "p99", "top-1");
    const char *name;
    const json_t *s;
    json_object_foreach((json_t *)strata, name, s) {
        double n = num(s, "n_positions", NULL);
        fprintf(f, "%-18s %10.0f", name, n);
        if (n > 0) {
            mean_ci(f, s);
            fprintf(f, " %11.5g %11.5g %8.3f%%\n", num(s, "kld", "median"), num(s, "kld", "p99"),
                    100.0 * num(s, "top1_agreement", NULL));
        } else {
            fputc('\n', f);
        }
    }
}
