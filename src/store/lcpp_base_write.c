/* lcpp_base_write.c — writes llama.cpp `--kl-divergence-base` files
 * (layout in lcpp_base.h) atomically: everything goes to PATH.tmp, which
 * finish fsyncs and renames onto PATH, so a crash or a full disk never
 * leaves a truncated base file under the real name. */
#include "store/lcpp_base.h"

#include "common/common.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define WRITE_BUFFER_BYTES (1u << 20)

struct kld_lcpp_base_writer {
    char *path, *tmp_path;
    int fd;
    bool failed;   /* a write failed: the file is unusable */
    bool created;  /* tmp_path is ours to remove */
    bool finished; /* renamed into place */
    int32_t n_vocab;
    int64_t record_u16;
    int64_t records_total, records_done;
    uint16_t *record; /* one encoded record */
    uint8_t *buf;     /* pending bytes, flushed when full */
    size_t buf_len;
};

/* write(2) until all n bytes are out; a full disk is an error like any other. */
static kld_status write_all(kld_lcpp_base_writer *w, const void *data, size_t n, kld_error *err) {
    const uint8_t *p = data;
    while (n > 0) {
        ssize_t r = write(w->fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            int e = r < 0 ? errno : EIO;
            w->failed = true;
            return kld_fail(err, KLD_ERR_IO, "%s: write failed: %s", w->tmp_path, strerror(e));
        }
        p += r;
        n -= (size_t)r;
    }
    return KLD_OK;
}

static kld_status flush_buf(kld_lcpp_base_writer *w, kld_error *err) {
    kld_status st = write_all(w, w->buf, w->buf_len, err);
    w->buf_len = 0;
    return st;
}

/* Appends through the buffer; large pieces go straight out. */
static kld_status put(kld_lcpp_base_writer *w, const void *data, size_t n, kld_error *err) {
    if (w->buf_len + n > WRITE_BUFFER_BYTES) {
        kld_status st = flush_buf(w, err);
        if (st) return st;
        if (n > WRITE_BUFFER_BYTES) return write_all(w, data, n, err);
    }
    memcpy(w->buf + w->buf_len, data, n);
    w->buf_len += n;
    return KLD_OK;
}

kld_status kld_lcpp_base_create(const char *path, int32_t n_ctx, int32_t n_vocab, int32_t n_chunk,
                                const int32_t *tokens, kld_lcpp_base_writer **out, kld_error *err) {
    *out = NULL;
    /* the same limits the reader enforces, so every file written opens */
    if (n_ctx < 4 || n_vocab < 2 || n_chunk < 1)
        return kld_fail(err, KLD_ERR_ARG, "%s: n_ctx %d, n_vocab %d, n_chunk %d: need n_ctx >= 4, "
                        "n_vocab >= 2, n_chunk >= 1", path, n_ctx, n_vocab, n_chunk);
    uint64_t n_tok;
    if (!kld_mul_u64((uint64_t)n_ctx, (uint64_t)n_chunk, &n_tok) || n_tok > SIZE_MAX / 4)
        return kld_fail(err, KLD_ERR_ARG, "%s: n_ctx %d x n_chunk %d tokens: too many", path, n_ctx,
                        n_chunk);
    for (uint64_t i = 0; i < n_tok; i++)
        if (tokens[i] < 0 || tokens[i] >= n_vocab)
            return kld_fail(err, KLD_ERR_ARG, "%s: tokens[%llu]: id %d outside [0, n_vocab %d)",
                            path, (unsigned long long)i, tokens[i], n_vocab);

    kld_lcpp_base_writer *w = calloc(1, sizeof *w);
    if (!w) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", path);
    w->fd = -1;
    w->n_vocab = n_vocab;
    w->record_u16 = 2 * (((int64_t)n_vocab + 1) / 2) + 4;
    w->records_total = (int64_t)n_chunk * ((int64_t)n_ctx - 1 - n_ctx / 2);
    size_t plen = strlen(path);
    w->path = kld_strdup(path);
    w->tmp_path = malloc(plen + 5);
    w->record = malloc((size_t)w->record_u16 * sizeof *w->record);
    w->buf = malloc(WRITE_BUFFER_BYTES);
    if (!w->path || !w->tmp_path || !w->record || !w->buf) {
        kld_lcpp_base_writer_free(w);
        return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", path);
    }
    memcpy(w->tmp_path, path, plen);
    memcpy(w->tmp_path + plen, ".tmp", 5);

    w->fd = open(w->tmp_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0) {
        kld_status st = kld_fail(err, KLD_ERR_IO, "%s: cannot create: %s", w->tmp_path,
                                 strerror(errno));
        kld_lcpp_base_writer_free(w);
        return st;
    }
    w->created = true;
    int32_t head[3] = {n_ctx, n_vocab, n_chunk};
    kld_status st = put(w, "_logits_", 8, err);
    if (!st) st = put(w, head, sizeof head, err);
    if (!st) st = put(w, tokens, (size_t)n_tok * sizeof *tokens, err);
    if (st) {
        kld_lcpp_base_writer_free(w);
        return st;
    }
    *out = w;
    return KLD_OK;
}

