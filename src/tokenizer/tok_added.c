/* tok_added.c — splitting a text into plain segments and added/special
 * tokens before normalization, with each reference's semantics:
 *  - Hugging Face (tokenizer.json): leftmost-longest match over all added
 *    tokens (an Aho-Corasick scan; special tokens matched but dropped when
 *    special parsing is off), honouring single_word, lstrip and rstrip; the
 *    normalized=true tokens are matched in a second pass over the
 *    normalized text.
 *  - llama.cpp (GGUF, llama2.c): one token at a time, longest text first,
 *    every occurrence in every remaining text fragment; control and
 *    unknown tokens only when parsing specials, user-defined ones always. */
#include "tokenizer/tok_internal.h"

#include <stdlib.h>

static bool seg_push(tok_segments *s, size_t off, size_t len, int32_t id) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        tok_segment *v = realloc(s->v, cap * sizeof *v);
        if (!v) return false;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = (tok_segment){off, len, id};
    return true;
}

static const char *content_of(const tok_added *a, bool norm, size_t *len) {
    *len = norm ? a->nlen : a->len;
    return norm ? a->ncontent : a->content;
}

typedef struct sort_ctx {
    const tok_added *added;
    bool norm;
} sort_ctx;

static int cmp_index(const void *x, const void *y, void *arg) {
    const sort_ctx *c = arg;
    const tok_added *a = &c->added[*(const int32_t *)x], *b = &c->added[*(const int32_t *)y];
    size_t la, lb;
    const char *ca = content_of(a, c->norm, &la), *cb = content_of(b, c->norm, &lb);
    unsigned char fa = (unsigned char)ca[0], fb = (unsigned char)cb[0];
    if (fa != fb) return fa < fb ? -1 : 1;
    if (la != lb) return la > lb ? -1 : 1;
    return *(const int32_t *)x < *(const int32_t *)y ? -1 : 1;
}

static kld_status build(kld_tokenizer *t, bool norm, tok_added_index *ix, kld_error *err) {
    memset(ix, 0, sizeof *ix);
    ix->order = malloc((t->n_added + 1) * sizeof *ix->order);
    if (!ix->order) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < t->n_added; i++) {
        const tok_added *a = &t->added[i];
        size_t len;
        content_of(a, norm, &len);
        if (a->normalized == norm && len > 0) ix->order[ix->n++] = (int32_t)i;
    }
    sort_ctx sc = {t->added, norm};
    qsort_r(ix->order, ix->n, sizeof *ix->order, cmp_index, &sc);
    size_t k = 0;
    for (int b = 0; b < 256; b++) {
        ix->first[b] = (int32_t)k;
        while (k < ix->n) {
            size_t len;
            const char *c = content_of(&t->added[ix->order[k]], norm, &len);
            if ((unsigned char)c[0] != b) break;
            k++;
        }
    }
    ix->first[256] = (int32_t)k;
    return KLD_OK;
}

kld_status tok_added_build_index(kld_tokenizer *t, kld_error *err) {
    kld_status st = build(t, false, &t->raw_index, err);
    if (!st) st = build(t, true, &t->norm_index, err);
    return st;
}

static uint32_t last_cp(const char *s, size_t n) {
    size_t k = n - 1;
    while (k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80) k--;
    size_t l;
    return tok_utf8_decode(s + k, n - k, &l);
}

