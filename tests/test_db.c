/* test_db.c — the run database (src/db): paths, schema and migrations, a
 * run's round trip (every statistic, the config columns, the per-position
 * BLOB), begun-then-completed rows, filters, deletion, paired comparison
 * against an independent computation, the sign test, bad files (not SQLite,
 * someone else's SQLite, a newer schema), a locked database, unwritable
 * locations, four concurrent writer processes, a writer killed mid-run, and
 * one real KL run recorded through the library. */
#include "db_fixture.h"
#include "testlib.h"

#include "db/db.h"
#include "eval/kl_driver.h"
#include "report/report.h"
#include "report/report_html.h"

#include <math.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char dir[512];

static void path_in(char *buf, size_t n, const char *name) {
    snprintf(buf, n, "%s/%s", dir, name);
}

static void remove_db(const char *p) {
    char side[600];
    remove(p);
    snprintf(side, sizeof side, "%s-wal", p);
    remove(side);
    snprintf(side, sizeof side, "%s-shm", p);
    remove(side);
}

static int64_t raw_int(const char *path, const char *sql) {
    sqlite3 *h;
    sqlite3_stmt *s;
    int64_t v = -12345;
    if (sqlite3_open(path, &h) == SQLITE_OK && sqlite3_prepare_v2(h, sql, -1, &s, NULL) == SQLITE_OK) {
        if (sqlite3_step(s) == SQLITE_ROW) v = sqlite3_column_int64(s, 0);
        sqlite3_finalize(s);
    }
    sqlite3_close(h);
    return v;
}

static char *raw_text(const char *path, const char *sql) {
    sqlite3 *h;
    sqlite3_stmt *s;
    char *v = NULL;
    if (sqlite3_open(path, &h) == SQLITE_OK && sqlite3_prepare_v2(h, sql, -1, &s, NULL) == SQLITE_OK) {
        if (sqlite3_step(s) == SQLITE_ROW && sqlite3_column_text(s, 0))
            v = kld_strdup((const char *)sqlite3_column_text(s, 0));
        sqlite3_finalize(s);
    }
    sqlite3_close(h);
    return v;
}

static void raw_exec(const char *path, const char *sql) {
    sqlite3 *h;
    if (sqlite3_open(path, &h) != SQLITE_OK || sqlite3_exec(h, sql, NULL, NULL, NULL) != SQLITE_OK)
        fprintf(stderr, "raw_exec %s: %s\n", sql, sqlite3_errmsg(h));
    sqlite3_close(h);
}

static bool same_double(double a, double b) { return (isnan(a) && isnan(b)) || a == b; }

static void test_paths(void) {
    char *p;
    setenv("KLDEVAL_DB", "/x/y.sqlite", 1);
    p = kld_db_default_path();
    CHECK(p && !strcmp(p, "/x/y.sqlite"), "$KLDEVAL_DB first: %s", p ? p : "(null)");
    free(p);
    unsetenv("KLDEVAL_DB");
    setenv("XDG_DATA_HOME", "/data", 1);
    p = kld_db_default_path();
    CHECK(p && !strcmp(p, "/data/kldeval/runs.sqlite"), "$XDG_DATA_HOME: %s", p ? p : "(null)");
    free(p);
    unsetenv("XDG_DATA_HOME");
    char *home = getenv("HOME") ? kld_strdup(getenv("HOME")) : NULL;
    setenv("HOME", "/home/u", 1);
    p = kld_db_default_path();
    CHECK(p && !strcmp(p, "/home/u/.local/share/kldeval/runs.sqlite"), "~/.local/share: %s", p ? p : "(null)");
    free(p);
    unsetenv("HOME");
    CHECK(kld_db_default_path() == NULL, "no environment: no default path");
    kld_db *db = NULL;
    kld_error err = {0};
    CHECK(kld_db_open(NULL, &db, &err) == KLD_ERR_ARG && strstr(err.msg, "--db"), "open(NULL) without a path: %s", err.msg);
    if (home) setenv("HOME", home, 1);
    free(home);

    /* the default path's folders are created */
    char nested[600], file[700];
    snprintf(nested, sizeof nested, "%s/xdg%d", dir, (int)getpid());
    setenv("XDG_DATA_HOME", nested, 1);
    snprintf(file, sizeof file, "%s/kldeval/runs.sqlite", nested);
    CHECK_OK(kld_db_open(NULL, &db, &err), err);
    CHECK(db && !strcmp(kld_db_path(db), file), "opened at %s", db ? kld_db_path(db) : "?");
    kld_db_close(db);
    struct stat sb;
    CHECK(stat(file, &sb) == 0, "created %s with its folders", file);
    CHECK(raw_int(file, "PRAGMA user_version") == KLD_DB_SCHEMA_VERSION, "user_version");
    CHECK(raw_int(file, "PRAGMA application_id") == KLD_DB_APPLICATION_ID, "application_id");
    char *jm = raw_text(file, "PRAGMA journal_mode");
    CHECK(jm && !strcmp(jm, "wal"), "journal_mode wal (%s)", jm ? jm : "?");
    free(jm);
    unsetenv("XDG_DATA_HOME");
    remove_db(file);
}

