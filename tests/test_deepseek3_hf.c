/* test_deepseek3_hf.c — DeepSeek V3 / R1 (and V2) from a Hugging Face
 * checkpoint (model_type deepseek_v3 / deepseek_v2, transformers'
 * DeepseekV3ForCausalLM names): synthesized deepseek2 GGUFs (MLA with the
 * plain q_proj or the q_lora_rank bottleneck, YaRN with mscale_all_dim or
 * none, one leading dense layer, sigmoid or softmax routing with
 * e_score_correction_bias, group-limited routing, the shared expert) copied
 * into safetensors + config.json as the released checkpoints hold them
 * (per-expert mlp.experts.E.*, kv_b_proj fused, q/k rows unpermuted, an
 * appended MTP layer). Each HF folder gives its GGUF's logits bit for bit and
 * the float64 reference's; `quantize HF keep` gives back the GGUF's tensors
 * and keys; malformed configs are errors naming config.json, the field and
 * the value. */
#include "engine/engine.h"
#include "hf_roundtrip.h"
#include "io/gguf.h"
#include "quant/quant.h"
#include "tensor/types.h"
#include "synth_deepseek3_hf.h"
#include "test_forward_models.h"
#include "testlib.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#define N_IDS 40

static void paths(const char *label, char *gguf, char *hf, size_t cap) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/deepseek3-hf-%s", kt_build_dir(), label);
    mkdir(dir, 0755);
    snprintf(gguf, cap, "%s/model.gguf", dir);
    snprintf(hf, cap, "%s/hf", dir);
    mkdir(hf, 0755);
}

/* deepseek2's keys: the integers and reals as the GGUF's, with the converter's own defaults. */
static void ds_keys(const char *label, const kld_gguf *a, const kld_gguf *b, void *ctx) {
    (void)ctx;
    static const char *const keys[] = {
        "deepseek2.block_count", "deepseek2.context_length", "deepseek2.embedding_length",
        "deepseek2.feed_forward_length", "deepseek2.attention.head_count", "deepseek2.attention.head_count_kv",
        "deepseek2.attention.key_length", "deepseek2.attention.value_length", "deepseek2.attention.q_lora_rank",
        "deepseek2.attention.kv_lora_rank", "deepseek2.rope.dimension_count", "deepseek2.expert_count",
        "deepseek2.expert_used_count", "deepseek2.expert_feed_forward_length", "deepseek2.expert_shared_count",
        "deepseek2.leading_dense_block_count", "deepseek2.rope.scaling.original_context_length",
        "deepseek2.expert_group_count", "deepseek2.expert_group_used_count"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const int64_t ka = hf_rt_key_int(a, keys[i], -1), kb = hf_rt_key_int(b, keys[i], -1);
        /* groups: the converter writes n_group 1 / topk_group 1 too, the synthesized file nothing */
        const bool group_key = strstr(keys[i], "expert_group") != NULL;
        CHECK(ka == kb || (group_key && kb == -1 && ka <= 1),
              "%s: converted %s = %" PRId64 ", the GGUF's %" PRId64, label, keys[i], ka, kb);
    }
    /* the synthesized softmax file leaves expert_gating_func out (llama.cpp: softmax); the
     * converted one says 1 */
    const int64_t ga = hf_rt_key_int(a, "deepseek2.expert_gating_func", 0),
                  gb = hf_rt_key_int(b, "deepseek2.expert_gating_func", 1);
    CHECK(ga == gb, "%s: converted expert_gating_func %" PRId64 ", the GGUF's %" PRId64, label, ga, gb);
    static const char *const nums[] = {"deepseek2.expert_weights_scale", "deepseek2.rope.freq_base",
                                       "deepseek2.attention.layer_norm_rms_epsilon",
                                       "deepseek2.rope.scaling.factor", "deepseek2.rope.scaling.yarn_log_multiplier"};
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++)
        CHECK(hf_rt_key_num(a, nums[i], -1) == hf_rt_key_num(b, nums[i], -1),
              "%s: converted %s = %.9g, the GGUF's %.9g", label, nums[i], hf_rt_key_num(a, nums[i], -1),
              hf_rt_key_num(b, nums[i], -1));
    kld_str ta = {0}, tb = {0};
    const bool ya = kld_gguf_get_str(a, "deepseek2.rope.scaling.type", &ta),
               yb = kld_gguf_get_str(b, "deepseek2.rope.scaling.type", &tb);
    CHECK(ya == yb && (!ya || (ta.len == tb.len && !memcmp(ta.ptr, tb.ptr, ta.len))),
          "%s: converted rope.scaling.type as the GGUF's", label);
    const kld_gguf_kv *na = kld_gguf_find(a, "deepseek2.expert_weights_norm"),
                      *nb = kld_gguf_find(b, "deepseek2.expert_weights_norm");
    CHECK(na && (nb ? na->value.v.b == nb->value.v.b : !na->value.v.b),
          "%s: converted expert_weights_norm as the GGUF's", label);
}

