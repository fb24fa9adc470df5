/* arch.c — the switch table: one row per supported architecture, values as
 * llama.cpp (c392e50) builds each graph. */
#include "model/arch.h"

/* LFM2's Hugging Face names (llama.cpp gguf-py tensor_mapping.py, "# lfm2"
 * rows; the final norm is model.embedding_norm, GGUF token_embd_norm). */
static const kld_name_map lfm2_hf_names[] = {
    {KLD_T_TOKEN_EMBD_NORM, "model.embedding_norm"},
    {KLD_T_ATTN_NORM, "operator_norm"},
    {KLD_T_FFN_NORM, "ffn_norm"},
    {KLD_T_FFN_GATE, "feed_forward.w1"},
    {KLD_T_FFN_UP, "feed_forward.w3"},
    {KLD_T_FFN_DOWN, "feed_forward.w2"},
    {KLD_T_ATTN_OUT, "self_attn.out_proj"},
    {KLD_T_ATTN_Q_NORM, "self_attn.q_layernorm"},
    {KLD_T_ATTN_K_NORM, "self_attn.k_layernorm"},
    {KLD_T_SHORTCONV_CONV, "conv.conv"},
    {KLD_T_SHORTCONV_INPROJ, "conv.in_proj"},
    {KLD_T_SHORTCONV_OUTPROJ, "conv.out_proj"},
    {KLD_T_NONE, NULL},
};

/* Qwen3-Next's linear-attention names (transformers' Qwen3NextGatedDeltaNet;
 * llama.cpp's converter maps them to these GGUF names). in_proj_qkvz is
 * GGUF ssm_in, rebuilt into attn_qkv / attn_gate at load, and A_log /
 * dt_bias become ssm_a / ssm_dt.bias (weights_deltanet.c). */
static const kld_name_map qwen3next_hf_names[] = {
    {KLD_T_SSM_IN, "linear_attn.in_proj_qkvz"},
    {KLD_T_SSM_CONV1D, "linear_attn.conv1d"},
    {KLD_T_SSM_BETA_ALPHA, "linear_attn.in_proj_ba"},
    {KLD_T_SSM_NORM, "linear_attn.norm"},
    {KLD_T_SSM_OUT, "linear_attn.out_proj"},
    {KLD_T_NONE, NULL},
};

/* Qwen3.5's names that differ from the llama family's (transformers'
 * Qwen3_5GatedDeltaNet); its projections are rebuilt at load in tiled
 * v-head order (weights_deltanet.c). */
static const kld_name_map qwen35_hf_names[] = {
    {KLD_T_SSM_NORM, "linear_attn.norm"},
    {KLD_T_NONE, NULL},
};

/* GLM-4.5's (and DeepSeek V3's) shared experts: transformers' Glm4MoeMoE keeps
 * them under mlp.shared_experts (gguf-py tensor_mapping.py, FFN_*_SHEXP) */
static const kld_name_map glm4moe_hf_names[] = {
    {KLD_T_FFN_GATE_SHEXP, "mlp.shared_experts.gate_proj"},
    {KLD_T_FFN_UP_SHEXP, "mlp.shared_experts.up_proj"},
    {KLD_T_FFN_DOWN_SHEXP, "mlp.shared_experts.down_proj"},
    {KLD_T_NONE, NULL},
};

/* gpt-oss's router (gguf-py tensor_mapping.py, FFN_GATE_INP "openai-moe"); its sinks and
 * experts are read by weights.c / weights_gptoss.c */
static const kld_name_map gptoss_hf_names[] = {
    {KLD_T_FFN_GATE_INP, "mlp.router"},
    {KLD_T_NONE, NULL},
};

/* DeepSeek V2 / V3's MLA projections (transformers' DeepseekV3Attention; gguf-py
 * tensor_mapping.py) and its shared experts under mlp.shared_experts */
static const kld_name_map deepseek2_hf_names[] = {
    {KLD_T_ATTN_Q_A, "self_attn.q_a_proj"},
    {KLD_T_ATTN_Q_A_NORM, "self_attn.q_a_layernorm"},
    {KLD_T_ATTN_Q_B, "self_attn.q_b_proj"},
    {KLD_T_ATTN_KV_A_MQA, "self_attn.kv_a_proj_with_mqa"},
    {KLD_T_ATTN_KV_A_NORM, "self_attn.kv_a_layernorm"},
    {KLD_T_ATTN_KV_B, "self_attn.kv_b_proj"},
    {KLD_T_FFN_GATE_SHEXP, "mlp.shared_experts.gate_proj"},
    {KLD_T_FFN_UP_SHEXP, "mlp.shared_experts.up_proj"},
    {KLD_T_FFN_DOWN_SHEXP, "mlp.shared_experts.down_proj"},
    {KLD_T_NONE, NULL},
};

