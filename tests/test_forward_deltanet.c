/* test_forward_deltanet.c — Qwen3-Next-shaped models on small random GGUFs:
 * gated-DeltaNet layers between gated-attention layers (q/k norms, partial
 * RoPE, sigmoid output gate), a dense FFN or routed + shared experts,
 * against the float64 reference of test_ref_hybrid.c (transformers'
 * Qwen3Next modules and torch_recurrent_gated_delta_rule),
 * chunk invariance and decode == prefill (bit-identical), thread counts,
 * a reset that clears both states (conv and delta rule), the memory plan,
 * and the errors for missing or misshapen ssm tensors and keys. */
#include "engine/engine.h"
#include "test_forward_models.h"
#include "testlib.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#define N_IDS 40

static bool synth(const char *name, const synth_shape *s, char *gguf, size_t cap) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/deltanet-%s", kt_build_dir(), name);
    mkdir(dir, 0755);
    snprintf(gguf, cap, "%s/model.gguf", dir);
    bool ok = synth_write_gguf(s, gguf);
    CHECK(ok, "synthesize %s", name);
    return ok;
}

/* Engine vs reference (max |d| <= 1e-3, argmax equal), chunks of 1 and 7 and
 * prefill + decode bit-identical to one pass (tf_check_path), and 1 / 3
 * threads bit-identical to 2. */
static void test_forward(const char *name, const synth_shape *s) {
    char gguf[600];
    if (!synth(name, s, gguf, sizeof gguf)) return;
    int32_t ids[N_IDS];
    tf_make_ids(ids, N_IDS, s->n_vocab, 987654321);
    free(tf_check_path(name, gguf, gguf, NULL, ids, N_IDS));
    int64_t nv = 0;
    float *two = tf_engine_logits(gguf, ids, N_IDS, N_IDS, 2, &nv);
    float *one = tf_engine_logits(gguf, ids, N_IDS, 7, 1, &nv);
    float *three = tf_engine_logits(gguf, ids, N_IDS, 5, 3, &nv);
    const size_t bytes = sizeof(float) * (size_t)(N_IDS * nv);
    CHECK(two && one && memcmp(two, one, bytes) == 0, "%s: 1 thread, chunks of 7 must equal 2 threads", name);
    CHECK(two && three && memcmp(two, three, bytes) == 0, "%s: 3 threads, chunks of 5 must equal 2 threads", name);
    free(one);
    free(two);
    free(three);
}

/* The plan holds, per DeltaNet layer, (K − 1)·C conv floats and nv·hk·hv
 * state floats, and K/V only for the attention layers. */
static void test_plan(const char *gguf, const synth_shape *sh) {
    kld_error err = {0};
    kld_model *m = NULL;
    kld_status st = kld_model_open(gguf, NULL, &m, &err);
    CHECK_OK(st, err);
    if (st != KLD_OK) return;
    int64_t n_attn = 0;
    for (int64_t il = 0; il < sh->n_layer; il++) n_attn += (il + 1) % sh->dn_interval == 0;
    const kld_hparams *hp = kld_model_hparams(m);
    CHECK(hp->n_layer_attn == n_attn, "deltanet: %" PRId64 " attention layers, want %" PRId64,
          hp->n_layer_attn, n_attn);
    kld_mem_plan p;
    st = kld_mem_plan_compute(m, 64, 16, 1, &p, &err);
    CHECK_OK(st, err);
    const int64_t C = 2 * sh->dn_n_k_heads * sh->dn_head + sh->dn_n_v_heads * sh->dn_head;
    const uint64_t per = (uint64_t)((sh->dn_conv - 1) * C + sh->dn_n_v_heads * sh->dn_head * sh->dn_head);
    const uint64_t want_rec = (uint64_t)(sh->n_layer - n_attn) * ((per + 15) & ~(uint64_t)15) * 4;
    const uint64_t want_kv_tok = (uint64_t)n_attn * 2 * (uint64_t)(sh->n_head_kv * sh->head_dim) * 4;
    printf("deltanet plan: recurrent %" PRIu64 " B (want %" PRIu64 "), KV %" PRIu64 " B per token (want %"
           PRIu64 ")\n", p.recurrent_bytes, want_rec, p.kv_token_bytes, want_kv_tok);
    CHECK(p.recurrent_bytes == want_rec, "deltanet: recurrent state %" PRIu64 " bytes", p.recurrent_bytes);
    CHECK(p.kv_token_bytes == want_kv_tok, "deltanet: KV bytes per token %" PRIu64, p.kv_token_bytes);
    kld_model_close(m);
}

/* Levers run on these layers (act=q8 rounds ssm_out's input too; kv=f16
 * types the attention layers' cache) and quantize-on-load rebinds the
 * DeltaNet matrices; both stay close to the f16 weights. */
