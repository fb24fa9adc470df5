/* budget.c — the KLD-guided mix: which groups a bits-per-weight budget
 * affords at the higher precision, greedily by KLD saved per byte (the
 * tensor mixing ExLlamaV3 and Unsloth tune by hand). */
#include "quant/quant.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct ranked {
    size_t i;
    double per_byte;
} ranked;

static int by_gain_per_byte(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    if (x->per_byte != y->per_byte) return x->per_byte > y->per_byte ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i; /* ties: group order, so the result is reproducible */
}

kld_status kld_quant_budget(const char *base, const char *upgrade, const kld_budget_item *items,
                            size_t n, uint64_t other_bytes, uint64_t n_params, double budget_bpw,
                            char *buf, size_t cap, double *bpw, size_t *n_raised, kld_error *err) {
    *n_raised = 0;
    if (n_params == 0) return kld_fail(err, KLD_ERR_ARG, "budget: the model has no parameters");
    if (!(budget_bpw > 0) || !isfinite(budget_bpw))
        return kld_fail(err, KLD_ERR_ARG, "--budget %g: expected a positive number of bits per weight",
                        budget_bpw);
    uint64_t total = other_bytes;
    for (size_t i = 0; i < n; i++) total += items[i].lo_bytes;
    const double limit = budget_bpw * (double)n_params / 8.0; /* bytes */
    if ((double)total > limit)
        return kld_fail(err, KLD_ERR_ARG, "--budget %.4g bpw is below the base policy's %.4f bpw (%s)",
                        budget_bpw, 8.0 * (double)total / (double)n_params, base);
    ranked *r = malloc((n ? n : 1) * sizeof *r);
    bool *raise = calloc(n ? n : 1, sizeof *raise);
    if (!r || !raise) {
        free(r);
        free(raise);
        return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    }
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (items[i].gain > 0 && items[i].hi_bytes > items[i].lo_bytes)
            r[m++] = (ranked){i, items[i].gain / (double)(items[i].hi_bytes - items[i].lo_bytes)};
    qsort(r, m, sizeof *r, by_gain_per_byte);
    for (size_t k = 0; k < m; k++) {
        const kld_budget_item *it = &items[r[k].i];
        if ((double)(total + (it->hi_bytes - it->lo_bytes)) > limit) continue;
        total += it->hi_bytes - it->lo_bytes;
        raise[r[k].i] = true;
    }
    int w = snprintf(buf, cap, "%s", base);
    for (size_t i = 0; w >= 0 && (size_t)w < cap && i < n; i++)
        if (raise[i]) {
            w += snprintf(buf + w, cap - (size_t)w, ",%s=%s", items[i].selector,
                          upgrade ? upgrade : "keep");
            ++*n_raised;
        }
    free(r);
    free(raise);
    if (w < 0 || (size_t)w >= cap)
        return kld_fail(err, KLD_ERR_ARG, "the proposed policy does not fit %zu bytes", cap);
    *bpw = 8.0 * (double)total / (double)n_params;
    return KLD_OK;
}
