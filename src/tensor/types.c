/* types.c — the type table (ggml ids, names, block geometry, kernels), size
 * arithmetic with overflow checks, run-time kernel selection, and the exact
 * half/bfloat16 conversions everything else builds on. */
#include "tensor/kernels.h"

#include <inttypes.h>
#include <cpuid.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

/* Indexed by ggml type id. Ids ggml retired (4, 5, 31-33, 36-38) or that
 * postdate the ids we know have no entry (block_size 0). The i-quants,
 * ternary types and mxfp4 (39, newer than llama.cpp c392e50) are read-only:
 * dequantized, never written. */
static const kld_type_info type_table[KLD_TYPE_COUNT] = {
    [KLD_TYPE_F32] = {.name = "f32", .block_size = 1, .type_size = 4,
        .to_float_ref = kld_dequant_f32_ref, .to_float_avx2 = kld_dequant_f32_avx2,
        .quantize_row = kld_quant_f32_ref},
    [KLD_TYPE_F16] = {.name = "f16", .block_size = 1, .type_size = 2,
        .to_float_ref = kld_dequant_f16_ref, .to_float_avx2 = kld_dequant_f16_avx2,
        .quantize_row = kld_quant_f16_ref},
    [KLD_TYPE_Q4_0] = {.name = "q4_0", .block_size = 32, .type_size = KLD_BYTES_Q4_0,
        .is_quantized = true, .to_float_ref = kld_dequant_q4_0_ref,
        .to_float_avx2 = kld_dequant_q4_0_avx2, .quantize_row = kld_quant_q4_0_ref,
        .quantize_row_imat = kld_quant_q4_0_imat, .imatrix_used = true},
    [KLD_TYPE_Q4_1] = {.name = "q4_1", .block_size = 32, .type_size = KLD_BYTES_Q4_1,
        .is_quantized = true, .to_float_ref = kld_dequant_q4_1_ref,
        .to_float_avx2 = kld_dequant_q4_1_avx2, .quantize_row = kld_quant_q4_1_ref,
        .quantize_row_imat = kld_quant_q4_1_imat, .imatrix_used = true},
    [KLD_TYPE_Q5_0] = {.name = "q5_0", .block_size = 32, .type_size = KLD_BYTES_Q5_0,
        .is_quantized = true, .to_float_ref = kld_dequant_q5_0_ref,
        .to_float_avx2 = kld_dequant_q5_0_avx2, .quantize_row = kld_quant_q5_0_ref,
        .quantize_row_imat = kld_quant_q5_0_imat, .imatrix_used = true},
    [KLD_TYPE_Q5_1] = {.name = "q5_1", .block_size = 32, .type_size = KLD_BYTES_Q5_1,
        .is_quantized = true, .to_float_ref = kld_dequant_q5_1_ref,
        .to_float_avx2 = kld_dequant_q5_1_avx2, .quantize_row = kld_quant_q5_1_ref,
        .quantize_row_imat = kld_quant_q5_1_imat, .imatrix_used = true},
    [KLD_TYPE_Q8_0] = {.name = "q8_0", .block_size = 32, .type_size = KLD_BYTES_Q8_0,
        .is_quantized = true, .to_float_ref = kld_dequant_q8_0_ref,
        .to_float_avx2 = kld_dequant_q8_0_avx2, .quantize_row = kld_quant_q8_0_ref},
    [KLD_TYPE_Q8_1] = {.name = "q8_1", .block_size = 32, .type_size = 36, .is_quantized = true},
    [KLD_TYPE_Q2_K] = {.name = "q2_K", .block_size = KLD_QK_K, .type_size = KLD_BYTES_Q2_K,
        .is_quantized = true, .to_float_ref = kld_dequant_q2_k_ref,
        .to_float_avx2 = kld_dequant_q2_k_avx2, .quantize_row = kld_quant_q2_k_ref,
        .quantize_row_imat = kld_quant_q2_k_imat, .imatrix_used = true},
    [KLD_TYPE_Q3_K] = {.name = "q3_K", .block_size = KLD_QK_K, .type_size = KLD_BYTES_Q3_K,
        .is_quantized = true, .to_float_ref = kld_dequant_q3_k_ref,
        .to_float_avx2 = kld_dequant_q3_k_avx2, .quantize_row = kld_quant_q3_k_ref,
        .quantize_row_imat = kld_quant_q3_k_imat, .imatrix_used = true},
    [KLD_TYPE_Q4_K] = {.name = "q4_K", .block_size = KLD_QK_K, .type_size = KLD_BYTES_Q4_K,
        .is_quantized = true, .to_float_ref = kld_dequant_q4_k_ref,
        .to_float_avx2 = kld_dequant_q4_k_avx2, .quantize_row = kld_quant_q4_k_ref,
        .quantize_row_imat = kld_quant_q4_k_imat, .quantize_row_avx2 = kld_quant_q4_k_avx2,
        .imatrix_used = true},
    [KLD_TYPE_Q5_K] = {.name = "q5_K", .block_size = KLD_QK_K, .type_size = KLD_BYTES_Q5_K,
        .is_quantized = true, .to_float_ref = kld_dequant_q5_k_ref,
        .to_float_avx2 = kld_dequant_q5_k_avx2, .quantize_row = kld_quant_q5_k_ref,
        .quantize_row_imat = kld_quant_q5_k_imat, .quantize_row_avx2 = kld_quant_q5_k_avx2,
        .imatrix_used = true},
    [KLD_TYPE_Q6_K] = {.name = "q6_K", .block_size = KLD_QK_K, .type_size = KLD_BYTES_Q6_K,
        .is_quantized = true, .to_float_ref = kld_dequant_q6_k_ref,
        .to_float_avx2 = kld_dequant_q6_k_avx2, .quantize_row = kld_quant_q6_k_ref,
        .quantize_row_imat = kld_quant_q6_k_imat, .quantize_row_avx2 = kld_quant_q6_k_avx2,
        .imatrix_used = true},
    [KLD_TYPE_Q8_K] = {.name = "q8_K", .block_size = KLD_QK_K, .type_size = 292, .is_quantized = true},
    [KLD_TYPE_IQ2_XXS] = {.name = "iq2_xxs", .block_size = KLD_QK_K, .type_size = KLD_BYTES_IQ2_XXS,
        .is_quantized = true, .to_float_ref = kld_dequant_iq2_xxs_ref,
        .to_float_avx2 = kld_dequant_iq2_xxs_avx2},
    [KLD_TYPE_IQ2_XS] = {.name = "iq2_xs", .block_size = KLD_QK_K, .type_size = KLD_BYTES_IQ2_XS,
        .is_quantized = true, .to_float_ref = kld_dequant_iq2_xs_ref,
        .to_float_avx2 = kld_dequant_iq2_xs_avx2},
    [KLD_TYPE_IQ3_XXS] = {.name = "iq3_xxs", .block_size = KLD_QK_K, .type_size = KLD_BYTES_IQ3_XXS,
        .is_quantized = true, .to_float_ref = kld_dequant_iq3_xxs_ref,
        .to_float_avx2 = kld_dequant_iq3_xxs_avx2},
    [KLD_TYPE_IQ1_S] = {.name = "iq1_s", .block_size = KLD_QK_K, .type_size = KLD_BYTES_IQ1_S,
        .is_quantized = true, .to_float_ref = kld_dequant_iq1_s_ref,
        .to_float_avx2 = kld_dequant_iq1_s_avx2},
    [KLD_TYPE_IQ4_NL] = {.name = "iq4_nl", .block_size = 32, .type_size = KLD_BYTES_IQ4_NL,
        .is_quantized = true, .to_float_ref = kld_dequant_iq4_nl_ref,
        .to_float_avx2 = kld_dequant_iq4_nl_avx2, .quantize_row = kld_quant_iq4_nl_ref,
        .quantize_row_imat = kld_quant_iq4_nl_imat, .quantize_row_cpy = kld_quant_iq4_nl_cpy,
        .imatrix_used = true},
    [KLD_TYPE_IQ3_S] = {.name = "iq3_s", .block_size = KLD_QK_K, .type_size = KLD_BYTES_IQ3_S,
        .is_quantized = true, .to_float_ref = kld_dequant_iq3_s_ref,
        .to_float_avx2 = kld_dequant_iq3_s_avx2},
    [KLD_TYPE_IQ2_S] = {.name = "iq2_s", .block_size = KLD_QK_K, .type_size = KLD_BYTES_IQ2_S,
        .is_quantized = true, .to_float_ref = kld_dequant_iq2_s_ref,
        .to_float_avx2 = kld_dequant_iq2_s_avx2},
    [KLD_TYPE_IQ4_XS] = {.name = "iq4_xs", .block_size = KLD_QK_K, .type_size = KLD_BYTES_IQ4_XS,
        .is_quantized = true, .to_float_ref = kld_dequant_iq4_xs_ref,
        .to_float_avx2 = kld_dequant_iq4_xs_avx2, .quantize_row = kld_quant_iq4_xs_ref,
        .quantize_row_imat = kld_quant_iq4_xs_imat, .imatrix_used = true},
    [KLD_TYPE_I8] = {.name = "i8", .block_size = 1, .type_size = 1},
    [KLD_TYPE_I16] = {.name = "i16", .block_size = 1, .type_size = 2},
    [KLD_TYPE_I32] = {.name = "i32", .block_size = 1, .type_size = 4},
    [KLD_TYPE_I64] = {.name = "i64", .block_size = 1, .type_size = 8},
    [KLD_TYPE_F64] = {.name = "f64", .block_size = 1, .type_size = 8},
    [KLD_TYPE_IQ1_M] = {.name = "iq1_m", .block_size = KLD_QK_K, .type_size = KLD_BYTES_IQ1_M,
        .is_quantized = true, .to_float_ref = kld_dequant_iq1_m_ref,
        .to_float_avx2 = kld_dequant_iq1_m_avx2},
    [KLD_TYPE_BF16] = {.name = "bf16", .block_size = 1, .type_size = 2,
        .to_float_ref = kld_dequant_bf16_ref, .to_float_avx2 = kld_dequant_bf16_avx2,
        .quantize_row = kld_quant_bf16_ref},
    [KLD_TYPE_TQ1_0] = {.name = "tq1_0", .block_size = KLD_QK_K, .type_size = KLD_BYTES_TQ1_0,
        .is_quantized = true, .to_float_ref = kld_dequant_tq1_0_ref,
        .to_float_avx2 = kld_dequant_tq1_0_avx2},
    [KLD_TYPE_TQ2_0] = {.name = "tq2_0", .block_size = KLD_QK_K, .type_size = KLD_BYTES_TQ2_0,
        .is_quantized = true, .to_float_ref = kld_dequant_tq2_0_ref,
        .to_float_avx2 = kld_dequant_tq2_0_avx2},
    [KLD_TYPE_MXFP4] = {.name = "mxfp4", .block_size = 32, .type_size = KLD_BYTES_MXFP4,
        .is_quantized = true, .to_float_ref = kld_dequant_mxfp4_ref,
        .to_float_avx2 = kld_dequant_mxfp4_avx2, .quantize_row = kld_quant_mxfp4_ref},
};

