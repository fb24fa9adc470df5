/* report_html_diff.h — the `kldeval diff` section of the HTML report
 * (report_html_diff.c; internal to src/report). rows: any runs; only those
 * whose report holds a "diff" table (mode diff) are shown. */
#ifndef KLD_REPORT_HTML_DIFF_H
#define KLD_REPORT_HTML_DIFF_H

#include "db/db.h"

#include <stdio.h>

/* Per diff run: the SQNR chart's canvas (id chart-diff-RUN), the table of
 * the layers' sublayer SQNR with the worst layer flagged (id
 * diff-table-RUN) and, with --matrices, the layer × matrix-class heat map
 * (id diff-heat-RUN). Writes nothing and returns false when no run has a
 * diff table. */
bool kld_report_html_diff_section(FILE *f, kld_db_row *const *rows, size_t n);
/* The chart data: [{run, name, n_layer, worst_layer, sites: {mixer:
 * {sqnr: [per layer, null when +inf or absent], inf: [per layer]}, ffn,
 * resid}}]; NULL when no run has a diff table or out of memory. */
json_t *kld_report_html_diff_data(kld_db_row *const *rows, size_t n);

#endif
