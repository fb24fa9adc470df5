/* cmd_runs_cap.c — capability runs in `kldeval runs list|show|compare`: the
 * Capability_Score where KL runs show their KLD, the per-task accuracies
 * of each model with the paired difference, and capability runs side by
 * side. The values come from the row's cap_* columns (src/db/db.h). */
#include "cli/runs_cap.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static bool has_arm(const kld_db_row *r) { return isfinite(r->cap.score_arm); }

const char *kld_runs_cap_score_cell(const kld_db_row *r, char *buf, size_t n) {
    if (!isfinite(r->cap.score_ref)) snprintf(buf, n, "-");
    else if (has_arm(r)) snprintf(buf, n, "Cap %.4f (ref %.4f)", r->cap.score_arm, r->cap.score_ref);
    else snprintf(buf, n, "Cap %.4f", r->cap.score_ref);
    return buf;
}

const char *kld_runs_cap_diff_cell(const kld_db_row *r, char *buf, size_t n) {
    if (isfinite(r->cap.score_diff)) snprintf(buf, n, "Δ %+.4f", r->cap.score_diff);
    else snprintf(buf, n, "-");
    return buf;
}

static long long jint(const json_t *o, const char *k) { return (long long)json_integer_value(json_object_get(o, k)); }
static double jreal(const json_t *o, const char *k) { return json_number_value(json_object_get(o, k)); }

/* "0.3333 ± 0.2722 (1/3)", or "-" when the side is missing. */
static const char *acc_cell(const json_t *a, char *buf, size_t n) {
    if (!a) snprintf(buf, n, "-");
    else snprintf(buf, n, "%.4f ± %.4f (%lld/%lld)", jreal(a, "accuracy"), jreal(a, "stderr"), jint(a, "correct"),
                  json_object_get(a, "n_responses") ? jint(a, "n_responses") : jint(a, "n")); /* --samples */
    return buf;
}

void kld_runs_show_cap(const kld_db_row *r) {
    char seed[32] = "-", b1[64], b2[64];
    if (r->cap.seed >= 0) snprintf(seed, sizeof seed, "%lld", (long long)r->cap.seed);
    printf("%-18s: %s\n", "tasks", r->cap.tasks ? r->cap.tasks : "-");
    printf("%-18s: n %lld per task, seed %s, max %lld new tokens, %s s wall\n", "items", (long long)r->cap.n, seed,
           (long long)r->cap.max_new, isfinite(r->wall_s) ? (snprintf(b1, sizeof b1, "%.4g", r->wall_s), b1) : "-");
    bool arm = has_arm(r);
    /* which sampler produced the scores (reports before samplers: greedy) */
    const json_t *cfg = json_object_get(r->report, "config");
    const char *rs = json_string_value(json_object_get(json_object_get(cfg, "ref"), "sampler"));
    const char *as = json_string_value(json_object_get(json_object_get(cfg, "arm"), "sampler"));
    const char *th = json_string_value(json_object_get(cfg, "thinking"));
    printf("%-18s: ref %s", "sampler", rs ? rs : "greedy");
    if (arm) printf(", arm %s", as ? as : "greedy");
    printf("; %lld per item; thinking %s\n", jint(cfg, "samples") > 1 ? jint(cfg, "samples") : 1, th ? th : "default");
    printf("%-18s  %-24s", "", "reference");
    if (arm) printf("  %-24s  %s", "arm", "arm − ref ± paired se (arm only, ref only right)");
    printf("\n");
    for (size_t i = 0; i < kld_db_cap_task_count(r); i++) {
        const char *t = kld_db_cap_task(r, i);
        printf("%-18s  ", t);
        kld_runs_pad(acc_cell(kld_db_cap_side(r, t, "ref"), b1, sizeof b1), 24);
        if (arm) {
            printf("  ");
            kld_runs_pad(acc_cell(kld_db_cap_side(r, t, "arm"), b2, sizeof b2), 24);
            const json_t *p = json_object_get(json_object_get(r->cap.results, t), "paired");
            if (p)
                printf("  %+.4f ± %.4f (%lld, %lld)", jreal(p, "diff"), jreal(p, "stderr"), jint(p, "arm_only_right"),
                       jint(p, "ref_only_right"));
        }
        printf("\n");
    }
    printf("%-18s: ref %.4f", "Capability_Score", r->cap.score_ref);
    if (arm) printf(", arm %.4f, arm − ref %+.4f", r->cap.score_arm, r->cap.score_diff);
    printf(" (unweighted mean of the task accuracies)\n");
}

typedef struct column {
    const kld_db_row *r;
    const char *side; /* "ref" or "arm" */
} column;

void kld_runs_compare_cap(kld_db_row *const *rows, size_t n) {
    column cols[64];
    size_t nc = 0;
    for (size_t i = 0; i < n && nc + 2 <= sizeof cols / sizeof cols[0]; i++) {
        cols[nc++] = (column){rows[i], "ref"};
        if (has_arm(rows[i])) cols[nc++] = (column){rows[i], "arm"};
    }
    char b[96];
    printf("%-18s", "run");
    for (size_t c = 0; c < nc; c++) {
        snprintf(b, sizeof b, "%lld %s", (long long)cols[c].r->id, cols[c].side);
        printf("  ");
        kld_runs_pad(b, 24);
    }
    printf("\n%-18s", "label");
    for (size_t c = 0; c < nc; c++) printf("  %-24.24s", cols[c].r->label ? cols[c].r->label : "-");
    printf("\n%-18s", "model");
    for (size_t c = 0; c < nc; c++) {
        const kld_db_arm *a = strcmp(cols[c].side, "arm") ? &cols[c].r->ref : &cols[c].r->arm;
        printf("  %-24.24s", kld_base_name(a->path));
    }
    printf("\n%-18s", "bits per weight");
    for (size_t c = 0; c < nc; c++) {
        const kld_db_arm *a = strcmp(cols[c].side, "arm") ? &cols[c].r->ref : &cols[c].r->arm;
        if (isfinite(a->bpw)) snprintf(b, sizeof b, "%.4g", a->bpw);
        else snprintf(b, sizeof b, "-");
        printf("  %-24s", b);
    }
    printf("\n");
    /* every task of any run, in the order first seen */
    const char *tasks[64];
    size_t nt = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < kld_db_cap_task_count(rows[i]); k++) {
            const char *t = kld_db_cap_task(rows[i], k);
            bool seen = false;
            for (size_t j = 0; j < nt; j++) seen |= !strcmp(tasks[j], t);
            if (!seen && nt < sizeof tasks / sizeof tasks[0]) tasks[nt++] = t;
        }
    for (size_t t = 0; t < nt; t++) {
        printf("%-18s", tasks[t]);
        for (size_t c = 0; c < nc; c++) {
            printf("  ");
            kld_runs_pad(acc_cell(kld_db_cap_side(cols[c].r, tasks[t], cols[c].side), b, sizeof b), 24);
        }
        printf("\n");
    }
    kld_runs_pad("Capability_Score", 18);
    for (size_t c = 0; c < nc; c++) {
        double v = strcmp(cols[c].side, "arm") ? cols[c].r->cap.score_ref : cols[c].r->cap.score_arm;
        snprintf(b, sizeof b, "%.4f", v);
        printf("  %-24s", b);
    }
    printf("\n\naccuracy ± sqrt(p(1−p)/n) (correct/n). Across runs the items may differ (tasks, n, data):\n"
           "the paired difference of a run's two models is in `kldeval runs show ID`.\n");
}
