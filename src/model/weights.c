/* weights.c — binds the tensors of one model by name (weights_names.c: GGUF
 * or Hugging Face), each checked for presence, shape (ggml order) and a
 * usable type. */
#include "model/weights.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct binder {
    const kld_source *src;
    const kld_hparams *hp;
    kld_error *err;
    bool squeezed_ok; /* also accept [ne0, 1, ne1] (HF Conv1d weights) */
} binder;

static void shape_str(char *buf, size_t cap, int n, const int64_t *ne) {
    size_t o = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < n && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%" PRId64, i ? ", " : "", ne[i]);
    if (o < cap) snprintf(buf + o, cap - o, "]");
}

/* Finds `name` (GGUF spelling) and checks it has shape ne0 (× ne1 when
 * ne1 > 0, × ne2 when ne2 > 0). Missing + optional → *out = NULL and KLD_OK. */
static kld_status bind3(binder *b, const char *name, int64_t ne0, int64_t ne1, int64_t ne2,
                        bool required, const kld_tensor **out) {
    char sname[256], exp[64], got[96];
    *out = NULL;
    const char *src_name = kld_weights_source_name(b->src, b->hp, name, sname, sizeof sname);
    bool renamed = strcmp(src_name, name) != 0;
    int64_t want[3] = {ne0, ne1, ne2};
    int want_dims = ne2 > 0 ? 3 : ne1 > 0 ? 2 : 1;
    shape_str(exp, sizeof exp, want_dims, want);
    const kld_tensor *t = kld_source_find(b->src, src_name);
    if (!t) {
        if (!required) return KLD_OK;
        return kld_fail(b->err, KLD_ERR_FORMAT,
                        "%s: tensor '%s'%s%s%s is missing (expected shape %s, ggml order)",
                        b->src->path, name, renamed ? " (" : "", renamed ? src_name : "",
                        renamed ? ")" : "", exp);
    }
    bool ok = t->ne[0] == ne0 && t->ne[1] == (ne1 > 0 ? ne1 : 1) && t->ne[2] == (ne2 > 0 ? ne2 : 1) &&
              t->ne[3] == 1;
    if (b->squeezed_ok && ne1 > 0 && ne2 <= 0 && t->ne[0] == ne0 && t->ne[1] == 1 &&
        t->ne[2] == ne1 && t->ne[3] == 1)
        ok = true;
    if (!ok) {
        shape_str(got, sizeof got, t->n_dims > 0 ? t->n_dims : 1, t->ne);
        return kld_fail(b->err, KLD_ERR_FORMAT,
                        "%s: tensor '%s'%s%s%s has shape %s, expected %s (ggml order, for n_embd %"
                        PRId64 ", n_head %" PRId64 ", n_head_kv %" PRId64 ", head_dim %" PRId64
                        ", n_ff %" PRId64 ", n_vocab %" PRId64 ", n_expert %" PRId64 ", n_ff_exp %"
                        PRId64 ")", b->src->path, name, renamed ? " (" : "", renamed ? src_name : "",
                        renamed ? ")" : "", got, exp, b->hp->n_embd, b->hp->n_head,
                        b->hp->n_head_kv, b->hp->head_dim, b->hp->n_ff, b->hp->n_vocab,
                        b->hp->n_expert, b->hp->n_ff_exp);
    }
    const kld_type_info *ti = kld_type_info_get(t->type);
    if (!ti || !ti->to_float_ref) {
        char tb[16];
        return kld_fail(b->err, KLD_ERR_UNSUPPORTED, "%s: tensor '%s': weight type %s is not "
                        "supported", b->src->path, name, kld_type_name(t->type, tb));
    }
    *out = t;
    return KLD_OK;
}

static kld_status bind(binder *b, const char *name, int64_t ne0, int64_t ne1, bool required,
                       const kld_tensor **out) {
    return bind3(b, name, ne0, ne1, 0, required, out);
}

/* A required convolution kernel {ne0, ne1}, also as HF's squeezed
 * [ne0, 1, ne1]; a shape error names the sizes (why) it was derived from. */
static kld_status bind_conv(binder *b, const char *name, int64_t ne0, int64_t ne1,
                            const kld_tensor **out, const char *why) {
    b->squeezed_ok = true;
    const kld_status s = bind(b, name, ne0, ne1, true, out);
    b->squeezed_ok = false;
    if (s == KLD_ERR_FORMAT) {
        const size_t len = strlen(b->err->msg);
        snprintf(b->err->msg + len, sizeof b->err->msg - len, "; %s", why);
    }
    return s;
}

