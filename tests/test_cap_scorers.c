/* test_cap_scorers.c — the capability scorers against the references'
 * own results (../shared/capability): GSM8K extraction = expected_answers
 * .tsv; IFEval strict/loose = reference_eval_*.jsonl prompt for prompt;
 * BFCL possible answers accept themselves, mutations are rejected; MMLU
 * with a "model" that always prefers B scores the share of B answers; the
 * GSM8K 8-shot prompt is lm-eval-harness's "gsm8k" layout. */
#include "cap/cap.h"
#include "testlib.h"

#include <stdlib.h>

#define CAP KT_SHARED "/capability"

static void test_gsm8k(void) {
    json_t *data;
    kld_error err = {0};
    CHECK_OK(kld_cap_read_jsonl(CAP "/gsm8k/test.jsonl", &data, &err), err);
    char *tsv = kt_read_file(CAP "/gsm8k/expected_answers.tsv", NULL);
    char *line = strchr(tsv, '\n') + 1; /* header */
    size_t n = 0, same = 0;
    while (*line) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        long ix = strtol(line, NULL, 10);
        const char *want = strchr(line, '\t') + 1;
        char got[128];
        const char *ans = json_string_value(json_object_get(json_array_get(data, (size_t)ix), "answer"));
        bool ok = kld_gsm8k_extract(ans, got, sizeof got) && !strcmp(got, want);
        if (!ok && n - same < 5) fprintf(stderr, "gsm8k %ld: got '%s' want '%s'\n", ix, got, want);
        same += ok;
        CHECK(kld_gsm8k_correct(ans, want), "gsm8k %ld: the reference answer is not correct", ix);
        n++;
        if (!nl) break;
        line = nl + 1;
    }
    CHECK(n == 1319 && same == n, "gsm8k extraction: %zu/%zu equal expected_answers.tsv", same, n);
    /* without ####: the last number; commas; negatives; decimals */
    char got[64];
    CHECK(kld_gsm8k_extract("So she has 1,234 apples and then 56.", got, sizeof got) && !strcmp(got, "56"), "last number: %s", got);
    CHECK(kld_gsm8k_extract("The total is $1,234.50 in all", got, sizeof got) && !strcmp(got, "1234.50"), "commas: %s", got);
    CHECK(kld_gsm8k_extract("#### -7\n", got, sizeof got) && !strcmp(got, "-7"), "negative: %s", got);
    CHECK(kld_gsm8k_extract("12 then #### 3 then 99", got, sizeof got) && !strcmp(got, "3"), "####: %s", got);
    CHECK(!kld_gsm8k_extract("no number here", got, sizeof got), "no number");
    CHECK(kld_gsm8k_correct("the answer is 18.00", "#### 18"), "18.00 == 18");
    CHECK(!kld_gsm8k_correct("the answer is 17", "#### 18"), "17 != 18");
    CHECK(!kld_gsm8k_correct("", "#### 18"), "empty response");
    free(tsv);
    json_decref(data);
}

