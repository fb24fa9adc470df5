/* test_forward_qwen35.c — Qwen3.5 / 3.6 / 3.8 (llama.cpp's `qwen35`, `qwen35moe`;
 * src/models/qwen35.cpp, qwen35moe.cpp) on small random weights: Qwen3-Next's
 * hybrid with β and α from ssm_beta / ssm_alpha, the v heads tiled over the
 * q/k heads (head h reads q/k head h mod n_k, the converter's order), gated
 * full attention with multi-section RoPE (text: one position in every
 * section), dense or MoE with the sigmoid-gated shared expert. The engine
 * against the float64 reference of test_ref_hybrid.c (one pass, chunks,
 * decode), the tiled order shown to matter, and the malformed files.
 * llama.cpp's own logits: test_lcpp_oracle (qwen35, qwen35moe). */
#include "engine/engine.h"
#include "model/hparams.h"
#include "quant/quant.h"
#include "tensor/types.h"
#include "synth_qwen3next_hf.h"
#include "test_forward_models.h"
#include "testlib.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#define N_IDS 40

static void shape(synth_shape *s, const char *arch) {
    synth_default(s, arch);
    s->mat_type = KLD_TYPE_F32;
    if (!strcmp(arch, "qwen35moe")) {
        s->n_expert = 4;
        s->n_expert_used = 2;
        s->n_ff_exp = 32;
        s->n_ff_shexp = 32;
    }
}

static void test_reference(const char *arch) {
    synth_shape s;
    shape(&s, arch);
    char path[512];
    snprintf(path, sizeof path, "%s/%s.gguf", kt_build_dir(), arch);
    CHECK(synth_write_gguf(&s, path), "synthesize %s", arch);
    int32_t ids[N_IDS];
    tf_make_ids(ids, N_IDS, s.n_vocab, 20261205);
    float *ref = tf_check_path(arch, path, path, NULL, ids, N_IDS);
    CHECK(ref != NULL, "%s: engine vs reference", arch);
    free(ref);
}

/* The same weights read as Qwen3-Next (grouped v heads, fused ssm_ba built
 * from ssm_beta / ssm_alpha) give other logits: the order is not a no-op. */
static void test_order_matters(void) {
    synth_shape s;
    shape(&s, "qwen35");
    char p35[512], pnext[512];
    snprintf(p35, sizeof p35, "%s/qwen35.gguf", kt_build_dir());
    int32_t ids[N_IDS];
    tf_make_ids(ids, N_IDS, s.n_vocab, 20261205);
    int64_t nv = 0;
    float *a = tf_engine_logits(p35, ids, N_IDS, N_IDS, 2, &nv);
    synth_shape q = s;
    q.arch = "qwen3next"; /* the same draws, Qwen3-Next's DeltaNet layout */
    snprintf(pnext, sizeof pnext, "%s/qwen35-as-qwen3next.gguf", kt_build_dir());
    CHECK(synth_write_gguf(&q, pnext), "synthesize the qwen3next twin");
    float *b = tf_engine_logits(pnext, ids, N_IDS, N_IDS, 2, &nv);
    if (a && b) {
        tf_cmp c = tf_compare(a, b, N_IDS, nv);
        CHECK(c.max_abs > 1e-2, "qwen35 vs its qwen3next reading: max |d| %.3g (must differ)", c.max_abs);
    }
    free(a), free(b);
}

/* The Hugging Face checkpoint (v heads grouped) gives the GGUF's logits bit
 * for bit: the loader puts every v-indexed tensor in tiled order, exactly. */
