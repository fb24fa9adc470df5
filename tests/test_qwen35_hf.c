/* test_qwen35_hf.c — Qwen3.5 (llama.cpp's qwen35, qwen35moe) from Hugging Face as released
 * checkpoints store it, on small random models (synth_qwen3next_hf.c writes the HF copies of a
 * synthesized GGUF):
 *  - `kldeval quantize HF OUT keep` gives the synthesized GGUF back: every tensor (names, types,
 *    shapes, bytes: the v heads tiled, ssm_beta / ssm_alpha split, ssm_a = −exp(A_log), the norms
 *    1 + w, the experts stacked into ffn_*_exps beside the shared expert and its gate, no MTP),
 *    every qwen35*.* key (rope.dimension_sections included) and the logits bit for bit;
 *  - transformers 5's fused experts (mlp.experts.gate_up_proj / down_proj) read as views, and the
 *    multimodal wrappers (qwen3_5 / qwen3_5_moe: text_config, model.language_model.*, a vision
 *    tower skipped): the GGUF's logits bit for bit, read and converted, and at q8_0 three ways;
 *  - malformed configs and tensors as errors naming config.json, the key and value, or the tensor. */
#include "engine/engine.h"
#include "hf_roundtrip.h"
#include "io/gguf.h"
#include "io/source.h"
#include "model/hparams.h"
#include "model/weights.h"
#include "quant/quant.h"
#include "synth_qwen3next_hf.h"
#include "tensor/types.h"
#include "test_forward_models.h"
#include "testlib.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#define N_IDS 32

static void shape(synth_shape *s, const char *arch) {
    synth_default(s, arch);
    s->mat_type = KLD_TYPE_F32;
    if (!strcmp(arch, "qwen35moe")) {
        s->n_expert = 4;
        s->n_expert_used = 2;
        s->n_ff_exp = 32;
        s->n_ff_shexp = 64; /* not n_ff_exp: a swap of the two widths shows; a multiple of q8_0's block */
    }
}

/* The shared expert's gate as the converter writes mlp.shared_expert_gate.weight [1, n_embd]:
 * unsqueezed, [n_embd, 1] (llama.cpp reads it as {n_embd}); the synthesized GGUF's is 1-D. */
typedef struct q35_ctx {
    const char *arch;
    uint64_t gate_2d;
} q35_ctx;

static bool q35_tensor(const kld_gguf *a, const kld_tensor *y, uint64_t *merged, void *ctx) {
    (void)merged;
    q35_ctx *c = ctx;
    const kld_tensor *x = kld_gguf_find_tensor(a, y->name);
    const bool unsqueezed = x && strstr(y->name, "ffn_gate_inp_shexp") && x->n_dims == 2 && y->n_dims == 1;
    c->gate_2d += unsqueezed;
    const bool eq = x && x->type == y->type && x->nbytes == y->nbytes && (x->n_dims == y->n_dims || unsqueezed) &&
                    !memcmp(x->ne, y->ne, sizeof x->ne) && !memcmp(x->data, y->data, (size_t)y->nbytes);
    if (!eq && x)
        printf("converted tensor %s (type %u, %u dims [%" PRId64 ", %" PRId64 "]) differs from the GGUF's "
               "(type %u, %u dims [%" PRId64 ", %" PRId64 "])\n", y->name, x->type, x->n_dims, x->ne[0],
               x->ne[1], y->type, y->n_dims, y->ne[0], y->ne[1]);
    return eq;
}

static void q35_keys(const char *label, const kld_gguf *a, const kld_gguf *b, void *ctx) {
    (void)b;
    const q35_ctx *c = ctx;
    printf("%-28s converted: %" PRIu64 " shared-expert gates [n_embd, 1]\n", label, c->gate_2d);
    CHECK(kld_gguf_get_arr(a, strcmp(c->arch, "qwen35") ? "qwen35moe.rope.dimension_sections"
                                                        : "qwen35.rope.dimension_sections") != NULL,
          "%s: rope.dimension_sections written", label);
}

