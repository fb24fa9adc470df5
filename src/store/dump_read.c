/* dump_read.c — opens and validates a dump directory (dump v1/v2 and the
 * kldeval sidecar, layout in dump.h) and reads its fixed-width records by
 * pread, checking every record it hands out. Memory: the tokens plus the
 * records of one request. */
#include "store/dump_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

struct kld_dump {
    char *dir;
    json_t *root; /* owns meta's strings */
    kld_dump_meta meta;
    int64_t n_vocab; /* bound on ids and indices; 0: none */
    uint64_t rec_bytes;
    int32_t *tokens; /* n_seqs * ctx_len */
    /* the files of the sequence read last (readers go sequence by sequence) */
    int64_t open_seq;
    int fd, fd_ext;
    char path[KLD_DUMPI_PATH_MAX], path_ext[KLD_DUMPI_PATH_MAX];
    uint8_t *buf, *ebuf;
    size_t buf_cap, ebuf_cap;
    kld_dumpi_distinct distinct;
};

static kld_status check_size(const char *path, uint64_t want, const char *what, kld_error *err) {
    struct stat sb;
    if (stat(path, &sb) != 0) {
        int e = errno;
        return kld_fail(err, e == ENOENT ? KLD_ERR_FORMAT : KLD_ERR_IO, "%s: cannot open: %s%s",
                        path, strerror(e), e == ENOENT ? " (the manifest lists it)" : "");
    }
    if (!S_ISREG(sb.st_mode)) return kld_fail(err, KLD_ERR_FORMAT, "%s: not a regular file", path);
    if ((uint64_t)sb.st_size != want)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: %llu bytes, expected %llu (%s)", path,
                        (unsigned long long)sb.st_size, (unsigned long long)want, what);
    return KLD_OK;
}

static kld_status load_tokens(kld_dump *d, kld_error *err) {
    const kld_dump_meta *m = &d->meta;
    char path[KLD_DUMPI_PATH_MAX];
    kld_dumpi_path(path, d->dir, KLD_DUMPI_TOKENS);
    uint64_t n, bytes;
    if (!kld_mul_u64((uint64_t)m->n_seqs, (uint64_t)m->ctx_len, &n) || !kld_mul_u64(n, 4, &bytes) ||
        bytes > SIZE_MAX)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: n_seqs %lld * ctx_len %lld ids overflow", path,
                        (long long)m->n_seqs, (long long)m->ctx_len);
    kld_status st = check_size(path, bytes, "n_seqs * ctx_len int32 ids", err);
    if (st) return st;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return kld_fail(err, KLD_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    d->tokens = malloc(bytes);
    if (!d->tokens) {
        close(fd);
        return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory (%llu bytes)", path,
                        (unsigned long long)bytes);
    }
    int64_t got = kld_dumpi_pread(fd, d->tokens, bytes, 0);
    int e = errno;
    close(fd);
    if (got != (int64_t)bytes)
        return kld_fail(err, KLD_ERR_IO, "%s: read failed: %s", path,
                        got < 0 ? strerror(e) : "the file shrank while reading");
    for (uint64_t i = 0; i < n; i++) {
        int32_t id = d->tokens[i];
        if (id < 0 || (d->n_vocab > 0 && id >= d->n_vocab))
            return kld_fail(err, KLD_ERR_FORMAT,
                            "%s: sequence %llu position %llu: token id %d is outside [0, %lld)",
                            path, (unsigned long long)(i / (uint64_t)m->ctx_len),
                            (unsigned long long)(i % (uint64_t)m->ctx_len), (int)id,
                            d->n_vocab > 0 ? (long long)d->n_vocab : (long long)INT32_MAX + 1);
    }
    return KLD_OK;
}

static kld_status check_seq_files(const kld_dump *d, kld_error *err) {
    const kld_dump_meta *m = &d->meta;
    uint64_t bytes, ext_bytes;
    char path[KLD_DUMPI_PATH_MAX];
    kld_dumpi_seq_path(path, d->dir, 0, false);
    if (!kld_mul_u64((uint64_t)m->positions_per_seq, d->rec_bytes, &bytes) ||
        !kld_mul_u64((uint64_t)m->positions_per_seq, KLD_DUMP_EXT_BYTES, &ext_bytes) ||
        bytes > INT64_MAX)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: positions_per_seq * record bytes overflow", path);
    char what[128];
    snprintf(what, sizeof what, "positions_per_seq %lld records of %llu bytes",
             (long long)m->positions_per_seq, (unsigned long long)d->rec_bytes);
    char what_ext[128];
    snprintf(what_ext, sizeof what_ext, "positions_per_seq %lld records of %d bytes",
             (long long)m->positions_per_seq, KLD_DUMP_EXT_BYTES);
    for (int64_t i = 0; i < m->n_seqs; i++) {
        kld_dumpi_seq_path(path, d->dir, i, false);
        kld_status st = check_size(path, bytes, what, err);
        if (st) return st;
        if (!m->ext) continue;
        kld_dumpi_seq_path(path, d->dir, i, true);
        st = check_size(path, ext_bytes, what_ext, err);
        if (st) return st;
    }
    return KLD_OK;
}

