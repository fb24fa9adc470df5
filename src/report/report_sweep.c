/* report_sweep.c — the sweep table (report_sweep.h). */
#include "report/report_sweep.h"

#include "eval/bootstrap.h"

#include <math.h>
#include <string.h>

static void size_cell(FILE *f, double v) {
    if (!isfinite(v)) fprintf(f, " %12s", "-");
    else if (v >= 1e9) fprintf(f, " %10.2f G", v / 1e9);
    else if (v >= 1e6) fprintf(f, " %10.2f M", v / 1e6);
    else if (v >= 1e4) fprintf(f, " %10.1f k", v / 1e3);
    else fprintf(f, " %12.0f", v);
}

void kld_report_sweep_table(FILE *f, const kld_sweep_table *t, const kld_sweep_row *rows, size_t n) {
    int w = 8;
    for (size_t i = 0; i < n; i++) {
        int l = (int)strlen(rows[i].label);
        if (l > w) w = l;
    }
    if (w > 48) w = 48;
    if (t->title) fprintf(f, "%s\n", t->title);
    fprintf(f, "%-*s %24s %11s %11s %8s", w, "arm", "KLD mean ± stderr", "median", "p99", "top-1");
    if (t->delta_header) fprintf(f, " %24s %17s", t->delta_header, t->top1_header ? t->top1_header : "Δtop-1");
    if (t->size_header) fprintf(f, " %12s", t->size_header);
    if (t->show_bpw) fprintf(f, " %7s", "bpw");
    fputc('\n', f);
    for (size_t i = 0; i < n; i++) {
        const kld_sweep_row *r = &rows[i];
        const kld_summary *s = r->sum;
        fprintf(f, "%-*.*s %12.6f ± %9.6f %11.6f %11.6f %7.3f%%", w, w, r->label, s->kld.mean, s->kld.se,
                s->kld.median, s->kld.pct[8], 100.0 * s->top1_agreement);
        if (t->delta_header) {
            if (r->has_delta)
                fprintf(f, " %12.6f ± %9.6f %+7.3f ± %5.3f%%", r->d_kld, r->d_kld_se, 100.0 * r->d_top1,
                        100.0 * r->d_top1_se);
            else
                fprintf(f, " %24s %17s", "-", "-");
        }
        if (t->size_header) size_cell(f, r->size);
        if (t->show_bpw) {
            if (isfinite(r->bpw)) fprintf(f, " %7.3f", r->bpw);
            else fprintf(f, " %7s", "-");
        }
        fputc('\n', f);
    }
}

/* "value [lo, hi]" into buf, or the value alone without an interval */
static const char *with_ci(char *buf, size_t n, double v, kld_ci ci, bool pct, bool sign) {
    const double k = pct ? 100.0 : 1.0;
    if (isnan(ci.lo) || isnan(ci.hi)) snprintf(buf, n, sign ? "%+.4g" : "%.4g", k * v);
    else snprintf(buf, n, sign ? "%+.4g [%+.3g, %+.3g]" : "%.4g [%.3g, %.3g]", k * v, k * ci.lo, k * ci.hi);
    return buf;
}

void kld_report_sweep_intervals(FILE *f, const kld_sweep_ci_row *rows, size_t n, const char *baseline) {
    int w = 8, reps = 0;
    size_t units = 0;
    uint64_t seed = 0;
    for (size_t i = 0; i < n; i++) {
        int l = (int)strlen(rows[i].label);
        if (l > w) w = l;
        if (rows[i].boot->replicates) reps = rows[i].boot->replicates, units = rows[i].boot->n_docs, seed = rows[i].boot->seed;
    }
    if (w > 48) w = 48;
    fprintf(f, "\n95%% intervals (bootstrap: %d resamples of %zu windows, seed %llu)", reps, units,
            (unsigned long long)seed);
    if (baseline) fprintf(f, " and each arm against the baseline %s on the same positions (arm − baseline)", baseline);
    fprintf(f, ":\n");
    if (reps && units < 10)
        fprintf(f, "note: only %zu windows to resample: the intervals and verdicts are rough (more windows: "
                   "--max-docs, --chunks, a smaller --ctx)\n", units);
    fprintf(f, "%-*s %28s %28s %28s %26s", w, "arm", "KLD mean", "KLD p99", "KLD p99.9", "top-1 %");
    if (baseline) fprintf(f, " %30s %8s %s", "ΔKLD mean vs baseline", "p", "verdict");
    fputc('\n', f);
    for (size_t i = 0; i < n; i++) {
        const kld_sweep_ci_row *r = &rows[i];
        const kld_summary *s = r->sum;
        const kld_bootstrap *b = r->boot;
        const kld_ci none = {NAN, NAN};
        char c1[64], c2[64], c3[64], c4[64];
        fprintf(f, "%-*.*s %28s %28s %28s %26s", w, w, r->label,
                with_ci(c1, sizeof c1, s->kld.mean, b->replicates ? b->kld[KLD_BOOT_MEAN] : none, false, false),
                with_ci(c2, sizeof c2, s->kld.pct[8], b->replicates ? b->kld[KLD_BOOT_P99] : none, false, false),
                with_ci(c3, sizeof c3, s->kld.pct[9], b->replicates ? b->kld[KLD_BOOT_P99_9] : none, false, false),
                with_ci(c4, sizeof c4, s->top1_agreement, b->replicates ? b->top1 : none, true, false));
        if (baseline) {
            if (r->vs->replicates)
                fprintf(f, " %30s %8.2g %s", with_ci(c1, sizeof c1, r->vs->mean.diff, r->vs->mean.ci, false, true),
                        r->vs->mean.p, r->verdict);
            else fprintf(f, " %30s %8s %s", "-", "-", r->verdict);
        }
        fputc('\n', f);
    }
}
