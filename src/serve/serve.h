/* serve.h — `kldeval serve`: one arm (a model spec with its policy, adapter
 * and levers, eval/arm.h) over HTTP in the OpenAI completions protocol.
 *
 *   serve_engine.c       the arm's model, sessions and tokenizer; the job queue
 *   serve_sched.c        the scheduler: prefill, echo rows, sampling, and one
 *                        batched decode step for every prompt in flight
 *   serve_logprob.c      log-softmax and the top-N of one f32 logits row
 *   serve_text.c         token and completion text as JSON-safe UTF-8, offsets
 *   serve_request.c      typed fields of a JSON request, 400s naming field + value
 *   serve_params.c       generation parameters of a request, stop strings
 *   serve_completions.c  POST /v1/completions
 *   serve_chat.c         POST /v1/chat/completions (the model's chat template)
 *   serve_tokenize.c     /tokenize, /detokenize, /tokenizer_info, /v1/models, /health
 *   serve_http.c         libmicrohttpd: bodies and their limit, auth, routing, SIGTERM
 * Handlers see JSON in and a reply out; only serve_http.c knows HTTP. */
#ifndef KLD_SERVE_SERVE_H
#define KLD_SERVE_SERVE_H

#include "cap/sampler.h"
#include "chat/chat.h"
#include "common/common.h"
#include "engine/engine.h"
#include "tokenizer/tokenizer.h"

#include <jansson.h>
#include <pthread.h>
#include <signal.h>

struct kld_arm_parsed;

/* ---- the engine (serve_engine.c) ---- */

#define KLD_SERVE_MAX_PARALLEL 64

typedef struct kld_serve_task kld_serve_task; /* a queued run (serve_sched.c) */
typedef struct kld_serve_slot kld_serve_slot;

typedef struct kld_serve_engine {
    kld_model *model;
    kld_pool *pool;
    kld_tokenizer *tok;
    kld_chat_template chat;
    int64_t n_vocab, n_ctx, chunk;
    int parallel;            /* sessions: prompts decoded together */
    kld_serve_slot *slots;   /* [parallel] */
    float *logits;           /* [chunk][n_vocab] prefill scratch of the scheduler */
    float *batch_logits;     /* [parallel][n_vocab] */
    kld_cap_cand *cand;      /* [2 n_vocab] sampler scratch */
    double *prob;            /* [n_vocab] */
    /* the queue, guarded by lock; the scheduler thread runs every task */
    pthread_mutex_t lock;
    pthread_cond_t work, done;
    kld_serve_task *head, *tail;
    bool stopping;
    pthread_t thread;
    bool thread_started;
    uint64_t n_steps, n_batched_rows, max_batch; /* decode steps, rows in them, the largest batch */
    uint64_t n_cancelled;    /* runs stopped because their client left */
} kld_serve_engine;

/* Opens the arm's model (kld_arm_spec_open_model: policy, adapter, levers
 * checked), its tokenizer and chat template, and `parallel` sessions of
 * n_ctx positions (0: the model's training context, else 2048) on one pool
 * of threads threads (0: all cores), and starts the scheduler: requests in
 * flight share each decode step (kld_session_decode_batch, whose rows are
 * bit-identical to one-session decoding). */
kld_status kld_serve_engine_open(const struct kld_arm_parsed *arm, int threads, int64_t n_ctx, int parallel,
                                 kld_serve_engine **out, kld_error *err);
void kld_serve_engine_close(kld_serve_engine *e);

/* Called after each generated token with all ids so far (prompt first):
 * true stops the generation (a stop string was produced). */
typedef bool (*kld_serve_stop_fn)(void *ctx, const int32_t *ids, size_t n_prompt, size_t n);

typedef struct kld_serve_job {
    const int32_t *prompt;   /* ids in [0, n_vocab), n_prompt >= 1 */
    size_t n_prompt;
    int64_t max_tokens;      /* >= 0; n_prompt + max_tokens <= n_ctx */
    kld_cap_sampler sampler;
    uint64_t item;           /* the prompt's index: the sampler's draw is (seed, item, 0, step) */
    bool echo;               /* log-probabilities of the prompt's tokens too */
    int64_t n_top;           /* < 0: no log-probabilities; else top-N alternatives per token */
    bool ignore_eos;
    kld_serve_stop_fn stop;  /* may be NULL */
    void *stop_ctx;
    /* Asked by the waiting thread every 50 ms: true when whoever asked has
     * gone (the client disconnected), so the run stops; may be NULL. */
    bool (*gone)(void);
} kld_serve_job;

