/* hparams.c — fills kld_hparams from the three metadata sources: GGUF keys
 * ("<arch>.embedding_length", ...), a Hugging Face config.json, or the
 * llama2.c header. Each value is range-checked here, once, so the engine
 * can size buffers from it without further checks. */
#include "model/hparams_internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_DIM (INT64_C(1) << 20)   /* n_embd, head sizes, n_head */
#define MAX_FF (INT64_C(1) << 24)
#define MAX_VOCAB (INT64_C(1) << 24)
#define MAX_LAYER KLD_MAX_LAYER
#define MAX_CTX (INT64_C(1) << 30)

static void copy_name(char *dst, size_t cap, const char *src, size_t len) {
    if (len >= cap) len = cap - 1;
    memcpy(dst, src, len);
    dst[len] = '\0';
}

/* The last path component of a folder ("models/rand-llama-hf" → "rand-llama-hf"). */
static void folder_name(char *dst, size_t cap, const char *dir) {
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    size_t b = n;
    while (b > 0 && dir[b - 1] != '/') b--;
    copy_name(dst, cap, dir + b, n - b);
}

/* ---- shared validation ---- */

static kld_status check_range(const char *path, const char *key, int64_t v, int64_t lo, int64_t hi,
                              kld_error *err) {
    if (v < lo || v > hi)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: %s = %" PRId64 " is out of range [%" PRId64
                        ", %" PRId64 "]", path, key, v, lo, hi);
    return KLD_OK;
}

kld_status kld_hp_check_positive(const char *path, const char *key, double v, kld_error *err) {
    if (!(v > 0) || !isfinite(v))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: %s = %g must be a positive finite number", path,
                        key, v);
    return KLD_OK;
}

/* Checks shared by all sources (messages use the normalised field names)
 * and derives the defaults that depend on the architecture switches. */
static kld_status finish(const char *path, kld_hparams *hp, kld_error *err) {
    kld_status s;
    if ((s = check_range(path, "n_embd", hp->n_embd, 1, MAX_DIM, err)) ||
        (s = check_range(path, "n_layer", hp->n_layer, 1, MAX_LAYER, err)) ||
        (s = check_range(path, "n_head", hp->n_head, 1, MAX_DIM, err)) ||
        (s = check_range(path, "n_head_kv", hp->n_head_kv, 1, hp->n_head, err)) ||
        (s = check_range(path, "head_dim", hp->head_dim, 1, MAX_DIM, err)) ||
        (s = check_range(path, "head_dim_v", hp->head_dim_v, 1, MAX_DIM, err)) ||
        (s = check_range(path, "n_ff", hp->n_ff, 1, MAX_FF, err)) ||
        (s = check_range(path, "n_vocab", hp->n_vocab, 1, MAX_VOCAB, err)) ||
        (s = check_range(path, "n_ctx_train", hp->n_ctx_train, 1, MAX_CTX, err)) ||
        (s = check_range(path, "n_rot", hp->n_rot, 2, hp->head_dim, err)) ||
        (s = check_range(path, "sliding_window", hp->sliding_window, 0, MAX_CTX, err)))
        return s;
    if (hp->n_head % hp->n_head_kv != 0)
        return kld_fail(err, KLD_ERR_FORMAT,
                        "%s: n_head = %" PRId64 " is not a multiple of n_head_kv = %" PRId64, path,
                        hp->n_head, hp->n_head_kv);
    if (hp->n_rot % 2 != 0)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: n_rot = %" PRId64 " must be even", path,
                        hp->n_rot);
    if ((uint64_t)hp->n_head * (uint64_t)hp->head_dim > (uint64_t)MAX_FF)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: n_head × head_dim is too large", path);
    if ((s = kld_hp_check_positive(path, "norm_eps", hp->norm_eps, err)) ||
        (s = kld_hp_check_positive(path, "rope_freq_base", hp->rope_freq_base, err)) ||
        (s = kld_hp_check_positive(path, "rope_freq_scale", hp->rope_freq_scale, err)) ||
        (s = kld_hp_check_positive(path, "rope_attn_factor", hp->rope_attn_factor, err)) ||
        (s = kld_hp_check_positive(path, "attn_scale", hp->attn_scale, err)))
        return s;
    if (hp->norm_eps >= 1)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: norm_eps = %g is not below 1", path,
                        hp->norm_eps);
    if (!(hp->attn_softcap >= 0) || !isfinite(hp->attn_softcap) || !(hp->final_softcap >= 0) ||
        !isfinite(hp->final_softcap))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: soft-cap values %g / %g must be >= 0", path,
                        hp->attn_softcap, hp->final_softcap);
    /* Sliding layers with their own RoPE (gemma3) are never scaled; the
     * others share the model's base and scale. */
    const bool own_rope = hp->sw.swa_rope_freq_base > 0;
    if (hp->rope_freq_base_swa == 0)
        hp->rope_freq_base_swa = own_rope ? hp->sw.swa_rope_freq_base : hp->rope_freq_base;
    hp->rope_freq_scale_swa = own_rope ? 1.0 : hp->rope_freq_scale;
    if ((s = kld_hp_check_positive(path, "rope_freq_base_swa", hp->rope_freq_base_swa, err)) ||
        (s = kld_hp_check_positive(path, "rope_freq_scale_swa", hp->rope_freq_scale_swa, err)))
        return s;
    if (hp->swa_pattern < -2 || hp->swa_pattern > MAX_LAYER)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: sliding-window pattern %d is out of range",
                        path, hp->swa_pattern);
    if (hp->swa_pattern != -2) {
        const int p = hp->swa_pattern;
        for (int64_t il = 0; il < hp->n_layer; il++)
            hp->layer_swa[il] = p == 0 || (p > 0 && il % p < p - 1);
    }
    if ((s = kld_hp_check_recurrent(path, hp, err)) || (s = kld_hp_check_gated_attn(path, hp, err)))
        return s;
    bool any_swa = false;
    for (int64_t il = 0; il < hp->n_layer; il++) any_swa |= kld_hparams_layer_swa(hp, il);
    /* YaRN's ramp is computed once, for the model's base and scale. */
    if (!strcmp(hp->rope_scaling, "yarn") && any_swa &&
        (hp->rope_freq_base_swa != hp->rope_freq_base || hp->rope_freq_scale_swa != hp->rope_freq_scale))
        return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: yarn RoPE scaling with a separate RoPE base "
                        "for the sliding layers (%g) is not supported", path, hp->rope_freq_base_swa);
    return KLD_OK;
}

