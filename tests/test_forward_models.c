/* test_forward_models.c — see test_forward_models.h. The reference forward
 * is deliberately naive: full-precision doubles, whole-prefix recompute,
 * one loop per formula, GGUF metadata read directly. */
#include "test_forward_models.h"

#include "engine/engine.h"
#include "io/gguf.h"
#include "testlib.h"
#include "io/gguf_writer.h"
#include "tensor/types.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- reference forward ---- */

typedef struct ref {
    const kld_gguf *g;
    char arch[32];
    int64_t E, L, H, KV, HD, HDV, FF, V, ROT;
    double eps, base, fscale, attn_cap, final_cap;
    int64_t window;
    int swa_pattern; /* -1 none, 0 all, p */
    const uint8_t *slides; /* per-layer flags instead of the pattern, or NULL */
    bool neox, gemma, post_norms, qk_norm, gelu;
    bool gptoss; /* sinks, o bias, biased router and experts, top-k-then-softmax, clamped SwiGLU */
    bool glm;    /* sigmoid router with exp_probs_b selection bias, norm + scale, ungated shared expert */
    bool ds;     /* deepseek2: exp_probs_b and the scale with any gating (softmax without expert_gating_func) */
    const ref_opts *opt;   /* for the weight deltas, or NULL */
} ref;

static int64_t key_int(const ref *r, const char *suffix, int64_t dflt) {
    char k[128];
    snprintf(k, sizeof k, "%s.%s", r->arch, suffix);
    int64_t v = dflt;
    kld_gguf_get_int(r->g, k, &v);
    return v;
}

static double key_f(const ref *r, const char *suffix, double dflt) {
    char k[128];
    snprintf(k, sizeof k, "%s.%s", r->arch, suffix);
    double v = dflt;
    kld_gguf_get_float(r->g, k, &v);
    return v;
}

double *ref_tensor(const kld_gguf *g, const ref_opts *opt, const char *name) {
    const kld_tensor *t = kld_gguf_find_tensor(g, name);
    if (!t) return NULL;
    int64_t n = kld_tensor_nelements(t);
    const kld_type_info *ti = kld_type_info_get(t->type);
    float *f = malloc((size_t)n * sizeof *f);
    double *d = malloc((size_t)n * sizeof *d);
    ti->to_float_ref(t->data, f, n);
    for (int64_t i = 0; i < n; i++) d[i] = f[i];
    free(f);
    for (int k = 0; opt && k < opt->n_delta; k++) /* merged LoRA weights */
        if (!strcmp(opt->delta_names[k], name))
            for (int64_t i = 0; i < n; i++) d[i] += opt->deltas[k][i];
    return d;
}

static double *weight(const ref *r, const char *name) { return ref_tensor(r->g, r->opt, name); }

static double *weightf(const ref *r, const char *fmt, int64_t il) {
    char name[96];
    snprintf(name, sizeof name, fmt, (int)il);
    return weight(r, name);
}

static void rmsnorm_d(const double *x, const double *w, double *out, int64_t n, double eps) {
    double ss = 0;
    for (int64_t i = 0; i < n; i++) ss += x[i] * x[i];
    double s = 1.0 / sqrt(ss / (double)n + eps);
    for (int64_t i = 0; i < n; i++) out[i] = x[i] * s * (w ? w[i] : 1.0); /* NULL: no weight */
}

/* y[rows][out] = x[rows][in] · W^T, W stored [out][in]. */
static void matmul_d(const double *x, const double *W, double *y, int64_t rows, int64_t in,
                     int64_t out) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t o = 0; o < out; o++) {
            double acc = 0;
            for (int64_t i = 0; i < in; i++) acc += x[r * in + i] * W[o * in + i];
            y[r * out + o] = acc;
        }
}

/* Rotates pairs by pos · inv[i], cos and sin times mag. */
static void rope_d(double *v, int64_t pos, const ref *r, const double *inv, double mag) {
    const int64_t half = r->ROT / 2;
    for (int64_t i = 0; i < half; i++) {
        double theta = (double)pos * inv[i];
        double c = cos(theta) * mag, s = sin(theta) * mag;
        int64_t a = r->neox ? i : 2 * i, b = r->neox ? i + half : 2 * i + 1;
        double x0 = v[a], x1 = v[b];
        v[a] = x0 * c - x1 * s;
        v[b] = x0 * s + x1 * c;
    }
}

/* Inverse frequencies of one RoPE: base^(-2i/d), then linear scaling or
 * YaRN written as the YaRN paper's blend of the interpolated (/factor) and
 * extrapolated frequencies over a linear ramp between the correction
 * dimensions d(b) = d·ln(orig / (2πb)) / (2 ln base), b = 32 and 1. */