typedef struct kld_serve_result {
    kld_tok_ids ids;         /* prompt + generated */
    size_t n_prompt;
    /* When n_top >= 0, for token t of ids (first = 0 with echo, else
     * n_prompt): logprob[t] (NAN for t = 0), lse[t] its row's logsumexp,
     * top_id/top_lp[t][n_top]. */
    size_t first;
    double *logprob;
    double *lse;
    int32_t *top_id;
    double *top_lp;
    int64_t n_top;
    const char *finish_reason; /* "length" or "stop" */
} kld_serve_result;

/* Queues the job and waits for its result (any thread). */
kld_status kld_serve_engine_run(kld_serve_engine *e, const kld_serve_job *job, kld_serve_result *out,
                                kld_error *err);
/* serve_sched.c: the scheduler thread's body (arg: the engine). */
void *kld_serve_sched_main(void *arg);
void kld_serve_result_free(kld_serve_result *r);

/* ---- log-probabilities (serve_logprob.c) ---- */

/* The row's logsumexp in float64 (as the KL statistics compute it). */
double kld_serve_lse(const float *logits, int64_t n_vocab);
/* log-softmax of logits[id] in float64, and the n_top largest of the row
 * (ties to the lower id) with their log-probabilities. */
double kld_serve_logprob(const float *logits, int64_t n_vocab, double lse, int32_t id);
void kld_serve_top(const float *logits, int64_t n_vocab, double lse, int64_t n_top, int32_t *top_id,
                   double *top_lp);

/* ---- text (serve_text.c) ---- */

/* s[0..n) as valid UTF-8 (each ill-formed byte becomes U+FFFD), malloc'd;
 * when char_at is given it receives n + 1 entries: the character offset
 * of each input byte (and of the end). NULL when out of memory. */
char *kld_serve_utf8(const char *s, size_t n, size_t **char_at);
/* The raw bytes token ids[t] adds to the text of the tokens before it
 * (taken in context); a special (control) token's piece, *special set, as
 * texts skip those. malloc'd, *len bytes. */
char *kld_serve_token_bytes(const kld_tokenizer *tok, const int32_t *ids, size_t t, size_t *len,
                            bool *special);
/* Raw token bytes as a JSON-safe token string: itself when valid UTF-8,
 * else "bytes:\xNN..." as OpenAI's API spells such tokens. malloc'd. */
char *kld_serve_token_string(const char *raw, size_t len);
/* The text ids[n_prompt..n) add after the prompt's, raw bytes, malloc'd. */
char *kld_serve_completion_bytes(const kld_tokenizer *tok, const int32_t *ids, size_t n_prompt, size_t n,
                                 size_t *len);
/* decode(ids[0..n)) with special tokens skipped, malloc'd raw bytes (*len). */
char *kld_serve_decode(const kld_tokenizer *tok, const int32_t *ids, size_t n, size_t *len);

/* ---- requests and replies (serve_request.c) ---- */

typedef struct kld_serve_reply {
    unsigned status;
    json_t *body;
} kld_serve_reply;

/* An OpenAI-style {"error": {"message", "type", "param", "code"}} reply. */
void kld_serve_error(kld_serve_reply *r, unsigned status, const char *param, const char *fmt, ...)
    KLD_PRINTF(4, 5);
/* The value as short JSON text for a message (truncated), static buffer per thread. */
const char *kld_serve_show(const json_t *v);

/* Typed optional fields: absent keeps *out; a wrong type or a value out of
 * [lo, hi] is a 400 naming the field and the value (false). */
bool kld_serve_get_int(const json_t *req, const char *key, int64_t lo, int64_t hi, int64_t *out,
                       kld_serve_reply *r);
bool kld_serve_get_real(const json_t *req, const char *key, double lo, double hi, double *out,
                        kld_serve_reply *r);
bool kld_serve_get_bool(const json_t *req, const char *key, bool *out, kld_serve_reply *r);
/* A token-id list (each in [0, n_vocab)) into ids; field names the place. */
bool kld_serve_get_ids(const json_t *v, const char *field, int64_t n_vocab, kld_tok_ids *ids,
                       kld_serve_reply *r);

