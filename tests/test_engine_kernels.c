/* test_engine_kernels.c — every SIMD kernel set this CPU runs (AVX2, AVX-512)
 * against the scalar reference over the set's whole register tile: the
 * microkernel (strided and packed-tile strides, partial tiles, load/store
 * of C), the panel packing at the set's width, the weight GEMM of every type
 * on both of its paths (small and large M) for 1-3 threads, the strided
 * GEMM, the base-2 softmax weights (and their sum), and whole forward
 * passes. Equality is bit for bit: all sets evaluate
 * one fma chain per output element in k order. A set the CPU lacks is
 * reported as not run (the run prints which sets it compared). */
#include "engine/engine.h"
#include "engine/gemm.h"
#include "engine/internal.h"
#include "engine/kernels.h"
#include "engine/pool.h"
#include "tensor/kernels.h"
#include "tensor/types.h"
#include "testlib.h"

#include <math.h>
#include <stdlib.h>

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static float frand(float scale) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    double u = (double)((rng_state * 2685821657736338717ull) >> 11) / 9007199254740992.0;
    return (float)((u * 2 - 1) * scale);
}

/* The specification: one fmaf chain over k. */
static float chain(const float *a, int64_t sa, const float *b, int64_t sb, int64_t K, float init) {
    float acc = init;
    for (int64_t k = 0; k < K; k++) acc = fmaf(a[k * sa], b[k * sb], acc);
    return acc;
}

/* The microkernel with generic strides and with the packed-tile strides
 * (A rows KLD_GEMM_LDA apart, B rows nr apart), for every mr, several nr. */
static void test_ukernel(const kld_engine_kernels *ref, const kld_engine_kernels *k) {
    static const int64_t kcs[] = {0, 1, 5, 64, 256};
    const int MRX = k->mr, NRX = k->nr;
    const int nrs[] = {1, 7, NRX / 2, NRX / 2 + 1, NRX - 1, NRX};
    const int64_t ldc = NRX + 3;
    float *A = malloc(sizeof(float) * (size_t)MRX * KLD_GEMM_LDA);
    float *B = malloc(sizeof(float) * 256 * (size_t)(NRX + 5));
    float *C0 = malloc(sizeof(float) * (size_t)(MRX * ldc)), *C1 = malloc(sizeof(float) * (size_t)(MRX * ldc)),
          *Ci = malloc(sizeof(float) * (size_t)(MRX * ldc));
    for (int64_t i = 0; i < MRX * KLD_GEMM_LDA; i++) A[i] = frand(1);
    for (int64_t i = 0; i < 256 * (NRX + 5); i++) B[i] = frand(1);
    for (int64_t i = 0; i < MRX * ldc; i++) Ci[i] = frand(3);
    int bad = 0, off_spec = 0, runs = 0;
    for (int packed = 0; packed < 2; packed++) {
        const int64_t lda = packed ? KLD_GEMM_LDA : 263, ldb = packed ? NRX : NRX + 5;
        for (int mr = 1; mr <= MRX; mr++)
            for (size_t a = 0; a < sizeof nrs / sizeof nrs[0]; a++)
                for (size_t b = 0; b < sizeof kcs / sizeof kcs[0]; b++)
                    for (int load = 0; load < 2; load++) {
                        const int nr = nrs[a];
                        const int64_t kc = kcs[b]; /* (MRX-1)*263 + 256 < MRX*KLD_GEMM_LDA */
                        memcpy(C0, Ci, sizeof(float) * (size_t)(MRX * ldc));
                        memcpy(C1, Ci, sizeof(float) * (size_t)(MRX * ldc));
                        ref->ukernel(mr, nr, kc, A, lda, B, ldb, C0, ldc, load);
                        k->ukernel(mr, nr, kc, A, lda, B, ldb, C1, ldc, load);
                        bad += memcmp(C0, C1, sizeof(float) * (size_t)(MRX * ldc)) != 0;
                        for (int m = 0; m < mr; m++)
                            for (int n = 0; n < nr; n++)
                                off_spec += chain(A + m * lda, 1, B + n, ldb, kc, load ? Ci[m * ldc + n] : 0) !=
                                            C1[m * ldc + n];
                        for (int m = 0; m < MRX; m++)
                            for (int64_t n = 0; n < ldc; n++)
                                if ((m >= mr || n >= nr) && C1[m * ldc + n] != Ci[m * ldc + n]) bad++;
                        runs++;
                    }
    }
    CHECK(bad == 0, "%s ukernel: %d of %d runs differ from ref or write outside the tile", k->name, bad, runs);
    CHECK(off_spec == 0, "%s ukernel: %d elements differ from the fma chain", k->name, off_spec);
    free(A), free(B), free(C0), free(C1), free(Ci);
}

