/* bench_gemm.c — the weight GEMM alone (kld_gemm_weights) per kernel set
 * and weight type: a prefill shape (M 512, K 2048, N 2048) and two decode
 * shapes (M 1, K 2048: N 5632 streams the weights from memory, N 128 keeps
 * them in cache), one thread by default. Each figure is the
 * median and the best of --reps runs: on a shared machine the best is the
 * closer estimate of what the kernel can do, the median says how busy the
 * machine was.
 *
 * Baselines in the same run: the scalar reference set (decode shapes only:
 * it is slow) and, when an OpenBLAS library can be loaded at run time
 * (libopenblas.so.0; never a build dependency), its cblas_sgemm on the same
 * f32 prefill shape — set OPENBLAS_CORETYPE (e.g. SkylakeX) to force its
 * best kernel for this benchmark. */
#include "common_bench.h"
#include "engine/gemm.h"
#include "engine/pool.h"
#include "tensor/types.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <time.h>

/* CPU seconds of the whole process: on a machine shared with other jobs,
 * GFLOP per CPU-second measures the kernel, not the neighbours. */
static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef void (*sgemm_fn)(int, int, int, int, int, int, float, const float *, int, const float *, int,
                         float, float *, int);

static uint64_t rs = 88172645463325252ull;
static float frand(void) {
    rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
    return (float)((double)(rs >> 11) / 9007199254740992.0 * 2 - 1);
}

typedef struct shape { const char *name; int64_t M, K, N; } shape;

/* repacked: the product over the set's repacked copy of W (weight_pack.c),
 * as the forward pass runs f16, q4_K and q6_K matrices on SIMD sets. */
static void run(const char *set, const kld_engine_kernels *kr, const shape *sh, uint32_t type,
                int threads, int reps, bool repacked) {
    const kld_type_info *ti = kld_type_info_get(type);
    const int64_t M = sh->M, K = sh->K, N = sh->N;
    float *Wf = malloc(sizeof(float) * (size_t)(N * K)), *A = malloc(sizeof(float) * (size_t)(M * K)),
          *C = malloc(sizeof(float) * (size_t)(M * N));
    const uint64_t row_bytes = (uint64_t)(K / ti->block_size) * (uint64_t)ti->type_size;
    uint8_t *Wq = malloc(row_bytes * (uint64_t)N);
    for (int64_t i = 0; i < N * K; i++) Wf[i] = frand();
    for (int64_t i = 0; i < M * K; i++) A[i] = frand();
    for (int64_t n = 0; n < N; n++) ti->quantize_row(Wf + n * K, Wq + n * row_bytes, K);
    kld_tensor W = {.name = "w", .type = type, .n_dims = 2, .ne = {K, N, 1, 1}, .data = Wq,
                    .nbytes = row_bytes * (uint64_t)N};
    const size_t stride = KLD_GEMM_SCRATCH_FLOATS;
    float *scratch = aligned_alloc(64, sizeof(float) * stride * (size_t)threads);
    kld_pool *pool = kld_pool_create(threads);
    double *g = malloc(sizeof(double) * (size_t)reps);
    const int inner = M > 1 ? 1 : N < 1024 ? 400 : 20;
    kld_repacked rp = {0};
    if (repacked) {
        rp.panel_bytes = kld_repack_panel_bytes(type, K);
        uint8_t *P = malloc(rp.panel_bytes * (uint64_t)((N + KLD_REPACK_ROWS - 1) / KLD_REPACK_ROWS));
        kld_repack_matrix(pool, kr, &W, P);
        rp.data = P;
    }
    kld_gemm_weights_repacked(pool, kr, &W, rp, M, A, K, C, N, scratch, stride); /* warm-up */
    for (int r = 0; r < reps; r++) {
        double t = cpu_now();
        for (int i = 0; i < inner; i++) kld_gemm_weights_repacked(pool, kr, &W, rp, M, A, K, C, N, scratch, stride);
        t = (cpu_now() - t) / inner;
        g[r] = 2.0 * (double)M * (double)N * (double)K / t / 1e9;
    }
    kb_summary s = kb_summarize(g, reps);
    const double gbs = s.max / (2.0 * (double)M * (double)N * (double)K) * (double)(row_bytes * (uint64_t)N);
    char label[32];
    snprintf(label, sizeof label, "%s%s", set, repacked ? "+rp" : "");
    printf("%-7s %-8s %-6s %2d thr  median %7.1f GFLOP/cpu-s  best %7.1f  (%5.1f GB/cpu-s of weights at best)  spread %4.1f%%\n",
           sh->name, label, ti->name, threads, s.median, s.max, gbs, 100 * s.spread);
    char name[96];
    /* the AVX2 set's repacked rows keep their old name ("repacked") */
    snprintf(name, sizeof name, "gemm_%s_%s%s_%s_t%d", sh->name, repacked && !strcmp(set, "avx2") ? "repacked" : set,
             repacked && strcmp(set, "avx2") ? "_repacked" : "", ti->name, threads);
    kb_emit("bench_gemm", name, "GFLOP/cpu-s", "higher", &s, json_pack("{s:f}", "best", s.max));
    kld_pool_free(pool);
    free((void *)rp.data), free(g), free(scratch), free(Wq), free(Wf), free(A), free(C);
}

