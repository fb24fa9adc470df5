/* hparams.h — normalised hyper-parameters of a model, read from GGUF
 * metadata, a Hugging Face config.json or a llama2.c header. Names follow
 * llama.cpp's: n_embd, n_layer, n_head, n_head_kv, n_ff, n_vocab. */
#ifndef KLD_MODEL_HPARAMS_H
#define KLD_MODEL_HPARAMS_H

#include "io/source.h"
#include "model/arch.h"

#define KLD_MAX_LAYER 4096

typedef struct kld_hparams {
    char arch[32];          /* "llama", "qwen2", "qwen3", "phi3", "gemma", "gemma2", "gemma3",
                               "qwen2moe", "olmoe", "qwen3moe" */
    char name[128];         /* general.name or the folder name */
    int64_t n_embd;
    int64_t n_layer;
    int64_t n_head;
    int64_t n_head_kv;
    int64_t head_dim;       /* per-head size of q/k (key_length) */
    int64_t head_dim_v;     /* per-head size of v (value_length) */
    int64_t n_ff;
    int64_t n_vocab;        /* rows of token_embd */
    int64_t n_ctx_train;
    int64_t n_rot;          /* dims rotated by RoPE (usually head_dim) */
    kld_rope_type rope_type;/* layout of the q/k rows in THIS file (HF llama: NEOX) */
    double rope_freq_base;
    double rope_freq_scale; /* 1/linear factor; 1.0 = none */
    char rope_scaling[16];  /* "none", "linear", "llama3", "longrope", "yarn", "dynamic" */
    double norm_eps;
    bool tied_output;       /* no separate output.weight: the embedding is reused */
    double attn_softcap;    /* 0 = off */
    double final_softcap;   /* 0 = off */
    int64_t sliding_window; /* 0 = off; key j is masked for query i when i - j >= window */

    /* Added by the engine helper (all filled by kld_hparams_read). */
    kld_arch_switches sw;   /* the architecture's switch row (copy) */
    int swa_pattern;        /* -1 never; 0 every layer; p: layer il slides iff il % p < p - 1;
                               -2: layer_swa was given layer by layer */
    uint8_t layer_swa[KLD_MAX_LAYER]; /* 1: layer il uses the window (filled from swa_pattern) */
    double rope_freq_base_swa;  /* RoPE base / scale of the sliding layers */
    double rope_freq_scale_swa;
    double rope_attn_factor;    /* multiplies cos and sin (LongRoPE); 1 = none */
    int64_t rope_orig_ctx;      /* original (pre-extension) context; 0 = unknown */
    double rope_factor;         /* llama3 / longrope "factor"; 0 = unused */
    double rope_low_freq_factor;  /* llama3 rope_scaling (HF config only) */
    double rope_high_freq_factor;
    /* YaRN (rope_scaling = "yarn"): ramp between the correction dims of
     * beta_fast and beta_slow rotations over rope_orig_ctx positions; the
     * magnitude correction is already folded into rope_attn_factor. */
    double rope_yarn_beta_fast, rope_yarn_beta_slow;
    bool rope_yarn_truncate;  /* floor/ceil the correction dims (ggml always; HF "truncate") */
    bool rope_yarn_hf_ramp;   /* HF's ramp guard (max += 0.001 iff equal) instead of ggml's max(0.001, d) */
    double attn_scale;      /* multiplies q·k before any soft-cap (1/sqrt(head_dim) by default) */
    double embd_scale;      /* multiplies the token embedding (gemma: sqrt(n_embd)); 1 = none */
    double norm_weight_offset; /* added to RMSNorm weights at load (HF Gemma stores w - 1) */

    /* Hybrid recurrent layouts (hparams_recurrent.c). */
    kld_arch_hybrid hy;     /* the architecture's hybrid switches (copy) */
    uint8_t layer_kind[KLD_MAX_LAYER]; /* kld_layer_kind of layer il (all ATTN by default) */
    int64_t n_layer_attn;   /* layers of kind ATTN (the ones with a KV cache) */
    int64_t shortconv_l_cache; /* LFM2 conv width L (the state keeps L - 1 inputs); 0: none */
    /* gated DeltaNet layers (Qwen3-Next; hparams_deltanet.c), 0 without them */
    int64_t dn_conv;        /* ssm.conv_kernel: causal conv width over [q; k; v] */
    int64_t dn_n_k_heads;   /* ssm.group_count: q/k heads */
    int64_t dn_n_v_heads;   /* ssm.time_step_rank: v heads (a multiple of the q/k heads) */
    int64_t dn_head_k;      /* ssm.state_size: q/k head size */
    int64_t dn_head_v;      /* ssm.inner_size / v heads: v head size */
    int64_t rope_sections[4]; /* rope.dimension_sections (hy.rope_sections), else 0 */
    /* Mixture of experts (all 0 for a dense model; see hparams_moe.c). */
    int64_t n_expert;       /* <arch>.expert_count / num_local_experts / num_experts */
    int64_t n_expert_used;  /* <arch>.expert_used_count / num_experts_per_tok */
    int64_t n_ff_exp;       /* rows of one routed expert's gate/up */
    int64_t n_ff_shexp;     /* rows of the shared expert's gate/up (moe_shared_expert) */
    bool moe_norm_w;        /* top-k router weights renormalised (switch, or HF norm_topk_prob) */
    double moe_w_scale;     /* expert_weights_scale: the weights multiplied after (0 and 1: none) */
    kld_moe_gating moe_gating; /* the switch, or <arch>.expert_gating_func */
    int64_t n_layer_dense_lead; /* leading_dense_block_count: layers before it have a dense FFN */
    int64_t n_expert_groups;   /* expert_group_count: > 1 routes within the best groups (DeepSeek V3) */
    int64_t n_group_used;      /* expert_group_used_count: groups kept, by their two best scores */
    /* Multi-head latent attention (sw.mla; hparams_mla.c): head_dim is the q/k head
     * (n_rot rope dims last), head_dim_v the v head, n_head_kv = n_head */
    int64_t n_lora_q;       /* attention.q_lora_rank: 0 = plain attn_q */
    int64_t n_lora_kv;      /* attention.kv_lora_rank: the latent kv width */
    double rope_yarn_log_mul; /* rope.scaling.yarn_log_multiplier / 0.1 (DeepSeek's mscale_all_dim) */
    bool mla_absorbed;      /* the file has attn_k_b / attn_v_b (key_length_mla): rebuilt into attn_kv_b */
    /* Per-layer geometry (Gemma 4, hparams_gemma4.c; read through the kld_hp_* accessors
     * below, which give the model-wide values where these are 0). */
    int64_t head_dim_swa;   /* key_length_swa = value_length_swa of the sliding layers */
    int64_t n_rot_swa;      /* rope.dimension_count_swa */
    int32_t layer_n_head_kv[KLD_MAX_LAYER]; /* head_count_kv given per layer */
    int32_t layer_n_ff[KLD_MAX_LAYER];      /* feed_forward_length given per layer */
    int64_t n_layer_kv;     /* shared_kv_layers > 0: layers from n_layer_kv on have no KV cache of their
                               own and read the last earlier layer's of their kind (0: every layer its own) */
    int64_t n_embd_per_layer; /* per-layer embedding width (Gemma 4 E2B/E4B), 0: none */
    int64_t rope_freqs_rot_pairs; /* Gemma 4 from config.json: the full layers' rotated pairs; rope_freqs is
                                     derived at load as the converter generates it (1 for these, 1e30 for
                                     the others); 0: none derived */
} kld_hparams;

