/* test_cli_runs.c — `kldeval runs` and `kldeval report` as a user runs them,
 * on a database in the build folder filled with synthetic runs: list (and
 * its filters), show (text and --json), export --csv / --jsonl (values equal
 * the database's), compare (paired numbers equal the library's; unpaired
 * with the reason), rm (all or none), and every bad argument named. */
#include "db_fixture.h"
#include "testlib.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>

static const char *kldeval;
static char db_path[600], out_path[600];

/* Runs `kldeval ARGS` with stdout+stderr into out_path; returns the exit
 * status and the output (malloc'd) in *text. */
static int run(const char *args, char **text) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' %s >'%s' 2>&1", kldeval, args, out_path);
    int st = system(cmd);
    if (text) *text = kt_read_file(out_path, NULL);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Issue 37.4: runs tell references and arms apart, name modes in full,
 * refuse an unknown mode, show a finished dump as finished, and a report of
 * runs with different references says so. */
static void test_readable(const char *dir) {
    char db[600], args[4096], *t = NULL;
    int rc;
    snprintf(db, sizeof db, "%s/readable.sqlite", dir);
    remove(db);
    kld_db *d;
    kld_error err = {0};
    CHECK_OK(kld_db_open(db, &d, &err), err);
    if (!d) return;
    kt_synth_arm a = kt_synth_defaults("first", 1.0), b = kt_synth_defaults("second", 1.1);
    a.arm_path = "quants/a/q8_0.gguf";
    b.arm_path = "quants/b/q8_0.gguf";
    b.ref_path = "models/bf16/model.gguf";
    b.ref_sha256 = "beef";
    b.mode = "candidate-dumps";
    int64_t ia = kt_synth_record(d, &a), ib = kt_synth_record(d, &b);
    kld_db_close(d);
    snprintf(args, sizeof args, "runs list --db '%s'", db);
    rc = run(args, &t);
    CHECK(rc == 0 && strstr(t, "a/q8_0.gguf") && strstr(t, "b/q8_0.gguf") &&
              strstr(t, "models/f16.gguf") && strstr(t, "bf16/model.gguf") && strstr(t, "candidate-dumps") &&
              strstr(t, "reference"),
          "list tells two q8_0.gguf and their references apart, modes in full:\n%s", t);
    free(t);
    snprintf(args, sizeof args, "runs list --db '%s' --mode bogus", db);
    rc = run(args, &t);
    CHECK(rc == 2 && strstr(t, "bogus") && strstr(t, "two-models"),
          "an unknown --mode is refused, naming the valid ones: %s", t);
    free(t);
    char html[600];
    snprintf(html, sizeof html, "%s/two-refs.html", dir);
    snprintf(args, sizeof args, "report %lld %lld --db '%s' --html '%s'", (long long)ia, (long long)ib, db, html);
    rc = run(args, &t);
    CHECK(rc == 0, "report of two runs: %s", t);
    free(t);
    t = kt_read_file(html, NULL);
    CHECK(t && strstr(t, "2 references: f16.gguf, model.gguf") && !strstr(t, "· reference f16.gguf"),
          "the report's header names both references");
    free(t);

    /* a real dump, recorded, reads as finished and is not compared */
    char out[600];
    snprintf(out, sizeof out, "%s/teacher", dir);
    snprintf(args, sizeof args, "rm -rf '%s'", out); /* a previous run's */
    CHECK(system(args) == 0, "%s", args);
    snprintf(args, sizeof args, "dump -m " KT_SHARED "/models/stories260K/f32.gguf --out '%s' --ctx 32 "
             "--max-docs 4 --threads 1 --db '%s' --quiet", out, db);
    rc = run(args, &t);
    CHECK(rc == 0, "dump: %s", t);
    free(t);
    snprintf(args, sizeof args, "runs show 3 --db '%s'", db);
    rc = run(args, &t);
    CHECK(rc == 0 && strstr(t, "finished") && strstr(t, "1 threads") && strstr(t, "stories260K") &&
              !strstr(t, "never completed") && !strstr(t, "-1 threads") && !strstr(t, "(-1 bytes)") && strstr(t, "top-256"),
          "a finished dump reads as finished:\n%s", t);
    free(t);
    snprintf(args, sizeof args, "runs compare 3 %lld --db '%s'", (long long)ia, db);
    rc = run(args, &t);
    CHECK(rc == 1 && strstr(t, "run 3 is a dump"), "compare names the dump: %s", t);
    free(t);
}

