/* kv_mlx.c — MLX affine group quantization of K and V rows ("mlx<B>g<G>"),
 * as mlx.core.quantize(mode="affine") computes it on the CPU
 * (mlx/backend/cpu/quantized.cpp, quantize()): per group of G values,
 *   s = max((max − min) / (2^B − 1), 1e-7), negated unless |min| > |max|;
 *   edge = min when |min| > |max|, else max (and s negative);
 *   q0 = rint(edge / s); when q0 != 0: s = edge / q0 and bias = edge,
 *        else bias = 0 (so 0 is exactly on the grid: 0 = bias − q0·s);
 *   code = clamp(rint((x − bias) / s), 0, 2^B − 1)   (round half to even);
 * and dequantizes x̂ = s·code + bias. The docs' s = (max − min)/(2^B − 1),
 * bias = min is this before the zero-point adjustment. Scale and bias are
 * stored as float16, MLX's dtype for a float16 cache (scales keep the
 * input's dtype); the codes are computed with the unrounded float s and
 * bias, as MLX does, and the dequantization runs in float32 (MLX's runs in
 * the cache dtype). Row layout: the codes of all groups as one
 * little-endian bit stream (MLX's packing), then the G-groups' f16 scales,
 * then their f16 biases: n·B/8 + 4·n/G bytes.
 *
 * Bound (tests/test_kv_schemes.c): per value |x − x̂| ≤ R/(2^B − 2) +
 * 2^-10·(max|x| + R), R = max − min of its group: one step of the adjusted
 * scale (|s| ≤ R/(2^B − 2) after the adjustment; values are within half a
 * step except at the far end, clipped by at most one) plus the float16
 * rounding of scale and bias. */
#include "engine/kv_scheme.h"

#include "tensor/kernels.h"
#include "tensor/types.h"

#include <math.h>
#include <string.h>

#define F16_MAX 65504.0f

uint64_t kld_kv_mlx_row_bytes(int bits, int group, int64_t n) {
    return (uint64_t)n * (uint64_t)bits / 8 + 4 * (uint64_t)(n / group);
}

/* float16 of v, saturated at ±65504 (a cache value past the f16 range
 * keeps a finite scale rather than an infinite one). */
static uint16_t to_f16_sat(float v) {
    if (v > F16_MAX) v = F16_MAX;
    if (v < -F16_MAX) v = -F16_MAX;
    return kld_f32_to_f16(v);
}

static void put_u16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static uint16_t get_u16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

void kld_kv_mlx_store(int bits, int group, const float *x, uint8_t *dst, int64_t n) {
    const float n_bins = (float)((1 << bits) - 1), eps = 1e-7f;
    const int64_t ng = n / group;
    uint8_t *scales = dst + (uint64_t)n * (uint64_t)bits / 8, *biases = scales + 2 * ng;
    kv_bit_writer w = {dst, 0, 0};
    for (int64_t g = 0; g < ng; g++) {
        const float *v = x + g * group;
        float lo = INFINITY, hi = -INFINITY;
        for (int j = 0; j < group; j++) {
            hi = fmaxf(hi, v[j]);
            lo = fminf(lo, v[j]);
        }
        const bool low_edge = fabsf(lo) > fabsf(hi);
        float scale = fmaxf((hi - lo) / n_bins, eps);
        if (!low_edge) scale = -scale;
        const float edge = low_edge ? lo : hi;
        const float q0 = nearbyintf(edge / scale);
        float bias = 0;
        if (q0 != 0) {
            scale = edge / q0;
            bias = edge;
        }
        for (int j = 0; j < group; j++) {
            float q = nearbyintf((v[j] - bias) / scale);
            q = fminf(fmaxf(q, 0.0f), n_bins);
            kv_bits_put(&w, (uint32_t)q, bits);
        }
        put_u16(scales + 2 * g, to_f16_sat(scale));
        put_u16(biases + 2 * g, to_f16_sat(bias));
    }
    kv_bits_flush(&w);
}

void kld_kv_mlx_load(int bits, int group, const uint8_t *src, float *dst, int64_t n) {
    const int64_t ng = n / group;
    const uint8_t *scales = src + (uint64_t)n * (uint64_t)bits / 8, *biases = scales + 2 * ng;
    kv_bit_reader r = {src, 0, 0};
    for (int64_t g = 0; g < ng; g++) {
        const float s = kld_half_to_float(get_u16(scales + 2 * g));
        const float b = kld_half_to_float(get_u16(biases + 2 * g));
        for (int j = 0; j < group; j++) dst[g * group + j] = s * (float)kv_bits_get(&r, bits) + b;
    }
}
