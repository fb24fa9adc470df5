/* hparams_deltanet.c — the layer layout and sizes of gated-DeltaNet hybrids
 * (Qwen3-Next) as a newer llama.cpp reads them (llama-model.cpp, QWEN3NEXT
 * load_arch_hparams): "<arch>.ssm.conv_kernel", "ssm.state_size" (q/k and v
 * head size), "ssm.group_count" (q/k heads), "ssm.time_step_rank" (v heads),
 * "ssm.inner_size" (v heads × v head size), all required; layer il is a
 * DeltaNet layer iff (il + 1) % full_attention_interval != 0 (default 4),
 * or as the per-layer "<arch>.attention.recurrent_layers" flags say.
 * Multi-token prediction: "<arch>.nextn_predict_layers" = N > 0 means the
 * last N of block_count blocks are MTP blocks (blk.<n>.nextn.*), which the
 * main pass never runs — newer llama.cpp's rule for its MTP architectures
 * (n_layer() = n_layer_all - n_layer_nextn; e.g. llama_model_glm_dsa and
 * llama_model_mimo2::load_arch_hparams, and the converter's _Qwen35MtpMixin, which extends
 * block_count); they are left unbound, so the logits are those of the file
 * without them. llama.cpp's own Qwen3-Next converter drops the mtp.*
 * tensors instead (Qwen3NextModel.filter_tensors). */
#include "model/hparams_internal.h"

#include <inttypes.h>
#include <stdio.h>

#define MAX_CONV 64     /* widest convolution accepted (Qwen3-Next uses 4) */
#define MAX_HEAD 1024   /* largest q/k or v head size accepted (128 in the models) */

static kld_status req_int(const kld_source *src, const kld_hparams *hp, kld_arch_key_id suffix,
                          int64_t lo, int64_t hi, int64_t *out, kld_error *err) {
    char key[160];
    kld_arch_key(key, sizeof key, hp->arch, suffix);
    const kld_gguf_kv *kv = kld_gguf_find(src->gguf, key);
    if (!kv) return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s' is missing", src->path, key);
    if (!kld_gguf_get_int(src->gguf, key, out))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s' has type %s, expected an integer",
                        src->path, key, kld_gguf_vtype_name(kv->value.type));
    if (*out < lo || *out > hi)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s' = %" PRId64 " is out of range [%"
                        PRId64 ", %" PRId64 "]", src->path, key, *out, lo, hi);
    return KLD_OK;
}

/* n_all: block_count (the flags may cover the MTP blocks too) */
static kld_status layer_kinds(const kld_source *src, kld_hparams *hp, int64_t n_all, kld_error *err) {
    char key[160];
    kld_arch_key(key, sizeof key, hp->arch, KLD_K_RECURRENT_LAYERS);
    const kld_gguf_value *arr = kld_gguf_get_arr(src->gguf, key);
    if (arr) {
        if ((int64_t)arr->v.arr.n != n_all && (int64_t)arr->v.arr.n != hp->n_layer)
            return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s' has %" PRIu64 " entries for %"
                            PRId64 " layers (block_count)", src->path, key, arr->v.arr.n, n_all);
        for (int64_t il = 0; il < hp->n_layer; il++) {
            int64_t v = 0;
            if (!kld_gguf_arr_int(arr, (uint64_t)il, &v) || v < 0 || v > 1)
                return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s'[%" PRId64 "] is not a 0/1 "
                                "flag", src->path, key, il);
            hp->layer_kind[il] = (uint8_t)(v ? KLD_LAYER_DELTANET : KLD_LAYER_ATTN);
        }
        return KLD_OK;
    }
    int64_t interval = 4;
    kld_arch_key(key, sizeof key, hp->arch, KLD_K_FULL_ATTENTION_INTERVAL);
    if (kld_gguf_find(src->gguf, key)) {
        kld_status st = req_int(src, hp, KLD_K_FULL_ATTENTION_INTERVAL, 1, KLD_MAX_LAYER, &interval, err);
        if (st) return st;
    }
    for (int64_t il = 0; il < hp->n_layer; il++)
        hp->layer_kind[il] = (uint8_t)((il + 1) % interval ? KLD_LAYER_DELTANET : KLD_LAYER_ATTN);
    return KLD_OK;
}

/* "<arch>.rope.dimension_sections": four section sizes (llama.cpp requires
 * the key; get_key_or_arr(..., 4, true)), checked against n_rot later. */
static kld_status rope_sections(const kld_source *src, kld_hparams *hp, kld_error *err) {
    char key[160];
    kld_arch_key(key, sizeof key, hp->arch, KLD_K_ROPE_DIMENSION_SECTIONS);
    const kld_gguf_value *arr = kld_gguf_get_arr(src->gguf, key);
    if (!arr)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s' is missing or not an array (four section "
                        "sizes, e.g. [11, 11, 10, 0])", src->path, key);
    if (arr->v.arr.n != 4)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s' has %" PRIu64 " entries, expected 4", src->path,
                        key, arr->v.arr.n);
    for (int i = 0; i < 4; i++)
        if (!kld_gguf_arr_int(arr, (uint64_t)i, &hp->rope_sections[i]) || hp->rope_sections[i] < 0 ||
            hp->rope_sections[i] > 4096)
            return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s'[%d] is not a section size", src->path, key, i);
    return KLD_OK;
}