static kld_status set_arch(const char *path, const char *arch, size_t len, kld_hparams *hp,
                           kld_error *err) {
    copy_name(hp->arch, sizeof hp->arch, arch, len);
    const kld_arch_switches *sw = len < sizeof hp->arch ? kld_arch_find(hp->arch) : NULL;
    if (!sw)
        return kld_fail(err, KLD_ERR_UNSUPPORTED,
                        "%s: architecture '%.*s' is not supported (supported: %s)", path,
                        (int)(len > 64 ? 64 : len), arch, kld_arch_supported());
    hp->sw = *sw;
    hp->hy = *kld_arch_hybrid_find(hp->arch);
    hp->rope_type = sw->rope_type;
    hp->swa_pattern = sw->swa_pattern;
    hp->moe_gating = sw->moe_gating;
    return KLD_OK;
}

static void set_defaults(kld_hparams *hp) {
    memset(hp, 0, sizeof *hp);
    hp->rope_freq_base = 10000.0;
    hp->rope_freq_scale = 1.0;
    hp->rope_attn_factor = 1.0;
    snprintf(hp->rope_scaling, sizeof hp->rope_scaling, "none");
}

/* Gemma's query scale: 1/sqrt(head_dim), except the 27B sizes which use
 * 1/sqrt(n_embd/n_head) (llama.cpp keys this on the layer count). */
static double gemma_attn_scale(const kld_hparams *hp, int64_t n_layer_27b) {
    if (hp->n_layer == n_layer_27b) return 1.0 / sqrt((double)(hp->n_embd / hp->n_head));
    return 1.0 / sqrt((double)hp->head_dim);
}

/* ---- GGUF ---- */

typedef struct gguf_reader {
    const kld_gguf *g;
    const char *path;
    char arch[32];
    char key[160];
} gguf_reader;

static const char *gkey(gguf_reader *r, kld_arch_key_id id) {
    kld_arch_key(r->key, sizeof r->key, r->arch, id);
    return r->key;
}

/* The integer key "<arch>.<suffix>" into *out. An array of per-layer values is
 * taken when uniform; when its values differ they go to per_layer (one per layer,
 * *out their largest) if the caller takes them (Gemma 4), else it is refused. */
