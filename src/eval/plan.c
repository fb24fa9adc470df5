/* plan.c — corpus → windows (see plan.h). */
#include "eval/plan.h"
#include "eval/strata.h"

#include "store/partial.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

const char *kld_chunking_name(kld_chunking c) {
    return c == KLD_CHUNKING_DOC ? "doc" : c == KLD_CHUNKING_LLAMACPP ? "llamacpp" : "stream";
}

kld_status kld_plan_push(kld_plan *pl, const kld_window *w, kld_error *err) {
    if (pl->n_windows == pl->cap) {
        size_t cap = pl->cap ? 2 * pl->cap : 64;
        kld_window *p = realloc(pl->windows, cap * sizeof *p);
        if (!p) return kld_fail(err, KLD_ERR_NOMEM, "out of memory for the window plan");
        pl->windows = p;
        pl->cap = cap;
    }
    pl->windows[pl->n_windows++] = *w;
    pl->positions_total += (uint64_t)(w->score_to - w->score_from);
    if (w->new_doc) pl->docs_total++;
    if (w->len > pl->max_len) pl->max_len = w->len;
    return KLD_OK;
}

kld_status kld_plan_own(kld_plan *pl, void *p, kld_error *err) {
    void **o = realloc(pl->owned, (pl->n_owned + 1) * sizeof *o);
    if (!o) {
        free(p);
        return kld_fail(err, KLD_ERR_NOMEM, "out of memory for the window plan");
    }
    pl->owned = o;
    pl->owned[pl->n_owned++] = p;
    return KLD_OK;
}

int64_t kld_plan_passes(const kld_plan *pl, int64_t chunk) {
    int64_t n = 0;
    for (size_t i = 0; chunk > 0 && i < pl->n_windows; i++) n += (pl->windows[i].len + chunk - 1) / chunk;
    return n;
}

void kld_plan_free(kld_plan *pl) {
    if (!pl) return;
    for (size_t i = 0; i < pl->n_owned; i++) free(pl->owned[i]);
    free(pl->owned);
    free(pl->windows);
    memset(pl, 0, sizeof *pl);
}

static kld_status check_ids(const char *name, const int32_t *t, size_t n, int32_t n_vocab,
                            const kld_tokenizer *tok, kld_error *err) {
    for (size_t i = 0; i < n; i++) {
        if (t[i] >= 0 && t[i] < n_vocab) continue;
        size_t len = 0;
        const char *piece = tok ? kld_tok_piece(tok, t[i], &len) : NULL;
        return kld_fail(err, KLD_ERR_MISMATCH,
                        "%s: token %d ('%.*s') at index %zu is outside the vocabulary of %d", name,
                        t[i], piece ? (int)len : 1, piece ? piece : "?", i, n_vocab);
    }
    return KLD_OK;
}

/* doc: every document from position 0, split into ctx windows. */
static kld_status plan_doc(kld_plan *pl, const kld_plan_opts *o, const int32_t *t, const uint8_t *roles,
                           int64_t n, kld_error *err) {
    if (o->max_tokens > 0 && n > o->max_tokens) n = o->max_tokens;
    for (int64_t s = 0; s < n; s += o->ctx) {
        int64_t len = n - s < o->ctx ? n - s : o->ctx;
        kld_window w = {t + s, len, 0, len, -1, s + len < n ? t[s + len] : -1, s == 0,
                        roles ? roles + s : NULL, roles && s + len < n ? roles[s + len] : 0};
        kld_status st = kld_plan_push(pl, &w, err);
        if (st) return st;
    }
    return KLD_OK;
}

/* Fixed windows of ctx over one token sequence (llamacpp, stream). */
static kld_status plan_fixed(kld_plan *pl, const kld_plan_opts *o, const char *name,
                             const int32_t *t, const uint8_t *roles, int64_t n, int32_t first_token,
                             kld_error *err) {
    int64_t n_chunk = n / o->ctx;
    if (o->max_chunks > 0 && n_chunk > o->max_chunks) n_chunk = o->max_chunks;
    if (n_chunk == 0)
        return kld_fail(err, KLD_ERR_ARG, "%s: %lld tokens are fewer than one --ctx window of %lld",
                        name, (long long)n, (long long)o->ctx);
    bool second_half = o->chunking == KLD_CHUNKING_LLAMACPP && !o->rows_all;
    for (int64_t k = 0; k < n_chunk; k++) {
        /* the last row is never scored: llama-perplexity stops at ctx-2, and a
         * dump record needs its next token inside the window */
        kld_window w = {t + k * o->ctx, o->ctx, second_half ? o->ctx / 2 : 0, o->ctx - 1,
                        first_token, -1, true, roles ? roles + k * o->ctx : NULL, 0};
        kld_status st = kld_plan_push(pl, &w, err);
        if (st) return st;
    }
    return KLD_OK;
}