/* Slice e of a merged [ne0, ne1, n_expert] tensor as a 2-D tensor view
 * (every block type stores whole rows, so a slice is whole rows too). */
static void slice_view(const kld_tensor *t, int64_t e, kld_tensor *v) {
    const uint64_t slice = t->nbytes / (uint64_t)t->ne[2];
    *v = *t;
    v->n_dims = 2;
    v->ne[2] = 1;
    v->data = (const uint8_t *)t->data + (uint64_t)e * slice;
    v->nbytes = slice;
}

/* The routed experts of layer il: merged blk.N.ffn_{gate,up,down}_exps
 * when the file has them, else the per-expert blk.N.ffn_{gate,up,down}.E
 * (older GGUFs, which llama.cpp merged on load until c5b0f4b5, and the
 * Hugging Face checkpoints). */
static kld_status bind_experts(binder *b, int il, kld_layer_weights *L, kld_weights *w) {
    const kld_hparams *hp = b->hp;
    const int64_t E = hp->n_embd, F = hp->n_ff_exp, X = hp->n_expert;
    static const kld_tensor_id merged_id[3] = {KLD_T_FFN_GATE_EXPS, KLD_T_FFN_UP_EXPS, KLD_T_FFN_DOWN_EXPS};
    static const kld_tensor_id per_id[3] = {KLD_T_FFN_GATE_EXP, KLD_T_FFN_UP_EXP, KLD_T_FFN_DOWN_EXP};
    const kld_tensor **merged[3] = {&L->moe.gate_exps, &L->moe.up_exps, &L->moe.down_exps};
    const kld_tensor ***per[3] = {&L->moe.gate, &L->moe.up, &L->moe.down};
    char n[96];
    if (hp->sw.moe_biases && b->src->format == KLD_FORMAT_SAFETENSORS) { /* gpt-oss: rebuilt */
        for (int k = 0; k < 3; k++) *per[k] = w->expert_slots + ((int64_t)il * 3 + k) * X;
        return kld_weights_gptoss_hf(b->src, hp, il, &L->moe, w, b->err);
    }
    kld_tn(n, sizeof n, KLD_T_FFN_DOWN_EXPS, il, 0, "weight");
    char sname[256];
    const bool is_merged = kld_source_find(b->src, kld_weights_source_name(b->src, hp, n, sname,
                                                                            sizeof sname)) != NULL;
    kld_tn(n, sizeof n, KLD_T_FFN_DOWN_EXP, il, 0, "weight");
    const bool is_split = !is_merged &&
        kld_source_find(b->src, kld_weights_source_name(b->src, hp, n, sname, sizeof sname)) != NULL;
    kld_status s;
    for (int k = 0; k < 3; k++) {
        const bool down = k == 2;
        const int64_t ne0 = down ? F : E, ne1 = down ? E : F;
        *per[k] = w->expert_slots + ((int64_t)il * 3 + k) * X;
        if (!is_split) {
            kld_tn(n, sizeof n, merged_id[k], il, 0, "weight");
            if ((s = bind3(b, n, ne0, ne1, X, true, merged[k]))) return s;
            continue;
        }
        for (int64_t e = 0; e < X; e++) {
            kld_tn(n, sizeof n, per_id[k], il, e, "weight");
            if ((s = bind(b, n, ne0, ne1, true, &(*per[k])[e]))) return s;
        }
    }
    return KLD_OK;
}

/* Gemma 4's experts with gate and up in one tensor (llama.cpp's ffn_gate_up_exps
 * [n_embd, 2·n_ff_exp, n_expert], what the converter makes of experts.gate_up_proj; its
 * graph takes each expert's first n_ff_exp rows as the gate, the next as up), and a
 * transformers 5 Qwen3.5-MoE checkpoint's mlp.experts.gate_up_proj (the same layout), and the
 * ffn_gate_up_exps of a qwen35moe / qwen3next GGUF converted with --fuse-gate-up-exps: per-expert
 * views of both halves, and the merged ffn_down_exps. */
