/* arm_dump.c — a saved teacher or candidate dump as an arm: its tokens.bin
 * defines the plan (one window per sequence, rows 0 .. ctx_len-2), and each
 * chunk's rows are read from the sequence files (one pread per chunk, so
 * memory stays O(chunk × top_k)). */
#include "eval/arm.h"

#include "eval/head.h"
#include "store/dump.h"

#include <math.h>
#include <stdlib.h>

typedef struct dump_arm {
    kld_dump *d;
    const kld_dump_meta *m;
    int64_t chunk;
    size_t wi;
    int32_t *idx, *argmax;
    float *val, *lse32;
    double *lse, *lse64, *logp_next;
    /* format 3: the head that turns the stored hidden states into logits */
    kld_model *head_model;
    kld_levers levers;
    kld_session *head;
    float *hidden, *logits;
} dump_arm;

/* Format 3: a head-only session with the levers the dump was made with
 * (act rounding and an adapter change the head's product too). */
static kld_status prepare_hidden(kld_arm *a, dump_arm *u, kld_pool *pool, int64_t chunk,
                                 kld_error *err) {
    size_t c = (size_t)chunk;
    kld_session_opts so = {chunk, chunk, 0, pool, &u->levers, true, 0};
    kld_status st = kld_session_create_opts(u->head_model, &so, &u->head, err);
    if (st) return st;
    u->hidden = malloc(c * (size_t)u->m->n_embd * sizeof(float));
    u->logits = malloc(c * (size_t)u->m->n_vocab * sizeof(float));
    if (!u->hidden || !u->logits)
        return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory for %lld rows of logits", a->path,
                        (long long)chunk);
    return KLD_OK;
}

static kld_status prepare(kld_arm *a, kld_pool *pool, int64_t max_len, int64_t chunk, int64_t passes,
                          kld_error *err) {
    (void)max_len, (void)passes;
    dump_arm *u = a->impl;
    size_t k = (size_t)u->m->top_k, c = (size_t)chunk;
    u->chunk = chunk;
    if (u->head_model) return prepare_hidden(a, u, pool, chunk, err);
    u->idx = malloc(c * k * sizeof *u->idx);
    u->val = malloc(c * k * sizeof *u->val);
    u->lse32 = malloc(c * sizeof *u->lse32);
    u->lse = malloc(c * sizeof *u->lse);
    u->lse64 = malloc(c * sizeof *u->lse64);
    u->logp_next = malloc(c * sizeof *u->logp_next);
    u->argmax = malloc(c * sizeof *u->argmax);
    if (!u->idx || !u->val || !u->lse32 || !u->lse || !u->lse64 || !u->logp_next || !u->argmax)
        return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory for %lld records of top-%d", a->path,
                        (long long)chunk, (int)k);
    return KLD_OK;
}

static kld_status begin(kld_arm *a, const kld_window *w, size_t wi, kld_error *err) {
    dump_arm *u = a->impl;
    if ((int64_t)wi >= u->m->n_seqs || w->len != u->m->ctx_len ||
        memcmp(w->tokens, kld_dump_tokens(u->d, (int64_t)wi), (size_t)w->len * sizeof(int32_t)) != 0)
        return kld_fail(err, KLD_ERR_MISMATCH,
                        "%s/tokens.bin: sequence %zu differs from the tokens the other arm reads "
                        "(the two dumps were not made over the same windows)",
                        a->path, wi);
    u->wi = wi;
    return KLD_OK;
}

