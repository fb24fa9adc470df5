/* test_tensor.c — the type table and its kernels against llama.cpp's oracle
 * (../shared/oracle/dequant/zoo.gguf): for each of the 15 types, the scalar
 * and the AVX2 dequantization of "T" must equal "T.expected" bit for bit,
 * and our quantizer applied to "T.source" must reproduce "T" byte for byte.
 * Also: AVX2 vs scalar on random blocks, table geometry, size overflow and
 * unsupported-type errors, kernel selection (KLD_KERNELS=ref). */
#include "io/gguf.h"
#include "tensor/convert.h"
#include "testlib.h"

#include <math.h>
#include <stdlib.h>

#define ZOO KT_SHARED "/oracle/dequant/zoo.gguf"

static const char *zoo_types[] = {"f32",  "f16",  "bf16", "q4_0", "q4_1",   "q5_0",  "q5_1", "q8_0",
                                  "q2_K", "q3_K", "q4_K", "q5_K", "q6_K", "iq4_nl", "iq4_xs"};
#define N_ZOO (sizeof zoo_types / sizeof zoo_types[0])

static uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

/* Bitwise float comparison that reports the first mismatch. */
static bool same_floats(const float *got, const float *want, int64_t n, const char *what) {
    for (int64_t i = 0; i < n; i++) {
        if (f32_bits(got[i]) != f32_bits(want[i])) {
            fprintf(stderr, "%s: first mismatch at %lld (row %lld col %lld): got %.9g (0x%08x) want %.9g (0x%08x)\n",
                    what, (long long)i, (long long)(i / 512), (long long)(i % 512), got[i],
                    f32_bits(got[i]), want[i], f32_bits(want[i]));
            return false;
        }
    }
    return true;
}

static bool same_bytes(const uint8_t *got, const uint8_t *want, uint64_t n, int type_size,
                       const char *what) {
    for (uint64_t i = 0; i < n; i++) {
        if (got[i] != want[i]) {
            fprintf(stderr, "%s: first byte mismatch at %llu (block %llu, byte %llu): got 0x%02x want 0x%02x\n",
                    what, (unsigned long long)i, (unsigned long long)(i / (uint64_t)type_size),
                    (unsigned long long)(i % (uint64_t)type_size), got[i], want[i]);
            return false;
        }
    }
    return true;
}

static const kld_tensor *need_tensor(const kld_gguf *g, const char *name) {
    const kld_tensor *t = kld_gguf_find_tensor(g, name);
    CHECK(t != NULL, "zoo has no tensor '%s'", name);
    return t;
}

