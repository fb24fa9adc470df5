/* dump_driver.c — `kldeval dump` (dump_driver.h): builds the plan (from the
 * corpus, or a teacher dump's tokens for a candidate dump), drives the model
 * arm over it and writes each chunk's rows with the store's writers. */
#include "eval/dump_driver.h"

#include "eval/arm.h"
#include "eval/dump_shard.h"
#include "eval/head.h"
#include "eval/outputs.h"
#include "tensor/types.h"
#include "store/dump.h"
#include "store/lcpp_base.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>

typedef struct dump_state {
    const kld_dump_config *c;
    kld_arm *model, *teacher;
    kld_corpus *corpus;
    kld_plan plan;
    const kld_plan *pl;
    kld_pool *pool;
    kld_dump_writer *dw;
    kld_lcpp_base_writer *lw;
    int32_t *fed;          /* n_seqs × ctx tokens as fed (dump tokens.bin) */
    int32_t k;
    int format_version;    /* 1: float16 logits (kld_row_as_f16), 2: float32, 3: hidden states */
    float *rounded, *rounded_logits; /* format 3, bf16/f16: the rows as stored, through the head */
    double round_sum, round_max;     /* their KL from the float32 rows */
    uint64_t round_n;
    /* one chunk of records */
    int32_t *idx, *argmax;
    float *val, *lse32;
    double *lse64, *logp_next;
    int64_t chunk;
    kld_dump_result *res;
    /* a shard: its windows (global indices, ascending) */
    size_t *select, n_select;
    int64_t *held;
    char *shard_json;
} dump_state;

void kld_dump_config_defaults(kld_dump_config *c) {
    memset(c, 0, sizeof *c);
    c->corpus_format = "auto";
    c->ctx = 512;
    c->chunk = 128;
    c->top_k = 256;
    c->format_version = 0;
    c->chunking = KLD_CHUNKING_DEFAULT; /* stream; llamacpp for a base file */
}

static kld_chunking chunking_of(const kld_dump_config *c) {
    if (c->chunking != KLD_CHUNKING_DEFAULT) return c->chunking;
    return c->llamacpp ? KLD_CHUNKING_LLAMACPP : KLD_CHUNKING_STREAM;
}

/* ---- sinks ---- */

static kld_status write_lcpp(void *user, const kld_window *w, size_t wi, const kld_rows *rows,
                             const kld_rows *unused, kld_error *err) {
    (void)w, (void)wi, (void)unused;
    dump_state *ds = user;
    ds->res->n_records += (uint64_t)rows->n;
    return kld_lcpp_base_write(ds->lw, rows->logits, rows->n, err);
}

/* What rounding the hidden states to the stored dtype does to the
 * distributions: the rounded rows through the same head, KL from the
 * float32 rows (kept in the manifest as hidden_rounding). */
static kld_status measure_rounding(dump_state *ds, const kld_window *w, const kld_rows *d,
                                   kld_error *err) {
    int64_t E = kld_model_hparams(ds->model->model)->n_embd, nv = d->n_vocab;
    for (int64_t i = 0; i < d->n * E; i++) {
        uint16_t b = ds->c->hidden_dtype == KLD_DUMP_HIDDEN_F16 ? kld_f32_to_f16(d->hidden[i])
                                                                 : kld_f32_to_bf16(d->hidden[i]);
        ds->rounded[i] = ds->c->hidden_dtype == KLD_DUMP_HIDDEN_F16 ? kld_f16_to_f32(b)
                                                                     : kld_bf16_to_f32(b);
    }
    kld_status st = kld_session_head(kld_arm_model_session(ds->model), ds->rounded, d->n,
                                     ds->rounded_logits, err);
    for (int64_t r = 0; r < d->n && !st; r++) {
        kld_position pos;
        st = kld_position_compute(d->logits + r * nv, ds->rounded_logits + r * nv, (int32_t)nv,
                                  kld_window_next(w, d->row0 + r), 1, &pos, err);
        ds->round_sum += pos.kld;
        if (pos.kld > ds->round_max) ds->round_max = pos.kld;
        ds->round_n++;
    }
    return st;
}

