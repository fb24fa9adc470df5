/* test_lora.c — LoRA adapters: a seeded adapter for a tiny synthesized
 * llama written both as llama.cpp's GGUF adapter and as a PEFT folder
 * (B's q/k rows in Hugging Face order). Checks: B = 0 changes no logit
 * (KLD exactly 0 in `kl`); the adapted logits match the float64 reference
 * run on the merged weights W + s·(alpha/r)·B·A; the GGUF and PEFT copies
 * give identical logits on a GGUF base and on its Hugging Face copy; the
 * lora= lever (self-flag) equals MODEL+ADAPTER; a missing alpha is
 * llama.cpp's default (scale without alpha/r); malformed adapters fail
 * naming the file and the tensor or key. */
#include "lora_fixture.h"
#include "test_forward_models.h"
#include "testlib.h"

#include "engine/engine.h"
#include "io/gguf_writer.h"
#include "tensor/types.h"

#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>

static synth_shape shape;
static const char *kldeval;
static char dir[512];

/* ---- logits ---- */

static const int32_t ids[] = {1, 17, 42, 99, 3, 250, 7, 8, 120, 64, 5, 77, 200, 31, 2, 9, 11, 150};
#define N_IDS ((int64_t)(sizeof ids / sizeof ids[0]))

/* Logits of ids through path with levers (NULL: none), chunks of `chunk`. */
static float *logits_of(const char *path, const char *levers, int64_t chunk, int threads,
                        int64_t *nv, kld_error *err) {
    kld_model *m = NULL;
    if (kld_model_open(path, NULL, &m, err) != KLD_OK) return NULL;
    *nv = kld_model_hparams(m)->n_vocab;
    kld_levers lv;
    kld_levers_default(&lv);
    kld_session *s = NULL;
    kld_session_opts so = {N_IDS, chunk, threads, NULL, &lv, false, 0};
    float *out = malloc(sizeof(float) * (size_t)(N_IDS * *nv));
    kld_status st = levers ? kld_levers_parse(levers, &lv, err) : KLD_OK;
    if (!st) st = kld_levers_check(&lv, m, err);
    if (!st) st = kld_session_create_opts(m, &so, &s, err);
    for (int64_t i = 0; !st && i < N_IDS; i += chunk)
        st = kld_session_eval(s, ids + i, N_IDS - i < chunk ? N_IDS - i : chunk, out + i * *nv, err);
    kld_session_free(s);
    kld_model_close(m);
    if (st) {
        free(out);
        return NULL;
    }
    return out;
}

static float *must_logits(const char *path, const char *levers, int64_t chunk, int threads,
                          int64_t *nv) {
    kld_error err = {0};
    float *l = logits_of(path, levers, chunk, threads, nv, &err);
    CHECK(l != NULL, "%s %s: %s", path, levers ? levers : "", err.msg);
    return l;
}

static bool same(const float *a, const float *b, int64_t nv) {
    return a && b && !memcmp(a, b, sizeof(float) * (size_t)(N_IDS * nv));
}

static char base_gguf[600], base_hf[600], ad_gguf[600], ad_peft[600], zero_gguf[600];

static void test_merged_reference(const adapter *ad, double scale_eff) {
    int64_t nv = 0, rv = 0;
    char spec[1300];
    snprintf(spec, sizeof spec, "%s+%s", base_gguf, ad_gguf);
    float *eng = must_logits(spec, NULL, 5, 2, &nv);
    /* merged: W + s·B·A in double */
    const char *names[MAX_T];
    double *deltas[MAX_T];
    lora_ref_deltas(ad, scale_eff, names, deltas);
    ref_opts o = {.n_delta = ad->n, .delta_names = names, .deltas = (const double *const *)deltas};
    float *ref = ref_forward_opts(base_gguf, &o, ids, N_IDS, &rv);
    float *plain = ref_forward(base_gguf, ids, N_IDS, &rv);
    if (eng && ref && plain) {
        tf_cmp c = tf_compare(ref, eng, N_IDS, nv), d = tf_compare(ref, plain, N_IDS, nv);
        CHECK(c.max_abs <= 1e-4, "adapted engine vs merged float64 reference: max |d| %g", c.max_abs);
        CHECK(d.max_abs > 0.05, "the adapter changes the logits (max |d| %g against the base)", d.max_abs);
    }
    for (int i = 0; i < ad->n; i++) free(deltas[i]);
    free(eng), free(ref), free(plain);
}

