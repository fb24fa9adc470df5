/* test_forward_gemma4.c — Gemma 4's dense text models (llama.cpp's `gemma4`,
 * src/models/gemma4.cpp) on small random weights: the window pattern as
 * per-layer flags with the sliding layers' own RoPE base, proportional RoPE
 * (rope_freqs) on the full layers only, attention scale 1, V RMS-normalised
 * without weight, K reused as V on the layers without attn_v,
 * layer_output_scale, the final soft-cap; and the E2B/E4B/31B geometry: the
 * sliding layers' own head size and rotary dims, KV heads and FFN widths per
 * layer, the last layers reading earlier layers' KV caches, per-layer
 * embeddings. The engine against the float64 reference (test_ref_gemma4.c;
 * one pass, chunks of 1 and 7, prefill + decode), exact and online attention
 * bit for bit, each ingredient shown to matter, and malformed files refused
 * by name. llama.cpp's own logits: test_lcpp_oracle (tests/data/lcpp-oracle/gemma4*). */
#include "engine/engine.h"
#include "io/gguf.h"
#include "quant/quant.h"
#include "tensor/types.h"
#include "lora_fixture.h"
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

/* Writes s as gemma4-<name>.gguf (its path in path), checks the engine against the float64
 * reference (tf_check_path: one pass, chunks, prefill + decode), attention=online and one
 * thread against the default bit for bit; returns the engine's logits of ids (NULL on failure). */
static float *check_model(const synth_shape *s, const char *name, const int32_t *ids, char *path, size_t cap,
                          int64_t *nv) {
    snprintf(path, cap, "%s/gemma4-%s.gguf", kt_build_dir(), name);
    CHECK(synth_write_gguf(s, path), "synthesize gemma4 %s", name);
    char label[64];
    snprintf(label, sizeof label, "gemma4-%s", name);
    float *ref = tf_check_path(label, path, path, NULL, ids, N_IDS);
    CHECK(ref != NULL, "%s: engine vs reference", label);
    float *exact = logits(path, ids, NULL, nv), *online = logits(path, ids, "attention=online,attn_block=16", nv);
    CHECK(exact && online && !memcmp(exact, online, sizeof(float) * (size_t)(N_IDS * *nv)),
          "%s: attention=online gives exact's logits bit for bit", label);
    float *one_thread = tf_engine_logits(path, ids, N_IDS, N_IDS, 1, nv);
    CHECK(exact && one_thread && !memcmp(exact, one_thread, sizeof(float) * (size_t)(N_IDS * *nv)),
          "%s: 1 thread gives 2 threads' logits bit for bit", label);
    free(ref), free(online), free(one_thread);
    return exact;
}

