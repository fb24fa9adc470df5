/* gguf_names.h — every GGUF tensor name and metadata key kldeval reads or
 * writes, in three tables: tensor base names (blk.%d.…: %d is the layer; a
 * second %d the expert of the per-expert names of older files), the keys
 * of an architecture ("%s." + suffix, %s the architecture) and the keys
 * outside any architecture (general.*, tokenizer.*, quantize.*, adapter.*).
 * They are spelled as llama.cpp spells them (gguf-py/gguf/constants.py,
 * src/llama-arch.cpp); test_gguf_names checks every row against a copy of
 * those tables (tests/data/gguf-names.txt), and the weight binder, the
 * hyper-parameter readers, the Hugging Face converter and the policy
 * walker take their names from here. */
#ifndef KLD_MODEL_GGUF_NAMES_H
#define KLD_MODEL_GGUF_NAMES_H

#include <stddef.h>

/* ID, base name (llama.cpp's LLM_TENSOR_* / gguf-py MODEL_TENSOR.* name). */
#define KLD_GGUF_TENSOR_LIST(X)                                                                       \
    X(TOKEN_EMBD, "token_embd")                                                                       \
    X(TOKEN_EMBD_NORM, "token_embd_norm")                                                             \
    X(OUTPUT_NORM, "output_norm")                                                                     \
    X(OUTPUT, "output")                                                                               \
    X(ROPE_FREQS, "rope_freqs")                                                                       \
    X(ROPE_FACTORS_LONG, "rope_factors_long")                                                         \
    X(ROPE_FACTORS_SHORT, "rope_factors_short")                                                       \
    X(ATTN_NORM, "blk.%d.attn_norm")                                                                  \
    X(ATTN_Q, "blk.%d.attn_q")                                                                        \
    X(ATTN_K, "blk.%d.attn_k")                                                                        \
    X(ATTN_V, "blk.%d.attn_v")                                                                        \
    X(ATTN_QKV, "blk.%d.attn_qkv")                                                                    \
    X(ATTN_OUT, "blk.%d.attn_output")                                                                 \
    X(ATTN_Q_NORM, "blk.%d.attn_q_norm")                                                              \
    X(ATTN_K_NORM, "blk.%d.attn_k_norm")                                                              \
    X(ATTN_GATE, "blk.%d.attn_gate")                                                                  \
    X(ATTN_POST_NORM, "blk.%d.post_attention_norm")                                                   \
    X(ATTN_SINKS, "blk.%d.attn_sinks")                                                                \
    X(ATTN_Q_A, "blk.%d.attn_q_a")                                                                    \
    X(ATTN_Q_A_NORM, "blk.%d.attn_q_a_norm")                                                          \
    X(ATTN_Q_B, "blk.%d.attn_q_b")                                                                    \
    X(ATTN_KV_A_MQA, "blk.%d.attn_kv_a_mqa")                                                          \
    X(ATTN_KV_A_NORM, "blk.%d.attn_kv_a_norm")                                                        \
    X(ATTN_KV_B, "blk.%d.attn_kv_b")                                                                  \
    X(ATTN_K_B, "blk.%d.attn_k_b")                                                                    \
    X(ATTN_V_B, "blk.%d.attn_v_b")                                                                    \
    X(LAYER_OUT_SCALE, "blk.%d.layer_output_scale")                                                   \
    X(PER_LAYER_TOKEN_EMBD, "per_layer_token_embd")                                                   \
    X(PER_LAYER_MODEL_PROJ, "per_layer_model_proj")                                                   \
    X(PER_LAYER_PROJ_NORM, "per_layer_proj_norm")                                                     \
    X(PER_LAYER_INP_GATE, "blk.%d.inp_gate")                                                          \
    X(PER_LAYER_PROJ, "blk.%d.proj")                                                                  \
    X(PER_LAYER_POST_NORM, "blk.%d.post_norm")                                                        \
    X(FFN_NORM, "blk.%d.ffn_norm")                                                                    \
    X(FFN_GATE, "blk.%d.ffn_gate")                                                                    \
    X(FFN_UP, "blk.%d.ffn_up")                                                                        \
    X(FFN_DOWN, "blk.%d.ffn_down")                                                                    \
    X(FFN_POST_NORM, "blk.%d.post_ffw_norm")                                                          \
    X(FFN_PRE_NORM_2, "blk.%d.pre_ffw_norm_2")                                                        \
    X(FFN_POST_NORM_1, "blk.%d.post_ffw_norm_1")                                                      \
    X(FFN_POST_NORM_2, "blk.%d.post_ffw_norm_2")                                                      \
    X(FFN_GATE_INP, "blk.%d.ffn_gate_inp")                                                            \
    X(FFN_GATE_EXPS, "blk.%d.ffn_gate_exps")                                                          \
    X(FFN_UP_EXPS, "blk.%d.ffn_up_exps")                                                              \
    X(FFN_DOWN_EXPS, "blk.%d.ffn_down_exps")                                                          \
    X(FFN_GATE_UP_EXPS, "blk.%d.ffn_gate_up_exps")                                                    \
    X(FFN_GATE_EXP, "blk.%d.ffn_gate.%d")                                                             \
    X(FFN_UP_EXP, "blk.%d.ffn_up.%d")                                                                 \
    X(FFN_DOWN_EXP, "blk.%d.ffn_down.%d")                                                             \
    X(FFN_GATE_INP_SHEXP, "blk.%d.ffn_gate_inp_shexp")                                                \
    X(FFN_EXP_PROBS_B, "blk.%d.exp_probs_b")                                                          \
    X(FFN_GATE_SHEXP, "blk.%d.ffn_gate_shexp")                                                        \
    X(FFN_UP_SHEXP, "blk.%d.ffn_up_shexp")                                                            \
    X(FFN_DOWN_SHEXP, "blk.%d.ffn_down_shexp")                                                        \
    X(SHORTCONV_CONV, "blk.%d.shortconv.conv")                                                        \
    X(SHORTCONV_INPROJ, "blk.%d.shortconv.in_proj")                                                   \
    X(SHORTCONV_OUTPROJ, "blk.%d.shortconv.out_proj")                                                 \
    X(SSM_IN, "blk.%d.ssm_in")                                                                        \
    X(SSM_CONV1D, "blk.%d.ssm_conv1d")                                                                \
    X(SSM_DT, "blk.%d.ssm_dt")                                                                        \
    X(SSM_A, "blk.%d.ssm_a")                                                                          \
    X(SSM_BETA_ALPHA, "blk.%d.ssm_ba")                                                                \
    X(SSM_BETA, "blk.%d.ssm_beta")                                                                    \
    X(SSM_ALPHA, "blk.%d.ssm_alpha")                                                                  \
    X(SSM_NORM, "blk.%d.ssm_norm")                                                                    \
    X(SSM_OUT, "blk.%d.ssm_out")

