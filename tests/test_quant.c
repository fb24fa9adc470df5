/* test_quant.c — src/quant against llama.cpp: recipes reproduce
 * llama-quantize's files for rand-llama (q8_0, q4_0, q4_K_M) and
 * aidreams260K (q6_K with its 172-wide fallbacks), block by block; the
 * imatrix file round-trips and quantizing with it reproduces llama-quantize
 * --imatrix (q4_K_M, iq4_xs); the policy grammar's errors name the bad
 * token; threads never change a byte; MODEL@POLICY gives the logits of the
 * quantized file bit for bit. */
#include "io/gguf_writer.h"
#include "testlib.h"

#include "engine/engine.h"
#include "io/gguf.h"
#include "quant/quant.h"
#include "tokenizer/tokenizer.h"

#include <math.h>
#include <stdlib.h>

#define RL KT_SHARED "/models/rand-llama"
#define AID KT_SHARED "/models/aidreams260K"
#define IMAT KT_SHARED "/oracle/rand-llama/imatrix"

/* Compares every tensor of two GGUFs: names in order, types, shapes; counts
 * identical blocks per type and returns the overall fraction. */
static double compare_tensors(const char *got_path, const char *want_path, const char *what) {
    kld_gguf *a = NULL, *b = NULL;
    kld_error err = {0};
    CHECK_OK(kld_gguf_open(got_path, &a, &err), err);
    CHECK_OK(kld_gguf_open(want_path, &b, &err), err);
    if (!a || !b) {
        kld_gguf_close(a);
        kld_gguf_close(b);
        return 0;
    }
    CHECK(a->n_tensors == b->n_tensors, "%s: %llu tensors, llama.cpp %llu", what,
          (unsigned long long)a->n_tensors, (unsigned long long)b->n_tensors);
    uint64_t same[KLD_TYPE_COUNT] = {0}, all[KLD_TYPE_COUNT] = {0}, tsame = 0, tall = 0;
    int type_mismatch = 0;
    for (uint64_t i = 0; i < a->n_tensors && i < b->n_tensors; i++) {
        const kld_tensor *x = &a->tensors[i], *y = &b->tensors[i];
        bool meta = !strcmp(x->name, y->name) && x->type == y->type && x->ne[0] == y->ne[0] &&
                    x->ne[1] == y->ne[1] && x->nbytes == y->nbytes;
        if (!meta) {
            type_mismatch++;
            char b1[16], b2[16];
            CHECK(false, "%s: tensor %llu: %s %s vs llama.cpp %s %s", what, (unsigned long long)i,
                  x->name, kld_type_name(x->type, b1), y->name, kld_type_name(y->type, b2));
            continue;
        }
        const kld_type_info *ti = kld_type_info_get(x->type);
        uint64_t nb = (uint64_t)kld_tensor_nelements(x) / (uint64_t)ti->block_size;
        for (uint64_t k = 0; k < nb; k++) {
            bool eq = !memcmp((const uint8_t *)x->data + k * (uint64_t)ti->type_size,
                              (const uint8_t *)y->data + k * (uint64_t)ti->type_size,
                              (size_t)ti->type_size);
            same[x->type] += eq;
            all[x->type]++;
        }
    }
    for (uint32_t t = 0; t < KLD_TYPE_COUNT; t++) {
        if (!all[t]) continue;
        char b[16];
        double frac = (double)same[t] / (double)all[t];
        printf("  %s: %-6s %llu/%llu blocks identical (%.4f%%)\n", what, kld_type_name(t, b),
               (unsigned long long)same[t], (unsigned long long)all[t], 100 * frac);
        CHECK(frac >= 0.999, "%s: %s blocks identical %.5f < 0.999", what, kld_type_name(t, b), frac);
        tsame += same[t];
        tall += all[t];
    }
    CHECK(type_mismatch == 0, "%s: %d tensors differ in name/type/shape", what, type_mismatch);
    kld_gguf_close(a);
    kld_gguf_close(b);
    return tall ? (double)tsame / (double)tall : 0;
}

static void test_recipe_files(void) {
    static const char *const recipes[] = {"q8_0", "q4_0", "q4_K_M"};
    for (size_t i = 0; i < 3; i++) {
        char out[512], want[512];
        snprintf(out, sizeof out, "%s/quant_%s.gguf", kt_build_dir(), recipes[i]);
        snprintf(want, sizeof want, RL "/%s.gguf", recipes[i]);
        kld_error err = {0};
        kld_quantize_opts o = {.n_threads = 2};
        kld_quant_plan sum;
        CHECK_OK(kld_quantize_file(RL "/f16.gguf", out, recipes[i], &o, &sum, &err), err);
        double frac = compare_tensors(out, want, recipes[i]);
        CHECK(frac == 1.0, "%s: all blocks identical (%.6f)", recipes[i], frac);
        /* the whole file, metadata and padding included */
        size_t na, nb;
        char *a = kt_read_file(out, &na), *b = kt_read_file(want, &nb);
        CHECK(na == nb && !memcmp(a, b, na), "%s: file identical to llama-quantize's", recipes[i]);
        free(a);
        free(b);
        remove(out);
    }
}

