/* kl_driver.c — lockstep two-arm KLD evaluation (see kl_driver.h). */
#include "eval/kl_driver.h"

#include "engine/engine.h"
#include "engine/pool.h"
#include "tokenizer/tokenizer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>

/* A stretch of tokens evaluated from an empty cache. */
typedef struct window {
    const int32_t *tokens;
    int64_t len;
    int64_t score_from; /* first row scored */
    int32_t last_next;  /* the token after the window (-1: none) */
    bool new_doc;       /* starts a document */
} window;

typedef struct run_state {
    const kld_kl_config *c;
    kld_model *ref, *arm;
    kld_tokenizer *tok;
    kld_pool *pool;
    kld_session *s_ref, *s_arm;
    kld_corpus *corpus;
    int32_t **doc_tokens; /* owned token arrays */
    size_t n_doc_tokens;
    window *windows;
    size_t n_windows;
    uint64_t positions_total, docs_total;
    int32_t n_vocab;      /* ids both models accept: min of the two sizes */
    int32_t *common;      /* with --allow-vocab-mismatch: the ids spelled alike in both, */
    int32_t n_common;     /* scored over that subset; NULL when the vocabularies agree */
    int32_t *compact_of;  /* id -> index in common, or -1 */
    float *gather_ref, *gather_arm;
    float *logits_ref, *logits_arm;
    kld_position *recs;   /* one chunk of scored rows, filled in parallel */
    int64_t chunk;        /* the prefill chunk: --chunk, at most the longest window */
} run_state;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void kld_kl_config_defaults(kld_kl_config *c) {
    memset(c, 0, sizeof *c);
    c->corpus_format = "auto";
    c->ctx = 512;
    c->chunk = 128;
    c->chunking = KLD_CHUNKING_DOC;
    c->topk = KLD_TOPK_DEFAULT;
}

/* Compares the two vocabularies token by token (by spelling). With
 * --allow-vocab-mismatch the ids spelled alike in both (below the smaller
 * size) become the scored subset. */
static kld_status check_vocab(run_state *rs, kld_kl_result *out, kld_error *err) {
    const kld_hparams *hr = kld_model_hparams(rs->ref), *ha = kld_model_hparams(rs->arm);
    rs->n_vocab = (int32_t)(hr->n_vocab < ha->n_vocab ? hr->n_vocab : ha->n_vocab);
    kld_tokenizer *arm_tok = NULL;
    kld_error tok_err = {0};
    bool spelled = rs->tok && kld_tok_open_source(kld_model_source(rs->arm), &arm_tok, &tok_err) == KLD_OK;
    rs->compact_of = malloc((size_t)rs->n_vocab * sizeof *rs->compact_of);
    rs->common = malloc((size_t)rs->n_vocab * sizeof *rs->common);
    if (!rs->compact_of || !rs->common) {
        kld_tok_free(arm_tok);
        return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    }
    int64_t first_diff = hr->n_vocab != ha->n_vocab ? rs->n_vocab : -1;
    rs->n_common = 0;
    for (int32_t i = 0; i < rs->n_vocab; i++) {
        bool same = true;
        if (spelled) {
            size_t la = 0, lb = 0;
            const char *a = kld_tok_piece(rs->tok, i, &la), *b = kld_tok_piece(arm_tok, i, &lb);
            same = (a == NULL) == (b == NULL) && la == lb && (!a || memcmp(a, b, la) == 0);
        }
        if (!same && (first_diff < 0 || i < first_diff)) first_diff = i;
        rs->compact_of[i] = same ? rs->n_common : -1;
        if (same) rs->common[rs->n_common++] = i;
    }
    kld_tok_free(arm_tok);
    if (spelled)
        snprintf(out->vocab_note, sizeof out->vocab_note, "%s (%d tokens compared by spelling)",
                 first_diff < 0 ? "identical" : "different", rs->n_vocab);
    else
        snprintf(out->vocab_note, sizeof out->vocab_note, "sizes only (%s has no readable tokenizer)",
                 rs->tok ? "the arm" : "the reference");
    if (first_diff < 0) {
        free(rs->common);
        free(rs->compact_of);
        rs->common = rs->compact_of = NULL;
        return KLD_OK;
    }
    if (!rs->c->allow_vocab_mismatch)
        return kld_fail(err, KLD_ERR_MISMATCH,
                        "vocabularies differ: %s has %lld tokens, %s has %lld; first differing id "
                        "%lld (use --allow-vocab-mismatch to score the ids both share)",
                        rs->c->ref_path, (long long)hr->n_vocab, rs->c->arm_path,
                        (long long)ha->n_vocab, (long long)first_diff);
    if (rs->n_common < 2)
        return kld_fail(err, KLD_ERR_MISMATCH, "vocabularies share %d ids: nothing to compare", rs->n_common);
    snprintf(out->vocab_note, sizeof out->vocab_note,
             "MISMATCH allowed: %d of %lld/%lld ids are spelled alike in both and only they are "
             "scored (distributions renormalised over them)",
             rs->n_common, (long long)hr->n_vocab, (long long)ha->n_vocab);
    rs->gather_ref = malloc((size_t)rs->n_common * sizeof(float));
    rs->gather_arm = malloc((size_t)rs->n_common * sizeof(float));
    if (!rs->gather_ref || !rs->gather_arm) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    return KLD_OK;
}