static void test_hf(void) {
    synth_shape s;
    shape(&s, "qwen35");
    char gguf[512], dir[512];
    snprintf(gguf, sizeof gguf, "%s/qwen35.gguf", kt_build_dir());
    snprintf(dir, sizeof dir, "%s/qwen35-hf", kt_build_dir());
    mkdir(dir, 0755);
    CHECK(q35_write_hf(&s, gguf, dir), "write the Qwen3.5 HF checkpoint");
    int32_t ids[N_IDS];
    tf_make_ids(ids, N_IDS, s.n_vocab, 20261205);
    int64_t nv = 0, nv2 = 0;
    float *a = tf_engine_logits(gguf, ids, N_IDS, N_IDS, 2, &nv), *b = tf_engine_logits(dir, ids, N_IDS, 7, 2, &nv2);
    CHECK(a && b && nv == nv2 && !memcmp(a, b, sizeof(float) * (size_t)(N_IDS * nv)),
          "qwen35: the HF checkpoint's logits equal the GGUF's bit for bit");
    free(a), free(b);
    kld_model *m = NULL;
    kld_error err = {0};
    CHECK_OK(kld_model_open(dir, NULL, &m, &err), err);
    if (m) {
        const kld_hparams *hp = kld_model_hparams(m);
        CHECK(hp->rope_sections[0] == 2 && hp->rope_sections[1] == 1 && hp->rope_sections[2] == 1 &&
                  hp->n_rot == s.head_dim / 2 && hp->norm_weight_offset == 1.0,
              "qwen35 config.json: rope_parameters' sections and partial factor, zero-centred norms");
        kld_model_close(m);
    }
    /* a missing projection is named */
    char path[600];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    /* rewrite without layer 1's in_proj_b: rename it in the header (same length) */
    size_t size = 0;
    char *buf = kt_read_file(path, &size);
    char *at = buf ? strstr(buf + 8, "layers.1.linear_attn.in_proj_b.weight") : NULL;
    if (at) {
        memcpy(at, "layers.1.linear_attn.in_proj_X", 30);
        kt_write_file(path, buf, size);
        CHECK(kld_model_open(dir, NULL, &m, &err) == KLD_ERR_FORMAT &&
                  strstr(err.msg, "model.layers.1.linear_attn.in_proj_b.weight' is missing"),
              "qwen35 HF without in_proj_b: %s", err.msg);
    }
    CHECK(at != NULL, "the HF header names in_proj_b");
    free(buf);
}

/* Qwen3.5-MoE from Hugging Face (qwen3_5_moe_text: Qwen3.5's attention and DeltaNet with
 * Qwen3-Next's experts, one tensor per expert, and sigmoid-gated shared expert): the GGUF's
 * logits bit for bit; a missing expert and a missing shared_expert_intermediate_size named. */
