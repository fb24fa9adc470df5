/* engine.h — the forward pass as the rest of kldeval sees it: open a model,
 * create a session (KV cache + arena), feed token chunks, read logits.
 *
 * Ownership: kld_model_open → kld_model_close; kld_session_create →
 * kld_session_free (before closing its model); kld_pool_create →
 * kld_pool_free (after freeing every session that borrows it).
 *
 * Thread-safety: a model is read-only after opening and may back any
 * number of sessions. A session is used by one caller thread at a time.
 * A pool runs one parallel job at a time: sessions that share a pool must
 * not be evaluated concurrently (the KL driver evaluates its two models in
 * lockstep, one after the other, which is the intended use).
 *
 * Determinism: logits do not depend on the thread count or on how a
 * sequence is split into chunks (every output element is summed in a fixed
 * order), and KLD_KERNELS=ref gives the same bits as the SIMD kernels. */
#ifndef KLD_ENGINE_ENGINE_H
#define KLD_ENGINE_ENGINE_H

#include "model/hparams.h"

#include <stdio.h>

typedef struct kld_model kld_model;
typedef struct kld_session kld_session;
typedef struct kld_pool kld_pool;

/* ---- thread pool ---- */

/* A pool of n_threads (the calling thread counts as one; n_threads <= 0
 * means kld_default_threads()). NULL when threads cannot be started. */
kld_pool *kld_pool_create(int n_threads);
void kld_pool_free(kld_pool *pool);
int kld_pool_size(const kld_pool *pool);

/* ---- model ---- */

/* kld_model_open (kld.h) opens any path kld_source_open accepts, reads the hyper-parameters and
 * binds every weight (checking names, shapes and types). Weights stay
 * memory-mapped; norms and biases are converted to float32 once.
 *
 * MODEL@POLICY: with a policy (opts->policy, or a path that does not exist
 * but whose part before the last '@' does), the weight matrices are
 * quantized in memory as the policy says (stored non-float types are
 * dequantized first); no file is written. A one-line note goes to stderr
 * when the policy came from the path.
 *
 * MODEL[@POLICY]+ADAPTER[:SCALE]: a LoRA adapter (GGUF or PEFT) applied on
 * top of the (quantized) weights as a side product in every session, as
 * llama.cpp's --lora applies one; the weights are not merged. */

const kld_hparams *kld_model_hparams(const kld_model *model);
/* The output head (the token embedding when tied, *tied then true). */
const kld_tensor *kld_model_head(const kld_model *model, bool *tied);
/* One pointer a layer above keeps with the model (the public API's
 * tokenizer), freed with free_fn by kld_model_close or the next attach. */
void *kld_model_attached(const kld_model *model);
void kld_model_attach(kld_model *model, void *p, void (*free_fn)(void *));
/* The opened source (tensor table, GGUF metadata, tokenizer paths): owned
 * by the model, valid until kld_model_close. */
const kld_source *kld_model_source(const kld_model *model);

/* ---- levers ----
 * A lever is a runtime setting of a session with a reference value (the
 * first one listed): two sessions of one model may run with different
 * levers over the same weights. Parsed from "NAME=VALUE[,NAME=VALUE...]"
 * (levers.c):
 *   kv=TYPE | kv=blk:A-B=TYPE,...,TYPE  K and V cache type (both), optionally
 *                                      per layer (rules first match; a bare
 *                                      TYPE is the default for other layers)
 *   kv_k=..., kv_v=...                 the same for K or V alone
 *                                      TYPE: f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 iq4_nl
 *                                      (llama.cpp's blocks), mlx<B>g<G> (MLX affine
 *                                      groups, kv_mlx.c), rot<B> (rotated scalar
 *                                      quantizer, kv_rot.c); kv_scheme.h
 *   kv_config=PATH                     K and V maps from an MLX kv_config.json
 *   kv_start=N                         positions < N stay f32 in a typed cache
 *   act=f32|bf16|f16|q8                rounding of every weight matmul's input rows
 *   kernels=auto|ref|simd              kernel set (auto: the one chosen at start-up)
 *   attention=exact|online             two-pass softmax, or blocked online softmax
 *   attn_block=N                       online softmax key block (multiple of 16, 16..4096)
 *   noise=none|bf16                    round the residual stream after every layer
 *   lora=ADAPTER[:SCALE]               a LoRA adapter (GGUF or PEFT) as a low-rank side
 *                                      product y += s·B(A x) of the weight matmuls, on
 *                                      top of the model's own MODEL+ADAPTER, if any
 *                                      (lora.h); the path may not contain ',' */

