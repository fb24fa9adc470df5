/* weights_deltanet.c — Qwen3-Next's DeltaNet tensors where the source does
 * not store them as today's GGUF does, rebuilt once at load into owned
 * tensors of that layout:
 *  - the fused projection with [q, k, v, z] interleaved per q/k head: the
 *    Hugging Face linear_attn.in_proj_qkvz, and early GGUFs' blk.N.ssm_in
 *    (newer llama.cpp still reads those: src/models/qwen3next.cpp declares
 *    ssm_in TENSOR_NOT_REQUIRED, "ssm_in is used by legacy GGUF", and splits
 *    it in its graph's legacy path). Its rows are split into attn_qkv =
 *    [q of every head; k of every head; v of every head] and attn_gate =
 *    [z of every head], as convert_hf_to_gguf.py's Qwen3NextModel does
 *    ("original order: [q, k, v, z] * head_count");
 *  - Hugging Face A_log → ssm_a = −exp(A_log) (float32), and dt_bias read
 *    as ssm_dt.bias (the converter's rename to dt_proj.bias).
 * Rows are copied whole, so any row-based weight type works. */
#include "model/weights.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the store also holds deepseek2's attn_kv_b rebuilt from attn_k_b / attn_v_b (MLA_KV_B) */
enum { DN_QKV, DN_GATE, DN_A, DN_DT, DN_BETA, DN_ALPHA, DN_CONV, DN_OUT, MLA_KV_B, DN_SLOTS };

static kld_tensor *slot(kld_weights *w, int il, int k) { return &w->dn_derived[(int64_t)il * DN_SLOTS + k]; }

static kld_status alloc_store(const kld_source *src, kld_weights *w, kld_error *err) {
    if (w->dn_derived) return KLD_OK;
    const size_t n = (size_t)w->n_layer * DN_SLOTS;
    w->dn_derived = calloc(n, sizeof *w->dn_derived);
    w->dn_owned = calloc(n, sizeof *w->dn_owned);
    if (!w->dn_derived || !w->dn_owned) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", src->path);
    return KLD_OK;
}

/* [q (hk), k (hk), v (r·hv), z (r·hv)] per q/k head → attn_qkv, attn_gate. */
static kld_status split_qkvz(const kld_source *src, const kld_hparams *hp, const kld_tensor *t,
                             int il, kld_weights *w, kld_error *err) {
    const int64_t nk = hp->dn_n_k_heads, hk = hp->dn_head_k;
    const int64_t rv = hp->dn_n_v_heads / nk * hp->dn_head_v; /* v (and z) rows per q/k head */
    const int64_t group = 2 * hk + 2 * rv, rows = nk * group, kd = nk * hk, vd = nk * rv;
    if (t->n_dims != 2 || t->ne[0] != hp->n_embd || t->ne[1] != rows)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: tensor '%s' has shape [%" PRId64 ", %" PRId64
                        "], expected [%" PRId64 ", %" PRId64 "] (ggml order: n_embd × q/k heads %"
                        PRId64 " · (2·%" PRId64 " + 2·%" PRId64 "))", src->path, t->name, t->ne[0],
                        t->ne[1], hp->n_embd, rows, nk, hk, rv);
    const kld_type_info *ti = kld_type_info_get(t->type);
    if (!ti || !ti->to_float_ref || t->nbytes % (uint64_t)rows)
        return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: tensor '%s': weight type %u cannot be split "
                        "into rows", src->path, t->name, t->type);
    const uint64_t rb = t->nbytes / (uint64_t)rows;
    uint8_t *qkv = malloc((size_t)(rb * (uint64_t)(2 * kd + vd)));
    uint8_t *z = malloc((size_t)(rb * (uint64_t)vd) + 1);
    if (!qkv || !z) {
        free(qkv);
        free(z);
        return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", src->path);
    }
    const uint8_t *in = t->data;
    for (int64_t h = 0; h < nk; h++) {
        const uint8_t *g = in + (uint64_t)(h * group) * rb;
        memcpy(qkv + (uint64_t)(h * hk) * rb, g, (size_t)(hk * (int64_t)rb));
        memcpy(qkv + (uint64_t)(kd + h * hk) * rb, g + (uint64_t)hk * rb, (size_t)(hk * (int64_t)rb));
        memcpy(qkv + (uint64_t)(2 * kd + h * rv) * rb, g + (uint64_t)(2 * hk) * rb, (size_t)(rv * (int64_t)rb));
        memcpy(z + (uint64_t)(h * rv) * rb, g + (uint64_t)(2 * hk + rv) * rb, (size_t)(rv * (int64_t)rb));
    }
    const int64_t out_rows[2] = {2 * kd + vd, vd};
    uint8_t *bufs[2] = {qkv, z};
    for (int k = 0; k < 2; k++) {
        kld_tensor *o = slot(w, il, k == 0 ? DN_QKV : DN_GATE);
        *o = *t;
        o->ne[1] = out_rows[k];
        o->data = bufs[k];
        o->nbytes = rb * (uint64_t)out_rows[k];
        w->dn_owned[(int64_t)il * DN_SLOTS + (k == 0 ? DN_QKV : DN_GATE)] = bufs[k];
    }
    return KLD_OK;
}

