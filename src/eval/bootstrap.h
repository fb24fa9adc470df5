/* bootstrap.h — confidence intervals for the statistics that have no
 * standard error (the percentiles), and for top-1 agreement and the PPL
 * ratio, by a block bootstrap over documents: positions of one document are
 * correlated (they share a context), so whole documents are resampled with
 * replacement (in stream and llamacpp chunking a "document" is a window,
 * as the statistics count them). Percentile intervals (2.5% and 97.5% of
 * the replicates). Deterministic for a seed (one thread; splitmix64).
 * Each replicate costs O(positions): the KLD values are sorted once and a
 * replicate's percentiles are read by walking them with the documents'
 * multiplicities as weights. */
#ifndef KLD_EVAL_BOOTSTRAP_H
#define KLD_EVAL_BOOTSTRAP_H

#include "common/common.h"
#include "eval/stats.h"

#include <jansson.h>

#define KLD_BOOTSTRAP_DEFAULT 1000

typedef struct kld_ci {
    double lo, hi; /* NAN when not available */
} kld_ci;

/* The KLD statistics with an interval, in this order. */
enum { KLD_BOOT_MEAN, KLD_BOOT_MEDIAN, KLD_BOOT_P90, KLD_BOOT_P95, KLD_BOOT_P99, KLD_BOOT_P99_9, KLD_BOOT_N };

typedef struct kld_bootstrap {
    int replicates;
    uint64_t seed;
    size_t n_docs;           /* resampling units (documents with >= 1 position) */
    kld_ci kld[KLD_BOOT_N];  /* mean, median, p90, p95, p99, p99.9 */
    kld_ci top1;             /* top-1 agreement */
    kld_ci ppl_ratio;        /* NAN without reference NLLs */
} kld_bootstrap;

/* replicates >= 1. Fails (KLD_ERR_ARG) with fewer than 2 documents: there is
 * nothing to resample. */
kld_status kld_bootstrap_run(const kld_record_source *src, int replicates, uint64_t seed, kld_bootstrap *out,
                             kld_error *err);
kld_status kld_bootstrap_stats(const kld_stats *st, int replicates, uint64_t seed, kld_bootstrap *out,
                               kld_error *err);

/* Adds the intervals to a kl JSON report: kld.ci95 {mean, median, p90,
 * p95, p99, p99_9: [lo, hi]}, top1_agreement_ci95, ppl_ratio_ci95 and
 * bootstrap {replicates, seed, unit, n_units}. */
void kld_bootstrap_json(const kld_bootstrap *b, json_t *report);

/* ---- two arms on the same positions (runs compare) ---- */

typedef struct kld_paired_ci {
    double diff;  /* A - B on the sample itself */
    kld_ci ci;    /* 95% of the replicates' differences */
    double p;     /* two-sided: (2 min(#diff* <= 0, #diff* >= 0) + 1) / (R + 1), at most 1 */
} kld_paired_ci;

typedef struct kld_paired_bootstrap {
    int replicates;
    uint64_t seed;
    size_t n, n_blocks;
    kld_paired_ci mean, p99, p99_9, top1; /* KLD mean, p99, p99.9; top-1 agreement */
} kld_paired_bootstrap;

/* Both arms' values at the same n positions; block[i] (ascending from 0)
 * the window or document of position i: each replicate draws blocks with
 * replacement and takes both arms' statistics on the same draw. */
kld_status kld_bootstrap_paired(const double *kld_a, const double *kld_b, const uint8_t *top1_a,
                                const uint8_t *top1_b, const uint32_t *block, size_t n, int replicates,
                                uint64_t seed, kld_paired_bootstrap *out, kld_error *err);

/* Two runs over the same positions (the arms of one sweep, or of one kl
 * run with two arms, scored against one teacher): their records paired one
 * to one, a document (a window in stream/llamacpp chunking) the resampling
 * block. Fails (KLD_ERR_ARG) when the runs differ in positions, documents or
 * tokens, or have fewer than 2 documents. */
kld_status kld_bootstrap_paired_stats(const kld_stats *a, const kld_stats *b, int replicates, uint64_t seed,
                                      kld_paired_bootstrap *out, kld_error *err);

/* The verdict of a paired comparison A − B, one line into buf, what `runs
 * compare` prints: "NAME is closer to the reference (ΔKLD mean A − B …
 * [lo, hi], p = …)" when the 95% interval of the mean's difference excludes
 * 0 (NAME name_a or name_b, whichever has the lower mean), else "not
 * distinguishable on N positions (…); about M positions would resolve a
 * difference of this size" (M from the interval's width, which shrinks as
 * 1/sqrt(N)); "… ΔKLD exactly 0" when every position ties. */
void kld_paired_verdict(const kld_paired_bootstrap *b, const char *name_a, const char *name_b, char *buf,
                        size_t size);
/* One word for tables: "A" / "B" (name_a / name_b: the closer one), "same"
 * (ΔKLD exactly 0 everywhere) or "n.d." (not distinguishable). */
const char *kld_paired_verdict_word(const kld_paired_bootstrap *b, const char *name_a, const char *name_b);
/* {"kld": {"mean"|"p99"|"p99_9": {diff, ci95: [lo, hi], p}}, "top1": {…},
 * "replicates", "seed", "n_positions", "n_blocks"}: what paired gates read
 * (gate.h kld_gates_eval_paired reads it under "paired"). */
json_t *kld_paired_bootstrap_json(const kld_paired_bootstrap *b);

/* What every report of a kl run does (kl, merge, the API): with
 * replicates > 0 and >= 2 documents, the intervals into report (and *out
 * when out is not NULL; out->replicates 0 when skipped). */
kld_status kld_bootstrap_report(json_t *report, const kld_record_source *src, int replicates, uint64_t seed,
                                kld_bootstrap *out, kld_error *err);

#endif
