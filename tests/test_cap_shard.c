/* test_cap_shard.c — scale-out of `kldeval cap` end to end on the shipped
 * tiny models (stories260K, aidreams260K): three shards (--shard K/3, mod
 * and range, with different thread counts) merged by `kldeval merge` give
 * the single run's JSON report byte for byte once the added "merged" object
 * is taken out; the merge is one run-database row (mode cap) naming its
 * shards, with MMLU's subjects and BFCL's categories in cap_results; a
 * missing, duplicated, foreign (other --max-new), mismatched-split or
 * corrupted part is refused by name; --shard without --partial is refused. */
#include "testlib.h"

#include "db/db.h"

#include <jansson.h>
#include <stdlib.h>
#include <sys/wait.h>

#define MODELS "-m " KT_SHARED "/models/stories260K/f32.gguf --arm " KT_SHARED "/models/aidreams260K/f32.gguf"
#define RUN "cap -q " MODELS " --n 3 --max-new 12"

static const char *kldeval;
static char dir[512];

static int run(const char *args, char **out) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' %s 2>&1", kldeval, args);
    return kt_run_capture(cmd, out);
}

static int run_ok(const char *what, const char *args) {
    char *out;
    int st = run(args, &out);
    CHECK(st == 0, "%s: exit %d: %.3000s", what, st, out);
    free(out);
    return st;
}

static void part_path(char *buf, size_t size, const char *mode, int k) {
    snprintf(buf, size, "%s/%s-%d.part", dir, mode, k);
}

/* The merged report without "merged", dumped as `cap --json` writes, equals
 * the single run's file byte for byte. */
static void check_merged(const char *single, const char *merged, const char *mode) {
    size_t n1 = 0;
    char *a = kt_read_file(single, &n1);
    json_error_t je;
    json_t *m = json_load_file(merged, 0, &je);
    CHECK(m != NULL, "%s: merged JSON parses: %s", mode, je.text);
    if (!a || !m) return free(a), json_decref(m);
    json_t *mo = json_object_get(m, "merged");
    CHECK(json_integer_value(json_object_get(mo, "shards")) == 3 &&
              !strcmp(json_string_value(json_object_get(mo, "mode")), mode) &&
              json_array_size(json_object_get(mo, "parts")) == 3,
          "%s: merged object (3 shards, mode, parts)", mode);
    for (int k = 0; k < 3; k++) {
        char want[600];
        part_path(want, sizeof want, mode, k);
        const json_t *p = json_array_get(json_object_get(mo, "parts"), (size_t)k);
        CHECK(!strcmp(json_string_value(json_object_get(p, "path")), want) &&
                  json_integer_value(json_object_get(p, "shard")) == k,
              "%s: part %d is %s", mode, k, want);
    }
    json_object_del(m, "merged");
    char *b = json_dumps(m, JSON_INDENT(1) | JSON_REAL_PRECISION(17));
    CHECK(b && strlen(b) == n1 && !memcmp(a, b, n1), "%s: merged report == single run's (%zu vs %zu bytes)", mode,
          b ? strlen(b) : 0, n1);
    free(a);
    free(b);
    json_decref(m);
}

static void shards(const char *mode, const int threads[3]) {
    for (int k = 0; k < 3; k++) {
        char p[600], args[2048];
        part_path(p, sizeof p, mode, k);
        snprintf(args, sizeof args, RUN " --no-db --threads %d --shard %d/3 --shard-mode %s --partial '%s'", threads[k],
                 k, mode, p);
        run_ok("shard", args);
    }
}

static int64_t recorded_id(const char *out) {
    const char *p = strstr(out, "recorded as run ");
    return p ? strtoll(p + 16, NULL, 10) : 0;
}

static void check_db(const char *db_path, int64_t id) {
    kld_db *db = NULL;
    kld_db_row *r = NULL;
    kld_error err = {0};
    CHECK_OK(kld_db_open_existing(db_path, &db, &err), err);
    if (db) CHECK_OK(kld_db_get(db, id, &r, &err), err);
    kld_db_close(db);
    if (!r) return;
    CHECK(r->mode && !strcmp(r->mode, "cap") && r->cap.present, "merged row: mode cap (%s)", r->mode ? r->mode : "-");
    const json_t *parts = json_object_get(json_object_get(r->report, "merged"), "parts");
    CHECK(json_array_size(parts) == 3, "merged row names its 3 shards (%zu)", json_array_size(parts));
    const json_t *subj = json_object_get(json_object_get(r->cap.results, "mmlu"), "subjects");
    const json_t *cats = json_object_get(json_object_get(r->cap.results, "bfcl"), "categories");
    CHECK(json_object_size(subj) == 3 && json_object_size(cats) == 4 &&
              json_is_number(json_object_get(json_object_get(json_object_get(cats, "simple_java"), "arm"), "accuracy")),
          "cap_results: %zu MMLU subjects, %zu BFCL categories", json_object_size(subj), json_object_size(cats));
    kld_db_row_free(r);
}