/* The column table and the schema name the same statistics. */
static void test_schema_columns(const char *path) {
    char sql[256];
    int64_t n_cols = raw_int(path, "SELECT count(*) FROM pragma_table_info('runs')");
    CHECK(n_cols > 100, "runs has %lld columns", (long long)n_cols);
    int missing = 0;
    /* every summary statistic of a recorded row is non-NULL for a normal run */
    sqlite3 *h;
    sqlite3_open(path, &h);
    sqlite3_stmt *s;
    sqlite3_prepare_v2(h, "SELECT name FROM pragma_table_info('runs')", -1, &s, NULL);
    int n_summary_cols = 0;
    while (sqlite3_step(s) == SQLITE_ROW) {
        const char *c = (const char *)sqlite3_column_text(s, 0);
        snprintf(sql, sizeof sql, "SELECT count(*) FROM runs WHERE \"%s\" IS NULL", c);
        int64_t nulls = raw_int(path, sql);
        /* the capability columns (schema 2) are NULL for a KL run */
        bool may_be_null = !strcmp(c, "ref_bpw") || !strcmp(c, "ref_policy") || !strcmp(c, "ref_levers") ||
                           !strncmp(c, "cap_", 4);
        if (nulls != 0 && !may_be_null) {
            missing++;
            fprintf(stderr, "column %s is NULL in %lld rows\n", c, (long long)nulls);
        }
        n_summary_cols++;
    }
    sqlite3_finalize(s);
    sqlite3_close(h);
    CHECK(missing == 0, "every column filled for a complete run (%d empty)", missing);
    CHECK(n_summary_cols == n_cols, "table_info listed");
}

static void test_round_trip(void) {
    char path[600];
    path_in(path, sizeof path, "db_round.sqlite");
    remove_db(path);
    kld_db *db;
    kld_error err = {0};
    CHECK_OK(kld_db_open(path, &db, &err), err);
    if (!db) return;
    kt_synth_arm a = kt_synth_defaults("round-trip", 1.0);
    kld_stats *st = kt_synth_stats(&a);
    kld_summary sum;
    CHECK_OK(kld_stats_finalize(st, &sum, &err), err);
    json_t *rep = kt_synth_report(&a, &sum);
    kld_db_run run = {.label = "round-trip", .mode = "two-models", .report = rep, .summary = &sum,
                      .stats = st, .wall_s = 2.5, .tokens_per_s = 100.0};
    int64_t id = 0;
    CHECK_OK(kld_db_record_run(db, &run, &id, &err), err);
    CHECK(id > 0, "id %lld", (long long)id);
    kld_db_row *r = NULL;
    CHECK_OK(kld_db_get(db, id, &r, &err), err);
    if (r) {
        CHECK(r->has_summary && !r->partial, "complete row");
        CHECK(!strcmp(r->label, "round-trip") && !strcmp(r->mode, "two-models"), "label, mode");
        CHECK(r->created && strlen(r->created) == 20 && r->created[10] == 'T', "created %s", r->created);
        CHECK(r->version && !strcmp(r->version, kld_version()), "version");
        CHECK(r->threads == 2 && r->ctx == 512 && r->chunk == 128, "threads %lld ctx %lld chunk %lld",
              (long long)r->threads, (long long)r->ctx, (long long)r->chunk);
        CHECK(r->ref.sha256 && !strcmp(r->ref.sha256, "feed") && r->ref.bytes == 8000000, "ref hash, bytes");
        CHECK(!strcmp(r->ref.kind, "model") && !strcmp(r->ref.arch, "llama") && r->ref.n_vocab == 32000, "ref kind/arch/vocab");
        CHECK(isnan(r->ref.bpw) && r->ref.policy == NULL, "ref without bpw/policy -> NULL");
        CHECK(r->arm.bpw == 4.5 && !strcmp(r->arm.policy, "uniform"), "arm bpw %g, policy", r->arm.bpw);
        CHECK(r->arm.levers && !strcmp(r->arm.levers, "{\"kv\":\"f16\"}"), "levers as JSON text: %s", r->arm.levers ? r->arm.levers : "?");
        CHECK(!strcmp(r->corpus_sha256, "c0ffee") && !strcmp(r->corpus_name, "built-in") &&
              !strcmp(r->corpus_kind, "text") && r->corpus_documents == 4, "corpus columns");
        CHECK(!strcmp(r->chunking, "doc"), "chunking");
        CHECK(r->wall_s == 2.5 && r->tokens_per_s == 100.0, "wall time, throughput");
        CHECK(r->positions_n == 256, "positions_n %lld", (long long)r->positions_n);
        CHECK(r->report && json_is_object(json_object_get(r->report, "config")), "report kept");
        int bad = 0;
        /* every scalar statistic comes back bit for bit */
#define SAME(f) do { if (!same_double(r->summary.f, sum.f)) { bad++; fprintf(stderr, #f ": %.17g vs %.17g\n", r->summary.f, sum.f); } } while (0)
        SAME(kld.mean); SAME(kld.se); SAME(kld.min); SAME(kld.median); SAME(kld.max);
        for (int k = 0; k < KLD_N_PCT; k++) { SAME(kld.pct[k]); SAME(kld_rev.pct[k]); SAME(jsd.pct[k]); SAME(dp.pct[k]); }
        SAME(kld_doc_mean); SAME(kld_doc_se); SAME(kld_rev.mean); SAME(jsd.max); SAME(top1_agreement);
        SAME(top1_se); SAME(topk_overlap); SAME(topk_se); SAME(ppl_ref); SAME(ppl_ref_se); SAME(ppl_arm);
        SAME(ppl_arm_se); SAME(ln_ppl_ratio); SAME(ln_ppl_ratio_se); SAME(ppl_ratio); SAME(ppl_ratio_se);
        SAME(ppl_diff); SAME(ppl_diff_se); SAME(nll_cor); SAME(dp.mean); SAME(dp.se); SAME(dp_rms); SAME(dp_rms_se);
#undef SAME
        CHECK(bad == 0, "every statistic round-trips exactly (%d differ)", bad);
        CHECK(r->summary.n_positions == sum.n_positions && r->summary.n_tokens == sum.n_tokens &&
              r->summary.n_docs == 4 && r->summary.topk == sum.topk, "counts");
        int nb = 0;
        for (int k = 0; k < KLD_CONF_BUCKETS; k++) {
            if (!sum.by_conf[k].n) continue;
            CHECK(r->summary.by_conf[nb].n == sum.by_conf[k].n &&
                      same_double(r->summary.by_conf[nb].kld_mean, sum.by_conf[k].kld_mean),
                  "confidence bucket %d from the report", k);
            nb++;
        }
        CHECK(nb > 3, "%d confidence buckets", nb);
    }
    /* positions */
    kld_db_position *p = NULL;
    size_t n = 0;
    CHECK_OK(kld_db_load_positions(db, id, &p, &n, &err), err);
    size_t nr;
    const kld_position *rec = kld_stats_records(st, &nr);
    CHECK(n == nr, "%zu positions back of %zu", n, nr);
    int bad = 0;
    for (size_t i = 0; p && i < n && i < nr; i++) {
        bool has = rec[i].token >= 0;
        double dp = has ? exp(-rec[i].nll_arm) - exp(-rec[i].nll_ref) : NAN;
        if (p[i].kld != (float)rec[i].kld || p[i].p_ref_max != rec[i].p_ref_max ||
            p[i].ctx_pos != rec[i].ctx_pos || p[i].token != rec[i].token ||
            p[i].top1 != (rec[i].top_ref == rec[i].top_arm) ||
            (has ? p[i].nll_ref != (float)rec[i].nll_ref || p[i].nll_arm != (float)rec[i].nll_arm ||
                       p[i].dp != (float)dp
                 : !isnan(p[i].nll_ref) || !isnan(p[i].nll_arm) || !isnan(p[i].dp)))
            bad++;
    }
    CHECK(bad == 0, "every position's fields round-trip (%d differ)", bad);
    free(p);
    /* BLOB layout: header bytes and size */
    CHECK(raw_int(path, "SELECT length(positions) FROM runs") == KLD_DB_BLOB_HEADER + 256 * KLD_DB_BLOB_RECORD,
          "BLOB is 16 + 29 n bytes");
    CHECK(raw_int(path, "SELECT hex(substr(positions, 1, 8)) = '4B4C445001000000' FROM runs") == 1, "magic KLDP, version 1 LE");

    test_schema_columns(path);

    /* unknown ids */
    err.msg[0] = '\0';
    kld_db_row *none = NULL;
    CHECK(kld_db_get(db, 999, &none, &err) == KLD_ERR_ARG && none == NULL &&
              strstr(err.msg, "no run with id 999"), "unknown id: %s", err.msg);
    CHECK(kld_db_load_positions(db, 999, &p, &n, &err) == KLD_ERR_ARG, "positions of an unknown id");
    kld_db_row_free(r);
    json_decref(rep);
    kld_stats_free(st);
    kld_db_close(db);
}

