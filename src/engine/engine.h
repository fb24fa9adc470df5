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

typedef struct kld_model_opts {
    const char *policy;   /* precision policy (src/quant/quant.h grammar) applied on load, or NULL */
    const char *imatrix;  /* importance matrix for the policy, or NULL (the policy's imatrix=) */
    int n_threads;        /* threads for quantizing on load; <= 0: all cores */
} kld_model_opts;

/* Opens any path kld_source_open accepts, reads the hyper-parameters and
 * binds every weight (checking names, shapes and types). Weights stay
 * memory-mapped; norms and biases are converted to float32 once.
 *
 * MODEL@POLICY: with a policy (opts->policy, or a path that does not exist
 * but whose part before the last '@' does), the weight matrices are
 * quantized in memory as the policy says (stored non-float types are
 * dequantized first); no file is written. A one-line note goes to stderr
 * when the policy came from the path. */
kld_status kld_model_open(const char *path, const kld_model_opts *opts, kld_model **out,
                          kld_error *err);
void kld_model_close(kld_model *model);

const kld_hparams *kld_model_hparams(const kld_model *model);
/* The opened source (tensor table, GGUF metadata, tokenizer paths): owned
 * by the model, valid until kld_model_close. */
const kld_source *kld_model_source(const kld_model *model);

struct kld_quant_plan;
/* The policy's plan when the model was quantized on load (types, sizes,
 * fallbacks; items name the bound tensors), else NULL. */
const struct kld_quant_plan *kld_model_quant_plan(const kld_model *model);
/* The policy text applied on load, or NULL. */
const char *kld_model_policy(const kld_model *model);

/* The GGUF name ("blk.3.ffn_down.weight") of a weight the model binds
 * (as a forward observer sees it), written to buf; NULL when t is not one. */
const char *kld_model_weight_name(const kld_model *model, const kld_tensor *t, char *buf,
                                  size_t cap);

/* ---- memory plan ---- */

typedef struct kld_mem_plan {
    int64_t n_ctx, max_chunk;
    int n_threads;
    uint64_t weights_bytes;   /* memory-mapped weight data (not allocated) */
    uint64_t model_bytes;     /* float32 norms/biases/RoPE tables owned by the model */
    uint64_t kv_bytes;        /* K and V cache, float32, all layers */
    uint64_t act_bytes;       /* per-chunk activations */
    uint64_t scratch_bytes;   /* per-thread GEMM panels and attention rows, all threads */
    uint64_t arena_bytes;     /* kv + act + scratch: the one allocation of a session */
    uint64_t logits_bytes;    /* one chunk of logits, max_chunk × n_vocab float32 (caller's buffer) */
} kld_mem_plan;

/* The allocation a session with these sizes makes (nothing is allocated). */
kld_status kld_mem_plan_compute(const kld_model *model, int64_t n_ctx, int64_t max_chunk,
                                int n_threads, kld_mem_plan *plan, kld_error *err);
/* Human-readable plan, one component per line (for `kldeval inspect --plan`). */
void kld_mem_plan_print(const kld_mem_plan *plan, FILE *f);

/* ---- session ---- */

/* A KV cache for up to n_ctx positions fed in chunks of at most max_chunk
 * tokens, running on its own pool of n_threads (<= 0: all cores). */
kld_status kld_session_create(kld_model *model, int64_t n_ctx, int64_t max_chunk, int n_threads,
                              kld_session **out, kld_error *err);
/* The same, borrowing `pool` (which must outlive the session). */
kld_status kld_session_create_shared(kld_model *model, int64_t n_ctx, int64_t max_chunk,
                                     kld_pool *pool, kld_session **out, kld_error *err);
void kld_session_free(kld_session *s);

/* Empties the cache: the next token goes to position 0. */
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

/* Observes every weight matmul of the forward pass: called with the weight
 * and its float32 input rows A (n rows of W->ne[0] values, stride lda)
 * before the product, on the caller's thread. NULL stops observing. */
typedef void (*kld_matmul_observer)(void *ctx, const kld_tensor *W, const float *A, int64_t n,
                                    int64_t lda);
void kld_session_observe(kld_session *s, kld_matmul_observer fn, void *ctx);

/* ---- importance matrices ---- */

struct kld_imatrix;
/* llama-imatrix's accumulation: n_chunks windows of n_ctx tokens of ids
 * (window i = ids[i·n_ctx ..], its first token replaced by bos when bos >= 0),
 * each evaluated in one batch; per blk.* weight matrix and input column, the
 * float sum of squared inputs and the count, ncall = windows. Entries are
 * stored as llama.cpp stores them ((sum / count) · ncall). */
typedef void (*kld_imatrix_progress_fn)(void *ctx, int64_t done, int64_t total);
kld_status kld_imatrix_collect(kld_model *model, const int32_t *ids, int64_t n_ids, int64_t n_ctx,
                               int64_t n_chunks, int32_t bos, int n_threads, const char *dataset,
                               kld_imatrix_progress_fn progress, void *progress_ctx,
                               struct kld_imatrix **out, kld_error *err);

/* ---- vector helpers shared with the statistics code ---- */

/* log(sum(exp(x[i]))) of n floats, max-subtracted, in double precision. */
double kld_logsumexp(const float *x, int64_t n);

#endif
