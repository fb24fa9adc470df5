/* rope.c — frequency factors of the long-context RoPE variants, from a
 * GGUF factor tensor or computed from config.json, and YaRN's per-dimension
 * blend of interpolated and extrapolated frequencies. */
#include "model/rope.h"

#include <inttypes.h>
#include <math.h>

static kld_status from_tensor(const kld_source *src, const kld_tensor *t, int64_t half, float *out,
                              kld_error *err) {
    const kld_type_info *ti = kld_type_info_get(t->type);
    if (!ti || !ti->to_float_ref || half % ti->block_size != 0)
        return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: tensor '%s': unsupported type for RoPE "
                        "factors", src->path, t->name);
    kld_type_kernels_of(ti)->to_float(t->data, out, half);
    for (int64_t i = 0; i < half; i++)
        if (!(out[i] > 0) || !isfinite(out[i]))
            return kld_fail(err, KLD_ERR_FORMAT, "%s: tensor '%s'[%" PRId64 "] = %g is not a "
                            "positive factor", src->path, t->name, i, (double)out[i]);
    return KLD_OK;
}

/* transformers' _compute_llama3_parameters, expressed as divisors. */
static void llama3_factors(const kld_hparams *hp, int64_t half, float *out) {
    const double lo_wavelen = (double)hp->rope_orig_ctx / hp->rope_low_freq_factor;
    const double hi_wavelen = (double)hp->rope_orig_ctx / hp->rope_high_freq_factor;
    for (int64_t i = 0; i < half; i++) {
        double freq = pow(hp->rope_freq_base, -2.0 * (double)i / (double)hp->n_rot);
        double wavelen = 2 * M_PI / freq;
        double f = 1.0;
        if (wavelen > lo_wavelen) f = hp->rope_factor;
        else if (wavelen >= hi_wavelen) {
            double smooth = ((double)hp->rope_orig_ctx / wavelen - hp->rope_low_freq_factor) /
                            (hp->rope_high_freq_factor - hp->rope_low_freq_factor);
            f = 1.0 / ((1 - smooth) / hp->rope_factor + smooth);
        }
        out[i] = (float)f;
    }
}

static kld_status from_config_array(const kld_source *src, const char *key, int64_t half,
                                    float *out, kld_error *err) {
    const json_t *cfg = src->hf_config;
    const json_t *tc = json_object_get(cfg, "text_config");
    if (json_is_object(tc)) cfg = tc;
    const json_t *arr = json_object_get(json_object_get(cfg, "rope_scaling"), key);
    if (!json_is_array(arr) || (int64_t)json_array_size(arr) != half)
        return kld_fail(err, KLD_ERR_FORMAT, "%s/config.json: rope_scaling.%s must be an array "
                        "of %" PRId64 " numbers", src->dir, key, half);
    for (int64_t i = 0; i < half; i++) {
        const json_t *v = json_array_get(arr, (size_t)i);
        double d = json_is_number(v) ? json_number_value(v) : -1;
        if (!(d > 0) || !isfinite(d))
            return kld_fail(err, KLD_ERR_FORMAT, "%s/config.json: rope_scaling.%s[%" PRId64
                            "] is not a positive number", src->dir, key, i);
        out[i] = (float)d;
    }
    return KLD_OK;
}

/* YaRN's correction dimension of `rotations` turns over the original
 * context (ggml_rope_yarn_corr_dim, ggml.c 3695-3697; transformers'
 * find_correction_dim). */
static double yarn_corr_dim(const kld_hparams *hp, double rotations) {
    return (double)hp->n_rot * log((double)hp->rope_orig_ctx / (rotations * 2 * M_PI)) /
           (2 * log(hp->rope_freq_base));
}

/* Dimension i's frequency is interpolated (× freq_scale) below the ramp and
 * extrapolated (unscaled) above it: θ = θ_extrap·(s·(1 − mix) + mix) with
 * mix = 1 − clamp((i − low)/(high − low), 0, 1) (ggml-cpu.c 9268-9290,
 * ggml.c 3699-3707; transformers' _compute_yarn_parameters). As a divisor
 * of pos·s·base^(−2i/n): s / (s·(1 − mix) + mix), times any factor tensor's. */
static void yarn_factors(const kld_hparams *hp, int64_t half, float *out) {
    double low = yarn_corr_dim(hp, hp->rope_yarn_beta_fast);
    double high = yarn_corr_dim(hp, hp->rope_yarn_beta_slow);
    if (hp->rope_yarn_truncate) {
        low = floor(low);
        high = ceil(high);
    }
    low = fmax(0, low);
    high = fmin((double)hp->n_rot - 1, high);
    const double den = hp->rope_yarn_hf_ramp ? (high == low ? 0.001 : high - low)
                                             : fmax(0.001, high - low);
    const double s = hp->rope_freq_scale;
    for (int64_t i = 0; i < half; i++) {
        const double mix = 1 - fmin(1, fmax(0, ((double)i - low) / den));
        out[i] = (float)((double)out[i] * s / (s * (1 - mix) + mix));
    }
}

kld_status kld_rope_factors(const kld_source *src, const kld_hparams *hp, const kld_weights *w,
                            int64_t n_ctx, float *out, kld_error *err) {
    const int64_t half = hp->n_rot / 2;
    for (int64_t i = 0; i < half; i++) out[i] = 1.0f;
    kld_status st = KLD_OK;
    if (!strcmp(hp->rope_scaling, "dynamic") && n_ctx > hp->n_ctx_train)
        return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: rope_scaling 'dynamic': a context of %"
                        PRId64 " exceeds max_position_embeddings %" PRId64 ", beyond which "
                        "transformers rescales the base by the running sequence length (not "
                        "supported)", src->path, n_ctx, hp->n_ctx_train);
    bool use_long = hp->rope_orig_ctx > 0 && n_ctx > hp->rope_orig_ctx;
    if (w->rope_long || w->rope_short) {
        const kld_tensor *t = use_long && w->rope_long ? w->rope_long
                              : w->rope_short        ? w->rope_short
                                                     : w->rope_long;
        st = from_tensor(src, t, half, out, err);
    } else if (w->rope_freqs) {
        st = from_tensor(src, w->rope_freqs, half, out, err);
    } else if (src->format == KLD_FORMAT_SAFETENSORS && strcmp(hp->rope_scaling, "llama3") == 0) {
        llama3_factors(hp, half, out);
    } else if (src->format == KLD_FORMAT_SAFETENSORS && strcmp(hp->rope_scaling, "longrope") == 0) {
        st = from_config_array(src, use_long ? "long_factor" : "short_factor", half, out, err);
    }
    if (st == KLD_OK && !strcmp(hp->rope_scaling, "yarn")) yarn_factors(hp, half, out);
    return st;
}