/* `kldeval quantize HF OUT keep`: the synthesized GGUF's tensors (names and bytes) and keys, the
 * checkpoint's logits bit for bit; the MTP layer dropped. */
static void check_converted(const char *label, const char *gguf, const char *hf, const int32_t *ids) {
    char out[700];
    snprintf(out, sizeof out, "%s/../converted.gguf", hf);
    const hf_rt_family f = {.keys = ds_keys};
    hf_rt_check(&f, label, gguf, hf, out, ids, N_IDS);
}

/* The HF copy of s: logits equal to its GGUF's bit for bit, and to the reference. */
static void test_same(const char *label, const synth_shape *s, const glm_edit *ed) {
    char gguf[600], hf[600];
    paths(label, gguf, hf, sizeof gguf);
    if (!synth_write_gguf(s, gguf) || !ds_write_hf(s, gguf, hf, NULL, ed)) {
        CHECK(false, "%s: synthesize", label);
        return;
    }
    int32_t ids[N_IDS];
    tf_make_ids(ids, N_IDS, s->n_vocab, 20261204);
    int64_t nv = 0;
    float *a = tf_engine_logits(gguf, ids, N_IDS, 16, 2, &nv);
    float *b = tf_engine_logits(hf, ids, N_IDS, 16, 2, &nv);
    const bool same = a && b && memcmp(a, b, sizeof(float) * (size_t)(N_IDS * nv)) == 0;
    if (a && b) printf("%-28s HF vs GGUF max|d| %.3g\n", label, tf_compare(a, b, N_IDS, nv).max_abs);
    CHECK(same, "%s: HF logits must equal the GGUF's bit for bit", label);
    free(a);
    free(b);
    char l2[96];
    snprintf(l2, sizeof l2, "%s (HF)", label);
    free(tf_check_path(l2, hf, gguf, NULL, ids, N_IDS)); /* vs the float64 reference, chunks, decode */
    check_converted(label, gguf, hf, ids);
}

static void expect_error(const char *label, const glm_edit *ed, const char *drop, const char *want1, const char *want2) {
    synth_shape s;
    synth_default(&s, "deepseek2");
    s.mat_type = KLD_TYPE_F32;
    s.mla_q_lora = 24;
    char gguf[600], hf[600];
    paths(label, gguf, hf, sizeof gguf);
    if (!synth_write_gguf(&s, gguf) || !ds_write_hf(&s, gguf, hf, drop, ed)) {
        CHECK(false, "%s: synthesize", label);
        return;
    }
    kld_error err = {0};
    kld_model *m = NULL;
    const kld_status st = kld_model_open(hf, NULL, &m, &err);
    printf("error %-16s %s\n", label, err.msg);
    CHECK(st != KLD_OK && strstr(err.msg, want1) && (!want2 || strstr(err.msg, want2)),
          "%s: expected an error naming '%s' / '%s': %s", label, want1, want2 ? want2 : "", err.msg);
    kld_model_close(m);
}

#define YARN(extra) "{\"type\": \"yarn\", \"factor\": 4, \"original_max_position_embeddings\": 64" extra "}"

