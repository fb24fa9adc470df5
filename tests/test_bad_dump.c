/* test_bad_dump.c — the dump reader's bad-input corpus, derived at test
 * time: small valid dumps are written into the build folder, then copied
 * and corrupted one way each (every file cut at every field boundary of its
 * first record, one byte short and long, missing; manifest.json cut at every
 * byte and every key missing, mistyped or out of range; records with indices
 * out of range or repeated, logits out of order or not finite, logsumexp
 * below the first logit, sidecar values out of range). Each variant must
 * fail with a message naming the file (and the field), never crash: run it
 * under ASan+UBSan too. Also checks that the fuzz seeds in
 * tests/fuzz/dump_seeds/ unpack to valid dumps; `test_bad_dump --write-seeds
 * DIR` regenerates them. */
#include "dump_testutil.h"
#include "fuzz/dump_container.h"
#include "tensor/types.h"

#include <fcntl.h>
#include <jansson.h>

#define SHA "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
#define NV 20
#define K 3
#define CTX 4
#define NSEQ 2
#define PPS (CTX - 1)

static int n_variants;
static char var_dir[1024];

typedef struct base {
    int fv;
    bool ext, candidate;
    char dir[1024];
} base;

static void base_record(int64_t seq, int64_t rec, bool candidate, int32_t *idx, float *val,
                        float *lse, double *lse64, double *logp, int32_t *am) {
    for (int j = 0; j < K; j++) {
        idx[j] = (int32_t)((seq * 5 + rec * 3 + j * 7) % NV);
        val[j] = 2.0f - 0.75f * (float)j - 0.125f * (float)rec;
    }
    if (candidate) { /* at a teacher's indices: not in order */
        float t = val[0];
        val[0] = val[2];
        val[2] = t;
    }
    *lse = 3.0f - 0.125f * (float)rec;
    *lse64 = (double)*lse;
    *logp = -2.5;
    *am = candidate ? 19 : idx[0];
}

/* What every dump of this corpus declares alike. */
static void common_meta(kld_dump_meta *m, int fv) {
    memset(m, 0, sizeof *m);
    m->format_version = fv;
    m->model = "bad-corpus-model";
    m->corpus_sha256 = SHA;
    m->ctx_len = CTX;
    m->n_seqs = NSEQ;
    m->created = "2026-01-01T00:00:00Z";
    m->kldeval_version = "0.1.0";
    m->n_vocab = NV;
    m->model_sha256 = SHA;
    m->tokenizer_fingerprint = SHA;
    m->chunking = "doc";
    m->bos = "none";
    m->windows = "test";
}

/* The writer of b's dump over the corpus's tokens. */
static kld_status create_writer(const base *b, const kld_dump_meta *m, kld_dump_writer **w, kld_error *err) {
    int32_t tok[NSEQ * CTX];
    for (int i = 0; i < NSEQ; i++)
        for (int p = 0; p < CTX; p++) tok[i * CTX + p] = dt_token(i, p, NV);
    return kld_dump_create(b->dir, m, tok, false, w, NULL, NULL, err);
}

static bool make_base(base *b, int fv, bool ext, bool candidate, const char *name) {
    b->fv = fv;
    b->ext = ext;
    b->candidate = candidate;
    snprintf(b->dir, sizeof b->dir, "%s/%s", kt_build_dir(), name);
    dt_rm_dir(b->dir);
    kld_dump_meta m;
    common_meta(&m, fv);
    m.top_k = K;
    m.notes = "base of the bad-dump corpus";
    m.ext = ext;
    m.candidate = candidate;
    if (candidate) {
        m.teacher_model = "teacher";
        m.teacher_corpus_sha256 = SHA;
        m.teacher_fingerprint = SHA;
        m.teacher_created = "2025-01-01T00:00:00Z";
    }
    kld_dump_writer *w = NULL;
    kld_error err = {0};
    kld_status st = create_writer(b, &m, &w, &err);
    for (int s = 0; s < NSEQ && !st; s++)
        for (int r = 0; r < PPS && !st; r++) {
            int32_t idx[K], am;
            float val[K], lse;
            double lse64, logp;
            base_record(s, r, candidate, idx, val, &lse, &lse64, &logp, &am);
            kld_dump_rows rows = {idx, val, &lse, &lse64, &logp, &am};
            st = kld_dump_write(w, s, r, 1, &rows, &err);
        }
    if (!st) st = kld_dump_finish(w, &err);
    kld_dump_writer_free(w);
    CHECK_OK(st, err);
    return st == KLD_OK;
}

