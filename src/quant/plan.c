/* plan.c — applies a policy to one model's tensor table: which tensors
 * llama.cpp would quantize, the type each gets (recipe, then selectors in
 * order, then the row-length fallback; a recipe's refusal of rows its type
 * cannot hold stands only where no selector stores the tensor otherwise,
 * and the error proposes the selectors that would), the importance weights it uses,
 * and the resulting sizes. Tensors are visited in llama-quantize's order
 * (layer number, then name), since the recipe's counters depend on it. */
#include "quant/quant.h"

#include <fnmatch.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct order_ent {
    size_t idx;
    int layer;
    const char *name;
} order_ent;

static int layer_of(const char *name) {
    int l = -1;
    if (sscanf(name, "blk.%d.", &l) != 1) l = -1;
    return l;
}

static int cmp_order(const void *a, const void *b) {
    const order_ent *x = a, *y = b;
    if (x->layer != y->layer) return x->layer < y->layer ? -1 : 1;
    return strcmp(x->name, y->name);
}

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

/* llama_model_quantize_impl's test for tensors it quantizes at all
 * (LFM2's shortconv.conv kernels as the llama.cpp that added LFM2). */
static bool eligible(const char *name, const kld_tensor *t) {
    int dims = 0;
    for (int d = 0; d < KLD_MAX_DIMS; d++)
        if (t->ne[d] > 1) dims = d + 1;
    return ends_with(name, "weight") && dims >= 2 && !strstr(name, "_norm.weight") &&
           !strstr(name, "ffn_gate_inp.weight") && strcmp(name, "position_embd.weight") &&
           strcmp(name, "token_types.weight") && !strstr(name, "ssm_conv1d.weight") &&
           !strstr(name, "shortconv.conv.weight") && !strstr(name, "attn_rel_b.weight");
}

static bool rule_matches(const kld_policy_rule *r, const char *name, bool has_output) {
    int layer = layer_of(name);
    char want[64];
    switch (r->kind) {
    case KLD_SEL_HEAD:
        return !strcmp(name, "output.weight") || (!has_output && !strcmp(name, "token_embd.weight"));
    case KLD_SEL_EMBD: return !strcmp(name, "token_embd.weight");
    case KLD_SEL_BLK: return layer >= r->blk_lo && layer <= r->blk_hi;
    case KLD_SEL_CLASS:
        if (r->blk_lo >= 0 && (layer < r->blk_lo || layer > r->blk_hi)) return false;
        snprintf(want, sizeof want, "blk.%d.%s.weight", layer, r->cls);
        return layer >= 0 && !strcmp(name, want);
    case KLD_SEL_GLOB: return fnmatch(r->glob, name, 0) == 0;
    }
    return false;
}

/* The ftype llama.cpp would record for a plain-type base. */
static uint32_t ftype_of_type(uint32_t type) {
    static const char *const names[] = {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0",
                                        "q5_1", "q2_K", "q3_K_S", "q4_K_S", "q5_K_S", "q6_K",
                                        "iq4_nl", "iq4_xs"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const kld_recipe *r = kld_recipe_find(names[i]);
        if (r && r->base_type == type) return r->ftype;
    }
    return UINT32_MAX;
}

/* A tensor whose chosen type its rows cannot hold: the recipe's choice where
 * llama.cpp has no fallback (rule NULL), or an explicit type without one
 * (rule: the selector that asked for it; NULL with a plain-type base). */
typedef struct refusal {
    bool on, recipe;
    uint32_t type;
    const char *rule;
} refusal;

/* hit[i]: rule i matched a tensor. A refusal is not an error yet: a later
 * selector may store the tensor otherwise (the user's explicit choice wins
 * over the recipe's), and the plan's error names every refused tensor. */
