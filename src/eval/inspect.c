/* inspect.c — the facts of a model, a policy's plan and an adapter
 * (inspect.h). */
#include "eval/inspect.h"

#include "model/hparams.h"
#include "tokenizer/tokenizer.h"

#include <sys/stat.h>

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define META_ARRAY_PREVIEW 8 /* array elements shown before "…" */

static json_t *str_json(kld_str s) {
    json_t *j = json_stringn_nocheck(s.ptr, (size_t)s.len);
    if (!kld_utf8_valid(s.ptr, s.len)) {
        json_decref(j);
        j = json_string("<invalid UTF-8>");
    }
    return j;
}

static json_t *gguf_scalar_json(const kld_gguf_value *v) {
    switch (v->type) {
    case KLD_GGUF_UINT8: case KLD_GGUF_UINT16: case KLD_GGUF_UINT32: case KLD_GGUF_UINT64:
        return v->v.u > (uint64_t)INT64_MAX ? json_real((double)v->v.u) : json_integer((json_int_t)v->v.u);
    case KLD_GGUF_INT8: case KLD_GGUF_INT16: case KLD_GGUF_INT32: case KLD_GGUF_INT64:
        return json_integer(v->v.i);
    case KLD_GGUF_FLOAT32: case KLD_GGUF_FLOAT64: return json_real(v->v.f);
    case KLD_GGUF_BOOL: return json_boolean(v->v.b);
    case KLD_GGUF_STRING: return str_json(v->v.s);
    default: return json_null();
    }
}

/* Arrays are summarised: type, length and the first few elements. */
static json_t *gguf_value_json(const kld_gguf_value *v) {
    if (v->type != KLD_GGUF_ARRAY) return gguf_scalar_json(v);
    json_t *o = json_object(), *items = json_array();
    uint64_t n = v->v.arr.n;
    json_object_set_new(o, "array_of", json_string(kld_gguf_vtype_name(v->v.arr.elem_type)));
    json_object_set_new(o, "length", json_integer((json_int_t)n));
    for (uint64_t i = 0; i < n && i < META_ARRAY_PREVIEW; i++) {
        kld_gguf_vtype et = v->v.arr.elem_type;
        double f;
        int64_t k;
        if (et == KLD_GGUF_STRING) json_array_append_new(items, str_json(v->v.arr.strs[i]));
        else if (et == KLD_GGUF_ARRAY) json_array_append_new(items, gguf_value_json(&v->v.arr.items[i]));
        else if (et == KLD_GGUF_FLOAT32 || et == KLD_GGUF_FLOAT64) {
            kld_gguf_arr_float(v, i, &f);
            json_array_append_new(items, json_real(f));
        } else if (kld_gguf_arr_int(v, i, &k)) json_array_append_new(items, json_integer(k));
        else json_array_append_new(items, json_null());
    }
    json_object_set_new(o, "first", items);
    return o;
}

static json_t *meta_json(const kld_source *src) {
    if (src->format == KLD_FORMAT_GGUF) {
        json_t *o = json_object();
        for (uint64_t i = 0; i < src->gguf->n_kv; i++) {
            const kld_gguf_kv *kv = &src->gguf->kv[i];
            char *key = kld_strndup(kv->key.ptr, kv->key.len);
            if (!key) continue;
            json_object_set_new(o, key, gguf_value_json(&kv->value));
            free(key);
        }
        return o;
    }
    if (src->format == KLD_FORMAT_SAFETENSORS)
        return src->hf_config ? json_deep_copy(src->hf_config) : json_object();
    const kld_llama2c_config *c = &src->l2c->cfg;
    return json_pack("{s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:b}", "dim", c->dim, "hidden_dim",
                     c->hidden_dim, "n_layers", c->n_layers, "n_heads", c->n_heads, "n_kv_heads",
                     c->n_kv_heads, "vocab_size", c->vocab_size, "seq_len", c->seq_len,
                     "shared_classifier", c->shared_classifier);
}