static void inv_freqs(const ref *r, double base, double fscale, double yarn_factor,
                      int64_t yarn_orig, const double *divisors, double *inv) {
    const int64_t half = r->ROT / 2, d = r->ROT;
    double lo = floor(d * log((double)yarn_orig / (2 * M_PI * 32)) / (2 * log(base)));
    double hi = ceil(d * log((double)yarn_orig / (2 * M_PI * 1)) / (2 * log(base)));
    if (lo < 0) lo = 0;
    if (hi > d - 1) hi = (double)(d - 1);
    for (int64_t i = 0; i < half; i++) {
        const double extrap = pow(base, -2.0 * (double)i / (double)d);
        if (yarn_factor > 0) {
            double ramp = ((double)i - lo) / (hi == lo ? 0.001 : hi - lo);
            ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
            const double keep = 1 - ramp; /* share of the extrapolated frequency */
            inv[i] = extrap / yarn_factor * (1 - keep) + extrap * keep;
        } else {
            inv[i] = extrap * fscale;
        }
        if (divisors) inv[i] /= divisors[i];
    }
}

/* An expert matrix [rows][cols] as doubles: slice e of the merged
 * blk.N.ffn_<kind>_exps.weight, or blk.N.ffn_<kind>.E.weight. */
static double *expert_weight(const ref *r, int64_t il, const char *kind, int64_t e, int64_t n) {
    char name[96];
    snprintf(name, sizeof name, "blk.%d.ffn_%s_exps.weight", (int)il, kind);
    double *all = weight(r, name);
    if (all) {
        double *one = malloc(sizeof(double) * (size_t)n);
        memcpy(one, all + e * n, sizeof(double) * (size_t)n);
        free(all);
        return one;
    }
    snprintf(name, sizeof name, "blk.%d.ffn_%s.%d.weight", (int)il, kind, (int)e);
    return weight(r, name);
}

static double silu_d(double z) { return z / (1 + exp(-z)); }

/* gpt-oss's expert activation (transformers' GptOssExperts): gate clamped
 * above at 7, up to [-7, 7], gate·σ(1.702·gate)·(up + 1). */
static double swiglu_oai_d(double g, double u) {
    g = g < 7 ? g : 7;
    u = u < -7 ? -7 : u > 7 ? 7 : u;
    return g / (1 + exp(-1.702 * g)) * (u + 1);
}

/* The same with the biases of gpt-oss's experts (bg, bu [F], bd [E]). */
static void swiglu_oai_biased_d(const double *h, const double *wg, const double *wu, const double *wd,
                                const double *bg, const double *bu, const double *bd, int64_t E, int64_t F,
                                double *y) {
    double *a = malloc(sizeof(double) * (size_t)F);
    for (int64_t f = 0; f < F; f++) {
        double g = bg[f], u = bu[f];
        for (int64_t i = 0; i < E; i++) g += h[i] * wg[f * E + i], u += h[i] * wu[f * E + i];
        a[f] = swiglu_oai_d(g, u);
    }
    for (int64_t c = 0; c < E; c++) {
        double acc = bd[c];
        for (int64_t f = 0; f < F; f++) acc += a[f] * wd[c * F + f];
        y[c] = acc;
    }
    free(a);
}

/* y[E] = down · (silu(gate · h) * (up · h)) for one row h[E]. */
static void swiglu_d(const double *h, const double *wg, const double *wu, const double *wd,
                     int64_t E, int64_t F, double *y) {
    double *a = malloc(sizeof(double) * (size_t)F);
    for (int64_t f = 0; f < F; f++) {
        double g = 0, u = 0;
        for (int64_t i = 0; i < E; i++) g += h[i] * wg[f * E + i], u += h[i] * wu[f * E + i];
        a[f] = silu_d(g) * u;
    }
    for (int64_t c = 0; c < E; c++) {
        double acc = 0;
        for (int64_t f = 0; f < F; f++) acc += a[f] * wd[c * F + f];
        y[c] = acc;
    }
    free(a);
}

/* The MoE FFN of layer il for rows h[n][E] into o[n][E]: softmax router,
 * experts chosen as ggml_argsort orders them (a whole exchange sort,
 * descending; naive: lowest index first among equals), weights optionally
 * renormalised, the weighted sum of the experts' SwiGLU outputs, plus a
 * shared expert gated by the logistic function when the file has one. */
