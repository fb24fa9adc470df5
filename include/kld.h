/* kld.h — kldeval's public C API.
 *
 * kldeval compares a candidate "arm" of a language model with a reference,
 * teacher-forced, position by position: KL divergence, top-1 agreement,
 * perplexity and the statistics around them, computed in float64 from the
 * exact float32 logits of its own inference engine. This header is the whole
 * of what other programs may use; everything under src/ is internal.
 *
 * What is here:
 *   - models and their logits: kld_model_open (GGUF, safetensors, Hugging Face
 *     folders, llama2.c; MODEL@POLICY quantizes on load, MODEL+ADAPTER[:SCALE]
 *     applies a LoRA adapter), kld_model_tokenize, kld_model_logits;
 *   - the statistics accumulator: kld_stats takes rows of reference and arm
 *     logits (float32, from any engine) with the next token and yields exactly
 *     the figures `kldeval kl` prints (kld_summary);
 *   - the window plan of a corpus (kld_corpus_plan): the token windows and the
 *     rows of each that are scored, as `kl` cuts them, for engines that compute
 *     their own logits;
 *   - a whole evaluation (kld_kl_evaluate): two arms named by kld_arm_spec,
 *     the corpus and windows; the result holds the summary, every scored
 *     position and the JSON report `kl --json` writes.
 *
 * Conventions:
 *   Errors. Every function that can fail returns a kld_status and, when err is
 *     not NULL, fills it with a message naming the file, the field or tensor
 *     and the offending value. Nothing here exits or aborts.
 *   Ownership. Whoever opens or creates a handle closes or frees it
 *     (kld_model_open / kld_model_close, kld_stats_create / kld_stats_free,
 *     ...). Strings and arrays a function returns are owned by the handle they
 *     come from and live as long as it, unless the function says "free with
 *     kld_free". Input pointers are borrowed for the duration of the call,
 *     except the paths inside kld_arm_spec and kld_kl_config, which must stay
 *     valid while kld_kl_check / kld_kl_evaluate run.
 *   Threads. Distinct handles may be used from distinct threads at once; one
 *     handle is not safe for concurrent use (a kld_model included: the first
 *     session of a model repacks its weights). Every computation runs on its
 *     own worker threads; n_threads <= 0 means all cores. Results never
 *     depend on the thread count or the chunk size.
 *   Numbers. Logits are float32 [n][n_vocab] row-major; statistics are float64
 *     in nats. NAN means "not defined" (e.g. a perplexity without next tokens).
 *
 * Build with `pkg-config --cflags --libs kldeval` (libkldeval.so, or
 * `--static` for libkldeval.a). */
#ifndef KLD_H
#define KLD_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define KLD_API __attribute__((visibility("default")))
#else
#define KLD_API
#endif

/* ---- status, errors, version ---- */

typedef enum kld_status {
    KLD_OK = 0,
    KLD_ERR_IO,          /* open/read/mmap failed */
    KLD_ERR_FORMAT,      /* the file violates its format */
    KLD_ERR_UNSUPPORTED, /* valid, but not something kldeval implements */
    KLD_ERR_NOMEM,       /* an allocation failed */
    KLD_ERR_ARG,         /* the caller passed something invalid */
    KLD_ERR_MISMATCH,    /* two inputs that must agree do not */
    KLD_ERR_INTERRUPTED  /* stopped on request (Ctrl-C) */
} kld_status;

/* Filled by every failing library call: the message names the file, the
 * field or tensor, and the offending value. */
typedef struct kld_error {
    kld_status status;
    char msg[1024];
} kld_error;

KLD_API const char *kld_status_name(kld_status st);
KLD_API const char *kld_version(void);
/* Frees what a function documented as "free with kld_free" returned. */
KLD_API void kld_free(void *p);

/* ---- models ---- */

typedef struct kld_model kld_model;

