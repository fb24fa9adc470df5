/* test_forward_gptoss.c — gpt-oss (llama.cpp's `gpt-oss`, src/models/openai-moe.cpp)
 * on small random weights: attention sinks, q/k/v/o biases, even layers
 * sliding, YaRN, a biased router whose top k logits are softmaxed among
 * themselves, biased experts with the clamped SwiGLU. The engine against the
 * float64 reference of test_forward_models.c (one pass, chunks of 1 and 7,
 * prefill + decode), the online softmax bit for bit, every sink and bias
 * shown to matter, quantize-on-load, and the malformed files. llama.cpp's
 * own logits: test_lcpp_oracle (tests/data/lcpp-oracle/gpt-oss.*). */
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

static void path_of(char *buf, size_t cap, const char *name) {
    snprintf(buf, cap, "%s/gptoss-%s.gguf", kt_build_dir(), name);
}

static float *logits(const char *path, const int32_t *ids, const char *levers, int64_t *nv) {
    return tf_engine_logits_levers(path, ids, N_IDS, levers, 2, nv);
}

static void test_reference(void) {
    synth_shape s;
    synth_default(&s, "gpt-oss");
    s.mat_type = KLD_TYPE_F32;
    char path[512];
    path_of(path, sizeof path, "f32");
    CHECK(synth_write_gguf(&s, path), "synthesize gpt-oss");
    int32_t ids[N_IDS];
    tf_make_ids(ids, N_IDS, s.n_vocab, 20261204);
    float *ref = tf_check_path("gpt-oss", path, path, NULL, ids, N_IDS);
    CHECK(ref != NULL, "gpt-oss: engine vs reference");
    int64_t nv = 0;
    float *exact = logits(path, ids, NULL, &nv), *online = logits(path, ids, "attention=online,attn_block=16", &nv);
    CHECK(exact && online && !memcmp(exact, online, sizeof(float) * (size_t)(N_IDS * nv)),
          "gpt-oss: attention=online gives exact's logits bit for bit (sinks included)");
    /* every gpt-oss ingredient moves the logits: the file without it is another model */
    static const char *const parts[][2] = {
        {"blk.0.attn_sinks.weight", "sinks"},        {"blk.1.attn_output.bias", "o bias"},
        {"blk.0.ffn_gate_inp.bias", "router bias"}, {"blk.2.ffn_down_exps.bias", "expert bias"},
    };
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        synth_shape z = s;
        z.bad_shape_tensor = NULL;
        char zp[512];
        snprintf(zp, sizeof zp, "%s/gptoss-zero-%zu.gguf", kt_build_dir(), i);
        z.drop_tensor = parts[i][0];
        CHECK(synth_write_gguf(&z, zp), "synthesize without %s", parts[i][0]);
        kld_model *m = NULL;
        kld_error err = {0};
        CHECK(kld_model_open(zp, NULL, &m, &err) == KLD_ERR_FORMAT && strstr(err.msg, parts[i][0]) &&
                  strstr(err.msg, "missing"),
              "gpt-oss without %s: '%s'", parts[i][1], err.msg);
        kld_model_close(m);
    }
    free(ref), free(exact), free(online);
}

/* Quantize-on-load: the experts (3-D), the attention matrices; sinks,
 * biases and the router stay float. */
static void test_policy(void) {
    synth_shape s;
    synth_default(&s, "gpt-oss");
    s.mat_type = KLD_TYPE_F32;
    char path[512], with[600];
    path_of(path, sizeof path, "f32");
    int32_t ids[N_IDS];
    tf_make_ids(ids, N_IDS, s.n_vocab, 20261204);
    int64_t nv = 0;
    float *base = logits(path, ids, NULL, &nv);
    snprintf(with, sizeof with, "%s@q8_0", path);
    float *q = logits(with, ids, NULL, &nv);
    if (!base || !q) {
        free(base), free(q);
        return;
    }
    tf_cmp c = tf_compare(base, q, N_IDS, nv);
    printf("gpt-oss@q8_0 vs f32: KLD %.3g, max |d| %.3g, argmax %d/%d\n", c.mean_kld, c.max_abs, c.same_argmax, N_IDS);
    CHECK(base && q && c.max_abs > 0 && c.mean_kld < 2e-3 && c.same_argmax >= N_IDS - 6,
          "gpt-oss@q8_0 close to f32 (KLD %.3g)", c.mean_kld);
    free(base), free(q);
}

