/* inspect_facts.c — format, hyper-parameters, parameter count, type
 * histogram, tensor table, metadata and tokenizer summary of a model. */
#include "cli/inspect_facts.h"

#include "engine/engine.h"
#include "model/hparams.h"
#include "tokenizer/tokenizer.h"

#include <inttypes.h>
#include <stdlib.h>

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
static json_t *plan_json(const inspect_options *opt) {
    kld_model *m;
    kld_error err = {0};
    kld_mem_plan p;
    if (kld_model_open(opt->path, NULL, &m, &err) != KLD_OK) return json_pack("{s:s}", "error", err.msg);
    int64_t ctx = opt->ctx > 0 ? opt->ctx : kld_model_hparams(m)->n_ctx_train;
    /* the default chunk never exceeds the context (small models train on 128) */
    int64_t chunk = opt->chunk > 0 ? opt->chunk : ctx < 512 ? ctx : 512;
    kld_levers lv;
    kld_levers_default(&lv);
    kld_status st = opt->levers ? kld_levers_parse(opt->levers, &lv, &err) : KLD_OK;
    if (!st) st = kld_mem_plan_compute_levers(m, ctx, chunk, opt->threads, &lv, &p, &err);
    kld_model_close(m);
    if (st) return json_pack("{s:s}", "error", err.msg);
    return json_pack("{s:I,s:I,s:i,s:I,s:I,s:I,s:I,s:s,s:I,s:I,s:I,s:I,s:I}", "n_ctx", (json_int_t)p.n_ctx,
                     "max_chunk", (json_int_t)p.max_chunk, "threads", p.n_threads, "weights_bytes",
                     (json_int_t)p.weights_bytes, "model_bytes", (json_int_t)p.model_bytes,
                     "kv_bytes", (json_int_t)p.kv_bytes, "kv_token_bytes",
                     (json_int_t)p.kv_token_bytes, "kv_type", p.kv_desc, "recurrent_bytes",
                     (json_int_t)p.recurrent_bytes, "act_bytes", (json_int_t)p.act_bytes,
                     "scratch_bytes", (json_int_t)p.scratch_bytes, "arena_bytes",
                     (json_int_t)p.arena_bytes, "logits_bytes", (json_int_t)p.logits_bytes);
}

json_t *inspect_facts(const kld_source *src, const inspect_options *opt) {
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
        const char *tn = kld_type_name(t->type, tb);
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
    if (opt->plan) json_object_set_new(f, "plan", plan_json(opt));
    if (opt->meta) json_object_set_new(f, "metadata", meta_json(src));
    return f;
}

static void print_hparams(FILE *out, const json_t *hp) {
    const json_t *e = json_object_get(hp, "error");
    if (e) {
        fprintf(out, "%-14s %s\n", "hparams", json_string_value(e));
        return;
    }
    fprintf(out, "%-14s %s", "arch", json_string_value(json_object_get(hp, "arch")));
    const char *name = json_string_value(json_object_get(hp, "name"));
    if (name && *name) fprintf(out, "  (%s)", name);
    fputc('\n', out);
    static const char *ints[] = {"n_embd", "n_layer", "n_head", "n_head_kv", "head_dim",
                                 "n_ff", "n_vocab", "n_ctx_train", "n_rot", "sliding_window",
                                 "n_expert", "n_expert_used", "n_ff_exp", "n_ff_shexp"};
    fprintf(out, "%-14s", "shape");
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        const json_t *v = json_object_get(hp, ints[i]);
        if (v) fprintf(out, " %s=%" JSON_INTEGER_FORMAT, ints[i], json_integer_value(v));
    }
    fprintf(out, "\n%-14s type=%s base=%g scale=%g scaling=%s\n", "rope",
            json_string_value(json_object_get(hp, "rope_type")),
            json_real_value(json_object_get(hp, "rope_freq_base")),
            json_real_value(json_object_get(hp, "rope_freq_scale")),
            json_string_value(json_object_get(hp, "rope_scaling")));
    fprintf(out, "%-14s eps=%g tied_output=%s", "norm", json_real_value(json_object_get(hp, "norm_eps")),
            json_is_true(json_object_get(hp, "tied_output")) ? "yes" : "no");
    const json_t *sc = json_object_get(hp, "attn_softcap");
    if (sc) fprintf(out, " attn_softcap=%g", json_real_value(sc));
    sc = json_object_get(hp, "final_softcap");
    if (sc) fprintf(out, " final_softcap=%g", json_real_value(sc));
    fputc('\n', out);
    const json_t *swa = json_object_get(hp, "swa_layers"), *gating = json_object_get(hp, "moe_gating");
    fprintf(out, "%-14s ffn %s", "features", json_string_value(json_object_get(hp, "ffn_act")));
    if (json_is_true(json_object_get(hp, "attn_sinks"))) fprintf(out, ", attention sinks");
    if (swa) fprintf(out, ", sliding layers %s (s: window)", json_string_value(swa));
    if (gating) fprintf(out, ", experts %s%s", json_string_value(gating),
                        json_is_true(json_object_get(hp, "moe_biases")) ? " with biases" : "");
    const json_t *wsc = json_object_get(hp, "moe_w_scale"), *lead = json_object_get(hp, "n_layer_dense_lead");
    if (wsc) fprintf(out, " x %g", json_real_value(wsc));
    if (lead) fprintf(out, ", %" JSON_INTEGER_FORMAT " leading dense layer(s)", json_integer_value(lead));
    fputc('\n', out);
    const json_t *kinds = json_object_get(hp, "layer_kinds");
    const json_t *dn = json_object_get(hp, "deltanet");
    if (kinds && dn) /* Qwen3-Next */
        fprintf(out, "%-14s %s (a attention, d gated DeltaNet: conv %" JSON_INTEGER_FORMAT ", %"
                JSON_INTEGER_FORMAT " q/k heads × %" JSON_INTEGER_FORMAT ", %" JSON_INTEGER_FORMAT
                " v heads × %" JSON_INTEGER_FORMAT ")\n", "layers", json_string_value(kinds),
                json_integer_value(json_object_get(dn, "conv_kernel")),
                json_integer_value(json_object_get(dn, "n_k_heads")),
                json_integer_value(json_object_get(dn, "head_k")),
                json_integer_value(json_object_get(dn, "n_v_heads")),
                json_integer_value(json_object_get(dn, "head_v")));
    else if (kinds)
        fprintf(out, "%-14s %s (a attention, c short convolution of width %" JSON_INTEGER_FORMAT ")\n",
                "layers", json_string_value(kinds),
                json_integer_value(json_object_get(hp, "shortconv_l_cache")));
}

