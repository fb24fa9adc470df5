/* test_kl_pair.c — `kl --ref R --arm A --arm B` (src/cli/kl_pair.c): both
 * arms scored on the same tokens, each report equal to its one-arm `kl`;
 * the paired comparison of rand-llama's q4_0 and q4_K_M is distinguishable
 * with the sign the exact means give; the same arm twice is "not
 * distinguishable" with ΔKLD exactly 0; `--gate paired.kld.mean<=0@95`
 * fails (exit 3) for the worse arm against the better and passes the other
 * way round; both runs are recorded and `runs compare` of them agrees;
 * bad input fails before any model loads. */
#include "testlib.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#define R KT_SHARED "/models/rand-llama/"
#define WIN "--max-docs 24 --quiet"

static const char *kldeval;
static char out_path[600];

static int run(const char *args) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' %s >'%s' 2>&1", kldeval, args, out_path);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static bool output_has(const char *s) {
    char *t = kt_read_file(out_path, NULL);
    bool ok = t && strstr(t, s);
    if (!ok) fprintf(stderr, "output was: %s\n", t ? t : "(none)");
    free(t);
    return ok;
}

static bool output_lacks(const char *s) {
    char *t = kt_read_file(out_path, NULL);
    bool ok = !t || !strstr(t, s);
    free(t);
    return ok;
}

static json_t *load(const char *path) {
    json_error_t e;
    json_t *j = json_load_file(path, 0, &e);
    CHECK(j != NULL, "%s: %s", path, e.text);
    return j;
}

static double at(const json_t *o, const char *a, const char *b, const char *c) {
    const json_t *x = json_object_get(o, a);
    if (b) x = json_object_get(x, b);
    if (c) x = json_object_get(x, c);
    return json_is_number(x) ? json_number_value(x) : NAN;
}

static void test_distinguishable(void) {
    char js[600], one[600], args[4096];
    snprintf(js, sizeof js, "%s/kl_pair.json", kt_build_dir());
    snprintf(one, sizeof one, "%s/kl_pair_one.json", kt_build_dir());
    remove(js);
    snprintf(args, sizeof args, "kl --ref " R "f16.gguf --arm " R "q4_0.gguf --arm " R "q4_K_M.gguf " WIN
             " --no-db --json '%s' --gate 'paired.kld.mean<=0@95,kld.mean<=1'", js);
    const int rc = run(args);
    json_t *j = load(js);
    if (!j) return;
    const json_t *a = json_object_get(j, "a"), *b = json_object_get(j, "b"), *p = json_object_get(j, "paired");
    const double ma = at(a, "kld", "mean", NULL), mb = at(b, "kld", "mean", NULL);
    CHECK(!strcmp(json_string_value(json_object_get(j, "schema")), "kldeval.kl-pair/1"), "schema kldeval.kl-pair/1");
    CHECK(at(a, "n_positions", NULL, NULL) == at(b, "n_positions", NULL, NULL) && at(a, "n_positions", NULL, NULL) > 1000,
          "both arms scored on the same %g positions", at(a, "n_positions", NULL, NULL));
    CHECK(json_is_array(json_object_get(json_object_get(a, "kld"), "ci95") ? json_object_get(json_object_get(json_object_get(a, "kld"), "ci95"), "p99_9") : NULL),
          "each arm keeps its intervals (kld.ci95)");
    /* the paired difference is the difference of the exact means, its interval excludes 0 */
    const double d = at(p, "kld", "mean", "diff");
    const json_t *ci = json_object_get(json_object_get(json_object_get(p, "kld"), "mean"), "ci95");
    const double lo = json_number_value(json_array_get(ci, 0)), hi = json_number_value(json_array_get(ci, 1));
    printf("q4_0 %.6f, q4_K_M %.6f: ΔKLD %+.6f [%+.6f, %+.6f], p %.3g\n", ma, mb, d, lo, hi,
           at(p, "kld", "mean", "p"));
    CHECK(fabs(d - (ma - mb)) < 1e-9, "ΔKLD mean %g = the means' difference %g", d, ma - mb);
    CHECK(ma != mb && (ma > mb ? lo > 0 : hi < 0), "distinguishable with the sign of the exact means");
    char want[64];
    snprintf(want, sizeof want, "arm %c is closer to the reference", ma < mb ? 'A' : 'B');
    const char *verdict = json_string_value(json_object_get(p, "verdict"));
    CHECK(verdict && !strncmp(verdict, want, strlen(want)), "verdict: %s", verdict ? verdict : "(none)");
    CHECK(output_has("paired bootstrap (1000 resamples of 24 windows), A − B") && output_has(want) &&
          output_has("ΔKLD p99.9") && output_has("Δtop-1"), "the text prints the paired block and the verdict");
    /* arm A is q4_0, the worse: the gate fails (exit 3), each line with its value */
    CHECK(ma > mb && rc == 3, "q4_0 against the q4_K_M baseline: paired.kld.mean<=0@95 fails, exit 3 (got %d)", rc);
    CHECK(output_has("paired.kld.mean <= 0: ") && output_has("FAIL") && output_has("kld.mean <= 1: "),
          "each gate printed with its value");
    CHECK(json_array_size(json_object_get(j, "gates")) == 2, "the JSON keeps both verdicts");
    /* arm A's figures are the one-arm kl's */
    snprintf(args, sizeof args, "kl --ref " R "f16.gguf --arm " R "q4_0.gguf " WIN " --no-db --json '%s'", one);
    CHECK(run(args) == 0, "one-arm kl");
    json_t *k = load(one);
    CHECK(k && at(k, "kld", "mean", NULL) == ma && at(k, "kld", "p99_9", NULL) == at(a, "kld", "p99_9", NULL) &&
          at(k, "top1_agreement", NULL, NULL) == at(a, "top1_agreement", NULL, NULL),
          "arm A's statistics equal the one-arm kl's exactly (%.17g vs %.17g)", k ? at(k, "kld", "mean", NULL) : NAN, ma);
    json_decref(k);
    json_decref(j);

    /* the other way round: q4_K_M against the q4_0 baseline passes */
    snprintf(args, sizeof args, "kl --ref " R "f16.gguf --arm " R "q4_K_M.gguf --arm " R "q4_0.gguf " WIN
             " --no-db --gate 'paired.kld.mean<=0@95'");
    int rc2 = run(args);
    CHECK(rc2 == 0 && output_has("PASS") && output_has("arm A is closer to the reference"),
          "q4_K_M against the q4_0 baseline: the gate passes, exit 0 (got %d)", rc2);
}

