/* test_gemma4_hf.c — Gemma 4 from a Hugging Face checkpoint, as llama.cpp's
 * converter reads it (conversion/gemma.py Gemma4Model): synthesized gemma4
 * GGUFs copied into safetensors + config.json, the text-only form
 * (model_type gemma4_text, model.*) and the multimodal one (model_type
 * gemma4 with text_config, model.language_model.* beside vision and audio
 * towers that are never read). The small uniform model and the E2B geometry
 * (per-layer embeddings, KV sharing, the double-wide FFN of the sharing
 * layers, full heads of 64 with 1 KV head beside sliding heads of 32 with 2)
 * and the 26B-A4B's experts beside the dense FFN (router.proj / scale /
 * per_expert_scale, experts.gate_up_proj read as llama.cpp's
 * ffn_gate_up_exps, experts.down_proj) give the hyper-parameters the GGUF gives, the converter's rope_freqs bit
 * for bit (generated at load), the GGUF's logits bit for bit and the float64
 * reference's; malformed configs are errors naming config.json, the field
 * and the value. */
#include "engine/engine.h"
#include "hf_roundtrip.h"
#include "io/gguf.h"
#include "io/source.h"
#include "model/hparams.h"
#include "model/weights.h"
#include "quant/quant.h"
#include "tensor/types.h"
#include "synth_gemma4_hf.h"
#include "test_forward_models.h"
#include "testlib.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#define N_IDS 40

static void paths(const char *label, char *gguf, char *hf, size_t cap) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/gemma4-hf-%s", kt_build_dir(), label);
    mkdir(dir, 0755);
    snprintf(gguf, cap, "%s/model.gguf", dir);
    snprintf(hf, cap, "%s/hf", dir);
    mkdir(hf, 0755);
}

