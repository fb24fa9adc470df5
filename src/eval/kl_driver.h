/* kl_driver.h — the lockstep two-arm evaluation behind `kldeval kl`: both
 * models resident, each chunk prefilled in the reference then in the arm,
 * its rows scored into the statistics, the logits dropped. Peak memory is
 * the two models, their KV caches and two chunks of logits. */
#ifndef KLD_EVAL_KL_DRIVER_H
#define KLD_EVAL_KL_DRIVER_H

#include "eval/corpus.h"
#include "eval/stats.h"

#include <jansson.h>
#include <signal.h>

typedef enum kld_chunking {
    KLD_CHUNKING_DOC,      /* each document from position 0, every position scored */
    KLD_CHUNKING_LLAMACPP  /* llama-perplexity: concatenate, --ctx windows, BOS first,
                              score the second half */
} kld_chunking;

typedef struct kld_kl_progress {
    uint64_t docs_done, docs_total;
    uint64_t positions_done, positions_total;
    double elapsed_s;
    double kld_mean;
} kld_kl_progress;

typedef struct kld_kl_config {
    const char *ref_path;
    const char *arm_path;
    const char *corpus_path;   /* NULL: built-in corpus (unless ids_path) */
    const char *corpus_format; /* "auto", "text", "jsonl" */
    const char *ids_path;      /* pre-tokenized int32 ids instead of text */
    int64_t max_docs;          /* 0 = all */
    int64_t max_tokens;        /* per document, 0 = no limit (doc chunking) */
    int64_t ctx;               /* window length */
    int64_t chunk;             /* prefill chunk */
    int64_t max_chunks;        /* llamacpp chunking: windows to score, 0 = all */
    kld_chunking chunking;
    int n_threads;
    int topk;
    bool allow_vocab_mismatch;
    volatile sig_atomic_t *stop; /* set asynchronously (Ctrl-C): stop after the chunk */
    void (*progress)(const kld_kl_progress *p, void *user);
    void *progress_user;
} kld_kl_config;

typedef struct kld_kl_result {
    kld_stats *stats;          /* owned: kld_kl_result_free */
    json_t *config;            /* the exact configuration, for the reports */
    double elapsed_s, ref_seconds, arm_seconds;
    uint64_t ref_tokens, arm_tokens;
    bool partial;
    char vocab_note[256];      /* how the vocabularies were compared */
    char ctx_note[256];        /* set when windows exceed a model's training context */
} kld_kl_result;

void kld_kl_config_defaults(kld_kl_config *c);
kld_status kld_kl_run(const kld_kl_config *c, kld_kl_result *out, kld_error *err);
void kld_kl_result_free(kld_kl_result *r);

#endif