static void test_mmlu(void) {
    kld_mmlu_set test, dev;
    kld_error err = {0};
    CHECK_OK(kld_mmlu_load(CAP "/mmlu", "test", &test, &err), err);
    CHECK_OK(kld_mmlu_load(CAP "/mmlu", "dev", &dev, &err), err);
    CHECK(test.n == 14042 && dev.n == 285, "mmlu rows: test %zu dev %zu", test.n, dev.n);
    size_t count[4] = {0}, correct = 0;
    const float prefers_b[4] = {0.1f, 2.0f, 0.3f, -1.0f};
    for (size_t i = 0; i < test.n; i++) {
        count[test.items[i].answer]++;
        correct += kld_mmlu_pick(prefers_b) == test.items[i].answer;
    }
    CHECK(count[0] == 3222 && count[1] == 3462 && count[2] == 3582 && count[3] == 3776,
          "answer counts %zu %zu %zu %zu", count[0], count[1], count[2], count[3]);
    CHECK(correct == 3462, "always-B scores %zu, the share of B is 3462/14042", correct);
    const float tie[4] = {1, 1, 1, 1};
    CHECK(kld_mmlu_pick(tie) == 0, "ties go to the lower letter");
    /* the 5-shot prompt, derived by hand from the original evaluation */
    char *p = kld_mmlu_prompt(&dev, &test.items[0], 5);
    static const char head[] = "The following are multiple choice questions (with answers) about  abstract algebra.\n\n";
    CHECK(p && !strncmp(p, head, sizeof head - 1),
          "prompt header: %.90s", p ? p : "(null)");
    size_t shots = 0;
    for (const char *q = p; q && (q = strstr(q, "\nAnswer:")); q++) shots++;
    CHECK(shots == 6, "5 examples + the question: %zu 'Answer:'", shots);
    size_t pl = p ? strlen(p) : 0;
    CHECK(pl > 8 && !strcmp(p + pl - 8, "\nAnswer:"), "the prompt ends in 'Answer:'");
    free(p);
    kld_mmlu_free(&test);
    kld_mmlu_free(&dev);
}

static json_t *read_jsonl(const char *path) {
    json_t *a = NULL;
    kld_error err = {0};
    CHECK_OK(kld_cap_read_jsonl(path, &a, &err), err);
    return a;
}

static void test_ifeval(void) {
    json_t *in = read_jsonl(CAP "/ifeval/input_data.jsonl");
    json_t *resp = read_jsonl(CAP "/ifeval/input_response_data_gpt4_20231107_145030.jsonl");
    json_t *ref[2] = {read_jsonl(CAP "/ifeval/reference_eval_strict.jsonl"),
                      read_jsonl(CAP "/ifeval/reference_eval_loose.jsonl")};
    if (!in || !resp || !ref[0] || !ref[1]) return;
    for (int loose = 0; loose < 2; loose++) {
        size_t same_prompts = 0, prompt_ok = 0, instr_ok = 0, n_instr = 0, shown = 0;
        for (size_t i = 0; i < json_array_size(in); i++) {
            json_t *item = json_array_get(in, i), *want = json_array_get(ref[loose], i);
            const char *text = json_string_value(json_object_get(json_array_get(resp, i), "response"));
            bool f[64];
            kld_error err = {0};
            CHECK_OK(kld_ifeval_check(item, text, loose, f, 64, &err), err);
            json_t *wl = json_object_get(want, "follow_instruction_list");
            json_t *ids = json_object_get(item, "instruction_id_list");
            bool same = true, all = true;
            long long key = json_integer_value(json_object_get(item, "key"));
            for (size_t k = 0; k < json_array_size(wl); k++) {
                all = all && f[k];
                instr_ok += f[k];
                if (f[k] != json_is_true(json_array_get(wl, k))) {
                    same = false;
                    if (shown++ < 40)
                        fprintf(stderr, "ifeval %s key %lld %s: got %d, reference %d\n",
                                loose ? "loose" : "strict",
                                (long long)json_integer_value(json_object_get(item, "key")),
                                json_string_value(json_array_get(ids, k)), f[k], !f[k]);
                }
            }
            n_instr += json_array_size(wl);
            prompt_ok += all;
            same_prompts += same;
            CHECK(same, "ifeval key %lld differs from the reference", key);
        }
        CHECK(same_prompts == 541, "ifeval %s: %zu/541 prompts identical to the reference",
              loose ? "loose" : "strict", same_prompts);
        size_t want_p = loose ? 431 : 417, want_i = loose ? 714 : 698;
        CHECK(prompt_ok == want_p && instr_ok == want_i && n_instr == 834,
              "ifeval %s: prompt %zu/541 (reference %zu), instruction %zu/%zu (reference %zu)",
              loose ? "loose" : "strict", prompt_ok, want_p, instr_ok, n_instr, want_i);
    }
    json_decref(in);
    json_decref(resp);
    json_decref(ref[0]);
    json_decref(ref[1]);
}

