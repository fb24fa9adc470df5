/* test_tensor_iq.c — the read-only block types (iq2_xxs, iq2_xs, iq2_s,
 * iq3_xxs, iq3_s, iq1_s, iq1_m, tq1_0, tq2_0, mxfp4) against the oracle
 * tests/data/zoo_iq.gguf (tools/zoo_extend.py: seeded random blocks decoded
 * by numpy with gguf-py's semantics): the scalar, the AVX2 and the dispatched
 * dequantization equal the expected floats bit for bit; AVX2 equals scalar
 * on random blocks at odd block counts and addresses, non-finite scales
 * included; the table's ids and sizes are llama.cpp's (ggml.h, the
 * static_asserts of ggml-common.h); a GGUF holding such a weight is read
 * and the engine's weight GEMM over it equals the fma chain over the
 * dequantized rows and a float64 dot to rounding; a row length that is not
 * a multiple of the block size is an error naming the tensor. */
#include "engine/gemm.h"
#include "engine/kernels.h"
#include "engine/pool.h"
#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "tensor/convert.h"
#include "tensor/kernels.h"
#include "tensor/types.h"
#include "testlib.h"

#include <math.h>
#include <stdlib.h>

#define ZOO_IQ "tests/data/zoo_iq.gguf"
#define QK_K 256

/* ggml.h ids; bytes per block from ggml-common.h's static_asserts (mxfp4:
 * ggml after c392e50, sizeof(uint8_t) + QK_MXFP4/2). half_at: byte offset of
 * the f16 scale, -1 for iq1_m (scale in nibbles) and mxfp4 (E8M0 byte 0). */
static const struct {
    const char *name;
    uint32_t id;
    int bs, ts, half_at;
} types[] = {
    {"iq2_xxs", 16, QK_K, 2 + QK_K / 8 * 2, 0},
    {"iq2_xs", 17, QK_K, 2 + QK_K / 8 * 2 + QK_K / 32, 0},
    {"iq2_s", 22, QK_K, 2 + QK_K / 4 + QK_K / 16, 0},
    {"iq3_xxs", 18, QK_K, 2 + 3 * (QK_K / 8), 0},
    {"iq3_s", 21, QK_K, 2 + 13 * (QK_K / 32) + QK_K / 64, 0},
    {"iq1_s", 19, QK_K, 2 + QK_K / 8 + QK_K / 16, 0},
    {"iq1_m", 29, QK_K, QK_K / 8 + QK_K / 16 + QK_K / 32, -1},
    {"tq1_0", 34, QK_K, 2 + QK_K / 64 + (QK_K - 4 * QK_K / 64) / 5, 52},
    {"tq2_0", 35, QK_K, 2 + QK_K / 4, 64},
    {"mxfp4", 39, 32, 1 + 32 / 2, -1},
};
#define N_TYPES (sizeof types / sizeof types[0])

static uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

static bool same_floats(const float *got, const float *want, int64_t n, const char *what) {
    for (int64_t i = 0; i < n; i++)
        if (f32_bits(got[i]) != f32_bits(want[i])) {
            fprintf(stderr, "%s: first mismatch at %lld: got %.9g (0x%08x) want %.9g (0x%08x)\n", what,
                    (long long)i, got[i], f32_bits(got[i]), want[i], f32_bits(want[i]));
            return false;
        }
    return true;
}

static uint64_t rng_state = 0x6A09E667F3BCC909ull;
static uint64_t rng(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Sets a block's scale: f16 h (iq1_m: spread over the top nibbles of its
 * scale words); mxfp4 takes the low byte of h as its E8M0 exponent. */
static void set_scale(size_t k, uint8_t *blk, uint16_t h) {
    if (types[k].half_at >= 0) {
        memcpy(blk + types[k].half_at, &h, 2);
    } else if (types[k].id == KLD_TYPE_IQ1_M) {
        for (int w = 0; w < 4; w++)
            blk[48 + 2 * w + 1] = (uint8_t)((blk[48 + 2 * w + 1] & 0x0F) | ((h >> (4 * w)) & 0xF) << 4);
    } else {
        blk[0] = (uint8_t)h;
    }
}

static uint16_t random_finite_half(void) {
    uint16_t h;
    do h = (uint16_t)rng(); while ((h & 0x7C00) == 0x7C00);
    return h;
}

/* ---- table: ids, names, geometry --------------------------------------- */

