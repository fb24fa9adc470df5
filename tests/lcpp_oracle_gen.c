/* lcpp_oracle_gen.c — writes the tiny per-family GGUFs of
 * tests/data/lcpp-oracle (with test_synth_models.c's synthesizer) and the
 * token ids they are evaluated on. Not a test: run by hand when the oracle
 * data is remade (tests/data/lcpp-oracle/README.md); llama.cpp's logits of
 * the files then come from a separate program linked against llama.cpp.
 *
 * usage: lcpp_oracle_gen OUT_DIR */
#include "lcpp_oracle_families.h"
#include "test_forward_models.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: lcpp_oracle_gen OUT_DIR\n");
        return 2;
    }
    char path[4096];
    for (int i = 0; i < LCPP_N_FAMILIES; i++) {
        synth_shape s;
        lcpp_family_shape(&lcpp_families[i], &s);
        snprintf(path, sizeof path, "%s/%s.gguf", argv[1], lcpp_families[i].name);
        if (!synth_write_gguf(&s, path)) return 1;
        printf("%s\n", path);
    }
    int32_t ids[LCPP_N_IDS];
    tf_make_ids(ids, LCPP_N_IDS, LCPP_N_VOCAB, LCPP_IDS_SEED);
    snprintf(path, sizeof path, "%s/ids.i32", argv[1]);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(ids, sizeof ids[0], LCPP_N_IDS, f) != LCPP_N_IDS || fclose(f) != 0) {
        perror(path);
        return 1;
    }
    printf("%s\n", path);
    return 0;
}