typedef struct kld_model_opts {
    const char *policy;   /* precision policy applied on load (as MODEL@POLICY), or NULL */
    const char *imatrix;  /* importance matrix for the policy, or NULL (the policy's imatrix=) */
    int n_threads;        /* threads for quantizing on load; <= 0: all cores */
} kld_model_opts;

/* Opens a model: a .gguf, a .safetensors file, a Hugging Face folder or a
 * llama2.c checkpoint, optionally as MODEL@POLICY (quantized on load) and/or
 * MODEL+ADAPTER[:SCALE] (a LoRA adapter). opts may be NULL. The weights are
 * memory-mapped; kld_model_close releases them. */
KLD_API kld_status kld_model_open(const char *path, const kld_model_opts *opts, kld_model **out,
                                  kld_error *err);
KLD_API void kld_model_close(kld_model *model);
KLD_API int32_t kld_model_n_vocab(const kld_model *model);
KLD_API int64_t kld_model_n_ctx_train(const kld_model *model); /* 0: unknown */
KLD_API int64_t kld_model_n_embd(const kld_model *model);
KLD_API const char *kld_model_arch(const kld_model *model);    /* llama.cpp's name: "llama" */

/* Token ids of text with the model's tokenizer (*ids: free with kld_free).
 * add_special: the tokenizer's BOS (as `kl` encodes each document).
 * KLD_ERR_UNSUPPORTED when the model has no readable tokenizer. */
KLD_API kld_status kld_model_tokenize(kld_model *model, const char *text, size_t len,
                                      bool add_special, int32_t **ids, size_t *n_ids,
                                      kld_error *err);

/* The logits of ids[0..n) teacher-forced from an empty context: row t
 * (logits + t * n_vocab) is the distribution after ids[0..t]. levers: the
 * session's levers as `kl --lever` takes them ("kv=q8_0,act=q8"), or NULL
 * for the reference values. logits holds n * n_vocab floats. */
KLD_API kld_status kld_model_logits(kld_model *model, const char *levers,
                                    const int32_t *ids, int64_t n, int n_threads, float *logits,
                                    kld_error *err);

/* ---- per-position records and the statistics accumulator ---- */

#define KLD_TOPK_DEFAULT 10
#define KLD_TOPK_MAX 256
#define KLD_RANK_MAX 65534     /* ranks saturate here ("this far down or further") */
#define KLD_RANK_UNKNOWN 65535 /* no next token, or a rank the row cannot tell */

/* One scored position. A truncated row is one where the reference is known
 * only on a subset S of the vocabulary (a saved teacher's top-k, a llama.cpp
 * base row's 16-nat window); see src/eval/stats.h for the definitions. */
typedef struct kld_position {
    double kld;         /* KL(ref || arm), nats */
    double kld_rev;     /* KL(arm || ref), nats */
    double jsd;         /* Jensen-Shannon divergence, nats */
    double nll_ref;     /* -ln p_ref(token); NAN when token < 0 or unknown */
    double nll_arm;     /* -ln p_arm(token); NAN when token < 0 */
    double kld_bound;   /* tail-corrected lower bound of the full KL (= kld for full rows;
                           NAN where no bound holds) */
    double dlogit;      /* mean over the vocabulary of |(arm - mean arm) - (ref - mean ref)|,
                           the logits centred (NAN for truncated rows) */
    float p_ref_max;    /* the reference's largest probability */
    float mass;         /* the reference's probability mass the row covers (1 for full rows) */
    int32_t token;      /* the true next token, -1 when there is none */
    int32_t top_ref;    /* argmax of the reference (first index on ties) */
    int32_t top_arm;    /* argmax of the arm */
    uint32_t ctx_pos;   /* position in its context window */
    uint16_t topk_hits; /* |topk(ref) n topk(arm)| */
    uint16_t topk;      /* the k used */
    uint16_t topk_ordered; /* ranks r < k at which both top-k lists hold the same id */
    uint16_t rank_ref;  /* rank of the next token in the reference (0: its argmax; ties to the
                           lower id), at most KLD_RANK_MAX; KLD_RANK_UNKNOWN without one */
    uint16_t rank_arm;  /* the same in the arm */
    uint16_t strata;    /* bit s: the position belongs to stratum s of the run (kl --strata) */
    uint8_t truncated;  /* 1: the reference row is truncated */
    uint8_t next_outside; /* 1: the next token lies outside the reference's known subset */
    uint8_t pad_[2];
} kld_position;

