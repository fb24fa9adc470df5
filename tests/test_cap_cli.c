/* test_cap_cli.c — `kldeval cap score` end to end: the IFEval GPT-4 run's
 * JSON fractions equal the reference's, GSM8K reference answers score 1,
 * an always-"B" MMLU run scores the share of B, BFCL and HumanEval lines
 * are scored, and bad input is an error naming the line; cap and smoketest
 * gates pass (0) and fail (3). */
#include "testlib.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <sys/wait.h>

static const char *kldeval;

static int run(const char *args, char **out) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' %s 2>&1", kldeval, args);
    return kt_run_capture(cmd, out);
}

static json_t *score(const char *task, const char *responses, int *status) {
    char args[4096], json[512], *out;
    snprintf(json, sizeof json, "%s/cap-cli-%s.json", kt_build_dir(), task);
    snprintf(args, sizeof args, "cap score -q --task %s --responses '%s' --json '%s'", task, responses, json);
    *status = run(args, &out);
    json_error_t je;
    json_t *j = *status == 0 ? json_load_file(json, 0, &je) : NULL;
    if (*status) fprintf(stderr, "kldeval %s: %s\n", args, out);
    free(out);
    return j;
}

static double frac(const json_t *rep, const char *k) {
    return json_real_value(json_object_get(json_object_get(rep, k), "accuracy"));
}

static char *tmp_path(const char *name) {
    char *p = malloc(512);
    snprintf(p, 512, "%s/%s", kt_build_dir(), name);
    return p;
}

/* cap --gate and smoketest --gate: a passing set (exit 0), a failing one
 * (exit 3) with each condition printed, the gates in the JSON and the
 * database row; an unknown statistic is exit 2 before any model loads. */
static void test_gates(void) {
    char args[4096], *out = NULL, *json = tmp_path("cap-gate.json"), *db = tmp_path("cap-gate.sqlite");
    remove(db);
    const char *models = "-m " KT_SHARED "/models/stories260K/f32.gguf --arm " KT_SHARED "/models/stories260K/q8_0.gguf";
    snprintf(args, sizeof args, "cap -q %s --tasks ifeval --n 6 --max-new 16 --db '%s' --json '%s' "
             "--gate 'ifeval.accuracy>=0,ifeval.diff>=-1,capability_score<=1'", models, db, json);
    CHECK(run(args, &out) == 0 && strstr(out, "tasks.ifeval.arm.accuracy >= 0: ") && strstr(out, "PASS"),
          "cap gates that hold: exit 0, each printed: %s", out);
    free(out);
    json_error_t je;
    json_t *j = json_load_file(json, 0, &je);
    CHECK(json_array_size(json_object_get(j, "gates")) == 3, "cap JSON: 3 gates");
    json_decref(j);
    snprintf(args, sizeof args, "cap -q %s --tasks ifeval --n 6 --max-new 16 --db '%s' --gate 'ifeval.diff>0.5'",
             models, db);
    CHECK(run(args, &out) == 3 && strstr(out, "tasks.ifeval.paired.diff > 0.5: ") && strstr(out, "FAIL"),
          "a cap gate that fails: exit 3: %s", out);
    free(out);
    snprintf(args, sizeof args, "runs show 2 --db '%s' --json", db);
    CHECK(run(args, &out) == 0 && strstr(out, "\"gates\"") && strstr(out, "ifeval.diff>0.5"),
          "the database row of a cap run keeps its gates");
    free(out);
    snprintf(args, sizeof args, "cap -m /nonexistent.gguf --tasks ifeval --gate 'ifeval.speed>=1'");
    CHECK(run(args, &out) == 2 && strstr(out, "ifeval.speed"), "an unknown cap statistic: exit 2 naming it: %s", out);
    free(out);
    /* smoketest: kl's statistics and GSM8K's in one list */
    snprintf(args, sizeof args, "smoketest --ref " KT_SHARED "/models/stories260K/f32.gguf --arm " KT_SHARED
             "/models/stories260K/q8_0.gguf --n 3 --max-new 12 --no-db --gate 'kld.mean<=1,gsm8k.diff>=0.5'");
    CHECK(run(args, &out) == 3 && strstr(out, "kld.mean <= 1: ") && strstr(out, "tasks.gsm8k.paired.diff >= 0.5: ") &&
              strstr(out, "FAIL"),
          "smoketest: the kl gate and the GSM8K gate printed, the failing one exits 3: %s", out);
    free(out);
    snprintf(args, sizeof args, "smoketest --ref x --arm y --gate 'foo>=1'");
    CHECK(run(args, &out) == 2 && strstr(out, "'foo>=1'"), "smoketest: an unknown statistic is exit 2: %s", out);
    free(out);
    free(json);
    free(db);
}