/* Format 3: each row's final-norm hidden state, and the sidecar from its
 * logits (log-sum-exp, log p(next), argmax). */
static kld_status write_hidden(dump_state *ds, const kld_window *w, size_t wi, const kld_rows *d,
                               kld_error *err) {
    int32_t nv = d->n_vocab;
    for (int64_t r = 0; r < d->n; r++) {
        const float *row = d->logits + (size_t)r * (size_t)nv;
        kld_row_lse_argmax(row, nv, &ds->lse64[r], &ds->argmax[r]);
        int32_t next = kld_window_next(w, d->row0 + r);
        ds->logp_next[r] = next >= 0 ? (double)row[next] - ds->lse64[r] : NAN;
    }
    kld_status st;
    if (ds->c->hidden_dtype != KLD_DUMP_HIDDEN_F32 && (st = measure_rounding(ds, w, d, err))) return st;
    ds->res->n_records += (uint64_t)d->n;
    return kld_dump_write_hidden(ds->dw, (int64_t)wi, d->row0, d->n, d->hidden, ds->lse64,
                                 ds->logp_next, ds->argmax, err);
}

/* A teacher record per dense row (ref = the model), or a candidate record
 * per teacher row (ref = the teacher dump, arm = the model). */
static kld_status write_dump(void *user, const kld_window *w, size_t wi, const kld_rows *ref,
                             const kld_rows *arm, kld_error *err) {
    dump_state *ds = user;
    const kld_rows *dense = arm ? arm : ref;
    if (ds->format_version == 3) return write_hidden(ds, w, wi, dense, err);
    int32_t k = ds->k, nv = dense->n_vocab;
    for (int64_t r = 0; r < dense->n; r++) {
        const float *row = dense->logits + (size_t)r * (size_t)nv;
        int32_t *idx = ds->idx + (size_t)r * (size_t)k;
        float *val = ds->val + (size_t)r * (size_t)k;
        kld_status st;
        if (arm) memcpy(idx, ref->idx + (size_t)r * (size_t)k, (size_t)k * sizeof *idx);
        else if ((st = kld_row_topk(row, nv, k, idx, err))) return st;
        /* the expressions the scorer uses for a live arm, so that a
         * candidate dump scores exactly like its model */
        double lse;
        kld_row_lse_argmax(row, nv, &lse, &ds->argmax[r]);
        int32_t next = kld_window_next(w, dense->row0 + r);
        ds->logp_next[r] = next >= 0 ? (double)row[next] - lse : NAN;
        if (ds->format_version == 1) {
            if ((st = kld_row_as_f16(row, nv, lse, ds->argmax[r], idx, k, val, &lse, err))) {
                kld_error_prefix(err, "window %zu, row %lld", wi, (long long)(dense->row0 + r));
                return st;
            }
        } else {
            for (int32_t j = 0; j < k; j++) val[j] = row[idx[j]];
        }
        ds->lse64[r] = lse;
        ds->lse32[r] = (float)lse;
    }
    kld_dump_rows dr = {ds->idx, ds->val, ds->lse32, ds->lse64, ds->logp_next, ds->argmax};
    ds->res->n_records += (uint64_t)dense->n;
    return kld_dump_write(ds->dw, (int64_t)wi, dense->row0, dense->n, &dr, err);
}

/* ---- set-up ---- */

static kld_status plan_corpus(dump_state *ds, kld_error *err) {
    const kld_dump_config *c = ds->c;
    kld_plan_input in = {c->corpus_path, c->corpus_format, c->ids_path, c->model_path,
                         kld_model_source(ds->model->model), ds->model->tok, NULL, NULL,
                         {chunking_of(c), c->ctx, c->max_docs, c->max_tokens, c->max_chunks,
                          !c->llamacpp, ds->model->n_vocab}};
    kld_status st = kld_plan_corpus_load(&in, &ds->corpus, &ds->plan, err);
    if (!st) ds->pl = &ds->plan;
    return st;
}

