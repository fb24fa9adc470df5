/* test_cli_inspect.c — `kldeval inspect --json` on every shared model:
 * the facts must match the shapes in ../shared/README.md; bad paths and
 * flags must fail with a message and a non-zero exit; the read-only block
 * types of tests/data/zoo_iq.gguf appear in the type histogram. */
#include "testlib.h"
#include "test_forward_models.h"

#include <jansson.h>
#include <stdlib.h>

static const char *kldeval;

/* Runs a command line, returns its stdout and exit status. */
static char *run(const char *args, int *status) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' %s 2>/dev/null", kldeval, args);
    char *out = NULL;
    *status = kt_run_capture(cmd, &out);
    return out;
}

typedef struct expect {
    const char *path, *format, *arch;
    int64_t n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_vocab;
    int tied;
    int64_t n_params; /* 0 = not checked */
    const char *main_type;
} expect;

static const expect models[] = {
    {"models/rand-llama/f16.gguf", "gguf", "llama", 256, 2, 4, 2, 64, 768, 32000, 1, 9766144, "f16"},
    {"models/rand-llama/q8_0.gguf", "gguf", "llama", 256, 2, 4, 2, 64, 768, 32000, 1, 9766144, "q8_0"},
    {"models/rand-llama/q4_0.gguf", "gguf", "llama", 256, 2, 4, 2, 64, 768, 32000, 1, 9766144, "q6_K"},
    {"models/rand-llama/q4_K_M.gguf", "gguf", "llama", 256, 2, 4, 2, 64, 768, 32000, 1, 9766144, "q6_K"},
    {"models/rand-llama-hf", "safetensors", "llama", 256, 2, 4, 2, 64, 768, 32000, 1, 9766144, "f16"},
    {"models/rand-qwen2/f16.gguf", "gguf", "qwen2", 64, 2, 4, 2, 16, 192, 50257, 1, 3315328, "f16"},
    {"models/rand-qwen2/q8_0.gguf", "gguf", "qwen2", 64, 2, 4, 2, 16, 192, 50257, 1, 3315328, "q8_0"},
    {"models/rand-qwen2-hf", "safetensors", "qwen2", 64, 2, 4, 2, 16, 192, 50257, 1, 3315328, "f16"},
    {"models/phi3/f16.gguf", "gguf", "phi3", 128, 2, 4, 4, 32, 256, 512, 0, 0, "f16"},
    {"models/gemma2/f16.gguf", "gguf", "gemma2", 128, 2, 4, 2, 32, 256, 32000, 1, 0, "f16"},
    {"models/stories260K/model.bin", "llama2.c", "llama", 64, 5, 8, 4, 8, 172, 512, 1, 260032, "f32"},
    {"models/stories260K/f32.gguf", "gguf", "llama", 64, 5, 8, 4, 8, 172, 512, 0, 260032 + 512 * 64, "f32"},
    {"models/stories260K/f16.gguf", "gguf", "llama", 64, 5, 8, 4, 8, 172, 512, 0, 260032 + 512 * 64, "f16"},
    {"models/stories260K/q8_0.gguf", "gguf", "llama", 64, 5, 8, 4, 8, 172, 512, 0, 260032 + 512 * 64, NULL},
    {"models/aidreams260K/model.bin", "llama2.c", "llama", 64, 4, 4, 4, 16, 172, 512, 1, 230976, "f32"},
    {"models/aidreams260K/f32.gguf", "gguf", "llama", 64, 4, 4, 4, 16, 172, 512, 0, 230976 + 512 * 64, "f32"},
    {"models/aidreams260K/f16.gguf", "gguf", "llama", 64, 4, 4, 4, 16, 172, 512, 0, 230976 + 512 * 64, "f16"},
    {"models/aidreams260K/q8_0.gguf", "gguf", "llama", 64, 4, 4, 4, 16, 172, 512, 0, 230976 + 512 * 64, NULL},
};

static int64_t geti(const json_t *o, const char *k) { return json_integer_value(json_object_get(o, k)); }

