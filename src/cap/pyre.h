/* pyre.h — the few Python `re` and `str` operations the IFEval verifiers
 * are written in, on UTF-8 text: PCRE2 with UTF and Unicode properties
 * stands in for Python's str patterns; the str helpers follow CPython's
 * definitions (isspace, isupper, islower, lower, strip). */
#ifndef KLD_CAP_PYRE_H
#define KLD_CAP_PYRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { PYRE_I = 1, PYRE_M = 2 };

/* Number of non-overlapping matches (re.findall's length); -1 when the
 * pattern does not compile. */
long pyre_count(const char *pattern, int flags, const char *text);
/* re.search: 1 found, 0 not, -1 bad pattern. */
int pyre_search(const char *pattern, int flags, const char *text);
/* Calls fn for each non-overlapping match span (byte offsets) in order;
 * returns the match count or -1. */
long pyre_each(const char *pattern, int flags, const char *text,
               void (*fn)(void *ctx, size_t start, size_t end), void *ctx);

/* Decodes one code point at s (n bytes left); returns its length (1 for an
 * invalid byte, decoded as U+FFFD). */
size_t py_decode(const char *s, size_t n, int32_t *cp);
bool py_isspace(int32_t cp);
/* str.isupper / str.islower. */
bool py_isupper(const char *s, size_t n);
bool py_islower(const char *s, size_t n);
/* str.lower() (per code point), malloc'd; NULL on allocation failure. */
char *py_lower(const char *s, size_t n, size_t *out_len);
/* str.strip(): the span without leading/trailing whitespace. */
void py_strip(const char *s, size_t n, size_t *start, size_t *end);
/* Removes every byte `c` (ASCII) from s, malloc'd. */
char *py_remove_char(const char *s, char c);

#endif
