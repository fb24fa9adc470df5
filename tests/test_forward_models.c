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
    bool neox, gemma, post_norms, qk_norm, gelu;
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

/* The whole tensor as doubles (row-major, ne[0] fastest), or NULL. */
static double *weight(const ref *r, const char *name) {
    const kld_tensor *t = kld_gguf_find_tensor(r->g, name);
    if (!t) return NULL;
    int64_t n = kld_tensor_nelements(t);
    const kld_type_info *ti = kld_type_info_get(t->type);
    float *f = malloc((size_t)n * sizeof *f);
    double *d = malloc((size_t)n * sizeof *d);
    ti->to_float_ref(t->data, f, n);
    for (int64_t i = 0; i < n; i++) d[i] = f[i];
    free(f);
    return d;
}

static double *weightf(const ref *r, const char *fmt, int64_t il) {
    char name[96];
    snprintf(name, sizeof name, fmt, (int)il);
    return weight(r, name);
}

static void rmsnorm_d(const double *x, const double *w, double *out, int64_t n, double eps) {
    double ss = 0;
    for (int64_t i = 0; i < n; i++) ss += x[i] * x[i];
    double s = 1.0 / sqrt(ss / (double)n + eps);
    for (int64_t i = 0; i < n; i++) out[i] = x[i] * s * w[i];
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

static void rope_d(double *v, int64_t pos, const ref *r, double base, double fscale,
                   const double *factors) {
    const int64_t half = r->ROT / 2;
    for (int64_t i = 0; i < half; i++) {
        double theta = (double)pos * fscale * pow(base, -2.0 * (double)i / (double)r->ROT);
        if (factors) theta /= factors[i];
        double c = cos(theta), s = sin(theta);
        int64_t a = r->neox ? i : 2 * i, b = r->neox ? i + half : 2 * i + 1;
        double x0 = v[a], x1 = v[b];
        v[a] = x0 * c - x1 * s;
        v[b] = x0 * s + x1 * c;
    }
}

static bool layer_slides(const ref *r, int64_t il) {
    if (r->window <= 0 || r->swa_pattern < 0) return false;
    return r->swa_pattern == 0 || il % r->swa_pattern < r->swa_pattern - 1;
}

float *ref_forward(const char *gguf_path, const int32_t *ids, int64_t n, int64_t *n_vocab) {
    kld_error err = {0};
    kld_gguf *g = NULL;
    if (kld_gguf_open(gguf_path, &g, &err) != KLD_OK) {
        fprintf(stderr, "ref_forward: %s\n", err.msg);
        return NULL;
    }
    ref r = {.g = g};
    kld_str a;
    kld_gguf_get_str(g, "general.architecture", &a);
    snprintf(r.arch, sizeof r.arch, "%.*s", (int)a.len, a.ptr);
    bool llama = !strcmp(r.arch, "llama"), qwen2 = !strcmp(r.arch, "qwen2"),
         qwen3 = !strcmp(r.arch, "qwen3"), phi3 = !strcmp(r.arch, "phi3"),
         gemma2 = !strcmp(r.arch, "gemma2"), gemma3 = !strcmp(r.arch, "gemma3");
    if (!(llama || qwen2 || qwen3 || phi3 || gemma2 || gemma3)) {
        fprintf(stderr, "ref_forward: unknown architecture %s\n", r.arch);
        kld_gguf_close(g);
        return NULL;
    }
    r.E = key_int(&r, "embedding_length", 0);
    r.L = key_int(&r, "block_count", 0);
    r.H = key_int(&r, "attention.head_count", 0);
    r.KV = key_int(&r, "attention.head_count_kv", r.H);
    r.HD = key_int(&r, "attention.key_length", r.E / r.H);
    r.HDV = key_int(&r, "attention.value_length", r.HD);
    r.FF = key_int(&r, "feed_forward_length", 0);
    r.ROT = key_int(&r, "rope.dimension_count", r.HD);
    r.eps = key_f(&r, "attention.layer_norm_rms_epsilon", 1e-5);
    r.base = key_f(&r, "rope.freq_base", 10000);
    double lin = key_f(&r, "rope.scaling.factor", 0);
    r.fscale = lin > 0 ? 1.0 / lin : 1.0;
    r.attn_cap = key_f(&r, "attn_logit_softcapping", 0);
    r.final_cap = key_f(&r, "final_logit_softcapping", 0);
    r.window = key_int(&r, "attention.sliding_window", 0);
    r.swa_pattern = gemma2 ? 2 : gemma3 ? 6 : phi3 ? 0 : -1;
    r.neox = !llama;
    r.gemma = gemma2 || gemma3;
    r.post_norms = gemma2 || gemma3;
    r.qk_norm = qwen3 || gemma3;
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
        } else {
            double *wq = weightf(&r, "blk.%d.attn_q.weight", il), *wk = weightf(&r, "blk.%d.attn_k.weight", il),
                   *wv = weightf(&r, "blk.%d.attn_v.weight", il);
            matmul_d(h, wq, q, n, E, nq);
            matmul_d(h, wk, k, n, E, nk);
            matmul_d(h, wv, v, n, E, nv);
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
        const double base = gemma3 && slides ? 10000.0 : r.base;
        const double fscale = gemma3 && slides ? 1.0 : r.fscale;
        double *qn = r.qk_norm ? weightf(&r, "blk.%d.attn_q_norm.weight", il) : NULL;
        double *kn = r.qk_norm ? weightf(&r, "blk.%d.attn_k_norm.weight", il) : NULL;
        for (int64_t t = 0; t < n; t++) {
            for (int64_t hh = 0; hh < r.H; hh++) {
                if (qn) rmsnorm_d(q + t * nq + hh * r.HD, qn, q + t * nq + hh * r.HD, r.HD, r.eps);
                rope_d(q + t * nq + hh * r.HD, t, &r, base, fscale, rope_freqs);
            }
            for (int64_t hh = 0; hh < r.KV; hh++) {
                if (kn) rmsnorm_d(k + t * nk + hh * r.HD, kn, k + t * nk + hh * r.HD, r.HD, r.eps);
                rope_d(k + t * nk + hh * r.HD, t, &r, base, fscale, rope_freqs);
            }
        }
        free(qn), free(kn);
        const double scale = 1.0 / sqrt((double)r.HD);
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
                double sum = 0;
                for (int64_t j = 0; j <= t; j++) sum += (sc[j] = exp(sc[j] - mx));
                for (int64_t d = 0; d < r.HDV; d++) {
                    double acc = 0;
                    for (int64_t j = 0; j <= t; j++) acc += sc[j] / sum * v[j * nv + kvh * r.HDV + d];
                    att[t * r.H * r.HDV + hh * r.HDV + d] = acc;
                }
            }
        }
        double *wo = weightf(&r, "blk.%d.attn_output.weight", il);
        matmul_d(att, wo, o, n, r.H * r.HDV, E);
        double *pan = r.post_norms ? weightf(&r, "blk.%d.post_attention_norm.weight", il) : NULL;
        for (int64_t t = 0; t < n; t++) {
            if (pan) rmsnorm_d(o + t * E, pan, o + t * E, E, r.eps);
            for (int64_t i = 0; i < E; i++) x[t * E + i] += o[t * E + i];
        }
        double *fn = weightf(&r, "blk.%d.ffn_norm.weight", il);
        for (int64_t t = 0; t < n; t++) rmsnorm_d(x + t * E, fn, h + t * E, E, r.eps);
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

