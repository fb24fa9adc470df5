/* lora_fixture.h — a seeded LoRA adapter for the synthesized test models
 * (lora_fixture.c): its two file forms and the merged-weight deltas. */
#ifndef KLD_TESTS_LORA_FIXTURE_H
#define KLD_TESTS_LORA_FIXTURE_H

#include "test_forward_models.h"

#include <stdbool.h>
#include <stdint.h>

#define RANK 4
#define MAX_T 32

typedef struct lora_t {
    char name[64];     /* base weight, GGUF name */
    int64_t in, out, r;
    float *a, *b;      /* a [r][in], b [out][r], b's rows in GGUF order */
} lora_t;

typedef struct adapter {
    int n;
    lora_t t[MAX_T];
} adapter;

typedef struct gguf_opts {
    const char *general_type, *arch;
    bool no_alpha;
    double alpha;
} gguf_opts;

/* Every attention/FFN matrix of every layer and output.weight, rank RANK,
 * A uniform in ±0.3, B in ±0.05 (0 with zero_b). */
void make_adapter(adapter *ad, const synth_shape *sh, uint64_t seed, bool zero_b);
/* One more matrix of rank RANK for the weight `name` [out][in], drawn as make_adapter's. */
void adapter_add(adapter *ad, const char *name, int64_t in, int64_t out, bool zero_b);
void free_adapter(adapter *ad);
/* llama.cpp's GGUF adapter (general.type adapter, adapter.lora.alpha). */
void write_gguf_adapter(const adapter *ad, const gguf_opts *o, const char *path);
/* Malformed GGUF adapters at path (ad restored afterwards): blk.1.attn_v's
 * A one column short (t[9]); t[0] renamed to blk.7.attn_q.weight, a tensor
 * the 2-layer test models lack. */
void write_bad_shape_adapter(adapter *ad, const char *path);
void write_unknown_tensor_adapter(adapter *ad, const char *path);
/* A PEFT folder: adapter_model.safetensors (q/k rows of B in rotate-half
 * order) + adapter_config.json holding `config`. */
void write_peft(const adapter *ad, const synth_shape *sh, const char *config, const char *folder);
/* r 4, lora_alpha 8, every module of make_adapter in target_modules. */
extern const char peft_config[];
/* deltas[i] = scale·B·A of ad->t[i] in double ([out][in], malloc'd), names[i] its weight. */
void lora_ref_deltas(const adapter *ad, double scale, const char **names, double **deltas);

#endif
