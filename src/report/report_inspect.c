/* report_inspect.c — the text view of a model's facts (report_inspect.h). */
#include "report/report_inspect.h"

#include "common/common.h"
#include "engine/engine.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* A per-layer list, runs of equal values as value×count ("32×4 64 32×2 64"). */
static void print_runs(FILE *out, const char *label, const json_t *arr) {
    fprintf(out, "%s", label);
    for (size_t i = 0; i < json_array_size(arr);) {
        const json_int_t v = json_integer_value(json_array_get(arr, i));
        size_t n = 1;
        while (i + n < json_array_size(arr) && json_integer_value(json_array_get(arr, i + n)) == v) n++;
        fprintf(out, " %" JSON_INTEGER_FORMAT, v);
        if (n > 1) fprintf(out, "×%zu", n);
        i += n;
    }
}

/* Gemma 4's per-layer geometry (inspect.c per_layer_json). */
static void print_per_layer(FILE *out, const json_t *pl) {
    if (!pl) return;
    fprintf(out, "%-14s", "per layer");
    print_runs(out, " head", json_object_get(pl, "head_dim"));
    print_runs(out, "; rotated", json_object_get(pl, "n_rot"));
    print_runs(out, "; kv heads", json_object_get(pl, "n_head_kv"));
    print_runs(out, "; ffn", json_object_get(pl, "n_ff"));
    const json_t *src = json_object_get(pl, "kv_source");
    bool shared = false;
    for (size_t i = 0; i < json_array_size(src); i++)
        if (json_integer_value(json_array_get(src, i)) != (json_int_t)i) {
            fprintf(out, "%s%zu→%" JSON_INTEGER_FORMAT, shared ? " " : "; KV caches read from earlier layers ", i,
                    json_integer_value(json_array_get(src, i)));
            shared = true;
        }
    const json_int_t P = json_integer_value(json_object_get(pl, "n_embd_per_layer"));
    if (P > 0) fprintf(out, "; per-layer embeddings %" JSON_INTEGER_FORMAT, P);
    fputc('\n', out);
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
    const json_t *swa_base = json_object_get(hp, "rope_freq_base_swa");
    if (swa_base) fprintf(out, ", their RoPE base %g", json_real_value(swa_base));
    if (json_is_true(json_object_get(hp, "v_norm"))) fprintf(out, ", V RMS-normalised (no weight)");
    if (gating) fprintf(out, ", experts %s%s", json_string_value(gating),
                        json_is_true(json_object_get(hp, "moe_biases")) ? " with biases" : "");
    const json_t *wsc = json_object_get(hp, "moe_w_scale"), *lead = json_object_get(hp, "n_layer_dense_lead");
    if (wsc) fprintf(out, " x %g", json_real_value(wsc));
    if (lead) fprintf(out, ", %" JSON_INTEGER_FORMAT " leading dense layer(s)", json_integer_value(lead));
    fputc('\n', out);
    print_per_layer(out, json_object_get(hp, "per_layer"));
    const json_t *mla = json_object_get(hp, "mla");
    if (mla) {
        const json_int_t ql = json_integer_value(json_object_get(mla, "q_lora_rank"));
        fprintf(out, "%-14s latent kv %" JSON_INTEGER_FORMAT ", q ", "mla",
                json_integer_value(json_object_get(mla, "kv_lora_rank")));
        if (ql > 0) fprintf(out, "through rank %" JSON_INTEGER_FORMAT, ql);
        else fprintf(out, "plain attn_q");
        fprintf(out, ", q/k head %" JSON_INTEGER_FORMAT " nope + %" JSON_INTEGER_FORMAT " rope, v head %"
                JSON_INTEGER_FORMAT ", attention scale %.6g\n",
                json_integer_value(json_object_get(mla, "qk_nope")), json_integer_value(json_object_get(mla, "qk_rope")),
                json_integer_value(json_object_get(mla, "v_head")), json_real_value(json_object_get(mla, "attn_scale")));
    }
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
                                    {"logits_bytes", "logits per chunk"},
                                    {"runtime_bytes", "program, tokenizer"},
                                    {"total_bytes", "total"}};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        /* only hybrid models have a recurrent state */
        if (!strcmp(rows[i][0], "recurrent_bytes") && !json_integer_value(json_object_get(p, rows[i][0])))
            continue;
        fprintf(out, "  %-22s %12s", rows[i][1],
                kld_format_bytes((uint64_t)json_integer_value(json_object_get(p, rows[i][0])), b, sizeof b));
        if (!strcmp(rows[i][0], "weights_bytes")) fprintf(out, "  (" KLD_REPACKED_TYPES " matrices at their repacked size, the rest mmapped)");
        if (!strcmp(rows[i][0], "total_bytes")) fprintf(out, "  (the peak resident size, at most)");
        if (!strcmp(rows[i][0], "kv_bytes"))
            fprintf(out, "  (%s, %s per token)", json_string_value(json_object_get(p, "kv_type")),
                    kld_format_bytes((uint64_t)json_integer_value(json_object_get(p, "kv_token_bytes")),
                                     b, sizeof b));
        fprintf(out, "\n");
    }
}

