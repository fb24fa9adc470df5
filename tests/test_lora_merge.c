/* test_lora_merge.c — MODEL+ADAPTER in `inspect` and `quantize` (the
 * adapter merged into the weights it targets). Checks: quantize
 * IN+ADAPTER with policy f32 (f32 and f16 bases, GGUF and Hugging Face
 * inputs, GGUF and PEFT adapters) gives the logits of MODEL+ADAPTER through
 * `kldeval logits` and of the float64 reference on the merged weights; the
 * merge is recorded in kldeval.lora.*; a B = 0 adapter writes the base's
 * tensor bytes under several policies; merged tensors of a quantized base
 * are requantized and reported; inspect prints the adapter's facts (text
 * and JSON); bad adapters fail in both commands with kl's message. */
#include "lora_fixture.h"
#include "test_forward_models.h"
#include "testlib.h"

#include "io/gguf.h"
#include "tensor/types.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>

/* Merged weights against the side product y += s·B(A x): the same sums
 * reassociated in float (measured max |d| 5.2e-6 on these logits). */
#define MERGED_VS_SIDE_TOL 2e-5
/* The merged GGUF against the float64 reference on W + s·B·A (as test_lora.c
 * bounds the side product). */
#define MERGED_VS_REF_TOL 1e-4

static const char *kldeval;
static char dir[512];
static synth_shape shape;

static const int32_t ids[] = {1, 17, 42, 99, 3, 250, 7, 8, 120, 64, 5, 77, 200, 31, 2, 9, 11, 150};
#define N_IDS ((int64_t)(sizeof ids / sizeof ids[0]))

static int run(const char *args, const char *out) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' %s >'%s' 2>&1", kldeval, args, out);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Runs args; its output (malloc'd) in *text; the exit status. */
static int run_text(const char *args, char **text) {
    char out[700];
    snprintf(out, sizeof out, "%s/cmd.out", dir);
    int rc = run(args, out);
    *text = kt_read_file(out, NULL);
    if (!*text) *text = calloc(1, 1);
    return rc;
}

/* `kldeval logits -m SPEC --out`: [N_IDS][n_vocab] floats, or NULL. */
static float *cli_logits(const char *spec) {
    char args[4096], bin[700];
    snprintf(bin, sizeof bin, "%s/logits.bin", dir);
    remove(bin);
    snprintf(args, sizeof args, "logits -m '%s' --ids-file '%s/ids.bin' --out '%s' --threads 2", spec,
             dir, bin);
    char *t = NULL;
    int rc = run_text(args, &t);
    CHECK(rc == 0, "kldeval %s: exit %d: %s", args, rc, t);
    free(t);
    size_t n = 0;
    float *l = rc ? NULL : (float *)(void *)kt_read_file(bin, &n);
    CHECK(!l || n == sizeof(float) * (size_t)(N_IDS * shape.n_vocab), "%s: %zu bytes of logits", spec, n);
    return l;
}

static bool quantize(const char *in, const char *out, const char *policy, char **log) {
    char args[4096];
    snprintf(args, sizeof args, "quantize '%s' '%s' %s --threads 2", in, out, policy);
    char *t = NULL;
    int rc = run_text(args, &t);
    CHECK(rc == 0, "kldeval %s: exit %d: %s", args, rc, t);
    if (log) *log = t;
    else free(t);
    return rc == 0;
}

static double max_abs(const float *a, const float *b) {
    double m = 0;
    for (int64_t i = 0; a && b && i < N_IDS * shape.n_vocab; i++)
        if (fabs((double)a[i] - b[i]) > m) m = fabs((double)a[i] - b[i]);
    return a && b ? m : INFINITY;
}

static char base32[600], base16[600], base_q8[600], base_hf[600], ad_gguf[600], ad_peft[600],
    zero_gguf[600];

