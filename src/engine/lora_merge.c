/* lora_merge.c — `kldeval quantize IN+ADAPTER[:SCALE] OUT POLICY`: the
 * adapter is opened and checked exactly as MODEL+ADAPTER opens it (the
 * same binding, so the same errors), and its pairs become the quantizer's
 * low-rank updates (quant.h kld_quant_merge): each targeted weight is
 * written as W + s·B·A, s = SCALE·alpha/r as the side product uses it.
 * For a Hugging Face input whose q/k rows the converter permutes into
 * llama.cpp's order, B's q/k rows are permuted the same way. */
#include "engine/internal.h"
#include "engine/lora.h"
#include "quant/quant.h"

#include <stdlib.h>
#include <sys/stat.h>

static bool ends(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

/* One pair as an update; *owned_b is B's permuted copy when one was needed. */
static kld_status pair_delta(const kld_model *m, const kld_lora_pair *p, kld_quant_delta *d,
                             float **owned_b, kld_error *err) {
    const kld_hparams *hp = &m->hp;
    *d = (kld_quant_delta){.name = p->name, .n_in = p->a.ne[0], .n_out = p->b.ne[1],
                           .rank = p->b.ne[0], .a = p->a.data, .b = p->b.data, .scale = p->scale};
    const bool q = ends(p->name, "attn_q.weight"), k = ends(p->name, "attn_k.weight");
    /* the binding put B in the model's (HF) order; the writer permutes W */
    if (!(q || k) || m->src->format == KLD_FORMAT_GGUF || hp->rope_type == hp->sw.rope_type)
        return KLD_OK;
    const size_t bytes = (size_t)(d->rank * d->n_out) * sizeof(float);
    float *b = malloc(bytes ? bytes : 1);
    if (!b) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", p->name);
    memcpy(b, p->b.data, bytes);
    kld_tensor bt = p->b;
    bt.data = b;
    if (!kld_lora_permute_b(&bt, q ? hp->n_head : hp->n_head_kv, true)) {
        free(b);
        return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", p->name);
    }
    *owned_b = b;
    d->b = b;
    return KLD_OK;
}

kld_status kld_quantize_merged(const char *in, const char *out_path, const char *policy,
                               const kld_quantize_opts *opts, kld_quant_plan *plan_out,
                               kld_error *err) {
    char *base = NULL;
    const char *adapter = NULL;
    kld_status s = kld_model_split_adapter(in, &base, &adapter, err);
    if (s) return s;
    if (!adapter) return kld_quantize_file(in, out_path, policy, opts, plan_out, err);
    struct stat sb;
    if (stat(base, &sb) != 0) { /* IN@POLICY+ADAPTER: quantize's policy is its own argument */
        free(base);
        return kld_fail(err, KLD_ERR_ARG, "%s: quantize takes IN+ADAPTER[:SCALE] (no @POLICY; the "
                        "policy is quantize's third argument)", in);
    }
    kld_model *m = NULL;
    s = kld_model_open(base, NULL, &m, err);
    if (!s && (s = kld_model_attach_adapter(m, adapter, err))) kld_error_prefix(err, "%s", in);
    const kld_lora *l = m ? m->lora : NULL;
    kld_quant_delta *d = l ? calloc(l->n ? l->n : 1, sizeof *d) : NULL;
    float **owned = l ? calloc(l->n ? l->n : 1, sizeof *owned) : NULL;
    if (!s && (!d || !owned)) s = kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", in);
    for (size_t i = 0; !s && i < l->n; i++) s = pair_delta(m, &l->pairs[i], &d[i], &owned[i], err);
    if (!s) {
        kld_quant_merge mg = {.d = d, .n = l->n, .adapter = l->path, .scale = l->user_scale,
                              .has_alpha = l->has_alpha, .alpha = l->alpha};
        kld_quantize_opts o = opts ? *opts : (kld_quantize_opts){0};
        o.merge = &mg;
        s = kld_quantize_file(base, out_path, policy, &o, plan_out, err);
    }
    for (size_t i = 0; owned && l && i < l->n; i++) free(owned[i]);
    free(owned);
    free(d);
    kld_model_close(m);
    free(base);
    return s;
}
