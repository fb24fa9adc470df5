/* score.c — row pairs → position records (see score.h). */
#include "eval/score.h"

#include "engine/pool.h"
#include "eval/strata.h"

#include <math.h>
#include <stdlib.h>

#define MAX_THREADS 64

/* Per-thread buffers of the truncated path, one vocabulary long. */
typedef struct scratch {
    int32_t *idx;
    double *lp, *lq;
    float *rank_ref, *rank_arm;
    float *gather_ref, *gather_arm; /* dense × dense over a vocabulary subset */
} scratch;

struct kld_scorer {
    kld_pool *pool;
    kld_scorer_opts o;
    kld_position *recs;
    scratch sc[MAX_THREADS];
    int n_threads;
};

kld_status kld_scorer_check_kinds(kld_rows_kind ref, kld_rows_kind arm, kld_error *err) {
    if (ref == KLD_ROWS_TOPK || (arm == KLD_ROWS_TOPK && ref != KLD_ROWS_DENSE))
        return kld_fail(err, KLD_ERR_ARG, "a completions endpoint is an arm scored against a model");
    if (arm == KLD_ROWS_LOGPROB)
        return kld_fail(err, KLD_ERR_ARG, "a llama.cpp base file can only be the reference");
    if (ref == KLD_ROWS_DENSE && arm == KLD_ROWS_SPARSE)
        return kld_fail(err, KLD_ERR_ARG,
                        "a candidate dump is scored against its teacher dump (--reference-logits), "
                        "not against a model");
    if (ref == KLD_ROWS_LOGPROB && arm == KLD_ROWS_SPARSE)
        return kld_fail(err, KLD_ERR_ARG, "a dump cannot be scored against a llama.cpp base file");
    return KLD_OK;
}

kld_status kld_scorer_create(kld_pool *pool, const kld_scorer_opts *o, kld_scorer **out,
                             kld_error *err) {
    *out = NULL;
    kld_scorer *s = calloc(1, sizeof *s);
    if (!s) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    s->pool = pool;
    s->o = *o;
    s->n_threads = kld_pool_size(pool);
    if (s->n_threads > MAX_THREADS) {
        int n = s->n_threads;
        free(s);
        return kld_fail(err, KLD_ERR_ARG, "at most %d threads (asked for %d)", MAX_THREADS, n);
    }
    s->recs = malloc((size_t)o->max_rows * sizeof *s->recs);
    bool ok = s->recs != NULL;
    size_t v = (size_t)o->n_vocab;
    if (o->ref_n_vocab > o->n_vocab) v = (size_t)o->ref_n_vocab;
    for (int t = 0; t < s->n_threads && ok; t++) {
        scratch *c = &s->sc[t];
        c->idx = malloc(v * sizeof *c->idx);
        c->lp = malloc(v * sizeof *c->lp);
        c->lq = malloc(v * sizeof *c->lq);
        c->rank_ref = malloc(v * sizeof *c->rank_ref);
        c->rank_arm = malloc(v * sizeof *c->rank_arm);
        ok = c->idx && c->lp && c->lq && c->rank_ref && c->rank_arm;
        if (ok && o->common) {
            c->gather_ref = malloc((size_t)o->n_common * sizeof(float));
            c->gather_arm = malloc((size_t)o->n_common * sizeof(float));
            ok = c->gather_ref && c->gather_arm;
        }
    }
    if (!ok) {
        kld_scorer_free(s);
        return kld_fail(err, KLD_ERR_NOMEM, "out of memory for the scorer");
    }
    *out = s;
    return KLD_OK;
}

void kld_scorer_free(kld_scorer *s) {
    if (!s) return;
    for (int t = 0; t < MAX_THREADS; t++) {
        scratch *c = &s->sc[t];
        free(c->idx);
        free(c->lp);
        free(c->lq);
        free(c->rank_ref);
        free(c->rank_arm);
        free(c->gather_ref);
        free(c->gather_arm);
    }
    free(s->recs);
    free(s);
}

/* ---- one row per kind pair ---- */

static kld_status dense_dense(kld_scorer *s, scratch *c, const float *lr, const float *la,
                              int32_t next, kld_position *out, kld_error *err) {
    const kld_scorer_opts *o = &s->o;
    if (!o->common) return kld_position_compute(lr, la, o->n_vocab, next, o->topk, out, err);
    /* different vocabularies: the ids spelled alike, renormalised over them */
    int32_t cnext = -1;
    for (int32_t k = 0; k < o->n_common; k++) {
        c->gather_ref[k] = lr[o->common[k]];
        c->gather_arm[k] = la[o->common[k]];
        if (o->common[k] == next) cnext = k;
    }
    return kld_position_compute(c->gather_ref, c->gather_arm, o->n_common, cnext, o->topk, out, err);
}

