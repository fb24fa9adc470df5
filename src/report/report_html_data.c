/* report_html_data.c — the numbers behind the HTML report's charts, from
 * the database rows and their per-position values: a log-spaced KLD
 * histogram shared by all arms, each arm's CDF, the buckets, and the
 * summary values the charts plot. Definitions in report_html.h. */
#include "report/report_html.h"
#include "eval/gate.h"

#include "common/common.h"
#include "report/report_impl.h"

#include <math.h>
#include <stdlib.h>

#define HIST_BINS 40
#define CDF_POINTS 200
#define HIST_DECADES 8.0 /* the histogram spans at most 10^8 below the largest KLD */

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static const char *base_name(const char *p) {
    const char *s = p ? strrchr(p, '/') : NULL;
    return s && s[1] ? s + 1 : p ? p : "?";
}

static bool add_real_array(json_t *o, const char *key, const double *v, size_t n) {
    json_t *a = json_array();
    if (!a || json_object_set_new(o, key, a) != 0) return false;
    for (size_t i = 0; i < n; i++)
        if (json_array_append_new(a, isfinite(v[i]) ? json_real(v[i]) : json_null()) != 0) return false;
    return true;
}

static json_t *buckets(const kld_bucket *b, int nb) {
    json_t *a = json_array();
    for (int i = 0; a && i < nb; i++) {
        if (!b[i].n) continue;
        json_t *o = json_object();
        if (!o || json_array_append_new(a, o) != 0) break;
        kld_json_set_real(o, "lo", b[i].lo);
        kld_json_set_real(o, "hi", b[i].hi);
        kld_json_set_uint(o, "n", b[i].n);
        kld_json_set_real(o, "kld_mean", b[i].kld_mean);
        kld_json_set_real(o, "kld_se", b[i].kld_se);
    }
    return a;
}

bool kld_report_ci_at(const json_t *report, const char *path, double *lo, double *hi) {
    const json_t *v = kld_json_at_path(report, path);
    const json_t *a = json_array_get(v, 0), *b = json_array_get(v, 1);
    *lo = json_is_number(a) ? json_number_value(a) : NAN;
    *hi = json_is_number(b) ? json_number_value(b) : NAN;
    return isfinite(*lo) && isfinite(*hi);
}

/* A statistic's interval as key: [lo, hi]; nothing when the run has none. */
static void ci_pair(json_t *o, const char *key, const json_t *report, const char *path) {
    double lo, hi;
    if (kld_report_ci_at(report, path, &lo, &hi)) json_object_set_new(o, key, json_pack("[f, f]", lo, hi));
}

/* The KV cache's family of a kv_types text: llama.cpp's block types, MLX
 * groups, the rotated quantizer, or a mix of them. */
static const char *kv_family(const char *types) {
    bool mlx = strstr(types, "mlx") != NULL, rot = strstr(types, "rot") != NULL;
    bool block = false;
    static const char *const blocks[] = {"f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl"};
    for (size_t i = 0; i < sizeof blocks / sizeof blocks[0]; i++) block = block || strstr(types, blocks[i]);
    if (!strcmp(types, "f32")) return "f32";
    if (mlx + rot + block > 1) return "mixed";
    return mlx ? "mlx" : rot ? "rot" : "llama.cpp";
}

/* A model arm's cache in bits per cached value (kv_bytes_per_token·8 over
 * the values a position caches, from the arm's config), its kv_types and
 * their family; nothing when the run's arm recorded no cache. */
static void kv_bits(json_t *o, const json_t *report) {
    const json_t *arm = json_object_get(json_object_get(report, "config"), "arm");
    const json_t *b = json_object_get(arm, "kv_bytes_per_token"), *v = json_object_get(arm, "kv_values_per_token");
    const char *types = json_string_value(json_object_get(arm, "kv_types"));
    if (!json_is_integer(b) || !json_is_integer(v) || json_integer_value(v) <= 0 || !types) return;
    kld_json_set_real(o, "kv_bits", 8.0 * (double)json_integer_value(b) / (double)json_integer_value(v));
    json_object_set_new(o, "kv_types", json_string(types));
    json_object_set_new(o, "kv_family", json_string(kv_family(types)));
}

