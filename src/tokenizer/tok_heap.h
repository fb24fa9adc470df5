/* tok_heap.h — the binary min-heap both BPE merge loops use (internal):
 * TOK_DEFINE_HEAP(prefix, type, less) defines prefix_push / prefix_pop over
 * a caller-owned array, ordered by less(a, b) ("a pops first"). A macro
 * rather than void* + comparator, because this is the tokenizer's hot loop. */
#ifndef KLD_TOK_HEAP_H
#define KLD_TOK_HEAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>

#define TOK_DEFINE_HEAP(prefix, type, less)                                                   \
    static void prefix##_push(type *h, size_t *n, type p) {                                   \
        size_t i = (*n)++;                                                                    \
        while (i > 0) {                                                                       \
            size_t parent = (i - 1) / 2;                                                      \
            if (!less(&p, &h[parent])) break;                                                 \
            h[i] = h[parent];                                                                 \
            i = parent;                                                                       \
        }                                                                                     \
        h[i] = p;                                                                             \
    }                                                                                         \
    static type prefix##_pop(type *h, size_t *n) {                                            \
        type top = h[0];                                                                      \
        type last = h[--(*n)];                                                                \
        size_t i = 0;                                                                         \
        for (;;) {                                                                            \
            size_t c = 2 * i + 1;                                                             \
            if (c >= *n) break;                                                               \
            if (c + 1 < *n && less(&h[c + 1], &h[c])) c++;                                    \
            if (!less(&h[c], &last)) break;                                                   \
            h[i] = h[c];                                                                      \
            i = c;                                                                            \
        }                                                                                     \
        if (*n > 0) h[i] = last;                                                              \
        return top;                                                                           \
    }

/* Grows *p (of *cap elements of elem bytes) to hold at least need, doubling
 * from 64; false when out of memory (then *p is unchanged). */
static inline bool tok_grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (*cap >= need) return true;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q) return false;
    *p = q;
    *cap = c;
    return true;
}

#endif
