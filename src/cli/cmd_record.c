/* cmd_record.c — every run a command finishes is recorded in the run
 * database (src/db/db.h), and its HTML report written on request. A
 * database that cannot be written never costs the user the result: the
 * report has already been printed, and the reason is said on stderr. */
#include "cli/commands.h"
#include "db/db.h"
#include "report/report_html.h"

#include <math.h>
#include <stdio.h>

static bool record(const char *cmd, const kld_kl_outputs *o, const kld_db_run *run) {
    if (o->no_db && !o->html_path) return true;
    kld_error err = {0};
    kld_db *db = NULL;
    /* --no-db --html: a throwaway database holds the run for the report */
    if (kld_db_open(o->no_db ? ":memory:" : o->db_path, &db, &err) != KLD_OK) {
        fprintf(stderr, "kldeval %s: run not saved: %s\n", cmd, err.msg);
        return !o->html_path;
    }
    int64_t id = 0;
    bool ok = true;
    if (kld_db_record_run(db, run, &id, &err) != KLD_OK) {
        fprintf(stderr, "kldeval %s: run not saved in %s: %s\n", cmd, kld_db_path(db), err.msg);
        ok = !o->html_path;
    } else {
        if (!o->no_db) fprintf(stderr, "kldeval %s: recorded as run %lld in %s\n", cmd, (long long)id,
                               kld_db_path(db));
        if (o->html_path && kld_report_html_write(db, &id, 1, o->html_path, &err) != KLD_OK) {
            fprintf(stderr, "kldeval %s: %s\n", cmd, err.msg);
            ok = false;
        }
    }
    kld_db_close(db);
    return ok;
}

bool kld_record_run(const char *cmd, const kld_kl_outputs *o, const char *mode,
                    const json_t *report, const struct kld_summary *sum,
                    const struct kld_stats *stats, bool partial, double wall_s,
                    double tokens_per_s) {
    kld_db_run run = {.label = o->label, .mode = mode, .report = report, .summary = sum,
                      .stats = stats, .partial = partial, .wall_s = wall_s,
                      .tokens_per_s = tokens_per_s};
    return record(cmd, o, &run);
}

bool kld_record_cap_run(const char *cmd, const kld_kl_outputs *o, const char *mode,
                        const json_t *report, bool partial, int threads, double wall_s) {
    kld_db_run run = {.label = o->label, .mode = mode, .report = report, .partial = partial,
                      .wall_s = wall_s, .tokens_per_s = NAN, .threads = threads};
    return record(cmd, o, &run);
}