/* ---- synthesis ---- */

typedef struct rng {
    uint64_t s;
} rng;

static double gauss(rng *r) {
    double u[2];
    for (int i = 0; i < 2; i++) { /* splitmix64 → (0, 1) */
        uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        u[i] = ((double)(z >> 11) + 0.5) / 9007199254740992.0;
    }
    return sqrt(-2 * log(u[0])) * cos(2 * M_PI * u[1]);
}

void synth_default(synth_shape *s, const char *arch) {
    memset(s, 0, sizeof *s);
    s->arch = arch;
    s->n_embd = 64;
    s->n_head = 4;
    s->head_dim = 32;
    s->n_ff = 128;
    s->n_vocab = 300;
    s->mat_type = KLD_TYPE_F16;
    s->seed = 7;
    if (!strcmp(arch, "gemma3")) {
        s->n_layer = 7; /* layers 0-4 and 6 slide, layer 5 is global */
        s->n_head_kv = 1;
        s->sliding_window = 8;
        s->rope_base = 1e6;
        s->rope_linear = 8;
        s->tied = true;
    } else {
        s->n_layer = 2;
        s->n_head_kv = 2;
        s->rope_base = 1e6;
    }
}

typedef struct synth_tensors {
    kld_gguf_writer *w;
    rng r;
    const synth_shape *s;
    void *bufs[256];
    int n_bufs;
    bool ok;
} synth_tensors;

