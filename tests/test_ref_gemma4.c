/* test_ref_gemma4.c — the float64 reference forward of Gemma 4 (llama.cpp's
 * `gemma4`, src/models/gemma4.cpp of the 2026 llama.cpp), written from that
 * graph and independent of src/engine and src/model: GGUF tensors read
 * directly, the whole prefix recomputed. Per layer il:
 *   h = rms(x)·attn_norm;  q = rms_head(Wq h)·q_norm, RoPE;  if the layer has a
 *   KV cache of its own: k = rms_head(Wk h)·k_norm, RoPE; v = rms_head(Wv h or
 *   Wk h) without weight; else k, v are those of the last earlier layer of the
 *   same kind (shared_kv_layers: layer n - S - 2 sliding, n - S - 1 full);
 *   attention with scale 1 (a window on the sliding layers), Wo;
 *   a = x + rms(attn)·post_attention_norm;
 *   f = W_down(gelu(W_gate rms(a)·ffn_norm) · W_up …); with experts (26B-A4B) f =
 *   rms(f)·post_ffw_norm_1 + rms(Σ_top-k w_e · s_e · expert_e(rms(a)·pre_ffw_norm_2))·post_ffw_norm_2,
 *   routed by softmax(W_r (rms(a)/√E ⊙ ffn_gate_inp.scale)), the top k renormalised, s_e =
 *   ffn_down_exps.scale[e], GELU-gated experts;  x = a + rms(f)·post_ffw_norm;
 *   per-layer embedding (P > 0): x += rms(W_proj(gelu(W_inp_gate x) · pli[il]))·post_norm;
 *   x ·= layer_output_scale.
 * Head size, rotary dims, KV heads and FFN width per layer (key_length_swa,
 * rope.dimension_count_swa, head_count_kv and feed_forward_length arrays);
 * the sliding layers rotate with rope.freq_base_swa, the full ones with
 * rope.freq_base and the rope_freqs divisors (proportional RoPE). Per-layer
 * inputs: pli = (rms(per_layer_model_proj · x0 / √E)·per_layer_proj_norm +
 * per_layer_token_embd[token] · √P) / √2 from the scaled embedding x0. The
 * head: rms(x)·output_norm, tied embedding, final soft-cap. */
#include "test_forward_models.h"

#include "io/gguf.h"
#include "tensor/types.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct g4ref {
    const kld_gguf *g;
    const ref_opts *opt;   /* the caller's window / pattern / weight deltas, or NULL */
    int64_t E, L, H, V, P, S;
    double eps;
    uint8_t slides[256];
} g4ref;

static int64_t key_i(const g4ref *r, const char *suffix, int64_t il, int64_t dflt) {
    char k[128];
    snprintf(k, sizeof k, "gemma4.%s", suffix);
    int64_t v = dflt;
    if (kld_gguf_get_int(r->g, k, &v)) return v;
    const kld_gguf_value *arr = kld_gguf_get_arr(r->g, k);
    if (arr && il >= 0 && (uint64_t)il < arr->v.arr.n) kld_gguf_arr_int(arr, (uint64_t)il, &v);
    return v;
}

static double key_d(const g4ref *r, const char *suffix, double dflt) {
    char k[128];
    snprintf(k, sizeof k, "gemma4.%s", suffix);
    double v = dflt;
    kld_gguf_get_float(r->g, k, &v);
    return v;
}

/* Tensor `fmt` (with the layer) as doubles, ne[0] fastest; NULL when absent. */
static double *tensor(const g4ref *r, const char *fmt, int64_t il) {
    char name[128];
    snprintf(name, sizeof name, fmt, (int)il);
    return ref_tensor(r->g, r->opt, name);
}

/* y = x / rms(x) (· w when given), n values. */
static void rms(const double *x, const double *w, double *y, int64_t n, double eps) {
    double ss = 0;
    for (int64_t i = 0; i < n; i++) ss += x[i] * x[i];
    const double s = 1.0 / sqrt(ss / (double)n + eps);
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * s * (w ? w[i] : 1.0);
}

