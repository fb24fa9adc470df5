/* plan.h — the window plan both arms of an evaluation share: corpus →
 * token windows → the rows of each window that are scored (or dumped).
 * A plan comes from a corpus and a tokenizer (kld_plan_from_corpus) or from
 * a saved arm that fixes its own tokens (a dump's tokens.bin, a llama.cpp
 * base file's chunks), built by that arm.
 *
 * Chunkings:
 *   doc      each document from position 0, cut into ctx windows (the last
 *            one shorter); every row scored, the last row of a window
 *            predicting the token after it when the document goes on.
 *   llamacpp llama-perplexity --kl-divergence: the whole text minus its final
 *            newline tokenized as one, ctx windows, the first token of each
 *            replaced by BOS (when the tokenizer adds one), rows ctx/2 .. ctx-2
 *            scored. For dumps (rows_all): rows 0 .. ctx-2.
 *   stream   documents tokenized one by one (with the tokenizer's BOS),
 *            concatenated and cut into windows of exactly ctx tokens (a
 *            shorter tail is dropped), rows 0 .. ctx-2 scored: the fixed
 *            windows a dump needs.
 * Window w of any plan is sequence w of a dump. */
#ifndef KLD_EVAL_PLAN_H
#define KLD_EVAL_PLAN_H

#include "eval/corpus.h"
#include "tokenizer/tokenizer.h"

/* kld_chunking: kld.h */

const char *kld_chunking_name(kld_chunking c);

/* A stretch of tokens evaluated from an empty cache. */
typedef struct kld_window {
    const int32_t *tokens; /* len ids, as stored */
    int64_t len;
    int64_t score_from, score_to; /* rows [score_from, score_to) are scored */
    int32_t first_token;   /* fed instead of tokens[0] when >= 0 (BOS replacement) */
    int32_t last_next;     /* the token after the window (-1: none) */
    bool new_doc;          /* starts a document */
    const uint8_t *roles;  /* per token its turn role (chat corpora; NULL: none, strata.h) */
    uint8_t last_role;     /* the role of the token after the window */
} kld_window;

typedef struct kld_plan {
    kld_chunking chunking;
    kld_window *windows;
    size_t n_windows, cap;
    uint64_t positions_total, docs_total;
    int64_t max_len;       /* longest window */
    void **owned;          /* token and role arrays the plan owns */
    size_t n_owned;
    char note[1024];       /* how the windows were cut, for manifests and reports */
} kld_plan;

typedef struct kld_plan_opts {
    kld_chunking chunking;
    int64_t ctx;           /* window length (>= 2; llamacpp >= 4) */
    int64_t max_docs;      /* doc/stream: at most this many documents (0 = all) */
    int64_t max_tokens;    /* doc/stream: at most this many tokens per document (0 = all) */
    int64_t max_chunks;    /* llamacpp/stream: at most this many windows (0 = all) */
    bool rows_all;         /* llamacpp: score rows 0 .. ctx-2 (dumps) instead of the second half */
    int32_t n_vocab;       /* ids must lie in [0, n_vocab) */
} kld_plan_opts;

/* What a corpus plan is made from: the corpus (a text or JSONL file, NULL
 * for the built-in corpus, or an ids file), the model that tokenizes it and
 * renders its conversations (src, tok; tok may be NULL for ids), and a
 * second model that must render conversations alike (or NULL). */
typedef struct kld_plan_input {
    const char *corpus_path, *corpus_format, *ids_path;
    const char *model_name;            /* for messages */
    const struct kld_source *src;
    const kld_tokenizer *tok;
    const struct kld_source *check_src;
    const kld_tokenizer *check_tok;
    kld_plan_opts opts;
} kld_plan_input;

/* Loads the corpus (*corpus, freed by the caller also on failure) and builds
 * its plan (plan_corpus.c). */
kld_status kld_plan_corpus_load(const kld_plan_input *in, kld_corpus **corpus, kld_plan *plan,
                                kld_error *err);

/* Builds the plan of a corpus (text through tok, or pre-tokenized ids).
 * tok may be NULL for an ids corpus. Errors name the corpus. */
kld_status kld_plan_from_corpus(const kld_corpus *corpus, const kld_tokenizer *tok,
                                const kld_plan_opts *opts, kld_plan *plan, kld_error *err);

/* Every document of a text corpus tokenized as the doc and stream chunkings
 * do (the tokenizer's specials; a rendered conversation with its special
 * tokens parsed, BOS not doubled), appended to ids one after the other. */
kld_status kld_corpus_encode(const kld_corpus *c, const kld_tokenizer *tok, kld_tok_ids *ids,
                             kld_error *err);

/* Document d alone, tokenized as kld_corpus_encode does, appended to ids. */
kld_status kld_corpus_encode_doc(const kld_corpus *c, const kld_tokenizer *tok, size_t d, kld_tok_ids *ids,
                                 kld_error *err);

/* Appends a window (for plans that saved arms build). tokens must outlive
 * the plan (or be handed over with kld_plan_own). */
kld_status kld_plan_push(kld_plan *plan, const kld_window *w, kld_error *err);
/* The plan frees p with itself. */
kld_status kld_plan_own(kld_plan *plan, void *p, kld_error *err);
void kld_plan_free(kld_plan *plan);
/* The eval calls the plan's windows take in chunks of up to chunk tokens (each window's
 * ceil(len / chunk)): how often each arm reads its weights. */
int64_t kld_plan_passes(const kld_plan *plan, int64_t chunk);

/* Scale-out: shard k of n takes the windows i with i mod n = k (mod) or the
 * k-th of n contiguous ranges [k W / n, (k+1) W / n) of the W windows
 * (range). n = 0: no sharding. Window indices stay global (arms and merges
 * address windows by them). */
/* kld_shard_mode, kld_shard: kld.h */

const char *kld_shard_mode_name(kld_shard_mode m);
/* Parses "K/N" (0 <= K < N <= 1000000); false on anything else. */
bool kld_shard_parse(const char *text, kld_shard *out);
/* Whether window i of n_windows belongs to the shard. */
bool kld_shard_has(const kld_shard *s, uint64_t i, uint64_t n_windows);
/* The global indices of the shard's windows of plan, ascending (*idx is
 * malloc'd, possibly with *n = 0 when the shard is empty). */
kld_status kld_plan_shard(const kld_plan *plan, const kld_shard *s, size_t **idx, size_t *n,
                          kld_error *err);

/* The token that window row p predicts (-1: none). */
static inline int32_t kld_window_next(const kld_window *w, int64_t p) {
    return p + 1 < w->len ? w->tokens[p + 1] : w->last_next;
}

/* The turn role of that token (0: none or not a chat corpus). */
static inline int kld_window_next_role(const kld_window *w, int64_t p) {
    if (!w->roles) return 0;
    return p + 1 < w->len ? w->roles[p + 1] : w->last_role;
}

#endif
