/* model_policy.c — quantize-on-load (MODEL@POLICY): the bound weight
 * matrices are listed under their GGUF names (whatever the source format),
 * the policy's plan is made over them, and every tensor the plan converts
 * is replaced in the weight table by an owned copy at the new type. */
#include "engine/internal.h"
#include "quant/quant.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

struct kld_model_quant {
    char *policy;
    size_t n;
    kld_tensor *copies;        /* struct copies of the bound tensors (plan input) */
    char **names;              /* their GGUF names */
    const kld_tensor ***slots; /* where each is bound in m->w */
    kld_tensor *owned;         /* converted tensors (n entries; data NULL when unused) */
    kld_quant_plan plan;
};

void kld_model_quant_free(struct kld_model_quant *q) {
    if (!q) return;
    for (size_t i = 0; i < q->n; i++) {
        free(q->names ? q->names[i] : NULL);
        if (q->owned) free((void *)q->owned[i].data);
    }
    kld_quant_plan_free(&q->plan);
    free(q->copies);
    free(q->names);
    free(q->slots);
    free(q->owned);
    free(q->policy);
    free(q);
}

/* Calls fn for every bound matrix and vector slot, named as in a GGUF file
 * (the output once: it is token_embd's slot when tied). */
typedef void (*slot_fn)(void *ctx, const kld_tensor **slot, const char *name);

/* The MoE tensors of layer il: merged 3-D experts as wholes (llama-quantize
 * quantizes them row by row, i.e. slice by slice; kld_weights_moe_refresh
 * re-derives the slices afterwards), per-expert ones under their own names. */
static void walk_moe(int64_t il, kld_moe_weights *X, int64_t n_expert, slot_fn fn, void *ctx) {
    struct {
        const kld_tensor **slot;
        kld_tensor_id id;
        const char *kind;
    } t[] = {{&X->gate_inp, KLD_T_FFN_GATE_INP, "weight"}, {&X->gate_exps, KLD_T_FFN_GATE_EXPS, "weight"},
             {&X->up_exps, KLD_T_FFN_UP_EXPS, "weight"}, {&X->down_exps, KLD_T_FFN_DOWN_EXPS, "weight"},
             {&X->gate_inp_shexp, KLD_T_FFN_GATE_INP_SHEXP, "weight"},
             {&X->gate_shexp, KLD_T_FFN_GATE_SHEXP, "weight"}, {&X->up_shexp, KLD_T_FFN_UP_SHEXP, "weight"},
             {&X->down_shexp, KLD_T_FFN_DOWN_SHEXP, "weight"}};
    char name[96];
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        kld_tn(name, sizeof name, t[i].id, il, 0, t[i].kind);
        fn(ctx, t[i].slot, name);
    }
    const kld_tensor *merged[3] = {X->gate_exps, X->up_exps, X->down_exps};
    const kld_tensor **per[3] = {X->gate, X->up, X->down};
    static const kld_tensor_id per_id[3] = {KLD_T_FFN_GATE_EXP, KLD_T_FFN_UP_EXP, KLD_T_FFN_DOWN_EXP};
    for (int k = 0; k < 3; k++)
        for (int64_t e = 0; !merged[k] && per[k] && e < n_expert; e++) {
            kld_tn(name, sizeof name, per_id[k], il, e, "weight");
            fn(ctx, &per[k][e], name);
        }
}