kld_status kld_dump_open(const char *dir, int64_t n_vocab_limit, kld_dump **out, kld_error *err) {
    if (!out) return kld_fail(err, KLD_ERR_ARG, "kld_dump_open: out is NULL");
    *out = NULL;
    if (!dir || !dir[0]) return kld_fail(err, KLD_ERR_ARG, "kld_dump_open: no directory given");
    if (strlen(dir) > KLD_DUMPI_DIR_MAX)
        return kld_fail(err, KLD_ERR_ARG, "%.80s...: path too long", dir);
    kld_dump *d = calloc(1, sizeof *d);
    if (!d) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", dir);
    d->fd = d->fd_ext = -1;
    d->open_seq = -1;
    d->dir = kld_strdup(dir);
    if (!d->dir) {
        kld_dump_close(d);
        return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", dir);
    }
    char path[KLD_DUMPI_PATH_MAX];
    kld_dumpi_path(path, dir, KLD_DUMPI_MANIFEST);
    if (access(path, F_OK) != 0 && kld_dump_is_shard(dir)) {
        kld_dump_close(d);
        return kld_fail(err, KLD_ERR_ARG, "%s: one shard of a dump (%s/%s), not a whole dump: "
                        "assemble the shards with kldeval merge --dump OUT_DIR SHARD_DIR...", dir,
                        dir, KLD_DUMPI_SHARD);
    }
    kld_status st = kld_dumpi_manifest_load(path, &d->root, &d->meta, err);
    if (st) {
        kld_dump_close(d);
        return st;
    }
    d->n_vocab = n_vocab_limit > 0 ? n_vocab_limit : d->meta.n_vocab;
    if (d->n_vocab > 0 && d->meta.top_k > d->n_vocab) {
        kld_fail(err, KLD_ERR_FORMAT, "%s: top_k: %d exceeds the vocabulary size %lld", path,
                 (int)d->meta.top_k, (long long)d->n_vocab);
        kld_dump_close(d);
        return KLD_ERR_FORMAT;
    }
    d->rec_bytes = kld_dump_meta_record_bytes(&d->meta);
    if ((st = load_tokens(d, err)) || (st = check_seq_files(d, err))) {
        kld_dump_close(d);
        return st;
    }
    *out = d;
    return KLD_OK;
}

void kld_dump_close(kld_dump *d) {
    if (!d) return;
    if (d->fd >= 0) close(d->fd);
    if (d->fd_ext >= 0) close(d->fd_ext);
    json_decref(d->root);
    free(d->tokens);
    free(d->buf);
    free(d->ebuf);
    kld_dumpi_distinct_free(&d->distinct);
    free(d->dir);
    free(d);
}

const kld_dump_meta *kld_dump_meta_of(const kld_dump *d) { return &d->meta; }
const char *kld_dump_dir(const kld_dump *d) { return d->dir; }

const int32_t *kld_dump_tokens(const kld_dump *d, int64_t seq) {
    if (seq < 0 || seq >= d->meta.n_seqs) return NULL;
    return d->tokens + (size_t)seq * (size_t)d->meta.ctx_len;
}

static kld_status open_seq(kld_dump *d, int64_t seq, bool want_ext, kld_error *err) {
    if (d->open_seq != seq) {
        if (d->fd >= 0) close(d->fd);
        if (d->fd_ext >= 0) close(d->fd_ext);
        d->fd = d->fd_ext = -1;
        d->open_seq = -1;
        kld_dumpi_seq_path(d->path, d->dir, seq, false);
        kld_dumpi_seq_path(d->path_ext, d->dir, seq, true);
        d->fd = open(d->path, O_RDONLY | O_CLOEXEC);
        if (d->fd < 0)
            return kld_fail(err, KLD_ERR_IO, "%s: cannot open: %s", d->path, strerror(errno));
        d->open_seq = seq;
    }
    if (want_ext && d->fd_ext < 0) {
        d->fd_ext = open(d->path_ext, O_RDONLY | O_CLOEXEC);
        if (d->fd_ext < 0)
            return kld_fail(err, KLD_ERR_IO, "%s: cannot open: %s", d->path_ext, strerror(errno));
    }
    return KLD_OK;
}