static void test_blob_bad(void) {
    kt_synth_arm a = kt_synth_defaults("b", 1.0);
    a.n_docs = 1;
    a.per_doc = 3;
    kld_stats *st = kt_synth_stats(&a);
    unsigned char *b;
    size_t n;
    kld_error err = {0};
    CHECK_OK(kld_db_positions_encode(st, &b, &n, &err), err);
    CHECK(n == 16 + 3 * 29, "3 records: %zu bytes", n);
    kld_db_position *p;
    size_t m;
    CHECK_OK(kld_db_positions_decode(b, n, &p, &m, &err), err);
    CHECK(m == 3, "decoded 3");
    free(p);
    CHECK(kld_db_positions_decode(b, n - 1, &p, &m, &err) == KLD_ERR_FORMAT, "short BLOB: %s", err.msg);
    CHECK(kld_db_positions_decode(b, 10, &p, &m, &err) == KLD_ERR_FORMAT, "header cut");
    b[4] = 2;
    CHECK(kld_db_positions_decode(b, n, &p, &m, &err) == KLD_ERR_UNSUPPORTED && strstr(err.msg, "version 2"), "version 2: %s", err.msg);
    b[4] = 1;
    b[12] = 0xff; /* count 255: size disagrees */
    CHECK(kld_db_positions_decode(b, n, &p, &m, &err) == KLD_ERR_FORMAT, "count vs size: %s", err.msg);
    b[12] = 3;
    b[16 + 28] = 7; /* top1 byte */
    CHECK(kld_db_positions_decode(b, n, &p, &m, &err) == KLD_ERR_FORMAT, "top1 byte 7");
    b[0] = 'X';
    CHECK(kld_db_positions_decode(b, n, &p, &m, &err) == KLD_ERR_FORMAT, "magic");
    free(b);
    kld_stats_free(st);
}

