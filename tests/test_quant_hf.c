/* test_quant_hf.c — `kldeval quantize` from a Hugging Face gemma, gemma2,
 * gemma3 or phi3 checkpoint. Each checkpoint is the HF copy of a GGUF (the
 * shared gemma2 and phi3 models, a synthesized gemma and gemma3; test_synth_models.c undoes
 * llama.cpp's conversion: Gemma norms stored as w - 1, phi3's fused
 * qkv_proj / gate_up_proj). Converting it back at f16 must give that GGUF's
 * tensors (names, types, bytes), the keys llama.cpp's converter
 * writes with the GGUF's values, and logits identical to reading the HF
 * directory directly (and to the GGUF); gemma2 carries its tokenizer.json
 * over. gemma3 layer_types other than five-of-six go into the per-layer
 * pattern key; a query scale the GGUF cannot carry is refused. Llama 3
 * and Phi-3 LongRoPE scaling become llama.cpp's factor tensors. */
#include "testlib.h"
#include "test_forward_models.h"

#include "engine/engine.h"
#include "io/gguf.h"
#include "quant/quant.h"
#include "tokenizer/tokenizer.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>

typedef struct hf_case {
    const char *name;
    const char *gguf;        /* the source GGUF (NULL: synthesize from shape) */
    synth_shape shape;
    const char *tokenizer;   /* tokenizer.json to copy beside the weights, or NULL */
    const char *const *keys; /* keys (after "<arch>.") llama.cpp's converter writes */
    const char *const *absent; /* keys it does not write */
} hf_case;

static void copy_file(const char *from, const char *to) {
    size_t n = 0;
    char *b = kt_read_file(from, &n);
    CHECK(b != NULL, "read %s", from);
    if (b) kt_write_file(to, b, n);
    free(b);
}

/* Every tensor by name: type, shape and bytes (the order is
 * llama-quantize's, layer then name, as for any `kldeval quantize`). */
static bool compare_files(const char *got, const char *want, const char *what, bool gemma) {
    kld_gguf *a = NULL, *b = NULL;
    int bad = 0, rounded = 0;
    kld_error err = {0};
    CHECK_OK(kld_gguf_open(got, &a, &err), err);
    CHECK_OK(kld_gguf_open(want, &b, &err), err);
    if (!a || !b) goto done;
    CHECK(a->n_tensors == b->n_tensors, "%s: %llu tensors (source %llu)", what,
          (unsigned long long)a->n_tensors, (unsigned long long)b->n_tensors);
    for (uint64_t i = 0; i < b->n_tensors; i++) {
        const kld_tensor *y = &b->tensors[i], *x = kld_gguf_find_tensor(a, y->name);
        bool same = x && x->type == y->type && x->ne[0] == y->ne[0] && x->ne[1] == y->ne[1] &&
                    x->nbytes == y->nbytes && !memcmp(x->data, y->data, (size_t)x->nbytes);
        /* A Gemma norm w outside [0.5, 2] does not survive the HF copy's
         * w - 1 exactly: the conversion must then give (w - 1) + 1 in float. */
        if (!same && gemma && x && x->type == KLD_TYPE_F32 && y->type == KLD_TYPE_F32 &&
            x->nbytes == y->nbytes && strstr(y->name, "norm.weight")) {
            const float *xv = x->data, *yv = y->data;
            same = true;
            for (int64_t j = 0; same && j < y->ne[0]; j++) same = xv[j] == (yv[j] - 1.0f) + 1.0f;
            rounded += same;
        }
        if (!same && bad++ < 5) {
            char t1[16], t2[16];
            CHECK(false, "%s: tensor %s (%s) differs from the source's (%s)", what, y->name,
                  x ? kld_type_name(x->type, t1) : "missing", kld_type_name(y->type, t2));
        }
    }
    CHECK(bad == 0, "%s: every tensor identical to the source's (name, type, shape, bytes; "
          "%d Gemma norms as 1 + (w - 1))", what, rounded);
done:
    kld_gguf_close(a);
    kld_gguf_close(b);
    return bad == 0 && rounded == 0;
}

