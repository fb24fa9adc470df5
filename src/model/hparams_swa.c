/* hparams_swa.c — which layers use a sliding window, how wide it is, and
 * the RoPE base of the sliding layers: GGUF as llama.cpp reads it (c392e50
 * src/llama-model.cpp; gemma3, absent from c392e50, as the llama.cpp that
 * added it: window pattern 6, sliding-layer base 1e4 and scale 1), and
 * config.json as transformers' configs define it. */
#include "model/hparams_internal.h"

#include <inttypes.h>
#include <stdio.h>

#define MAX_WINDOW (INT64_C(1) << 30)

/* ---- GGUF ---- */

static kld_status gguf_int(const kld_source *src, const char *key, int64_t *out, bool *found,
                           kld_error *err) {
    const kld_gguf_kv *kv = kld_gguf_find(src->gguf, key);
    *found = kv != NULL;
    if (kv && !kld_gguf_get_int(src->gguf, key, out))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s' has type %s, expected an integer",
                        src->path, key, kld_gguf_vtype_name(kv->value.type));
    return KLD_OK;
}

/* Phi-3 files without the key (llama-model.cpp 769-784): llama.cpp's
 * defaults for the known sizes, otherwise an error. */
static kld_status phi3_default_window(const kld_source *src, const char *key, kld_hparams *hp,
                                      kld_error *err) {
    if ((hp->n_layer == 32 || hp->n_layer == 40) && hp->n_ctx_train == 4096) hp->sliding_window = 2047;
    else if (hp->n_layer == 32 && hp->n_head_kv == 32 && hp->n_ctx_train == 131072) hp->sliding_window = 262144;
    else if (hp->n_layer == 40 && hp->n_ctx_train == 131072) hp->sliding_window = 131072;
    else
        return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s' is missing (llama.cpp knows no "
                        "default for %" PRId64 " layers, context %" PRId64 ")", src->path, key,
                        hp->n_layer, hp->n_ctx_train);
    return KLD_OK;
}

/* "<arch>.attention.sliding_window_pattern": a period p (layer il slides
 * iff il % p < p - 1; 0: every layer) or one flag per layer. */
static kld_status gguf_pattern(const kld_source *src, const char *key, kld_hparams *hp,
                               kld_error *err) {
    const kld_gguf_kv *kv = kld_gguf_find(src->gguf, key);
    if (!kv) return KLD_OK;
    int64_t p = 0;
    if (kld_gguf_get_int(src->gguf, key, &p)) {
        if (p < 0 || p > KLD_MAX_LAYER)
            return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s' = %" PRId64 " is not a window "
                            "pattern period", src->path, key, p);
        hp->swa_pattern = (int)p;
        return KLD_OK;
    }
    const kld_gguf_value *arr = kld_gguf_get_arr(src->gguf, key);
    if (!arr)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s' has type %s, expected an integer "
                        "or an array of per-layer flags", src->path, key,
                        kld_gguf_vtype_name(kv->value.type));
    if ((int64_t)arr->v.arr.n != hp->n_layer)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s' has %" PRIu64 " entries for %"
                        PRId64 " layers", src->path, key, arr->v.arr.n, hp->n_layer);
    for (int64_t il = 0; il < hp->n_layer; il++) {
        int64_t v = 0;
        if (!kld_gguf_arr_int(arr, (uint64_t)il, &v) || v < 0 || v > 1)
            return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s'[%" PRId64 "] is not a flag "
                            "(0/1 or bool)", src->path, key, il);
        hp->layer_swa[il] = (uint8_t)v;
    }
    hp->swa_pattern = -2;
    return KLD_OK;
}

kld_status kld_hp_gguf_swa(const kld_source *src, kld_hparams *hp, kld_error *err) {
    /* llama.cpp c392e50 reads no window for llama (Mistral files included),
     * qwen2, qwen3 or gemma (llama-model.cpp 506-560, 722-736): none here. */
    if (hp->sw.swa_pattern < 0) return KLD_OK;
    char key[160];
    bool found = false;
    kld_status st;
    kld_arch_key(key, sizeof key, hp->arch, KLD_K_SLIDING_WINDOW);
    hp->sliding_window = hp->sw.swa_default_window;
    if ((st = gguf_int(src, key, &hp->sliding_window, &found, err))) return st;
    if (!found && !strcmp(hp->arch, "phi3") && (st = phi3_default_window(src, key, hp, err))) return st;
    if (hp->sliding_window < 0 || hp->sliding_window > MAX_WINDOW)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s' = %" PRId64 " is out of range",
                        src->path, key, hp->sliding_window);
    if (hp->sw.swa_pattern == 0) return KLD_OK; /* phi3: every layer, one RoPE */
    /* Interleaved architectures (gemma2, gemma3): the later llama.cpp keys
     * for the layout and the sliding layers' base; real conversions do not
     * write them and get the defaults. */
    kld_arch_key(key, sizeof key, hp->arch, KLD_K_SLIDING_WINDOW_PATTERN);
    if ((st = gguf_pattern(src, key, hp, err))) return st;
    kld_arch_key(key, sizeof key, hp->arch, KLD_K_ROPE_FREQ_BASE_SWA);
    if (kld_gguf_find(src->gguf, key)) {
        if (!kld_gguf_get_float(src->gguf, key, &hp->rope_freq_base_swa))
            return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s' is not a number", src->path, key);
        if ((st = kld_hp_check_positive(src->path, key, hp->rope_freq_base_swa, err))) return st;
    }
    return KLD_OK;
}