static void test_begin_and_list(void) {
    char path[600];
    path_in(path, sizeof path, "db_list.sqlite");
    remove_db(path);
    kld_db *db;
    kld_error err = {0};
    CHECK_OK(kld_db_open(path, &db, &err), err);
    if (!db) return;
    /* begun, then completed */
    json_t *cfg_only = json_pack("{s:{s:s,s:{s:s}}}", "config", "mode", "self-flag", "ref", "path", "r.gguf");
    kld_db_run head = {.label = "long-run", .report = cfg_only, .wall_s = NAN, .tokens_per_s = NAN};
    int64_t id = 0;
    CHECK_OK(kld_db_begin_run(db, &head, &id, &err), err);
    kld_db_row *r = NULL;
    CHECK_OK(kld_db_get(db, id, &r, &err), err);
    CHECK(r && r->partial && !r->has_summary && r->positions_n == -1, "begun row is partial, no statistics");
    CHECK(r && r->mode && !strcmp(r->mode, "self-flag"), "mode from config.mode");
    CHECK(r && r->ref.path && !strcmp(r->ref.path, "r.gguf") && r->ref.bytes == -1 && !r->ref.sha256, "missing keys -> NULL");
    kld_db_row_free(r);
    kt_synth_arm a = kt_synth_defaults("long-run", 1.0);
    kld_stats *st = kt_synth_stats(&a);
    kld_summary sum;
    kld_stats_finalize(st, &sum, &err);
    json_t *rep = kt_synth_report(&a, &sum);
    kld_db_run full = {.label = "long-run", .mode = "two-models", .report = rep, .summary = &sum,
                       .stats = st, .wall_s = 1, .tokens_per_s = 1};
    int64_t same = id;
    CHECK_OK(kld_db_record_run(db, &full, &same, &err), err);
    CHECK(same == id, "completed the begun row");
    CHECK_OK(kld_db_get(db, id, &r, &err), err);
    CHECK(r && !r->partial && r->has_summary && r->positions_n == 256, "completed row");
    kld_db_row_free(r);
    int64_t bogus = 4242;
    CHECK(kld_db_record_run(db, &full, &bogus, &err) == KLD_ERR_ARG && strstr(err.msg, "4242"), "complete an unknown id: %s", err.msg);
    json_decref(rep);
    json_decref(cfg_only);
    kld_stats_free(st);

    /* filters */
    kt_synth_arm b = kt_synth_defaults("q4_0-run", 2.0);
    b.arm_path = "models/q4_0.gguf";
    b.arm_sha256 = "bb22";
    int64_t idb = kt_synth_record(db, &b);
    kt_synth_arm c = kt_synth_defaults("q4_K_M-run", 1.0);
    c.arm_path = "models/q4_K_M.gguf";
    c.mode = "sweep";
    int64_t idc = kt_synth_record(db, &c);
    int64_t *ids;
    size_t n;
    CHECK_OK(kld_db_list(db, NULL, &ids, &n, &err), err);
    CHECK(n == 3 && ids[0] == id && ids[2] == idc, "all three, ascending");
    free(ids);
    kld_db_filter f = {.label_glob = "q4*"};
    CHECK_OK(kld_db_list(db, &f, &ids, &n, &err), err);
    CHECK(n == 2 && ids[0] == idb && ids[1] == idc, "label glob q4*: %zu", n);
    free(ids);
    f = (kld_db_filter){.model = "q4_0"};
    kld_db_list(db, &f, &ids, &n, &err);
    CHECK(n == 1 && ids[0] == idb, "model substring");
    free(ids);
    f = (kld_db_filter){.model = "bb2"};
    kld_db_list(db, &f, &ids, &n, &err);
    CHECK(n == 1 && ids[0] == idb, "model hash prefix");
    free(ids);
    f = (kld_db_filter){.mode = "sweep"};
    kld_db_list(db, &f, &ids, &n, &err);
    CHECK(n == 1 && ids[0] == idc, "mode");
    free(ids);
    f = (kld_db_filter){.since = "2999-01-01"};
    kld_db_list(db, &f, &ids, &n, &err);
    CHECK(n == 0, "since the future: none");
    free(ids);
    f = (kld_db_filter){.since = "2000-01-01", .limit = 2};
    kld_db_list(db, &f, &ids, &n, &err);
    CHECK(n == 2 && ids[0] == idb && ids[1] == idc, "limit keeps the newest two, ascending");
    free(ids);

    /* export */
    char csv[600];
    path_in(csv, sizeof csv, "db_export.csv");
    FILE *o = fopen(csv, "w");
    CHECK_OK(kld_db_export(db, NULL, KLD_DB_EXPORT_CSV, o, &err), err);
    fclose(o);
    char *text = kt_read_file(csv, NULL);
    int lines = 0;
    for (char *q = text; *q; q++) lines += *q == '\n';
    CHECK(lines == 4, "CSV: header + 3 rows (%d)", lines);
    CHECK(!strncmp(text, "id,created,", 11) && strstr(text, ",kld_mean,") && !strstr(text, ",positions,") && !strstr(text, ",report"),
          "CSV header names the columns, without BLOB");
    CHECK(strstr(text, "\"{\"\"kv\"\":\"\"f16\"\"}\""), "CSV quotes JSON text");
    free(text);

    /* rm: all or nothing */
    int64_t two[2] = {idb, 777};
    CHECK(kld_db_remove(db, two, 2, &err) == KLD_ERR_ARG && strstr(err.msg, "777"), "rm with an unknown id: %s", err.msg);
    kld_db_list(db, NULL, &ids, &n, &err);
    CHECK(n == 3, "nothing deleted");
    free(ids);
    CHECK_OK(kld_db_remove(db, &idb, 1, &err), err);
    kld_db_list(db, NULL, &ids, &n, &err);
    CHECK(n == 2 && ids[1] == idc, "deleted one");
    free(ids);
    kld_db_close(db);
}

