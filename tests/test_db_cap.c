/* test_db_cap.c — capability runs in the run database (schema 2): a
 * database written by schema 1 (tests/data/runs-v1.sqlite, recorded by
 * kldeval before capability runs were recorded) is migrated once, keeps its
 * KL run intact and takes capability rows; a capability report's columns
 * (scores, tasks, n, seed, the per-task JSON without the items, the arms,
 * threads) round-trip; a `cap score` report becomes a one-task row; the
 * mode filter and deletion see capability rows; the HTML report of
 * capability runs alone has their section and no KLD charts. */
#include "db_fixture.h"
#include "testlib.h"

#include "db/db.h"
#include "report/report_html.h"

#include <math.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/stat.h>

static char dir[512];

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

static double raw_real(const char *path, const char *sql) {
    sqlite3 *h;
    sqlite3_stmt *s;
    double v = NAN;
    if (sqlite3_open(path, &h) == SQLITE_OK && sqlite3_prepare_v2(h, sql, -1, &s, NULL) == SQLITE_OK) {
        if (sqlite3_step(s) == SQLITE_ROW) v = sqlite3_column_double(s, 0);
        sqlite3_finalize(s);
    }
    sqlite3_close(h);
    return v;
}

static void remove_db(const char *p) {
    char side[600];
    remove(p);
    snprintf(side, sizeof side, "%s-wal", p);
    remove(side);
    snprintf(side, sizeof side, "%s-shm", p);
    remove(side);
}

static void test_migrate_v1(void) {
    char path[600];
    snprintf(path, sizeof path, "%s/runs-v1.sqlite", dir);
    remove_db(path);
    size_t n = 0;
    char *bytes = kt_read_file("tests/data/runs-v1.sqlite", &n);
    CHECK(bytes && n > 4096, "the schema-1 fixture (%zu bytes)", n);
    if (!bytes) return;
    kt_write_file(path, bytes, n);
    free(bytes);
    CHECK(raw_int(path, "PRAGMA user_version") == 1, "the fixture is schema 1");
    CHECK(raw_int(path, "SELECT count(*) FROM pragma_table_info('runs') WHERE name LIKE 'cap_%'") == 0,
          "no capability columns before");
    double kld_before = raw_real(path, "SELECT kld_mean FROM runs WHERE id = 1");
    int64_t cols_before = raw_int(path, "SELECT count(*) FROM pragma_table_info('runs')");

    kld_db *db = NULL;
    kld_error err = {0};
    CHECK_OK(kld_db_open(path, &db, &err), err);
    if (!db) return;
    CHECK(raw_int(path, "PRAGMA user_version") == KLD_DB_SCHEMA_VERSION && KLD_DB_SCHEMA_VERSION == 2,
          "migrated to schema 2");
    CHECK(raw_int(path, "SELECT count(*) FROM pragma_table_info('runs')") == cols_before + 8,
          "eight capability columns added");
    CHECK(raw_int(path, "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = 'runs_mode'") == 1,
          "index on mode");
    kld_db_row *r = NULL;
    CHECK_OK(kld_db_get(db, 1, &r, &err), err);
    if (r) {
        CHECK(r->label && !strcmp(r->label, "v1-fixture") && r->mode && !strcmp(r->mode, "two-models"),
              "the old run's label and mode");
        CHECK(r->has_summary && r->summary.kld.mean == kld_before && kld_before > 0,
              "its KLD mean unchanged (%.17g)", r->summary.kld.mean);
        CHECK(!r->cap.present && !r->cap.tasks && r->cap.n == -1 && isnan(r->cap.score_ref),
              "its capability columns are NULL");
        CHECK(r->ref.sha256 && strlen(r->ref.sha256) == 64 && r->report, "its arms and report");
    }
    kld_db_row_free(r);
    kld_db_position *pos = NULL;
    size_t np = 0;
    CHECK_OK(kld_db_load_positions(db, 1, &pos, &np, &err), err);
    CHECK(np == 120, "its per-position values (%zu)", np);
    free(pos);
    json_t *rep = kt_synth_cap_report("m/ref.gguf", "m/arm.gguf", 0.7, 0.6, 12, 1);
    int64_t id = kt_synth_cap_record(db, "after migration", rep);
    json_decref(rep);
    CHECK(id == 2, "a capability run recorded in the migrated file (id %lld)", (long long)id);
    kld_db_close(db);
    /* opened again: nothing to migrate, both rows there */
    CHECK_OK(kld_db_open(path, &db, &err), err);
    int64_t *ids = NULL;
    size_t nids = 0;
    if (db) CHECK_OK(kld_db_list(db, NULL, &ids, &nids, &err), err);
    CHECK(nids == 2, "two runs after reopening (%zu)", nids);
    free(ids);
    kld_db_close(db);
    CHECK(raw_int(path, "PRAGMA user_version") == 2, "still schema 2");
}

