/* test_cli_kl.c — `kldeval kl` as a user runs it: the JSON report carries
 * the documented keys and agrees with the pin line and the per-position
 * TSV; --pin appends; Ctrl-C (SIGINT) gives a partial report; bad flags and
 * files fail with a message; --gate passes (0) and fails (3); the run's peak
 * resident size stays within the two models' memory plans. */
#include "testlib.h"

#include "eval/corpus.h"

#include <jansson.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

static const char *kldeval;

static int run(const char *args) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' %s >/dev/null 2>&1", kldeval, args);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static size_t count_lines(const char *path) {
    size_t n = 0, len;
    char *t = kt_read_file(path, &len);
    for (size_t i = 0; i < len; i++) n += t[i] == '\n';
    free(t);
    return n;
}

static void test_reports(void) {
    char json[512], pin[512], tsv[512], args[4096];
    snprintf(json, sizeof json, "%s/cli_kl.json", kt_build_dir());
    snprintf(pin, sizeof pin, "%s/cli_kl.pin", kt_build_dir());
    snprintf(tsv, sizeof tsv, "%s/cli_kl.tsv", kt_build_dir());
    remove(pin);
    snprintf(args, sizeof args,
             "kl --ref %s/models/rand-llama/f16.gguf --arm %s/models/rand-llama/q4_0.gguf "
             "--max-docs 5 --max-tokens 48 --chunk 20 --threads 2 --json '%s' --pin '%s' "
             "--per-position '%s' --label cli-test",
             KT_SHARED, KT_SHARED, json, pin, tsv);
    CHECK(run(args) == 0, "kl with reports exits 0");
    CHECK(run(args) == 0, "second run exits 0");
    json_error_t jerr;
    json_t *j = json_load_file(json, 0, &jerr);
    CHECK(j != NULL, "JSON report parses: %s", jerr.text);
    if (!j) return;
    static const char *keys[] = {"n_positions", "top1_agreement", "ppl_ref", "ppl_arm", "elapsed_s", "config"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        CHECK(json_object_get(j, keys[i]) != NULL, "JSON has %s", keys[i]);
    const json_t *kld = json_object_get(j, "kld");
    static const char *kkeys[] = {"mean", "stderr", "median", "p99", "max"};
    for (size_t i = 0; i < sizeof kkeys / sizeof kkeys[0]; i++)
        CHECK(json_is_number(json_object_get(kld, kkeys[i])), "JSON has kld.%s", kkeys[i]);
    int64_t n = json_integer_value(json_object_get(j, "n_positions"));
    if (!n) n = (int64_t)json_number_value(json_object_get(j, "n_positions"));
    CHECK(n == 5 * 48, "n_positions %lld (5 documents × 48 tokens)", (long long)n);
    double mean = json_number_value(json_object_get(kld, "mean"));
    CHECK(mean > 0.01 && mean < 1.0, "q4_0 mean KLD %g is plausible", mean);
    const json_t *cfg = json_object_get(j, "config");
    /* the model files' hashes (computed on threads of their own while the run starts) */
    static const char *const role[] = {"ref", "arm"}, *const file[] = {"f16", "q4_0"};
    for (int i = 0; i < 2; i++) {
        char path[512], want[65] = "";
        uint8_t d[32];
        snprintf(path, sizeof path, "%s/models/rand-llama/%s.gguf", KT_SHARED, file[i]);
        if (kld_sha256_file(path, d, NULL) == KLD_OK) kld_hex_digest(d, want);
        const char *got = json_string_value(json_object_get(json_object_get(cfg, role[i]), "sha256"));
        CHECK(got && *want && !strcmp(got, want), "config.%s.sha256 %s is %s's (%s)", role[i], got ? got : "null",
              file[i], want);
    }
    CHECK(json_is_string(json_object_get(json_object_get(cfg, "corpus"), "sha256")), "config has the corpus hash");
    CHECK(!json_is_true(json_object_get(j, "partial")), "not partial");
    CHECK(count_lines(pin) == 2, "two runs append two pin lines (%zu)", count_lines(pin));
    CHECK(count_lines(tsv) == (size_t)n + 1, "TSV has a header and %lld rows (%zu lines)", (long long)n,
          count_lines(tsv));
    /* the pin's mean is the JSON's */
    char *pins = kt_read_file(pin, NULL);
    json_t *p1 = json_loadb(pins, strcspn(pins, "\n"), 0, &jerr);
    CHECK(p1 && json_number_value(json_object_get(p1, "kld_mean")) == mean, "pin kld_mean equals JSON");
    CHECK(p1 && !strcmp(json_string_value(json_object_get(p1, "label")), "cli-test"), "pin label");
    json_decref(p1);
    free(pins);
    json_decref(j);
}

/* SIGINT during a long run: the report so far, marked partial, exit 130. */
static void test_interrupt(void) {
    char json[512];
    snprintf(json, sizeof json, "%s/cli_kl_partial.json", kt_build_dir());
    remove(json);
    pid_t pid = fork();
    if (pid == 0) {
        int devnull = open("/dev/null", 1);
        dup2(devnull, 1);
        dup2(devnull, 2);
        execl(kldeval, kldeval, "kl", "--ref", KT_SHARED "/models/rand-llama/f16.gguf", "--arm",
              KT_SHARED "/models/rand-llama/q8_0.gguf", "--corpus", KT_SHARED "/corpus/licenses.txt",
              "--chunk", "16", "--threads", "1", "--json", json, (char *)NULL);
        _exit(127);
    }
    usleep(1500 * 1000);
    kill(pid, SIGINT);
    int st;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 130, "interrupted run exits 130 (status %d)", st);
    json_error_t jerr;
    json_t *j = json_load_file(json, 0, &jerr);
    CHECK(j && json_is_true(json_object_get(j, "partial")), "JSON report marked partial");
    CHECK(j && json_number_value(json_object_get(j, "n_positions")) > 0, "some positions scored");
    json_decref(j);
}

