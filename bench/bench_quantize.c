/* bench_quantize.c — quantization speed: per type, the threaded product
 * path (kld_quant_tensor) on a 2048×2048 f16 tensor at 1 and N threads
 * (values per second; the ratio is the scaling), and, given --model F,
 * `kldeval quantize F … POLICY` as a whole against `llama-quantize` when
 * $LLAMA_QUANTIZE names one (same file, same run, same thread count: the
 * issue's "not slower than llama-quantize" is that ratio). Not a test.
 *   build/bench/bench_quantize [--reps N] [--threads N] [--model F.gguf --policy q4_K_M] */
#include "common_bench.h"
#include "quant/quant.h"

#include <sys/wait.h>

#define ROWS 2048
#define COLS 2048

static double run_cmd(const char *cmd) {
    double t0 = kb_now();
    int st = system(cmd);
    double t = kb_now() - t0;
    if (st != 0) fprintf(stderr, "bench_quantize: '%s' failed (%d)\n", cmd, st);
    return st == 0 ? t : -1;
}

int main(int argc, char **argv) {
    long long reps = 3, threads = 2;
    const char *model = NULL, *policy = "q4_K_M";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps")) { if (!kb_arg_int(argc, argv, &i, 1, 100, &reps)) return 2; }
        else if (!strcmp(argv[i], "--threads")) { if (!kb_arg_int(argc, argv, &i, 1, 256, &threads)) return 2; }
        else if (!strcmp(argv[i], "--model") && i + 1 < argc) model = argv[++i];
        else if (!strcmp(argv[i], "--policy") && i + 1 < argc) policy = argv[++i];
        else {
            fprintf(stderr, "usage: bench_quantize [--reps N] [--threads N] [--model F --policy P]\n");
            return 2;
        }
    }
    kld_kernels_init();
    uint16_t *w = malloc((size_t)ROWS * COLS * 2);
    uint8_t *dst = malloc((size_t)ROWS * COLS * 2);
    if (!w || !dst) return 1;
    uint64_t seed = 7;
    for (size_t i = 0; i < (size_t)ROWS * COLS; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        w[i] = kld_f32_to_f16(((float)(seed >> 40) / (float)(1 << 24) - 0.5f) * 0.1f);
    }
    kld_tensor t = {.name = "bench", .type = KLD_TYPE_F16, .n_dims = 2, .ne = {COLS, ROWS, 1, 1},
                    .data = w, .nbytes = (uint64_t)ROWS * COLS * 2};
    static const uint32_t types[] = {KLD_TYPE_Q8_0, KLD_TYPE_Q4_0, KLD_TYPE_Q4_K, KLD_TYPE_Q5_K,
                                     KLD_TYPE_Q6_K, KLD_TYPE_IQ4_XS};
    printf("type     threads   Mvalues/s   spread\n");
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        for (int nt = 1; nt <= threads; nt += (int)(threads > 1 ? threads - 1 : 1)) {
            double *x = malloc((size_t)reps * sizeof *x);
            kld_error err = {0};
            for (int r = 0; r < reps; r++) {
                double t0 = kb_now();
                if (kld_quant_tensor(&t, types[k], NULL, nt, dst, &err)) {
                    fprintf(stderr, "%s\n", err.msg);
                    return 1;
                }
                x[r] = (double)ROWS * COLS / (kb_now() - t0) / 1e6;
            }
            kb_summary s = kb_summarize(x, (int)reps);
            char name[64];
            snprintf(name, sizeof name, "%s_t%d", kld_type_info_get(types[k])->name, nt);
            printf("%-8s %7d %11.2f %8.3f\n", kld_type_info_get(types[k])->name, nt, s.median, s.spread);
            kb_emit("bench_quantize", name, "Mvalues/s", "higher", &s, NULL);
            free(x);
            if (threads == 1) break;
        }
    }
    if (model) {
        const char *lq = getenv("LLAMA_QUANTIZE");
        char cmd[2048];
        double *a = malloc((size_t)reps * sizeof *a), *b = malloc((size_t)reps * sizeof *b);
        int nb = 0;
        for (int r = 0; r < reps; r++) {
            snprintf(cmd, sizeof cmd, "build/kldeval quantize -q --threads %lld '%s' /tmp/bench_quantize_kld.gguf %s",
                     threads, model, policy);
            a[r] = run_cmd(cmd);
            if (lq) {
                snprintf(cmd, sizeof cmd, "'%s' '%s' /tmp/bench_quantize_lcpp.gguf %s %lld >/dev/null 2>&1",
                         lq, model, policy, threads);
                b[nb++] = run_cmd(cmd);
            }
        }
        /* quantize-on-load: a one-token forward of MODEL@POLICY less the same
         * forward of MODEL as stored (both load and run alike otherwise) */
        double *q = malloc((size_t)reps * sizeof *q), *p = malloc((size_t)reps * sizeof *p);
        for (int r = 0; r < reps; r++) {
            snprintf(cmd, sizeof cmd, "build/kldeval logits --threads %lld -m '%s@%s' --ids 1 --top 1 >/dev/null 2>&1",
                     threads, model, policy);
            q[r] = run_cmd(cmd);
            snprintf(cmd, sizeof cmd, "build/kldeval logits --threads %lld -m '%s' --ids 1 --top 1 >/dev/null 2>&1",
                     threads, model);
            p[r] = run_cmd(cmd);
        }
        kb_summary sq = kb_summarize(q, (int)reps), sp = kb_summarize(p, (int)reps);
        double on_load = sq.median - sp.median;
        kb_summary sa = kb_summarize(a, (int)reps);
        printf("kldeval quantize %s: %.3f s (median of %lld)\n", policy, sa.median, reps);
        kb_emit("bench_quantize", "kldeval_quantize_model", "s", "lower", &sa, NULL);
        if (nb) {
            kb_summary sb = kb_summarize(b, nb);
            printf("llama-quantize   %s: %.3f s; ratio kldeval/llama-quantize %.3f\n", policy, sb.median,
                   sa.median / sb.median);
            kb_emit("bench_quantize", "llama_quantize_model", "s", "lower", &sb,
                    json_pack("{s:f}", "ratio_kldeval_over_llama", sa.median / sb.median));
            printf("quantize on load %s: %.3f s (logits of MODEL@%s %.3f s − MODEL %.3f s); ratio to "
                   "llama-quantize %.3f\n", policy, on_load, policy, sq.median, sp.median, on_load / sb.median);
        } else {
            printf("quantize on load %s: %.3f s (logits of MODEL@%s %.3f s − MODEL %.3f s)\n", policy, on_load,
                   policy, sq.median, sp.median);
        }
        free(q);
        free(p);
        remove("/tmp/bench_quantize_kld.gguf");
        remove("/tmp/bench_quantize_lcpp.gguf");
        free(a);
        free(b);
    }
    free(w);
    free(dst);
    return 0;
}
