/* fuzz_gguf.c — libFuzzer harness for the GGUF reader (kld_gguf_parse):
 * parses the input and reads every key, value, array element and tensor
 * span a consumer could reach. */
#include "io/gguf.h"
#include "fuzz_common.h"

static void touch_value(const kld_gguf_value *v) {
    if (v->type == KLD_GGUF_STRING) {
        if (v->v.s.len) fuzz_sink ^= (uint8_t)v->v.s.ptr[v->v.s.len - 1];
        return;
    }
    if (v->type != KLD_GGUF_ARRAY || v->v.arr.n == 0) return;
    uint64_t last = v->v.arr.n - 1;
    int64_t iv;
    double fv;
    if (kld_gguf_arr_int(v, last, &iv)) fuzz_sink ^= (uint8_t)iv;
    if (kld_gguf_arr_float(v, last, &fv)) fuzz_sink ^= (uint8_t)(fv != fv);
    if (v->v.arr.strs && v->v.arr.strs[last].len)
        fuzz_sink ^= (uint8_t)v->v.arr.strs[last].ptr[v->v.arr.strs[last].len - 1];
    if (v->v.arr.items) touch_value(&v->v.arr.items[last]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    kld_gguf *g = NULL;
    kld_error err = {0};
    kld_status st = kld_gguf_parse(data, size, "fuzz.gguf", &g, &err);
    fuzz_check_failure(st, &err);
    if (st != KLD_OK) return 0;
    for (uint64_t i = 0; i < g->n_kv; i++) {
        fuzz_sink ^= (uint8_t)g->kv[i].key.ptr[g->kv[i].key.len - 1];
        touch_value(&g->kv[i].value);
    }
    fuzz_touch_tensors(g->tensors, g->n_tensors);
    int64_t iv;
    if (kld_gguf_get_int(g, "general.alignment", &iv)) fuzz_sink ^= (uint8_t)iv;
    kld_gguf_close(g);
    return 0;
}