/* Opens dir and reads every record with the sidecar arrays. */
static kld_status open_and_read(const char *dir, int64_t limit, kld_error *err) {
    kld_dump *d = NULL;
    kld_status st = kld_dump_open(dir, limit, &d, err);
    if (st) return st;
    const kld_dump_meta *m = kld_dump_meta_of(d);
    size_t n = (size_t)m->positions_per_seq, k = (size_t)m->top_k;
    if (m->format_version == 3) { /* hidden states, record by record too */
        float *h = malloc(n * (size_t)m->n_embd * sizeof *h);
        for (int64_t s = 0; s < m->n_seqs && !st; s++) {
            st = kld_dump_read_hidden(d, s, 0, (int64_t)n, h, NULL, NULL, NULL, err);
            for (int64_t r = 0; r < (int64_t)n && !st; r++)
                st = kld_dump_read_hidden(d, s, r, 1, h, NULL, NULL, NULL, err);
        }
        free(h);
        kld_dump_close(d);
        return st;
    }
    int32_t *idx = malloc(n * k * sizeof *idx), *am = malloc(n * sizeof *am);
    float *val = malloc(n * k * sizeof *val), *lse = malloc(n * sizeof *lse);
    double *lse64 = malloc(n * sizeof *lse64), *logp = malloc(n * sizeof *logp);
    kld_dump_rows rows = {idx, val, lse, lse64, logp, am};
    for (int64_t s = 0; s < m->n_seqs && !st; s++) {
        st = kld_dump_read(d, s, 0, (int64_t)n, &rows, err);
        /* and record by record, as a scorer with a window would */
        for (int64_t r = 0; r < (int64_t)n && !st; r++) st = kld_dump_read(d, s, r, 1, &rows, err);
    }
    free(idx);
    free(am);
    free(val);
    free(lse);
    free(lse64);
    free(logp);
    kld_dump_close(d);
    return st;
}

/* The current variant (in var_dir) must fail naming file (NULL: only the
 * directory) and containing sub (NULL: anything). */
static void expect_bad_limit(const char *file, const char *sub, const char *label, int64_t limit) {
    kld_error err = {0};
    err.msg[0] = '\0';
    kld_status st = open_and_read(var_dir, limit, &err);
    n_variants++;
    if (getenv("KLD_BAD_DUMP_VERBOSE"))
        printf("%s -> %s: %s\n", label, kld_status_name(st), err.msg);
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", var_dir, file ? file : "");
    CHECK(st != KLD_OK, "%s: accepted", label);
    if (st == KLD_OK) return;
    CHECK(err.status == st, "%s: error record has status %d, returned %d", label, (int)err.status,
          (int)st);
    CHECK(strstr(err.msg, file ? path : var_dir) != NULL, "%s: message does not name %s: %s", label,
          file ? path : var_dir, err.msg);
    CHECK(sub == NULL || strstr(err.msg, sub) != NULL, "%s: message lacks '%s': %s", label, sub,
          err.msg);
}
static void expect_bad(const char *file, const char *sub, const char *label) {
    expect_bad_limit(file, sub, label, 0);
}

static void expect_good(const char *label) {
    kld_error err = {0};
    kld_status st = open_and_read(var_dir, 0, &err);
    CHECK(st == KLD_OK, "%s: expected a valid dump, got %s: %s", label, kld_status_name(st),
          err.msg);
}

static void fresh(const base *b) { dt_copy_dir(b->dir, var_dir); }

static char *vpath(const char *file) {
    static char buf[4][1200];
    static int slot;
    char *p = buf[slot++ % 4];
    snprintf(p, 1200, "%s/%s", var_dir, file);
    return p;
}

static void poke(const char *file, long off, const void *bytes, size_t n) {
    int fd = open(vpath(file), O_WRONLY);
    if (fd < 0 || pwrite(fd, bytes, n, off) != (ssize_t)n) {
        fprintf(stderr, "cannot poke %s\n", vpath(file));
        exit(2);
    }
    close(fd);
}

static void cut(const char *file, long size) {
    if (truncate(vpath(file), size) != 0) {
        fprintf(stderr, "cannot truncate %s\n", vpath(file));
        exit(2);
    }
}

static long rec_bytes(const base *b) { return (long)kld_dump_record_bytes(b->fv, K); }
static long idx_off(int j) { return 4L * j; }
static long val_off(const base *b, int j) { return 4L * K + (b->fv == 1 ? 2L : 4L) * j; }
static long lse_off(const base *b) { return 4L * K + (b->fv == 1 ? 2L : 4L) * K; }

/* ---- whole files ---- */

