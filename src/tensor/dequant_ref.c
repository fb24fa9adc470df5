/* dequant_ref.c — scalar reference dequantization of the plain float types
 * and the 32-value block types (q4_0, q4_1, q5_0, q5_1, q8_0, iq4_nl).
 * Each expression mirrors ggml's to_float operation for operation (an int
 * times a float, then a separate add), so results match bit for bit; this
 * file is built without FMA, so nothing can be contracted. */
#include "tensor/kernels.h"

const int8_t kld_iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                     1,    13,   25,  38,  53,  69,  89,  113};

void kld_dequant_f32_ref(const void *src, float *dst, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}

void kld_dequant_f16_ref(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t i = 0; i < n; i++) dst[i] = kld_half_to_float(kld_load_u16(p + 2 * i));
}

void kld_dequant_bf16_ref(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t i = 0; i < n; i++) dst[i] = kld_bf16_to_f32(kld_load_u16(p + 2 * i));
}

/* q4_0: value = (nibble - 8) * d; low nibbles are values 0..15, high 16..31. */
void kld_dequant_q4_0_ref(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / 32; i++, b += KLD_BYTES_Q4_0, dst += 32) {
        const float d = kld_half_to_float(kld_load_u16(b));
        const uint8_t *qs = b + 2;
        for (int j = 0; j < 16; j++) {
            dst[j] = (float)((qs[j] & 0x0F) - 8) * d;
            dst[j + 16] = (float)((qs[j] >> 4) - 8) * d;
        }
    }
}

/* q4_1: value = nibble * d + m. */
void kld_dequant_q4_1_ref(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / 32; i++, b += KLD_BYTES_Q4_1, dst += 32) {
        const float d = kld_half_to_float(kld_load_u16(b));
        const float m = kld_half_to_float(kld_load_u16(b + 2));
        const uint8_t *qs = b + 4;
        for (int j = 0; j < 16; j++) {
            dst[j] = (float)(qs[j] & 0x0F) * d + m;
            dst[j + 16] = (float)(qs[j] >> 4) * d + m;
        }
    }
}

/* q5_0/q5_1: bit e of the 32-bit qh is the fifth bit of value e. */
void kld_dequant_q5_0_ref(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / 32; i++, b += KLD_BYTES_Q5_0, dst += 32) {
        const float d = kld_half_to_float(kld_load_u16(b));
        const uint32_t qh = kld_load_u32(b + 2);
        const uint8_t *qs = b + 6;
        for (int j = 0; j < 16; j++) {
            const int hi0 = (int)((qh >> j) & 1) << 4, hi1 = (int)((qh >> (j + 16)) & 1) << 4;
            dst[j] = (float)(((qs[j] & 0x0F) | hi0) - 16) * d;
            dst[j + 16] = (float)(((qs[j] >> 4) | hi1) - 16) * d;
        }
    }
}

void kld_dequant_q5_1_ref(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / 32; i++, b += KLD_BYTES_Q5_1, dst += 32) {
        const float d = kld_half_to_float(kld_load_u16(b));
        const float m = kld_half_to_float(kld_load_u16(b + 2));
        const uint32_t qh = kld_load_u32(b + 4);
        const uint8_t *qs = b + 8;
        for (int j = 0; j < 16; j++) {
            const int hi0 = (int)((qh >> j) & 1) << 4, hi1 = (int)((qh >> (j + 16)) & 1) << 4;
            dst[j] = (float)((qs[j] & 0x0F) | hi0) * d + m;
            dst[j + 16] = (float)((qs[j] >> 4) | hi1) * d + m;
        }
    }
}

void kld_dequant_q8_0_ref(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / 32; i++, b += KLD_BYTES_Q8_0, dst += 32) {
        const float d = kld_half_to_float(kld_load_u16(b));
        const int8_t *qs = (const int8_t *)(b + 2);
        for (int j = 0; j < 32; j++) dst[j] = (float)qs[j] * d;
    }
}

/* iq4_nl: value = d * level[nibble] (the float is on the left in ggml; the
 * product is the same either way). */
void kld_dequant_iq4_nl_ref(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / 32; i++, b += KLD_BYTES_IQ4_NL, dst += 32) {
        const float d = kld_half_to_float(kld_load_u16(b));
        const uint8_t *qs = b + 2;
        for (int j = 0; j < 16; j++) {
            dst[j] = d * (float)kld_iq4nl_values[qs[j] & 0x0F];
            dst[j + 16] = d * (float)kld_iq4nl_values[qs[j] >> 4];
        }
    }
}