/* The checkpoint dir converted to out against the synthesized GGUF: tensors and arch keys equal. */
static void check_converted(const char *label, const char *arch, const char *gguf, const char *dir,
                            const char *out) {
    char prefix[32];
    snprintf(prefix, sizeof prefix, "%s.", arch);
    q35_ctx c = {.arch = arch};
    const hf_rt_family f = {.tensor_equal = q35_tensor, .key_prefix = prefix, .min_keys = 16, .keys = q35_keys,
                            .ctx = &c};
    hf_rt_check(&f, label, gguf, dir, out, NULL, 0);
}

/* One HF layout of arch: read (the GGUF's logits bit for bit) and converted (the GGUF back). */
static void test_layout(const char *label, const char *arch, const q35_hf_opts *o) {
    synth_shape s;
    shape(&s, arch);
    char gguf[512], dir[512], out[600];
    snprintf(gguf, sizeof gguf, "%s/q35hf-%s.gguf", kt_build_dir(), arch);
    snprintf(dir, sizeof dir, "%s/q35hf-%s", kt_build_dir(), label);
    snprintf(out, sizeof out, "%s/q35hf-%s-converted.gguf", kt_build_dir(), label);
    mkdir(dir, 0755);
    if (!synth_write_gguf(&s, gguf) || !q35_write_hf_opts(&s, gguf, dir, o)) {
        CHECK(false, "%s: synthesize", label);
        return;
    }
    int32_t ids[N_IDS];
    tf_make_ids(ids, N_IDS, s.n_vocab, 20261204);
    int64_t nv = 0, nv2 = 0, nv3 = 0;
    float *a = tf_engine_logits(gguf, ids, N_IDS, N_IDS, 2, &nv), *b = tf_engine_logits(dir, ids, N_IDS, 7, 2, &nv2);
    CHECK(a && b && nv == nv2 && !memcmp(a, b, sizeof(float) * (size_t)(N_IDS * nv)),
          "%s: the checkpoint's logits equal the GGUF's bit for bit", label);
    check_converted(label, arch, gguf, dir, out);
    float *c = tf_engine_logits(out, ids, N_IDS, 16, 2, &nv3);
    CHECK(a && c && nv == nv3 && !memcmp(a, c, sizeof(float) * (size_t)(N_IDS * nv)),
          "%s: the converted GGUF's logits equal the GGUF's bit for bit", label);
    printf("%-28s read and converted: logits bit for bit (%d positions × %" PRId64 ")\n", label, N_IDS, nv);
    free(a), free(b), free(c);
}

/* The fused experts are views of gate_up_proj / down_proj, not copies. */
static void test_views(void) {
    synth_shape s;
    shape(&s, "qwen35moe");
    char dir[512];
    snprintf(dir, sizeof dir, "%s/q35hf-moe-fused", kt_build_dir());
    kld_source *src = NULL;
    kld_error err = {0};
    CHECK_OK(kld_source_open(dir, &src, &err), err);
    kld_hparams hp;
    kld_weights w;
    if (!src || kld_hparams_read(src, &hp, &err) || kld_weights_bind(src, &hp, &w, &err)) {
        CHECK(false, "open the fused checkpoint: %s", err.msg);
        kld_source_close(src);
        return;
    }
    const kld_tensor *gu = kld_source_find(src, "model.layers.1.mlp.experts.gate_up_proj");
    const kld_layer_weights *L = &w.layers[1];
    const uint64_t slice = gu ? gu->nbytes / (uint64_t)s.n_expert : 0;
    CHECK(gu && L->moe.gate && L->moe.up && L->moe.gate[2]->data == (const uint8_t *)gu->data + 2 * slice &&
              L->moe.up[2]->data == (const uint8_t *)gu->data + 2 * slice + slice / 2 &&
              L->moe.gate[2]->ne[1] == s.n_ff_exp,
          "qwen35moe: expert 2's gate and up are views of gate_up_proj (gate rows first)");
    const kld_tensor *dn = kld_source_find(src, "model.layers.1.mlp.experts.down_proj");
    CHECK(dn && L->moe.down_exps && L->moe.down_exps->data == dn->data, "qwen35moe: ffn_down_exps is down_proj itself");
    kld_weights_free(&w);
    kld_source_close(src);
}

