/* cmd_record.c — every run a command finishes is recorded in the run
 * database (src/db/db.h), and its HTML report written on request. A
 * database that cannot be written never costs the user the result: the
 * report has already been printed, and the reason is said on stderr. */
#include "cli/commands.h"
#include "db/db.h"
#include "report/report_html.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

bool kld_record_runs(const char *cmd, const kld_kl_outputs *o, const kld_record_item *items,
                     size_t n) {
    if (o->no_db && !o->html_path) return true;
    kld_error err = {0};
    kld_db *db = NULL;
    /* --no-db --html: a throwaway database holds the runs for the report */
    if (kld_db_open(o->no_db ? ":memory:" : o->db_path, &db, &err) != KLD_OK) {
        fprintf(stderr, "kldeval %s: run not saved: %s\n", cmd, err.msg);
        return !o->html_path;
    }
    int64_t *ids = calloc(n ? n : 1, sizeof *ids);
    size_t n_ids = 0;
    bool ok = ids != NULL;
    for (size_t i = 0; ids && i < n; i++) {
        const kld_record_item *it = &items[i];
        kld_db_run run = {.label = it->label, .mode = it->mode, .report = it->report,
                          .summary = it->sum, .stats = it->stats, .records = it->records,
                          .partial = it->partial, .wall_s = it->wall_s,
                          .tokens_per_s = it->tokens_per_s, .threads = it->threads};
        if (kld_db_record_run(db, &run, &ids[n_ids], &err) != KLD_OK) {
            fprintf(stderr, "kldeval %s: run not saved in %s: %s\n", cmd, kld_db_path(db), err.msg);
            ok = !o->html_path;
            continue;
        }
        if (!o->no_db)
            fprintf(stderr, "kldeval %s: recorded as run %lld in %s\n", cmd, (long long)ids[n_ids],
                    kld_db_path(db));
        n_ids++;
    }
    if (ok && n_ids && o->html_path && kld_report_html_write(db, ids, n_ids, o->html_path, &err) != KLD_OK) {
        fprintf(stderr, "kldeval %s: %s\n", cmd, err.msg);
        ok = false;
    }
    free(ids);
    kld_db_close(db);
    return ok;
}

bool kld_record_check(const char *cmd, const kld_kl_outputs *o) {
    if (o->no_db) return true;
    kld_db *db = NULL;
    kld_error err = {0};
    if (kld_db_open(o->db_path, &db, &err) != KLD_OK) {
        fprintf(stderr, "kldeval %s: the run database: %s (or --no-db)\n", cmd, err.msg);
        return false;
    }
    kld_db_close(db);
    return true;
}

bool kld_record_run(const char *cmd, const kld_kl_outputs *o, const char *mode,
                    const json_t *report, const struct kld_summary *sum,
                    const struct kld_stats *stats, bool partial, double wall_s,
                    double tokens_per_s) {
    kld_record_item it = {.label = o->label, .mode = mode, .report = report, .sum = sum,
                          .stats = stats, .partial = partial, .wall_s = wall_s,
                          .tokens_per_s = tokens_per_s};
    return kld_record_runs(cmd, o, &it, 1);
}

bool kld_record_run_source(const char *cmd, const kld_kl_outputs *o, const char *mode,
                           const json_t *report, const struct kld_summary *sum,
                           const struct kld_record_source *records, double wall_s) {
    kld_record_item it = {.label = o->label, .mode = mode, .report = report, .sum = sum,
                          .records = records, .wall_s = wall_s, .tokens_per_s = NAN};
    return kld_record_runs(cmd, o, &it, 1);
}

bool kld_record_cap_run(const char *cmd, const kld_kl_outputs *o, const char *mode,
                        const json_t *report, bool partial, int threads, double wall_s) {
    kld_record_item it = {.label = o->label, .mode = mode, .report = report, .partial = partial,
                          .wall_s = wall_s, .tokens_per_s = NAN, .threads = threads};
    return kld_record_runs(cmd, o, &it, 1);
}
