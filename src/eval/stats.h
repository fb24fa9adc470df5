/* stats.h — the statistics of `kldeval kl`: per-position divergence math
 * (kld_math*.c) and the accumulator that turns position records into the
 * run summary (stats*.c).
 *
 * Flow: for every scored position the driver has two float32 logit rows
 * (reference, arm) and the true next token. kld_position_compute turns them
 * into one kld_position record (double precision); kld_stats keeps every
 * record (exact percentiles, per-position TSV) plus document boundaries;
 * kld_stats_finalize produces a kld_summary. Records are source-independent:
 * a later reader of llama.cpp base files fills the same record from a decoded
 * uint16 log-prob row instead of reference logits.
 *
 * Definitions (N = number of values, all sums in double):
 *   Per position, with p = softmax(ref), q = softmax(arm), computed as
 *   log p_i = (x_i - max x) - ln sum_j exp(x_j - max x):
 *     KLD      = sum_i p_i (ln p_i - ln q_i)               nats, KL(ref || arm)
 *     KLD_rev  = sum_i q_i (ln q_i - ln p_i)               nats, KL(arm || ref)
 *     JSD      = 1/2 KL(p || m) + 1/2 KL(q || m), m = (p+q)/2, nats, in [0, ln 2]
 *     terms with p_i = 0 (resp. q_i = 0) count as 0; identical rows give
 *     exactly 0.0 for all three.
 *     top-1    = argmax, first index on ties; top-k overlap = |topk(ref) n topk(arm)| / k
 *              with ties broken towards the lower index.
 *     nll      = -ln p(next);  dp = p_arm(next) - p_ref(next).
 *   Mean and its standard error: mean = S/N, var = population variance
 *     (sum (x - mean)^2 / N, two-pass), se = sqrt(var / (N-1)) for N >= 2,
 *     else 0. This is llama.cpp's mean_and_uncertainty, except that llama.cpp
 *     reports 0 for N <= 10 and uses one-pass sums.
 *   Percentile f: on the sorted values x[0..N-1], h = f (N-1), i = floor(h),
 *     w = h - i: (1-w) x[i] + w x[min(i+1, N-1)]; f <= 0 gives the minimum,
 *     f >= 1 the maximum. Median = the 0.5 percentile (the mean of the two
 *     middle values for even N).
 *   Binomial error of a fraction f: sqrt(f (1-f) / (N-1)) (top-1 agreement).
 *   PPL = exp(mean nll) with error PPL * se(nll). cov = population covariance
 *     of (nll_arm, nll_ref) / (N-1); ln(PPL_arm/PPL_ref) = mean nll_arm -
 *     mean nll_ref with error sqrt(u_arm^2 + u_ref^2 - 2 cov), computed as the
 *     standard error of the per-position differences (identical algebraically,
 *     never negative). Ratio = exp(ln ratio), error ratio * that error.
 *     Difference = PPL_arm - PPL_ref, error sqrt(e_arm^2 + e_ref^2 -
 *     2 PPL_arm PPL_ref cov) (0 if rounding makes it negative).
 *     Correlation = population covariance / sqrt(var_arm var_ref) (0 when a
 *     variance is 0). PPL, dp and the correlation use only positions with a
 *     next token (n_tokens); everything else uses all n_positions.
 *   nll_ref in PPL(ref), the ratio, the difference and the correlation is
 *     kld_position_nll_ref (kld.h): the recorded value, except at llama.cpp
 *     base rows whose next token lies below the 16-nat window (next_outside),
 *     where the record holds only the window's floor F <= -ln p_ref(next);
 *     there it is max(nll_arm, F), so each pair of the ratio is one of the
 *     NLLs behind PPL(ref). llama.cpp's PPL(base), with F itself, is biased
 *     low and kept beside it (ppl_ref_llamacpp). dp keeps the recorded
 *     nll_ref (llama.cpp's definition; the two differ by < e^-16 there).
 *   RMS dp = sqrt(mean dp^2), error 0.5 / RMS * se(dp^2) (llama.cpp).
 *   Mean of document means: the mean over documents with >= 1 position of
 *     each document's mean KLD, error se over those documents (the seeds'
 *     primary scalar; the pooled mean weights documents by length).
 *   Buckets: by the reference's max probability in ten equal-width bins
 *     [0,0.1) ... [0.9,1.0]; by context position in [0,8), [8,16), [16,32),
 *     ... doubling, so that drift with context length is visible.
 * Merging two accumulators (shards) concatenates their documents and records;
 * finalize works from the records, so a merge is exact. */
#ifndef KLD_EVAL_STATS_H
#define KLD_EVAL_STATS_H

