/* test_levers.c — session levers (engine.h): parsing and its errors; every
 * lever at its reference value gives bit-identical logits (KLD exactly 0)
 * on every shared model, kernels=ref equals simd; the decode path equals
 * prefill; attention=online is within 1e-5 of exact (measured: bit for
 * bit) on every shared model; quantized KV caches
 * against llama.cpp's -ctk/-ctv logits and byte-identical to our quantizer;
 * act=q8 against llama.cpp's own logits; the plan shrinks with the cache. */
#include "engine/internal.h"
#include "tensor/convert.h"
#include "test_forward_models.h"
#include "testlib.h"

#include <math.h>
#include <stdlib.h>

/* attention=online against exact, max |dlogit| over every shared model
 * (the bound). Both take base-2 weights whose rounding does not
 * depend on the maximum they are taken against and rescale by exact powers
 * of two (src/engine/attention.c), so measured they agree bit for bit. */
#define ONLINE_MAX_DLOGIT 1e-5

static const char *const models[] = {
    KT_SHARED "/models/rand-llama/f16.gguf",  KT_SHARED "/models/rand-llama/q4_K_M.gguf",
    KT_SHARED "/models/rand-qwen2/f16.gguf",  KT_SHARED "/models/phi3/f16.gguf",
    KT_SHARED "/models/gemma2/f16.gguf",      KT_SHARED "/models/stories260K/q8_0.gguf",
    KT_SHARED "/models/aidreams260K/f32.gguf"};

static int32_t *read_ids(const char *path, int64_t *n) {
    size_t size;
    char *b = kt_read_file(path, &size);
    *n = (int64_t)(size / 4);
    int32_t *ids = malloc(size);
    for (int64_t i = 0; i < *n; i++) ids[i] = (int32_t)kld_load_u32((uint8_t *)b + 4 * i);
    free(b);
    return ids;
}

/* Logits [n][nv] with levers (NULL: reference) in chunks of `chunk`;
 * decode_from >= 0: tokens from there on one decode step at a time. */
static float *run(kld_model *m, const int32_t *ids, int64_t n, int64_t chunk, const char *levers,
                  int64_t decode_from, kld_session **keep) {
    kld_levers l;
    kld_levers_default(&l);
    kld_error err = {0};
    if (levers) CHECK_OK(kld_levers_parse(levers, &l, &err), err);
    kld_session *s = NULL;
    kld_session_opts o = {n, chunk, 2, NULL, &l, false, 0};
    kld_status st = kld_session_create_opts(m, &o, &s, &err);
    CHECK_OK(st, err);
    if (st) return NULL;
    const int64_t nv = kld_model_hparams(m)->n_vocab;
    float *lg = malloc((size_t)(n * nv) * sizeof(float));
    int64_t pf = decode_from >= 0 ? decode_from : n;
    for (int64_t i = 0; i < pf; i += chunk) {
        int64_t c = pf - i < chunk ? pf - i : chunk;
        CHECK_OK(kld_session_eval(s, ids + i, c, lg + i * nv, &err), err);
    }
    for (int64_t i = pf; i < n; i++) CHECK_OK(kld_session_decode(s, ids[i], lg + i * nv, &err), err);
    if (keep) *keep = s;
    else kld_session_free(s);
    return lg;
}

static void expect_parse_error(const char *text, const char *must_contain, const char *also) {
    kld_levers l;
    kld_levers_default(&l);
    kld_error err = {0};
    kld_status st = kld_levers_parse(text, &l, &err);
    CHECK(st == KLD_ERR_ARG, "'%s' is rejected", text);
    CHECK(strstr(err.msg, must_contain) && (!also || strstr(err.msg, also)),
          "'%s': message names '%s'%s%s: %s", text, must_contain, also ? " and " : "",
          also ? also : "", err.msg);
}

/* The bad-input corpus of the lever parser: each string, a token its
 * message must name and the valid values it must list (NULL: no list). */
