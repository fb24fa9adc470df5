/* test_engine.c — the engine's kernels and building blocks: AVX2 kernels
 * equal the scalar references bit for bit; the references are accurate
 * against double-precision math; the weight GEMM equals a plain fma chain
 * over dequantized weights for every type and thread count; the pool runs
 * every thread exactly once per job; the memory plan adds up. */
#include "engine/gemm.h"
#include "engine/internal.h"
#include "engine/kernels.h"
#include "engine/pool.h"
#include "testlib.h"

#include <inttypes.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static double urand(void) { /* xorshift64*, uniform [0, 1) */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (double)((rng_state * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}
static float frand(float scale) { return (float)((urand() * 2 - 1) * scale); }

static void test_ukernel(const kld_engine_kernels *ref, const kld_engine_kernels *simd) {
    static const int64_t kcs[] = {0, 1, 7, 64, 301};
    static const int nrs[] = {1, 5, 8, 9, 15, 16};
    const int64_t lda = 311, ldb = 21, ldc = 19;
    float *A = malloc(sizeof(float) * KLD_MR * lda), *B = malloc(sizeof(float) * 302 * ldb);
    float C0[KLD_MR * 19], C1[KLD_MR * 19], Cinit[KLD_MR * 19];
    for (int64_t i = 0; i < KLD_MR * lda; i++) A[i] = frand(1);
    for (int64_t i = 0; i < 302 * ldb; i++) B[i] = frand(1);
    for (int i = 0; i < KLD_MR * 19; i++) Cinit[i] = frand(3);
    int bad = 0, inaccurate = 0, runs = 0;
    for (int mr = 1; mr <= KLD_MR; mr++)
        for (size_t a = 0; a < sizeof nrs / sizeof nrs[0]; a++)
            for (size_t b = 0; b < sizeof kcs / sizeof kcs[0]; b++)
                for (int load = 0; load < 2; load++) {
                    memcpy(C0, Cinit, sizeof C0);
                    memcpy(C1, Cinit, sizeof C1);
                    ref->ukernel(mr, nrs[a], kcs[b], A, lda, B, ldb, C0, ldc, load);
                    simd->ukernel(mr, nrs[a], kcs[b], A, lda, B, ldb, C1, ldc, load);
                    bad += memcmp(C0, C1, sizeof C0) != 0;
                    for (int m = 0; m < mr; m++)
                        for (int n = 0; n < nrs[a]; n++) {
                            double acc = load ? Cinit[m * ldc + n] : 0;
                            for (int64_t k = 0; k < kcs[b]; k++)
                                acc += (double)A[m * lda + k] * B[k * ldb + n];
                            inaccurate += fabs(acc - C0[m * ldc + n]) > 1e-5 * (1 + fabs(acc));
                        }
                    /* columns >= nr and rows >= mr must be untouched */
                    for (int m = 0; m < KLD_MR; m++)
                        for (int n = 0; n < ldc; n++)
                            if ((m >= mr || n >= nrs[a]) && C1[m * ldc + n] != Cinit[m * ldc + n]) bad++;
                    runs++;
                }
    CHECK(bad == 0, "ukernel: %d of %d avx2 results differ from ref", bad, runs);
    CHECK(inaccurate == 0, "ukernel ref: %d elements off the double-precision product", inaccurate);
    free(A);
    free(B);
}

static void test_pack(const kld_engine_kernels *ref, const kld_engine_kernels *simd) {
    const int64_t ld = 45;
    float src[16 * 45], p0[40 * 16], p1[40 * 16];
    for (int i = 0; i < 16 * 45; i++) src[i] = frand(1);
    int bad = 0;
    for (int rows = 1; rows <= 16; rows++)
        for (int64_t kc = 1; kc <= 40; kc += 3) {
            ref->pack16(src, ld, rows, kc, p0);
            simd->pack16(src, ld, rows, kc, p1);
            bad += memcmp(p0, p1, (size_t)kc * 16 * sizeof(float)) != 0;
            bad += p0[(kc - 1) * 16 + rows - 1] != src[(rows - 1) * ld + kc - 1];
            if (rows < 16) bad += p0[rows] != 0.0f;
        }
    CHECK(bad == 0, "pack16: %d mismatches", bad);
}