/* q8_0 three ways on the fused, wrapped MoE: the GGUF quantized on load (@q8_0), the checkpoint
 * quantized on load (its experts views of gate_up_proj) and `quantize HF q8_0`: the same logits bit
 * for bit, near the f32 ones. */
static void test_q8(void) {
    char gguf[512], dir[512], at_g[600], at_h[600], out[600];
    snprintf(gguf, sizeof gguf, "%s/q35hf-qwen35moe.gguf", kt_build_dir());
    snprintf(dir, sizeof dir, "%s/q35hf-moe-wrapped-fused", kt_build_dir());
    snprintf(at_g, sizeof at_g, "%s@q8_0", gguf);
    snprintf(at_h, sizeof at_h, "%s@q8_0", dir);
    snprintf(out, sizeof out, "%s/q35hf-moe-wrapped-fused-q8_0.gguf", kt_build_dir());
    kld_error err = {0};
    CHECK_OK(kld_quantize_file(dir, out, "q8_0", NULL, NULL, &err), err);
    int32_t ids[N_IDS];
    synth_shape s;
    shape(&s, "qwen35moe");
    tf_make_ids(ids, N_IDS, s.n_vocab, 20261204);
    int64_t nv = 0;
    float *base = tf_engine_logits(gguf, ids, N_IDS, 16, 2, &nv), *a = tf_engine_logits(at_g, ids, N_IDS, 16, 2, &nv);
    float *b = tf_engine_logits(at_h, ids, N_IDS, 16, 2, &nv), *c = tf_engine_logits(out, ids, N_IDS, 16, 2, &nv);
    const size_t bytes = sizeof(float) * (size_t)(N_IDS * nv);
    CHECK(a && b && c && !memcmp(a, b, bytes) && !memcmp(a, c, bytes),
          "qwen35moe: GGUF@q8_0, fused HF@q8_0 and quantize HF q8_0 give the same logits bit for bit");
    if (base && a) {
        const tf_cmp k = tf_compare(base, a, N_IDS, nv);
        printf("%-28s q8_0 (three ways, equal) vs f32: KLD %.3g, argmax %d/%d\n", "moe-wrapped-fused", k.mean_kld,
               k.same_argmax, N_IDS);
        CHECK(k.mean_kld > 0 && k.mean_kld < 5e-2, "qwen35moe: q8_0 vs f32 KLD %.3g", k.mean_kld);
    }
    free(base), free(a), free(b), free(c);
}

/* A malformed copy: opening (and for want_q, converting) fails naming want1 and want2. */
static void expect_error(const char *label, const char *arch, const q35_hf_opts *o, bool convert, const char *want1,
                         const char *want2) {
    synth_shape s;
    shape(&s, arch);
    char gguf[512], dir[512], out[600];
    snprintf(gguf, sizeof gguf, "%s/q35hf-%s.gguf", kt_build_dir(), arch);
    snprintf(dir, sizeof dir, "%s/q35hf-bad-%s", kt_build_dir(), label);
    snprintf(out, sizeof out, "%s/q35hf-bad-%s.gguf", kt_build_dir(), label);
    mkdir(dir, 0755);
    CHECK(q35_write_hf_opts(&s, gguf, dir, o), "%s: write the malformed copy", label);
    kld_error err = {0};
    kld_status st;
    if (convert) {
        st = kld_quantize_file(dir, out, "keep", NULL, NULL, &err);
    } else {
        kld_model *m = NULL;
        st = kld_model_open(dir, NULL, &m, &err);
        kld_model_close(m);
    }
    printf("%-28s %s\n", label, err.msg);
    CHECK(st != KLD_OK && strstr(err.msg, want1) && (!want2 || strstr(err.msg, want2)),
          "%s: error names '%s'%s%s: %s", label, want1, want2 ? " and " : "", want2 ? want2 : "", err.msg);
}