/* The keys llama.cpp writes hold the source's values; the ones it omits are absent. */
static void compare_keys(const char *got, const char *want, const hf_case *c) {
    kld_gguf *a = NULL, *b = NULL;
    kld_error err = {0};
    CHECK_OK(kld_gguf_open(got, &a, &err), err);
    CHECK_OK(kld_gguf_open(want, &b, &err), err);
    for (int i = 0; a && b && c->keys[i]; i++) {
        char key[160];
        snprintf(key, sizeof key, "%s.%s", c->shape.arch, c->keys[i]);
        double x = 0, y = 0;
        kld_str sx, sy;
        if (kld_gguf_get_str(b, key, &sy)) {
            CHECK(kld_gguf_get_str(a, key, &sx) && sx.len == sy.len && !memcmp(sx.ptr, sy.ptr, sx.len),
                  "%s: %s = '%.*s'", c->name, key, (int)sy.len, sy.ptr);
        } else {
            CHECK(kld_gguf_get_float(b, key, &y), "%s: the source has %s", c->name, key);
            CHECK(kld_gguf_get_float(a, key, &x) && x == y, "%s: %s = %g (source %g)", c->name, key,
                  x, y);
        }
    }
    for (int i = 0; a && c->absent && c->absent[i]; i++) {
        char key[160];
        snprintf(key, sizeof key, "%s.%s", c->shape.arch, c->absent[i]);
        CHECK(!kld_gguf_find(a, key), "%s: %s is not written (llama.cpp's converter omits it)",
              c->name, key);
    }
    kld_str arch;
    CHECK(a && kld_gguf_get_str(a, "general.architecture", &arch) && kld_str_eq(arch, c->shape.arch),
          "%s: general.architecture %s", c->name, c->shape.arch);
    kld_gguf_close(a);
    kld_gguf_close(b);
}

