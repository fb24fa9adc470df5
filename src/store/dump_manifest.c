/* dump_manifest.c — the manifest of a dump (manifest.json, and its twin
 * dump.partial.json): parsed with jansson (duplicate keys refused), every
 * key checked for type and range with messages "FILE: key: ...", and built
 * from a kld_dump_meta for the writer. Unknown keys are ignored so that
 * newer writers stay readable. */
#include "store/dump_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_CTX_LEN INT32_MAX          /* positions are int32 in every consumer */
#define MAX_N_SEQS (INT64_C(1) << 40)  /* tokens.bin's size bounds it long before */
#define MAX_N_VOCAB (INT64_C(1) << 31) /* indices are int32 */

typedef struct mctx {
    const char *path;
    kld_error *err;
} mctx;

/* A JSON value shown in a message: compact, cut to a readable length. */
static void show(const json_t *v, char *buf, size_t n) {
    char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    if (!s) {
        snprintf(buf, n, "(unprintable)");
        return;
    }
    if (strlen(s) > 60)
        snprintf(buf, n, "%.57s...", s);
    else
        snprintf(buf, n, "%s", s);
    free(s);
}

static kld_status wrong_type(const mctx *m, const char *key, const char *expected,
                             const json_t *v) {
    char shown[80];
    show(v, shown, sizeof shown);
    return kld_fail(m->err, KLD_ERR_FORMAT, "%s: %s: expected %s, got %s", m->path, key, expected,
                    shown);
}

static kld_status missing(const mctx *m, const char *key) {
    return kld_fail(m->err, KLD_ERR_FORMAT, "%s: %s: missing (a required key)", m->path, key);
}

/* An integer in [lo, hi]; absent leaves *out alone (or fails when required). */
static kld_status get_int(const mctx *m, const json_t *obj, const char *key, bool required,
                          int64_t lo, int64_t hi, int64_t *out) {
    const json_t *v = json_object_get(obj, key);
    if (!v) return required ? missing(m, key) : KLD_OK;
    if (!json_is_integer(v)) {
        char expected[96];
        snprintf(expected, sizeof expected, "an integer in [%lld, %lld]", (long long)lo,
                 (long long)hi);
        return wrong_type(m, key, expected, v);
    }
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi)
        return kld_fail(m->err, KLD_ERR_FORMAT,
                        "%s: %s: expected an integer in [%lld, %lld], got %lld", m->path, key,
                        (long long)lo, (long long)hi, (long long)x);
    *out = (int64_t)x;
    return KLD_OK;
}

static kld_status get_str(const mctx *m, const json_t *obj, const char *key, const char *shown_key,
                          bool required, bool hex64, const char **out) {
    const json_t *v = json_object_get(obj, key);
    if (!v) return required ? missing(m, shown_key) : KLD_OK;
    if (!json_is_string(v))
        return wrong_type(m, shown_key, hex64 ? "64 lower-case hex digits" : "a string", v);
    const char *s = json_string_value(v);
    if (hex64 && !kld_dumpi_is_hex64(s))
        return wrong_type(m, shown_key, "64 lower-case hex digits", v);
    *out = s;
    return KLD_OK;
}

static kld_status get_bool(const mctx *m, const json_t *obj, const char *key, bool *out) {
    const json_t *v = json_object_get(obj, key);
    if (!v) return KLD_OK;
    if (!json_is_boolean(v)) return wrong_type(m, key, "true or false", v);
    *out = json_is_true(v);
    return KLD_OK;
}

