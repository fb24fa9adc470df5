/* tok_hash.c — open-addressing hash tables for vocabulary strings and BPE
 * merge pairs (see tok_hash.h). */
#include "tokenizer/tok_hash.h"

#include <stdlib.h>
#include <string.h>

/* A multiply-xorshift hash over 8-byte words: vocabulary pieces are short,
 * so speed per call matters more than resistance to crafted keys. */
uint64_t tok_hash_bytes(const void *p, size_t n) {
    const unsigned char *s = p;
    uint64_t h = 0x243F6A8885A308D3ull ^ (n * 0x9E3779B97F4A7C15ull);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
        h ^= h >> 31;
        s += 8;
        n -= 8;
    }
    uint64_t w = 0;
    for (size_t i = 0; i < n; i++) w |= (uint64_t)s[i] << (8 * i);
    h = (h ^ w) * 0x94D049BB133111EBull;
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 32;
    return h;
}

static uint32_t capacity_for(size_t expected) {
    size_t cap = 16;
    while (cap < expected * 2 && cap < ((size_t)1 << 31)) cap <<= 1;
    return (uint32_t)cap;
}

bool tok_strmap_init(tok_strmap *m, size_t expected) {
    memset(m, 0, sizeof *m);
    uint32_t cap = capacity_for(expected);
    m->slots = malloc((size_t)cap * sizeof *m->slots);
    if (!m->slots) return false;
    for (uint32_t i = 0; i < cap; i++) m->slots[i].value = -1;
    m->mask = cap - 1;
    return true;
}

void tok_strmap_free(tok_strmap *m) {
    free(m->slots);
    free(m->arena);
    memset(m, 0, sizeof *m);
}

void tok_strmap_clear(tok_strmap *m) {
    if (!m->slots) return;
    for (uint32_t i = 0; i <= m->mask; i++) m->slots[i].value = -1;
    m->count = 0;
    m->arena_len = 0;
}

static uint32_t make_tag(uint64_t h, size_t len) {
    return ((uint32_t)h & ~0xFu) | (len <= 8 ? (uint32_t)len : 15u);
}

static uint64_t inline_key(const char *key, size_t len) {
    uint64_t w = 0;
    memcpy(&w, key, len);
    return w;
}

static bool key_equal(const tok_strmap *m, const tok_strmap_slot *s, const char *key, size_t len,
                      uint64_t inl) {
    if (len <= 8) return s->key.inl == inl;
    return s->key.ext.len == len && memcmp(m->arena + s->key.ext.off, key, len) == 0;
}

/* The probe start uses the hash bits above the length code. */
static inline uint32_t probe_start(uint32_t tag, uint32_t mask) { return (tag >> 4) & mask; }

static bool grow(tok_strmap *m) {
    uint32_t old_cap = m->mask + 1;
    if (old_cap >= (1u << 31)) return false;
    uint32_t cap = old_cap * 2;
    tok_strmap_slot *slots = malloc((size_t)cap * sizeof *slots);
    if (!slots) return false;
    for (uint32_t i = 0; i < cap; i++) slots[i].value = -1;
    for (uint32_t i = 0; i < old_cap; i++) {
        const tok_strmap_slot *s = &m->slots[i];
        if (s->value < 0) continue;
        uint32_t j = probe_start(s->tag, cap - 1);
        while (slots[j].value >= 0) j = (j + 1) & (cap - 1);
        slots[j] = *s;
    }
    free(m->slots);
    m->slots = slots;
    m->mask = cap - 1;
    return true;
}

void tok_strmap_prefetch(const tok_strmap *m, uint64_t hash) {
    if (m->slots) __builtin_prefetch(&m->slots[probe_start(make_tag(hash, 0), m->mask)]);
}

int32_t tok_strmap_get(const tok_strmap *m, const char *key, size_t len) {
    return tok_strmap_get_hashed(m, key, len, tok_hash_bytes(key, len));
}

int32_t tok_strmap_get_hashed(const tok_strmap *m, const char *key, size_t len, uint64_t hash) {
    if (!m->slots) return -1;
    uint32_t tag = make_tag(hash, len);
    uint64_t inl = len <= 8 ? inline_key(key, len) : 0;
    for (uint32_t i = probe_start(tag, m->mask);; i = (i + 1) & m->mask) {
        const tok_strmap_slot *s = &m->slots[i];
        if (s->value < 0) return -1;
        if (s->tag == tag && key_equal(m, s, key, len, inl)) return s->value;
    }
}