static void test_exp(void) {
    double worst = 0;
    for (int i = 0; i <= 200000; i++) {
        float x = -87.0f + 175.0f * (float)i / 200000.0f;
        double e = exp((double)x), r = fabs(kld_expf_ref(x) - e) / e;
        if (r > worst) worst = r;
    }
    printf("exp: worst relative error %.3e over [-87, 88]\n", worst);
    CHECK(worst < 3.6e-7, "exp: relative error %g above 3 ulp", worst);
    CHECK(kld_expf_ref(-INFINITY) == 0.0f && kld_expf_ref(-1000.0f) == 0.0f, "exp(-inf) must be 0");
    CHECK(kld_expf_ref(0.0f) == 1.0f, "exp(0) = %g", (double)kld_expf_ref(0.0f));
}

static void test_rows(const kld_engine_kernels *ref, const kld_engine_kernels *simd) {
    enum { N = 203 };
    float x[N], a[N], b[N], up[N];
    int bad = 0, inaccurate = 0;
    for (int64_t n = 1; n <= N; n += 7) {
        for (int i = 0; i < N; i++) {
            x[i] = frand(30);
            up[i] = frand(2);
        }
        x[n / 2] = -INFINITY; /* masked key */
        memcpy(a, x, sizeof x);
        memcpy(b, x, sizeof x);
        if (n > 1) {
            ref->softmax(a, n);
            simd->softmax(b, n);
            bad += memcmp(a, b, sizeof a) != 0;
            double mx = -INFINITY, s = 0;
            for (int64_t i = 0; i < n; i++) mx = fmax(mx, x[i]);
            for (int64_t i = 0; i < n; i++) s += exp((double)x[i] - mx);
            /* x - max is rounded to float first: allow its half-ulp in the exponent */
            for (int64_t i = 0; i < n; i++) {
                double v = exp((double)x[i] - mx) / s;
                inaccurate += fabs(a[i] - v) > (1e-6 + 1.2e-7 * fabs(x[i] - mx)) * v + 1e-30;
            }
        }
        x[n / 2] = 0.5f;
        memcpy(a, x, sizeof x);
        memcpy(b, x, sizeof x);
        ref->silu_mul(a, up, n);
        simd->silu_mul(b, up, n);
        bad += memcmp(a, b, sizeof a) != 0;
        for (int64_t i = 0; i < n; i++) {
            double v = x[i] / (1 + exp(-(double)x[i])) * up[i];
            inaccurate += fabs(a[i] - v) > 1e-6 * fabs(v) + 1e-30;
        }
        memcpy(a, x, sizeof x);
        memcpy(b, x, sizeof x);
        ref->gelu_tanh_mul(a, up, n);
        simd->gelu_tanh_mul(b, up, n);
        bad += memcmp(a, b, sizeof a) != 0;
        for (int64_t i = 0; i < n; i++) {
            double t = x[i], v = 0.5 * t * (1 + tanh(0.7978845608028654 * (t + 0.044715 * t * t * t))) * up[i];
            inaccurate += fabs(a[i] - v) > 1e-6 * fabs(v) + 1e-6 * fabs(up[i]);
        }
        memcpy(a, x, sizeof x);
        memcpy(b, x, sizeof x);
        ref->softcap(a, n, 20.0f);
        simd->softcap(b, n, 20.0f);
        bad += memcmp(a, b, sizeof a) != 0;
        for (int64_t i = 0; i < n; i++) inaccurate += fabs(a[i] - 20 * tanh(x[i] / 20.0)) > 4e-6;
        double s0 = ref->sum_exp(x, n, 30.0f), s1 = simd->sum_exp(x, n, 30.0f), sd = 0;
        for (int64_t i = 0; i < n; i++) sd += exp((double)x[i] - 30.0);
        bad += s0 != s1;
        inaccurate += fabs(s0 - sd) > 1e-6 * sd;
    }
    CHECK(bad == 0, "row kernels: %d avx2 results differ from ref", bad);
    CHECK(inaccurate == 0, "row kernels: %d values off double-precision math", inaccurate);
    float big[1000];
    for (int i = 0; i < 1000; i++) big[i] = frand(40);
    double mx = -INFINITY, s = 0;
    for (int i = 0; i < 1000; i++) mx = fmax(mx, big[i]);
    for (int i = 0; i < 1000; i++) s += exp(big[i] - mx);
    CHECK(fabs(kld_logsumexp(big, 1000) - (mx + log(s))) < 1e-6, "logsumexp");
}

/* Weight GEMM over every type with a quantizer: equals the fmaf chain over
 * the dequantized rows, for 1, 2 and 3 threads and both kernel sets. */