/* Percentile fractions reported besides min, median and max. */
#define KLD_N_PCT 10
KLD_API extern const double kld_pct_fractions[KLD_N_PCT]; /* .001 .01 .05 .1 .25 .75 .9 .95 .99 .999 */

typedef struct kld_dist {
    double mean, se; /* se: standard error of the mean */
    double min, median, max;
    double pct[KLD_N_PCT]; /* at kld_pct_fractions */
} kld_dist;

typedef struct kld_bucket {
    double lo, hi;   /* [lo, hi) (the last confidence bin includes 1.0) */
    uint64_t n;      /* positions in the bucket; 0 = empty, skip */
    double kld_mean, kld_se, kld_median;
    double top1_agreement;
} kld_bucket;

#define KLD_CONF_BUCKETS 10
#define KLD_LABEL_K_N 3 /* label-in-top-k for k = 1, 5, 10 */
#define KLD_POS_BUCKETS 30

/* Every statistic of a run (the JSON report's figures; definitions in
 * docs/kl.md). */
typedef struct kld_summary {
    uint64_t n_positions;   /* scored positions */
    uint64_t n_tokens;      /* of those, with a next token */
    uint64_t n_docs;        /* documents begun */
    uint64_t n_docs_scored; /* documents with >= 1 position */
    int topk;

    kld_dist kld;
    double kld_doc_mean, kld_doc_se; /* mean of per-document means */
    kld_dist kld_rev;
    kld_dist jsd;

    double top1_agreement, top1_se;
    double topk_overlap, topk_se;

    /* PPL(ref) and everything paired with it (ratio, difference, correlation)
     * use kld_position_nll_ref: at next tokens below a llama.cpp base row's
     * window, an estimate (see n_next_outside) */
    double ppl_ref, ppl_ref_se, ppl_arm, ppl_arm_se;
    double ln_ppl_ratio, ln_ppl_ratio_se;
    double ppl_ratio, ppl_ratio_se;
    double ppl_diff, ppl_diff_se;
    double nll_cor; /* correlation of per-token nll_ref and nll_arm */

    kld_dist dp; /* p_arm(next) - p_ref(next), probability units */
    double dp_rms, dp_rms_se;

    kld_bucket by_conf[KLD_CONF_BUCKETS];
    kld_bucket by_pos[KLD_POS_BUCKETS];

    /* truncated reference rows (saved teachers, llama.cpp base files) */
    uint64_t n_truncated;   /* rows with truncated = 1 */
    double mass_mean, mass_min, mass_p1; /* captured mass over all positions */
    kld_dist kld_bound;     /* tail-corrected lower bound of the full KL (all NAN when
                               n_no_bound > 0) */
    uint64_t n_no_bound;    /* rows without a valid bound */
    uint64_t n_next_outside; /* next tokens outside the reference's known subset */
    double ppl_ref_llamacpp, ppl_ref_llamacpp_se; /* llama.cpp's "Mean PPL(base)": those
                               tokens at the window's floor, biased low (NAN when
                               n_next_outside is 0: then it is ppl_ref) */
    bool ref_nll_known;     /* false when some reference NLL is unknown: PPL(ref),
                               the ratios and dp are then NAN */

    /* agreement with the true next token and between the rankings */
    uint64_t n_rank_ref, n_rank_arm; /* positions whose next token's rank is known */
    double label_topk_ref[KLD_LABEL_K_N], label_topk_ref_se[KLD_LABEL_K_N]; /* the next token
                               among the reference's top k, k = 1, 5, 10 (binomial se) */
    double label_topk_arm[KLD_LABEL_K_N], label_topk_arm_se[KLD_LABEL_K_N]; /* the same, arm */
    double topk_ordered, topk_ordered_se; /* share of the k ranks at which both top-k lists
                               hold the same id */
    uint64_t n_dlogit;      /* positions with full rows (dlogit known) */
    double dlogit_mean, dlogit_se; /* mean |centred logit difference| per vocabulary id */
} kld_summary;

