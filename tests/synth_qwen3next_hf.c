/* synth_qwen3next_hf.c — test-only copies of a synthesized Qwen3-Next GGUF
 * (see synth_qwen3next_hf.h): a Hugging Face checkpoint as transformers'
 * Qwen3NextForCausalLM saves it (in_proj_qkvz interleaved [q, k, v, z] per
 * q/k head, A_log = log(−ssm_a), zero-centred norms w − 1 except
 * linear_attn.norm, conv1d [C, 1, K], per-expert MoE tensors, optional
 * mtp.* tensors), and rewritten GGUFs (the legacy fused ssm_in, an MTP block). */
#include "synth_qwen3next_hf.h"

#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "tensor/types.h"

#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct hf_out {
    st_writer w;
    bool bf16;
    bool wrapped;     /* Qwen3.5's multimodal layout: model.* under model.language_model.* */
    const char *drop; /* Qwen3.5: leave out this HF tensor (its final name) */
} hf_out;

/* Adds name with HF shape dims[0..nd) and the values f (owned). */
static void put(hf_out *o, const q3n_hf_opts *opt, const char *name, int nd, const int64_t *dims, float *f) {
    char wrapped[200];
    if (o->wrapped && !strncmp(name, "model.", 6)) {
        snprintf(wrapped, sizeof wrapped, "model.language_model.%s", name + 6);
        name = wrapped;
    }
    if ((opt && opt->drop && !strcmp(opt->drop, name)) || (o->drop && !strcmp(o->drop, name))) {
        free(f);
        return;
    }
    size_t n = 1, n_in = 1;
    const bool bad = opt && opt->bad_shape && !strcmp(opt->bad_shape, name);
    int64_t d[4];
    for (int i = 0; i < nd; i++) {
        d[i] = bad && i == 0 ? dims[i] + 1 : dims[i]; /* one row too many */
        n *= (size_t)d[i];
        n_in *= (size_t)dims[i];
    }
    if (n != n_in) {
        float *g = calloc(n, sizeof *g);
        memcpy(g, f, n_in * sizeof *g);
        free(f);
        f = g;
    }
    const bool bf = o->bf16 && nd == 2;
    if (bf)
        for (size_t i = 0; i < n; i++) ((uint16_t *)(void *)f)[i] = kld_f32_to_bf16(f[i]);
    st_put(&o->w, name, bf ? "BF16" : "F32", nd, d, f, n * (bf ? 2 : 4));
}

static float *floats(const kld_tensor *t) {
    const int64_t n = kld_tensor_nelements(t);
    float *f = malloc(sizeof(float) * (size_t)n);
    kld_type_info_get(t->type)->to_float_ref(t->data, f, n);
    return f;
}

static const kld_tensor *find(const kld_gguf *g, const char *name) {
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (!strcmp(g->tensors[i].name, name)) return &g->tensors[i];
    return NULL;
}

/* attn_qkv [E, 2kd + vd] and attn_gate [E, vd] → rows [q, k, v, z] per q/k head. */
static float *interleave(const synth_shape *s, const kld_tensor *qkv, const kld_tensor *gate) {
    const int64_t E = s->n_embd, nk = s->dn_n_k_heads, hk = s->dn_head;
    const int64_t rv = s->dn_n_v_heads / nk * s->dn_head, kd = nk * hk, group = 2 * hk + 2 * rv;
    float *a = floats(qkv), *z = floats(gate);
    float *out = malloc(sizeof(float) * (size_t)(nk * group * E));
    for (int64_t h = 0; h < nk; h++) {
        float *g = out + h * group * E;
        memcpy(g, a + h * hk * E, sizeof(float) * (size_t)(hk * E));
        memcpy(g + hk * E, a + (kd + h * hk) * E, sizeof(float) * (size_t)(hk * E));
        memcpy(g + 2 * hk * E, a + (2 * kd + h * rv) * E, sizeof(float) * (size_t)(rv * E));
        memcpy(g + (2 * hk + rv) * E, z + h * rv * E, sizeof(float) * (size_t)(rv * E));
    }
    free(a);
    free(z);
    return out;
}

static float *randoms(uint64_t *state, size_t n, double sd) {
    float *f = malloc(sizeof(float) * n);
    for (size_t i = 0; i < n; i++) {
        *state = *state * 6364136223846793005ull + 1442695040888963407ull;
        f[i] = (float)(sd * ((double)(*state >> 11) / 9007199254740992.0 - 0.5));
    }
    return f;
}