/* Scores one row, over the shared ids when the vocabularies differ. */
static kld_status score_row(run_state *rs, kld_stats *stats, const float *lr, const float *la,
                            int32_t next, uint32_t pos, kld_error *err) {
    if (!rs->common) return kld_stats_add_logits(stats, lr, la, rs->n_vocab, next, pos, err);
    for (int32_t k = 0; k < rs->n_common; k++) {
        rs->gather_ref[k] = lr[rs->common[k]];
        rs->gather_arm[k] = la[rs->common[k]];
    }
    int32_t cnext = next >= 0 ? rs->compact_of[next] : -1;
    return kld_stats_add_logits(stats, rs->gather_ref, rs->gather_arm, rs->n_common, cnext, pos, err);
}

static kld_status push_window(run_state *rs, const int32_t *tokens, int64_t len,
                              int64_t score_from, int32_t last_next, bool new_doc, size_t *cap,
                              kld_error *err) {
    if (rs->n_windows == *cap) {
        *cap = *cap ? 2 * *cap : 64;
        window *w = realloc(rs->windows, *cap * sizeof *w);
        if (!w) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
        rs->windows = w;
    }
    rs->windows[rs->n_windows++] = (window){tokens, len, score_from, last_next, new_doc};
    rs->positions_total += (uint64_t)(len - score_from);
    return KLD_OK;
}

static kld_status keep_tokens(run_state *rs, kld_tok_ids *ids, kld_error *err) {
    for (size_t i = 0; i < ids->n; i++)
        if (ids->ids[i] >= rs->n_vocab) {
            size_t len = 0;
            const char *piece = kld_tok_piece(rs->tok, ids->ids[i], &len);
            return kld_fail(err, KLD_ERR_MISMATCH,
                            "%s: token %d ('%.*s') of the reference's tokenizer is outside the "
                            "other model's vocabulary of %d",
                            rs->corpus->name, ids->ids[i], piece ? (int)len : 1, piece ? piece : "?",
                            rs->n_vocab);
        }
    int32_t **p = realloc(rs->doc_tokens, (rs->n_doc_tokens + 1) * sizeof *p);
    if (!p) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    rs->doc_tokens = p;
    rs->doc_tokens[rs->n_doc_tokens++] = ids->ids;
    *ids = (kld_tok_ids){0}; /* the buffer now belongs to rs */
    return KLD_OK;
}

/* doc chunking: every document from position 0, split into --ctx windows. */
static kld_status plan_doc(run_state *rs, const int32_t *t, int64_t n, size_t *cap, kld_error *err) {
    const kld_kl_config *c = rs->c;
    if (c->max_tokens > 0 && n > c->max_tokens) n = c->max_tokens;
    if (n <= 0) return KLD_OK;
    rs->docs_total++;
    for (int64_t s = 0; s < n; s += c->ctx) {
        int64_t len = n - s < c->ctx ? n - s : c->ctx;
        int32_t next = s + len < n ? t[s + len] : -1;
        kld_status st = push_window(rs, t + s, len, 0, next, s == 0, cap, err);
        if (st) return st;
    }
    return KLD_OK;
}

