/* kl_driver.c — `kldeval kl`: the configuration → a pair of arms and their
 * shared plan → the drive loop with the scorer as its sink (kl_driver.h). */
#include "eval/kl_driver.h"

#include "engine/pool.h"
#include "eval/checkpoint.h"
#include "eval/merge.h"
#include "eval/outputs.h"
#include "eval/score.h"
#include "store/dump.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <time.h>
#include <unistd.h>

typedef struct run_state {
    const kld_kl_config *c;
    kld_arm_parsed ref_spec, arm_spec;
    kld_arm *ref, *arm;
    kld_pool *pool;
    kld_corpus *corpus;
    kld_plan plan;
    const kld_plan *pl;   /* the plan in use: a saved arm's or our own */
    int32_t *common;      /* two models with --allow-vocab-mismatch: the shared ids */
    int32_t n_common, n_vocab;
    kld_scorer *scorer;
    kld_stats *stats;
    int64_t chunk;
    /* shards: the windows visited (global indices) and where each one's records start */
    size_t *select, n_select, n_seen;
    uint64_t *win_start;
    kld_partial_window *windows;
    /* checkpoints: the run they belong to, chunks since the last one */
    kld_checkpoint_run ck;
    int64_t chunks_since, window_chunks;
    kld_strata *strata;
    const kld_kl_hooks *hooks; /* kld_kl_run_hooked, or NULL */
} run_state;

#define KLD_CHECKPOINT_EVERY_DEFAULT 64

#define KLD_CTX_DEFAULT 512

void kld_kl_config_defaults(kld_kl_config *c) {
    memset(c, 0, sizeof *c);
    c->corpus_format = "auto";
    c->chunk = 128;
    c->chunking = KLD_CHUNKING_DEFAULT;
    c->topk = KLD_TOPK_DEFAULT;
}

static int64_t ctx_of(const kld_kl_config *c) { return c->ctx > 0 ? c->ctx : KLD_CTX_DEFAULT; }
static kld_chunking chunking_of(const kld_kl_config *c) {
    return c->chunking == KLD_CHUNKING_DEFAULT ? KLD_CHUNKING_DOC : c->chunking;
}

/* Two models: compares the vocabularies token by token (by spelling). With
 * --allow-vocab-mismatch the ids spelled alike in both (below the smaller
 * size) become the scored subset. */
static kld_status check_vocab(run_state *rs, kld_kl_result *out, kld_error *err) {
    const kld_arm *r = rs->ref, *a = rs->arm;
    rs->n_vocab = r->n_vocab < a->n_vocab ? r->n_vocab : a->n_vocab;
    bool spelled = r->tok && a->tok;
    int32_t *common = malloc((size_t)rs->n_vocab * sizeof *common);
    if (!common) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    int64_t first_diff = r->n_vocab != a->n_vocab ? rs->n_vocab : -1;
    int32_t n_common = 0;
    for (int32_t i = 0; i < rs->n_vocab; i++) {
        bool same = true;
        if (spelled) {
            size_t la = 0, lb = 0;
            const char *x = kld_tok_piece(r->tok, i, &la), *y = kld_tok_piece(a->tok, i, &lb);
            same = (x == NULL) == (y == NULL) && la == lb && (!x || memcmp(x, y, la) == 0);
        }
        if (!same && (first_diff < 0 || i < first_diff)) first_diff = i;
        if (same) common[n_common++] = i;
    }
    if (spelled)
        snprintf(out->vocab_note, sizeof out->vocab_note, "%s (%d tokens compared by spelling)",
                 first_diff < 0 ? "identical" : "different", rs->n_vocab);
    else
        snprintf(out->vocab_note, sizeof out->vocab_note, "sizes only (%s has no readable tokenizer)",
                 r->tok ? "the arm" : "the reference");
    if (first_diff < 0) {
        free(common);
        return KLD_OK;
    }
    rs->common = common;
    rs->n_common = n_common;
    if (!rs->c->allow_vocab_mismatch)
        return kld_fail(err, KLD_ERR_MISMATCH,
                        "vocabularies differ: %s has %d tokens, %s has %d; first differing id "
                        "%lld (use --allow-vocab-mismatch to score the ids both share)",
                        r->path, (int)r->n_vocab, a->path, (int)a->n_vocab, (long long)first_diff);
    if (n_common < 2)
        return kld_fail(err, KLD_ERR_MISMATCH, "vocabularies share %d ids: nothing to compare", n_common);
    snprintf(out->vocab_note, sizeof out->vocab_note,
             "MISMATCH allowed: %d of %d/%d ids are spelled alike in both and only they are "
             "scored (distributions renormalised over them)",
             n_common, (int)r->n_vocab, (int)a->n_vocab);
    return KLD_OK;
}

