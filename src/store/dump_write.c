/* dump_write.c — writes a dump directory (dump v1/v2 and the kldeval
 * sidecar, layout in dump.h): tokens.bin and dump.partial.json first, then
 * the records in order, then manifest.json atomically. An interrupted dump
 * (no manifest.json) is resumed at its first missing record; a torn last
 * record is cut off. Every write, fsync and close is checked. */
#include "store/dump_internal.h"
#include "tensor/types.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct kld_dump_writer {
    char *dir;
    json_t *manifest;
    int format_version;
    int32_t top_k;
    int64_t n_embd;                 /* format 3: hidden values per record */
    int hidden_dtype;
    int64_t n_seqs, pps, n_vocab;
    bool ext, candidate;
    uint64_t rec_bytes;
    int64_t resume_seq, resume_rec; /* records before this point were on disk already */
    int64_t cur_seq, cur_rec;       /* the next record to write */
    /* a shard: the sequences it holds (ascending); cur_j indexes cur_seq in them */
    int64_t *held, n_held, cur_j;
    bool shard;
    int fd, fd_ext;                 /* files of cur_seq, -1 when closed */
    char path[KLD_DUMPI_PATH_MAX], path_ext[KLD_DUMPI_PATH_MAX];
    uint8_t *buf, *ebuf;
    size_t buf_cap, ebuf_cap;
    kld_dumpi_distinct distinct;
    bool failed, finished;
};

static kld_status io_fail(const char *path, const char *what, int e, kld_error *err) {
    return kld_fail(err, KLD_ERR_IO, "%s: %s failed: %s", path, what, strerror(e));
}

/* fsync and close; both checked (a full disk may only show here). */
static kld_status sync_close(int *fd, const char *path, kld_error *err) {
    if (*fd < 0) return KLD_OK;
    int rc = fsync(*fd), e = errno;
    int rc2 = close(*fd), e2 = errno;
    *fd = -1;
    if (rc != 0) return io_fail(path, "fsync", e, err);
    if (rc2 != 0) return io_fail(path, "close", e2, err);
    return KLD_OK;
}

static kld_status write_file(const char *path, const void *data, uint64_t n, kld_error *err) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return kld_fail(err, KLD_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    if (!kld_dumpi_pwrite(fd, data, n, 0)) {
        int e = errno;
        close(fd);
        return io_fail(path, "write", e, err);
    }
    return sync_close(&fd, path, err);
}