static void file_cases(const base *b) {
    char label[256];
    const char *v = b->fv == 1 ? "v1" : "v2";
    /* tokens.bin: cut at each id of the first sequence, one byte short/long, missing */
    for (long at = 0; at <= 4L * CTX; at += 4) {
        fresh(b);
        cut("tokens.bin", at);
        snprintf(label, sizeof label, "%s tokens.bin cut at %ld", v, at);
        expect_bad("tokens.bin", "expected 32", label);
    }
    long tsize = 4L * NSEQ * CTX;
    long sizes[2] = {tsize - 1, tsize + 1};
    for (int i = 0; i < 2; i++) {
        fresh(b);
        cut("tokens.bin", sizes[i]);
        snprintf(label, sizeof label, "%s tokens.bin of %ld bytes", v, sizes[i]);
        expect_bad("tokens.bin", "bytes, expected", label);
    }
    fresh(b);
    unlink(vpath("tokens.bin"));
    expect_bad("tokens.bin", "cannot open", "tokens.bin missing");
    fresh(b);
    unlink(vpath("tokens.bin"));
    mkdir(vpath("tokens.bin"), 0777);
    expect_bad("tokens.bin", "not a regular file", "tokens.bin a directory");
    rmdir(vpath("tokens.bin"));

    /* seq files: cut at every field boundary of the first record */
    long rb = rec_bytes(b), full = rb * PPS;
    long bounds[16];
    int nb = 0;
    for (int j = 0; j <= K; j++) bounds[nb++] = idx_off(j);
    for (int j = 1; j <= K; j++) bounds[nb++] = val_off(b, 0) + (val_off(b, 1) - val_off(b, 0)) * j;
    bounds[nb++] = lse_off(b) + 4; /* one whole record */
    for (int s = 0; s < NSEQ; s++) {
        char name[32];
        snprintf(name, sizeof name, "seq-%d.bin", s);
        for (int i = 0; i < nb; i++) {
            fresh(b);
            cut(name, bounds[i]);
            snprintf(label, sizeof label, "%s %s cut at %ld", v, name, bounds[i]);
            expect_bad(name, "bytes, expected", label);
        }
        long odd[2] = {full - 1, full + 1};
        for (int i = 0; i < 2; i++) {
            fresh(b);
            cut(name, odd[i]);
            snprintf(label, sizeof label, "%s %s of %ld bytes", v, name, odd[i]);
            expect_bad(name, "bytes, expected", label);
        }
        fresh(b);
        unlink(vpath(name));
        snprintf(label, sizeof label, "%s %s missing", v, name);
        expect_bad(name, "cannot open", label);
        if (!b->ext) continue;
        snprintf(name, sizeof name, "seq-%d.ext.bin", s);
        long ebounds[] = {0, 8, 16, 20, 24, 24 * PPS - 1, 24 * PPS + 1};
        for (size_t i = 0; i < sizeof ebounds / sizeof ebounds[0]; i++) {
            fresh(b);
            cut(name, ebounds[i]);
            snprintf(label, sizeof label, "%s %s cut at %ld", v, name, ebounds[i]);
            expect_bad(name, "bytes, expected", label);
        }
        fresh(b);
        unlink(vpath(name));
        snprintf(label, sizeof label, "%s %s missing", v, name);
        expect_bad(name, "cannot open", label);
    }

    /* manifest.json: cut at every byte before its closing brace, missing, a
     * directory, too large */
    size_t mn;
    char path[1200];
    snprintf(path, sizeof path, "%s/manifest.json", b->dir);
    char *text = kt_read_file(path, &mn);
    char *close_brace = strrchr(text, '}');
    long last = close_brace ? (long)(close_brace - text) : (long)mn;
    for (long at = 0; at <= last; at++) {
        fresh(b);
        cut("manifest.json", at);
        snprintf(label, sizeof label, "%s manifest.json cut at %ld of %zu", v, at, mn);
        expect_bad("manifest.json", "invalid JSON", label);
    }
    free(text);
    fresh(b);
    unlink(vpath("manifest.json"));
    expect_bad("manifest.json", "not a complete dump", "manifest missing");
    fresh(b);
    unlink(vpath("manifest.json"));
    mkdir(vpath("manifest.json"), 0777);
    expect_bad("manifest.json", "not a regular file", "manifest a directory");
    rmdir(vpath("manifest.json"));
    fresh(b);
    cut("manifest.json", 17L << 20); /* sparse */
    expect_bad("manifest.json", "more than a manifest", "manifest of 17 MiB");
    fresh(b);
    unlink(vpath("seq-0.bin"));
    mkdir(vpath("seq-0.bin"), 0777);
    expect_bad("seq-0.bin", "not a regular file", "seq-0.bin a directory");
    rmdir(vpath("seq-0.bin"));
}

/* ---- manifest keys ---- */

static json_t *base_manifest(const base *b) {
    char path[1200];
    snprintf(path, sizeof path, "%s/manifest.json", b->dir);
    json_t *root = json_load_file(path, 0, NULL);
    if (!root) {
        fprintf(stderr, "cannot load %s\n", path);
        exit(2);
    }
    return root;
}

static void write_manifest(json_t *root) {
    if (json_dump_file(root, vpath("manifest.json"), JSON_INDENT(2)) != 0) {
        fprintf(stderr, "cannot write the manifest\n");
        exit(2);
    }
}

