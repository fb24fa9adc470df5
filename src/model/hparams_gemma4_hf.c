/* hparams_gemma4_hf.c — config.json of Gemma 4's language model
 * (transformers' Gemma4TextConfig: model_type "gemma4_text", or "gemma4"
 * with it in "text_config") read into the values llama.cpp's converter
 * (conversion/gemma.py Gemma4Model over Gemma3Model and
 * TextModel.set_gguf_parameters, unslothai/llama.cpp d32676d) writes as
 * gemma4 GGUF keys, so that the checkpoint runs as its converted GGUF does:
 *  - layer_types → the per-layer window flags, sliding_window;
 *  - global_head_dim → key_length (and rope.dimension_count: proportional
 *    RoPE rotates through rope_freqs), head_dim → key_length_swa, the sliding
 *    layers' rotary dims head_dim × rope_parameters.partial_rotary_factor
 *    (the top level, absent in the released files: all of them);
 *  - rope_parameters.full_attention / sliding_attention .rope_theta;
 *    full_attention must be "proportional": its partial_rotary_factor sets
 *    the rope_freqs tensor the converter generates (1 for the rotated pairs,
 *    1e30 for the others), derived the same way at load (weights.c);
 *  - num_key_value_heads / num_global_key_value_heads → head_count_kv per
 *    layer, use_double_wide_mlp → feed_forward_length per layer (twice as
 *    wide on the KV-sharing layers), num_kv_shared_layers,
 *    hidden_size_per_layer_input;
 *  - the 26B-A4B's experts (enable_moe_block): num_experts, top_k_experts,
 *    moe_intermediate_size; experts.gate_up_proj is read as llama.cpp's
 *    ffn_gate_up_exps (weights.c).
 * Norm weights are used as stored (Gemma4Model's norm_shift is 0). */
#include "model/hparams_internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static kld_status int_in(const json_t *cfg, const char *path, const char *key, bool required, int64_t lo,
                         int64_t hi, int64_t *out, kld_error *err) {
    kld_status st = kld_hp_json_int(cfg, path, key, required, out, err);
    if (st) return st;
    if (*out < lo || *out > hi)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: \"%s\" = %" PRId64 " is out of range [%" PRId64 ", %" PRId64 "]",
                        path, key, *out, lo, hi);
    return KLD_OK;
}

/* rope_parameters.<kind> as an object (NULL when absent); anything else is an error. */
static kld_status rope_kind(const json_t *rp, const char *path, const char *kind, const json_t **out,
                            kld_error *err) {
    *out = NULL;
    const json_t *o = rp ? json_object_get(rp, kind) : NULL;
    if (!o || json_is_null(o)) return KLD_OK;
    if (!json_is_object(o))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: \"rope_parameters.%s\" must be an object", path, kind);
    *out = o;
    return KLD_OK;
}

/* rope_parameters (transformers 5; rope_scaling in older files): the two
 * layer kinds' bases, the full layers' proportional RoPE. */
