/* forward.c — one chunk through the transformer: embedding, per layer
 * (RMSNorm, q/k/v projections, biases, q/k norms, RoPE, KV-cache append,
 * attention, output projection, optional post-norm, residual, FFN), then
 * the final norm and the LM head for the rows the caller asked for.
 * Architecture differences come from hparams.sw; row-wise steps run
 * statically partitioned over the pool. A batched decode step (rows) runs
 * one row per session: the weight products see all rows, each row's
 * K/V, RoPE position and attention come from its own session. */
#include "engine/gemm.h"
#include "engine/internal.h"
#include "engine/lora.h"
#include "engine/kv_scheme.h"

#include <math.h>

/* ---- row-wise helpers (the same code for every kernel set) ---- */

/* out = x / rms(x) * w (w NULL: no weight), with the sum of squares in double (as ggml). */
static void rmsnorm(const float *x, const float *w, float *out, int64_t n, float eps) {
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += (double)x[i] * (double)x[i];
    const float mean = (float)(sum / (double)n);
    const float scale = 1.0f / sqrtf(mean + eps);
    if (!w) {
        for (int64_t i = 0; i < n; i++) out[i] = x[i] * scale;
        return;
    }
    for (int64_t i = 0; i < n; i++) out[i] = (x[i] * scale) * w[i];
}

static void add_bias(float *x, const float *b, int64_t n) {
    if (b)
        for (int64_t i = 0; i < n; i++) x[i] += b[i];
}

/* Rotates the first n_rot dims of one head by the (cos, sin) pairs cs. */
static void rope_head(float *x, const float *cs, int64_t n_rot, kld_rope_type type) {
    const int64_t half = n_rot / 2;
    for (int64_t i = 0; i < half; i++) {
        const float c = cs[2 * i], s = cs[2 * i + 1];
        const int64_t a = type == KLD_ROPE_NEOX ? i : 2 * i;
        const int64_t b = type == KLD_ROPE_NEOX ? i + half : 2 * i + 1;
        const float x0 = x[a], x1 = x[b];
        x[a] = x0 * c - x1 * s;
        x[b] = x0 * s + x1 * c;
    }
}

/* Rotary dims of the full (swa false) or the sliding layers (Gemma 4's own). */
static int64_t rope_dims(const kld_hparams *hp, bool swa) {
    return swa && hp->n_rot_swa > 0 ? hp->n_rot_swa : hp->n_rot;
}

/* cos/sin of every (row, frequency) for positions pos.. (rows: each row
 * at its session's position), in double. */
static void rope_tables(kld_session *s, kld_session *const *rows, int64_t n, int64_t pos) {
    const kld_hparams *hp = &s->model->hp;
    const double base[2] = {hp->rope_freq_base, hp->rope_freq_base_swa};
    const double fscale[2] = {hp->rope_freq_scale, hp->rope_freq_scale_swa};
    for (int v = 0; v < 2; v++) {
        const int64_t nr = rope_dims(hp, v == 1), half = nr / 2;
        for (int64_t i = 0; i < half; i++) {
            /* Gemma 4: rope_freqs (proportional RoPE) on the full layers only */
            const double ff = v == 1 && (hp->sw.rope_freqs_full_only || i >= hp->n_rot / 2) ? 1.0
                                                                                              : (double)s->rope_ff[i];
            const double inv = pow(base[v], -2.0 * (double)i / (double)nr) * fscale[v] / ff;
            for (int64_t r = 0; r < n; r++) {
                const double theta = (double)(rows ? rows[r]->pos : pos + r) * inv;
                s->rope_cs[v][r * nr + 2 * i] = (float)(cos(theta) * hp->rope_attn_factor);
                s->rope_cs[v][r * nr + 2 * i + 1] = (float)(sin(theta) * hp->rope_attn_factor);
            }
        }
    }
}

/* ---- parallel row passes ---- */

