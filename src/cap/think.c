/* think.c — the thinking block of reasoning models (Qwen3 style:
 * "<think>…</think>" before the answer, opened by the model or already by
 * the generation prompt). Responses are scored without it, as the mlx-bun
 * seed's IFEval scores them after stripThinking (the seed's rule itself is
 * not in the shared copy; this one follows Qwen's own answer parsing: what
 * comes after the last "</think>"). */
#include "cap/sampler.h"

#include <ctype.h>
#include <stdlib.h>

static const char *last_of(const char *text, const char *needle) {
    const char *last = NULL;
    for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle)) last = p;
    return last;
}

char *kld_cap_strip_thinking(const char *text, bool opened_in_prompt) {
    static const char open[] = "<think>", close[] = "</think>";
    const char *c = last_of(text, close), *from = text;
    size_t len = strlen(text);
    if (c) {
        from = c + sizeof close - 1;
        len = strlen(from);
    } else {
        const char *o = opened_in_prompt ? text : strstr(text, open);
        if (!o) return kld_strdup(text);
        len = (size_t)(o - text);
    }
    while (len > 0 && isspace((unsigned char)*from)) from++, len--;
    return kld_strndup(from, len);
}

bool kld_cap_thinking_open(const char *text, bool given_open) {
    const char *o = last_of(text, "<think>"), *c = last_of(text, "</think>");
    if (!o && !c) return given_open;
    return o && (!c || o > c);
}
