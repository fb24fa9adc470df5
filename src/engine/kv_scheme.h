/* kv_scheme.h — the KV cache's storage schemes behind one dispatch point
 * (kv_scheme.c): llama.cpp's block types from the type table (f32 f16 bf16
 * q8_0 q4_0 q4_1 q5_0 q5_1 iq4_nl), MLX affine group quantization
 * (kv_mlx.c: "mlx<bits>g<group>") and the rotated scalar quantizer in the
 * TurboQuant manner (kv_rot.c: "rot<bits>"). A scheme is a uint32 id: a
 * kld_type id for the block types, KLD_KV_MLX(bits, group) or
 * KLD_KV_ROT(bits) for the others. Every scheme stores one (kv head,
 * position) row of n values in kld_kv_row_bytes(id, n) bytes, written by
 * kld_kv_store_row (with the bytes ggml_cpy writes into llama.cpp's cache) and
 * read back by kld_kv_load_rows. */
#ifndef KLD_ENGINE_KV_SCHEME_H
#define KLD_ENGINE_KV_SCHEME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KLD_KV_MLX(bits, group) (0x1000u | ((uint32_t)(bits) << 8) | (uint32_t)(group))
#define KLD_KV_ROT(bits) (0x2000u | (uint32_t)(bits))
#define KLD_KV_SCHEMES "f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, mlx<B>g<G> (B 2 3 4 6 8, " \
                       "G 32 64 128), rot<B> (B 1-8)"

/* The scheme spelled [name, name + len); false when none is. */
bool kld_kv_scheme_parse(const char *name, size_t len, uint32_t *id);
/* Its spelling ("q8_0", "mlx4g64", "rot3"); buf holds at least 16 bytes. */
const char *kld_kv_scheme_name(uint32_t id, char *buf, size_t size);
/* True for llama.cpp's block types (including f32, f16, bf16). */
bool kld_kv_scheme_is_block(uint32_t id);
/* NULL when rows of n values fit the scheme, else why not (written to buf). */
const char *kld_kv_scheme_misfit(uint32_t id, int64_t n, char *buf, size_t size);
/* Bytes of one row of n values (n fits the scheme). */
uint64_t kld_kv_row_bytes(uint32_t id, int64_t n);
/* Quantizes one row x[n] into dst (kld_kv_row_bytes bytes). */
void kld_kv_store_row(uint32_t id, const float *x, void *dst, int64_t n);
/* Dequantizes `rows` consecutive rows of n values into dst[rows * n]. */
void kld_kv_load_rows(uint32_t id, const void *src, float *dst, int64_t rows, int64_t n);

/* MLX affine group quantization (kv_mlx.c). */
uint64_t kld_kv_mlx_row_bytes(int bits, int group, int64_t n);
void kld_kv_mlx_store(int bits, int group, const float *x, uint8_t *dst, int64_t n);
void kld_kv_mlx_load(int bits, int group, const uint8_t *src, float *dst, int64_t n);

/* The rotated scalar quantizer (kv_rot.c). */
#define KLD_KV_ROT_MAX_DIM 1024
uint64_t kld_kv_rot_row_bytes(int bits, int64_t n);
void kld_kv_rot_store(int bits, const float *x, uint8_t *dst, int64_t n);
void kld_kv_rot_load(int bits, const uint8_t *src, float *dst, int64_t n);
/* The rotation alone (y = R x and its inverse, in place; n a multiple of 8). */
void kld_kv_rot_forward(float *x, int64_t n);
void kld_kv_rot_inverse(float *x, int64_t n);
/* The 2^bits levels of the codebook (for tests). */
const float *kld_kv_rot_levels(int bits);

/* Codes of `bits` bits as one little-endian bit stream: code i occupies
 * bits [i·bits, (i+1)·bits) counted from bit 0 of byte 0 — MLX's packing
 * for 2, 3, 4, 6 and 8 bits. */
typedef struct kv_bit_writer {
    uint8_t *p;
    uint64_t acc;
    int n;
} kv_bit_writer;

static inline void kv_bits_put(kv_bit_writer *w, uint32_t code, int bits) {
    w->acc |= (uint64_t)code << w->n;
    w->n += bits;
    while (w->n >= 8) {
        *w->p++ = (uint8_t)w->acc;
        w->acc >>= 8;
        w->n -= 8;
    }
}

static inline void kv_bits_flush(kv_bit_writer *w) {
    if (w->n > 0) *w->p++ = (uint8_t)w->acc;
    w->acc = 0;
    w->n = 0;
}

typedef struct kv_bit_reader {
    const uint8_t *p;
    uint64_t acc;
    int n;
} kv_bit_reader;

static inline uint32_t kv_bits_get(kv_bit_reader *r, int bits) {
    while (r->n < bits) {
        r->acc |= (uint64_t)*r->p++ << r->n;
        r->n += 8;
    }
    uint32_t v = (uint32_t)(r->acc & ((1u << bits) - 1));
    r->acc >>= bits;
    r->n -= bits;
    return v;
}

#endif