/* Gemma 4's layer-by-layer geometry (NULL when every layer has the model's):
 * head size, rotary dims and KV heads per layer, FFN widths, the layer whose
 * KV cache each layer reads, the per-layer embedding width. */
static json_t *per_layer_json(const kld_hparams *hp) {
    bool differs = hp->n_embd_per_layer > 0 || hp->n_layer_kv > 0;
    for (int64_t il = 0; il < hp->n_layer; il++)
        differs |= kld_hp_head_dim(hp, il) != hp->head_dim || kld_hp_n_rot(hp, il) != hp->n_rot ||
                   kld_hp_n_head_kv(hp, il) != hp->n_head_kv || kld_hp_n_ff(hp, il) != hp->n_ff;
    if (!differs) return NULL;
    json_t *head = json_array(), *rot = json_array(), *kv = json_array(), *ff = json_array(), *src = json_array();
    for (int64_t il = 0; il < hp->n_layer; il++) {
        json_array_append_new(head, json_integer(kld_hp_head_dim(hp, il)));
        json_array_append_new(rot, json_integer(kld_hp_n_rot(hp, il)));
        json_array_append_new(kv, json_integer(kld_hp_n_head_kv(hp, il)));
        json_array_append_new(ff, json_integer(kld_hp_n_ff(hp, il)));
        json_array_append_new(src, json_integer(kld_hp_kv_source(hp, il)));
    }
    return json_pack("{s:o, s:o, s:o, s:o, s:o, s:I}", "head_dim", head, "n_rot", rot, "n_head_kv", kv, "n_ff", ff,
                     "kv_source", src, "n_embd_per_layer", (json_int_t)hp->n_embd_per_layer);
}

