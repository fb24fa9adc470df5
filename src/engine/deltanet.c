/* deltanet.c — Qwen3-Next's gated DeltaNet (linear attention) block, as
 * llama.cpp builds it (src/models/qwen3next.cpp, build_layer_attn_linear
 * with the fused attn_qkv / attn_gate path; Qwen3.5's qwen35.cpp: β and α
 * from ssm_beta / ssm_alpha, v heads tiled over the q/k heads) and transformers defines it
 * (Qwen3NextGatedDeltaNet, torch_recurrent_gated_delta_rule):
 *   [q; k; v] = silu(causal depthwise conv_K(attn_qkv · h)),  z = attn_gate · h
 *   q, k ← l2norm per q/k head;  q ← q / sqrt(head_k);  v head j uses q/k head j / (nv / nk)
 *   beta = sigmoid(b),  decay = exp(ssm_a · softplus(a + dt_bias))   (ssm_a = −exp(A_log))
 *   per v head, S [head_k][head_v]:  S ← decay · S;  u = (v − Sᵀk) · beta;  S ← S + k uᵀ;  o = Sᵀq
 *   y = ssm_out · (rmsnorm(o) ⊙ ssm_norm ⊙ silu(z))   (per v head)
 * The conv state keeps the last K − 1 pre-conv rows, S is carried as is.
 * Every token runs the same float operations in the same order whether it
 * arrives in a long chunk or alone, so chunking and decoding give the same
 * bits as one pass; threads split heads (recurrence) or rows (conv). */
#include "engine/internal.h"

#include <math.h>

#define MAX_HEAD_V 1024 /* hparams_deltanet.c bounds state_size */

typedef struct dn_dims {
    int64_t E, K, nk, nv, hk, hv, kd, vd, C;
} dn_dims;

static dn_dims dims_of(const kld_hparams *hp) {
    dn_dims d = {hp->n_embd, hp->dn_conv, hp->dn_n_k_heads, hp->dn_n_v_heads, hp->dn_head_k,
                 hp->dn_head_v, 0, 0, 0};
    d.kd = d.nk * d.hk;
    d.vd = d.nv * d.hv;
    d.C = 2 * d.kd + d.vd;
    return d;
}

uint64_t kld_deltanet_act_floats(const kld_hparams *hp, int64_t max_chunk) {
    const dn_dims d = dims_of(hp); /* raw qkv, conv output, z, ba, o rows */
    return (uint64_t)max_chunk * (uint64_t)(2 * d.C + 2 * d.vd + 2 * d.nv);
}

uint64_t kld_deltanet_conv_floats(const kld_hparams *hp) {
    const dn_dims d = dims_of(hp);
    return (uint64_t)(d.K - 1) * (uint64_t)d.C;
}

uint64_t kld_deltanet_state_floats(const kld_hparams *hp) {
    const dn_dims d = dims_of(hp);
    return kld_deltanet_conv_floats(hp) + (uint64_t)d.nv * (uint64_t)(d.hk * d.hv);
}

typedef struct dn_job {
    kld_session *s;
    int64_t il, n;
    dn_dims d;
    float *raw, *cv, *z, *ba, *o; /* [n][C], [n][C], [n][vd], [n][2 nv], [n][vd] */
} dn_job;

static float silu(float x) { return x / (1.0f + expf(-x)); }

/* x / max(‖x‖, eps) with the sum of squares in double (ggml_l2_norm), times extra. */
static void l2norm(float *x, int64_t n, float eps, float extra) {
    double ss = 0;
    for (int64_t i = 0; i < n; i++) ss += (double)x[i] * (double)x[i];
    const float scale = 1.0f / fmaxf(sqrtf((float)ss), eps);
    for (int64_t i = 0; i < n; i++) x[i] = x[i] * scale * extra;
}

/* cv[t] = silu(conv(raw)) with inputs before the chunk from the state, then
 * q and k normalised per head (q also scaled by 1/sqrt(head_k)). */
static void conv_task(void *ctx, int ith, int nth) {
    const dn_job *j = ctx;
    const dn_dims *d = &j->d;
    const float *w = j->s->model->lv[j->il].dn_conv, *state = j->s->recl[j->il].conv;
    const float eps = (float)j->s->model->hp.norm_eps, qscale = 1.0f / sqrtf((float)d->hk);
    int64_t b, e;
    kld_split(j->n, ith, nth, &b, &e);
    for (int64_t t = b; t < e; t++) {
        const float *in[64]; /* K <= 64 (hparams_deltanet.c) */
        for (int64_t k = 0; k < d->K; k++) {
            const int64_t src = t + k - (d->K - 1);
            in[k] = src >= 0 ? j->raw + src * d->C : state + (d->K - 1 + src) * d->C;
        }
        float *out = j->cv + t * d->C;
        for (int64_t c = 0; c < d->C; c++) {
            float acc = 0.0f;
            for (int64_t k = 0; k < d->K; k++) acc += in[k][c] * w[c * d->K + k];
            out[c] = silu(acc);
        }
        for (int64_t h = 0; h < d->nk; h++) {
            l2norm(out + h * d->hk, d->hk, eps, qscale);
            l2norm(out + d->kd + h * d->hk, d->hk, eps, 1.0f);
        }
    }
}