/* ID, key suffix after "<arch>." (llama.cpp's LLM_KV_* / gguf-py Keys). */
#define KLD_GGUF_ARCH_KEY_LIST(X)                                                                     \
    X(VOCAB_SIZE, "vocab_size")                                                                       \
    X(CONTEXT_LENGTH, "context_length")                                                               \
    X(EMBEDDING_LENGTH, "embedding_length")                                                           \
    X(BLOCK_COUNT, "block_count")                                                                     \
    X(FEED_FORWARD_LENGTH, "feed_forward_length")                                                     \
    X(ATTN_SOFTCAP, "attn_logit_softcapping")                                                         \
    X(FINAL_SOFTCAP, "final_logit_softcapping")                                                       \
    X(HEAD_COUNT, "attention.head_count")                                                             \
    X(HEAD_COUNT_KV, "attention.head_count_kv")                                                       \
    X(KEY_LENGTH, "attention.key_length")                                                             \
    X(VALUE_LENGTH, "attention.value_length")                                                         \
    X(RMS_EPS, "attention.layer_norm_rms_epsilon")                                                    \
    X(SLIDING_WINDOW, "attention.sliding_window")                                                     \
    X(SLIDING_WINDOW_PATTERN, "attention.sliding_window_pattern")                                     \
    X(RECURRENT_LAYERS, "attention.recurrent_layers")                                                 \
    X(ROPE_DIMENSION_COUNT, "rope.dimension_count")                                                   \
    X(ROPE_DIMENSION_SECTIONS, "rope.dimension_sections")                                             \
    X(ROPE_FREQ_BASE, "rope.freq_base")                                                               \
    X(ROPE_FREQ_BASE_SWA, "rope.freq_base_swa")                                                       \
    X(ROPE_DIMENSION_COUNT_SWA, "rope.dimension_count_swa")                                           \
    X(KEY_LENGTH_SWA, "attention.key_length_swa")                                                     \
    X(VALUE_LENGTH_SWA, "attention.value_length_swa")                                                 \
    X(SHARED_KV_LAYERS, "attention.shared_kv_layers")                                                 \
    X(EMBD_LENGTH_PER_LAYER, "embedding_length_per_layer_input")                                      \
    X(ROPE_SCALE_LINEAR, "rope.scale_linear")                                                         \
    X(ROPE_SCALING_TYPE, "rope.scaling.type")                                                         \
    X(ROPE_SCALING_FACTOR, "rope.scaling.factor")                                                     \
    X(ROPE_SCALING_ATTN_FACTOR, "rope.scaling.attn_factor")                                           \
    X(ROPE_SCALING_ORIG_CTX, "rope.scaling.original_context_length")                                  \
    X(ROPE_SCALING_YARN_LOG_MUL, "rope.scaling.yarn_log_multiplier")                                  \
    X(Q_LORA_RANK, "attention.q_lora_rank")                                                           \
    X(KV_LORA_RANK, "attention.kv_lora_rank")                                                         \
    X(KEY_LENGTH_MLA, "attention.key_length_mla")                                                     \
    X(VALUE_LENGTH_MLA, "attention.value_length_mla")                                                 \
    X(EXPERT_COUNT, "expert_count")                                                                   \
    X(EXPERT_USED_COUNT, "expert_used_count")                                                         \
    X(EXPERT_FF_LENGTH, "expert_feed_forward_length")                                                 \
    X(EXPERT_SHARED_FF_LENGTH, "expert_shared_feed_forward_length")                                   \
    X(EXPERT_SHARED_COUNT, "expert_shared_count")                                                     \
    X(EXPERT_WEIGHTS_SCALE, "expert_weights_scale")                                                   \
    X(EXPERT_WEIGHTS_NORM, "expert_weights_norm")                                                     \
    X(EXPERT_GATING_FUNC, "expert_gating_func")                                                       \
    X(LEADING_DENSE_BLOCK_COUNT, "leading_dense_block_count")                                         \
    X(EXPERT_GROUP_COUNT, "expert_group_count")                                                       \
    X(EXPERT_GROUP_USED_COUNT, "expert_group_used_count")                                             \
    X(FULL_ATTENTION_INTERVAL, "full_attention_interval")                                             \
    X(NEXTN_PREDICT_LAYERS, "nextn_predict_layers")                                                   \
    X(SSM_CONV_KERNEL, "ssm.conv_kernel")                                                             \
    X(SSM_STATE_SIZE, "ssm.state_size")                                                               \
    X(SSM_GROUP_COUNT, "ssm.group_count")                                                             \
    X(SSM_TIME_STEP_RANK, "ssm.time_step_rank")                                                       \
    X(SSM_INNER_SIZE, "ssm.inner_size")                                                               \
    X(SHORTCONV_L_CACHE, "shortconv.l_cache")