/* tokens.bin holds the ids as fed (BOS replacement applied), so that any
 * engine teacher-forcing it computes the same distributions. */
static kld_status fed_tokens(dump_state *ds, int64_t ctx, kld_error *err) {
    size_t n = ds->pl->n_windows;
    ds->fed = malloc(n * (size_t)ctx * sizeof *ds->fed);
    if (!ds->fed) return kld_fail(err, KLD_ERR_NOMEM, "out of memory for %zu windows", n);
    for (size_t w = 0; w < n; w++) {
        const kld_window *win = &ds->pl->windows[w];
        memcpy(ds->fed + w * (size_t)ctx, win->tokens, (size_t)ctx * sizeof *ds->fed);
        if (win->first_token >= 0) ds->fed[w * (size_t)ctx] = win->first_token;
    }
    return KLD_OK;
}

/* A shard: its windows, and the bookkeeping its shard.json records. */
static kld_status shard_meta(dump_state *ds, const char *corpus_sha, kld_dump_meta *m, kld_error *err) {
    const kld_dump_config *c = ds->c;
    kld_status st = kld_plan_shard(ds->pl, &c->shard, &ds->select, &ds->n_select, err);
    if (st) return st;
    ds->held = malloc((ds->n_select ? ds->n_select : 1) * sizeof *ds->held);
    if (!ds->held) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < ds->n_select; i++) ds->held[i] = (int64_t)ds->select[i];
    const kld_dump_meta *t = ds->teacher ? kld_dump_meta_of(kld_arm_dump(ds->teacher)) : NULL;
    kld_dump_shard_in in = {c, kld_arm_desc(ds->model), t ? NULL : ds->corpus->name,
                            t ? "saved" : ds->corpus->kind == KLD_CORPUS_IDS ? "ids" : "text",
                            t ? t->corpus_sha256 : corpus_sha, t, ds->pl, ds->k, ds->format_version,
                            ds->model->n_vocab,
                            ds->chunk, kld_pool_size(ds->pool)};
    ds->shard_json = kld_dump_shard_json(&in, &c->shard, ds->held, ds->n_select, ds->res->eval_hash);
    if (!ds->shard_json) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    m->held = ds->held;
    m->n_held = (int64_t)ds->n_select;
    m->shard_json = ds->shard_json;
    return KLD_OK;
}