static void moe_ffn_d(const ref *r, int64_t il, const double *h, double *o, int64_t n,
                      int64_t X, int64_t K, int64_t F, int64_t S, bool norm_w, bool naive) {
    const int64_t E = r->E;
    double *router = weightf(r, "blk.%d.ffn_gate_inp.weight", il);
    double **wg = calloc((size_t)X, sizeof *wg), **wu = calloc((size_t)X, sizeof *wu),
           **wd = calloc((size_t)X, sizeof *wd);
    for (int64_t e = 0; e < X; e++) {
        wg[e] = expert_weight(r, il, "gate", e, E * F);
        wu[e] = expert_weight(r, il, "up", e, E * F);
        wd[e] = expert_weight(r, il, "down", e, E * F);
    }
    double *sg = weightf(r, "blk.%d.ffn_gate_inp_shexp.weight", il);
    double *sgw = weightf(r, "blk.%d.ffn_gate_shexp.weight", il); /* GLM-4.5: no gate vector */
    double *suw = sgw ? weightf(r, "blk.%d.ffn_up_shexp.weight", il) : NULL;
    double *sdw = sgw ? weightf(r, "blk.%d.ffn_down_shexp.weight", il) : NULL;
    double *pb = r->glm || r->ds ? weightf(r, "blk.%d.exp_probs_b.bias", il) : NULL;
    double *sel = malloc(sizeof(double) * (size_t)X);
    double *p = malloc(sizeof(double) * (size_t)X), *y = malloc(sizeof(double) * (size_t)E);
    int *order = malloc(sizeof(int) * (size_t)X);
    double *rb = r->gptoss ? weightf(r, "blk.%d.ffn_gate_inp.bias", il) : NULL;
    double *bg = r->gptoss ? weightf(r, "blk.%d.ffn_gate_exps.bias", il) : NULL;
    double *bu = r->gptoss ? weightf(r, "blk.%d.ffn_up_exps.bias", il) : NULL;
    double *bd = r->gptoss ? weightf(r, "blk.%d.ffn_down_exps.bias", il) : NULL;
    for (int64_t t = 0; t < n; t++) {
        const double *ht = h + t * E;
        double mx = -INFINITY, sum = 0;
        for (int64_t e = 0; e < X; e++) {
            double acc = rb ? rb[e] : 0;
            for (int64_t i = 0; i < E; i++) acc += ht[i] * router[e * E + i];
            p[e] = acc;
            mx = acc > mx ? acc : mx;
        }
        /* gpt-oss keeps the logits for the top k (softmaxed among them below); GLM-4.5 takes
         * the sigmoid of each and picks the top k of sigmoid + exp_probs_b */
        for (int64_t e = 0; !r->gptoss && !r->glm && e < X; e++) sum += (p[e] = exp(p[e] - mx));
        for (int64_t e = 0; !r->gptoss && !r->glm && e < X; e++) p[e] /= sum;
        for (int64_t e = 0; r->glm && e < X; e++) p[e] = 1 / (1 + exp(-p[e]));
        for (int64_t e = 0; e < X; e++) sel[e] = p[e] + (pb ? pb[e] : 0);
        const int64_t G = key_int(r, "expert_group_count", 0), GU = key_int(r, "expert_group_used_count", 0);
        if (G > 1) { /* DeepSeek V3: only the experts of the GU groups with the best two-expert sums */
            const int64_t per = X / G;
            double gs[64];
            for (int64_t g = 0; g < G; g++) {
                double b1 = -INFINITY, b2 = -INFINITY;
                for (int64_t i = 0; i < per; i++) {
                    const double v = sel[g * per + i];
                    if (v > b1) b2 = b1, b1 = v;
                    else if (v > b2) b2 = v;
                }
                gs[g] = b1 + b2;
            }
            for (int64_t g = 0; g < G; g++) {
                int64_t better = 0;
                for (int64_t o = 0; o < G; o++) better += gs[o] > gs[g] || (gs[o] == gs[g] && o < g);
                for (int64_t i = 0; better >= GU && i < per; i++) sel[g * per + i] = -INFINITY;
            }
        }
        for (int64_t e = 0; e < X; e++) order[e] = (int)e;
        if (naive) { /* insertion sort, stable: equal values keep index order */
            for (int64_t a = 1; a < X; a++)
                for (int64_t b = a; b > 0 && sel[order[b - 1]] < sel[order[b]]; b--) {
                    int tmp = order[b];
                    order[b] = order[b - 1];
                    order[b - 1] = tmp;
                }
        } else { /* ggml-cpu.c's exchange sort, all of it */
            for (int64_t a = 0; a < X; a++)
                for (int64_t b = a + 1; b < X; b++)
                    if (sel[order[a]] < sel[order[b]]) {
                        int tmp = order[a];
                        order[a] = order[b];
                        order[b] = tmp;
                    }
        }
        if (r->gptoss) { /* softmax over the chosen k */
            double kmx = -INFINITY, ks = 0;
            for (int64_t k = 0; k < K; k++) kmx = p[order[k]] > kmx ? p[order[k]] : kmx;
            for (int64_t k = 0; k < K; k++) ks += exp(p[order[k]] - kmx);
            for (int64_t k = 0; k < K; k++) p[order[k]] = exp(p[order[k]] - kmx) / ks;
        }
        double wsum = 0;
        for (int64_t k = 0; k < K; k++) wsum += p[order[k]];
        double *ot = o + t * E;
        for (int64_t c = 0; c < E; c++) ot[c] = 0;
        for (int64_t k = 0; k < K; k++) {
            const int e = order[k];
            const double w = (norm_w ? p[e] / wsum : p[e]) * (r->glm || r->ds ? key_f(r, "expert_weights_scale", 1) : 1);
            if (r->gptoss) swiglu_oai_biased_d(ht, wg[e], wu[e], wd[e], bg + e * F, bu + e * F, bd + e * E, E, F, y);
            else swiglu_d(ht, wg[e], wu[e], wd[e], E, F, y);
            for (int64_t c = 0; c < E; c++) ot[c] += w * y[c];
        }
        if (sgw) {
            double g = 0;
            for (int64_t i = 0; sg && i < E; i++) g += ht[i] * sg[i];
            const double gate = sg ? 1 / (1 + exp(-g)) : 1;
            swiglu_d(ht, sgw, suw, sdw, E, S, y);
            for (int64_t c = 0; c < E; c++) ot[c] += gate * y[c];
        }
    }
    for (int64_t e = 0; e < X; e++) free(wg[e]), free(wu[e]), free(wd[e]);
    free(wg), free(wu), free(wd), free(router), free(sg), free(sgw), free(suw), free(sdw);
    free(p), free(y), free(order), free(rb), free(bg), free(bu), free(bd), free(pb), free(sel);
}

