/* vocab_train.c — learns a small SentencePiece-BPE vocabulary from text:
 * words are '▁'-prefixed runs of characters; the most frequent adjacent
 * pair of symbols is merged until the vocabulary is full or no pair occurs
 * twice. Deterministic (ties go to the smaller pair of symbol ids). */
#include "synth/synth.h"

#include <stdio.h>
#include <stdlib.h>

#define SPACE_MARK "\xe2\x96\x81" /* U+2581 '▁' */

typedef struct strtab { /* symbol strings with a hash index */
    char **s;
    int32_t n, cap;
    int32_t *slots;
    uint32_t n_slots;
} strtab;

typedef struct word {
    int32_t *sym;
    int32_t len;
    int64_t count;
} word;

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

static bool strtab_grow(strtab *t) {
    uint32_t n_slots = t->n_slots ? 2 * t->n_slots : 1024;
    int32_t *slots = malloc(n_slots * sizeof *slots);
    if (!slots) return false;
    for (uint32_t i = 0; i < n_slots; i++) slots[i] = -1;
    for (int32_t k = 0; k < t->n; k++) {
        uint32_t h = (uint32_t)hash_bytes(t->s[k], strlen(t->s[k])) & (n_slots - 1);
        while (slots[h] >= 0) h = (h + 1) & (n_slots - 1);
        slots[h] = k;
    }
    free(t->slots);
    t->slots = slots;
    t->n_slots = n_slots;
    return true;
}

/* Id of the string s[0..n), added when absent; -1 on allocation failure. */
static int32_t strtab_id(strtab *t, const char *s, size_t n) {
    if ((uint32_t)(t->n + 1) * 2 > t->n_slots && !strtab_grow(t)) return -1;
    uint32_t h = (uint32_t)hash_bytes(s, n) & (t->n_slots - 1);
    while (t->slots[h] >= 0) {
        const char *c = t->s[t->slots[h]];
        if (strlen(c) == n && memcmp(c, s, n) == 0) return t->slots[h];
        h = (h + 1) & (t->n_slots - 1);
    }
    if (t->n == t->cap) {
        int32_t cap = t->cap ? 2 * t->cap : 1024;
        char **p = realloc(t->s, (size_t)cap * sizeof *p);
        if (!p) return -1;
        t->s = p;
        t->cap = cap;
    }
    t->s[t->n] = kld_strndup(s, n);
    if (!t->s[t->n]) return -1;
    t->slots[h] = t->n;
    return t->n++;
}

static void strtab_free(strtab *t) {
    for (int32_t i = 0; i < t->n; i++) free(t->s[i]);
    free(t->s);
    free(t->slots);
}

static size_t utf8_len(unsigned char c) {
    return c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
}

typedef struct pair_count {
    uint64_t key; /* a << 32 | b */
    int64_t count;
} pair_count;

/* Counts adjacent pairs over all words; returns the best (most frequent,
 * then smallest key) or count 0. */
static pair_count best_pair(const word *words, size_t n_words, pair_count *tab, uint32_t n_tab) {
    memset(tab, 0, n_tab * sizeof *tab);
    pair_count best = {0, 0};
    for (size_t w = 0; w < n_words; w++)
        for (int32_t i = 0; i + 1 < words[w].len; i++) {
            uint64_t key = ((uint64_t)(uint32_t)words[w].sym[i] << 32) | (uint32_t)words[w].sym[i + 1];
            uint32_t h = (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> 40) & (n_tab - 1);
            while (tab[h].count && tab[h].key != key) h = (h + 1) & (n_tab - 1);
            tab[h].key = key;
            tab[h].count += words[w].count;
            if (tab[h].count > best.count || (tab[h].count == best.count && key < best.key))
                best = tab[h];
        }
    return best;
}

static void merge_pair(word *words, size_t n_words, int32_t a, int32_t b, int32_t ab) {
    for (size_t w = 0; w < n_words; w++) {
        int32_t o = 0;
        for (int32_t i = 0; i < words[w].len; i++) {
            if (i + 1 < words[w].len && words[w].sym[i] == a && words[w].sym[i + 1] == b) {
                words[w].sym[o++] = ab;
                i++;
            } else {
                words[w].sym[o++] = words[w].sym[i];
            }
        }
        words[w].len = o;
    }
}

/* Splits the corpus into '▁'-prefixed words, counted (same word = same
 * entry, found through a second string table). */
static kld_status collect_words(const char *text, size_t len, strtab *syms, word **out,
                                size_t *n_out, kld_error *err) {
    strtab wtab = {0};
    word *words = NULL;
    size_t n_words = 0, cap = 0;
    kld_status st = KLD_OK;
    size_t pos = 0;
    char buf[4096];
    while (pos < len) {
        size_t end = pos;
        while (end < len && text[end] != '\n') end++;
        bool comment = text[pos] == '#';
        size_t i = pos;
        while (!comment && i < end) {
            while (i < end && text[i] == ' ') i++;
            if (i >= end) break;
            size_t j = i;
            while (j < end && text[j] != ' ') j++;
            size_t wl = j - i < sizeof buf - 4 ? j - i : sizeof buf - 4;
            memcpy(buf, SPACE_MARK, 3);
            memcpy(buf + 3, text + i, wl);
            int32_t wid = strtab_id(&wtab, buf, wl + 3);
            if (wid < 0) { st = KLD_ERR_NOMEM; goto done; }
            if ((size_t)wid == n_words) {
                if (n_words == cap) {
                    cap = cap ? 2 * cap : 1024;
                    word *p = realloc(words, cap * sizeof *p);
                    if (!p) { st = KLD_ERR_NOMEM; goto done; }
                    words = p;
                }
                word *w = &words[n_words++];
                w->count = 0;
                w->len = 0;
                w->sym = malloc((wl + 3) * sizeof *w->sym);
                if (!w->sym) { st = KLD_ERR_NOMEM; goto done; }
                for (size_t k = 0; k < wl + 3;) {
                    size_t cl = utf8_len((unsigned char)buf[k]);
                    if (k + cl > wl + 3) cl = wl + 3 - k;
                    int32_t sid = strtab_id(syms, buf + k, cl);
                    if (sid < 0) { st = KLD_ERR_NOMEM; goto done; }
                    w->sym[w->len++] = sid;
                    k += cl;
                }
            }
            words[wid].count++;
            i = j;
        }
        pos = end + 1;
    }
done:
    strtab_free(&wtab);
    *out = words;
    *n_out = n_words;
    if (st) return kld_fail(err, st, "vocabulary training: out of memory");
    return KLD_OK;
}

