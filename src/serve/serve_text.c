/* serve_text.c — text the server returns: JSON strings must be valid
 * UTF-8, while a token can end inside a character (byte-fallback pieces),
 * so token strings that are not UTF-8 are spelt "bytes:\xNN" (as OpenAI's
 * API does) and texts get U+FFFD for each ill-formed byte. */
#include "serve/serve.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Length of the well-formed UTF-8 character at s (n bytes left), 0 if ill-formed. */
static size_t utf8_char(const unsigned char *s, size_t n) {
    const unsigned char c = s[0];
    size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (len == 0 || len > n) return 0;
    return kld_utf8_valid((const char *)s, len) ? len : 0;
}

char *kld_serve_utf8(const char *s, size_t n, size_t **char_at) {
    char *out = malloc(3 * n + 1); /* each byte at most U+FFFD's three */
    size_t *at = char_at ? malloc((n + 1) * sizeof *at) : NULL;
    if (!out || (char_at && !at)) {
        free(out);
        free(at);
        return NULL;
    }
    size_t o = 0, chars = 0;
    for (size_t i = 0; i < n;) {
        size_t len = utf8_char((const unsigned char *)s + i, n - i);
        if (len) {
            memcpy(out + o, s + i, len);
            o += len;
        } else {
            memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
            len = 1;
        }
        for (size_t j = 0; j < len && at; j++) at[i + j] = chars;
        chars++;
        i += len;
    }
    if (at) at[n] = chars;
    out[o] = 0;
    if (char_at) *char_at = at;
    return out;
}

char *kld_serve_decode(const kld_tokenizer *tok, const int32_t *ids, size_t n, size_t *len) {
    char *text = NULL;
    kld_error err = {0};
    *len = 0;
    if (n == 0) return kld_strdup("");
    if (kld_tok_decode(tok, ids, n, KLD_TOK_SKIP_SPECIAL, &text, len, &err) != KLD_OK) return NULL;
    return text;
}

static char *as_bytes_text(const char *s, size_t n) {
    if (kld_utf8_valid(s, n)) return kld_strndup(s, n);
    char *out = malloc(6 + 4 * n + 1);
    if (!out) return NULL;
    size_t o = (size_t)sprintf(out, "bytes:");
    for (size_t i = 0; i < n; i++) o += (size_t)sprintf(out + o, "\\x%02x", (unsigned char)s[i]);
    return out;
}

char *kld_serve_token_string(const char *raw, size_t len) { return as_bytes_text(raw, len); }

/* The bytes decode(ids[from..b)) adds to decode(ids[from..a)) (a <= b):
 * decoders drop a leading space at the start of a text and byte pieces
 * merge with their neighbours, so text is taken in context. */
static char *added_bytes(const kld_tokenizer *tok, const int32_t *ids, size_t from, size_t a, size_t b,
                         size_t *len) {
    size_t n_before = 0, n_with = 0;
    char *before = kld_serve_decode(tok, ids + from, a - from, &n_before);
    char *with = kld_serve_decode(tok, ids + from, b - from, &n_with);
    char *out = NULL;
    if (before && with && n_with >= n_before && !memcmp(before, with, n_before)) {
        *len = n_with - n_before;
        memmove(with, with + n_before, *len);
        with[*len] = 0;
        out = with;
        with = NULL;
    } else if (with) { /* not a prefix: the new tokens decoded alone */
        out = kld_serve_decode(tok, ids + a, b - a, len);
    }
    free(before);
    free(with);
    return out;
}

char *kld_serve_token_bytes(const kld_tokenizer *tok, const int32_t *ids, size_t t, size_t *len,
                            bool *special) {
    *special = kld_tok_type(tok, ids[t]) == KLD_TOKEN_CONTROL;
    if (*special) { /* skipped in texts; its piece names it in token lists */
        const char *piece = kld_tok_piece(tok, ids[t], len);
        return piece ? kld_strndup(piece, *len) : (*len = 0, kld_strdup(""));
    }
    return added_bytes(tok, ids, t >= 8 ? t - 8 : 0, t, t + 1, len);
}

char *kld_serve_completion_bytes(const kld_tokenizer *tok, const int32_t *ids, size_t n_prompt, size_t n,
                                 size_t *len) {
    return added_bytes(tok, ids, n_prompt >= 8 ? n_prompt - 8 : 0, n_prompt, n, len);
}
