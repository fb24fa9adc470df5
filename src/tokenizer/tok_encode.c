/* tok_encode.c — text -> ids: validate UTF-8, split out added/special
 * tokens, then per text segment the source's pipeline (tokenizer.json:
 * normalize, match normalized added tokens, pre-tokenize, BPE; GGUF /
 * llama2.c: llama.cpp's SPM, BPE or WordPiece session), and finally the
 * ids the vocabulary adds around a text. Working memory comes from a
 * per-tokenizer pool so that concurrent calls do not share it. */
#include "tokenizer/tok_internal.h"

#include <stdlib.h>

tok_scratch *tok_scratch_get(const kld_tokenizer *t) {
    kld_tokenizer *mt = (kld_tokenizer *)t; /* the pool is the only mutable part */
    pthread_mutex_lock(&mt->pool_lock);
    tok_scratch *sc = mt->pool;
    if (sc) mt->pool = sc->next;
    pthread_mutex_unlock(&mt->pool_lock);
    if (sc) return sc;
    sc = calloc(1, sizeof *sc);
    if (!sc) return NULL;
    sc->matcher = tok_matcher_create();
    if (!sc->matcher) {
        free(sc);
        return NULL;
    }
    return sc;
}

void tok_scratch_put(const kld_tokenizer *t, tok_scratch *sc) {
    kld_tokenizer *mt = (kld_tokenizer *)t;
    pthread_mutex_lock(&mt->pool_lock);
    sc->next = mt->pool;
    mt->pool = sc;
    pthread_mutex_unlock(&mt->pool_lock);
}

static void scratch_free(tok_scratch *sc) {
    tok_matcher_free(sc->matcher);
    tok_buf_free(&sc->norm);
    tok_buf_free(&sc->norm2);
    tok_buf_free(&sc->tmp);
    tok_buf_free(&sc->pre[0]);
    tok_buf_free(&sc->pre[1]);
    free(sc->spans.v);
    free(sc->splits[0].v);
    free(sc->splits[1].v);
    free(sc->segs.v);
    free(sc->segs2.v);
    free(sc->sym);
    free(sc->heap);
    tok_strmap_free(&sc->cache);
    kld_tok_ids_free(&sc->cache_ids);
    free(sc);
}

void tok_scratch_free_all(kld_tokenizer *t) {
    while (t->pool) {
        tok_scratch *n = t->pool->next;
        scratch_free(t->pool);
        t->pool = n;
    }
}

/* Pre-tokenize one normalized segment and BPE every pre-token. */
static kld_status encode_words(const kld_tokenizer *t, tok_scratch *sc, const char *s, size_t n,
                               bool first, kld_tok_ids *out, kld_error *err) {
    const char *text;
    tok_splits *sp;
    kld_status st = tok_pretokenize(t, sc, s, n, first, &text, &sp, err);
    for (size_t i = 0; i < sp->n && !st; i++)
        st = tok_bpe_word(t, sc, text + sp->v[i].off, sp->v[i].len, out, err);
    return st;
}

static kld_status encode_hf_segment(const kld_tokenizer *t, tok_scratch *sc, const char *s,
                                    size_t n, bool first, bool parse_special, kld_tok_ids *out,
                                    kld_error *err) {
    const char *p = s;
    size_t pn = n;
    if (t->n_norms > 0) {
        kld_status st =
            tok_normalize_steps(t->norms, t->n_norms, s, n, &sc->norm, sc->matcher, err);
        if (st) return st;
        p = sc->norm.p;
        pn = sc->norm.n;
    }
    if (t->norm_index.n == 0) return encode_words(t, sc, p, pn, first, out, err);
    kld_status st = tok_split_added(t, p, pn, parse_special, true, &sc->segs2, err);
    for (size_t i = 0; i < sc->segs2.n && !st; i++) {
        const tok_segment *g = &sc->segs2.v[i];
        if (g->id >= 0)
            st = tok_ids_push(out, g->id) ? KLD_OK : kld_fail(err, KLD_ERR_NOMEM, "out of memory");
        else st = encode_words(t, sc, p + g->off, g->len, first && g->off == 0, out, err);
    }
    return st;
}

/* llama.cpp SPM: a space before a fragment that follows a special token
 * (or starts the text) when add_space_prefix, then spaces become ▁. */
static kld_status encode_spm_fragment(const kld_tokenizer *t, tok_scratch *sc, const char *s,
                                      size_t n, bool prefix, kld_tok_ids *out, kld_error *err) {
    tok_buf *b = &sc->norm;
    b->n = 0;
    static const char esc[] = "\xE2\x96\x81";
    bool ok = true;
    if (prefix) ok &= tok_buf_append(b, esc, 3);
    for (size_t i = 0; i < n && ok;) {
        const char *sp = memchr(s + i, ' ', n - i);
        size_t k = sp ? (size_t)(sp - s) : n;
        ok &= tok_buf_append(b, s + i, k - i);
        if (sp) ok &= tok_buf_append(b, esc, 3);
        i = sp ? k + 1 : n;
    }
    if (!ok) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    return tok_spm_text(t, sc, b->p, b->n, out, err);
}

/* Offset of the first byte that does not start a valid UTF-8 sequence. */
static size_t first_invalid_utf8(const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        size_t l = tok_utf8_len((unsigned char)s[i]);
        if ((unsigned char)s[i] >= 0x80 && (((unsigned char)s[i] & 0xC0) == 0x80)) return i;
        if (l > n - i || !kld_utf8_valid(s + i, l)) return i;
        i += l;
    }
    return n;
}

kld_status kld_tok_encode(const kld_tokenizer *t, const char *text, size_t len, unsigned flags,
                          kld_tok_ids *out, kld_error *err) {
    if (!text && len) return kld_fail(err, KLD_ERR_ARG, "%s: NULL text", t->name);
    if (!kld_utf8_valid(text, len))
        return kld_fail(err, KLD_ERR_ARG, "%s: input text is not valid UTF-8 (byte offset %zu)",
                        t->name, first_invalid_utf8(text, len));
    tok_scratch *sc = tok_scratch_get(t);
    if (!sc) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    bool add = flags & KLD_TOK_ADD_SPECIAL, parse = flags & KLD_TOK_PARSE_SPECIAL;
    kld_status st = KLD_OK;
    if (add && !tok_ids_append(out, t->prefix_ids, t->n_prefix))
        st = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    if (!st) st = tok_split_added(t, text, len, parse, false, &sc->segs, err);
    bool prev_special = true;
    for (size_t i = 0; i < sc->segs.n && !st; i++) {
        const tok_segment *g = &sc->segs.v[i];
        if (g->id >= 0) {
            if (!tok_ids_push(out, g->id)) st = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
            prev_special = true;
            continue;
        }
        const char *p = text + g->off;
        if (!t->llama_mode) st = encode_hf_segment(t, sc, p, g->len, g->off == 0, parse, out, err);
        else if (t->model == MODEL_SPM)
            st = encode_spm_fragment(t, sc, p, g->len, t->add_space_prefix && prev_special, out,
                                     err);
        else if (t->model == MODEL_WPM) st = tok_wpm_text(t, sc, p, g->len, out, err);
        else st = encode_words(t, sc, p, g->len, g->off == 0, out, err);
        prev_special = false;
    }
    if (!st && add && !tok_ids_append(out, t->suffix_ids, t->n_suffix))
        st = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    tok_scratch_put(t, sc);
    return st;
}
