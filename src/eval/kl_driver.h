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
#include "eval/strata.h"
#include "store/partial.h"

#include <jansson.h>
#include <signal.h>

/* kld_kl_config, kld_kl_config_defaults and kld_kl_check: kld.h. */

typedef struct kld_kl_result {
    kld_stats *stats;          /* owned: kld_kl_result_free */
    json_t *config;            /* the exact configuration, for the reports */
    double elapsed_s, ref_seconds, arm_seconds;
    uint64_t ref_tokens, arm_tokens;
    bool partial;
    const char *mode;          /* "two-models", "self-flag", "saved-teacher", "candidate-dumps",
                                  "llamacpp-base" */
    /* how the report names the two arms and the corpus */
    char ref_label[4096], arm_label[4096], corpus_label[4096];
    char vocab_note[256];      /* how the vocabularies were compared */
    char ctx_note[256];        /* set when windows exceed a model's training context */
    /* the windows scored, under their global indices (for shard partials) */
    kld_partial_window *windows;
    size_t n_windows;
    uint64_t n_windows_total;  /* windows of the whole plan */
    uint8_t eval_hash[32];     /* the defining inputs (src/eval/merge.h) */
    kld_strata *strata;        /* owned: the strata and the token texts (NULL: no tokenizer) */
} kld_kl_result;

/* Proves that the outputs paths[0..n) (NULL: none; what[i] names each in
 * errors, "--json") and c's checkpoint can be written before the run: none
 * is a folder, an input of c (the arms' files, the corpus, the levers'
 * adapter or kv_config), or another of them (eval/outputs.h); a checkpoint
 * to resume from exists. */
kld_status kld_kl_check_outputs(const kld_kl_config *c, const char *const *what,
                                const char *const *paths, int n, kld_error *err);

kld_status kld_kl_run(const kld_kl_config *c, kld_kl_result *out, kld_error *err);

/* A command that runs the kl evaluation and looks inside it (`diff`):
 * prepared is called once both arms are prepared (sessions exist), before
 * the first window; rows after the scorer has taken each chunk's rows (the
 * same arguments as a kld_sink's). Either may be NULL. */
typedef struct kld_kl_hooks {
    kld_status (*prepared)(void *user, kld_arm *ref, kld_arm *arm, kld_error *err);
    kld_status (*rows)(void *user, const kld_window *w, size_t wi, const kld_rows *ref,
                       const kld_rows *arm, kld_error *err);
    void *user;
} kld_kl_hooks;
/* kld_kl_run with hooks (NULL: none; then it is kld_kl_run). */
kld_status kld_kl_run_hooked(const kld_kl_config *c, const kld_kl_hooks *hooks,
                             kld_kl_result *out, kld_error *err);
void kld_kl_result_free(kld_kl_result *r);

#endif