#define KLD_LORA_PATH_MAX 1024

#define KLD_KV_MAX_RULES 64

typedef struct kld_kv_rule {
    int64_t lo, hi;       /* layers lo..hi inclusive */
    uint32_t type;        /* KV scheme id (kv_scheme.h) */
} kld_kv_rule;

typedef struct kld_kv_map {
    uint32_t type;        /* layers no rule names */
    int n_rules;
    kld_kv_rule rule[KLD_KV_MAX_RULES];
} kld_kv_map;

typedef enum kld_act_round { KLD_ACT_F32, KLD_ACT_BF16, KLD_ACT_F16, KLD_ACT_Q8 } kld_act_round;
typedef enum kld_kernels_choice { KLD_KERNELS_AUTO, KLD_KERNELS_REF, KLD_KERNELS_SIMD } kld_kernels_choice;
typedef enum kld_attn_mode { KLD_ATTN_EXACT, KLD_ATTN_ONLINE } kld_attn_mode;

typedef struct kld_levers {
    kld_kv_map kv_k, kv_v;
    int64_t kv_start;     /* quantizedKvStart: positions before it stay f32 */
    kld_act_round act;
    kld_kernels_choice kernels;
    kld_attn_mode attention;
    int attn_block;
    bool noise_bf16;
    char lora_path[KLD_LORA_PATH_MAX]; /* "" : no lever adapter */
    char kv_config[KLD_LORA_PATH_MAX]; /* the kv_config= file ("" : none), for messages */
    int64_t kv_config_last;            /* the last layer it lists */
    float lora_scale;
} kld_levers;

/* Every lever at its reference value. */
void kld_levers_default(kld_levers *l);
/* Applies "NAME=VALUE,..." on top of *l. Errors name the offending token
 * and list the valid names or values; *l is unchanged on error. */
kld_status kld_levers_parse(const char *text, kld_levers *l, kld_error *err);
/* True when every lever has its reference value. */
bool kld_levers_is_reference(const kld_levers *l);
/* Canonical text of the non-reference levers ("kv=q8_0,act=q8"), or
 * "reference"; always NUL-terminated. */
void kld_levers_format(const kld_levers *l, char *buf, size_t size);
/* The type of layer il in a KV map. */
uint32_t kld_kv_map_type(const kld_kv_map *m, int64_t il);
/* The K and V map of an MLX kv_config.json (kv_config.c): MLX groups on
 * the layers it lists, f32 elsewhere. Errors name the file, entry and key. */
kld_status kld_kv_config_read(const char *path, kld_kv_map *out, int64_t *last_layer,
                              kld_error *err);
/* Whether the levers apply to this model (layer maps within n_layer,
 * head sizes a multiple of the cache type's block). */
kld_status kld_levers_check(const kld_levers *l, const kld_model *model, kld_error *err);
struct kld_quant_plan;
/* The policy's plan when the model was quantized on load (types, sizes,
 * fallbacks; items name the bound tensors), else NULL. */
const struct kld_quant_plan *kld_model_quant_plan(const kld_model *model);
/* The policy text applied on load, or NULL. */
const char *kld_model_policy(const kld_model *model);
/* MODEL+ADAPTER[:SCALE]: the adapter as given ("A.gguf:0.5"), or NULL. */
const char *kld_model_adapter(const kld_model *model);
/* The file its tensors were read from (the .gguf, or a PEFT folder's
 * adapter_model.safetensors), or NULL. */
const char *kld_model_adapter_file(const kld_model *model);

/* MODEL[@POLICY]+ADAPTER[:SCALE] as kld_model_open splits it, for the
 * commands that open the model's file themselves (inspect, quantize):
 * *model (owned) is the left part, *adapter points into path; both NULL
 * when path names no adapter (MODEL+ADAPTER@POLICY is an error). */
