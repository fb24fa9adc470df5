/* test_cli_sweep.c — sweeps from the command line. `kldeval sweep`: the
 * table is reproducible bit for bit, its all-base arm equals the lockstep
 * `kl` of the same policy, the groups are ranked, and the policy --budget
 * proposes at q4_K_M's bits per weight measures a lower KLD than q4_K_M.
 * `kl --sweep kv=… --floor`: ordered KLDs, the cache's bytes per token from
 * the block sizes, the floor's paired differences, grids, the reference
 * value's exact zero. Every arm is recorded (mode sweep) and reported.
 * Bad flags fail naming the token. */
#include "testlib.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define M KT_SHARED "/models/rand-llama/f16.gguf"
#define Q4KM KT_SHARED "/models/rand-llama/q4_K_M.gguf"
#define WIN "--max-docs 2 --ctx 64"

static const char *kldeval;
static char out_path[512], db_path[512];

static int run(const char *args) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' %s >'%s' 2>&1", kldeval, args, out_path);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static bool output_has(const char *a) {
    size_t len;
    char *t = kt_read_file(out_path, &len);
    bool ok = strstr(t, a) != NULL;
    if (!ok) fprintf(stderr, "output was: %s\n", t);
    free(t);
    return ok;
}

static bool output_has_quiet(const char *a) {
    char *t = kt_read_file(out_path, NULL);
    bool ok = strstr(t, a) != NULL;
    free(t);
    return ok;
}

/* Entries of dir other than . and .. */
static int entries(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    if (d) closedir(d);
    return n;
}

/* A sweep stopped by SIGTERM (a scheduler's preemption) removes its
 * temporary teacher: TMPDIR is a folder of the build tree, empty again after. */
static void test_sweep_sigterm(void) {
    char tmp[600], log[600];
    snprintf(tmp, sizeof tmp, "%s/sweep_tmpdir", kt_build_dir());
    snprintf(log, sizeof log, "%s/sweep_sigterm.out", kt_build_dir());
    mkdir(tmp, 0755);
    CHECK(entries(tmp) == 0, "%s starts empty", tmp);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("TMPDIR", tmp, 1);
        if (!freopen(log, "w", stdout) || !freopen(log, "a", stderr)) _exit(127);
        execl(kldeval, kldeval, "sweep", "--ref", M, "--base", "q4_0", "--groups", "layers", "--max-docs",
              "40", "--ctx", "64", "--no-db", "--quiet", (char *)NULL);
        _exit(127);
    }
    /* wait for the teacher to appear, then for a moment of work */
    bool seen = false;
    for (int i = 0; i < 3000 && !seen; i++) {
        seen = entries(tmp) > 0;
        if (!seen) usleep(10000);
    }
    usleep(300000);
    kill(pid, SIGTERM);
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(seen, "the sweep made its temporary teacher in TMPDIR");
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) != 0, "the stopped sweep exits non-zero (status %d)", st);
    CHECK(entries(tmp) == 0, "SIGTERM removed the temporary teacher (%d entries left in %s)", entries(tmp), tmp);
}

static json_t *run_json(const char *args, const char *name) {
    char json[600], full[8192];
    snprintf(json, sizeof json, "%s/%s", kt_build_dir(), name);
    snprintf(full, sizeof full, "%s --json '%s' --quiet", args, json);
    int rc = run(full);
    CHECK(rc == 0, "exit 0 (got %d): %s", rc, args);
    if (rc) output_has("(exit 0)");
    json_error_t e;
    json_t *j = json_load_file(json, 0, &e);
    CHECK(j != NULL, "%s: %s", json, e.text);
    return j;
}

static double num(const json_t *o, const char *a, const char *b) {
    const json_t *x = json_object_get(o, a);
    if (b) x = json_object_get(x, b);
    return json_is_number(x) ? json_number_value(x) : NAN;
}


