/* hashhop.c — HashHop problems (see hashhop.h). Randomness is splitmix64
 * from the seed, so a seed names a problem; the upstream generator's
 * Python/NumPy stream is not reproduced (only its format is specified). */
#include "cap/hashhop.h"

#include <stdio.h>
#include <stdlib.h>

static uint64_t next_u64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t below(uint64_t *s, uint64_t n) { /* unbiased in [0, n) */
    uint64_t lim = UINT64_MAX - UINT64_MAX % n;
    for (;;) {
        uint64_t v = next_u64(s);
        if (v < lim) return v % n;
    }
}

static const char letters[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";

static int cmp_hash(const void *a, const void *b, void *len) {
    return memcmp(*(char *const *)a, *(char *const *)b, *(size_t *)len);
}

void kld_hashhop_free(kld_hashhop_sample *s) {
    free(s->prompt);
    free(s->completion);
    free(s->header);
    if (s->targets)
        for (size_t i = 0; i < s->n_chains; i++) free(s->targets[i]);
    free(s->targets);
    if (s->keys) free(s->keys[0]); /* the block all keys point into */
    free(s->keys);
    memset(s, 0, sizeof *s);
}

kld_status kld_hashhop_generate(const kld_hashhop_params *p, uint64_t seed, kld_hashhop_sample *out,
                                kld_error *err) {
    memset(out, 0, sizeof *out);
    if (p->hops < 1 || p->hash_len < 1 || p->hash_len > 64 || p->n_chars == 0 || p->n_chars > (1u << 28))
        return kld_fail(err, KLD_ERR_ARG, "hashhop: need hops >= 1, 1 <= hash length <= 64, 0 < n_chars <= 2^28 "
                        "(got %d, %d, %zu)", p->hops, p->hash_len, p->n_chars);
    const size_t H = (size_t)p->hops, L = (size_t)p->hash_len;
    const size_t C = (p->n_chars + (2 * L + 3) * H - 1) / ((2 * L + 3) * H);
    if (p->queries > C)
        return kld_fail(err, KLD_ERR_ARG, "hashhop: %zu queries but only %zu chains", p->queries, C);
    const size_t n_hash = C * (H + 1);
    /* one pool: hash h of chain j at (j*(H+1)+h)*(L+1), NUL-terminated */
    char *pool = malloc(n_hash * (L + 1));
    char **sorted = malloc(n_hash * sizeof *sorted);
    size_t *order = malloc(C * H * sizeof *order);
    out->keys = calloc(C, sizeof *out->keys);
    out->targets = calloc(C, sizeof *out->targets);
    if (!pool || !sorted || !order || !out->keys || !out->targets) {
        free(pool), free(sorted), free(order);
        kld_hashhop_free(out);
        return kld_fail(err, KLD_ERR_NOMEM, "hashhop: out of memory");
    }
    uint64_t rng = seed;
    for (size_t i = 0; i < n_hash; i++) {
        for (size_t c = 0; c < L; c++) pool[i * (L + 1) + c] = letters[below(&rng, 52)];
        pool[i * (L + 1) + L] = '\0';
    }
    /* redraw collisions until every hash is distinct */
    for (int round = 0;; round++) {
        for (size_t i = 0; i < n_hash; i++) sorted[i] = pool + i * (L + 1);
        size_t len = L;
        qsort_r(sorted, n_hash, sizeof *sorted, cmp_hash, &len);
        bool dup = false;
        for (size_t i = 1; i < n_hash; i++)
            if (!memcmp(sorted[i - 1], sorted[i], L)) {
                dup = true;
                for (size_t c = 0; c < L; c++) sorted[i][c] = letters[below(&rng, 52)];
            }
        if (!dup) break;
        if (round > 1000) {
            free(pool), free(sorted), free(order);
            kld_hashhop_free(out);
            return kld_fail(err, KLD_ERR_ARG, "hashhop: cannot draw %zu distinct hashes of %zu letters", n_hash, L);
        }
    }
    free(sorted);
#define HASH(j, h) (pool + ((j) * (H + 1) + (h)) * (L + 1))
    /* lines: (chain, level) pairs in one global shuffle (Fisher-Yates) */
    for (size_t i = 0; i < C * H; i++) order[i] = i;
    for (size_t i = C * H; i > 1; i--) {
        size_t k = (size_t)below(&rng, i);
        size_t t = order[i - 1];
        order[i - 1] = order[k];
        order[k] = t;
    }
    size_t plen = C * H * (2 * L + 3) + 2 * C + C * H;
    out->prompt = malloc(plen + 1);
    char *w = out->prompt;
    for (size_t i = 0; w && i < C * H; i++) {
        size_t j = order[i] / H, k = order[i] % H;
        bool last = k == H - 1;
        w += sprintf(w, "%s%s = %s%s%s", i ? "\n" : "", HASH(j, k), last ? "'" : "", HASH(j, k + 1), last ? "'" : "");
    }
    free(order);
    out->n_chains = C;
    out->n_queries = p->queries;
    size_t tlen = p->cot ? H * (L + 3) : L + 1;
    bool ok = out->prompt != NULL;
    for (size_t j = 0; ok && j < C; j++) {
        char *t = malloc(tlen + 1);
        if (!t) {
            ok = false;
            break;
        }
        if (p->cot) {
            char *q = t;
            for (size_t h = 1; h <= H; h++) q += sprintf(q, "%s%s", h > 1 ? " = " : "", HASH(j, h));
        } else snprintf(t, tlen + 1, "%s", HASH(j, H));
        out->targets[j] = t;
    }
    /* keys: copies, so that the pool can go */
    char *keys = ok ? malloc(C * (L + 1)) : NULL;
    if (keys) {
        for (size_t j = 0; j < C; j++) {
            memcpy(keys + j * (L + 1), HASH(j, 0), L + 1);
            out->keys[j] = keys + j * (L + 1);
        }
    }
#undef HASH
    free(pool);
    if (!keys) {
        kld_hashhop_free(out);
        return kld_fail(err, KLD_ERR_NOMEM, "hashhop: out of memory");
    }
    char head[96];
    snprintf(head, sizeof head, "COMPLETION:\nHops=%d\n\nCoT=%s\n\n", p->hops, p->cot ? "True" : "False");
    out->header = kld_strdup(head);
    size_t clen = strlen(head) + p->queries * (L + 6 + tlen) + 2;
    out->completion = malloc(clen);
    if (!out->header || !out->completion) {
        kld_hashhop_free(out);
        return kld_fail(err, KLD_ERR_NOMEM, "hashhop: out of memory");
    }
    w = out->completion + sprintf(out->completion, "%s", head);
    for (size_t q = 0; q < p->queries; q++)
        w += sprintf(w, "%s%s = '%s'", q ? "\n" : "", out->keys[q], out->targets[q]);
    sprintf(w, "\n");
    return KLD_OK;
}

char *kld_hashhop_query_text(const kld_hashhop_sample *s, size_t q) {
    if (q >= s->n_queries) return NULL;
    size_t n = strlen(s->prompt) + strlen(s->header) + strlen(s->keys[q]) + 8;
    char *t = malloc(n);
    if (t) snprintf(t, n, "%s\n%s%s = '", s->prompt, s->header, s->keys[q]);
    return t;
}

bool kld_hashhop_correct(const kld_hashhop_sample *s, size_t q, const char *continuation) {
    if (q >= s->n_queries || !continuation) return false;
    const char *end = strchr(continuation, '\'');
    size_t n = end ? (size_t)(end - continuation) : strlen(continuation);
    return end && n == strlen(s->targets[q]) && !memcmp(continuation, s->targets[q], n);
}