/* A Hugging Face per-v-head vector linear_attn.<hf> ([v heads]). */
static kld_status hf_vector(const kld_source *src, const kld_hparams *hp, const char *base,
                            const char *hf, const kld_tensor **out, kld_error *err) {
    char name[300];
    snprintf(name, sizeof name, "%s%s", base, hf);
    const kld_tensor *t = kld_source_find(src, name);
    if (!t)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: tensor '%s' is missing (expected shape [%" PRId64
                        "], linear_num_value_heads)", src->path, name, hp->dn_n_v_heads);
    const kld_type_info *ti = kld_type_info_get(t->type);
    if (t->n_dims != 1 || t->ne[0] != hp->dn_n_v_heads || !ti || !ti->to_float_ref)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: tensor '%s' has shape [%" PRId64 ", %" PRId64
                        "] or an unusable type, expected [%" PRId64 "] (linear_num_value_heads)",
                        src->path, name, t->ne[0], t->ne[1], hp->dn_n_v_heads);
    *out = t;
    return KLD_OK;
}

static kld_status hf_a_dt(const kld_source *src, const kld_hparams *hp, const char *qkvz_name,
                          int il, kld_weights *w, kld_error *err) {
    char base[300];
    snprintf(base, sizeof base, "%s", qkvz_name);
    char *cut = strstr(base, "in_proj_qkvz.weight");
    if (cut) *cut = '\0'; /* "<prefix>model.layers.N.linear_attn." */
    const kld_tensor *alog = NULL, *dt = NULL;
    kld_status s;
    if ((s = hf_vector(src, hp, base, "A_log", &alog, err)) ||
        (s = hf_vector(src, hp, base, "dt_bias", &dt, err)))
        return s;
    const int64_t n = hp->dn_n_v_heads;
    float *a = malloc(sizeof *a * (size_t)n);
    if (!a) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", src->path);
    kld_type_kernels_of(kld_type_info_get(alog->type))->to_float(alog->data, a, n);
    for (int64_t i = 0; i < n; i++) a[i] = (float)-exp((double)a[i]);
    kld_tensor *o = slot(w, il, DN_A);
    *o = *alog;
    o->type = KLD_TYPE_F32;
    o->data = a;
    o->nbytes = sizeof *a * (uint64_t)n;
    w->dn_owned[(int64_t)il * DN_SLOTS + DN_A] = a;
    *slot(w, il, DN_DT) = *dt; /* a view: the values are used as stored */
    return KLD_OK;
}

/* ---- Qwen3.5 from Hugging Face: the v heads from grouped to tiled order ----
 * HF keeps the v heads grouped by q/k head (v head g·r + j reads q/k head g);
 * llama.cpp's converter (_LinearAttentionVReorderBase._reorder_v_heads)
 * tiles them (head j·n_k + g), the order the engine runs (dn_v_tiled). Every
 * tensor indexed by v head is rebuilt in that order: in_proj_qkv's v rows,
 * in_proj_z, in_proj_b / in_proj_a, A_log (→ −exp) and dt_bias, conv1d's v
 * channels, out_proj's columns. */

/* The HF (grouped) v head that tiled head p comes from. */
static int64_t grouped_of(const kld_hparams *hp, int64_t p) {
    const int64_t nk = hp->dn_n_k_heads, r = hp->dn_n_v_heads / nk;
    return (p % nk) * r + p / nk;
}

/* An owned copy of t in slot k with rows [row0, row0 + nv·per) reordered per
 * v head (blocks of per rows); the other rows as they are. */
static kld_status reorder_rows(const kld_source *src, const kld_hparams *hp, const kld_tensor *t, int64_t row0,
                               int64_t per, int il, int k, kld_weights *w, kld_error *err) {
    /* a vector's "rows" are its values (A_log, dt_bias: float types) */
    const int64_t rows = t->n_dims == 1 ? t->ne[0] : kld_tensor_nelements(t) / t->ne[0], nv = hp->dn_n_v_heads;
    if (t->nbytes % (uint64_t)rows || row0 + nv * per > rows)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: tensor '%s' has %" PRId64 " rows, not %" PRId64 " + %" PRId64
                        " v heads × %" PRId64, src->path, t->name, rows, row0, nv, per);
    const uint64_t rb = t->nbytes / (uint64_t)rows;
    uint8_t *out = malloc(t->nbytes ? (size_t)t->nbytes : 1);
    if (!out) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", src->path);
    const uint8_t *in = t->data;
    memcpy(out, in, (size_t)t->nbytes);
    for (int64_t p = 0; p < nv; p++)
        memcpy(out + (uint64_t)(row0 + p * per) * rb, in + (uint64_t)(row0 + grouped_of(hp, p) * per) * rb,
               (size_t)((uint64_t)per * rb));
    kld_tensor *o = slot(w, il, k);
    *o = *t;
    o->data = out;
    w->dn_owned[(int64_t)il * DN_SLOTS + k] = out;
    return KLD_OK;
}

