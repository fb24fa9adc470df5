/* test_forward_hybrid.c — hybrid recurrent architectures on small random
 * models: LFM2 (short convolutions between GQA layers) from GGUF and from
 * a Hugging Face copy against the float64 reference of test_ref_hybrid.c,
 * chunk invariance and decode == prefill (bit-identical), a session reset
 * that clears the recurrent state, the memory plan's recurrent state and
 * attention-only KV cache, and the errors for malformed files. */
#include "engine/engine.h"
#include "test_forward_models.h"
#include "testlib.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#define N_IDS 40

static bool synth_pair(const char *name, const synth_shape *s, char *gguf, char *hf, size_t cap) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/hybrid-%s", kt_build_dir(), name);
    mkdir(dir, 0755);
    snprintf(gguf, cap, "%s/model.gguf", dir);
    snprintf(hf, cap, "%s/hf", dir);
    mkdir(hf, 0755);
    bool ok = synth_write_gguf(s, gguf) && synth_write_hf(s, gguf, hf);
    CHECK(ok, "synthesize %s", name);
    return ok;
}

/* Engine vs reference (GGUF and HF), chunking, decode; the HF copy must
 * give the GGUF's logits (same weights, same semantics). */
static void test_lfm2_forward(const char *name, const synth_shape *s) {
    char gguf[600], hf[600], label[96];
    if (!synth_pair(name, s, gguf, hf, sizeof gguf)) return;
    int32_t ids[N_IDS];
    tf_make_ids(ids, N_IDS, s->n_vocab, 987654321);
    snprintf(label, sizeof label, "%s gguf", name);
    float *rg = tf_check_path(label, gguf, gguf, NULL, ids, N_IDS);
    snprintf(label, sizeof label, "%s hf", name);
    free(tf_check_path(label, hf, gguf, NULL, ids, N_IDS));
    free(rg);
}

/* The plan holds the convolution state ((L - 1)·n_embd floats per conv
 * layer) and K/V only for the attention layers. */
static void test_plan(const char *gguf, const synth_shape *sh) {
    kld_error err = {0};
    kld_model *m = NULL;
    kld_status st = kld_model_open(gguf, NULL, &m, &err);
    CHECK_OK(st, err);
    if (st != KLD_OK) return;
    int64_t n_conv = 0;
    for (int64_t il = 0; il < sh->n_layer; il++) n_conv += sh->layer_kinds[il] == 'c';
    const kld_hparams *hp = kld_model_hparams(m);
    CHECK(hp->n_layer_attn == sh->n_layer - n_conv, "lfm2: %" PRId64 " attention layers",
          hp->n_layer_attn);
    kld_mem_plan p;
    st = kld_mem_plan_compute(m, 64, 16, 1, &p, &err);
    CHECK_OK(st, err);
    const uint64_t want_rec = (uint64_t)n_conv * (uint64_t)((sh->l_cache - 1) * sh->n_embd) * 4;
    const uint64_t want_kv_tok = (uint64_t)(sh->n_layer - n_conv) * 2 * (uint64_t)(sh->n_head_kv * sh->head_dim) * 4;
    printf("lfm2 plan: recurrent %" PRIu64 " B (want %" PRIu64 "), KV %" PRIu64 " B per token (want %"
           PRIu64 "), KV %" PRIu64 " B\n", p.recurrent_bytes, want_rec, p.kv_token_bytes, want_kv_tok,
           p.kv_bytes);
    CHECK(p.recurrent_bytes == want_rec, "lfm2: recurrent state %" PRIu64 " bytes", p.recurrent_bytes);
    CHECK(p.kv_token_bytes == want_kv_tok, "lfm2: KV bytes per token %" PRIu64, p.kv_token_bytes);
    CHECK(p.kv_bytes == want_kv_tok * 64, "lfm2: KV cache %" PRIu64 " bytes for 64 positions", p.kv_bytes);
    CHECK(p.arena_bytes >= p.kv_bytes + p.recurrent_bytes + p.act_bytes, "lfm2: the arena holds it all");
    char buf[2048] = "";
    FILE *f = fmemopen(buf, sizeof buf - 1, "w");
    if (f) {
        kld_mem_plan_print(&p, f);
        fclose(f);
    }
    CHECK(strstr(buf, "recurrent state") != NULL, "lfm2: the printed plan names the recurrent state:\n%s", buf);
    kld_model_close(m);
}