static void walk_weights(kld_model *m, slot_fn fn, void *ctx) {
    kld_weights *w = &m->w;
    char name[96];
    fn(ctx, &w->token_embd, kld_tn(name, sizeof name, KLD_T_TOKEN_EMBD, 0, 0, "weight"));
    fn(ctx, &w->output_norm, kld_tn(name, sizeof name, m->hp.hy.output_norm, 0, 0, "weight"));
    if (!m->hp.tied_output) fn(ctx, &w->output, kld_tn(name, sizeof name, KLD_T_OUTPUT, 0, 0, "weight"));
    fn(ctx, &w->ple_token_embd, kld_tn(name, sizeof name, KLD_T_PER_LAYER_TOKEN_EMBD, 0, 0, "weight"));
    fn(ctx, &w->ple_model_proj, kld_tn(name, sizeof name, KLD_T_PER_LAYER_MODEL_PROJ, 0, 0, "weight"));
    fn(ctx, &w->ple_proj_norm, kld_tn(name, sizeof name, KLD_T_PER_LAYER_PROJ_NORM, 0, 0, "weight"));
    for (int64_t il = 0; il < w->n_layer; il++) {
        kld_layer_weights *L = &w->layers[il];
        struct {
            const kld_tensor **slot;
            kld_tensor_id id;
            const char *kind;
        } t[] = {{&L->attn_norm, KLD_T_ATTN_NORM, "weight"}, {&L->attn_q, KLD_T_ATTN_Q, "weight"},
                 {&L->attn_k, KLD_T_ATTN_K, "weight"}, {&L->attn_v, KLD_T_ATTN_V, "weight"},
                 {&L->attn_qkv, KLD_T_ATTN_QKV, "weight"}, {&L->attn_output, KLD_T_ATTN_OUT, "weight"},
                 {&L->ffn_norm, m->hp.hy.ffn_norm, "weight"}, {&L->ffn_gate, KLD_T_FFN_GATE, "weight"},
                 {&L->ffn_up, KLD_T_FFN_UP, "weight"}, {&L->ffn_down, KLD_T_FFN_DOWN, "weight"},
                 {&L->shortconv_in_proj, KLD_T_SHORTCONV_INPROJ, "weight"},
                 {&L->shortconv_out_proj, KLD_T_SHORTCONV_OUTPROJ, "weight"},
                 {&L->dn_qkv, KLD_T_ATTN_QKV, "weight"}, {&L->dn_gate, KLD_T_ATTN_GATE, "weight"},
                 {&L->dn_ba, KLD_T_SSM_BETA_ALPHA, "weight"}, {&L->dn_out, KLD_T_SSM_OUT, "weight"},
                 {&L->dn_beta, KLD_T_SSM_BETA, "weight"}, {&L->dn_alpha, KLD_T_SSM_ALPHA, "weight"},
                 {&L->attn_q_a, KLD_T_ATTN_Q_A, "weight"}, {&L->attn_q_a_norm, KLD_T_ATTN_Q_A_NORM, "weight"},
                 {&L->attn_q_b, KLD_T_ATTN_Q_B, "weight"}, {&L->attn_kv_a_mqa, KLD_T_ATTN_KV_A_MQA, "weight"},
                 {&L->attn_kv_a_norm, KLD_T_ATTN_KV_A_NORM, "weight"}, {&L->attn_kv_b, KLD_T_ATTN_KV_B, "weight"},
                 {&L->ple_inp_gate, KLD_T_PER_LAYER_INP_GATE, "weight"}, {&L->ple_proj, KLD_T_PER_LAYER_PROJ, "weight"},
                 {&L->ple_post_norm, KLD_T_PER_LAYER_POST_NORM, "weight"}};
        for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
            kld_tn(name, sizeof name, t[i].id, il, 0, t[i].kind);
            fn(ctx, t[i].slot, name);
        }
        walk_moe(il, &L->moe, w->n_expert, fn, ctx);
    }
}

typedef struct lister {
    struct kld_model_quant *q;
    size_t cap;
    bool oom;
} lister;

static void add(void *ctx, const kld_tensor **slot, const char *name) {
    lister *l = ctx;
    if (!*slot || l->oom) return;
    struct kld_model_quant *q = l->q;
    if (q->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        kld_tensor *c = realloc(q->copies, cap * sizeof *c);
        if (c) q->copies = c;
        char **nm = realloc(q->names, cap * sizeof *nm);
        if (nm) q->names = nm;
        const kld_tensor ***sl = realloc(q->slots, cap * sizeof *sl);
        if (sl) q->slots = sl;
        if (!c || !nm || !sl) {
            l->oom = true;
            return;
        }
        l->cap = cap;
    }
    q->copies[q->n] = **slot;
    q->names[q->n] = kld_strdup(name);
    q->slots[q->n] = slot;
    if (!q->names[q->n]) l->oom = true;
    else q->n++;
}

typedef struct namer {
    const kld_tensor *t;
    char *buf;
    size_t cap;
    bool found;
} namer;

