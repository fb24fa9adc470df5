/* test_forward_moe.c — mixture-of-experts models on small random weights:
 * Mixtral (llama + experts), Qwen2-MoE (shared expert), OLMoE (full-width
 * q/k norms) and Qwen3-MoE, each from GGUF (merged ffn_*_exps) against the
 * float64 reference of test_forward_models.c, in one pass, chunks of 1 and
 * 7 and prefill + decode; per-expert tensors equal to the merged ones bit
 * for bit; Hugging Face copies equal to the GGUF; ggml's top-k tie rule;
 * quantize-on-load and `quantize` of 3-D expert tensors (and of the HF
 * copy, whose experts it stacks); and the errors
 * (counts, missing or misshapen expert tensors, unsupported config keys). */
#include "engine/engine.h"
#include "io/gguf.h"
#include "quant/quant.h"
#include "tensor/types.h"
#include "test_forward_models.h"
#include "testlib.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#define N_IDS 40

static void make_ids(int32_t *ids, int64_t n_vocab) {
    uint64_t x = 123456789;
    for (int i = 0; i < N_IDS; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = (int32_t)((x >> 33) % (uint64_t)n_vocab);
    }
}

static void moe_shape(synth_shape *s, const char *arch) {
    synth_default(s, arch);
    s->n_head_kv = !strcmp(arch, "olmoe") ? 4 : 2; /* OLMoE: kv heads = heads */
    s->n_expert = 4;
    s->n_expert_used = 2;
    if (!strcmp(arch, "qwen2moe") || !strcmp(arch, "qwen3moe")) s->n_ff_exp = 64;
    if (!strcmp(arch, "qwen2moe")) s->n_ff_shexp = 96;
    s->hf_norm_topk = !strcmp(arch, "qwen3moe"); /* llama.cpp's qwen3moe renormalises */
    s->seed = 11;
}

static void path_in(char *buf, size_t cap, const char *name) {
    snprintf(buf, cap, "%s/moe-%s", kt_build_dir(), name);
}

static float *engine(const char *path, const int32_t *ids) {
    int64_t nv = 0;
    return tf_engine_logits(path, ids, N_IDS, N_IDS, 2, &nv);
}

static bool same_logits(const float *a, const float *b, int64_t nv) {
    return a && b && memcmp(a, b, sizeof(float) * (size_t)(N_IDS * nv)) == 0;
}

/* One family: merged GGUF vs reference (+ chunks, decode), per-expert GGUF
 * bit-identical to it, and the Hugging Face copy (from the per-expert file). */
static void run_family(const char *label, const char *arch) {
    synth_shape s;
    moe_shape(&s, arch);
    char merged[500], split[600], hf[600];
    path_in(merged, sizeof merged, label);
    snprintf(split, sizeof split, "%s-split.gguf", merged);
    snprintf(hf, sizeof hf, "%s-hf", merged);
    strcat(merged, ".gguf");
    mkdir(hf, 0755);
    bool ok = synth_write_gguf(&s, merged);
    s.split_experts = true;
    ok = ok && synth_write_gguf(&s, split) && synth_write_hf(&s, split, hf);
    CHECK(ok, "%s: synthesize", label);
    if (!ok) return;
    int32_t ids[N_IDS];
    make_ids(ids, s.n_vocab);
    char l[96];
    snprintf(l, sizeof l, "%s gguf", label);
    float *ref = tf_check_path(l, merged, merged, NULL, ids, N_IDS);
    /* the renormalisation rule is visible in these logits: the other rule
     * must miss the engine by far more than the tolerance */
    const bool renorm = !strcmp(arch, "llama") || !strcmp(arch, "qwen3moe");
    ref_opts flip = {.moe_norm_w = renorm ? -1 : 1};
    int64_t nv = 0;
    float *other = ref_forward_opts(merged, &flip, ids, N_IDS, &nv);
    tf_cmp cf = ref && other ? tf_compare(ref, other, N_IDS, nv) : (tf_cmp){0, 0, 0};
    printf("%-28s the other renormalisation rule: max|d| %.2e\n", label, cf.max_abs);
    CHECK(cf.max_abs > 1e-2, "%s: renormalising or not must matter (%g)", label, cf.max_abs);
    free(ref), free(other);
    float *a = engine(merged, ids), *b = engine(split, ids), *h = engine(hf, ids);
    CHECK(same_logits(a, b, s.n_vocab), "%s: per-expert tensors must equal the merged ones bit "
          "for bit", label);
    tf_cmp c = a && h ? tf_compare(a, h, N_IDS, s.n_vocab) : (tf_cmp){INFINITY, 0, 0};
    printf("%-28s HF copy vs GGUF: max|d| %.2e%s\n", label, c.max_abs,
           same_logits(a, h, s.n_vocab) ? " (bit-identical)" : "");
    CHECK(c.max_abs <= 1e-5 && c.same_argmax == N_IDS, "%s: HF copy vs GGUF max |d| %g", label,
          c.max_abs);
    snprintf(l, sizeof l, "%s hf", label);
    free(tf_check_path(l, hf, merged, NULL, ids, N_IDS));
    free(a), free(b), free(h);
}