/* A dump against a model: the tokenizer fingerprint and vocabulary size
 * recorded in the manifest must be the arm's. */
static kld_status check_dump_vocab(run_state *rs, const kld_dump_meta *m, kld_kl_result *out,
                                   kld_error *err) {
    const kld_arm *a = rs->arm;
    char fp[65] = "";
    if (a->tok) kld_tok_fingerprint(a->tok, fp);
    bool size_differs = m->n_vocab > 0 && m->n_vocab != a->n_vocab;
    bool tok_differs = m->tokenizer_fingerprint && fp[0] && strcmp(m->tokenizer_fingerprint, fp);
    snprintf(out->vocab_note, sizeof out->vocab_note, "%s",
             tok_differs || size_differs ? "DIFFERENT tokenizer (allowed)"
             : m->tokenizer_fingerprint && fp[0] ? "identical (tokenizer fingerprints agree)"
                                                : "not compared (the dump records no tokenizer fingerprint)");
    if ((tok_differs || size_differs) && !rs->c->allow_vocab_mismatch)
        return kld_fail(err, KLD_ERR_MISMATCH,
                        "%s/manifest.json: %s: dump made with a different tokenizer than %s's "
                        "(use --allow-vocab-mismatch to score anyway)",
                        rs->ref->path, size_differs ? "n_vocab" : "tokenizer_fingerprint", a->path);
    rs->n_vocab = a->n_vocab;
    return KLD_OK;
}

/* Windows longer than a model was trained on measure extrapolation, not
 * the model: allowed for corpora (as llama.cpp allows it) but said in the
 * report; a saved arm's fixed windows need --allow-long-context. */
static kld_status check_context(run_state *rs, kld_kl_result *out, kld_error *err) {
    int64_t ctx = rs->pl->max_len, trained = 0;
    const char *who = NULL;
    kld_arm *arms[2] = {rs->ref, rs->arm};
    for (int i = 0; i < 2; i++)
        if (arms[i]->n_ctx_train > 0 && (trained == 0 || arms[i]->n_ctx_train < trained)) {
            trained = arms[i]->n_ctx_train;
            who = arms[i]->path;
        }
    if (trained == 0 || ctx <= trained) return KLD_OK;
    snprintf(out->ctx_note, sizeof out->ctx_note,
             "windows of up to %lld tokens exceed the training context of %lld (%s)",
             (long long)ctx, (long long)trained, who);
    if (rs->pl != &rs->plan && !rs->c->allow_long_context)
        return kld_fail(err, KLD_ERR_ARG,
                        "%s: ctx_len %lld exceeds the training context %lld of %s "
                        "(--allow-long-context to score anyway)",
                        rs->ref->path, (long long)ctx, (long long)trained, who);
    return KLD_OK;
}

/* A saved reference against its arm: the candidate dump must be of the
 * teacher's windows; a model arm must have the teacher's tokenizer. */
static kld_status check_saved_pair(run_state *rs, kld_kl_result *out, kld_error *err) {
    const kld_dump_meta *m = kld_dump_meta_of(kld_arm_dump(rs->ref));
    if (rs->arm_spec.spec.kind != KLD_ARM_CANDIDATE) return check_dump_vocab(rs, m, out, err);
    const kld_dump_meta *am = kld_dump_meta_of(kld_arm_dump(rs->arm));
    /* a hidden-state candidate has full rows: only the windows must agree */
    if ((am->format_version != 3 && am->top_k != m->top_k) || am->n_seqs != m->n_seqs ||
        am->ctx_len != m->ctx_len || strcmp(am->corpus_sha256, m->corpus_sha256))
        return kld_fail(err, KLD_ERR_MISMATCH,
                        "%s/manifest.json: top_k/n_seqs/ctx_len/corpus_sha256 (%d/%lld/%lld/%.12s) "
                        "differ from the teacher's (%d/%lld/%lld/%.12s)",
                        rs->arm->path, (int)am->top_k, (long long)am->n_seqs,
                        (long long)am->ctx_len, am->corpus_sha256, (int)m->top_k,
                        (long long)m->n_seqs, (long long)m->ctx_len, m->corpus_sha256);
    rs->n_vocab = (int32_t)(m->n_vocab > 0 ? m->n_vocab : 0);
    snprintf(out->vocab_note, sizeof out->vocab_note, "%s",
             am->format_version == 3 ? "the candidate dump's hidden states, through its own head"
                                     : "the candidate dump holds the teacher's ids");
    return KLD_OK;
}