static kld_status rope(const json_t *cfg, const char *path, kld_hparams *hp, kld_error *err) {
    const json_t *rp = json_object_get(cfg, "rope_parameters");
    if (!rp || json_is_null(rp)) rp = json_object_get(cfg, "rope_scaling");
    if (!rp || json_is_null(rp) || !json_is_object(rp))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: \"rope_parameters\" must be an object with \"full_attention\" "
                        "(llama.cpp's converter reads rope_parameters.full_attention)", path);
    const json_t *full = NULL, *swa = NULL;
    kld_status st;
    if ((st = rope_kind(rp, path, "full_attention", &full, err)) ||
        (st = rope_kind(rp, path, "sliding_attention", &swa, err)))
        return st;
    if (!full)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: \"rope_parameters.full_attention\" is missing (llama.cpp's "
                        "converter requires it)", path);
    const json_t *t = json_object_get(full, "rope_type");
    const char *type = json_is_string(t) ? json_string_value(t) : NULL;
    if (!type || strcmp(type, "proportional") != 0) {
        char *shown = t ? json_dumps(t, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
        st = kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: \"rope_parameters.full_attention.rope_type\" = %.40s: "
                      "llama.cpp's converter requires \"proportional\"", path, shown ? shown : "(missing)");
        free(shown);
        return st;
    }
    double theta = 1e6, prf = 1.0; /* Gemma3Model's default base for the full layers */
    if ((st = kld_hp_json_num(full, path, "rope_theta", false, &theta, err)) ||
        (st = kld_hp_check_positive(path, "rope_parameters.full_attention.rope_theta", theta, err)) ||
        (st = kld_hp_json_num(full, path, "partial_rotary_factor", false, &prf, err)))
        return st;
    const json_t *pv = json_object_get(full, "partial_rotary_factor");
    if (!pv || json_is_null(pv))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: \"rope_parameters.full_attention.partial_rotary_factor\" is "
                        "missing (llama.cpp's converter builds rope_freqs from it)", path);
    if (!(prf > 0 && prf <= 1))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: \"rope_parameters.full_attention.partial_rotary_factor\" = %g "
                        "is out of range (0, 1]", path, prf);
    hp->rope_freq_base = theta;
    /* the converter: int(global_head_dim · factor / 2) pairs rotate, the rest get factor 1e30 */
    hp->rope_freqs_rot_pairs = (int64_t)((double)hp->head_dim * prf / 2);
    if (hp->rope_freqs_rot_pairs < 1)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: \"rope_parameters.full_attention.partial_rotary_factor\" = %g "
                        "rotates no pair of global_head_dim = %" PRId64, path, prf, hp->head_dim);
    if (swa) {
        double base = 0, sprf = 1.0;
        if ((st = kld_hp_json_num(swa, path, "rope_theta", false, &base, err))) return st;
        if (base != 0) {
            if ((st = kld_hp_check_positive(path, "rope_parameters.sliding_attention.rope_theta", base, err)))
                return st;
            hp->rope_freq_base_swa = base;
        }
        /* the converter reads the sliding layers' factor from the top level only */
        if ((st = kld_hp_json_num(swa, path, "partial_rotary_factor", false, &sprf, err))) return st;
        if (sprf != 1.0)
            return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: \"rope_parameters.sliding_attention.partial_rotary_"
                            "factor\" = %g: llama.cpp's converter ignores it (it rotates every sliding dim)",
                            path, sprf);
        const json_t *stype = json_object_get(swa, "rope_type");
        if (stype && !json_is_null(stype) && (!json_is_string(stype) || strcmp(json_string_value(stype), "default")))
            return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: \"rope_parameters.sliding_attention.rope_type\" = "
                            "'%.32s': only \"default\" is converted", path,
                            json_is_string(stype) ? json_string_value(stype) : "?");
    }
    double top = 1.0; /* rope_parameters.partial_rotary_factor: the converter's sliding factor */
    if ((st = kld_hp_json_num(rp, path, "partial_rotary_factor", false, &top, err))) return st;
    if (!(top > 0 && top <= 1))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: \"rope_parameters.partial_rotary_factor\" = %g is out of range "
                        "(0, 1]", path, top);
    hp->n_rot_swa = (int64_t)((double)hp->head_dim_swa * top);
    if (hp->n_rot_swa < 2 || hp->n_rot_swa % 2 != 0)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: \"rope_parameters.partial_rotary_factor\" = %g gives %" PRId64
                        " rotary dims of head_dim = %" PRId64 " (must be even and >= 2)", path, top, hp->n_rot_swa,
                        hp->head_dim_swa);
    snprintf(hp->rope_scaling, sizeof hp->rope_scaling, "proportional");
    return KLD_OK;
}

