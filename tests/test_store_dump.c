/* test_store_dump.c — dump v1/v2 writer and reader (src/store/dump.h):
 * round trips against a slow reference, the byte layout of a hand-packed
 * tiny dump, manifest keys and types, resume (torn records, byte-identical
 * result), refusals, writer argument errors, and a full disk (ENOSPC on a
 * small tmpfs mounted under the build folder when running as root). */
#include "dump_testutil.h"
#include "tensor/types.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <sys/mount.h>

#define SHA_A "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define SHA_B "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
#define CREATED "2026-01-02T03:04:05Z"

typedef struct spec {
    int fv;
    bool ext, candidate;
    int64_t n_vocab;
    int32_t top_k;
    int64_t ctx_len, n_seqs;
} spec;

static kld_dump_meta meta_of(const spec *s) {
    kld_dump_meta m = {0};
    m.format_version = s->fv;
    m.model = "synthetic-model";
    m.corpus_sha256 = SHA_A;
    m.ctx_len = s->ctx_len;
    m.n_seqs = s->n_seqs;
    m.top_k = s->top_k;
    m.positions_per_seq = s->ctx_len - 1;
    m.created = CREATED;
    m.notes = "test dump";
    m.kldeval_version = "0.1.0";
    m.n_vocab = s->n_vocab;
    m.model_sha256 = SHA_B;
    m.tokenizer_fingerprint = SHA_A;
    m.chunking = "doc";
    m.bos = "none";
    m.windows = "ctx_len windows of the corpus";
    m.ext = s->ext;
    m.candidate = s->candidate;
    if (s->candidate) {
        m.teacher_model = "teacher-model";
        m.teacher_corpus_sha256 = SHA_A;
        m.teacher_fingerprint = SHA_B;
        m.teacher_created = "2025-12-31T23:59:59Z";
    }
    return m;
}

static int32_t *tokens_of(const spec *s) {
    int32_t *t = malloc((size_t)(s->n_seqs * s->ctx_len) * sizeof *t);
    for (int64_t i = 0; i < s->n_seqs; i++)
        for (int64_t p = 0; p < s->ctx_len; p++) t[i * s->ctx_len + p] = dt_token(i, p, s->n_vocab);
    return t;
}

static void rows_alloc(kld_dump_rows *r, int64_t n, int32_t k) {
    r->idx = malloc((size_t)(n * k) * sizeof *r->idx);
    r->val = malloc((size_t)(n * k) * sizeof *r->val);
    r->lse = malloc((size_t)n * sizeof *r->lse);
    r->lse64 = malloc((size_t)n * sizeof *r->lse64);
    r->logp_next = malloc((size_t)n * sizeof *r->logp_next);
    r->argmax = malloc((size_t)n * sizeof *r->argmax);
}

static void rows_free(kld_dump_rows *r) {
    free(r->idx);
    free(r->val);
    free(r->lse);
    free(r->lse64);
    free(r->logp_next);
    free(r->argmax);
}

/* The reference records [rec0, rec0 + n) of seq. */
static void ref_rows(const spec *s, int64_t seq, int64_t rec0, int64_t n, kld_dump_rows *r) {
    size_t k = (size_t)s->top_k;
    int32_t *tidx = malloc(k * sizeof *tidx);
    float *tval = malloc(k * sizeof *tval);
    for (int64_t i = 0; i < n; i++) {
        int64_t rec = rec0 + i;
        int32_t next = dt_token(seq, rec + 1, s->n_vocab);
        float tl;
        if (s->candidate)
            dt_record(seq, rec, s->n_vocab, s->top_k, 0, next, NULL, tidx, tval, &tl, NULL, NULL,
                      NULL);
        dt_record(seq, rec, s->n_vocab, s->top_k, s->candidate ? 1 : 0, next,
                  s->candidate ? tidx : NULL, r->idx + (size_t)i * k, r->val + (size_t)i * k,
                  &r->lse[i], &r->lse64[i], &r->logp_next[i], &r->argmax[i]);
    }
    free(tidx);
    free(tval);
}

/* Writes the records with global numbers [from, to) (g = seq * pps + rec),
 * chunk at a time, never across a sequence. */
static kld_status write_global(kld_dump_writer *w, const spec *s, int64_t from, int64_t to,
                               int64_t chunk, kld_error *err) {
    int64_t pps = s->ctx_len - 1;
    kld_dump_rows r;
    rows_alloc(&r, chunk, s->top_k);
    kld_status st = KLD_OK;
    for (int64_t g = from; g < to && !st;) {
        int64_t seq = g / pps, rec = g % pps;
        int64_t n = chunk;
        if (n > pps - rec) n = pps - rec;
        if (n > to - g) n = to - g;
        ref_rows(s, seq, rec, n, &r);
        st = kld_dump_write(w, seq, rec, n, &r, err);
        g += n;
    }
    rows_free(&r);
    return st;
}

static char *bpath(const char *name) {
    static char buf[8][1024];
    static int slot;
    char *p = buf[slot++ % 8];
    snprintf(p, 1024, "%s/%s", kt_build_dir(), name);
    return p;
}

static char *fpath(const char *dir, const char *name) {
    static char buf[8][1200];
    static int slot;
    char *p = buf[slot++ % 8];
    snprintf(p, 1200, "%s/%s", dir, name);
    return p;
}

static bool write_whole(const char *dir, const spec *s, int64_t chunk) {
    kld_dump_meta m = meta_of(s);
    int32_t *tok = tokens_of(s);
    kld_dump_writer *w = NULL;
    kld_error err = {0};
    dt_rm_dir(dir);
    kld_status st = kld_dump_create(dir, &m, tok, false, &w, NULL, NULL, &err);
    CHECK_OK(st, err);
    if (!st) st = write_global(w, s, 0, s->n_seqs * (s->ctx_len - 1), chunk, &err);
    CHECK_OK(st, err);
    if (!st) st = kld_dump_finish(w, &err);
    CHECK_OK(st, err);
    kld_dump_writer_free(w);
    free(tok);
    return st == KLD_OK;
}

