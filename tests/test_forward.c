/* test_forward.c — the engine's logits against ../shared/oracle: the exact
 * float64 forwards (max |Δ| ≤ 2e-3, same argmax everywhere) and llama.cpp
 * (mean KLD ≤ 1e-4 float / 1e-2 block-quantized, argmax ≥ 15/16); HF and
 * llama2.c layouts against their GGUF twins; chunk-size, decode and
 * thread-count invariance; gemma2's sliding window over 48 tokens. */
#include "engine/engine.h"
#include "test_forward_models.h"
#include "testlib.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>

#define SH KT_SHARED

static int32_t *read_ids(const char *path, int64_t *n) {
    size_t size = 0;
    char *buf = kt_read_file(path, &size);
    *n = (int64_t)(size / 4);
    int32_t *ids = malloc(size ? size : 4);
    memcpy(ids, buf, size);
    free(buf);
    return ids;
}

static float *read_f32(const char *path, size_t expect_floats) {
    size_t size = 0;
    char *buf = kt_read_file(path, &size);
    if (size != expect_floats * 4) {
        fprintf(stderr, "%s: %zu bytes, expected %zu\n", path, size, expect_floats * 4);
        exit(2);
    }
    float *f = malloc(size);
    memcpy(f, buf, size);
    free(buf);
    return f;
}


/* A model arm against an oracle file. kind: 'n' numpy-f64 (max |Δ| ≤ 2e-3,
 * 16/16 argmax), 'f' llama.cpp float arm, 'q' llama.cpp block-quantized. */
static void check_arm(const char *model, const char *oracle_dir, const char *oracle_file, char kind) {
    char p[512];
    snprintf(p, sizeof p, "%s/ids.i32", oracle_dir);
    int64_t n = 0, nv = 0;
    int32_t *ids = read_ids(p, &n);
    float *ours = tf_engine_logits(model, ids, n, n, 2, &nv);
    if (!ours) {
        free(ids);
        return;
    }
    snprintf(p, sizeof p, "%s/%s", oracle_dir, oracle_file);
    float *ref = read_f32(p, (size_t)(n * nv));
    tf_cmp c = tf_compare(ref, ours, n, nv);
    printf("%-44s vs %-28s max|d| %.3e  KLD %.3e  argmax %d/%" PRId64 "\n", model, oracle_file,
           c.max_abs, c.mean_kld, c.same_argmax, n);
    if (kind == 'n') {
        CHECK(c.max_abs <= 2e-3, "%s vs %s: max |d| %g > 2e-3", model, oracle_file, c.max_abs);
        CHECK(c.same_argmax == n, "%s vs %s: argmax %d/%" PRId64, model, oracle_file,
              c.same_argmax, n);
    } else {
        double lim = kind == 'f' ? 1e-4 : 1e-2;
        CHECK(c.mean_kld <= lim, "%s vs %s: mean KLD %g > %g", model, oracle_file, c.mean_kld, lim);
        CHECK(c.same_argmax >= 15, "%s vs %s: argmax %d/16", model, oracle_file, c.same_argmax);
    }
    free(ref);
    free(ours);
    free(ids);
}