static void test_reference(void) {
    synth_shape s;
    synth_default(&s, "gemma4");
    s.mat_type = KLD_TYPE_F32;
    char path[512];
    int32_t ids[N_IDS];
    tf_make_ids(ids, N_IDS, s.n_vocab, 20261204);
    int64_t nv = 0;
    float *exact = check_model(&s, "f32", ids, path, sizeof path, &nv);
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
    free(exact), free(with_v), free(one_base);
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

static void test_per_layer(void) {
    synth_shape s;
    synth_gemma4_e2b(&s);
    char path[512];
    int32_t ids[N_IDS];
    tf_make_ids(ids, N_IDS, s.n_vocab, 20261205);
    int64_t nv = 0;
    float *exact = check_model(&s, "e2b", ids, path, sizeof path, &nv);
    /* the KV cache holds only the 5 layers with their own: 4 sliding (2 heads × 32) and 1 full
     * (1 head × 64), K and V in f32 */
    kld_error err = {0};
    kld_model *m = NULL;
    CHECK_OK(kld_model_open(path, NULL, &m, &err), err);
    kld_mem_plan plan;
    if (m) {
        CHECK_OK(kld_mem_plan_compute(m, 64, 16, 1, &plan, &err), err);
        const uint64_t want = (4 * 2 * 32 + 1 * 64) * 2 * sizeof(float);
        CHECK(plan.kv_token_bytes == want, "gemma4 e2b: KV bytes per token %" PRIu64 " (want %" PRIu64
              ": the 3 sharing layers have none)", plan.kv_token_bytes, want);
        kld_model_close(m);
    }
    /* a quantized KV cache applies to the layers that own one; the sharing layers read it */
    float *kv8 = logits(path, ids, "kv=q8_0", &nv);
    if (exact && kv8) {
        tf_cmp c = tf_compare(exact, kv8, N_IDS, nv);
        printf("gemma4 e2b: kv=q8_0 vs f32 KLD %.3g, argmax %d/%d\n", c.mean_kld, c.same_argmax, N_IDS);
        /* random weights over 8 layers are touchy (token_embd alone in q8_0: 0.016) */
        CHECK(c.mean_kld > 0 && c.mean_kld < 3e-2, "gemma4 e2b kv=q8_0: KLD %.3g", c.mean_kld);
    }
    /* the (unused) K / V a converter may keep on the sharing layers change nothing */
    synth_shape k = s;
    k.g4_shared_keep_kv = true;
    char kpath[512];
    float *keep_kv = check_model(&k, "e2b-keep-kv", ids, kpath, sizeof kpath, &nv);
    /* each ingredient moves the logits */
    synth_shape v = s;
    v.g4_per_layer = 0;
    float *no_ple = variant(&v, "e2b-no-ple", ids, &nv);
    v = s;
    v.g4_shared_kv = 0;
    v.g4_wide_ff = false;
    float *no_share = variant(&v, "e2b-no-share", ids, &nv);
    v = s;
    v.g4_rot_swa = 32;
    float *all_rot = variant(&v, "e2b-all-rot", ids, &nv);
    if (exact && no_ple && no_share && all_rot) {
        const double a = tf_compare(exact, no_ple, N_IDS, nv).max_abs, b = tf_compare(exact, no_share, N_IDS, nv).max_abs,
                     c = tf_compare(exact, all_rot, N_IDS, nv).max_abs;
        printf("gemma4 e2b: without per-layer embeddings max |d| %.3g; without KV sharing %.3g; sliding layers "
               "fully rotated %.3g\n", a, b, c);
        CHECK(a > 1e-2 && b > 1e-2 && c > 1e-2, "gemma4 e2b: per-layer embeddings (%.3g), KV sharing (%.3g) and the "
              "sliding rotary dims (%.3g) matter", a, b, c);
    }
    /* @q8_0 on load quantizes the per-layer embedding matrices as `quantize` does */
    char out[512], at[600];
    snprintf(out, sizeof out, "%s/gemma4-e2b-q8_0.gguf", kt_build_dir());
    snprintf(at, sizeof at, "%s@q8_0", path);
    CHECK_OK(kld_quantize_file(path, out, "q8_0", NULL, NULL, &err), err);
    float *q = logits(out, ids, NULL, &nv), *onload = logits(at, ids, NULL, &nv);
    kld_gguf *g = NULL;
    CHECK_OK(kld_gguf_open(out, &g, &err), err);
    int ple_q8 = 0;
    for (uint64_t t = 0; g && t < g->n_tensors; t++)
        ple_q8 += (strstr(g->tensors[t].name, "inp_gate") || strstr(g->tensors[t].name, ".proj.") ||
                   strstr(g->tensors[t].name, "per_layer_model_proj")) && g->tensors[t].type == KLD_TYPE_Q8_0;
    kld_gguf_close(g);
    CHECK(ple_q8 == 2 * 8 + 1, "gemma4 e2b q8_0: %d per-layer embedding matrices q8_0 (want 17)", ple_q8);
    if (exact && q && onload) {
        tf_cmp c = tf_compare(exact, q, N_IDS, nv);
        printf("gemma4 e2b quantize q8_0 vs f32: KLD %.3g, argmax %d/%d\n", c.mean_kld, c.same_argmax, N_IDS);
        CHECK(c.mean_kld > 0 && c.mean_kld < 0.15, "gemma4 e2b q8_0: KLD %.3g", c.mean_kld);
        CHECK(!memcmp(q, onload, sizeof(float) * (size_t)(N_IDS * nv)),
              "gemma4 e2b: @q8_0 on load gives the quantized file's logits bit for bit");
    }
    free(exact), free(kv8), free(keep_kv), free(no_ple), free(no_share);
    free(all_rot), free(q), free(onload);
}

/* The 26B-A4B's FFN at toy size: 4 experts (top 2, n_ff_exp 32) beside the dense FFN,
 * routed by softmax over W_r (rms(x)/√E ⊙ ffn_gate_inp.scale), each expert's output × its
 * ffn_down_exps.scale, the dense and the experts' outputs normed apart then summed. */
static void moe_shape(synth_shape *s) {
    synth_default(s, "gemma4");
    s->mat_type = KLD_TYPE_F32;
    s->n_expert = 4;
    s->n_expert_used = 2;
    s->n_ff_exp = 32;
}

static void test_moe(void) {
    synth_shape s;
    moe_shape(&s);
    char path[512];
    int32_t ids[N_IDS];
    tf_make_ids(ids, N_IDS, s.n_vocab, 20261206);
    int64_t nv = 0;
    float *exact = check_model(&s, "moe", ids, path, sizeof path, &nv);
    /* the experts quantized alone move the logits; the dense FFN and attention exactly not */
    char at[600];
    snprintf(at, sizeof at, "%s@keep,*_exps.weight=q8_0", path);
    float *q = logits(at, ids, NULL, &nv);
    if (exact && q) {
        tf_cmp c = tf_compare(exact, q, N_IDS, nv);
        printf("gemma4 moe: experts in q8_0 KLD %.3g, argmax %d/%d\n", c.mean_kld, c.same_argmax, N_IDS);
        CHECK(c.mean_kld > 0 && c.mean_kld < 2e-2, "gemma4 moe experts q8_0: KLD %.3g", c.mean_kld);
    }
    free(exact), free(q);
}

/* A LoRA adapter on the E2B-like file's odd matrices: a sharing layer's q, the full
 * layer's single-head k, a wide FFN's down and a per-layer embedding projection;
 * the engine's MODEL+ADAPTER against the float64 reference on W + (alpha/r)·B·A. */
static void test_lora(void) {
    synth_shape s;
    synth_gemma4_e2b(&s);
    char path[512], apath[512], spec[1100];
    snprintf(path, sizeof path, "%s/gemma4-e2b.gguf", kt_build_dir());
    snprintf(apath, sizeof apath, "%s/gemma4-e2b-lora.gguf", kt_build_dir());
    snprintf(spec, sizeof spec, "%s+%s", path, apath);
    adapter ad = {0};
    adapter_add(&ad, "blk.5.attn_q.weight", s.n_embd, s.n_head * s.g4_head_swa, false);
    adapter_add(&ad, "blk.4.attn_k.weight", s.n_embd, s.g4_kv_full * s.head_dim, false);
    adapter_add(&ad, "blk.6.ffn_down.weight", 2 * s.n_ff, s.n_embd, false);
    adapter_add(&ad, "blk.2.proj.weight", s.g4_per_layer, s.n_embd, false);
    write_gguf_adapter(&ad, &(gguf_opts){.arch = "gemma4", .alpha = 8}, apath);
    const char *names[MAX_T];
    double *deltas[MAX_T];
    lora_ref_deltas(&ad, 8.0 / RANK, names, deltas);
    ref_opts o = {.n_delta = ad.n, .delta_names = names, .deltas = (const double *const *)deltas};
    int32_t ids[N_IDS];
    tf_make_ids(ids, N_IDS, s.n_vocab, 20261205);
    int64_t nv = 0, rv = 0;
    float *eng = logits(spec, ids, NULL, &nv), *plain = logits(path, ids, NULL, &nv);
    float *ref = ref_forward_opts(path, &o, ids, N_IDS, &rv);
    if (eng && plain && ref) {
        tf_cmp c = tf_compare(ref, eng, N_IDS, nv), d = tf_compare(plain, eng, N_IDS, nv);
        printf("gemma4 e2b + LoRA: engine vs merged float64 reference max |d| %.3g; against the base %.3g\n",
               c.max_abs, d.max_abs);
        CHECK(c.max_abs <= 1e-3 && c.same_argmax == N_IDS, "gemma4 e2b + LoRA vs merged reference: max |d| %g",
              c.max_abs);
        CHECK(d.max_abs > 0.05, "gemma4 e2b: the adapter changes the logits (max |d| %g)", d.max_abs);
    }
    for (int i = 0; i < ad.n; i++) free(deltas[i]);
    free_adapter(&ad);
    free(eng), free(plain), free(ref);
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
    s.drop_tensor = "per_layer_token_embd.weight";
    tf_expect_open_error("g4-per-layer", &s, "gemma4.embedding_length_per_layer_input", "= 8");
    synth_gemma4_e2b(&s);
    s.drop_tensor = "blk.5.inp_gate.weight";
    tf_expect_open_error("g4-no-inp-gate", &s, "blk.5.inp_gate.weight", "missing");
    synth_gemma4_e2b(&s);
    s.bad_shape_tensor = "per_layer_model_proj.weight";
    tf_expect_open_error("g4-ple-proj-shape", &s, "per_layer_model_proj.weight", "expected [64, 256]");
    synth_default(&s, "gemma4"); /* flags 110110: layer 4 (sliding) would read layer 2 (full) */
    s.g4_shared_kv = 2;
    tf_expect_open_error("g4-shared-kv", &s, "gemma4.attention.shared_kv_layers", "= 2");
    synth_default(&s, "gemma4");
    s.g4_shared_kv = 5;
    tf_expect_open_error("g4-shared-kv-all", &s, "gemma4.attention.shared_kv_layers", "out of range");
    synth_default(&s, "gemma4");
    s.g4_head_swa = 8;
    s.g4_value_swa = 16;
    tf_expect_open_error("g4-head-swa", &s, "gemma4.attention.key_length_swa", "value_length_swa' = 16");
    synth_default(&s, "gemma4");
    s.g4_head_swa = 8;
    s.g4_rot_swa = 12;
    tf_expect_open_error("g4-rot-swa", &s, "gemma4.rope.dimension_count_swa", "= 12");
    synth_gemma4_e2b(&s);
    s.g4_kv_full = 3; /* 4 heads */
    tf_expect_open_error("g4-kv-heads", &s, "gemma4.attention.head_count_kv", "[4] = 3");
    synth_gemma4_e2b(&s);
    s.bad_shape_tensor = "blk.6.ffn_down.weight"; /* a sharing layer: twice n_ff */
    tf_expect_open_error("g4-wide-ffn", &s, "blk.6.ffn_down.weight", "expected [256, 64]");
    moe_shape(&s);
    s.drop_tensor = "blk.2.ffn_gate_inp.scale";
    tf_expect_open_error("g4-moe-no-scale", &s, "blk.2.ffn_gate_inp.scale", "missing");
    moe_shape(&s);
    s.drop_tensor = "blk.0.pre_ffw_norm_2.weight";
    tf_expect_open_error("g4-moe-no-pre-norm", &s, "blk.0.pre_ffw_norm_2.weight", "missing");
    moe_shape(&s);
    s.bad_shape_tensor = "blk.1.ffn_down_exps.scale";
    tf_expect_open_error("g4-moe-scale-shape", &s, "blk.1.ffn_down_exps.scale", "expected [4]");
    moe_shape(&s);
    s.drop_tensor = "blk.3.ffn_up.weight"; /* the dense FFN beside the experts is required */
    tf_expect_open_error("g4-moe-no-dense", &s, "blk.3.ffn_up.weight", "missing");
    synth_default(&s, "gemma4");
    s.n_pattern_flags = 5; /* one flag short */
    tf_expect_open_error("g4-pattern-len", &s, "gemma4.attention.sliding_window_pattern", "5 entries");
}

int main(void) {
    kld_kernels_init();
    test_reference();
    test_quantize();
    test_per_layer();
    test_lora();
    test_moe();
    test_errors();
    return kt_finish();
}
