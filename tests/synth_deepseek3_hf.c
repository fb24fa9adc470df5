/* synth_deepseek3_hf.c — test-only Hugging Face copy of a synthesized
 * deepseek2 GGUF (see synth_deepseek3_hf.h): names as gguf-py's
 * tensor_mapping.py maps DeepSeek V2 / V3's, q/k rows as stored (llama.cpp's
 * converter does not permute them: the rope dims rotate interleaved pairs in
 * both), kv_b_proj as the fused attn_kv_b, one tensor per expert. */
#include "synth_deepseek3_hf.h"

#include "io/gguf.h"
#include "tensor/types.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

/* GGUF per-layer suffix → HF suffix (gguf-py tensor_mapping.py's deepseek2 rows). */
static const char *const names[][2] = {
    {"attn_norm", "input_layernorm"},
    {"attn_q", "self_attn.q_proj"},
    {"attn_q_a", "self_attn.q_a_proj"},
    {"attn_q_a_norm", "self_attn.q_a_layernorm"},
    {"attn_q_b", "self_attn.q_b_proj"},
    {"attn_kv_a_mqa", "self_attn.kv_a_proj_with_mqa"},
    {"attn_kv_a_norm", "self_attn.kv_a_layernorm"},
    {"attn_kv_b", "self_attn.kv_b_proj"},
    {"attn_output", "self_attn.o_proj"},
    {"ffn_norm", "post_attention_layernorm"},
    {"ffn_gate", "mlp.gate_proj"},
    {"ffn_up", "mlp.up_proj"},
    {"ffn_down", "mlp.down_proj"},
    {"ffn_gate_inp", "mlp.gate"},
    {"ffn_gate_shexp", "mlp.shared_experts.gate_proj"},
    {"ffn_up_shexp", "mlp.shared_experts.up_proj"},
    {"ffn_down_shexp", "mlp.shared_experts.down_proj"},
};
static const st_moe_names ds_names = {names, sizeof names / sizeof names[0], "deepseek2"};

