/* hf_roundtrip.h — the check every Hugging Face round-trip test (test_*_hf.c) makes of a
 * checkpoint converted back to GGUF (`kldeval quantize HF OUT keep`): the converted file
 * against the synthesized GGUF the checkpoint was copied from (every tensor, the family's keys)
 * and the checkpoint's logits against the converted file's. Where families really differ (how
 * the converter writes a tensor, which keys it adds or leaves out) a hook says so. */
#ifndef KLD_TEST_HF_ROUNDTRIP_H
#define KLD_TEST_HF_ROUNDTRIP_H

#include "io/gguf.h"
#include "tensor/tensor.h"
#include "test_forward_models.h"

#include <stdbool.h>
#include <stdint.h>

/* True when the converted GGUF a holds y (a tensor of the synthesized GGUF) as the family's
 * converter writes it; *merged counts the synthesized tensors it writes inside another one (a
 * holds that many tensors fewer). */
typedef bool (*hf_rt_tensor_fn)(const kld_gguf *a, const kld_tensor *y, uint64_t *merged, void *ctx);
/* The family's own key checks of a (converted) against b (synthesized). */
typedef void (*hf_rt_keys_fn)(const char *label, const kld_gguf *a, const kld_gguf *b, void *ctx);

typedef struct hf_rt_family {
    hf_rt_tensor_fn tensor_equal; /* NULL: hf_rt_same_tensor */
    const char *key_prefix;       /* every b key with this prefix equal in a, and no other of a's:
                                     "gemma4." ...; NULL: only the hook's keys */
    int min_keys;                 /* with key_prefix: at least this many such keys */
    hf_rt_keys_fn keys;           /* NULL: none */
    void *ctx;                    /* passed to the hooks */
} hf_rt_family;

/* The tensor of y's name in a with y's type, dims, shape and bytes. */
bool hf_rt_same_tensor(const kld_gguf *a, const kld_tensor *y);

/* Converts the checkpoint hf to out ("keep"), then checks out against the synthesized GGUF
 * gguf as f says and, with ids (n_ids of them), that hf and out give the same logits bit for
 * bit. */
void hf_rt_check(const hf_rt_family *f, const char *label, const char *gguf, const char *hf, const char *out,
                 const int32_t *ids, int n_ids);

/* Copies the GGUF in to out with each layer's ffn_gate_exps + ffn_up_exps as one
 * ffn_gate_up_exps [n_embd, 2·n_ff_exp, n_expert] (each expert's gate rows, then its up rows:
 * llama.cpp's converter with --fuse-gate-up-exps); false when it holds no experts. */
bool gguf_fuse_gate_up_exps(const char *in, const char *out);
/* The MoE shape synthesized (float32 and q8_0 weights) and rewritten by gguf_fuse_gate_up_exps:
 * the fused file's logits equal the unfused one's bit for bit. */
void hf_rt_fused_gguf(const char *label, const synth_shape *shape);
/* The same rewrite of a MoE arch whose llama.cpp graph has no ffn_gate_up_exps (qwen3moe): refused
 * with an error naming the file and the tensor. */
void hf_rt_fused_gguf_refused(const char *arch);

/* Copies the Hugging Face folder in (model.safetensors, config.json) to out with each layer's
 * per-expert mlp.experts.E.{gate,up,down}_proj.weight as transformers 5 saves them:
 * mlp.experts.gate_up_proj [X, 2·F, E] (each expert's gate rows, then its up rows) and
 * mlp.experts.down_proj [X, E, F], no .weight; false when it holds no experts. */
bool hf_rt_fuse_experts(const char *in, const char *out);

/* hf_rt_fuse_experts of the checkpoint hf into hf-fused-experts: its logits over ids equal hf's bit
 * for bit, and both convert (keep) to the same tensors and keys. */
void hf_rt_fused_hf(const char *label, const char *hf, const int32_t *ids, int n_ids);

/* The checkpoint hf copied with one more F32 tensor named tensor (a quantization scale): opening and
 * converting it are refused with errors naming its model.safetensors and the tensor (and why
 * for the open). */
void hf_rt_scale_refused(const char *label, const char *hf, const char *tensor, const char *why);

/* Integer / real key of g, or absent. */
int64_t hf_rt_key_int(const kld_gguf *g, const char *key, int64_t absent);
double hf_rt_key_num(const kld_gguf *g, const char *key, double absent);

#endif