typedef enum row_pass {
    PASS_ATTN_NORM, /* xn = norm(x, attn_norm) */
    PASS_QKV,       /* biases, q/k norms, RoPE, append k/v to the cache */
    PASS_ATTN_OUT,  /* tmp += bo, post-norm, x += tmp, xn = norm(x, ffn_norm) */
    PASS_FFN_ACT,   /* gate/up biases, gate = act(gate) * up */
    PASS_FFN_OUT,   /* tmp += b_down, post-norm, x += tmp */
    PASS_MOE_PREP,  /* beside a dense FFN: moe_dense = norm(tmp, post_norm_1), xn = norm(x, pre_norm_2),
                       moe_rin = rms(x) / √E · ffn_gate_inp.scale */
    PASS_MOE_SUM,   /* tmp = norm(tmp, post_norm_2) + moe_dense */
    PASS_PLE_GATE,  /* ple_gate = gelu(ple_gate) * the layer's per-layer input (Gemma 4) */
    PASS_PLE_OUT,   /* tmp = norm(tmp, ple_post_norm), x += tmp */
    PASS_OUT_NORM   /* xn = norm(x, output_norm) */
} row_pass;

typedef struct pass_job {
    kld_session *s;
    kld_session *const *rows; /* batched decode: row r's cache and position, else NULL */
    row_pass pass;
    int64_t il, row0, n, pos;
} pass_job;

/* The end of a layer: Gemma 4's layer_output_scale, the noise lever. */
static void layer_end(const kld_session *s, const kld_layer_vecs *v, float *x) {
    const int64_t E = s->model->hp.n_embd;
    if (v->out_scale) /* Gemma 4's layer_output_scale */
        for (int64_t i = 0; i < E; i++) x[i] *= v->out_scale[0];
    if (s->lv.noise_bf16) /* the noise floor: the residual stream in bf16 */
        for (int64_t i = 0; i < E; i++) x[i] = kld_bf16_to_f32(kld_f32_to_bf16(x[i]));
}

