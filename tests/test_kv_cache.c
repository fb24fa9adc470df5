/* test_kv_cache.c — the MLX and rotated KV schemes in a session on
 * rand-llama (2 layers, 2 kv heads of 64): 8-bit caches give a KLD well
 * below 4-bit ones; a per-layer map quantizes exactly the layers it names
 * and kv_start exactly the positions from N on (the cache bytes equal the
 * scheme's quantization of the reference's rows, the logits before N equal
 * the reference's); chunk sizes and the decode path give bit-identical
 * logits; the plan counts each scheme's bytes. */
#include "engine/internal.h"
#include "engine/kv_scheme.h"
#include "testlib.h"

#include <math.h>
#include <stdlib.h>

#define N_TOK 96
#define MODEL KT_SHARED "/models/rand-llama/f16.gguf"

static int32_t ids[N_TOK];

/* Logits [N_TOK][nv] in chunks of `chunk` (decode from decode_from on);
 * the session is kept in *keep when given. */
static float *run(kld_model *m, const char *levers, int64_t chunk, int64_t decode_from, kld_session **keep) {
    kld_levers l;
    kld_levers_default(&l);
    kld_error err = {0};
    if (levers) CHECK_OK(kld_levers_parse(levers, &l, &err), err);
    kld_session *s = NULL;
    kld_session_opts o = {N_TOK, chunk, 2, NULL, &l, false, 0};
    CHECK_OK(kld_session_create_opts(m, &o, &s, &err), err);
    if (!s) return NULL;
    const int64_t nv = kld_model_hparams(m)->n_vocab;
    float *lg = malloc((size_t)(N_TOK * nv) * sizeof(float));
    const int64_t pf = decode_from >= 0 ? decode_from : N_TOK;
    for (int64_t i = 0; i < pf; i += chunk)
        CHECK_OK(kld_session_eval(s, ids + i, pf - i < chunk ? pf - i : chunk, lg + i * nv, &err), err);
    for (int64_t i = pf; i < N_TOK; i++) CHECK_OK(kld_session_decode(s, ids[i], lg + i * nv, &err), err);
    if (keep) *keep = s;
    else kld_session_free(s);
    return lg;
}

/* Mean KL(ref ‖ cand) over positions from `from` on. */
static double mean_kld(const float *ref, const float *cand, int64_t nv, int64_t from) {
    double total = 0;
    for (int64_t t = from; t < N_TOK; t++) {
        const float *a = ref + t * nv, *b = cand + t * nv;
        double ma = -INFINITY, mb = -INFINITY, sa = 0, sb = 0, kl = 0;
        for (int64_t j = 0; j < nv; j++) ma = fmax(ma, a[j]), mb = fmax(mb, b[j]);
        for (int64_t j = 0; j < nv; j++) sa += exp(a[j] - ma), sb += exp(b[j] - mb);
        for (int64_t j = 0; j < nv; j++) {
            double la = a[j] - ma - log(sa), lb = b[j] - mb - log(sb);
            kl += exp(la) * (la - lb);
        }
        total += kl;
    }
    return total / (double)(N_TOK - from);
}

static void test_quality(kld_model *m, const float *ref) {
    const int64_t nv = kld_model_hparams(m)->n_vocab;
    static const char *const pairs[][2] = {{"kv=mlx8g64", "kv=mlx4g64"}, {"kv=mlx8g32", "kv=mlx4g32"},
                                           {"kv=rot8", "kv=rot4"}, {"kv_k=rot8,kv_v=mlx8g64", "kv_k=rot4,kv_v=rot3"}};
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        float *hi = run(m, pairs[i][0], 32, -1, NULL), *lo = run(m, pairs[i][1], 32, -1, NULL);
        if (!hi || !lo) return;
        const double k8 = mean_kld(ref, hi, nv, 0), k4 = mean_kld(ref, lo, nv, 0);
        printf("%-24s KLD %.3g   %-22s KLD %.3g\n", pairs[i][0], k8, pairs[i][1], k4);
        CHECK(k8 > 0 && k8 * 20 < k4, "%s KLD %.3g well below %s %.3g", pairs[i][0], k8, pairs[i][1], k4);
        free(hi);
        free(lo);
    }
}

/* Layer il's V row (head h, position p) of session s equals what `id`
 * makes of the reference's f32 row. */
