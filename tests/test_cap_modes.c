/* test_cap_modes.c — `kldeval cap` options end to end on the shipped tiny
 * models: GSM8K 8-shot completion (--gsm8k-mode 8shot: the first 8 problems
 * are the exemplars and are never scored, responses cut at "Question:",
 * the mode in the config) against the zero-shot items; levers on the
 * generation sessions (--ref-lever/--arm-lever on two models, recorded in
 * the config and the run database) and self-flag (-m MODEL --lever without
 * --arm: a second session over the same weights, marked shares_weights;
 * the same levers on both sides give identical responses); bad lever text
 * and a lever the model cannot take are refused. */
#include "testlib.h"

#include "db/db.h"

#include <jansson.h>
#include <stdlib.h>
#include <sys/wait.h>

#define REF KT_SHARED "/models/stories260K/f32.gguf"
#define ARM KT_SHARED "/models/aidreams260K/f32.gguf"

static const char *kldeval;

static int run(const char *args, char **out) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' %s 2>&1", kldeval, args);
    return kt_run_capture(cmd, out);
}

/* Runs cap with args and --json path; the parsed report (NULL on failure). */
static json_t *cap_json(const char *args, const char *path, char **out) {
    char a[4096];
    snprintf(a, sizeof a, "cap %s --json '%s'", args, path);
    int st = run(a, out);
    CHECK(st == 0, "cap %s: exit %d: %.3000s", args, st, *out);
    json_error_t je;
    return st == 0 ? json_load_file(path, 0, &je) : NULL;
}

static const json_t *side_items(const json_t *rep, const char *task, const char *side) {
    return json_object_get(json_object_get(json_object_get(json_object_get(rep, "tasks"), task), side), "items");
}

static void test_gsm8k_8shot(const char *path) {
    char *out;
    json_t *shot = cap_json("-q --no-db -m " REF " --tasks gsm8k --gsm8k-mode 8shot --n 3 --max-new 24", path, &out);
    CHECK(strstr(out, "GSM8K 8-shot completion"), "8-shot named in the text report: %s", out);
    free(out);
    json_t *zero = cap_json("-q --no-db -m " REF " --tasks gsm8k --n 3 --max-new 24", path, &out);
    free(out);
    if (!shot || !zero) return json_decref(shot), json_decref(zero);
    CHECK(!strcmp(json_string_value(json_object_get(json_object_get(shot, "config"), "gsm8k_mode")), "8shot") &&
              !strcmp(json_string_value(json_object_get(json_object_get(zero, "config"), "gsm8k_mode")), "chat"),
          "gsm8k_mode in the config");
    /* 1319 problems: 8-shot scores 8 + i * (1311 / 3), zero-shot i * (1319 / 3) */
    static const json_int_t want_shot[3] = {8, 445, 882}, want_zero[3] = {0, 439, 878};
    const json_t *si = side_items(shot, "gsm8k", "ref"), *zi = side_items(zero, "gsm8k", "ref");
    CHECK(json_array_size(si) == 3 && json_array_size(zi) == 3, "3 items each");
    for (size_t i = 0; i < json_array_size(si); i++) {
        const json_t *r = json_array_get(si, i);
        const char *text = json_string_value(json_object_get(r, "response"));
        CHECK(json_integer_value(json_object_get(r, "item")) == want_shot[i] &&
                  json_integer_value(json_object_get(json_array_get(zi, i), "item")) == want_zero[i],
              "item %zu: 8-shot line %lld, zero-shot line %lld", i, (long long)json_integer_value(json_object_get(r, "item")),
              (long long)json_integer_value(json_object_get(json_array_get(zi, i), "item")));
        CHECK(text && !strstr(text, "Question:"), "8-shot response %zu stops before 'Question:'", i);
    }
    json_decref(shot);
    json_decref(zero);
    char *bad = NULL;
    int st = run("cap -m " REF " --gsm8k-mode 4shot", &bad);
    CHECK(st == 2 && strstr(bad, "--gsm8k-mode expects chat or 8shot"), "bad --gsm8k-mode: %s", bad);
    free(bad);
}

static const char *cfg_levers(const json_t *rep, const char *side) {
    const char *s = json_string_value(json_object_get(json_object_get(json_object_get(rep, "config"), side), "levers"));
    return s ? s : "(none)";
}

static void check_db_levers(const char *db_path, int64_t id, const char *ref, const char *arm) {
    kld_db *db = NULL;
    kld_db_row *r = NULL;
    kld_error err = {0};
    CHECK_OK(kld_db_open_existing(db_path, &db, &err), err);
    if (db) CHECK_OK(kld_db_get(db, id, &r, &err), err);
    kld_db_close(db);
    if (!r) return;
    CHECK(r->ref.levers && !strcmp(r->ref.levers, ref) && r->arm.levers && !strcmp(r->arm.levers, arm),
          "run %lld: levers ref %s arm %s", (long long)id, r->ref.levers ? r->ref.levers : "-",
          r->arm.levers ? r->arm.levers : "-");
    kld_db_row_free(r);
}