static bool layer_slides(const ref *r, int64_t il) {
    if (r->window <= 0) return false;
    if (r->slides) return r->slides[il] != 0;
    if (r->swa_pattern < 0) return false;
    return r->swa_pattern == 0 || il % r->swa_pattern < r->swa_pattern - 1;
}

/* The per-layer flags of "<arch>.attention.sliding_window_pattern" when it
 * is an array (the integer form sets r->swa_pattern). */
static void read_pattern_key(ref *r, uint8_t *flags) {
    char k[128];
    snprintf(k, sizeof k, "%s.attention.sliding_window_pattern", r->arch);
    int64_t p = 0;
    if (kld_gguf_get_int(r->g, k, &p)) {
        r->swa_pattern = (int)p;
        return;
    }
    const kld_gguf_value *arr = kld_gguf_get_arr(r->g, k);
    if (!arr) return;
    for (uint64_t il = 0; il < arr->v.arr.n && il < 256; il++) {
        int64_t v = 0;
        kld_gguf_arr_int(arr, il, &v);
        flags[il] = (uint8_t)v;
    }
    r->slides = flags;
}

float *ref_forward(const char *gguf_path, const int32_t *ids, int64_t n, int64_t *n_vocab) {
    return ref_forward_opts(gguf_path, NULL, ids, n, n_vocab);
}