/* Reads the whole dump back in pieces and compares with the reference. */
static void check_read_back(const char *dir, const spec *s, int64_t piece) {
    kld_dump *d = NULL;
    kld_error err = {0};
    kld_status st = kld_dump_open(dir, 0, &d, &err);
    CHECK_OK(st, err);
    if (st) return;
    const kld_dump_meta *m = kld_dump_meta_of(d);
    CHECK(m->format_version == s->fv && m->top_k == s->top_k && m->ctx_len == s->ctx_len &&
              m->n_seqs == s->n_seqs && m->ext == s->ext && m->candidate == s->candidate &&
              m->n_vocab == s->n_vocab,
          "%s: meta read back differs", dir);
    CHECK(m->created && strcmp(m->created, CREATED) == 0, "%s: created", dir);
    CHECK(!s->candidate || (m->teacher_model && strcmp(m->teacher_model, "teacher-model") == 0),
          "%s: teacher.model", dir);
    int32_t *tok = tokens_of(s);
    bool tok_ok = true;
    for (int64_t i = 0; i < s->n_seqs; i++)
        tok_ok = tok_ok &&
                 memcmp(kld_dump_tokens(d, i), tok + i * s->ctx_len, (size_t)s->ctx_len * 4) == 0;
    CHECK(tok_ok, "%s: tokens differ", dir);
    CHECK(kld_dump_tokens(d, s->n_seqs) == NULL && kld_dump_tokens(d, -1) == NULL,
          "%s: tokens of a sequence out of range", dir);
    free(tok);
    int64_t pps = s->ctx_len - 1;
    size_t k = (size_t)s->top_k;
    kld_dump_rows got, want;
    rows_alloc(&got, piece, s->top_k);
    rows_alloc(&want, piece, s->top_k);
    long bad_idx = 0, bad_val = 0, bad_lse = 0, bad_ext = 0, rows_read = 0;
    for (int64_t seq = 0; seq < s->n_seqs; seq++)
        for (int64_t rec = 0; rec < pps; rec += piece) {
            int64_t n = piece < pps - rec ? piece : pps - rec;
            st = kld_dump_read(d, seq, rec, n, &got, &err);
            CHECK_OK(st, err);
            if (st) continue;
            ref_rows(s, seq, rec, n, &want);
            for (int64_t i = 0; i < n; i++) {
                rows_read++;
                for (size_t j = 0; j < k; j++) {
                    size_t o = (size_t)i * k + j;
                    float expect = want.val[o];
                    if (s->fv == 1) expect = kld_f16_to_f32(kld_f32_to_f16(expect));
                    bad_idx += got.idx[o] != want.idx[o];
                    bad_val += memcmp(&got.val[o], &expect, 4) != 0;
                }
                bad_lse += got.lse[i] != want.lse[i];
                if (s->ext)
                    bad_ext += memcmp(&got.lse64[i], &want.lse64[i], 8) != 0 ||
                               memcmp(&got.logp_next[i], &want.logp_next[i], 8) != 0 ||
                               got.argmax[i] != want.argmax[i];
                else
                    bad_ext +=
                        !isnan(got.lse64[i]) || !isnan(got.logp_next[i]) || got.argmax[i] != -1;
            }
        }
    CHECK(rows_read == s->n_seqs * pps, "%s: %ld records read", dir, rows_read);
    CHECK(bad_idx == 0 && bad_val == 0 && bad_lse == 0 && bad_ext == 0,
          "%s (v%d ext %d cand %d): %ld indices, %ld logits, %ld lse, %ld sidecar entries differ",
          dir, s->fv, s->ext, s->candidate, bad_idx, bad_val, bad_lse, bad_ext);
    /* the sidecar arrays are optional */
    kld_dump_rows min = {got.idx, got.val, got.lse, NULL, NULL, NULL};
    CHECK_OK(kld_dump_read(d, s->n_seqs - 1, pps - 1, 1, &min, &err), err);
    /* requests outside the dump */
    CHECK(kld_dump_read(d, s->n_seqs, 0, 1, &got, &err) == KLD_ERR_ARG, "seq out of range");
    CHECK(kld_dump_read(d, 0, pps, 1, &got, &err) == KLD_ERR_ARG, "record out of range");
    CHECK(kld_dump_read(d, 0, -1, 1, &got, &err) == KLD_ERR_ARG, "negative record");
    CHECK(kld_dump_read(d, 0, 0, pps + 1, &got, &err) == KLD_ERR_ARG, "too many records");
    CHECK_OK(kld_dump_read(d, 0, pps, 0, &got, &err), err);
    kld_dump_rows none = {0};
    CHECK(kld_dump_read(d, 0, 0, 1, &none, &err) == KLD_ERR_ARG, "NULL arrays");
    /* a vocabulary limit below the dump's indices is refused at open or on read */
    kld_dump *d2 = NULL;
    st = kld_dump_open(dir, s->top_k, &d2, &err);
    if (st == KLD_OK) {
        kld_status worst = KLD_OK;
        for (int64_t seq = 0; seq < s->n_seqs && !worst; seq++)
            worst = kld_dump_read(d2, seq, 0, pps < piece ? pps : piece, &got, &err);
        if (s->top_k < s->n_vocab)
            CHECK(worst == KLD_ERR_FORMAT && strstr(err.msg, "outside [0, "), "%s: limit %d: %s",
                  dir, (int)s->top_k, err.msg);
        else
            CHECK(worst == KLD_OK, "%s: limit %d = n_vocab: %s", dir, (int)s->top_k, err.msg);
        kld_dump_close(d2);
    } else {
        CHECK(st == KLD_ERR_FORMAT, "%s: limit %d: %s", dir, (int)s->top_k, err.msg);
    }
    rows_free(&got);
    rows_free(&want);
    kld_dump_close(d);
}

static void test_round_trips(void) {
    for (int fv = 1; fv <= 2; fv++)
        for (int ext = 0; ext <= 1; ext++)
            for (int cand = 0; cand <= 1; cand++) {
                spec s = {fv, ext, cand, 60, 7, 9, 3};
                char name[64];
                snprintf(name, sizeof name, "dump-rt-v%d-e%d-c%d", fv, ext, cand);
                const char *dir = bpath(name);
                if (!write_whole(dir, &s, 3)) continue;
                CHECK(!dt_exists(fpath(dir, "dump.partial.json")), "%s: partial manifest left",
                      dir);
                CHECK(!dt_exists(fpath(dir, "manifest.json.tmp")), "%s: temporary left", dir);
                CHECK(dt_exists(fpath(dir, "seq-2.ext.bin")) == (ext != 0), "%s: sidecar", dir);
                CHECK(dt_file_size(fpath(dir, "seq-1.bin")) ==
                          (long long)(8 * kld_dump_record_bytes(fv, 7)),
                      "%s: seq-1.bin size", dir);
                check_read_back(dir, &s, 3);
                check_read_back(dir, &s, 8);
                check_read_back(dir, &s, 1);
            }
    /* top_k 1 and top_k == n_vocab (every index once) */
    spec s1 = {1, true, false, 5, 1, 3, 2};
    if (write_whole(bpath("dump-rt-k1"), &s1, 2)) check_read_back(bpath("dump-rt-k1"), &s1, 2);
    spec s2 = {2, true, false, 5, 5, 3, 2};
    if (write_whole(bpath("dump-rt-kv"), &s2, 1)) check_read_back(bpath("dump-rt-kv"), &s2, 2);
    CHECK(kld_dump_record_bytes(1, 3) == 22 && kld_dump_record_bytes(2, 3) == 28 &&
              kld_dump_record_bytes(3, 3) == 0 && kld_dump_record_bytes(1, 0) == 0 &&
              kld_dump_record_bytes(2, KLD_DUMP_MAX_TOPK + 1) == 0,
          "kld_dump_record_bytes");
}

/* ---- the tiny dump, hand-packed ---- */

typedef struct tiny_val {
    float f;
    uint16_t f16;
    uint32_t f32;
} tiny_val;

