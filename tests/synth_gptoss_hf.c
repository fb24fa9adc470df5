/* synth_gptoss_hf.c — test-only Hugging Face copy of a synthesized gpt-oss
 * GGUF (see synth_gptoss_hf.h): names as gguf-py's tensor_mapping.py maps
 * gpt-oss's, the experts as transformers' GptOssExperts keeps them (written
 * here from the MXFP4 / e2m1 definitions, not from the reader's repacking). */
#include "synth_gptoss_hf.h"

#include "io/gguf.h"
#include "tensor/types.h"

#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* The safetensors being written and the HF tensor to leave out (or NULL). */
typedef struct st_out {
    st_writer w;
    const char *drop;
} st_out;

/* name (torch shape dims[0..nd), dtype) holding the owned bytes p. */
static void put(st_out *o, const char *name, const char *dtype, int nd, const int64_t *dims, void *p, size_t bytes) {
    if (o->drop && !strcmp(o->drop, name)) {
        free(p);
        return;
    }
    st_put(&o->w, name, dtype, nd, dims, p, bytes);
}

static const char *dtype_name(uint32_t type) {
    return type == KLD_TYPE_BF16 ? "BF16" : type == KLD_TYPE_F16 ? "F16" : "F32";
}

static void *copy(const kld_tensor *t) {
    void *p = malloc(t->nbytes);
    memcpy(p, t->data, t->nbytes);
    return p;
}

/* value v (0..31) of a ggml MXFP4 block's 16 code bytes */
static uint8_t ggml_code(const uint8_t *qs, int v) { return v < 16 ? qs[v] & 0xF : qs[v - 16] >> 4; }

