/* test_cap_db.c — capability runs recorded in the run database, end to
 * end on the shipped tiny models: `kldeval cap` writes one row whose
 * fields equal its --json report (arms with their independently computed
 * SHA-256 and size, bits per weight as `inspect` gives them, tasks, n,
 * seed, per-task accuracies, paired differences and McNemar counts, the
 * Capability_Score, the whole report); `runs list --mode cap`, `runs show`,
 * `runs compare` (capability runs side by side; a KL run refused) and
 * `runs export --jsonl` print them; `cap score` and `smoketest` record
 * theirs; an unwritable database loses no result; --no-db records nothing;
 * `cap --html` writes the report. */
#include "testlib.h"

#include "db/db.h"
#include "eval/corpus.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define REF KT_SHARED "/models/stories260K/f32.gguf"
#define ARM KT_SHARED "/models/aidreams260K/f32.gguf"

static const char *kldeval;
static char dir[512], db_path[600];

static int run(const char *args, char **out) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' %s 2>&1", kldeval, args);
    return kt_run_capture(cmd, out);
}

/* The id in "recorded as run N in". */
static int64_t recorded_id(const char *out) {
    const char *p = strstr(out, "recorded as run ");
    return p ? strtoll(p + 16, NULL, 10) : 0;
}

static int64_t count_runs(void) {
    kld_db *db = NULL;
    kld_error err = {0};
    int64_t *ids = NULL;
    size_t n = 0;
    if (kld_db_open_existing(db_path, &db, &err) == KLD_OK) kld_db_list(db, NULL, &ids, &n, &err);
    kld_db_close(db);
    free(ids);
    return (int64_t)n;
}

static kld_db_row *get_row(int64_t id) {
    kld_db *db = NULL;
    kld_error err = {0};
    kld_db_row *r = NULL;
    CHECK_OK(kld_db_open_existing(db_path, &db, &err), err);
    if (db) CHECK_OK(kld_db_get(db, id, &r, &err), err);
    kld_db_close(db);
    return r;
}

/* The arm's recorded file facts against the file itself and `inspect`. */
static void check_arm(const char *which, const kld_db_arm *a, const char *path) {
    uint8_t d[32];
    char hex[65] = "", args[1024], *out;
    kld_sha256_file(path, d, NULL);
    kld_hex_digest(d, hex);
    struct stat sb;
    stat(path, &sb);
    CHECK(a->path && !strcmp(a->path, path) && a->sha256 && !strcmp(a->sha256, hex) && a->bytes == (int64_t)sb.st_size,
          "%s: path, SHA-256 %s, %lld bytes", which, a->sha256 ? a->sha256 : "-", (long long)a->bytes);
    snprintf(args, sizeof args, "inspect --json '%s'", path);
    run(args, &out);
    json_t *j = json_loads(out, 0, NULL);
    double bpw = json_real_value(json_object_get(j, "bits_per_weight"));
    CHECK(j && a->bpw == bpw && a->levers && !strcmp(a->levers, "reference") && !a->policy &&
              a->kind && !strcmp(a->kind, "model") && a->n_vocab == 512,
          "%s: %.6g bits per weight (inspect: %.6g), levers, no policy, kind, vocabulary", which, a->bpw, bpw);
    json_decref(j);
    free(out);
}

static bool same_acc(const json_t *got, const json_t *want) {
    return got && want && json_real_value(json_object_get(got, "accuracy")) == json_real_value(json_object_get(want, "accuracy")) &&
           json_real_value(json_object_get(got, "stderr")) == json_real_value(json_object_get(want, "stderr")) &&
           json_integer_value(json_object_get(got, "correct")) == json_integer_value(json_object_get(want, "correct")) &&
           json_integer_value(json_object_get(got, "n")) == json_integer_value(json_object_get(want, "n"));
}

