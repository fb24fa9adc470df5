/* report_json.c — the --json report of `kldeval kl` (schema "kldeval.kl/1",
 * documented in report.h), built with jansson. */
#include "report/report.h"

#include "common/common.h"
#include "report/report_impl.h"

#include <errno.h>
#include <math.h>
#include <string.h>

const char *const kld_report_pct_keys[KLD_N_PCT] = {"p0_1", "p1",  "p5",  "p10", "p25",
                                                    "p75",  "p90", "p95", "p99", "p99_9"};

/* Sets key to v, or to null when v is not finite (JSON has no NaN/inf).
 * Returns false when out of memory. */
/* A number, or null for NaN and infinities (JSON has neither). */
static json_t *json_real_or_null(double v) { return isfinite(v) ? json_real(v) : json_null(); }

bool kld_json_set_real(json_t *obj, const char *key, double v) {
    json_t *j = json_real_or_null(v);
    return j && json_object_set_new(obj, key, j) == 0;
}

bool kld_json_set_uint(json_t *obj, const char *key, uint64_t v) {
    json_t *j = json_integer((json_int_t)v);
    return j && json_object_set_new(obj, key, j) == 0;
}

double kld_report_rate(uint64_t tokens, double seconds) {
    return seconds > 0.0 ? (double)tokens / seconds : NAN;
}

