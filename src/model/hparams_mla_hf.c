/* hparams_mla_hf.c — config.json of DeepSeek V3 / R1 (model_type
 * "deepseek_v3") and V2 ("deepseek_v2"), read into the values llama.cpp's
 * converter (conversion/deepseek.py DeepseekV2Model and TextModel's common
 * keys) writes as deepseek2 GGUF keys, so a checkpoint runs as its conversion
 * does: MLA sizes, the experts and their routing, YaRN with
 * yarn_log_multiplier = 0.1 · mscale_all_dim. Absent keys take the values the
 * converted GGUF would get (llama.cpp's defaults: softmax routing, no weight
 * norm, scale 1), not transformers' class defaults; the released configs
 * spell them all. Numbers the GGUF stores as float32 are rounded to float32
 * here, so the two sources give the same bits. */
#include "model/hparams_internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_RANK (INT64_C(1) << 16)
#define MAX_HEAD (INT64_C(1) << 16)
#define MAX_EXPERTS 512
#define MAX_FF (INT64_C(1) << 24)

static kld_status get_range(const json_t *obj, const char *path, const char *key, bool required, int64_t lo,
                            int64_t hi, int64_t *out, kld_error *err) {
    kld_status st = kld_hp_json_int(obj, path, key, required, out, err);
    if (st) return st;
    if (*out < lo || *out > hi)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: \"%s\" = %" PRId64 " is out of range [%" PRId64 ", %" PRId64 "]",
                        path, key, *out, lo, hi);
    return KLD_OK;
}

/* A string field among names (absent: *out untouched). */
static kld_status get_choice(const json_t *obj, const char *path, const char *key, const char *const *names, int n,
                             int *out, kld_error *err) {
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) return KLD_OK;
    const char *s = json_string_value(v);
    for (int i = 0; s && i < n; i++)
        if (!strcmp(s, names[i])) {
            *out = i;
            return KLD_OK;
        }
    char valid[160] = "";
    for (int i = 0; i < n; i++)
        snprintf(valid + strlen(valid), sizeof valid - strlen(valid), "%s%s", i ? ", " : "", names[i]);
    char *shown = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    const kld_status st = kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: \"%s\" = %.40s is not supported (%s)", path, key,
                                   shown ? shown : "?", valid);
    free(shown);
    return st;
}

/* Multi-head latent attention's sizes (DeepseekV3Attention). */
static kld_status attention(const json_t *cfg, const char *path, kld_hparams *hp, kld_error *err) {
    int64_t nope = 0, rope = 0, v = 0;
    kld_status st;
    hp->n_lora_q = 0; /* null (or 0): the plain q_proj of the lite models */
    if ((st = get_range(cfg, path, "q_lora_rank", false, 0, MAX_RANK, &hp->n_lora_q, err)) ||
        (st = get_range(cfg, path, "kv_lora_rank", true, 1, MAX_RANK, &hp->n_lora_kv, err)) ||
        (st = get_range(cfg, path, "qk_nope_head_dim", true, 1, MAX_HEAD, &nope, err)) ||
        (st = get_range(cfg, path, "qk_rope_head_dim", true, 2, MAX_HEAD, &rope, err)) ||
        (st = get_range(cfg, path, "v_head_dim", true, 1, MAX_HEAD, &v, err)))
        return st;
    if (rope % 2 != 0)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: \"qk_rope_head_dim\" = %" PRId64 " must be even", path, rope);
    /* decompressed by kv_b_proj, every q head has its own k and v head (num_key_value_heads,
     * which the converter overwrites, is not used) */
    hp->head_dim = nope + rope;
    hp->head_dim_v = v;
    hp->n_rot = rope;
    hp->n_head_kv = hp->n_head;
    /* the rope dims rotate as interleaved pairs in the stored order (rope_interleave, the original
     * modeling code's de-interleave); the converter does not permute them, and llama.cpp rotates
     * pairs: a checkpoint rotating halves would run differently from its conversion */
    bool interleave = true, bias = false;
    if ((st = kld_hp_json_bool(cfg, path, "rope_interleave", &interleave, err)) ||
        (st = kld_hp_json_bool(cfg, path, "attention_bias", &bias, err)))
        return st;
    if (!interleave)
        return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: \"rope_interleave\" = false (rotate-half RoPE) is not "
                        "supported: llama.cpp's deepseek2 rotates interleaved pairs", path);
    if (bias)
        return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: \"attention_bias\" = true is not supported (deepseek2 has "
                        "no attention biases)", path);
    return KLD_OK;
}

