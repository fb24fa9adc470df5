/* lcpp_oracle_families.h — the model families of tests/data/lcpp-oracle:
 * tiny f32 (one bf16) GGUFs synthesized by test_synth_models.c, each
 * evaluated by llama.cpp c392e50 over the same token ids. The generator
 * (lcpp_oracle_gen.c) and the test (test_lcpp_oracle.c) share this table. */
#ifndef KLD_TEST_LCPP_ORACLE_FAMILIES_H
#define KLD_TEST_LCPP_ORACLE_FAMILIES_H

#include "test_forward_models.h"

#define LCPP_N_IDS 80     /* longer than the sliding windows (16, 24) */
#define LCPP_N_VOCAB 128
#define LCPP_IDS_SEED 20261201

typedef struct lcpp_family {
    const char *name;     /* file stem: tests/data/lcpp-oracle/<name>.gguf */
    const char *what;     /* the semantics the file exercises */
} lcpp_family;

#define LCPP_N_FAMILIES 10
extern const lcpp_family lcpp_families[LCPP_N_FAMILIES];

/* The synthesizer's shape of family f. */
void lcpp_family_shape(const lcpp_family *f, synth_shape *s);

#endif
