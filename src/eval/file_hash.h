/* file_hash.h — a file's SHA-256 computed on a thread of its own while the
 * caller goes on (a model's hash is only needed in the report; reading two
 * gigabytes first would delay every run by seconds). */
#ifndef KLD_EVAL_FILE_HASH_H
#define KLD_EVAL_FILE_HASH_H

#include "common/common.h"

typedef struct kld_sha256_job kld_sha256_job;

/* Starts hashing path (its own copy of the name); NULL when no thread could
 * be started (then hash with kld_sha256_file). */
kld_sha256_job *kld_sha256_start(const char *path);
/* Waits for the job and frees it: true with hex = the lower-case digest,
 * false when the file could not be read whole. NULL: false. */
bool kld_sha256_finish(kld_sha256_job *job, char hex[65]);

#endif
