/* test_model.c — hyper-parameters and weight binding: the values read from
 * every shared model (GGUF, Hugging Face, llama2.c) against the figures in
 * ../shared/README.md, and the errors for an unknown architecture, a
 * missing tensor, a wrong shape and bad session arguments, each of which
 * must name the offending tensor/field and the expected value. */
#include "engine/engine.h"
#include "engine/kernels.h"
#include "io/source.h"
#include "model/weights.h"
#include "tensor/types.h"
#include "test_forward_models.h"
#include "testlib.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>

#define SH KT_SHARED

typedef struct expect {
    const char *path, *arch;
    int64_t n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_vocab;
    kld_rope_type rope;
    double rope_base, eps;
    bool tied;
    double attn_cap, final_cap;
    int64_t window;
} expect;

static const expect expects[] = {
    {SH "/models/rand-llama/f16.gguf", "llama", 256, 2, 4, 2, 64, 768, 32000, KLD_ROPE_NORM, 1e4, 1e-5, true, 0, 0, 0},
    {SH "/models/rand-llama/q4_K_M.gguf", "llama", 256, 2, 4, 2, 64, 768, 32000, KLD_ROPE_NORM, 1e4, 1e-5, true, 0, 0, 0},
    {SH "/models/rand-llama-hf", "llama", 256, 2, 4, 2, 64, 768, 32000, KLD_ROPE_NEOX, 1e4, 1e-5, true, 0, 0, 0},
    {SH "/models/rand-qwen2/f16.gguf", "qwen2", 64, 2, 4, 2, 16, 192, 50257, KLD_ROPE_NEOX, 1e6, 1e-6, true, 0, 0, 0},
    {SH "/models/rand-qwen2-hf", "qwen2", 64, 2, 4, 2, 16, 192, 50257, KLD_ROPE_NEOX, 1e6, 1e-6, true, 0, 0, 0},
    {SH "/models/phi3/f16.gguf", "phi3", 128, 2, 4, 4, 32, 256, 512, KLD_ROPE_NEOX, 1e4, 1e-5, false, 0, 0, 2047},
    {SH "/models/gemma2/f16.gguf", "gemma2", 128, 2, 4, 2, 32, 256, 32000, KLD_ROPE_NEOX, 1e4, 1e-6, true, 50, 30, 16},
    {SH "/models/stories260K/model.bin", "llama", 64, 5, 8, 4, 8, 172, 512, KLD_ROPE_NORM, 1e4, 1e-5, true, 0, 0, 0},
    {SH "/models/aidreams260K/model.bin", "llama", 64, 4, 4, 4, 16, 172, 512, KLD_ROPE_NORM, 1e4, 1e-5, true, 0, 0, 0},
    {SH "/models/aidreams260K/f32.gguf", "llama", 64, 4, 4, 4, 16, 172, 512, KLD_ROPE_NORM, 1e4, 1e-5, false, 0, 0, 0},
};