static kld_status grow(uint8_t **buf, size_t *cap, uint64_t n, const char *path, kld_error *err) {
    if (n <= *cap) return KLD_OK;
    if (n > SIZE_MAX) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", path);
    uint8_t *p = realloc(*buf, (size_t)n);
    if (!p)
        return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory (%llu bytes)", path,
                        (unsigned long long)n);
    *buf = p;
    *cap = (size_t)n;
    return KLD_OK;
}

static kld_status read_span(int fd, uint8_t *buf, uint64_t bytes, uint64_t off, const char *path,
                            kld_error *err) {
    int64_t got = kld_dumpi_pread(fd, buf, bytes, off);
    if (got < 0) return kld_fail(err, KLD_ERR_IO, "%s: read failed: %s", path, strerror(errno));
    if ((uint64_t)got != bytes)
        return kld_fail(err, KLD_ERR_FORMAT,
                        "%s: truncated: bytes [%llu, %llu) wanted, the file ends at %llu", path,
                        (unsigned long long)off, (unsigned long long)(off + bytes),
                        (unsigned long long)(off + (uint64_t)got));
    return KLD_OK;
}

/* The sidecar of a format-3 record: the facts scoring does not recompute. */
static kld_status check_hidden_ext(const kld_dump *d, int64_t rec, double lse64, double logp,
                                   int32_t am, kld_error *err) {
    if (!isfinite(lse64))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: record %lld: lse64 is %g (not finite)", d->path_ext,
                        (long long)rec, lse64);
    if (!(isnan(logp) || (isfinite(logp) && logp <= 1e-6)))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: record %lld: logp_next %g is no log-probability",
                        d->path_ext, (long long)rec, logp);
    if (am < 0 || am >= d->meta.n_vocab)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: record %lld: argmax %d outside [0, %lld)",
                        d->path_ext, (long long)rec, (int)am, (long long)d->meta.n_vocab);
    return KLD_OK;
}


/* Records rec0 .. rec0+n-1 of the sidecar (logsumexp, log p(next), argmax)
 * into d->ebuf. */
static kld_status read_ext_span(kld_dump *d, int64_t rec0, int64_t n, kld_error *err) {
    uint64_t bytes = (uint64_t)n * KLD_DUMP_EXT_BYTES, off = (uint64_t)rec0 * KLD_DUMP_EXT_BYTES;
    kld_status st = grow(&d->ebuf, &d->ebuf_cap, bytes, d->path_ext, err);
    return st ? st : read_span(d->fd_ext, d->ebuf, bytes, off, d->path_ext, err);
}

kld_status kld_dump_read_hidden(kld_dump *d, int64_t seq, int64_t rec0, int64_t n, float *hidden,
                                double *lse64, double *logp_next, int32_t *argmax, kld_error *err) {
    const kld_dump_meta *m = d ? &d->meta : NULL;
    if (!d || !hidden || m->format_version != 3)
        return kld_fail(err, KLD_ERR_ARG, "kld_dump_read_hidden: a format-3 dump and a buffer");
    if (seq < 0 || seq >= m->n_seqs || rec0 < 0 || n < 0 || rec0 > m->positions_per_seq ||
        n > m->positions_per_seq - rec0)
        return kld_fail(err, KLD_ERR_ARG, "%s: sequence %lld records [%lld, +%lld) outside the dump",
                        d->dir, (long long)seq, (long long)rec0, (long long)n);
    if (n == 0) return KLD_OK;
    kld_status st = open_seq(d, seq, true, err);
    if (st) return st;
    uint64_t bytes = (uint64_t)n * d->rec_bytes, off = (uint64_t)rec0 * d->rec_bytes;
    if ((st = grow(&d->buf, &d->buf_cap, bytes, d->path, err)) ||
        (st = read_span(d->fd, d->buf, bytes, off, d->path, err)))
        return st;
    size_t e = (size_t)m->n_embd;
    for (int64_t r = 0; r < n; r++) {
        float *h = hidden + (size_t)r * e;
        kld_dumpi_decode_hidden(m->hidden_dtype, m->n_embd, d->buf + (size_t)r * d->rec_bytes, h);
        for (size_t i = 0; i < e; i++)
            if (!isfinite(h[i]))
                return kld_fail(err, KLD_ERR_FORMAT, "%s: record %lld: hidden value %zu is %g "
                                "(not finite)", d->path, (long long)(rec0 + r), i, (double)h[i]);
    }
    if ((st = read_ext_span(d, rec0, n, err))) return st;
    for (int64_t r = 0; r < n; r++) {
        double l, lp;
        int32_t am;
        kld_dumpi_decode_ext(d->ebuf + (size_t)r * KLD_DUMP_EXT_BYTES, &l, &lp, &am);
        if ((st = check_hidden_ext(d, rec0 + r, l, lp, am, err))) return st;
        if (lse64) lse64[r] = l;
        if (logp_next) logp_next[r] = lp;
        if (argmax) argmax[r] = am;
    }
    return KLD_OK;
}

