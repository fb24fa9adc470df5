/* report_html.h — the HTML report of recorded runs (`kldeval report`,
 * `kl --html`): one self-contained file, everything inline (Chart.js from
 * vendor/chart.js, the page's script and style), no network request (a
 * Content-Security-Policy forbids any).
 *
 * Sections: the summary table (every number also in data-run, data-key and
 * data-value attributes, data-value printed with 17 significant digits, so
 * a test can compare the page with the database); each arm's KLD histogram
 * (40 log-spaced bins shared by all arms, positions with KLD 0 counted
 * apart) and CDF (at most 200 points; from the percentiles when a run has
 * no per-position values); KLD by context position and by the reference's
 * confidence (the report's buckets, ± se); top-1 agreement and PPL ratio
 * (± se); size against mean KLD over all arms; the arms ranked by mean KLD
 * (labelled as the sweep's groups when every run is a sweep); the paired
 * comparisons of every pair (as `kldeval runs compare`); each run's
 * configuration. Capability runs (kld_db_row.cap.present) are left out of
 * all of that and get their own section (report_html_cap.c): the per-task
 * accuracy table and a grouped bar chart, data under "cap". The data behind
 * the charts is one JSON object in
 * <script type="application/json" id="kld-data">. */
#ifndef KLD_REPORT_HTML_H
#define KLD_REPORT_HTML_H

#include "db/db.h"

/* Writes the report of runs ids[0..n_ids) to out_path (atomically: a
 * temporary file renamed into place). Unknown ids fail (KLD_ERR_ARG) before
 * anything is written. */
kld_status kld_report_html_write(kld_db *db, const int64_t *ids, size_t n_ids, const char *out_path,
                                 kld_error *err);

/* The chart data object for the runs (exposed for tests; NULL on failure). */
json_t *kld_report_html_data(kld_db *db, kld_db_row *const *rows, size_t n, kld_error *err);

#endif