static void test_errors(void) {
    q35_hf_opts o = {.fused_experts = true, .drop = "model.layers.2.mlp.experts.down_proj"};
    expect_error("fused-no-down", "qwen35moe", &o, false, "model.layers.2.mlp.experts.down_proj", "missing");
    o = (q35_hf_opts){.fused_experts = true, .edits = {{"moe_intermediate_size", "16"}, {NULL, NULL}}};
    expect_error("fused-gate-up-shape", "qwen35moe", &o, false, "model.layers.0.mlp.experts.gate_up_proj", "[64, 32, 4]");
    o = (q35_hf_opts){.wrapped = true, .outer_edits = {{"text_config", NULL}, {NULL, NULL}}};
    expect_error("wrapped-no-text-config", "qwen35", &o, false, "config.json", "\"text_config\"");
    o = (q35_hf_opts){.wrapped = true, .edits = {{"linear_num_value_heads", "6"}, {NULL, NULL}}};
    expect_error("wrapped-bad-v-heads", "qwen35", &o, false, "model.language_model.layers.0.linear_attn.A_log",
                 "expected [6] (linear_num_value_heads)");
    o = (q35_hf_opts){.wrapped = true, .edits = {{"linear_num_value_heads", "7"}, {NULL, NULL}}};
    expect_error("wrapped-v-heads-not-multiple", "qwen35", &o, false, "config.json",
                 "\"linear_num_value_heads\" = 7 is not a multiple");
    o = (q35_hf_opts){.wrapped = true, .drop = "model.language_model.layers.0.linear_attn.in_proj_a.weight"};
    expect_error("wrapped-no-in-proj-a", "qwen35", &o, false, "model.language_model.layers.0.linear_attn.in_proj_a.weight",
                 "missing");
    o = (q35_hf_opts){.edits = {{"rope_parameters", "{\"rope_theta\": 10000, \"partial_rotary_factor\": 0.5, "
                                                    "\"mrope_section\": [2, -1, 1]}"}, {NULL, NULL}}};
    expect_error("bad-mrope-section", "qwen35", &o, false, "config.json", "mrope_section[1]");
    o = (q35_hf_opts){.wrapped = true, .fused_experts = true, .edits = {{"norm_topk_prob", "false"}, {NULL, NULL}}};
    expect_error("convert-norm-topk-false", "qwen35moe", &o, true, "norm_topk_prob false", "qwen35moe");
    o = (q35_hf_opts){.drop = "model.layers.1.linear_attn.in_proj_b.weight"};
    expect_error("convert-no-in-proj-b", "qwen35", &o, true, "model.layers.1.linear_attn.in_proj_b.weight", "missing");
    o = (q35_hf_opts){.edits = {{"rope_parameters", "{\"rope_theta\": \"1e4\"}"}, {NULL, NULL}}};
    expect_error("convert-rope-theta-string", "qwen35moe", &o, true, "config.json", "rope_theta");
    o = (q35_hf_opts){.wrapped = true, .outer_edits = {{"tie_word_embeddings", "\"yes\""}, {NULL, NULL}}};
    expect_error("wrapped-bad-tie", "qwen35", &o, false, "config.json", "tie_word_embeddings");
}

int main(void) {
    kld_kernels_init();
    test_layout("dense", "qwen35", NULL);
    test_layout("moe", "qwen35moe", NULL);
    const q35_hf_opts fused = {.fused_experts = true}, wrapped = {.wrapped = true},
                      both = {.fused_experts = true, .wrapped = true};
    test_layout("moe-fused", "qwen35moe", &fused);
    test_layout("dense-wrapped", "qwen35", &wrapped);
    test_layout("moe-wrapped-fused", "qwen35moe", &both);
    test_views();
    synth_shape moe;
    shape(&moe, "qwen35moe");
    hf_rt_fused_gguf("qwen35moe", &moe); /* the converter's --fuse-gate-up-exps */
    test_q8();
    test_errors();
    return kt_finish();
}