static kld_status g_int_layers(gguf_reader *r, kld_arch_key_id suffix, bool required, int64_t *out,
                               int32_t *per_layer, int64_t n_layer, kld_error *err) {
    const char *key = gkey(r, suffix);
    const kld_gguf_kv *kv = kld_gguf_find(r->g, key);
    if (!kv) {
        if (required) return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s' is missing", r->path, key);
        return KLD_OK;
    }
    if (kld_gguf_get_int(r->g, key, out)) return KLD_OK;
    /* Per-layer arrays (e.g. head_count_kv) are accepted when uniform. */
    const kld_gguf_value *arr = kld_gguf_get_arr(r->g, key);
    if (arr && arr->v.arr.n > 0) {
        int64_t first = 0, v = 0;
        bool ok = kld_gguf_arr_int(arr, 0, &first);
        for (uint64_t i = 1; ok && i < arr->v.arr.n; i++) ok = kld_gguf_arr_int(arr, i, &v) && v == first;
        if (ok) {
            *out = first;
            return KLD_OK;
        }
        if (!per_layer)
            return kld_fail(err, KLD_ERR_UNSUPPORTED,
                            "%s: GGUF key '%s': per-layer values that differ are not supported for %s",
                            r->path, key, r->arch);
        if ((int64_t)arr->v.arr.n != n_layer)
            return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s' has %" PRIu64 " entries for %" PRId64
                            " layers", r->path, key, arr->v.arr.n, n_layer);
        *out = 0;
        for (uint64_t i = 0; i < arr->v.arr.n; i++) {
            if (!kld_gguf_arr_int(arr, i, &v) || v < 1 || v > MAX_FF)
                return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s'[%" PRIu64 "] = %" PRId64
                                " is out of range [1, %" PRId64 "]", r->path, key, i, v, (int64_t)MAX_FF);
            per_layer[i] = (int32_t)v;
            if (v > *out) *out = v;
        }
        return KLD_OK;
    }
    return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s' has type %s, expected an integer",
                    r->path, key, kld_gguf_vtype_name(kv->value.type));
}

static kld_status g_int(gguf_reader *r, kld_arch_key_id suffix, bool required, int64_t *out,
                        kld_error *err) {
    return g_int_layers(r, suffix, required, out, NULL, 0, err);
}

static kld_status g_float(gguf_reader *r, kld_arch_key_id suffix, bool required, double *out,
                          kld_error *err) {
    const char *key = gkey(r, suffix);
    const kld_gguf_kv *kv = kld_gguf_find(r->g, key);
    if (!kv) {
        if (required) return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s' is missing", r->path, key);
        return KLD_OK;
    }
    if (!kld_gguf_get_float(r->g, key, out))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s' has type %s, expected a number",
                        r->path, key, kld_gguf_vtype_name(kv->value.type));
    return KLD_OK;
}

