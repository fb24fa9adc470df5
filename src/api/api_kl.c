/* api_kl.c — a whole evaluation through the public API (kld_kl_evaluate):
 * the kl driver's result kept with its summary and its JSON report, which
 * is the one `kldeval kl --json` writes. */
#include "kld.h"

#include "common/common.h"
#include "eval/bootstrap.h"
#include "eval/kl_driver.h"
#include "report/report.h"

#include <stdlib.h>

/* The Python package reserves 8 KiB for a kld_summary (python/kldeval). */
_Static_assert(sizeof(kld_summary) <= 8192, "python/kldeval's _KldSummaryBuffer is too small");

struct kld_result {
    kld_kl_result r;
    kld_summary sum;
    bool summarized;
};

kld_status kld_kl_evaluate(const kld_kl_config *c, kld_result **out, kld_error *err) {
    *out = NULL;
    kld_result *res = calloc(1, sizeof *res);
    if (!res) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    kld_status st = kld_kl_run(c, &res->r, err);
    if (!st && kld_stats_count(res->r.stats) > 0) {
        st = kld_stats_finalize(res->r.stats, &res->sum, err);
        res->summarized = st == KLD_OK;
    }
    if (st) {
        kld_result_free(res);
        return st;
    }
    *out = res;
    return KLD_OK;
}

void kld_result_free(kld_result *r) {
    if (!r) return;
    kld_kl_result_free(&r->r);
    free(r);
}

const char *kld_result_mode(const kld_result *r) { return r ? r->r.mode : NULL; }
bool kld_result_partial(const kld_result *r) { return r && r->r.partial; }

kld_status kld_result_summary(const kld_result *r, kld_summary *out, kld_error *err) {
    if (!r || !out) return kld_fail(err, KLD_ERR_ARG, "kld_result_summary: NULL argument");
    if (!r->summarized) return kld_fail(err, KLD_ERR_ARG, "no position was scored");
    *out = r->sum;
    return KLD_OK;
}

const kld_position *kld_result_positions(const kld_result *r, size_t *n) {
    *n = 0;
    return r ? kld_stats_records(r->r.stats, n) : NULL;
}

char *kld_result_json(const kld_result *r, kld_error *err) {
    if (!r || !r->summarized) {
        kld_fail(err, KLD_ERR_ARG, "kld_result_json: no summary (nothing was scored)");
        return NULL;
    }
    const kld_kl_result *k = &r->r;
    kld_report_run run = {k->ref_label, k->arm_label, k->corpus_label, NULL, k->config, k->elapsed_s,
                          k->ref_seconds, k->arm_seconds, k->ref_tokens, k->arm_tokens, k->partial};
    json_t *o = kld_report_json(&r->sum, &run);
    /* the 95% intervals kl reports by default (its --bootstrap 1000, seed 0) */
    kld_record_source src;
    kld_stats_source(k->stats, &src);
    if (o && (kld_bootstrap_report(o, &src, KLD_BOOTSTRAP_DEFAULT, 0, NULL, err) != KLD_OK ||
              kld_strata_report(o, &src, KLD_BOOTSTRAP_DEFAULT, 0, err) != KLD_OK)) {
        json_decref(o);
        return NULL;
    }
    char *text = o ? json_dumps(o, JSON_INDENT(2)) : NULL;
    json_decref(o);
    if (!text) kld_fail(err, KLD_ERR_NOMEM, "cannot build the JSON report");
    return text;
}

char *kld_summary_json(const kld_summary *s, kld_error *err) {
    if (!s) {
        kld_fail(err, KLD_ERR_ARG, "kld_summary_json: NULL summary");
        return NULL;
    }
    json_t *o = kld_report_summary_json(s);
    char *text = o ? json_dumps(o, JSON_INDENT(2)) : NULL;
    json_decref(o);
    if (!text) kld_fail(err, KLD_ERR_NOMEM, "cannot build the JSON summary");
    return text;
}
