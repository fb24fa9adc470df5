/* db_open.c — finding, opening, validating and migrating the run database,
 * and the busy-retry helpers every write goes through. */
#include "db/db_impl.h"

#include "common/common.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_TIMEOUT_MS 15000

kld_status kld_db_fail(kld_db *db, kld_error *err, kld_status st, const char *what) {
    int code = sqlite3_extended_errcode(db->h);
    const char *msg = sqlite3_errmsg(db->h);
    if ((code & 0xff) == SQLITE_BUSY || (code & 0xff) == SQLITE_LOCKED)
        return kld_fail(err, KLD_ERR_IO,
                        "%s: %s: the database is locked by another process (waited %.1f s; "
                        "set $KLDEVAL_DB_TIMEOUT_MS to wait longer): %s",
                        db->path, what, db->timeout_ms / 1000.0, msg);
    if ((code & 0xff) == SQLITE_READONLY || (code & 0xff) == SQLITE_CANTOPEN ||
        (code & 0xff) == SQLITE_PERM)
        return kld_fail(err, KLD_ERR_IO, "%s: %s: cannot write here (%s)", db->path, what, msg);
    if ((code & 0xff) == SQLITE_NOTADB || (code & 0xff) == SQLITE_CORRUPT)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: not a kldeval run database (%s)", db->path, msg);
    return kld_fail(err, st, "%s: %s: %s", db->path, what, msg);
}

/* SQLite's busy handler waits inside a statement; this loop also covers
 * the cases where SQLite returns SQLITE_BUSY without calling it (e.g. a
 * writer finishing WAL recovery). */
int kld_db_step(kld_db *db, sqlite3_stmt *s) {
    double deadline = kld_now_s() + db->timeout_ms / 1000.0;
    for (;;) {
        int rc = sqlite3_step(s);
        if ((rc & 0xff) != SQLITE_BUSY || kld_now_s() >= deadline) return rc;
        sqlite3_reset(s);
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

kld_status kld_db_exec(kld_db *db, const char *sql, const char *what, kld_error *err) {
    const char *tail = sql;
    while (tail && *tail) {
        sqlite3_stmt *s = NULL;
        if (sqlite3_prepare_v2(db->h, tail, -1, &s, &tail) != SQLITE_OK)
            return kld_db_fail(db, err, KLD_ERR_IO, what);
        if (!s) break; /* trailing whitespace */
        int rc;
        while ((rc = kld_db_step(db, s)) == SQLITE_ROW) {}
        sqlite3_finalize(s);
        if (rc != SQLITE_DONE) return kld_db_fail(db, err, KLD_ERR_IO, what);
    }
    return KLD_OK;
}

kld_status kld_db_begin_write(kld_db *db, kld_error *err) {
    return kld_db_exec(db, "BEGIN IMMEDIATE", "cannot start a write", err);
}

void kld_db_rollback(kld_db *db) {
    if (!sqlite3_get_autocommit(db->h)) sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
}

kld_status kld_db_commit(kld_db *db, kld_error *err) {
    kld_status st = kld_db_exec(db, "COMMIT", "cannot commit", err);
    if (st) kld_db_rollback(db);
    return st;
}

/* An integer from a one-value query; -1 (with err) on failure. */
static kld_status query_int(kld_db *db, const char *sql, int64_t *out, kld_error *err) {
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(db->h, sql, -1, &s, NULL) != SQLITE_OK)
        return kld_db_fail(db, err, KLD_ERR_IO, "cannot read the schema");
    int rc = kld_db_step(db, s);
    *out = rc == SQLITE_ROW ? sqlite3_column_int64(s, 0) : 0;
    sqlite3_finalize(s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE)
        return kld_db_fail(db, err, KLD_ERR_IO, "cannot read the schema");
    return KLD_OK;
}

/* Brings the schema from its version to KLD_DB_SCHEMA_VERSION in one write
 * transaction (re-reading the version inside it: another process may have
 * migrated meanwhile). */
static kld_status migrate(kld_db *db, kld_error *err) {
    kld_status st = kld_db_begin_write(db, err);
    if (st) return st;
    int64_t v = 0;
    if ((st = query_int(db, "PRAGMA user_version", &v, err))) goto fail;
    for (; v < KLD_DB_SCHEMA_VERSION; v++) {
        char what[64];
        snprintf(what, sizeof what, "cannot migrate the schema to version %d", (int)v + 1);
        if ((st = kld_db_exec(db, kld_db_migrations[v], what, err))) goto fail;
    }
    char sql[96];
    snprintf(sql, sizeof sql, "PRAGMA application_id = %d; PRAGMA user_version = %d",
             KLD_DB_APPLICATION_ID, KLD_DB_SCHEMA_VERSION);
    if ((st = kld_db_exec(db, sql, "cannot set the schema version", err))) goto fail;
    return kld_db_commit(db, err);
fail:
    kld_db_rollback(db);
    return st;
}

/* Refuses files that are not ours before anything is written to them. */
static kld_status check_and_prepare(kld_db *db, kld_error *err) {
    int64_t app = 0, ver = 0, n_objects = 0;
    kld_status st;
    /* one read transaction: a concurrent first writer commits the schema
     * and its ids together, so the three values are seen together */
    if ((st = kld_db_exec(db, "BEGIN", "cannot read the schema", err))) return st;
    if ((st = query_int(db, "PRAGMA application_id", &app, err)) ||
        (st = query_int(db, "PRAGMA user_version", &ver, err)) ||
        (st = query_int(db, "SELECT count(*) FROM sqlite_master", &n_objects, err))) {
        kld_db_rollback(db);
        return st;
    }
    if ((st = kld_db_exec(db, "COMMIT", "cannot read the schema", err))) return st;
    bool fresh = app == 0 && ver == 0 && n_objects == 0;
    if (!fresh && app != KLD_DB_APPLICATION_ID)
        return kld_fail(err, KLD_ERR_FORMAT,
                        "%s: an SQLite database, but not a kldeval run database "
                        "(application_id 0x%llx, %lld schema objects)",
                        db->path, (unsigned long long)app, (long long)n_objects);
    if (ver > KLD_DB_SCHEMA_VERSION)
        return kld_fail(err, KLD_ERR_UNSUPPORTED,
                        "%s: schema version %lld is newer than this kldeval (%s) knows (%d); "
                        "use a newer kldeval or another --db",
                        db->path, (long long)ver, kld_version(), KLD_DB_SCHEMA_VERSION);
    /* A file the OS lets us only read (SQLite then opens it read-only) can
     * still be listed and reported; a write later fails with a clear error. */
    if (sqlite3_db_readonly(db->h, "main") == 1 && ver == KLD_DB_SCHEMA_VERSION) return KLD_OK;
    if ((st = kld_db_exec(db, "PRAGMA journal_mode = WAL", "cannot switch to WAL", err))) return st;
    return ver < KLD_DB_SCHEMA_VERSION ? migrate(db, err) : KLD_OK;
}

/* mkdir -p of path's folder. */
static kld_status make_parents(const char *path, kld_error *err) {
    char *dir = kld_strdup(path);
    if (!dir) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", path);
    for (char *p = dir + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
            kld_status st = kld_fail(err, KLD_ERR_IO, "%s: cannot create the folder %s: %s", path,
                                     dir, strerror(errno));
            free(dir);
            return st;
        }
        *p = '/';
    }
    free(dir);
    return KLD_OK;
}