static void test_shared_hparams(void) {
    for (size_t i = 0; i < sizeof expects / sizeof expects[0]; i++) {
        const expect *e = &expects[i];
        kld_error err = {0};
        kld_model *m = NULL;
        kld_status st = kld_model_open(e->path, NULL, &m, &err);
        CHECK_OK(st, err);
        if (st != KLD_OK) continue;
        const kld_hparams *hp = kld_model_hparams(m);
        bool ok = !strcmp(hp->arch, e->arch) && hp->n_embd == e->n_embd && hp->n_layer == e->n_layer &&
                  hp->n_head == e->n_head && hp->n_head_kv == e->n_head_kv &&
                  hp->head_dim == e->head_dim && hp->n_ff == e->n_ff && hp->n_vocab == e->n_vocab &&
                  hp->rope_type == e->rope && fabs(hp->rope_freq_base - e->rope_base) < 1e-3 * e->rope_base &&
                  fabs(hp->norm_eps - e->eps) < 1e-3 * e->eps && hp->tied_output == e->tied &&
                  hp->attn_softcap == e->attn_cap && hp->final_softcap == e->final_cap &&
                  hp->sliding_window == e->window;
        CHECK(ok, "%s: hparams arch %s embd %" PRId64 " layers %" PRId64 " heads %" PRId64 "/%" PRId64
              " hd %" PRId64 " ff %" PRId64 " vocab %" PRId64 " rope %d base %g eps %g tied %d caps %g/%g window %" PRId64,
              e->path, hp->arch, hp->n_embd, hp->n_layer, hp->n_head, hp->n_head_kv, hp->head_dim,
              hp->n_ff, hp->n_vocab, (int)hp->rope_type, hp->rope_freq_base, hp->norm_eps,
              hp->tied_output, hp->attn_softcap, hp->final_softcap, hp->sliding_window);
        kld_model_close(m);
    }
    /* Switch details that the forward tests depend on. */
    kld_error err = {0};
    kld_model *m = NULL;
    if (kld_model_open(SH "/models/gemma2/f16.gguf", NULL, &m, &err) == KLD_OK) {
        const kld_hparams *hp = kld_model_hparams(m);
        CHECK(kld_hparams_layer_swa(hp, 0) && !kld_hparams_layer_swa(hp, 1), "gemma2: layer 0 slides, 1 is global");
        CHECK(fabs(hp->embd_scale - sqrt(128.0)) < 1e-12 && fabs(hp->attn_scale - 1 / sqrt(32.0)) < 1e-12,
              "gemma2: embedding and query scales");
        CHECK(hp->sw.post_norms && hp->sw.act == KLD_ACT_GELU_TANH, "gemma2 switches");
        kld_model_close(m);
    } else {
        CHECK(false, "gemma2: %s", err.msg);
    }
}

static void test_plan(void) {
    kld_error err = {0};
    kld_model *m = NULL;
    kld_status st = kld_model_open(SH "/models/rand-llama/f16.gguf", NULL, &m, &err);
    CHECK_OK(st, err);
    if (st != KLD_OK) return;
    kld_mem_plan p;
    st = kld_mem_plan_compute(m, 2048, 512, 2, &p, &err);
    CHECK_OK(st, err);
    /* K and V: 2 layers × 2 kv heads × 64 dims × 2048 positions × 2 × 4 bytes */
    CHECK(p.kv_bytes == UINT64_C(2) * 2 * 64 * 2048 * 2 * 4, "kv bytes %" PRIu64, p.kv_bytes);
    CHECK(p.logits_bytes == UINT64_C(512) * 32000 * 4, "logits bytes %" PRIu64, p.logits_bytes);
    CHECK(p.arena_bytes == p.kv_bytes + p.act_bytes + p.scratch_bytes, "arena adds up");
    /* the file's weights; with a SIMD set (it repacks f16) the tied output's rows count twice:
     * its repacked copy, and its file rows the token lookups keep reading */
    const kld_tensor *embd = kld_source_find(kld_model_source(m), "token_embd.weight");
    const uint64_t tied = kld_engine_kernels_get()->repack && embd ? embd->nbytes : 0;
    CHECK(p.weights_bytes > 19000000 + tied && p.weights_bytes < 20260096 + tied,
          "weights %" PRIu64 " (tied output counted twice: %" PRIu64 ")", p.weights_bytes, tied);
    kld_session *s = NULL;
    st = kld_session_create(m, 2048, 512, 2, &s, &err);
    CHECK_OK(st, err);
    if (s) CHECK(kld_session_plan(s)->arena_bytes == p.arena_bytes, "session uses the plan");
    kld_session_free(s);
    st = kld_mem_plan_compute(m, 100, 200, 2, &p, &err);
    CHECK(st == KLD_ERR_ARG && strstr(err.msg, "chunk"), "chunk > ctx: %s", err.msg);
    st = kld_mem_plan_compute(m, 0, 1, 2, &p, &err);
    CHECK(st == KLD_ERR_ARG && strstr(err.msg, "context"), "ctx 0: %s", err.msg);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    kld_mem_plan_compute(m, 2048, 512, 2, &p, &err);
    kld_mem_plan_print(&p, f);
    fclose(f);
    CHECK(text && strstr(text, "KV cache") && strstr(text, "4.00 MiB"), "plan text: %s", text ? text : "");
    free(text);
    kld_model_close(m);
}

/* A synthesized model with one defect must fail to open with a message
 * containing every needle. */
