/* synth_glm4moe_hf.h — test-only Hugging Face copy of a glm4moe GGUF written
 * by synth_write_gguf: safetensors + config.json as transformers'
 * Glm4MoeForCausalLM saves them. */
#ifndef KLD_TEST_SYNTH_GLM4MOE_HF_H
#define KLD_TEST_SYNTH_GLM4MOE_HF_H

#include "st_writer.h"
#include "test_forward_models.h"

typedef hf_edit glm_edit; /* a config.json edit */

/* Writes dir/model.safetensors (F32; per-expert mlp.experts.E.*, mlp.shared_experts.*,
 * mlp.gate.e_score_correction_bias, an appended MTP layer) and dir/config.json
 * (num_nextn_predict_layers 1) from the GGUF at gguf; leaves out the HF tensor drop
 * (or NULL) and applies the edits ed (NULL-key ended, or NULL). */
bool glm_write_hf(const synth_shape *s, const char *gguf, const char *dir, const char *drop, const glm_edit *ed);

#endif