static void pass_row(const pass_job *j, int64_t r) {
    kld_session *s = j->s;
    const kld_model *m = s->model;
    const kld_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd;
    const float eps = (float)hp->norm_eps;
    const kld_layer_vecs *v = j->pass == PASS_OUT_NORM ? NULL : &m->lv[j->il];
    float *x = s->x + r * E, *xn = s->xn + r * E, *tmp = s->tmp + r * E;
    switch (j->pass) {
    case PASS_ATTN_NORM: rmsnorm(x, v->attn_norm, xn, E, eps); break;
    case PASS_OUT_NORM: rmsnorm(x, m->output_norm, xn, E, eps); break;
    case PASS_QKV: {
        const int64_t hd = kld_hp_head_dim(hp, j->il), hdv = kld_hp_head_dim_v(hp, j->il);
        const int64_t nkv = kld_hp_n_head_kv(hp, j->il), n_rot = kld_hp_n_rot(hp, j->il);
        const int64_t nq = hp->n_head * hd, nk = nkv * hd;
        float *q = s->qkv + r * s->ld_qkv, *k = q + nq, *vv = k + nk;
        add_bias(q, v->bq, nq);
        add_bias(k, v->bk, nk);
        add_bias(vv, v->bv, nkv * hdv);
        const float *cs = s->rope_cs[kld_hparams_layer_swa(hp, j->il) ? 1 : 0] + r * n_rot;
        const uint32_t kt_type = s->kvl[j->il].k_type;
        const bool full = hp->sw.qk_norm_full; /* one norm over the whole q and k rows (olmoe) */
        if (full) {
            rmsnorm(q, v->q_norm, q, nq, eps);
            rmsnorm(k, v->k_norm, k, nk, eps);
        }
        const int64_t ro = hp->sw.mla ? hd - hp->n_rot : 0; /* MLA: the rope dims come last */
        for (int64_t h = 0; h < hp->n_head; h++) {
            if (v->q_norm && !full) rmsnorm(q + h * hd, v->q_norm, q + h * hd, hd, eps);
            rope_head(q + h * hd + ro, cs, n_rot, hp->rope_type);
            /* act=q8 with a typed K cache: llama.cpp's K·Q dot products see
             * Q in the K type's vec_dot format (q8_0 for block types, f16 for f16) */
            if (s->lv.act == KLD_ACT_Q8 && kt_type != KLD_TYPE_F32 && kld_kv_scheme_is_block(kt_type))
                kld_act_round_vec(KLD_ACT_Q8, kt_type, q + h * hd, q + h * hd, hd);
        }
        /* a layer reading an earlier layer's cache (Gemma 4) has no K or V of its own */
        if (!kld_hp_has_own_kv(hp, j->il)) break;
        /* a batched decode step writes each row into its own session's cache */
        const kld_session *owner = j->rows ? j->rows[r] : s;
        const int64_t p = j->rows ? owner->pos : j->pos + r;
        const kld_kv_layer *c = &owner->kvl[j->il];
        for (int64_t h = 0; h < nkv; h++) {
            if (v->k_norm && !full) rmsnorm(k + h * hd, v->k_norm, k + h * hd, hd, eps);
            rope_head(k + h * hd + ro, cs, n_rot, hp->rope_type);
            if (hp->sw.v_norm) rmsnorm(vv + h * hdv, NULL, vv + h * hdv, hdv, eps); /* Gemma 4 */
            /* the cache holds the rounded rows: every later read sees them */
            if (c->k_type == KLD_TYPE_F32) {
                float *kt = (float *)c->k + h * hd * owner->ldk;
                for (int64_t d = 0; d < hd; d++) kt[d * owner->ldk + p] = k[h * hd + d];
            } else if (p < c->n_pre) { /* kv_start: kept f32 */
                memcpy(c->k_pre + (h * c->n_pre + p) * hd, k + h * hd, (size_t)hd * sizeof(float));
            } else {
                kld_kv_store_row(c->k_type, k + h * hd, kld_kv_scheme_row(c, owner->n_ctx, false, h, p), hd);
            }
            if (c->v_type == KLD_TYPE_F32)
                memcpy((float *)c->v + (h * owner->n_ctx + p) * hdv, vv + h * hdv,
                       (size_t)hdv * sizeof(float));
            else if (p < c->n_pre)
                memcpy(c->v_pre + (h * c->n_pre + p) * hdv, vv + h * hdv, (size_t)hdv * sizeof(float));
            else
                kld_kv_store_row(c->v_type, vv + h * hdv, kld_kv_scheme_row(c, owner->n_ctx, true, h, p), hdv);
        }
        break;
    }
    case PASS_ATTN_OUT:
        add_bias(tmp, v->bo, E);
        if (v->attn_post_norm) rmsnorm(tmp, v->attn_post_norm, tmp, E, eps);
        for (int64_t i = 0; i < E; i++) x[i] += tmp[i];
        rmsnorm(x, v->ffn_norm, xn, E, eps);
        break;
    case PASS_FFN_ACT: {
        const int64_t ff = kld_hp_n_ff(hp, j->il);
        float *g = s->gu + r * 2 * ff, *u = g + ff;
        add_bias(g, v->b_gate, ff);
        add_bias(u, v->b_up, ff);
        if (hp->sw.act == KLD_ACT_GELU_TANH) s->kr->gelu_tanh_mul(g, u, ff);
        else s->kr->silu_mul(g, u, ff);
        break;
    }
    case PASS_FFN_OUT:
        add_bias(tmp, v->b_down, E);
        if (v->ffn_post_norm) rmsnorm(tmp, v->ffn_post_norm, tmp, E, eps);
        for (int64_t i = 0; i < E; i++) x[i] += tmp[i];
        if (!s->ple) layer_end(s, v, x);
        break;
    case PASS_MOE_PREP: {
        float *dense = s->moe_dense + r * E, *rin = s->moe_rin + r * E;
        rmsnorm(tmp, v->moe_post_norm_1, dense, E, eps);
        rmsnorm(x, v->moe_pre_norm_2, xn, E, eps);
        rmsnorm(x, NULL, rin, E, eps);
        const float inv = 1.0f / sqrtf((float)E);
        for (int64_t i = 0; i < E; i++) rin[i] = (rin[i] * inv) * v->moe_inp_scale[i];
        break;
    }
    case PASS_MOE_SUM: {
        const float *dense = s->moe_dense + r * E;
        rmsnorm(tmp, v->moe_post_norm_2, tmp, E, eps);
        for (int64_t i = 0; i < E; i++) tmp[i] = dense[i] + tmp[i];
        break;
    }
    case PASS_PLE_GATE: {
        const int64_t P = hp->n_embd_per_layer;
        s->kr->gelu_tanh_mul(s->ple_gate + r * P, s->ple + (r * hp->n_layer + j->il) * P, P);
        break;
    }
    case PASS_PLE_OUT:
        rmsnorm(tmp, v->ple_post_norm, tmp, E, eps);
        for (int64_t i = 0; i < E; i++) x[i] += tmp[i];
        layer_end(s, v, x);
        break;
    }
}