/* A row the encoding can represent: no NaN, no +inf, a finite maximum
 * (llama.cpp would store a NaN scale for these). -inf is a probability 0. */
static bool row_encodable(const float *row, int32_t n, int32_t *bad) {
    bool any_finite = false;
    for (int32_t i = 0; i < n; i++) {
        if (isnan(row[i]) || row[i] == INFINITY) {
            *bad = i;
            return false;
        }
        any_finite = any_finite || isfinite(row[i]);
    }
    *bad = -1;
    return any_finite;
}

kld_status kld_lcpp_base_write(kld_lcpp_base_writer *w, const float *logits, int64_t n,
                               kld_error *err) {
    if (w->failed || w->finished)
        return kld_fail(err, KLD_ERR_ARG, "%s: write after %s", w->tmp_path,
                        w->failed ? "a failed write" : "finish");
    if (n < 0 || n > w->records_total - w->records_done)
        return kld_fail(err, KLD_ERR_ARG, "%s: %lld more records: %lld of %lld already written",
                        w->tmp_path, (long long)n, (long long)w->records_done,
                        (long long)w->records_total);
    for (int64_t k = 0; k < n; k++) {
        const float *row = logits + (size_t)k * (size_t)w->n_vocab;
        int32_t bad;
        if (!row_encodable(row, w->n_vocab, &bad)) {
            if (bad >= 0)
                return kld_fail(err, KLD_ERR_ARG, "%s: record %lld: logit %d is %g", w->tmp_path,
                                (long long)(w->records_done), bad, (double)row[bad]);
            return kld_fail(err, KLD_ERR_ARG, "%s: record %lld: no finite logit", w->tmp_path,
                            (long long)(w->records_done));
        }
        kld_lcpp_encode_row(row, w->n_vocab, w->record, NULL);
        kld_status st = put(w, w->record, (size_t)w->record_u16 * sizeof *w->record, err);
        if (st) return st;
        w->records_done++;
    }
    return KLD_OK;
}

/* Makes the rename durable too (best effort: some filesystems refuse
 * fsync on a directory, which loses nothing but durability). */
static void sync_parent_dir(const char *path) {
    const char *slash = strrchr(path, '/');
    char *dir = slash ? kld_strndup(path, slash == path ? 1 : (size_t)(slash - path))
                      : kld_strdup(".");
    if (!dir) return;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
    free(dir);
}

kld_status kld_lcpp_base_finish(kld_lcpp_base_writer *w, kld_error *err) {
    if (w->failed || w->finished)
        return kld_fail(err, KLD_ERR_ARG, "%s: finish after %s", w->tmp_path,
                        w->failed ? "a failed write" : "finish");
    if (w->records_done != w->records_total)
        return kld_fail(err, KLD_ERR_ARG, "%s: %lld records written, the header announces %lld",
                        w->tmp_path, (long long)w->records_done, (long long)w->records_total);
    kld_status st = flush_buf(w, err);
    if (st) return st;
    if (fsync(w->fd) != 0) {
        w->failed = true;
        return kld_fail(err, KLD_ERR_IO, "%s: fsync failed: %s", w->tmp_path, strerror(errno));
    }
    int fd = w->fd;
    w->fd = -1;
    if (close(fd) != 0) {
        w->failed = true;
        return kld_fail(err, KLD_ERR_IO, "%s: close failed: %s", w->tmp_path, strerror(errno));
    }
    if (rename(w->tmp_path, w->path) != 0) {
        w->failed = true;
        return kld_fail(err, KLD_ERR_IO, "%s: cannot rename %s into place: %s", w->path,
                        w->tmp_path, strerror(errno));
    }
    w->finished = true;
    sync_parent_dir(w->path);
    return KLD_OK;
}

void kld_lcpp_base_writer_free(kld_lcpp_base_writer *w) {
    if (!w) return;
    if (w->fd >= 0) close(w->fd);
    if (w->created && !w->finished) unlink(w->tmp_path);
    free(w->record);
    free(w->buf);
    free(w->tmp_path);
    free(w->path);
    free(w);
}