static void refused(const char *what, const char *args, const char *want1, const char *want2) {
    char *out;
    int st = run(args, &out);
    CHECK(st != 0 && strstr(out, want1) && (!want2 || strstr(out, want2)), "%s refused naming '%s': %d %s", what,
          want1, st, out);
    free(out);
}

int main(int argc, char **argv) {
    if (argc < 2) return fprintf(stderr, "usage: test_cap_shard KLDEVAL\n"), 2;
    kldeval = argv[1];
    snprintf(dir, sizeof dir, "%s/cap-shard", kt_build_dir());
    char cmd[2400], single[600], merged[600], db_path[600], args[4096], *out;
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", dir, dir);
    CHECK(system(cmd) == 0, "scratch folder %s", dir);
    snprintf(single, sizeof single, "%s/single.json", dir);
    snprintf(merged, sizeof merged, "%s/merged.json", dir);
    snprintf(db_path, sizeof db_path, "%s/runs.sqlite", dir);

    snprintf(args, sizeof args, RUN " --no-db --threads 2 --json '%s'", single);
    run_ok("single run", args);
    static const int threads_mod[3] = {1, 2, 1}, threads_range[3] = {2, 1, 2};
    shards("mod", threads_mod);
    shards("range", threads_range);
    char p[3][600], r[3][600];
    for (int k = 0; k < 3; k++) {
        part_path(p[k], sizeof p[k], "mod", k);
        part_path(r[k], sizeof r[k], "range", k);
    }

    /* given out of order; merged into one database row */
    snprintf(args, sizeof args, "merge '%s' '%s' '%s' --db '%s' --label capmerge --json '%s'", p[2], p[0], p[1],
             db_path, merged);
    int st = run(args, &out);
    CHECK(st == 0 && strstr(out, "Capability_Score (unweighted mean)") && strstr(out, "merged: 3 shards (mod)"),
          "merge mod: %d %s", st, out);
    int64_t id = recorded_id(out);
    free(out);
    check_merged(single, merged, "mod");
    check_db(db_path, id);
    snprintf(args, sizeof args, "merge '%s' '%s' '%s' --no-db --json '%s'", r[0], r[1], r[2], merged);
    run_ok("merge range", args);
    check_merged(single, merged, "range");

    /* refusals, each naming the part */
    snprintf(args, sizeof args, "merge '%s' '%s' --no-db", p[0], p[1]);
    refused("a missing part", args, "1 of 3 shards missing: 2/3", NULL);
    char dup[700];
    snprintf(dup, sizeof dup, "%s/copy-0.part", dir);
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", p[0], dup);
    CHECK(system(cmd) == 0, "copy a part");
    snprintf(args, sizeof args, "merge '%s' '%s' '%s' '%s' --no-db", p[0], p[1], p[2], dup);
    refused("a duplicated part", args, "are both shard 0/3 (duplicated part)", dup);
    snprintf(args, sizeof args, "merge '%s' '%s' '%s' --no-db", r[0], p[1], p[2]);
    refused("a part of another split", args, "parts of one split only", p[1]);
    char foreign[700];
    snprintf(foreign, sizeof foreign, "%s/foreign-2.part", dir);
    snprintf(args, sizeof args, "cap -q " MODELS " --n 3 --max-new 11 --no-db --tasks mmlu,gsm8k,ifeval,humaneval,bfcl,hashhop "
             "--shard 2/3 --partial '%s'", foreign);
    run_ok("foreign shard", args);
    snprintf(args, sizeof args, "merge '%s' '%s' '%s' --no-db", p[0], p[1], foreign);
    refused("a foreign part", args, "belongs to another capability run", "config.max_new: 11 vs 12");
    /* one byte changed in the middle of a copy */
    char bad[700];
    snprintf(bad, sizeof bad, "%s/corrupt-1.part", dir);
    size_t n = 0;
    char *text = kt_read_file(p[1], &n);
    if (text && n > 100) {
        text[n / 2] = text[n / 2] == 'a' ? 'b' : 'a';
        kt_write_file(bad, text, n);
    }
    free(text);
    snprintf(args, sizeof args, "merge '%s' '%s' '%s' --no-db", p[0], bad, p[2]);
    refused("a corrupted part", args, "checksum mismatch", bad);
    snprintf(args, sizeof args, RUN " --no-db --shard 0/3");
    refused("--shard without --partial", args, "--shard needs --partial", NULL);
    snprintf(args, sizeof args, "merge '%s' '%s' '%s' --no-db --pin '%s/x.pin'", p[0], p[1], p[2], dir);
    refused("--pin on capability partials", args, "--pin and --per-position belong to kl partials", NULL);
    return kt_finish();
}