kld_status kld_model_split_adapter(const char *path, char **model, const char **adapter,
                                   kld_error *err);
/* Binds ADAPTER[:SCALE] to an opened model without one, as MODEL+ADAPTER
 * does; errors name the adapter's file and tensor (the caller prefixes
 * the full spec, as kld_model_open does). */
kld_status kld_model_attach_adapter(kld_model *model, const char *adapter, kld_error *err);

/* What MODEL+ADAPTER's adapter is (lora.c), for `inspect`. */
#define KLD_ADAPTER_CLASSES 32
typedef struct kld_adapter_facts {
    const char *spec;          /* "A.gguf:0.5" as given */
    const char *file;          /* the tensor file */
    const char *config;        /* PEFT: adapter_config.json; NULL for GGUF */
    bool peft;
    bool has_alpha;
    double alpha;              /* 0 when absent */
    float user_scale;          /* SCALE (default 1) */
    int64_t rank_min, rank_max;
    float scale_min, scale_max; /* SCALE·alpha/r (SCALE without alpha), per pair */
    size_t n_targets;          /* base weights adapted */
    uint64_t n_params, stored_bytes; /* A and B as stored */
    uint64_t file_bytes;       /* on disk (PEFT: both files) */
    int n_classes;             /* the targets' classes ("attn_q", "output"), first seen first */
    char class_name[KLD_ADAPTER_CLASSES][32];
    int class_count[KLD_ADAPTER_CLASSES];
} kld_adapter_facts;
/* false when the model has no adapter. */
bool kld_model_adapter_facts(const kld_model *model, kld_adapter_facts *out);

/* `kldeval quantize IN[+ADAPTER[:SCALE]] OUT POLICY` (lora_merge.c): IN
 * without an adapter is kld_quantize_file; with one, the adapter is
 * checked as MODEL+ADAPTER checks it and merged into every weight it
 * targets before the policy converts it (quant.h kld_quant_merge). */
struct kld_quantize_opts;
kld_status kld_quantize_merged(const char *in, const char *out_path, const char *policy,
                               const struct kld_quantize_opts *opts, struct kld_quant_plan *plan_out,
                               kld_error *err);

/* The GGUF name ("blk.3.ffn_down.weight") of a weight the model binds
 * (as a forward observer sees it), written to buf; NULL when t is not one. */
const char *kld_model_weight_name(const kld_model *model, const kld_tensor *t, char *buf,
                                  size_t cap);
/* Every bound weight (matrices and vectors) once, with its GGUF name
 * (model_policy.c). */
typedef void (*kld_weight_fn)(void *ctx, const kld_tensor *t, const char *name);
void kld_model_each_weight(const kld_model *m, kld_weight_fn fn, void *ctx);

/* ---- memory plan ---- */

typedef struct kld_mem_plan {
    int64_t n_ctx, max_chunk;
    int n_threads;
    uint64_t weights_bytes;   /* weight data as resident: repacked matrices (allocated), the rest mmapped */
    uint64_t model_bytes;     /* float32 norms/biases/RoPE tables owned by the model */
    uint64_t kv_bytes;        /* K and V cache in its lever types, all layers */
    uint64_t kv_token_bytes;  /* K and V bytes of one position, all attention layers */
    uint64_t recurrent_bytes; /* recurrent layers' state (LFM2 conv inputs; DeltaNet conv inputs + S), f32 */
    uint64_t act_bytes;       /* per-chunk activations */
    uint64_t scratch_bytes;   /* per-thread GEMM panels, attention rows and dequantized K/V */
    uint64_t arena_bytes;     /* kv + recurrent + act + scratch: the one allocation of a session */
    uint64_t logits_bytes;    /* one chunk of logits, max_chunk × n_vocab float32 (caller's buffer) */
    uint64_t runtime_bytes;   /* the program, its libraries and stacks, the tokenizer's tables */
    uint64_t total_bytes;     /* weights + model + arena + logits + runtime: the peak RSS, at most */
    char kv_desc[512];        /* "f32" or the lever's K/V maps ("kv=q8_0") */
} kld_mem_plan;