static void test_errors(void) {
#define E1(k, v) ((const glm_edit[]){{k, v}, {NULL, NULL}})
    expect_error("no-kv-lora", E1("kv_lora_rank", NULL), NULL, "config.json: \"kv_lora_rank\" is missing", NULL);
    expect_error("rope-odd", E1("qk_rope_head_dim", "7"), NULL, "config.json: \"qk_rope_head_dim\" = 7",
                 "must be even");
    expect_error("q-lora-str", E1("q_lora_rank", "\"24\""), NULL,
                 "config.json: \"q_lora_rank\" must be an integer, not \"24\"", NULL);
    expect_error("scoring", E1("scoring_func", "\"relu\""), NULL, "config.json: \"scoring_func\" = \"relu\"",
                 "not supported (softmax, sigmoid)");
    expect_error("topk-method", E1("topk_method", "\"random\""), NULL, "config.json: \"topk_method\" = \"random\"",
                 "not supported");
    expect_error("rope-halves", E1("rope_interleave", "false"), NULL, "config.json: \"rope_interleave\" = false",
                 NULL);
    expect_error("layer-freq", E1("moe_layer_freq", "2"), NULL, "config.json: \"moe_layer_freq\" = 2", NULL);
    expect_error("shared-0", E1("n_shared_experts", "0"), NULL, "config.json: \"n_shared_experts\" = 0",
                 "out of range");
    expect_error("groups-3", E1("n_group", "3"), NULL, "config.json: \"n_group\" = 3", "groups of at least 2");
    expect_error("beta-fast", E1("rope_scaling", YARN(", \"beta_fast\": 16, \"mscale_all_dim\": 1")), NULL,
                 "config.json: rope_scaling.beta_fast / beta_slow = 16 / 1", NULL);
    expect_error("mscale", E1("rope_scaling", YARN(", \"mscale\": 0.5, \"mscale_all_dim\": 1")), NULL,
                 "config.json: rope_scaling.mscale = 0.5 differs from mscale_all_dim = 1", NULL);
    expect_error("no-orig-ctx", E1("rope_scaling", "{\"type\": \"yarn\", \"factor\": 4, \"mscale_all_dim\": 1}"),
                 NULL, "config.json: rope_scaling.original_max_position_embeddings is missing", NULL);
    expect_error("scale-str", E1("routed_scaling_factor", "\"2.5\""), NULL,
                 "config.json: \"routed_scaling_factor\" must be a number, not \"2.5\"", NULL);
    /* sizes that do not match the tensors: the tensor named, with its shape */
    expect_error("nope-8", E1("qk_nope_head_dim", "8"), NULL, "self_attn.q_b_proj.weight", "expected [24, 64]");
    expect_error("no-q-a-norm", NULL, "model.layers.1.self_attn.q_a_layernorm.weight",
                 "self_attn.q_a_layernorm.weight", "missing");
    expect_error("no-kv-b", NULL, "model.layers.2.self_attn.kv_b_proj.weight", "self_attn.kv_b_proj.weight",
                 "missing");
    expect_error("no-expert", NULL, "model.layers.2.mlp.experts.3.up_proj.weight", "mlp.experts.3.up_proj.weight",
                 "missing");
#undef E1
}

int main(void) {
    kld_kernels_init();
    synth_shape s;
    synth_default(&s, "deepseek2");
    s.mat_type = KLD_TYPE_F32;
    /* the lite models' plain q_proj, YaRN with mscale_all_dim 1, sigmoid routing */
    /* rms_norm_eps as the released configs spell it (1e-06, not a float32): rounded as the GGUF's */
    test_same("plain-q-yarn", &s, ((const glm_edit[]){{"rms_norm_eps", "1e-06"}, {NULL, NULL}}));
    /* V3's q bottleneck, group-limited routing (2 groups of 2, the best one), a tied head */
    synth_shape q = s;
    q.mla_q_lora = 24;
    q.n_groups = 2;
    q.n_group_used = 1;
    q.tied = true;
    q.seed = 77;
    test_same("q-lora-groups", &q, NULL);
    /* V2's softmax routing without weight norm, no YaRN, model_type deepseek_v2 */
    synth_shape v2 = s;
    v2.gating_func = 0;
    v2.yarn_factor = 0;
    v2.yarn_orig_ctx = 0;
    v2.yarn_log_mul = 0;
    v2.seed = 5;
    test_same("v2-softmax-no-yarn", &v2, ((const glm_edit[]){{"model_type", "\"deepseek_v2\""}, {NULL, NULL}}));
    test_errors();
    /* an FP8 checkpoint's block scales (DeepSeek V3's released weights): refused, not dropped */
    char gguf[600], hf[600];
    paths("q-lora-groups", gguf, hf, sizeof gguf);
    hf_rt_scale_refused("fp8-scale-inv", hf, "model.layers.1.self_attn.q_a_proj.weight_scale_inv", "FP8 block scales");
    hf_rt_scale_refused("weight-scale", hf, "model.layers.2.mlp.experts.0.up_proj.weight_scale",
                        "per-channel or block weight scales");
    hf_rt_scale_refused("input-scale", hf, "model.layers.0.mlp.down_proj.input_scale", "activation scales");
    return kt_finish();
}