/* y[t][o] = Σ_i x[t][i] W[o][i] (W in GGUF order: [out][in]). */
static void linear(const double *x, const double *W, double *y, int64_t rows, int64_t in, int64_t out) {
    for (int64_t t = 0; t < rows; t++)
        for (int64_t o = 0; o < out; o++) {
            double acc = 0;
            for (int64_t i = 0; i < in; i++) acc += x[t * in + i] * W[o * in + i];
            y[t * out + o] = acc;
        }
}

static double gelu(double z) { return 0.5 * z * (1 + tanh(sqrt(2 / M_PI) * (z + 0.044715 * z * z * z))); }

/* The experts beside the dense FFN of layer il for rows a [n][E] → y [n][E] (before post_ffw_norm_2). */
static void experts(const g4ref *r, int64_t il, const double *a, double *y, int64_t n) {
    const int64_t E = r->E, X = key_i(r, "expert_count", -1, 0), K = key_i(r, "expert_used_count", -1, 0),
                  F = key_i(r, "expert_feed_forward_length", -1, 0);
    double *wr = tensor(r, "blk.%d.ffn_gate_inp.weight", il), *sc = tensor(r, "blk.%d.ffn_gate_inp.scale", il),
           *ds = tensor(r, "blk.%d.ffn_down_exps.scale", il), *pn = tensor(r, "blk.%d.pre_ffw_norm_2.weight", il),
           *wg = tensor(r, "blk.%d.ffn_gate_exps.weight", il), *wu = tensor(r, "blk.%d.ffn_up_exps.weight", il),
           *wd = tensor(r, "blk.%d.ffn_down_exps.weight", il);
    double *rin = malloc(sizeof(double) * (size_t)E), *h = malloc(sizeof(double) * (size_t)E),
           *p = malloc(sizeof(double) * (size_t)X), *act = malloc(sizeof(double) * (size_t)F);
    for (int64_t t = 0; t < n; t++) {
        rms(a + t * E, NULL, rin, E, r->eps);
        for (int64_t i = 0; i < E; i++) rin[i] = rin[i] / sqrt((double)E) * sc[i];
        double mx = -INFINITY, sum = 0;
        for (int64_t e = 0; e < X; e++) {
            p[e] = 0;
            for (int64_t i = 0; i < E; i++) p[e] += wr[e * E + i] * rin[i];
            mx = p[e] > mx ? p[e] : mx;
        }
        for (int64_t e = 0; e < X; e++) sum += (p[e] = exp(p[e] - mx));
        for (int64_t e = 0; e < X; e++) p[e] /= sum;
        int32_t sel[64];
        double wsum = 0;
        for (int64_t k = 0; k < K; k++) { /* the k-th largest probability */
            int64_t best = -1;
            for (int64_t e = 0; e < X; e++) {
                bool taken = false;
                for (int64_t j = 0; j < k; j++) taken |= sel[j] == e;
                if (!taken && (best < 0 || p[e] > p[best])) best = e;
            }
            sel[k] = (int32_t)best;
            wsum += p[best];
        }
        rms(a + t * E, pn, h, E, r->eps);
        for (int64_t i = 0; i < E; i++) y[t * E + i] = 0;
        for (int64_t k = 0; k < K; k++) {
            const int64_t e = sel[k];
            for (int64_t f = 0; f < F; f++) {
                double g = 0, u = 0;
                for (int64_t i = 0; i < E; i++) {
                    g += wg[(e * F + f) * E + i] * h[i];
                    u += wu[(e * F + f) * E + i] * h[i];
                }
                act[f] = gelu(g) * u;
            }
            const double w = p[e] / wsum * (ds ? ds[e] : 1.0);
            for (int64_t o = 0; o < E; o++) {
                double acc = 0;
                for (int64_t f = 0; f < F; f++) acc += wd[(e * E + o) * F + f] * act[f];
                y[t * E + o] += w * acc;
            }
        }
    }
    free(wr), free(sc), free(ds), free(pn), free(wg), free(wu), free(wd), free(rin), free(h), free(p), free(act);
}

/* NeoX RoPE on the first n_rot dims of one head at position t. */
static void rope(double *x, int64_t t, int64_t n_rot, double base, const double *ff) {
    const int64_t half = n_rot / 2;
    for (int64_t i = 0; i < half; i++) {
        const double th = (double)t * pow(base, -2.0 * (double)i / (double)n_rot) / (ff ? ff[i] : 1.0);
        const double c = cos(th), s = sin(th), a = x[i], b = x[i + half];
        x[i] = a * c - b * s;
        x[i + half] = a * s + b * c;
    }
}

