/* test_forward_variants.c — the model-coverage variants on small random
 * models: Gemma 3's window layout with and without the pattern keys (GGUF
 * and config.json), Qwen2's config.json window, YaRN (GGUF and
 * config.json), BF16 weights (GGUF and safetensors), dynamic NTK, and the
 * errors for what is not supported. Each runs the engine against the
 * float64 reference of test_forward_models.c (validated on the shared
 * oracles by test_forward_synth), in one pass, in chunks of 1 and 7, and as
 * a prefill followed by decode steps. */
#include "engine/engine.h"
#include "tensor/types.h"
#include "test_forward_models.h"
#include "testlib.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#define N_IDS 40

static void make_ids(int32_t *ids, int64_t n_vocab) {
    uint64_t x = 987654321;
    for (int i = 0; i < N_IDS; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = (int32_t)((x >> 33) % (uint64_t)n_vocab);
    }
}

typedef struct variant {
    const char *name;
    synth_shape s;
    const ref_opts *gguf_ref; /* NULL: the reference reads the GGUF's keys */
    const ref_opts *hf_ref;   /* semantics of the config.json copy; NULL: the GGUF's */
    double min_hf_gguf_diff;  /* > 0: the two semantics must differ by at least this */
} variant;

static void run_variant(const variant *v) {
    char dir[512], gguf[600], hf[600];
    snprintf(dir, sizeof dir, "%s/variant-%s", kt_build_dir(), v->name);
    mkdir(dir, 0755);
    snprintf(gguf, sizeof gguf, "%s/model.gguf", dir);
    snprintf(hf, sizeof hf, "%s/hf", dir);
    mkdir(hf, 0755);
    bool ok = synth_write_gguf(&v->s, gguf) && synth_write_hf(&v->s, gguf, hf);
    CHECK(ok, "synthesize %s", v->name);
    if (!ok) return;
    int32_t ids[N_IDS];
    make_ids(ids, v->s.n_vocab);
    char label[128];
    snprintf(label, sizeof label, "%s gguf", v->name);
    float *rg = tf_check_path(label, gguf, gguf, v->gguf_ref, ids, N_IDS);
    snprintf(label, sizeof label, "%s hf", v->name);
    float *rh = tf_check_path(label, hf, gguf, v->hf_ref ? v->hf_ref : v->gguf_ref, ids, N_IDS);
    if (rg && rh && v->min_hf_gguf_diff > 0) {
        tf_cmp c = tf_compare(rg, rh, N_IDS, v->s.n_vocab);
        printf("%-28s GGUF vs config.json semantics: max|d| %.2e\n", v->name, c.max_abs);
        CHECK(c.max_abs >= v->min_hf_gguf_diff, "%s: the variant must change the logits (%g)",
              v->name, c.max_abs);
    }
    free(rg);
    free(rh);
}

/* config.json tail of the synthesized gemma3 (its GGUF: window 8, linear 8). */
#define GEMMA3_TAIL(layout, local)                                                                \
    ", \"hidden_activation\": \"gelu_pytorch_tanh\", \"query_pre_attn_scalar\": 32, "            \
    "\"sliding_window\": 8, " layout ", \"rope_local_base_freq\": " local ", "                    \
    "\"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": 8.0}"

static void test_variants(void) {
    static const uint8_t qwen_slides[3] = {0, 1, 1};
    static const ref_opts qwen_hf = {.window = 5, .slides = qwen_slides};
    static const uint8_t flags[7] = {0, 1, 1, 0, 1, 0, 0};
    /* HF's YaRN with an explicit attention_factor (llama.cpp's GGUF has none) */
    static const ref_opts yarn_hf = {.yarn_factor = 4, .yarn_orig_ctx = 4096, .yarn_attn = 1.25};
    variant v[7];
    memset(v, 0, sizeof v);

    v[0].name = "gemma3-layer-types";
    synth_default(&v[0].s, "gemma3"); /* no pattern key in the GGUF: llama.cpp's 6 */
    v[0].s.hf_tail = GEMMA3_TAIL("\"layer_types\": [\"sliding_attention\", \"sliding_attention\", "
                                 "\"sliding_attention\", \"sliding_attention\", \"sliding_attention\", "
                                 "\"full_attention\", \"sliding_attention\"]", "10000.0");

    v[1].name = "gemma3-pattern3";
    synth_default(&v[1].s, "gemma3");
    v[1].s.write_pattern = true;
    v[1].s.pattern = 3;
    v[1].s.freq_base_swa = 500;
    v[1].s.hf_tail = GEMMA3_TAIL("\"sliding_window_pattern\": 3", "500.0");

    v[2].name = "gemma3-flags";
    synth_default(&v[2].s, "gemma3");
    v[2].s.pattern_flags = flags;
    v[2].s.hf_tail = GEMMA3_TAIL("\"sliding_window_pattern\": 6, \"layer_types\": [\"full_attention\", "
                                 "\"sliding_attention\", \"sliding_attention\", \"full_attention\", "
                                 "\"sliding_attention\", \"full_attention\", \"full_attention\"]",
                                 "10000.0");

    v[3].name = "qwen2-window";
    synth_default(&v[3].s, "qwen2");
    v[3].s.n_layer = 3;
    v[3].s.hf_tail = ", \"hidden_act\": \"silu\", \"use_sliding_window\": true, \"sliding_window\": 5, "
                     "\"max_window_layers\": 1, \"rope_scaling\": null";
    v[3].hf_ref = &qwen_hf;  /* the GGUF: llama.cpp's qwen2 has no window */
    v[3].min_hf_gguf_diff = 1e-2;

    v[4].name = "llama-yarn";
    synth_default(&v[4].s, "llama");
    v[4].s.rope_base = 1e4;
    v[4].s.yarn_factor = 4; /* original context: context_length (4096) by default */
    v[4].s.hf_tail = ", \"hidden_act\": \"silu\", \"rope_scaling\": {\"rope_type\": \"yarn\", "
                     "\"factor\": 4.0, \"original_max_position_embeddings\": 4096, "
                     "\"attention_factor\": 1.25}";
    v[4].hf_ref = &yarn_hf;
    v[4].min_hf_gguf_diff = 1e-2;

    v[5].name = "qwen2-yarn-bf16";
    synth_default(&v[5].s, "qwen2");
    v[5].s.mat_type = KLD_TYPE_BF16;
    v[5].s.hf_bf16 = true;
    v[5].s.rope_base = 1e4;
    v[5].s.yarn_factor = 8;
    v[5].s.yarn_orig_ctx = 512;
    v[5].s.hf_tail = ", \"hidden_act\": \"silu\", \"use_sliding_window\": false, \"rope_scaling\": "
                     "{\"type\": \"yarn\", \"factor\": 8.0, \"original_max_position_embeddings\": 512}";

    v[6].name = "gemma3-bf16";
    synth_default(&v[6].s, "gemma3");
    v[6].s.mat_type = KLD_TYPE_BF16;
    v[6].s.hf_bf16 = true;
    for (int i = 0; i < 7; i++) run_variant(&v[i]);
}

