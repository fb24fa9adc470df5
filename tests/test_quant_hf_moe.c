/* test_quant_hf_moe.c — `kldeval quantize` from Hugging Face Mixtral,
 * Qwen2-MoE, Qwen3-MoE, OLMoE and LFM2 checkpoints. Each checkpoint is the
 * HF copy (per-expert tensors, Conv1d kernels [n_embd, 1, L]) of a
 * synthesized float32 GGUF laid out as llama.cpp's converter writes it
 * (stacked ffn_*_exps, 2-D shortconv.conv). Converting at f32 must give
 * that GGUF's tensors exactly (names, types, shapes, bytes), the keys
 * llama.cpp's converter writes with its values (and not the ones it
 * omits), and logits equal to the HF directory's and the GGUF's bit for
 * bit; converting at q8_0 or q4_K_M must give the bytes of quantizing that
 * GGUF with the same policy, with the 3-D experts quantized and routers / kernels kept in
 * float32 (also from a BF16 checkpoint at f16). A norm_topk_prob the GGUF
 * cannot carry is refused. */
#include "testlib.h"
#include "test_forward_models.h"
#include "hf_roundtrip.h"

#include "engine/engine.h"
#include "io/gguf.h"
#include "quant/quant.h"
#include "tensor/types.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <sys/stat.h>

#define N_IDS 40

typedef struct family {
    const char *label, *arch;
    const char *const *keys;   /* keys (after "<arch>.") with the source GGUF's values */
    const char *const *absent; /* keys llama.cpp's converter does not write */
    double hf_tol;             /* converted vs HF directory: 0 bit for bit, else max |d| */
} family;

static void shape_of(const family *f, synth_shape *s) {
    synth_default(s, f->arch);
    s->mat_type = KLD_TYPE_F32; /* the HF copy holds exactly these weights */
    s->seed = 29;
    if (!strcmp(f->arch, "lfm2")) return;
    s->n_head_kv = !strcmp(f->arch, "olmoe") ? 4 : 2;
    s->n_expert = 4;
    s->n_expert_used = 2;
    if (!strcmp(f->arch, "qwen2moe") || !strcmp(f->arch, "qwen3moe")) s->n_ff_exp = 64;
    if (!strcmp(f->arch, "qwen2moe")) s->n_ff_shexp = 96;
    s->hf_norm_topk = !strcmp(f->arch, "qwen3moe");
}

/* Every tensor of want in got with the same type, shape and bytes, and no others. */
static void same_tensors(const char *got, const char *want, const char *what) {
    kld_gguf *a = NULL, *b = NULL;
    kld_error err = {0};
    CHECK_OK(kld_gguf_open(got, &a, &err), err);
    CHECK_OK(kld_gguf_open(want, &b, &err), err);
    if (!a || !b) goto done;
    CHECK(a->n_tensors == b->n_tensors, "%s: %" PRIu64 " tensors (source %" PRIu64 ")", what,
          a->n_tensors, b->n_tensors);
    int bad = 0;
    for (uint64_t i = 0; i < b->n_tensors; i++) {
        const kld_tensor *y = &b->tensors[i], *x = kld_gguf_find_tensor(a, y->name);
        bool same = x && x->type == y->type && x->nbytes == y->nbytes &&
                    !memcmp(x->data, y->data, (size_t)x->nbytes);
        for (int d = 0; same && d < KLD_MAX_DIMS; d++) same = x->ne[d] == y->ne[d];
        if (!same && bad++ < 5) {
            char t1[16], t2[16];
            CHECK(false, "%s: tensor %s (%s [%" PRId64 ", %" PRId64 ", %" PRId64 "]) differs from "
                  "the source's (%s [%" PRId64 ", %" PRId64 ", %" PRId64 "])", what, y->name,
                  x ? kld_type_name(x->type, t1) : "missing", x ? x->ne[0] : 0, x ? x->ne[1] : 0,
                  x ? x->ne[2] : 0, kld_type_name(y->type, t2), y->ne[0], y->ne[1], y->ne[2]);
        }
    }
    CHECK(bad == 0, "%s: every tensor identical to the source's (name, type, shape, bytes)", what);
done:
    kld_gguf_close(a);
    kld_gguf_close(b);
}

