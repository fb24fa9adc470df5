/* run.h — `kldeval cap -m MODEL [--arm MODEL]`: the capability tasks
 * generated and scored on kldeval's own engine, greedy and bit-exact, for
 * a reference and optionally an arm on the same items, with the paired
 * difference and the Capability_Score (the unweighted mean of the tasks'
 * accuracies). */
#ifndef KLD_CAP_RUN_H
#define KLD_CAP_RUN_H

#include "common/common.h"
#include "engine/engine.h"
#include "tokenizer/tokenizer.h"

#include <jansson.h>

/* One model ready to generate: model, tokenizer, a session of n_ctx. */
typedef struct kld_cap_lm {
    kld_model *model;
    kld_tokenizer *tok;
    kld_session *s;
    int64_t n_ctx, chunk, n_vocab;
    float *logits;      /* one row */
    char *chat_template; /* GGUF tokenizer.chat_template, or NULL */
    char *bos, *eos;    /* their pieces, for the template */
} kld_cap_lm;

kld_status kld_cap_lm_open(const char *path, int threads, int64_t n_ctx, kld_cap_lm *lm, kld_error *err);
void kld_cap_lm_close(kld_cap_lm *lm);

/* Greedy decoding (ties to the lower id) of up to max_new tokens after
 * prompt (left-truncated to fit the context), stopping at EOS or when the
 * text ends with one of stops (NULL-terminated, may be NULL; the stop
 * string is cut off). *text is malloc'd. */
kld_status kld_cap_generate(kld_cap_lm *lm, const char *prompt, bool add_bos, int max_new,
                            const char *const *stops, char **text, kld_error *err);
/* The next-token logits after prompt (teacher-forced), in lm->logits. */
kld_status kld_cap_next_logits(kld_cap_lm *lm, const char *prompt, bool add_bos, kld_error *err);

typedef struct kld_cap_run_opts {
    const char *ref_path, *arm_path; /* arm may be NULL */
    const char *tasks;     /* "all" or a comma list: mmlu,gsm8k,ifeval,humaneval,bfcl,hashhop */
    uint64_t seed;         /* HashHop's problem */
    int hashhop_tokens;    /* HashHop prompt budget (default 12000, capped by the context) */
    int n;                 /* items per task (first n; default 10) */
    int max_new;           /* generation limit (default 128) */
    int threads;
    bool no_chat;          /* raw completion even when the model has a template */
    const char *data_dir;
    const char *python;
    volatile int *stop;    /* Ctrl-C: keep the items done */
    size_t hashhop_chars;  /* set by kld_cap_run */
    bool quiet;
} kld_cap_run_opts;

/* The report: {ref, arm, n, max_new, chat, tasks: {task: {ref, arm: {accuracy,
 * stderr, correct, n, items}, paired}}, capability_score, interrupted, config}. */
kld_status kld_cap_run(const kld_cap_run_opts *o, json_t **report, kld_error *err);

/* cap_config.c: a model as the run database records it (the KL arm
 * description + policy, levers, bits_per_weight), and the report's config
 * object (version, mode "cap", ref, arm (null without one), tasks, n, seed,
 * max_new, chat, data; no threads). */
json_t *kld_cap_model_desc(const char *path, const kld_cap_lm *lm);
json_t *kld_cap_run_config(const kld_cap_run_opts *o, const kld_cap_lm *ref, const kld_cap_lm *arm,
                           const char *const *tasks, size_t n_tasks);

#endif
