/* moe.c — the mixture-of-experts FFN of one chunk, computed as llama.cpp
 * c392e50's llm_build_moe_ffn (src/llama.cpp 417-535) computes it (softmax 445,
 * top-k 465, norm_w 473-481, weights 517, the sum 519-530):
 *
 *   logits = gate_inp · x            router, float32 product (the act lever
 *                                    rounds its input as for any weight)
 *   p      = softmax(logits)         float32, the sum in double (ggml_soft_max)
 *   top-k  = ggml_argsort's exchange sort, descending, first k (ties as ggml)
 *   w      = p[top-k], / their sum when moe_norm_w (sum in double, as
 *            ggml_sum_rows; then a float division as ggml_div)
 *   y_i    = down_e · (silu(gate_e · x) * (up_e · x)) * w_i
 *   out    = ((y_0 + y_1) + y_2) + …     in slot order, float32
 *   + shared expert (qwen2moe): ffn_shexp(x) · sigmoid(gate_inp_shexp · x),
 *     the sigmoid as ggml_div(ggml_silu(g), g) (src/llama.cpp 3657, 3650-3672).
 * gpt-oss (the 2026 llama.cpp's build_moe_ffn with SOFTMAX_WEIGHT gating and
 * LLM_FFN_SWIGLU_OAI_MOE): the router's bias is added to the logits, the
 * top k are taken of the logits themselves and softmaxed among them, every
 * expert's gate, up and down get their bias (ggml_add_id), and the
 * activation is ggml_swiglu_oai (arch.h KLD_ACT_SWIGLU_OAI).
 * Gemma 4 26B-A4B (moe_beside_dense, gemma4.cpp): the router reads the
 * caller's s->moe_rin rows (rms(x)/√n_embd · ffn_gate_inp.scale), the experts
 * GELU-gated, each expert's output × ffn_down_exps.scale[e] before its weight.
 *
 * The chunk's rows are grouped by expert, so each expert's matrices are read
 * once per chunk; each product row depends only on its own input row (gemm.h),
 * so the logits do not depend on the chunking, and decode runs the same code
 * with one row. */
#include "engine/gemm.h"
#include "engine/internal.h"

#include <math.h>

typedef struct route_job {
    kld_session *s;
    int64_t n, il;
} route_job;

/* ggml_compute_forward_argsort_f32 (ggml-cpu.c 10874-10892) restricted to the
 * first k positions: position j ends up holding what the full exchange sort
 * puts there, since later passes never touch positions < j. */
static void top_k(const float *p, int64_t n_expert, int64_t k, int32_t *idx, int32_t *out) {
    for (int64_t j = 0; j < n_expert; j++) idx[j] = (int32_t)j;
    for (int64_t j = 0; j < k; j++) {
        for (int64_t m = j + 1; m < n_expert; m++)
            if (p[idx[j]] < p[idx[m]]) {
                int32_t t = idx[j];
                idx[j] = idx[m];
                idx[m] = t;
            }
        out[j] = idx[j];
    }
}

/* Group-limited routing (DeepSeek V3; llama-graph.cpp build_moe_ffn): each of the
 * n_expert_groups groups scored by the sum of its two best selection values, the
 * experts outside the best n_group_used groups set to -inf before the top k. */
static void group_mask(const kld_hparams *hp, float *sel, int32_t *idx) {
    const int64_t G = hp->n_expert_groups, per = hp->n_expert / G;
    float score[512] = {0};
    int32_t best[512];
    for (int64_t g = 0; g < G; g++) {
        const float *v = sel + g * per;
        int64_t a = 0;
        for (int64_t i = 1; i < per; i++) a = v[i] > v[a] ? i : a;
        int64_t b = a == 0 ? 1 : 0;
        for (int64_t i = 0; i < per; i++) b = i != a && v[i] > v[b] ? i : b;
        score[g] = v[a] + v[b];
    }
    top_k(score, G, hp->n_group_used, idx, best);
    uint8_t keep[512] = {0};
    for (int64_t i = 0; i < hp->n_group_used; i++) keep[best[i]] = 1;
    for (int64_t g = 0; g < G; g++)
        for (int64_t i = 0; !keep[g] && i < per; i++) sel[g * per + i] = -INFINITY;
}