/* llamacpp chunking: n/ctx windows; the BOS replacement happens at eval. */
static kld_status plan_llamacpp(run_state *rs, const int32_t *t, int64_t n, size_t *cap,
                                kld_error *err) {
    const kld_kl_config *c = rs->c;
    int64_t n_chunk = n / c->ctx;
    if (c->max_chunks > 0 && n_chunk > c->max_chunks) n_chunk = c->max_chunks;
    if (n_chunk == 0)
        return kld_fail(err, KLD_ERR_ARG, "%s: %lld tokens are fewer than one --ctx window of %lld",
                        rs->corpus->name, (long long)n, (long long)c->ctx);
    for (int64_t k = 0; k < n_chunk; k++) {
        kld_status st = push_window(rs, t + k * c->ctx, c->ctx, c->ctx / 2, -1, true, cap, err);
        if (st) return st;
        rs->windows[rs->n_windows - 1].len = c->ctx;
        /* llama-perplexity scores j = ctx/2 .. ctx-2: the last row has no next token */
        rs->positions_total--;
        rs->docs_total++;
    }
    return KLD_OK;
}

static kld_status plan_windows(run_state *rs, kld_error *err) {
    const kld_kl_config *c = rs->c;
    size_t cap = 0;
    kld_status st;
    if (rs->corpus->kind == KLD_CORPUS_IDS) {
        for (size_t i = 0; i < rs->corpus->n_ids; i++)
            if (rs->corpus->ids[i] < 0 || rs->corpus->ids[i] >= rs->n_vocab)
                return kld_fail(err, KLD_ERR_FORMAT, "%s: id %d at index %zu is outside the vocabulary (%d)",
                                rs->corpus->name, rs->corpus->ids[i], i, rs->n_vocab);
        if (c->chunking == KLD_CHUNKING_LLAMACPP)
            return plan_llamacpp(rs, rs->corpus->ids, (int64_t)rs->corpus->n_ids, &cap, err);
        return plan_doc(rs, rs->corpus->ids, (int64_t)rs->corpus->n_ids, &cap, err);
    }
    if (!rs->tok)
        return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: no tokenizer to read a text corpus (use --ids-file)",
                        c->ref_path);
    kld_tok_ids ids = {0};
    if (c->chunking == KLD_CHUNKING_LLAMACPP) {
        /* llama-perplexity reads the whole file, minus its final newline */
        size_t len = rs->corpus->whole_len;
        if (len && rs->corpus->whole[len - 1] == '\n') len--;
        st = kld_tok_encode(rs->tok, rs->corpus->whole, len, KLD_TOK_ADD_SPECIAL, &ids, err);
        if (!st) st = plan_llamacpp(rs, ids.ids, (int64_t)ids.n, &cap, err);
        if (!st) st = keep_tokens(rs, &ids, err);
        kld_tok_ids_free(&ids);
        return st;
    }
    size_t n_docs = rs->corpus->n_docs;
    if (c->max_docs > 0 && (size_t)c->max_docs < n_docs) n_docs = (size_t)c->max_docs;
    for (size_t d = 0; d < n_docs; d++) {
        ids.n = 0;
        st = kld_tok_encode(rs->tok, rs->corpus->docs[d], rs->corpus->doc_len[d], KLD_TOK_ADD_SPECIAL,
                            &ids, err);
        if (st) {
            kld_error_prefix(err, "%s: document %zu", rs->corpus->name, d + 1);
            break;
        }
        if ((st = plan_doc(rs, ids.ids, (int64_t)ids.n, &cap, err))) break;
        if ((st = keep_tokens(rs, &ids, err))) break;
    }
    kld_tok_ids_free(&ids);
    return st;
}

static json_t *file_json(const char *path, const kld_model *m) {
    json_t *o = json_pack("{s:s,s:s,s:I}", "path", path, "format",
                          kld_format_name(kld_model_source(m)->format), "bytes",
                          (json_int_t)kld_model_source(m)->file_bytes);
    struct stat sb;
    uint8_t d[32];
    char hex[65];
    if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && kld_sha256_file(path, d, NULL) == KLD_OK) {
        kld_hex_digest(d, hex);
        json_object_set_new(o, "sha256", json_string(hex));
    } else {
        json_object_set_new(o, "sha256", json_null());
    }
    const kld_hparams *hp = kld_model_hparams(m);
    json_object_set_new(o, "arch", json_string(hp->arch));
    json_object_set_new(o, "n_vocab", json_integer(hp->n_vocab));
    return o;
}