static kld_status read_gguf(const kld_source *src, kld_hparams *hp, kld_error *err) {
    gguf_reader r = {.g = src->gguf, .path = src->path};
    kld_str s;
    if (!kld_gguf_get_str(r.g, "general.architecture", &s))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key 'general.architecture' is missing",
                        src->path);
    kld_status st = set_arch(src->path, s.ptr, (size_t)s.len, hp, err);
    if (st != KLD_OK) return st;
    snprintf(r.arch, sizeof r.arch, "%s", hp->arch);
    if (kld_gguf_get_str(r.g, "general.name", &s)) copy_name(hp->name, sizeof hp->name, s.ptr, (size_t)s.len);
    else folder_name(hp->name, sizeof hp->name, src->dir);

    /* Gemma 4 gives its layers their own FFN widths and KV head counts */
    const bool per_layer = strcmp(hp->arch, "gemma4") == 0;
    if ((st = g_int(&r, KLD_K_EMBEDDING_LENGTH, true, &hp->n_embd, err)) ||
        (st = g_int(&r, KLD_K_BLOCK_COUNT, true, &hp->n_layer, err)))
        return st;
    if (hp->n_layer < 1 || hp->n_layer > KLD_MAX_LAYER)
        return check_range(src->path, gkey(&r, KLD_K_BLOCK_COUNT), hp->n_layer, 1, MAX_LAYER, err);
    if ((st = g_int_layers(&r, KLD_K_FEED_FORWARD_LENGTH, true, &hp->n_ff, per_layer ? hp->layer_n_ff : NULL,
                           hp->n_layer, err)) ||
        (st = g_int(&r, KLD_K_HEAD_COUNT, true, &hp->n_head, err)) ||
        (st = g_int(&r, KLD_K_CONTEXT_LENGTH, true, &hp->n_ctx_train, err)) ||
        (st = g_float(&r, KLD_K_RMS_EPS, true, &hp->norm_eps, err)))
        return st;
    if (hp->n_head < 1) return check_range(src->path, gkey(&r, KLD_K_HEAD_COUNT), hp->n_head, 1, MAX_DIM, err);
    hp->n_head_kv = hp->n_head;
    hp->head_dim = hp->n_embd / hp->n_head;
    /* hybrids give head_count_kv per layer, 0 for the recurrent layers */
    if (hp->hy.recurrent_kind != KLD_LAYER_ATTN) st = kld_hp_gguf_recurrent(src, hp, err);
    else st = g_int_layers(&r, KLD_K_HEAD_COUNT_KV, false, &hp->n_head_kv, per_layer ? hp->layer_n_head_kv : NULL,
                           hp->n_layer, err);
    if (st || (st = g_int(&r, KLD_K_KEY_LENGTH, false, &hp->head_dim, err)))
        return st;
    hp->head_dim_v = hp->head_dim;
    hp->n_rot = hp->head_dim;
    if ((st = g_int(&r, KLD_K_VALUE_LENGTH, false, &hp->head_dim_v, err)) ||
        (st = g_int(&r, KLD_K_ROPE_DIMENSION_COUNT, false, &hp->n_rot, err)) ||
        (st = g_float(&r, KLD_K_ROPE_FREQ_BASE, false, &hp->rope_freq_base, err)) ||
        (st = g_float(&r, KLD_K_ATTN_SOFTCAP, false, &hp->attn_softcap, err)) ||
        (st = g_float(&r, KLD_K_FINAL_SOFTCAP, false, &hp->final_softcap, err)))
        return st;

    /* NextN / MTP layers appended to the stack (glm4moe): loaded by llama.cpp, never run; the
     * hybrids' reader (hparams_deltanet.c) does the same for theirs */
    if (hp->hy.recurrent_kind == KLD_LAYER_ATTN && kld_gguf_find(r.g, gkey(&r, KLD_K_NEXTN_PREDICT_LAYERS))) {
        int64_t nextn = 0;
        if ((st = g_int(&r, KLD_K_NEXTN_PREDICT_LAYERS, true, &nextn, err))) return st;
        if (nextn < 0 || nextn >= hp->n_layer)
            return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s' = %" PRId64 " is out of range [0, %" PRId64 ")",
                            src->path, gkey(&r, KLD_K_NEXTN_PREDICT_LAYERS), nextn, hp->n_layer);
        hp->n_layer -= nextn;
    }
    if ((st = kld_hp_gguf_rope_scaling(src, hp, err)) || (st = kld_hp_gguf_swa(src, hp, err)) ||
        (st = kld_hp_gguf_moe(src, hp, err)))
        return st;

    char tn[64];
    const kld_tensor *emb = kld_source_find(src, kld_tn(tn, sizeof tn, KLD_T_TOKEN_EMBD, 0, 0, "weight"));
    if (!emb)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: tensor 'token_embd.weight' is missing (expected "
                        "shape [%" PRId64 ", n_vocab])", src->path, hp->n_embd);
    hp->n_vocab = emb->ne[1];
    hp->tied_output = kld_source_find(src, kld_tn(tn, sizeof tn, KLD_T_OUTPUT, 0, 0, "weight")) == NULL;

    hp->attn_scale = 1.0 / sqrt((double)(hp->head_dim > 0 ? hp->head_dim : 1));
    if (strcmp(hp->arch, "gemma2") == 0) hp->attn_scale = gemma_attn_scale(hp, 46);
    if (strcmp(hp->arch, "gemma3") == 0) hp->attn_scale = gemma_attn_scale(hp, 62);
    hp->embd_scale = hp->sw.embd_scale ? sqrt((double)hp->n_embd) : 1.0;
    if (hp->sw.mla && (st = kld_hp_gguf_mla(src, hp, err))) return st;
    if (strcmp(hp->arch, "gemma4") == 0 && (st = kld_hp_gguf_gemma4(src, hp, err))) return st;
    return KLD_OK;
}