static kld_status open_dump_writer(dump_state *ds, size_t *first_window, kld_error *err) {
    const kld_dump_config *c = ds->c;
    const kld_plan *pl = ds->pl;
    int64_t ctx = pl->windows[0].len;
    char fp[65] = "", model_sha[65] = "", corpus_sha[65] = "";
    if (ds->model->tok) kld_tok_fingerprint(ds->model->tok, fp);
    /* the model arm hashed its file when it opened it */
    const char *sha = json_string_value(json_object_get(kld_arm_desc(ds->model), "sha256"));
    if (sha) snprintf(model_sha, sizeof model_sha, "%s", sha);
    char bos[128];
    int32_t b = pl->windows[0].first_token;
    if (b >= 0) snprintf(bos, sizeof bos, "each window's first token replaced by BOS (id %d)", (int)b);
    else snprintf(bos, sizeof bos, "as the tokenizer encodes each document (BOS %s)",
                  ds->model->tok && kld_tok_adds_bos(ds->model->tok) ? "added" : "not added");
    kld_dump_meta m = {.format_version = ds->format_version, .model = c->model_path,
                       .ctx_len = ctx, .n_seqs = (int64_t)pl->n_windows, .top_k = ds->k,
                       .positions_per_seq = ctx - 1, .notes = c->notes ? c->notes : "",
                       .kldeval_version = kld_version(), .n_vocab = ds->model->n_vocab,
                       .model_sha256 = model_sha[0] ? model_sha : NULL,
                       .tokenizer_fingerprint = fp[0] ? fp : NULL,
                       .chunking = kld_chunking_name(pl->chunking), .bos = bos,
                       .windows = pl->note, .levers = ds->res->levers, .ext = true,
                       .lse_of_stored = true};
    kld_head_id head;
    if (ds->format_version == 3) {
        kld_status hs = kld_head_identify(ds->model->model, &head, err);
        if (hs) return hs;
        m.n_embd = kld_model_hparams(ds->model->model)->n_embd;
        m.hidden_dtype = c->hidden_dtype;
        m.head = (kld_dump_head){head.tensor, head.type, head.rows, head.cols, head.sha256,
                                 head.tied, head.final_softcap};
    }
    if (ds->teacher) {
        const kld_dump_meta *t = kld_dump_meta_of(kld_arm_dump(ds->teacher));
        m.corpus_sha256 = t->corpus_sha256;
        m.chunking = t->chunking;
        m.bos = t->bos;
        m.windows = t->windows;
        m.candidate = true;
        m.teacher_model = t->model;
        m.teacher_corpus_sha256 = t->corpus_sha256;
        m.teacher_fingerprint = t->tokenizer_fingerprint;
        m.teacher_created = t->created;
    } else {
        kld_hex_digest(ds->corpus->sha256, corpus_sha);
        m.corpus_sha256 = corpus_sha;
    }
    kld_status st = fed_tokens(ds, ctx, err);
    if (!st && c->shard.n) {
        st = shard_meta(ds, corpus_sha, &m, err);
    }
    int64_t done_seq = 0, done_rec = 0;
    if (!st) st = kld_dump_create(c->out, &m, ds->fed, c->resume, &ds->dw, &done_seq, &done_rec, err);
    if (st) return st;
    *first_window = (size_t)done_seq;
    for (int64_t s = 0; s < done_seq; s++)
        if (!c->shard.n || kld_shard_has(&c->shard, (uint64_t)s, ds->pl->n_windows))
            ds->res->records_skipped += (uint64_t)(ctx - 1);
    ds->res->records_skipped += (uint64_t)done_rec;
    return KLD_OK;
}

/* The model as every command names an arm (eval/arm.h): its levers parsed once. */
static kld_status model_spec(const kld_dump_config *c, kld_arm_parsed *out, kld_error *err) {
    kld_arm_spec spec = {.kind = KLD_ARM_MODEL, .path = c->model_path, .levers = c->levers};
    return kld_arm_spec_parse(&spec, "model", out, err);
}