static const struct {
    const char *text, *names, *lists;
} bad_levers[] = {
    /* unknown names and values */
    {"kvv=q8_0", "'kvv'", "kv, kv_k, kv_v, act"},
    {"speed=fast", "'speed'", "attention, attn_block, noise"},
    {"kv=q9_0", "'q9_0'", "q8_0, q4_0"},
    {"kv=q4_K", "'q4_K'", "iq4_nl"},
    {"kv_v=blk:0=q3_K,f16", "'q3_K'", "q8_0, q4_0"},
    {"act=q4", "'q4'", "f32, bf16, f16, q8"},
    {"kernels=avx9", "'avx9'", "auto, ref, simd"},
    {"attention=flash", "'flash'", "exact, online"},
    {"noise=f16", "'f16'", "none, bf16"},
    /* empty values, items and lists */
    {"act=", "act: empty value", "f32, bf16, f16, q8"},
    {"kv=", "kv: empty value", "f32, f16, bf16, q8_0"},
    {"kv_k=", "kv_k: empty value", "q4_1, q5_0"},
    {"noise=", "noise: empty value", "none, bf16"},
    {"attention=online,attn_block=", "attn_block: empty value", "multiple of 16"},
    {"act=q8,,kv=f16", "empty item", "kv, kv_k, kv_v"},
    {"act=q8,", "empty item", "NAME=VALUE"},
    {"", "empty lever list", "kv, kv_k, kv_v"},
    {"act", "'act'", "NAME=VALUE"},
    {"act=q8,q4_0", "'q4_0'", "NAME=VALUE"}, /* a bare type only continues kv */
    /* duplicated keys */
    {"act=q8,act=f16", "'act=f16' sets it a second time", "f32, bf16, f16, q8"},
    {"noise=bf16,kernels=ref,noise=none", "'noise=none'", "none, bf16"},
    {"attention=online,attn_block=32,attn_block=64", "'attn_block=64'", "multiple of 16"},
    {"kv=q8_0,kv_k=f16", "'kv_k=f16' sets kv_k a second time", "kv sets both"},
    {"kv_v=q8_0,kv=f16", "'kv=f16' sets kv_v a second time", NULL},
    {"kv=q8_0,q4_0", "'q4_0' is a second default", "q8_0, q4_0, q4_1"},
    /* layer ranges: reversed, malformed, overlapping */
    {"kv=blk:3-1=q8_0", "blk:3-1", "0 <= A <= B"},
    {"kv=blk:x=q8_0", "blk:x", "blk:A-B"},
    {"kv=blk:-2=q8_0", "blk:-2", "blk:A-B"},
    {"kv=blk:1-=q8_0", "blk:1-", "blk:A-B"},
    {"kv=blk:0-1", "blk:0-1", "blk:A-B=TYPE"},
    {"kv=blk:0-3=q8_0,blk:2-5=f16", "'blk:2-5=f16' overlaps blk:0-3", NULL},
    {"kv_k=blk:4=q8_0,blk:1-4=f16,q4_0", "'blk:1-4=f16' overlaps blk:4-4", NULL},
    {"kv=blk:0=q8_0,blk:0=q8_0", "'blk:0=q8_0' overlaps blk:0-0", NULL},
    /* block sizes and modes that do not fit together */
    {"attention=online,attn_block=0", "'0'", "multiple of 16 in 16..4096"},
    {"attention=online,attn_block=17", "'17'", "multiple of 16 in 16..4096"},
    {"attention=online,attn_block=8192", "'8192'", "multiple of 16 in 16..4096"},
    {"attention=online,attn_block=-16", "'-16'", "multiple of 16 in 16..4096"},
    {"attn_block=32", "attn_block: applies to attention=online", "attention=online,attn_block=N"},
    {"attention=exact,attn_block=32", "attn_block: applies to attention=online", NULL},
};