/* key set to v (NULL: removed) must fail naming file and sub. */
static void manifest_case(const base *b, const char *key, json_t *v, const char *file,
                          const char *sub, const char *label) {
    fresh(b);
    json_t *root = base_manifest(b);
    if (v)
        json_object_set_new(root, key, v);
    else
        json_object_del(root, key);
    write_manifest(root);
    json_decref(root);
    expect_bad(file, sub, label);
}

static void manifest_text_case(const base *b, const char *text, const char *sub,
                               const char *label) {
    fresh(b);
    kt_write_file(vpath("manifest.json"), text, strlen(text));
    expect_bad("manifest.json", sub, label);
}

static void manifest_cases(const base *b) {
    char label[256];
    const char *mf = "manifest.json";
    static const char *int_keys[] = {"format_version", "ctx_len",           "n_seqs",
                                     "top_k",          "positions_per_seq", "n_vocab"};
    for (size_t i = 0; i < sizeof int_keys / sizeof int_keys[0]; i++) {
        const char *key = int_keys[i];
        bool optional = !strcmp(key, "n_vocab");
#define MCASE(value, sub, what)                                                                    \
    snprintf(label, sizeof label, "%s %s", key, what);                                             \
    manifest_case(b, key, value, mf, sub, label);
        if (!optional) {
            MCASE(NULL, "missing", "missing");
        }
        MCASE(json_string("3"), "expected", "a string");
        MCASE(json_real(3.0), "expected", "a real");
        MCASE(json_true(), "expected", "true");
        MCASE(json_null(), "expected", "null");
        MCASE(json_array(), "expected", "an array");
        MCASE(json_integer(-1), key, "negative");
        MCASE(json_integer(0), key, "zero");
        MCASE(json_integer(INT64_C(1) << 62), key, "huge");
#undef MCASE
    }
    manifest_case(b, "format_version", json_integer(4), mf, "not supported", "format_version 4");
    manifest_case(b, "format_version", json_string("1"), mf, "format_version",
                  "format_version \"1\"");
    /* in range, but not what the files hold */
    fresh(b);
    json_t *root = base_manifest(b);
    json_object_set_new(root, "format_version", json_integer(b->fv == 1 ? 2 : 1));
    json_object_del(root, "logit_dtype");
    write_manifest(root);
    json_decref(root);
    expect_bad("seq-0.bin", "bytes, expected", "format_version of the other record size");
    manifest_case(b, "logit_dtype", json_string(b->fv == 1 ? "float32" : "float16"), mf,
                  "logit_dtype", "logit_dtype of the other version");
    manifest_case(b, "positions_per_seq", json_integer(CTX), mf, "positions_per_seq",
                  "positions_per_seq = ctx_len");
    manifest_case(b, "positions_per_seq", json_integer(CTX - 2), mf, "positions_per_seq",
                  "positions_per_seq = ctx_len - 2");
    manifest_case(b, "ctx_len", json_integer(CTX + 1), mf, "positions_per_seq", "ctx_len + 1");
    manifest_case(b, "top_k", json_integer(K + 1), "seq-0.bin", "bytes, expected", "top_k + 1");
    manifest_case(b, "top_k", json_integer(K - 1), "seq-0.bin", "bytes, expected", "top_k - 1");
    manifest_case(b, "top_k", json_integer(KLD_DUMP_MAX_TOPK + 1), mf, "top_k",
                  "top_k above the maximum");
    manifest_case(b, "n_seqs", json_integer(NSEQ + 1), "tokens.bin", "bytes, expected",
                  "n_seqs + 1");
    manifest_case(b, "n_seqs", json_integer(NSEQ - 1), "tokens.bin", "bytes, expected",
                  "n_seqs - 1");
    manifest_case(b, "n_vocab", json_integer(K - 1), mf, "top_k", "n_vocab below top_k");
    manifest_case(b, "n_vocab", json_integer(5), NULL, "outside [0, 5)", "n_vocab 5");
    manifest_case(b, "n_vocab", json_integer((INT64_C(1) << 31) + 1), mf, "n_vocab",
                  "n_vocab 2^31 + 1");

    static const struct {
        const char *key;
        bool required, hex;
    } str_keys[] = {{"model", true, false},
                    {"corpus_sha256", true, true},
                    {"created", false, false},
                    {"notes", false, false},
                    {"kldeval_version", false, false},
                    {"model_sha256", false, true},
                    {"tokenizer_fingerprint", false, true},
                    {"chunking", false, false},
                    {"bos", false, false},
                    {"windows", false, false},
                    {"logit_dtype", false, false},
                    {"kind", false, false}};
    for (size_t i = 0; i < sizeof str_keys / sizeof str_keys[0]; i++) {
        const char *key = str_keys[i].key;
        if (str_keys[i].required) {
            snprintf(label, sizeof label, "%s missing", key);
            manifest_case(b, key, NULL, mf, "missing", label);
        }
        snprintf(label, sizeof label, "%s an integer", key);
        manifest_case(b, key, json_integer(7), mf, key, label);
        snprintf(label, sizeof label, "%s null", key);
        manifest_case(b, key, json_null(), mf, key, label);
        snprintf(label, sizeof label, "%s an object", key);
        manifest_case(b, key, json_object(), mf, key, label);
        if (!str_keys[i].hex) continue;
        static const char *not_hex[] = {
            "00112233445566778899AABBCCDDEEFF00112233445566778899aabbccddeeff",
            "00112233445566778899aabbccddeeff00112233445566778899aabbccddeef",
            "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff0",
            "g0112233445566778899aabbccddeeff00112233445566778899aabbccddeeff", ""};
        for (size_t j = 0; j < sizeof not_hex / sizeof not_hex[0]; j++) {
            snprintf(label, sizeof label, "%s not hex (%zu)", key, j);
            manifest_case(b, key, json_string(not_hex[j]), mf, "64 lower-case hex", label);
        }
    }
    manifest_case(b, "logit_dtype", json_string("bfloat16"), mf, "logit_dtype",
                  "logit_dtype bfloat16");
    manifest_case(b, "kind", json_string("student"), mf, "kind", "kind student");
    manifest_case(b, "kind", json_string(""), mf, "kind", "kind empty");
    manifest_case(b, "ext", json_string("true"), mf, "ext", "ext a string");
    manifest_case(b, "ext", json_integer(1), mf, "ext", "ext an integer");
    if (!b->ext)
        manifest_case(b, "ext", json_true(), "seq-0.ext.bin", "cannot open",
                      "ext without sidecars");
    manifest_case(b, "teacher", json_integer(1), mf, "teacher", "teacher an integer");
    manifest_case(b, "teacher", json_string("t"), mf, "teacher", "teacher a string");
    manifest_case(b, "teacher", json_array(), mf, "teacher", "teacher an array");
    manifest_case(b, "teacher", json_pack("{s:i}", "model", 3), mf, "teacher.model",
                  "teacher.model 3");
    manifest_case(b, "teacher", json_pack("{s:s}", "corpus_sha256", "abc"), mf,
                  "teacher.corpus_sha256", "teacher.corpus_sha256 not hex");
    manifest_case(b, "teacher", json_pack("{s:b}", "tokenizer_fingerprint", 1), mf,
                  "teacher.tokenizer_fingerprint", "teacher.tokenizer_fingerprint true");
    manifest_case(b, "teacher", json_pack("{s:n}", "created"), mf, "teacher.created",
                  "teacher.created null");

    /* text-level damage */
    manifest_text_case(b, "", "invalid JSON", "empty manifest");
    manifest_text_case(b, "  \n", "invalid JSON", "blank manifest");
    manifest_text_case(b, "[1, 2]", "expected an object", "top-level array");
    manifest_text_case(b, "\"manifest\"", "invalid JSON", "top-level string");
    manifest_text_case(b, "{\"format_version\": 1, \"format_version\": 1}", "duplicate",
                       "duplicate key");
    manifest_text_case(b, "{\"format_version\": 1} {}", "invalid JSON", "two objects");
    manifest_text_case(b, "{\"format_version\": 1}x", "invalid JSON", "trailing garbage");
    manifest_text_case(b, "{\"format_version\": 1, \"model\": \"\xff\"}", "invalid JSON",
                       "invalid UTF-8");
    manifest_text_case(b, "{\"format_version\": 1, \"model\": \"a\\u0000b\"}", "invalid JSON",
                       "NUL in a string");
    manifest_text_case(b, "{\"format_version\": 99999999999999999999}", "invalid JSON",
                       "integer beyond int64");
    manifest_text_case(b, "{\"format_version\": 1}", "model", "only format_version");
    /* a duplicate key deep in an otherwise valid manifest */
    size_t mn;
    char path[1200];
    snprintf(path, sizeof path, "%s/manifest.json", b->dir);
    char *text = kt_read_file(path, &mn);
    char *dup = malloc(mn + 64);
    char *brace = strrchr(text, '}');
    size_t head = (size_t)(brace - text);
    memcpy(dup, text, head);
    snprintf(dup + head, mn + 64 - head, ",\n  \"top_k\": %d\n}\n", K);
    manifest_text_case(b, dup, "duplicate", "duplicate top_k at the end");
    free(dup);
    free(text);
}