/* Malformed task files and items: errors that name the file, line or field. */
static void test_bad_inputs(void) {
    char dir[512], path[700];
    kld_error err = {0};
    snprintf(dir, sizeof dir, "%s/cap-bad-mmlu", kt_build_dir());
    snprintf(path, sizeof path, "mkdir -p '%s/test'", dir);
    CHECK(system(path) == 0, "mkdir");
    static const struct { const char *csv, *want; } bad_csv[] = {
        {"\"unterminated,A,B,C,D,A\n", "malformed CSV"},
        {"q,A,B,C,D\n", "expected 6 fields"},
        {"q,A,B,C,D,E\n", "answer 'E' is not A-D"},
        {"\"q\"x,A,B,C,D,A\n", "malformed CSV"},
    };
    for (size_t i = 0; i < sizeof bad_csv / sizeof bad_csv[0]; i++) {
        snprintf(path, sizeof path, "%s/test/bad_test.csv", dir);
        kt_write_file(path, bad_csv[i].csv, strlen(bad_csv[i].csv));
        kld_mmlu_set s;
        kld_status st = kld_mmlu_load(dir, "test", &s, &err);
        CHECK(st == KLD_ERR_FORMAT && strstr(err.msg, bad_csv[i].want) && strstr(err.msg, "bad_test.csv"),
              "bad csv %zu: %s", i, err.msg);
    }
    /* a quoted field with a comma, a quote and a newline is fine */
    const char *good = "\"a, \"\"b\"\"\nc\",A,B,C,D,B\n";
    kt_write_file(path, good, strlen(good));
    kld_mmlu_set s;
    CHECK_OK(kld_mmlu_load(dir, "test", &s, &err), err);
    CHECK(s.n == 1 && !strcmp(s.items[0].question, "a, \"b\"\nc") && s.items[0].answer == 1, "quoted CSV field");
    kld_mmlu_free(&s);
    CHECK(kld_mmlu_load(dir, "nosuch", &s, &err) == KLD_ERR_IO && strstr(err.msg, "nosuch"), "missing split: %s", err.msg);

    snprintf(path, sizeof path, "%s/cap-bad.jsonl", kt_build_dir());
    const char *t1 = "{\"a\": 1}\n\n[1]\n", *t2 = "{\"a\": }\n";
    kt_write_file(path, t1, strlen(t1));
    json_t *a = NULL;
    CHECK(kld_cap_read_jsonl(path, &a, &err) == KLD_ERR_FORMAT && strstr(err.msg, ":3: not a JSON object"),
          "non-object line: %s", err.msg);
    kt_write_file(path, t2, strlen(t2));
    CHECK(kld_cap_read_jsonl(path, &a, &err) == KLD_ERR_FORMAT && strstr(err.msg, ":1: column"), "bad JSON: %s", err.msg);
    snprintf(path, sizeof path, "%s/cap-bad.jsonl.gz", kt_build_dir());
    kt_write_file(path, "\x1f\x8b\x08\x00garbage-garbage", 19);
    CHECK(kld_cap_read_jsonl(path, &a, &err) != KLD_OK && strstr(err.msg, "cap-bad.jsonl.gz"), "corrupt gzip: %s", err.msg);
    CHECK(kld_cap_read_jsonl("/nonexistent/x.jsonl", &a, &err) == KLD_ERR_IO, "missing file");

    json_error_t je;
    json_t *item = json_loads("{\"instruction_id_list\": [\"keywords:nope\"], \"kwargs\": [{}]}", 0, &je);
    bool f[4];
    CHECK(kld_ifeval_check(item, "text", false, f, 4, &err) == KLD_ERR_UNSUPPORTED && strstr(err.msg, "keywords:nope"),
          "unknown instruction: %s", err.msg);
    json_decref(item);
    item = json_loads("{\"instruction_id_list\": [\"length_constraints:number_words\"], \"kwargs\": "
                      "[{\"relation\": \"at least\", \"num_words\": \"ten\"}]}", 0, &je);
    CHECK(kld_ifeval_check(item, "text", false, f, 4, &err) == KLD_ERR_FORMAT && strstr(err.msg, "num_words"),
          "bad kwarg: %s", err.msg);
    json_decref(item);
    item = json_loads("{\"instruction_id_list\": [\"punctuation:no_comma\"], \"kwargs\": []}", 0, &je);
    CHECK(kld_ifeval_check(item, "text", false, f, 4, &err) == KLD_ERR_FORMAT, "kwargs length: %s", err.msg);
    json_decref(item);
    /* an empty response follows nothing (the reference's response.strip() guard) */
    item = json_loads("{\"instruction_id_list\": [\"punctuation:no_comma\"], \"kwargs\": [{}]}", 0, &je);
    CHECK_OK(kld_ifeval_check(item, "  \n ", true, f, 4, &err), err);
    CHECK(!f[0], "a blank response fails");
    json_decref(item);

    json_t *q = json_loads("{\"id\": \"x\", \"function\": []}", 0, &je);
    json_t *ans = json_loads("{\"id\": \"x\", \"ground_truth\": [{\"f\": {}}]}", 0, &je);
    bool ok;
    CHECK(kld_bfcl_check(q, ans, "python", "[f()]", &ok, NULL, 0, &err) == KLD_ERR_FORMAT && strstr(err.msg, "'f'"),
          "BFCL entry without its function: %s", err.msg);
    json_decref(q);
    json_decref(ans);
}

