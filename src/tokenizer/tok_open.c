/* tok_open.c — tokenizer lifetime and lookups: choosing the loader for a
 * path or an opened model, freeing, piece/id accessors, and the summary
 * `kldeval inspect` prints. */
#include "tokenizer/tok_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

kld_status tok_new(const char *name, tok_source_kind source, kld_tokenizer **out, kld_error *err) {
    *out = NULL;
    kld_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    t->name = kld_strdup(name ? name : "tokenizer");
    if (!t->name) {
        free(t);
        return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    }
    t->source = source;
    t->bos = t->eos = t->unk = t->pad = -1;
    t->model_unk = -1;
    pthread_mutex_init(&t->pool_lock, NULL);
    *out = t;
    return KLD_OK;
}

void kld_tok_free(kld_tokenizer *t) {
    if (!t) return;
    tok_scratch_free_all(t);
    pthread_mutex_destroy(&t->pool_lock);
    tok_vocab_free(&t->vocab);
    tok_pairmap_free(&t->merges);
    for (size_t i = 0; i < t->n_norms; i++) {
        free(t->norms[i].str);
        free(t->norms[i].content);
        tok_regex_free(t->norms[i].re);
    }
    free(t->norms);
    for (size_t i = 0; i < t->n_pres; i++) {
        tok_regex_free(t->pres[i].re);
        free(t->pres[i].literal);
    }
    free(t->pres);
    for (size_t i = 0; i < t->n_decs; i++) {
        free(t->decs[i].pat);
        free(t->decs[i].content);
        tok_regex_free(t->decs[i].re);
    }
    free(t->decs);
    for (size_t i = 0; i < t->n_added; i++) {
        free(t->added[i].content);
        free(t->added[i].ncontent);
    }
    free(t->added);
    free(t->raw_index.order);
    free(t->norm_index.order);
    free(t->prefix_ids);
    free(t->suffix_ids);
    free(t->pre_name);
    free(t->cont_prefix);
    free(t->eow_suffix);
    free(t->name);
    free(t);
}

int32_t kld_tok_n_vocab(const kld_tokenizer *t) { return t->vocab.n; }

const char *kld_tok_piece(const kld_tokenizer *t, int32_t id, size_t *len) {
    size_t l = 0;
    const char *p = tok_vocab_piece(&t->vocab, id, &l);
    if (len) *len = p ? l : 0;
    return p;
}

int32_t kld_tok_piece_id(const kld_tokenizer *t, const char *piece, size_t len) {
    return tok_vocab_find(&t->vocab, piece, len);
}

kld_token_type kld_tok_type(const kld_tokenizer *t, int32_t id) {
    if (id < 0 || id >= t->vocab.n) return KLD_TOKEN_UNDEFINED;
    return (kld_token_type)t->vocab.type[id];
}

int32_t kld_tok_bos(const kld_tokenizer *t) { return t->bos; }
int32_t kld_tok_eos(const kld_tokenizer *t) { return t->eos; }

bool kld_tok_adds_bos(const kld_tokenizer *t) {
    return t->n_prefix > 0 && t->bos >= 0 && t->prefix_ids[0] == t->bos;
}

void kld_tok_summarize(const kld_tokenizer *t, kld_tok_summary *s) {
    memset(s, 0, sizeof *s);
    s->kind = t->model == MODEL_SPM ? "spm" : t->model == MODEL_WPM ? "wpm" : "bpe";
    s->source = t->source == SRC_GGUF   ? "gguf"
                : t->source == SRC_JSON ? "tokenizer.json"
                                        : "llama2.c";
    s->n_vocab = t->vocab.n;
    s->bos_id = t->bos;
    s->eos_id = t->eos;
    s->unk_id = t->unk;
    s->pad_id = t->pad;
    s->add_bos = t->add_bos;
    s->add_eos = t->add_eos;
    s->pre = t->pre_name ? t->pre_name : "";
    s->n_merges = t->n_merges;
    s->n_added = (int32_t)t->n_added;
    s->n_special = t->n_special;
}

/* llama2.c tokenizer.bin: u32 max_token_length, then (f32 score, u32 len,
 * bytes) records to the end of the file. Counts the records when the whole
 * file has that shape (format detection and the vocabulary size for a
 * tokenizer.bin given on its own); 0 otherwise. */