static kld_status prepare(dump_state *ds, size_t *first_window, kld_error *err) {
    const kld_dump_config *c = ds->c;
    kld_arm_parsed spec;
    kld_status st = model_spec(c, &spec, err);
    if (!st) st = kld_arm_open_spec(&spec, NULL, &ds->model, err);
    if (st) return st;
    /* the canonical form, so that a resume or a reader compares like with like */
    kld_levers_format(&spec.levers, ds->res->levers, sizeof ds->res->levers);
    if (c->indices_from) {
        if ((st = kld_arm_open_dump(c->indices_from, ds->model->n_vocab, &ds->teacher, err))) return st;
        const kld_dump_meta *t = kld_dump_meta_of(kld_arm_dump(ds->teacher));
        if (t->candidate)
            return kld_fail(err, KLD_ERR_ARG, "%s is itself a candidate dump; give the teacher's",
                            c->indices_from);
        char fp[65] = "";
        if (ds->model->tok) kld_tok_fingerprint(ds->model->tok, fp);
        if (t->tokenizer_fingerprint && fp[0] && strcmp(fp, t->tokenizer_fingerprint) &&
            !c->allow_vocab_mismatch)
            return kld_fail(err, KLD_ERR_MISMATCH,
                            "%s/manifest.json: tokenizer_fingerprint: dump made with a different "
                            "tokenizer than %s's (use --allow-vocab-mismatch)",
                            c->indices_from, c->model_path);
        /* the candidate's logits as precise as the teacher's: a float16 candidate
         * of a float32 teacher would carry a rounding the teacher does not */
        if (!c->hidden && c->format_version && c->format_version != t->format_version)
            return kld_fail(err, KLD_ERR_MISMATCH,
                            "--logits %s: the teacher %s has %s logits (format_version %d); a "
                            "candidate dump takes its teacher's (leave --logits out)",
                            c->format_version == 1 ? "f16" : "f32", c->indices_from,
                            t->format_version == 1 ? "float16" : "float32", t->format_version);
        ds->format_version = c->hidden ? 3 : t->format_version;
        ds->pl = ds->teacher->plan;
        ds->k = c->hidden ? 0 : t->top_k;
    } else {
        ds->format_version = c->hidden ? 3 : c->format_version ? c->format_version : 1;
        if ((st = plan_corpus(ds, err))) return st;
        ds->k = c->hidden ? 0 : c->top_k < ds->model->n_vocab ? c->top_k : ds->model->n_vocab;
    }
    ds->res->format_version = ds->format_version;
    ds->pool = kld_pool_create(c->n_threads);
    if (!ds->pool) return kld_fail(err, KLD_ERR_NOMEM, "cannot start %d threads", c->n_threads);
    int64_t max_len = ds->pl->max_len;
    ds->chunk = c->chunk < max_len ? c->chunk : max_len;
    if (c->hidden && (st = kld_arm_model_want_hidden(ds->model, err))) return st;
    const int64_t passes = kld_plan_passes(ds->pl, ds->chunk);
    if ((st = ds->model->ops->prepare(ds->model, ds->pool, max_len, ds->chunk, passes, err))) return st;
    if (ds->teacher && (st = ds->teacher->ops->prepare(ds->teacher, ds->pool, max_len, ds->chunk, passes, err)))
        return st;
    snprintf(ds->res->windows, sizeof ds->res->windows, "%s", ds->pl->note);
    if (c->llamacpp) {
        const kld_plan *pl = ds->pl;
        int32_t *tok = malloc(pl->n_windows * (size_t)c->ctx * sizeof *tok);
        if (!tok) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
        for (size_t w = 0; w < pl->n_windows; w++)
            memcpy(tok + w * (size_t)c->ctx, pl->windows[w].tokens, (size_t)c->ctx * sizeof *tok);
        st = kld_lcpp_base_create(c->out, (int32_t)c->ctx, ds->model->n_vocab, (int32_t)pl->n_windows,
                                  tok, &ds->lw, err);
        free(tok);
        return st;
    }
    size_t cells = (size_t)ds->chunk * (size_t)(ds->k ? ds->k : 1), rows = (size_t)ds->chunk;
    if (c->hidden && c->hidden_dtype != KLD_DUMP_HIDDEN_F32) {
        const kld_hparams *hp = kld_model_hparams(ds->model->model);
        ds->rounded = malloc(rows * (size_t)hp->n_embd * sizeof(float));
        ds->rounded_logits = malloc(rows * (size_t)hp->n_vocab * sizeof(float));
        if (!ds->rounded || !ds->rounded_logits)
            return kld_fail(err, KLD_ERR_NOMEM, "out of memory for %zu rounded rows", rows);
    }
    ds->idx = malloc(cells * sizeof *ds->idx);
    ds->val = malloc(cells * sizeof *ds->val);
    ds->lse32 = malloc(rows * sizeof *ds->lse32);
    ds->lse64 = malloc(rows * sizeof *ds->lse64);
    ds->logp_next = malloc(rows * sizeof *ds->logp_next);
    ds->argmax = malloc(rows * sizeof *ds->argmax);
    if (!ds->idx || !ds->val || !ds->lse32 || !ds->lse64 || !ds->logp_next || !ds->argmax)
        return kld_fail(err, KLD_ERR_NOMEM, "out of memory for %zu records of top-%d", rows, (int)ds->k);
    return open_dump_writer(ds, first_window, err);
}

