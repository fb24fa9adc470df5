/* report_bootstrap.c — the bootstrap intervals in the text report:
 * "value [lo, hi]" for each statistic that has one. */
#include "eval/bootstrap.h"
#include "report/report.h"

#include <math.h>

static void line(FILE *f, const char *name, double value, kld_ci ci) {
    if (isnan(ci.lo)) return;
    fprintf(f, "  %-28s: %.6g [%.6g, %.6g]\n", name, value, ci.lo, ci.hi);
}

void kld_report_bootstrap_text(FILE *f, const kld_bootstrap *b, const kld_summary *s) {
    fprintf(f, "95%% intervals (bootstrap: %d resamples of the %zu documents, seed %llu)\n", b->replicates,
            b->n_docs, (unsigned long long)b->seed);
    line(f, "KLD mean", s->kld.mean, b->kld[KLD_BOOT_MEAN]);
    line(f, "KLD median", s->kld.median, b->kld[KLD_BOOT_MEDIAN]);
    static const int pct[4] = {KLD_BOOT_P90, KLD_BOOT_P95, KLD_BOOT_P99, KLD_BOOT_P99_9};
    static const char *const names[4] = {"KLD p90", "KLD p95", "KLD p99", "KLD p99.9"};
    static const int at[4] = {6, 7, 8, 9}; /* their index in kld_pct_fractions */
    for (int i = 0; i < 4; i++) line(f, names[i], s->kld.pct[at[i]], b->kld[pct[i]]);
    line(f, "top-1 agreement", s->top1_agreement, b->top1);
    line(f, "PPL ratio", s->ppl_ratio, b->ppl_ratio);
}

/* "  name" padded to 30 columns (UTF-8 continuation bytes take none) */
static void row_name(FILE *f, const char *s) {
    int cols = 0;
    fprintf(f, "  %s", s);
    for (const char *p = s; *p; p++) cols += ((unsigned char)*p & 0xC0) != 0x80;
    for (; cols < 28; cols++) fputc(' ', f);
}

void kld_report_paired_text(FILE *f, const kld_paired_bootstrap *b) {
    const struct { const char *name; const kld_paired_ci *v; } rows[] = {
        {"ΔKLD mean", &b->mean}, {"ΔKLD p99", &b->p99}, {"ΔKLD p99.9", &b->p99_9}, {"Δtop-1", &b->top1}};
    fprintf(f, "paired bootstrap (%d resamples of %zu windows), A − B with 95%% intervals:\n", b->replicates,
            b->n_blocks);
    for (size_t q = 0; q < 4; q++) {
        row_name(f, rows[q].name);
        fprintf(f, " %+.6g [%+.6g, %+.6g] p = %.3g\n", rows[q].v->diff, rows[q].v->ci.lo, rows[q].v->ci.hi,
                rows[q].v->p);
    }
}