/* Cuts (or checks) a file to len bytes; a missing file is fine when len is 0. */
static kld_status cut_file(const char *path, uint64_t len, kld_error *err) {
    struct stat sb;
    if (stat(path, &sb) != 0) {
        if (errno == ENOENT && len == 0) return KLD_OK;
        return kld_fail(err, KLD_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    }
    if ((uint64_t)sb.st_size == len) return KLD_OK;
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return kld_fail(err, KLD_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (ftruncate(fd, (off_t)len) != 0) {
        int e = errno;
        close(fd);
        return io_fail(path, "truncate", e, err);
    }
    return sync_close(&fd, path, err);
}

static kld_status remove_file(const char *path, kld_error *err) {
    if (unlink(path) != 0 && errno != ENOENT)
        return kld_fail(err, KLD_ERR_IO, "%s: cannot remove: %s", path, strerror(errno));
    return KLD_OK;
}

/* The j-th sequence the writer writes (n_seqs past the last). */
static int64_t held_at(const kld_dump_writer *w, int64_t j) {
    if (!w->shard) return j < w->n_seqs ? j : w->n_seqs;
    return j < w->n_held ? w->held[j] : w->n_seqs;
}

static bool is_held(const kld_dump_writer *w, int64_t seq) {
    if (!w->shard) return true;
    int64_t lo = 0, hi = w->n_held;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (w->held[mid] < seq) lo = mid + 1;
        else hi = mid;
    }
    return lo < w->n_held && w->held[lo] == seq;
}

/* Whole records present in path (capped at pps); 0 when it is missing. */
static kld_status records_on_disk(const char *path, uint64_t rec_bytes, int64_t pps, int64_t *n,
                                  kld_error *err) {
    struct stat sb;
    *n = 0;
    if (stat(path, &sb) != 0) {
        if (errno == ENOENT) return KLD_OK;
        return kld_fail(err, KLD_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    }
    if (!S_ISREG(sb.st_mode)) return kld_fail(err, KLD_ERR_ARG, "%s: not a regular file", path);
    uint64_t have = (uint64_t)sb.st_size / rec_bytes;
    *n = have > (uint64_t)pps ? pps : (int64_t)have;
    return KLD_OK;
}

/* Finds the first missing record, cuts torn records and drops files of
 * sequences after it (they cannot hold records: writing is in order). */
static kld_status find_resume_point(kld_dump_writer *w, kld_error *err) {
    char path[KLD_DUMPI_PATH_MAX], path_ext[KLD_DUMPI_PATH_MAX];
    w->resume_seq = w->n_seqs;
    w->resume_rec = 0;
    w->cur_j = -1;
    int64_t n_write = w->shard ? w->n_held : w->n_seqs;
    for (int64_t j = 0; j < n_write; j++) {
        int64_t i = held_at(w, j);
        kld_dumpi_seq_path(path, w->dir, i, false);
        kld_dumpi_seq_path(path_ext, w->dir, i, true);
        kld_status st;
        if (w->resume_seq < w->n_seqs) { /* past the resume point */
            if ((st = remove_file(path, err)) || (st = remove_file(path_ext, err))) return st;
            continue;
        }
        int64_t have, have_ext = w->pps;
        if ((st = records_on_disk(path, w->rec_bytes, w->pps, &have, err))) return st;
        if (w->ext && (st = records_on_disk(path_ext, KLD_DUMP_EXT_BYTES, w->pps, &have_ext, err)))
            return st;
        int64_t done = have < have_ext ? have : have_ext;
        if (done < w->pps) {
            w->resume_seq = i;
            w->resume_rec = done;
            w->cur_j = j;
        }
        if ((st = cut_file(path, (uint64_t)done * w->rec_bytes, err))) return st;
        if (w->ext && (st = cut_file(path_ext, (uint64_t)done * KLD_DUMP_EXT_BYTES, err)))
            return st;
    }
    if (w->cur_j < 0) w->cur_j = n_write;
    return kld_dumpi_fsync_dir(w->dir, err);
}

static void utc_now(char buf[32]) {
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static kld_status create_fresh(kld_dump_writer *w, const int32_t *tokens, uint64_t n_ids,
                               bool make_dir, kld_error *err) {
    if (make_dir && mkdir(w->dir, 0777) != 0)
        return kld_fail(err, KLD_ERR_IO, "%s: cannot create directory: %s", w->dir,
                        strerror(errno));
    char path[KLD_DUMPI_PATH_MAX];
    kld_dumpi_path(path, w->dir, KLD_DUMPI_TOKENS);
    /* tokens.bin before dump.partial.json: a partial manifest promises tokens */
    kld_status st = write_file(path, tokens, 4 * n_ids, err);
    if (st) return st;
    return kld_dumpi_write_json(w->dir, KLD_DUMPI_PARTIAL, w->manifest, err);
}

/* A shard's manifest carries its "shard" object. */
static kld_status add_shard(kld_dump_writer *w, const kld_dump_meta *meta, kld_error *err) {
    if (!meta->held) return KLD_OK;
    json_error_t je;
    json_t *o = meta->shard_json ? json_loads(meta->shard_json, JSON_REJECT_DUPLICATES, &je) : NULL;
    if (!json_is_object(o)) {
        json_decref(o);
        return kld_fail(err, KLD_ERR_ARG, "%s: dump meta: shard_json is not a JSON object", w->dir);
    }
    json_object_set_new(w->manifest, "shard", o);
    return KLD_OK;
}

/* --resume of a dump already complete (a kill may land between its manifest's
 * rename and the removal of dump.partial.json): the same settings and
 * tokens, and then nothing left to write but that removal. */
static kld_status resume_complete(kld_dump_writer *w, const char *path, const kld_dump_meta *meta,
                                  const int32_t *tokens, uint64_t n_ids, kld_error *err) {
    json_t *done = NULL;
    kld_dump_meta was;
    kld_status st = kld_dumpi_manifest_load(path, &done, &was, err);
    if (!st) st = kld_dumpi_same_settings(path, &was, meta, err);
    /* a shard resumes only as the same shard */
    if (!st && w->shard) {
        const json_t *a = json_object_get(done, "shard");
        json_int_t k = json_integer_value(json_object_get(a, "k")), n = json_integer_value(json_object_get(a, "n"));
        json_t *now = meta->shard_json ? json_loads(meta->shard_json, 0, NULL) : NULL;
        if (!now || !json_equal(json_object_get(a, "windows"), json_object_get(now, "windows")) ||
            k != json_integer_value(json_object_get(now, "k")) || n != json_integer_value(json_object_get(now, "n")))
            st = kld_fail(err, KLD_ERR_MISMATCH, "%s: shard: the complete dump is shard %lld/%lld, "
                          "not this run's", path, (long long)k, (long long)n);
        json_decref(now);
    }
    json_decref(done);
    if (!st) st = kld_dumpi_same_tokens(w->dir, tokens, n_ids, err);
    char partial[KLD_DUMPI_PATH_MAX];
    kld_dumpi_path(partial, w->dir, KLD_DUMPI_PARTIAL);
    if (!st && access(partial, F_OK) == 0 &&
        (st = remove_file(partial, err)) == KLD_OK)
        st = kld_dumpi_fsync_dir(w->dir, err);
    if (st) return st;
    w->finished = true;
    w->resume_seq = w->n_seqs;
    w->cur_j = w->n_held;
    return KLD_OK;
}

static kld_status prepare(kld_dump_writer *w, const kld_dump_meta *meta, const int32_t *tokens,
                          bool resume, kld_error *err) {
    kld_status st;
    uint64_t n_ids;
    if (!kld_mul_u64((uint64_t)meta->n_seqs, (uint64_t)meta->ctx_len, &n_ids) ||
        n_ids > SIZE_MAX / 4)
        return kld_fail(err, KLD_ERR_ARG, "%s: n_seqs * ctx_len overflows", w->dir);
    uint64_t seq_bytes;
    if (!kld_mul_u64((uint64_t)w->pps, w->rec_bytes, &seq_bytes) || seq_bytes > INT64_MAX)
        return kld_fail(err, KLD_ERR_ARG, "%s: positions_per_seq * record bytes overflows", w->dir);
    for (uint64_t i = 0; i < n_ids; i++)
        if (tokens[i] < 0 || (meta->n_vocab > 0 && tokens[i] >= meta->n_vocab))
            return kld_fail(
                err, KLD_ERR_ARG, "%s: token %llu (sequence %llu) is %d, outside [0, %lld)", w->dir,
                (unsigned long long)i, (unsigned long long)(i / (uint64_t)meta->ctx_len),
                (int)tokens[i],
                meta->n_vocab > 0 ? (long long)meta->n_vocab : (long long)INT32_MAX + 1);

    int state = kld_dumpi_dir_state(w->dir, err, &st);
    if (state < 0) return st;
    char path[KLD_DUMPI_PATH_MAX];
    kld_dumpi_path(path, w->dir, w->shard ? KLD_DUMPI_SHARD : KLD_DUMPI_MANIFEST);
    if (resume && state == 2 && access(path, F_OK) == 0)
        return resume_complete(w, path, meta, tokens, n_ids, err);
    for (int f = 0; f < 2; f++) {
        kld_dumpi_path(path, w->dir, f ? KLD_DUMPI_SHARD : KLD_DUMPI_MANIFEST);
        if (state == 2 && access(path, F_OK) == 0)
            return kld_fail(err, KLD_ERR_ARG, "%s: holds a complete dump%s (%s exists)", w->dir,
                            f ? " shard" : "", path);
    }

    kld_dump_meta m = *meta;
    char now[32];
    json_t *partial = NULL;
    kld_dump_meta was;
    char partial_path[KLD_DUMPI_PATH_MAX];
    kld_dumpi_path(partial_path, w->dir, KLD_DUMPI_PARTIAL);
    /* a dump killed before its partial manifest existed scored nothing:
     * resuming it is starting it */
    if (resume && state >= 1 && access(partial_path, F_OK) != 0 && kld_dumpi_only_start_files(w->dir)) {
        if ((st = kld_dumpi_remove_start_files(w->dir, err))) return st;
        resume = false;
        state = 1;
    }
    if (resume) {
        if (state != 2 || access(partial_path, F_OK) != 0)
            return kld_fail(err, KLD_ERR_ARG, "%s: no interrupted dump to resume (%s is missing)",
                            w->dir, partial_path);
        if ((st = kld_dumpi_manifest_load(partial_path, &partial, &was, err))) return st;
        st = kld_dumpi_same_settings(partial_path, &was, meta, err);
        if (!st) st = kld_dumpi_same_tokens(w->dir, tokens, n_ids, err);
        /* the dump was started when the partial manifest was written */
        if (!st && !m.created && was.created) {
            m.created = was.created;
        }
        if (!st) {
            if (!m.created) {
                utc_now(now);
                m.created = now;
            }
            w->manifest = kld_dumpi_manifest_build(&m);
            if (!w->manifest) st = kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", w->dir);
            else st = add_shard(w, meta, err);
        }
        /* a shard resumes only as the same shard */
        if (!st && !json_equal(json_object_get(partial, "shard"), json_object_get(w->manifest, "shard")) &&
            (json_object_get(partial, "shard") || json_object_get(w->manifest, "shard")))
            st = kld_fail(err, KLD_ERR_MISMATCH, "%s: shard: the interrupted dump is %s, this run %s",
                          partial_path, json_object_get(partial, "shard") ? "another shard" : "not a shard",
                          meta->held ? "a shard" : "not a shard");
        json_decref(partial); /* after the build: m.created may point into it */
        if (st) return st;
        return find_resume_point(w, err);
    }
    if (state == 2)
        return kld_fail(err, KLD_ERR_ARG, "%s: not empty%s", w->dir,
                        access(partial_path, F_OK) == 0
                            ? " (an interrupted dump: resume it or remove it)"
                            : " (a new dump needs a new or empty directory)");
    if (!m.created) {
        utc_now(now);
        m.created = now;
    }
    w->manifest = kld_dumpi_manifest_build(&m);
    if (!w->manifest) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", w->dir);
    if ((st = add_shard(w, meta, err))) return st;
    return create_fresh(w, tokens, n_ids, state == 0, err);
}

/* A shard's sequences: ascending, within the dump, copied. */
static kld_status copy_held(kld_dump_writer *w, const kld_dump_meta *meta, kld_error *err) {
    if (!w->shard) return KLD_OK;
    bool ok = meta->n_held >= 0 && meta->n_held <= meta->n_seqs;
    for (int64_t j = 0; ok && j < meta->n_held; j++)
        ok = meta->held[j] >= 0 && meta->held[j] < meta->n_seqs &&
             (j == 0 || meta->held[j] > meta->held[j - 1]);
    if (!ok)
        return kld_fail(err, KLD_ERR_ARG, "%s: dump meta: the shard's sequences must ascend within "
                        "[0, %lld)", w->dir, (long long)meta->n_seqs);
    w->n_held = meta->n_held;
    w->held = malloc((size_t)(meta->n_held ? meta->n_held : 1) * sizeof *w->held);
    if (!w->held) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", w->dir);
    memcpy(w->held, meta->held, (size_t)meta->n_held * sizeof *w->held);
    return KLD_OK;
}

kld_status kld_dump_create(const char *dir, const kld_dump_meta *meta, const int32_t *tokens,
                           bool resume, kld_dump_writer **out, int64_t *done_seq, int64_t *done_rec,
                           kld_error *err) {
    if (!out) return kld_fail(err, KLD_ERR_ARG, "kld_dump_create: out is NULL");
    *out = NULL;
    if (done_seq) *done_seq = 0;
    if (done_rec) *done_rec = 0;
    if (!dir || !dir[0] || !meta || !tokens)
        return kld_fail(err, KLD_ERR_ARG, "kld_dump_create: NULL directory, meta or tokens");
    if (strlen(dir) > KLD_DUMPI_DIR_MAX)
        return kld_fail(err, KLD_ERR_ARG, "%.80s...: path too long", dir);
    kld_status st = kld_dumpi_meta_check(meta, err);
    if (st) {
        kld_error_prefix(err, "%s", dir);
        return st;
    }
    kld_dump_writer *w = calloc(1, sizeof *w);
    if (!w) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", dir);
    w->fd = w->fd_ext = -1;
    w->dir = kld_strdup(dir);
    w->format_version = meta->format_version;
    w->top_k = meta->top_k;
    w->n_seqs = meta->n_seqs;
    w->pps = meta->ctx_len - 1;
    w->n_vocab = meta->n_vocab;
    w->ext = meta->ext;
    w->candidate = meta->candidate;
    w->rec_bytes = kld_dump_meta_record_bytes(meta);
    w->n_embd = meta->n_embd;
    w->hidden_dtype = meta->hidden_dtype;
    w->shard = meta->held != NULL;
    if (!w->dir)
        st = kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", dir);
    else if (!(st = copy_held(w, meta, err)))
        st = prepare(w, meta, tokens, resume, err);
    if (st) {
        kld_dump_writer_free(w);
        return st;
    }
    if (!resume) { /* find_resume_point set cur_j otherwise */
        w->cur_j = 0;
        w->resume_seq = held_at(w, 0);
    }
    w->cur_seq = w->resume_seq;
    w->cur_rec = w->resume_rec;
    if (done_seq) *done_seq = w->resume_seq;
    if (done_rec) *done_rec = w->resume_rec;
    *out = w;
    return KLD_OK;
}

static kld_status open_current(kld_dump_writer *w, kld_error *err) {
    if (w->fd >= 0) return KLD_OK;
    kld_dumpi_seq_path(w->path, w->dir, w->cur_seq, false);
    kld_dumpi_seq_path(w->path_ext, w->dir, w->cur_seq, true);
    /* a sequence started afresh must not keep bytes from elsewhere */
    int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (w->cur_rec == 0 ? O_TRUNC : 0);
    w->fd = open(w->path, flags, 0644);
    if (w->fd < 0)
        return kld_fail(err, KLD_ERR_IO, "%s: cannot create: %s", w->path, strerror(errno));
    if (!w->ext) return KLD_OK;
    w->fd_ext = open(w->path_ext, flags, 0644);
    if (w->fd_ext < 0)
        return kld_fail(err, KLD_ERR_IO, "%s: cannot create: %s", w->path_ext, strerror(errno));
    return KLD_OK;
}

static kld_status grow(uint8_t **buf, size_t *cap, uint64_t n, const char *dir, kld_error *err) {
    if (n <= *cap) return KLD_OK;
    if (n > SIZE_MAX) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", dir);
    uint8_t *p = realloc(*buf, (size_t)n);
    if (!p) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", dir);
    *buf = p;
    *cap = (size_t)n;
    return KLD_OK;
}

static kld_status check_rows(kld_dump_writer *w, int64_t seq, int64_t rec0, int64_t n,
                             const kld_dump_rows *rows, kld_error *err) {
    char path[KLD_DUMPI_PATH_MAX], path_ext[KLD_DUMPI_PATH_MAX];
    kld_dumpi_seq_path(path, w->dir, seq, false);
    kld_dumpi_seq_path(path_ext, w->dir, seq, true);
    kld_dumpi_rules rules = {.status = KLD_ERR_ARG,
                             .file = path,
                             .ext_file = path_ext,
                             .n_vocab = w->n_vocab,
                             .top_k = w->top_k,
                             .candidate = w->candidate,
                             /* v1 rows come rounded (kld_row_as_f16): ties may be rounding's */
                             .rounded_f16 = w->format_version == 1,
                             .strict_ties = w->format_version != 1};
    size_t k = (size_t)w->top_k;
    for (int64_t r = 0; r < n; r++) {
        const int32_t *idx = rows->idx + (size_t)r * k;
        const float *val = rows->val + (size_t)r * k;
        kld_status st =
            kld_dumpi_check_record(&rules, &w->distinct, rec0 + r, idx, val, rows->lse[r], err);
        if (st) return st;
        if (w->format_version == 1)
            for (size_t j = 0; j < k; j++)
                if ((kld_f32_to_f16(val[j]) & 0x7C00) == 0x7C00)
                    return kld_fail(err, KLD_ERR_ARG,
                                    "%s: record %lld: logit %.9g at rank %zu overflows float16",
                                    path, (long long)(rec0 + r), (double)val[j], j);
        if (w->ext && (st = kld_dumpi_check_ext(&rules, rec0 + r, idx, rows->lse[r], rows->lse64[r],
                                                rows->logp_next[r], rows->argmax[r], err)))
            return st;
    }
    return KLD_OK;
}

/* Format 3: every hidden value finite (a NaN would poison every logit). */
static kld_status check_hidden(const kld_dump_writer *w, int64_t rec0, int64_t n,
                               const float *hidden, kld_error *err) {
    for (int64_t r = 0; r < n; r++)
        for (int64_t i = 0; i < w->n_embd; i++)
            if (!isfinite(hidden[r * w->n_embd + i]))
                return kld_fail(err, KLD_ERR_ARG, "%s: record %lld: hidden value %lld is %g", w->dir,
                                (long long)(rec0 + r), (long long)i,
                                (double)hidden[r * w->n_embd + i]);
    return KLD_OK;
}

static kld_status write_records(kld_dump_writer *w, int64_t seq, int64_t rec0, int64_t n,
                                const kld_dump_rows *rows, const float *hidden, kld_error *err);

kld_status kld_dump_write_hidden(kld_dump_writer *w, int64_t seq, int64_t rec0, int64_t n,
                                 const float *hidden, const double *lse64, const double *logp_next,
                                 const int32_t *argmax, kld_error *err) {
    if (!w || !hidden || w->format_version != 3)
        return kld_fail(err, KLD_ERR_ARG, "kld_dump_write_hidden: a format-3 writer and rows");
    kld_dump_rows rows = {NULL, NULL, NULL, (double *)lse64, (double *)logp_next, (int32_t *)argmax};
    return write_records(w, seq, rec0, n, &rows, hidden, err);
}

kld_status kld_dump_write(kld_dump_writer *w, int64_t seq, int64_t rec0, int64_t n,
                          const kld_dump_rows *rows, kld_error *err) {
    if (!w || !rows || !rows->idx || !rows->val || !rows->lse)
        return kld_fail(err, KLD_ERR_ARG, "kld_dump_write: NULL writer or row arrays");
    if (w->format_version == 3)
        return kld_fail(err, KLD_ERR_ARG, "%s: a hidden-state dump: kld_dump_write_hidden", w->dir);
    return write_records(w, seq, rec0, n, rows, NULL, err);
}

static kld_status write_records(kld_dump_writer *w, int64_t seq, int64_t rec0, int64_t n,
                                const kld_dump_rows *rows, const float *hidden, kld_error *err) {
    if (w->ext && (!rows->lse64 || !rows->logp_next || !rows->argmax))
        return kld_fail(err, KLD_ERR_ARG,
                        "%s: the dump has sidecars: lse64, logp_next and argmax are required",
                        w->dir);
    if (w->finished) return kld_fail(err, KLD_ERR_ARG, "%s: the dump is finished", w->dir);
    if (w->failed)
        return kld_fail(err, KLD_ERR_ARG, "%s: an earlier write failed; free the writer and resume",
                        w->dir);
    if (seq < 0 || seq >= w->n_seqs)
        return kld_fail(err, KLD_ERR_ARG, "%s: sequence %lld is outside [0, %lld)", w->dir,
                        (long long)seq, (long long)w->n_seqs);
    if (rec0 < 0 || n < 0 || rec0 > w->pps || n > w->pps - rec0)
        return kld_fail(err, KLD_ERR_ARG,
                        "%s: sequence %lld: records [%lld, %lld + %lld) outside [0, %lld)", w->dir,
                        (long long)seq, (long long)rec0, (long long)rec0, (long long)n,
                        (long long)w->pps);
    if (!is_held(w, seq))
        return kld_fail(err, KLD_ERR_ARG, "%s: sequence %lld is not one of the shard's", w->dir,
                        (long long)seq);
    kld_status st = hidden ? check_hidden(w, rec0, n, hidden, err) : check_rows(w, seq, rec0, n, rows, err);
    if (st) return st;
    /* records before the resume point are on disk already */
    int64_t skip = 0;
    if (seq < w->resume_seq)
        skip = n;
    else if (seq == w->resume_seq && rec0 < w->resume_rec)
        skip = w->resume_rec - rec0 < n ? w->resume_rec - rec0 : n;
    int64_t r0 = rec0 + skip, m = n - skip;
    if (m == 0) return KLD_OK;
    if (seq != w->cur_seq || r0 != w->cur_rec) {
        if (w->cur_seq >= w->n_seqs)
            return kld_fail(
                err, KLD_ERR_ARG,
                "%s: records out of order: sequence %lld record %lld after the last record", w->dir,
                (long long)seq, (long long)r0);
        return kld_fail(
            err, KLD_ERR_ARG,
            "%s: records out of order: got sequence %lld record %lld, expected sequence "
            "%lld record %lld",
            w->dir, (long long)seq, (long long)r0, (long long)w->cur_seq, (long long)w->cur_rec);
    }
    if ((st = open_current(w, err))) {
        w->failed = true;
        return st;
    }
    size_t k = (size_t)w->top_k;
    uint64_t bytes = (uint64_t)m * w->rec_bytes; /* <= pps * rec_bytes, checked at create */
    if ((st = grow(&w->buf, &w->buf_cap, bytes, w->dir, err))) return st;
    for (int64_t r = 0; r < m; r++) {
        size_t i = (size_t)(skip + r);
        if (hidden)
            kld_dumpi_encode_hidden(w->hidden_dtype, w->n_embd, hidden + i * (size_t)w->n_embd,
                                    w->buf + (size_t)r * w->rec_bytes);
        else
            kld_dumpi_encode(w->format_version, w->top_k, rows->idx + i * k, rows->val + i * k,
                             rows->lse[i], w->buf + (size_t)r * w->rec_bytes);
    }
    if (!kld_dumpi_pwrite(w->fd, w->buf, bytes, (uint64_t)r0 * w->rec_bytes)) {
        w->failed = true;
        return io_fail(w->path, "write", errno, err);
    }
    if (w->ext) {
        uint64_t ebytes = (uint64_t)m * KLD_DUMP_EXT_BYTES;
        if ((st = grow(&w->ebuf, &w->ebuf_cap, ebytes, w->dir, err))) return st;
        for (int64_t r = 0; r < m; r++) {
            size_t i = (size_t)(skip + r);
            kld_dumpi_encode_ext(rows->lse64[i], rows->logp_next[i], rows->argmax[i],
                                 w->ebuf + (size_t)r * KLD_DUMP_EXT_BYTES);
        }
        if (!kld_dumpi_pwrite(w->fd_ext, w->ebuf, ebytes, (uint64_t)r0 * KLD_DUMP_EXT_BYTES)) {
            w->failed = true;
            return io_fail(w->path_ext, "write", errno, err);
        }
    }
    w->cur_rec += m;
    if (w->cur_rec == w->pps) {
        if ((st = sync_close(&w->fd, w->path, err)) ||
            (st = sync_close(&w->fd_ext, w->path_ext, err))) {
            w->failed = true;
            return st;
        }
        w->cur_seq = held_at(w, ++w->cur_j);
        w->cur_rec = 0;
    }
    return KLD_OK;
}

kld_status kld_dump_set_rounding(kld_dump_writer *w, double kld_mean, double kld_max,
                                 kld_error *err) {
    if (!w || w->format_version != 3 || !isfinite(kld_mean) || !isfinite(kld_max))
        return kld_fail(err, KLD_ERR_ARG, "kld_dump_set_rounding: a format-3 writer, finite values");
    if (w->finished) return KLD_OK; /* resumed complete: the manifest has it already */
    json_t *r = json_pack("{s:f,s:f}", "kld_mean", kld_mean, "kld_max", kld_max);
    if (!r || json_object_set_new(w->manifest, "hidden_rounding", r))
        return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", w->dir);
    return KLD_OK;
}

kld_status kld_dump_finish(kld_dump_writer *w, kld_error *err) {
    if (!w) return kld_fail(err, KLD_ERR_ARG, "kld_dump_finish: NULL writer");
    if (w->finished) return KLD_OK;
    if (w->failed)
        return kld_fail(err, KLD_ERR_ARG, "%s: an earlier write failed; free the writer and resume",
                        w->dir);
    if (w->cur_seq < w->n_seqs)
        return kld_fail(
            err, KLD_ERR_ARG,
            "%s: incomplete: sequence %lld has %lld of %lld records (of %lld sequences)", w->dir,
            (long long)w->cur_seq, (long long)w->cur_rec, (long long)w->pps, (long long)w->n_seqs);
    kld_status st = kld_dumpi_write_json(w->dir, w->shard ? KLD_DUMPI_SHARD : KLD_DUMPI_MANIFEST,
                                         w->manifest, err);
    if (st) return st;
    char path[KLD_DUMPI_PATH_MAX];
    kld_dumpi_path(path, w->dir, KLD_DUMPI_PARTIAL);
    if ((st = remove_file(path, err)) || (st = kld_dumpi_fsync_dir(w->dir, err))) return st;
    w->finished = true;
    return KLD_OK;
}

void kld_dump_writer_free(kld_dump_writer *w) {
    if (!w) return;
    /* no fsync: an unfinished dump is resumed from whatever reached the disk */
    if (w->fd >= 0) close(w->fd);
    if (w->fd_ext >= 0) close(w->fd_ext);
    json_decref(w->manifest);
    free(w->buf);
    free(w->ebuf);
    kld_dumpi_distinct_free(&w->distinct);
    free(w->held);
    free(w->dir);
    free(w);
}