static kld_status parse_teacher(const mctx *m, const json_t *root, kld_dump_meta *meta) {
    const json_t *t = json_object_get(root, "teacher");
    if (!t) return KLD_OK;
    if (!json_is_object(t)) return wrong_type(m, "teacher", "an object", t);
    kld_status st;
    if ((st = get_str(m, t, "model", "teacher.model", false, false, &meta->teacher_model)) ||
        (st = get_str(m, t, "corpus_sha256", "teacher.corpus_sha256", false, true,
                      &meta->teacher_corpus_sha256)) ||
        (st = get_str(m, t, "tokenizer_fingerprint", "teacher.tokenizer_fingerprint", false, true,
                      &meta->teacher_fingerprint)) ||
        (st = get_str(m, t, "created", "teacher.created", false, false, &meta->teacher_created)))
        return st;
    return KLD_OK;
}

/* Format 3: n_embd, hidden_dtype, the head that turns hidden states back
 * into logits, and the sidecar (required: log-sum-exp, next token, argmax). */
static kld_status parse_hidden(const mctx *m, const json_t *root, kld_dump_meta *meta) {
    kld_status st;
    const char *dt = NULL;
    if ((st = get_int(m, root, "n_embd", true, 1, KLD_DUMP_MAX_TOPK, &meta->n_embd)) ||
        (st = get_str(m, root, "hidden_dtype", "hidden_dtype", true, false, &dt)))
        return st;
    meta->hidden_dtype = kld_dump_hidden_parse(dt);
    if (meta->hidden_dtype < 0)
        return kld_fail(m->err, KLD_ERR_FORMAT, "%s: hidden_dtype: expected \"float32\", "
                        "\"bfloat16\" or \"float16\", got \"%.40s\"", m->path, dt);
    if (meta->n_vocab < 1) return missing(m, "n_vocab");
    if (!meta->ext)
        return kld_fail(m->err, KLD_ERR_FORMAT, "%s: ext: a format-3 dump needs its sidecars "
                        "(\"ext\": true)", m->path);
    const json_t *h = json_object_get(root, "head");
    if (!h) return missing(m, "head");
    if (!json_is_object(h)) return wrong_type(m, "head", "an object", h);
    kld_dump_head *hd = &meta->head;
    int64_t tied = -1;
    const json_t *t = json_object_get(h, "tied");
    if (t && !json_is_boolean(t)) return wrong_type(m, "head.tied", "true or false", t);
    tied = t ? json_is_true(t) : 0;
    if ((st = get_str(m, h, "tensor", "head.tensor", true, false, &hd->tensor)) ||
        (st = get_str(m, h, "type", "head.type", true, false, &hd->type)) ||
        (st = get_str(m, h, "sha256", "head.sha256", true, true, &hd->sha256)) ||
        (st = get_int(m, h, "rows", true, 1, MAX_N_VOCAB, &hd->rows)) ||
        (st = get_int(m, h, "cols", true, 1, KLD_DUMP_MAX_TOPK, &hd->cols)))
        return st;
    hd->tied = tied == 1;
    if (hd->rows != meta->n_vocab || hd->cols != meta->n_embd)
        return kld_fail(m->err, KLD_ERR_FORMAT, "%s: head: %lld x %lld, but n_vocab %lld and "
                        "n_embd %lld", m->path, (long long)hd->rows, (long long)hd->cols,
                        (long long)meta->n_vocab, (long long)meta->n_embd);
    const json_t *sc = json_object_get(h, "final_softcap");
    if (sc && (!json_is_number(sc) || !(json_number_value(sc) >= 0) || !isfinite(json_number_value(sc))))
        return wrong_type(m, "head.final_softcap", "a number >= 0", sc);
    hd->final_softcap = sc ? json_number_value(sc) : 0.0;
    const json_t *r = json_object_get(root, "hidden_rounding");
    if (r) {
        const json_t *mean = json_object_get(r, "kld_mean"), *max = json_object_get(r, "kld_max");
        if (!json_is_object(r) || !json_is_number(mean) || !json_is_number(max))
            return wrong_type(m, "hidden_rounding", "{\"kld_mean\": number, \"kld_max\": number}", r);
        meta->has_rounding = true;
        meta->rounding_kld_mean = json_number_value(mean);
        meta->rounding_kld_max = json_number_value(max);
    }
    return KLD_OK;
}