static const int32_t tiny_idx[2][3][3] = {{{2, 5, 7}, {0, 1, 9}, {9, 3, 4}},
                                          {{4, 2, 0}, {1, 2, 3}, {6, 7, 8}}};
static const tiny_val tiny_vals[2][3][3] = {
    {{{1.0f, 0x3C00, 0x3F800000}, {0.5f, 0x3800, 0x3F000000}, {-2.0f, 0xC000, 0xC0000000}},
     {{2.0f, 0x4000, 0x40000000}, {2.0f, 0x4000, 0x40000000}, {0.25f, 0x3400, 0x3E800000}},
     {{-0.5f, 0xB800, 0xBF000000}, {-1.0f, 0xBC00, 0xBF800000}, {-1.5f, 0xBE00, 0xBFC00000}}},
    {{{8.0f, 0x4800, 0x41000000}, {4.0f, 0x4400, 0x40800000}, {1.0f, 0x3C00, 0x3F800000}},
     {{0.0f, 0x0000, 0x00000000}, {-1.0f, 0xBC00, 0xBF800000}, {-2.0f, 0xC000, 0xC0000000}},
     {{3.0f, 0x4200, 0x40400000}, {1.5f, 0x3E00, 0x3FC00000}, {0.75f, 0x3A00, 0x3F400000}}}};
static const struct {
    float f;
    uint32_t f32;
    uint64_t f64;
} tiny_lse[2][3] = {{{3.5f, 0x40600000, 0x400C000000000000},
                     {4.0f, 0x40800000, 0x4010000000000000},
                     {1.0f, 0x3F800000, 0x3FF0000000000000}},
                    {{8.5f, 0x41080000, 0x4021000000000000},
                     {0.5f, 0x3F000000, 0x3FE0000000000000},
                     {3.25f, 0x40500000, 0x400A000000000000}}};
static const uint64_t tiny_logp[2][3] = {
    {0xBFF4000000000000, 0x7FF8000000000000, 0xBFF4000000000000},
    {0xC000000000000000, 0xBFF4000000000000, 0xBFE0000000000000}};
static const int32_t tiny_argmax[2][3] = {{2, 0, -1}, {4, 1, 6}};
static const int32_t tiny_tokens[2][4] = {{1, 2, 3, 4}, {5, 6, 7, 8}};

typedef struct packer {
    uint8_t b[512];
    size_t n;
} packer;
static void pk(packer *p, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; i++) p->b[p->n++] = (uint8_t)(v >> (8 * i));
}