static void test_budget_sweep(void) {
    const char *args = "sweep --ref " M " --base q4_K_M,head=q5_K --groups layers --invert "
                       "--upgrade q8_0 --budget 6.282 " WIN " --no-db";
    json_t *a = run_json(args, "sweep_a.json"), *b = run_json(args, "sweep_b.json");
    if (!a || !b) return;
    json_t *ra = json_object_get(a, "ranked"), *rb = json_object_get(b, "ranked");
    CHECK(json_array_size(ra) == 3, "layers of rand-llama: blk:0, blk:1, head (got %zu)", json_array_size(ra));
    CHECK(json_equal(ra, rb), "the ranked table is reproducible bit for bit");
    CHECK(json_equal(json_object_get(a, "arms"), json_object_get(b, "arms")), "so are the arms");
    for (size_t i = 1; i < json_array_size(ra); i++)
        CHECK(num(json_array_get(ra, i - 1), "d_kld", "mean") >= num(json_array_get(ra, i), "d_kld", "mean"),
              "ranked by ΔKLD saved, row %zu", i);
    /* the all-base arm is the lockstep kl of the same policy */
    json_t *k = run_json("kl --ref " M " --arm " M "@q4_K_M,head=q5_K --chunking stream " WIN " --no-db", "sweep_kl.json");
    double base_kld = num(json_array_get(json_object_get(a, "arms"), 0), "kld", "mean");
    CHECK(fabs(base_kld - num(k, "kld", "mean")) <= 1e-9 * fabs(base_kld), "all-base %.12g vs lockstep %.12g",
          base_kld, num(k, "kld", "mean"));
    /* the proposal fits the budget and beats q4_K_M at its size */
    json_t *p = json_object_get(a, "proposal");
    json_t *q = run_json("kl --ref " M " --arm " Q4KM " --chunking stream " WIN " --no-db", "sweep_q4km.json");
    CHECK(num(p, "bpw", NULL) <= 6.282, "proposal bpw %.4f <= budget", num(p, "bpw", NULL));
    CHECK(num(p, "kld_mean", NULL) < num(q, "kld", "mean"), "proposal KLD %.6f < q4_K_M's %.6f",
          num(p, "kld_mean", NULL), num(q, "kld", "mean"));
    CHECK(json_integer_value(json_object_get(p, "groups_raised")) >= 1, "something was raised");
    json_decref(a);
    json_decref(b);
    json_decref(k);
    json_decref(q);
}

static void test_class_sweep_recorded(void) {
    char args[2048];
    snprintf(args, sizeof args, "sweep --ref " M " --base q4_0 --groups classes --teacher-top-k 512 " WIN
             " --db '%s' --html '%s/sweep.html' --label cls", db_path, kt_build_dir());
    json_t *j = run_json(args, "sweep_cls.json");
    if (!j) return;
    json_t *r = json_object_get(j, "ranked"), *arms = json_object_get(j, "arms");
    CHECK(json_array_size(r) == 8, "7 tensor classes + head (got %zu)", json_array_size(r));
    CHECK(json_array_size(arms) == 9, "the all-base arm and one per group");
    /* plain sweep against the reference itself: ΔKLD is the group arm's KLD */
    for (size_t i = 0; i < json_array_size(r); i++) {
        const json_t *g = json_array_get(r, i);
        const char *sel = json_string_value(json_object_get(g, "group"));
        for (size_t k = 0; k < json_array_size(arms); k++) {
            const json_t *a = json_array_get(arms, k);
            if (!strcmp(json_string_value(json_object_get(a, "label")), sel))
                CHECK(num(g, "d_kld", "mean") == num(a, "kld", "mean"), "%s: ΔKLD = its KLD", sel);
        }
    }
    char list[1024];
    snprintf(list, sizeof list, "runs list --db '%s' --mode sweep --label 'cls:*'", db_path);
    CHECK(run(list) == 0, "runs list");
    CHECK(output_has("cls: attn_q") && output_has("cls: all at base"), "every arm recorded");
    /* the reference is the model the teacher came from, never the temporary teacher */
    CHECK(output_has("rand-llama/f16.gguf") && !output_has_quiet("kldeval-teacher"),
          "the runs name the reference model");
    for (size_t i = 0; i < json_array_size(r); i++)
        CHECK(num(json_array_get(r, i), "top1_gained", "mean") >= 0,
              "top-1 gained by raising a group is >= 0 against the reference itself");
    char html[600];
    snprintf(html, sizeof html, "%s/sweep.html", kt_build_dir());
    size_t n;
    char *t = kt_read_file(html, &n);
    CHECK(strstr(t, "chart-rank") && strstr(t, "The sweep's groups ranked by mean KLD"),
          "the report has the sweep's ranked group chart");
    CHECK(!strstr(t, "kldeval-teacher") && strstr(t, "reference f16.gguf"), "the report names the reference model");
    free(t);
    json_decref(j);
}

