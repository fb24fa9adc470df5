/* tok_hash.h — the tokenizer's two open-addressing hash tables: byte string
 * -> int32 (vocabulary lookups, word cache index) and (id, id) -> (rank,
 * merged id) (BPE merges). Linear probing, power-of-two capacity, load
 * factor <= 1/2; keys are copied into the table's own arena. */
#ifndef KLD_TOK_HASH_H
#define KLD_TOK_HASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Keys of up to 8 bytes are stored in the slot itself (zero padded), so
 * that a lookup of a typical vocabulary piece touches one cache line; the
 * low 4 bits of `tag` hold the key length, or 15 for a key in the arena. */
typedef struct tok_strmap_slot {
    uint32_t tag;  /* hash with the low 4 bits replaced by the length code */
    int32_t value; /* -1: empty slot */
    union {
        uint64_t inl;
        struct {
            uint32_t off, len;
        } ext;
    } key;
} tok_strmap_slot;

typedef struct tok_strmap {
    tok_strmap_slot *slots;
    uint32_t mask; /* capacity - 1 */
    uint32_t count;
    char *arena;
    size_t arena_len, arena_cap;
} tok_strmap;

uint64_t tok_hash_bytes(const void *p, size_t n);

/* expected: a size hint (entries). Returns false on allocation failure. */
bool tok_strmap_init(tok_strmap *m, size_t expected);
void tok_strmap_free(tok_strmap *m);
/* Inserts key -> value; when the key exists, keeps the old value unless
 * overwrite. *existed (may be NULL) says whether it was there. */
bool tok_strmap_put(tok_strmap *m, const char *key, size_t len, int32_t value, bool overwrite,
                    bool *existed);
/* The value for key, or -1. */
int32_t tok_strmap_get(const tok_strmap *m, const char *key, size_t len);
/* The same with the key's tok_hash_bytes already computed, and a prefetch
 * of the slot a lookup of that hash starts at (loaders batch lookups so
 * that their cache misses overlap). */
int32_t tok_strmap_get_hashed(const tok_strmap *m, const char *key, size_t len, uint64_t hash);
void tok_strmap_prefetch(const tok_strmap *m, uint64_t hash);
/* Empties the map, keeping its memory. */
void tok_strmap_clear(tok_strmap *m);

typedef struct tok_pairmap_slot {
    uint64_t key; /* UINT64_MAX: empty */
    uint32_t rank;
    int32_t merged;
} tok_pairmap_slot;

typedef struct tok_pairmap {
    tok_pairmap_slot *slots;
    uint64_t mask;
    uint64_t count;
} tok_pairmap;

bool tok_pairmap_init(tok_pairmap *m, size_t expected);
void tok_pairmap_free(tok_pairmap *m);
void tok_pairmap_prefetch(const tok_pairmap *m, int32_t a, int32_t b);
/* Keeps an existing entry unless overwrite. */
bool tok_pairmap_put(tok_pairmap *m, int32_t a, int32_t b, uint32_t rank, int32_t merged,
                     bool overwrite);
/* The entry for (a, b), or NULL. */
static inline const tok_pairmap_slot *tok_pairmap_get(const tok_pairmap *m, int32_t a, int32_t b) {
    if (!m->slots) return NULL;
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    h ^= h >> 29;
    for (uint64_t i = h & m->mask;; i = (i + 1) & m->mask) {
        const tok_pairmap_slot *s = &m->slots[i];
        if (s->key == key) return s;
        if (s->key == UINT64_MAX) return NULL;
    }
}

#endif
