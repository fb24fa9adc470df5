/* arch.h — what distinguishes one supported architecture from another, as
 * data: a table of switches per architecture name. The engine reads these
 * switches and never compares architecture names. */
#ifndef KLD_MODEL_ARCH_H
#define KLD_MODEL_ARCH_H

#include "common/common.h"
#include "model/gguf_names.h"

typedef enum kld_rope_type {
    KLD_ROPE_NORM = 0, /* interleaved pairs (x0,x1),(x2,x3)…: GGUF llama */
    KLD_ROPE_NEOX = 2  /* rotate-half (x_i, x_{i+d/2}): qwen2, phi3, gemma, HF llama */
} kld_rope_type;

typedef enum kld_act {
    KLD_ACT_SILU = 0,       /* silu(gate) * up */
    KLD_ACT_GELU_TANH = 1,  /* gelu_tanh(gate) * up (Gemma) */
    KLD_ACT_SWIGLU_OAI = 2  /* x·σ(1.702·x)·(y + 1), x = min(gate, 7), y = clamp(up, ±7) (gpt-oss:
                               llama.cpp's LLM_FFN_SWIGLU_OAI_MOE, ggml_swiglu_oai) */
} kld_act;

/* How the router's logits become the chosen experts and their weights. */
typedef enum kld_moe_gating {
    KLD_MOE_GATE_SOFTMAX = 0,       /* softmax over all experts, then top-k (optionally renormalised) */
    KLD_MOE_GATE_SOFTMAX_WEIGHT = 1, /* top-k of the logits, softmax over those k (gpt-oss) */
    KLD_MOE_GATE_SIGMOID = 2         /* sigmoid of each logit; top-k of sigmoid + exp_probs_b (GLM-4.5,
                                        DeepSeek V3), weights the unbiased sigmoids */
} kld_moe_gating;

/* What mixes the positions in a layer (the block between the first norm
 * and the first residual add). Attention keeps a KV cache; the recurrent
 * kinds keep a fixed-size state per layer in the session. */
typedef enum kld_layer_kind {
    KLD_LAYER_ATTN = 0,      /* softmax attention over the KV cache */
    KLD_LAYER_SHORTCONV = 1, /* LFM2 gated short convolution (src/engine/shortconv.c) */
    KLD_LAYER_DELTANET = 2   /* Qwen3-Next gated DeltaNet linear attention (src/engine/deltanet.c) */
} kld_layer_kind;

/* A GGUF tensor → Hugging Face name pair; per-layer tensors map to a
 * suffix after "model.layers.N." (attn_norm → "operator_norm"), the
 * others to a whole base name. A row with hf NULL ends a table. */
typedef struct kld_name_map {
    kld_tensor_id gguf;
    const char *hf;
} kld_name_map;
typedef enum kld_moe_kind {
    KLD_MOE_NONE = 0,     /* dense FFN only */
    KLD_MOE_OPTIONAL = 1, /* MoE FFN when <arch>.expert_count > 0 (llama: Mixtral) */
    KLD_MOE_ALWAYS = 2    /* every layer is MoE; expert_count is required */
} kld_moe_kind;

