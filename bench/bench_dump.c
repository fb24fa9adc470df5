/* bench_dump.c — saved teachers: what a dump costs on disk and in time.
 *  - bytes per position of dump v1 (float16) and v2 (float32) at top-k 64,
 *    256 and 2048 (record + kldeval's 24-byte sidecar) against llama.cpp's
 *    base file (2 * ceil(n_vocab/2) * 2 + 8 bytes per record), and the
 *    total for the run's positions; the v1 top-256 size is also measured on
 *    disk;
 *  - dump write speed: `kldeval dump` of the reference against the
 *    reference's forward pass alone (same tokens, chunks and threads);
 *  - scoring against a dump: `kl --reference-logits DIR --arm ARM` against
 *    the arm's forward pass alone (target: at most 1.05x);
 *  - hidden-state teachers (dump --hidden, format 3): bytes per position
 *    (4·n_embd + 24) beside v2 with the whole vocabulary and llama.cpp's
 *    base file, also for a Gemma-3-4B-shaped head (n_embd 2560, n_vocab
 *    262144), and the time to score an arm against a v3 dump and against a
 *    v2 full-vocabulary dump (both exact).
 * Every round runs the baseline and the measured program one after the
 * other (alternated), medians over --reps rounds. */
#include "common_bench.h"

#include "engine/engine.h"
#include "eval/dump_driver.h"
#include "eval/kl_driver.h"
#include "store/dump.h"
#include "tensor/types.h"

#include <dirent.h>

#define BENCH "bench_dump"

typedef struct opts {
    kld_synth_options shape;
    long long tokens, chunk, threads, reps, top_k;
    const char *cache;
    bool quick;
} opts;

static void usage(void) {
    printf("usage: bench_dump [--quick] [--tokens N] [--chunk N] [--threads N] [--reps N] [--top-k K]\n\n"
           "Saved-teacher costs: dump sizes per position (v1/v2, top-k 64/256/2048 vs llama.cpp's base\n"
           "file), dump write speed against the reference's forward pass alone, and scoring an arm\n"
           "against a dump against the arm's forward pass alone. Models: the TinyLlama-1.1B shape\n"
           "(f16 reference, q4_K_M arm) cached in $KLD_BENCH_CACHE or bench/cache; --quick: a small\n"
           "shape. Defaults: --tokens 1024 --chunk 512 --threads 2 --reps 3 --top-k 256.\n");
}

static int forward_alone(const opts *o, const char *path, const int32_t *ids, double *seconds) {
    kld_error err = {0};
    kld_model *m = NULL;
    kld_session *s = NULL;
    float *logits = NULL;
    int rc = 1;
    if (kld_model_open(path, NULL, &m, &err) != KLD_OK) goto done;
    if (kld_session_create(m, o->tokens, o->chunk, (int)o->threads, &s, &err) != KLD_OK) goto done;
    logits = malloc((size_t)o->chunk * (size_t)kld_model_hparams(m)->n_vocab * sizeof *logits);
    if (!logits) goto done;
    double t0 = kb_now();
    for (long long c0 = 0; c0 < o->tokens; c0 += o->chunk) {
        long long n = o->tokens - c0 < o->chunk ? o->tokens - c0 : o->chunk;
        if (kld_session_eval(s, ids + c0, n, logits, &err) != KLD_OK) goto done;
    }
    *seconds = kb_now() - t0;
    rc = 0;
done:
    if (rc) fprintf(stderr, BENCH ": %s: %s\n", path, err.msg);
    free(logits);
    kld_session_free(s);
    kld_model_close(m);
    return rc;
}

static int dump_once_as(const opts *o, const char *model, const char *ids, const char *dir,
                        int version, int64_t top_k, double *seconds);

static int dump_once(const opts *o, const char *model, const char *ids, const char *dir,
                     double *seconds) {
    return dump_once_as(o, model, ids, dir, 1, o->top_k, seconds);
}