static void find_name(void *ctx, const kld_tensor **slot, const char *name) {
    namer *n = ctx;
    if (!n->found && *slot == n->t) {
        snprintf(n->buf, n->cap, "%s", name);
        n->found = true;
    }
}

const char *kld_model_weight_name(const kld_model *m, const kld_tensor *t, char *buf, size_t cap) {
    namer n = {t, buf, cap, false};
    walk_weights((kld_model *)m, find_name, &n); /* find_name writes nothing into m */
    return n.found ? buf : NULL;
}

typedef struct each_ctx {
    kld_weight_fn fn;
    void *ctx;
} each_ctx;

static void each_bound(void *ctx, const kld_tensor **slot, const char *name) {
    const each_ctx *e = ctx;
    if (*slot) e->fn(e->ctx, *slot, name);
}

void kld_model_each_weight(const kld_model *m, kld_weight_fn fn, void *ctx) {
    each_ctx e = {fn, ctx};
    walk_weights((kld_model *)m, each_bound, &e); /* each_bound writes nothing into m */
}

kld_status kld_model_apply_policy(kld_model *m, const char *policy, const char *imatrix,
                                  int n_threads, bool announce, kld_error *err) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    struct kld_model_quant *q = calloc(1, sizeof *q);
    if (!q || !(q->policy = kld_strdup(policy))) {
        free(q);
        return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", m->src->path);
    }
    m->quant = q;
    lister l = {q, 0, false};
    walk_weights(m, add, &l);
    if (l.oom) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", m->src->path);
    kld_policy *pol = NULL;
    kld_imatrix *im = NULL;
    kld_status s = kld_policy_parse(policy, &pol, err);
    const char *im_path = imatrix ? imatrix : pol ? pol->imatrix_path : NULL;
    if (!s && im_path) s = kld_imatrix_read(im_path, &im, err);
    if (!s) s = kld_quant_plan_make(pol, &m->hp, q->copies, (const char *const *)q->names, q->n,
                                    im, &q->plan, err);
    if (!s && !(q->owned = calloc(q->n ? q->n : 1, sizeof *q->owned)))
        s = kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", m->src->path);
    size_t n_conv = 0;
    for (size_t k = 0; !s && k < q->plan.n; k++) {
        const kld_quant_item *it = &q->plan.items[k];
        if (!it->convert) continue;
        size_t i = (size_t)(it->t - q->copies);
        kld_tensor *o = &q->owned[i];
        void *data = aligned_alloc(64, (it->dst_bytes + 63) & ~(uint64_t)63);
        if (!data) {
            s = kld_fail(err, KLD_ERR_NOMEM, "%s: tensor '%s': out of memory quantizing on load",
                         m->src->path, it->name);
            break;
        }
        *o = *it->t; /* only now: an owned tensor's data is freed with the model */
        o->data = data;
        o->type = it->dst_type;
        o->nbytes = it->dst_bytes;
        s = kld_quant_tensor(it->t, it->dst_type, it->imatrix, n_threads, data, err);
        *q->slots[i] = o;
        n_conv++;
    }
    if (!s && m->hp.tied_output) m->w.output = m->w.token_embd;
    if (!s) kld_weights_moe_refresh(&m->w);
    if (s) kld_error_prefix(err, "%s@%s", m->src->path, policy);
    if (!s && announce) {
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double sec = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        char req[96] = "";
        for (size_t k = 0; k < q->plan.n; k++) { /* name the first stored quantized type */
            const kld_quant_item *it = &q->plan.items[k];
            char tb[16];
            if (!it->requant) continue;
            snprintf(req, sizeof req, " (%d requantized from %s, dequantized first)",
                     q->plan.n_requant, kld_type_name(it->src_type, tb));
            break;
        }
        fprintf(stderr, "kldeval: %s@%s: quantized %zu tensor(s) on load in %.2f s, %.3f bits per "
                "weight%s\n", m->src->path, policy, n_conv, sec, kld_quant_plan_bpw(&q->plan), req);
    }
    kld_imatrix_free(im);
    kld_policy_free(pol);
    return s;
}

const struct kld_quant_plan *kld_model_quant_plan(const kld_model *m) {
    return m->quant ? &m->quant->plan : NULL;
}

const char *kld_model_policy(const kld_model *m) { return m->quant ? m->quant->policy : NULL; }
