/* db_query.c — reading runs back: one run as a kld_db_row, filtered id
 * lists, deletion, and the CSV / JSONL export. */
#include "db/db_impl.h"

#include "common/common.h"

#include <math.h>
#include <stdlib.h>

/* Column index by name in a prepared statement, -1 when absent. */
static int col(sqlite3_stmt *s, const char *name) {
    int n = sqlite3_column_count(s);
    for (int i = 0; i < n; i++)
        if (!strcmp(sqlite3_column_name(s, i), name)) return i;
    return -1;
}

static char *col_text(sqlite3_stmt *s, const char *name) {
    int i = col(s, name);
    if (i < 0 || sqlite3_column_type(s, i) == SQLITE_NULL) return NULL;
    return kld_strdup((const char *)sqlite3_column_text(s, i));
}

static int64_t col_int(sqlite3_stmt *s, const char *name) {
    int i = col(s, name);
    if (i < 0 || sqlite3_column_type(s, i) == SQLITE_NULL) return -1;
    return sqlite3_column_int64(s, i);
}

static double col_real(sqlite3_stmt *s, const char *name) {
    int i = col(s, name);
    if (i < 0 || sqlite3_column_type(s, i) == SQLITE_NULL) return NAN;
    return sqlite3_column_double(s, i);
}

static void read_arm(sqlite3_stmt *s, const char *p, kld_db_arm *a) {
    char name[32];
#define F(field) (snprintf(name, sizeof name, "%s_" #field, p), name)
    a->kind = col_text(s, F(kind));
    a->path = col_text(s, F(path));
    a->bytes = col_int(s, F(bytes));
    a->sha256 = col_text(s, F(sha256));
    a->arch = col_text(s, F(arch));
    a->n_vocab = col_int(s, F(n_vocab));
    a->policy = col_text(s, F(policy));
    a->levers = col_text(s, F(levers));
    a->bpw = col_real(s, F(bpw));
#undef F
}

static void free_arm(kld_db_arm *a) {
    free(a->kind);
    free(a->path);
    free(a->sha256);
    free(a->arch);
    free(a->policy);
    free(a->levers);
}

/* The report's bucket arrays back into kld_bucket slots (non-empty ones, in order). */
static void read_buckets(const json_t *arr, kld_bucket *b, int nb) {
    size_t i;
    const json_t *o;
    int k = 0;
    json_array_foreach(arr, i, o) {
        if (k >= nb) break;
        const json_t *n = json_object_get(o, "n");
        kld_bucket *q = &b[k++];
        q->lo = json_number_value(json_object_get(o, "lo"));
        q->hi = json_number_value(json_object_get(o, "hi"));
        q->n = json_is_integer(n) ? (uint64_t)json_integer_value(n) : (uint64_t)json_number_value(n);
        const json_t *v;
        q->kld_mean = json_is_number(v = json_object_get(o, "kld_mean")) ? json_number_value(v) : NAN;
        q->kld_se = json_is_number(v = json_object_get(o, "kld_stderr")) ? json_number_value(v) : NAN;
        q->kld_median = json_is_number(v = json_object_get(o, "kld_median")) ? json_number_value(v) : NAN;
        q->top1_agreement = json_is_number(v = json_object_get(o, "top1_agreement")) ? json_number_value(v) : NAN;
    }
}

static void read_cap(sqlite3_stmt *s, kld_db_cap *c) {
    c->tasks = col_text(s, "cap_tasks");
    c->n = col_int(s, "cap_n");
    c->seed = col_int(s, "cap_seed");
    c->max_new = col_int(s, "cap_max_new");
    c->score_ref = col_real(s, "cap_score_ref");
    c->score_arm = col_real(s, "cap_score_arm");
    c->score_diff = col_real(s, "cap_score_diff");
    int i = col(s, "cap_results");
    if (i >= 0 && sqlite3_column_type(s, i) == SQLITE_TEXT) {
        json_error_t jerr;
        c->results = json_loadb((const char *)sqlite3_column_text(s, i),
                                (size_t)sqlite3_column_bytes(s, i), 0, &jerr);
        if (!json_is_object(c->results)) {
            json_decref(c->results);
            c->results = NULL;
        }
    }
    c->present = c->results != NULL;
}