static kld_status parse_meta(const mctx *m, const json_t *root, kld_dump_meta *meta) {
    kld_status st;
    int64_t v = 0;
    const json_t *fv = json_object_get(root, "format_version");
    if (!fv) return missing(m, "format_version");
    if (!json_is_integer(fv)) return wrong_type(m, "format_version", "the integer 1 or 2", fv);
    json_int_t fvi = json_integer_value(fv);
    if (fvi > 3)
        return kld_fail(m->err, KLD_ERR_UNSUPPORTED,
                        "%s: format_version: %lld is not supported (kldeval reads 1, 2 and 3)",
                        m->path, (long long)fvi);
    if (fvi < 1)
        return kld_fail(m->err, KLD_ERR_FORMAT, "%s: format_version: expected 1, 2 or 3, got %lld",
                        m->path, (long long)fvi);
    meta->format_version = (int)fvi;
    bool hidden = fvi == 3;

    if ((st = get_str(m, root, "model", "model", true, false, &meta->model)) ||
        (st = get_str(m, root, "corpus_sha256", "corpus_sha256", true, true,
                      &meta->corpus_sha256)) ||
        (st = get_int(m, root, "ctx_len", true, 2, MAX_CTX_LEN, &meta->ctx_len)) ||
        (st = get_int(m, root, "n_seqs", true, 1, MAX_N_SEQS, &meta->n_seqs)))
        return st;
    if (hidden && json_object_get(root, "top_k"))
        return kld_fail(m->err, KLD_ERR_FORMAT, "%s: top_k: a format-3 dump holds hidden states, "
                        "not a top-k", m->path);
    if (!hidden && (st = get_int(m, root, "top_k", true, 1, KLD_DUMP_MAX_TOPK, &v))) return st;
    meta->top_k = (int32_t)v;
    if ((st =
             get_int(m, root, "positions_per_seq", true, 1, MAX_CTX_LEN, &meta->positions_per_seq)))
        return st;
    if (meta->positions_per_seq != meta->ctx_len - 1)
        return kld_fail(m->err, KLD_ERR_FORMAT,
                        "%s: positions_per_seq: %lld, expected ctx_len - 1 = %lld", m->path,
                        (long long)meta->positions_per_seq, (long long)meta->ctx_len - 1);
    if ((st = get_str(m, root, "created", "created", false, false, &meta->created)) ||
        (st = get_str(m, root, "notes", "notes", false, false, &meta->notes)))
        return st;

    /* kldeval's extensions */
    if ((st = get_str(m, root, "kldeval_version", "kldeval_version", false, false,
                      &meta->kldeval_version)) ||
        (st = get_int(m, root, "n_vocab", false, 1, MAX_N_VOCAB, &meta->n_vocab)) ||
        (st = get_str(m, root, "model_sha256", "model_sha256", false, true, &meta->model_sha256)) ||
        (st = get_str(m, root, "tokenizer_fingerprint", "tokenizer_fingerprint", false, true,
                      &meta->tokenizer_fingerprint)) ||
        (st = get_str(m, root, "chunking", "chunking", false, false, &meta->chunking)) ||
        (st = get_str(m, root, "bos", "bos", false, false, &meta->bos)) ||
        (st = get_str(m, root, "windows", "windows", false, false, &meta->windows)) ||
        (st = get_str(m, root, "levers", "levers", false, false, &meta->levers)) ||
        (st = get_bool(m, root, "ext", &meta->ext)) ||
        (st = get_bool(m, root, "lse_of_stored", &meta->lse_of_stored)))
        return st;
    if (meta->n_vocab > 0 && meta->top_k > meta->n_vocab)
        return kld_fail(m->err, KLD_ERR_FORMAT, "%s: top_k: %d exceeds n_vocab %lld", m->path,
                        (int)meta->top_k, (long long)meta->n_vocab);
    const char *dtype = NULL, *kind = NULL;
    if ((st = get_str(m, root, "logit_dtype", "logit_dtype", false, false, &dtype)) ||
        (st = get_str(m, root, "kind", "kind", false, false, &kind)))
        return st;
    if (hidden && (st = parse_hidden(m, root, meta))) return st;
    const char *implied = meta->format_version == 1 ? "float16" : "float32";
    if (dtype && hidden)
        return kld_fail(m->err, KLD_ERR_FORMAT, "%s: logit_dtype: a format-3 dump stores hidden "
                        "states (hidden_dtype), not logits", m->path);
    if (dtype && strcmp(dtype, implied) != 0)
        return kld_fail(m->err, KLD_ERR_FORMAT,
                        "%s: logit_dtype: \"%.40s\" does not match format_version %d (%s)", m->path,
                        dtype, meta->format_version, implied);
    if (kind && strcmp(kind, "teacher") != 0 && strcmp(kind, "candidate") != 0)
        return kld_fail(m->err, KLD_ERR_FORMAT,
                        "%s: kind: expected \"teacher\" or \"candidate\", got \"%.40s\"", m->path,
                        kind);
    meta->candidate = kind && strcmp(kind, "candidate") == 0;
    return parse_teacher(m, root, meta);
}