static void route_task(void *ctx, int ith, int nth) {
    const route_job *j = ctx;
    kld_session *s = j->s;
    const kld_hparams *hp = &s->model->hp;
    const int64_t X = hp->n_expert, K = hp->n_expert_used;
    int64_t b, e;
    kld_split(j->n, ith, nth, &b, &e);
    int32_t *idx = s->moe_sort + (int64_t)ith * X;
    const float *bias = s->model->lv[j->il].moe_gate_inp_b;
    const bool softmax_weight = hp->moe_gating == KLD_MOE_GATE_SOFTMAX_WEIGHT;
    const float *sel_b = s->model->lv[j->il].moe_probs_b;
    for (int64_t r = b; r < e; r++) {
        float *p = s->moe_probs + r * X;
        if (bias)
            for (int64_t i = 0; i < X; i++) p[i] = p[i] + bias[i];
        int32_t *ids = s->moe_ids + r * K;
        float *w = s->moe_w + r * K;
        if (softmax_weight) { /* top-k of the logits, then ggml_soft_max over those k */
            top_k(p, X, K, idx, ids);
            float mx = -INFINITY;
            for (int64_t i = 0; i < K; i++) mx = p[ids[i]] > mx ? p[ids[i]] : mx;
            double sum = 0;
            for (int64_t i = 0; i < K; i++) sum += (double)(w[i] = expf(p[ids[i]] - mx));
            const float inv = (float)(1.0 / sum);
            for (int64_t i = 0; i < K; i++) w[i] *= inv;
            continue;
        }
        if (hp->moe_gating == KLD_MOE_GATE_SIGMOID) { /* GLM-4.5 / DeepSeek V3 */
            float sel[512]; /* hparams_moe.c: at most 512 experts */
            for (int64_t i = 0; i < X; i++) {
                p[i] = 1.0f / (1.0f + expf(-p[i]));
                sel[i] = sel_b ? p[i] + sel_b[i] : p[i]; /* the bias picks, the weights stay unbiased */
            }
            if (hp->n_expert_groups > 1) group_mask(hp, sel, idx);
            top_k(sel, X, K, idx, ids);
            for (int64_t i = 0; i < K; i++) w[i] = p[ids[i]];
            if (hp->moe_norm_w) { /* ggml_sum_rows, clamped at f16's smallest normal, ggml_div */
                double ws = 0;
                for (int64_t i = 0; i < K; i++) ws += (double)w[i];
                const float wsf = (float)ws < 6.103515625e-5f ? 6.103515625e-5f : (float)ws;
                for (int64_t i = 0; i < K; i++) w[i] = w[i] / wsf;
            }
            if (hp->moe_w_scale != 0 && hp->moe_w_scale != 1)
                for (int64_t i = 0; i < K; i++) w[i] *= (float)hp->moe_w_scale;
            continue;
        }
        float mx = -INFINITY;
        for (int64_t i = 0; i < X; i++) mx = p[i] > mx ? p[i] : mx;
        double sum = 0;
        for (int64_t i = 0; i < X; i++) sum += (double)(p[i] = expf(p[i] - mx));
        const float inv = (float)(1.0 / sum);
        for (int64_t i = 0; i < X; i++) p[i] *= inv;
        if (sel_b || hp->n_expert_groups > 1) { /* deepseek2 with softmax gating: the bias picks */
            float sel[512];
            for (int64_t i = 0; i < X; i++) sel[i] = sel_b ? p[i] + sel_b[i] : p[i];
            if (hp->n_expert_groups > 1) group_mask(hp, sel, idx);
            top_k(sel, X, K, idx, ids);
        } else {
            top_k(p, X, K, idx, ids);
        }
        for (int64_t i = 0; i < K; i++) w[i] = p[ids[i]];
        if (hp->moe_norm_w) {
            double ws = 0;
            for (int64_t i = 0; i < K; i++) ws += (double)w[i];
            const float wsf = (float)ws;
            for (int64_t i = 0; i < K; i++) w[i] = w[i] / wsf;
        }
        if (hp->moe_w_scale != 0 && hp->moe_w_scale != 1) /* deepseek2's expert_weights_scale */
            for (int64_t i = 0; i < K; i++) w[i] *= (float)hp->moe_w_scale;
    }
}

