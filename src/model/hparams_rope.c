/* hparams_rope.c — RoPE scaling hyper-parameters: the GGUF keys as
 * llama.cpp c392e50 reads them (src/llama-model.cpp 451-471, context
 * defaults in src/llama.cpp 9620-9640) and config.json "rope_scaling" as
 * transformers' modeling_rope_utils reads it. The per-dimension factors
 * themselves are computed in rope.c. */
#include "model/hparams_internal.h"

#include <math.h>
#include <stdio.h>

/* ---- GGUF ---- */

static kld_status gguf_num(const kld_source *src, const char *arch, kld_arch_key_id suffix,
                           double *out, bool *found, kld_error *err) {
    char key[160];
    kld_arch_key(key, sizeof key, arch, suffix);
    const kld_gguf_kv *kv = kld_gguf_find(src->gguf, key);
    if (found) *found = kv != NULL;
    if (!kv) return KLD_OK;
    if (!kld_gguf_get_float(src->gguf, key, out))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s' has type %s, expected a number",
                        src->path, key, kld_gguf_vtype_name(kv->value.type));
    return KLD_OK;
}

kld_status kld_hp_gguf_rope_scaling(const kld_source *src, kld_hparams *hp, kld_error *err) {
    const char *arch = hp->arch;
    char key[160];
    kld_status st;
    /* n_ctx_orig_yarn defaults to the training context (llama-model.cpp 451-452). */
    hp->rope_orig_ctx = hp->n_ctx_train;
    double orig = 0, factor = 0;
    bool has_orig = false, has_factor = false;
    if ((st = gguf_num(src, arch, KLD_K_ROPE_SCALING_ORIG_CTX, &orig, &has_orig, err)) ||
        (st = gguf_num(src, arch, KLD_K_ROPE_SCALING_ATTN_FACTOR, &hp->rope_attn_factor, NULL, err)) ||
        (st = gguf_num(src, arch, KLD_K_ROPE_SCALING_FACTOR, &factor, &has_factor, err)))
        return st;
    if (has_orig) {
        if (!(orig >= 1 && orig <= (double)(INT64_C(1) << 30)) || orig != floor(orig))
            return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s.rope.scaling.original_context_"
                            "length' = %g is not a context length", src->path, arch, orig);
        hp->rope_orig_ctx = (int64_t)orig;
    }
    /* the old key name of the factor (llama-model.cpp 465-467) */
    if (!has_factor && (st = gguf_num(src, arch, KLD_K_ROPE_SCALE_LINEAR, &factor, NULL, err))) return st;

    /* An absent type means "linear" (llama-model.cpp 458-461); llama.cpp
     * asserts on any spelling outside its table (lines 94-108). */
    const char *type = "linear";
    kld_str ts;
    kld_arch_key(key, sizeof key, arch, KLD_K_ROPE_SCALING_TYPE);
    const kld_gguf_kv *tkv = kld_gguf_find(src->gguf, key);
    if (tkv && !kld_gguf_get_str(src->gguf, key, &ts))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s' has type %s, expected a string",
                        src->path, key, kld_gguf_vtype_name(tkv->value.type));
    if (tkv) {
        static const char *const known[] = {"none", "linear", "yarn", "longrope"};
        type = NULL;
        for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
            if (kld_str_eq(ts, known[i])) type = known[i];
        if (!type)
            return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: GGUF key '%s' = '%.*s' is not a RoPE "
                            "scaling type (none, linear, yarn, longrope)", src->path, key,
                            (int)(ts.len > 32 ? 32 : ts.len), ts.ptr);
    }
    if (factor != 0) {
        kld_arch_key(key, sizeof key, arch, KLD_K_ROPE_SCALING_FACTOR);
        if ((st = kld_hp_check_positive(src->path, key, factor, err))) return st;
    }
    /* freq_scale = 1/factor, except that "none" never scales (llama.cpp 9631-9633). */
    if (strcmp(type, "none") != 0 && factor != 0) hp->rope_freq_scale = 1.0 / factor;
    const char *name = strcmp(type, "none") == 0 || factor == 0 ? "none" : type;
    if (!strcmp(type, "longrope")) name = "longrope";
    if (!strcmp(type, "yarn")) {
        /* ext_factor 1 for YaRN, betas 32 / 1 (llama.cpp 9347-9351, 9635-9637);
         * ggml's rope_yarn multiplies the magnitude by 1 + 0.1·ln(1/freq_scale). */
        name = "yarn";
        hp->rope_yarn_beta_fast = 32;
        hp->rope_yarn_beta_slow = 1;
        hp->rope_yarn_truncate = true;
        hp->rope_yarn_hf_ramp = false;
        hp->rope_attn_factor *= 1.0 + 0.1 * log(1.0 / hp->rope_freq_scale);
    }
    char tn[64];
    if (kld_source_find(src, kld_tn(tn, sizeof tn, KLD_T_ROPE_FREQS, 0, 0, "weight")) && strcmp(name, "yarn") != 0)
        name = "llama3";
    if (kld_source_find(src, kld_tn(tn, sizeof tn, KLD_T_ROPE_FACTORS_LONG, 0, 0, "weight"))) name = "longrope";
    snprintf(hp->rope_scaling, sizeof hp->rope_scaling, "%s", name);
    return KLD_OK;
}