static kld_status eval(kld_arm *a, const int32_t *tokens, int64_t c0, int64_t n, int64_t r0,
                       int64_t r1, kld_rows *rows, kld_error *err) {
    (void)tokens, (void)c0;
    dump_arm *u = a->impl;
    int64_t nr = r1 - r0;
    a->tokens += (uint64_t)n;
    if (u->head_model) { /* format 3: logits from the stored hidden states */
        *rows = (kld_rows){.kind = KLD_ROWS_DENSE, .row0 = r0, .n = nr, .n_vocab = a->n_vocab,
                           .logits = u->logits};
        if (nr <= 0) return KLD_OK;
        double t0 = kld_now_s();
        kld_status st = kld_dump_read_hidden(u->d, (int64_t)u->wi, r0, nr, u->hidden, NULL, NULL,
                                             NULL, err);
        if (!st) st = kld_session_head(u->head, u->hidden, nr, u->logits, err);
        a->seconds += kld_now_s() - t0;
        return st;
    }
    *rows = (kld_rows){.kind = KLD_ROWS_SPARSE, .row0 = r0, .n = nr, .n_vocab = a->n_vocab,
                       .k = u->m->top_k, .idx = u->idx, .val = u->val, .lse = u->lse,
                       .logp_next = u->logp_next, .argmax = u->argmax,
                       .at_teacher_ids = u->m->candidate, .f16 = u->m->format_version == 1,
                       .f16_raw = u->m->format_version == 1 && !u->m->lse_of_stored};
    if (nr <= 0) return KLD_OK;
    kld_dump_rows dr = {u->idx, u->val, u->lse32, u->lse64, u->logp_next, u->argmax};
    kld_status st = kld_dump_read(u->d, (int64_t)u->wi, r0, nr, &dr, err);
    if (st) return st;
    for (int64_t r = 0; r < nr; r++) {
        /* the sidecar's exact value when there is one */
        u->lse[r] = u->m->ext ? u->lse64[r] : (double)u->lse32[r];
        if (!u->m->ext && !u->m->candidate) u->argmax[r] = u->idx[r * u->m->top_k];
    }
    return KLD_OK;
}

static void dump_free(kld_arm *a) {
    dump_arm *u = a->impl;
    if (!u) return;
    kld_dump_close(u->d);
    kld_session_free(u->head);
    kld_model_close(u->head_model);
    free(u->hidden);
    free(u->logits);
    free(u->idx);
    free(u->val);
    free(u->lse32);
    free(u->lse);
    free(u->lse64);
    free(u->logp_next);
    free(u->argmax);
    free(u);
}

static const kld_arm_ops dump_ops = {prepare, begin, eval, dump_free};

static json_t *dump_desc(const char *dir, const kld_dump_meta *m) {
    json_t *o = json_pack("{s:s,s:s,s:i,s:s,s:s,s:I,s:I,s:i,s:b,s:b}", "kind", "dump", "path", dir,
                          "format_version", m->format_version, "model", m->model, "corpus_sha256",
                          m->corpus_sha256, "ctx_len", (json_int_t)m->ctx_len, "n_seqs",
                          (json_int_t)m->n_seqs, "top_k", (int)m->top_k, "candidate", m->candidate,
                          "ext", m->ext);
    json_object_set_new(o, "n_vocab", m->n_vocab ? json_integer(m->n_vocab) : json_null());
    json_object_set_new(o, "created", m->created ? json_string(m->created) : json_null());
    json_object_set_new(o, "tokenizer_fingerprint",
                        m->tokenizer_fingerprint ? json_string(m->tokenizer_fingerprint) : json_null());
    json_object_set_new(o, "model_sha256", m->model_sha256 ? json_string(m->model_sha256) : json_null());
    json_object_set_new(o, "lse_of_stored", json_boolean(m->lse_of_stored));
    /* the dump's identity (its manifest names the model, corpus, windows and
     * creation time): runs scored against the same dump pair up */
    char path[4200], hex[65];
    uint8_t d[32];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    if (kld_sha256_file(path, d, NULL) == KLD_OK) {
        kld_hex_digest(d, hex);
        json_object_set_new(o, "sha256", json_string(hex));
    }
    /* the levers the dump's model ran with (a dump without the key predates them: reference) */
    json_object_set_new(o, "levers", json_string(m->levers ? m->levers : "reference"));
    return o;
}

/* Format 3: the model whose head the dump's hidden states need, checked by
 * the hash of the head's bytes. */