/* Router rows 1 = row 0 and 2 = 2·row 0: probabilities tie exactly. ggml's
 * exchange sort picks [2, 1] from [a, a, b > a] where "lowest index first"
 * picks [2, 0]; the engine must follow ggml. */
static void run_ties(void) {
    synth_shape s;
    moe_shape(&s, "llama");
    s.n_expert = 3;
    s.tie_router = true;
    char path[600];
    path_in(path, sizeof path, "ties.gguf");
    CHECK(synth_write_gguf(&s, path), "ties: synthesize");
    int32_t ids[N_IDS];
    make_ids(ids, s.n_vocab);
    float *ref = tf_check_path("mixtral ties", path, path, NULL, ids, N_IDS);
    ref_opts naive = {.naive_ties = true};
    int64_t nv = 0;
    float *alt = ref_forward_opts(path, &naive, ids, N_IDS, &nv);
    tf_cmp c = ref && alt ? tf_compare(ref, alt, N_IDS, nv) : (tf_cmp){0, 0, 0};
    printf("%-28s ggml ties vs lowest-index ties: max|d| %.2e\n", "mixtral ties", c.max_abs);
    CHECK(c.max_abs > 1e-2, "ties: the tie rule must matter in this model (%g)", c.max_abs);
    free(ref), free(alt);
}

/* Quantize-on-load (merged and per-expert, q8_0: the same rows, so the same
 * bytes) and `kldeval quantize` of the 3-D tensors (q4_K_M), whose file
 * must give exactly the on-load model's logits. */
static void run_quant(void) {
    char merged[500], split[500], out[500], at[700];
    path_in(merged, sizeof merged, "mixtral.gguf");
    path_in(split, sizeof split, "mixtral-split.gguf");
    path_in(out, sizeof out, "mixtral-q4km.gguf");
    int32_t ids[N_IDS];
    make_ids(ids, 300);
    snprintf(at, sizeof at, "%s@q8_0", merged);
    float *qm = engine(at, ids);
    snprintf(at, sizeof at, "%s@q8_0", split);
    float *qs = engine(at, ids);
    float *f16 = engine(merged, ids);
    CHECK(same_logits(qm, qs, 300), "q8_0 on load: merged and per-expert must agree bit for bit");
    tf_cmp c = qm && f16 ? tf_compare(f16, qm, N_IDS, 300) : (tf_cmp){INFINITY, 1, 0};
    printf("%-28s q8_0 on load vs f16: max|d| %.2e mean KLD %.2e\n", "mixtral", c.max_abs, c.mean_kld);
    CHECK(c.mean_kld < 1e-3, "q8_0 on load: mean KLD %g", c.mean_kld);
    kld_error err = {0};
    kld_quant_plan plan;
    kld_status st = kld_quantize_file(merged, out, "q4_K_M", NULL, &plan, &err);
    CHECK_OK(st, err);
    kld_gguf *g = NULL;
    if (st == KLD_OK) kld_quant_plan_free(&plan);
    if (st == KLD_OK && kld_gguf_open(out, &g, &err) == KLD_OK) {
        int n_exps = 0; /* still 3-D, now quantized (q5_0 / q8_0: the k-quants fall back for rows of 64, 128) */
        for (uint64_t i = 0; i < g->n_tensors; i++)
            if (strstr(g->tensors[i].name, "_exps.weight") && g->tensors[i].ne[2] == 4 &&
                (g->tensors[i].type == KLD_TYPE_Q5_0 || g->tensors[i].type == KLD_TYPE_Q8_0))
                n_exps++;
        CHECK(n_exps == 6, "q4_K_M: all 6 merged expert tensors quantized (%d)", n_exps);
        kld_gguf_close(g);
        snprintf(at, sizeof at, "%s@q4_K_M", merged);
        float *file = engine(out, ids), *onload = engine(at, ids);
        CHECK(same_logits(file, onload, 300), "q4_K_M: the written file must equal quantize-on-load");
        free(file), free(onload);
    }
    free(qm), free(qs), free(f16);
}

/* Opening path must fail with a message containing want. */
static void expect_error(const char *label, const char *path, const char *want) {
    kld_error err = {0};
    kld_model *m = NULL;
    kld_status st = kld_model_open(path, NULL, &m, &err);
    CHECK(st != KLD_OK, "%s: must fail", label);
    CHECK(strstr(err.msg, want) != NULL, "%s: message '%s' must name '%s'", label, err.msg, want);
    if (st != KLD_OK) printf("%-28s -> %s\n", label, err.msg);
    kld_model_close(m);
}

static void bad_gguf(const char *label, synth_shape *s, const char *want) {
    char path[600];
    path_in(path, sizeof path, label);
    strcat(path, ".gguf");
    CHECK(synth_write_gguf(s, path), "%s: synthesize", label);
    expect_error(label, path, want);
}

