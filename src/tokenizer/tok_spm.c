/* tok_spm.c — SentencePiece-style BPE by piece score, as llama.cpp's SPM
 * session does it for GGUF "llama" and llama2.c vocabularies: split the
 * (already ▁-escaped) text into UTF-8 characters, repeatedly merge the
 * adjacent pair whose concatenation is the vocabulary piece with the
 * highest score (leftmost on ties), then emit each symbol's id, or its
 * bytes as "<0xNN>" tokens when it is not a piece. */
#include "tokenizer/tok_heap.h"
#include "tokenizer/tok_internal.h"

#include <stdlib.h>

typedef struct spm_sym {
    uint32_t start, n; /* bytes of the text; n = 0: merged away */
    int32_t prev, next;
} spm_sym;

typedef struct spm_bigram {
    float score;
    int32_t left, right;
    uint32_t size;
} spm_bigram;

/* The queue pops the highest score, then the smallest left index. */
static bool before(const spm_bigram *a, const spm_bigram *b) {
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

TOK_DEFINE_HEAP(heap, spm_bigram, before)


static bool try_bigram(const kld_tokenizer *t, tok_scratch *sc, const char *s, int32_t left,
                       int32_t right, size_t *nheap) {
    if (left < 0 || right < 0) return true;
    const spm_sym *sym = sc->sym;
    uint32_t size = sym[left].n + sym[right].n;
    int32_t id = tok_vocab_find(&t->vocab, s + sym[left].start, size);
    if (id < 0) return true;
    if (!tok_grow(&sc->heap, &sc->heap_cap, *nheap + 1, sizeof(spm_bigram))) return false;
    spm_bigram b = {t->vocab.score[id], left, right, size};
    heap_push(sc->heap, nheap, b);
    return true;
}

static kld_status byte_token(const kld_tokenizer *t, unsigned char c, kld_tok_ids *out,
                             kld_error *err) {
    int32_t id = t->vocab.byte_fallback[c];
    if (id < 0) id = tok_vocab_find(&t->vocab, (const char *)&c, 1);
    if (id < 0)
        return kld_fail(err, KLD_ERR_UNSUPPORTED,
                        "%s: byte 0x%02X is not in the vocabulary (no <0x%02X> token)", t->name, c,
                        c);
    if (!tok_ids_push(out, id)) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    return KLD_OK;
}

kld_status tok_spm_text(const kld_tokenizer *t, tok_scratch *sc, const char *s, size_t n,
                        kld_tok_ids *out, kld_error *err) {
    if (n == 0) return KLD_OK;
    if (n > UINT32_MAX / 2)
        return kld_fail(err, KLD_ERR_ARG, "%s: text of %zu bytes is too long", t->name, n);
    if (!tok_grow(&sc->sym, &sc->sym_cap, n, sizeof(spm_sym)))
        return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    spm_sym *sym = sc->sym;
    int32_t nsym = 0;
    for (size_t off = 0; off < n;) {
        size_t l = tok_utf8_len((unsigned char)s[off]);
        if (l > n - off) l = n - off;
        sym[nsym].start = (uint32_t)off;
        sym[nsym].n = (uint32_t)l;
        sym[nsym].prev = nsym - 1;
        off += l;
        sym[nsym].next = off == n ? -1 : nsym + 1;
        nsym++;
    }
    size_t nheap = 0;
    for (int32_t i = 1; i < nsym; i++)
        if (!try_bigram(t, sc, s, i - 1, i, &nheap))
            return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    while (nheap > 0) {
        spm_bigram b = heap_pop(sc->heap, &nheap);
        spm_sym *l = &sym[b.left], *r = &sym[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) sym[r->next].prev = b.left;
        if (!try_bigram(t, sc, s, l->prev, b.left, &nheap) ||
            !try_bigram(t, sc, s, b.left, l->next, &nheap))
            return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    }
    /* Every merged symbol is a piece (a bigram is queued only when its text
     * is one), so a symbol that is not a piece is a single character. */
    for (int32_t i = 0; i != -1; i = sym[i].next) {
        int32_t id = tok_vocab_find(&t->vocab, s + sym[i].start, sym[i].n);
        if (id >= 0) {
            if (!tok_ids_push(out, id)) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
            continue;
        }
        for (uint32_t k = 0; k < sym[i].n; k++) {
            kld_status st = byte_token(t, (unsigned char)s[sym[i].start + k], out, err);
            if (st) return st;
        }
    }
    return KLD_OK;
}