static kld_status bind_gate_up(binder *b, int il, const char *name, kld_layer_weights *L, kld_weights *w) {
    const kld_hparams *hp = b->hp;
    const int64_t E = hp->n_embd, F = hp->n_ff_exp, X = hp->n_expert;
    const kld_tensor *gu = NULL;
    char n[64];
    kld_status s = bind3(b, name, E, 2 * F, X, true, &gu);
    if (s) return s;
    const uint64_t slice = gu->nbytes / (uint64_t)X, half = slice / 2;
    for (int k = 0; k < 2; k++) {
        const kld_tensor **per = w->expert_slots + ((int64_t)il * 3 + k) * X;
        kld_tensor *views = w->expert_views + ((int64_t)il * 3 + k) * X;
        for (int64_t e = 0; e < X; e++) {
            views[e] = *gu;
            views[e].n_dims = 2;
            views[e].ne[1] = F;
            views[e].ne[2] = 1;
            views[e].data = (const uint8_t *)gu->data + (uint64_t)e * slice + (uint64_t)k * half;
            views[e].nbytes = half;
            per[e] = &views[e];
        }
        *(k ? &L->moe.up : &L->moe.gate) = per;
    }
    L->moe.down = w->expert_slots + ((int64_t)il * 3 + 2) * X; /* slices: kld_weights_moe_refresh */
    return bind3(b, kld_tn(n, sizeof n, KLD_T_FFN_DOWN_EXPS, il, 0, "weight"), F, E, X, true, &L->moe.down_exps);
}

static kld_status bind_moe(binder *b, int il, kld_layer_weights *L, kld_weights *w) {
    const kld_hparams *hp = b->hp;
    const int64_t E = hp->n_embd;
    char n[64];
    kld_status s;
    kld_tn(n, sizeof n, KLD_T_FFN_GATE_INP, il, 0, "weight");
    if ((s = bind(b, n, E, hp->n_expert, true, &L->moe.gate_inp))) return s;
    char sname[256];
    kld_tn(n, sizeof n, KLD_T_FFN_GATE_UP_EXPS, il, 0, "weight");
    const bool gate_up = kld_source_find(b->src, kld_weights_source_name(b->src, hp, n, sname, sizeof sname)) != NULL;
    const bool safetensors = b->src->format == KLD_FORMAT_SAFETENSORS;
    if (gate_up && !hp->sw.moe_beside_dense && !(safetensors ? hp->sw.hf_fused_experts : hp->sw.gguf_fused_experts))
        return kld_fail(b->err, KLD_ERR_UNSUPPORTED, "%s: tensor '%s': experts with gate and up fused in one "
                        "tensor are not supported for %s (separate ffn_gate_exps / ffn_up_exps are)", b->src->path,
                        n, hp->arch);
    if ((s = gate_up ? bind_gate_up(b, il, n, L, w) : bind_experts(b, il, L, w))) return s;
    if (hp->sw.moe_biases) {
        const int64_t F = hp->n_ff_exp, X = hp->n_expert;
        if ((s = bind(b, kld_tn(n, sizeof n, KLD_T_FFN_GATE_INP, il, 0, "bias"), X, 0, true, &L->moe.gate_inp_b)))
            return s;
        if (!L->moe.down_exps_b && /* a checkpoint's: bound with its experts */
            ((s = bind(b, kld_tn(n, sizeof n, KLD_T_FFN_GATE_EXPS, il, 0, "bias"), F, X, true, &L->moe.gate_exps_b)) ||
            (s = bind(b, kld_tn(n, sizeof n, KLD_T_FFN_UP_EXPS, il, 0, "bias"), F, X, true, &L->moe.up_exps_b)) ||
            (s = bind(b, kld_tn(n, sizeof n, KLD_T_FFN_DOWN_EXPS, il, 0, "bias"), E, X, true, &L->moe.down_exps_b))))
            return s;
    }
    if ((hp->moe_gating == KLD_MOE_GATE_SIGMOID || hp->sw.mla) && /* deepseek2: any gating */
        (s = bind(b, kld_tn(n, sizeof n, KLD_T_FFN_EXP_PROBS_B, il, 0, "bias"), hp->n_expert, 0, !hp->sw.mla,
                  &L->moe.exp_probs_b)))
        return s;
    if (!hp->sw.moe_shared_expert) return KLD_OK;
    const int64_t S = hp->n_ff_shexp;
    if (hp->sw.moe_shexp_ungated) goto shexp; /* no gate vector: added as is */
    kld_tn(n, sizeof n, KLD_T_FFN_GATE_INP_SHEXP, il, 0, "weight");
    if ((s = bind(b, n, E, 0, true, &L->moe.gate_inp_shexp))) return s;
shexp:
    kld_tn(n, sizeof n, KLD_T_FFN_GATE_SHEXP, il, 0, "weight");
    if ((s = bind(b, n, E, S, true, &L->moe.gate_shexp))) return s;
    kld_tn(n, sizeof n, KLD_T_FFN_UP_SHEXP, il, 0, "weight");
    if ((s = bind(b, n, E, S, true, &L->moe.up_shexp))) return s;
    kld_tn(n, sizeof n, KLD_T_FFN_DOWN_SHEXP, il, 0, "weight");
    return bind(b, n, S, E, true, &L->moe.down_shexp);
}