static void test_oracles(void) {
    static const char *rl_arms[] = {"f16", "q8_0", "q4_0", "q4_K_M"};
    char model[256], file[128];
    for (int i = 0; i < 4; i++) {
        snprintf(model, sizeof model, SH "/models/rand-llama/%s.gguf", rl_arms[i]);
        snprintf(file, sizeof file, "%s.numpy-f64.logits.f32", rl_arms[i]);
        check_arm(model, SH "/oracle/rand-llama", file, 'n');
        snprintf(file, sizeof file, "%s.logits.f32", rl_arms[i]);
        check_arm(model, SH "/oracle/rand-llama", file, i == 0 ? 'f' : 'q');
    }
    check_arm(SH "/models/rand-llama-hf", SH "/oracle/rand-llama", "f16.numpy-f64.logits.f32", 'n');
    check_arm(SH "/models/rand-llama-hf", SH "/oracle/rand-llama", "f16.logits.f32", 'f');
    static const char *rq_arms[] = {"f16", "q8_0"};
    for (int i = 0; i < 2; i++) {
        snprintf(model, sizeof model, SH "/models/rand-qwen2/%s.gguf", rq_arms[i]);
        snprintf(file, sizeof file, "%s.numpy-f64.logits.f32", rq_arms[i]);
        check_arm(model, SH "/oracle/rand-qwen2", file, 'n');
        snprintf(file, sizeof file, "%s.logits.f32", rq_arms[i]);
        check_arm(model, SH "/oracle/rand-qwen2", file, i == 0 ? 'f' : 'q');
    }
    check_arm(SH "/models/rand-qwen2-hf", SH "/oracle/rand-qwen2", "f16.numpy-f64.logits.f32", 'n');
    check_arm(SH "/models/rand-qwen2-hf", SH "/oracle/rand-qwen2", "f16.logits.f32", 'f');
    check_arm(SH "/models/phi3/f16.gguf", SH "/oracle/phi3", "f16.numpy-f64.logits.f32", 'n');
    check_arm(SH "/models/phi3/f16.gguf", SH "/oracle/phi3", "f16.logits.f32", 'f');
    check_arm(SH "/models/gemma2/f16.gguf", SH "/oracle/gemma2", "f16.logits.f32", 'f');
    static const char *tiny[] = {"stories260K", "aidreams260K"};
    static const char *tiny_arms[] = {"f32", "f16", "q8_0"};
    for (int t = 0; t < 2; t++) {
        char dir[128];
        snprintf(dir, sizeof dir, SH "/oracle/%s", tiny[t]);
        for (int i = 0; i < 3; i++) {
            snprintf(model, sizeof model, SH "/models/%s/%s.gguf", tiny[t], tiny_arms[i]);
            snprintf(file, sizeof file, "%s.logits.f32", tiny_arms[i]);
            check_arm(model, dir, file, i < 2 ? 'f' : 'q');
        }
        snprintf(model, sizeof model, SH "/models/%s/f32.gguf", tiny[t]);
        check_arm(model, dir, "f32.numpy-f64.logits.f32", 'n');
        snprintf(model, sizeof model, SH "/models/%s/model.bin", tiny[t]);
        check_arm(model, dir, "f32.numpy-f64.logits.f32", 'n');
        check_arm(model, dir, "f32.logits.f32", 'f');
    }
}

/* aidreams260K through the llama2.c reader equals its f32 GGUF. */
static void test_llama2c_equals_gguf(void) {
    int64_t n = 0, nv1 = 0, nv2 = 0;
    int32_t *ids = read_ids(SH "/oracle/aidreams260K/ids.i32", &n);
    float *a = tf_engine_logits(SH "/models/aidreams260K/model.bin", ids, n, n, 2, &nv1);
    float *b = tf_engine_logits(SH "/models/aidreams260K/f32.gguf", ids, n, n, 2, &nv2);
    CHECK(a && b && nv1 == nv2, "aidreams260K: both forms must load with the same vocabulary");
    if (a && b && nv1 == nv2) {
        tf_cmp c = tf_compare(b, a, n, nv1);
        printf("aidreams260K model.bin vs f32.gguf: max|d| %.3e\n", c.max_abs);
        CHECK(c.max_abs <= 1e-5, "aidreams260K model.bin vs f32.gguf: max |d| %g", c.max_abs);
        CHECK(c.same_argmax == n, "aidreams260K model.bin vs f32.gguf: argmax %d", c.same_argmax);
    }
    free(a);
    free(b);
    free(ids);
}

/* Chunks of 1, 7 and 64 and decode steps reproduce one whole pass; 1 and 2
 * threads give identical bits. */
static void test_invariance(const char *model, const char *ids_path, int64_t n_max) {
    int64_t n = 0, nv = 0;
    int32_t *ids = read_ids(ids_path, &n);
    if (n > n_max) n = n_max;
    float *whole = tf_engine_logits(model, ids, n, n, 2, &nv);
    static const int64_t chunks[] = {1, 7, 64};
    for (int c = 0; c < 3 && whole; c++) {
        float *part = tf_engine_logits(model, ids, n, chunks[c] < n ? chunks[c] : n, 2, &nv);
        if (!part) continue;
        tf_cmp d = tf_compare(whole, part, n, nv);
        CHECK(d.max_abs <= 1e-4, "%s: chunk %" PRId64 " vs whole: max |d| %g", model, chunks[c],
              d.max_abs);
        /* engine.h promises more: the same bits whatever the chunking */
        CHECK(memcmp(whole, part, sizeof(float) * (size_t)(n * nv)) == 0,
              "%s: chunk %" PRId64 " vs whole: not bit-identical", model, chunks[c]);
        if (c == 0)
            printf("%s: decode steps vs one prefill of %" PRId64 ": max|d| %.3e\n", model, n,
                   d.max_abs);
        free(part);
    }
    float *one = tf_engine_logits(model, ids, n, n, 1, &nv);
    CHECK(whole && one && memcmp(whole, one, (size_t)(n * nv) * sizeof(float)) == 0,
          "%s: 1 and 2 threads differ", model);
    free(one);
    free(whole);
    free(ids);
}

