/* tok_json_scan.c — the strict JSON scanner behind the fast path for
 * model.vocab and model.merges (see tok_json_scan.h). RFC 8259 syntax:
 * strings with every escape (\uXXXX surrogate pairs included) and valid
 * UTF-8, numbers, literals, nesting up to a fixed depth. */
#include "tokenizer/tok_json_scan.h"

#include <stdio.h>

enum { MAX_DEPTH = 64 };

size_t tok_json_ws(const char *s, size_t n, size_t i) {
    while (i < n && (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t')) i++;
    return i;
}

static int hex4(const char *s, size_t n, size_t i) {
    if (n < 4 || i > n - 4) return -1;
    int v = 0;
    for (int k = 0; k < 4; k++) {
        char c = s[i + k];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

bool tok_json_string(const char *s, size_t n, size_t *pos, tok_buf *out) {
    size_t i = *pos;
    if (i >= n || s[i] != '"') return false;
    i++;
    size_t run = i; /* start of the current run of plain bytes */
    for (;;) {
        if (i >= n) return false;
        unsigned char c = (unsigned char)s[i];
        if (c == '"') break;
        if (c < 0x20) return false;
        if (c != '\\') {
            i++;
            continue;
        }
        if (out && !tok_buf_append(out, s + run, i - run)) return false;
        if (i + 1 >= n) return false;
        char e = s[i + 1];
        char lit = 0;
        switch (e) {
        case '"': lit = '"'; break;
        case '\\': lit = '\\'; break;
        case '/': lit = '/'; break;
        case 'b': lit = '\b'; break;
        case 'f': lit = '\f'; break;
        case 'n': lit = '\n'; break;
        case 'r': lit = '\r'; break;
        case 't': lit = '\t'; break;
        case 'u': {
            int u = hex4(s, n, i + 2);
            if (u < 0) return false;
            uint32_t cp = (uint32_t)u;
            i += 6;
            if (cp >= 0xD800 && cp <= 0xDBFF) { /* a surrogate pair */
                if (i + 1 >= n || s[i] != '\\' || s[i + 1] != 'u') return false;
                int lo = hex4(s, n, i + 2);
                if (lo < 0xDC00 || lo > 0xDFFF) return false;
                cp = 0x10000 + ((cp - 0xD800) << 10) + ((uint32_t)lo - 0xDC00);
                i += 6;
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                return false;
            }
            char u8[4];
            size_t k = tok_utf8_encode(cp, u8);
            if (out && !tok_buf_append(out, u8, k)) return false;
            run = i;
            continue;
        }
        default: return false;
        }
        if (out && !tok_buf_append(out, &lit, 1)) return false;
        i += 2;
        run = i;
    }
    if (out && !tok_buf_append(out, s + run, i - run)) return false;
    /* the raw bytes must be UTF-8 (escapes produce valid code points) */
    if (!kld_utf8_valid(s + *pos + 1, i - *pos - 1)) return false;
    *pos = i + 1;
    return true;
}

static bool skip_number(const char *s, size_t n, size_t *pos) {
    size_t i = *pos;
    if (i < n && s[i] == '-') i++;
    if (i >= n) return false;
    if (s[i] == '0') i++;
    else if (s[i] >= '1' && s[i] <= '9')
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    else return false;
    if (i < n && s[i] == '.') {
        i++;
        if (i >= n || s[i] < '0' || s[i] > '9') return false;
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-')) i++;
        if (i >= n || s[i] < '0' || s[i] > '9') return false;
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    }
    *pos = i;
    return true;
}

bool tok_json_skip(const char *s, size_t n, size_t *pos, int depth) {
    size_t i = tok_json_ws(s, n, *pos);
    if (i >= n || depth > MAX_DEPTH) return false;
    char c = s[i];
    if (c == '"') {
        if (!tok_json_string(s, n, &i, NULL)) return false;
    } else if (c == '{' || c == '[') {
        char close = c == '{' ? '}' : ']';
        i = tok_json_ws(s, n, i + 1);
        if (i < n && s[i] == close) {
            *pos = i + 1;
            return true;
        }
        for (;;) {
            if (c == '{') {
                i = tok_json_ws(s, n, i);
                if (!tok_json_string(s, n, &i, NULL)) return false;
                i = tok_json_ws(s, n, i);
                if (i >= n || s[i] != ':') return false;
                i++;
            }
            if (!tok_json_skip(s, n, &i, depth + 1)) return false;
            i = tok_json_ws(s, n, i);
            if (i >= n) return false;
            if (s[i] == close) {
                i++;
                break;
            }
            if (s[i] != ',') return false;
            i++;
        }
    } else if (c == 't' && n - i >= 4 && !memcmp(s + i, "true", 4)) {
        i += 4;
    } else if (c == 'f' && n - i >= 5 && !memcmp(s + i, "false", 5)) {
        i += 5;
    } else if (c == 'n' && n - i >= 4 && !memcmp(s + i, "null", 4)) {
        i += 4;
    } else if (!skip_number(s, n, &i)) {
        return false;
    }
    *pos = i;
    return true;
}

/* Skips a value without validating string contents (escapes, UTF-8):
 * for model.vocab and model.merges, which are validated when read. */
static bool skip_fast(const char *s, size_t n, size_t *pos) {
    size_t i = tok_json_ws(s, n, *pos);
    if (i >= n || (s[i] != '{' && s[i] != '[')) return tok_json_skip(s, n, pos, 2);
    int depth = 0;
    while (i < n) {
        char c = s[i];
        if (c == '"') {
            i++;
            for (;;) {
                const char *q = memchr(s + i, '"', n - i);
                if (!q) return false;
                size_t k = (size_t)(q - s), bs = 0;
                while (k > i + bs && s[k - 1 - bs] == '\\') bs++;
                i = k + 1;
                if (bs % 2 == 0) break; /* not escaped */
            }
            continue;
        }
        if (c == '{' || c == '[') depth++;
        else if (c == '}' || c == ']') {
            if (--depth == 0) {
                *pos = i + 1;
                return true;
            }
        }
        i++;
    }
    return false;
}

static bool key_is(const char *s, size_t a, size_t b, const char *lit) {
    /* raw key text between the quotes (the keys looked for need no escapes) */
    size_t l = strlen(lit);
    return b - a == l + 2 && memcmp(s + a + 1, lit, l) == 0;
}

bool tok_json_find_model_members(const char *s, size_t n, const char *name, tok_json_span *vocab,
                                 tok_json_span *merges, kld_error *err) {
    memset(vocab, 0, sizeof *vocab);
    memset(merges, 0, sizeof *merges);
    size_t i = tok_json_ws(s, n, 0);
    if (i >= n || s[i] != '{') {
        kld_fail(err, KLD_ERR_FORMAT, "%s: not a JSON object", name);
        return false;
    }
    i++;
    bool first = true;
    for (;;) {
        i = tok_json_ws(s, n, i);
        if (i < n && s[i] == '}' && first) return true;
        size_t ka = i;
        if (!tok_json_string(s, n, &i, NULL)) break;
        size_t kb = i;
        i = tok_json_ws(s, n, i);
        if (i >= n || s[i] != ':') break;
        i = tok_json_ws(s, n, i + 1);
        if (key_is(s, ka, kb, "model") && i < n && s[i] == '{') {
            /* walk the model object, noting vocab and merges */
            i = tok_json_ws(s, n, i + 1);
            bool mfirst = true;
            bool ok = true;
            for (;;) {
                i = tok_json_ws(s, n, i);
                if (i < n && s[i] == '}' && mfirst) {
                    i++;
                    break;
                }
                size_t a = i;
                if (!tok_json_string(s, n, &i, NULL)) {
                    ok = false;
                    break;
                }
                size_t b = i;
                i = tok_json_ws(s, n, i);
                if (i >= n || s[i] != ':') {
                    ok = false;
                    break;
                }
                i = tok_json_ws(s, n, i + 1);
                size_t vs = i;
                bool big = key_is(s, a, b, "vocab") || key_is(s, a, b, "merges");
                if (!(big ? skip_fast(s, n, &i) : tok_json_skip(s, n, &i, 2))) {
                    ok = false;
                    break;
                }
                if (key_is(s, a, b, "vocab")) *vocab = (tok_json_span){vs, i};
                if (key_is(s, a, b, "merges")) *merges = (tok_json_span){vs, i};
                i = tok_json_ws(s, n, i);
                mfirst = false;
                if (i < n && s[i] == ',') {
                    i++;
                    continue;
                }
                if (i < n && s[i] == '}') {
                    i++;
                    break;
                }
                ok = false;
                break;
            }
            if (!ok) break;
        } else if (!tok_json_skip(s, n, &i, 1)) {
            break;
        }
        first = false;
        i = tok_json_ws(s, n, i);
        if (i < n && s[i] == ',') {
            i++;
            continue;
        }
        if (i < n && s[i] == '}') return true;
        break;
    }
    kld_fail(err, KLD_ERR_FORMAT, "%s: invalid JSON near byte %zu", name, i);
    return false;
}
