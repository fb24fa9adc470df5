/* stats.c — the KLD accumulator: every position record in order, the
 * document boundaries, and running double sums for a progress line. The
 * statistics themselves are computed from the records in stats_summary.c. */
#include "eval/stats.h"

#include "common/common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(kld_position) == 96, "kld_position is meant to stay at 96 bytes");

struct kld_stats {
    int topk;
    kld_position *rec;
    size_t n, cap;
    uint64_t *doc_start; /* first record of each document */
    size_t n_docs, docs_cap;
    /* raw sums (progress line, cheap running values) */
    double sum_kld;
    double sum_nll_ref, sum_nll_arm;
    uint64_t n_tokens, n_top1;
};

/* Grows *buf to hold at least need elements of elem bytes. */
static kld_status grow(void **buf, size_t *cap, size_t need, size_t elem, const char *what,
                       kld_error *err) {
    if (need <= *cap) return KLD_OK;
    size_t new_cap = *cap ? *cap : 1024;
    while (new_cap < need) {
        if (new_cap > SIZE_MAX / 2) new_cap = need;
        else new_cap *= 2;
    }
    uint64_t bytes;
    if (!kld_mul_u64(new_cap, elem, &bytes) || bytes > SIZE_MAX)
        return kld_fail(err, KLD_ERR_NOMEM, "kld_stats: %s: %zu entries overflow", what, need);
    void *p = realloc(*buf, (size_t)bytes);
    if (!p)
        return kld_fail(err, KLD_ERR_NOMEM, "kld_stats: %s: cannot allocate %zu entries", what,
                        new_cap);
    *buf = p;
    *cap = new_cap;
    return KLD_OK;
}

kld_status kld_stats_create(kld_stats **out, int topk, kld_error *err) {
    *out = NULL;
    if (topk < 1 || topk > KLD_TOPK_MAX)
        return kld_fail(err, KLD_ERR_ARG, "kld_stats_create: top-k %d outside 1..%d", topk,
                        KLD_TOPK_MAX);
    kld_stats *st = calloc(1, sizeof *st);
    if (!st) return kld_fail(err, KLD_ERR_NOMEM, "kld_stats_create: out of memory");
    st->topk = topk;
    *out = st;
    return KLD_OK;
}

void kld_stats_free(kld_stats *st) {
    if (!st) return;
    free(st->rec);
    free(st->doc_start);
    free(st);
}

kld_status kld_stats_begin_doc(kld_stats *st, kld_error *err) {
    kld_status s = grow((void **)&st->doc_start, &st->docs_cap, st->n_docs + 1,
                        sizeof *st->doc_start, "documents", err);
    if (s != KLD_OK) return s;
    st->doc_start[st->n_docs++] = st->n;
    return KLD_OK;
}

double kld_position_nll_ref(const kld_position *r) {
    if (!r->next_outside) return r->nll_ref;
    return r->nll_arm > r->nll_ref ? r->nll_arm : r->nll_ref;
}

static void add_sums(kld_stats *st, const kld_position *r) {
    st->sum_kld += r->kld;
    if (r->top_ref == r->top_arm) st->n_top1++;
    if (r->token >= 0) {
        st->n_tokens++;
        st->sum_nll_ref += kld_position_nll_ref(r);
        st->sum_nll_arm += r->nll_arm;
    }
}

kld_status kld_stats_add(kld_stats *st, const kld_position *rec, kld_error *err) {
    if (rec->topk != st->topk)
        return kld_fail(err, KLD_ERR_MISMATCH, "kld_stats_add: record top-k %d, accumulator %d",
                        rec->topk, st->topk);
    if (st->n_docs == 0) {
        kld_status s = kld_stats_begin_doc(st, err);
        if (s != KLD_OK) return s;
    }
    kld_status s = grow((void **)&st->rec, &st->cap, st->n + 1, sizeof *st->rec, "positions", err);
    if (s != KLD_OK) return s;
    st->rec[st->n++] = *rec;
    add_sums(st, rec);
    return KLD_OK;
}

kld_status kld_stats_add_logits(kld_stats *st, const float *ref_logits, const float *arm_logits,
                                int32_t n_vocab, int32_t next_token, uint32_t ctx_pos,
                                kld_error *err) {
    kld_position r;
    kld_status s = kld_position_compute(ref_logits, arm_logits, n_vocab, next_token, st->topk, &r,
                                        err);
    if (s != KLD_OK) return s;
    r.ctx_pos = ctx_pos;
    return kld_stats_add(st, &r, err);
}