static void test_levers_policy(const char *gguf, int64_t nv) {
    int32_t ids[N_IDS];
    tf_make_ids(ids, N_IDS, nv, 987654321);
    int64_t nv2 = 0;
    float *ref = tf_engine_logits(gguf, ids, N_IDS, N_IDS, 2, &nv2);
    char path[700];
    snprintf(path, sizeof path, "%s@q8_0", gguf);
    float *q8 = tf_engine_logits(path, ids, N_IDS, N_IDS, 2, &nv2);
    kld_error err = {0};
    kld_model *m = NULL;
    kld_session *s = NULL;
    kld_levers lv;
    kld_levers_default(&lv);
    kld_status st = kld_levers_parse("kv=f16,act=q8,attention=online", &lv, &err);
    if (st == KLD_OK) st = kld_model_open(gguf, NULL, &m, &err);
    kld_session_opts o = {.n_ctx = N_IDS, .max_chunk = 16, .n_threads = 2, .levers = &lv};
    if (st == KLD_OK) st = kld_session_create_opts(m, &o, &s, &err);
    float *lev = malloc(sizeof(float) * (size_t)(N_IDS * nv));
    for (int64_t i = 0; st == KLD_OK && i < N_IDS; i += 16)
        st = kld_session_eval(s, ids + i, N_IDS - i < 16 ? N_IDS - i : 16, lev + i * nv, &err);
    CHECK_OK(st, err);
    if (st == KLD_OK && ref) {
        tf_cmp c = tf_compare(ref, lev, N_IDS, nv);
        printf("qwen3next levers kv=f16,act=q8,attention=online: max|d| %.2e, KLD %.2e\n", c.max_abs, c.mean_kld);
        CHECK(c.max_abs > 0 && c.mean_kld < 1e-2, "deltanet: levers change the logits a little (%g, %g)",
              c.max_abs, c.mean_kld);
    }
    CHECK(ref && q8, "qwen3next@q8_0 must open and run");
    if (ref && q8) {
        tf_cmp c = tf_compare(ref, q8, N_IDS, nv);
        printf("qwen3next@q8_0 vs f16: max|d| %.2e, KLD %.2e\n", c.max_abs, c.mean_kld);
        CHECK(c.max_abs > 0 && c.mean_kld < 1e-2, "qwen3next@q8_0: close to the f16 weights (%g)", c.mean_kld);
    }
    free(ref);
    free(q8);
    free(lev);
    kld_session_free(s);
    kld_model_close(m);
}

/* attention.recurrent_layers instead of full_attention_interval: the same
 * layout gives the same bits. */
static void test_recurrent_flags(void) {
    static const int32_t flags[4] = {1, 0, 1, 0};
    synth_shape a, b;
    synth_default(&a, "qwen3next");
    a.dn_interval = 2;
    b = a;
    b.dn_skip_key = "full_attention_interval";
    b.dn_recurrent_flags = flags;
    char ga[600], gb[600];
    if (!synth("interval-2", &a, ga, sizeof ga) || !synth("flags", &b, gb, sizeof gb)) return;
    int32_t ids[N_IDS];
    tf_make_ids(ids, N_IDS, a.n_vocab, 5);
    int64_t nv = 0;
    float *la = tf_engine_logits(ga, ids, N_IDS, N_IDS, 2, &nv);
    float *lb = tf_engine_logits(gb, ids, N_IDS, N_IDS, 2, &nv);
    CHECK(la && lb && memcmp(la, lb, sizeof(float) * (size_t)(N_IDS * nv)) == 0,
          "deltanet: recurrent_layers flags must equal the same full_attention_interval layout");
    free(la);
    free(lb);
}