/* A teacher's sparse row r against the arm's row r (dense or a candidate dump). */
static kld_status sparse_row(kld_scorer *s, scratch *c, const kld_window *w, const kld_rows *ref,
                             const kld_rows *arm, int64_t r, kld_position *out, kld_error *err) {
    int32_t k = ref->k, next = kld_window_next(w, ref->row0 + r);
    kld_status st;
    const int32_t *idx = ref->idx + (size_t)r * (size_t)k;
    const float *rv = ref->val + (size_t)r * (size_t)k;
    kld_trunc_row tr = {.n = k, .idx = idx, .lp = c->lp, .lq = c->lq, .rank_ref = rv,
                        .rank_arm = c->rank_arm, .top_ref = ref->argmax[r], .next_token = next,
                        .logp_next_ref = ref->logp_next[r], .tail_ref = NAN, .tail_arm = NAN};
    tr.full = s->o.ref_n_vocab > 0 && k == s->o.ref_n_vocab;
    tr.f16_ref = ref->f16;
    tr.no_bound = ref->f16_raw;
    const int32_t *aidx = arm->kind == KLD_ROWS_SPARSE ? arm->idx + (size_t)r * (size_t)k : NULL;
    const float *av = arm->kind == KLD_ROWS_SPARSE ? arm->val + (size_t)r * (size_t)k : NULL;
    if (aidx && (!arm->at_teacher_ids || arm->k != k || memcmp(aidx, idx, (size_t)k * sizeof *idx)))
        return kld_fail(err, KLD_ERR_MISMATCH,
                        "window %lld row %lld: the candidate dump's indices are not the "
                        "teacher's (make it with kldeval dump --indices-from TEACHER)",
                        (long long)0, (long long)(ref->row0 + r));
    if (tr.full && !ref->f16 && !s->o.common && (aidx ? !arm->f16 : arm->n_vocab == k)) {
        /* the whole vocabulary in float32: the teacher's row (and a candidate
         * dump's), scattered back, is scored as the lockstep run scores it
         * (same kernels), so a candidate dump gives its model's figures */
        float *dense = c->rank_ref, *dense_arm = c->rank_arm;
        for (int32_t j = 0; j < k; j++) dense[idx[j]] = rv[j];
        if (aidx)
            for (int32_t j = 0; j < k; j++) dense_arm[idx[j]] = av[j];
        st = kld_position_compute(dense, aidx ? dense_arm : arm->logits + (size_t)r * (size_t)arm->n_vocab,
                                  k, next, s->o.topk, out, err);
        return st;
    }
    for (int32_t j = 0; j < k; j++) c->lp[j] = (double)rv[j] - ref->lse[r];
    if (arm->kind == KLD_ROWS_DENSE) {
        const float *row = arm->logits + (size_t)r * (size_t)arm->n_vocab;
        double lse, lse_arm;
        kld_row_lse_argmax(row, arm->n_vocab, &lse, &tr.top_arm);
        if (ref->f16) {
            /* against a float16 teacher the arm is rounded as its candidate
             * dump would store it: both ways give the same figures, and both
             * sides carry the same (second-order) rounding */
            if ((st = kld_row_as_f16(row, arm->n_vocab, lse, tr.top_arm, idx, k, c->rank_arm,
                                     &lse_arm, err)))
                return st;
            for (int32_t j = 0; j < k; j++) c->lq[j] = (double)c->rank_arm[j] - lse_arm;
            tr.f16_arm = true;
        } else {
            for (int32_t j = 0; j < k; j++) {
                c->rank_arm[j] = row[idx[j]];
                c->lq[j] = (double)row[idx[j]] - lse;
            }
        }
        tr.logp_next_arm = next >= 0 ? (double)row[next] - lse : NAN;
    } else {
        tr.rank_arm = av;
        for (int32_t j = 0; j < k; j++) c->lq[j] = (double)av[j] - arm->lse[r];
        tr.top_arm = arm->argmax[r];
        tr.logp_next_arm = arm->logp_next[r];
        tr.f16_arm = arm->f16;
        tr.no_bound = tr.no_bound || arm->f16_raw;
    }
    if (next >= 0 && isnan(tr.logp_next_arm))
        return kld_fail(err, KLD_ERR_FORMAT,
                        "row %lld: the candidate dump has no log-probability of the next token "
                        "(its seq-<i>.ext.bin sidecar is missing)", (long long)(ref->row0 + r));
    /* the arm's rank stays unknown here although a live arm has its whole
     * row: a candidate dump, which has not, must score exactly as its model */
    return kld_position_truncated(&tr, s->o.topk, out, err);
}