/* The state becomes the last K − 1 rows of [state; raw] (ascending order
 * reads every row before it is overwritten). */
static void advance_conv(const dn_job *j) {
    const dn_dims *d = &j->d;
    const int64_t keep = d->K - 1;
    float *state = j->s->recl[j->il].conv;
    for (int64_t r = 0; r < keep; r++) {
        const int64_t src = j->n - keep + r;
        const float *from = src >= 0 ? j->raw + src * d->C : state + (keep + src) * d->C;
        memmove(state + r * d->C, from, (size_t)d->C * sizeof(float));
    }
}

static float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

/* The delta rule of v heads [b, e), token after token, then the gated norm. */
static void delta_task(void *ctx, int ith, int nth) {
    const dn_job *j = ctx;
    const dn_dims *d = &j->d;
    const kld_layer_vecs *v = &j->s->model->lv[j->il];
    const float eps = (float)j->s->model->hp.norm_eps;
    const int64_t r = d->nv / d->nk, hk = d->hk, hv = d->hv;
    float u[MAX_HEAD_V];
    int64_t b, e;
    kld_split(d->nv, ith, nth, &b, &e);
    for (int64_t h = b; h < e; h++) {
        float *S = j->s->recl[j->il].ssm + h * hk * hv;
        const bool tiled = j->s->model->hp.hy.dn_v_tiled, split = j->s->model->hp.hy.dn_split_ba;
        const int64_t g = tiled ? h % d->nk : h / r, jj = h % r;
        for (int64_t t = 0; t < j->n; t++) {
            const float *row = j->cv + t * d->C;
            const float *q = row + g * hk, *k = row + d->kd + g * hk, *vv = row + 2 * d->kd + h * hv;
            /* ssm_ba: per q/k head g, r β then r α; split: β[h] then (after nv) α[h] */
            const float *bar = j->ba + t * 2 * d->nv;
            const float b_in = split ? bar[h] : bar[g * 2 * r + jj];
            const float a_in = split ? bar[d->nv + h] : bar[g * 2 * r + r + jj];
            const float beta = 1.0f / (1.0f + expf(-b_in));
            const float decay = expf(v->dn_a[h] * softplus(a_in + v->dn_dt[h]));
            for (int64_t i = 0; i < hk * hv; i++) S[i] *= decay;
            for (int64_t c = 0; c < hv; c++) u[c] = 0.0f;
            for (int64_t a = 0; a < hk; a++)
                for (int64_t c = 0; c < hv; c++) u[c] += S[a * hv + c] * k[a];
            for (int64_t c = 0; c < hv; c++) u[c] = (vv[c] - u[c]) * beta;
            for (int64_t a = 0; a < hk; a++)
                for (int64_t c = 0; c < hv; c++) S[a * hv + c] += k[a] * u[c];
            float *o = j->o + t * d->vd + h * hv;
            for (int64_t c = 0; c < hv; c++) o[c] = 0.0f;
            for (int64_t a = 0; a < hk; a++)
                for (int64_t c = 0; c < hv; c++) o[c] += S[a * hv + c] * q[a];
            /* gated RMSNorm (Qwen3NextRMSNormGated): norm(o) · w · silu(z) */
            double ss = 0;
            for (int64_t c = 0; c < hv; c++) ss += (double)o[c] * (double)o[c];
            const float scale = 1.0f / sqrtf((float)(ss / (double)hv) + eps);
            const float *z = j->z + t * d->vd + h * hv;
            for (int64_t c = 0; c < hv; c++) o[c] = (o[c] * scale) * v->dn_norm[c] * silu(z[c]);
        }
    }
}

void kld_deltanet_forward(kld_session *s, int64_t il, int64_t n) {
    const kld_layer_weights *L = &s->model->w.layers[il];
    dn_job j = {s, il, n, dims_of(&s->model->hp), NULL, NULL, NULL, NULL, NULL};
    const dn_dims *d = &j.d;
    const int64_t mc = s->max_chunk;
    j.raw = s->rec_act;
    j.cv = j.raw + mc * d->C;
    j.z = j.cv + mc * d->C;
    j.ba = j.z + mc * d->vd;
    j.o = j.ba + mc * 2 * d->nv;
    kld_forward_gemm(s, L->dn_qkv, n, s->xn, d->E, j.raw, d->C);
    kld_forward_gemm(s, L->dn_gate, n, s->xn, d->E, j.z, d->vd);
    if (L->dn_ba) {
        kld_forward_gemm(s, L->dn_ba, n, s->xn, d->E, j.ba, 2 * d->nv);
    } else { /* Qwen3.5: [β of every v head; α of every v head] per row */
        kld_forward_gemm(s, L->dn_beta, n, s->xn, d->E, j.ba, 2 * d->nv);
        kld_forward_gemm(s, L->dn_alpha, n, s->xn, d->E, j.ba + d->nv, 2 * d->nv);
    }
    kld_pool_run(s->pool, conv_task, &j);
    advance_conv(&j);
    kld_pool_run(s->pool, delta_task, &j);
    kld_forward_gemm(s, L->dn_out, n, j.o, d->vd, s->tmp, d->E);
}