static json_t *config_json(const run_state *rs, const kld_kl_result *out) {
    const kld_kl_config *c = rs->c;
    char hex[65];
    kld_hex_digest(rs->corpus->sha256, hex);
    json_t *o = json_object();
    json_object_set_new(o, "version", json_string(kld_version()));
    json_object_set_new(o, "ref", file_json(c->ref_path, rs->ref));
    json_object_set_new(o, "arm", file_json(c->arm_path, rs->arm));
    json_object_set_new(o, "corpus", json_pack("{s:s,s:s,s:s,s:I}", "name", rs->corpus->name,
                                               "kind", rs->corpus->kind == KLD_CORPUS_IDS ? "ids" : "text",
                                               "sha256", hex, "documents", (json_int_t)rs->docs_total));
    json_object_set_new(o, "chunking", json_string(c->chunking == KLD_CHUNKING_DOC ? "doc" : "llamacpp"));
    json_object_set_new(o, "ctx", json_integer(c->ctx));
    json_object_set_new(o, "chunk", json_integer(rs->chunk));
    json_object_set_new(o, "max_docs", json_integer(c->max_docs));
    json_object_set_new(o, "max_tokens", json_integer(c->max_tokens));
    json_object_set_new(o, "threads", json_integer(kld_pool_size(rs->pool)));
    json_object_set_new(o, "topk", json_integer(c->topk));
    json_object_set_new(o, "vocab", json_string(out->vocab_note));
    if (out->ctx_note[0]) json_object_set_new(o, "warning", json_string(out->ctx_note));
    json_object_set_new(o, "n_vocab_scored", json_integer(rs->n_vocab));
    return o;
}

/* Scores rows [first_row, n) of a chunk on the pool: each thread fills its
 * static share of rs->recs; the records are then added in order, so the
 * statistics do not depend on the thread count. */
typedef struct score_job {
    run_state *rs;
    const window *win;
    int64_t c0, first_row, n;
    kld_status st[64];
    kld_error err[64];
} score_job;

static int32_t next_token_of(const window *win, int64_t p) {
    return p + 1 == win->len ? win->last_next : win->tokens[p + 1];
}

static void score_task(void *ctx, int ith, int nth) {
    score_job *j = ctx;
    run_state *rs = j->rs;
    int64_t b, e;
    kld_split(j->n - j->first_row, ith, nth, &b, &e);
    size_t nv_ref = (size_t)kld_model_hparams(rs->ref)->n_vocab;
    size_t nv_arm = (size_t)kld_model_hparams(rs->arm)->n_vocab;
    j->st[ith] = KLD_OK;
    for (int64_t k = b; k < e; k++) {
        int64_t p = j->c0 + j->first_row + k;
        kld_status st = kld_position_compute(rs->logits_ref + (size_t)k * nv_ref,
                                             rs->logits_arm + (size_t)k * nv_arm, rs->n_vocab,
                                             next_token_of(j->win, p), rs->c->topk, &rs->recs[k],
                                             &j->err[ith]);
        rs->recs[k].ctx_pos = (uint32_t)p;
        if (st) {
            j->st[ith] = st;
            return;
        }
    }
}

static kld_status score_chunk(run_state *rs, kld_stats *stats, const window *win, int64_t c0,
                              int64_t first_row, int64_t n, kld_error *err) {
    /* llama-perplexity does not score a window's last row */
    if (rs->c->chunking == KLD_CHUNKING_LLAMACPP && c0 + n == win->len) n--;
    if (first_row >= n) return KLD_OK;
    if (rs->common) { /* vocabulary subset: gathered rows, one at a time */
        size_t nv_ref = (size_t)kld_model_hparams(rs->ref)->n_vocab;
        size_t nv_arm = (size_t)kld_model_hparams(rs->arm)->n_vocab;
        for (int64_t r = first_row; r < n; r++) {
            kld_status st = score_row(rs, stats, rs->logits_ref + (size_t)(r - first_row) * nv_ref,
                                      rs->logits_arm + (size_t)(r - first_row) * nv_arm,
                                      next_token_of(win, c0 + r), (uint32_t)(c0 + r), err);
            if (st) return st;
        }
        return KLD_OK;
    }
    score_job *j = calloc(1, sizeof *j);
    if (!j) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    *j = (score_job){.rs = rs, .win = win, .c0 = c0, .first_row = first_row, .n = n};
    kld_pool_run(rs->pool, score_task, j);
    kld_status st = KLD_OK;
    for (int t = 0; t < 64 && !st; t++)
        if (j->st[t]) {
            st = j->st[t];
            if (err) *err = j->err[t];
        }
    for (int64_t k = 0; k < n - first_row && !st; k++) st = kld_stats_add(stats, &rs->recs[k], err);
    free(j);
    return st;
}

