/* test_cap_run.c — `kldeval cap -m MODEL --arm MODEL` end to end on the
 * shipped tiny models (stories260K, aidreams260K): every task runs (the
 * scores are near chance; what is checked is that each stage produces
 * items; HashHop generates its own problem), the JSON report is byte-identical across runs, thread counts
 * and --batch 1 / 3 / 8 (greedy decoding is bit-exact, several prompts in flight or one at a time), the
 * paired counts agree with the items, the Capability_Score is the unweighted mean of the task accuracies,
 * MMLU per subject and BFCL per category (simple python/java/javascript and multiple, n items each; the
 * task's accuracy BFCL's summary) agree with the items, and bad flags are errors. */
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

/* Each group (MMLU subject, BFCL category) counts exactly the task's items
 * that name it, for both models, and its paired counts match theirs. */
static void check_groups(const json_t *tj, const char *groups_key, const char *field) {
    const json_t *groups = json_object_get(tj, groups_key);
    CHECK(json_object_size(groups) >= 1, "%s: %zu groups", groups_key, json_object_size(groups));
    size_t total[2] = {0, 0};
    const char *name;
    json_t *g;
    json_object_foreach((json_t *)groups, name, g) {
        size_t c[2] = {0, 0}, n[2] = {0, 0}, n01 = 0, n10 = 0;
        const json_t *items[2] = {json_object_get(json_object_get(tj, "ref"), "items"),
                                  json_object_get(json_object_get(tj, "arm"), "items")};
        for (size_t i = 0; i < json_array_size(items[0]); i++) {
            bool ok[2];
            const char *v = json_string_value(json_object_get(json_array_get(items[0], i), field));
            if (!v || strcmp(v, name)) continue;
            for (int s = 0; s < 2; s++) {
                ok[s] = json_is_true(json_object_get(json_array_get(items[s], i), "correct"));
                c[s] += ok[s];
                n[s]++;
            }
            n01 += ok[1] && !ok[0];
            n10 += ok[0] && !ok[1];
        }
        for (int s = 0; s < 2; s++) {
            const json_t *a = json_object_get(g, s ? "arm" : "ref");
            CHECK(json_integer_value(json_object_get(a, "n")) == (json_int_t)n[s] &&
                      json_integer_value(json_object_get(a, "correct")) == (json_int_t)c[s] &&
                      fabs(json_real_value(json_object_get(a, "accuracy")) - (n[s] ? (double)c[s] / n[s] : 0)) < 1e-15 &&
                      json_object_get(a, "items") == NULL,
                  "%s %s %s: %zu/%zu", groups_key, name, s ? "arm" : "ref", c[s], n[s]);
            total[s] += n[s];
        }
        const json_t *p = json_object_get(g, "paired");
        CHECK(json_integer_value(json_object_get(p, "arm_only_right")) == (json_int_t)n01 &&
                  json_integer_value(json_object_get(p, "ref_only_right")) == (json_int_t)n10,
              "%s %s: paired counts", groups_key, name);
    }
    CHECK(total[0] == json_array_size(json_object_get(json_object_get(tj, "ref"), "items")) && total[1] == total[0],
          "%s: the groups cover every item (%zu)", groups_key, total[0]);
}

/* BFCL: the four v4 categories, the items spread over each category's file
 * (simple_javascript has 50 entries: items 0, 12, 24, 36), and the task
 * accuracy = mean(mean(simple_*), multiple). */
static void check_bfcl(const json_t *tj) {
    static const char *const cats[] = {"simple_python", "simple_java", "simple_javascript", "multiple"};
    const json_t *groups = json_object_get(tj, "categories");
    CHECK(json_object_size(groups) == 4, "bfcl: 4 categories (%zu)", json_object_size(groups));
    for (int s = 0; s < 2; s++) {
        double acc[4];
        for (int c = 0; c < 4; c++)
            acc[c] = json_real_value(json_object_get(json_object_get(json_object_get(groups, cats[c]), s ? "arm" : "ref"), "accuracy"));
        double want = ((acc[0] + acc[1] + acc[2]) / 3 + acc[3]) / 2;
        CHECK(fabs(json_real_value(json_object_get(json_object_get(tj, s ? "arm" : "ref"), "accuracy")) - want) < 1e-15,
              "bfcl %s: summary accuracy %g", s ? "arm" : "ref", want);
    }
    const json_t *items = json_object_get(json_object_get(tj, "ref"), "items");
    static const json_int_t js_items[4] = {0, 12, 24, 36};
    for (int i = 0; i < 4; i++) {
        const json_t *r = json_array_get(items, 8 + (size_t)i);
        CHECK(!strcmp(json_string_value(json_object_get(r, "category")), "simple_javascript") &&
                  json_integer_value(json_object_get(r, "item")) == js_items[i],
              "bfcl item %d: simple_javascript line %lld", 8 + i, (long long)json_integer_value(json_object_get(r, "item")));
    }
}