/* Tokenizes document d of a text corpus into ids (appended). */
static kld_status encode_doc(const kld_corpus *c, const kld_tokenizer *tok, size_t d,
                             int64_t max_tokens, kld_tok_ids *ids, kld_error *err) {
    size_t before = ids->n;
    if (!c->docs[d])
        return kld_fail(err, KLD_ERR_ARG, "%s:%zu: field \"messages\": the conversation was not "
                        "rendered with a chat template", c->name, c->doc_line[d]);
    /* a rendered conversation holds the template's special tokens as text;
     * BOS only when the template did not write it (as cap's prompts) */
    unsigned flags = c->messages && c->messages[d]
                         ? (c->doc_add_bos[d] ? KLD_TOK_ADD_SPECIAL : 0) | KLD_TOK_PARSE_SPECIAL
                         : KLD_TOK_ADD_SPECIAL;
    kld_status st = kld_tok_encode(tok, c->docs[d], c->doc_len[d], flags, ids, err);
    if (st) {
        kld_error_prefix(err, "%s: document %zu", c->name, d + 1);
        return st;
    }
    if (max_tokens > 0 && ids->n - before > (size_t)max_tokens) ids->n = before + (size_t)max_tokens;
    return KLD_OK;
}

kld_status kld_corpus_encode_doc(const kld_corpus *c, const kld_tokenizer *tok, size_t d, kld_tok_ids *ids,
                                 kld_error *err) {
    return encode_doc(c, tok, d, 0, ids, err);
}

kld_status kld_corpus_encode(const kld_corpus *c, const kld_tokenizer *tok, kld_tok_ids *ids,
                             kld_error *err) {
    kld_status st = KLD_OK;
    for (size_t d = 0; d < c->n_docs && !st; d++) st = encode_doc(c, tok, d, 0, ids, err);
    return st;
}

static kld_status keep(kld_plan *pl, kld_tok_ids *ids, kld_error *err) {
    kld_status st = kld_plan_own(pl, ids->ids, err);
    *ids = (kld_tok_ids){0}; /* the buffer now belongs to the plan */
    return st;
}

/* The turn roles of the ids, grown beside them (chat corpora). */
typedef struct turn_roles {
    uint8_t *p;
    size_t cap;
} turn_roles;

/* Roles of document d's tokens ids[before..n): its turns' for a
 * conversation, none for a text document. */
static kld_status roles_of(const kld_corpus *c, const kld_tokenizer *tok, size_t d, const kld_tok_ids *ids,
                           size_t before, turn_roles *r, kld_error *err) {
    if (ids->n > r->cap) {
        size_t cap = ids->n > 2 * r->cap ? ids->n : 2 * r->cap;
        uint8_t *g = realloc(r->p, cap);
        if (!g) return kld_fail(err, KLD_ERR_NOMEM, "out of memory for the turn roles");
        r->p = g;
        r->cap = cap;
    }
    if (c->messages[d]) kld_chat_roles(tok, ids->ids + before, ids->n - before, c->messages[d], r->p + before);
    else memset(r->p + before, 0, ids->n - before);
    return KLD_OK;
}

static kld_status keep_roles(kld_plan *pl, turn_roles *r, kld_error *err) {
    kld_status st = kld_plan_own(pl, r->p, err);
    *r = (turn_roles){0};
    return st;
}

static kld_status plan_text(const kld_corpus *c, const kld_tokenizer *tok,
                            const kld_plan_opts *o, kld_plan *pl, kld_error *err) {
    kld_tok_ids ids = {0};
    kld_status st = KLD_OK;
    if (o->chunking == KLD_CHUNKING_LLAMACPP) {
        if (c->n_chat_docs)
            return kld_fail(err, KLD_ERR_ARG, "%s: llamacpp chunking tokenizes the file whole; its "
                            "%zu \"messages\" lines need doc or stream chunking", c->name,
                            c->n_chat_docs);
        /* llama-perplexity reads the whole file, minus its final newline */
        size_t len = c->whole_len;
        if (len && c->whole[len - 1] == '\n') len--;
        st = kld_tok_encode(tok, c->whole, len, KLD_TOK_ADD_SPECIAL, &ids, err);
        int32_t bos = kld_tok_adds_bos(tok) ? kld_tok_bos(tok) : -1;
        if (!st) st = check_ids(c->name, ids.ids, ids.n, o->n_vocab, tok, err);
        if (!st) st = plan_fixed(pl, o, c->name, ids.ids, NULL, (int64_t)ids.n, bos, err);
        if (!st) st = keep(pl, &ids, err);
        kld_tok_ids_free(&ids);
        return st;
    }
    size_t n_docs = c->n_docs;
    if (o->max_docs > 0 && (size_t)o->max_docs < n_docs) n_docs = (size_t)o->max_docs;
    turn_roles r = {0};
    for (size_t d = 0; d < n_docs && !st; d++) {
        if (o->chunking == KLD_CHUNKING_DOC) ids.n = 0;
        size_t before = ids.n;
        if ((st = encode_doc(c, tok, d, o->max_tokens, &ids, err))) break;
        if ((st = check_ids(c->name, ids.ids + before, ids.n - before, o->n_vocab, tok, err))) break;
        if (c->n_chat_docs && (st = roles_of(c, tok, d, &ids, before, &r, err))) break;
        if (o->chunking == KLD_CHUNKING_DOC && ids.n) {
            if (!(st = plan_doc(pl, o, ids.ids, r.p, (int64_t)ids.n, err))) st = keep(pl, &ids, err);
            if (!st && r.p) st = keep_roles(pl, &r, err);
        }
    }
    if (!st && o->chunking == KLD_CHUNKING_STREAM) {
        st = plan_fixed(pl, o, c->name, ids.ids, r.p, (int64_t)ids.n, -1, err);
        if (!st && r.p) st = keep_roles(pl, &r, err);
        if (!st) {
            snprintf(pl->note, sizeof pl->note,
                     "stream: %zu documents tokenized with the tokenizer's specials, concatenated "
                     "(%zu tokens), cut into %zu windows of %lld; %lld trailing tokens dropped",
                     n_docs, ids.n, pl->n_windows, (long long)o->ctx,
                     (long long)((int64_t)ids.n - (int64_t)pl->n_windows * o->ctx));
            st = keep(pl, &ids, err);
        }
    }
    kld_tok_ids_free(&ids);
    free(r.p);
    return st;
}

