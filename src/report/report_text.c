/* report_text.c — the human report of `kldeval kl` on stdout: sections in
 * the order and spirit of llama-perplexity --kl-divergence, aligned columns,
 * units on every line, a loud marker when the run was stopped early. */
#include "report/report.h"

#include "common/common.h"
#include "report/report_impl.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#define LABEL_WIDTH 30

/* Writes label padded to LABEL_WIDTH columns (UTF-8 aware: "Δp" is two
 * columns, four bytes), then ": ". */
static void label(FILE *f, const char *text) {
    int cols = 0;
    for (const unsigned char *c = (const unsigned char *)text; *c; c++) cols += (*c & 0xC0) != 0x80;
    fputs(text, f);
    for (; cols < LABEL_WIDTH; cols++) fputc(' ', f);
    fputs(": ", f);
}

/* A model arm's precision after its path: " (policy P, B bits per weight)". */
static void arm_facts(FILE *f, const json_t *config, const char *which) {
    const json_t *a = json_object_get(config, which);
    const json_t *pol = json_object_get(a, "policy"), *bpw = json_object_get(a, "bits_per_weight");
    if (json_is_number(bpw) && json_is_string(pol))
        fprintf(f, " (policy %s, %.3f bits per weight)", json_string_value(pol), json_number_value(bpw));
    else if (json_is_number(bpw))
        fprintf(f, " (%.3f bits per weight)", json_number_value(bpw));
    fputc('\n', f);
}

/* A corpus with conversations: how many documents came from each form. */
static void corpus_forms(FILE *f, const json_t *config) {
    const json_t *c = json_object_get(config, "corpus");
    const json_t *nt = json_object_get(c, "documents_text"), *nm = json_object_get(c, "documents_messages");
    const char *tmpl = json_string_value(json_object_get(c, "chat_template"));
    if (json_is_integer(nm) && json_integer_value(nm) > 0 && json_is_integer(nt))
        fprintf(f, " (%lld text + %lld messages documents; chat template: %s)",
                (long long)json_integer_value(nt), (long long)json_integer_value(nm), tmpl ? tmpl : "?");
    fputc('\n', f);
}

/* Whether the run's side ("ref" or "arm") is a completions endpoint. */
static bool is_endpoint(const json_t *config, const char *side) {
    const char *kind = json_string_value(json_object_get(json_object_get(config, side), "kind"));
    return kind && !strcmp(kind, "endpoint");
}

/* What the reference's truncation and rounding mean for the figures above. */
static void truncation_notes(FILE *f, const json_t *config, const kld_summary *s) {
    const json_t *ref = json_object_get(config, "ref");
    const char *kind = json_string_value(json_object_get(ref, "kind"));
    bool f16 = json_integer_value(json_object_get(ref, "format_version")) == 1;
    if (kind && !strcmp(kind, "llamacpp-base")) {
        label(f, "no tail bound");
        fprintf(f, "llama.cpp's base file keeps a 16-nat window of log-probabilities rounded to\n"
                   "%32s16 bits after normalisation: its KLD is llama-perplexity's, not a bound\n", "");
    } else if (s->n_no_bound) {
        label(f, "no tail bound");
        fprintf(f, "a float16 dump whose log-sum-exp is that of its unrounded logits (another\n"
                   "%32swriter, or a kldeval before \"lse_of_stored\"): the KLD carries the rounding\n"
                   "%32sat first order, up to half a float16 step of the logits per position\n",
                "", "");
    } else if (f16) {
        label(f, "float16 teacher");
        fprintf(f, "the arm's logits at the teacher's ids are rounded as a candidate dump stores\n"
                   "%32sthem; the tail bound allows for the rounding of both (--logits f32: exact)\n",
                "");
    }
}

/* Fixed point keeps digits down to 1e-3; below that (the KLDs of
 * near-lossless arms) and above 1e7, scientific. */
static bool use_fixed(double x) { return x == 0.0 || (fabs(x) >= 1e-3 && fabs(x) < 1e7); }

