/* bench_forward.c — forward-pass throughput of the engine at the
 * TinyLlama-1.1B shape (n_embd 2048, 22 layers, 32/4 heads, ffn 5632,
 * vocab 32000) for f16 and q4_K_M weights: prefill tokens/s at chunk 512 on
 * 2 threads (hidden states only, as llama-bench's pp512 measures, and with
 * logits for every row, as the KL driver needs), decode tokens/s, peak RSS.
 *
 * Baselines in the same run: the machine's float32 FMA peak (a register-
 * only loop), so each prefill figure also reads as a fraction of what the
 * cores can do; and the scalar reference kernels (KLD_KERNELS=ref) for the
 * --quick shape. The comparison with llama.cpp is bench/run's, on the same
 * files in the same run (a figure from another machine or run is no
 * baseline). Models are synthesized once into the cache shared with
 * bench_kl (same file names). */
#include "common_bench.h"
#include "engine/engine.h"
#include "engine/kernels.h"
#include "synth/synth.h"

#include <errno.h>
#include <immintrin.h>
#include <math.h>
#include <sys/stat.h>

typedef struct opts {
    kld_synth_options shape;
    const char *types[4];
    int n_types;
    long long tokens, chunk, threads, reps, decode;
    const char *cache;
    bool quick;
} opts;

static void usage(FILE *f, const opts *d) {
    fprintf(f,
            "usage: bench_forward [flags]\n"
            "  --dim N --layers N --heads N --kv-heads N --ff N --vocab N --seed N   shape (TinyLlama-1.1B)\n"
            "  --types LIST     weight types, comma-separated (default f16,q4_K_M)\n"
            "  --tokens N       tokens prefilled per repetition (default %lld)\n"
            "  --chunk N        prefill chunk (default %lld)\n"
            "  --threads N      threads (default %lld)\n"
            "  --decode N       decode steps timed after the prefill (default %lld)\n"
            "  --reps N         repetitions (default %lld)\n"
            "  --cache DIR      synthesized models (default $KLD_BENCH_CACHE or bench/cache)\n"
            "  --quick          n_embd 256, 2 layers, 4/2 heads, ff 768, vocab 4096, 256 tokens, chunk 128\n",
            d->tokens, d->chunk, d->threads, d->decode, d->reps);
}

static void defaults(opts *o) {
    memset(o, 0, sizeof *o);
    kb_shape_tinyllama(&o->shape);
    o->types[0] = "f16";
    o->types[1] = "q4_K_M";
    o->n_types = 2;
    o->tokens = 512;
    o->chunk = 512;
    o->threads = 2;
    o->decode = 16;
    o->reps = 3;
    o->cache = kb_cache_dir();
}

static int parse(int argc, char **argv, opts *o) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        long long v = 0;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout, o);
            exit(0);
        } else if (!strcmp(a, "--quick")) {
            o->quick = true;
            kb_shape_quick(&o->shape);
            o->tokens = 256;
            o->chunk = 128;
        } else if (!strcmp(a, "--cache") || !strcmp(a, "--types")) {
            if (i + 1 >= argc) return fprintf(stderr, "%s: missing value\n", a), 2;
            if (!strcmp(a, "--cache")) o->cache = argv[++i];
            else {
                o->n_types = 0;
                for (char *t = strtok(argv[++i], ","); t && o->n_types < 4; t = strtok(NULL, ","))
                    o->types[o->n_types++] = t;
            }
        } else if (!strcmp(a, "--dim") || !strcmp(a, "--layers") || !strcmp(a, "--heads") ||
                   !strcmp(a, "--kv-heads") || !strcmp(a, "--ff") || !strcmp(a, "--vocab") ||
                   !strcmp(a, "--seed") || !strcmp(a, "--tokens") || !strcmp(a, "--chunk") ||
                   !strcmp(a, "--threads") || !strcmp(a, "--reps") || !strcmp(a, "--decode")) {
            if (!kb_arg_int(argc, argv, &i, 0, 1LL << 40, &v)) return 2;
            if (!strcmp(a, "--dim")) o->shape.n_embd = v;
            else if (!strcmp(a, "--layers")) o->shape.n_layer = v;
            else if (!strcmp(a, "--heads")) o->shape.n_head = v;
            else if (!strcmp(a, "--kv-heads")) o->shape.n_head_kv = v;
            else if (!strcmp(a, "--ff")) o->shape.n_ff = v;
            else if (!strcmp(a, "--vocab")) o->shape.n_vocab = (int32_t)v;
            else if (!strcmp(a, "--seed")) o->shape.seed = (uint64_t)v;
            else if (!strcmp(a, "--tokens")) o->tokens = v;
            else if (!strcmp(a, "--chunk")) o->chunk = v;
            else if (!strcmp(a, "--threads")) o->threads = v;
            else if (!strcmp(a, "--reps")) o->reps = v;
            else o->decode = v;
        } else {
            fprintf(stderr, "bench_forward: unknown flag '%s'\n", a);
            usage(stderr, o);
            return 2;
        }
    }
    if (o->tokens < 1 || o->chunk < 1 || o->threads < 1 || o->reps < 1) {
        fprintf(stderr, "bench_forward: --tokens, --chunk, --threads and --reps must be >= 1\n");
        return 2;
    }
    return 0;
}

