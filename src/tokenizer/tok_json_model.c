/* tok_json_model.c — the tokenizer.json BPE model: type and flags
 * (byte_fallback, unk_token, fuse_unk, ignore_merges, dropout,
 * continuing_subword_prefix, end_of_word_suffix), and its vocab and merges
 * read straight from the file text (strings "a b" or pairs [a, b]), the
 * merge lookups batched so that their cache misses overlap. */
#include "tokenizer/tok_json.h"

#include <stdio.h>
#include <stdlib.h>

/* ---- model ---- */

static kld_status scan_error(tok_json_ctx *c, const char *what, size_t pos) {
    return kld_fail(c->err, KLD_ERR_FORMAT, "%s: %s: invalid JSON near byte %zu", c->name, what,
                    pos);
}

typedef struct vocab_entry {
    size_t off, len; /* key in the key buffer */
    int32_t id;
} vocab_entry;

/* model.vocab straight from the text: {"piece": id, ...} */
static kld_status scan_vocab(tok_json_ctx *c, tok_buf *keys, vocab_entry **out, size_t *n_out,
                             int64_t *max_id) {
    const char *s = c->text;
    size_t n = c->vocab.end, i = c->vocab.start;
    vocab_entry *v = NULL;
    size_t nv = 0, cap = 0;
    *out = NULL;
    *n_out = 0;
    if (s[i] != '{') return tok_json_bad(c, "not an object", "model.vocab");
    i = tok_json_ws(s, n, i + 1);
    if (i < n && s[i] == '}') return tok_json_bad(c, "empty", "model.vocab");
    for (;;) {
        size_t at = keys->n;
        i = tok_json_ws(s, n, i);
        if (!tok_json_string(s, n, &i, keys)) goto syntax;
        i = tok_json_ws(s, n, i);
        if (i >= n || s[i] != ':') goto syntax;
        i = tok_json_ws(s, n, i + 1);
        int64_t id = 0;
        size_t d0 = i;
        while (i < n && s[i] >= '0' && s[i] <= '9' && id < INT32_MAX) id = id * 10 + (s[i++] - '0');
        if (i == d0 || id >= INT32_MAX || (i < n && (s[i] == '.' || s[i] == 'e' || s[i] == 'E')) ||
            (i - d0 > 1 && s[d0] == '0')) {
            free(v);
            return kld_fail(c->err, KLD_ERR_FORMAT, "%s: model.vocab['%.*s'] is not a valid id",
                            c->name, (int)(keys->n - at > 64 ? 64 : keys->n - at), keys->p + at);
        }
        if (nv == cap) {
            cap = cap ? cap * 2 : 1024;
            vocab_entry *nvp = realloc(v, cap * sizeof *v);
            if (!nvp) {
                free(v);
                return kld_fail(c->err, KLD_ERR_NOMEM, "out of memory");
            }
            v = nvp;
        }
        v[nv++] = (vocab_entry){at, keys->n - at, (int32_t)id};
        if (id > *max_id) *max_id = id;
        i = tok_json_ws(s, n, i);
        if (i < n && s[i] == ',') {
            i++;
            continue;
        }
        if (i < n && s[i] == '}') break;
        goto syntax;
    }
    *out = v;
    *n_out = nv;
    return KLD_OK;
syntax:
    free(v);
    return scan_error(c, "model.vocab", i);
}

/* One merge, "a b" (exactly one space) or ["a", "b"], appended to buf as
 * the bytes of a then b (no separator). */
static kld_status scan_merge(tok_json_ctx *c, size_t *pos, size_t index, tok_buf *buf, size_t *la,
                             size_t *lb) {
    const char *s = c->text;
    size_t n = c->merges.end, i = tok_json_ws(s, n, *pos), at = buf->n;
    if (i < n && s[i] == '"') {
        if (!tok_json_string(s, n, &i, buf)) return scan_error(c, "model.merges", i);
        char *m = buf->p + at;
        size_t len = buf->n - at;
        const char *sp = len ? memchr(m, ' ', len) : NULL;
        if (!sp || memchr(sp + 1, ' ', len - (size_t)(sp - m) - 1))
            return kld_fail(c->err, KLD_ERR_FORMAT,
                            "%s: model.merges[%zu] '%.*s' is not two tokens separated by one space",
                            c->name, index, (int)(len > 64 ? 64 : len), m);
        *la = (size_t)(sp - m);
        *lb = len - *la - 1;
        memmove(m + *la, m + *la + 1, *lb); /* drop the space */
        buf->n--;
    } else if (i < n && s[i] == '[') {
        i = tok_json_ws(s, n, i + 1);
        if (!tok_json_string(s, n, &i, buf)) goto pair;
        *la = buf->n - at;
        i = tok_json_ws(s, n, i);
        if (i >= n || s[i] != ',') goto pair;
        i = tok_json_ws(s, n, i + 1);
        if (!tok_json_string(s, n, &i, buf)) goto pair;
        *lb = buf->n - at - *la;
        i = tok_json_ws(s, n, i);
        if (i >= n || s[i] != ']') goto pair;
        i++;
    } else {
        goto pair;
    }
    *pos = i;
    return KLD_OK;
pair:
    return kld_fail(c->err, KLD_ERR_FORMAT,
                    "%s: model.merges[%zu]: expected \"a b\" or [\"a\", \"b\"]", c->name, index);
}

