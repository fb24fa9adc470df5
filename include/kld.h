/* kld.h — the public C API of kldeval: status codes, the caller-owned error
 * record, and (as modules land) opaque handles with the kld_ prefix. */
#ifndef KLD_H
#define KLD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kld_status {
    KLD_OK = 0,
    KLD_ERR_IO,          /* open/read/mmap failed */
    KLD_ERR_FORMAT,      /* the file violates its format */
    KLD_ERR_UNSUPPORTED, /* valid, but not something kldeval implements */
    KLD_ERR_NOMEM,       /* an allocation failed */
    KLD_ERR_ARG,         /* the caller passed something invalid */
    KLD_ERR_MISMATCH,    /* two inputs that must agree do not */
    KLD_ERR_INTERRUPTED  /* stopped on request (Ctrl-C) */
} kld_status;

/* Filled by every failing library call: the message names the file, the
 * field or tensor, and the offending value. */
typedef struct kld_error {
    kld_status status;
    char msg[1024];
} kld_error;

const char *kld_status_name(kld_status st);
const char *kld_version(void);

#ifdef __cplusplus
}
#endif
#endif