static void test_tiny_layout(void) {
    for (int fv = 1; fv <= 2; fv++) {
        spec s = {fv, true, false, 10, 3, 4, 2};
        kld_dump_meta m = meta_of(&s);
        const char *dir = bpath(fv == 1 ? "dump-tiny-v1" : "dump-tiny-v2");
        dt_rm_dir(dir);
        kld_dump_writer *w = NULL;
        kld_error err = {0};
        int64_t ds = -1, dr = -1;
        kld_status st = kld_dump_create(dir, &m, &tiny_tokens[0][0], false, &w, &ds, &dr, &err);
        CHECK_OK(st, err);
        if (st) continue;
        CHECK(ds == 0 && dr == 0, "fresh dump: done %lld %lld", (long long)ds, (long long)dr);
        CHECK(dt_exists(fpath(dir, "dump.partial.json")) && !dt_exists(fpath(dir, "manifest.json")),
              "%s: partial manifest while writing", dir);
        for (int q = 0; q < 2; q++) {
            int32_t idx[9];
            float val[9], lse[3];
            double lse64[3], logp[3];
            int32_t am[3];
            for (int r = 0; r < 3; r++) {
                for (int j = 0; j < 3; j++) {
                    idx[r * 3 + j] = tiny_idx[q][r][j];
                    val[r * 3 + j] = tiny_vals[q][r][j].f;
                }
                lse[r] = tiny_lse[q][r].f;
                memcpy(&lse64[r], &tiny_lse[q][r].f64, 8);
                memcpy(&logp[r], &tiny_logp[q][r], 8);
                am[r] = tiny_argmax[q][r];
            }
            kld_dump_rows rows = {idx, val, lse, lse64, logp, am};
            /* sequence 0 in two calls, sequence 1 in one */
            if (q == 0) {
                kld_dump_rows tail = {idx + 3, val + 3, lse + 1, lse64 + 1, logp + 1, am + 1};
                CHECK_OK(kld_dump_write(w, 0, 0, 1, &rows, &err), err);
                CHECK_OK(kld_dump_write(w, 0, 1, 2, &tail, &err), err);
            } else {
                CHECK_OK(kld_dump_write(w, 1, 0, 3, &rows, &err), err);
            }
        }
        CHECK_OK(kld_dump_finish(w, &err), err);
        kld_dump_writer_free(w);

        for (int q = 0; q < 2; q++) {
            packer p = {{0}, 0}, e = {{0}, 0};
            for (int r = 0; r < 3; r++) {
                for (int j = 0; j < 3; j++) pk(&p, (uint32_t)tiny_idx[q][r][j], 4);
                for (int j = 0; j < 3; j++)
                    if (fv == 1)
                        pk(&p, tiny_vals[q][r][j].f16, 2);
                    else
                        pk(&p, tiny_vals[q][r][j].f32, 4);
                pk(&p, tiny_lse[q][r].f32, 4);
                pk(&e, tiny_lse[q][r].f64, 8);
                pk(&e, tiny_logp[q][r], 8);
                pk(&e, (uint32_t)tiny_argmax[q][r], 4);
                pk(&e, 0, 4);
            }
            CHECK(p.n == (size_t)(fv == 1 ? 66 : 84) && e.n == 72, "packer sizes");
            char name[32], ename[32];
            snprintf(name, sizeof name, "seq-%d.bin", q);
            snprintf(ename, sizeof ename, "seq-%d.ext.bin", q);
            size_t n;
            char *got = kt_read_file(fpath(dir, name), &n);
            CHECK(n == p.n && memcmp(got, p.b, n) == 0,
                  "%s/%s: bytes differ from the hand-packed record", dir, name);
            free(got);
            got = kt_read_file(fpath(dir, ename), &n);
            CHECK(n == e.n && memcmp(got, e.b, n) == 0,
                  "%s/%s: bytes differ from the hand-packed sidecar", dir, ename);
            free(got);
        }
        packer t = {{0}, 0};
        for (int q = 0; q < 2; q++)
            for (int i = 0; i < 4; i++) pk(&t, (uint32_t)tiny_tokens[q][i], 4);
        size_t n;
        char *got = kt_read_file(fpath(dir, "tokens.bin"), &n);
        CHECK(n == 32 && memcmp(got, t.b, 32) == 0, "%s/tokens.bin bytes", dir);
        free(got);

        /* the manifest: exactly these keys, with these types and values */
        json_error_t je;
        json_t *root = json_load_file(fpath(dir, "manifest.json"), JSON_REJECT_DUPLICATES, &je);
        CHECK(root && json_is_object(root), "%s/manifest.json: %s", dir, root ? "" : je.text);
        if (!root) continue;
        static const char *ints[] = {"format_version", "ctx_len",           "n_seqs",
                                     "top_k",          "positions_per_seq", "n_vocab"};
        const long long int_vals[] = {fv, 4, 2, 3, 3, 10};
        for (int i = 0; i < 6; i++) {
            json_t *v = json_object_get(root, ints[i]);
            CHECK(json_is_integer(v) && json_integer_value(v) == int_vals[i], "manifest %s",
                  ints[i]);
        }
        static const struct {
            const char *key, *value;
        } strs[] = {{"model", "synthetic-model"},
                    {"corpus_sha256", SHA_A},
                    {"created", CREATED},
                    {"notes", "test dump"},
                    {"kldeval_version", "0.1.0"},
                    {"model_sha256", SHA_B},
                    {"tokenizer_fingerprint", SHA_A},
                    {"chunking", "doc"},
                    {"bos", "none"},
                    {"windows", "ctx_len windows of the corpus"},
                    {"kind", "teacher"},
                    {"logit_dtype", NULL}};
        for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++) {
            json_t *v = json_object_get(root, strs[i].key);
            const char *want = strs[i].value ? strs[i].value : fv == 1 ? "float16" : "float32";
            CHECK(json_is_string(v) && strcmp(json_string_value(v), want) == 0, "manifest %s",
                  strs[i].key);
        }
        CHECK(json_is_true(json_object_get(root, "ext")), "manifest ext");
        CHECK(json_object_size(root) == 6 + sizeof strs / sizeof strs[0] + 1,
              "manifest has %zu keys", json_object_size(root));
        CHECK(json_object_get(root, "teacher") == NULL, "a teacher dump has no teacher key");
        /* the seed's keys come first, in its order */
        const char *first = json_object_iter_key(json_object_iter(root));
        CHECK(first && strcmp(first, "format_version") == 0, "first key %s", first ? first : "?");
        json_decref(root);
        size_t mn;
        char *mtext = kt_read_file(fpath(dir, "manifest.json"), &mn);
        CHECK(mn > 0 && mtext[mn - 1] == '\n', "manifest ends with a newline");
        free(mtext);

        /* read back: values as packed, sidecar NaN kept */
        kld_dump *d = NULL;
        CHECK_OK(kld_dump_open(dir, 10, &d, &err), err);
        if (!d) continue;
        int32_t idx[9], am[3];
        float val[9], lse[3];
        double lse64[3], logp[3];
        kld_dump_rows rows = {idx, val, lse, lse64, logp, am};
        CHECK_OK(kld_dump_read(d, 0, 0, 3, &rows, &err), err);
        CHECK(idx[3] == 0 && idx[4] == 1 && val[3] == 2.0f && val[4] == 2.0f && lse[1] == 4.0f &&
                  isnan(logp[1]) && am[2] == -1 && lse64[0] == 3.5,
              "tiny read back");
        kld_dump_close(d);
    }
    /* a candidate's manifest carries the teacher object */
    spec c = {2, false, true, 10, 3, 4, 2};
    const char *cdir = bpath("dump-tiny-cand");
    if (write_whole(cdir, &c, 3)) {
        json_t *root = json_load_file(fpath(cdir, "manifest.json"), JSON_REJECT_DUPLICATES, NULL);
        json_t *t = json_object_get(root, "teacher");
        CHECK(json_is_object(t) && json_object_size(t) == 4 &&
                  !strcmp(json_string_value(json_object_get(t, "model")), "teacher-model") &&
                  !strcmp(json_string_value(json_object_get(t, "corpus_sha256")), SHA_A) &&
                  !strcmp(json_string_value(json_object_get(t, "tokenizer_fingerprint")), SHA_B) &&
                  !strcmp(json_string_value(json_object_get(t, "created")), "2025-12-31T23:59:59Z"),
              "candidate manifest: teacher object");
        CHECK(!strcmp(json_string_value(json_object_get(root, "kind")), "candidate") &&
                  json_is_false(json_object_get(root, "ext")),
              "candidate manifest: kind, ext");
        json_decref(root);
    }
    /* created is filled in when the caller leaves it out */
    spec s = {1, false, false, 10, 3, 4, 2};
    kld_dump_meta m = meta_of(&s);
    m.created = NULL;
    m.notes = NULL;
    m.n_vocab = 0;
    const char *dir = bpath("dump-tiny-defaults");
    dt_rm_dir(dir);
    kld_dump_writer *w = NULL;
    kld_error err = {0};
    CHECK_OK(kld_dump_create(dir, &m, &tiny_tokens[0][0], false, &w, NULL, NULL, &err), err);
    kld_dump_writer_free(w);
    json_t *root = json_load_file(fpath(dir, "dump.partial.json"), 0, NULL);
    const char *cr = json_string_value(json_object_get(root, "created"));
    CHECK(cr && strlen(cr) == 20 && cr[4] == '-' && cr[10] == 'T' && cr[19] == 'Z', "created %s",
          cr ? cr : "(none)");
    CHECK(json_is_string(json_object_get(root, "notes")) &&
              !strcmp(json_string_value(json_object_get(root, "notes")), "") &&
              !json_object_get(root, "n_vocab"),
          "notes written as \"\", n_vocab absent");
    json_decref(root);
}

/* A float16 logit may round above the float32 logsumexp: still valid. */
static void test_v1_rounding_tolerance(void) {
    spec s = {1, false, false, 4, 1, 2, 1};
    kld_dump_meta m = meta_of(&s);
    int32_t tok[2] = {0, 1};
    const char *dir = bpath("dump-v1-tolerance");
    dt_rm_dir(dir);
    kld_dump_writer *w = NULL;
    kld_error err = {0};
    CHECK_OK(kld_dump_create(dir, &m, tok, false, &w, NULL, NULL, &err), err);
    int32_t idx[1] = {3};
    float val[1] = {10.004f}, lse[1] = {10.004f};
    kld_dump_rows rows = {idx, val, lse, NULL, NULL, NULL};
    CHECK_OK(kld_dump_write(w, 0, 0, 1, &rows, &err), err);
    CHECK_OK(kld_dump_finish(w, &err), err);
    kld_dump_writer_free(w);
    kld_dump *d = NULL;
    CHECK_OK(kld_dump_open(dir, 0, &d, &err), err);
    if (!d) return;
    CHECK_OK(kld_dump_read(d, 0, 0, 1, &rows, &err), err);
    CHECK(val[0] > lse[0] && val[0] == kld_f16_to_f32(kld_f32_to_f16(10.004f)),
          "rounded logit %.9g above lse %.9g", (double)val[0], (double)lse[0]);
    kld_dump_close(d);
}

/* ---- resume ---- */

static kld_status resume_writer(const char *dir, const spec *s, kld_dump_writer **w, int64_t *ds,
                                int64_t *dr, kld_error *err) {
    kld_dump_meta m = meta_of(s);
    int32_t *tok = tokens_of(s);
    kld_status st = kld_dump_create(dir, &m, tok, true, w, ds, dr, err);
    free(tok);
    return st;
}