/* ---- record contents (the files keep their sizes) ---- */

typedef struct place {
    const char *file, *ext_file;
    int64_t rec;
    const char *rec_tag;
} place;

static void put_f16(const char *file, long off, uint16_t h) { poke(file, off, &h, 2); }
static void put_u32(const char *file, long off, uint32_t u) { poke(file, off, &u, 4); }
static void put_f64(const char *file, long off, double x) { poke(file, off, &x, 8); }

static void record_cases(const base *b) {
    const place places[2] = {{"seq-0.bin", "seq-0.ext.bin", 0, "record 0:"},
                             {"seq-1.bin", "seq-1.ext.bin", PPS - 1, "record 2:"}};
    char label[256];
    const char *v = b->fv == 1 ? "v1" : "v2";
    long rb = rec_bytes(b);
    for (int p = 0; p < 2; p++) {
        const place *pl = &places[p];
        long r0 = rb * pl->rec;
        int32_t idx[K], am;
        float val[K], lse;
        double lse64, logp;
        base_record(p, pl->rec, b->candidate, idx, val, &lse, &lse64, &logp, &am);
#define RCASE(sub, what, stmt)                                                                     \
    do {                                                                                           \
        fresh(b);                                                                                  \
        stmt;                                                                                      \
        snprintf(label, sizeof label, "%s %s %s %s", v, pl->file, pl->rec_tag, what);              \
        expect_bad(pl->file, sub, label);                                                          \
    } while (0)
        for (int j = 0; j < K; j++) {
            RCASE("outside [0, 20)", "index = n_vocab", put_u32(pl->file, r0 + idx_off(j), NV));
            RCASE("outside [0, 20)", "index -1", put_u32(pl->file, r0 + idx_off(j), 0xFFFFFFFFu));
            RCASE("outside [0, 20)", "index INT32_MAX",
                  put_u32(pl->file, r0 + idx_off(j), 0x7FFFFFFFu));
            RCASE("outside [0, 20)", "index INT32_MIN",
                  put_u32(pl->file, r0 + idx_off(j), 0x80000000u));
        }
        RCASE("more than once", "idx[1] = idx[0]",
              put_u32(pl->file, r0 + idx_off(1), (uint32_t)idx[0]));
        RCASE("more than once", "idx[2] = idx[0]",
              put_u32(pl->file, r0 + idx_off(2), (uint32_t)idx[0]));
        RCASE("more than once", "idx[2] = idx[1]",
              put_u32(pl->file, r0 + idx_off(2), (uint32_t)idx[1]));
        if (b->fv == 1) {
            static const uint16_t bad16[] = {0x7E00, 0xFE00, 0x7C00, 0xFC00, 0x7C01};
            for (int j = 0; j < K; j++)
                for (size_t q = 0; q < sizeof bad16 / sizeof bad16[0]; q++) {
                    char what[64];
                    snprintf(what, sizeof what, "logit %d = half 0x%04x", j, bad16[q]);
                    RCASE("not finite", what, put_f16(pl->file, r0 + val_off(b, j), bad16[q]));
                }
        } else {
            static const uint32_t bad32[] = {0x7FC00000u, 0xFFC00000u, 0x7F800000u, 0xFF800000u,
                                             0x7F800001u};
            for (int j = 0; j < K; j++)
                for (size_t q = 0; q < sizeof bad32 / sizeof bad32[0]; q++) {
                    char what[64];
                    snprintf(what, sizeof what, "logit %d = float 0x%08x", j, bad32[q]);
                    RCASE("not finite", what, put_u32(pl->file, r0 + val_off(b, j), bad32[q]));
                }
        }
        if (!b->candidate) {
            /* out of order: the second logit above the first, the third above the second */
            float up1 = val[0] + 0.5f, up2 = val[1] + 0.25f;
            if (b->fv == 1) {
                RCASE("descending", "logit 1 above logit 0",
                      put_f16(pl->file, r0 + val_off(b, 1), kld_f32_to_f16(up1)));
                RCASE("descending", "logit 2 above logit 1",
                      put_f16(pl->file, r0 + val_off(b, 2), kld_f32_to_f16(up2)));
            } else {
                uint32_t u1, u2, tie;
                memcpy(&u1, &up1, 4);
                memcpy(&u2, &up2, 4);
                memcpy(&tie, &val[0], 4);
                RCASE("descending", "logit 1 above logit 0",
                      put_u32(pl->file, r0 + val_off(b, 1), u1));
                RCASE("descending", "logit 2 above logit 1",
                      put_u32(pl->file, r0 + val_off(b, 2), u2));
                /* a tie whose higher index comes first */
                RCASE("ties go to the lower index", "tie out of index order",
                      (put_u32(pl->file, r0 + val_off(b, 1), tie),
                       put_u32(pl->file, r0 + idx_off(0),
                               (uint32_t)(idx[0] > idx[1] ? idx[0] : idx[1])),
                       put_u32(pl->file, r0 + idx_off(1),
                               (uint32_t)(idx[0] > idx[1] ? idx[1] : idx[0]))));
            }
        }
        float mx = val[0] > val[1] ? val[0] : val[1];
        mx = mx > val[2] ? mx : val[2];
        float below = mx - 1.0f, nan32 = NAN, inf32 = INFINITY;
        uint32_t ub, un, ui, uni;
        memcpy(&ub, &below, 4);
        memcpy(&un, &nan32, 4);
        memcpy(&ui, &inf32, 4);
        uni = ui | 0x80000000u;
        RCASE("below the logit", "lse below the largest logit",
              put_u32(pl->file, r0 + lse_off(b), ub));
        RCASE("logsumexp is nan", "lse NaN", put_u32(pl->file, r0 + lse_off(b), un));
        RCASE("logsumexp is inf", "lse +inf", put_u32(pl->file, r0 + lse_off(b), ui));
        RCASE("logsumexp is -inf", "lse -inf", put_u32(pl->file, r0 + lse_off(b), uni));
#undef RCASE
        if (!b->ext) continue;
        long e0 = 24L * pl->rec;
#define ECASE(sub, what, stmt)                                                                     \
    do {                                                                                           \
        fresh(b);                                                                                  \
        stmt;                                                                                      \
        snprintf(label, sizeof label, "%s %s %s %s", v, pl->ext_file, pl->rec_tag, what);          \
        expect_bad(pl->ext_file, sub, label);                                                      \
    } while (0)
        ECASE("not finite", "lse64 NaN", put_f64(pl->ext_file, e0, NAN));
        ECASE("not finite", "lse64 inf", put_f64(pl->ext_file, e0, INFINITY));
        ECASE("does not round", "lse64 = lse + 1", put_f64(pl->ext_file, e0, lse64 + 1.0));
        ECASE("does not round", "lse64 = lse - 1e-3", put_f64(pl->ext_file, e0, lse64 - 1e-3));
        ECASE("log-probability", "logp_next +1", put_f64(pl->ext_file, e0 + 8, 1.0));
        ECASE("log-probability", "logp_next +inf", put_f64(pl->ext_file, e0 + 8, INFINITY));
        ECASE("log-probability", "logp_next -inf", put_f64(pl->ext_file, e0 + 8, -INFINITY));
        ECASE("argmax 20", "argmax = n_vocab", put_u32(pl->ext_file, e0 + 16, NV));
        ECASE("argmax -2", "argmax -2", put_u32(pl->ext_file, e0 + 16, (uint32_t)-2));
        if (!b->candidate)
            ECASE("differs from the record's first index", "argmax = idx[1]",
                  put_u32(pl->ext_file, e0 + 16, (uint32_t)idx[1]));
#undef ECASE
    }
    /* token ids */
    fresh(b);
    put_u32("tokens.bin", 4L * (NSEQ * CTX - 1), NV);
    expect_bad("tokens.bin", "outside [0, 20)", "token id = n_vocab");
    fresh(b);
    put_u32("tokens.bin", 0, 0xFFFFFFFFu);
    expect_bad("tokens.bin", "outside [0, 20)", "token id -1");
    /* a caller's vocabulary smaller than the dump's */
    fresh(b);
    expect_bad_limit(NULL, "outside [0, 10)", "caller's limit 10", 10);
    expect_bad_limit("manifest.json", "top_k", "caller's limit below top_k", K - 1);
}

