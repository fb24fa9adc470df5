/* test_forward_gemma4.c — Gemma 4's dense text model (llama.cpp's `gemma4`,
 * src/models/gemma4.cpp) on small random weights: the window pattern as
 * per-layer flags with the sliding layers' own RoPE base, proportional RoPE
 * (rope_freqs) on the full layers only, attention scale 1, V RMS-normalised
 * without weight, K reused as V on the layers without attn_v,
 * layer_output_scale, the final soft-cap. The engine against the float64
 * reference of test_forward_models.c (one pass, chunks of 1 and 7, prefill
 * + decode), exact and online attention bit for bit, each ingredient shown
 * to matter, and the parts not run yet refused by name. llama.cpp's own
 * logits: test_lcpp_oracle (tests/data/lcpp-oracle/gemma4.*). */
#include "engine/engine.h"
#include "io/gguf.h"
#include "quant/quant.h"
#include "tensor/types.h"
#include "test_forward_models.h"
#include "testlib.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define N_IDS 40

static float *logits(const char *path, const int32_t *ids, const char *levers, int64_t *nv) {
    return tf_engine_logits_levers(path, ids, N_IDS, levers, 2, nv);
}

/* The engine's logits of the file written from s (NULL when it fails). */
static float *variant(const synth_shape *s, const char *name, const int32_t *ids, int64_t *nv) {
    char p[512];
    snprintf(p, sizeof p, "%s/gemma4-%s.gguf", kt_build_dir(), name);
    CHECK(synth_write_gguf(s, p), "synthesize gemma4 %s", name);
    return logits(p, ids, NULL, nv);
}

static void test_reference(void) {
    synth_shape s;
    synth_default(&s, "gemma4");
    s.mat_type = KLD_TYPE_F32;
    char path[512];
    snprintf(path, sizeof path, "%s/gemma4-f32.gguf", kt_build_dir());
    CHECK(synth_write_gguf(&s, path), "synthesize gemma4");
    int32_t ids[N_IDS];
    tf_make_ids(ids, N_IDS, s.n_vocab, 20261204);
    float *ref = tf_check_path("gemma4", path, path, NULL, ids, N_IDS);
    CHECK(ref != NULL, "gemma4: engine vs reference");
    int64_t nv = 0;
    float *exact = logits(path, ids, NULL, &nv), *online = logits(path, ids, "attention=online,attn_block=16", &nv);
    CHECK(exact && online && !memcmp(exact, online, sizeof(float) * (size_t)(N_IDS * nv)),
          "gemma4: attention=online gives exact's logits bit for bit");
    float *one_thread = tf_engine_logits(path, ids, N_IDS, N_IDS, 1, &nv);
    CHECK(exact && one_thread && !memcmp(exact, one_thread, sizeof(float) * (size_t)(N_IDS * nv)),
          "gemma4: 1 thread gives 2 threads' logits bit for bit");
    free(one_thread);
    /* each ingredient moves the logits: the same weights without it are another model */
    synth_shape v = s;
    v.g4_keep_v = true; /* an attn_v on the full layers instead of K */
    float *with_v = variant(&v, "keep-v", ids, &nv);
    v = s;
    v.freq_base_swa = 1e6; /* the sliding layers on the full layers' base */
    float *one_base = variant(&v, "one-base", ids, &nv);
    if (exact && with_v && one_base) {
        tf_cmp a = tf_compare(exact, with_v, N_IDS, nv), b = tf_compare(exact, one_base, N_IDS, nv);
        printf("gemma4: with attn_v on the full layers max |d| %.3g; one RoPE base max |d| %.3g\n", a.max_abs,
               b.max_abs);
        CHECK(a.max_abs > 1e-2 && b.max_abs > 1e-2, "gemma4: K as V (%.3g) and the sliding base (%.3g) matter",
              a.max_abs, b.max_abs);
    }
    free(ref), free(exact), free(online), free(with_v), free(one_base);
}

/* `quantize` q8_0 and @q8_0 on load: the matrices converted; the norms, rope_freqs and
 * layer_output_scale kept f32; the logits close to the f32 file's. */
