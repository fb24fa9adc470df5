/* synth_model.c — writes a seeded random-weight llama-architecture GGUF
 * with a vocabulary learned from the built-in corpus. Scales are chosen so
 * that each layer contributes to the residual stream and the tied output
 * gives peaked next-token distributions (entropy of a few nats), like a
 * trained model's, so that KLD figures between quantizations are
 * realistic in size. */
#include "synth/synth.h"

#include "io/gguf_writer.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

void kld_synth_defaults(kld_synth_options *o) {
    o->arch = "llama";
    o->n_embd = 512;
    o->n_layer = 4;
    o->n_head = 8;
    o->n_head_kv = 4;
    o->n_ff = 1536;
    o->n_ctx = 2048;
    o->n_vocab = 4096;
    o->seed = 42;
    o->type = "f16";
    o->name = "kldeval-synth";
}

/* One weight tensor kept alive until the file is written. */
typedef struct synth_tensor {
    char name[96];
    uint32_t type;
    int n_dims;
    int64_t ne[2];
    void *data;
    uint64_t nbytes;
} synth_tensor;

/* Values are drawn sequentially from one generator (so the file does not
 * depend on the thread count) a batch of rows at a time; the batch is then
 * quantized by the worker threads, each taking a contiguous share of rows. */
#define SYNTH_BATCH_VALUES (1 << 20)

typedef struct synth_state {
    const kld_synth_options *o;
    kld_rng rng;
    synth_tensor *t;
    int n_t;
    int n_threads;
    float *batch; /* SYNTH_BATCH_VALUES floats (at least one row) */
    int64_t batch_cap;
} synth_state;

typedef struct quant_job {
    const kld_type_info *ti;
    const float *src;
    uint8_t *dst;
    int64_t ne0, rows, row_bytes;
    int ith, nth;
} quant_job;

static void *quant_rows(void *arg) {
    const quant_job *j = arg;
    int64_t r0 = j->rows * j->ith / j->nth, r1 = j->rows * (j->ith + 1) / j->nth;
    for (int64_t r = r0; r < r1; r++)
        j->ti->quantize_row(j->src + r * j->ne0, j->dst + r * j->row_bytes, j->ne0);
    return NULL;
}

/* Quantizes rows [0, rows) of src into dst on up to s->n_threads threads. */
static void quantize_batch(const synth_state *s, const kld_type_info *ti, const float *src,
                           uint8_t *dst, int64_t ne0, int64_t rows, int64_t row_bytes) {
    enum { MAX_THREADS = 64 };
    int nth = s->n_threads < MAX_THREADS ? s->n_threads : MAX_THREADS;
    if (nth > rows) nth = (int)rows;
    quant_job jobs[MAX_THREADS];
    pthread_t tid[MAX_THREADS];
    bool started[MAX_THREADS] = {false};
    for (int i = 0; i < nth; i++) {
        jobs[i] = (quant_job){ti, src, dst, ne0, rows, row_bytes, i, nth};
        /* a thread that cannot start is run inline: same bytes, less speed */
        started[i] = i > 0 && pthread_create(&tid[i], NULL, quant_rows, &jobs[i]) == 0;
    }
    for (int i = 0; i < nth; i++)
        if (!started[i]) quant_rows(&jobs[i]);
    for (int i = 1; i < nth; i++)
        if (started[i]) pthread_join(tid[i], NULL);
}

/* llama.cpp's q4_K_M rule: more bits for attn_v / ffn_down in the first and
 * last eighth of the layers and every third layer between. */
static bool use_more_bits(int64_t layer, int64_t n_layer) {
    return layer < n_layer / 8 || layer >= 7 * n_layer / 8 || (layer - n_layer / 8) % 3 == 2;
}

