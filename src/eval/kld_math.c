/* kld_math.c — one position record from two logit rows: argument checks,
 * kernel choice (scalar reference or AVX2, once per process), the top-k heap
 * and the assembly of the kernels' sums into KLD, reverse KLD, JSD, top-1,
 * top-k overlap and the next token's NLL. */
#include "eval/kld_math_impl.h"

#include "common/common.h"
#include "tensor/types.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ---- top-k heap ---- */

/* a is worse than b: smaller value, or equal value at a higher index. */
static bool worse(float va, int32_t ia, float vb, int32_t ib) {
    return va < vb || (va == vb && ia > ib);
}

static void heap_swap(kld_topk *h, int a, int b) {
    float v = h->val[a];
    int32_t i = h->idx[a];
    h->val[a] = h->val[b];
    h->idx[a] = h->idx[b];
    h->val[b] = v;
    h->idx[b] = i;
}

/* Restores the heap order below the root (the worst pair at the root). */
static void sift_down(kld_topk *h) {
    int c = 0;
    for (;;) {
        int l = 2 * c + 1, r = l + 1, m = c;
        if (l < h->n && worse(h->val[l], h->idx[l], h->val[m], h->idx[m])) m = l;
        if (r < h->n && worse(h->val[r], h->idx[r], h->val[m], h->idx[m])) m = r;
        if (m == c) break;
        heap_swap(h, c, m);
        c = m;
    }
}

void kld_topk_init(kld_topk *h, int k) {
    h->k = k;
    h->n = 0;
}

void kld_topk_offer(kld_topk *h, float v, int32_t i) {
    if (h->n < h->k) {
        int c = h->n++;
        h->val[c] = v;
        h->idx[c] = i;
        while (c > 0) { /* sift up: the worst pair rises to the root */
            int parent = (c - 1) / 2;
            if (!worse(h->val[c], h->idx[c], h->val[parent], h->idx[parent])) break;
            heap_swap(h, c, parent);
            c = parent;
        }
        return;
    }
    if (!worse(h->val[0], h->idx[0], v, i)) return;
    h->val[0] = v;
    h->idx[0] = i;
    sift_down(h);
}

void kld_topk_pop_root(kld_topk *h) {
    if (h->n <= 0) return;
    h->n--;
    h->val[0] = h->val[h->n];
    h->idx[0] = h->idx[h->n];
    sift_down(h);
}


