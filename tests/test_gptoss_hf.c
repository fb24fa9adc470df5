/* test_gptoss_hf.c — gpt-oss from a Hugging Face checkpoint (model_type
 * gpt_oss, transformers' GptOssForCausalLM names): a synthesized gpt-oss
 * GGUF (sinks, q/k/v/o biases, even layers sliding, YaRN, biased router and
 * experts) copied into safetensors + config.json as transformers saves it —
 * the experts as the released MXFP4 *_blocks / *_scales (OpenAI's nibble
 * order) or as float gate_up_proj / down_proj, gate and up interleaved. The
 * HF folder gives the GGUF's logits bit for bit; `quantize HF keep` gives the
 * GGUF's tensors byte for byte and its keys; the written HF codes decode (by
 * OpenAI's rule) to the GGUF's values; malformed checkpoints are refused by
 * name. */
#include "engine/engine.h"
#include "hf_roundtrip.h"
#include "io/gguf.h"
#include "io/safetensors.h"
#include "quant/quant.h"
#include "synth_gptoss_hf.h"
#include "tensor/types.h"
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
    snprintf(dir, sizeof dir, "%s/gptoss-hf-%s", kt_build_dir(), label);
    mkdir(dir, 0755);
    snprintf(gguf, cap, "%s/model.gguf", dir);
    snprintf(hf, cap, "%s/hf", dir);
    mkdir(hf, 0755);
}

static void shape(synth_shape *s, uint32_t exp_type) {
    synth_default(s, "gpt-oss");
    s->mat_type = KLD_TYPE_F32;
    s->n_ff = s->n_ff_exp; /* the converter writes feed_forward_length = intermediate_size */
    s->tied = false;       /* llama.cpp's gpt-oss requires output.weight */
    if (exp_type != KLD_TYPE_F32) {
        s->exp_type_set = true;
        s->exp_type = exp_type;
    }
}

/* llama.cpp's converter writes gpt-oss's biases and routers in float32: the same values widened. */
typedef struct widen_count {
    uint64_t widened, to_widen;
} widen_count;

static bool gptoss_tensor(const kld_gguf *a, const kld_tensor *y, uint64_t *merged, void *ctx) {
    (void)merged;
    widen_count *c = ctx;
    const kld_tensor *x = kld_gguf_find_tensor(a, y->name);
    bool eq = hf_rt_same_tensor(a, y);
    const size_t len = strlen(y->name);
    const bool f32_class = (len > 5 && !strcmp(y->name + len - 5, ".bias")) || strstr(y->name, "ffn_gate_inp.weight");
    c->to_widen += f32_class && y->type != KLD_TYPE_F32;
    if (x && !eq && f32_class && y->type != KLD_TYPE_F32 && x->type == KLD_TYPE_F32 &&
        !memcmp(x->ne, y->ne, sizeof x->ne)) {
        const int64_t n = kld_tensor_nelements(y);
        float *v = malloc(sizeof(float) * (size_t)n);
        kld_type_info_get(y->type)->to_float_ref(y->data, v, n);
        eq = !memcmp(v, x->data, sizeof(float) * (size_t)n);
        c->widened += eq;
        free(v);
    }
    return eq;
}

