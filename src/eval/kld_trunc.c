/* kld_trunc.c — one position record from a truncated reference row (a
 * saved teacher's top-k, a llama.cpp base row's 16-nat window): the
 * truncated KL the seeds and llama.cpp report, and the KL, reverse KL and
 * JSD of the (k+1)-bin coarsening (the subset plus one bin for the tail),
 * which are lower bounds of the full-vocabulary values (log-sum inequality,
 * or data processing). Scalar double arithmetic with libm: rows are at most
 * a vocabulary long and the forward pass dominates. */
#include "eval/kld_math_impl.h"

#include "common/common.h"

#include <float.h>
#include <math.h>

/* u ln(u/v) with 0 ln(0/v) = 0; a vanishing v is held at the smallest
 * normal double so that a real tail against an empty one stays finite. */
static double tail_term(double u, double v) {
    if (u <= 0.0) return 0.0;
    if (v < DBL_MIN) v = DBL_MIN;
    return u * log(u / v);
}

/* (1+t) ln(1+t) + (1-t) ln(1-t) for the JSD, >= 0 (see kld_math_ref.c). */
static double jsd_h(double p, double q) {
    double s = p + q;
    if (s <= 0.0) return 0.0;
    double t = (q - p) / s, a = 1.0 + t, b = 1.0 - t;
    double h = (a > 0.0 ? a * log(a) : 0.0) + (b > 0.0 ? b * log(b) : 0.0);
    return s * fmax(h, 0.0);
}

/* Half a float16 step at a stored value, plus the float32 rounding of the
 * shifted logit before it was rounded to float16 (kld_row_as_f16): how far
 * the unrounded value can lie from the stored one. */
static double f16_half_step(float v) {
    double a = fabs((double)v);
    if (a < 0x1p-14) return 0x1p-25; /* subnormal: steps of 2^-24 */
    int e;
    frexp(a, &e); /* a in [2^(e-1), 2^e): steps of 2^(e-11) */
    return ldexp(1.0, e - 12) + a * 0x1p-24;
}

/* What the float16 rounding of the stored logits can move the coarse KL F
 * by (stats.h: first order with a second-order margin). */
static double f16_allowance(const kld_trunc_row *r, double f) {
    double first = 0.0, second = 0.0;
    for (int32_t j = 0; j < r->n; j++) {
        double p = exp(r->lp[j]), q = exp(r->lq[j]);
        double u = r->f16_ref ? f16_half_step(r->rank_ref[j]) : 0.0;
        double v = r->f16_arm ? f16_half_step(r->rank_arm[j]) : 0.0;
        first += p * fabs(r->lp[j] - r->lq[j] - f) * u + fabs(q - p) * v;
        second += p * u * u + q * v * v;
    }
    return first + 2.0 * second;
}

static int32_t argmax_within(const int32_t *idx, const double *v, int32_t n) {
    int32_t best = 0;
    for (int32_t j = 1; j < n; j++)
        if (v[j] > v[best] || (v[j] == v[best] && idx[j] < idx[best])) best = j;
    return idx[best];
}

static void topk_within(const int32_t *idx, const float *v, int32_t n, kld_topk *h) {
    for (int32_t j = 0; j < n; j++) kld_topk_offer(h, v[j], idx[j]);
}

/* Rank of the next token by the stored values of a truncated row: within
 * the subset when it lies there (the subset is the top of the distribution,
 * so that is its rank), "n or further" outside it when that still answers
 * label-in-top-k for every reported k, else unknown. */
static uint16_t subset_rank(const int32_t *idx, const float *v, int32_t n, int32_t next) {
    int32_t at = -1;
    for (int32_t j = 0; j < n && at < 0; j++)
        if (idx[j] == next) at = j;
    if (at < 0) return n >= KLD_LABEL_K_MAX ? kld_rank_saturate((uint64_t)n) : KLD_RANK_UNKNOWN;
    uint64_t above = 0;
    for (int32_t j = 0; j < n; j++) above += v[j] > v[at] || (v[j] == v[at] && idx[j] < next);
    return kld_rank_saturate(above);
}