/* A [ne0, ne1] tensor (ne1 = 0: 1-D) of values mean + sd·N(0, 1). */
static void add(synth_tensors *st, const char *name, int64_t ne0, int64_t ne1, double mean, double sd) {
    if (!st->ok) return;
    if (st->s->drop_tensor && !strcmp(st->s->drop_tensor, name)) return;
    if (st->s->bad_shape_tensor && !strcmp(st->s->bad_shape_tensor, name)) {
        if (ne1) ne1++; /* one row too many */
        else ne0++;
    }
    const int64_t rows = ne1 ? ne1 : 1, n = ne0 * rows;
    float *f = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) f[i] = (float)(mean + sd * gauss(&st->r));
    uint32_t type = ne1 ? st->s->mat_type : KLD_TYPE_F32;
    const kld_type_info *ti = kld_type_info_get(type);
    uint64_t row_bytes = (uint64_t)(ne0 / ti->block_size) * (uint64_t)ti->type_size;
    void *data = malloc((size_t)(row_bytes * (uint64_t)rows));
    for (int64_t r = 0; r < rows; r++) ti->quantize_row(f + r * ne0, (uint8_t *)data + r * row_bytes, ne0);
    free(f);
    st->bufs[st->n_bufs++] = data;
    int64_t ne[2] = {ne0, rows};
    kld_error err = {0};
    if (kld_gguf_writer_add_tensor(st->w, name, type, ne1 ? 2 : 1, ne, data, row_bytes * (uint64_t)rows, &err) != KLD_OK) {
        fprintf(stderr, "synth: %s\n", err.msg);
        st->ok = false;
    }
}