static void gptoss_keys(const char *label, const kld_gguf *a, const kld_gguf *b, void *ctx) {
    const widen_count *c = ctx;
    printf("%-28s converted: %" PRIu64 " non-f32 biases and routers widened to f32\n", label, c->widened);
    CHECK(c->widened == c->to_widen, "%s: %" PRIu64 " of the %" PRIu64 " non-f32 biases and routers written in f32",
          label, c->widened, c->to_widen);
    static const char *const ints[] = {"gpt-oss.block_count", "gpt-oss.context_length", "gpt-oss.embedding_length",
                                       "gpt-oss.feed_forward_length", "gpt-oss.attention.head_count",
                                       "gpt-oss.attention.head_count_kv", "gpt-oss.attention.key_length",
                                       "gpt-oss.attention.value_length", "gpt-oss.expert_count",
                                       "gpt-oss.expert_used_count", "gpt-oss.expert_feed_forward_length",
                                       "gpt-oss.attention.sliding_window", "gpt-oss.rope.scaling.original_context_length"};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        const int64_t ka = hf_rt_key_int(a, ints[i], -1), kb = hf_rt_key_int(b, ints[i], -1);
        CHECK(ka == kb && ka > 0, "%s: converted %s = %" PRId64 ", the GGUF's %" PRId64, label, ints[i], ka, kb);
    }
    static const char *const nums[] = {"gpt-oss.rope.freq_base", "gpt-oss.rope.scaling.factor",
                                       "gpt-oss.attention.layer_norm_rms_epsilon"};
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        const double na = hf_rt_key_num(a, nums[i], -1), nb = hf_rt_key_num(b, nums[i], -1);
        CHECK(na == nb && na > 0, "%s: converted %s = %g, the GGUF's %g", label, nums[i], na, nb);
    }
    kld_str ta = {0}, tb = {0};
    CHECK(kld_gguf_get_str(a, "gpt-oss.rope.scaling.type", &ta) && kld_gguf_get_str(b, "gpt-oss.rope.scaling.type", &tb) &&
              ta.len == tb.len && !memcmp(ta.ptr, tb.ptr, (size_t)ta.len),
          "%s: converted rope.scaling.type is the GGUF's", label);
}

/* `kldeval quantize HF OUT keep`: the synthesized GGUF's tensors (names, types, bytes) and keys. */
static void check_converted(const char *label, const char *gguf, const char *hf, const int32_t *ids) {
    char out[700];
    snprintf(out, sizeof out, "%s/../converted.gguf", hf);
    widen_count c = {0};
    const hf_rt_family f = {.tensor_equal = gptoss_tensor, .keys = gptoss_keys, .ctx = &c};
    hf_rt_check(&f, label, gguf, hf, out, ids, N_IDS);
}

/* The HF MXFP4 codes as OpenAI defines them (low nibble the even value, scale 2^(e − 127))
 * decode to the GGUF's expert values: every element of layer 1's three matrices. */
static void check_codes(const char *gguf, const char *hf) {
    char st_path[700];
    snprintf(st_path, sizeof st_path, "%s/model.safetensors", hf);
    kld_error err = {0};
    kld_safetensors *st = NULL;
    kld_gguf *g = NULL;
    CHECK_OK(kld_safetensors_open(st_path, &st, &err), err);
    CHECK_OK(kld_gguf_open(gguf, &g, &err), err);
    if (!st || !g) {
        kld_safetensors_close(st);
        kld_gguf_close(g);
        return;
    }
    const struct {
        const char *hf, *gate, *up;
    } m[] = {{"gate_up_proj", "blk.1.ffn_gate_exps.weight", "blk.1.ffn_up_exps.weight"},
             {"down_proj", "blk.1.ffn_down_exps.weight", NULL}};
    int64_t checked = 0, bad = 0;
    for (int k = 0; k < 2; k++) {
        const kld_tensor *B = NULL, *S = NULL;
        for (size_t i = 0; i < st->n_tensors; i++) {
            char n[120];
            snprintf(n, sizeof n, "model.layers.1.mlp.experts.%s_blocks", m[k].hf);
            if (!strcmp(st->tensors[i].name, n)) B = &st->tensors[i];
            snprintf(n, sizeof n, "model.layers.1.mlp.experts.%s_scales", m[k].hf);
            if (!strcmp(st->tensors[i].name, n)) S = &st->tensors[i];
        }
        const kld_tensor *tg = kld_gguf_find_tensor(g, m[k].gate), *tu = m[k].up ? kld_gguf_find_tensor(g, m[k].up) : NULL;
        CHECK(B && S && tg && tg->type == KLD_TYPE_MXFP4, "layer 1 %s: HF blocks / scales and the GGUF's MXFP4", m[k].hf);
        if (!B || !S || !tg) continue;
        const int64_t cols = tg->ne[0], rows = tg->ne[1], X = tg->ne[2], hf_rows = tu ? 2 * rows : rows;
        float *fg = malloc(sizeof(float) * (size_t)(cols * rows * X)), *fu = malloc(sizeof(float) * (size_t)(cols * rows * X));
        kld_type_info_get(KLD_TYPE_MXFP4)->to_float_ref(tg->data, fg, cols * rows * X);
        if (tu) kld_type_info_get(KLD_TYPE_MXFP4)->to_float_ref(tu->data, fu, cols * rows * X);
        for (int64_t x = 0; x < X; x++)
            for (int64_t hr = 0; hr < hf_rows; hr++)
                for (int64_t c = 0; c < cols; c++) {
                    const float *src = tu && hr % 2 ? fu : fg;
                    const int64_t r = tu ? hr / 2 : hr;
                    const float want = src[(x * rows + r) * cols + c];
                    const float got = oss_hf_mxfp4_value(B->data, S->data, cols, x * hf_rows + hr, c);
                    bad += got != want;
                    checked++;
                }
        free(fg);
        free(fu);
    }
    printf("HF MXFP4 codes decoded by OpenAI's rule: %" PRId64 " of %" PRId64 " values equal the GGUF's\n",
           checked - bad, checked);
    CHECK(checked > 0 && bad == 0, "HF MXFP4 values equal the GGUF's (%" PRId64 " differ)", bad);
    kld_safetensors_close(st);
    kld_gguf_close(g);
}