static void test_pack(const kld_engine_kernels *k) {
    const int NRX = k->nr;
    const int64_t ld = 301;
    float *src = malloc(sizeof(float) * (size_t)(NRX * ld));
    float *p = malloc(sizeof(float) * 300 * (size_t)NRX);
    for (int64_t i = 0; i < NRX * ld; i++) src[i] = frand(2);
    int bad = 0;
    static const int64_t kcs[] = {1, 15, 16, 33, 256, 300};
    for (int rows = 1; rows <= NRX; rows++)
        for (size_t b = 0; b < sizeof kcs / sizeof kcs[0]; b++) {
            memset(p, 0xFF, sizeof(float) * 300 * (size_t)NRX);
            k->pack_panel(src, ld, rows, kcs[b], p);
            for (int64_t kk = 0; kk < kcs[b]; kk++)
                for (int j = 0; j < NRX; j++) {
                    float want = j < rows ? src[j * ld + kk] : 0.0f;
                    bad += memcmp(&want, &p[kk * NRX + j], 4) != 0;
                }
        }
    CHECK(bad == 0, "%s pack_panel (width %d): %d wrong values", k->name, NRX, bad);
    /* the same panels from f16 rows: every value widened exactly (all 65,536 bit patterns
     * appear, subnormals, infinities and NaNs among them) */
    if (k->pack_panel_f16) {
        uint16_t *h = malloc(sizeof(uint16_t) * (size_t)(NRX * ld));
        int runs = 0;
        bad = 0;
        for (uint32_t base = 0; base < 65536; base += (uint32_t)(NRX * ld)) {
            for (int64_t i = 0; i < NRX * ld; i++) h[i] = (uint16_t)(((base + (uint32_t)i) * 40503u) & 0xFFFF);
            for (int rows = 1; rows <= NRX; rows += rows < 4 ? 1 : 7)
                for (size_t b = 0; b < sizeof kcs / sizeof kcs[0]; b++) {
                    memset(p, 0xFF, sizeof(float) * 300 * (size_t)NRX);
                    k->pack_panel_f16(h, ld, rows, kcs[b], p);
                    for (int64_t kk = 0; kk < kcs[b]; kk++)
                        for (int j = 0; j < NRX; j++) {
                            const float want = j < rows ? kld_f16_to_f32(h[j * ld + kk]) : 0.0f;
                            bad += memcmp(&want, &p[kk * NRX + j], 4) != 0;
                        }
                    runs++;
                }
        }
        CHECK(bad == 0, "%s pack_panel_f16 (width %d): %d wrong values in %d panels", k->name, NRX, bad, runs);
        free(h);
    }
    free(src), free(p);
}

/* The one-row entry (when the set has one) against the chain, for
 * partial row counts and k tails that are not a multiple of 4. */
static void test_gemv(const kld_engine_kernels *k) {
    if (!k->gemv_f32) {
        printf("%s: no gemv entry (the ukernel does one row)\n", k->name);
        return;
    }
    const int R = k->gemv_rows;
    CHECK(R >= 8 && R <= 64 && R % 8 == 0, "%s: gemv_rows %d", k->name, R);
    const int64_t kmax = 300;
    float *w = malloc(sizeof(float) * (size_t)(R * kmax)), *a = malloc(sizeof(float) * (size_t)kmax);
    float *lay = calloc((size_t)R * KLD_GEMV_LD, sizeof(float));
    float y[64], yi[64];
    for (int64_t i = 0; i < R * kmax; i++) w[i] = frand(1); /* row n: w[n*kmax + k] */
    for (int64_t i = 0; i < kmax; i++) a[i] = frand(1);
    for (int i = 0; i < 64; i++) yi[i] = frand(3);
    static const int64_t kcs[] = {0, 1, 3, 4, 15, 16, 37, 256, 300};
    int bad = 0;
    for (size_t b = 0; b < sizeof kcs / sizeof kcs[0]; b++) {
        for (int n = 0; n < R; n++)
            for (int64_t kk = 0; kk < kcs[b]; kk++) lay[n * KLD_GEMV_LD + kk] = w[n * kmax + kk];
        for (int rows = 1; rows <= R; rows++)
            for (int load = 0; load < 2; load++) {
                memcpy(y, yi, sizeof y);
                k->gemv_f32(lay, rows, kcs[b], a, y, load);
                for (int n = 0; n < 64; n++) {
                    float want = yi[n];
                    if (n < rows) {
                        want = load ? yi[n] : 0.0f;
                        for (int64_t kk = 0; kk < kcs[b]; kk++) want = fmaf(a[kk], w[n * kmax + kk], want);
                    }
                    bad += memcmp(&want, &y[n], 4) != 0;
                }
            }
    }
    free(lay);
    CHECK(bad == 0, "%s gemv: %d values differ from the fma chain (or written outside the rows)", k->name, bad);
    free(w), free(a);
}