static void expect_open_error(const synth_shape *s, const char *name, kld_status want,
                              const char *n1, const char *n2) {
    char path[600];
    snprintf(path, sizeof path, "%s/bad-%s.gguf", kt_build_dir(), name);
    CHECK(synth_write_gguf(s, path), "write %s", path);
    kld_error err = {0};
    kld_model *m = NULL;
    kld_status st = kld_model_open(path, NULL, &m, &err);
    CHECK(st == want && strstr(err.msg, n1) && (!n2 || strstr(err.msg, n2)),
          "%s: got %s '%s', want %s with '%s' and '%s'", name, kld_status_name(st), err.msg,
          kld_status_name(want), n1, n2 ? n2 : "");
    if (st == KLD_OK) kld_model_close(m);
}

static void test_errors(void) {
    synth_shape s;
    synth_default(&s, "qwen3");
    s.drop_tensor = "blk.1.attn_k_norm.weight";
    expect_open_error(&s, "missing", KLD_ERR_FORMAT, "'blk.1.attn_k_norm.weight' is missing", "[32]");
    synth_default(&s, "qwen3");
    s.bad_shape_tensor = "blk.0.attn_q.weight";
    expect_open_error(&s, "shape", KLD_ERR_FORMAT, "'blk.0.attn_q.weight' has shape [64, 129]",
                      "expected [64, 128]");
    synth_default(&s, "qwen3");
    s.bad_shape_tensor = "output_norm.weight";
    expect_open_error(&s, "shape1d", KLD_ERR_FORMAT, "'output_norm.weight' has shape [65]", "expected [64]");
    synth_default(&s, "gemma3");
    s.drop_tensor = "blk.3.post_ffw_norm.weight";
    expect_open_error(&s, "gemma3-missing", KLD_ERR_FORMAT, "blk.3.post_ffw_norm.weight", "missing");
    synth_default(&s, "qwen3");
    s.arch_override = "mamba";
    expect_open_error(&s, "arch", KLD_ERR_UNSUPPORTED, "architecture 'mamba' is not supported", "qwen3");
    /* Missing tensor through the Hugging Face names. */
    char dir[600], gguf[700], cfg[700];
    snprintf(dir, sizeof dir, "%s/bad-hf", kt_build_dir());
    mkdir(dir, 0755);
    snprintf(gguf, sizeof gguf, "%s/model.gguf", dir);
    synth_default(&s, "gemma3");
    s.drop_tensor = "blk.2.ffn_norm.weight";
    CHECK(synth_write_gguf(&s, gguf) && synth_write_hf(&s, gguf, dir), "write %s", dir);
    kld_error err = {0};
    kld_model *m = NULL;
    kld_status st = kld_model_open(dir, NULL, &m, &err);
    CHECK(st == KLD_ERR_FORMAT && strstr(err.msg, "model.layers.2.pre_feedforward_layernorm.weight") &&
              strstr(err.msg, "[64]"),
          "HF missing tensor: %s", err.msg);
    if (st == KLD_OK) kld_model_close(m);
    /* A config.json with an unsupported activation. */
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    kt_write_file(cfg, "{\"model_type\":\"qwen2\",\"hidden_size\":64,\"num_hidden_layers\":2,"
                       "\"intermediate_size\":128,\"num_attention_heads\":4,\"vocab_size\":300,"
                       "\"max_position_embeddings\":4096,\"rms_norm_eps\":1e-6,\"hidden_act\":\"relu\"}",
                  strlen("{\"model_type\":\"qwen2\",\"hidden_size\":64,\"num_hidden_layers\":2,"
                         "\"intermediate_size\":128,\"num_attention_heads\":4,\"vocab_size\":300,"
                         "\"max_position_embeddings\":4096,\"rms_norm_eps\":1e-6,\"hidden_act\":\"relu\"}"));
    st = kld_model_open(dir, NULL, &m, &err);
    CHECK(st == KLD_ERR_UNSUPPORTED && strstr(err.msg, "relu"), "HF activation: %s", err.msg);
    if (st == KLD_OK) kld_model_close(m);
}

int main(void) {
    test_shared_hparams();
    test_plan();
    test_errors();
    return kt_finish();
}