static void run_case(const hf_case *c) {
    char dir[512], gguf[512], out[512], tok[600];
    snprintf(dir, sizeof dir, "%s/quant_hf_%s", kt_build_dir(), c->name);
    snprintf(out, sizeof out, "%s/quant_hf_%s.gguf", kt_build_dir(), c->name);
    mkdir(dir, 0755);
    if (c->gguf) snprintf(gguf, sizeof gguf, "%s", c->gguf);
    else {
        snprintf(gguf, sizeof gguf, "%s/quant_hf_%s_src.gguf", kt_build_dir(), c->name);
        CHECK(synth_write_gguf(&c->shape, gguf), "%s: synthesize %s", c->name, gguf);
    }
    CHECK(synth_write_hf(&c->shape, gguf, dir), "%s: HF copy in %s", c->name, dir);
    if (c->tokenizer) {
        snprintf(tok, sizeof tok, "%s/tokenizer.json", dir);
        copy_file(c->tokenizer, tok);
    }
    kld_error err = {0};
    kld_quantize_opts o = {.n_threads = 2};
    CHECK_OK(kld_quantize_file(dir, out, "f16", &o, NULL, &err), err);
    const bool exact = compare_files(out, gguf, c->name, !strncmp(c->shape.arch, "gemma", 5));
    compare_keys(out, gguf, c);

    /* 40 positions: past gemma2's window of 16 and gemma3's of 8 */
    int32_t ids[40];
    for (int i = 0; i < 40; i++) ids[i] = (int32_t)((i * 7919 + 13) % c->shape.n_vocab);
    int64_t nv_hf = 0, nv_out = 0, nv_src = 0;
    float *lh = tf_engine_logits(dir, ids, 40, 40, 2, &nv_hf);
    float *lo = tf_engine_logits(out, ids, 40, 40, 2, &nv_out);
    float *ls = tf_engine_logits(gguf, ids, 40, 40, 2, &nv_src);
    CHECK(lh && lo && ls && nv_hf == c->shape.n_vocab && nv_out == nv_hf && nv_src == nv_hf,
          "%s: three sets of logits over %lld tokens", c->name, (long long)nv_hf);
    if (lh && lo && ls && nv_out == nv_hf && nv_src == nv_hf) {
        CHECK(!memcmp(lh, lo, sizeof(float) * 40 * (size_t)nv_hf),
              "%s: the converted GGUF's logits equal the HF directory's bit for bit", c->name);
        if (exact) /* when the HF copy held the source's weights exactly */
            CHECK(!memcmp(ls, lo, sizeof(float) * 40 * (size_t)nv_hf),
                  "%s: and the source GGUF's", c->name);
    }
    free(lh);
    free(lo);
    free(ls);

    if (c->tokenizer) {
        static const char text[] = "The licensee may copy, modify and distribute the Program; "
                                   "see section 2 (\"Definitions\").";
        kld_tokenizer *a = NULL, *b = NULL;
        kld_tok_ids x = {0}, y = {0};
        CHECK_OK(kld_tok_open_path(dir, &a, &err), err);
        CHECK_OK(kld_tok_open_path(out, &b, &err), err);
        if (a && b) {
            CHECK_OK(kld_tok_encode(a, text, sizeof text - 1, KLD_TOK_ADD_SPECIAL, &x, &err), err);
            CHECK_OK(kld_tok_encode(b, text, sizeof text - 1, KLD_TOK_ADD_SPECIAL, &y, &err), err);
            CHECK(x.n > 10 && x.n == y.n && !memcmp(x.ids, y.ids, x.n * sizeof *x.ids),
                  "%s: the converted tokenizer encodes as tokenizer.json does (%zu, %zu ids)",
                  c->name, x.n, y.n);
        }
        kld_tok_ids_free(&x);
        kld_tok_ids_free(&y);
        kld_tok_free(a);
        kld_tok_free(b);
        /* a tokenizer that prepends no "▁" says so, as Gemma's converter does */
        kld_gguf *g = NULL;
        bool asp = true;
        CHECK_OK(kld_gguf_open(out, &g, &err), err);
        CHECK(g && kld_gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", &asp) && !asp,
              "%s: tokenizer.ggml.add_space_prefix false", c->name);
        kld_gguf_close(g);
    }
    remove(out);
}

/* Logits of `n` ids through two models (the session holds n + 8
 * positions: tf_engine_logits): bit for bit when tol is 0, else within
 * tol with the same argmax in every row. */
static void same_logits(const char *a_path, const char *b_path, int n, double tol, const char *what) {
    int32_t ids[64];
    for (int i = 0; i < n && i < 64; i++) ids[i] = (int32_t)((i * 7919 + 13) % 300);
    int64_t na = 0, nb = 0;
    float *a = tf_engine_logits(a_path, ids, n, n, 2, &na), *b = tf_engine_logits(b_path, ids, n, n, 2, &nb);
    bool ok = a && b && na == nb;
    if (ok && tol == 0) {
        CHECK(!memcmp(a, b, sizeof(float) * (size_t)(n * na)),
              "%s: converted logits equal the HF directory's bit for bit", what);
    } else if (ok) {
        tf_cmp c = tf_compare(a, b, n, na);
        CHECK(c.max_abs <= tol && c.same_argmax == n, "%s: converted logits within %.3g of the HF "
              "directory's (max |d| %.3g, argmax %d/%d)", what, tol, c.max_abs, c.same_argmax, n);
    }
    CHECK(ok, "%s: both models give logits", what);
    free(a);
    free(b);
}

