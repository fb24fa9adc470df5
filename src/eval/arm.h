/* arm.h — an arm: a source of next-token distributions over the windows of
 * a plan. Every evaluation is a pair of arms (or one arm and a writer); the
 * scorer and the statistics never know which kind they read.
 *
 * Kinds (arm_*.c):
 *   model          a model session: dense logits rows (later with a
 *                  precision policy and levers)
 *   dump           a saved teacher or candidate dump (src/store/dump.h):
 *                  sparse rows (top-k ids, logits, logsumexp, sidecar)
 *   llamacpp-base  a llama.cpp --kl-divergence-base file: log-prob rows
 *                  over the full vocabulary, clamped to a 16-nat window
 *   endpoint       an OpenAI-style completions endpoint: its top-K
 *                  log-probabilities per row (top-k rows)
 * Saved arms fix their own tokens: they build the plan (kld_arm_plan) and
 * check that the other side reads the same tokens.
 *
 * Life cycle: kld_arm_open_* → kld_arm_prepare (sessions sized for the plan)
 * → for each window: begin → eval per chunk → kld_arm_free. */
#ifndef KLD_EVAL_ARM_H
#define KLD_EVAL_ARM_H

#include "engine/engine.h"
#include "eval/plan.h"
#include "tokenizer/tokenizer.h"

#include <jansson.h>

typedef enum kld_rows_kind {
    KLD_ROWS_DENSE,   /* logits[n][n_vocab] */
    KLD_ROWS_SPARSE,  /* k ids per row with logits, logsumexp and sidecar values */
    KLD_ROWS_LOGPROB, /* log-probabilities[n][n_vocab], codes of 0 outside the window */
    KLD_ROWS_TOPK     /* an arm known on its own top k ids: idx, val (log-probabilities, lse 0),
                         logp_next, argmax (an endpoint; the whole row when k = n_vocab) */
} kld_rows_kind;

/* Rows [row0, row0 + n) of the current window, valid until the next eval. */
typedef struct kld_rows {
    kld_rows_kind kind;
    int64_t row0, n;
    int32_t n_vocab;
    const float *logits;     /* DENSE */
    int32_t k;               /* SPARSE */
    const int32_t *idx;      /* [n][k] */
    const float *val;        /* [n][k] logits at idx */
    const double *lse;       /* [n] full-vocabulary logsumexp (the sidecar's float64 when
                                present, else the record's float32) */
    const double *logp_next; /* [n] NAN unknown */
    const int32_t *argmax;   /* [n] -1 unknown */
    bool at_teacher_ids;     /* SPARSE: ids are a teacher's (a candidate dump) */
    bool f16;                /* SPARSE: val rounded to float16 (a v1 dump) */
    bool f16_raw;            /* SPARSE, f16: lse is the unrounded logits' (another writer's or
                                an older v1 dump), not that of the stored ones (kld_row_as_f16) */
    const float *hidden;     /* DENSE from a model arm asked for them: the final-norm hidden
                                states [n][n_embd] of the same rows (else NULL) */
    const float *logp;       /* LOGPROB [n][n_vocab] */
    const uint16_t *codes;   /* LOGPROB [n][n_vocab] */
} kld_rows;

typedef struct kld_arm kld_arm;

typedef struct kld_arm_ops {
    /* Sizes sessions for windows of up to max_len tokens fed in chunks, `passes` eval calls
     * in all (kld_plan_passes; 0: not known). */
    kld_status (*prepare)(kld_arm *a, kld_pool *pool, int64_t max_len, int64_t chunk, int64_t passes,
                          kld_error *err);
    /* A new window (index wi of the plan) starts from an empty state. */
    kld_status (*begin)(kld_arm *a, const kld_window *w, size_t wi, kld_error *err);
    /* Feeds tokens [c0, c0 + n) of the window (as fed: BOS replaced) and
     * returns rows [r0, r1) (c0 <= r0 <= r1 <= c0 + n; r0 == r1: none). */
    kld_status (*eval)(kld_arm *a, const int32_t *tokens, int64_t c0, int64_t n, int64_t r0,
                       int64_t r1, kld_rows *rows, kld_error *err);
    void (*free)(kld_arm *a);
} kld_arm_ops;

