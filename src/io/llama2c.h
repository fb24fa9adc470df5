/* llama2c.h — llama2.c checkpoints (model.bin: 7 int32 header, float32
 * weights; negative vocab_size = untied classifier) and llama2.c
 * tokenizer.bin files. Weights become GGUF-named tensors so the model
 * layer sees one naming scheme. */
#ifndef KLD_IO_LLAMA2C_H
#define KLD_IO_LLAMA2C_H

#include "io/mapped_file.h"
#include "tensor/tensor.h"

typedef struct kld_llama2c_config {
    int32_t dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
    bool shared_classifier; /* vocab_size > 0 in the file; vocab_size here is |vocab_size| */
} kld_llama2c_config;

typedef struct kld_llama2c {
    kld_mapped_file file;
    kld_llama2c_config cfg;
    size_t n_tensors;
    kld_tensor *tensors; /* token_embd.weight, blk.N.{attn_norm, attn_q, attn_k, attn_v,
                            attn_output, ffn_norm, ffn_gate, ffn_down, ffn_up}.weight,
                            output_norm.weight, output.weight (unshared only): F32, ggml
                            dim order. q/k rows are in llama2.c's interleaved-pair RoPE
                            layout, the same as GGUF llama (no permutation needed). */
} kld_llama2c;

kld_status kld_llama2c_open(const char *path, kld_llama2c **out, kld_error *err);
kld_status kld_llama2c_parse(const uint8_t *buf, uint64_t size, const char *name,
                             kld_llama2c **out, kld_error *err);
void kld_llama2c_close(kld_llama2c *m);

/* True when buf starts with a valid llama2.c header whose implied size is
 * exactly `size` (format detection for files without a .bin name). */
bool kld_llama2c_detect(const uint8_t *buf, uint64_t size);

/* llama2.c tokenizer.bin: int32 max_token_length, then per token float32
 * score, int32 len, len bytes. */
typedef struct kld_llama2c_vocab {
    int32_t n_vocab;
    int32_t max_token_length;
    char **pieces;     /* NUL-terminated copies */
    uint32_t *lengths; /* byte lengths (pieces may contain NUL bytes) */
    float *scores;
} kld_llama2c_vocab;

kld_status kld_llama2c_vocab_open(const char *path, int32_t n_vocab,
                                  kld_llama2c_vocab **out, kld_error *err);
/* Parses an in-memory tokenizer.bin (the fuzzer's entry point). Trailing
 * bytes after n_vocab tokens are KLD_ERR_MISMATCH (a tokenizer for a larger
 * vocabulary). */
kld_status kld_llama2c_vocab_parse(const uint8_t *buf, uint64_t size, const char *name,
                                   int32_t n_vocab, kld_llama2c_vocab **out, kld_error *err);
void kld_llama2c_vocab_free(kld_llama2c_vocab *v);

#endif
