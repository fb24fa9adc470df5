/* cap_report.c — the report of a capability run built from its units
 * (units.h): per task the accuracy ± standard error of each model, the
 * paired difference on the same items (mean of arm − ref per item, its
 * standard error, McNemar's discordant counts), MMLU per subject, BFCL per
 * category, and the Capability_Score (the unweighted mean of the task
 * accuracies, the seed's definition).
 *
 * BFCL's task accuracy is the leaderboard's non-live AST summary over the
 * categories run: the unweighted mean of "simple" (itself the unweighted
 * mean of simple_python, simple_java, simple_javascript) and "multiple",
 * so Python's 400 items do not outweigh the other languages. Its standard
 * error (and the paired one) combines the categories' as independent:
 * sqrt(sum w_c^2 se_c^2). "correct" and "n" stay the pooled counts.
 *
 * With --samples S > 1 an item scores the fraction of its S responses that
 * were right: accuracies are the mean item score (the mean accuracy over
 * samples), HumanEval adds pass@1 and (S >= 10) pass@10. */
#include "cap/cap.h"
#include "cap/units.h"
#include "eval/stats.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

const char *const kld_cap_bfcl_categories[4] = {"simple_python", "simple_java", "simple_javascript",
                                                "multiple"};

void kld_cap_units_free(kld_cap_unit *u, size_t n) {
    for (size_t i = 0; u && i < n; i++)
        for (int a = 0; a < 2; a++) {
            json_decref(u[i].items[a]);
            json_decref(u[i].pos[a]);
        }
}

/* An item's score: its "score" (the fraction of its samples that were
 * right, --samples > 1), else 1 or 0 by "correct". */
static double item_score(const json_t *items, size_t i) {
    const json_t *r = json_array_get(items, i), *sc = json_object_get(r, "score");
    return sc ? json_number_value(sc) : json_is_true(json_object_get(r, "correct")) ? 1.0 : 0.0;
}

/* Accuracy: with samples the mean item score, its standard error the
 * items' sd / sqrt(n), "correct" the correct responses of n_responses;
 * else the count of n. */
static json_t *acc_json(const json_t *items) {
    size_t n = json_array_size(items), correct = 0;
    const json_t *samples = json_object_get(json_array_get(items, 0), "samples");
    if (!samples) {
        for (size_t i = 0; i < n; i++) correct += item_score(items, i) == 1.0;
        return json_pack("{s:f, s:f, s:I, s:I}", "accuracy", n ? (double)correct / (double)n : 0.0, "stderr",
                         kld_cap_stderr(correct, n), "correct", (json_int_t)correct, "n", (json_int_t)n);
    }
    double mean = 0, var = 0;
    for (size_t i = 0; i < n; i++) {
        mean += item_score(items, i);
        correct += (size_t)json_integer_value(json_object_get(json_array_get(items, i), "n_correct"));
    }
    mean = n ? mean / (double)n : 0;
    for (size_t i = 0; i < n; i++) var += (item_score(items, i) - mean) * (item_score(items, i) - mean);
    const double se = n > 1 ? sqrt(var / (double)(n - 1) / (double)n) : 0;
    return json_pack("{s:f, s:f, s:I, s:I, s:O, s:I}", "accuracy", mean, "stderr", se, "correct", (json_int_t)correct,
                     "n", (json_int_t)n, "samples", samples, "n_responses",
                     (json_int_t)n * json_integer_value(samples));
}

/* HumanEval with samples: {"1": pass@1, "10": pass@10 when n >= 10}, the
 * unbiased estimator averaged over the items. */
static json_t *pass_at_k_json(const json_t *items) {
    const size_t S = (size_t)json_integer_value(json_object_get(json_array_get(items, 0), "samples"));
    const size_t n = json_array_size(items);
    json_t *o = json_object();
    for (size_t k = 1; k <= S && k <= 10; k += 9) {
        double sum = 0;
        for (size_t i = 0; i < n; i++)
            sum += kld_cap_pass_at_k(S, (size_t)json_integer_value(json_object_get(json_array_get(items, i), "n_correct")), k);
        char key[8];
        snprintf(key, sizeof key, "%zu", k);
        json_object_set_new(o, key, json_real(n ? sum / (double)n : 0.0));
    }
    return o;
}

/* Paired on the same items (the first min(n_ref, n_arm)). */
static json_t *paired_json(const json_t *ref, const json_t *arm) {
    size_t n = json_array_size(ref) < json_array_size(arm) ? json_array_size(ref) : json_array_size(arm);
    size_t n01 = 0, n10 = 0;
    double mean = 0, var = 0;
    for (size_t i = 0; i < n; i++) {
        const double d = item_score(arm, i) - item_score(ref, i);
        n01 += d > 0;
        n10 += d < 0;
        mean += d;
    }
    mean = n ? mean / (double)n : 0;
    for (size_t i = 0; i < n; i++) {
        double d = item_score(arm, i) - item_score(ref, i) - mean;
        var += d * d;
    }
    double se = n > 1 ? sqrt(var / (double)(n - 1) / (double)n) : 0;
    /* flips: wrong -> right (arm only) and right -> wrong (ref only); McNemar's exact test on them */
    return json_pack("{s:f, s:f, s:I, s:I, s:I, s:f}", "diff", mean, "stderr", se, "arm_only_right", (json_int_t)n01,
                     "ref_only_right", (json_int_t)n10, "n", (json_int_t)n, "mcnemar_p", kld_sign_test_p(n01, n10));
}

/* {ref, arm, paired} of items (no per-item records). */
static json_t *group_json(json_t *const items[2], int n_arms) {
    json_t *g = json_object();
    json_object_set_new(g, "ref", acc_json(items[0]));
    if (n_arms == 2) {
        json_object_set_new(g, "arm", acc_json(items[1]));
        json_object_set_new(g, "paired", paired_json(items[0], items[1]));
    }
    return g;
}