static json_t *hparams_json(const kld_source *src) {
    kld_hparams hp;
    kld_error err = {0};
    if (kld_hparams_read(src, &hp, &err) != KLD_OK) return json_pack("{s:s}", "error", err.msg);
    json_t *o = json_object();
    json_object_set_new(o, "arch", json_string(hp.arch));
    json_object_set_new(o, "name", json_string(hp.name));
#define I(f) json_object_set_new(o, #f, json_integer(hp.f))
    I(n_embd); I(n_layer); I(n_head); I(n_head_kv); I(head_dim); I(n_ff); I(n_vocab);
    I(n_ctx_train); I(n_rot);
#undef I
    json_object_set_new(o, "rope_type", json_string(hp.rope_type == KLD_ROPE_NEOX ? "neox" : "norm"));
    json_object_set_new(o, "rope_freq_base", json_real(hp.rope_freq_base));
    json_object_set_new(o, "rope_freq_scale", json_real(hp.rope_freq_scale));
    json_object_set_new(o, "rope_scaling", json_string(hp.rope_scaling));
    json_object_set_new(o, "norm_eps", json_real(hp.norm_eps));
    json_object_set_new(o, "tied_output", json_boolean(hp.tied_output));
    if (hp.attn_softcap > 0) json_object_set_new(o, "attn_softcap", json_real(hp.attn_softcap));
    if (hp.final_softcap > 0) json_object_set_new(o, "final_softcap", json_real(hp.final_softcap));
    if (hp.sliding_window > 0) json_object_set_new(o, "sliding_window", json_integer(hp.sliding_window));
    if (hp.n_layer_attn < hp.n_layer) { /* hybrids: "a" attention, "c" short convolution per layer */
        char kinds[KLD_MAX_LAYER + 1];
        for (int64_t il = 0; il < hp.n_layer; il++)
            kinds[il] = kld_hparams_layer_kind(&hp, il) == KLD_LAYER_SHORTCONV ? 'c'
                        : kld_hparams_layer_kind(&hp, il) == KLD_LAYER_DELTANET  ? 'd' : 'a';
        kinds[hp.n_layer] = '\0';
        json_object_set_new(o, "layer_kinds", json_string(kinds));
        if (strchr(kinds, 'c')) json_object_set_new(o, "shortconv_l_cache", json_integer(hp.shortconv_l_cache));
        if (strchr(kinds, 'd'))
            json_object_set_new(o, "deltanet", json_pack("{s:I, s:I, s:I, s:I, s:I}", "conv_kernel",
                                (json_int_t)hp.dn_conv, "n_k_heads", (json_int_t)hp.dn_n_k_heads,
                                "head_k", (json_int_t)hp.dn_head_k, "n_v_heads", (json_int_t)hp.dn_n_v_heads,
                                "head_v", (json_int_t)hp.dn_head_v));
    }
    if (hp.n_expert > 0) {
        json_object_set_new(o, "n_expert", json_integer(hp.n_expert));
        json_object_set_new(o, "n_expert_used", json_integer(hp.n_expert_used));
        json_object_set_new(o, "n_ff_exp", json_integer(hp.n_ff_exp));
        if (hp.n_ff_shexp > 0) json_object_set_new(o, "n_ff_shexp", json_integer(hp.n_ff_shexp));
        static const char *const gating[] = {"softmax-topk", "topk-softmax", "sigmoid-topk"};
        json_object_set_new(o, "moe_gating", json_string(gating[hp.moe_gating]));
        if (hp.moe_w_scale != 0 && hp.moe_w_scale != 1) json_object_set_new(o, "moe_w_scale", json_real(hp.moe_w_scale));
        if (hp.n_layer_dense_lead > 0)
            json_object_set_new(o, "n_layer_dense_lead", json_integer(hp.n_layer_dense_lead));
        if (hp.sw.moe_biases) json_object_set_new(o, "moe_biases", json_true());
    }
    static const char *const acts[] = {"silu", "gelu_tanh", "swiglu_oai"};
    json_object_set_new(o, "ffn_act", json_string(acts[hp.sw.act]));
    if (hp.sw.attn_sinks) json_object_set_new(o, "attn_sinks", json_true());
    if (hp.sw.mla) /* DeepSeek's latent attention: ranks, head split, YaRN's mscale in the scale */
        json_object_set_new(o, "mla", json_pack("{s:I, s:I, s:I, s:I, s:I, s:f}", "q_lora_rank",
                            (json_int_t)hp.n_lora_q, "kv_lora_rank", (json_int_t)hp.n_lora_kv, "qk_nope",
                            (json_int_t)(hp.head_dim - hp.n_rot), "qk_rope", (json_int_t)hp.n_rot, "v_head",
                            (json_int_t)hp.head_dim_v, "attn_scale", hp.attn_scale));
    if (hp.sw.v_norm) json_object_set_new(o, "v_norm", json_true()); /* Gemma 4 */
    json_t *pl = per_layer_json(&hp);
    if (pl) json_object_set_new(o, "per_layer", pl);
    if (hp.sliding_window > 0 && hp.rope_freq_base_swa != hp.rope_freq_base)
        json_object_set_new(o, "rope_freq_base_swa", json_real(hp.rope_freq_base_swa));
    if (hp.sliding_window > 0) { /* "s" a sliding layer, "." a global one */
        char swa[KLD_MAX_LAYER + 1];
        for (int64_t il = 0; il < hp.n_layer; il++) swa[il] = kld_hparams_layer_swa(&hp, il) ? 's' : '.';
        swa[hp.n_layer] = '\0';
        json_object_set_new(o, "swa_layers", json_string(swa));
    }
    return o;
}