typedef struct kld_stats kld_stats;

/* An empty accumulator; topk: the top-k overlap size, 1 .. KLD_TOPK_MAX. */
KLD_API kld_status kld_stats_create(kld_stats **out, int topk, kld_error *err);
KLD_API void kld_stats_free(kld_stats *st);
/* Starts a new document: the positions added next belong to it (positions
 * added before the first call go to document 0). */
KLD_API kld_status kld_stats_begin_doc(kld_stats *st, kld_error *err);
/* Scores one position from a reference and an arm logit row of n_vocab
 * floats (no NaN or +inf) and the true next token (-1: none); ctx_pos is the
 * row's position in its window (for the by-position buckets). */
KLD_API kld_status kld_stats_add_logits(kld_stats *st, const float *ref_logits,
                                        const float *arm_logits, int32_t n_vocab,
                                        int32_t next_token, uint32_t ctx_pos, kld_error *err);
/* Appends a record computed elsewhere (rec->topk must be the accumulator's). */
KLD_API kld_status kld_stats_add(kld_stats *st, const kld_position *rec, kld_error *err);
/* The reference NLL the perplexity statistics use for a record: nll_ref,
 * except where the next token lies below a llama.cpp base row's window
 * (next_outside). There the file holds only the window's floor, which
 * -ln p_ref(next) is at least; the estimate is the arm's NLL, raised to that
 * floor when it is below it. */
KLD_API double kld_position_nll_ref(const kld_position *rec);
KLD_API size_t kld_stats_count(const kld_stats *st);
/* The records in order (valid until the next add). */
KLD_API const kld_position *kld_stats_records(const kld_stats *st, size_t *n);
/* Every statistic; KLD_ERR_ARG when nothing was added. */
KLD_API kld_status kld_stats_finalize(const kld_stats *st, kld_summary *out, kld_error *err);
/* The summary's figures as the JSON report names them ("kld": {"mean", ...},
 * "top1_agreement", "ppl_ratio", ...; schema kldeval.kl/1 without the run's
 * configuration and timings); free with kld_free. */
KLD_API char *kld_summary_json(const kld_summary *s, kld_error *err);

/* ---- the windows of a corpus ---- */

typedef enum kld_chunking {
    KLD_CHUNKING_DOC,      /* each document from position 0 in ctx windows, every row scored */
    KLD_CHUNKING_LLAMACPP, /* llama-perplexity --kl-divergence: rows ctx/2 .. ctx-2 */
    KLD_CHUNKING_STREAM,   /* documents concatenated, windows of exactly ctx tokens */
    KLD_CHUNKING_DEFAULT = -1 /* in a kld_kl_config: doc (stream for sweeps) */
} kld_chunking;

typedef struct kld_plan_options {
    const char *corpus_path;   /* text or JSONL; NULL: the built-in corpus (unless ids_path) */
    const char *corpus_format; /* "auto" (NULL), "text", "jsonl" */
    const char *ids_path;      /* pre-tokenized int32 little-endian ids instead of text */
    kld_chunking chunking;     /* KLD_CHUNKING_DEFAULT: doc */
    int64_t ctx;               /* window length (0: 512) */
    int64_t max_docs;          /* doc chunking: at most this many documents (0: all) */
    int64_t max_tokens;        /* doc chunking: tokens per document (0: all) */
    int64_t max_chunks;        /* llamacpp/stream: at most this many windows (0: all) */
} kld_plan_options;

