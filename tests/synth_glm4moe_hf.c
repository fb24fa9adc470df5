/* synth_glm4moe_hf.c — test-only Hugging Face copy of a synthesized glm4moe
 * GGUF (see synth_glm4moe_hf.h): names as gguf-py's tensor_mapping.py maps
 * GLM-4.5's, q/k rows as stored (llama.cpp's converter does not permute
 * them: GLM-4.5 is NeoX already), one tensor per expert. */
#include "synth_glm4moe_hf.h"

#include "io/gguf.h"
#include "tensor/types.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* GGUF per-layer suffix → HF suffix (gguf-py tensor_mapping.py's glm4moe rows). */
static const char *const names[][2] = {
    {"attn_norm", "input_layernorm"},        {"attn_q", "self_attn.q_proj"},
    {"attn_k", "self_attn.k_proj"},          {"attn_v", "self_attn.v_proj"},
    {"attn_output", "self_attn.o_proj"},     {"attn_q_norm", "self_attn.q_norm"},
    {"attn_k_norm", "self_attn.k_norm"},     {"post_attention_norm", "post_attention_layernorm"},
    {"ffn_gate", "mlp.gate_proj"},           {"ffn_up", "mlp.up_proj"},
    {"ffn_down", "mlp.down_proj"},           {"ffn_gate_inp", "mlp.gate"},
    {"ffn_gate_shexp", "mlp.shared_experts.gate_proj"}, {"ffn_up_shexp", "mlp.shared_experts.up_proj"},
    {"ffn_down_shexp", "mlp.shared_experts.down_proj"},
};
static const st_moe_names glm_names = {names, sizeof names / sizeof names[0], "glm4moe"};

static bool write_config(const synth_shape *s, const kld_gguf *g, const char *dir, bool qk_norm, const glm_edit *ed) {
    double eps = 0;
    kld_gguf_get_float(g, "glm4moe.attention.layer_norm_rms_epsilon", &eps);
    json_t *c = json_object();
    json_object_set_new(c, "architectures", json_pack("[s]", "Glm4MoeForCausalLM"));
    json_object_set_new(c, "model_type", json_string("glm4_moe"));
    json_object_set_new(c, "hidden_size", json_integer(s->n_embd));
    json_object_set_new(c, "num_hidden_layers", json_integer(s->n_layer));
    json_object_set_new(c, "intermediate_size", json_integer(s->n_ff));
    json_object_set_new(c, "num_attention_heads", json_integer(s->n_head));
    json_object_set_new(c, "num_key_value_heads", json_integer(s->n_head_kv));
    json_object_set_new(c, "head_dim", json_integer(s->head_dim));
    json_object_set_new(c, "vocab_size", json_integer(s->n_vocab));
    json_object_set_new(c, "max_position_embeddings", json_integer(4096));
    json_object_set_new(c, "rms_norm_eps", json_real(eps)); /* the GGUF's f32 value, exactly */
    json_object_set_new(c, "rope_theta", json_real(s->rope_base));
    json_object_set_new(c, "partial_rotary_factor", json_real(0.5));
    json_object_set_new(c, "attention_bias", json_true());
    json_object_set_new(c, "use_qk_norm", json_boolean(qk_norm));
    json_object_set_new(c, "hidden_act", json_string("silu"));
    json_object_set_new(c, "tie_word_embeddings", json_boolean(s->tied));
    json_object_set_new(c, "n_routed_experts", json_integer(s->n_expert));
    json_object_set_new(c, "num_experts_per_tok", json_integer(s->n_expert_used));
    json_object_set_new(c, "moe_intermediate_size", json_integer(s->n_ff_exp));
    json_object_set_new(c, "n_shared_experts", json_integer(s->n_shared));
    json_object_set_new(c, "first_k_dense_replace", json_integer(s->n_dense_lead));
    json_object_set_new(c, "routed_scaling_factor", json_real(s->w_scale));
    json_object_set_new(c, "norm_topk_prob", json_true());
    json_object_set_new(c, "n_group", json_integer(1));
    json_object_set_new(c, "topk_group", json_integer(1));
    json_object_set_new(c, "num_nextn_predict_layers", json_integer(1));
    json_object_set_new(c, "rope_scaling", json_null());
    return hf_config_write(c, ed, dir);
}

/* dir/model.safetensors + config.json from the glm4moe GGUF at gguf. */
bool glm_write_hf(const synth_shape *s, const char *gguf, const char *dir, const char *drop, const glm_edit *ed) {
    kld_error err = {0};
    kld_gguf *g = NULL;
    if (kld_gguf_open(gguf, &g, &err) != KLD_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return false;
    }
    st_writer o;
    st_init(&o);
    bool qk_norm = false, named = true;
    for (uint64_t i = 0; named && i < g->n_tensors; i++) {
        qk_norm |= strstr(g->tensors[i].name, ".attn_q_norm.") != NULL;
        named = st_put_moe_tensor(&o, &g->tensors[i], -1, &glm_names, drop);
    }
    /* the last layer again as the MTP layer transformers' checkpoints append: a whole decoder
     * layer (llama.cpp's converter keeps it and its loader requires it) */
    char name[200], last[32];
    snprintf(last, sizeof last, "blk.%d.", (int)s->n_layer - 1);
    for (uint64_t i = 0; named && i < g->n_tensors; i++)
        if (!strncmp(g->tensors[i].name, last, strlen(last)))
            named = st_put_moe_tensor(&o, &g->tensors[i], (int)s->n_layer, &glm_names, drop);
    if (!named) {
        kld_gguf_close(g);
        return false;
    }
    /* the MTP layer's own tensors (never read: num_hidden_layers ends before it) */
    {
        static const char *const own[] = {"enorm", "hnorm", "shared_head.norm"};
        int64_t d2[2] = {s->n_embd, 2 * s->n_embd}, d1[1] = {s->n_embd};
        snprintf(name, sizeof name, "model.layers.%d.eh_proj.weight", (int)s->n_layer);
        st_put_f32(&o, name, 2, d2, calloc((size_t)(2 * s->n_embd * s->n_embd), sizeof(float)));
        for (size_t k = 0; k < sizeof own / sizeof own[0]; k++) {
            snprintf(name, sizeof name, "model.layers.%d.%s.weight", (int)s->n_layer, own[k]);
            st_put_f32(&o, name, 1, d1, calloc((size_t)s->n_embd, sizeof(float)));
        }
    }
    bool ok = st_write(&o, dir);
    ok = ok && write_config(s, g, dir, qk_norm, ed);
    kld_gguf_close(g);
    return ok;
}