/* Feeds one chunk to a session, timing it. */
static kld_status eval_arm(kld_session *s, const int32_t *t, int64_t n, int64_t first_row,
                           float *logits, double *seconds, kld_error *err) {
    double t0 = now_s();
    kld_status st = first_row >= n ? kld_session_eval(s, t, n, NULL, err)
                                   : kld_session_eval_rows(s, t, n, first_row, logits, err);
    *seconds += now_s() - t0;
    return st;
}

static kld_status run_windows(run_state *rs, kld_kl_result *out, kld_error *err) {
    const kld_kl_config *c = rs->c;
    int32_t *buf = malloc((size_t)rs->chunk * sizeof *buf);
    if (!buf) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    int32_t bos = rs->tok ? kld_tok_bos(rs->tok) : -1;
    bool replace_bos = c->chunking == KLD_CHUNKING_LLAMACPP && rs->tok && kld_tok_adds_bos(rs->tok);
    double t_start = now_s();
    uint64_t docs_done = 0;
    kld_status st = KLD_OK;
    for (size_t w = 0; w < rs->n_windows && !st; w++) {
        const window *win = &rs->windows[w];
        if (win->new_doc && (st = kld_stats_begin_doc(out->stats, err))) break;
        kld_session_reset(rs->s_ref);
        kld_session_reset(rs->s_arm);
        for (int64_t c0 = 0; c0 < win->len && !st; c0 += rs->chunk) {
            int64_t n = win->len - c0 < rs->chunk ? win->len - c0 : rs->chunk;
            memcpy(buf, win->tokens + c0, (size_t)n * sizeof *buf);
            if (c0 == 0 && replace_bos) buf[0] = bos;
            int64_t first_row = win->score_from > c0 ? win->score_from - c0 : 0;
            if ((st = eval_arm(rs->s_ref, buf, n, first_row, rs->logits_ref, &out->ref_seconds, err))) break;
            if ((st = eval_arm(rs->s_arm, buf, n, first_row, rs->logits_arm, &out->arm_seconds, err))) break;
            out->ref_tokens += (uint64_t)n;
            out->arm_tokens += (uint64_t)n;
            st = score_chunk(rs, out->stats, win, c0, first_row, n, err);
            if (c->progress) {
                kld_stats_running run;
                kld_stats_get_running(out->stats, &run);
                kld_kl_progress pr = {docs_done, rs->docs_total, run.n_positions, rs->positions_total,
                                      now_s() - t_start, run.kld_mean};
                c->progress(&pr, c->progress_user);
            }
            if (c->stop && *c->stop) {
                out->partial = true;
                goto done;
            }
        }
        if (w + 1 == rs->n_windows || rs->windows[w + 1].new_doc) docs_done++;
    }
done:
    free(buf);
    return st;
}