/* Reads and validates the hyper-parameters; unknown architecture or a
 * missing/out-of-range field is an error naming the key and the file. */
kld_status kld_hparams_read(const kld_source *src, kld_hparams *hp, kld_error *err);

/* The mixing kind of layer il. */
kld_layer_kind kld_hparams_layer_kind(const kld_hparams *hp, int64_t il);
/* True when the layers' FFN is a mixture of experts. */
static inline bool kld_hparams_is_moe(const kld_hparams *hp) { return hp->n_expert > 0; }
/* True when layer il's FFN is the mixture of experts (not a leading dense layer). */
static inline bool kld_hparams_layer_moe(const kld_hparams *hp, int64_t il) {
    return hp->n_expert > 0 && il >= hp->n_layer_dense_lead;
}

/* True when layer il uses the sliding window. */
bool kld_hparams_layer_swa(const kld_hparams *hp, int64_t il);

/* Layer il's geometry (hparams_layer.c): its q/k and v head sizes, rotary
 * dims, KV heads and FFN width — the model's values unless Gemma 4's
 * per-layer keys say otherwise. */
int64_t kld_hp_head_dim(const kld_hparams *hp, int64_t il);
int64_t kld_hp_head_dim_v(const kld_hparams *hp, int64_t il);
int64_t kld_hp_n_rot(const kld_hparams *hp, int64_t il);
int64_t kld_hp_n_head_kv(const kld_hparams *hp, int64_t il);
int64_t kld_hp_n_ff(const kld_hparams *hp, int64_t il);
/* The layer whose KV cache layer il reads: il itself, or for a layer
 * sharing an earlier one's (shared_kv_layers) that layer. */
int64_t kld_hp_kv_source(const kld_hparams *hp, int64_t il);
static inline bool kld_hp_has_own_kv(const kld_hparams *hp, int64_t il) { return kld_hp_kv_source(hp, il) == il; }
/* The largest over the layers: q/k or v head size, rotary dims, FFN width,
 * floats of one row of [q; k; v] and of the attention output. */
int64_t kld_hp_max_head_dim(const kld_hparams *hp);
int64_t kld_hp_max_n_rot(const kld_hparams *hp);
int64_t kld_hp_max_n_ff(const kld_hparams *hp);
int64_t kld_hp_max_qkv(const kld_hparams *hp);
int64_t kld_hp_max_attn_out(const kld_hparams *hp);
/* The K and V values one position adds to the cache, all layers with a cache of their own. */
int64_t kld_hp_kv_values_per_token(const kld_hparams *hp);

#endif
