/* serve_engine.c — the served arm: its model (opened through the arm spec,
 * so a policy, an adapter and levers apply as everywhere else), tokenizer,
 * chat template and one session behind a lock. A prompt runs as `kldeval
 * logits` and `kldeval generate` run it — prefill in chunks of up to 512,
 * then one decode step per token — so the rows served are theirs bit for bit. */
#include "serve/serve.h"

#include "eval/arm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SERVE_CHUNK 512

kld_status kld_serve_engine_open(const kld_arm_parsed *arm, int threads, int64_t n_ctx,
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
    e->chunk = e->n_ctx < SERVE_CHUNK ? e->n_ctx : SERVE_CHUNK;
    kld_session_opts so = {e->n_ctx, e->chunk, threads, NULL, &arm->levers, false};
    if ((st = kld_session_create_opts(e->model, &so, &e->session, err)) != KLD_OK) goto fail;
    e->logits = malloc((size_t)e->chunk * (size_t)e->n_vocab * sizeof(float));
    e->cand = malloc(2 * (size_t)e->n_vocab * sizeof *e->cand);
    e->prob = malloc((size_t)e->n_vocab * sizeof *e->prob);
    if (!e->logits || !e->cand || !e->prob) {
        st = kld_fail(err, KLD_ERR_NOMEM, "out of memory for %lld rows of %lld logits",
                      (long long)e->chunk, (long long)e->n_vocab);
        goto fail;
    }
    pthread_mutex_init(&e->lock, NULL);
    *out = e;
    return KLD_OK;
fail:
    free(e->logits);
    free(e->cand);
    free(e->prob);
    kld_chat_template_close(&e->chat);
    kld_session_free(e->session);
    kld_tok_free(e->tok);
    kld_model_close(e->model);
    free(e);
    return st;
}

void kld_serve_engine_close(kld_serve_engine *e) {
    if (!e) return;
    pthread_mutex_destroy(&e->lock);
    free(e->logits);
    free(e->cand);
    free(e->prob);
    kld_chat_template_close(&e->chat);
    kld_session_free(e->session);
    kld_tok_free(e->tok);
    kld_model_close(e->model);
    free(e);
}

void kld_serve_result_free(kld_serve_result *r) {
    kld_tok_ids_free(&r->ids);
    free(r->logprob);
    free(r->top_id);
    free(r->top_lp);
    memset(r, 0, sizeof *r);
}

/* Entry t (token ids[t]) from the row that predicted it. */
static void score_row(const kld_serve_engine *e, kld_serve_result *r, const float *row, size_t t) {
    const double lse = kld_serve_lse(row, e->n_vocab);
    const size_t k = t - r->first;
    r->logprob[k] = kld_serve_logprob(row, e->n_vocab, lse, r->ids.ids[t]);
    kld_serve_top(row, e->n_vocab, lse, r->n_top, r->top_id + k * (size_t)r->n_top,
                  r->top_lp + k * (size_t)r->n_top);
}

static kld_status run_locked(kld_serve_engine *e, const kld_serve_job *job, kld_serve_result *r,
                             kld_error *err) {
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
        r->top_id = malloc(n_rows * ((size_t)r->n_top + 1) * sizeof *r->top_id);
        r->top_lp = malloc(n_rows * ((size_t)r->n_top + 1) * sizeof *r->top_lp);
        if (!r->logprob || !r->top_id || !r->top_lp) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
        if (job->echo) r->logprob[0] = NAN;
    }
    kld_session_reset(e->session);
    const bool all_rows = want_lp && job->echo;
    const float *row = NULL;
    kld_status st;
    for (size_t i = 0; i < np; i += (size_t)e->chunk) {
        const int64_t c = (int64_t)(np - i < (size_t)e->chunk ? np - i : (size_t)e->chunk);
        const bool last = i + (size_t)c == np;
        if (all_rows) {
            if ((st = kld_session_eval(e->session, job->prompt + i, c, e->logits, err)) != KLD_OK) return st;
            for (int64_t j = 0; j < c; j++)
                if (i + (size_t)j + 1 < np) score_row(e, r, e->logits + j * e->n_vocab, i + (size_t)j + 1);
            row = e->logits + (c - 1) * e->n_vocab;
        } else {
            st = kld_session_eval_rows(e->session, job->prompt + i, c, c - 1, last ? e->logits : NULL, err);
            if (st != KLD_OK) return st;
            row = e->logits;
        }
    }
    const int32_t eos = kld_tok_eos(e->tok);
    for (int64_t g = 0; g < job->max_tokens; g++) {
        const double u = kld_cap_uniform(job->sampler.seed, job->item, 0, (uint64_t)g);
        const int32_t next = kld_cap_sample(&job->sampler, row, e->n_vocab, u, e->cand, e->prob);
        if (!kld_tok_ids_append(&r->ids, &next, 1)) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
        if (want_lp) score_row(e, r, row, r->ids.n - 1);
        if ((next == eos && !job->ignore_eos) ||
            (job->stop && job->stop(job->stop_ctx, r->ids.ids, np, r->ids.n))) {
            r->finish_reason = "stop";
            break;
        }
        if (g + 1 < job->max_tokens) {
            if ((st = kld_session_decode(e->session, next, e->logits, err)) != KLD_OK) return st;
            row = e->logits;
        }
    }
    return KLD_OK;
}

kld_status kld_serve_engine_run(kld_serve_engine *e, const kld_serve_job *job, kld_serve_result *out,
                                kld_error *err) {
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&e->lock);
    kld_status st = run_locked(e, job, out, err);
    pthread_mutex_unlock(&e->lock);
    if (st != KLD_OK) kld_serve_result_free(out);
    return st;
}