static void test_bad_levers(void) {
    for (size_t i = 0; i < sizeof bad_levers / sizeof bad_levers[0]; i++)
        expect_parse_error(bad_levers[i].text, bad_levers[i].names, bad_levers[i].lists);
    /* still accepted: the order of the rules, and attn_block before attention */
    kld_levers l;
    kld_levers_default(&l);
    kld_error err = {0};
    CHECK_OK(kld_levers_parse("attn_block=32,attention=online", &l, &err), err);
    CHECK(l.attn_block == 32 && l.attention == KLD_ATTN_ONLINE, "attn_block before attention");
    kld_levers_default(&l);
    CHECK_OK(kld_levers_parse("kv_k=blk:4-5=q8_0,blk:0-3=f16,q4_0,kv_v=f32", &l, &err), err);
    /* errors that need the model: layers past the last, a block the head size cannot take */
    static const struct {
        const char *model, *text, *names, *lists;
    } bad_for_model[] = {
        {KT_SHARED "/models/rand-llama/f16.gguf", "kv=blk:0-2=q8_0,f16", "blk:0-2", "blk:0-1"},
        {KT_SHARED "/models/rand-llama/f16.gguf", "kv_v=blk:2=q8_0", "blk:2-2", "blk:0-1"},
        {KT_SHARED "/models/stories260K/f32.gguf", "kv_v=q8_0", "kv_v=q8_0", "f32, f16, bf16"},
        {KT_SHARED "/models/stories260K/f32.gguf", "kv=blk:4=q4_0,f16", "kv=q4_0", "f32, f16, bf16"},
        {KT_SHARED "/models/rand-qwen2/f16.gguf", "kv_k=q5_1", "kv_k=q5_1", "head size 16"},
    };
    for (size_t i = 0; i < sizeof bad_for_model / sizeof bad_for_model[0]; i++) {
        kld_model *m = NULL;
        CHECK_OK(kld_model_open(bad_for_model[i].model, NULL, &m, &err), err);
        if (!m) continue;
        kld_levers_default(&l);
        CHECK_OK(kld_levers_parse(bad_for_model[i].text, &l, &err), err);
        kld_status st = kld_levers_check(&l, m, &err);
        CHECK(st == KLD_ERR_ARG && strstr(err.msg, bad_for_model[i].names) &&
                  strstr(err.msg, bad_for_model[i].lists),
              "%s on %s: message names '%s' and '%s': %s", bad_for_model[i].text,
              bad_for_model[i].model, bad_for_model[i].names, bad_for_model[i].lists, err.msg);
        kld_model_close(m);
    }
}

static void test_parse(void) {
    kld_levers l;
    kld_levers_default(&l);
    kld_error err = {0};
    char buf[256];
    CHECK(kld_levers_is_reference(&l), "defaults are the reference");
    CHECK_OK(kld_levers_parse("kv=f32,act=f32,kernels=auto,attention=exact,noise=none", &l, &err), err);
    CHECK(kld_levers_is_reference(&l), "explicit reference values are the reference");
    kld_levers_format(&l, buf, sizeof buf);
    CHECK(!strcmp(buf, "reference"), "format of reference: %s", buf);
    CHECK_OK(kld_levers_parse("kv=blk:0-3=q8_0,blk:5=f16,q4_0,act=q8", &l, &err), err);
    CHECK(l.kv_k.type == KLD_TYPE_Q4_0 && l.kv_k.n_rules == 2 && l.act == KLD_ACT_Q8, "per-layer map");
    CHECK(kld_kv_map_type(&l.kv_v, 2) == KLD_TYPE_Q8_0 && kld_kv_map_type(&l.kv_v, 5) == KLD_TYPE_F16 &&
          kld_kv_map_type(&l.kv_v, 4) == KLD_TYPE_Q4_0, "map lookups");
    kld_levers_format(&l, buf, sizeof buf);
    CHECK(!strcmp(buf, "kv=blk:0-3=q8_0,blk:5=f16,q4_0,act=q8"), "canonical form: %s", buf);
    kld_levers back;
    kld_levers_default(&back);
    CHECK_OK(kld_levers_parse(buf, &back, &err), err);
    CHECK(!memcmp(&back, &l, sizeof l), "format parses back to the same levers");
    kld_levers_default(&l);
    CHECK_OK(kld_levers_parse("kv_k=q8_0,kv_v=q4_1,attention=online,attn_block=32,noise=bf16", &l, &err), err);
    kld_levers_format(&l, buf, sizeof buf);
    CHECK(!strcmp(buf, "kv_k=q8_0,kv_v=q4_1,attention=online,attn_block=32,noise=bf16"), "format: %s", buf);
    kld_levers_default(&l);
    CHECK(kld_levers_parse("act=q8,kv=nope", &l, &err) != KLD_OK && l.act == KLD_ACT_F32,
          "a failed parse leaves the levers unchanged");
}

/* Every lever at its reference value, spelled out, and kernels=ref/simd:
 * bit-identical logits (so KLD exactly 0 and top-1 exactly 1). */