/* Two models (or a model and its self-flag session, or a model and an
 * endpoint): the corpus, tokenized once with the reference's tokenizer (the
 * arm's when the reference is an endpoint), cut into the configured
 * windows; an endpoint's own tokenizer is then checked on the documents. */
static kld_status plan_corpus(run_state *rs, kld_kl_result *out, kld_error *err) {
    const kld_kl_config *c = rs->c;
    kld_arm *tk = rs->ref->model ? rs->ref : rs->arm, *endpoint = rs->ref->model ? rs->arm : rs->ref;
    bool second = rs->ref->model && rs->arm_spec.spec.kind == KLD_ARM_MODEL;
    kld_plan_input in = {c->corpus_path, c->corpus_format, c->ids_path, tk->path,
                         kld_model_source(tk->model), tk->tok,
                         second ? kld_model_source(rs->arm->model) : NULL,
                         second ? rs->arm->tok : NULL,
                         {chunking_of(c), ctx_of(c), c->max_docs, c->max_tokens, c->max_chunks,
                          false, rs->n_vocab}};
    kld_status st = kld_plan_corpus_load(&in, &rs->corpus, &rs->plan, err);
    if (st) return st;
    rs->pl = &rs->plan;
    if (strcmp(endpoint->kind, "endpoint")) return KLD_OK;
    if (chunking_of(c) == KLD_CHUNKING_LLAMACPP) { /* the file is tokenized whole, not per document */
        snprintf(out->vocab_note, sizeof out->vocab_note,
                 "echoed ids checked on every request (--chunking llamacpp: no per-document /tokenize check)");
        return KLD_OK;
    }
    /* the documents of the plan: the corpus's first max_docs */
    size_t n_docs = c->max_docs > 0 && (size_t)c->max_docs < rs->corpus->n_docs ? (size_t)c->max_docs
                                                                                 : rs->corpus->n_docs;
    bool checked = false;
    if ((st = kld_arm_endpoint_check_tokens(endpoint, rs->corpus, tk->tok, n_docs, &checked, err))) return st;
    snprintf(out->vocab_note, sizeof out->vocab_note, "%s", checked
             ? "the endpoint's /tokenize gives kldeval's ids for every document; echoed ids checked"
             : "echoed ids checked on every request (the endpoint has no /tokenize)");
    return KLD_OK;
}

static const char *mode_of(kld_arm_kind ref, kld_arm_kind arm) {
    if (ref == KLD_ARM_TEACHER) return arm == KLD_ARM_CANDIDATE ? "candidate-dumps" : "saved-teacher";
    if (ref == KLD_ARM_LLAMACPP_BASE) return "llamacpp-base";
    return arm == KLD_ARM_SELF ? "self-flag" : "two-models";
}

/* Both arms, each opened by its spec (the one that needs the other second). */
static kld_status open_arms(run_state *rs, kld_kl_result *out, kld_error *err) {
    kld_status st;
    out->mode = mode_of(rs->ref_spec.spec.kind, rs->arm_spec.spec.kind);
    if (kld_arm_spec_opens_second(&rs->ref_spec)) {
        if ((st = kld_arm_open_spec(&rs->arm_spec, NULL, &rs->arm, err)) ||
            (st = kld_arm_open_spec(&rs->ref_spec, rs->arm, &rs->ref, err)))
            return st;
    } else if ((st = kld_arm_open_spec(&rs->ref_spec, NULL, &rs->ref, err)) ||
               (st = kld_arm_open_spec(&rs->arm_spec, rs->ref, &rs->arm, err))) {
        return st;
    }
    if (rs->ref->plan) { /* a saved reference brings its windows */
        rs->pl = rs->ref->plan;
        if (rs->ref_spec.spec.kind == KLD_ARM_TEACHER) return check_saved_pair(rs, out, err);
        rs->n_vocab = rs->arm->n_vocab;
        snprintf(out->vocab_note, sizeof out->vocab_note, "sizes only (the base file has %d ids)",
                 (int)rs->arm->n_vocab);
        return KLD_OK;
    }
    if ((st = check_vocab(rs, out, err))) return st;
    return plan_corpus(rs, out, err);
}