static void append_bytes(const char *path, size_t n) {
    FILE *f = fopen(path, "ab");
    for (size_t i = 0; i < n; i++) fputc(0xA5, f);
    fclose(f);
}

static void interrupt_at(const char *dir, const spec *s, int64_t cut) {
    kld_dump_meta m = meta_of(s);
    int32_t *tok = tokens_of(s);
    kld_dump_writer *w = NULL;
    kld_error err = {0};
    dt_rm_dir(dir);
    CHECK_OK(kld_dump_create(dir, &m, tok, false, &w, NULL, NULL, &err), err);
    if (w) CHECK_OK(write_global(w, s, 0, cut, 2, &err), err);
    kld_dump_writer_free(w); /* no finish: interrupted */
    free(tok);
}

static void test_resume(void) {
    for (int fv = 1; fv <= 2; fv++) {
        spec s = {fv, fv == 1, false, 40, 4, 6, 4}; /* pps 5, 20 records */
        const char *ref = bpath(fv == 1 ? "dump-res-ref-v1" : "dump-res-ref-v2");
        const char *dir = bpath(fv == 1 ? "dump-res-v1" : "dump-res-v2");
        if (!write_whole(ref, &s, 5)) continue;
        uint64_t rb = kld_dump_record_bytes(fv, 4);
        char why[2048];

        /* cut in the middle of sequence 1, plus torn bytes and a stray later file */
        interrupt_at(dir, &s, 5 + 2);
        CHECK(!dt_exists(fpath(dir, "manifest.json")) && dt_exists(fpath(dir, "dump.partial.json")),
              "%s: interrupted dump has only the partial manifest", dir);
        kld_dump *d = NULL;
        kld_error err = {0};
        kld_status st = kld_dump_open(dir, 0, &d, &err);
        CHECK(st == KLD_ERR_FORMAT && strstr(err.msg, "manifest.json") && strstr(err.msg, dir),
              "open of an interrupted dump: %s", err.msg);
        append_bytes(fpath(dir, "seq-1.bin"), (size_t)rb / 2);
        if (s.ext)
            append_bytes(fpath(dir, "seq-1.ext.bin"), 30); /* one whole + a torn sidecar entry */
        append_bytes(fpath(dir, "seq-3.bin"), (size_t)rb * 2);
        kld_dump_writer *w = NULL;
        int64_t ds = -1, dr = -1;
        st = resume_writer(dir, &s, &w, &ds, &dr, &err);
        CHECK_OK(st, err);
        CHECK(ds == 1 && dr == 2, "v%d resume point %lld/%lld, expected 1/2", fv, (long long)ds,
              (long long)dr);
        CHECK(dt_file_size(fpath(dir, "seq-1.bin")) == (long long)(2 * rb), "torn record cut: %lld",
              dt_file_size(fpath(dir, "seq-1.bin")));
        CHECK(!s.ext || dt_file_size(fpath(dir, "seq-1.ext.bin")) == 2 * KLD_DUMP_EXT_BYTES,
              "sidecar cut to the records");
        CHECK(!dt_exists(fpath(dir, "seq-3.bin")), "a file past the resume point is removed");
        if (w) {
            kld_dump_rows r;
            rows_alloc(&r, 2, s.top_k);
            ref_rows(&s, 1, 3, 1, &r);
            st = kld_dump_write(w, 1, 3, 1, &r, &err);
            CHECK(st == KLD_ERR_ARG && strstr(err.msg, "out of order"),
                  "gap after the resume point: %s", err.msg);
            rows_free(&r);
            /* replay from the very start: records before the resume point are skipped */
            CHECK_OK(write_global(w, &s, 0, 20, 3, &err), err);
            CHECK_OK(kld_dump_finish(w, &err), err);
            kld_dump_writer_free(w);
            CHECK(dt_same_dirs(ref, dir, why, sizeof why), "v%d resumed dump: %s", fv, why);
        }

        /* the sidecar shorter than the records: the record without it is redone */
        if (s.ext) {
            interrupt_at(dir, &s, 5 + 3);
            truncate(fpath(dir, "seq-1.ext.bin"), 1 * KLD_DUMP_EXT_BYTES + 5);
            st = resume_writer(dir, &s, &w, &ds, &dr, &err);
            CHECK_OK(st, err);
            CHECK(ds == 1 && dr == 1, "short sidecar: resume point %lld/%lld", (long long)ds,
                  (long long)dr);
            CHECK(dt_file_size(fpath(dir, "seq-1.bin")) == (long long)rb,
                  "records cut to the sidecar");
            if (w) {
                CHECK_OK(write_global(w, &s, 6, 20, 4, &err), err);
                CHECK_OK(kld_dump_finish(w, &err), err);
                kld_dump_writer_free(w);
                CHECK(dt_same_dirs(ref, dir, why, sizeof why), "short sidecar resumed: %s", why);
            }
        }

        /* at a sequence boundary; then again with nothing left to write */
        interrupt_at(dir, &s, 10);
        st = resume_writer(dir, &s, &w, &ds, &dr, &err);
        CHECK_OK(st, err);
        CHECK(ds == 2 && dr == 0, "boundary: resume point %lld/%lld", (long long)ds, (long long)dr);
        if (w) {
            CHECK_OK(write_global(w, &s, 10, 20, 5, &err), err);
            kld_dump_writer_free(w); /* complete on disk, but not finished */
        }
        st = resume_writer(dir, &s, &w, &ds, &dr, &err);
        CHECK_OK(st, err);
        CHECK(ds == 4 && dr == 0, "complete but unfinished: %lld/%lld", (long long)ds,
              (long long)dr);
        if (w) {
            CHECK_OK(write_global(w, &s, 0, 20, 7, &err), err); /* all skipped */
            CHECK_OK(kld_dump_finish(w, &err), err);
            kld_dump_writer_free(w);
            CHECK(dt_same_dirs(ref, dir, why, sizeof why), "boundary resumed: %s", why);
        }
        /* a missing sequence file in the middle of the interrupted range */
        interrupt_at(dir, &s, 13);
        unlink(fpath(dir, "seq-1.bin"));
        st = resume_writer(dir, &s, &w, &ds, &dr, &err);
        CHECK_OK(st, err);
        CHECK(ds == 1 && dr == 0 && !dt_exists(fpath(dir, "seq-2.bin")),
              "missing seq-1.bin: resume point %lld/%lld", (long long)ds, (long long)dr);
        if (w) {
            CHECK_OK(write_global(w, &s, 0, 20, 2, &err), err);
            CHECK_OK(kld_dump_finish(w, &err), err);
            kld_dump_writer_free(w);
            CHECK(dt_same_dirs(ref, dir, why, sizeof why), "missing file resumed: %s", why);
        }
        /* created comes from the partial manifest when the caller has none */
        interrupt_at(dir, &s, 3);
        {
            kld_dump_meta m = meta_of(&s);
            m.created = NULL;
            int32_t *tok = tokens_of(&s);
            st = kld_dump_create(dir, &m, tok, true, &w, &ds, &dr, &err);
            free(tok);
            CHECK_OK(st, err);
            if (w) {
                CHECK_OK(write_global(w, &s, 0, 20, 6, &err), err);
                CHECK_OK(kld_dump_finish(w, &err), err);
                kld_dump_writer_free(w);
                CHECK(dt_same_dirs(ref, dir, why, sizeof why), "created kept on resume: %s", why);
            }
        }
    }
}

