/* model.c — kld_model_open/close: source → hyper-parameters → weight table,
 * plus float32 copies of norms and biases (tiny; converted once so the
 * forward pass never dequantizes a vector). */
#include "engine/internal.h"
#include "engine/lora.h"

#include <inttypes.h>
#include <math.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

/* Elements of the vectors copied for one tensor (0 when absent). */
static uint64_t vec_len(const kld_tensor *t) { return t ? (uint64_t)kld_tensor_nelements(t) : 0; }

typedef struct vec_loader {
    const kld_model *m;
    float *next;
    kld_error *err;
} vec_loader;

static kld_status load_vec(vec_loader *vl, const kld_tensor *t, float offset, const float **out) {
    *out = NULL;
    if (!t) return KLD_OK;
    const kld_type_info *ti = kld_type_info_get(t->type);
    int64_t n = kld_tensor_nelements(t);
    if (!ti || !ti->to_float_ref || n % ti->block_size != 0)
        return kld_fail(vl->err, KLD_ERR_UNSUPPORTED, "%s: tensor '%s': cannot convert type to "
                        "float32", vl->m->src->path, t->name);
    float *dst = vl->next;
    kld_type_kernels_of(ti)->to_float(t->data, dst, n);
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(dst[i]))
            return kld_fail(vl->err, KLD_ERR_FORMAT, "%s: tensor '%s'[%" PRId64 "] is not finite",
                            vl->m->src->path, t->name, i);
        if (offset != 0) dst[i] += offset;
    }
    vl->next += (n + 15) & ~(int64_t)15; /* keep every vector 64-byte aligned */
    *out = dst;
    return KLD_OK;
}

static uint64_t padded(const kld_tensor *t) { return (vec_len(t) + 15) & ~(uint64_t)15; }

static uint64_t tensor_bytes(const kld_tensor *t) { return t ? t->nbytes : 0; }