static const json_t *arm_labelled(const json_t *arms, const char *label) {
    for (size_t i = 0; i < json_array_size(arms); i++)
        if (!strcmp(json_string_value(json_object_get(json_array_get(arms, i), "label")), label))
            return json_array_get(arms, i);
    CHECK(false, "an arm labelled %s", label);
    return NULL;
}

static void test_kv_sweep(void) {
    json_t *j = run_json("kl -m " M " --sweep kv=f32,f16,q8_0,q4_0 --floor " WIN " --no-db", "kvsweep.json");
    if (!j) return;
    const json_t *arms = json_object_get(j, "arms");
    CHECK(json_array_size(arms) == 5, "four values and the floor");
    const json_t *f32 = arm_labelled(arms, "kv=f32"), *f16 = arm_labelled(arms, "kv=f16"),
                 *q8 = arm_labelled(arms, "kv=q8_0"), *q4 = arm_labelled(arms, "kv=q4_0"),
                 *fl = arm_labelled(arms, "floor (noise=bf16)");
    if (!f32 || !f16 || !q8 || !q4 || !fl) return;
    CHECK(num(f32, "kld", "mean") == 0 && num(f32, "top1_agreement", NULL) == 1,
          "the reference value gives exactly 0");
    CHECK(num(f16, "kld", "mean") < num(q8, "kld", "mean") && num(q8, "kld", "mean") < num(q4, "kld", "mean"),
          "f16 < q8_0 < q4_0");
    CHECK(num(fl, "kld", "mean") > 0, "the floor is not zero");
    /* rand-llama: 2 layers × 2 KV heads × 64 = 256 values per position for K and again for V */
    const double per_layer_values = 2 * 2 * 64;
    CHECK(num(f32, "kv_bytes_per_token", NULL) == per_layer_values * 4 * 2, "f32 cache bytes");
    CHECK(num(f16, "kv_bytes_per_token", NULL) == per_layer_values * 2 * 2, "f16 cache bytes");
    CHECK(num(q8, "kv_bytes_per_token", NULL) == per_layer_values / 32 * 34 * 2, "q8_0: 34 B per 32");
    CHECK(num(q4, "kv_bytes_per_token", NULL) == per_layer_values / 32 * 18 * 2, "q4_0: 18 B per 32");
    double d = num(q4, "minus_floor", "d_kld");
    CHECK(fabs(d - (num(q4, "kld", "mean") - num(fl, "kld", "mean"))) < 1e-12, "KLD − floor is paired %g", d);
    CHECK(json_object_get(fl, "minus_floor") == NULL, "the floor has no difference with itself");
    json_decref(j);

    j = run_json("kl -m " M " --sweep kv_k=q8_0,q4_0×kv_v=q8_0,q4_0 " WIN " --no-db", "kvgrid.json");
    if (!j) return;
    arms = json_object_get(j, "arms");
    CHECK(json_array_size(arms) == 4, "a 2×2 grid");
    arm_labelled(arms, "kv_k=q4_0,kv_v=q8_0");
    const json_t *kq = arm_labelled(arms, "kv_k=q8_0,kv_v=q4_0");
    CHECK(kq && num(kq, "kv_bytes_per_token", NULL) == per_layer_values / 32 * (34 + 18), "mixed K/V bytes");
    json_decref(j);
}