static bool row_is(const kld_session *s, const kld_session *r, int64_t il, int64_t h, int64_t p, uint32_t id) {
    const int64_t hd = kld_model_hparams(s->model)->head_dim_v;
    uint64_t bytes, fb;
    const uint8_t *got = kld_session_kv_row(s, il, true, h, p, &bytes);
    const float *f = kld_session_kv_row(r, il, true, h, p, &fb);
    if (id == KLD_TYPE_F32) return bytes == (uint64_t)hd * 4 && !memcmp(got, f, (size_t)bytes);
    uint8_t want[1024];
    kld_kv_store_row(id, f, want, hd);
    return bytes == kld_kv_row_bytes(id, hd) && !memcmp(got, want, (size_t)bytes);
}

static void test_map_and_start(kld_model *m, const float *ref) {
    const int64_t nv = kld_model_hparams(m)->n_vocab;
    kld_session *r = NULL, *s = NULL;
    free(run(m, NULL, 32, -1, &r));
    /* layer 1 alone: layer 0 keeps the reference's f32 rows, layer 1 (whose
     * input is still the reference's) holds their mlx4g64 bytes */
    float *lg = run(m, "kv=blk:1=mlx4g64,f32", 32, -1, &s);
    if (!r || !s || !lg) return;
    CHECK(s->kvl[0].k_type == KLD_TYPE_F32 && s->kvl[0].v_type == KLD_TYPE_F32 &&
          s->kvl[1].k_type == KLD_KV_MLX(4, 64) && s->kvl[1].v_type == KLD_KV_MLX(4, 64), "blk:1 types");
    bool ok0 = true, ok1 = true;
    for (int64_t h = 0; h < 2; h++)
        for (int64_t p = 0; p < N_TOK; p++) {
            ok0 = ok0 && row_is(s, r, 0, h, p, KLD_TYPE_F32);
            ok1 = ok1 && row_is(s, r, 1, h, p, KLD_KV_MLX(4, 64));
        }
    CHECK(ok0 && ok1, "kv=blk:1=mlx4g64,f32 reaches layer 1 only (layer 0 f32 %d, layer 1 mlx4g64 %d)", ok0, ok1);
    free(lg);
    kld_session_free(s);
    lg = run(m, "kv=blk:0=rot3,f32", 32, -1, &s);
    if (!lg) return;
    bool r0 = true;
    for (int64_t h = 0; h < 2; h++)
        for (int64_t p = 0; p < N_TOK; p++) r0 = r0 && row_is(s, r, 0, h, p, KLD_KV_ROT(3));
    uint64_t b1;
    kld_session_kv_row(s, 1, true, 0, 5, &b1);
    CHECK(r0 && s->kvl[1].v_type == KLD_TYPE_F32 && b1 == 64 * 4, "kv=blk:0=rot3,f32 reaches layer 0 only");
    free(lg);
    kld_session_free(s);
    /* kv_start=37: positions 0..36 f32 (the reference's rows), 37.. quantized;
     * the logits before 37 see only exact rows: equal to the reference's */
    lg = run(m, "kv=mlx4g32,kv_start=37", 16, -1, &s);
    if (!lg) return;
    bool pre = true, post = true;
    for (int64_t h = 0; h < 2; h++)
        for (int64_t p = 0; p < N_TOK; p++) {
            if (p < 37) pre = pre && row_is(s, r, 0, h, p, KLD_TYPE_F32);
            else post = post && row_is(s, r, 0, h, p, KLD_KV_MLX(4, 32));
        }
    CHECK(pre && post, "kv_start=37: rows 0..36 f32 (%d), 37.. mlx4g32 (%d)", pre, post);
    CHECK(!memcmp(lg, ref, (size_t)(37 * nv) * sizeof(float)), "kv_start=37: logits of positions 0..36 are the reference's");
    CHECK(memcmp(lg + 37 * nv, ref + 37 * nv, (size_t)nv * sizeof(float)) != 0 && mean_kld(ref, lg, nv, 37) > 0,
          "kv_start=37: position 37 on differs");
    free(lg);
    kld_session_free(s);
    kld_session_free(r);
}