static void test_zoo_type(const kld_gguf *g, const char *tname, bool avx2) {
    char name[64], src_name[64], exp_name[64];
    snprintf(name, sizeof name, "%s", tname);
    snprintf(src_name, sizeof src_name, "%s.source", tname);
    snprintf(exp_name, sizeof exp_name, "%s.expected", tname);
    const kld_tensor *t = need_tensor(g, name), *src = need_tensor(g, src_name),
                     *exp = need_tensor(g, exp_name);
    if (!t || !src || !exp) return;
    uint32_t id;
    CHECK(kld_type_from_name(tname, &id) && id == t->type, "%s: tensor type %u, table says %u", tname,
          t->type, id);
    const kld_type_info *info = kld_type_info_get(t->type);
    CHECK(info && strcmp(info->name, tname) == 0, "%s: table name %s", tname, info ? info->name : "-");
    if (!info) return;
    const int64_t n_per_row = t->ne[0], n_rows = t->ne[1], n = n_per_row * n_rows;
    CHECK(src->type == KLD_TYPE_F32 && exp->type == KLD_TYPE_F32 && src->ne[0] == n_per_row &&
              exp->ne[0] * exp->ne[1] == n,
          "%s: source/expected shapes", tname);
    uint64_t row_bytes = 0;
    kld_error err = {0};
    CHECK_OK(kld_type_row_bytes(t->type, (uint64_t)n_per_row, &row_bytes, tname, &err), err);
    CHECK(row_bytes * (uint64_t)n_rows == t->nbytes, "%s: row bytes %llu x %lld != %llu", tname,
          (unsigned long long)row_bytes, (long long)n_rows, (unsigned long long)t->nbytes);
    const float *expected = exp->data;
    const float *source = src->data;
    float *out = malloc((size_t)n * sizeof(float));
    char what[96];

    /* scalar reference, row by row as ggml's to_float */
    CHECK(info->to_float_ref != NULL, "%s: no reference dequantizer", tname);
    if (info->to_float_ref) {
        memset(out, 0xAB, (size_t)n * sizeof(float));
        for (int64_t r = 0; r < n_rows; r++)
            info->to_float_ref((const uint8_t *)t->data + r * row_bytes, out + r * n_per_row, n_per_row);
        snprintf(what, sizeof what, "%s dequant ref", tname);
        CHECK(same_floats(out, expected, n, what), "%s: ref dequantization differs from ggml", tname);
    }

    /* AVX2, called directly */
    if (!avx2) {
        printf("%s: AVX2 dequantization SKIPPED (this CPU lacks AVX2/FMA/F16C)\n", tname);
    } else {
        CHECK(info->to_float_avx2 != NULL, "%s: no AVX2 dequantizer", tname);
        if (info->to_float_avx2) {
            memset(out, 0xAB, (size_t)n * sizeof(float));
            for (int64_t r = 0; r < n_rows; r++)
                info->to_float_avx2((const uint8_t *)t->data + r * row_bytes, out + r * n_per_row,
                                    n_per_row);
            snprintf(what, sizeof what, "%s dequant avx2", tname);
            CHECK(same_floats(out, expected, n, what), "%s: AVX2 dequantization differs from ggml", tname);
            /* the whole tensor in one call too (rows are contiguous) */
            memset(out, 0xAB, (size_t)n * sizeof(float));
            info->to_float_avx2(t->data, out, n);
            CHECK(same_floats(out, expected, n, what), "%s: AVX2 whole-tensor call differs", tname);
        }
    }

    /* the dispatched path through the checked API */
    memset(out, 0xAB, (size_t)n * sizeof(float));
    CHECK_OK(kld_tensor_to_f32(t, out, (uint64_t)n, &err), err);
    snprintf(what, sizeof what, "%s kld_tensor_to_f32 (%s)", tname, kld_kernels_name());
    CHECK(same_floats(out, expected, n, what), "%s: kld_tensor_to_f32 differs from ggml", tname);

    /* quantizer: byte equality with llama.cpp's */
    CHECK(info->quantize_row != NULL, "%s: no quantizer", tname);
    if (info->quantize_row) {
        uint8_t *q = malloc(t->nbytes);
        memset(q, 0xCD, t->nbytes);
        CHECK_OK(kld_quantize_rows(t->type, source, n_rows, n_per_row, q, t->nbytes, tname, &err), err);
        snprintf(what, sizeof what, "%s quantize", tname);
        CHECK(same_bytes(q, t->data, t->nbytes, info->type_size, what),
              "%s: quantized bytes differ from llama.cpp's", tname);
        free(q);
    }
    free(out);
}

static void test_zoo(void) {
    kld_gguf *g = NULL;
    kld_error err = {0};
    kld_status st = kld_gguf_open(ZOO, &g, &err);
    CHECK_OK(st, err);
    if (st != KLD_OK) return;
    /* the file's own type list must be the one we test */
    const kld_gguf_value *types = kld_gguf_get_arr(g, "zoo.types");
    CHECK(types && types->v.arr.elem_type == KLD_GGUF_STRING && types->v.arr.n == N_ZOO,
          "zoo.types: want %zu strings", N_ZOO);
    if (types && types->v.arr.elem_type == KLD_GGUF_STRING && types->v.arr.n == N_ZOO) {
        for (size_t i = 0; i < N_ZOO; i++)
            CHECK(kld_str_eq(types->v.arr.strs[i], zoo_types[i]), "zoo.types[%zu] != %s", i, zoo_types[i]);
    }
    bool avx2 = kld_cpu_has_avx2();
    printf("CPU AVX2+FMA+F16C: %s; dispatched kernels: %s\n", avx2 ? "yes" : "no", kld_kernels_name());
    for (size_t i = 0; i < N_ZOO; i++) {
        int before = kt_failed;
        test_zoo_type(g, zoo_types[i], avx2);
        printf("zoo %-6s %s\n", zoo_types[i], kt_failed == before ? "ok" : "FAILED");
    }
    kld_gguf_close(g);
}

