/* test_cli_engine.c — `kldeval logits` and `kldeval generate` as a user runs
 * them: --out writes the oracle layout ([n_ids][n_vocab] float32 LE) and
 * matches the float64 reference; greedy generation reproduces the oracle's
 * continuation; bad ids fail with a message. */
#include "testlib.h"

#include <math.h>
#include <stdlib.h>
#include <sys/wait.h>

static const char *kldeval;

static char *run(const char *args, int *status) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' %s 2>/dev/null", kldeval, args);
    char *out = NULL;
    *status = kt_run_capture(cmd, &out);
    return out;
}

static void test_logits_out(const char *model, const char *oracle_dir, const char *arm) {
    char out[512], args[2048], oracle[512];
    snprintf(out, sizeof out, "%s/cli_logits_%s.f32", kt_build_dir(), arm);
    snprintf(oracle, sizeof oracle, "%s/%s.numpy-f64.logits.f32", oracle_dir, arm);
    snprintf(args, sizeof args, "logits -m '%s' --ids-file '%s/ids.i32' --out '%s' --chunk 5 --threads 2",
             model, oracle_dir, out);
    int st;
    free(run(args, &st));
    CHECK(st == 0, "%s: logits exits 0 (%d)", model, st);
    size_t na, nb;
    char *a = kt_read_file(out, &na), *b = kt_read_file(oracle, &nb);
    CHECK(na == nb && na % 4 == 0, "%s: %zu bytes, oracle %zu", model, na, nb);
    double worst = 0;
    for (size_t i = 0; na == nb && i < na / 4; i++) {
        double d = fabs((double)kld_load_f32(a + 4 * i) - (double)kld_load_f32(b + 4 * i));
        if (d > worst) worst = d;
    }
    CHECK(worst <= 2e-3, "%s: max |logit - float64| %g", model, worst);
    free(a);
    free(b);
}

/* "ids: [1, 319, ...]" of greedy-f32.txt, BOS first. */
static size_t oracle_greedy(const char *path, int32_t *ids, size_t cap) {
    char *t = kt_read_file(path, NULL);
    char *p = strchr(t, '[');
    size_t n = 0;
    while (p && *p && *p != ']' && n < cap) {
        p++;
        ids[n++] = (int32_t)strtol(p, &p, 10);
    }
    free(t);
    return n;
}

static void test_generate(void) {
    int32_t want[512];
    size_t n = oracle_greedy(KT_SHARED "/oracle/aidreams260K/greedy-f32.txt", want, 512);
    CHECK(n > 64 && want[0] == 1, "oracle has %zu ids", n);
    char args[1024];
    snprintf(args, sizeof args, "generate -m %s/models/aidreams260K/model.bin --ids 1 -n %zu --print-ids --ignore-eos",
             KT_SHARED, n - 1);
    int st;
    char *out = run(args, &st);
    CHECK(st == 0, "generate exits 0");
    size_t k = 1, same = 0;
    for (char *p = out; *p && k < n; k++) {
        long v = strtol(p, &p, 10);
        same += v == want[k];
        while (*p == ',' || *p == ' ' || *p == '\n') p++;
    }
    CHECK(same == n - 1, "greedy ids: %zu of %zu equal the oracle", same, n - 1);
    free(out);
    snprintf(args, sizeof args, "generate -m %s/models/stories260K/model.bin -p 'Once upon a time' -n 12", KT_SHARED);
    out = run(args, &st);
    CHECK(st == 0 && !strncmp(out, "Once upon a time", 16) && strlen(out) > 30, "prompted text: '%s'", out);
    free(out);
}

static void test_errors(void) {
    int st;
    char args[1024];
    snprintf(args, sizeof args, "logits -m %s/models/stories260K/f32.gguf --ids 1,99999", KT_SHARED);
    free(run(args, &st));
    CHECK(st == 1, "an id outside the vocabulary exits 1 (%d)", st);
    snprintf(args, sizeof args, "logits -m %s/models/stories260K/f32.gguf --ids 1,-3", KT_SHARED);
    free(run(args, &st));
    CHECK(st == 2, "a negative id exits 2 (%d)", st);
    free(run("logits --ids 1", &st));
    CHECK(st == 2, "missing -m exits 2");
    char *help = run("logits --help", &st);
    CHECK(st == 0 && strstr(help, "--out") && strstr(help, "--threads"), "logits --help");
    free(help);
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    kldeval = argv[1];
    test_logits_out(KT_SHARED "/models/rand-llama/q4_K_M.gguf", KT_SHARED "/oracle/rand-llama", "q4_K_M");
    test_logits_out(KT_SHARED "/models/rand-qwen2-hf", KT_SHARED "/oracle/rand-qwen2", "f16");
    test_generate();
    test_errors();
    return kt_finish();
}