static int64_t recorded_id(const char *out) {
    const char *p = strstr(out, "recorded as run ");
    return p ? strtoll(p + 16, NULL, 10) : 0;
}

static void test_levers(const char *path, const char *db_path) {
    char *out, args[2048];
    /* self-flag: one weight load, the arm a second session with the levers */
    snprintf(args, sizeof args, "-q --db '%s' -m " REF " --lever kv=f16 --tasks mmlu,gsm8k --n 3 --max-new 12", db_path);
    json_t *sf = cap_json(args, path, &out);
    CHECK(strstr(out, "levers: ref reference, arm kv=f16 (self-flag: the reference's weights)"), "self-flag text: %s", out);
    int64_t id = recorded_id(out);
    free(out);
    if (sf) {
        const json_t *arm = json_object_get(json_object_get(sf, "config"), "arm");
        CHECK(!strcmp(cfg_levers(sf, "ref"), "reference") && !strcmp(cfg_levers(sf, "arm"), "kv=f16") &&
                  json_is_true(json_object_get(arm, "shares_weights")) &&
                  !strcmp(json_string_value(json_object_get(sf, "arm")), REF) &&
                  !strcmp(json_string_value(json_object_get(arm, "path")), REF),
              "self-flag config: ref %s, arm %s", cfg_levers(sf, "ref"), cfg_levers(sf, "arm"));
        CHECK(json_array_size(side_items(sf, "gsm8k", "arm")) == 3, "self-flag: the arm ran");
    }
    check_db_levers(db_path, id, "reference", "kv=f16");
    json_decref(sf);
    /* the same levers on both sessions of one load: identical responses */
    json_t *same = cap_json("-q --no-db -m " REF " --ref-lever kv=bf16 --arm-lever kv=bf16 --tasks mmlu,gsm8k --n 3 "
                            "--max-new 12", path, &out);
    free(out);
    if (same) {
        CHECK(!strcmp(cfg_levers(same, "ref"), "kv=bf16") && !strcmp(cfg_levers(same, "arm"), "kv=bf16"),
              "both sessions kv=bf16");
        static const char *const tasks[] = {"mmlu", "gsm8k"};
        for (int t = 0; t < 2; t++) {
            const json_t *a = side_items(same, tasks[t], "ref"), *b = side_items(same, tasks[t], "arm");
            CHECK(json_array_size(a) == 3 && json_equal(a, b), "%s: identical items on identical sessions", tasks[t]);
        }
    }
    json_decref(same);
    /* two models: each session its own levers */
    snprintf(args, sizeof args, "-q --db '%s' -m " REF " --arm " ARM " --ref-lever act=bf16 --arm-lever act=q8 "
             "--tasks mmlu --n 2", db_path);
    json_t *two = cap_json(args, path, &out);
    id = recorded_id(out);
    free(out);
    if (two)
        CHECK(!strcmp(cfg_levers(two, "ref"), "act=bf16") && !strcmp(cfg_levers(two, "arm"), "act=q8") &&
                  !json_object_get(json_object_get(json_object_get(two, "config"), "arm"), "shares_weights"),
              "two models: ref %s, arm %s", cfg_levers(two, "ref"), cfg_levers(two, "arm"));
    check_db_levers(db_path, id, "act=bf16", "act=q8");
    json_decref(two);
    char *o1 = NULL, *o2 = NULL;
    int st1 = run("cap -m " REF " --lever kv=q3", &o1);
    CHECK(st1 == 2 && strstr(o1, "--lever") && strstr(o1, "q3"), "bad lever text: %s", o1);
    int st2 = run("cap --no-db -m " REF " --lever kv=q4_0 --tasks mmlu --n 1", &o2);
    CHECK(st2 == 1 && strstr(o2, "q4_0"), "a lever the model cannot take: %s", o2);
    free(o1);
    free(o2);
}

int main(int argc, char **argv) {
    if (argc < 2) return fprintf(stderr, "usage: test_cap_modes KLDEVAL\n"), 2;
    kldeval = argv[1];
    char path[512], db_path[512];
    snprintf(path, sizeof path, "%s/cap-modes.json", kt_build_dir());
    snprintf(db_path, sizeof db_path, "%s/cap-modes.sqlite", kt_build_dir());
    unlink(db_path);
    test_gsm8k_8shot(path);
    test_levers(path, db_path);
    unlink(path);
    unlink(db_path);
    return kt_finish();
}