kld_status kld_stats_merge(kld_stats *dst, const kld_stats *src, kld_error *err) {
    if (dst->topk != src->topk)
        return kld_fail(err, KLD_ERR_MISMATCH, "kld_stats_merge: top-k %d vs %d", dst->topk,
                        src->topk);
    if (dst == src) return kld_fail(err, KLD_ERR_ARG, "kld_stats_merge: an accumulator into itself");
    size_t n0 = dst->n;
    kld_status s = grow((void **)&dst->rec, &dst->cap, n0 + src->n, sizeof *dst->rec, "positions", err);
    if (s != KLD_OK) return s;
    s = grow((void **)&dst->doc_start, &dst->docs_cap, dst->n_docs + src->n_docs,
             sizeof *dst->doc_start, "documents", err);
    if (s != KLD_OK) return s;
    if (src->n) memcpy(dst->rec + n0, src->rec, src->n * sizeof *src->rec);
    for (size_t d = 0; d < src->n_docs; d++) dst->doc_start[dst->n_docs++] = n0 + src->doc_start[d];
    dst->n = n0 + src->n;
    dst->sum_kld += src->sum_kld;
    dst->sum_nll_ref += src->sum_nll_ref;
    dst->sum_nll_arm += src->sum_nll_arm;
    dst->n_tokens += src->n_tokens;
    dst->n_top1 += src->n_top1;
    return KLD_OK;
}

/* Exact sizes: grow() would double past them. */
static kld_status reserve_exact(void **buf, size_t *cap, size_t have, size_t more, size_t elem,
                                const char *what, kld_error *err) {
    uint64_t need, bytes;
    if (!kld_add_u64(have, more, &need) || !kld_mul_u64(need, elem, &bytes) || bytes > SIZE_MAX)
        return kld_fail(err, KLD_ERR_NOMEM, "kld_stats: %s: %zu + %zu entries overflow", what, have, more);
    if (need <= *cap) return KLD_OK;
    void *p = realloc(*buf, (size_t)bytes);
    if (!p) return kld_fail(err, KLD_ERR_NOMEM, "kld_stats: %s: cannot allocate %llu entries", what,
                            (unsigned long long)need);
    *buf = p;
    *cap = (size_t)need;
    return KLD_OK;
}

kld_status kld_stats_reserve(kld_stats *st, size_t n_records, size_t n_docs, kld_error *err) {
    kld_status s = reserve_exact((void **)&st->rec, &st->cap, st->n, n_records, sizeof *st->rec,
                                 "positions", err);
    if (s == KLD_OK)
        s = reserve_exact((void **)&st->doc_start, &st->docs_cap, st->n_docs, n_docs,
                          sizeof *st->doc_start, "documents", err);
    return s;
}

int kld_stats_topk(const kld_stats *st) { return st->topk; }

size_t kld_stats_count(const kld_stats *st) { return st->n; }

void kld_stats_get_running(const kld_stats *st, kld_stats_running *out) {
    memset(out, 0, sizeof *out);
    out->n_positions = st->n;
    out->n_tokens = st->n_tokens;
    out->n_docs = st->n_docs;
    if (st->n) {
        out->kld_mean = st->sum_kld / (double)st->n;
        out->top1_agreement = (double)st->n_top1 / (double)st->n;
    }
    if (st->n_tokens)
        out->ln_ppl_ratio = (st->sum_nll_arm - st->sum_nll_ref) / (double)st->n_tokens;
}

const kld_position *kld_stats_records(const kld_stats *st, size_t *n) {
    *n = st->n;
    return st->rec;
}

size_t kld_stats_doc_count(const kld_stats *st) { return st->n_docs; }

/* One batch: every record; then the end of the pass. */
static kld_status memory_next(void *user, bool restart, const kld_position **batch, size_t *m,
                              kld_error *err) {
    (void)err;
    kld_stats *st = user;
    *batch = st->rec;
    *m = restart ? st->n : 0;
    return KLD_OK;
}

void kld_stats_source(const kld_stats *st, kld_record_source *out) {
    *out = (kld_record_source){(void *)st, st->n, st->topk, st->doc_start, st->n_docs, memory_next};
}

void kld_stats_doc_range(const kld_stats *st, size_t doc, size_t *first, size_t *count) {
    if (doc >= st->n_docs) {
        *first = st->n;
        *count = 0;
        return;
    }
    size_t end = doc + 1 < st->n_docs ? st->doc_start[doc + 1] : st->n;
    *first = st->doc_start[doc];
    *count = end - st->doc_start[doc];
}