/* How the report names the arms and the corpus. */
static void labels(const run_state *rs, const json_t *config, kld_kl_result *out) {
    const kld_kl_config *c = rs->c;
    const kld_arm_spec *r = &rs->ref_spec.spec, *a = &rs->arm_spec.spec;
    const char *lv;
    if (r->kind == KLD_ARM_TEACHER) {
        lv = json_string_value(json_object_get(json_object_get(config, "ref"), "levers"));
        snprintf(out->ref_label, sizeof out->ref_label, "%s (levers: %s)", r->path, lv ? lv : "unknown");
    } else {
        snprintf(out->ref_label, sizeof out->ref_label, "%s", r->path);
    }
    if (a->kind == KLD_ARM_CANDIDATE) {
        lv = json_string_value(json_object_get(json_object_get(config, "arm"), "levers"));
        snprintf(out->arm_label, sizeof out->arm_label, "%s (levers: %s)", a->path, lv ? lv : "unknown");
    } else if (a->kind == KLD_ARM_SELF) {
        snprintf(out->arm_label, sizeof out->arm_label, "%s [%s%s]", r->path,
                 a->levers ? a->levers : "reference", a->decode ? ", decode" : "");
    } else {
        snprintf(out->arm_label, sizeof out->arm_label, "%s", a->path);
    }
    snprintf(out->corpus_label, sizeof out->corpus_label, "%s",
             c->ids_path ? c->ids_path : c->corpus_path ? c->corpus_path
             : rs->ref->plan ? r->path : "built-in");
}

static json_t *config_json(const run_state *rs, const kld_kl_result *out) {
    const kld_kl_config *c = rs->c;
    json_t *o = json_object();
    json_object_set_new(o, "version", json_string(kld_version()));
    json_object_set_new(o, "mode", json_string(out->mode));
    json_object_set_new(o, "ref", json_deep_copy(kld_arm_desc(rs->ref)));
    json_object_set_new(o, "arm", json_deep_copy(kld_arm_desc(rs->arm)));
    if (rs->corpus) {
        char hex[65];
        kld_hex_digest(rs->corpus->sha256, hex);
        json_t *co = json_pack("{s:s,s:s,s:s,s:I}", "name", rs->corpus->name, "kind",
                               rs->corpus->kind == KLD_CORPUS_IDS ? "ids" : "text", "sha256", hex,
                               "documents", (json_int_t)rs->pl->docs_total);
        kld_corpus_forms_json(rs->corpus, co);
        json_object_set_new(o, "corpus", co);
    } else {
        const kld_dump *d = kld_arm_dump(rs->ref);
        json_object_set_new(o, "corpus", json_pack("{s:s,s:s,s:s?,s:I}", "name", rs->ref->path,
                                                   "kind", "saved", "sha256",
                                                   d ? kld_dump_meta_of(d)->corpus_sha256 : NULL,
                                                   "documents", (json_int_t)rs->pl->docs_total));
    }
    json_object_set_new(o, "chunking", json_string(kld_chunking_name(rs->pl->chunking)));
    json_object_set_new(o, "windows", json_string(rs->pl->note));
    json_object_set_new(o, "ctx", json_integer(rs->pl == &rs->plan ? ctx_of(c) : rs->pl->max_len));
    json_object_set_new(o, "chunk", json_integer(rs->chunk));
    json_object_set_new(o, "max_docs", json_integer(c->max_docs));
    json_object_set_new(o, "max_tokens", json_integer(c->max_tokens));
    json_object_set_new(o, "threads", json_integer(kld_pool_size(rs->pool)));
    json_object_set_new(o, "topk", json_integer(kld_stats_topk(rs->stats)));
    json_object_set_new(o, "vocab", json_string(out->vocab_note));
    if (out->ctx_note[0]) json_object_set_new(o, "warning", json_string(out->ctx_note));
    json_object_set_new(o, "n_vocab_scored", json_integer(rs->common ? rs->n_common : rs->n_vocab));
    kld_strata_config_json(rs->strata, o);
    return o;
}

