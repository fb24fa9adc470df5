/* bench_merge.c — `kldeval merge` at scale: writes synthetic shard partials
 * holding --positions records in total (default 10^7, in windows of 512,
 * split mod --parts), then times kld_merge + kld_summary_from_source (the
 * records read back from the partials in passes), each
 * repetition in a child process whose peak RSS (wait4) is the merge's own.
 * The targets: under a minute and under 1 GB for 10^7 positions. */
#include "common_bench.h"

#include "eval/merge.h"

#include <sys/wait.h>

static int write_parts(const char *dir, long long positions, int parts, char **paths) {
    const uint64_t win = 512, n_windows = ((uint64_t)positions + win - 1) / win;
    json_t *config = json_pack("{s:s,s:s,s:i}", "mode", "two-models", "chunking", "doc", "topk", 10);
    uint8_t hash[32];
    kld_eval_hash(config, hash);
    json_t *meta = json_pack("{s:s,s:O,s:s,s:s,s:f,s:f,s:f,s:i,s:i}", "schema", "kldeval.partial/1",
                             "config", config, "vocab_note", "synthetic", "ctx_note", "", "elapsed_s",
                             1.0, "ref_seconds", 0.5, "arm_seconds", 0.5, "ref_tokens", 1, "arm_tokens", 1);
    char *meta_text = json_dumps(meta, JSON_COMPACT);
    json_decref(meta);
    json_decref(config);
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    int rc = 0;
    for (int k = 0; k < parts && !rc; k++) {
        uint64_t nw = 0, nr = 0;
        for (uint64_t g = (uint64_t)k; g < n_windows; g += (uint64_t)parts) {
            nw++;
            nr += g + 1 < n_windows ? win : (uint64_t)positions - g * win;
        }
        kld_partial_window *w = malloc((nw ? nw : 1) * sizeof *w);
        kld_position *r = malloc((nr ? nr : 1) * sizeof *r);
        if (!w || !r) { free(w); free(r); rc = 1; break; }
        uint64_t j = 0, i = 0;
        for (uint64_t g = (uint64_t)k; g < n_windows; g += (uint64_t)parts, j++) {
            uint32_t n = (uint32_t)(g + 1 < n_windows ? win : (uint64_t)positions - g * win);
            w[j] = (kld_partial_window){g, n, (uint8_t)(g % 4 == 0)}; /* documents of 4 windows */
            for (uint32_t p = 0; p < n; p++, i++) {
                seed = seed * 6364136223846793005ull + 1442695040888963407ull;
                double u = (double)(seed >> 11) / 9007199254740992.0;
                r[i] = (kld_position){.kld = u * u, .kld_rev = u * u * 0.9, .jsd = u * 0.1,
                                      .nll_ref = 2.0 + u, .nll_arm = 2.0 + u * 1.1,
                                      .kld_bound = u * u, .p_ref_max = (float)u, .mass = 1.0f,
                                      .token = (int32_t)(seed >> 48), .top_ref = 1,
                                      .top_arm = u < 0.9 ? 1 : 2, .ctx_pos = p,
                                      .topk_hits = (uint16_t)(10 - (int)(u * 3)), .topk = 10};
            }
        }
        kld_partial_head h = {.shard_k = (uint32_t)k, .shard_n = (uint32_t)parts, .topk = 10,
                              .n_windows_total = n_windows, .n_windows = nw, .n_records = nr};
        memcpy(h.hash, hash, 32);
        if (asprintf(&paths[k], "%s/part-%d.kldpart", dir, k) < 0) { rc = 1; break; }
        kld_error err = {0};
        if (kld_partial_write(paths[k], &h, meta_text, w, r, &err) != KLD_OK) {
            fprintf(stderr, "bench_merge: %s\n", err.msg);
            rc = 1;
        }
        free(w);
        free(r);
    }
    free(meta_text);
    return rc;
}

