/* serve_sched.c — the scheduler thread: takes queued prompts into free
 * session slots, prefills each (in chunks of up to 512, as `kldeval
 * logits` and `generate` do, scoring the echoed prompt's rows), then
 * repeatedly draws every slot's next token and runs one decode step for
 * all of them together (kld_session_decode_batch: each row bit-identical
 * to decoding that session alone), so what a request is served does not
 * depend on what else is in flight. */
#include "serve/sched.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void finish(kld_serve_engine *e, kld_serve_slot *sl, kld_status st, const kld_error *err) {
    pthread_mutex_lock(&e->lock);
    sl->task->st = st;
    if (err) sl->task->err = *err;
    sl->task->finished = true; /* the waiter may free the task from now on */
    pthread_cond_broadcast(&e->done);
    pthread_mutex_unlock(&e->lock);
    sl->task = NULL;
}

/* Entry t (token ids[t]) from the row that predicted it. */
static void score_row(const kld_serve_engine *e, kld_serve_result *r, const float *row, size_t t) {
    const double lse = kld_serve_lse(row, e->n_vocab);
    const size_t k = t - r->first;
    r->lse[k] = lse;
    r->logprob[k] = kld_serve_logprob(row, e->n_vocab, lse, r->ids.ids[t]);
    kld_serve_top(row, e->n_vocab, lse, r->n_top, r->top_id + k * (size_t)r->n_top,
                  r->top_lp + k * (size_t)r->n_top);
}

/* The result's arrays, the prompt through the slot's session, and the row
 * the first token is drawn from in sl->row. */
static kld_status prefill(kld_serve_engine *e, kld_serve_slot *sl, kld_error *err) {
    const kld_serve_job *job = sl->task->job;
    kld_serve_result *r = sl->task->res;
    const size_t np = job->n_prompt;
    if (np == 0 || job->max_tokens < 0 || (int64_t)np + job->max_tokens > e->n_ctx)
        return kld_fail(err, KLD_ERR_ARG, "%zu prompt tokens + %lld to generate exceed the context of %lld",
                        np, (long long)job->max_tokens, (long long)e->n_ctx);
    if (!kld_tok_ids_append(&r->ids, job->prompt, np)) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    r->n_prompt = np;
    r->first = job->echo ? 0 : np;
    r->finish_reason = "length";
    const bool want_lp = job->n_top >= 0;
    r->n_top = want_lp ? (job->n_top < e->n_vocab ? job->n_top : e->n_vocab) : 0;
    if (want_lp) {
        const size_t n_rows = (job->echo ? np : 0) + (size_t)job->max_tokens + 1;
        r->logprob = malloc(n_rows * sizeof *r->logprob);
        r->lse = malloc(n_rows * sizeof *r->lse);
        r->top_id = malloc(n_rows * ((size_t)r->n_top + 1) * sizeof *r->top_id);
        r->top_lp = malloc(n_rows * ((size_t)r->n_top + 1) * sizeof *r->top_lp);
        if (!r->logprob || !r->lse || !r->top_id || !r->top_lp)
            return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
        if (job->echo) r->logprob[0] = r->lse[0] = NAN;
    }
    kld_session_reset(sl->s);
    sl->generated = 0;
    const bool all_rows = want_lp && job->echo;
    kld_status st;
    for (size_t i = 0; i < np; i += (size_t)e->chunk) {
        const int64_t c = (int64_t)(np - i < (size_t)e->chunk ? np - i : (size_t)e->chunk);
        const bool last = i + (size_t)c == np;
        if (all_rows) {
            if ((st = kld_session_eval(sl->s, job->prompt + i, c, e->logits, err)) != KLD_OK) return st;
            for (int64_t j = 0; j < c; j++)
                if (i + (size_t)j + 1 < np) score_row(e, r, e->logits + j * e->n_vocab, i + (size_t)j + 1);
            if (last) memcpy(sl->row, e->logits + (c - 1) * e->n_vocab, (size_t)e->n_vocab * sizeof(float));
        } else {
            st = kld_session_eval_rows(sl->s, job->prompt + i, c, c - 1, last ? sl->row : NULL, err);
            if (st != KLD_OK) return st;
        }
    }
    return KLD_OK;
}

/* Draws the slot's next token: true with *next when it needs a decode step,
 * false once its run is finished (and reported). */
