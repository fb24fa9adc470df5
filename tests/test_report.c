/* test_report.c — the outputs of `kldeval kl`: the JSON report has the
 * documented keys with the summary's values (and the config, the partial
 * flag, nulls for missing rates); --pin appends one parseable line per run;
 * the per-position TSV has one line per position with the right document
 * numbers; the text report has its sections, values and the partial marker;
 * the progress line's counts, rate and ETA; write errors name the path. */
#include "testlib.h"

#include "report/report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t rng_state = 0x2545F4914F6CDD1DULL;
static double rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

static char *build_path(const char *name) {
    char *p = malloc(strlen(kt_build_dir()) + strlen(name) + 2);
    sprintf(p, "%s/%s", kt_build_dir(), name);
    return p;
}

static size_t count_lines(const char *text) {
    size_t n = 0;
    for (const char *c = text; *c; c++) n += *c == '\n';
    return n;
}

/* 3 scored documents of 60 positions and one empty document (number 1);
 * the last position of each scored document has no next token. */
static kld_stats *make_stats(void) {
    kld_error err = {0};
    kld_stats *st;
    CHECK_OK(kld_stats_create(&st, KLD_TOPK_DEFAULT, &err), err);
    enum { V = 300 };
    float x[V], y[V];
    for (int doc = 0; doc < 4; doc++) {
        CHECK_OK(kld_stats_begin_doc(st, &err), err);
        if (doc == 1) continue;
        for (int pos = 0; pos < 60; pos++) {
            for (int i = 0; i < V; i++) {
                x[i] = (float)(4.0 * (rnd() - 0.5) + (i == pos ? 5.0 : 0.0));
                y[i] = x[i] + (float)(0.4 * (rnd() - 0.5));
            }
            int next = pos == 59 ? -1 : (int)(rnd() * V);
            CHECK_OK(kld_stats_add_logits(st, x, y, V, next, (uint32_t)pos, &err), err);
        }
    }
    return st;
}

static double jreal(const json_t *o, const char *key) {
    json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static void check_json(const kld_summary *s, const kld_report_run *run) {
    kld_error err = {0};
    char *path = build_path("test_report.json");
    CHECK_OK(kld_report_json_write(path, s, run, &err), err);
    json_error_t jerr;
    json_t *o = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    CHECK(o != NULL, "%s: %s", path, jerr.text);
    if (!o) {
        free(path);
        return;
    }
    json_t *kld = json_object_get(o, "kld");
    CHECK(json_integer_value(json_object_get(o, "n_positions")) == (json_int_t)s->n_positions &&
              s->n_positions == 180,
          "n_positions %lld", (long long)json_integer_value(json_object_get(o, "n_positions")));
    CHECK(jreal(kld, "mean") == s->kld.mean && jreal(kld, "stderr") == s->kld.se &&
              jreal(kld, "median") == s->kld.median && jreal(kld, "p99") == s->kld.pct[8] &&
              jreal(kld, "max") == s->kld.max && jreal(kld, "p0_1") == s->kld.pct[0] &&
              jreal(kld, "doc_mean") == s->kld_doc_mean,
          "kld object: mean %.17g (want %.17g) p99 %.17g", jreal(kld, "mean"), s->kld.mean,
          jreal(kld, "p99"));
    CHECK(jreal(o, "top1_agreement") == s->top1_agreement && jreal(o, "ppl_ref") == s->ppl_ref &&
              jreal(o, "ppl_arm") == s->ppl_arm && jreal(o, "elapsed_s") == run->elapsed_s &&
              jreal(o, "ln_ppl_ratio_stderr") == s->ln_ppl_ratio_se &&
              jreal(o, "topk_overlap") == s->topk_overlap,
          "top-level values: top1 %.17g ppl_ref %.17g elapsed %g", jreal(o, "top1_agreement"),
          jreal(o, "ppl_ref"), jreal(o, "elapsed_s"));
    CHECK(json_is_true(json_object_get(o, "partial")) == run->partial, "partial flag");
    CHECK(jreal(o, "ref_tokens_per_s") == 300.0 && json_is_null(json_object_get(o, "arm_tokens_per_s")),
          "rates %g / %s", jreal(o, "ref_tokens_per_s"),
          json_is_null(json_object_get(o, "arm_tokens_per_s")) ? "null" : "not null");
    CHECK(jreal(json_object_get(o, "delta_p"), "rms") == s->dp_rms &&
              jreal(json_object_get(o, "jsd"), "mean") == s->jsd.mean &&
              jreal(json_object_get(o, "kld_reverse"), "p99_9") == s->kld_rev.pct[9],
          "delta_p / jsd / kld_reverse objects");
    size_t nonempty = 0;
    for (int b = 0; b < KLD_POS_BUCKETS; b++) nonempty += s->by_pos[b].n > 0;
    json_t *bp = json_object_get(o, "by_context_position");
    CHECK(json_array_size(bp) == nonempty && nonempty == 4 &&
              json_integer_value(json_object_get(json_array_get(bp, 0), "n")) == 24,
          "by_context_position: %zu buckets (want %zu)", json_array_size(bp), nonempty);
    CHECK(json_array_size(json_object_get(o, "by_ref_confidence")) >= 1, "by_ref_confidence");
    json_t *cfg = json_object_get(o, "config");
    CHECK(json_integer_value(json_object_get(cfg, "ctx")) == 128 &&
              strcmp(json_string_value(json_object_get(cfg, "corpus_sha256")), "e702fc12") == 0,
          "config not copied");
    CHECK(strcmp(json_string_value(json_object_get(o, "schema")), "kldeval.kl/1") == 0 &&
              strcmp(json_string_value(json_object_get(o, "version")), kld_version()) == 0,
          "schema / version");
    json_decref(o);
    free(path);
}

static void check_pin(const kld_summary *s, const kld_report_run *run) {
    kld_error err = {0};
    char *path = build_path("test_report.pin.jsonl");
    unlink(path);
    CHECK_OK(kld_report_pin_append(path, s, run, &err), err);
    CHECK_OK(kld_report_pin_append(path, s, run, &err), err);
    char *text = kt_read_file(path, NULL);
    CHECK(count_lines(text) == 2, "pin file has %zu lines, want 2", count_lines(text));
    char *save = NULL;
    int lines = 0;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        json_error_t jerr;
        json_t *o = json_loads(line, JSON_REJECT_DUPLICATES, &jerr);
        CHECK(o != NULL, "pin line %d: %s", lines, jerr.text);
        if (!o) continue;
        CHECK(jreal(o, "kld_mean") == s->kld.mean && jreal(o, "kld_p99") == s->kld.pct[8] &&
                  json_integer_value(json_object_get(o, "n_positions")) == 180 &&
                  strcmp(json_string_value(json_object_get(o, "label")), "ref.gguf vs arm.gguf") == 0 &&
                  json_is_object(json_object_get(o, "config")),
              "pin line %d fields", lines);
        json_decref(o);
        lines++;
    }
    CHECK(lines == 2, "%d parseable pin lines", lines);
    free(text);
    free(path);
}