/* ---- kernel selection ---- */

static pthread_once_t kernels_once = PTHREAD_ONCE_INIT;
static const char *kernels_name = "ref";

/* CPUID directly: clang 14's __builtin_cpu_supports does not know "f16c". */
bool kld_cpu_has_avx2(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
    bool fma = c & (1u << 12), osxsave = c & (1u << 27), f16c = c & (1u << 29);
    if (!fma || !osxsave || !f16c) return false;
    unsigned xcr0_lo, xcr0_hi;
    __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
    if ((xcr0_lo & 6u) != 6u) return false; /* the OS saves XMM and YMM state */
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    return b & (1u << 5); /* AVX2 */
}

/* AVX-512 F, BW, VL and DQ, with the OS saving opmask and zmm state. */
bool kld_cpu_has_avx512(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return false;
    unsigned xcr0_lo, xcr0_hi;
    __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
    if ((xcr0_lo & 0xE6u) != 0xE6u) return false; /* XMM, YMM, opmask, ZMM_Hi256, Hi16_ZMM */
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    const unsigned need = (1u << 16) | (1u << 17) | (1u << 30) | (1u << 31); /* F DQ BW VL */
    return (b & need) == need;
}

/* The kernels chosen at start-up, beside the table rather than in it: the
 * type table stays what the formats define. */
