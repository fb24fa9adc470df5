/* fuzz_dump.c — libFuzzer harness for the dump reader (kld_dump_open +
 * kld_dump_read of every record). The input is a dump directory packed as
 * documented in dump_container.h (uint16-length-prefixed manifest.json,
 * tokens.bin, seq-0.bin, seq-0.ext.bin, seq-1.bin, seq-1.ext.bin; v1/v2 top-k
 * records or v3 hidden states, read with kld_dump_read_hidden); it is
 * unpacked into a per-process directory under /tmp, removed at exit.
 * Seeds: tests/fuzz/dump_seeds/ (valid dumps; copy them, libFuzzer writes
 * into its corpus folders). The vocabulary limit is the manifest's for
 * inputs of odd length and 64 for even ones, so both bounds get exercised. */
#include "dump_container.h"
#include "fuzz_common.h"
#include "fuzz_scratch.h"
#include "store/dump.h"

#include <math.h>

/* Format 3: every sequence's hidden states and sidecar, whole and one
 * record at a time; what the reader hands out is finite. */
static void read_hidden(kld_dump *d, const kld_dump_meta *m) {
    size_t n = (size_t)m->positions_per_seq, e = (size_t)m->n_embd;
    float *h = malloc(n * e * sizeof *h);
    double *lse = malloc(n * sizeof *lse), *logp = malloc(n * sizeof *logp);
    int32_t *am = malloc(n * sizeof *am);
    if (!h || !lse || !logp || !am) abort();
    kld_error err = {0};
    for (int64_t s = 0; s < m->n_seqs; s++) {
        kld_status st = kld_dump_read_hidden(d, s, 0, (int64_t)n, h, (s & 1) ? NULL : lse,
                                             (s & 1) ? NULL : logp, (s & 1) ? NULL : am, &err);
        fuzz_check_failure(st, &err);
        if (st == KLD_OK)
            for (size_t i = 0; i < n * e; i++)
                if (!isfinite(h[i])) abort();
        st = kld_dump_read_hidden(d, s, (int64_t)n - 1, 1, h, lse, logp, am, &err);
        fuzz_check_failure(st, &err);
    }
    free(h);
    free(lse);
    free(logp);
    free(am);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *fuzz_dir = fuzz_scratch_dir("dump");
    if (!dc_unpack(data, size, fuzz_dir)) abort();
    kld_dump *d = NULL;
    kld_error err = {0};
    int64_t limit = (size & 1) ? 0 : 64;
    kld_status st = kld_dump_open(fuzz_dir, limit, &d, &err);
    fuzz_check_failure(st, &err);
    if (st != KLD_OK) return 0;
    const kld_dump_meta *m = kld_dump_meta_of(d);
    fuzz_sink ^= (uint8_t)m->model[0];
    if (m->format_version == 3) {
        read_hidden(d, m);
        kld_dump_close(d);
        return 0;
    }
    /* the files exist at their exact sizes, so these products are small */
    size_t n = (size_t)m->positions_per_seq, k = (size_t)m->top_k;
    int32_t *idx = malloc(n * k * sizeof *idx), *am = malloc(n * sizeof *am);
    float *val = malloc(n * k * sizeof *val), *lse = malloc(n * sizeof *lse);
    double *lse64 = malloc(n * sizeof *lse64), *logp = malloc(n * sizeof *logp);
    if (!idx || !am || !val || !lse || !lse64 || !logp) abort();
    kld_dump_rows rows = {idx, val, lse, lse64, logp, am};
    kld_dump_rows bare = {idx, val, lse, NULL, NULL, NULL};
    for (int64_t s = 0; s < m->n_seqs; s++) {
        const int32_t *tok = kld_dump_tokens(d, s);
        fuzz_sink ^= (uint8_t)tok[m->ctx_len - 1];
        st = kld_dump_read(d, s, 0, (int64_t)n, (s & 1) ? &bare : &rows, &err);
        fuzz_check_failure(st, &err);
        if (st != KLD_OK) continue;
        /* what a reader promises about a record it hands out */
        for (size_t r = 0; r < n; r++) {
            if (!isfinite(lse[r])) abort();
            for (size_t j = 0; j < k; j++)
                if (idx[r * k + j] < 0 || !isfinite(val[r * k + j])) abort();
        }
        st = kld_dump_read(d, s, (int64_t)n - 1, 1, &rows, &err);
        fuzz_check_failure(st, &err);
    }
    free(idx);
    free(am);
    free(val);
    free(lse);
    free(lse64);
    free(logp);
    kld_dump_close(d);
    return 0;
}