/* A random finite half (zeros and subnormals included), exponent <= emax. */
static uint16_t rand_half(int emax) {
    const uint32_t r = (uint32_t)(frand(1) * 2147483647.0f) ^ (uint32_t)(rng_state >> 17);
    const uint32_t e = (r >> 10) % (uint32_t)(emax + 1);
    return (uint16_t)((r & 0x8000u) | e << 10 | (r & 0x3FFu));
}

/* Rows of `type` with every bit pattern the format allows: random bytes,
 * with the f16 fields (each block's d, dmin; every value of f16) finite —
 * for the types with a direct kernel. */
static void random_rows(uint32_t type, uint8_t *w, size_t bytes) {
    for (size_t i = 0; i < bytes; i++) w[i] = (uint8_t)(frand(1) * 127.0f + 128.0f);
    const kld_type_info *ti = kld_type_info_get(type);
    if (type == KLD_TYPE_F16)
        for (size_t i = 0; i + 2 <= bytes; i += 2) kld_store_u16(w + i, rand_half(30));
    for (size_t b = 0; type != KLD_TYPE_F16 && b + (size_t)ti->type_size <= bytes; b += (size_t)ti->type_size) {
        if (type == KLD_TYPE_Q4_K || type == KLD_TYPE_Q5_K)
            kld_store_u16(w + b, rand_half(17)), kld_store_u16(w + b + 2, rand_half(17));
        if (type == KLD_TYPE_Q6_K) kld_store_u16(w + b + 208, rand_half(17));
        if (type == KLD_TYPE_Q8_0 || type == KLD_TYPE_Q4_0) kld_store_u16(w + b, rand_half(17));
    }
}

/* The set's direct one-row kernels (decode straight from the blocks)
 * against the chain over the reference dequantization, from 0 and from y
 * (load): every row count (rows read from a buffer of exactly that many
 * rows, so that a read past them shows under ASan; outputs past them
 * untouched), several K, and block contents with every scale and bit
 * pattern. */