static void test_gemm_weights(const kld_engine_kernels *ref, const kld_engine_kernels *simd) {
    static const uint32_t types[] = {KLD_TYPE_F32, KLD_TYPE_F16, KLD_TYPE_BF16, KLD_TYPE_Q8_0,
                                     KLD_TYPE_Q4_0, KLD_TYPE_Q4_K, KLD_TYPE_Q6_K, KLD_TYPE_IQ4_XS};
    const int64_t K = 768, N = 45, M = 13, lda = 770, ldc = 47;
    float *Wf = malloc(sizeof(float) * N * K), *Wd = malloc(sizeof(float) * N * K);
    float *A = malloc(sizeof(float) * M * lda), *C = malloc(sizeof(float) * M * ldc),
          *E = malloc(sizeof(float) * M * ldc);
    uint8_t *Wq = malloc((size_t)(N * K) * 4);
    size_t stride = KLD_GEMM_SCRATCH_FLOATS;
    float *scratch = aligned_alloc(64, sizeof(float) * stride * 3);
    for (int64_t i = 0; i < N * K; i++) Wf[i] = frand(1);
    for (int64_t i = 0; i < M * lda; i++) A[i] = frand(1);
    kld_pool *pools[3] = {kld_pool_create(1), kld_pool_create(2), kld_pool_create(3)};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        const kld_type_info *ti = kld_type_info_get(types[t]);
        CHECK(ti && ti->quantize_row, "type %u must have a quantizer", types[t]);
        if (!ti || !ti->quantize_row) continue;
        uint64_t row_bytes = (uint64_t)(K / ti->block_size) * (uint64_t)ti->type_size;
        for (int64_t n = 0; n < N; n++) ti->quantize_row(Wf + n * K, Wq + n * row_bytes, K);
        for (int64_t n = 0; n < N; n++) ti->to_float_ref(Wq + n * row_bytes, Wd + n * K, K);
        kld_tensor W = {.name = "w", .type = types[t], .n_dims = 2, .ne = {K, N, 1, 1},
                        .data = Wq, .nbytes = row_bytes * (uint64_t)N};
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                float acc = 0;
                for (int64_t k = 0; k < K; k++) acc = fmaf(A[m * lda + k], Wd[n * K + k], acc);
                E[m * ldc + n] = acc;
            }
        int bad = 0;
        for (int p = 0; p < 3; p++)
            for (int kset = 0; kset < 2; kset++)
                for (int64_t mm = 1; mm <= M; mm += 6) {
                    memset(C, 0, sizeof(float) * M * ldc);
                    kld_gemm_weights(pools[p], kset ? simd : ref, &W, mm, A, lda, C, ldc, scratch, stride);
                    for (int64_t m = 0; m < mm; m++)
                        bad += memcmp(C + m * ldc, E + m * ldc, sizeof(float) * N) != 0;
                }
        CHECK(bad == 0, "gemm %s: %d rows differ from the fma chain", ti->name, bad);
    }
    for (int p = 0; p < 3; p++) kld_pool_free(pools[p]);
    free(scratch);
    free(Wq);
    free(Wf);
    free(Wd);
    free(A);
    free(C);
    free(E);
}

static void test_gemm_strided(const kld_engine_kernels *ref, const kld_engine_kernels *simd) {
    const int64_t M = 11, N = 37, K = 29, lda = 31, ldb = 41, ldc = 39;
    float A[11 * 31], B[29 * 41], C0[11 * 39], C1[11 * 39];
    for (size_t i = 0; i < sizeof A / 4; i++) A[i] = frand(1);
    for (size_t i = 0; i < sizeof B / 4; i++) B[i] = frand(1);
    kld_gemm_strided(ref, M, N, K, A, lda, B, ldb, C0, ldc);
    kld_gemm_strided(simd, M, N, K, A, lda, B, ldb, C1, ldc);
    int bad = 0;
    for (int64_t m = 0; m < M; m++) {
        bad += memcmp(C0 + m * ldc, C1 + m * ldc, sizeof(float) * N) != 0;
        for (int64_t n = 0; n < N; n++) {
            float acc = 0;
            for (int64_t k = 0; k < K; k++) acc = fmaf(A[m * lda + k], B[k * ldb + n], acc);
            bad += acc != C0[m * ldc + n];
        }
    }
    CHECK(bad == 0, "gemm_strided: %d mismatches", bad);
}

typedef struct pool_ctx {
    atomic_int calls[8];
    atomic_int nth_seen;
} pool_ctx;

