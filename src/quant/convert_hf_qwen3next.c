/* convert_hf_qwen3next.c — the Qwen3-Next part of converting a Hugging
 * Face checkpoint to GGUF, as llama.cpp's convert_hf_to_gguf.py does it
 * (Qwen3NextModel over Qwen2MoeModel):
 *  - tensors: the DeltaNet layers under their GGUF names (in_proj_qkvz split
 *    into attn_qkv and attn_gate, ssm_a = −exp(A_log), dt_bias as
 *    ssm_dt.bias, conv1d squeezed to [K, C]: the same tensors the engine's
 *    loader rebuilds, model/weights_deltanet.c), the pre-FFN norm as
 *    post_attention_norm, the routed experts stacked into ffn_*_exps
 *    (Qwen2MoeModel merges them: convert_hf_moe.c does it, and writes the
 *    expert keys and refuses norm_topk_prob false), the mtp.* tensors left
 *    out ("ignore MTP layers for now");
 *  - keys: ssm.conv_kernel, ssm.state_size, ssm.group_count,
 *    ssm.time_step_rank, ssm.inner_size, full_attention_interval (or, for a
 *    layer_types list no interval gives, attention.recurrent_layers),
 *    key/value_length, rope.dimension_count.
 * Qwen3.5 / Qwen3.5-MoE (qwen35, qwen35moe: Qwen3_5TextModel / Qwen3_5MoeTextModel over
 * _LinearAttentionVReorderBase, unslothai/llama.cpp d32676d conversion/qwen.py) go the same way
 * with their own DeltaNet tensors: the v heads tiled (the loader already holds them so,
 * model/weights_deltanet.c), ssm_beta and ssm_alpha apart (in_proj_b, in_proj_a), and the key
 * rope.dimension_sections (mrope_section padded to four, else [11, 11, 10, 0]); no vocab_size
 * (convert_hf_meta.c). The MTP block is left out, as the converter's --no-mtp does (its default
 * writes it as blk.<n_layer>.nextn.* and nextn_predict_layers). */
#include "model/weights.h"
#include "quant/quant_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

bool kld_hf_append(kld_hf_tensors *o, const kld_tensor *t, const char *name, void *owned) {
    kld_tensor *nt = realloc(o->tensors, (o->n + 1) * sizeof *nt);
    if (nt) o->tensors = nt;
    char **nn = realloc(o->names, (o->n + 1) * sizeof *nn);
    if (nn) o->names = nn;
    void **no = realloc(o->owned, (o->n + 1) * sizeof *no);
    if (no) o->owned = no;
    char *copy = kld_strdup(name);
    if (!nt || !nn || !no || !copy) {
        free(copy);
        return false;
    }
    o->tensors[o->n] = *t;
    o->names[o->n] = copy;
    o->owned[o->n++] = owned;
    return true;
}

/* t, with its data copied when it lives in the weight table's own store
 * (which is freed with the table). */
static bool append_copy(kld_hf_tensors *o, const kld_weights *w, const kld_tensor *t, const char *name) {
    const bool derived = kld_weights_dn_owns(w, t);
    void *copy = NULL;
    kld_tensor v = *t;
    if (derived && !(copy = malloc(t->nbytes ? t->nbytes : 1))) return false;
    if (copy) {
        memcpy(copy, t->data, t->nbytes);
        v.data = copy;
    }
    if (v.n_dims == 3 && v.ne[1] == 1) { /* conv1d [K, 1, C] → [K, C], as the converter squeezes it */
        v.n_dims = 2;
        v.ne[1] = v.ne[2];
        v.ne[2] = 1;
    }
    if (!kld_hf_append(o, &v, name, copy)) {
        free(copy);
        return false;
    }
    return true;
}