static void test_gemv_direct(const kld_engine_kernels *k) {
    static const uint32_t types[] = {KLD_TYPE_F32, KLD_TYPE_F16, KLD_TYPE_BF16, KLD_TYPE_Q8_0, KLD_TYPE_Q4_0,
                                     KLD_TYPE_Q2_K, KLD_TYPE_Q3_K, KLD_TYPE_Q4_K, KLD_TYPE_Q5_K, KLD_TYPE_Q6_K,
                                     KLD_TYPE_IQ4_XS};
    int tested = 0;
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        const kld_gemv_direct_fn f = k->gemv_direct ? k->gemv_direct(types[t]) : NULL;
        if (!f) continue;
        const kld_type_info *ti = kld_type_info_get(types[t]);
        const int bs = ti->block_size; /* K tails: f16 not a multiple of 16, q8_0 / q4_0 not of 256 */
        const int64_t Ks[] = {256, 768, 2048 + 256, bs == 1 ? 37 : bs == 32 ? 160 : 512, bs == 1 ? 784 : bs == 32 ? 352 : 256};
        int bad = 0;
        for (size_t ki = 0; ki < sizeof Ks / sizeof Ks[0]; ki++) {
            const int64_t K = Ks[ki];
            const uint64_t rb = (uint64_t)(K / ti->block_size) * (uint64_t)ti->type_size;
            float *a = malloc(sizeof(float) * (size_t)K), *wd = malloc(sizeof(float) * (size_t)K);
            for (int64_t i = 0; i < K; i++) a[i] = frand(1);
            for (int rows = 1; rows <= 32; rows += rows < 9 || rows >= 30 ? 1 : 7) { /* 1-9, 16, 23, 30-32 */
                uint8_t *w = malloc(rb * (uint64_t)rows);
                random_rows(types[t], w, rb * (uint64_t)rows);
                for (int load = 0; load < 2; load++) {
                    float y[40];
                    for (int i = 0; i < 40; i++) y[i] = -7.0f + 0.25f * (float)i;
                    f(w, rb, rows, K, a, y, load);
                    for (int n = 0; n < 40; n++) {
                        float want = -7.0f + 0.25f * (float)n;
                        if (n < rows) {
                            ti->to_float_ref(w + rb * (uint64_t)n, wd, K);
                            want = chain(a, 1, wd, 1, K, load ? want : 0);
                        }
                        bad += memcmp(&want, &y[n], 4) != 0;
                    }
                }
                free(w);
            }
            free(a), free(wd);
        }
        CHECK(bad == 0, "%s gemv_direct %s: %d values differ from the fma chain (or written past the rows)",
              k->name, ti->name, bad);
        tested++;
    }
    printf("%s: %d weight types with a direct one-row kernel\n", k->name, tested);
    CHECK(!k->gemv_direct || tested == 6, "%s: f16, q8_0, q4_0, q4_K, q5_K and q6_K have direct one-row kernels",
          k->name);
}

/* kld_gemm_weights on both of its paths (M below and above
 * KLD_GEMM_SMALL_M) equals the fma chain over the reference dequantization. */
static void test_gemm_weights(const kld_engine_kernels *k) {
    static const uint32_t types[] = {KLD_TYPE_F32, KLD_TYPE_F16, KLD_TYPE_BF16, KLD_TYPE_Q8_0,
                                     KLD_TYPE_Q4_0, KLD_TYPE_Q4_K, KLD_TYPE_Q6_K, KLD_TYPE_IQ4_XS};
    static const int64_t Ms[] = {1, 5, 23, 24, 31};
    const int64_t K = 768, N = 2 * KLD_GEMM_NC / 32 * 32 + 45, M = 31, lda = 770, ldc = N + 3;
    float *Wf = malloc(sizeof(float) * (size_t)(N * K)), *Wd = malloc(sizeof(float) * (size_t)(N * K));
    float *A = malloc(sizeof(float) * (size_t)(M * lda)), *C = malloc(sizeof(float) * (size_t)(M * ldc)),
          *E = malloc(sizeof(float) * (size_t)(M * ldc));
    uint8_t *Wq = malloc((size_t)(N * K) * 4);
    const size_t stride = KLD_GEMM_SCRATCH_FLOATS;
    float *scratch = aligned_alloc(64, sizeof(float) * stride * 3);
    for (int64_t i = 0; i < N * K; i++) Wf[i] = frand(1);
    for (int64_t i = 0; i < M * lda; i++) A[i] = frand(1);
    kld_pool *pools[3] = {kld_pool_create(1), kld_pool_create(2), kld_pool_create(3)};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        const kld_type_info *ti = kld_type_info_get(types[t]);
        if (!ti || !ti->quantize_row) {
            CHECK(false, "type %u must have a quantizer", types[t]);
            continue;
        }
        const uint64_t row_bytes = (uint64_t)(K / ti->block_size) * (uint64_t)ti->type_size;
        for (int64_t n = 0; n < N; n++) ti->quantize_row(Wf + n * K, Wq + n * row_bytes, K);
        for (int64_t n = 0; n < N; n++) ti->to_float_ref(Wq + n * row_bytes, Wd + n * K, K);
        kld_tensor W = {.name = "w", .type = types[t], .n_dims = 2, .ne = {K, N, 1, 1},
                        .data = Wq, .nbytes = row_bytes * (uint64_t)N};
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) E[m * ldc + n] = chain(A + m * lda, 1, Wd + n * K, 1, K, 0);
        int bad = 0;
        for (int p = 0; p < 3; p++)
            for (size_t mi = 0; mi < sizeof Ms / sizeof Ms[0]; mi++) {
                const int64_t mm = Ms[mi];
                memset(C, 0, sizeof(float) * (size_t)(M * ldc));
                kld_gemm_weights(pools[p], k, &W, mm, A, lda, C, ldc, scratch, stride);
                for (int64_t m = 0; m < mm; m++)
                    bad += memcmp(C + m * ldc, E + m * ldc, sizeof(float) * (size_t)N) != 0;
            }
        CHECK(bad == 0, "%s gemm %s: %d rows differ from the fma chain", k->name, ti->name, bad);
    }
    for (int p = 0; p < 3; p++) kld_pool_free(pools[p]);
    free(scratch), free(Wq), free(Wf), free(Wd), free(A), free(C), free(E);
}

