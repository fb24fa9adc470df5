/* test_synth_models.c — the small random GGUF models of the forward tests
 * (see test_forward_models.h: synth_*) and their Hugging Face copies
 * (safetensors F32 or BF16 + config.json). */
#include "test_forward_models.h"

#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "tensor/types.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- synthesis ---- */

typedef struct rng {
    uint64_t s;
} rng;

static double gauss(rng *r) {
    double u[2];
    for (int i = 0; i < 2; i++) { /* splitmix64 → (0, 1) */
        uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        u[i] = ((double)(z >> 11) + 0.5) / 9007199254740992.0;
    }
    return sqrt(-2 * log(u[0])) * cos(2 * M_PI * u[1]);
}

void synth_default(synth_shape *s, const char *arch) {
    memset(s, 0, sizeof *s);
    s->arch = arch;
    s->n_embd = 64;
    s->n_head = 4;
    s->head_dim = 32;
    s->n_ff = 128;
    s->n_vocab = 300;
    s->mat_type = KLD_TYPE_F16;
    s->seed = 7;
    if (!strcmp(arch, "lfm2")) {
        s->n_layer = 6;
        s->layer_kinds = "ccacca"; /* LFM2-350M's pattern starts the same way */
        s->head_dim = 16;          /* n_embd / n_head: LFM2's q and output are n_embd wide */
        s->n_head_kv = 2;
        s->l_cache = 3;
        s->rope_base = 1e6;
        s->tied = true;
    } else if (!strcmp(arch, "qwen3next") || !strncmp(arch, "qwen35", 6)) {
        s->n_layer = 4; /* three DeltaNet layers, then attention (full_attention_interval 4) */
        s->dn_interval = 4;
        s->head_dim = 16;
        s->n_head_kv = 2;
        s->dn_conv = 4;
        s->dn_n_k_heads = 2;
        s->dn_n_v_heads = 4;
        s->dn_head = 16;
        s->rope_base = 1e7;
        s->tied = true;
    } else if (!strcmp(arch, "glm4moe")) {
        s->n_layer = 3;           /* layer 0 dense, layers 1-2 MoE */
        s->n_head_kv = 2;
        s->head_dim = 16;
        s->rope_base = 1e6;
        s->n_expert = 4;
        s->n_expert_used = 2;
        s->n_ff_exp = 32;
        s->n_dense_lead = 1;
        s->n_shared = 1;
        s->w_scale = 2.5;
    } else if (!strcmp(arch, "deepseek2")) {
        s->n_layer = 3;           /* layer 0 dense, layers 1-2 MoE */
        s->n_head_kv = s->n_head; /* MLA decompressed: one k/v head per q head */
        s->head_dim = 24;         /* key_length: 16 nope + 8 rope */
        s->mla_rope = 8;
        s->mla_v = 16;
        s->mla_kv_lora = 32;
        s->rope_base = 1e4;
        s->yarn_factor = 4;       /* DeepSeek V3's YaRN (factor 40 there), mscale_all_dim 1 */
        s->yarn_orig_ctx = 64;
        s->yarn_log_mul = 0.1;
        s->n_expert = 4;
        s->n_expert_used = 2;
        s->n_ff_exp = 32;
        s->n_dense_lead = 1;
        s->n_shared = 1;
        s->w_scale = 2.5;
        s->gating_func = 2;       /* sigmoid */
    } else if (!strcmp(arch, "gpt-oss")) {
        s->n_layer = 3;           /* layers 0 and 2 slide (set_swa_pattern(2)) */
        s->head_dim = 16;
        s->n_head_kv = 2;
        s->sliding_window = 8;
        s->rope_base = 150000;
        s->yarn_factor = 4;       /* the released models: YaRN 32 over 4096 */
        s->yarn_orig_ctx = 64;
        s->n_expert = 4;
        s->n_expert_used = 2;
        s->n_ff_exp = 64;
    } else if (!strcmp(arch, "gemma4")) {
        /* layers 2 and 5 global (attn_v left out there: K is V), the others slide */
        static const uint8_t g4_flags[6] = {1, 1, 0, 1, 1, 0};
        s->n_layer = 6;
        s->n_head_kv = 2;
        s->head_dim = 16;
        s->sliding_window = 8;
        s->pattern_flags = g4_flags;
        s->rope_base = 1e6;
        s->freq_base_swa = 1e4;
        s->final_softcap = 30;
        s->tied = true;
    } else if (!strcmp(arch, "gemma3")) {
        s->n_layer = 7; /* layers 0-4 and 6 slide, layer 5 is global */
        s->n_head_kv = 1;
        s->sliding_window = 8;
        s->rope_base = 1e6;
        s->rope_linear = 8;
        s->tied = true;
    } else {
        s->n_layer = 2;
        s->n_head_kv = 2;
        s->rope_base = 1e6;
    }
}

typedef struct synth_tensors {
    kld_gguf_writer *w;
    rng r;
    const synth_shape *s;
    void *bufs[1024];
    int n_bufs;
    bool ok;
    bool experts; /* adding expert matrices (s->exp_type applies) */
} synth_tensors;

/* A [ne0, ne1, ne2] tensor (ne1 = 0: 1-D; ne2 = 0: 2-D) of values
 * mean + sd·N(0, 1), or of the given values f (owned, freed here). */
static void add3f(synth_tensors *st, const char *name, int64_t ne0, int64_t ne1, int64_t ne2,
                  double mean, double sd, float *f) {
    if (!st->ok || (st->s->drop_tensor && !strcmp(st->s->drop_tensor, name))) {
        free(f);
        return;
    }
    if (st->s->bad_shape_tensor && !strcmp(st->s->bad_shape_tensor, name)) {
        free(f);
        f = NULL;
        if (ne1) ne1++; /* one row too many */
        else ne0++;
    }
    const int64_t rows = (ne1 ? ne1 : 1) * (ne2 ? ne2 : 1), n = ne0 * rows;
    if (!f) {
        f = malloc(sizeof(float) * (size_t)n);
        for (int64_t i = 0; i < n; i++) f[i] = (float)(mean + sd * gauss(&st->r));
    }
    uint32_t type = ne1 ? st->s->mat_type : KLD_TYPE_F32;
    if (ne1 && st->experts && st->s->exp_type_set) type = st->s->exp_type;
    const kld_type_info *ti = kld_type_info_get(type);
    if (ne0 % ti->block_size != 0) /* rows shorter than a block (LFM2's conv kernels) */
        ti = kld_type_info_get(type = KLD_TYPE_F32);
    uint64_t row_bytes = (uint64_t)(ne0 / ti->block_size) * (uint64_t)ti->type_size;
    void *data = malloc((size_t)(row_bytes * (uint64_t)rows));
    for (int64_t r = 0; r < rows; r++) ti->quantize_row(f + r * ne0, (uint8_t *)data + r * row_bytes, ne0);
    free(f);
    st->bufs[st->n_bufs++] = data;
    int64_t ne[3] = {ne0, ne1 ? ne1 : 1, ne2};
    kld_error err = {0};
    if (st->s->rename_from && !strcmp(st->s->rename_from, name)) name = st->s->rename_to;
    if (kld_gguf_writer_add_tensor(st->w, name, type, ne2 ? 3 : ne1 ? 2 : 1, ne, data,
                                   row_bytes * (uint64_t)rows, &err) != KLD_OK) {
        fprintf(stderr, "synth: %s\n", err.msg);
        st->ok = false;
    }
}