static void pass_task(void *ctx, int ith, int nth) {
    const pass_job *j = ctx;
    int64_t b, e;
    kld_split(j->n, ith, nth, &b, &e);
    for (int64_t r = b; r < e; r++) pass_row(j, j->row0 + r);
}

static void run_pass(kld_session *s, kld_session *const *rows, row_pass pass, int64_t il,
                     int64_t row0, int64_t n, int64_t pos) {
    pass_job j = {s, rows, pass, il, row0, n, pos};
    kld_pool_run(s->pool, pass_task, &j);
}

/* The act lever rounds the input rows first (act.c): the product then
 * runs on exactly the values llama.cpp's dot products see. */
void kld_forward_gemm(kld_session *s, const kld_tensor *W, int64_t n, const float *A, int64_t lda,
                      float *C, int64_t ldc) {
    /* the imatrix observer sees the inputs as computed, before any act= rounding */
    if (s->observe) s->observe(s->observe_ctx, W, A, n, lda);
    const float *A_in = A;
    const int64_t lda_in = lda;
    if (s->lv.act != KLD_ACT_F32 && kld_act_round_rows(s, W->type, n, W->ne[0], A, lda)) {
        A = s->ar;
        lda = s->ar_ld;
    }
    kld_gemm_weights_repacked(s->pool, s->kr, W, kld_model_repacked(s->model, W), n, A, lda, C, ldc,
                              s->scratch, s->scratch_stride);
    /* LoRA: y += s·B(A x) on the unrounded inputs, weights untouched */
    if (s->n_lora) kld_lora_apply(s, W, n, A_in, lda_in, C, ldc);
}

/* ---- the layer and the chunk ---- */

/* Multi-head latent attention's projections (deepseek2, the attn_kv_b form):
 * s->xn → q (attn_q, or attn_q_a, its RMSNorm and attn_q_b) in s->qkv's q
 * part; [latent kv; k_pe] from attn_kv_a_mqa, the latent part RMS-normed
 * and decompressed by attn_kv_b into each head's [k_nope; v]; each k head
 * is [k_nope; k_pe] (k_pe shared), RoPE on the last n_rot dims in PASS_QKV. */
static void mla_project(kld_session *s, int64_t il, int64_t n) {
    const kld_hparams *hp = &s->model->hp;
    const kld_layer_weights *L = &s->model->w.layers[il];
    const kld_layer_vecs *v = &s->model->lv[il];
    const int64_t E = hp->n_embd, H = hp->n_head, hd = hp->head_dim, hdv = hp->head_dim_v;
    const int64_t QA = hp->n_lora_q, R = hp->n_lora_kv, rot = hp->n_rot, nope = hd - rot;
    const int64_t ld = (int64_t)kld_mla_row_floats(hp);
    const float eps = (float)hp->norm_eps;
    float *qa = s->mla, *kva = s->mla + QA, *kv = kva + R + rot;
    if (L->attn_q_a) {
        kld_forward_gemm(s, L->attn_q_a, n, s->xn, E, qa, ld);
        for (int64_t r = 0; r < n; r++) rmsnorm(qa + r * ld, v->q_a_norm, qa + r * ld, QA, eps);
        kld_forward_gemm(s, L->attn_q_b, n, qa, ld, s->qkv, s->ld_qkv);
    } else {
        kld_forward_gemm(s, L->attn_q, n, s->xn, E, s->qkv, s->ld_qkv);
    }
    kld_forward_gemm(s, L->attn_kv_a_mqa, n, s->xn, E, kva, ld);
    for (int64_t r = 0; r < n; r++) rmsnorm(kva + r * ld, v->kv_a_norm, kva + r * ld, R, eps);
    kld_forward_gemm(s, L->attn_kv_b, n, kva, ld, kv, ld);
    for (int64_t r = 0; r < n; r++) {
        float *k = s->qkv + r * s->ld_qkv + H * hd, *vv = k + H * hd;
        const float *src = kv + r * ld;
        for (int64_t h = 0; h < H; h++) {
            memcpy(k + h * hd, src + h * (nope + hdv), (size_t)nope * sizeof(float));
            memcpy(k + h * hd + nope, kva + r * ld + R, (size_t)rot * sizeof(float));
            memcpy(vv + h * hdv, src + h * (nope + hdv) + nope, (size_t)hdv * sizeof(float));
        }
    }
}