static kld_status sink_rows(void *user, const kld_window *w, size_t wi, const kld_rows *ref,
                            const kld_rows *arm, kld_error *err) {
    run_state *rs = user;
    kld_status st = kld_scorer_rows(rs->scorer, w, ref, arm, rs->stats, err);
    if (!st && rs->hooks && rs->hooks->rows) st = rs->hooks->rows(rs->hooks->user, w, wi, ref, arm, err);
    return st;
}

/* A checkpoint of the first n windows visited (all complete). */
static kld_status checkpoint(run_state *rs, size_t n, kld_error *err) {
    uint64_t end = n < rs->n_seen ? rs->win_start[n] : kld_stats_count(rs->stats);
    return kld_checkpoint_write(&rs->ck, rs->stats, rs->windows, rs->win_start, n, end, err);
}

static kld_status sink_window(void *user, const kld_window *w, size_t wi, kld_error *err) {
    run_state *rs = user;
    /* every window before this one is complete: a checkpoint may be due */
    if (rs->c->checkpoint && rs->n_seen > 0) {
        int64_t every = rs->c->checkpoint_every > 0 ? rs->c->checkpoint_every
                                                    : KLD_CHECKPOINT_EVERY_DEFAULT;
        rs->chunks_since += rs->window_chunks;
        if (rs->chunks_since >= every) {
            kld_status st = checkpoint(rs, rs->n_seen, err);
            if (st) return st;
            rs->chunks_since = 0;
        }
    }
    rs->window_chunks = (w->len + rs->chunk - 1) / rs->chunk;
    if (rs->n_seen < rs->n_select) {
        rs->windows[rs->n_seen] = (kld_partial_window){wi, 0, w->new_doc};
        rs->win_start[rs->n_seen++] = kld_stats_count(rs->stats);
    }
    return w->new_doc ? kld_stats_begin_doc(rs->stats, err) : KLD_OK;
}

/* Scale-out: the shard's windows (all of them without --shard), and room to
 * log each one's records for a partial. */
static kld_status select_windows(run_state *rs, kld_error *err) {
    kld_shard all = {0, 1, KLD_SHARD_MOD};
    const kld_shard *s = rs->c->shard.n ? &rs->c->shard : &all;
    kld_status st = kld_plan_shard(rs->pl, s, &rs->select, &rs->n_select, err);
    if (st) return st;
    size_t n = rs->n_select ? rs->n_select : 1;
    rs->win_start = malloc(n * sizeof *rs->win_start);
    rs->windows = malloc(n * sizeof *rs->windows);
    return rs->win_start && rs->windows ? KLD_OK : kld_fail(err, KLD_ERR_NOMEM, "out of memory");
}

