/* hparams_deltanet_hf.c — a Hugging Face Qwen3-Next config.json
 * (model_type "qwen3_next", transformers' Qwen3NextConfig) read into the
 * same fields as the GGUF keys of hparams_deltanet.c, following how
 * llama.cpp's convert_hf_to_gguf.py (Qwen3NextModel) maps them:
 * linear_conv_kernel_dim → ssm.conv_kernel, linear_key_head_dim →
 * ssm.state_size, linear_num_key_heads → ssm.group_count,
 * linear_num_value_heads → ssm.time_step_rank, full_attention_interval
 * (default 4), rope dims = head_dim · partial_rotary_factor (default 0.25);
 * the experts as Qwen2MoeModel writes them (num_experts,
 * num_experts_per_tok, moe_intermediate_size, shared_expert_intermediate_size).
 * The MTP block (num_nextn_predict_layers, mtp.* tensors) is not read: the
 * converter drops it ("ignore MTP layers for now"). */
#include "model/hparams_internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#define MAX_CONV 64
#define MAX_HEAD 1024
#define MAX_HEADS (1 << 12)

static kld_status req_range(const json_t *cfg, const char *path, const char *key, int64_t lo,
                            int64_t hi, int64_t *out, kld_error *err) {
    kld_status st = kld_hp_json_int(cfg, path, key, true, out, err);
    if (st) return st;
    if (*out < lo || *out > hi)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: \"%s\" = %" PRId64 " is out of range [%" PRId64
                        ", %" PRId64 "]", path, key, *out, lo, hi);
    return KLD_OK;
}

/* "layer_types" ("linear_attention" / "full_attention"), else the
 * Qwen3NextConfig default: layer il is linear iff (il + 1) % interval != 0. */
static kld_status layer_kinds(const json_t *cfg, const char *path, kld_hparams *hp, kld_error *err) {
    static const char *const names[] = {"linear_attention", "full_attention"};
    static const uint8_t kinds[] = {KLD_LAYER_DELTANET, KLD_LAYER_ATTN};
    bool present;
    kld_status st = kld_hp_json_layer_types(cfg, path, hp->n_layer, names, kinds, 2, hp->layer_kind,
                                            &present, err);
    if (st || present) return st;
    int64_t interval = 4;
    if (json_object_get(cfg, "full_attention_interval")) {
        st = req_range(cfg, path, "full_attention_interval", 1, KLD_MAX_LAYER, &interval, err);
        if (st) return st;
    }
    for (int64_t il = 0; il < hp->n_layer; il++)
        hp->layer_kind[il] = (uint8_t)((il + 1) % interval ? KLD_LAYER_DELTANET : KLD_LAYER_ATTN);
    return KLD_OK;
}

/* Qwen3NextSparseMoeBlock in every layer (decoder_sparse_step 1, no
 * mlp_only_layers), or the dense Qwen3NextMLP when num_experts is 0. */
static kld_status experts(const json_t *cfg, const char *path, kld_hparams *hp, kld_error *err) {
    kld_status st;
    if ((st = kld_hp_json_int(cfg, path, "num_experts", false, &hp->n_expert, err))) return st;
    if (hp->n_expert < 0 || hp->n_expert > 512)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: \"num_experts\" = %" PRId64 " is out of range "
                        "[0, 512]", path, hp->n_expert);
    if (hp->n_expert == 0) {
        hp->n_expert_used = hp->n_ff_exp = hp->n_ff_shexp = 0;
        return kld_hp_json_int(cfg, path, "intermediate_size", true, &hp->n_ff, err);
    }
    if ((st = req_range(cfg, path, "num_experts_per_tok", 1, hp->n_expert, &hp->n_expert_used, err)) ||
        (st = req_range(cfg, path, "moe_intermediate_size", 1, INT64_C(1) << 24, &hp->n_ff_exp, err)) ||
        (st = req_range(cfg, path, "shared_expert_intermediate_size", 1, INT64_C(1) << 24,
                        &hp->n_ff_shexp, err)))
        return st;
    hp->n_ff = hp->n_ff_exp; /* feed_forward_length: unused by the MoE layers */
    if ((st = kld_hp_json_int(cfg, path, "intermediate_size", false, &hp->n_ff, err))) return st;
    if ((st = kld_hp_json_all_sparse(cfg, path, err))) return st;
    hp->moe_norm_w = true; /* Qwen3NextConfig's norm_topk_prob defaults to true */
    return kld_hp_json_bool(cfg, path, "norm_topk_prob", &hp->moe_norm_w, err);
}

