/* head.c — a model's output head identified (head.h). */
#include "eval/head.h"

#include "common/common.h"
#include "eval/corpus.h"
#include "tensor/types.h"

#include <openssl/evp.h>
#include <stdio.h>

kld_status kld_head_identify(const kld_model *m, kld_head_id *out, kld_error *err) {
    memset(out, 0, sizeof *out);
    bool tied = false;
    const kld_tensor *t = kld_model_head(m, &tied);
    if (!t || !t->data) return kld_fail(err, KLD_ERR_ARG, "the model has no output head");
    const kld_hparams *hp = kld_model_hparams(m);
    if (!kld_model_weight_name(m, t, out->tensor, sizeof out->tensor))
        snprintf(out->tensor, sizeof out->tensor, "%s", tied ? "token_embd.weight" : "output.weight");
    const kld_type_info *ti = kld_type_info_get(t->type);
    snprintf(out->type, sizeof out->type, "%s", ti && ti->name ? ti->name : "?");
    out->rows = t->ne[1];
    out->cols = t->ne[0];
    out->tied = tied;
    out->final_softcap = hp->final_softcap;
    uint8_t d[32];
    unsigned len = 0;
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    bool ok = c && EVP_DigestInit_ex(c, EVP_sha256(), NULL) &&
              EVP_DigestUpdate(c, t->data, t->nbytes) && EVP_DigestFinal_ex(c, d, &len);
    EVP_MD_CTX_free(c);
    if (!ok) return kld_fail(err, KLD_ERR_NOMEM, "cannot hash the head %s", out->tensor);
    kld_hex_digest(d, out->sha256);
    return KLD_OK;
}