static void check_tsv(const kld_stats *st) {
    kld_error err = {0};
    char *path = build_path("test_report.tsv");
    CHECK_OK(kld_report_tsv_write(path, st, NULL, &err), err);
    char *text = kt_read_file(path, NULL);
    CHECK(count_lines(text) == kld_stats_count(st) + 1, "TSV has %zu lines, want %zu",
          count_lines(text), kld_stats_count(st) + 1);
    CHECK(strncmp(text, "doc\tpos\ttoken\tkld\ttop1_match\tnll_ref\tnll_arm\t", 45) == 0,
          "TSV header: %.60s", text);
    size_t n;
    const kld_position *rec = kld_stats_records(st, &n);
    char *save = NULL;
    size_t i = 0;
    bool fields_ok = true, docs_ok = true, values_ok = true;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (line == text) continue; /* header */
        int tabs = 0;
        for (char *c = line; *c; c++) tabs += *c == '\t';
        fields_ok = fields_ok && tabs == 18;
        unsigned doc, pos;
        int token, match;
        double kld, nll_ref;
        char nll_buf[32];
        if (sscanf(line, "%u\t%u\t%d\t%lf\t%d\t%31s", &doc, &pos, &token, &kld, &match, nll_buf) != 6) {
            fields_ok = false;
            continue;
        }
        nll_ref = strtod(nll_buf, NULL);
        unsigned want_doc = i < 60 ? 0 : i < 120 ? 2 : 3; /* document 1 is empty */
        docs_ok = docs_ok && doc == want_doc && pos == rec[i].ctx_pos && token == rec[i].token;
        values_ok = values_ok && fabs(kld - rec[i].kld) <= 1e-9 * fabs(rec[i].kld) &&
                    match == (rec[i].top_ref == rec[i].top_arm) &&
                    (rec[i].token < 0 ? isnan(nll_ref) : fabs(nll_ref - rec[i].nll_ref) <= 1e-9 * rec[i].nll_ref);
        i++;
    }
    CHECK(i == n && fields_ok, "TSV: %zu data lines of %zu, 19 fields each: %d", i, n, fields_ok);
    CHECK(docs_ok, "TSV: document / position / token columns differ from the records");
    CHECK(values_ok, "TSV: kld / top1 / nll columns differ from the records");
    free(text);
    free(path);
}

static char *text_report(const kld_summary *s, const kld_report_run *run) {
    kld_error err = {0};
    char *path = build_path("test_report.txt");
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "cannot create %s", path);
    CHECK_OK(kld_report_text(f, s, run, &err), err);
    fclose(f);
    char *text = kt_read_file(path, NULL);
    free(path);
    return text;
}