static void test_forms_and_lever(void) {
    int64_t nv = 0;
    char spec[1300], lever[800];
    snprintf(spec, sizeof spec, "%s+%s", base_gguf, ad_gguf);
    float *merged_path = must_logits(spec, NULL, 5, 2, &nv);
    snprintf(lever, sizeof lever, "lora=%s", ad_gguf);
    float *lev = must_logits(base_gguf, lever, 5, 2, &nv);
    float *lev1 = must_logits(base_gguf, lever, 1, 1, &nv); /* decode steps, one thread */
    snprintf(lever, sizeof lever, "lora=%s", ad_peft);
    float *peft = must_logits(base_gguf, lever, 5, 2, &nv);
    CHECK(same(merged_path, lev, nv), "MODEL+ADAPTER equals the lora= lever bit for bit");
    CHECK(same(lev, peft, nv), "GGUF and PEFT copies give identical logits (GGUF base)");
    if (lev && lev1) {
        tf_cmp c = tf_compare(lev, lev1, N_IDS, nv);
        CHECK(c.max_abs <= 1e-4, "chunk 1 on 1 thread vs chunk 5 on 2: max |d| %g", c.max_abs);
    }
    /* the Hugging Face copy of the base (q/k rows in rotate-half order) */
    float *hf_g = NULL, *hf_p = NULL;
    snprintf(spec, sizeof spec, "%s+%s", base_hf, ad_gguf);
    hf_g = must_logits(spec, NULL, 5, 2, &nv);
    snprintf(spec, sizeof spec, "%s+%s", base_hf, ad_peft);
    hf_p = must_logits(spec, NULL, 5, 2, &nv);
    CHECK(same(hf_g, hf_p, nv), "GGUF and PEFT copies give identical logits (HF base)");
    if (hf_g && lev) {
        tf_cmp c = tf_compare(lev, hf_g, N_IDS, nv);
        CHECK(c.max_abs <= 1e-4, "HF base vs GGUF base, both adapted: max |d| %g", c.max_abs);
    }
    /* scale: :0 is the base exactly, :0.5 halves s */
    float *base = must_logits(base_gguf, NULL, 5, 2, &nv);
    snprintf(lever, sizeof lever, "lora=%s:0", ad_gguf);
    float *s0 = must_logits(base_gguf, lever, 5, 2, &nv);
    CHECK(same(base, s0, nv), "lora=A:0 gives the base logits bit for bit");
    free(merged_path), free(lev), free(lev1), free(peft), free(hf_g), free(hf_p), free(base), free(s0);
}

static void test_zero_and_alpha(const adapter *ad) {
    int64_t nv = 0;
    char lever[800], p[700];
    float *base = must_logits(base_gguf, NULL, 5, 2, &nv);
    snprintf(lever, sizeof lever, "lora=%s", zero_gguf);
    float *z = must_logits(base_gguf, lever, 5, 2, &nv);
    CHECK(same(base, z, nv), "B = 0 leaves every logit unchanged");
    /* alpha absent: llama.cpp's default, scale = SCALE (no alpha/r) == alpha = r */
    snprintf(p, sizeof p, "%s/noalpha.gguf", dir);
    write_gguf_adapter(ad, &(gguf_opts){.no_alpha = true}, p);
    snprintf(lever, sizeof lever, "lora=%s", p);
    float *na = must_logits(base_gguf, lever, 5, 2, &nv);
    snprintf(p, sizeof p, "%s/alpha_r.gguf", dir);
    write_gguf_adapter(ad, &(gguf_opts){.alpha = RANK}, p);
    snprintf(lever, sizeof lever, "lora=%s", p);
    float *ar = must_logits(base_gguf, lever, 5, 2, &nv);
    CHECK(same(na, ar, nv), "no adapter.lora.alpha == alpha = r (scale 1)");
    free(base), free(z), free(na), free(ar);
}

/* ---- malformed adapters ---- */

