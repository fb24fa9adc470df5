/* test_kl.c — the KLD ruler end to end: self-gate exact zeros, vocabulary
 * mismatch errors, aidreams260K f32 vs f16 against llama.cpp's figures, and
 * (label slow, argument "full") rand-llama against every quantized arm with
 * llama-perplexity chunking, compared with llama.cpp's printed statistics and
 * the float64 reference in ../shared/oracle/rand-llama, and q8_0 with the
 * act=q8 lever against llama.cpp's own figure (argument "act-q8" alone). */
#include "engine/engine.h"
#include "eval/kl_driver.h"
#include "testlib.h"

#include <jansson.h>
#include <math.h>

static bool run(kld_kl_config *c, kld_summary *s, kld_error *err) {
    kld_kl_result r;
    kld_status st = kld_kl_run(c, &r, err);
    CHECK_OK(st, *err);
    if (st) return false;
    st = kld_stats_finalize(r.stats, s, err);
    CHECK_OK(st, *err);
    CHECK(!r.partial, "not partial");
    CHECK(r.ref_tokens > 0 && r.ref_tokens == r.arm_tokens, "both arms evaluated the same tokens");
    kld_kl_result_free(&r);
    return st == KLD_OK;
}

static void self_gate(const char *model, const char *corpus, kld_chunking chunking, int64_t ctx) {
    kld_kl_config c;
    kld_kl_config_defaults(&c);
    c.ref = c.arm = (kld_arm_spec){.kind = KLD_ARM_MODEL, .path = model};
    c.corpus_path = corpus;
    c.chunking = chunking;
    c.ctx = ctx;
    c.chunk = 37; /* not a divisor of anything, to cross chunk boundaries */
    if (chunking == KLD_CHUNKING_DOC) {
        c.max_docs = 8;
        c.max_tokens = 96;
    } else {
        c.max_chunks = 3;
    }
    kld_summary s;
    kld_error err = {0};
    if (!run(&c, &s, &err)) return;
    CHECK(s.n_positions > 50, "%s: %llu positions", model, (unsigned long long)s.n_positions);
    CHECK(s.kld.mean == 0.0 && s.kld.max == 0.0 && s.kld.min == 0.0, "%s: self-gate KLD %g..%g",
          model, s.kld.min, s.kld.max);
    CHECK(s.jsd.max == 0.0 && s.kld_rev.max == 0.0, "%s: self-gate JSD/reverse 0", model);
    CHECK(s.top1_agreement == 1.0 && s.topk_overlap == 1.0, "%s: self-gate top-1 %g top-k %g",
          model, s.top1_agreement, s.topk_overlap);
    CHECK(s.ppl_ref == s.ppl_arm && s.ln_ppl_ratio == 0.0, "%s: self-gate PPL", model);
}

static void vocab_mismatch(void) {
    kld_kl_config c;
    kld_kl_config_defaults(&c);
    c.ref.kind = KLD_ARM_MODEL;
    c.ref.path = KT_SHARED "/models/stories260K/f32.gguf";
    c.arm.kind = KLD_ARM_MODEL;
    c.arm.path = KT_SHARED "/models/aidreams260K/f32.gguf"; /* same size, other spellings */
    c.max_docs = 2;
    c.max_tokens = 40;
    kld_kl_result r;
    kld_error err = {0};
    kld_status st = kld_kl_run(&c, &r, &err);
    CHECK(st == KLD_ERR_MISMATCH && strstr(err.msg, "first differing id"),
          "vocabulary mismatch is refused: %s", err.msg);
    if (st == KLD_OK) kld_kl_result_free(&r);
    c.allow_vocab_mismatch = true;
    st = kld_kl_run(&c, &r, &err);
    CHECK_OK(st, err);
    if (st == KLD_OK) {
        CHECK(strstr(r.vocab_note, "MISMATCH allowed") != NULL, "the report says so: %s", r.vocab_note);
        kld_summary s;
        CHECK_OK(kld_stats_finalize(r.stats, &s, &err), err);
        CHECK(s.n_positions > 0 && s.kld.mean > 0, "shared ids are scored");
        kld_kl_result_free(&r);
    }
    /* a corpus token beyond the smaller vocabulary cannot be fed to both */
    c.ref.kind = KLD_ARM_MODEL;
    c.ref.path = KT_SHARED "/models/rand-llama/f16.gguf";
    c.arm.kind = KLD_ARM_MODEL;
    c.arm.path = KT_SHARED "/models/stories260K/f32.gguf";
    st = kld_kl_run(&c, &r, &err);
    CHECK(st == KLD_ERR_MISMATCH && strstr(err.msg, "outside"), "token outside the arm: %s", err.msg);
    if (st == KLD_OK) kld_kl_result_free(&r);
}