bool synth_write_gguf(const synth_shape *s, const char *path) {
    synth_tensors st = {.w = kld_gguf_writer_create(), .r = {s->seed}, .s = s, .ok = true};
    kld_gguf_writer *w = st.w;
    const char *arch = s->arch_override ? s->arch_override : s->arch;
    char k[128];
#define KEY_U32(suffix, v) (snprintf(k, sizeof k, "%s." suffix, arch), kld_gguf_writer_set_u32(w, k, (uint32_t)(v)))
#define KEY_F32(suffix, v) (snprintf(k, sizeof k, "%s." suffix, arch), kld_gguf_writer_set_f32(w, k, (float)(v)))
    kld_gguf_writer_set_str(w, "general.architecture", arch);
    kld_gguf_writer_set_str(w, "general.name", "synth-test");
    KEY_U32("context_length", 4096);
    KEY_U32("embedding_length", s->n_embd);
    KEY_U32("block_count", s->n_layer);
    KEY_U32("feed_forward_length", s->n_ff);
    KEY_U32("attention.head_count", s->n_head);
    KEY_U32("attention.head_count_kv", s->n_head_kv);
    KEY_U32("attention.key_length", s->head_dim);
    KEY_U32("attention.value_length", s->head_dim);
    KEY_F32("attention.layer_norm_rms_epsilon", 1e-6);
    KEY_F32("rope.freq_base", s->rope_base);
    if (s->rope_linear > 0) {
        snprintf(k, sizeof k, "%s.rope.scaling.type", arch);
        kld_gguf_writer_set_str(w, k, "linear");
        KEY_F32("rope.scaling.factor", s->rope_linear);
    }
    if (s->sliding_window > 0) KEY_U32("attention.sliding_window", s->sliding_window);
#undef KEY_U32
#undef KEY_F32
    const bool gemma = !strcmp(s->arch, "gemma3"), llama = !strcmp(s->arch, "llama");
    const int64_t E = s->n_embd, nq = s->n_head * s->head_dim, nk = s->n_head_kv * s->head_dim;
    add(&st, "token_embd.weight", E, s->n_vocab, 0, 1);
    if (llama && s->llama3_factor > 0) {
        /* The factors as Meta's reference computes them (a divisor per frequency). */
        const int64_t half = s->head_dim / 2;
        float *f = malloc(sizeof(float) * (size_t)half);
        for (int64_t i = 0; i < half; i++) {
            double freq = pow(s->rope_base, -2.0 * (double)i / (double)s->head_dim);
            double wavelen = 2 * M_PI / freq;
            double lo = (double)s->llama3_orig_ctx / s->llama3_low, hi = (double)s->llama3_orig_ctx / s->llama3_high;
            double scaled_freq = freq;
            if (wavelen > lo) scaled_freq = freq / s->llama3_factor;
            else if (wavelen >= hi) {
                double sm = ((double)s->llama3_orig_ctx / wavelen - s->llama3_low) / (s->llama3_high - s->llama3_low);
                scaled_freq = (1 - sm) * freq / s->llama3_factor + sm * freq;
            }
            f[i] = (float)(freq / scaled_freq);
        }
        int64_t ne[1] = {half};
        kld_error e2 = {0};
        st.bufs[st.n_bufs++] = f;
        if (kld_gguf_writer_add_tensor(w, "rope_freqs.weight", KLD_TYPE_F32, 1, ne, f,
                                       (uint64_t)half * 4, &e2) != KLD_OK) {
            fprintf(stderr, "synth: %s\n", e2.msg);
            st.ok = false;
        }
    }
    add(&st, "output_norm.weight", E, 0, 1, 0.1);
    if (!s->tied) add(&st, "output.weight", E, s->n_vocab, 0, 2.0 / sqrt((double)E));
    for (int64_t il = 0; il < s->n_layer; il++) {
        char n[96];
#define T(suffix) (snprintf(n, sizeof n, "blk.%d." suffix, (int)il), n)
        add(&st, T("attn_norm.weight"), E, 0, 1, 0.1);
        add(&st, T("attn_q.weight"), E, nq, 0, 1 / sqrt((double)E));
        add(&st, T("attn_k.weight"), E, nk, 0, 1 / sqrt((double)E));
        add(&st, T("attn_v.weight"), E, nk, 0, 1 / sqrt((double)E));
        if (!llama) {
            add(&st, T("attn_q_norm.weight"), s->head_dim, 0, 1, 0.2);
            add(&st, T("attn_k_norm.weight"), s->head_dim, 0, 1, 0.2);
        }
        add(&st, T("attn_output.weight"), nq, E, 0, 1 / sqrt((double)nq));
        if (gemma) add(&st, T("post_attention_norm.weight"), E, 0, 1, 0.1);
        add(&st, T("ffn_norm.weight"), E, 0, 1, 0.1);
        add(&st, T("ffn_gate.weight"), E, s->n_ff, 0, 1 / sqrt((double)E));
        add(&st, T("ffn_up.weight"), E, s->n_ff, 0, 1 / sqrt((double)E));
        add(&st, T("ffn_down.weight"), s->n_ff, E, 0, 1 / sqrt((double)s->n_ff));
        if (gemma) add(&st, T("post_ffw_norm.weight"), E, 0, 1, 0.1);
#undef T
    }
    kld_error err = {0};
    bool ok = st.ok && kld_gguf_writer_write(w, path, &err) == KLD_OK;
    if (st.ok && !ok) fprintf(stderr, "synth: %s\n", err.msg);
    for (int i = 0; i < st.n_bufs; i++) free(st.bufs[i]);
    kld_gguf_writer_free(w);
    return ok;
}

/* ---- Hugging Face copy ---- */

static bool hf_name(const synth_shape *s, const char *gguf, char *out, size_t cap) {
    const bool gemma = !strcmp(s->arch, "gemma3");
    if (!strcmp(gguf, "token_embd.weight")) return snprintf(out, cap, "model.embed_tokens.weight"), true;
    if (!strcmp(gguf, "output_norm.weight")) return snprintf(out, cap, "model.norm.weight"), true;
    if (!strcmp(gguf, "output.weight")) return snprintf(out, cap, "lm_head.weight"), true;
    int il = 0, used = 0;
    if (sscanf(gguf, "blk.%d.%n", &il, &used) != 1 || !used) return false;
    static const char *const map[][2] = {
        {"attn_norm.weight", "input_layernorm.weight"},
        {"attn_q.weight", "self_attn.q_proj.weight"},
        {"attn_k.weight", "self_attn.k_proj.weight"},
        {"attn_v.weight", "self_attn.v_proj.weight"},
        {"attn_output.weight", "self_attn.o_proj.weight"},
        {"attn_q_norm.weight", "self_attn.q_norm.weight"},
        {"attn_k_norm.weight", "self_attn.k_norm.weight"},
        {"ffn_gate.weight", "mlp.gate_proj.weight"},
        {"ffn_up.weight", "mlp.up_proj.weight"},
        {"ffn_down.weight", "mlp.down_proj.weight"},
        {"post_attention_norm.weight", "post_attention_layernorm.weight"},
        {"post_ffw_norm.weight", "post_feedforward_layernorm.weight"},
    };
    const char *rest = gguf + used, *hf = NULL;
    if (!strcmp(rest, "ffn_norm.weight"))
        hf = gemma ? "pre_feedforward_layernorm.weight" : "post_attention_layernorm.weight";
    for (size_t i = 0; !hf && i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(map[i][0], rest)) hf = map[i][1];
    if (!hf) return false;
    snprintf(out, cap, "model.layers.%d.%s", il, hf);
    return true;
}