static json_t *dist_json(const kld_dist *d) {
    json_t *o = json_object();
    if (!o) return NULL;
    bool ok = kld_json_set_real(o, "mean", d->mean) && kld_json_set_real(o, "stderr", d->se) &&
              kld_json_set_real(o, "min", d->min);
    for (int i = 0; i < KLD_N_PCT && ok; i++) {
        if (i == 5) ok = kld_json_set_real(o, "median", d->median); /* between p25 and p75 */
        ok = ok && kld_json_set_real(o, kld_report_pct_keys[i], d->pct[i]);
    }
    ok = ok && kld_json_set_real(o, "max", d->max);
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *buckets_json(const kld_bucket *b, int nb) {
    json_t *a = json_array();
    if (!a) return NULL;
    for (int i = 0; i < nb; i++) {
        if (!b[i].n) continue;
        json_t *o = json_object();
        bool ok = o && kld_json_set_real(o, "lo", b[i].lo) && kld_json_set_real(o, "hi", b[i].hi) &&
                  kld_json_set_uint(o, "n", b[i].n) &&
                  kld_json_set_real(o, "kld_mean", b[i].kld_mean) &&
                  kld_json_set_real(o, "kld_stderr", b[i].kld_se) &&
                  kld_json_set_real(o, "kld_median", b[i].kld_median) &&
                  kld_json_set_real(o, "top1_agreement", b[i].top1_agreement);
        if (!ok || json_array_append_new(a, o) != 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

/* Sets key to a new value v (consumed, as json_object_set_new does even on
 * failure), failing when v is NULL. */
static bool set_new(json_t *obj, const char *key, json_t *v) {
    return v && json_object_set_new(obj, key, v) == 0;
}

/* "label_in_topk": {"k": [1, 5, 10], "ref": [...], "ref_stderr": [...],
 * "arm": [...], "arm_stderr": [...], "n_ref", "n_arm"}: is the true next
 * token among each side's top k. */
static json_t *label_topk_json(const kld_summary *s) {
    json_t *o = json_object(), *k = json_array(), *r = json_array(), *re = json_array(),
           *a = json_array(), *ae = json_array();
    bool ok = o && k && r && re && a && ae;
    for (int j = 0; ok && j < KLD_LABEL_K_N; j++)
        ok = !json_array_append_new(k, json_integer(kld_label_k[j])) &&
             !json_array_append_new(r, json_real_or_null(s->label_topk_ref[j])) &&
             !json_array_append_new(re, json_real_or_null(s->label_topk_ref_se[j])) &&
             !json_array_append_new(a, json_real_or_null(s->label_topk_arm[j])) &&
             !json_array_append_new(ae, json_real_or_null(s->label_topk_arm_se[j]));
    if (!ok) {
        json_decref(o);
        json_decref(k);
        json_decref(r);
        json_decref(re);
        json_decref(a);
        json_decref(ae);
        return NULL;
    }
    json_object_set_new(o, "k", k);
    json_object_set_new(o, "ref", r);
    json_object_set_new(o, "ref_stderr", re);
    json_object_set_new(o, "arm", a);
    json_object_set_new(o, "arm_stderr", ae);
    kld_json_set_uint(o, "n_ref", s->n_rank_ref);
    kld_json_set_uint(o, "n_arm", s->n_rank_arm);
    return o;
}

json_t *kld_report_json(const kld_summary *s, const kld_report_run *run) {
    json_t *o = json_object();
    if (!o) return NULL;
    bool ok = set_new(o, "schema", json_string("kldeval.kl/1")) &&
              set_new(o, "version", json_string(kld_version())) &&
              set_new(o, "partial", json_boolean(run->partial)) &&
              kld_json_set_uint(o, "n_positions", s->n_positions) &&
              kld_json_set_uint(o, "n_tokens", s->n_tokens) &&
              kld_json_set_uint(o, "n_docs", s->n_docs) &&
              kld_json_set_uint(o, "n_docs_scored", s->n_docs_scored);

    /* set_new consumes its value even on failure, so sub-objects are
     * attached first and completed through the borrowed pointer. */
    json_t *kld = ok ? dist_json(&s->kld) : NULL;
    ok = set_new(o, "kld", kld) && kld_json_set_real(kld, "doc_mean", s->kld_doc_mean) &&
         kld_json_set_real(kld, "doc_stderr", s->kld_doc_se);
    ok = ok && set_new(o, "kld_reverse", dist_json(&s->kld_rev)) &&
         set_new(o, "jsd", dist_json(&s->jsd));

    ok = ok && kld_json_set_real(o, "top1_agreement", s->top1_agreement) &&
         kld_json_set_real(o, "top1_agreement_stderr", s->top1_se) &&
         kld_json_set_uint(o, "topk", (uint64_t)s->topk) &&
         kld_json_set_real(o, "topk_overlap", s->topk_overlap) &&
         kld_json_set_real(o, "topk_overlap_stderr", s->topk_se) &&
         kld_json_set_real(o, "ppl_ref", s->ppl_ref) &&
         kld_json_set_real(o, "ppl_ref_stderr", s->ppl_ref_se) &&
         kld_json_set_real(o, "ppl_arm", s->ppl_arm) &&
         kld_json_set_real(o, "ppl_arm_stderr", s->ppl_arm_se) &&
         kld_json_set_real(o, "ln_ppl_ratio", s->ln_ppl_ratio) &&
         kld_json_set_real(o, "ln_ppl_ratio_stderr", s->ln_ppl_ratio_se) &&
         kld_json_set_real(o, "ppl_ratio", s->ppl_ratio) &&
         kld_json_set_real(o, "ppl_ratio_stderr", s->ppl_ratio_se) &&
         kld_json_set_real(o, "ppl_diff", s->ppl_diff) &&
         kld_json_set_real(o, "ppl_diff_stderr", s->ppl_diff_se) &&
         kld_json_set_real(o, "nll_correlation", s->nll_cor);

    ok = ok && set_new(o, "label_in_topk", label_topk_json(s)) &&
         kld_json_set_real(o, "topk_ordered", s->topk_ordered) &&
         kld_json_set_real(o, "topk_ordered_stderr", s->topk_ordered_se);
    json_t *dl = ok ? json_object() : NULL;
    ok = set_new(o, "dlogit_centered", dl) && kld_json_set_real(dl, "mean", s->dlogit_mean) &&
         kld_json_set_real(dl, "stderr", s->dlogit_se) && kld_json_set_uint(dl, "n", s->n_dlogit);

    json_t *dp = ok ? dist_json(&s->dp) : NULL;
    ok = set_new(o, "delta_p", dp) && kld_json_set_real(dp, "rms", s->dp_rms) &&
         kld_json_set_real(dp, "rms_stderr", s->dp_rms_se);

    /* truncated reference rows: how much of the reference the numbers cover */
    if (ok && s->n_truncated > 0) {
        json_t *t = json_object();
        ok = set_new(o, "truncated", t) && kld_json_set_uint(t, "n_rows", s->n_truncated) &&
             kld_json_set_real(t, "mass_mean", s->mass_mean) &&
             kld_json_set_real(t, "mass_min", s->mass_min) &&
             kld_json_set_real(t, "mass_p1", s->mass_p1) &&
             set_new(t, "kld_bound", s->n_no_bound ? json_null() : dist_json(&s->kld_bound)) &&
             kld_json_set_uint(t, "n_no_bound", s->n_no_bound) &&
             set_new(t, "comparable", json_boolean(s->mass_mean >= KLD_MASS_COMPARABLE)) &&
             kld_json_set_uint(t, "n_next_outside", s->n_next_outside) &&
             kld_json_set_real(t, "ppl_ref_llamacpp", s->ppl_ref_llamacpp) &&
             kld_json_set_real(t, "ppl_ref_llamacpp_stderr", s->ppl_ref_llamacpp_se);
    }
    ok = ok && set_new(o, "by_ref_confidence", buckets_json(s->by_conf, KLD_CONF_BUCKETS)) &&
         set_new(o, "by_context_position", buckets_json(s->by_pos, KLD_POS_BUCKETS)) &&
         kld_json_set_real(o, "elapsed_s", run->elapsed_s) &&
         kld_json_set_real(o, "ref_seconds", run->ref_seconds) &&
         kld_json_set_real(o, "arm_seconds", run->arm_seconds) &&
         kld_json_set_uint(o, "ref_tokens", run->ref_tokens) &&
         kld_json_set_uint(o, "arm_tokens", run->arm_tokens) &&
         kld_json_set_real(o, "ref_tokens_per_s", kld_report_rate(run->ref_tokens, run->ref_seconds)) &&
         kld_json_set_real(o, "arm_tokens_per_s", kld_report_rate(run->arm_tokens, run->arm_seconds)) &&
         set_new(o, "config", run->config ? json_deep_copy(run->config) : json_object());
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

kld_status kld_report_json_dump(const char *path, const json_t *report, kld_error *err) {
    if (!report) return kld_fail(err, KLD_ERR_NOMEM, "%s: cannot build the JSON report", path);
    errno = 0;
    if (json_dump_file(report, path, JSON_INDENT(2)) != 0)
        return kld_fail(err, KLD_ERR_IO, "%s: cannot write the JSON report: %s", path,
                        errno ? strerror(errno) : "write failed");
    return KLD_OK;
}

kld_status kld_report_json_write(const char *path, const kld_summary *s, const kld_report_run *run,
                                 kld_error *err) {
    json_t *o = kld_report_json(s, run);
    kld_status st = kld_report_json_dump(path, o, err);
    json_decref(o);
    return st;
}

json_t *kld_report_summary_json(const kld_summary *s) {
    kld_report_run run = {0};
    json_t *o = kld_report_json(s, &run);
    /* a summary alone has no run: drop what only a run defines */
    static const char *const run_keys[] = {"config", "elapsed_s", "ref_seconds", "arm_seconds",
                                           "ref_tokens", "arm_tokens", "ref_tokens_per_s",
                                           "arm_tokens_per_s", "partial"};
    for (size_t i = 0; o && i < sizeof run_keys / sizeof run_keys[0]; i++) json_object_del(o, run_keys[i]);
    return o;
}