/* out_proj [vd, n_embd]: columns reordered per v head (float types only:
 * a column is not a whole block of a quantized row). */
static kld_status reorder_cols(const kld_source *src, const kld_hparams *hp, const kld_tensor *t, int il,
                               kld_weights *w, kld_error *err) {
    const kld_type_info *ti = kld_type_info_get(t->type);
    const int64_t hv = hp->dn_head_v, vd = hp->dn_n_v_heads * hv;
    if (!ti || ti->block_size != 1 || t->ne[0] != vd)
        return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: tensor '%s': %" PRId64 " columns of type %s cannot be put "
                        "in tiled v-head order (float types of %" PRId64 " columns only)", src->path, t->name,
                        t->ne[0], ti ? ti->name : "?", vd);
    const int64_t rows = kld_tensor_nelements(t) / vd;
    const size_t es = (size_t)ti->type_size;
    uint8_t *out = malloc(t->nbytes ? (size_t)t->nbytes : 1);
    if (!out) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", src->path);
    const uint8_t *in = t->data;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t p = 0; p < hp->dn_n_v_heads; p++)
            memcpy(out + ((size_t)(r * vd + p * hv)) * es, in + ((size_t)(r * vd + grouped_of(hp, p) * hv)) * es,
                   (size_t)hv * es);
    kld_tensor *o = slot(w, il, DN_OUT);
    *o = *t;
    o->data = out;
    w->dn_owned[(int64_t)il * DN_SLOTS + DN_OUT] = out;
    return KLD_OK;
}

static kld_status hf_q35_find(const kld_source *src, const char *base, const char *what, const kld_tensor **out,
                              kld_error *err) {
    char name[300];
    snprintf(name, sizeof name, "%s%s", base, what);
    if (!(*out = kld_source_find(src, name)))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: tensor '%s' is missing (a Qwen3.5 linear-attention layer)",
                        src->path, name);
    return KLD_OK;
}