/* (a) the merged file's logits: MODEL+ADAPTER's and the float64 reference's */
static void test_merged_logits(const adapter *ad) {
    const char *names[MAX_T];
    double *deltas[MAX_T];
    lora_ref_deltas(ad, 8.0 / RANK, names, deltas);
    ref_opts ro = {.n_delta = ad->n, .delta_names = names, .deltas = (const double *const *)deltas};
    const struct {
        const char *base, *ref_base, *adapter, *label;
    } cases[] = {{base32, base32, ad_gguf, "f32 GGUF + GGUF adapter"},
                 {base16, base16, ad_gguf, "f16 GGUF + GGUF adapter"},
                 {base32, base32, ad_peft, "f32 GGUF + PEFT adapter"},
                 {base_hf, base32, ad_peft, "HF checkpoint + PEFT adapter"}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char in[1300], out[700];
        snprintf(in, sizeof in, "%s+%s", cases[c].base, cases[c].adapter);
        snprintf(out, sizeof out, "%s/merged%zu.gguf", dir, c);
        if (!quantize(in, out, "f32", NULL)) continue;
        float *side = cli_logits(in), *merged = cli_logits(out), *base = cli_logits(cases[c].base);
        int64_t rv = 0;
        float *ref = ref_forward_opts(cases[c].ref_base, &ro, ids, N_IDS, &rv);
        const double d_side = max_abs(side, merged), d_ref = max_abs(ref, merged);
        printf("%s: merged vs MODEL+ADAPTER max |d| %.3g, vs float64 reference %.3g\n",
               cases[c].label, d_side, d_ref);
        CHECK(d_side <= MERGED_VS_SIDE_TOL, "%s: merged vs MODEL+ADAPTER logits: max |d| %g",
              cases[c].label, d_side);
        CHECK(d_ref <= MERGED_VS_REF_TOL, "%s: merged vs float64 reference: max |d| %g",
              cases[c].label, d_ref);
        CHECK(max_abs(base, merged) > 0.05, "%s: the merge changes the logits (max |d| %g)",
              cases[c].label, max_abs(base, merged));
        free(side), free(merged), free(base), free(ref);
        /* the merge is recorded */
        kld_gguf *g = NULL;
        kld_error err = {0};
        CHECK_OK(kld_gguf_open(out, &g, &err), err);
        kld_str s = {0};
        double scale = 0, alpha = 0;
        int64_t n = 0;
        CHECK(g && kld_gguf_get_str(g, "kldeval.lora.adapter", &s) && kld_str_eq(s, cases[c].adapter),
              "%s: kldeval.lora.adapter names the adapter", cases[c].label);
        CHECK(g && kld_gguf_get_float(g, "kldeval.lora.scale", &scale) && scale == 1.0,
              "%s: kldeval.lora.scale 1 (got %g)", cases[c].label, scale);
        CHECK(g && kld_gguf_get_float(g, "kldeval.lora.alpha", &alpha) && alpha == 8.0,
              "%s: kldeval.lora.alpha 8 (got %g)", cases[c].label, alpha);
        CHECK(g && kld_gguf_get_int(g, "kldeval.lora.tensors", &n) && n == ad->n,
              "%s: kldeval.lora.tensors %d (got %lld)", cases[c].label, ad->n, (long long)n);
        kld_gguf_close(g);
    }
    /* :SCALE reaches the merge: :0.5 merged equals MODEL+ADAPTER:0.5 */
    char in[1300], out[700];
    snprintf(in, sizeof in, "%s+%s:0.5", base32, ad_gguf);
    snprintf(out, sizeof out, "%s/merged_half.gguf", dir);
    if (quantize(in, out, "f32", NULL)) {
        float *side = cli_logits(in), *merged = cli_logits(out);
        CHECK(max_abs(side, merged) <= MERGED_VS_SIDE_TOL, ":0.5 merged vs side product: max |d| %g",
              max_abs(side, merged));
        free(side), free(merged);
    }
    for (int i = 0; i < ad->n; i++) free(deltas[i]);
}

