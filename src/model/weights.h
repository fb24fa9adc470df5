/* weights.h — the weight table of a model: every tensor the forward pass
 * reads, found by its GGUF name (or the Hugging Face name it maps to) and
 * checked against the shape the hyper-parameters imply. Tensors stay views
 * into the source's mapping. */
#ifndef KLD_MODEL_WEIGHTS_H
#define KLD_MODEL_WEIGHTS_H

#include "model/hparams.h"

/* One layer's mixture of experts. Each routed expert is seen as three 2-D
 * matrices gate[e], up[e] [n_embd, n_ff_exp] and down[e] [n_ff_exp, n_embd]:
 * views of slice e of the merged 3-D tensors, or the per-expert tensors of
 * older GGUFs and of Hugging Face checkpoints (the same values either way). */
typedef struct kld_moe_weights {
    const kld_tensor *gate_inp;          /* router [n_embd, n_expert] */
    const kld_tensor *gate_exps, *up_exps, *down_exps; /* merged [.., .., n_expert], or NULL */
    const kld_tensor **gate, **up, **down; /* n_expert entries each */
    const kld_tensor *gate_inp_shexp;    /* shared expert's gate [n_embd] (moe_shared_expert) */
    const kld_tensor *gate_shexp, *up_shexp; /* [n_embd, n_ff_shexp] */
    const kld_tensor *down_shexp;        /* [n_ff_shexp, n_embd] */
    const kld_tensor *gate_inp_b;        /* router bias [n_expert] (moe_biases) */
    const kld_tensor *gate_exps_b, *up_exps_b; /* [n_ff_exp, n_expert] (moe_biases) */
    const kld_tensor *down_exps_b;       /* [n_embd, n_expert] (moe_biases) */
    const kld_tensor *exp_probs_b;       /* [n_expert] selection bias (sigmoid gating) */
    /* beside a dense FFN (moe_beside_dense, Gemma 4 26B-A4B) */
    const kld_tensor *gate_inp_scale;    /* ffn_gate_inp.scale [n_embd]: multiplies the router's input */
    const kld_tensor *down_exps_scale;   /* ffn_down_exps.scale [n_expert]: each expert's output × it */
    const kld_tensor *pre_norm_2;        /* pre_ffw_norm_2 [n_embd]: the experts' input norm */
    const kld_tensor *post_norm_1, *post_norm_2; /* post_ffw_norm_1 / _2 [n_embd]: dense / experts' output */
} kld_moe_weights;

