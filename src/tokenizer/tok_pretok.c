/* tok_pretok.c — pre-tokenization: a text segment becomes a list of
 * pre-tokens (splits) by running the steps in order, each step acting on
 * every split of the previous one, as Hugging Face's PreTokenizedString
 * does: Split (regex or string, every SplitDelimiterBehavior, invert),
 * ByteLevel (prefix space, GPT-2 regex; its byte -> character mapping is
 * left to the BPE model when it is the last step), Metaspace. Digits,
 * Punctuation, Whitespace and friends are loaded as Split steps. Empty
 * splits are dropped. */
#include "tokenizer/tok_internal.h"

#include <stdlib.h>

typedef struct piece {
    size_t a, b;
    bool match;
} piece;

typedef struct pieces {
    piece *v;
    size_t n, cap;
} pieces;

static bool piece_push(pieces *p, size_t a, size_t b, bool match) {
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 64;
        piece *v = realloc(p->v, cap * sizeof *v);
        if (!v) return false;
        p->v = v;
        p->cap = cap;
    }
    p->v[p->n++] = (piece){a, b, match};
    return true;
}

static bool split_push(tok_splits *s, size_t off, size_t len, bool first) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        tok_split *v = realloc(s->v, cap * sizeof *v);
        if (!v) return false;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = (tok_split){off, len, first};
    return true;
}

static void find_literal_all(const char *s, size_t n, const char *pat, size_t m, tok_spans *out,
                             bool *ok) {
    if (m == 0) return;
    for (size_t i = 0; i + m <= n;) {
        const char *p = memchr(s + i, pat[0], n - m - i + 1);
        if (!p) break;
        size_t k = (size_t)(p - s);
        if (memcmp(p, pat, m) == 0) {
            *ok &= tok_spans_push(out, k, k + m);
            i = k + m;
        } else {
            i = k + 1;
        }
    }
}

/* Hugging Face's SplitDelimiterBehavior over the alternating pieces. */
static void behave(pieces *p, tok_behavior beh) {
    size_t w = 0;
    bool prev_match = false;
    switch (beh) {
    case BEH_ISOLATED: return;
    case BEH_REMOVED:
        for (size_t i = 0; i < p->n; i++)
            if (!p->v[i].match) p->v[w++] = p->v[i];
        break;
    case BEH_MERGED_PREV:
        for (size_t i = 0; i < p->n; i++) {
            piece c = p->v[i];
            if (c.match && !prev_match && w > 0) p->v[w - 1].b = c.b;
            else p->v[w++] = c;
            prev_match = c.match;
        }
        break;
    case BEH_MERGED_NEXT:
        /* the same from the right: a match starts the following piece */
        for (size_t i = p->n; i-- > 0;) {
            piece c = p->v[i];
            if (c.match && !prev_match && w > 0) p->v[p->n - w].a = c.a;
            else p->v[p->n - 1 - w++] = c;
            prev_match = c.match;
        }
        memmove(p->v, p->v + (p->n - w), w * sizeof *p->v);
        break;
    case BEH_CONTIGUOUS:
        for (size_t i = 0; i < p->n; i++) {
            piece c = p->v[i];
            if (c.match == prev_match && w > 0) p->v[w - 1].b = c.b;
            else p->v[w++] = c;
            prev_match = c.match;
        }
        break;
    }
    p->n = w;
}

/* Splits text[0..n) (one split at `base` in the buffer) per step. */
static kld_status split_one(tok_scratch *sc, const tok_regex *re, const char *lit, size_t lit_len,
                            tok_behavior beh, bool invert, const char *text, size_t base, size_t n,
                            bool first, tok_splits *out, kld_error *err) {
    tok_spans *sp = &sc->spans;
    sp->n = 0;
    bool ok = true;
    if (re) {
        if (!tok_regex_find_all(re, sc->matcher, text + base, n, sp, err)) return err->status;
    } else {
        find_literal_all(text + base, n, lit, lit_len, sp, &ok);
    }
    pieces p = {0};
    size_t prev = 0;
    for (size_t i = 0; i < sp->n && ok; i++) {
        if (prev < sp->v[i].start) ok &= piece_push(&p, prev, sp->v[i].start, false);
        ok &= piece_push(&p, sp->v[i].start, sp->v[i].end, true);
        prev = sp->v[i].end;
    }
    if (ok && prev < n) ok &= piece_push(&p, prev, n, false);
    if (!ok) {
        free(p.v);
        return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    }
    if (invert)
        for (size_t i = 0; i < p.n; i++) p.v[i].match = !p.v[i].match;
    behave(&p, beh);
    for (size_t i = 0; i < p.n && ok; i++)
        if (p.v[i].b > p.v[i].a)
            ok &= split_push(out, base + p.v[i].a, p.v[i].b - p.v[i].a, first && p.v[i].a == 0);
    free(p.v);
    return ok ? KLD_OK : kld_fail(err, KLD_ERR_NOMEM, "out of memory");
}