static kld_status weight_type(const kld_synth_options *o, const char *role, int64_t layer,
                              uint32_t *out, kld_error *err) {
    if (!strcmp(o->type, "q4_K_M")) {
        bool more = (!strcmp(role, "attn_v") || !strcmp(role, "ffn_down")) &&
                    use_more_bits(layer, o->n_layer);
        *out = !strcmp(role, "token_embd") || more ? KLD_TYPE_Q6_K : KLD_TYPE_Q4_K;
        return KLD_OK;
    }
    if (!kld_type_from_name(o->type, out))
        return kld_fail(err, KLD_ERR_ARG, "unknown weight type '%s'", o->type);
    const kld_type_info *ti = kld_type_info_get(*out);
    if (*out != KLD_TYPE_F32 && (!ti || !ti->quantize_row))
        return kld_fail(err, KLD_ERR_UNSUPPORTED, "no quantizer for type '%s'", o->type);
    return KLD_OK;
}

/* Adds a [ne0 × ne1] tensor: values gain·N(0,1) (+ offset), stored as type. */
static kld_status add_tensor(synth_state *s, const char *name, uint32_t type, int64_t ne0,
                             int64_t ne1, double gain, double offset, kld_error *err) {
    synth_tensor *t = &s->t[s->n_t];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->type = type;
    t->n_dims = ne1 > 1 ? 2 : 1;
    t->ne[0] = ne0;
    t->ne[1] = ne1;
    uint64_t row_bytes;
    kld_status st = kld_type_row_bytes(type, (uint64_t)ne0, &row_bytes, name, err);
    if (st) return st;
    t->nbytes = row_bytes * (uint64_t)ne1;
    t->data = malloc(t->nbytes);
    if (!t->data) return kld_fail(err, KLD_ERR_NOMEM, "out of memory for %s", name);
    s->n_t++;
    const kld_type_info *ti = kld_type_info_get(type);
    int64_t batch_rows = s->batch_cap / ne0;
    for (int64_t r0 = 0; r0 < ne1; r0 += batch_rows) {
        int64_t rows = ne1 - r0 < batch_rows ? ne1 - r0 : batch_rows;
        for (int64_t k = 0; k < rows * ne0; k++)
            s->batch[k] = (float)(offset + gain * kld_rng_gaussian(&s->rng));
        uint8_t *dst = (uint8_t *)t->data + (uint64_t)r0 * row_bytes;
        if (type == KLD_TYPE_F32) memcpy(dst, s->batch, (size_t)(rows * ne0) * sizeof(float));
        else quantize_batch(s, ti, s->batch, dst, ne0, rows, (int64_t)row_bytes);
    }
    return KLD_OK;
}

static kld_status add_matrix(synth_state *s, const char *name, const char *role, int64_t layer,
                             int64_t ne0, int64_t ne1, double gain, kld_error *err) {
    uint32_t type;
    kld_status st = weight_type(s->o, role, layer, &type, err);
    if (st) return st;
    return add_tensor(s, name, type, ne0, ne1, gain, 0.0, err);
}

static kld_status check_shape(const kld_synth_options *o, kld_error *err) {
    if (strcmp(o->arch, "llama") != 0)
        return kld_fail(err, KLD_ERR_UNSUPPORTED, "architecture '%s' (only llama)", o->arch);
    /* one entry per field, so the message names the one that is off */
    const struct { const char *name; long long value, lo, hi; } range[] = {
        {"n_embd", (long long)o->n_embd, 32, 16384},   {"n_layer", (long long)o->n_layer, 1, 256},
        {"n_head", (long long)o->n_head, 1, 16384},    {"n_head_kv", (long long)o->n_head_kv, 1, 16384},
        {"n_ff", (long long)o->n_ff, 32, 65536},       {"n_ctx", (long long)o->n_ctx, 16, 1LL << 24},
        {"n_vocab", (long long)o->n_vocab, 512, 1000000}};
    for (size_t i = 0; i < sizeof range / sizeof range[0]; i++)
        if (range[i].value < range[i].lo || range[i].value > range[i].hi)
            return kld_fail(err, KLD_ERR_ARG, "%s %lld is out of range [%lld, %lld]",
                            range[i].name, range[i].value, range[i].lo, range[i].hi);
    if (o->n_embd % o->n_head || o->n_head % o->n_head_kv || (o->n_embd / o->n_head) % 2)
        return kld_fail(err, KLD_ERR_ARG,
                        "n_embd %lld must split into n_head %lld even-sized heads, and "
                        "n_head_kv %lld must divide n_head",
                        (long long)o->n_embd, (long long)o->n_head, (long long)o->n_head_kv);
    return KLD_OK;
}

