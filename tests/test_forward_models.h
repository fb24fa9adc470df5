/* test_forward_models.h — test-only helpers for the engine tests: a plain
 * double-precision reference forward written from the architectures'
 * definitions (independent of src/engine and src/model), small random
 * qwen3 / gemma3 GGUF synthesizers, and a Hugging Face (safetensors +
 * config.json) copy of a synthesized GGUF. */
#ifndef KLD_TEST_FORWARD_MODELS_H
#define KLD_TEST_FORWARD_MODELS_H

#include "common/common.h"
#include "io/gguf.h"

/* Logits [n][*n_vocab] of ids through the GGUF at path, recomputing the
 * whole prefix per call (no cache), everything in double. Returns NULL
 * (after a message) for an architecture it does not know. */
float *ref_forward(const char *gguf_path, const int32_t *ids, int64_t n, int64_t *n_vocab);

/* Semantics given by the caller instead of read from the GGUF (for the
 * config.json variants of the same weights). */
typedef struct ref_opts {
    int64_t window;        /* sliding window (0: none) */
    int moe_norm_w;        /* 0: the architecture's rule; 1: renormalise; -1: do not */
    bool naive_ties;       /* top-k by lowest index among equals (to show the tie rule matters) */
    const uint8_t *slides; /* per layer, 1 = sliding; NULL: the file's pattern */
    double yarn_factor;    /* > 0: YaRN with this factor, original context and magnitude */
    int64_t yarn_orig_ctx;
    double yarn_attn;
    int n_delta;           /* added to the named weights as read (merged LoRA) */
    const char *const *delta_names;
    const double *const *deltas; /* each the weight's size, ne[0] fastest */
} ref_opts;

float *ref_forward_opts(const char *gguf_path, const ref_opts *o, const int32_t *ids, int64_t n,
                        int64_t *n_vocab);
/* The GGUF tensor `name` as doubles (ne[0] fastest) plus opt's delta for it (NULL: none),
 * or NULL when the file lacks it: the float64 references' one way to read a weight. */
double *ref_tensor(const kld_gguf *g, const ref_opts *opt, const char *name);

/* The same for the hybrid recurrent architectures (lfm2), written from
 * transformers' modeling files (test_ref_hybrid.c); ref_forward calls it. */
float *ref_forward_hybrid(const char *gguf_path, const int32_t *ids, int64_t n, int64_t *n_vocab);
/* Gemma 4's float64 reference (per-layer head sizes, KV heads, FFN widths, shared KV
 * caches, per-layer embeddings), written from llama.cpp's gemma4 graph
 * (test_ref_gemma4.c); ref_forward calls it. */
float *ref_forward_gemma4(const char *gguf_path, const ref_opts *opt, const int32_t *ids, int64_t n,
                          int64_t *n_vocab);