/* Every tensor of a and b: same names, types, shapes and bytes. */
static bool same_tensors(const char *a, const char *b, const char *label) {
    kld_gguf *ga = NULL, *gb = NULL;
    kld_error err = {0};
    bool ok = kld_gguf_open(a, &ga, &err) == KLD_OK && kld_gguf_open(b, &gb, &err) == KLD_OK &&
              ga->n_tensors == gb->n_tensors;
    for (uint64_t i = 0; ok && i < ga->n_tensors; i++) {
        const kld_tensor *x = &ga->tensors[i], *y = kld_gguf_find_tensor(gb, x->name);
        ok = y && x->type == y->type && x->nbytes == y->nbytes &&
             !memcmp(x->ne, y->ne, sizeof x->ne) && !memcmp(x->data, y->data, (size_t)x->nbytes);
        CHECK(ok, "%s: tensor '%s' differs", label, x->name);
    }
    kld_gguf_close(ga);
    kld_gguf_close(gb);
    return ok;
}

/* (b) B = 0: the base's bytes, whatever the policy */
static void test_zero_b(void) {
    const struct {
        const char *base, *policy;
    } cases[] = {{base32, "f32"}, {base32, "q8_0"}, {base16, "keep"}, {base16, "q4_K_M"},
                 {base_q8, "q4_0"}, {base_hf, "f16"}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char in[1300], a[700], b[700], label[128];
        snprintf(in, sizeof in, "%s+%s", cases[c].base, zero_gguf);
        snprintf(a, sizeof a, "%s/zero_merged.gguf", dir);
        snprintf(b, sizeof b, "%s/zero_base.gguf", dir);
        snprintf(label, sizeof label, "B = 0, %s, policy %s", strrchr(cases[c].base, '/') + 1,
                 cases[c].policy);
        if (quantize(in, a, cases[c].policy, NULL) && quantize(cases[c].base, b, cases[c].policy, NULL))
            CHECK(same_tensors(a, b, label), "%s: every tensor byte-identical to the base's", label);
    }
}

/* A quantized base: the merged tensors are requantized at the stored type */
static void test_requant(const adapter *ad) {
    char in[1300], out[700], *log = NULL;
    snprintf(in, sizeof in, "%s+%s", base_q8, ad_gguf);
    snprintf(out, sizeof out, "%s/merged_q8.gguf", dir);
    if (!quantize(in, out, "keep", &log)) return;
    char want[128];
    snprintf(want, sizeof want, "merged         %d tensor(s)", ad->n);
    CHECK(strstr(log, want) != NULL, "the plan reports the merged tensors: %s", log);
    CHECK(strstr(log, "requantized from q8_0") != NULL, "and their requantization: %s", log);
    int marked = 0;
    for (const char *q = log; (q = strstr(q, "q8_0    -> q8_0    (LoRA merged)")); q++) marked++;
    CHECK(marked == ad->n, "%d per-tensor lines mark the merge (got %d): %s", ad->n, marked, log);
    free(log);
    kld_gguf *g = NULL;
    kld_error err = {0};
    CHECK_OK(kld_gguf_open(out, &g, &err), err);
    const kld_tensor *t = g ? kld_gguf_find_tensor(g, "blk.1.ffn_down.weight") : NULL;
    CHECK(t && t->type == KLD_TYPE_Q8_0, "keep: the merged weight stays q8_0");
    kld_gguf_close(g);
    /* q8_0 rounding of the merged weights: near the side product on the
     * q8_0 weights, far nearer than the adapter's own effect */
    float *side = cli_logits(in), *merged = cli_logits(out), *base = cli_logits(base_q8);
    const double d = max_abs(side, merged), effect = max_abs(side, base);
    CHECK(d > 0 && d < 0.1 * effect, "q8_0 merged vs side product: max |d| %g, the adapter's "
          "effect %g", d, effect);
    free(side), free(merged), free(base);
}