/* Llama 3 and Phi-3 LongRoPE scaling: the factor tensors llama.cpp's
 * converter writes, equal to the config's (LongRoPE) or to the source
 * GGUF's (Llama 3, within an ulp: both computed in double), and logits
 * close to the HF directory's on both sides of the original context. Not
 * bit for bit: llama's q/k rows are permuted back to interleaved pairs, so
 * q·k sums its dimensions in another order; LongRoPE's attn_factor is a
 * float32 key in GGUF, a double from config.json (rounded to float32, the
 * logits match exactly). */
static void rope_cases(void) {
    kld_error err = {0};
    char dir[512], gguf[512], out[512];
    /* Llama 3.x: a short original context so that all three regimes occur */
    synth_shape l3;
    synth_default(&l3, "llama");
    l3.rope_base = 500;
    l3.llama3_factor = 8;
    l3.llama3_low = 1;
    l3.llama3_high = 4;
    l3.llama3_orig_ctx = 64;
    snprintf(dir, sizeof dir, "%s/quant_hf_llama3", kt_build_dir());
    snprintf(gguf, sizeof gguf, "%s/quant_hf_llama3_src.gguf", kt_build_dir());
    snprintf(out, sizeof out, "%s/quant_hf_llama3.gguf", kt_build_dir());
    mkdir(dir, 0755);
    CHECK(synth_write_gguf(&l3, gguf) && synth_write_hf(&l3, gguf, dir), "llama3 synth");
    CHECK_OK(kld_quantize_file(dir, out, "f16", NULL, NULL, &err), err);
    kld_gguf *a = NULL, *b = NULL;
    CHECK_OK(kld_gguf_open(out, &a, &err), err);
    CHECK_OK(kld_gguf_open(gguf, &b, &err), err);
    const kld_tensor *x = a ? kld_gguf_find_tensor(a, "rope_freqs.weight") : NULL;
    const kld_tensor *y = b ? kld_gguf_find_tensor(b, "rope_freqs.weight") : NULL;
    bool close = x && y && x->type == KLD_TYPE_F32 && x->ne[0] == l3.head_dim / 2 && x->nbytes == y->nbytes;
    for (int64_t i = 0; close && i < x->ne[0]; i++) {
        const float p = ((const float *)x->data)[i], q = ((const float *)y->data)[i];
        close = fabsf(p - q) <= 2e-7f * fabsf(q);
    }
    CHECK(close, "llama3: rope_freqs.weight F32 [%lld] as the source GGUF's", (long long)(l3.head_dim / 2));
    kld_gguf_close(a);
    kld_gguf_close(b);
    same_logits(dir, out, 40, 1e-4, "llama3 (40 positions, original context 64)");
    remove(out);
    remove(gguf);

    /* Phi-3 LongRoPE over the shared phi3's weights: original context 32,
     * so 40 positions take the long factors and 16 the short ones */
    char tail[2048];
    int o = snprintf(tail, sizeof tail, ", \"hidden_act\": \"silu\", \"sliding_window\": 2047, "
                     "\"original_max_position_embeddings\": 32, \"rope_scaling\": {\"type\": \"longrope\"");
    for (int k = 0; k < 2; k++) {
        o += snprintf(tail + o, sizeof tail - (size_t)o, ", \"%s_factor\": [", k ? "short" : "long");
        for (int i = 0; i < 16; i++)
            o += snprintf(tail + o, sizeof tail - (size_t)o, "%s%.3f", i ? ", " : "",
                          k ? 1.0 + 0.01 * i : 1.0 + 0.37 * i);
        o += snprintf(tail + o, sizeof tail - (size_t)o, "]");
    }
    snprintf(tail + o, sizeof tail - (size_t)o, "}");
    synth_shape p3 = {.arch = "phi3", .n_embd = 128, .n_layer = 2, .n_head = 4, .n_head_kv = 4,
                      .head_dim = 32, .n_ff = 256, .n_vocab = 512, .rope_base = 10000,
                      .n_ctx = 4096, .norm_eps = 1e-5, .hf_tail = tail};
    snprintf(dir, sizeof dir, "%s/quant_hf_phi3_longrope", kt_build_dir());
    snprintf(out, sizeof out, "%s/quant_hf_phi3_longrope.gguf", kt_build_dir());
    mkdir(dir, 0755);
    CHECK(synth_write_hf(&p3, KT_SHARED "/models/phi3/f16.gguf", dir), "phi3 longrope HF copy");
    CHECK_OK(kld_quantize_file(dir, out, "f16", NULL, NULL, &err), err);
    CHECK_OK(kld_gguf_open(out, &a, &err), err);
    bool ok = a != NULL;
    for (int k = 0; ok && k < 2; k++) {
        x = kld_gguf_find_tensor(a, k ? "rope_factors_short.weight" : "rope_factors_long.weight");
        ok = x && x->type == KLD_TYPE_F32 && x->ne[0] == 16;
        for (int i = 0; ok && i < 16; i++)
            ok = ((const float *)x->data)[i] == (float)(k ? 1.0 + 0.01 * i : 1.0 + 0.37 * i);
    }
    CHECK(ok, "phi3 longrope: rope_factors_long/short F32 [16] hold the config's factors");
    double attn = 0, orig = 0;
    const double s = 4096.0 / 32.0, want = sqrt(1 + log(s) / log(32.0));
    CHECK(a && kld_gguf_get_float(a, "phi3.rope.scaling.attn_factor", &attn) &&
          fabs(attn - want) < 1e-6 && kld_gguf_get_float(a, "phi3.rope.scaling.original_context_length", &orig) &&
          orig == 32, "phi3 longrope: attn_factor %.7g (want %.7g), original context %g", attn, want, orig);
    kld_gguf_close(a);
    same_logits(dir, out, 40, 1e-4, "phi3 longrope, long factors");
    same_logits(dir, out, 16, 1e-4, "phi3 longrope, short factors");
    remove(out);
}

