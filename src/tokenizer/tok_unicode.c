/* tok_unicode.c — the Unicode pieces the tokenizer needs: UTF-8 coding,
 * GPT-2's byte-level alphabet, character classes, and normalization /
 * lowercasing through utf8proc. Also the small growable buffers. */
#include "tokenizer/tok_internal.h"

#include <stdlib.h>
#include <utf8proc.h>

bool tok_buf_reserve(tok_buf *b, size_t extra) {
    if (b->cap - b->n >= extra) return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->n < extra) {
        if (cap > SIZE_MAX / 2) return false;
        cap *= 2;
    }
    char *p = realloc(b->p, cap);
    if (!p) return false;
    b->p = p;
    b->cap = cap;
    return true;
}

bool tok_buf_append(tok_buf *b, const void *p, size_t n) {
    if (!tok_buf_reserve(b, n)) return false;
    if (n) memcpy(b->p + b->n, p, n);
    b->n += n;
    return true;
}

void tok_buf_free(tok_buf *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}

bool tok_spans_push(tok_spans *s, size_t start, size_t end) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        tok_span *v = realloc(s->v, cap * sizeof *v);
        if (!v) return false;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n].start = start;
    s->v[s->n].end = end;
    s->n++;
    return true;
}

bool tok_ids_append(kld_tok_ids *ids, const int32_t *v, size_t n) {
    if (ids->cap - ids->n < n) {
        size_t cap = ids->cap ? ids->cap : 64;
        while (cap - ids->n < n) cap *= 2;
        int32_t *p = realloc(ids->ids, cap * sizeof *p);
        if (!p) return false;
        ids->ids = p;
        ids->cap = cap;
    }
    if (n) memcpy(ids->ids + ids->n, v, n * sizeof *v);
    ids->n += n;
    return true;
}

bool tok_ids_push(kld_tok_ids *ids, int32_t id) { return tok_ids_append(ids, &id, 1); }

bool kld_tok_ids_append(kld_tok_ids *ids, const int32_t *v, size_t n) {
    return tok_ids_append(ids, v, n);
}

void kld_tok_ids_free(kld_tok_ids *ids) {
    if (!ids) return;
    free(ids->ids);
    ids->ids = NULL;
    ids->n = ids->cap = 0;
}

uint32_t tok_utf8_decode(const char *s, size_t n, size_t *len) {
    const unsigned char *p = (const unsigned char *)s;
    size_t l = tok_utf8_len(p[0]);
    if (l > n) l = n;
    *len = l;
    switch (l) {
    case 1: return p[0];
    case 2: return ((uint32_t)(p[0] & 0x1F) << 6) | (p[1] & 0x3F);
    case 3: return ((uint32_t)(p[0] & 0x0F) << 12) | ((uint32_t)(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
    default:
        return ((uint32_t)(p[0] & 0x07) << 18) | ((uint32_t)(p[1] & 0x3F) << 12) |
               ((uint32_t)(p[2] & 0x3F) << 6) | (p[3] & 0x3F);
    }
}

size_t tok_utf8_encode(uint32_t cp, char out[4]) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* GPT-2 bytes_to_unicode: printable Latin-1 bytes keep their code point,
 * the other 68 get U+0100.. in increasing byte order. */
static bool byte_is_printable(unsigned b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
}

static uint16_t g_byte_cp[256];
static int16_t g_cp_byte[256 + 68];
static pthread_once_t g_byte_once = PTHREAD_ONCE_INIT;

static void byte_tables(void) {
    unsigned n = 0;
    for (unsigned i = 0; i < 256 + 68; i++) g_cp_byte[i] = -1;
    for (unsigned b = 0; b < 256; b++) {
        g_byte_cp[b] = (uint16_t)(byte_is_printable(b) ? b : 256 + n++);
        g_cp_byte[g_byte_cp[b]] = (int16_t)b;
    }
}

uint32_t tok_byte_to_cp(uint8_t b) {
    pthread_once(&g_byte_once, byte_tables);
    return g_byte_cp[b];
}

int tok_cp_to_byte(uint32_t cp) {
    pthread_once(&g_byte_once, byte_tables);
    return cp < 256 + 68 ? g_cp_byte[cp] : -1;
}

bool tok_is_whitespace(uint32_t cp) {
    return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
           cp == 0x205F || cp == 0x3000;
}

bool tok_is_word_char(uint32_t cp) {
    if (cp < 0x80)
        return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') ||
               cp == '_';
    utf8proc_category_t c = utf8proc_category((utf8proc_int32_t)cp);
    switch (c) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
    case UTF8PROC_CATEGORY_PC: return true;
    default: return false;
    }
}

static bool all_ascii(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] >= 0x80) return false;
    return true;
}

kld_status tok_normalize_form(tok_nf form, const char *s, size_t n, tok_buf *out, kld_error *err) {
    /* ASCII is invariant under every normal form: the common case costs a scan. */
    if (all_ascii(s, n)) {
        if (!tok_buf_append(out, s, n)) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
        return KLD_OK;
    }
    int opts = UTF8PROC_STABLE;
    switch (form) {
    case TOK_NFC: opts |= UTF8PROC_COMPOSE; break;
    case TOK_NFD: opts |= UTF8PROC_DECOMPOSE; break;
    case TOK_NFKC: opts |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    case TOK_NFKD: opts |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
    }
    utf8proc_uint8_t *dst = NULL;
    utf8proc_ssize_t r = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &dst,
                                      (utf8proc_option_t)opts);
    if (r < 0)
        return kld_fail(err, KLD_ERR_ARG, "Unicode normalization failed: %s", utf8proc_errmsg(r));
    bool ok = tok_buf_append(out, dst, (size_t)r);
    free(dst);
    if (!ok) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    return KLD_OK;
}

bool tok_lowercase(const char *s, size_t n, tok_buf *out) {
    if (!tok_buf_reserve(out, n + 8)) return false;
    size_t i = 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x80) {
            if (!tok_buf_reserve(out, 1)) return false;
            out->p[out->n++] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
            i++;
            continue;
        }
        size_t l;
        uint32_t cp = tok_utf8_decode(s + i, n - i, &l);
        i += l;
        char buf[8];
        size_t k;
        if (cp == 0x130) { /* the one unconditional multi-character lowercase mapping */
            buf[0] = 'i';
            k = 1 + tok_utf8_encode(0x307, buf + 1);
        } else {
            k = tok_utf8_encode((uint32_t)utf8proc_tolower((utf8proc_int32_t)cp), buf);
        }
        if (!tok_buf_append(out, buf, k)) return false;
    }
    return true;
}

bool tok_strip_marks(const char *s, size_t n, tok_buf *out) {
    size_t i = 0;
    while (i < n) {
        size_t l;
        uint32_t cp = tok_utf8_decode(s + i, n - i, &l);
        if (cp < 0x80 || utf8proc_category((utf8proc_int32_t)cp) != UTF8PROC_CATEGORY_MN) {
            if (!tok_buf_append(out, s + i, l)) return false;
        }
        i += l;
    }
    return true;
}