typedef struct kld_layer_weights {
    const kld_tensor *attn_norm;   /* [n_embd] */
    const kld_tensor *attn_q, *attn_k, *attn_v; /* [n_embd, n_head·hd], [n_embd, n_kv·hd], [n_embd, n_kv·hd_v]
                                                   (attn_v NULL with v_from_k: V is K's projection) */
    const kld_tensor *attn_qkv;    /* fused [n_embd, n_head·hd + n_kv·(hd + hd_v)] (instead of q/k/v) */
    const kld_tensor *bq, *bk, *bv, *bqkv, *bo; /* optional biases */
    const kld_tensor *attn_q_norm, *attn_k_norm; /* [hd] (qk_norm); [n_head·hd], [n_kv·hd] (qk_norm_full) */
    const kld_tensor *attn_output; /* [n_head·hd_v, n_embd] */
    const kld_tensor *attn_post_norm; /* [n_embd] (post_norms) */
    const kld_tensor *attn_sinks;  /* [n_head] (attn_sinks) */
    /* MLA (sw.mla), R = kv_lora_rank, nope = head_dim - n_rot */
    const kld_tensor *attn_q_a;       /* [n_embd, q_lora_rank] (q_lora_rank > 0, else attn_q) */
    const kld_tensor *attn_q_a_norm;  /* [q_lora_rank] */
    const kld_tensor *attn_q_b;       /* [q_lora_rank, n_head·head_dim] */
    const kld_tensor *attn_kv_a_mqa;  /* [n_embd, R + n_rot]: latent kv, then the shared k_pe */
    const kld_tensor *attn_kv_a_norm; /* [R] */
    const kld_tensor *attn_kv_b;      /* [R, n_head·(nope + head_dim_v)]: per head k_nope, v */
    const kld_tensor *ffn_norm;    /* [n_embd] */
    const kld_tensor *ffn_gate, *ffn_up; /* [n_embd, n_ff]; fused up: [n_embd, 2·n_ff] and no gate */
    const kld_tensor *ffn_down;    /* [n_ff, n_embd] */
    const kld_tensor *b_gate, *b_up, *b_down; /* optional biases */
    const kld_tensor *ffn_post_norm; /* [n_embd] (post_norms) */
    const kld_tensor *out_scale;   /* optional [1]: the layer's output × this (layer_out_scale) */
    /* per-layer embeddings (Gemma 4 E2B/E4B, P = n_embd_per_layer) */
    const kld_tensor *ple_inp_gate;  /* inp_gate [n_embd, P] */
    const kld_tensor *ple_proj;      /* proj [P, n_embd] */
    const kld_tensor *ple_post_norm; /* post_norm [n_embd] */
    /* short-convolution layers (LFM2) instead of the attention tensors */
    const kld_tensor *shortconv_conv;     /* [L, n_embd] depthwise kernel (HF: [L, 1, n_embd]) */
    const kld_tensor *shortconv_in_proj;  /* [n_embd, 3·n_embd]: rows B, C, x */
    const kld_tensor *shortconv_out_proj; /* [n_embd, n_embd] */
    /* gated DeltaNet layers (Qwen3-Next) instead of the attention tensors;
     * kd = q/k heads × head_k, vd = v heads × head_v, C = 2·kd + vd */
    const kld_tensor *dn_qkv;      /* attn_qkv [n_embd, C]: rows q (kd), k (kd), v (vd) */
    const kld_tensor *dn_gate;     /* attn_gate [n_embd, vd]: z of the output gate */
    const kld_tensor *dn_conv;     /* ssm_conv1d [conv_kernel, C] depthwise causal kernel */
    const kld_tensor *dn_dt;       /* ssm_dt.bias [v heads] */
    const kld_tensor *dn_a;        /* ssm_a [v heads] = −exp(A_log) */
    const kld_tensor *dn_ba;       /* ssm_ba [n_embd, 2·v heads]: per q/k head, r b then r a */
    const kld_tensor *dn_beta, *dn_alpha; /* ssm_beta, ssm_alpha [n_embd, v heads] (dn_split_ba) */
    const kld_tensor *dn_norm;     /* ssm_norm [head_v] gated RMSNorm weight */
    const kld_tensor *dn_out;      /* ssm_out [vd, n_embd] */
    kld_moe_weights moe;           /* n_expert > 0 (then ffn_gate/up/down are NULL) */
} kld_layer_weights;

typedef struct kld_weights {
    const kld_tensor *token_embd;  /* [n_embd, n_vocab] */
    const kld_tensor *output_norm; /* [n_embd] */
    const kld_tensor *output;      /* [n_embd, n_vocab]; token_embd when tied */
    const kld_tensor *rope_freqs;  /* optional [n_rot/2] (llama3 long context) */
    const kld_tensor *rope_long, *rope_short; /* optional [n_rot/2] (LongRoPE) */
    /* per-layer embeddings (n_embd_per_layer P > 0): a token's P values for every layer */
    const kld_tensor *ple_token_embd; /* per_layer_token_embd [P·n_layer, n_vocab] */
    const kld_tensor *ple_model_proj; /* per_layer_model_proj [n_embd, P·n_layer] */
    const kld_tensor *ple_proj_norm;  /* per_layer_proj_norm [P] */
    int64_t n_layer;
    kld_layer_weights *layers;     /* n_layer entries, owned */
    const kld_tensor **expert_slots; /* n_layer·3·n_expert pointers (moe.gate/up/down), owned */
    kld_tensor *expert_views;      /* the same count of slice views of merged tensors, owned */
    int64_t n_expert;
    kld_tensor *dn_derived;        /* DeltaNet tensors rebuilt at load (weights_deltanet.c), owned */
    void **dn_owned;               /* their buffers */
    kld_tensor *oss_derived;       /* gpt-oss experts rebuilt from a checkpoint (weights_gptoss.c), owned */
    void **oss_owned;              /* their buffers */
    kld_tensor *rope_freqs_derived; /* rope_freqs generated as the converter does (Gemma 4 from
                                       config.json: hp->rope_freqs_rot_pairs), owned with its name
                                       and values; then w->rope_freqs */
} kld_weights;