/* The mixture-of-experts tensors of layer il (Qwen2MoeModel's names, shared by Qwen3-Next
 * and Qwen3.5-MoE): the router, the sigmoid-gated shared expert, one tensor per expert. */
static bool put_moe(hf_out *o, const q3n_hf_opts *opt, const kld_tensor *t, int il, const char *rest) {
    static const char *const plain[][2] = {{"ffn_gate_inp.weight", "mlp.gate.weight"},
                                           {"ffn_gate_shexp.weight", "mlp.shared_expert.gate_proj.weight"},
                                           {"ffn_up_shexp.weight", "mlp.shared_expert.up_proj.weight"},
                                           {"ffn_down_shexp.weight", "mlp.shared_expert.down_proj.weight"}};
    char name[160];
    const int64_t d2[2] = {t->ne[1], t->ne[0]};
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++)
        if (!strcmp(rest, plain[i][0])) {
            snprintf(name, sizeof name, "model.layers.%d.%s", il, plain[i][1]);
            put(o, opt, name, 2, d2, floats(t));
            return true;
        }
    if (!strcmp(rest, "ffn_gate_inp_shexp.weight")) { /* a [1, n_embd] Linear */
        const int64_t d[2] = {1, t->ne[0]};
        snprintf(name, sizeof name, "model.layers.%d.mlp.shared_expert_gate.weight", il);
        put(o, opt, name, 2, d, floats(t));
        return true;
    }
    if (!strstr(rest, "_exps.weight")) return false;
    char kind[8] = {0}; /* merged [ne0, ne1, X] → one per expert */
    sscanf(rest, "ffn_%7[a-z]_exps", kind);
    float *all = floats(t);
    const int64_t per = t->ne[0] * t->ne[1];
    for (int64_t e = 0; e < t->ne[2]; e++) {
        float *one = malloc(sizeof(float) * (size_t)per);
        memcpy(one, all + e * per, sizeof(float) * (size_t)per);
        snprintf(name, sizeof name, "model.layers.%d.mlp.experts.%" PRId64 ".%s_proj.weight", il, e, kind);
        put(o, opt, name, 2, d2, one);
    }
    free(all);
    return true;
}

/* The per-layer tensors of GGUF name rest (layer il) under their HF names. */
static void put_layer(hf_out *o, const q3n_hf_opts *opt, const synth_shape *s, const kld_gguf *g,
                      const kld_tensor *t, int il, const char *rest) {
    static const char *const plain[][2] = {
        {"attn_q.weight", "self_attn.q_proj.weight"},      {"attn_k.weight", "self_attn.k_proj.weight"},
        {"attn_v.weight", "self_attn.v_proj.weight"},      {"attn_output.weight", "self_attn.o_proj.weight"},
        {"ssm_ba.weight", "linear_attn.in_proj_ba.weight"},
        {"ssm_out.weight", "linear_attn.out_proj.weight"}, {"ssm_norm.weight", "linear_attn.norm.weight"},
        {"ssm_dt.bias", "linear_attn.dt_bias"},            {"ffn_gate.weight", "mlp.gate_proj.weight"},
        {"ffn_up.weight", "mlp.up_proj.weight"},           {"ffn_down.weight", "mlp.down_proj.weight"}};
    static const char *const centred[][2] = {
        {"attn_norm.weight", "input_layernorm.weight"},
        {"post_attention_norm.weight", "post_attention_layernorm.weight"},
        {"attn_q_norm.weight", "self_attn.q_norm.weight"}, {"attn_k_norm.weight", "self_attn.k_norm.weight"}};
    char name[160];
    const int64_t n = kld_tensor_nelements(t);
    int64_t dims[3] = {t->ne[1], t->ne[0], 0};
    const int nd = t->n_dims == 1 ? 1 : 2;
    if (nd == 1) dims[0] = t->ne[0];
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++)
        if (!strcmp(rest, plain[i][0])) {
            snprintf(name, sizeof name, "model.layers.%d.%s", il, plain[i][1]);
            put(o, opt, name, nd, dims, floats(t));
            return;
        }
    for (size_t i = 0; i < sizeof centred / sizeof centred[0]; i++)
        if (!strcmp(rest, centred[i][0])) {
            float *f = floats(t);
            for (int64_t j = 0; j < n; j++) f[j] -= 1.0f; /* Qwen3NextRMSNorm scales by 1 + w */
            snprintf(name, sizeof name, "model.layers.%d.%s", il, centred[i][1]);
            put(o, opt, name, 1, dims, f);
            return;
        }
    if (!strcmp(rest, "attn_qkv.weight")) {
        char gn[96];
        snprintf(gn, sizeof gn, "blk.%d.attn_gate.weight", il);
        const int64_t rows = t->ne[1] + find(g, gn)->ne[1], d[2] = {rows, s->n_embd};
        snprintf(name, sizeof name, "model.layers.%d.linear_attn.in_proj_qkvz.weight", il);
        put(o, opt, name, 2, d, interleave(s, t, find(g, gn)));
    } else if (!strcmp(rest, "ssm_a")) {
        float *f = floats(t);
        for (int64_t j = 0; j < n; j++) f[j] = logf(-f[j]);
        snprintf(name, sizeof name, "model.layers.%d.linear_attn.A_log", il);
        put(o, opt, name, 1, dims, f);
    } else if (!strcmp(rest, "ssm_conv1d.weight")) { /* nn.Conv1d weight [C, 1, K] */
        const int64_t d[3] = {t->ne[1], 1, t->ne[0]};
        snprintf(name, sizeof name, "model.layers.%d.linear_attn.conv1d.weight", il);
        put(o, opt, name, 3, d, floats(t));
    } else {
        put_moe(o, opt, t, il, rest);
    }
}