/* (c) inspect MODEL[@POLICY]+ADAPTER[:SCALE] */
static void test_inspect(void) {
    char args[2048], *t = NULL;
    snprintf(args, sizeof args, "inspect '%s+%s:0.5'", base32, ad_gguf);
    int rc = run_text(args, &t);
    CHECK(rc == 0, "%s: exit %d: %s", args, rc, t);
    CHECK(strstr(t, "GGUF LoRA adapter") && strstr(t, "rank 4, alpha 8, scale 1 (alpha/r × SCALE 0.5)") &&
              strstr(t, "15 base weights: attn_q 2, attn_k 2, attn_v 2, attn_output 2, ffn_gate 2, "
                        "ffn_up 2, ffn_down 2, output 1"),
          "inspect text names form, rank, alpha, scale and targets: %s", t);
    free(t);
    char json[700];
    snprintf(json, sizeof json, "%s/inspect.json", dir);
    snprintf(args, sizeof args, "inspect '%s@q8_0+%s' --json", base_hf, ad_peft);
    char out[700];
    rc = run(args, json);
    CHECK(rc == 0, "%s: exit %d", args, rc);
    json_error_t je;
    json_t *j = json_load_file(json, 0, &je), *a = json_object_get(j, "adapter");
    CHECK(a != NULL, "inspect --json has an adapter object");
    if (a) {
        CHECK(!strcmp(json_string_value(json_object_get(a, "format")), "peft"), "format peft");
        CHECK(strstr(json_string_value(json_object_get(a, "config")), "adapter_config.json") != NULL,
              "the PEFT config file");
        CHECK(strstr(json_string_value(json_object_get(a, "file")), "adapter_model.safetensors") != NULL,
              "the PEFT tensor file");
        CHECK(json_integer_value(json_object_get(a, "rank")) == RANK, "rank %d", RANK);
        CHECK(json_real_value(json_object_get(a, "alpha")) == 8.0, "alpha 8");
        CHECK(json_real_value(json_object_get(a, "scale")) == 2.0, "scale alpha/r = 2");
        CHECK(json_integer_value(json_object_get(a, "n_targets")) == 15, "15 targets");
        CHECK(json_integer_value(json_object_get(json_object_get(a, "classes"), "ffn_down")) == 2,
              "two ffn_down targets");
        const int64_t params = json_integer_value(json_object_get(a, "n_params"));
        CHECK(json_integer_value(json_object_get(a, "stored_bytes")) == 4 * params && params > 0,
              "F32 A and B: 4 bytes per parameter");
        CHECK(json_is_object(json_object_get(j, "policy")), "the policy's plan is still there");
    }
    json_decref(j);
    (void)out;
}

/* (d) bad adapters: both commands fail with kl's message */
static void expect_both_fail(const char *adapter_path, const char *want1, const char *want2) {
    char spec[1300], args[4096], out[700], *kl = NULL, *ins = NULL, *q = NULL;
    snprintf(spec, sizeof spec, "%s+%s", base32, adapter_path);
    snprintf(out, sizeof out, "%s/never.gguf", dir);
    snprintf(args, sizeof args, "kl --ref '%s' --arm '%s' --ids-file '%s/ids.bin' --ctx 9 --no-db "
             "--quiet", base32, spec, dir);
    int rk = run_text(args, &kl);
    snprintf(args, sizeof args, "inspect '%s'", spec);
    int ri = run_text(args, &ins);
    snprintf(args, sizeof args, "quantize '%s' '%s' f32", spec, out);
    int rq = run_text(args, &q);
    struct stat sb;
    CHECK(rk == 1 && ri == 1 && rq == 1, "%s: kl, inspect, quantize exit 1 (%d %d %d)", adapter_path,
          rk, ri, rq);
    CHECK(stat(out, &sb) != 0, "%s: quantize writes nothing", adapter_path);
    const char *mk = strstr(kl, ": "), *mi = strstr(ins, ": "), *mq = strstr(q, ": ");
    CHECK(mk && mi && mq && strstr(mk, want1) && strstr(mk, want2), "%s: kl names '%s' and '%s': %s",
          adapter_path, want1, want2, kl);
    CHECK(mk && mi && !strcmp(mk, mi), "%s: inspect's message is kl's: %s / %s", adapter_path, ins, kl);
    CHECK(mk && mq && !strcmp(mk, mq), "%s: quantize's message is kl's: %s / %s", adapter_path, q, kl);
    free(kl), free(ins), free(q);
}

