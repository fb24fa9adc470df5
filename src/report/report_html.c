/* report_html.c — the HTML report page: the document skeleton, the summary
 * and comparison tables (rendered here, so the numbers read without
 * script), each run's configuration, and the inlined Chart.js, chart data
 * and page script. Written to a temporary file and renamed into place. */
#include "report/report_html.h"

#include "common/common.h"
#include "report/report_html_cap.h"
#include "report/report_html_diff.h"
#include "report/report_impl.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

extern const unsigned char kld_html_chartjs[], kld_html_script[], kld_html_style[];
extern const size_t kld_html_chartjs_len, kld_html_script_len, kld_html_style_len;

void kld_html_esc(FILE *f, const char *s) {
    for (; s && *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

/* A table cell with the raw value (17 digits) in data-value and, when se is
 * given, its error in data-se; the text shows digits significant digits.
 * With the run's 95% bootstrap interval (ci_path into its report, NULL:
 * none) the text is "value [lo, hi]" (the se in the tooltip) and the ends
 * go to data-ci-lo and data-ci-hi. */
static void num_ci_cell(FILE *f, int64_t run, const char *key, double v, const char *se_key, double se,
                        int digits, const json_t *report, const char *ci_path) {
    double lo = NAN, hi = NAN;
    if (ci_path) kld_report_ci_at(report, ci_path, &lo, &hi);
    const bool ci = isfinite(lo) && isfinite(hi) && isfinite(v);
    fprintf(f, "<td class=\"num\" data-run=\"%lld\" data-key=\"%s\"", (long long)run, key);
    if (isfinite(v)) fprintf(f, " data-value=\"%.17g\"", v);
    if (se_key && isfinite(se)) fprintf(f, " data-se-key=\"%s\" data-se=\"%.17g\"", se_key, se);
    if (ci) fprintf(f, " data-ci-lo=\"%.17g\" data-ci-hi=\"%.17g\"", lo, hi);
    if (ci && se_key && isfinite(se)) fprintf(f, " title=\"± %.2g (one standard error)\"", se);
    fputc('>', f);
    if (!isfinite(v)) fputs("–", f);
    else if (ci) fprintf(f, "%.*g <span class=\"ci\">[%.*g, %.*g]</span>", digits, v, digits - 1, lo, digits - 1, hi);
    else if (se_key && isfinite(se)) fprintf(f, "%.*g <span class=\"se\">± %.2g</span>", digits, v, se);
    else fprintf(f, "%.*g", digits, v);
    fputs("</td>", f);
}

static void num_cell(FILE *f, int64_t run, const char *key, double v, const char *se_key, double se,
                     int digits) {
    num_ci_cell(f, run, key, v, se_key, se, digits, NULL, NULL);
}

static bool same_reference(const kld_db_row *a, const kld_db_row *b) {
    if (a->ref.sha256 && b->ref.sha256) return !strcmp(a->ref.sha256, b->ref.sha256);
    return a->ref.path && b->ref.path && !strcmp(a->ref.path, b->ref.path);
}

/* "reference f32.gguf", or "3 references: f32.gguf, bf16.gguf, …" when the
 * runs do not share one: the header never names one reference for all. */
static void references(FILE *f, kld_db_row *const *rows, size_t n) {
    size_t n_distinct = 0, shown = 0;
    for (size_t i = 0; i < n; i++) {
        size_t j = 0;
        while (j < i && !same_reference(rows[i], rows[j])) j++;
        if (j == i) n_distinct++;
    }
    if (n_distinct <= 1) {
        fputs("reference ", f);
        kld_html_esc(f, kld_base_name(rows[0]->ref.path));
        return;
    }
    fprintf(f, "%zu references: ", n_distinct);
    for (size_t i = 0; i < n && shown < 4; i++) {
        size_t j = 0;
        while (j < i && !same_reference(rows[i], rows[j])) j++;
        if (j < i) continue;
        fputs(shown++ ? ", " : "", f);
        kld_html_esc(f, kld_base_name(rows[i]->ref.path));
    }
    if (n_distinct > shown) fputs(", …", f);
}

static void summary_table(FILE *f, kld_db_row *const *rows, size_t n) {
    fputs("<table class=\"summary\" id=\"summary-table\"><thead><tr><th>run</th><th>label</th>"
          "<th>arm</th><th>size</th><th>bits / weight</th><th>positions</th><th>KLD mean (nats)</th>"
          "<th>KLD median</th><th>KLD p99</th><th>KLD p99.9</th><th>top-1 agreement</th><th>PPL ratio</th>"
          "<th>mode</th></tr></thead><tbody>\n", f);
    for (size_t i = 0; i < n; i++) {
        const kld_db_row *r = rows[i];
        const kld_summary *s = &r->summary;
        char size[32] = "–";
        if (r->arm.bytes >= 0) kld_format_bytes((uint64_t)r->arm.bytes, size, sizeof size);
        fprintf(f, "<tr><td class=\"num\">%lld</td><td>", (long long)r->id);
        kld_html_esc(f, r->label ? r->label : "–");
        if (r->partial) fputs(" <span class=\"tag\">partial</span>", f);
        fputs("</td><td class=\"file\" title=\"", f);
        kld_html_esc(f, r->arm.path);
        fputs("\">", f);
        kld_html_esc(f, kld_base_name(r->arm.path));
        fprintf(f, "</td><td class=\"num\" data-run=\"%lld\" data-key=\"arm_bytes\"", (long long)r->id);
        if (r->arm.bytes >= 0) fprintf(f, " data-value=\"%lld\"", (long long)r->arm.bytes);
        fprintf(f, ">%s</td>", size);
        num_cell(f, r->id, "arm_bpw", r->arm.bpw, NULL, NAN, 5);
        num_cell(f, r->id, "n_positions", r->has_summary ? (double)s->n_positions : NAN, NULL, NAN, 12);
        const json_t *j = r->report;
        num_ci_cell(f, r->id, "kld_mean", s->kld.mean, "kld_se", s->kld.se, 5, j, "kld.ci95.mean");
        num_ci_cell(f, r->id, "kld_median", s->kld.median, NULL, NAN, 5, j, "kld.ci95.median");
        num_ci_cell(f, r->id, "kld_p99", s->kld.pct[8], NULL, NAN, 5, j, "kld.ci95.p99");
        num_ci_cell(f, r->id, "kld_p99_9", s->kld.pct[9], NULL, NAN, 5, j, "kld.ci95.p99_9");
        num_ci_cell(f, r->id, "top1_agreement", s->top1_agreement, "top1_se", s->top1_se, 5, j,
                    "top1_agreement_ci95");
        num_ci_cell(f, r->id, "ppl_ratio", s->ppl_ratio, "ppl_ratio_se", s->ppl_ratio_se, 6, j, "ppl_ratio_ci95");
        fputs("<td class=\"file\">", f);
        kld_html_esc(f, r->mode ? r->mode : "–");
        fputs("</td></tr>\n", f);
    }
    fputs("</tbody></table>\n", f);
}

/* Every statistic with a bootstrap interval, one row per run that has them. */
static bool intervals_table(FILE *f, kld_db_row *const *rows, size_t n) {
    static const struct { const char *head, *key, *ci; int pct; } cols[] = {
        {"KLD mean", "kld_mean", "kld.ci95.mean", -1}, {"KLD median", "kld_median", "kld.ci95.median", -2},
        {"KLD p90", "kld_p90", "kld.ci95.p90", 6},       {"KLD p95", "kld_p95", "kld.ci95.p95", 7},
        {"KLD p99", "kld_p99", "kld.ci95.p99", 8},       {"KLD p99.9", "kld_p99_9", "kld.ci95.p99_9", 9},
        {"top-1 agreement", "top1_agreement", "top1_agreement_ci95", -3},
        {"PPL ratio", "ppl_ratio", "ppl_ratio_ci95", -4}};
    bool any = false;
    for (size_t i = 0; i < n; i++) any = any || json_object_get(rows[i]->report, "bootstrap");
    if (!any) return false;
    fputs("<table class=\"summary\" id=\"ci-table\"><thead><tr><th>run</th><th>bootstrap</th>", f);
    for (size_t c = 0; c < sizeof cols / sizeof cols[0]; c++) fprintf(f, "<th>%s</th>", cols[c].head);
    fputs("</tr></thead><tbody>\n", f);
    for (size_t i = 0; i < n; i++) {
        const kld_db_row *r = rows[i];
        const json_t *b = json_object_get(r->report, "bootstrap");
        if (!b) continue;
        const kld_summary *s = &r->summary;
        fprintf(f, "<tr data-run=\"%lld\"><td class=\"num\">%lld</td><td class=\"num\">%lld × %lld docs</td>",
                (long long)r->id, (long long)r->id, (long long)json_integer_value(json_object_get(b, "replicates")),
                (long long)json_integer_value(json_object_get(b, "n_units")));
        for (size_t c = 0; c < sizeof cols / sizeof cols[0]; c++) {
            const int k = cols[c].pct;
            double v = k >= 0 ? s->kld.pct[k] : k == -1 ? s->kld.mean : k == -2 ? s->kld.median
                       : k == -3 ? s->top1_agreement : s->ppl_ratio;
            num_ci_cell(f, r->id, cols[c].key, v, NULL, NAN, 5, r->report, cols[c].ci);
        }
        fputs("</tr>\n", f);
    }
    fputs("</tbody></table>\n", f);
    return true;
}

static kld_status comparison_table(FILE *f, kld_db *db, kld_db_row *const *rows, size_t n,
                                   kld_error *err) {
    fputs("<table class=\"summary\" id=\"compare-table\"><thead><tr><th>A</th><th>B</th>"
          "<th>pairing</th><th>ΔKLD (A − B)</th><th>A closer</th><th>B closer</th><th>ties</th>"
          "<th>sign test p</th><th>Δtop-1</th><th>Δln PPL</th><th>ΔKLD mean, 95% bootstrap</th>"
          "<th>ΔKLD p99.9, 95% bootstrap</th><th>bootstrap p</th><th>verdict</th></tr></thead><tbody>\n", f);
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++) {
            kld_db_comparison c;
            kld_status st = kld_db_compare(db, rows[i], rows[j], &c, err);
            if (st) return st;
            long long a = (long long)rows[i]->id, b = (long long)rows[j]->id;
            fprintf(f, "<tr data-pair=\"%lld-%lld\"><td class=\"num\">%lld</td><td class=\"num\">%lld</td>", a, b, a, b);
            if (!c.pairable) {
                fputs("<td class=\"why\">unpaired: ", f);
                kld_html_esc(f, c.why_not);
                fputs("</td>", f);
                fprintf(f, "<td class=\"num\" data-key=\"u_kld\" data-value=\"%.17g\">%+.4g <span class=\"se\">± %.2g</span></td>"
                           "<td colspan=\"10\" class=\"why\">(difference of the means, error sqrt(se<sub>A</sub>² + se<sub>B</sub>²))</td></tr>\n",
                        c.u_kld, c.u_kld, c.u_kld_se);
                continue;
            }
            double N = (double)c.d_kld.n;
            char p_text[32];
            /* below the smallest double: say so rather than print 0 */
            if (c.sign_p > 0) snprintf(p_text, sizeof p_text, "%.3g", c.sign_p);
            else snprintf(p_text, sizeof p_text, "&lt; 1e-300");
            fprintf(f, "<td>paired, %llu positions</td>"
                       "<td class=\"num\" data-key=\"d_kld\" data-value=\"%.17g\" data-se=\"%.17g\">%+.4g <span class=\"se\">± %.2g</span></td>"
                       "<td class=\"num\" data-key=\"a_closer\" data-value=\"%llu\">%.1f %%</td>"
                       "<td class=\"num\">%.1f %%</td><td class=\"num\">%llu</td>"
                       "<td class=\"num\" data-key=\"sign_p\" data-value=\"%.17g\">%s</td>"
                       "<td class=\"num\">%+.4g <span class=\"se\">± %.2g</span></td>"
                       "<td class=\"num\">%+.4g <span class=\"se\">± %.2g</span></td>",
                    (unsigned long long)c.d_kld.n, c.d_kld.mean, c.d_kld.se, c.d_kld.mean, c.d_kld.se,
                    (unsigned long long)c.a_closer, 100.0 * (double)c.a_closer / N,
                    100.0 * (double)c.b_closer / N, (unsigned long long)c.ties, c.sign_p, p_text,
                    c.d_top1.mean, c.d_top1.se, c.d_nll.mean, c.d_nll.se);
            if (c.boot.replicates) {
                const kld_paired_ci *m = &c.boot.mean, *t = &c.boot.p99_9;
                fprintf(f, "<td class=\"num\" data-key=\"boot_d_kld\" data-value=\"%.17g\" data-ci-lo=\"%.17g\" "
                           "data-ci-hi=\"%.17g\">%+.4g <span class=\"ci\">[%+.3g, %+.3g]</span></td>"
                           "<td class=\"num\" data-key=\"boot_d_kld_p99_9\" data-value=\"%.17g\" data-ci-lo=\"%.17g\" "
                           "data-ci-hi=\"%.17g\">%+.4g <span class=\"ci\">[%+.3g, %+.3g]</span></td>"
                           "<td class=\"num\" data-key=\"boot_p\" data-value=\"%.17g\">%.2g</td>",
                        m->diff, m->ci.lo, m->ci.hi, m->diff, m->ci.lo, m->ci.hi, t->diff, t->ci.lo, t->ci.hi,
                        t->diff, t->ci.lo, t->ci.hi, m->p, m->p);
            } else {
                fputs("<td class=\"why\" colspan=\"3\">no bootstrap (fewer than 2 windows)</td>", f);
            }
            char verdict[512];
            kld_db_verdict(&c, a, b, verdict, sizeof verdict);
            fprintf(f, "<td class=\"verdict\" data-key=\"verdict\" data-word=\"%s\">",
                    kld_paired_verdict_word(&c.boot, "A", "B"));
            kld_html_esc(f, verdict);
            fputs("</td></tr>\n", f);
        }
    fputs("</tbody></table>\n", f);
    return KLD_OK;
}

static void config_section(FILE *f, kld_db_row *const *rows, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const kld_db_row *r = rows[i];
        const json_t *cfg = json_object_get(r->report, "config");
        char *t = cfg ? json_dumps(cfg, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
        fprintf(f, "<details%s><summary>run %lld: ", i == 0 ? " open" : "", (long long)r->id);
        kld_html_esc(f, r->label ? r->label : kld_base_name(r->arm.path));
        fputs(" <span class=\"meta\">", f);
        kld_html_esc(f, r->created);
        fputs(" · kldeval ", f);
        kld_html_esc(f, r->version);
        fputs(" · ", f);
        kld_html_esc(f, r->cpu_model ? r->cpu_model : "unknown CPU");
        fprintf(f, ", %lld threads", (long long)r->threads);
        if (isfinite(r->wall_s)) fprintf(f, " · %.3g s", r->wall_s);
        fputs("</span></summary><pre>", f);
        kld_html_esc(f, t ? t : "(no configuration recorded)");
        fputs("</pre></details>\n", f);
        free(t);
    }
}

/* The chart sections: a canvas per chart, in a fixed-height box. */
static void chart(FILE *f, const char *id, const char *title, const char *caption) {
    fprintf(f, "<figure class=\"card\"><h3>%s</h3><div class=\"chart\"><canvas id=\"%s\" "
               "class=\"kld-chart\"></canvas></div><figcaption>%s</figcaption></figure>\n",
            title, id, caption);
}

static void charts(FILE *f, bool sweep, bool kv) {
    fputs("<section><h2>Distribution of KLD</h2><div class=\"grid\">\n", f);
    chart(f, "chart-hist", "Histogram (log axis)",
          "Share of positions per log-spaced KLD bin; positions with KLD exactly 0 are not drawn.");
    chart(f, "chart-cdf", "Cumulative distribution",
          "Share of positions with KLD at most x (drawn through the percentiles when a run kept no "
          "per-position values).");
    fputs("</div></section>\n<section><h2>Where the arms differ</h2><div class=\"grid\">\n", f);
    chart(f, "chart-pos", "KLD by context position", "Mean KLD per position bucket ± one standard error.");
    chart(f, "chart-conf", "KLD by the reference's confidence",
          "Mean KLD by the reference's largest probability ± one standard error.");
    chart(f, "chart-top1", "Top-1 agreement", "Share of positions where both argmaxes agree; bars: the 95% bootstrap interval when the run kept one, else ± one standard error.");
    chart(f, "chart-ppl", "PPL ratio", "PPL(arm) / PPL(reference); bars: the 95% bootstrap interval when the run kept one, else ± one standard error; 1 is no change.");
    fputs("</div></section>\n<section><h2>Choosing an arm</h2><div class=\"grid\">\n", f);
    chart(f, "chart-size", "Size against mean KLD",
          "Each arm's file size and mean KLD (log axis), bars: its 95% bootstrap interval (else ± one standard error): down and left is better.");
    chart(f, "chart-rank", sweep ? "The sweep's groups ranked by mean KLD" : "Arms ranked by mean KLD",
          "Mean KLD, bars: its 95% bootstrap interval (else ± one standard error), lowest first.");
    if (kv)
        chart(f, "chart-kvbits", "KV cache: quality against bits per cached value",
              "Mean KLD (log axis), bars: its 95% bootstrap interval (else ± one standard error), against the cache's bits per cached value "
              "(bytes per token · 8 / values per token, scales, biases and norms included), one "
              "series per scheme family: llama.cpp's block types, MLX groups, the rotated quantizer.");
    fputs("</div></section>\n", f);
}

/* The vendored library without its trailing sourceMappingURL comment (the
 * map is not shipped, and a browser's tools would try to fetch it). */
static size_t chartjs_len(void) {
    static const char marker[] = "//# sourceMappingURL=";
    size_t n = kld_html_chartjs_len, m = sizeof marker - 1;
    for (size_t i = n > m ? n - m : 0; i-- > 0;)
        if (kld_html_chartjs[i] == '\n' && i + 1 + m <= n && !memcmp(kld_html_chartjs + i + 1, marker, m))
            return i + 1;
    return n;
}

/* kl: the KL runs, cap: the capability runs, each in the given order. */
/* Each run's strata (kl --strata): positions, mean KLD with its interval,
 * median, p99 and top-1 per stratum; false when no run has strata. */
static bool strata_table(FILE *f, kld_db_row *const *rows, size_t n) {
    bool any = false;
    for (size_t i = 0; i < n; i++) any = any || json_object_size(json_object_get(rows[i]->report, "strata"));
    if (!any) return false;
    fputs("<table class=\"summary\" id=\"strata-table\"><thead><tr><th>run</th><th>stratum</th><th>positions</th>"
          "<th>KLD mean</th><th>KLD median</th><th>KLD p99</th><th>top-1 agreement</th></tr></thead><tbody>\n", f);
    for (size_t i = 0; i < n; i++) {
        const kld_db_row *r = rows[i];
        const json_t *only = json_object_get(json_object_get(r->report, "config"), "score_only");
        const char *name;
        const json_t *st;
        json_object_foreach(json_object_get(r->report, "strata"), name, st) {
            const json_t *k = json_object_get(st, "kld"); /* none for a stratum without positions */
            fprintf(f, "<tr data-run=\"%lld\" data-stratum=\"", (long long)r->id);
            kld_html_esc(f, name);
            fprintf(f, "\"><td class=\"num\">%lld</td><td>", (long long)r->id);
            kld_html_esc(f, name);
            if (only && !strcmp(json_string_value(only), name)) fputs(" (scored alone)", f);
            fprintf(f, "</td><td class=\"num\">%lld</td>", (long long)json_integer_value(json_object_get(st, "n_positions")));
            num_ci_cell(f, r->id, "kld_mean", k ? json_number_value(json_object_get(k, "mean")) : NAN, "kld_se",
                        k ? json_number_value(json_object_get(k, "stderr")) : NAN, 5, st, "kld.ci95.mean");
            num_cell(f, r->id, "kld_median", k ? json_number_value(json_object_get(k, "median")) : NAN, NULL, NAN, 5);
            num_cell(f, r->id, "kld_p99", k ? json_number_value(json_object_get(k, "p99")) : NAN, NULL, NAN, 5);
            num_cell(f, r->id, "top1", k ? json_number_value(json_object_get(st, "top1_agreement")) : NAN, NULL, NAN, 5);
            fputs("</tr>\n", f);
        }
    }
    fputs("</tbody></table>\n", f);
    return true;
}

static kld_status write_page(FILE *f, kld_db *db, kld_db_row *const *rows, size_t n, kld_db_row **kl,
                             size_t n_kl, kld_db_row **cap, size_t n_cap, kld_error *err) {
    json_t *data = kld_report_html_data(db, kl, n_kl, err);
    if (!data) return err->status ? err->status : KLD_ERR_NOMEM;
    if (n_cap && json_object_set_new(data, "cap", kld_report_html_cap_data(cap, n_cap)) != 0) {
        json_decref(data);
        return kld_fail(err, KLD_ERR_NOMEM, "out of memory for the chart data");
    }
    json_t *diff = kld_report_html_diff_data(kl, n_kl);
    if (diff && json_object_set_new(data, "diff", diff) != 0) {
        json_decref(data);
        return kld_fail(err, KLD_ERR_NOMEM, "out of memory for the chart data");
    }
    bool sweep = json_is_true(json_object_get(data, "sweep"));
    /* the KV chart: a sweep with two drawable arms, one with a typed cache */
    int n_kv = 0;
    size_t ri;
    json_t *run;
    bool kv_typed = false;
    json_array_foreach(json_object_get(data, "runs"), ri, run) {
        const char *fam = json_string_value(json_object_get(run, "kv_family"));
        n_kv += fam && json_real_value(json_object_get(run, "kld_mean")) > 0;
        kv_typed = kv_typed || (fam && strcmp(fam, "f32") != 0);
    }
    bool kv_chart = sweep && kv_typed && n_kv >= 2;
    /* JSON_ESCAPE_SLASH: "</script>" cannot occur inside the data block */
    char *js = json_dumps(data, JSON_COMPACT | JSON_ESCAPE_SLASH | JSON_REAL_PRECISION(10));
    json_decref(data);
    if (!js) return kld_fail(err, KLD_ERR_NOMEM, "out of memory for the chart data");
    char when[32];
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", &tm);
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
          "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
          "script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:\">\n"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>kldeval report: ", f);
    for (size_t i = 0; i < n; i++) {
        fputs(i ? ", " : "", f);
        kld_html_esc(f, rows[i]->label ? rows[i]->label : kld_base_name(rows[i]->arm.path));
    }
    fputs("</title>\n<style>\n", f);
    fwrite(kld_html_style, 1, kld_html_style_len, f);
    fputs("</style></head><body>\n<header><h1>kldeval report</h1><p class=\"meta\">", f);
    fprintf(f, "%zu run%s · ", n, n == 1 ? "" : "s");
    references(f, rows, n);
    fprintf(f, " · generated %s by kldeval %s from ", when, kld_version());
    kld_html_esc(f, kld_db_path(db));
    fputs("</p></header>\n<main>\n", f);
    if (n_kl) {
        fputs("<section><h2>Summary</h2>\n", f);
        summary_table(f, kl, n_kl);
        fputs("<p class=\"note\">[lo, hi]: the 95% interval of a seeded block bootstrap over documents "
              "(windows in stream and llamacpp chunking), when the run kept one (kl --bootstrap N); "
              "otherwise ± one standard error of the mean: sqrt(var/(N−1)), var the population "
              "variance. KLD = KL(reference ‖ arm) per position, in nats.</p>\n", f);
        if (intervals_table(f, kl, n_kl))
            fputs("<p class=\"note\">Every statistic with a bootstrap interval: value [2.5%, 97.5% of the "
                  "resampled values]; resamples of the run's documents.</p>\n", f);
        if (strata_table(f, kl, n_kl))
            fputs("<p class=\"note\">Strata (kl --strata): the positions whose next token's text matches "
                  "the stratum's regex, or a control token (special), or lies in a turn of that role "
                  "(role:…); each with the statistics of those positions alone.</p>\n", f);
        fputs("</section>\n", f);
        charts(f, sweep, kv_chart);
        kld_report_html_diff_section(f, kl, n_kl);
    }
    if (n_cap) kld_report_html_cap_section(f, cap, n_cap);
    kld_status st = KLD_OK;
    if (n_kl > 1) {
        fputs("<section><h2>Paired comparisons</h2>\n", f);
        st = comparison_table(f, db, kl, n_kl, err);
        fputs("<p class=\"note\">Runs that share the corpus, chunking, ctx, reference and token stream are "
              "compared per position: d = KLD(A) − KLD(B) ± the paired standard error; “A closer” is "
              "the share of positions where A's KLD is lower; the sign test is two-sided over the "
              "untied positions. The paired bootstrap resamples the shared windows (1000 resamples, "
              "seed 0) and gives A − B with its 95% interval and a two-sided p; the verdict is "
              "`kldeval runs compare`'s.</p></section>\n", f);
    }
    fputs("<section><h2>Configuration</h2>\n", f);
    config_section(f, rows, n);
    fputs("</section>\n</main>\n<script type=\"application/json\" id=\"kld-data\">", f);
    fputs(js, f);
    free(js);
    fputs("</script>\n<script>\n", f);
    fwrite(kld_html_chartjs, 1, chartjs_len(), f);
    fputs("\n</script>\n<script>\n", f);
    fwrite(kld_html_script, 1, kld_html_script_len, f);
    fputs("</script>\n</body></html>\n", f);
    return st;
}

kld_status kld_report_html_write(kld_db *db, const int64_t *ids, size_t n_ids, const char *out_path,
                                 kld_error *err) {
    if (!n_ids) return kld_fail(err, KLD_ERR_ARG, "%s: no runs to report", out_path);
    kld_db_row **rows = calloc(n_ids, sizeof *rows);
    if (!rows) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    kld_status st = KLD_OK;
    for (size_t i = 0; i < n_ids && !st; i++) {
        st = kld_db_get(db, ids[i], &rows[i], err);
        if (!st && !rows[i]->has_summary && !rows[i]->cap.present)
            st = kld_fail(err, KLD_ERR_ARG, "run %lld in %s has no statistics (begun, never completed)",
                          (long long)ids[i], kld_db_path(db));
    }
    size_t plen = strlen(out_path) + 32;
    char *tmp = st ? NULL : malloc(plen);
    FILE *f = NULL;
    if (!st && !tmp) st = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    if (!st) {
        snprintf(tmp, plen, "%s.tmp.%ld", out_path, (long)getpid());
        if (!(f = fopen(tmp, "w")))
            st = kld_fail(err, KLD_ERR_IO, "%s: cannot write: %s", tmp, strerror(errno));
    }
    kld_db_row **kl = st ? NULL : calloc(2 * n_ids, sizeof *kl), **cap = kl ? kl + n_ids : NULL;
    size_t n_kl = 0, n_cap = 0;
    if (!st && !kl) {
        fclose(f);
        remove(tmp);
        st = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; !st && i < n_ids; i++) {
        if (rows[i]->cap.present) cap[n_cap++] = rows[i];
        else kl[n_kl++] = rows[i];
    }
    if (!st) {
        st = write_page(f, db, rows, n_ids, kl, n_kl, cap, n_cap, err);
        errno = 0;
        bool bad = ferror(f) != 0;
        if (fflush(f) != 0 || fsync(fileno(f)) != 0) bad = true;
        if (fclose(f) != 0) bad = true;
        if (!st && bad) st = kld_fail(err, KLD_ERR_IO, "%s: write failed: %s", tmp, errno ? strerror(errno) : "?");
        if (!st && rename(tmp, out_path) != 0)
            st = kld_fail(err, KLD_ERR_IO, "%s: cannot rename into place: %s", out_path, strerror(errno));
        if (st) remove(tmp);
    }
    free(tmp);
    free(kl);
    for (size_t i = 0; i < n_ids; i++) kld_db_row_free(rows[i]);
    free(rows);
    return st;
}
