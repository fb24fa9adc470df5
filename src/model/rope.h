/* rope.h — per-dimension RoPE frequency divisors ("freq factors") for the
 * long-context schemes: Llama-3.x rope_scaling / rope_freqs.weight and
 * Phi-3 LongRoPE (rope_factors_long/short or config.json arrays). */
#ifndef KLD_MODEL_ROPE_H
#define KLD_MODEL_ROPE_H

#include "model/weights.h"

/* Fills out[0 .. n_rot/2) with the divisor of each rotation frequency
 * (theta_i = pos · freq_scale · base^(-2i/n_rot) / out[i]); all 1 when the
 * model has no such scaling. LongRoPE picks the long factors when the
 * session context n_ctx exceeds the original context, as llama.cpp does. */
kld_status kld_rope_factors(const kld_source *src, const kld_hparams *hp, const kld_weights *w,
                            int64_t n_ctx, float *out, kld_error *err);

#endif