static json_t *tokenizer_json(const kld_source *src) {
    kld_tokenizer *tok;
    kld_error err = {0};
    if (kld_tok_open_source(src, &tok, &err) != KLD_OK) return json_pack("{s:s}", "error", err.msg);
    kld_tok_summary s;
    kld_tok_summarize(tok, &s);
    json_t *o = json_pack("{s:s,s:s,s:i,s:i,s:i,s:i,s:i,s:b,s:b,s:s,s:I,s:i,s:i}", "kind", s.kind,
                          "source", s.source, "n_vocab", s.n_vocab, "bos_id", s.bos_id, "eos_id",
                          s.eos_id, "unk_id", s.unk_id, "pad_id", s.pad_id, "add_bos", s.add_bos,
                          "add_eos", s.add_eos, "pre", s.pre ? s.pre : "", "n_merges",
                          (json_int_t)s.n_merges, "n_added", s.n_added, "n_special", s.n_special);
    kld_tok_free(tok);
    return o;
}

/* The engine's allocation for a session of the requested sizes. */
static json_t *plan_json(const char *path, const kld_inspect_options *opt) {
    kld_model *m;
    kld_error err = {0};
    kld_mem_plan p;
    if (kld_model_open(path, NULL, &m, &err) != KLD_OK) return json_pack("{s:s}", "error", err.msg);
    int64_t ctx = opt->ctx > 0 ? opt->ctx : kld_model_hparams(m)->n_ctx_train;
    /* the default chunk never exceeds the context (small models train on 128) */
    int64_t chunk = opt->chunk > 0 ? opt->chunk : ctx < 512 ? ctx : 512;
    kld_levers lv;
    kld_levers_default(&lv);
    kld_status st = kld_mem_plan_compute_levers(m, ctx, chunk, opt->threads, opt->levers ? opt->levers : &lv,
                                                &p, &err);
    kld_model_close(m);
    if (st) return json_pack("{s:s}", "error", err.msg);
    return json_pack("{s:I,s:I,s:i,s:I,s:I,s:I,s:I,s:s,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "n_ctx", (json_int_t)p.n_ctx,
                     "max_chunk", (json_int_t)p.max_chunk, "threads", p.n_threads, "weights_bytes",
                     (json_int_t)p.weights_bytes, "model_bytes", (json_int_t)p.model_bytes,
                     "kv_bytes", (json_int_t)p.kv_bytes, "kv_token_bytes",
                     (json_int_t)p.kv_token_bytes, "kv_type", p.kv_desc, "recurrent_bytes",
                     (json_int_t)p.recurrent_bytes, "act_bytes", (json_int_t)p.act_bytes,
                     "scratch_bytes", (json_int_t)p.scratch_bytes, "arena_bytes",
                     (json_int_t)p.arena_bytes, "logits_bytes", (json_int_t)p.logits_bytes,
                     "runtime_bytes", (json_int_t)p.runtime_bytes, "total_bytes", (json_int_t)p.total_bytes);
}