/* --- AVX2 vs scalar on random blocks (every bit pattern of the quants;
 * scale fields are random finite halves so both paths see no NaN) --------- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rng(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static uint16_t random_finite_half(void) {
    uint16_t h;
    do h = (uint16_t)rng(); while ((h & 0x7C00) == 0x7C00);
    return h;
}

/* Byte offsets of f16 scale fields inside a block, -1 terminated. */
static void half_fields(uint32_t type, int fields[3]) {
    fields[0] = fields[1] = fields[2] = -1;
    switch (type) { /* test-only knowledge of the layouts */
    case KLD_TYPE_Q4_0: case KLD_TYPE_Q5_0: case KLD_TYPE_Q8_0: case KLD_TYPE_IQ4_NL:
    case KLD_TYPE_IQ4_XS: fields[0] = 0; break;
    case KLD_TYPE_Q4_1: case KLD_TYPE_Q5_1: case KLD_TYPE_Q4_K: case KLD_TYPE_Q5_K:
        fields[0] = 0; fields[1] = 2; break;
    case KLD_TYPE_Q2_K: fields[0] = 80; fields[1] = 82; break;
    case KLD_TYPE_Q3_K: fields[0] = 108; break;
    case KLD_TYPE_Q6_K: fields[0] = 208; break;
    case KLD_TYPE_F16: break;
    default: break;
    }
}

static void test_avx2_random_blocks(void) {
    if (!kld_cpu_has_avx2()) {
        printf("random-block AVX2 comparison SKIPPED (this CPU lacks AVX2/FMA/F16C)\n");
        return;
    }
    const uint32_t types[] = {KLD_TYPE_Q4_0, KLD_TYPE_Q4_1, KLD_TYPE_Q5_0, KLD_TYPE_Q5_1,
                              KLD_TYPE_Q8_0, KLD_TYPE_Q2_K, KLD_TYPE_Q3_K, KLD_TYPE_Q4_K,
                              KLD_TYPE_Q5_K, KLD_TYPE_Q6_K, KLD_TYPE_IQ4_NL, KLD_TYPE_IQ4_XS,
                              KLD_TYPE_BF16};
    const int64_t n = 256 * 64;
    float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float));
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        const kld_type_info *info = kld_type_info_get(types[k]);
        uint64_t bytes = (uint64_t)n / (uint64_t)info->block_size * (uint64_t)info->type_size;
        uint8_t *blk = malloc(bytes + 1);
        for (uint64_t i = 0; i < bytes + 1; i++) blk[i] = (uint8_t)rng();
        int fields[3];
        half_fields(types[k], fields);
        for (uint64_t off = 0; off < bytes; off += (uint64_t)info->type_size)
            for (int f = 0; f < 3 && fields[f] >= 0; f++) {
                uint16_t h = random_finite_half();
                memcpy(blk + off + fields[f], &h, 2);
            }
        if (types[k] == KLD_TYPE_BF16) /* keep bf16 finite as well */
            for (uint64_t i = 1; i < bytes; i += 2) blk[i] &= 0x7F;
        /* odd address: kernels must not assume alignment */
        memmove(blk + 1, blk, bytes);
        info->to_float_ref(blk + 1, a, n);
        info->to_float_avx2(blk + 1, b, n);
        char what[64];
        snprintf(what, sizeof what, "%s random blocks", info->name);
        CHECK(same_floats(b, a, n, what), "%s: AVX2 != ref on random blocks", info->name);
        free(blk);
    }
    free(a);
    free(b);
}

/* --- table, sizes, errors, kernel choice ------------------------------- */