kld_status kld_hp_gguf_deltanet(const kld_source *src, kld_hparams *hp, kld_error *err) {
    char key[160];
    if (hp->n_layer < 1 || hp->n_layer > KLD_MAX_LAYER)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s.block_count' = %" PRId64 " is out of "
                        "range [1, %d]", src->path, hp->arch, hp->n_layer, KLD_MAX_LAYER);
    kld_status st;
    kld_arch_key(key, sizeof key, hp->arch, KLD_K_NEXTN_PREDICT_LAYERS);
    int64_t nextn = 0;
    const int64_t n_all = hp->n_layer;
    if (kld_gguf_find(src->gguf, key) &&
        (st = req_int(src, hp, KLD_K_NEXTN_PREDICT_LAYERS, 0, n_all - 1, &nextn, err)))
        return st;
    hp->n_layer = n_all - nextn; /* the MTP blocks after them stay unbound */
    kld_arch_key(key, sizeof key, hp->arch, KLD_K_HEAD_COUNT_KV);
    if (kld_gguf_find(src->gguf, key) && !kld_gguf_get_int(src->gguf, key, &hp->n_head_kv))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s' must be one integer", src->path, key);
    int64_t inner = 0;
    if ((st = layer_kinds(src, hp, n_all, err)) ||
        (st = req_int(src, hp, KLD_K_SSM_CONV_KERNEL, 2, MAX_CONV, &hp->dn_conv, err)) ||
        (st = req_int(src, hp, KLD_K_SSM_STATE_SIZE, 1, MAX_HEAD, &hp->dn_head_k, err)) ||
        (st = req_int(src, hp, KLD_K_SSM_GROUP_COUNT, 1, 1 << 12, &hp->dn_n_k_heads, err)) ||
        (st = req_int(src, hp, KLD_K_SSM_TIME_STEP_RANK, 1, 1 << 12, &hp->dn_n_v_heads, err)) ||
        (st = req_int(src, hp, KLD_K_SSM_INNER_SIZE, 1, INT64_C(1) << 24, &inner, err)))
        return st;
    if (hp->dn_n_v_heads % hp->dn_n_k_heads)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s.ssm.time_step_rank' = %" PRId64 " (v "
                        "heads) is not a multiple of '%s.ssm.group_count' = %" PRId64 " (q/k heads)",
                        src->path, hp->arch, hp->dn_n_v_heads, hp->arch, hp->dn_n_k_heads);
    if (inner != hp->dn_n_v_heads * hp->dn_head_k)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: GGUF key '%s.ssm.inner_size' = %" PRId64 " is not "
                        "time_step_rank × state_size = %" PRId64, src->path, hp->arch, inner,
                        hp->dn_n_v_heads * hp->dn_head_k);
    hp->dn_head_v = inner / hp->dn_n_v_heads; /* llama.cpp: head_v_dim = state_size */
    return hp->hy.rope_sections ? rope_sections(src, hp, err) : KLD_OK;
}

kld_status kld_hp_check_gated_attn(const char *path, const kld_hparams *hp, kld_error *err) {
    const int64_t *sec = hp->rope_sections;
    if (hp->hy.rope_sections && 2 * (sec[0] + sec[1] + sec[2] + sec[3]) != hp->n_rot)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: %s.rope.dimension_sections [%" PRId64 ", %" PRId64 ", %" PRId64
                        ", %" PRId64 "] rotate %" PRId64 " dims, rope.dimension_count is %" PRId64, path, hp->arch,
                        sec[0], sec[1], sec[2], sec[3], 2 * (sec[0] + sec[1] + sec[2] + sec[3]), hp->n_rot);
    /* Interleaved multi-section RoPE (LLAMA_ROPE_TYPE_IMROPE; ggml_mrope_cache_init): dim pair i
     * takes the t, h or w position by (i mod Σ) mod 3, else the fourth (e) position. A text token
     * has one position in t, h and w: NeoX RoPE, as long as no pair falls to e. */
    const int64_t sum = sec[0] + sec[1] + sec[2] + sec[3];
    for (int64_t i = 0; hp->hy.rope_sections && i < hp->n_rot / 2; i++) {
        const int64_t k = i % sum;
        if (!((k % 3 == 0 && k < 3 * sec[0]) || (k % 3 == 1 && k < 3 * sec[1]) || (k % 3 == 2 && k < 3 * sec[2])))
            return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: %s.rope.dimension_sections [%" PRId64 ", %" PRId64
                            ", %" PRId64 ", %" PRId64 "] put rotary pair %" PRId64 " on the fourth position id "
                            "(not supported: a text token's is not defined)", path, hp->arch, sec[0], sec[1],
                            sec[2], sec[3], i);
    }
    if (hp->sw.attn_out_gate && hp->head_dim_v != hp->head_dim)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: %s.attention.value_length = %" PRId64 " differs from "
                        "key_length = %" PRId64 " (the output gate of %s needs them equal)", path,
                        hp->arch, hp->head_dim_v, hp->head_dim, hp->arch);
    return KLD_OK;
}
