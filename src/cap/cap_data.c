/* cap_data.c — the task data: reading the task files (whole files, plain
 * or gzip as HumanEval ships, and JSON Lines with errors naming file and
 * line), where the data folder is (--data, else the shipped data/capability
 * found by kld_data_path) and the check, before any model loads, that it
 * holds what the chosen tasks read. */
#include "cap/cap.h"

#include "common/data_path.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <unistd.h>
#include <zlib.h>

kld_status kld_cap_read_file(const char *path, char **out, size_t *len, kld_error *err) {
    *out = NULL;
    gzFile f = gzopen(path, "rb"); /* reads plain files unchanged */
    if (!f) return kld_fail(err, KLD_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    if (!buf) {
        gzclose(f);
        return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", path);
    }
    for (;;) {
        if (n == cap) {
            if (cap > ((size_t)1 << 34)) {
                free(buf);
                gzclose(f);
                return kld_fail(err, KLD_ERR_FORMAT, "%s: larger than 16 GiB", path);
            }
            char *nb = realloc(buf, cap * 2 + 1);
            if (!nb) {
                free(buf);
                gzclose(f);
                return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", path);
            }
            buf = nb;
            cap *= 2;
        }
        size_t want = cap - n > (1u << 30) ? (1u << 30) : cap - n;
        int r = gzread(f, buf + n, (unsigned)want);
        if (r < 0) {
            int zerr = 0;
            const char *msg = gzerror(f, &zerr);
            kld_fail(err, zerr == Z_ERRNO ? KLD_ERR_IO : KLD_ERR_FORMAT, "%s: cannot read%s: %s",
                     path, kld_ends_with(path, strlen(path), ".gz") ? " (gzip)" : "", msg);
            free(buf);
            gzclose(f);
            return err ? err->status : KLD_ERR_IO;
        }
        if (r == 0) break;
        n += (size_t)r;
    }
    gzclose(f);
    buf[n] = '\0';
    if (memchr(buf, '\0', n))
        return free(buf), kld_fail(err, KLD_ERR_FORMAT, "%s: holds a NUL byte (not text)", path);
    *out = buf;
    if (len) *len = n;
    return KLD_OK;
}

kld_status kld_cap_read_jsonl(const char *path, json_t **out, kld_error *err) {
    *out = NULL;
    char *text = NULL;
    size_t len = 0;
    kld_status st = kld_cap_read_file(path, &text, &len, err);
    if (st != KLD_OK) return st;
    json_t *arr = json_array();
    if (!arr) return free(text), kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", path);
    size_t line_no = 0;
    for (char *p = text; p < text + len;) {
        char *nl = memchr(p, '\n', (size_t)(text + len - p));
        char *end = nl ? nl : text + len;
        line_no++;
        char *q = p;
        while (q < end && (*q == ' ' || *q == '\t' || *q == '\r')) q++;
        if (q < end) {
            json_error_t je;
            json_t *v = json_loadb(p, (size_t)(end - p), JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
            if (!v || !json_is_object(v)) {
                json_decref(v);
                json_decref(arr);
                free(text);
                return v ? kld_fail(err, KLD_ERR_FORMAT, "%s:%zu: not a JSON object", path, line_no)
                         : kld_fail(err, KLD_ERR_FORMAT, "%s:%zu: column %d: %s", path, line_no,
                                    je.column, je.text);
            }
            if (json_array_append_new(arr, v)) {
                json_decref(arr);
                free(text);
                return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", path);
            }
        }
        p = nl ? nl + 1 : end;
    }
    free(text);
    *out = arr;
    return KLD_OK;
}

double kld_cap_stderr(size_t correct, size_t n) {
    if (n == 0) return 0.0;
    double p = (double)correct / (double)n;
    return sqrt(p * (1.0 - p) / (double)n);
}

kld_status kld_cap_data_dir(const char *given, char *out, size_t size, kld_error *err) {
    if (given) {
        if ((size_t)snprintf(out, size, "%s", given) >= size)
            return kld_fail(err, KLD_ERR_ARG, "--data %.80s...: path too long", given);
        return KLD_OK;
    }
    /* the data ships in data/capability (installed under share/kldeval);
     * its checksum list marks the folder */
    char sums[4096];
    kld_status st = kld_data_path("capability/SHA256SUMS", sums, sizeof sums, err);
    if (st) {
        kld_error_prefix(err, "the capability data (give --data DIR)");
        return st;
    }
    char *slash = strrchr(sums, '/');
    if (!slash || (size_t)(slash - sums) >= size)
        return kld_fail(err, KLD_ERR_ARG, "%s: path too long", sums);
    snprintf(out, size, "%.*s", (int)(slash - sums), sums);
    return KLD_OK;
}

/* The files a task reads (relative to the data folder); bfcl's four
 * categories. FOLDER/PATTERN, PATTERN an asterisk and a suffix: the folder
 * holds at least one file whose name ends in the suffix (MMLU's subjects). */
static const char *const task_files[][9] = {
    {"gsm8k", "gsm8k/test.jsonl", NULL},
    {"mmlu", "mmlu/test/*_test.csv", "mmlu/dev/*_dev.csv", NULL},
    {"ifeval", "ifeval/input_data.jsonl", NULL},
    {"humaneval", "humaneval/HumanEval.jsonl.gz", NULL},
    {"bfcl", "bfcl/BFCL_v4_simple_python.json", "bfcl/BFCL_v4_simple_java.json",
     "bfcl/BFCL_v4_simple_javascript.json", "bfcl/BFCL_v4_multiple.json",
     "bfcl/possible_answer/BFCL_v4_simple_python.json",
     "bfcl/possible_answer/BFCL_v4_simple_java.json",
     "bfcl/possible_answer/BFCL_v4_simple_javascript.json",
     "bfcl/possible_answer/BFCL_v4_multiple.json"},
};

static bool listed(const char *tasks, const char *task) {
    if (!tasks || !strcmp(tasks, "all")) return true;
    size_t n = strlen(task);
    for (const char *p = tasks; *p;) {
        const char *c = strchr(p, ',');
        size_t m = c ? (size_t)(c - p) : strlen(p);
        if (m == n && !strncmp(p, task, n)) return true;
        p += m + (c ? 1 : 0);
    }
    return false;
}

/* Whether the folder holds a file whose name ends in suffix. */
static bool holds_suffix(const char *folder, const char *suffix) {
    DIR *d = opendir(folder);
    size_t sl = strlen(suffix);
    bool found = false;
    for (struct dirent *e; d && !found && (e = readdir(d));) {
        size_t l = strlen(e->d_name);
        found = l > sl && !strcmp(e->d_name + l - sl, suffix);
    }
    if (d) closedir(d);
    return found;
}

kld_status kld_cap_data_check(const char *dir, const char *tasks, kld_error *err) {
    char path[4400];
    for (size_t t = 0; t < sizeof task_files / sizeof task_files[0]; t++) {
        if (!listed(tasks, task_files[t][0])) continue;
        for (int f = 1; f < 9 && task_files[t][f]; f++) {
            const char *rel = task_files[t][f], *star = strchr(rel, '*');
            int len = star ? (int)(star - rel - 1) : (int)strlen(rel);
            snprintf(path, sizeof path, "%s/%.*s", dir, len, rel);
            if (access(path, R_OK) != 0)
                return kld_fail(err, KLD_ERR_IO, "%s: %s's data: cannot read it: %s (the capability "
                                "data folder %s; --data DIR)", path, task_files[t][0],
                                strerror(errno), dir);
            if (star && !holds_suffix(path, star + 1))
                return kld_fail(err, KLD_ERR_IO, "%s: %s's data: holds no %s file (the capability data "
                                "folder %s; --data DIR)", path, task_files[t][0], star, dir);
        }
    }
    return KLD_OK;
}