float *ref_forward_opts(const char *gguf_path, const ref_opts *opt, const int32_t *ids, int64_t n,
                        int64_t *n_vocab) {
    kld_error err = {0};
    kld_gguf *g = NULL;
    if (kld_gguf_open(gguf_path, &g, &err) != KLD_OK) {
        fprintf(stderr, "ref_forward: %s\n", err.msg);
        return NULL;
    }
    ref r = {.g = g, .opt = opt};
    kld_str a;
    kld_gguf_get_str(g, "general.architecture", &a);
    snprintf(r.arch, sizeof r.arch, "%.*s", (int)a.len, a.ptr);
    if (!strcmp(r.arch, "lfm2") || !strcmp(r.arch, "qwen3next") || !strncmp(r.arch, "qwen35", 6)) { /* the hybrids' own reference (test_ref_hybrid.c) */
        kld_gguf_close(g);
        return ref_forward_hybrid(gguf_path, ids, n, n_vocab);
    }
    if (!strcmp(r.arch, "gemma4")) { /* per-layer geometry: its own reference (test_ref_gemma4.c) */
        kld_gguf_close(g);
        return ref_forward_gemma4(gguf_path, opt, ids, n, n_vocab);
    }
    bool llama = !strcmp(r.arch, "llama"), qwen2 = !strcmp(r.arch, "qwen2"),
         qwen3 = !strcmp(r.arch, "qwen3"), phi3 = !strcmp(r.arch, "phi3"),
         gemma2 = !strcmp(r.arch, "gemma2"), gemma3 = !strcmp(r.arch, "gemma3"),
         qwen2moe = !strcmp(r.arch, "qwen2moe"), olmoe = !strcmp(r.arch, "olmoe"),
         qwen3moe = !strcmp(r.arch, "qwen3moe"), gptoss = !strcmp(r.arch, "gpt-oss"),
         glm = !strcmp(r.arch, "glm4moe"), ds = !strcmp(r.arch, "deepseek2");
    r.gptoss = gptoss;
    /* DeepSeek V3 routes as GLM-4.5 does (sigmoid, exp_probs_b, norm, scale, ungated shared expert) */
    r.glm = glm || (ds && key_int(&r, "expert_gating_func", 0) == 2);
    r.ds = ds;
    if (!(llama || qwen2 || qwen3 || phi3 || gemma2 || gemma3 || qwen2moe || olmoe || qwen3moe || gptoss || glm || ds)) {
        fprintf(stderr, "ref_forward: unknown architecture %s\n", r.arch);
        kld_gguf_close(g);
        return NULL;
    }
    r.E = key_int(&r, "embedding_length", 0);
    /* the appended NextN (MTP) layers llama.cpp's converter keeps are not run */
    r.L = key_int(&r, "block_count", 0) - key_int(&r, "nextn_predict_layers", 0);
    r.H = key_int(&r, "attention.head_count", 0);
    r.KV = key_int(&r, "attention.head_count_kv", r.H);
    r.HD = key_int(&r, "attention.key_length", r.E / r.H);
    r.HDV = key_int(&r, "attention.value_length", r.HD);
    r.FF = key_int(&r, "feed_forward_length", 0);
    if (ds && key_int(&r, "attention.key_length_mla", 0) > 0) { /* the absorbed form's per-head sizes */
        r.HD = key_int(&r, "attention.key_length_mla", 0);
        r.HDV = key_int(&r, "attention.value_length_mla", 0);
        r.KV = r.H;
    }
    r.ROT = key_int(&r, "rope.dimension_count", r.HD);
    r.eps = key_f(&r, "attention.layer_norm_rms_epsilon", 1e-5);
    r.base = key_f(&r, "rope.freq_base", 10000);
    double lin = key_f(&r, "rope.scaling.factor", 0);
    r.fscale = lin > 0 ? 1.0 / lin : 1.0;
    r.attn_cap = key_f(&r, "attn_logit_softcapping", 0);
    r.final_cap = key_f(&r, "final_logit_softcapping", 0);
    /* Sliding windows as llama.cpp builds them: phi3 every layer, gemma2
     * every other (window 4096 unless the key says), gemma3 five of six
     * unless the pattern key says otherwise; none for llama/qwen. */
    r.window = key_int(&r, "attention.sliding_window", gemma2 ? 4096 : 0);
    if (!(phi3 || gemma2 || gemma3 || gptoss)) r.window = 0;
    r.swa_pattern = gemma2 || gptoss ? 2 : gemma3 ? 6 : phi3 ? 0 : -1; /* gpt-oss: even layers slide */
    uint8_t flags[256] = {0};
    if (gemma2 || gemma3 || gptoss) read_pattern_key(&r, flags);
    const double local_base = gemma3 ? key_f(&r, "rope.freq_base_swa", 10000) : r.base;
    /* YaRN from the GGUF: factor, original context (default: context_length),
     * magnitude attn_factor · (1 + 0.1 ln factor). */
    char yk[128];
    snprintf(yk, sizeof yk, "%s.rope.scaling.type", r.arch);
    kld_str ys = {0};
    double yarn_factor = 0, yarn_mag = 1;
    int64_t yarn_orig = key_int(&r, "rope.scaling.original_context_length", key_int(&r, "context_length", 0));
    if (kld_gguf_get_str(g, yk, &ys) && kld_str_eq(ys, "yarn") && lin > 0) {
        yarn_factor = lin;
        yarn_mag = key_f(&r, "rope.scaling.attn_factor", 1) * (1 + 0.1 * log(lin));
    }
    /* DeepSeek (modeling_deepseek.py): mscale_all_dim = yarn_log_multiplier / 0.1; the
     * cos/sin magnitude yarn_get_mscale(f, mscale) / yarn_get_mscale(f, mscale_all_dim) = 1
     * (mscale = mscale_all_dim), softmax_scale = q_head_dim^-0.5 · yarn_get_mscale(f, mscale_all_dim)^2 */
    double ds_scale = 1.0 / sqrt((double)r.HD);
    if (ds && yarn_factor > 0) {
        const double all = key_f(&r, "rope.scaling.yarn_log_multiplier", 0) / 0.1;
        const double ms = 1 + 0.1 * all * log(yarn_factor);
        yarn_mag = key_f(&r, "rope.scaling.attn_factor", 1);
        ds_scale = ms * ms / sqrt((double)r.HD);
    }
    if (opt) { /* the caller's semantics (config.json variants) replace the file's */
        r.window = opt->window;
        r.slides = opt->slides;
        if (opt->yarn_factor > 0) {
            yarn_factor = opt->yarn_factor;
            yarn_orig = opt->yarn_orig_ctx;
            yarn_mag = opt->yarn_attn;
        }
    }
    r.neox = !llama && !ds;
    r.gemma = gemma2 || gemma3;
    r.post_norms = gemma2 || gemma3;
    r.qk_norm = qwen3 || gemma3 || qwen3moe || glm; /* glm4moe: when the file has them */
    /* Mixture of experts: Mixtral (llama with experts) and Qwen3-MoE
     * renormalise the chosen weights, Qwen2-MoE and OLMoE do not. */
    const int64_t X = key_int(&r, "expert_count", 0), K = key_int(&r, "expert_used_count", 0);
    const bool qwen_moe = qwen2moe || qwen3moe;
    const int64_t FX = key_int(&r, "expert_feed_forward_length", qwen_moe && K ? r.FF / K : r.FF);
    const int64_t FS = glm || ds ? FX * key_int(&r, "expert_shared_count", 1)
                           : key_int(&r, "expert_shared_feed_forward_length", r.FF);
    const int64_t dense_lead = key_int(&r, "leading_dense_block_count", 0);
    bool moe_norm = llama || qwen3moe || glm; /* glm4moe: expert_weights_norm (written true) */
    if (ds) { /* deepseek2: expert_weights_norm, false when absent */
        char nk[128];
        snprintf(nk, sizeof nk, "%s.expert_weights_norm", r.arch);
        const kld_gguf_kv *kv = kld_gguf_find(g, nk);
        moe_norm = kv && kv->value.type == KLD_GGUF_BOOL && kv->value.v.b;
    }
    if (opt && opt->moe_norm_w) moe_norm = opt->moe_norm_w > 0;
    const bool naive_ties = opt && opt->naive_ties;
    r.gelu = r.gemma;
    const kld_tensor *te = kld_gguf_find_tensor(g, "token_embd.weight");
    r.V = te->ne[1];
    *n_vocab = r.V;

    const int64_t E = r.E, nq = r.H * r.HD, nk = r.KV * r.HD, nv = r.KV * r.HDV;
    double *emb = weight(&r, "token_embd.weight");
    double *rope_freqs = weight(&r, "rope_freqs.weight"); /* Llama 3.x: theta_i / f_i */
    double *x = calloc((size_t)(n * E), sizeof *x), *h = calloc((size_t)(n * E), sizeof *h);
    double *q = calloc((size_t)(n * nq), sizeof *q), *k = calloc((size_t)(n * nk), sizeof *k),
           *v = calloc((size_t)(n * nv), sizeof *v), *att = calloc((size_t)(n * r.H * r.HDV), sizeof *att),
           *o = calloc((size_t)(n * E), sizeof *o), *g1 = calloc((size_t)(n * r.FF), sizeof *g1),
           *u1 = calloc((size_t)(n * r.FF), sizeof *u1), *sc = calloc((size_t)n, sizeof *sc);
    for (int64_t t = 0; t < n; t++)
        for (int64_t i = 0; i < E; i++) x[t * E + i] = emb[(int64_t)ids[t] * E + i] * (r.gemma ? sqrt((double)E) : 1.0);
    for (int64_t il = 0; il < r.L; il++) {
        double *an = weightf(&r, "blk.%d.attn_norm.weight", il);
        for (int64_t t = 0; t < n; t++) rmsnorm_d(x + t * E, an, h + t * E, E, r.eps);
        if (phi3) {
            double *wqkv = weightf(&r, "blk.%d.attn_qkv.weight", il);
            double *qkv = malloc(sizeof(double) * (size_t)(n * (nq + nk + nv)));
            matmul_d(h, wqkv, qkv, n, E, nq + nk + nv);
            for (int64_t t = 0; t < n; t++) {
                memcpy(q + t * nq, qkv + t * (nq + nk + nv), sizeof(double) * (size_t)nq);
                memcpy(k + t * nk, qkv + t * (nq + nk + nv) + nq, sizeof(double) * (size_t)nk);
                memcpy(v + t * nv, qkv + t * (nq + nk + nv) + nq + nk, sizeof(double) * (size_t)nv);
            }
            free(qkv);
            free(wqkv);
        } else if (ds) { /* MLA: q, the latent kv (normed) decompressed per head, k_pe shared */
            const int64_t QA = key_int(&r, "attention.q_lora_rank", 0), R = key_int(&r, "attention.kv_lora_rank", 0);
            const int64_t nope = r.HD - r.ROT, W = R + r.ROT, KB = r.H * (nope + r.HDV);
            if (QA > 0) {
                double *wa = weightf(&r, "blk.%d.attn_q_a.weight", il), *na = weightf(&r, "blk.%d.attn_q_a_norm.weight", il),
                       *wb = weightf(&r, "blk.%d.attn_q_b.weight", il);
                double *qa = malloc(sizeof(double) * (size_t)(n * QA));
                matmul_d(h, wa, qa, n, E, QA);
                for (int64_t t = 0; t < n; t++) rmsnorm_d(qa + t * QA, na, qa + t * QA, QA, r.eps);
                matmul_d(qa, wb, q, n, QA, nq);
                free(wa), free(na), free(wb), free(qa);
            } else {
                double *wq = weightf(&r, "blk.%d.attn_q.weight", il);
                matmul_d(h, wq, q, n, E, nq);
                free(wq);
            }
            double *wkva = weightf(&r, "blk.%d.attn_kv_a_mqa.weight", il), *kvn = weightf(&r, "blk.%d.attn_kv_a_norm.weight", il),
                   *wkvb = weightf(&r, "blk.%d.attn_kv_b.weight", il);
            if (!wkvb) { /* attn_k_b [H][R][nope] and attn_v_b [H][v][R]: kv_b's rows per head */
                double *kb = weightf(&r, "blk.%d.attn_k_b.weight", il), *vb = weightf(&r, "blk.%d.attn_v_b.weight", il);
                wkvb = malloc(sizeof(double) * (size_t)(R * KB));
                for (int64_t hh = 0; hh < r.H; hh++) {
                    for (int64_t d = 0; d < nope; d++)
                        for (int64_t i = 0; i < R; i++)
                            wkvb[(hh * (nope + r.HDV) + d) * R + i] = kb[(hh * R + i) * nope + d];
                    for (int64_t e = 0; e < r.HDV; e++)
                        for (int64_t i = 0; i < R; i++)
                            wkvb[(hh * (nope + r.HDV) + nope + e) * R + i] = vb[(hh * r.HDV + e) * R + i];
                }
                free(kb), free(vb);
            }
            double *kva = malloc(sizeof(double) * (size_t)(n * W)), *lat = malloc(sizeof(double) * (size_t)(n * R)),
                   *kvb = malloc(sizeof(double) * (size_t)(n * KB));
            matmul_d(h, wkva, kva, n, E, W);
            for (int64_t t = 0; t < n; t++) rmsnorm_d(kva + t * W, kvn, lat + t * R, R, r.eps);
            matmul_d(lat, wkvb, kvb, n, R, KB);
            for (int64_t t = 0; t < n; t++)
                for (int64_t hh = 0; hh < r.H; hh++) {
                    for (int64_t d = 0; d < r.HD; d++)
                        k[t * nk + hh * r.HD + d] = d < nope ? kvb[t * KB + hh * (nope + r.HDV) + d] : kva[t * W + R + d - nope];
                    for (int64_t d = 0; d < r.HDV; d++) v[t * nv + hh * r.HDV + d] = kvb[t * KB + hh * (nope + r.HDV) + nope + d];
                }
            free(wkva), free(kvn), free(wkvb), free(kva), free(lat), free(kvb);
        } else {
            double *wq = weightf(&r, "blk.%d.attn_q.weight", il), *wk = weightf(&r, "blk.%d.attn_k.weight", il),
                   *wv = weightf(&r, "blk.%d.attn_v.weight", il);
            matmul_d(h, wq, q, n, E, nq);
            matmul_d(h, wk, k, n, E, nk);
            if (wv) matmul_d(h, wv, v, n, E, nv);
            double *bq = weightf(&r, "blk.%d.attn_q.bias", il), *bk = weightf(&r, "blk.%d.attn_k.bias", il),
                   *bv = weightf(&r, "blk.%d.attn_v.bias", il);
            for (int64_t t = 0; t < n; t++) {
                for (int64_t i = 0; bq && i < nq; i++) q[t * nq + i] += bq[i];
                for (int64_t i = 0; bk && i < nk; i++) k[t * nk + i] += bk[i];
                for (int64_t i = 0; bv && i < nv; i++) v[t * nv + i] += bv[i];
            }
            free(wq), free(wk), free(wv), free(bq), free(bk), free(bv);
        }
        const bool slides = layer_slides(&r, il);
        /* gemma3's sliding layers: their own base, never scaled */
        double inv[512];
        if (gemma3 && slides) inv_freqs(&r, local_base, 1.0, 0, 0, NULL, inv);
        else inv_freqs(&r, r.base, r.fscale, yarn_factor, yarn_orig, rope_freqs, inv);
        const double mag = gemma3 && slides ? 1.0 : yarn_mag;
        double *qn = r.qk_norm ? weightf(&r, "blk.%d.attn_q_norm.weight", il) : NULL;
        double *kn = r.qk_norm ? weightf(&r, "blk.%d.attn_k_norm.weight", il) : NULL;
        if (olmoe) { /* OLMoE: one RMSNorm over the whole q row and the whole k row */
            double *fq = weightf(&r, "blk.%d.attn_q_norm.weight", il);
            double *fk = weightf(&r, "blk.%d.attn_k_norm.weight", il);
            for (int64_t t = 0; t < n; t++) {
                rmsnorm_d(q + t * nq, fq, q + t * nq, nq, r.eps);
                rmsnorm_d(k + t * nk, fk, k + t * nk, nk, r.eps);
            }
            free(fq), free(fk);
        }
        for (int64_t t = 0; t < n; t++) {
            for (int64_t hh = 0; hh < r.H; hh++) {
                if (qn) rmsnorm_d(q + t * nq + hh * r.HD, qn, q + t * nq + hh * r.HD, r.HD, r.eps);
                rope_d(q + t * nq + hh * r.HD + (ds ? r.HD - r.ROT : 0), t, &r, inv, mag);
            }
            for (int64_t hh = 0; hh < r.KV; hh++) {
                if (kn) rmsnorm_d(k + t * nk + hh * r.HD, kn, k + t * nk + hh * r.HD, r.HD, r.eps);
                rope_d(k + t * nk + hh * r.HD + (ds ? r.HD - r.ROT : 0), t, &r, inv, mag);
            }
        }
        free(qn), free(kn);
        const double scale = ds ? ds_scale : 1.0 / sqrt((double)r.HD);
        double *sinks = gptoss ? weightf(&r, "blk.%d.attn_sinks.weight", il) : NULL;
        for (int64_t hh = 0; hh < r.H; hh++) {
            const int64_t kvh = hh / (r.H / r.KV);
            for (int64_t t = 0; t < n; t++) {
                double mx = -INFINITY;
                for (int64_t j = 0; j <= t; j++) {
                    double s = 0;
                    for (int64_t d = 0; d < r.HD; d++) s += q[t * nq + hh * r.HD + d] * k[j * nk + kvh * r.HD + d];
                    s *= scale;
                    if (r.attn_cap > 0) s = r.attn_cap * tanh(s / r.attn_cap);
                    if (slides && t - j >= r.window) s = -INFINITY;
                    sc[j] = s;
                    if (s > mx) mx = s;
                }
                /* a sink: one more logit in the denominator, attending to nothing */
                if (sinks && sinks[hh] > mx) mx = sinks[hh];
                double sum = sinks ? exp(sinks[hh] - mx) : 0;
                for (int64_t j = 0; j <= t; j++) sum += (sc[j] = exp(sc[j] - mx));
                for (int64_t d = 0; d < r.HDV; d++) {
                    double acc = 0;
                    for (int64_t j = 0; j <= t; j++) acc += sc[j] / sum * v[j * nv + kvh * r.HDV + d];
                    att[t * r.H * r.HDV + hh * r.HDV + d] = acc;
                }
            }
        }
        free(sinks);
        double *wo = weightf(&r, "blk.%d.attn_output.weight", il);
        matmul_d(att, wo, o, n, r.H * r.HDV, E);
        double *bo = weightf(&r, "blk.%d.attn_output.bias", il);
        for (int64_t t = 0; bo && t < n; t++)
            for (int64_t i = 0; i < E; i++) o[t * E + i] += bo[i];
        free(bo);
        double *pan = r.post_norms ? weightf(&r, "blk.%d.post_attention_norm.weight", il) : NULL;
        for (int64_t t = 0; t < n; t++) {
            if (pan) rmsnorm_d(o + t * E, pan, o + t * E, E, r.eps);
            for (int64_t i = 0; i < E; i++) x[t * E + i] += o[t * E + i];
        }
        double *fn = weightf(&r, gptoss || glm ? "blk.%d.post_attention_norm.weight" : "blk.%d.ffn_norm.weight", il);
        for (int64_t t = 0; t < n; t++) rmsnorm_d(x + t * E, fn, h + t * E, E, r.eps);
        if (X > 0 && il >= dense_lead) {
            moe_ffn_d(&r, il, h, o, n, X, K, FX, FS, moe_norm, naive_ties);
            for (int64_t i = 0; i < n * E; i++) x[i] += o[i];
            free(an), free(wo), free(pan), free(fn);
            continue;
        }
        if (phi3) {
            double *wgu = weightf(&r, "blk.%d.ffn_up.weight", il);
            double *gu = malloc(sizeof(double) * (size_t)(n * 2 * r.FF));
            matmul_d(h, wgu, gu, n, E, 2 * r.FF);
            for (int64_t t = 0; t < n; t++) {
                memcpy(g1 + t * r.FF, gu + t * 2 * r.FF, sizeof(double) * (size_t)r.FF);
                memcpy(u1 + t * r.FF, gu + t * 2 * r.FF + r.FF, sizeof(double) * (size_t)r.FF);
            }
            free(gu);
            free(wgu);
        } else {
            double *wg = weightf(&r, "blk.%d.ffn_gate.weight", il), *wu = weightf(&r, "blk.%d.ffn_up.weight", il);
            matmul_d(h, wg, g1, n, E, r.FF);
            matmul_d(h, wu, u1, n, E, r.FF);
            free(wg), free(wu);
        }
        for (int64_t i = 0; i < n * r.FF; i++) {
            double z = g1[i];
            double act = r.gelu ? 0.5 * z * (1 + tanh(sqrt(2 / M_PI) * (z + 0.044715 * z * z * z)))
                                : z / (1 + exp(-z));
            g1[i] = act * u1[i];
        }
        double *wd = weightf(&r, "blk.%d.ffn_down.weight", il);
        matmul_d(g1, wd, o, n, r.FF, E);
        double *pfn = r.post_norms ? weightf(&r, "blk.%d.post_ffw_norm.weight", il) : NULL;
        for (int64_t t = 0; t < n; t++) {
            if (pfn) rmsnorm_d(o + t * E, pfn, o + t * E, E, r.eps);
            for (int64_t i = 0; i < E; i++) x[t * E + i] += o[t * E + i];
        }
        free(an), free(wo), free(pan), free(fn), free(wd), free(pfn);
    }
    double *on = weight(&r, "output_norm.weight");
    double *wout = weight(&r, "output.weight");
    if (!wout) wout = emb, emb = NULL;
    for (int64_t t = 0; t < n; t++) rmsnorm_d(x + t * E, on, h + t * E, E, r.eps);
    double *lg = malloc(sizeof(double) * (size_t)(n * r.V));
    matmul_d(h, wout, lg, n, E, r.V);
    float *out = malloc(sizeof(float) * (size_t)(n * r.V));
    for (int64_t i = 0; i < n * r.V; i++)
        out[i] = (float)(r.final_cap > 0 ? r.final_cap * tanh(lg[i] / r.final_cap) : lg[i]);
    free(lg), free(wout), free(emb), free(on), free(x), free(h), free(q), free(k), free(v);
    free(att), free(o), free(g1), free(u1), free(sc), free(rope_freqs);
    kld_gguf_close(g);
    return out;
}