/* Attention block: s->xn → s->tmp (before the output bias). */
static void attention_forward(kld_session *s, kld_session *const *rows, int64_t il, int64_t n,
                              int64_t pos) {
    const kld_hparams *hp = &s->model->hp;
    const kld_layer_weights *L = &s->model->w.layers[il];
    const int64_t hd = kld_hp_head_dim(hp, il);
    const int64_t E = hp->n_embd, nq = hp->n_head * hd, nk = kld_hp_n_head_kv(hp, il) * hd;
    if (hp->sw.mla) {
        mla_project(s, il, n);
    } else if (L->attn_qkv) {
        kld_forward_gemm(s, L->attn_qkv, n, s->xn, E, s->qkv, s->ld_qkv);
    } else if (s->qg) { /* [q; gate] per head (qwen3next): q to the usual place */
        kld_forward_gemm(s, L->attn_q, n, s->xn, E, s->qg, 2 * nq);
        for (int64_t r = 0; r < n; r++)
            for (int64_t h = 0; h < hp->n_head; h++)
                memcpy(s->qkv + r * s->ld_qkv + h * hd, s->qg + r * 2 * nq + h * 2 * hd,
                       (size_t)hd * sizeof(float));
        kld_forward_gemm(s, L->attn_k, n, s->xn, E, s->qkv + nq, s->ld_qkv);
        kld_forward_gemm(s, L->attn_v, n, s->xn, E, s->qkv + nq + nk, s->ld_qkv);
    } else if (!kld_hp_has_own_kv(hp, il)) { /* Gemma 4: K and V from an earlier layer's cache */
        kld_forward_gemm(s, L->attn_q, n, s->xn, E, s->qkv, s->ld_qkv);
    } else {
        kld_forward_gemm(s, L->attn_q, n, s->xn, E, s->qkv, s->ld_qkv);
        kld_forward_gemm(s, L->attn_k, n, s->xn, E, s->qkv + nq, s->ld_qkv);
        if (L->attn_v)
            kld_forward_gemm(s, L->attn_v, n, s->xn, E, s->qkv + nq + nk, s->ld_qkv);
        else /* v_from_k (Gemma 4 without attn_v): V is K's projection, normed apart */
            for (int64_t r = 0; r < n; r++)
                memcpy(s->qkv + r * s->ld_qkv + nq + nk, s->qkv + r * s->ld_qkv + nq, (size_t)nk * sizeof(float));
    }
    run_pass(s, rows, PASS_QKV, il, 0, n, pos);
    kld_attention(s, rows, il, n, pos);
    if (s->qg) /* output gate: attn ⊙ sigmoid(gate) (value_length == key_length) */
        for (int64_t r = 0; r < n; r++)
            for (int64_t h = 0; h < hp->n_head; h++) {
                float *o = s->attn + r * nq + h * hd;
                const float *g = s->qg + r * 2 * nq + h * 2 * hd + hd;
                for (int64_t d = 0; d < hd; d++) o[d] *= 1.0f / (1.0f + expf(-g[d]));
            }
    kld_forward_gemm(s, L->attn_output, n, s->attn, hp->n_head * kld_hp_head_dim_v(hp, il), s->tmp, E);
}

/* The layer observer (kld_session_observe_layers): read-only, after the
 * pass that completed the site; a batched decode step is not observed. */
static void observe_layer(kld_session *s, kld_session *const *rows, int64_t il,
                          kld_layer_site site, const float *x, int64_t n, int64_t pos) {
    if (s->layer_observe && !rows)
        s->layer_observe(s->layer_observe_ctx, il, site, x, n, s->model->hp.n_embd, pos);
}