kld_status tok_pretokenize(const kld_tokenizer *t, tok_scratch *sc, const char *s, size_t n,
                           bool first, const char **text, tok_splits **out, kld_error *err) {
    tok_splits *cur = &sc->splits[0], *nxt = &sc->splits[1];
    cur->n = 0;
    const char *buf = s;
    int which = 0; /* next scratch text buffer to write */
    if (n > 0 && !split_push(cur, 0, n, first))
        return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    for (size_t k = 0; k < t->n_pres && cur->n > 0; k++) {
        const tok_pre *st = &t->pres[k];
        bool last = k + 1 == t->n_pres;
        nxt->n = 0;
        kld_status rc = KLD_OK;
        if (st->kind == PRE_SPLIT) {
            for (size_t i = 0; i < cur->n && !rc; i++)
                rc = split_one(sc, st->re, st->literal, st->literal_len, st->behavior, st->invert,
                               buf, cur->v[i].off, cur->v[i].len, cur->v[i].first, nxt, err);
        } else {
            /* transforming steps write a new text buffer */
            tok_buf *dst = &sc->pre[which];
            which ^= 1;
            dst->n = 0;
            bool ok = true;
            tok_splits *mid = nxt;
            for (size_t i = 0; i < cur->n && ok; i++) {
                const char *p = buf + cur->v[i].off;
                size_t len = cur->v[i].len, at = dst->n;
                if (st->kind == PRE_BYTELEVEL) {
                    if (st->add_prefix_space && p[0] != ' ') ok &= tok_buf_append(dst, " ", 1);
                    if (!last) { /* materialize the byte -> character mapping */
                        for (size_t j = 0; j < len && ok; j++) {
                            char u[4];
                            size_t m = tok_utf8_encode(tok_byte_to_cp((uint8_t)p[j]), u);
                            ok &= tok_buf_append(dst, u, m);
                        }
                    } else {
                        ok &= tok_buf_append(dst, p, len);
                    }
                } else { /* Metaspace */
                    bool starts = len >= st->repl_len && memcmp(p, st->repl, st->repl_len) == 0;
                    bool pre = (st->prepend == PREPEND_ALWAYS && !starts && !(p[0] == ' ')) ||
                               (st->prepend == PREPEND_FIRST && cur->v[i].first && !starts &&
                                !(p[0] == ' '));
                    if (pre) ok &= tok_buf_append(dst, st->repl, st->repl_len);
                    for (size_t j = 0; j < len && ok; j++) {
                        if (p[j] == ' ') ok &= tok_buf_append(dst, st->repl, st->repl_len);
                        else ok &= tok_buf_append(dst, p + j, 1);
                    }
                }
                ok = ok && split_push(mid, at, dst->n - at, cur->v[i].first);
            }
            if (!ok) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
            buf = dst->p;
            /* the regex / separator part of the step */
            const tok_regex *re = NULL;
            const char *lit = NULL;
            size_t lit_len = 0;
            tok_behavior beh = BEH_ISOLATED;
            if (st->kind == PRE_BYTELEVEL && st->use_regex) re = st->re;
            if (st->kind == PRE_METASPACE && st->split) {
                lit = st->repl;
                lit_len = st->repl_len;
                beh = BEH_MERGED_NEXT;
            }
            if (re || lit) {
                tok_splits *tmp = cur; /* cur is no longer needed */
                tmp->n = 0;
                for (size_t i = 0; i < mid->n && !rc; i++)
                    rc = split_one(sc, re, lit, lit_len, beh, false, buf, mid->v[i].off,
                                   mid->v[i].len, mid->v[i].first, tmp, err);
                /* result is in tmp (== cur); swap so nxt holds it */
                tok_splits *sw = cur;
                cur = nxt;
                nxt = sw;
            }
        }
        if (rc) return rc;
        tok_splits *sw = cur;
        cur = nxt;
        nxt = sw;
    }
    *text = buf;
    *out = cur;
    return KLD_OK;
}