/* The llama2 tokenizer.json as Gemma's is built: spaces become "▁" but no
 * "▁" is prepended (normalizer Replace only, no Strip in the decoder). */
static void write_gemma_style_tokenizer(const char *path) {
    json_error_t je;
    json_t *t = json_load_file(KT_SHARED "/tokenizers/llama2/tokenizer.json", 0, &je);
    CHECK(t != NULL, "llama2 tokenizer.json: %s", je.text);
    if (!t) return;
    json_t *norms = json_object_get(json_object_get(t, "normalizer"), "normalizers");
    json_t *replace = json_array_get(norms, 1);
    CHECK(replace && !strcmp(json_string_value(json_object_get(replace, "type")), "Replace"),
          "llama2 normalizer: Prepend then Replace");
    if (replace) json_object_set(t, "normalizer", replace);
    json_t *decs = json_object_get(json_object_get(t, "decoder"), "decoders");
    json_array_remove(decs, json_array_size(decs) - 1); /* the Strip of the prepended space */
    CHECK(json_dump_file(t, path, 0) == 0, "write %s", path);
    json_decref(t);
}

/* A checkpoint the GGUF cannot carry is refused with the reason. */
static void refuse(const synth_shape *s, const char *gguf, const char *name, const char *want) {
    char dir[512], out[512];
    snprintf(dir, sizeof dir, "%s/quant_hf_bad_%s", kt_build_dir(), name);
    snprintf(out, sizeof out, "%s/quant_hf_bad_%s.gguf", kt_build_dir(), name);
    mkdir(dir, 0755);
    CHECK(synth_write_hf(s, gguf, dir), "%s: HF copy", name);
    kld_error err = {0};
    kld_status st = kld_quantize_file(dir, out, "f16", NULL, NULL, &err);
    CHECK(st == KLD_ERR_UNSUPPORTED && strstr(err.msg, want), "%s: refused (%d): %s", name, st, err.msg);
    remove(out);
}