/* One merge + finalize in a child; its wall time and peak RSS. */
/* out: kld mean, seconds in kld_merge, seconds in kld_stats_finalize */
static int merge_once(char **paths, int parts, double *seconds, uint64_t *peak, double out[3]) {
    int fd[2];
    if (pipe(fd) != 0) return 1;
    double t0 = kb_now();
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        kld_merge_result m;
        kld_summary s;
        kld_error err = {0};
        double out[3];
        out[1] = kb_now();
        if (kld_merge((const char *const *)paths, (size_t)parts, &m, &err) != KLD_OK) {
            fprintf(stderr, "bench_merge: %s\n", err.msg);
            _exit(1);
        }
        out[1] = kb_now() - out[1];
        out[2] = kb_now();
        if (kld_summary_from_source(&m.records, &s, &err) != KLD_OK) {
            fprintf(stderr, "bench_merge: %s\n", err.msg);
            _exit(1);
        }
        out[2] = kb_now() - out[2];
        out[0] = s.kld.mean;
        if (write(fd[1], out, sizeof out) != (ssize_t)sizeof out) _exit(1);
        kld_merge_result_free(&m);
        _exit(0);
    }
    close(fd[1]);
    int status = 0;
    struct rusage ru;
    if (pid < 0 || wait4(pid, &status, 0, &ru) != pid || !WIFEXITED(status) || WEXITSTATUS(status)) {
        close(fd[0]);
        return 1;
    }
    *seconds = kb_now() - t0;
    *peak = (uint64_t)ru.ru_maxrss * 1024u;
    int ok = read(fd[0], out, 3 * sizeof *out) == (ssize_t)(3 * sizeof *out);
    close(fd[0]);
    return ok ? 0 : 1;
}

int main(int argc, char **argv) {
    long long positions = 10000000, parts = 8, reps = 3;
    const char *dir = "bench/cache/merge";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) positions = 100000, reps = 2;
        else if (!strcmp(argv[i], "--positions")) { if (!kb_arg_int(argc, argv, &i, 1, 1LL << 34, &positions)) return 2; }
        else if (!strcmp(argv[i], "--parts")) { if (!kb_arg_int(argc, argv, &i, 1, 4096, &parts)) return 2; }
        else if (!strcmp(argv[i], "--reps")) { if (!kb_arg_int(argc, argv, &i, 1, 100, &reps)) return 2; }
        else if (!strcmp(argv[i], "--dir") && i + 1 < argc) dir = argv[++i];
        else {
            fprintf(stderr, "usage: bench_merge [--quick] [--positions N] [--parts P] [--reps R] [--dir D]\n"
                            "  --quick          10^5 positions (smoke test)\n"
                            "  (default: 10^7 positions, 8 parts, 3 repetitions, bench/cache/merge)\n");
            return 2;
        }
    }
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
    if (system(cmd) != 0) return 1;
    char **paths = calloc((size_t)parts, sizeof *paths);
    double t0 = kb_now();
    if (!paths || write_parts(dir, positions, (int)parts, paths)) return 1;
    double t_write = kb_now() - t0;
    double times[100], got[3] = {0}, t_merge[100], t_final[100];
    uint64_t peak = 0;
    for (int r = 0; r < reps; r++) {
        uint64_t p = 0;
        if (merge_once(paths, (int)parts, &times[r], &p, got)) {
            fprintf(stderr, "bench_merge: merge failed\n");
            return 1;
        }
        if (p > peak) peak = p;
        t_merge[r] = got[1];
        t_final[r] = got[2];
    }
    kb_summary sm = kb_summarize(t_merge, (int)reps), sf = kb_summarize(t_final, (int)reps);
    kb_summary s = kb_summarize(times, (int)reps);
    printf("merge of %lld positions in %lld parts: %.2f s median (%.2f .. %.2f), peak RSS %.1f MiB "
           "(%.0f bytes/position); of it kld_merge %.2f s, kld_stats_finalize %.2f s; writing the parts "
           "took %.2f s; kld mean %.6f\n",
           positions, parts, s.median, s.min, s.max, (double)peak / 1048576.0,
           (double)peak / (double)positions, sm.median, sf.median, t_write, got[0]);
    kb_emit("bench_merge", "merge", "s", "lower", &s,
            json_pack("{s:I,s:I,s:I,s:f,s:f,s:f}", "positions", (json_int_t)positions, "parts",
                      (json_int_t)parts, "peak_rss_bytes", (json_int_t)peak, "write_s", t_write,
                      "merge_s", sm.median, "finalize_s", sf.median));
    for (int k = 0; k < parts; k++) {
        if (paths[k]) remove(paths[k]);
        free(paths[k]);
    }
    free(paths);
    return 0;
}