/* llama.cpp: f16 vs the f32 base, 40 chunks of 128: Mean KLD 0.000001, same top 99.96%. */
static void aidreams_f16(void) {
    kld_kl_config c;
    kld_kl_config_defaults(&c);
    c.ref.kind = KLD_ARM_MODEL;
    c.ref.path = KT_SHARED "/models/aidreams260K/f32.gguf";
    c.arm.kind = KLD_ARM_MODEL;
    c.arm.path = KT_SHARED "/models/aidreams260K/f16.gguf";
    c.corpus_path = KT_SHARED "/corpus/licenses.txt";
    c.chunking = KLD_CHUNKING_LLAMACPP;
    c.ctx = 128;
    c.max_chunks = 40;
    kld_summary s;
    kld_error err = {0};
    if (!run(&c, &s, &err)) return;
    CHECK(s.n_positions == 40 * 63, "aidreams: %llu positions", (unsigned long long)s.n_positions);
    CHECK(s.kld.mean > 1e-8 && s.kld.mean < 1e-5, "aidreams f16: mean KLD %g (llama.cpp 1e-6)", s.kld.mean);
    CHECK(s.top1_agreement >= 0.99, "aidreams f16: same top %g (llama.cpp 0.9996)", s.top1_agreement);
    CHECK(fabs(s.ppl_ref - 414.2402) / 414.2402 < 0.01, "aidreams PPL(ref) %g (llama.cpp 414.24)", s.ppl_ref);
    printf("aidreams f32 vs f16: KLD %.3g, top-1 %.4f, PPL ref %.4f\n", s.kld.mean, s.top1_agreement, s.ppl_ref);
}

/* Windows longer than the training context are scored but flagged. */
static void ctx_warning(void) {
    kld_kl_config c;
    kld_kl_config_defaults(&c);
    c.ref = c.arm = (kld_arm_spec){.kind = KLD_ARM_MODEL, .path = KT_SHARED "/models/stories260K/f32.gguf"}; /* trained on 128 */
    c.corpus_path = KT_SHARED "/corpus/licenses.txt";
    c.chunking = KLD_CHUNKING_LLAMACPP;
    c.ctx = 200;
    c.max_chunks = 1;
    kld_kl_result r;
    kld_error err = {0};
    kld_status st = kld_kl_run(&c, &r, &err);
    CHECK_OK(st, err);
    if (st) return;
    CHECK(strstr(r.ctx_note, "exceed the training context of 128") != NULL, "ctx note: '%s'", r.ctx_note);
    CHECK(json_is_string(json_object_get(r.config, "warning")), "the JSON config carries the warning");
    kld_kl_result_free(&r);
    c.ctx = 128;
    st = kld_kl_run(&c, &r, &err);
    CHECK_OK(st, err);
    if (st) return;
    CHECK(r.ctx_note[0] == '\0', "no note within the training context: '%s'", r.ctx_note);
    kld_kl_result_free(&r);
}

/* The oracle's pre-tokenized corpus (--ids-file) scores exactly what the
 * text corpus does under llama.cpp chunking (tokenizer and windows agree). */