/* Float32 FMA peak of one core: 12 independent chains in named registers
 * (an array of vectors would be spilled to memory), of the widest vectors
 * the CPU has: 8 floats (AVX2) or 16 (AVX-512; two 512-bit FMA pipes on
 * Zen 5 double the AVX2 figure, so an AVX2 probe would understate it). */
#define FMA_PEAK_BODY(V, SET1, FMADD, LANES)                                                   \
    V a0 = SET1(0.0f), a1 = SET1(0.1f), a2 = SET1(0.2f), a3 = SET1(0.3f), a4 = SET1(0.4f),   \
      a5 = SET1(0.5f), a6 = SET1(0.6f), a7 = SET1(0.7f), a8 = SET1(0.8f), a9 = SET1(0.9f),   \
      a10 = SET1(1.0f), a11 = SET1(1.1f);                                                    \
    const V b = SET1(0.9999f), c = SET1(1e-4f);                                              \
    const long n = 20000000;                                                                 \
    double t = kb_now();                                                                     \
    for (long i = 0; i < n; i++) {                                                           \
        a0 = FMADD(a0, b, c); a1 = FMADD(a1, b, c); a2 = FMADD(a2, b, c);                    \
        a3 = FMADD(a3, b, c); a4 = FMADD(a4, b, c); a5 = FMADD(a5, b, c);                    \
        a6 = FMADD(a6, b, c); a7 = FMADD(a7, b, c); a8 = FMADD(a8, b, c);                    \
        a9 = FMADD(a9, b, c); a10 = FMADD(a10, b, c); a11 = FMADD(a11, b, c);                \
    }                                                                                        \
    t = kb_now() - t;                                                                        \
    volatile float sink[LANES];                                                              \
    V s = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11;                      \
    memcpy((void *)sink, &s, sizeof s);                                                      \
    return (double)n * 12 * 2 * LANES / t / 1e9;

__attribute__((target("avx2,fma"))) static double fma_peak_avx2(void) {
    FMA_PEAK_BODY(__m256, _mm256_set1_ps, _mm256_fmadd_ps, 8)
}

__attribute__((target("avx512f"))) static double fma_peak_avx512(void) {
    FMA_PEAK_BODY(__m512, _mm512_set1_ps, _mm512_fmadd_ps, 16)
}
#undef FMA_PEAK_BODY

static double fma_peak_gflops(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") ? fma_peak_avx512() : fma_peak_avx2();
}

/* Multiply-adds per token in the weight matrices (the LM head included). */
static double matmul_flops_per_token(const kld_hparams *hp, bool with_head) {
    double E = (double)hp->n_embd, q = (double)(hp->n_head * hp->head_dim),
           kv = (double)(hp->n_head_kv * hp->head_dim), ff = (double)hp->n_ff;
    double per_layer = E * q * 2 + E * kv * 2 + 3 * E * ff;
    return 2 * ((double)hp->n_layer * per_layer + (with_head ? E * (double)hp->n_vocab : 0));
}

