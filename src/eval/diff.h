/* diff.h — `kldeval diff`: where in the network an arm's drift enters. The
 * kl evaluation runs as usual (same arms, corpus, windows and KLD
 * statistics); the two model sessions' layer observers hand over, per layer
 * and chunk, the mixer output, the MLP output and the residual stream, and
 * every scored position's error of the arm against the reference is folded
 * into streaming double-precision statistics. Memory: the reference's
 * hidden states of one chunk per (layer, site), never a whole window's.
 *
 * Per scored position p and site (a: arm, r: reference, n_embd values):
 *   rel_frob = ‖a−r‖ / ‖r‖        cosine = 1 − a·r / (‖a‖‖r‖)
 *   max_abs  = max |a−r|
 * each reported as the mean over positions ± its standard error
 * (sqrt(var/(N−1)), var the population variance), with the position of the
 * largest rel_frob. SQNR is the pooled ratio 10·log10(Σ‖r‖² / Σ‖a−r‖²) over
 * the scored positions, its standard error by the delta method; +inf (flag
 * sqnr_inf) when every error is exactly 0. */
#ifndef KLD_EVAL_DIFF_H
#define KLD_EVAL_DIFF_H

#include "eval/kl_driver.h"

#include <jansson.h>
#include <stdio.h>

typedef struct kld_diff_site {
    int64_t layer;
    kld_layer_site site;
    uint64_t n;                        /* scored positions */
    double rel_frob, rel_frob_se;
    double cosine, cosine_se;
    double max_abs, max_abs_se;        /* per-position max |a−r|: mean ± se */
    double max_abs_max;                /* the largest |a−r| of the run */
    double sqnr_db, sqnr_db_se;        /* sqnr_inf: +inf (no error at all), se 0 */
    bool sqnr_inf;
    double worst_rel_frob;             /* the largest per-position rel_frob */
    uint64_t worst_window;             /* its window (plan index) and position in it */
    int64_t worst_pos;
} kld_diff_site;

/* One weight matrix (--matrices): ‖W_arm·x − W_ref·x‖ / ‖W_ref·x‖ pooled over every row the
 * matrix multiplied (all positions of every chunk; the head only the scored ones), with x
 * the arm's own input rows (the error this matrix's precision adds) and the reference's
 * (what it would add on a clean stream); products in double over the dequantized weights.
 * The token embedding's lookup (no product) is listed as token_embd.weight, unless it is a
 * tied head measured as one: the relative error of the rows looked up at the scored
 * positions (own and reference input alike). A routed expert's slice of a merged
 * blk.N.ffn_*_exps tensor: the error on the rows each model routed to it, pooled under the
 * merged tensor's name. LoRA side products are not covered. */
typedef struct kld_diff_matrix {
    char name[96];
    uint64_t rows;
    double rel_err_own_input, rel_err_ref_input;
} kld_diff_matrix;

typedef struct kld_diff_result {
    kld_kl_result kl;                  /* the kl run itself: its KLD statistics, labels, config */
    int64_t n_layer, n_embd;
    kld_diff_site *sites;              /* n_layer · KLD_SITE_COUNT, layer-major */
    size_t n_sites;
    int64_t worst_layer;               /* the sublayer output with the lowest SQNR (-1: none) */
    bool matrices_measured;
    kld_diff_matrix *matrices;         /* in the order the reference first ran them */
    size_t n_matrices;
} kld_diff_result;

/* The kl configuration's rules, plus diff's own: a model reference and a
 * model or self-flag arm (no saved teachers, candidate dumps or llama.cpp
 * base files: they hold no hidden states), no --decode, no shards or
 * checkpoints. Messages name the flag. */
kld_status kld_diff_check(const kld_kl_config *c, kld_error *err);
/* Runs it; both models must share architecture, n_layer and n_embd. */
/* matrices: also the per-matrix errors (four extra products per weight matrix). */
kld_status kld_diff_run(const kld_kl_config *c, bool matrices, kld_diff_result *out,
                        kld_error *err);
void kld_diff_result_free(kld_diff_result *r);

/* The report (schema kldeval.diff/1, docs/diff.md); sum: the kl run's
 * statistics (the logits row). */
json_t *kld_diff_json(const kld_diff_result *r, const kld_summary *sum);
/* The text table: layers down, metrics across, the worst layer flagged. */
void kld_diff_print(FILE *f, const kld_diff_result *r, const kld_summary *sum);

#endif