kld_status kld_dumpi_manifest_parse(const char *path, const char *text, size_t n, json_t **root,
                                    kld_dump_meta *meta, kld_error *err) {
    *root = NULL;
    memset(meta, 0, sizeof *meta);
    json_error_t je;
    json_t *r = json_loadb(text, n, JSON_REJECT_DUPLICATES, &je);
    if (!r)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: invalid JSON at line %d column %d: %s", path,
                        je.line, je.column, je.text);
    mctx m = {path, err};
    kld_status st =
        json_is_object(r) ? parse_meta(&m, r, meta) : wrong_type(&m, "(top level)", "an object", r);
    if (st) {
        json_decref(r);
        memset(meta, 0, sizeof *meta);
        return st;
    }
    *root = r;
    return KLD_OK;
}

kld_status kld_dumpi_manifest_load(const char *path, json_t **root, kld_dump_meta *meta,
                                   kld_error *err) {
    *root = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return kld_fail(err, e == ENOENT ? KLD_ERR_FORMAT : KLD_ERR_IO, "%s: cannot open: %s%s",
                        path, strerror(e), e == ENOENT ? " (not a complete dump)" : "");
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return kld_fail(err, KLD_ERR_FORMAT, "%s: not a regular file", path);
    }
    if ((uint64_t)sb.st_size > KLD_DUMPI_MANIFEST_MAX) {
        close(fd);
        return kld_fail(err, KLD_ERR_FORMAT, "%s: %lld bytes, more than a manifest may have (%u)",
                        path, (long long)sb.st_size, KLD_DUMPI_MANIFEST_MAX);
    }
    size_t n = (size_t)sb.st_size;
    char *text = malloc(n + 1);
    if (!text) {
        close(fd);
        return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", path);
    }
    int64_t got = kld_dumpi_pread(fd, text, n, 0);
    int e = errno;
    close(fd);
    if (got != (int64_t)n) {
        free(text);
        return kld_fail(err, KLD_ERR_IO, "%s: read failed: %s", path,
                        got < 0 ? strerror(e) : "the file shrank while reading");
    }
    text[n] = '\0';
    kld_status st = kld_dumpi_manifest_parse(path, text, n, root, meta, err);
    free(text);
    return st;
}

static kld_status bad_arg_str(kld_error *err, const char *key, const char *s, bool hex64) {
    if (!kld_utf8_valid(s, strlen(s)))
        return kld_fail(err, KLD_ERR_ARG, "dump meta: %s is not valid UTF-8", key);
    if (hex64 && !kld_dumpi_is_hex64(s))
        return kld_fail(err, KLD_ERR_ARG,
                        "dump meta: %s: expected 64 lower-case hex digits, got \"%.80s\"", key, s);
    return KLD_OK;
}

