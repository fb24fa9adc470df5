/* convert_hf_gemma4.c — the Gemma 4 part of converting a Hugging Face
 * checkpoint to GGUF, as llama.cpp's converter (unslothai/llama.cpp d32676d,
 * conversion/gemma.py Gemma4Model) writes it:
 *  - tensors beyond the common table: rope_freqs (generated: 1 for the full
 *    layers' rotated pairs, 1e30 for the others), the per-layer embeddings
 *    (per_layer_token_embd, per_layer_model_proj, per_layer_proj_norm; per
 *    layer inp_gate, proj, post_norm), layer_output_scale (layer_scalar), and
 *    the 26B-A4B's ffn_gate_inp.scale, ffn_down_exps.scale (router.scale,
 *    router.per_expert_scale) and second FFN norms; norms as stored
 *    (norm_shift 0); the experts' gate and up in one ffn_gate_up_exps
 *    [n_embd, 2·n_ff_exp, n_expert] (each expert's gate rows, then its up
 *    rows: experts.gate_up_proj as stored) beside ffn_down_exps;
 *  - keys: key_length / value_length (global_head_dim) and their _swa twins
 *    (head_dim), rope.dimension_count (global_head_dim) and _swa,
 *    rope.freq_base and _swa, the window and its per-layer flags,
 *    head_count_kv and feed_forward_length per layer where they differ,
 *    shared_kv_layers, embedding_length_per_layer_input,
 *    final_logit_softcapping and the expert keys. */
#include "io/gguf_writer.h"
#include "model/weights.h"
#include "quant/quant_internal.h"

#include <inttypes.h>
#include <stdlib.h>

static bool append(kld_hf_tensors *out, const kld_tensor *t, kld_tensor_id id, int64_t il, const char *kind) {
    char name[96];
    if (!t) return true;
    kld_tn(name, sizeof name, id, il, 0, kind);
    return kld_hf_append(out, t, name, NULL);
}

kld_status kld_hf_list_gemma4(const kld_weights *w, const kld_hparams *hp, kld_hf_tensors *out, kld_error *err) {
    if (strcmp(hp->arch, "gemma4") != 0) return KLD_OK;
    bool ok = true;
    if (w->rope_freqs) { /* generated at load: copied, the table owns it */
        const kld_tensor *r = w->rope_freqs;
        float *f = malloc((size_t)r->nbytes);
        kld_tensor t = *r;
        char name[64];
        if (f) memcpy(f, r->data, (size_t)r->nbytes);
        t.data = f;
        ok = f && kld_hf_append(out, &t, kld_tn(name, sizeof name, KLD_T_ROPE_FREQS, 0, 0, "weight"), f);
        if (f && !ok) free(f);
    }
    ok = ok && append(out, w->ple_token_embd, KLD_T_PER_LAYER_TOKEN_EMBD, 0, "weight") &&
         append(out, w->ple_model_proj, KLD_T_PER_LAYER_MODEL_PROJ, 0, "weight") &&
         append(out, w->ple_proj_norm, KLD_T_PER_LAYER_PROJ_NORM, 0, "weight");
    for (int64_t il = 0; ok && il < w->n_layer; il++) {
        const kld_layer_weights *L = &w->layers[il];
        ok = append(out, L->out_scale, KLD_T_LAYER_OUT_SCALE, il, "weight") &&
             append(out, L->ple_inp_gate, KLD_T_PER_LAYER_INP_GATE, il, "weight") &&
             append(out, L->ple_proj, KLD_T_PER_LAYER_PROJ, il, "weight") &&
             append(out, L->ple_post_norm, KLD_T_PER_LAYER_POST_NORM, il, "weight") &&
             append(out, L->moe.gate_inp_scale, KLD_T_FFN_GATE_INP, il, "scale") &&
             append(out, L->moe.down_exps_scale, KLD_T_FFN_DOWN_EXPS, il, "scale") &&
             append(out, L->moe.pre_norm_2, KLD_T_FFN_PRE_NORM_2, il, "weight") &&
             append(out, L->moe.post_norm_1, KLD_T_FFN_POST_NORM_1, il, "weight") &&
             append(out, L->moe.post_norm_2, KLD_T_FFN_POST_NORM_2, il, "weight");
    }
    return ok ? KLD_OK : kld_fail(err, KLD_ERR_NOMEM, "out of memory");
}

static size_t find(const kld_hf_tensors *o, const char *name) {
    for (size_t i = 0; i < o->n; i++)
        if (o->names[i] && !strcmp(o->names[i], name)) return i;
    return o->n;
}