kld_status kld_db_get(kld_db *db, int64_t id, kld_db_row **out, kld_error *err) {
    *out = NULL;
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(db->h, "SELECT * FROM runs WHERE id = ?", -1, &s, NULL) != SQLITE_OK)
        return kld_db_fail(db, err, KLD_ERR_IO, "cannot read runs");
    sqlite3_bind_int64(s, 1, id);
    int rc = kld_db_step(db, s);
    if (rc != SQLITE_ROW) {
        kld_status st = rc == SQLITE_DONE
                            ? kld_fail(err, KLD_ERR_ARG, "no run with id %lld in %s", (long long)id, db->path)
                            : kld_db_fail(db, err, KLD_ERR_IO, "cannot read runs");
        sqlite3_finalize(s);
        return st;
    }
    kld_db_row *r = calloc(1, sizeof *r);
    if (!r) {
        sqlite3_finalize(s);
        return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    }
    r->id = id;
    r->created = col_text(s, "created");
    r->version = col_text(s, "version");
    r->host = col_text(s, "host");
    r->cpu_model = col_text(s, "cpu_model");
    r->label = col_text(s, "label");
    r->mode = col_text(s, "mode");
    r->threads = col_int(s, "threads");
    r->ctx = col_int(s, "ctx");
    r->chunk = col_int(s, "chunk");
    r->corpus_documents = col_int(s, "corpus_documents");
    read_arm(s, "ref", &r->ref);
    read_arm(s, "arm", &r->arm);
    r->corpus_name = col_text(s, "corpus_name");
    r->corpus_kind = col_text(s, "corpus_kind");
    r->corpus_sha256 = col_text(s, "corpus_sha256");
    r->chunking = col_text(s, "chunking");
    r->partial = col_int(s, "partial") == 1;
    r->wall_s = col_real(s, "wall_s");
    r->tokens_per_s = col_real(s, "tokens_per_s");
    r->positions_n = col_int(s, "positions_n");
    read_cap(s, &r->cap);
    int ip = col(s, "n_positions");
    r->has_summary = ip >= 0 && sqlite3_column_type(s, ip) != SQLITE_NULL;
    for (size_t i = 0; i < kld_db_n_summary_columns; i++) {
        const kld_db_column *c = &kld_db_summary_columns[i];
        char *base = (char *)&r->summary + c->off;
        if (c->kind == 'd') {
            double d = col_real(s, c->name);
            memcpy(base, &d, sizeof d);
        } else if (c->kind == 'u') {
            int64_t v = col_int(s, c->name);
            uint64_t u = v < 0 ? 0 : (uint64_t)v;
            memcpy(base, &u, sizeof u);
        } else {
            int v = (int)col_int(s, c->name);
            memcpy(base, &v, sizeof v);
        }
    }
    int ir = col(s, "report");
    if (ir >= 0 && sqlite3_column_type(s, ir) == SQLITE_TEXT) {
        json_error_t jerr;
        r->report = json_loadb((const char *)sqlite3_column_text(s, ir),
                               (size_t)sqlite3_column_bytes(s, ir), 0, &jerr);
        read_buckets(json_object_get(r->report, "by_ref_confidence"), r->summary.by_conf,
                     KLD_CONF_BUCKETS);
        read_buckets(json_object_get(r->report, "by_context_position"), r->summary.by_pos,
                     KLD_POS_BUCKETS);
    }
    sqlite3_finalize(s);
    *out = r;
    return KLD_OK;
}

void kld_db_row_free(kld_db_row *r) {
    if (!r) return;
    free(r->created);
    free(r->version);
    free(r->host);
    free(r->cpu_model);
    free(r->label);
    free(r->mode);
    free_arm(&r->ref);
    free_arm(&r->arm);
    free(r->corpus_name);
    free(r->corpus_kind);
    free(r->corpus_sha256);
    free(r->chunking);
    json_decref(r->report);
    free(r->cap.tasks);
    json_decref(r->cap.results);
    free(r);
}

/* "SELECT <what> FROM runs WHERE ..." in id order, with the filter's
 * placeholders bound; a limit keeps the newest runs that match. */
