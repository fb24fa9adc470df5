/* test_forward_deepseek2.c — DeepSeek V3 / R1 (llama.cpp's `deepseek2`,
 * src/models/deepseek2.cpp) on small random weights: MLA attention in its
 * decompressing form (attn_q or attn_q_a → attn_q_a_norm → attn_q_b;
 * attn_kv_a_mqa, attn_kv_a_norm, attn_kv_b), normal RoPE on the decoupled
 * rope dims at the end of each head, YaRN with mscale² in the attention
 * scale, one leading dense layer, then MoE layers with sigmoid routing,
 * exp_probs_b, weight normalisation and expert_weights_scale, and the
 * ungated shared expert. The engine against the float64 reference of
 * test_forward_models.c (one pass, chunks, prefill + decode), the online
 * softmax bit for bit, thread counts, the mscale and the q bottleneck shown
 * to matter, group-limited routing, the absorbed attn_k_b / attn_v_b form equal to attn_kv_b's bit
 * for bit, q8_0, and the malformed files. llama.cpp's own logits:
 * test_lcpp_oracle (tests/data/lcpp-oracle/deepseek2.*). */
#include "engine/engine.h"
#include "quant/quant.h"
#include "tensor/types.h"
#include "test_forward_models.h"
#include "testlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_IDS 40

static void path_of(char *buf, size_t cap, const char *name) {
    snprintf(buf, cap, "%s/deepseek2-%s.gguf", kt_build_dir(), name);
}

static float *logits(const char *path, const int32_t *ids, const char *levers, int threads, int64_t *nv) {
    return tf_engine_logits_levers(path, ids, N_IDS, levers, threads, nv);
}

/* One shape against the reference; returns the reference logits. */
static float *check_shape(const char *label, const synth_shape *s, const int32_t *ids) {
    char path[512];
    path_of(path, sizeof path, label);
    CHECK(synth_write_gguf(s, path), "synthesize deepseek2 %s", label);
    float *ref = tf_check_path(label, path, path, NULL, ids, N_IDS);
    CHECK(ref != NULL, "deepseek2 %s: engine vs reference", label);
    int64_t nv = 0;
    float *exact = logits(path, ids, NULL, 2, &nv), *online = logits(path, ids, "attention=online,attn_block=16", 2, &nv);
    float *one = logits(path, ids, NULL, 1, &nv);
    const size_t bytes = sizeof(float) * (size_t)(N_IDS * nv);
    CHECK(exact && online && !memcmp(exact, online, bytes),
          "deepseek2 %s: attention=online gives exact's logits bit for bit", label);
    CHECK(exact && one && !memcmp(exact, one, bytes), "deepseek2 %s: 1 thread gives 2 threads' logits", label);
    free(exact), free(online), free(one);
    return ref;
}

static void test_reference(void) {
    synth_shape s;
    synth_default(&s, "deepseek2");
    s.mat_type = KLD_TYPE_F32;
    int32_t ids[N_IDS];
    tf_make_ids(ids, N_IDS, s.n_vocab, 20261207);
    float *ref = check_shape("plain-q", &s, ids); /* the lite models' attn_q */
    /* V3's q bottleneck: attn_q_a, its norm, attn_q_b */
    synth_shape b = s;
    b.mla_q_lora = 24;
    float *refb = check_shape("q-lora", &b, ids);
    /* mscale² in the attention scale: without yarn_log_multiplier the model differs */
    synth_shape u = s;
    u.yarn_log_mul = 0;
    char p1[512];
    path_of(p1, sizeof p1, "no-log-mul");
    CHECK(synth_write_gguf(&u, p1), "synthesize deepseek2 without yarn_log_multiplier");
    int64_t nv = 0;
    float *a = tf_engine_logits(p1, ids, N_IDS, N_IDS, 2, &nv);
    if (ref && a) {
        tf_cmp c = tf_compare(ref, a, N_IDS, nv);
        CHECK(c.max_abs > 1e-2, "deepseek2: yarn_log_multiplier 0.1 vs none differ by %.3g", c.max_abs);
    }
    /* softmax gating (the key absent, as V2's files): another model */
    synth_shape g = s;
    g.gating_func = 0;
    float *sm = check_shape("softmax", &g, ids); /* softmax, no norm, exp_probs_b and the scale */
    if (ref && sm) {
        tf_cmp c = tf_compare(ref, sm, N_IDS, nv);
        CHECK(c.max_abs > 1e-2, "deepseek2: softmax gating (no expert_gating_func) differs from sigmoid by %.3g",
              c.max_abs);
    }
    /* V3's group-limited routing: 2 groups of 2 experts, the best group only (top-2 = that group) */
    synth_shape gr = s;
    gr.n_groups = 2;
    gr.n_group_used = 1;
    float *refg = check_shape("groups", &gr, ids);
    if (ref && refg) {
        tf_cmp c = tf_compare(ref, refg, N_IDS, nv);
        CHECK(c.max_abs > 1e-2, "deepseek2: group-limited routing changes the logits by %.3g", c.max_abs);
    }
    free(refg);
    /* the absorbed form of newer conversions (attn_k_b / attn_v_b, key_length_mla, one MQA kv head):
     * rebuilt into attn_kv_b at load, the same numbers, so the same logits bit for bit */
    synth_shape m = b;
    m.mla_absorbed = true;
    m.n_head_kv = 1;
    path_of(p1, sizeof p1, "absorbed");
    CHECK(synth_write_gguf(&m, p1), "synthesize deepseek2 with attn_k_b / attn_v_b");
    char pb[512];
    path_of(pb, sizeof pb, "q-lora");
    float *fused = tf_engine_logits(pb, ids, N_IDS, N_IDS, 2, &nv), *split = tf_engine_logits(p1, ids, N_IDS, 7, 2, &nv);
    CHECK(fused && split && !memcmp(fused, split, sizeof(float) * (size_t)(N_IDS * nv)),
          "deepseek2: attn_k_b / attn_v_b give attn_kv_b's logits bit for bit");
    free(fused), free(split);
    free(a), free(sm), free(ref), free(refb);
}