static void test_aidreams_fallback(void) {
    char out[512];
    snprintf(out, sizeof out, "%s/quant_aid_q6_K.gguf", kt_build_dir());
    kld_error err = {0};
    kld_quant_plan sum;
    CHECK_OK(kld_quantize_file(AID "/f32.gguf", out, "q6_K", NULL, &sum, &err), err);
    /* 26 tensors q8_0 (token_embd by the output rule, 25 by the fallback), 4
     * ffn_down f16 (172 is not a multiple of 32 either) */
    CHECK(sum.n_fallback == 29, "q6_K on aidreams: %d fallbacks (25 → q8_0, 4 → f16)", sum.n_fallback);
    CHECK(compare_tensors(out, AID "/q8_0.gguf", "aidreams q6_K") == 1.0, "aidreams identical");
    size_t na, nb;
    char *a = kt_read_file(out, &na), *b = kt_read_file(AID "/q8_0.gguf", &nb);
    CHECK(na == nb && !memcmp(a, b, na), "aidreams q6_K: file identical to llama-quantize's");
    free(a);
    free(b);
    remove(out);
    /* llama-quantize refuses q8_0 here; so do we, naming the tensor */
    kld_status st = kld_quantize_file(AID "/f32.gguf", out, "q8_0", NULL, NULL, &err);
    CHECK(st == KLD_ERR_UNSUPPORTED && strstr(err.msg, "blk.0.ffn_down.weight") &&
          strstr(err.msg, "172") && strstr(err.msg, "(and 3 more)") &&
          strstr(err.msg, "add ffn_down=f16 ") && strstr(err.msg, "'q8_0,ffn_down=f16'"),
          "q8_0 on 172-wide rows fails naming the tensor and the selector that resolves it: %s",
          err.msg);
    /* the plan lists the fallbacks */
    kld_model *m = NULL;
    CHECK_OK(kld_model_open(AID "/f32.gguf", &(kld_model_opts){.policy = "q6_K"}, &m, &err), err);
    const kld_quant_plan *p = m ? kld_model_quant_plan(m) : NULL;
    int f16_fallbacks = 0;
    for (size_t i = 0; p && i < p->n; i++)
        if (p->items[i].fallback && p->items[i].dst_type == KLD_TYPE_F16 &&
            strstr(p->items[i].name, "ffn_down") && p->items[i].wanted_type == KLD_TYPE_Q6_K)
            f16_fallbacks++;
    CHECK(f16_fallbacks == 4, "on load: 4 ffn_down q6_K → f16 fallbacks (%d)", f16_fallbacks);
    kld_model_close(m);
}

#define ST KT_SHARED "/models/stories260K"

/* The policy a refusal proposes (between "('" and "')"), into buf. */
static bool proposed_policy(const char *msg, char *buf, size_t cap) {
    const char *a = strstr(msg, "('"), *b = a ? strstr(a, "')") : NULL;
    if (!b || (size_t)(b - a - 2) >= cap) return false;
    memcpy(buf, a + 2, (size_t)(b - a - 2));
    buf[b - a - 2] = 0;
    return true;
}

/* A selector overrides the recipe's refusal: llama-quantize refuses q8_0 on
 * stories260K (ffn_down rows of 172 are not a multiple of 32); the user's
 * ffn_down=f16 stores exactly those tensors in f16 and the rest as the q8_0
 * recipe does. That is what llama-quantize's q6_K recipe gives this model
 * (q6_K falls back to q8_0, and to f16 for 172), so the file is the shared
 * q8_0.gguf but for general.file_type (7, q8_0, against 18, q6_K). A
 * refusal no selector resolves names the selectors that would, and they do. */
