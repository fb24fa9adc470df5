/* test_tok_ref.c — the Hugging Face reference ids: for the qwen3, llama3,
 * llama2 and gpt2 tokenizer.json files, encode(line, add_special_tokens)
 * of every line of stress.txt and corpus/licenses.txt must equal
 * <tok>/stress.ids and <tok>/corpus.ids (tokenizers 0.23.2), and
 * decode(encode(x)) must give x back on exactly the lines roundtrip.txt
 * does not list, in both of its modes. */
#include "testlib.h"
#include "tokenizer/tokenizer.h"

#include <stdlib.h>
#include <string.h>

#define TOK KT_SHARED "/tokenizers"

typedef struct lines {
    char **p;
    size_t *n;
    size_t count;
} lines;

/* Splits on LF only; the LF ending the last line starts no new line. */
static lines split_lines(char *buf, size_t size) {
    lines l = {0};
    size_t cap = 1024;
    l.p = malloc(cap * sizeof *l.p);
    l.n = malloc(cap * sizeof *l.n);
    size_t pos = 0;
    while (pos < size) {
        char *nl = memchr(buf + pos, '\n', size - pos);
        size_t end = nl ? (size_t)(nl - buf) : size;
        if (l.count == cap) {
            cap *= 2;
            l.p = realloc(l.p, cap * sizeof *l.p);
            l.n = realloc(l.n, cap * sizeof *l.n);
        }
        l.p[l.count] = buf + pos;
        l.n[l.count++] = end - pos;
        pos = end + 1;
    }
    return l;
}

static void check_ids(const kld_tokenizer *t, const char *tok, const char *text_path,
                      const char *ids_path) {
    size_t tn, in;
    char *text = kt_read_file(text_path, &tn), *ids = kt_read_file(ids_path, &in);
    lines tl = split_lines(text, tn), il = split_lines(ids, in);
    CHECK(tl.count == il.count, "%s: %zu text lines, %zu id lines", ids_path, tl.count, il.count);
    size_t bad = 0;
    char *buf = malloc(1 << 20);
    for (size_t i = 0; i < tl.count && i < il.count; i++) {
        kld_tok_ids got = {0};
        kld_error err = {0};
        kld_status st = kld_tok_encode(t, tl.p[i], tl.n[i],
                                       KLD_TOK_ADD_SPECIAL | KLD_TOK_PARSE_SPECIAL, &got, &err);
        size_t bl = 0;
        for (size_t k = 0; k < got.n && bl < (1 << 20) - 16; k++)
            bl += (size_t)snprintf(buf + bl, 16, k ? " %d" : "%d", got.ids[k]);
        bool same = st == KLD_OK && bl == il.n[i] && memcmp(buf, il.p[i], bl) == 0;
        if (!same && ++bad <= 5)
            CHECK(false, "%s %s line %zu '%.*s'%s%s\n   got %.300s\n  want %.*s", tok, text_path,
                  i + 1, (int)(tl.n[i] > 60 ? 60 : tl.n[i]), tl.p[i], st ? ": " : "",
                  st ? err.msg : "", buf, (int)(il.n[i] > 300 ? 300 : il.n[i]), il.p[i]);
        kld_tok_ids_free(&got);
    }
    CHECK(bad == 0, "%s %s: %zu of %zu lines differ", tok, text_path, bad, tl.count);
    free(buf);
    free(tl.p);
    free(tl.n);
    free(il.p);
    free(il.n);
    free(text);
    free(ids);
}

/* The expected failing lines of roundtrip.txt for tok/file/mode. */
static void expected_failures(const char *tok, const char *file, char mode, bool *fail,
                              size_t count) {
    size_t n;
    char *rt = kt_read_file(TOK "/roundtrip.txt", &n);
    char key[128];
    snprintf(key, sizeof key, "%s %s mode%c:", tok, file, mode);
    char *p = strstr(rt, key);
    CHECK(p != NULL, "roundtrip.txt has no '%s'", key);
    if (p) {
        p += strlen(key);
        while (*p && *p != '\n') {
            char *e;
            long v = strtol(p, &e, 10);
            if (e == p) break;
            if (v >= 1 && (size_t)v <= count) fail[v - 1] = true;
            p = e;
        }
    }
    free(rt);
}