static void test_sign_test(void) {
    CHECK(fabs(kld_sign_test_p(10, 0) - 2.0 / 1024) < 1e-15, "10:0 -> 2/1024 (%g)", kld_sign_test_p(10, 0));
    CHECK(fabs(kld_sign_test_p(3, 7) - 2.0 * (1 + 10 + 45 + 120) / 1024) < 1e-14, "3:7 -> 0.34375 (%g)", kld_sign_test_p(3, 7));
    CHECK(kld_sign_test_p(5, 5) == 1.0 && kld_sign_test_p(0, 0) == 1.0, "balanced -> 1");
    /* an independent direct sum for n = 60 */
    double c = 1, sum = 0;
    for (int i = 0; i <= 21; i++) {
        sum += c;
        c = c * (60 - i) / (i + 1);
    }
    double want = 2 * sum / pow(2, 60);
    CHECK(fabs(kld_sign_test_p(39, 21) / want - 1) < 1e-10, "39:21 exact %g vs %g", kld_sign_test_p(39, 21), want);
    /* the exact sum and the normal approximation agree around the switch */
    double exact = kld_sign_test_p(500500, 499500), approx = kld_sign_test_p(500501, 499501);
    CHECK(fabs(exact / approx - 1) < 0.01, "exact %g vs normal approximation %g", exact, approx);
    CHECK(kld_sign_test_p(1000, 0) >= 0 && kld_sign_test_p(1000, 0) < 1e-290, "tiny p does not go negative");
}

static void test_compare(void) {
    char path[600];
    path_in(path, sizeof path, "db_compare.sqlite");
    remove_db(path);
    kld_db *db;
    kld_error err = {0};
    CHECK_OK(kld_db_open(path, &db, &err), err);
    if (!db) return;
    kt_synth_arm a = kt_synth_defaults("q4_K_M", 1.0), b = kt_synth_defaults("q4_0", 1.6);
    a.arm_seed = 11;
    b.arm_seed = 12;
    int64_t ia = kt_synth_record(db, &a), ib = kt_synth_record(db, &b);
    kld_db_row *ra = NULL, *rb = NULL;
    CHECK_OK(kld_db_get(db, ia, &ra, &err), err);
    CHECK_OK(kld_db_get(db, ib, &rb, &err), err);
    kld_db_comparison cmp;
    CHECK_OK(kld_db_compare(db, ra, rb, &cmp, &err), err);
    CHECK(cmp.pairable, "same stream: pairable (%s)", cmp.why_not);
    /* the independent computation, straight from the accumulators */
    kld_stats *sa = kt_synth_stats(&a), *sb = kt_synth_stats(&b);
    size_t n;
    const kld_position *pa = kld_stats_records(sa, &n), *pb = kld_stats_records(sb, &n);
    double s = 0, ss = 0;
    uint64_t closer = 0, further = 0;
    for (size_t i = 0; i < n; i++) s += (double)(float)pa[i].kld - (double)(float)pb[i].kld;
    double mean = s / (double)n;
    for (size_t i = 0; i < n; i++) {
        double d = (double)(float)pa[i].kld - (double)(float)pb[i].kld - mean;
        ss += d * d;
        closer += (float)pa[i].kld < (float)pb[i].kld;
        further += (float)pa[i].kld > (float)pb[i].kld;
    }
    double se = sqrt(ss / (double)n / (double)(n - 1));
    CHECK(fabs(cmp.d_kld.mean - mean) < 1e-12 && fabs(cmp.d_kld.se / se - 1) < 1e-9,
          "ΔKLD %.6g ± %.6g vs %.6g ± %.6g", cmp.d_kld.mean, cmp.d_kld.se, mean, se);
    CHECK(cmp.d_kld.mean < 0 && cmp.a_closer == closer && cmp.b_closer == further &&
              cmp.a_closer + cmp.b_closer + cmp.ties == n,
          "A closer at %llu of %zu", (unsigned long long)cmp.a_closer, n);
    CHECK(cmp.sign_p < 1e-6 && cmp.sign_p == kld_sign_test_p(closer, further), "sign test p %g", cmp.sign_p);
    /* paired error is smaller than the unpaired one (the arms share the stream) */
    CHECK(cmp.d_kld.se < 0.5 * cmp.u_kld_se, "paired se %g < unpaired %g", cmp.d_kld.se, cmp.u_kld_se);
    CHECK(fabs(cmp.u_kld - (ra->summary.kld.mean - rb->summary.kld.mean)) < 1e-15, "unpaired difference");
    CHECK(fabs(cmp.d_kld.mean - cmp.u_kld) < 1e-6 * fabs(cmp.u_kld), "paired mean ≈ unpaired mean (float32 storage)");
    CHECK(cmp.d_nll.n == n - a.n_docs, "ΔNLL over positions with a next token (%llu)", (unsigned long long)cmp.d_nll.n);
    kld_stats_free(sa);
    kld_stats_free(sb);

    /* not pairable, and why */
    struct { const char *name, *expect; kt_synth_arm arm; } cases[5];
    for (int k = 0; k < 5; k++) cases[k].arm = kt_synth_defaults("x", 1.0);
    cases[0].name = "corpus"; cases[0].expect = "different corpora"; cases[0].arm.corpus_sha256 = "beef";
    cases[1].name = "ctx"; cases[1].expect = "different ctx"; cases[1].arm.ctx = 256;
    cases[2].name = "ref"; cases[2].expect = "different references"; cases[2].arm.ref_sha256 = "0bad";
    cases[3].name = "positions"; cases[3].expect = "numbers of positions"; cases[3].arm.per_doc = 63;
    cases[4].name = "tokens"; cases[4].expect = "token streams differ"; cases[4].arm.stream_seed = 99;
    for (int k = 0; k < 5; k++) {
        int64_t ix = kt_synth_record(db, &cases[k].arm);
        kld_db_row *rx = NULL;
        CHECK_OK(kld_db_get(db, ix, &rx, &err), err);
        if (!rx) continue;
        CHECK_OK(kld_db_compare(db, ra, rx, &cmp, &err), err);
        CHECK(!cmp.pairable && strstr(cmp.why_not, cases[k].expect), "%s: not pairable: %s", cases[k].name, cmp.why_not);
        CHECK(isfinite(cmp.u_kld) && cmp.u_kld_se > 0, "%s: still compared unpaired", cases[k].name);
        kld_db_row_free(rx);
    }
    /* no per-position values */
    kld_stats *st = kt_synth_stats(&a);
    kld_summary sum;
    kld_stats_finalize(st, &sum, &err);
    json_t *rep = kt_synth_report(&a, &sum);
    kld_db_run run = {.label = "no-blob", .report = rep, .summary = &sum, .stats = NULL, .wall_s = 1, .tokens_per_s = 1};
    int64_t inb = 0;
    CHECK_OK(kld_db_record_run(db, &run, &inb, &err), err);
    kld_db_row *rn = NULL;
    CHECK_OK(kld_db_get(db, inb, &rn, &err), err);
    if (rn) {
        CHECK_OK(kld_db_compare(db, ra, rn, &cmp, &err), err);
        CHECK(!cmp.pairable && strstr(cmp.why_not, "no per-position values"), "no BLOB: %s", cmp.why_not);
    }
    kld_db_row_free(rn);
    json_decref(rep);
    kld_stats_free(st);
    kld_db_row_free(ra);
    kld_db_row_free(rb);
    kld_db_close(db);
}