static kld_status decide(const kld_policy *p, const kld_quant_model *qm, kld_recipe_state *st,
                         kld_quant_item *it, bool *hit, refusal *no, kld_error *err) {
    const kld_tensor *t = it->t;
    char b1[16], b2[16];
    uint32_t type;
    bool base_refused = false;
    *no = (refusal){0};
    if (p->base_keep) {
        type = t->type;
    } else if (p->recipe) {
        type = p->recipe->base_type;
        if (kld_type_info_get(type)->is_quantized) {
            type = kld_recipe_tensor_type(p->recipe, qm, st, it->name, t->ne[0]);
            uint32_t f = kld_quant_fallback(type, t->ne[0]);
            if (f == KLD_TYPE_COUNT) { /* llama.cpp would stop here */
                base_refused = true;
            } else if (f != type) {
                it->fallback = true;
                it->wanted_type = type;
                type = f;
            }
        }
    } else {
        type = p->base_type;
    }
    bool overridden = false, refused = base_refused;
    const char *rule = NULL;
    const uint32_t base_type = type;
    const bool base_fallback = it->fallback;
    const uint32_t base_wanted = it->wanted_type;
    for (size_t i = 0; i < p->n_rules; i++) {
        const kld_policy_rule *r = &p->rules[i];
        if (!rule_matches(r, it->name, qm->has_output)) continue;
        hit[i] = true;
        if (r->base) {
            type = base_type;
            overridden = !p->recipe && !p->base_keep;
            refused = base_refused;
            rule = NULL;
            it->fallback = base_fallback;
            it->wanted_type = base_wanted;
            continue;
        }
        type = r->keep ? t->type : r->type;
        overridden = true;
        refused = false;
        rule = r->text;
        it->fallback = false;
    }
    if (refused) {
        *no = (refusal){.on = true, .recipe = true, .type = type};
        return KLD_OK;
    }
    if (overridden || (!p->recipe && !p->base_keep)) {
        uint32_t f = kld_quant_fallback(type, t->ne[0]);
        if (f == KLD_TYPE_COUNT) {
            *no = (refusal){.on = true, .type = type, .rule = rule};
            return KLD_OK;
        }
        if (f != type) {
            it->fallback = true;
            it->wanted_type = type;
            type = f;
        }
    }
    it->dst_type = type;
    it->convert = type != t->type;
    if (it->convert) {
        const kld_type_info *si = kld_type_info_get(t->type);
        if (!si || !si->to_float_ref)
            return kld_fail(err, KLD_ERR_UNSUPPORTED, "tensor '%s': stored type %s cannot be "
                            "converted to float32", it->name, kld_type_name(t->type, b1));
        if (!kld_type_info_get(type)->quantize_row)
            return kld_fail(err, KLD_ERR_UNSUPPORTED, "tensor '%s': no quantizer for %s",
                            it->name, kld_type_name(type, b2));
        it->requant = si->is_quantized;
    }
    return KLD_OK;
}

/* The class selector naming tensor `name` (blk.L.CLASS.weight), or -1. */
static int class_of(const char *name) {
    int l = layer_of(name);
    for (size_t c = 0; l >= 0 && c < KLD_POLICY_N_CLASSES; c++) {
        char want[64];
        snprintf(want, sizeof want, "blk.%d.%s.weight", l, kld_policy_classes[c]);
        if (!strcmp(name, want)) return (int)c;
    }
    return -1;
}

/* Appends to buf (at *o) the selectors that name exactly the refused
 * tensors: a class where each of its tensors is refused, else
 * blk:A-B.CLASS per run of refused layers; embd, head, or the tensor's own
 * name (a glob matching only it) for the others. */
static void resolving_selectors(const kld_quant_plan *plan, const bool *refused, char *buf,
                                size_t cap, size_t *o) {
#define ADD(...) (*o += *o < cap ? (size_t)snprintf(buf + *o, cap - *o, __VA_ARGS__) : 0)
    for (int c = 0; c < (int)KLD_POLICY_N_CLASSES; c++) {
        size_t n_all = 0, n_no = 0;
        for (size_t i = 0; i < plan->n; i++)
            if (plan->items[i].eligible && class_of(plan->items[i].name) == c)
                n_all++, n_no += refused[i];
        if (!n_no) continue;
        if (n_no == n_all) {
            ADD(",%s=f16", kld_policy_classes[c]);
            continue;
        }
        int lo = -1, hi = -1; /* the current run of refused layers (items are in layer order) */
        for (size_t i = 0; i <= plan->n; i++) {
            bool take = i < plan->n && refused[i] && class_of(plan->items[i].name) == c;
            int l = take ? layer_of(plan->items[i].name) : -1;
            if (take && lo >= 0 && l == hi + 1) {
                hi = l;
                continue;
            }
            if (!take && i < plan->n) continue;
            if (lo >= 0) {
                if (lo == hi) ADD(",blk:%d.%s=f16", lo, kld_policy_classes[c]);
                else ADD(",blk:%d-%d.%s=f16", lo, hi, kld_policy_classes[c]);
            }
            lo = hi = l;
        }
    }
    for (size_t i = 0; i < plan->n; i++) {
        const char *name = plan->items[i].name;
        if (!refused[i] || class_of(name) >= 0) continue;
        if (!strcmp(name, "token_embd.weight")) ADD(",embd=f16");
        else if (!strcmp(name, "output.weight")) ADD(",head=f16");
        else ADD(",%s=f16", name);
    }
#undef ADD
}

