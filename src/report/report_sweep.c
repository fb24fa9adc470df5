/* report_sweep.c — the sweep table (report_sweep.h). */
#include "report/report_sweep.h"

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