/* ---- Hugging Face config.json ---- */

typedef struct hf_reader {
    const json_t *cfg;
    const char *path; /* config.json's path for messages */
} hf_reader;

/* A config.json value as its JSON text (cut to 40 characters) for messages. */
static kld_status json_type_error(kld_error *err, const char *path, const char *key, const json_t *v,
                                  const char *want) {
    char *shown = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    const kld_status st = kld_fail(err, KLD_ERR_FORMAT, "%s: \"%s\" must be %s, not %.40s", path, key, want,
                                   shown ? shown : "this value");
    free(shown);
    return st;
}

kld_status kld_hp_json_int(const json_t *obj, const char *path, const char *key, bool required,
                           int64_t *out, kld_error *err) {
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) {
        if (required) return kld_fail(err, KLD_ERR_FORMAT, "%s: \"%s\" is missing", path, key);
        return KLD_OK;
    }
    if (json_is_integer(v)) {
        *out = (int64_t)json_integer_value(v);
        return KLD_OK;
    }
    if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)) &&
        fabs(json_real_value(v)) < 9e15) {
        *out = (int64_t)json_real_value(v);
        return KLD_OK;
    }
    return json_type_error(err, path, key, v, "an integer");
}

kld_status kld_hp_json_layer_types(const json_t *cfg, const char *path, int64_t n_layer,
                                   const char *const *names, const uint8_t *values, int n,
                                   uint8_t *out, bool *present, kld_error *err) {
    const json_t *lt = json_object_get(cfg, "layer_types");
    *present = lt && !json_is_null(lt);
    if (!*present) return KLD_OK;
    if (!json_is_array(lt)) {
        char *shown = json_dumps(lt, JSON_ENCODE_ANY | JSON_COMPACT);
        const kld_status st = kld_fail(err, KLD_ERR_FORMAT, "%s: \"layer_types\" must be an array of %" PRId64
                                       " entries (num_hidden_layers), not %.40s", path, n_layer,
                                       shown ? shown : "a value");
        free(shown);
        return st;
    }
    if ((int64_t)json_array_size(lt) != n_layer)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: \"layer_types\" must be an array of %" PRId64
                        " entries (num_hidden_layers), it has %zu", path, n_layer, json_array_size(lt));
    for (int64_t il = 0; il < n_layer; il++) {
        const char *t = json_string_value(json_array_get(lt, (size_t)il));
        int i = 0;
        while (i < n && !(t && !strcmp(t, names[i]))) i++;
        if (i < n) {
            out[il] = values[i];
            continue;
        }
        char valid[128] = "";
        for (int j = 0; j < n; j++)
            snprintf(valid + strlen(valid), sizeof valid - strlen(valid), "%s%s", j ? ", " : "", names[j]);
        return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: \"layer_types\"[%" PRId64 "] = '%.32s' is "
                        "not a layer type of this architecture (%s)", path, il, t ? t : "?", valid);
    }
    return KLD_OK;
}

kld_status kld_hp_json_all_sparse(const json_t *cfg, const char *path, kld_error *err) {
    int64_t step = 1;
    kld_status st = kld_hp_json_int(cfg, path, "decoder_sparse_step", false, &step, err);
    if (st) return st;
    if (step != 1)
        return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: \"decoder_sparse_step\" = %" PRId64
                        " (dense layers between sparse ones) is not supported", path, step);
    const json_t *mlp_only = json_object_get(cfg, "mlp_only_layers");
    if (mlp_only && !json_is_null(mlp_only) &&
        (!json_is_array(mlp_only) || json_array_size(mlp_only) > 0))
        return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: \"mlp_only_layers\" (dense layers between "
                        "sparse ones) is not supported", path);
    return KLD_OK;
}

kld_status kld_hp_json_num(const json_t *obj, const char *path, const char *key, bool required,
                           double *out, kld_error *err) {
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) {
        if (required) return kld_fail(err, KLD_ERR_FORMAT, "%s: \"%s\" is missing", path, key);
        return KLD_OK;
    }
    if (!json_is_number(v))
        return json_type_error(err, path, key, v, "a number");
    *out = json_number_value(v);
    return KLD_OK;
}