/* kld_gemm_weights_repacked over weight_pack.c's copy equals the fma chain
 * over the reference dequantization of the rows on every path (M = 1:
 * gemv; small and large M: GEMM panels from the copy), for random blocks
 * (every scale and bit pattern), K with and without tails, a partial last
 * panel, 1 to 3 threads; nothing is written past N or M. The f16 and q6_K
 * copies are also read here as kernels.h describes them.
 * Sets without the kernels must ignore the copy (here garbage). */
static void test_gemm_repacked(const kld_engine_kernels *k) {
    static const uint32_t types[] = {KLD_TYPE_F16, KLD_TYPE_Q4_K, KLD_TYPE_Q6_K};
    static const int64_t Ms[] = {1, 2, 5, 23, 24, 31};
    const int64_t N = 2 * KLD_GEMM_NC / 32 * 32 + 45, M = 31, ldc = N + 3;
    const size_t stride = KLD_GEMM_SCRATCH_FLOATS;
    float *scratch = aligned_alloc(64, sizeof(float) * stride * 3);
    float *C = malloc(sizeof(float) * (size_t)(M * ldc)), *E = malloc(sizeof(float) * (size_t)(M * ldc));
    kld_pool *pools[3] = {kld_pool_create(1), kld_pool_create(2), kld_pool_create(3)};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        const kld_type_info *ti = kld_type_info_get(types[t]);
        const int64_t Ks[] = {types[t] == KLD_TYPE_F16 ? 37 : 256, 768, types[t] == KLD_TYPE_F16 ? 1030 : 1280};
        int bad = 0, untouched = 0, layout = 0;
        for (size_t ki = 0; ki < sizeof Ks / sizeof Ks[0]; ki++) {
            const int64_t K = Ks[ki], lda = K + 5, n_panels = (N + KLD_REPACK_ROWS - 1) / KLD_REPACK_ROWS;
            const uint64_t rb = (uint64_t)(K / ti->block_size) * ti->type_size, pb = kld_repack_panel_bytes(types[t], K);
            float *Wf = malloc(sizeof(float) * (size_t)(N * K)), *A = malloc(sizeof(float) * (size_t)(M * lda));
            uint8_t *Wq = malloc(rb * (uint64_t)N), *P = malloc(pb * (uint64_t)n_panels);
            random_rows(types[t], Wq, rb * (uint64_t)N);
            for (int64_t i = 0; i < M * lda; i++) A[i] = frand(1);
            for (int64_t n = 0; n < N; n++) ti->to_float_ref(Wq + (uint64_t)n * rb, Wf + n * K, K);
            kld_tensor W = {.name = "w", .type = types[t], .n_dims = 2, .ne = {K, N, 1, 1},
                            .data = Wq, .nbytes = rb * (uint64_t)N};
            /* the ref set has no writer: it is handed the AVX2 set's copy (or garbage, below) */
            const kld_engine_kernels *writer = k->repack ? k : kld_engine_kernels_avx2();
            if (writer) kld_repack_matrix(pools[1], writer, &W, P);
            for (int64_t pn = 0; writer && types[t] == KLD_TYPE_F16 && pn < n_panels; pn++)
                for (int64_t kk = 0; kk < K; kk++)
                    for (int j = 0; j < KLD_REPACK_ROWS; j++) {
                        const int64_t row = pn * KLD_REPACK_ROWS + j;
                        const uint16_t want = row < N ? kld_load_u16(Wq + row * rb + 2 * kk) : 0;
                        layout += kld_load_u16(P + pn * pb + 2 * (kk * KLD_REPACK_ROWS + j)) != want;
                    }
            /* q6_K: d[r] · sc[k/16][r] · q[k][r] of the record is the reference's value */
            for (int64_t pn = 0; writer && types[t] == KLD_TYPE_Q6_K && pn < n_panels; pn++)
                for (int64_t kk = 0; kk < K; kk++)
                    for (int j = 0; j < KLD_REPACK_ROWS; j++) {
                        const int64_t row = pn * KLD_REPACK_ROWS + j;
                        const uint8_t *rec = P + pn * pb + (kk / 256 * 4 + j / 8) * KLD_Q6KX8_BYTES;
                        const int r = j % 8, c = (int)(kk % 256);
                        const float d = kld_half_to_float(kld_load_u16(rec + 2 * r));
                        const float got = d * (float)(int8_t)rec[16 + 8 * (c / 16) + r] * (float)(int8_t)rec[144 + 8 * c + r];
                        const float want = row < N ? Wf[row * K + kk] : 0.0f;
                        layout += memcmp(&got, &want, 4) != 0;
                    }
            if (!k->gemv_repacked) memset(P, 0x7b, pb * (uint64_t)n_panels);
            for (int64_t m = 0; m < M; m++)
                for (int64_t n = 0; n < N; n++) E[m * ldc + n] = chain(A + m * lda, 1, Wf + n * K, 1, K, 0);
            for (int p = 0; p < 3; p++)
                for (size_t mi = 0; mi < sizeof Ms / sizeof Ms[0]; mi++) {
                    const int64_t mm = Ms[mi];
                    for (int64_t i = 0; i < M * ldc; i++) C[i] = -7.0f;
                    kld_gemm_weights_repacked(pools[p], k, &W, (kld_repacked){P, pb}, mm, A, lda, C, ldc, scratch, stride);
                    for (int64_t m = 0; m < mm; m++) {
                        bad += memcmp(C + m * ldc, E + m * ldc, sizeof(float) * (size_t)N) != 0;
                        for (int64_t n = N; n < ldc; n++) untouched += C[m * ldc + n] != -7.0f;
                    }
                    for (int64_t i = mm * ldc; i < M * ldc; i++) untouched += C[i] != -7.0f;
                }
            free(Wf), free(A), free(Wq), free(P);
        }
        CHECK(bad == 0, "%s gemm over the repacked %s: %d rows differ from the fma chain", k->name, ti->name, bad);
        CHECK(untouched == 0, "%s gemm over the repacked %s: %d values written past N or M", k->name, ti->name, untouched);
        CHECK(layout == 0, "repacked %s: %d values not where kernels.h says", ti->name, layout);
        CHECK(!k->gemv_repacked || (k->gemv_repacked(types[t]) && k->pack_repacked(types[t])),
              "%s has repacked kernels for %s", k->name, ti->name);
    }
    for (int p = 0; p < 3; p++) kld_pool_free(pools[p]);
    free(scratch), free(C), free(E);
}