static void test_bad_files(void) {
    char path[600];
    kld_db *db = NULL;
    kld_error err = {0};
    /* a text file */
    path_in(path, sizeof path, "db_not_sqlite.sqlite");
    remove_db(path);
    const char *text = "this is not a database, it is a text file that is long enough to have a header\n";
    kt_write_file(path, text, strlen(text));
    CHECK(kld_db_open(path, &db, &err) == KLD_ERR_FORMAT && strstr(err.msg, "not a kldeval run database") &&
              strstr(err.msg, path), "text file: %s", err.msg);
    CHECK(db == NULL, "no handle");
    size_t n;
    char *after = kt_read_file(path, &n);
    CHECK(n == strlen(text) && !memcmp(after, text, n), "the file is left untouched");
    free(after);
    /* someone else's SQLite database */
    path_in(path, sizeof path, "db_foreign.sqlite");
    remove_db(path);
    raw_exec(path, "CREATE TABLE notes(x); INSERT INTO notes VALUES(1)");
    CHECK(kld_db_open(path, &db, &err) == KLD_ERR_FORMAT && strstr(err.msg, "not a kldeval run database"), "foreign: %s", err.msg);
    char *jm = raw_text(path, "PRAGMA journal_mode");
    CHECK(jm && strcmp(jm, "wal") != 0, "foreign database not switched to WAL (%s)", jm ? jm : "?");
    free(jm);
    CHECK(raw_int(path, "SELECT count(*) FROM notes") == 1 && raw_int(path, "PRAGMA user_version") == 0, "foreign database unchanged");
    /* a newer schema */
    path_in(path, sizeof path, "db_newer.sqlite");
    remove_db(path);
    CHECK_OK(kld_db_open(path, &db, &err), err);
    kld_db_close(db);
    raw_exec(path, "PRAGMA user_version = 99");
    CHECK(kld_db_open(path, &db, &err) == KLD_ERR_UNSUPPORTED && strstr(err.msg, "schema version 99 is newer"), "newer: %s", err.msg);
    CHECK(raw_int(path, "PRAGMA user_version") == 99, "newer file left alone");
    /* an empty file becomes a database; version 0 with our id migrates */
    path_in(path, sizeof path, "db_empty.sqlite");
    remove_db(path);
    kt_write_file(path, "", 0);
    CHECK_OK(kld_db_open(path, &db, &err), err);
    kld_db_close(db);
    CHECK(raw_int(path, "PRAGMA user_version") == KLD_DB_SCHEMA_VERSION, "empty file migrated to the schema");
    /* missing, folder, unwritable */
    path_in(path, sizeof path, "db_missing.sqlite");
    remove_db(path);
    CHECK(kld_db_open_existing(path, &db, &err) == KLD_ERR_IO && strstr(err.msg, "no run database"), "open_existing missing: %s", err.msg);
    struct stat sb;
    CHECK(stat(path, &sb) != 0, "open_existing creates nothing");
    CHECK(kld_db_open(dir, &db, &err) == KLD_ERR_ARG && strstr(err.msg, "folder"), "a folder: %s", err.msg);
    CHECK(kld_db_open("/proc/kldeval-none/runs.sqlite", &db, &err) == KLD_ERR_IO, "unwritable place: %s", err.msg);
    setenv("KLDEVAL_DB", "/proc/kldeval-none/deeper/runs.sqlite", 1);
    CHECK(kld_db_open(NULL, &db, &err) == KLD_ERR_IO && strstr(err.msg, "cannot create the folder"), "unwritable default: %s", err.msg);
    unsetenv("KLDEVAL_DB");
    char under_file[700];
    path_in(path, sizeof path, "db_a_file");
    kt_write_file(path, "x", 1);
    snprintf(under_file, sizeof under_file, "%s/runs.sqlite", path);
    CHECK(kld_db_open(under_file, &db, &err) == KLD_ERR_IO && strstr(err.msg, "runs.sqlite"), "below a file: %s", err.msg);
    setenv("KLDEVAL_DB_TIMEOUT_MS", "soon", 1);
    CHECK(kld_db_open(NULL, &db, &err) == KLD_ERR_ARG && strstr(err.msg, "'soon'"), "bad timeout: %s", err.msg);
    unsetenv("KLDEVAL_DB_TIMEOUT_MS");
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void test_locked(void) {
    char path[600];
    path_in(path, sizeof path, "db_locked.sqlite");
    remove_db(path);
    kld_db *db;
    kld_error err = {0};
    CHECK_OK(kld_db_open(path, &db, &err), err);
    if (!db) return;
    sqlite3 *other;
    sqlite3_open(path, &other);
    CHECK(sqlite3_exec(other, "BEGIN EXCLUSIVE", NULL, NULL, NULL) == SQLITE_OK, "another connection holds the write lock");
    kld_db_set_timeout(db, 300);
    kt_synth_arm a = kt_synth_defaults("locked", 1.0);
    double t0 = now();
    int64_t id = kt_synth_record(db, &a);
    double waited = now() - t0;
    CHECK(id == 0, "record fails while locked");
    kld_stats *st = kt_synth_stats(&a);
    kld_summary sum;
    kld_stats_finalize(st, &sum, &err);
    kld_db_run run = {.label = "locked", .summary = &sum, .stats = st};
    int64_t id2 = 0;
    kld_status s = kld_db_record_run(db, &run, &id2, &err);
    CHECK(s == KLD_ERR_IO && strstr(err.msg, "locked by another process") && strstr(err.msg, path),
          "clear error: %s", err.msg);
    CHECK(waited >= 0.29 && waited < 10, "waited %.2f s (timeout 0.3 s)", waited);
    sqlite3_exec(other, "COMMIT", NULL, NULL, NULL);
    sqlite3_close(other);
    CHECK_OK(kld_db_record_run(db, &run, &id2, &err), err);
    CHECK(id2 > 0, "recorded once the lock is released");
    kld_stats_free(st);
    kld_db_close(db);
}

#define WRITERS 4
#define RUNS_PER_WRITER 12

static void test_concurrent_writers(void) {
    char path[600];
    path_in(path, sizeof path, "db_concurrent.sqlite");
    remove_db(path); /* the writers also race to create the schema */
    pid_t pids[WRITERS];
    for (int w = 0; w < WRITERS; w++) {
        pids[w] = fork();
        if (pids[w] == 0) {
            kld_db *db;
            kld_error err = {0};
            if (kld_db_open(path, &db, &err) != KLD_OK) {
                fprintf(stderr, "writer %d: %s\n", w, err.msg);
                _exit(3);
            }
            for (int j = 0; j < RUNS_PER_WRITER; j++) {
                char label[32];
                snprintf(label, sizeof label, "w%d-%d", w, j);
                kt_synth_arm a = kt_synth_defaults(label, 1.0 + w);
                a.arm_seed = (uint64_t)(w * 100 + j);
                a.per_doc = (size_t)(20 + w * 7 + j);
                if (!kt_synth_record(db, &a)) _exit(4);
            }
            kld_db_close(db);
            _exit(0);
        }
    }
    int ok = 0;
    for (int w = 0; w < WRITERS; w++) {
        int status;
        waitpid(pids[w], &status, 0);
        ok += WIFEXITED(status) && WEXITSTATUS(status) == 0;
    }
    CHECK(ok == WRITERS, "%d of %d writers succeeded", ok, WRITERS);
    kld_db *db;
    kld_error err = {0};
    CHECK_OK(kld_db_open(path, &db, &err), err);
    if (!db) return;
    int64_t *ids;
    size_t n;
    CHECK_OK(kld_db_list(db, NULL, &ids, &n, &err), err);
    CHECK(n == WRITERS * RUNS_PER_WRITER, "%zu rows of %d", n, WRITERS * RUNS_PER_WRITER);
    int seen[WRITERS][RUNS_PER_WRITER] = {{0}}, intact = 0;
    for (size_t i = 0; i < n; i++) {
        kld_db_row *r = NULL;
        if (kld_db_get(db, ids[i], &r, &err) != KLD_OK) continue;
        int w, j;
        if (r->label && sscanf(r->label, "w%d-%d", &w, &j) == 2 && w >= 0 && w < WRITERS && j >= 0 &&
            j < RUNS_PER_WRITER) {
            seen[w][j]++;
            kld_db_position *p = NULL;
            size_t np = 0;
            size_t want = 4 * (size_t)(20 + w * 7 + j);
            if (kld_db_load_positions(db, ids[i], &p, &np, &err) == KLD_OK && np == want &&
                r->summary.n_positions == want) {
                double s = 0;
                for (size_t k = 0; k < np; k++) s += p[k].kld;
                intact += fabs(s / (double)np / r->summary.kld.mean - 1) < 1e-6;
            }
            free(p);
        }
        kld_db_row_free(r);
    }
    int once = 0;
    for (int w = 0; w < WRITERS; w++)
        for (int j = 0; j < RUNS_PER_WRITER; j++) once += seen[w][j] == 1;
    CHECK(once == WRITERS * RUNS_PER_WRITER, "every run present exactly once (%d)", once);
    CHECK(intact == WRITERS * RUNS_PER_WRITER, "every row intact: BLOB agrees with its statistics (%d)", intact);
    char *ic = raw_text(path, "PRAGMA integrity_check");
    CHECK(ic && !strcmp(ic, "ok"), "integrity_check: %s", ic ? ic : "?");
    free(ic);
    free(ids);
    kld_db_close(db);
}

/* A process killed after kld_db_begin_run leaves its row, marked partial. */
static void test_killed_writer(void) {
    char path[600];
    path_in(path, sizeof path, "db_killed.sqlite");
    remove_db(path);
    pid_t pid = fork();
    if (pid == 0) {
        kld_db *db;
        kld_error err = {0};
        if (kld_db_open(path, &db, &err) != KLD_OK) _exit(3);
        kld_db_run head = {.label = "killed", .mode = "two-models"};
        int64_t id;
        if (kld_db_begin_run(db, &head, &id, &err) != KLD_OK) _exit(4);
        raise(SIGKILL);
        _exit(5);
    }
    int status;
    waitpid(pid, &status, 0);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "writer was killed");
    CHECK(raw_int(path, "SELECT count(*) FROM runs WHERE label = 'killed' AND partial = 1") == 1,
          "its row is there, marked partial");
    char *ic = raw_text(path, "PRAGMA integrity_check");
    CHECK(ic && !strcmp(ic, "ok"), "database intact after the kill");
    free(ic);
}

