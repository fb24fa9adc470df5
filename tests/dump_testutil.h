/* dump_testutil.h — what the dump tests share: a seeded synthetic "model"
 * whose full-vocabulary logits are integer arithmetic (so the expected top-k,
 * ties included, is exact), an independent slow reference for a record
 * (top-k by repeated scan, logsumexp in double), and flat-directory helpers. */
#ifndef KLD_TEST_DUMP_UTIL_H
#define KLD_TEST_DUMP_UTIL_H

#include "store/dump.h"
#include "testlib.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* Logit of token v after position rec of sequence seq: values repeat, so
 * ties are frequent. salt tells a candidate from its teacher. */
static inline float dt_logit(int64_t seq, int64_t rec, int64_t v, int salt) {
    int64_t h = (seq * 131 + rec * 71 + v * v * 13 + v * 7 + salt * 29) % 97;
    return (float)((double)(h - 48) / 7.0);
}

static inline int32_t dt_token(int64_t seq, int64_t pos, int64_t n_vocab) {
    return (int32_t)((seq * 7 + pos * 3 + (pos * pos) % 5) % n_vocab);
}

/* One record computed the slow way: idx/val top_k entries (descending,
 * ties to the lower index), the float64 logsumexp, argmax, the log-prob of
 * next. With teacher_idx, the candidate's logits at those indices. */
static inline void dt_record(int64_t seq, int64_t rec, int64_t n_vocab, int32_t top_k, int salt,
                             int32_t next, const int32_t *teacher_idx, int32_t *idx, float *val,
                             float *lse, double *lse64, double *logp, int32_t *argmax) {
    float *x = malloc((size_t)n_vocab * sizeof *x);
    bool *used = calloc((size_t)n_vocab, 1);
    if (!x || !used || n_vocab < 1) {
        fprintf(stderr, "dt_record: bad vocabulary or out of memory\n");
        exit(2);
    }
    for (int64_t v = 0; v < n_vocab; v++) x[v] = dt_logit(seq, rec, v, salt);
    float mx = x[0];
    int32_t am = 0;
    for (int64_t v = 1; v < n_vocab; v++)
        if (x[v] > mx) {
            mx = x[v];
            am = (int32_t)v;
        }
    double s = 0;
    for (int64_t v = 0; v < n_vocab; v++) s += exp((double)x[v] - (double)mx);
    double l = (double)mx + log(s);
    for (int32_t j = 0; j < top_k; j++) {
        if (teacher_idx) {
            idx[j] = teacher_idx[j];
        } else {
            int32_t best = -1;
            for (int64_t v = 0; v < n_vocab; v++)
                if (!used[v] && (best < 0 || x[v] > x[best])) best = (int32_t)v;
            used[best] = true;
            idx[j] = best;
        }
        val[j] = x[idx[j]];
    }
    *lse = (float)l;
    if (lse64) *lse64 = l;
    if (logp) *logp = (double)x[next] - l;
    if (argmax) *argmax = am;
    free(x);
    free(used);
}

/* Removes the files of a flat directory and the directory. */
static inline void dt_rm_dir(const char *dir) {
    DIR *dp = opendir(dir);
    if (!dp) return;
    struct dirent *e;
    char path[4096];
    while ((e = readdir(dp)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(dp);
    rmdir(dir);
}

static inline bool dt_exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

static inline long long dt_file_size(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 ? (long long)sb.st_size : -1;
}

/* Copies a flat directory (files only). */
static inline void dt_copy_dir(const char *from, const char *to) {
    dt_rm_dir(to);
    mkdir(to, 0777);
    DIR *dp = opendir(from);
    if (!dp) return;
    struct dirent *e;
    char a[4096], b[4096];
    while ((e = readdir(dp)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(a, sizeof a, "%s/%s", from, e->d_name);
        snprintf(b, sizeof b, "%s/%s", to, e->d_name);
        size_t n;
        char *data = kt_read_file(a, &n);
        kt_write_file(b, data, n);
        free(data);
    }
    closedir(dp);
}

/* True when both flat directories hold the same names with the same bytes;
 * the first difference goes to why. */
static inline bool dt_same_dirs(const char *a, const char *b, char *why, size_t why_n) {
    const char *dirs[2] = {a, b};
    for (int side = 0; side < 2; side++) {
        DIR *dp = opendir(dirs[side]);
        if (!dp) {
            snprintf(why, why_n, "cannot open %s", dirs[side]);
            return false;
        }
        struct dirent *e;
        char p[4096], q[4096];
        while ((e = readdir(dp)) != NULL) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            snprintf(p, sizeof p, "%s/%s", dirs[side], e->d_name);
            snprintf(q, sizeof q, "%s/%s", dirs[1 - side], e->d_name);
            if (!dt_exists(q)) {
                snprintf(why, why_n, "%.900s has no twin %.900s", p, q);
                closedir(dp);
                return false;
            }
            if (side == 1) continue;
            size_t n1, n2;
            char *d1 = kt_read_file(p, &n1), *d2 = kt_read_file(q, &n2);
            bool same = n1 == n2 && memcmp(d1, d2, n1) == 0;
            free(d1);
            free(d2);
            if (!same) {
                snprintf(why, why_n, "%.900s differs from %.900s", p, q);
                closedir(dp);
                return false;
            }
        }
        closedir(dp);
    }
    return true;
}

#endif
