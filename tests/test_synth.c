/* test_synth.c — the synthesizer: vocabulary training is deterministic and
 * well-formed, models have the requested shapes and types, the same seed
 * gives the same bytes, and the synthesized tokenizer round-trips the
 * built-in corpus. */
#include "io/gguf.h"
#include "synth/synth.h"
#include "testlib.h"
#include "tokenizer/tokenizer.h"

#include <math.h>
#include <stdlib.h>

static void test_rng(void) {
    kld_rng a, b;
    kld_rng_seed(&a, 7);
    kld_rng_seed(&b, 7);
    double sum = 0, sum2 = 0;
    bool same = true;
    for (int i = 0; i < 100000; i++) {
        double x = kld_rng_gaussian(&a);
        same = same && x == kld_rng_gaussian(&b);
        sum += x;
        sum2 += x * x;
    }
    CHECK(same, "same seed, same stream");
    CHECK(fabs(sum / 1e5) < 0.02 && fabs(sum2 / 1e5 - 1.0) < 0.02, "gaussian mean %g var %g",
          sum / 1e5, sum2 / 1e5);
}

static void test_vocab(void) {
    kld_synth_vocab v, w;
    kld_error err = {0};
    CHECK_OK(kld_synth_vocab_train((const char *)kld_builtin_corpus, kld_builtin_corpus_len, 3000, &v, &err), err);
    CHECK_OK(kld_synth_vocab_train((const char *)kld_builtin_corpus, kld_builtin_corpus_len, 3000, &w, &err), err);
    CHECK(v.n == 3000 && w.n == 3000, "vocab size %d", v.n);
    bool same = true, unique = true, utf8 = true;
    int learned = 0;
    for (int32_t i = 0; i < v.n && i < w.n; i++) {
        same = same && !strcmp(v.pieces[i], w.pieces[i]) && v.scores[i] == w.scores[i];
        utf8 = utf8 && kld_utf8_valid(v.pieces[i], strlen(v.pieces[i]));
        if (v.types[i] == 1) learned++;
        for (int32_t j = i + 1; j < v.n && j < i + 64; j++) unique = unique && strcmp(v.pieces[i], v.pieces[j]);
    }
    CHECK(same, "training is deterministic");
    CHECK(unique, "neighbouring pieces are distinct");
    CHECK(utf8, "pieces are valid UTF-8");
    CHECK(learned > 800, "%d learned pieces", learned);
    CHECK(!strcmp(v.pieces[1], "<s>") && v.types[1] == 3 && !strcmp(v.pieces[3], "<0x00>") &&
              v.types[3] == 6, "special and byte tokens");
    kld_synth_vocab_free(&w);
    CHECK(kld_synth_vocab_train((const char *)kld_builtin_corpus, kld_builtin_corpus_len, 100, &w,
                                &err) == KLD_ERR_ARG, "a vocabulary too small is refused: %s", err.msg);
    kld_synth_vocab_free(&v);
}

static int synth_threads = 0; /* 0: all cores */

static void write_model(const char *type, uint64_t seed, const char *tag, char *path, size_t n) {
    kld_synth_options o;
    kld_synth_defaults(&o);
    o.n_embd = 256;
    o.n_layer = 2;
    o.n_head = 4;
    o.n_head_kv = 2;
    o.n_ff = 512;
    o.n_vocab = 2048;
    o.seed = seed;
    o.type = type;
    o.n_threads = synth_threads;
    snprintf(path, n, "%s/test_synth_%s_%llu%s.gguf", kt_build_dir(), type, (unsigned long long)seed, tag);
    kld_error err = {0};
    CHECK_OK(kld_synth_write(&o, path, &err), err);
}