typedef struct kld_arch_switches {
    const char *name;         /* GGUF general.architecture spelling */
    kld_rope_type rope_type;  /* RoPE layout of the GGUF weights */
    kld_act act;
    bool fused_qkv;           /* attn_qkv = [q; k; v] rows (phi3) */
    bool fused_gate_up;       /* ffn_up = [gate; up] rows, no ffn_gate (phi3) */
    bool qk_norm;             /* per-head RMSNorm on q and k before RoPE (qwen3, gemma3) */
    bool post_norms;          /* post_attention_norm and post_ffw_norm (gemma2, gemma3) */
    bool embd_scale;          /* token embedding × sqrt(n_embd) (gemma family) */
    bool qkv_bias_required;   /* attn_q/k/v biases must exist (qwen2) */
    int swa_pattern;          /* -1: no sliding window; 0: every layer; p: layer il slides iff il % p < p - 1 */
    double swa_rope_freq_base;/* RoPE base of sliding layers, unscaled; 0: the model's base and scale (gemma3: 1e4) */
    int64_t swa_default_window; /* GGUF window when the key is absent (gemma2: 4096) */
    bool qk_norm_full;        /* RMSNorm over the whole q row and k row before RoPE (olmoe) */
    kld_moe_kind moe;         /* mixture-of-experts FFN: never, when expert_count > 0, always */
    bool moe_norm_w;          /* the top-k router weights are renormalised to sum 1 (mixtral, qwen3moe) */
    bool moe_shared_expert;   /* plus a shared expert gated by sigmoid(ffn_gate_inp_shexp · x) (qwen2moe) */
    bool attn_out_gate;       /* attn_q rows are [q; gate] per head; the attention output is
                                 multiplied by sigmoid(gate) before attn_output (qwen3next) */
    bool moe_ff_per_used;     /* expert_feed_forward_length defaults to n_ff / expert_used_count
                                 (qwen2moe, qwen3moe), else to n_ff */
    kld_moe_gating moe_gating;/* router → experts and weights */
    bool moe_ff_required;     /* expert_feed_forward_length is required (gpt-oss) */
    bool moe_biases;          /* biases on the router and on every expert's gate, up and down (gpt-oss) */
    bool out_bias_required;   /* attn_output.bias must exist (gpt-oss) */
    bool qk_norm_optional;    /* per-head q/k RMSNorms when the file has them (glm4moe) */
    bool moe_shexp_ungated;   /* the shared expert is added as is (expert_shared_count of n_ff_exp
                                 wide experts, no ffn_gate_inp_shexp: glm4moe) */
    bool mla;                 /* multi-head latent attention (deepseek2): q from attn_q or
                                 attn_q_a / attn_q_a_norm / attn_q_b, the latent kv from attn_kv_a_mqa
                                 and attn_kv_a_norm decompressed per head by attn_kv_b; RoPE on the
                                 last n_rot dims of each q/k head (k's shared by all heads) */
    bool attn_sinks;          /* attn_sinks [n_head]: one more logit per head in the softmax's
                                 denominator, attending to nothing (gpt-oss) */
    /* Gemma 4 (llama.cpp src/models/gemma4.cpp): */
    bool v_norm;              /* V rows RMS-normalised per head, without a weight */
    bool v_from_k;            /* attn_v optional: without it V is K's projection (before K's norm) */
    bool layer_out_scale;     /* optional blk.N.layer_output_scale [1] multiplies the layer's output */
    bool rope_freqs_full_only;/* rope_freqs divides the frequencies of the full (non-sliding) layers only */
    bool moe_beside_dense;    /* the dense FFN runs beside the experts, each with its own norms; the router
                                 reads rms(x)/√n_embd · ffn_gate_inp.scale (Gemma 4 26B-A4B) */
    bool hf_fused_experts;    /* a safetensors checkpoint may hold the experts as transformers 5's
                                 mlp.experts.gate_up_proj / down_proj (the converter's Qwen2MoeModel
                                 and its subclasses: qwen2moe, qwen3moe, qwen3next, qwen35moe) */
    bool gguf_fused_experts;  /* a GGUF may hold each layer's experts' gate and up in one
                                 ffn_gate_up_exps (llama.cpp's create_tensor_gate_up_exps, written by
                                 the converter's --fuse-gate-up-exps): qwen35moe, qwen3next */
} kld_arch_switches;

/* The switches of the hybrid recurrent architectures, in a table of their
 * own (every other architecture gets the all-zero row). */
typedef struct kld_arch_hybrid {
    const char *name;
    kld_layer_kind recurrent_kind; /* the kind of the non-attention layers; ATTN: none */
    kld_tensor_id output_norm; /* the final norm; NONE: output_norm */
    const kld_name_map *hf_names; /* HF names that differ from the llama family's, {NONE, NULL} ended */
    kld_tensor_id ffn_norm;   /* the pre-FFN norm; NONE: ffn_norm */
    /* Qwen3.5's gated DeltaNet (src/models/qwen35.cpp) beside Qwen3-Next's: */
    bool dn_split_ba;         /* β and α from ssm_beta / ssm_alpha [n_embd, v heads] (v head order)
                                 instead of ssm_ba's per-q/k-head [b…, a…] groups */
    bool dn_v_tiled;          /* v head h reads q/k head h mod (q/k heads) (the converter's tiled
                                 order), not h / (v heads / q/k heads) */
    bool rope_sections;       /* <arch>.rope.dimension_sections (multi-section RoPE) is required; text
                                 positions are the same in every section, i.e. plain NeoX RoPE */
} kld_arch_hybrid;

/* The switches of a GGUF architecture name, or NULL when unsupported. */
const kld_arch_switches *kld_arch_find(const char *name);

/* The hybrid switches of an architecture name (never NULL). */
const kld_arch_hybrid *kld_arch_hybrid_find(const char *name);

/* Comma-separated list of supported names (for error messages). */
const char *kld_arch_supported(void);

#endif
