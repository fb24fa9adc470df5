/* test_qwen3next_hf.c — Qwen3-Next from Hugging Face safetensors, legacy
 * and MTP-carrying files, and the HF → GGUF conversion, on small random
 * models: the HF copy of a synthesized GGUF against the float64 reference
 * (test_ref_hybrid.c) with chunk invariance and decode == prefill; the
 * converted GGUF (`kldeval quantize HF OUT keep`) bit for bit equal to the
 * checkpoint it came from, with llama.cpp's names and keys and the split
 * tensors equal to the original GGUF's; legacy fused ssm_in and an MTP
 * block / mtp.* tensors giving the logits of the file without them; and
 * malformed configs or tensors as errors naming the key or tensor. */
#include "engine/engine.h"
#include "hf_roundtrip.h"
#include "io/gguf.h"
#include "quant/quant_internal.h"
#include "synth_qwen3next_hf.h"
#include "testlib.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#define N_IDS 40

static void paths(const char *name, char *dir, char *gguf, char *hf, size_t cap) {
    snprintf(dir, cap, "%s/q3n-%s", kt_build_dir(), name);
    mkdir(dir, 0755);
    snprintf(gguf, cap, "%s/model.gguf", dir);
    snprintf(hf, cap, "%s/hf", dir);
    mkdir(hf, 0755);
}

static bool same_logits(const char *a, const char *b, int64_t nv_want, const char *what) {
    int32_t ids[N_IDS];
    tf_make_ids(ids, N_IDS, nv_want, 4242);
    int64_t nv = 0;
    float *la = tf_engine_logits(a, ids, N_IDS, 16, 2, &nv);
    float *lb = tf_engine_logits(b, ids, N_IDS, 16, 2, &nv);
    const bool same = la && lb && memcmp(la, lb, sizeof(float) * (size_t)(N_IDS * nv)) == 0;
    CHECK(same, "%s: logits must be bit-identical", what);
    if (la && lb) {
        tf_cmp c = tf_compare(la, lb, N_IDS, nv);
        printf("%-44s max|d| %.3g\n", what, c.max_abs);
    }
    free(la);
    free(lb);
    return same;
}

/* Tensor name of the GGUF at path equals (as floats) the same tensor of ref. */
static void check_tensor_equal(const char *path, const char *ref, const char *name) {
    kld_error err = {0};
    kld_gguf *a = NULL, *b = NULL;
    CHECK_OK(kld_gguf_open(path, &a, &err), err);
    CHECK_OK(kld_gguf_open(ref, &b, &err), err);
    const kld_tensor *ta = NULL, *tb = NULL;
    for (uint64_t i = 0; a && i < a->n_tensors; i++) if (!strcmp(a->tensors[i].name, name)) ta = &a->tensors[i];
    for (uint64_t i = 0; b && i < b->n_tensors; i++) if (!strcmp(b->tensors[i].name, name)) tb = &b->tensors[i];
    bool ok = ta && tb && kld_tensor_nelements(ta) == kld_tensor_nelements(tb) && ta->ne[0] == tb->ne[0] &&
              ta->n_dims == tb->n_dims;
    double max_d = 0;
    if (ok) {
        const int64_t n = kld_tensor_nelements(ta);
        float *fa = malloc(sizeof(float) * (size_t)n), *fb = malloc(sizeof(float) * (size_t)n);
        kld_type_info_get(ta->type)->to_float_ref(ta->data, fa, n);
        kld_type_info_get(tb->type)->to_float_ref(tb->data, fb, n);
        for (int64_t i = 0; i < n; i++) max_d = fmax(max_d, fabs((double)fa[i] - (double)fb[i]) / fmax(1e-30, fabs((double)fb[i])));
        free(fa);
        free(fb);
    }
    printf("converted %-32s vs the original GGUF: max rel |d| %.3g\n", name, max_d);
    CHECK(ok && max_d <= 1e-6, "%s: converted tensor must equal the original GGUF's (rel %g)", name, max_d);
    kld_gguf_close(a);
    kld_gguf_close(b);
}