kld_status kld_dump_check(const kld_dump_config *c, kld_error *err) {
    if (!c->model_path || !c->out) return kld_fail(err, KLD_ERR_ARG, "need a model and --out");
    kld_arm_parsed spec;
    kld_status st = model_spec(c, &spec, err);
    if (st) return st;
    if (c->llamacpp && (c->indices_from || c->resume))
        return kld_fail(err, KLD_ERR_ARG, "--format llamacpp takes neither --indices-from nor --resume");
    if (c->llamacpp && c->shard.n)
        return kld_fail(err, KLD_ERR_UNSUPPORTED, "--shard applies to dump directories; a llama.cpp "
                        "base file (--format llamacpp) is one file and cannot be sharded");
    if (c->llamacpp && chunking_of(c) != KLD_CHUNKING_LLAMACPP)
        return kld_fail(err, KLD_ERR_ARG, "--format llamacpp uses llamacpp chunking");
    if (c->ids_path && c->corpus_path)
        return kld_fail(err, KLD_ERR_ARG, "give --corpus or --ids-file, not both");
    if (c->indices_from && (c->corpus_path || c->ids_path || c->chunking != KLD_CHUNKING_DEFAULT))
        return kld_fail(err, KLD_ERR_ARG, "--indices-from takes the teacher's tokens and windows; "
                        "--corpus, --ids-file and --chunking do not apply");
    if (!c->llamacpp && !c->indices_from && c->chunking == KLD_CHUNKING_DOC)
        return kld_fail(err, KLD_ERR_ARG, "a dump needs windows of exactly --ctx tokens: use "
                        "--chunking stream (default) or llamacpp, not doc");
    if (c->hidden && (c->llamacpp || c->format_version))
        return kld_fail(err, KLD_ERR_ARG, "--hidden writes hidden states (format 3): %s does not "
                        "apply", c->llamacpp ? "--format llamacpp" : "--logits");
    if (c->hidden_dtype < KLD_DUMP_HIDDEN_F32 || c->hidden_dtype > KLD_DUMP_HIDDEN_F16)
        return kld_fail(err, KLD_ERR_ARG, "hidden dtype %d (float32, bfloat16 or float16)",
                        c->hidden_dtype);
    if (c->format_version < 0 || c->format_version > 2)
        return kld_fail(err, KLD_ERR_ARG, "dump format version %d (1: float16 logits, 2: float32, "
                        "0: the default)",
                        c->format_version);
    if (!c->hidden && (c->top_k < 1 || c->top_k > KLD_DUMP_MAX_TOPK))
        return kld_fail(err, KLD_ERR_ARG, "--top-k %d outside 1..%d", (int)c->top_k, KLD_DUMP_MAX_TOPK);
    if ((st = kld_input_check("--corpus", c->corpus_path, err))) return st;
    return kld_input_check("--ids-file", c->ids_path, err);
}

/* What the run database keeps of a dump: the model as every arm describes
 * itself, the corpus with its whole document count, and how it was cut. */
static json_t *report_json(const dump_state *ds) {
    const kld_dump_config *c = ds->c;
    const kld_dump_result *r = ds->res;
    json_t *cfg = json_object();
    json_t *ref = json_deep_copy(kld_arm_desc(ds->model));
    json_object_set_new(ref, "levers", json_string(r->levers));
    json_object_set_new(cfg, "mode", json_string("dump"));
    json_object_set_new(cfg, "ref", ref);
    json_object_set_new(cfg, "out", json_string(c->out));
    json_object_set_new(cfg, "format", json_string(c->llamacpp ? "llamacpp-base" : "dump"));
    json_object_set_new(cfg, "format_version", json_integer(r->format_version));
    if (!c->hidden && !c->llamacpp) json_object_set_new(cfg, "top_k", json_integer(ds->k));
    if (c->indices_from) json_object_set_new(cfg, "indices_from", json_string(c->indices_from));
    json_object_set_new(cfg, "records", json_integer((json_int_t)r->n_records));
    json_object_set_new(cfg, "windows_n", json_integer((json_int_t)r->n_windows));
    json_object_set_new(cfg, "windows", json_string(r->windows));
    json_object_set_new(cfg, "chunking", json_string(kld_chunking_name(ds->pl->chunking)));
    json_object_set_new(cfg, "ctx", json_integer(ds->pl->max_len));
    json_object_set_new(cfg, "chunk", json_integer(ds->chunk));
    json_object_set_new(cfg, "threads", json_integer(kld_pool_size(ds->pool)));
    json_t *co;
    if (ds->teacher) {
        const kld_dump_meta *t = kld_dump_meta_of(kld_arm_dump(ds->teacher));
        co = json_pack("{s:s,s:s,s:s?}", "name", c->indices_from, "kind", "saved", "sha256",
                       t->corpus_sha256);
    } else {
        char hex[65];
        kld_hex_digest(ds->corpus->sha256, hex);
        co = json_pack("{s:s,s:s,s:s}", "name", ds->corpus->name, "kind",
                       ds->corpus->kind == KLD_CORPUS_IDS ? "ids" : "text", "sha256", hex);
        kld_corpus_forms_json(ds->corpus, co);
    }
    json_object_set_new(co, "documents", json_integer((json_int_t)ds->pl->docs_total));
    json_object_set_new(cfg, "corpus", co);
    if (c->shard.n)
        json_object_set_new(cfg, "shard", json_pack("{s:i,s:i,s:s,s:s}", "k", (int)c->shard.k, "n",
                                                    (int)c->shard.n, "mode",
                                                    kld_shard_mode_name(c->shard.mode), "eval_hash",
                                                    r->eval_hash));
    return json_pack("{s:o}", "config", cfg);
}