typedef struct act_job {
    kld_session *s;
    int64_t n, ff;
    const float *bg, *bu; /* gate and up biases [ff], or NULL */
} act_job;

/* ggml_swiglu_oai (ggml-cpu ops.cpp) with llama.cpp's alpha 1.702, limit 7. */
static void swiglu_oai(float *g, const float *u, int64_t n) {
    const float alpha = 1.702f, limit = 7.0f;
    for (int64_t k = 0; k < n; k++) {
        const float x = g[k] < limit ? g[k] : limit;
        const float y = u[k] < -limit ? -limit : u[k] > limit ? limit : u[k];
        const float out_glu = x / (1.f + expf(alpha * (-x)));
        g[k] = out_glu * (y + 1.f);
    }
}

static void act_task(void *ctx, int ith, int nth) {
    const act_job *j = ctx;
    int64_t b, e;
    kld_split(j->n, ith, nth, &b, &e);
    for (int64_t r = b; r < e; r++) {
        float *g = j->s->gu + r * 2 * j->ff, *u = g + j->ff;
        for (int64_t k = 0; j->bg && k < j->ff; k++) g[k] = g[k] + j->bg[k];
        for (int64_t k = 0; j->bu && k < j->ff; k++) u[k] = u[k] + j->bu[k];
        if (j->s->model->hp.sw.act == KLD_ACT_SWIGLU_OAI) swiglu_oai(g, u, j->ff);
        else if (j->s->model->hp.sw.act == KLD_ACT_GELU_TANH) j->s->kr->gelu_tanh_mul(g, u, j->ff);
        else j->s->kr->silu_mul(g, u, j->ff);
    }
}

/* gu = [act(gate·x + bg, up·x + bu)] for rows x[0..n), then y = down · gu (+ bd). */
static void expert_ffn(kld_session *s, const kld_tensor *gate, const kld_tensor *up,
                       const kld_tensor *down, int64_t ff, const float *x, int64_t n, float *y,
                       const float *bg, const float *bu, const float *bd) {
    const int64_t E = s->model->hp.n_embd;
    kld_forward_gemm(s, gate, n, x, E, s->gu, 2 * ff);
    kld_forward_gemm(s, up, n, x, E, s->gu + ff, 2 * ff);
    act_job a = {s, n, ff, bg, bu};
    kld_pool_run(s->pool, act_task, &a);
    kld_forward_gemm(s, down, n, s->gu, 2 * ff, y, E);
    for (int64_t r = 0; bd && r < n; r++)
        for (int64_t c = 0; c < E; c++) y[r * E + c] = y[r * E + c] + bd[c];
}

