/* db_record.c — writing a run: the header (machine, label, mode), the arms,
 * corpus and windows read from the report's config, every summary
 * statistic, the report itself and the per-position BLOB, as one row in one
 * transaction. */
#include "db/db_impl.h"

#include "common/common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

/* One value to bind: NULL, integer, real, text (owned or borrowed) or blob. */
typedef struct value {
    const char *col;
    char type; /* 'n' null, 'i', 'd', 's', 'b' */
    int64_t i;
    double d;
    const char *s;
    const void *b;
    size_t nb;
} value;

#define MAX_VALUES 160

typedef struct row_values {
    value v[MAX_VALUES];
    size_t n;
    char *owned[24]; /* strings made here (JSON text of policy/levers, ...) */
    size_t n_owned;
} row_values;

static void add(row_values *r, value v) {
    if (r->n < MAX_VALUES) r->v[r->n++] = v;
}
static void add_null(row_values *r, const char *col) { add(r, (value){.col = col, .type = 'n'}); }
static void add_int(row_values *r, const char *col, int64_t i) { add(r, (value){.col = col, .type = 'i', .i = i}); }
static void add_real(row_values *r, const char *col, double d) {
    add(r, isfinite(d) ? (value){.col = col, .type = 'd', .d = d} : (value){.col = col, .type = 'n'});
}
static void add_text(row_values *r, const char *col, const char *s) {
    add(r, s ? (value){.col = col, .type = 's', .s = s} : (value){.col = col, .type = 'n'});
}
static void add_owned(row_values *r, const char *col, char *s) {
    if (s && r->n_owned < sizeof r->owned / sizeof r->owned[0]) r->owned[r->n_owned++] = s;
    else if (s) { free(s); s = NULL; }
    add_text(r, col, s);
}

static const char *jstr(const json_t *o, const char *key) {
    return json_string_value(json_object_get(o, key));
}

static void add_jint(row_values *r, const char *col, const json_t *o, const char *key) {
    const json_t *v = json_object_get(o, key);
    if (json_is_integer(v)) add_int(r, col, json_integer_value(v));
    else if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)))
        add_int(r, col, (int64_t)json_real_value(v));
    else add_null(r, col);
}

/* A string member as is; an object or array member as compact JSON text. */
static void add_jtext(row_values *r, const char *col, const json_t *o, const char *key) {
    const json_t *v = json_object_get(o, key);
    if (json_is_string(v)) add_text(r, col, json_string_value(v));
    else if (json_is_object(v) || json_is_array(v))
        add_owned(r, col, json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS));
    else add_null(r, col);
}

static void add_arm(row_values *r, const json_t *cfg, const char *which, const char *const cols[9]) {
    const json_t *a = json_object_get(cfg, which);
    add_text(r, cols[0], jstr(a, "kind"));
    add_text(r, cols[1], jstr(a, "path"));
    add_jint(r, cols[2], a, "bytes");
    add_text(r, cols[3], jstr(a, "sha256"));
    add_text(r, cols[4], jstr(a, "arch"));
    add_jint(r, cols[5], a, "n_vocab");
    add_jtext(r, cols[6], a, "policy");
    add_jtext(r, cols[7], a, "levers");
    const json_t *bpw = json_object_get(a, "bits_per_weight");
    add_real(r, cols[8], json_is_number(bpw) ? json_number_value(bpw) : NAN);
}

static const char *const ref_cols[9] = {"ref_kind", "ref_path", "ref_bytes", "ref_sha256", "ref_arch",
                                        "ref_n_vocab", "ref_policy", "ref_levers", "ref_bpw"};
static const char *const arm_cols[9] = {"arm_kind", "arm_path", "arm_bytes", "arm_sha256", "arm_arch",
                                        "arm_n_vocab", "arm_policy", "arm_levers", "arm_bpw"};

/* The capability columns (NULL for a run that is not one). */
static void add_cap(row_values *r, const json_t *report, const json_t *cfg) {
    json_t *results = report ? kld_db_cap_results(report) : NULL;
    double score[3] = {NAN, NAN, NAN};
    if (results) kld_db_cap_scores(report, &score[0], &score[1], &score[2]);
    add_owned(r, "cap_tasks", results ? kld_db_cap_task_list(results) : NULL);
    if (results) {
        add_jint(r, "cap_n", cfg, "n");
        add_jint(r, "cap_seed", cfg, "seed");
        add_jint(r, "cap_max_new", cfg, "max_new");
    } else {
        add_null(r, "cap_n");
        add_null(r, "cap_seed");
        add_null(r, "cap_max_new");
    }
    add_real(r, "cap_score_ref", score[0]);
    add_real(r, "cap_score_arm", score[1]);
    add_real(r, "cap_score_diff", score[2]);
    add_owned(r, "cap_results", results ? json_dumps(results, JSON_COMPACT | JSON_REAL_PRECISION(17)) : NULL);
    json_decref(results);
}