/* Qwen3.5 (Qwen3_5TextConfig): "rope_parameters" with rope_theta,
 * partial_rotary_factor (0.25) and mrope_section (the converter's default
 * [11, 11, 10], a fourth section 0). */
static kld_status rope_parameters(const json_t *cfg, const char *path, kld_hparams *hp, kld_error *err) {
    static const int64_t dflt[4] = {11, 11, 10, 0};
    memcpy(hp->rope_sections, dflt, sizeof dflt);
    const json_t *rp = json_object_get(cfg, "rope_parameters");
    if (!rp || json_is_null(rp)) return KLD_OK;
    if (!json_is_object(rp)) return kld_fail(err, KLD_ERR_FORMAT, "%s: \"rope_parameters\" must be an object", path);
    double partial = 0.25;
    kld_status st;
    if ((st = kld_hp_json_num(rp, path, "rope_theta", false, &hp->rope_freq_base, err)) ||
        (st = kld_hp_json_num(rp, path, "partial_rotary_factor", false, &partial, err)))
        return st;
    if (!(partial > 0 && partial <= 1))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: rope_parameters.partial_rotary_factor = %g is out of range (0, 1]",
                        path, partial);
    if (json_object_get(rp, "partial_rotary_factor")) hp->n_rot = (int64_t)((double)hp->head_dim * partial);
    const json_t *ms = json_object_get(rp, "mrope_section");
    if (ms && !json_is_null(ms)) {
        if (!json_is_array(ms) || json_array_size(ms) < 3 || json_array_size(ms) > 4)
            return kld_fail(err, KLD_ERR_FORMAT, "%s: rope_parameters.mrope_section must be 3 or 4 section sizes", path);
        for (size_t i = 0; i < 4; i++) {
            const json_t *v = json_array_get(ms, i);
            hp->rope_sections[i] = i < json_array_size(ms) && json_is_integer(v) ? (int64_t)json_integer_value(v) : 0;
            if (i < json_array_size(ms) && (!json_is_integer(v) || hp->rope_sections[i] < 0))
                return kld_fail(err, KLD_ERR_FORMAT, "%s: rope_parameters.mrope_section[%zu] is not a section size",
                                path, i);
        }
    }
    return KLD_OK;
}

kld_status kld_hp_hf_deltanet(const json_t *cfg, const char *path, kld_hparams *hp, kld_error *err) {
    kld_status st;
    int64_t head_v = 0;
    hp->norm_eps = 1e-6; /* Qwen3NextConfig defaults */
    if ((st = kld_hp_json_num(cfg, path, "rms_norm_eps", false, &hp->norm_eps, err)) ||
        (st = layer_kinds(cfg, path, hp, err)) ||
        (st = req_range(cfg, path, "linear_conv_kernel_dim", 2, MAX_CONV, &hp->dn_conv, err)) ||
        (st = req_range(cfg, path, "linear_key_head_dim", 1, MAX_HEAD, &hp->dn_head_k, err)) ||
        (st = req_range(cfg, path, "linear_value_head_dim", 1, MAX_HEAD, &head_v, err)) ||
        (st = req_range(cfg, path, "linear_num_key_heads", 1, MAX_HEADS, &hp->dn_n_k_heads, err)) ||
        (st = req_range(cfg, path, "linear_num_value_heads", 1, MAX_HEADS, &hp->dn_n_v_heads, err)))
        return st;
    if (hp->dn_n_v_heads % hp->dn_n_k_heads)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: \"linear_num_value_heads\" = %" PRId64 " is not a "
                        "multiple of \"linear_num_key_heads\" = %" PRId64, path, hp->dn_n_v_heads,
                        hp->dn_n_k_heads);
    /* llama.cpp's graph takes the v head size from ssm.state_size too */
    if (head_v != hp->dn_head_k)
        return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: \"linear_value_head_dim\" = %" PRId64 " differs "
                        "from \"linear_key_head_dim\" = %" PRId64 " (not supported: llama.cpp's "
                        "Qwen3-Next uses one head size)", path, head_v, hp->dn_head_k);
    hp->dn_head_v = head_v;
    bool bias = false;
    if ((st = kld_hp_json_bool(cfg, path, "attention_bias", &bias, err))) return st;
    if (bias)
        return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: \"attention_bias\": true is not supported "
                        "(llama.cpp's Qwen3-Next attention has no biases)", path);
    if (!json_object_get(cfg, "partial_rotary_factor"))
        hp->n_rot = (int64_t)((double)hp->head_dim * 0.25);
    if (hp->hy.rope_sections && (st = rope_parameters(cfg, path, hp, err))) return st;
    return experts(cfg, path, hp, err);
}