/* The listed keys hold the source's values (numbers or integer arrays); the absent ones are absent. */
static void same_keys(const char *got, const char *want, const family *f) {
    kld_gguf *a = NULL, *b = NULL;
    kld_error err = {0};
    CHECK_OK(kld_gguf_open(got, &a, &err), err);
    CHECK_OK(kld_gguf_open(want, &b, &err), err);
    for (int i = 0; a && b && f->keys[i]; i++) {
        char key[160];
        snprintf(key, sizeof key, "%s.%s", f->arch, f->keys[i]);
        const kld_gguf_value *ya = kld_gguf_get_arr(b, key);
        if (ya) {
            const kld_gguf_value *xa = kld_gguf_get_arr(a, key);
            bool ok = xa && xa->v.arr.n == ya->v.arr.n;
            for (uint64_t j = 0; ok && j < ya->v.arr.n; j++) {
                int64_t x = -1, y = -2;
                ok = kld_gguf_arr_int(xa, j, &x) && kld_gguf_arr_int(ya, j, &y) && x == y;
            }
            CHECK(ok, "%s: %s holds the source's %" PRIu64 " entries", f->label, key, ya->v.arr.n);
            continue;
        }
        double x = -1, y = -2;
        CHECK(kld_gguf_get_float(b, key, &y), "%s: the source has %s", f->label, key);
        CHECK(kld_gguf_get_float(a, key, &x) && x == y, "%s: %s = %g (source %g)", f->label, key, x, y);
    }
    for (int i = 0; a && f->absent && f->absent[i]; i++) {
        char key[160];
        snprintf(key, sizeof key, "%s.%s", f->arch, f->absent[i]);
        CHECK(!kld_gguf_find(a, key), "%s: %s is not written (llama.cpp's converter omits it)",
              f->label, key);
    }
    kld_str arch;
    CHECK(a && kld_gguf_get_str(a, "general.architecture", &arch) && kld_str_eq(arch, f->arch),
          "%s: general.architecture %s", f->label, f->arch);
    kld_gguf_close(a);
    kld_gguf_close(b);
}

/* The types and shapes the converter gives the family's own tensors at q8_0. */
static void q8_types(const char *path, const family *f, const synth_shape *s) {
    kld_gguf *g = NULL;
    kld_error err = {0};
    CHECK_OK(kld_gguf_open(path, &g, &err), err);
    if (!g) return;
    int n_exps = 0, n_router = 0, n_conv = 0, n_per_expert = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const kld_tensor *t = &g->tensors[i];
        const int64_t F = s->n_ff_exp > 0 ? s->n_ff_exp : s->n_ff;
        if (strstr(t->name, "_exps.weight")) {
            const bool down = strstr(t->name, "ffn_down_exps") != NULL;
            n_exps += t->type == KLD_TYPE_Q8_0 && t->n_dims == 3 && t->ne[0] == (down ? F : s->n_embd) &&
                      t->ne[1] == (down ? s->n_embd : F) && t->ne[2] == s->n_expert;
        }
        int e = -1;
        char kind[8];
        n_per_expert += sscanf(t->name, "blk.%*d.ffn_%7[a-z].%d.weight", kind, &e) == 2;
        if (strstr(t->name, "ffn_gate_inp.weight"))
            n_router += t->type == KLD_TYPE_F32 && t->ne[0] == s->n_embd && t->ne[1] == s->n_expert;
        if (strstr(t->name, "shortconv.conv.weight"))
            n_conv += t->type == KLD_TYPE_F32 && t->n_dims == 2 && t->ne[0] == s->l_cache &&
                      t->ne[1] == s->n_embd;
    }
    CHECK(n_per_expert == 0, "%s q8_0: no per-expert tensors left (%d)", f->label, n_per_expert);
    if (s->n_expert > 0) {
        CHECK(n_exps == 3 * s->n_layer, "%s q8_0: %d of %" PRId64 " stacked expert tensors Q8_0 "
              "[.., .., %" PRId64 "]", f->label, n_exps, 3 * s->n_layer, s->n_expert);
        CHECK(n_router == s->n_layer, "%s q8_0: %d of %" PRId64 " routers F32 [%" PRId64 ", %" PRId64 "]",
              f->label, n_router, s->n_layer, s->n_embd, s->n_expert);
    }
    int n_c = 0;
    for (int64_t il = 0; s->layer_kinds && il < s->n_layer; il++) n_c += s->layer_kinds[il] == 'c';
    CHECK(n_conv == n_c, "%s q8_0: %d of %d shortconv.conv F32 [%" PRId64 ", %" PRId64 "]", f->label,
          n_conv, n_c, s->l_cache, s->n_embd);
    kld_gguf_close(g);
}

