/* synth_qwen3next_hf.h — test-only Qwen3-Next copies of a GGUF written by
 * synth_write_gguf (arch "qwen3next"): its Hugging Face checkpoint, and
 * GGUFs rewritten with the legacy fused ssm_in or an extra MTP block. */
#ifndef KLD_TEST_SYNTH_QWEN3NEXT_HF_H
#define KLD_TEST_SYNTH_QWEN3NEXT_HF_H

#include "st_writer.h"
#include "test_forward_models.h"

typedef struct q3n_hf_opts {
    bool bf16;              /* 2-D tensors in BF16 (else F32) */
    bool mtp;               /* add mtp.* tensors and "num_nextn_predict_layers": 1 */
    const char *drop;       /* leave out this HF tensor (error tests), or NULL */
    const char *bad_shape;  /* give this HF tensor one row too many, or NULL */
    hf_edit edits[8];       /* config.json edits (the new value as JSON text; NULL: delete the key),
                               ended by a NULL key */
} q3n_hf_opts;

/* Writes dir/model.safetensors and dir/config.json (dir must exist). */
bool q3n_write_hf(const synth_shape *s, const char *gguf_path, const char *dir, const q3n_hf_opts *opt);

/* Copies the GGUF in to out, with every layer's attn_qkv + attn_gate as
 * one interleaved ssm_in (legacy_ssm_in) and/or one MTP block appended. */
bool q3n_rewrite_gguf(const synth_shape *s, const char *in, const char *out, bool legacy_ssm_in, bool mtp);

/* Qwen3.5 (s->arch "qwen35", dense): dir/model.safetensors and config.json
 * as transformers' Qwen3_5ForCausalLM saves them (model_type qwen3_5_text,
 * in_proj_qkv / in_proj_z / in_proj_b / in_proj_a, v heads grouped by q/k
 * head: the GGUF's tiled order undone), from the GGUF at gguf_path. */
bool q35_write_hf(const synth_shape *s, const char *gguf_path, const char *dir);

typedef struct q35_hf_opts {
    bool fused_experts;  /* qwen35moe: mlp.experts.gate_up_proj [X, 2F, E] + down_proj [X, E, F]
                            (transformers 5's Qwen3_5MoeExperts), not one tensor per expert */
    bool wrapped;        /* Qwen3_5(Moe)ForConditionalGeneration: model_type qwen3_5 / qwen3_5_moe with
                            the text config in "text_config", tensors under model.language_model.*,
                            plus a vision tensor */
    const char *drop;    /* leave out this HF tensor (its name as written), or NULL */
    hf_edit edits[8];    /* edits of the text config (ended by a NULL key) */
    hf_edit outer_edits[4]; /* wrapped: edits of the outer config */
} q35_hf_opts;

/* q35_write_hf with options (opt NULL: none). */
bool q35_write_hf_opts(const synth_shape *s, const char *gguf_path, const char *dir, const q35_hf_opts *opt);

#endif
