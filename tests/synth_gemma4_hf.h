/* synth_gemma4_hf.h — test-only Hugging Face copy of a gemma4 GGUF written by
 * synth_write_gguf: safetensors + config.json as Gemma 4's checkpoints hold
 * them, the text-only form (model_type gemma4_text, model.*) or the
 * multimodal one (model_type gemma4 with text_config, model.language_model.*
 * beside vision and audio towers). */
#ifndef KLD_TEST_SYNTH_GEMMA4_HF_H
#define KLD_TEST_SYNTH_GEMMA4_HF_H

#include "st_writer.h"
#include "test_forward_models.h"

/* Writes dir/model.safetensors (F32, rope_freqs left out: the converter generates it) and
 * dir/config.json from the GGUF at gguf written for s (its sliding layers rotate every dim:
 * the converter's rope.dimension_count_swa); wrapped: the multimodal form. Leaves out the HF
 * tensor drop (or NULL) and applies the edits ed (NULL-key ended, or NULL) to the language
 * model's config (text_config when wrapped). */
bool g4_write_hf(const synth_shape *s, const char *gguf, const char *dir, bool wrapped, const char *drop,
                 const hf_edit *ed);

#endif