/* ---- generation parameters (serve_params.c) ---- */

#define KLD_SERVE_MAX_STOP 16

typedef struct kld_serve_params {
    int64_t max_tokens;      /* -1 (chat without one): the rest of the context */
    int64_t n_top;           /* logprobs N; -1: none */
    kld_cap_sampler sampler;
    bool echo, ignore_eos;
    bool ids_as_text;        /* return_tokens_as_token_ids (vLLM's option): tokens and
                                top_logprobs keys are "token_id:ID", exact whatever the text */
    bool with_lse;           /* return_logsumexp (kldeval's own): logprobs.logsumexp, each row's
                                float64 logsumexp, so that a client recovers the f32 logits */
    const char *stop[KLD_SERVE_MAX_STOP]; /* borrowed from the request */
    size_t n_stop;
} kld_serve_params;

struct kld_server;
/* The parameters of a completions (chat false) or chat request; a 400
 * naming the field otherwise. */
bool kld_serve_read_params(const struct kld_server *s, const json_t *req, bool chat, kld_serve_params *p,
                           kld_serve_reply *r);
/* Where the earliest stop string starts in text[0..len) (SIZE_MAX: none). */
size_t kld_serve_find_stop(const kld_serve_params *p, const char *text, size_t len);
/* The engine's stop callback: ctx is a kld_serve_stop_check, whose cut it
 * sets to where the stop string starts in the completion's bytes. */
typedef struct kld_serve_stop_check {
    const kld_tokenizer *tok;
    const kld_serve_params *p;
    size_t cut;
} kld_serve_stop_check;
bool kld_serve_stop_strings(void *ctx, const int32_t *ids, size_t n_prompt, size_t n);

/* ---- the server (serve_http.c and the handlers) ---- */

typedef struct kld_serve_opts {
    const char *host;        /* default 127.0.0.1 */
    int port;                /* 0: any free port (printed) */
    const char *api_key;     /* NULL: none */
    const char *model_id;    /* the name clients use ("model" field, /v1/models) */
    size_t max_body;         /* bytes */
    int64_t max_prompts;     /* prompts per request */
    int64_t max_logprobs;    /* top-logprob entries in one reply (tokens x logprobs N) */
    unsigned timeout_s;      /* idle connection timeout */
    int max_connections;
} kld_serve_opts;

typedef struct kld_server {
    kld_serve_engine *engine;
    const kld_serve_opts *opts;
} kld_server;

/* Handlers: req is the parsed body (NULL for GET). */
void kld_serve_completions(kld_server *s, const json_t *req, kld_serve_reply *r);
void kld_serve_chat(kld_server *s, const json_t *req, kld_serve_reply *r);
void kld_serve_tokenize(kld_server *s, const json_t *req, kld_serve_reply *r);
void kld_serve_detokenize(kld_server *s, const json_t *req, kld_serve_reply *r);
void kld_serve_tokenizer_info(kld_server *s, const json_t *req, kld_serve_reply *r);
void kld_serve_models(kld_server *s, const json_t *req, kld_serve_reply *r);
void kld_serve_health(kld_server *s, const json_t *req, kld_serve_reply *r);
/* A "model" field naming another model is a 404 (false). */
bool kld_serve_check_model(const kld_server *s, const json_t *req, kld_serve_reply *r);

/* True when the client of the request this thread is handling has closed
 * its connection (serve_http.c; a kld_serve_job's gone). */
bool kld_serve_client_gone(void);
/* Blocks SIGTERM and SIGINT (kld_serve_run takes them with sigwait) and
 * ignores SIGPIPE. Call it before any thread starts (the engine's pool and
 * scheduler, the HTTP threads), as threads inherit the mask: a signal that
 * reached one of them would kill the process instead of draining it. */
void kld_serve_block_signals(sigset_t *sigs);
/* Listens (printing "kldeval serve: listening on http://HOST:PORT" to
 * stderr once ready), serves until SIGTERM or SIGINT, then lets requests in
 * flight finish. Errors (address in use, a bad host) are returned. */
kld_status kld_serve_run(kld_server *s, kld_error *err);

#endif
