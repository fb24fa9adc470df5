/* tok_vocab.c — the vocabulary: id -> piece, score and type; piece -> id;
 * and the derived byte tables (byte-fallback "<0xNN>" ids, and for
 * byte-level vocabularies the id of each byte's mapped character plus a
 * map from a token's raw bytes to its id). */
#include "tokenizer/tok_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

kld_status tok_vocab_init(tok_vocab *v, int32_t n, const char *name, kld_error *err) {
    memset(v, 0, sizeof *v);
    for (int i = 0; i < 256; i++) v->byte_fallback[i] = v->byte_char[i] = -1;
    if (n <= 0) return kld_fail(err, KLD_ERR_FORMAT, "%s: empty vocabulary", name);
    v->n = n;
    v->off = malloc((size_t)n * sizeof *v->off);
    v->len = calloc((size_t)n, sizeof *v->len);
    v->score = calloc((size_t)n, sizeof *v->score);
    v->type = calloc((size_t)n, sizeof *v->type);
    if (!v->off || !v->len || !v->score || !v->type || !tok_strmap_init(&v->map, (size_t)n)) {
        tok_vocab_free(v);
        return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory for %" PRId32 " tokens", name, n);
    }
    for (int32_t i = 0; i < n; i++) v->off[i] = UINT32_MAX;
    return KLD_OK;
}

void tok_vocab_free(tok_vocab *v) {
    free(v->off);
    free(v->len);
    free(v->score);
    free(v->type);
    free(v->arena);
    tok_strmap_free(&v->map);
    tok_strmap_free(&v->raw_map);
    memset(v, 0, sizeof *v);
}

kld_status tok_vocab_set(tok_vocab *v, int32_t id, const char *piece, size_t len, float score,
                         uint8_t type, bool allow_dup, const char *name, kld_error *err) {
    if (id < 0 || id >= v->n)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: token id %" PRId32 " outside 0..%" PRId32, name,
                        id, v->n - 1);
    if (v->off[id] != UINT32_MAX)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: token id %" PRId32 " assigned twice", name, id);
    if (len > UINT32_MAX / 2)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: token %" PRId32 " is too long", name, id);
    bool existed = false;
    if (!tok_strmap_put(&v->map, piece, len, id, false, &existed))
        return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", name);
    if (existed && !allow_dup)
        return kld_fail(err, KLD_ERR_FORMAT,
                        "%s: token %" PRId32 " '%.*s' duplicates token %" PRId32, name, id,
                        (int)(len > 64 ? 64 : len), piece, tok_strmap_get(&v->map, piece, len));
    if (v->arena_len + len > v->arena_cap) {
        size_t cap = v->arena_cap ? v->arena_cap : 1 << 16;
        while (cap < v->arena_len + len) cap *= 2;
        if (cap > UINT32_MAX)
            return kld_fail(err, KLD_ERR_FORMAT, "%s: vocabulary too large", name);
        char *a = realloc(v->arena, cap);
        if (!a) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", name);
        v->arena = a;
        v->arena_cap = cap;
    }
    if (len) memcpy(v->arena + v->arena_len, piece, len);
    v->off[id] = (uint32_t)v->arena_len;
    v->len[id] = (uint32_t)len;
    v->arena_len += len;
    v->score[id] = score;
    v->type[id] = type;
    if (len > v->max_len) v->max_len = (uint32_t)len;
    return KLD_OK;
}

kld_status tok_vocab_finish(tok_vocab *v, bool byte_level, bool raw_map, const uint8_t *exclude,
                            const char *name, kld_error *err) {
    for (int b = 0; b < 256; b++) {
        char hex[8];
        snprintf(hex, sizeof hex, "<0x%02X>", b);
        v->byte_fallback[b] = tok_vocab_find(v, hex, 6);
        if (byte_level) {
            char u[4];
            size_t k = tok_utf8_encode(tok_byte_to_cp((uint8_t)b), u);
            v->byte_char[b] = tok_vocab_find(v, u, k);
        }
    }
    if (!byte_level || !raw_map) return KLD_OK;
    /* raw bytes of every piece spelled entirely in the byte alphabet */
    if (!tok_strmap_init(&v->raw_map, (size_t)v->n))
        return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", name);
    v->has_raw_map = true;
    tok_buf raw = {0};
    for (int32_t id = 0; id < v->n; id++) {
        size_t len;
        const char *p = tok_vocab_piece(v, id, &len);
        if (!p || (exclude && exclude[id])) continue;
        raw.n = 0;
        bool ok = true;
        for (size_t i = 0; i < len && ok;) {
            size_t l;
            uint32_t cp = tok_utf8_decode(p + i, len - i, &l);
            int b = tok_cp_to_byte(cp);
            if (b < 0) ok = false;
            else {
                char c = (char)b;
                if (!tok_buf_append(&raw, &c, 1)) {
                    tok_buf_free(&raw);
                    return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", name);
                }
            }
            i += l;
        }
        if (ok && raw.n > 0 && !tok_strmap_put(&v->raw_map, raw.p, raw.n, id, false, NULL)) {
            tok_buf_free(&raw);
            return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", name);
        }
    }
    tok_buf_free(&raw);
    return KLD_OK;
}