static void openblas(const shape *sh, int reps) {
    void *h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
    sgemm_fn f = h ? (sgemm_fn)(uintptr_t)dlsym(h, "cblas_sgemm") : NULL;
    if (!f) {
        printf("openblas: not loadable (libopenblas.so.0): no sgemm baseline in this run\n");
        return;
    }
    void (*set_threads)(int) = (void (*)(int))(uintptr_t)dlsym(h, "openblas_set_num_threads");
    if (set_threads) set_threads(1);
    const int M = (int)sh->M, N = (int)sh->N, K = (int)sh->K;
    float *A = malloc(sizeof(float) * (size_t)M * K), *B = malloc(sizeof(float) * (size_t)N * K),
          *C = malloc(sizeof(float) * (size_t)M * N);
    for (int64_t i = 0; i < (int64_t)M * K; i++) A[i] = frand();
    for (int64_t i = 0; i < (int64_t)N * K; i++) B[i] = frand();
    double *g = malloc(sizeof(double) * (size_t)reps);
    /* row-major C = A · B^T: CblasRowMajor 101, NoTrans 111, Trans 112 */
    f(101, 111, 112, M, N, K, 1.0f, A, K, B, K, 0.0f, C, N);
    for (int r = 0; r < reps; r++) {
        double t = cpu_now();
        f(101, 111, 112, M, N, K, 1.0f, A, K, B, K, 0.0f, C, N);
        g[r] = 2.0 * M * N * (double)K / (cpu_now() - t) / 1e9;
    }
    kb_summary s = kb_summarize(g, reps);
    const char *ct = getenv("OPENBLAS_CORETYPE");
    printf("%-7s %-8s %-6s  1 thr  median %7.1f GFLOP/cpu-s  best %7.1f  (OPENBLAS_CORETYPE=%s)\n", sh->name,
           "openblas", "f32", s.median, s.max, ct ? ct : "(auto)");
    kb_emit("bench_gemm", "gemm_prefill_openblas_f32_t1", "GFLOP/cpu-s", "higher", &s, json_pack("{s:f}", "best", s.max));
    free(g), free(A), free(B), free(C);
}

int main(int argc, char **argv) {
    int reps = 5, threads = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: bench_gemm [--reps N] [--threads N] [--quick]\n");
            return 0;
        } else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--quick")) reps = 2;
        else if (!strcmp(argv[i], "--cache") && i + 1 < argc) i++; /* bench/run passes it to everyone */
        else return fprintf(stderr, "bench_gemm: unknown flag '%s'\n", argv[i]), 2;
    }
    if (reps < 1 || threads < 1) return fprintf(stderr, "bench_gemm: --reps and --threads must be >= 1\n"), 2;
    kld_kernels_init();
    const shape pre = {"prefill", 512, 2048, 2048}, dec = {"decode", 1, 2048, 5632};
    /* the decode kernel alone: 128 rows stay in L2, so memory bandwidth does not bound it */
    const shape dec_l2 = {"decodeL2", 1, 2048, 128};
    const kld_engine_kernels *sets[3] = {kld_engine_kernels_ref(), kld_engine_kernels_avx2(),
                                         kld_engine_kernels_avx512()};
    static const uint32_t types[] = {KLD_TYPE_F32,  KLD_TYPE_F16,  KLD_TYPE_BF16, KLD_TYPE_Q8_0,
                                     KLD_TYPE_Q4_0, KLD_TYPE_Q4_K, KLD_TYPE_Q5_K, KLD_TYPE_Q6_K};
    printf("bench_gemm: %d thread(s), %d reps, dequantizers: %s\n", threads, reps, kld_kernels_name());
    openblas(&pre, reps);
    const shape *shapes[3] = {&pre, &dec, &dec_l2};
    for (int sh = 0; sh < 3; sh++)
        for (int si = sh ? 0 : 1; si < 3; si++) /* the ref set is too slow for the prefill shape */
            for (size_t t = 0; sets[si] && t < sizeof types / sizeof types[0]; t++) {
                run(sets[si]->name, sets[si], shapes[sh], types[t], threads, si ? reps : 1, false);
                if (si >= 1 && sets[si]->repack && sets[si]->repack(types[t]))
                    run(sets[si]->name, sets[si], shapes[sh], types[t], threads, reps, true);
            }
    return 0;
}
