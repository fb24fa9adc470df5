/* testlib.h — the minimal test harness every tests/test_*.c uses: checks
 * that count failures instead of aborting, and file helpers. A test's main
 * ends with `return kt_finish();`, which prints "N passed, N failed". */
#ifndef KLD_TESTLIB_H
#define KLD_TESTLIB_H

#include "common/common.h"

#include <stdio.h>

extern int kt_passed, kt_failed;

void kt_check(bool ok, const char *file, int line, const char *fmt, ...) KLD_PRINTF(4, 5);
int kt_finish(void);

#define CHECK(cond, ...) kt_check((cond), __FILE__, __LINE__, __VA_ARGS__)
/* Evaluates st once (it is often the call under test). */
#define CHECK_OK(st, err)                                                                 \
    do {                                                                                  \
        kld_status kt_st_ = (st);                                                         \
        kt_check(kt_st_ == KLD_OK, __FILE__, __LINE__, "expected KLD_OK, got %s: %s",     \
                 kld_status_name(kt_st_), (err).msg);                                     \
    } while (0)

/* Path of ../shared relative to the repository root (tests run there). */
#define KT_SHARED "../shared"

/* The build folder (scratch files go there): $KLD_BUILD_DIR or ".". */
const char *kt_build_dir(void);

/* Reads a whole file (NUL-terminated); aborts the test on failure. */
char *kt_read_file(const char *path, size_t *size);
/* Writes a buffer to a file; aborts on failure. */
void kt_write_file(const char *path, const void *data, size_t size);
/* Runs a shell command line; *out gets everything it wrote to stdout
 * (malloc'd, NUL-terminated); returns its exit status (-1 when it did not
 * exit normally). */
int kt_run_capture(const char *cmd, char **out);
/* Decompresses a .gz file into the build folder (once) and returns the path
 * of the copy (static buffer per call site not needed: caller frees). */
char *kt_gunzip_to_build(const char *gz_path);

#endif