/* /proc/cpuinfo "model name" (malloc'd), NULL when unknown. */
static char *cpu_model(void) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return NULL;
    char line[512];
    char *out = NULL;
    while (!out && fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0) continue;
        char *c = strchr(line, ':');
        if (!c) continue;
        c++;
        while (*c == ' ' || *c == '\t') c++;
        c[strcspn(c, "\n")] = '\0';
        out = kld_strdup(c);
    }
    fclose(f);
    return out;
}

/* Every column of a run except id (and created, filled by the caller). */
static void collect(row_values *r, const kld_db_run *run, unsigned char *blob, size_t blob_size,
                    int64_t blob_n) {
    const json_t *cfg = json_object_get(run->report, "config");
    add_text(r, "version", kld_version());
    char host[256];
    add_owned(r, "host", gethostname(host, sizeof host) == 0 ? (host[sizeof host - 1] = '\0', kld_strdup(host)) : NULL);
    add_owned(r, "cpu_model", cpu_model());
    if (run->threads > 0) add_int(r, "threads", run->threads);
    else add_jint(r, "threads", cfg, "threads");
    add_text(r, "label", run->label);
    add_text(r, "mode", run->mode ? run->mode : jstr(cfg, "mode"));
    add_int(r, "partial", run->partial);
    add_real(r, "wall_s", run->wall_s);
    add_real(r, "tokens_per_s", run->tokens_per_s);
    add_arm(r, cfg, "ref", ref_cols);
    add_arm(r, cfg, "arm", arm_cols);
    const json_t *corpus = json_object_get(cfg, "corpus");
    add_text(r, "corpus_name", jstr(corpus, "name"));
    add_text(r, "corpus_kind", jstr(corpus, "kind"));
    add_text(r, "corpus_sha256", jstr(corpus, "sha256"));
    add_jint(r, "corpus_documents", corpus, "documents");
    add_text(r, "chunking", jstr(cfg, "chunking"));
    add_jint(r, "ctx", cfg, "ctx");
    add_jint(r, "chunk", cfg, "chunk");
    for (size_t i = 0; i < kld_db_n_summary_columns; i++) {
        const kld_db_column *c = &kld_db_summary_columns[i];
        if (!run->summary) { add_null(r, c->name); continue; }
        const char *base = (const char *)run->summary + c->off;
        if (c->kind == 'd') { double d; memcpy(&d, base, sizeof d); add_real(r, c->name, d); }
        else if (c->kind == 'u') { uint64_t u; memcpy(&u, base, sizeof u); add_int(r, c->name, (int64_t)u); }
        else { int v; memcpy(&v, base, sizeof v); add_int(r, c->name, v); }
    }
    add_cap(r, run->report, cfg);
    add_owned(r, "report", run->report ? json_dumps(run->report, JSON_COMPACT) : NULL);
    if (blob) {
        add(r, (value){.col = "positions", .type = 'b', .b = blob, .nb = blob_size});
        add_int(r, "positions_n", blob_n);
    } else {
        add_null(r, "positions");
        add_null(r, "positions_n");
    }
}

static void release(row_values *r) {
    for (size_t i = 0; i < r->n_owned; i++) free(r->owned[i]);
}

static bool bind_all(sqlite3_stmt *s, const row_values *r, int first) {
    for (size_t i = 0; i < r->n; i++) {
        const value *v = &r->v[i];
        int k = first + (int)i, rc;
        switch (v->type) {
        case 'i': rc = sqlite3_bind_int64(s, k, v->i); break;
        case 'd': rc = sqlite3_bind_double(s, k, v->d); break;
        case 's': rc = sqlite3_bind_text(s, k, v->s, -1, SQLITE_STATIC); break;
        case 'b': rc = sqlite3_bind_blob64(s, k, v->b, v->nb, SQLITE_STATIC); break;
        default: rc = sqlite3_bind_null(s, k); break;
        }
        if (rc != SQLITE_OK) return false;
    }
    return true;
}