static int dump_once_as(const opts *o, const char *model, const char *ids, const char *dir,
                        int version, int64_t top_k, double *seconds) {
    char cmd[4600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) return 1;
    kld_dump_config c;
    kld_dump_config_defaults(&c);
    c.model_path = model;
    c.out = dir;
    c.ids_path = ids;
    c.ctx = o->tokens;
    c.chunk = o->chunk;
    c.top_k = (int32_t)top_k;
    c.format_version = version == 3 ? 0 : version;
    c.hidden = version == 3;
    c.n_threads = (int)o->threads;
    kld_dump_result r;
    kld_error err = {0};
    if (kld_dump_run(&c, &r, &err) != KLD_OK) {
        fprintf(stderr, BENCH ": dump: %s\n", err.msg);
        return 1;
    }
    *seconds = r.elapsed_s;
    kld_dump_result_free(&r);
    return 0;
}

static int score_once(const opts *o, const char *dir, const char *arm, double *seconds,
                      double *kld) {
    kld_kl_config c;
    kld_kl_config_defaults(&c);
    c.ref.kind = KLD_ARM_TEACHER;
    c.ref.path = dir;
    c.arm.kind = KLD_ARM_MODEL;
    c.arm.path = arm;
    c.chunk = o->chunk;
    c.n_threads = (int)o->threads;
    kld_kl_result r;
    kld_error err = {0};
    if (kld_kl_run(&c, &r, &err) != KLD_OK) {
        fprintf(stderr, BENCH ": kl: %s\n", err.msg);
        return 1;
    }
    *seconds = r.elapsed_s;
    kld_stats_running run;
    kld_stats_get_running(r.stats, &run);
    *kld = run.kld_mean;
    kld_kl_result_free(&r);
    return 0;
}

static uint64_t dir_bytes(const char *dir) {
    DIR *d = opendir(dir);
    uint64_t total = 0;
    struct dirent *e;
    char p[4800];
    struct stat sb;
    while (d && (e = readdir(d))) {
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (stat(p, &sb) == 0 && S_ISREG(sb.st_mode)) total += (uint64_t)sb.st_size;
    }
    if (d) closedir(d);
    return total;
}

static void sizes(const opts *o, uint64_t measured) {
    int64_t v = o->shape.n_vocab, positions = o->tokens - 1;
    uint64_t lcpp = (uint64_t)(2 * ((v + 1) / 2) + 4) * 2;
    printf("\n%-28s %14s %16s %10s\n", "format", "bytes/position", "total", "vs llama.cpp");
    const int ks[3] = {64, 256, 2048};
    for (int i = 0; i < 3; i++)
        for (int ver = 1; ver <= 2; ver++) {
            uint64_t per = kld_dump_record_bytes(ver, ks[i]) + KLD_DUMP_EXT_BYTES;
            char name[64];
            snprintf(name, sizeof name, "dump v%d top-%d", ver, ks[i]);
            printf("%-28s %14llu %16llu %9.3fx\n", name, (unsigned long long)per,
                   (unsigned long long)(per * (uint64_t)positions), (double)per / (double)lcpp);
            kb_summary s = {(double)per, (double)per, (double)per, 0, 1};
            kb_emit(BENCH, name, "bytes/position", "lower", &s,
                    json_pack("{s:I,s:f}", "positions", (json_int_t)positions, "vs_llamacpp",
                              (double)per / (double)lcpp));
        }
    uint64_t full = kld_dump_record_bytes(2, v) + KLD_DUMP_EXT_BYTES;
    printf("%-28s %14llu %16llu %9.3fx\n", "dump v2 whole vocabulary", (unsigned long long)full,
           (unsigned long long)(full * (uint64_t)positions), (double)full / (double)lcpp);
    for (int b = 4; b >= 2; b -= 2) {
        uint64_t per = (uint64_t)b * (uint64_t)o->shape.n_embd + KLD_DUMP_EXT_BYTES;
        char name[64];
        snprintf(name, sizeof name, "dump v3 hidden %s", b == 4 ? "f32" : "bf16");
        printf("%-28s %14llu %16llu %9.3fx\n", name, (unsigned long long)per,
               (unsigned long long)(per * (uint64_t)positions), (double)per / (double)lcpp);
        kb_summary sm = {(double)per, (double)per, (double)per, 0, 1};
        kb_emit(BENCH, name, "bytes/position", "lower", &sm,
                json_pack("{s:f,s:f}", "vs_llamacpp", (double)per / (double)lcpp, "vs_v2_full",
                          (double)per / (double)full));
    }
    printf("%-28s %14llu %16llu %9.3fx\n", "llama.cpp base file", (unsigned long long)lcpp,
           (unsigned long long)(lcpp * (uint64_t)positions), 1.0);
    /* a Gemma-3-4B-shaped head: the vocabulary is where base files and v2 grow */
    const int64_t gv = 262144, ge = 2560;
    uint64_t g_lcpp = (uint64_t)(2 * ((gv + 1) / 2) + 4) * 2, g_v3 = 4 * (uint64_t)ge + KLD_DUMP_EXT_BYTES;
    uint64_t g_full = kld_dump_record_bytes(2, gv) + KLD_DUMP_EXT_BYTES;
    printf("Gemma-3-4B shape (n_embd %lld, n_vocab %lld): v3 f32 %llu B, v2 whole vocabulary %llu B, "
           "llama.cpp %llu B a position (v3 %.1fx smaller than llama.cpp's)\n", (long long)ge,
           (long long)gv, (unsigned long long)g_v3, (unsigned long long)g_full,
           (unsigned long long)g_lcpp, (double)g_lcpp / (double)g_v3);
    kb_summary gs = {(double)g_v3, (double)g_v3, (double)g_v3, 0, 1};
    kb_emit(BENCH, "gemma3 head: dump v3 hidden f32", "bytes/position", "lower", &gs,
            json_pack("{s:f,s:f}", "vs_llamacpp", (double)g_v3 / (double)g_lcpp, "vs_v2_full",
                      (double)g_v3 / (double)g_full));
    printf("measured on disk, v1 top-%lld: %llu bytes (tokens, manifest and sidecars included)\n",
           o->top_k, (unsigned long long)measured);
}