/* Finds and checks every tensor. A missing tensor or a wrong shape is an
 * error naming the tensor (and its file name) and the expected shape; a
 * weight type without a dequantizer is KLD_ERR_UNSUPPORTED. */
kld_status kld_weights_bind(const kld_source *src, const kld_hparams *hp, kld_weights *w,
                            kld_error *err);
void kld_weights_free(kld_weights *w);

/* Qwen3-Next layer il (weights_deltanet.c): when the source keeps the
 * projection fused as [q, k, v, z] per q/k head (Hugging Face in_proj_qkvz,
 * legacy GGUF ssm_in), sets L->dn_qkv and L->dn_gate to split copies (and,
 * for Hugging Face, L->dn_a = −exp(A_log) and L->dn_dt = dt_bias); leaves
 * them NULL when the source has today's attn_qkv / attn_gate. */
kld_status kld_weights_dn_derive(const kld_source *src, const kld_hparams *hp, int il,
                                 kld_layer_weights *L, kld_weights *w, kld_error *err);
/* deepseek2 layer il with the absorbed MLA tensors attn_k_b / attn_v_b: *out = an
 * owned f32 attn_kv_b rebuilt from them (weights_deltanet.c's derived store). */
kld_status kld_weights_mla_kv_b(const kld_source *src, const kld_hparams *hp, int il, const kld_tensor *kb,
                                const kld_tensor *vb, kld_weights *w, const kld_tensor **out, kld_error *err);
void kld_weights_dn_free(kld_weights *w);
/* Whether t is one of those rebuilt tensors (freed with the table). */
bool kld_weights_dn_owns(const kld_weights *w, const kld_tensor *t);

/* gpt-oss layer il from a Hugging Face checkpoint (weights_gptoss.c): the merged
 * ffn_{gate,up,down}_exps (MXFP4 blocks moved bit for bit from *_blocks / *_scales,
 * or float tensors transposed) and their biases, gate and up de-interleaved, into M. */
kld_status kld_weights_gptoss_hf(const kld_source *src, const kld_hparams *hp, int il, kld_moe_weights *M,
                                 kld_weights *w, kld_error *err);
/* The buffer of t when it is one of those rebuilt tensors (the caller owns it from now
 * on; t->data stays valid), else NULL. */
void *kld_weights_gptoss_take(kld_weights *w, const kld_tensor *t);
void kld_weights_gptoss_free(kld_weights *w);

/* Re-derives the per-expert slice views of every merged 3-D expert tensor
 * (after the merged tensors were replaced, e.g. quantized on load). */
void kld_weights_moe_refresh(kld_weights *w);

/* The name a GGUF-named tensor has in the source (Hugging Face names for
 * safetensors, the GGUF name otherwise), written to buf. */
const char *kld_weights_source_name(const kld_source *src, const kld_hparams *hp,
                                    const char *gguf_name, char *buf, size_t cap);

/* The Hugging Face name of a GGUF-named tensor ("blk.0.attn_q.weight" →
 * PREFIX "model.layers.0.self_attn.q_proj.weight"); names without an HF
 * counterpart are copied unchanged. src (may be NULL: no mixture-of-experts
 * names) is probed for the checkpoint's expert layout. */
const char *kld_weights_hf_name(const kld_source *src, const kld_hparams *hp, const char *gguf_name,
                                const char *prefix, char *buf, size_t cap);

#endif