static void test_gemm_strided(const kld_engine_kernels *k) {
    const int64_t M = 31, N = 77, K = 45, lda = 47, ldb = 81, ldc = 79;
    float *A = malloc(sizeof(float) * M * lda), *B = malloc(sizeof(float) * K * ldb),
          *C = malloc(sizeof(float) * M * ldc);
    for (int64_t i = 0; i < M * lda; i++) A[i] = frand(1);
    for (int64_t i = 0; i < K * ldb; i++) B[i] = frand(1);
    kld_gemm_strided(k, M, N, K, A, lda, B, ldb, C, ldc);
    int bad = 0;
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) bad += chain(A + m * lda, 1, B + n, ldb, K, 0) != C[m * ldc + n];
    CHECK(bad == 0, "%s gemm_strided: %d elements differ from the fma chain", k->name, bad);
    free(A), free(B), free(C);
}

/* One score of a base2_weights test row: mostly ordinary scores near the
 * row maximum, then -inf (masked keys), huge and tiny magnitudes, and
 * scores whose weight is subnormal or just past float's subnormals. */
static float base2_score(float top, bool wild) {
    const float u = frand(1) * 0.5f + 0.5f; /* [0, 1] */
    const int kind = (int)(u * 16);
    switch (kind) {
    case 0: return -INFINITY;
    case 1: return !wild ? -INFINITY : frand(1) > 0 ? 3e38f : -3e38f;
    case 2: return frand(1) > 0 ? 1e-40f : -0.0f;
    case 3: return wild ? frand(1e12f) : top - 1e12f;
    case 4: /* x - K in about [-170, -115]: subnormal weights and the -160 cut */
    case 5: return top + (frand(27.5f) - 142.5f) * 0.6931472f;
    default: return top + frand(20);
    }
}

