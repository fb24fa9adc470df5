/* act.c — the act lever: rounding of weight-matmul input rows.
 *
 * act=q8 reproduces what llama.cpp's CPU backend does to the activations
 * before a dot product (ggml-cpu's vec_dot_type of the weight type):
 * f16 weights see f16 activations, bf16 weights bf16, 32-value block types
 * (q4_0, q5_0, q8_0, iq4_nl, ...) q8_0 blocks, 256-value types (k-quants,
 * iq4_xs, ...) q8_K blocks; f32 weights see f32. act=f16 / act=bf16 round
 * every input to that format whatever the weight.
 *
 * Why rounding then the f32 GEMM equals llama.cpp's integer dot products
 * up to summation order: a dequantized q8 activation d·q (d an f16 or f32
 * scale, |q| <= 127) and a dequantized weight are exact float32 values, so
 * both sides multiply the same numbers. Their product is not always
 * representable in float32 (up to 38 significant bits), but the GEMM's fma
 * computes each product exactly before its one rounding, whereas llama.cpp
 * sums the int8 products of a block exactly and rounds once per block.
 * What remains is accumulation rounding (~1 ulp of the running sum per
 * step), orders of magnitude below the 8-bit rounding itself. Not modelled:
 * q4_1/q5_1 weights pair with q8_1, whose offset term uses the f16-rounded
 * block sum d·Σq instead of Σ d·q.
 *
 * The q8_0 rounding is the AVX2 one of ggml-cpu (id = 127/amax, round half
 * to even), which is what an x86 build runs; q8_K is the reference
 * (iscale = -127/max with the signed maximum, d = 1/iscale). */
#include "engine/internal.h"

#include <math.h>

typedef enum act_fmt { FMT_NONE, FMT_BF16, FMT_F16, FMT_Q8_0, FMT_Q8_K } act_fmt;

static act_fmt fmt_for(kld_act_round a, uint32_t weight_type) {
    switch (a) {
    case KLD_ACT_F32: return FMT_NONE;
    case KLD_ACT_BF16: return FMT_BF16;
    case KLD_ACT_F16: return FMT_F16;
    case KLD_ACT_Q8: break;
    }
    if (weight_type == KLD_TYPE_F16) return FMT_F16;
    if (weight_type == KLD_TYPE_BF16) return FMT_BF16;
    const kld_type_info *ti = kld_type_info_get(weight_type);
    if (!ti || !ti->is_quantized) return FMT_NONE;
    return ti->block_size == 32 ? FMT_Q8_0 : FMT_Q8_K;
}

static void round_q8_0(const float *x, float *y, int64_t k) {
    for (int64_t b = 0; b + 32 <= k; b += 32) {
        float amax = 0;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[b + j]));
        const float d = kld_f16_to_f32(kld_f32_to_f16(amax / 127.f));
        const float id = amax != 0.0f ? 127.f / amax : 0.0f;
        for (int j = 0; j < 32; j++) y[b + j] = d * rintf(x[b + j] * id);
    }
}

static void round_q8_K(const float *x, float *y, int64_t k) {
    for (int64_t b = 0; b + 256 <= k; b += 256) {
        float amax = 0, max = 0;
        for (int j = 0; j < 256; j++)
            if (fabsf(x[b + j]) > amax) {
                amax = fabsf(x[b + j]);
                max = x[b + j];
            }
        if (amax == 0) {
            for (int j = 0; j < 256; j++) y[b + j] = 0;
            continue;
        }
        const float iscale = -127.f / max, d = 1 / iscale;
        for (int j = 0; j < 256; j++) {
            float q = rintf(iscale * x[b + j]);
            y[b + j] = d * (q > 127 ? 127 : q);
        }
    }
}

typedef struct act_job {
    act_fmt fmt;
    int64_t n, k, lda, ldo;
    const float *A;
    float *out;
} act_job;

static void act_task(void *ctx, int ith, int nth) {
    const act_job *j = ctx;
    int64_t b, e;
    kld_split(j->n, ith, nth, &b, &e);
    for (int64_t r = b; r < e; r++) {
        const float *x = j->A + r * j->lda;
        float *y = j->out + r * j->ldo;
        switch (j->fmt) {
        case FMT_BF16:
            for (int64_t i = 0; i < j->k; i++) y[i] = kld_bf16_to_f32(kld_f32_to_bf16(x[i]));
            break;
        case FMT_F16:
            for (int64_t i = 0; i < j->k; i++) y[i] = kld_f16_to_f32(kld_f32_to_f16(x[i]));
            break;
        case FMT_Q8_0: round_q8_0(x, y, j->k); break;
        case FMT_Q8_K: round_q8_K(x, y, j->k); break;
        case FMT_NONE: break;
        }
    }
}

bool kld_act_round_vec(kld_act_round a, uint32_t weight_type, const float *x, float *y,
                       int64_t k) {
    act_job j = {fmt_for(a, weight_type), 1, k, k, k, x, y};
    if (j.fmt == FMT_NONE) return false;
    act_task(&j, 0, 1);
    return true;
}

bool kld_act_round_rows(kld_session *s, uint32_t weight_type, int64_t n, int64_t k,
                        const float *A, int64_t lda) {
    const act_fmt f = fmt_for(s->lv.act, weight_type);
    if (f == FMT_NONE || k > s->ar_ld || n <= 0) return false;
    act_job j = {f, n, k, lda, s->ar_ld, A, s->ar};
    kld_pool_run(s->pool, act_task, &j);
    return true;
}