kld_status kld_hp_json_bool(const json_t *obj, const char *path, const char *key, bool *out,
                            kld_error *err) {
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) return KLD_OK;
    if (!json_is_boolean(v))
        return json_type_error(err, path, key, v, "true or false");
    *out = json_is_true(v);
    return KLD_OK;
}

static kld_status j_int(hf_reader *r, const char *key, bool required, int64_t *out, kld_error *err) {
    return kld_hp_json_int(r->cfg, r->path, key, required, out, err);
}

static kld_status j_num(hf_reader *r, const char *key, bool required, double *out, kld_error *err) {
    return kld_hp_json_num(r->cfg, r->path, key, required, out, err);
}

static kld_status j_bool(hf_reader *r, const char *key, bool *out, kld_error *err) {
    return kld_hp_json_bool(r->cfg, r->path, key, out, err);
}

typedef struct hf_arch {
    const char *model_type;
    const char *arch;
    bool tie_default;
    bool rotate_half_from_gguf; /* HF stores q/k for rotate-half where GGUF permutes */
} hf_arch;

static const hf_arch hf_archs[] = {
    {"llama", "llama", false, true},   {"mistral", "llama", false, true},
    {"qwen2", "qwen2", false, false},  {"qwen3", "qwen3", false, false},
    {"phi3", "phi3", false, false},    {"gemma", "gemma", true, false},
    {"gemma2", "gemma2", true, false}, {"gemma3_text", "gemma3", true, false},
    {"gemma3", "gemma3", true, false},
    {"mixtral", "llama", false, true}, {"qwen2_moe", "qwen2moe", false, false},
    {"qwen3_moe", "qwen3moe", false, false}, {"olmoe", "olmoe", false, false},
    {"lfm2", "lfm2", true, false},      {"qwen3_next", "qwen3next", false, false},
    {"qwen3_5_text", "qwen35", false, false}, {"qwen3_5_moe_text", "qwen35moe", false, false},
    {"qwen3_5", "qwen35", false, false}, {"qwen3_5_moe", "qwen35moe", false, false},
    {"glm4_moe", "glm4moe", false, false},
    {"gpt_oss", "gpt-oss", false, false},
    {"deepseek_v3", "deepseek2", false, false}, {"deepseek_v2", "deepseek2", false, false},
    {"gemma4_text", "gemma4", true, false}, {"gemma4", "gemma4", true, false},
};

