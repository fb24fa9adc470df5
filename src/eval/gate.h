/* gate.h — conditions on a run's reported statistics, for CI pipelines
 * (`kl --gate EXPR`): "kld.mean<=2e-3,kld.p99<=0.05,top1>=0.98". Parsed and
 * checked before the run (an unknown statistic or a malformed condition is
 * an error naming it), evaluated on the run's JSON report after it.
 *
 * A statistic is a path of the kl JSON report (docs/kl.md): a distribution
 * (kld, kld_reverse, jsd, delta_p) and one of its fields (mean, stderr,
 * min, p0_1 … p99_9, median, max, doc_mean, doc_stderr, rms), or a scalar
 * (top1_agreement, topk_overlap, ppl_ratio, ppl_ref, ppl_arm, ppl_diff,
 * ln_ppl_ratio, nll_correlation, n_positions). Aliases: top1 =
 * top1_agreement, topk = topk_overlap, p99.9 = p99_9, p0.1 = p0_1.
 * Operators: <=, <, >=, >. */
#ifndef KLD_EVAL_GATE_H
#define KLD_EVAL_GATE_H

#include "common/common.h"

#include <jansson.h>

/* The exit status of a run whose gates did not all pass (1 stays "error",
 * 2 "usage", 130 "interrupted"). */
#define KLD_EXIT_GATE_FAILED 3

typedef enum kld_gate_op { KLD_GATE_LE, KLD_GATE_LT, KLD_GATE_GE, KLD_GATE_GT } kld_gate_op;

typedef struct kld_gate {
    char stat[64];     /* the report path, aliases resolved: "kld.p99_9" */
    char text[160];    /* the condition as given */
    kld_gate_op op;
    double bound;
    int level;         /* paired gates: 95 in "…@95" (judged on the interval), 0: on the value */
} kld_gate;

typedef struct kld_gates {
    kld_gate *g;
    size_t n;
} kld_gates;

/* The value at a dotted path of a report ("kld.p99_9", "paired.kld.mean",
 * "strata.digits.kld.ci95.mean"); NULL when a part is missing. */
const json_t *kld_json_at_path(const json_t *o, const char *path);

/* Parses a comma-separated list of conditions on kl's statistics (and on
 * a stratum's: strata.NAME.STATISTIC). */
kld_status kld_gates_parse(const char *expr, kld_gates *out, kld_error *err);
void kld_gates_free(kld_gates *g);
/* Every strata.NAME.… condition names a stratum has(strata, NAME) knows. */
kld_status kld_gates_check_strata(const kld_gates *g, bool (*has)(const void *, const char *),
                                  const void *strata, kld_error *err);

/* Conditions on a paired comparison (`runs compare A B --gate`): the
 * differences A − B paired.kld.mean, paired.kld.p99, paired.kld.p99_9 (alias
 * p99.9) and paired.top1, judged on the difference itself or, with "@95",
 * on its 95% interval: "paired.kld.mean<=0@95" passes unless A is
 * distinguishably worse (the interval's low end above 0); ">=X@95" passes
 * unless the interval's high end is below X. */
kld_status kld_gates_parse_paired(const char *expr, kld_gates *out, kld_error *err);

/* Conditions on a capability run's report (`cap --gate`, `smoketest
 * --gate`): capability_score (the arm's; the model's without an arm),
 * capability_score.ref|arm|diff, TASK.accuracy (the arm's; the model's
 * without an arm), TASK.ref.accuracy, TASK.arm.accuracy, TASK.ref.stderr,
 * TASK.arm.stderr, TASK.diff (arm − ref, paired), TASK one of mmlu, gsm8k,
 * ifeval, humaneval, bfcl, hashhop. */
kld_status kld_gates_parse_cap(const char *expr, kld_gates *out, kld_error *err);
/* smoketest's: each condition goes to kl's list or the capability list by
 * its statistic. */
kld_status kld_gates_parse_split(const char *expr, kld_gates *kl, kld_gates *cap, kld_error *err);

/* Conditions on one arm's statistics and on its paired comparison with
 * another arm (`kl` with two arms, `sweep`): each condition goes to kl's
 * list, or to the paired list when it starts with "paired.". */
kld_status kld_gates_parse_with_paired(const char *expr, kld_gates *kl, kld_gates *paired, kld_error *err);
/* Both lists judged: kl on report (a kl JSON report), paired on
 * {"paired": paired_json} (kld_paired_bootstrap_json; NULL: no comparison,
 * so every paired gate fails as not reported); one array of results. */
json_t *kld_gates_eval_with_paired(const kld_gates *kl, const json_t *report, const kld_gates *paired,
                                   const json_t *paired_json, bool *all_pass);

/* Evaluates every gate on report (a kl or a capability run's JSON report): an array of
 * {condition, statistic, op, bound, value, pass}; *all_pass is false when
 * any fails or its statistic is absent or not finite (a gate that cannot be
 * judged does not pass). NULL when out of memory. */
json_t *kld_gates_eval(const kld_gates *g, const json_t *report, bool *all_pass);

/* The same for paired gates on a comparison's JSON: {"paired": {"kld":
 * {"mean": {"diff", "ci95": [lo, hi], "p"}, …}, "top1": {…}}}. */
json_t *kld_gates_eval_paired(const kld_gates *g, const json_t *comparison, bool *all_pass);

/* One line per gate: "gate kld.mean<=2e-3: 0.000804 PASS". */
void kld_gates_print(FILE *f, const json_t *results);

/* What a run does with its gates: judged on report (kl's or a capability
 * run's), printed to f and kept in report under "gates"; *pass false when
 * any fails. A stopped run's partial figures are not judged (a line says
 * so; *pass stays true). No gates: nothing. KLD_ERR_NOMEM when the
 * verdicts cannot be built. */
kld_status kld_gates_judge(const kld_gates *g, json_t *report, bool stopped, FILE *f, bool *pass);

#endif