static void add(synth_tensors *st, const char *name, int64_t ne0, int64_t ne1, double mean, double sd) {
    add3f(st, name, ne0, ne1, 0, mean, sd, NULL);
}

/* Random values mean + sd·N(0, 1) drawn now (so that merged and per-expert
 * files hold the same numbers). */
static float *draw(synth_tensors *st, int64_t n, double mean, double sd) {
    float *f = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) f[i] = (float)(mean + sd * gauss(&st->r));
    return f;
}

/* The MoE FFN of layer il: router, routed experts (merged or per expert,
 * drawn in the same order), and qwen2moe's shared expert. */
static void add_moe(synth_tensors *st, int64_t il) {
    const synth_shape *s = st->s;
    const int64_t E = s->n_embd, X = s->n_expert;
    const int64_t F = s->n_ff_exp > 0 ? s->n_ff_exp : s->n_ff;
    char n[96];
    float *router = draw(st, E * X, 0, 1 / sqrt((double)E));
    if (s->tie_router && X == 3)
        for (int64_t i = 0; i < E; i++) {
            router[E + i] = router[i];
            router[2 * E + i] = 2 * router[i];
        }
    snprintf(n, sizeof n, "blk.%d.ffn_gate_inp.weight", (int)il);
    add3f(st, n, E, X, 0, 0, 0, router);
    if (!strcmp(s->arch, "glm4moe") || !strcmp(s->arch, "deepseek2")) { /* the selection bias */
        snprintf(n, sizeof n, "blk.%d.exp_probs_b.bias", (int)il);
        add(st, n, X, 0, 0, 0.3);
    }
    static const char *const kinds[3] = {"gate", "up", "down"};
    st->experts = true;
    for (int k = 0; k < 3; k++) {
        const int64_t ne0 = k == 2 ? F : E, ne1 = k == 2 ? E : F;
        float *all = draw(st, ne0 * ne1 * X, 0, 1 / sqrt((double)ne0));
        if (!s->split_experts) {
            snprintf(n, sizeof n, "blk.%d.ffn_%s_exps.weight", (int)il, kinds[k]);
            add3f(st, n, ne0, ne1, X, 0, 0, all);
            continue;
        }
        for (int64_t e = 0; e < X; e++) {
            float *one = malloc(sizeof(float) * (size_t)(ne0 * ne1));
            memcpy(one, all + e * ne0 * ne1, sizeof(float) * (size_t)(ne0 * ne1));
            snprintf(n, sizeof n, "blk.%d.ffn_%s.%d.weight", (int)il, kinds[k], (int)e);
            add3f(st, n, ne0, ne1, 0, 0, 0, one);
        }
        free(all);
    }
    st->experts = false;
    if (!strcmp(s->arch, "gpt-oss")) { /* biased router and experts */
        snprintf(n, sizeof n, "blk.%d.ffn_gate_inp.bias", (int)il);
        add(st, n, X, 0, 0, 0.5);
        snprintf(n, sizeof n, "blk.%d.ffn_gate_exps.bias", (int)il);
        add(st, n, F, X, 0, 0.5);
        snprintf(n, sizeof n, "blk.%d.ffn_up_exps.bias", (int)il);
        add(st, n, F, X, 0, 0.5);
        snprintf(n, sizeof n, "blk.%d.ffn_down_exps.bias", (int)il);
        add(st, n, E, X, 0, 0.2);
    }
    if (!strcmp(s->arch, "glm4moe") || !strcmp(s->arch, "deepseek2")) { /* ungated shared expert */
        const int64_t S = s->n_shared * F;
        snprintf(n, sizeof n, "blk.%d.ffn_gate_shexp.weight", (int)il);
        add(st, n, E, S, 0, 1 / sqrt((double)E));
        snprintf(n, sizeof n, "blk.%d.ffn_up_shexp.weight", (int)il);
        add(st, n, E, S, 0, 1 / sqrt((double)E));
        snprintf(n, sizeof n, "blk.%d.ffn_down_shexp.weight", (int)il);
        add(st, n, S, E, 0, 1 / sqrt((double)S));
        return;
    }
    if (strcmp(s->arch, "qwen2moe") && strcmp(s->arch, "qwen3next") && strcmp(s->arch, "qwen35moe")) return;
    const int64_t S = s->n_ff_shexp;
    snprintf(n, sizeof n, "blk.%d.ffn_gate_inp_shexp.weight", (int)il);
    add(st, n, E, 0, 0, 1 / sqrt((double)E));
    snprintf(n, sizeof n, "blk.%d.ffn_gate_shexp.weight", (int)il);
    add(st, n, E, S, 0, 1 / sqrt((double)E));
    snprintf(n, sizeof n, "blk.%d.ffn_up_shexp.weight", (int)il);
    add(st, n, E, S, 0, 1 / sqrt((double)E));
    snprintf(n, sizeof n, "blk.%d.ffn_down_shexp.weight", (int)il);
    add(st, n, S, E, 0, 1 / sqrt((double)S));
}

/* The E2B-like Gemma 4: 8 layers (flags 11110110: layers 4 and 7 full), full
 * heads of 64 with 1 KV head, sliding heads of 32 with 2 KV heads and 16 of
 * 32 dims rotated, the last 3 layers reading layers 3 (sliding) and 4 (full)
 * with twice the FFN width, per-layer embeddings of 32 (sizes that q8_0's
 * blocks of 32 divide, as the released ones: heads 256 / 512, P 256). */
void synth_gemma4_e2b(synth_shape *s) {
    static const uint8_t flags[8] = {1, 1, 1, 1, 0, 1, 1, 0};
    synth_default(s, "gemma4");
    s->mat_type = KLD_TYPE_F32;
    s->n_layer = 8;
    s->pattern_flags = flags;
    s->head_dim = 64;
    s->g4_head_swa = 32;
    s->g4_rot_swa = 16;
    s->g4_kv_full = 1;
    s->g4_shared_kv = 3;
    s->g4_wide_ff = true;
    s->g4_per_layer = 32;
    s->qk_norm_w = 0.5; /* scores spread ~2, not √64: random heads would attend to one key */
}