/* rope_scaling "dynamic": the default RoPE within max_position_embeddings,
 * a longer session refused. */
static void test_dynamic(void) {
    char dir[512], gguf[600], hf[600];
    snprintf(dir, sizeof dir, "%s/variant-dynamic", kt_build_dir());
    mkdir(dir, 0755);
    snprintf(gguf, sizeof gguf, "%s/model.gguf", dir);
    snprintf(hf, sizeof hf, "%s/hf", dir);
    mkdir(hf, 0755);
    synth_shape s;
    synth_default(&s, "llama");
    s.hf_tail = ", \"hidden_act\": \"silu\", \"rope_scaling\": {\"rope_type\": \"dynamic\", \"factor\": 2.0}";
    if (!synth_write_gguf(&s, gguf) || !synth_write_hf(&s, gguf, hf)) {
        CHECK(false, "synthesize dynamic");
        return;
    }
    int32_t ids[N_IDS];
    make_ids(ids, s.n_vocab);
    free(tf_check_path("llama-dynamic hf", hf, gguf, NULL, ids, N_IDS));
    kld_error err = {0};
    kld_model *m = NULL;
    kld_session *ss = NULL;
    kld_status st = kld_model_open(hf, NULL, &m, &err);
    CHECK_OK(st, err);
    if (st != KLD_OK) return;
    st = kld_session_create(m, 8192, 16, 1, &ss, &err);
    CHECK(st != KLD_OK && strstr(err.msg, "dynamic") && strstr(err.msg, "8192"),
          "dynamic NTK past max_position_embeddings must be refused: %s", err.msg);
    kld_session_free(ss);
    kld_model_close(m);
}

static void test_errors(void) {
    synth_shape s;
    synth_default(&s, "llama");
    s.hf_tail = ", \"hidden_act\": \"silu\", \"rope_scaling\": {\"rope_type\": \"ntk-by-parts\", \"factor\": 2.0}";
    tf_expect_open_error("hf-rope-type", &s, "rope_type", "ntk-by-parts");
    synth_default(&s, "gemma3");
    s.hf_tail = GEMMA3_TAIL("\"layer_types\": [\"sliding_attention\", \"full_attention\"]", "10000.0");
    tf_expect_open_error("hf-layer-types", &s, "layer_types", "7 entries");
    synth_default(&s, "gemma3");
    s.hf_tail = GEMMA3_TAIL("\"sliding_window_pattern\": 6, \"layer_types\": [\"sliding_attention\", "
                            "\"chunked_attention\", \"full_attention\", \"full_attention\", "
                            "\"full_attention\", \"full_attention\", \"full_attention\"]", "10000.0");
    tf_expect_open_error("hf-chunked", &s, "layer_types\"[1]", "chunked_attention");
    /* GGUF: a per-layer pattern of the wrong length, a scaling type outside
     * llama.cpp's table (it asserts on both) */
    static const uint8_t flags[7] = {1, 1, 0, 1, 1, 0, 1};
    synth_default(&s, "gemma3");
    s.pattern_flags = flags;
    s.n_pattern_flags = 3;
    tf_expect_open_error("gguf-flags", &s, "gemma3.attention.sliding_window_pattern", "3 entries");
    synth_default(&s, "llama");
    s.yarn_factor = 2;
    s.rope_type_name = "dynamic";
    tf_expect_open_error("gguf-rope-type", &s, "llama.rope.scaling.type", "dynamic");
}

int main(void) {
    test_variants();
    test_dynamic();
    test_errors();
    return kt_finish();
}