/* The converted tensor of y's name: y's dims (the shared expert's gate unsqueezed to [n_embd, 1]
 * as the converter writes it) and shape, its values within 1e-6 relative (A_log and the norms
 * pass through the checkpoint's float form). */
static bool q3n_tensor(const kld_gguf *a, const kld_tensor *y, uint64_t *merged, void *ctx) {
    (void)merged, (void)ctx;
    const kld_tensor *x = kld_gguf_find_tensor(a, y->name);
    const bool unsqueezed = x && strstr(y->name, "ffn_gate_inp_shexp") && x->n_dims == 2 && y->n_dims == 1;
    if (!x || (x->n_dims != y->n_dims && !unsqueezed) || memcmp(x->ne, y->ne, sizeof x->ne)) return false;
    if (x->type == y->type && !memcmp(x->data, y->data, (size_t)y->nbytes)) return true;
    const int64_t n = kld_tensor_nelements(y);
    float *fa = malloc(sizeof(float) * (size_t)n), *fb = malloc(sizeof(float) * (size_t)n);
    kld_type_info_get(x->type)->to_float_ref(x->data, fa, n);
    kld_type_info_get(y->type)->to_float_ref(y->data, fb, n);
    double max_d = 0;
    for (int64_t i = 0; i < n; i++)
        max_d = fmax(max_d, fabs((double)fa[i] - (double)fb[i]) / fmax(1e-30, fabs((double)fb[i])));
    free(fa);
    free(fb);
    return max_d <= 1e-6;
}

/* The converted file's keys and names as llama.cpp's converter writes them. */
static void q3n_layout(const char *label, const kld_gguf *g, const kld_gguf *b, void *ctx) {
    (void)b;
    const synth_shape *s = ctx;
    struct { const char *key; int64_t want; } keys[] = {
        {"qwen3next.ssm.conv_kernel", s->dn_conv}, {"qwen3next.ssm.state_size", s->dn_head},
        {"qwen3next.ssm.group_count", s->dn_n_k_heads}, {"qwen3next.ssm.time_step_rank", s->dn_n_v_heads},
        {"qwen3next.ssm.inner_size", s->dn_n_v_heads * s->dn_head},
        {"qwen3next.full_attention_interval", s->dn_interval}, {"qwen3next.rope.dimension_count", s->head_dim / 2},
        {"qwen3next.block_count", s->n_layer}, {"qwen3next.attention.key_length", s->head_dim},
        {"qwen3next.expert_count", s->n_expert > 0 ? s->n_expert : -1},
        {"qwen3next.expert_used_count", s->n_expert > 0 ? s->n_expert_used : -1},
        {"qwen3next.expert_feed_forward_length", s->n_expert > 0 ? s->n_ff_exp : -1},
        {"qwen3next.expert_shared_feed_forward_length", s->n_expert > 0 ? s->n_ff_shexp : -1}};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        CHECK(hf_rt_key_int(g, keys[i].key, -1) == keys[i].want, "%s: converted %s = %" PRId64 ", want %" PRId64,
              label, keys[i].key, hf_rt_key_int(g, keys[i].key, -1), keys[i].want);
    bool mtp = false, per_expert = false, ffn_norm = false;
    const kld_tensor *conv = NULL, *exps = NULL;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const char *n = g->tensors[i].name;
        mtp |= strstr(n, "mtp") != NULL || strstr(n, "nextn") != NULL;
        per_expert |= strstr(n, "ffn_gate.0.") != NULL;
        ffn_norm |= strstr(n, "ffn_norm") != NULL;
        if (!strcmp(n, "blk.0.ssm_conv1d.weight")) conv = &g->tensors[i];
        if (!strcmp(n, "blk.0.ffn_gate_exps.weight")) exps = &g->tensors[i];
    }
    CHECK(!mtp && !per_expert && !ffn_norm, "%s: converted: no mtp/nextn, per-expert or ffn_norm tensors", label);
    CHECK(!kld_gguf_find(g, "qwen3next.vocab_size"), "%s: converted: no vocab_size (the converter writes none)", label);
    CHECK(conv && conv->n_dims == 2 && conv->ne[0] == s->dn_conv, "%s: converted: ssm_conv1d squeezed to [K, C]",
          label);
    CHECK(s->n_expert == 0 || (exps && exps->n_dims == 3 && exps->ne[2] == s->n_expert),
          "%s: converted: experts stacked into ffn_gate_exps [E, F, X]", label);
}