/* ---- refusals ---- */

static void expect_refusal(const char *dir, const kld_dump_meta *m, const int32_t *tok, bool resume,
                           kld_status want, const char *sub, const char *what) {
    kld_dump_writer *w = NULL;
    kld_error err = {0};
    kld_status st = kld_dump_create(dir, m, tok, resume, &w, NULL, NULL, &err);
    CHECK(st == want && w == NULL && strstr(err.msg, sub) != NULL, "%s: got %s: %s (want '%s')",
          what, kld_status_name(st), err.msg, sub);
    kld_dump_writer_free(w);
}

static void test_refusals(void) {
    spec s = {1, true, false, 40, 4, 6, 3};
    const char *done = bpath("dump-ref-complete");
    const char *part = bpath("dump-ref-partial");
    if (!write_whole(done, &s, 5)) return;
    interrupt_at(part, &s, 7);
    kld_dump_meta m = meta_of(&s);
    int32_t *tok = tokens_of(&s);
    expect_refusal(done, &m, tok, false, KLD_ERR_ARG, "complete dump", "complete, no resume");
    {   /* resuming a complete dump of the same settings: nothing to write, a stale
         * dump.partial.json (a kill between the manifest's rename and its removal)
         * cleaned up, the files unchanged */
        char stale[1200];
        snprintf(stale, sizeof stale, "%s/dump.partial.json", done);
        FILE *f = fopen(stale, "w");
        if (f) fputs("{}", f), fclose(f);
        kld_dump_writer *w = NULL;
        kld_error err = {0};
        int64_t seq = -1;
        CHECK_OK(kld_dump_create(done, &m, tok, true, &w, &seq, NULL, &err), err);
        CHECK(w && seq == m.n_seqs && !dt_exists(stale), "complete, resume: done (%lld of %lld), "
              "the stale partial manifest removed", (long long)seq, (long long)m.n_seqs);
        if (w) CHECK_OK(kld_dump_finish(w, &err), err);
        kld_dump_writer_free(w);
        kld_dump_meta y = m;
        y.top_k = 5;
        expect_refusal(done, &y, tok, true, KLD_ERR_MISMATCH, "top_k", "complete, resume, other top_k");
    }
    expect_refusal(part, &m, tok, false, KLD_ERR_ARG, "interrupted dump", "partial, no resume");
    kld_dump_meta x = m;
    x.top_k = 5;
    expect_refusal(part, &x, tok, true, KLD_ERR_MISMATCH, "top_k", "other top_k");
    x = m;
    x.model = "another";
    expect_refusal(part, &x, tok, true, KLD_ERR_MISMATCH, "model", "other model");
    x = m;
    x.corpus_sha256 = SHA_B;
    expect_refusal(part, &x, tok, true, KLD_ERR_MISMATCH, "corpus_sha256", "other corpus");
    x = m;
    x.format_version = 2;
    expect_refusal(part, &x, tok, true, KLD_ERR_MISMATCH, "format_version", "other version");
    x = m;
    x.ext = false;
    expect_refusal(part, &x, tok, true, KLD_ERR_MISMATCH, "ext", "other ext");
    x = m;
    x.candidate = true;
    expect_refusal(part, &x, tok, true, KLD_ERR_MISMATCH, "kind", "other kind");
    x = m;
    x.ctx_len = 5;
    x.positions_per_seq = 4;
    expect_refusal(part, &x, tok, true, KLD_ERR_MISMATCH, "ctx_len", "other ctx_len");
    x = m;
    x.n_seqs = 2;
    expect_refusal(part, &x, tok, true, KLD_ERR_MISMATCH, "n_seqs", "other n_seqs");
    tok[7] = (tok[7] + 1) % 40;
    expect_refusal(part, &m, tok, true, KLD_ERR_MISMATCH, "tokens.bin", "other tokens");
    tok[7] = (tok[7] + 39) % 40;
    /* the refusals left the interrupted dump resumable */
    kld_dump_writer *w = NULL;
    kld_error err = {0};
    int64_t ds, dr;
    CHECK_OK(kld_dump_create(part, &m, tok, true, &w, &ds, &dr, &err), err);
    CHECK(ds == 1 && dr == 2, "resume point after refusals %lld/%lld", (long long)ds,
          (long long)dr);
    kld_dump_writer_free(w);
    /* a partial manifest that is not valid JSON */
    const char *bad = bpath("dump-ref-badpartial");
    interrupt_at(bad, &s, 2);
    kt_write_file(fpath(bad, "dump.partial.json"), "{\"format_version\": 1,", 21);
    expect_refusal(bad, &m, tok, true, KLD_ERR_FORMAT, "dump.partial.json",
                   "broken partial manifest");
    /* an unrelated non-empty directory; a missing one with resume; a missing parent */
    const char *other = bpath("dump-ref-other");
    dt_rm_dir(other);
    mkdir(other, 0777);
    kt_write_file(fpath(other, "notes.txt"), "x", 1);
    expect_refusal(other, &m, tok, false, KLD_ERR_ARG, "not empty", "non-empty directory");
    expect_refusal(other, &m, tok, true, KLD_ERR_ARG, "no interrupted dump",
                   "resume without partial");
    const char *none = bpath("dump-ref-none");
    dt_rm_dir(none);
    expect_refusal(none, &m, tok, true, KLD_ERR_ARG, "no interrupted dump", "resume of nothing");
    CHECK(!dt_exists(none), "a refused resume creates nothing");
    expect_refusal(bpath("dump-ref-none/sub"), &m, tok, false, KLD_ERR_IO,
                   "cannot create directory", "missing parent");
    /* an empty existing directory is fine */
    dt_rm_dir(other);
    mkdir(other, 0777);
    CHECK_OK(kld_dump_create(other, &m, tok, false, &w, NULL, NULL, &err), err);
    kld_dump_writer_free(w);
    free(tok);
}

/* ---- writer argument errors ---- */

static void expect_meta_error(const kld_dump_meta *m, const int32_t *tok, const char *sub,
                              const char *what) {
    const char *dir = bpath("dump-arg-meta");
    dt_rm_dir(dir);
    expect_refusal(dir, m, tok, false, KLD_ERR_ARG, sub, what);
    CHECK(!dt_exists(dir), "%s: nothing created", what);
}

typedef struct rec1 {
    int32_t idx[3];
    float val[3];
    float lse;
    double lse64, logp;
    int32_t am;
} rec1;