/* Qwen3-Next's MTP block as the checkpoints carry it (mtp.fc, mtp norms,
 * one decoder layer): values that must not matter. */
static void put_mtp(hf_out *o, const synth_shape *s) {
    uint64_t st = 99;
    const int64_t E = s->n_embd, nq = s->n_head * s->head_dim;
    const int64_t fc[2] = {E, 2 * E}, v[1] = {E}, q[2] = {2 * nq, E}, o2[2] = {E, nq};
    put(o, NULL, "mtp.fc.weight", 2, fc, randoms(&st, (size_t)(2 * E * E), 1));
    put(o, NULL, "mtp.norm.weight", 1, v, randoms(&st, (size_t)E, 1));
    put(o, NULL, "mtp.pre_fc_norm_embedding.weight", 1, v, randoms(&st, (size_t)E, 1));
    put(o, NULL, "mtp.pre_fc_norm_hidden.weight", 1, v, randoms(&st, (size_t)E, 1));
    put(o, NULL, "mtp.layers.0.input_layernorm.weight", 1, v, randoms(&st, (size_t)E, 1));
    put(o, NULL, "mtp.layers.0.self_attn.q_proj.weight", 2, q, randoms(&st, (size_t)(2 * nq * E), 1));
    put(o, NULL, "mtp.layers.0.self_attn.o_proj.weight", 2, o2, randoms(&st, (size_t)(nq * E), 1));
}