#include "kld.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>


/* kld_position (kld.h): one scored position (80 bytes).
 * A truncated row is one where the reference is known only on a subset S of
 * the vocabulary (a saved teacher's top-k, a llama.cpp base row's 16-nat
 * window). Then, with p, q the full-vocabulary probabilities on S and the
 * tails P = 1 - sum_S p, Q = 1 - sum_S q:
 *   kld       = sum_S p (ln p - ln q)          (the seeds' truncated KL; llama.cpp's KLD)
 *   kld_bound = kld + P ln(P/Q)                (the KL of the |S|+1-bin coarsening,
 *                                               a lower bound of the full KL by the
 *                                               log-sum inequality)
 *   kld_rev, jsd: of the same coarsening (lower bounds of the full values)
 *   mass      = sum_S p                        (the captured mass)
 * For a full row mass = 1, kld_bound = kld and truncated = 0. Where rounding
 * of stored logits makes sum_S p reach 1, the reference has no measurable
 * tail and the tail terms are taken as 0. Float16 rows (normalised, see
 * kld_row_as_f16): kld_bound = kld + P ln(P/Q) minus the rounding allowance
 * sum_S p |ln(p/q) - F| u + sum_S |q - p| v + 2 sum_S (p u^2 + q v^2), with F
 * the coarse KL and u, v the float16 half-steps of the stored logits of the
 * reference and the arm (F's derivatives are p (ln(p/q) - F) and q - p).
 * kld_bound is NAN where no bound holds (kld_trunc_row.no_bound). The
 * truncated kld itself is >= P ln(P/Q) >= P - Q (log-sum inequality): it
 * can be negative by at most the arm's extra mass on S. */

/* ---- per-position math (kld_math.c; kernels in kld_math_ref.c / kld_math_avx2.c) ---- */

/* Fills *out (ctx_pos = 0) from two logit rows of n_vocab floats. next_token
 * is the true next token or -1; topk in 1..min(KLD_TOPK_MAX, n_vocab).
 * Fails (KLD_ERR_ARG) on bad arguments and on rows holding NaN or +inf or no
 * finite value; -inf logits are allowed (a probability of 0). Pure and
 * thread-safe. Uses the AVX2 kernels when the CPU has them, unless
 * KLD_KERNELS=ref. */
kld_status kld_position_compute(const float *ref_logits, const float *arm_logits, int32_t n_vocab,
                                int32_t next_token, int topk, kld_position *out, kld_error *err);

/* The scalar reference and the AVX2 version (call only when
 * kld_cpu_has_avx2()); same contract, results equal to ~1e-12 relative. */
kld_status kld_position_compute_ref(const float *ref_logits, const float *arm_logits,
                                    int32_t n_vocab, int32_t next_token, int topk,
                                    kld_position *out, kld_error *err);
kld_status kld_position_compute_avx2(const float *ref_logits, const float *arm_logits,
                                     int32_t n_vocab, int32_t next_token, int topk,
                                     kld_position *out, kld_error *err);

/* A truncated row (kld_trunc.c): the reference known on n vocabulary ids
 * idx[0..n) as full-vocabulary log-probabilities lp, the arm's
 * full-vocabulary log-probabilities lq at the same ids. top_ref / top_arm
 * are the argmaxes over the full vocabularies (-1: unknown, then the
 * argmax within the subset, first id on ties); logp_next_* the log-probs of
 * the next token (NAN: unknown). full: the subset is the whole vocabulary
 * (no tail). Top-k overlap is taken within the subset (ties to the lower
 * id), k = min(topk, n). */
typedef struct kld_trunc_row {
    int32_t n;
    const int32_t *idx;
    const double *lp, *lq;
    const float *rank_ref, *rank_arm; /* what top-k ranks by (the stored logits) */
    int32_t top_ref, top_arm;
    int32_t next_token;
    double logp_next_ref, logp_next_arm;
    bool full;
    /* the tails' masses when the caller knows them better than 1 - sum over
     * the subset (llama.cpp rows: the decoded entries outside the window);
     * NAN: 1 - sum */
    double tail_ref, tail_arm;
    /* rank_ref / rank_arm hold float16 values, the stored distribution
     * normalised (kld_row_as_f16): kld_bound then subtracts what the
     * rounding can move the coarse KL by (first order with a second-order
     * margin), so that it stays a lower bound of the unrounded rows' KL */
    bool f16_ref, f16_arm;
    /* no valid lower bound (llama.cpp base rows, float16 dumps whose lse is
     * the unrounded logits'): kld_bound = NAN */
    bool no_bound;
} kld_trunc_row;