/* Thread counts give the same bits; levers (quantized KV for the attention
 * layers, q8 activations, online softmax) run and stay close. */
static void test_threads_levers(const char *gguf, int64_t nv) {
    int32_t ids[N_IDS];
    tf_make_ids(ids, N_IDS, nv, 987654321);
    int64_t nv2 = 0;
    float *two = tf_engine_logits(gguf, ids, N_IDS, N_IDS, 2, &nv2);
    float *one = tf_engine_logits(gguf, ids, N_IDS, 7, 1, &nv2);
    float *three = tf_engine_logits(gguf, ids, N_IDS, 5, 3, &nv2);
    const size_t bytes = sizeof(float) * (size_t)(N_IDS * nv);
    CHECK(two && one && memcmp(two, one, bytes) == 0, "lfm2: 1 thread must equal 2 threads");
    CHECK(two && three && memcmp(two, three, bytes) == 0, "lfm2: 3 threads must equal 2 threads");
    kld_error err = {0};
    kld_model *m = NULL;
    kld_session *s = NULL;
    kld_levers lv;
    kld_levers_default(&lv);
    kld_status st = kld_levers_parse("kv=f16,act=q8,attention=online", &lv, &err);
    if (st == KLD_OK) st = kld_model_open(gguf, NULL, &m, &err);
    kld_session_opts o = {.n_ctx = N_IDS, .max_chunk = 16, .n_threads = 2, .levers = &lv};
    if (st == KLD_OK) st = kld_session_create_opts(m, &o, &s, &err);
    float *lev = malloc(bytes);
    for (int64_t i = 0; st == KLD_OK && i < N_IDS; i += 16)
        st = kld_session_eval(s, ids + i, N_IDS - i < 16 ? N_IDS - i : 16, lev + i * nv, &err);
    CHECK_OK(st, err);
    if (st == KLD_OK && two) {
        tf_cmp c = tf_compare(two, lev, N_IDS, nv);
        printf("lfm2 levers kv=f16,act=q8,attention=online: max|d| %.2e, KLD %.2e, argmax %d/%d\n",
               c.max_abs, c.mean_kld, c.same_argmax, N_IDS);
        CHECK(c.max_abs > 0 && c.mean_kld < 1e-2, "lfm2: levers change the logits a little (%g, %g)",
              c.max_abs, c.mean_kld);
    }
    free(lev);
    free(one);
    free(two);
    free(three);
    kld_session_free(s);
    kld_model_close(m);
}

/* Quantize-on-load: the matrices become q8_0, the convolution kernels stay
 * as stored (llama.cpp's quantize skips shortconv.conv.weight). */
static void test_policy(const char *gguf, int64_t nv) {
    int32_t ids[N_IDS];
    tf_make_ids(ids, N_IDS, nv, 987654321);
    char path[700];
    snprintf(path, sizeof path, "%s@q8_0", gguf);
    int64_t nv2 = 0;
    float *ref = tf_engine_logits(gguf, ids, N_IDS, N_IDS, 2, &nv2);
    float *q8 = tf_engine_logits(path, ids, N_IDS, N_IDS, 2, &nv2);
    CHECK(ref && q8, "lfm2@q8_0 must open and run");
    if (ref && q8) {
        tf_cmp c = tf_compare(ref, q8, N_IDS, nv);
        printf("lfm2@q8_0 vs f16: max|d| %.2e, KLD %.2e, argmax %d/%d\n", c.max_abs, c.mean_kld,
               c.same_argmax, N_IDS);
        CHECK(c.max_abs > 0 && c.mean_kld < 1e-2, "lfm2@q8_0: close to the f16 weights (%g)", c.mean_kld);
    }
    free(ref);
    free(q8);
}