kld_status kld_position_truncated(const kld_trunc_row *r, int topk, kld_position *out,
                                  kld_error *err) {
    if (!r || !out || r->n < 1 || !r->idx || !r->lp || !r->lq || !r->rank_ref || !r->rank_arm)
        return kld_fail(err, KLD_ERR_ARG, "kld_position_truncated: empty row");
    if (topk < 1 || topk > KLD_TOPK_MAX)
        return kld_fail(err, KLD_ERR_ARG, "kld_position_truncated: top-k %d outside 1..%d", topk,
                        KLD_TOPK_MAX);
    double kld = 0.0, rev = 0.0, js = 0.0, mp = 0.0, mq = 0.0, pmax = 0.0;
    for (int32_t j = 0; j < r->n; j++) {
        double lp = r->lp[j], lq = r->lq[j];
        if (isnan(lp) || lp == INFINITY || isnan(lq) || lq == INFINITY)
            return kld_fail(err, KLD_ERR_ARG,
                            "kld_position_truncated: token %d: log-probabilities %g (ref), %g (arm)",
                            (int)r->idx[j], lp, lq);
        double p = exp(lp), q = exp(lq), d = lp - lq;
        if (p > 0.0) kld += p * d;
        if (q > 0.0) rev -= q * d;
        js += jsd_h(p, q);
        mp += p;
        mq += q;
        if (p > pmax) pmax = p;
    }
    double tp = isnan(r->tail_ref) ? 1.0 - mp : r->tail_ref;
    double tq = isnan(r->tail_arm) ? 1.0 - mq : r->tail_arm;
    /* no measurable reference tail (a full row, or rounding of stored logits
     * pushing the captured mass to 1): no tail bin */
    if (r->full || tp <= 1e-12) tp = tq = 0.0;
    tq = fmax(tq, 0.0);
    memset(out, 0, sizeof *out);
    out->kld = kld;
    out->kld_bound = kld + tail_term(tp, tq);
    if (r->no_bound) out->kld_bound = NAN;
    else if (r->f16_ref || r->f16_arm)
        out->kld_bound = fmax(out->kld_bound - f16_allowance(r, out->kld_bound), 0.0);
    out->kld_rev = rev + tail_term(tq, tp);
    out->jsd = 0.25 * (js + jsd_h(tp, tq));
    out->mass = r->full ? 1.0f : (float)mp;
    out->truncated = !r->full;
    out->p_ref_max = (float)pmax;
    out->top_ref = r->top_ref >= 0 ? r->top_ref : argmax_within(r->idx, r->lp, r->n);
    out->top_arm = r->top_arm >= 0 ? r->top_arm : argmax_within(r->idx, r->lq, r->n);
    int k = topk < r->n ? topk : (int)r->n;
    kld_topk hr, ha;
    kld_topk_init(&hr, k);
    kld_topk_init(&ha, k);
    topk_within(r->idx, r->rank_ref, r->n, &hr);
    topk_within(r->idx, r->rank_arm, r->n, &ha);
    out->topk = (uint16_t)topk;
    /* overlap as a share of k, stored against the accumulator's k */
    out->topk_hits = (uint16_t)lround((double)kld_topk_common(&hr, &ha) * topk / k);
    out->topk_ordered = (uint16_t)lround((double)kld_topk_ordered(&hr, &ha) * topk / k);
    out->dlogit = NAN;
    /* the arm's rank over its whole vocabulary is the caller's to set when
     * it has the arm's full row */
    out->rank_ref = r->next_token >= 0 ? subset_rank(r->idx, r->rank_ref, r->n, r->next_token)
                                       : KLD_RANK_UNKNOWN;
    out->rank_arm = r->full && r->next_token >= 0 ? subset_rank(r->idx, r->rank_arm, r->n, r->next_token)
                                                  : KLD_RANK_UNKNOWN;
    out->token = r->next_token;
    out->nll_ref = r->next_token >= 0 ? -r->logp_next_ref : NAN;
    out->nll_arm = r->next_token >= 0 ? -r->logp_next_arm : NAN;
    return KLD_OK;
}
