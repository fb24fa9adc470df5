/* units.h — the per-item results of a capability run and the report built
 * from them. A unit is what items are numbered within: one task, or one
 * BFCL category (bfcl_simple_python, bfcl_simple_java,
 * bfcl_simple_javascript, bfcl_multiple, all reported under "bfcl"). A
 * single run, a shard (--shard K/N: the items i with shard_has(i, total))
 * and a merge of shards all hold their results as units and build the
 * report with the same function, so a merge gives the single run's report.
 *
 * Ownership: the json_t members are owned by the unit (kld_cap_units_free). */
#ifndef KLD_CAP_UNITS_H
#define KLD_CAP_UNITS_H

#include "cap/run.h"

typedef struct kld_cap_unit {
    char task[16];     /* the report's task: mmlu, gsm8k, ifeval, humaneval, bfcl, hashhop */
    char name[32];     /* the unit: the task, or bfcl_<category> */
    size_t total;      /* items of the whole evaluation (every shard together) */
    json_t *items[2];  /* per arm (ref, arm): the item records in item order, each with "correct" */
    json_t *pos[2];    /* per arm: each record's item number 0 .. total-1 */
} kld_cap_unit;

/* The BFCL categories, in run order. */
extern const char *const kld_cap_bfcl_categories[4];

void kld_cap_units_free(kld_cap_unit *u, size_t n);

/* The report: head (ref, n, max_new, chat; stolen) + tasks (units of a task
 * are consecutive) + arm (NULL: one model; stolen) + capability_score +
 * interrupted + config (stolen). Per task {ref, arm: {accuracy, stderr,
 * correct, n, items}, paired}; MMLU adds "subjects" {subject: {ref, arm,
 * paired}} and BFCL "categories" {category: {ref, arm, paired}}, whose
 * accuracy is BFCL's summary (cap_report.c). NULL when out of memory. */
json_t *kld_cap_build_report(const kld_cap_unit *u, size_t n_units, int n_arms, json_t *head,
                             json_t *arm, bool interrupted, json_t *config);

/* cap_shard.c: the shard partial of a run (JSON, schema
 * "kldeval.cap-partial/1"; see the file) and the merge of partials. */
kld_status kld_cap_partial_write(const char *path, const kld_cap_unit *u, size_t n_units, int n_arms,
                                 const json_t *head, const json_t *arm, const json_t *config,
                                 kld_error *err);
/* Whether path starts like a capability partial (what `kldeval merge` looks at). */
bool kld_cap_is_partial(const char *path);
/* Checks that the parts belong together (the hash of the defining inputs,
 * shard count and mode, each shard once, every unit's item totals) and
 * cover every item exactly once, and builds the single run's report plus
 * "merged" {eval_hash, shards, mode, parts}. Errors name the part. */
kld_status kld_cap_merge(const char *const *paths, size_t n, json_t **report, kld_error *err);

/* The hash of a capability run's defining inputs: its config without
 * "shard", "data" (the folder; its files are hashed in data_sha256) and the
 * models' paths (their SHA-256 stays). */
void kld_cap_eval_hash(const json_t *config, uint8_t out[32]);

#endif
