/* db_impl.h — internals shared by the run database's files (src/db). */
#ifndef KLD_DB_IMPL_H
#define KLD_DB_IMPL_H

#include "db/db.h"

#include <sqlite3.h>

struct kld_db {
    sqlite3 *h;
    char *path;
    int timeout_ms;
};

/* One summary statistic stored as a column: a double (is_int false) or a
 * uint64_t / int at offset off inside kld_summary. */
typedef struct kld_db_column {
    const char *name;
    size_t off;
    char kind; /* 'd' double, 'u' uint64_t, 'i' int */
} kld_db_column;

extern const kld_db_column kld_db_summary_columns[];
extern const size_t kld_db_n_summary_columns;

/* The header columns (before the statistics) in table order, and the SQL
 * that creates schema version v from v-1 (v = 1 .. KLD_DB_SCHEMA_VERSION). */
extern const char *const kld_db_migrations[KLD_DB_SCHEMA_VERSION];

/* The Capability_Score of each arm and their difference in a capability
 * report (cap score: the task's accuracy as ref); NAN where absent. */
void kld_db_cap_scores(const json_t *report, double *ref, double *arm, double *diff);
/* cap_results' task names joined by commas (malloc'd). */
char *kld_db_cap_task_list(const json_t *results);

/* "PATH: <what>: <sqlite message>" into err. */
kld_status kld_db_fail(kld_db *db, kld_error *err, kld_status st, const char *what);

/* Runs sql (no results) ; fills err on failure. */
kld_status kld_db_exec(kld_db *db, const char *sql, const char *what, kld_error *err);

/* BEGIN IMMEDIATE, retried while busy until the timeout. */
kld_status kld_db_begin_write(kld_db *db, kld_error *err);
/* COMMIT (retried while busy); on failure the transaction is rolled back. */
kld_status kld_db_commit(kld_db *db, kld_error *err);
void kld_db_rollback(kld_db *db);

/* sqlite3_step retried on SQLITE_BUSY until the timeout. */
int kld_db_step(kld_db *db, sqlite3_stmt *s);

#endif
