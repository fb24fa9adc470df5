/* test_sweep_diff.c — `kldeval sweep --rank-by diff` (issue 33): the groups
 * ranked by the matrix errors of one diff pass. The ranking is reproducible
 * bit for bit, and equals the one recomputed here from `kldeval diff
 * --matrices --json` of the same arm (MODEL@BASE against MODEL): per group,
 * the sum of rel_err_own_input² over its matrices, largest first. The
 * Spearman rank correlation with the KLD-measured ranking (the plain sweep
 * over the same windows) is printed; it is only checked to be a correlation.
 * Flags that need KLD arms are refused. */
#include "testlib.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <sys/wait.h>

#define M KT_SHARED "/models/rand-llama/f16.gguf"
#define WIN "--chunking stream --ctx 64 --chunks 4 --threads 2"

static const char *kldeval;
static char out_path[512];

static int run(const char *args) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' %s >'%s' 2>&1", kldeval, args, out_path);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static bool output_has(const char *a) {
    char *t = kt_read_file(out_path, NULL);
    bool ok = t && strstr(t, a) != NULL;
    if (!ok) fprintf(stderr, "output was: %s\n", t ? t : "(none)");
    free(t);
    return ok;
}

static json_t *run_json(const char *args, const char *name) {
    char json[600], full[8192];
    snprintf(json, sizeof json, "%s/%s", kt_build_dir(), name);
    snprintf(full, sizeof full, "%s --json '%s' --quiet --no-db", args, json);
    int rc = run(full);
    CHECK(rc == 0, "exit 0 (got %d): %s", rc, args);
    if (rc) output_has("(exit 0)");
    json_error_t e;
    json_t *j = json_load_file(json, 0, &e);
    CHECK(j != NULL, "%s: %s", json, e.text);
    return j;
}

/* The layers×classes group of a matrix, written independently of the
 * library: blk.N.CLASS.weight -> blk:N.CLASS; the tied head -> head. */
static bool group_of(const char *name, char *out, size_t cap) {
    int layer, used = 0;
    if (!strcmp(name, "token_embd.weight") || !strcmp(name, "output.weight")) {
        snprintf(out, cap, "head");
        return true;
    }
    if (sscanf(name, "blk.%d.%n", &layer, &used) != 1 || !used) return false;
    const char *cls = name + used, *dot = strstr(cls, ".weight");
    if (!dot) return false;
    snprintf(out, cap, "blk:%d.%.*s", layer, (int)(dot - cls), cls);
    return true;
}

typedef struct group_score {
    char name[64];
    double score;
} group_score;

static int by_score(const void *x, const void *y) {
    const group_score *a = x, *b = y;
    return a->score > b->score ? -1 : a->score < b->score ? 1 : 0;
}

/* Average ranks (1 = smallest) of v[n]. */
static void ranks(const double *v, size_t n, double *r) {
    for (size_t i = 0; i < n; i++) {
        size_t below = 0, same = 0;
        for (size_t j = 0; j < n; j++) below += v[j] < v[i], same += v[j] == v[i];
        r[i] = (double)below + (double)(same + 1) / 2.0;
    }
}

static double spearman(const double *a, const double *b, size_t n) {
    double *ra = calloc(n, sizeof *ra), *rb = calloc(n, sizeof *rb);
    ranks(a, n, ra);
    ranks(b, n, rb);
    double ma = 0, mb = 0, sab = 0, saa = 0, sbb = 0;
    for (size_t i = 0; i < n; i++) ma += ra[i] / (double)n, mb += rb[i] / (double)n;
    for (size_t i = 0; i < n; i++) {
        sab += (ra[i] - ma) * (rb[i] - mb);
        saa += (ra[i] - ma) * (ra[i] - ma);
        sbb += (rb[i] - mb) * (rb[i] - mb);
    }
    free(ra);
    free(rb);
    return sab / sqrt(saa * sbb);
}