/* A number in 12 columns, fixed or scientific as chosen. */
static const char *num_as(double x, bool fixed, char buf[32]) {
    if (isnan(x)) snprintf(buf, 32, "%12s", "n/a");
    else if (isinf(x)) snprintf(buf, 32, "%12s", x > 0 ? "inf" : "-inf");
    else if (fixed) snprintf(buf, 32, "%12.6f", x);
    else snprintf(buf, 32, "%12.4e", x);
    return buf;
}

static const char *num(double x, char buf[32]) { return num_as(x, use_fixed(x), buf); }

/* "value ± error unit", the error in the value's notation. */
static void value_pm(FILE *f, const char *text, double v, double e, const char *unit) {
    char a[32], b[32];
    bool fixed = use_fixed(v);
    label(f, text);
    fprintf(f, "%s ± %s%s%s\n", num_as(v, fixed, a), num_as(e, fixed, b), unit[0] ? " " : "", unit);
}

static void value(FILE *f, const char *text, double v, const char *unit) {
    char a[32];
    label(f, text);
    fprintf(f, "%s%s%s\n", num(v, a), unit[0] ? " " : "", unit);
}

/* A fraction shown in percent: "98.373 ± 0.252 %". */
static void percent_pm(FILE *f, const char *text, double v, double e) {
    label(f, text);
    if (isnan(v)) fprintf(f, "%12s\n", "n/a");
    else fprintf(f, "%12.3f ± %12.3f %%\n", 100.0 * v, 100.0 * e);
}

static void percent(FILE *f, const char *text, double v) {
    label(f, text);
    if (isnan(v)) fprintf(f, "%12s\n", "n/a");
    else fprintf(f, "%12.3f %%\n", 100.0 * v);
}

static void pct_name(double fraction, const char *stat, char *buf, size_t size) {
    snprintf(buf, size, "%.1f%% %s", 100.0 * fraction, stat);
}

/* max, upper percentiles, median, lower percentiles, min (llama.cpp's order). */
static void dist_lines(FILE *f, const kld_dist *d, const char *stat, bool as_percent,
                       const char *unit) {
    char name[64];
    snprintf(name, sizeof name, "Maximum %s", stat);
    as_percent ? percent(f, name, d->max) : value(f, name, d->max, unit);
    for (int i = KLD_N_PCT - 1; i >= 0; i--) {
        if (i == 4) {
            snprintf(name, sizeof name, "Median %s", stat);
            as_percent ? percent(f, name, d->median) : value(f, name, d->median, unit);
        }
        pct_name(kld_pct_fractions[i], stat, name, sizeof name);
        as_percent ? percent(f, name, d->pct[i]) : value(f, name, d->pct[i], unit);
    }
    snprintf(name, sizeof name, "Minimum %s", stat);
    as_percent ? percent(f, name, d->min) : value(f, name, d->min, unit);
}

static void bucket_table(FILE *f, const kld_bucket *b, int nb, bool positions) {
    fprintf(f, "%-14s %10s %12s   %12s %12s %10s\n", positions ? "positions" : "max p(ref)",
            "count", "mean KLD", "stderr", "median KLD", "same top");
    for (int i = 0; i < nb; i++) {
        if (!b[i].n) continue;
        char range[32], m[32], e[32], md[32];
        if (positions) snprintf(range, sizeof range, "[%.0f, %.0f)", b[i].lo, b[i].hi);
        else snprintf(range, sizeof range, i == nb - 1 ? "[%.1f, %.1f]" : "[%.1f, %.1f)", b[i].lo, b[i].hi);
        bool fixed = use_fixed(b[i].kld_mean);
        fprintf(f, "%-14s %10llu %s ± %s %s %8.3f %%\n", range, (unsigned long long)b[i].n,
                num_as(b[i].kld_mean, fixed, m), num_as(b[i].kld_se, fixed, e), num(b[i].kld_median, md),
                100.0 * b[i].top1_agreement);
    }
}

static void throughput(FILE *f, const char *who, uint64_t tokens, double seconds) {
    label(f, who);
    double rate = kld_report_rate(tokens, seconds);
    if (isnan(rate))
        fprintf(f, "%llu tokens\n", (unsigned long long)tokens);
    else
        fprintf(f, "%llu tokens in %.2f s, %.1f tokens/s\n", (unsigned long long)tokens, seconds,
                rate);
}