static void run_family(const family *f) {
    synth_shape s;
    shape_of(f, &s);
    char src[512], split[560], dir[560], out[560], q_hf[560], q_src[560];
    snprintf(src, sizeof src, "%s/quant_hf_moe_%s", kt_build_dir(), f->label);
    snprintf(split, sizeof split, "%s_split.gguf", src);
    snprintf(dir, sizeof dir, "%s_hf", src);
    snprintf(out, sizeof out, "%s_f32.gguf", src);
    snprintf(q_hf, sizeof q_hf, "%s_hf_q8.gguf", src);
    snprintf(q_src, sizeof q_src, "%s_src_q8.gguf", src);
    strcat(src, ".gguf");
    mkdir(dir, 0755);
    bool ok = synth_write_gguf(&s, src);
    synth_shape per = s;
    per.split_experts = s.n_expert > 0; /* an HF checkpoint keeps one tensor per expert */
    ok = ok && synth_write_gguf(&per, split) && synth_write_hf(&per, split, dir);
    CHECK(ok, "%s: synthesize", f->label);
    if (!ok) return;

    kld_error err = {0};
    kld_quantize_opts o = {.n_threads = 2};
    CHECK_OK(kld_quantize_file(dir, out, "f32", &o, NULL, &err), err);
    same_tensors(out, src, f->label);
    same_keys(out, src, f);
    if (!strcmp(f->arch, "llama") || !strcmp(f->arch, "lfm2")) { /* LlamaModel, LFM2Model: vocab_size written */
        kld_gguf *g = NULL;
        CHECK_OK(kld_gguf_open(out, &g, &err), err);
        char key[64];
        snprintf(key, sizeof key, "%s.vocab_size", f->arch);
        CHECK(g && hf_rt_key_int(g, key, -1) == s.n_vocab, "%s: %s = %" PRId64 " (the checkpoint's %" PRId64 ")",
              f->label, key, g ? hf_rt_key_int(g, key, -1) : -1, s.n_vocab);
        kld_gguf_close(g);
    }

    int32_t ids[N_IDS];
    tf_make_ids(ids, N_IDS, s.n_vocab, 17);
    int64_t nh = 0, no = 0, ns = 0;
    float *lh = tf_engine_logits(dir, ids, N_IDS, N_IDS, 2, &nh);
    float *lo = tf_engine_logits(out, ids, N_IDS, N_IDS, 2, &no);
    float *ls = tf_engine_logits(src, ids, N_IDS, N_IDS, 2, &ns);
    const size_t bytes = sizeof(float) * N_IDS * (size_t)s.n_vocab;
    const bool all = lh && lo && ls && nh == s.n_vocab && no == nh && ns == nh;
    CHECK(all, "%s: three sets of logits over %" PRId64 " tokens", f->label, nh);
    if (all) {
        CHECK(!memcmp(lo, ls, bytes), "%s: the converted GGUF's logits equal the source GGUF's bit "
              "for bit", f->label);
        if (f->hf_tol == 0) {
            CHECK(!memcmp(lo, lh, bytes), "%s: the converted GGUF's logits equal the HF directory's "
                  "bit for bit", f->label);
        } else {
            tf_cmp c = tf_compare(lh, lo, N_IDS, nh);
            printf("%-10s converted vs HF directory: max|d| %.2e (q/k rows permuted back)\n", f->label,
                   c.max_abs);
            CHECK(c.max_abs <= f->hf_tol && c.same_argmax == N_IDS, "%s: converted logits within "
                  "%.1g of the HF directory's (max |d| %.3g, argmax %d/%d)", f->label, f->hf_tol,
                  c.max_abs, c.same_argmax, N_IDS);
        }
    }
    free(lh), free(lo), free(ls);
    /* transformers 5's fused experts (the converter's Qwen2MoeModel splits gate_up_proj) */
    if (!strcmp(f->arch, "qwen2moe") || !strcmp(f->arch, "qwen3moe")) hf_rt_fused_hf(f->label, dir, ids, N_IDS);

    /* quantized: the converted file's tensors are quantize(source GGUF)'s
     * (q4_K_M: the recipe's per-layer ffn_down choice applies to ffn_down_exps) */
    static const char *const policies[] = {"q8_0", "q4_K_M"};
    for (int p = 0; p < 2; p++) {
        CHECK_OK(kld_quantize_file(dir, q_hf, policies[p], &o, NULL, &err), err);
        CHECK_OK(kld_quantize_file(src, q_src, policies[p], &o, NULL, &err), err);
        char what[96];
        snprintf(what, sizeof what, "%s %s (vs quantizing the source GGUF)", f->label, policies[p]);
        same_tensors(q_hf, q_src, what);
        if (p == 0) q8_types(q_hf, f, &s);
    }
    remove(out), remove(q_hf), remove(q_src), remove(split);
}