static int32_t llama2c_token_count(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    unsigned char h[8];
    int32_t count = 0;
    if (fread(h, 1, 4, f) != 4) goto done;
    uint32_t max_len = kld_load_u32(h);
    if (max_len == 0 || max_len > 4096) goto done;
    for (;;) {
        size_t r = fread(h, 1, 8, f);
        if (r == 0) break;
        if (r != 8) {
            count = 0;
            goto done;
        }
        uint32_t len = kld_load_u32(h + 4);
        if (len > max_len || fseek(f, (long)len, SEEK_CUR) != 0 || count == INT32_MAX) {
            count = 0;
            goto done;
        }
        count++;
    }
    /* fseek past the end succeeds: re-check the size */
    long end = ftell(f);
    fseek(f, 0, SEEK_END);
    if (end != ftell(f)) count = 0;
done:
    fclose(f);
    return count;
}

kld_status kld_tok_open_source(const kld_source *src, kld_tokenizer **out, kld_error *err) {
    *out = NULL;
    switch (src->format) {
    case KLD_FORMAT_GGUF: return kld_tok_open_gguf(src->gguf, src->path, out, err);
    case KLD_FORMAT_SAFETENSORS:
        if (!src->hf_tokenizer_path)
            return kld_fail(err, KLD_ERR_IO, "%s: no tokenizer.json beside the model", src->path);
        return kld_tok_open_json(src->hf_tokenizer_path, out, err);
    case KLD_FORMAT_LLAMA2C: {
        if (!src->l2c_tokenizer_path)
            return kld_fail(err, KLD_ERR_IO, "%s: no tokenizer.bin beside the llama2.c model",
                            src->path);
        int32_t n = src->l2c ? src->l2c->cfg.vocab_size : 0;
        if (n < 0) n = -n;
        return kld_tok_open_llama2c(src->l2c_tokenizer_path, n, out, err);
    }
    }
    return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: unknown model format", src->path);
}

static kld_status open_via_source(const char *path, kld_tokenizer **out, kld_error *err) {
    kld_source *src = NULL;
    kld_status st = kld_source_open(path, &src, err);
    if (st) return st;
    st = kld_tok_open_source(src, out, err);
    kld_source_close(src);
    return st;
}

kld_status kld_tok_open_path(const char *path, kld_tokenizer **out, kld_error *err) {
    *out = NULL;
    struct stat sb;
    if (stat(path, &sb) != 0) return kld_fail(err, KLD_ERR_IO, "%s: %s", path, strerror(errno));
    if (S_ISDIR(sb.st_mode)) {
        size_t n = strlen(path);
        char *tj = malloc(n + 32);
        if (!tj) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
        snprintf(tj, n + 32, "%s/tokenizer.json", path);
        kld_status st = stat(tj, &sb) == 0 && S_ISREG(sb.st_mode) ? kld_tok_open_json(tj, out, err)
                                                                  : open_via_source(path, out, err);
        free(tj);
        return st;
    }
    FILE *f = fopen(path, "rb");
    if (!f) return kld_fail(err, KLD_ERR_IO, "%s: %s", path, strerror(errno));
    unsigned char head[64];
    size_t got = fread(head, 1, sizeof head, f);
    fclose(f);
    if (got >= 4 && memcmp(head, "GGUF", 4) == 0) {
        kld_gguf *g = NULL;
        kld_status st = kld_gguf_open(path, &g, err);
        if (st) return st;
        st = kld_tok_open_gguf(g, path, out, err);
        kld_gguf_close(g);
        return st;
    }
    size_t i = 0;
    while (i < got && (head[i] == ' ' || head[i] == '\t' || head[i] == '\n' || head[i] == '\r'))
        i++;
    if (i < got && head[i] == '{') return kld_tok_open_json(path, out, err);
    if (llama2c_token_count(path) > 0) return kld_tok_open_llama2c(path, 0, out, err);
    return open_via_source(path, out, err);
}

kld_status kld_tok_open_llama2c(const char *path, int32_t n_vocab, kld_tokenizer **out,
                                kld_error *err) {
    if (n_vocab <= 0) {
        n_vocab = llama2c_token_count(path);
        if (n_vocab <= 0)
            return kld_fail(err, KLD_ERR_FORMAT,
                            "%s: not a llama2.c tokenizer.bin (records do not end at the end of "
                            "the file)",
                            path);
    }
    return tok_load_llama2c(path, n_vocab, out, err);
}
