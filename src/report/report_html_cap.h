/* report_html_cap.h — the capability section of the HTML report
 * (report_html_cap.c; internal to src/report). rows are capability runs
 * only (kld_db_row.cap.present). */
#ifndef KLD_REPORT_HTML_CAP_H
#define KLD_REPORT_HTML_CAP_H

#include "db/db.h"

#include <stdio.h>

/* The section: per-task accuracy table and the chart's canvas. */
void kld_report_html_cap_section(FILE *f, kld_db_row *const *rows, size_t n);
/* The chart's data: {tasks: [...], bars: [{run, side, name, accuracy: [per
 * task], errors: [per task]}]}; NULL when out of memory. */
json_t *kld_report_html_cap_data(kld_db_row *const *rows, size_t n);

#endif
