/* db_fixture.h — synthetic runs for the run-database tests: accumulators
 * filled with made-up but plausible position records (a shared token stream
 * per seed, so arms made from the same seed pair), their reports, and a
 * helper that records one. */
#ifndef KLD_TEST_DB_FIXTURE_H
#define KLD_TEST_DB_FIXTURE_H

#include "db/db.h"
#include "eval/stats.h"

#include <jansson.h>

typedef struct kt_synth_arm {
    const char *label, *mode;
    const char *arm_path, *arm_sha256;
    int64_t arm_bytes;
    double bpw;
    double scale;           /* KLD level of the arm */
    uint64_t stream_seed;   /* same seed: same tokens, contexts and reference */
    uint64_t arm_seed;      /* the arm's own noise */
    size_t n_docs, per_doc; /* positions = n_docs * per_doc */
    const char *corpus_sha256, *ref_sha256, *chunking;
    const char *ref_path;   /* default models/f16.gguf */
    int64_t ctx;
    int bootstrap;          /* > 0: the report keeps bootstrap intervals of this many resamples (seed 0) */
} kt_synth_arm;

/* Defaults: 4 documents of 64 positions, ctx 512, doc chunking, shared
 * corpus/reference hashes. */
kt_synth_arm kt_synth_defaults(const char *label, double scale);

/* A filled accumulator (caller frees). */
kld_stats *kt_synth_stats(const kt_synth_arm *a);
/* The report JSON for it, with a config as the KL driver writes it. */
json_t *kt_synth_report(const kt_synth_arm *a, const kld_summary *s);
/* Records the arm in db; returns the id (0 on failure, with a message). */
int64_t kt_synth_record(kld_db *db, const kt_synth_arm *a);

/* A capability report as `kldeval cap` writes it: tasks mmlu, gsm8k and
 * ifeval with n made-up items each (right with probability level, less for
 * the later tasks), paired as kld_cap_run pairs them, its Capability_Score
 * and config; arm_path NULL: one model. Caller decrefs. */
json_t *kt_synth_cap_report(const char *ref_path, const char *arm_path, double ref_level, double arm_level,
                            int n, uint64_t seed);
/* Records it as mode "cap"; returns the id (0 on failure, with a message). */
int64_t kt_synth_cap_record(kld_db *db, const char *label, const json_t *report);

#endif
