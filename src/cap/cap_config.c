/* cap_config.c — the "config" object of the capability reports, which the
 * run database records (src/db): what was run (version, mode, tasks, n,
 * seed, limits) and on what (each model as a KL run describes its arms,
 * plus its precision policy, levers and bits per weight; for `cap score`
 * the responses file with its size and SHA-256). Threads are left out: the
 * results do not depend on them (greedy decoding is bit-exact), and the
 * report stays byte-identical across thread counts. */
#include "cap/cap.h"
#include "cap/run.h"
#include "eval/arm.h"
#include "eval/corpus.h"
#include "quant/quant.h"

#include <stdlib.h>
#include <sys/stat.h>

json_t *kld_cap_model_desc(const char *path, const kld_cap_lm *lm) {
    json_t *o = kld_arm_model_desc(path, lm->model); /* with policy and bits per weight */
    if (!o) return NULL;
    /* generation sessions run with every lever at its reference value */
    json_object_set_new(o, "levers", json_string("reference"));
    return o;
}

static json_t *seed_json(uint64_t seed) {
    return seed <= (uint64_t)INT64_MAX ? json_integer((json_int_t)seed) : json_null();
}

json_t *kld_cap_run_config(const kld_cap_run_opts *o, const kld_cap_lm *ref, const kld_cap_lm *arm,
                           const char *const *tasks, size_t n_tasks) {
    json_t *list = json_array();
    for (size_t i = 0; i < n_tasks; i++) json_array_append_new(list, json_string(tasks[i]));
    json_t *c = json_pack("{s:s, s:s, s:o?, s:o?, s:o, s:I, s:o, s:I, s:b, s:s}", "version", kld_version(),
                          "mode", "cap", "ref", kld_cap_model_desc(o->ref_path, ref), "arm",
                          arm ? kld_cap_model_desc(o->arm_path, arm) : NULL, "tasks", list, "n",
                          (json_int_t)o->n, "seed", seed_json(o->seed), "max_new", (json_int_t)o->max_new,
                          "chat", !o->no_chat, "data", o->data_dir ? o->data_dir : "");
    return c;
}

json_t *kld_cap_score_config(const kld_cap_score_opts *o, size_t n) {
    json_t *resp = json_pack("{s:s, s:s}", "kind", "responses", "path", o->responses);
    struct stat sb;
    uint8_t d[32];
    char hex[65];
    if (stat(o->responses, &sb) == 0 && S_ISREG(sb.st_mode)) {
        json_object_set_new(resp, "bytes", json_integer((json_int_t)sb.st_size));
        if (kld_sha256_file(o->responses, d, NULL) == KLD_OK) {
            kld_hex_digest(d, hex);
            json_object_set_new(resp, "sha256", json_string(hex));
        }
    }
    return json_pack("{s:s, s:s, s:o, s:[s], s:I, s:s}", "version", kld_version(), "mode", "cap-score",
                     "ref", resp, "tasks", o->task, "n", (json_int_t)n, "data",
                     o->data_dir ? o->data_dir : "");
}