static bool draw(kld_serve_engine *e, kld_serve_slot *sl, int32_t *next) {
    const kld_serve_job *job = sl->task->job;
    kld_serve_result *r = sl->task->res;
    pthread_mutex_lock(&e->lock);
    const bool cancelled = sl->task->cancelled;
    e->n_cancelled += cancelled;
    pthread_mutex_unlock(&e->lock);
    if (cancelled) { /* nobody is waiting for the rest */
        kld_error err;
        kld_fail(&err, KLD_ERR_INTERRUPTED, "the client disconnected");
        finish(e, sl, KLD_ERR_INTERRUPTED, &err);
        return false;
    }
    if (sl->generated >= job->max_tokens) {
        finish(e, sl, KLD_OK, NULL);
        return false;
    }
    const double u = kld_cap_uniform(job->sampler.seed, job->item, 0, (uint64_t)sl->generated);
    const int32_t tok = kld_cap_sample(&job->sampler, sl->row, e->n_vocab, u, e->cand, e->prob);
    if (!kld_tok_ids_append(&r->ids, &tok, 1)) {
        kld_error err;
        kld_fail(&err, KLD_ERR_NOMEM, "out of memory");
        finish(e, sl, KLD_ERR_NOMEM, &err);
        return false;
    }
    if (job->n_top >= 0) score_row(e, r, sl->row, r->ids.n - 1);
    sl->generated++;
    if ((tok == kld_tok_eos(e->tok) && !job->ignore_eos) ||
        (job->stop && job->stop(job->stop_ctx, r->ids.ids, r->n_prompt, r->ids.n))) {
        r->finish_reason = "stop";
        finish(e, sl, KLD_OK, NULL);
        return false;
    }
    if (sl->generated == job->max_tokens) {
        finish(e, sl, KLD_OK, NULL);
        return false;
    }
    *next = tok;
    return true;
}

/* One decode step of the k slots in idx with their tokens. */
static void decode_step(kld_serve_engine *e, const int *idx, const int32_t *toks, int k) {
    kld_session *ss[KLD_SERVE_MAX_PARALLEL];
    for (int j = 0; j < k; j++) ss[j] = e->slots[idx[j]].s;
    kld_error err = {0};
    kld_status st;
    if (k == 1) {
        st = kld_session_decode(ss[0], toks[0], e->slots[idx[0]].row, &err);
    } else {
        st = kld_session_decode_batch(ss, k, toks, e->batch_logits, &err);
        for (int j = 0; j < k && st == KLD_OK; j++)
            memcpy(e->slots[idx[j]].row, e->batch_logits + (size_t)j * (size_t)e->n_vocab,
                   (size_t)e->n_vocab * sizeof(float));
    }
    if (st != KLD_OK)
        for (int j = 0; j < k; j++) finish(e, &e->slots[idx[j]], st, &err);
    pthread_mutex_lock(&e->lock);
    e->n_steps++;
    e->n_batched_rows += (uint64_t)k;
    if ((uint64_t)k > e->max_batch) e->max_batch = (uint64_t)k;
    pthread_mutex_unlock(&e->lock);
}

void *kld_serve_sched_main(void *arg) {
    kld_serve_engine *e = arg;
    bool fresh[KLD_SERVE_MAX_PARALLEL];
    int idx[KLD_SERVE_MAX_PARALLEL];
    int32_t toks[KLD_SERVE_MAX_PARALLEL];
    for (;;) {
        int active = 0;
        pthread_mutex_lock(&e->lock);
        for (int i = 0; i < e->parallel; i++) active += e->slots[i].task != NULL;
        while (!active && !e->head && !e->stopping) pthread_cond_wait(&e->work, &e->lock);
        if (!active && !e->head && e->stopping) {
            pthread_mutex_unlock(&e->lock);
            break;
        }
        for (int i = 0; i < e->parallel; i++) {
            fresh[i] = false;
            if (!e->slots[i].task && e->head) {
                e->slots[i].task = e->head;
                e->head = e->head->next;
                if (!e->head) e->tail = NULL;
                fresh[i] = true;
            }
        }
        pthread_mutex_unlock(&e->lock);
        for (int i = 0; i < e->parallel; i++) {
            kld_error err = {0};
            kld_status st;
            if (fresh[i] && (st = prefill(e, &e->slots[i], &err)) != KLD_OK) finish(e, &e->slots[i], st, &err);
        }
        int k = 0;
        for (int i = 0; i < e->parallel; i++)
            if (e->slots[i].task && draw(e, &e->slots[i], &toks[k])) idx[k++] = i;
        if (k) decode_step(e, idx, toks, k);
    }
    return NULL;
}