kld_status kld_plan_from_corpus(const kld_corpus *c, const kld_tokenizer *tok,
                                const kld_plan_opts *o, kld_plan *pl, kld_error *err) {
    memset(pl, 0, sizeof *pl);
    pl->chunking = o->chunking;
    if (o->ctx < 2 || (o->chunking == KLD_CHUNKING_LLAMACPP && o->ctx < 4))
        return kld_fail(err, KLD_ERR_ARG, "--ctx %lld is too short for %s chunking",
                        (long long)o->ctx, kld_chunking_name(o->chunking));
    kld_status st;
    if (c->kind == KLD_CORPUS_IDS) {
        if ((st = check_ids(c->name, c->ids, c->n_ids, o->n_vocab, tok, err))) return st;
        int32_t bos = o->chunking == KLD_CHUNKING_LLAMACPP && tok && kld_tok_adds_bos(tok)
                          ? kld_tok_bos(tok) : -1;
        st = o->chunking == KLD_CHUNKING_DOC
                 ? plan_doc(pl, o, c->ids, NULL, (int64_t)c->n_ids, err)
                 : plan_fixed(pl, o, c->name, c->ids, NULL, (int64_t)c->n_ids, bos, err);
    } else if (!tok) {
        st = kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: no tokenizer to read a text corpus (use --ids-file)",
                      c->name);
    } else {
        st = plan_text(c, tok, o, pl, err);
    }
    if (!st && !pl->note[0])
        snprintf(pl->note, sizeof pl->note, "%s: %zu windows of at most %lld tokens",
                 kld_chunking_name(o->chunking), pl->n_windows, (long long)o->ctx);
    if (!st && c->kind == KLD_CORPUS_TEXT && c->n_chat_docs) {
        size_t n = strlen(pl->note);
        snprintf(pl->note + n, sizeof pl->note - n, "; documents: %zu text, %zu messages (chat template: %s)",
                 c->n_text_docs, c->n_chat_docs, c->chat_origin ? c->chat_origin : "none");
    }
    if (!st && pl->positions_total == 0)
        st = kld_fail(err, KLD_ERR_ARG, "%s: nothing to score (no tokens)", c->name);
    if (st) kld_plan_free(pl);
    return st;
}

const char *kld_shard_mode_name(kld_shard_mode m) { return m == KLD_SHARD_RANGE ? "range" : "mod"; }

bool kld_shard_parse(const char *text, kld_shard *out) {
    char *end;
    errno = 0;
    unsigned long k = strtoul(text, &end, 10);
    if (end == text || *end != '/' || text[0] == '-' || text[0] == '+' || errno) return false;
    const char *t = end + 1;
    unsigned long n = strtoul(t, &end, 10);
    if (end == t || *end || t[0] == '-' || t[0] == '+' || errno || n < 1 || n > 1000000 || k >= n)
        return false;
    out->k = (uint32_t)k;
    out->n = (uint32_t)n;
    return true;
}

bool kld_shard_has(const kld_shard *s, uint64_t i, uint64_t n_windows) {
    return kld_partial_shard_has(s->k, s->n, s->mode == KLD_SHARD_RANGE, i, n_windows);
}

kld_status kld_plan_shard(const kld_plan *pl, const kld_shard *s, size_t **idx, size_t *n,
                          kld_error *err) {
    *n = 0;
    *idx = malloc((pl->n_windows ? pl->n_windows : 1) * sizeof **idx);
    if (!*idx) return kld_fail(err, KLD_ERR_NOMEM, "out of memory for the shard's windows");
    for (size_t i = 0; i < pl->n_windows; i++)
        if (kld_shard_has(s, i, pl->n_windows)) (*idx)[(*n)++] = i;
    return KLD_OK;
}