static int bench_type(const opts *o, const char *type, double peak) {
    char path[4200];
    if (kb_cached_model("bench_forward", o->cache, &o->shape, type, path, sizeof path)) return 1;
    kb_peak_rss_reset();
    kld_error err = {0};
    kld_model *m = NULL;
    kld_session *s = NULL;
    double t0 = kb_now();
    if (kld_model_open(path, NULL, &m, &err) != KLD_OK ||
        kld_session_create(m, o->tokens + o->decode, o->chunk < o->tokens ? o->chunk : o->tokens,
                           (int)o->threads, &s, &err) != KLD_OK) {
        fprintf(stderr, "bench_forward: %s: %s\n", path, err.msg);
        kld_model_close(m);
        return 1;
    }
    const double open_s = kb_now() - t0;
    const kld_hparams *hp = kld_model_hparams(m);
    const int64_t nv = hp->n_vocab, chunk = o->chunk < o->tokens ? o->chunk : o->tokens;
    int32_t *ids = malloc(sizeof *ids * (size_t)o->tokens);
    float *logits = malloc(sizeof(float) * (size_t)(chunk * nv));
    uint64_t x = 0x1d5;
    for (long long i = 0; i < o->tokens; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = i == 0 ? 1 : 3 + (int32_t)((x >> 33) % (uint64_t)(nv - 3));
    }
    double *pf = malloc(sizeof(double) * (size_t)o->reps), *pl = malloc(sizeof(double) * (size_t)o->reps),
           *dc = malloc(sizeof(double) * (size_t)o->reps);
    int rc = 0;
    for (long long r = 0; r < o->reps && !rc; r++) {
        for (int with_logits = 0; with_logits < 2 && !rc; with_logits++) {
            kld_session_reset(s);
            double t = kb_now();
            for (long long i = 0; i < o->tokens && !rc; i += chunk) {
                int64_t c = o->tokens - i < chunk ? o->tokens - i : chunk;
                /* Without logits only the last row goes through the LM head (llama-bench). */
                int64_t first = with_logits ? 0 : c - 1;
                rc = kld_session_eval_rows(s, ids + i, c, first, logits, &err) != KLD_OK;
            }
            (with_logits ? pl : pf)[r] = (double)o->tokens / (kb_now() - t);
        }
        double t = kb_now();
        int32_t tok = ids[o->tokens - 1];
        for (long long d = 0; d < o->decode && !rc; d++)
            rc = kld_session_decode(s, tok, logits, &err) != KLD_OK;
        dc[r] = o->decode > 0 ? (double)o->decode / (kb_now() - t) : 0;
    }
    if (rc) fprintf(stderr, "bench_forward: eval: %s\n", err.msg);
    uint64_t rss = kb_peak_rss_bytes();
    if (!rc) {
        kb_summary sp = kb_summarize(pf, (int)o->reps), sl = kb_summarize(pl, (int)o->reps),
                   sd = kb_summarize(dc, (int)o->reps);
        const double gf = matmul_flops_per_token(hp, false) * sp.median / 1e9;
        const double gfl = matmul_flops_per_token(hp, true) * sl.median / 1e9;
        printf("%-7s prefill %8.2f tok/s (spread %4.1f%%, %6.1f GFLOP/s = %3.0f%% of %lld-core FMA peak, "
               "kernels %s)   with all logits %8.2f tok/s   decode %7.2f tok/s   peak RSS %.0f MiB   open %.2f s\n",
               type, sp.median, 100 * sp.spread, gf, 100 * gf / (peak * (double)o->threads), o->threads,
               kld_engine_kernels_get()->name, sl.median, sd.median, (double)rss / 1048576.0, open_s);
        char name[64];
        snprintf(name, sizeof name, "prefill_%s", type);
        json_t *extra = json_pack("{s:f,s:f,s:s,s:I,s:s}", "gflops", gf, "fraction_of_fma_peak",
                                  gf / (peak * (double)o->threads), "model", path, "threads",
                                  (json_int_t)o->threads, "kernels", kld_engine_kernels_get()->name);
        kb_emit("bench_forward", name, "tok/s", "higher", &sp, extra);
        snprintf(name, sizeof name, "prefill_all_logits_%s", type);
        kb_emit("bench_forward", name, "tok/s", "higher", &sl, json_pack("{s:f}", "gflops", gfl));
        snprintf(name, sizeof name, "decode_%s", type);
        kb_emit("bench_forward", name, "tok/s", "higher", &sd,
                json_pack("{s:I,s:I}", "steps", (json_int_t)o->decode, "cache_tokens", (json_int_t)o->tokens));
        snprintf(name, sizeof name, "peak_rss_%s", type);
        kb_summary sr = {(double)rss, (double)rss, (double)rss, 0, 1};
        kb_emit("bench_forward", name, "bytes", "lower", &sr, NULL);
    }
    free(pf), free(pl), free(dc), free(ids), free(logits);
    kld_session_free(s);
    kld_model_close(m);
    return rc;
}

int main(int argc, char **argv) {
    opts o;
    defaults(&o);
    int rc = parse(argc, argv, &o);
    if (rc) return rc;
    double peak = fma_peak_gflops();
    printf("bench_forward: d%lld l%lld h%lld/%lld ff%lld v%d, %lld tokens, chunk %lld, %lld threads, "
           "%lld reps; FMA peak %.1f GFLOP/s per core (measured now)\n",
           (long long)o.shape.n_embd, (long long)o.shape.n_layer, (long long)o.shape.n_head,
           (long long)o.shape.n_head_kv, (long long)o.shape.n_ff, o.shape.n_vocab, o.tokens, o.chunk,
           o.threads, o.reps, peak);
    kb_summary pk = {peak, peak, peak, 0, 1};
    kb_emit("bench_forward", "fma_peak_per_core", "GFLOP/s", "higher", &pk, NULL);
    for (int t = 0; t < o.n_types && !rc; t++) rc = bench_type(&o, o.types[t], peak);
    return rc;
}