static void test_reference_values(void) {
    static const char *const spelled[] = {"kv=f32", "kv_k=f32,kv_v=f32", "act=f32", "kernels=auto",
                                          "attention=exact", "noise=none", "kernels=ref",
                                          "kernels=simd"};
    for (size_t mi = 0; mi < sizeof models / sizeof models[0]; mi++) {
        kld_model *m = NULL;
        kld_error err = {0};
        CHECK_OK(kld_model_open(models[mi], NULL, &m, &err), err);
        if (!m) continue;
        const int64_t nv = kld_model_hparams(m)->n_vocab;
        int32_t ids[24];
        for (int i = 0; i < 24; i++) ids[i] = (int32_t)((i * 7919 + 13) % nv);
        float *base = run(m, ids, 24, 16, NULL, -1, NULL);
        for (size_t k = 0; k < sizeof spelled / sizeof spelled[0]; k++) {
            if (!strcmp(spelled[k], "kernels=simd") && !kld_engine_kernels_avx2()) continue;
            float *lg = run(m, ids, 24, 16, spelled[k], -1, NULL);
            CHECK(base && lg && !memcmp(base, lg, sizeof(float) * 24 * (size_t)nv),
                  "%s: %s gives the reference's logits bit for bit", models[mi], spelled[k]);
            free(lg);
        }
        /* decode == prefill exactly (f32 KV), and with a quantized cache too */
        float *dec = run(m, ids, 24, 16, NULL, 5, NULL);
        CHECK(dec && !memcmp(base, dec, sizeof(float) * 24 * (size_t)nv),
              "%s: decode steps from position 5 equal prefill bit for bit", models[mi]);
        free(dec);
        const char *kvq = kld_model_hparams(m)->head_dim % 32 ? "kv=f16" : "kv=q8_0";
        float *qp = run(m, ids, 24, 16, kvq, -1, NULL), *qd = run(m, ids, 24, 16, kvq, 3, NULL);
        CHECK(qp && qd && !memcmp(qp, qd, sizeof(float) * 24 * (size_t)nv),
              "%s: %s decode equals %s prefill bit for bit", models[mi], kvq, kvq);
        tf_cmp c = tf_compare(base, qp, 24, nv);
        CHECK(c.max_abs > 0, "%s: %s changes the logits (max |d| %.3g)", models[mi], kvq, c.max_abs);
        free(qp);
        free(qd);
        free(base);
        kld_model_close(m);
    }
}

/* attention=online against the exact softmax on every shared model, over
 * the oracle ids (one or two blocks) and a 128-token window of the corpus
 * (8 blocks of 16, 2 of 64), prefilled in chunks of 48. */
static void test_online(void) {
    static const char *const all[][2] = {
        {"rand-llama/f16.gguf", "rand-llama"},     {"rand-llama/q8_0.gguf", "rand-llama"},
        {"rand-llama/q4_0.gguf", "rand-llama"},    {"rand-llama/q4_K_M.gguf", "rand-llama"},
        {"rand-qwen2/f16.gguf", "rand-qwen2"},     {"rand-qwen2/q8_0.gguf", "rand-qwen2"},
        {"phi3/f16.gguf", "phi3"},                 {"gemma2/f16.gguf", "gemma2"},
        {"stories260K/q8_0.gguf", "stories260K"},  {"stories260K/f32.gguf", "stories260K"},
        {"aidreams260K/f32.gguf", "aidreams260K"}, {"aidreams260K/q8_0.gguf", "aidreams260K"}};
    static const char *const onl[] = {"attention=online,attn_block=16", "attention=online,attn_block=32",
                                      "attention=online"};
    for (size_t mi = 0; mi < sizeof all / sizeof all[0]; mi++) {
        char path[512];
        snprintf(path, sizeof path, KT_SHARED "/models/%s", all[mi][0]);
        kld_model *m = NULL;
        kld_error err = {0};
        CHECK_OK(kld_model_open(path, NULL, &m, &err), err);
        if (!m) continue;
        const int64_t nv = kld_model_hparams(m)->n_vocab;
        double worst = 0, worst_kld = 0;
        const char *worst_at = "";
        for (int w = 0; w < 2; w++) {
            snprintf(path, sizeof path, KT_SHARED "/oracle/%s/%s", all[mi][1],
                     w ? "corpus.tokens" : "ids.i32");
            int64_t n;
            int32_t *ids = read_ids(path, &n);
            if (w && n > 128) n = 128;
            const int64_t chunk = n < 48 ? n : 48;
            float *base = run(m, ids, n, chunk, NULL, -1, NULL);
            for (size_t k = 0; k < sizeof onl / sizeof onl[0]; k++) {
                float *on = run(m, ids, n, chunk, onl[k], -1, NULL);
                if (!base || !on) {
                    free(on);
                    continue;
                }
                tf_cmp c = tf_compare(base, on, n, nv);
                CHECK(c.mean_kld <= 1e-10 && c.same_argmax == n, "%s %s over %s: KLD %.3g, argmax "
                      "%d/%lld", all[mi][0], onl[k], path, c.mean_kld, c.same_argmax, (long long)n);
                if (!(c.max_abs <= worst)) {
                    worst = c.max_abs;
                    worst_at = onl[k];
                }
                if (c.mean_kld > worst_kld) worst_kld = c.mean_kld;
                free(on);
            }
            free(base);
            free(ids);
        }
        printf("online vs exact %-24s max |dlogit| %.3g (%s), mean KLD <= %.3g\n", all[mi][0],
               worst, worst_at, worst_kld);
        CHECK(worst <= ONLINE_MAX_DLOGIT, "%s: online max |dlogit| %.3g <= %.3g", all[mi][0], worst,
              ONLINE_MAX_DLOGIT);
        kld_model_close(m);
    }
}

