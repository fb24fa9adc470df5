/* test_ref_hybrid.c — the float64 reference forward of the hybrid
 * recurrent architectures, written from transformers' modeling files and
 * independent of src/engine and src/model: whole-prefix recompute, no
 * state carried between calls, GGUF tensors read directly.
 *
 * LFM2 (transformers models/lfm2/modeling_lfm2.py):
 *   Lfm2DecoderLayer: h = x + mixer(operator_norm(x)); out = h + MLP(ffn_norm(h))
 *   Lfm2ShortConv.slow_forward: BCx = in_proj(h); B, C, x = chunk(3); Bx = B·x;
 *     conv = Conv1d(groups = hidden, kernel L, padding L - 1)(Bx)[:seqlen]; out_proj(C·conv)
 *   Lfm2Attention: q/k_layernorm per head (RMSNorm) before rotate-half RoPE, GQA softmax
 *   Lfm2MLP: w2(silu(w1 h) · w3 h);  Lfm2Model: embedding_norm at the end; tied head.
 *
 * Qwen3-Next (transformers models/qwen3_next/modeling_qwen3_next.py): Qwen3NextAttention
 * (q_proj → [q; gate] per head, q/k norms, partial rotate-half RoPE, output · sigmoid(gate)),
 * the pre-FFN norm post_attention_layernorm (GGUF post_attention_norm), Qwen3NextSparseMoeBlock
 * (or a dense SwiGLU MLP without expert_count) and Qwen3NextGatedDeltaNet with
 * torch_recurrent_gated_delta_rule:
 *   [q; k; v] = silu(Conv1d(groups = C, kernel K, padding K - 1)(in_proj_qkv h)[:seqlen]),
 *   z = in_proj_z h, [b; a] per q/k head group = in_proj_ba h, beta = sigmoid(b),
 *   g = −exp(A_log) · softplus(a + dt_bias), q/k repeat_interleave to the v heads,
 *   q = l2norm(q) / sqrt(d_k), k = l2norm(k)  (l2norm: x · rsqrt(Σx² + 1e-6)),
 *   S ← S · exp(g);  delta = (v − Σ_k S k) · beta;  S ← S + k ⊗ delta;  o = Σ_k S q,
 *   Qwen3NextRMSNormGated(o, z) = w · o · rsqrt(mean o² + eps) · silu(z);  out_proj. */
#include "test_forward_models.h"

#include "io/gguf.h"
#include "tensor/types.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_REF_HEAD 256 /* DeltaNet head sizes of the synthesized models */

typedef struct href {
    const kld_gguf *g;
    char arch[32];
} href;

static int64_t hkey(const href *r, const char *suffix, int64_t dflt) {
    char k[128];
    snprintf(k, sizeof k, "%s.%s", r->arch, suffix);
    int64_t v = dflt;
    kld_gguf_get_int(r->g, k, &v);
    return v;
}

static double hkey_f(const href *r, const char *suffix, double dflt) {
    char k[128];
    snprintf(k, sizeof k, "%s.%s", r->arch, suffix);
    double v = dflt;
    kld_gguf_get_float(r->g, k, &v);
    return v;
}

/* Tensor `name` (printf format with the layer) as doubles, ne[0] fastest. */
static double *tensor_d(const href *r, const char *fmt, int64_t il) {
    char name[128];
    snprintf(name, sizeof name, fmt, (int)il);
    return ref_tensor(r->g, NULL, name);
}

static void rms_d(const double *x, const double *w, double *y, int64_t n, double eps) {
    double ss = 0;
    for (int64_t i = 0; i < n; i++) ss += x[i] * x[i];
    const double s = 1.0 / sqrt(ss / (double)n + eps);
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * s * w[i];
}

/* nn.Linear: y[t][o] = Σ_i x[t][i] W[o][i]. */
static void linear_d(const double *x, const double *W, double *y, int64_t rows, int64_t in, int64_t out) {
    for (int64_t t = 0; t < rows; t++)
        for (int64_t o = 0; o < out; o++) {
            double acc = 0;
            for (int64_t i = 0; i < in; i++) acc += x[t * in + i] * W[o * in + i];
            y[t * out + o] = acc;
        }
}