bool synth_write_hf(const synth_shape *s, const char *gguf_path, const char *dir) {
    kld_error err = {0};
    kld_gguf *g = NULL;
    if (kld_gguf_open(gguf_path, &g, &err) != KLD_OK) {
        fprintf(stderr, "synth_write_hf: %s\n", err.msg);
        return false;
    }
    const bool gemma = !strcmp(s->arch, "gemma3"), llama = !strcmp(s->arch, "llama");
    char *header = malloc(1 << 20);
    size_t hl = (size_t)snprintf(header, 1 << 20, "{");
    uint64_t off = 0;
    float **data = calloc((size_t)g->n_tensors, sizeof *data);
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const kld_tensor *t = &g->tensors[i];
        char name[128];
        if (!hf_name(s, t->name, name, sizeof name)) continue;
        int64_t n = kld_tensor_nelements(t);
        data[i] = malloc(sizeof(float) * (size_t)n);
        kld_type_info_get(t->type)->to_float_ref(t->data, data[i], n);
        if (gemma && strstr(t->name, "norm"))
            for (int64_t j = 0; j < n; j++) data[i][j] -= 1.0f; /* HF Gemma stores w - 1 */
        if (llama && (strstr(t->name, "attn_q.weight") || strstr(t->name, "attn_k.weight"))) {
            /* GGUF row h·hd + 2i + j holds HF row h·hd + j·hd/2 + i. */
            const int64_t hd = s->head_dim, rows = t->ne[1], cols = t->ne[0];
            float *hf = malloc(sizeof(float) * (size_t)n);
            for (int64_t r0 = 0; r0 < rows; r0++) {
                int64_t h = r0 / hd, within = r0 % hd, ii = within / 2, jj = within % 2;
                memcpy(hf + (h * hd + jj * hd / 2 + ii) * cols, data[i] + r0 * cols, sizeof(float) * (size_t)cols);
            }
            free(data[i]);
            data[i] = hf;
        }
        uint64_t bytes = (uint64_t)n * 4;
        if (t->n_dims == 1)
            hl += (size_t)snprintf(header + hl, (1 << 20) - hl, "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%" PRId64 "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}",
                                   hl > 1 ? "," : "", name, t->ne[0], off, off + bytes);
        else
            hl += (size_t)snprintf(header + hl, (1 << 20) - hl, "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%" PRId64 ",%" PRId64 "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}",
                                   hl > 1 ? "," : "", name, t->ne[1], t->ne[0], off, off + bytes);
        off += bytes;
    }
    hl += (size_t)snprintf(header + hl, (1 << 20) - hl, "}");
    while (hl % 8) header[hl++] = ' ';
    char path[512];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    FILE *f = fopen(path, "wb");
    bool ok = f != NULL;
    uint64_t hl64 = hl;
    if (ok) ok = fwrite(&hl64, 8, 1, f) == 1 && fwrite(header, 1, hl, f) == hl;
    for (uint64_t i = 0; ok && i < g->n_tensors; i++)
        if (data[i]) ok = fwrite(data[i], 4, (size_t)kld_tensor_nelements(&g->tensors[i]), f) ==
                          (size_t)kld_tensor_nelements(&g->tensors[i]);
    if (f && fclose(f) != 0) ok = false;
    for (uint64_t i = 0; i < g->n_tensors; i++) free(data[i]);
    free(data);
    free(header);
    kld_gguf_close(g);
    snprintf(path, sizeof path, "%s/config.json", dir);
    f = ok ? fopen(path, "w") : NULL;
    if (!f) return false;
    fprintf(f, "{\"model_type\": \"%s\", \"hidden_size\": %" PRId64 ", \"num_hidden_layers\": %" PRId64
               ", \"intermediate_size\": %" PRId64 ", \"num_attention_heads\": %" PRId64
               ", \"num_key_value_heads\": %" PRId64 ", \"head_dim\": %" PRId64
               ", \"vocab_size\": %" PRId64 ", \"max_position_embeddings\": 4096, \"rms_norm_eps\": 1e-06"
               ", \"rope_theta\": %.1f, \"tie_word_embeddings\": %s",
            gemma ? "gemma3_text" : s->arch, s->n_embd, s->n_layer, s->n_ff, s->n_head, s->n_head_kv,
            s->head_dim, s->n_vocab, s->rope_base, s->tied ? "true" : "false");
    if (gemma)
        fprintf(f, ", \"hidden_activation\": \"gelu_pytorch_tanh\", \"query_pre_attn_scalar\": %" PRId64
                   ", \"sliding_window\": %" PRId64 ", \"sliding_window_pattern\": 6"
                   ", \"rope_local_base_freq\": 10000.0, \"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": %.1f}"
                   ", \"final_logit_softcapping\": null, \"attn_logit_softcapping\": null}\n",
                s->head_dim, s->sliding_window, s->rope_linear);
    else if (llama && s->llama3_factor > 0)
        fprintf(f, ", \"hidden_act\": \"silu\", \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": %.17g"
                   ", \"low_freq_factor\": %.17g, \"high_freq_factor\": %.17g"
                   ", \"original_max_position_embeddings\": %" PRId64 "}}\n",
                s->llama3_factor, s->llama3_low, s->llama3_high, s->llama3_orig_ctx);
    else
        fprintf(f, ", \"hidden_act\": \"silu\", \"use_sliding_window\": false, \"sliding_window\": null"
                   ", \"rope_scaling\": null}\n");
    return fclose(f) == 0;
}