void kld_moe_ffn(kld_session *s, int64_t il, int64_t n) {
    const kld_hparams *hp = &s->model->hp;
    const kld_moe_weights *M = &s->model->w.layers[il].moe;
    const int64_t E = hp->n_embd, X = hp->n_expert, K = hp->n_expert_used, F = hp->n_ff_exp;
    /* the router's input: the experts' (s->xn), or its own beside a dense FFN */
    kld_forward_gemm(s, M->gate_inp, n, hp->sw.moe_beside_dense ? s->moe_rin : s->xn, E, s->moe_probs, X);
    route_job rj = {s, n, il};
    kld_pool_run(s->pool, route_task, &rj);

    /* counting sort of the (row, slot) pairs by expert, rows ascending */
    int32_t *start = s->moe_count;
    for (int64_t e = 0; e <= X; e++) start[e] = 0;
    for (int64_t i = 0; i < n * K; i++) start[s->moe_ids[i] + 1]++;
    for (int64_t e = 0; e < X; e++) start[e + 1] += start[e];
    int32_t *fill = s->moe_sort; /* X cursors */
    for (int64_t e = 0; e < X; e++) fill[e] = start[e];
    for (int64_t i = 0; i < n * K; i++) s->moe_list[fill[s->moe_ids[i]]++] = (int32_t)i;

    for (int64_t e = 0; e < X; e++) {
        const int64_t cnt = start[e + 1] - start[e];
        if (cnt == 0) continue;
        const int32_t *list = s->moe_list + start[e];
        for (int64_t j = 0; j < cnt; j++)
            memcpy(s->moe_x + j * E, s->xn + (list[j] / K) * E, sizeof(float) * (size_t)E);
        const kld_layer_vecs *v = &s->model->lv[il];
        expert_ffn(s, M->gate[e], M->up[e], M->down[e], F, s->moe_x, cnt, s->moe_x,
                   v->moe_gate_b ? v->moe_gate_b + e * F : NULL, v->moe_up_b ? v->moe_up_b + e * F : NULL,
                   v->moe_down_b ? v->moe_down_b + e * E : NULL);
        const float *ds = v->moe_down_scale; /* ggml_mul by the expert's scale, then by the weight */
        for (int64_t j = 0; j < cnt; j++) {
            const float w = s->moe_w[list[j]];
            const float *src = s->moe_x + j * E;
            float *dst = s->moe_y + (int64_t)list[j] * E; /* row r, slot i: (r·K + i)·E */
            if (ds)
                for (int64_t c = 0; c < E; c++) dst[c] = (src[c] * ds[e]) * w;
            else
                for (int64_t c = 0; c < E; c++) dst[c] = src[c] * w;
        }
    }
    for (int64_t r = 0; r < n; r++) {
        float *out = s->tmp + r * E;
        const float *y = s->moe_y + r * K * E;
        memcpy(out, y, sizeof(float) * (size_t)E);
        for (int64_t i = 1; i < K; i++)
            for (int64_t c = 0; c < E; c++) out[c] = out[c] + y[i * E + c];
    }
    if (!M->gate_shexp) return;
    if (!M->gate_inp_shexp) { /* ungated shared expert (glm4moe): routed + shared */
        expert_ffn(s, M->gate_shexp, M->up_shexp, M->down_shexp, hp->n_ff_shexp, s->xn, n, s->moe_x, NULL,
                   NULL, NULL);
        for (int64_t r = 0; r < n; r++)
            for (int64_t c = 0; c < E; c++) s->tmp[r * E + c] = s->tmp[r * E + c] + s->moe_x[r * E + c];
        return;
    }

    kld_forward_gemm(s, M->gate_inp_shexp, n, s->xn, E, s->moe_sg, 1);
    expert_ffn(s, M->gate_shexp, M->up_shexp, M->down_shexp, hp->n_ff_shexp, s->xn, n, s->moe_x, NULL,
               NULL, NULL);
    for (int64_t r = 0; r < n; r++) {
        const float g = s->moe_sg[r];
        /* ggml_div(ggml_silu(g), g); at g = 0 (NaN there) the limit 1/2 */
        const float gate = g == 0.0f ? 0.5f : (g / (1.0f + expf(-g))) / g;
        float *out = s->tmp + r * E;
        const float *sh = s->moe_x + r * E;
        for (int64_t c = 0; c < E; c++) out[c] = out[c] + sh[c] * gate;
    }
}