static void check_model(const expect *e) {
    char args[1024];
    snprintf(args, sizeof args, "inspect --json --tensors --meta '%s/%s'", KT_SHARED, e->path);
    int status;
    char *out = run(args, &status);
    CHECK(status == 0, "%s: exit %d", e->path, status);
    json_error_t jerr;
    json_t *f = json_loads(out, 0, &jerr);
    CHECK(f != NULL, "%s: JSON: %s", e->path, jerr.text);
    free(out);
    if (!f) return;
    CHECK(!strcmp(json_string_value(json_object_get(f, "format")), e->format), "%s: format", e->path);
    const json_t *hp = json_object_get(f, "hparams");
    CHECK(!json_object_get(hp, "error"), "%s: hparams error %s", e->path,
          json_string_value(json_object_get(hp, "error")));
    const char *arch = json_string_value(json_object_get(hp, "arch"));
    CHECK(arch && !strcmp(arch, e->arch), "%s: arch %s", e->path, arch ? arch : "?");
    CHECK(geti(hp, "n_embd") == e->n_embd && geti(hp, "n_layer") == e->n_layer &&
              geti(hp, "n_head") == e->n_head && geti(hp, "n_head_kv") == e->n_head_kv &&
              geti(hp, "head_dim") == e->head_dim && geti(hp, "n_ff") == e->n_ff &&
              geti(hp, "n_vocab") == e->n_vocab,
          "%s: shape n_embd %lld n_layer %lld n_head %lld/%lld head_dim %lld n_ff %lld n_vocab %lld",
          e->path, (long long)geti(hp, "n_embd"), (long long)geti(hp, "n_layer"),
          (long long)geti(hp, "n_head"), (long long)geti(hp, "n_head_kv"),
          (long long)geti(hp, "head_dim"), (long long)geti(hp, "n_ff"), (long long)geti(hp, "n_vocab"));
    CHECK(json_is_true(json_object_get(hp, "tied_output")) == (e->tied != 0), "%s: tied", e->path);
    if (e->n_params)
        CHECK(geti(f, "n_params") == e->n_params, "%s: n_params %lld", e->path,
              (long long)geti(f, "n_params"));
    /* the type histogram's parameters add up, and the main type dominates */
    int64_t sum = 0, best = 0;
    const char *best_type = NULL, *tn;
    json_t *h;
    json_object_foreach(json_object_get(f, "types"), tn, h) {
        sum += geti(h, "params");
        if (geti(h, "params") > best) best = geti(h, "params"), best_type = tn;
    }
    CHECK(sum == geti(f, "n_params"), "%s: histogram sums to %lld", e->path, (long long)sum);
    if (e->main_type)
        CHECK(best_type && !strcmp(best_type, e->main_type), "%s: main type %s", e->path,
              best_type ? best_type : "?");
    CHECK(json_array_size(json_object_get(f, "tensors")) == (size_t)geti(f, "n_tensors"),
          "%s: tensor table", e->path);
    CHECK(json_is_object(json_object_get(f, "metadata")), "%s: metadata", e->path);
    double bpw = json_real_value(json_object_get(f, "bits_per_weight"));
    CHECK(bpw > 4.0 && bpw <= 32.0, "%s: bits per weight %g", e->path, bpw);
    json_decref(f);
}

/* Hybrids: the layer pattern, and the kind's own sizes (the DeltaNet
 * conv and heads; the LFM2 conv width only for LFM2) in text and JSON. */
static void check_hybrids(void) {
    static const char *const archs[] = {"qwen3next", "lfm2"};
    for (int i = 0; i < 2; i++) {
        synth_shape s;
        synth_default(&s, archs[i]);
        char path[512], args[700];
        snprintf(path, sizeof path, "%s/cli_inspect_%s.gguf", kt_build_dir(), archs[i]);
        CHECK(synth_write_gguf(&s, path), "%s: synthesize", archs[i]);
        int status;
        snprintf(args, sizeof args, "inspect '%s' --json", path);
        char *out = run(args, &status);
        json_t *root = json_loads(out ? out : "", 0, NULL), *hp = json_object_get(root, "hparams");
        json_t *dn = json_object_get(hp, "deltanet");
        if (i == 0) {
            CHECK(status == 0 && dn && !json_object_get(hp, "shortconv_l_cache") &&
                  !strcmp(json_string_value(json_object_get(hp, "layer_kinds")), "ddda") &&
                  json_integer_value(json_object_get(dn, "conv_kernel")) == s.dn_conv &&
                  json_integer_value(json_object_get(dn, "n_k_heads")) == s.dn_n_k_heads &&
                  json_integer_value(json_object_get(dn, "n_v_heads")) == s.dn_n_v_heads &&
                  json_integer_value(json_object_get(dn, "head_k")) == s.dn_head &&
                  json_integer_value(json_object_get(dn, "head_v")) == s.dn_head,
                  "qwen3next --json: layer_kinds and the DeltaNet sizes: %s", out ? out : "");
        } else {
            CHECK(status == 0 && !dn && json_integer_value(json_object_get(hp, "shortconv_l_cache")) == s.l_cache,
                  "lfm2 --json: shortconv_l_cache, no deltanet: %s", out ? out : "");
        }
        json_decref(root);
        free(out);
        snprintf(args, sizeof args, "inspect '%s'", path);
        out = run(args, &status);
        CHECK(status == 0 && out && strstr(out, i == 0 ? "ddda (a attention, d gated DeltaNet: conv 4, 2 q/k "
                                                          "heads × 16, 4 v heads × 16)"
                                                        : "ccacca (a attention, c short convolution of width 3)"),
              "%s: the layers line: %s", archs[i], out ? out : "");
        free(out);
        remove(path);
    }
}