/* Each logged window's record count, once the drive is over. */
static void close_windows(run_state *rs, kld_kl_result *out) {
    size_t total = kld_stats_count(rs->stats);
    for (size_t j = 0; j < rs->n_seen; j++) {
        uint64_t end = j + 1 < rs->n_seen ? rs->win_start[j + 1] : total;
        rs->windows[j].n_records = (uint32_t)(end - rs->win_start[j]);
    }
    out->windows = rs->windows;
    out->n_windows = rs->n_seen;
    out->n_windows_total = rs->pl->n_windows;
    rs->windows = NULL;
}
static kld_status prepare(run_state *rs, kld_kl_result *out, kld_error *err) {
    const kld_kl_config *c = rs->c;
    kld_status st = open_arms(rs, out, err);
    if (st) return st;
    if ((st = check_context(rs, out, err))) return st;
    rs->pool = kld_pool_create(c->n_threads);
    if (!rs->pool) return kld_fail(err, KLD_ERR_NOMEM, "cannot start %d threads", c->n_threads);
    /* The caches need only the longest window; a chunk never exceeds it. */
    rs->chunk = c->chunk < rs->pl->max_len ? c->chunk : rs->pl->max_len;
    /* the whole plan's passes, also in a shard of it: an upper bound */
    const int64_t passes = kld_plan_passes(rs->pl, rs->chunk);
    if ((st = rs->ref->ops->prepare(rs->ref, rs->pool, rs->pl->max_len, rs->chunk, passes, err))) return st;
    if ((st = rs->arm->ops->prepare(rs->arm, rs->pool, rs->pl->max_len, rs->chunk, passes, err))) return st;
    int topk = c->topk;
    const kld_dump *d = kld_arm_dump(rs->ref);
    int32_t ref_nv = rs->n_vocab;
    if (d) {
        const kld_dump_meta *m = kld_dump_meta_of(d);
        if (m->format_version != 3 && m->top_k < topk) topk = m->top_k; /* 3: full rows */
        ref_nv = (int32_t)(m->n_vocab > 0 ? m->n_vocab : rs->n_vocab);
    }
    if (rs->n_vocab > 0 && topk > rs->n_vocab) topk = rs->n_vocab;
    const kld_arm *named = rs->ref->tok ? rs->ref : rs->arm;
    if ((st = kld_strata_bind(rs->strata, named->tok, rs->n_vocab > 0 ? rs->n_vocab : ref_nv,
                              rs->corpus && rs->corpus->n_chat_docs, named->path, err)))
        return st;
    kld_scorer_opts so = {topk, rs->chunk, rs->n_vocab, rs->common, rs->n_common, ref_nv, rs->strata};
    if (so.n_vocab <= 0) so.n_vocab = ref_nv > 0 ? ref_nv : 1;
    if ((st = kld_scorer_create(rs->pool, &so, &rs->scorer, err))) return st;
    if ((st = select_windows(rs, err))) return st;
    if (rs->hooks && rs->hooks->prepared &&
        (st = rs->hooks->prepared(rs->hooks->user, rs->ref, rs->arm, err)))
        return st;
    return kld_stats_create(&rs->stats, topk, err);
}

static void close_all(run_state *rs) {
    kld_scorer_free(rs->scorer);
    kld_strata_free(rs->strata);
    kld_arm_free(rs->arm); /* first: a self-flag arm borrows the reference's model */
    kld_arm_free(rs->ref);
    kld_pool_free(rs->pool);
    kld_corpus_free(rs->corpus);
    kld_plan_free(&rs->plan);
    free(rs->common);
    free(rs->select);
    free(rs->win_start);
    free(rs->windows);
}

/* A role stratum to score alone needs conversations in the corpus: known
 * from the corpus file itself, before any model loads. */
static kld_status check_chat_corpus(const kld_kl_config *c, kld_error *err) {
    kld_arm_kind r = c->ref.kind;
    if (r == KLD_ARM_TEACHER || r == KLD_ARM_LLAMACPP_BASE || c->ids_path || !c->corpus_path)
        return kld_fail(err, KLD_ERR_ARG, "--score-only %s: role strata need a chat corpus (--corpus "
                        "FILE.jsonl with {\"messages\": ...} lines); %s has no turns", c->score_only,
                        c->ids_path ? c->ids_path : r == KLD_ARM_TEACHER || r == KLD_ARM_LLAMACPP_BASE
                                                        ? c->ref.path : "the built-in corpus");
    kld_corpus *corpus = NULL;
    kld_status st = kld_corpus_load_text(c->corpus_path, c->corpus_format, &corpus, err);
    if (!st && corpus->n_chat_docs == 0)
        st = kld_fail(err, KLD_ERR_ARG, "--score-only %s: %s has no conversations ({\"messages\": ...} "
                      "lines): no turn has a role", c->score_only, c->corpus_path);
    kld_corpus_free(corpus);
    return st;
}

