/* test_tok_models.c — the corpus as llama-perplexity tokenizes it, for every
 * GGUF model in ../shared/models: licenses.txt minus its final newline,
 * BOS per the vocabulary, no special-token parsing, must give exactly
 * ../shared/oracle/<model>/corpus.tokens. The llama2.c models' own
 * tokenizer.bin (opened directly and through model.bin) must give the same
 * ids as their GGUFs. */
#include "testlib.h"
#include "tokenizer/tokenizer.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#define MODELS KT_SHARED "/models"
#define ORACLE KT_SHARED "/oracle"

static char *corpus;
static size_t corpus_n;

/* skip: leading oracle ids the tokenizer does not produce (a BOS the
 * tokenizer.json does not add). */
static void check_corpus_skip(const char *tok_path, const char *model, size_t skip);

static void check_corpus(const char *tok_path, const char *model) {
    check_corpus_skip(tok_path, model, 0);
}

static void check_corpus_skip(const char *tok_path, const char *model, size_t skip) {
    char tokens[512];
    snprintf(tokens, sizeof tokens, ORACLE "/%s/corpus.tokens", model);
    size_t tn;
    char *want = kt_read_file(tokens, &tn);
    size_t nw = tn / 4 - skip;
    char *w0 = want;
    want += 4 * skip;
    kld_tokenizer *t = NULL;
    kld_error err = {0};
    kld_status st = kld_tok_open_path(tok_path, &t, &err);
    CHECK_OK(st, err);
    if (st == KLD_OK) {
        kld_tok_ids got = {0};
        st = kld_tok_encode(t, corpus, corpus_n, KLD_TOK_ADD_SPECIAL, &got, &err);
        CHECK_OK(st, err);
        size_t first = 0;
        while (first < got.n && first < nw &&
               got.ids[first] == (int32_t)kld_load_u32(want + 4 * first))
            first++;
        CHECK(got.n == nw && first == nw,
              "%s: %zu ids (oracle %zu), first difference at %zu: got %d, want %d", tok_path, got.n,
              nw, first, first < got.n ? got.ids[first] : -1,
              first < nw ? (int)kld_load_u32(want + 4 * first) : -1);
        kld_tok_ids_free(&got);
        kld_tok_free(t);
    }
    free(w0);
}

int main(void) {
    corpus = kt_read_file(KT_SHARED "/corpus/licenses.txt", &corpus_n);
    if (corpus_n && corpus[corpus_n - 1] == '\n') corpus_n--; /* llama-perplexity -f strips it */
    int n_gguf = 0;
    DIR *d = opendir(MODELS);
    CHECK(d != NULL, "cannot list %s", MODELS);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char oracle[512];
        snprintf(oracle, sizeof oracle, ORACLE "/%s/corpus.tokens", e->d_name);
        FILE *f = fopen(oracle, "rb");
        if (!f) continue; /* folders without an oracle (HF copies of the GGUF models) */
        fclose(f);
        char dir[512];
        snprintf(dir, sizeof dir, MODELS "/%s", e->d_name);
        DIR *md = opendir(dir);
        struct dirent *me;
        while (md && (me = readdir(md))) {
            size_t l = strlen(me->d_name);
            if (l < 5 || strcmp(me->d_name + l - 5, ".gguf") != 0) continue;
            char path[1024];
            snprintf(path, sizeof path, "%s/%s", dir, me->d_name);
            check_corpus(path, e->d_name);
            n_gguf++;
        }
        if (md) closedir(md);
    }
    if (d) closedir(d);
    CHECK(n_gguf >= 14, "only %d GGUF models found", n_gguf);
    /* llama2.c: tokenizer.bin alone, and beside model.bin */
    check_corpus(MODELS "/aidreams260K/tokenizer.bin", "aidreams260K");
    check_corpus(MODELS "/aidreams260K/model.bin", "aidreams260K");
    check_corpus(MODELS "/stories260K/tokenizer.bin", "stories260K");
    check_corpus(MODELS "/stories260K/model.bin", "stories260K");
    /* the same corpus through Hugging Face tokenizer.json files of the same
     * vocabularies: the rand-llama-hf folder (Llama 2 tokenizer.json, BOS
     * by its template) and GPT-2 (no BOS; rand-qwen2's GGUF adds one) */
    check_corpus(MODELS "/rand-llama-hf", "rand-llama");
    check_corpus_skip(KT_SHARED "/tokenizers/gpt2/tokenizer.json", "rand-qwen2", 1);
    free(corpus);
    return kt_finish();
}