static void test_rank_by_diff(void) {
    const char *args = "sweep --ref " M " --base q4_0 --groups layers×classes --rank-by diff " WIN;
    json_t *a = run_json(args, "sweep_diff_a.json"), *b = run_json(args, "sweep_diff_b.json");
    json_t *d = run_json("diff --ref " M " --arm " M "@q4_0 --matrices " WIN, "sweep_diff_diff.json");
    json_t *k = run_json("sweep --ref " M " --base q4_0 --groups layers×classes --bootstrap 0 " WIN,
                         "sweep_diff_kl.json");
    if (!a || !b || !d || !k) goto done;
    const json_t *ra = json_object_get(a, "ranked");
    CHECK(!strcmp(json_string_value(json_object_get(a, "rank_by")), "diff"), "rank_by is diff");
    CHECK(!strcmp(json_string_value(json_object_get(a, "diff_score")), "sum_rel_err_own_input_sq"),
          "the score is named");
    CHECK(!strcmp(json_string_value(json_object_get(a, "schema")), "kldeval.sweep/1"), "the sweep's schema");
    CHECK(json_array_size(ra) == 15, "rand-llama layers×classes: 2 × 7 classes + head (got %zu)",
          json_array_size(ra));
    CHECK(json_equal(ra, json_object_get(b, "ranked")), "the ranking is reproducible bit for bit");
    CHECK(json_array_size(json_object_get(a, "arms")) == 1, "one arm: the all-base arm of the diff pass");

    /* the ranking recomputed from the diff of the same arm */
    group_score gs[64];
    size_t n = 0;
    const json_t *mats = json_object_get(d, "matrices"), *m;
    size_t i;
    json_array_foreach(mats, i, m) {
        char g[64];
        const double e = json_number_value(json_object_get(m, "rel_err_own_input"));
        if (!group_of(json_string_value(json_object_get(m, "name")), g, sizeof g)) continue;
        size_t j = 0;
        while (j < n && strcmp(gs[j].name, g)) j++;
        if (j == n && n < 64) snprintf(gs[n++].name, sizeof gs[0].name, "%s", g), gs[j].score = 0;
        if (j < n) gs[j].score += e * e;
    }
    qsort(gs, n, sizeof *gs, by_score);
    CHECK(n == json_array_size(ra), "the diff measured every group: %zu of %zu", n, json_array_size(ra));
    for (i = 0; i < n && i < json_array_size(ra); i++) {
        const json_t *row = json_array_get(ra, i);
        const char *g = json_string_value(json_object_get(row, "group"));
        const double s = json_number_value(json_object_get(row, "diff_score"));
        CHECK(g && !strcmp(g, gs[i].name), "rank %zu: %s from the diff, %s from the sweep", i + 1, gs[i].name,
              g ? g : "?");
        CHECK(fabs(s - gs[i].score) <= 1e-12 * gs[i].score, "rank %zu: score %.17g == %.17g", i + 1, s,
              gs[i].score);
        CHECK(s > 0, "a q4_0 group has a non-zero error (%s: %g)", g ? g : "?", s);
    }
    CHECK(!strcmp(json_string_value(json_object_get(k, "rank_by")), "kl"), "the KLD sweep says rank_by kl");
    /* the pass's KLD is the plain sweep's all-base arm's: the same windows and arm */
    const double kd = json_number_value(json_object_get(json_object_get(json_array_get(json_object_get(a, "arms"), 0),
                                                                        "kld"), "mean"));
    const double kk = json_number_value(json_object_get(json_object_get(json_array_get(json_object_get(k, "arms"), 0),
                                                                        "kld"), "mean"));
    CHECK(fabs(kd - kk) <= 1e-9 * kk, "all-base arm KLD %.9g (diff pass) == %.9g (KLD sweep)", kd, kk);

    /* Spearman ρ between the diff ranking and the KLD-measured one */
    const json_t *rk = json_object_get(k, "ranked");
    double x[64], y[64];
    size_t nk = 0;
    for (i = 0; i < json_array_size(rk) && nk < 64; i++) {
        const json_t *row = json_array_get(rk, i);
        const char *g = json_string_value(json_object_get(row, "group"));
        for (size_t j = 0; j < json_array_size(ra); j++) {
            const json_t *rd = json_array_get(ra, j);
            if (!strcmp(g, json_string_value(json_object_get(rd, "group")))) {
                x[nk] = json_number_value(json_object_get(json_object_get(row, "d_kld"), "mean"));
                y[nk++] = json_number_value(json_object_get(rd, "diff_score"));
            }
        }
    }
    CHECK(nk == 15, "every group in both rankings (%zu)", nk);
    const double rho = spearman(x, y, nk);
    printf("Spearman rho (diff ranking vs KLD ranking, rand-llama q4_0, layers×classes, %zu groups): %.4f\n",
           nk, rho);
    CHECK(isfinite(rho) && rho >= -1 && rho <= 1, "rho %g is a correlation", rho);
done:
    json_decref(a);
    json_decref(b);
    json_decref(d);
    json_decref(k);
}