/* The items split by the string field `key` (MMLU "subject", BFCL
 * "category"), groups in order of first appearance. */
static json_t *by_key(json_t *const items[2], int n_arms, const char *key) {
    json_t *groups = json_object();
    for (size_t i = 0; i < json_array_size(items[0]); i++) {
        const char *name = json_string_value(json_object_get(json_array_get(items[0], i), key));
        if (!name || json_object_get(groups, name)) continue;
        json_t *sub[2] = {json_array(), json_array()};
        for (int a = 0; a < n_arms; a++)
            for (size_t j = 0; j < json_array_size(items[a]); j++) {
                json_t *r = json_array_get(items[a], j);
                const char *v = json_string_value(json_object_get(r, key));
                if (v && !strcmp(v, name)) json_array_append(sub[a], r);
            }
        json_object_set_new(groups, name, group_json(sub, n_arms));
        json_decref(sub[0]);
        json_decref(sub[1]);
    }
    return groups;
}

static double num(const json_t *o, const char *a, const char *b) {
    return json_number_value(json_object_get(json_object_get(o, a), b));
}

/* BFCL's summary (see the file comment) written over the task's pooled
 * accuracy, stderr and paired difference. */
static void bfcl_summary(json_t *tj, const json_t *cats, int n_arms) {
    int n_simple = 0, n_multiple = 0;
    const char *k;
    json_t *c;
    json_object_foreach((json_t *)cats, k, c) {
        if (!strncmp(k, "simple_", 7)) n_simple++;
        else n_multiple++;
    }
    const int n_groups = (n_simple > 0) + (n_multiple > 0);
    if (!n_groups) return;
    double acc[2] = {0, 0}, var[2] = {0, 0}, diff = 0, dvar = 0;
    json_object_foreach((json_t *)cats, k, c) {
        double w = 1.0 / n_groups / (!strncmp(k, "simple_", 7) ? n_simple : n_multiple);
        for (int a = 0; a < n_arms; a++) {
            const char *side = a ? "arm" : "ref";
            acc[a] += w * num(c, side, "accuracy");
            var[a] += w * w * num(c, side, "stderr") * num(c, side, "stderr");
        }
        if (n_arms == 2) {
            diff += w * num(c, "paired", "diff");
            dvar += w * w * num(c, "paired", "stderr") * num(c, "paired", "stderr");
        }
    }
    for (int a = 0; a < n_arms; a++) {
        json_t *side = json_object_get(tj, a ? "arm" : "ref");
        json_object_set_new(side, "accuracy", json_real(acc[a]));
        json_object_set_new(side, "stderr", json_real(sqrt(var[a])));
    }
    if (n_arms == 2) {
        json_t *p = json_object_get(tj, "paired");
        json_object_set_new(p, "diff", json_real(diff));
        json_object_set_new(p, "stderr", json_real(sqrt(dvar)));
    }
}

/* One task from its consecutive units u[0..n-1]. */
static json_t *task_json(const kld_cap_unit *u, size_t n, int n_arms) {
    json_t *items[2] = {json_array(), json_array()};
    for (size_t i = 0; i < n; i++)
        for (int a = 0; a < n_arms; a++) json_array_extend(items[a], u[i].items[a]);
    json_t *tj = json_object();
    for (int a = 0; a < n_arms; a++) {
        json_t *side = acc_json(items[a]);
        if (!strcmp(u[0].task, "humaneval") && json_object_get(side, "samples"))
            json_object_set_new(side, "pass_at_k", pass_at_k_json(items[a]));
        json_object_set(side, "items", items[a]);
        json_object_set_new(tj, a ? "arm" : "ref", side);
    }
    if (n_arms == 2) json_object_set_new(tj, "paired", paired_json(items[0], items[1]));
    if (!strcmp(u[0].task, "mmlu")) json_object_set_new(tj, "subjects", by_key(items, n_arms, "subject"));
    if (!strcmp(u[0].task, "bfcl")) {
        json_t *cats = by_key(items, n_arms, "category");
        bfcl_summary(tj, cats, n_arms);
        json_object_set_new(tj, "categories", cats);
    }
    json_decref(items[0]);
    json_decref(items[1]);
    return tj;
}

json_t *kld_cap_build_report(const kld_cap_unit *u, size_t n_units, int n_arms, json_t *head,
                             json_t *arm, bool interrupted, json_t *config) {
    json_t *rep = head, *tasks = json_object();
    double score[2] = {0, 0};
    int n_tasks = 0;
    for (size_t i = 0; i < n_units;) {
        size_t j = i + 1;
        while (j < n_units && !strcmp(u[j].task, u[i].task)) j++;
        json_t *tj = task_json(u + i, j - i, n_arms);
        for (int a = 0; a < n_arms; a++) score[a] += num(tj, a ? "arm" : "ref", "accuracy");
        json_object_set_new(tasks, u[i].task, tj);
        n_tasks++;
        i = j;
    }
    json_object_set_new(rep, "tasks", tasks);
    if (arm) json_object_set_new(rep, "arm", arm);
    json_t *cs = json_pack("{s:f}", "ref", n_tasks ? score[0] / n_tasks : 0.0);
    if (n_arms == 2) {
        json_object_set_new(cs, "arm", json_real(n_tasks ? score[1] / n_tasks : 0.0));
        json_object_set_new(cs, "diff", json_real(n_tasks ? (score[1] - score[0]) / n_tasks : 0.0));
    }
    json_object_set_new(rep, "capability_score", cs);
    json_object_set_new(rep, "interrupted", json_boolean(interrupted));
    json_object_set_new(rep, "config", config);
    return rep;
}