/* A dense reference row against an arm known on its own top k (an
 * endpoint). k = n_vocab: the whole row, scored as a dense pair. Else the
 * subset S is the arm's top k (where both sides are known); the reference's
 * own top-k ids outside S have no arm value and fall, with the rest, in the
 * tail bin: kld is sum_S p ln(p/q) and kld_bound the (k+1)-bin coarsening's
 * KL, a lower bound of the full KL (stats.h; docs/serve.md). */
static kld_status topk_row(kld_scorer *s, scratch *c, const kld_window *w, const kld_rows *ref,
                           const kld_rows *arm, int64_t r, kld_position *out, kld_error *err) {
    int32_t nv = ref->n_vocab, k = arm->k, next = kld_window_next(w, ref->row0 + r);
    const float *row = ref->logits + (size_t)r * (size_t)nv;
    const int32_t *idx = arm->idx + (size_t)r * (size_t)k;
    const float *av = arm->val + (size_t)r * (size_t)k;
    if (k == nv && !s->o.common) {
        for (int32_t j = 0; j < k; j++) c->rank_arm[idx[j]] = av[j];
        return kld_position_compute(row, c->rank_arm, nv, next, s->o.topk, out, err);
    }
    double lse;
    kld_trunc_row tr = {.n = k, .idx = idx, .lp = c->lp, .lq = c->lq, .rank_ref = c->rank_ref,
                        .rank_arm = av, .top_arm = arm->argmax[r], .next_token = next,
                        .logp_next_arm = arm->logp_next[r], .tail_ref = NAN, .tail_arm = NAN};
    kld_row_lse_argmax(row, nv, &lse, &tr.top_ref);
    for (int32_t j = 0; j < k; j++) {
        c->rank_ref[j] = row[idx[j]];
        c->lp[j] = (double)row[idx[j]] - lse;
        c->lq[j] = (double)av[j];
    }
    tr.logp_next_ref = next >= 0 ? (double)row[next] - lse : NAN;
    if (next >= 0 && isnan(tr.logp_next_arm))
        return kld_fail(err, KLD_ERR_FORMAT, "row %lld: the endpoint gave no log-probability of the "
                        "next token", (long long)(ref->row0 + r));
    kld_status st = kld_position_truncated(&tr, s->o.topk, out, err);
    if (next >= 0) out->rank_ref = kld_rank_in_row(row, nv, next);
    return st;
}

/* A llama.cpp base row (decoded log-probs, codes) against a dense arm row,
 * with llama-perplexity's subset: the ids whose code is not 0. */
static kld_status logprob_row(kld_scorer *s, scratch *c, const kld_window *w, const kld_rows *ref,
                              const kld_rows *arm, int64_t r, kld_position *out, kld_error *err) {
    int32_t nv = ref->n_vocab, next = kld_window_next(w, ref->row0 + r);
    const float *lpr = ref->logp + (size_t)r * (size_t)nv;
    const uint16_t *codes = ref->codes + (size_t)r * (size_t)nv;
    const float *row = arm->logits + (size_t)r * (size_t)arm->n_vocab;
    double lse;
    kld_trunc_row tr = {.idx = c->idx, .lp = c->lp, .lq = c->lq, .rank_ref = c->rank_ref,
                        .rank_arm = c->rank_arm, .top_ref = -1, .next_token = next,
                        .tail_ref = 0.0, .tail_arm = 0.0, .no_bound = true};
    kld_row_lse_argmax(row, arm->n_vocab, &lse, &tr.top_arm);
    float lp_max = -INFINITY, lp_min = INFINITY;
    int32_t n = 0;
    for (int32_t i = 0; i < nv; i++) {
        if (lpr[i] > lp_max) lp_max = lpr[i];
        if (lpr[i] < lp_min) lp_min = lpr[i];
        if (codes[i] == 0) { /* outside the window: the tail bin (at its floor, an upper bound) */
            tr.tail_ref += exp((double)lpr[i]);
            tr.tail_arm += exp((double)row[i] - lse);
            continue;
        }
        c->idx[n] = i;
        c->lp[n] = lpr[i];
        c->lq[n] = (double)row[i] - lse;
        c->rank_ref[n] = lpr[i];
        c->rank_arm[n] = row[i];
        n++;
    }
    if (n == 0) { /* a constant row: every code is 0, every id equally likely */
        tr.tail_ref = tr.tail_arm = 0.0;
        for (int32_t i = 0; i < nv; i++) {
            c->idx[i] = i;
            c->lp[i] = lpr[i];
            c->lq[i] = (double)row[i] - lse;
            c->rank_ref[i] = lpr[i];
            c->rank_arm[i] = row[i];
        }
        n = nv;
    }
    tr.n = n;
    tr.logp_next_ref = next >= 0 ? (double)lpr[next] : NAN;
    tr.logp_next_arm = next >= 0 ? (double)row[next] - lse : NAN;
    kld_status st = kld_position_truncated(&tr, s->o.topk, out, err);
    if (next >= 0) out->rank_arm = kld_rank_in_row(row, arm->n_vocab, next);
    /* clamped: the window spans exactly 16 nats (llama.cpp's max - 16) */
    out->truncated = lp_max - lp_min > 15.999f;
    out->next_outside = next >= 0 && codes[next] == 0 && out->truncated;
    return st;
}