static float *read_f32(const char *path, size_t count) {
    size_t size;
    char *b = kt_read_file(path, &size);
    CHECK(size == count * 4, "%s holds %zu floats", path, count);
    float *f = malloc(count * sizeof(float));
    memcpy(f, b, size < count * 4 ? size : count * 4);
    free(b);
    return f;
}

/* llama.cpp's logits with -ctk iq4_nl -ctv iq4_nl -fa (c392e50; tests/data/lcpp-kv/README.md):
 * stored as int8 steps of a per-row scale from the shared f16/f16 file's logits. */
static float *read_iq4_nl_oracle(const float *lf16, int64_t n, int64_t nv) {
    char *path = kt_gunzip_to_build("tests/data/lcpp-kv/k-iq4_nl.v-iq4_nl.fa1.delta-i8.gz");
    size_t size = 0;
    char *b = path ? kt_read_file(path, &size) : NULL;
    const size_t row = 4 + (size_t)nv;
    CHECK(b && size == (size_t)n * row, "%s holds %lld rows of a scale and %lld int8", path ? path : "(gunzip failed)",
          (long long)n, (long long)nv);
    float *l = NULL;
    if (b && size == (size_t)n * row) {
        l = malloc(sizeof(float) * (size_t)(n * nv));
        for (int64_t r = 0; r < n; r++) {
            float scale;
            memcpy(&scale, b + r * row, 4);
            const int8_t *q = (const int8_t *)(b + r * row + 4);
            for (int64_t i = 0; i < nv; i++) l[r * nv + i] = lf16[r * nv + i] + scale * (float)q[i];
        }
    }
    free(b);
    free(path);
    return l;
}

/* The rows of tests/data/lcpp-kv/iq4_nl-cpy.bin (its README: the same
 * generator in the one-off program that asked ggml for their bytes). */
static void iq4_cpy_rows(float *x, int n_blocks) {
    uint64_t s = 20261204;
    for (int b = 0; b < n_blocks; b++)
        for (int j = 0; j < 32; j++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            const int v = (int)(s >> 44) - (1 << 19);
            float f = (float)v / (float)(1 << 19);
            if (b % 4 == 1) f *= 1e-3f;
            if (b % 4 == 2 && j == b % 32) f = 4 * (b & 8 ? -1 : 1);
            if (b % 4 == 3) f = f * f * f;
            x[b * 32 + j] = f;
        }
}

/* iq4_nl cache rows are ggml_cpy's bytes (quantize_row_iq4_nl_ref, no
 * scale trials), not llama-quantize's (issue 30). */