static int file_type_of(const char *type) {
    static const struct { const char *name; int ftype; } map[] = {
        {"f32", 0}, {"f16", 1}, {"q4_0", 2}, {"q4_1", 3}, {"q8_0", 7}, {"q5_0", 8},
        {"q5_1", 9}, {"q2_K", 10}, {"q3_K", 11}, {"q4_K", 14}, {"q4_K_M", 15}, {"q5_K", 16},
        {"q6_K", 18}, {"iq4_nl", 25}, {"iq4_xs", 30}, {"bf16", 32}};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(map[i].name, type)) return map[i].ftype;
    return -1;
}

static kld_status write_metadata(kld_gguf_writer *w, const kld_synth_options *o,
                                 const kld_synth_vocab *v) {
    kld_status st = KLD_OK;
    int64_t hd = o->n_embd / o->n_head;
#define SET(call) if (!st) st = (call)
    SET(kld_gguf_writer_set_str(w, "general.architecture", "llama"));
    SET(kld_gguf_writer_set_str(w, "general.name", o->name));
    if (file_type_of(o->type) >= 0)
        SET(kld_gguf_writer_set_u32(w, "general.file_type", (uint32_t)file_type_of(o->type)));
    SET(kld_gguf_writer_set_u64(w, "kldeval.synth.seed", o->seed));
    SET(kld_gguf_writer_set_u32(w, "llama.context_length", (uint32_t)o->n_ctx));
    SET(kld_gguf_writer_set_u32(w, "llama.embedding_length", (uint32_t)o->n_embd));
    SET(kld_gguf_writer_set_u32(w, "llama.block_count", (uint32_t)o->n_layer));
    SET(kld_gguf_writer_set_u32(w, "llama.feed_forward_length", (uint32_t)o->n_ff));
    SET(kld_gguf_writer_set_u32(w, "llama.attention.head_count", (uint32_t)o->n_head));
    SET(kld_gguf_writer_set_u32(w, "llama.attention.head_count_kv", (uint32_t)o->n_head_kv));
    SET(kld_gguf_writer_set_u32(w, "llama.rope.dimension_count", (uint32_t)hd));
    SET(kld_gguf_writer_set_f32(w, "llama.rope.freq_base", 10000.0f));
    SET(kld_gguf_writer_set_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f));
    SET(kld_gguf_writer_set_u32(w, "llama.vocab_size", (uint32_t)v->n));
    SET(kld_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama"));
    SET(kld_gguf_writer_set_str(w, "tokenizer.ggml.pre", "default"));
    SET(kld_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)v->pieces,
                                    (uint64_t)v->n));
    SET(kld_gguf_writer_set_arr_f32(w, "tokenizer.ggml.scores", v->scores, (uint64_t)v->n));
    SET(kld_gguf_writer_set_arr_i32(w, "tokenizer.ggml.token_type", v->types, (uint64_t)v->n));
    SET(kld_gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 0));
    SET(kld_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1));
    SET(kld_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2));
    SET(kld_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", true));
    SET(kld_gguf_writer_set_bool(w, "tokenizer.ggml.add_eos_token", false));
    SET(kld_gguf_writer_set_bool(w, "tokenizer.ggml.add_space_prefix", true));
#undef SET
    return st;
}

