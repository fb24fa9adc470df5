/* weights_names.c — a model's tensor names in its source: the GGUF names
 * (also the llama2.c reader's) and their Hugging Face equivalents, with the
 * layouts transformers and multimodal wrappers add (per-expert or fused
 * experts, the language_model prefix). */
#include "model/weights.h"

#include <stdio.h>
#include <string.h>

/* GGUF per-layer tensor → Hugging Face suffix. The ffn_norm row depends on
 * whether the architecture has post-norms (Gemma 2/3 call the pre-FFN norm
 * pre_feedforward_layernorm and use post_attention_layernorm for the
 * post-attention norm). */
static const kld_name_map layer_map[] = {
    {KLD_T_ATTN_NORM, "input_layernorm"},
    {KLD_T_ATTN_Q, "self_attn.q_proj"},
    {KLD_T_ATTN_K, "self_attn.k_proj"},
    {KLD_T_ATTN_V, "self_attn.v_proj"},
    {KLD_T_ATTN_QKV, "self_attn.qkv_proj"},
    {KLD_T_ATTN_OUT, "self_attn.o_proj"},
    {KLD_T_ATTN_Q_NORM, "self_attn.q_norm"},
    {KLD_T_ATTN_K_NORM, "self_attn.k_norm"},
    {KLD_T_ATTN_POST_NORM, "post_attention_layernorm"},
    {KLD_T_FFN_POST_NORM, "post_feedforward_layernorm"},
    {KLD_T_FFN_GATE, "mlp.gate_proj"},
    {KLD_T_FFN_DOWN, "mlp.down_proj"},
};

/* Expert tensors (convert_hf_to_gguf.py's mappings): Mixtral keeps them
 * under block_sparse_moe (gate; experts.E.w1 gate, w2 down, w3 up), the
 * Qwen MoE and OLMoE checkpoints under mlp (gate; experts.E.*_proj;
 * shared_expert.*_proj and shared_expert_gate). */
static const kld_name_map moe_map[] = {
    {KLD_T_FFN_GATE_INP, "mlp.gate"},
    {KLD_T_FFN_GATE_INP_SHEXP, "mlp.shared_expert_gate"},
    {KLD_T_FFN_GATE_SHEXP, "mlp.shared_expert.gate_proj"},
    {KLD_T_FFN_UP_SHEXP, "mlp.shared_expert.up_proj"},
    {KLD_T_FFN_DOWN_SHEXP, "mlp.shared_expert.down_proj"},
};

/* HF name of the per-expert GGUF suffix "ffn_gate.E" etc., or false. */
static bool hf_expert_name(const kld_source *src, const char *pre, int il, const char *suffix,
                           const char *kind, char *buf, size_t cap) {
    static const char *const kinds[3][3] = {
        {"gate", "w1", "gate_proj"}, {"down", "w2", "down_proj"}, {"up", "w3", "up_proj"}};
    char k[8];
    int e = -1, used = 0;
    if (sscanf(suffix, "ffn_%7[a-z].%d%n", k, &e, &used) != 2 || suffix[used] || e < 0) return false;
    char probe[160];
    snprintf(probe, sizeof probe, "%smodel.layers.%d.block_sparse_moe.gate.weight", pre, il);
    const bool mixtral = kld_source_find(src, probe) != NULL;
    for (int i = 0; i < 3; i++) {
        if (strcmp(k, kinds[i][0])) continue;
        if (mixtral)
            snprintf(buf, cap, "%smodel.layers.%d.block_sparse_moe.experts.%d.%s.%s", pre, il, e,
                     kinds[i][1], kind);
        else
            snprintf(buf, cap, "%smodel.layers.%d.mlp.experts.%d.%s.%s", pre, il, e, kinds[i][2], kind);
        return true;
    }
    return false;
}

/* Prefix of the language model's tensors in a safetensors checkpoint. */
static const char *hf_prefix(const kld_source *src) {
    if (kld_source_find(src, "language_model.model.embed_tokens.weight")) return "language_model.";
    return "";
}

