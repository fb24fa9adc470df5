/* db.h — the run database: every evaluation recorded as one row of an
 * SQLite file, read back for `kldeval runs` (list, show, rm, export,
 * compare) and the HTML report.
 *
 * Where: kld_db_open(NULL) uses $KLDEVAL_DB, else
 * $XDG_DATA_HOME/kldeval/runs.sqlite, else ~/.local/share/kldeval/runs.sqlite
 * (missing parent folders are created for these defaults only). ":memory:"
 * gives a private database that lives as long as the handle (`kl --no-db
 * --html`: the report is written from it).
 *
 * Robustness: the file carries PRAGMA application_id KLD_DB_APPLICATION_ID
 * and PRAGMA user_version = the schema version; migrations run from the
 * file's version up to KLD_DB_SCHEMA_VERSION in one transaction, and a newer
 * version is refused (KLD_ERR_UNSUPPORTED) rather than written to. WAL
 * journal; every write is one BEGIN IMMEDIATE transaction, retried while the
 * database is busy until the timeout ($KLDEVAL_DB_TIMEOUT_MS, default
 * 15000 ms), so concurrent writers (shards, two terminals) queue instead of
 * losing rows, and a process killed mid-write leaves no half-written row.
 * A long run may insert its row early, marked partial (kld_db_begin_run),
 * and complete it at the end (kld_db_record_run). No function here exits or
 * aborts: a failure to record is an error the caller reports beside its
 * results.
 *
 * Table runs (schema 1; schema 2 adds the capability columns below), one
 * row per run:
 *   id, created (UTC "YYYY-MM-DDTHH:MM:SSZ"), version, host, cpu_model
 *   (/proc/cpuinfo "model name"), threads, label, mode, partial (0/1),
 *   wall_s, tokens_per_s,
 *   ref_* and arm_*: kind, path, bytes, sha256, arch, n_vocab, policy,
 *     levers (JSON text when not a string), bpw (bits per weight),
 *   corpus_name, corpus_kind, corpus_sha256, corpus_documents, chunking, ctx,
 *   chunk, the summary statistics (one column each: n_positions, n_tokens,
 *   n_docs, n_docs_scored, topk; kld_, kld_rev_, jsd_, dp_ distributions as
 *   <prefix>{mean,se,min,median,max,p0_1,p1,p5,p10,p25,p75,p90,p95,p99,p99_9};
 *   kld_doc_mean, kld_doc_se, top1_agreement, top1_se, topk_overlap, topk_se,
 *   ppl_ref(_se), ppl_arm(_se), ln_ppl_ratio(_se), ppl_ratio(_se),
 *   ppl_diff(_se), nll_cor, dp_rms, dp_rms_se; NULL where not finite),
 *   report (the full JSON report as text), positions (BLOB, below),
 *   positions_n (its record count).
 * The configuration is read from report.config: ref/arm {kind, path, bytes,
 * sha256, arch, n_vocab, policy, levers, bits_per_weight}, corpus {name,
 * kind, sha256, documents}, chunking, ctx, chunk, threads, mode; a missing
 * or mistyped key gives a NULL column.
 *
 * Capability runs (schema 2; mode "cap": `kldeval cap`, the smoketest's
 * GSM8K part; "cap-score": `kldeval cap score`). The KLD columns are NULL;
 * the arms come from report.config as above (ref/arm; for cap-score ref is
 * the responses file: kind "responses", path, bytes, sha256), and
 *   cap_tasks      the tasks in run order, comma-separated;
 *   cap_n, cap_seed, cap_max_new   report.config n, seed, max_new;
 *   cap_score_ref, cap_score_arm, cap_score_diff   the Capability_Score
 *                  (unweighted mean of the task accuracies) of each arm and
 *                  arm - ref (cap-score: the task's accuracy);
 *   cap_results    JSON {task: {"ref": A, "arm": A, "paired": P}}, with
 *                  A = {accuracy, stderr, correct, n} (cap-score IFEval: also
 *                  prompt/instruction strict/loose) and P = {diff, stderr
 *                  (paired), arm_only_right, ref_only_right (McNemar's
 *                  discordant counts), n}; "arm" and "paired" only with an arm;
 *                  MMLU also "subjects" and BFCL "categories": {name: {ref, arm,
 *                  paired}} (BFCL's accuracy is its summary over the categories);
 *   report         the full JSON report, every per-item response included;
 *   threads        kld_db_run.threads (the report leaves them out; cap-score:
 *                  the HumanEval programs run at once, --jobs).
 * Query the JSON with SQLite's json_extract(cap_results, '$.gsm8k.arm.accuracy').
 * Migration 1 -> 2 only adds these columns (NULL in the older rows) and an
 * index on mode.
 *
 * Per-position BLOB, little-endian, version 1:
 *   header (16 bytes): "KLDP", uint32 version = 1, uint32 record size = 29,
 *     uint32 count;
 *   then count records of 29 bytes, in scoring order:
 *     float32 kld, float32 nll_ref, float32 nll_arm,
 *     float32 dp (= exp(-nll_arm) - exp(-nll_ref), NaN when no next token),
 *     float32 p_ref_max, uint32 ctx_pos, int32 token (-1: none),
 *     uint8 top1 (1 when the two argmaxes agree).
 *   NLLs are NaN when there is no next token. A reader rejects a wrong magic,
 *   an unknown version or record size, and a size that is not exactly
 *   16 + 29 count.
 *
 * Pairing (kld_db_compare): two runs are pairable when their corpus SHA-256,
 * chunking, ctx, reference (ref SHA-256, or ref path and bytes when a hash
 * is missing) and n_positions agree, both carry positions, and the recorded
 * next tokens agree position by position. Then, per position, d = value(A) -
 * value(B), with the mean and standard error of src/eval/stats.h
 * (population variance two-pass, se = sqrt(var / (N-1))); A is closer where
 * its KLD is lower (ties counted apart); the sign test is two-sided over the
 * untied positions, exact binomial (log space) up to 10^6 of them, else the
 * normal approximation with continuity correction. Values come from the
 * BLOB's float32 numbers, so a paired mean may differ from the difference
 * of the double-precision summary means in the 7th digit. */