static void ids_file_equals_text(void) {
    kld_kl_config c;
    kld_kl_config_defaults(&c);
    c.ref.kind = KLD_ARM_MODEL;
    c.ref.path = KT_SHARED "/models/rand-llama/f16.gguf";
    c.arm.kind = KLD_ARM_MODEL;
    c.arm.path = KT_SHARED "/models/rand-llama/q4_0.gguf";
    c.chunking = KLD_CHUNKING_LLAMACPP;
    c.ctx = 256;
    c.chunk = 100;
    c.max_chunks = 3;
    c.corpus_path = KT_SHARED "/corpus/licenses.txt";
    kld_summary text, ids;
    kld_error err = {0};
    if (!run(&c, &text, &err)) return;
    c.corpus_path = NULL;
    c.ids_path = KT_SHARED "/oracle/rand-llama/corpus.tokens";
    if (!run(&c, &ids, &err)) return;
    CHECK(text.n_positions == 3 * 127 && ids.n_positions == text.n_positions, "positions %llu / %llu",
          (unsigned long long)text.n_positions, (unsigned long long)ids.n_positions);
    CHECK(text.kld.mean == ids.kld.mean && text.ppl_ref == ids.ppl_ref,
          "ids file and text agree exactly (KLD %.9g / %.9g)", text.kld.mean, ids.kld.mean);
}

/* llama.cpp's printed Mean KLD and Same top p (kld-<arm>.txt). */
static bool printed(const char *arm, double *kld, double *same_top) {
    char path[512];
    snprintf(path, sizeof path, KT_SHARED "/oracle/rand-llama/kld-%s.txt", arm);
    char *text = kt_read_file(path, NULL);
    const char *k = strstr(text, "Mean    KLD:"), *t = strstr(text, "Same top p:");
    bool ok = k && t && sscanf(k, "Mean    KLD: %lf", kld) == 1 && sscanf(t, "Same top p: %lf", same_top) == 1;
    free(text);
    return ok;
}

static void rand_llama_arm(const char *arm) {
    char arm_path[512], exact_path[512];
    snprintf(arm_path, sizeof arm_path, KT_SHARED "/models/rand-llama/%s.gguf", arm);
    snprintf(exact_path, sizeof exact_path, KT_SHARED "/oracle/rand-llama/exact-%s.json", arm);
    kld_kl_config c;
    kld_kl_config_defaults(&c);
    c.ref.kind = KLD_ARM_MODEL;
    c.ref.path = KT_SHARED "/models/rand-llama/f16.gguf";
    c.arm.kind = KLD_ARM_MODEL;
    c.arm.path = arm_path;
    c.corpus_path = KT_SHARED "/corpus/licenses.txt";
    c.chunking = KLD_CHUNKING_LLAMACPP;
    c.ctx = 256;
    c.chunk = 256;
    kld_summary s;
    kld_error err = {0};
    if (!run(&c, &s, &err)) return;
    double lc_kld, lc_top;
    CHECK(printed(arm, &lc_kld, &lc_top), "%s: llama.cpp figures readable", arm);
    json_error_t jerr;
    json_t *exact = json_load_file(exact_path, 0, &jerr);
    CHECK(exact != NULL, "%s: %s", exact_path, jerr.text);
    double ex_kld = json_real_value(json_object_get(exact, "kld_mean"));
    double ex_top = json_real_value(json_object_get(exact, "top1_agreement"));
    double ex_ppl = json_real_value(json_object_get(exact, "ppl_ref"));
    printf("rand-llama %-7s KLD %.6f (llama.cpp %.6f, float64 %.6f)  top-1 %.4f (llama.cpp %.4f)  "
           "PPL ref %.1f  n %llu\n", arm, s.kld.mean, lc_kld, ex_kld, s.top1_agreement, lc_top / 100,
           s.ppl_ref, (unsigned long long)s.n_positions);
    CHECK(s.n_positions == 29337, "%s: %llu positions (llama.cpp 29337)", arm, (unsigned long long)s.n_positions);
    CHECK(fabs(s.ppl_ref - 3089403.5398) / 3089403.5398 < 0.01, "%s: PPL(ref) %g", arm, s.ppl_ref);
    CHECK(fabs(s.kld.mean - ex_kld) / ex_kld < 1e-3, "%s: KLD %g vs float64 %g", arm, s.kld.mean, ex_kld);
    CHECK(fabs(s.top1_agreement - ex_top) < 0.005, "%s: top-1 %g vs float64 %g", arm, s.top1_agreement, ex_top);
    CHECK(fabs(s.ppl_ref - ex_ppl) / ex_ppl < 1e-3, "%s: PPL(ref) vs float64 %g", arm, ex_ppl);
    if (strcmp(arm, "q8_0") != 0) { /* q8_0's llama.cpp figure is dominated by its activation rounding */
        CHECK(fabs(s.kld.mean - lc_kld) / lc_kld < 0.05, "%s: KLD %g vs llama.cpp %g", arm, s.kld.mean, lc_kld);
        CHECK(fabs(100 * s.top1_agreement - lc_top) < 2.0, "%s: same top %g vs llama.cpp %g%%", arm,
              100 * s.top1_agreement, lc_top);
    }
    json_decref(exact);
}

