/* hparams_recurrent.c — the layer layout of hybrid recurrent models: which
 * layers mix positions by attention and which by a recurrent block, and the
 * recurrent blocks' sizes. LFM2 as llama.cpp reads it (src/models/lfm2.cpp
 * load_arch_hparams: "lfm2.shortconv.l_cache" required, layer il is a short
 * convolution iff head_count_kv[il] == 0) and as transformers'
 * Lfm2Config / Lfm2MLP define config.json. */
#include "model/hparams_internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#define MAX_L_CACHE 64 /* widest convolution accepted (LFM2 uses 3) */

/* ---- GGUF ---- */

/* "<arch>.attention.head_count_kv": one integer (every layer attends) or
 * one per layer, 0 for a recurrent layer; the attention layers must agree. */
static kld_status gguf_layer_kinds(const kld_source *src, kld_hparams *hp, kld_error *err) {
    char key[160];
    if (hp->n_layer < 1 || hp->n_layer > KLD_MAX_LAYER)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s.block_count' = %" PRId64 " is out of "
                        "range [1, %d]", src->path, hp->arch, hp->n_layer, KLD_MAX_LAYER);
    kld_arch_key(key, sizeof key, hp->arch, KLD_K_HEAD_COUNT_KV);
    const kld_gguf_kv *kv = kld_gguf_find(src->gguf, key);
    if (!kv)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s' is missing (one entry per layer, 0 "
                        "for a recurrent layer)", src->path, key);
    int64_t v = 0, n_kv = 0;
    if (kld_gguf_get_int(src->gguf, key, &v)) {
        if (v < 0)
            return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s' = %" PRId64 " is negative",
                            src->path, key, v);
        for (int64_t il = 0; il < hp->n_layer; il++)
            hp->layer_kind[il] = (uint8_t)(v == 0 ? hp->hy.recurrent_kind : KLD_LAYER_ATTN);
        hp->n_head_kv = v > 0 ? v : hp->n_head;
        return KLD_OK;
    }
    const kld_gguf_value *arr = kld_gguf_get_arr(src->gguf, key);
    if (!arr)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s' has type %s, expected an integer "
                        "or one integer per layer", src->path, key, kld_gguf_vtype_name(kv->value.type));
    if ((int64_t)arr->v.arr.n != hp->n_layer)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s' has %" PRIu64 " entries for %" PRId64
                        " layers (block_count)", src->path, key, arr->v.arr.n, hp->n_layer);
    for (int64_t il = 0; il < hp->n_layer; il++) {
        if (!kld_gguf_arr_int(arr, (uint64_t)il, &v) || v < 0)
            return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s'[%" PRId64 "] is not a head count",
                            src->path, key, il);
        if (v > 0 && n_kv > 0 && v != n_kv)
            return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: GGUF key '%s'[%" PRId64 "] = %" PRId64
                            ": attention layers with different KV head counts (%" PRId64 ") are not "
                            "supported", src->path, key, il, v, n_kv);
        if (v > 0) n_kv = v;
        hp->layer_kind[il] = (uint8_t)(v == 0 ? hp->hy.recurrent_kind : KLD_LAYER_ATTN);
    }
    hp->n_head_kv = n_kv > 0 ? n_kv : hp->n_head; /* no attention layer: unused */
    return KLD_OK;
}

kld_status kld_hp_gguf_recurrent(const kld_source *src, kld_hparams *hp, kld_error *err) {
    if (hp->hy.recurrent_kind == KLD_LAYER_DELTANET) return kld_hp_gguf_deltanet(src, hp, err);
    kld_status st = gguf_layer_kinds(src, hp, err);
    if (st != KLD_OK || hp->hy.recurrent_kind != KLD_LAYER_SHORTCONV) return st;
    char key[160];
    kld_arch_key(key, sizeof key, hp->arch, KLD_K_SHORTCONV_L_CACHE);
    const kld_gguf_kv *kv = kld_gguf_find(src->gguf, key);
    if (!kv) return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s' is missing", src->path, key);
    if (!kld_gguf_get_int(src->gguf, key, &hp->shortconv_l_cache))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s' has type %s, expected an integer",
                        src->path, key, kld_gguf_vtype_name(kv->value.type));
    if (hp->shortconv_l_cache < 2 || hp->shortconv_l_cache > MAX_L_CACHE)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s' = %" PRId64 " is out of range [2, %d]",
                        src->path, key, hp->shortconv_l_cache, MAX_L_CACHE);
    return KLD_OK;
}

