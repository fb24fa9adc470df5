/* test_paired.c — paired verdicts (`runs compare`, eval/bootstrap.c's
 * kld_bootstrap_paired): rand-llama's q4_0 and q4_K_M against f16 on the
 * shared corpus are distinguishable with the sign the exact means give;
 * the same arm twice is "not distinguishable" with ΔKLD exactly 0; on
 * synthetic pairs a real shift is found and no shift is found about as
 * often as the level says; `runs compare A B --gate paired.kld.mean<=0@95`
 * fails (exit 3) for the worse arm against the better and passes the other
 * way round. */
#include "eval/bootstrap.h"
#include "testlib.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static const char *kldeval;

static uint64_t rng;
static double uniform01(void) {
    uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return ((double)(z >> 11) + 0.5) / 9007199254740992.0;
}

static void test_synthetic(void) {
    enum { N = 2000, PER = 20 };
    static double a[N], b[N], base[N];
    static uint8_t ta[N], tb[N];
    static uint32_t block[N];
    kld_error err = {0};
    int found = 0, false_alarm = 0;
    for (int t = 0; t < 40; t++) {
        rng = 77 + (uint64_t)t;
        for (int i = 0; i < N; i++) {
            base[i] = -log(uniform01());
            block[i] = (uint32_t)(i / PER);
            a[i] = base[i] * (1.0 + 0.1 * uniform01()); /* A: 5% worse on average */
            b[i] = base[i] * (0.95 + 0.1 * uniform01()); /* B: the same scale, shifted down */
            ta[i] = uniform01() < 0.9, tb[i] = uniform01() < 0.9;
        }
        kld_paired_bootstrap p;
        CHECK_OK(kld_bootstrap_paired(a, b, ta, tb, block, N, 300, (uint64_t)t, &p, &err), err);
        found += p.mean.ci.lo > 0;
        /* no shift: A drawn as B is, independently */
        for (int i = 0; i < N; i++) a[i] = base[i] * (0.95 + 0.1 * uniform01());
        CHECK_OK(kld_bootstrap_paired(b, b, ta, tb, block, N, 50, 1, &p, &err), err);
        CHECK(p.mean.diff == 0 && p.mean.ci.lo == 0 && p.mean.ci.hi == 0 && p.mean.p == 1,
              "an arm against itself: difference exactly 0, p 1");
        kld_paired_bootstrap q;
        CHECK_OK(kld_bootstrap_paired(a, b, ta, tb, block, N, 300, (uint64_t)t, &q, &err), err);
        false_alarm += q.mean.ci.lo > 0 || q.mean.ci.hi < 0;
    }
    printf("synthetic: a 5%% shift found in %d of 40 samples; no shift called a difference in %d of 40\n", found,
           false_alarm);
    CHECK(found >= 36, "a 5%% shift in KLD is found (%d/40)", found);
    CHECK(false_alarm <= 6, "without a shift, a difference is called rarely (%d/40; 2 expected)", false_alarm);
}

static char *run_out(const char *args) {
    char cmd[8192], path[600];
    snprintf(path, sizeof path, "%s/paired.out", kt_build_dir());
    snprintf(cmd, sizeof cmd, "'%s' %s > '%s' 2>&1", kldeval, args, path);
    int st = system(cmd);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "kldeval %s", args);
    return kt_read_file(path, NULL);
}

static double json_kld_mean(const char *path) {
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    double m = json_real_value(json_object_get(json_object_get(j, "kld"), "mean"));
    json_decref(j);
    return m;
}

static void test_runs_compare(void) {
    char db[600], args[4096], js[3][600];
    snprintf(db, sizeof db, "%s/paired.sqlite", kt_build_dir());
    remove(db);
    static const char *const arms[3] = {"q4_0", "q4_K_M", "q4_0"};
    for (int i = 0; i < 3; i++) {
        snprintf(js[i], sizeof js[i], "%s/paired%d.json", kt_build_dir(), i);
        snprintf(args, sizeof args,
                 "kl --ref " KT_SHARED "/models/rand-llama/f16.gguf --arm " KT_SHARED "/models/rand-llama/%s.gguf "
                 "--corpus " KT_SHARED "/corpus/licenses.txt --ctx 128 --max-docs 150 --quiet --bootstrap 0 "
                 "--db '%s' --json '%s'", arms[i], db, js[i]);
        free(run_out(args));
    }
    const double m0 = json_kld_mean(js[0]), m1 = json_kld_mean(js[1]);
    snprintf(args, sizeof args, "runs compare 1 2 3 --db '%s'", db);
    char *out = run_out(args);
    const char *v12 = out ? strstr(out, "run 1 vs run 2") : NULL, *v13 = out ? strstr(out, "run 1 vs run 3") : NULL;
    char want[64];
    snprintf(want, sizeof want, "run %d is closer to the reference", m0 < m1 ? 1 : 2);
    const char *verdict12 = v12 ? strstr(v12, "verdict") : NULL;
    CHECK(verdict12 && (!v13 || verdict12 < v13) && !strncmp(strstr(verdict12, "run "), want, strlen(want)),
          "q4_0 vs q4_K_M: distinguishable, the closer run the one with the lower exact mean (%g vs %g): %.200s", m0,
          m1, verdict12 ? verdict12 : "(no verdict)");
    const char *verdict13 = v13 ? strstr(v13, "verdict") : NULL;
    CHECK(verdict13 && strstr(verdict13, "not distinguishable") && strstr(verdict13, "exactly 0"),
          "the same arm twice: not distinguishable, ΔKLD exactly 0: %.160s", verdict13 ? verdict13 : "(none)");
    free(out);
    /* gates: q4_0 (run 1) against the q4_K_M baseline (run 2) is distinguishably worse; the other way not */
    char cmd[4096];
    const int worse = m0 > m1 ? 1 : 2, better = 3 - worse;
    snprintf(cmd, sizeof cmd, "'%s' runs compare %d %d --db '%s' --gate 'paired.kld.mean<=0@95' >/dev/null 2>&1",
             kldeval, worse, better, db);
    int st = system(cmd);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 3, "paired.kld.mean<=0@95 fails (exit 3) for the worse arm "
          "against the better baseline (exit %d)", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    snprintf(cmd, sizeof cmd, "'%s' runs compare %d %d --db '%s' --gate 'paired.kld.mean<=0@95' >/dev/null 2>&1",
             kldeval, better, worse, db);
    st = system(cmd);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "and passes the other way round (exit %d)",
          WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    static const char *const bad[] = {"kld.mean<=0", "paired.kld.mean<=0@90", "paired.kld.p98<=0", "paired.top1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(cmd, sizeof cmd, "'%s' runs compare 1 2 --db '%s' --gate '%s' >/dev/null 2>&1", kldeval, db, bad[i]);
        st = system(cmd);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 2, "--gate '%s' refused (exit 2)", bad[i]);
    }
    snprintf(cmd, sizeof cmd, "'%s' runs compare 1 2 3 --db '%s' --gate 'paired.kld.mean<=0' >/dev/null 2>&1",
             kldeval, db);
    st = system(cmd);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 2, "--gate with three runs refused (exit 2)");
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    kldeval = argv[1];
    test_synthetic();
    test_runs_compare();
    return kt_finish();
}
