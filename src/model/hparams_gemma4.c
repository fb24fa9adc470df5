/* hparams_gemma4.c — Gemma 4's GGUF keys (llama.cpp 2026
 * llama_model_gemma4::load_arch_hparams and the common loader): the
 * window pattern (per-layer flags, required), the sliding layers' head
 * size and rotary dims, KV sharing and per-layer embeddings. The engine
 * runs the dense text model with one head size on every layer; what it
 * does not run yet is refused by key and value, never approximated. */
#include "model/hparams_internal.h"

#include <inttypes.h>
#include <stdio.h>

/* The integer key "<arch>.<id>" into *out (left as is when absent and not required), its
 * name in key; an array (per-layer values) is refused. */
static kld_status g4_int(const kld_source *src, const kld_hparams *hp, kld_arch_key_id id,
                         bool required, int64_t *out, char *key, size_t cap, kld_error *err) {
    kld_arch_key(key, cap, hp->arch, id);
    const kld_gguf_kv *kv = kld_gguf_find(src->gguf, key);
    if (!kv) {
        if (required)
            return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s' is missing (required for %s)",
                            src->path, key, hp->arch);
        return KLD_OK;
    }
    if (!kld_gguf_get_int(src->gguf, key, out))
        return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: GGUF key '%s' has type %s: per-layer values "
                        "are not supported for %s (one value for every layer only)", src->path, key,
                        kld_gguf_vtype_name(kv->value.type), hp->arch);
    return KLD_OK;
}

kld_status kld_hp_gguf_gemma4(const kld_source *src, kld_hparams *hp, kld_error *err) {
    char key[160];
    kld_status st;
    /* llama.cpp requires the pattern and the window (get_key_or_arr / get_key without a default) */
    kld_arch_key(key, sizeof key, hp->arch, KLD_K_SLIDING_WINDOW_PATTERN);
    if (!kld_gguf_find(src->gguf, key))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s' is missing (required for %s)",
                        src->path, key, hp->arch);
    /* llama.cpp reads one flag per layer; a single value would set every layer's flag, not a period */
    if (hp->swa_pattern != -2)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s' must be an array of %" PRId64 " per-layer "
                        "flags for %s", src->path, key, hp->n_layer, hp->arch);
    int64_t window = 0;
    if ((st = g4_int(src, hp, KLD_K_SLIDING_WINDOW, true, &window, key, sizeof key, err))) return st;
    /* per-layer embeddings (E2B, E4B): required key, run only when 0 */
    int64_t per_layer = 0;
    if ((st = g4_int(src, hp, KLD_K_EMBD_LENGTH_PER_LAYER, true, &per_layer, key, sizeof key, err)))
        return st;
    if (per_layer != 0)
        return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: GGUF key '%s' = %" PRId64 ": Gemma 4's "
                        "per-layer embeddings are not supported yet (only 0)", src->path, key, per_layer);
    char tn[64];
    if (kld_source_find(src, kld_tn(tn, sizeof tn, KLD_T_PER_LAYER_TOKEN_EMBD, 0, 0, "weight")))
        return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: tensor '%s': Gemma 4's per-layer embeddings are "
                        "not supported yet", src->path, tn);
    int64_t shared = 0;
    if ((st = g4_int(src, hp, KLD_K_SHARED_KV_LAYERS, false, &shared, key, sizeof key, err))) return st;
    if (shared != 0)
        return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: GGUF key '%s' = %" PRId64 ": layers reusing "
                        "an earlier layer's KV cache are not supported yet (only 0)", src->path, key, shared);
    /* the sliding layers' head sizes (required) and rotary dims: the engine has one of each */
    const struct {
        kld_arch_key_id id;
        bool required;
        int64_t want;
        const char *what;
    } same[] = {{KLD_K_KEY_LENGTH_SWA, true, hp->head_dim, "attention.key_length"},
                {KLD_K_VALUE_LENGTH_SWA, true, hp->head_dim_v, "attention.value_length"},
                {KLD_K_ROPE_DIMENSION_COUNT_SWA, false, hp->n_rot, "rope.dimension_count"}};
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        int64_t v = same[i].want;
        if ((st = g4_int(src, hp, same[i].id, same[i].required, &v, key, sizeof key, err))) return st;
        if (v != same[i].want)
            return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: GGUF key '%s' = %" PRId64 " differs from "
                            "%s = %" PRId64 ": per-layer head sizes are not supported yet", src->path,
                            key, v, same[i].what, same[i].want);
    }
    if (hp->head_dim != hp->head_dim_v)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: key_length %" PRId64 " != value_length %" PRId64
                        " (llama.cpp's Gemma 4 requires them equal)", src->path, hp->head_dim, hp->head_dim_v);
    int64_t experts = 0;
    if ((st = g4_int(src, hp, KLD_K_EXPERT_COUNT, false, &experts, key, sizeof key, err))) return st;
    if (experts != 0)
        return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: GGUF key '%s' = %" PRId64 ": Gemma 4's parallel "
                        "dense + mixture-of-experts FFN (26B-A4B) is not supported yet", src->path, key, experts);
    /* full layers need rope_freqs.weight (llama.cpp: required on the first full layer) */
    bool any_full = false;
    for (int64_t il = 0; il < hp->n_layer; il++) any_full |= !kld_hparams_layer_swa(hp, il);
    if (any_full && !kld_source_find(src, kld_tn(tn, sizeof tn, KLD_T_ROPE_FREQS, 0, 0, "weight")))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: tensor 'rope_freqs.weight' is missing (required by "
                        "Gemma 4's full-attention layers, expected shape [%" PRId64 "])", src->path,
                        hp->n_rot / 2);
    snprintf(hp->rope_scaling, sizeof hp->rope_scaling, "proportional");
    hp->attn_scale = 1.0;   /* self.scaling = 1: q and k are RMS-normalised */
    hp->attn_softcap = 0;   /* llama.cpp's Gemma 4 reads no attention soft-cap */
    return KLD_OK;
}