typedef struct synth_shape {
    const char *arch;     /* "llama", "qwen2", "qwen3", "phi3", "gemma", "gemma2", "gemma3", ... */
    int64_t n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_vocab;
    int64_t sliding_window; /* gemma3 */
    double rope_base, rope_linear; /* rope_linear: factor (0 = none) */
    uint32_t mat_type;    /* type of 2-D weights (F32, F16, Q8_0, ...) */
    double llama3_factor; /* llama: Llama-3.x rope_scaling (rope_freqs.weight); 0 = none */
    double llama3_low, llama3_high;
    int64_t llama3_orig_ctx;
    bool tied;
    uint64_t seed;
    const char *drop_tensor; /* leave this tensor out (error tests), or NULL */
    const char *bad_shape_tensor; /* give this tensor one row too many, or NULL */
    const char *rename_from, *rename_to; /* write tensor rename_from under the name rename_to */
    const char *arch_override; /* general.architecture to write instead, or NULL */
    /* gemma3 layout keys (not written by real conversions) */
    bool write_pattern;    /* write <arch>.attention.sliding_window_pattern = pattern */
    int pattern;
    const uint8_t *pattern_flags; /* or write it as one flag per layer ... */
    int n_pattern_flags;   /* ... this many of them (0: n_layer; error tests) */
    double freq_base_swa;  /* > 0: write <arch>.rope.freq_base_swa */
    double yarn_factor;    /* > 0: rope.scaling.type = yarn with this factor */
    int64_t yarn_orig_ctx; /* > 0: rope.scaling.original_context_length */
    const char *rope_type_name; /* spelling of rope.scaling.type with yarn_factor (NULL: "yarn") */
    bool hf_bf16;          /* HF copy: 2-D tensors in BF16 */
    const char *hf_tail;   /* HF copy: config.json keys after tie_word_embeddings
                              (", \"k\": v, ..."), instead of the architecture's defaults */
    /* lfm2 */
    const char *layer_kinds; /* one letter per layer: 'c' short convolution, 'a' attention */
    int64_t l_cache;       /* convolution width of the tensors */
    int64_t l_cache_key;   /* lfm2.shortconv.l_cache written (0: l_cache; -1: none) */
    const int32_t *kv_array; /* head_count_kv entries to write instead of the kinds' */
    int n_kv_array;        /* ... this many (0: n_layer) */
    /* qwen3next: gated DeltaNet layers; layer il attends iff (il + 1) % dn_interval == 0 */
    int64_t dn_interval;   /* written as full_attention_interval (-1: not written, default 4) */
    int64_t dn_conv, dn_n_k_heads, dn_n_v_heads, dn_head; /* ssm.conv_kernel, group_count,
                              time_step_rank, state_size (q/k and v head size) */
    int64_t dn_inner_key;  /* ssm.inner_size written (0: n_v_heads · head; error tests) */
    const char *dn_skip_key; /* leave this "<arch>.<suffix>" key out (error tests), or NULL */
    const int32_t *dn_recurrent_flags; /* write attention.recurrent_layers (n_layer flags), or NULL */
    int64_t dn_nextn;      /* > 0: write nextn_predict_layers (error tests) */
    /* mixture of experts ("llama" with n_expert > 0 is Mixtral; "qwen2moe",
     * "olmoe", "qwen3moe" need n_expert) */
    int64_t n_expert, n_expert_used;
    int64_t n_ff_exp;      /* > 0: write <arch>.expert_feed_forward_length (qwen MoE) */
    int64_t n_ff_shexp;    /* qwen2moe: shared expert width (written as the key) */
    int64_t n_dense_lead;  /* glm4moe: leading_dense_block_count (dense FFN layers first) */
    int64_t n_shared;      /* glm4moe: expert_shared_count (shared expert n_shared · n_ff_exp wide) */
    double w_scale;        /* glm4moe: expert_weights_scale */
    /* deepseek2: MLA (head_dim is key_length = nope + mla_rope) */
    int64_t mla_q_lora;    /* attention.q_lora_rank (0: plain attn_q) */
    int64_t mla_kv_lora;   /* attention.kv_lora_rank */
    int64_t mla_rope;      /* rope.dimension_count: the rope dims at the end of each q/k head */
    int64_t mla_v;         /* attention.value_length */
    bool mla_absorbed;     /* attn_kv_b written split as attn_k_b / attn_v_b (the same numbers), with
                              key_length_mla / value_length_mla and llama.cpp's latent-cache keys */
    double yarn_log_mul;   /* > 0: rope.scaling.yarn_log_multiplier (0.1 · mscale_all_dim) */
    int64_t gating_func;   /* > 0: expert_gating_func written (deepseek2) */
    int64_t n_groups, n_group_used; /* > 0: expert_group_count / expert_group_used_count written */
    bool split_experts;    /* per-expert blk.N.ffn_gate.E.weight … instead of ffn_*_exps */
    bool exp_type_set;     /* the expert matrices in exp_type (gpt-oss: mxfp4) instead of mat_type */
    uint32_t exp_type;
    bool tie_router;       /* n_expert 3: router rows 1 = row 0 and 2 = 2·row 0 (tie tests) */
    bool hf_norm_topk;     /* HF copy: "norm_topk_prob" of the Qwen/OLMoE configs */
    int64_t key_used_override; /* > 0: write this expert_used_count instead (error tests) */
    int64_t n_ctx;         /* HF copy: max_position_embeddings (0: 4096) */
    double norm_eps;       /* HF copy: rms_norm_eps (0: 1e-6) */
    /* gemma2 (post-attention / post-FFN norms, no q/k norms) */
    double attn_softcap, final_softcap; /* > 0: written as <arch>.*_logit_softcapping */
    /* tokenizer.ggml.model "no_vocab" + <arch>.vocab_size: the least a GGUF
     * needs for llama.cpp to load it (the oracle files of tests/data/lcpp-oracle) */
    bool lcpp_vocab_keys;
    /* gemma4: the pattern is pattern_flags; attn_v is left out on the full layers (K is V) */
    int64_t g4_per_layer;  /* embedding_length_per_layer_input P: > 0 writes the per-layer embedding tensors */
    int64_t g4_shared_kv;  /* attention.shared_kv_layers: the last layers read earlier layers' KV caches */
    bool g4_shared_keep_kv;/* ... and still hold (unused) attn_k / attn_v / attn_k_norm */
    int64_t g4_head_swa;   /* the sliding layers' head size, key_length_swa / value_length_swa (0: head_dim) */
    int64_t g4_value_swa;  /* > 0: value_length_swa written apart (error tests) */
    int64_t g4_rot_swa;    /* rope.dimension_count_swa (0: the sliding head size) */
    int64_t g4_kv_full;    /* > 0: head_count_kv per layer, this many on the full layers */
    bool g4_wide_ff;       /* feed_forward_length per layer: 2 n_ff on the KV-sharing layers (use_double_wide_mlp) */
    bool g4_keep_v;        /* write attn_v on every layer */
    double qk_norm_w;      /* > 0: per-head q/k norm weights around this instead of 1 (Gemma 4's
                              attention scale is 1: the norms set the scores' spread w²·√head) */
} synth_shape;

