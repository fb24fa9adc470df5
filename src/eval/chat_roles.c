/* chat_roles.c — which turn each token of a rendered conversation belongs
 * to (kld_chat_roles, strata.h): the role strata of chat corpora. */
#include "eval/strata.h"

#include <stdlib.h>
#include <string.h>

static int role_code(const char *r) {
    if (!r) return KLD_ROLE_NONE;
    if (!strcmp(r, "system") || !strcmp(r, "developer")) return KLD_ROLE_SYSTEM;
    if (!strcmp(r, "user")) return KLD_ROLE_USER;
    if (!strcmp(r, "assistant")) return KLD_ROLE_ASSISTANT;
    if (!strcmp(r, "tool") || !strcmp(r, "ipython") || !strcmp(r, "function")) return KLD_ROLE_TOOL;
    return KLD_ROLE_NONE;
}

/* The tokens' texts one after the other; start[i] where token i begins. */
static char *decoded(const kld_tokenizer *tok, const int32_t *ids, size_t n, size_t *start, size_t *len) {
    size_t cap = 64, used = 0;
    char *d = malloc(cap);
    for (size_t i = 0; d && i < n; i++) {
        start[i] = used;
        char *t = NULL;
        size_t tn = 0;
        if (kld_tok_decode(tok, &ids[i], 1, KLD_TOK_DECODE_INNER, &t, &tn, NULL) != KLD_OK) tn = 0;
        if (used + tn + 1 > cap) {
            cap = 2 * (used + tn + 1);
            char *g = realloc(d, cap);
            if (!g) {
                free(d);
                free(t);
                return NULL;
            }
            d = g;
        }
        if (tn) memcpy(d + used, t, tn);
        used += tn;
        free(t);
    }
    if (d) d[used] = '\0';
    *len = used;
    return d;
}

/* The first occurrence of needle[0..m) in hay[from..n). */
static const char *find(const char *hay, size_t n, size_t from, const char *needle, size_t m) {
    if (m == 0 || from > n || n - from < m) return NULL;
    return memmem(hay + from, n - from, needle, m);
}

void kld_chat_roles(const kld_tokenizer *tok, const int32_t *ids, size_t n, const json_t *messages,
                    uint8_t *roles) {
    memset(roles, KLD_ROLE_NONE, n);
    size_t *start = malloc((n + 1) * sizeof *start), len = 0;
    char *d = start ? decoded(tok, ids, n, start, &len) : NULL;
    if (!d) {
        free(start);
        return; /* out of memory: no roles, never wrong ones */
    }
    start[n] = len;
    size_t cursor = 0, tok_i = 0;
    for (size_t m = 0; m < json_array_size(messages); m++) {
        const json_t *msg = json_array_get(messages, m);
        int role = role_code(json_string_value(json_object_get(msg, "role")));
        const char *content = json_string_value(json_object_get(msg, "content"));
        if (!content) continue;
        /* templates often trim the content */
        size_t cn = strlen(content);
        while (cn && strchr(" \t\r\n", *content)) content++, cn--;
        while (cn && strchr(" \t\r\n", content[cn - 1])) cn--;
        const char *at = find(d, len, cursor, content, cn);
        if (!at) continue;
        size_t b = (size_t)(at - d), e = b + cn;
        while (tok_i < n && start[tok_i + 1] <= b) tok_i++; /* the token holding the content's first byte */
        size_t i = tok_i;
        for (; i < n && start[i] < e; i++) roles[i] = (uint8_t)role;
        /* the turn's end: a control token right after the content */
        if (i < n && kld_tok_type(tok, ids[i]) == KLD_TOKEN_CONTROL) roles[i] = (uint8_t)role;
        cursor = e;
        tok_i = i;
    }
    free(d);
    free(start);
}
