/* types.h — the tensor type table: ids (ggml's numbering, so GGUF type
 * fields map directly), block geometry and per-type kernels. Everything
 * that depends on a weight type looks it up here; nothing else switches
 * on the type. */
#ifndef KLD_TENSOR_TYPES_H
#define KLD_TENSOR_TYPES_H

#include "common/common.h"

typedef enum kld_type {
    KLD_TYPE_F32 = 0,
    KLD_TYPE_F16 = 1,
    KLD_TYPE_Q4_0 = 2,
    KLD_TYPE_Q4_1 = 3,
    KLD_TYPE_Q5_0 = 6,
    KLD_TYPE_Q5_1 = 7,
    KLD_TYPE_Q8_0 = 8,
    KLD_TYPE_Q8_1 = 9,
    KLD_TYPE_Q2_K = 10,
    KLD_TYPE_Q3_K = 11,
    KLD_TYPE_Q4_K = 12,
    KLD_TYPE_Q5_K = 13,
    KLD_TYPE_Q6_K = 14,
    KLD_TYPE_Q8_K = 15,
    KLD_TYPE_IQ2_XXS = 16,
    KLD_TYPE_IQ2_XS = 17,
    KLD_TYPE_IQ3_XXS = 18,
    KLD_TYPE_IQ1_S = 19,
    KLD_TYPE_IQ4_NL = 20,
    KLD_TYPE_IQ3_S = 21,
    KLD_TYPE_IQ2_S = 22,
    KLD_TYPE_IQ4_XS = 23,
    KLD_TYPE_I8 = 24,
    KLD_TYPE_I16 = 25,
    KLD_TYPE_I32 = 26,
    KLD_TYPE_I64 = 27,
    KLD_TYPE_F64 = 28,
    KLD_TYPE_IQ1_M = 29,
    KLD_TYPE_BF16 = 30,
    KLD_TYPE_TQ1_0 = 34,
    KLD_TYPE_TQ2_0 = 35,
    KLD_TYPE_MXFP4 = 39,
    KLD_TYPE_COUNT = 40 /* upper bound of the id space, not a type */
} kld_type;

/* Dequantizes n values (a multiple of the block size) from src to dst,
 * bit for bit as ggml's to_float. src needs no alignment. */
typedef void (*kld_to_float_fn)(const void *src, float *dst, int64_t n);

/* Quantizes n values (a multiple of the block size) from src to dst, byte
 * for byte as llama.cpp's reference quantizer (ggml_quantize_chunk with no
 * importance matrix, i.e. what llama-quantize writes without --imatrix). */
typedef void (*kld_from_float_fn)(const float *src, void *dst, int64_t n);

/* Quantizes one row of n_per_row values with importance weights qw (one per
 * column, llama.cpp's imatrix entry over its call count), byte for byte as
 * ggml_quantize_chunk with that imatrix. */
typedef void (*kld_from_float_imat_fn)(const float *src, void *dst, int64_t n_per_row,
                                       const float *qw);

typedef struct kld_type_info {
    const char *name;       /* ggml_type_name() spelling: "q4_K", "bf16" */
    int block_size;         /* values per block */
    int type_size;          /* bytes per block */
    bool is_quantized;      /* block-quantized (rounds values), not a plain float */
    kld_to_float_fn to_float_ref; /* scalar reference; NULL when unsupported */
    kld_to_float_fn to_float_avx2; /* AVX2+F16C variant or NULL; callable only when
                                      kld_cpu_has_avx2() (tests compare it to _ref) */
    kld_from_float_fn quantize_row; /* scalar reference quantizer; NULL when unsupported */
    bool imatrix_used;      /* llama.cpp's quantizer for this type reads an imatrix */
    kld_from_float_imat_fn quantize_row_imat; /* with importance weights; NULL when not
                                                 implemented (or not used) */
    kld_from_float_fn quantize_row_avx2; /* AVX2 twin of quantize_row (same bytes) or NULL */
    /* ggml's CPU from_float where it writes other bytes than quantize_row:
     * what ggml_cpy f32 → type stores, i.e. a quantized KV cache (iq4_nl:
     * quantize_row_iq4_nl_ref, no scale trials); NULL: quantize_row */
    kld_from_float_fn quantize_row_cpy;
} kld_type_info;

/* The entry for a type id, or NULL for ids that no format defines. */
const kld_type_info *kld_type_info_get(uint32_t type_id);

/* The fastest kernels of a type on this CPU, chosen once at start-up
 * (KLD_KERNELS=ref forces the scalar ones): to_float is NULL exactly when
 * to_float_ref is, quantize when quantize_row is. t: from kld_type_info_get. */
typedef struct kld_type_kernels {
    kld_to_float_fn to_float;
    kld_from_float_fn quantize;
} kld_type_kernels;
const kld_type_kernels *kld_type_kernels_of(const kld_type_info *t);

/* The type whose ggml name is `name` ("q4_K", "f16"); false when none. */
bool kld_type_from_name(const char *name, uint32_t *out);

/* Name for messages: the table name, or "type#<id>" for unknown ids
 * (buf must hold 16 bytes). */
const char *kld_type_name(uint32_t type_id, char buf[16]);

/* Bytes of a row of n values; fails (naming `what`) when the type is
 * unknown, n is not a multiple of the block size, or the size overflows. */
kld_status kld_type_row_bytes(uint32_t type_id, uint64_t n, uint64_t *out, const char *what,
                              kld_error *err);

/* Bytes of a tensor with the given ggml-order dims (ne[0] = row length). */
kld_status kld_type_tensor_bytes(uint32_t type_id, int n_dims, const int64_t *ne, uint64_t *out,
                                 const char *what, kld_error *err);

/* Picks SIMD kernels for this CPU once (idempotent, thread-safe).
 * KLD_KERNELS=ref in the environment forces the scalar references. */
void kld_kernels_init(void);

/* Which kernel family kld_kernels_init chose: "ref", "avx2", "avx512". */
const char *kld_kernels_name(void);

/* True when this CPU runs the AVX2 kernels (AVX2, FMA and F16C), whatever
 * KLD_KERNELS says. */
bool kld_cpu_has_avx2(void);

/* True when this CPU and OS run AVX-512 F/BW/VL/DQ code (zmm state saved). */
bool kld_cpu_has_avx512(void);

/* Half and bfloat16 conversion (exact, round-to-nearest-even on the way in). */
float kld_f16_to_f32(uint16_t h);
uint16_t kld_f32_to_f16(float f);
float kld_bf16_to_f32(uint16_t h);
uint16_t kld_f32_to_bf16(float f);
/* NaN handling follows ggml: f16 NaNs widen to quiet NaNs; f32 NaNs narrow to
 * sign|0x7E00 (f16) or to their top half with the quiet bit set (bf16). */

#endif
