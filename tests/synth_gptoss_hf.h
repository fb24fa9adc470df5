/* synth_gptoss_hf.h — test-only Hugging Face copy of a gpt-oss GGUF written
 * by synth_write_gguf: safetensors + config.json as transformers'
 * GptOssForCausalLM saves them (the released MXFP4 layout when the GGUF's
 * experts are mxfp4, float experts otherwise). */
#ifndef KLD_TEST_SYNTH_GPTOSS_HF_H
#define KLD_TEST_SYNTH_GPTOSS_HF_H

#include "st_writer.h"
#include "test_forward_models.h"

typedef hf_edit oss_edit; /* a config.json edit */

typedef struct oss_hf_opts {
    const char *drop;        /* leave this HF tensor out, or NULL */
    const oss_edit *ed;      /* config.json edits (NULL-key ended), or NULL */
    bool odd_gate_up;        /* gate_up_proj_blocks / _scales (or gate_up_proj) of layer 0 get one row more */
    bool short_scales;       /* layer 0's gate_up_proj_scales one block column short of its _blocks */
} oss_hf_opts;

/* Writes dir/model.safetensors and dir/config.json from the gpt-oss GGUF at gguf:
 * mlp.experts.gate_up_proj_blocks / _scales and down_proj_blocks / _scales (U8, the
 * OpenAI nibble order) from MXFP4 experts, or gate_up_proj [X, n_embd, 2·ff] and
 * down_proj [X, ff, n_embd] from float ones (F32 / F16 / BF16, the GGUF's bits); gate (even) and up (odd) interleaved;
 * self_attn.sinks, mlp.router.*; o may be NULL. */
bool oss_write_hf(const synth_shape *s, const char *gguf, const char *dir, const oss_hf_opts *o);

/* The value (as a float) of element k of expert row r's MXFP4 blocks written by
 * oss_write_hf, decoded by OpenAI's rule (low nibble = even value, scale 2^(e - 127))
 * from the raw HF bytes: blocks [rows][cols/32][16], scales [rows][cols/32]. */
float oss_hf_mxfp4_value(const uint8_t *blocks, const uint8_t *scales, int64_t cols, int64_t r, int64_t k);

#endif