/* The allocation a session with these sizes makes (nothing is allocated). */
kld_status kld_mem_plan_compute(const kld_model *model, int64_t n_ctx, int64_t max_chunk,
                                int n_threads, kld_mem_plan *plan, kld_error *err);
/* The same with levers (NULL: the reference levers). */
kld_status kld_mem_plan_compute_levers(const kld_model *model, int64_t n_ctx, int64_t max_chunk,
                                       int n_threads, const kld_levers *levers,
                                       kld_mem_plan *plan, kld_error *err);
/* Human-readable plan, one component per line (for `kldeval inspect --plan`). */
void kld_mem_plan_print(const kld_mem_plan *plan, FILE *f);
/* The weight types the SIMD kernel sets repack at load (weight_pack.c), as
 * the memory plan and inspect name them. */
#define KLD_REPACKED_TYPES "f16, q4_K and q6_K"

/* ---- session ---- */

/* A KV cache for up to n_ctx positions fed in chunks of at most max_chunk
 * tokens, running on its own pool of n_threads (<= 0: all cores). */
kld_status kld_session_create(kld_model *model, int64_t n_ctx, int64_t max_chunk, int n_threads,
                              kld_session **out, kld_error *err);
/* The same, borrowing `pool` (which must outlive the session). */
kld_status kld_session_create_shared(kld_model *model, int64_t n_ctx, int64_t max_chunk,
                                     kld_pool *pool, kld_session **out, kld_error *err);
/* The general form: levers (NULL: reference) and a pool to borrow (NULL:
 * the session starts its own of n_threads). The levers are copied. */
typedef struct kld_session_opts {
    int64_t n_ctx, max_chunk;
    int n_threads;
    kld_pool *pool;
    const kld_levers *levers;
    bool head_only;      /* only kld_session_head: no matrix repacked, nothing but the head read */
    /* The prefill passes (eval calls) the session will make when that is known and it never
     * decodes, else 0. A few passes do not repay repacking the f16 matrices (the GEMM packs
     * their rows as it reads them: the same bits). */
    int64_t prefill_passes;
} kld_session_opts;
kld_status kld_session_create_opts(kld_model *model, const kld_session_opts *opts,
                                   kld_session **out, kld_error *err);
void kld_session_free(kld_session *s);
const kld_levers *kld_session_levers(const kld_session *s);

/* Empties the cache and zeroes the recurrent state: the next token goes
 * to position 0 of a new sequence. */
void kld_session_reset(kld_session *s);
/* Positions already in the cache. */
int64_t kld_session_pos(const kld_session *s);
const kld_mem_plan *kld_session_plan(const kld_session *s);

/* Appends n (1..max_chunk) tokens at positions pos..pos+n-1 (teacher
 * forcing). When logits is not NULL it receives n rows of n_vocab floats:
 * row t = logits after tokens[0..t]. Token ids outside [0, n_vocab) or a
 * full cache are KLD_ERR_ARG and leave the session unchanged. */
kld_status kld_session_eval(kld_session *s, const int32_t *tokens, int64_t n, float *logits,
                            kld_error *err);
/* The same, computing logits only for rows first_row..n-1 (n - first_row
 * rows in `logits`); the LM head is not run for the other rows. */
kld_status kld_session_eval_rows(kld_session *s, const int32_t *tokens, int64_t n,
                                 int64_t first_row, float *logits, kld_error *err);
/* One decode step: kld_session_eval with n = 1. */
kld_status kld_session_decode(kld_session *s, int32_t token, float *logits, kld_error *err);
/* kld_session_eval_rows that also writes the final-norm hidden states of
 * rows [first_row, n) (n_embd floats each) into hidden (logits may be NULL):
 * what a hidden-state teacher stores. */
kld_status kld_session_eval_hidden(kld_session *s, const int32_t *tokens, int64_t n,
                                   int64_t first_row, float *hidden, float *logits, kld_error *err);
/* The logits of n final-norm hidden states: the output head with the
 * session's levers and adapter and the final soft-cap, bit for bit what
 * the forward pass gives for those rows. NaN or infinite inputs are an
 * error naming the row. */
