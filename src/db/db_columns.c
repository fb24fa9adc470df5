/* db_columns.c — the summary statistics that become columns of runs: one
 * table drives the INSERT, the read-back into kld_summary and the CSV
 * export, so a statistic cannot be written under one name and read under
 * another. Adding a statistic means a row here and a migration in
 * db_schema.c (tests/test_db.c checks that both agree). */
#include "db/db_impl.h"

#include <stddef.h>

#define S_D(name, field) {name, offsetof(kld_summary, field), 'd'}
#define S_U(name, field) {name, offsetof(kld_summary, field), 'u'}
#define DIST(p, f)                                                                          \
    S_D(p "_mean", f.mean), S_D(p "_se", f.se), S_D(p "_min", f.min),                       \
        S_D(p "_median", f.median), S_D(p "_max", f.max), S_D(p "_p0_1", f.pct[0]),         \
        S_D(p "_p1", f.pct[1]), S_D(p "_p5", f.pct[2]), S_D(p "_p10", f.pct[3]),            \
        S_D(p "_p25", f.pct[4]), S_D(p "_p75", f.pct[5]), S_D(p "_p90", f.pct[6]),          \
        S_D(p "_p95", f.pct[7]), S_D(p "_p99", f.pct[8]), S_D(p "_p99_9", f.pct[9])

const kld_db_column kld_db_summary_columns[] = {
    S_U("n_positions", n_positions),
    S_U("n_tokens", n_tokens),
    S_U("n_docs", n_docs),
    S_U("n_docs_scored", n_docs_scored),
    {"topk", offsetof(kld_summary, topk), 'i'},
    DIST("kld", kld),
    S_D("kld_doc_mean", kld_doc_mean),
    S_D("kld_doc_se", kld_doc_se),
    DIST("kld_rev", kld_rev),
    DIST("jsd", jsd),
    S_D("top1_agreement", top1_agreement),
    S_D("top1_se", top1_se),
    S_D("topk_overlap", topk_overlap),
    S_D("topk_se", topk_se),
    S_D("ppl_ref", ppl_ref),
    S_D("ppl_ref_se", ppl_ref_se),
    S_D("ppl_arm", ppl_arm),
    S_D("ppl_arm_se", ppl_arm_se),
    S_D("ln_ppl_ratio", ln_ppl_ratio),
    S_D("ln_ppl_ratio_se", ln_ppl_ratio_se),
    S_D("ppl_ratio", ppl_ratio),
    S_D("ppl_ratio_se", ppl_ratio_se),
    S_D("ppl_diff", ppl_diff),
    S_D("ppl_diff_se", ppl_diff_se),
    S_D("nll_cor", nll_cor),
    DIST("dp", dp),
    S_D("dp_rms", dp_rms),
    S_D("dp_rms_se", dp_rms_se),
};

const size_t kld_db_n_summary_columns = sizeof kld_db_summary_columns / sizeof kld_db_summary_columns[0];
