/* fuzz_safetensors.c — libFuzzer harness for the safetensors reader
 * (kld_safetensors_parse, the header JSON included). */
#include "io/safetensors.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    kld_safetensors *st = NULL;
    kld_error err = {0};
    kld_status s = kld_safetensors_parse(data, size, "fuzz.safetensors", &st, &err);
    fuzz_check_failure(s, &err);
    if (s != KLD_OK) return 0;
    fuzz_touch_tensors(st->tensors, st->n_tensors);
    for (size_t i = 0; i < st->n_tensors; i++) {
        fuzz_sink ^= (uint8_t)st->tensor_dtype[i][0];
        if (kld_safetensors_find(st, st->tensors[i].name) == NULL) abort();
    }
    kld_safetensors_close(st);
    return 0;
}