static void test_hf_moe(void) {
    synth_shape s;
    shape(&s, "qwen35moe");
    char gguf[512], dir[512];
    snprintf(gguf, sizeof gguf, "%s/qwen35moe.gguf", kt_build_dir());
    snprintf(dir, sizeof dir, "%s/qwen35moe-hf", kt_build_dir());
    mkdir(dir, 0755);
    CHECK(synth_write_gguf(&s, gguf), "synthesize qwen35moe");
    CHECK(q35_write_hf(&s, gguf, dir), "write the Qwen3.5-MoE HF checkpoint");
    int32_t ids[N_IDS];
    tf_make_ids(ids, N_IDS, s.n_vocab, 20261207);
    int64_t nv = 0, nv2 = 0;
    float *a = tf_engine_logits(gguf, ids, N_IDS, N_IDS, 2, &nv), *b = tf_engine_logits(dir, ids, N_IDS, 7, 2, &nv2);
    CHECK(a && b && nv == nv2 && !memcmp(a, b, sizeof(float) * (size_t)(N_IDS * nv)),
          "qwen35moe: the HF checkpoint's logits equal the GGUF's bit for bit");
    free(a), free(b);
    kld_model *m = NULL;
    kld_error err = {0};
    CHECK_OK(kld_model_open(dir, NULL, &m, &err), err);
    if (m) {
        const kld_hparams *hp = kld_model_hparams(m);
        CHECK(!strcmp(hp->arch, "qwen35moe") && hp->n_expert == 4 && hp->n_expert_used == 2 && hp->n_ff_exp == 32 &&
                  hp->n_ff_shexp == 32 && hp->moe_norm_w,
              "qwen35moe config.json: arch %s, %" PRId64 " experts top %" PRId64 ", widths %" PRId64 "/%" PRId64,
              hp->arch, hp->n_expert, hp->n_expert_used, hp->n_ff_exp, hp->n_ff_shexp);
        kld_model_close(m);
    }
    char path[600];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    size_t size = 0;
    char *buf = kt_read_file(path, &size);
    char *at = buf ? strstr(buf + 8, "layers.2.mlp.experts.3.up_proj.weight") : NULL;
    CHECK(at != NULL, "the HF header names layer 2's expert 3");
    if (at) {
        memcpy(at, "layers.2.mlp.experts.3.up_projXweight", 37);
        kt_write_file(path, buf, size);
        CHECK(kld_model_open(dir, NULL, &m, &err) == KLD_ERR_FORMAT && strstr(err.msg, "experts.3.up_proj"),
              "qwen35moe HF without expert 3's up_proj: %s", err.msg);
    }
    free(buf);
    /* the config without shared_expert_intermediate_size */
    snprintf(path, sizeof path, "%s/config.json", dir);
    json_error_t je;
    json_t *c = json_load_file(path, 0, &je);
    if (c) {
        json_object_del(c, "shared_expert_intermediate_size");
        json_dump_file(c, path, 0);
        json_decref(c);
        CHECK(kld_model_open(dir, NULL, &m, &err) == KLD_ERR_FORMAT &&
                  strstr(err.msg, "config.json") && strstr(err.msg, "shared_expert_intermediate_size"),
              "qwen35moe config without shared_expert_intermediate_size: %s", err.msg);
    }
}

static void test_errors(void) {
    synth_shape s;
    shape(&s, "qwen35");
    s.drop_tensor = "blk.0.ssm_beta.weight";
    tf_expect_open_error("no-beta", &s, "blk.0.ssm_beta.weight", "missing");
    shape(&s, "qwen35");
    s.bad_shape_tensor = "blk.1.ssm_alpha.weight";
    tf_expect_open_error("alpha-shape", &s, "blk.1.ssm_alpha.weight", "expected [64, 4]");
    shape(&s, "qwen35");
    s.rename_from = "blk.2.ssm_beta.weight"; /* Qwen3-Next's fused name is not Qwen3.5's */
    s.rename_to = "blk.2.ssm_ba.weight";
    tf_expect_open_error("ba-for-beta", &s, "blk.2.ssm_beta.weight", "missing");
    shape(&s, "qwen35moe");
    s.drop_tensor = "blk.3.ffn_gate_inp_shexp.weight";
    tf_expect_open_error("moe-no-shexp-gate", &s, "blk.3.ffn_gate_inp_shexp.weight", "missing");
    shape(&s, "qwen35");
    s.n_expert = 4; /* llama.cpp's qwen35 asserts a dense FFN: the expert keys are not read */
    s.n_expert_used = 2;
    tf_expect_open_error("dense-with-experts", &s, "blk.0.ffn_gate.weight", "missing");
    shape(&s, "qwen35");
    s.dn_skip_key = "ssm.group_count";
    tf_expect_open_error("no-group-count", &s, "qwen35.ssm.group_count", "missing");
}

int main(void) {
    kld_kernels_init();
    test_reference("qwen35");
    test_reference("qwen35moe");
    test_order_matters();
    test_hf();
    {
        char p[512];
        snprintf(p, sizeof p, "%s/qwen35moe.gguf", kt_build_dir());
        tf_check_quantize_q8_0("qwen35moe", p, 300, N_IDS, 2e-2);
    }
    test_hf_moe();
    test_errors();
    return kt_finish();
}
