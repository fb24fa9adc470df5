/* convert_hf_lfm2.c — the short-convolution half of converting a Hugging
 * Face LFM2 checkpoint, as the llama.cpp converter that added LFM2 writes
 * it (LFM2Model): the Conv1d kernels squeezed from [n_embd, 1, L] to the
 * 2-D shortconv.conv [L, n_embd], head_count_kv as one entry per layer (0
 * for a convolution layer) and shortconv.l_cache. The other names come
 * from the weight table (model/arch.c's LFM2 rows). */
#include "quant/quant_internal.h"

#include <stdio.h>
#include <stdlib.h>

void kld_hf_shortconv_squeeze(kld_hf_tensors *o) {
    static const char suffix[] = ".shortconv.conv.weight";
    const size_t m = sizeof suffix - 1;
    for (size_t i = 0; i < o->n; i++) {
        kld_tensor *t = &o->tensors[i];
        const size_t n = strlen(o->names[i]);
        if (n < m || strcmp(o->names[i] + n - m, suffix) || t->ne[1] != 1 || t->ne[3] != 1) continue;
        /* [L, 1, n_embd] and [L, n_embd] are the same bytes */
        t->ne[1] = t->ne[2];
        t->ne[2] = 1;
        t->n_dims = 2;
    }
}

kld_status kld_hf_shortconv_put_hparams(const kld_hparams *hp, kld_gguf_writer *w, kld_error *err) {
    if (hp->hy.recurrent_kind != KLD_LAYER_SHORTCONV) return KLD_OK;
    int32_t kv[KLD_MAX_LAYER];
    for (int64_t il = 0; il < hp->n_layer && il < KLD_MAX_LAYER; il++)
        kv[il] = kld_hparams_layer_kind(hp, il) == KLD_LAYER_ATTN ? (int32_t)hp->n_head_kv : 0;
    char k[96];
    bool ok = true;
    /* replaces the scalar convert_hf_meta.c wrote */
    kld_arch_key(k, sizeof k, hp->arch, KLD_K_HEAD_COUNT_KV);
    ok = ok && !kld_gguf_writer_set_arr_i32(w, k, kv, (uint64_t)hp->n_layer);
    kld_arch_key(k, sizeof k, hp->arch, KLD_K_SHORTCONV_L_CACHE);
    ok = ok && !kld_gguf_writer_set_u32(w, k, (uint32_t)hp->shortconv_l_cache);
    return ok ? KLD_OK : kld_fail(err, KLD_ERR_NOMEM, "out of memory");
}