static void test_table(void) {
    for (size_t k = 0; k < N_TYPES; k++) {
        uint32_t id = 0;
        CHECK(kld_type_from_name(types[k].name, &id) && id == types[k].id, "%s: id %u, llama.cpp %u",
              types[k].name, id, types[k].id);
        const kld_type_info *t = kld_type_info_get(types[k].id);
        CHECK(t && strcmp(t->name, types[k].name) == 0, "id %u has no entry %s", types[k].id,
              types[k].name);
        if (!t) continue;
        CHECK(t->block_size == types[k].bs && t->type_size == types[k].ts,
              "%s: %d values / %d bytes, ggml has %d / %d", t->name, t->block_size, t->type_size,
              types[k].bs, types[k].ts);
        CHECK(t->is_quantized && t->to_float_ref && kld_type_kernels_of(t)->to_float && t->to_float_avx2,
              "%s: reference, dispatched and AVX2 kernels", t->name);
        kld_error err = {0};
        CHECK_OK(kld_type_check_to_float(types[k].id, t->name, &err), err);
    }
}

/* ---- the oracle file ---------------------------------------------------- */

static void test_zoo_type(const kld_gguf *g, size_t k, bool avx2) {
    const char *name = types[k].name;
    char exp_name[64];
    snprintf(exp_name, sizeof exp_name, "%s.expected", name);
    const kld_tensor *t = kld_gguf_find_tensor(g, name), *e = kld_gguf_find_tensor(g, exp_name);
    CHECK(t && e, "zoo_iq has no %s / %s", name, exp_name);
    if (!t || !e) return;
    const kld_type_info *info = kld_type_info_get(t->type);
    CHECK(t->type == types[k].id && info, "%s: stored type %u", name, t->type);
    CHECK(e->type == KLD_TYPE_F32 && e->ne[0] == t->ne[0] && e->ne[1] == t->ne[1], "%s: shapes", name);
    if (t->type != types[k].id || !info || e->type != KLD_TYPE_F32) return;
    const int64_t n_per_row = t->ne[0], n_rows = t->ne[1], n = n_per_row * n_rows;
    CHECK((n_per_row / info->block_size) % 2 == 1, "%s: an odd number of blocks per row", name);
    const uint64_t row_bytes = (uint64_t)(n_per_row / info->block_size) * (uint64_t)info->type_size;
    CHECK(row_bytes * (uint64_t)n_rows == t->nbytes, "%s: %llu bytes", name, (unsigned long long)t->nbytes);
    const float *want = e->data;
    float *out = malloc((size_t)n * sizeof(float));
    char what[64];

    memset(out, 0xAB, (size_t)n * sizeof(float));
    for (int64_t r = 0; r < n_rows; r++)
        info->to_float_ref((const uint8_t *)t->data + r * row_bytes, out + r * n_per_row, n_per_row);
    snprintf(what, sizeof what, "%s ref", name);
    CHECK(same_floats(out, want, n, what), "%s: scalar dequantization differs from the oracle", name);

    if (avx2) {
        memset(out, 0xAB, (size_t)n * sizeof(float));
        for (int64_t r = 0; r < n_rows; r++)
            info->to_float_avx2((const uint8_t *)t->data + r * row_bytes, out + r * n_per_row, n_per_row);
        snprintf(what, sizeof what, "%s avx2", name);
        CHECK(same_floats(out, want, n, what), "%s: AVX2 dequantization differs from the oracle", name);
        memset(out, 0xAB, (size_t)n * sizeof(float));
        info->to_float_avx2(t->data, out, n);
        CHECK(same_floats(out, want, n, what), "%s: AVX2 whole-tensor call differs", name);
    }
    kld_error err = {0};
    memset(out, 0xAB, (size_t)n * sizeof(float));
    CHECK_OK(kld_tensor_to_f32(t, out, (uint64_t)n, &err), err);
    snprintf(what, sizeof what, "%s dispatched (%s)", name, kld_kernels_name());
    CHECK(same_floats(out, want, n, what), "%s: kld_tensor_to_f32 differs from the oracle", name);
    free(out);
}