/* The configuration's own rules (kld_kl_check), the arms' parsed into rs. */
static kld_status check_config(const kld_kl_config *c, run_state *rs, kld_error *err) {
    kld_status st;
    if ((st = kld_arm_spec_parse(&c->ref, "reference", &rs->ref_spec, err)) ||
        (st = kld_arm_spec_parse(&c->arm, "arm", &rs->arm_spec, err)) ||
        (st = kld_arm_pair_check(&rs->ref_spec, &rs->arm_spec, err)))
        return st;
    if (c->ctx != 0 && (c->ctx < 2 || c->ctx > (1 << 24)))
        return kld_fail(err, KLD_ERR_ARG, "--ctx %lld outside 2 .. 16777216", (long long)c->ctx);
    if (c->chunk < 1 || c->chunk > (1 << 16))
        return kld_fail(err, KLD_ERR_ARG, "--chunk %lld outside 1 .. 65536", (long long)c->chunk);
    if (c->topk < 1 || c->topk > KLD_TOPK_MAX)
        return kld_fail(err, KLD_ERR_ARG, "--topk %d outside 1 .. %d", c->topk, KLD_TOPK_MAX);
    if (c->max_docs < 0 || c->max_tokens < 0 || c->max_chunks < 0)
        return kld_fail(err, KLD_ERR_ARG, "--max-docs, --max-tokens and --chunks must be >= 0");
    if (c->chunking < KLD_CHUNKING_DEFAULT || c->chunking > KLD_CHUNKING_STREAM)
        return kld_fail(err, KLD_ERR_ARG, "--chunking %d is none of doc, llamacpp, stream", (int)c->chunking);
    if (c->corpus_format && strcmp(c->corpus_format, "auto") && strcmp(c->corpus_format, "text") &&
        strcmp(c->corpus_format, "jsonl"))
        return kld_fail(err, KLD_ERR_ARG, "--corpus-format expects auto, text or jsonl, got '%s'",
                        c->corpus_format);
    if (c->checkpoint_every < 0)
        return kld_fail(err, KLD_ERR_ARG, "--checkpoint-every %lld must be >= 0",
                        (long long)c->checkpoint_every);
    if (c->resume && !c->checkpoint)
        return kld_fail(err, KLD_ERR_ARG, "resume needs the checkpoint file (--resume FILE)");
    if (c->shard.n && c->shard.k >= c->shard.n)
        return kld_fail(err, KLD_ERR_ARG, "--shard %u/%u: K must be below N", c->shard.k, c->shard.n);
    kld_arm_kind r = rs->ref_spec.spec.kind;
    if ((r == KLD_ARM_TEACHER || r == KLD_ARM_LLAMACPP_BASE) &&
        (c->corpus_path || c->ids_path || c->chunking != KLD_CHUNKING_DEFAULT || c->ctx ||
         c->max_docs || c->max_tokens || c->max_chunks))
        return kld_fail(err, KLD_ERR_ARG, "%s %s brings its own tokens and windows: --corpus, "
                        "--ids-file, --chunking, --ctx, --chunks, --max-docs and --max-tokens do not "
                        "apply", r == KLD_ARM_TEACHER ? "--reference-logits" : "--llamacpp-base",
                        c->ref.path);
    if (c->ids_path && c->corpus_path)
        return kld_fail(err, KLD_ERR_ARG, "give --corpus or --ids-file, not both (%s, %s)",
                        c->corpus_path, c->ids_path);
    kld_chunking ch = chunking_of(c);
    if (ch == KLD_CHUNKING_LLAMACPP && ctx_of(c) < 4)
        return kld_fail(err, KLD_ERR_ARG, "--chunking llamacpp needs --ctx >= 4, got %lld",
                        (long long)ctx_of(c));
    /* a limit the chosen chunking ignores would silently score everything */
    if (ch == KLD_CHUNKING_DOC && c->max_chunks > 0)
        return kld_fail(err, KLD_ERR_ARG, "--chunks applies to --chunking llamacpp or stream "
                        "(%lld given; doc chunking: --max-docs, --max-tokens)", (long long)c->max_chunks);
    if (ch == KLD_CHUNKING_LLAMACPP && (c->max_docs > 0 || c->max_tokens > 0))
        return kld_fail(err, KLD_ERR_ARG, "--max-docs and --max-tokens apply to --chunking doc "
                        "(llamacpp chunking: --chunks)");
    if ((st = kld_strata_parse(c->strata, c->score_only, &rs->strata, err))) return st;
    return kld_strata_needs_roles(rs->strata) ? check_chat_corpus(c, err) : KLD_OK;
}

kld_status kld_kl_check(const kld_kl_config *c, kld_error *err) {
    run_state rs = {.c = c};
    kld_status st = check_config(c, &rs, err);
    kld_strata_free(rs.strata);
    return st;
}