static json_t *source_facts(const kld_source *src, const char *model_path, const kld_inspect_options *opt) {
    json_t *f = json_object();
    json_object_set_new(f, "path", json_string(src->path));
    json_object_set_new(f, "format", json_string(kld_format_name(src->format)));
    if (src->format == KLD_FORMAT_GGUF) json_object_set_new(f, "version", json_integer(src->version));
    json_object_set_new(f, "file_bytes", json_integer((json_int_t)src->file_bytes));
    json_object_set_new(f, "hparams", hparams_json(src));

    uint64_t n_params = 0, n_bytes = 0;
    json_t *hist = json_object(), *table = json_array();
    for (size_t i = 0; i < src->n_tensors; i++) {
        const kld_tensor *t = &src->tensors[i];
        char tb[16];
        /* raw safetensors dtypes (gpt-oss's U8 MXFP4 blocks / scales) as written */
        const char *tn = src->st && t->type == KLD_SAFETENSORS_NO_TYPE ? src->st->tensor_dtype[i]
                                                                      : kld_type_name(t->type, tb);
        uint64_t ne = (uint64_t)kld_tensor_nelements(t);
        n_params += ne;
        n_bytes += t->nbytes;
        json_t *h = json_object_get(hist, tn);
        if (!h) {
            h = json_pack("{s:i,s:i,s:i}", "tensors", 0, "params", 0, "bytes", 0);
            json_object_set_new(hist, tn, h);
        }
        json_object_set_new(h, "tensors", json_integer(json_integer_value(json_object_get(h, "tensors")) + 1));
        json_object_set_new(h, "params", json_integer(json_integer_value(json_object_get(h, "params")) + (json_int_t)ne));
        json_object_set_new(h, "bytes", json_integer(json_integer_value(json_object_get(h, "bytes")) + (json_int_t)t->nbytes));
        if (opt->tensors) {
            json_t *shape = json_array();
            for (int d = 0; d < t->n_dims; d++) json_array_append_new(shape, json_integer(t->ne[d]));
            json_array_append_new(table, json_pack("{s:s,s:s,s:o,s:I}", "name", t->name, "type", tn,
                                                   "shape", shape, "bytes", (json_int_t)t->nbytes));
        }
    }
    json_object_set_new(f, "n_tensors", json_integer((json_int_t)src->n_tensors));
    json_object_set_new(f, "n_params", json_integer((json_int_t)n_params));
    json_object_set_new(f, "weight_bytes", json_integer((json_int_t)n_bytes));
    json_object_set_new(f, "bits_per_weight", json_real(n_params ? 8.0 * (double)n_bytes / (double)n_params : 0.0));
    json_object_set_new(f, "types", hist);
    if (opt->tensors) json_object_set_new(f, "tensors", table);
    else json_decref(table);
    json_object_set_new(f, "tokenizer", tokenizer_json(src));
    if (opt->plan) json_object_set_new(f, "plan", plan_json(model_path, opt));
    if (opt->meta) json_object_set_new(f, "metadata", meta_json(src));
    return f;
}

/* The policy's result: types, bytes, bits per weight, fallbacks. */
static json_t *policy_json(const char *policy, const kld_quant_plan *p) {
    json_t *types = json_object(), *fallbacks = json_array();
    for (size_t i = 0; i < p->n; i++) {
        const kld_quant_item *it = &p->items[i];
        char b[16];
        const char *tn = kld_type_name(it->dst_type, b);
        json_t *c = json_object_get(types, tn);
        json_object_set_new(types, tn, json_integer(c ? json_integer_value(c) + 1 : 1));
        if (it->fallback) {
            char w[16];
            json_array_append_new(fallbacks, json_pack("{s:s,s:I,s:s,s:s}", "tensor", it->name,
                                                       "columns", (json_int_t)it->t->ne[0],
                                                       "wanted", kld_type_name(it->wanted_type, w),
                                                       "type", tn));
        }
    }
    return json_pack("{s:s,s:f,s:I,s:I,s:i,s:o,s:o}", "policy", policy, "bits_per_weight",
                     kld_quant_plan_bpw(p), "bytes", (json_int_t)p->dst_bytes, "stored_bytes",
                     (json_int_t)p->src_bytes, "requantized", p->n_requant, "types", types,
                     "fallbacks", fallbacks);
}

/* An adapter's facts as JSON. */
static json_t *adapter_facts_json(const kld_adapter_facts *a) {
    json_t *classes = json_object();
    for (int k = 0; k < a->n_classes; k++)
        json_object_set_new(classes, a->class_name[k], json_integer(a->class_count[k]));
    json_t *o = json_pack("{s:s,s:s,s:o,s:s,s:I,s:I,s:o,s:f,s:f,s:f,s:I,s:o,s:I,s:I,s:I}",
                          "spec", a->spec, "file", a->file, "config",
                          a->config ? json_string(a->config) : json_null(), "format",
                          a->peft ? "peft" : "gguf", "rank", (json_int_t)a->rank_max, "rank_min",
                          (json_int_t)a->rank_min, "alpha",
                          a->has_alpha ? json_real(a->alpha) : json_null(), "user_scale",
                          (double)a->user_scale, "scale", (double)a->scale_max, "scale_min",
                          (double)a->scale_min, "n_targets", (json_int_t)a->n_targets, "classes",
                          classes, "n_params", (json_int_t)a->n_params, "stored_bytes",
                          (json_int_t)a->stored_bytes, "file_bytes", (json_int_t)a->file_bytes);
    return o;
}

