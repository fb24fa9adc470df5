/* view.c — a policy's plan over an opened source without converting any
 * tensor: GGUF tensors as they are, other formats' bound weights under
 * their GGUF names (convert_hf.c's listing). */
#include "quant/quant_internal.h"

#include <stdlib.h>

typedef struct view_priv {
    kld_hf_tensors hf;
    kld_imatrix *im;
} view_priv;

kld_status kld_quant_view_open(const char *policy, const kld_source *src, const kld_hparams *hp,
                               kld_quant_view *v, kld_error *err) {
    memset(v, 0, sizeof *v);
    view_priv *pv = calloc(1, sizeof *pv);
    if (!pv) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    v->priv = pv;
    kld_policy *pol = NULL;
    kld_status s = kld_policy_parse(policy, &pol, err);
    if (!s && pol->imatrix_path) s = kld_imatrix_read(pol->imatrix_path, &pv->im, err);
    if (!s && src->format == KLD_FORMAT_GGUF)
        s = kld_quant_plan_make(pol, hp, src->tensors, NULL, src->n_tensors, pv->im, &v->plan, err);
    else if (!s && !(s = kld_hf_list(src, hp, &pv->hf, err)))
        s = kld_quant_plan_make(pol, hp, pv->hf.tensors, (const char *const *)pv->hf.names,
                                pv->hf.n, pv->im, &v->plan, err);
    kld_policy_free(pol);
    if (s) kld_quant_view_close(v);
    return s;
}

void kld_quant_view_close(kld_quant_view *v) {
    view_priv *pv = v->priv;
    kld_quant_plan_free(&v->plan);
    if (pv) {
        kld_hf_tensors_free(&pv->hf);
        kld_imatrix_free(pv->im);
        free(pv);
    }
    v->priv = NULL;
}
