/* serve_engine.c — the served arm: its model (opened through the arm spec,
 * so a policy, an adapter and levers apply as everywhere else), tokenizer,
 * chat template, `parallel` sessions on one thread pool, and the queue
 * through which handler threads hand prompts to the scheduler thread
 * (serve_sched.c) and wait for their results. */
#include "serve/serve.h"

#include "eval/arm.h"
#include "serve/sched.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SERVE_CHUNK 512

static void engine_free(kld_serve_engine *e) {
    if (e->slots)
        for (int i = 0; i < e->parallel; i++) {
            kld_session_free(e->slots[i].s);
            free(e->slots[i].row);
        }
    free(e->slots);
    free(e->logits);
    free(e->batch_logits);
    free(e->cand);
    free(e->prob);
    kld_chat_template_close(&e->chat);
    kld_pool_free(e->pool);
    kld_tok_free(e->tok);
    kld_model_close(e->model);
    free(e);
}

kld_status kld_serve_engine_open(const kld_arm_parsed *arm, int threads, int64_t n_ctx, int parallel,
                                 kld_serve_engine **out, kld_error *err) {
    *out = NULL;
    kld_serve_engine *e = calloc(1, sizeof *e);
    if (!e) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    kld_status st = kld_arm_spec_open_model(arm, &e->model, err);
    if (st != KLD_OK) goto fail;
    if ((st = kld_tok_open_source(kld_model_source(e->model), &e->tok, err)) != KLD_OK) {
        kld_error_prefix(err, "serving needs the model's tokenizer");
        goto fail;
    }
    if ((st = kld_chat_template_open(kld_model_source(e->model), e->tok, &e->chat, err)) != KLD_OK) goto fail;
    const kld_hparams *hp = kld_model_hparams(e->model);
    e->n_vocab = hp->n_vocab;
    e->n_ctx = n_ctx > 0 ? n_ctx : hp->n_ctx_train > 0 ? hp->n_ctx_train : 2048;
    /* prefill chunks as `kldeval logits` and `generate` feed them */
    e->chunk = e->n_ctx < SERVE_CHUNK ? e->n_ctx : SERVE_CHUNK;
    if (parallel < 1 || parallel > KLD_SERVE_MAX_PARALLEL || parallel > e->chunk) {
        st = kld_fail(err, KLD_ERR_ARG, "--parallel %d must be in [1, %lld] (at most %d, and a batched decode "
                      "step is one chunk of the context)", parallel,
                      (long long)(e->chunk < KLD_SERVE_MAX_PARALLEL ? e->chunk : KLD_SERVE_MAX_PARALLEL),
                      KLD_SERVE_MAX_PARALLEL);
        goto fail;
    }
    e->parallel = parallel;
    if (!(e->pool = kld_pool_create(threads))) {
        st = kld_fail(err, KLD_ERR_NOMEM, "out of memory for the thread pool");
        goto fail;
    }
    e->slots = calloc((size_t)parallel, sizeof *e->slots);
    e->logits = malloc((size_t)e->chunk * (size_t)e->n_vocab * sizeof(float));
    e->batch_logits = malloc((size_t)parallel * (size_t)e->n_vocab * sizeof(float));
    e->cand = malloc(2 * (size_t)e->n_vocab * sizeof *e->cand);
    e->prob = malloc((size_t)e->n_vocab * sizeof *e->prob);
    if (!e->slots || !e->logits || !e->batch_logits || !e->cand || !e->prob) {
        st = kld_fail(err, KLD_ERR_NOMEM, "out of memory for %lld rows of %lld logits", (long long)e->chunk,
                      (long long)e->n_vocab);
        goto fail;
    }
    kld_session_opts so = {e->n_ctx, e->chunk, 0, e->pool, &arm->levers, false, 0};
    for (int i = 0; i < parallel; i++) {
        if ((st = kld_session_create_opts(e->model, &so, &e->slots[i].s, err)) != KLD_OK) goto fail;
        if (!(e->slots[i].row = malloc((size_t)e->n_vocab * sizeof(float)))) {
            st = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
            goto fail;
        }
    }
    pthread_mutex_init(&e->lock, NULL);
    pthread_cond_init(&e->work, NULL);
    pthread_cond_init(&e->done, NULL);
    if (pthread_create(&e->thread, NULL, kld_serve_sched_main, e) != 0) {
        st = kld_fail(err, KLD_ERR_NOMEM, "cannot start the scheduler thread");
        pthread_mutex_destroy(&e->lock);
        pthread_cond_destroy(&e->work);
        pthread_cond_destroy(&e->done);
        goto fail;
    }
    e->thread_started = true;
    *out = e;
    return KLD_OK;
fail:
    engine_free(e);
    return st;
}

void kld_serve_engine_close(kld_serve_engine *e) {
    if (!e) return;
    pthread_mutex_lock(&e->lock);
    e->stopping = true;
    pthread_cond_broadcast(&e->work);
    pthread_mutex_unlock(&e->lock);
    pthread_join(e->thread, NULL);
    pthread_mutex_destroy(&e->lock);
    pthread_cond_destroy(&e->work);
    pthread_cond_destroy(&e->done);
    engine_free(e);
}

void kld_serve_result_free(kld_serve_result *r) {
    kld_tok_ids_free(&r->ids);
    free(r->logprob);
    free(r->lse);
    free(r->top_id);
    free(r->top_lp);
    memset(r, 0, sizeof *r);
}

kld_status kld_serve_engine_run(kld_serve_engine *e, const kld_serve_job *job, kld_serve_result *out,
                                kld_error *err) {
    memset(out, 0, sizeof *out);
    kld_serve_task t = {.job = job, .res = out};
    pthread_mutex_lock(&e->lock);
    if (e->stopping) {
        pthread_mutex_unlock(&e->lock);
        return kld_fail(err, KLD_ERR_INTERRUPTED, "the server is stopping");
    }
    if (e->tail) e->tail->next = &t;
    else e->head = &t;
    e->tail = &t;
    pthread_cond_signal(&e->work);
    while (!t.finished) {
        if (!job->gone) {
            pthread_cond_wait(&e->done, &e->lock);
            continue;
        }
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 50 * 1000 * 1000;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        if (pthread_cond_timedwait(&e->done, &e->lock, &until) != 0 && !t.finished && !t.cancelled &&
            job->gone())
            t.cancelled = true; /* the scheduler drops the run at its next step */
    }
    pthread_mutex_unlock(&e->lock);
    if (t.st != KLD_OK) {
        *err = t.err;
        kld_serve_result_free(out);
    }
    return t.st;
}
