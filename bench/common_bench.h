/* common_bench.h — helpers shared by the benchmark programs in bench/:
 * a monotonic clock, median/spread of repeated timings, peak resident
 * memory, and the one-line JSON records that bench/run collects.
 *
 * Everything is static inline: bench/CMakeLists.txt makes every .c file
 * in bench/ a program, so shared code cannot live in a .c file there.
 *
 * Record format (one per measurement, on its own stdout line, starting
 * with '{'; bench/run keeps every such line that parses as JSON):
 *   {"bench":"bench_kl","name":"ref_forward","unit":"s","better":"lower",
 *    "median":1.23,"min":1.2,"max":1.3,"spread":0.08,"reps":3, ...extra}
 * spread = (max - min) / median. Anything else a program prints (its
 * table) is for people and is ignored by bench/run. */
#ifndef KLD_BENCH_COMMON_BENCH_H
#define KLD_BENCH_COMMON_BENCH_H

#include "synth/synth.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Seconds on the monotonic clock. */
static inline double kb_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct kb_summary {
    double median, min, max;
    double spread; /* (max - min) / median; 0 when median is 0 */
    int n;
} kb_summary;

static inline int kb_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median (mean of the middle two for even n), extremes and spread of x[0..n). */
static inline kb_summary kb_summarize(const double *x, int n) {
    kb_summary s = {0, 0, 0, 0, n};
    if (n <= 0) return s;
    double *t = malloc((size_t)n * sizeof *t);
    if (!t) return s;
    memcpy(t, x, (size_t)n * sizeof *t);
    qsort(t, (size_t)n, sizeof *t, kb_cmp_double);
    s.median = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
    s.min = t[0];
    s.max = t[n - 1];
    s.spread = s.median != 0 ? (s.max - s.min) / s.median : 0;
    free(t);
    return s;
}

/* Resets the kernel's peak-RSS mark for this process (Linux: writing "5" to
 * /proc/self/clear_refs), so the next kb_peak_rss_bytes() reports the peak
 * of what follows. Returns false when that is not possible: peaks are then
 * cumulative since the program started. */
static inline bool kb_peak_rss_reset(void) {
    int fd = open("/proc/self/clear_refs", O_WRONLY);
    if (fd < 0) return false;
    bool ok = write(fd, "5", 1) == 1;
    close(fd);
    return ok;
}

/* Peak resident set size in bytes (getrusage; ru_maxrss is in KiB on Linux). */
static inline uint64_t kb_peak_rss_bytes(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (uint64_t)ru.ru_maxrss * 1024u;
}

/* Prints one record line. `extra` (may be NULL) is an object whose members
 * are appended; it is consumed. better: "lower" (times) or "higher" (rates). */
static inline void kb_emit(const char *bench, const char *name, const char *unit, const char *better,
                           const kb_summary *s, json_t *extra) {
    json_t *o = json_object();
    json_object_set_new(o, "bench", json_string(bench));
    json_object_set_new(o, "name", json_string(name));
    json_object_set_new(o, "unit", json_string(unit));
    json_object_set_new(o, "better", json_string(better));
    json_object_set_new(o, "median", json_real(s->median));
    json_object_set_new(o, "min", json_real(s->min));
    json_object_set_new(o, "max", json_real(s->max));
    json_object_set_new(o, "spread", json_real(s->spread));
    json_object_set_new(o, "reps", json_integer(s->n));
    if (extra) {
        json_object_update(o, extra);
        json_decref(extra);
    }
    char *line = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(6));
    if (line) printf("%s\n", line);
    fflush(stdout);
    free(line);
    json_decref(o);
}

/* Integer flag value: "--name N" at argv[*i]; advances *i. Returns false
 * (after a message) when the value is missing or out of [lo, hi]. */
static inline bool kb_arg_int(int argc, char **argv, int *i, long long lo, long long hi,
                              long long *out) {
    const char *flag = argv[*i];
    if (*i + 1 >= argc) {
        fprintf(stderr, "%s: missing value\n", flag);
        return false;
    }
    char *end = NULL;
    long long v = strtoll(argv[++*i], &end, 10);
    if (!end || *end || end == argv[*i] || v < lo || v > hi) {
        fprintf(stderr, "%s: '%s' is not an integer in [%lld, %lld]\n", flag, argv[*i], lo, hi);
        return false;
    }
    *out = v;
    return true;
}

/* The TinyLlama-1.1B shape every model benchmark uses by default, and the
 * small shape of --quick (smoke tests). */
static inline void kb_shape_tinyllama(kld_synth_options *s) {
    kld_synth_defaults(s);
    s->n_embd = 2048;
    s->n_layer = 22;
    s->n_head = 32;
    s->n_head_kv = 4;
    s->n_ff = 5632;
    s->n_vocab = 32000;
    s->n_ctx = 2048;
    s->seed = 42;
    s->name = "kldeval-bench";
}

static inline void kb_shape_quick(kld_synth_options *s) {
    s->n_embd = 256;
    s->n_layer = 2;
    s->n_head = 4;
    s->n_head_kv = 2;
    s->n_ff = 768;
    s->n_vocab = 4096;
}

/* The folder synthesized models are cached in: $KLD_BENCH_CACHE or bench/cache. */
static inline const char *kb_cache_dir(void) {
    const char *env = getenv("KLD_BENCH_CACHE");
    return env && *env ? env : "bench/cache";
}

/* The cached model of this shape and weight type in `cache`, synthesized
 * when missing (renamed into place only when complete). The name holds every
 * synthesis input, so a changed flag never reuses a stale file; a new
 * synthesizer version does (delete the cache then). Returns 0 on success. */
static inline int kb_cached_model(const char *tool, const char *cache, const kld_synth_options *s,
                                  const char *type, char *path, size_t path_size) {
    snprintf(path, path_size, "%s/synth-d%lld-l%lld-h%lld-kv%lld-ff%lld-v%d-c%lld-s%llu-%s.gguf",
             cache, (long long)s->n_embd, (long long)s->n_layer, (long long)s->n_head,
             (long long)s->n_head_kv, (long long)s->n_ff, s->n_vocab, (long long)s->n_ctx,
             (unsigned long long)s->seed, type);
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) {
        fprintf(stderr, "%s: using cached %s\n", tool, path);
        return 0;
    }
    mkdir(cache, 0755);
    kld_synth_options opt = *s;
    opt.type = type;
    char tmp[4400];
    snprintf(tmp, sizeof tmp, "%s.tmp%ld", path, (long)getpid());
    fprintf(stderr, "%s: synthesizing %s (once; large shapes take minutes)...\n", tool, path);
    double t0 = kb_now();
    kld_error err = {0};
    if (kld_synth_write(&opt, tmp, &err) != KLD_OK) {
        fprintf(stderr, "%s: synthesis failed: %s\n", tool, err.msg);
        unlink(tmp);
        return 1;
    }
    if (rename(tmp, path) != 0) {
        fprintf(stderr, "%s: cannot rename %s to %s: %s\n", tool, tmp, path, strerror(errno));
        return 1;
    }
    fprintf(stderr, "%s: synthesized in %.1f s\n", tool, kb_now() - t0);
    return 0;
}

#endif