/* The experts and their routing (DeepseekV3MoE / DeepseekV3TopkRouter, V2's MoEGate). */
static kld_status experts(const json_t *cfg, const char *path, kld_hparams *hp, kld_error *err) {
    int64_t shared = 0, lead = 0, freq = 1, nextn = 0;
    kld_status st;
    if ((st = get_range(cfg, path, "n_routed_experts", true, 1, MAX_EXPERTS, &hp->n_expert, err)) ||
        (st = get_range(cfg, path, "num_experts_per_tok", true, 1, hp->n_expert, &hp->n_expert_used, err)) ||
        (st = get_range(cfg, path, "moe_intermediate_size", true, 1, MAX_FF, &hp->n_ff_exp, err)) ||
        (st = get_range(cfg, path, "n_shared_experts", true, 1, 64, &shared, err)) ||
        (st = get_range(cfg, path, "first_k_dense_replace", false, 0, hp->n_layer, &lead, err)) ||
        (st = get_range(cfg, path, "moe_layer_freq", false, 1, hp->n_layer, &freq, err)) ||
        (st = get_range(cfg, path, "num_nextn_predict_layers", false, 0, 64, &nextn, err)))
        return st;
    if (freq != 1)
        return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: \"moe_layer_freq\" = %" PRId64 " (dense layers between "
                        "sparse ones) is not supported", path, freq);
    hp->n_ff_shexp = shared * hp->n_ff_exp;
    hp->n_layer_dense_lead = lead;
    static const char *const funcs[] = {"softmax", "sigmoid"};
    int func = 0;
    if ((st = get_choice(cfg, path, "scoring_func", funcs, 2, &func, err))) return st;
    hp->moe_gating = func ? KLD_MOE_GATE_SIGMOID : KLD_MOE_GATE_SOFTMAX;
    /* group_limited_greedy (V2) scores a group by its best expert, noaux_tc (V3) by its two best;
     * llama.cpp, and so the converted GGUF, always takes the two best */
    static const char *const methods[] = {"greedy", "group_limited_greedy", "noaux_tc"};
    int method = 0;
    if ((st = get_choice(cfg, path, "topk_method", methods, 3, &method, err))) return st;
    hp->moe_norm_w = false;
    double scale = 1.0;
    if ((st = kld_hp_json_bool(cfg, path, "norm_topk_prob", &hp->moe_norm_w, err)) ||
        (st = kld_hp_json_num(cfg, path, "routed_scaling_factor", false, &scale, err)))
        return st;
    if (!(scale > 0) || !(scale < 1e6))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: \"routed_scaling_factor\" = %g is not a scale in (0, 1e6)", path,
                        scale);
    hp->moe_w_scale = (double)(float)scale; /* expert_weights_scale is a float32 key */
    return kld_hp_hf_expert_groups(cfg, path, hp, err);
}

/* YaRN as the converter writes it: type, factor, original context, and yarn_log_multiplier
 * 0.1 · mscale_all_dim; llama.cpp runs its own betas (32 / 1) and ramp and takes "mscale" to
 * equal "mscale_all_dim", so a config asking otherwise is refused rather than run differently. */
static kld_status yarn(const json_t *cfg, const char *path, kld_hparams *hp, double *log_mul, kld_error *err) {
    const json_t *rs = json_object_get(cfg, "rope_scaling");
    if (!json_is_object(rs)) return KLD_OK;
    kld_status st;
    double all = 0, ms = 0, fast = 32, slow = 1, factor = 0;
    bool has_all = json_is_number(json_object_get(rs, "mscale_all_dim"));
    if ((st = kld_hp_json_num(rs, path, "mscale_all_dim", false, &all, err)) ||
        (st = kld_hp_json_num(rs, path, "mscale", false, &ms, err)))
        return st;
    if (has_all) {
        if (!(all >= 0 && all <= 1000))
            return kld_fail(err, KLD_ERR_FORMAT, "%s: rope_scaling.mscale_all_dim = %g is out of range [0, 1000]",
                            path, all);
        *log_mul = (double)(float)(0.1 * all); /* the float32 key */
    }
    if (!strcmp(hp->rope_scaling, "none")) return KLD_OK;
    if (strcmp(hp->rope_scaling, "yarn"))
        return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: rope_scaling type '%s' is not supported for %s (yarn is)",
                        path, hp->rope_scaling, hp->arch);
    if (!json_object_get(rs, "original_max_position_embeddings"))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: rope_scaling.original_max_position_embeddings is missing (YaRN)",
                        path);
    if (json_object_get(rs, "attention_factor"))
        return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: rope_scaling.attention_factor is not supported for %s "
                        "(the magnitude comes from mscale_all_dim)", path, hp->arch);
    if ((st = kld_hp_json_num(rs, path, "beta_fast", false, &fast, err)) ||
        (st = kld_hp_json_num(rs, path, "beta_slow", false, &slow, err)) ||
        (st = kld_hp_json_num(rs, path, "factor", true, &factor, err)))
        return st;
    if (fast != 32 || slow != 1)
        return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: rope_scaling.beta_fast / beta_slow = %g / %g: llama.cpp's "
                        "deepseek2 runs 32 / 1", path, fast, slow);
    if (has_all && json_object_get(rs, "mscale") && ms != all)
        return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: rope_scaling.mscale = %g differs from mscale_all_dim = %g: "
                        "llama.cpp's deepseek2 takes them equal", path, ms, all);
    /* the GGUF reader's YaRN (hparams_rope.c): ggml's ramp and betas, factor through float32 */
    hp->rope_freq_scale = 1.0 / (double)(float)factor;
    hp->rope_yarn_beta_fast = 32;
    hp->rope_yarn_beta_slow = 1;
    hp->rope_yarn_truncate = true;
    hp->rope_yarn_hf_ramp = false;
    return KLD_OK;
}

kld_status kld_hp_hf_mla(const json_t *cfg, const char *path, kld_hparams *hp, kld_error *err) {
    kld_status st;
    if ((st = attention(cfg, path, hp, err)) || (st = experts(cfg, path, hp, err))) return st;
    double log_mul = 0;
    if ((st = yarn(cfg, path, hp, &log_mul, err))) return st;
    /* float32 keys in the GGUF */
    hp->rope_freq_base = (double)(float)hp->rope_freq_base;
    hp->norm_eps = (double)(float)hp->norm_eps;
    kld_hp_mla_scales(hp, log_mul, 1.0);
    return KLD_OK;
}
