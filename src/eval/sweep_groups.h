/* sweep_groups.h — the sensitivity sweep (`kldeval sweep`): which tensors
 * deserve more bits. The model's tensors are grouped (layers, tensor
 * classes, or both, plus embd and head); one arm per group has only that
 * group at the base policy's types and the rest raised (--invert: only that
 * group raised), each a MODEL@POLICY arm scored against one saved teacher
 * (eval/sweep.h). The groups are ranked by the paired KLD the higher
 * precision saves; a bits-per-weight budget gets a proposed policy, checked
 * on the model's plan and scored as one more arm. */
#ifndef KLD_EVAL_SWEEP_GROUPS_H
#define KLD_EVAL_SWEEP_GROUPS_H

#include "eval/diff.h"
#include "eval/sweep.h"
#include "quant/quant.h"

typedef struct kld_sweep_groups_config {
    const char *model;       /* the reference: the stored model (no @POLICY) */
    const char *base;        /* the low precision's policy */
    const char *upgrade;     /* the raised groups' type, or NULL: the stored types */
    kld_group_kind kind;
    bool invert;             /* each arm raises only its group */
} kld_sweep_groups_config;

/* The groups with their bytes at the base (lo) and raised (hi), and the arms:
 * the all-base arm, the all-raised arm (plain sweep with --upgrade), then
 * one per group in group order. */
typedef struct kld_sweep_groups {
    kld_source *src;
    kld_hparams hp;
    kld_quant_view base_view;
    kld_quant_group *lo, *hi;
    size_t n;
    bool have_view;
    kld_sweep_arm *arms;
    char **owned;
    size_t n_arms, n_owned;
    long base, all_high;     /* indices of the all-base and all-raised arms (-1: none) */
} kld_sweep_groups;

/* One group's row, both deltas in one sense, what the higher precision of
 * the group buys: ΔKLD saved > 0 and top-1 gained > 0 mean the group
 * deserves it. */
typedef struct kld_sweep_group_result {
    size_t group, arm;
    kld_paired d_kld, d_top1;
} kld_sweep_group_result;

/* The proposal for a budget, scored (the arm appended to the result). */
typedef struct kld_sweep_proposal {
    char policy[8192];
    double bpw;              /* on the model's real plan */
    size_t n_raised;
    const kld_sweep_outcome *arm, *base;
    kld_paired d_kld_vs_base;
} kld_sweep_proposal;

/* --rank-by diff: the groups ranked by the matrix errors of ONE diff pass
 * (eval/diff.h, --matrices) instead of one KLD arm per group. The pass
 * compares the sweep's high precision (the reference: the stored model, or
 * MODEL@BASE,*=UP with an upgrade type) with its all-base arm (MODEL@BASE:
 * every group at the types the sweep would give it). A group's score is the
 * sum over its weight matrices of rel_err_own_input², the noise-to-signal
 * power ratio the base precision adds at each matrix where it stands
 * (docs/policies.md says why this measure). */
#define KLD_SWEEP_DIFF_SCORE "sum_rel_err_own_input_sq"
typedef struct kld_sweep_diff_row {
    size_t group;
    double score;            /* NAN: no matrix of the group was measured */
    size_t n_matrices;       /* the group's matrices the pass measured */
} kld_sweep_diff_row;

/* The diff pass's two models (malloc'd strings, caller frees). */
kld_status kld_sweep_groups_diff_models(const kld_sweep_groups_config *c, char **ref, char **arm,
                                        kld_error *err);
/* Every group's row from the pass's matrices, ranked by score, largest first
 * (ties and unmeasured groups in group order, unmeasured last): *out has g->n
 * rows (caller frees). */
kld_status kld_sweep_groups_rank_diff(const kld_sweep_groups_config *c, const kld_sweep_groups *g,
                                      const kld_diff_result *d, kld_sweep_diff_row **out,
                                      kld_error *err);

kld_status kld_sweep_groups_plan(const kld_sweep_groups_config *c, kld_sweep_groups *g, kld_error *err);
void kld_sweep_groups_free(kld_sweep_groups *g);
/* The first group arm's index in the result. */
size_t kld_sweep_groups_first(const kld_sweep_groups *g);
/* The groups scored so far (the arms r holds), ranked by ΔKLD saved,
 * largest first: *out has n_out rows (caller frees). */
kld_status kld_sweep_groups_rank(const kld_sweep_groups_config *c, const kld_sweep_groups *g,
                                 const kld_sweep_result *r, kld_sweep_group_result **out,
                                 size_t *n_out, kld_error *err);
/* --budget BPW: groups raised greedily by KLD saved per extra byte while the
 * model fits; the policy's real bits per weight, and its arm scored by sc
 * into r (r->partial: stopped). ranked: every group's row. */
kld_status kld_sweep_groups_propose(const kld_sweep_groups_config *c, const kld_sweep_groups *g,
                                    const kld_sweep_group_result *ranked, size_t n_ranked, double budget,
                                    const kld_sweep_config *sc, kld_sweep_result *r,
                                    kld_sweep_proposal *out, kld_error *err);

#endif
