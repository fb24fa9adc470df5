/* fuzz_scratch.h — for harnesses whose reader takes a path: a per-process
 * folder under /tmp (removed with its files at exit) and a file writer. */
#ifndef KLD_FUZZ_SCRATCH_H
#define KLD_FUZZ_SCRATCH_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char fuzz_scratch[64];

static void fuzz_scratch_remove(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", fuzz_scratch);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", fuzz_scratch);
}

/* The folder, made on first use: /tmp/fuzz_NAME.PID. */
static inline const char *fuzz_scratch_dir(const char *name) {
    if (!fuzz_scratch[0]) {
        snprintf(fuzz_scratch, sizeof fuzz_scratch, "/tmp/fuzz_%s.%ld", name, (long)getpid());
        if (mkdir(fuzz_scratch, 0700) != 0 && errno != EEXIST) abort();
        atexit(fuzz_scratch_remove);
    }
    return fuzz_scratch;
}

/* Writes n bytes to path (aborts when it cannot: the harness is broken). */
static inline void fuzz_write(const char *path, const uint8_t *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(data, 1, n, f) != n) || fclose(f) != 0) abort();
}

#endif
