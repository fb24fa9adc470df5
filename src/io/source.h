/* source.h — opens any supported model path (a .gguf, a .safetensors, a
 * Hugging Face directory, a llama2.c checkpoint) into one tensor table plus
 * the format-specific handles the model layer reads hyper-parameters from. */
#ifndef KLD_IO_SOURCE_H
#define KLD_IO_SOURCE_H

#include "io/gguf.h"
#include "io/llama2c.h"
#include "io/safetensors.h"

#include <jansson.h>

typedef enum kld_format {
    KLD_FORMAT_GGUF,
    KLD_FORMAT_SAFETENSORS,
    KLD_FORMAT_LLAMA2C
} kld_format;

typedef struct kld_source {
    kld_format format;
    char *path;               /* as given */
    char *dir;                /* folder holding the model files (no trailing '/') */
    uint32_t version;         /* GGUF version; 0 for the other formats */
    size_t n_tensors;
    const kld_tensor *tensors; /* borrowed from the handle below */
    uint64_t file_bytes;      /* total size of the files read */
    kld_gguf *gguf;           /* KLD_FORMAT_GGUF */
    kld_safetensors *st;      /* KLD_FORMAT_SAFETENSORS */
    json_t *hf_config;        /* config.json beside safetensors (a JSON object), or NULL */
    char *hf_tokenizer_path;  /* tokenizer.json beside safetensors, or NULL */
    kld_llama2c *l2c;         /* KLD_FORMAT_LLAMA2C */
    char *l2c_tokenizer_path; /* tokenizer.bin beside model.bin, or NULL */
} kld_source;

/* Detection: a file starting with the GGUF magic (or named .gguf) is GGUF;
 * .safetensors / .safetensors.index.json names, or a small little-endian
 * length followed by '{', are safetensors; a .bin name, or a header whose
 * implied size is exactly the file's, is llama2.c. A folder must hold
 * config.json + model.safetensors (preferred) or model.safetensors.index.json,
 * or model.bin (+ tokenizer.bin). A bare .safetensors picks up config.json
 * and tokenizer.json beside it when present. Anything else fails with
 * KLD_ERR_FORMAT "unrecognised model format"; a missing path is KLD_ERR_IO. */
kld_status kld_source_open(const char *path, kld_source **out, kld_error *err);
void kld_source_close(kld_source *src);

const kld_tensor *kld_source_find(const kld_source *src, const char *name);
/* Whether the n bytes at p lie in one of the source's file mappings
 * (read-only and private: pages released from them are read again from
 * the file when touched). */
bool kld_source_maps(const kld_source *src, const void *p, uint64_t n);
const char *kld_format_name(kld_format f);

#endif
