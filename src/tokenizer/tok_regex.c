/* tok_regex.c — pre-tokenizer regular expressions on PCRE2 (UTF + Unicode
 * properties, JIT-compiled). Patterns come written for Oniguruma (Hugging
 * Face) or std::regex (llama.cpp); the one construct whose meaning differs
 * in PCRE2 10.42 is case-insensitivity: Oniguruma's (?i:'s) does not match
 * "'ſ" (U+017F folds to s) while PCRE2's does. So caseless groups are
 * rewritten into explicit case classes ([sS]) before compiling. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/tok_internal.h"

#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <utf8proc.h>

const char *const TOK_RE_GPT2 =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

struct tok_regex {
    pcre2_code *code;
    bool jit;
    char *source;
};

struct tok_matcher {
    pcre2_match_data *md;
    pcre2_match_context *mc;
    pcre2_jit_stack *stack;
};

/* The translated pattern; an allocation failure sticks until the end. */
typedef struct rx_out {
    tok_buf b;
    bool failed;
} rx_out;

static void put(rx_out *o, const void *p, size_t n) {
    if (!o->failed && !tok_buf_append(&o->b, p, n)) o->failed = true;
}

/* Appends the case variants of code point cp (itself included) to out,
 * as class members (no brackets). */
static void case_variants(uint32_t cp, rx_out *out) {
    uint32_t v[3] = {cp, (uint32_t)utf8proc_tolower((utf8proc_int32_t)cp),
                     (uint32_t)utf8proc_toupper((utf8proc_int32_t)cp)};
    for (int i = 0; i < 3; i++) {
        bool dup = false;
        for (int j = 0; j < i; j++) dup |= v[j] == v[i];
        if (dup) continue;
        char buf[4];
        size_t k = tok_utf8_encode(v[i], buf);
        put(out, buf, k);
    }
}

static bool is_cased(uint32_t cp) {
    return utf8proc_tolower((utf8proc_int32_t)cp) != (utf8proc_int32_t)cp ||
           utf8proc_toupper((utf8proc_int32_t)cp) != (utf8proc_int32_t)cp;
}

/* Copies an escape sequence starting at p[i] == '\\' to out; returns the
 * index after it. */
static size_t copy_escape(const char *p, size_t n, size_t i, bool in_class, rx_out *out) {
    if (i + 1 < n && (p[i + 1] == 'h' || p[i + 1] == 'H')) {
        /* Oniguruma's \h is a hexadecimal digit (PCRE2: horizontal space). */
        const char *cls =
            p[i + 1] == 'h' ? (in_class ? "0-9a-fA-F" : "[0-9a-fA-F]") : "[^0-9a-fA-F]";
        put(out, cls, strlen(cls));
        return i + 2;
    }
    size_t j = i + 1;
    if (j < n) {
        char c = p[j];
        j += tok_utf8_len((unsigned char)c);
        if ((c == 'p' || c == 'P' || c == 'x' || c == 'N' || c == 'o') && j < n && p[j] == '{') {
            while (j < n && p[j] != '}') j++;
            if (j < n) j++;
        }
    }
    if (j > n) j = n;
    put(out, p + i, j - i);
    return j;
}

/* Rewrites pattern p for PCRE2 (see the file comment). *what_bad gets a
 * description of an unsupported construct. */