static kld_status load_vectors(kld_model *m, kld_error *err) {
    const kld_hparams *hp = &m->hp;
    const kld_weights *w = &m->w;
    uint64_t total = padded(w->output_norm) + padded(w->ple_proj_norm);
    m->weights_bytes = tensor_bytes(w->token_embd) + tensor_bytes(w->output_norm) +
                       (hp->tied_output ? 0 : tensor_bytes(w->output)) + tensor_bytes(w->ple_token_embd) +
                       tensor_bytes(w->ple_model_proj) + tensor_bytes(w->ple_proj_norm);
    for (int64_t il = 0; il < hp->n_layer; il++) {
        const kld_layer_weights *L = &w->layers[il];
        const kld_tensor *vecs[] = {L->attn_norm, L->ffn_norm, L->attn_post_norm,
                                    L->ffn_post_norm, L->attn_q_norm, L->attn_k_norm, L->bq, L->bk,
                                    L->bv, L->bqkv, L->bo, L->b_gate, L->b_up, L->b_down,
                                    L->shortconv_conv, L->dn_conv, L->dn_dt, L->dn_a, L->dn_norm,
                                    L->attn_sinks, L->moe.gate_inp_b, L->moe.gate_exps_b,
                                    L->moe.up_exps_b, L->moe.down_exps_b, L->moe.exp_probs_b,
                                    L->attn_q_a_norm, L->attn_kv_a_norm,
                                    L->out_scale, L->ple_post_norm, L->moe.gate_inp_scale,
                                    L->moe.down_exps_scale, L->moe.pre_norm_2, L->moe.post_norm_1,
                                    L->moe.post_norm_2};
        const kld_tensor *mats[] = {L->attn_q, L->attn_k, L->attn_v, L->attn_qkv, L->attn_output,
                                    L->ffn_gate, L->ffn_up, L->ffn_down, L->shortconv_in_proj,
                                    L->shortconv_out_proj, L->dn_qkv, L->dn_gate, L->dn_ba, L->dn_out,
                                    L->dn_beta, L->dn_alpha, L->attn_q_a, L->attn_q_b,
                                    L->attn_kv_a_mqa, L->attn_kv_b, L->ple_inp_gate, L->ple_proj};
        for (size_t i = 0; i < sizeof vecs / sizeof vecs[0]; i++) {
            total += padded(vecs[i]);
            m->weights_bytes += tensor_bytes(vecs[i]);
        }
        for (size_t i = 0; i < sizeof mats / sizeof mats[0]; i++)
            m->weights_bytes += tensor_bytes(mats[i]);
        const kld_moe_weights *X = &L->moe;
        const kld_tensor *moe[] = {X->gate_inp, X->gate_inp_shexp, X->gate_shexp, X->up_shexp,
                                   X->down_shexp};
        for (size_t i = 0; i < sizeof moe / sizeof moe[0]; i++)
            m->weights_bytes += tensor_bytes(moe[i]);
        for (int64_t e = 0; X->gate && e < hp->n_expert; e++) /* slices of merged tensors too */
            m->weights_bytes += tensor_bytes(X->gate[e]) + tensor_bytes(X->up[e]) +
                                tensor_bytes(X->down[e]);
    }
    m->vec_bytes = total * sizeof(float);
    m->vec_store = aligned_alloc(64, (size_t)(total ? total : 16) * sizeof(float));
    m->lv = calloc((size_t)hp->n_layer, sizeof *m->lv);
    if (!m->vec_store || !m->lv) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", m->src->path);
    vec_loader vl = {m, m->vec_store, err};
    const float off = (float)hp->norm_weight_offset;
    kld_status s = load_vec(&vl, w->output_norm, off, &m->output_norm);
    if (s == KLD_OK) s = load_vec(&vl, w->ple_proj_norm, off, &m->ple_proj_norm);
    for (int64_t il = 0; s == KLD_OK && il < hp->n_layer; il++) {
        const int64_t nq = hp->n_head * kld_hp_head_dim(hp, il), nk = kld_hp_n_head_kv(hp, il) * kld_hp_head_dim(hp, il);
        const kld_layer_weights *L = &w->layers[il];
        kld_layer_vecs *v = &m->lv[il];
        const float *bqkv = NULL, *bup = NULL;
        if ((s = load_vec(&vl, L->attn_norm, off, &v->attn_norm)) ||
            (s = load_vec(&vl, L->ffn_norm, off, &v->ffn_norm)) ||
            (s = load_vec(&vl, L->attn_post_norm, off, &v->attn_post_norm)) ||
            (s = load_vec(&vl, L->ffn_post_norm, off, &v->ffn_post_norm)) ||
            (s = load_vec(&vl, L->attn_q_norm, off, &v->q_norm)) ||
            (s = load_vec(&vl, L->attn_k_norm, off, &v->k_norm)) ||
            (s = load_vec(&vl, L->bq, 0, &v->bq)) || (s = load_vec(&vl, L->bk, 0, &v->bk)) ||
            (s = load_vec(&vl, L->bv, 0, &v->bv)) || (s = load_vec(&vl, L->bqkv, 0, &bqkv)) ||
            (s = load_vec(&vl, L->bo, 0, &v->bo)) || (s = load_vec(&vl, L->b_gate, 0, &v->b_gate)) ||
            (s = load_vec(&vl, L->b_up, 0, &bup)) || (s = load_vec(&vl, L->b_down, 0, &v->b_down)) ||
            (s = load_vec(&vl, L->shortconv_conv, 0, &v->conv)) ||
            (s = load_vec(&vl, L->dn_conv, 0, &v->dn_conv)) ||
            (s = load_vec(&vl, L->dn_dt, 0, &v->dn_dt)) || (s = load_vec(&vl, L->dn_a, 0, &v->dn_a)) ||
            (s = load_vec(&vl, L->dn_norm, 0, &v->dn_norm)) ||
            (s = load_vec(&vl, L->attn_sinks, 0, &v->sinks)) ||
            (s = load_vec(&vl, L->moe.gate_inp_b, 0, &v->moe_gate_inp_b)) ||
            (s = load_vec(&vl, L->moe.gate_exps_b, 0, &v->moe_gate_b)) ||
            (s = load_vec(&vl, L->moe.up_exps_b, 0, &v->moe_up_b)) ||
            (s = load_vec(&vl, L->moe.down_exps_b, 0, &v->moe_down_b)) ||
            (s = load_vec(&vl, L->moe.exp_probs_b, 0, &v->moe_probs_b)) ||
            (s = load_vec(&vl, L->attn_q_a_norm, off, &v->q_a_norm)) ||
            (s = load_vec(&vl, L->attn_kv_a_norm, off, &v->kv_a_norm)) ||
            (s = load_vec(&vl, L->out_scale, 0, &v->out_scale)) ||
            (s = load_vec(&vl, L->ple_post_norm, off, &v->ple_post_norm)) ||
            (s = load_vec(&vl, L->moe.gate_inp_scale, 0, &v->moe_inp_scale)) ||
            (s = load_vec(&vl, L->moe.down_exps_scale, 0, &v->moe_down_scale)) ||
            (s = load_vec(&vl, L->moe.pre_norm_2, off, &v->moe_pre_norm_2)) ||
            (s = load_vec(&vl, L->moe.post_norm_1, off, &v->moe_post_norm_1)) ||
            (s = load_vec(&vl, L->moe.post_norm_2, off, &v->moe_post_norm_2)))
            break;
        if (bqkv) { /* fused [q; k; v] bias */
            v->bq = bqkv;
            v->bk = bqkv + nq;
            v->bv = bqkv + nq + nk;
        }
        if (bup && hp->sw.fused_gate_up) { /* fused [gate; up] bias */
            v->b_gate = bup;
            v->b_up = bup + kld_hp_n_ff(hp, il);
        } else {
            v->b_up = bup;
        }
    }
    return s;
}