/* Gemma 4's names beyond Gemma 3's (gguf-py tensor_mapping.py, the "# gemma3n" and "# gemma4"
 * rows): per-layer embeddings, the 26B-A4B's second FFN norms; layer_scalar, a parameter
 * without .weight, is named in weights.c. */
static const kld_name_map gemma4_hf_names[] = {
    {KLD_T_PER_LAYER_TOKEN_EMBD, "model.embed_tokens_per_layer"},
    {KLD_T_PER_LAYER_MODEL_PROJ, "model.per_layer_model_projection"},
    {KLD_T_PER_LAYER_PROJ_NORM, "model.per_layer_projection_norm"},
    {KLD_T_PER_LAYER_INP_GATE, "per_layer_input_gate"},
    {KLD_T_PER_LAYER_PROJ, "per_layer_projection"},
    {KLD_T_PER_LAYER_POST_NORM, "post_per_layer_input_norm"},
    {KLD_T_FFN_PRE_NORM_2, "pre_feedforward_layernorm_2"},
    {KLD_T_FFN_POST_NORM_1, "post_feedforward_layernorm_1"},
    {KLD_T_FFN_POST_NORM_2, "post_feedforward_layernorm_2"},
    {KLD_T_FFN_GATE_INP, "router.proj"},
    {KLD_T_NONE, NULL},
};