static kld_status open_all(run_state *rs, kld_kl_result *out, kld_error *err) {
    const kld_kl_config *c = rs->c;
    kld_status st = kld_model_open(c->ref_path, NULL, &rs->ref, err);
    if (!st) st = kld_model_open(c->arm_path, NULL, &rs->arm, err);
    if (st) return st;
    kld_error tok_err = {0};
    if (kld_tok_open_source(kld_model_source(rs->ref), &rs->tok, &tok_err) != KLD_OK) rs->tok = NULL;
    if ((st = check_vocab(rs, out, err))) return st;
    if (c->ids_path) st = kld_corpus_load_ids(c->ids_path, &rs->corpus, err);
    else st = kld_corpus_load_text(c->corpus_path, c->corpus_format, &rs->corpus, err);
    if (!st && !rs->tok && rs->corpus->kind == KLD_CORPUS_TEXT)
        st = kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: cannot read its tokenizer (%s); use --ids-file",
                      c->ref_path, tok_err.msg);
    if (!st) st = plan_windows(rs, err);
    if (st) return st;
    if (rs->positions_total == 0)
        return kld_fail(err, KLD_ERR_ARG, "%s: nothing to score (no tokens)", rs->corpus->name);
    rs->pool = kld_pool_create(c->n_threads);
    if (!rs->pool) return kld_fail(err, KLD_ERR_NOMEM, "cannot start %d threads", c->n_threads);
    /* The caches need only the longest window; a chunk never exceeds it. */
    int64_t ctx = 1;
    for (size_t w = 0; w < rs->n_windows; w++)
        if (rs->windows[w].len > ctx) ctx = rs->windows[w].len;
    rs->chunk = c->chunk < ctx ? c->chunk : ctx;
    /* Longer windows than a model was trained on measure extrapolation, not
     * the model: allowed (llama.cpp allows it too) but said in the report. */
    const kld_hparams *hr = kld_model_hparams(rs->ref), *ha = kld_model_hparams(rs->arm);
    int64_t trained = hr->n_ctx_train < ha->n_ctx_train ? hr->n_ctx_train : ha->n_ctx_train;
    if (trained > 0 && ctx > trained)
        snprintf(out->ctx_note, sizeof out->ctx_note,
                 "windows of up to %lld tokens exceed the training context of %lld (%s)",
                 (long long)ctx, (long long)trained,
                 hr->n_ctx_train <= ha->n_ctx_train ? c->ref_path : c->arm_path);
    if ((st = kld_session_create_shared(rs->ref, ctx, rs->chunk, rs->pool, &rs->s_ref, err))) return st;
    if ((st = kld_session_create_shared(rs->arm, ctx, rs->chunk, rs->pool, &rs->s_arm, err))) return st;
    size_t rows = (size_t)rs->chunk;
    rs->logits_ref = malloc(rows * (size_t)kld_model_hparams(rs->ref)->n_vocab * sizeof(float));
    rs->logits_arm = malloc(rows * (size_t)kld_model_hparams(rs->arm)->n_vocab * sizeof(float));
    rs->recs = malloc(rows * sizeof *rs->recs);
    if (!rs->logits_ref || !rs->logits_arm || !rs->recs)
        return kld_fail(err, KLD_ERR_NOMEM, "out of memory for logits");
    if (kld_pool_size(rs->pool) > 64)
        return kld_fail(err, KLD_ERR_ARG, "at most 64 threads (asked for %d)", kld_pool_size(rs->pool));
    return kld_stats_create(&out->stats, c->topk, err);
}

static void close_all(run_state *rs) {
    free(rs->logits_ref);
    free(rs->logits_arm);
    free(rs->recs);
    kld_session_free(rs->s_ref);
    kld_session_free(rs->s_arm);
    kld_pool_free(rs->pool);
    kld_tok_free(rs->tok);
    kld_model_close(rs->ref);
    kld_model_close(rs->arm);
    kld_corpus_free(rs->corpus);
    for (size_t i = 0; i < rs->n_doc_tokens; i++) free(rs->doc_tokens[i]);
    free(rs->doc_tokens);
    free(rs->windows);
    free(rs->common);
    free(rs->compact_of);
    free(rs->gather_ref);
    free(rs->gather_arm);
}

kld_status kld_kl_run(const kld_kl_config *c, kld_kl_result *out, kld_error *err) {
    memset(out, 0, sizeof *out);
    if (c->ctx < 2 || c->chunk < 1 || c->topk < 1 || !c->ref_path || !c->arm_path)
        return kld_fail(err, KLD_ERR_ARG, "need --ref, --arm, --ctx >= 2, --chunk >= 1, --topk >= 1");
    if (c->chunking == KLD_CHUNKING_LLAMACPP && c->ctx < 4)
        return kld_fail(err, KLD_ERR_ARG, "llamacpp chunking needs --ctx >= 4");
    run_state rs = {.c = c};
    kld_status st = open_all(&rs, out, err);
    if (!st) {
        out->config = config_json(&rs, out);
        double t0 = now_s();
        st = run_windows(&rs, out, err);
        out->elapsed_s = now_s() - t0;
    }
    close_all(&rs);
    if (st) kld_kl_result_free(out);
    return st;
}

void kld_kl_result_free(kld_kl_result *r) {
    kld_stats_free(r->stats);
    json_decref(r->config);
    r->stats = NULL;
    r->config = NULL;
}