/* layer_types (required: the converter reads it) and sliding_window. */
static kld_status layers(const json_t *cfg, const char *path, kld_hparams *hp, kld_error *err) {
    static const char *const names[] = {"sliding_attention", "full_attention"};
    static const uint8_t swa[] = {1, 0};
    bool present = false;
    kld_status st = kld_hp_json_layer_types(cfg, path, hp->n_layer, names, swa, 2, hp->layer_swa, &present, err);
    if (st) return st;
    if (!present)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: \"layer_types\" is missing (llama.cpp's converter writes the "
                        "window pattern from it)", path);
    hp->swa_pattern = -2;
    return int_in(cfg, path, "sliding_window", true, 1, INT64_C(1) << 30, &hp->sliding_window, err);
}

/* Head sizes and KV heads per layer kind. */
static kld_status heads(const json_t *cfg, const char *path, kld_hparams *hp, kld_error *err) {
    int64_t hd_swa = 256, hd_full = 0, kv_swa = 0, kv_full = 0;
    kld_status st;
    if ((st = int_in(cfg, path, "head_dim", false, 2, INT64_C(1) << 16, &hd_swa, err))) return st;
    const json_t *g = json_object_get(cfg, "global_head_dim");
    if (!g || json_is_null(g))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: \"global_head_dim\" is missing (the full layers' head size, "
                        "llama.cpp's key_length; head_dim = %" PRId64 " is the sliding layers')", path, hd_swa);
    if ((st = int_in(cfg, path, "global_head_dim", true, 2, INT64_C(1) << 16, &hd_full, err))) return st;
    if (hd_full % 2 != 0)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: \"global_head_dim\" = %" PRId64 " must be even", path, hd_full);
    hp->head_dim = hp->head_dim_v = hp->n_rot = hd_full; /* proportional: rope_freqs leaves pairs unrotated */
    hp->head_dim_swa = hd_swa;
    kv_swa = hp->n_head_kv;
    if ((st = int_in(cfg, path, "num_key_value_heads", false, 1, hp->n_head, &kv_swa, err))) return st;
    kv_full = kv_swa;
    if ((st = int_in(cfg, path, "num_global_key_value_heads", false, 1, hp->n_head, &kv_full, err))) return st;
    const char *bad = hp->n_head % kv_swa ? "num_key_value_heads" : hp->n_head % kv_full ? "num_global_key_value_heads" : NULL;
    if (bad)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: \"%s\" = %" PRId64 " does not divide num_attention_heads = %"
                        PRId64, path, bad, hp->n_head % kv_swa ? kv_swa : kv_full, hp->n_head);
    hp->n_head_kv = kv_swa > kv_full ? kv_swa : kv_full; /* the GGUF reader's largest per-layer value */
    if (kv_swa != kv_full)
        for (int64_t il = 0; il < hp->n_layer; il++)
            hp->layer_n_head_kv[il] = (int32_t)(hp->layer_swa[il] ? kv_swa : kv_full);
    return KLD_OK;
}

/* num_kv_shared_layers (as the GGUF reader checks attention.shared_kv_layers) and the
 * double-wide FFN of the sharing layers. */
static kld_status sharing(const json_t *cfg, const char *path, kld_hparams *hp, kld_error *err) {
    int64_t shared = 0;
    kld_status st = kld_hp_json_int(cfg, path, "num_kv_shared_layers", false, &shared, err);
    if (st) return st;
    if (shared < 0 || shared > hp->n_layer - 2)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: \"num_kv_shared_layers\" = %" PRId64 " is out of range [0, %"
                        PRId64 "] (num_hidden_layers - 2: llama.cpp keeps at least 2 layers with a KV cache)",
                        path, shared, hp->n_layer - 2);
    hp->n_layer_kv = shared > 0 ? hp->n_layer - shared : 0;
    for (int64_t il = hp->n_layer - shared; shared > 0 && il < hp->n_layer; il++) {
        const bool swa = hp->layer_swa[il];
        const int64_t want = hp->n_layer - shared - (swa ? 2 : 1);
        if (kld_hp_kv_source(hp, il) != want || hp->layer_swa[want] != swa)
            return kld_fail(err, KLD_ERR_FORMAT, "%s: \"num_kv_shared_layers\" = %" PRId64 ": layer %" PRId64
                            " (%s) would read layer %" PRId64 "'s KV cache, which is %s (llama.cpp's Gemma 4 needs "
                            "the last two layers with a cache to be sliding, then full: see \"layer_types\")",
                            path, shared, il, swa ? "sliding" : "full", want,
                            hp->layer_swa[want] ? "sliding" : "full");
    }
    bool wide = false;
    if ((st = kld_hp_json_bool(cfg, path, "use_double_wide_mlp", &wide, err))) return st;
    if (wide && shared > 0) {
        for (int64_t il = 0; il < hp->n_layer; il++)
            hp->layer_n_ff[il] = (int32_t)(il < hp->n_layer - shared ? hp->n_ff : 2 * hp->n_ff);
        hp->n_ff *= 2;
    }
    return KLD_OK;
}