/* ---- the chunk on the pool ---- */

typedef struct job {
    kld_scorer *s;
    const kld_window *w;
    const kld_rows *ref, *arm;
    kld_status st[MAX_THREADS];
    kld_error err[MAX_THREADS];
} job;

static void score_task(void *ctx, int ith, int nth) {
    job *j = ctx;
    kld_scorer *s = j->s;
    scratch *c = &s->sc[ith];
    int64_t b, e;
    kld_split(j->ref->n, ith, nth, &b, &e);
    j->st[ith] = KLD_OK;
    for (int64_t r = b; r < e && !j->st[ith]; r++) {
        int64_t pos = j->ref->row0 + r;
        kld_position *out = &s->recs[r];
        kld_status st;
        if (j->arm->kind == KLD_ROWS_TOPK)
            st = topk_row(s, c, j->w, j->ref, j->arm, r, out, &j->err[ith]);
        else if (j->ref->kind == KLD_ROWS_DENSE)
            st = dense_dense(s, c, j->ref->logits + (size_t)r * (size_t)j->ref->n_vocab,
                             j->arm->logits + (size_t)r * (size_t)j->arm->n_vocab,
                             kld_window_next(j->w, pos), out, &j->err[ith]);
        else if (j->ref->kind == KLD_ROWS_SPARSE)
            st = sparse_row(s, c, j->w, j->ref, j->arm, r, out, &j->err[ith]);
        else
            st = logprob_row(s, c, j->w, j->ref, j->arm, r, out, &j->err[ith]);
        out->ctx_pos = (uint32_t)pos;
        out->strata = kld_strata_mask(s->o.strata, out->token, kld_window_next_role(j->w, pos));
        j->st[ith] = st;
    }
}

kld_status kld_scorer_rows(kld_scorer *s, const kld_window *w, const kld_rows *ref,
                           const kld_rows *arm, kld_stats *stats, kld_error *err) {
    if (ref->n <= 0) return KLD_OK;
    if (arm->row0 != ref->row0 || arm->n != ref->n || ref->n > s->o.max_rows)
        return kld_fail(err, KLD_ERR_ARG, "kld_scorer_rows: rows [%lld,+%lld) against [%lld,+%lld)",
                        (long long)ref->row0, (long long)ref->n, (long long)arm->row0,
                        (long long)arm->n);
    kld_status st = kld_scorer_check_kinds(ref->kind, arm->kind, err);
    if (st) return st;
    job *j = calloc(1, sizeof *j);
    if (!j) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    *j = (job){.s = s, .w = w, .ref = ref, .arm = arm};
    kld_pool_run(s->pool, score_task, j);
    for (int t = 0; t < s->n_threads && !st; t++)
        if (j->st[t]) {
            st = j->st[t];
            if (err) *err = j->err[t];
        }
    const uint16_t only = kld_strata_only(s->o.strata);
    for (int64_t r = 0; r < ref->n && !st; r++)
        if (!only || (s->recs[r].strata & only)) st = kld_stats_add(stats, &s->recs[r], err);
    free(j);
    return st;
}
