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
#define LCPP_C392E50 "c392e5094deaf2d1a7c18683214f007fad3fe42b"
#define LCPP_2026 "d32676d77426540327835040d5d3279728f0b4c8" /* unslothai/llama.cpp, 2026-08-18 */

typedef struct lcpp_family {
    const char *name;     /* file stem: tests/data/lcpp-oracle/<name>.gguf */
    const char *what;     /* the semantics the file exercises */
    const char *lcpp;     /* the llama.cpp commit whose logits are stored */
} lcpp_family;

#define LCPP_N_FAMILIES 27
extern const lcpp_family lcpp_families[LCPP_N_FAMILIES];

/* The synthesizer's shape of family f. */
void lcpp_family_shape(const lcpp_family *f, synth_shape *s);
/* The family of that name, or NULL. */
const lcpp_family *lcpp_family_named(const char *name);

/* GGUFs written by llama.cpp's own converter (convert_hf_to_gguf.py of
 * LCPP_2026) from the Hugging Face copy of an oracle family's model
 * (lcpp_converter_gen.c): tests/data/lcpp-oracle/converter/<family>.gguf
 * and llama.cpp's logits of it, <family>.lcpp.f32. */
typedef struct lcpp_converted_model {
    const char *family;   /* the oracle family whose model was converted */
    const char *hf_arch;  /* the checkpoint's "architectures" entry the converter dispatched on */
} lcpp_converted_model;

#define LCPP_N_CONVERTED 7
extern const lcpp_converted_model lcpp_converted[LCPP_N_CONVERTED];

#endif
