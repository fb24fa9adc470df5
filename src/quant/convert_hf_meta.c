/* convert_hf_meta.c — the hyper-parameter keys of a converted Hugging Face
 * checkpoint, per architecture as llama.cpp's convert_hf_to_gguf.py writes
 * them (c392e50 for llama, qwen2, phi3, gemma, gemma2; the later converter
 * for qwen3 and gemma3; the expert and LFM2 keys in convert_hf_moe.c and
 * convert_hf_lfm2.c), and the refusal of what a GGUF of that
 * architecture cannot carry (a window llama.cpp's graph would not apply, a
 * query scale it would not use), so that the converted file reads back as
 * the checkpoint does. */
#include "model/arch.h"
#include "quant/quant_internal.h"

#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>

/* The sliding layout a GGUF of this architecture gets without the pattern
 * key (hparams_swa.c reads it the same way). */
static bool gguf_default_swa(const kld_hparams *hp, int64_t il) {
    const int p = hp->sw.swa_pattern;
    if (p < 0) return false;
    if (p == 0) return true;
    return il % p < p - 1;
}

/* The query scale the GGUF reader derives (hparams.c: Gemma 2/3 key the
 * 27B exception on the layer count). */
static double gguf_attn_scale(const kld_hparams *hp) {
    const bool g2 = !strcmp(hp->arch, "gemma2"), g3 = !strcmp(hp->arch, "gemma3");
    if ((g2 && hp->n_layer == 46) || (g3 && hp->n_layer == 62))
        return 1.0 / sqrt((double)(hp->n_embd / hp->n_head));
    return 1.0 / sqrt((double)(hp->head_dim > 0 ? hp->head_dim : 1));
}

kld_status kld_hf_check_convertible(const kld_source *src, const kld_hparams *hp, kld_error *err) {
    static const char *const archs[] = {"llama", "qwen2", "qwen3", "phi3", "gemma", "gemma2", "gemma3",
                                        "qwen2moe", "qwen3moe", "olmoe", "lfm2", "qwen3next", "glm4moe",
                                        "gpt-oss", "deepseek2", "gemma4", "qwen35", "qwen35moe"};
    bool known = false;
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++) known |= !strcmp(hp->arch, archs[i]);
    if (!known)
        return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: converting a Hugging Face %s checkpoint is "
                        "not written yet (llama, qwen2, qwen3, phi3, gemma, gemma2, gemma3, "
                        "qwen2moe, qwen3moe, olmoe, lfm2, qwen3next, glm4moe, gpt-oss, deepseek2, gemma4, "
                        "qwen35, qwen35moe are)",
                        src->path, hp->arch);
    kld_status s = kld_hf_moe_check(src, hp, err);
    /* Gemma 4: hparams_gemma4_hf.c read only what its converter writes (proportional RoPE as
     * rope_freqs, per-layer windows, attention scale 1) */
    if (s || !strcmp(hp->arch, "gemma4")) return s;
    /* llama.cpp's converter writes Llama 3's scaling as rope_freqs and
     * Phi-3's LongRoPE as two factor tensors (convert_hf.c) */
    const bool factors = (!strcmp(hp->rope_scaling, "llama3") && !strcmp(hp->arch, "llama")) ||
                         (!strcmp(hp->rope_scaling, "longrope") && !strcmp(hp->arch, "phi3")) ||
                         (!strcmp(hp->rope_scaling, "yarn") && !strcmp(hp->arch, "gpt-oss")); /* its reader: GGUF YaRN */
    /* deepseek2's YaRN is keys only (hparams_mla_hf.c read it as the GGUF reader will) */
    const bool mla_yarn = hp->sw.mla && !strcmp(hp->rope_scaling, "yarn");
    if (strcmp(hp->rope_scaling, "none") && strcmp(hp->rope_scaling, "linear") && !factors && !mla_yarn)
        return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: rope scaling '%s' is not converted yet "
                        "for %s", src->path, hp->rope_scaling, hp->arch);
    /* llama.cpp's llama/qwen2/qwen3/gemma graphs have no sliding window: a
     * GGUF could not carry the one this config.json asks for. */
    for (int64_t il = 0; hp->sw.swa_pattern < 0 && il < hp->n_layer; il++)
        if (kld_hparams_layer_swa(hp, il))
            return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: sliding_window %lld (layer %lld) "
                            "cannot be written to a %s GGUF", src->path,
                            (long long)hp->sliding_window, (long long)il, hp->arch);
    /* phi3 GGUFs slide every layer with one window */
    for (int64_t il = 0; hp->sw.swa_pattern == 0 && hp->sliding_window > 0 && il < hp->n_layer; il++)
        if (!kld_hparams_layer_swa(hp, il))
            return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: layer %lld without the sliding window "
                            "cannot be written to a %s GGUF (every layer slides)", src->path,
                            (long long)il, hp->arch);
    const double want = gguf_attn_scale(hp);
    if (!hp->sw.mla && fabs(hp->attn_scale - want) > 1e-12 * want)
        return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: query scale %.9g (query_pre_attn_scalar "
                        "%.9g) cannot be written to a %s GGUF (llama.cpp scales by %.9g)",
                        src->path, hp->attn_scale, 1.0 / (hp->attn_scale * hp->attn_scale),
                        hp->arch, want);
    return KLD_OK;
}

