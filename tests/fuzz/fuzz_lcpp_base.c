/* fuzz_lcpp_base.c — libFuzzer harness for the llama.cpp base-file reader
 * (kld_lcpp_base_open / _read): the input is written to a temporary file
 * (the reader works on paths, with pread), opened, and every record of
 * every chunk is read, decoded and checked the way a consumer would use it.
 * Seeds: tests/fuzz/lcpp_seeds/ (copy them; libFuzzer writes into its
 * corpus folders). */
#include "store/lcpp_base.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char tmp_path[64];
static volatile uint8_t fuzz_sink;

/* A failure must carry its status and a message (fuzz_common.h's check;
 * that header's tensor helpers do not apply to this reader). */
static void fuzz_check_failure(kld_status st, const kld_error *err) {
    if (st == KLD_OK) return;
    if (err->status != st || err->msg[0] == '\0') {
        fprintf(stderr, "failure %d without a matching error record: '%s'\n", (int)st, err->msg);
        abort();
    }
}

static void remove_tmp(void) { unlink(tmp_path); }

static void write_input(const uint8_t *data, size_t size) {
    if (!tmp_path[0]) {
        snprintf(tmp_path, sizeof tmp_path, "/tmp/fuzz_lcpp_base.%ld.kld", (long)getpid());
        atexit(remove_tmp);
    }
    FILE *f = fopen(tmp_path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    write_input(data, size);
    kld_lcpp_base *b = NULL;
    kld_error err = {0};
    /* the last byte chooses whether an n_vocab is expected (and which) */
    int32_t expect = size && (data[size - 1] & 1) ? (int32_t)(data[size - 1] >> 1) : 0;
    kld_status st = kld_lcpp_base_open(tmp_path, expect, &b, &err);
    fuzz_check_failure(st, &err);
    if (st != KLD_OK) return 0;
    const kld_lcpp_base_info *in = kld_lcpp_base_info_of(b);
    if (in->n_ctx < 4 || in->n_vocab < 2 || in->n_chunk < 1 ||
        in->records_per_chunk != in->n_ctx - 1 - in->n_ctx / 2)
        abort();
    float *lp = malloc((size_t)in->n_vocab * sizeof *lp);
    uint16_t *codes = malloc((size_t)in->n_vocab * sizeof *codes);
    if (!lp || !codes) abort();
    for (int64_t c = 0; c < in->n_chunk; c++) {
        const int32_t *t = kld_lcpp_base_tokens(b, c);
        for (int32_t j = 0; j < in->n_ctx; j++)
            if (t[j] < 0 || t[j] >= in->n_vocab) abort();
        for (int64_t k = 0; k < in->records_per_chunk; k++) {
            float mlp;
            st = kld_lcpp_base_read(b, c, k, 1, lp, codes, &mlp, &err);
            fuzz_check_failure(st, &err);
            if (st != KLD_OK) goto done;
            /* a record that passed validation decodes to finite log-probs
             * no higher than 1e-3 (the reader's slack) */
            for (int32_t i = 0; i < in->n_vocab; i++) {
                if (!isfinite(lp[i]) || lp[i] > 1e-3f || lp[i] < mlp) abort();
                fuzz_sink ^= (uint8_t)codes[i];
            }
        }
    }
    /* reads outside a chunk fail cleanly */
    if (kld_lcpp_base_read(b, 0, in->records_per_chunk, 1, lp, NULL, NULL, &err) != KLD_ERR_ARG)
        abort();
done:
    free(codes);
    free(lp);
    kld_lcpp_base_close(b);
    return 0;
}