static kld_status read_hf(const kld_source *src, kld_hparams *hp, kld_error *err) {
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", src->dir);
    if (!src->hf_config)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: safetensors weights need a config.json beside "
                        "them (not found in %s)", src->path, src->dir);
    hf_reader r = {.cfg = src->hf_config, .path = path};
    const json_t *mt = json_object_get(r.cfg, "model_type");
    if (!json_is_string(mt))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: \"model_type\" is missing", path);
    const char *model_type = json_string_value(mt);
    const hf_arch *ha = NULL;
    for (size_t i = 0; i < sizeof hf_archs / sizeof hf_archs[0]; i++)
        if (strcmp(hf_archs[i].model_type, model_type) == 0) ha = &hf_archs[i];
    if (!ha)
        return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: model_type '%.64s' is not supported "
                        "(supported: llama, mistral, qwen2, qwen3, phi3, gemma, gemma2, "
                        "gemma3_text, mixtral, qwen2_moe, qwen3_moe, olmoe, lfm2, "
                        "qwen3_next, qwen3_5_text, qwen3_5_moe_text, qwen3_5, qwen3_5_moe, glm4_moe, gpt_oss, deepseek_v3, deepseek_v2, "
                        "gemma4_text, gemma4)", path, model_type);
    /* A multimodal gemma3 / gemma4 / qwen3_5 / qwen3_5_moe keeps the language model's fields in
     * text_config (the converter's TextModel lifts them to the top; the vision tower is skipped). */
    if (strcmp(model_type, "gemma3") == 0 || strcmp(model_type, "gemma4") == 0 ||
        strcmp(model_type, "qwen3_5") == 0 || strcmp(model_type, "qwen3_5_moe") == 0) {
        const json_t *tc = json_object_get(r.cfg, "text_config");
        if (!json_is_object(tc))
            return kld_fail(err, KLD_ERR_FORMAT, "%s: %s config without \"text_config\"", path, model_type);
        r.cfg = tc;
    }
    kld_status st = set_arch(path, ha->arch, strlen(ha->arch), hp, err);
    if (st != KLD_OK) return st;
    if (ha->rotate_half_from_gguf) hp->rope_type = KLD_ROPE_NEOX;
    folder_name(hp->name, sizeof hp->name, src->dir);
    /* hybrids name some keys their own way (kld_hp_hf_recurrent reads them) */
    const bool own_keys = hp->hy.recurrent_kind != KLD_LAYER_ATTN;

    if ((st = j_int(&r, "hidden_size", true, &hp->n_embd, err)) ||
        (st = j_int(&r, "num_hidden_layers", true, &hp->n_layer, err)) ||
        (st = j_int(&r, "intermediate_size", !own_keys, &hp->n_ff, err)) ||
        (st = j_int(&r, "num_attention_heads", true, &hp->n_head, err)) ||
        (st = j_int(&r, "vocab_size", true, &hp->n_vocab, err)) ||
        (st = j_int(&r, "max_position_embeddings", true, &hp->n_ctx_train, err)) ||
        (st = j_num(&r, "rms_norm_eps", !own_keys, &hp->norm_eps, err)) ||
        (st = j_num(&r, "rope_theta", false, &hp->rope_freq_base, err)))
        return st;
    if (hp->n_head < 1) return check_range(path, "num_attention_heads", hp->n_head, 1, MAX_DIM, err);
    hp->n_head_kv = hp->n_head;
    hp->head_dim = hp->n_embd / hp->n_head;
    if ((st = j_int(&r, "num_key_value_heads", false, &hp->n_head_kv, err)) ||
        (st = j_int(&r, "head_dim", false, &hp->head_dim, err)))
        return st;
    hp->head_dim_v = hp->head_dim;
    hp->n_rot = hp->head_dim;
    double partial = 1.0;
    if ((st = j_num(&r, "partial_rotary_factor", false, &partial, err))) return st;
    if (!(partial > 0 && partial <= 1)) /* else the derived n_rot's range error hides the key */
        return kld_fail(err, KLD_ERR_FORMAT, "%s: \"partial_rotary_factor\" = %g is out of range (0, 1]",
                        r.path, partial);
    if (partial != 1.0) hp->n_rot = (int64_t)((double)hp->head_dim * partial);

    bool tied = ha->tie_default;
    /* Qwen3.5's wrappers keep tie_word_embeddings beside text_config (the converter merges the
     * two, text_config winning) */
    if (!strncmp(model_type, "qwen3_5", 7) && r.cfg != src->hf_config &&
        (st = kld_hp_json_bool(src->hf_config, path, "tie_word_embeddings", &tied, err)))
        return st;
    if ((st = j_bool(&r, "tie_word_embeddings", &tied, err))) return st;
    /* transformers ties the head to the embedding when asked, even when
     * the checkpoint also stores lm_head. */
    hp->tied_output = tied;
    if (hp->n_layer < 1 || hp->n_layer > MAX_LAYER)
        return check_range(path, "num_hidden_layers", hp->n_layer, 1, MAX_LAYER, err);
    if ((st = kld_hp_hf_recurrent(r.cfg, path, hp, err))) return st;

    if ((st = kld_hp_hf_rope_scaling(r.cfg, path, hp, err))) return st;

    if ((st = kld_hp_hf_swa(r.cfg, path, model_type, hp, err)) ||
        (st = kld_hp_hf_moe(r.cfg, path, model_type, hp, err)))
        return st;
    if (!strcmp(hp->arch, "glm4moe") && (st = kld_hp_hf_glm4moe(r.cfg, path, hp, err))) return st;
    if (!strcmp(hp->arch, "gpt-oss") && (st = kld_hp_hf_gptoss(r.cfg, path, hp, err))) return st;

    if ((st = j_num(&r, "attn_logit_softcapping", false, &hp->attn_softcap, err)) ||
        (st = j_num(&r, "final_logit_softcapping", false, &hp->final_softcap, err)))
        return st;

    hp->attn_scale = 1.0 / sqrt((double)(hp->head_dim > 0 ? hp->head_dim : 1));
    double qpas = 0;
    if ((st = j_num(&r, "query_pre_attn_scalar", false, &qpas, err))) return st;
    if (qpas != 0) {
        if ((st = kld_hp_check_positive(path, "query_pre_attn_scalar", qpas, err))) return st;
        hp->attn_scale = 1.0 / sqrt(qpas);
    }
    hp->embd_scale = hp->sw.embd_scale ? sqrt((double)hp->n_embd) : 1.0;
    if (hp->sw.mla && (st = kld_hp_hf_mla(r.cfg, path, hp, err))) return st;
    if (!strcmp(hp->arch, "gemma4") && (st = kld_hp_hf_gemma4(r.cfg, path, hp, err))) return st;
    /* zero-centred RMSNorm weights: HF Gemma and Qwen3NextRMSNorm scale by 1 + w (not the gated
     * linear_attn.norm, which the engine loads without the offset; not Gemma 4, whose
     * Gemma4RMSNorm scales by w: the converter's norm_shift 0) */
    if ((strncmp(hp->arch, "gemma", 5) == 0 && strcmp(hp->arch, "gemma4") != 0) || strcmp(hp->arch, "qwen3next") == 0 ||
        strncmp(hp->arch, "qwen35", 6) == 0)
        hp->norm_weight_offset = 1.0;

    const json_t *act = json_object_get(r.cfg, "hidden_activation");
    if (!act || json_is_null(act)) act = json_object_get(r.cfg, "hidden_act");
    const char *an = json_is_string(act) ? json_string_value(act) : NULL;
    if (an) {
        bool silu = strcmp(an, "silu") == 0 || strcmp(an, "swish") == 0;
        bool gelu = strcmp(an, "gelu_pytorch_tanh") == 0 || strcmp(an, "gelu") == 0;
        /* Gemma v1 configs say "gelu" but the model runs the tanh form (as in transformers). */
        /* gpt-oss says silu for its clamped SwiGLU (GptOssExperts) */
        const bool oai = silu && hp->sw.act == KLD_ACT_SWIGLU_OAI;
        if (!(silu && hp->sw.act == KLD_ACT_SILU) && !(gelu && hp->sw.act == KLD_ACT_GELU_TANH) && !oai)
            return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: activation '%.32s' is not supported "
                            "for %s", path, an, model_type);
    }
    return KLD_OK;
}