/* base2_weights of set k equals the reference bit for bit (weights and the
 * double sum) for rows of every length around the vector width, against
 * the row's own exponent and larger ones (as the online softmax uses);
 * the reference itself is within its error bound of 2^(x - K) and its sum
 * is the weights' sum in the documented order: groups of 16 from x[0], each
 * pairwise (j + 8, then + 4, + 2, + 1), the groups in index order. A sum
 * continued over two blocks cut at a multiple of 16 (as attention's key
 * blocks are) is the one sum. */
static void test_base2_weights(const kld_engine_kernels *ref, const kld_engine_kernels *k) {
    static const int64_t ns[] = {0, 1, 3, 7, 8, 9, 15, 16, 17, 31, 100, 1000, 2053};
    /* the last rows: wild (+-3e38, +-1e12); tops past |x| = 2^30 and 2^31 */
    static const float tops[] = {0.0f, 5.5f, -40.0f, 90.0f, -1e9f, -3e9f, 1e11f, 0.0f};
    static const double dK[] = {0, 1, 37, 140, 1000};
    enum { NMAX = 2053 };
    float *s = malloc(sizeof(float) * NMAX), *w0 = malloc(sizeof(float) * NMAX),
          *w1 = malloc(sizeof(float) * NMAX);
    int bad_w = 0, bad_sum = 0, bad_cont = 0, bad_acc = 0, bad_order = 0, rows = 0, subnormal = 0, zeros = 0;
    for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
        for (size_t b = 0; b < sizeof tops / sizeof tops[0]; b++)
            for (size_t d = 0; d < sizeof dK / sizeof dK[0]; d++) {
                const int64_t n = ns[a];
                float mx = -INFINITY;
                for (int64_t i = 0; i < n; i++) {
                    s[i] = base2_score(tops[b], b == 7);
                    mx = fmaxf(mx, s[i]);
                }
                /* attention's pow2_exponent; an all -inf row keeps K = -inf */
                const double K = mx == -INFINITY ? -INFINITY : ceil((double)mx * 1.4426950408889634) + dK[d];
                memcpy(w0, s, sizeof(float) * (size_t)n);
                memcpy(w1, s, sizeof(float) * (size_t)n);
                const double sum0 = ref->base2_weights(w0, n, K, 0), sum1 = k->base2_weights(w1, n, K, 0);
                bad_w += memcmp(w0, w1, sizeof(float) * (size_t)n) != 0;
                bad_sum += memcmp(&sum0, &sum1, sizeof sum0) != 0;
                /* a sum continued over two blocks is the one sum */
                memcpy(w1, s, sizeof(float) * (size_t)n);
                const int64_t cut = n / 3 / 16 * 16;
                const double part = k->base2_weights(w1 + cut, n - cut, K, k->base2_weights(w1, cut, K, 0));
                bad_cont += memcmp(&part, &sum1, sizeof part) != 0;
                double seq = 0;
                for (int64_t g = 0; g < n; g += 16) {
                    double v[16];
                    for (int c = 0; c < 16; c++) v[c] = g + c < n ? (double)w0[g + c] : 0.0;
                    for (int h = 8; h >= 1; h /= 2)
                        for (int c = 0; c < h; c++) v[c] += v[c + h];
                    seq += v[0];
                }
                for (int64_t i = 0; i < n; i++) {
                    const double x = (double)s[i] * 1.4426950408889634;
                    const double want = s[i] == -INFINITY ? 0 : exp2(floor(x) - K) * exp2(x - floor(x));
                    /* polynomial < 1e-8, float rounding, one subnormal rounding */
                    bad_acc += !(fabs(w0[i] - want) <= 1e-6 * want + 0x1p-149);
                    subnormal += w0[i] > 0 && w0[i] < 0x1p-126f;
                    zeros += w0[i] == 0 && want > 0;
                }
                bad_order += memcmp(&seq, &sum0, sizeof seq) != 0;
                rows++;
            }
    CHECK(bad_w == 0, "%s base2_weights: %d of %d rows' weights differ from ref", k->name, bad_w, rows);
    CHECK(bad_sum == 0, "%s base2_weights: %d of %d rows' sums differ from ref", k->name, bad_sum, rows);
    CHECK(bad_cont == 0, "%s base2_weights: %d of %d rows' sums continued over two blocks differ from the one sum",
          k->name, bad_cont, rows);
    CHECK(bad_acc == 0, "ref base2_weights: %d weights off 2^(x-K)", bad_acc);
    CHECK(bad_order == 0, "ref base2_weights: %d sums are not the weights' sums of 16, pairwise, in index order",
          bad_order);
    CHECK(subnormal > 100 && zeros > 100, "base2_weights rows reach too few subnormal (%d) and flushed (%d) weights",
          subnormal, zeros);
    free(s), free(w0), free(w1);
}