int main(int argc, char **argv) {
    opts o = {.tokens = 1024, .chunk = 512, .threads = 2, .reps = 3, .top_k = 256};
    kb_shape_tinyllama(&o.shape);
    o.cache = kb_cache_dir();
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage();
            return 0;
        }
        if (!strcmp(argv[i], "--quick")) {
            o.quick = true;
            kb_shape_quick(&o.shape);
            o.tokens = 256;
            o.chunk = 128;
            continue;
        }
        long long *dst = !strcmp(argv[i], "--tokens") ? &o.tokens : !strcmp(argv[i], "--chunk") ? &o.chunk
                         : !strcmp(argv[i], "--threads") ? &o.threads : !strcmp(argv[i], "--reps") ? &o.reps
                         : !strcmp(argv[i], "--top-k") ? &o.top_k : NULL;
        if (!dst) {
            fprintf(stderr, BENCH ": unknown flag '%s' (see --help)\n", argv[i]);
            return 2;
        }
        if (!kb_arg_int(argc, argv, &i, 2, 1 << 24, dst)) return 2;
    }
    kld_kernels_init();
    char ref[4096], arm[4096], ids_path[4400], dir[4400];
    if (kb_cached_model(BENCH, o.cache, &o.shape, "f16", ref, sizeof ref) ||
        kb_cached_model(BENCH, o.cache, &o.shape, "q4_K_M", arm, sizeof arm))
        return 1;
    /* seeded ids, BOS first, as one window of --tokens */
    int32_t *ids = malloc((size_t)o.tokens * sizeof *ids);
    uint64_t x = 88172645463325252ull;
    for (long long i = 0; i < o.tokens; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        ids[i] = i == 0 ? 1 : (int32_t)(3 + x % (uint64_t)(o.shape.n_vocab - 3));
    }
    snprintf(ids_path, sizeof ids_path, "%s/bench_dump.ids", o.cache);
    snprintf(dir, sizeof dir, "%s/bench_dump.teacher", o.cache);
    FILE *f = fopen(ids_path, "wb");
    if (!f || fwrite(ids, sizeof *ids, (size_t)o.tokens, f) != (size_t)o.tokens || fclose(f)) {
        fprintf(stderr, BENCH ": cannot write %s\n", ids_path);
        return 1;
    }
    int reps = (int)o.reps;
    double *fw_ref = calloc((size_t)reps, sizeof(double)), *dump_s = calloc((size_t)reps, sizeof(double));
    double *fw_arm = calloc((size_t)reps, sizeof(double)), *score_s = calloc((size_t)reps, sizeof(double));
    double kld = 0, kld3 = 0, kldf = 0;
    double *score3 = calloc((size_t)reps, sizeof(double)), *scoref = calloc((size_t)reps, sizeof(double));
    char dir3[4500], dirf[4500];
    snprintf(dir3, sizeof dir3, "%s.v3", dir);
    snprintf(dirf, sizeof dirf, "%s.v2full", dir);
    double unused;
    if (dump_once_as(&o, ref, ids_path, dir3, 3, 0, &unused) ||
        dump_once_as(&o, ref, ids_path, dirf, 2, o.shape.n_vocab, &unused))
        return 1;
    for (int r = 0; r < reps; r++) {
        if (score_once(&o, dir3, arm, &score3[r], &kld3) || score_once(&o, dirf, arm, &scoref[r], &kldf))
            return 1;
    }
    for (int r = 0; r < reps; r++) {
        if (forward_alone(&o, ref, ids, &fw_ref[r]) || dump_once(&o, ref, ids_path, dir, &dump_s[r]) ||
            forward_alone(&o, arm, ids, &fw_arm[r]) || score_once(&o, dir, arm, &score_s[r], &kld))
            return 1;
        fprintf(stderr, BENCH ": round %d: ref forward %.2f s, dump %.2f s; arm forward %.2f s, "
                        "scoring %.2f s\n", r + 1, fw_ref[r], dump_s[r], fw_arm[r], score_s[r]);
    }
    kb_summary a = kb_summarize(fw_ref, reps), b = kb_summarize(dump_s, reps);
    kb_summary c = kb_summarize(fw_arm, reps), d = kb_summarize(score_s, reps);
    double tok = (double)o.tokens;
    printf("%-44s %10s %10s\n", "workload", "median s", "spread");
    printf("%-44s %10.3f %9.1f%%\n", "reference forward alone (all logits)", a.median, 100 * a.spread);
    printf("%-44s %10.3f %9.1f%%  (%.1f tokens/s, %.3fx the forward)\n", "dump (forward + top-k + write)",
           b.median, 100 * b.spread, tok / b.median, b.median / a.median);
    printf("%-44s %10.3f %9.1f%%\n", "arm forward alone (all logits)", c.median, 100 * c.spread);
    printf("%-44s %10.3f %9.1f%%  (%.3fx the arm's forward; target <= 1.05x)\n",
           "kl --reference-logits (arm vs dump)", d.median, 100 * d.spread, d.median / c.median);
    printf("mean truncated KLD (top-%lld): %.6f\n", o.top_k, kld);
    kb_summary e3 = kb_summarize(score3, reps), ef = kb_summarize(scoref, reps);
    printf("%-44s %10.3f %9.1f%%  (mean KLD %.6f)\n", "kl against a v3 hidden-state dump", e3.median,
           100 * e3.spread, kld3);
    printf("%-44s %10.3f %9.1f%%  (mean KLD %.6f; v3/v2 time %.3fx)\n",
           "kl against a v2 whole-vocabulary dump", ef.median, 100 * ef.spread, kldf,
           e3.median / ef.median);
    kb_emit(BENCH, "score_vs_v3_hidden", "s", "lower", &e3,
            json_pack("{s:f,s:f}", "vs_v2_full", e3.median / ef.median, "kld", kld3));
    kb_emit(BENCH, "score_vs_v2_full", "s", "lower", &ef, json_pack("{s:f}", "kld", kldf));
    free(score3);
    free(scoref);
    kb_emit(BENCH, "ref_forward", "s", "lower", &a, NULL);
    kb_emit(BENCH, "dump_write", "s", "lower", &b,
            json_pack("{s:f,s:f}", "tokens_per_s", tok / b.median, "vs_forward", b.median / a.median));
    kb_emit(BENCH, "arm_forward", "s", "lower", &c, NULL);
    kb_emit(BENCH, "score_vs_dump", "s", "lower", &d,
            json_pack("{s:f,s:f}", "vs_forward", d.median / c.median, "target", 1.05));
    sizes(&o, dir_bytes(dir));
    free(ids);
    free(fw_ref);
    free(dump_s);
    free(fw_arm);
    free(score_s);
    return 0;
}
