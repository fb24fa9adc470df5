/* fuzz_imatrix.c — libFuzzer harness for the importance-matrix reader
 * (llama-imatrix's GGUF form and its legacy .dat; seeds of both in
 * tests/fuzz/imatrix_seeds, written by test_bad_readers): a parsed file
 * has non-empty names and finite sums and weights; a failure carries a
 * status and a message. */
#include "quant/quant.h"
#include "fuzz_common.h"

#include <math.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    kld_imatrix *im = NULL;
    kld_error err = {0};
    kld_status st = kld_imatrix_parse(data, size, "fuzz.dat", &im, &err);
    fuzz_check_failure(st, &err);
    if (st != KLD_OK) return 0;
    for (size_t i = 0; i < im->n; i++) {
        const kld_imatrix_entry *e = &im->e[i];
        if (e->n < 1 || strlen(e->name) == 0) abort();
        for (int64_t j = 0; j < e->n; j++)
            if (!isfinite(e->sums[j]) || !isfinite(e->weights[j])) abort();
        fuzz_sink ^= (uint8_t)(e->weights[e->n - 1] > 0);
    }
    kld_imatrix_free(im);
    return 0;
}