/* The first of keys present in cfg (the converter's find_hparam), NULL when none is. */
static const char *first_key(const json_t *cfg, const char *const *keys, int n) {
    for (int i = 0; i < n; i++) {
        const json_t *v = json_object_get(cfg, keys[i]);
        if (v && !json_is_null(v)) return keys[i];
    }
    return NULL;
}

/* The 26B-A4B's experts beside the dense FFN (enable_moe_block): num_experts, top_k_experts,
 * moe_intermediate_size, under any of the names the converter's find_hparam tries. The
 * routing is llama.cpp's gemma4 graph's (softmax, renormalised), which no key changes. */
static kld_status experts(const json_t *cfg, const char *path, kld_hparams *hp, kld_error *err) {
    static const char *const count[] = {"num_local_experts", "num_experts", "n_routed_experts"};
    static const char *const used[] = {"num_experts_per_tok", "num_experts_per_token", "top_k_experts"};
    static const char *const ff[] = {"expert_intermediate_size", "moe_intermediate_size"};
    hp->moe_norm_w = hp->sw.moe_norm_w;
    hp->moe_gating = hp->sw.moe_gating;
    bool moe = false;
    kld_status st = kld_hp_json_bool(cfg, path, "enable_moe_block", &moe, err);
    if (st || !moe) return st;
    const char *kc = first_key(cfg, count, 3), *ku = first_key(cfg, used, 3), *kf = first_key(cfg, ff, 2);
    if (!kc || !ku || !kf)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: \"enable_moe_block\" is true but \"%s\" is missing", path,
                        !kc ? "num_experts" : !ku ? "top_k_experts" : "moe_intermediate_size");
    if ((st = int_in(cfg, path, kc, true, 1, 512, &hp->n_expert, err)) ||
        (st = int_in(cfg, path, ku, true, 1, hp->n_expert, &hp->n_expert_used, err)) ||
        (st = int_in(cfg, path, kf, true, 1, INT64_C(1) << 24, &hp->n_ff_exp, err)))
        return st;
    return KLD_OK;
}

kld_status kld_hp_hf_gemma4(const json_t *cfg, const char *path, kld_hparams *hp, kld_error *err) {
    kld_status st;
    const json_t *sc = json_object_get(cfg, "attn_logit_softcapping");
    if (sc && !json_is_null(sc))
        return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: \"attn_logit_softcapping\" is set: llama.cpp's converter "
                        "refuses it for Gemma 3 / 4 (no attention soft-cap)", path);
    if ((st = experts(cfg, path, hp, err))) return st;
    if ((st = layers(cfg, path, hp, err)) || (st = heads(cfg, path, hp, err)) || (st = sharing(cfg, path, hp, err)) ||
        (st = rope(cfg, path, hp, err)))
        return st;
    int64_t per_layer = 0;
    if ((st = int_in(cfg, path, "hidden_size_per_layer_input", false, 0, hp->n_embd, &per_layer, err))) return st;
    hp->n_embd_per_layer = per_layer;
    hp->attn_scale = 1.0; /* self.scaling = 1: q and k are RMS-normalised */
    hp->attn_softcap = 0;
    return KLD_OK;
}
