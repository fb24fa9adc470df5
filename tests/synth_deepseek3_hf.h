/* synth_deepseek3_hf.h — test-only Hugging Face copy of a deepseek2 GGUF
 * written by synth_write_gguf: safetensors + config.json as DeepSeek V3's
 * (or V2's) checkpoints hold them. */
#ifndef KLD_TEST_SYNTH_DEEPSEEK3_HF_H
#define KLD_TEST_SYNTH_DEEPSEEK3_HF_H

#include "synth_glm4moe_hf.h" /* glm_edit: a config.json edit */
#include "test_forward_models.h"

/* Writes dir/model.safetensors (F32; MLA's q_a_proj / q_a_layernorm / q_b_proj or q_proj,
 * kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj; per-expert mlp.experts.E.*,
 * mlp.shared_experts.*, mlp.gate.e_score_correction_bias; an appended MTP layer) and
 * dir/config.json (model_type deepseek_v3, num_nextn_predict_layers 1) from the GGUF at
 * gguf written for s; leaves out the HF tensor drop (or NULL) and applies the edits ed
 * (NULL-key ended, or NULL). */
bool ds_write_hf(const synth_shape *s, const char *gguf, const char *dir, const char *drop, const glm_edit *ed);

#endif