static void test_cap_round_trip(void) {
    char path[600];
    snprintf(path, sizeof path, "%s/cap.sqlite", dir);
    remove_db(path);
    kld_db *db = NULL;
    kld_error err = {0};
    CHECK_OK(kld_db_open(path, &db, &err), err);
    if (!db) return;
    kt_synth_arm a = kt_synth_defaults("a kl run", 1.0);
    int64_t kl_id = kt_synth_record(db, &a);
    json_t *rep = kt_synth_cap_report("m/ref.gguf", "m/arm.gguf", 0.8, 0.6, 20, 7);
    int64_t id = kt_synth_cap_record(db, "two models", rep);
    CHECK(id > 0 && kl_id > 0, "recorded a KL and a capability run");
    kld_db_row *r = NULL;
    CHECK_OK(kld_db_get(db, id, &r, &err), err);
    if (r) {
        const json_t *cs = json_object_get(rep, "capability_score"), *tasks = json_object_get(rep, "tasks");
        CHECK(r->cap.present && !r->has_summary, "a capability row, no KLD statistics");
        CHECK(!strcmp(r->mode, "cap") && !strcmp(r->label, "two models") && r->threads == 2,
              "mode, label, threads %lld", (long long)r->threads);
        CHECK(r->cap.tasks && !strcmp(r->cap.tasks, "mmlu,gsm8k,ifeval"), "tasks %s", r->cap.tasks ? r->cap.tasks : "-");
        CHECK(r->cap.n == 20 && r->cap.seed == 7 && r->cap.max_new == 128, "n %lld seed %lld max_new %lld",
              (long long)r->cap.n, (long long)r->cap.seed, (long long)r->cap.max_new);
        CHECK(r->cap.score_ref == json_real_value(json_object_get(cs, "ref")) &&
                  r->cap.score_arm == json_real_value(json_object_get(cs, "arm")) &&
                  r->cap.score_diff == json_real_value(json_object_get(cs, "diff")),
              "Capability_Score ref %.17g arm %.17g diff %.17g", r->cap.score_ref, r->cap.score_arm, r->cap.score_diff);
        CHECK(!strcmp(r->ref.path, "m/ref.gguf") && !strcmp(r->arm.path, "m/arm.gguf") &&
                  !strcmp(r->arm.sha256, "a4a4") && r->arm.bpw == 4.5 && r->ref.bpw == 16.0 &&
                  !strcmp(r->ref.levers, "reference") && !r->ref.policy && r->ref.bytes == 2000000,
              "the arms' path, SHA-256, bits per weight, levers, policy, bytes");
        size_t same = 0, total = 0;
        const char *t;
        json_t *tv;
        json_object_foreach((json_t *)tasks, t, tv) {
            static const char *const sides[] = {"ref", "arm"};
            for (int s = 0; s < 2; s++) {
                const json_t *want = json_object_get(tv, sides[s]), *got = kld_db_cap_side(r, t, sides[s]);
                total++;
                same += got && !json_object_get(got, "items") &&
                        json_real_value(json_object_get(got, "accuracy")) == json_real_value(json_object_get(want, "accuracy")) &&
                        json_real_value(json_object_get(got, "stderr")) == json_real_value(json_object_get(want, "stderr")) &&
                        json_integer_value(json_object_get(got, "correct")) == json_integer_value(json_object_get(want, "correct"));
            }
            total++;
            same += json_equal(json_object_get(json_object_get(r->cap.results, t), "paired"), json_object_get(tv, "paired"));
        }
        CHECK(total == 9 && same == total, "per-task accuracies and paired values as reported, items left out (%zu of %zu)",
              same, total);
        CHECK(json_equal(r->report, rep), "the full report (with every item) is kept");
        CHECK(kld_db_cap_task_count(r) == 3 && !strcmp(kld_db_cap_task(r, 1), "gsm8k"), "tasks in order");
    }
    kld_db_row_free(r);
    json_decref(rep);

    /* cap score: one task at the report's top level */
    json_t *sc = json_pack("{s:s, s:s, s:i, s:f, s:f, s:i, s:[], s:{s:s, s:s, s:{s:s, s:s}, s:[s], s:i}}", "task",
                           "gsm8k", "responses", "r.jsonl", "n", 4, "accuracy", 0.75, "stderr", sqrt(0.75 * 0.25 / 4),
                           "correct", 3, "items", "config", "version", kld_version(), "mode", "cap-score", "ref",
                           "kind", "responses", "path", "r.jsonl", "tasks", "gsm8k", "n", 4);
    kld_db_run run = {.label = "scored", .mode = "cap-score", .report = sc, .wall_s = 0.1, .tokens_per_s = NAN};
    int64_t sid = 0;
    CHECK_OK(kld_db_record_run(db, &run, &sid, &err), err);
    CHECK_OK(kld_db_get(db, sid, &r, &err), err);
    if (r) {
        const json_t *g = kld_db_cap_side(r, "gsm8k", "ref");
        CHECK(r->cap.present && r->cap.score_ref == 0.75 && isnan(r->cap.score_arm) && r->cap.n == 4 &&
                  g && json_integer_value(json_object_get(g, "correct")) == 3 && !kld_db_cap_side(r, "gsm8k", "arm"),
              "cap score: the task's accuracy as the reference's score");
        CHECK(!strcmp(r->ref.kind, "responses") && !strcmp(r->ref.path, "r.jsonl"), "the responses file as ref");
    }
    kld_db_row_free(r);
    json_decref(sc);

    kld_db_filter f = {.mode = "cap"};
    int64_t *ids = NULL;
    size_t n = 0;
    CHECK_OK(kld_db_list(db, &f, &ids, &n, &err), err);
    CHECK(n == 1 && ids[0] == id, "--mode cap lists the capability run only (%zu)", n);
    free(ids);
    /* HTML of capability runs alone: their section, none of the KLD charts */
    char html[600];
    snprintf(html, sizeof html, "%s/cap-only.html", dir);
    int64_t both[2] = {id, sid};
    CHECK_OK(kld_report_html_write(db, both, 2, html, &err), err);
    char *page = kt_read_file(html, NULL);
    CHECK(page && strstr(page, "id=\"cap-table\"") && strstr(page, "id=\"chart-cap\"") &&
              !strstr(page, "id=\"chart-hist\"") && !strstr(page, "id=\"summary-table\""),
          "capability-only report: the capability section without KLD sections");
    char want[96];
    snprintf(want, sizeof want, "data-key=\"cap_score_ref\" data-value=\"%.17g\"", 0.75);
    CHECK(page && strstr(page, want), "the cap score run's score in the table");
    free(page);
    CHECK_OK(kld_db_remove(db, &id, 1, &err), err);
    CHECK(kld_db_get(db, id, &r, &err) == KLD_ERR_ARG, "a capability run is deleted like any other");
    kld_db_close(db);
}

int main(void) {
    snprintf(dir, sizeof dir, "%s/test_db_cap", kt_build_dir());
    mkdir(dir, 0755);
    test_migrate_v1();
    test_cap_round_trip();
    return kt_finish();
}
