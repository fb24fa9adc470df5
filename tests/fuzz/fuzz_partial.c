/* fuzz_partial.c — libFuzzer harness for shard partials and kl checkpoints
 * (store/partial.c: kld_partial_open, then every record read twice, with a
 * rewind between). A partial ends in the SHA-256 of its bytes, which a
 * mutation nearly always breaks; so when the first input byte is odd, the
 * rest is taken as a partial without its checksum and the right one is
 * appended, and the header, meta, window table and records are what is
 * tested. Seeds: tests/fuzz/partial_seeds/ (written by test_bad_readers). */
#include "fuzz_common.h"
#include "fuzz_scratch.h"
#include "store/partial.h"

#include <openssl/evp.h>
#include <string.h>

static void read_all(kld_partial *p, kld_error *err) {
    const kld_partial_head *h = kld_partial_head_of(p);
    kld_position rec[16];
    for (uint64_t done = 0; done < h->n_records;) {
        size_t n = h->n_records - done < 16 ? (size_t)(h->n_records - done) : 16;
        if (kld_partial_read(p, n, rec, err) != KLD_OK) return;
        fuzz_sink ^= (uint8_t)rec[n - 1].token;
        done += n;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    char path[128];
    snprintf(path, sizeof path, "%s/part.kldpart", fuzz_scratch_dir("partial"));
    if (data[0] & 1) {
        uint8_t *buf = malloc(size - 1 + 32);
        if (!buf) return 0;
        memcpy(buf, data + 1, size - 1);
        unsigned int len = 0;
        if (!EVP_Digest(buf, size - 1, buf + size - 1, &len, EVP_sha256(), NULL)) abort();
        fuzz_write(path, buf, size - 1 + 32);
        free(buf);
    } else {
        fuzz_write(path, data + 1, size - 1);
    }
    kld_partial *p = NULL;
    kld_error err = {0};
    kld_status st = kld_partial_open(path, &p, &err);
    fuzz_check_failure(st, &err);
    if (st != KLD_OK) return 0;
    fuzz_sink ^= (uint8_t)kld_partial_meta(p)[0];
    read_all(p, &err);
    if (kld_partial_rewind(p, &err) == KLD_OK) read_all(p, &err);
    kld_partial_close(p);
    return 0;
}
