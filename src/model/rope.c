/* rope.c — frequency factors of the long-context RoPE variants, from a
 * GGUF factor tensor or computed from config.json. */
#include "model/rope.h"

#include <inttypes.h>
#include <math.h>

static kld_status from_tensor(const kld_source *src, const kld_tensor *t, int64_t half, float *out,
                              kld_error *err) {
    const kld_type_info *ti = kld_type_info_get(t->type);
    if (!ti || !ti->to_float || half % ti->block_size != 0)
        return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: tensor '%s': unsupported type for RoPE "
                        "factors", src->path, t->name);
    ti->to_float(t->data, out, half);
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

kld_status kld_rope_factors(const kld_source *src, const kld_hparams *hp, const kld_weights *w,
                            int64_t n_ctx, float *out, kld_error *err) {
    const int64_t half = hp->n_rot / 2;
    for (int64_t i = 0; i < half; i++) out[i] = 1.0f;
    bool use_long = hp->rope_orig_ctx > 0 && n_ctx > hp->rope_orig_ctx;
    if (w->rope_long || w->rope_short) {
        const kld_tensor *t = use_long && w->rope_long ? w->rope_long
                              : w->rope_short        ? w->rope_short
                                                     : w->rope_long;
        return from_tensor(src, t, half, out, err);
    }
    if (w->rope_freqs) return from_tensor(src, w->rope_freqs, half, out, err);
    if (src->format == KLD_FORMAT_SAFETENSORS && strcmp(hp->rope_scaling, "llama3") == 0) {
        llama3_factors(hp, half, out);
        return KLD_OK;
    }
    if (src->format == KLD_FORMAT_SAFETENSORS && strcmp(hp->rope_scaling, "longrope") == 0)
        return from_config_array(src, use_long ? "long_factor" : "short_factor", half, out, err);
    return KLD_OK;
}