float oss_hf_mxfp4_value(const uint8_t *blocks, const uint8_t *scales, int64_t cols, int64_t r, int64_t k) {
    static const float fp4[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
    const int64_t nb = cols / 32, b = k / 32, i = k % 32;
    const uint8_t byte = blocks[(r * nb + b) * 16 + i / 2];
    return fp4[i % 2 ? byte >> 4 : byte & 0xF] * ldexpf(1.0f, (int)scales[r * nb + b] - 127);
}

/* ggml MXFP4 rows (17-byte blocks) of one expert matrix → HF rows hr = row0 + r·step of
 * blocks [X][rows][nb][16] and scales [X][rows][nb]. */
static void mx_to_hf(const kld_tensor *t, int64_t rows, int64_t row0, int64_t step, uint8_t *B, uint8_t *S) {
    const int64_t cols = t->ne[0], n_r = t->ne[1], X = t->ne[2], nb = cols / 32;
    const uint8_t *in = t->data;
    for (int64_t x = 0; x < X; x++)
        for (int64_t r = 0; r < n_r; r++)
            for (int64_t b = 0; b < nb; b++) {
                const uint8_t *blk = in + ((x * n_r + r) * nb + b) * 17;
                const int64_t hr = x * rows + row0 + r * step;
                S[hr * nb + b] = blk[0];
                for (int i = 0; i < 16; i++) /* OpenAI: value 2i low nibble, 2i + 1 high */
                    B[(hr * nb + b) * 16 + i] = (uint8_t)(ggml_code(blk + 1, 2 * i) | ggml_code(blk + 1, 2 * i + 1) << 4);
            }
}

/* float experts [X][n_r][cols] (ggml rows) → HF [X][cols][width]: column col0 + r·step of row c. */
static void fl_to_hf(const kld_tensor *t, int64_t width, int64_t col0, int64_t step, uint8_t *out) {
    const int64_t cols = t->ne[0], n_r = t->ne[1], X = t->ne[2];
    const size_t es = kld_type_info_get(t->type)->type_size;
    const uint8_t *in = t->data;
    for (int64_t x = 0; x < X; x++)
        for (int64_t r = 0; r < n_r; r++)
            for (int64_t c = 0; c < cols; c++)
                memcpy(out + ((size_t)((x * cols + c) * width + col0 + r * step)) * es,
                       in + ((size_t)((x * n_r + r) * cols + c)) * es, es);
}

static const kld_tensor *layer_t(const kld_gguf *g, int il, const char *suffix) {
    char n[96];
    snprintf(n, sizeof n, "blk.%d.%s", il, suffix);
    return kld_gguf_find_tensor(g, n);
}

/* The experts of layer il in HF form. */
static bool put_experts(st_out *o, const kld_gguf *g, int il, const oss_hf_opts *op) {
    const kld_tensor *gt = layer_t(g, il, "ffn_gate_exps.weight"), *ut = layer_t(g, il, "ffn_up_exps.weight"),
                     *dt = layer_t(g, il, "ffn_down_exps.weight"), *gb = layer_t(g, il, "ffn_gate_exps.bias"),
                     *ub = layer_t(g, il, "ffn_up_exps.bias"), *db = layer_t(g, il, "ffn_down_exps.bias");
    if (!gt || !ut || !dt || !gb || !ub || !db || gb->type != ub->type) return false;
    const int64_t E = gt->ne[0], F = gt->ne[1], X = gt->ne[2];
    const bool odd = op && op->odd_gate_up && il == 0, shrt = op && op->short_scales && il == 0;
    const int64_t R = 2 * F + (odd ? 1 : 0); /* rows of gate_up */
    char n[160], base[96];
    snprintf(base, sizeof base, "model.layers.%d.mlp.experts", il);
    if (gt->type == KLD_TYPE_MXFP4) {
        const int64_t nbe = E / 32, nbf = F / 32;
        uint8_t *B = calloc((size_t)(X * R * nbe * 16), 1), *S = calloc((size_t)(X * R * nbe), 1);
        mx_to_hf(gt, R, 0, 2, B, S);
        mx_to_hf(ut, R, 1, 2, B, S);
        int64_t d4[4] = {X, R, nbe, 16}, d3[3] = {X, R, nbe};
        snprintf(n, sizeof n, "%s.gate_up_proj_blocks", base);
        put(o, n, "U8", 4, d4, B, (size_t)(X * R * nbe * 16));
        if (shrt) d3[2]--;
        snprintf(n, sizeof n, "%s.gate_up_proj_scales", base);
        put(o, n, "U8", 3, d3, S, (size_t)(d3[0] * d3[1] * d3[2]));
        uint8_t *DB = malloc((size_t)(X * E * nbf * 16)), *DS = malloc((size_t)(X * E * nbf));
        mx_to_hf(dt, E, 0, 1, DB, DS);
        int64_t e4[4] = {X, E, nbf, 16}, e3[3] = {X, E, nbf};
        snprintf(n, sizeof n, "%s.down_proj_blocks", base);
        put(o, n, "U8", 4, e4, DB, (size_t)(X * E * nbf * 16));
        snprintf(n, sizeof n, "%s.down_proj_scales", base);
        put(o, n, "U8", 3, e3, DS, (size_t)(X * E * nbf));
    } else {
        const size_t es = kld_type_info_get(gt->type)->type_size;
        uint8_t *GU = calloc((size_t)(X * E * R), es), *D = malloc((size_t)(X * F * E) * es);
        fl_to_hf(gt, R, 0, 2, GU);
        fl_to_hf(ut, R, 1, 2, GU);
        fl_to_hf(dt, E, 0, 1, D);
        int64_t d3[3] = {X, E, R}, e3[3] = {X, F, E};
        snprintf(n, sizeof n, "%s.gate_up_proj", base);
        put(o, n, dtype_name(gt->type), 3, d3, GU, (size_t)(X * E * R) * es);
        snprintf(n, sizeof n, "%s.down_proj", base);
        put(o, n, dtype_name(dt->type), 3, e3, D, (size_t)(X * F * E) * es);
    }
    /* gate_up_proj_bias [X, 2F] interleaved, down_proj_bias [X, E] */
    const size_t es = kld_type_info_get(gb->type)->type_size;
    uint8_t *GUB = malloc((size_t)(X * 2 * F) * es);
    for (int64_t x = 0; x < X; x++)
        for (int64_t f = 0; f < F; f++) {
            memcpy(GUB + (size_t)(x * 2 * F + 2 * f) * es, (const uint8_t *)gb->data + (size_t)(x * F + f) * es, es);
            memcpy(GUB + (size_t)(x * 2 * F + 2 * f + 1) * es, (const uint8_t *)ub->data + (size_t)(x * F + f) * es, es);
        }
    int64_t b2[2] = {X, 2 * F}, c2[2] = {X, E};
    snprintf(n, sizeof n, "%s.gate_up_proj_bias", base);
    put(o, n, dtype_name(gb->type), 2, b2, GUB, (size_t)(X * 2 * F) * es);
    snprintf(n, sizeof n, "%s.down_proj_bias", base);
    put(o, n, dtype_name(db->type), 2, c2, copy(db), db->nbytes);
    return true;
}

/* GGUF per-layer suffix → HF suffix (gguf-py tensor_mapping.py's gpt-oss rows). */
static const char *const names[][2] = {
    {"attn_norm.weight", "input_layernorm.weight"},
    {"attn_q.weight", "self_attn.q_proj.weight"},        {"attn_q.bias", "self_attn.q_proj.bias"},
    {"attn_k.weight", "self_attn.k_proj.weight"},        {"attn_k.bias", "self_attn.k_proj.bias"},
    {"attn_v.weight", "self_attn.v_proj.weight"},        {"attn_v.bias", "self_attn.v_proj.bias"},
    {"attn_output.weight", "self_attn.o_proj.weight"},   {"attn_output.bias", "self_attn.o_proj.bias"},
    {"attn_sinks.weight", "self_attn.sinks"},            {"post_attention_norm.weight", "post_attention_layernorm.weight"},
    {"ffn_gate_inp.weight", "mlp.router.weight"},        {"ffn_gate_inp.bias", "mlp.router.bias"},
};

static bool write_config(const synth_shape *s, const kld_gguf *g, const char *dir, bool mx, const oss_edit *ed) {
    double eps = 0;
    kld_gguf_get_float(g, "gpt-oss.attention.layer_norm_rms_epsilon", &eps);
    json_t *c = json_object();
    json_object_set_new(c, "architectures", json_pack("[s]", "GptOssForCausalLM"));
    json_object_set_new(c, "model_type", json_string("gpt_oss"));
    json_object_set_new(c, "hidden_size", json_integer(s->n_embd));
    json_object_set_new(c, "num_hidden_layers", json_integer(s->n_layer));
    json_object_set_new(c, "intermediate_size", json_integer(s->n_ff_exp));
    json_object_set_new(c, "num_attention_heads", json_integer(s->n_head));
    json_object_set_new(c, "num_key_value_heads", json_integer(s->n_head_kv));
    json_object_set_new(c, "head_dim", json_integer(s->head_dim));
    json_object_set_new(c, "vocab_size", json_integer(s->n_vocab));
    json_object_set_new(c, "max_position_embeddings", json_integer(4096));
    json_object_set_new(c, "rms_norm_eps", json_real(eps)); /* the GGUF's f32 value, exactly */
    json_object_set_new(c, "rope_theta", json_real(s->rope_base));
    json_object_set_new(c, "rope_scaling", json_pack("{s:s, s:f, s:I, s:f, s:f, s:b}", "rope_type", "yarn", "factor",
                                                     s->yarn_factor, "original_max_position_embeddings",
                                                     (json_int_t)s->yarn_orig_ctx, "beta_fast", 32.0, "beta_slow", 1.0,
                                                     "truncate", 0));
    json_object_set_new(c, "sliding_window", json_integer(s->sliding_window));
    json_t *lt = json_array();
    for (int64_t il = 0; il < s->n_layer; il++)
        json_array_append_new(lt, json_string(il % 2 == 0 ? "sliding_attention" : "full_attention"));
    json_object_set_new(c, "layer_types", lt);
    json_object_set_new(c, "swiglu_limit", json_real(7.0));
    json_object_set_new(c, "attention_bias", json_true());
    json_object_set_new(c, "hidden_act", json_string("silu"));
    json_object_set_new(c, "tie_word_embeddings", json_boolean(s->tied));
    json_object_set_new(c, "num_local_experts", json_integer(s->n_expert));
    json_object_set_new(c, "num_experts_per_tok", json_integer(s->n_expert_used));
    json_object_set_new(c, "experts_per_token", json_integer(s->n_expert_used));
    json_object_set_new(c, "router_aux_loss_coef", json_real(0.9));
    if (mx)
        json_object_set_new(c, "quantization_config",
                            json_pack("{s:s, s:[s, s, s, s]}", "quant_method", "mxfp4", "modules_to_not_convert",
                                      "model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens",
                                      "lm_head"));
    return hf_config_write(c, ed, dir);
}

bool oss_write_hf(const synth_shape *s, const char *gguf, const char *dir, const oss_hf_opts *op) {
    kld_error err = {0};
    kld_gguf *g = NULL;
    if (kld_gguf_open(gguf, &g, &err) != KLD_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return false;
    }
    st_out o = {.drop = op ? op->drop : NULL};
    st_init(&o.w);
    bool ok = true, mx = false;
    char name[200];
    for (uint64_t i = 0; ok && i < g->n_tensors; i++) {
        const kld_tensor *t = &g->tensors[i];
        int64_t d[4];
        for (int k = 0; k < t->n_dims; k++) d[k] = t->ne[t->n_dims - 1 - k];
        int il = -1, used = 0;
        name[0] = '\0';
        if (!strcmp(t->name, "token_embd.weight")) snprintf(name, sizeof name, "model.embed_tokens.weight");
        else if (!strcmp(t->name, "output_norm.weight")) snprintf(name, sizeof name, "model.norm.weight");
        else if (!strcmp(t->name, "output.weight")) snprintf(name, sizeof name, "lm_head.weight");
        else if (sscanf(t->name, "blk.%d.%n", &il, &used) == 1 && used) {
            const char *r = t->name + used;
            if (strstr(r, "_exps.")) { /* written per layer below */
                if (!strcmp(r, "ffn_down_exps.weight")) {
                    mx |= t->type == KLD_TYPE_MXFP4;
                    ok = put_experts(&o, g, il, op);
                }
                continue;
            }
            for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
                if (!strcmp(r, names[k][0])) snprintf(name, sizeof name, "model.layers.%d.%s", il, names[k][1]);
        }
        if (!name[0]) {
            fprintf(stderr, "gpt-oss HF copy: no HF name for %s\n", t->name);
            ok = false;
            break;
        }
        put(&o, name, dtype_name(t->type), t->n_dims, d, copy(t), t->nbytes);
    }
    ok = st_write(&o.w, dir) && ok;
    ok = ok && write_config(s, g, dir, mx, op ? op->ed : NULL);
    kld_gguf_close(g);
    return ok;
}