static size_t count_lines(const char *t) {
    size_t n = 0;
    for (; *t; t++) n += *t == '\n';
    return n;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    kldeval = argv[1];
    char dir[512], args[2048];
    int rc;
    snprintf(dir, sizeof dir, "%s/test_cli_runs", kt_build_dir());
    mkdir(dir, 0755);
    snprintf(db_path, sizeof db_path, "%s/runs.sqlite", dir);
    snprintf(out_path, sizeof out_path, "%s/out.txt", dir);
    remove(db_path);

    kld_db *db;
    kld_error err = {0};
    CHECK_OK(kld_db_open(db_path, &db, &err), err);
    if (!db) return kt_finish();
    kt_synth_arm a = kt_synth_defaults("q4_K_M", 1.0), b = kt_synth_defaults("q4_0", 1.7),
                 c = kt_synth_defaults("other-corpus", 1.2);
    a.arm_path = "m/q4_K_M.gguf";
    b.arm_path = "m/q4_0.gguf";
    b.arm_seed = 7;
    c.arm_path = "m/q4_K_S.gguf";
    c.corpus_sha256 = "d00d";
    c.mode = "sweep";
    int64_t ia = kt_synth_record(db, &a), ib = kt_synth_record(db, &b), ic = kt_synth_record(db, &c);
    kld_db_row *ra = NULL, *rb = NULL;
    kld_db_get(db, ia, &ra, &err);
    kld_db_get(db, ib, &rb, &err);
    kld_db_comparison cmp;
    CHECK_OK(kld_db_compare(db, ra, rb, &cmp, &err), err);
    kld_db_close(db);
    char *t;

    /* list */
    snprintf(args, sizeof args, "runs list --db '%s'", db_path);
    rc = run(args, &t);
    CHECK(rc == 0, "runs list exits 0");
    CHECK(count_lines(t) == 4 && strstr(t, "q4_K_M") && strstr(t, "q4_0") && strstr(t, "other-corpus"),
          "header + three runs:\n%s", t);
    char mean[64];
    snprintf(mean, sizeof mean, "%.6g ±", ra->summary.kld.mean);
    CHECK(strstr(t, mean) != NULL, "list shows run %lld's mean KLD %s", (long long)ia, mean);
    free(t);
    snprintf(args, sizeof args, "runs list --db '%s' --label 'q4*' --mode two-models", db_path);
    run(args, &t);
    CHECK(count_lines(t) == 3 && !strstr(t, "other-corpus"), "--label/--mode filter:\n%s", t);
    free(t);
    snprintf(args, sizeof args, "runs list --db '%s' --model q4_0 --since 1d", db_path);
    run(args, &t);
    CHECK(count_lines(t) == 2 && strstr(t, "q4_0.gguf"), "--model, --since 1d:\n%s", t);
    free(t);
    snprintf(args, sizeof args, "runs list --db '%s' --since 2999-01-01", db_path);
    run(args, &t);
    CHECK(strstr(t, "(no runs match"), "no match says so");
    free(t);

    /* show */
    snprintf(args, sizeof args, "runs show %lld --db '%s'", (long long)ia, db_path);
    rc = run(args, &t);
    CHECK(rc == 0, "runs show exits 0");
    CHECK(strstr(t, "q4_K_M") && strstr(t, "c0ffee") && strstr(t, "ctx 512") && strstr(t, mean) &&
          strstr(t, "per-position values: stored"), "show lists arms, corpus, windows, statistics:\n%s", t);
    free(t);
    snprintf(args, sizeof args, "runs show %lld --json --db '%s'", (long long)ia, db_path);
    run(args, &t);
    json_t *j = json_loads(t, 0, NULL);
    CHECK(j && json_number_value(json_object_get(json_object_get(j, "kld"), "mean")) == ra->summary.kld.mean,
          "show --json prints the report");
    json_decref(j);
    free(t);

    /* export */
    snprintf(args, sizeof args, "runs export --csv --db '%s'", db_path);
    rc = run(args, &t);
    CHECK(rc == 0, "export --csv exits 0");
    CHECK(count_lines(t) == 4 && !strncmp(t, "id,created,", 11), "CSV: header and three rows");
    /* the CSV's kld_mean column holds the database's value */
    {
        char *hdr_end = strchr(t, '\n');
        int col = -1, k = 0;
        for (char *p = t; p < hdr_end; k++) {
            size_t len = strcspn(p, ",\n");
            if (len == 8 && !strncmp(p, "kld_mean", 8)) col = k;
            p += len + 1;
        }
        CHECK(col > 0, "CSV has kld_mean");
        /* first data row; its fields before kld_mean hold no quoted commas in this fixture? the
           levers JSON is quoted: walk with quotes */
        char *p = hdr_end + 1;
        for (int f = 0; f < col && *p; f++) {
            if (*p == '"') { p++; while (*p && !(*p == '"' && p[1] != '"')) p += *p == '"' ? 2 : 1; p++; }
            else p += strcspn(p, ",\n");
            if (*p == ',') p++;
        }
        CHECK(strtod(p, NULL) == ra->summary.kld.mean, "CSV kld_mean %.17g equals the database's", strtod(p, NULL));
    }
    free(t);
    char jl[600];
    snprintf(jl, sizeof jl, "%s/export.jsonl", dir);
    snprintf(args, sizeof args, "runs export --jsonl --label q4_0 --db '%s' --out '%s'", db_path, jl);
    CHECK(run(args, NULL) == 0, "export --jsonl --out exits 0");
    t = kt_read_file(jl, NULL);
    j = json_loads(t, 0, NULL);
    CHECK(count_lines(t) == 1 && j && json_integer_value(json_object_get(j, "id")) == ib &&
              json_real_value(json_object_get(j, "kld_mean")) == rb->summary.kld.mean &&
              json_is_object(json_object_get(j, "report")) && !json_object_get(j, "positions"),
          "JSONL row: columns, the report as an object, no BLOB");
    json_decref(j);
    free(t);

    /* compare */
    snprintf(args, sizeof args, "runs compare %lld %lld %lld --db '%s'", (long long)ia, (long long)ib,
             (long long)ic, db_path);
    rc = run(args, &t);
    CHECK(rc == 0, "compare exits 0");
    char want[128];
    snprintf(want, sizeof want, "%+.6g ± %.2g nats (paired", cmp.d_kld.mean, cmp.d_kld.se);
    CHECK(strstr(t, want) != NULL, "paired ΔKLD as the library computes it (%s):\n%s", want, t);
    snprintf(want, sizeof want, "(%llu; run %lld closer at %llu", (unsigned long long)cmp.a_closer,
             (long long)ib, (unsigned long long)cmp.b_closer);
    CHECK(strstr(t, want) != NULL, "closer counts (%s)", want);
    CHECK(strstr(t, "sign test") && strstr(t, "KLD mean ± se") && strstr(t, "PPL ratio ± se"), "table rows");
    CHECK(strstr(t, "not pairable: different corpora") && strstr(t, "(unpaired"), "the other corpus is compared unpaired, with the reason");
    free(t);

    /* rm, unknown ids, bad arguments */
    snprintf(args, sizeof args, "runs rm %lld 999 --db '%s'", (long long)ib, db_path);
    rc = run(args, &t);
    CHECK(rc == 1 && strstr(t, "no run with id 999") && strstr(t, "nothing deleted"), "rm with an unknown id: %s", t);
    free(t);
    snprintf(args, sizeof args, "runs rm %lld --db '%s'", (long long)ib, db_path);
    rc = run(args, &t);
    CHECK(rc == 0 && strstr(t, "deleted run"), "rm exits 0");
    free(t);
    snprintf(args, sizeof args, "runs show %lld --db '%s'", (long long)ib, db_path);
    rc = run(args, &t);
    CHECK(rc == 1 && strstr(t, "no run with id"), "show a deleted id: %s", t);
    free(t);
    static const struct { const char *args, *expect; int rc; } bad[] = {
        {"runs", "usage: kldeval runs", 2},
        {"runs frobnicate", "unknown subcommand 'frobnicate'", 2},
        {"runs show abc", "ID expects a positive integer, got 'abc'", 2},
        {"runs show", "expects one ID", 2},
        {"runs list --since yesterday", "--since expects", 2},
        {"runs list --limit 0", "--limit expects", 2},
        {"runs list --bogus", "unknown flag '--bogus'", 2},
        {"runs export", "exactly one of --csv and --jsonl", 2},
        {"runs compare 1", "at least two IDs", 2},
        {"runs list --db", "--db needs a value", 2},
        {"report 1", "--html OUT.html", 2},
        {"report x --html a.html", "ID expects a positive integer, got 'x'", 2},
        {"report 1 --html /nonexistent-dir/a.html", "/nonexistent-dir", 2},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        snprintf(args, sizeof args, "%s", bad[k].args);
        rc = run(args, &t);
        CHECK(rc == bad[k].rc && strstr(t, bad[k].expect), "'%s' -> %d, names it: %s", bad[k].args, rc, t);
        free(t);
    }
    snprintf(args, sizeof args, "runs list --db '%s/none.sqlite'", dir);
    rc = run(args, &t);
    CHECK(rc == 1 && strstr(t, "no run database"), "a missing database: %s", t);
    free(t);
    char notdb[600];
    snprintf(notdb, sizeof notdb, "%s/notdb.sqlite", dir);
    static const char not_sqlite[] = "hello, not SQLite at all; long enough text for a header........\n";
    kt_write_file(notdb, not_sqlite, sizeof not_sqlite - 1);
    snprintf(args, sizeof args, "runs list --db '%s'", notdb);
    rc = run(args, &t);
    CHECK(rc == 1 && strstr(t, "not a kldeval run database"), "not a database: %s", t);
    free(t);
    char html[600];
    snprintf(html, sizeof html, "%s/r.html", dir);
    snprintf(args, sizeof args, "report %lld 4242 --db '%s' --html '%s'", (long long)ia, db_path, html);
    remove(html);
    struct stat sb;
    rc = run(args, &t);
    CHECK(rc == 1 && strstr(t, "no run with id 4242") && stat(html, &sb) != 0,
          "report with an unknown id writes nothing: %s", t);
    free(t);
    static const char *helps[] = {"runs --help", "runs list --help", "report --help"};
    for (size_t k = 0; k < 3; k++) {
        rc = run(helps[k], &t);
        CHECK(rc == 0 && strstr(t, "usage: kldeval") && strstr(t, "--db PATH"), "%s", helps[k]);
        free(t);
    }
    kld_db_row_free(ra);
    kld_db_row_free(rb);
    test_readable(dir);
    return kt_finish();
}