/* ---- config.json ---- */

/* transformers' get_mscale: 0.1·m·ln(s) + 1 above s = 1. */
static double yarn_mscale(double s, double m) { return s <= 1 ? 1.0 : 0.1 * m * log(s) + 1.0; }

static kld_status hf_yarn(const json_t *rs, const char *path, kld_hparams *hp, kld_error *err) {
    double factor = 0, orig = (double)hp->n_ctx_train, attn = 0, mscale = 0, mscale_all = 0;
    double fast = 0, slow = 0;
    bool truncate = true;
    kld_status st;
    if ((st = kld_hp_json_num(rs, path, "factor", true, &factor, err)) ||
        (st = kld_hp_check_positive(path, "rope_scaling.factor", factor, err)) ||
        (st = kld_hp_json_num(rs, path, "original_max_position_embeddings", false, &orig, err)) ||
        (st = kld_hp_check_positive(path, "rope_scaling.original_max_position_embeddings", orig, err)) ||
        (st = kld_hp_json_num(rs, path, "attention_factor", false, &attn, err)) ||
        (st = kld_hp_json_num(rs, path, "mscale", false, &mscale, err)) ||
        (st = kld_hp_json_num(rs, path, "mscale_all_dim", false, &mscale_all, err)) ||
        (st = kld_hp_json_num(rs, path, "beta_fast", false, &fast, err)) ||
        (st = kld_hp_json_num(rs, path, "beta_slow", false, &slow, err)) ||
        (st = kld_hp_json_bool(rs, path, "truncate", &truncate, err)))
        return st;
    if (orig != floor(orig) || orig > (double)(INT64_C(1) << 30))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: rope_scaling.original_max_position_embeddings = "
                        "%g is not a context length", path, orig);
    if (attn == 0) /* "attention_factor" absent: the paper's default */
        attn = mscale != 0 && mscale_all != 0 ? yarn_mscale(factor, mscale) / yarn_mscale(factor, mscale_all)
                                              : yarn_mscale(factor, 1);
    if ((st = kld_hp_check_positive(path, "rope_scaling.attention_factor", attn, err))) return st;
    /* `beta_fast or 32`: a zero counts as absent, as in transformers */
    hp->rope_yarn_beta_fast = fast != 0 ? fast : 32;
    hp->rope_yarn_beta_slow = slow != 0 ? slow : 1;
    if ((st = kld_hp_check_positive(path, "rope_scaling.beta_fast", hp->rope_yarn_beta_fast, err)) ||
        (st = kld_hp_check_positive(path, "rope_scaling.beta_slow", hp->rope_yarn_beta_slow, err)))
        return st;
    hp->rope_yarn_truncate = truncate;
    hp->rope_yarn_hf_ramp = true;
    hp->rope_freq_scale = 1.0 / factor;
    hp->rope_attn_factor = attn;
    hp->rope_orig_ctx = (int64_t)orig;
    snprintf(hp->rope_scaling, sizeof hp->rope_scaling, "yarn");
    return KLD_OK;
}