/* The HF copy of s: logits equal to its GGUF's bit for bit (and the reference's), converted back. */
static void test_same(const char *label, const synth_shape *s, bool reference, const oss_hf_opts *o) {
    char gguf[600], hf[600];
    paths(label, gguf, hf, sizeof gguf);
    if (!synth_write_gguf(s, gguf) || !oss_write_hf(s, gguf, hf, o)) {
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
    if (reference) {
        char l2[96];
        snprintf(l2, sizeof l2, "%s (HF)", label);
        free(tf_check_path(l2, hf, gguf, NULL, ids, N_IDS)); /* vs the float64 reference, chunks, decode */
    }
    if (s->exp_type_set && s->exp_type == KLD_TYPE_MXFP4) check_codes(gguf, hf);
    check_converted(label, gguf, hf, ids);
}

static void expect_error(const char *label, const oss_hf_opts *o, const char *want1, const char *want2) {
    synth_shape s;
    shape(&s, KLD_TYPE_MXFP4);
    char gguf[600], hf[600];
    paths(label, gguf, hf, sizeof gguf);
    if (!synth_write_gguf(&s, gguf) || !oss_write_hf(&s, gguf, hf, o)) {
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

static void test_errors(void) {
#define E1(k, v) (&(const oss_hf_opts){.ed = (const oss_edit[]){{k, v}, {NULL, NULL}}})
    /* config.json: the field and its value */
    expect_error("no-experts", E1("num_local_experts", NULL), "config.json: \"num_local_experts\" is missing", NULL);
    expect_error("used-9", E1("num_experts_per_tok", "9"), "config.json: \"num_experts_per_tok\" = 9", "out of range");
    expect_error("swiglu-10", E1("swiglu_limit", "10.0"), "config.json: \"swiglu_limit\" = 10", "clamps the SwiGLU at 7");
    expect_error("no-bias", E1("attention_bias", "false"), "config.json: \"attention_bias\" = false", NULL);
    expect_error("beta-16", E1("rope_scaling", "{\"rope_type\": \"yarn\", \"factor\": 4.0, "
                               "\"original_max_position_embeddings\": 64, \"beta_fast\": 16.0}"),
                 "config.json: \"rope_scaling.beta_fast\" = 16", "runs 32 / 1");
    expect_error("rope-linear", E1("rope_scaling", "{\"rope_type\": \"linear\", \"factor\": 4.0}"),
                 "config.json: rope_scaling.rope_type 'linear'", NULL);
    expect_error("layer-types", E1("layer_types", "[\"sliding_attention\", \"full_attention\"]"),
                 "config.json: \"layer_types\" must be an array of 3 entries", "it has 2");
    expect_error("window-str", E1("sliding_window", "\"wide\""), "config.json: \"sliding_window\" must be an integer, not \"wide\"",
                 NULL);
    expect_error("quant-bnb", E1("quantization_config", "{\"quant_method\": \"bitsandbytes\"}"),
                 "config.json: quantization_config.quant_method 'bitsandbytes'", NULL);
    expect_error("head-dim", E1("head_dim", "8"), "self_attn.q_proj.weight", "expected [64, 32]");
#undef E1
    /* tensors: the tensor and what is wrong with it */
    expect_error("no-sinks", &(const oss_hf_opts){.drop = "model.layers.2.self_attn.sinks"},
                 "model.layers.2.self_attn.sinks", "missing");
    expect_error("no-scales", &(const oss_hf_opts){.drop = "model.layers.1.mlp.experts.down_proj_scales"},
                 "model.layers.1.mlp.experts.down_proj_scales' is missing", "_blocks are there");
    expect_error("no-gu-bias", &(const oss_hf_opts){.drop = "model.layers.0.mlp.experts.gate_up_proj_bias"},
                 "model.layers.0.mlp.experts.gate_up_proj_bias' is missing", NULL);
    expect_error("no-router-b", &(const oss_hf_opts){.drop = "model.layers.1.mlp.router.bias"}, "mlp.router.bias",
                 "missing");
    expect_error("odd-gate-up", &(const oss_hf_opts){.odd_gate_up = true},
                 "model.layers.0.mlp.experts.gate_up_proj_blocks' has 129 rows per expert, an odd count", NULL);
    expect_error("short-scales", &(const oss_hf_opts){.short_scales = true},
                 "model.layers.0.mlp.experts.gate_up_proj_blocks' has shape [4, 128, 2, 16] but "
                 "'model.layers.0.mlp.experts.gate_up_proj_scales' has [4, 128, 1]", NULL);
}

/* layer_types other than the alternating default: the GGUF with the same per-layer
 * flags (attention.sliding_window_pattern), which differs from the default layout */
static void test_layer_types(void) {
    static const uint8_t flags[3] = {0, 0, 1};
    synth_shape s;
    shape(&s, KLD_TYPE_MXFP4);
    s.pattern_flags = flags;
    const oss_edit ed[] = {{"layer_types", "[\"full_attention\", \"full_attention\", \"sliding_attention\"]"},
                           {NULL, NULL}};
    test_same("gpt-oss-layer-types", &s, true, &(const oss_hf_opts){.ed = ed});
    char a[600], b[600], hf[600];
    paths("gpt-oss-layer-types", a, hf, sizeof a);
    paths("gpt-oss-mxfp4", b, hf, sizeof b);
    int32_t ids[N_IDS];
    tf_make_ids(ids, N_IDS, s.n_vocab, 20261204);
    int64_t nv = 0;
    float *x = tf_engine_logits(a, ids, N_IDS, 16, 2, &nv), *y = tf_engine_logits(b, ids, N_IDS, 16, 2, &nv);
    const double d = x && y ? tf_compare(x, y, N_IDS, nv).max_abs : 0;
    printf("layer_types [full, full, sliding] vs the default layout: max|d| %.3g\n", d);
    CHECK(d > 1e-3, "the layout changes the logits (%g)", d);
    free(x);
    free(y);
}

int main(void) {
    kld_kernels_init();
    synth_shape s;
    shape(&s, KLD_TYPE_MXFP4); /* the released files' experts */
    test_same("gpt-oss-mxfp4", &s, true, NULL);
    shape(&s, KLD_TYPE_F32); /* a dequantized checkpoint */
    test_same("gpt-oss-f32", &s, true, NULL);
    shape(&s, KLD_TYPE_BF16); /* every matrix and 2-D bias in bf16: the converted biases and routers f32 */
    s.mat_type = KLD_TYPE_BF16;
    s.seed = 77;
    test_same("gpt-oss-bf16", &s, false, NULL);
    /* transformers 5's rope_parameters (rope_theta inside) instead of rope_scaling + rope_theta */
    shape(&s, KLD_TYPE_MXFP4);
    s.rope_base = 10000; /* not GptOssConfig's default: rope_parameters' rope_theta is read */
    const oss_edit rp[] = {{"rope_scaling", NULL}, {"rope_theta", NULL},
                           {"rope_parameters", "{\"rope_type\": \"yarn\", \"factor\": 4.0, \"rope_theta\": 10000.0, "
                                               "\"original_max_position_embeddings\": 64, \"beta_fast\": 32.0, "
                                               "\"beta_slow\": 1.0, \"truncate\": false}"},
                           {NULL, NULL}};
    test_same("gpt-oss-rope-parameters", &s, false, &(const oss_hf_opts){.ed = rp});
    test_layer_types();
    test_errors();
    return kt_finish();
}
