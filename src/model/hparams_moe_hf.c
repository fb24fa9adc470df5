/* hparams_moe_hf.c — config.json of the sigmoid-routed mixtures of experts:
 * GLM-4.5 / 4.6 / 4.7 (transformers' Glm4MoeConfig, model_type "glm4_moe"),
 * read into the values llama.cpp's converter (conversion/glm.py,
 * Glm4MoeModel) writes as glm4moe GGUF keys, so a checkpoint and its
 * conversion run the same numbers. */
#include "model/hparams_internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#define MAX_EXPERTS 512
#define MAX_FF (INT64_C(1) << 24)

static kld_status req_range(const json_t *cfg, const char *path, const char *key, bool required, int64_t lo,
                            int64_t hi, int64_t *out, kld_error *err) {
    kld_status st = kld_hp_json_int(cfg, path, key, required, out, err);
    if (st) return st;
    if (*out < lo || *out > hi)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: \"%s\" = %" PRId64 " is out of range [%" PRId64 ", %" PRId64 "]",
                        path, key, *out, lo, hi);
    return KLD_OK;
}

kld_status kld_hp_hf_expert_groups(const json_t *cfg, const char *path, kld_hparams *hp, kld_error *err) {
    int64_t g = 1, used = 1;
    kld_status st;
    if ((st = req_range(cfg, path, "n_group", false, 1, hp->n_expert, &g, err)) ||
        (st = req_range(cfg, path, "topk_group", false, 1, g, &used, err)))
        return st;
    if (g <= 1) return KLD_OK;
    if (hp->n_expert % g != 0 || hp->n_expert / g < 2)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: \"n_group\" = %" PRId64 " does not split \"n_routed_experts\" = %"
                        PRId64 " into groups of at least 2", path, g, hp->n_expert);
    if (hp->n_expert_used > used * (hp->n_expert / g))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: \"topk_group\" = %" PRId64 " groups hold fewer than "
                        "\"num_experts_per_tok\" = %" PRId64 " experts", path, used, hp->n_expert_used);
    hp->n_expert_groups = g;
    hp->n_group_used = used;
    return KLD_OK;
}

kld_status kld_hp_hf_glm4moe(const json_t *cfg, const char *path, kld_hparams *hp, kld_error *err) {
    kld_status st;
    /* Glm4MoeConfig rotates half of each head by default (the converter's 0.5 too) */
    double partial = 0.5;
    const json_t *rp = json_object_get(cfg, "rope_parameters");
    const json_t *src = json_is_object(rp) && json_object_get(rp, "partial_rotary_factor") ? rp : cfg;
    if ((st = kld_hp_json_num(src, path, "partial_rotary_factor", false, &partial, err))) return st;
    if (!(partial > 0 && partial <= 1))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: \"partial_rotary_factor\" = %g is out of range (0, 1]", path, partial);
    hp->n_rot = (int64_t)((double)hp->head_dim * partial);
    if (json_is_object(rp) && (st = kld_hp_json_num(rp, path, "rope_theta", false, &hp->rope_freq_base, err)))
        return st;

    int64_t shared = 0, lead = 1;
    if ((st = req_range(cfg, path, "n_routed_experts", true, 1, MAX_EXPERTS, &hp->n_expert, err)) ||
        (st = req_range(cfg, path, "num_experts_per_tok", true, 1, hp->n_expert, &hp->n_expert_used, err)) ||
        (st = req_range(cfg, path, "moe_intermediate_size", true, 1, MAX_FF, &hp->n_ff_exp, err)) ||
        (st = req_range(cfg, path, "n_shared_experts", true, 1, 64, &shared, err)) ||
        (st = req_range(cfg, path, "first_k_dense_replace", false, 0, hp->n_layer, &lead, err)))
        return st;
    hp->n_ff_shexp = shared * hp->n_ff_exp;
    hp->n_layer_dense_lead = lead;
    hp->moe_gating = KLD_MOE_GATE_SIGMOID;
    hp->moe_norm_w = true; /* Glm4MoeConfig's norm_topk_prob defaults to true */
    hp->moe_w_scale = 1.0;
    if ((st = kld_hp_json_bool(cfg, path, "norm_topk_prob", &hp->moe_norm_w, err)) ||
        (st = kld_hp_json_num(cfg, path, "routed_scaling_factor", false, &hp->moe_w_scale, err)))
        return st;
    if (!(hp->moe_w_scale > 0) || !(hp->moe_w_scale < 1e6))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: \"routed_scaling_factor\" = %g is not a scale in (0, 1e6)", path,
                        hp->moe_w_scale);
    if ((st = kld_hp_hf_expert_groups(cfg, path, hp, err))) return st;
    /* use_qk_norm (default false) decides, as in Glm4MoeAttention: true requires q_norm / k_norm,
     * false leaves any stored ones unread (a GGUF has them only when its checkpoint used them) */
    bool qk_norm = false, bias = false;
    if ((st = kld_hp_json_bool(cfg, path, "use_qk_norm", &qk_norm, err)) ||
        (st = kld_hp_json_bool(cfg, path, "attention_bias", &bias, err)))
        return st;
    hp->sw.qk_norm = qk_norm;
    hp->sw.qk_norm_optional = false;
    /* num_nextn_predict_layers: the MTP layers sit after num_hidden_layers and are never read */
    int64_t nextn = 0;
    if ((st = req_range(cfg, path, "num_nextn_predict_layers", false, 0, 64, &nextn, err))) return st;
    return KLD_OK;
}