static void expect_error(const char *path, const char *a, const char *b) {
    int64_t nv;
    kld_error err = {0};
    char lever[800];
    snprintf(lever, sizeof lever, "lora=%s", path);
    float *l = logits_of(base_gguf, lever, 5, 1, &nv, &err);
    CHECK(!l, "%s: expected an error", path);
    CHECK(strstr(err.msg, a) && (!b || strstr(err.msg, b)), "%s: error names '%s'%s%s: %s", path,
          a, b ? " and " : "", b ? b : "", err.msg);
    free(l);
}

static void test_malformed(adapter *ad) {
    char p[700], cfg[1024];
    /* shape mismatch: A of blk.1.attn_v with one column too few */
    snprintf(p, sizeof p, "%s/bad_shape.gguf", dir);
    write_bad_shape_adapter(ad, p);
    expect_error(p, "bad_shape.gguf", "blk.1.attn_v.weight.lora_a");
    /* unknown base tensor */
    snprintf(p, sizeof p, "%s/unknown.gguf", dir);
    write_unknown_tensor_adapter(ad, p);
    expect_error(p, "unknown.gguf", "blk.7.attn_q.weight");
    /* not an adapter */
    snprintf(p, sizeof p, "%s/not_adapter.gguf", dir);
    write_gguf_adapter(ad, &(gguf_opts){.general_type = "model", .alpha = 8}, p);
    expect_error(p, "not_adapter.gguf", "general.type");
    expect_error(base_gguf, "general.type", NULL);
    /* another architecture */
    snprintf(p, sizeof p, "%s/arch.gguf", dir);
    write_gguf_adapter(ad, &(gguf_opts){.arch = "qwen2", .alpha = 8}, p);
    expect_error(p, "arch.gguf", "qwen2");
    /* PEFT: rank 0, rank disagreeing with the tensors, a module outside target_modules */
    snprintf(p, sizeof p, "%s/peft_r0", dir);
    write_peft(ad, &shape, "{\"r\": 0, \"lora_alpha\": 8}", p);
    expect_error(p, "adapter_config.json", "\"r\"");
    snprintf(p, sizeof p, "%s/peft_r8", dir);
    write_peft(ad, &shape, "{\"r\": 8, \"lora_alpha\": 8}", p);
    expect_error(p, "adapter_model.safetensors", "rank 4");
    snprintf(p, sizeof p, "%s/peft_targets", dir);
    snprintf(cfg, sizeof cfg, "{\"r\": 4, \"lora_alpha\": 8, \"target_modules\": [\"q_proj\"]}");
    write_peft(ad, &shape, cfg, p);
    expect_error(p, "target_modules", "k_proj");
    expect_error("/nonexistent/adapter.gguf", "/nonexistent/adapter.gguf", "not found");
    /* lever syntax */
    kld_levers lv;
    kld_levers_default(&lv);
    kld_error err = {0};
    CHECK(kld_levers_parse("lora=", &lv, &err) != KLD_OK && strstr(err.msg, "lora"),
          "lora= with no path is an error: %s", err.msg);
    CHECK_OK(kld_levers_parse("lora=a/b.gguf:0.25,kv=q8_0", &lv, &err), err);
    CHECK(!strcmp(lv.lora_path, "a/b.gguf") && lv.lora_scale == 0.25f, "path and scale parsed");
    char buf[256];
    kld_levers_format(&lv, buf, sizeof buf);
    CHECK(!strcmp(buf, "kv=q8_0,lora=a/b.gguf:0.25"), "canonical text: %s", buf);
    /* MODEL+ADAPTER@POLICY is the undefined order */
    char spec[1400];
    snprintf(spec, sizeof spec, "%s+%s@q8_0", base_gguf, ad_gguf);
    kld_model *m = NULL;
    CHECK(kld_model_open(spec, NULL, &m, &err) != KLD_OK && strstr(err.msg, "MODEL@POLICY+ADAPTER"),
          "MODEL+ADAPTER@POLICY names the defined order: %s", err.msg);
    kld_model_close(m);
}

/* ---- the CLI: self-flag vs two models, B = 0 ---- */