/* ---- llama2.c ---- */

static kld_status read_llama2c(const kld_source *src, kld_hparams *hp, kld_error *err) {
    kld_status st = set_arch(src->path, "llama", 5, hp, err);
    if (st != KLD_OK) return st;
    const kld_llama2c_config *c = &src->l2c->cfg;
    folder_name(hp->name, sizeof hp->name, src->dir);
    hp->n_embd = c->dim;
    hp->n_layer = c->n_layers;
    hp->n_head = c->n_heads;
    hp->n_head_kv = c->n_kv_heads;
    hp->n_ff = c->hidden_dim;
    hp->n_vocab = c->vocab_size < 0 ? -(int64_t)c->vocab_size : c->vocab_size;
    hp->n_ctx_train = c->seq_len;
    if (hp->n_head < 1) return check_range(src->path, "n_heads", hp->n_head, 1, MAX_DIM, err);
    hp->head_dim = hp->head_dim_v = hp->n_rot = hp->n_embd / hp->n_head;
    hp->norm_eps = 1e-5; /* llama2.c's rmsnorm constant */
    hp->tied_output = c->shared_classifier;
    hp->attn_scale = 1.0 / sqrt((double)(hp->head_dim > 0 ? hp->head_dim : 1));
    hp->embd_scale = 1.0;
    /* llama2.c rotates interleaved pairs, as GGUF llama does. */
    hp->rope_type = KLD_ROPE_NORM;
    return KLD_OK;
}

kld_status kld_hparams_read(const kld_source *src, kld_hparams *hp, kld_error *err) {
    set_defaults(hp);
    kld_status st;
    switch (src->format) {
    case KLD_FORMAT_GGUF: st = read_gguf(src, hp, err); break;
    case KLD_FORMAT_SAFETENSORS: st = read_hf(src, hp, err); break;
    case KLD_FORMAT_LLAMA2C: st = read_llama2c(src, hp, err); break;
    default: return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: unknown source format", src->path);
    }
    if (st != KLD_OK) return st;
    return finish(src->path, hp, err);
}

bool kld_hparams_layer_swa(const kld_hparams *hp, int64_t il) {
    return hp->sliding_window > 0 && il >= 0 && il < hp->n_layer && il < KLD_MAX_LAYER &&
           hp->layer_swa[il];
}
