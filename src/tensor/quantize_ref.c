/* quantize_ref.c — reference quantizers for the plain float types and the
 * 32-value block types (q4_0, q4_1, q5_0, q5_1, q8_0). They reproduce
 * llama.cpp's quantize_row_*_ref byte for byte: same scale choice, same
 * float operations in the same order, same float-to-int conversions
 * (truncating casts after +0.5 / +8.5, roundf for q8_0). */
#include "tensor/kernels.h"

#include <float.h>
#include <math.h>

void kld_quant_f32_ref(const float *src, void *dst, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}

void kld_quant_f16_ref(const float *src, void *dst, int64_t n) {
    uint8_t *p = dst;
    for (int64_t i = 0; i < n; i++) kld_store_u16(p + 2 * i, kld_f32_to_f16(src[i]));
}

void kld_quant_bf16_ref(const float *src, void *dst, int64_t n) {
    uint8_t *p = dst;
    for (int64_t i = 0; i < n; i++) kld_store_u16(p + 2 * i, kld_f32_to_bf16(src[i]));
}

/* The value of largest magnitude (the first one on ties), sign kept. */
static float signed_absmax(const float *x, int n) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++) {
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    return max;
}

static void min_max(const float *x, int n, float *min, float *max) {
    *min = FLT_MAX;
    *max = -FLT_MAX;
    for (int j = 0; j < n; j++) {
        if (x[j] < *min) *min = x[j];
        if (x[j] > *max) *max = x[j];
    }
}

static inline int min_int(int a, int b) { return a < b ? a : b; }

/* q4_0: d = absmax / -8 so that the extreme value maps to level 0. */
void kld_quant_q4_0_ref(const float *src, void *dst, int64_t n) {
    uint8_t *b = dst;
    for (int64_t i = 0; i < n / 32; i++, src += 32, b += KLD_BYTES_Q4_0) {
        const float d = signed_absmax(src, 32) / -8;
        const float id = d ? 1.0f / d : 0.0f;
        kld_store_u16(b, kld_f32_to_f16(d));
        for (int j = 0; j < 16; j++) {
            const float x0 = src[j] * id, x1 = src[16 + j] * id;
            const int q0 = min_int(15, (int8_t)(x0 + 8.5f));
            const int q1 = min_int(15, (int8_t)(x1 + 8.5f));
            b[2 + j] = (uint8_t)(q0 | q1 << 4);
        }
    }
}

void kld_quant_q4_1_ref(const float *src, void *dst, int64_t n) {
    uint8_t *b = dst;
    for (int64_t i = 0; i < n / 32; i++, src += 32, b += KLD_BYTES_Q4_1) {
        float min, max;
        min_max(src, 32, &min, &max);
        const float d = (max - min) / 15;
        const float id = d ? 1.0f / d : 0.0f;
        kld_store_u16(b, kld_f32_to_f16(d));
        kld_store_u16(b + 2, kld_f32_to_f16(min));
        for (int j = 0; j < 16; j++) {
            const float x0 = (src[j] - min) * id, x1 = (src[16 + j] - min) * id;
            const int q0 = min_int(15, (int8_t)(x0 + 0.5f));
            const int q1 = min_int(15, (int8_t)(x1 + 0.5f));
            b[4 + j] = (uint8_t)(q0 | q1 << 4);
        }
    }
}

void kld_quant_q5_0_ref(const float *src, void *dst, int64_t n) {
    uint8_t *b = dst;
    for (int64_t i = 0; i < n / 32; i++, src += 32, b += KLD_BYTES_Q5_0) {
        const float d = signed_absmax(src, 32) / -16;
        const float id = d ? 1.0f / d : 0.0f;
        kld_store_u16(b, kld_f32_to_f16(d));
        uint32_t qh = 0;
        for (int j = 0; j < 16; j++) {
            const float x0 = src[j] * id, x1 = src[16 + j] * id;
            const uint8_t q0 = (uint8_t)min_int(31, (int8_t)(x0 + 16.5f));
            const uint8_t q1 = (uint8_t)min_int(31, (int8_t)(x1 + 16.5f));
            b[6 + j] = (uint8_t)((q0 & 0x0F) | (q1 & 0x0F) << 4);
            qh |= (uint32_t)(q0 >> 4 & 1) << j;
            qh |= (uint32_t)(q1 >> 4 & 1) << (j + 16);
        }
        memcpy(b + 2, &qh, 4);
    }
}

void kld_quant_q5_1_ref(const float *src, void *dst, int64_t n) {
    uint8_t *b = dst;
    for (int64_t i = 0; i < n / 32; i++, src += 32, b += KLD_BYTES_Q5_1) {
        float min, max;
        min_max(src, 32, &min, &max);
        const float d = (max - min) / 31;
        const float id = d ? 1.0f / d : 0.0f;
        kld_store_u16(b, kld_f32_to_f16(d));
        kld_store_u16(b + 2, kld_f32_to_f16(min));
        uint32_t qh = 0;
        for (int j = 0; j < 16; j++) {
            const float x0 = (src[j] - min) * id, x1 = (src[16 + j] - min) * id;
            const uint8_t q0 = (uint8_t)(x0 + 0.5f), q1 = (uint8_t)(x1 + 0.5f);
            b[8 + j] = (uint8_t)((q0 & 0x0F) | (q1 & 0x0F) << 4);
            qh |= (uint32_t)(q0 >> 4 & 1) << j;
            qh |= (uint32_t)(q1 >> 4 & 1) << (j + 16);
        }
        memcpy(b + 4, &qh, 4);
    }
}

void kld_quant_q8_0_ref(const float *src, void *dst, int64_t n) {
    uint8_t *b = dst;
    for (int64_t i = 0; i < n / 32; i++, src += 32, b += KLD_BYTES_Q8_0) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) amax = amax > fabsf(src[j]) ? amax : fabsf(src[j]);
        const float d = amax / 127;
        const float id = d ? 1.0f / d : 0.0f;
        kld_store_u16(b, kld_f32_to_f16(d));
        for (int j = 0; j < 32; j++) b[2 + j] = (uint8_t)(int8_t)roundf(src[j] * id);
    }
}
