/* args.c — integer flag parsing and defaults shared by the subcommands. */
#include "cli/args.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

bool kld_arg_int(const char *flag, const char *value, int64_t lo, int64_t hi, int64_t *out) {
    char *end;
    errno = 0;
    long long v = strtoll(value, &end, 10);
    if (errno || end == value || *end || v < lo || v > hi) {
        fprintf(stderr, "kldeval: %s expects an integer in [%lld, %lld], got '%s'\n", flag,
                (long long)lo, (long long)hi, value);
        return false;
    }
    *out = v;
    return true;
}

bool kld_arg_u64(const char *flag, const char *value, uint64_t *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(value, &end, 10);
    if (errno || end == value || *end || value[0] == '-') {
        fprintf(stderr, "kldeval: %s expects a non-negative integer, got '%s'\n", flag, value);
        return false;
    }
    *out = v;
    return true;
}

const char *kld_arg_value(int argc, char **argv, int *i) {
    if (*i + 1 >= argc) {
        fprintf(stderr, "kldeval: %s needs a value\n", argv[*i]);
        return NULL;
    }
    return argv[++*i];
}