bool tok_strmap_put(tok_strmap *m, const char *key, size_t len, int32_t value, bool overwrite,
                    bool *existed) {
    if (existed) *existed = false;
    if (len > UINT32_MAX) return false;
    if ((size_t)(m->count + 1) * 2 > (size_t)m->mask + 1 && !grow(m)) return false;
    uint32_t tag = make_tag(tok_hash_bytes(key, len), len);
    uint64_t inl = len <= 8 ? inline_key(key, len) : 0;
    uint32_t i = probe_start(tag, m->mask);
    for (;; i = (i + 1) & m->mask) {
        tok_strmap_slot *s = &m->slots[i];
        if (s->value < 0) break;
        if (s->tag == tag && key_equal(m, s, key, len, inl)) {
            if (existed) *existed = true;
            if (overwrite) s->value = value;
            return true;
        }
    }
    tok_strmap_slot *s = &m->slots[i];
    if (len <= 8) {
        s->key.inl = inl;
    } else {
        if (m->arena_len + len > m->arena_cap) {
            size_t cap = m->arena_cap ? m->arena_cap : 4096;
            while (cap < m->arena_len + len) cap *= 2;
            if (cap > UINT32_MAX) return false;
            char *a = realloc(m->arena, cap);
            if (!a) return false;
            m->arena = a;
            m->arena_cap = cap;
        }
        memcpy(m->arena + m->arena_len, key, len);
        s->key.ext.off = (uint32_t)m->arena_len;
        s->key.ext.len = (uint32_t)len;
        m->arena_len += len;
    }
    s->tag = tag;
    s->value = value;
    m->count++;
    return true;
}

bool tok_pairmap_init(tok_pairmap *m, size_t expected) {
    memset(m, 0, sizeof *m);
    uint64_t cap = 16;
    while (cap < (uint64_t)expected * 2) cap <<= 1;
    m->slots = malloc(cap * sizeof *m->slots);
    if (!m->slots) return false;
    for (uint64_t i = 0; i < cap; i++) m->slots[i].key = UINT64_MAX;
    m->mask = cap - 1;
    return true;
}

void tok_pairmap_free(tok_pairmap *m) {
    free(m->slots);
    memset(m, 0, sizeof *m);
}

static bool pair_grow(tok_pairmap *m) {
    uint64_t old_cap = m->mask + 1, cap = old_cap * 2;
    tok_pairmap_slot *slots = malloc(cap * sizeof *slots);
    if (!slots) return false;
    for (uint64_t i = 0; i < cap; i++) slots[i].key = UINT64_MAX;
    for (uint64_t i = 0; i < old_cap; i++) {
        const tok_pairmap_slot *s = &m->slots[i];
        if (s->key == UINT64_MAX) continue;
        uint64_t h = s->key * 0x9E3779B97F4A7C15ull;
        h ^= h >> 29;
        uint64_t j = h & (cap - 1);
        while (slots[j].key != UINT64_MAX) j = (j + 1) & (cap - 1);
        slots[j] = *s;
    }
    free(m->slots);
    m->slots = slots;
    m->mask = cap - 1;
    return true;
}

void tok_pairmap_prefetch(const tok_pairmap *m, int32_t a, int32_t b) {
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    h ^= h >> 29;
    __builtin_prefetch(&m->slots[h & m->mask]);
}

bool tok_pairmap_put(tok_pairmap *m, int32_t a, int32_t b, uint32_t rank, int32_t merged,
                     bool overwrite) {
    if ((m->count + 1) * 2 > m->mask + 1 && !pair_grow(m)) return false;
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    h ^= h >> 29;
    uint64_t i = h & m->mask;
    for (;; i = (i + 1) & m->mask) {
        tok_pairmap_slot *s = &m->slots[i];
        if (s->key == key) {
            if (overwrite) {
                s->rank = rank;
                s->merged = merged;
            }
            return true;
        }
        if (s->key == UINT64_MAX) break;
    }
    m->slots[i].key = key;
    m->slots[i].rank = rank;
    m->slots[i].merged = merged;
    m->count++;
    return true;
}