/* gemma2 over 48 tokens: rows >= 16 see layer 0's window of 16. Compared
 * with the float64 columns of swa48.txt (argmax, max logit, logsumexp). */
static void test_gemma2_window(void) {
    int64_t n = 0, nv = 0;
    int32_t *ids = read_ids(SH "/oracle/gemma2/swa48.ids.i32", &n);
    float *ours = tf_engine_logits(SH "/models/gemma2/f16.gguf", ids, n, 48, 2, &nv);
    char *txt = kt_read_file(SH "/oracle/gemma2/swa48.txt", NULL);
    int rows = 0, same = 0;
    double worst = 0;
    for (char *line = strtok(txt, "\n"); line && ours; line = strtok(NULL, "\n")) {
        if (line[0] == '#') continue;
        int t, id, ca, na;
        double cm, cl, cp, nm, nl;
        char np[32];
        if (sscanf(line, "%d %d | %d %lf %lf %lf | %d %lf %lf %31s", &t, &id, &ca, &cm, &cl, &cp,
                   &na, &nm, &nl, np) != 10 || t < 0 || t >= n)
            continue;
        const float *row = ours + (int64_t)t * nv;
        same += tf_argmax(row, nv) == na;
        double dm = fabs(row[tf_argmax(row, nv)] - nm), dl = fabs(tf_lse(row, nv) - nl);
        if (dm > worst) worst = dm;
        if (dl > worst) worst = dl;
        rows++;
    }
    printf("gemma2 swa48: %d rows, argmax %d/%d, worst |d| (max logit, lse) %.3e\n", rows, same,
           rows, worst);
    CHECK(rows == 48, "gemma2 swa48: parsed %d rows", rows);
    CHECK(same == rows, "gemma2 swa48: argmax %d/%d", same, rows);
    CHECK(worst <= 2e-3, "gemma2 swa48: max logit / logsumexp off by %g", worst);
    free(txt);
    free(ours);
    free(ids);
}

static void test_errors(void) {
    kld_error err = {0};
    kld_model *m = NULL;
    kld_status st = kld_model_open(SH "/models/stories260K/f32.gguf", NULL, &m, &err);
    CHECK_OK(st, err);
    if (st != KLD_OK) return;
    kld_session *s = NULL;
    st = kld_session_create(m, 4, 2, 1, &s, &err);
    CHECK_OK(st, err);
    int32_t bad[2] = {1, 512};
    st = kld_session_eval(s, bad, 2, NULL, &err);
    CHECK(st == KLD_ERR_ARG && strstr(err.msg, "512"), "out-of-vocabulary id: %s", err.msg);
    CHECK(kld_session_pos(s) == 0, "a rejected chunk must not advance the position");
    int32_t ok[3] = {1, 2, 3};
    st = kld_session_eval(s, ok, 3, NULL, &err);
    CHECK(st == KLD_ERR_ARG, "a chunk above max_chunk must be rejected");
    CHECK_OK(kld_session_eval(s, ok, 2, NULL, &err), err);
    CHECK_OK(kld_session_eval(s, ok, 2, NULL, &err), err);
    st = kld_session_decode(s, 1, NULL, &err);
    CHECK(st == KLD_ERR_ARG && strstr(err.msg, "context full"), "full cache: %s", err.msg);
    kld_session_reset(s);
    CHECK(kld_session_pos(s) == 0, "reset empties the cache");
    kld_session_free(s);
    st = kld_session_create(m, 4, 8, 1, &s, &err);
    CHECK(st == KLD_ERR_ARG, "chunk larger than the context must be rejected");
    kld_model_close(m);
}

int main(void) {
    test_oracles();
    test_llama2c_equals_gguf();
    test_invariance(SH "/models/rand-llama/q4_K_M.gguf", SH "/oracle/rand-llama/corpus.tokens", 100);
    test_invariance(SH "/models/gemma2/f16.gguf", SH "/oracle/gemma2/swa48.ids.i32", 48);
    test_invariance(SH "/models/phi3/f16.gguf", SH "/oracle/phi3/corpus.tokens", 80);
    test_gemma2_window();
    test_errors();
    return kt_finish();
}