static bool translate(const char *p, size_t n, rx_out *out, const char **what_bad) {
    /* caseless[d]: whether group depth d is case-insensitive */
    bool caseless[64] = {false};
    int depth = 0;
    size_t i = 0;
    while (i < n) {
        char c = p[i];
        if (c == '\\') {
            i = copy_escape(p, n, i, false, out);
            continue;
        }
        if (c == '[') {
            /* a character class: copy, adding case variants when caseless */
            put(out, "[", 1);
            i++;
            if (i < n && p[i] == '^') put(out, "^", 1), i++;
            if (i < n && p[i] == ']') put(out, "]", 1), i++;
            while (i < n && p[i] != ']') {
                if (p[i] == '\\') {
                    i = copy_escape(p, n, i, true, out);
                    continue;
                }
                if (p[i] == '[' && i + 1 < n && p[i + 1] == ':') { /* POSIX class */
                    size_t j = i + 2;
                    while (j + 1 < n && !(p[j] == ':' && p[j + 1] == ']')) j++;
                    j = j + 2 > n ? n : j + 2;
                    put(out, p + i, j - i);
                    i = j;
                    continue;
                }
                size_t l;
                uint32_t cp = tok_utf8_decode(p + i, n - i, &l);
                bool range = i + l + 1 < n && p[i + l] == '-' && p[i + l + 1] != ']';
                if (range) {
                    size_t l2;
                    uint32_t hi = tok_utf8_decode(p + i + l + 1, n - i - l - 1, &l2);
                    if (p[i + l + 1] == '\\') {
                        put(out, p + i, l + 1);
                        i = copy_escape(p, n, i + l + 1, true, out);
                        continue;
                    }
                    put(out, p + i, l + 1 + l2);
                    if (caseless[depth]) {
                        if (cp >= 'a' && hi <= 'z') {
                            char r[3] = {(char)(cp - 32), '-', (char)(hi - 32)};
                            put(out, r, 3);
                        } else if (cp >= 'A' && hi <= 'Z') {
                            char r[3] = {(char)(cp + 32), '-', (char)(hi + 32)};
                            put(out, r, 3);
                        } else if (hi >= cp && hi - cp < 2048) {
                            for (uint32_t x = cp; x <= hi; x++)
                                if (is_cased(x)) case_variants(x, out);
                        }
                    }
                    i += l + 1 + l2;
                    continue;
                }
                if (caseless[depth] && is_cased(cp)) {
                    case_variants(cp, out);
                } else {
                    put(out, p + i, l);
                }
                i += l;
            }
            if (i < n) put(out, "]", 1), i++;
            continue;
        }
        if (c == '(') {
            if (depth + 1 >= 64) {
                *what_bad = "groups nested deeper than 63";
                return false;
            }
            bool inherit = caseless[depth];
            if (i + 1 < n && p[i + 1] == '?') {
                /* (?flags) or (?flags:...) — only i (and its negation) is
                 * understood; the usual group kinds pass through. */
                size_t j = i + 2;
                bool on = true, any = false, set = inherit;
                while (j < n && (p[j] == 'i' || p[j] == '-')) {
                    if (p[j] == '-') on = false;
                    else set = on, any = true;
                    j++;
                }
                if (any && j < n && (p[j] == ':' || p[j] == ')')) {
                    if (p[j] == ')') { /* (?i): applies to the rest of this group */
                        caseless[depth] = set;
                        i = j + 1;
                        continue;
                    }
                    put(out, "(?:", 3);
                    caseless[++depth] = set;
                    i = j + 1;
                    continue;
                }
                if (j == i + 2 && j < n &&
                    (p[j] == ':' || p[j] == '=' || p[j] == '!' || p[j] == '>' || p[j] == '<' ||
                     p[j] == 'P' || p[j] == '\'')) {
                    put(out, "(?", 2);
                    caseless[++depth] = inherit;
                    i += 2;
                    continue;
                }
                *what_bad = "inline flags other than (?i)";
                return false;
            }
            put(out, "(", 1);
            caseless[++depth] = inherit;
            i++;
            continue;
        }
        if (c == ')') {
            if (depth > 0) depth--;
            put(out, ")", 1);
            i++;
            continue;
        }
        size_t l;
        uint32_t cp = tok_utf8_decode(p + i, n - i, &l);
        if (caseless[depth] && is_cased(cp)) {
            put(out, "[", 1);
            case_variants(cp, out);
            put(out, "]", 1);
        } else {
            put(out, p + i, l);
        }
        i += l;
    }
    put(out, "", 1); /* NUL */
    return !out->failed;
}