/* Gemma 4's per-layer geometry: head size, KV heads and FFN width of layer il. */
static bool g4_slides(const synth_shape *s, int64_t il) { return s->pattern_flags && s->pattern_flags[il]; }
static int64_t g4_hd(const synth_shape *s, int64_t il) {
    return s->g4_head_swa > 0 && g4_slides(s, il) ? s->g4_head_swa : s->head_dim;
}
static int64_t g4_kv(const synth_shape *s, int64_t il) {
    return s->g4_kv_full > 0 && !g4_slides(s, il) ? s->g4_kv_full : s->n_head_kv;
}
static int64_t g4_ff(const synth_shape *s, int64_t il) {
    return s->g4_wide_ff && il >= s->n_layer - s->g4_shared_kv ? 2 * s->n_ff : s->n_ff;
}

bool synth_write_gguf(const synth_shape *s, const char *path) {
    synth_tensors st = {.w = kld_gguf_writer_create(), .r = {s->seed}, .s = s, .ok = true};
    kld_gguf_writer *w = st.w;
    const char *arch = s->arch_override ? s->arch_override : s->arch;
    char k[128];
#define KEY_U32(suffix, v) (snprintf(k, sizeof k, "%s." suffix, arch), kld_gguf_writer_set_u32(w, k, (uint32_t)(v)))
#define KEY_F32(suffix, v) (snprintf(k, sizeof k, "%s." suffix, arch), kld_gguf_writer_set_f32(w, k, (float)(v)))
    kld_gguf_writer_set_str(w, "general.architecture", arch);
    kld_gguf_writer_set_str(w, "general.name", "synth-test");
    KEY_U32("context_length", 4096);
    KEY_U32("embedding_length", s->n_embd);
    KEY_U32("block_count", s->n_layer);
    const bool g4 = !strcmp(s->arch, "gemma4");
    if (g4 && s->g4_wide_ff) { /* the converter's per-layer list (use_double_wide_mlp) */
        int32_t ff[64];
        for (int64_t il = 0; il < s->n_layer && il < 64; il++) ff[il] = (int32_t)g4_ff(s, il);
        snprintf(k, sizeof k, "%s.feed_forward_length", arch);
        kld_gguf_writer_set_arr_i32(w, k, ff, (uint64_t)s->n_layer);
    } else {
        KEY_U32("feed_forward_length", s->n_ff);
    }
    KEY_U32("attention.head_count", s->n_head);
    const bool lfm2 = !strcmp(s->arch, "lfm2");
    if (lfm2) { /* one entry per layer, 0 for a convolution layer */
        int32_t kv[64];
        const int nkv = s->n_kv_array > 0 ? s->n_kv_array : (int)s->n_layer;
        for (int il = 0; il < nkv && il < 64; il++)
            kv[il] = s->kv_array ? s->kv_array[il] : s->layer_kinds[il] == 'c' ? 0 : (int32_t)s->n_head_kv;
        snprintf(k, sizeof k, "%s.attention.head_count_kv", arch);
        kld_gguf_writer_set_arr_i32(w, k, kv, (uint64_t)nkv);
        if (s->l_cache_key >= 0) KEY_U32("shortconv.l_cache", s->l_cache_key ? s->l_cache_key : s->l_cache);
    } else if (g4 && s->g4_kv_full > 0) { /* num_key_value_heads / num_global_key_value_heads per layer */
        int32_t kv[64];
        for (int64_t il = 0; il < s->n_layer && il < 64; il++) kv[il] = (int32_t)g4_kv(s, il);
        snprintf(k, sizeof k, "%s.attention.head_count_kv", arch);
        kld_gguf_writer_set_arr_i32(w, k, kv, (uint64_t)s->n_layer);
    } else {
        KEY_U32("attention.head_count_kv", s->n_head_kv);
    }
    const bool dn = !strcmp(s->arch, "qwen3next") || !strncmp(s->arch, "qwen35", 6);
    const bool q35 = !strncmp(s->arch, "qwen35", 6); /* ssm_beta / ssm_alpha, rope sections */
    if (dn) {
#define DN_KEY(suffix, v) if (!s->dn_skip_key || strcmp(s->dn_skip_key, suffix)) KEY_U32(suffix, v)
        if (s->dn_interval > 0) DN_KEY("full_attention_interval", s->dn_interval);
        DN_KEY("ssm.conv_kernel", s->dn_conv);
        DN_KEY("ssm.state_size", s->dn_head);
        DN_KEY("ssm.group_count", s->dn_n_k_heads);
        DN_KEY("ssm.time_step_rank", s->dn_n_v_heads);
        DN_KEY("ssm.inner_size", s->dn_inner_key ? s->dn_inner_key : s->dn_n_v_heads * s->dn_head);
        KEY_U32("rope.dimension_count", s->head_dim / 2); /* partial_rotary_factor (0.25 in the models) */
        if (q35) { /* the released [11, 11, 10, 0] over 64 dims, here over head_dim / 2 */
            /* pairs: t h w t ... (interleaved) so that none falls to the fourth section */
            const int32_t half = (int32_t)(s->head_dim / 4);
            const int32_t sec[4] = {half - 2 * (half / 4), half / 4, half / 4, 0};
            snprintf(k, sizeof k, "%s.rope.dimension_sections", arch);
            kld_gguf_writer_set_arr_i32(w, k, sec, 4);
        }
#undef DN_KEY
        if (s->dn_nextn > 0) KEY_U32("nextn_predict_layers", s->dn_nextn);
        if (s->dn_recurrent_flags) {
            snprintf(k, sizeof k, "%s.attention.recurrent_layers", arch);
            kld_gguf_writer_set_arr_i32(w, k, s->dn_recurrent_flags, (uint64_t)s->n_layer);
        }
    }
    if (s->mla_absorbed) { /* llama.cpp's latent cache: kv_lora_rank + rope, kv_lora_rank */
        KEY_U32("attention.key_length", s->mla_kv_lora + s->mla_rope);
        KEY_U32("attention.value_length", s->mla_kv_lora);
        KEY_U32("attention.key_length_mla", s->head_dim);
        KEY_U32("attention.value_length_mla", s->mla_v);
    } else {
        KEY_U32("attention.key_length", s->head_dim);
        KEY_U32("attention.value_length", s->mla_v > 0 ? s->mla_v : s->head_dim);
    }
    if (!strcmp(s->arch, "deepseek2")) {
        KEY_U32("attention.q_lora_rank", s->mla_q_lora); /* llama.cpp requires it (0: attn_q) */
        if (s->mla_kv_lora > 0) KEY_U32("attention.kv_lora_rank", s->mla_kv_lora);
        if (s->mla_rope > 0) KEY_U32("rope.dimension_count", s->mla_rope);
        if (s->yarn_log_mul > 0) KEY_F32("rope.scaling.yarn_log_multiplier", s->yarn_log_mul);
    }
    KEY_F32("attention.layer_norm_rms_epsilon", 1e-6);
    KEY_F32("rope.freq_base", s->rope_base);
    if (s->rope_linear > 0) {
        snprintf(k, sizeof k, "%s.rope.scaling.type", arch);
        kld_gguf_writer_set_str(w, k, "linear");
        KEY_F32("rope.scaling.factor", s->rope_linear);
    }
    if (s->sliding_window > 0) KEY_U32("attention.sliding_window", s->sliding_window);
    if (s->write_pattern) KEY_U32("attention.sliding_window_pattern", s->pattern);
    if (s->pattern_flags) {
        snprintf(k, sizeof k, "%s.attention.sliding_window_pattern", arch);
        int32_t fl[64];
        const int64_t nf = s->n_pattern_flags > 0 ? s->n_pattern_flags : s->n_layer;
        for (int64_t il = 0; il < nf && il < 64; il++) fl[il] = s->pattern_flags[il];
        kld_gguf_writer_set_arr_i32(w, k, fl, (uint64_t)nf);
    }
    if (s->freq_base_swa > 0) KEY_F32("rope.freq_base_swa", s->freq_base_swa);
    if (g4) { /* the keys llama.cpp's converter writes (conversion/gemma.py Gemma4Model) */
        const int64_t hswa = s->g4_head_swa ? s->g4_head_swa : s->head_dim;
        KEY_U32("attention.key_length_swa", hswa);
        KEY_U32("attention.value_length_swa", s->g4_value_swa ? s->g4_value_swa : hswa);
        KEY_U32("rope.dimension_count", s->head_dim);
        KEY_U32("rope.dimension_count_swa", s->g4_rot_swa ? s->g4_rot_swa : hswa);
        KEY_U32("embedding_length_per_layer_input", s->g4_per_layer);
        KEY_U32("attention.shared_kv_layers", s->g4_shared_kv);
    }
    if (s->yarn_factor > 0) {
        snprintf(k, sizeof k, "%s.rope.scaling.type", arch);
        kld_gguf_writer_set_str(w, k, s->rope_type_name ? s->rope_type_name : "yarn");
        KEY_F32("rope.scaling.factor", s->yarn_factor);
        if (s->yarn_orig_ctx > 0) KEY_U32("rope.scaling.original_context_length", s->yarn_orig_ctx);
    }
    if (s->attn_softcap > 0) KEY_F32("attn_logit_softcapping", s->attn_softcap);
    if (s->final_softcap > 0) KEY_F32("final_logit_softcapping", s->final_softcap);
    if (s->lcpp_vocab_keys) {
        kld_gguf_writer_set_str(w, "tokenizer.ggml.model", "no_vocab");
        KEY_U32("vocab_size", s->n_vocab);
    }
    if (s->n_expert > 0) {
        KEY_U32("expert_count", s->n_expert);
        KEY_U32("expert_used_count", s->key_used_override > 0 ? s->key_used_override : s->n_expert_used);
        if (s->n_ff_exp > 0) KEY_U32("expert_feed_forward_length", s->n_ff_exp);
        if (s->n_ff_shexp > 0) KEY_U32("expert_shared_feed_forward_length", s->n_ff_shexp);
        if (s->n_shared > 0) KEY_U32("expert_shared_count", s->n_shared);
        if (s->n_dense_lead > 0) KEY_U32("leading_dense_block_count", s->n_dense_lead);
        if (s->w_scale > 0) KEY_F32("expert_weights_scale", s->w_scale);
        if (s->n_groups > 0) KEY_U32("expert_group_count", s->n_groups);
        if (s->n_group_used > 0) KEY_U32("expert_group_used_count", s->n_group_used);
        if (s->gating_func > 0) {
            snprintf(k, sizeof k, "%s.expert_weights_norm", arch);
            kld_gguf_writer_set_bool(w, k, true);
            KEY_U32("expert_gating_func", s->gating_func);
        }
        if (!strcmp(s->arch, "glm4moe")) {
            KEY_U32("rope.dimension_count", s->head_dim / 2); /* GLM-4.5's partial_rotary_factor 0.5 */
            snprintf(k, sizeof k, "%s.expert_weights_norm", arch);
            kld_gguf_writer_set_bool(w, k, true);
            KEY_U32("expert_gating_func", 2); /* sigmoid */
        }
    }
#undef KEY_U32
#undef KEY_F32
    const bool gemma = !strcmp(s->arch, "gemma3") || !strcmp(s->arch, "gemma2") || g4,
               llama = !strcmp(s->arch, "llama"),
               qwen2 = !strcmp(s->arch, "qwen2") || !strcmp(s->arch, "qwen2moe"),
               olmoe = !strcmp(s->arch, "olmoe"), phi3 = !strcmp(s->arch, "phi3"),
               gptoss = !strcmp(s->arch, "gpt-oss"), glm = !strcmp(s->arch, "glm4moe"),
               ds = !strcmp(s->arch, "deepseek2");
    const int64_t E = s->n_embd;
    add(&st, "token_embd.weight", E, s->n_vocab, 0, 1);
    if (llama && s->llama3_factor > 0) {
        /* The factors as Meta's reference computes them (a divisor per frequency). */
        const int64_t half = s->head_dim / 2;
        float *f = malloc(sizeof(float) * (size_t)half);
        for (int64_t i = 0; i < half; i++) {
            double freq = pow(s->rope_base, -2.0 * (double)i / (double)s->head_dim);
            double wavelen = 2 * M_PI / freq;
            double lo = (double)s->llama3_orig_ctx / s->llama3_low, hi = (double)s->llama3_orig_ctx / s->llama3_high;
            double scaled_freq = freq;
            if (wavelen > lo) scaled_freq = freq / s->llama3_factor;
            else if (wavelen >= hi) {
                double sm = ((double)s->llama3_orig_ctx / wavelen - s->llama3_low) / (s->llama3_high - s->llama3_low);
                scaled_freq = (1 - sm) * freq / s->llama3_factor + sm * freq;
            }
            f[i] = (float)(freq / scaled_freq);
        }
        int64_t ne[1] = {half};
        kld_error e2 = {0};
        st.bufs[st.n_bufs++] = f;
        if (kld_gguf_writer_add_tensor(w, "rope_freqs.weight", KLD_TYPE_F32, 1, ne, f,
                                       (uint64_t)half * 4, &e2) != KLD_OK) {
            fprintf(stderr, "synth: %s\n", e2.msg);
            st.ok = false;
        }
    }
    if (g4) { /* proportional RoPE on the full layers: a quarter of the pairs rotate, the rest 1e30 */
        const int64_t half = s->head_dim / 2;
        float *f = malloc(sizeof(float) * (size_t)half);
        for (int64_t i = 0; i < half; i++) f[i] = i < s->head_dim / 8 ? 1.0f : 1e30f;
        add3f(&st, "rope_freqs.weight", half, 0, 0, 0, 0, f);
    }
    add(&st, lfm2 ? "token_embd_norm.weight" : "output_norm.weight", E, 0, 1, 0.1);
    if (!s->tied) add(&st, "output.weight", E, s->n_vocab, 0, 2.0 / sqrt((double)E));
    const int64_t P = g4 ? s->g4_per_layer : 0, PW = P * s->n_layer;
    if (P > 0) { /* Gemma 4's per-layer embeddings */
        add(&st, "per_layer_token_embd.weight", PW, s->n_vocab, 0, 1);
        add(&st, "per_layer_model_proj.weight", E, PW, 0, 1 / sqrt((double)E));
        add(&st, "per_layer_proj_norm.weight", P, 0, 1, 0.1);
    }
    for (int64_t il = 0; il < s->n_layer; il++) {
        char n[96];
#define T(suffix) (snprintf(n, sizeof n, "blk.%d." suffix, (int)il), n)
        /* Gemma 4's layers differ: head size, KV heads, FFN width, K/V kept or not */
        const int64_t hd = g4 ? g4_hd(s, il) : s->head_dim, ff = g4 ? g4_ff(s, il) : s->n_ff;
        const int64_t nq = s->n_head * hd, nk = (g4 ? g4_kv(s, il) : s->n_head_kv) * hd;
        const bool own_kv = !g4 || il < s->n_layer - s->g4_shared_kv || s->g4_shared_keep_kv;
        add(&st, T("attn_norm.weight"), E, 0, 1, 0.1);
        if (lfm2 && s->layer_kinds[il] == 'c') {
            add(&st, T("shortconv.conv.weight"), s->l_cache, E, 0, 0.6);
            add(&st, T("shortconv.in_proj.weight"), E, 3 * E, 0, 1 / sqrt((double)E));
            add(&st, T("shortconv.out_proj.weight"), E, E, 0, 1 / sqrt((double)E));
            goto ffn;
        }
        if (dn && (il + 1) % (s->dn_interval > 0 ? s->dn_interval : 4)) {
            const int64_t kd = s->dn_n_k_heads * s->dn_head, nv = s->dn_n_v_heads, vd = nv * s->dn_head;
            add(&st, T("attn_qkv.weight"), E, 2 * kd + vd, 0, 1 / sqrt((double)E));
            add(&st, T("attn_gate.weight"), E, vd, 0, 1 / sqrt((double)E));
            add(&st, T("ssm_conv1d.weight"), s->dn_conv, 2 * kd + vd, 0, 0.5);
            add(&st, T("ssm_dt.bias"), nv, 0, 0, 0.5);
            add(&st, T("ssm_a"), nv, 0, -0.8, 0.2); /* −exp(A_log): negative, so the decay is < 1 */
            if (q35) {
                add(&st, T("ssm_beta.weight"), E, nv, 0, 1 / sqrt((double)E));
                add(&st, T("ssm_alpha.weight"), E, nv, 0, 1 / sqrt((double)E));
            } else {
                add(&st, T("ssm_ba.weight"), E, 2 * nv, 0, 1 / sqrt((double)E));
            }
            add(&st, T("ssm_norm.weight"), s->dn_head, 0, 1, 0.1);
            add(&st, T("ssm_out.weight"), vd, E, 0, 1 / sqrt((double)vd));
            goto ffn;
        }
        if (ds) { /* MLA: q (plain or through the q_lora_rank bottleneck), latent kv */
            const int64_t QA = s->mla_q_lora, R = s->mla_kv_lora, nope = s->head_dim - s->mla_rope;
            if (QA > 0) {
                add(&st, T("attn_q_a.weight"), E, QA, 0, 1 / sqrt((double)E));
                add(&st, T("attn_q_a_norm.weight"), QA, 0, 1, 0.1);
                add(&st, T("attn_q_b.weight"), QA, nq, 0, 1 / sqrt((double)QA));
            } else {
                add(&st, T("attn_q.weight"), E, nq, 0, 1 / sqrt((double)E));
            }
            add(&st, T("attn_kv_a_mqa.weight"), E, R + s->mla_rope, 0, 1 / sqrt((double)E));
            add(&st, T("attn_kv_a_norm.weight"), R, 0, 1, 0.1);
            if (s->mla_absorbed) { /* the converter's split: k_b {nope, R, H} transposed, v_b {R, v, H} */
                const int64_t H = s->n_head, V = s->mla_v;
                float *kvb = draw(&st, R * H * (nope + V), 0, 1 / sqrt((double)R));
                float *kb = malloc(sizeof(float) * (size_t)(nope * R * H)), *vb = malloc(sizeof(float) * (size_t)(R * V * H));
                for (int64_t h = 0; h < H; h++) {
                    for (int64_t d = 0; d < nope; d++)
                        for (int64_t i = 0; i < R; i++) kb[(h * R + i) * nope + d] = kvb[(h * (nope + V) + d) * R + i];
                    memcpy(vb + h * V * R, kvb + (h * (nope + V) + nope) * R, sizeof(float) * (size_t)(V * R));
                }
                free(kvb);
                add3f(&st, T("attn_k_b.weight"), nope, R, H, 0, 0, kb);
                add3f(&st, T("attn_v_b.weight"), R, V, H, 0, 0, vb);
            } else {
                add(&st, T("attn_kv_b.weight"), R, s->n_head * (nope + s->mla_v), 0, 1 / sqrt((double)R));
            }
            add(&st, T("attn_output.weight"), s->n_head * s->mla_v, E, 0, 1 / sqrt((double)(s->n_head * s->mla_v)));
            goto ffn;
        }
        if (phi3) { /* fused [q; k; v] rows, as llama.cpp's phi3 graph requires */
            add(&st, T("attn_qkv.weight"), E, nq + 2 * nk, 0, 1 / sqrt((double)E));
        } else {
            add(&st, T("attn_q.weight"), E, dn ? 2 * nq : nq, 0, 1 / sqrt((double)E)); /* qwen3next: [q; gate] */
            if (own_kv) add(&st, T("attn_k.weight"), E, nk, 0, 1 / sqrt((double)E));
            if (own_kv && (!g4 || s->g4_keep_v || (s->pattern_flags && s->pattern_flags[il])))
                add(&st, T("attn_v.weight"), E, nk, 0, 1 / sqrt((double)E));
        }
        if (qwen2 || gptoss || glm) {
            if (glm) { /* GLM-4.5's optional q/k norms, here present */
                add(&st, T("attn_q_norm.weight"), s->head_dim, 0, 1, 0.2);
                add(&st, T("attn_k_norm.weight"), s->head_dim, 0, 1, 0.2);
            }
            add(&st, T("attn_q.bias"), nq, 0, 0, 0.3);
            add(&st, T("attn_k.bias"), nk, 0, 0, 0.3);
            add(&st, T("attn_v.bias"), nk, 0, 0, 0.3);
        } else if (olmoe) { /* one norm over the whole q / k row */
            add(&st, T("attn_q_norm.weight"), nq, 0, 1, 0.2);
            add(&st, T("attn_k_norm.weight"), nk, 0, 1, 0.2);
        } else if (!llama && !phi3 && strcmp(s->arch, "gemma") && strcmp(s->arch, "gemma2")) {
            /* qwen3, gemma3, gemma4 */
            const double w = s->qk_norm_w > 0 ? s->qk_norm_w : 1;
            add(&st, T("attn_q_norm.weight"), hd, 0, w, 0.2 * w);
            if (own_kv) add(&st, T("attn_k_norm.weight"), hd, 0, w, 0.2 * w);
        }
        add(&st, T("attn_output.weight"), nq, E, 0, 1 / sqrt((double)nq));
        if (gptoss) {
            add(&st, T("attn_output.bias"), E, 0, 0, 0.2);
            add(&st, T("attn_sinks.weight"), s->n_head, 0, 0.5, 1.0); /* logits near the scores' size */
        }
        if (gemma) add(&st, T("post_attention_norm.weight"), E, 0, 1, 0.1);
    ffn:
        add(&st, dn || gptoss || glm ? T("post_attention_norm.weight") : T("ffn_norm.weight"), E, 0, 1, 0.1);
        if (g4 && s->n_expert > 0) { /* 26B-A4B: the experts beside the dense FFN, with their own norms */
            add_moe(&st, il);
            /* router logits of order 1 (the input is rms(x)/√E): decisive routing */
            add(&st, T("ffn_gate_inp.scale"), E, 0, sqrt((double)E), 0.2 * sqrt((double)E));
            add(&st, T("ffn_down_exps.scale"), s->n_expert, 0, 1, 0.3);
            add(&st, T("pre_ffw_norm_2.weight"), E, 0, 1, 0.1);
            add(&st, T("post_ffw_norm_1.weight"), E, 0, 1, 0.1);
            add(&st, T("post_ffw_norm_2.weight"), E, 0, 1, 0.1);
        }
        if (s->n_expert > 0 && il >= s->n_dense_lead && !g4) {
            add_moe(&st, il);
        } else if (phi3) { /* fused [gate; up] */
            add(&st, T("ffn_up.weight"), E, 2 * s->n_ff, 0, 1 / sqrt((double)E));
            add(&st, T("ffn_down.weight"), s->n_ff, E, 0, 1 / sqrt((double)s->n_ff));
        } else {
            add(&st, T("ffn_gate.weight"), E, ff, 0, 1 / sqrt((double)E));
            add(&st, T("ffn_up.weight"), E, ff, 0, 1 / sqrt((double)E));
            add(&st, T("ffn_down.weight"), ff, E, 0, 1 / sqrt((double)ff));
        }
        if (gemma) add(&st, T("post_ffw_norm.weight"), E, 0, 1, 0.1);
        if (g4) add(&st, T("layer_output_scale.weight"), 1, 0, 0.7, 0.2);
        if (P > 0) {
            add(&st, T("inp_gate.weight"), E, P, 0, 1 / sqrt((double)E));
            add(&st, T("proj.weight"), P, E, 0, 1 / sqrt((double)P));
            add(&st, T("post_norm.weight"), E, 0, 1, 0.1);
        }
#undef T
    }
    kld_error err = {0};
    bool ok = st.ok && kld_gguf_writer_write(w, path, &err) == KLD_OK;
    if (st.ok && !ok) fprintf(stderr, "synth: %s\n", err.msg);
    for (int i = 0; i < st.n_bufs; i++) free(st.bufs[i]);
    kld_gguf_writer_free(w);
    return ok;
}

