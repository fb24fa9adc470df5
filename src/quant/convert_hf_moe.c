/* convert_hf_moe.c — the mixture-of-experts half of converting a Hugging
 * Face checkpoint, as llama.cpp's convert_hf_to_gguf.py does it (c392e50's
 * LlamaModel for Mixtral, Qwen2MoeModel and OlmoeModel; the later
 * converter's Qwen3MoeModel, a Qwen2MoeModel): each layer's per-expert
 * matrices stacked into one 3-D blk.N.ffn_{gate,up,down}_exps tensor
 * (expert e is slice e), the expert keys, and the refusal of a router
 * renormalisation rule the GGUF architecture would not apply. */
#include "quant/quant_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

kld_status kld_hf_moe_check(const kld_source *src, const kld_hparams *hp, kld_error *err) {
    if (!kld_hparams_is_moe(hp)) return KLD_OK;
    /* llama.cpp's graphs fix the rule per architecture (mixtral, qwen3moe
     * renormalise the top-k weights; qwen2moe, olmoe do not) and no key
     * carries config.json's norm_topk_prob */
    /* the architectures with routing keys (glm4moe, deepseek2: gguf_sigmoid_keys) carry it as
     * expert_weights_norm, whatever the gating */
    if (hp->sw.moe_gating != KLD_MOE_GATE_SIGMOID && hp->moe_norm_w != hp->sw.moe_norm_w)
        return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: norm_topk_prob %s cannot be written to a %s "
                        "GGUF (llama.cpp's %s graph %s the top-k router weights)", src->path,
                        hp->moe_norm_w ? "true" : "false", hp->arch, hp->arch,
                        hp->sw.moe_norm_w ? "always renormalises" : "never renormalises");
    return KLD_OK;
}

/* Index of name in o, or o->n. */
static size_t find(const kld_hf_tensors *o, const char *name) {
    for (size_t i = 0; i < o->n; i++)
        if (o->names[i] && !strcmp(o->names[i], name)) return i;
    return o->n;
}

/* Replaces the n_expert entries blk.il.ffn_kind.E.weight by one stacked
 * blk.il.ffn_kind_exps.weight [ne0, ne1, n_expert] in the first one's slot;
 * the others are marked for removal (name NULL). */
static kld_status stack_kind(kld_hf_tensors *o, int64_t il, kld_tensor_id per, kld_tensor_id stacked,
                             int64_t n_expert, kld_error *err) {
    char name[96];
    kld_tn(name, sizeof name, per, il, 0, "weight");
    const size_t first = find(o, name);
    if (first == o->n) return KLD_OK; /* merged already, or not an expert layer */
    const kld_tensor t0 = o->tensors[first];
    if (t0.nbytes > UINT64_MAX / (uint64_t)n_expert)
        return kld_fail(err, KLD_ERR_FORMAT, "tensor '%s': %" PRId64 " experts of %" PRIu64
                        " bytes overflow", name, n_expert, t0.nbytes);
    const uint64_t bytes = t0.nbytes * (uint64_t)n_expert;
    uint8_t *buf = malloc(bytes ? (size_t)bytes : 1);
    if (!buf) return kld_fail(err, KLD_ERR_NOMEM, "tensor '%s': out of memory stacking %" PRId64
                              " experts", name, n_expert);
    for (int64_t e = 0; e < n_expert; e++) {
        kld_tn(name, sizeof name, per, il, e, "weight");
        const size_t k = find(o, name);
        const kld_tensor *t = k < o->n ? &o->tensors[k] : NULL;
        /* torch.stack needs equal shapes; a GGUF tensor has one type */
        if (!t || t->type != t0.type || t->ne[0] != t0.ne[0] || t->ne[1] != t0.ne[1] ||
            t->nbytes != t0.nbytes) {
            char b1[16], b2[16];
            free(buf);
            return kld_fail(err, KLD_ERR_FORMAT, "tensor '%s' is %s: expert 0 is %s [%" PRId64
                            ", %" PRId64 "], every expert must match to be stacked", name,
                            t ? kld_type_name(t->type, b1) : "missing", kld_type_name(t0.type, b2),
                            t0.ne[0], t0.ne[1]);
        }
        memcpy(buf + (uint64_t)e * t0.nbytes, t->data, (size_t)t0.nbytes);
        if (e > 0) {
            free(o->names[k]);
            o->names[k] = NULL;
        }
    }
    kld_tn(name, sizeof name, stacked, il, 0, "weight");
    char *merged = kld_strdup(name);
    if (!merged) {
        free(buf);
        return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    }
    kld_tensor *m = &o->tensors[first];
    m->n_dims = 3;
    m->ne[2] = n_expert;
    m->ne[3] = 1;
    m->nbytes = bytes;
    m->data = buf;
    free(o->owned[first]);
    o->owned[first] = buf;
    free(o->names[first]);
    o->names[first] = merged;
    return KLD_OK;
}

