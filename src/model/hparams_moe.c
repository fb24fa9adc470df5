/* hparams_moe.c — the mixture-of-experts hyper-parameters: GGUF
 * <arch>.expert_count, expert_used_count, expert_feed_forward_length and
 * expert_shared_feed_forward_length as llama.cpp c392e50 reads them
 * (llama-model.cpp 413-432 for the counts and their asserts, 739-740 and
 * 2140/2147 for the qwen2moe sizes), and the config.json keys of
 * transformers' Mixtral, Qwen2-MoE, Qwen3-MoE and OLMoE configs. */
#include "model/hparams_internal.h"

#include <inttypes.h>
#include <stdio.h>

#define MAX_EXPERTS 512 /* LLAMA_MAX_EXPERTS: 256 at c392e50, 512 since Qwen3-Next (512 experts) */
#define MAX_FF (INT64_C(1) << 24)

/* Key names for messages: the GGUF spellings or the config.json ones. */
typedef struct moe_keys {
    const char *count, *used, *ff_exp, *ff_shexp;
} moe_keys;

/* Checks and defaults shared by both sources. A dense architecture keeps
 * its dense FFN whatever the keys say (llama.cpp builds no MoE for it). */
static kld_status check(const char *path, const moe_keys *k, kld_hparams *hp, kld_error *err) {
    if (hp->n_expert < 0 || hp->n_expert > MAX_EXPERTS)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: %s = %" PRId64 " is out of range [0, %d]", path,
                        k->count, hp->n_expert, MAX_EXPERTS);
    if (hp->n_expert_used < 0 || hp->n_expert_used > hp->n_expert)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: %s = %" PRId64 " is out of range [%d, %s = %"
                        PRId64 "]", path, k->used, hp->n_expert_used, hp->n_expert > 0,
                        k->count, hp->n_expert);
    if (hp->n_expert > 0 && hp->n_expert_used == 0)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: %s is missing or 0 while %s = %" PRId64, path,
                        k->used, k->count, hp->n_expert);
    if (hp->sw.moe == KLD_MOE_NONE) {
        hp->n_expert = hp->n_expert_used = hp->n_ff_exp = hp->n_ff_shexp = 0;
        return KLD_OK;
    }
    if (hp->sw.moe == KLD_MOE_ALWAYS && hp->n_expert == 0)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: %s is missing or 0 (%s is a mixture of experts)",
                        path, k->count, hp->arch);
    if (hp->n_expert == 0) return KLD_OK;
    if (hp->n_ff_exp == 0)
        hp->n_ff_exp = hp->sw.moe_ff_per_used ? hp->n_ff / hp->n_expert_used : hp->n_ff;
    if (hp->n_ff_exp < 1 || hp->n_ff_exp > MAX_FF)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: %s = %" PRId64 " is out of range [1, %" PRId64
                        "]", path, k->ff_exp, hp->n_ff_exp, MAX_FF);
    if (hp->sw.moe_shared_expert) {
        if (hp->n_ff_shexp == 0) hp->n_ff_shexp = hp->n_ff;
        if (hp->n_ff_shexp < 1 || hp->n_ff_shexp > MAX_FF)
            return kld_fail(err, KLD_ERR_FORMAT, "%s: %s = %" PRId64 " is out of range [1, %"
                            PRId64 "]", path, k->ff_shexp, hp->n_ff_shexp, MAX_FF);
    } else {
        hp->n_ff_shexp = 0;
    }
    return KLD_OK;
}

static kld_status gguf_int(const kld_source *src, const char *key, int64_t *out, kld_error *err) {
    const kld_gguf_kv *kv = kld_gguf_find(src->gguf, key);
    if (!kv) return KLD_OK;
    if (!kld_gguf_get_int(src->gguf, key, out))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s' has type %s, expected an integer",
                        src->path, key, kld_gguf_vtype_name(kv->value.type));
    return KLD_OK;
}

/* GLM-4.5's (and DeepSeek's) routing keys: expert_gating_func (llama.cpp's
 * enum: 1 softmax, 2 sigmoid, 3 softmax of the top k; absent: sigmoid),
 * expert_weights_norm, expert_weights_scale, leading_dense_block_count. */