static void test_bad(adapter *ad) {
    char p[700];
    snprintf(p, sizeof p, "%s/bad_shape.gguf", dir);
    write_bad_shape_adapter(ad, p);
    expect_both_fail(p, "bad_shape.gguf", "blk.1.attn_v.weight.lora_a");
    snprintf(p, sizeof p, "%s/unknown.gguf", dir);
    write_unknown_tensor_adapter(ad, p);
    expect_both_fail(p, "unknown.gguf", "blk.7.attn_q.weight");
    snprintf(p, sizeof p, "%s/peft_r0", dir);
    write_peft(ad, &shape, "{\"r\": 0, \"lora_alpha\": 8}", p);
    expect_both_fail(p, "adapter_config.json", "\"r\"");
    snprintf(p, sizeof p, "%s/malformed.gguf", dir);
    kt_write_file(p, "GGUF\x03\0\0\0garbage", 15);
    expect_both_fail(p, "malformed.gguf", "malformed.gguf");
    /* a missing adapter beside an existing base: the adapter is named, not the whole spec */
    snprintf(p, sizeof p, "%s/no_such_adapter.gguf", dir);
    expect_both_fail(p, "adapter ", "no_such_adapter.gguf: no such file");
    /* an output path that is the spec's model or adapter is refused before
     * anything is written, also with @POLICY and :SCALE (copies, so a
     * regression cannot destroy the fixtures) */
    char cb[700], ca[700], cp[700], cmd[8192];
    snprintf(cb, sizeof cb, "%s/clobber_base.gguf", dir);
    snprintf(ca, sizeof ca, "%s/clobber_ad.gguf", dir);
    snprintf(cp, sizeof cp, "%s/clobber_peft", dir);
    snprintf(cmd, sizeof cmd, "cp '%s' '%s' && cp '%s' '%s' && rm -rf '%s' && cp -r '%s' '%s'", base32, cb, ad_gguf,
             ca, cp, ad_peft, cp);
    CHECK(system(cmd) == 0, "%s", cmd);
    size_t n_cb = 0, n_ca = 0;
    char *want_b = kt_read_file(cb, &n_cb), *want_a = kt_read_file(ca, &n_ca);
    const struct { const char *spec_fmt, *out_fmt; } clob[] = {
        {"logits -m '%s+%s' --ids 1,2 --out '%s'", "base"}, {"logits -m '%s@q8_0+%s' --ids 1,2 --out '%s'", "base"},
        {"logits -m '%s+%s:0.5' --ids 1,2 --out '%s'", "adapter"}, {"quantize -q '%s+%s:0.5' '%s' f32", "adapter"},
        {"quantize -q '%s+%s:0.5' '%s/adapter_config.json' f32", "peft"},
        {"quantize -q '%s+%s' '%s/adapter_model.safetensors' f32", "peft"}};
    for (size_t i = 0; i < sizeof clob / sizeof clob[0]; i++) {
        const bool peft = !strcmp(clob[i].out_fmt, "peft");
        const char *out = !strcmp(clob[i].out_fmt, "base") ? cb : peft ? cp : ca;
        char args[4096], *t = NULL;
        snprintf(args, sizeof args, clob[i].spec_fmt, cb, peft ? cp : ca, out);
        const int rc = run_text(args, &t);
        CHECK(rc == 2 && t && (strstr(t, "is the same file as") || strstr(t, "would overwrite")),
              "%s: refused (%d): %s", args, rc, t ? t : "");
        free(t);
    }
    { /* a lever's adapter is an input too */
        char args[4096], *t = NULL;
        snprintf(args, sizeof args, "kl -m '%s' --lever lora=%s:0.5 --ids-file '%s/ids.bin' --ctx 9 --no-db "
                 "--quiet --json '%s'", cb, ca, dir, ca);
        const int rc = run_text(args, &t);
        CHECK(rc == 2 && t && strstr(t, "is the same file as"), "%s: refused (%d): %s", args, rc, t ? t : "");
        free(t);
    }
    size_t n1 = 0, n2 = 0;
    char *got_b = kt_read_file(cb, &n1), *got_a = kt_read_file(ca, &n2);
    char pc[800];
    snprintf(pc, sizeof pc, "%s/adapter_config.json", cp);
    char *cfg = kt_read_file(pc, NULL);
    CHECK(want_b && got_b && n1 == n_cb && !memcmp(got_b, want_b, n1) && want_a && got_a && n2 == n_ca &&
          !memcmp(got_a, want_a, n2) && cfg && cfg[0] == '{', "the base, the adapter and its config are intact");
    free(want_b), free(want_a), free(got_b), free(got_a), free(cfg);
    /* two adapters in one spec, and an empty one: named, with the spec */
    static const struct { const char *fmt, *want; } specs[] = {
        {"inspect '%s+%s+%s'", "one +ADAPTER per model"}, {"quantize -q '%s+%s+%s' never.gguf f32", "one +ADAPTER per model"},
        {"inspect '%s+'%.0s%.0s", "+: LoRA '': empty adapter path"}};
    for (int i = 0; i < 3; i++) {
        char args[4096], *t = NULL;
        snprintf(args, sizeof args, specs[i].fmt, base32, ad_gguf, ad_gguf);
        const int rc = run_text(args, &t);
        CHECK(rc != 0 && t && strstr(t, specs[i].want) && strstr(t, base32), "%s: fails naming '%s' (%d): %s",
              args, specs[i].want, rc, t ? t : "");
        free(t);
    }
    /* an adapter on a routed expert of a mixture: the model has the tensor,
     * kldeval does not adapt it, and the message says so (not "another base?") */
    synth_shape moe;
    synth_default(&moe, "qwen2moe");
    moe.mat_type = KLD_TYPE_F32;
    moe.n_expert = 4, moe.n_expert_used = 2, moe.n_ff_exp = 64, moe.n_ff_shexp = 96;
    char moe_base[700];
    snprintf(moe_base, sizeof moe_base, "%s/moe_base.gguf", dir);
    CHECK(synth_write_gguf(&moe, moe_base), "synthesized qwen2moe base");
    static float za[RANK * 64], zb[64 * RANK];
    adapter ex = {.n = 1};
    ex.t[0] = (lora_t){"blk.0.ffn_up_exps.weight", moe.n_embd, moe.n_ff_exp, RANK, za, zb};
    snprintf(p, sizeof p, "%s/experts.gguf", dir);
    write_gguf_adapter(&ex, &(gguf_opts){.alpha = 8, .arch = "qwen2moe"}, p);
    /* and a PEFT adapter on one expert of the Hugging Face copy (experts kept apart) */
    char moe_split[700], moe_hf[700], moe_peft[700];
    snprintf(moe_split, sizeof moe_split, "%s/moe_split.gguf", dir);
    snprintf(moe_hf, sizeof moe_hf, "%s/moe_hf", dir);
    snprintf(moe_peft, sizeof moe_peft, "%s/experts_peft", dir);
    moe.split_experts = true;
    mkdir(moe_hf, 0755);
    CHECK(synth_write_gguf(&moe, moe_split) && synth_write_hf(&moe, moe_split, moe_hf), "its HF copy");
    adapter exh = ex;
    snprintf(exh.t[0].name, sizeof exh.t[0].name, "model.layers.0.mlp.experts.0.up_proj");
    write_peft(&exh, &moe, "{\"r\": 4, \"lora_alpha\": 8}", moe_peft);
    static const char *const cmds[] = {"inspect '%s+%s'", "quantize '%s+%s' never.gguf f32"};
    for (int i = 0; i < 4; i++) {
        char args[4096], *t = NULL;
        snprintf(args, sizeof args, cmds[i % 2], i < 2 ? moe_base : moe_hf, i < 2 ? p : moe_peft);
        const int rc = run_text(args, &t);
        CHECK(rc == 1 && t && strstr(t, i < 2 ? "'blk.0.ffn_up_exps.weight'" : "'model.layers.0.mlp.experts.0.up_proj.weight'") &&
              strstr(t, "not supported") && strstr(t, "routed experts") && !strstr(t, "another base"),
              "%s (%s): an expert adapter is refused as unsupported (%d): %s", cmds[i % 2],
              i < 2 ? "GGUF" : "PEFT", rc, t ? t : "");
        free(t);
    }
    /* quantize's own form: no @POLICY inside IN */
    char args[4096], *t = NULL;
    snprintf(args, sizeof args, "quantize '%s@q8_0+%s' '%s/x.gguf' f32", base32, ad_gguf, dir);
    const int rc = run_text(args, &t);
    CHECK(rc == 1 && strstr(t, "third argument"), "IN@POLICY+ADAPTER: %s", t);
    free(t);
}