kld_status kld_dump_read(kld_dump *d, int64_t seq, int64_t rec0, int64_t n,
                         const kld_dump_rows *rows, kld_error *err) {
    if (!d || !rows || !rows->idx || !rows->val || !rows->lse)
        return kld_fail(err, KLD_ERR_ARG, "kld_dump_read: NULL dump or row arrays");
    const kld_dump_meta *m = &d->meta;
    if (m->format_version == 3)
        return kld_fail(err, KLD_ERR_ARG, "%s: a hidden-state dump (format 3): read it with "
                        "kld_dump_read_hidden", d->dir);
    if (seq < 0 || seq >= m->n_seqs)
        return kld_fail(err, KLD_ERR_ARG, "%s: sequence %lld is outside [0, %lld)", d->dir,
                        (long long)seq, (long long)m->n_seqs);
    if (rec0 < 0 || n < 0 || rec0 > m->positions_per_seq || n > m->positions_per_seq - rec0)
        return kld_fail(err, KLD_ERR_ARG,
                        "%s: sequence %lld: records [%lld, %lld + %lld) outside [0, %lld)", d->dir,
                        (long long)seq, (long long)rec0, (long long)rec0, (long long)n,
                        (long long)m->positions_per_seq);
    bool want_ext = rows->lse64 || rows->logp_next || rows->argmax;
    bool read_ext = want_ext && m->ext;
    if (!read_ext && want_ext)
        for (int64_t r = 0; r < n; r++) {
            if (rows->lse64) rows->lse64[r] = NAN;
            if (rows->logp_next) rows->logp_next[r] = NAN;
            if (rows->argmax) rows->argmax[r] = -1;
        }
    if (n == 0) return KLD_OK;
    kld_status st = open_seq(d, seq, read_ext, err);
    if (st) return st;
    uint64_t bytes = (uint64_t)n * d->rec_bytes; /* bounded by the file size checked at open */
    uint64_t off = (uint64_t)rec0 * d->rec_bytes;
    if ((st = grow(&d->buf, &d->buf_cap, bytes, d->path, err)) ||
        (st = read_span(d->fd, d->buf, bytes, off, d->path, err)))
        return st;
    kld_dumpi_rules rules = {.status = KLD_ERR_FORMAT,
                             .file = d->path,
                             .ext_file = d->path_ext,
                             .n_vocab = d->n_vocab,
                             .top_k = m->top_k,
                             .candidate = m->candidate,
                             .rounded_f16 = m->format_version == 1,
                             .strict_ties = m->format_version == 2};
    size_t k = (size_t)m->top_k;
    for (int64_t r = 0; r < n; r++) {
        int32_t *idx = rows->idx + (size_t)r * k;
        float *val = rows->val + (size_t)r * k;
        kld_dumpi_decode(m->format_version, m->top_k, d->buf + (size_t)r * d->rec_bytes, idx, val,
                         &rows->lse[r]);
        st = kld_dumpi_check_record(&rules, &d->distinct, rec0 + r, idx, val, rows->lse[r], err);
        if (st) return st;
    }
    if (!read_ext) return KLD_OK;
    if ((st = read_ext_span(d, rec0, n, err))) return st;
    for (int64_t r = 0; r < n; r++) {
        double lse64, logp;
        int32_t am;
        kld_dumpi_decode_ext(d->ebuf + (size_t)r * KLD_DUMP_EXT_BYTES, &lse64, &logp, &am);
        st = kld_dumpi_check_ext(&rules, rec0 + r, rows->idx + (size_t)r * k, rows->lse[r], lse64,
                                 logp, am, err);
        if (st) return st;
        if (rows->lse64) rows->lse64[r] = lse64;
        if (rows->logp_next) rows->logp_next[r] = logp;
        if (rows->argmax) rows->argmax[r] = am;
    }
    return KLD_OK;
}
