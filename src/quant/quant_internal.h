/* quant_internal.h — shared inside src/quant: the Hugging Face tensor table
 * that convert_hf.c builds for write_gguf.c. */
#ifndef KLD_QUANT_INTERNAL_H
#define KLD_QUANT_INTERNAL_H

#include "io/gguf_writer.h"
#include "model/weights.h"
#include "quant/quant.h"

typedef struct kld_hf_tensors {
    kld_tensor *tensors; /* views into the source, or into owned[] (permuted rows) */
    char **names;        /* GGUF names */
    void **owned;
    size_t n;
} kld_hf_tensors;

/* Binds the checkpoint's weights, lists them under GGUF names (q/k rows
 * permuted where needed) and writes the model and tokenizer metadata. */
kld_status kld_hf_convert(const kld_source *src, const kld_hparams *hp, kld_gguf_writer *w,
                          kld_hf_tensors *out, FILE *log, kld_error *err);
/* Only the listing: bound weights under GGUF names, as stored. */
kld_status kld_hf_list(const kld_source *src, const kld_hparams *hp, kld_hf_tensors *out,
                       kld_error *err);
void kld_hf_tensors_free(kld_hf_tensors *t);
/* convert_hf_meta.c: whether a GGUF of hp->arch can carry this checkpoint
 * (architecture, RoPE scaling, sliding layout, query scale), and its
 * hyper-parameter keys as llama.cpp's converter writes them. */
kld_status kld_hf_check_convertible(const kld_source *src, const kld_hparams *hp, kld_error *err);
kld_status kld_hf_put_hparams(const kld_source *src, const kld_hparams *hp, kld_gguf_writer *w,
                              kld_error *err);
/* convert_hf_moe.c: a renormalisation rule the GGUF cannot carry is
 * refused; per-expert tensors become stacked blk.N.ffn_*_exps (owned);
 * the expert keys; the tensors llama.cpp's converter always writes in
 * float32 (routers, short-convolution kernels). */
kld_status kld_hf_moe_check(const kld_source *src, const kld_hparams *hp, kld_error *err);
kld_status kld_hf_moe_stack(kld_hf_tensors *o, const kld_hparams *hp, kld_error *err);
kld_status kld_hf_moe_put_hparams(const kld_hparams *hp, kld_gguf_writer *w, kld_error *err);
bool kld_hf_keeps_f32(const char *name);
/* convert_hf_lfm2.c: Conv1d kernels squeezed to 2-D; LFM2's layer keys. */
void kld_hf_shortconv_squeeze(kld_hf_tensors *o);
kld_status kld_hf_shortconv_put_hparams(const kld_hparams *hp, kld_gguf_writer *w, kld_error *err);

/* convert_hf_qwen3next.c: Qwen3-Next's DeltaNet tensors appended to the
 * listing (pre-FFN norm renamed); its keys (nothing for other architectures). */
kld_status kld_hf_list_qwen3next(const kld_weights *w, const kld_hparams *hp, kld_hf_tensors *out,
                                 kld_error *err);
kld_status kld_hf_put_hparams_qwen3next(const kld_hparams *hp, kld_gguf_writer *w, kld_error *err);
/* Appends t under name; the table owns `owned` from then on (on failure, false, the caller). */
bool kld_hf_append(kld_hf_tensors *o, const kld_tensor *t, const char *name, void *owned);

/* convert_hf_gptoss.c: gpt-oss's merged experts (their rebuilt buffers taken over from w),
 * expert and router biases and sinks appended to the listing; its keys (nothing for other
 * architectures). */
kld_status kld_hf_list_gptoss(kld_weights *w, const kld_hparams *hp, kld_hf_tensors *out, kld_error *err);
kld_status kld_hf_put_hparams_gptoss(const kld_hparams *hp, kld_gguf_writer *w, kld_error *err);

/* convert_hf_gemma4.c: Gemma 4's generated rope_freqs, per-layer embeddings, layer scales and
 * the 26B-A4B's router scales and second FFN norms appended to the listing (nothing for other
 * architectures); its keys (the whole key set: called instead of the common writer). */
kld_status kld_hf_list_gemma4(const kld_weights *w, const kld_hparams *hp, kld_hf_tensors *out, kld_error *err);
kld_status kld_hf_put_hparams_gemma4(const kld_hparams *hp, kld_gguf_writer *w, kld_error *err);
/* Gemma 4's stacked ffn_gate_exps and ffn_up_exps fused into ffn_gate_up_exps, as the converter
 * writes experts.gate_up_proj (runs after kld_hf_moe_stack; nothing for other architectures). */
kld_status kld_hf_gemma4_fuse_gate_up(kld_hf_tensors *o, const kld_hparams *hp, kld_error *err);

#endif
