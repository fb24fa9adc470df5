/* merge.c — the evaluation hash, shard partials of a kl run, and their
 * exact merge (merge.h). */
#include "eval/merge.h"

#include "common/common.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

json_t *kld_eval_defining(const json_t *config) {
    json_t *o = json_deep_copy(config);
    if (!o) return NULL;
    static const char *const drop[] = {"threads", "chunk", "shard", "warning"};
    for (size_t i = 0; i < sizeof drop / sizeof drop[0]; i++) json_object_del(o, drop[i]);
    json_t *v;
    if ((v = json_object_get(o, "ref")) && json_is_object(v)) json_object_del(v, "path");
    if ((v = json_object_get(o, "arm")) && json_is_object(v)) json_object_del(v, "path");
    if ((v = json_object_get(o, "corpus")) && json_is_object(v)) json_object_del(v, "name");
    return o;
}

void kld_eval_hash(const json_t *config, uint8_t out[32]) {
    json_t *o = kld_eval_defining(config);
    char *text = o ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    unsigned len = 0;
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    EVP_DigestInit_ex(md, EVP_sha256(), NULL);
    EVP_DigestUpdate(md, "kldeval-eval-1", 14);
    if (text) EVP_DigestUpdate(md, text, strlen(text));
    EVP_DigestFinal_ex(md, out, &len);
    EVP_MD_CTX_free(md);
    free(text);
    json_decref(o);
}

void kld_shard_annotate(json_t *config, const kld_shard *s, size_t n_windows,
                        const uint8_t hash[32]) {
    char hex[65];
    kld_hex_digest(hash, hex);
    json_object_set_new(config, "shard",
                        json_pack("{s:i,s:i,s:s,s:I,s:s}", "k", (int)s->k, "n", (int)s->n, "mode",
                                  kld_shard_mode_name(s->mode), "windows", (json_int_t)n_windows,
                                  "eval_hash", hex));
}

kld_status kld_kl_write_partial(const char *path, const kld_kl_result *res,
                                const kld_kl_config *c, const kld_partial_labels *lb,
                                kld_error *err) {
    if (res->partial)
        return kld_fail(err, KLD_ERR_INTERRUPTED, "%s: the run was stopped early; a partial must "
                        "hold every window of its shard (run the shard again)", path);
    size_t n_rec = 0;
    const kld_position *rec = kld_stats_records(res->stats, &n_rec);
    kld_partial_head h = {.shard_k = c->shard.n ? c->shard.k : 0,
                          .shard_n = c->shard.n ? c->shard.n : 1,
                          .shard_mode = c->shard.n && c->shard.mode == KLD_SHARD_RANGE,
                          .topk = (uint32_t)kld_stats_topk(res->stats),
                          .n_windows_total = res->n_windows_total, .n_windows = res->n_windows,
                          .n_records = n_rec};
    memcpy(h.hash, res->eval_hash, 32);
    for (size_t i = 0; i < res->n_windows; i++)
        if (!kld_shard_has(&(kld_shard){h.shard_k, h.shard_n, h.shard_mode ? KLD_SHARD_RANGE : KLD_SHARD_MOD},
                           res->windows[i].index, res->n_windows_total))
            return kld_fail(err, KLD_ERR_ARG, "%s: window %llu is not the shard's", path,
                            (unsigned long long)res->windows[i].index);
    json_t *meta = json_pack("{s:s,s:O,s:s,s:s,s:s?,s:s?,s:s?,s:s?,s:b,s:f,s:f,s:f,s:I,s:I}",
                             "schema", "kldeval.partial/1", "config", res->config, "vocab_note",
                             res->vocab_note, "ctx_note", res->ctx_note, "ref_label", lb->ref,
                             "arm_label", lb->arm, "corpus_label", lb->corpus, "label", lb->label,
                             "llamacpp", c->ref.kind == KLD_ARM_LLAMACPP_BASE, "elapsed_s", res->elapsed_s,
                             "ref_seconds", res->ref_seconds, "arm_seconds", res->arm_seconds,
                             "ref_tokens", (json_int_t)res->ref_tokens, "arm_tokens",
                             (json_int_t)res->arm_tokens);
    char *text = meta ? json_dumps(meta, JSON_COMPACT) : NULL;
    json_decref(meta);
    if (!text) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory for the meta JSON", path);
    kld_status st = kld_partial_write(path, &h, text, res->windows, rec, err);
    free(text);
    return st;
}