kld_status kld_hf_gemma4_fuse_gate_up(kld_hf_tensors *o, const kld_hparams *hp, kld_error *err) {
    if (strcmp(hp->arch, "gemma4") != 0 || !kld_hparams_is_moe(hp)) return KLD_OK;
    char gn[96], un[96], fn[96];
    for (int64_t il = 0; il < hp->n_layer; il++) {
        const size_t g = find(o, kld_tn(gn, sizeof gn, KLD_T_FFN_GATE_EXPS, il, 0, "weight"));
        const size_t u = find(o, kld_tn(un, sizeof un, KLD_T_FFN_UP_EXPS, il, 0, "weight"));
        if (g == o->n || u == o->n) continue;
        kld_tensor *tg = &o->tensors[g];
        const kld_tensor *tu = &o->tensors[u];
        const int64_t X = tg->ne[2];
        if (tu->type != tg->type || tu->nbytes != tg->nbytes || X < 1 || tg->nbytes % (uint64_t)X)
            return kld_fail(err, KLD_ERR_FORMAT, "tensors '%s' / '%s' differ in type or size: cannot be fused into "
                            "ffn_gate_up_exps", gn, un);
        const uint64_t slice = tg->nbytes / (uint64_t)X;
        uint8_t *buf = malloc((size_t)(2 * tg->nbytes));
        char *name = kld_strdup(kld_tn(fn, sizeof fn, KLD_T_FFN_GATE_UP_EXPS, il, 0, "weight"));
        if (!buf || !name) {
            free(buf), free(name);
            return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
        }
        for (int64_t e = 0; e < X; e++) {
            memcpy(buf + 2 * (uint64_t)e * slice, (const uint8_t *)tg->data + (uint64_t)e * slice, (size_t)slice);
            memcpy(buf + (2 * (uint64_t)e + 1) * slice, (const uint8_t *)tu->data + (uint64_t)e * slice, (size_t)slice);
        }
        tg->ne[1] *= 2;
        tg->nbytes *= 2;
        tg->data = buf;
        free(o->owned[g]);
        o->owned[g] = buf;
        free(o->names[g]);
        o->names[g] = name;
        free(o->names[u]);
        o->names[u] = NULL;
        free(o->owned[u]);
        o->owned[u] = NULL;
    }
    size_t j = 0; /* drop the up entries, keeping the order of the rest */
    for (size_t i = 0; i < o->n; i++) {
        if (!o->names[i]) continue;
        o->tensors[j] = o->tensors[i];
        o->names[j] = o->names[i];
        o->owned[j] = o->owned[i];
        j++;
    }
    o->n = j;
    return KLD_OK;
}

/* An integer key per layer: one value when every layer has it, else the array. */
static bool per_layer(kld_gguf_writer *w, const kld_hparams *hp, kld_arch_key_id id,
                      int64_t (*of)(const kld_hparams *, int64_t)) {
    char k[96];
    int32_t v[KLD_MAX_LAYER];
    bool same = true;
    for (int64_t il = 0; il < hp->n_layer; il++) {
        v[il] = (int32_t)of(hp, il);
        same &= v[il] == v[0];
    }
    kld_arch_key(k, sizeof k, hp->arch, id);
    if (same) return !kld_gguf_writer_set_u32(w, k, (uint32_t)v[0]);
    return !kld_gguf_writer_set_arr_i32(w, k, v, (uint64_t)hp->n_layer);
}

kld_status kld_hf_put_hparams_gemma4(const kld_hparams *hp, kld_gguf_writer *w, kld_error *err) {
    char k[96];
    bool ok = true;
#define KEY(id) kld_arch_key(k, sizeof k, hp->arch, id)
#define U32(id, v) (ok = ok && !kld_gguf_writer_set_u32(w, KEY(id), (uint32_t)(v)))
#define F32(id, v) (ok = ok && !kld_gguf_writer_set_f32(w, KEY(id), (float)(v)))
    ok = ok && !kld_gguf_writer_set_str(w, "general.architecture", hp->arch);
    ok = ok && !kld_gguf_writer_set_str(w, "general.name", hp->name);
    U32(KLD_K_CONTEXT_LENGTH, hp->n_ctx_train);
    U32(KLD_K_EMBEDDING_LENGTH, hp->n_embd);
    U32(KLD_K_BLOCK_COUNT, hp->n_layer);
    ok = ok && per_layer(w, hp, KLD_K_FEED_FORWARD_LENGTH, kld_hp_n_ff);
    U32(KLD_K_HEAD_COUNT, hp->n_head);
    ok = ok && per_layer(w, hp, KLD_K_HEAD_COUNT_KV, kld_hp_n_head_kv);
    F32(KLD_K_RMS_EPS, hp->norm_eps);
    U32(KLD_K_KEY_LENGTH, hp->head_dim);
    U32(KLD_K_VALUE_LENGTH, hp->head_dim_v);
    U32(KLD_K_KEY_LENGTH_SWA, hp->head_dim_swa);
    U32(KLD_K_VALUE_LENGTH_SWA, hp->head_dim_swa);
    U32(KLD_K_ROPE_DIMENSION_COUNT, hp->n_rot);
    U32(KLD_K_ROPE_DIMENSION_COUNT_SWA, hp->n_rot_swa);
    F32(KLD_K_ROPE_FREQ_BASE, hp->rope_freq_base);
    F32(KLD_K_ROPE_FREQ_BASE_SWA, hp->rope_freq_base_swa);
    if (hp->final_softcap > 0) F32(KLD_K_FINAL_SOFTCAP, hp->final_softcap);
    U32(KLD_K_SLIDING_WINDOW, hp->sliding_window);
    int32_t flags[KLD_MAX_LAYER];
    for (int64_t il = 0; il < hp->n_layer; il++) flags[il] = kld_hparams_layer_swa(hp, il);
    ok = ok && !kld_gguf_writer_set_arr_i32(w, KEY(KLD_K_SLIDING_WINDOW_PATTERN), flags, (uint64_t)hp->n_layer);
    U32(KLD_K_SHARED_KV_LAYERS, hp->n_layer_kv > 0 ? hp->n_layer - hp->n_layer_kv : 0);
    U32(KLD_K_EMBD_LENGTH_PER_LAYER, hp->n_embd_per_layer);
    if (kld_hparams_is_moe(hp)) {
        U32(KLD_K_EXPERT_COUNT, hp->n_expert);
        U32(KLD_K_EXPERT_USED_COUNT, hp->n_expert_used);
        U32(KLD_K_EXPERT_FF_LENGTH, hp->n_ff_exp);
    }
#undef F32
#undef U32
#undef KEY
    return ok ? KLD_OK : kld_fail(err, KLD_ERR_NOMEM, "out of memory");
}