/* MODEL@POLICY: a path that does not exist whose part before the last '@'
 * does; *policy points after the '@' and base holds the model path (no
 * allocation: a path longer than PATH_MAX names no file anyway). */
static bool split_policy(const char *path, char base[PATH_MAX], const char **policy) {
    struct stat sb;
    *policy = NULL;
    const char *at = strrchr(path, '@');
    if (!at || !at[1] || stat(path, &sb) == 0 || (size_t)(at - path) >= PATH_MAX) return false;
    memcpy(base, path, (size_t)(at - path));
    base[at - path] = '\0';
    if (stat(base, &sb) != 0) return false;
    *policy = at + 1;
    return true;
}

static bool exists(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0;
}

/* MODEL[@POLICY]+ADAPTER[:SCALE]: a path that does not exist, cut at the
 * last '+' whose left part is a model (or MODEL@POLICY) and whose right
 * part (without :SCALE) exists. *model is the left part (owned), *adapter
 * points at the right part. */
kld_status kld_model_split_adapter(const char *path, char **model, const char **adapter,
                                   kld_error *err) {
    *model = NULL;
    *adapter = NULL;
    if (exists(path)) return KLD_OK;
    for (const char *plus = strrchr(path, '+'); plus; ) {
        char apath[KLD_LORA_PATH_MAX];
        float scale;
        kld_error e2 = {0};
        char *left = kld_strndup(path, (size_t)(plus - path));
        if (!left) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", path);
        const char *pol;
        char pbase[PATH_MAX];
        const bool model_ok = exists(left) || split_policy(left, pbase, &pol);
        if (model_ok && kld_lora_spec_split(plus + 1, apath, sizeof apath, &scale, &e2) == KLD_OK &&
            exists(apath)) {
            *model = left;
            *adapter = plus + 1;
            return KLD_OK;
        }
        free(left);
        const char *prev = plus;
        plus = NULL;
        for (const char *q = path; q < prev; q++)
            if (*q == '+') plus = q;
    }
    const char *plus = strchr(path, '+'), *at = plus ? strchr(plus, '@') : NULL;
    if (at) { /* MODEL+ADAPTER@POLICY: say which order is defined */
        char *left = kld_strndup(path, (size_t)(plus - path));
        const bool model_ok = left && exists(left);
        free(left);
        if (model_ok)
            return kld_fail(err, KLD_ERR_ARG, "%s: write the policy before the adapter: "
                            "MODEL@POLICY+ADAPTER[:SCALE] (the base is quantized, the adapter "
                            "applied on top)", path);
    }
    /* a model (or MODEL@POLICY) before the last '+' that has one: the part
     * after it was meant as the adapter, so say that it is missing rather
     * than that the whole spec is */
    const char *last = strrchr(path, '+');
    char *left = last ? kld_strndup(path, (size_t)(last - path)) : NULL;
    if (last && !left) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", path);
    const char *pol;
    char pbase[PATH_MAX];
    const bool model_ok = left && (exists(left) || split_policy(left, pbase, &pol));
    free(left);
    if (model_ok) {
        char apath[KLD_LORA_PATH_MAX];
        float scale;
        kld_status s = kld_lora_spec_split(last + 1, apath, sizeof apath, &scale, err);
        if (s) return kld_error_prefix(err, "%s", path), s;
        return kld_fail(err, KLD_ERR_IO, "%s: adapter %s: no such file or folder "
                        "(MODEL[@POLICY]+ADAPTER[:SCALE], SCALE a number)", path, apath);
    }
    /* MODEL+A+B: the left part is itself a model with an adapter */
    if (last) {
        char *inner = kld_strndup(path, (size_t)(last - path)), *m2 = NULL;
        const char *a2 = NULL;
        kld_error e2 = {0};
        const bool two = inner && kld_model_split_adapter(inner, &m2, &a2, &e2) == KLD_OK && a2;
        free(inner), free(m2);
        if (two)
            return kld_fail(err, KLD_ERR_ARG, "%s: one +ADAPTER per model (kl, dump and cap take a "
                            "second as --lever lora=ADAPTER[:SCALE])", path);
    }
    return KLD_OK;
}

