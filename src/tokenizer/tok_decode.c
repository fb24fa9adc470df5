/* tok_decode.c — ids -> text. tokenizer.json: the decoder chain over the
 * list of token strings (ByteLevel, Replace, ByteFallback, Fuse, Strip,
 * Metaspace), as Hugging Face's decode_chain; no decoder joins with
 * spaces. GGUF / llama2.c: llama.cpp's token_to_piece per token (▁ -> space,
 * byte tokens -> bytes, byte-level characters -> bytes), with the leading
 * space of an add-space-prefix vocabulary removed from the first piece. */
#include "tokenizer/tok_internal.h"

#include <stdlib.h>

/* A list of strings: spans into one buffer. */
typedef struct strlist {
    tok_buf buf;
    tok_spans sp;
} strlist;

static bool sl_push(strlist *l, const char *s, size_t n) {
    size_t at = l->buf.n;
    return tok_buf_append(&l->buf, s, n) && tok_spans_push(&l->sp, at, l->buf.n);
}

static void sl_free(strlist *l) {
    tok_buf_free(&l->buf);
    free(l->sp.v);
}

#define SL_STR(l, i) ((l)->buf.p + (l)->sp.v[i].start)
#define SL_LEN(l, i) ((l)->sp.v[i].end - (l)->sp.v[i].start)

static const char REPLACEMENT[] = "\xEF\xBF\xBD"; /* U+FFFD */

/* Rust's String::from_utf8_lossy: each maximal invalid subpart -> U+FFFD. */
static bool lossy_utf8(const unsigned char *s, size_t n, tok_buf *out) {
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c < 0x80) {
            if (!tok_buf_append(out, s + i, 1)) return false;
            i++;
            continue;
        }
        size_t need;
        unsigned lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) need = 1;
        else if (c >= 0xE0 && c <= 0xEF) {
            need = 2;
            if (c == 0xE0) lo = 0xA0;
            if (c == 0xED) hi = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            need = 3;
            if (c == 0xF0) lo = 0x90;
            if (c == 0xF4) hi = 0x8F;
        } else {
            if (!tok_buf_append(out, REPLACEMENT, 3)) return false;
            i++;
            continue;
        }
        size_t k = 1;
        while (k <= need && i + k < n) {
            unsigned b = s[i + k];
            unsigned l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
            if (b < l || b > h) break;
            k++;
        }
        if (k == need + 1) {
            if (!tok_buf_append(out, s + i, k)) return false;
        } else if (!tok_buf_append(out, REPLACEMENT, 3)) {
            return false;
        }
        i += k;
    }
    return true;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int byte_token(const char *s, size_t n) {
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
    int h = hexval(s[3]), l = hexval(s[4]);
    return h < 0 || l < 0 ? -1 : h * 16 + l;
}