/* qwen2moe's graph never renormalises: a checkpoint that asks to is refused. */
static void refuse_norm_topk(void) {
    synth_shape s;
    family f = {.label = "qwen2moe", .arch = "qwen2moe"};
    shape_of(&f, &s);
    s.split_experts = true;
    s.hf_norm_topk = true;
    char gguf[512], dir[512], out[512];
    snprintf(gguf, sizeof gguf, "%s/quant_hf_moe_norm.gguf", kt_build_dir());
    snprintf(dir, sizeof dir, "%s/quant_hf_moe_norm_hf", kt_build_dir());
    snprintf(out, sizeof out, "%s/quant_hf_moe_norm_out.gguf", kt_build_dir());
    mkdir(dir, 0755);
    CHECK(synth_write_gguf(&s, gguf) && synth_write_hf(&s, gguf, dir), "norm_topk: synthesize");
    kld_error err = {0};
    kld_status st = kld_quantize_file(dir, out, "f32", NULL, NULL, &err);
    CHECK(st == KLD_ERR_UNSUPPORTED && strstr(err.msg, "norm_topk_prob true"),
          "qwen2moe norm_topk_prob true is refused (%d): %s", st, err.msg);
    remove(gguf);
}

/* A BF16 checkpoint at f16: matrices and stacked experts F16, the routers
 * widened to F32 (the converter's always-float32 classes). */
static void bf16_types(void) {
    family f = {.label = "qwen2moe_bf16", .arch = "qwen2moe"};
    synth_shape s;
    shape_of(&f, &s);
    s.split_experts = s.hf_bf16 = true;
    char gguf[512], dir[512], out[512];
    snprintf(gguf, sizeof gguf, "%s/quant_hf_moe_bf16.gguf", kt_build_dir());
    snprintf(dir, sizeof dir, "%s/quant_hf_moe_bf16_hf", kt_build_dir());
    snprintf(out, sizeof out, "%s/quant_hf_moe_bf16_out.gguf", kt_build_dir());
    mkdir(dir, 0755);
    CHECK(synth_write_gguf(&s, gguf) && synth_write_hf(&s, gguf, dir), "bf16: synthesize");
    kld_error err = {0};
    CHECK_OK(kld_quantize_file(dir, out, "f16", NULL, NULL, &err), err);
    kld_gguf *g = NULL;
    CHECK_OK(kld_gguf_open(out, &g, &err), err);
    int exps = 0, routers = 0;
    for (uint64_t i = 0; g && i < g->n_tensors; i++) {
        const kld_tensor *t = &g->tensors[i];
        exps += strstr(t->name, "_exps.weight") && t->type == KLD_TYPE_F16 && t->ne[2] == s.n_expert;
        routers += strstr(t->name, "ffn_gate_inp") && t->type == KLD_TYPE_F32;
    }
    CHECK(exps == 6 && routers == 4, "bf16 at f16: %d of 6 stacked experts F16, %d of 4 routers "
          "(ffn_gate_inp, ffn_gate_inp_shexp) F32", exps, routers);
    kld_gguf_close(g);
    remove(out);
    remove(gguf);
}

/* A checkpoint tensor that is no weight of the model (here an expert past
 * num_experts) is not written, and the log says so, naming it. */