const char *kld_weights_source_name(const kld_source *src, const kld_hparams *hp,
                                    const char *gguf_name, char *buf, size_t cap) {
    if (src->format != KLD_FORMAT_SAFETENSORS) {
        snprintf(buf, cap, "%s", gguf_name);
        return buf;
    }
    /* multimodal checkpoints of the transformers 5 layout (Gemma 4's Gemma4ForConditionalGeneration)
     * keep the language model under model.language_model.* (the converter drops "language_model.") */
    if (kld_source_find(src, "model.language_model.embed_tokens.weight")) {
        char plain[256];
        kld_weights_hf_name(src, hp, gguf_name, "", plain, sizeof plain);
        if (!strncmp(plain, "model.", 6)) snprintf(buf, cap, "model.language_model.%s", plain + 6);
        else snprintf(buf, cap, "%s", plain);
        return buf;
    }
    return kld_weights_hf_name(src, hp, gguf_name, hf_prefix(src), buf, cap);
}

const char *kld_weights_hf_name(const kld_source *src, const kld_hparams *hp, const char *gguf_name,
                                const char *pre, char *buf, size_t cap) {
    const char *dot = strrchr(gguf_name, '.'); /* ".weight" / ".bias" */
    const char *kind = dot ? dot + 1 : "weight";
    size_t base_len = dot ? (size_t)(dot - gguf_name) : strlen(gguf_name);
    char base[96];
    snprintf(base, sizeof base, "%.*s", (int)(base_len < 95 ? base_len : 95), gguf_name);
    int il = -1, used = 0;
    const bool in_layer = sscanf(base, "blk.%d.%n", &il, &used) == 1 && used > 0;
    /* Gemma 4's experts and router parameters (gguf-py tensor_mapping.py "# gemma4" rows; the
     * converter appends .weight to the parameters under experts. and renames router.scale and
     * router.per_expert_scale to ffn_gate_inp.scale and ffn_down_exps.scale) */
    if (in_layer && hp->sw.moe_beside_dense) {
        const char *suffix = base + used, *hf = NULL;
        if (!strcmp(suffix, kld_tensor_suffix(KLD_T_FFN_GATE_UP_EXPS)) && !strcmp(kind, "weight"))
            hf = "experts.gate_up_proj";
        else if (!strcmp(suffix, kld_tensor_suffix(KLD_T_FFN_DOWN_EXPS)))
            hf = !strcmp(kind, "scale") ? "router.per_expert_scale" : "experts.down_proj";
        else if (!strcmp(suffix, kld_tensor_suffix(KLD_T_FFN_GATE_INP)) && !strcmp(kind, "scale"))
            hf = "router.scale";
        if (hf) {
            snprintf(buf, cap, "%smodel.layers.%d.%s", pre, il, hf);
            return buf;
        }
    }
    /* transformers 5's fused experts (Qwen3.5-MoE's Qwen3_5MoeExperts, and Qwen2-MoE's, Qwen3-MoE's,
     * Qwen3-Next's: the parameters mlp.experts.gate_up_proj [X, 2·F, E] and mlp.experts.down_proj
     * [X, E, F], no .weight; the converter's Qwen2MoeModel, base of all four, splits gate_up into
     * gate (first F rows) and up) */
    if (in_layer && !hp->sw.moe_beside_dense && hp->sw.hf_fused_experts && src && !strcmp(kind, "weight")) {
        const char *suffix = base + used, *hf = NULL;
        if (!strcmp(suffix, kld_tensor_suffix(KLD_T_FFN_GATE_UP_EXPS))) hf = "gate_up_proj";
        else if (!strcmp(suffix, kld_tensor_suffix(KLD_T_FFN_DOWN_EXPS))) hf = "down_proj";
        char probe[160], wrapped[160];
        snprintf(probe, sizeof probe, "%smodel.layers.%d.mlp.experts.gate_up_proj", pre, il);
        snprintf(wrapped, sizeof wrapped, "model.language_model.layers.%d.mlp.experts.gate_up_proj", il);
        if (hf && (kld_source_find(src, probe) || kld_source_find(src, wrapped))) {
            snprintf(buf, cap, "%smodel.layers.%d.mlp.experts.%s", pre, il, hf);
            return buf;
        }
    }
    /* the architecture's own names first (whole names outside the layers) */
    for (const kld_name_map *m = hp->hy.hf_names; m && m->hf; m++) {
        const bool layer_row = strncmp(kld_tensor_pattern(m->gguf), "blk.%d.", 7) == 0;
        if (in_layer && layer_row && !strcmp(kld_tensor_suffix(m->gguf), base + used)) {
            snprintf(buf, cap, "%smodel.layers.%d.%s.%s", pre, il, m->hf, kind);
            return buf;
        }
        if (!in_layer && !layer_row && !strcmp(kld_tensor_pattern(m->gguf), base)) {
            snprintf(buf, cap, "%s%s.%s", pre, m->hf, kind);
            return buf;
        }
    }

    if (!strcmp(base, kld_tensor_pattern(KLD_T_TOKEN_EMBD)))
        snprintf(buf, cap, "%smodel.embed_tokens.%s", pre, kind);
    else if (!strcmp(base, kld_tensor_pattern(KLD_T_OUTPUT_NORM)))
        snprintf(buf, cap, "%smodel.norm.%s", pre, kind);
    else if (!strcmp(base, kld_tensor_pattern(KLD_T_OUTPUT))) snprintf(buf, cap, "%slm_head.%s", pre, kind);
    else {
        if (in_layer) {
            const char *suffix = base + used;
            const char *hf = NULL;
            if (!strcmp(suffix, kld_tensor_suffix(KLD_T_FFN_NORM)))
                hf = hp->sw.post_norms ? "pre_feedforward_layernorm" : "post_attention_layernorm";
            else if (!strcmp(suffix, kld_tensor_suffix(KLD_T_FFN_UP)))
                hf = hp->sw.fused_gate_up ? "mlp.gate_up_proj" : "mlp.up_proj";
            for (size_t i = 0; !hf && i < sizeof layer_map / sizeof layer_map[0]; i++)
                if (!strcmp(kld_tensor_suffix(layer_map[i].gguf), suffix)) hf = layer_map[i].hf;
            /* the router's selection bias: transformers' e_score_correction_bias (GLM-4.5,
             * DeepSeek V3), a parameter of mlp.gate without a .weight / .bias of its own */
            if (!hf && !strcmp(suffix, kld_tensor_suffix(KLD_T_FFN_EXP_PROBS_B)) && !strcmp(kind, "bias")) {
                snprintf(buf, cap, "%smodel.layers.%d.mlp.gate.e_score_correction_bias", pre, il);
                return buf;
            }
            /* Gemma 4's layer_scalar: a parameter (the converter appends .weight) */
            if (!hf && !strcmp(suffix, kld_tensor_suffix(KLD_T_LAYER_OUT_SCALE))) {
                snprintf(buf, cap, "%smodel.layers.%d.layer_scalar", pre, il);
                return buf;
            }
            /* gpt-oss's sinks: the parameter self_attn.sinks (the converter appends .weight) */
            if (!hf && !strcmp(suffix, kld_tensor_suffix(KLD_T_ATTN_SINKS))) {
                snprintf(buf, cap, "%smodel.layers.%d.self_attn.sinks", pre, il);
                return buf;
            }
            char probe[160];
            snprintf(probe, sizeof probe, "%smodel.layers.%d.block_sparse_moe.gate.weight", pre, il);
            if (!hf && !strcmp(suffix, kld_tensor_suffix(KLD_T_FFN_GATE_INP)) && src &&
                kld_source_find(src, probe))
                hf = "block_sparse_moe.gate";
            for (size_t i = 0; !hf && i < sizeof moe_map / sizeof moe_map[0]; i++)
                if (!strcmp(kld_tensor_suffix(moe_map[i].gguf), suffix)) hf = moe_map[i].hf;
            if (!hf && src && hf_expert_name(src, pre, il, suffix, kind, buf, cap)) return buf;
            if (hf) {
                snprintf(buf, cap, "%smodel.layers.%d.%s.%s", pre, il, hf, kind);
                return buf;
            }
        }
        snprintf(buf, cap, "%s", gguf_name);
    }
    return buf;
}