static void test_table(void) {
    /* every id types.h names has an entry; retired ids have none */
    const uint32_t ids[] = {0, 1, 2, 3, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20,
                            21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 34, 35, 39};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        const kld_type_info *t = kld_type_info_get(ids[i]);
        CHECK(t != NULL, "type id %u has no table entry", ids[i]);
        if (!t) continue;
        uint32_t back;
        CHECK(kld_type_from_name(t->name, &back) && back == ids[i], "name %s does not map back to %u",
              t->name, ids[i]);
        CHECK(t->block_size > 0 && t->type_size > 0, "%s: empty geometry", t->name);
        const kld_type_kernels *k = kld_type_kernels_of(t);
        CHECK(!k->to_float || t->to_float_ref, "%s: dispatch without a reference", t->name);
        CHECK((k->to_float == NULL) == (t->to_float_ref == NULL), "%s: to_float not chosen", t->name);
        CHECK((k->quantize == NULL) == (t->quantize_row == NULL), "%s: quantize not chosen", t->name);
    }
    const uint32_t retired[] = {4, 5, 31, 32, 33, 36, 37, 38, 40, 1000};
    for (size_t i = 0; i < sizeof retired / sizeof retired[0]; i++)
        CHECK(kld_type_info_get(retired[i]) == NULL, "id %u should have no entry", retired[i]);
    /* bytes per block, from ggml's block structs (ggml-common.h) */
    struct { const char *name; int bs, ts; } geo[] = {
        {"q4_0", 32, 18}, {"q4_1", 32, 20}, {"q5_0", 32, 22}, {"q5_1", 32, 24}, {"q8_0", 32, 34},
        {"q8_1", 32, 36}, {"q2_K", 256, 84}, {"q3_K", 256, 110}, {"q4_K", 256, 144},
        {"q5_K", 256, 176}, {"q6_K", 256, 210}, {"q8_K", 256, 292}, {"iq2_xxs", 256, 66},
        {"iq2_xs", 256, 74}, {"iq3_xxs", 256, 98}, {"iq1_s", 256, 50}, {"iq4_nl", 32, 18},
        {"iq3_s", 256, 110}, {"iq2_s", 256, 82}, {"iq4_xs", 256, 136}, {"iq1_m", 256, 56},
        {"tq1_0", 256, 54}, {"tq2_0", 256, 66}, {"mxfp4", 32, 17}, {"bf16", 1, 2}, {"f16", 1, 2}, {"f64", 1, 8}};
    for (size_t i = 0; i < sizeof geo / sizeof geo[0]; i++) {
        uint32_t id;
        bool found = kld_type_from_name(geo[i].name, &id);
        CHECK(found, "no type named %s", geo[i].name);
        if (!found) continue;
        const kld_type_info *t = kld_type_info_get(id);
        CHECK(t->block_size == geo[i].bs && t->type_size == geo[i].ts, "%s: %d/%d, ggml has %d/%d",
              geo[i].name, t->block_size, t->type_size, geo[i].bs, geo[i].ts);
    }
    uint32_t dummy;
    CHECK(!kld_type_from_name("q4_k", &dummy), "names are case-sensitive (ggml spells q4_K)");
    char buf[16];
    CHECK(strcmp(kld_type_name(99, buf), "type#99") == 0, "unknown id name: %s", buf);
    CHECK(strcmp(kld_type_name(KLD_TYPE_Q6_K, buf), "q6_K") == 0, "q6_K name");
}

static void test_size_errors(void) {
    kld_error err = {0};
    uint64_t out = 0;
    CHECK_OK(kld_type_row_bytes(KLD_TYPE_Q4_K, 4096, &out, "w", &err), err);
    CHECK(out == 4096 / 256 * 144, "q4_K row of 4096: %llu", (unsigned long long)out);

    kld_status st = kld_type_row_bytes(KLD_TYPE_Q4_0, 33, &out, "blk.0.attn_q.weight", &err);
    CHECK(st == KLD_ERR_FORMAT && strstr(err.msg, "blk.0.attn_q.weight") && strstr(err.msg, "33") &&
              strstr(err.msg, "q4_0"),
          "not-a-multiple error: %s", err.msg);

    st = kld_type_row_bytes(99, 32, &out, "tok_embd", &err);
    CHECK(st == KLD_ERR_UNSUPPORTED && strstr(err.msg, "tok_embd") && strstr(err.msg, "type#99"),
          "unknown type error: %s", err.msg);
    st = kld_type_row_bytes(4, 32, &out, "retired", &err);
    CHECK(st == KLD_ERR_UNSUPPORTED && strstr(err.msg, "type#4"), "retired id 4: %s", err.msg);

    /* block types store fewer bytes than values, so only the wide plain
     * types can overflow a row; 2^63 halves need 2^64 bytes */
    st = kld_type_row_bytes(KLD_TYPE_F16, 1ull << 63, &out, "huge", &err);
    CHECK(st == KLD_ERR_FORMAT && strstr(err.msg, "huge") && strstr(err.msg, "overflow") &&
              strstr(err.msg, "9223372036854775808") && strstr(err.msg, "f16"),
          "row overflow error: %s", err.msg);
    st = kld_type_row_bytes(KLD_TYPE_F32, UINT64_MAX / 2, &out, "f32row", &err);
    CHECK(st == KLD_ERR_FORMAT && strstr(err.msg, "overflow"), "f32 row overflow: %s", err.msg);

    int64_t ne[4] = {4096, INT64_MAX / 1024, 1, 1}; /* 2304-byte rows */
    st = kld_type_tensor_bytes(KLD_TYPE_Q4_K, 2, ne, &out, "output.weight", &err);
    CHECK(st == KLD_ERR_FORMAT && strstr(err.msg, "output.weight") && strstr(err.msg, "overflow") &&
              strstr(err.msg, "q4_K") && strstr(err.msg, "9007199254740991"),
          "tensor overflow error: %s", err.msg);
    int64_t ok_ne[4] = {512, 8, 3, 1};
    CHECK_OK(kld_type_tensor_bytes(KLD_TYPE_Q6_K, 3, ok_ne, &out, "x", &err), err);
    CHECK(out == 2ull * 210 * 8 * 3, "q6_K 512x8x3 bytes %llu", (unsigned long long)out);
    int64_t neg[4] = {32, -1, 1, 1};
    st = kld_type_tensor_bytes(KLD_TYPE_Q8_0, 2, neg, &out, "negdim", &err);
    CHECK(st == KLD_ERR_FORMAT && strstr(err.msg, "negdim") && strstr(err.msg, "-1"),
          "negative dim: %s", err.msg);
}