static void count_task(void *ctx, int ith, int nth) {
    pool_ctx *c = ctx;
    atomic_fetch_add(&c->calls[ith], 1);
    atomic_store(&c->nth_seen, nth);
}

static void test_pool(void) {
    for (int n = 1; n <= 4; n++) {
        kld_pool *p = kld_pool_create(n);
        CHECK(p && kld_pool_size(p) == n, "pool of %d", n);
        if (!p) continue;
        pool_ctx c;
        memset(&c, 0, sizeof c);
        for (int it = 0; it < 300; it++) kld_pool_run(p, count_task, &c);
        int bad = 0;
        for (int i = 0; i < 8; i++) bad += atomic_load(&c.calls[i]) != (i < n ? 300 : 0);
        CHECK(bad == 0 && atomic_load(&c.nth_seen) == n, "pool of %d: every thread once per job", n);
        kld_pool_free(p);
    }
    int64_t covered = 0, b, e;
    for (int i = 0; i < 3; i++) {
        kld_split(100, i, 3, &b, &e);
        covered += e - b;
    }
    CHECK(covered == 100, "kld_split covers the range");
    CHECK(kld_default_threads() >= 1, "default threads");
}

/* Whole forward passes on the scalar kernels equal the AVX2 ones bit for
 * bit (a plain llama, the q4_K_M mix, and gemma2's soft-caps, GELU and
 * sliding window). */
static void test_forward_ref_equals_simd(const kld_engine_kernels *ref, const kld_engine_kernels *simd) {
    static const char *models[] = {KT_SHARED "/models/stories260K/f32.gguf",
                                   KT_SHARED "/models/rand-llama/q4_K_M.gguf",
                                   KT_SHARED "/models/gemma2/f16.gguf"};
    int32_t ids[24];
    for (int i = 0; i < 24; i++) ids[i] = i == 0 ? 1 : (int32_t)(37 * i + 11) % 500;
    for (int mi = 0; mi < 3; mi++) {
        kld_error err = {0};
        kld_model *m = NULL;
        kld_status st = kld_model_open(models[mi], NULL, &m, &err);
        CHECK_OK(st, err);
        if (st != KLD_OK) continue;
        const int64_t nv = kld_model_hparams(m)->n_vocab;
        float *out[2];
        for (int k = 0; k < 2; k++) {
            kld_session *s = NULL;
            out[k] = calloc((size_t)(24 * nv), sizeof(float));
            CHECK_OK(kld_session_create(m, 24, 24, 2, &s, &err), err);
            if (!s) continue;
            kld_session_use_kernels(s, k ? simd : ref);
            CHECK_OK(kld_session_eval(s, ids, 24, out[k], &err), err);
            kld_session_free(s);
        }
        CHECK(memcmp(out[0], out[1], sizeof(float) * (size_t)(24 * nv)) == 0,
              "%s: ref and avx2 kernels give different logits", models[mi]);
        free(out[0]);
        free(out[1]);
        kld_model_close(m);
    }
}

/* Resident kB of this process's mappings of files whose path ends with `tail`. */
static long mapped_rss_kb(const char *tail) {
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return -1;
    char line[4096];
    bool in = false;
    long kb = 0, v;
    unsigned long lo, hi;
    const size_t tl = strlen(tail);
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "Rss: %ld kB", &v) == 1) {
            if (in) kb += v;
        } else if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) { /* a mapping: lo-hi perms ... path */
            char *nl = strchr(line, '\n');
            if (nl) *nl = 0;
            const size_t n = strlen(line);
            in = n >= tl && strcmp(line + n - tl, tail) == 0;
        }
    }
    fclose(f);
    return kb;
}

typedef struct file_bytes_ctx {
    const kld_model *m;
    const kld_tensor *seen[512];
    size_t n;
    uint64_t bytes; /* the file's bytes of the matrices that were repacked, but a tied output */
} file_bytes_ctx;

static void add_repacked(void *ctx, const kld_tensor *t, const char *name) {
    (void)name;
    file_bytes_ctx *c = ctx;
    if (!kld_model_repacked(c->m, t).data) return;
    for (size_t i = 0; i < c->n; i++)
        if (c->seen[i] == t) return;
    if (c->n < sizeof c->seen / sizeof c->seen[0]) c->seen[c->n++] = t;
    /* a tied output's file rows stay mapped for the token lookups */
    if (t != c->m->w.token_embd) c->bytes += t->nbytes;
}