/* Chunk sizes, the decode path and thread-independent rows: bit-identical. */
static void test_invariance(kld_model *m) {
    const int64_t nv = kld_model_hparams(m)->n_vocab;
    static const char *const levers[] = {"kv=mlx4g64", "kv=rot3", "kv_k=rot4,kv_v=mlx8g32,kv_start=7",
                                         "kv=blk:0=mlx2g32,rot5,kv_start=40", "kv=mlx3g32,attention=online,attn_block=16"};
    for (size_t i = 0; i < sizeof levers / sizeof levers[0]; i++) {
        float *a = run(m, levers[i], 96, -1, NULL), *b = run(m, levers[i], 5, -1, NULL);
        float *c = run(m, levers[i], 16, 11, NULL);
        if (!a || !b || !c) return;
        const size_t bytes = (size_t)(N_TOK * nv) * sizeof(float);
        CHECK(!memcmp(a, b, bytes), "%s: chunk 96 == chunk 5, bit for bit", levers[i]);
        CHECK(!memcmp(a, c, bytes), "%s: decode from 11 == prefill, bit for bit", levers[i]);
        free(a);
        free(b);
        free(c);
    }
}

static void test_plan(kld_model *m) {
    kld_levers l;
    kld_mem_plan p, q;
    kld_error err = {0};
    static const struct { const char *lv; uint64_t row_k, row_v; } want[] = {
        {"kv=mlx4g64", 64 * 4 / 8 + 4, 64 * 4 / 8 + 4}, {"kv=mlx8g32", 64 + 8, 64 + 8},
        {"kv=mlx3g32", 24 + 8, 24 + 8}, {"kv_k=rot4,kv_v=rot3", 2 + 32, 2 + 24}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        kld_levers_default(&l);
        CHECK_OK(kld_levers_parse(want[i].lv, &l, &err), err);
        CHECK_OK(kld_mem_plan_compute_levers(m, 1024, 64, 1, &l, &p, &err), err);
        /* 2 layers × 2 kv heads, K and V */
        CHECK(p.kv_token_bytes == 2 * 2 * (want[i].row_k + want[i].row_v), "%s: %llu cache bytes per token",
              want[i].lv, (unsigned long long)p.kv_token_bytes);
        CHECK(p.kv_bytes >= 1024 * p.kv_token_bytes && p.kv_bytes < 1024 * p.kv_token_bytes + 4 * 64,
              "%s: the cache is %llu bytes", want[i].lv, (unsigned long long)p.kv_bytes);
        CHECK(!strcmp(p.kv_desc, want[i].lv), "plan names %s: %s", want[i].lv, p.kv_desc);
    }
    /* kv_start=100: 100 positions at f32 (4 layers·heads × 2 × 64 × 4 bytes each) */
    kld_levers_default(&l);
    CHECK_OK(kld_levers_parse("kv=mlx4g64,kv_start=100", &l, &err), err);
    CHECK_OK(kld_mem_plan_compute_levers(m, 1024, 64, 1, &l, &q, &err), err);
    CHECK(q.kv_token_bytes == 2 * 2 * 2 * 36 && q.kv_bytes >= 924 * q.kv_token_bytes + 100 * 2 * 2 * 2 * 64 * 4 &&
          q.kv_bytes < 924 * q.kv_token_bytes + 100 * 2 * 2 * 2 * 64 * 4 + 4 * 64 && !strcmp(q.kv_desc, "kv=mlx4g64,kv_start=100"),
          "kv_start=100: %llu bytes, %s", (unsigned long long)q.kv_bytes, q.kv_desc);
    kld_levers_default(&l);
    CHECK_OK(kld_levers_parse("kv_v=mlx4g128", &l, &err), err);
    kld_status st = kld_mem_plan_compute_levers(m, 64, 16, 1, &l, &p, &err);
    CHECK(st == KLD_ERR_ARG && strstr(err.msg, "kv_v=mlx4g128") && strstr(err.msg, "group (128)") &&
          strstr(err.msg, "head size 64"), "head size 64 with group 128: %s", err.msg);
}

int main(void) {
    kld_kernels_init();
    kld_model *m = NULL;
    kld_error err = {0};
    CHECK_OK(kld_model_open(MODEL, NULL, &m, &err), err);
    if (!m) return kt_finish();
    uint64_t x = 12345;
    const int64_t nv = kld_model_hparams(m)->n_vocab;
    for (int i = 0; i < N_TOK; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = (int32_t)((x >> 33) % (uint64_t)nv);
    }
    float *ref = run(m, NULL, 32, -1, NULL);
    if (ref) {
        test_quality(m, ref);
        test_map_and_start(m, ref);
    }
    test_invariance(m);
    test_plan(m);
    free(ref);
    kld_model_close(m);
    return kt_finish();
}