static void check_roundtrip(const kld_tokenizer *t, const char *tok, const char *text_path,
                            const char *file) {
    size_t tn;
    char *text = kt_read_file(text_path, &tn);
    lines tl = split_lines(text, tn);
    for (int mode = 0; mode < 2; mode++) {
        bool *fail = calloc(tl.count, 1);
        expected_failures(tok, file, mode ? 'B' : 'A', fail, tl.count);
        unsigned ef = KLD_TOK_PARSE_SPECIAL | (mode ? KLD_TOK_ADD_SPECIAL : 0);
        unsigned df = mode ? KLD_TOK_SKIP_SPECIAL : 0;
        size_t wrong = 0;
        for (size_t i = 0; i < tl.count; i++) {
            kld_tok_ids ids = {0};
            kld_error err = {0};
            char *back = NULL;
            size_t back_n = 0;
            kld_status st = kld_tok_encode(t, tl.p[i], tl.n[i], ef, &ids, &err);
            if (!st) st = kld_tok_decode(t, ids.ids, ids.n, df, &back, &back_n, &err);
            bool same = st == KLD_OK && back_n == tl.n[i] && memcmp(back, tl.p[i], back_n) == 0;
            if (same == fail[i] && ++wrong <= 5)
                CHECK(false, "%s %s mode %c line %zu: roundtrip %s, reference %s: '%.*s' -> '%.*s'",
                      tok, file, mode ? 'B' : 'A', i + 1, same ? "exact" : "differs",
                      fail[i] ? "differs" : "exact", (int)(tl.n[i] > 60 ? 60 : tl.n[i]), tl.p[i],
                      (int)(back_n > 60 ? 60 : back_n), back ? back : "");
            free(back);
            kld_tok_ids_free(&ids);
        }
        CHECK(wrong == 0, "%s %s mode %c: %zu lines disagree with roundtrip.txt", tok, file,
              mode ? 'B' : 'A', wrong);
        free(fail);
    }
    free(tl.p);
    free(tl.n);
    free(text);
}

/* The facts tokenizers/README.md gives for each file. */
static void check_summary(const kld_tokenizer *t, int k) {
    static const struct {
        int32_t n_vocab;
        uint64_t n_merges;
        int32_t n_added, n_special, bos;
        bool add_bos;
        const char *pre;
    } want[] = {
        {151669, 151387, 26, 14, -1, false, "Sequence[Split,ByteLevel]"},
        {128256, 280147, 256, 256, 128000, true, "Sequence[Split,ByteLevel]"},
        {32000, 61249, 3, 3, 1, true, ""},
        {50257, 50000, 1, 1, 50256, false, "ByteLevel"},
    };
    kld_tok_summary s;
    kld_tok_summarize(t, &s);
    CHECK(!strcmp(s.kind, "bpe") && !strcmp(s.source, "tokenizer.json") &&
              s.n_vocab == want[k].n_vocab && s.n_merges == want[k].n_merges &&
              s.n_added == want[k].n_added && s.n_special == want[k].n_special &&
              s.add_bos == want[k].add_bos && (!want[k].add_bos || s.bos_id == want[k].bos) &&
              !s.add_eos && !strcmp(s.pre, want[k].pre),
          "summary %d: %s %s n_vocab %d merges %llu added %d special %d bos %d add_bos %d pre '%s'",
          k, s.kind, s.source, (int)s.n_vocab, (unsigned long long)s.n_merges, (int)s.n_added,
          (int)s.n_special, (int)s.bos_id, s.add_bos, s.pre);
}

int main(void) {
    static const char *toks[] = {"qwen3", "llama3", "llama2", "gpt2"};
    for (size_t k = 0; k < 4; k++) {
        char path[256], ids[256];
        snprintf(path, sizeof path, TOK "/%s/tokenizer.json", toks[k]);
        kld_tokenizer *t = NULL;
        kld_error err = {0};
        kld_status st = kld_tok_open_path(path, &t, &err);
        CHECK_OK(st, err);
        if (st) continue;
        check_summary(t, (int)k);
        snprintf(ids, sizeof ids, TOK "/%s/stress.ids", toks[k]);
        check_ids(t, toks[k], TOK "/stress.txt", ids);
        snprintf(ids, sizeof ids, TOK "/%s/corpus.ids", toks[k]);
        check_ids(t, toks[k], KT_SHARED "/corpus/licenses.txt", ids);
        check_roundtrip(t, toks[k], TOK "/stress.txt", "stress.txt");
        check_roundtrip(t, toks[k], KT_SHARED "/corpus/licenses.txt", "corpus.txt");
        kld_tok_free(t);
    }
    return kt_finish();
}