/* ---- merge ---- */

typedef struct part {
    kld_partial *p;
    const kld_partial_head *h;
    json_t *meta;
    size_t cursor; /* next window of the part */
} part;

/* The first defining key on which two configurations differ, for the
 * message that refuses a foreign part. */
void kld_eval_first_difference(const json_t *a, const json_t *b, char *buf, size_t size) {
    json_t *da = kld_eval_defining(a), *db = kld_eval_defining(b);
    snprintf(buf, size, "the configuration");
    const char *key;
    json_t *va;
    json_object_foreach(da, key, va) {
        json_t *vb = json_object_get(db, key);
        if (vb && json_equal(va, vb)) continue;
        char *x = json_dumps(va, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
        char *y = vb ? json_dumps(vb, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY) : NULL;
        snprintf(buf, size, "config.%s: %.120s vs %.120s", key, x ? x : "?", y ? y : "(missing)");
        free(x);
        free(y);
        break;
    }
    if (!strcmp(buf, "the configuration")) {
        json_object_foreach(db, key, va) {
            if (json_object_get(da, key)) continue;
            snprintf(buf, size, "config.%s: (missing) vs present", key);
            break;
        }
    }
    json_decref(da);
    json_decref(db);
}

static kld_status open_parts(const char *const *paths, size_t n, part *parts, kld_error *err) {
    for (size_t i = 0; i < n; i++) {
        kld_status st = kld_partial_open(paths[i], &parts[i].p, err);
        if (st) return st;
        parts[i].h = kld_partial_head_of(parts[i].p);
        if (parts[i].h->flags & KLD_PARTIAL_CHECKPOINT)
            return kld_fail(err, KLD_ERR_ARG, "%s is a checkpoint of a run in progress, not a "
                            "shard's partial: finish it with kldeval kl ... --resume %s", paths[i],
                            paths[i]);
        json_error_t je;
        parts[i].meta = json_loads(kld_partial_meta(parts[i].p), JSON_REJECT_DUPLICATES, &je);
        if (!parts[i].meta || !json_is_object(json_object_get(parts[i].meta, "config")))
            return kld_fail(err, KLD_ERR_FORMAT, "%s: meta: %s", paths[i],
                            parts[i].meta ? "no config object" : je.text);
    }
    return KLD_OK;
}

/* The parts belong together and cover every shard exactly once; by_k[k] is
 * the part holding shard k. */
static kld_status check_parts(const char *const *paths, size_t n, part *parts, part **by_k,
                              kld_error *err) {
    const kld_partial_head *h0 = parts[0].h;
    for (size_t i = 1; i < n; i++) {
        const kld_partial_head *h = parts[i].h;
        if (memcmp(h->hash, h0->hash, 32)) {
            char why[300];
            kld_eval_first_difference(json_object_get(parts[i].meta, "config"),
                             json_object_get(parts[0].meta, "config"), why, sizeof why);
            return kld_fail(err, KLD_ERR_MISMATCH, "%s: belongs to another evaluation than %s "
                            "(the hashes of their defining inputs differ: %s)", paths[i], paths[0], why);
        }
        if (h->shard_n != h0->shard_n || h->shard_mode != h0->shard_mode ||
            h->n_windows_total != h0->n_windows_total || h->topk != h0->topk)
            return kld_fail(err, KLD_ERR_MISMATCH, "%s: shard %u/%u %s of %llu windows, top-k %u; %s "
                            "is %u/%u %s of %llu, top-k %u (parts of one split only)", paths[i],
                            h->shard_k, h->shard_n, h->shard_mode ? "range" : "mod",
                            (unsigned long long)h->n_windows_total, h->topk, paths[0], h0->shard_k,
                            h0->shard_n, h0->shard_mode ? "range" : "mod",
                            (unsigned long long)h0->n_windows_total, h0->topk);
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t k = parts[i].h->shard_k;
        if (by_k[k])
            return kld_fail(err, KLD_ERR_MISMATCH, "%s and %s are both shard %u/%u (duplicated part)",
                            kld_partial_path(by_k[k]->p), paths[i], k, h0->shard_n);
        by_k[k] = &parts[i];
    }
    char missing[512] = "";
    size_t n_missing = 0, len = 0;
    for (uint32_t k = 0; k < h0->shard_n; k++) {
        if (by_k[k]) continue;
        if (n_missing++ < 16 && len < sizeof missing - 32)
            len += (size_t)snprintf(missing + len, sizeof missing - len, "%s%u/%u", len ? ", " : "",
                                    k, h0->shard_n);
    }
    if (n_missing)
        return kld_fail(err, KLD_ERR_MISMATCH, "%zu of %u shards missing: %s%s (given: %zu parts "
                        "starting with %s)", n_missing, h0->shard_n, missing,
                        n_missing > 16 ? ", ..." : "", n, paths[0]);
    return KLD_OK;
}

/* The merged records, read from the parts in window order on every pass:
 * a merge holds the window tables and the document starts, never the
 * records (80 bytes each). */
struct kld_merge_stream {
    part *parts;
    size_t n_parts;
    part **by_k;
    kld_partial_head h0;
    uint64_t *doc_start;
    size_t n_docs;
    /* the pass under way */
    uint64_t g;           /* next global window */
    uint32_t k;           /* range mode: the shard of window g */
    uint32_t left;        /* records of the current window still to read */
    part *cur;
    kld_position *buf;
};

enum { BATCH = 4096 };

/* The part holding global window g and its window entry (the next of that part). */
static kld_status next_window(kld_merge_stream *ms, part **pp, const kld_partial_window **wp,
                              kld_error *err) {
    const kld_partial_head *h0 = &ms->h0;
    uint64_t g = ms->g++;
    if (h0->shard_mode == 0) ms->k = (uint32_t)(g % h0->shard_n);
    else
        while (!kld_partial_shard_has(ms->k, h0->shard_n, 1, g, h0->n_windows_total)) ms->k++;
    part *p = ms->by_k[ms->k];
    const kld_partial_window *w = &kld_partial_windows(p->p)[p->cursor++];
    /* kld_partial_open checked that the part's windows are exactly its shard's, ascending */
    if (w->index != g)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: window %llu expected, %llu found",
                        kld_partial_path(p->p), (unsigned long long)g, (unsigned long long)w->index);
    *pp = p;
    *wp = w;
    return KLD_OK;
}