/* The corpus run of the KLD issue with llama.cpp's activation rounding on
 * the arm (act=q8: q8_0 × q8_0 dot products): rand-llama q8_0 against f16
 * over the oracle's ids, llama-perplexity chunking, 231 chunks of 256, must
 * land within 5% of llama.cpp's printed Mean KLD (0.002137), which the
 * exact engine misses by 46% (0.001152, the float64 figure). */
static void rand_llama_q8_act(void) {
    kld_kl_config c;
    kld_kl_config_defaults(&c);
    c.ref.kind = KLD_ARM_MODEL;
    c.ref.path = KT_SHARED "/models/rand-llama/f16.gguf";
    c.arm.kind = KLD_ARM_MODEL;
    c.arm.path = KT_SHARED "/models/rand-llama/q8_0.gguf";
    c.arm.levers = "act=q8";
    c.ids_path = KT_SHARED "/oracle/rand-llama/corpus.tokens";
    c.chunking = KLD_CHUNKING_LLAMACPP;
    c.ctx = 256;
    c.chunk = 256;
    c.n_threads = 2;
    kld_summary s;
    kld_error err = {0};
    double t0 = kld_now_s();
    if (!run(&c, &s, &err)) return;
    double lc_kld, lc_top;
    CHECK(printed("q8_0", &lc_kld, &lc_top), "q8_0: llama.cpp figures readable");
    printf("rand-llama q8_0 --arm-lever act=q8: KLD %.6f (llama.cpp %.6f, %+.2f%%)  top-1 %.4f "
           "(llama.cpp %.4f)  n %llu  %.1f s on 2 threads\n", s.kld.mean, lc_kld,
           100 * (s.kld.mean / lc_kld - 1), s.top1_agreement, lc_top / 100,
           (unsigned long long)s.n_positions, kld_now_s() - t0);
    CHECK(s.n_positions == 29337, "act=q8: %llu positions (llama.cpp 29337)",
          (unsigned long long)s.n_positions);
    CHECK(fabs(s.kld.mean - lc_kld) / lc_kld < 0.05, "act=q8: KLD %g within 5%% of llama.cpp's %g",
          s.kld.mean, lc_kld);
}

int main(int argc, char **argv) {
    kld_kernels_init();
    if (argc > 1 && !strcmp(argv[1], "full")) {
        rand_llama_arm("q4_0");
        rand_llama_arm("q4_K_M");
        rand_llama_arm("q8_0");
        rand_llama_q8_act();
        return kt_finish();
    }
    if (argc > 1 && !strcmp(argv[1], "act-q8")) {
        rand_llama_q8_act();
        return kt_finish();
    }
    self_gate(KT_SHARED "/models/rand-llama/f16.gguf", NULL, KLD_CHUNKING_DOC, 64);
    self_gate(KT_SHARED "/models/rand-qwen2/q8_0.gguf", NULL, KLD_CHUNKING_DOC, 40);
    self_gate(KT_SHARED "/models/stories260K/model.bin", KT_SHARED "/corpus/licenses.txt",
              KLD_CHUNKING_LLAMACPP, 64);
    self_gate(KT_SHARED "/models/gemma2/f16.gguf", NULL, KLD_CHUNKING_DOC, 48);
    vocab_mismatch();
    aidreams_f16();
    ids_file_equals_text();
    ctx_warning();
    return kt_finish();
}