int main(void) {
    kld_kernels_init();
    static const char *const gemma2_keys[] = {
        "context_length", "embedding_length", "block_count", "feed_forward_length",
        "attention.head_count", "attention.head_count_kv", "attention.layer_norm_rms_epsilon",
        "attention.key_length", "attention.value_length", "attn_logit_softcapping",
        "final_logit_softcapping", "attention.sliding_window", NULL};
    static const char *const gemma12_absent[] = {"rope.dimension_count", "vocab_size",
                                                 "attention.sliding_window_pattern", NULL};
    static const char *const phi3_keys[] = {
        "context_length", "rope.scaling.original_context_length", "embedding_length",
        "feed_forward_length", "block_count", "attention.head_count", "attention.head_count_kv",
        "attention.layer_norm_rms_epsilon", "rope.dimension_count", "rope.freq_base",
        "attention.sliding_window", NULL};
    static const char *const gemma3_keys[] = {
        "context_length", "embedding_length", "block_count", "feed_forward_length",
        "attention.head_count", "attention.layer_norm_rms_epsilon", "attention.key_length",
        "attention.value_length", "rope.freq_base", "attention.sliding_window",
        "attention.head_count_kv", "rope.scaling.type", "rope.scaling.factor", NULL};
    static const char *const gemma3_absent[] = {"attention.sliding_window_pattern",
                                                "rope.freq_base_swa", "attn_logit_softcapping", NULL};

    char gemma_tok[512];
    snprintf(gemma_tok, sizeof gemma_tok, "%s/quant_hf_gemma_tokenizer.json", kt_build_dir());
    write_gemma_style_tokenizer(gemma_tok);
    hf_case gemma2 = {.name = "gemma2", .gguf = KT_SHARED "/models/gemma2/f16.gguf",
                      .tokenizer = gemma_tok,
                      .keys = gemma2_keys, .absent = gemma12_absent};
    gemma2.shape = (synth_shape){.arch = "gemma2", .n_embd = 128, .n_layer = 2, .n_head = 4,
                                 .n_head_kv = 2, .head_dim = 32, .n_ff = 256, .n_vocab = 32000,
                                 .rope_base = 10000, .tied = true, .n_ctx = 8192, .norm_eps = 1e-6,
                                 .hf_tail = ", \"hidden_activation\": \"gelu_pytorch_tanh\", "
                                            "\"query_pre_attn_scalar\": 32, \"sliding_window\": 16, "
                                            "\"attn_logit_softcapping\": 50.0, "
                                            "\"final_logit_softcapping\": 30.0"};
    run_case(&gemma2);

    static const char *const phi3_absent[] = {"vocab_size", NULL}; /* the converter's Phi3MiniModel writes none */
    hf_case phi3 = {.name = "phi3", .gguf = KT_SHARED "/models/phi3/f16.gguf", .keys = phi3_keys,
                    .absent = phi3_absent};
    phi3.shape = (synth_shape){.arch = "phi3", .n_embd = 128, .n_layer = 2, .n_head = 4,
                               .n_head_kv = 4, .head_dim = 32, .n_ff = 256, .n_vocab = 512,
                               .rope_base = 10000, .tied = false, .n_ctx = 4096, .norm_eps = 1e-5,
                               .hf_tail = ", \"hidden_act\": \"silu\", \"sliding_window\": 2047, "
                                          "\"original_max_position_embeddings\": 4096, "
                                          "\"rope_scaling\": null"};
    run_case(&phi3);

    /* Gemma 1: no window, no post-norms, no q/k norms (synthesized) */
    static const char *const gemma_keys[] = {
        "context_length", "embedding_length", "block_count", "feed_forward_length",
        "attention.head_count", "attention.head_count_kv", "attention.layer_norm_rms_epsilon",
        "attention.key_length", "attention.value_length", NULL};
    static const char *const gemma_absent[] = {"rope.freq_base", "rope.dimension_count", "vocab_size",
                                               "attention.sliding_window", NULL};
    hf_case gemma = {.name = "gemma", .keys = gemma_keys, .absent = gemma_absent};
    synth_default(&gemma.shape, "gemma");
    gemma.shape.rope_base = 10000;
    gemma.shape.tied = true;
    gemma.shape.hf_tail = ", \"hidden_act\": \"gelu\"";
    run_case(&gemma);

    hf_case gemma3 = {.name = "gemma3", .keys = gemma3_keys, .absent = gemma3_absent};
    synth_default(&gemma3.shape, "gemma3");
    run_case(&gemma3);

    /* gemma3 with layer_types that are not the default five-of-six: the
     * per-layer pattern key carries them (and the logits still agree) */
    hf_case g3l = gemma3;
    g3l.name = "gemma3_layers";
    g3l.absent = NULL;
    g3l.shape.hf_tail = ", \"hidden_activation\": \"gelu_pytorch_tanh\", \"query_pre_attn_scalar\": 32, "
                        "\"sliding_window\": 8, \"layer_types\": [\"full_attention\", \"sliding_attention\", "
                        "\"sliding_attention\", \"full_attention\", \"sliding_attention\", "
                        "\"sliding_attention\", \"full_attention\"], \"rope_local_base_freq\": 10000.0, "
                        "\"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": 8.0}";
    {
        char dir[512], gguf[512], out[512];
        snprintf(dir, sizeof dir, "%s/quant_hf_%s", kt_build_dir(), g3l.name);
        snprintf(gguf, sizeof gguf, "%s/quant_hf_%s_src.gguf", kt_build_dir(), g3l.name);
        snprintf(out, sizeof out, "%s/quant_hf_%s.gguf", kt_build_dir(), g3l.name);
        mkdir(dir, 0755);
        CHECK(synth_write_gguf(&g3l.shape, gguf) && synth_write_hf(&g3l.shape, gguf, dir), "gemma3 layers");
        kld_error err = {0};
        CHECK_OK(kld_quantize_file(dir, out, "f16", NULL, NULL, &err), err);
        kld_gguf *g = NULL;
        CHECK_OK(kld_gguf_open(out, &g, &err), err);
        const kld_gguf_value *arr = g ? kld_gguf_get_arr(g, "gemma3.attention.sliding_window_pattern") : NULL;
        static const int64_t want[7] = {0, 1, 1, 0, 1, 1, 0};
        bool ok = arr && arr->v.arr.n == 7;
        for (uint64_t i = 0; ok && i < 7; i++) {
            int64_t v = -1;
            ok = kld_gguf_arr_int(arr, i, &v) && v == want[i];
        }
        CHECK(ok, "gemma3 layer_types → attention.sliding_window_pattern 0,1,1,0,1,1,0");
        kld_gguf_close(g);
        int32_t ids[24];
        for (int i = 0; i < 24; i++) ids[i] = (int32_t)((i * 31 + 5) % g3l.shape.n_vocab);
        int64_t n1 = 0, n2 = 0;
        float *a = tf_engine_logits(dir, ids, 24, 24, 2, &n1), *b = tf_engine_logits(out, ids, 24, 24, 2, &n2);
        CHECK(a && b && n1 == n2 && !memcmp(a, b, sizeof(float) * 24 * (size_t)n1),
              "gemma3 layer_types: converted logits equal the HF directory's");
        free(a);
        free(b);
        remove(out);
        remove(gguf);

        /* a query scale llama.cpp's gemma3 graph would not apply */
        synth_shape bad = gemma3.shape;
        bad.hf_tail = ", \"hidden_activation\": \"gelu_pytorch_tanh\", \"query_pre_attn_scalar\": 64, "
                      "\"sliding_window\": 8, \"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": 8.0}";
        CHECK(synth_write_gguf(&bad, gguf), "gemma3 source");
        refuse(&bad, gguf, "gemma3_qscale", "query_pre_attn_scalar");
        remove(gguf);
    }
    remove(gemma_tok);
    rope_cases();
    return kt_finish();
}