/* ---- Hugging Face copy ---- */

/* LFM2's names, from llama.cpp's gguf-py tensor_mapping.py ("# lfm2" rows). */
static const char *const lfm2_map[][2] = {
    {"attn_norm.weight", "operator_norm.weight"},
    {"ffn_norm.weight", "ffn_norm.weight"},
    {"ffn_gate.weight", "feed_forward.w1.weight"},
    {"ffn_up.weight", "feed_forward.w3.weight"},
    {"ffn_down.weight", "feed_forward.w2.weight"},
    {"attn_output.weight", "self_attn.out_proj.weight"},
    {"attn_q_norm.weight", "self_attn.q_layernorm.weight"},
    {"attn_k_norm.weight", "self_attn.k_layernorm.weight"},
    {"shortconv.conv.weight", "conv.conv.weight"},
    {"shortconv.in_proj.weight", "conv.in_proj.weight"},
    {"shortconv.out_proj.weight", "conv.out_proj.weight"},
};

static bool hf_name(const synth_shape *s, const char *gguf, char *out, size_t cap) {
    /* Gemma 2/3 call the pre-FFN norm pre_feedforward_layernorm */
    const bool gemma = !strcmp(s->arch, "gemma3") || !strcmp(s->arch, "gemma2");
    const bool phi3 = !strcmp(s->arch, "phi3"), lfm2 = !strcmp(s->arch, "lfm2");
    if (lfm2 && !strcmp(gguf, "token_embd_norm.weight")) return snprintf(out, cap, "model.embedding_norm.weight"), true;
    if (!strcmp(gguf, "token_embd.weight")) return snprintf(out, cap, "model.embed_tokens.weight"), true;
    if (!strcmp(gguf, "output_norm.weight")) return snprintf(out, cap, "model.norm.weight"), true;
    if (!strcmp(gguf, "output.weight")) return snprintf(out, cap, "lm_head.weight"), true;
    int il = 0, used = 0;
    if (sscanf(gguf, "blk.%d.%n", &il, &used) != 1 || !used) return false;
    static const char *const map[][2] = {
        {"attn_norm.weight", "input_layernorm.weight"},
        {"attn_q.weight", "self_attn.q_proj.weight"},
        {"attn_k.weight", "self_attn.k_proj.weight"},
        {"attn_v.weight", "self_attn.v_proj.weight"},
        {"attn_q.bias", "self_attn.q_proj.bias"},
        {"attn_k.bias", "self_attn.k_proj.bias"},
        {"attn_v.bias", "self_attn.v_proj.bias"},
        {"attn_output.weight", "self_attn.o_proj.weight"},
        {"attn_q_norm.weight", "self_attn.q_norm.weight"},
        {"attn_k_norm.weight", "self_attn.k_norm.weight"},
        {"ffn_gate.weight", "mlp.gate_proj.weight"},
        {"ffn_up.weight", "mlp.up_proj.weight"},
        {"ffn_down.weight", "mlp.down_proj.weight"},
        {"post_attention_norm.weight", "post_attention_layernorm.weight"},
        {"post_ffw_norm.weight", "post_feedforward_layernorm.weight"},
    };
    const char *rest = gguf + used, *hf = NULL;
    for (size_t i = 0; lfm2 && !hf && i < sizeof lfm2_map / sizeof lfm2_map[0]; i++)
        if (!strcmp(lfm2_map[i][0], rest)) hf = lfm2_map[i][1];
    const bool mixtral = !strcmp(s->arch, "llama") && s->n_expert > 0;
    char kind[8];
    int e = -1, used2 = 0;
    if (sscanf(rest, "ffn_%7[a-z].%d.weight%n", kind, &e, &used2) == 2 && used2 && !rest[used2]) {
        static const char *const k3[3][3] = {{"gate", "w1", "gate_proj"}, {"down", "w2", "down_proj"},
                                             {"up", "w3", "up_proj"}};
        for (int i = 0; i < 3; i++)
            if (!strcmp(kind, k3[i][0])) {
                if (mixtral) snprintf(out, cap, "model.layers.%d.block_sparse_moe.experts.%d.%s.weight", il, e, k3[i][1]);
                else snprintf(out, cap, "model.layers.%d.mlp.experts.%d.%s.weight", il, e, k3[i][2]);
                return true;
            }
        return false;
    }
    if (!strcmp(rest, "ffn_gate_inp.weight")) hf = mixtral ? "block_sparse_moe.gate.weight" : "mlp.gate.weight";
    if (!strcmp(rest, "ffn_gate_inp_shexp.weight")) hf = "mlp.shared_expert_gate.weight";
    if (!strcmp(rest, "ffn_gate_shexp.weight")) hf = "mlp.shared_expert.gate_proj.weight";
    if (!strcmp(rest, "ffn_up_shexp.weight")) hf = "mlp.shared_expert.up_proj.weight";
    if (!strcmp(rest, "ffn_down_shexp.weight")) hf = "mlp.shared_expert.down_proj.weight";
    if (!hf && phi3 && !strcmp(rest, "attn_qkv.weight")) hf = "self_attn.qkv_proj.weight";
    if (!hf && phi3 && !strcmp(rest, "ffn_up.weight")) hf = "mlp.gate_up_proj.weight"; /* fused [gate; up] */
    if (!hf && !strcmp(rest, "ffn_norm.weight"))
        hf = gemma ? "pre_feedforward_layernorm.weight" : "post_attention_layernorm.weight";
    for (size_t i = 0; !hf && i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(map[i][0], rest)) hf = map[i][1];
    if (!hf) return false;
    snprintf(out, cap, "model.layers.%d.%s", il, hf);
    return true;
}