/* ---- config.json ---- */

/* Lfm2MLP: with block_auto_adjust_ff_dim, int(2·ff/3), and with a
 * block_ffn_dim_multiplier (1.0 unless null) int(m·ff) rounded up to
 * block_multiple_of. (llama.cpp's converter rounds even without the
 * multiplier; transformers, whose semantics an HF checkpoint has, does not.) */
static kld_status hf_ff_dim(const json_t *cfg, const char *path, kld_hparams *hp, kld_error *err) {
    int64_t ff = 0, multiple_of = 256;
    bool adjust = true;
    double mult = 1.0;
    kld_status st;
    if ((st = kld_hp_json_int(cfg, path, "intermediate_size", false, &ff, err)) ||
        (st = kld_hp_json_int(cfg, path, "block_ff_dim", false, &ff, err)) ||
        (st = kld_hp_json_bool(cfg, path, "block_auto_adjust_ff_dim", &adjust, err)) ||
        (st = kld_hp_json_num(cfg, path, "block_ffn_dim_multiplier", false, &mult, err)) ||
        (st = kld_hp_json_int(cfg, path, "block_multiple_of", false, &multiple_of, err)))
        return st;
    if (ff <= 0)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: \"block_ff_dim\" / \"intermediate_size\" is missing "
                        "or not positive", path);
    const json_t *m = json_object_get(cfg, "block_ffn_dim_multiplier");
    const bool has_mult = !m || !json_is_null(m);
    if (adjust) {
        ff = (int64_t)(2.0 * (double)ff / 3.0);
        if (has_mult) {
            if (!(mult > 0) || !isfinite(mult) || multiple_of < 1 || multiple_of > (INT64_C(1) << 20))
                return kld_fail(err, KLD_ERR_FORMAT, "%s: block_ffn_dim_multiplier %g / "
                                "block_multiple_of %" PRId64 " are out of range", path, mult, multiple_of);
            ff = (int64_t)(mult * (double)ff);
            ff = multiple_of * ((ff + multiple_of - 1) / multiple_of);
        }
    }
    hp->n_ff = ff;
    return KLD_OK;
}

/* "layer_types" ("conv" / "full_attention"), else "full_attn_idxs", else
 * every layer attends (Lfm2Config). */
static kld_status hf_layer_kinds(const json_t *cfg, const char *path, kld_hparams *hp,
                                 kld_error *err) {
    static const char *const names[] = {"conv", "full_attention"};
    static const uint8_t kinds[] = {KLD_LAYER_SHORTCONV, KLD_LAYER_ATTN};
    const json_t *idx = json_object_get(cfg, "full_attn_idxs");
    for (int64_t il = 0; il < hp->n_layer; il++) hp->layer_kind[il] = KLD_LAYER_ATTN;
    bool present;
    kld_status st = kld_hp_json_layer_types(cfg, path, hp->n_layer, names, kinds, 2, hp->layer_kind,
                                            &present, err);
    if (st || present) return st;
    if (idx && !json_is_null(idx)) {
        if (!json_is_array(idx))
            return kld_fail(err, KLD_ERR_FORMAT, "%s: \"full_attn_idxs\" must be an array", path);
        for (int64_t il = 0; il < hp->n_layer; il++) hp->layer_kind[il] = KLD_LAYER_SHORTCONV;
        for (size_t i = 0; i < json_array_size(idx); i++) {
            const json_t *e = json_array_get(idx, i);
            const json_int_t v = json_is_integer(e) ? json_integer_value(e) : -1;
            if (v < 0 || v >= hp->n_layer)
                return kld_fail(err, KLD_ERR_FORMAT, "%s: \"full_attn_idxs\"[%zu] is not a layer "
                                "index below %" PRId64, path, i, hp->n_layer);
            hp->layer_kind[v] = KLD_LAYER_ATTN;
        }
    }
    return KLD_OK;
}

