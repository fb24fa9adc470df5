/* error.c — the error record behind every kld_status return. */
#include "common.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

kld_status kld_fail(kld_error *err, kld_status status, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->status = status;
    }
    return status;
}

void kld_error_prefix(kld_error *err, const char *fmt, ...) {
    if (!err) return;
    char prefix[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    char old[sizeof err->msg];
    memcpy(old, err->msg, sizeof old);
    /* Truncation is acceptable: the start of the message carries the context. */
    size_t n = strlen(prefix);
    if (n > sizeof err->msg - 3) n = sizeof err->msg - 3;
    memcpy(err->msg, prefix, n);
    memcpy(err->msg + n, ": ", 2);
    size_t room = sizeof err->msg - n - 3;
    size_t m = strnlen(old, room);
    memcpy(err->msg + n + 2, old, m);
    err->msg[n + 2 + m] = '\0';
}

const char *kld_status_name(kld_status st) {
    switch (st) {
    case KLD_OK: return "ok";
    case KLD_ERR_IO: return "I/O error";
    case KLD_ERR_FORMAT: return "format error";
    case KLD_ERR_UNSUPPORTED: return "unsupported";
    case KLD_ERR_NOMEM: return "out of memory";
    case KLD_ERR_ARG: return "invalid argument";
    case KLD_ERR_MISMATCH: return "mismatch";
    case KLD_ERR_INTERRUPTED: return "interrupted";
    }
    return "unknown status";
}

const char *kld_version(void) { return KLD_VERSION_STRING; }