/* Variants that must stay valid (the corpus is only meaningful if the
 * unmodified and harmlessly modified dumps pass). */
static void good_cases(const base *b) {
    fresh(b);
    expect_good("unmodified copy");
    json_t *root = base_manifest(b);
    json_object_set_new(root, "future_key", json_pack("{s:[i,i]}", "x", 1, 2));
    fresh(b);
    write_manifest(root);
    expect_good("unknown key");
    json_decref(root);
    static const char *optional[] = {"created",     "notes",        "kldeval_version",
                                     "n_vocab",     "model_sha256", "tokenizer_fingerprint",
                                     "chunking",    "bos",          "windows",
                                     "logit_dtype", "kind",         "ext",
                                     "teacher"};
    for (size_t i = 0; i < sizeof optional / sizeof optional[0]; i++) {
        if (b->candidate && !strcmp(optional[i], "kind")) continue; /* would make it a teacher */
        fresh(b);
        root = base_manifest(b);
        json_object_del(root, optional[i]);
        write_manifest(root);
        json_decref(root);
        char label[96];
        snprintf(label, sizeof label, "optional %s absent", optional[i]);
        expect_good(label);
    }
    /* the reserved sidecar field is ignored */
    if (b->ext) {
        fresh(b);
        put_u32("seq-0.ext.bin", 20, 0xDEADBEEFu);
        expect_good("reserved sidecar field set");
    }
    /* a float16 logit rounded above the float32 logsumexp is within tolerance */
    if (b->fv == 1 && !b->candidate) {
        fresh(b);
        /* record 0's first logit is half 2.0, which a float32 logit of 1.9995 rounds to */
        float lse = 1.9995f;
        poke("seq-0.bin", lse_off(b), &lse, 4);
        if (b->ext) put_f64("seq-0.ext.bin", 0, (double)lse);
        expect_good("logsumexp within a float16 step");
    }
}