void kld_weights_moe_refresh(kld_weights *w) {
    const int64_t X = w->n_expert;
    for (int64_t il = 0; X > 0 && il < w->n_layer; il++) {
        kld_layer_weights *L = &w->layers[il];
        const kld_tensor *merged[3] = {L->moe.gate_exps, L->moe.up_exps, L->moe.down_exps};
        const kld_tensor **per[3] = {L->moe.gate, L->moe.up, L->moe.down};
        for (int k = 0; k < 3; k++) {
            if (!merged[k]) continue;
            kld_tensor *views = w->expert_views + (il * 3 + k) * X;
            for (int64_t e = 0; e < X; e++) {
                slice_view(merged[k], e, &views[e]);
                per[k][e] = &views[e];
            }
        }
    }
}

/* Binds suffix of layer il into L->field (the locals n, s of the caller). */
#define B(field, id, kind, ne0, ne1, req)                                                     \
    do {                                                                                      \
        kld_tn(n, sizeof n, KLD_T_##id, il, 0, kind);                                         \
        if ((s = bind(b, n, (ne0), (ne1), (req), &L->field)) != KLD_OK) return s;             \
    } while (0)

/* deepseek2's MLA (deepseek2.cpp load_arch_tensors, the attn_kv_b form):
 * q from attn_q or attn_q_a → attn_q_a_norm → attn_q_b, [latent kv; k_pe]
 * from attn_kv_a_mqa, attn_kv_a_norm on the latent part, attn_kv_b giving
 * each head's [k_nope; v]. */
static kld_status bind_mla(binder *b, int il, kld_layer_weights *L, kld_weights *w) {
    const kld_hparams *hp = b->hp;
    const int64_t E = hp->n_embd, H = hp->n_head, R = hp->n_lora_kv;
    const int64_t nope = hp->head_dim - hp->n_rot;
    char n[64];
    kld_status s;
    if (hp->n_lora_q > 0) {
        B(attn_q_a, ATTN_Q_A, "weight", E, hp->n_lora_q, true);
        B(attn_q_a_norm, ATTN_Q_A_NORM, "weight", hp->n_lora_q, 0, true);
        B(attn_q_b, ATTN_Q_B, "weight", hp->n_lora_q, H * hp->head_dim, true);
    } else {
        B(attn_q, ATTN_Q, "weight", E, H * hp->head_dim, true);
    }
    B(attn_kv_a_mqa, ATTN_KV_A_MQA, "weight", E, R + hp->n_rot, true);
    B(attn_kv_a_norm, ATTN_KV_A_NORM, "weight", R, 0, true);
    if (hp->mla_absorbed) { /* the converter's split of kv_b: rebuilt into it */
        const kld_tensor *kb = NULL, *vb = NULL;
        if ((s = bind3(b, kld_tn(n, sizeof n, KLD_T_ATTN_K_B, il, 0, "weight"), nope, R, H, true, &kb)) ||
            (s = bind3(b, kld_tn(n, sizeof n, KLD_T_ATTN_V_B, il, 0, "weight"), R, hp->head_dim_v, H, true, &vb)) ||
            (s = kld_weights_mla_kv_b(b->src, hp, il, kb, vb, w, &L->attn_kv_b, b->err)))
            return s;
    } else {
        B(attn_kv_b, ATTN_KV_B, "weight", R, H * (nope + hp->head_dim_v), true);
    }
    B(attn_output, ATTN_OUT, "weight", H * hp->head_dim_v, E, true);
    return KLD_OK;
}

static kld_status bind_attention(binder *b, int il, kld_layer_weights *L, kld_weights *w) {
    const kld_hparams *hp = b->hp;
    if (hp->sw.mla) return bind_mla(b, il, L, w);
    const int64_t hd = kld_hp_head_dim(hp, il), hdv = kld_hp_head_dim_v(hp, il), nkv = kld_hp_n_head_kv(hp, il);
    const int64_t E = hp->n_embd, nq = hp->n_head * hd, nk = nkv * hd, nv = nkv * hdv, no = hp->n_head * hdv;
    /* a layer reading an earlier layer's KV cache (Gemma 4) may keep its own K / V unused */
    const bool own_kv = kld_hp_has_own_kv(hp, il);
    char n[64];
    kld_status s;
    if (hp->sw.fused_qkv) {
        B(attn_qkv, ATTN_QKV, "weight", E, nq + nk + nv, true);
        B(bqkv, ATTN_QKV, "bias", nq + nk + nv, 0, false);
    } else {
        B(attn_q, ATTN_Q, "weight", E, hp->sw.attn_out_gate ? 2 * nq : nq, true); /* [q; gate] per head */
        B(attn_k, ATTN_K, "weight", E, nk, own_kv);
        B(attn_v, ATTN_V, "weight", E, nv, !hp->sw.v_from_k);
        B(bq, ATTN_Q, "bias", nq, 0, hp->sw.qkv_bias_required);
        B(bk, ATTN_K, "bias", nk, 0, hp->sw.qkv_bias_required);
        B(bv, ATTN_V, "bias", nv, 0, hp->sw.qkv_bias_required);
    }
    if (hp->sw.qk_norm || hp->sw.qk_norm_optional) {
        B(attn_q_norm, ATTN_Q_NORM, "weight", hd, 0, hp->sw.qk_norm);
        B(attn_k_norm, ATTN_K_NORM, "weight", hd, 0, hp->sw.qk_norm && own_kv);
    }
    if (hp->sw.qk_norm_full) { /* llama.cpp declares both [n_embd]: equal when n_head_kv = n_head */
        B(attn_q_norm, ATTN_Q_NORM, "weight", nq, 0, true);
        B(attn_k_norm, ATTN_K_NORM, "weight", nk, 0, true);
    }
    if (hp->sw.attn_sinks) B(attn_sinks, ATTN_SINKS, "weight", hp->n_head, 0, true);
    B(attn_output, ATTN_OUT, "weight", no, E, true);
    B(bo, ATTN_OUT, "bias", E, 0, hp->sw.out_bias_required);
    if (hp->sw.post_norms) {
        B(attn_post_norm, ATTN_POST_NORM, "weight", E, 0, true);
        B(ffn_post_norm, FFN_POST_NORM, "weight", E, 0, true);
    }
    if (hp->sw.layer_out_scale) B(out_scale, LAYER_OUT_SCALE, "weight", 1, 0, false);
    if (hp->n_embd_per_layer > 0) {
        B(ple_inp_gate, PER_LAYER_INP_GATE, "weight", E, hp->n_embd_per_layer, true);
        B(ple_proj, PER_LAYER_PROJ, "weight", hp->n_embd_per_layer, E, true);
        B(ple_post_norm, PER_LAYER_POST_NORM, "weight", E, 0, true);
    }
    return KLD_OK;
}

/* LFM2 (llama.cpp llama_model_lfm2::load_arch_tensors): conv {L, n_embd},
 * in_proj {n_embd, 3·n_embd}, out_proj {n_embd, n_embd}. */
static kld_status bind_shortconv(binder *b, int il, kld_layer_weights *L) {
    const kld_hparams *hp = b->hp;
    const int64_t E = hp->n_embd;
    char n[64];
    kld_status s;
    char why[96];
    kld_tn(n, sizeof n, KLD_T_SHORTCONV_CONV, il, 0, "weight");
    snprintf(why, sizeof why, "shortconv.l_cache = %" PRId64, hp->shortconv_l_cache);
    if ((s = bind_conv(b, n, hp->shortconv_l_cache, E, &L->shortconv_conv, why))) return s;
    B(shortconv_in_proj, SHORTCONV_INPROJ, "weight", E, 3 * E, true);
    B(shortconv_out_proj, SHORTCONV_OUTPROJ, "weight", E, E, true);
    return KLD_OK;
}

/* Qwen3-Next's DeltaNet layer as llama.cpp's QWEN3NEXT load_arch_tensors
 * declares it: attn_qkv / attn_gate, or the fused legacy ssm_in and the
 * Hugging Face tensors rebuilt into them (weights_deltanet.c). */
static kld_status bind_deltanet(binder *b, int il, kld_layer_weights *L, kld_weights *w) {
    const kld_hparams *hp = b->hp;
    const int64_t E = hp->n_embd, nv = hp->dn_n_v_heads;
    const int64_t kd = hp->dn_n_k_heads * hp->dn_head_k, vd = nv * hp->dn_head_v, C = 2 * kd + vd;
    char n[64];
    kld_status s;
    if ((s = kld_weights_dn_derive(b->src, hp, il, L, w, b->err))) return s;
    /* tensors rebuilt from a Hugging Face checkpoint (Qwen3.5) keep their HF names: check their shapes */
    const struct {
        const kld_tensor *t;
        int64_t ne0, ne1;
    } derived[] = {{L->dn_qkv, E, C},      {L->dn_gate, E, vd}, {L->dn_beta, E, nv}, {L->dn_alpha, E, nv},
                   {L->dn_out, vd, E},     {L->dn_dt, nv, 1},   {L->dn_a, nv, 1}};
    for (size_t i = 0; hp->hy.dn_v_tiled && i < sizeof derived / sizeof derived[0]; i++) {
        const kld_tensor *t = derived[i].t;
        if (t && (t->ne[0] != derived[i].ne0 || kld_tensor_nelements(t) != derived[i].ne0 * derived[i].ne1))
            return kld_fail(b->err, KLD_ERR_FORMAT, "%s: tensor '%s' has shape [%" PRId64 ", %" PRId64 "], expected [%"
                            PRId64 ", %" PRId64 "] (ggml order)", b->src->path, t->name, t->ne[0], t->ne[1],
                            derived[i].ne0, derived[i].ne1);
    }
    if (L->dn_conv && (L->dn_conv->ne[0] != hp->dn_conv || kld_tensor_nelements(L->dn_conv) != hp->dn_conv * C))
        return kld_fail(b->err, KLD_ERR_FORMAT, "%s: tensor '%s' has %" PRId64 " values, expected [%" PRId64 ", 1, %"
                        PRId64 "]", b->src->path, L->dn_conv->name, kld_tensor_nelements(L->dn_conv), hp->dn_conv, C);
    if (!L->dn_qkv) B(dn_qkv, ATTN_QKV, "weight", E, C, true);
    if (!L->dn_gate) B(dn_gate, ATTN_GATE, "weight", E, vd, true);
    char why[128];
    kld_tn(n, sizeof n, KLD_T_SSM_CONV1D, il, 0, "weight");
    snprintf(why, sizeof why, "ssm.conv_kernel = %" PRId64 ", 2·group_count·state_size + inner_size = %" PRId64,
             hp->dn_conv, C);
    if (!L->dn_conv && (s = bind_conv(b, n, hp->dn_conv, C, &L->dn_conv, why))) return s;
    if (!L->dn_dt) B(dn_dt, SSM_DT, "bias", nv, 0, true);
    kld_tn(n, sizeof n, KLD_T_SSM_A, il, 0, NULL); /* no ".weight" suffix in llama.cpp's name */
    if (!L->dn_a && (s = bind(b, n, nv, 0, true, &L->dn_a))) return s;
    if (hp->hy.dn_split_ba) {
        if (!L->dn_beta) B(dn_beta, SSM_BETA, "weight", E, nv, true);
        if (!L->dn_alpha) B(dn_alpha, SSM_ALPHA, "weight", E, nv, true);
    } else if ((s = bind(b, kld_tn(n, sizeof n, KLD_T_SSM_BETA_ALPHA, il, 0, "weight"), E, 2 * nv, true,
                         &L->dn_ba)) == KLD_ERR_FORMAT) {
        /* kldeval's converter wrote this misspelling before issue 30; llama.cpp never read it */
        char old[64];
        snprintf(old, sizeof old, "blk.%d.ssm_beta_alpha.weight", il);
        if (b->src->format == KLD_FORMAT_GGUF && kld_source_find(b->src, old)) {
            const size_t len = strlen(b->err->msg);
            snprintf(b->err->msg + len, sizeof b->err->msg - len, "; the file has '%s' instead, the "
                     "name older kldeval conversions used: convert the checkpoint again", old);
        }
    }
    if (s) return s;
    B(dn_norm, SSM_NORM, "weight", hp->dn_head_v, 0, true);
    if (!L->dn_out) B(dn_out, SSM_OUT, "weight", vd, E, true);
    return KLD_OK;
}

static kld_status bind_layer(binder *b, int il, kld_layer_weights *L, kld_weights *w) {
    const kld_hparams *hp = b->hp;
    const int64_t E = hp->n_embd;
    char n[64];
    kld_status s;
    B(attn_norm, ATTN_NORM, "weight", E, 0, true);
    switch (kld_hparams_layer_kind(hp, il)) {
    case KLD_LAYER_SHORTCONV: s = bind_shortconv(b, il, L); break;
    case KLD_LAYER_DELTANET: s = bind_deltanet(b, il, L, w); break;
    default: s = bind_attention(b, il, L, w); break;
    }
    if (s != KLD_OK) return s;
    kld_tn(n, sizeof n, hp->hy.ffn_norm, il, 0, "weight");
    if ((s = bind(b, n, E, 0, true, &L->ffn_norm))) return s;
    if (kld_hparams_layer_moe(hp, il)) {
        if ((s = bind_moe(b, il, L, w))) return s;
        if (!hp->sw.moe_beside_dense) return KLD_OK;
        /* Gemma 4 26B-A4B: the router's input scale, the experts' own norms and output scales,
         * then the dense FFN below */
        B(moe.gate_inp_scale, FFN_GATE_INP, "scale", E, 0, true);
        B(moe.down_exps_scale, FFN_DOWN_EXPS, "scale", hp->n_expert, 0, false);
        B(moe.pre_norm_2, FFN_PRE_NORM_2, "weight", E, 0, true);
        B(moe.post_norm_1, FFN_POST_NORM_1, "weight", E, 0, true);
        B(moe.post_norm_2, FFN_POST_NORM_2, "weight", E, 0, true);
    }
    const int64_t ff = kld_hp_n_ff(hp, il);
    if (hp->sw.fused_gate_up) {
        B(ffn_up, FFN_UP, "weight", E, 2 * ff, true);
        B(b_up, FFN_UP, "bias", 2 * ff, 0, false);
    } else {
        B(ffn_gate, FFN_GATE, "weight", E, ff, true);
        B(ffn_up, FFN_UP, "weight", E, ff, true);
        B(b_gate, FFN_GATE, "bias", ff, 0, false);
        B(b_up, FFN_UP, "bias", ff, 0, false);
    }
    B(ffn_down, FFN_DOWN, "weight", ff, E, true);
    B(b_down, FFN_DOWN, "bias", E, 0, false);
    return KLD_OK;
}
#undef B

/* Gemma 4 from config.json: rope_freqs as llama.cpp's converter generates it (Gemma4Model
 * generate_extra_tensors): float32 1 for the rotated pairs of the full layers' heads, 1e30 for
 * the others (their angle vanishes). */
static kld_status derive_rope_freqs(const kld_source *src, const kld_hparams *hp, kld_weights *w, kld_error *err) {
    const int64_t half = hp->n_rot / 2;
    static const char name[] = "rope_freqs.weight";
    kld_tensor *t = calloc(1, sizeof *t);
    float *f = malloc(sizeof(float) * (size_t)half);
    char *nm = malloc(sizeof name);
    if (!t || !f || !nm) {
        free(t), free(f), free(nm);
        return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", src->path);
    }
    for (int64_t i = 0; i < half; i++) f[i] = i < hp->rope_freqs_rot_pairs ? 1.0f : 1e30f;
    memcpy(nm, name, sizeof name);
    t->name = nm;
    t->type = KLD_TYPE_F32;
    t->n_dims = 1;
    t->ne[0] = half;
    t->ne[1] = t->ne[2] = t->ne[3] = 1;
    t->data = f;
    t->nbytes = sizeof(float) * (uint64_t)half;
    w->rope_freqs_derived = t;
    w->rope_freqs = t;
    return KLD_OK;
}

/* Quantization scales a checkpoint may carry beside its weights (FP8 block scales, per-channel
 * or per-tensor weight and activation scales of fp8 / compressed-tensors / modelopt / Mistral
 * checkpoints, KV-cache scales), with what they are. */
static const struct {
    const char *suffix, *what;
} scale_suffixes[] = {
    {"_scale_inv", "FP8 block scales (quantization_config \"fp8\", e.g. DeepSeek V3's weight_scale_inv)"},
    {".weight_scale", "per-channel or block weight scales (fp8 / compressed-tensors / modelopt)"},
    {".weight_scale_2", "second-level weight scales (modelopt NVFP4)"},
    {".weight_global_scale", "global weight scales (compressed-tensors NVFP4)"},
    {".input_scale", "activation scales of a quantized checkpoint"},
    {".input_global_scale", "activation scales of a quantized checkpoint"},
    {"activation_scale", "activation scales of a quantized checkpoint"},
    {".qscale_weight", "weight scales (Mistral's fp8 format)"},
    {".qscale_act", "activation scales (Mistral's fp8 format)"},
    {".k_scale", "KV-cache scales of a quantized checkpoint"},
    {".v_scale", "KV-cache scales of a quantized checkpoint"},
};

/* A checkpoint whose weights need scales kldeval does not apply is refused, naming the file, the
 * tensor and why, rather than read with its scales silently dropped (llama.cpp's converter
 * multiplies each weight by them: conversion/base.py dequant_model). */
static kld_status refuse_scales(const kld_source *src, kld_error *err) {
    for (size_t i = 0; i < src->n_tensors; i++) {
        const char *name = src->tensors[i].name;
        const size_t len = strlen(name);
        for (size_t k = 0; k < sizeof scale_suffixes / sizeof scale_suffixes[0]; k++) {
            const size_t ls = strlen(scale_suffixes[k].suffix);
            if (len <= ls || strcmp(name + len - ls, scale_suffixes[k].suffix)) continue;
            const char *file = src->path;
            if (src->st && src->st->tensor_file && src->st->n_files > src->st->tensor_file[i])
                file = src->st->files[src->st->tensor_file[i]].path;
            return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: tensor '%s' holds %s, which kldeval does not apply: "
                            "its weights would be read without them; dequantize the checkpoint to bf16 / f32 "
                            "first (as llama.cpp's converter does)", file, name, scale_suffixes[k].what);
        }
    }
    return KLD_OK;
}

