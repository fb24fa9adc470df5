/* test_glm4moe_hf.c — GLM-4.5 from a Hugging Face checkpoint (model_type
 * glm4_moe, transformers' Glm4MoeForCausalLM names): a synthesized glm4moe
 * GGUF (q/k/v biases, q/k norms, partial NeoX RoPE, one leading dense layer,
 * sigmoid-routed experts with exp_probs_b, an ungated shared expert) copied
 * into safetensors + config.json as transformers saves it (per-expert
 * mlp.experts.E.*, mlp.shared_experts.*, mlp.gate.e_score_correction_bias,
 * q/k rows unpermuted: llama.cpp's converter does not permute GLM-4.5's), with
 * an appended MTP layer (num_nextn_predict_layers 1). The HF folder gives the
 * GGUF's logits bit for bit and the float64 reference's; malformed configs
 * are errors naming config.json, the field and the value. */
#include "engine/engine.h"
#include "hf_roundtrip.h"
#include "io/gguf.h"
#include "quant/quant.h"
#include "tensor/types.h"
#include "synth_glm4moe_hf.h"
#include "test_forward_models.h"
#include "testlib.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#define N_IDS 40

static void paths(const char *label, char *gguf, char *hf, size_t cap) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/glm4moe-hf-%s", kt_build_dir(), label);
    mkdir(dir, 0755);
    snprintf(gguf, cap, "%s/model.gguf", dir);
    snprintf(hf, cap, "%s/hf", dir);
    mkdir(hf, 0755);
}

/* glm4moe's routing keys as the GGUF's, and the synthesized expert_weights_scale. */
static void glm_keys(const char *label, const kld_gguf *a, const kld_gguf *b, void *ctx) {
    const synth_shape *s = ctx;
    static const char *const keys[] = {"glm4moe.block_count", "glm4moe.expert_count", "glm4moe.expert_used_count",
                                       "glm4moe.expert_feed_forward_length", "glm4moe.expert_shared_count",
                                       "glm4moe.leading_dense_block_count", "glm4moe.expert_gating_func",
                                       "glm4moe.rope.dimension_count", "glm4moe.attention.head_count_kv"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const int64_t ka = hf_rt_key_int(a, keys[i], -1), kb = hf_rt_key_int(b, keys[i], -1);
        CHECK(ka == kb && ka >= 0, "%s: converted %s = %" PRId64 ", the GGUF's %" PRId64, label, keys[i], ka, kb);
    }
    const double sa = hf_rt_key_num(a, "glm4moe.expert_weights_scale", 0),
                 sb = hf_rt_key_num(b, "glm4moe.expert_weights_scale", 0);
    CHECK(sa == sb && sa == s->w_scale, "%s: converted expert_weights_scale %g", label, sa);
}

/* `kldeval quantize HF OUT keep`: the same tensors (names and bytes) and routing keys as the
 * synthesized GGUF, the same logits as the checkpoint bit for bit; the MTP layer dropped. */
static void check_converted(const char *label, const synth_shape *s, const char *gguf, const char *hf,
                            const int32_t *ids) {
    char out[700];
    snprintf(out, sizeof out, "%s/../converted.gguf", hf);
    const hf_rt_family f = {.keys = glm_keys, .ctx = (void *)s};
    hf_rt_check(&f, label, gguf, hf, out, ids, N_IDS);
}

/* The HF copy of s: logits equal to its GGUF's bit for bit, and to the reference. */
static void test_same(const char *label, const synth_shape *s) {
    char gguf[600], hf[600];
    paths(label, gguf, hf, sizeof gguf);
    if (!synth_write_gguf(s, gguf) || !glm_write_hf(s, gguf, hf, NULL, NULL)) {
        CHECK(false, "%s: synthesize", label);
        return;
    }
    int32_t ids[N_IDS];
    tf_make_ids(ids, N_IDS, s->n_vocab, 20261204);
    int64_t nv = 0;
    float *a = tf_engine_logits(gguf, ids, N_IDS, 16, 2, &nv);
    float *b = tf_engine_logits(hf, ids, N_IDS, 16, 2, &nv);
    const bool same = a && b && memcmp(a, b, sizeof(float) * (size_t)(N_IDS * nv)) == 0;
    if (a && b) printf("%-36s HF vs GGUF max|d| %.3g\n", label, tf_compare(a, b, N_IDS, nv).max_abs);
    CHECK(same, "%s: HF logits must equal the GGUF's bit for bit", label);
    free(a);
    free(b);
    char l2[96];
    snprintf(l2, sizeof l2, "%s (HF)", label);
    free(tf_check_path(l2, hf, gguf, NULL, ids, N_IDS)); /* vs the float64 reference, chunks, decode */
    check_converted(label, s, gguf, hf, ids);
}