static kld_type_kernels kernels[KLD_TYPE_COUNT];

static void kernels_pick(void) {
    const char *env = getenv("KLD_KERNELS");
    bool force_ref = env && strcmp(env, "ref") == 0;
    bool use_avx2 = !force_ref && kld_cpu_has_avx2();
    for (int i = 0; i < KLD_TYPE_COUNT; i++) {
        const kld_type_info *t = &type_table[i];
        kernels[i].to_float = use_avx2 && t->to_float_avx2 ? t->to_float_avx2 : t->to_float_ref;
        kernels[i].quantize = use_avx2 && t->quantize_row_avx2 ? t->quantize_row_avx2 : t->quantize_row;
    }
    kernels_name = use_avx2 ? "avx2" : "ref";
}

const kld_type_kernels *kld_type_kernels_of(const kld_type_info *t) {
    kld_kernels_init();
    return &kernels[t - type_table];
}

void kld_kernels_init(void) { pthread_once(&kernels_once, kernels_pick); }

const char *kld_kernels_name(void) {
    kld_kernels_init();
    return kernels_name;
}

/* ---- lookups and sizes ---- */

const kld_type_info *kld_type_info_get(uint32_t type_id) {
    if (type_id >= KLD_TYPE_COUNT || type_table[type_id].block_size == 0) return NULL;
    return &type_table[type_id];
}

