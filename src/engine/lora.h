/* lora.h — LoRA adapters inside the engine (internal): the two file forms
 * (lora_read.c: llama.cpp's GGUF adapter, PEFT's adapter_config.json +
 * adapter_model.safetensors), an adapter bound to a model's weights
 * (lora.c), and the low-rank side product of a weight matmul
 * y += s·B(A x), with s = SCALE·alpha/r (alpha 0 or absent: s = SCALE,
 * llama.cpp's rule in llama_adapter_lora_weight::get_scale). */
#ifndef KLD_ENGINE_LORA_H
#define KLD_ENGINE_LORA_H

#include "engine/engine.h"
#include "io/gguf.h"
#include "io/safetensors.h"

#include <jansson.h>

/* One A/B pair as the file stores it: a [n_in, r] and b [r, n_out] (ggml
 * order, both forms: PEFT's torch shapes (r, in) and (out, r) read the same). */
typedef struct kld_lora_entry {
    char base[160];             /* the adapted weight: GGUF name, or HF name for PEFT */
    const kld_tensor *a, *b;
} kld_lora_entry;

typedef struct kld_lora_file {
    char *path;                 /* the tensor file (.gguf or adapter_model.safetensors) */
    char *config_path;          /* PEFT: adapter_config.json; NULL for GGUF */
    bool peft;
    bool has_alpha;
    double alpha;               /* 0 when absent */
    int64_t r;                  /* PEFT "r"; 0 for GGUF (the rank is b's ne[0]) */
    char arch[64];              /* GGUF general.architecture ("" when absent) */
    json_t *config;             /* PEFT config object */
    kld_gguf *gguf;
    kld_safetensors *st;
    size_t n;
    kld_lora_entry *e;
} kld_lora_file;

/* PATH is a GGUF adapter, a PEFT folder, or either PEFT file inside one. */
kld_status kld_lora_file_open(const char *path, kld_lora_file *f, kld_error *err);
void kld_lora_file_close(kld_lora_file *f);

/* One adapted weight, A and B converted to float32 (B's rows in the
 * model's q/k layout). */
typedef struct kld_lora_pair {
    const kld_tensor *w;        /* the bound weight */
    char name[96];              /* its GGUF name */
    kld_tensor a, b;            /* F32, owned data: a [n_in, rank], b [rank, n_out] */
    float scale;                /* SCALE·alpha/rank, as llama.cpp computes it in float */
} kld_lora_pair;

typedef struct kld_lora {
    char *spec;                 /* "PATH" or "PATH:SCALE" as given */
    char *path;
    char *file;                 /* the tensor file (kld_lora_file.path) */
    char *config_path;          /* PEFT: adapter_config.json; NULL for GGUF */
    bool peft;
    uint64_t stored_bytes;      /* A and B as stored in the file */
    uint64_t n_params;
    float user_scale;
    double alpha;
    bool has_alpha;
    size_t n;
    kld_lora_pair *pairs;
    int64_t max_rank, max_out;
} kld_lora;

/* Reads PATH and binds every pair to a weight of m (after any policy):
 * unknown base tensors, shape mismatches and rank 0 are errors naming the
 * file and the tensor or key. */
kld_status kld_lora_open(const kld_model *m, const char *path, float scale, kld_lora **out,
                         kld_error *err);
void kld_lora_free(kld_lora *l);

/* B's rows between rotate-half (HF) and interleaved (GGUF) order, in
 * place (b: F32, rank values per row); false when out of memory. */
bool kld_lora_permute_b(kld_tensor *b, int64_t n_head, bool to_gguf);

/* "PATH[:SCALE]": a trailing ':' + number is the scale (default 1). */
kld_status kld_lora_spec_split(const char *spec, char *path, size_t cap, float *scale,
                               kld_error *err);

/* Floats of side-product scratch the session's adapters need for chunks
 * of max_chunk rows. */
uint64_t kld_lora_scratch_floats(const kld_lora *const *ls, int n, int64_t max_chunk);

/* C[i][j] += s·(B (A x_i))[j] for every session adapter that adapts W
 * (x_i = A[i·lda ..], the matmul's unrounded inputs). */
void kld_lora_apply(kld_session *s, const kld_tensor *W, int64_t n, const float *A, int64_t lda,
                    float *C, int64_t ldc);

#endif