static void expect_error(const char *label, const glm_edit *ed, const char *drop, const char *want1, const char *want2) {
    synth_shape s;
    synth_default(&s, "glm4moe");
    s.mat_type = KLD_TYPE_F32;
    char gguf[600], hf[600];
    paths(label, gguf, hf, sizeof gguf);
    if (!synth_write_gguf(&s, gguf) || !glm_write_hf(&s, gguf, hf, drop, ed)) {
        CHECK(false, "%s: synthesize", label);
        return;
    }
    kld_error err = {0};
    kld_model *m = NULL;
    const kld_status st = kld_model_open(hf, NULL, &m, &err);
    printf("error %-20s %s\n", label, err.msg);
    CHECK(st != KLD_OK && strstr(err.msg, want1) && (!want2 || strstr(err.msg, want2)),
          "%s: expected an error naming '%s' / '%s': %s", label, want1, want2 ? want2 : "", err.msg);
    kld_model_close(m);
}

static void test_errors(void) {
#define E1(k, v) ((const glm_edit[]){{k, v}, {NULL, NULL}})
    expect_error("no-experts", E1("n_routed_experts", NULL), NULL, "config.json: \"n_routed_experts\" is missing", NULL);
    expect_error("shared-str", E1("n_shared_experts", "\"one\""), NULL, "config.json: \"n_shared_experts\" must be an integer, not \"one\"", NULL);
    expect_error("partial", E1("partial_rotary_factor", "1.5"), NULL, "config.json: \"partial_rotary_factor\" = 1.5",
                 "(0, 1]");
    expect_error("used-5", E1("num_experts_per_tok", "5"), NULL, "config.json: \"num_experts_per_tok\" = 5",
                 "out of range");
    expect_error("groups-3", E1("n_group", "3"), NULL, "config.json: \"n_group\" = 3", "groups of at least 2");
    expect_error("topk-group", ((const glm_edit[]){{"n_group", "2"}, {"topk_group", "0"}, {NULL, NULL}}), NULL,
                 "config.json: \"topk_group\" = 0", "out of range");
    expect_error("dense-9", E1("first_k_dense_replace", "9"), NULL, "config.json: \"first_k_dense_replace\" = 9",
                 "out of range");
    expect_error("norm-str", E1("norm_topk_prob", "\"yes\""), NULL, "config.json: \"norm_topk_prob\" must be true or false, not \"yes\"", NULL);
    expect_error("scale-neg", E1("routed_scaling_factor", "-1"), NULL, "config.json: \"routed_scaling_factor\" = -1",
                 NULL);
    expect_error("act-gelu", E1("hidden_act", "\"gelu\""), NULL, "config.json: activation 'gelu'", NULL);
    /* head sizes that do not match the tensors: the tensor named, with both shapes */
    expect_error("head-dim", E1("head_dim", "8"), NULL, "self_attn.q_proj.weight", "expected [64, 32]");
    expect_error("no-bias", NULL, "model.layers.1.mlp.gate.e_score_correction_bias",
                 "mlp.gate.e_score_correction_bias", "missing");
    expect_error("no-expert", NULL, "model.layers.2.mlp.experts.3.up_proj.weight", "mlp.experts.3.up_proj.weight",
                 "missing");
    /* use_qk_norm true requires the norms */
    expect_error("qk-norm-gone", NULL, "model.layers.1.self_attn.k_norm.weight", "self_attn.k_norm.weight", "missing");
#undef E1
}

/* use_qk_norm false: stored norms are not applied (Glm4MoeAttention skips them), so the logits are
 * those of the GGUF without attn_q_norm / attn_k_norm, not those of the GGUF with them */
static void test_qk_norm_off(void) {
    synth_shape s;
    synth_default(&s, "glm4moe");
    s.mat_type = KLD_TYPE_F32;
    char gguf[600], hf[600];
    paths("qk-norm-off", gguf, hf, sizeof gguf);
    const glm_edit ed[] = {{"use_qk_norm", "false"}, {NULL, NULL}};
    if (!synth_write_gguf(&s, gguf) || !glm_write_hf(&s, gguf, hf, NULL, ed)) {
        CHECK(false, "qk-norm-off: synthesize");
        return;
    }
    int32_t ids[N_IDS];
    tf_make_ids(ids, N_IDS, s.n_vocab, 5);
    int64_t nv = 0;
    float *with = tf_engine_logits(gguf, ids, N_IDS, 16, 2, &nv);
    float *off = tf_engine_logits(hf, ids, N_IDS, 16, 2, &nv);
    if (with && off) {
        const tf_cmp c = tf_compare(with, off, N_IDS, nv);
        printf("use_qk_norm false vs the GGUF with q/k norms: max|d| %.3g\n", c.max_abs);
        CHECK(c.max_abs > 1e-3, "use_qk_norm false must leave the stored norms unapplied (%g)", c.max_abs);
    }
    CHECK(with && off, "qk-norm-off: logits");
    free(with);
    free(off);
}

int main(void) {
    kld_kernels_init();
    synth_shape s;
    synth_default(&s, "glm4moe");
    s.mat_type = KLD_TYPE_F32;
    test_same("glm4moe", &s);
    /* tied head, two leading dense layers, four layers */
    synth_shape t = s;
    t.tied = true;
    t.n_layer = 4;
    t.n_dense_lead = 2;
    t.seed = 77;
    test_same("glm4moe-tied-2dense", &t);
    test_errors();
    test_qk_norm_off();
    return kt_finish();
}