static void note_stray_tensor(void) {
    family f = {.label = "qwen2moe_stray", .arch = "qwen2moe"};
    synth_shape s;
    shape_of(&f, &s);
    s.split_experts = true;
    char gguf[512], dir[512], st[560], out[512], logp[512];
    snprintf(gguf, sizeof gguf, "%s/quant_hf_moe_stray.gguf", kt_build_dir());
    snprintf(dir, sizeof dir, "%s/quant_hf_moe_stray_hf", kt_build_dir());
    snprintf(st, sizeof st, "%s/model.safetensors", dir);
    snprintf(out, sizeof out, "%s/quant_hf_moe_stray_out.gguf", kt_build_dir());
    snprintf(logp, sizeof logp, "%s/quant_hf_moe_stray.log", kt_build_dir());
    mkdir(dir, 0755);
    CHECK(synth_write_gguf(&s, gguf) && synth_write_hf(&s, gguf, dir), "stray: synthesize");
    /* append one F32 [1] tensor: a new header, the old data, 4 bytes */
    size_t n = 0;
    char *file = kt_read_file(st, &n);
    uint64_t hl = 0;
    if (file && n >= 8) memcpy(&hl, file, 8);
    json_t *h = file && hl + 8 <= n ? json_loadb(file + 8, (size_t)hl, 0, NULL) : NULL;
    CHECK(h != NULL, "stray: read %s", st);
    if (!h) {
        free(file);
        return;
    }
    const uint64_t data_len = n - 8 - hl;
    json_object_set_new(h, "model.layers.1.mlp.experts.4.up_proj.weight",
                        json_pack("{s:s, s:[i], s:[I, I]}", "dtype", "F32", "shape", 1, "data_offsets",
                                  (json_int_t)data_len, (json_int_t)data_len + 4));
    char *text = json_dumps(h, JSON_COMPACT);
    uint64_t nl = strlen(text), pad = (8 - nl % 8) % 8, total = nl + pad;
    FILE *w = fopen(st, "wb");
    const float one = 1.0f;
    bool ok = w && fwrite(&total, 8, 1, w) == 1 && fwrite(text, 1, nl, w) == nl &&
              fwrite("        ", 1, pad, w) == pad && fwrite(file + 8 + hl, 1, data_len, w) == data_len &&
              fwrite(&one, 4, 1, w) == 1;
    if (w && fclose(w) != 0) ok = false;
    CHECK(ok, "stray: rewrite %s", st);
    free(text), free(file);
    json_decref(h);
    FILE *log = fopen(logp, "w+");
    kld_error err = {0};
    kld_quantize_opts o = {.n_threads = 1, .notes = log}; /* notes without the per-tensor log (quantize -q) */
    CHECK_OK(kld_quantize_file(dir, out, "f32", &o, NULL, &err), err);
    if (log) fclose(log);
    char *logged = kt_read_file(logp, NULL);
    CHECK(logged && strstr(logged, "tensor 'model.layers.1.mlp.experts.4.up_proj.weight' is not a weight "
                           "of qwen2moe: not written") && strstr(logged, "quant_hf_moe_stray_hf"),
          "stray tensor: the log names the folder and the tensor: %s", logged ? logged : "(no log)");
    free(logged);
    remove(out), remove(gguf), remove(logp);
}

int main(void) {
    kld_kernels_init();
    static const char *const common[] = {"context_length", "block_count", "embedding_length", "feed_forward_length",
                                         "attention.layer_norm_rms_epsilon",
                                         "attention.head_count", "attention.head_count_kv",
                                         "rope.freq_base", "expert_count", "expert_used_count", NULL};
    static const char *const qwen2moe[] = {"context_length", "block_count", "embedding_length", "feed_forward_length",
                                         "attention.layer_norm_rms_epsilon",
                                           "attention.head_count", "attention.head_count_kv",
                                           "rope.freq_base", "expert_count", "expert_used_count",
                                           "expert_feed_forward_length",
                                           "expert_shared_feed_forward_length", NULL};
    static const char *const qwen3moe[] = {"context_length", "block_count", "embedding_length", "feed_forward_length",
                                         "attention.layer_norm_rms_epsilon",
                                           "attention.head_count", "attention.head_count_kv",
                                           "rope.freq_base", "expert_count", "expert_used_count",
                                           "expert_feed_forward_length", NULL};
    static const char *const lfm2[] = {"context_length", "block_count", "embedding_length", "feed_forward_length",
                                         "attention.layer_norm_rms_epsilon",
                                       "attention.head_count", "attention.head_count_kv",
                                       "rope.freq_base", "shortconv.l_cache", NULL};
    /* vocab_size: written by the converter's LlamaModel (Mixtral) and LFM2Model, not by the others */
    static const char *const no_widths[] = {"expert_feed_forward_length",
                                            "expert_shared_feed_forward_length", NULL};
    static const char *const olmoe_absent[] = {"expert_feed_forward_length",
                                               "expert_shared_feed_forward_length", "vocab_size", NULL};
    static const char *const no_vocab[] = {"vocab_size", NULL};
    static const char *const no_shared[] = {"expert_shared_feed_forward_length", "vocab_size", NULL};
    static const char *const no_moe[] = {"expert_count", "attention.sliding_window", NULL};
    /* Mixtral's q/k rows go back to interleaved pairs: q·k sums in another order than the HF copy's */
    const family fams[] = {
        {"mixtral", "llama", common, no_widths, 1e-4},
        {"qwen2moe", "qwen2moe", qwen2moe, no_vocab, 0},
        {"qwen3moe", "qwen3moe", qwen3moe, no_shared, 0},
        {"olmoe", "olmoe", common, olmoe_absent, 0},
        {"lfm2", "lfm2", lfm2, no_moe, 0},
    };
    for (size_t i = 0; i < sizeof fams / sizeof fams[0]; i++) run_family(&fams[i]);
    refuse_norm_topk();
    bf16_types();
    note_stray_tensor();
    return kt_finish();
}