kld_status kld_hp_hf_rope_scaling(const json_t *cfg, const char *path, kld_hparams *hp,
                                  kld_error *err) {
    const json_t *rs = json_object_get(cfg, "rope_scaling");
    if (!rs || json_is_null(rs)) return KLD_OK;
    if (!json_is_object(rs))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: \"rope_scaling\" must be an object", path);
    const json_t *t = json_object_get(rs, "rope_type");
    if (!t) t = json_object_get(rs, "type");
    const char *type = json_is_string(t) ? json_string_value(t) : NULL;
    if (!type)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: \"rope_scaling\" has no \"rope_type\"", path);
    kld_status st;
    if (strcmp(type, "default") == 0) return KLD_OK;
    double factor = 0;
    if (strcmp(type, "linear") == 0) {
        if ((st = kld_hp_json_num(rs, path, "factor", true, &factor, err)) ||
            (st = kld_hp_check_positive(path, "rope_scaling.factor", factor, err)))
            return st;
        hp->rope_freq_scale = 1.0 / factor;
        snprintf(hp->rope_scaling, sizeof hp->rope_scaling, "linear");
        return KLD_OK;
    }
    if (strcmp(type, "yarn") == 0) return hf_yarn(rs, path, hp, err);
    if (strcmp(type, "dynamic") == 0) {
        /* Dynamic NTK rescales the base only once the sequence outgrows
         * max_position_embeddings; below that it is the default RoPE
         * (rope.c refuses a longer session). */
        if ((st = kld_hp_json_num(rs, path, "factor", true, &hp->rope_factor, err)) ||
            (st = kld_hp_check_positive(path, "rope_scaling.factor", hp->rope_factor, err)))
            return st;
        snprintf(hp->rope_scaling, sizeof hp->rope_scaling, "dynamic");
        return KLD_OK;
    }
    if (strcmp(type, "llama3") == 0) {
        double orig = 0;
        if ((st = kld_hp_json_num(rs, path, "factor", true, &hp->rope_factor, err)) ||
            (st = kld_hp_json_num(rs, path, "low_freq_factor", true, &hp->rope_low_freq_factor, err)) ||
            (st = kld_hp_json_num(rs, path, "high_freq_factor", true, &hp->rope_high_freq_factor, err)) ||
            (st = kld_hp_json_num(rs, path, "original_max_position_embeddings", true, &orig, err)) ||
            (st = kld_hp_check_positive(path, "rope_scaling.factor", hp->rope_factor, err)) ||
            (st = kld_hp_check_positive(path, "rope_scaling.low_freq_factor", hp->rope_low_freq_factor, err)) ||
            (st = kld_hp_check_positive(path, "rope_scaling.original_max_position_embeddings", orig, err)))
            return st;
        if (!(hp->rope_high_freq_factor > hp->rope_low_freq_factor))
            return kld_fail(err, KLD_ERR_FORMAT, "%s: rope_scaling.high_freq_factor %g must exceed "
                            "low_freq_factor %g", path, hp->rope_high_freq_factor, hp->rope_low_freq_factor);
        hp->rope_orig_ctx = (int64_t)orig;
        snprintf(hp->rope_scaling, sizeof hp->rope_scaling, "llama3");
        return KLD_OK;
    }
    if (strcmp(type, "longrope") == 0 || strcmp(type, "su") == 0) {
        double orig = 0;
        if ((st = kld_hp_json_num(rs, path, "original_max_position_embeddings", false, &orig, err)) ||
            (st = kld_hp_json_num(cfg, path, "original_max_position_embeddings", orig == 0, &orig, err)) ||
            (st = kld_hp_check_positive(path, "original_max_position_embeddings", orig, err)))
            return st;
        hp->rope_orig_ctx = (int64_t)orig;
        double attn = 0;
        if ((st = kld_hp_json_num(rs, path, "attention_factor", false, &attn, err))) return st;
        if (attn == 0) {
            /* Phi-3's LongRoPE: sqrt(1 + ln(s)/ln(orig)) with s = max_pos / orig. */
            double s = (double)hp->n_ctx_train / orig;
            attn = s <= 1 ? 1.0 : sqrt(1 + log(s) / log(orig));
        }
        hp->rope_attn_factor = attn;
        snprintf(hp->rope_scaling, sizeof hp->rope_scaling, "longrope");
        return KLD_OK; /* the factor arrays are read by model/rope.c */
    }
    return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: rope_scaling.rope_type '%.32s' is not supported "
                    "(supported: default, linear, dynamic, yarn, llama3, longrope)", path, type);
}