static void test_errors(void) {
    char args[1024];
    CHECK(run("kl --ref x.gguf") == 2, "missing --arm exits 2");
    CHECK(run("kl --ref a --arm b --ctx 1") == 2, "--ctx 1 refused");
    CHECK(run("kl --ref a --arm b --chunking nope") == 2, "bad --chunking refused");
    CHECK(run("kl --ref /nonexistent.gguf --arm /nonexistent.gguf") == 1, "missing model exits 1");
    /* a missing corpus is found before any model loads (the models' paths do not exist either) */
    char err_path[600];
    snprintf(err_path, sizeof err_path, "%s/cli_kl_corpus.err", kt_build_dir());
    snprintf(args, sizeof args, "kl --ref /nonexistent-ref.gguf --arm /nonexistent-arm.gguf "
             "--corpus /nonexistent.txt 2>'%s'", err_path);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' %s", kldeval, args);
    int st = system(cmd);
    char *msg = kt_read_file(err_path, NULL);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 2 && msg && strstr(msg, "--corpus /nonexistent.txt") &&
              !strstr(msg, "nonexistent-ref"),
          "a missing corpus exits 2 before the models load: %s", msg ? msg : "");
    free(msg);
    CHECK(run("kl --help") == 0, "--help exits 0");
}

/* Runs kldeval with args, stdout into out; the exit status. */
static int run_out(const char *args, const char *out) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' %s >'%s' 2>/dev/null", kldeval, args, out);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* --gate: a passing and a failing condition (exit 0 and 3), each printed
 * with its value, kept in the JSON and the database row; bad conditions
 * refused before any model loads. */