/* Fills *out (ctx_pos = 0) as described at kld_position. Fails (KLD_ERR_ARG)
 * on NaN or +inf log-probabilities and on n < 1. */
kld_status kld_position_truncated(const kld_trunc_row *row, int topk, kld_position *out,
                                  kld_error *err);

/* mx + ln sum_i exp(x_i - mx) for a row whose maximum is mx (finite), with
 * the same kernels as kld_position_compute. */
double kld_row_logsumexp(const float *x, int32_t n, float mx);

/* Rank of x[next] among x[0..n): the ids before it by a larger value, or
 * an equal value at a lower id (the argmax's tie rule), saturated at
 * KLD_RANK_MAX. */
uint16_t kld_rank_in_row(const float *x, int32_t n, int32_t next);

/* Label-in-top-k is reported for these k (kld_summary.label_topk_*;
 * KLD_LABEL_K_N in kld.h). */
#define KLD_LABEL_K_MAX 10
extern const int kld_label_k[KLD_LABEL_K_N]; /* 1, 5, 10 */

/* "ref" or "avx2": what kld_position_compute uses. */
const char *kld_math_kernel_name(void);

/* ---- accumulator (stats.c) ---- */

typedef struct kld_stats kld_stats;

/* Running values for a progress line (from the raw double sums). */
typedef struct kld_stats_running {
    uint64_t n_positions, n_tokens, n_docs;
    double kld_mean;       /* pooled mean so far (0 before any position) */
    double top1_agreement; /* fraction so far */
    double ln_ppl_ratio;   /* mean nll_arm - mean kld_position_nll_ref so far */
} kld_stats_running;

/* kld_stats_create, kld_stats_free: kld.h */

/* kld_stats_begin_doc, kld_stats_add, kld_stats_add_logits: kld.h. Documents
 * are numbered 0, 1, ... in call order (empty ones keep their number). */

/* Appends src's documents and records after dst's (shards of one run, in
 * order). Fails with KLD_ERR_MISMATCH when the k differ. */
kld_status kld_stats_merge(kld_stats *dst, const kld_stats *src, kld_error *err);

/* Makes room for n_records more records and n_docs more documents at once
 * (a merge knows its totals: no doubling growth). */
kld_status kld_stats_reserve(kld_stats *st, size_t n_records, size_t n_docs, kld_error *err);

int kld_stats_topk(const kld_stats *st);
void kld_stats_get_running(const kld_stats *st, kld_stats_running *out);
/* Number of documents begun, and document i's first record and count. */
size_t kld_stats_doc_count(const kld_stats *st);
void kld_stats_doc_range(const kld_stats *st, size_t doc, size_t *first, size_t *count);

/* ---- summary (stats_summary.c) ---- */

/* kld_dist, kld_bucket, kld_summary and kld_pct_fractions: kld.h. */

/* kld_stats_finalize (kld.h) computes every statistic above. Fails (KLD_ERR_ARG)
 * when no position was scored; KLD_ERR_NOMEM when scratch memory is missing. */

/* Records that need not be in memory (a merge reads them from the shards'
 * partials): read in order, in batches, as many passes as asked. The
 * summary makes about ten passes and holds 3 doubles per position of
 * scratch, never the 80-byte records. */
typedef struct kld_record_source {
    void *user;
    size_t n;                   /* records */
    int topk;
    const uint64_t *doc_start;  /* first record of each document begun */
    size_t n_docs;
    /* The next batch of the current pass (restart: begin a new pass at
     * record 0); *m = 0 at the end. The batch is valid until the next call. */
    kld_status (*next)(void *user, bool restart, const kld_position **batch, size_t *m,
                       kld_error *err);
} kld_record_source;

/* The accumulator as a source (borrows st). */
void kld_stats_source(const kld_stats *st, kld_record_source *out);
/* kld_stats_finalize of any source: the same statistics bit for bit. */
kld_status kld_summary_from_source(const kld_record_source *src, kld_summary *out, kld_error *err);

/* Two-sided sign-test p-value for `plus` and `minus` untied outcomes
 * (exact binomial up to 10^6 of them, in log space; then the normal
 * approximation with continuity correction). With the discordant pairs of
 * two paired classifiers it is McNemar's exact test. sign_test.c */
double kld_sign_test_p(uint64_t plus, uint64_t minus);

/* Helpers behind the summary, exposed for tests and other modules. */
double kld_percentile_sorted(const double *sorted, size_t n, double fraction);
/* mean and se of x[0..n) as defined above (two-pass, compensated sums). */
void kld_mean_se(const double *x, size_t n, double *mean, double *se);

#endif
