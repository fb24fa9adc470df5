/* synth.h — seeded random-weight model synthesis: a SentencePiece-style BPE
 * vocabulary learned from text, and GGUF models of a chosen shape whose
 * outputs are peaked like a trained model's. Nothing is downloaded. */
#ifndef KLD_SYNTH_SYNTH_H
#define KLD_SYNTH_SYNTH_H

#include "common/common.h"

/* Deterministic generator (xoshiro256**) seeded through splitmix64. */
typedef struct kld_rng {
    uint64_t s[4];
} kld_rng;

void kld_rng_seed(kld_rng *r, uint64_t seed);
uint64_t kld_rng_next(kld_rng *r);
double kld_rng_uniform(kld_rng *r);  /* [0, 1) */
double kld_rng_gaussian(kld_rng *r); /* N(0, 1) */

/* A SentencePiece-BPE vocabulary in llama.cpp's "llama" tokenizer layout:
 * 0 <unk>, 1 <s>, 2 </s>, then the 256 byte tokens <0x00>..<0xFF>, then
 * learned pieces ('▁' marks a preceding space) with descending scores,
 * then the characters, then unused padding. */
typedef struct kld_synth_vocab {
    int32_t n;
    char **pieces;
    float *scores;
    int32_t *types; /* llama.cpp token types: 1 normal, 2 unknown, 3 control, 6 byte */
} kld_synth_vocab;

/* Learns up to n_target pieces from text (one document per line, '#'
 * comment lines skipped), stopping early when no pair occurs twice; the
 * rest of the n_target ids are "<unusedN>" tokens of type 5 (unused). */
kld_status kld_synth_vocab_train(const char *text, size_t len, int32_t n_target,
                                 kld_synth_vocab *out, kld_error *err);
void kld_synth_vocab_free(kld_synth_vocab *v);

typedef struct kld_synth_options {
    const char *arch;   /* "llama" (others may follow) */
    int64_t n_embd, n_layer, n_head, n_head_kv, n_ff, n_ctx;
    int32_t n_vocab;    /* target; the learned vocabulary may be smaller */
    uint64_t seed;
    const char *type;   /* weight type: "f32", "f16", "bf16", a block type, or "q4_K_M" */
    const char *name;   /* general.name */
    int n_threads;      /* quantization threads; <= 0: all cores (the file is the same for any) */
} kld_synth_options;

/* Fills the defaults of the built-in demo model. */
void kld_synth_defaults(kld_synth_options *o);

/* Writes a GGUF model; the vocabulary is learned from the built-in corpus. */
kld_status kld_synth_write(const kld_synth_options *o, const char *path, kld_error *err);

#endif
