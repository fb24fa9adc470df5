/* report.h — what `kldeval kl` writes: the human report (stdout), the JSON
 * report (--json), the pin line (--pin, one JSON line appended per run), the
 * per-position TSV (--per-position) and the live progress line (stderr).
 *
 * JSON report schema "kldeval.kl/1" (numbers are JSON reals; a statistic
 * that does not exist, e.g. a PPL with no next tokens or a rate over zero
 * seconds, is null):
 *   schema, version, partial (true when the run was stopped early),
 *   n_positions, n_tokens (positions with a next token), n_docs, n_docs_scored,
 *   kld, kld_reverse, jsd, delta_p: distribution objects
 *     {mean, stderr, min, p0_1, p1, p5, p10, p25, median, p75, p90, p95, p99,
 *      p99_9, max}; kld also has doc_mean, doc_stderr (mean of per-document
 *      means); delta_p also has rms, rms_stderr (probability units, not %),
 *   top1_agreement, top1_agreement_stderr (fractions),
 *   topk, topk_overlap, topk_overlap_stderr, topk_ordered, topk_ordered_stderr,
 *   label_in_topk: {k: [1, 5, 10], ref, ref_stderr, arm, arm_stderr (arrays
 *     over k), n_ref, n_arm (positions whose next token's rank is known)},
 *   dlogit_centered: {mean, stderr, n} (mean |centred logit difference|),
 *   ppl_ref, ppl_ref_stderr, ppl_arm, ppl_arm_stderr,
 *   ln_ppl_ratio, ln_ppl_ratio_stderr, ppl_ratio, ppl_ratio_stderr,
 *   ppl_diff, ppl_diff_stderr, nll_correlation (ppl_ref and all that pairs
 *     with it use the estimated reference NLL where a llama.cpp base row's
 *     next token lies below its window: see truncated.n_next_outside),
 *   by_ref_confidence, by_context_position: arrays of the non-empty buckets
 *     {lo, hi, n, kld_mean, kld_stderr, kld_median, top1_agreement},
 *   elapsed_s, ref_seconds, arm_seconds, ref_tokens, arm_tokens,
 *   ref_tokens_per_s, arm_tokens_per_s,
 *   truncated (only when some reference rows are truncated: a saved teacher's
 *     top-k, a llama.cpp base file's 16-nat window): {n_rows, mass_mean,
 *     mass_min, mass_p1 (captured reference mass), kld_bound (distribution of
 *     the tail-corrected lower bound of the full KL), comparable (mass_mean >=
 *     0.99), n_next_outside (next tokens below a llama.cpp base row's window),
 *     ppl_ref_llamacpp, ppl_ref_llamacpp_stderr (llama.cpp's Mean PPL(base):
 *     those tokens at the window's floor, biased low; null when there are
 *     none)}; kld is then the truncated KL and kld_reverse/jsd those of the
 *     top-k+tail coarsening (see src/eval/stats.h),
 *   config: the driver's configuration object, copied as given (mode, arms
 *     with kind, files, sizes and hashes, corpus hash, ctx, chunking, ...;
 *     strata: the strata's names in bit order, score_only),
 *   kld.ci95, top1_agreement_ci95, ppl_ratio_ci95, bootstrap: the intervals
 *     (src/eval/bootstrap.h),
 *   strata (with --strata/--score-only): {NAME: the same figures for the
 *     stratum's positions alone, or {n_positions: 0}} (report_strata.c).
 * Definitions of every statistic: src/eval/stats.h.
 *
 * Pin line (the seeds' scoreboard convention: append-only, one compact JSON
 * object per line, never rewritten): label, time (UTC, ISO 8601), version,
 * partial, n_positions, kld_mean, kld_stderr, kld_doc_mean, kld_median,
 * kld_p99, kld_max, jsd_mean, top1_agreement, topk_overlap, ppl_ref, ppl_arm,
 * ln_ppl_ratio, ln_ppl_ratio_stderr, elapsed_s, ref_tokens_per_s,
 * arm_tokens_per_s, config.
 *
 * Per-position TSV: a header line, then one line per position in order:
 * doc pos token kld top1_match nll_ref nll_arm kld_rev jsd topk_overlap
 * p_ref_max top_ref top_arm topk_ordered rank_ref rank_arm dlogit token_text
 * strata (nll "nan" and token -1 where there is no next token; doc is the
 * document number, pos the context position; a rank is empty when unknown;
 * token_text escaped: \\ \t \n \r \xHH; strata comma-separated names). */
#ifndef KLD_REPORT_H
#define KLD_REPORT_H

#include "eval/stats.h"

#include <jansson.h>
#include <stdio.h>

/* A truncated run whose mean captured mass is below this is not comparable
 * with full-vocabulary KLDs (the report warns). */
#define KLD_MASS_COMPARABLE 0.99