/* The per-layer inputs pli [n][L][P] from the scaled embeddings x0 [n][E]. */
static double *per_layer_inputs(const g4ref *r, const int32_t *ids, int64_t n, const double *x0) {
    const int64_t W = r->P * r->L;
    double *tok = tensor(r, "per_layer_token_embd.weight", 0), *M = tensor(r, "per_layer_model_proj.weight", 0),
           *nw = tensor(r, "per_layer_proj_norm.weight", 0);
    double *pli = malloc(sizeof(double) * (size_t)(n * W));
    linear(x0, M, pli, n, r->E, W);
    for (int64_t t = 0; t < n; t++)
        for (int64_t l = 0; l < r->L; l++) {
            double *p = pli + t * W + l * r->P;
            for (int64_t i = 0; i < r->P; i++) p[i] /= sqrt((double)r->E);
            rms(p, nw, p, r->P, r->eps);
            for (int64_t i = 0; i < r->P; i++)
                p[i] = (p[i] + tok[(int64_t)ids[t] * W + l * r->P + i] * sqrt((double)r->P)) / sqrt(2.0);
        }
    free(tok), free(M), free(nw);
    return pli;
}

float *ref_forward_gemma4(const char *gguf_path, const ref_opts *opt, const int32_t *ids, int64_t n,
                          int64_t *n_vocab) {
    kld_error err = {0};
    kld_gguf *g = NULL;
    if (kld_gguf_open(gguf_path, &g, &err) != KLD_OK) {
        fprintf(stderr, "ref_forward_gemma4: %s\n", err.msg);
        return NULL;
    }
    g4ref r = {.g = g, .opt = opt};
    r.E = key_i(&r, "embedding_length", -1, 0);
    r.L = key_i(&r, "block_count", -1, 0);
    r.H = key_i(&r, "attention.head_count", -1, 0);
    r.P = key_i(&r, "embedding_length_per_layer_input", -1, 0);
    r.S = key_i(&r, "attention.shared_kv_layers", -1, 0);
    r.eps = key_d(&r, "attention.layer_norm_rms_epsilon", 1e-6);
    const kld_gguf_value *pat = kld_gguf_get_arr(g, "gemma4.attention.sliding_window_pattern");
    for (int64_t il = 0; pat && il < r.L && il < 256; il++) {
        int64_t v = 0;
        kld_gguf_arr_int(pat, (uint64_t)il, &v);
        r.slides[il] = v != 0;
    }
    if (opt && opt->slides) memcpy(r.slides, opt->slides, (size_t)(r.L < 256 ? r.L : 256));
    const int64_t E = r.E, L = r.L, H = r.H;
    const int64_t window = opt && opt->window ? opt->window : key_i(&r, "attention.sliding_window", -1, 0);
    const int64_t hd_full = key_i(&r, "attention.key_length", -1, E / H);
    const int64_t hd_swa = key_i(&r, "attention.key_length_swa", -1, hd_full);
    const int64_t rot_full = key_i(&r, "rope.dimension_count", -1, hd_full);
    const int64_t rot_swa = key_i(&r, "rope.dimension_count_swa", -1, rot_full);
    const double base_full = key_d(&r, "rope.freq_base", 1e4), base_swa = key_d(&r, "rope.freq_base_swa", 1e4);
    const double cap = key_d(&r, "final_logit_softcapping", 0);
    const int64_t n_kv_layers = L - r.S;
    double *emb = tensor(&r, "token_embd.weight", 0), *rope_freqs = tensor(&r, "rope_freqs.weight", 0);
    r.V = kld_gguf_find_tensor(g, "token_embd.weight")->ne[1];
    *n_vocab = r.V;
    double *x = calloc((size_t)(n * E), sizeof(double)), *h = calloc((size_t)(n * E), sizeof(double));
    double *o = malloc(sizeof(double) * (size_t)(n * E));
    for (int64_t t = 0; t < n; t++)
        for (int64_t i = 0; i < E; i++) x[t * E + i] = emb[(int64_t)ids[t] * E + i] * sqrt((double)E);
    double *pli = r.P > 0 ? per_layer_inputs(&r, ids, n, x) : NULL;
    double **kc = calloc((size_t)L, sizeof *kc), **vc = calloc((size_t)L, sizeof *vc); /* per layer [n][kv][hd] */
    for (int64_t il = 0; il < L; il++) {
        const bool slides = r.slides[il];
        const int64_t hd = slides ? hd_swa : hd_full, rot = slides ? rot_swa : rot_full;
        const int64_t KV = key_i(&r, "attention.head_count_kv", il, H), FF = key_i(&r, "feed_forward_length", il, 0);
        const double base = slides ? base_swa : base_full;
        const double *ff = slides ? NULL : rope_freqs;
        double *an = tensor(&r, "blk.%d.attn_norm.weight", il), *wq = tensor(&r, "blk.%d.attn_q.weight", il),
               *qn = tensor(&r, "blk.%d.attn_q_norm.weight", il);
        for (int64_t t = 0; t < n; t++) rms(x + t * E, an, h + t * E, E, r.eps);
        double *q = malloc(sizeof(double) * (size_t)(n * H * hd));
        linear(h, wq, q, n, E, H * hd);
        for (int64_t t = 0; t < n; t++)
            for (int64_t hh = 0; hh < H; hh++) {
                rms(q + (t * H + hh) * hd, qn, q + (t * H + hh) * hd, hd, r.eps);
                rope(q + (t * H + hh) * hd, t, rot, base, ff);
            }
        int64_t src = il;
        if (il >= n_kv_layers) src = n_kv_layers - (slides ? 2 : 1); /* llama.cpp's reuse of Gemma 4 */
        if (src == il) {
            double *wk = tensor(&r, "blk.%d.attn_k.weight", il), *wv = tensor(&r, "blk.%d.attn_v.weight", il),
                   *kn = tensor(&r, "blk.%d.attn_k_norm.weight", il);
            kc[il] = malloc(sizeof(double) * (size_t)(n * KV * hd));
            vc[il] = malloc(sizeof(double) * (size_t)(n * KV * hd));
            linear(h, wk, kc[il], n, E, KV * hd);
            linear(h, wv ? wv : wk, vc[il], n, E, KV * hd); /* no attn_v: V is K's projection */
            for (int64_t t = 0; t < n; t++)
                for (int64_t kh = 0; kh < KV; kh++) {
                    double *k = kc[il] + (t * KV + kh) * hd, *v = vc[il] + (t * KV + kh) * hd;
                    rms(k, kn, k, hd, r.eps);
                    rope(k, t, rot, base, ff);
                    rms(v, NULL, v, hd, r.eps);
                }
            free(wk), free(wv), free(kn);
        }
        const int64_t KVs = key_i(&r, "attention.head_count_kv", src, H);
        double *att = calloc((size_t)(n * H * hd), sizeof *att), *sc = malloc(sizeof(double) * (size_t)n);
        for (int64_t hh = 0; hh < H; hh++) {
            const int64_t kh = hh / (H / KVs);
            for (int64_t t = 0; t < n; t++) {
                double mx = -INFINITY, sum = 0;
                for (int64_t j = 0; j <= t; j++) {
                    double s = 0;
                    for (int64_t d = 0; d < hd; d++) s += q[(t * H + hh) * hd + d] * kc[src][(j * KVs + kh) * hd + d];
                    sc[j] = slides && t - j >= window ? -INFINITY : s; /* scale 1 */
                    if (sc[j] > mx) mx = sc[j];
                }
                for (int64_t j = 0; j <= t; j++) sum += (sc[j] = exp(sc[j] - mx));
                for (int64_t j = 0; j <= t; j++)
                    for (int64_t d = 0; d < hd; d++)
                        att[(t * H + hh) * hd + d] += sc[j] / sum * vc[src][(j * KVs + kh) * hd + d];
            }
        }
        double *wo = tensor(&r, "blk.%d.attn_output.weight", il), *pan = tensor(&r, "blk.%d.post_attention_norm.weight", il),
               *fn = tensor(&r, "blk.%d.ffn_norm.weight", il), *wg = tensor(&r, "blk.%d.ffn_gate.weight", il),
               *wu = tensor(&r, "blk.%d.ffn_up.weight", il), *wd = tensor(&r, "blk.%d.ffn_down.weight", il),
               *pfn = tensor(&r, "blk.%d.post_ffw_norm.weight", il),
               *los = tensor(&r, "blk.%d.layer_output_scale.weight", il);
        linear(att, wo, o, n, H * hd, E);
        for (int64_t t = 0; t < n; t++) {
            rms(o + t * E, pan, o + t * E, E, r.eps);
            for (int64_t i = 0; i < E; i++) x[t * E + i] += o[t * E + i];
            rms(x + t * E, fn, h + t * E, E, r.eps);
        }
        double *g1 = malloc(sizeof(double) * (size_t)(n * FF)), *u1 = malloc(sizeof(double) * (size_t)(n * FF));
        linear(h, wg, g1, n, E, FF);
        linear(h, wu, u1, n, E, FF);
        for (int64_t i = 0; i < n * FF; i++) g1[i] = gelu(g1[i]) * u1[i];
        linear(g1, wd, o, n, FF, E);
        if (kld_gguf_find_tensor(g, "blk.0.ffn_gate_inp.weight")) { /* 26B-A4B: experts beside the dense FFN */
            double *pn1 = tensor(&r, "blk.%d.post_ffw_norm_1.weight", il), *pn2 = tensor(&r, "blk.%d.post_ffw_norm_2.weight", il);
            double *y2 = malloc(sizeof(double) * (size_t)(n * E));
            experts(&r, il, x, y2, n);
            for (int64_t t = 0; t < n; t++) {
                rms(o + t * E, pn1, o + t * E, E, r.eps);
                rms(y2 + t * E, pn2, y2 + t * E, E, r.eps);
                for (int64_t i = 0; i < E; i++) o[t * E + i] += y2[t * E + i];
            }
            free(pn1), free(pn2), free(y2);
        }
        for (int64_t t = 0; t < n; t++) {
            rms(o + t * E, pfn, o + t * E, E, r.eps);
            for (int64_t i = 0; i < E; i++) x[t * E + i] += o[t * E + i];
        }
        if (pli) { /* the per-layer embedding */
            double *wig = tensor(&r, "blk.%d.inp_gate.weight", il), *wp = tensor(&r, "blk.%d.proj.weight", il),
                   *pn = tensor(&r, "blk.%d.post_norm.weight", il);
            double *gt = malloc(sizeof(double) * (size_t)(n * r.P));
            linear(x, wig, gt, n, E, r.P);
            for (int64_t t = 0; t < n; t++)
                for (int64_t i = 0; i < r.P; i++) gt[t * r.P + i] = gelu(gt[t * r.P + i]) * pli[(t * L + il) * r.P + i];
            linear(gt, wp, o, n, r.P, E);
            for (int64_t t = 0; t < n; t++) {
                rms(o + t * E, pn, o + t * E, E, r.eps);
                for (int64_t i = 0; i < E; i++) x[t * E + i] += o[t * E + i];
            }
            free(wig), free(wp), free(pn), free(gt);
        }
        for (int64_t i = 0; los && i < n * E; i++) x[i] *= los[0];
        free(an), free(wq), free(qn), free(q), free(att), free(sc), free(wo), free(pan), free(fn);
        free(wg), free(wu), free(wd), free(pfn), free(los), free(g1), free(u1);
    }
    double *on = tensor(&r, "output_norm.weight", 0), *wout = tensor(&r, "output.weight", 0);
    const double *head = wout ? wout : emb;
    float *out = malloc(sizeof(float) * (size_t)(n * r.V));
    for (int64_t t = 0; t < n; t++) {
        rms(x + t * E, on, h + t * E, E, r.eps);
        for (int64_t v = 0; v < r.V; v++) {
            double acc = 0;
            for (int64_t i = 0; i < E; i++) acc += h[t * E + i] * head[v * E + i];
            out[t * r.V + v] = (float)(cap > 0 ? cap * tanh(acc / cap) : acc);
        }
    }
    for (int64_t il = 0; il < L; il++) free(kc[il]), free(vc[il]);
    free(kc), free(vc), free(on), free(wout), free(emb), free(rope_freqs), free(x), free(h), free(o), free(pli);
    kld_gguf_close(g);
    return out;
}