/* The memory plan counts the weights as they are resident once a session
 * has repacked them: for the SIMD set, the file's bytes with each repacked
 * matrix at its repacked size (larger for q4_K: unpacked scales), a tied
 * output (rand-llama's) at both (its rows are still looked up in the file);
 * for the ref set, the file's bytes. */
static void test_plan_resident_weights(const kld_engine_kernels *ref, const kld_engine_kernels *simd) {
    const char *files[] = {"f16", "q4_K_M"};
    for (int f = 0; f < 2; f++) {
        char path[512];
        snprintf(path, sizeof path, KT_SHARED "/models/rand-llama/%s.gguf", files[f]);
        kld_error err = {0};
        kld_model *m = NULL;
        CHECK_OK(kld_model_open(path, NULL, &m, &err), err);
        if (!m) continue;
        kld_levers lv;
        kld_levers_default(&lv);
        lv.kernels = KLD_KERNELS_REF;
        kld_mem_plan p_ref, p_simd;
        CHECK_OK(kld_mem_plan_compute_levers(m, 64, 16, 1, &lv, &p_ref, &err), err);
        CHECK(p_ref.weights_bytes == m->weights_bytes, "%s: ref set: the file's %llu bytes, plan %llu", files[f],
              (unsigned long long)m->weights_bytes, (unsigned long long)p_ref.weights_bytes);
        lv.kernels = simd != ref ? KLD_KERNELS_SIMD : KLD_KERNELS_AUTO;
        CHECK_OK(kld_mem_plan_compute_levers(m, 64, 16, 1, &lv, &p_simd, &err), err);
        const kld_session_opts o = {.n_ctx = 64, .max_chunk = 16, .n_threads = 1, .levers = &lv};
        kld_session *s = NULL;
        CHECK_OK(kld_session_create_opts(m, &o, &s, &err), err);
        file_bytes_ctx c = {.m = m};
        kld_model_each_weight(m, add_repacked, &c);
        const uint64_t resident = m->weights_bytes - c.bytes + kld_model_repacked_bytes(m);
        CHECK(p_simd.weights_bytes == resident, "%s: plan %llu bytes of weights, resident after repacking %llu "
              "(%llu of the file's bytes repacked into %llu)", files[f], (unsigned long long)p_simd.weights_bytes,
              (unsigned long long)resident, (unsigned long long)c.bytes,
              (unsigned long long)kld_model_repacked_bytes(m));
        if (simd != ref && f == 1)
            CHECK(p_simd.weights_bytes > p_ref.weights_bytes, "q4_K_M: the repacked q4_K/q6_K panels are larger "
                  "than the file's blocks (%llu vs %llu)", (unsigned long long)p_simd.weights_bytes,
                  (unsigned long long)p_ref.weights_bytes);
        kld_session_free(s);
        kld_model_close(m);
    }
}

/* A SIMD session repacks the f16 matrices (the tied output included) and
 * gives their mapped pages back: after a whole forward pass the model
 * file is hardly resident; the ref set then reads the rows from the file
 * again (and the measurement sees them), with the same logits. */
static void test_repacked_pages(const kld_engine_kernels *ref, const kld_engine_kernels *simd) {
    const char *path = KT_SHARED "/models/rand-llama/f16.gguf";
    kld_error err = {0};
    kld_model *m = NULL;
    CHECK_OK(kld_model_open(path, NULL, &m, &err), err);
    if (!m) return;
    const int64_t nv = kld_model_hparams(m)->n_vocab;
    int32_t ids[16];
    for (int i = 0; i < 16; i++) ids[i] = i == 0 ? 1 : (int32_t)(91 * i + 5) % 32000;
    float *out[2] = {calloc((size_t)(16 * nv), sizeof(float)), calloc((size_t)(16 * nv), sizeof(float))};
    long rss[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        kld_levers lv;
        kld_levers_default(&lv);
        lv.kernels = k ? KLD_KERNELS_REF : simd != ref ? KLD_KERNELS_SIMD : KLD_KERNELS_AUTO;
        const kld_session_opts o = {.n_ctx = 16, .max_chunk = 16, .n_threads = 2, .levers = &lv};
        kld_session *s = NULL;
        CHECK_OK(kld_session_create_opts(m, &o, &s, &err), err);
        if (!s) continue;
        CHECK_OK(kld_session_eval(s, ids, 16, out[k], &err), err);
        rss[k] = mapped_rss_kb("/rand-llama/f16.gguf");
        kld_session_free(s);
    }
    const long file_kb = 20260096 / 1024;
    if (simd != ref) {
        const kld_weights *w = &m->w;
        CHECK(kld_model_repacked(m, w->output).data && kld_model_repacked(m, w->layers[1].ffn_down).data &&
              kld_model_repacked(m, w->layers[0].attn_k).data,
              "the f16 matrices (tied output included) are repacked");
        CHECK(kld_model_repacked_bytes(m) >= m->weights_bytes / 10 * 9,
              "repacked %llu of %llu weight bytes", (unsigned long long)kld_model_repacked_bytes(m),
              (unsigned long long)m->weights_bytes);
        CHECK(rss[0] >= 0 && rss[0] < file_kb / 10,
              "after a SIMD forward pass %ld of %ld kB of the model file are resident", rss[0], file_kb);
    } else {
        CHECK(kld_model_repacked_bytes(m) == 0, "no SIMD set: nothing repacked");
    }
    CHECK(rss[1] > file_kb / 2, "after a ref forward pass %ld of %ld kB of the model file are resident "
          "(the rows are read again)", rss[1], file_kb);
    CHECK(memcmp(out[0], out[1], sizeof(float) * (size_t)(16 * nv)) == 0,
          "%s: ref (rows read again) and SIMD (repacked) logits differ", path);
    free(out[0]), free(out[1]);
    kld_model_close(m);
}