static void test_zoo(void) {
    kld_gguf *g = NULL;
    kld_error err = {0};
    kld_status st = kld_gguf_open(ZOO_IQ, &g, &err);
    CHECK_OK(st, err);
    if (st != KLD_OK) return;
    const kld_gguf_value *list = kld_gguf_get_arr(g, "zoo.types");
    CHECK(list && list->v.arr.elem_type == KLD_GGUF_STRING && list->v.arr.n == N_TYPES,
          "zoo.types: want %zu strings", N_TYPES);
    for (size_t k = 0; list && list->v.arr.elem_type == KLD_GGUF_STRING && k < list->v.arr.n && k < N_TYPES; k++)
        CHECK(kld_str_eq(list->v.arr.strs[k], types[k].name), "zoo.types[%zu] != %s", k, types[k].name);
    const bool avx2 = kld_cpu_has_avx2();
    if (!avx2) printf("AVX2 comparisons SKIPPED (this CPU lacks AVX2/FMA/F16C)\n");
    for (size_t k = 0; k < N_TYPES; k++) {
        int before = kt_failed;
        test_zoo_type(g, k, avx2);
        printf("zoo_iq %-8s %s\n", types[k].name, kt_failed == before ? "ok" : "FAILED");
    }
    kld_gguf_close(g);
}

/* ---- AVX2 == scalar on random blocks ------------------------------------ */

static void test_avx2_random(void) {
    if (!kld_cpu_has_avx2()) {
        printf("random-block AVX2 comparison SKIPPED (this CPU lacks AVX2/FMA/F16C)\n");
        return;
    }
    static const int counts[] = {1, 3, 5, 7, 13, 63};
    /* non-finite and extreme scales: +inf, NaN, -NaN, 65504, subnormal, -0 */
    static const uint16_t specials[] = {0x7C00, 0x7E00, 0xFE01, 0x7BFF, 0x0001, 0x8000};
    for (size_t k = 0; k < N_TYPES; k++) {
        const kld_type_info *info = kld_type_info_get(types[k].id);
        if (!info || !info->to_float_avx2) continue;
        int bad = 0;
        for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
            const int nb = counts[c];
            const size_t bytes = (size_t)nb * (size_t)info->type_size;
            const int64_t n = (int64_t)nb * info->block_size;
            uint8_t *raw = malloc(bytes + 1);
            float *a = malloc((size_t)n * sizeof(float)), *b = malloc((size_t)n * sizeof(float));
            uint8_t *blk = raw + 1; /* odd address: kernels must not assume alignment */
            for (size_t i = 0; i < bytes; i++) blk[i] = (uint8_t)rng();
            for (int j = 0; j < nb; j++) {
                uint16_t h = j < (int)(sizeof specials / sizeof specials[0]) && c == 5 ? specials[j]
                                                                                       : random_finite_half();
                if (types[k].id == KLD_TYPE_MXFP4 && c != 5) h = (uint16_t)rng(); /* every exponent */
                set_scale(k, blk + (size_t)j * (size_t)info->type_size, h);
            }
            memset(a, 0xAB, (size_t)n * sizeof(float));
            memset(b, 0xCD, (size_t)n * sizeof(float));
            info->to_float_ref(blk, a, n);
            info->to_float_avx2(blk, b, n);
            char what[64];
            snprintf(what, sizeof what, "%s, %d random blocks", info->name, nb);
            bad += !same_floats(b, a, n, what);
            free(raw), free(a), free(b);
        }
        CHECK(bad == 0, "%s: AVX2 != scalar on %d of the random block runs", info->name, bad);
    }
}

/* ---- GGUF in, weight GEMM out ------------------------------------------- */

/* Random blocks with modest scales (f16 in [2^-10, 2^-3), E8M0 120..127) so
 * that products stay far from overflow. */
static void tame_blocks(size_t k, uint8_t *w, int64_t nblocks) {
    const int ts = types[k].ts;
    for (int64_t i = 0; i < nblocks * ts; i++) w[i] = (uint8_t)rng();
    for (int64_t j = 0; j < nblocks; j++) {
        uint16_t h = types[k].id == KLD_TYPE_MXFP4 ? (uint16_t)(120 + rng() % 8)
                                                   : (uint16_t)((5 + rng() % 7) << 10 | (rng() & 0x3FF));
        set_scale(k, w + j * ts, h);
    }
}