bool synth_write_hf(const synth_shape *s, const char *gguf_path, const char *dir) {
    kld_error err = {0};
    kld_gguf *g = NULL;
    if (kld_gguf_open(gguf_path, &g, &err) != KLD_OK) {
        fprintf(stderr, "synth_write_hf: %s\n", err.msg);
        return false;
    }
    const bool gemma = !strncmp(s->arch, "gemma", 5), llama = !strcmp(s->arch, "llama");
    char *header = malloc(1 << 20);
    size_t hl = (size_t)snprintf(header, 1 << 20, "{");
    uint64_t off = 0;
    float **data = calloc((size_t)g->n_tensors, sizeof *data);
    size_t *elem = calloc((size_t)g->n_tensors, sizeof *elem);
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const kld_tensor *t = &g->tensors[i];
        char name[128];
        if (!hf_name(s, t->name, name, sizeof name)) continue;
        int64_t n = kld_tensor_nelements(t);
        data[i] = malloc(sizeof(float) * (size_t)n);
        kld_type_info_get(t->type)->to_float_ref(t->data, data[i], n);
        if (gemma && strstr(t->name, "norm"))
            for (int64_t j = 0; j < n; j++) data[i][j] -= 1.0f; /* HF Gemma stores w - 1 */
        if (llama && (strstr(t->name, "attn_q.weight") || strstr(t->name, "attn_k.weight"))) {
            /* GGUF row h·hd + 2i + j holds HF row h·hd + j·hd/2 + i. */
            const int64_t hd = s->head_dim, rows = t->ne[1], cols = t->ne[0];
            float *hf = malloc(sizeof(float) * (size_t)n);
            for (int64_t r0 = 0; r0 < rows; r0++) {
                int64_t h = r0 / hd, within = r0 % hd, ii = within / 2, jj = within % 2;
                memcpy(hf + (h * hd + jj * hd / 2 + ii) * cols, data[i] + r0 * cols, sizeof(float) * (size_t)cols);
            }
            free(data[i]);
            data[i] = hf;
        }
        /* BF16 copies hold the upper halves of the float bits (exact when
         * the GGUF weights are bf16 themselves) */
        const bool bf = s->hf_bf16 && t->n_dims == 2;
        if (bf)
            for (int64_t j = 0; j < n; j++) ((uint16_t *)(void *)data[i])[j] = kld_f32_to_bf16(data[i][j]);
        elem[i] = bf ? 2 : 4;
        uint64_t bytes = (uint64_t)n * elem[i];
        const char *dt = bf ? "BF16" : "F32";
        if (strstr(t->name, "shortconv.conv")) /* nn.Conv1d weight [out, in / groups, L] */
            hl += (size_t)snprintf(header + hl, (1 << 20) - hl, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[%" PRId64 ",1,%" PRId64 "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}",
                                   hl > 1 ? "," : "", name, dt, t->ne[1], t->ne[0], off, off + bytes);
        else if (t->n_dims == 1 && strstr(t->name, "ffn_gate_inp_shexp")) /* HF: a [1, n_embd] Linear */
            hl += (size_t)snprintf(header + hl, (1 << 20) - hl, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[1,%" PRId64 "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}",
                                   hl > 1 ? "," : "", name, dt, t->ne[0], off, off + bytes);
        else if (t->n_dims == 1)
            hl += (size_t)snprintf(header + hl, (1 << 20) - hl, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[%" PRId64 "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}",
                                   hl > 1 ? "," : "", name, dt, t->ne[0], off, off + bytes);
        else
            hl += (size_t)snprintf(header + hl, (1 << 20) - hl, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[%" PRId64 ",%" PRId64 "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}",
                                   hl > 1 ? "," : "", name, dt, t->ne[1], t->ne[0], off, off + bytes);
        off += bytes;
    }
    hl += (size_t)snprintf(header + hl, (1 << 20) - hl, "}");
    while (hl % 8) header[hl++] = ' ';
    char path[512];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    FILE *f = fopen(path, "wb");
    bool ok = f != NULL;
    uint64_t hl64 = hl;
    if (ok) ok = fwrite(&hl64, 8, 1, f) == 1 && fwrite(header, 1, hl, f) == hl;
    for (uint64_t i = 0; ok && i < g->n_tensors; i++)
        if (data[i]) ok = fwrite(data[i], elem[i], (size_t)kld_tensor_nelements(&g->tensors[i]), f) ==
                          (size_t)kld_tensor_nelements(&g->tensors[i]);
    if (f && fclose(f) != 0) ok = false;
    for (uint64_t i = 0; i < g->n_tensors; i++) free(data[i]);
    free(data);
    free(elem);
    free(header);
    kld_gguf_close(g);
    snprintf(path, sizeof path, "%s/config.json", dir);
    f = ok ? fopen(path, "w") : NULL;
    if (!f) return false;
    const char *model_type = !strcmp(s->arch, "gemma3") ? "gemma3_text" : s->arch;
    if (s->n_expert > 0)
        model_type = llama ? "mixtral" : !strcmp(s->arch, "qwen2moe") ? "qwen2_moe"
                   : !strcmp(s->arch, "qwen3moe") ? "qwen3_moe" : s->arch;
    fprintf(f, "{\"model_type\": \"%s\", \"hidden_size\": %" PRId64 ", \"num_hidden_layers\": %" PRId64
               ", \"intermediate_size\": %" PRId64 ", \"num_attention_heads\": %" PRId64
               ", \"num_key_value_heads\": %" PRId64 ", \"head_dim\": %" PRId64
               ", \"vocab_size\": %" PRId64 ", \"max_position_embeddings\": %" PRId64
               ", \"rms_norm_eps\": %.9g, \"rope_theta\": %.1f, \"tie_word_embeddings\": %s",
            model_type, s->n_embd, s->n_layer, s->n_ff,
            s->n_head, s->n_head_kv, s->head_dim, s->n_vocab, s->n_ctx > 0 ? s->n_ctx : 4096,
            s->norm_eps > 0 ? s->norm_eps : 1e-6, s->rope_base, s->tied ? "true" : "false");
    if (s->n_expert > 0) {
        if (llama) fprintf(f, ", \"num_local_experts\": %" PRId64, s->n_expert);
        else fprintf(f, ", \"num_experts\": %" PRId64 ", \"norm_topk_prob\": %s", s->n_expert,
                     s->hf_norm_topk ? "true" : "false");
        fprintf(f, ", \"num_experts_per_tok\": %" PRId64, s->n_expert_used);
        if (!llama && strcmp(s->arch, "olmoe"))
            fprintf(f, ", \"moe_intermediate_size\": %" PRId64 ", \"decoder_sparse_step\": 1, \"mlp_only_layers\": []",
                    s->n_ff_exp > 0 ? s->n_ff_exp : s->n_ff / s->n_expert_used);
        if (!strcmp(s->arch, "qwen2moe"))
            fprintf(f, ", \"shared_expert_intermediate_size\": %" PRId64, s->n_ff_shexp);
    }
    if (!strcmp(s->arch, "lfm2")) {
        /* Lfm2Config keys; block_ff_dim 1.5·n_ff comes back to n_ff through
         * block_auto_adjust_ff_dim (int(2/3·ff), rounded up to 16) */
        fprintf(f, ", \"norm_eps\": 1e-06, \"tie_embedding\": %s, \"block_ff_dim\": %" PRId64
                   ", \"block_auto_adjust_ff_dim\": true, \"block_ffn_dim_multiplier\": 1.0"
                   ", \"block_multiple_of\": 16, \"conv_L_cache\": %" PRId64,
                s->tied ? "true" : "false", s->n_ff * 3 / 2, s->l_cache);
        if (s->hf_tail) { /* instead of conv_bias and layer_types */
            fprintf(f, "%s}\n", s->hf_tail);
        } else {
            fprintf(f, ", \"conv_bias\": false, \"layer_types\": [");
            for (int64_t il = 0; il < s->n_layer; il++)
                fprintf(f, "%s\"%s\"", il ? ", " : "", s->layer_kinds[il] == 'c' ? "conv" : "full_attention");
            fprintf(f, "]}\n");
        }
    } else if (s->hf_tail)
        fprintf(f, "%s}\n", s->hf_tail);
    else if (!strcmp(s->arch, "gemma3"))
        fprintf(f, ", \"hidden_activation\": \"gelu_pytorch_tanh\", \"query_pre_attn_scalar\": %" PRId64
                   ", \"sliding_window\": %" PRId64 ", \"sliding_window_pattern\": 6"
                   ", \"rope_local_base_freq\": 10000.0, \"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": %.1f}"
                   ", \"final_logit_softcapping\": null, \"attn_logit_softcapping\": null}\n",
                s->head_dim, s->sliding_window, s->rope_linear);
    else if (llama && s->llama3_factor > 0)
        fprintf(f, ", \"hidden_act\": \"silu\", \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": %.17g"
                   ", \"low_freq_factor\": %.17g, \"high_freq_factor\": %.17g"
                   ", \"original_max_position_embeddings\": %" PRId64 "}}\n",
                s->llama3_factor, s->llama3_low, s->llama3_high, s->llama3_orig_ctx);
    else
        fprintf(f, ", \"hidden_act\": \"silu\", \"use_sliding_window\": false, \"sliding_window\": null"
                   ", \"rope_scaling\": null}\n");
    return fclose(f) == 0;
}