void kld_report_inspect_text(FILE *out, const json_t *f) {
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

void kld_report_inspect_adapter(FILE *out, const json_t *a) {
    char b1[32], b2[32];
    const json_t *cfg = json_object_get(a, "config");
    const bool peft = !strcmp(json_string_value(json_object_get(a, "format")), "peft");
    fprintf(out, "%-14s %s (%s LoRA adapter, %s on disk)\n", "adapter",
            json_string_value(json_object_get(a, "spec")), peft ? "PEFT" : "GGUF",
            kld_format_bytes((uint64_t)json_integer_value(json_object_get(a, "file_bytes")), b1, sizeof b1));
    fprintf(out, "%-14s %s%s%s\n", "", json_string_value(json_object_get(a, "file")),
            json_is_string(cfg) ? " + " : "", json_is_string(cfg) ? json_string_value(cfg) : "");
    const json_int_t r = json_integer_value(json_object_get(a, "rank"));
    const json_int_t r0 = json_integer_value(json_object_get(a, "rank_min"));
    const double s = json_real_value(json_object_get(a, "scale"));
    const double s0 = json_real_value(json_object_get(a, "scale_min"));
    const json_t *alpha = json_object_get(a, "alpha");
    fprintf(out, "%-14s rank ", "");
    if (r0 != r) fprintf(out, "%" JSON_INTEGER_FORMAT "-", r0);
    fprintf(out, "%" JSON_INTEGER_FORMAT ", alpha ", r);
    if (json_is_real(alpha)) fprintf(out, "%g", json_real_value(alpha));
    else fprintf(out, "absent");
    fprintf(out, ", scale ");
    if (s0 != s) fprintf(out, "%g-", s0);
    fprintf(out, "%g (%s × SCALE %g)\n", s, json_is_real(alpha) ? "alpha/r" : "no alpha: 1",
            json_real_value(json_object_get(a, "user_scale")));
    fprintf(out, "%-14s %" JSON_INTEGER_FORMAT " base weights:", "",
            json_integer_value(json_object_get(a, "n_targets")));
    const char *k;
    const json_t *v;
    int i = 0;
    json_object_foreach((json_t *)json_object_get(a, "classes"), k, v)
        fprintf(out, "%s %s %" JSON_INTEGER_FORMAT, i++ ? "," : "", k, json_integer_value(v));
    fprintf(out, "\n%-14s %" JSON_INTEGER_FORMAT " parameters, %s stored (A and B)\n", "",
            json_integer_value(json_object_get(a, "n_params")),
            kld_format_bytes((uint64_t)json_integer_value(json_object_get(a, "stored_bytes")), b2, sizeof b2));
}

void kld_report_inspect_dump(FILE *out, const json_t *o) {
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)o, key, v) {
        char *t = json_is_string(v) ? NULL : json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
        fprintf(out, "%-34s: %s\n", key, t ? t : json_string_value(v));
        free(t);
    }
}