/* One real run (rand-llama f16 vs q4_K_M, a few documents) recorded through
 * the library: the driver's config fills the columns. */
static void test_real_run(void) {
    kld_kl_config c;
    kld_kl_config_defaults(&c);
    c.ref.kind = KLD_ARM_MODEL;
    c.ref.path = KT_SHARED "/models/rand-llama/f16.gguf";
    c.arm.kind = KLD_ARM_MODEL;
    c.arm.path = KT_SHARED "/models/rand-llama/q4_K_M.gguf";
    c.max_docs = 2;
    c.max_tokens = 40;
    c.chunk = 20;
    c.n_threads = 2;
    kld_kl_result res;
    kld_error err = {0};
    kld_status st = kld_kl_run(&c, &res, &err);
    CHECK_OK(st, err);
    if (st) return;
    kld_summary sum;
    CHECK_OK(kld_stats_finalize(res.stats, &sum, &err), err);
    kld_report_run rr = {.label = "real", .config = res.config, .elapsed_s = res.elapsed_s,
                         .ref_seconds = res.ref_seconds, .arm_seconds = res.arm_seconds,
                         .ref_tokens = res.ref_tokens, .arm_tokens = res.arm_tokens};
    json_t *rep = kld_report_json(&sum, &rr);
    char path[600];
    path_in(path, sizeof path, "db_real.sqlite");
    remove_db(path);
    kld_db *db;
    CHECK_OK(kld_db_open(path, &db, &err), err);
    kld_db_run run = {.label = "real", .mode = "two-models", .report = rep, .summary = &sum,
                      .stats = res.stats, .wall_s = res.elapsed_s,
                      .tokens_per_s = (double)res.arm_tokens / res.elapsed_s};
    int64_t id = 0;
    CHECK_OK(kld_db_record_run(db, &run, &id, &err), err);
    kld_db_row *r = NULL;
    CHECK_OK(kld_db_get(db, id, &r, &err), err);
    if (r) {
        CHECK(r->ref.sha256 && strlen(r->ref.sha256) == 64, "ref SHA-256 column");
        CHECK(r->arm.sha256 && strlen(r->arm.sha256) == 64 && strcmp(r->arm.sha256, r->ref.sha256), "arm SHA-256 column");
        CHECK(r->arm.bytes > 0 && r->arm.bytes < r->ref.bytes, "arm bytes %lld < ref bytes %lld", (long long)r->arm.bytes, (long long)r->ref.bytes);
        CHECK(r->corpus_sha256 && strlen(r->corpus_sha256) == 64, "corpus SHA-256");
        CHECK(r->arm.arch && r->arm.n_vocab > 0 && r->ctx == 512 && r->chunking && !strcmp(r->chunking, "doc"), "arch, vocab, ctx, chunking");
        CHECK(r->threads == 2, "threads %lld", (long long)r->threads);
        CHECK(r->summary.n_positions == 80 && r->positions_n == 80, "80 positions, all in the BLOB");
        CHECK(r->summary.kld.mean == sum.kld.mean && sum.kld.mean > 0, "mean KLD %g", r->summary.kld.mean);
    }
    kld_db_row_free(r);
    json_decref(rep);
    kld_db_close(db);
    kld_kl_result_free(&res);
}