/* DeepseekV2Model's MLA keys (conversion/deepseek.py), in the decompressed form kldeval
 * reads natively: key_length nope + rope, value_length v_head_dim, one kv head per q head
 * and the fused attn_kv_b (not the newer split attn_k_b / attn_v_b with key_length_mla);
 * q_lora_rank 0 for the plain q_proj; YaRN's type, factor, original context and
 * yarn_log_multiplier 0.1 · mscale_all_dim (written whenever mscale_all_dim is). */
static kld_status put_mla(const kld_source *src, const kld_hparams *hp, kld_gguf_writer *w, kld_error *err) {
    char k[96];
    bool ok = true;
#define KEY(id) kld_arch_key(k, sizeof k, hp->arch, id)
#define U32(id, v) (ok = ok && !kld_gguf_writer_set_u32(w, KEY(id), (uint32_t)(v)))
#define F32(id, v) (ok = ok && !kld_gguf_writer_set_f32(w, KEY(id), (float)(v)))
    U32(KLD_K_KEY_LENGTH, hp->head_dim);
    U32(KLD_K_VALUE_LENGTH, hp->head_dim_v);
    U32(KLD_K_Q_LORA_RANK, hp->n_lora_q);
    U32(KLD_K_KV_LORA_RANK, hp->n_lora_kv);
    const json_t *rs = json_object_get(src->hf_config, "rope_scaling");
    const json_t *all = json_is_object(rs) ? json_object_get(rs, "mscale_all_dim") : NULL;
    if (json_is_number(all)) F32(KLD_K_ROPE_SCALING_YARN_LOG_MUL, 0.1 * json_number_value(all));
    if (!strcmp(hp->rope_scaling, "yarn")) {
        ok = ok && !kld_gguf_writer_set_str(w, KEY(KLD_K_ROPE_SCALING_TYPE), "yarn");
        F32(KLD_K_ROPE_SCALING_FACTOR, 1.0 / hp->rope_freq_scale);
        U32(KLD_K_ROPE_SCALING_ORIG_CTX, hp->rope_orig_ctx);
    }
#undef F32
#undef U32
#undef KEY
    return ok ? KLD_OK : kld_fail(err, KLD_ERR_NOMEM, "out of memory");
}

/* config.json's original_max_position_embeddings, else the training context. */
static int64_t hf_orig_ctx(const kld_source *src, const kld_hparams *hp) {
    if (!strcmp(hp->rope_scaling, "longrope")) return hp->rope_orig_ctx;
    const json_t *v = json_object_get(src->hf_config, "original_max_position_embeddings");
    if (json_is_integer(v) && json_integer_value(v) > 0) return (int64_t)json_integer_value(v);
    return hp->n_ctx_train;
}

