/* kl_driver.h — the two-arm evaluation behind `kldeval kl`: the arms named
 * by the configuration (two models; a saved teacher dump and a model; a
 * teacher and a candidate dump; a llama.cpp base file and a model) read the
 * same windows in lockstep, chunk by chunk, and each chunk's rows are scored
 * into the statistics and dropped. Peak memory: the resident models, their
 * KV caches and two chunks of rows. */
#ifndef KLD_EVAL_KL_DRIVER_H
#define KLD_EVAL_KL_DRIVER_H

#include "eval/corpus.h"
#include "eval/drive.h"
#include "eval/plan.h"
#include "eval/stats.h"
#include "store/partial.h"

#include <jansson.h>
#include <signal.h>

typedef struct kld_kl_config {
    const char *ref_path;      /* reference model */
    const char *arm_path;      /* arm model */
    const char *ref_logits;    /* reference: a saved teacher dump directory (instead of ref_path) */
    const char *arm_logits;    /* arm: a candidate dump directory (with ref_logits) */
    const char *llamacpp_base; /* reference: a llama.cpp --kl-divergence-base file */
    /* Levers (engine.h syntax) of the reference and the arm model sessions
     * (NULL: reference values). With ref_path and no arm_path/arm_logits
     * the run is self-flag: the arm is a second session over the
     * reference's weights (one load) with arm_levers. */
    const char *ref_levers, *arm_levers;
    bool decode;               /* the arm runs the decode path */
    int64_t prompt_len;        /* decode: tokens of each window prefilled first */
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
    bool allow_long_context;   /* saved windows longer than the arm's training context */
    volatile sig_atomic_t *stop; /* set asynchronously (Ctrl-C): stop after the chunk */
    void (*progress)(const kld_kl_progress *p, void *user);
    void *progress_user;
    kld_shard shard;           /* scale-out: this shard's windows only (shard.n = 0: all) */
} kld_kl_config;

typedef struct kld_kl_result {
    kld_stats *stats;          /* owned: kld_kl_result_free */
    json_t *config;            /* the exact configuration, for the reports */
    double elapsed_s, ref_seconds, arm_seconds;
    uint64_t ref_tokens, arm_tokens;
    bool partial;
    const char *mode;          /* "two-models", "self-flag", "saved-teacher", "candidate-dumps",
                                  "llamacpp-base" */
    char vocab_note[256];      /* how the vocabularies were compared */
    char ctx_note[256];        /* set when windows exceed a model's training context */
    /* the windows scored, under their global indices (for shard partials) */
    kld_partial_window *windows;
    size_t n_windows;
    uint64_t n_windows_total;  /* windows of the whole plan */
    uint8_t eval_hash[32];     /* the defining inputs (src/eval/merge.h) */
} kld_kl_result;

void kld_kl_config_defaults(kld_kl_config *c);
kld_status kld_kl_run(const kld_kl_config *c, kld_kl_result *out, kld_error *err);
void kld_kl_result_free(kld_kl_result *r);

#endif
