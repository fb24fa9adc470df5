/* test_forward_check.c — the comparisons every forward test makes (see
 * test_forward_models.h: tf_*): logit rows against each other, the engine
 * against the float64 reference in one pass, in chunks and decoding, and
 * models that must not open. */
#include "test_forward_models.h"

#include "engine/engine.h"
#include "quant/quant.h"
#include "testlib.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

/* ---- comparing logit rows ---- */

int64_t tf_argmax(const float *x, int64_t n) {
    int64_t b = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

double tf_lse(const float *x, int64_t n) {
    double mx = x[tf_argmax(x, n)], s = 0;
    for (int64_t i = 0; i < n; i++) s += exp((double)x[i] - mx);
    return mx + log(s);
}

tf_cmp tf_compare(const float *ref, const float *b, int64_t rows, int64_t nv) {
    tf_cmp c = {0, 0, 0};
    for (int64_t r = 0; r < rows; r++) {
        const float *x = ref + r * nv, *y = b + r * nv;
        double lx = tf_lse(x, nv), ly = tf_lse(y, nv), k = 0;
        for (int64_t i = 0; i < nv; i++) {
            double d = fabs((double)x[i] - (double)y[i]);
            if (!(d <= c.max_abs)) c.max_abs = d; /* NaN propagates */
            double a = (double)x[i] - lx;
            k += exp(a) * (a - ((double)y[i] - ly));
        }
        c.mean_kld += k / (double)rows;
        c.same_argmax += tf_argmax(x, nv) == tf_argmax(y, nv);
    }
    return c;
}

float *tf_engine_logits(const char *path, const int32_t *ids, int64_t n, int64_t chunk,
                        int threads, int64_t *n_vocab) {
    kld_error err = {0};
    kld_model *m = NULL;
    kld_status st = kld_model_open(path, NULL, &m, &err);
    CHECK_OK(st, err);
    if (st != KLD_OK) return NULL;
    *n_vocab = kld_model_hparams(m)->n_vocab;
    kld_session *s = NULL;
    st = kld_session_create(m, n + 8, chunk, threads, &s, &err);
    CHECK_OK(st, err);
    float *logits = malloc((size_t)(n * *n_vocab) * sizeof(float));
    for (int64_t i = 0; st == KLD_OK && i < n; i += chunk) {
        int64_t c = n - i < chunk ? n - i : chunk;
        st = kld_session_eval(s, ids + i, c, logits + i * *n_vocab, &err);
        CHECK_OK(st, err);
    }
    kld_session_free(s);
    kld_model_close(m);
    return logits;
}

float *tf_engine_logits_run(const char *path, const int32_t *ids, int64_t n, const char *levers, int64_t chunk,
                            int64_t n_decode, int threads, int64_t *n_vocab) {
    kld_model *m = NULL;
    kld_error err = {0};
    CHECK_OK(kld_model_open(path, NULL, &m, &err), err);
    if (!m) return NULL;
    *n_vocab = kld_model_hparams(m)->n_vocab;
    kld_levers lv;
    kld_levers_default(&lv);
    if (levers) CHECK_OK(kld_levers_parse(levers, &lv, &err), err);
    kld_session_opts o = {.n_ctx = n + 8 > 128 ? n + 8 : 128, .max_chunk = chunk, .n_threads = threads, .levers = &lv};
    kld_session *s = NULL;
    CHECK_OK(kld_session_create_opts(m, &o, &s, &err), err);
    float *out = s ? malloc(sizeof(float) * (size_t)(n * *n_vocab)) : NULL;
    kld_status st = s ? KLD_OK : KLD_ERR_ARG;
    for (int64_t i = 0, prefill = n - n_decode; st == KLD_OK && i < n;) {
        const int64_t c = i >= prefill ? 1 : prefill - i < chunk ? prefill - i : chunk;
        st = i >= prefill ? kld_session_decode(s, ids[i], out + i * *n_vocab, &err)
                          : kld_session_eval(s, ids + i, c, out + i * *n_vocab, &err);
        CHECK_OK(st, err);
        i += c;
    }
    kld_session_free(s);
    kld_model_close(m);
    if (st != KLD_OK) {
        free(out);
        return NULL;
    }
    return out;
}

float *tf_engine_logits_levers(const char *path, const int32_t *ids, int64_t n, const char *levers, int threads,
                               int64_t *n_vocab) {
    return tf_engine_logits_run(path, ids, n, levers, n, 0, threads, n_vocab);
}

/* ---- engine vs reference on one path ---- */

/* Engine vs reference, chunk invariance and decode == prefill for one
 * model path; returns the reference logits (caller frees) or NULL. */
float *tf_check_path(const char *label, const char *path, const char *gguf, const ref_opts *o,
                     const int32_t *ids, int64_t n_ids) {
    int64_t nv = 0, nv2 = 0;
    float *ref = ref_forward_opts(gguf, o, ids, n_ids, &nv);
    float *eng = tf_engine_logits(path, ids, n_ids, n_ids, 2, &nv2);
    if (!ref || !eng || nv != nv2) {
        CHECK(false, "%s: reference and engine must both run", label);
        free(ref);
        free(eng);
        return NULL;
    }
    tf_cmp c = tf_compare(ref, eng, n_ids, nv);
    printf("%-28s engine vs reference: max|d| %.2e argmax %d/%d\n", label, c.max_abs,
           c.same_argmax, (int)n_ids);
    CHECK(c.max_abs <= 1e-3, "%s: engine vs reference max |d| %g", label, c.max_abs);
    CHECK(c.same_argmax == n_ids, "%s: argmax %d/%d", label, c.same_argmax, (int)n_ids);
    static const int64_t chunks[] = {1, 7};
    for (int i = 0; i < 2; i++) {
        float *part = tf_engine_logits(path, ids, n_ids, chunks[i], 2, &nv2);
        CHECK(part && memcmp(part, eng, sizeof(float) * (size_t)(n_ids * nv)) == 0,
              "%s: chunks of %" PRId64 " must equal one pass", label, chunks[i]);
        free(part);
    }
    float *dec = tf_engine_logits_run(path, ids, n_ids, NULL, n_ids, n_ids - 17, 2, &nv2);
    CHECK(dec && memcmp(dec, eng, sizeof(float) * (size_t)(n_ids * nv)) == 0,
          "%s: prefill 17 + decode must equal one pass", label);
    free(dec);
    free(eng);
    return ref;
}

/* A model that must not open, with the words its error must contain. */
void tf_expect_open_error(const char *label, const synth_shape *s, const char *want1,
                          const char *want2) {
    char dir[512], gguf[600], hf[600];
    snprintf(dir, sizeof dir, "%s/variant-bad-%s", kt_build_dir(), label);
    mkdir(dir, 0755);
    snprintf(gguf, sizeof gguf, "%s/model.gguf", dir);
    snprintf(hf, sizeof hf, "%s/hf", dir);
    mkdir(hf, 0755);
    const bool gguf_bad = s->hf_tail == NULL; /* else the config.json copy is the bad one */
    if (!synth_write_gguf(s, gguf) || (!gguf_bad && !synth_write_hf(s, gguf, hf))) {
        CHECK(false, "synthesize %s", label);
        return;
    }
    kld_error err = {0};
    kld_model *m = NULL;
    kld_status st = kld_model_open(gguf_bad ? gguf : hf, NULL, &m, &err);
    printf("error %-22s %s\n", label, err.msg);
    CHECK(st != KLD_OK && strstr(err.msg, want1) && (!want2 || strstr(err.msg, want2)),
          "%s: expected an error naming '%s': %s", label, want1, err.msg);
    kld_model_close(m);
}

void tf_make_ids(int32_t *ids, int n, int64_t n_vocab, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < n; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = (int32_t)((x >> 33) % (uint64_t)n_vocab);
    }
}

