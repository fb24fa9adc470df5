/* commands.h — one entry point per subcommand; each lives in cmd_<name>.c,
 * parses its flags and calls the library. They return a process exit code. */
#ifndef KLD_CLI_COMMANDS_H
#define KLD_CLI_COMMANDS_H

#include "eval/gate.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

int kld_cmd_inspect(int argc, char **argv);
int kld_cmd_synth(int argc, char **argv);
int kld_cmd_logits(int argc, char **argv);
int kld_cmd_generate(int argc, char **argv);
int kld_cmd_tokenize(int argc, char **argv);
int kld_cmd_kl(int argc, char **argv);
int kld_cmd_diff(int argc, char **argv);
int kld_cmd_sweep(int argc, char **argv);
int kld_cmd_dump(int argc, char **argv);
int kld_cmd_demo(int argc, char **argv);
int kld_cmd_runs(int argc, char **argv);
int kld_cmd_report(int argc, char **argv);
int kld_cmd_merge(int argc, char **argv);
int kld_cmd_cap(int argc, char **argv);
int kld_cmd_smoketest(int argc, char **argv);
int kld_cmd_serve(int argc, char **argv);

/* Where a KL run's results go besides the text report (NULL: not written). */
typedef struct kld_kl_outputs {
    const char *json_path, *pin_path, *tsv_path, *html_path;
    const char *partial_path; /* a shard's per-position values for kldeval merge */
    const char *label;
    const char *db_path; /* NULL: $KLDEVAL_DB or the default location */
    bool no_db, quiet;
    kld_gates gates;     /* --gate: conditions judged on the report (exit 3 when one fails) */
    kld_gates paired_gates; /* --gate paired.…: on two arms' paired comparison (kl --arm A --arm B) */
    int bootstrap;       /* --bootstrap N: resamples for the 95% intervals (0: none; -1: default) */
    uint64_t bootstrap_seed;
} kld_kl_outputs;
int kld_cmd_quantize(int argc, char **argv);
int kld_cmd_imatrix(int argc, char **argv);

struct kld_kl_config;
/* The KL run with reporting and recording, shared by `kl` and `demo` (cmd_kl.c). */
int kld_kl_main(struct kld_kl_config *c, const kld_kl_outputs *o);
/* `kldeval merge --dump OUT SHARD_DIR...` (cmd_merge_dump.c). */
int kld_merge_dump_main(const char *out, const char *const *dirs, size_t n, const kld_kl_outputs *o);
/* `kldeval merge` of capability partials (cmd_merge_cap.c): the single
 * run's report (text, --json, --html) and one run-database row. */
int kld_merge_cap_main(const char *const *parts, size_t n, const char *json_path, const char *label,
                       const kld_kl_outputs *o);
/* The text report of a capability run (cmd_cap.c). */
void kld_cap_print_report(FILE *f, const json_t *report);

/* Before a run: the run database it will be recorded in opens (created if
 * new, its schema checked), so that no result is lost to a bad --db after
 * hours of work. Prints "kldeval <cmd>: why" and returns false otherwise. */
bool kld_record_check(const char *cmd, const kld_kl_outputs *o);

struct kld_summary;
struct kld_stats;
/* Records a run in the run database (cmd_record.c): prints the run id, or
 * "run not saved: why" on stderr (never fails the command); writes the HTML
 * report of the run when html_path is set. Returns false only when the HTML
 * report was asked for and could not be written. */
bool kld_record_run(const char *cmd, const kld_kl_outputs *o, const char *mode,
                    const json_t *report, const struct kld_summary *sum,
                    const struct kld_stats *stats, bool partial, double wall_s,
                    double tokens_per_s);
struct kld_record_source;
/* The same for records read in passes (a merge's: never all in memory). */
bool kld_record_run_source(const char *cmd, const kld_kl_outputs *o, const char *mode,
                           const json_t *report, const struct kld_summary *sum,
                           const struct kld_record_source *records, double wall_s);
/* Several runs of one command (a sweep's arms) into one database; the HTML
 * report, when asked for, shows all of them. */
typedef struct kld_record_item {
    const char *label, *mode;
    const json_t *report;
    const struct kld_summary *sum;
    const struct kld_stats *stats;
    const struct kld_record_source *records; /* instead of stats: records read in passes */
    bool partial;
    double wall_s, tokens_per_s;
    int threads; /* > 0: recorded beside a report that leaves them out (cap) */
} kld_record_item;
bool kld_record_runs(const char *cmd, const kld_kl_outputs *o, const kld_record_item *items,
                     size_t n);
/* The same for a capability report (`cap`, `cap score`, the smoketest's
 * GSM8K part; mode "cap" or "cap-score"): no KLD statistics; threads is
 * recorded beside the report, which leaves them out. */
bool kld_record_cap_run(const char *cmd, const kld_kl_outputs *o, const char *mode,
                        const json_t *report, bool partial, int threads, double wall_s);

#endif