static void test_errors(void) {
    synth_shape s;
    synth_default(&s, "qwen3next");
    s.drop_tensor = "blk.1.ssm_ba.weight";
    tf_expect_open_error("dn-no-ba", &s, "blk.1.ssm_ba.weight", "missing");
    s.drop_tensor = NULL; /* the misspelling kldeval's converter wrote before issue 30 is named */
    s.rename_from = "blk.1.ssm_ba.weight";
    s.rename_to = "blk.1.ssm_beta_alpha.weight";
    tf_expect_open_error("dn-old-ba-name", &s, "blk.1.ssm_ba.weight' is missing",
                         "has 'blk.1.ssm_beta_alpha.weight' instead");
    s.rename_from = s.rename_to = NULL;
    synth_default(&s, "qwen3next");
    s.drop_tensor = "blk.0.ssm_a";
    tf_expect_open_error("dn-no-a", &s, "blk.0.ssm_a'", "missing");
    synth_default(&s, "qwen3next");
    s.bad_shape_tensor = "blk.2.ssm_conv1d.weight";
    tf_expect_open_error("dn-conv-shape", &s, "blk.2.ssm_conv1d.weight", "ssm.conv_kernel = 4");
    synth_default(&s, "qwen3next");
    s.bad_shape_tensor = "blk.0.attn_qkv.weight";
    tf_expect_open_error("dn-qkv-shape", &s, "blk.0.attn_qkv.weight", "has shape [64, 129]");
    synth_default(&s, "qwen3next");
    s.bad_shape_tensor = "blk.1.ssm_norm.weight";
    tf_expect_open_error("dn-norm-shape", &s, "blk.1.ssm_norm.weight", "expected [16]");
    synth_default(&s, "qwen3next");
    s.dn_skip_key = "ssm.state_size";
    tf_expect_open_error("dn-no-state", &s, "qwen3next.ssm.state_size", "missing");
    synth_default(&s, "qwen3next");
    s.dn_inner_key = 48;
    tf_expect_open_error("dn-inner", &s, "qwen3next.ssm.inner_size' = 48", NULL);
    synth_default(&s, "qwen3next");
    s.dn_n_v_heads = 3; /* not a multiple of the 2 q/k heads */
    tf_expect_open_error("dn-heads", &s, "time_step_rank' = 3", "multiple");
    synth_default(&s, "qwen3next");
    s.dn_conv = 1;
    tf_expect_open_error("dn-conv-1", &s, "qwen3next.ssm.conv_kernel' = 1", "range");
    /* without full_attention_interval layers 0-2 are DeltaNet (default 4); the
     * tensors were written for interval 2, so layer 1's are attention's */
    synth_default(&s, "qwen3next");
    s.dn_interval = 2;
    s.dn_skip_key = "full_attention_interval";
    tf_expect_open_error("dn-default-interval", &s, "blk.1.attn_qkv.weight", "missing");
    /* the MoE layout needs the shared expert; gated attention twice the q rows */
    synth_default(&s, "qwen3next");
    s.n_expert = 4;
    s.n_expert_used = 2;
    s.n_ff_exp = 32;
    s.n_ff_shexp = 48;
    s.drop_tensor = "blk.3.ffn_gate_inp_shexp.weight";
    tf_expect_open_error("dn-moe-shexp", &s, "blk.3.ffn_gate_inp_shexp.weight", "missing");
    synth_default(&s, "qwen3next");
    s.bad_shape_tensor = "blk.3.attn_q.weight";
    tf_expect_open_error("dn-gated-q", &s, "blk.3.attn_q.weight", "expected [64, 128]");
    synth_default(&s, "qwen3next");
    s.dn_nextn = 4; /* the MTP blocks (read and skipped) must leave a main block */
    tf_expect_open_error("dn-mtp", &s, "qwen3next.nextn_predict_layers' = 4", "range");
    static const int32_t bad_flags[4] = {1, 2, 1, 0};
    synth_default(&s, "qwen3next");
    s.dn_recurrent_flags = bad_flags;
    tf_expect_open_error("dn-flags", &s, "qwen3next.attention.recurrent_layers'[1]", "flag");
    synth_default(&s, "qwen3next");
    s.drop_tensor = "blk.3.post_attention_norm.weight";
    tf_expect_open_error("dn-ffn-norm", &s, "blk.3.post_attention_norm.weight", "missing");
}

int main(void) {
    synth_shape s;
    synth_default(&s, "qwen3next");
    test_forward("qwen3next", &s);
    /* DeltaNet and attention alternating, one v head per q/k head, conv width 3, untied, q8_0 */
    synth_shape w;
    synth_default(&w, "qwen3next");
    w.n_layer = 4;
    w.dn_interval = 2;
    w.dn_n_k_heads = 4;
    w.dn_n_v_heads = 4;
    w.dn_head = 8;
    w.dn_conv = 3;
    w.tied = false;
    w.mat_type = KLD_TYPE_Q8_0;
    w.seed = 13;
    test_forward("qwen3next-alt", &w);
    /* Qwen3-Next's FFN: routed experts (softmax, top 2 of 4 renormalised) plus the
     * sigmoid-gated shared expert, in every layer */
    synth_shape x;
    synth_default(&x, "qwen3next");
    x.n_expert = 4;
    x.n_expert_used = 2;
    x.n_ff_exp = 32;
    x.n_ff_shexp = 48;
    x.seed = 17;
    test_forward("qwen3next-moe", &x);
    char gguf[600];
    snprintf(gguf, sizeof gguf, "%s/deltanet-qwen3next/model.gguf", kt_build_dir());
    tf_check_reset("deltanet", gguf, s.n_vocab);
    test_plan(gguf, &s);
    test_levers_policy(gguf, s.n_vocab);
    test_recurrent_flags();
    test_errors();
    return kt_finish();
}