struct kld_arm {
    const kld_arm_ops *ops;
    const char *kind;        /* "model", "dump", "llamacpp-base" */
    char *path;
    int32_t n_vocab;
    int64_t n_ctx_train;     /* 0: unknown */
    kld_tokenizer *tok;      /* NULL when the arm has none */
    kld_model *model;        /* model arms */
    json_t *desc;            /* the configuration of the arm, for reports: read it through kld_arm_desc */
    struct kld_sha256_job *pending_sha; /* the model file's hash, still being computed (desc's sha256) */
    struct kld_arm *sha_from; /* a shared model arm: its sha256 is this arm's */
    kld_plan *plan;          /* saved arms: the windows they define (owned) */
    double seconds;          /* time spent producing rows */
    uint64_t tokens;         /* tokens fed */
    void *impl;
};

/* A model arm that also hands out its rows' final-norm hidden states
 * (kld_rows.hidden; call before prepare; not with the decode path). */
kld_status kld_arm_model_want_hidden(kld_arm *a, kld_error *err);
/* The session of a prepared model arm (to apply its head to other rows). */
kld_session *kld_arm_model_session(const kld_arm *a);

/* ---- an arm as named (kld_arm_spec, kld.h), parsed once (arm_spec.c) ---- */

typedef struct kld_arm_parsed {
    kld_arm_spec spec;     /* as given (strings borrowed) */
    kld_levers levers;     /* the levers parsed (reference values when none) */
    bool role_ref;         /* parsed as the reference */
} kld_arm_parsed;

/* Parses and validates one arm: its kind is set, a path where the kind has
 * one, levers and the decode path only on model and self arms (levers that
 * parse: the error names the lever), prompt_len only with decode. role
 * ("reference", "arm") names it in errors. */
kld_status kld_arm_spec_parse(const kld_arm_spec *spec, const char *role, kld_arm_parsed *out,
                              kld_error *err);
/* The kinds a reference and an arm may have together: a model, saved
 * teacher or llama.cpp base file as the reference; a model, a self-flag
 * session (of a model reference, with levers or the decode path) or a
 * candidate dump (of a teacher) as the arm. */
kld_status kld_arm_pair_check(const kld_arm_parsed *ref, const kld_arm_parsed *arm,
                              kld_error *err);
/* Opens a parsed arm into the arm interface, levers and decode path set.
 * partner: the other arm, opened first where this kind needs it (a self
 * arm shares its model; a dump's ids are bounded by its vocabulary; a
 * llama.cpp base file takes its vocabulary and BOS); may be NULL otherwise. */
kld_status kld_arm_open_spec(const kld_arm_parsed *p, kld_arm *partner, kld_arm **out,
                             kld_error *err);
/* A model spec opened as a bare model, its levers checked against it, for
 * commands that run their own sessions (logits, generate, imatrix, cap):
 * p->levers is what their sessions take. */
kld_status kld_arm_spec_open_model(const kld_arm_parsed *p, kld_model **out, kld_error *err);
/* Whether this kind must be opened after its partner (dumps and base files
 * as references take the arm's vocabulary; a self arm the reference's model). */
bool kld_arm_spec_opens_second(const kld_arm_parsed *p);
/* "a model", "a saved teacher dump", ...: for messages. */
const char *kld_arm_kind_desc(kld_arm_kind kind);

/* A model's description in reports: {kind "model", path, format, bytes,
 * sha256 (of the file; null for a folder or MODEL@POLICY), arch, n_vocab}. */
json_t *kld_arm_model_desc(const char *path, const kld_model *model);
/* The arm's description (a->desc), complete: waits for the model file's
 * hash when it is still being computed. */
json_t *kld_arm_desc(kld_arm *a);
/* A model path (anything kld_model_open reads). */
kld_status kld_arm_open_model(const char *path, kld_arm **out, kld_error *err);
/* A second model arm on the model an open model arm already holds (one
 * weight load): it borrows owner->model, so owner must be freed after it. */
kld_status kld_arm_open_model_shared(kld_arm *owner, kld_arm **out, kld_error *err);
/* Session settings of a model arm, before prepare: levers (NULL: the
 * reference values) and the decode path (decode: each window's first
 * prompt_len tokens prefilled, every later token one decode step). Checks
 * the levers against the model and records both in a->desc. */
kld_status kld_arm_model_configure(kld_arm *a, const kld_levers *levers, bool decode,
                                   int64_t prompt_len, kld_error *err);
/* A dump directory; rows are checked against n_vocab_limit (> 0: the other
 * arm's vocabulary). */
