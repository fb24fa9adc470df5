/* write_gguf.c — `kldeval quantize`'s library half: a GGUF in, the policy's
 * plan applied, a GGUF out with the input's metadata (general.file_type and
 * general.quantization_version re-set last, as llama-quantize does; the
 * quantize.imatrix.* keys when an importance matrix is used; kldeval.lora.*
 * when an adapter is merged, delta_merge.c) and tensors in llama-quantize's
 * order. Written under a temporary name, then renamed. */
#include "quant/quant_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static kld_status copy_metadata(const kld_gguf *g, kld_gguf_writer *w, kld_error *err) {
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const kld_gguf_kv *kv = &g->kv[i];
        if (kld_str_eq(kv->key, "general.file_type") ||
            kld_str_eq(kv->key, "general.quantization_version") ||
            kld_str_eq(kv->key, "general.alignment")) /* the writer aligns to 32 */
            continue;
        char *key = kld_strndup(kv->key.ptr, (size_t)kv->key.len);
        if (!key) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
        kld_status s = kld_gguf_writer_copy_value(w, key, &kv->value);
        free(key);
        if (s) return kld_fail(err, s, "out of memory copying metadata");
    }
    return KLD_OK;
}

/* MODEL+ADAPTER: which adapter was merged, at which scale. */
static kld_status put_merge_keys(const kld_quant_merge *m, kld_gguf_writer *w, kld_error *err) {
    if (kld_gguf_writer_set_str(w, "kldeval.lora.adapter", m->adapter) ||
        kld_gguf_writer_set_f32(w, "kldeval.lora.scale", m->scale) ||
        kld_gguf_writer_set_u32(w, "kldeval.lora.tensors", (uint32_t)m->n) ||
        (m->has_alpha && kld_gguf_writer_set_f32(w, "kldeval.lora.alpha", (float)m->alpha)))
        return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    return KLD_OK;
}

/* The merged weight at the planned type (float32 as merged, else converted). */
static kld_status merged_tensor(const kld_quant_item *it, const kld_quant_delta *d, int n_threads,
                                void **out, kld_error *err) {
    float *f = NULL;
    kld_status s = kld_quant_merged_f32(it->t, it->name, d, &f, err);
    if (s) return s;
    if (it->dst_type == KLD_TYPE_F32) {
        *out = f;
        return KLD_OK;
    }
    kld_tensor mt = *it->t;
    mt.type = KLD_TYPE_F32;
    mt.data = f;
    mt.nbytes = (uint64_t)kld_tensor_nelements(&mt) * sizeof(float);
    if (!(*out = malloc(it->dst_bytes ? it->dst_bytes : 1)))
        s = kld_fail(err, KLD_ERR_NOMEM, "tensor '%s': out of memory", it->name);
    else
        s = kld_quant_tensor(&mt, it->dst_type, it->imatrix, n_threads, *out, err);
    free(f);
    return s;
}