static kld_status hf_qwen35(const kld_source *src, const kld_hparams *hp, int il, kld_layer_weights *L,
                            kld_weights *w, kld_error *err) {
    char base[160];
    if (kld_source_find(src, "model.language_model.embed_tokens.weight")) /* Qwen3_5ForConditionalGeneration */
        snprintf(base, sizeof base, "model.language_model.layers.%d.linear_attn.", il);
    else
        snprintf(base, sizeof base, "%smodel.layers.%d.linear_attn.",
                 kld_source_find(src, "language_model.model.embed_tokens.weight") ? "language_model." : "", il);
    const kld_tensor *qkv, *z, *b, *a, *conv, *out, *alog, *dt;
    kld_status s;
    if ((s = hf_q35_find(src, base, "in_proj_qkv.weight", &qkv, err)) ||
        (s = hf_q35_find(src, base, "in_proj_z.weight", &z, err)) ||
        (s = hf_q35_find(src, base, "in_proj_b.weight", &b, err)) ||
        (s = hf_q35_find(src, base, "in_proj_a.weight", &a, err)) ||
        (s = hf_q35_find(src, base, "conv1d.weight", &conv, err)) ||
        (s = hf_q35_find(src, base, "out_proj.weight", &out, err)) ||
        (s = hf_vector(src, hp, base, "A_log", &alog, err)) || (s = hf_vector(src, hp, base, "dt_bias", &dt, err)))
        return s;
    const int64_t hv = hp->dn_head_v, kd = hp->dn_n_k_heads * hp->dn_head_k;
    if ((s = alloc_store(src, w, err)) || (s = reorder_rows(src, hp, qkv, 2 * kd, hv, il, DN_QKV, w, err)) ||
        (s = reorder_rows(src, hp, z, 0, hv, il, DN_GATE, w, err)) ||
        (s = reorder_rows(src, hp, b, 0, 1, il, DN_BETA, w, err)) ||
        (s = reorder_rows(src, hp, a, 0, 1, il, DN_ALPHA, w, err)) ||
        (s = reorder_rows(src, hp, conv, 2 * kd, hv, il, DN_CONV, w, err)) || (s = reorder_cols(src, hp, out, il, w, err)) ||
        (s = reorder_rows(src, hp, dt, 0, 1, il, DN_DT, w, err)) || (s = reorder_rows(src, hp, alog, 0, 1, il, DN_A, w, err)))
        return s;
    /* A_log → ssm_a = −exp(A_log), float32 (as the converter writes it) */
    kld_tensor *A = slot(w, il, DN_A);
    float *av = malloc(sizeof(float) * (size_t)hp->dn_n_v_heads);
    if (!av) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", src->path);
    kld_type_kernels_of(kld_type_info_get(A->type))->to_float(A->data, av, hp->dn_n_v_heads);
    for (int64_t i = 0; i < hp->dn_n_v_heads; i++) av[i] = (float)-exp((double)av[i]);
    free(w->dn_owned[(int64_t)il * DN_SLOTS + DN_A]);
    w->dn_owned[(int64_t)il * DN_SLOTS + DN_A] = av;
    A->type = KLD_TYPE_F32;
    A->data = av;
    A->nbytes = sizeof(float) * (uint64_t)hp->dn_n_v_heads;
    L->dn_qkv = slot(w, il, DN_QKV);
    L->dn_gate = slot(w, il, DN_GATE);
    L->dn_beta = slot(w, il, DN_BETA);
    L->dn_alpha = slot(w, il, DN_ALPHA);
    L->dn_conv = slot(w, il, DN_CONV);
    L->dn_out = slot(w, il, DN_OUT);
    L->dn_a = A;
    L->dn_dt = slot(w, il, DN_DT);
    return KLD_OK;
}