static void test_quantize(void) {
    char src[512], out[512], at[600];
    snprintf(src, sizeof src, "%s/gemma4-f32.gguf", kt_build_dir());
    snprintf(out, sizeof out, "%s/gemma4-q8_0.gguf", kt_build_dir());
    snprintf(at, sizeof at, "%s@q8_0", src);
    kld_error err = {0};
    CHECK_OK(kld_quantize_file(src, out, "q8_0", NULL, NULL, &err), err);
    kld_gguf *g = NULL;
    CHECK_OK(kld_gguf_open(out, &g, &err), err);
    int kept = 0, wrong = 0, converted = 0;
    for (uint64_t t = 0; g && t < g->n_tensors; t++) {
        const kld_tensor *x = &g->tensors[t];
        if (strstr(x->name, "norm") || strstr(x->name, "layer_output_scale") || strstr(x->name, "rope_freqs")) {
            kept += x->type == KLD_TYPE_F32;
            wrong += x->type != KLD_TYPE_F32;
        } else {
            converted += x->type == KLD_TYPE_Q8_0;
        }
    }
    /* 6 layers × 7 vectors + output_norm + rope_freqs; token_embd + 6 × 7 matrices − 2 attn_v */
    CHECK(g && kept == 44 && wrong == 0 && converted == 41, "gemma4 q8_0: %d vectors f32, %d not, %d matrices q8_0",
          kept, wrong, converted);
    kld_gguf_close(g);
    int32_t ids[N_IDS];
    tf_make_ids(ids, N_IDS, 300, 20261204);
    int64_t nv = 0;
    float *base = logits(src, ids, NULL, &nv), *q = logits(out, ids, NULL, &nv), *onload = logits(at, ids, NULL, &nv);
    if (base && q && onload) {
        tf_cmp c = tf_compare(base, q, N_IDS, nv);
        printf("gemma4 quantize q8_0 vs f32: KLD %.3g, argmax %d/%d\n", c.mean_kld, c.same_argmax, N_IDS);
        CHECK(c.mean_kld > 0 && c.mean_kld < 2e-2, "gemma4 q8_0: KLD %.3g", c.mean_kld);
        CHECK(!memcmp(q, onload, sizeof(float) * (size_t)(N_IDS * nv)),
              "gemma4: @q8_0 on load gives the quantized file's logits bit for bit");
    }
    free(base), free(q), free(onload);
}

static void test_errors(void) {
    synth_shape s;
    synth_default(&s, "gemma4");
    s.drop_tensor = "rope_freqs.weight";
    tf_expect_open_error("g4-no-rope-freqs", &s, "rope_freqs.weight", "missing");
    synth_default(&s, "gemma4");
    s.bad_shape_tensor = "blk.1.layer_output_scale.weight";
    tf_expect_open_error("g4-out-scale-shape", &s, "blk.1.layer_output_scale.weight", "expected [1]");
    synth_default(&s, "gemma4");
    s.drop_tensor = "blk.0.attn_k.weight";
    tf_expect_open_error("g4-no-k", &s, "blk.0.attn_k.weight", "missing");
    synth_default(&s, "gemma4");
    s.pattern_flags = NULL; /* a single value: llama.cpp would set every layer's flag to it */
    s.write_pattern = true;
    s.pattern = 6;
    tf_expect_open_error("g4-pattern-int", &s, "gemma4.attention.sliding_window_pattern", "array");
    synth_default(&s, "gemma4");
    s.g4_per_layer = 8;
    tf_expect_open_error("g4-per-layer", &s, "gemma4.embedding_length_per_layer_input", "= 8");
    synth_default(&s, "gemma4");
    s.g4_shared_kv = 2;
    tf_expect_open_error("g4-shared-kv", &s, "gemma4.attention.shared_kv_layers", "= 2");
    synth_default(&s, "gemma4");
    s.g4_head_swa = 8;
    tf_expect_open_error("g4-head-swa", &s, "gemma4.attention.key_length_swa", "per-layer head sizes");
    synth_default(&s, "gemma4");
    s.n_pattern_flags = 5; /* one flag short */
    tf_expect_open_error("g4-pattern-len", &s, "gemma4.attention.sliding_window_pattern", "5 entries");
}

int main(void) {
    kld_kernels_init();
    test_reference();
    test_quantize();
    test_errors();
    return kt_finish();
}
