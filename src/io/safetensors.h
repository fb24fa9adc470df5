/* safetensors.h — Hugging Face safetensors reader: one file or a sharded
 * set described by model.safetensors.index.json. Validates like the
 * reference library and more (see safetensors.c). */
#ifndef KLD_IO_SAFETENSORS_H
#define KLD_IO_SAFETENSORS_H

#include "io/mapped_file.h"
#include "tensor/tensor.h"

/* kld_tensor.type of a dtype with no kld_type counterpart (U8, BOOL,
 * F8_E4M3, U32, ...): such tensors are listed, never loaded as weights. */
#define KLD_SAFETENSORS_NO_TYPE 0xFFFFFFFFu

/* The header length limit of the reference library (100 MB). */
#define KLD_SAFETENSORS_MAX_HEADER 100000000ull

typedef struct kld_safetensors {
    size_t n_files;
    kld_mapped_file *files; /* shards in weight_map order; none after kld_safetensors_parse */
    size_t n_tensors;
    kld_tensor *tensors;    /* per file in data-offset order; F32/F16/BF16/F64/I8..I64 map to
                               kld_type ids, other dtypes to KLD_SAFETENSORS_NO_TYPE. A scalar
                               (shape []) has n_dims 0. */
    const char **tensor_dtype; /* the dtype as written ("F16", "I64", ...): static strings */
    uint32_t *tensor_file;  /* index into files of each tensor (0 after _parse) */
} kld_safetensors;

/* One .safetensors file. */
kld_status kld_safetensors_open(const char *path, kld_safetensors **out, kld_error *err);
/* A model.safetensors.index.json: opens every shard it names (relative to
 * the index's folder) and checks the weight_map against the shards: every
 * listed tensor is in its shard, every shard tensor is listed, no tensor
 * appears in two shards. */
kld_status kld_safetensors_open_index(const char *index_path, kld_safetensors **out,
                                      kld_error *err);
/* Parses one in-memory file (the fuzzer's entry point); buf must outlive st. */
kld_status kld_safetensors_parse(const uint8_t *buf, uint64_t size, const char *name,
                                 kld_safetensors **out, kld_error *err);
void kld_safetensors_close(kld_safetensors *st);

const kld_tensor *kld_safetensors_find(const kld_safetensors *st, const char *name);

/* Size in bits of one element of a safetensors dtype ("F16" -> 16), or 0
 * for a dtype string the format does not define. */
unsigned kld_safetensors_dtype_bits(const char *dtype);

/* For hf_index.c: validates buf (shard `file_idx` of st, named `name` in
 * messages) and appends its tensors to st. */
kld_status kld_safetensors_parse_into(kld_safetensors *st, const uint8_t *buf, uint64_t size,
                                      const char *name, uint32_t file_idx, kld_error *err);

#endif