kld_status tok_regex_compile(const char *pattern, size_t len, const char *what, tok_regex **out,
                             kld_error *err) {
    *out = NULL;
    if (!kld_utf8_valid(pattern, len))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: regex is not valid UTF-8", what);
    rx_out tr = {{0}, false};
    const char *bad = NULL;
    if (!translate(pattern, len, &tr, &bad)) {
        tok_buf_free(&tr.b);
        if (bad)
            return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: regex /%.*s/ uses %s", what,
                            (int)(len > 200 ? 200 : len), pattern, bad);
        return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    }
    int ec = 0;
    PCRE2_SIZE eoff = 0;
    pcre2_code *code =
        pcre2_compile((PCRE2_SPTR)tr.b.p, tr.b.n - 1, PCRE2_UTF | PCRE2_UCP, &ec, &eoff, NULL);
    tok_buf_free(&tr.b);
    if (!code) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(ec, msg, sizeof msg);
        return kld_fail(err, KLD_ERR_FORMAT, "%s: invalid regex /%.*s/: %s (at offset %zu)", what,
                        (int)(len > 200 ? 200 : len), pattern, (const char *)msg, (size_t)eoff);
    }
    tok_regex *re = calloc(1, sizeof *re);
    char *src = kld_strndup(pattern, len);
    if (!re || !src) {
        pcre2_code_free(code);
        free(re);
        free(src);
        return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    }
    re->code = code;
    re->source = src;
    re->jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
    *out = re;
    return KLD_OK;
}

void tok_regex_free(tok_regex *re) {
    if (!re) return;
    pcre2_code_free(re->code);
    free(re->source);
    free(re);
}

const char *tok_regex_source(const tok_regex *re) { return re->source; }

tok_matcher *tok_matcher_create(void) {
    tok_matcher *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    /* Only the whole-match offsets are read: one pair suffices (PCRE2 then
     * returns 0 for patterns with groups, which still fills pair 0). */
    m->md = pcre2_match_data_create(1, NULL);
    m->mc = pcre2_match_context_create(NULL);
    /* Long runs of one class (1000 spaces) recurse deeply in JIT code. */
    m->stack = pcre2_jit_stack_create(64 * 1024, 8 * 1024 * 1024, NULL);
    if (!m->md || !m->mc || !m->stack) {
        tok_matcher_free(m);
        return NULL;
    }
    pcre2_jit_stack_assign(m->mc, NULL, m->stack);
    return m;
}

void tok_matcher_free(tok_matcher *m) {
    if (!m) return;
    pcre2_match_data_free(m->md);
    pcre2_match_context_free(m->mc);
    pcre2_jit_stack_free(m->stack);
    free(m);
}

bool tok_regex_find_all(const tok_regex *re, tok_matcher *m, const char *s, size_t n,
                        tok_spans *out, kld_error *err) {
    size_t pos = 0;
    while (pos <= n) {
        int rc =
            re->jit
                ? pcre2_jit_match(re->code, (PCRE2_SPTR)s, n, pos, PCRE2_NO_UTF_CHECK, m->md, m->mc)
                : pcre2_match(re->code, (PCRE2_SPTR)s, n, pos, PCRE2_NO_UTF_CHECK, m->md, m->mc);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            kld_fail(err, KLD_ERR_UNSUPPORTED, "regex /%s/ failed on a %zu-byte input: %s",
                     re->source, n, (const char *)msg);
            return false;
        }
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(m->md);
        size_t start = ov[0], end = ov[1];
        if (!tok_spans_push(out, start, end)) {
            kld_fail(err, KLD_ERR_NOMEM, "out of memory");
            return false;
        }
        if (end == start) { /* an empty match: step over one character */
            if (start >= n) break;
            pos = start + tok_utf8_len((unsigned char)s[start]);
        } else {
            pos = end;
        }
    }
    return true;
}