kld_status kld_hp_hf_recurrent(const json_t *cfg, const char *path, kld_hparams *hp,
                               kld_error *err) {
    if (hp->hy.recurrent_kind == KLD_LAYER_DELTANET) return kld_hp_hf_deltanet(cfg, path, hp, err);
    if (hp->hy.recurrent_kind != KLD_LAYER_SHORTCONV) return KLD_OK;
    kld_status st;
    bool conv_bias = false;
    if ((st = hf_ff_dim(cfg, path, hp, err)) ||
        (st = kld_hp_json_bool(cfg, path, "conv_bias", &conv_bias, err)))
        return st;
    if (conv_bias) /* llama.cpp's LFM2 graph has no convolution biases either */
        return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: \"conv_bias\": true is not supported", path);
    hp->norm_eps = 1e-5;
    hp->shortconv_l_cache = 3;
    if ((st = kld_hp_json_num(cfg, path, "norm_eps", false, &hp->norm_eps, err)) ||
        (st = kld_hp_json_int(cfg, path, "conv_L_cache", false, &hp->shortconv_l_cache, err)) ||
        (st = kld_hp_json_bool(cfg, path, "tie_embedding", &hp->tied_output, err)))
        return st;
    if (hp->shortconv_l_cache < 2 || hp->shortconv_l_cache > MAX_L_CACHE)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: \"conv_L_cache\" = %" PRId64 " is out of range "
                        "[2, %d]", path, hp->shortconv_l_cache, MAX_L_CACHE);
    /* Lfm2Config: rope_theta, else theta, else 1e6; configs saved by newer
     * transformers keep it in rope_parameters */
    if (!json_object_get(cfg, "rope_theta")) {
        const json_t *rp = json_object_get(cfg, "rope_parameters");
        hp->rope_freq_base = 1e6;
        if ((st = kld_hp_json_num(cfg, path, "theta", false, &hp->rope_freq_base, err))) return st;
        if (json_is_object(rp) &&
            (st = kld_hp_json_num(rp, path, "rope_theta", false, &hp->rope_freq_base, err)))
            return st;
    }
    return hf_layer_kinds(cfg, path, hp, err);
}

/* ---- shared ---- */

kld_status kld_hp_check_recurrent(const char *path, kld_hparams *hp, kld_error *err) {
    hp->n_layer_attn = 0;
    bool any_conv = false;
    for (int64_t il = 0; il < hp->n_layer; il++) {
        const kld_layer_kind k = kld_hparams_layer_kind(hp, il);
        if (k != KLD_LAYER_ATTN && k != hp->hy.recurrent_kind)
            return kld_fail(err, KLD_ERR_FORMAT, "%s: layer %" PRId64 " has a recurrent kind the "
                            "architecture %s does not have", path, il, hp->arch);
        hp->n_layer_attn += k == KLD_LAYER_ATTN;
        any_conv |= k == KLD_LAYER_SHORTCONV;
    }
    if (any_conv && (hp->shortconv_l_cache < 2 || hp->shortconv_l_cache > MAX_L_CACHE))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: short-convolution width %" PRId64 " is out of range "
                        "[2, %d]", path, hp->shortconv_l_cache, MAX_L_CACHE);
    return KLD_OK;
}

kld_layer_kind kld_hparams_layer_kind(const kld_hparams *hp, int64_t il) {
    if (il < 0 || il >= hp->n_layer || il >= KLD_MAX_LAYER) return KLD_LAYER_ATTN;
    return (kld_layer_kind)hp->layer_kind[il];
}
