/* score.h — the scorer: a chunk of reference rows and the arm's rows for
 * the same window rows → position records in the statistics. It knows row
 * kinds, never arm kinds:
 *   dense   × dense    full-vocabulary KL (kld_position_compute), over the
 *                      ids both vocabularies share when they differ
 *   sparse  × dense    a saved teacher against a live arm: the arm's logits at
 *                      the teacher's ids, its own full logsumexp and argmax
 *   sparse  × sparse   a saved teacher against a candidate dump at its ids
 *   logprob × dense    a llama.cpp base row against a live arm, with
 *                      llama-perplexity's definitions (the 16-nat window)
 * Rows are scored on the pool, each thread a static share, and added to the
 * statistics in row order, so results never depend on the thread count. */
#ifndef KLD_EVAL_SCORE_H
#define KLD_EVAL_SCORE_H

#include "eval/arm.h"
#include "eval/stats.h"

typedef struct kld_scorer kld_scorer;

typedef struct kld_scorer_opts {
    int topk;              /* top-k overlap size */
    int64_t max_rows;      /* rows per call at most (the chunk) */
    int32_t n_vocab;       /* dense × dense: ids scored (min of the two) */
    const int32_t *common; /* dense × dense with different vocabularies: the shared ids */
    int32_t n_common;
    int32_t ref_n_vocab;   /* sparse references: the teacher's vocabulary (0: unknown) */
    const struct kld_strata *strata; /* each record's strata mask; --score-only drops the
                              records outside its stratum (NULL: none) */
} kld_scorer_opts;

kld_status kld_scorer_create(kld_pool *pool, const kld_scorer_opts *o, kld_scorer **out,
                             kld_error *err);
void kld_scorer_free(kld_scorer *sc);

/* Scores rows [ref->row0, ref->row0 + ref->n) of window w (arm->row0 and
 * arm->n must match) into stats. */
kld_status kld_scorer_rows(kld_scorer *sc, const kld_window *w, const kld_rows *ref,
                           const kld_rows *arm, kld_stats *stats, kld_error *err);

/* Whether a pair of row kinds can be scored (else a message saying why). */
kld_status kld_scorer_check_kinds(kld_rows_kind ref, kld_rows_kind arm, kld_error *err);

#endif