/* A batch of parsed merges: their lookups are issued together so that the
 * hash tables' cache misses overlap (loading 150k-300k merges is bound by
 * them). */
enum { MERGE_BATCH = 64 };

typedef struct merge_item {
    size_t off, la, lb, cat_off, cat_len; /* in the batch buffer */
    uint64_t ha, hb, hc;
    int32_t ia, ib, ic;
} merge_item;

static kld_status apply_batch(tok_json_ctx *c, const tok_buf *buf, merge_item *it, size_t n,
                              size_t first_index) {
    kld_tokenizer *t = c->t;
    const tok_strmap *map = &t->vocab.map;
    for (size_t j = 0; j < n; j++) {
        const char *p = buf->p + it[j].off;
        it[j].ha = tok_hash_bytes(p, it[j].la);
        it[j].hb = tok_hash_bytes(p + it[j].la, it[j].lb);
        it[j].hc = tok_hash_bytes(buf->p + it[j].cat_off, it[j].cat_len);
        tok_strmap_prefetch(map, it[j].ha);
        tok_strmap_prefetch(map, it[j].hb);
        tok_strmap_prefetch(map, it[j].hc);
    }
    for (size_t j = 0; j < n; j++) {
        const char *p = buf->p + it[j].off;
        it[j].ia = tok_strmap_get_hashed(map, p, it[j].la, it[j].ha);
        it[j].ib = tok_strmap_get_hashed(map, p + it[j].la, it[j].lb, it[j].hb);
        it[j].ic = tok_strmap_get_hashed(map, buf->p + it[j].cat_off, it[j].cat_len, it[j].hc);
        if (it[j].ia >= 0 && it[j].ib >= 0) tok_pairmap_prefetch(&t->merges, it[j].ia, it[j].ib);
    }
    for (size_t j = 0; j < n; j++) {
        const char *p = buf->p + it[j].off;
        const char *missing = it[j].ia < 0   ? p
                              : it[j].ib < 0 ? p + it[j].la
                              : it[j].ic < 0 ? buf->p + it[j].cat_off
                                             : NULL;
        size_t ml = it[j].ia < 0 ? it[j].la : it[j].ib < 0 ? it[j].lb : it[j].cat_len;
        if (missing)
            return kld_fail(c->err, KLD_ERR_FORMAT,
                            "%s: model.merges[%zu] names '%.*s', which is not in the vocab",
                            c->name, first_index + j, (int)(ml > 64 ? 64 : ml), missing);
        /* a later duplicate overwrites, as Hugging Face's HashMap collect does */
        if (!tok_pairmap_put(&t->merges, it[j].ia, it[j].ib, (uint32_t)(first_index + j), it[j].ic,
                             true))
            return kld_fail(c->err, KLD_ERR_NOMEM, "out of memory");
    }
    return KLD_OK;
}

static kld_status scan_merges(tok_json_ctx *c) {
    kld_tokenizer *t = c->t;
    const char *s = c->text;
    size_t n = c->merges.end, i = c->merges.start;
    if (s[i] != '[') return tok_json_bad(c, "not an array", "model.merges");
    /* a size hint for the table: a merge takes about 14 bytes of JSON */
    if (!tok_pairmap_init(&t->merges, (c->merges.end - c->merges.start) / 14 + 16))
        return kld_fail(c->err, KLD_ERR_NOMEM, "out of memory");
    i = tok_json_ws(s, n, i + 1);
    if (i < n && s[i] == ']') return KLD_OK;
    tok_buf buf = {0};
    merge_item items[MERGE_BATCH];
    size_t nb = 0, first = 0;
    kld_status st = KLD_OK;
    for (size_t k = 0;; k++) {
        if (nb == 0) buf.n = 0;
        merge_item *it = &items[nb];
        it->off = buf.n;
        if ((st = scan_merge(c, &i, k, &buf, &it->la, &it->lb))) break;
        /* a + b without b's continuing_subword_prefix: the same bytes
         * unless there is a prefix */
        size_t skip = t->cont_prefix_len <= it->lb ? t->cont_prefix_len : it->lb;
        if (skip == 0) {
            it->cat_off = it->off;
            it->cat_len = it->la + it->lb;
        } else {
            it->cat_off = buf.n;
            if (!tok_buf_reserve(&buf, it->la + it->lb)) {
                st = kld_fail(c->err, KLD_ERR_NOMEM, "out of memory");
                break;
            }
            tok_buf_append(&buf, buf.p + it->off, it->la);
            tok_buf_append(&buf, buf.p + it->off + it->la + skip, it->lb - skip);
            it->cat_len = buf.n - it->cat_off;
        }
        t->n_merges = k + 1;
        bool last = false;
        i = tok_json_ws(s, n, i);
        if (i < n && s[i] == ',') i++;
        else if (i < n && s[i] == ']') last = true;
        else {
            st = scan_error(c, "model.merges", i);
            break;
        }
        if (++nb == MERGE_BATCH || last) {
            if ((st = apply_batch(c, &buf, items, nb, first))) break;
            first += nb;
            nb = 0;
        }
        if (last) break;
    }
    tok_buf_free(&buf);
    return st;
}