static void expect_write_error(kld_dump_writer *w, int64_t seq, int64_t rec, rec1 r,
                               const char *sub, const char *what) {
    kld_dump_rows rows = {r.idx, r.val, &r.lse, &r.lse64, &r.logp, &r.am};
    kld_error err = {0};
    kld_status st = kld_dump_write(w, seq, rec, 1, &rows, &err);
    CHECK(st == KLD_ERR_ARG && strstr(err.msg, sub) != NULL, "%s: got %s: %s (want '%s')", what,
          kld_status_name(st), err.msg, sub);
}

static void test_writer_errors(void) {
    spec s = {1, true, false, 10, 3, 4, 2};
    kld_dump_meta m = meta_of(&s);
    const int32_t *tok = &tiny_tokens[0][0];
    kld_dump_meta x;
#define META_CASE(field, value, sub)                                                               \
    x = m;                                                                                         \
    x.field = value;                                                                               \
    expect_meta_error(&x, tok, sub, #field " = " #value);
    META_CASE(format_version, 4, "format_version");
    META_CASE(format_version, 3, "format 3 needs");
    META_CASE(format_version, 0, "format_version");
    META_CASE(top_k, 0, "top_k");
    META_CASE(top_k, 11, "exceeds n_vocab");
    META_CASE(top_k, KLD_DUMP_MAX_TOPK + 1, "top_k");
    META_CASE(ctx_len, 1, "ctx_len");
    META_CASE(n_seqs, 0, "n_seqs");
    META_CASE(positions_per_seq, 4, "positions_per_seq");
    META_CASE(n_vocab, -1, "n_vocab");
    META_CASE(model, NULL, "model");
    META_CASE(corpus_sha256, NULL, "corpus_sha256");
    META_CASE(corpus_sha256, "0123", "corpus_sha256");
    META_CASE(corpus_sha256, "0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef",
              "corpus_sha256");
    META_CASE(tokenizer_fingerprint, "xyz", "tokenizer_fingerprint");
    META_CASE(model_sha256, "", "model_sha256");
    META_CASE(teacher_model, "t", "candidate");
    META_CASE(notes, "\xff\xfe", "UTF-8");
#undef META_CASE
    x = m;
    x.positions_per_seq = 0; /* derived */
    const char *dir = bpath("dump-arg-meta");
    dt_rm_dir(dir);
    kld_dump_writer *w = NULL;
    kld_error err = {0};
    CHECK_OK(kld_dump_create(dir, &x, tok, false, &w, NULL, NULL, &err), err);
    kld_dump_writer_free(w);
    int32_t bad_tok[8];
    memcpy(bad_tok, tok, sizeof bad_tok);
    bad_tok[5] = 10;
    expect_meta_error(&m, bad_tok, "outside [0, 10)", "token id out of range");
    bad_tok[5] = -3;
    expect_meta_error(&m, bad_tok, "outside [0, 10)", "negative token id");

    dir = bpath("dump-arg-write");
    dt_rm_dir(dir);
    CHECK_OK(kld_dump_create(dir, &m, tok, false, &w, NULL, NULL, &err), err);
    if (!w) return;
    rec1 good = {{2, 5, 7}, {1.0f, 0.5f, -2.0f}, 3.5f, 3.5, -1.25, 2};
    rec1 r;
    expect_write_error(w, 0, 1, good, "out of order", "first record skipped");
    expect_write_error(w, 1, 0, good, "out of order", "second sequence first");
    expect_write_error(w, 2, 0, good, "sequence 2 is outside", "sequence out of range");
    expect_write_error(w, 0, 3, good, "outside [0, 3)", "record out of range");
    r = good, r.idx[1] = 10;
    expect_write_error(w, 0, 0, r, "index 10 at rank 1 is outside [0, 10)", "index too large");
    r = good, r.idx[2] = -1;
    expect_write_error(w, 0, 0, r, "outside [0, 10)", "negative index");
    r = good, r.idx[2] = 2;
    expect_write_error(w, 0, 0, r, "index 2 appears more than once", "duplicate index");
    r = good, r.val[1] = NAN;
    expect_write_error(w, 0, 0, r, "not finite", "NaN logit");
    r = good, r.val[2] = -INFINITY;
    expect_write_error(w, 0, 0, r, "not finite", "-inf logit");
    r = good, r.val[1] = 1.5f;
    expect_write_error(w, 0, 0, r, "descending", "ascending logits");
    r = good, r.lse = 0.5f, r.lse64 = 0.5;
    expect_write_error(w, 0, 0, r, "below the logit", "lse below the first logit");
    r = good, r.lse = NAN;
    expect_write_error(w, 0, 0, r, "logsumexp is nan", "NaN lse");
    r = good, r.val[0] = 70000.0f, r.lse = 70001.0f, r.lse64 = 70001.0;
    expect_write_error(w, 0, 0, r, "overflows float16", "v1 overflow");
    r = good, r.am = 5;
    expect_write_error(w, 0, 0, r, "differs from the record's first index",
                       "argmax != first index");
    r = good, r.am = 10;
    expect_write_error(w, 0, 0, r, "argmax 10", "argmax out of range");
    kld_dump_writer_free(w);
    /* tie order: float32 rows are checked; float16 rows come rounded
     * (kld_row_as_f16), so a tie there may be the rounding's */
    spec s2 = s;
    s2.fv = 2;
    kld_dump_meta m2 = meta_of(&s2);
    dir = bpath("dump-arg-write-v2");
    dt_rm_dir(dir);
    w = NULL;
    CHECK_OK(kld_dump_create(dir, &m2, tok, false, &w, NULL, NULL, &err), err);
    if (!w) return;
    r = good, r.val[1] = 1.0f, r.idx[0] = 5, r.idx[1] = 2, r.am = 5;
    expect_write_error(w, 0, 0, r, "ties go to the lower index", "tie order (v2)");
    r = good, r.am = -2;
    expect_write_error(w, 0, 0, r, "argmax -2", "argmax -2");
    r = good, r.lse64 = 3.75;
    expect_write_error(w, 0, 0, r, "does not round", "lse64 far from lse");
    r = good, r.lse64 = INFINITY;
    expect_write_error(w, 0, 0, r, "not finite", "lse64 inf");
    r = good, r.logp = 0.5;
    expect_write_error(w, 0, 0, r, "log-probability", "positive logp");
    r = good, r.logp = -INFINITY;
    expect_write_error(w, 0, 0, r, "log-probability", "-inf logp");
    kld_dump_rows no_ext = {good.idx, good.val, &good.lse, NULL, NULL, NULL};
    CHECK(kld_dump_write(w, 0, 0, 1, &no_ext, &err) == KLD_ERR_ARG && strstr(err.msg, "sidecar"),
          "sidecar arrays required: %s", err.msg);
    CHECK(kld_dump_finish(w, &err) == KLD_ERR_ARG && strstr(err.msg, "incomplete"),
          "finish before the end: %s", err.msg);
    /* argument errors are not sticky: the valid record still goes in */
    r = good;
    kld_dump_rows rows = {r.idx, r.val, &r.lse, &r.lse64, &r.logp, &r.am};
    CHECK_OK(kld_dump_write(w, 0, 0, 1, &rows, &err), err);
    expect_write_error(w, 0, 0, good, "out of order", "record written twice");
    CHECK_OK(kld_dump_write(w, 0, 1, 0, &rows, &err), err); /* n = 0 */
    for (int q = 0; q < 2; q++)
        for (int rr = q == 0 ? 1 : 0; rr < 3; rr++)
            CHECK_OK(kld_dump_write(w, q, rr, 1, &rows, &err), err);
    expect_write_error(w, 1, 2, good, "after the last record", "past the end");
    CHECK_OK(kld_dump_finish(w, &err), err);
    CHECK_OK(kld_dump_finish(w, &err), err); /* idempotent */
    expect_write_error(w, 1, 2, good, "finished", "after finish");
    kld_dump_writer_free(w);
    kld_dump_writer_free(NULL);

    /* a candidate's logits at the teacher's indices may come in any order */
    spec c = {2, true, true, 10, 3, 4, 1};
    kld_dump_meta cm = meta_of(&c);
    dir = bpath("dump-arg-cand");
    dt_rm_dir(dir);
    CHECK_OK(kld_dump_create(dir, &cm, tok, false, &w, NULL, NULL, &err), err);
    if (!w) return;
    rec1 cr = {{2, 5, 7}, {-1.0f, 0.5f, 2.0f}, 3.0f, 3.0, -1.0, 9};
    kld_dump_rows crow = {cr.idx, cr.val, &cr.lse, &cr.lse64, &cr.logp, &cr.am};
    CHECK_OK(kld_dump_write(w, 0, 0, 1, &crow, &err), err);
    r = cr, r.lse = 1.5f, r.lse64 = 1.5;
    expect_write_error(w, 0, 1, r, "below the logit 2 at rank 2", "candidate lse below its max");
    r = cr, r.idx[0] = 7;
    expect_write_error(w, 0, 1, r, "more than once", "candidate duplicate");
    kld_dump_writer_free(w);
}

/* ---- a full disk ---- */

static void test_enospc(void) {
    const char *mnt = bpath("dump-enospc-mnt");
    umount2(mnt, MNT_DETACH); /* a mount left by an earlier crashed run */
    mkdir(mnt, 0777);
    if (mount("tmpfs", mnt, "tmpfs", 0, "size=32k") != 0) {
        int e = errno;
        /* only root may mount; everybody else cannot run this part */
        CHECK(geteuid() != 0, "mount tmpfs on %s: %s", mnt, strerror(e));
        printf("note: ENOSPC test skipped (mount: %s)\n", strerror(e));
        rmdir(mnt);
        return;
    }
    spec s = {2, true, false, 100, 64, 33, 3}; /* 32 records of 516 bytes per sequence */
    const char *ref = bpath("dump-enospc-ref");
    write_whole(ref, &s, 32);
    char dir[1200];
    snprintf(dir, sizeof dir, "%s/d", mnt);
    kld_dump_meta m = meta_of(&s);
    int32_t *tok = tokens_of(&s);
    kld_dump_writer *w = NULL;
    kld_error err = {0};
    kld_status st = kld_dump_create(dir, &m, tok, false, &w, NULL, NULL, &err);
    CHECK_OK(st, err);
    if (w) {
        st = write_global(w, &s, 0, 96, 4, &err);
        CHECK(st == KLD_ERR_IO && strstr(err.msg, "No space left on device") &&
                  strstr(err.msg, dir) && strstr(err.msg, "seq-"),
              "records on a full disk: %s: %s", kld_status_name(st), err.msg);
        kld_error err2 = {0};
        kld_dump_rows r;
        rows_alloc(&r, 1, s.top_k);
        ref_rows(&s, 0, 0, 1, &r);
        CHECK(kld_dump_write(w, 2, 31, 1, &r, &err2) == KLD_ERR_ARG &&
                  strstr(err2.msg, "earlier write failed"),
              "writes after a failed one: %s", err2.msg);
        CHECK(kld_dump_finish(w, &err2) == KLD_ERR_ARG, "finish after a failed write");
        rows_free(&r);
        kld_dump_writer_free(w);
        w = NULL;
    }
    /* more room, resume: the torn tail is cut and the dump completes */
    CHECK(mount("tmpfs", mnt, "tmpfs", MS_REMOUNT, "size=256k") == 0, "remount: %s",
          strerror(errno));
    int64_t ds = -1, dr = -1;
    st = kld_dump_create(dir, &m, tok, true, &w, &ds, &dr, &err);
    CHECK_OK(st, err);
    CHECK(ds >= 0 && ds < 3, "resume after ENOSPC at %lld/%lld", (long long)ds, (long long)dr);
    if (w) {
        CHECK_OK(write_global(w, &s, 0, 96, 5, &err), err);
        /* fill the disk before finish: the manifest cannot be written */
        char filler[1300];
        snprintf(filler, sizeof filler, "%s/filler", mnt);
        int fd = open(filler, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        char block[4096] = {0};
        while (write(fd, block, sizeof block) > 0) {
        }
        while (write(fd, block, 1) > 0) {
        }
        close(fd);
        st = kld_dump_finish(w, &err);
        CHECK(st == KLD_ERR_IO && strstr(err.msg, "manifest.json.tmp") &&
                  strstr(err.msg, "No space"),
              "finish on a full disk: %s", err.msg);
        CHECK(!dt_exists(fpath(dir, "manifest.json")) &&
                  !dt_exists(fpath(dir, "manifest.json.tmp")) &&
                  dt_exists(fpath(dir, "dump.partial.json")),
              "no manifest after a failed finish");
        unlink(filler);
        CHECK_OK(kld_dump_finish(w, &err), err);
        kld_dump_writer_free(w);
        char why[2048];
        CHECK(dt_same_dirs(ref, dir, why, sizeof why), "dump finished after ENOSPC: %s", why);
    }
    /* tokens.bin on a full disk */
    dt_rm_dir(dir);
    CHECK(mount("tmpfs", mnt, "tmpfs", MS_REMOUNT, "size=8k") == 0, "remount small: %s",
          strerror(errno));
    {
        char filler[1300];
        snprintf(filler, sizeof filler, "%s/filler", mnt);
        int fd = open(filler, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        char block[4096] = {0};
        while (write(fd, block, sizeof block) > 0) {
        }
        close(fd);
        mkdir(dir, 0777);
        st = kld_dump_create(dir, &m, tok, false, &w, NULL, NULL, &err);
        CHECK(st == KLD_ERR_IO && strstr(err.msg, "tokens.bin") && w == NULL,
              "tokens.bin on a full disk: %s", err.msg);
        unlink(filler);
    }
    dt_rm_dir(dir);
    free(tok);
    CHECK(umount2(mnt, 0) == 0, "umount %s: %s", mnt, strerror(errno));
    rmdir(mnt);
}

int main(void) {
    test_round_trips();
    test_tiny_layout();
    test_v1_rounding_tolerance();
    test_resume();
    test_refusals();
    test_writer_errors();
    test_enospc();
    return kt_finish();
}