static void test_iq4_nl_cpy(void) {
    enum { NB = 64 };
    float x[NB * 32];
    uint8_t got[NB * 18], trials[NB * 18];
    iq4_cpy_rows(x, NB);
    size_t size = 0;
    char *want = kt_read_file("tests/data/lcpp-kv/iq4_nl-cpy.bin", &size);
    CHECK(want && size == sizeof got, "iq4_nl-cpy.bin holds %d blocks", NB);
    const kld_type_info *ti = kld_type_info_get(KLD_TYPE_IQ4_NL);
    CHECK(ti->quantize_row_cpy != NULL, "iq4_nl has a ggml_cpy quantizer");
    if (!want || size != sizeof got || !ti->quantize_row_cpy) {
        free(want);
        return;
    }
    ti->quantize_row_cpy(x, got, NB * 32);
    ti->quantize_row(x, trials, NB * 32);
    int bad = 0, differ = 0;
    for (int b = 0; b < NB; b++) {
        bad += memcmp(got + 18 * b, want + 18 * b, 18) != 0;
        differ += memcmp(trials + 18 * b, want + 18 * b, 18) != 0;
    }
    printf("iq4_nl ggml_cpy bytes: %d of %d blocks differ from ggml's; llama-quantize's quantizer differs in %d\n",
           bad, NB, differ);
    CHECK(bad == 0, "iq4_nl: %d of %d blocks differ from ggml_cpy's bytes", bad, NB);
    CHECK(differ > NB / 4, "llama-quantize's iq4_nl bytes differ from ggml_cpy's in %d of %d blocks (the test "
          "tells the two apart)", differ, NB);
    free(want);
}

/* KV quantization against llama.cpp's -ctk/-ctv logits of rand-llama f16. */
static void test_kv_oracle(void) {
    const char *dir = KT_SHARED "/oracle/rand-llama/kv";
    kld_model *m = NULL;
    kld_error err = {0};
    CHECK_OK(kld_model_open(KT_SHARED "/models/rand-llama/f16.gguf", NULL, &m, &err), err);
    if (!m) return;
    int64_t n;
    char path[512];
    snprintf(path, sizeof path, "%s/ids.i32", dir);
    int32_t *ids = read_ids(path, &n);
    const int64_t nv = 32000;
    snprintf(path, sizeof path, "%s/k-f16.v-f16.fa0.logits.f32", dir);
    float *lf16 = read_f32(path, (size_t)(n * nv));
    float *of16 = run(m, ids, n, n, "kv=f16,act=q8", -1, NULL);
    tf_cmp c = tf_compare(lf16, of16, n, nv);
    printf("kv f16: KLD(llama.cpp || ours) %.3g, max |d| %.3g\n", c.mean_kld, c.max_abs);
    static const char *const types[] = {"q8_0", "q4_0", "iq4_nl"};
    for (int t = 0; t < 3; t++) {
        snprintf(path, sizeof path, "%s/k-%s.v-%s.fa1.logits.f32", dir, types[t], types[t]);
        float *lq = t < 2 ? read_f32(path, (size_t)(n * nv)) : read_iq4_nl_oracle(lf16, n, nv);
        if (!lq) continue;
        char lv[32];
        snprintf(lv, sizeof lv, "kv=%s,act=q8", types[t]);
        kld_session *s = NULL;
        float *oq = run(m, ids, n, n, lv, -1, &s);
        double lcache = tf_compare(lf16, lq, n, nv).mean_kld;
        double ocache = tf_compare(of16, oq, n, nv).mean_kld;
        double agree = tf_compare(lq, oq, n, nv).mean_kld;
        printf("kv %s: KLD(llama.cpp || ours) %.3g (bound %.3g); cache KLD llama.cpp %.3g, ours %.3g "
               "(ratio %.3f)\n", types[t], agree, 0.1 * lcache + 1e-5, lcache, ocache, ocache / lcache);
        CHECK(agree <= 0.1 * lcache + 1e-5, "kv=%s: KLD(llama.cpp || ours) %.3g <= %.3g", types[t],
              agree, 0.1 * lcache + 1e-5);
        CHECK(fabs(ocache / lcache - 1) <= 0.25, "kv=%s: our cache KLD %.3g within 25%% of llama.cpp's %.3g",
              types[t], ocache, lcache);
        /* Layer 0's K and V rows do not depend on the cache: quantize the
         * f32 session's rows ourselves and compare bytes. */
        kld_session *f = NULL;
        float *of = run(m, ids, n, n, "act=q8", -1, &f); /* the same layer-0 rows */
        const kld_hparams *hp = kld_model_hparams(m);
        uint32_t ty;
        kld_type_from_name(types[t], &ty);
        const kld_type_info *ti = kld_type_info_get(ty); /* the bytes ggml_cpy writes */
        const kld_from_float_fn cpy = ti->quantize_row_cpy ? ti->quantize_row_cpy : ti->quantize_row;
        int bad = 0;
        uint8_t qb[256];
        float row[256];
        for (int64_t h = 0; h < hp->n_head_kv; h++)
            for (int64_t p = 0; p < n; p++) {
                uint64_t bytes, fb;
                const uint8_t *kq = kld_session_kv_row(s, 0, false, h, p, &bytes);
                const float *kt = f->kvl[0].k;
                for (int64_t d = 0; d < hp->head_dim; d++) row[d] = kt[(h * hp->head_dim + d) * f->ldk + p];
                cpy(row, qb, hp->head_dim);
                bad += memcmp(qb, kq, bytes) != 0;
                const uint8_t *vq = kld_session_kv_row(s, 0, true, h, p, &bytes);
                const float *vf = kld_session_kv_row(f, 0, true, h, p, &fb);
                cpy(vf, qb, hp->head_dim_v);
                bad += memcmp(qb, vq, bytes) != 0;
            }
        CHECK(bad == 0, "kv=%s: %d layer-0 K/V rows differ from ggml_cpy's quantizer on the f32 rows",
              types[t], bad);
        kld_session_free(f);
        kld_session_free(s);
        free(of);
        free(oq);
        free(lq);
    }
    free(of16);
    free(lf16);
    free(ids);
    kld_model_close(m);
}

