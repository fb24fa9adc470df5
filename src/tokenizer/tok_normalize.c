/* tok_normalize.c — tokenizer.json normalizers applied to one text segment:
 * NFC/NFD/NFKC/NFKD, Lowercase, Strip, StripAccents, Prepend and Replace
 * (string or regex), in sequence. Offsets are not tracked: kldeval only
 * needs the ids. */
#include "tokenizer/tok_internal.h"

#include <stdlib.h>

static kld_status oom(kld_error *err) { return kld_fail(err, KLD_ERR_NOMEM, "out of memory"); }

static const char *find_literal(const char *s, size_t n, const char *pat, size_t m) {
    if (m == 0 || m > n) return NULL;
    const char *end = s + n - m;
    for (const char *p = s; p <= end; p++) {
        p = memchr(p, pat[0], (size_t)(end - p) + 1);
        if (!p) return NULL;
        if (memcmp(p, pat, m) == 0) return p;
    }
    return NULL;
}

static kld_status apply(const tok_norm *st, const char *s, size_t n, tok_buf *out, tok_matcher *m,
                        kld_error *err) {
    switch (st->kind) {
    case NORM_NFC: return tok_normalize_form(TOK_NFC, s, n, out, err);
    case NORM_NFD: return tok_normalize_form(TOK_NFD, s, n, out, err);
    case NORM_NFKC: return tok_normalize_form(TOK_NFKC, s, n, out, err);
    case NORM_NFKD: return tok_normalize_form(TOK_NFKD, s, n, out, err);
    case NORM_LOWERCASE: return tok_lowercase(s, n, out) ? KLD_OK : oom(err);
    case NORM_STRIP_ACCENTS: return tok_strip_marks(s, n, out) ? KLD_OK : oom(err);
    case NORM_STRIP: {
        size_t a = 0, b = n;
        while (st->left && a < b) {
            size_t l;
            uint32_t cp = tok_utf8_decode(s + a, b - a, &l);
            if (!tok_is_whitespace(cp)) break;
            a += l;
        }
        while (st->right && b > a) {
            size_t k = b - 1;
            while (k > a && ((unsigned char)s[k] & 0xC0) == 0x80) k--;
            size_t l;
            uint32_t cp = tok_utf8_decode(s + k, b - k, &l);
            if (!tok_is_whitespace(cp)) break;
            b = k;
        }
        return tok_buf_append(out, s + a, b - a) ? KLD_OK : oom(err);
    }
    case NORM_PREPEND:
        /* Hugging Face prepends nothing to an empty string */
        if (n > 0 && !tok_buf_append(out, st->str, st->str_len)) return oom(err);
        return tok_buf_append(out, s, n) ? KLD_OK : oom(err);
    case NORM_REPLACE: {
        if (st->re) {
            tok_spans sp = {0};
            if (!tok_regex_find_all(st->re, m, s, n, &sp, err)) {
                free(sp.v);
                return err->status;
            }
            size_t at = 0;
            bool ok = true;
            for (size_t i = 0; i < sp.n && ok; i++) {
                ok = tok_buf_append(out, s + at, sp.v[i].start - at) &&
                     tok_buf_append(out, st->content, st->content_len);
                at = sp.v[i].end;
            }
            ok = ok && tok_buf_append(out, s + at, n - at);
            free(sp.v);
            return ok ? KLD_OK : oom(err);
        }
        size_t at = 0;
        for (;;) {
            const char *p = find_literal(s + at, n - at, st->str, st->str_len);
            if (!p) break;
            size_t k = (size_t)(p - s);
            if (!tok_buf_append(out, s + at, k - at) ||
                !tok_buf_append(out, st->content, st->content_len))
                return oom(err);
            at = k + st->str_len;
        }
        return tok_buf_append(out, s + at, n - at) ? KLD_OK : oom(err);
    }
    }
    return kld_fail(err, KLD_ERR_UNSUPPORTED, "unknown normalizer step");
}

kld_status tok_normalize_steps(const tok_norm *steps, size_t n_steps, const char *s, size_t n,
                               tok_buf *out, tok_matcher *m, kld_error *err) {
    out->n = 0;
    if (n_steps == 0) return tok_buf_append(out, s, n) ? KLD_OK : oom(err);
    tok_buf tmp[2] = {{0}, {0}};
    const char *cur = s;
    size_t cur_n = n;
    kld_status st = KLD_OK;
    for (size_t i = 0; i < n_steps && !st; i++) {
        tok_buf *dst = i + 1 == n_steps ? out : &tmp[i & 1];
        dst->n = 0;
        st = apply(&steps[i], cur, cur_n, dst, m, err);
        cur = dst->p;
        cur_n = dst->n;
    }
    tok_buf_free(&tmp[0]);
    tok_buf_free(&tmp[1]);
    return st;
}