kld_status kld_weights_dn_derive(const kld_source *src, const kld_hparams *hp, int il,
                                 kld_layer_weights *L, kld_weights *w, kld_error *err) {
    char n[64], sname[300];
    if (src->format == KLD_FORMAT_SAFETENSORS && hp->hy.dn_v_tiled) return hf_qwen35(src, hp, il, L, w, err);
    kld_tn(n, sizeof n, KLD_T_ATTN_QKV, il, 0, "weight");
    const bool hf = src->format == KLD_FORMAT_SAFETENSORS;
    if (!hf && kld_source_find(src, n)) return KLD_OK; /* today's layout */
    kld_tn(n, sizeof n, KLD_T_SSM_IN, il, 0, "weight");
    const char *fused_name = kld_weights_source_name(src, hp, n, sname, sizeof sname);
    const kld_tensor *fused = kld_source_find(src, fused_name);
    if (!fused) {
        if (!hf) return KLD_OK; /* the binder reports attn_qkv missing */
        return kld_fail(err, KLD_ERR_FORMAT, "%s: tensor '%s' is missing (layer %d is a linear-"
                        "attention layer)", src->path, fused_name, il);
    }
    kld_status s = alloc_store(src, w, err);
    if (!s) s = split_qkvz(src, hp, fused, il, w, err);
    if (!s && hf) s = hf_a_dt(src, hp, fused_name, il, w, err);
    if (s) return s;
    L->dn_qkv = slot(w, il, DN_QKV);
    L->dn_gate = slot(w, il, DN_GATE);
    if (hf) {
        L->dn_a = slot(w, il, DN_A);
        L->dn_dt = slot(w, il, DN_DT);
    }
    return KLD_OK;
}

/* deepseek2's absorbed MLA (deepseek2.cpp: wk_b {nope, R, n_head}, wv_b {R, v, n_head},
 * the converter's split of kv_b) back into attn_kv_b [R, n_head·(nope + v)] f32: head h's
 * rows are k_nope (row d = column d of k_b's h-th [R][nope] block) then v (v_b's rows). */
kld_status kld_weights_mla_kv_b(const kld_source *src, const kld_hparams *hp, int il, const kld_tensor *kb,
                                const kld_tensor *vb, kld_weights *w, const kld_tensor **out, kld_error *err) {
    kld_status st = alloc_store(src, w, err);
    if (st) return st;
    const int64_t H = hp->n_head, R = hp->n_lora_kv, nope = hp->head_dim - hp->n_rot, V = hp->head_dim_v;
    const kld_type_info *tk = kld_type_info_get(kb->type), *tv = kld_type_info_get(vb->type);
    const uint64_t nk = (uint64_t)(nope * R * H), nv = (uint64_t)(R * V * H);
    float *k = malloc(sizeof(float) * (size_t)nk), *v = malloc(sizeof(float) * (size_t)nv);
    float *o = malloc(sizeof(float) * (size_t)(R * H * (nope + V)));
    if (!k || !v || !o) {
        free(k), free(v), free(o);
        return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", src->path);
    }
    tk->to_float_ref(kb->data, k, (int64_t)nk);
    tv->to_float_ref(vb->data, v, (int64_t)nv);
    for (int64_t h = 0; h < H; h++) {
        float *rows = o + h * (nope + V) * R;
        for (int64_t d = 0; d < nope; d++)
            for (int64_t i = 0; i < R; i++) rows[d * R + i] = k[(h * R + i) * nope + d];
        memcpy(rows + nope * R, v + h * V * R, sizeof(float) * (size_t)(V * R));
    }
    free(k), free(v);
    kld_tensor *t = slot(w, il, MLA_KV_B);
    *t = *kb; /* named as the k_b it comes from (the source owns the name) */
    t->type = KLD_TYPE_F32;
    t->n_dims = 2;
    t->ne[0] = R;
    t->ne[1] = H * (nope + V);
    t->ne[2] = t->ne[3] = 1;
    t->data = o;
    t->nbytes = sizeof(float) * (uint64_t)(R * H * (nope + V));
    w->dn_owned[(int64_t)il * DN_SLOTS + MLA_KV_B] = o;
    *out = t;
    return KLD_OK;
}

void kld_weights_dn_free(kld_weights *w) {
    for (int64_t i = 0; w->dn_owned && i < w->n_layer * DN_SLOTS; i++) free(w->dn_owned[i]);
    free(w->dn_owned);
    free(w->dn_derived);
    w->dn_owned = NULL;
    w->dn_derived = NULL;
}

bool kld_weights_dn_owns(const kld_weights *w, const kld_tensor *t) {
    return w->dn_derived && t >= w->dn_derived && t < w->dn_derived + w->n_layer * DN_SLOTS;
}