/* act=q8 reproduces llama.cpp's activation rounding. */
static void test_act_q8(void) {
    static const char *const arms[] = {"q8_0", "q4_0", "q4_K_M"};
    int64_t n;
    int32_t *ids = read_ids(KT_SHARED "/oracle/rand-llama/ids.i32", &n);
    for (int a = 0; a < 3; a++) {
        char path[512];
        snprintf(path, sizeof path, KT_SHARED "/models/rand-llama/%s.gguf", arms[a]);
        kld_model *m = NULL;
        kld_error err = {0};
        CHECK_OK(kld_model_open(path, NULL, &m, &err), err);
        if (!m) continue;
        const int64_t nv = kld_model_hparams(m)->n_vocab;
        snprintf(path, sizeof path, KT_SHARED "/oracle/rand-llama/%s.logits.f32", arms[a]);
        float *ll = read_f32(path, (size_t)(n * nv));
        float *exact = run(m, ids, n, n, NULL, -1, NULL), *q8 = run(m, ids, n, n, "act=q8", -1, NULL);
        tf_cmp ce = tf_compare(ll, exact, n, nv), cq = tf_compare(ll, q8, n, nv);
        double md[64];
        for (int64_t r = 0; r < n; r++) {
            md[r] = 0;
            for (int64_t i = 0; i < nv; i++) md[r] = fmax(md[r], fabs(ll[r * nv + i] - q8[r * nv + i]));
        }
        for (int64_t i = 1; i < n; i++) /* insertion sort for the median */
            for (int64_t j = i; j > 0 && md[j] < md[j - 1]; j--) {
                double t = md[j];
                md[j] = md[j - 1];
                md[j - 1] = t;
            }
        double median = n % 2 ? md[n / 2] : 0.5 * (md[n / 2 - 1] + md[n / 2]);
        printf("act=q8 %s: KLD(llama.cpp || ours) exact %.3g -> q8 %.3g; median max|d| %.3g, "
               "max %.3g\n", arms[a], ce.mean_kld, cq.mean_kld, median, cq.max_abs);
        CHECK(cq.mean_kld <= 1e-4, "%s act=q8: mean KLD %.3g <= 1e-4", arms[a], cq.mean_kld);
        CHECK(median <= 1e-3, "%s act=q8: median max |dlogit| %.3g <= 1e-3", arms[a], median);
        free(ll);
        free(exact);
        free(q8);
        kld_model_close(m);
    }
    free(ids);
}

/* The plan shows the smaller cache, a bad lever cannot apply, and two
 * sessions with different levers share one model. */