bool kld_type_from_name(const char *name, uint32_t *out) {
    for (uint32_t i = 0; i < KLD_TYPE_COUNT; i++) {
        if (type_table[i].block_size && strcmp(type_table[i].name, name) == 0) {
            *out = i;
            return true;
        }
    }
    return false;
}

const char *kld_type_name(uint32_t type_id, char buf[16]) {
    if (type_id < KLD_TYPE_COUNT && type_table[type_id].block_size) return type_table[type_id].name;
    snprintf(buf, 16, "type#%" PRIu32, type_id);
    return buf;
}

kld_status kld_type_row_bytes(uint32_t type_id, uint64_t n, uint64_t *out, const char *what,
                              kld_error *err) {
    char nb[16];
    const kld_type_info *t = kld_type_info_get(type_id);
    if (!t)
        return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: unknown tensor type %s", what,
                        kld_type_name(type_id, nb));
    if (n % (uint64_t)t->block_size != 0)
        return kld_fail(err, KLD_ERR_FORMAT,
                        "%s: row length %" PRIu64 " is not a multiple of the %s block size %d",
                        what, n, t->name, t->block_size);
    if (!kld_mul_u64(n / (uint64_t)t->block_size, (uint64_t)t->type_size, out))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: a %s row of %" PRIu64 " values overflows 64 bits",
                        what, t->name, n);
    return KLD_OK;
}

kld_status kld_type_tensor_bytes(uint32_t type_id, int n_dims, const int64_t *ne, uint64_t *out,
                                 const char *what, kld_error *err) {
    char nb[16];
    if (n_dims < 1 || n_dims > 4)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: %d dimensions (want 1..4)", what, n_dims);
    for (int i = 0; i < n_dims; i++) {
        if (ne[i] < 0)
            return kld_fail(err, KLD_ERR_FORMAT, "%s: dimension %d is negative (%" PRId64 ")", what,
                            i, ne[i]);
    }
    uint64_t bytes;
    kld_status st = kld_type_row_bytes(type_id, (uint64_t)ne[0], &bytes, what, err);
    if (st != KLD_OK) return st;
    for (int i = 1; i < n_dims; i++) {
        if (!kld_mul_u64(bytes, (uint64_t)ne[i], &bytes))
            return kld_fail(err, KLD_ERR_FORMAT,
                            "%s: %s tensor size overflows 64 bits at dimension %d (%" PRId64 ")",
                            what, kld_type_name(type_id, nb), i, ne[i]);
    }
    *out = bytes;
    return KLD_OK;
}

/* ---- half and bfloat16 (IEEE binary16; bfloat16 = top half of binary32) ---- */

static inline uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

float kld_f16_to_f32(uint16_t h) { return kld_half_to_float(h); }

uint16_t kld_f32_to_f16(float f) {
    uint32_t u = f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    uint32_t a = u & 0x7FFFFFFF;
    if (a > 0x7F800000) return sign | 0x7E00;   /* NaN, as ggml's scalar conversion */
    if (a >= 0x477FF000) return sign | 0x7C00;  /* >= 65520 rounds (ties-to-even) to inf */
    if (a >= 0x38800000) {                      /* normal half: rebias, round 13 bits */
        uint32_t r = (a >> 13) - (112u << 10);
        uint32_t rem = a & 0x1FFF;
        if (rem > 0x1000 || (rem == 0x1000 && (r & 1))) r++; /* carry may bump the exponent */
        return sign | (uint16_t)r;
    }
    if (a <= 0x33000000) return sign;           /* <= 2^-25: ties to even zero */
    /* subnormal half: value = m * 2^(e-150) in units of 2^-24 */
    uint32_t e = a >> 23, m = (a & 0x7FFFFF) | 0x800000;
    uint32_t shift = 126 - e; /* 14..24 */
    uint32_t r = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1))) r++;
    return sign | (uint16_t)r;
}

float kld_bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

uint16_t kld_f32_to_bf16(float f) {
    uint32_t u = f32_bits(f);
    if ((u & 0x7FFFFFFF) > 0x7F800000) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    return (uint16_t)((u + 0x7FFF + ((u >> 16) & 1)) >> 16); /* ties to even; may reach inf */
}