void kld_dump_result_free(kld_dump_result *r) {
    json_decref(r->report);
    r->report = NULL;
}

kld_status kld_dump_run(const kld_dump_config *c, kld_dump_result *out, kld_error *err) {
    memset(out, 0, sizeof *out);
    kld_status st = kld_dump_check(c, err);
    if (st) return st;
    dump_state ds = {.c = c, .res = out};
    size_t first = 0;
    double t0 = kld_now_s();
    st = prepare(&ds, &first, err);
    if (!st) {
        out->n_windows_total = ds.pl->n_windows;
        out->n_windows = c->shard.n ? ds.n_select : ds.pl->n_windows;
        kld_arm *ref = ds.teacher ? ds.teacher : ds.model, *arm = ds.teacher ? ds.model : NULL;
        kld_drive_opts d = {ds.pl, ref, arm, ds.chunk, first, NULL, c->stop, c->progress,
                            c->progress_user, NULL, 0};
        if (c->shard.n) { /* a resumed shard starts at its first window still missing */
            size_t j0 = 0;
            while (j0 < ds.n_select && ds.select[j0] < first) j0++;
            d.select = ds.select + j0;
            d.n_select = ds.n_select - j0;
        }
        kld_sink sink = {c->llamacpp ? write_lcpp : write_dump, NULL, &ds};
        st = kld_drive(&d, &sink, &out->partial, err);
        out->tokens = ds.model->tokens;
        out->forward_s = ds.model->seconds;
    }
    /* a stopped or failed dump stays resumable: no manifest */
    if (!st && !out->partial && ds.round_n) {
        out->rounding_kld_mean = ds.round_sum / (double)ds.round_n;
        out->rounding_kld_max = ds.round_max;
        st = kld_dump_set_rounding(ds.dw, out->rounding_kld_mean, out->rounding_kld_max, err);
    }
    if (!st && !out->partial) st = c->llamacpp ? kld_lcpp_base_finish(ds.lw, err)
                                                : kld_dump_finish(ds.dw, err);
    out->elapsed_s = kld_now_s() - t0;
    if (!st && !(out->report = report_json(&ds))) st = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    kld_dump_writer_free(ds.dw);
    kld_lcpp_base_writer_free(ds.lw);
    kld_arm_free(ds.model);
    kld_arm_free(ds.teacher);
    kld_pool_free(ds.pool);
    kld_corpus_free(ds.corpus);
    kld_plan_free(&ds.plan);
    free(ds.fed);
    free(ds.idx);
    free(ds.val);
    free(ds.lse32);
    free(ds.lse64);
    free(ds.logp_next);
    free(ds.argmax);
    free(ds.rounded);
    free(ds.rounded_logits);
    free(ds.select);
    free(ds.held);
    free(ds.shard_json);
    return st;
}
