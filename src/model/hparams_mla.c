/* hparams_mla.c — multi-head latent attention's hyper-parameters (deepseek2)
 * as the 2026 llama.cpp reads them (src/models/deepseek2.cpp
 * load_arch_hparams and graph, src/llama-context.cpp's YaRN factors):
 * q_lora_rank (0: the plain attn_q of the lite models), kv_lora_rank, the
 * q/k head key_length = nope + rope with the rope dims (rope.dimension_count)
 * last, value_length, one kv head per q head once decompressed by attn_kv_b.
 * YaRN: yarn_log_multiplier is stored as 0.1 · mscale_all_dim; with it the
 * RoPE magnitude is rope.scaling.attn_factor alone and the attention scale
 * gets mscale² = (1 + 0.1 · mscale_all_dim · ln factor)², DeepSeek's
 * softmax_scale. The absorbed form (key_length_mla / value_length_mla with
 * attn_k_b / attn_v_b) takes its per-head sizes from those keys. */
#include "model/hparams_internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define MAX_RANK (INT64_C(1) << 16)

static kld_status key_int(const kld_source *src, const char *arch, kld_arch_key_id id, bool required,
                          int64_t lo, int64_t hi, int64_t *out, kld_error *err) {
    char key[160];
    kld_arch_key(key, sizeof key, arch, id);
    const kld_gguf_kv *kv = kld_gguf_find(src->gguf, key);
    if (!kv) {
        if (required) return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s' is missing (required for %s)",
                                      src->path, key, arch);
        return KLD_OK;
    }
    if (!kld_gguf_get_int(src->gguf, key, out))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s' has type %s, expected an integer", src->path,
                        key, kld_gguf_vtype_name(kv->value.type));
    if (*out < lo || *out > hi)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s' = %" PRId64 " is out of range [%" PRId64
                        ", %" PRId64 "]", src->path, key, *out, lo, hi);
    return KLD_OK;
}

/* llama_context's get_mscale: 0.1·m·ln(s) + 1 above s = 1 (float, as llama.cpp). */
static float get_mscale(float s, float m) { return s <= 1.0f ? 1.0f : 0.1f * m * logf(s) + 1.0f; }

void kld_hp_mla_scales(kld_hparams *hp, double log_mul, double key_af) {
    const float lm = (float)log_mul / 0.1f; /* cancels the converter's 0.1 */
    hp->rope_yarn_log_mul = lm;
    const float fs = (float)hp->rope_freq_scale, factor = 1.0f / fs;
    const bool yarn = !strcmp(hp->rope_scaling, "yarn");
    float af = 1.0f; /* the graph's attn_factor */
    if (yarn) {
        if (lm != 0.0f) af = get_mscale(factor, lm != 1.0f ? lm : 1.0f) / get_mscale(factor, lm);
        else af = get_mscale(factor, 1.0f);
        af *= 1.0f / (1.0f + 0.1f * logf(factor));
    }
    af *= (float)key_af;
    /* ggml_rope with ext_factor != 0 multiplies by 1 + 0.1·ln(1/freq_scale) */
    hp->rope_attn_factor = yarn ? (double)af * (double)(1.0f + 0.1f * logf(1.0f / fs)) : (double)af;
    const float af_org = af * (1.0f + 0.1f * logf(1.0f / fs));
    const float mscale = af_org * (1.0f + 0.1f * lm * logf(1.0f / fs));
    hp->attn_scale = (double)(mscale * mscale / sqrtf((float)hp->head_dim));
}