/* The error for the refused tensors: the first one's reason, how many, and
 * the selectors that, appended to the policy, store them in f16. */
static kld_status refusal_error(const kld_policy *p, const kld_quant_plan *plan, const bool *refused,
                                size_t first, const refusal *no, kld_error *err) {
    const kld_quant_item *it = &plan->items[first];
    size_t n_refused = 0;
    for (size_t i = 0; i < plan->n; i++) n_refused += refused[i];
    char b[16], why[256], more[48] = "", fix[512] = "";
    const kld_type_info *ti = kld_type_info_get(no->type);
    if (no->recipe)
        snprintf(why, sizeof why, "llama.cpp has no fallback for it (recipe %s)", p->recipe->name);
    else if (no->rule)
        snprintf(why, sizeof why, "it has no fallback (asked by '%s')", no->rule);
    else
        snprintf(why, sizeof why, "it has no fallback (base %s)", kld_type_name(no->type, b));
    if (n_refused > 1) snprintf(more, sizeof more, " (and %zu more)", n_refused - 1);
    size_t o = 0;
    resolving_selectors(plan, refused, fix, sizeof fix, &o);
    return kld_fail(err, KLD_ERR_UNSUPPORTED, "policy '%s': tensor '%s'%s: %" PRId64 " columns are "
                    "not a multiple of %s's block of %d and %s; add %s at the end of the policy "
                    "('%s%s') to store %s in f16, llama.cpp's last fallback (or =keep: the stored "
                    "type)", p->text, it->name, more, it->t->ne[0], kld_type_name(no->type, b),
                    ti->block_size, why, fix + 1, p->text, fix, n_refused > 1 ? "them" : "it");
}

static kld_status attach_imatrix(const kld_imatrix *im, kld_quant_item *it, kld_error *err) {
    const kld_type_info *ti = kld_type_info_get(it->dst_type);
    if (!im || !it->convert || !ti->imatrix_used) return KLD_OK;
    const kld_imatrix_entry *e = kld_imatrix_find(im, it->name);
    if (!e) return KLD_OK; /* llama.cpp: "did not find weights for …" and goes on without */
    const kld_tensor *t = it->t;
    if (e->n != t->ne[0] * t->ne[2]) {
        if (!strcmp(it->name, "token_embd.weight")) return KLD_OK;
        return kld_fail(err, KLD_ERR_FORMAT, "imatrix entry '%s' has %" PRId64 " values, the "
                        "tensor has %" PRId64 " columns", it->name, e->n, t->ne[0] * t->ne[2]);
    }
    if (!ti->quantize_row_imat)
        return kld_fail(err, KLD_ERR_UNSUPPORTED, "tensor '%s': quantizing to %s with an importance "
                        "matrix is not implemented", it->name, ti->name);
    it->imatrix = e->weights;
    return KLD_OK;
}