/* The hyper-parameters and the rope_freqs of the HF folder equal the GGUF's. */
static void check_hparams(const char *label, const char *gguf, const char *hf) {
    kld_error err = {0};
    kld_source *sa = NULL, *sb = NULL;
    kld_hparams *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
    kld_weights wa = {0}, wb = {0};
    CHECK_OK(kld_source_open(hf, &sa, &err), err);
    CHECK_OK(kld_source_open(gguf, &sb, &err), err);
    if (!sa || !sb || kld_hparams_read(sa, a, &err) || kld_hparams_read(sb, b, &err) ||
        kld_weights_bind(sa, a, &wa, &err) || kld_weights_bind(sb, b, &wb, &err)) {
        CHECK(false, "%s: read both: %s", label, err.msg);
        goto done;
    }
    int bad = 0;
#define SAME(f)                                                                                  \
    if (a->f != b->f) {                                                                          \
        bad++;                                                                                   \
        printf("%s: %s: HF %g, GGUF %g\n", label, #f, (double)a->f, (double)b->f);               \
    }
    SAME(n_embd) SAME(n_layer) SAME(n_head) SAME(n_head_kv) SAME(head_dim) SAME(head_dim_v) SAME(n_ff)
    SAME(n_vocab) SAME(n_rot) SAME(head_dim_swa) SAME(n_rot_swa) SAME(n_layer_kv) SAME(n_embd_per_layer)
    SAME(sliding_window) SAME(swa_pattern) SAME(rope_freq_base) SAME(rope_freq_base_swa) SAME(rope_freq_scale)
    SAME(rope_freq_scale_swa) SAME(attn_scale) SAME(attn_softcap) SAME(final_softcap) SAME(embd_scale)
    SAME(tied_output) SAME(norm_weight_offset) SAME(rope_type) SAME(n_expert) SAME(n_expert_used) SAME(n_ff_exp)
    SAME(moe_norm_w) SAME(moe_gating) SAME(moe_w_scale)
#undef SAME
    if ((float)a->norm_eps != (float)b->norm_eps) bad++, printf("%s: norm_eps differs\n", label);
    if (strcmp(a->rope_scaling, b->rope_scaling)) bad++, printf("%s: rope_scaling %s / %s\n", label, a->rope_scaling, b->rope_scaling);
    for (int64_t il = 0; il < a->n_layer && il < KLD_MAX_LAYER; il++) {
        const bool diff = kld_hparams_layer_swa(a, il) != kld_hparams_layer_swa(b, il) ||
                          kld_hp_n_ff(a, il) != kld_hp_n_ff(b, il) || kld_hp_n_head_kv(a, il) != kld_hp_n_head_kv(b, il) ||
                          kld_hp_head_dim(a, il) != kld_hp_head_dim(b, il) || kld_hp_n_rot(a, il) != kld_hp_n_rot(b, il) ||
                          kld_hp_kv_source(a, il) != kld_hp_kv_source(b, il);
        if (diff) bad++, printf("%s: layer %" PRId64 "'s geometry differs\n", label, il);
    }
    CHECK(bad == 0, "%s: config.json gives the GGUF's hyper-parameters (%d differ)", label, bad);
    const kld_tensor *ra = wa.rope_freqs, *rb = wb.rope_freqs;
    CHECK(ra && rb && ra->type == rb->type && ra->nbytes == rb->nbytes && !memcmp(ra->data, rb->data, rb->nbytes),
          "%s: rope_freqs generated as the converter does equals the GGUF's bit for bit", label);
    if (ra && rb) printf("%-24s rope_freqs %" PRId64 " values equal to the GGUF's\n", label, rb->ne[0]);
done:
    kld_weights_free(&wa);
    kld_weights_free(&wb);
    free(a), free(b);
    kld_source_close(sa);
    kld_source_close(sb);
}

/* The experts' gate and up: one ffn_gate_up_exps as llama.cpp's converter writes it, each expert's
 * gate rows then its up rows, against the synthesized ffn_gate_exps / ffn_up_exps; the rest as
 * stored. */
static bool gemma4_tensor(const kld_gguf *a, const kld_tensor *t, uint64_t *merged, void *ctx) {
    (void)ctx;
    int il = -1, used = 0;
    char kind[16] = "";
    if (sscanf(t->name, "blk.%d.ffn_%15[a-z]_exps.weight%n", &il, kind, &used) != 2 || t->name[used] ||
        (strcmp(kind, "gate") && strcmp(kind, "up")))
        return hf_rt_same_tensor(a, t);
    char fn[64];
    snprintf(fn, sizeof fn, "blk.%d.ffn_gate_up_exps.weight", il);
    const kld_tensor *f = kld_gguf_find_tensor(a, fn);
    const uint64_t slice = t->nbytes / (uint64_t)t->ne[2];
    bool eq = f && f->type == t->type && f->nbytes == 2 * t->nbytes && f->ne[0] == t->ne[0] &&
              f->ne[1] == 2 * t->ne[1] && f->ne[2] == t->ne[2];
    for (int64_t e = 0; eq && e < t->ne[2]; e++)
        eq = !memcmp((const uint8_t *)f->data + (2 * (uint64_t)e + (kind[0] == 'u')) * slice,
                     (const uint8_t *)t->data + (uint64_t)e * slice, (size_t)slice);
    *merged += kind[0] == 'g';
    return eq;
}

/* `kldeval quantize HF OUT keep`: the synthesized GGUF's tensors (names and bytes, rope_freqs
 * included) and gemma4 keys, and the checkpoint's logits bit for bit. */
static void check_converted(const char *label, const char *gguf, const char *hf, const int32_t *ids) {
    char out[700];
    snprintf(out, sizeof out, "%s/../converted.gguf", hf);
    const hf_rt_family f = {.tensor_equal = gemma4_tensor, .key_prefix = "gemma4.", .min_keys = 14};
    hf_rt_check(&f, label, gguf, hf, out, ids, N_IDS);
}

/* q8_0 three ways: the GGUF quantized on load (@q8_0), the checkpoint quantized on load (its experts
 * as per-expert views of experts.gate_up_proj) and `quantize HF q8_0` (fused ffn_gate_up_exps): the
 * same logits bit for bit, near the f32 ones. */
static void check_q8(const char *label, const char *gguf, const char *hf, const int32_t *ids) {
    char at_g[700], at_h[700], out[700];
    snprintf(at_g, sizeof at_g, "%s@q8_0", gguf);
    snprintf(at_h, sizeof at_h, "%s@q8_0", hf);
    snprintf(out, sizeof out, "%s/../converted-q8_0.gguf", hf);
    kld_error err = {0};
    CHECK_OK(kld_quantize_file(hf, out, "q8_0", NULL, NULL, &err), err);
    int64_t nv = 0;
    float *base = tf_engine_logits(gguf, ids, N_IDS, 16, 2, &nv), *a = tf_engine_logits(at_g, ids, N_IDS, 16, 2, &nv);
    float *b = tf_engine_logits(at_h, ids, N_IDS, 16, 2, &nv), *c = tf_engine_logits(out, ids, N_IDS, 16, 2, &nv);
    const size_t bytes = sizeof(float) * (size_t)(N_IDS * nv);
    CHECK(a && b && c && !memcmp(a, b, bytes) && !memcmp(a, c, bytes),
          "%s: GGUF@q8_0, HF@q8_0 and quantize HF q8_0 give the same logits bit for bit", label);
    if (base && a) {
        const tf_cmp k = tf_compare(base, a, N_IDS, nv);
        printf("%-24s q8_0 (three ways, equal) vs f32: KLD %.3g, argmax %d/%d\n", label, k.mean_kld, k.same_argmax,
               N_IDS);
        CHECK(k.mean_kld > 0 && k.mean_kld < 2e-2, "%s: q8_0 vs f32 KLD %.3g", label, k.mean_kld);
    }
    free(base), free(a), free(b), free(c);
}

/* The HF copy of s: the GGUF's hyper-parameters and logits bit for bit, and the reference's. */
static void test_same(const char *label, const synth_shape *s, bool wrapped, const hf_edit *ed) {
    char gguf[600], hf[600];
    paths(label, gguf, hf, sizeof gguf);
    if (!synth_write_gguf(s, gguf) || !g4_write_hf(s, gguf, hf, wrapped, NULL, ed)) {
        CHECK(false, "%s: synthesize", label);
        return;
    }
    check_hparams(label, gguf, hf);
    int32_t ids[N_IDS];
    tf_make_ids(ids, N_IDS, s->n_vocab, 20261204);
    int64_t nv = 0;
    float *a = tf_engine_logits(gguf, ids, N_IDS, 16, 2, &nv);
    float *b = tf_engine_logits(hf, ids, N_IDS, 16, 2, &nv);
    const bool same = a && b && memcmp(a, b, sizeof(float) * (size_t)(N_IDS * nv)) == 0;
    if (a && b) printf("%-24s HF vs GGUF max|d| %.3g\n", label, tf_compare(a, b, N_IDS, nv).max_abs);
    CHECK(same, "%s: HF logits must equal the GGUF's bit for bit", label);
    free(a);
    free(b);
    char l2[96];
    snprintf(l2, sizeof l2, "%s (HF)", label);
    free(tf_check_path(l2, hf, gguf, NULL, ids, N_IDS)); /* vs the float64 reference, chunks, decode */
    check_converted(label, gguf, hf, ids);
    if (s->n_expert > 0) check_q8(label, gguf, hf, ids);
}

/* The E2B geometry the converter can express: the sliding layers rotate every dim
 * (it reads their factor from rope_parameters' top level, absent in the released files). */
static void e2b_hf(synth_shape *s) {
    synth_gemma4_e2b(s);
    s->g4_rot_swa = 0;
}

static void expect_error(const char *label, bool wrapped, const hf_edit *ed, const char *drop, const char *want1,
                         const char *want2) {
    synth_shape s;
    e2b_hf(&s);
    char gguf[600], hf[600];
    paths(label, gguf, hf, sizeof gguf);
    if (!synth_write_gguf(&s, gguf) || !g4_write_hf(&s, gguf, hf, wrapped, drop, ed)) {
        CHECK(false, "%s: synthesize", label);
        return;
    }
    kld_error err = {0};
    kld_model *m = NULL;
    const kld_status st = kld_model_open(hf, NULL, &m, &err);
    printf("error %-18s %s\n", label, err.msg);
    CHECK(st != KLD_OK && strstr(err.msg, want1) && (!want2 || strstr(err.msg, want2)),
          "%s: expected an error naming '%s' / '%s': %s", label, want1, want2 ? want2 : "", err.msg);
    kld_model_close(m);
}

#define SW "\"sliding_attention\""
#define FULL "\"full_attention\""

static void test_errors(void) {
#define E1(k, v) ((const hf_edit[]){{k, v}, {NULL, NULL}})
    expect_error("types-short", false, E1("layer_types", "[" SW ", " FULL "]"), NULL,
                 "config.json: \"layer_types\" must be an array of 8 entries (num_hidden_layers), it has 2", NULL);
    expect_error("types-unknown", true,
                 E1("layer_types", "[" SW "," SW "," SW ", \"chunked_attention\"," FULL "," SW "," SW "," FULL "]"),
                 NULL, "config.json: \"layer_types\"[3] = 'chunked_attention'", "sliding_attention, full_attention");
    expect_error("types-missing", false, E1("layer_types", NULL), NULL, "config.json: \"layer_types\" is missing",
                 NULL);
    expect_error("shared-7", false, E1("num_kv_shared_layers", "7"), NULL,
                 "config.json: \"num_kv_shared_layers\" = 7 is out of range [0, 6]", NULL);
    expect_error("shared-2", false, E1("num_kv_shared_layers", "2"), NULL,
                 "config.json: \"num_kv_shared_layers\" = 2: layer 6 (sliding) would read layer 4's KV cache, "
                 "which is full", NULL);
    expect_error("no-global-head", true, E1("global_head_dim", NULL), NULL,
                 "config.json: \"global_head_dim\" is missing", "head_dim = 32");
    expect_error("global-kv-3", false, E1("num_global_key_value_heads", "3"), NULL,
                 "config.json: \"num_global_key_value_heads\" = 3 does not divide num_attention_heads = 4", NULL);
    expect_error("full-rope-default", false,
                 E1("rope_parameters", "{\"full_attention\": {\"rope_type\": \"default\", \"rope_theta\": 1e6}}"), NULL,
                 "config.json: \"rope_parameters.full_attention.rope_type\" = \"default\"", "\"proportional\"");
    expect_error("no-partial", false,
                 E1("rope_parameters", "{\"full_attention\": {\"rope_type\": \"proportional\", \"rope_theta\": 1e6}}"),
                 NULL, "config.json: \"rope_parameters.full_attention.partial_rotary_factor\" is missing", NULL);
    expect_error("swa-partial", false,
                 E1("rope_parameters", "{\"full_attention\": {\"rope_type\": \"proportional\", \"partial_rotary_factor\""
                                       ": 0.25}, \"sliding_attention\": {\"rope_type\": \"default\", "
                                       "\"partial_rotary_factor\": 0.5}}"),
                 NULL, "config.json: \"rope_parameters.sliding_attention.partial_rotary_factor\" = 0.5",
                 "converter ignores it");
    expect_error("window-str", false, E1("sliding_window", "\"512\""), NULL,
                 "config.json: \"sliding_window\" must be an integer, not \"512\"", NULL);
    expect_error("attn-softcap", false, E1("attn_logit_softcapping", "50.0"), NULL,
                 "config.json: \"attn_logit_softcapping\" is set", NULL);
    expect_error("moe-no-experts", false, E1("enable_moe_block", "true"), NULL,
                 "config.json: \"enable_moe_block\" is true but \"num_experts\" is missing", NULL);
    expect_error("per-layer-128", false, E1("hidden_size_per_layer_input", "128"), NULL,
                 "config.json: \"hidden_size_per_layer_input\" = 128 is out of range [0, 64]", NULL);
    /* the tensors the config asks for */
    expect_error("no-ple-gate", false, NULL, "model.layers.2.per_layer_input_gate.weight",
                 "model.layers.2.per_layer_input_gate.weight", "missing");
    expect_error("no-ple-table", true, NULL, "model.language_model.embed_tokens_per_layer.weight",
                 "model.language_model.embed_tokens_per_layer.weight", "missing");
    expect_error("ple-width", false, E1("hidden_size_per_layer_input", "16"), NULL,
                 "model.embed_tokens_per_layer.weight", "expected [128, ");
#undef E1
}

static void moe_error(const synth_shape *m, const char *label, const hf_edit *ed, const char *drop, const char *want1,
                      const char *want2) {
    char gguf[600], hf[600];
    paths(label, gguf, hf, sizeof gguf);
    if (!synth_write_gguf(m, gguf) || !g4_write_hf(m, gguf, hf, false, drop, ed)) {
        CHECK(false, "%s: synthesize", label);
        return;
    }
    kld_error err = {0};
    kld_model *md = NULL;
    const kld_status st = kld_model_open(hf, NULL, &md, &err);
    printf("error %-18s %s\n", label, err.msg);
    CHECK(st != KLD_OK && strstr(err.msg, want1) && (!want2 || strstr(err.msg, want2)),
          "%s: expected an error naming '%s' / '%s': %s", label, want1, want2 ? want2 : "", err.msg);
    kld_model_close(md);
}

static void test_moe_errors(const synth_shape *m) {
#define E1(k, v) ((const hf_edit[]){{k, v}, {NULL, NULL}})
    moe_error(m, "moe-top-5", E1("top_k_experts", "5"), NULL, "config.json: \"top_k_experts\" = 5 is out of range [1, 4]",
              NULL);
    moe_error(m, "moe-ff-48", E1("moe_intermediate_size", "48"), NULL, "model.layers.0.experts.gate_up_proj",
              "expected [64, 96, 4]");
    moe_error(m, "moe-no-scale", NULL, "model.layers.1.router.scale", "model.layers.1.router.scale", "missing");
    moe_error(m, "moe-no-down", NULL, "model.layers.2.experts.down_proj", "model.layers.2.experts.down_proj", "missing");
#undef E1
}

int main(void) {
    kld_kernels_init();
    synth_shape s;
    synth_default(&s, "gemma4");
    s.mat_type = KLD_TYPE_F32;
    s.qk_norm_w = 0.5;
    /* one head size, uniform KV heads and FFN: the text-only form */
    test_same("uniform-text", &s, false, NULL);
    /* the E2B geometry, text-only; rms_norm_eps as the released configs spell it */
    synth_shape e;
    e2b_hf(&e);
    test_same("e2b-text", &e, false, ((const hf_edit[]){{"rms_norm_eps", "1e-06"}, {NULL, NULL}}));
    /* the same in the multimodal form (Gemma4ForConditionalGeneration: text_config, model.language_model.*) */
    e.seed = 99;
    test_same("e2b-wrapped", &e, true, NULL);
    /* the 26B-A4B's experts beside the dense FFN: router.proj / router.scale / per_expert_scale,
     * experts.gate_up_proj (llama.cpp's ffn_gate_up_exps) and experts.down_proj, both forms */
    synth_shape m;
    synth_default(&m, "gemma4");
    m.mat_type = KLD_TYPE_F32;
    m.qk_norm_w = 0.5;
    m.n_expert = 4;
    m.n_expert_used = 2;
    m.n_ff_exp = 32;
    test_same("moe-text", &m, false, NULL);
    m.seed = 31;
    test_same("moe-wrapped", &m, true, NULL);
    test_errors();
    test_moe_errors(&m);
    return kt_finish();
}