int main(int argc, char **argv) {
    kldeval = argc > 1 ? argv[1] : NULL;
    if (!kldeval) {
        fprintf(stderr, "usage: test_lora_merge KLDEVAL\n");
        return 2;
    }
    snprintf(dir, sizeof dir, "%s/lora_merge_test", kt_build_dir());
    mkdir(dir, 0755);
    char p[700];
    snprintf(p, sizeof p, "%s/ids.bin", dir);
    kt_write_file(p, ids, sizeof ids);
    synth_default(&shape, "llama");
    shape.head_dim = 16;
    shape.rope_base = 10000;
    snprintf(base32, sizeof base32, "%s/base32.gguf", dir);
    snprintf(base16, sizeof base16, "%s/base16.gguf", dir);
    snprintf(base_q8, sizeof base_q8, "%s/base_q8.gguf", dir);
    snprintf(base_hf, sizeof base_hf, "%s/base_hf", dir);
    shape.mat_type = KLD_TYPE_F16;
    CHECK(synth_write_gguf(&shape, base16), "synthesized f16 base");
    shape.mat_type = KLD_TYPE_Q8_0;
    CHECK(synth_write_gguf(&shape, base_q8), "synthesized q8_0 base");
    shape.mat_type = KLD_TYPE_F32;
    CHECK(synth_write_gguf(&shape, base32), "synthesized f32 base");
    mkdir(base_hf, 0755);
    CHECK(synth_write_hf(&shape, base32, base_hf), "its Hugging Face copy");
    snprintf(ad_gguf, sizeof ad_gguf, "%s/ad.gguf", dir);
    snprintf(ad_peft, sizeof ad_peft, "%s/ad_peft", dir);
    snprintf(zero_gguf, sizeof zero_gguf, "%s/zero.gguf", dir);
    adapter ad, zero;
    make_adapter(&ad, &shape, 11, false);
    make_adapter(&zero, &shape, 11, true);
    write_gguf_adapter(&ad, &(gguf_opts){.alpha = 8}, ad_gguf);
    write_gguf_adapter(&zero, &(gguf_opts){.alpha = 8}, zero_gguf);
    write_peft(&ad, &shape, peft_config, ad_peft);
    test_merged_logits(&ad);
    test_zero_b();
    test_requant(&ad);
    test_inspect();
    test_bad(&ad);
    free_adapter(&ad);
    free_adapter(&zero);
    return kt_finish();
}
