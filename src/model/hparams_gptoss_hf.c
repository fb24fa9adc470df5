/* hparams_gptoss_hf.c — config.json of gpt-oss (transformers' GptOssConfig,
 * model_type "gpt_oss") read into the values llama.cpp's converter
 * (conversion/gpt_oss.py GptOssModel over TextModel.set_gguf_parameters)
 * writes as gpt-oss GGUF keys, and run as llama.cpp runs that GGUF:
 * YaRN with ggml's ramp (truncated correction dims, betas 32 / 1, magnitude
 * 1 + 0.1·ln factor), the clamped SwiGLU at 7, biases everywhere. What such
 * a GGUF could not carry is refused by name. Defaults are GptOssConfig's
 * (the converter reads config.json through AutoConfig, which fills them). */
#include "model/hparams_internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#define MAX_EXPERTS 512
#define MAX_WINDOW (INT64_C(1) << 30)

static kld_status int_in(const json_t *cfg, const char *path, const char *key, bool required, int64_t lo,
                         int64_t hi, int64_t *out, kld_error *err) {
    kld_status st = kld_hp_json_int(cfg, path, key, required, out, err);
    if (st) return st;
    if (*out < lo || *out > hi)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: \"%s\" = %" PRId64 " is out of range [%" PRId64 ", %" PRId64 "]",
                        path, key, *out, lo, hi);
    return KLD_OK;
}

/* A number llama.cpp's gpt-oss graph fixes: any other value is refused (in = the key's
 * object for messages: "" or "rope_scaling."). */
static kld_status fixed(const json_t *obj, const char *path, const char *in, const char *key, double want,
                        const char *why, kld_error *err) {
    double v = want;
    kld_status st = kld_hp_json_num(obj, path, key, false, &v, err);
    if (st) return st;
    if (fabs(v - want) > 1e-6 * fabs(want))
        return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: \"%s%s\" = %g: %s", path, in, key, v, why);
    return KLD_OK;
}

/* rope_scaling (transformers < 5) or rope_parameters: YaRN only, as the
 * released models and GptOssConfig's default; the GGUF gets its type,
 * factor and original context, and llama.cpp runs ggml's YaRN from them. */
static kld_status yarn(const json_t *cfg, const char *path, kld_hparams *hp, kld_error *err) {
    const json_t *rp = json_object_get(cfg, "rope_parameters");
    if (!rp || json_is_null(rp)) rp = json_object_get(cfg, "rope_scaling");
    double factor = 32, orig = 4096; /* GptOssConfig's defaults */
    kld_status st;
    if (rp && !json_is_null(rp)) {
        if (!json_is_object(rp))
            return kld_fail(err, KLD_ERR_FORMAT, "%s: \"rope_scaling\" must be an object", path);
        const json_t *t = json_object_get(rp, "rope_type");
        if (!t) t = json_object_get(rp, "type");
        const char *type = json_is_string(t) ? json_string_value(t) : "?";
        if (strcmp(type, "yarn") != 0)
            return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: rope_scaling.rope_type '%.32s' is not run for gpt_oss "
                            "(yarn only, as the released models)", path, type);
        static const char *const betas = "llama.cpp's gpt-oss reads no YaRN beta key and runs 32 / 1";
        if ((st = kld_hp_json_num(rp, path, "factor", true, &factor, err)) ||
            (st = kld_hp_check_positive(path, "rope_scaling.factor", factor, err)) ||
            (st = kld_hp_json_num(rp, path, "original_max_position_embeddings", true, &orig, err)) ||
            (st = fixed(rp, path, "rope_scaling.", "beta_fast", 32, betas, err)) ||
            (st = fixed(rp, path, "rope_scaling.", "beta_slow", 1, betas, err)) ||
            (st = fixed(rp, path, "rope_scaling.", "attention_factor", 1 + 0.1 * log(factor),
                        "llama.cpp's gpt-oss runs YaRN's magnitude 1 + 0.1·ln(factor)", err)) ||
            (st = kld_hp_json_num(rp, path, "rope_theta", false, &hp->rope_freq_base, err)))
            return st;
        if (!(orig >= 1 && orig <= (double)MAX_WINDOW) || orig != floor(orig))
            return kld_fail(err, KLD_ERR_FORMAT, "%s: rope_scaling.original_max_position_embeddings = %g is not a "
                            "context length", path, orig);
    }
    /* "truncate" is not read: ggml's ramp always floors / ceils the correction dims, so the
     * converted GGUF runs truncated whatever the checkpoint says (the released one: false) */
    hp->rope_freq_scale = 1.0 / factor;
    hp->rope_orig_ctx = (int64_t)orig;
    hp->rope_yarn_beta_fast = 32;
    hp->rope_yarn_beta_slow = 1;
    hp->rope_yarn_truncate = true;
    hp->rope_yarn_hf_ramp = false;
    hp->rope_attn_factor = 1.0 + 0.1 * log(1.0 / hp->rope_freq_scale); /* as the GGUF reader derives it */
    snprintf(hp->rope_scaling, sizeof hp->rope_scaling, "yarn");
    return KLD_OK;
}