/* Gemma 4's per-layer embedding, after the FFN's residual: x += norm(proj(
 * gelu(inp_gate · x) ⊙ the layer's per-layer input)). */
static void per_layer_embedding(kld_session *s, kld_session *const *rows, int64_t il, int64_t n, int64_t pos) {
    const kld_hparams *hp = &s->model->hp;
    const kld_layer_weights *L = &s->model->w.layers[il];
    const int64_t E = hp->n_embd, P = hp->n_embd_per_layer;
    kld_forward_gemm(s, L->ple_inp_gate, n, s->x, E, s->ple_gate, P);
    run_pass(s, rows, PASS_PLE_GATE, il, 0, n, pos);
    kld_forward_gemm(s, L->ple_proj, n, s->ple_gate, P, s->tmp, E);
    run_pass(s, rows, PASS_PLE_OUT, il, 0, n, pos);
}

/* Gemma 4's per-layer inputs of the chunk (llama.cpp's project_per_layer_inputs):
 * for every layer, (norm(per_layer_model_proj · x / √E) + per_layer_token_embd[token]
 * · √P) / √2, from the scaled token embeddings x; into s->ple [row][layer][P]. */
static void per_layer_inputs(kld_session *s, const int32_t *tokens, int64_t n) {
    const kld_model *m = s->model;
    const kld_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd, P = hp->n_embd_per_layer, W = P * hp->n_layer;
    const float eps = (float)hp->norm_eps, proj_scale = 1.0f / sqrtf((float)E);
    const float tok_scale = sqrtf((float)P), out_scale = 1.0f / sqrtf(2.0f);
    kld_forward_gemm(s, m->w.ple_model_proj, n, s->x, E, s->ple, W);
    const kld_tensor *t = m->w.ple_token_embd;
    const kld_type_info *ti = kld_type_info_get(t->type);
    const uint64_t row_bytes = (uint64_t)(W / ti->block_size) * (uint64_t)ti->type_size;
    for (int64_t r = 0; r < n; r++) {
        kld_type_kernels_of(ti)->to_float((const uint8_t *)t->data + (uint64_t)tokens[r] * row_bytes, s->ple_row, W);
        for (int64_t l = 0; l < hp->n_layer; l++) {
            float *p = s->ple + (r * hp->n_layer + l) * P;
            const float *tok = s->ple_row + l * P;
            for (int64_t i = 0; i < P; i++) p[i] *= proj_scale;
            rmsnorm(p, m->ple_proj_norm, p, P, eps);
            for (int64_t i = 0; i < P; i++) p[i] = (p[i] + tok[i] * tok_scale) * out_scale;
        }
    }
}

/* The dense FFN of layer il: s->xn → s->tmp (before the down bias). */
static void dense_ffn(kld_session *s, kld_session *const *rows, int64_t il, int64_t n, int64_t pos) {
    const kld_hparams *hp = &s->model->hp;
    const kld_layer_weights *L = &s->model->w.layers[il];
    const int64_t E = hp->n_embd, ff = kld_hp_n_ff(hp, il), ff2 = 2 * ff;
    if (L->ffn_gate) {
        kld_forward_gemm(s, L->ffn_gate, n, s->xn, E, s->gu, ff2);
        kld_forward_gemm(s, L->ffn_up, n, s->xn, E, s->gu + ff, ff2);
    } else { /* fused [gate; up] */
        kld_forward_gemm(s, L->ffn_up, n, s->xn, E, s->gu, ff2);
    }
    run_pass(s, rows, PASS_FFN_ACT, il, 0, n, pos);
    kld_forward_gemm(s, L->ffn_down, n, s->gu, ff2, s->tmp, E);
}