static void check_text(const kld_summary *s, kld_report_run *run) {
    char *text = text_report(s, run);
    static const char *const want[] = {
        "====== Perplexity statistics ======", "====== KL divergence statistics (nats) ======",
        "====== Token probability statistics ======", "====== KLD by reference confidence ======",
        "====== KLD by context position ======", "====== Throughput ======", "PARTIAL RUN",
        "ref.gguf", "arm.gguf", "99.9% KLD", "Median KLD", "Same top p", "Top-10 overlap",
        "RMS Δp", "[0, 8)", "[32, 64)", "180 scored (177 with a next token) in 3 of 4 documents",
        "150 tokens in 0.50 s, 300.0 tokens/s"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        CHECK(strstr(text, want[i]) != NULL, "text report lacks \"%s\"", want[i]);
    char line[128];
    snprintf(line, sizeof line, "Mean KLD(ref||arm)            : %12.6f ± %12.6f nats", s->kld.mean,
             s->kld.se);
    CHECK(strstr(text, line) != NULL, "text report lacks the mean KLD line \"%s\"", line);
    snprintf(line, sizeof line, "%12.3f ± %12.3f %%", 100.0 * s->top1_agreement, 100.0 * s->top1_se);
    CHECK(strstr(text, line) != NULL, "text report lacks the top-1 line \"%s\"", line);
    /* labels are padded to one column, UTF-8 "Δp" included */
    const char *a = strstr(text, "RMS Δp"), *b = strstr(text, "Same top p");
    CHECK(a && b && strchr(a, ':') - a == strchr(b, ':') - b + 1, "labels not aligned");
    free(text);
    run->partial = false;
    text = text_report(s, run);
    CHECK(strstr(text, "PARTIAL") == NULL, "complete run marked partial");
    free(text);
}

static void check_progress(void) {
    char buf[256];
    kld_progress p = {10, 40, 500, 2000, 10.0, 0.00123456};
    size_t n = kld_progress_format(&p, buf, sizeof buf);
    CHECK(n == strlen(buf) &&
              strcmp(buf, "docs 10/40  positions 500/2000  50.0 pos/s  ETA 30s  mean KLD 0.001235") == 0,
          "progress line \"%s\"", buf);
    kld_progress q = {3, 0, 7000, 0, 3725.0, 0.5};
    kld_progress_format(&q, buf, sizeof buf);
    CHECK(strcmp(buf, "docs 3  positions 7000  1.9 pos/s  mean KLD 0.500000") == 0,
          "progress line without totals \"%s\"", buf);
    kld_progress r = {1, 400, 10, 0, 100.0, 0.1};
    kld_progress_format(&r, buf, sizeof buf);
    CHECK(strstr(buf, "ETA 11h05m") != NULL, "progress ETA from documents: \"%s\"", buf);
    char small[12];
    n = kld_progress_format(&p, small, sizeof small);
    CHECK(n == strlen(small) && n < sizeof small && strncmp(small, "docs 10/40 ", 11) == 0,
          "truncated progress \"%s\" (%zu)", small, n);
    char *path = build_path("test_report.progress");
    FILE *f = fopen(path, "w+");
    CHECK(!kld_progress_enabled(f), "a regular file counted as a terminal");
    kld_progress_print(f, &p);
    kld_progress_end(f);
    CHECK(ftell(f) == 0, "progress drawn into a regular file");
    fclose(f);
    free(path);
}

static void check_errors(const kld_summary *s, const kld_report_run *run, const kld_stats *st) {
    kld_error err = {0};
    const char *bad = "/nonexistent-dir-kldeval/x";
    CHECK(kld_report_json_write(bad, s, run, &err) == KLD_ERR_IO && strstr(err.msg, bad),
          "JSON to a missing directory: %s", err.msg);
    CHECK(kld_report_pin_append(bad, s, run, &err) == KLD_ERR_IO && strstr(err.msg, bad),
          "pin to a missing directory: %s", err.msg);
    CHECK(kld_report_tsv_write(bad, st, NULL, &err) == KLD_ERR_IO && strstr(err.msg, bad),
          "TSV to a missing directory: %s", err.msg);
}

int main(void) {
    kld_error err = {0};
    kld_stats *st = make_stats();
    kld_summary s;
    CHECK_OK(kld_stats_finalize(st, &s, &err), err);
    json_t *config = json_pack("{s:i, s:s, s:[s,s]}", "ctx", 128, "corpus_sha256", "e702fc12",
                               "arms", "ref.gguf", "arm.gguf");
    kld_report_run run = {.ref_label = "ref.gguf",
                          .arm_label = "arm.gguf",
                          .corpus_label = "licenses.txt",
                          .config = config,
                          .elapsed_s = 1.5,
                          .ref_seconds = 0.5,
                          .arm_seconds = 0.0,
                          .ref_tokens = 150,
                          .arm_tokens = 150,
                          .partial = true};
    check_json(&s, &run);
    check_pin(&s, &run);
    check_tsv(st);
    check_text(&s, &run);
    check_progress();
    check_errors(&s, &run, st);
    json_decref(config);
    kld_stats_free(st);
    return kt_finish();
}