void synth_default(synth_shape *s, const char *arch);
/* Gemma 4 with the E2B/E4B geometry at toy size (per-layer head sizes, KV heads and
 * FFN widths, shared KV caches, per-layer embeddings; test_synth_models.c). */
void synth_gemma4_e2b(synth_shape *s);

/* Writes the GGUF; false (after a message) on failure. */
bool synth_write_gguf(const synth_shape *s, const char *path);

/* Writes dir/model.safetensors (F32 or BF16, Hugging Face tensor names, Gemma
 * norms stored as w - 1, llama q/k rows in rotate-half order, phi3's fused
 * qkv_proj / gate_up_proj) and dir/config.json for the GGUF written by
 * synth_write_gguf with the same shape (or any llama, qwen2, qwen3, phi3,
 * gemma2 or gemma3 GGUF of that shape, with hf_tail for its config keys). */
bool synth_write_hf(const synth_shape *s, const char *gguf_path, const char *dir);

/* ---- comparing logit rows (shared by the forward tests) ---- */

/* n token ids below n_vocab from a seeded LCG. */
void tf_make_ids(int32_t *ids, int n, int64_t n_vocab, uint64_t seed);
/* A recurrent model's session: a reset forgets the previous sequence, and
 * without one the state of a prefix changes the next logits. */
void tf_check_reset(const char *label, const char *gguf, int64_t nv);
int64_t tf_argmax(const float *x, int64_t n); /* first index on ties */
double tf_lse(const float *x, int64_t n);     /* log-sum-exp in double */

typedef struct tf_cmp {
    double max_abs;  /* largest |a - b| (NaN propagates) */
    double mean_kld; /* mean over rows of KL(softmax(ref) || softmax(b)) */
    int same_argmax; /* rows whose argmax agree */
} tf_cmp;

tf_cmp tf_compare(const float *ref, const float *b, int64_t rows, int64_t nv);

/* Synthesizes s (its config.json copy when s->hf_tail is set) and checks
 * that opening it fails with an error containing want1 (and want2). */
void tf_expect_open_error(const char *label, const synth_shape *s, const char *want1,
                          const char *want2);

/* Logits [n][*n_vocab] of ids through the engine, fed in chunks of `chunk`
 * on `threads` threads (checks failures; NULL when the model does not open). */
/* quantize (file) and @POLICY (on load) to q8_0 of gguf: every matrix
 * converted, the KLD from the f32 model in (0, max_kld) on n_ids random ids,
 * both giving the same logits. */
void tf_check_quantize_q8_0(const char *arch, const char *gguf, int64_t n_vocab, int n_ids, double max_kld);
float *tf_engine_logits(const char *path, const int32_t *ids, int64_t n, int64_t chunk,
                        int threads, int64_t *n_vocab);
/* The same in one chunk with a session's levers ("attention=online", NULL:
 * the reference values). */
float *tf_engine_logits_levers(const char *path, const int32_t *ids, int64_t n, const char *levers, int threads,
                               int64_t *n_vocab);
/* The same in chunks of `chunk`, the last n_decode tokens decoded one at a time
 * (kld_session_decode). */
float *tf_engine_logits_run(const char *path, const int32_t *ids, int64_t n, const char *levers, int64_t chunk,
                            int64_t n_decode, int threads, int64_t *n_vocab);

/* Engine (one pass) vs the reference of gguf (max |d| <= 1e-3, argmax equal),
 * chunks of 1 and 7 and a prefill of 17 + decode steps bit-identical to the
 * one pass, for the model at path; returns the reference logits (caller
 * frees) or NULL. */
float *tf_check_path(const char *label, const char *path, const char *gguf, const ref_opts *o,
                     const int32_t *ids, int64_t n_ids);

#endif