/* The sorted KLD values of a run (NULL when it has none stored). */
static float *sorted_kld(kld_db *db, const kld_db_row *r, size_t *n, kld_error *err, kld_status *st) {
    *n = 0;
    *st = KLD_OK;
    if (r->positions_n < 0) return NULL;
    kld_db_position *p;
    if ((*st = kld_db_load_positions(db, r->id, &p, n, err))) return NULL;
    float *v = malloc((*n ? *n : 1) * sizeof *v);
    if (!v) {
        free(p);
        *st = kld_fail(err, KLD_ERR_NOMEM, "out of memory for %zu positions", *n);
        return NULL;
    }
    for (size_t i = 0; i < *n; i++) v[i] = p[i].kld;
    free(p);
    qsort(v, *n, sizeof *v, cmp_float);
    return v;
}

json_t *kld_report_html_data(kld_db *db, kld_db_row *const *rows, size_t n, kld_error *err) {
    float **vals = calloc(n ? n : 1, sizeof *vals);
    size_t *counts = calloc(n ? n : 1, sizeof *counts);
    json_t *data = json_object(), *runs = json_array();
    kld_status st = vals && counts && data && runs ? KLD_OK : KLD_ERR_NOMEM;
    if (st) kld_fail(err, st, "out of memory");
    /* the histogram's range: the largest KLD, down to the smallest positive one */
    double hi = 0, lo = INFINITY;
    bool all_sweep = n > 0;
    for (size_t i = 0; !st && i < n; i++) {
        vals[i] = sorted_kld(db, rows[i], &counts[i], err, &st);
        const kld_summary *s = &rows[i]->summary;
        all_sweep = all_sweep && rows[i]->mode && !strcmp(rows[i]->mode, "sweep");
        if (vals[i]) {
            for (size_t k = 0; k < counts[i]; k++)
                if (vals[i][k] > 0) { lo = fmin(lo, vals[i][k]); break; }
            if (counts[i]) hi = fmax(hi, vals[i][counts[i] - 1]);
        } else if (isfinite(s->kld.max)) {
            hi = fmax(hi, s->kld.max);
            if (s->kld.min > 0) lo = fmin(lo, s->kld.min);
        }
    }
    if (!(hi > 0)) hi = 1;
    if (!(lo < hi)) lo = hi / 10;
    lo = fmax(lo, hi * pow(10, -HIST_DECADES));
    double edges[HIST_BINS + 1], centers[HIST_BINS];
    double l0 = log10(lo), l1 = log10(hi);
    for (int b = 0; b <= HIST_BINS; b++) edges[b] = pow(10, l0 + (l1 - l0) * b / HIST_BINS);
    for (int b = 0; b < HIST_BINS; b++) centers[b] = sqrt(edges[b] * edges[b + 1]);
    if (!st && !(add_real_array(data, "hist_edges", edges, HIST_BINS + 1) &&
                 add_real_array(data, "hist_centers", centers, HIST_BINS) &&
                 json_object_set_new(data, "sweep", json_boolean(all_sweep)) == 0 &&
                 json_object_set(data, "runs", runs) == 0))
        st = kld_fail(err, KLD_ERR_NOMEM, "out of memory");

    for (size_t i = 0; !st && i < n; i++) {
        const kld_db_row *r = rows[i];
        const kld_summary *s = &r->summary;
        json_t *o = json_object();
        if (!o || json_array_append_new(runs, o) != 0) {
            st = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
            break;
        }
        char name[160];
        snprintf(name, sizeof name, "#%lld %s", (long long)r->id, r->label ? r->label : base_name(r->arm.path));
        json_object_set_new(o, "id", json_integer(r->id));
        json_object_set_new(o, "name", json_string(name));
        json_object_set_new(o, "arm", json_string(base_name(r->arm.path)));
        json_object_set_new(o, "mode", r->mode ? json_string(r->mode) : json_null());
        json_object_set_new(o, "partial", json_boolean(r->partial));
        json_object_set_new(o, "bytes", r->arm.bytes >= 0 ? json_integer(r->arm.bytes) : json_null());
        kld_json_set_real(o, "bpw", r->arm.bpw);
        kld_json_set_uint(o, "n_positions", s->n_positions);
        kld_json_set_real(o, "kld_mean", s->kld.mean);
        kld_json_set_real(o, "kld_se", s->kld.se);
        kld_json_set_real(o, "kld_median", s->kld.median);
        kld_json_set_real(o, "kld_p99", s->kld.pct[8]);
        kld_json_set_real(o, "top1", s->top1_agreement);
        kld_json_set_real(o, "top1_se", s->top1_se);
        kld_json_set_real(o, "ppl_ratio", s->ppl_ratio);
        kld_json_set_real(o, "ppl_ratio_se", s->ppl_ratio_se);
        ci_pair(o, "kld_mean_ci", r->report, "kld.ci95.mean");
        ci_pair(o, "top1_ci", r->report, "top1_agreement_ci95");
        ci_pair(o, "ppl_ratio_ci", r->report, "ppl_ratio_ci95");
        kv_bits(o, r->report);
        json_object_set_new(o, "by_pos", buckets(s->by_pos, KLD_POS_BUCKETS));
        json_object_set_new(o, "by_conf", buckets(s->by_conf, KLD_CONF_BUCKETS));
        double cx[CDF_POINTS + KLD_N_PCT + 2], cy[CDF_POINTS + KLD_N_PCT + 2];
        size_t nc = 0;
        if (vals[i] && counts[i]) {
            double hist[HIST_BINS] = {0}, zero = 0, total = (double)counts[i];
            for (size_t k = 0; k < counts[i]; k++) {
                double v = vals[i][k];
                if (!(v > 0)) { zero++; continue; }
                int b = (int)floor((log10(v) - l0) / (l1 - l0) * HIST_BINS);
                hist[b < 0 ? 0 : b >= HIST_BINS ? HIST_BINS - 1 : b]++;
            }
            for (int b = 0; b < HIST_BINS; b++) hist[b] /= total;
            add_real_array(o, "hist", hist, HIST_BINS);
            kld_json_set_real(o, "zero_frac", zero / total);
            size_t m = counts[i] < CDF_POINTS ? counts[i] : CDF_POINTS;
            for (size_t k = 0; k < m; k++) {
                size_t idx = m == 1 ? counts[i] - 1 : (size_t)((double)k * (double)(counts[i] - 1) / (double)(m - 1));
                cx[nc] = fmax(vals[i][idx], lo);
                cy[nc++] = (double)(idx + 1) / total;
            }
            json_object_set_new(o, "cdf_from", json_string("positions"));
        } else {
            /* no per-position values: the CDF through the recorded percentiles */
            cx[nc] = s->kld.min; cy[nc++] = 0;
            for (int k = 0; k < KLD_N_PCT; k++) {
                if (k == 5) { cx[nc] = s->kld.median; cy[nc++] = 0.5; }
                cx[nc] = s->kld.pct[k];
                cy[nc++] = kld_pct_fractions[k];
            }
            cx[nc] = s->kld.max; cy[nc++] = 1;
            for (size_t k = 0; k < nc; k++) cx[k] = fmax(cx[k], lo);
            json_object_set_new(o, "cdf_from", json_string("percentiles"));
        }
        add_real_array(o, "cdf_x", cx, nc);
        add_real_array(o, "cdf_y", cy, nc);
    }
    for (size_t i = 0; vals && i < n; i++) free(vals[i]);
    free(vals);
    free(counts);
    json_decref(runs);
    if (st) {
        json_decref(data);
        return NULL;
    }
    return data;
}
