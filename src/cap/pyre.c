/* pyre.c — Python `re`/`str` semantics on UTF-8 for the IFEval verifiers
 * (see pyre.h). Patterns are compiled per call: the verifiers run once per
 * response, and a cache would only add state. */
#include "cap/pyre.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

static pcre2_code *compile(const char *pattern, int flags) {
    uint32_t opt = PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF;
    if (flags & PYRE_I) opt |= PCRE2_CASELESS;
    if (flags & PYRE_M) opt |= PCRE2_MULTILINE;
    int ec;
    PCRE2_SIZE eo;
    return pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, opt, &ec, &eo, NULL);
}

long pyre_each(const char *pattern, int flags, const char *text,
               void (*fn)(void *ctx, size_t start, size_t end), void *ctx) {
    pcre2_code *re = compile(pattern, flags);
    if (!re) return -1;
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    if (!md) {
        pcre2_code_free(re);
        return -1;
    }
    size_t len = strlen(text), at = 0;
    long count = 0;
    while (at <= len) {
        int rc = pcre2_match(re, (PCRE2_SPTR)text, len, at, 0, md, NULL);
        if (rc < 0) break;
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        count++;
        if (fn) fn(ctx, ov[0], ov[1]);
        if (ov[1] > ov[0]) at = ov[1];
        else { /* an empty match: step over one code point, as Python does */
            if (ov[1] >= len) break;
            int32_t cp;
            at = ov[1] + py_decode(text + ov[1], len - ov[1], &cp);
        }
    }
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    return count;
}

long pyre_count(const char *pattern, int flags, const char *text) {
    return pyre_each(pattern, flags, text, NULL, NULL);
}

int pyre_search(const char *pattern, int flags, const char *text) {
    pcre2_code *re = compile(pattern, flags);
    if (!re) return -1;
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    int rc = md ? pcre2_match(re, (PCRE2_SPTR)text, strlen(text), 0, 0, md, NULL) : -1;
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    return rc >= 0 ? 1 : 0;
}

size_t py_decode(const char *s, size_t n, int32_t *cp) {
    utf8proc_int32_t c;
    utf8proc_ssize_t l = utf8proc_iterate((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &c);
    if (l <= 0) {
        *cp = 0xFFFD;
        return 1;
    }
    *cp = c;
    return (size_t)l;
}

bool py_isspace(int32_t c) {
    return (c >= 9 && c <= 13) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 ||
           c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 ||
           c == 0x202f || c == 0x205f || c == 0x3000;
}

static bool is_title(int32_t c) { return utf8proc_category(c) == UTF8PROC_CATEGORY_LT; }

bool py_isupper(const char *s, size_t n) {
    bool cased = false;
    for (size_t i = 0; i < n;) {
        int32_t c;
        i += py_decode(s + i, n - i, &c);
        if (utf8proc_islower(c) || is_title(c)) return false;
        if (utf8proc_isupper(c)) cased = true;
    }
    return cased;
}

bool py_islower(const char *s, size_t n) {
    bool cased = false;
    for (size_t i = 0; i < n;) {
        int32_t c;
        i += py_decode(s + i, n - i, &c);
        if (utf8proc_isupper(c) || is_title(c)) return false;
        if (utf8proc_islower(c)) cased = true;
    }
    return cased;
}

char *py_lower(const char *s, size_t n, size_t *out_len) {
    char *out = malloc(n * 2 + 4 + 1); /* a lowered code point is at most 4 bytes */
    if (!out) return NULL;
    size_t o = 0, cap = n * 2 + 4;
    for (size_t i = 0; i < n;) {
        int32_t c;
        size_t l = py_decode(s + i, n - i, &c);
        if (l == 1 && c == 0xFFFD && (unsigned char)s[i] >= 0x80) {
            out[o++] = s[i]; /* keep an invalid byte as it is */
            i++;
            continue;
        }
        i += l;
        c = utf8proc_tolower(c);
        if (o + 4 > cap) {
            char *no = realloc(out, cap * 2 + 1);
            if (!no) return free(out), NULL;
            out = no;
            cap *= 2;
        }
        o += (size_t)utf8proc_encode_char(c, (utf8proc_uint8_t *)out + o);
    }
    out[o] = '\0';
    if (out_len) *out_len = o;
    return out;
}

void py_strip(const char *s, size_t n, size_t *start, size_t *end) {
    size_t a = 0, b = n;
    while (a < b) {
        int32_t c;
        size_t l = py_decode(s + a, b - a, &c);
        if (!py_isspace(c)) break;
        a += l;
    }
    while (b > a) { /* step back to the start of the last code point */
        size_t p = b - 1;
        while (p > a && ((unsigned char)s[p] & 0xC0) == 0x80) p--;
        int32_t c;
        py_decode(s + p, b - p, &c);
        if (!py_isspace(c)) break;
        b = p;
    }
    *start = a;
    *end = b;
}

char *py_remove_char(const char *s, char c) {
    size_t n = strlen(s);
    char *out = malloc(n + 1);
    if (!out) return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n; i++)
        if (s[i] != c) out[o++] = s[i];
    out[o] = '\0';
    return out;
}
