/* dump_files.c — file plumbing of a dump directory: names, whole-buffer
 * pread/pwrite, and the atomic JSON write (temporary name, fsync, rename,
 * fsync of the directory) behind manifest.json and dump.partial.json. */
#include "store/dump_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

void kld_dumpi_path(char *buf, const char *dir, const char *name) {
    snprintf(buf, KLD_DUMPI_PATH_MAX, "%s/%s", dir, name);
}

void kld_dumpi_seq_path(char *buf, const char *dir, int64_t seq, bool ext) {
    snprintf(buf, KLD_DUMPI_PATH_MAX, "%s/seq-%lld%s", dir, (long long)seq,
             ext ? ".ext.bin" : ".bin");
}

bool kld_dumpi_is_hex64(const char *s) {
    for (int i = 0; i < 64; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return false;
    return s[64] == '\0';
}

int64_t kld_dumpi_pread(int fd, void *buf, uint64_t n, uint64_t off) {
    uint64_t done = 0;
    while (done < n) {
        uint64_t want = n - done > (1u << 30) ? (1u << 30) : n - done;
        ssize_t got = pread(fd, (uint8_t *)buf + done, (size_t)want, (off_t)(off + done));
        if (got < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (got == 0) break;
        done += (uint64_t)got;
    }
    return (int64_t)done;
}

bool kld_dumpi_pwrite(int fd, const void *buf, uint64_t n, uint64_t off) {
    uint64_t done = 0;
    while (done < n) {
        uint64_t want = n - done > (1u << 30) ? (1u << 30) : n - done;
        ssize_t put = pwrite(fd, (const uint8_t *)buf + done, (size_t)want, (off_t)(off + done));
        if (put < 0) {
            if (errno == EINTR) continue;
            return false;
        }
        if (put == 0) { /* no progress and no error: treat as a full device */
            errno = ENOSPC;
            return false;
        }
        done += (uint64_t)put;
    }
    return true;
}

kld_status kld_dumpi_fsync_dir(const char *dir, kld_error *err) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return kld_fail(err, KLD_ERR_IO, "%s: cannot open directory: %s", dir, strerror(errno));
    int rc = fsync(fd);
    int e = errno;
    close(fd);
    /* some file systems cannot fsync a directory; that is not a lost write */
    if (rc != 0 && e != EINVAL && e != ENOTSUP)
        return kld_fail(err, KLD_ERR_IO, "%s: fsync failed: %s", dir, strerror(e));
    return KLD_OK;
}

kld_status kld_dumpi_write_json(const char *dir, const char *name, const json_t *root,
                                kld_error *err) {
    char path[KLD_DUMPI_PATH_MAX], tmp[KLD_DUMPI_PATH_MAX];
    kld_dumpi_path(path, dir, name);
    snprintf(tmp, sizeof tmp, "%s/%s.tmp", dir, name); /* dir was length-checked */
    char *text = json_dumps(root, JSON_INDENT(2));
    if (!text) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", path);
    size_t n = strlen(text);
    text[n] = '\n'; /* json_dumps' terminator becomes the final newline (n + 1 bytes) */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        int e = errno;
        free(text);
        return kld_fail(err, KLD_ERR_IO, "%s: cannot create: %s", tmp, strerror(e));
    }
    bool ok = kld_dumpi_pwrite(fd, text, n + 1, 0);
    const char *what = "write";
    if (ok && fsync(fd) != 0) {
        ok = false;
        what = "fsync";
    }
    int e = errno;
    if (close(fd) != 0 && ok) {
        ok = false;
        what = "close";
        e = errno;
    }
    free(text);
    if (!ok) {
        unlink(tmp);
        return kld_fail(err, KLD_ERR_IO, "%s: %s failed: %s", tmp, what, strerror(e));
    }
    if (rename(tmp, path) != 0) {
        e = errno;
        unlink(tmp);
        return kld_fail(err, KLD_ERR_IO, "%s: cannot rename to %s: %s", tmp, path, strerror(e));
    }
    return kld_dumpi_fsync_dir(dir, err);
}