/* Keys of no architecture, spelled out (read by src/io, src/tokenizer,
 * src/engine/lora*.c, written by src/quant and src/synth). */
#define KLD_GGUF_GLOBAL_KEY_LIST(X)                                                                   \
    X("general.architecture") X("general.name") X("general.type") X("general.file_type")              \
    X("general.alignment") X("general.quantization_version")                                          \
    X("tokenizer.ggml.model") X("tokenizer.ggml.pre") X("tokenizer.ggml.tokens")                      \
    X("tokenizer.ggml.scores") X("tokenizer.ggml.token_type") X("tokenizer.ggml.merges")              \
    X("tokenizer.ggml.bos_token_id") X("tokenizer.ggml.eos_token_id")                                 \
    X("tokenizer.ggml.unknown_token_id") X("tokenizer.ggml.seperator_token_id")                       \
    X("tokenizer.ggml.padding_token_id") X("tokenizer.ggml.eot_token_id")                             \
    X("tokenizer.ggml.eom_token_id") X("tokenizer.ggml.fim_pre_token_id")                             \
    X("tokenizer.ggml.fim_suf_token_id") X("tokenizer.ggml.fim_mid_token_id")                         \
    X("tokenizer.ggml.fim_pad_token_id") X("tokenizer.ggml.fim_rep_token_id")                         \
    X("tokenizer.ggml.fim_sep_token_id") X("tokenizer.ggml.add_bos_token")                            \
    X("tokenizer.ggml.add_eos_token") X("tokenizer.ggml.add_sep_token")                               \
    X("tokenizer.ggml.add_space_prefix") X("tokenizer.ggml.normalizer.lowercase")                     \
    X("tokenizer.ggml.normalizer.strip_accents") X("tokenizer.chat_template")                         \
    X("quantize.imatrix.file") X("quantize.imatrix.dataset") X("quantize.imatrix.entries_count")      \
    X("quantize.imatrix.chunks_count") X("adapter.type") X("adapter.lora.alpha")

typedef enum kld_tensor_id {
    KLD_T_NONE = 0, /* no tensor (a table's "use the default") */
#define KLD_X(id, name) KLD_T_##id,
    KLD_GGUF_TENSOR_LIST(KLD_X)
#undef KLD_X
    KLD_T_COUNT
} kld_tensor_id;

typedef enum kld_arch_key_id {
#define KLD_X(id, suffix) KLD_K_##id,
    KLD_GGUF_ARCH_KEY_LIST(KLD_X)
#undef KLD_X
    KLD_K_COUNT
} kld_arch_key_id;

/* The base-name pattern of a tensor ("blk.%d.attn_q"). */
const char *kld_tensor_pattern(kld_tensor_id id);
/* What follows "blk.%d." in a per-layer pattern ("attn_q"), or the whole
 * name of a global one ("token_embd"). */
const char *kld_tensor_suffix(kld_tensor_id id);
/* The name of tensor id in layer il (expert xid for the per-expert names),
 * with "." kind appended unless kind is NULL: "blk.3.attn_q.weight". */
const char *kld_tn(char *buf, size_t cap, kld_tensor_id id, long long il, long long xid,
                   const char *kind);

/* The suffix of an architecture key ("embedding_length"). */
const char *kld_arch_key_suffix(kld_arch_key_id id);
/* "<arch>.<suffix>" into buf. */
const char *kld_arch_key(char *buf, size_t cap, const char *arch, kld_arch_key_id id);

/* The global keys, NULL-terminated. */
extern const char *const kld_gguf_global_keys[];

#endif