static bool write_config(const synth_shape *s, const kld_gguf *g, const char *dir, const glm_edit *ed) {
    double eps = 0, log_mul = 0;
    kld_gguf_get_float(g, "deepseek2.attention.layer_norm_rms_epsilon", &eps);
    const bool has_log_mul = kld_gguf_get_float(g, "deepseek2.rope.scaling.yarn_log_multiplier", &log_mul);
    const bool norm = kld_gguf_find(g, "deepseek2.expert_weights_norm") != NULL;
    json_t *c = json_object();
    json_object_set_new(c, "architectures", json_pack("[s]", "DeepseekV3ForCausalLM"));
    json_object_set_new(c, "model_type", json_string("deepseek_v3"));
    json_object_set_new(c, "hidden_size", json_integer(s->n_embd));
    json_object_set_new(c, "num_hidden_layers", json_integer(s->n_layer));
    json_object_set_new(c, "intermediate_size", json_integer(s->n_ff));
    json_object_set_new(c, "num_attention_heads", json_integer(s->n_head));
    json_object_set_new(c, "num_key_value_heads", json_integer(s->n_head));
    json_object_set_new(c, "head_dim", json_integer(s->mla_rope)); /* transformers saves qk_rope_head_dim */
    json_object_set_new(c, "vocab_size", json_integer(s->n_vocab));
    json_object_set_new(c, "max_position_embeddings", json_integer(4096));
    json_object_set_new(c, "rms_norm_eps", json_real(eps)); /* the GGUF's f32 value, exactly */
    json_object_set_new(c, "rope_theta", json_real(s->rope_base));
    json_object_set_new(c, "attention_bias", json_false());
    json_object_set_new(c, "hidden_act", json_string("silu"));
    json_object_set_new(c, "tie_word_embeddings", json_boolean(s->tied));
    json_object_set_new(c, "q_lora_rank", s->mla_q_lora > 0 ? json_integer(s->mla_q_lora) : json_null());
    json_object_set_new(c, "kv_lora_rank", json_integer(s->mla_kv_lora));
    json_object_set_new(c, "qk_nope_head_dim", json_integer(s->head_dim - s->mla_rope));
    json_object_set_new(c, "qk_rope_head_dim", json_integer(s->mla_rope));
    json_object_set_new(c, "v_head_dim", json_integer(s->mla_v));
    json_object_set_new(c, "rope_interleave", json_true());
    json_object_set_new(c, "n_routed_experts", json_integer(s->n_expert));
    json_object_set_new(c, "num_experts_per_tok", json_integer(s->n_expert_used));
    json_object_set_new(c, "moe_intermediate_size", json_integer(s->n_ff_exp));
    json_object_set_new(c, "n_shared_experts", json_integer(s->n_shared));
    json_object_set_new(c, "first_k_dense_replace", json_integer(s->n_dense_lead));
    json_object_set_new(c, "moe_layer_freq", json_integer(1));
    json_object_set_new(c, "routed_scaling_factor", json_real(s->w_scale));
    json_object_set_new(c, "norm_topk_prob", json_boolean(norm));
    json_object_set_new(c, "scoring_func", json_string(s->gating_func == 2 ? "sigmoid" : "softmax"));
    json_object_set_new(c, "topk_method", json_string(s->gating_func == 2 ? "noaux_tc" : "greedy"));
    json_object_set_new(c, "n_group", json_integer(s->n_groups > 0 ? s->n_groups : 1));
    json_object_set_new(c, "topk_group", json_integer(s->n_group_used > 0 ? s->n_group_used : 1));
    json_object_set_new(c, "num_nextn_predict_layers", json_integer(1));
    if (s->yarn_factor > 0) {
        json_t *rs = json_object();
        json_object_set_new(rs, "type", json_string("yarn"));
        json_object_set_new(rs, "factor", json_real(s->yarn_factor));
        json_object_set_new(rs, "original_max_position_embeddings", json_integer(s->yarn_orig_ctx));
        json_object_set_new(rs, "beta_fast", json_integer(32));
        json_object_set_new(rs, "beta_slow", json_integer(1));
        if (has_log_mul) { /* the GGUF's 0.1 · mscale_all_dim */
            json_object_set_new(rs, "mscale", json_real(s->yarn_log_mul / 0.1));
            json_object_set_new(rs, "mscale_all_dim", json_real(s->yarn_log_mul / 0.1));
        }
        json_object_set_new(c, "rope_scaling", rs);
    } else {
        json_object_set_new(c, "rope_scaling", json_null());
    }
    return hf_config_write(c, ed, dir);
}

bool ds_write_hf(const synth_shape *s, const char *gguf, const char *dir, const char *drop, const glm_edit *ed) {
    kld_error err = {0};
    kld_gguf *g = NULL;
    if (kld_gguf_open(gguf, &g, &err) != KLD_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return false;
    }
    st_writer o;
    st_init(&o);
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (!st_put_moe_tensor(&o, &g->tensors[i], -1, &ds_names, drop)) {
            kld_gguf_close(g);
            return false;
        }
    char name[200];
    /* the MTP layer DeepSeek V3's checkpoints append (never read: num_hidden_layers ends before it) */
    {
        int64_t d2[2] = {s->n_embd, 2 * s->n_embd}, d1[1] = {s->n_embd};
        snprintf(name, sizeof name, "model.layers.%d.eh_proj.weight", (int)s->n_layer);
        st_put_f32(&o, name, 2, d2, calloc((size_t)(2 * s->n_embd * s->n_embd), sizeof(float)));
        snprintf(name, sizeof name, "model.layers.%d.enorm.weight", (int)s->n_layer);
        st_put_f32(&o, name, 1, d1, calloc((size_t)s->n_embd, sizeof(float)));
    }
    bool ok = st_write(&o, dir);
    ok = ok && write_config(s, g, dir, ed);
    kld_gguf_close(g);
    return ok;
}