static kld_status prepare_filtered(kld_db *db, const char *what, const kld_db_filter *f,
                                   sqlite3_stmt **out, kld_error *err) {
    char where[512] = "1";
    size_t len = 1;
    if (f && f->label_glob) len += (size_t)snprintf(where + len, sizeof where - len, " AND label GLOB :label");
    if (f && f->model)
        len += (size_t)snprintf(where + len, sizeof where - len,
                                " AND (instr(arm_path, :model) OR instr(ref_path, :model) OR "
                                "arm_sha256 LIKE :model || '%%' OR ref_sha256 LIKE :model || '%%')");
    if (f && f->mode) len += (size_t)snprintf(where + len, sizeof where - len, " AND mode = :mode");
    if (f && f->since) snprintf(where + len, sizeof where - len, " AND created >= :since");
    size_t cap = strlen(what) + sizeof where + 128;
    char *sql = malloc(cap);
    if (!sql) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    if (f && f->limit > 0)
        snprintf(sql, cap, "SELECT * FROM (SELECT %s FROM runs WHERE %s ORDER BY id DESC LIMIT %lld) "
                 "ORDER BY id", what, where, (long long)f->limit);
    else
        snprintf(sql, cap, "SELECT %s FROM runs WHERE %s ORDER BY id", what, where);
    sqlite3_stmt *s = NULL;
    int prc = sqlite3_prepare_v2(db->h, sql, -1, &s, NULL);
    free(sql);
    if (prc != SQLITE_OK) return kld_db_fail(db, err, KLD_ERR_IO, "cannot query runs");
    const struct { const char *name, *v; } binds[] = {
        {":label", f ? f->label_glob : NULL}, {":model", f ? f->model : NULL},
        {":mode", f ? f->mode : NULL}, {":since", f ? f->since : NULL}};
    for (size_t i = 0; i < sizeof binds / sizeof binds[0]; i++) {
        int k = sqlite3_bind_parameter_index(s, binds[i].name);
        if (k > 0) sqlite3_bind_text(s, k, binds[i].v, -1, SQLITE_STATIC);
    }
    *out = s;
    return KLD_OK;
}

kld_status kld_db_list(kld_db *db, const kld_db_filter *filter, int64_t **ids, size_t *n,
                       kld_error *err) {
    *ids = NULL;
    *n = 0;
    sqlite3_stmt *s;
    kld_status st = prepare_filtered(db, "id", filter, &s, err);
    if (st) return st;
    size_t cap = 0;
    int rc;
    while ((rc = kld_db_step(db, s)) == SQLITE_ROW) {
        if (*n == cap) {
            cap = cap ? 2 * cap : 64;
            int64_t *g = realloc(*ids, cap * sizeof *g);
            if (!g) {
                sqlite3_finalize(s);
                free(*ids);
                *ids = NULL;
                *n = 0;
                return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
            }
            *ids = g;
        }
        (*ids)[(*n)++] = sqlite3_column_int64(s, 0);
    }
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE) {
        free(*ids);
        *ids = NULL;
        *n = 0;
        return kld_db_fail(db, err, KLD_ERR_IO, "cannot query runs");
    }
    return KLD_OK;
}

kld_status kld_db_remove(kld_db *db, const int64_t *ids, size_t n, kld_error *err) {
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(db->h, "DELETE FROM runs WHERE id = ?", -1, &s, NULL) != SQLITE_OK)
        return kld_db_fail(db, err, KLD_ERR_IO, "cannot delete runs");
    kld_status st = kld_db_begin_write(db, err);
    for (size_t i = 0; i < n && !st; i++) {
        sqlite3_reset(s);
        sqlite3_bind_int64(s, 1, ids[i]);
        if (kld_db_step(db, s) != SQLITE_DONE) st = kld_db_fail(db, err, KLD_ERR_IO, "cannot delete runs");
        else if (sqlite3_changes(db->h) != 1)
            st = kld_fail(err, KLD_ERR_ARG, "no run with id %lld in %s (nothing deleted)",
                          (long long)ids[i], db->path);
    }
    sqlite3_finalize(s);
    if (st) {
        kld_db_rollback(db);
        return st;
    }
    return kld_db_commit(db, err);
}

/* ---- export ---- */

static void csv_field(FILE *out, const char *s) {
    if (!strpbrk(s, ",\"\r\n")) {
        fputs(s, out);
        return;
    }
    fputc('"', out);
    for (; *s; s++) {
        if (*s == '"') fputc('"', out);
        fputc(*s, out);
    }
    fputc('"', out);
}

