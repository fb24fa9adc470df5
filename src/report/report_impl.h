/* report_impl.h — helpers shared by the report writers (internal to
 * src/report). */
#ifndef KLD_REPORT_IMPL_H
#define KLD_REPORT_IMPL_H

#include "report/report.h"

/* JSON key of each kld_pct_fractions entry ("p0_1" ... "p99_9"). */
extern const char *const kld_report_pct_keys[KLD_N_PCT];

/* Set a number member; non-finite values become null. False when out of memory. */
bool kld_json_set_real(json_t *obj, const char *key, double v);
bool kld_json_set_uint(json_t *obj, const char *key, uint64_t v);

/* The 95% bootstrap interval a kl report keeps at path ("kld.ci95.p99",
 * "top1_agreement_ci95"); false (and NANs) when it has none. */
bool kld_report_ci_at(const json_t *report, const char *path, double *lo, double *hi);

/* tokens / seconds, NAN when seconds <= 0. */
double kld_report_rate(uint64_t tokens, double seconds);

/* s written into HTML text or an attribute, with < > & " escaped
 * (report_html.c). */
void kld_html_esc(FILE *f, const char *s);

#endif
