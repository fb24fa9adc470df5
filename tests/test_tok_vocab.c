/* test_tok_vocab.c — llama.cpp's vocabulary test vectors: every
 * ../shared/tokenizers/llamacpp-vocab/ggml-vocab-*.gguf (gunzipped into the
 * build folder) must reproduce its .inp/.out vectors exactly, tokenized as
 * llama.cpp's test-tokenizer-0 does (no BOS/EOS, no special parsing). The
 * vectors whose GGUF is too large to ship are checked against the
 * tokenizer.json of the same vocabulary (llama-bpe = Llama 3, qwen2 =
 * Qwen). Vocabularies without vectors must at least load. */
#include "testlib.h"
#include "tokenizer/tokenizer.h"

#include <stdlib.h>
#include <string.h>

#define VOCAB KT_SHARED "/tokenizers/llamacpp-vocab"

static const char SEP[] = "\n__ggml_vocab_test__\n";

/* Runs the vectors of inp/out against t; returns the number of tests. */
static int run_vectors(const kld_tokenizer *t, const char *inp_path, const char *out_path,
                       unsigned flags) {
    size_t in_n, out_n;
    char *inp = kt_read_file(inp_path, &in_n);
    char *out = kt_read_file(out_path, &out_n);
    /* split .inp exactly like llama.cpp: text up to each separator */
    size_t pos = 0, sep_n = strlen(SEP);
    char *line = out, *out_end = out + out_n;
    int tests = 0;
    while (pos < in_n) {
        const char *found = memmem(inp + pos, in_n - pos, SEP, sep_n);
        size_t end = found ? (size_t)(found - inp) : in_n;
        char *nl = memchr(line, '\n', (size_t)(out_end - line));
        CHECK(line < out_end, "%s: more tests than .out lines", inp_path);
        if (line >= out_end) break;
        if (!nl) nl = out_end;
        /* expected ids: the line, each id preceded by a space */
        int32_t want[4096];
        size_t nw = 0;
        for (char *p = line; p < nl && nw < 4096;) {
            while (p < nl && *p == ' ') p++;
            if (p >= nl) break;
            want[nw++] = (int32_t)strtol(p, &p, 10);
        }
        kld_tok_ids got = {0};
        kld_error err = {0};
        kld_status st = kld_tok_encode(t, inp + pos, end - pos, flags, &got, &err);
        CHECK_OK(st, err);
        bool same = st == KLD_OK && got.n == nw &&
                    (nw == 0 || memcmp(got.ids, want, nw * sizeof *want) == 0);
        if (!same) {
            char g[512] = "", w[512] = "";
            size_t gl = 0, wl = 0;
            for (size_t i = 0; i < got.n && gl < 480; i++)
                gl += (size_t)snprintf(g + gl, 512 - gl, " %d", got.ids[i]);
            for (size_t i = 0; i < nw && wl < 480; i++)
                wl += (size_t)snprintf(w + wl, 512 - wl, " %d", want[i]);
            CHECK(false, "%s test %d '%.*s':\n   got%s\n  want%s", inp_path, tests + 1,
                  (int)(end - pos > 80 ? 80 : end - pos), inp + pos, g, w);
        } else {
            CHECK(true, "%s", "ok");
        }
        kld_tok_ids_free(&got);
        tests++;
        line = nl + 1;
        if (!found) break;
        pos = end + sep_n;
    }
    CHECK(line >= out_end, "%s: .out has more lines than tests", out_path);
    free(inp);
    free(out);
    return tests;
}

static void check_gguf(const char *name, int want_tests, int32_t want_vocab) {
    char gz[512], inp[512], out[512];
    snprintf(gz, sizeof gz, VOCAB "/ggml-vocab-%s.gguf.gz", name);
    snprintf(inp, sizeof inp, VOCAB "/ggml-vocab-%s.gguf.inp", name);
    snprintf(out, sizeof out, VOCAB "/ggml-vocab-%s.gguf.out", name);
    char *path = kt_gunzip_to_build(gz);
    kld_tokenizer *t = NULL;
    kld_error err = {0};
    kld_status st = kld_tok_open_path(path, &t, &err);
    CHECK_OK(st, err);
    if (st == KLD_OK) {
        CHECK(kld_tok_n_vocab(t) == want_vocab, "%s: n_vocab %d, want %d", name,
              (int)kld_tok_n_vocab(t), (int)want_vocab);
        if (want_tests > 0) {
            int n = run_vectors(t, inp, out, 0);
            CHECK(n == want_tests, "%s: %d tests, want %d", name, n, want_tests);
        } else {
            /* no vectors: it loads and encodes text to known pieces */
            kld_tok_ids ids = {0};
            st = kld_tok_encode(t, "Hello world", 11, 0, &ids, &err);
            CHECK_OK(st, err);
            CHECK(ids.n >= 2, "%s: 'Hello world' gave %zu ids", name, ids.n);
            kld_tok_ids_free(&ids);
        }
        kld_tok_free(t);
    }
    free(path);
}

static void check_json(const char *vectors, const char *json, int want_tests) {
    char inp[512], out[512];
    snprintf(inp, sizeof inp, VOCAB "/inp-out-only/ggml-vocab-%s.gguf.inp", vectors);
    snprintf(out, sizeof out, VOCAB "/inp-out-only/ggml-vocab-%s.gguf.out", vectors);
    kld_tokenizer *t = NULL;
    kld_error err = {0};
    kld_status st = kld_tok_open_path(json, &t, &err);
    CHECK_OK(st, err);
    if (st) return;
    /* Hugging Face encode(add_special_tokens=False) */
    int n = run_vectors(t, inp, out, KLD_TOK_PARSE_SPECIAL);
    CHECK(n == want_tests, "%s: %d tests, want %d", vectors, n, want_tests);
    kld_tok_free(t);
}

int main(void) {
    check_gguf("llama-spm", 46, 32000);
    check_gguf("phi-3", 46, 32064);
    check_gguf("gpt-2", 46, 50257);
    check_gguf("falcon", 46, 65024);
    check_gguf("mpt", 46, 50432);
    check_gguf("starcoder", 46, 49152);
    check_gguf("refact", 46, 49216);
    check_gguf("deepseek-coder", 46, 32256);
    check_gguf("deepseek-llm", 46, 102400);
    check_gguf("bert-bge", 46, 30522);
    check_gguf("baichuan", 0, 64000);
    check_gguf("gpt-neox", 0, 50432);
    check_json("llama-bpe", KT_SHARED "/tokenizers/llama3/tokenizer.json", 46);
    check_json("qwen2", KT_SHARED "/tokenizers/qwen3/tokenizer.json", 46);
    return kt_finish();
}
