/* lcpp_converter_gen.c — writes the Hugging Face checkpoints that
 * llama.cpp's own converter (convert_hf_to_gguf.py) turns into the GGUFs of
 * tests/data/lcpp-oracle/converter. Not a test: run by hand when that data is
 * remade (tests/data/lcpp-oracle/converter/README.md). Each checkpoint is the
 * HF copy of the family's oracle model (lcpp_converted_hf.c), so the
 * converted file is the same model as the oracle GGUF, written by llama.cpp
 * instead of by us.
 *
 * usage: lcpp_converter_gen OUT_DIR   (writes OUT_DIR/<name>/ and OUT_DIR/<name>.synth.gguf) */
#include "lcpp_converted_hf.h"

#include <stdio.h>
#include <sys/stat.h>

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: lcpp_converter_gen OUT_DIR\n");
        return 2;
    }
    for (int i = 0; i < LCPP_N_CONVERTED; i++) {
        const lcpp_family *f = lcpp_family_named(lcpp_converted[i].family);
        if (!f) {
            fprintf(stderr, "lcpp_converter_gen: no oracle family %s\n", lcpp_converted[i].family);
            return 1;
        }
        char gguf[4096], dir[4096];
        snprintf(gguf, sizeof gguf, "%s/%s.synth.gguf", argv[1], f->name);
        snprintf(dir, sizeof dir, "%s/%s", argv[1], f->name);
        struct stat st;
        if (mkdir(dir, 0755) != 0 && (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))) {
            perror(dir);
            return 1;
        }
        synth_shape s;
        if (!lcpp_converted_write(f, gguf, dir, &s)) return 1;
        printf("%s\n", dir);
    }
    return 0;
}
