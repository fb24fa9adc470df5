/* kld_math_impl.h — internal to kld_math*.c: the three row kernels one
 * position needs (a scalar reference family and an AVX2 family) and the
 * small top-k heap they share. */
#ifndef KLD_EVAL_KLD_MATH_IMPL_H
#define KLD_EVAL_KLD_MATH_IMPL_H

#include "eval/stats.h"

/* The k best (value, index) pairs seen so far; "better" is a larger value,
 * or an equal value at a lower index. The root is the worst kept pair.
 * Candidates are offered in increasing index order. */
typedef struct kld_topk {
    int k, n;
    float val[KLD_TOPK_MAX];
    int32_t idx[KLD_TOPK_MAX];
} kld_topk;

void kld_topk_init(kld_topk *h, int k);
/* Offers x[i]; while the heap is not full everything is taken. */
void kld_topk_offer(kld_topk *h, float v, int32_t i);
/* Once full, only values strictly above this can enter (ties lose to the
 * lower indices already kept). */
static inline float kld_topk_threshold(const kld_topk *h) { return h->val[0]; }
static inline bool kld_topk_full(const kld_topk *h) { return h->n == h->k; }
/* |indices of a ∩ indices of b| (each heap's indices are distinct). */
int kld_topk_common(const kld_topk *a, const kld_topk *b);
/* How many ranks r hold the same index in both lists, each sorted best
 * first (ordered top-k agreement). */
int kld_topk_ordered(const kld_topk *a, const kld_topk *b);
/* Removes the root (the worst kept pair). */
void kld_topk_pop_root(kld_topk *h);
/* A count of ids ranked above, held in a record's uint16. */
uint16_t kld_rank_saturate(uint64_t rank);

typedef struct kld_math_kernels {
    const char *name;
    /* Offers every x[i] to the heap (which must be empty, with k <= n) and
     * sets *bad when the row holds a NaN or +inf. */
    void (*scan)(const float *x, int32_t n, kld_topk *h, bool *bad);
    /* out[0] = sum_i exp(x_i - mx), out[1] = sum_i exp(y_i - my). */
    void (*sum_exp)(const float *x, const float *y, int32_t n, float mx, float my,
                    double out[2]);
    /* With lp_i = (x_i - mx) - lsx and lq_i = (y_i - my) - lsy:
     * out[0] = sum p (lp - lq), out[1] = sum q (lq - lp),
     * out[2] = sum (p + q) h(t), t = (q - p)/(p + q),
     * h(t) = max(0, (1+t) ln(1+t) + (1-t) ln(1-t))   (so JSD = out[2] / 4). */
    void (*divergences)(const float *x, const float *y, int32_t n, float mx, float my,
                        double lsx, double lsy, double out[3]);
} kld_math_kernels;

extern const kld_math_kernels kld_math_kernels_ref;
extern const kld_math_kernels kld_math_kernels_avx2;

#endif