/* HF copy vs reference, chunking, decode; converted GGUF == HF bit for bit. */
static void test_hf(const char *name, const synth_shape *s) {
    char dir[512], gguf[600], hf[600], out[700];
    paths(name, dir, gguf, hf, sizeof gguf);
    q3n_hf_opts o = {0};
    if (!synth_write_gguf(s, gguf) || !q3n_write_hf(s, gguf, hf, &o)) {
        CHECK(false, "%s: synthesize", name);
        return;
    }
    int32_t ids[N_IDS];
    tf_make_ids(ids, N_IDS, s->n_vocab, 987654321);
    char label[96];
    snprintf(label, sizeof label, "%s (HF)", name);
    free(tf_check_path(label, hf, gguf, NULL, ids, N_IDS));
    snprintf(label, sizeof label, "%s-hf", name);
    tf_check_reset(label, hf, s->n_vocab);
    snprintf(out, sizeof out, "%s/converted.gguf", dir);
    const hf_rt_family f = {.tensor_equal = q3n_tensor, .keys = q3n_layout, .ctx = (void *)s};
    hf_rt_check(&f, name, gguf, hf, out, NULL, 0);
    kld_error err = {0};
    kld_quantize_opts qo = {.n_threads = 2};
    snprintf(label, sizeof label, "%s: HF vs its converted GGUF", name);
    same_logits(hf, out, s->n_vocab, label);
    snprintf(label, sizeof label, "%s (converted)", name);
    free(tf_check_path(label, out, out, NULL, ids, N_IDS)); /* the reference of the written file */
    if (s->n_expert > 0) hf_rt_fused_hf(name, hf, ids, N_IDS); /* transformers 5's gate_up_proj / down_proj */
    check_tensor_equal(out, gguf, "blk.0.attn_qkv.weight");
    check_tensor_equal(out, gguf, "blk.1.attn_gate.weight");
    check_tensor_equal(out, gguf, "blk.2.ssm_conv1d.weight");
    check_tensor_equal(out, gguf, "blk.0.ssm_a");
    check_tensor_equal(out, gguf, "blk.0.ssm_norm.weight");
    check_tensor_equal(out, gguf, "blk.3.attn_q_norm.weight");
    check_tensor_equal(out, gguf, "blk.3.post_attention_norm.weight");
    if (s->n_expert > 0) check_tensor_equal(out, gguf, "blk.1.ffn_down_exps.weight");
    /* BF16 weights: HF and its converted GGUF still agree bit for bit */
    char hf16[700], out16[700];
    snprintf(hf16, sizeof hf16, "%s/hf-bf16", dir);
    mkdir(hf16, 0755);
    snprintf(out16, sizeof out16, "%s/converted-bf16.gguf", dir);
    o.bf16 = true;
    CHECK(q3n_write_hf(s, gguf, hf16, &o), "%s: bf16 copy", name);
    CHECK_OK(kld_quantize_file(hf16, out16, "keep", &qo, NULL, &err), err);
    snprintf(label, sizeof label, "%s: HF bf16 vs its converted GGUF", name);
    same_logits(hf16, out16, s->n_vocab, label);
    /* a quantizing policy reads the converted tensors too */
    snprintf(out16, sizeof out16, "%s/converted-q8.gguf", dir);
    CHECK_OK(kld_quantize_file(hf, out16, "q8_0", &qo, NULL, &err), err);
    int64_t nv = 0;
    float *a = tf_engine_logits(hf, ids, N_IDS, N_IDS, 2, &nv), *b = tf_engine_logits(out16, ids, N_IDS, N_IDS, 2, &nv);
    if (a && b) {
        tf_cmp c = tf_compare(a, b, N_IDS, nv);
        printf("%-44s KLD %.3g\n", "HF → q8_0 GGUF vs HF", c.mean_kld);
        CHECK(c.max_abs > 0 && c.mean_kld < 5e-2, "%s: q8_0 conversion close to the checkpoint (%g)", name, c.mean_kld);
    }
    free(a);
    free(b);
}