kld_status kld_arm_open_dump(const char *dir, int64_t n_vocab_limit, kld_arm **out,
                             kld_error *err);
/* The same, where a hidden-state dump (format 3) takes its head from
 * head_path (NULL: the model its manifest names); the head's bytes must
 * hash to the manifest's head.sha256. Its rows are then dense logits. */
kld_status kld_arm_open_dump_head(const char *dir, const char *head_path, int64_t n_vocab_limit,
                                  kld_arm **out, kld_error *err);
/* A llama.cpp base file; bos is the id that replaces each chunk's first
 * token (-1: none), as llama-perplexity does when the vocabulary adds BOS. */
kld_status kld_arm_open_lcpp_base(const char *path, int32_t n_vocab_expected, int32_t bos,
                                  kld_arm **out, kld_error *err);
/* An OpenAI-style completions endpoint (arm_endpoint.c): base URL (with or
 * without /v1), as the reference (rows as a top-k teacher's) or the arm
 * (its own top k), model (NULL: the first /v1/models lists; the endpoint is
 * asked once here, so that a dead or refusing one fails at open), k
 * log-probabilities per row in 1..n_vocab, api_key (NULL: none). */
kld_status kld_arm_open_endpoint(const char *url, bool as_ref, const char *model, int32_t k,
                                 const char *api_key, int32_t n_vocab, kld_arm **out, kld_error *err);
struct kld_corpus;
/* Before the run: the first n_docs documents of a text corpus sent to the
 * endpoint's POST /tokenize must come back as kldeval's tokenizer encodes
 * them (the error names the document and the first position that differs).
 * *checked false: nothing was checked (not an endpoint, not a text corpus,
 * or the server has no /tokenize; the echoed ids are still checked). */
kld_status kld_arm_endpoint_check_tokens(kld_arm *a, const struct kld_corpus *c, const kld_tokenizer *tok,
                                         size_t n_docs, bool *checked, kld_error *err);
void kld_arm_free(kld_arm *a);

/* For the kinds' open functions (arm.c): an arm with ops, kind, a copy of
 * path, zeroed state of impl_size bytes and, for saved arms, an empty plan;
 * NULL when out of memory. */
kld_arm *kld_arm_new(const kld_arm_ops *ops, const char *kind, const char *path, size_t impl_size,
                     bool with_plan);

/* The dump behind a dump arm (NULL for other kinds). */
struct kld_dump *kld_arm_dump(const kld_arm *a);

/* SHA-256 over a tokenizer's id → piece table, token types and BOS/EOS ids
 * (64 hex digits + NUL): "dump made with a different tokenizer" checks. */
void kld_tok_fingerprint(const kld_tokenizer *t, char hex[65]);

/* A dense row's full-vocabulary logsumexp (double, max-subtracted) and
 * argmax (first index on ties): the one definition the scorer and the
 * candidate-dump writer share, so that both give identical numbers. */
void kld_row_lse_argmax(const float *row, int32_t n_vocab, double *lse, int32_t *argmax);

/* A dense row's logits at ids idx[0..k) as a float16 dump stores them
 * (format v1 with "lse_of_stored"): shifted by the row's maximum (its
 * argmax from kld_row_lse_argmax), so that the likely ids get float16's
 * finest steps, and rounded to float16 (val, widened to float); *lse_stored
 * is the log-sum-exp, in the same shifted frame, of the stored values
 * together with the float32 logits of the ids not kept. The stored
 * distribution is then normalised exactly: its tail is the row's own, and
 * the rounding moves the truncated KL and its tail bin only at second
 * order (an f16 teacher's top-k with the log-sum-exp of the unrounded
 * logits moves them at first order, by up to half a float16 step of the
 * logits). The dump writer and the scorer of a live arm against a float16
 * teacher both call this, so that a candidate dump scores exactly as its
 * model. Fails (KLD_ERR_UNSUPPORTED) when a kept logit lies more than float16's
 * range below the maximum. */
kld_status kld_row_as_f16(const float *row, int32_t n_vocab, double lse, int32_t argmax,
                          const int32_t *idx, int32_t k, float *val, double *lse_stored,
                          kld_error *err);

/* The top k ids of a dense row by descending logit, ties to the lower id
 * (a teacher dump's record order). */
kld_status kld_row_topk(const float *row, int32_t n_vocab, int32_t k, int32_t *idx,
                        kld_error *err);

#endif