static kld_status add_weights(synth_state *s, int64_t n_vocab, kld_error *err) {
    const kld_synth_options *o = s->o;
    int64_t hd = o->n_embd / o->n_head, n_kv = hd * o->n_head_kv;
    double in_embd = 1.0 / sqrt((double)o->n_embd), in_ff = 1.0 / sqrt((double)o->n_ff);
    /* The embedding dominates the residual stream (as in a trained model,
     * whose hidden states carry the token) and the tied output's logits have
     * std ≈ sqrt(n_embd)·σ_e·g_out ≈ 2.5; the token's own row adds a peak. */
    double sigma_e = 0.3, g_out = 2.5 / (sqrt((double)o->n_embd) * sigma_e);
    kld_status st = add_matrix(s, "token_embd.weight", "token_embd", 0, o->n_embd, n_vocab,
                               sigma_e, err);
    if (!st) st = add_tensor(s, "output_norm.weight", KLD_TYPE_F32, o->n_embd, 1, 0.1 * g_out,
                             g_out, err);
    char name[96];
    for (int64_t l = 0; l < o->n_layer && !st; l++) {
#define NAME(x) (snprintf(name, sizeof name, "blk.%lld." x ".weight", (long long)l), name)
        st = add_tensor(s, NAME("attn_norm"), KLD_TYPE_F32, o->n_embd, 1, 0.1, 1.0, err);
        if (!st) st = add_matrix(s, NAME("attn_q"), "attn_q", l, o->n_embd, o->n_embd, 1.2 * in_embd, err);
        if (!st) st = add_matrix(s, NAME("attn_k"), "attn_k", l, o->n_embd, n_kv, 1.2 * in_embd, err);
        if (!st) st = add_matrix(s, NAME("attn_v"), "attn_v", l, o->n_embd, n_kv, in_embd, err);
        if (!st) st = add_matrix(s, NAME("attn_output"), "attn_output", l, o->n_embd, o->n_embd, in_embd, err);
        if (!st) st = add_tensor(s, NAME("ffn_norm"), KLD_TYPE_F32, o->n_embd, 1, 0.1, 1.0, err);
        if (!st) st = add_matrix(s, NAME("ffn_gate"), "ffn_gate", l, o->n_embd, o->n_ff, in_embd, err);
        if (!st) st = add_matrix(s, NAME("ffn_up"), "ffn_up", l, o->n_embd, o->n_ff, in_embd, err);
        if (!st) st = add_matrix(s, NAME("ffn_down"), "ffn_down", l, o->n_ff, o->n_embd, in_ff, err);
#undef NAME
    }
    return st;
}

kld_status kld_synth_write(const kld_synth_options *o, const char *path, kld_error *err) {
    kld_kernels_init();
    kld_status st = check_shape(o, err);
    if (st) return st;
    kld_synth_vocab v;
    st = kld_synth_vocab_train((const char *)kld_builtin_corpus, kld_builtin_corpus_len,
                               o->n_vocab, &v, err);
    if (st) return st;
    synth_state s = {.o = o, .n_threads = o->n_threads};
    if (s.n_threads <= 0) s.n_threads = kld_default_threads();
    kld_rng_seed(&s.rng, o->seed);
    int64_t max_row = o->n_embd > o->n_ff ? o->n_embd : o->n_ff;
    s.batch_cap = max_row > SYNTH_BATCH_VALUES ? max_row : SYNTH_BATCH_VALUES;
    s.t = calloc((size_t)(2 + 9 * o->n_layer), sizeof *s.t);
    s.batch = malloc((size_t)s.batch_cap * sizeof *s.batch);
    kld_gguf_writer *w = kld_gguf_writer_create();
    if (!s.t || !s.batch || !w) {
        st = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
        goto done;
    }
    st = add_weights(&s, v.n, err);
    if (st) goto done;
    if ((st = write_metadata(w, o, &v))) {
        kld_fail(err, st, "cannot build the GGUF metadata");
        goto done;
    }
    for (int i = 0; i < s.n_t && !st; i++)
        st = kld_gguf_writer_add_tensor(w, s.t[i].name, s.t[i].type, s.t[i].n_dims, s.t[i].ne,
                                        s.t[i].data, s.t[i].nbytes, err);
    if (!st) st = kld_gguf_writer_write(w, path, err);
done:
    kld_gguf_writer_free(w);
    for (int i = 0; i < s.n_t; i++) free(s.t[i].data);
    free(s.t);
    free(s.batch);
    kld_synth_vocab_free(&v);
    return st;
}
