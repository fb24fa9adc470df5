/* report_html_diff.c — the `kldeval diff` section of the HTML report (runs
 * whose report keeps the diff table under "diff", see docs/diff.md): per
 * run a line chart of SQNR by layer, one line per site (drawn by
 * report_html.js from kld_report_html_diff_data; +inf SQNR sits on the
 * chart's top edge, marked), a table of each layer's SQNR per site with
 * the worst layer flagged, and with --matrices a layer × matrix-class heat
 * map of rel_err_own_input rendered here as a table with background
 * colours (readable without script). Cells carry data-run, data-key and
 * data-value (17 digits) so that a test can compare them with the
 * database's export. */
#include "report/report_html_diff.h"
#include "report/report_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const sites[] = {"mixer", "ffn", "resid"};
enum { N_SITES = 3, MAX_CLASSES = 48 };

static const json_t *diff_of(const kld_db_row *r) {
    const json_t *d = json_object_get(r->report, "diff");
    return json_is_object(d) && json_is_array(json_object_get(d, "layers")) ? d : NULL;
}

static double num(const json_t *o, const char *k) {
    const json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static int site_index(const char *s) {
    for (int i = 0; s && i < N_SITES; i++)
        if (!strcmp(s, sites[i])) return i;
    return -1;
}

static long long n_layer_of(const json_t *d) {
    long long n = json_integer_value(json_object_get(d, "n_layer"));
    size_t i;
    const json_t *e;
    json_array_foreach(json_object_get(d, "layers"), i, e) {
        long long l = json_integer_value(json_object_get(e, "layer"));
        if (l + 1 > n) n = l + 1;
    }
    return n < 0 ? 0 : n > 100000 ? 100000 : n;
}

/* "blk.12.attn_q.weight" -> layer 12, class "attn_q"; names outside a
 * block ("output.weight") -> layer -1, class "output". */
static long long matrix_class(const char *name, char *cls, size_t cap) {
    long long layer = -1;
    const char *s = name ? name : "";
    if (!strncmp(s, "blk.", 4)) {
        char *end;
        long long l = strtoll(s + 4, &end, 10);
        if (end != s + 4 && *end == '.') {
            layer = l;
            s = end + 1;
        }
    }
    snprintf(cls, cap, "%s", s);
    size_t n = strlen(cls);
    if (n > 7 && !strcmp(cls + n - 7, ".weight")) cls[n - 7] = '\0';
    return layer;
}

json_t *kld_report_html_diff_data(kld_db_row *const *rows, size_t n) {
    json_t *out = json_array();
    if (!out) return NULL;
    for (size_t i = 0; i < n; i++) {
        const json_t *d = diff_of(rows[i]);
        if (!d) continue;
        long long nl = n_layer_of(d);
        json_t *o = json_object(), *ss = json_object();
        json_t *sq[N_SITES], *inf[N_SITES];
        for (int s = 0; s < N_SITES; s++) {
            sq[s] = json_array();
            inf[s] = json_array();
            for (long long l = 0; l < nl; l++) {
                json_array_append_new(sq[s], json_null());
                json_array_append_new(inf[s], json_false());
            }
        }
        size_t k;
        const json_t *e;
        json_array_foreach(json_object_get(d, "layers"), k, e) {
            int s = site_index(json_string_value(json_object_get(e, "site")));
            long long l = json_integer_value(json_object_get(e, "layer"));
            if (s < 0 || l < 0 || l >= nl) continue;
            double v = num(e, "sqnr_db");
            if (isfinite(v)) json_array_set_new(sq[s], (size_t)l, json_real(v));
            json_array_set_new(inf[s], (size_t)l, json_boolean(json_is_true(json_object_get(e, "sqnr_inf"))));
        }
        for (int s = 0; s < N_SITES; s++)
            json_object_set_new(ss, sites[s], json_pack("{s:o,s:o}", "sqnr", sq[s], "inf", inf[s]));
        const json_t *w = json_object_get(d, "worst_layer");
        json_object_set_new(o, "run", json_integer(rows[i]->id));
        json_object_set_new(o, "name", json_string(rows[i]->label ? rows[i]->label : kld_base_name(rows[i]->arm.path)));
        json_object_set_new(o, "n_layer", json_integer(nl));
        json_object_set_new(o, "worst_layer", json_is_integer(w) ? json_integer(json_integer_value(w)) : json_null());
        json_object_set_new(o, "sites", ss);
        json_array_append_new(out, o);
    }
    if (!json_array_size(out)) {
        json_decref(out);
        return NULL;
    }
    return out;
}

/* a value cell: data-key = the path into report.diff (array indices as
 * numbers) */
static void cell(FILE *f, int64_t run, const char *key, double v, bool inf, const char *style) {
    fprintf(f, "<td class=\"num\" data-run=\"%lld\" data-key=\"%s\"", (long long)run, key);
    if (isfinite(v)) fprintf(f, " data-value=\"%.17g\"", v);
    if (inf) fputs(" data-inf=\"1\"", f);
    if (style) fprintf(f, " style=\"%s\"", style);
    fputc('>', f);
    if (inf) fputs("+inf", f);
    else if (isfinite(v)) fprintf(f, "%.4g", v);
    else fputs("–", f);
    fputs("</td>", f);
}

/* per layer: SQNR of each site, the worst layer flagged */
static void layer_table(FILE *f, const kld_db_row *r, const json_t *d) {
    long long nl = n_layer_of(d);
    const json_t *w = json_object_get(d, "worst_layer");
    long long worst = json_is_integer(w) ? json_integer_value(w) : -1;
    fprintf(f, "<table class=\"summary diff\" id=\"diff-table-%lld\"><thead><tr><th>layer</th>"
               "<th>SQNR mixer (dB)</th><th>SQNR ffn (dB)</th><th>SQNR resid (dB)</th>"
               "<th>rel. error resid</th></tr></thead><tbody>\n", (long long)r->id);
    for (long long l = 0; l < nl; l++) {
        const json_t *at[N_SITES] = {0};
        size_t k, idx[N_SITES] = {0};
        const json_t *e;
        json_array_foreach(json_object_get(d, "layers"), k, e) {
            int s = site_index(json_string_value(json_object_get(e, "site")));
            if (s >= 0 && json_integer_value(json_object_get(e, "layer")) == l) {
                at[s] = e;
                idx[s] = k;
            }
        }
        fprintf(f, "<tr data-layer=\"%lld\"%s><td class=\"num\">%lld%s</td>", l, l == worst ? " class=\"worst\"" : "", l,
                l == worst ? " <span class=\"tag\">worst</span>" : "");
        for (int s = 0; s < N_SITES; s++) {
            char key[64];
            snprintf(key, sizeof key, "layers.%zu.sqnr_db", idx[s]);
            cell(f, r->id, key, at[s] ? num(at[s], "sqnr_db") : NAN,
                 at[s] && json_is_true(json_object_get(at[s], "sqnr_inf")), NULL);
        }
        char key[64];
        snprintf(key, sizeof key, "layers.%zu.rel_frob", idx[2]);
        cell(f, r->id, key, at[2] ? num(at[2], "rel_frob") : NAN, false, NULL);
        fputs("</tr>\n", f);
    }
    fputs("</tbody></table>\n", f);
}

/* white (the smallest error) to red (the largest), on a log scale */
static void heat_colour(double v, double lo, double hi, char *buf, size_t cap) {
    double t = 0;
    if (v > 0 && hi > lo && lo > 0) t = (log(v) - log(lo)) / (log(hi) - log(lo));
    else if (v > 0) t = 1;
    t = t < 0 ? 0 : t > 1 ? 1 : t;
    int g = (int)lround(255 - 185 * t), b = (int)lround(255 - 205 * t);
    snprintf(buf, cap, "background:rgb(255,%d,%d)", g, b);
}

static void heat_map(FILE *f, const kld_db_row *r, const json_t *d) {
    const json_t *mats = json_object_get(d, "matrices");
    if (!json_array_size(mats)) return;
    char classes[MAX_CLASSES][64];
    size_t nc = 0, k;
    long long max_layer = -1;
    double lo = INFINITY, hi = 0;
    bool other = false;
    const json_t *m;
    json_array_foreach(mats, k, m) {
        char c[64];
        long long l = matrix_class(json_string_value(json_object_get(m, "name")), c, sizeof c);
        size_t j = 0;
        while (j < nc && strcmp(classes[j], c)) j++;
        if (j == nc && nc < MAX_CLASSES) snprintf(classes[nc++], sizeof classes[0], "%s", c);
        if (l > max_layer) max_layer = l;
        other = other || l < 0;
        double v = num(m, "rel_err_own_input");
        if (v > 0 && v < lo) lo = v;
        if (v > hi) hi = v;
    }
    fprintf(f, "<table class=\"summary heat\" id=\"diff-heat-%lld\"><thead><tr><th>layer</th>", (long long)r->id);
    for (size_t c = 0; c < nc; c++) {
        fputs("<th>", f);
        kld_html_esc(f, classes[c]);
        fputs("</th>", f);
    }
    fputs("</tr></thead><tbody>\n", f);
    for (long long l = other ? -1 : 0; l <= max_layer; l++) {
        if (l < 0) fputs("<tr data-layer=\"-1\"><td>outside blocks</td>", f);
        else fprintf(f, "<tr data-layer=\"%lld\"><td class=\"num\">%lld</td>", l, l);
        for (size_t c = 0; c < nc; c++) {
            const json_t *hit = NULL;
            size_t idx = 0;
            json_array_foreach(mats, k, m) {
                char cc[64];
                if (matrix_class(json_string_value(json_object_get(m, "name")), cc, sizeof cc) == l &&
                    !strcmp(cc, classes[c])) {
                    hit = m;
                    idx = k;
                    break;
                }
            }
            if (!hit) {
                fputs("<td class=\"num empty\"></td>", f);
                continue;
            }
            double v = num(hit, "rel_err_own_input"), vr = num(hit, "rel_err_ref_input");
            char style[64], key[64];
            heat_colour(v, lo, hi, style, sizeof style);
            snprintf(key, sizeof key, "matrices.%zu.rel_err_own_input", idx);
            fprintf(f, "<td class=\"num\" data-run=\"%lld\" data-key=\"%s\" data-name=\"", (long long)r->id, key);
            kld_html_esc(f, json_string_value(json_object_get(hit, "name")));
            fputc('"', f);
            if (isfinite(v)) fprintf(f, " data-value=\"%.17g\"", v);
            fprintf(f, " style=\"%s\" title=\"", style);
            kld_html_esc(f, json_string_value(json_object_get(hit, "name")));
            if (isfinite(vr)) fprintf(f, ": on the reference's input %.4g", vr);
            fputs("\">", f);
            if (isfinite(v)) fprintf(f, "%.3g", v);
            else fputs("–", f);
            fputs("</td>", f);
        }
        fputs("</tr>\n", f);
    }
    fputs("</tbody></table>\n", f);
}

bool kld_report_html_diff_section(FILE *f, kld_db_row *const *rows, size_t n) {
    bool any = false;
    for (size_t i = 0; i < n; i++) any = any || diff_of(rows[i]);
    if (!any) return false;
    fputs("<section><h2>Where the drift enters (kldeval diff)</h2>\n", f);
    for (size_t i = 0; i < n; i++) {
        const kld_db_row *r = rows[i];
        const json_t *d = diff_of(r);
        if (!d) continue;
        fprintf(f, "<h3>run %lld: ", (long long)r->id);
        kld_html_esc(f, r->label ? r->label : kld_base_name(r->arm.path));
        fputs("</h3>\n<div class=\"grid\">", f);
        fprintf(f, "<figure class=\"card\"><h3>SQNR per layer and site</h3><div class=\"chart\"><canvas "
                   "id=\"chart-diff-%lld\" class=\"kld-chart\"></canvas></div><figcaption>10·log10(Σ‖r‖² / "
                   "Σ‖a−r‖²) in dB, higher is closer to the reference; +inf (nothing differs) is drawn on the "
                   "top edge as a triangle.</figcaption></figure>\n", (long long)r->id);
        fputs("<figure class=\"card scroll\">", f);
        layer_table(f, r, d);
        fputs("<figcaption>SQNR of each layer's sites (dB) and the residual's relative Frobenius error ‖a−r‖/‖r‖. The worst layer is the one whose mixer or MLP output has the lowest SQNR.</figcaption>"
              "</figure></div>\n", f);
        if (json_array_size(json_object_get(d, "matrices"))) {
            fputs("<h3>Relative error per matrix, on the arm's own input</h3>\n", f);
            heat_map(f, r, d);
            fputs("<p class=\"note\">‖W<sub>arm</sub>·x − W<sub>ref</sub>·x‖ / ‖W<sub>ref</sub>·x‖ with x the "
                  "arm's own input rows (kldeval diff --matrices); white the smallest, red the largest (log "
                  "scale); the tooltip gives the error on the reference's input.</p>\n", f);
        }
    }
    fputs("</section>\n", f);
    return true;
}