/* "INSERT INTO runs(created, c1, ...) VALUES(?, ?, ...)" or
 * "UPDATE runs SET c1 = ?, ... WHERE id = ?" (malloc'd). */
static char *build_sql(const row_values *r, bool update) {
    size_t cap = 64 + r->n * 40;
    char *sql = malloc(cap);
    if (!sql) return NULL;
    size_t len = (size_t)snprintf(sql, cap, update ? "UPDATE runs SET " : "INSERT INTO runs(created");
    for (size_t i = 0; i < r->n; i++)
        len += update ? (size_t)snprintf(sql + len, cap - len, "%s%s = ?", i ? ", " : "", r->v[i].col)
                      : (size_t)snprintf(sql + len, cap - len, ", %s", r->v[i].col);
    if (update) {
        snprintf(sql + len, cap - len, " WHERE id = ?");
    } else {
        len += (size_t)snprintf(sql + len, cap - len, ") VALUES(?");
        for (size_t i = 0; i < r->n; i++) len += (size_t)snprintf(sql + len, cap - len, ", ?");
        snprintf(sql + len, cap - len, ")");
    }
    return sql;
}

static void utc_now(char buf[32]) {
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* Inserts (id == 0) or updates one row inside a write transaction. */
static kld_status write_row(kld_db *db, const kld_db_run *run, int64_t *id, kld_error *err) {
    unsigned char *blob = NULL;
    size_t blob_size = 0;
    int64_t blob_n = 0;
    kld_status st;
    kld_record_source src;
    if (run->stats) kld_stats_source(run->stats, &src);
    else if (run->records) src = *run->records;
    if (run->stats || run->records) {
        if ((st = kld_db_positions_encode_source(&src, &blob, &blob_size, err))) {
            kld_error_prefix(err, "%s", db->path);
            return st;
        }
        blob_n = (int64_t)src.n;
    }
    row_values *r = calloc(1, sizeof *r);
    if (!r) {
        free(blob);
        return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", db->path);
    }
    collect(r, run, blob, blob_size, blob_n);
    bool update = *id != 0;
    char *sql = build_sql(r, update);
    sqlite3_stmt *s = NULL;
    st = KLD_OK;
    if (!sql) st = kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", db->path);
    else if (sqlite3_prepare_v2(db->h, sql, -1, &s, NULL) != SQLITE_OK)
        st = kld_db_fail(db, err, KLD_ERR_IO, "cannot prepare the run's row");
    char created[32];
    utc_now(created);
    if (!st) {
        bool ok = update ? bind_all(s, r, 1) && sqlite3_bind_int64(s, (int)r->n + 1, *id) == SQLITE_OK
                         : sqlite3_bind_text(s, 1, created, -1, SQLITE_STATIC) == SQLITE_OK &&
                               bind_all(s, r, 2);
        if (!ok) st = kld_db_fail(db, err, KLD_ERR_IO, "cannot bind the run's values");
    }
    if (!st && (st = kld_db_begin_write(db, err)) == KLD_OK) {
        if (kld_db_step(db, s) != SQLITE_DONE) {
            st = kld_db_fail(db, err, KLD_ERR_IO, "cannot write the run's row");
        } else if (update && sqlite3_changes(db->h) != 1) {
            st = kld_fail(err, KLD_ERR_ARG, "no begun run with id %lld in %s", (long long)*id, db->path);
        }
        if (st) kld_db_rollback(db);
        else {
            int64_t new_id = update ? *id : sqlite3_last_insert_rowid(db->h);
            if ((st = kld_db_commit(db, err)) == KLD_OK) *id = new_id;
        }
    }
    sqlite3_finalize(s);
    free(sql);
    release(r);
    free(r);
    free(blob);
    return st;
}

kld_status kld_db_begin_run(kld_db *db, const kld_db_run *header, int64_t *id, kld_error *err) {
    kld_db_run h = *header;
    h.partial = true;
    *id = 0;
    return write_row(db, &h, id, err);
}

kld_status kld_db_record_run(kld_db *db, const kld_db_run *run, int64_t *id, kld_error *err) {
    if (!id) return kld_fail(err, KLD_ERR_ARG, "kld_db_record_run: id is NULL");
    return write_row(db, run, id, err);
}