/* The best pair of the heap: the row's maximum and its first index. */
static void topk_best(const kld_topk *h, float *v, int32_t *i) {
    int b = 0;
    for (int j = 1; j < h->n; j++)
        if (worse(h->val[b], h->idx[b], h->val[j], h->idx[j])) b = j;
    *v = h->val[b];
    *i = h->idx[b];
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

int kld_topk_common(const kld_topk *a, const kld_topk *b) {
    int32_t ia[KLD_TOPK_MAX], ib[KLD_TOPK_MAX];
    memcpy(ia, a->idx, sizeof(int32_t) * (size_t)a->n);
    memcpy(ib, b->idx, sizeof(int32_t) * (size_t)b->n);
    qsort(ia, (size_t)a->n, sizeof(int32_t), cmp_i32);
    qsort(ib, (size_t)b->n, sizeof(int32_t), cmp_i32);
    int i = 0, j = 0, hits = 0;
    while (i < a->n && j < b->n) {
        if (ia[i] == ib[j]) {
            hits++;
            i++;
            j++;
        } else if (ia[i] < ib[j]) {
            i++;
        } else {
            j++;
        }
    }
    return hits;
}

/* The heap's pairs best first (larger value, then lower index). */
static void topk_sorted(const kld_topk *h, int32_t *idx) {
    kld_topk c = *h;
    for (int r = c.n - 1; r >= 0; r--) { /* pop the worst into the last free slot */
        idx[r] = c.idx[0];
        kld_topk_pop_root(&c);
    }
}

int kld_topk_ordered(const kld_topk *a, const kld_topk *b) {
    int32_t ia[KLD_TOPK_MAX], ib[KLD_TOPK_MAX];
    topk_sorted(a, ia);
    topk_sorted(b, ib);
    int n = a->n < b->n ? a->n : b->n, same = 0;
    for (int r = 0; r < n; r++) same += ia[r] == ib[r];
    return same;
}

const int kld_label_k[KLD_LABEL_K_N] = {1, 5, 10};

uint16_t kld_rank_saturate(uint64_t rank) {
    return rank > KLD_RANK_MAX ? KLD_RANK_MAX : (uint16_t)rank;
}

uint16_t kld_rank_in_row(const float *x, int32_t n, int32_t next) {
    const float v = x[next];
    uint64_t above = 0;
    for (int32_t i = 0; i < n; i++) above += x[i] > v || (x[i] == v && i < next);
    return kld_rank_saturate(above);
}

/* Mean |(y - mean y) - (x - mean x)| over the ids where both are finite
 * (-inf masks a token out): a shift of all logits leaves the softmax
 * unchanged, so the logits are compared centred. */
static double centred_logit_distance(const float *x, const float *y, int32_t n) {
    double sx = 0.0, sy = 0.0;
    int64_t m = 0;
    for (int32_t i = 0; i < n; i++)
        if (isfinite(x[i]) && isfinite(y[i])) {
            sx += x[i];
            sy += y[i];
            m++;
        }
    if (m == 0) return NAN;
    const double cx = sx / (double)m, cy = sy / (double)m;
    double d = 0.0;
    for (int32_t i = 0; i < n; i++)
        if (isfinite(x[i]) && isfinite(y[i])) d += fabs(((double)y[i] - cy) - ((double)x[i] - cx));
    return d / (double)m;
}

/* ---- assembly ---- */

/* Names the first offending logit of a row the kernel flagged. */
static kld_status bad_row(const char *which, const float *x, int32_t n, kld_error *err) {
    for (int32_t i = 0; i < n; i++)
        if (isnan(x[i]) || (isinf(x[i]) && x[i] > 0))
            return kld_fail(err, KLD_ERR_ARG, "kld_position_compute: %s logits[%d] = %g (n_vocab %d)",
                            which, (int)i, (double)x[i], (int)n);
    return kld_fail(err, KLD_ERR_ARG, "kld_position_compute: %s logits: no finite value (n_vocab %d)",
                    which, (int)n);
}

static kld_status compute(const kld_math_kernels *kn, const float *x, const float *y, int32_t n,
                          int32_t next, int topk, kld_position *out, kld_error *err) {
    if (!x || !y || !out)
        return kld_fail(err, KLD_ERR_ARG, "kld_position_compute: NULL row or output");
    if (n < 1)
        return kld_fail(err, KLD_ERR_ARG, "kld_position_compute: n_vocab %d < 1", (int)n);
    if (topk < 1 || topk > KLD_TOPK_MAX || topk > n)
        return kld_fail(err, KLD_ERR_ARG, "kld_position_compute: top-k %d outside 1..%d (n_vocab %d)",
                        topk, KLD_TOPK_MAX < n ? KLD_TOPK_MAX : (int)n, (int)n);
    if (next < -1 || next >= n)
        return kld_fail(err, KLD_ERR_ARG, "kld_position_compute: next token %d outside -1..%d",
                        (int)next, (int)n - 1);

    kld_topk hx, hy;
    bool bad_x = false, bad_y = false;
    kld_topk_init(&hx, topk);
    kld_topk_init(&hy, topk);
    kn->scan(x, n, &hx, &bad_x);
    kn->scan(y, n, &hy, &bad_y);
    float mx, my;
    int32_t top_x, top_y;
    topk_best(&hx, &mx, &top_x);
    topk_best(&hy, &my, &top_y);
    if (bad_x || !isfinite(mx)) return bad_row("ref", x, n, err);
    if (bad_y || !isfinite(my)) return bad_row("arm", y, n, err);

    double sums[2], div[3];
    kn->sum_exp(x, y, n, mx, my, sums);
    /* Both sums are >= 1 (the maximum contributes exp(0)), so the logs are
     * finite and >= 0. */
    double lsx = log(sums[0]), lsy = log(sums[1]);
    kn->divergences(x, y, n, mx, my, lsx, lsy, div);

    memset(out, 0, sizeof *out);
    out->kld = div[0];
    out->kld_bound = div[0];
    out->mass = 1.0f;
    out->kld_rev = div[1];
    out->jsd = 0.25 * div[2];
    out->p_ref_max = (float)exp(-lsx);
    out->token = next;
    out->top_ref = top_x;
    out->top_arm = top_y;
    out->topk = (uint16_t)topk;
    out->topk_hits = (uint16_t)kld_topk_common(&hx, &hy);
    out->topk_ordered = (uint16_t)kld_topk_ordered(&hx, &hy);
    out->dlogit = centred_logit_distance(x, y, n);
    out->rank_ref = out->rank_arm = KLD_RANK_UNKNOWN;
    if (next >= 0) {
        out->rank_ref = kld_rank_in_row(x, n, next);
        out->rank_arm = kld_rank_in_row(y, n, next);
        /* The same expression the kernels use for log p, so that identical
         * rows give identical NLLs. */
        out->nll_ref = -(((double)x[next] - (double)mx) - lsx);
        out->nll_arm = -(((double)y[next] - (double)my) - lsy);
    } else {
        out->nll_ref = NAN;
        out->nll_arm = NAN;
    }
    return KLD_OK;
}

/* ---- kernel choice ---- */

static pthread_once_t pick_once = PTHREAD_ONCE_INIT;
static const kld_math_kernels *picked = &kld_math_kernels_ref;

static void pick(void) {
    const char *env = getenv("KLD_KERNELS");
    bool force_ref = env && strcmp(env, "ref") == 0;
    picked = !force_ref && kld_cpu_has_avx2() ? &kld_math_kernels_avx2 : &kld_math_kernels_ref;
}

const char *kld_math_kernel_name(void) {
    pthread_once(&pick_once, pick);
    return picked->name;
}

kld_status kld_position_compute(const float *ref_logits, const float *arm_logits, int32_t n_vocab,
                                int32_t next_token, int topk, kld_position *out, kld_error *err) {
    pthread_once(&pick_once, pick);
    return compute(picked, ref_logits, arm_logits, n_vocab, next_token, topk, out, err);
}

kld_status kld_position_compute_ref(const float *ref_logits, const float *arm_logits,
                                    int32_t n_vocab, int32_t next_token, int topk,
                                    kld_position *out, kld_error *err) {
    return compute(&kld_math_kernels_ref, ref_logits, arm_logits, n_vocab, next_token, topk, out,
                   err);
}

kld_status kld_position_compute_avx2(const float *ref_logits, const float *arm_logits,
                                     int32_t n_vocab, int32_t next_token, int topk,
                                     kld_position *out, kld_error *err) {
    return compute(&kld_math_kernels_avx2, ref_logits, arm_logits, n_vocab, next_token, topk, out,
                   err);
}

/* The full-vocabulary logsumexp of one row with the kernels of the
 * per-position math (double exp, max-subtracted), so that saved-teacher
 * scoring and the lockstep scorer agree to double rounding. */
double kld_row_logsumexp(const float *x, int32_t n, float mx) {
    pthread_once(&pick_once, pick);
    double sums[2];
    picked->sum_exp(x, x, n, mx, mx, sums);
    return (double)mx + log(sums[0]);
}