/* One run-database row, mode sweep: the pass's all-base arm, the ranking and the diff kept. */
static void test_recorded(void) {
    char db[600], args[2048];
    snprintf(db, sizeof db, "%s/sweep_diff.sqlite", kt_build_dir());
    remove(db);
    snprintf(args, sizeof args, "sweep --ref " M " --base q4_0 --rank-by diff --chunking stream --ctx 64 "
             "--chunks 2 --quiet --db '%s' --label sd", db);
    CHECK(run(args) == 0, "--rank-by diff with --db: exit 0");
    snprintf(args, sizeof args, "runs show 1 --json --db '%s'", db);
    CHECK(run(args) == 0, "runs show 1: exit 0");
    json_error_t e;
    json_t *j = json_load_file(out_path, 0, &e);
    CHECK(j != NULL, "runs show --json parses: %s", e.text);
    const json_t *r = json_object_get(j, "report") ? json_object_get(j, "report") : j;
    const json_t *sw = json_object_get(json_object_get(r, "config"), "sweep");
    CHECK(json_is_string(json_object_get(sw, "rank_by")) &&
              !strcmp(json_string_value(json_object_get(sw, "rank_by")), "diff"),
          "the row's config.sweep.rank_by is diff");
    CHECK(json_array_size(json_object_get(r, "ranked")) == 3, "the row keeps the ranking (blk:0, blk:1, head)");
    CHECK(json_array_size(json_object_get(json_object_get(r, "diff"), "matrices")) > 0, "and the diff's matrices");
    size_t i;
    const json_t *row;
    json_array_foreach(json_object_get(r, "ranked"), i, row) {
        const char *g = json_string_value(json_object_get(row, "group"));
        const json_int_t nm = json_integer_value(json_object_get(row, "n_matrices"));
        CHECK(g && nm == (strcmp(g, "head") ? 7 : 1), "%s: %lld matrices measured", g ? g : "?", (long long)nm);
    }
    json_decref(j);
    /* --upgrade: the pass's reference is the sweep's all-raised arm */
    json_t *u = run_json("sweep --ref " M " --base q4_0 --upgrade q8_0 --rank-by diff --chunking stream --ctx 64 "
                         "--chunks 1", "sweep_diff_up.json");
    const char *ref = json_string_value(json_object_get(u, "diff_ref"));
    const char *arm = json_string_value(json_object_get(u, "diff_arm"));
    CHECK(ref && strstr(ref, "f16.gguf@q4_0,*=q8_0") && arm && strstr(arm, "f16.gguf@q4_0") &&
              !strstr(arm, "q8_0"),
          "--upgrade q8_0: the pass compares MODEL@q4_0 with MODEL@q4_0,*=q8_0 (%s, %s)", arm ? arm : "?",
          ref ? ref : "?");
    json_decref(u);
    snprintf(args, sizeof args, "runs list --mode sweep --db '%s'", db);
    CHECK(run(args) == 0 && output_has("sd: all at base"), "runs list --mode sweep lists it");
}

static void test_refused(void) {
    static const char *const flags[] = {"--budget 5", "--gate 'kld.mean<=1'", "--teacher-top-k 8",
                                        "--bootstrap 10"};
    for (size_t i = 0; i < sizeof flags / sizeof *flags; i++) {
        char args[1024], flag[64];
        snprintf(args, sizeof args, "sweep --ref " M " --base q4_0 --rank-by diff %s --no-db", flags[i]);
        snprintf(flag, sizeof flag, "%.*s", (int)strcspn(flags[i], " "), flags[i]);
        CHECK(run(args) == 2, "%s with --rank-by diff: exit 2", flag);
        CHECK(output_has(flag) && output_has("--rank-by diff"), "the message names %s", flag);
    }
    CHECK(run("sweep --ref " M " --base q4_0 --rank-by kld --no-db") == 2, "--rank-by kld: exit 2");
    CHECK(output_has("'kld'"), "the message names the value");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_sweep_diff KLDEVAL\n");
        return 2;
    }
    kldeval = argv[1];
    snprintf(out_path, sizeof out_path, "%s/sweep_diff.out", kt_build_dir());
    test_refused();
    test_recorded();
    test_rank_by_diff();
    return kt_finish();
}