kld_status kld_hf_put_hparams(const kld_source *src, const kld_hparams *hp, kld_gguf_writer *w,
                              kld_error *err) {
    if (!strcmp(hp->arch, "gemma4")) return kld_hf_put_hparams_gemma4(hp, w, err);
    const bool gemma = !strncmp(hp->arch, "gemma", 5), phi3 = !strcmp(hp->arch, "phi3");
    const bool gemma12 = gemma && strcmp(hp->arch, "gemma3");
    char k[96];
    bool ok = true;
#define KEY(id) kld_arch_key(k, sizeof k, hp->arch, id)
#define U32(id, v) (ok = ok && !kld_gguf_writer_set_u32(w, KEY(id), (uint32_t)(v)))
#define F32(id, v) (ok = ok && !kld_gguf_writer_set_f32(w, KEY(id), (float)(v)))
    ok = ok && !kld_gguf_writer_set_str(w, "general.architecture", hp->arch);
    ok = ok && !kld_gguf_writer_set_str(w, "general.name", hp->name);
    U32(KLD_K_CONTEXT_LENGTH, hp->n_ctx_train);
    if (phi3) U32(KLD_K_ROPE_SCALING_ORIG_CTX, hf_orig_ctx(src, hp));
    U32(KLD_K_EMBEDDING_LENGTH, hp->n_embd);
    U32(KLD_K_BLOCK_COUNT, hp->n_layer);
    U32(KLD_K_FEED_FORWARD_LENGTH, hp->n_ff);
    U32(KLD_K_HEAD_COUNT, hp->n_head);
    U32(KLD_K_HEAD_COUNT_KV, hp->n_head_kv);
    F32(KLD_K_RMS_EPS, hp->norm_eps);
    /* Gemma 1/2's converter writes neither key: llama.cpp's defaults (base
     * 10000, every dimension) then apply, so they are written only when the
     * checkpoint differs from them. */
    if (!gemma12 || hp->rope_freq_base != 10000.0) F32(KLD_K_ROPE_FREQ_BASE, hp->rope_freq_base);
    if (!gemma || hp->n_rot != hp->head_dim) U32(KLD_K_ROPE_DIMENSION_COUNT, hp->n_rot);
    /* vocab_size: only the converter classes that add it (conversion/llama.py LlamaModel, also
     * Mistral's and Mixtral's; lfm2.py LFM2Model; deepseek.py DeepseekV2Model); TextModel itself
     * writes none (Qwen2 / Qwen3 / their MoE / Qwen3-Next / Qwen3.5, Phi-3, OLMoE, GLM-4.5,
     * gpt-oss, Gemma) */
    if (!strcmp(hp->arch, "llama") || !strcmp(hp->arch, "lfm2") || !strcmp(hp->arch, "deepseek2"))
        U32(KLD_K_VOCAB_SIZE, hp->n_vocab);
    if (!hp->sw.mla && (gemma || hp->head_dim * hp->n_head != hp->n_embd || hp->head_dim_v != hp->head_dim)) {
        U32(KLD_K_KEY_LENGTH, hp->head_dim);
        U32(KLD_K_VALUE_LENGTH, hp->head_dim_v);
    }
    if (!strcmp(hp->arch, "gemma2") || hp->attn_softcap > 0) F32(KLD_K_ATTN_SOFTCAP, hp->attn_softcap);
    if (!strcmp(hp->arch, "gemma2") || hp->final_softcap > 0) F32(KLD_K_FINAL_SOFTCAP, hp->final_softcap);
    /* LFM2's converter writes no window (the reader's default: none) */
    const bool lfm2 = hp->hy.recurrent_kind == KLD_LAYER_SHORTCONV;
    if (hp->sw.swa_pattern >= 0 && (hp->sliding_window > 0 || !lfm2))
        U32(KLD_K_SLIDING_WINDOW, hp->sliding_window);
    if (hp->sw.swa_pattern > 0 && hp->sliding_window > 0) {
        /* A layout other than the architecture's default goes into the later
         * llama.cpp's per-layer key (one flag per layer). */
        bool same = true;
        for (int64_t il = 0; il < hp->n_layer; il++)
            same &= kld_hparams_layer_swa(hp, il) == gguf_default_swa(hp, il);
        if (!same) {
            int32_t flags[KLD_MAX_LAYER];
            for (int64_t il = 0; il < hp->n_layer; il++) flags[il] = kld_hparams_layer_swa(hp, il);
            ok = ok && !kld_gguf_writer_set_arr_i32(w, KEY(KLD_K_SLIDING_WINDOW_PATTERN),
                                                    flags, (uint64_t)hp->n_layer);
        }
    }
    if (hp->sw.swa_rope_freq_base > 0 && hp->rope_freq_base_swa != hp->sw.swa_rope_freq_base)
        F32(KLD_K_ROPE_FREQ_BASE_SWA, hp->rope_freq_base_swa);
    if (!strcmp(hp->rope_scaling, "longrope")) F32(KLD_K_ROPE_SCALING_ATTN_FACTOR, hp->rope_attn_factor);
    if (!strcmp(hp->rope_scaling, "linear")) {
        ok = ok && !kld_gguf_writer_set_str(w, KEY(KLD_K_ROPE_SCALING_TYPE), "linear");
        F32(KLD_K_ROPE_SCALING_FACTOR, 1.0 / hp->rope_freq_scale);
    }
#undef F32
#undef U32
#undef KEY
    if (!ok) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    kld_status s = hp->sw.mla ? put_mla(src, hp, w, err) : KLD_OK;
    if (!s) s = kld_hf_moe_put_hparams(hp, w, err);
    if (!s) s = kld_hf_shortconv_put_hparams(hp, w, err);
    if (!s) s = kld_hf_put_hparams_qwen3next(hp, w, err);
    return s ? s : kld_hf_put_hparams_gptoss(hp, w, err);
}