/* Lfm2ShortConv on h [n][E] → out [n][E]. */
static void lfm2_conv(const href *r, int64_t il, const double *h, double *out, int64_t n, int64_t E,
                      int64_t L) {
    double *win = tensor_d(r, "blk.%d.shortconv.in_proj.weight", il);
    double *wout = tensor_d(r, "blk.%d.shortconv.out_proj.weight", il);
    double *k = tensor_d(r, "blk.%d.shortconv.conv.weight", il); /* Conv1d weight [E][1][L] */
    double *bcx = malloc(sizeof(double) * (size_t)(n * 3 * E));
    double *y = malloc(sizeof(double) * (size_t)(n * E));
    linear_d(h, win, bcx, n, E, 3 * E);
    for (int64_t t = 0; t < n; t++)
        for (int64_t c = 0; c < E; c++) {
            /* zero padding L - 1 on the left, first seqlen outputs kept */
            double acc = 0;
            for (int64_t j = 0; j < L; j++) {
                const int64_t src = t + j - (L - 1);
                if (src < 0) continue;
                const double bx = bcx[src * 3 * E + c] * bcx[src * 3 * E + 2 * E + c];
                acc += k[c * L + j] * bx;
            }
            y[t * E + c] = bcx[t * 3 * E + E + c] * acc;
        }
    linear_d(y, wout, out, n, E, E);
    free(win), free(wout), free(k), free(bcx), free(y);
}

/* Lfm2Attention on h [n][E] → out [n][E]. */
static void lfm2_attn(const href *r, int64_t il, const double *h, double *out, int64_t n, int64_t E,
                      int64_t H, int64_t KV, int64_t HD, double eps, double theta) {
    /* Qwen3NextAttention (and Qwen3.5's): q_proj → [q; gate] per head */
    const bool gated = !strcmp(r->arch, "qwen3next") || !strncmp(r->arch, "qwen35", 6);
    const int64_t nq = H * HD, nk = KV * HD, R = hkey(r, "rope.dimension_count", HD);
    double *wq = tensor_d(r, "blk.%d.attn_q.weight", il), *wk = tensor_d(r, "blk.%d.attn_k.weight", il);
    double *wv = tensor_d(r, "blk.%d.attn_v.weight", il), *wo = tensor_d(r, "blk.%d.attn_output.weight", il);
    double *qn = tensor_d(r, "blk.%d.attn_q_norm.weight", il), *kn = tensor_d(r, "blk.%d.attn_k_norm.weight", il);
    double *q = malloc(sizeof(double) * (size_t)(n * nq)), *k = malloc(sizeof(double) * (size_t)(n * nk));
    double *v = malloc(sizeof(double) * (size_t)(n * nk)), *o = malloc(sizeof(double) * (size_t)(n * nq));
    double *p = malloc(sizeof(double) * (size_t)n), *qg = malloc(sizeof(double) * (size_t)(n * 2 * nq));
    if (gated) {
        linear_d(h, wq, qg, n, E, 2 * nq);
        for (int64_t t = 0; t < n; t++)
            for (int64_t hh = 0; hh < H; hh++)
                for (int64_t i = 0; i < HD; i++) q[t * nq + hh * HD + i] = qg[t * 2 * nq + hh * 2 * HD + i];
    } else {
        linear_d(h, wq, q, n, E, nq);
    }
    linear_d(h, wk, k, n, E, nk);
    linear_d(h, wv, v, n, E, nk);
    for (int64_t t = 0; t < n; t++) {
        for (int64_t hh = 0; hh < H + KV; hh++) {
            double *x = hh < H ? q + t * nq + hh * HD : k + t * nk + (hh - H) * HD;
            rms_d(x, hh < H ? qn : kn, x, HD, eps);
            /* rotate_half on the first R dims (partial_rotary_factor), inv_freq = θ^(−2i/R) */
            for (int64_t i = 0; i < R / 2; i++) {
                const double a = (double)t * pow(theta, -2.0 * (double)i / (double)R);
                const double x1 = x[i], x2 = x[i + R / 2];
                x[i] = x1 * cos(a) - x2 * sin(a);
                x[i + R / 2] = x2 * cos(a) + x1 * sin(a);
            }
        }
    }
    for (int64_t hh = 0; hh < H; hh++) {
        const int64_t g = hh / (H / KV); /* repeat_kv */
        for (int64_t t = 0; t < n; t++) {
            double mx = -INFINITY, sum = 0;
            for (int64_t s = 0; s <= t; s++) {
                double d = 0;
                for (int64_t i = 0; i < HD; i++) d += q[t * nq + hh * HD + i] * k[s * nk + g * HD + i];
                p[s] = d / sqrt((double)HD);
                if (p[s] > mx) mx = p[s];
            }
            for (int64_t s = 0; s <= t; s++) sum += (p[s] = exp(p[s] - mx));
            for (int64_t i = 0; i < HD; i++) {
                double acc = 0;
                for (int64_t s = 0; s <= t; s++) acc += p[s] / sum * v[s * nk + g * HD + i];
                if (gated) acc /= 1 + exp(-qg[t * 2 * nq + hh * 2 * HD + HD + i]); /* · sigmoid(gate) */
                o[t * nq + hh * HD + i] = acc;
            }
        }
    }
    linear_d(o, wo, out, n, nq, E);
    free(wq), free(wk), free(wv), free(wo), free(qn), free(kn), free(q), free(k), free(v), free(o), free(p), free(qg);
}