static void restart_cursors(kld_merge_stream *ms) {
    for (size_t i = 0; i < ms->n_parts; i++) ms->parts[i].cursor = 0;
    ms->g = 0;
    ms->k = 0;
    ms->left = 0;
    ms->cur = NULL;
}

static kld_status stream_next(void *user, bool restart, const kld_position **batch, size_t *m,
                              kld_error *err) {
    kld_merge_stream *ms = user;
    *batch = ms->buf;
    *m = 0;
    kld_status st;
    if (restart) {
        restart_cursors(ms);
        for (size_t i = 0; i < ms->n_parts; i++)
            if ((st = kld_partial_rewind(ms->parts[i].p, err))) return st;
    }
    while (ms->left == 0) {
        if (ms->g == ms->h0.n_windows_total) return KLD_OK;
        const kld_partial_window *w;
        if ((st = next_window(ms, &ms->cur, &w, err))) return st;
        ms->left = w->n_records;
    }
    uint32_t n = ms->left < BATCH ? ms->left : BATCH;
    if ((st = kld_partial_read(ms->cur->p, n, ms->buf, err))) return st;
    ms->left -= n;
    *m = n;
    return KLD_OK;
}

/* Documents begin where the windows say (an implicit one at 0 before the
 * first record otherwise, as the accumulator does); the record count. */
static kld_status plan_stream(kld_merge_stream *ms, uint64_t *n_rec, kld_error *err) {
    size_t cap = 0;
    uint64_t off = 0;
    restart_cursors(ms);
    for (uint64_t i = 0; i < ms->h0.n_windows_total; i++) {
        part *p;
        const kld_partial_window *w;
        kld_status st = next_window(ms, &p, &w, err);
        if (st) return st;
        for (int b = 0; b < 2; b++) {
            bool begin = b == 0 ? w->new_doc : w->n_records > 0 && ms->n_docs == 0;
            if (!begin) continue;
            if (ms->n_docs == cap) {
                cap = cap ? 2 * cap : 1024;
                uint64_t *d = realloc(ms->doc_start, cap * sizeof *d);
                if (!d) return kld_fail(err, KLD_ERR_NOMEM, "out of memory for the documents");
                ms->doc_start = d;
            }
            ms->doc_start[ms->n_docs++] = off;
        }
        off += w->n_records;
    }
    restart_cursors(ms);
    *n_rec = off;
    return off > SIZE_MAX ? kld_fail(err, KLD_ERR_NOMEM, "%llu positions do not fit in memory",
                                     (unsigned long long)off) : KLD_OK;
}