kld_status kld_session_head(kld_session *s, const float *hidden, int64_t n, float *logits,
                            kld_error *err);
/* One decode step of n sessions at once (several sequences in flight):
 * token r is appended to session ss[r] at its own position, and row r of
 * logits (n rows of n_vocab, or NULL) is bit-identical to what
 * kld_session_decode(ss[r], tokens[r]) would give — the weight products
 * run once with M = n rows (the weights are read once per step for all
 * n), attention reads each session's own cache. The sessions must be
 * distinct, share one model, pool, n_ctx, max_chunk (>= n) and levers;
 * ss[0]'s activation buffers hold the step. Errors leave every session
 * unchanged. */
kld_status kld_session_decode_batch(kld_session *const *ss, int64_t n, const int32_t *tokens,
                                    float *logits, kld_error *err);
/* The pool the session runs on (its own or the borrowed one). */
kld_pool *kld_session_pool(const kld_session *s);

/* Observes every weight matmul of the forward pass: called with the weight
 * and its float32 input rows A (n rows of W->ne[0] values, stride lda)
 * before the product, on the caller's thread. NULL stops observing. */
typedef void (*kld_matmul_observer)(void *ctx, const kld_tensor *W, const float *A, int64_t n,
                                    int64_t lda);
void kld_session_observe(kld_session *s, kld_matmul_observer fn, void *ctx);

/* Observes the hidden states of the forward pass, per layer and chunk, on
 * the caller's thread (kld_session_eval*, not kld_session_decode_batch):
 *   KLD_SITE_MIXER  the position mixer's output as it is added to the
 *                   residual stream (attention, or a short-conv / DeltaNet
 *                   block; output bias and post-norm included)
 *   KLD_SITE_FFN    the MLP's output (a mixture of experts: the experts'
 *                   combined output, shared expert included), likewise
 *   KLD_SITE_RESID  the residual stream after the layer
 * rows: n rows of n_embd floats (stride ld) for positions pos..pos+n-1.
 * The observer only reads: the forward pass and its results are the same
 * bits with or without one. NULL stops observing (no cost when unset). */
typedef enum kld_layer_site { KLD_SITE_MIXER, KLD_SITE_FFN, KLD_SITE_RESID, KLD_SITE_COUNT } kld_layer_site;
typedef void (*kld_layer_observer)(void *ctx, int64_t il, kld_layer_site site, const float *rows,
                                   int64_t n, int64_t ld, int64_t pos);
void kld_session_observe_layers(kld_session *s, kld_layer_observer fn, void *ctx);
/* "mixer", "ffn", "resid" */
const char *kld_layer_site_name(kld_layer_site site);

/* ---- importance matrices ---- */

struct kld_imatrix;
/* llama-imatrix's accumulation: n_chunks windows of n_ctx tokens of ids
 * (window i = ids[i·n_ctx ..], its first token replaced by bos when bos >= 0),
 * each evaluated in one batch; per blk.* weight matrix and input column, the
 * float sum of squared inputs and the count, ncall = windows. Entries are
 * stored as llama.cpp stores them ((sum / count) · ncall). The forward runs
 * with `levers` (NULL: the reference); the observer always sees a matmul's
 * input before the act= rounding, as llama-imatrix reads src1 before
 * ggml converts it to the weight's vec_dot type. */
#define KLD_IMATRIX_LLAMACPP_LEVERS "kv=f16,act=q8"
typedef void (*kld_imatrix_progress_fn)(void *ctx, int64_t done, int64_t total);
kld_status kld_imatrix_collect(kld_model *model, const int32_t *ids, int64_t n_ids, int64_t n_ctx,
                               int64_t n_chunks, int32_t bos, int n_threads,
                               const kld_levers *levers, const char *dataset,
                               kld_imatrix_progress_fn progress, void *progress_ctx,
                               struct kld_imatrix **out, kld_error *err);

/* ---- vector helpers shared with the statistics code ---- */

/* log(sum(exp(x[i]))) of n floats, max-subtracted, in double precision. */
double kld_logsumexp(const float *x, int64_t n);

#endif
