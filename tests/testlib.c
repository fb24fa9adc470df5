/* testlib.c — counters, file helpers and gunzip for the tests. */
#include "testlib.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

int kt_passed, kt_failed;

void kt_check(bool ok, const char *file, int line, const char *fmt, ...) {
    if (ok) {
        kt_passed++;
        return;
    }
    kt_failed++;
    fprintf(stderr, "FAIL %s:%d: ", file, line);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

int kt_finish(void) {
    printf("%d passed, %d failed\n", kt_passed, kt_failed);
    return kt_failed == 0 && kt_passed > 0 ? 0 : 1;
}

/* Tests write only under their build folder: without KLD_BUILD_DIR (set by
 * ctest) a test would write into whatever folder it was started from, often
 * the checkout, so it stops instead. */
const char *kt_build_dir(void) {
    const char *d = getenv("KLD_BUILD_DIR");
    if (!d || !*d) {
        fprintf(stderr, "KLD_BUILD_DIR is not set: run the tests with ctest, or set it to the "
                        "build folder (tests write nowhere else)\n");
        exit(2);
    }
    return d;
}

char *kt_read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        exit(2);
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "cannot read %s\n", path);
        exit(2);
    }
    buf[n] = '\0';
    fclose(f);
    if (size) *size = (size_t)n;
    return buf;
}

void kt_write_file(const char *path, const void *data, size_t size) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(2);
    }
}

char *kt_gunzip_to_build(const char *gz_path) {
    const char *base = strrchr(gz_path, '/');
    base = base ? base + 1 : gz_path;
    size_t n = strlen(base);
    if (n < 4 || strcmp(base + n - 3, ".gz") != 0) {
        fprintf(stderr, "%s: not a .gz path\n", gz_path);
        exit(2);
    }
    char *out = malloc(strlen(kt_build_dir()) + n + 16);
    sprintf(out, "%s/gunzip-%.*s", kt_build_dir(), (int)(n - 3), base);
    struct stat sb;
    if (stat(out, &sb) == 0 && sb.st_size > 0) return out;
    /* the command names the output three times */
    char *cmd = malloc(strlen(gz_path) + 3 * strlen(out) + 64);
    sprintf(cmd, "gzip -dc '%s' > '%s.tmp' && mv '%s.tmp' '%s'", gz_path, out, out, out);
    if (system(cmd) != 0) {
        fprintf(stderr, "gunzip failed: %s\n", cmd);
        exit(2);
    }
    free(cmd);
    return out;
}

int kt_run_capture(const char *cmd, char **out) {
    FILE *p = popen(cmd, "r");
    size_t cap = 1 << 16, n = 0, got;
    char *buf = malloc(cap);
    if (!buf) abort();
    while (p && (got = fread(buf + n, 1, cap - n - 1, p)) > 0) {
        n += got;
        if (n + 1 == cap && !(buf = realloc(buf, cap *= 2))) abort();
    }
    buf[n] = '\0';
    int st = p ? pclose(p) : -1;
    *out = buf;
    return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}
