/* hparams_layer.c — one layer's geometry. Most models have one head size,
 * one KV head count and one FFN width; Gemma 4 gives its sliding layers
 * their own head size and rotary dims, its layers their own KV head count
 * and FFN width (llama.cpp's n_embd_head_k(il), n_head_kv(il), n_ff(il))
 * and lets its last layers read an earlier layer's KV cache. */
#include "model/hparams.h"

int64_t kld_hp_head_dim(const kld_hparams *hp, int64_t il) {
    return hp->head_dim_swa > 0 && kld_hparams_layer_swa(hp, il) ? hp->head_dim_swa : hp->head_dim;
}

int64_t kld_hp_head_dim_v(const kld_hparams *hp, int64_t il) {
    return hp->head_dim_swa > 0 && kld_hparams_layer_swa(hp, il) ? hp->head_dim_swa : hp->head_dim_v;
}

int64_t kld_hp_n_rot(const kld_hparams *hp, int64_t il) {
    return hp->n_rot_swa > 0 && kld_hparams_layer_swa(hp, il) ? hp->n_rot_swa : hp->n_rot;
}

int64_t kld_hp_n_head_kv(const kld_hparams *hp, int64_t il) {
    return hp->layer_n_head_kv[il] > 0 ? hp->layer_n_head_kv[il] : hp->n_head_kv;
}

int64_t kld_hp_n_ff(const kld_hparams *hp, int64_t il) {
    return hp->layer_n_ff[il] > 0 ? hp->layer_n_ff[il] : hp->n_ff;
}

/* As llama.cpp's Gemma 4 KV reuse: the last layer with a cache of the same
 * kind (hparams_gemma4.c checks that this is layer n_layer_kv - 1 for a full
 * layer and n_layer_kv - 2 for a sliding one, as llama.cpp assumes). */
int64_t kld_hp_kv_source(const kld_hparams *hp, int64_t il) {
    if (hp->n_layer_kv <= 0 || il < hp->n_layer_kv) return il;
    const bool swa = kld_hparams_layer_swa(hp, il);
    for (int64_t j = hp->n_layer_kv - 1; j >= 0; j--)
        if (kld_hparams_layer_swa(hp, j) == swa) return j;
    return il; /* refused at load: no earlier layer of its kind */
}

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

int64_t kld_hp_max_head_dim(const kld_hparams *hp) {
    int64_t m = 0;
    for (int64_t il = 0; il < hp->n_layer; il++)
        m = max64(m, max64(kld_hp_head_dim(hp, il), kld_hp_head_dim_v(hp, il)));
    return max64(m, max64(hp->head_dim, hp->head_dim_v));
}

int64_t kld_hp_max_n_rot(const kld_hparams *hp) { return max64(hp->n_rot, hp->n_rot_swa); }

int64_t kld_hp_max_n_ff(const kld_hparams *hp) {
    int64_t m = hp->n_ff;
    for (int64_t il = 0; il < hp->n_layer; il++) m = max64(m, kld_hp_n_ff(hp, il));
    return m;
}

int64_t kld_hp_max_qkv(const kld_hparams *hp) {
    int64_t m = hp->n_head * hp->head_dim + hp->n_head_kv * (hp->head_dim + hp->head_dim_v);
    for (int64_t il = 0; il < hp->n_layer; il++) {
        const int64_t hd = kld_hp_head_dim(hp, il);
        m = max64(m, hp->n_head * hd + kld_hp_n_head_kv(hp, il) * (hd + kld_hp_head_dim_v(hp, il)));
    }
    return m;
}

int64_t kld_hp_max_attn_out(const kld_hparams *hp) {
    int64_t m = hp->n_head * hp->head_dim_v;
    for (int64_t il = 0; il < hp->n_layer; il++) m = max64(m, hp->n_head * kld_hp_head_dim_v(hp, il));
    return m;
}

int64_t kld_hp_kv_values_per_token(const kld_hparams *hp) {
    int64_t n = 0;
    for (int64_t il = 0; il < hp->n_layer; il++)
        if (kld_hparams_layer_kind(hp, il) == KLD_LAYER_ATTN && kld_hp_has_own_kv(hp, il))
            n += kld_hp_n_head_kv(hp, il) * (kld_hp_head_dim(hp, il) + kld_hp_head_dim_v(hp, il));
    return n;
}
