/* file_hash.c — kld_sha256_file on a thread of its own (file_hash.h). */
#include "eval/file_hash.h"

#include "eval/corpus.h"

#include <pthread.h>
#include <stdlib.h>

struct kld_sha256_job {
    pthread_t thread;
    char *path;
    uint8_t digest[32];
    bool ok;
};

static void *hash_main(void *arg) {
    kld_sha256_job *j = arg;
    j->ok = kld_sha256_file(j->path, j->digest, NULL) == KLD_OK;
    return NULL;
}

kld_sha256_job *kld_sha256_start(const char *path) {
    kld_sha256_job *j = calloc(1, sizeof *j);
    if (!j || !(j->path = kld_strdup(path)) || pthread_create(&j->thread, NULL, hash_main, j) != 0) {
        if (j) free(j->path);
        free(j);
        return NULL;
    }
    return j;
}

bool kld_sha256_finish(kld_sha256_job *j, char hex[65]) {
    if (!j) return false;
    pthread_join(j->thread, NULL);
    const bool ok = j->ok;
    if (ok) kld_hex_digest(j->digest, hex);
    free(j->path);
    free(j);
    return ok;
}