/* Qwen3NextSparseMoeBlock on h [n][E] → out [n][E]: softmax router, top k,
 * renormalised (norm_topk_prob), SwiGLU experts, plus the shared expert ·
 * sigmoid(shared_expert_gate h). Experts are slices of the merged tensors. */
static void moe_ffn(const href *r, int64_t il, const double *h, double *out, int64_t n, int64_t E) {
    const int64_t X = hkey(r, "expert_count", 0), K = hkey(r, "expert_used_count", 0);
    const int64_t F = hkey(r, "expert_feed_forward_length", 0), S = hkey(r, "expert_shared_feed_forward_length", 0);
    double *router = tensor_d(r, "blk.%d.ffn_gate_inp.weight", il);
    double *gx = tensor_d(r, "blk.%d.ffn_gate_exps.weight", il), *ux = tensor_d(r, "blk.%d.ffn_up_exps.weight", il);
    double *dx = tensor_d(r, "blk.%d.ffn_down_exps.weight", il);
    double *sgate = tensor_d(r, "blk.%d.ffn_gate_inp_shexp.weight", il);
    double *gs = tensor_d(r, "blk.%d.ffn_gate_shexp.weight", il), *us = tensor_d(r, "blk.%d.ffn_up_shexp.weight", il);
    double *ds = tensor_d(r, "blk.%d.ffn_down_shexp.weight", il);
    double pr[64], act[1024];
    for (int64_t t = 0; t < n; t++) {
        const double *x = h + t * E;
        double *y = out + t * E, mx = -INFINITY, sum = 0;
        for (int64_t e = 0; e < X; e++) {
            pr[e] = 0;
            for (int64_t i = 0; i < E; i++) pr[e] += router[e * E + i] * x[i];
            if (pr[e] > mx) mx = pr[e];
        }
        for (int64_t e = 0; e < X; e++) sum += (pr[e] = exp(pr[e] - mx));
        for (int64_t e = 0; e < X; e++) pr[e] /= sum;
        bool used[64] = {false};
        int64_t pick[64];
        double wsum = 0;
        for (int64_t k = 0; k < K; k++) { /* torch.topk: largest first */
            int64_t b = -1;
            for (int64_t e = 0; e < X; e++)
                if (!used[e] && (b < 0 || pr[e] > pr[b])) b = e;
            used[b] = true;
            pick[k] = b;
            wsum += pr[b];
        }
        for (int64_t i = 0; i < E; i++) y[i] = 0;
        for (int64_t k = 0; k < K; k++) {
            const int64_t e = pick[k];
            for (int64_t f = 0; f < F; f++) {
                double g = 0, u = 0;
                for (int64_t i = 0; i < E; i++) {
                    g += gx[(e * F + f) * E + i] * x[i];
                    u += ux[(e * F + f) * E + i] * x[i];
                }
                act[f] = g / (1 + exp(-g)) * u;
            }
            for (int64_t i = 0; i < E; i++) {
                double acc = 0;
                for (int64_t f = 0; f < F; f++) acc += dx[(e * E + i) * F + f] * act[f];
                y[i] += pr[e] / wsum * acc;
            }
        }
        double sg = 0;
        for (int64_t i = 0; i < E; i++) sg += sgate[i] * x[i];
        sg = 1 / (1 + exp(-sg));
        for (int64_t f = 0; f < S; f++) {
            double g = 0, u = 0;
            for (int64_t i = 0; i < E; i++) {
                g += gs[f * E + i] * x[i];
                u += us[f * E + i] * x[i];
            }
            act[f] = g / (1 + exp(-g)) * u;
        }
        for (int64_t i = 0; i < E; i++) {
            double acc = 0;
            for (int64_t f = 0; f < S; f++) acc += ds[i * S + f] * act[f];
            y[i] += sg * acc;
        }
    }
    free(router), free(gx), free(ux), free(dx), free(sgate), free(gs), free(us), free(ds);
}