static void test_gguf_matmul(void) {
    const int64_t N = 37, M = 30, Ms[] = {1, 3, 30}; /* gemv, small-M and large-M paths */
    kld_pool *pool = kld_pool_create(2);
    const kld_engine_kernels *kr = kld_engine_kernels_get();
    float *scratch = aligned_alloc(64, sizeof(float) * KLD_GEMM_SCRATCH_FLOATS * 2);
    for (size_t k = 0; k < N_TYPES; k++) {
        const int64_t K = types[k].bs == 32 ? 7 * 32 : 3 * QK_K; /* odd block counts */
        const int64_t nblocks = K / types[k].bs * N;
        uint8_t *w = malloc((size_t)(nblocks * types[k].ts));
        tame_blocks(k, w, nblocks);
        kld_gguf_writer *wr = kld_gguf_writer_create();
        kld_error err = {0};
        const int64_t ne[2] = {K, N};
        kld_gguf_writer_set_str(wr, "general.architecture", "llama");
        CHECK_OK(kld_gguf_writer_add_tensor(wr, "blk.0.ffn_up.weight", types[k].id, 2, ne, w,
                                            (uint64_t)(nblocks * types[k].ts), &err), err);
        char path[512];
        /* named by the kernel set too: ctest runs the test once per set, in parallel */
        snprintf(path, sizeof path, "%s/test_tensor_iq_%s_%s.gguf", kt_build_dir(), kld_kernels_name(),
                 types[k].name);
        CHECK_OK(kld_gguf_writer_write(wr, path, &err), err);
        kld_gguf_writer_free(wr);
        free(w);
        kld_gguf *g = NULL;
        kld_status st = kld_gguf_open(path, &g, &err);
        CHECK_OK(st, err);
        if (st != KLD_OK) continue;
        const kld_tensor *W = kld_gguf_find_tensor(g, "blk.0.ffn_up.weight");
        CHECK(W && W->type == types[k].id && W->ne[0] == K && W->ne[1] == N, "%s: tensor read back",
              types[k].name);
        if (!W) {
            kld_gguf_close(g);
            continue;
        }
        float *Wd = malloc(sizeof(float) * (size_t)(K * N)), *A = malloc(sizeof(float) * (size_t)(M * K));
        float *C = malloc(sizeof(float) * (size_t)(M * N));
        CHECK_OK(kld_tensor_to_f32(W, Wd, (uint64_t)(K * N), &err), err);
        for (int64_t i = 0; i < M * K; i++) A[i] = (float)((double)(rng() >> 11) / 9007199254740992.0 * 2 - 1);
        int not_chain = 0, not_f64 = 0;
        double worst = 0;
        for (size_t mi = 0; mi < sizeof Ms / sizeof Ms[0]; mi++) {
            const int64_t mm = Ms[mi];
            memset(C, 0, sizeof(float) * (size_t)(M * N));
            kld_gemm_weights(pool, kr, W, mm, A, K, C, N, scratch, KLD_GEMM_SCRATCH_FLOATS);
            for (int64_t m = 0; m < mm; m++)
                for (int64_t j = 0; j < N; j++) {
                    float chain = 0;
                    double dot = 0, mag = 0;
                    for (int64_t kk = 0; kk < K; kk++) {
                        chain = fmaf(A[m * K + kk], Wd[j * K + kk], chain);
                        dot += (double)A[m * K + kk] * (double)Wd[j * K + kk];
                        mag += fabs((double)A[m * K + kk] * (double)Wd[j * K + kk]);
                    }
                    const float c = C[m * N + j];
                    not_chain += f32_bits(c) != f32_bits(chain);
                    /* float32 accumulation over K terms: |error| <= K * 2^-24 * sum|a w| */
                    const double err64 = fabs((double)c - dot);
                    not_f64 += !(err64 <= (double)K * 0x1p-24 * mag);
                    if (mag > 0 && err64 / mag > worst) worst = err64 / mag;
                }
        }
        CHECK(not_chain == 0, "%s: %d GEMM outputs differ from the fma chain over the dequantized rows",
              types[k].name, not_chain);
        CHECK(not_f64 == 0, "%s: %d GEMM outputs beyond rounding of the float64 dot", types[k].name, not_f64);
        printf("gemm %-8s %lldx%lld from GGUF: worst |C - dot64| / sum|a w| = %.2e\n", types[k].name,
               (long long)N, (long long)K, worst);
        free(Wd), free(A), free(C);
        kld_gguf_close(g);
        remove(path);
    }
    free(scratch);
    kld_pool_free(pool);
}

/* ---- bad input: a row that is not whole blocks -------------------------- */

