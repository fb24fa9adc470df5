/* db_cap.c — capability runs in the run database: the per-task summary
 * (cap_results) and the Capability_Score read out of a `kldeval cap` or
 * `kldeval cap score` report, and the helpers that read them back. Layout
 * in db.h. */
#include "db/db_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* An accuracy object without its per-item records. */
static json_t *without_items(const json_t *side) {
    json_t *o = json_object();
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)side, k, v) {
        if (strcmp(k, "items") != 0) json_object_set(o, k, v);
    }
    return o;
}

/* `kldeval cap`: report.tasks {task: {ref, arm, paired}}. */
static json_t *from_run(const json_t *tasks) {
    json_t *out = json_object();
    const char *task;
    json_t *t;
    json_object_foreach((json_t *)tasks, task, t) {
        json_t *o = json_object();
        static const char *const sides[] = {"ref", "arm"};
        for (int s = 0; s < 2; s++) {
            const json_t *side = json_object_get(t, sides[s]);
            if (json_is_object(side)) json_object_set_new(o, sides[s], without_items(side));
        }
        const json_t *p = json_object_get(t, "paired");
        if (json_is_object(p)) json_object_set(o, "paired", (json_t *)p);
        json_object_set_new(out, task, o);
    }
    return out;
}

/* `kldeval cap score`: one task, its accuracies at the top level. */
static json_t *from_score(const json_t *report, const char *task) {
    static const char *const keys[] = {"accuracy", "stderr", "correct", "n", "prompt_strict",
                                       "instruction_strict", "prompt_loose", "instruction_loose"};
    json_t *side = json_object();
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const json_t *v = json_object_get(report, keys[i]);
        if (v) json_object_set(side, keys[i], (json_t *)v);
    }
    return json_pack("{s:{s:o}}", task, "ref", side);
}

json_t *kld_db_cap_results(const json_t *report) {
    const json_t *tasks = json_object_get(report, "tasks");
    if (json_is_object(tasks) && json_is_object(json_object_get(report, "capability_score")))
        return from_run(tasks);
    const char *task = json_string_value(json_object_get(report, "task"));
    if (task && json_is_number(json_object_get(report, "accuracy"))) return from_score(report, task);
    return NULL;
}

void kld_db_cap_scores(const json_t *report, double *ref, double *arm, double *diff) {
    const json_t *cs = json_object_get(report, "capability_score");
    const json_t *r = cs ? json_object_get(cs, "ref") : json_object_get(report, "accuracy");
    const json_t *a = json_object_get(cs, "arm"), *d = json_object_get(cs, "diff");
    *ref = json_is_number(r) ? json_number_value(r) : NAN;
    *arm = json_is_number(a) ? json_number_value(a) : NAN;
    *diff = json_is_number(d) ? json_number_value(d) : NAN;
}

char *kld_db_cap_task_list(const json_t *results) {
    size_t len = 1;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)results, k, v) len += strlen(k) + 1;
    char *s = malloc(len);
    if (!s) return NULL;
    s[0] = '\0';
    json_object_foreach((json_t *)results, k, v) {
        if (s[0]) strcat(s, ",");
        strcat(s, k);
    }
    return s;
}

size_t kld_db_cap_task_count(const kld_db_row *r) { return json_object_size(r->cap.results); }

const char *kld_db_cap_task(const kld_db_row *r, size_t i) {
    size_t k = 0;
    const char *name;
    json_t *v;
    json_object_foreach(r->cap.results, name, v) {
        if (k++ == i) return name;
    }
    return NULL;
}

const json_t *kld_db_cap_side(const kld_db_row *r, const char *task, const char *side) {
    const json_t *s = json_object_get(json_object_get(r->cap.results, task), side);
    return json_is_object(s) ? s : NULL;
}