static void print_value(FILE *out, const json_t *v) {
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (s && strlen(s) > 160) strcpy(s + 150, "…");
    fprintf(out, "%s", s ? s : "?");
    free(s);
}

static void print_tokenizer(FILE *out, const json_t *t) {
    if (!t) return;
    const json_t *e = json_object_get(t, "error");
    if (e) {
        fprintf(out, "%-14s none: %s\n", "tokenizer", json_string_value(e));
        return;
    }
    fprintf(out, "%-14s %s from %s, %" JSON_INTEGER_FORMAT " tokens, bos %" JSON_INTEGER_FORMAT
                 " eos %" JSON_INTEGER_FORMAT " unk %" JSON_INTEGER_FORMAT " pad %" JSON_INTEGER_FORMAT
                 ", adds bos %s eos %s\n",
            "tokenizer", json_string_value(json_object_get(t, "kind")),
            json_string_value(json_object_get(t, "source")), json_integer_value(json_object_get(t, "n_vocab")),
            json_integer_value(json_object_get(t, "bos_id")), json_integer_value(json_object_get(t, "eos_id")),
            json_integer_value(json_object_get(t, "unk_id")), json_integer_value(json_object_get(t, "pad_id")),
            json_is_true(json_object_get(t, "add_bos")) ? "yes" : "no",
            json_is_true(json_object_get(t, "add_eos")) ? "yes" : "no");
    const char *pre = json_string_value(json_object_get(t, "pre"));
    fprintf(out, "%-14s pre-tokenizer %s, %" JSON_INTEGER_FORMAT " merges, %" JSON_INTEGER_FORMAT
                 " added tokens (%" JSON_INTEGER_FORMAT " special)\n",
            "", pre && *pre ? pre : "-", json_integer_value(json_object_get(t, "n_merges")),
            json_integer_value(json_object_get(t, "n_added")), json_integer_value(json_object_get(t, "n_special")));
}