kld_status kld_quant_plan_make(const kld_policy *p, const kld_hparams *hp,
                               const kld_tensor *tensors, const char *const *names, size_t n,
                               const kld_imatrix *im, kld_quant_plan *out, kld_error *err) {
    memset(out, 0, sizeof *out);
    order_ent *ord = calloc(n ? n : 1, sizeof *ord);
    bool *hit = calloc(p->n_rules + 1, sizeof *hit), *refused = calloc(n ? n : 1, sizeof *refused);
    out->items = calloc(n ? n : 1, sizeof *out->items);
    if (!ord || !hit || !refused || !out->items) {
        free(ord);
        free(hit);
        free(refused);
        free(out->items);
        out->items = NULL;
        return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    }
    kld_quant_model qm = {.n_layer = hp->n_layer,
                          .n_gqa = hp->n_head_kv > 0 ? hp->n_head / hp->n_head_kv : 1,
                          .is_70b = !strcmp(hp->arch, "llama") && hp->n_layer == 80,
                          .has_imatrix = im != NULL,
                          .n_expert = hp->n_expert};
    for (size_t i = 0; i < n; i++) {
        const char *name = names ? names[i] : tensors[i].name;
        ord[i] = (order_ent){i, layer_of(name), name};
        if (!strcmp(name, "output.weight")) qm.has_output = true;
        if (strstr(name, "attn_v.weight") || strstr(name, "attn_qkv.weight") ||
            strstr(name, "attn_kv_b.weight"))
            qm.n_attention_wv++;
    }
    qsort(ord, n, sizeof *ord, cmp_order);
    out->n = n;
    out->ftype = p->base_keep ? UINT32_MAX : p->recipe ? p->recipe->ftype : ftype_of_type(p->base_type);
    kld_recipe_state st = {0};
    kld_status s = KLD_OK;
    size_t n_refused = 0, first_refused = 0;
    refusal first = {0};
    for (size_t k = 0; s == KLD_OK && k < n; k++) {
        kld_quant_item *it = &out->items[k];
        it->t = &tensors[ord[k].idx];
        it->name = ord[k].name;
        it->src_type = it->dst_type = it->t->type;
        it->eligible = eligible(it->name, it->t);
        refusal no = {0};
        if (it->eligible) s = decide(p, &qm, &st, it, hit, &no, err);
        if (s == KLD_OK && no.on) {
            refused[k] = true;
            if (!n_refused++) first = no, first_refused = k;
            continue;
        }
        if (s == KLD_OK) s = attach_imatrix(im, it, err);
        if (s == KLD_OK)
            s = kld_type_tensor_bytes(it->dst_type, KLD_MAX_DIMS, it->t->ne, &it->dst_bytes,
                                      it->name, err);
        if (s == KLD_OK) {
            out->src_bytes += it->t->nbytes;
            out->dst_bytes += it->dst_bytes;
            out->n_params += (uint64_t)kld_tensor_nelements(it->t);
            out->n_fallback += it->fallback;
            out->n_requant += it->requant;
        }
    }
    /* a rule that changes nothing is a typo or a rule for another model: say so */
    for (size_t i = 0; s == KLD_OK && i < p->n_rules; i++)
        if (!hit[i])
            s = kld_fail(err, KLD_ERR_ARG, "policy '%s': '%s' matches no weight matrix of this model "
                         "(%" PRId64 " layers; names look like blk.0.ffn_down.weight)", p->text,
                         p->rules[i].text, hp->n_layer);
    if (s == KLD_OK && n_refused) s = refusal_error(p, out, refused, first_refused, &first, err);
    free(ord);
    free(hit);
    free(refused);
    if (s) kld_quant_plan_free(out);
    return s;
}

void kld_quant_plan_free(kld_quant_plan *plan) {
    free(plan->items);
    memset(plan, 0, sizeof *plan);
}

double kld_quant_plan_bpw(const kld_quant_plan *plan) {
    return plan->n_params ? 8.0 * (double)plan->dst_bytes / (double)plan->n_params : 0;
}