static kld_status gguf_sigmoid_keys(const kld_source *src, kld_hparams *hp, kld_error *err) {
    char key[96];
    kld_status st;
    int64_t func = 0, lead = 0;
    kld_arch_key(key, sizeof key, hp->arch, KLD_K_EXPERT_GATING_FUNC);
    if ((st = gguf_int(src, key, &func, err))) return st;
    static const kld_moe_gating funcs[] = {KLD_MOE_GATE_SIGMOID, KLD_MOE_GATE_SOFTMAX, KLD_MOE_GATE_SIGMOID,
                                           KLD_MOE_GATE_SOFTMAX_WEIGHT};
    if (func < 0 || func > 3)
        return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: GGUF key '%s' = %" PRId64 " is not a gating kind kldeval "
                        "runs (1 softmax, 2 sigmoid, 3 softmax of the top k)", src->path, key, func);
    /* deepseek2 without the key: softmax (DeepSeek V2 / V2.5 files, deepseek2.cpp) */
    hp->moe_gating = func == 0 && hp->sw.mla ? KLD_MOE_GATE_SOFTMAX : funcs[func];
    kld_arch_key(key, sizeof key, hp->arch, KLD_K_EXPERT_WEIGHTS_NORM);
    const kld_gguf_kv *kv = kld_gguf_find(src->gguf, key);
    if (kv) {
        if (kv->value.type != KLD_GGUF_BOOL)
            return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s' has type %s, expected a bool", src->path, key,
                            kld_gguf_vtype_name(kv->value.type));
        hp->moe_norm_w = kv->value.v.b;
    }
    kld_arch_key(key, sizeof key, hp->arch, KLD_K_EXPERT_WEIGHTS_SCALE);
    if (kld_gguf_find(src->gguf, key)) {
        if (!kld_gguf_get_float(src->gguf, key, &hp->moe_w_scale) || !(hp->moe_w_scale >= 0) ||
            !(hp->moe_w_scale < 1e6))
            return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s' is not a scale >= 0", src->path, key);
    }
    kld_arch_key(key, sizeof key, hp->arch, KLD_K_LEADING_DENSE_BLOCK_COUNT);
    if ((st = gguf_int(src, key, &lead, err))) return st;
    if (lead < 0 || lead > hp->n_layer)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s' = %" PRId64 " is out of range [0, %" PRId64 "]",
                        src->path, key, lead, hp->n_layer);
    hp->n_layer_dense_lead = lead;
    /* DeepSeek V3's group-limited routing (llama-graph.cpp build_moe_ffn): the experts in
     * expert_group_count groups, each scored by the sum of its two best selection values, only
     * the best expert_group_used_count groups' experts eligible */
    int64_t groups = 0, used = 0;
    char ku[96];
    kld_arch_key(key, sizeof key, hp->arch, KLD_K_EXPERT_GROUP_COUNT);
    kld_arch_key(ku, sizeof ku, hp->arch, KLD_K_EXPERT_GROUP_USED_COUNT);
    if ((st = gguf_int(src, key, &groups, err)) || (st = gguf_int(src, ku, &used, err))) return st;
    if (groups > 1) {
        if (hp->n_expert % groups != 0 || hp->n_expert / groups < 2)
            return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s' = %" PRId64 " does not split expert_count = %"
                            PRId64 " into groups of at least 2", src->path, key, groups, hp->n_expert);
        if (used < 1 || used > groups || hp->n_expert_used > used * (hp->n_expert / groups))
            return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s' = %" PRId64 " is missing or out of range "
                            "[1, %" PRId64 "], or its groups hold fewer than expert_used_count = %" PRId64
                            " experts", src->path, ku, used, groups, hp->n_expert_used);
        hp->n_expert_groups = groups;
        hp->n_group_used = used;
    }
    return KLD_OK;
}