#ifndef KLD_DB_H
#define KLD_DB_H

#include "eval/bootstrap.h"
#include "eval/stats.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define KLD_DB_SCHEMA_VERSION 2
#define KLD_DB_APPLICATION_ID 0x4b4c4452 /* "KLDR" */
#define KLD_DB_BLOB_VERSION 1
#define KLD_DB_BLOB_HEADER 16
#define KLD_DB_BLOB_RECORD 29

typedef struct kld_db kld_db;

/* Opens (creating or migrating) the database at path; NULL = the default
 * above. Fails with a message naming the file: KLD_ERR_FORMAT (not a
 * kldeval database), KLD_ERR_UNSUPPORTED (a newer schema), KLD_ERR_IO
 * (cannot create or open; locked beyond the timeout). */
kld_status kld_db_open(const char *path, kld_db **out, kld_error *err);
/* Same, but fails (KLD_ERR_IO) instead of creating a missing file: for
 * commands that only read or delete runs. */
kld_status kld_db_open_existing(const char *path, kld_db **out, kld_error *err);
void kld_db_close(kld_db *db);
/* The file the handle writes to. */
const char *kld_db_path(const kld_db *db);
/* The default path (malloc'd) as described above; NULL when neither
 * $KLDEVAL_DB, $XDG_DATA_HOME nor $HOME is set. */
char *kld_db_default_path(void);
/* How long a write waits for a busy database (ms, >= 0). */
void kld_db_set_timeout(kld_db *db, int ms);