static bool write_config(const synth_shape *s, const char *dir, const q3n_hf_opts *opt) {
    json_t *c = json_object();
    json_object_set_new(c, "architectures", json_pack("[s]", "Qwen3NextForCausalLM"));
    json_object_set_new(c, "model_type", json_string("qwen3_next"));
    json_object_set_new(c, "hidden_size", json_integer(s->n_embd));
    json_object_set_new(c, "num_hidden_layers", json_integer(s->n_layer));
    json_object_set_new(c, "intermediate_size", json_integer(s->n_ff));
    json_object_set_new(c, "num_attention_heads", json_integer(s->n_head));
    json_object_set_new(c, "num_key_value_heads", json_integer(s->n_head_kv));
    json_object_set_new(c, "head_dim", json_integer(s->head_dim));
    json_object_set_new(c, "vocab_size", json_integer(s->n_vocab));
    json_object_set_new(c, "max_position_embeddings", json_integer(4096));
    json_object_set_new(c, "rms_norm_eps", json_real(1e-6));
    json_object_set_new(c, "rope_theta", json_real(s->rope_base));
    json_object_set_new(c, "partial_rotary_factor", json_real(0.5)); /* the GGUF's head_dim / 2 */
    json_object_set_new(c, "tie_word_embeddings", json_boolean(s->tied));
    json_object_set_new(c, "hidden_act", json_string("silu"));
    json_object_set_new(c, "attention_bias", json_false());
    json_object_set_new(c, "full_attention_interval", json_integer(s->dn_interval));
    json_object_set_new(c, "linear_conv_kernel_dim", json_integer(s->dn_conv));
    json_object_set_new(c, "linear_key_head_dim", json_integer(s->dn_head));
    json_object_set_new(c, "linear_value_head_dim", json_integer(s->dn_head));
    json_object_set_new(c, "linear_num_key_heads", json_integer(s->dn_n_k_heads));
    json_object_set_new(c, "linear_num_value_heads", json_integer(s->dn_n_v_heads));
    json_object_set_new(c, "num_experts", json_integer(s->n_expert));
    if (s->n_expert > 0) {
        json_object_set_new(c, "num_experts_per_tok", json_integer(s->n_expert_used));
        json_object_set_new(c, "moe_intermediate_size", json_integer(s->n_ff_exp));
        json_object_set_new(c, "shared_expert_intermediate_size", json_integer(s->n_ff_shexp));
        json_object_set_new(c, "norm_topk_prob", json_true());
        json_object_set_new(c, "decoder_sparse_step", json_integer(1));
        json_object_set_new(c, "mlp_only_layers", json_array());
    }
    if (opt && opt->mtp) json_object_set_new(c, "num_nextn_predict_layers", json_integer(1));
    return hf_config_write(c, opt ? opt->edits : NULL, dir);
}

bool q3n_write_hf(const synth_shape *s, const char *gguf_path, const char *dir, const q3n_hf_opts *opt) {
    kld_error err = {0};
    kld_gguf *g = NULL;
    if (kld_gguf_open(gguf_path, &g, &err) != KLD_OK) {
        fprintf(stderr, "q3n_write_hf: %s\n", err.msg);
        return false;
    }
    hf_out o = {.bf16 = opt && opt->bf16};
    st_init(&o.w);
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const kld_tensor *t = &g->tensors[i];
        int il = 0, used = 0;
        const int64_t d2[2] = {t->ne[1], t->ne[0]}, d1[1] = {t->ne[0]};
        if (!strcmp(t->name, "token_embd.weight")) put(&o, opt, "model.embed_tokens.weight", 2, d2, floats(t));
        else if (!strcmp(t->name, "output.weight")) put(&o, opt, "lm_head.weight", 2, d2, floats(t));
        else if (!strcmp(t->name, "output_norm.weight")) {
            float *f = floats(t);
            for (int64_t j = 0; j < t->ne[0]; j++) f[j] -= 1.0f;
            put(&o, opt, "model.norm.weight", 1, d1, f);
        } else if (sscanf(t->name, "blk.%d.%n", &il, &used) == 1 && used)
            put_layer(&o, opt, s, g, t, il, t->name + used);
    }
    if (opt && opt->mtp) put_mtp(&o, s);
    kld_gguf_close(g);
    bool ok = st_write(&o.w, dir);
    return ok && write_config(s, dir, opt);
}

/* One more block after the last (as an MTP block: blk.<n>.nextn.* plus a
 * layer's norms and projections), block_count + 1, nextn_predict_layers 1. */
static void add_mtp_block(kld_gguf_writer *w, const kld_gguf *g, int64_t n_layer, void **bufs, int *nb) {
    static const char *const names[] = {"nextn.eh_proj.weight", "nextn.enorm.weight", "nextn.hnorm.weight",
                                        "nextn.shared_head_norm.weight", "attn_norm.weight",
                                        "post_attention_norm.weight"};
    const kld_tensor *emb = find(g, "token_embd.weight");
    const int64_t E = emb->ne[0];
    uint64_t st = 5;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char name[96];
        snprintf(name, sizeof name, "blk.%" PRId64 ".%s", n_layer, names[i]);
        const int64_t ne[2] = {i == 0 ? 2 * E : E, E};
        const int nd = i == 0 ? 2 : 1;
        float *f = randoms(&st, (size_t)(ne[0] * (nd == 2 ? ne[1] : 1)), 1);
        bufs[(*nb)++] = f;
        kld_error err = {0};
        kld_gguf_writer_add_tensor(w, name, KLD_TYPE_F32, nd, ne, f, sizeof(float) * (uint64_t)(ne[0] * (nd == 2 ? ne[1] : 1)), &err);
    }
}