static void test_same_arm_and_db(void) {
    char db[600], args[4096];
    snprintf(db, sizeof db, "%s/kl_pair.sqlite", kt_build_dir());
    remove(db);
    snprintf(args, sizeof args, "kl --ref " R "f16.gguf --arm " R "q4_K_M.gguf --arm " R "q4_K_M.gguf " WIN
             " --db '%s' --label same --gate 'paired.kld.mean<=0@95,paired.kld.mean>=0@95'", db);
    int rc = run(args);
    CHECK(rc == 0, "the same arm twice: both two-sided gates pass (exit %d)", rc);
    CHECK(output_has("ΔKLD mean                    +0 [+0, +0] p = 1") &&
          output_has("not distinguishable: the same KLD at every position (ΔKLD exactly 0)"),
          "the same arm twice: ΔKLD exactly 0, not distinguishable");
    CHECK(output_has("recorded as run 1") && output_has("recorded as run 2"), "both arms recorded");
    snprintf(args, sizeof args, "runs compare 1 2 --db '%s'", db);
    CHECK(run(args) == 0 && output_has("paired over") && output_has("ΔKLD exactly 0"),
          "both runs recorded; runs compare of them gives the same verdict");
}

/* One saved teacher read by both arms (the reference never forwarded again). */
static void test_saved_teacher(void) {
    char dir[600], args[4096];
    snprintf(dir, sizeof dir, "%s/kl_pair_teacher", kt_build_dir());
    snprintf(args, sizeof args, "rm -rf '%s'", dir);
    CHECK(system(args) == 0, "clean %s", dir);
    snprintf(args, sizeof args, "dump -m " R "f16.gguf --out '%s' --max-docs 16 --ctx 96 --quiet --no-db", dir);
    CHECK(run(args) == 0, "a saved teacher");
    snprintf(args, sizeof args, "kl --reference-logits '%s' --arm " R "q4_0.gguf --arm " R "q4_K_M.gguf --quiet "
             "--no-db --gate 'paired.kld.mean>=0@95'", dir);
    int rc = run(args);
    CHECK(rc == 0 && output_has("paired bootstrap (1000 resamples of ") &&
          output_has("arm B is closer to the reference") && output_has("PASS"),
          "both arms against one saved teacher: paired, q4_K_M closer, A not distinguishably better (exit %d)", rc);
}

static void test_errors(void) {
    static const struct { const char *args, *msg; } cases[] = {
        {"kl --ref " R "f16.gguf --arm " R "q4_0.gguf --arm /nonexistent.gguf --no-db", "arm B: /nonexistent.gguf"},
        {"kl --ref " R "f16.gguf --arm " R "q4_0.gguf --arm " R "q4_0.gguf --arm " R "q8_0.gguf --no-db",
         "kl compares at most two arms"},
        {"kl --ref " R "f16.gguf --arm " R "q4_0.gguf --gate 'paired.kld.mean<=0@95' --no-db",
         "paired gates judge two arms"},
        {"kl --ref " R "f16.gguf --arm " R "q4_0.gguf --arm " R "q8_0.gguf --gate 'paired.kld.p98<=0' --no-db",
         "not a paired statistic"},
        {"kl --ref " R "f16.gguf --arm " R "q4_0.gguf --arm " R "q8_0.gguf --gate 'paired.kld.mean<=0@90' --no-db",
         "only @95"},
        {"kl --ref " R "f16.gguf --arm " R "q4_0.gguf --arm " R "q8_0.gguf --bootstrap 0 --gate "
         "'paired.kld.mean<=0' --no-db", "not with --bootstrap 0"},
        {"kl --ref " R "f16.gguf --arm " R "q4_0.gguf --arm " R "q8_0.gguf --sweep kv=q8_0 --no-db",
         "do not combine with --sweep"},
        {"kl --ref " R "f16.gguf --arm " R "q4_0.gguf --arm " R "q8_0.gguf --per-position /tmp/kl_pair.tsv --no-db",
         "do not combine"},
        {"kl --ref " R "f16.gguf --arm " R "q4_0.gguf --arm " R "q8_0.gguf --json " R "q8_0.gguf --no-db",
         "--json"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = run(cases[i].args);
        CHECK(rc == 1 || rc == 2, "fails (exit %d): %s", rc, cases[i].args);
        CHECK(output_has(cases[i].msg) && output_lacks("======"),
              "before any arm is scored, message '%s'", cases[i].msg);
    }
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_kl_pair KLDEVAL\n");
        return 2;
    }
    kldeval = argv[1];
    snprintf(out_path, sizeof out_path, "%s/kl_pair.out", kt_build_dir());
    test_errors();
    test_distinguishable();
    test_same_arm_and_db();
    test_saved_teacher();
    return kt_finish();
}
