/* cap_config.c — the "config" object of the capability reports, which the
 * run database records (src/db): what was run (version, mode, tasks, n,
 * seed, limits, GSM8K mode, the SHA-256 of each task's data files) and on
 * what (each model as a KL run describes its arms, plus its precision
 * policy, the levers of its generation session, its sampler and bits per
 * weight; samples per item, thinking mode and budget; for
 * `cap score` the responses file with its size and SHA-256). It is also
 * what a shard's defining-input hash covers (units.h). Threads are left out: the
 * results do not depend on them (greedy decoding is bit-exact), and the
 * report stays byte-identical across thread counts. */
#include "cap/cap.h"
#include "cap/run.h"
#include "eval/arm.h"
#include "eval/corpus.h"
#include "quant/quant.h"

#include <dirent.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

json_t *kld_cap_model_desc(const char *path, const kld_cap_lm *lm) {
    json_t *o = kld_arm_model_desc(path, lm->model); /* with policy and bits per weight */
    if (!o) return NULL;
    char buf[256];
    kld_levers_format(kld_session_levers(lm->s), buf, sizeof buf);
    json_object_set_new(o, "levers", json_string(buf));
    if (lm->shares_model) json_object_set_new(o, "shares_weights", json_true());
    return o;
}

static json_t *seed_json(uint64_t seed) {
    return seed <= (uint64_t)INT64_MAX ? json_integer((json_int_t)seed) : json_null();
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The files a task reads, relative to the data folder (sorted; malloc'd). */
static size_t task_files(const char *dir, const char *task, char **out, size_t max) {
    size_t n = 0;
    if (!strcmp(task, "mmlu")) {
        static const char *const splits[] = {"dev", "test"};
        for (int s = 0; s < 2; s++) {
            char folder[4096], suffix[16];
            snprintf(folder, sizeof folder, "%s/mmlu/%s", dir, splits[s]);
            snprintf(suffix, sizeof suffix, "_%s.csv", splits[s]);
            DIR *d = opendir(folder);
            size_t first = n;
            for (struct dirent *e; d && (e = readdir(d)) && n < max;) {
                size_t l = strlen(e->d_name), sl = strlen(suffix);
                if (l <= sl || strcmp(e->d_name + l - sl, suffix)) continue;
                size_t len = l + 16;
                if ((out[n] = malloc(len))) snprintf(out[n++], len, "mmlu/%s/%s", splits[s], e->d_name);
            }
            if (d) closedir(d);
            qsort(out + first, n - first, sizeof *out, cmp_str);
        }
    } else if (!strcmp(task, "bfcl")) {
        static const char *const cats[] = {"multiple", "simple_java", "simple_javascript", "simple_python"};
        for (int c = 0; c < 4; c++)
            for (int a = 0; a < 2 && n < max; a++) {
                char name[128];
                snprintf(name, sizeof name, "bfcl/%sBFCL_v4_%s.json", a ? "possible_answer/" : "", cats[c]);
                out[n++] = kld_strdup(name);
            }
    } else {
        const char *f = !strcmp(task, "gsm8k") ? "gsm8k/test.jsonl" : !strcmp(task, "ifeval") ? "ifeval/input_data.jsonl"
                      : !strcmp(task, "humaneval") ? "humaneval/HumanEval.jsonl.gz" : NULL;
        if (f && n < max) out[n++] = kld_strdup(f);
    }
    return n;
}

/* {task: SHA-256 over "relative path TAB file SHA-256 NEWLINE" of its
 * files} (null when a file cannot be read; HashHop reads none). */
static json_t *data_hashes(const char *dir, const char *const *tasks, size_t n_tasks) {
    json_t *o = json_object();
    for (size_t t = 0; t < n_tasks; t++) {
        char *files[160];
        size_t n = task_files(dir, tasks[t], files, 160);
        if (n == 0) continue;
        EVP_MD_CTX *md = EVP_MD_CTX_new();
        EVP_DigestInit_ex(md, EVP_sha256(), NULL);
        bool ok = md != NULL;
        for (size_t i = 0; i < n; i++) {
            char path[8192], hex[65];
            uint8_t d[32];
            snprintf(path, sizeof path, "%s/%s", dir, files[i] ? files[i] : "");
            ok = ok && files[i] && kld_sha256_file(path, d, NULL) == KLD_OK;
            if (ok) {
                kld_hex_digest(d, hex);
                EVP_DigestUpdate(md, files[i], strlen(files[i]));
                EVP_DigestUpdate(md, "\t", 1);
                EVP_DigestUpdate(md, hex, 64);
                EVP_DigestUpdate(md, "\n", 1);
            }
            free(files[i]);
        }
        uint8_t d[32];
        unsigned len = 0;
        char hex[65];
        if (md) EVP_DigestFinal_ex(md, d, &len);
        EVP_MD_CTX_free(md);
        if (ok) kld_hex_digest(d, hex);
        json_object_set_new(o, tasks[t], ok ? json_string(hex) : json_null());
    }
    return o;
}

json_t *kld_cap_run_config(const kld_cap_run_opts *o, const kld_cap_lm *ref, const kld_cap_lm *arm,
                           const char *const *tasks, size_t n_tasks) {
    json_t *list = json_array();
    for (size_t i = 0; i < n_tasks; i++) json_array_append_new(list, json_string(tasks[i]));
    json_t *c = json_pack("{s:s, s:s, s:o?, s:o?, s:o, s:I, s:o, s:I, s:b, s:s}", "version", kld_version(),
                          "mode", "cap", "ref", kld_cap_model_desc(o->ref_path, ref), "arm",
                          arm ? kld_cap_model_desc(o->arm_path ? o->arm_path : o->ref_path, arm) : NULL, "tasks", list, "n",
                          (json_int_t)o->n, "seed", seed_json(o->seed), "max_new", (json_int_t)o->max_new,
                          "chat", !o->no_chat, "data", o->data_dir ? o->data_dir : "");
    if (!c) return NULL;
    /* which sampler produced each side's scores (the arm's override wins) */
    char buf[256];
    kld_cap_sampler_format(&o->sampler, buf, sizeof buf);
    json_object_set_new(json_object_get(c, "ref"), "sampler", json_string(buf));
    if (arm) {
        kld_cap_sampler_format(o->has_arm_sampler ? &o->arm_sampler : &o->sampler, buf, sizeof buf);
        json_object_set_new(json_object_get(c, "arm"), "sampler", json_string(buf));
    }
    json_object_set_new(c, "samples", json_integer(o->samples > 1 ? o->samples : 1));
    json_object_set_new(c, "thinking", json_string(o->thinking == KLD_CAP_THINKING_ON ? "on"
                                                   : o->thinking == KLD_CAP_THINKING_OFF ? "off" : "default"));
    json_object_set_new(c, "thinking_budget", json_integer(o->thinking_budget > 0 ? o->thinking_budget : 0));
    json_object_set_new(c, "gsm8k_mode", json_string(o->gsm8k_8shot ? "8shot" : "chat"));
    for (size_t i = 0; i < n_tasks; i++)
        if (!strcmp(tasks[i], "hashhop")) json_object_set_new(c, "hashhop_chars", json_integer((json_int_t)o->hashhop_chars));
    json_object_set_new(c, "data_sha256", data_hashes(o->data_dir ? o->data_dir : "", tasks, n_tasks));
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