bool q3n_rewrite_gguf(const synth_shape *s, const char *in, const char *out, bool legacy_ssm_in, bool mtp) {
    kld_error err = {0};
    kld_gguf *g = NULL;
    if (kld_gguf_open(in, &g, &err) != KLD_OK) return false;
    kld_gguf_writer *w = gguf_writer_with_keys(g);
    if (mtp) {
        kld_gguf_writer_set_u32(w, "qwen3next.block_count", (uint32_t)(s->n_layer + 1));
        kld_gguf_writer_set_u32(w, "qwen3next.nextn_predict_layers", 1);
    }
    void *bufs[64];
    int nb = 0;
    bool ok = true;
    for (uint64_t i = 0; ok && i < g->n_tensors; i++) {
        const kld_tensor *t = &g->tensors[i];
        int il = 0, used = 0;
        const bool in_layer = sscanf(t->name, "blk.%d.%n", &il, &used) == 1 && used;
        if (legacy_ssm_in && in_layer && !strcmp(t->name + used, "attn_gate.weight")) continue;
        if (legacy_ssm_in && in_layer && !strcmp(t->name + used, "attn_qkv.weight")) {
            /* the same rows, interleaved per q/k head, in the weights' own type */
            char gn[96], name[96];
            snprintf(gn, sizeof gn, "blk.%d.attn_gate.weight", il);
            const kld_tensor *gate = find(g, gn);
            const int64_t nk = s->dn_n_k_heads, hk = s->dn_head, rv = s->dn_n_v_heads / nk * s->dn_head;
            const int64_t kd = nk * hk, group = 2 * hk + 2 * rv;
            const uint64_t rb = t->nbytes / (uint64_t)t->ne[1];
            uint8_t *dst = malloc((size_t)(t->nbytes + gate->nbytes));
            const uint8_t *a = t->data, *z = gate->data;
            for (int64_t h = 0; h < nk; h++) {
                uint8_t *d = dst + (uint64_t)(h * group) * rb;
                memcpy(d, a + (uint64_t)(h * hk) * rb, (size_t)((uint64_t)hk * rb));
                memcpy(d + (uint64_t)hk * rb, a + (uint64_t)(kd + h * hk) * rb, (size_t)((uint64_t)hk * rb));
                memcpy(d + (uint64_t)(2 * hk) * rb, a + (uint64_t)(2 * kd + h * rv) * rb, (size_t)((uint64_t)rv * rb));
                memcpy(d + (uint64_t)(2 * hk + rv) * rb, z + (uint64_t)(h * rv) * rb, (size_t)((uint64_t)rv * rb));
            }
            bufs[nb++] = dst;
            const int64_t ne[2] = {t->ne[0], nk * group};
            snprintf(name, sizeof name, "blk.%d.ssm_in.weight", il);
            ok = kld_gguf_writer_add_tensor(w, name, t->type, 2, ne, dst, t->nbytes + gate->nbytes, &err) == KLD_OK;
            continue;
        }
        ok = kld_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, t->nbytes, &err) == KLD_OK;
    }
    if (ok && mtp) add_mtp_block(w, g, s->n_layer, bufs, &nb);
    if (ok) ok = kld_gguf_writer_write(w, out, &err) == KLD_OK;
    if (!ok) fprintf(stderr, "q3n_rewrite_gguf: %s\n", err.msg);
    for (int i = 0; i < nb; i++) free(bufs[i]);
    kld_gguf_writer_free(w);
    kld_gguf_close(g);
    return ok;
}

/* ---- Qwen3.5 (qwen35): the GGUF's tiled v heads back to HF's grouped order ---- */

/* HF (grouped) v head q = g·r + j is the GGUF's tiled head j·n_k + g. */
static int64_t tiled_of(const synth_shape *s, int64_t q) {
    const int64_t nk = s->dn_n_k_heads, r = s->dn_n_v_heads / nk;
    return (q % r) * nk + q / r;
}

/* Rows [row0, row0 + nv·per) of f (rows of cols values) put in grouped order. */
static float *group_rows(const synth_shape *s, float *f, int64_t row0, int64_t per, int64_t cols) {
    const int64_t nv = s->dn_n_v_heads;
    float *g = malloc(sizeof(float) * (size_t)((row0 + nv * per) * cols));
    memcpy(g, f, sizeof(float) * (size_t)(row0 * cols));
    for (int64_t q = 0; q < nv; q++)
        memcpy(g + (row0 + q * per) * cols, f + (row0 + tiled_of(s, q) * per) * cols,
               sizeof(float) * (size_t)(per * cols));
    free(f);
    return g;
}