static kld_status step(const tok_dec *d, strlist *in, strlist *out, tok_matcher *m,
                       kld_error *err, bool inner) {
    bool ok = true;
    switch (d->kind) {
    case DEC_BYTELEVEL: {
        tok_buf raw = {0};
        for (size_t i = 0; i < in->sp.n && ok; i++) {
            const char *s = SL_STR(in, i);
            size_t n = SL_LEN(in, i), at = raw.n;
            bool mapped = true;
            for (size_t j = 0; j < n && mapped && ok;) {
                size_t l;
                int b = tok_cp_to_byte(tok_utf8_decode(s + j, n - j, &l));
                if (b < 0) mapped = false;
                else {
                    char c = (char)b;
                    ok &= tok_buf_append(&raw, &c, 1);
                }
                j += l;
            }
            if (!mapped) { /* a token outside the byte alphabet stays as it is */
                raw.n = at;
                ok &= tok_buf_append(&raw, s, n);
            }
        }
        tok_buf txt = {0};
        ok = ok && lossy_utf8((const unsigned char *)raw.p, raw.n, &txt) &&
             sl_push(out, txt.p ? txt.p : "", txt.n);
        tok_buf_free(&raw);
        tok_buf_free(&txt);
        break;
    }
    case DEC_FUSE: {
        tok_buf all = {0};
        for (size_t i = 0; i < in->sp.n && ok; i++)
            ok &= tok_buf_append(&all, SL_STR(in, i), SL_LEN(in, i));
        ok = ok && sl_push(out, all.p ? all.p : "", all.n);
        tok_buf_free(&all);
        break;
    }
    case DEC_BYTEFALLBACK: {
        tok_buf bytes = {0};
        for (size_t i = 0; i <= in->sp.n && ok; i++) {
            int b = i < in->sp.n ? byte_token(SL_STR(in, i), SL_LEN(in, i)) : -1;
            if (b >= 0) {
                char c = (char)b;
                ok &= tok_buf_append(&bytes, &c, 1);
                continue;
            }
            if (bytes.n > 0) {
                if (kld_utf8_valid(bytes.p, bytes.n)) ok &= sl_push(out, bytes.p, bytes.n);
                else
                    for (size_t k = 0; k < bytes.n && ok; k++) ok &= sl_push(out, REPLACEMENT, 3);
                bytes.n = 0;
            }
            if (i < in->sp.n) ok &= sl_push(out, SL_STR(in, i), SL_LEN(in, i));
        }
        tok_buf_free(&bytes);
        break;
    }
    case DEC_REPLACE: {
        tok_buf tmp = {0};
        for (size_t i = 0; i < in->sp.n && ok; i++) {
            tok_norm rn = {.kind = NORM_REPLACE,
                           .str = d->pat,
                           .str_len = d->pat_len,
                           .re = d->re,
                           .content = d->content,
                           .content_len = d->content_len};
            kld_status st = tok_normalize_steps(&rn, 1, SL_STR(in, i), SL_LEN(in, i), &tmp, m, err);
            if (st) {
                tok_buf_free(&tmp);
                return st;
            }
            ok &= sl_push(out, tmp.p ? tmp.p : "", tmp.n);
        }
        tok_buf_free(&tmp);
        break;
    }
    case DEC_STRIP:
        /* inside a longer text nothing is stripped (Strip removes the
         * dummy prefix's space of a text's first word) */
        for (size_t i = 0; i < in->sp.n && ok && inner; i++) ok &= sl_push(out, SL_STR(in, i), SL_LEN(in, i));
        for (size_t i = 0; i < in->sp.n && ok && !inner; i++) {
            const char *s = SL_STR(in, i);
            size_t n = SL_LEN(in, i), a = 0, b = n;
            for (size_t k = 0; k < d->start && a < b; k++) {
                size_t l;
                if (tok_utf8_decode(s + a, b - a, &l) != d->cp) break;
                a += l;
            }
            for (size_t k = 0; k < d->stop && b > a; k++) {
                size_t j = b - 1;
                while (j > a && ((unsigned char)s[j] & 0xC0) == 0x80) j--;
                size_t l;
                if (tok_utf8_decode(s + j, b - j, &l) != d->cp) break;
                b = j;
            }
            ok &= sl_push(out, s + a, b - a);
        }
        break;
    case DEC_METASPACE: {
        tok_buf tmp = {0};
        for (size_t i = 0; i < in->sp.n && ok; i++) {
            const char *s = SL_STR(in, i);
            size_t n = SL_LEN(in, i);
            tmp.n = 0;
            for (size_t j = 0; j < n && ok;) {
                size_t l;
                uint32_t cp = tok_utf8_decode(s + j, n - j, &l);
                if (cp == d->cp) {
                    if (!(i == 0 && d->prepend && !inner)) ok &= tok_buf_append(&tmp, " ", 1);
                } else {
                    ok &= tok_buf_append(&tmp, s + j, l);
                }
                j += l;
            }
            ok = ok && sl_push(out, tmp.p ? tmp.p : "", tmp.n);
        }
        tok_buf_free(&tmp);
        break;
    }
    }
    return ok ? KLD_OK : kld_fail(err, KLD_ERR_NOMEM, "out of memory");
}

/* The tokenizer.json loader types special added tokens as control. */
static bool is_special_added(const kld_tokenizer *t, int32_t id) {
    return t->vocab.type[id] == KLD_TOKEN_CONTROL;
}