static void test_gates(void) {
    const char *b = kt_build_dir();
    char args[2048], json[600], db[600], txt[600];
    snprintf(json, sizeof json, "%s/cli_kl_gate.json", b);
    snprintf(db, sizeof db, "%s/cli_kl_gate.sqlite", b);
    snprintf(txt, sizeof txt, "%s/cli_kl_gate.txt", b);
    remove(db);
    const char *models = "--ref " KT_SHARED "/models/stories260K/f32.gguf --arm " KT_SHARED
                         "/models/stories260K/q8_0.gguf --quiet";
    snprintf(args, sizeof args, "kl %s --no-db --json '%s'", models, json);
    CHECK(run(args) == 0, "kl for the gates' reference figures");
    json_error_t je;
    json_t *j = json_load_file(json, 0, &je);
    const double mean = json_real_value(json_object_get(json_object_get(j, "kld"), "mean"));
    const double top1 = json_real_value(json_object_get(j, "top1_agreement"));
    json_decref(j);
    CHECK(mean > 0 && top1 > 0, "reference figures: kld.mean %g, top1 %g", mean, top1);
    /* passing: exit 0 */
    snprintf(args, sizeof args, "kl %s --db '%s' --json '%s' --gate 'kld.mean<=%.17g, top1>=%.17g'", models, db,
             json, mean, top1);
    CHECK(run_out(args, txt) == 0, "gates at the run's own values pass: exit 0");
    j = json_load_file(json, 0, &je);
    const json_t *g = json_object_get(j, "gates");
    CHECK(json_array_size(g) == 2 && json_is_true(json_object_get(json_array_get(g, 0), "pass")) &&
              json_real_value(json_object_get(json_array_get(g, 0), "value")) == mean &&
              !strcmp(json_string_value(json_object_get(json_array_get(g, 1), "statistic")), "top1_agreement"),
          "JSON gates: both with their values, top1 read as top1_agreement");
    json_decref(j);
    char *t = kt_read_file(txt, NULL);
    CHECK(t && strstr(t, "kld.mean <= ") && strstr(t, "PASS") && !strstr(t, "FAIL"), "text: each gate PASS");
    free(t);
    /* failing: exit 3, the failing condition printed FAIL with its value */
    snprintf(args, sizeof args, "kl %s --db '%s' --gate 'kld.mean<%.17g,kld.p99.9<=1'", models, db, mean * 0.999);
    CHECK(run_out(args, txt) == 3, "a failing gate: exit 3 (not 1, an error)");
    t = kt_read_file(txt, NULL);
    CHECK(t && strstr(t, "kld.mean < ") && strstr(t, "FAIL") && strstr(t, "kld.p99_9 <= 1: ") && strstr(t, "PASS"),
          "text: the failing gate FAIL, the other PASS");
    free(t);
    /* the database row carries them */
    snprintf(args, sizeof args, "'%s' runs show 2 --db '%s' --json > '%s' 2>/dev/null", kldeval, db, txt);
    int st = system(args);
    j = WIFEXITED(st) && WEXITSTATUS(st) == 0 ? json_load_file(txt, 0, &je) : NULL;
    g = json_object_get(j, "gates");
    CHECK(json_array_size(g) == 2 && json_is_false(json_object_get(json_array_get(g, 0), "pass")),
          "the database row keeps the gates and their verdicts");
    json_decref(j);
    /* refused before loading: the models do not exist */
    static const char *const bad[] = {"kld.p98<=1", "kld.mean=<1", "top1>=abc", "kld.mean", "", "speed>=1",
                                      "kld.mean<=1,", "<=1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(args, sizeof args, "kl --ref /nonexistent-ref.gguf --arm /nonexistent-arm.gguf --gate '%s'", bad[i]);
        CHECK(run(args) == 2, "--gate '%s' refused with exit 2 before any model loads", bad[i]);
    }
}

#if !defined(__SANITIZE_ADDRESS__) /* (the peak is not measured under AddressSanitizer: below) */
/* The plan's total (bytes) of `kldeval inspect MODEL --plan` at these sizes. */
static double plan_total(const char *model, const char *ctx, const char *chunk, const char *threads) {
    char cmd[2048], *out = NULL;
    snprintf(cmd, sizeof cmd, "'%s' inspect '%s' --plan --ctx %s --chunk %s --threads %s --json", kldeval, model,
             ctx, chunk, threads);
    double total = -1;
    if (kt_run_capture(cmd, &out) == 0) {
        json_t *j = json_loads(out, 0, NULL);
        const json_t *t = json_object_get(json_object_get(j, "plan"), "total_bytes");
        if (json_is_integer(t)) total = (double)json_integer_value(t);
        json_decref(j);
    }
    free(out);
    return total;
}
#endif

/* A KL run holds two models, each within the plan inspect prints for it: the
 * process's peak RSS is at most the sum of the two totals. (Under
 * AddressSanitizer the shadow memory is resident too: not measured there.) */
static void test_peak_within_plan(void) {
#if defined(__SANITIZE_ADDRESS__)
    printf("test_cli_kl: peak RSS against the plan not measured under AddressSanitizer\n");
#else
    const char *ref = KT_SHARED "/models/rand-llama/f16.gguf", *arm = KT_SHARED "/models/rand-llama/q4_K_M.gguf";
    const double plan = plan_total(ref, "512", "64", "2") + plan_total(arm, "512", "64", "2");
    pid_t pid = fork();
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, 1);
        dup2(devnull, 2);
        execl(kldeval, kldeval, "kl", "--ref", ref, "--arm", arm, "--corpus", KT_SHARED "/corpus/licenses.txt",
              "--ctx", "512", "--chunk", "64", "--threads", "2", "--no-db", (char *)NULL);
        _exit(127);
    }
    int st = 0;
    struct rusage ru;
    CHECK(wait4(pid, &st, 0, &ru) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0, "kl run (status %d)", st);
    const double peak = (double)ru.ru_maxrss * 1024;
    CHECK(plan > 0 && peak > 0 && peak <= plan, "peak RSS %.1f MiB within the plans' %.1f MiB", peak / 1048576,
          plan / 1048576);
    /* and the plan is not a blanket: the weights and logits are most of it */
    CHECK(peak > 0.5 * plan, "peak RSS %.1f MiB is more than half the plans' %.1f MiB", peak / 1048576,
          plan / 1048576);
#endif
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    kldeval = argv[1];
    test_reports();
    test_interrupt();
    test_errors();
    test_gates();
    test_peak_within_plan();
    return kt_finish();
}