/* ":memory:" — a run that is not kept can still have its HTML report. */
static void test_memory_db(void) {
    kld_db *db;
    kld_error err = {0};
    CHECK_OK(kld_db_open(":memory:", &db, &err), err);
    if (!db) return;
    kt_synth_arm a = kt_synth_defaults("in-memory", 1.0);
    int64_t id = kt_synth_record(db, &a);
    CHECK(id > 0, "recorded in memory");
    char html[600];
    path_in(html, sizeof html, "memory.html");
    remove(html);
    CHECK_OK(kld_report_html_write(db, &id, 1, html, &err), err);
    size_t n = 0;
    char *t = kt_read_file(html, &n);
    CHECK(n > 200000 && strstr(t, "in-memory") && strstr(t, "</html>"), "HTML report from a memory database");
    free(t);
    int64_t none = 77;
    CHECK(kld_report_html_write(db, &none, 1, html, &err) == KLD_ERR_ARG && strstr(err.msg, "77"), "unknown id: %s", err.msg);
    kld_db_close(db);
    struct stat sb;
    CHECK(stat(":memory:", &sb) != 0, "no file named :memory:");
}

int main(void) {
    snprintf(dir, sizeof dir, "%s/test_db", kt_build_dir());
    mkdir(dir, 0755);
    test_paths();
    test_round_trip();
    test_blob_bad();
    test_begin_and_list();
    test_sign_test();
    test_compare();
    test_bad_files();
    test_locked();
    test_concurrent_writers();
    test_killed_writer();
    test_memory_db();
    test_real_run();
    return kt_finish();
}