kld_status kld_hp_gguf_moe(const kld_source *src, kld_hparams *hp, kld_error *err) {
    char kc[96], ku[96], kf[96], ks[96];
    kld_arch_key(kc, sizeof kc, hp->arch, KLD_K_EXPERT_COUNT);
    kld_arch_key(ku, sizeof ku, hp->arch, KLD_K_EXPERT_USED_COUNT);
    kld_arch_key(kf, sizeof kf, hp->arch, KLD_K_EXPERT_FF_LENGTH);
    kld_arch_key(ks, sizeof ks, hp->arch, KLD_K_EXPERT_SHARED_FF_LENGTH);
    kld_status st;
    if ((st = gguf_int(src, kc, &hp->n_expert, err)) ||
        (st = gguf_int(src, ku, &hp->n_expert_used, err)))
        return st;
    /* llama.cpp reads the expert sizes for qwen2moe / qwen3moe only; mixtral
     * and olmoe experts are n_ff wide (llama-model.cpp 1555, 2701). */
    if ((hp->sw.moe_ff_per_used || hp->sw.moe_ff_required) && (st = gguf_int(src, kf, &hp->n_ff_exp, err)))
        return st;
    if (hp->sw.moe_ff_required && hp->n_expert > 0 && !kld_gguf_find(src->gguf, kf))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s' is missing (required for %s)", src->path, kf,
                        hp->arch);
    if (hp->sw.moe_shared_expert && (st = gguf_int(src, ks, &hp->n_ff_shexp, err))) return st;
    hp->moe_norm_w = hp->sw.moe_norm_w;
    hp->moe_gating = hp->sw.moe_gating;
    if (hp->sw.moe_gating == KLD_MOE_GATE_SIGMOID && (st = gguf_sigmoid_keys(src, hp, err))) return st;
    moe_keys k = {kc, ku, kf, ks};
    if ((st = check(src->path, &k, hp, err))) return st;
    if (hp->sw.moe_shexp_ungated && hp->n_expert > 0) { /* expert_shared_count experts of n_ff_exp */
        char key[96];
        int64_t count = 0;
        kld_arch_key(key, sizeof key, hp->arch, KLD_K_EXPERT_SHARED_COUNT);
        if ((st = gguf_int(src, key, &count, err))) return st;
        if (count < 1 || count > 64)
            return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s' = %" PRId64 " is missing or out of range "
                            "[1, 64]", src->path, key, count);
        hp->n_ff_shexp = count * hp->n_ff_exp;
    }
    return KLD_OK;
}

/* config.json: the keys of each transformers config class. Variants the
 * engine does not run (dense layers between sparse ones, clipped qkv) are
 * errors naming the key. */
kld_status kld_hp_hf_moe(const json_t *cfg, const char *path, const char *model_type,
                         kld_hparams *hp, kld_error *err) {
    const bool mixtral = !strcmp(model_type, "mixtral");
    const bool qwen_moe = !strcmp(model_type, "qwen2_moe") || !strcmp(model_type, "qwen3_moe");
    const bool olmoe = !strcmp(model_type, "olmoe");
    if (!mixtral && !qwen_moe && !olmoe) return KLD_OK;
    kld_status st;
    moe_keys k = {mixtral ? "num_local_experts" : "num_experts", "num_experts_per_tok",
                  qwen_moe ? "moe_intermediate_size" : "intermediate_size",
                  "shared_expert_intermediate_size"};
    if ((st = kld_hp_json_int(cfg, path, k.count, true, &hp->n_expert, err)) ||
        (st = kld_hp_json_int(cfg, path, k.used, true, &hp->n_expert_used, err)))
        return st;
    if (qwen_moe) {
        if ((st = kld_hp_json_int(cfg, path, k.ff_exp, true, &hp->n_ff_exp, err))) return st;
        if (hp->sw.moe_shared_expert &&
            (st = kld_hp_json_int(cfg, path, k.ff_shexp, true, &hp->n_ff_shexp, err)))
            return st;
        if ((st = kld_hp_json_all_sparse(cfg, path, err))) return st;
    } else {
        hp->n_ff_exp = hp->n_ff;
    }
    if (olmoe) {
        const json_t *clip = json_object_get(cfg, "clip_qkv");
        if (clip && !json_is_null(clip))
            return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: \"clip_qkv\" is not supported", path);
    }
    /* MixtralSparseMoeBlock always renormalises; the others follow
     * norm_topk_prob (default false in transformers' configs). */
    hp->moe_norm_w = mixtral;
    if (!mixtral && (st = kld_hp_json_bool(cfg, path, "norm_topk_prob", &hp->moe_norm_w, err)))
        return st;
    return check(path, &k, hp, err);
}