/* Legacy fused ssm_in (llama.cpp still reads it) and MTP carriers. */
static void test_legacy_mtp(const synth_shape *s, int64_t nv) {
    char dir[512], gguf[600], hf[600], legacy[700], mtp[700], hfm[700], outm[700], outp[700];
    paths("legacy", dir, gguf, hf, sizeof gguf);
    q3n_hf_opts o = {0};
    if (!synth_write_gguf(s, gguf) || !q3n_write_hf(s, gguf, hf, &o)) {
        CHECK(false, "legacy: synthesize");
        return;
    }
    snprintf(legacy, sizeof legacy, "%s/legacy-ssm-in.gguf", dir);
    snprintf(mtp, sizeof mtp, "%s/mtp.gguf", dir);
    CHECK(q3n_rewrite_gguf(s, gguf, legacy, true, false), "rewrite with ssm_in");
    CHECK(q3n_rewrite_gguf(s, gguf, mtp, true, true), "rewrite with ssm_in and an MTP block");
    same_logits(gguf, legacy, nv, "legacy ssm_in GGUF vs attn_qkv/attn_gate");
    same_logits(gguf, mtp, nv, "GGUF + MTP block (nextn_predict_layers 1)");
    snprintf(hfm, sizeof hfm, "%s/hf-mtp", dir);
    mkdir(hfm, 0755);
    o.mtp = true;
    CHECK(q3n_write_hf(s, gguf, hfm, &o), "HF copy with mtp.*");
    same_logits(hf, hfm, nv, "HF + mtp.* tensors vs without");
    /* the converter drops mtp.*: both checkpoints convert to the same tensors */
    snprintf(outm, sizeof outm, "%s/converted-mtp.gguf", dir);
    snprintf(outp, sizeof outp, "%s/converted.gguf", dir);
    kld_error err = {0};
    CHECK_OK(kld_quantize_file(hfm, outm, "keep", NULL, NULL, &err), err);
    CHECK_OK(kld_quantize_file(hf, outp, "keep", NULL, NULL, &err), err);
    kld_gguf *a = NULL, *b = NULL;
    CHECK_OK(kld_gguf_open(outm, &a, &err), err);
    CHECK_OK(kld_gguf_open(outp, &b, &err), err);
    bool same = a && b && a->n_tensors == b->n_tensors;
    for (uint64_t i = 0; same && i < a->n_tensors; i++)
        same = !strcmp(a->tensors[i].name, b->tensors[i].name) && a->tensors[i].nbytes == b->tensors[i].nbytes &&
               !memcmp(a->tensors[i].data, b->tensors[i].data, a->tensors[i].nbytes);
    CHECK(same, "HF with mtp.* converts to the same tensors as without");
    kld_gguf_close(a);
    kld_gguf_close(b);
    /* a legacy GGUF through `quantize` keeps reading */
    snprintf(outm, sizeof outm, "%s/legacy-q8.gguf", dir);
    CHECK_OK(kld_quantize_file(legacy, outm, "q8_0", NULL, NULL, &err), err);
    int32_t ids[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    int64_t n2 = 0;
    float *l = tf_engine_logits(outm, ids, 8, 8, 1, &n2);
    CHECK(l != NULL, "legacy ssm_in GGUF quantized to q8_0 opens and runs");
    free(l);
}

static void expect_error(const char *label, const synth_shape *s, const q3n_hf_opts *o, const char *want1,
                         const char *want2) {
    char dir[512], gguf[600], hf[600];
    paths(label, dir, gguf, hf, sizeof gguf);
    if (!synth_write_gguf(s, gguf) || !q3n_write_hf(s, gguf, hf, o)) {
        CHECK(false, "%s: synthesize", label);
        return;
    }
    kld_error err = {0};
    kld_model *m = NULL;
    kld_status st = kld_model_open(hf, NULL, &m, &err);
    printf("error %-24s %s\n", label, err.msg);
    CHECK(st != KLD_OK && strstr(err.msg, want1) && (!want2 || strstr(err.msg, want2)),
          "%s: expected an error naming '%s': %s", label, want1, err.msg);
    kld_model_close(m);
}

static void test_errors(const synth_shape *s) {
    q3n_hf_opts o;
#define EDIT(k, v) (memset(&o, 0, sizeof o), o.edits[0].key = (k), o.edits[0].json = (v), &o)
    expect_error("no-key-dim", s, EDIT("linear_key_head_dim", NULL), "\"linear_key_head_dim\" is missing", NULL);
    expect_error("no-conv", s, EDIT("linear_conv_kernel_dim", NULL), "\"linear_conv_kernel_dim\" is missing", NULL);
    expect_error("conv-1", s, EDIT("linear_conv_kernel_dim", "1"), "\"linear_conv_kernel_dim\" = 1", "range");
    expect_error("v-heads", s, EDIT("linear_num_value_heads", "3"), "\"linear_num_value_heads\" = 3", "multiple");
    expect_error("v-dim", s, EDIT("linear_value_head_dim", "8"), "\"linear_value_head_dim\" = 8", "differs");
    expect_error("k-heads-str", s, EDIT("linear_num_key_heads", "\"two\""), "\"linear_num_key_heads\"", "integer");
    expect_error("layer-types", s, EDIT("layer_types", "[\"linear_attention\", \"mamba\", \"linear_attention\", \"full_attention\"]"),
                 "\"layer_types\"[1] = 'mamba'", NULL);
    expect_error("layer-types-n", s, EDIT("layer_types", "[\"full_attention\"]"), "\"layer_types\"", "4 entries");
    expect_error("layer-types-str", s, EDIT("layer_types", "\"full_attention\""), "\"layer_types\"",
                 "not \"full_attention\"");
    expect_error("interval-0", s, EDIT("full_attention_interval", "0"), "\"full_attention_interval\" = 0", NULL);
    expect_error("bias", s, EDIT("attention_bias", "true"), "\"attention_bias\"", NULL);
    expect_error("rotary-2", s, EDIT("partial_rotary_factor", "2"), "\"partial_rotary_factor\" = 2", "range");
    expect_error("rotary-0", s, EDIT("partial_rotary_factor", "0"), "\"partial_rotary_factor\" = 0", "range");
    memset(&o, 0, sizeof o);
    o.drop = "model.layers.1.linear_attn.in_proj_qkvz.weight";
    expect_error("no-qkvz", s, &o, "model.layers.1.linear_attn.in_proj_qkvz.weight", "missing");
    memset(&o, 0, sizeof o);
    o.drop = "model.layers.0.linear_attn.A_log";
    expect_error("no-alog", s, &o, "model.layers.0.linear_attn.A_log", "missing");
    memset(&o, 0, sizeof o);
    o.bad_shape = "model.layers.2.linear_attn.in_proj_qkvz.weight";
    expect_error("qkvz-shape", s, &o, "in_proj_qkvz.weight' has shape", "q/k heads 2");
    memset(&o, 0, sizeof o);
    o.bad_shape = "model.layers.0.linear_attn.in_proj_ba.weight";
    expect_error("ba-shape", s, &o, "blk.0.ssm_ba.weight' (model.layers.0.linear_attn.in_proj_ba.weight)", "shape");
    synth_shape x = *s;
    x.n_expert = 4;
    x.n_expert_used = 2;
    x.n_ff_exp = 32;
    x.n_ff_shexp = 48;
    expect_error("no-per-tok", &x, EDIT("num_experts_per_tok", NULL), "\"num_experts_per_tok\" is missing", NULL);
    expect_error("sparse-step", &x, EDIT("decoder_sparse_step", "2"), "\"decoder_sparse_step\" = 2", NULL);
    expect_error("no-shexp", &x, EDIT("shared_expert_intermediate_size", NULL), "\"shared_expert_intermediate_size\"", NULL);
#undef EDIT
}

/* layer_types instead of full_attention_interval gives the same model;
 * partial_rotary_factor defaults to 0.25 as Qwen3NextConfig's. */
static void test_config_variants(const synth_shape *s) {
    char dir[512], gguf[600], hf[600], hf2[700];
    paths("variants", dir, gguf, hf, sizeof gguf);
    q3n_hf_opts o = {0};
    CHECK(synth_write_gguf(s, gguf) && q3n_write_hf(s, gguf, hf, &o), "variants: synthesize");
    snprintf(hf2, sizeof hf2, "%s/hf-layer-types", dir);
    mkdir(hf2, 0755);
    o.edits[0].key = "full_attention_interval";
    o.edits[1].key = "layer_types";
    o.edits[1].json = "[\"linear_attention\", \"linear_attention\", \"linear_attention\", \"full_attention\"]";
    CHECK(q3n_write_hf(s, gguf, hf2, &o), "variants: layer_types copy");
    same_logits(hf, hf2, s->n_vocab, "HF layer_types vs full_attention_interval");
    memset(&o, 0, sizeof o);
    o.edits[0].key = "partial_rotary_factor";
    snprintf(hf2, sizeof hf2, "%s/hf-no-partial", dir);
    mkdir(hf2, 0755);
    CHECK(q3n_write_hf(s, gguf, hf2, &o), "variants: no partial_rotary_factor");
    kld_error err = {0};
    kld_model *m = NULL;
    CHECK_OK(kld_model_open(hf2, NULL, &m, &err), err);
    if (m) {
        const kld_hparams *hp = kld_model_hparams(m);
        CHECK(hp->n_rot == s->head_dim / 4, "partial_rotary_factor defaults to 0.25: n_rot %" PRId64, hp->n_rot);
        CHECK(hp->norm_weight_offset == 1.0, "HF Qwen3-Next norms are zero-centred");
        /* a layout no interval gives is written as per-layer flags */
        kld_hparams h2 = *hp;
        h2.layer_kind[0] = KLD_LAYER_ATTN;
        kld_gguf_writer *w = kld_gguf_writer_create();
        char out[700];
        snprintf(out, sizeof out, "%s/keys.gguf", dir);
        CHECK_OK(kld_hf_put_hparams_qwen3next(&h2, w, &err), err);
        CHECK_OK(kld_gguf_writer_write(w, out, &err), err);
        kld_gguf_writer_free(w);
        kld_gguf *g = NULL;
        CHECK_OK(kld_gguf_open(out, &g, &err), err);
        const kld_gguf_value *arr = g ? kld_gguf_get_arr(g, "qwen3next.attention.recurrent_layers") : NULL;
        int64_t f[4] = {-1, -1, -1, -1};
        for (uint64_t i = 0; arr && i < 4 && i < arr->v.arr.n; i++) kld_gguf_arr_int(arr, i, &f[i]);
        CHECK(arr && arr->v.arr.n == 4 && f[0] == 0 && f[1] == 1 && f[2] == 1 && f[3] == 0 &&
              !kld_gguf_find(g, "qwen3next.full_attention_interval"),
              "layout a,d,d,a: recurrent_layers [0,1,1,0] and no interval key");
        kld_gguf_close(g);
        kld_model_close(m);
    }
}

int main(void) {
    synth_shape s;
    synth_default(&s, "qwen3next");
    test_hf("dense", &s);
    synth_shape x;
    synth_default(&x, "qwen3next");
    x.n_expert = 4;
    x.n_expert_used = 2;
    x.n_ff_exp = 32;
    x.n_ff_shexp = 64; /* a multiple of q8_0's block: the q8_0 conversion below */
    x.tied = false;
    x.seed = 17;
    test_hf("moe", &x);
    test_legacy_mtp(&x, x.n_vocab);
    hf_rt_fused_gguf("qwen3next", &x); /* the converter's --fuse-gate-up-exps */
    hf_rt_fused_gguf_refused("qwen3moe");  /* llama.cpp's qwen3moe.cpp reads no ffn_gate_up_exps */
    test_config_variants(&s);
    test_errors(&s);
    return kt_finish();
}