static void print_plan(FILE *out, const json_t *p) {
    if (!p) return;
    const json_t *e = json_object_get(p, "error");
    if (e) {
        fprintf(out, "%-14s %s\n", "memory plan", json_string_value(e));
        return;
    }
    char b[32];
    fprintf(out, "memory plan    n_ctx %" JSON_INTEGER_FORMAT ", chunk %" JSON_INTEGER_FORMAT
                 ", %" JSON_INTEGER_FORMAT " threads\n",
            json_integer_value(json_object_get(p, "n_ctx")), json_integer_value(json_object_get(p, "max_chunk")),
            json_integer_value(json_object_get(p, "threads")));
    static const char *rows[][2] = {{"weights_bytes", "weights"},
                                    {"model_bytes", "norms/biases (f32)"},
                                    {"kv_bytes", "KV cache"},
                                    {"recurrent_bytes", "recurrent state"},
                                    {"act_bytes", "activations"},
                                    {"scratch_bytes", "per-thread scratch"},
                                    {"arena_bytes", "session arena total"},
                                    {"logits_bytes", "logits per chunk"}};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        /* only hybrid models have a recurrent state */
        if (!strcmp(rows[i][0], "recurrent_bytes") && !json_integer_value(json_object_get(p, rows[i][0])))
            continue;
        fprintf(out, "  %-22s %12s", rows[i][1],
                kld_format_bytes((uint64_t)json_integer_value(json_object_get(p, rows[i][0])), b, sizeof b));
        if (!strcmp(rows[i][0], "weights_bytes")) fprintf(out, "  (mmapped; the SIMD kernels repack " KLD_REPACKED_TYPES ")");
        if (!strcmp(rows[i][0], "kv_bytes"))
            fprintf(out, "  (%s, %s per token)", json_string_value(json_object_get(p, "kv_type")),
                    kld_format_bytes((uint64_t)json_integer_value(json_object_get(p, "kv_token_bytes")),
                                     b, sizeof b));
        fprintf(out, "\n");
    }
}

void inspect_print_text(FILE *out, const json_t *f) {
    char b1[32], b2[32];
    fprintf(out, "%-14s %s\n", "file", json_string_value(json_object_get(f, "path")));
    fprintf(out, "%-14s %s", "format", json_string_value(json_object_get(f, "format")));
    const json_t *ver = json_object_get(f, "version");
    if (ver) fprintf(out, " v%" JSON_INTEGER_FORMAT, json_integer_value(ver));
    fprintf(out, "  (%s on disk)\n",
            kld_format_bytes((uint64_t)json_integer_value(json_object_get(f, "file_bytes")), b1, sizeof b1));
    print_hparams(out, json_object_get(f, "hparams"));
    json_int_t np = json_integer_value(json_object_get(f, "n_params"));
    fprintf(out, "%-14s %" JSON_INTEGER_FORMAT " in %" JSON_INTEGER_FORMAT " tensors\n", "parameters",
            np, json_integer_value(json_object_get(f, "n_tensors")));
    fprintf(out, "%-14s %s, %.3f bits per weight\n", "weights",
            kld_format_bytes((uint64_t)json_integer_value(json_object_get(f, "weight_bytes")), b2, sizeof b2),
            json_real_value(json_object_get(f, "bits_per_weight")));
    const char *tn;
    json_t *h;
    fprintf(out, "%-14s %-8s %8s %14s %12s  %s\n", "types", "type", "tensors", "params", "bytes",
            "% of params");
    json_object_foreach((json_t *)json_object_get(f, "types"), tn, h) {
        json_int_t p = json_integer_value(json_object_get(h, "params"));
        fprintf(out, "%-14s %-8s %8" JSON_INTEGER_FORMAT " %14" JSON_INTEGER_FORMAT " %12s  %5.1f%%\n", "", tn, /* share of parameters */
                json_integer_value(json_object_get(h, "tensors")), p,
                kld_format_bytes((uint64_t)json_integer_value(json_object_get(h, "bytes")), b1, sizeof b1),
                np ? 100.0 * (double)p / (double)np : 0.0);
    }
    print_tokenizer(out, json_object_get(f, "tokenizer"));
    print_plan(out, json_object_get(f, "plan"));
    const json_t *tensors = json_object_get(f, "tensors");
    if (tensors) {
        fprintf(out, "\n%-40s %-8s %-24s %12s\n", "tensor", "type", "shape (ne0, ne1, …)", "bytes");
        size_t i;
        const json_t *t;
        json_array_foreach(tensors, i, t) {
            char shape[96] = "", part[32];
            size_t k;
            const json_t *d;
            json_array_foreach(json_object_get(t, "shape"), k, d) {
                snprintf(part, sizeof part, k ? " × %" JSON_INTEGER_FORMAT : "%" JSON_INTEGER_FORMAT,
                         json_integer_value(d));
                strncat(shape, part, sizeof shape - strlen(shape) - 1);
            }
            fprintf(out, "%-40s %-8s %-24s %12" JSON_INTEGER_FORMAT "\n",
                    json_string_value(json_object_get(t, "name")),
                    json_string_value(json_object_get(t, "type")), shape,
                    json_integer_value(json_object_get(t, "bytes")));
        }
    }
    const json_t *meta = json_object_get(f, "metadata");
    if (meta) {
        fprintf(out, "\nmetadata\n");
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)meta, k, v) {
            fprintf(out, "  %-44s ", k);
            print_value(out, v);
            fputc('\n', out);
        }
    }
}