/* What the caller records. Strings and objects are borrowed. */
typedef struct kld_db_run {
    const char *label, *mode;   /* mode: "two-models", "self-flag", "saved-teacher",
                                   "llamacpp-base", "candidate-dumps", "dump", "sweep", ... */
    const json_t *report;       /* the full JSON report (kld_report_json: statistics at the
                                   top level, "config" inside); may be NULL */
    const kld_summary *summary; /* every statistic becomes a column; NULL: all NULL */
    const kld_stats *stats;     /* per-position values -> the BLOB; NULL: none */
    const kld_record_source *records; /* instead of stats: records not in memory (a merge) */
    bool partial;
    double wall_s, tokens_per_s; /* NAN when unknown */
    int threads;                /* > 0: recorded instead of report.config.threads (a cap
                                   report leaves threads out: its results do not depend on them) */
} kld_db_run;

/* Inserts a row marked partial from what is known at the start of a run
 * (typically label, mode and a report holding only "config"); *id is set. */
kld_status kld_db_begin_run(kld_db *db, const kld_db_run *header, int64_t *id, kld_error *err);
/* Records a run: *id == 0 inserts a new row; otherwise it completes the row
 * kld_db_begin_run made (KLD_ERR_ARG when there is none). *id is set. */
kld_status kld_db_record_run(kld_db *db, const kld_db_run *run, int64_t *id, kld_error *err);

/* Every mode a run is recorded with, NULL-terminated: "two-models",
 * "self-flag", "saved-teacher", "candidate-dumps", "llamacpp-base", "dump",
 * "merged", "sweep", "cap", "cap-score", "diff" (`kldeval diff`: the kl run's row, its
 * per-layer table in report.diff). */
extern const char *const kld_db_modes[];
bool kld_db_mode_known(const char *mode);

/* ---- reading ---- */

typedef struct kld_db_arm {
    char *kind, *path, *sha256, *arch, *policy, *levers; /* NULL when not recorded */
    int64_t bytes, n_vocab;                              /* -1 when not recorded */
    double bpw;                                          /* NAN when not recorded */
} kld_db_arm;

/* The capability columns of a row (schema 2). */
typedef struct kld_db_cap {
    bool present;                            /* cap_results recorded: a capability run */
    char *tasks;                             /* NULL when not recorded */
    int64_t n, seed, max_new;                /* -1 when not recorded */
    double score_ref, score_arm, score_diff; /* NAN when not recorded */
    json_t *results;                         /* cap_results parsed (NULL when none) */
} kld_db_cap;

typedef struct kld_db_row {
    int64_t id;
    char *created, *version, *host, *cpu_model, *label, *mode;
    int64_t threads, ctx, chunk, corpus_documents; /* -1 when not recorded */
    kld_db_arm ref, arm;
    char *corpus_name, *corpus_kind, *corpus_sha256, *chunking;
    bool partial;
    double wall_s, tokens_per_s;
    bool has_summary;     /* false for a begun, never completed row */
    kld_summary summary;  /* every column; buckets from the report's arrays */
    json_t *report;       /* parsed report (NULL when none) */
    int64_t positions_n;  /* records in the BLOB, -1 when none */
    kld_db_cap cap;       /* capability runs */
} kld_db_row;

/* KLD_ERR_ARG "no run with id N in PATH" for an unknown id. */
kld_status kld_db_get(kld_db *db, int64_t id, kld_db_row **out, kld_error *err);
void kld_db_row_free(kld_db_row *row);

typedef struct kld_db_filter {
    const char *label_glob; /* SQLite GLOB on label */
    const char *model;      /* substring of either arm's path, or a SHA-256 prefix */
    const char *mode;       /* exact */
    const char *since;      /* created >= this ISO date/time prefix */
    int64_t limit;          /* 0 = all; the newest first when set */
} kld_db_filter;

/* Ids matching filter (NULL = all), ascending. *ids is malloc'd. */
kld_status kld_db_list(kld_db *db, const kld_db_filter *filter, int64_t **ids, size_t *n,
                       kld_error *err);
/* Deletes the runs, all or none: KLD_ERR_ARG names the first unknown id. */
kld_status kld_db_remove(kld_db *db, const int64_t *ids, size_t n, kld_error *err);