int main(int argc, char **argv) {
    if (argc < 2) return fprintf(stderr, "usage: test_cap_db KLDEVAL\n"), 2;
    kldeval = argv[1];
    char args[4096], json[600], json2[600], html[600], *out;
    snprintf(dir, sizeof dir, "%s/test_cap_db", kt_build_dir());
    mkdir(dir, 0755);
    snprintf(db_path, sizeof db_path, "%s/runs.sqlite", dir);
    snprintf(json, sizeof json, "%s/cap.json", dir);
    snprintf(json2, sizeof json2, "%s/cap2.json", dir);
    snprintf(html, sizeof html, "%s/cap.html", dir);
    remove(db_path);
    remove(html);

    /* a two-model run */
    snprintf(args, sizeof args, "cap -q -m " REF " --arm " ARM " --tasks gsm8k,mmlu --n 3 --max-new 8 --threads 2 "
             "--seed 11 --db '%s' --label cap-a --json '%s' --html '%s'", db_path, json, html);
    int st = run(args, &out);
    int64_t id = recorded_id(out);
    CHECK(st == 0 && id > 0 && strstr(out, "Capability_Score (unweighted mean): ref"), "cap run recorded: %d %s", st, out);
    free(out);
    json_error_t je;
    json_t *rep = json_load_file(json, 0, &je);
    CHECK(rep != NULL, "--json parses: %s", je.text);
    kld_db_row *r = id > 0 ? get_row(id) : NULL;
    if (r && rep) {
        CHECK(r->cap.present && !r->has_summary && !r->partial, "a complete capability row");
        CHECK(r->mode && !strcmp(r->mode, "cap") && r->label && !strcmp(r->label, "cap-a"), "mode cap, label");
        CHECK(r->version && !strcmp(r->version, kld_version()) && r->created && strlen(r->created) == 20 &&
                  r->host && r->threads == 2 && isfinite(r->wall_s) && r->wall_s > 0,
              "version, created, host, threads %lld, wall %g s", (long long)r->threads, r->wall_s);
        CHECK(r->cpu_model || !strstr(kt_read_file("/proc/cpuinfo", NULL), "model name"), "CPU model");
        check_arm("ref", &r->ref, REF);
        check_arm("arm", &r->arm, ARM);
        CHECK(r->cap.tasks && !strcmp(r->cap.tasks, "mmlu,gsm8k") && r->cap.n == 3 && r->cap.seed == 11 &&
                  r->cap.max_new == 8,
              "tasks %s, n %lld, seed %lld, max_new %lld", r->cap.tasks ? r->cap.tasks : "-", (long long)r->cap.n,
              (long long)r->cap.seed, (long long)r->cap.max_new);
        const json_t *cs = json_object_get(rep, "capability_score");
        CHECK(r->cap.score_ref == json_real_value(json_object_get(cs, "ref")) &&
                  r->cap.score_arm == json_real_value(json_object_get(cs, "arm")) &&
                  r->cap.score_diff == json_real_value(json_object_get(cs, "diff")),
              "Capability_Score columns equal the report's");
        const char *t;
        json_t *tv;
        int tasks_ok = 0;
        json_object_foreach(json_object_get(rep, "tasks"), t, tv) {
            const json_t *p = json_object_get(json_object_get(r->cap.results, t), "paired"),
                         *wp = json_object_get(tv, "paired");
            tasks_ok += same_acc(kld_db_cap_side(r, t, "ref"), json_object_get(tv, "ref")) &&
                        same_acc(kld_db_cap_side(r, t, "arm"), json_object_get(tv, "arm")) && p &&
                        json_real_value(json_object_get(p, "diff")) == json_real_value(json_object_get(wp, "diff")) &&
                        json_real_value(json_object_get(p, "stderr")) == json_real_value(json_object_get(wp, "stderr")) &&
                        json_integer_value(json_object_get(p, "arm_only_right")) == json_integer_value(json_object_get(wp, "arm_only_right")) &&
                        json_integer_value(json_object_get(p, "ref_only_right")) == json_integer_value(json_object_get(wp, "ref_only_right"));
        }
        CHECK(tasks_ok == 2, "per-task accuracies, paired differences and McNemar counts equal the report's (%d of 2)",
              tasks_ok);
        CHECK(json_equal(r->report, rep), "the recorded report is the --json report, every response included");
        CHECK(json_array_size(json_object_get(json_object_get(json_object_get(json_object_get(r->report, "tasks"), "gsm8k"),
                                                              "arm"), "items")) == 3,
              "the per-item responses are in it");
    }
    char *page = kt_read_file(html, NULL);
    CHECK(page && strstr(page, "id=\"cap-table\"") && strstr(page, "cap-a"), "cap --html wrote the report");
    free(page);

    /* list, show */
    snprintf(args, sizeof args, "runs list --mode cap --db '%s'", db_path);
    st = run(args, &out);
    char want[256];
    snprintf(want, sizeof want, "Cap %.4f (ref %.4f)", r ? r->cap.score_arm : NAN, r ? r->cap.score_ref : NAN);
    CHECK(st == 0 && strstr(out, want) && strstr(out, "cap-a"), "runs list --mode cap shows the Capability_Score %s:\n%s",
          want, out);
    free(out);
    snprintf(args, sizeof args, "runs show %lld --db '%s'", (long long)id, db_path);
    st = run(args, &out);
    const json_t *mr = json_object_get(json_object_get(json_object_get(rep, "tasks"), "mmlu"), "ref");
    snprintf(want, sizeof want, "%.4f ± %.4f (%lld/3)", json_real_value(json_object_get(mr, "accuracy")),
             json_real_value(json_object_get(mr, "stderr")), (long long)json_integer_value(json_object_get(mr, "correct")));
    CHECK(st == 0 && strstr(out, "mode              : cap") && strstr(out, "tasks             : mmlu,gsm8k") &&
              strstr(out, want) && strstr(out, "Capability_Score  : ref") && !strstr(out, "corpus"),
          "runs show: per-task accuracies (%s):\n%s", want, out);
    free(out);

    /* a one-model run, then compare side by side */
    snprintf(args, sizeof args, "cap -q -m " REF " --tasks gsm8k --n 2 --max-new 4 --db '%s' --label cap-b --json '%s'",
             db_path, json2);
    st = run(args, &out);
    int64_t id2 = recorded_id(out);
    CHECK(st == 0 && id2 > id, "second cap run recorded as %lld", (long long)id2);
    free(out);
    snprintf(args, sizeof args, "runs compare %lld %lld --db '%s'", (long long)id, (long long)id2, db_path);
    st = run(args, &out);
    char h1[64], h2[64], h3[64];
    snprintf(h1, sizeof h1, "%lld ref", (long long)id);
    snprintf(h2, sizeof h2, "%lld arm", (long long)id);
    snprintf(h3, sizeof h3, "%lld ref", (long long)id2);
    CHECK(st == 0 && strstr(out, h1) && strstr(out, h2) && strstr(out, h3) && strstr(out, "cap-b") &&
              strstr(out, "(0/2)") && strstr(out, want) && strstr(out, "Capability_Score"),
          "runs compare: both runs' models side by side:\n%s", out);
    free(out);

    /* a KL run in the same database: not compared with a capability run */
    snprintf(args, sizeof args, "kl --ref " REF " --arm " KT_SHARED "/models/stories260K/f16.gguf --max-docs 2 "
             "--max-tokens 24 --ctx 32 --quiet --db '%s'", db_path);
    st = run(args, &out);
    int64_t kl_id = recorded_id(out);
    CHECK(st == 0 && kl_id > 0, "a KL run recorded: %d", st);
    free(out);
    snprintf(args, sizeof args, "runs compare %lld %lld --db '%s'", (long long)id, (long long)kl_id, db_path);
    st = run(args, &out);
    CHECK(st == 2 && strstr(out, "is a capability run (mode cap)") && strstr(out, "a KL run (mode two-models)"),
          "compare refuses a capability run with a KL run: %d %s", st, out);
    free(out);
    snprintf(args, sizeof args, "runs list --mode cap --db '%s'", db_path);
    run(args, &out);
    CHECK(!strstr(out, "two-models"), "--mode cap leaves the KL run out");
    free(out);

    /* export: cap_results as an object */
    snprintf(args, sizeof args, "runs export --jsonl --mode cap --db '%s'", db_path);
    st = run(args, &out);
    json_t *line = json_loadb(out, strcspn(out, "\n"), 0, &je);
    CHECK(st == 0 && json_is_object(json_object_get(line, "cap_results")) &&
              json_equal(json_object_get(line, "cap_results"), r ? r->cap.results : NULL) &&
              json_is_object(json_object_get(line, "report")),
          "export --jsonl: cap_results and report as objects");
    json_decref(line);
    free(out);

    /* recording fails: the result is printed anyway */
    st = run("cap -q -m " REF " --tasks gsm8k --n 1 --max-new 4 --db /proc/kldeval-none/runs.sqlite", &out);
    CHECK(st == 0 && strstr(out, "Capability_Score (unweighted mean): ref 0.0000") && strstr(out, "run not saved"),
          "an unwritable database: report printed, 'run not saved': %d %s", st, out);
    free(out);
    int64_t before = count_runs();
    snprintf(args, sizeof args, "cap -q -m " REF " --tasks gsm8k --n 1 --max-new 4 --no-db");
    st = run(args, &out);
    CHECK(st == 0 && count_runs() == before && !strstr(out, "recorded as run"), "--no-db records nothing");
    free(out);
    snprintf(args, sizeof args, "cap -m " REF " --db '%s' --no-db", db_path);
    st = run(args, &out);
    CHECK(st == 2 && strstr(out, "give --db or --no-db"), "--db with --no-db: %d", st);
    free(out);

    /* cap score: mode cap-score, the responses file as the reference */
    char resp[600];
    snprintf(resp, sizeof resp, "%s/responses.jsonl", dir);
    const char *lines = "{\"index\": 0, \"response\": \"#### 18\"}\n{\"index\": 1, \"response\": \"#### 5\"}\n";
    kt_write_file(resp, lines, strlen(lines));
    snprintf(args, sizeof args, "cap score -q --task gsm8k --responses '%s' --db '%s' --label scored --json '%s'", resp,
             db_path, json2);
    st = run(args, &out);
    int64_t sid = recorded_id(out);
    CHECK(st == 0 && sid > 0, "cap score recorded: %d %s", st, out);
    free(out);
    json_t *srep = json_load_file(json2, 0, &je);
    kld_db_row *s = sid > 0 ? get_row(sid) : NULL;
    uint8_t d[32];
    char hex[65] = "";
    kld_sha256_file(resp, d, NULL);
    kld_hex_digest(d, hex);
    CHECK(s && srep && !strcmp(s->mode, "cap-score") && !strcmp(s->label, "scored") && s->cap.present &&
              s->cap.score_ref == json_real_value(json_object_get(srep, "accuracy")) && s->cap.score_ref == 0.5 &&
              !strcmp(s->cap.tasks, "gsm8k") && s->cap.n == 2 && s->ref.sha256 && !strcmp(s->ref.sha256, hex) &&
              s->ref.bytes == (int64_t)strlen(lines) && json_equal(s->report, srep),
          "cap score row: mode, task, n, accuracy 0.5, the responses file's SHA-256 and size, the report");
    kld_db_row_free(s);
    json_decref(srep);

    /* the smoketest records both of its parts */
    before = count_runs();
    snprintf(args, sizeof args, "smoketest --ref " REF " --arm " KT_SHARED "/models/stories260K/f16.gguf --n 1 "
             "--max-new 4 --threads 2 --db '%s'", db_path);
    st = run(args, &out);
    CHECK(st == 0 && count_runs() == before + 2, "smoketest: two runs recorded (%lld -> %lld)", (long long)before,
          (long long)count_runs());
    free(out);
    snprintf(args, sizeof args, "runs list --label smoketest --db '%s'", db_path);
    run(args, &out);
    CHECK(strstr(out, "two-models") && strstr(out, " cap ") && strstr(out, "Cap 0.0000 (ref 0.0000)"),
          "smoketest rows: the KL run and the GSM8K run:\n%s", out);
    free(out);

    kld_db_row_free(r);
    json_decref(rep);
    return kt_finish();
}