/* The column list of runs without the excluded ones (malloc'd SQL text). */
static char *column_list(kld_db *db, bool with_report, kld_error *err) {
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(db->h, "SELECT name FROM pragma_table_info('runs')", -1, &s, NULL) != SQLITE_OK) {
        kld_db_fail(db, err, KLD_ERR_IO, "cannot read the columns");
        return NULL;
    }
    size_t cap = 8192, len = 0;
    char *list = malloc(cap);
    if (!list) {
        sqlite3_finalize(s);
        kld_fail(err, KLD_ERR_NOMEM, "out of memory");
        return NULL;
    }
    list[0] = '\0';
    while (kld_db_step(db, s) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(s, 0);
        if (!strcmp(name, "positions") || (!with_report && !strcmp(name, "report"))) continue;
        if (len + strlen(name) + 4 >= cap) break; /* the schema is ours: never */
        len += (size_t)snprintf(list + len, cap - len, "%s\"%s\"", len ? ", " : "", name);
    }
    sqlite3_finalize(s);
    return list;
}

static json_t *value_json(sqlite3_stmt *s, int i, bool is_report) {
    switch (sqlite3_column_type(s, i)) {
    case SQLITE_INTEGER: return json_integer(sqlite3_column_int64(s, i));
    case SQLITE_FLOAT: return json_real(sqlite3_column_double(s, i));
    case SQLITE_TEXT: {
        const char *t = (const char *)sqlite3_column_text(s, i);
        if (is_report) {
            json_t *j = json_loads(t, 0, NULL);
            if (j) return j;
        }
        return json_string(t);
    }
    default: return json_null();
    }
}

kld_status kld_db_export(kld_db *db, const kld_db_filter *filter, kld_db_export_format fmt,
                         FILE *out, kld_error *err) {
    char *list = column_list(db, fmt == KLD_DB_EXPORT_JSONL, err);
    if (!list) return err ? err->status : KLD_ERR_IO;
    sqlite3_stmt *s;
    kld_status st = prepare_filtered(db, list, filter, &s, err);
    free(list);
    if (st) return st;
    int nc = sqlite3_column_count(s);
    if (fmt == KLD_DB_EXPORT_CSV) {
        for (int i = 0; i < nc; i++) {
            if (i) fputc(',', out);
            csv_field(out, sqlite3_column_name(s, i));
        }
        fputc('\n', out);
    }
    int rc;
    while ((rc = kld_db_step(db, s)) == SQLITE_ROW && !st) {
        if (fmt == KLD_DB_EXPORT_CSV) {
            for (int i = 0; i < nc; i++) {
                if (i) fputc(',', out);
                int t = sqlite3_column_type(s, i);
                if (t == SQLITE_FLOAT) fprintf(out, "%.17g", sqlite3_column_double(s, i));
                else if (t != SQLITE_NULL) csv_field(out, (const char *)sqlite3_column_text(s, i));
            }
            fputc('\n', out);
            continue;
        }
        json_t *o = json_object();
        for (int i = 0; o && i < nc; i++) {
            const char *name = sqlite3_column_name(s, i);
            if (json_object_set_new(o, name, value_json(s, i, !strcmp(name, "report") || !strcmp(name, "cap_results"))) != 0) {
                json_decref(o);
                o = NULL;
            }
        }
        char *line = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17)) : NULL;
        json_decref(o);
        if (!line) st = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
        else fprintf(out, "%s\n", line);
        free(line);
    }
    sqlite3_finalize(s);
    if (!st && rc != SQLITE_DONE && rc != SQLITE_ROW) st = kld_db_fail(db, err, KLD_ERR_IO, "cannot export runs");
    return st;
}

const char *const kld_db_modes[] = {"two-models", "self-flag", "saved-teacher", "candidate-dumps",
                                    "llamacpp-base", "dump", "merged", "sweep", "cap", "cap-score",
                                    "diff", NULL};

bool kld_db_mode_known(const char *mode) {
    for (int i = 0; kld_db_modes[i]; i++)
        if (!strcmp(mode, kld_db_modes[i])) return true;
    return false;
}