kld_status tok_json_model(tok_json_ctx *c, json_t *m, json_t *added) {
    kld_tokenizer *t = c->t;
    if (!json_is_object(m)) return tok_json_bad(c, "missing or not an object", "model");
    const char *type = tok_json_str(m, "type");
    if (type && strcmp(type, "BPE") != 0) return tok_json_unsupported(c, "model", type);
    if (!type && !c->merges.end)
        return tok_json_bad(c, "no \"type\" and no \"merges\" (not a BPE model)", "model");
    t->model = MODEL_BPE;
    if (!c->vocab.end) return tok_json_bad(c, "missing", "model.vocab");
    if (!c->merges.end)
        return tok_json_bad(c, "missing (a BPE model needs merges)", "model.merges");
    json_t *dropout = json_object_get(m, "dropout");
    if (dropout && !json_is_null(dropout) &&
        !(json_is_number(dropout) && json_number_value(dropout) == 0.0))
        return kld_fail(c->err, KLD_ERR_UNSUPPORTED,
                        "%s: model.dropout is set: BPE dropout is random, not supported", c->name);
    /* n_vocab: one past the largest id of the vocabulary and added tokens */
    int64_t max_id = -1;
    tok_buf keys = {0};
    vocab_entry *ve = NULL;
    size_t nve = 0;
    kld_status st = scan_vocab(c, &keys, &ve, &nve, &max_id);
    size_t i;
    json_t *e;
    json_array_foreach(added, i, e) {
        if (st) break;
        json_t *id = json_object_get(e, "id");
        if (!json_is_integer(id) || json_integer_value(id) < 0 ||
            json_integer_value(id) >= INT32_MAX)
            st = kld_fail(c->err, KLD_ERR_FORMAT, "%s: added_tokens[%zu].id is not a valid id",
                          c->name, i);
        else if (json_integer_value(id) > max_id) max_id = json_integer_value(id);
    }
    if (!st) st = tok_vocab_init(&t->vocab, (int32_t)(max_id + 1), c->name, c->err);
    for (size_t k = 0; k < nve && !st; k++) {
        if (k + 16 < nve) /* overlap the table's cache misses */
            tok_strmap_prefetch(&t->vocab.map,
                                tok_hash_bytes(keys.p + ve[k + 16].off, ve[k + 16].len));
        st = tok_vocab_set(&t->vocab, ve[k].id, keys.p + ve[k].off, ve[k].len, 0.0f,
                           KLD_TOKEN_NORMAL, false, c->name, c->err);
    }
    free(ve);
    tok_buf_free(&keys);
    if (st) return st;
    for (int b = 0; b < 256; b++) {
        char hex[8];
        snprintf(hex, sizeof hex, "<0x%02X>", b);
        int32_t id = tok_vocab_find(&t->vocab, hex, 6);
        if (id >= 0) t->vocab.type[id] = KLD_TOKEN_BYTE;
    }
    t->byte_fallback = tok_json_bool(m, "byte_fallback", false);
    t->fuse_unk = tok_json_bool(m, "fuse_unk", false);
    t->ignore_merges = tok_json_bool(m, "ignore_merges", false);
    const char *unk = tok_json_str(m, "unk_token");
    if (unk) {
        t->model_unk = tok_vocab_find(&t->vocab, unk, strlen(unk));
        if (t->model_unk < 0)
            return kld_fail(c->err, KLD_ERR_FORMAT,
                            "%s: model.unk_token '%.64s' is not in the vocab", c->name, unk);
        t->unk = t->model_unk;
    }
    const char *cp = tok_json_str(m, "continuing_subword_prefix"),
               *eow = tok_json_str(m, "end_of_word_suffix");
    if (cp && *cp) {
        t->cont_prefix_len = strlen(cp);
        if (!(t->cont_prefix = kld_strdup(cp)))
            return kld_fail(c->err, KLD_ERR_NOMEM, "out of memory");
    }
    if (eow && *eow) {
        t->eow_suffix_len = strlen(eow);
        if (!(t->eow_suffix = kld_strdup(eow)))
            return kld_fail(c->err, KLD_ERR_NOMEM, "out of memory");
    }
    return scan_merges(c);
}
