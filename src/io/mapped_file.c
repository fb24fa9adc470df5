/* mapped_file.c — read-only mmap of whole files, and whole-file reads. */
#include "io/mapped_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

kld_status kld_map_file(const char *path, kld_mapped_file *out, kld_error *err) {
    memset(out, 0, sizeof *out);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return kld_fail(err, KLD_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return kld_fail(err, KLD_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return kld_fail(err, KLD_ERR_IO, "%s: not a regular file", path);
    }
    out->path = kld_strdup(path);
    if (!out->path) {
        close(fd);
        return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", path);
    }
    out->size = (uint64_t)sb.st_size;
    if (out->size > 0) {
        void *p = mmap(NULL, (size_t)out->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            close(fd);
            free(out->path);
            out->path = NULL;
            return kld_fail(err, KLD_ERR_IO, "%s: cannot mmap %llu bytes: %s", path,
                            (unsigned long long)sb.st_size, strerror(e));
        }
        out->data = p;
    }
    close(fd);
    return KLD_OK;
}

void kld_unmap_file(kld_mapped_file *mf) {
    if (!mf) return;
    if (mf->data) munmap((void *)mf->data, (size_t)mf->size);
    free(mf->path);
    memset(mf, 0, sizeof *mf);
}

kld_status kld_read_file(const char *path, uint64_t max_size, char **out, uint64_t *out_size,
                         kld_error *err) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return kld_fail(err, KLD_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return kld_fail(err, KLD_ERR_IO, "%s: not a regular file", path);
    }
    if ((uint64_t)sb.st_size > max_size) {
        fclose(f);
        return kld_fail(err, KLD_ERR_FORMAT, "%s: %llu bytes is larger than the %llu allowed",
                        path, (unsigned long long)sb.st_size, (unsigned long long)max_size);
    }
    size_t n = (size_t)sb.st_size;
    char *buf = malloc(n + 1);
    if (!buf) {
        fclose(f);
        return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", path);
    }
    if (fread(buf, 1, n, f) != n) {
        free(buf);
        fclose(f);
        return kld_fail(err, KLD_ERR_IO, "%s: short read", path);
    }
    fclose(f);
    buf[n] = '\0';
    *out = buf;
    if (out_size) *out_size = n;
    return KLD_OK;
}
