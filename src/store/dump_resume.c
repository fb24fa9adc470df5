/* dump_resume.c — what a dump writer checks before it starts or resumes:
 * the state of its directory (missing, empty, a start cut short before the
 * partial manifest, something else) and that an interrupted dump has the
 * same settings and tokens as the run resuming it. */
#include "store/dump_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* 0: DIR is missing; 1: empty; 2: holds something. */
int kld_dumpi_dir_state(const char *dir, kld_error *err, kld_status *st) {
    *st = KLD_OK;
    DIR *dp = opendir(dir);
    if (!dp) {
        if (errno == ENOENT) return 0;
        *st = kld_fail(err, KLD_ERR_IO, "%s: cannot open directory: %s", dir, strerror(errno));
        return -1;
    }
    int state = 1;
    struct dirent *e;
    while ((e = readdir(dp)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
            state = 2;
            break;
        }
    closedir(dp);
    return state;
}

/* What a fresh dump writes before its partial manifest. */
static const char *const START_FILES[] = {KLD_DUMPI_TOKENS, KLD_DUMPI_TOKENS ".tmp", KLD_DUMPI_PARTIAL ".tmp"};
enum { N_START_FILES = sizeof START_FILES / sizeof START_FILES[0] };

/* A start cut short: the folder holds only START_FILES, which a resume
 * removes to start over. */
bool kld_dumpi_only_start_files(const char *dir) {
    DIR *dp = opendir(dir);
    if (!dp) return false;
    bool only = true;
    struct dirent *e;
    while (only && (e = readdir(dp)) != NULL) {
        only = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..");
        for (int i = 0; i < N_START_FILES && !only; i++) only = !strcmp(e->d_name, START_FILES[i]);
    }
    closedir(dp);
    return only;
}

kld_status kld_dumpi_remove_start_files(const char *dir, kld_error *err) {
    char path[KLD_DUMPI_PATH_MAX];
    for (int i = 0; i < N_START_FILES; i++) {
        kld_dumpi_path(path, dir, START_FILES[i]);
        if (unlink(path) != 0 && errno != ENOENT)
            return kld_fail(err, KLD_ERR_IO, "%s: cannot remove: %s", path, strerror(errno));
    }
    return KLD_OK;
}

static kld_status differs(const char *path, const char *key, long long was, long long now,
                          kld_error *err) {
    return kld_fail(err, KLD_ERR_MISMATCH, "%s: %s: the interrupted dump has %lld, this run %lld",
                    path, key, was, now);
}

/* The partial manifest must describe the dump being resumed. */
kld_status kld_dumpi_same_settings(const char *path, const kld_dump_meta *was,
                                   const kld_dump_meta *now, kld_error *err) {
    if (was->format_version != now->format_version)
        return differs(path, "format_version", was->format_version, now->format_version, err);
    if (strcmp(was->model, now->model) != 0)
        return kld_fail(err, KLD_ERR_MISMATCH,
                        "%s: model: the interrupted dump has \"%.200s\", this run \"%.200s\"", path,
                        was->model, now->model);
    if (strcmp(was->corpus_sha256, now->corpus_sha256) != 0)
        return kld_fail(err, KLD_ERR_MISMATCH,
                        "%s: corpus_sha256: the interrupted dump has %s, this run %s", path,
                        was->corpus_sha256, now->corpus_sha256);
    if (was->ctx_len != now->ctx_len)
        return differs(path, "ctx_len", was->ctx_len, now->ctx_len, err);
    if (was->n_seqs != now->n_seqs) return differs(path, "n_seqs", was->n_seqs, now->n_seqs, err);
    if (was->top_k != now->top_k) return differs(path, "top_k", was->top_k, now->top_k, err);
    if (was->n_embd != now->n_embd) return differs(path, "n_embd", was->n_embd, now->n_embd, err);
    if (was->hidden_dtype != now->hidden_dtype)
        return differs(path, "hidden_dtype", was->hidden_dtype, now->hidden_dtype, err);
    if (now->format_version == 3 && (!was->head.sha256 || strcmp(was->head.sha256, now->head.sha256)))
        return kld_fail(err, KLD_ERR_MISMATCH, "%s: head.sha256: the interrupted dump's head is "
                        "%.64s, this run's %s", path, was->head.sha256 ? was->head.sha256 : "(none)",
                        now->head.sha256);
    if (was->ext != now->ext)
        return kld_fail(err, KLD_ERR_MISMATCH, "%s: ext: the interrupted dump has %s, this run %s",
                        path, was->ext ? "true" : "false", now->ext ? "true" : "false");
    if (was->lse_of_stored != now->lse_of_stored)
        return kld_fail(err, KLD_ERR_MISMATCH,
                        "%s: lse_of_stored: the interrupted dump has %s, this run %s (it was "
                        "written by another kldeval: start it afresh)", path,
                        was->lse_of_stored ? "true" : "false", now->lse_of_stored ? "true" : "false");
    /* a dump made before the levers key knew only the reference */
    const char *lw = was->levers ? was->levers : "reference", *ln = now->levers ? now->levers : "reference";
    if (strcmp(lw, ln) != 0)
        return kld_fail(err, KLD_ERR_MISMATCH,
                        "%s: levers: the interrupted dump was made with %s, this run with %s "
                        "(resume %s%s)", path, lw, ln,
                        strcmp(lw, "reference") ? "with --lever " : "without --lever",
                        strcmp(lw, "reference") ? lw : "");
    if (was->candidate != now->candidate)
        return kld_fail(
            err, KLD_ERR_MISMATCH, "%s: kind: the interrupted dump is a %s, this run a %s", path,
            was->candidate ? "candidate" : "teacher", now->candidate ? "candidate" : "teacher");
    return KLD_OK;
}

kld_status kld_dumpi_same_tokens(const char *dir, const int32_t *tokens, uint64_t n, kld_error *err) {
    char path[KLD_DUMPI_PATH_MAX];
    kld_dumpi_path(path, dir, KLD_DUMPI_TOKENS);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return kld_fail(err, KLD_ERR_MISMATCH, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || (uint64_t)sb.st_size != 4 * n) {
        close(fd);
        return kld_fail(err, KLD_ERR_MISMATCH, "%s: %lld bytes, this run's tokens are %llu", path,
                        (long long)sb.st_size, (unsigned long long)(4 * n));
    }
    int32_t chunk[4096];
    for (uint64_t i = 0; i < n;) {
        uint64_t m = n - i < 4096 ? n - i : 4096;
        int64_t got = kld_dumpi_pread(fd, chunk, 4 * m, 4 * i);
        if (got != (int64_t)(4 * m)) {
            int e = errno;
            close(fd);
            return kld_fail(err, KLD_ERR_IO, "%s: read failed: %s", path,
                            got < 0 ? strerror(e) : "short read");
        }
        for (uint64_t j = 0; j < m; j++)
            if (chunk[j] != tokens[i + j]) {
                close(fd);
                return kld_fail(
                    err, KLD_ERR_MISMATCH,
                    "%s: differs from this run's tokens at id %llu (%d on disk, %d now)", path,
                    (unsigned long long)(i + j), (int)chunk[j], (int)tokens[i + j]);
            }
        i += m;
    }
    close(fd);
    return KLD_OK;
}
