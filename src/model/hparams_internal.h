/* hparams_internal.h — what the hyper-parameter readers share inside
 * src/model: value checks, JSON field readers, and the two readers that
 * live in their own files (RoPE scaling, sliding-window layout). */
#ifndef KLD_MODEL_HPARAMS_INTERNAL_H
#define KLD_MODEL_HPARAMS_INTERNAL_H

#include "model/hparams.h"

kld_status kld_hp_check_positive(const char *path, const char *key, double v, kld_error *err);

/* config.json fields of obj; absent or null leaves *out untouched
 * (an error when required). */
kld_status kld_hp_json_int(const json_t *obj, const char *path, const char *key, bool required,
                           int64_t *out, kld_error *err);
kld_status kld_hp_json_num(const json_t *obj, const char *path, const char *key, bool required,
                           double *out, kld_error *err);
kld_status kld_hp_json_bool(const json_t *obj, const char *path, const char *key, bool *out,
                            kld_error *err);
/* config.json "layer_types": when present (*present), out[il] =
 * values[i] for layer il's name names[i] (n names); any other name is an
 * error listing the valid ones. */
kld_status kld_hp_json_layer_types(const json_t *cfg, const char *path, int64_t n_layer,
                                   const char *const *names, const uint8_t *values, int n,
                                   uint8_t *out, bool *present, kld_error *err);
/* Qwen MoE configs: "decoder_sparse_step" other than 1 and a non-empty
 * "mlp_only_layers" (dense layers between sparse ones) are refused. */
kld_status kld_hp_json_all_sparse(const json_t *cfg, const char *path, kld_error *err);

/* GGUF "<arch>.rope.scaling.*" (hparams_rope.c); runs after rope.freq_base,
 * rope.dimension_count and context_length are read. */
kld_status kld_hp_gguf_rope_scaling(const kld_source *src, kld_hparams *hp, kld_error *err);
/* config.json "rope_scaling" (hparams_rope.c). */
kld_status kld_hp_hf_rope_scaling(const json_t *cfg, const char *path, kld_hparams *hp,
                                  kld_error *err);

/* GGUF window, per-layer pattern and sliding-layer RoPE base (hparams_swa.c). */
kld_status kld_hp_gguf_swa(const kld_source *src, kld_hparams *hp, kld_error *err);
/* config.json sliding-window keys of each model_type (hparams_swa.c). */
kld_status kld_hp_hf_swa(const json_t *cfg, const char *path, const char *model_type,
                         kld_hparams *hp, kld_error *err);

/* Gemma 4's keys and the parts not run yet, refused by name (hparams_gemma4.c); runs
 * after the window pattern is read. */
kld_status kld_hp_gguf_gemma4(const kld_source *src, kld_hparams *hp, kld_error *err);
/* config.json of Gemma 4's language model (hparams_gemma4_hf.c): layer_types, the two head
 * sizes, KV heads per layer kind, KV sharing, the double-wide FFN, per-layer embeddings and
 * rope_parameters as llama.cpp's converter writes them; runs after the common keys. */
kld_status kld_hp_hf_gemma4(const json_t *cfg, const char *path, kld_hparams *hp, kld_error *err);
/* Layer kinds and recurrent sizes (hparams_recurrent.c). GGUF: the
 * per-layer "<arch>.attention.head_count_kv" (0 = recurrent layer) and
 * "<arch>.shortconv.l_cache"; replaces the plain head_count_kv read. */
kld_status kld_hp_gguf_recurrent(const kld_source *src, kld_hparams *hp, kld_error *err);
/* The same for gated-DeltaNet hybrids (hparams_deltanet.c): layer kinds
 * from full_attention_interval, the ssm.* sizes, one head_count_kv. */
kld_status kld_hp_gguf_deltanet(const kld_source *src, kld_hparams *hp, kld_error *err);
/* config.json of Qwen3-Next (hparams_deltanet_hf.c): the linear_* sizes,
 * layer_types / full_attention_interval, partial_rotary_factor's default,
 * the experts; runs after the common keys. */
kld_status kld_hp_hf_deltanet(const json_t *cfg, const char *path, kld_hparams *hp, kld_error *err);
/* Gated attention (sw.attn_out_gate) needs value_length == key_length. */
kld_status kld_hp_check_gated_attn(const char *path, const kld_hparams *hp, kld_error *err);
/* config.json: LFM2's own keys (norm_eps, block_ff_dim and its adjustment,
 * conv_L_cache, layer_types / full_attn_idxs, tie_embedding); runs after
 * the common keys. */
kld_status kld_hp_hf_recurrent(const json_t *cfg, const char *path, kld_hparams *hp,
                               kld_error *err);
/* Shared checks once every source is read (counts n_layer_attn). */
kld_status kld_hp_check_recurrent(const char *path, kld_hparams *hp, kld_error *err);
/* Mixture-of-experts keys (hparams_moe.c), read and checked after the
 * dense keys: GGUF <arch>.expert_*; config.json num_local_experts /
 * num_experts, num_experts_per_tok, moe_intermediate_size, ... */
kld_status kld_hp_gguf_moe(const kld_source *src, kld_hparams *hp, kld_error *err);
kld_status kld_hp_hf_moe(const json_t *cfg, const char *path, const char *model_type,
                         kld_hparams *hp, kld_error *err);

/* config.json of GLM-4.5 (hparams_moe_hf.c): partial_rotary_factor (default 0.5),
 * n_routed_experts, num_experts_per_tok, moe_intermediate_size, n_shared_experts,
 * first_k_dense_replace, norm_topk_prob, routed_scaling_factor, n_group / topk_group;
 * runs after the common keys. */
kld_status kld_hp_hf_glm4moe(const json_t *cfg, const char *path, kld_hparams *hp, kld_error *err);
/* config.json of gpt-oss (hparams_gptoss_hf.c): experts, window layout, YaRN as llama.cpp
 * runs the converted GGUF; runs after the common keys. */
kld_status kld_hp_hf_gptoss(const json_t *cfg, const char *path, kld_hparams *hp, kld_error *err);
/* config.json n_group / topk_group (hparams_moe_hf.c; group-limited routing, as
 * expert_group_count / expert_group_used_count): groups of at least two experts that
 * together hold the top k; runs after the expert counts are read. */
kld_status kld_hp_hf_expert_groups(const json_t *cfg, const char *path, kld_hparams *hp, kld_error *err);

/* Multi-head latent attention (sw.mla, hparams_mla.c): q_lora_rank, kv_lora_rank,
 * n_head_kv = n_head, the rope dims inside the head, YaRN's mscale in the
 * attention scale and the RoPE magnitude; runs after rope scaling and attn_scale. */
kld_status kld_hp_gguf_mla(const kld_source *src, kld_hparams *hp, kld_error *err);
/* The RoPE magnitude and attention scale llama.cpp's deepseek2 derives from
 * yarn_log_multiplier's stored value and rope.scaling.attn_factor (hparams_mla.c);
 * runs after rope scaling and head_dim are set. */
void kld_hp_mla_scales(kld_hparams *hp, double log_mul, double key_af);
/* config.json of DeepSeek V3 / R1 and V2 (hparams_mla_hf.c): the MLA sizes, experts,
 * routing and YaRN as llama.cpp's converter writes them; runs after the common keys,
 * rope scaling and attn_scale. */
kld_status kld_hp_hf_mla(const json_t *cfg, const char *path, kld_hparams *hp, kld_error *err);

#endif