static void test_errors(void) {
    synth_shape s;
    synth_default(&s, "deepseek2");
    s.drop_tensor = "blk.1.attn_kv_b.weight";
    tf_expect_open_error("no-kv-b", &s, "blk.1.attn_kv_b.weight", "missing");
    synth_default(&s, "deepseek2");
    s.bad_shape_tensor = "blk.0.attn_kv_a_mqa.weight";
    tf_expect_open_error("kv-a-shape", &s, "blk.0.attn_kv_a_mqa.weight", "expected [64, 40]");
    synth_default(&s, "deepseek2");
    s.mla_kv_lora = 0;
    tf_expect_open_error("no-kv-lora", &s, "deepseek2.attention.kv_lora_rank", "missing");
    synth_default(&s, "deepseek2");
    s.mla_rope = 0;
    tf_expect_open_error("no-rope-dims", &s, "deepseek2.rope.dimension_count", "missing");
    synth_default(&s, "deepseek2");
    s.n_head_kv = 1; /* the absorbed form's MQA head count, without its tensors */
    tf_expect_open_error("kv-heads", &s, "deepseek2.attention.head_count_kv", "= 1 must equal head_count = 4");
    synth_default(&s, "deepseek2");
    s.mla_q_lora = 24;
    s.drop_tensor = "blk.2.attn_q_a_norm.weight";
    tf_expect_open_error("no-q-a-norm", &s, "blk.2.attn_q_a_norm.weight", "missing");
    synth_default(&s, "deepseek2");
    s.mla_rope = 24; /* the whole key_length: no nope dims */
    tf_expect_open_error("rope-all", &s, "deepseek2.rope.dimension_count", "= 24 leaves no non-rotated dims");
    synth_default(&s, "deepseek2");
    s.mla_absorbed = true;
    s.n_head_kv = 1;
    s.drop_tensor = "blk.1.attn_v_b.weight";
    tf_expect_open_error("no-v-b", &s, "blk.1.attn_v_b.weight", "missing (expected shape [32, 16, 4]");
    synth_default(&s, "deepseek2");
    s.mla_absorbed = true;
    s.n_head_kv = 1;
    s.bad_shape_tensor = "blk.0.attn_k_b.weight";
    tf_expect_open_error("k-b-shape", &s, "blk.0.attn_k_b.weight", "expected [16, 32, 4]");
    synth_default(&s, "deepseek2");
    s.n_groups = 3; /* 4 experts do not split into 3 groups */
    s.n_group_used = 1;
    tf_expect_open_error("groups-split", &s, "deepseek2.expert_group_count", "= 3 does not split expert_count = 4");
    synth_default(&s, "deepseek2");
    s.n_groups = 2; /* expert_group_used_count missing */
    tf_expect_open_error("groups-used", &s, "deepseek2.expert_group_used_count", "= 0 is missing or out of range");
}

int main(void) {
    kld_kernels_init();
    test_reference();
    {
        char p[512];
        path_of(p, sizeof p, "plain-q");
        tf_check_quantize_q8_0("deepseek2", p, 300, N_IDS, 5e-3);
    }
    test_errors();
    return kt_finish();
}