static kld_status open_head(kld_arm *a, dump_arm *u, const char *head_path, kld_error *err) {
    const kld_dump_meta *m = u->m;
    const char *path = head_path ? head_path : m->model;
    kld_status st = kld_model_open(path, NULL, &u->head_model, err);
    if (st) {
        kld_error_prefix(err, "%s: the model of its head (%s)", a->path,
                         head_path ? "--teacher-head / --arm-head" : "the manifest's \"model\"");
        return st;
    }
    kld_head_id id;
    if ((st = kld_head_identify(u->head_model, &id, err))) return st;
    if (strcmp(id.sha256, m->head.sha256) || id.rows != m->n_vocab || id.cols != m->n_embd)
        return kld_fail(err, KLD_ERR_MISMATCH,
                        "%s/manifest.json: head.sha256 %s (%s, %s, %lld x %lld), but %s's head "
                        "hashes to %s (%s, %s, %lld x %lld): not the head the hidden states were "
                        "saved from (--teacher-head / --arm-head PATH names the right model)",
                        a->path, m->head.sha256, m->head.tensor, m->head.type,
                        (long long)m->head.rows, (long long)m->head.cols, path, id.sha256, id.tensor,
                        id.type, (long long)id.rows, (long long)id.cols);
    kld_levers_default(&u->levers);
    if (m->levers && strcmp(m->levers, "reference") &&
        (st = kld_levers_parse(m->levers, &u->levers, err))) {
        kld_error_prefix(err, "%s/manifest.json: levers", a->path);
        return st;
    }
    if ((st = kld_levers_check(&u->levers, u->head_model, err))) return st;
    json_object_set_new(a->desc, "head_model", json_string(path));
    json_object_set_new(a->desc, "head_sha256", json_string(id.sha256));
    json_object_set_new(a->desc, "hidden_dtype", json_string(kld_dump_hidden_name(m->hidden_dtype)));
    return KLD_OK;
}

kld_status kld_arm_open_dump(const char *dir, int64_t n_vocab_limit, kld_arm **out,
                             kld_error *err) {
    return kld_arm_open_dump_head(dir, NULL, n_vocab_limit, out, err);
}

kld_status kld_arm_open_dump_head(const char *dir, const char *head_path, int64_t n_vocab_limit,
                                  kld_arm **out, kld_error *err) {
    *out = NULL;
    kld_arm *a = kld_arm_new(&dump_ops, "dump", dir, sizeof(dump_arm), true);
    if (!a) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    dump_arm *u = a->impl;
    kld_plan *pl = a->plan;
    kld_status st = kld_dump_open(dir, n_vocab_limit, &u->d, err);
    if (st) {
        kld_arm_free(a);
        return st;
    }
    u->m = kld_dump_meta_of(u->d);
    a->n_vocab = (int32_t)u->m->n_vocab;
    a->desc = dump_desc(dir, u->m);
    if (u->m->format_version == 3 && (st = open_head(a, u, head_path, err))) {
        kld_arm_free(a);
        return st;
    }
    pl->chunking = KLD_CHUNKING_STREAM;
    snprintf(pl->note, sizeof pl->note, "%s/tokens.bin: %lld sequences of %lld tokens%s%s", dir,
             (long long)u->m->n_seqs, (long long)u->m->ctx_len, u->m->windows ? "; " : "",
             u->m->windows ? u->m->windows : "");
    for (int64_t s = 0; s < u->m->n_seqs && !st; s++) {
        kld_window w = {kld_dump_tokens(u->d, s), u->m->ctx_len, 0, u->m->positions_per_seq, -1,
                        -1, true, NULL, 0};
        st = kld_plan_push(pl, &w, err);
    }
    if (st) {
        kld_arm_free(a);
        return st;
    }
    *out = a;
    return KLD_OK;
}

kld_dump *kld_arm_dump(const kld_arm *a) {
    return a && a->ops == &dump_ops ? ((dump_arm *)a->impl)->d : NULL;
}