static void test_errors(void) {
    synth_shape s;
    synth_default(&s, "lfm2");
    s.drop_tensor = "blk.1.shortconv.conv.weight";
    tf_expect_open_error("lfm2-no-conv", &s, "blk.1.shortconv.conv.weight", "missing");
    synth_default(&s, "lfm2");
    s.l_cache_key = 4; /* tensors of width 3 */
    tf_expect_open_error("lfm2-l-cache", &s, "blk.0.shortconv.conv.weight", "l_cache = 4");
    synth_default(&s, "lfm2");
    s.l_cache_key = 1;
    tf_expect_open_error("lfm2-l-cache-1", &s, "lfm2.shortconv.l_cache", "= 1");
    synth_default(&s, "lfm2");
    s.l_cache_key = -1;
    tf_expect_open_error("lfm2-no-l-cache", &s, "lfm2.shortconv.l_cache", "missing");
    static const int32_t short_kv[5] = {0, 0, 2, 0, 0};
    synth_default(&s, "lfm2");
    s.kv_array = short_kv;
    s.n_kv_array = 5;
    tf_expect_open_error("lfm2-kv-length", &s, "lfm2.attention.head_count_kv", "5 entries");
    static const int32_t mixed_kv[6] = {0, 0, 2, 0, 0, 4};
    synth_default(&s, "lfm2");
    s.kv_array = mixed_kv;
    tf_expect_open_error("lfm2-kv-mixed", &s, "head_count_kv'[5] = 4", "different");
    /* the key says layer 1 attends, the tensors are a convolution's */
    static const int32_t wrong_kind[6] = {0, 2, 2, 0, 0, 2};
    synth_default(&s, "lfm2");
    s.kv_array = wrong_kind;
    tf_expect_open_error("lfm2-pattern", &s, "blk.1.attn_q.weight", "missing");
    /* config.json */
    synth_default(&s, "lfm2");
    s.hf_tail = ", \"conv_bias\": false, \"layer_types\": [\"conv\", \"conv\", \"full_attention\"]";
    tf_expect_open_error("lfm2-hf-types", &s, "layer_types", "6 entries");
    synth_default(&s, "lfm2");
    s.hf_tail = ", \"layer_types\": [\"conv\", \"conv\", \"full_attention\", \"conv\", \"mamba\", "
                "\"full_attention\"]";
    tf_expect_open_error("lfm2-hf-kind", &s, "layer_types\"[4]", "mamba");
    synth_default(&s, "lfm2");
    s.hf_tail = ", \"conv_bias\": true, \"layer_types\": [\"conv\", \"conv\", \"full_attention\", "
                "\"conv\", \"conv\", \"full_attention\"]";
    tf_expect_open_error("lfm2-hf-bias", &s, "conv_bias", NULL);
    synth_default(&s, "lfm2");
    s.hf_tail = ", \"full_attn_idxs\": [2, 5]"; /* the older key: the same layout */
    char gguf[600], hf[600];
    if (synth_pair("lfm2-idxs", &s, gguf, hf, sizeof gguf)) {
        int32_t ids[N_IDS];
        tf_make_ids(ids, N_IDS, s.n_vocab, 5);
        free(tf_check_path("lfm2-idxs hf", hf, gguf, NULL, ids, N_IDS));
    }
}

int main(void) {
    synth_shape s;
    synth_default(&s, "lfm2");
    test_lfm2_forward("lfm2", &s);
    /* a wider kernel, a leading attention layer, untied head, q8_0 weights */
    synth_shape w;
    synth_default(&w, "lfm2");
    w.layer_kinds = "accac";
    w.n_layer = 5;
    w.l_cache = 5;
    w.tied = false;
    w.mat_type = KLD_TYPE_Q8_0;
    w.seed = 11;
    test_lfm2_forward("lfm2-wide", &w);
    char gguf[600];
    snprintf(gguf, sizeof gguf, "%s/hybrid-lfm2/model.gguf", kt_build_dir());
    tf_check_reset("lfm2", gguf, s.n_vocab);
    test_threads_levers(gguf, s.n_vocab);
    test_policy(gguf, s.n_vocab);
    test_plan(gguf, &s);
    test_errors();
    return kt_finish();
}