static int run(const char *args, const char *out) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' %s >'%s' 2>&1", kldeval, args, out);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static json_t *kl_json(const char *args) {
    char full[4096], json[700], out[700];
    snprintf(json, sizeof json, "%s/kl.json", dir);
    snprintf(out, sizeof out, "%s/kl.out", dir);
    remove(json);
    snprintf(full, sizeof full, "kl %s --ids-file %s/ids.bin --ctx 9 --chunk 4 --no-db --quiet "
             "--json '%s'", args, dir, json);
    int rc = run(full, out);
    CHECK(rc == 0, "exit 0 (got %d): kl %s", rc, args);
    if (rc) {
        char *t = kt_read_file(out, NULL);
        fprintf(stderr, "%s\n", t);
        free(t);
    }
    json_error_t e;
    return json_load_file(json, 0, &e);
}

static double kld_mean(const json_t *j) {
    return json_real_value(json_object_get(json_object_get(j, "kld"), "mean"));
}

static void test_cli(void) {
    if (!kldeval) return;
    char p[700], args[2048];
    snprintf(p, sizeof p, "%s/ids.bin", dir);
    kt_write_file(p, ids, sizeof ids);
    snprintf(args, sizeof args, "-m %s --lever lora=%s", base_gguf, ad_gguf);
    json_t *self = kl_json(args);
    snprintf(args, sizeof args, "--ref %s --arm %s+%s", base_gguf, base_gguf, ad_gguf);
    json_t *two = kl_json(args);
    snprintf(args, sizeof args, "-m %s --lever lora=%s", base_gguf, zero_gguf);
    json_t *zero = kl_json(args);
    if (self && two && zero) {
        CHECK(kld_mean(self) > 1e-3, "the adapter moves the distribution: KLD %g", kld_mean(self));
        CHECK(kld_mean(self) == kld_mean(two), "self-flag KLD %.17g == two-model KLD %.17g",
              kld_mean(self), kld_mean(two));
        CHECK(json_real_value(json_object_get(self, "top1_agreement")) ==
                  json_real_value(json_object_get(two, "top1_agreement")), "same top-1 agreement");
        CHECK(kld_mean(zero) == 0.0, "B = 0: KLD exactly 0 (got %g)", kld_mean(zero));
        const json_t *arm = json_object_get(json_object_get(two, "config"), "arm");
        const json_t *ad = json_object_get(arm, "adapter");
        CHECK(json_is_string(ad) && strstr(json_string_value(ad), "ad.gguf"),
              "the arm's config names its adapter");
        const json_t *h = json_object_get(arm, "adapter_sha256");
        CHECK(json_is_string(h) && strlen(json_string_value(h)) == 64, "and its SHA-256");
    }
    json_decref(self), json_decref(two), json_decref(zero);
}

int main(int argc, char **argv) {
    kldeval = argc > 1 ? argv[1] : NULL;
    snprintf(dir, sizeof dir, "%s/lora_test", kt_build_dir());
    mkdir(dir, 0755);
    synth_default(&shape, "llama");
    shape.mat_type = KLD_TYPE_F32;
    shape.head_dim = 16;
    shape.rope_base = 10000;
    snprintf(base_gguf, sizeof base_gguf, "%s/base.gguf", dir);
    snprintf(base_hf, sizeof base_hf, "%s/base_hf", dir);
    snprintf(ad_gguf, sizeof ad_gguf, "%s/ad.gguf", dir);
    snprintf(ad_peft, sizeof ad_peft, "%s/ad_peft", dir);
    snprintf(zero_gguf, sizeof zero_gguf, "%s/zero.gguf", dir);
    CHECK(synth_write_gguf(&shape, base_gguf), "synthesized base");
    mkdir(base_hf, 0755);
    CHECK(synth_write_hf(&shape, base_gguf, base_hf), "its Hugging Face copy");
    adapter ad, zero;
    make_adapter(&ad, &shape, 11, false);
    make_adapter(&zero, &shape, 11, true);
    write_gguf_adapter(&ad, &(gguf_opts){.alpha = 8}, ad_gguf);
    write_gguf_adapter(&zero, &(gguf_opts){.alpha = 8}, zero_gguf);
    write_peft(&ad, &shape, peft_config, ad_peft);
    test_merged_reference(&ad, 8.0 / RANK);
    test_forms_and_lever();
    test_zero_and_alpha(&ad);
    test_malformed(&ad);
    test_cli();
    free_adapter(&ad);
    free_adapter(&zero);
    return kt_finish();
}