char *kld_db_default_path(void) {
    const char *env = getenv("KLDEVAL_DB");
    if (env && *env) return kld_strdup(env);
    const char *xdg = getenv("XDG_DATA_HOME"), *home = getenv("HOME");
    const char *base = xdg && *xdg ? xdg : home && *home ? home : NULL;
    if (!base) return NULL;
    const char *mid = xdg && *xdg ? "" : "/.local/share";
    size_t n = strlen(base) + strlen(mid) + sizeof "/kldeval/runs.sqlite";
    char *out = malloc(n);
    if (out) snprintf(out, n, "%s%s/kldeval/runs.sqlite", base, mid);
    return out;
}

static kld_status open_db(const char *path, bool create, kld_db **out, kld_error *err) {
    *out = NULL;
    char *p = path ? kld_strdup(path) : kld_db_default_path();
    if (!p && path) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory for the path", path);
    if (!p && (getenv("KLDEVAL_DB") || getenv("XDG_DATA_HOME") || getenv("HOME")))
        return kld_fail(err, KLD_ERR_NOMEM, "out of memory for the run database's path");
    if (!p)
        return kld_fail(err, KLD_ERR_ARG,
                        "no run database path: set $KLDEVAL_DB, $XDG_DATA_HOME or $HOME, or give --db");
    struct stat sb;
    if (!create && stat(p, &sb) != 0) {
        kld_status st = kld_fail(err, KLD_ERR_IO,
                                 "%s: no run database here (%s); runs are recorded by kl, dump, "
                                 "sweep and cap, or give --db PATH",
                                 p, strerror(errno));
        free(p);
        return st;
    }
    if (stat(p, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        kld_status st = kld_fail(err, KLD_ERR_ARG, "%s: is a folder, not a run database file", p);
        free(p);
        return st;
    }
    if (create && !path) {
        kld_status st = make_parents(p, err);
        if (st) {
            free(p);
            return st;
        }
    }
    kld_db *db = calloc(1, sizeof *db);
    if (!db) {
        free(p);
        return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    }
    db->path = p;
    db->timeout_ms = DEFAULT_TIMEOUT_MS;
    const char *t = getenv("KLDEVAL_DB_TIMEOUT_MS");
    if (t && *t) {
        char *end;
        long v = strtol(t, &end, 10);
        if (*end || v < 0 || v > 86400000L) {
            kld_status st = kld_fail(err, KLD_ERR_ARG,
                                     "$KLDEVAL_DB_TIMEOUT_MS: expected milliseconds in "
                                     "[0, 86400000], got '%s'", t);
            free(p);
            free(db);
            return st;
        }
        db->timeout_ms = (int)v;
    }
    int flags = SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0);
    kld_status st = KLD_OK;
    if (sqlite3_open_v2(p, &db->h, flags, NULL) != SQLITE_OK) {
        st = db->h ? kld_db_fail(db, err, KLD_ERR_IO, "cannot open")
                   : kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", p);
    } else {
        sqlite3_busy_timeout(db->h, db->timeout_ms);
        sqlite3_extended_result_codes(db->h, 1);
        st = check_and_prepare(db, err);
    }
    if (st) {
        kld_db_close(db);
        return st;
    }
    *out = db;
    return KLD_OK;
}

kld_status kld_db_open(const char *path, kld_db **out, kld_error *err) {
    return open_db(path, true, out, err);
}

kld_status kld_db_open_existing(const char *path, kld_db **out, kld_error *err) {
    return open_db(path, false, out, err);
}

void kld_db_close(kld_db *db) {
    if (!db) return;
    sqlite3_close(db->h); /* closes even with unfinalized statements: there are none */
    free(db->path);
    free(db);
}

const char *kld_db_path(const kld_db *db) { return db->path; }

void kld_db_set_timeout(kld_db *db, int ms) {
    db->timeout_ms = ms < 0 ? 0 : ms;
    sqlite3_busy_timeout(db->h, db->timeout_ms);
}