static kld_status split_hf(const kld_tokenizer *t, const char *s, size_t n, bool parse_special,
                           bool norm, tok_segments *out, kld_error *err) {
    const tok_added_index *ix = norm ? &t->norm_index : &t->raw_index;
    size_t start_offset = 0, pos = 0;
    bool ok = true;
    if (ix->n > 0) {
        while (pos < n && ok) {
            unsigned char c = (unsigned char)s[pos];
            int32_t i0 = ix->first[c], i1 = ix->first[c + 1];
            const tok_added *hit = NULL;
            size_t hit_len = 0;
            for (int32_t i = i0; i < i1; i++) {
                const tok_added *a = &t->added[ix->order[i]];
                size_t len;
                const char *ct = content_of(a, norm, &len);
                if (len <= n - pos && memcmp(s + pos, ct, len) == 0) {
                    hit = a;
                    hit_len = len;
                    break;
                }
            }
            if (!hit) {
                pos++;
                continue;
            }
            size_t a = pos, b = pos + hit_len;
            pos = b; /* matches do not overlap, even the ones dropped below */
            if (hit->special && !parse_special) continue;
            if (hit->single_word) {
                bool left_ok = a == 0 || !tok_is_word_char(last_cp(s, a));
                size_t l;
                bool right_ok = b == n || !tok_is_word_char(tok_utf8_decode(s + b, n - b, &l));
                if (!left_ok || !right_ok) continue;
            }
            if (hit->lstrip) {
                size_t na = a;
                while (na > 0) {
                    size_t k = na - 1;
                    while (k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80) k--;
                    size_t l;
                    if (!tok_is_whitespace(tok_utf8_decode(s + k, na - k, &l))) break;
                    na = k;
                }
                a = na > start_offset ? na : start_offset;
            }
            if (hit->rstrip) {
                while (b < n) {
                    size_t l;
                    if (!tok_is_whitespace(tok_utf8_decode(s + b, n - b, &l))) break;
                    b += l;
                }
                if (pos < b) pos = b;
            }
            if (start_offset < a) ok &= seg_push(out, start_offset, a - start_offset, -1);
            ok &= seg_push(out, a, b - a, hit->id);
            start_offset = b;
        }
    }
    if (ok && start_offset < n) ok &= seg_push(out, start_offset, n - start_offset, -1);
    return ok ? KLD_OK : kld_fail(err, KLD_ERR_NOMEM, "out of memory");
}

static const char *find_in(const char *s, size_t n, const char *pat, size_t m) {
    if (m == 0 || m > n) return NULL;
    return memmem(s, n, pat, m);
}

static kld_status split_llama(const kld_tokenizer *t, const char *s, size_t n, bool parse_special,
                              tok_segments *out, kld_error *err) {
    tok_segments cur = {0}, nxt = {0};
    bool ok = n == 0 || seg_push(&cur, 0, n, -1);
    for (size_t k = 0; k < t->n_added && ok; k++) {
        const tok_added *a = &t->added[k];
        if (a->special && !parse_special) continue;
        nxt.n = 0;
        for (size_t i = 0; i < cur.n && ok; i++) {
            tok_segment g = cur.v[i];
            if (g.id >= 0) {
                ok &= seg_push(&nxt, g.off, g.len, g.id);
                continue;
            }
            size_t off = g.off, len = g.len;
            for (;;) {
                const char *p = find_in(s + off, len, a->content, a->len);
                if (!p) {
                    if (len > 0) ok &= seg_push(&nxt, off, len, -1);
                    break;
                }
                size_t m = (size_t)(p - s);
                size_t left = m - off;
                if (a->lstrip)
                    while (left > 0 && (s[off + left - 1] == ' ' ||
                                        (s[off + left - 1] >= '\t' && s[off + left - 1] <= '\r')))
                        left--;
                if (left > 0) ok &= seg_push(&nxt, off, left, -1);
                ok &= seg_push(&nxt, m, a->len, a->id);
                size_t roff = m + a->len, rlen = off + len - roff;
                if (a->rstrip)
                    while (rlen > 0 && (s[roff] == ' ' || (s[roff] >= '\t' && s[roff] <= '\r')))
                        roff++, rlen--;
                off = roff;
                len = rlen;
                if (len == 0) break;
            }
        }
        tok_segments sw = cur;
        cur = nxt;
        nxt = sw;
    }
    for (size_t i = 0; i < cur.n && ok; i++)
        ok &= seg_push(out, cur.v[i].off, cur.v[i].len, cur.v[i].id);
    free(cur.v);
    free(nxt.v);
    return ok ? KLD_OK : kld_fail(err, KLD_ERR_NOMEM, "out of memory");
}

kld_status tok_split_added(const kld_tokenizer *t, const char *s, size_t n, bool parse_special,
                           bool normalized_pass, tok_segments *out, kld_error *err) {
    out->n = 0;
    if (t->llama_mode) return split_llama(t, s, n, parse_special, out, err);
    return split_hf(t, s, n, parse_special, normalized_pass, out, err);
}