/* The adapter bound to the base model (without the policy: the policy
 * keeps every shape, so binding checks the same). */
static kld_status adapter_json(const char *model_path, const char *adapter, json_t **out, kld_error *err) {
    kld_model *m = NULL;
    kld_status st = kld_model_open(model_path, NULL, &m, err);
    if (st) return st;
    kld_adapter_facts af;
    if (!(st = kld_model_attach_adapter(m, adapter, err))) {
        if (!kld_model_adapter_facts(m, &af)) st = kld_fail(err, KLD_ERR_ARG, "%s: no adapter attached", adapter);
        else if (!(*out = adapter_facts_json(&af))) st = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    }
    kld_model_close(m);
    return st;
}

/* A dump directory (kldeval dump, or another engine writing docs/dump-format.md). */
bool kld_inspect_is_dump(const char *path) {
    char m[4200];
    struct stat sb;
    snprintf(m, sizeof m, "%s/manifest.json", path);
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode) && stat(m, &sb) == 0;
}

kld_status kld_inspect_model(const char *path, const kld_inspect_options *opt, kld_inspect *out,
                             kld_error *err) {
    memset(out, 0, sizeof *out);
    /* MODEL[@POLICY]+ADAPTER[:SCALE]: the facts are the left part's */
    const char *full = path, *adapter = NULL;
    kld_status st = kld_model_split_adapter(path, &out->left, &adapter, err);
    if (st) return st;
    if (out->left) path = out->left;
    /* MODEL@POLICY (the engine's rule): the source is the part before '@' */
    struct stat sb;
    const char *at = strrchr(path, '@');
    char base[4096];
    const char *src_path = path;
    if (at && at[1] && stat(path, &sb) != 0 && (size_t)(at - path) < sizeof base) {
        snprintf(base, sizeof base, "%.*s", (int)(at - path), path);
        if (stat(base, &sb) == 0) src_path = base;
    }
    kld_source *src;
    if ((st = kld_source_open(src_path, &src, err))) return kld_inspect_free(out), st;
    json_t *adapter_facts = NULL;
    if (adapter && (st = adapter_json(src_path, adapter, &adapter_facts, err))) {
        kld_error_prefix(err, "%s", full); /* as MODEL+ADAPTER's errors read in kl */
        kld_source_close(src);
        kld_inspect_free(out);
        return st;
    }
    /* the policy's plan, without quantizing anything */
    if (src_path != path) {
        kld_hparams hp;
        out->policy = at + 1;
        if ((st = kld_hparams_read(src, &hp, err)) || (st = kld_quant_view_open(out->policy, src, &hp, &out->view, err))) {
            kld_error_prefix(err, "%s@%s", src_path, out->policy);
            out->policy = NULL;
            kld_source_close(src);
            json_decref(adapter_facts);
            kld_inspect_free(out);
            return st;
        }
    }
    out->facts = source_facts(src, src_path, opt);
    if (out->policy)
        out->src = src; /* the plan names the source's tensors */
    else
        kld_source_close(src);
    if (!out->facts) return json_decref(adapter_facts), kld_inspect_free(out), kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    if (out->policy) json_object_set_new(out->facts, "policy", policy_json(out->policy, &out->view.plan));
    if (adapter_facts) json_object_set_new(out->facts, "adapter", adapter_facts);
    return KLD_OK;
}

void kld_inspect_free(kld_inspect *in) {
    json_decref(in->facts);
    if (in->policy) kld_quant_view_close(&in->view);
    kld_source_close(in->src);
    free(in->left);
    memset(in, 0, sizeof *in);
}
