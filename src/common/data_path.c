/* data_path.c — finds a run-time data file: beside an installed binary,
 * in the source tree of a build-tree binary, or under the configured
 * install prefix (see data_path.h for the order and why). The three
 * locations come from CMake as compile definitions. */
#include "common/data_path.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#if !defined(KLD_DATA_FROM_BIN) || !defined(KLD_DATA_SOURCE_DIR) || !defined(KLD_DATA_INSTALL_DIR)
#error "the data locations are compile definitions set by CMakeLists.txt"
#endif

/* The folder of the running binary, or "" when /proc/self/exe is missing. */
static void binary_folder(char *out, size_t size) {
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    out[0] = '\0';
    if (n <= 0) return;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash) return;
    *slash = '\0';
    snprintf(out, size, "%s", exe);
}

/* A name under data/: relative, and no ".." component. */
static bool rel_ok(const char *rel) {
    if (!rel[0] || rel[0] == '/') return false;
    for (const char *p = rel; *p;) {
        const char *end = strchr(p, '/');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == 2 && p[0] == '.' && p[1] == '.') return false;
        p += len + (end != NULL);
    }
    return true;
}

kld_status kld_data_path(const char *rel, char *out, size_t size, kld_error *err) {
    if (!rel || !rel_ok(rel))
        return kld_fail(err, KLD_ERR_ARG, "data file '%s': expected a path relative to data/",
                        rel ? rel : "(null)");
    char bin[PATH_MAX], joined[PATH_MAX + 64], from_bin[PATH_MAX + 64] = ""; /* realpath needs PATH_MAX */
    binary_folder(bin, sizeof bin);
    /* resolved, so that messages and reports show share/kldeval, not bin/../share/kldeval */
    if (bin[0]) {
        snprintf(joined, sizeof joined, "%s/%s", bin, KLD_DATA_FROM_BIN);
        if (!realpath(joined, from_bin)) snprintf(from_bin, sizeof from_bin, "%s", joined);
    }
    const char *const roots[] = {from_bin, KLD_DATA_SOURCE_DIR, KLD_DATA_INSTALL_DIR};
    char looked[1024] = ""; /* as long as an error message */
    size_t used = 0;
    for (size_t i = 0; i < sizeof roots / sizeof roots[0]; i++) {
        if (!roots[i][0]) continue;
        char path[2 * PATH_MAX];
        int n = snprintf(path, sizeof path, "%s/%s", roots[i], rel);
        if (n < 0 || (size_t)n >= sizeof path) continue;
        if (access(path, R_OK) == 0) {
            if ((size_t)n >= size)
                return kld_fail(err, KLD_ERR_ARG, "data file '%s': its path %s is longer than %zu bytes",
                                rel, path, size - 1);
            memcpy(out, path, (size_t)n + 1);
            return KLD_OK;
        }
        int w = snprintf(looked + used, sizeof looked - used, "%s%s", used ? ", " : "", roots[i]);
        if (w > 0 && (size_t)w < sizeof looked - used) used += (size_t)w;
    }
    return kld_fail(err, KLD_ERR_IO,
                    "data file '%s' not found under any of: %s (install kldeval with `cmake "
                    "--install`, or run it from its build tree)", rel, looked);
}