/* Whole forward passes (40 tokens: the large-M path; then 3 decode steps:
 * the small-M path) give the reference's logits bit for bit. */
static void test_forward(const kld_engine_kernels *ref, const kld_engine_kernels *k) {
    static const char *models[] = {KT_SHARED "/models/stories260K/f32.gguf",
                                   KT_SHARED "/models/rand-llama/q4_K_M.gguf",
                                   KT_SHARED "/models/gemma2/f16.gguf"};
    enum { T = 40, D = 3 };
    int32_t ids[T + D];
    for (int i = 0; i < T + D; i++) ids[i] = i == 0 ? 1 : (int32_t)(37 * i + 11) % 500;
    for (int mi = 0; mi < 3; mi++) {
        kld_error err = {0};
        kld_model *m = NULL;
        kld_status st = kld_model_open(models[mi], NULL, &m, &err);
        CHECK_OK(st, err);
        if (st != KLD_OK) continue;
        const int64_t nv = kld_model_hparams(m)->n_vocab;
        float *out[2];
        for (int s_i = 0; s_i < 2; s_i++) {
            kld_session *s = NULL;
            out[s_i] = calloc((size_t)((T + D) * nv), sizeof(float));
            CHECK_OK(kld_session_create(m, T + D, T, 2, &s, &err), err);
            if (!s) continue;
            kld_session_use_kernels(s, s_i ? k : ref);
            CHECK_OK(kld_session_eval(s, ids, T, out[s_i], &err), err);
            for (int d = 0; d < D; d++)
                CHECK_OK(kld_session_decode(s, ids[T + d], out[s_i] + (T + d) * nv, &err), err);
            kld_session_free(s);
        }
        CHECK(memcmp(out[0], out[1], sizeof(float) * (size_t)((T + D) * nv)) == 0,
              "%s: ref and %s kernels give different logits", models[mi], k->name);
        free(out[0]);
        free(out[1]);
        kld_model_close(m);
    }
}

int main(void) {
    kld_kernels_init();
    const kld_engine_kernels *ref = kld_engine_kernels_ref();
    const kld_engine_kernels *sets[2] = {kld_engine_kernels_avx2(), kld_engine_kernels_avx512()};
    const char *names[2] = {"avx2", "avx512"};
    int ran = 0;
    for (int i = 0; i < 2; i++) {
        if (!sets[i]) {
            printf("%s kernels: NOT run (this CPU lacks them)\n", names[i]);
            continue;
        }
        printf("%s kernels: compared with ref (tile %dx%d)\n", sets[i]->name, sets[i]->mr, sets[i]->nr);
        CHECK(strcmp(sets[i]->name, names[i]) == 0, "set %s is named %s", names[i], sets[i]->name);
        test_ukernel(ref, sets[i]);
        test_pack(sets[i]);
        test_gemv(sets[i]);
        test_gemv_direct(sets[i]);
        test_gemm_weights(sets[i]);
        test_gemm_repacked(sets[i]);
        test_gemm_strided(sets[i]);
        test_base2_weights(ref, sets[i]);
        test_forward(ref, sets[i]);
        ran++;
    }
    /* The reference's own GEMM paths against the chain, whatever the CPU. */
    test_pack(ref);
    test_gemm_weights(ref);
    test_gemm_repacked(ref);
    test_gemm_strided(ref);
    test_base2_weights(ref, ref);
    printf("SIMD sets compared: %d; chosen for this process: %s\n", ran, kld_engine_kernels_get()->name);
    return kt_finish();
}