kld_status kld_quantize_file(const char *in_path, const char *out_path, const char *policy,
                             const kld_quantize_opts *opts, kld_quant_plan *plan_out,
                             kld_error *err) {
    kld_quantize_opts none = {0};
    if (!opts) opts = &none;
    kld_source *src = NULL;
    kld_policy *pol = NULL;
    kld_imatrix *im = NULL;
    kld_gguf_writer *w = NULL;
    kld_quant_plan plan = {0};
    void **bufs = NULL;
    const kld_quant_delta **deltas = NULL;
    char *tmp = NULL;
    kld_hparams hp;
    kld_status s = kld_policy_parse(policy, &pol, err);
    kld_hf_tensors hf = {0};
    if (!s) s = kld_source_open(in_path, &src, err);
    if (!s && src->format != KLD_FORMAT_GGUF &&
        !(src->format == KLD_FORMAT_SAFETENSORS && src->hf_config))
        s = kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: quantize reads GGUF files and Hugging Face "
                     "checkpoints (safetensors + config.json), not %s", in_path,
                     kld_format_name(src->format));
    if (!s) s = kld_hparams_read(src, &hp, err);
    const char *im_path = opts->imatrix_path ? opts->imatrix_path : pol ? pol->imatrix_path : NULL;
    if (!s && im_path) s = kld_imatrix_read(im_path, &im, err);
    if (!s && !(w = kld_gguf_writer_create())) s = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    if (!s && src->format == KLD_FORMAT_GGUF) {
        s = copy_metadata(src->gguf, w, err);
        if (!s) s = kld_quant_plan_make(pol, &hp, src->tensors, NULL, src->n_tensors, im, &plan, err);
    } else if (!s) {
        s = kld_hf_convert(src, &hp, w, &hf, opts->notes ? opts->notes : opts->log, err);
        if (!s) s = kld_quant_plan_make(pol, &hp, hf.tensors, (const char *const *)hf.names, hf.n,
                                        im, &plan, err);
        if (!s && plan.ftype == UINT32_MAX) plan.ftype = 1; /* keep: mostly f16 as converted */
    }
    if (!s) {
        int64_t ft = 0;
        uint32_t ftype = plan.ftype;
        if (ftype == UINT32_MAX) /* keep: the input's own */
            ftype = src->gguf && kld_gguf_get_int(src->gguf, "general.file_type", &ft) ? (uint32_t)ft : 0;
        if (kld_gguf_writer_set_u32(w, "general.quantization_version", 2) ||
            kld_gguf_writer_set_u32(w, "general.file_type", ftype))
            s = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    }
    if (!s && im) {
        if (kld_gguf_writer_set_str(w, "quantize.imatrix.file", im_path) ||
            (im->dataset && kld_gguf_writer_set_str(w, "quantize.imatrix.dataset", im->dataset)) ||
            kld_gguf_writer_set_i32(w, "quantize.imatrix.entries_count", (int32_t)im->n) ||
            kld_gguf_writer_set_i32(w, "quantize.imatrix.chunks_count", im->chunks))
            s = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    }
    if (!s && opts->merge) s = put_merge_keys(opts->merge, w, err);
    if (!s && (!(bufs = calloc(plan.n ? plan.n : 1, sizeof *bufs)) ||
               !(deltas = calloc(plan.n ? plan.n : 1, sizeof *deltas))))
        s = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    if (!s && opts->merge) s = kld_quant_plan_merge(&plan, opts->merge, im, deltas, err);
    for (size_t i = 0; !s && i < plan.n; i++) {
        const kld_quant_item *it = &plan.items[i];
        const void *data = it->t->data;
        if (deltas[i]) {
            s = merged_tensor(it, deltas[i], opts->n_threads, &bufs[i], err);
            data = bufs[i];
        } else if (it->convert) {
            if (!(bufs[i] = malloc(it->dst_bytes ? it->dst_bytes : 1))) {
                s = kld_fail(err, KLD_ERR_NOMEM, "tensor '%s': out of memory", it->name);
                break;
            }
            s = kld_quant_tensor(it->t, it->dst_type, it->imatrix, opts->n_threads, bufs[i], err);
            data = bufs[i];
        }
        if (!s && opts->log) {
            char b1[16], b2[16];
            fprintf(opts->log, "[%4zu/%4zu] %-36s %-7s -> %-7s%s%s%s\n", i + 1, plan.n, it->name,
                    kld_type_name(it->src_type, b1), kld_type_name(it->dst_type, b2),
                    it->merged ? " (LoRA merged)" : "", it->fallback ? " (fallback)" : "",
                    it->imatrix ? " (imatrix)" : "");
        }
        int nd = 1;
        for (int d = 0; d < KLD_MAX_DIMS; d++)
            if (it->t->ne[d] > 1) nd = d + 1;
        if (it->t->n_dims > nd) nd = it->t->n_dims;
        if (!s) s = kld_gguf_writer_add_tensor(w, it->name, it->dst_type, nd, it->t->ne, data,
                                               it->dst_bytes, err);
        if (!s && opts->progress) opts->progress(opts->progress_ctx, i + 1, plan.n, it->name);
    }
    if (!s) {
        size_t n = strlen(out_path) + 32;
        if (!(tmp = malloc(n))) s = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
        else snprintf(tmp, n, "%s.tmp.%ld", out_path, (long)getpid());
    }
    if (!s) s = kld_gguf_writer_write(w, tmp, err);
    if (!s && rename(tmp, out_path) != 0) {
        s = kld_fail(err, KLD_ERR_IO, "%s: cannot rename %s into place: %s", out_path, tmp,
                     strerror(errno));
        remove(tmp);
    }
    if (!s && opts->log) kld_quant_plan_print(&plan, opts->log);
    for (size_t i = 0; bufs && i < plan.n; i++) free(bufs[i]);
    free(bufs);
    free(deltas);
    free(tmp);
    kld_gguf_writer_free(w);
    if (plan_out) {
        *plan_out = plan;
        plan_out->items = NULL; /* they point into the closed source */
        plan_out->n = 0;
    }
    kld_quant_plan_free(&plan);
    kld_hf_tensors_free(&hf);
    kld_imatrix_free(im);
    kld_policy_free(pol);
    if (src) kld_source_close(src);
    return s;
}
