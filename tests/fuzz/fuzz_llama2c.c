/* fuzz_llama2c.c — libFuzzer harness for the llama2.c readers: the input
 * is parsed as a model.bin, and as a tokenizer.bin for 1..64 tokens (the
 * count taken from the input's last byte). */
#include "io/llama2c.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    kld_llama2c *m = NULL;
    kld_error err = {0};
    kld_status st = kld_llama2c_parse(data, size, "fuzz.bin", &m, &err);
    fuzz_check_failure(st, &err);
    if (st == KLD_OK) {
        fuzz_touch_tensors(m->tensors, m->n_tensors);
        if (!kld_llama2c_detect(data, size)) abort();
        kld_llama2c_close(m);
    }
    if (size == 0) return 0;
    int32_t n_vocab = 1 + data[size - 1] % 64;
    kld_llama2c_vocab *v = NULL;
    st = kld_llama2c_vocab_parse(data, size - 1, "fuzz-tok.bin", n_vocab, &v, &err);
    fuzz_check_failure(st, &err);
    if (st == KLD_OK) {
        for (int32_t i = 0; i < v->n_vocab; i++) {
            if (v->pieces[i][v->lengths[i]] != '\0') abort();
            fuzz_sink ^= (uint8_t)(v->scores[i] != v->scores[i]); /* NaN must be refused */
            if (v->scores[i] != v->scores[i]) abort();
        }
        kld_llama2c_vocab_free(v);
    }
    return 0;
}