int main(int argc, char **argv) {
    if (argc < 2) return fprintf(stderr, "usage: test_cap_cli KLDEVAL\n"), 2;
    kldeval = argv[1];
    int st;
    /* IFEval: the reference's own fractions (reference_report.txt) */
    json_t *r = score("ifeval", KT_SHARED "/capability/ifeval/input_response_data_gpt4_20231107_145030.jsonl", &st);
    CHECK(r && frac(r, "prompt_strict") == 417.0 / 541 && frac(r, "instruction_strict") == 698.0 / 834 &&
              frac(r, "prompt_loose") == 431.0 / 541 && frac(r, "instruction_loose") == 714.0 / 834,
          "ifeval fractions %.16g %.16g %.16g %.16g", frac(r, "prompt_strict"), frac(r, "instruction_strict"),
          frac(r, "prompt_loose"), frac(r, "instruction_loose"));
    CHECK(fabs(frac(r, "prompt_strict") - 0.7707948243992606) < 1e-16, "prompt strict as the reference prints it");
    json_decref(r);
    /* both help texts say where IFEval's langdetect profiles come from */
    static const char *const helps[] = {"cap score --help", "cap --help"};
    for (int i = 0; i < 2; i++) {
        char *help = NULL;
        const int rc = run(helps[i], &help);
        CHECK(rc == 0 && help && strstr(help, "KLDEVAL_LANGDETECT_DIR") &&
              strstr(help, "python3-langdetect"), "%s names KLDEVAL_LANGDETECT_DIR", helps[i]);
        free(help);
    }

    /* an IFEval item answered twice (the reference keeps one response per
     * prompt) and a file without responses are errors, not 0/0 or a double count */
    static const struct { const char *name, *text, *want; } bad[] = {
        {"cap-cli-ifeval-dup.jsonl", "{\"key\": 1000, \"response\": \"a\"}\n{\"key\": 1001, \"response\": "
         "\"b\"}\n{\"key\": 1000, \"response\": \"c\"}\n", "line 3: IFEval key 1000 was scored already (line 1)"},
        {"cap-cli-ifeval-empty.jsonl", "\n", "cap-cli-ifeval-empty.jsonl: no responses"},
    };
    for (int i = 0; i < 2; i++) {
        char *bp = tmp_path(bad[i].name), args[1024], *out = NULL;
        kt_write_file(bp, bad[i].text, strlen(bad[i].text));
        snprintf(args, sizeof args, "cap score --task ifeval --responses '%s'", bp);
        const int rc = run(args, &out);
        CHECK(rc == 1 && out && strstr(out, bad[i].want), "%s: exit 1 naming '%s' (%d): %s", bad[i].name,
              bad[i].want, rc, out ? out : "");
        free(out), free(bp);
    }

    /* GSM8K: the reference solutions themselves, and two wrong answers */
    json_t *data = NULL;
    json_error_t je;
    char *gp = tmp_path("cap-cli-gsm8k.jsonl");
    FILE *f = fopen(gp, "w");
    char *text = kt_read_file(KT_SHARED "/capability/gsm8k/test.jsonl", NULL);
    size_t line = 0;
    for (char *p = text; *p; line++) {
        char *nl = strchr(p, '\n');
        if (nl) *nl = '\0';
        data = json_loads(p, 0, &je);
        json_t *o = json_pack("{s:I, s:s}", "index", (json_int_t)line, "response",
                              line < 2 ? "I think it is 123456789." : json_string_value(json_object_get(data, "answer")));
        char *s = json_dumps(o, JSON_COMPACT);
        fprintf(f, "%s\n", s);
        free(s);
        json_decref(o);
        json_decref(data);
        if (!nl) break;
        p = nl + 1;
    }
    fclose(f);
    free(text);
    r = score("gsm8k", gp, &st);
    CHECK(r && json_integer_value(json_object_get(r, "correct")) == 1317 &&
              json_integer_value(json_object_get(r, "n")) == 1319,
          "gsm8k: %lld/%lld correct", (long long)json_integer_value(json_object_get(r, "correct")),
          (long long)json_integer_value(json_object_get(r, "n")));
    json_decref(r);

    /* MMLU: "B" for every test row → the share of B */
    char *mp = tmp_path("cap-cli-mmlu.jsonl");
    f = fopen(mp, "w");
    for (int i = 0; i < 14042; i++) fprintf(f, "{\"index\": %d, \"response\": \"The answer is B.\"}\n", i);
    fclose(f);
    r = score("mmlu", mp, &st);
    CHECK(r && json_real_value(json_object_get(r, "accuracy")) == 3462.0 / 14042,
          "mmlu always-B: %.10g", json_real_value(json_object_get(r, "accuracy")));
    json_t *aa = json_object_get(json_object_get(r, "subjects"), "abstract_algebra");
    CHECK(aa && json_integer_value(json_object_get(aa, "n")) == 100, "per-subject counts");
    json_decref(r);

    /* BFCL: a right call, a wrong value, prose */
    char *bp = tmp_path("cap-cli-bfcl.jsonl");
    f = fopen(bp, "w");
    fprintf(f, "{\"id\": \"simple_python_0\", \"response\": \"[calculate_triangle_area(base=10, height=5)]\"}\n"
               "{\"id\": \"simple_python_0\", \"response\": \"[calculate_triangle_area(base=11, height=5)]\"}\n"
               "{\"id\": \"simple_python_0\", \"response\": \"The area is 25.\"}\n");
    fclose(f);
    r = score("bfcl_simple_python", bp, &st);
    json_t *items = json_object_get(r, "items");
    CHECK(r && json_integer_value(json_object_get(r, "correct")) == 1 &&
              json_is_true(json_object_get(json_array_get(items, 0), "correct")),
          "bfcl: %lld correct", (long long)json_integer_value(json_object_get(r, "correct")));
    json_decref(r);

    /* HumanEval: a right body and an exit-0 trap */
    char *hp = tmp_path("cap-cli-he.jsonl");
    f = fopen(hp, "w");
    fprintf(f, "{\"task_id\": \"HumanEval/2\", \"completion\": \"    return number %% 1.0\\n\"}\n"
               "{\"task_id\": \"HumanEval/2\", \"completion\": \"    import sys\\n    sys.exit(0)\\n\"}\n");
    fclose(f);
    r = score("humaneval", hp, &st);
    items = json_object_get(r, "items");
    CHECK(r && json_integer_value(json_object_get(r, "correct")) == 1 &&
              !strcmp(json_string_value(json_object_get(json_array_get(items, 1), "result")), "failed"),
          "humaneval: right body passes, the exit-0 trap fails");
    json_decref(r);

    /* errors */
    char *out;
    char args[2048];
    snprintf(args, sizeof args, "cap score --task nope --responses '%s'", bp);
    st = run(args, &out);
    CHECK(st == 1 && strstr(out, "unknown task 'nope'"), "unknown task: %d %s", st, out);
    free(out);
    st = run("cap score --task gsm8k", &out);
    CHECK(st == 2 && strstr(out, "need --task and --responses"), "missing flag: %d %s", st, out);
    free(out);
    f = fopen(bp, "w");
    fprintf(f, "{\"index\": 5, \"response\": \"1\"}\n{\"index\": 99999, \"response\": \"1\"}\n");
    fclose(f);
    snprintf(args, sizeof args, "cap score --task gsm8k --responses '%s'", bp);
    st = run(args, &out);
    CHECK(st == 1 && strstr(out, "line 2: 'index' must be an integer in [0, 1319)"), "bad index: %d %s", st, out);
    free(out);
    f = fopen(bp, "w");
    fprintf(f, "{\"index\": 5, \"response\": \"1\"}\n{not json\n");
    fclose(f);
    st = run(args, &out);
    CHECK(st == 1 && strstr(out, ":2: column"), "bad JSON line: %d %s", st, out);
    free(out);
    unlink(gp), unlink(mp), unlink(bp), unlink(hp);
    free(gp), free(mp), free(bp), free(hp);
    test_gates();
    return kt_finish();
}