kld_status kld_hf_list_qwen3next(const kld_weights *w, const kld_hparams *hp, kld_hf_tensors *out,
                                 kld_error *err) {
    (void)hp; /* the generic listing names the pre-FFN norm hp->hy.ffn_norm */
    char to[96];
    for (int64_t il = 0; il < w->n_layer; il++) {
        const kld_layer_weights *L = &w->layers[il];
        const struct {
            const kld_tensor *t;
            kld_tensor_id id;
            const char *kind;
        } t[] = {{L->dn_qkv, KLD_T_ATTN_QKV, "weight"},        {L->dn_gate, KLD_T_ATTN_GATE, "weight"},
                 {L->dn_conv, KLD_T_SSM_CONV1D, "weight"},     {L->dn_dt, KLD_T_SSM_DT, "bias"},
                 {L->dn_a, KLD_T_SSM_A, NULL},                    {L->dn_ba, KLD_T_SSM_BETA_ALPHA, "weight"},
                 {L->dn_beta, KLD_T_SSM_BETA, "weight"},        {L->dn_alpha, KLD_T_SSM_ALPHA, "weight"},
                 {L->dn_norm, KLD_T_SSM_NORM, "weight"},       {L->dn_out, KLD_T_SSM_OUT, "weight"}};
        for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
            if (!t[i].t) continue;
            kld_tn(to, sizeof to, t[i].id, il, 0, t[i].kind);
            if (!append_copy(out, w, t[i].t, to)) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
        }
    }
    return KLD_OK;
}

kld_status kld_hf_put_hparams_qwen3next(const kld_hparams *hp, kld_gguf_writer *w, kld_error *err) {
    if (hp->hy.recurrent_kind != KLD_LAYER_DELTANET) return KLD_OK;
    char k[96];
    bool ok = true;
#define KEY(id) kld_arch_key(k, sizeof k, hp->arch, id)
#define U32(id, v) (ok = ok && !kld_gguf_writer_set_u32(w, KEY(id), (uint32_t)(v)))
    U32(KLD_K_SSM_CONV_KERNEL, hp->dn_conv);
    U32(KLD_K_SSM_STATE_SIZE, hp->dn_head_k);
    U32(KLD_K_SSM_GROUP_COUNT, hp->dn_n_k_heads);
    U32(KLD_K_SSM_TIME_STEP_RANK, hp->dn_n_v_heads);
    U32(KLD_K_SSM_INNER_SIZE, hp->dn_n_v_heads * hp->dn_head_v);
    U32(KLD_K_KEY_LENGTH, hp->head_dim);
    U32(KLD_K_VALUE_LENGTH, hp->head_dim_v);
    U32(KLD_K_ROPE_DIMENSION_COUNT, hp->n_rot);
    /* Qwen3.5: rope_parameters.mrope_section padded to four, else the converter's default
     * [11, 11, 10, 0] (_Qwen35MRopeMixin: llama.cpp requires the key); hp holds either */
    if (hp->hy.rope_sections) {
        const int32_t sec[4] = {(int32_t)hp->rope_sections[0], (int32_t)hp->rope_sections[1],
                                (int32_t)hp->rope_sections[2], (int32_t)hp->rope_sections[3]};
        ok = ok && !kld_gguf_writer_set_arr_i32(w, KEY(KLD_K_ROPE_DIMENSION_SECTIONS), sec, 4);
    }
    /* the converter writes the interval only; a layer_types list that no
     * interval gives goes into the per-layer flags llama.cpp also reads */
    int64_t interval = 0;
    for (int64_t p = 1; p <= hp->n_layer && !interval; p++) {
        bool same = true;
        for (int64_t il = 0; il < hp->n_layer; il++)
            same &= (hp->layer_kind[il] == KLD_LAYER_DELTANET) == ((il + 1) % p != 0);
        if (same) interval = p;
    }
    if (interval) {
        U32(KLD_K_FULL_ATTENTION_INTERVAL, interval);
    } else {
        int32_t flags[KLD_MAX_LAYER];
        for (int64_t il = 0; il < hp->n_layer; il++) flags[il] = hp->layer_kind[il] == KLD_LAYER_DELTANET;
        ok = ok && !kld_gguf_writer_set_arr_i32(w, KEY(KLD_K_RECURRENT_LAYERS), flags, (uint64_t)hp->n_layer);
    }
#undef U32
#undef KEY
    return ok ? KLD_OK : kld_fail(err, KLD_ERR_NOMEM, "out of memory");
}