typedef struct kld_corpus_plan kld_corpus_plan;

/* One window: tokens[0..len) are fed (as fed: BOS replacement applied), rows
 * [score_begin, score_end) are scored, row r predicting tokens[r + 1]
 * (next_token gives it, -1 past the end). */
typedef struct kld_window_view {
    const int32_t *tokens;
    int64_t len;
    int64_t score_begin, score_end;
    bool new_doc;              /* the window starts a document */
} kld_window_view;

/* The windows `kl` scores for these options, tokenized with model's
 * tokenizer (a chat corpus rendered with its template). */
KLD_API kld_status kld_corpus_plan_open(kld_model *model, const kld_plan_options *opts,
                                        kld_corpus_plan **out, kld_error *err);
KLD_API void kld_corpus_plan_free(kld_corpus_plan *plan);
KLD_API size_t kld_corpus_plan_count(const kld_corpus_plan *plan);
KLD_API kld_status kld_corpus_plan_window(const kld_corpus_plan *plan, size_t i,
                                          kld_window_view *out, kld_error *err);
/* The true next token of row r of window i (-1: none). */
KLD_API int32_t kld_corpus_plan_next(const kld_corpus_plan *plan, size_t i, int64_t r);

/* ---- arms and a whole evaluation ---- */

/* What an arm is. */
typedef enum kld_arm_kind {
    KLD_ARM_NONE = 0,      /* unset */
    KLD_ARM_MODEL,         /* MODEL[@POLICY][+ADAPTER[:SCALE]]: a model, one session */
    KLD_ARM_SELF,          /* a second session over the reference model's weights (one load) */
    KLD_ARM_TEACHER,       /* a saved teacher dump directory (reference only) */
    KLD_ARM_CANDIDATE,     /* a candidate dump directory (arm only, against its teacher) */
    KLD_ARM_LLAMACPP_BASE, /* a llama-perplexity --kl-divergence-base file (reference only) */
    KLD_ARM_ENDPOINT       /* an OpenAI-style completions endpoint, path its URL (the arm, or the
                              reference of a model arm) */
} kld_arm_kind;

/* An arm as named: parsed and validated once by the library (kld_kl_check
 * names the offending token). */
typedef struct kld_arm_spec {
    kld_arm_kind kind;
    const char *path;      /* the model, dump or base file (NULL for KLD_ARM_SELF) */
    const char *levers;    /* model and self arms: NAME=VALUE[,...] (docs/levers.md); NULL:
                              every lever at its reference value */
    bool decode;           /* model and self arms: feed tokens after prompt_len one decode
                              step at a time (teacher-forced) */
    int64_t prompt_len;    /* decode: tokens of each window prefilled first */
    const char *head;      /* teacher and candidate dumps of hidden states (format 3): the model
                              whose output head turns them into logits (NULL: the model their
                              manifest names); its head's bytes must hash as the manifest says */
    const char *endpoint_model; /* endpoint: the served model's name (NULL: the first /v1/models lists) */
    int32_t top_logprobs;  /* endpoint: logprobs K per row (0: 20); n_vocab: the whole row, exact */
    const char *api_key;   /* endpoint: sent as a Bearer token (NULL: none) */
} kld_arm_spec;

typedef enum kld_shard_mode { KLD_SHARD_MOD, KLD_SHARD_RANGE } kld_shard_mode;

/* Shard k of n (n = 0: no sharding): windows i with i mod n = k, or the k-th
 * of n contiguous ranges. */
typedef struct kld_shard {
    uint32_t k, n;
    kld_shard_mode mode;
} kld_shard;

/* Progress of a running evaluation (for a progress line). */
typedef struct kld_kl_progress {
    uint64_t docs_done, docs_total;
    uint64_t positions_done, positions_total;
    double elapsed_s;
    double kld_mean; /* 0 when nothing is scored (dumps) */
} kld_kl_progress;