kld_status kld_model_attach_adapter(kld_model *m, const char *adapter, kld_error *err) {
    if (m->lora) return kld_fail(err, KLD_ERR_ARG, "%s: the model has an adapter already", m->src->path);
    char apath[KLD_LORA_PATH_MAX];
    float scale;
    kld_status s = kld_lora_spec_split(adapter, apath, sizeof apath, &scale, err);
    if (!s) s = kld_lora_open(m, apath, scale, &m->lora, err);
    if (!s && !(m->lora->spec = kld_strdup(adapter)))
        s = kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", adapter);
    return s;
}

kld_status kld_model_open(const char *path, const kld_model_opts *opts, kld_model **out,
                          kld_error *err) {
    *out = NULL;
    char *with_policy = NULL;
    const char *adapter = NULL;
    kld_status s = kld_model_split_adapter(path, &with_policy, &adapter, err);
    if (s) return s;
    if (with_policy) path = with_policy;
    const char *policy = opts ? opts->policy : NULL;
    const char *at_policy;
    char base_buf[PATH_MAX];
    const char *base = split_policy(path, base_buf, &at_policy) ? base_buf : NULL;
    if (at_policy && !policy) policy = at_policy;
    kld_model *m = calloc(1, sizeof *m);
    if (!m) {
        kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", path); /* path may be with_policy */
        free(with_policy);
        return KLD_ERR_NOMEM;
    }
    s = kld_source_open(base ? base : path, &m->src, err);
    if (s == KLD_OK) s = kld_hparams_read(m->src, &m->hp, err);
    if (s == KLD_OK) s = kld_weights_bind(m->src, &m->hp, &m->w, err);
    if (s == KLD_OK && policy)
        s = kld_model_apply_policy(m, policy, opts ? opts->imatrix : NULL,
                                   opts ? opts->n_threads : 0, policy == at_policy, err);
    if (s == KLD_OK) s = load_vectors(m, err);
    if (s == KLD_OK && adapter) { /* after the policy: it binds the final weights */
        s = kld_model_attach_adapter(m, adapter, err);
        if (s) kld_error_prefix(err, "%s+%s", path, adapter);
    }
    free(with_policy);
    if (s != KLD_OK) {
        kld_model_close(m);
        return s;
    }
    *out = m;
    return KLD_OK;
}

void kld_model_close(kld_model *m) {
    if (!m) return;
    if (m->attached_free) m->attached_free(m->attached);
    free(m->lv);
    free(m->vec_store);
    kld_model_quant_free(m->quant);
    kld_lora_free(m->lora);
    kld_model_repacked_free(m->repacked);
    kld_weights_free(&m->w);
    if (m->src) kld_source_close(m->src);
    free(m);
}

const kld_hparams *kld_model_hparams(const kld_model *m) { return &m->hp; }

void *kld_model_attached(const kld_model *m) { return m->attached; }

const kld_tensor *kld_model_head(const kld_model *m, bool *tied) {
    if (tied) *tied = m->w.output == m->w.token_embd;
    return m->w.output;
}

void kld_model_attach(kld_model *m, void *p, void (*free_fn)(void *)) {
    if (m->attached_free) m->attached_free(m->attached);
    m->attached = p;
    m->attached_free = free_fn;
}
const kld_source *kld_model_source(const kld_model *m) { return m->src; }
const char *kld_model_adapter(const kld_model *m) { return m->lora ? m->lora->spec : NULL; }
const char *kld_model_adapter_file(const kld_model *m) { return m->lora ? m->lora->file : NULL; }