/* ---- config.json ---- */

/* "layer_types": one "sliding_attention" / "full_attention" per layer; when
 * present, transformers uses it instead of the pattern keys. */
static kld_status hf_layer_types(const json_t *cfg, const char *path, kld_hparams *hp,
                                 kld_error *err) {
    static const char *const names[] = {"sliding_attention", "full_attention"};
    static const uint8_t swa[] = {1, 0};
    bool present;
    kld_status st = kld_hp_json_layer_types(cfg, path, hp->n_layer, names, swa, 2, hp->layer_swa,
                                            &present, err);
    if (st || !present) return st;
    hp->swa_pattern = -2;
    return KLD_OK;
}

kld_status kld_hp_hf_swa(const json_t *cfg, const char *path, const char *model_type,
                         kld_hparams *hp, kld_error *err) {
    const bool qwen = !strcmp(model_type, "qwen2") || !strcmp(model_type, "qwen3") ||
                      !strcmp(model_type, "qwen2_moe") || !strcmp(model_type, "qwen3_moe");
    const bool gemma_iswa = !strcmp(hp->arch, "gemma2") || !strcmp(hp->arch, "gemma3");
    kld_status st;
    /* Gemma2Config / Gemma3TextConfig default the window to 4096. */
    int64_t window = gemma_iswa && !json_object_get(cfg, "sliding_window") ? 4096 : 0;
    if ((st = kld_hp_json_int(cfg, path, "sliding_window", false, &window, err))) return st;
    if (window < 0 || window > MAX_WINDOW)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: \"sliding_window\" = %" PRId64 " is out of range",
                        path, window);
    if (qwen) {
        /* Qwen2Config / Qwen3Config: the window only with use_sliding_window,
         * on the layers from max_window_layers on (default 28). */
        bool use = false;
        int64_t mwl = 28;
        if ((st = kld_hp_json_bool(cfg, path, "use_sliding_window", &use, err)) ||
            (st = kld_hp_json_int(cfg, path, "max_window_layers", false, &mwl, err)))
            return st;
        if (mwl < 0)
            return kld_fail(err, KLD_ERR_FORMAT, "%s: \"max_window_layers\" = %" PRId64 " is negative",
                            path, mwl);
        if (!use) window = 0;
        for (int64_t il = 0; il < hp->n_layer; il++) hp->layer_swa[il] = il >= mwl;
        hp->swa_pattern = -2;
        if ((st = hf_layer_types(cfg, path, hp, err))) return st;
    } else if (!strcmp(model_type, "mistral") || !strcmp(model_type, "mixtral")) {
        hp->swa_pattern = 0; /* MistralAttention / MixtralAttention: the window on every layer */
    } else if (gemma_iswa) {
        int64_t pattern = hp->swa_pattern;
        if ((st = kld_hp_json_int(cfg, path, "sliding_window_pattern", false, &pattern, err))) return st;
        if (pattern < 0 || pattern > KLD_MAX_LAYER)
            return kld_fail(err, KLD_ERR_FORMAT, "%s: \"sliding_window_pattern\" = %" PRId64
                            " is out of range", path, pattern);
        hp->swa_pattern = (int)pattern;
        if ((st = hf_layer_types(cfg, path, hp, err))) return st;
        if (!strcmp(hp->arch, "gemma3")) {
            double local = 0;
            if ((st = kld_hp_json_num(cfg, path, "rope_local_base_freq", false, &local, err))) return st;
            if (local != 0) {
                if ((st = kld_hp_check_positive(path, "rope_local_base_freq", local, err))) return st;
                hp->rope_freq_base_swa = local;
            }
        }
    } else if (hp->sw.swa_pattern < 0) {
        window = 0; /* llama, gemma: no sliding window in transformers either */
    }
    hp->sliding_window = window;
    return KLD_OK;
}