static void stream_free(kld_merge_stream *ms) {
    if (!ms) return;
    for (size_t i = 0; i < ms->n_parts; i++) {
        kld_partial_close(ms->parts[i].p);
        json_decref(ms->parts[i].meta);
    }
    free(ms->parts);
    free(ms->by_k);
    free(ms->doc_start);
    free(ms->buf);
    free(ms);
}

static char *meta_string(const json_t *meta, const char *key) {
    const char *s = json_string_value(json_object_get(meta, key));
    return s ? kld_strdup(s) : NULL;
}

static void collect(part *parts, size_t n, kld_merge_result *out) {
    const json_t *m0 = parts[0].meta;
    out->config = json_deep_copy(json_object_get(m0, "config"));
    json_object_del(out->config, "shard");
    out->ref_label = meta_string(m0, "ref_label");
    out->arm_label = meta_string(m0, "arm_label");
    out->corpus_label = meta_string(m0, "corpus_label");
    out->label = meta_string(m0, "label");
    snprintf(out->vocab_note, sizeof out->vocab_note, "%s",
             json_string_value(json_object_get(m0, "vocab_note")) ? json_string_value(json_object_get(m0, "vocab_note")) : "");
    snprintf(out->ctx_note, sizeof out->ctx_note, "%s",
             json_string_value(json_object_get(m0, "ctx_note")) ? json_string_value(json_object_get(m0, "ctx_note")) : "");
    out->llamacpp = json_is_true(json_object_get(m0, "llamacpp"));
    out->parts = json_array();
    for (size_t i = 0; i < n; i++) {
        const json_t *m = parts[i].meta;
        out->elapsed_s += json_number_value(json_object_get(m, "elapsed_s"));
        out->ref_seconds += json_number_value(json_object_get(m, "ref_seconds"));
        out->arm_seconds += json_number_value(json_object_get(m, "arm_seconds"));
        out->ref_tokens += (uint64_t)json_integer_value(json_object_get(m, "ref_tokens"));
        out->arm_tokens += (uint64_t)json_integer_value(json_object_get(m, "arm_tokens"));
        json_array_append_new(out->parts,
                              json_pack("{s:s,s:i,s:I,s:I,s:f}", "path", kld_partial_path(parts[i].p),
                                        "shard", (int)parts[i].h->shard_k, "windows",
                                        (json_int_t)parts[i].h->n_windows, "positions",
                                        (json_int_t)parts[i].h->n_records, "elapsed_s",
                                        json_number_value(json_object_get(m, "elapsed_s"))));
    }
    memcpy(out->eval_hash, parts[0].h->hash, 32);
    out->n_shards = parts[0].h->shard_n;
}

kld_status kld_merge(const char *const *paths, size_t n, kld_merge_result *out, kld_error *err) {
    memset(out, 0, sizeof *out);
    if (n == 0) return kld_fail(err, KLD_ERR_ARG, "no partials to merge");
    kld_merge_stream *ms = calloc(1, sizeof *ms);
    part *parts = calloc(n, sizeof *parts);
    if (!ms || !parts) {
        free(ms);
        free(parts);
        return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    }
    ms->parts = parts;
    ms->n_parts = n;
    out->stream = ms;
    kld_status st = open_parts(paths, n, parts, err);
    if (!st && !(ms->by_k = calloc(parts[0].h->shard_n, sizeof *ms->by_k)))
        st = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    if (!st) st = check_parts(paths, n, parts, ms->by_k, err);
    if (!st && !(ms->buf = malloc(BATCH * sizeof *ms->buf)))
        st = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    uint64_t n_rec = 0;
    if (!st) {
        ms->h0 = *parts[0].h;
        st = plan_stream(ms, &n_rec, err);
    }
    if (!st) {
        out->records = (kld_record_source){ms, (size_t)n_rec, (int)ms->h0.topk, ms->doc_start,
                                           ms->n_docs, stream_next};
        collect(parts, n, out);
    }
    if (st) kld_merge_result_free(out);
    return st;
}

void kld_merge_result_free(kld_merge_result *r) {
    stream_free(r->stream);
    json_decref(r->config);
    json_decref(r->parts);
    free(r->ref_label);
    free(r->arm_label);
    free(r->corpus_label);
    free(r->label);
    memset(r, 0, sizeof *r);
}
