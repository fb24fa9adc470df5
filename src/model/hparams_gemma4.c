/* hparams_gemma4.c — Gemma 4's GGUF keys (llama.cpp 2026
 * llama_model_gemma4::load_arch_hparams and the common loader): the
 * window pattern (per-layer flags, required), the sliding layers' head
 * size and rotary dims, KV sharing and per-layer embeddings (the per-layer
 * KV head counts and FFN widths are read with the common keys, hparams.c).
 * The 26B-A4B's experts beside the dense FFN: hparams_moe.c reads their
 * keys (softmax routing, renormalised weights, as llama.cpp's gemma4 graph). */
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

/* embedding_length_per_layer_input (required): P > 0 adds per-layer
 * embeddings (E2B, E4B), whose tensors then must be there. */
static kld_status per_layer_embeddings(const kld_source *src, kld_hparams *hp, kld_error *err) {
    char key[160], tn[64];
    int64_t per_layer = 0;
    kld_status st = g4_int(src, hp, KLD_K_EMBD_LENGTH_PER_LAYER, true, &per_layer, key, sizeof key, err);
    if (st) return st;
    if (per_layer < 0 || per_layer > hp->n_embd)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s' = %" PRId64 " is out of range [0, n_embd = %"
                        PRId64 "]", src->path, key, per_layer, hp->n_embd);
    const bool has_table = kld_source_find(src, kld_tn(tn, sizeof tn, KLD_T_PER_LAYER_TOKEN_EMBD, 0, 0, "weight"));
    if (per_layer == 0 && has_table)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: tensor '%s' is present but GGUF key '%s' = 0", src->path, tn, key);
    if (per_layer > 0 && !has_table)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: tensor '%s' is missing (GGUF key '%s' = %" PRId64 ", expected "
                        "shape [%" PRId64 ", n_vocab])", src->path, tn, key, per_layer, per_layer * hp->n_layer);
    hp->n_embd_per_layer = per_layer;
    return KLD_OK;
}

/* attention.shared_kv_layers: the last S layers have no KV cache and read
 * the last earlier one of their kind, which llama.cpp takes to be layer
 * n - S - 2 for a sliding layer and n - S - 1 for a full one. */
static kld_status shared_kv(const kld_source *src, kld_hparams *hp, kld_error *err) {
    char key[160];
    int64_t shared = 0;
    kld_status st = g4_int(src, hp, KLD_K_SHARED_KV_LAYERS, false, &shared, key, sizeof key, err);
    if (st || shared == 0) return st;
    if (shared < 0 || shared > hp->n_layer - 2)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s' = %" PRId64 " is out of range [0, %" PRId64
                        "] (llama.cpp keeps at least 2 layers with a KV cache)", src->path, key, shared,
                        hp->n_layer - 2);
    hp->n_layer_kv = hp->n_layer - shared;
    for (int64_t il = hp->n_layer_kv; il < hp->n_layer; il++) {
        const bool swa = kld_hparams_layer_swa(hp, il);
        const int64_t want = hp->n_layer_kv - (swa ? 2 : 1);
        if (kld_hp_kv_source(hp, il) != want || kld_hparams_layer_swa(hp, want) != swa)
            return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s' = %" PRId64 ": layer %" PRId64 " (%s) would "
                            "read layer %" PRId64 "'s KV cache, which is %s (llama.cpp's Gemma 4 needs the last "
                            "two layers with a cache to be sliding, then full)", src->path, key, shared, il,
                            swa ? "sliding" : "full", want, kld_hparams_layer_swa(hp, want) ? "sliding" : "full");
    }
    return KLD_OK;
}

/* The sliding layers' head size (key_length_swa = value_length_swa, both
 * required) and rotary dims (rope.dimension_count_swa, default the full
 * layers'); the full layers' key_length must equal value_length. */
static kld_status head_sizes(const kld_source *src, kld_hparams *hp, kld_error *err) {
    char key[160], vkey[160];
    int64_t k_swa = 0, v_swa = 0, rot_swa = hp->n_rot;
    kld_status st;
    if ((st = g4_int(src, hp, KLD_K_VALUE_LENGTH_SWA, true, &v_swa, vkey, sizeof vkey, err)) ||
        (st = g4_int(src, hp, KLD_K_KEY_LENGTH_SWA, true, &k_swa, key, sizeof key, err)))
        return st;
    if (hp->head_dim != hp->head_dim_v)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: key_length %" PRId64 " != value_length %" PRId64
                        " (llama.cpp's Gemma 4 requires them equal)", src->path, hp->head_dim, hp->head_dim_v);
    if (k_swa != v_swa)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s' = %" PRId64 " != '%s' = %" PRId64 " (llama.cpp's "
                        "Gemma 4 requires them equal)", src->path, key, k_swa, vkey, v_swa);
    if (k_swa < 2 || k_swa > (INT64_C(1) << 16))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s' = %" PRId64 " is out of range [2, 65536]",
                        src->path, key, k_swa);
    if ((st = g4_int(src, hp, KLD_K_ROPE_DIMENSION_COUNT_SWA, false, &rot_swa, key, sizeof key, err))) return st;
    if (rot_swa < 2 || rot_swa > k_swa || rot_swa % 2 != 0)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s' = %" PRId64 " must be even and in [2, "
                        "key_length_swa = %" PRId64 "]", src->path, key, rot_swa, k_swa);
    hp->head_dim_swa = k_swa;
    hp->n_rot_swa = rot_swa;
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
    if ((st = per_layer_embeddings(src, hp, err)) || (st = shared_kv(src, hp, err)) ||
        (st = head_sizes(src, hp, err)))
        return st;
    for (int64_t il = 0; il < hp->n_layer; il++) {
        const int64_t kv = kld_hp_n_head_kv(hp, il);
        if (hp->n_head % kv != 0) {
            kld_arch_key(key, sizeof key, hp->arch, KLD_K_HEAD_COUNT_KV);
            return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s'[%" PRId64 "] = %" PRId64 " does not divide "
                            "head_count = %" PRId64, src->path, key, il, kv, hp->n_head);
        }
    }
    /* full layers need rope_freqs.weight (llama.cpp: required on the first full layer) */
    char tn[64];
    bool any_full = false;
    for (int64_t il = 0; il < hp->n_layer; il++) any_full |= !kld_hparams_layer_swa(hp, il);
    if (any_full && !kld_source_find(src, kld_tn(tn, sizeof tn, KLD_T_ROPE_FREQS, 0, 0, "weight")))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: tensor 'rope_freqs.weight' is missing (required by "
                        "Gemma 4's full-attention layers, expected shape [%" PRId64 "])", src->path,
                        hp->head_dim / 2);
    snprintf(hp->rope_scaling, sizeof hp->rope_scaling, "proportional");
    hp->attn_scale = 1.0;   /* self.scaling = 1: q and k are RMS-normalised */
    hp->attn_softcap = 0;   /* llama.cpp's Gemma 4 reads no attention soft-cap */
    return KLD_OK;
}