kld_status kld_weights_bind(const kld_source *src, const kld_hparams *hp, kld_weights *w,
                            kld_error *err) {
    memset(w, 0, sizeof *w);
    if (src->format == KLD_FORMAT_SAFETENSORS) {
        const kld_status q = refuse_scales(src, err);
        if (q) return q;
    }
    binder b = {src, hp, err, false};
    kld_status s;
    char onorm[64], n[64];
    kld_tn(onorm, sizeof onorm, hp->hy.output_norm, 0, 0, "weight");
    if ((s = bind(&b, kld_tn(n, sizeof n, KLD_T_TOKEN_EMBD, 0, 0, "weight"), hp->n_embd, hp->n_vocab,
                  true, &w->token_embd)) ||
        (s = bind(&b, onorm, hp->n_embd, 0, true, &w->output_norm)))
        return s;
    if (hp->tied_output) w->output = w->token_embd;
    else if ((s = bind(&b, kld_tn(n, sizeof n, KLD_T_OUTPUT, 0, 0, "weight"), hp->n_embd, hp->n_vocab,
                       true, &w->output)))
        return s;
    const int64_t half = hp->n_rot / 2;
    if ((s = bind(&b, kld_tn(n, sizeof n, KLD_T_ROPE_FREQS, 0, 0, "weight"), half, 0, false,
                  &w->rope_freqs)) ||
        (s = bind(&b, kld_tn(n, sizeof n, KLD_T_ROPE_FACTORS_LONG, 0, 0, "weight"), half, 0, false,
                  &w->rope_long)) ||
        (s = bind(&b, kld_tn(n, sizeof n, KLD_T_ROPE_FACTORS_SHORT, 0, 0, "weight"), half, 0, false,
                  &w->rope_short)))
        return s;
    const int64_t P = hp->n_embd_per_layer;
    if (P > 0 && ((s = bind(&b, kld_tn(n, sizeof n, KLD_T_PER_LAYER_TOKEN_EMBD, 0, 0, "weight"), P * hp->n_layer,
                            hp->n_vocab, true, &w->ple_token_embd)) ||
                  (s = bind(&b, kld_tn(n, sizeof n, KLD_T_PER_LAYER_MODEL_PROJ, 0, 0, "weight"), hp->n_embd,
                            P * hp->n_layer, true, &w->ple_model_proj)) ||
                  (s = bind(&b, kld_tn(n, sizeof n, KLD_T_PER_LAYER_PROJ_NORM, 0, 0, "weight"), P, 0, true,
                            &w->ple_proj_norm))))
        return s;
    if (!w->rope_freqs && hp->rope_freqs_rot_pairs > 0 && (s = derive_rope_freqs(src, hp, w, err))) return s;
    w->layers = calloc((size_t)hp->n_layer, sizeof *w->layers);
    w->n_expert = hp->n_expert;
    const size_t n_slots = (size_t)(hp->n_layer * 3 * hp->n_expert);
    if (n_slots) {
        w->expert_slots = calloc(n_slots, sizeof *w->expert_slots);
        w->expert_views = calloc(n_slots, sizeof *w->expert_views);
    }
    w->n_layer = hp->n_layer;
    if (!w->layers || (n_slots && (!w->expert_slots || !w->expert_views))) {
        kld_weights_free(w);
        return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", src->path);
    }
    for (int64_t il = 0; il < hp->n_layer; il++) {
        if ((s = bind_layer(&b, (int)il, &w->layers[il], w)) != KLD_OK) {
            kld_weights_free(w);
            return s;
        }
    }
    kld_weights_moe_refresh(w);
    return KLD_OK;
}

void kld_weights_free(kld_weights *w) {
    kld_weights_dn_free(w);
    kld_weights_gptoss_free(w);
    if (w->rope_freqs_derived) {
        free(w->rope_freqs_derived->name);
        free((void *)w->rope_freqs_derived->data);
        free(w->rope_freqs_derived);
    }
    free(w->layers);
    free(w->expert_slots);
    free(w->expert_views);
    memset(w, 0, sizeof *w);
}