static void test_unsupported(void) {
    /* q8_K is an activation format: in the table, but never a weight */
    kld_error err = {0};
    kld_status st = kld_type_check_to_float(KLD_TYPE_Q8_K, "blk.3.ffn_down.weight", &err);
    CHECK(st == KLD_ERR_UNSUPPORTED && strstr(err.msg, "blk.3.ffn_down.weight") &&
              strstr(err.msg, "q8_K"),
          "unsupported type error: %s", err.msg);
    CHECK(kld_type_kernels_of(kld_type_info_get(KLD_TYPE_Q8_K))->to_float == NULL, "q8_K must have no kernel");

    uint8_t block[292] = {0};
    float out[256];
    kld_tensor t = {.name = "blk.7.attn_k.weight", .type = KLD_TYPE_Q8_K, .n_dims = 1,
                    .ne = {256, 1, 1, 1}, .data = block, .nbytes = sizeof block};
    st = kld_tensor_to_f32(&t, out, 256, &err);
    CHECK(st == KLD_ERR_UNSUPPORTED && strstr(err.msg, "blk.7.attn_k.weight") && strstr(err.msg, "q8_K"),
          "tensor_to_f32 on q8_K: %s", err.msg);
    t.type = 77;
    st = kld_tensor_to_f32(&t, out, 256, &err);
    CHECK(st == KLD_ERR_UNSUPPORTED && strstr(err.msg, "blk.7.attn_k.weight") && strstr(err.msg, "type#77"),
          "tensor_to_f32 on unknown id: %s", err.msg);
    /* wrong byte count for the shape */
    t.type = KLD_TYPE_Q8_0;
    t.ne[0] = 64;
    t.nbytes = 66;
    st = kld_tensor_to_f32(&t, out, 256, &err);
    CHECK(st == KLD_ERR_FORMAT && strstr(err.msg, "68") && strstr(err.msg, "66"), "nbytes mismatch: %s",
          err.msg);
    /* destination too small */
    t.ne[0] = 32;
    t.nbytes = 34;
    st = kld_tensor_to_f32(&t, out, 16, &err);
    CHECK(st == KLD_ERR_ARG, "small destination: %s", err.msg);

    float src[256] = {0};
    st = kld_quantize_rows(KLD_TYPE_IQ2_XXS, src, 1, 256, block, 66, "synth", &err); /* read-only */
    CHECK(st == KLD_ERR_UNSUPPORTED && strstr(err.msg, "synth") && strstr(err.msg, "iq2_xxs"),
          "quantize iq2_xxs: %s", err.msg);
    st = kld_quantize_rows(KLD_TYPE_Q8_0, src, 2, 32, block, 66, "small", &err);
    CHECK(st == KLD_ERR_ARG && strstr(err.msg, "68"), "quantize into small buffer: %s", err.msg);
}

static void test_kernel_choice(void) {
    const char *env = getenv("KLD_KERNELS");
    const char *name = kld_kernels_name();
    const kld_type_info *q4k = kld_type_info_get(KLD_TYPE_Q4_K);
    if (env && strcmp(env, "ref") == 0) {
        CHECK(strcmp(name, "ref") == 0, "KLD_KERNELS=ref but kernels are %s", name);
        CHECK(kld_type_kernels_of(q4k)->to_float == q4k->to_float_ref, "KLD_KERNELS=ref must dispatch the reference");
    } else if (kld_cpu_has_avx2()) {
        CHECK(strcmp(name, "avx2") == 0, "AVX2 CPU but kernels are %s", name);
        CHECK(kld_type_kernels_of(q4k)->to_float == q4k->to_float_avx2, "AVX2 CPU must dispatch the AVX2 kernel");
    } else {
        CHECK(strcmp(name, "ref") == 0, "no AVX2 but kernels are %s", name);
    }
    printf("KLD_KERNELS=%s -> %s\n", env ? env : "(unset)", name);
}

int main(void) {
    test_table();
    test_kernel_choice();
    test_size_errors();
    test_unsupported();
    test_zoo();
    test_avx2_random_blocks();
    return kt_finish();
}