/* What the driver knows about the run besides the statistics. */
typedef struct kld_report_run {
    const char *ref_label;    /* e.g. the reference model file; may be NULL */
    const char *arm_label;    /* may be NULL */
    const char *corpus_label; /* may be NULL */
    const char *label;        /* pin label; NULL -> "<ref> vs <arm>" */
    const json_t *config;     /* borrowed, may be NULL; copied into the JSON outputs */
    double elapsed_s;         /* wall time of the run */
    double ref_seconds, arm_seconds; /* time spent in each arm's forward passes */
    uint64_t ref_tokens, arm_tokens; /* tokens each arm evaluated */
    bool partial;             /* stopped early (Ctrl-C): the numbers cover what was scored */
} kld_report_run;

/* The human report (sections like llama.cpp's, aligned, with units). */
kld_status kld_report_text(FILE *out, const kld_summary *s, const kld_report_run *run,
                           kld_error *err);

/* The JSON report as a new object (NULL when out of memory). */
json_t *kld_report_json(const kld_summary *s, const kld_report_run *run);
/* The summary's figures alone, without what only a run defines (config,
 * timings, partial): the library's kld_summary_json, a stratum's report. */
json_t *kld_report_summary_json(const kld_summary *s);

/* Each stratum's statistics (report_strata.c): "strata": {NAME: {the
 * summary's figures with their intervals}} for the strata the report's
 * config names (eval/strata.h), from the records' masks; a stratum without
 * positions gets {"n_positions": 0}. */
kld_status kld_strata_report(json_t *report, const kld_record_source *src, int replicates,
                             uint64_t seed, kld_error *err);
/* Their table in the text report (nothing without strata). */
void kld_strata_report_text(FILE *f, const json_t *report);
/* The bootstrap's 95% intervals, "value [lo, hi]" per statistic
 * (report_bootstrap.c). */
struct kld_bootstrap;
void kld_report_bootstrap_text(FILE *f, const struct kld_bootstrap *b, const kld_summary *s);
/* The paired bootstrap of two arms, A − B: ΔKLD mean, p99, p99.9 and Δtop-1
 * with 95% intervals and p-values, one line each (`runs compare`, `kl`
 * with two arms). */
struct kld_paired_bootstrap;
void kld_report_paired_text(FILE *f, const struct kld_paired_bootstrap *b);
/* Writes a built report (kld_report_json, perhaps with more keys) to path. */
kld_status kld_report_json_dump(const char *path, const json_t *report, kld_error *err);
kld_status kld_report_json_write(const char *path, const kld_summary *s, const kld_report_run *run,
                                 kld_error *err);

/* Appends one pin line to path (created if missing, never truncated). */
kld_status kld_report_pin_append(const char *path, const kld_summary *s, const kld_report_run *run,
                                 kld_error *err);

/* What the TSV names beside the figures: the next token's text (texts: a
 * bound kld_strata, NULL: none) and the record's strata (config: the
 * report's, naming them; NULL: none). */
struct kld_strata;
typedef struct kld_tsv_names {
    const struct kld_strata *texts;
    const json_t *config;
} kld_tsv_names;

/* Writes every record of st as TSV (overwrites); names may be NULL. */
kld_status kld_report_tsv_write(const char *path, const kld_stats *st, const kld_tsv_names *names,
                                kld_error *err);
/* The same from records read in passes (a merge's). */
kld_status kld_report_tsv_write_source(const char *path, const kld_record_source *src,
                                       const kld_tsv_names *names, kld_error *err);

/* Progress line. Totals of 0 mean unknown; the ETA comes from positions when
 * their total is known, else from documents. */
typedef struct kld_progress {
    uint64_t docs_done, docs_total;
    uint64_t positions_done, positions_total;
    double elapsed_s;
    double kld_mean; /* running mean KLD */
} kld_progress;

/* Formats one line (no newline) into buf; returns its length. */
size_t kld_progress_format(const kld_progress *p, char *buf, size_t size);
/* True when f is a terminal (the line is drawn only then). */
bool kld_progress_enabled(FILE *f);
/* Redraws the line in place ("\r...\033[K") when f is a terminal. */
void kld_progress_print(FILE *f, const kld_progress *p);
/* Ends the line (a newline) when f is a terminal, so the report starts clean. */
void kld_progress_end(FILE *f);

/* ---- llama.cpp's layout (report_llamacpp.c) ---- */

/* Prints llama-perplexity --kl-divergence's final blocks ("====== Perplexity
 * statistics ======", "====== KL divergence statistics ======", "====== Token
 * probability statistics ======") exactly as llama.cpp c392e50 lays them out,
 * from s. Like llama.cpp it prints nothing for fewer than 100 positions. */
kld_status kld_report_llamacpp(FILE *out, const kld_summary *s, kld_error *err);

#endif