kld_status kld_kl_check_outputs(const kld_kl_config *c, const char *const *what,
                                const char *const *paths, int n, kld_error *err) {
    kld_arm_parsed p[2];
    kld_status st;
    if ((st = kld_arm_spec_parse(&c->ref, "reference", &p[0], err)) ||
        (st = kld_arm_spec_parse(&c->arm, "arm", &p[1], err)))
        return st;
    /* the corpus readable now, not after both models have loaded */
    if ((st = kld_input_check("--corpus", c->corpus_path, err)) ||
        (st = kld_input_check("--ids-file", c->ids_path, err)))
        return st;
    /* the inputs: both arms' files, the corpus, and the levers' files */
    const char *files[32] = {c->ref.path, c->arm.path, c->corpus_path, c->ids_path};
    int n_files = 4;
    for (int k = 0; k < 2; k++) {
        if (p[k].levers.lora_path[0]) files[n_files++] = p[k].levers.lora_path;
        if (p[k].levers.kv_config[0]) files[n_files++] = p[k].levers.kv_config;
    }
    for (int i = 0; i < n && n_files < 32; i++) {
        if (!paths[i]) continue;
        if ((st = kld_output_check(what[i], paths[i], files, n_files, err))) return st;
        files[n_files++] = paths[i]; /* outputs may not be each other either */
    }
    if (c->checkpoint) {
        const char *flag = c->resume ? "--resume" : "--checkpoint";
        if (c->resume && access(c->checkpoint, R_OK) != 0)
            return kld_fail(err, KLD_ERR_IO, "%s %s: %s", flag, c->checkpoint, strerror(errno));
        if ((st = kld_output_check(flag, c->checkpoint, files, n_files, err))) return st;
    }
    return KLD_OK;
}

kld_status kld_kl_run(const kld_kl_config *c, kld_kl_result *out, kld_error *err) {
    return kld_kl_run_hooked(c, NULL, out, err);
}

kld_status kld_kl_run_hooked(const kld_kl_config *c, const kld_kl_hooks *hooks,
                             kld_kl_result *out, kld_error *err) {
    memset(out, 0, sizeof *out);
    run_state rs = {.c = c, .hooks = hooks};
    kld_status st = check_config(c, &rs, err);
    if (st) {
        kld_strata_free(rs.strata);
        return st;
    }
    st = prepare(&rs, out, err);
    if (!st) {
        out->config = config_json(&rs, out);
        labels(&rs, out->config, out);
        kld_eval_hash(out->config, out->eval_hash);
        if (c->shard.n) kld_shard_annotate(out->config, &c->shard, rs.n_select, out->eval_hash);
        rs.ck = (kld_checkpoint_run){c->checkpoint, out->config, out->eval_hash, c->shard,
                                     rs.pl->n_windows, rs.select, rs.n_select};
        if (c->resume)
            st = kld_checkpoint_load(&rs.ck, rs.stats, rs.windows, rs.win_start, &rs.n_seen, err);
        kld_drive_opts d = {rs.pl, rs.ref, rs.arm, rs.chunk, 0, rs.stats, c->stop, c->progress,
                            c->progress_user, rs.select + rs.n_seen, rs.n_select - rs.n_seen};
        kld_sink sink = {sink_rows, sink_window, &rs};
        double t0 = kld_now_s();
        if (!st) st = kld_drive(&d, &sink, &out->partial, err);
        /* the last state: every window, or those a stop left complete */
        if (!st && c->checkpoint)
            st = checkpoint(&rs, out->partial && rs.n_seen ? rs.n_seen - 1 : rs.n_seen, err);
        out->elapsed_s = kld_now_s() - t0;
        out->ref_seconds = rs.ref->seconds;
        out->arm_seconds = rs.arm->seconds;
        out->ref_tokens = rs.ref->tokens;
        out->arm_tokens = rs.arm->tokens;
        close_windows(&rs, out);
        out->stats = rs.stats;
        rs.stats = NULL;
        out->strata = rs.strata;
        rs.strata = NULL;
    }
    kld_stats_free(rs.stats);
    close_all(&rs);
    if (st) kld_kl_result_free(out);
    return st;
}

void kld_kl_result_free(kld_kl_result *r) {
    kld_stats_free(r->stats);
    kld_strata_free(r->strata);
    r->strata = NULL;
    json_decref(r->config);
    free(r->windows);
    r->stats = NULL;
    r->config = NULL;
    r->windows = NULL;
}
