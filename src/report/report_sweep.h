/* report_sweep.h — the table of a sweep (one reference, many arms): one line
 * per arm with its KLD mean ± standard error, median, p99 and top-1
 * agreement, and optionally a paired difference against another arm (the
 * sensitivity sweep's ΔKLD, the noise floor's KLD − floor) and a size
 * column (a group's bytes, a cache's bytes per token). */
#ifndef KLD_REPORT_SWEEP_H
#define KLD_REPORT_SWEEP_H

#include "eval/stats.h"

#include <stdio.h>

typedef struct kld_sweep_row {
    const char *label;
    const kld_summary *sum;
    bool has_delta;         /* d_* are set */
    double d_kld, d_kld_se; /* paired per position */
    double d_top1, d_top1_se;
    double size;            /* NAN: no size */
    double bpw;             /* NAN: not shown */
} kld_sweep_row;

typedef struct kld_sweep_table {
    const char *title;
    const char *delta_header; /* e.g. "ΔKLD (saved)"; NULL: no delta columns */
    const char *top1_header;  /* the top-1 delta's, in the same sense as delta_header's */
    const char *size_header;  /* e.g. "bytes"; NULL: no size column */
    bool show_bpw;
} kld_sweep_table;

void kld_report_sweep_table(FILE *f, const kld_sweep_table *t, const kld_sweep_row *rows, size_t n);

/* The intervals of each arm (KLD mean, p99, p99.9 and top-1 as "value [lo,
 * hi]") and its paired comparison with the baseline arm on the same
 * positions: ΔKLD mean (arm − baseline) [lo, hi], the two-sided p and a
 * verdict word (better, worse, n.d., same, baseline). */
struct kld_bootstrap;
struct kld_paired_bootstrap;
typedef struct kld_sweep_ci_row {
    const char *label;
    const kld_summary *sum;
    const struct kld_bootstrap *boot;       /* replicates 0: no intervals */
    const struct kld_paired_bootstrap *vs;  /* replicates 0: no comparison */
    const char *verdict;
} kld_sweep_ci_row;

void kld_report_sweep_intervals(FILE *f, const kld_sweep_ci_row *rows, size_t n, const char *baseline);

#endif
