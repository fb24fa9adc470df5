/* test_gguf.c — the GGUF reader on the shared models, on a hand-built
 * buffer holding every value type (nested arrays included, v2 and v3), and
 * the writer's round trip. */
#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "testlib.h"

#include <stdlib.h>

/* --- a little byte builder for hand-made GGUF buffers ------------------- */
typedef struct buf {
    uint8_t *p;
    size_t n, cap;
} buf;

static void put(buf *b, const void *src, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}
static void put_u32(buf *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(buf *b, uint64_t v) { put(b, &v, 8); }
static void put_str(buf *b, const char *s) {
    put_u64(b, strlen(s));
    put(b, s, strlen(s));
}
static void put_key(buf *b, const char *key, uint32_t type) {
    put_str(b, key);
    put_u32(b, type);
}

static buf every_type_file(uint32_t version) {
    buf b = {0};
    put(&b, "GGUF", 4);
    put_u32(&b, version);
    put_u64(&b, 1);  /* tensors */
    put_u64(&b, 16); /* kvs */
    uint8_t u8 = 200; int8_t i8 = -100; uint16_t u16 = 60000; int16_t i16 = -30000;
    int32_t i32 = -2000000000; float f32 = 1.5f; uint8_t bl = 1; int64_t i64 = -5000000000ll;
    double f64 = -2.25;
    put_key(&b, "t.u8", KLD_GGUF_UINT8); put(&b, &u8, 1);
    put_key(&b, "t.i8", KLD_GGUF_INT8); put(&b, &i8, 1);
    put_key(&b, "t.u16", KLD_GGUF_UINT16); put(&b, &u16, 2);
    put_key(&b, "t.i16", KLD_GGUF_INT16); put(&b, &i16, 2);
    put_key(&b, "t.u32", KLD_GGUF_UINT32); put_u32(&b, 4000000000u);
    put_key(&b, "t.i32", KLD_GGUF_INT32); put(&b, &i32, 4);
    put_key(&b, "t.f32", KLD_GGUF_FLOAT32); put(&b, &f32, 4);
    put_key(&b, "t.bool", KLD_GGUF_BOOL); put(&b, &bl, 1);
    put_key(&b, "t.str", KLD_GGUF_STRING); put_str(&b, "héllo");
    put_key(&b, "t.u64", KLD_GGUF_UINT64); put_u64(&b, 18000000000000000000ull);
    put_key(&b, "t.i64", KLD_GGUF_INT64); put(&b, &i64, 8);
    put_key(&b, "t.f64", KLD_GGUF_FLOAT64); put(&b, &f64, 8);
    put_key(&b, "t.arr_i16", KLD_GGUF_ARRAY); put_u32(&b, KLD_GGUF_INT16); put_u64(&b, 3);
    int16_t a16[3] = {-1, 2, -3}; put(&b, a16, 6);
    put_key(&b, "t.arr_str", KLD_GGUF_ARRAY); put_u32(&b, KLD_GGUF_STRING); put_u64(&b, 3);
    put_str(&b, "a"); put_str(&b, ""); put_str(&b, "ccc");
    /* [[1.0, 2.0], [], [[7]]] is not homogeneous in GGUF: nested arrays are
     * each typed, so build [[f32 1,2], [u8 7]] (outer elem type ARRAY). */
    put_key(&b, "t.nested", KLD_GGUF_ARRAY); put_u32(&b, KLD_GGUF_ARRAY); put_u64(&b, 2);
    put_u32(&b, KLD_GGUF_FLOAT32); put_u64(&b, 2); float fa[2] = {1.0f, 2.0f}; put(&b, fa, 8);
    put_u32(&b, KLD_GGUF_UINT8); put_u64(&b, 1); uint8_t seven = 7; put(&b, &seven, 1);
    put_key(&b, "general.alignment", KLD_GGUF_UINT32); put_u32(&b, 64);
    /* one F32 tensor [4, 2] at offset 0 */
    put_str(&b, "w"); put_u32(&b, 2); put_u64(&b, 4); put_u64(&b, 2);
    put_u32(&b, KLD_TYPE_F32); put_u64(&b, 0);
    while (b.n % 64) put(&b, "", 1);
    for (int i = 0; i < 8; i++) { float v = (float)i; put(&b, &v, 4); }
    return b;
}

static void test_every_type(uint32_t version) {
    buf b = every_type_file(version);
    kld_gguf *g;
    kld_error err = {0};
    kld_status st = kld_gguf_parse(b.p, b.n, "every-type", &g, &err);
    CHECK_OK(st, err);
    if (st) { free(b.p); return; }
    int64_t i; double f; bool bo; kld_str s;
    CHECK(g->version == version, "version %u", g->version);
    CHECK(kld_gguf_get_int(g, "t.u8", &i) && i == 200, "u8");
    CHECK(kld_gguf_get_int(g, "t.i8", &i) && i == -100, "i8");
    CHECK(kld_gguf_get_int(g, "t.u16", &i) && i == 60000, "u16");
    CHECK(kld_gguf_get_int(g, "t.i16", &i) && i == -30000, "i16");
    CHECK(kld_gguf_get_int(g, "t.u32", &i) && i == 4000000000ll, "u32");
    CHECK(kld_gguf_get_int(g, "t.i32", &i) && i == -2000000000, "i32");
    CHECK(kld_gguf_get_float(g, "t.f32", &f) && f == 1.5, "f32");
    CHECK(kld_gguf_get_bool(g, "t.bool", &bo) && bo, "bool");
    CHECK(kld_gguf_get_str(g, "t.str", &s) && kld_str_eq(s, "héllo"), "str");
    CHECK(!kld_gguf_get_int(g, "t.u64", &i), "u64 above INT64_MAX must not convert");
    CHECK(kld_gguf_find(g, "t.u64")->value.v.u == 18000000000000000000ull, "u64 raw");
    CHECK(kld_gguf_get_int(g, "t.i64", &i) && i == -5000000000ll, "i64");
    CHECK(kld_gguf_get_float(g, "t.f64", &f) && f == -2.25, "f64");
    CHECK(!kld_gguf_get_int(g, "t.str", &i), "string is not an int");
    CHECK(!kld_gguf_get_int(g, "missing", &i), "missing key");
    const kld_gguf_value *a = kld_gguf_get_arr(g, "t.arr_i16");
    CHECK(a && a->v.arr.n == 3 && kld_gguf_arr_int(a, 2, &i) && i == -3, "arr_i16");
    CHECK(a && !kld_gguf_arr_int(a, 3, &i), "arr index out of range");
    a = kld_gguf_get_arr(g, "t.arr_str");
    CHECK(a && a->v.arr.n == 3 && kld_str_eq(a->v.arr.strs[2], "ccc") &&
              a->v.arr.strs[1].len == 0, "arr_str");
    a = kld_gguf_get_arr(g, "t.nested");
    CHECK(a && a->v.arr.elem_type == KLD_GGUF_ARRAY && a->v.arr.n == 2, "nested outer");
    if (a && a->v.arr.n == 2) {
        CHECK(kld_gguf_arr_float(&a->v.arr.items[0], 1, &f) && f == 2.0, "nested[0][1]");
        CHECK(kld_gguf_arr_int(&a->v.arr.items[1], 0, &i) && i == 7, "nested[1][0]");
    }
    CHECK(g->alignment == 64, "alignment %llu", (unsigned long long)g->alignment);
    CHECK(g->data_offset % 64 == 0, "data offset aligned");
    const kld_tensor *t = kld_gguf_find_tensor(g, "w");
    CHECK(t && t->ne[0] == 4 && t->ne[1] == 2 && t->nbytes == 32 &&
              kld_load_f32((const uint8_t *)t->data + 28) == 7.0f, "tensor w");
    kld_gguf_close(g);

    /* Every strict prefix of the file must be refused, never crash. */
    int refused = 0;
    for (size_t n = 0; n < b.n; n++) {
        st = kld_gguf_parse(b.p, n, "prefix", &g, &err);
        if (st == KLD_OK) kld_gguf_close(g);
        else refused++;
    }
    CHECK(refused == (int)b.n, "%d of %zu truncations refused", refused, b.n);
    free(b.p);
}

static void test_writer_roundtrip(void) {
    kld_gguf_writer *w = kld_gguf_writer_create();
    kld_error err = {0};
    kld_gguf_writer_set_str(w, "general.architecture", "llama");
    kld_gguf_writer_set_u32(w, "x.u32", 7);
    kld_gguf_writer_set_u32(w, "x.u32", 8); /* overwrite */
    kld_gguf_writer_set_i32(w, "x.i32", -9);
    kld_gguf_writer_set_f32(w, "x.f32", 0.25f);
    kld_gguf_writer_set_bool(w, "x.bool", true);
    kld_gguf_writer_set_u64(w, "x.u64", 1ull << 40);
    const char *strs[] = {"<s>", "▁a", ""};
    kld_gguf_writer_set_arr_str(w, "x.strs", strs, 3);
    float fs[2] = {0.5f, -1.0f};
    kld_gguf_writer_set_arr_f32(w, "x.fs", fs, 2);
    int32_t is[3] = {1, 2, 3};
    kld_gguf_writer_set_arr_i32(w, "x.is", is, 3);
    float a[5] = {1, 2, 3, 4, 5}, b[64];
    for (int i = 0; i < 64; i++) b[i] = (float)i * 0.5f;
    int64_t ne_a[1] = {5}, ne_b[2] = {16, 4};
    CHECK_OK(kld_gguf_writer_add_tensor(w, "a", KLD_TYPE_F32, 1, ne_a, a, sizeof a, &err), err);
    CHECK_OK(kld_gguf_writer_add_tensor(w, "b", KLD_TYPE_F32, 2, ne_b, b, sizeof b, &err), err);
    CHECK(kld_gguf_writer_add_tensor(w, "c", KLD_TYPE_F32, 1, ne_a, a, 4, &err) != KLD_OK,
          "wrong byte size refused");
    char path[512];
    snprintf(path, sizeof path, "%s/test_gguf_roundtrip.gguf", kt_build_dir());
    CHECK_OK(kld_gguf_writer_write(w, path, &err), err);
    kld_gguf_writer_free(w);
    kld_gguf *g;
    kld_status st = kld_gguf_open(path, &g, &err);
    CHECK_OK(st, err);
    if (st) return;
    int64_t i; double f; bool bo; kld_str s;
    CHECK(kld_gguf_get_str(g, "general.architecture", &s) && kld_str_eq(s, "llama"), "arch");
    CHECK(kld_gguf_get_int(g, "x.u32", &i) && i == 8, "overwritten u32");
    CHECK(kld_gguf_get_int(g, "x.i32", &i) && i == -9, "i32");
    CHECK(kld_gguf_get_float(g, "x.f32", &f) && f == 0.25, "f32");
    CHECK(kld_gguf_get_bool(g, "x.bool", &bo) && bo, "bool");
    CHECK(kld_gguf_get_int(g, "x.u64", &i) && i == (1ll << 40), "u64");
    const kld_gguf_value *arr = kld_gguf_get_arr(g, "x.strs");
    CHECK(arr && arr->v.arr.n == 3 && kld_str_eq(arr->v.arr.strs[1], "▁a"), "strs");
    arr = kld_gguf_get_arr(g, "x.fs");
    CHECK(arr && kld_gguf_arr_float(arr, 1, &f) && f == -1.0, "fs");
    arr = kld_gguf_get_arr(g, "x.is");
    CHECK(arr && kld_gguf_arr_int(arr, 2, &i) && i == 3, "is");
    CHECK(g->n_tensors == 2, "n_tensors");
    const kld_tensor *tb = kld_gguf_find_tensor(g, "b");
    CHECK(tb && tb->ne[0] == 16 && tb->ne[1] == 4 && !memcmp(tb->data, b, sizeof b), "b data");
    CHECK(tb && ((const uint8_t *)tb->data - g->file.data) % 32 == 0, "b aligned");
    kld_gguf_close(g);
}

typedef struct shared_model {
    const char *path;
    const char *arch;
    uint64_t n_tensors;
    const char *tensor;
    int64_t ne0, ne1;
    uint32_t type;
} shared_model;

static void test_shared_models(void) {
    static const shared_model models[] = {
        {"models/rand-llama/f16.gguf", "llama", 20, "token_embd.weight", 256, 32000, KLD_TYPE_F16},
        {"models/rand-llama/q8_0.gguf", "llama", 20, "blk.0.ffn_up.weight", 256, 768, KLD_TYPE_Q8_0},
        {"models/rand-llama/q4_0.gguf", "llama", 20, "token_embd.weight", 256, 32000, KLD_TYPE_Q6_K},
        {"models/rand-llama/q4_K_M.gguf", "llama", 20, "blk.1.ffn_down.weight", 768, 256, KLD_TYPE_Q6_K},
        {"models/rand-qwen2/f16.gguf", "qwen2", 26, "blk.0.attn_q.bias", 64, 1, KLD_TYPE_F32},
        {"models/phi3/f16.gguf", "phi3", 0, "blk.0.attn_qkv.weight", 128, 384, KLD_TYPE_F16},
        {"models/gemma2/f16.gguf", "gemma2", 0, "blk.0.post_attention_norm.weight", 128, 1, KLD_TYPE_F32},
        {"models/stories260K/f32.gguf", "llama", 0, "output.weight", 64, 512, KLD_TYPE_F32},
        {"models/aidreams260K/q8_0.gguf", "llama", 0, "blk.0.ffn_down.weight", 172, 64, KLD_TYPE_F16},
        {"oracle/dequant/zoo.gguf", NULL, 45, "q4_K", 512, 8, KLD_TYPE_Q4_K},
    };
    for (size_t m = 0; m < sizeof models / sizeof models[0]; m++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", KT_SHARED, models[m].path);
        kld_gguf *g;
        kld_error err = {0};
        kld_status st = kld_gguf_open(path, &g, &err);
        CHECK_OK(st, err);
        if (st) continue;
        CHECK(g->version == 3, "%s: version %u", path, g->version);
        kld_str arch;
        if (models[m].arch)
            CHECK(kld_gguf_get_str(g, "general.architecture", &arch) &&
                      kld_str_eq(arch, models[m].arch), "%s: architecture", path);
        if (models[m].n_tensors)
            CHECK(g->n_tensors == models[m].n_tensors, "%s: %llu tensors", path,
                  (unsigned long long)g->n_tensors);
        const kld_tensor *t = kld_gguf_find_tensor(g, models[m].tensor);
        CHECK(t && t->ne[0] == models[m].ne0 && t->ne[1] == models[m].ne1 &&
                  t->type == models[m].type,
              "%s: tensor %s shape/type", path, models[m].tensor);
        /* every tensor lies inside the mapping */
        for (uint64_t k = 0; k < g->n_tensors; k++) {
            const uint8_t *p = g->tensors[k].data;
            CHECK(p >= g->file.data && p + g->tensors[k].nbytes <= g->file.data + g->file.size,
                  "%s: %s in bounds", path, g->tensors[k].name);
        }
        kld_gguf_close(g);
    }
}

int main(void) {
    test_every_type(2);
    test_every_type(3);
    test_writer_roundtrip();
    test_shared_models();
    return kt_finish();
}
