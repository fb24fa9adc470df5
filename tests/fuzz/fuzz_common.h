/* fuzz_common.h — what every harness does with a parsed file: touch each
 * tensor's first and last byte and element count the way a consumer would
 * (so ASan sees any span outside the input), and insist that a failure
 * carries a status and a message. */
#ifndef KLD_FUZZ_COMMON_H
#define KLD_FUZZ_COMMON_H

#include "tensor/tensor.h"

#include <stdio.h>
#include <stdlib.h>

static volatile uint8_t fuzz_sink;

static inline void fuzz_touch_tensors(const kld_tensor *t, uint64_t n) {
    for (uint64_t i = 0; i < n; i++) {
        fuzz_sink ^= (uint8_t)t[i].name[0];
        fuzz_sink ^= (uint8_t)kld_tensor_nelements(&t[i]);
        if (t[i].nbytes) {
            const uint8_t *p = t[i].data;
            fuzz_sink ^= p[0];
            fuzz_sink ^= p[t[i].nbytes - 1];
        }
    }
}

static inline void fuzz_check_failure(kld_status st, const kld_error *err) {
    if (st == KLD_OK) return;
    if (err->status != st || err->msg[0] == '\0') {
        fprintf(stderr, "failure %d without a matching error record: '%s'\n", (int)st, err->msg);
        abort();
    }
}

#endif