static void check_seeds(void) {
    DIR *dp = opendir("tests/fuzz/dump_seeds");
    CHECK(dp != NULL, "tests/fuzz/dump_seeds is missing");
    if (!dp) return;
    struct dirent *e;
    int n = 0;
    while ((e = readdir(dp)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char path[1200];
        snprintf(path, sizeof path, "tests/fuzz/dump_seeds/%s", e->d_name);
        size_t size;
        char *data = kt_read_file(path, &size);
        dt_rm_dir(var_dir);
        mkdir(var_dir, 0777);
        CHECK(dc_unpack((const uint8_t *)data, size, var_dir), "%s: unpack", path);
        free(data);
        kld_error err = {0};
        kld_status st = open_and_read(var_dir, 0, &err);
        CHECK(st == KLD_OK, "fuzz seed %s is not a valid dump: %s", path, err.msg);
        n++;
    }
    closedir(dp);
    CHECK(n >= 2, "%d fuzz seeds", n);
}

/* A small hidden-state dump (format 3, n_embd 4, a made-up head) for the
 * fuzzer's seeds: the reader is what they exercise, not the scorer. */
#define EMBD 4
static bool make_v3(base *b, int dtype, const char *name) {
    b->fv = 3;
    b->ext = true;
    b->candidate = false;
    snprintf(b->dir, sizeof b->dir, "%s/%s", kt_build_dir(), name);
    dt_rm_dir(b->dir);
    kld_dump_meta m;
    common_meta(&m, 3);
    m.ext = true;
    m.lse_of_stored = true;
    m.n_embd = EMBD;
    m.hidden_dtype = dtype;
    m.head = (kld_dump_head){"output.weight", "f32", NV, EMBD, SHA, false, 0.0};
    kld_dump_writer *w = NULL;
    kld_error err = {0};
    kld_status st = create_writer(b, &m, &w, &err);
    for (int s = 0; s < NSEQ && !st; s++)
        for (int r = 0; r < PPS && !st; r++) {
            float h[EMBD];
            for (int e = 0; e < EMBD; e++) h[e] = 0.25f * (float)(e - s) + 0.125f * (float)r;
            double lse = 3.0 + 0.5 * r, logp = -1.5 - 0.25 * s;
            int32_t am = (int32_t)((s + r) % NV);
            st = kld_dump_write_hidden(w, s, r, 1, h, &lse, &logp, &am, &err);
        }
    if (!st) st = kld_dump_finish(w, &err);
    kld_dump_writer_free(w);
    CHECK_OK(st, err);
    return st == KLD_OK;
}

/* b's dump packed as one fuzzer input, out/name. */
static bool pack_seed(const base *b, const char *out, const char *name) {
    static uint8_t buf[1 << 16];
    size_t n = dc_pack(b->dir, buf, sizeof buf);
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", out, name);
    if (n == 0) return false;
    kt_write_file(path, buf, n);
    printf("wrote %s (%zu bytes)\n", path, n);
    return true;
}

static int write_seeds(const char *out) {
    base b;
    static const struct {
        int fv;
        bool ext, cand;
        const char *name;
    } seeds[] = {{1, true, false, "v1_ext_teacher.bin"},
                 {2, false, true, "v2_candidate.bin"},
                 {2, true, false, "v2_ext_teacher.bin"}};
    mkdir(out, 0777);
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
        if (!make_base(&b, seeds[i].fv, seeds[i].ext, seeds[i].cand, "bad-dump-seed")) return 1;
        if (!pack_seed(&b, out, seeds[i].name)) return 1;
    }
    static const struct {
        int dtype;
        const char *name;
    } v3[] = {{KLD_DUMP_HIDDEN_F32, "v3_hidden_f32.bin"}, {KLD_DUMP_HIDDEN_BF16, "v3_hidden_bf16.bin"}};
    for (size_t i = 0; i < sizeof v3 / sizeof v3[0]; i++) {
        if (!make_v3(&b, v3[i].dtype, "bad-dump-seed")) return 1;
        if (!pack_seed(&b, out, v3[i].name)) return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    snprintf(var_dir, sizeof var_dir, "%s/bad-dump-variant", kt_build_dir());
    if (argc == 3 && !strcmp(argv[1], "--write-seeds")) return write_seeds(argv[2]);
    static const struct {
        int fv;
        bool ext, cand;
        const char *name;
    } bases[] = {{1, true, false, "bad-dump-base-v1"},
                 {2, false, false, "bad-dump-base-v2"},
                 {2, true, true, "bad-dump-base-cand"}};
    for (size_t i = 0; i < sizeof bases / sizeof bases[0]; i++) {
        base b;
        if (!make_base(&b, bases[i].fv, bases[i].ext, bases[i].cand, bases[i].name)) continue;
        good_cases(&b);
        file_cases(&b);
        manifest_cases(&b);
        record_cases(&b);
    }
    check_seeds();
    dt_rm_dir(var_dir);
    printf("%d bad variants\n", n_variants);
    CHECK(n_variants >= 100, "only %d variants", n_variants);
    return kt_finish();
}