#define MODELS "-m " KT_SHARED "/models/stories260K/f32.gguf --arm " KT_SHARED "/models/aidreams260K/f32.gguf"

int main(int argc, char **argv) {
    if (argc < 2) return fprintf(stderr, "usage: test_cap_run KLDEVAL\n"), 2;
    kldeval = argv[1];
    char j1[512], j2[512], args[2048], *out;
    snprintf(j1, sizeof j1, "%s/cap-run-1.json", kt_build_dir());
    snprintf(j2, sizeof j2, "%s/cap-run-2.json", kt_build_dir());
    snprintf(args, sizeof args, "cap -q " MODELS " --n 4 --max-new 24 --threads 2 --batch 8 --json '%s'", j1);
    int st = run(args, &out);
    CHECK(st == 0 && strstr(out, "Capability_Score (unweighted mean): ref"), "cap run: %d %s", st, out);
    free(out);
    size_t n1 = 0, n2 = 0;
    char *a = kt_read_file(j1, &n1), *b;
    /* one at a time on 1 thread; 3 in flight (finished prompts replaced by waiting ones) on 2 */
    static const char *const variants[] = {"--threads 1 --batch 1", "--threads 2 --batch 3", "--threads 1 --batch 8"};
    for (int v = 0; v < 3; v++) {
        snprintf(args, sizeof args, "cap -q " MODELS " --n 4 --max-new 24 %s --json '%s'", variants[v], j2);
        st = run(args, &out);
        CHECK(st == 0, "cap run (%s): %d %s", variants[v], st, out);
        free(out);
        b = kt_read_file(j2, &n2);
        CHECK(n1 == n2 && !memcmp(a, b, n1), "%s: the report is byte-identical to 2 threads, batch 8 (%zu, %zu bytes)",
              variants[v], n1, n2);
        free(b);
    }
    free(a);
    st = run("cap -m " KT_SHARED "/models/stories260K/f32.gguf --batch 0", &out);
    CHECK(st == 2, "--batch 0: %d %s", st, out);
    free(out);

    json_error_t je;
    json_t *rep = json_load_file(j1, 0, &je);
    CHECK(rep != NULL, "report parses: %s", je.text);
    static const char *const tasks[] = {"mmlu", "gsm8k", "ifeval", "humaneval", "bfcl", "hashhop"};
    double mean[2] = {0, 0};
    for (int t = 0; t < 6; t++) {
        json_t *tj = json_object_get(json_object_get(rep, "tasks"), tasks[t]);
        CHECK(tj != NULL, "task %s in the report", tasks[t]);
        json_t *side[2] = {json_object_get(tj, "ref"), json_object_get(tj, "arm")};
        size_t n01 = 0, n10 = 0;
        for (int s = 0; s < 2; s++) {
            json_t *items = json_object_get(side[s], "items");
            /* HashHop: one problem as large as the 128-token context allows, so
             * fewer chains (queries) than n */
            size_t want = !strcmp(tasks[t], "bfcl") ? 16 : strcmp(tasks[t], "hashhop") ? 4
                                                            : json_array_size(json_object_get(side[0], "items"));
            CHECK(json_array_size(items) == want && want >= 1, "%s %s: %zu items (%zu)", tasks[t], s ? "arm" : "ref",
                  want, json_array_size(items));
            size_t c = 0;
            for (size_t i = 0; i < json_array_size(items); i++) {
                json_t *it = json_object_get(json_array_get(items, i), "correct");
                c += json_is_true(it);
                json_t *other = json_object_get(json_array_get(json_object_get(side[!s], "items"), i), "correct");
                if (s == 1) {
                    n01 += json_is_true(it) && !json_is_true(other);
                    n10 += !json_is_true(it) && json_is_true(other);
                }
                if (t > 0 && s == 0 && i == 0)
                    CHECK(json_string_length(json_object_get(json_array_get(items, i), "response")) > 0,
                          "%s: the model generated text", tasks[t]);
            }
            CHECK(json_integer_value(json_object_get(side[s], "correct")) == (json_int_t)c, "%s: correct count", tasks[t]);
            mean[s] += json_real_value(json_object_get(side[s], "accuracy")) / 6;
        }
        json_t *p = json_object_get(tj, "paired");
        CHECK(json_integer_value(json_object_get(p, "arm_only_right")) == (json_int_t)n01 &&
                  json_integer_value(json_object_get(p, "ref_only_right")) == (json_int_t)n10,
              "%s: paired counts", tasks[t]);
        /* McNemar's exact test on the flips: the two-sided binomial of the discordant items */
        double want = 1.0;
        if (n01 != n10) {
            const size_t nd = n01 + n10, k = n01 < n10 ? n01 : n10;
            double tail = 0, c = 1;
            for (size_t i = 0; i <= k; i++) tail += c, c = c * (double)(nd - i) / (double)(i + 1);
            want = fmin(1.0, 2.0 * tail / pow(2.0, (double)nd));
        }
        CHECK(fabs(json_real_value(json_object_get(p, "mcnemar_p")) - want) < 1e-12,
              "%s: McNemar p %g of %zu/%zu flips (%g)", tasks[t], json_real_value(json_object_get(p, "mcnemar_p")),
              n01, n10, want);
    }
    check_groups(json_object_get(json_object_get(rep, "tasks"), "mmlu"), "subjects", "subject");
    check_groups(json_object_get(json_object_get(rep, "tasks"), "bfcl"), "categories", "category");
    check_bfcl(json_object_get(json_object_get(rep, "tasks"), "bfcl"));
    json_t *cs = json_object_get(rep, "capability_score");
    CHECK(fabs(json_real_value(json_object_get(cs, "ref")) - mean[0]) < 1e-12 &&
              fabs(json_real_value(json_object_get(cs, "arm")) - mean[1]) < 1e-12,
          "Capability_Score = mean of the task accuracies (%g %g)", mean[0], mean[1]);
    /* MMLU on tiny models picks by logits: the choices are letters */
    json_t *mi = json_object_get(json_object_get(json_object_get(json_object_get(rep, "tasks"), "mmlu"), "ref"), "items");
    const char *ch = json_string_value(json_object_get(json_array_get(mi, 0), "choice"));
    CHECK(ch && strlen(ch) == 1 && ch[0] >= 'A' && ch[0] <= 'D', "mmlu choice '%s'", ch ? ch : "");
    json_decref(rep);

    st = run("cap -m " KT_SHARED "/models/stories260K/f32.gguf --tasks gsm8k,hashhopp", &out);
    CHECK(st == 1 && strstr(out, "unknown task 'hashhopp'"), "unknown task: %d %s", st, out);
    free(out);
    /* without langdetect's profiles an IFEval run stops before generating anything */
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "KLDEVAL_LANGDETECT_DIR=/nonexistent-langdetect '%s' cap --no-db -m " KT_SHARED
             "/models/stories260K/f32.gguf --tasks gsm8k,ifeval --n 541 --max-new 4 2>&1", kldeval);
    st = kt_run_capture(cmd, &out);
    CHECK(st == 1 && out && strstr(out, "/nonexistent-langdetect/utils/messages.properties") &&
          strstr(out, "python3-langdetect") && !strstr(out, "cap: gsm8k ..."), "no langdetect data: exit 1 "
          "before any task runs (%d): %s", st, out ? out : "");
    free(out);
    st = run("cap --tasks gsm8k", &out);
    CHECK(st == 2 && strstr(out, "need -m MODEL"), "no model: %d %s", st, out);
    free(out);
    st = run("cap -m " KT_SHARED "/models/stories260K/f32.gguf --n 0", &out);
    CHECK(st == 2, "--n 0: %d %s", st, out);
    free(out);
    /* the smoketest: the KL run, then GSM8K paired */
    st = run("smoketest --no-db --ref " KT_SHARED "/models/stories260K/f32.gguf --arm " KT_SHARED
             "/models/stories260K/f16.gguf --n 2 --max-new 8 --threads 2", &out);
    CHECK(st == 0 && strstr(out, "== KL: kldeval kl --ref") && strstr(out, "KLD by context position") &&
              strstr(out, "== GSM8K-2 (greedy, paired) ==") && strstr(out, "gsm8k  ref 0.0000 ± 0.0000 (0/2)"),
          "smoketest: %d %.2000s", st, out);
    free(out);
    st = run("smoketest --ref " KT_SHARED "/models/stories260K/f32.gguf", &out);
    CHECK(st == 2 && strstr(out, "need --ref and --arm"), "smoketest without --arm: %d %s", st, out);
    free(out);
    unlink(j1);
    unlink(j2);
    return kt_finish();
}