/* A session that declares a few prefill passes leaves the f16 matrices row-major (the GEMM
 * packs their rows as it reads them); a later session without that declaration repacks them
 * on the same model; the logits of the two are the same bits. 40 tokens: the GEMM path of
 * large M (its prefetch of the next block), not the small-M one. */
static void test_f16_rows_for_few_passes(const kld_engine_kernels *ref, const kld_engine_kernels *simd) {
    if (simd == ref) {
        printf("no SIMD set: the f16 row-major GEMM path is the only one (not compared)\n");
        return;
    }
    const char *path = KT_SHARED "/models/rand-llama/f16.gguf";
    kld_error err = {0};
    kld_model *m = NULL;
    CHECK_OK(kld_model_open(path, NULL, &m, &err), err);
    if (!m) return;
    enum { N = 40 };
    const int64_t nv = kld_model_hparams(m)->n_vocab;
    int32_t ids[N];
    for (int i = 0; i < N; i++) ids[i] = i == 0 ? 1 : (int32_t)(53 * i + 11) % 32000;
    float *out[2] = {calloc((size_t)(N * nv), sizeof(float)), calloc((size_t)(N * nv), sizeof(float))};
    bool packed[2] = {false, false};
    for (int k = 0; k < 2; k++) {
        kld_levers lv;
        kld_levers_default(&lv);
        lv.kernels = KLD_KERNELS_SIMD;
        const kld_session_opts o = {.n_ctx = N, .max_chunk = N, .n_threads = 2, .levers = &lv,
                                    .prefill_passes = k == 0 ? 1 : 0};
        kld_session *s = NULL;
        CHECK_OK(kld_session_create_opts(m, &o, &s, &err), err);
        if (!s) continue;
        packed[k] = kld_model_repacked(m, m->w.layers[0].attn_q).data != NULL &&
                    kld_model_repacked(m, m->w.output).data != NULL;
        CHECK_OK(kld_session_eval(s, ids, N, out[k], &err), err);
        kld_session_free(s);
    }
    CHECK(!packed[0], "one declared prefill pass: the f16 matrices stay row-major");
    CHECK(packed[1], "a session without a declared pass count repacks them on the same model");
    CHECK(memcmp(out[0], out[1], sizeof(float) * (size_t)(N * nv)) == 0,
          "%s: row-major and repacked f16 matrices give the same logits bit for bit", path);
    free(out[0]), free(out[1]);
    kld_model_close(m);
}

int main(void) {
    const kld_engine_kernels *ref = kld_engine_kernels_ref(), *simd = kld_engine_kernels_avx2();
    if (!simd) {
        printf("CPU without AVX2/FMA/F16C: comparing the reference with itself\n");
        simd = ref;
    }
    test_ukernel(ref, simd);
    test_pack(ref, simd);
    test_exp();
    test_rows(ref, simd);
    test_gemm_weights(ref, simd);
    test_gemm_strided(ref, simd);
    test_pool();
    test_forward_ref_equals_simd(ref, simd);
    test_repacked_pages(ref, simd);
    test_f16_rows_for_few_passes(ref, simd);
    test_plan_resident_weights(ref, simd);
    return kt_finish();
}