static const kld_arch_switches arch_table[] = {
    /* name      rope           act                qkv    gate_up qk_norm post   embd   qkv_b  swa swa_base window */
    /* llama with expert_count > 0 is Mixtral: build_llama's MoE branch, norm_w true (src/llama.cpp 1591-1602) */
    {"llama", KLD_ROPE_NORM, KLD_ACT_SILU, false, false, false, false, false, false, -1, 0, 0,
     .moe = KLD_MOE_OPTIONAL, .moe_norm_w = true},
    {"qwen2", KLD_ROPE_NEOX, KLD_ACT_SILU, false, false, false, false, false, true, -1, 0, 0, .moe = KLD_MOE_NONE},
    {"qwen3", KLD_ROPE_NEOX, KLD_ACT_SILU, false, false, true, false, false, false, -1, 0, 0, .moe = KLD_MOE_NONE},
    {"phi3", KLD_ROPE_NEOX, KLD_ACT_SILU, true, true, false, false, false, false, 0, 0, 0, .moe = KLD_MOE_NONE},
    {"gemma", KLD_ROPE_NEOX, KLD_ACT_GELU_TANH, false, false, false, false, true, false, -1, 0, 0, .moe = KLD_MOE_NONE},
    /* gemma2: layers il % 2 == 0 slide (src/llama.cpp 4869), window 4096 by default (llama-model.cpp 853) */
    {"gemma2", KLD_ROPE_NEOX, KLD_ACT_GELU_TANH, false, false, false, true, true, false, 2, 0, 4096, .moe = KLD_MOE_NONE},
    /* gemma3 (after c392e50): set_swa_pattern(6), sliding base 1e4 at scale 1 */
    {"gemma3", KLD_ROPE_NEOX, KLD_ACT_GELU_TANH, false, false, true, true, true, false, 6, 1e4, 0, .moe = KLD_MOE_NONE},
    /* qwen2moe: q/k/v biases required (llama-model.cpp 2119-2121), routed experts with
     * norm_w false (src/llama.cpp 3637-3648) plus the sigmoid-gated shared expert (3650-3672) */
    {"qwen2moe", KLD_ROPE_NEOX, KLD_ACT_SILU, false, false, false, false, false, true, -1, 0, 0,
     .moe = KLD_MOE_ALWAYS, .moe_shared_expert = true, .moe_ff_per_used = true, .hf_fused_experts = true},
    /* olmoe: q/k RMSNorm over the full q and k rows (src/llama.cpp 5735-5741), norm_w false (5782-5792) */
    {"olmoe", KLD_ROPE_NEOX, KLD_ACT_SILU, false, false, false, false, false, false, -1, 0, 0,
     .qk_norm_full = true, .moe = KLD_MOE_ALWAYS},
    /* qwen3moe (after c392e50, src/models/qwen3moe.cpp): qwen3 attention, norm_w true */
    {"qwen3moe", KLD_ROPE_NEOX, KLD_ACT_SILU, false, false, true, false, false, false, -1, 0, 0,
     .moe = KLD_MOE_ALWAYS, .moe_norm_w = true, .moe_ff_per_used = true, .hf_fused_experts = true},
    /* lfm2 (after c392e50; src/models/lfm2.cpp): layers with head_count_kv 0
     * are short convolutions, the others GQA with q/k norms; NeoX RoPE; a
     * sliding window (every attention layer) only when the key is given. */
    {"lfm2", KLD_ROPE_NEOX, KLD_ACT_SILU, false, false, true, false, false, false, 0, 0, 0,
     .moe = KLD_MOE_NONE},
    /* qwen3next (src/models/qwen3next.cpp): gated DeltaNet layers between
     * gated-attention layers (q/k norms, NeoX RoPE, sigmoid output gate from
     * attn_q); softmax-routed experts renormalised (build_moe_ffn norm_w true)
     * plus the sigmoid-gated shared expert; a dense FFN without expert_count. */
    {"qwen3next", KLD_ROPE_NEOX, KLD_ACT_SILU, false, false, true, false, false, false, -1, 0, 0,
     .moe = KLD_MOE_OPTIONAL, .moe_norm_w = true, .moe_shared_expert = true, .moe_ff_per_used = true,
     .attn_out_gate = true, .hf_fused_experts = true, .gguf_fused_experts = true},
    /* gpt-oss (src/models/openai-moe.cpp): q/k/v/o biases, attention sinks, NeoX
     * RoPE (YaRN in the released files), even layers slide (set_swa_pattern(2)),
     * pre-FFN norm post_attention_norm, every layer a MoE: biased router,
     * top-k of the logits then softmax over them (SOFTMAX_WEIGHT, norm_w
     * false), biased experts with the clamped SwiGLU (SWIGLU_OAI_MOE) */
    /* qwen35 / qwen35moe (src/models/qwen35.cpp, qwen35moe.cpp): Qwen3-Next's layout with the
     * DeltaNet changes of the hybrid row below; qwen35 is dense (llama.cpp asserts no router),
     * qwen35moe always a mixture of experts with Qwen3-Next's shared expert */
    {"qwen35", KLD_ROPE_NEOX, KLD_ACT_SILU, false, false, true, false, false, false, -1, 0, 0,
     .moe = KLD_MOE_NONE, .attn_out_gate = true},
    {"qwen35moe", KLD_ROPE_NEOX, KLD_ACT_SILU, false, false, true, false, false, false, -1, 0, 0,
     .moe = KLD_MOE_ALWAYS, .moe_norm_w = true, .moe_shared_expert = true, .moe_ff_per_used = true,
     .attn_out_gate = true, .hf_fused_experts = true, .gguf_fused_experts = true},
    /* glm4moe (src/models/glm4-moe.cpp): q/k/v biases, optional q/k norms, partial NeoX RoPE,
     * pre-FFN norm post_attention_norm, leading_dense_block_count dense layers, then MoE layers:
     * sigmoid gating with the exp_probs_b selection bias (expert_gating_func, default sigmoid),
     * expert_weights_norm / expert_weights_scale, an ungated shared expert added to the routed sum;
     * the appended NextN layers (nextn_predict_layers) are not run */
    {"glm4moe", KLD_ROPE_NEOX, KLD_ACT_SILU, false, false, false, false, false, false, -1, 0, 0,
     .moe = KLD_MOE_ALWAYS, .moe_gating = KLD_MOE_GATE_SIGMOID, .moe_shared_expert = true,
     .moe_shexp_ungated = true, .moe_ff_required = true, .qk_norm_optional = true},
    /* deepseek2 (src/models/deepseek2.cpp; DeepSeek V2 / V3 / R1): MLA attention (the
     * decompressed form with attn_kv_b), normal RoPE on the decoupled rope dims, YaRN's mscale
     * squared in the attention scale, leading_dense_block_count dense layers, then MoE layers
     * routed by expert_gating_func (absent: softmax, V2's files) with exp_probs_b, weight norm
     * and scale, and the ungated shared expert; the appended NextN layers are not run */
    {"deepseek2", KLD_ROPE_NORM, KLD_ACT_SILU, false, false, false, false, false, false, -1, 0, 0,
     .moe = KLD_MOE_ALWAYS, .moe_gating = KLD_MOE_GATE_SIGMOID, .moe_shared_expert = true,
     .moe_shexp_ungated = true, .moe_ff_required = true, .mla = true},
    /* gemma4 (src/models/gemma4.cpp): gemma3's attention with the window pattern as per-layer flags,
     * sliding base rope.freq_base_swa (default 1e4, scale 1), rope_freqs on the full layers only
     * (proportional RoPE), attention scale 1, V RMS-normalised without weight, K reused as V when
     * attn_v is absent, layer_output_scale; GGUF norms as stored (the converter adds no +1) */
    {"gemma4", KLD_ROPE_NEOX, KLD_ACT_GELU_TANH, false, false, true, true, true, false, 6, 1e4, 0,
     .moe = KLD_MOE_OPTIONAL, .moe_norm_w = true, .moe_ff_required = true, .moe_beside_dense = true,
     .v_norm = true, .v_from_k = true, .layer_out_scale = true, .rope_freqs_full_only = true},
    {"gpt-oss", KLD_ROPE_NEOX, KLD_ACT_SWIGLU_OAI, false, false, false, false, false, true, 2, 0, 0,
     .moe = KLD_MOE_ALWAYS, .moe_gating = KLD_MOE_GATE_SOFTMAX_WEIGHT, .moe_biases = true, .moe_ff_required = true,
     .attn_sinks = true, .out_bias_required = true},
};