/* ---- comparing logit rows ---- */

int64_t tf_argmax(const float *x, int64_t n) {
    int64_t b = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

double tf_lse(const float *x, int64_t n) {
    double mx = x[tf_argmax(x, n)], s = 0;
    for (int64_t i = 0; i < n; i++) s += exp((double)x[i] - mx);
    return mx + log(s);
}

tf_cmp tf_compare(const float *ref, const float *b, int64_t rows, int64_t nv) {
    tf_cmp c = {0, 0, 0};
    for (int64_t r = 0; r < rows; r++) {
        const float *x = ref + r * nv, *y = b + r * nv;
        double lx = tf_lse(x, nv), ly = tf_lse(y, nv), k = 0;
        for (int64_t i = 0; i < nv; i++) {
            double d = fabs((double)x[i] - (double)y[i]);
            if (!(d <= c.max_abs)) c.max_abs = d; /* NaN propagates */
            double a = (double)x[i] - lx;
            k += exp(a) * (a - ((double)y[i] - ly));
        }
        c.mean_kld += k / (double)rows;
        c.same_argmax += tf_argmax(x, nv) == tf_argmax(y, nv);
    }
    return c;
}

float *tf_engine_logits(const char *path, const int32_t *ids, int64_t n, int64_t chunk,
                        int threads, int64_t *n_vocab) {
    kld_error err = {0};
    kld_model *m = NULL;
    kld_status st = kld_model_open(path, NULL, &m, &err);
    CHECK_OK(st, err);
    if (st != KLD_OK) return NULL;
    *n_vocab = kld_model_hparams(m)->n_vocab;
    kld_session *s = NULL;
    st = kld_session_create(m, n + 8, chunk, threads, &s, &err);
    CHECK_OK(st, err);
    float *logits = malloc((size_t)(n * *n_vocab) * sizeof(float));
    for (int64_t i = 0; st == KLD_OK && i < n; i += chunk) {
        int64_t c = n - i < chunk ? n - i : chunk;
        st = kld_session_eval(s, ids + i, c, logits + i * *n_vocab, &err);
        CHECK_OK(st, err);
    }
    kld_session_free(s);
    kld_model_close(m);
    return logits;
}