/* Replaces the first `from` in dir/config.json by `to`. */
static bool edit_config(const char *dir, const char *from, const char *to) {
    char path[700];
    snprintf(path, sizeof path, "%s/config.json", dir);
    size_t n = 0;
    char *text = kt_read_file(path, &n);
    char *hit = text ? strstr(text, from) : NULL;
    if (!hit) {
        free(text);
        return false;
    }
    FILE *f = fopen(path, "w");
    bool ok = f && fprintf(f, "%.*s%s%s", (int)(hit - text), text, to, hit + strlen(from)) > 0;
    if (f) ok = fclose(f) == 0 && ok;
    free(text);
    return ok;
}

static void run_errors(void) {
    synth_shape s;
    moe_shape(&s, "llama");
    s.key_used_override = 5;
    bad_gguf("used > count", &s, "llama.expert_used_count = 5");
    moe_shape(&s, "qwen2moe");
    s.n_expert = 0;
    bad_gguf("qwen2moe no experts", &s, "qwen2moe.expert_count");
    moe_shape(&s, "llama");
    s.drop_tensor = "blk.1.ffn_up_exps.weight";
    bad_gguf("missing merged", &s, "blk.1.ffn_up_exps.weight");
    moe_shape(&s, "llama");
    s.bad_shape_tensor = "blk.0.ffn_down_exps.weight";
    bad_gguf("bad shape merged", &s, "blk.0.ffn_down_exps.weight");
    moe_shape(&s, "llama");
    s.split_experts = true;
    s.drop_tensor = "blk.0.ffn_gate.2.weight";
    bad_gguf("missing per-expert", &s, "blk.0.ffn_gate.2.weight");
    moe_shape(&s, "qwen2moe");
    s.drop_tensor = "blk.1.ffn_gate_inp_shexp.weight";
    bad_gguf("missing shared gate", &s, "blk.1.ffn_gate_inp_shexp.weight");
    moe_shape(&s, "olmoe");
    s.bad_shape_tensor = "blk.0.ffn_gate_inp.weight";
    bad_gguf("bad router shape", &s, "blk.0.ffn_gate_inp.weight");

    /* Hugging Face: a missing expert names both spellings; unsupported keys */
    char gguf[600], dir[600];
    moe_shape(&s, "qwen2moe");
    s.split_experts = true;
    s.drop_tensor = "blk.1.ffn_down.3.weight";
    path_in(gguf, sizeof gguf, "hf-missing.gguf");
    path_in(dir, sizeof dir, "hf-missing");
    mkdir(dir, 0755);
    CHECK(synth_write_gguf(&s, gguf) && synth_write_hf(&s, gguf, dir), "hf-missing: synthesize");
    expect_error("hf missing expert", dir, "model.layers.1.mlp.experts.3.down_proj.weight");
    s.drop_tensor = NULL;
    path_in(gguf, sizeof gguf, "hf-sparse.gguf");
    path_in(dir, sizeof dir, "hf-sparse");
    mkdir(dir, 0755);
    CHECK(synth_write_gguf(&s, gguf) && synth_write_hf(&s, gguf, dir), "hf-sparse: synthesize");
    CHECK(edit_config(dir, "\"decoder_sparse_step\": 1", "\"decoder_sparse_step\": 2"), "edit config");
    expect_error("hf decoder_sparse_step", dir, "decoder_sparse_step");
    CHECK(edit_config(dir, "\"decoder_sparse_step\": 2", "\"decoder_sparse_step\": 1") &&
          edit_config(dir, "\"num_experts_per_tok\": 2", "\"num_experts_per_tok\": 9"), "edit config");
    expect_error("hf used > count", dir, "num_experts_per_tok = 9");
    char out[600];
    path_in(out, sizeof out, "hf-quant.gguf");
    path_in(dir, sizeof dir, "mixtral-hf");
    /* `quantize` of the HF copy stacks its experts (test_quant_hf_moe.c
     * checks the conversion in full) */
    kld_error err = {0};
    CHECK_OK(kld_quantize_file(dir, out, "q8_0", NULL, NULL, &err), err);
    kld_gguf *g = NULL;
    CHECK_OK(kld_gguf_open(out, &g, &err), err);
    const kld_tensor *t = g ? kld_gguf_find_tensor(g, "blk.1.ffn_down_exps.weight") : NULL;
    CHECK(t && t->type == KLD_TYPE_Q8_0 && t->ne[2] == 4 &&
          !kld_gguf_find_tensor(g, "blk.1.ffn_down.0.weight"),
          "quantize of an HF MoE writes stacked Q8_0 experts");
    kld_gguf_close(g);
    remove(out);
}

int main(void) {
    run_family("mixtral", "llama");
    run_family("qwen2moe", "qwen2moe");
    run_family("olmoe", "olmoe");
    run_family("qwen3moe", "qwen3moe");
    run_ties();
    run_quant();
    run_errors();
    return kt_finish();
}
