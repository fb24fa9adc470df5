/* dequant_tq_ref.c — scalar reference dequantization of the ternary types
 * tq1_0 and tq2_0 (values d * {-1, 0, 1}) and of mxfp4 (OCP microscaling
 * FP4: an E8M0 power-of-two scale per 32 E2M1 values). Value = (float)q * d
 * or d * level, one rounding each, as ggml's dequantize_row_*. */
#include "tensor/kernels.h"

const int8_t kld_mxfp4_values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

/* Trit n (0 = most significant) of a tq1_0 byte: the byte is a base-3
 * fixed-point fraction (5 trits scaled to 0..255, rounded up), so
 * multiplying by 3^n modulo 256 brings trit n to the top and (q * 3) >> 8
 * reads it. */
static inline float tq1_trit(uint8_t byte, uint8_t pow3, float d) {
    const uint8_t q = (uint8_t)(byte * pow3);
    return (float)((((uint16_t)q * 3) >> 8) - 1) * d;
}

/* tq1_0: qs[0..32) hold trits 0..4 of values 0..159 (trit n of byte m is
 * value 32n + m), qs[32..48) the same for values 160..239 in rows of 16,
 * qh[4] four trits each for values 240..255. */
void kld_dequant_tq1_0_ref(const void *src, float *dst, int64_t n) {
    static const uint8_t pow3[5] = {1, 3, 9, 27, 81};
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / KLD_QK_K; i++, b += KLD_BYTES_TQ1_0) {
        const float d = kld_half_to_float(kld_load_u16(b + 52));
        for (int t = 0; t < 5; t++)
            for (int m = 0; m < 32; m++) *dst++ = tq1_trit(b[m], pow3[t], d);
        for (int t = 0; t < 5; t++)
            for (int m = 0; m < 16; m++) *dst++ = tq1_trit(b[32 + m], pow3[t], d);
        for (int t = 0; t < 4; t++)
            for (int m = 0; m < 4; m++) *dst++ = tq1_trit(b[48 + m], pow3[t], d);
    }
}

/* tq2_0: 2 bits per value minus 1; each 32 bytes hold four rows of 32
 * values at shifts 0, 2, 4, 6. */
void kld_dequant_tq2_0_ref(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / KLD_QK_K; i++, b += KLD_BYTES_TQ2_0) {
        const float d = kld_half_to_float(kld_load_u16(b + 64));
        for (int h = 0; h < 64; h += 32)
            for (int shift = 0; shift < 8; shift += 2)
                for (int m = 0; m < 32; m++) *dst++ = (float)(((b[h + m] >> shift) & 3) - 1) * d;
    }
}

/* mxfp4: low nibbles are values 0..15, high nibbles 16..31. */
void kld_dequant_mxfp4_ref(const void *src, float *dst, int64_t n) {
    const uint8_t *b = src;
    for (int64_t i = 0; i < n / 32; i++, b += KLD_BYTES_MXFP4, dst += 32) {
        const float d = kld_e8m0_to_f32_half(b[0]);
        for (int j = 0; j < 16; j++) {
            dst[j] = (float)kld_mxfp4_values[b[1 + j] & 0xF] * d;
            dst[j + 16] = (float)kld_mxfp4_values[b[1 + j] >> 4] * d;
        }
    }
}