/* gpt-oss: its sinks, sliding layers and gating on the features line and in --json */
static void check_gptoss(void) {
    int status;
    char *out = run("inspect tests/data/lcpp-oracle/gpt-oss-mxfp4.gguf", &status);
    CHECK(status == 0 && out && strstr(out, "features       ffn swiglu_oai, attention sinks, sliding layers s.s "
                                            "(s: window), experts topk-softmax with biases") &&
              strstr(out, "mxfp4"),
          "gpt-oss: the features line and the mxfp4 experts: %s", out ? out : "");
    free(out);
    out = run("inspect tests/data/lcpp-oracle/gpt-oss-mxfp4.gguf --json", &status);
    json_t *root = json_loads(out ? out : "", 0, NULL), *hp = json_object_get(root, "hparams");
    CHECK(status == 0 && json_is_true(json_object_get(hp, "attn_sinks")) &&
              json_is_true(json_object_get(hp, "moe_biases")) &&
              !strcmp(json_string_value(json_object_get(hp, "moe_gating")), "topk-softmax") &&
              !strcmp(json_string_value(json_object_get(hp, "swa_layers")), "s.s"),
          "gpt-oss --json: attn_sinks, moe_biases, moe_gating, swa_layers: %s", out ? out : "");
    json_decref(root);
    free(out);
    out = run("inspect tests/data/lcpp-oracle/glm4moe.gguf", &status);
    CHECK(status == 0 && out && strstr(out, "features       ffn silu, experts sigmoid-topk x 2.5, 1 leading dense "
                                            "layer(s)") && strstr(out, "n_rot=8") && strstr(out, "n_ff_shexp=32"),
          "glm4moe: routing, scale, leading dense layer, partial rope, shared expert: %s", out ? out : "");
    free(out);
    out = run("inspect tests/data/lcpp-oracle/deepseek2-q-lora.gguf", &status);
    CHECK(status == 0 && out && strstr(out, "mla            latent kv 32, q through rank 24, q/k head 16 nope + 8 rope, "
                                            "v head 16, attention scale 0.264642") &&
              strstr(out, "experts sigmoid-topk x 2.5, 1 leading dense layer(s)") && strstr(out, "scaling=yarn"),
          "deepseek2: MLA ranks, head split, the scale with YaRN's mscale squared, routing: %s", out ? out : "");
    free(out);
    out = run("inspect tests/data/lcpp-oracle/gemma4.gguf", &status);
    CHECK(status == 0 && out && strstr(out, "features       ffn gelu_tanh, sliding layers ss.ss. (s: window), their "
                                            "RoPE base 10000, V RMS-normalised (no weight)") &&
              strstr(out, "scaling=proportional"),
          "gemma4: flags, the sliding layers' base, V norm, proportional RoPE: %s", out ? out : "");
    CHECK(out && !strstr(out, "per layer"), "gemma4: one geometry for every layer, no per-layer line");
    free(out);
    out = run("inspect tests/data/lcpp-oracle/gemma4-e2b.gguf", &status);
    CHECK(status == 0 && out && strstr(out, "per layer      head 32×4 64 32×2 64; rotated 16×4 64 16×2 64; kv heads "
                                            "2×4 1 2×2 1; ffn 48×5 96×3; KV caches read from earlier layers 5→3 "
                                            "6→3 7→4; per-layer embeddings 32"),
          "gemma4-e2b: head sizes, rotary dims, KV heads, FFN widths, shared caches, per-layer embeddings: %s",
          out ? out : "");
    free(out);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_cli_inspect KLDEVAL\n");
        return 2;
    }
    kldeval = argv[1];
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) check_model(&models[i]);
    check_hybrids();
    check_gptoss();

    int status;
    /* the read-only block types: names and sizes from the type table
     * (bytes = blocks × llama.cpp's block size) */
    char *out = run("inspect tests/data/zoo_iq.gguf --json", &status);
    json_t *f = json_loads(out, 0, NULL);
    json_t *types = json_object_get(f, "types");
    static const struct { const char *name; int64_t params, bytes; } iq[] = {
        {"iq2_xxs", 2304, 9 * 66}, {"iq2_xs", 2304, 9 * 74}, {"iq2_s", 2304, 9 * 82},
        {"iq3_xxs", 2304, 9 * 98}, {"iq3_s", 2304, 9 * 110}, {"iq1_s", 2304, 9 * 50},
        {"iq1_m", 2304, 9 * 56}, {"tq1_0", 2304, 9 * 54}, {"tq2_0", 2304, 9 * 66},
        {"mxfp4", 1120, 35 * 17}};
    CHECK(status == 0 && types, "inspect zoo_iq.gguf --json (status %d)", status);
    for (size_t i = 0; types && i < sizeof iq / sizeof iq[0]; i++) {
        json_t *h = json_object_get(types, iq[i].name);
        CHECK(h && geti(h, "tensors") == 1 && geti(h, "params") == iq[i].params &&
                  geti(h, "bytes") == iq[i].bytes,
              "inspect: %s histogram entry", iq[i].name);
    }
    json_decref(f);
    free(out);
    free(run("inspect /nonexistent/model.gguf", &status));
    CHECK(status == 1, "missing file exits 1 (got %d)", status);
    free(run("inspect --bogus x", &status));
    CHECK(status == 2, "unknown flag exits 2 (got %d)", status);
    char *help = run("inspect --help", &status);
    CHECK(status == 0 && strstr(help, "--tensors") && strstr(help, "--meta") && strstr(help, "--json"),
          "inspect --help documents its flags");
    free(help);
    return kt_finish();
}
