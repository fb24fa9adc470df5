/* fuzz_lora.c — libFuzzer harness for the two LoRA adapter forms
 * (engine/lora_read.c: kld_lora_file_open). First input byte even: the rest
 * is a llama.cpp GGUF adapter. Odd: a PEFT folder, the rest being a uint16
 * little-endian length, that many bytes of adapter_config.json, and
 * adapter_model.safetensors after them. An adapter that opens has every
 * A/B tensor touched at both ends. Seeds: tests/fuzz/lora_seeds/ (written
 * by test_bad_readers). */
#include "engine/lora.h"
#include "fuzz_common.h"
#include "fuzz_scratch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const char *dir = fuzz_scratch_dir("lora");
    char path[160], st_path[160];
    if (!(data[0] & 1)) {
        snprintf(path, sizeof path, "%s/adapter.gguf", dir);
        fuzz_write(path, data + 1, size - 1);
    } else {
        if (size < 3) return 0;
        size_t n = (size_t)data[1] | (size_t)data[2] << 8;
        if (n > size - 3) n = size - 3;
        snprintf(path, sizeof path, "%s/adapter_config.json", dir);
        fuzz_write(path, data + 3, n);
        snprintf(st_path, sizeof st_path, "%s/adapter_model.safetensors", dir);
        fuzz_write(st_path, data + 3 + n, size - 3 - n);
        snprintf(path, sizeof path, "%s", dir);
    }
    kld_lora_file f;
    kld_error err = {0};
    kld_status st = kld_lora_file_open(path, &f, &err);
    fuzz_check_failure(st, &err);
    if (st != KLD_OK) return 0;
    for (size_t i = 0; i < f.n; i++) {
        if (!f.e[i].a || !f.e[i].b || !f.e[i].base[0]) abort();
        fuzz_touch_tensors(f.e[i].a, 1);
        fuzz_touch_tensors(f.e[i].b, 1);
    }
    kld_lora_file_close(&f);
    return 0;
}