static void test_models(void) {
    char p1[512], p2[512], p3[512], p4[512];
    write_model("f16", 1, "", p1, sizeof p1);
    synth_threads = 1; /* the same bytes whatever the thread count */
    write_model("f16", 1, "_again", p2, sizeof p2);
    synth_threads = 0;
    write_model("f16", 2, "", p3, sizeof p3);
    write_model("q4_K_M", 1, "", p4, sizeof p4);
    size_t n1, n2, n3;
    char *a = kt_read_file(p1, &n1), *c = kt_read_file(p3, &n3);
    char *b = kt_read_file(p2, &n2);
    CHECK(n1 == n2 && !memcmp(a, b, n1), "same seed, same bytes (all cores vs 1 thread)");
    CHECK(n1 == n3 && memcmp(a, c, n1) != 0, "another seed, other weights");
    free(a);
    free(b);
    free(c);
    kld_gguf *g;
    kld_error err = {0};
    kld_status st = kld_gguf_open(p4, &g, &err);
    CHECK_OK(st, err);
    if (st) return;
    const kld_tensor *t = kld_gguf_find_tensor(g, "token_embd.weight");
    CHECK(t && t->type == KLD_TYPE_Q6_K && t->ne[0] == 256 && t->ne[1] == 2048, "q4_K_M embedding q6_K");
    t = kld_gguf_find_tensor(g, "blk.0.attn_q.weight");
    CHECK(t && t->type == KLD_TYPE_Q4_K && t->ne[1] == 256, "q4_K_M attn_q q4_K");
    /* llama.cpp's rule for 2 layers (as in ../shared rand-llama q4_K_M):
     * blk.1's attn_v and ffn_down get q6_K, blk.0's stay q4_K */
    t = kld_gguf_find_tensor(g, "blk.0.ffn_down.weight");
    CHECK(t && t->type == KLD_TYPE_Q4_K && t->ne[0] == 512, "q4_K_M blk.0 ffn_down q4_K");
    t = kld_gguf_find_tensor(g, "blk.1.ffn_down.weight");
    CHECK(t && t->type == KLD_TYPE_Q6_K, "q4_K_M blk.1 ffn_down q6_K");
    t = kld_gguf_find_tensor(g, "blk.1.attn_v.weight");
    CHECK(t && t->type == KLD_TYPE_Q6_K, "q4_K_M blk.1 attn_v q6_K");
    t = kld_gguf_find_tensor(g, "blk.0.attn_norm.weight");
    CHECK(t && t->type == KLD_TYPE_F32, "norms stay f32");
    CHECK(g->n_tensors == 2 + 9 * 2, "%llu tensors", (unsigned long long)g->n_tensors);
    int64_t nv;
    CHECK(kld_gguf_get_int(g, "llama.vocab_size", &nv) && nv == 2048, "vocab_size");
    kld_gguf_close(g);

    /* The synthesized vocabulary tokenizes and round-trips the corpus. */
    kld_tokenizer *tok;
    st = kld_tok_open_path(p1, &tok, &err);
    CHECK_OK(st, err);
    if (st) return;
    const char *text = (const char *)kld_builtin_corpus;
    size_t pos = 0, lines = 0, exact = 0;
    while (pos < kld_builtin_corpus_len) {
        const char *nl = memchr(text + pos, '\n', kld_builtin_corpus_len - pos);
        size_t len = nl ? (size_t)(nl - text - pos) : kld_builtin_corpus_len - pos;
        kld_tok_ids ids = {0};
        char *back = NULL;
        size_t back_len = 0;
        if (len && kld_tok_encode(tok, text + pos, len, 0, &ids, &err) == KLD_OK &&
            kld_tok_decode(tok, ids.ids, ids.n, 0, &back, &back_len, &err) == KLD_OK) {
            lines++;
            /* SentencePiece decoding drops the leading space it added */
            exact += back_len == len && !memcmp(back, text + pos, len);
            CHECK(ids.n < len, "line %zu: %zu ids for %zu bytes (merges are used)", lines, ids.n, len);
        }
        free(back);
        kld_tok_ids_free(&ids);
        pos += len + 1;
    }
    CHECK(lines > 40 && exact == lines, "%zu of %zu lines round-trip", exact, lines);
    kld_tok_free(tok);
}

int main(void) {
    kld_kernels_init();
    test_rng();
    test_vocab();
    test_models();
    return kt_finish();
}
