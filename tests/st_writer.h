/* st_writer.h — test-only safetensors writer shared by the Hugging Face
 * copies of synthesized GGUFs (synth_*_hf.c): tensors added one by one
 * (owned buffers, torch shapes), then dir/model.safetensors in one go; and
 * the config.json edits their tests apply, and the key check of the GGUF a
 * checkpoint converts back to. */
#ifndef KLD_TEST_ST_WRITER_H
#define KLD_TEST_ST_WRITER_H

#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "tensor/tensor.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct st_writer {
    json_t *header;
    void **data;   /* owned tensor bytes, in file order */
    size_t *bytes;
    int n, cap;
    uint64_t off;
} st_writer;

void st_init(st_writer *w);
/* name with torch shape dims[0..nd), safetensors dtype ("F32", "BF16", "U8" …) holding p (owned). */
void st_put(st_writer *w, const char *name, const char *dtype, int nd, const int64_t *dims, void *p, size_t bytes);
/* The same for float32 values f (owned). */
void st_put_f32(st_writer *w, const char *name, int nd, const int64_t *dims, float *f);
/* Writes dir/model.safetensors and frees everything; false when the file cannot be written. */
bool st_write(st_writer *w, const char *dir);
/* Elements [from, from + n) of t as float32 (malloc'd). */
float *st_floats(const kld_tensor *t, int64_t from, int64_t n);

/* The Hugging Face names of a DeepSeek-style MoE decoder (DeepSeek V2 / V3, GLM-4.5):
 * `map` pairs each GGUF per-layer suffix with its HF suffix (gguf-py's tensor_mapping.py);
 * `family` names the copy in messages. */
typedef struct st_moe_names {
    const char *const (*map)[2];
    size_t n;
    const char *family;
} st_moe_names;
/* Puts GGUF tensor t under its HF name: token_embd, output_norm and output as
 * model.embed_tokens, model.norm and lm_head; blk.N.<suffix> as model.layers.<layer>.<HF suffix>
 * (layer = N, or `layer` when it is >= 0), exp_probs_b as mlp.gate.e_score_correction_bias, and
 * the 3-D ffn_{gate,up,down}_exps one tensor per expert. Leaves out the HF tensor drop (or
 * NULL). False, with a message, when t has no HF name. */
bool st_put_moe_tensor(st_writer *w, const kld_tensor *t, int layer, const st_moe_names *names, const char *drop);

/* A config.json edit: key set to the JSON text json, or deleted when json is NULL. */
typedef struct hf_edit {
    const char *key, *json;
} hf_edit;
/* Applies the edits ed (ended by a NULL key; ed NULL: none) to c, then writes dir/config.json
 * (reals at 17 digits) and releases c. */
bool hf_config_write(json_t *c, const hf_edit *ed, const char *dir);

/* Key `key` has the same value in a and b (integers, reals, integer arrays), or is in neither. */
bool hf_same_key(const kld_gguf *a, const kld_gguf *b, const char *key);

/* A GGUF writer holding every key of g (NULL when out of memory): g rewritten tensor by tensor. */
kld_gguf_writer *gguf_writer_with_keys(const kld_gguf *g);

#endif