void kld_quant_plan_print(const kld_quant_plan *plan, FILE *f) {
    uint64_t cnt[KLD_TYPE_COUNT] = {0}, par[KLD_TYPE_COUNT] = {0}, byt[KLD_TYPE_COUNT] = {0};
    uint32_t req_from[KLD_TYPE_COUNT] = {0};
    for (size_t i = 0; i < plan->n; i++) {
        const kld_quant_item *it = &plan->items[i];
        cnt[it->dst_type]++;
        par[it->dst_type] += (uint64_t)kld_tensor_nelements(it->t);
        byt[it->dst_type] += it->dst_bytes;
        if (it->requant) req_from[it->src_type]++;
    }
    fprintf(f, "policy types   type      tensors         params        bytes  %% of bytes\n");
    for (uint32_t t = 0; t < KLD_TYPE_COUNT; t++) {
        if (!cnt[t]) continue;
        char b[16];
        fprintf(f, "               %-8s %8" PRIu64 " %14" PRIu64 " %12" PRIu64 "  %5.1f%%\n",
                kld_type_name(t, b), cnt[t], par[t], byt[t],
                plan->dst_bytes ? 100.0 * (double)byt[t] / (double)plan->dst_bytes : 0.0);
    }
    fprintf(f, "policy size    %" PRIu64 " bytes, %.3f bits per weight (stored: %" PRIu64 " bytes)\n",
            plan->dst_bytes, kld_quant_plan_bpw(plan), plan->src_bytes);
    for (uint32_t t = 0; t < KLD_TYPE_COUNT; t++) {
        char b[16];
        if (req_from[t])
            fprintf(f, "requantized    %u tensor(s) requantized from %s (dequantized first)\n",
                    req_from[t], kld_type_name(t, b));
    }
    if (plan->n_merged)
        fprintf(f, "merged         %d tensor(s) with the adapter's update W + s·B·A (in double, "
                "from the dequantized weight)\n", plan->n_merged);
    for (size_t i = 0; i < plan->n; i++) {
        const kld_quant_item *it = &plan->items[i];
        if (!it->fallback) continue;
        char b1[16], b2[16];
        fprintf(f, "fallback       %s: %" PRId64 " columns not a multiple of %d for %s, using %s\n",
                it->name, it->t->ne[0], kld_type_info_get(it->wanted_type)->block_size,
                kld_type_name(it->wanted_type, b1), kld_type_name(it->dst_type, b2));
    }
}

kld_status kld_quant_plan_merge(kld_quant_plan *plan, const kld_quant_merge *m,
                                const kld_imatrix *im, const kld_quant_delta **per_item,
                                kld_error *err) {
    for (size_t i = 0; i < plan->n; i++) per_item[i] = NULL;
    for (size_t k = 0; m && k < m->n; k++) {
        const kld_quant_delta *d = &m->d[k];
        size_t i = 0;
        while (i < plan->n && strcmp(plan->items[i].name, d->name)) i++;
        if (i == plan->n)
            return kld_fail(err, KLD_ERR_FORMAT, "%s: the adapter adapts '%s', which is not a "
                            "tensor of the model being written", m->adapter, d->name);
        kld_quant_item *it = &plan->items[i];
        const kld_tensor *t = it->t;
        if (per_item[i])
            return kld_fail(err, KLD_ERR_FORMAT, "%s: two updates for '%s'", m->adapter, d->name);
        if (t->ne[0] != d->n_in || t->ne[1] != d->n_out || t->ne[2] != 1 || t->ne[3] != 1)
            return kld_fail(err, KLD_ERR_FORMAT, "%s: the update of '%s' is [%" PRId64 ", %" PRId64
                            "], the tensor [%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 "]",
                            m->adapter, d->name, d->n_in, d->n_out, t->ne[0], t->ne[1], t->ne[2],
                            t->ne[3]);
        const kld_type_info *si = kld_type_info_get(t->type), *di = kld_type_info_get(it->dst_type);
        char b[16];
        if (!si || !si->to_float_ref)
            return kld_fail(err, KLD_ERR_UNSUPPORTED, "tensor '%s': stored type %s cannot be "
                            "converted to float32 to merge the adapter", d->name,
                            kld_type_name(t->type, b));
        if (!di || !di->quantize_row)
            return kld_fail(err, KLD_ERR_UNSUPPORTED, "tensor '%s': no quantizer for %s", d->name,
                            kld_type_name(it->dst_type, b));
        per_item[i] = d;
        it->merged = true;
        plan->n_merged++;
        if (!it->convert) { /* the stored type kept: its data is recomputed all the same */
            it->convert = true;
            it->requant = si->is_quantized;
            plan->n_requant += it->requant;
            kld_status s = attach_imatrix(im, it, err);
            if (s) return s;
        }
    }
    return KLD_OK;
}