/* The corpus's documents, not only those a shard or a stopped run reached:
 * "25 of 48", never "25 of 25". */
static uint64_t corpus_documents(const kld_summary *s, const json_t *config) {
    const json_t *d = json_object_get(json_object_get(config, "corpus"), "documents");
    json_int_t n = json_is_integer(d) ? json_integer_value(d) : 0;
    return n > 0 && (uint64_t)n > s->n_docs ? (uint64_t)n : s->n_docs;
}

kld_status kld_report_text(FILE *f, const kld_summary *s, const kld_report_run *run,
                           kld_error *err) {
    errno = 0;
    fprintf(f, "====== kldeval kl %s: KL divergence of the arm from the reference ======\n",
            kld_version());
    if (run->partial)
        fprintf(f, "*** PARTIAL RUN: stopped early; the statistics cover only the positions scored ***\n");
    if (run->ref_label) { label(f, "reference"); fprintf(f, "%s", run->ref_label); arm_facts(f, run->config, "ref"); }
    if (run->arm_label) { label(f, "arm"); fprintf(f, "%s", run->arm_label); arm_facts(f, run->config, "arm"); }
    if (run->corpus_label) { label(f, "corpus"); fprintf(f, "%s", run->corpus_label); corpus_forms(f, run->config); }
    label(f, "positions");
    fprintf(f, "%llu scored (%llu with a next token) in %llu of %llu documents\n",
            (unsigned long long)s->n_positions, (unsigned long long)s->n_tokens,
            (unsigned long long)s->n_docs_scored, (unsigned long long)corpus_documents(s, run->config));
    fputc('\n', f);

    fprintf(f, "====== Perplexity statistics ======\n");
    value_pm(f, "PPL(ref)", s->ppl_ref, s->ppl_ref_se, "");
    if (s->n_next_outside) {
        /* llama.cpp base file: the figure above and the ratios below use the
         * estimate; llama.cpp's own figure is shown, named, never paired */
        label(f, "PPL(ref) note");
        fprintf(f, "%llu of %llu next tokens lie below the reference's 16-nat window: their NLL is\n"
                   "%32sthe arm's, at least the window's floor (the best estimate the file allows)\n",
                (unsigned long long)s->n_next_outside, (unsigned long long)s->n_tokens, "");
        value_pm(f, "llama.cpp's PPL(base)", s->ppl_ref_llamacpp, s->ppl_ref_llamacpp_se,
                 "(those tokens at the floor: biased low)");
    }
    value_pm(f, "PPL(arm)", s->ppl_arm, s->ppl_arm_se, "");
    percent(f, "Cor(ln PPL(arm), ln PPL(ref))", s->nll_cor);
    value_pm(f, "ln(PPL(arm)/PPL(ref))", s->ln_ppl_ratio, s->ln_ppl_ratio_se, "");
    value_pm(f, "PPL(arm)/PPL(ref)", s->ppl_ratio, s->ppl_ratio_se, "");
    value_pm(f, "PPL(arm)-PPL(ref)", s->ppl_diff, s->ppl_diff_se, "");
    fputc('\n', f);

    fprintf(f, "====== KL divergence statistics (nats) ======\n");
    value_pm(f, "Mean KLD(ref||arm)", s->kld.mean, s->kld.se, "nats");
    value_pm(f, "Mean of document means", s->kld_doc_mean, s->kld_doc_se, "nats");
    dist_lines(f, &s->kld, "KLD", false, "nats");
    if (s->n_truncated) {
        /* the reference is known on a subset: say how much of it */
        if (!s->n_no_bound) {
            value_pm(f, "Mean KLD + tail bound", s->kld_bound.mean, s->kld_bound.se, "nats");
            value(f, "Median KLD + tail bound", s->kld_bound.median, "nats");
            value(f, "99.0% KLD + tail bound", s->kld_bound.pct[8], "nats");
        }
        /* an endpoint arm is the side known on a subset (its own top K) */
        const bool arm_truncated = is_endpoint(run->config, "arm");
        label(f, arm_truncated ? "truncated arm rows" : "truncated reference rows");
        fprintf(f, "%llu of %llu (KLD: the sum over the known ids, >= P ln(P/Q) with P, Q the two\n"
                   "%32smasses there; + tail bound: the KL of the known ids plus one tail bin, a\n"
                   "%32slower bound of the full KLD; reverse KLD and JSD: of the same bins)\n",
                (unsigned long long)s->n_truncated, (unsigned long long)s->n_positions, "", "");
        truncation_notes(f, run->config, s);
        if (arm_truncated) {
            label(f, "known ids");
            fprintf(f, "the arm's top K (--top-logprobs); captured mass: the reference's there\n");
        }
        value(f, "captured mass, mean", s->mass_mean, "");
        value(f, "captured mass, minimum", s->mass_min, "");
        value(f, "captured mass, 1%", s->mass_p1, "");
        if (s->mass_mean < KLD_MASS_COMPARABLE)
            fprintf(f, "WARNING: the mean captured mass is below %.2f: this KLD is not comparable "
                       "with full-vocabulary KLDs (use a larger %s)\n", KLD_MASS_COMPARABLE,
                    arm_truncated || is_endpoint(run->config, "ref") ? "--top-logprobs" : "--top-k");
    }
    value_pm(f, "Mean KLD(arm||ref)", s->kld_rev.mean, s->kld_rev.se, "nats");
    value(f, "Maximum KLD(arm||ref)", s->kld_rev.max, "nats");
    value_pm(f, "Mean JSD", s->jsd.mean, s->jsd.se, "nats");
    value(f, "99.0% JSD", s->jsd.pct[8], "nats");
    value(f, "Maximum JSD", s->jsd.max, "nats");
    fputc('\n', f);

    fprintf(f, "====== Token probability statistics ======\n");
    percent_pm(f, "Mean Δp", s->dp.mean, s->dp.se);
    dist_lines(f, &s->dp, "Δp", true, "");
    percent_pm(f, "RMS Δp", s->dp_rms, s->dp_rms_se);
    percent_pm(f, "Same top p", s->top1_agreement, s->top1_se);
    char name[64];
    snprintf(name, sizeof name, "Top-%d overlap", s->topk);
    percent_pm(f, name, s->topk_overlap, s->topk_se);
    snprintf(name, sizeof name, "Ordered top-%d", s->topk);
    percent_pm(f, name, s->topk_ordered, s->topk_ordered_se);
    for (int j = 0; j < KLD_LABEL_K_N; j++) {
        snprintf(name, sizeof name, "Next token in ref top-%d", kld_label_k[j]);
        percent_pm(f, name, s->label_topk_ref[j], s->label_topk_ref_se[j]);
        snprintf(name, sizeof name, "Next token in arm top-%d", kld_label_k[j]);
        percent_pm(f, name, s->label_topk_arm[j], s->label_topk_arm_se[j]);
    }
    if (s->n_dlogit) value_pm(f, "Mean |Δlogit| (centred)", s->dlogit_mean, s->dlogit_se, "");
    fputc('\n', f);

    fprintf(f, "====== KLD by reference confidence ======\n");
    bucket_table(f, s->by_conf, KLD_CONF_BUCKETS, false);
    fputc('\n', f);
    fprintf(f, "====== KLD by context position ======\n");
    bucket_table(f, s->by_pos, KLD_POS_BUCKETS, true);
    fputc('\n', f);

    fprintf(f, "====== Throughput ======\n");
    label(f, "wall time");
    fprintf(f, "%.2f s\n", run->elapsed_s);
    throughput(f, "reference", run->ref_tokens, run->ref_seconds);
    throughput(f, "arm", run->arm_tokens, run->arm_seconds);
    if (run->partial) fprintf(f, "*** PARTIAL RUN ***\n");

    if (fflush(f) != 0 || ferror(f))
        return kld_fail(err, KLD_ERR_IO, "text report: write failed: %s",
                        errno ? strerror(errno) : "stream error");
    return KLD_OK;
}
