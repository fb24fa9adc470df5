/* test_engine_batch.c — kld_session_decode_batch: a decode step of several
 * sessions at once (their weight products as one M = B GEMM) gives every
 * row bit for bit the logits of that session's own one-token step, for
 * prompts of different lengths, block-quantized / f16 / f32 weights,
 * biases, soft-caps, typed KV caches, act rounding, online attention,
 * the scalar kernels, 1 and 2 threads, and B past the small-M GEMM path;
 * incompatible or repeated sessions are errors that change nothing. */
#include "engine/engine.h"
#include "testlib.h"

#include <stdlib.h>

#define MAX_B 26

static int32_t argmax(const float *x, int64_t n) {
    int64_t b = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return (int32_t)b;
}

/* B batched and B reference sessions over one pool, prefilled with
 * prompts of lengths 1, 6, 19, ... (pseudo-random ids), then `steps`
 * decode steps; every batched row is compared with its reference. */
static void check_model(const char *path, const char *levers, int threads, int B, int steps) {
    kld_error err = {0};
    kld_model *m = NULL;
    CHECK_OK(kld_model_open(path, NULL, &m, &err), err);
    if (!m) return;
    kld_levers lv;
    kld_levers_default(&lv);
    if (levers) CHECK_OK(kld_levers_parse(levers, &lv, &err), err);
    const int64_t nv = kld_model_hparams(m)->n_vocab, n_ctx = 64, chunk = 32;
    kld_pool *pool = kld_pool_create(threads);
    kld_session *bs[MAX_B] = {0}, *rs[MAX_B] = {0};
    kld_session_opts so = {.n_ctx = n_ctx, .max_chunk = chunk, .pool = pool, .levers = &lv};
    for (int r = 0; r < B; r++) {
        CHECK_OK(kld_session_create_opts(m, &so, &bs[r], &err), err);
        CHECK_OK(kld_session_create_opts(m, &so, &rs[r], &err), err);
        if (!bs[r] || !rs[r]) B = r; /* reported; compare what exists */
    }
    float *lb = malloc(sizeof(float) * (size_t)(B * nv)), *lr = malloc(sizeof(float) * (size_t)nv);
    int32_t tok[MAX_B], prompt[40];
    uint32_t x = 12345;
    for (int r = 0; r < B; r++) {
        const int64_t len = 1 + (r * 13) % 37;
        for (int64_t i = 0; i < len; i++) prompt[i] = (int32_t)((x = x * 1103515245u + 12345u) >> 8) % (int32_t)nv;
        for (int64_t i = 0; i < len; i += chunk) { /* the last chunk's last row */
            const int64_t c = len - i < chunk ? len - i : chunk;
            CHECK_OK(kld_session_eval_rows(bs[r], prompt + i, c, c - 1, lr, &err), err);
            CHECK_OK(kld_session_eval_rows(rs[r], prompt + i, c, c - 1, lr, &err), err);
        }
        tok[r] = argmax(lr, nv);
    }
    int differ = 0;
    for (int step = 0; step < steps; step++) {
        CHECK_OK(kld_session_decode_batch(bs, B, tok, lb, &err), err);
        for (int r = 0; r < B; r++) {
            CHECK_OK(kld_session_decode(rs[r], tok[r], lr, &err), err);
            differ += memcmp(lr, lb + (size_t)r * (size_t)nv, sizeof(float) * (size_t)nv) != 0;
            differ += kld_session_pos(bs[r]) != kld_session_pos(rs[r]);
            tok[r] = argmax(lr, nv);
        }
    }
    CHECK(differ == 0, "%s [%s] %d threads, B %d: %d of %d rows differ from one-session decode", path,
          levers ? levers : "reference", threads, B, differ, B * steps);
    for (int r = 0; r < B; r++) {
        kld_session_free(bs[r]);
        kld_session_free(rs[r]);
    }
    kld_pool_free(pool);
    free(lb);
    free(lr);
    kld_model_close(m);
}