static void test_row_not_blocks(void) {
    for (size_t k = 0; k < N_TYPES; k++) {
        const int64_t ne[1] = {2 * types[k].bs};
        uint8_t w[2 * 110] = {0};
        kld_gguf_writer *wr = kld_gguf_writer_create();
        kld_error err = {0};
        CHECK_OK(kld_gguf_writer_add_tensor(wr, "blk.4.attn_v.weight", types[k].id, 1, ne, w,
                                            2 * (uint64_t)types[k].ts, &err), err);
        char path[512];
        snprintf(path, sizeof path, "%s/test_tensor_iq_%s_bad.gguf", kt_build_dir(), kld_kernels_name());
        CHECK_OK(kld_gguf_writer_write(wr, path, &err), err);
        kld_gguf_writer_free(wr);
        /* the tensor info follows the name: u32 n_dims, then ne[0] */
        size_t size;
        char *buf = kt_read_file(path, &size);
        const char *at = memmem(buf, size, "blk.4.attn_v.weight", 19);
        CHECK(at != NULL, "tensor name in the file");
        if (at) {
            const uint64_t bad_ne0 = 2 * (uint64_t)types[k].bs + 1;
            memcpy((char *)at + 19 + 4, &bad_ne0, 8);
            kt_write_file(path, buf, size);
            kld_gguf *g = NULL;
            kld_status st = kld_gguf_open(path, &g, &err);
            char want[32];
            snprintf(want, sizeof want, "%llu", (unsigned long long)bad_ne0);
            CHECK(st == KLD_ERR_FORMAT && strstr(err.msg, "blk.4.attn_v.weight") && strstr(err.msg, want) &&
                      strstr(err.msg, types[k].name) && strstr(err.msg, "not a multiple"),
                  "%s row of %s values: %s", types[k].name, want, err.msg);
            if (st == KLD_OK) kld_gguf_close(g);
        }
        free(buf);
        remove(path);
        /* and the checked conversion refuses it too */
        kld_tensor t = {.name = "blk.5.ffn_down.weight", .type = types[k].id, .n_dims = 1,
                        .ne = {types[k].bs + 1, 1, 1, 1}, .data = w, .nbytes = (uint64_t)types[k].ts};
        float out[2 * 256 + 2];
        kld_status st = kld_tensor_to_f32(&t, out, sizeof out / sizeof out[0], &err);
        CHECK(st == KLD_ERR_FORMAT && strstr(err.msg, "blk.5.ffn_down.weight"), "%s to_f32: %s",
              types[k].name, err.msg);
    }
}

/* mxfp4's quantizer against ggml's bytes (tests/data/mxfp4-ref.bin: the
 * 2026 ggml's from_float of mxfp4, quantize_row_mxfp4_ref, on these rows;
 * tests/data/README.md), and its values within half a level step. */
static void test_mxfp4_quant(void) {
    enum { NB = 64 };
    float x[NB * 32], back[NB * 32];
    uint8_t got[NB * 17];
    uint64_t s = 20261204; /* the generator of tests/test_levers.c iq4_cpy_rows */
    for (int b = 0; b < NB; b++)
        for (int j = 0; j < 32; j++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            const int v = (int)(s >> 44) - (1 << 19);
            float f = (float)v / (float)(1 << 19);
            if (b % 4 == 1) f *= 1e-3f;
            if (b % 4 == 2 && j == b % 32) f = 4 * (b & 8 ? -1 : 1);
            if (b % 4 == 3) f = f * f * f;
            x[b * 32 + j] = f;
        }
    const kld_type_info *t = kld_type_info_get(KLD_TYPE_MXFP4);
    CHECK(t->quantize_row != NULL, "mxfp4 has a quantizer");
    if (!t->quantize_row) return;
    t->quantize_row(x, got, NB * 32);
    size_t size = 0;
    char *want = kt_read_file("tests/data/mxfp4-ref.bin", &size);
    CHECK(want && size == sizeof got && !memcmp(want, got, sizeof got), "mxfp4: %d blocks as ggml's quantizer writes",
          NB);
    free(want);
    t->to_float_ref(got, back, NB * 32);
    /* within half the widest E2M1 gap (8 → 12), or clipped at 12·d ≥ 3/4 of the block's |max| */
    int bad = 0;
    for (int b = 0; b < NB; b++) {
        const float d = kld_e8m0_to_f32_half(got[b * 17]);
        float amax = 0;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[b * 32 + j]));
        const float bound = fmaxf(2 * d, amax / 4) + 1e-30f;
        for (int j = 0; j < 32; j++) bad += fabsf(back[b * 32 + j] - x[b * 32 + j]) > bound;
    }
    CHECK(bad == 0, "mxfp4: %d values farther than half a level step (or the clipping) from their input", bad);
}

int main(void) {
    test_table();
    test_mxfp4_quant();
    test_zoo();
    test_avx2_random();
    test_gguf_matmul();
    test_row_not_blocks();
    return kt_finish();
}