static void test_errors(void) {
    static const struct {
        const char *args, *msg;
    } cases[] = {
        {"sweep --ref " M " " WIN, "--base POLICY are required"},
        {"sweep --ref " M " --base q4_0 --groups rows", "--groups expects layers, classes"},
        {"sweep --ref " M "@q4_0 --base q4_0", "the reference is the stored model"},
        {"sweep --ref " M " --base q9_9", "q9_9"},
        {"sweep --ref " M " --base q4_0 --budget 1 " WIN " --no-db --quiet", "below the base policy"},
        {"sweep --ref " M " --base q4_0 --chunking doc", "--chunking expects stream or llamacpp"},
        {"kl -m " M " --sweep kv=q9_0 " WIN, "q9_0"},
        {"kl -m " M " --sweep kv " WIN, "--sweep expects NAME=VALUE"},
        {"kl --reference-logits /nonexistent --arm " M " --sweep kv=q8_0", "needs a reference model"},
        {"kl -m " M " --sweep kv=q8_0 --chunking doc", "--chunking stream or llamacpp"},
        {"kl -m " M " --lever kv=q8_0 --teacher /tmp/x", "apply to --sweep and --floor"},
        /* gates: checked before any model loads (the reference does not exist) */
        {"sweep --ref /nonexistent.gguf --base q4_0 --gate 'kld.bogus<=1'", "'kld.bogus' is not a statistic"},
        {"sweep --ref /nonexistent.gguf --base q4_0 --gate 'kld.mean<=x'", "is not a finite number"},
        {"sweep --ref /nonexistent.gguf --base q4_0 --gate 'paired.kld.mean<=0@95'", "give --budget BPW"},
        {"sweep --ref /nonexistent.gguf --base q4_0 --budget 8 --bootstrap 0 --gate 'paired.kld.mean<=0@95'",
         "not with --bootstrap 0"},
        {"sweep --ref /nonexistent.gguf --base q4_0 --gate 'paired.kld.median<=0'", "not a paired statistic"},
        {"sweep --ref /nonexistent.gguf --base q4_0 --bootstrap -1", "--bootstrap"},
        {"kl -m " M " --sweep kv=q8_0 --gate 'paired.kld.mean<=0@95' " WIN " --no-db", "give a second value or --floor"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = run(cases[i].args);
        CHECK(rc != 0 && rc != 130, "fails: %s", cases[i].args);
        CHECK(output_has(cases[i].msg), "message '%s' for: %s", cases[i].msg, cases[i].args);
    }
}

/* The intervals and the paired comparison with the baseline arm (the
 * all-base arm of `sweep`, the floor of `kl --sweep --floor`), and the gates
 * on the arm `sweep` recommends. */
static void check_vs_baseline(const json_t *arms, const char *baseline, const char *what) {
    const json_t *base = NULL;
    for (size_t i = 0; i < json_array_size(arms); i++)
        if (!strcmp(json_string_value(json_object_get(json_array_get(arms, i), "label")), baseline))
            base = json_array_get(arms, i);
    CHECK(base && !json_object_get(base, "vs_baseline"), "%s: the baseline %s has no comparison with itself", what,
          baseline);
    if (!base) return;
    size_t compared = 0, consistent = 0, with_ci = 0;
    for (size_t i = 0; i < json_array_size(arms); i++) {
        const json_t *a = json_array_get(arms, i);
        const json_t *ci = json_object_get(json_object_get(a, "kld"), "ci95");
        const json_t *clo = json_array_get(json_object_get(ci, "mean"), 0), *chi = json_array_get(json_object_get(ci, "mean"), 1);
        if (json_is_number(clo) && json_is_number(chi) && json_number_value(clo) <= num(a, "kld", "mean") + 1e-12 &&
            json_number_value(chi) >= num(a, "kld", "mean") - 1e-12 && json_is_array(json_object_get(a, "top1_agreement_ci95")))
            with_ci++;
        const json_t *vs = json_object_get(a, "vs_baseline");
        if (a == base || !vs) continue;
        compared++;
        const json_t *mean = json_object_get(json_object_get(json_object_get(vs, "paired"), "kld"), "mean");
        double d = num(mean, "diff", NULL), lo = json_number_value(json_array_get(json_object_get(mean, "ci95"), 0)),
               hi = json_number_value(json_array_get(json_object_get(mean, "ci95"), 1)), p = num(mean, "p", NULL);
        const char *w = json_string_value(json_object_get(vs, "verdict"));
        const char *want = d == 0 && lo == 0 && hi == 0 ? "same" : lo > 0 ? "worse" : hi < 0 ? "better" : "n.d.";
        bool ok = fabs(d - (num(a, "kld", "mean") - num(base, "kld", "mean"))) < 1e-9 && lo <= hi && p > 0 && p <= 1 &&
                  w && !strcmp(w, want);
        if (ok) consistent++;
        else fprintf(stderr, "%s %s: diff %g [%g, %g] p %g verdict %s\n", what, json_string_value(json_object_get(a, "label")),
                     d, lo, hi, p, w ? w : "(none)");
    }
    CHECK(with_ci == json_array_size(arms), "%s: every arm has its KLD mean's interval around it and top-1's (%zu of %zu)",
          what, with_ci, json_array_size(arms));
    CHECK(compared + 1 == json_array_size(arms) && consistent == compared,
          "%s: every other arm compared with the baseline: ΔKLD = the means' difference, verdict from its "
          "interval (%zu of %zu)", what, consistent, compared);
}

static void test_intervals_and_gates(void) {
    const char *args = "sweep --ref " M " --base q4_0 --groups layers --budget 8 " WIN " --no-db";
    json_t *j = run_json(args, "sweep_ci.json");
    if (!j) return;
    const json_t *arms = json_object_get(j, "arms");
    check_vs_baseline(arms, "all at base", "sweep");
    /* the proposal raises a layer: distinguishably better than everything at q4_0 on these positions */
    const json_t *prop = json_array_get(arms, json_array_size(arms) - 1);
    CHECK(!strcmp(json_string_value(json_object_get(prop, "label")), "proposal") &&
          !strcmp(json_string_value(json_object_get(json_object_get(prop, "vs_baseline"), "verdict")), "better"),
          "the --budget proposal is better than the all-base arm");
    CHECK(output_has("95% intervals (bootstrap: 1000 resamples") && output_has("verdict"),
          "the text has the intervals table with verdicts");
    json_decref(j);

    /* gates on the proposal: a passing set exits 0, a failing one 3, each line with its value */
    char full[1024], json[600];
    snprintf(json, sizeof json, "%s/sweep_gate.json", kt_build_dir());
    snprintf(full, sizeof full, "%s --quiet --json '%s' --gate 'kld.mean<=1,top1>=0.5,paired.kld.mean<=0@95'", args, json);
    int rc = run(full);
    CHECK(rc == 0, "passing gates: exit 0 (got %d)", rc);
    CHECK(output_has("gates on proposal") && output_has("gate                          : kld.mean <= 1: ") &&
          output_has("paired.kld.mean <= 0: -") && !output_has_quiet("FAIL"), "each passing gate printed with its value");
    j = json_load_file(json, 0, NULL);
    CHECK(j && json_array_size(json_object_get(j, "gates")) == 3, "the JSON keeps the three verdicts");
    json_decref(j);
    snprintf(full, sizeof full, "%s --quiet --gate 'kld.mean<=1e-9,paired.kld.mean>=0@95'", args);
    rc = run(full);
    CHECK(rc == 3, "failing gates: exit 3 (got %d)", rc);
    CHECK(output_has("kld.mean <= 1e-09: 0.") && output_has("FAIL"), "the failing gate printed with its value and FAIL");
    /* without --budget the all-base arm is judged */
    snprintf(full, sizeof full, "sweep --ref " M " --base q4_0 --groups layers " WIN " --no-db --quiet --gate 'kld.mean<=1e-9'");
    rc = run(full);
    CHECK(rc == 3 && output_has("gates on all at base"), "without --budget the all-base arm is judged (exit %d)", rc);

    /* the run database keeps each arm's intervals and the judged arm's gates */
    char db[600];
    snprintf(db, sizeof db, "%s/cli_sweep_gate.sqlite", kt_build_dir());
    remove(db);
    snprintf(full, sizeof full, "sweep --ref " M " --base q4_0 --groups layers --budget 8 " WIN
             " --quiet --db '%s' --gate 'kld.mean<=1' --label g", db);
    CHECK(run(full) == 0, "recorded sweep with a gate: exit 0");
    snprintf(full, sizeof full, "runs export --jsonl --db '%s'", db);
    CHECK(run(full) == 0, "runs export");
    char *t = kt_read_file(out_path, NULL);
    size_t n_ci = 0, n_gates = 0;
    for (char *p = t; p && (p = strstr(p, "\"ci95\"")); p++) n_ci++;
    for (char *p = t; p && (p = strstr(p, "\"gates\"")); p++) n_gates++;
    free(t);
    CHECK(n_ci >= 5 && n_gates == 1, "the database rows keep the intervals (%zu) and one row the gates (%zu)", n_ci, n_gates);

    /* kl --sweep --gate: every arm but the floor judged, exit 3 when one fails */
    rc = run("kl -m " M " --sweep kv=q8_0,q4_0 --floor " WIN " --no-db --quiet --gate 'kld.mean<=0.01'");
    CHECK(rc == 3 && output_has("gates on kv=q8_0:") && output_has("gates on kv=q4_0:") &&
          !output_has_quiet("gates on floor"), "kl --sweep: each arm but the floor judged; q4_0 fails: exit %d", rc);
    snprintf(json, sizeof json, "%s/kvsweep_gate.json", kt_build_dir());
    snprintf(full, sizeof full, "kl -m " M " --sweep kv=f16 --floor " WIN " --no-db --quiet --json '%s' "
             "--gate 'kld.mean<=0.01,paired.kld.mean<=0.001@95'", json);
    rc = run(full);
    CHECK(rc == 0 && output_has("paired.kld.mean <= 0.001: "), "kl --sweep: kv=f16 within 0.001 of the floor: exit %d", rc);
    j = json_load_file(json, 0, NULL);
    const json_t *g0 = json_array_get(json_object_get(j, "gates"), 0);
    CHECK(j && json_array_size(json_object_get(j, "gates")) == 1 &&
          !strcmp(json_string_value(json_object_get(g0, "arm")), "kv=f16") && json_is_true(json_object_get(g0, "pass")) &&
          json_array_size(json_object_get(g0, "gates")) == 2, "the JSON keeps the judged arm's verdicts");
    json_decref(j);

    /* kl --sweep --floor: the floor is the baseline */
    j = run_json("kl -m " M " --sweep kv=f16,q4_0 --floor " WIN " --no-db", "kvsweep_ci.json");
    if (!j) return;
    const json_t *karms = json_object_get(j, "arms");
    const json_t *fl = json_array_get(karms, json_array_size(karms) - 1);
    check_vs_baseline(karms, json_string_value(json_object_get(fl, "label")), "kl --sweep --floor");
    json_decref(j);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_cli_sweep KLDEVAL\n");
        return 2;
    }
    kldeval = argv[1];
    snprintf(out_path, sizeof out_path, "%s/cli_sweep.out", kt_build_dir());
    snprintf(db_path, sizeof db_path, "%s/cli_sweep.sqlite", kt_build_dir());
    remove(db_path);
    test_errors();
    test_kv_sweep();
    test_class_sweep_recorded();
    test_budget_sweep();
    test_intervals_and_gates();
    test_sweep_sigterm();
    return kt_finish();
}
