/* serve_logprob.c — the log-probabilities served: float64 log-softmax of
 * the engine's f32 logits (the logsumexp of the KL statistics,
 * kld_row_logsumexp: exp and the sum in float64), and the top-N
 * alternatives of a row. */
#include "serve/serve.h"

#include "eval/stats.h"

#include <math.h>
#include <stdlib.h>

double kld_serve_lse(const float *logits, int64_t n_vocab) {
    float mx = -INFINITY;
    for (int64_t i = 0; i < n_vocab; i++)
        if (logits[i] > mx) mx = logits[i];
    return isfinite(mx) ? kld_row_logsumexp(logits, (int32_t)n_vocab, mx) : (double)mx;
}

double kld_serve_logprob(const float *logits, int64_t n_vocab, double lse, int32_t id) {
    (void)n_vocab;
    return (double)logits[id] - lse;
}

/* a ranks before b: the larger logit, ties to the lower id (NaN last). */
static bool before(float a, int32_t ia, float b, int32_t ib) {
    if (isnan(b)) return !isnan(a) || ia < ib;
    if (isnan(a)) return false;
    return a > b || (a == b && ia < ib);
}

typedef struct ranked {
    float v;
    int32_t id;
} ranked;

static int cmp_ranked(const void *pa, const void *pb) {
    const ranked *a = pa, *b = pb;
    return before(a->v, a->id, b->v, b->id) ? -1 : before(b->v, b->id, a->v, a->id) ? 1 : 0;
}

void kld_serve_top(const float *logits, int64_t n_vocab, double lse, int64_t n_top, int32_t *top_id,
                   double *top_lp) {
    if (n_top > n_vocab) n_top = n_vocab;
    if (n_top <= 0) return;
    if (n_top <= 64) { /* insertion into the kept few: one pass over the row */
        int64_t k = 0;
        for (int64_t i = 0; i < n_vocab; i++) {
            const float v = logits[i];
            if (k == n_top && !before(v, (int32_t)i, logits[top_id[k - 1]], top_id[k - 1])) continue;
            int64_t j = k < n_top ? k++ : k - 1;
            while (j > 0 && before(v, (int32_t)i, logits[top_id[j - 1]], top_id[j - 1])) {
                top_id[j] = top_id[j - 1];
                j--;
            }
            top_id[j] = (int32_t)i;
        }
    } else {
        ranked *all = malloc((size_t)n_vocab * sizeof *all);
        if (!all) { /* still a correct answer, only slower: repeated selection */
            for (int64_t k = 0; k < n_top; k++) {
                int32_t best = -1;
                for (int64_t i = 0; i < n_vocab; i++) {
                    bool taken = false;
                    for (int64_t j = 0; j < k && !taken; j++) taken = top_id[j] == i;
                    if (!taken && (best < 0 || before(logits[i], (int32_t)i, logits[best], best)))
                        best = (int32_t)i;
                }
                top_id[k] = best;
            }
        } else {
            for (int64_t i = 0; i < n_vocab; i++) all[i] = (ranked){logits[i], (int32_t)i};
            qsort(all, (size_t)n_vocab, sizeof *all, cmp_ranked);
            for (int64_t k = 0; k < n_top; k++) top_id[k] = all[k].id;
            free(all);
        }
    }
    for (int64_t k = 0; k < n_top; k++) top_lp[k] = (double)logits[top_id[k]] - lse;
}