static kld_status decode_hf(const kld_tokenizer *t, const int32_t *ids, size_t n, unsigned flags,
                            tok_buf *res, kld_error *err) {
    strlist a = {0}, b = {0};
    kld_status st = KLD_OK;
    bool ok = true;
    for (size_t i = 0; i < n && ok; i++) {
        size_t len;
        const char *p = tok_vocab_piece(&t->vocab, ids[i], &len);
        if (!p) {
            st = kld_fail(err, KLD_ERR_ARG, "%s: token id %d is not in the vocabulary", t->name,
                          (int)ids[i]);
            goto done;
        }
        if ((flags & KLD_TOK_SKIP_SPECIAL) && is_special_added(t, ids[i])) continue;
        ok &= sl_push(&a, p, len);
    }
    if (!ok) {
        st = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (!t->has_decoder) {
        for (size_t i = 0; i < a.sp.n && ok; i++) {
            if (i) ok &= tok_buf_append(res, " ", 1);
            ok &= tok_buf_append(res, SL_STR(&a, i), SL_LEN(&a, i));
        }
        if (!ok) st = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
        goto done;
    }
    tok_matcher *m = tok_matcher_create();
    if (!m) {
        st = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
        goto done;
    }
    strlist *in = &a, *out = &b;
    for (size_t k = 0; k < t->n_decs && !st; k++) {
        out->buf.n = 0;
        out->sp.n = 0;
        st = step(&t->decs[k], in, out, m, err, (flags & KLD_TOK_DECODE_INNER) != 0);
        strlist *sw = in;
        in = out;
        out = sw;
    }
    tok_matcher_free(m);
    for (size_t i = 0; i < in->sp.n && ok && !st; i++)
        ok &= tok_buf_append(res, SL_STR(in, i), SL_LEN(in, i));
    if (!ok && !st) st = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
done:
    sl_free(&a);
    sl_free(&b);
    return st;
}

static kld_status decode_llama(const kld_tokenizer *t, const int32_t *ids, size_t n, unsigned flags,
                               tok_buf *res, kld_error *err) {
    bool strip_space = t->add_space_prefix && !(flags & KLD_TOK_DECODE_INNER);
    static const char esc[] = "\xE2\x96\x81";
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const char *p = tok_vocab_piece(&t->vocab, ids[i], &len);
        if (!p)
            return kld_fail(err, KLD_ERR_ARG, "%s: token id %d is not in the vocabulary", t->name,
                            (int)ids[i]);
        uint8_t ty = t->vocab.type[ids[i]];
        size_t at = res->n;
        bool ok = true;
        if (ty == KLD_TOKEN_CONTROL || ty == KLD_TOKEN_UNKNOWN) {
            if (flags & KLD_TOK_SKIP_SPECIAL) continue;
            ok = tok_buf_append(res, p, len);
        } else if (ty == KLD_TOKEN_USER_DEFINED) {
            ok = tok_buf_append(res, p, len);
        } else if (ty == KLD_TOKEN_BYTE) {
            int b = byte_token(p, len);
            char c = (char)(b < 0 ? 0 : b);
            ok = b < 0 || tok_buf_append(res, &c, 1);
        } else if (ty == KLD_TOKEN_NORMAL) {
            if (t->model == MODEL_BPE) {
                for (size_t j = 0; j < len && ok;) {
                    size_t l;
                    int b = tok_cp_to_byte(tok_utf8_decode(p + j, len - j, &l));
                    if (b >= 0) {
                        char c = (char)b;
                        ok = tok_buf_append(res, &c, 1);
                    } else {
                        ok = tok_buf_append(res, p + j, l);
                    }
                    j += l;
                }
            } else { /* ▁ -> space */
                for (size_t j = 0; j < len && ok;) {
                    if (len - j >= 3 && memcmp(p + j, esc, 3) == 0) {
                        ok = tok_buf_append(res, " ", 1);
                        j += 3;
                    } else {
                        ok = tok_buf_append(res, p + j, 1);
                        j++;
                    }
                }
            }
        } /* unused / undefined tokens produce nothing, as in llama.cpp */
        if (!ok) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
        if (res->n > at && strip_space) {
            if (res->p[at] == ' ') {
                memmove(res->p + at, res->p + at + 1, res->n - at - 1);
                res->n--;
            }
        }
        if (res->n > at) strip_space = false;
    }
    return KLD_OK;
}

kld_status kld_tok_decode(const kld_tokenizer *t, const int32_t *ids, size_t n, unsigned flags,
                          char **out, size_t *out_len, kld_error *err) {
    *out = NULL;
    *out_len = 0;
    tok_buf res = {0};
    kld_status st = t->llama_mode ? decode_llama(t, ids, n, flags, &res, err)
                                  : decode_hf(t, ids, n, flags, &res, err);
    if (!st && !tok_buf_append(&res, "", 1)) st = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    if (st) {
        tok_buf_free(&res);
        return st;
    }
    *out = res.p;
    *out_len = res.n - 1;
    return KLD_OK;
}