static void layer_forward(kld_session *s, kld_session *const *rows, int64_t il, int64_t n,
                          int64_t pos) {
    const kld_hparams *hp = &s->model->hp;
    run_pass(s, rows, PASS_ATTN_NORM, il, 0, n, pos);
    /* the position mixer of this layer's kind (hparams.layer_kind); a batched
     * decode step never reaches a recurrent layer (kld_session_decode_batch) */
    switch (kld_hparams_layer_kind(hp, il)) {
    case KLD_LAYER_SHORTCONV: kld_shortconv_forward(s, il, n); break;
    case KLD_LAYER_DELTANET: kld_deltanet_forward(s, il, n); break;
    case KLD_LAYER_ATTN: attention_forward(s, rows, il, n, pos); break;
    }
    run_pass(s, rows, PASS_ATTN_OUT, il, 0, n, pos);
    observe_layer(s, rows, il, KLD_SITE_MIXER, s->tmp, n, pos);
    if (!kld_hparams_layer_moe(hp, il)) {
        dense_ffn(s, rows, il, n, pos);
    } else if (hp->sw.moe_beside_dense) { /* Gemma 4 26B-A4B: dense and experts, each normed */
        dense_ffn(s, rows, il, n, pos);
        run_pass(s, rows, PASS_MOE_PREP, il, 0, n, pos);
        kld_moe_ffn(s, il, n);
        run_pass(s, rows, PASS_MOE_SUM, il, 0, n, pos);
    } else {
        kld_moe_ffn(s, il, n);
    }
    run_pass(s, rows, PASS_FFN_OUT, il, 0, n, pos);
    observe_layer(s, rows, il, KLD_SITE_FFN, s->tmp, n, pos);
    if (s->ple) per_layer_embedding(s, rows, il, n, pos);
    observe_layer(s, rows, il, KLD_SITE_RESID, s->x, n, pos);
}

typedef struct softcap_job {
    kld_session *s;
    float *logits;
    int64_t rows;
} softcap_job;

static void softcap_task(void *ctx, int ith, int nth) {
    const softcap_job *j = ctx;
    const int64_t nv = j->s->model->hp.n_vocab;
    int64_t b, e;
    kld_split(j->rows, ith, nth, &b, &e);
    for (int64_t r = b; r < e; r++)
        j->s->kr->softcap(j->logits + r * nv, nv, (float)j->s->model->hp.final_softcap);
}

/* The output head over n final-norm rows xn (lda E): the same product,
 * lever rounding, adapter and soft-cap as the forward pass, so that logits
 * recomputed from saved hidden states are the forward pass's bit for bit. */
void kld_forward_head(kld_session *s, const float *xn, int64_t n, float *logits) {
    const kld_model *m = s->model;
    const kld_hparams *hp = &m->hp;
    kld_forward_gemm(s, m->w.output, n, xn, hp->n_embd, logits, hp->n_vocab);
    if (hp->final_softcap > 0) {
        softcap_job j = {s, logits, n};
        kld_pool_run(s->pool, softcap_task, &j);
    }
}

void kld_forward(kld_session *s, kld_session *const *rows, const int32_t *tokens, int64_t n,
                 int64_t first_row, float *logits) {
    const kld_model *m = s->model;
    const kld_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd;
    const kld_type_info *ti = kld_type_info_get(m->w.token_embd->type);
    const uint64_t row_bytes = (uint64_t)(E / ti->block_size) * (uint64_t)ti->type_size;
    const float escale = (float)hp->embd_scale;
    for (int64_t r = 0; r < n; r++) {
        float *x = s->x + r * E;
        kld_type_kernels_of(ti)->to_float((const uint8_t *)m->w.token_embd->data + (uint64_t)tokens[r] * row_bytes, x, E);
        if (escale != 1.0f)
            for (int64_t i = 0; i < E; i++) x[i] *= escale;
    }
    if (s->ple) per_layer_inputs(s, tokens, n);
    rope_tables(s, rows, n, s->pos);
    for (int64_t il = 0; il < hp->n_layer; il++) layer_forward(s, rows, il, n, s->pos);
    const int64_t n_out = n - first_row;
    if ((!logits && !s->hidden_out) || n_out <= 0) return;
    run_pass(s, rows, PASS_OUT_NORM, -1, first_row, n_out, s->pos);
    if (s->hidden_out) /* the final-norm rows, for hidden-state teachers */
        memcpy(s->hidden_out, s->xn + first_row * E, (size_t)(n_out * E) * sizeof(float));
    if (logits) kld_forward_head(s, s->xn + first_row * E, n_out, logits);
}
