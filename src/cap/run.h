/* run.h — `kldeval cap -m MODEL [--arm MODEL]`: the capability tasks
 * generated and scored on kldeval's own engine, greedy or sampled
 * (sampler.h) and bit-exact, for
 * a reference and optionally an arm on the same items, with the paired
 * difference and the Capability_Score (the unweighted mean of the tasks'
 * accuracies). */
#ifndef KLD_CAP_RUN_H
#define KLD_CAP_RUN_H

#include "cap/sampler.h"
#include "common/common.h"
#include "engine/engine.h"
#include "eval/plan.h"
#include "tokenizer/tokenizer.h"

#include <jansson.h>

/* One model ready to generate: model, tokenizer, a session of n_ctx. */
typedef struct kld_cap_lm {
    kld_model *model;
    kld_tokenizer *tok;
    kld_session *s;
    int64_t n_ctx, chunk, n_vocab;
    float *logits;      /* one row */
    kld_session **batch_s; /* kld_cap_generate_batch's further sessions (same pool, levers) */
    int n_batch_s;
    char *chat_template; /* GGUF tokenizer.chat_template, or NULL */
    char *bos, *eos;    /* their pieces, for the template */
    bool shares_model;  /* model borrowed from another kld_cap_lm (self-flag) */
} kld_cap_lm;

kld_status kld_cap_lm_open(const char *path, int threads, int64_t n_ctx, kld_cap_lm *lm, kld_error *err);
void kld_cap_lm_close(kld_cap_lm *lm);
/* cap_lm.c: the session of lm rebuilt with levers (checked against the
 * model; NULL or all reference: unchanged). */
kld_status kld_cap_lm_set_levers(kld_cap_lm *lm, const kld_levers *levers, int threads, kld_error *err);
/* A second kld_cap_lm over owner's weights (self-flag: one weight load, two
 * sessions): its own tokenizer, session (with levers) and buffers; owner
 * must outlive it. */
kld_status kld_cap_lm_share(const kld_cap_lm *owner, const kld_levers *levers, int threads,
                            kld_cap_lm *lm, kld_error *err);

/* Greedy decoding (ties to the lower id) of up to max_new tokens after
 * prompt (left-truncated to fit the context), stopping at EOS or when the
 * text ends with one of stops (NULL-terminated, may be NULL; the stop
 * string is cut off). *text is malloc'd. */
kld_status kld_cap_generate(kld_cap_lm *lm, const char *prompt, bool add_bos, int max_new,
                            const char *const *stops, char **text, kld_error *err);
/* The next-token logits after prompt (teacher-forced), in lm->logits. */
kld_status kld_cap_next_logits(kld_cap_lm *lm, const char *prompt, bool add_bos, kld_error *err);
/* Resets s and prefills prompt into it, left-truncated so that `room`
 * positions stay free; the last position's logits go to `logits`, the
 * prompt's ids to *ids (the caller frees them). */
kld_status kld_cap_prefill(kld_cap_lm *lm, kld_session *s, const char *prompt, bool add_bos,
                           int64_t room, float *logits, kld_tok_ids *ids, kld_error *err);

/* gen_batch.c: one prompt of a batched generation. */
typedef struct kld_cap_gen_item {
    const char *prompt;
    bool add_bos;
    int max_new;
    const char *const *stops;
    const kld_cap_sampler *sampler; /* NULL or temperature 0: greedy */
    uint64_t item, sample;          /* the draw's keys: kld_cap_uniform(seed, item, sample, step) */
    int think_budget;               /* > 0: tokens a thinking block may take before
                                       KLD_CAP_THINK_CLOSE is forced (see gen_batch.c) */
} kld_cap_gen_item;

/* kld_cap_generate for items[0..n) with up to `batch` prompts in flight
 * (<= 0: kld_cap_default_batch): each prompt is prefilled alone on a
 * session of its own, then the sessions in flight advance together, one
 * kld_session_decode_batch per token (the weights read once per step for
 * all of them); a finished prompt's session takes the next waiting one.
 * texts[i] is bit-identical to kld_cap_generate(items[i]) for any batch and
 * thread count. Once *stop (may be NULL) is set no further prompt starts
 * and those in flight finish: texts[0..*n_done) are set (items start in
 * order, so the done ones are a prefix). On error no text is left. */
kld_status kld_cap_generate_batch(kld_cap_lm *lm, const kld_cap_gen_item *items, size_t n, int batch,
                                  volatile int *stop, char **texts, size_t *n_done, kld_error *err);
/* Prompts in flight by default: see gen_batch.c. */
int kld_cap_default_batch(const kld_cap_lm *lm);

enum { KLD_CAP_THINKING_DEFAULT, KLD_CAP_THINKING_OFF, KLD_CAP_THINKING_ON };

typedef struct kld_cap_run_opts {
    const char *ref_path, *arm_path; /* arm may be NULL */
    const char *tasks;     /* "all" or a comma list: mmlu,gsm8k,ifeval,humaneval,bfcl,hashhop */
    uint64_t seed;         /* HashHop's problem */
    int hashhop_tokens;    /* HashHop prompt budget (default 12000, capped by the context) */
    int n;                 /* items per task (first n; default 10) */
    int max_new;           /* generation limit (default 128) */
    int threads;
    int batch;             /* prompts generated together (0: kld_cap_default_batch) */
    bool no_chat;          /* raw completion even when the model has a template */
    bool gsm8k_8shot;      /* GSM8K as 8-shot completion (lm-eval-harness "gsm8k") instead of zero-shot */
    const char *ref_levers, *arm_levers; /* engine lever text (NULL: reference); arm levers
                                            without arm_path: self-flag on ref_path's weights */
    kld_shard shard;       /* scale-out: only the items i of each task with shard_has(i) (n = 0: all) */
    const char *partial_path; /* write the shard's items here (kld_cap_partial_write) */
    const char *data_dir;
    const char *python;
    volatile int *stop;    /* Ctrl-C: keep the items done */
    kld_cap_sampler sampler;     /* the generation tasks' sampler (zeroed: greedy) */
    kld_cap_sampler arm_sampler; /* the arm's own (--arm-sampler) when has_arm_sampler; alone
                                    (no --arm, no arm levers) it makes a self-flag arm */
    bool has_arm_sampler;
    int samples;           /* responses per generated item (<= 1: one) */
    int thinking;          /* KLD_CAP_THINKING_*: enable_thinking for the chat template */
    int thinking_budget;   /* > 0: tokens of a thinking block before its close is forced */
    const char *checkpoint_path; /* keep every response here as it is generated (checkpoint.h) */
    bool resume;           /* checkpoint_path exists: reuse its responses, append the rest */
    struct kld_cap_ckpt *ckpt; /* set by kld_cap_run */
    size_t hashhop_chars;  /* set by kld_cap_run */
    bool quiet;
} kld_cap_run_opts;

/* cap_lm.c: the reference (with o->ref_levers) and the arm: --arm's model
 * with o->arm_levers, or with arm levers and no --arm a second session on
 * the reference's weights (self-flag); *n_arms is 1 or 2. */
kld_status kld_cap_open_models(const kld_cap_run_opts *o, kld_cap_lm lm[2], int *n_arms, kld_error *err);
/* Both models' specs and levers, checked as kl checks arms, loading nothing. */
kld_status kld_cap_check_arms(const kld_cap_run_opts *o, kld_error *err);

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