kld_status kld_synth_vocab_train(const char *text, size_t len, int32_t n_target,
                                 kld_synth_vocab *out, kld_error *err) {
    memset(out, 0, sizeof *out);
    strtab syms = {0};
    word *words = NULL;
    size_t n_words = 0;
    pair_count *tab = NULL;
    kld_status st = collect_words(text, len, &syms, &words, &n_words, err);
    if (st) goto done;
    int32_t n_chars = syms.n;
    int32_t fixed = 3 + 256;
    if (n_target < fixed + n_chars) {
        st = kld_fail(err, KLD_ERR_ARG,
                      "vocabulary of %d is too small: the corpus needs %d special+byte tokens and "
                      "%d characters",
                      n_target, fixed, n_chars);
        goto done;
    }
    size_t total_syms = 0;
    for (size_t w = 0; w < n_words; w++) total_syms += (size_t)words[w].len;
    uint32_t n_tab = 1024;
    while (n_tab < 2 * total_syms) n_tab *= 2;
    tab = malloc(n_tab * sizeof *tab);
    int32_t *merged = malloc((size_t)n_target * sizeof *merged);
    if (!tab || !merged) {
        free(merged);
        st = kld_fail(err, KLD_ERR_NOMEM, "vocabulary training: out of memory");
        goto done;
    }
    int32_t n_merges = 0;
    while (fixed + syms.n < n_target) {
        pair_count best = best_pair(words, n_words, tab, n_tab);
        if (best.count < 2) break;
        int32_t a = (int32_t)(best.key >> 32), b = (int32_t)(best.key & 0xffffffffu);
        char cat[8192];
        snprintf(cat, sizeof cat, "%s%s", syms.s[a], syms.s[b]);
        int32_t before = syms.n;
        int32_t ab = strtab_id(&syms, cat, strlen(cat));
        if (ab < 0) {
            free(merged);
            st = kld_fail(err, KLD_ERR_NOMEM, "vocabulary training: out of memory");
            goto done;
        }
        merge_pair(words, n_words, a, b, ab);
        if (ab == before) merged[n_merges++] = ab; /* a new piece */
    }
    /* Pad to the requested size with unused tokens (type 5): tokenization
     * never produces them, but the model's output layer has their rows. */
    out->n = n_target;
    out->pieces = calloc((size_t)out->n, sizeof *out->pieces);
    out->scores = calloc((size_t)out->n, sizeof *out->scores);
    out->types = calloc((size_t)out->n, sizeof *out->types);
    if (!out->pieces || !out->scores || !out->types) {
        free(merged);
        st = kld_fail(err, KLD_ERR_NOMEM, "vocabulary training: out of memory");
        goto done;
    }
    static const char *special[3] = {"<unk>", "<s>", "</s>"};
    static const int32_t special_type[3] = {2, 3, 3};
    int32_t k = 0;
    for (int i = 0; i < 3; i++, k++) {
        out->pieces[k] = kld_strdup(special[i]);
        out->types[k] = special_type[i];
    }
    for (int i = 0; i < 256; i++, k++) {
        char b[8];
        snprintf(b, sizeof b, "<0x%02X>", i);
        out->pieces[k] = kld_strdup(b);
        out->types[k] = 6;
    }
    /* Merges score by rank (earlier = higher), characters below them all. */
    for (int32_t i = 0; i < n_merges; i++, k++) {
        out->pieces[k] = kld_strdup(syms.s[merged[i]]);
        out->scores[k] = (float)-i;
        out->types[k] = 1;
    }
    for (int32_t i = 0; i < n_chars; i++, k++) {
        out->pieces[k] = kld_strdup(syms.s[i]);
        out->scores[k] = (float)-(n_merges + i);
        out->types[k] = 1;
    }
    for (; k < out->n; k++) {
        char b[32];
        snprintf(b, sizeof b, "<unused%d>", k);
        out->pieces[k] = kld_strdup(b);
        out->scores[k] = -1e9f;
        out->types[k] = 5;
    }
    free(merged);
    for (int32_t i = 0; i < out->n; i++)
        if (!out->pieces[i]) {
            st = kld_fail(err, KLD_ERR_NOMEM, "vocabulary training: out of memory");
            goto done;
        }
done:
    if (st) kld_synth_vocab_free(out);
    free(tab);
    for (size_t w = 0; w < n_words; w++) free(words[w].sym);
    free(words);
    strtab_free(&syms);
    return st;
}

void kld_synth_vocab_free(kld_synth_vocab *v) {
    if (v->pieces)
        for (int32_t i = 0; i < v->n; i++) free(v->pieces[i]);
    free(v->pieces);
    free(v->scores);
    free(v->types);
    memset(v, 0, sizeof *v);
}
