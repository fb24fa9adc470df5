/* runs_cap.h — how `kldeval runs` prints capability runs (mode "cap" and
 * "cap-score", cmd_runs_cap.c): their list cells, their show section and
 * the side-by-side comparison of their per-task accuracies. */
#ifndef KLD_CLI_RUNS_CAP_H
#define KLD_CLI_RUNS_CAP_H

#include "db/db.h"

#include <stddef.h>

/* Prints s left-aligned in width columns, counting UTF-8 characters
 * (cmd_runs.c). */
void kld_runs_pad(const char *s, int width);

/* The list's score cell: "Cap 0.4167 (ref 0.5000)", or "Cap 0.5000" with
 * one model; and the difference cell "Δ -0.0833" ("-" with one model). */
const char *kld_runs_cap_score_cell(const kld_db_row *r, char *buf, size_t n);
const char *kld_runs_cap_diff_cell(const kld_db_row *r, char *buf, size_t n);
/* show: tasks, n, seed, the per-task accuracies of each model, the paired
 * difference with its standard error and McNemar's discordant counts, and
 * the Capability_Score. */
void kld_runs_show_cap(const kld_db_row *r);
/* compare of capability runs only: every model of every run side by side,
 * one line per task, then the Capability_Score. */
void kld_runs_compare_cap(kld_db_row *const *rows, size_t n);

#endif