static void check_errors(void) {
    kld_error err = {0};
    kld_model *m = NULL;
    CHECK_OK(kld_model_open(KT_SHARED "/models/stories260K/f32.gguf", NULL, &m, &err), err);
    if (!m) return;
    kld_pool *pool = kld_pool_create(1);
    kld_levers q8;
    kld_levers_default(&q8);
    CHECK_OK(kld_levers_parse("kv=bf16", &q8, &err), err);
    kld_session *a = NULL, *b = NULL, *c = NULL, *d = NULL, *e = NULL;
    kld_session_opts so = {.n_ctx = 8, .max_chunk = 4, .pool = pool};
    CHECK_OK(kld_session_create_opts(m, &so, &a, &err), err);
    CHECK_OK(kld_session_create_opts(m, &so, &b, &err), err);
    so.n_ctx = 16;
    CHECK_OK(kld_session_create_opts(m, &so, &c, &err), err);
    so.n_ctx = 8;
    so.levers = &q8;
    CHECK_OK(kld_session_create_opts(m, &so, &d, &err), err);
    CHECK_OK(kld_session_create(m, 8, 4, 1, &e, &err), err); /* its own pool */
    const int32_t t[5] = {1, 2, 3, 4, 5};
    float *l = malloc(sizeof(float) * 5 * (size_t)kld_model_hparams(m)->n_vocab);
    kld_session *same[2] = {a, a}, *ctx[2] = {a, c}, *lev[2] = {a, d}, *pl[2] = {a, e};
    CHECK(kld_session_decode_batch(same, 2, t, l, &err) == KLD_ERR_ARG && strstr(err.msg, "same session"),
          "a session twice: %s", err.msg);
    CHECK(kld_session_decode_batch(ctx, 2, t, l, &err) == KLD_ERR_ARG && strstr(err.msg, "differs"),
          "different n_ctx: %s", err.msg);
    CHECK(kld_session_decode_batch(lev, 2, t, l, &err) == KLD_ERR_ARG, "different levers: %s", err.msg);
    CHECK(kld_session_decode_batch(pl, 2, t, l, &err) == KLD_ERR_ARG, "different pools: %s", err.msg);
    kld_session *five[5] = {a, b, c, d, e};
    CHECK(kld_session_decode_batch(five, 5, t, l, &err) == KLD_ERR_ARG && strstr(err.msg, "chunk size"),
          "more sessions than the chunk: %s", err.msg);
    const int32_t bad[2] = {1, -3};
    kld_session *ab[2] = {a, b};
    CHECK(kld_session_decode_batch(ab, 2, bad, l, &err) == KLD_ERR_ARG && strstr(err.msg, "vocabulary"),
          "bad token id: %s", err.msg);
    CHECK(kld_session_pos(a) == 0 && kld_session_pos(b) == 0, "errors leave the sessions unchanged");
    CHECK_OK(kld_session_eval(b, t, 4, NULL, &err), err);
    CHECK_OK(kld_session_eval(b, t, 4, NULL, &err), err);
    CHECK(kld_session_decode_batch(ab, 2, t, l, &err) == KLD_ERR_ARG && strstr(err.msg, "full"),
          "a full context: %s", err.msg);
    CHECK(kld_session_pos(a) == 0 && kld_session_pos(b) == 8, "a full context changes nothing");
    CHECK(kld_session_pool(a) == pool && kld_session_pool(e) != pool, "kld_session_pool");
    free(l);
    kld_session_free(a), kld_session_free(b), kld_session_free(c), kld_session_free(d), kld_session_free(e);
    kld_pool_free(pool);
    kld_model_close(m);
}

int main(void) {
    const char *st = KT_SHARED "/models/stories260K/f32.gguf";
    for (int threads = 1; threads <= 2; threads++) {
        check_model(st, NULL, threads, 3, 6);
        check_model(KT_SHARED "/models/rand-llama/q4_K_M.gguf", NULL, threads, 4, 4);
    }
    check_model(st, NULL, 2, MAX_B, 3); /* M >= 24: the large-M GEMM path */
    check_model(st, "kv=f16,act=q8", 2, 5, 4);
    check_model(KT_SHARED "/models/rand-llama/q8_0.gguf", "kv=q8_0,act=q8", 2, 3, 3);
    check_model(st, "attention=online,attn_block=16", 2, 4, 4);
    check_model(st, "kernels=ref", 1, 4, 3);
    check_model(KT_SHARED "/models/rand-qwen2/q8_0.gguf", "kv_k=f16", 2, 3, 3);
    check_model(KT_SHARED "/models/gemma2/f16.gguf", NULL, 2, 3, 3);
    check_model(KT_SHARED "/models/phi3/f16.gguf", NULL, 2, 3, 3);
    check_errors();
    return kt_finish();
}