kld_status kld_hf_moe_stack(kld_hf_tensors *o, const kld_hparams *hp, kld_error *err) {
    static const kld_tensor_id per[3] = {KLD_T_FFN_GATE_EXP, KLD_T_FFN_UP_EXP, KLD_T_FFN_DOWN_EXP};
    static const kld_tensor_id stacked[3] = {KLD_T_FFN_GATE_EXPS, KLD_T_FFN_UP_EXPS, KLD_T_FFN_DOWN_EXPS};
    kld_status s = KLD_OK;
    for (int64_t il = 0; !s && kld_hparams_is_moe(hp) && il < hp->n_layer; il++)
        for (int k = 0; !s && k < 3; k++) s = stack_kind(o, il, per[k], stacked[k], hp->n_expert, err);
    /* drop the stacked experts' entries, keeping the order of the rest */
    size_t j = 0;
    for (size_t i = 0; i < o->n; i++) {
        if (!o->names[i]) {
            free(o->owned[i]);
            continue;
        }
        o->tensors[j] = o->tensors[i];
        o->names[j] = o->names[i];
        o->owned[j] = o->owned[i];
        j++;
    }
    o->n = j;
    return s;
}

bool kld_hf_keeps_f32(const char *name) {
    /* the converter's always-float32 classes (matched on the GGUF name's suffix) */
    static const kld_tensor_id f32[] = {KLD_T_FFN_GATE_INP, KLD_T_FFN_GATE_INP_SHEXP, KLD_T_SHORTCONV_CONV,
                                        KLD_T_SSM_CONV1D};
    const size_t n = strlen(name);
    /* and every name not ending in .weight: biases, gpt-oss's 2-D expert biases included */
    if (n >= 5 && !strcmp(name + n - 5, ".bias")) return true;
    for (size_t i = 0; i < sizeof f32 / sizeof f32[0]; i++) {
        char suffix[64];
        snprintf(suffix, sizeof suffix, ".%s.weight", kld_tensor_suffix(f32[i]));
        const size_t m = strlen(suffix);
        if (n >= m && !strcmp(name + n - m, suffix)) return true;
    }
    return false;
}

kld_status kld_hf_moe_put_hparams(const kld_hparams *hp, kld_gguf_writer *w, kld_error *err) {
    if (!kld_hparams_is_moe(hp)) return KLD_OK;
    char k[96];
    bool ok = true;
#define U32(id, v) (kld_arch_key(k, sizeof k, hp->arch, id), \
                    ok = ok && !kld_gguf_writer_set_u32(w, k, (uint32_t)(v)))
    U32(KLD_K_EXPERT_COUNT, hp->n_expert);
    U32(KLD_K_EXPERT_USED_COUNT, hp->n_expert_used);
    /* Qwen2MoeModel (and Qwen3MoeModel after it) write the expert widths
     * from moe_intermediate_size / shared_expert_intermediate_size; Mixtral's
     * and OLMoE's experts are feed_forward_length wide */
    if (hp->sw.moe_ff_per_used) U32(KLD_K_EXPERT_FF_LENGTH, hp->n_ff_exp);
    if (hp->sw.moe_shexp_ungated) {
        /* Glm4MoeModel (and DeepseekV2Model): expert_feed_forward_length, expert_shared_count, leading_dense_block_count,
         * expert_gating_func (2 sigmoid), expert_weights_scale and _norm; no shared width key */
        U32(KLD_K_EXPERT_FF_LENGTH, hp->n_ff_exp);
        U32(KLD_K_EXPERT_SHARED_COUNT, hp->n_ff_shexp / hp->n_ff_exp);
        U32(KLD_K_LEADING_DENSE_BLOCK_COUNT, hp->n_layer_dense_lead);
        U32(KLD_K_EXPERT_GATING_FUNC, hp->moe_gating == KLD_MOE_GATE_SIGMOID ? 2 : 1);
        kld_arch_key(k, sizeof k, hp->arch, KLD_K_EXPERT_WEIGHTS_SCALE);
        ok = ok && !kld_gguf_writer_set_f32(w, k, (float)hp->moe_w_scale);
        kld_arch_key(k, sizeof k, hp->arch, KLD_K_EXPERT_WEIGHTS_NORM);
        ok = ok && !kld_gguf_writer_set_bool(w, k, hp->moe_norm_w);
        if (hp->n_expert_groups > 1) {
            U32(KLD_K_EXPERT_GROUP_COUNT, hp->n_expert_groups);
            U32(KLD_K_EXPERT_GROUP_USED_COUNT, hp->n_group_used);
        }
    } else if (hp->sw.moe_shared_expert) {
        U32(KLD_K_EXPERT_SHARED_FF_LENGTH, hp->n_ff_shexp);
    }
#undef U32
    return ok ? KLD_OK : kld_fail(err, KLD_ERR_NOMEM, "out of memory");
}