/* The 8-shot completion prompt: a hand-written rendering of two exemplars,
 * then the shipped data's eight (each worked answer with its "#### N"). */
static void test_gsm8k_fewshot(void) {
    json_t *two = json_loads("[{\"question\": \"1+1?\", \"answer\": \"One and one <<1+1=2>>2.\\n#### 2\"},"
                             " {\"question\": \"3*3?\", \"answer\": \"#### 9\"}, {\"question\": \"unused\"}]", 0, NULL);
    char *p = kld_gsm8k_fewshot_prompt(two, 2, "2+5?");
    const char *want = "Question: 1+1?\nAnswer: One and one <<1+1=2>>2.\n#### 2\n\n"
                       "Question: 3*3?\nAnswer: #### 9\n\n"
                       "Question: 2+5?\nAnswer:";
    CHECK(p && !strcmp(p, want), "gsm8k 2-shot prompt: '%s'", p ? p : "(null)");
    free(p);
    json_decref(two);
    json_t *data;
    kld_error err = {0};
    CHECK_OK(kld_cap_read_jsonl(CAP "/gsm8k/test.jsonl", &data, &err), err);
    p = kld_gsm8k_fewshot_prompt(data, KLD_GSM8K_SHOTS, "Q?");
    size_t q = 0, marks = 0;
    for (const char *c = p; c && (c = strstr(c, "Question: ")); c++) q++;
    for (const char *c = p; c && (c = strstr(c, "\n#### ")); c++) marks++;
    const char *first = json_string_value(json_object_get(json_array_get(data, 0), "question"));
    const char *tail = "\n\nQuestion: Q?\nAnswer:";
    CHECK(p && q == 9 && marks == 8 && !strncmp(p + 10, first, strlen(first)) &&
              strlen(p) > strlen(tail) && !strcmp(p + strlen(p) - strlen(tail), tail),
          "gsm8k 8-shot prompt: %zu questions, %zu answers", q, marks);
    free(p);
    json_decref(data);
}

int main(void) {
    test_gsm8k_fewshot();
    test_bad_inputs();
    test_gsm8k();
    test_mmlu();
    test_ifeval();
    return kt_finish();
}