/* Qwen3NextGatedDeltaNet on h [n][E] → out [n][E], from a zero state. */
static void dn_mixer(const href *r, int64_t il, const double *h, double *out, int64_t n, int64_t E,
                     double eps) {
    const int64_t K = hkey(r, "ssm.conv_kernel", 0), hk = hkey(r, "ssm.state_size", 0);
    const int64_t nk = hkey(r, "ssm.group_count", 0), nv = hkey(r, "ssm.time_step_rank", 0);
    const int64_t hv = hkey(r, "ssm.inner_size", 0) / nv, rep = nv / nk;
    const int64_t kd = nk * hk, vd = nv * hv, C = 2 * kd + vd;
    double *wqkv = tensor_d(r, "blk.%d.attn_qkv.weight", il), *wz = tensor_d(r, "blk.%d.attn_gate.weight", il);
    /* Qwen3.5 (llama.cpp qwen35.cpp): in_proj_b / in_proj_a as ssm_beta / ssm_alpha, one row
     * per v head, and the v heads tiled over the q/k heads (the converter's reorder) */
    const bool q35 = !strncmp(r->arch, "qwen35", 6);
    double *wba = q35 ? NULL : tensor_d(r, "blk.%d.ssm_ba.weight", il), *wo = tensor_d(r, "blk.%d.ssm_out.weight", il);
    double *wb = q35 ? tensor_d(r, "blk.%d.ssm_beta.weight", il) : NULL;
    double *wa = q35 ? tensor_d(r, "blk.%d.ssm_alpha.weight", il) : NULL;
    double *conv = tensor_d(r, "blk.%d.ssm_conv1d.weight", il), *dt = tensor_d(r, "blk.%d.ssm_dt.bias", il);
    double *A = tensor_d(r, "blk.%d.ssm_a", il), *nw = tensor_d(r, "blk.%d.ssm_norm.weight", il);
    double *qkv = malloc(sizeof(double) * (size_t)(n * C)), *cv = malloc(sizeof(double) * (size_t)(n * C));
    double *z = malloc(sizeof(double) * (size_t)(n * vd)), *ba = malloc(sizeof(double) * (size_t)(n * 2 * nv));
    double *y = malloc(sizeof(double) * (size_t)(n * vd)), *S = malloc(sizeof(double) * (size_t)(hk * hv));
    double q[MAX_REF_HEAD], k[MAX_REF_HEAD], dl[MAX_REF_HEAD];
    linear_d(h, wqkv, qkv, n, E, C);
    linear_d(h, wz, z, n, E, vd);
    if (q35) { /* ba[t] = [β of every v head, α of every v head] */
        double *bb = malloc(sizeof(double) * (size_t)(n * nv)), *aa = malloc(sizeof(double) * (size_t)(n * nv));
        linear_d(h, wb, bb, n, E, nv);
        linear_d(h, wa, aa, n, E, nv);
        for (int64_t t = 0; t < n; t++)
            for (int64_t i = 0; i < nv; i++) ba[t * 2 * nv + i] = bb[t * nv + i], ba[t * 2 * nv + nv + i] = aa[t * nv + i];
        free(bb), free(aa);
    } else {
        linear_d(h, wba, ba, n, E, 2 * nv);
    }
    for (int64_t t = 0; t < n; t++)
        for (int64_t c = 0; c < C; c++) {
            double acc = 0;
            for (int64_t j = 0; j < K; j++) {
                const int64_t src = t + j - (K - 1);
                if (src >= 0) acc += conv[c * K + j] * qkv[src * C + c];
            }
            cv[t * C + c] = acc / (1 + exp(-acc));
        }
    for (int64_t hh = 0; hh < nv; hh++) {
        const int64_t g = q35 ? hh % nk : hh / rep, j = hh % rep;
        for (int64_t i = 0; i < hk * hv; i++) S[i] = 0;
        for (int64_t t = 0; t < n; t++) {
            double sq = 0, sk = 0;
            for (int64_t i = 0; i < hk; i++) {
                q[i] = cv[t * C + g * hk + i];
                k[i] = cv[t * C + kd + g * hk + i];
                sq += q[i] * q[i];
                sk += k[i] * k[i];
            }
            for (int64_t i = 0; i < hk; i++) {
                q[i] = q[i] / sqrt(sq + 1e-6) / sqrt((double)hk);
                k[i] = k[i] / sqrt(sk + 1e-6);
            }
            const double *v = cv + t * C + 2 * kd + hh * hv;
            const double b = q35 ? ba[t * 2 * nv + hh] : ba[t * 2 * nv + g * 2 * rep + j];
            const double a = q35 ? ba[t * 2 * nv + nv + hh] : ba[t * 2 * nv + g * 2 * rep + rep + j];
            const double beta = 1 / (1 + exp(-b)), gate = A[hh] * log1p(exp(a + dt[hh]));
            for (int64_t i = 0; i < hk * hv; i++) S[i] *= exp(gate);
            for (int64_t c = 0; c < hv; c++) {
                double mem = 0;
                for (int64_t i = 0; i < hk; i++) mem += S[i * hv + c] * k[i];
                dl[c] = (v[c] - mem) * beta;
            }
            for (int64_t i = 0; i < hk; i++)
                for (int64_t c = 0; c < hv; c++) S[i * hv + c] += k[i] * dl[c];
            double *o = y + t * vd + hh * hv, ss = 0;
            for (int64_t c = 0; c < hv; c++) {
                double acc = 0;
                for (int64_t i = 0; i < hk; i++) acc += S[i * hv + c] * q[i];
                o[c] = acc;
                ss += acc * acc;
            }
            for (int64_t c = 0; c < hv; c++) {
                const double zz = z[t * vd + hh * hv + c];
                o[c] = nw[c] * o[c] / sqrt(ss / (double)hv + eps) * zz / (1 + exp(-zz));
            }
        }
    }
    linear_d(y, wo, out, n, vd, E);
    free(wb), free(wa);
    free(wqkv), free(wz), free(wba), free(wo), free(conv), free(dt), free(A), free(nw);
    free(qkv), free(cv), free(z), free(ba), free(y), free(S);
}

