/* lcpp_base_encode.c — one record of a llama.cpp `--kl-divergence-base`
 * file from a row of float32 logits, bit for bit as llama-perplexity
 * (c392e50) computes it, so that a base file written by kldeval scores the
 * same in llama-perplexity as one it wrote itself. Reference: c392e50
 * examples/perplexity/perplexity.cpp, nearest_int (lines 70-75) and the
 * uint16 log_softmax overload (77-105); the record size nv (145) and the
 * header writes (465-466, 520-522).
 *
 * Every step below is float32 arithmetic except the sum of exponentials
 * (double) and its logarithm (double, then rounded to float): the widths are
 * part of the format, since the stored scale and min_log_prob are those
 * rounded values. The compiler must not contract a*b+c into an FMA here; the
 * project compiles as ISO C (-std=c17), for which GCC keeps
 * -ffp-contract=off, and this file gets no -mfma. */
#include "store/lcpp_base.h"

#include <math.h>
#include <string.h>

/* Round to the nearest integer, ties to even, the way llama.cpp does it:
 * adding 1.5 * 2^23 leaves the integer in the low mantissa bits (exact for
 * |x| < 2^22; outside that range, e.g. an infinite x when the scale
 * underflows, the same bit pattern gives the same garbage llama.cpp stores,
 * which keeps the two writers identical even there). The result is stored
 * into a uint16 by the caller, i.e. modulo 2^16 as in llama.cpp. */
static int32_t round_like_llamacpp(float x) {
    const float shifted = x + 12582912.0f; /* 0x1.8p23 */
    int32_t bits;
    memcpy(&bits, &shifted, sizeof bits);
    return (bits & 0x007fffff) - 0x00400000;
}

void kld_lcpp_encode_row(const float *logits, int32_t n_vocab, uint16_t *out, double *lse) {
    /* max and min with the comparisons of std::max/std::min (the first
     * element wins ties and NaN comparisons) */
    float max_l = logits[0], min_l = logits[0];
    for (int32_t i = 1; i < n_vocab; i++) {
        if (max_l < logits[i]) max_l = logits[i];
        if (logits[i] < min_l) min_l = logits[i];
    }
    /* the 16-nat window below the maximum: anything lower is code 0 */
    const float floor_l = max_l - 16.0f;
    if (min_l < floor_l) min_l = floor_l;

    double sum = 0.0;
    for (int32_t i = 0; i < n_vocab; i++) sum += (double)expf(logits[i] - max_l);
    const float log_sum = (float)log(sum);
    const float min_log_prob = (min_l - max_l) - log_sum;
    const float scale = (max_l - min_l) / 65535.0f;

    memcpy(out, &scale, sizeof scale);
    memcpy(out + 2, &min_log_prob, sizeof min_log_prob);
    uint16_t *codes = out + 4;
    if (scale != 0.0f) {
        /* llama.cpp multiplies by the float reciprocal; dividing by scale
         * would round differently in the last code */
        const float inv_scale = 1.0f / scale;
        for (int32_t i = 0; i < n_vocab; i++)
            codes[i] = logits[i] > min_l
                           ? (uint16_t)round_like_llamacpp(inv_scale * (logits[i] - min_l))
                           : 0;
    } else {
        memset(codes, 0, (size_t)n_vocab * sizeof *codes);
    }
    if (n_vocab % 2) codes[n_vocab] = 0; /* padding to an even count */
    if (lse) *lse = (double)log_sum;
}
