/* sweep_cli.h — what `kldeval sweep` and `kldeval kl --sweep/--floor` share:
 * the reference and window flags of the teacher pass, the recording flags,
 * running the sweep with progress and Ctrl-C, the JSON head and arm
 * objects, and recording every arm in the run database (mode "sweep"). */
#ifndef KLD_CLI_SWEEP_CLI_H
#define KLD_CLI_SWEEP_CLI_H

#include "cli/commands.h"
#include "eval/bootstrap.h"
#include "eval/sweep.h"

#include <jansson.h>
#include <stdio.h>

typedef struct kld_sweep_cli_common {
    kld_dump_config teacher; /* model_path, levers, corpus and windows, top_k, out */
    int topk;
    kld_kl_outputs o;
    bool teacher_top_k_given;
} kld_sweep_cli_common;

#define SWEEP_WINDOW_HELP \
"  --corpus FILE, --corpus-format F, --ids-file FILE, --max-docs N, --max-tokens N\n" \
"                         the teacher's corpus (default: the built-in corpus), as for kl\n" \
"  --chunking MODE        stream (default: windows of exactly --ctx tokens, rows 0..ctx-2\n" \
"                         scored) or llamacpp (kl --help); the windows of a saved teacher\n" \
"  --ctx N, --chunks N, --chunk N, --threads N\n" \
"                         window length (default 512), windows (default all), prefill chunk\n" \
"                         (default 128), worker threads (default: all cores)\n"
#define SWEEP_RECORD_HELP \
"  --db PATH / --no-db    record every arm in this run database / do not (default: as kl)\n" \
"  --html FILE            the HTML report of the sweep's arms (see kldeval report)\n" \
"  --label NAME           label prefix of the recorded arms (default \"sweep\")\n" \
"  --quiet                no progress lines\n" \
"  --bootstrap N          95%% intervals of every arm's KLD mean, median, p90..p99.9, top-1 and PPL\n" \
"                         ratio, and the paired bootstrap of each arm against the baseline arm, by\n" \
"                         resampling whole windows N times, 0 .. 100000 (default 1000; 0: none)\n" \
"  --bootstrap-seed S     the resampling's seed (default 0)\n"

/* An arm's intervals and its paired comparison with the sweep's baseline. */
typedef struct kld_sweep_ci {
    kld_bootstrap boot;      /* replicates 0: none (no bootstrap, or one window) */
    kld_paired_bootstrap vs; /* this arm − the baseline; replicates 0: none (the baseline itself) */
} kld_sweep_ci;

void kld_sweep_cli_defaults(kld_sweep_cli_common *k);
/* One of the shared flags at argv[*i]: 1 consumed, 0 error (printed), -1 not one. */
int kld_sweep_cli_flag(const char *cmd, int argc, char **argv, int *i, kld_sweep_cli_common *k);
/* After parsing: the output files can be written and clash with no input. */
bool kld_sweep_cli_check(const char *cmd, const kld_sweep_cli_common *k, const char *json_path);
/* The sweep's configuration (arms left empty), progress on stderr unless quiet. */
void kld_sweep_cli_config(kld_sweep_cli_common *k, kld_sweep_config *c);
/* kld_sweep_run with Ctrl-C stopping after the current chunk. */
kld_status kld_sweep_cli_run(const kld_sweep_config *c, kld_sweep_result *r, kld_error *err);
void kld_sweep_cli_end(const kld_sweep_config *c, kld_sweep_result *r);

void kld_sweep_cli_print_head(const kld_sweep_cli_common *k, const kld_sweep_result *r);
json_t *kld_sweep_cli_json_head(const char *schema, const kld_sweep_cli_common *k,
                                const kld_sweep_result *r);
json_t *kld_sweep_cli_arm_json(const kld_sweep_outcome *o, double bpw);
/* Every arm's bootstrap (k->o.bootstrap resamples, -1: the default) and its
 * paired bootstrap against arm baseline (-1: none): *out[r->n_done],
 * caller frees. Arms of one window get no intervals. */
kld_status kld_sweep_cli_intervals(const kld_sweep_cli_common *k, const kld_sweep_result *r, long baseline,
                                   kld_sweep_ci **out, kld_error *err);
/* Adds an arm's intervals to its JSON object: kld.ci95, top1_agreement_ci95,
 * ppl_ratio_ci95, bootstrap, and "vs_baseline" {baseline, paired (A = this
 * arm, B = the baseline), verdict}. */
void kld_sweep_cli_arm_json_ci(json_t *arm, const kld_sweep_ci *ci, const char *baseline);
/* An arm's gates: kl's conditions on its report (with its intervals),
 * paired ones (NULL: none) on its comparison with the baseline; the
 * verdicts (NULL when out of memory), *pass false when one fails. */
json_t *kld_sweep_cli_judge(const kld_sweep_cli_common *k, const kld_sweep_outcome *o, const kld_sweep_ci *ci,
                            const kld_gates *gates, const kld_gates *paired, bool *pass);
/* The table of intervals and paired comparisons (report_sweep.h). */
void kld_sweep_cli_print_intervals(const kld_sweep_result *r, const kld_sweep_ci *ci, long baseline);
/* Every completed arm as a run-database row; false as kld_record_runs. ci
 * (NULL: none): each report keeps its arm's intervals; gates (NULL: none):
 * gates[i] (NULL: none) the verdicts kept in arm i's report. */
bool kld_sweep_cli_record(const char *cmd, const kld_sweep_cli_common *k, const kld_sweep_result *r,
                          const kld_sweep_ci *ci, json_t *const *gates);

#endif
