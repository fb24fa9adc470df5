/* report_html_cap.c — the capability section of the HTML report (runs of
 * mode "cap" / "cap-score"): the per-task accuracy table of every model of
 * every run with the paired difference, and the data of the grouped bar
 * chart (one group per task, one bar per model; error bars: the
 * reference's binomial standard error, the arm's paired standard error of
 * arm − ref). Table cells carry data-run and data-key = the path of the
 * value in the run database's export ("cap_results.TASK.SIDE.accuracy",
 * "cap_score_ref", ...), so a test can compare the page with the database. */
#include "report/report_html_cap.h"

#include "report/report_impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static bool has_arm(const kld_db_row *r) { return isfinite(r->cap.score_arm); }

/* Every task of the runs, in the order first seen. */
static size_t union_tasks(kld_db_row *const *rows, size_t n, const char **tasks, size_t cap) {
    size_t nt = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < kld_db_cap_task_count(rows[i]); k++) {
            const char *t = kld_db_cap_task(rows[i], k);
            bool seen = false;
            for (size_t j = 0; j < nt; j++) seen |= !strcmp(tasks[j], t);
            if (!seen && nt < cap) tasks[nt++] = t;
        }
    return nt;
}

static double num(const json_t *o, const char *k) {
    const json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* A value cell: data-value with 17 digits, the text with 4 decimals (a sign
 * when signed), then tail. */
static void cell(FILE *f, int64_t run, const char *key, double v, const char *se_key, double se, bool sign,
                 const char *tail) {
    fprintf(f, "<td class=\"num\" data-run=\"%lld\" data-key=\"%s\"", (long long)run, key);
    if (isfinite(v)) fprintf(f, " data-value=\"%.17g\"", v);
    if (se_key && isfinite(se)) fprintf(f, " data-se-key=\"%s\" data-se=\"%.17g\"", se_key, se);
    fputc('>', f);
    if (!isfinite(v)) fputs("–", f);
    else {
        fprintf(f, sign ? "%+.4f" : "%.4f", v);
        if (se_key && isfinite(se)) fprintf(f, " <span class=\"se\">± %.4f</span>", se);
        if (tail && *tail) fprintf(f, " <span class=\"se\">%s</span>", tail);
    }
    fputs("</td>", f);
}

static void side_row(FILE *f, const kld_db_row *r, const char *side, const char *const *tasks, size_t nt) {
    const kld_db_arm *a = strcmp(side, "arm") ? &r->ref : &r->arm;
    fprintf(f, "<tr data-run=\"%lld\" data-side=\"%s\"><td class=\"num\">%lld</td><td>", (long long)r->id, side,
            (long long)r->id);
    kld_html_esc(f, r->label ? r->label : "–");
    if (r->partial) fputs(" <span class=\"tag\">interrupted</span>", f);
    fprintf(f, "</td><td>%s</td><td class=\"file\" title=\"", side);
    kld_html_esc(f, a->path);
    fputs("\">", f);
    kld_html_esc(f, kld_base_name(a->path));
    fputs("</td>", f);
    char key[160], se_key[160];
    for (size_t t = 0; t < nt; t++) {
        const json_t *s = kld_db_cap_side(r, tasks[t], side);
        snprintf(key, sizeof key, "cap_results.%s.%s.accuracy", tasks[t], side);
        snprintf(se_key, sizeof se_key, "cap_results.%s.%s.stderr", tasks[t], side);
        if (!s) {
            fputs("<td class=\"num\">–</td>", f);
            continue;
        }
        char tail[64];
        snprintf(tail, sizeof tail, "(%lld/%lld)", (long long)json_integer_value(json_object_get(s, "correct")),
                 (long long)json_integer_value(json_object_get(s, "n")));
        cell(f, r->id, key, num(s, "accuracy"), se_key, num(s, "stderr"), false, tail);
    }
    cell(f, r->id, strcmp(side, "arm") ? "cap_score_ref" : "cap_score_arm",
         strcmp(side, "arm") ? r->cap.score_ref : r->cap.score_arm, NULL, NAN, false, NULL);
    fputs("</tr>\n", f);
}

static void diff_row(FILE *f, const kld_db_row *r, const char *const *tasks, size_t nt) {
    fprintf(f, "<tr data-run=\"%lld\" data-side=\"paired\" class=\"paired\"><td class=\"num\">%lld</td><td></td>"
               "<td colspan=\"2\">arm − ref, paired</td>", (long long)r->id, (long long)r->id);
    char key[160], se_key[160], tail[96];
    for (size_t t = 0; t < nt; t++) {
        const json_t *p = json_object_get(json_object_get(r->cap.results, tasks[t]), "paired");
        if (!p) {
            fputs("<td class=\"num\">–</td>", f);
            continue;
        }
        snprintf(key, sizeof key, "cap_results.%s.paired.diff", tasks[t]);
        snprintf(se_key, sizeof se_key, "cap_results.%s.paired.stderr", tasks[t]);
        snprintf(tail, sizeof tail, "(+%lld / −%lld)", (long long)json_integer_value(json_object_get(p, "arm_only_right")),
                 (long long)json_integer_value(json_object_get(p, "ref_only_right")));
        cell(f, r->id, key, num(p, "diff"), se_key, num(p, "stderr"), true, tail);
    }
    cell(f, r->id, "cap_score_diff", r->cap.score_diff, NULL, NAN, true, NULL);
    fputs("</tr>\n", f);
}

void kld_report_html_cap_section(FILE *f, kld_db_row *const *rows, size_t n) {
    const char *tasks[64];
    size_t nt = union_tasks(rows, n, tasks, sizeof tasks / sizeof tasks[0]);
    fputs("<section id=\"capability\"><h2>Capability</h2>\n"
          "<table class=\"summary\" id=\"cap-table\"><thead><tr><th>run</th><th>label</th><th>model</th>"
          "<th>file</th>", f);
    for (size_t t = 0; t < nt; t++) {
        fputs("<th>", f);
        kld_html_esc(f, tasks[t]);
        fputs("</th>", f);
    }
    fputs("<th>Capability_Score</th></tr></thead><tbody>\n", f);
    for (size_t i = 0; i < n; i++) {
        side_row(f, rows[i], "ref", tasks, nt);
        if (has_arm(rows[i])) {
            side_row(f, rows[i], "arm", tasks, nt);
            diff_row(f, rows[i], tasks, nt);
        }
    }
    fputs("</tbody></table>\n<p class=\"note\">Accuracy ± sqrt(p(1−p)/n); the paired row is the mean of "
          "arm − ref over the same items ± its paired standard error, (+arm only right / −ref only right) "
          "McNemar's discordant counts. Capability_Score: the unweighted mean of the task accuracies.</p>\n"
          "<div class=\"grid\"><figure class=\"card\"><h3>Accuracy per task</h3><div class=\"chart\"><canvas "
          "id=\"chart-cap\" class=\"kld-chart\"></canvas></div><figcaption>One bar per model; error bars: "
          "± the reference's standard error, ± the arm's paired standard error of arm − ref."
          "</figcaption></figure></div></section>\n", f);
}

json_t *kld_report_html_cap_data(kld_db_row *const *rows, size_t n) {
    const char *tasks[64];
    size_t nt = union_tasks(rows, n, tasks, sizeof tasks / sizeof tasks[0]);
    json_t *o = json_object(), *tl = json_array(), *bars = json_array();
    if (!o || !tl || !bars) {
        json_decref(o), json_decref(tl), json_decref(bars);
        return NULL;
    }
    json_object_set_new(o, "tasks", tl);
    json_object_set_new(o, "bars", bars);
    for (size_t t = 0; t < nt; t++) json_array_append_new(tl, json_string(tasks[t]));
    for (size_t i = 0; i < n; i++) {
        const kld_db_row *r = rows[i];
        for (int s = 0; s < (has_arm(r) ? 2 : 1); s++) {
            const char *side = s ? "arm" : "ref";
            const kld_db_arm *a = s ? &r->arm : &r->ref;
            char name[200];
            snprintf(name, sizeof name, "#%lld %s %s", (long long)r->id, side, kld_base_name(a->path));
            json_t *acc = json_array(), *err = json_array();
            for (size_t t = 0; t < nt; t++) {
                const json_t *sd = kld_db_cap_side(r, tasks[t], side);
                const json_t *p = json_object_get(json_object_get(r->cap.results, tasks[t]), "paired");
                double v = num(sd, "accuracy"), e = s ? num(p, "stderr") : num(sd, "stderr");
                json_array_append_new(acc, sd && isfinite(v) ? json_real(v) : json_null());
                json_array_append_new(err, sd && isfinite(e) ? json_real(e) : json_null());
            }
            json_array_append_new(bars, json_pack("{s:I, s:s, s:s, s:o, s:o}", "run", (json_int_t)r->id, "side", side,
                                                  "name", name, "accuracy", acc, "errors", err));
        }
    }
    return o;
}