/* layer_types (default: even layers sliding, GptOssConfig's list and llama.cpp's set_swa_pattern(2)). */
static kld_status layers(const json_t *cfg, const char *path, kld_hparams *hp, kld_error *err) {
    static const char *const names[] = {"sliding_attention", "full_attention"};
    static const uint8_t swa[] = {1, 0};
    bool present = false;
    kld_status st = kld_hp_json_layer_types(cfg, path, hp->n_layer, names, swa, 2, hp->layer_swa, &present, err);
    if (st) return st;
    hp->swa_pattern = present ? -2 : 2;
    int64_t window = 128;
    if ((st = int_in(cfg, path, "sliding_window", false, 1, MAX_WINDOW, &window, err))) return st;
    hp->sliding_window = window;
    return KLD_OK;
}

kld_status kld_hp_hf_gptoss(const json_t *cfg, const char *path, kld_hparams *hp, kld_error *err) {
    kld_status st;
    /* GptOssConfig's head_dim 64 and 8 KV heads when the file omits them */
    if (!json_object_get(cfg, "head_dim")) hp->head_dim = hp->head_dim_v = hp->n_rot = 64;
    if (!json_object_get(cfg, "num_key_value_heads")) hp->n_head_kv = 8;
    if (!json_object_get(cfg, "rope_theta")) hp->rope_freq_base = 150000;
    if ((st = int_in(cfg, path, "num_local_experts", true, 1, MAX_EXPERTS, &hp->n_expert, err)) ||
        (st = int_in(cfg, path, "num_experts_per_tok", true, 1, hp->n_expert, &hp->n_expert_used, err)))
        return st;
    hp->n_ff_exp = hp->n_ff; /* the converter's expert_feed_forward_length = intermediate_size */
    hp->moe_norm_w = false;
    hp->moe_w_scale = 1.0;
    if ((st = layers(cfg, path, hp, err)) || (st = yarn(cfg, path, hp, err)) ||
        (st = fixed(cfg, path, "", "swiglu_limit", 7, "llama.cpp's gpt-oss clamps the SwiGLU at 7", err)))
        return st;
    bool bias = true;
    if ((st = kld_hp_json_bool(cfg, path, "attention_bias", &bias, err))) return st;
    if (!bias)
        return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: \"attention_bias\" = false: llama.cpp's gpt-oss requires "
                        "the q/k/v/o biases", path);
    /* the released files say mxfp4 (experts as *_blocks / *_scales); none: float experts */
    const json_t *qc = json_object_get(cfg, "quantization_config");
    if (qc && !json_is_null(qc)) {
        const char *m = json_string_value(json_object_get(qc, "quant_method"));
        if (!m || strcmp(m, "mxfp4") != 0)
            return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: quantization_config.quant_method '%.32s' is not read "
                            "(mxfp4 experts or float tensors only)", path, m ? m : "?");
    }
    return KLD_OK;
}