static void put_q35_layer(hf_out *o, const synth_shape *s, const kld_tensor *t, int il, const char *rest) {
    static const char *const plain[][2] = {
        {"attn_q.weight", "self_attn.q_proj.weight"},      {"attn_k.weight", "self_attn.k_proj.weight"},
        {"attn_v.weight", "self_attn.v_proj.weight"},      {"attn_output.weight", "self_attn.o_proj.weight"},
        {"ffn_gate.weight", "mlp.gate_proj.weight"},       {"ffn_up.weight", "mlp.up_proj.weight"},
        {"ffn_down.weight", "mlp.down_proj.weight"},       {"ssm_norm.weight", "linear_attn.norm.weight"}};
    static const char *const centred[][2] = {
        {"attn_norm.weight", "input_layernorm.weight"},
        {"post_attention_norm.weight", "post_attention_layernorm.weight"},
        {"attn_q_norm.weight", "self_attn.q_norm.weight"}, {"attn_k_norm.weight", "self_attn.k_norm.weight"}};
    char name[160];
    const int64_t n = kld_tensor_nelements(t), E = s->n_embd, hv = s->dn_head, nv = s->dn_n_v_heads;
    const int64_t kd = s->dn_n_k_heads * s->dn_head, vd = nv * hv, C = 2 * kd + vd;
    int64_t dims[2] = {t->ne[1], t->ne[0]};
    const int nd = t->n_dims == 1 ? 1 : 2;
    if (nd == 1) dims[0] = t->ne[0];
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++)
        if (!strcmp(rest, plain[i][0])) {
            snprintf(name, sizeof name, "model.layers.%d.%s", il, plain[i][1]);
            put(o, NULL, name, nd, dims, floats(t));
            return;
        }
    for (size_t i = 0; i < sizeof centred / sizeof centred[0]; i++)
        if (!strcmp(rest, centred[i][0])) {
            float *f = floats(t);
            for (int64_t j = 0; j < n; j++) f[j] -= 1.0f; /* zero-centred RMSNorm: 1 + w */
            snprintf(name, sizeof name, "model.layers.%d.%s", il, centred[i][1]);
            put(o, NULL, name, 1, dims, f);
            return;
        }
#define LA(x) (snprintf(name, sizeof name, "model.layers.%d.linear_attn." x, il), name)
    if (!strcmp(rest, "attn_qkv.weight")) {
        put(o, NULL, LA("in_proj_qkv.weight"), 2, dims, group_rows(s, floats(t), 2 * kd, hv, E));
    } else if (!strcmp(rest, "attn_gate.weight")) {
        put(o, NULL, LA("in_proj_z.weight"), 2, dims, group_rows(s, floats(t), 0, hv, E));
    } else if (!strcmp(rest, "ssm_beta.weight")) {
        put(o, NULL, LA("in_proj_b.weight"), 2, dims, group_rows(s, floats(t), 0, 1, E));
    } else if (!strcmp(rest, "ssm_alpha.weight")) {
        put(o, NULL, LA("in_proj_a.weight"), 2, dims, group_rows(s, floats(t), 0, 1, E));
    } else if (!strcmp(rest, "ssm_a")) {
        float *f = group_rows(s, floats(t), 0, 1, 1);
        for (int64_t j = 0; j < n; j++) f[j] = logf(-f[j]);
        put(o, NULL, LA("A_log"), 1, dims, f);
    } else if (!strcmp(rest, "ssm_dt.bias")) {
        put(o, NULL, LA("dt_bias"), 1, dims, group_rows(s, floats(t), 0, 1, 1));
    } else if (!strcmp(rest, "ssm_conv1d.weight")) { /* [K, C] → nn.Conv1d [C, 1, K] */
        const int64_t d[3] = {C, 1, s->dn_conv};
        put(o, NULL, LA("conv1d.weight"), 3, d, group_rows(s, floats(t), 2 * kd, hv, s->dn_conv));
    } else if (!strcmp(rest, "ssm_out.weight")) { /* [vd, E]: columns per v head */
        float *f = floats(t), *g = malloc(sizeof(float) * (size_t)n);
        for (int64_t r = 0; r < E; r++)
            for (int64_t q = 0; q < nv; q++)
                memcpy(g + r * vd + q * hv, f + r * vd + tiled_of(s, q) * hv, sizeof(float) * (size_t)hv);
        free(f);
        put(o, NULL, LA("out_proj.weight"), 2, dims, g);
    } else {
        put_moe(o, NULL, t, il, rest);
    }