static void test_selector_over_refusal(void) {
    char out[512];
    snprintf(out, sizeof out, "%s/quant_st_q8_0_ffn_down_f16.gguf", kt_build_dir());
    kld_error err = {0};
    kld_quant_plan sum;
    kld_quantize_opts o = {.n_threads = 2};
    CHECK_OK(kld_quantize_file(ST "/f32.gguf", out, "q8_0,ffn_down=f16", &o, &sum, &err), err);
    CHECK(compare_tensors(out, ST "/q8_0.gguf", "stories260K q8_0,ffn_down=f16") == 1.0,
          "stories260K q8_0,ffn_down=f16: every tensor llama-quantize's");
    size_t na, nb, differ = 0, at = 0;
    char *a = kt_read_file(out, &na), *b = kt_read_file(ST "/q8_0.gguf", &nb);
    for (size_t i = 0; na == nb && i < na; i++)
        if (a[i] != b[i]) differ++, at = i;
    CHECK(na == nb && differ == 1 && a[at] == 7 && b[at] == 18,
          "the file differs from llama-quantize's only in general.file_type (%zu bytes differ; "
          "%d vs %d)", differ, na == nb ? a[at] : -1, na == nb ? b[at] : -1);
    free(a);
    free(b);
    remove(out);

    /* keep, and on load: ffn_down as stored (f32), every other matrix q8_0 */
    kld_model *m = NULL;
    CHECK_OK(kld_model_open(ST "/f32.gguf@q8_0,ffn_down=keep", NULL, &m, &err), err);
    const kld_quant_plan *p = m ? kld_model_quant_plan(m) : NULL;
    int n_down = 0, n_q8 = 0, other = 0;
    for (size_t i = 0; p && i < p->n; i++) {
        const kld_quant_item *it = &p->items[i];
        if (!it->eligible) other += it->dst_type != it->src_type;
        else if (strstr(it->name, "ffn_down")) n_down += it->dst_type == KLD_TYPE_F32 && !it->fallback;
        else n_q8 += it->dst_type == KLD_TYPE_Q8_0;
    }
    CHECK(p && n_down == 5 && n_q8 == 32 && other == 0,
          "f32.gguf@q8_0,ffn_down=keep: %d ffn_down kept f32, %d q8_0, %d others changed", n_down,
          n_q8, other);
    kld_model_close(m);

    /* refusals no selector resolves: the proposal names exactly the refused
     * tensors, and appending it resolves them */
    static const struct {
        const char *policy, *fix, *why;
    } refused[] = {
        {"q8_0,ffn_down=f16,blk:1-2.ffn_down=base", "add blk:1-2.ffn_down=f16 ", "(recipe Q8_0)"},
        {"q8_0,ffn_down=f16,blk:1.ffn_down=base,blk:3.ffn_down=q4_0",
         "add blk:1.ffn_down=f16,blk:3.ffn_down=f16 ", "(recipe Q8_0)"},
        {"q4_K_M,ffn_down=q4_0", "add ffn_down=f16 ", "asked by 'ffn_down=q4_0'"},
        {"q8_0,ffn_down=q4_1", "add ffn_down=f16 ", "asked by 'ffn_down=q4_1'"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        char spec[1024], fixed[512];
        snprintf(spec, sizeof spec, ST "/f32.gguf@%s", refused[i].policy);
        m = NULL;
        kld_status st = kld_model_open(spec, NULL, &m, &err);
        CHECK(st == KLD_ERR_UNSUPPORTED && !m && strstr(err.msg, refused[i].fix) &&
                  strstr(err.msg, refused[i].why),
              "%s: refused with '%s' and '%s': %s", refused[i].policy, refused[i].fix, refused[i].why,
              err.msg);
        kld_model_close(m);
        if (st != KLD_ERR_UNSUPPORTED || !proposed_policy(err.msg, fixed, sizeof fixed)) {
            CHECK(false, "%s: no proposed policy in '%s'", refused[i].policy, err.msg);
            continue;
        }
        snprintf(spec, sizeof spec, ST "/f32.gguf@%s", fixed);
        m = NULL;
        CHECK_OK(kld_model_open(spec, NULL, &m, &err), err);
        p = m ? kld_model_quant_plan(m) : NULL;
        int f16 = 0;
        for (size_t k = 0; p && k < p->n; k++)
            f16 += strstr(p->items[k].name, "ffn_down") && p->items[k].dst_type == KLD_TYPE_F16;
        CHECK(f16 == 5, "%s: the proposal '%s' stores the 5 ffn_down in f16 (%d)", refused[i].policy,
              fixed, f16);
        kld_model_close(m);
    }
}

static void test_policy_errors(void) {
    static const struct {
        const char *policy, *token;
    } bad[] = {
        {"q4_K_M,bogus=q8_0", "'bogus'"}, {"q4_K_M,head=zz", "'zz'"}, {"Q9_K", "'Q9_K'"},
        {"q4_K_M,blk:3-1=f16", "'blk:3-1'"}, {"q4_K_M,head", "'head'"}, {"", "empty"},
        {"q4_K_M,blk:0-1.ffn_sideways=f16", "'blk:0-1.ffn_sideways'"}, {"q4_K_M,", "trailing"},
        {"q4_K_M,,head=f16", "empty item"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        kld_policy *p = NULL;
        kld_error err = {0};
        kld_status st = kld_policy_parse(bad[i].policy, &p, &err);
        CHECK(st == KLD_ERR_ARG && !p && strstr(err.msg, bad[i].token), "policy '%s' fails naming %s: %s",
              bad[i].policy, bad[i].token, err.msg);
    }
    kld_policy *p = NULL;
    kld_error err = {0};
    CHECK(kld_policy_parse("q4_K_M,bogus=q8_0", &p, &err) && strstr(err.msg, "ffn_down") &&
          strstr(err.msg, "head"), "an unknown selector lists the valid ones");
    CHECK_OK(kld_policy_parse("q4_K_M,head=f16,blk:0-1=q8_0,blk:1.ffn_down=keep,*.attn_v.weight=q6_K,"
                              "attn_q=bf16,imatrix=x.dat", &p, &err), err);
    CHECK(p && p->recipe && !strcmp(p->recipe->name, "Q4_K_M") && p->n_rules == 5 &&
          p->rules[1].kind == KLD_SEL_BLK && p->rules[1].blk_lo == 0 && p->rules[1].blk_hi == 1 &&
          p->rules[2].kind == KLD_SEL_CLASS && p->rules[2].keep && p->rules[3].kind == KLD_SEL_GLOB &&
          p->rules[4].type == KLD_TYPE_BF16 && p->imatrix_path && !strcmp(p->imatrix_path, "x.dat"),
          "a full policy parses into its rules");
    kld_policy_free(p);
}

/* Later selectors win; head on a tied model is token_embd; keep keeps. */
static void test_policy_plan(void) {
    kld_model *m = NULL;
    kld_error err = {0};
    kld_model_opts o = {.policy = "q4_K_M,head=q8_0,blk:1=q5_0,blk:1.ffn_down=keep,blk.0.attn_q.weight=iq4_nl"};
    CHECK_OK(kld_model_open(RL "/f16.gguf", &o, &m, &err), err);
    const kld_quant_plan *p = m ? kld_model_quant_plan(m) : NULL;
    CHECK(p != NULL, "plan exists");
    for (size_t i = 0; p && i < p->n; i++) {
        const kld_quant_item *it = &p->items[i];
        uint32_t want = it->src_type;
        if (!it->eligible) want = it->src_type;
        else if (!strcmp(it->name, "token_embd.weight")) want = KLD_TYPE_Q8_0;
        else if (!strcmp(it->name, "blk.1.ffn_down.weight")) want = KLD_TYPE_F16;
        else if (!strncmp(it->name, "blk.1.", 6)) want = KLD_TYPE_Q5_0;
        else if (!strcmp(it->name, "blk.0.attn_q.weight")) want = KLD_TYPE_IQ4_NL;
        else want = KLD_TYPE_Q4_K;
        CHECK(it->dst_type == want, "%s: type %u, want %u", it->name, it->dst_type, want);
    }
    kld_model_close(m);
    /* a stored quantized type is requantized (dequantized first) */
    CHECK_OK(kld_model_open(RL "/q8_0.gguf@q4_0", NULL, &m, &err), err);
    p = m ? kld_model_quant_plan(m) : NULL;
    CHECK(p && p->n_requant == 15, "q8_0@q4_0: 15 tensors requantized (%d)", p ? p->n_requant : -1);
    kld_model_close(m);
    kld_status st = kld_model_open(RL "/f16.gguf@q4_K_M,nope=f16", NULL, &m, &err);
    CHECK(st == KLD_ERR_ARG && strstr(err.msg, "'nope'"), "MODEL@bad policy names the token: %s", err.msg);
    /* a rule that matches no weight matrix (a typo, a layer past the last, a class the model
     * lacks, a glob on norms only) is an error naming it, not a silent no-op */
    static const char *const unmatched[] = {"blk.*.ffn_dwn.weight=q8_0", "blk:7-9=q8_0", "attn_qkv=q8_0",
                                            "*_norm.weight=q8_0"};
    for (size_t i = 0; i < sizeof unmatched / sizeof unmatched[0]; i++) {
        char spec[256];
        snprintf(spec, sizeof spec, RL "/f16.gguf@q4_K_M,head=q8_0,%s", unmatched[i]);
        m = NULL;
        st = kld_model_open(spec, NULL, &m, &err);
        CHECK(st == KLD_ERR_ARG && !m && strstr(err.msg, unmatched[i]) && strstr(err.msg, "matches no"),
              "%s: an error naming the rule: %s", unmatched[i], err.msg);
        kld_model_close(m);
    }
}

static void test_threads(void) {
    kld_gguf *g = NULL;
    kld_error err = {0};
    CHECK_OK(kld_gguf_open(RL "/f16.gguf", &g, &err), err);
    const kld_tensor *t = g ? kld_gguf_find_tensor(g, "blk.0.ffn_up.weight") : NULL;
    CHECK(t != NULL, "tensor present");
    if (!t) return;
    static const uint32_t types[] = {KLD_TYPE_Q4_K, KLD_TYPE_Q6_K, KLD_TYPE_IQ4_XS, KLD_TYPE_Q5_0};
    for (size_t k = 0; k < 4; k++) {
        uint64_t nb;
        CHECK_OK(kld_type_tensor_bytes(types[k], 2, t->ne, &nb, "t", &err), err);
        uint8_t *ref = malloc(nb), *got = malloc(nb);
        CHECK_OK(kld_quant_tensor(t, types[k], NULL, 1, ref, &err), err);
        /* the scalar row quantizer over the whole tensor is the definition */
        const kld_type_info *ti = kld_type_info_get(types[k]);
        float *row = malloc((size_t)t->ne[0] * sizeof(float));
        uint64_t rb = nb / (uint64_t)t->ne[1];
        bool same = true;
        for (int64_t r = 0; r < t->ne[1]; r++) {
            kld_type_info_get(KLD_TYPE_F16)->to_float_ref((const uint8_t *)t->data + r * t->ne[0] * 2,
                                                          row, t->ne[0]);
            ti->quantize_row(row, got, t->ne[0]);
            same = same && !memcmp(got, ref + r * rb, rb);
        }
        CHECK(same, "%s: 1 thread equals the row reference", ti->name);
        for (int n = 2; n <= 5; n += 3) {
            CHECK_OK(kld_quant_tensor(t, types[k], NULL, n, got, &err), err);
            CHECK(!memcmp(got, ref, nb), "%s: %d threads give the same bytes", ti->name, n);
        }
        free(row);
        free(ref);
        free(got);
    }
    kld_gguf_close(g);
}

static void test_imatrix_file(void) {
    kld_imatrix *im = NULL;
    kld_error err = {0};
    CHECK_OK(kld_imatrix_read(IMAT "/imatrix.dat", &im, &err), err);
    if (!im) return;
    CHECK(im->n == 14 && im->chunks == 64 && im->dataset &&
          !strcmp(im->dataset, "corpus/licenses.txt"), "imatrix.dat: 14 entries, 64 chunks, dataset");
    const kld_imatrix_entry *e = kld_imatrix_find(im, "blk.1.ffn_down.weight");
    CHECK(e && e->n == 768 && e->ncall > 0 && e->weights[5] == e->sums[5] / (float)e->ncall,
          "ffn_down entry: 768 columns, weights = sums / ncall");
    char out[512];
    snprintf(out, sizeof out, "%s/quant_imatrix_copy.dat", kt_build_dir());
    CHECK_OK(kld_imatrix_write(im, out, &err), err);
    size_t na, nb;
    char *a = kt_read_file(out, &na), *b = kt_read_file(IMAT "/imatrix.dat", &nb);
    CHECK(na == nb && !memcmp(a, b, na), "imatrix written back byte for byte");
    /* truncations anywhere are refused */
    int refused = 0, tried = 0;
    for (size_t cut = 0; cut < nb; cut += nb / 37 + 1) {
        char bad[512];
        snprintf(bad, sizeof bad, "%s/quant_imatrix_cut.dat", kt_build_dir());
        kt_write_file(bad, b, cut);
        kld_imatrix *x = NULL;
        tried++;
        if (kld_imatrix_read(bad, &x, &err) == KLD_ERR_FORMAT && !x) refused++;
        kld_imatrix_free(x);
        remove(bad);
    }
    CHECK(refused == tried, "truncated imatrix files refused (%d of %d)", refused, tried);
    free(a);
    free(b);
    remove(out);
    kld_imatrix_free(im);
}

/* The GGUF form of im as llama-imatrix writes it: W.in_sum2 = the legacy
 * sums and W.counts = ncall give the quantizers the same weights. */
static void write_gguf_imatrix(const kld_imatrix *im, const char *path) {
    kld_gguf_writer *w = kld_gguf_writer_create();
    const char *ds[] = {im->dataset};
    kld_gguf_writer_set_u32(w, "imatrix.chunk_count", (uint32_t)im->chunks);
    kld_gguf_writer_set_u32(w, "imatrix.chunk_size", 256);
    kld_gguf_writer_set_arr_str(w, "imatrix.datasets", ds, 1);
    float *counts = calloc(im->n, sizeof *counts);
    kld_error err = {0};
    for (size_t i = 0; i < im->n; i++) {
        char n[300];
        counts[i] = (float)im->e[i].ncall;
        snprintf(n, sizeof n, "%s.in_sum2", im->e[i].name);
        CHECK_OK(kld_gguf_writer_add_tensor(w, n, KLD_TYPE_F32, 2, (int64_t[]){im->e[i].n, 1}, im->e[i].sums,
                                            (uint64_t)im->e[i].n * 4, &err), err);
        snprintf(n, sizeof n, "%s.counts", im->e[i].name);
        CHECK_OK(kld_gguf_writer_add_tensor(w, n, KLD_TYPE_F32, 2, (int64_t[]){1, 1}, &counts[i], 4, &err), err);
    }
    CHECK_OK(kld_gguf_writer_write(w, path, &err), err);
    kld_gguf_writer_free(w);
    free(counts);
}

/* llama-imatrix's GGUF form: read, and quantized with, as the legacy file
 * it was made from (llama-quantize's bytes). */
static void test_imatrix_gguf(void) {
    kld_imatrix *dat = NULL, *gg = NULL;
    kld_error err = {0};
    CHECK_OK(kld_imatrix_read(IMAT "/imatrix.dat", &dat, &err), err);
    if (!dat) return;
    char path[512], out[512];
    snprintf(path, sizeof path, "%s/quant_imatrix.gguf", kt_build_dir());
    write_gguf_imatrix(dat, path);
    CHECK_OK(kld_imatrix_read(path, &gg, &err), err);
    if (gg) {
        CHECK(gg->n == dat->n && gg->chunks == 64 && gg->dataset && !strcmp(gg->dataset, dat->dataset),
              "imatrix.gguf: %zu entries, 64 chunks, the dataset", gg->n);
        bool same = gg->n == dat->n;
        for (size_t i = 0; same && i < dat->n; i++) {
            const kld_imatrix_entry *e = kld_imatrix_find(gg, dat->e[i].name);
            same = e && e->n == dat->e[i].n &&
                   !memcmp(e->weights, dat->e[i].weights, (size_t)e->n * sizeof *e->weights);
        }
        CHECK(same, "imatrix.gguf: every entry's weights equal the legacy file's bit for bit");
    }
    snprintf(out, sizeof out, "%s/quant_imat_gguf.gguf", kt_build_dir());
    kld_quantize_opts o = {.n_threads = 2, .imatrix_path = path};
    CHECK_OK(kld_quantize_file(RL "/f16.gguf", out, "q4_K_M", &o, NULL, &err), err);
    CHECK(compare_tensors(out, IMAT "/q4_k_m-imat.gguf", "q4_k_m-imat.gguf") == 1.0,
          "q4_K_M with imatrix.gguf: all blocks identical to llama-quantize --imatrix imatrix.dat");
    remove(out);
    remove(path);
    kld_imatrix_free(gg);
    kld_imatrix_free(dat);
}

static void test_imatrix_quant(void) {
    static const struct {
        const char *recipe, *file;
    } cases[] = {{"q4_K_M", "q4_k_m-imat.gguf"}, {"iq4_xs", "iq4_xs-imat.gguf"}};
    for (size_t i = 0; i < 2; i++) {
        char out[512], want[512];
        snprintf(out, sizeof out, "%s/quant_imat_%s.gguf", kt_build_dir(), cases[i].recipe);
        snprintf(want, sizeof want, IMAT "/%s", cases[i].file);
        kld_error err = {0};
        kld_quantize_opts o = {.n_threads = 2, .imatrix_path = IMAT "/imatrix.dat"};
        CHECK_OK(kld_quantize_file(RL "/f16.gguf", out, cases[i].recipe, &o, NULL, &err), err);
        CHECK(compare_tensors(out, want, cases[i].file) == 1.0, "%s: all blocks identical", cases[i].file);
        kld_gguf *g = NULL;
        int64_t v = 0;
        CHECK_OK(kld_gguf_open(out, &g, &err), err);
        CHECK(g && kld_gguf_get_int(g, "quantize.imatrix.entries_count", &v) && v == 14,
              "%s: quantize.imatrix.entries_count 14", out);
        kld_gguf_close(g);
        remove(out);
    }
    /* an imatrix changes the bytes (the weighted quantizers really run) */
    char a_path[512];
    snprintf(a_path, sizeof a_path, "%s/quant_imat_plain.gguf", kt_build_dir());
    kld_error err = {0};
    CHECK_OK(kld_quantize_file(RL "/f16.gguf", a_path, "iq4_xs", NULL, NULL, &err), err);
    kld_gguf *x = NULL, *y = NULL;
    CHECK_OK(kld_gguf_open(a_path, &x, &err), err);
    CHECK_OK(kld_gguf_open(IMAT "/iq4_xs-imat.gguf", &y, &err), err);
    if (x && y) {
        const kld_tensor *p = kld_gguf_find_tensor(x, "blk.0.ffn_up.weight");
        const kld_tensor *q = kld_gguf_find_tensor(y, "blk.0.ffn_up.weight");
        CHECK(p && q && p->nbytes == q->nbytes && memcmp(p->data, q->data, p->nbytes) != 0,
              "iq4_xs without the imatrix differs from the imatrix file");
    }
    kld_gguf_close(x);
    kld_gguf_close(y);
    remove(a_path);
    /* on load, through the policy's imatrix= item */
    kld_model *m = NULL;
    CHECK_OK(kld_model_open(RL "/f16.gguf@iq4_xs,imatrix=" IMAT "/imatrix.dat", NULL, &m, &err), err);
    const kld_quant_plan *p = m ? kld_model_quant_plan(m) : NULL;
    int with = 0;
    for (size_t i = 0; p && i < p->n; i++) with += p->items[i].imatrix != NULL;
    CHECK(with == 14, "iq4_xs on load: 14 tensors use the imatrix (%d)", with);
    kld_model_close(m);
}

/* MODEL@POLICY runs the same weights as the written file: identical logits. */
static void test_on_load_logits(void) {
    kld_model *a = NULL, *b = NULL;
    kld_error err = {0};
    CHECK_OK(kld_model_open(RL "/f16.gguf@q4_K_M", NULL, &a, &err), err);
    CHECK_OK(kld_model_open(RL "/q4_K_M.gguf", NULL, &b, &err), err);
    if (!a || !b) return;
    const kld_quant_plan *p = kld_model_quant_plan(a);
    CHECK(p && p->dst_bytes == 7668992, "q4_K_M on load: %llu bytes of weights",
          p ? (unsigned long long)p->dst_bytes : 0ull);
    /* the view (inspect's plan, nothing converted) decides the same types */
    kld_quant_view v;
    CHECK_OK(kld_quant_view_open("q4_K_M", kld_model_source(a), kld_model_hparams(a), &v, &err), err);
    int differ = 0;
    for (size_t i = 0; p && i < p->n; i++) {
        const kld_quant_item *it = &p->items[i];
        bool found = false;
        for (size_t k = 0; k < v.plan.n; k++)
            if (!strcmp(v.plan.items[k].name, it->name)) {
                found = true;
                differ += v.plan.items[k].dst_type != it->dst_type;
            }
        differ += !found;
    }
    CHECK(differ == 0 && v.plan.dst_bytes == p->dst_bytes, "view plan == on-load plan (%d differ)", differ);
    kld_quant_view_close(&v);
    kld_session *sa = NULL, *sb = NULL;
    CHECK_OK(kld_session_create(a, 16, 8, 2, &sa, &err), err);
    CHECK_OK(kld_session_create(b, 16, 8, 2, &sb, &err), err);
    const int32_t ids[8] = {1, 450, 4996, 17354, 1701, 29916, 432, 17204};
    int64_t nv = kld_model_hparams(a)->n_vocab;
    float *la = malloc((size_t)(8 * nv) * sizeof(float)), *lb = malloc((size_t)(8 * nv) * sizeof(float));
    CHECK_OK(kld_session_eval(sa, ids, 8, la, &err), err);
    CHECK_OK(kld_session_eval(sb, ids, 8, lb, &err), err);
    CHECK(!memcmp(la, lb, (size_t)(8 * nv) * sizeof(float)), "f16.gguf@q4_K_M logits == q4_K_M.gguf's");
    free(la);
    free(lb);
    kld_session_free(sa);
    kld_session_free(sb);
    kld_model_close(a);
    kld_model_close(b);
}

/* Every importance-weighted quantizer: its bytes dequantize close to the
 * input, and over many rows it lowers the importance-weighted error against
 * the unweighted reference (the weights are used, and the right way up).
 * (q4_K, q6_K and iq4_xs are also checked against llama-quantize's files.) */
static void test_imat_kernels(void) {
    enum { N = 512, ROWS = 64 };
    static float x[ROWS * N], qw[N], y[N];
    uint64_t seed = 12345;
    for (int i = 0; i < ROWS * N; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = ((float)(seed >> 40) / (float)(1 << 24) - 0.5f) * (i % 7 == 0 ? 3.f : 1.f);
    }
    for (int j = 0; j < N; j++) qw[j] = expf(4.f * (float)((j * 37) % 101) / 101.f) / 20.f;
    for (uint32_t id = 0; id < KLD_TYPE_COUNT; id++) {
        const kld_type_info *ti = kld_type_info_get(id);
        if (!ti || !ti->imatrix_used) continue;
        CHECK(ti->quantize_row_imat != NULL, "%s: llama.cpp uses an imatrix; so do we", ti->name);
        if (!ti->quantize_row_imat) continue;
        uint8_t buf[N * 2];
        double e_imat = 0, e_ref = 0, sig = 0, worst_rel = 0;
        for (int r = 0; r < ROWS; r++) {
            const float *xr = x + r * N;
            double e_row = 0, s_row = 0;
            ti->quantize_row_imat(xr, buf, N, qw);
            ti->to_float_ref(buf, y, N);
            for (int j = 0; j < N; j++) {
                double d = (double)y[j] - xr[j];
                e_imat += qw[j] * d * d;
                e_row += d * d;
                s_row += (double)xr[j] * xr[j];
                sig += qw[j] * (double)xr[j] * xr[j];
            }
            if (e_row / s_row > worst_rel) worst_rel = e_row / s_row;
            ti->quantize_row(xr, buf, N);
            ti->to_float_ref(buf, y, N);
            for (int j = 0; j < N; j++) {
                double d = (double)y[j] - xr[j];
                e_ref += qw[j] * d * d;
            }
        }
        printf("  imatrix %-6s weighted rel. error %.5f (reference %.5f), worst row %.4f\n", ti->name,
               e_imat / sig, e_ref / sig, worst_rel);
        CHECK(worst_rel < 0.25, "%s: imatrix rows dequantize close to the input (%.3f)", ti->name, worst_rel);
        CHECK(e_imat < e_ref, "%s: the imatrix lowers the weighted error (%.5f vs %.5f)", ti->name,
              e_imat / sig, e_ref / sig);
    }
}

/* Sweep groups and their arms: `base` keeps the recipe's per-tensor choice
 * for the group only; the inverted arm keeps only the group. */
static void test_sweep_groups(void) {
    kld_model *full = NULL;
    kld_error err = {0};
    CHECK_OK(kld_model_open(RL "/f16.gguf@q4_K_M", NULL, &full, &err), err);
    const kld_quant_plan *fp = full ? kld_model_quant_plan(full) : NULL;
    if (!fp) return;
    static const struct {
        kld_group_kind kind;
        size_t n;
        const char *sample, *needle; /* a group and the name part of its members */
    } kinds[] = {{KLD_GROUPS_LAYERS, 3, "blk:1", "blk.1."},
                 {KLD_GROUPS_CLASSES, 8, "ffn_down", ".ffn_down."},
                 {KLD_GROUPS_LAYERS_CLASSES, 15, "blk:1.attn_v", "blk.1.attn_v."}};
    for (size_t k = 0; k < 3; k++) {
        kld_quant_group *g = NULL;
        size_t n = 0;
        CHECK_OK(kld_quant_groups(fp, kinds[k].kind, &g, &n, &err), err);
        uint64_t total = 0;
        const kld_quant_group *pick = NULL;
        for (size_t i = 0; i < n; i++) {
            total += g[i].base_bytes;
            if (!strcmp(g[i].selector, kinds[k].sample)) pick = &g[i];
        }
        CHECK(n == kinds[k].n && pick, "%zu groups (want %zu, with '%s')", n, kinds[k].n, kinds[k].sample);
        CHECK(total + 5120 == fp->dst_bytes, "groups cover every quantized byte (%llu + norms vs %llu)",
              (unsigned long long)total, (unsigned long long)fp->dst_bytes);
        for (int inv = 0; pick && inv < 2; inv++) {
            char pol[256];
            CHECK_OK(kld_quant_group_policy("q4_K_M", pick, inv, NULL, pol, sizeof pol, &err), err);
            kld_model *m = NULL;
            CHECK_OK(kld_model_open(RL "/f16.gguf", &(kld_model_opts){.policy = pol}, &m, &err), err);
            const kld_quant_plan *p = m ? kld_model_quant_plan(m) : NULL;
            int in_group = 0, wrong = 0;
            for (size_t i = 0; p && i < p->n; i++) {
                const kld_quant_item *it = &p->items[i], *ref = &fp->items[i];
                const bool member = it->eligible && strstr(it->name, kinds[k].needle) != NULL;
                in_group += member;
                uint32_t want = (member != (inv == 1)) ? ref->dst_type : it->src_type;
                if (!it->eligible) want = it->src_type;
                wrong += it->dst_type != want;
            }
            CHECK(p && in_group == pick->n_tensors && wrong == 0, "'%s': %d tensors in the group, %d "
                  "with the wrong type", pol, in_group, wrong);
            kld_model_close(m);
        }
        free(g);
    }
    kld_model_close(full);
}

/* The AVX2 quantizers give their scalar twins' bytes, on random rows and
 * on the edge cases (zeros, constants, one sign, tiny and huge ranges). */
static void test_simd_twins(void) {
    if (!kld_cpu_has_avx2()) {
        printf("  (no AVX2: SIMD twins not compared)\n");
        return;
    }
    enum { N = 256 * 64 };
    static float x[N];
    static uint8_t a[N], b[N];
    uint64_t seed = 99;
    for (int c = 0; c < 8; c++) {
        for (int i = 0; i < N; i++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            float u = (float)(seed >> 40) / (float)(1 << 24) - 0.5f;
            x[i] = c == 0 ? u : c == 1 ? 0.f : c == 2 ? 0.25f : c == 3 ? fabsf(u) : c == 4 ? -fabsf(u)
                 : c == 5 ? u * 1e-30f : c == 6 ? u * 1e30f : (i % 97 == 0 ? 50.f * u : u * 0.01f);
        }
        for (uint32_t id = 0; id < KLD_TYPE_COUNT; id++) {
            const kld_type_info *ti = kld_type_info_get(id);
            if (!ti || !ti->quantize_row_avx2) continue;
            ti->quantize_row(x, a, N);
            ti->quantize_row_avx2(x, b, N);
            uint64_t bytes = (uint64_t)N / (uint64_t)ti->block_size * (uint64_t)ti->type_size;
            CHECK(!memcmp(a, b, (size_t)bytes), "%s: AVX2 bytes == scalar bytes (case %d)", ti->name, c);
        }
    }
}

/* Corpus ids of a model's tokenizer (the licenses text, as kl reads it). */
static kld_tok_ids corpus_ids(const char *model) {
    kld_tok_ids ids = {0};
    kld_tokenizer *tok = NULL;
    kld_error err = {0};
    CHECK_OK(kld_tok_open_path(model, &tok, &err), err);
    size_t n;
    char *text = kt_read_file(KT_SHARED "/corpus/licenses.txt", &n);
    if (tok) CHECK_OK(kld_tok_encode(tok, text, n, KLD_TOK_ADD_SPECIAL, &ids, &err), err);
    free(text);
    kld_tok_free(tok);
    return ids;
}

/* Hugging Face → GGUF: the converted-then-quantized checkpoint has
 * llama-quantize's tensors, bytes and order, and a tokenizer that encodes
 * the corpus as the GGUF's and tokenizer.json do. */
static void test_hf_convert(void) {
    char out[512];
    snprintf(out, sizeof out, "%s/quant_hf_q4_K_M.gguf", kt_build_dir());
    kld_error err = {0};
    CHECK_OK(kld_quantize_file(KT_SHARED "/models/rand-llama-hf", out, "q4_K_M",
                               &(kld_quantize_opts){.n_threads = 2}, NULL, &err), err);
    CHECK(compare_tensors(out, RL "/q4_K_M.gguf", "rand-llama-hf q4_K_M") == 1.0,
          "HF → q4_K_M: identical tensors (q/k permuted back)");
    kld_tok_ids a = corpus_ids(out), b = corpus_ids(RL "/q4_K_M.gguf"),
                c = corpus_ids(KT_SHARED "/models/rand-llama-hf");
    CHECK(a.n > 50000 && a.n == b.n && a.n == c.n && !memcmp(a.ids, b.ids, a.n * 4) &&
          !memcmp(a.ids, c.ids, a.n * 4), "converted tokenizer encodes the corpus as the GGUF's and "
          "tokenizer.json do (%zu, %zu, %zu ids)", a.n, b.n, c.n);
    kld_tok_ids_free(&a);
    kld_tok_ids_free(&b);
    kld_tok_ids_free(&c);
    remove(out);
    /* qwen2 (NEOX in both formats: no permutation; biases) against llama-quantize's q8_0 */
    snprintf(out, sizeof out, "%s/quant_hf_qwen2_q8_0.gguf", kt_build_dir());
    CHECK_OK(kld_quantize_file(KT_SHARED "/models/rand-qwen2-hf", out, "q8_0", NULL, NULL, &err), err);
    CHECK(compare_tensors(out, KT_SHARED "/models/rand-qwen2/q8_0.gguf", "rand-qwen2-hf q8_0") == 1.0,
          "qwen2 HF → q8_0: identical tensors");
    remove(out);
}

int main(void) {
    kld_kernels_init();
    test_policy_errors();
    test_threads();
    test_imat_kernels();
    test_simd_twins();
    test_recipe_files();
    test_aidreams_fallback();
    test_selector_over_refusal();
    test_policy_plan();
    test_imatrix_file();
    test_imatrix_quant();
    test_imatrix_gguf();
    test_on_load_logits();
    test_hf_convert();
    test_sweep_groups();
    return kt_finish();
}