typedef struct kld_kl_config {
    kld_arm_spec ref;          /* KLD_ARM_MODEL, KLD_ARM_TEACHER or KLD_ARM_LLAMACPP_BASE */
    kld_arm_spec arm;          /* KLD_ARM_MODEL, KLD_ARM_SELF or KLD_ARM_CANDIDATE */
    const char *corpus_path;   /* NULL: built-in corpus (unless ids_path) */
    const char *corpus_format; /* "auto", "text", "jsonl" */
    const char *ids_path;      /* pre-tokenized int32 ids instead of text */
    int64_t max_docs;          /* 0 = all */
    int64_t max_tokens;        /* per document, 0 = no limit (doc chunking) */
    int64_t ctx;               /* window length; 0: 512 */
    int64_t chunk;             /* prefill chunk */
    int64_t max_chunks;        /* llamacpp chunking: windows to score, 0 = all */
    kld_chunking chunking;     /* KLD_CHUNKING_DEFAULT: doc */
    int n_threads;             /* <= 0: all cores */
    int topk;
    bool allow_vocab_mismatch;
    bool allow_long_context;   /* saved windows longer than the arm's training context */
    volatile sig_atomic_t *stop; /* set asynchronously (Ctrl-C): stop after the chunk */
    void (*progress)(const kld_kl_progress *p, void *user);
    void *progress_user;
    kld_shard shard;           /* scale-out: this shard's windows only (shard.n = 0: all) */
    /* Checkpoints: the run's exact state (every record scored so far) written
     * to this file, atomically, at the first window boundary after every
     * checkpoint_every chunks (0: 64) and when the run ends or is stopped;
     * NULL: none. resume: continue from the file (the same configuration,
     * else an error naming what differs); the result equals an uninterrupted
     * run's, figure for figure. */
    const char *checkpoint;
    int64_t checkpoint_every;
    bool resume;
    /* Scoring subsets (docs/kl.md "Strata"): "NAME=REGEX[,NAME=REGEX…]" on
     * the next token's decoded text (NULL: none), and the one stratum to
     * score alone (a NAME, "special" or "role:system|user|assistant|tool";
     * NULL: every position). */
    const char *strata;
    const char *score_only;
} kld_kl_config;

KLD_API void kld_kl_config_defaults(kld_kl_config *c);
/* Every rule of a configuration, checked without loading anything: one
 * reference and one arm of compatible kinds, levers that parse and apply,
 * corpus and window options that the reference's kind takes. Messages name
 * each field by the `kldeval kl` flag that sets it (ref: --ref/-m,
 * --reference-logits, --llamacpp-base; arm: --arm, --arm-logits, or -m
 * alone for KLD_ARM_SELF; levers: --ref-lever, --lever; ctx: --ctx,
 * max_chunks: --chunks, ...). */
KLD_API kld_status kld_kl_check(const kld_kl_config *c, kld_error *err);

typedef struct kld_result kld_result;

/* Runs the evaluation (kld_kl_check first). A stop request gives a result
 * marked partial (kld_result_partial) over the positions scored so far. */
KLD_API kld_status kld_kl_evaluate(const kld_kl_config *c, kld_result **out, kld_error *err);
KLD_API void kld_result_free(kld_result *r);
/* "two-models", "self-flag", "saved-teacher", "candidate-dumps", "llamacpp-base" */
KLD_API const char *kld_result_mode(const kld_result *r);
KLD_API bool kld_result_partial(const kld_result *r);
KLD_API kld_status kld_result_summary(const kld_result *r, kld_summary *out, kld_error *err);
/* Every scored position in order (valid while r lives). */
KLD_API const kld_position *kld_result_positions(const kld_result *r, size_t *n);
/* The JSON report, exactly as `kldeval kl --json` writes it (schema
 * kldeval.kl/1); free with kld_free. */
KLD_API char *kld_result_json(const kld_result *r, kld_error *err);

#ifdef __cplusplus
}
#endif
#endif