/* `quantize` to mxfp4 (the released experts' type) and q8_0: matrices
 * converted, sinks, biases, norms and the router kept float32, the file
 * loads and stays close to the f32 one. */
static void test_quantize_file(void) {
    char src[512], out[512];
    path_of(src, sizeof src, "f32");
    static const char *const policies[] = {"mxfp4", "q8_0"};
    int32_t ids[N_IDS];
    tf_make_ids(ids, N_IDS, 300, 20261204);
    int64_t nv = 0;
    float *base = logits(src, ids, NULL, &nv);
    for (int i = 0; i < 2; i++) {
        path_of(out, sizeof out, policies[i]);
        kld_error err = {0};
        CHECK_OK(kld_quantize_file(src, out, policies[i], NULL, NULL, &err), err);
        kld_gguf *g = NULL;
        CHECK_OK(kld_gguf_open(out, &g, &err), err);
        int kept = 0, converted = 0, wrong = 0;
        uint32_t want;
        kld_type_from_name(policies[i], &want);
        for (uint64_t t = 0; g && t < g->n_tensors; t++) {
            const kld_tensor *x = &g->tensors[t];
            const bool vec = strstr(x->name, ".bias") || strstr(x->name, "attn_sinks") || strstr(x->name, "norm") ||
                             strstr(x->name, "ffn_gate_inp");
            if (vec) {
                kept += x->type == KLD_TYPE_F32;
                wrong += x->type != KLD_TYPE_F32;
            } else {
                converted += x->type == want;
            }
        }
        CHECK(g && wrong == 0 && kept >= 3 * 12 && converted >= 3 * 7,
              "gpt-oss %s: %d vectors kept f32, %d not, %d matrices converted", policies[i], kept, wrong, converted);
        kld_gguf_close(g);
        float *q = logits(out, ids, "act=q8", &nv);
        if (base && q) {
            tf_cmp c = tf_compare(base, q, N_IDS, nv);
            printf("gpt-oss quantize %s vs f32: KLD %.3g, argmax %d/%d\n", policies[i], c.mean_kld, c.same_argmax,
                   N_IDS);
            CHECK(c.mean_kld > 0 && c.mean_kld < (i == 0 ? 0.5 : 2e-3), "gpt-oss %s: KLD %.3g", policies[i], c.mean_kld);
        }
        free(q);
    }
    free(base);
}

static void test_errors(void) {
    synth_shape s;
    synth_default(&s, "gpt-oss");
    s.drop_tensor = "blk.1.attn_sinks.weight";
    tf_expect_open_error("no-sinks", &s, "blk.1.attn_sinks.weight", "missing");
    synth_default(&s, "gpt-oss");
    s.bad_shape_tensor = "blk.0.attn_sinks.weight";
    tf_expect_open_error("sinks-shape", &s, "blk.0.attn_sinks.weight", "expected [4]");
    synth_default(&s, "gpt-oss");
    s.drop_tensor = "blk.0.attn_q.bias";
    tf_expect_open_error("no-q-bias", &s, "blk.0.attn_q.bias", "missing");
    synth_default(&s, "gpt-oss");
    s.bad_shape_tensor = "blk.1.ffn_up_exps.bias";
    tf_expect_open_error("up-bias-shape", &s, "blk.1.ffn_up_exps.bias", "expected [64, 4]");
    synth_default(&s, "gpt-oss");
    s.drop_tensor = "blk.2.ffn_gate_exps.bias";
    tf_expect_open_error("no-gate-bias", &s, "blk.2.ffn_gate_exps.bias", "missing");
    synth_default(&s, "gpt-oss");
    s.drop_tensor = "blk.0.post_attention_norm.weight";
    tf_expect_open_error("no-ffn-norm", &s, "blk.0.post_attention_norm.weight", "missing");
    synth_default(&s, "gpt-oss");
    s.n_expert = 0; /* every gpt-oss layer is a mixture of experts */
    tf_expect_open_error("no-experts", &s, "expert_count", "gpt-oss is a mixture of experts");
}

int main(void) {
    kld_kernels_init();
    test_reference();
    test_policy();
    test_quantize_file();
    test_errors();
    return kt_finish();
}