kld_status kld_dumpi_meta_check(const kld_dump_meta *m, kld_error *err) {
    if (m->format_version < 1 || m->format_version > 3)
        return kld_fail(err, KLD_ERR_ARG, "dump meta: format_version %d (expected 1, 2 or 3)",
                        m->format_version);
    if (!m->model) return kld_fail(err, KLD_ERR_ARG, "dump meta: model is required");
    if (!m->corpus_sha256)
        return kld_fail(err, KLD_ERR_ARG, "dump meta: corpus_sha256 is required");
    if (m->ctx_len < 2 || m->ctx_len > MAX_CTX_LEN)
        return kld_fail(err, KLD_ERR_ARG, "dump meta: ctx_len %lld (expected 2 .. %d)",
                        (long long)m->ctx_len, MAX_CTX_LEN);
    if (m->n_seqs < 1 || m->n_seqs > MAX_N_SEQS)
        return kld_fail(err, KLD_ERR_ARG, "dump meta: n_seqs %lld (expected 1 .. 2^40)",
                        (long long)m->n_seqs);
    if (m->format_version == 3) {
        if (m->top_k != 0 || !kld_dump_meta_record_bytes(m) || m->n_vocab < 1 || !m->ext ||
            !m->head.tensor || !m->head.type || !m->head.sha256 || m->head.rows != m->n_vocab ||
            m->head.cols != m->n_embd)
            return kld_fail(err, KLD_ERR_ARG, "dump meta: format 3 needs top_k 0, n_embd, a hidden "
                            "dtype, n_vocab, ext and the head (n_vocab x n_embd)");
    } else if (m->top_k < 1 || m->top_k > KLD_DUMP_MAX_TOPK)
        return kld_fail(err, KLD_ERR_ARG, "dump meta: top_k %d (expected 1 .. %d)", (int)m->top_k,
                        KLD_DUMP_MAX_TOPK);
    if (m->positions_per_seq != 0 && m->positions_per_seq != m->ctx_len - 1)
        return kld_fail(err, KLD_ERR_ARG,
                        "dump meta: positions_per_seq %lld (expected ctx_len - 1 = %lld, or 0)",
                        (long long)m->positions_per_seq, (long long)m->ctx_len - 1);
    if (m->n_vocab < 0 || m->n_vocab > MAX_N_VOCAB)
        return kld_fail(err, KLD_ERR_ARG, "dump meta: n_vocab %lld (expected 0 = unknown .. 2^31)",
                        (long long)m->n_vocab);
    if (m->n_vocab > 0 && m->top_k > m->n_vocab)
        return kld_fail(err, KLD_ERR_ARG, "dump meta: top_k %d exceeds n_vocab %lld", (int)m->top_k,
                        (long long)m->n_vocab);
    if (!m->candidate && (m->teacher_model || m->teacher_corpus_sha256 || m->teacher_fingerprint ||
                          m->teacher_created))
        return kld_fail(err, KLD_ERR_ARG, "dump meta: teacher_* keys belong to a candidate dump");
    const struct {
        const char *key, *s;
        bool hex;
    } strs[] = {{"model", m->model, false},
                {"corpus_sha256", m->corpus_sha256, true},
                {"created", m->created, false},
                {"notes", m->notes, false},
                {"kldeval_version", m->kldeval_version, false},
                {"model_sha256", m->model_sha256, true},
                {"tokenizer_fingerprint", m->tokenizer_fingerprint, true},
                {"chunking", m->chunking, false},
                {"bos", m->bos, false},
                {"windows", m->windows, false},
                {"levers", m->levers, false},
                {"teacher_model", m->teacher_model, false},
                {"teacher_corpus_sha256", m->teacher_corpus_sha256, true},
                {"teacher_fingerprint", m->teacher_fingerprint, true},
                {"teacher_created", m->teacher_created, false}};
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++) {
        if (!strs[i].s) continue;
        kld_status st = bad_arg_str(err, strs[i].key, strs[i].s, strs[i].hex);
        if (st) return st;
    }
    return KLD_OK;
}