#undef LA
}

/* transformers 5's fused experts of layer il: gate_up_proj [X, 2F, E] (each expert's gate rows,
 * then its up rows) from ffn_gate_exps + ffn_up_exps, down_proj [X, E, F] from ffn_down_exps. */
static void put_fused_experts(hf_out *o, const kld_gguf *g, const kld_tensor *t, int il, const char *rest) {
    char name[160], other[64];
    const int64_t per = t->ne[0] * t->ne[1], X = t->ne[2];
    if (!strcmp(rest, "ffn_down_exps.weight")) {
        const int64_t d[3] = {X, t->ne[1], t->ne[0]};
        snprintf(name, sizeof name, "model.layers.%d.mlp.experts.down_proj", il);
        put(o, NULL, name, 3, d, floats(t));
        return;
    }
    if (strcmp(rest, "ffn_gate_exps.weight")) return; /* up: written with gate */
    snprintf(other, sizeof other, "blk.%d.ffn_up_exps.weight", il);
    const kld_tensor *u = find(g, other);
    float *a = floats(t), *b = u ? floats(u) : calloc((size_t)(per * X), sizeof(float));
    float *f = malloc(sizeof(float) * (size_t)(2 * per * X));
    for (int64_t e = 0; e < X; e++) {
        memcpy(f + 2 * e * per, a + e * per, sizeof(float) * (size_t)per);
        memcpy(f + (2 * e + 1) * per, b + e * per, sizeof(float) * (size_t)per);
    }
    free(a), free(b);
    const int64_t d[3] = {X, 2 * t->ne[1], t->ne[0]};
    snprintf(name, sizeof name, "model.layers.%d.mlp.experts.gate_up_proj", il);
    put(o, NULL, name, 3, d, f);
}

/* Sets (or deletes, json NULL) the edits on c. */
static void apply_edits(json_t *c, const hf_edit *ed) {
    for (int i = 0; ed && ed[i].key; i++) {
        if (!ed[i].json) {
            json_object_del(c, ed[i].key);
            continue;
        }
        json_error_t je;
        json_t *v = json_loads(ed[i].json, JSON_DECODE_ANY, &je);
        if (v) json_object_set_new(c, ed[i].key, v);
    }
}

bool q35_write_hf(const synth_shape *s, const char *gguf_path, const char *dir) {
    return q35_write_hf_opts(s, gguf_path, dir, NULL);
}

