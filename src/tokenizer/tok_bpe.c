/* tok_bpe.c — BPE by merge rank over one pre-token (Hugging Face BPE model,
 * llama.cpp's byte-level BPE session): start from the word's characters
 * (or, for byte-level vocabularies, from its bytes' mapped characters),
 * repeatedly merge the adjacent pair with the lowest rank, leftmost first.
 * Symbols live in a linked list; candidate pairs in a binary heap, checked
 * for staleness when popped. A per-scratch cache maps short words to ids. */
#include "tokenizer/tok_heap.h"
#include "tokenizer/tok_internal.h"

#include <stdlib.h>

/* len counts the initial symbols a symbol spans: a symbol never moves its
 * start, so two spans starting at one symbol are equal exactly when their
 * counts are (the staleness test below relies on it). 0 = merged away. */
typedef struct bpe_sym {
    int32_t id;
    int32_t prev, next;
    uint32_t len;
} bpe_sym;

typedef struct bpe_pair {
    uint32_t rank;
    int32_t pos; /* left symbol */
    int32_t merged;
    uint32_t len; /* initial symbols the merged symbol spans */
} bpe_pair;

enum { CACHE_MAX_WORD = 256, CACHE_MAX_ENTRIES = 1 << 16 };

static bool pair_less(const bpe_pair *a, const bpe_pair *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

TOK_DEFINE_HEAP(heap, bpe_pair, pair_less)


static void try_pair(const kld_tokenizer *t, const bpe_sym *sym, int32_t left, bpe_pair *heap,
                     size_t *nheap) {
    if (left < 0 || sym[left].next < 0) return;
    int32_t right = sym[left].next;
    const tok_pairmap_slot *m = tok_pairmap_get(&t->merges, sym[left].id, sym[right].id);
    if (!m) return;
    bpe_pair p = {m->rank, left, m->merged, sym[left].len + sym[right].len};
    heap_push(heap, nheap, p);
}

static bool push_sym(bpe_sym **sym, size_t *cap, size_t *nsym, int32_t id) {
    if (!tok_grow((void **)sym, cap, *nsym + 1, sizeof **sym)) return false;
    (*sym)[*nsym].id = id;
    (*sym)[*nsym].len = 1;
    (*nsym)++;
    return true;
}

typedef struct unk_state {
    int32_t pending; /* an unk symbol not yet emitted (for fusing), or -1 */
} unk_state;

static bool flush_unk(bpe_sym **sym, size_t *cap, size_t *nsym, unk_state *u) {
    if (u->pending < 0) return true;
    bool ok = push_sym(sym, cap, nsym, u->pending);
    u->pending = -1;
    return ok;
}

/* One character (its lookup text s[0..n)) that is not a vocabulary entry:
 * its "<0xNN>" byte tokens under byte_fallback, else the unk token (fused
 * with a preceding one when fuse_unk), else nothing — Hugging Face's BPE
 * drops it when there is no unk token. */
static bool unknown_char(const kld_tokenizer *t, const char *s, size_t n, bpe_sym **sym,
                         size_t *cap, size_t *nsym, unk_state *u) {
    if (t->byte_fallback) {
        bool all = true;
        for (size_t i = 0; i < n; i++) all &= t->vocab.byte_fallback[(unsigned char)s[i]] >= 0;
        if (all) {
            for (size_t i = 0; i < n; i++)
                if (!push_sym(sym, cap, nsym, t->vocab.byte_fallback[(unsigned char)s[i]]))
                    return false;
            return true;
        }
    }
    if (t->model_unk < 0) return true;
    if (u->pending >= 0 && t->fuse_unk) return true;
    if (!flush_unk(sym, cap, nsym, u)) return false;
    u->pending = t->model_unk;
    return true;
}

static kld_status initial_symbols(const kld_tokenizer *t, tok_scratch *sc, const char *w, size_t n,
                                  size_t *nsym_out, kld_error *err) {
    bpe_sym *sym = sc->sym;
    size_t cap = sc->sym_cap, nsym = 0;
    unk_state u = {-1};
    bool ok = tok_grow((void **)&sym, &cap, n + 1, sizeof *sym);
    if (ok && t->byte_level && !t->cont_prefix && !t->eow_suffix) {
        for (size_t i = 0; i < n && ok; i++) {
            int32_t id = t->vocab.byte_char[(unsigned char)w[i]];
            if (id >= 0) {
                ok = flush_unk(&sym, &cap, &nsym, &u) && push_sym(&sym, &cap, &nsym, id);
            } else {
                char c[4];
                size_t k = tok_utf8_encode(tok_byte_to_cp((uint8_t)w[i]), c);
                ok = unknown_char(t, c, k, &sym, &cap, &nsym, &u);
            }
        }
    } else if (ok) {
        tok_buf *key = &sc->tmp;
        for (size_t i = 0; i < n && ok;) {
            size_t l = tok_utf8_len((unsigned char)w[i]);
            if (l > n - i) l = n - i;
            /* continuing_subword_prefix / end_of_word_suffix decorate the
             * lookup (BPE over WordPiece-style vocabularies) */
            key->n = 0;
            if (i > 0 && t->cont_prefix)
                ok &= tok_buf_append(key, t->cont_prefix, t->cont_prefix_len);
            if (t->byte_level) { /* the byte-level spelling of these bytes */
                for (size_t k = 0; k < l && ok; k++) {
                    char c[4];
                    size_t m = tok_utf8_encode(tok_byte_to_cp((uint8_t)w[i + k]), c);
                    ok &= tok_buf_append(key, c, m);
                }
            } else {
                ok &= tok_buf_append(key, w + i, l);
            }
            if (i + l == n && t->eow_suffix)
                ok &= tok_buf_append(key, t->eow_suffix, t->eow_suffix_len);
            if (!ok) break;
            int32_t id = tok_vocab_find(&t->vocab, key->p, key->n);
            if (id >= 0) ok = flush_unk(&sym, &cap, &nsym, &u) && push_sym(&sym, &cap, &nsym, id);
            else ok = unknown_char(t, key->p, key->n, &sym, &cap, &nsym, &u);
            i += l;
        }
    }
    if (ok) ok = flush_unk(&sym, &cap, &nsym, &u);
    sc->sym = sym;
    sc->sym_cap = cap;
    *nsym_out = nsym;
    return ok ? KLD_OK : kld_fail(err, KLD_ERR_NOMEM, "out of memory");
}

static kld_status merge_word(const kld_tokenizer *t, tok_scratch *sc, const char *w, size_t n,
                             kld_tok_ids *out, kld_error *err) {
    size_t nsym = 0;
    kld_status st = initial_symbols(t, sc, w, n, &nsym, err);
    if (st) return st;
    bpe_sym *sym = sc->sym;
    for (size_t i = 0; i < nsym; i++) {
        sym[i].prev = (int32_t)i - 1;
        sym[i].next = i + 1 < nsym ? (int32_t)i + 1 : -1;
    }
    if (nsym > 1) {
        if (!tok_grow(&sc->heap, &sc->heap_cap, 2 * nsym + 8, sizeof(bpe_pair)))
            return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
        bpe_pair *heap = sc->heap;
        size_t nheap = 0;
        for (size_t i = 0; i + 1 < nsym; i++) try_pair(t, sym, (int32_t)i, heap, &nheap);
        while (nheap > 0) {
            bpe_pair p = heap_pop(heap, &nheap);
            bpe_sym *l = &sym[p.pos];
            if (l->len == 0 || l->next < 0) continue;
            bpe_sym *r = &sym[l->next];
            /* Stale when either side changed since the pair was queued: the
             * merged text is the same exactly when its span is (see bpe_sym).
             * Hugging Face also requires the current pair to be a merge
             * rule giving the same token; llama.cpp compares text only. */
            if (l->len + r->len != p.len) continue;
            if (!t->llama_mode) {
                const tok_pairmap_slot *m = tok_pairmap_get(&t->merges, l->id, r->id);
                if (!m || m->merged != p.merged) continue;
            }
            l->id = p.merged;
            l->len += r->len;
            l->next = r->next;
            if (r->next >= 0) sym[r->next].prev = p.pos;
            r->id = -1;
            r->len = 0;
            r->next = r->prev = -1;
            if (!tok_grow(&sc->heap, &sc->heap_cap, nheap + 2, sizeof(bpe_pair)))
                return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
            heap = sc->heap;
            try_pair(t, sym, l->prev, heap, &nheap);
            try_pair(t, sym, p.pos, heap, &nheap);
        }
    }
    for (int32_t i = nsym ? 0 : -1; i >= 0; i = sym[i].next) {
        if (!tok_ids_push(out, sym[i].id)) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    }
    return KLD_OK;
}

kld_status tok_bpe_word(const kld_tokenizer *t, tok_scratch *sc, const char *w, size_t n,
                        kld_tok_ids *out, kld_error *err) {
    if (n == 0) return KLD_OK;
    if (t->ignore_merges) {
        /* a pre-token that is itself a vocabulary entry is emitted as is */
        int32_t id = t->byte_level ? tok_strmap_get(&t->vocab.raw_map, w, n)
                                   : tok_vocab_find(&t->vocab, w, n);
        if (id >= 0) {
            if (!tok_ids_push(out, id)) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
            return KLD_OK;
        }
    }
    bool cacheable = n < CACHE_MAX_WORD;
    if (cacheable && sc->cache.slots) {
        int32_t at = tok_strmap_get(&sc->cache, w, n);
        if (at >= 0) {
            const int32_t *c = sc->cache_ids.ids + at;
            if (!tok_ids_append(out, c + 1, (size_t)c[0]))
                return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
            return KLD_OK;
        }
    }
    size_t before = out->n;
    kld_status st = merge_word(t, sc, w, n, out, err);
    if (st || !cacheable) return st;
    if (!sc->cache.slots && !tok_strmap_init(&sc->cache, 4096)) return KLD_OK;
    if (sc->cache.count >= CACHE_MAX_ENTRIES) { /* bounded: start over */
        tok_strmap_clear(&sc->cache);
        sc->cache_ids.n = 0;
    }
    size_t k = out->n - before;
    if (sc->cache_ids.n + k + 1 > INT32_MAX) return KLD_OK;
    int32_t at = (int32_t)sc->cache_ids.n;
    if (!tok_ids_push(&sc->cache_ids, (int32_t)k) ||
        !tok_ids_append(&sc->cache_ids, out->ids + before, k) ||
        !tok_strmap_put(&sc->cache, w, n, at, true, NULL)) {
        /* a cache that cannot grow is just not used */
        tok_strmap_clear(&sc->cache);
        sc->cache_ids.n = 0;
    }
    return KLD_OK;
}