typedef enum kld_db_export_format { KLD_DB_EXPORT_CSV, KLD_DB_EXPORT_JSONL } kld_db_export_format;
/* CSV: a header of every column but report and positions, one line per run
 * (RFC 4180 quoting). JSONL: one object per run with every column but
 * positions, "report" and "cap_results" as JSON objects. */
kld_status kld_db_export(kld_db *db, const kld_db_filter *filter, kld_db_export_format fmt,
                         FILE *out, kld_error *err);

/* ---- capability runs (db_cap.c) ---- */

/* The cap_results object for a capability report (`cap` or `cap score`),
 * or NULL when report is not one. */
json_t *kld_db_cap_results(const json_t *report);
/* The task names of a row's cap_results in order (borrowed from it). */
size_t kld_db_cap_task_count(const kld_db_row *r);
const char *kld_db_cap_task(const kld_db_row *r, size_t i);
/* One task's accuracy object of side "ref" or "arm" (NULL when absent). */
const json_t *kld_db_cap_side(const kld_db_row *r, const char *task, const char *side);

/* ---- per-position values (db_blob.c) ---- */

typedef struct kld_db_position {
    float kld, nll_ref, nll_arm, dp, p_ref_max;
    uint32_t ctx_pos;
    int32_t token;
    uint8_t top1;
} kld_db_position;

kld_status kld_db_positions_encode(const kld_stats *st, unsigned char **blob, size_t *size,
                                   kld_error *err);
kld_status kld_db_positions_encode_source(const kld_record_source *src, unsigned char **blob,
                                          size_t *size, kld_error *err);
kld_status kld_db_positions_decode(const void *blob, size_t size, kld_db_position **out,
                                   size_t *n, kld_error *err);
/* The run's positions (KLD_ERR_ARG when it has none). */
kld_status kld_db_load_positions(kld_db *db, int64_t id, kld_db_position **out, size_t *n,
                                 kld_error *err);

/* ---- comparison (db_compare.c) ---- */

typedef struct kld_db_paired_stat {
    double mean, se; /* of d = A - B */
    uint64_t n;
} kld_db_paired_stat;

typedef struct kld_db_comparison {
    bool pairable;
    char why_not[512];      /* when not pairable */
    /* paired (valid when pairable) */
    kld_db_paired_stat d_kld;  /* KLD(A) - KLD(B), nats */
    kld_db_paired_stat d_top1; /* top-1 match(A) - (B) */
    kld_db_paired_stat d_nll;  /* nll_arm(A) - nll_arm(B): ln(PPL_A / PPL_B) */
    uint64_t a_closer, b_closer, ties;
    double sign_p;             /* two-sided */
    /* paired block bootstrap over windows (a window starts where ctx_pos
     * does not increase): differences of mean, p99, p99.9 KLD and top-1
     * with 95% intervals and p-values; boot.replicates 0 with < 2 windows */
    kld_paired_bootstrap boot;
    /* unpaired, from the summaries (always) */
    double u_kld, u_kld_se;    /* mean(A) - mean(B), sqrt(se_A^2 + se_B^2) */
} kld_db_comparison;

/* The verdict of a paired comparison, one line into buf: "run A is closer
 * to the reference (ΔKLD mean … [lo, hi], p = …)" or "not distinguishable
 * on N positions; about M positions would resolve a difference of this
 * size" (M from the interval's width, which shrinks as 1/sqrt(N)). */
void kld_db_verdict(const kld_db_comparison *c, long long id_a, long long id_b, char *buf, size_t size);
/* The paired bootstrap as JSON for gates (kld_gates_eval_paired): {"paired":
 * {"kld": {"mean"|"p99"|"p99_9": {diff, ci95, p}}, "top1": {…}}}; an empty
 * "paired" when there is no paired bootstrap. NULL when out of memory. */
json_t *kld_db_comparison_json(const kld_db_comparison *c);

/* Compares run a with run b (pairing as described above). Fails only on
 * database or memory errors. */
kld_status kld_db_compare(kld_db *db, const kld_db_row *a, const kld_db_row *b,
                          kld_db_comparison *out, kld_error *err);

#endif