static void test_plan(void) {
    kld_model *m = NULL;
    kld_error err = {0};
    CHECK_OK(kld_model_open(KT_SHARED "/models/rand-llama/f16.gguf", NULL, &m, &err), err);
    if (!m) return;
    kld_levers l;
    kld_mem_plan p32, p4;
    CHECK_OK(kld_mem_plan_compute(m, 1024, 64, 2, &p32, &err), err);
    kld_levers_default(&l);
    CHECK_OK(kld_levers_parse("kv=q4_0", &l, &err), err);
    CHECK_OK(kld_mem_plan_compute_levers(m, 1024, 64, 2, &l, &p4, &err), err);
    /* rand-llama: 2 layers × 2 kv heads × 64 dims, K and V */
    CHECK(p32.kv_token_bytes == 2 * 2 * 2 * 64 * 4, "f32 cache: %llu bytes per token",
          (unsigned long long)p32.kv_token_bytes);
    CHECK(p4.kv_token_bytes == 2 * 2 * 2 * 2 * 18, "q4_0 cache: %llu bytes per token",
          (unsigned long long)p4.kv_token_bytes);
    CHECK(p4.kv_bytes * 7 < p32.kv_bytes, "q4_0 cache %llu bytes vs f32 %llu",
          (unsigned long long)p4.kv_bytes, (unsigned long long)p32.kv_bytes);
    CHECK(p4.arena_bytes < p32.arena_bytes, "the arena is smaller (%llu < %llu)",
          (unsigned long long)p4.arena_bytes, (unsigned long long)p32.arena_bytes);
    CHECK(p4.arena_bytes == p4.kv_bytes + p4.act_bytes + p4.scratch_bytes, "the plan adds up");
    CHECK(!strcmp(p4.kv_desc, "kv=q4_0"), "plan names the cache: %s", p4.kv_desc);
    kld_levers_default(&l);
    CHECK_OK(kld_levers_parse("kv=blk:0-2=q8_0,f16", &l, &err), err);
    kld_status st = kld_mem_plan_compute_levers(m, 64, 16, 1, &l, &p4, &err);
    CHECK(st == KLD_ERR_ARG && strstr(err.msg, "blk:0-2") && strstr(err.msg, "blk:0-1"),
          "a layer map past the last layer: %s", err.msg);
    /* a kv_config.json listing layers the model does not have names the file and the layer */
    char cfg[600], lever[700];
    snprintf(cfg, sizeof cfg, "%s/kv_config_past.json", kt_build_dir());
    const char *past = "[{\"layer_idx\": 0, \"bits\": 4, \"group_size\": 64},"
                       " {\"layer_idx\": 5, \"bits\": 8, \"group_size\": 64}]";
    kt_write_file(cfg, past, strlen(past));
    snprintf(lever, sizeof lever, "kv_config=%s", cfg);
    kld_levers_default(&l);
    CHECK_OK(kld_levers_parse(lever, &l, &err), err);
    st = kld_mem_plan_compute_levers(m, 64, 16, 1, &l, &p4, &err);
    CHECK(st == KLD_ERR_ARG && strstr(err.msg, cfg) && strstr(err.msg, "layer 5") &&
              strstr(err.msg, "last layer 1"),
          "kv_config past the last layer names the file and the layer: %s", err.msg);
    kld_model_close(m);
    /* stories260K: head size 8 takes no 32-value block */
    CHECK_OK(kld_model_open(KT_SHARED "/models/stories260K/f32.gguf", NULL, &m, &err), err);
    if (!m) return;
    kld_levers_default(&l);
    CHECK_OK(kld_levers_parse("kv_v=q8_0", &l, &err), err);
    kld_session *s = NULL;
    kld_session_opts o = {64, 16, 1, NULL, &l, false, 0};
    st = kld_session_create_opts(m, &o, &s, &err);
    CHECK(st == KLD_ERR_ARG && !s && strstr(err.msg, "kv_v=q8_0") && strstr(err.msg, "f16"),
          "head size 8 with q8_0: %s", err.msg);
    kld_model_close(m);
}

int main(void) {
    kld_kernels_init();
    test_parse();
    test_bad_levers();
    test_reference_values();
    test_online();
    test_iq4_nl_cpy();
    test_kv_oracle();
    test_act_q8();
    test_plan();
    return kt_finish();
}