static const kld_arch_hybrid hybrid_table[] = {
    {"lfm2", KLD_LAYER_SHORTCONV, KLD_T_TOKEN_EMBD_NORM, lfm2_hf_names, KLD_T_FFN_NORM, .dn_split_ba = false},
    {"qwen3next", KLD_LAYER_DELTANET, KLD_T_OUTPUT_NORM, qwen3next_hf_names, KLD_T_ATTN_POST_NORM, .dn_split_ba = false},
    {"qwen35", KLD_LAYER_DELTANET, KLD_T_OUTPUT_NORM, qwen35_hf_names, KLD_T_ATTN_POST_NORM, .dn_split_ba = true,
     .dn_v_tiled = true, .rope_sections = true},
    {"qwen35moe", KLD_LAYER_DELTANET, KLD_T_OUTPUT_NORM, qwen35_hf_names, KLD_T_ATTN_POST_NORM, .dn_split_ba = true,
     .dn_v_tiled = true, .rope_sections = true},
    /* no recurrent layers: only their pre-FFN norm's name */
    {"glm4moe", KLD_LAYER_ATTN, KLD_T_OUTPUT_NORM, glm4moe_hf_names, KLD_T_ATTN_POST_NORM, .dn_split_ba = false},
    {"gpt-oss", KLD_LAYER_ATTN, KLD_T_OUTPUT_NORM, gptoss_hf_names, KLD_T_ATTN_POST_NORM, .dn_split_ba = false},
    {"deepseek2", KLD_LAYER_ATTN, KLD_T_OUTPUT_NORM, deepseek2_hf_names, KLD_T_FFN_NORM, .dn_split_ba = false},
    {"gemma4", KLD_LAYER_ATTN, KLD_T_OUTPUT_NORM, gemma4_hf_names, KLD_T_FFN_NORM, .dn_split_ba = false},
};

const kld_arch_hybrid *kld_arch_hybrid_find(const char *name) {
    static const kld_arch_hybrid none = {"", KLD_LAYER_ATTN, KLD_T_OUTPUT_NORM, NULL, KLD_T_FFN_NORM, .dn_split_ba = false};
    for (size_t i = 0; i < sizeof hybrid_table / sizeof hybrid_table[0]; i++)
        if (strcmp(hybrid_table[i].name, name) == 0) return &hybrid_table[i];
    return &none;
}

const kld_arch_switches *kld_arch_find(const char *name) {
    for (size_t i = 0; i < sizeof arch_table / sizeof arch_table[0]; i++)
        if (strcmp(arch_table[i].name, name) == 0) return &arch_table[i];
    return NULL;
}

const char *kld_arch_supported(void) {
    return "llama, qwen2, qwen3, phi3, gemma, gemma2, gemma3, qwen2moe, olmoe, qwen3moe, lfm2, qwen3next, "
           "qwen35, qwen35moe, gpt-oss, glm4moe, deepseek2, gemma4";
}