/* json_object_set_new that remembers a failed allocation. */
static void put(json_t *o, const char *key, json_t *v, bool *ok) {
    if (!v || json_object_set_new(o, key, v) != 0) *ok = false;
}

static void put_str(json_t *o, const char *key, const char *s, bool *ok) {
    if (s) put(o, key, json_string(s), ok);
}

json_t *kld_dumpi_manifest_build(const kld_dump_meta *m) {
    json_t *o = json_object();
    if (!o) return NULL;
    bool ok = true;
    /* the seed's v1 keys first, in its order */
    put(o, "format_version", json_integer(m->format_version), &ok);
    put_str(o, "model", m->model, &ok);
    put_str(o, "corpus_sha256", m->corpus_sha256, &ok);
    put(o, "ctx_len", json_integer(m->ctx_len), &ok);
    put(o, "n_seqs", json_integer(m->n_seqs), &ok);
    if (m->format_version != 3) put(o, "top_k", json_integer(m->top_k), &ok);
    put(o, "positions_per_seq", json_integer(m->ctx_len - 1), &ok);
    put_str(o, "created", m->created, &ok);
    put_str(o, "notes", m->notes ? m->notes : "", &ok);
    /* kldeval's extensions */
    put_str(o, "kldeval_version", m->kldeval_version, &ok);
    put(o, "kind", json_string(m->candidate ? "candidate" : "teacher"), &ok);
    if (m->format_version != 3) {
        put(o, "logit_dtype", json_string(m->format_version == 1 ? "float16" : "float32"), &ok);
    } else {
        put(o, "n_embd", json_integer(m->n_embd), &ok);
        put(o, "hidden_dtype", json_string(kld_dump_hidden_name(m->hidden_dtype)), &ok);
        const kld_dump_head *h = &m->head;
        put(o, "head", json_pack("{s:s,s:s,s:I,s:I,s:s,s:b,s:f}", "tensor", h->tensor, "type",
                                 h->type, "rows", (json_int_t)h->rows, "cols", (json_int_t)h->cols,
                                 "sha256", h->sha256, "tied", h->tied, "final_softcap",
                                 h->final_softcap), &ok);
        if (m->has_rounding)
            put(o, "hidden_rounding", json_pack("{s:f,s:f}", "kld_mean", m->rounding_kld_mean,
                                                "kld_max", m->rounding_kld_max), &ok);
    }
    put(o, "ext", json_boolean(m->ext), &ok);
    if (m->lse_of_stored) put(o, "lse_of_stored", json_true(), &ok);
    if (m->n_vocab > 0) put(o, "n_vocab", json_integer(m->n_vocab), &ok);
    put_str(o, "model_sha256", m->model_sha256, &ok);
    put_str(o, "tokenizer_fingerprint", m->tokenizer_fingerprint, &ok);
    put_str(o, "chunking", m->chunking, &ok);
    put_str(o, "bos", m->bos, &ok);
    put_str(o, "windows", m->windows, &ok);
    put_str(o, "levers", m->levers, &ok);
    if (m->candidate && (m->teacher_model || m->teacher_corpus_sha256 || m->teacher_fingerprint ||
                         m->teacher_created)) {
        json_t *t = json_object();
        if (t) {
            put_str(t, "model", m->teacher_model, &ok);
            put_str(t, "corpus_sha256", m->teacher_corpus_sha256, &ok);
            put_str(t, "tokenizer_fingerprint", m->teacher_fingerprint, &ok);
            put_str(t, "created", m->teacher_created, &ok);
        }
        put(o, "teacher", t, &ok);
    }
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}