static float *hybrid_forward(const href *r, const int32_t *ids, int64_t n, int64_t *n_vocab) {
    const int64_t E = hkey(r, "embedding_length", 0), NL = hkey(r, "block_count", 0);
    const int64_t H = hkey(r, "attention.head_count", 0), FF = hkey(r, "feed_forward_length", 0);
    const bool dn = !strcmp(r->arch, "qwen3next") || !strncmp(r->arch, "qwen35", 6);
    const int64_t HD = hkey(r, "attention.key_length", E / H), L = hkey(r, "shortconv.l_cache", 3), interval = hkey(r, "full_attention_interval", 4);
    const double eps = hkey_f(r, "attention.layer_norm_rms_epsilon", 1e-5);
    const double theta = hkey_f(r, "rope.freq_base", 1e6);
    char key[128];
    snprintf(key, sizeof key, "%s.attention.head_count_kv", r->arch);
    const kld_gguf_value *kv_arr = kld_gguf_get_arr(r->g, key);
    const kld_tensor *te = kld_gguf_find_tensor(r->g, "token_embd.weight");
    const int64_t V = te->ne[1];
    *n_vocab = V;
    double *emb = tensor_d(r, "token_embd.weight", 0);
    double *x = malloc(sizeof(double) * (size_t)(n * E)), *h = malloc(sizeof(double) * (size_t)(n * E));
    double *o = malloc(sizeof(double) * (size_t)(n * E));
    double *g = malloc(sizeof(double) * (size_t)(n * FF)), *u = malloc(sizeof(double) * (size_t)(n * FF));
    for (int64_t t = 0; t < n; t++)
        for (int64_t i = 0; i < E; i++) x[t * E + i] = emb[(int64_t)ids[t] * E + i];
    for (int64_t il = 0; il < NL; il++) {
        /* config.layer_types[il] == "conv" ⇔ head_count_kv[il] == 0 */
        int64_t kv = hkey(r, "attention.head_count_kv", H);
        if (kv_arr) kld_gguf_arr_int(kv_arr, (uint64_t)il, &kv);
        double *on = tensor_d(r, "blk.%d.attn_norm.weight", il);
        double *fn = tensor_d(r, dn ? "blk.%d.post_attention_norm.weight" : "blk.%d.ffn_norm.weight", il);
        for (int64_t t = 0; t < n; t++) rms_d(x + t * E, on, h + t * E, E, eps);
        if (dn && (il + 1) % interval) dn_mixer(r, il, h, o, n, E, eps);
        else if (kv == 0) lfm2_conv(r, il, h, o, n, E, L);
        else lfm2_attn(r, il, h, o, n, E, H, kv, HD, eps, theta);
        for (int64_t i = 0; i < n * E; i++) x[i] += o[i];
        for (int64_t t = 0; t < n; t++) rms_d(x + t * E, fn, h + t * E, E, eps);
        free(on), free(fn);
        if (hkey(r, "expert_count", 0) > 0) {
            moe_ffn(r, il, h, o, n, E);
            for (int64_t i = 0; i < n * E; i++) x[i] += o[i];
            continue;
        }
        double *w1 = tensor_d(r, "blk.%d.ffn_gate.weight", il), *w3 = tensor_d(r, "blk.%d.ffn_up.weight", il);
        double *w2 = tensor_d(r, "blk.%d.ffn_down.weight", il);
        linear_d(h, w1, g, n, E, FF);
        linear_d(h, w3, u, n, E, FF);
        for (int64_t i = 0; i < n * FF; i++) g[i] = g[i] / (1 + exp(-g[i])) * u[i];
        linear_d(g, w2, o, n, FF, E);
        for (int64_t i = 0; i < n * E; i++) x[i] += o[i];
        free(w1), free(w3), free(w2);
    }
    double *en = tensor_d(r, dn ? "output_norm.weight" : "token_embd_norm.weight", 0);
    double *head = tensor_d(r, "output.weight", 0);
    for (int64_t t = 0; t < n; t++) rms_d(x + t * E, en, h + t * E, E, eps);
    double *lg = malloc(sizeof(double) * (size_t)(n * V));
    linear_d(h, head ? head : emb, lg, n, E, V);
    float *out = malloc(sizeof(float) * (size_t)(n * V));
    for (int64_t i = 0; i < n * V; i++) out[i] = (float)lg[i];
    free(emb), free(x), free(h), free(o), free(g), free(u), free(en), free(head), free(lg);
    return out;
}

float *ref_forward_hybrid(const char *gguf_path, const int32_t *ids, int64_t n, int64_t *n_vocab) {
    kld_error err = {0};
    kld_gguf *g = NULL;
    if (kld_gguf_open(gguf_path, &g, &err) != KLD_OK) {
        fprintf(stderr, "ref_forward_hybrid: %s\n", err.msg);
        return NULL;
    }
    href r = {.g = g};
    kld_str a = {0};
    kld_gguf_get_str(g, "general.architecture", &a);
    snprintf(r.arch, sizeof r.arch, "%.*s", (int)a.len, a.ptr);
    float *out = NULL;
    if (!strcmp(r.arch, "lfm2") || !strcmp(r.arch, "qwen3next") || !strncmp(r.arch, "qwen35", 6))
        out = hybrid_forward(&r, ids, n, n_vocab);
    else fprintf(stderr, "ref_forward_hybrid: unknown architecture %s\n", r.arch);
    kld_gguf_close(g);
    return out;
}