void tf_check_reset(const char *label, const char *gguf, int64_t nv) {
    int32_t a[24], b[24];
    tf_make_ids(a, 24, nv, 11);
    tf_make_ids(b, 24, nv, 22);
    kld_error err = {0};
    kld_model *m = NULL;
    kld_session *s = NULL;
    kld_status st = kld_model_open(gguf, NULL, &m, &err);
    if (st == KLD_OK) st = kld_session_create(m, 64, 24, 2, &s, &err);
    CHECK_OK(st, err);
    if (st != KLD_OK) {
        kld_model_close(m);
        return;
    }
    const size_t bytes = sizeof(float) * (size_t)(24 * nv);
    float *fresh = malloc(bytes), *again = malloc(bytes);
    CHECK_OK(kld_session_eval(s, b, 24, fresh, &err), err);
    kld_session_reset(s);
    CHECK_OK(kld_session_eval(s, a, 24, again, &err), err);
    kld_session_reset(s);
    CHECK_OK(kld_session_eval(s, b, 24, again, &err), err);
    CHECK(memcmp(fresh, again, bytes) == 0, "%s: after a reset the logits must not depend on the "
          "previous sequence", label);
    /* without the reset the state of A leaks into B's first positions */
    kld_session_reset(s);
    CHECK_OK(kld_session_eval(s, a, 12, NULL, &err), err);
    CHECK_OK(kld_session_eval(s, b, 1, again, &err), err);
    CHECK(memcmp(fresh, again, sizeof(float) * (size_t)nv) != 0,
          "%s: a prefix must change the next logits (the state is read)", label);
    free(fresh);
    free(again);
    kld_session_free(s);
    kld_model_close(m);
}

/* quantize (file) and @POLICY (on load) to q8_0: every matrix converted
 * (norms, biases and vectors kept), the results close to the f32 model and
 * equal to each other. */
void tf_check_quantize_q8_0(const char *arch, const char *gguf, int64_t n_vocab, int n_ids, double max_kld) {
    char out[600], onload[600];
    snprintf(out, sizeof out, "%s/%s-q8_0.gguf", kt_build_dir(), arch);
    snprintf(onload, sizeof onload, "%s@q8_0", gguf);
    kld_error err = {0};
    CHECK_OK(kld_quantize_file(gguf, out, "q8_0", NULL, NULL, &err), err);
    int32_t *ids = malloc((size_t)n_ids * sizeof *ids);
    tf_make_ids(ids, n_ids, n_vocab, 20261207);
    int64_t nv = 0;
    float *base = tf_engine_logits(gguf, ids, n_ids, n_ids, 2, &nv);
    float *file = tf_engine_logits(out, ids, n_ids, n_ids, 2, &nv);
    float *load = tf_engine_logits(onload, ids, n_ids, n_ids, 2, &nv);
    if (base && file && load) {
        tf_cmp c = tf_compare(base, file, n_ids, nv);
        printf("%s quantize q8_0 vs f32: KLD %.3g, argmax %d/%d\n", arch, c.mean_kld, c.same_argmax, n_ids);
        CHECK(c.mean_kld > 0 && c.mean_kld < max_kld, "%s q8_0: KLD %.3g", arch, c.mean_kld);
        CHECK(!memcmp(file, load, sizeof(float) * (size_t)(n_ids * nv)),
              "%s: quantize q8_0 and @q8_0 on load give the same logits", arch);
    }
    free(base), free(file), free(load), free(ids);
}