kld_status kld_hp_gguf_mla(const kld_source *src, kld_hparams *hp, kld_error *err) {
    const char *arch = hp->arch;
    char key[160];
    kld_status st;
    int64_t mla_k = 0, mla_v = 0;
    if ((st = key_int(src, arch, KLD_K_Q_LORA_RANK, false, 0, MAX_RANK, &hp->n_lora_q, err)) ||
        (st = key_int(src, arch, KLD_K_KV_LORA_RANK, true, 1, MAX_RANK, &hp->n_lora_kv, err)) ||
        (st = key_int(src, arch, KLD_K_KEY_LENGTH_MLA, false, 0, INT64_C(1) << 20, &mla_k, err)) ||
        (st = key_int(src, arch, KLD_K_VALUE_LENGTH_MLA, false, 0, INT64_C(1) << 20, &mla_v, err)))
        return st;
    kld_arch_key(key, sizeof key, arch, KLD_K_ROPE_DIMENSION_COUNT);
    if (!kld_gguf_find(src->gguf, key))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s' is missing (MLA's rope dims, qk_rope_head_dim)",
                        src->path, key);
    if ((mla_k != 0) != (mla_v != 0)) { /* llama.cpp asserts both or neither (llama_hparams::is_mla) */
        kld_arch_key(key, sizeof key, arch, mla_k ? KLD_K_VALUE_LENGTH_MLA : KLD_K_KEY_LENGTH_MLA);
        return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s' is missing or 0 while its key_length / "
                        "value_length partner is set", src->path, key);
    }
    if (mla_k != 0) {
        /* the absorbed form (newer conversions): key_length / value_length describe llama.cpp's
         * latent cache (kv_lora_rank + rope, kv_lora_rank) and head_count_kv its one MQA head;
         * attn_k_b / attn_v_b are rebuilt into attn_kv_b at load (weights_deltanet.c) */
        if (hp->head_dim != hp->n_lora_kv + hp->n_rot || hp->head_dim_v != hp->n_lora_kv) {
            kld_arch_key(key, sizeof key, arch, KLD_K_KEY_LENGTH);
            return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s' = %" PRId64 " and value_length = %" PRId64
                            " must be kv_lora_rank + rope dims = %" PRId64 " and kv_lora_rank = %" PRId64
                            " with key_length_mla", src->path, key, hp->head_dim, hp->head_dim_v,
                            hp->n_lora_kv + hp->n_rot, hp->n_lora_kv);
        }
        hp->mla_absorbed = true;
        hp->head_dim = mla_k;
        hp->head_dim_v = mla_v;
        hp->n_head_kv = hp->n_head;
    }
    /* decompressed, every q head has its own k and v head */
    if (hp->n_head_kv != hp->n_head) {
        kld_arch_key(key, sizeof key, arch, KLD_K_HEAD_COUNT_KV);
        return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s' = %" PRId64 " must equal head_count = %" PRId64
                        " (MLA decompressed by attn_kv_b)", src->path, key, hp->n_head_kv, hp->n_head);
    }
    kld_arch_key(key, sizeof key, arch, KLD_K_ROPE_DIMENSION_COUNT);
    if (hp->n_rot < 2 || hp->n_rot >= hp->head_dim)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s' = %" PRId64 " leaves no non-rotated dims of "
                        "key_length = %" PRId64, src->path, key, hp->n_rot, hp->head_dim);

    /* YaRN (llama_context: yarn_attn_factor; deepseek2's graph: attn_factor_org, mscale) */
    double log_mul = 0, key_af = 1;
    kld_arch_key(key, sizeof key, arch, KLD_K_ROPE_SCALING_YARN_LOG_MUL);
    const kld_gguf_kv *kv = kld_gguf_find(src->gguf, key);
    if (kv && (!kld_gguf_get_float(src->gguf, key, &log_mul) || !isfinite(log_mul) || log_mul < 0 ||
               log_mul > 100))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s' is not a number in [0, 100]", src->path, key);
    kld_arch_key(key, sizeof key, arch, KLD_K_ROPE_SCALING_ATTN_FACTOR);
    if (kld_gguf_find(src->gguf, key)) kld_gguf_get_float(src->gguf, key, &key_af); /* checked by rope scaling */
    kld_hp_mla_scales(hp, log_mul, key_af);
    return KLD_OK;
}