bool q35_write_hf_opts(const synth_shape *s, const char *gguf_path, const char *dir, const q35_hf_opts *opt) {
    kld_error err = {0};
    kld_gguf *g = NULL;
    if (kld_gguf_open(gguf_path, &g, &err) != KLD_OK) {
        fprintf(stderr, "q35_write_hf: %s\n", err.msg);
        return false;
    }
    const q35_hf_opts none = {0};
    if (!opt) opt = &none;
    hf_out o = {.bf16 = false, .wrapped = opt->wrapped, .drop = opt->drop};
    st_init(&o.w);
    if (opt->wrapped) { /* a vision tower tensor, skipped by the reader and the converter */
        float *f = calloc(16, sizeof *f);
        const int64_t d[2] = {4, 4};
        st_put_f32(&o.w, "model.visual.patch_embed.proj.weight", 2, d, f);
    }
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const kld_tensor *t = &g->tensors[i];
        int il = 0, used = 0;
        const int64_t d2[2] = {t->ne[1], t->ne[0]}, d1[1] = {t->ne[0]};
        if (opt->fused_experts && sscanf(t->name, "blk.%d.%n", &il, &used) == 1 && used &&
            strstr(t->name + used, "_exps.weight"))
            put_fused_experts(&o, g, t, il, t->name + used);
        else if (!strcmp(t->name, "token_embd.weight")) put(&o, NULL, "model.embed_tokens.weight", 2, d2, floats(t));
        else if (!strcmp(t->name, "output.weight")) put(&o, NULL, "lm_head.weight", 2, d2, floats(t));
        else if (!strcmp(t->name, "output_norm.weight")) {
            float *f = floats(t);
            for (int64_t j = 0; j < t->ne[0]; j++) f[j] -= 1.0f;
            put(&o, NULL, "model.norm.weight", 1, d1, f);
        } else if (sscanf(t->name, "blk.%d.%n", &il, &used) == 1 && used)
            put_q35_layer(&o, s, t, il, t->name + used);
    }
    kld_gguf_close(g);
    bool ok = st_write(&o.w, dir);
    json_t *c = json_object();
    const bool moe = s->n_expert > 0; /* Qwen3.5-MoE (Qwen3_5MoeTextConfig) */
    json_object_set_new(c, "architectures", json_pack("[s]", moe ? "Qwen3_5MoeForCausalLM" : "Qwen3_5ForCausalLM"));
    json_object_set_new(c, "model_type", json_string(moe ? "qwen3_5_moe_text" : "qwen3_5_text"));
    if (moe) {
        json_object_set_new(c, "num_experts", json_integer(s->n_expert));
        json_object_set_new(c, "num_experts_per_tok", json_integer(s->n_expert_used));
        json_object_set_new(c, "moe_intermediate_size", json_integer(s->n_ff_exp));
        json_object_set_new(c, "shared_expert_intermediate_size", json_integer(s->n_ff_shexp));
    }
    json_object_set_new(c, "hidden_size", json_integer(s->n_embd));
    json_object_set_new(c, "num_hidden_layers", json_integer(s->n_layer));
    json_object_set_new(c, "intermediate_size", json_integer(s->n_ff));
    json_object_set_new(c, "num_attention_heads", json_integer(s->n_head));
    json_object_set_new(c, "num_key_value_heads", json_integer(s->n_head_kv));
    json_object_set_new(c, "head_dim", json_integer(s->head_dim));
    json_object_set_new(c, "vocab_size", json_integer(s->n_vocab));
    json_object_set_new(c, "max_position_embeddings", json_integer(4096));
    json_object_set_new(c, "rms_norm_eps", json_real(1e-6));
    const int64_t half = s->head_dim / 4; /* synth_write_gguf's sections */
    json_object_set_new(c, "rope_parameters",
                        json_pack("{s:s, s:f, s:f, s:[I, I, I], s:b}", "rope_type", "default", "rope_theta",
                                  s->rope_base, "partial_rotary_factor", 0.5, "mrope_section",
                                  (json_int_t)(half - 2 * (half / 4)), (json_int_t)(half / 4), (json_int_t)(half / 4),
                                  "mrope_interleaved", 1));
    json_object_set_new(c, "tie_word_embeddings", json_boolean(s->tied));
    json_object_set_new(c, "hidden_act", json_string("silu"));
    json_object_set_new(c, "full_attention_interval", json_integer(s->dn_interval));
    json_object_set_new(c, "linear_conv_kernel_dim", json_integer(s->dn_conv));
    json_object_set_new(c, "linear_key_head_dim", json_integer(s->dn_head));
    json_object_set_new(c, "linear_value_head_dim", json_integer(s->dn_head));
    json_object_set_new(c, "linear_num_key_heads", json_integer(s->dn_n_k_heads));
    json_object_set_new(c, "linear_num_value_heads", json_integer(s->dn_n_v_heads));
    if (!opt->wrapped) return hf_config_write(c, opt->edits, dir) && ok;
    /* Qwen3_5(Moe)ForConditionalGeneration: the text model's config in text_config */
    apply_edits(c, opt->edits);
    json_t *outer = json_object();
    json_object_set_new(outer, "architectures", json_pack("[s]", moe ? "Qwen3_5MoeForConditionalGeneration"
                                                                       : "Qwen3_5ForConditionalGeneration"));
    json_object_set_new(outer, "model_type", json_string(moe ? "qwen3_5_moe" : "qwen3_5"));
    json_object_set_new(outer, "text_config", c);
    json_object_set_new(outer, "vision_config", json_pack("{s:s, s:i, s:i}", "model_type", "qwen3_5", "depth", 1,
                                                          "hidden_size", 4));
    json_object_set_new(outer, "tie_word_embeddings", json_boolean(s->tied));
    return hf_config_write(outer, opt->outer_edits, dir) && ok;
}
