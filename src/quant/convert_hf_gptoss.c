/* convert_hf_gptoss.c — the gpt-oss part of converting a Hugging Face
 * checkpoint to GGUF, as llama.cpp's converter (conversion/gpt_oss.py
 * GptOssModel, without --fuse-gate-up-exps) writes it:
 *  - tensors: the experts as merged ffn_{gate,up,down}_exps (MXFP4 repacked
 *    from *_blocks / *_scales bit for bit, or the float tensors transposed;
 *    gate and up de-interleaved: model/weights_gptoss.c rebuilds them at
 *    load, and their buffers move into the listing), ffn_{gate,up}_exps.bias
 *    split from gate_up_proj_bias, ffn_down_exps.bias, the router's bias
 *    (ffn_gate_inp.bias) and the sinks (self_attn.sinks → attn_sinks.weight);
 *  - keys: expert_feed_forward_length (intermediate_size), key_length /
 *    value_length (head_dim), rope.scaling.type yarn with its factor and
 *    original_context_length (the window: convert_hf_meta.c). The YaRN
 *    betas are not written: llama.cpp's gpt-oss reads none (32 / 1, which
 *    the reader requires of the checkpoint). */
#include "quant/quant_internal.h"

#include <stdio.h>
#include <stdlib.h>

kld_status kld_hf_list_gptoss(kld_weights *w, const kld_hparams *hp, kld_hf_tensors *out, kld_error *err) {
    if (!hp->sw.moe_biases) return KLD_OK;
    char name[96];
    for (int64_t il = 0; il < w->n_layer; il++) {
        kld_layer_weights *L = &w->layers[il];
        const struct {
            const kld_tensor *t;
            kld_tensor_id id;
            const char *kind;
        } t[] = {{L->attn_sinks, KLD_T_ATTN_SINKS, "weight"},     {L->moe.gate_inp_b, KLD_T_FFN_GATE_INP, "bias"},
                 {L->moe.gate_exps, KLD_T_FFN_GATE_EXPS, "weight"}, {L->moe.gate_exps_b, KLD_T_FFN_GATE_EXPS, "bias"},
                 {L->moe.up_exps, KLD_T_FFN_UP_EXPS, "weight"},     {L->moe.up_exps_b, KLD_T_FFN_UP_EXPS, "bias"},
                 {L->moe.down_exps, KLD_T_FFN_DOWN_EXPS, "weight"}, {L->moe.down_exps_b, KLD_T_FFN_DOWN_EXPS, "bias"}};
        for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
            if (!t[i].t) continue;
            kld_tn(name, sizeof name, t[i].id, il, 0, t[i].kind);
            void *owned = kld_weights_gptoss_take(w, t[i].t); /* NULL: a view into the checkpoint */
            if (!kld_hf_append(out, t[i].t, name, owned)) {
                free(owned);
                return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
            }
        }
    }
    return KLD_OK;
}

kld_status kld_hf_put_hparams_gptoss(const kld_hparams *hp, kld_gguf_writer *w, kld_error *err) {
    if (strcmp(hp->arch, "gpt-oss") != 0) return KLD_OK;
    char k[96];
    bool ok = true;
#define KEY(id) kld_arch_key(k, sizeof k, hp->arch, id)
#define U32(id, v) (ok = ok && !kld_gguf_writer_set_u32(w, KEY(id), (uint32_t)(v)))
    U32(KLD_K_EXPERT_FF_LENGTH, hp->n_ff_exp);
    U32(KLD_K_KEY_LENGTH, hp->head_dim);
    U32(KLD_K_VALUE_LENGTH, hp->head_dim_v);
    if (!strcmp(hp->rope_scaling, "yarn")) {
        ok = ok && !kld_gguf_writer_set_str(w, KEY(KLD_K_ROPE_SCALING_TYPE), "yarn");
        ok = ok && !kld_gguf_writer_set_f32(w, KEY(KLD_K_ROPE_SCALING_FACTOR), (float)(1.0 / hp->rope_freq_scale));
        U32(KLD_K_ROPE_SCALING_ORIG_CTX, hp->rope_orig_ctx);
    }
#undef U32
#undef KEY
    return ok ? KLD_OK : kld_fail(err, KLD_ERR_NOMEM, "out of memory");
}
