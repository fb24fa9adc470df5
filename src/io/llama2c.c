/* llama2c.c — llama2.c legacy checkpoints (model.bin) and tokenizer.bin.
 *
 * model.bin: 7 int32 (dim, hidden_dim, n_layers, n_heads, n_kv_heads,
 * vocab_size, seq_len), then float32 arrays in run.c's order:
 * token_embedding_table, rms_att_weight, wq, wk, wv, wo, rms_ffn_weight,
 * w1, w2, w3, rms_final_weight, freq_cis_real, freq_cis_imag (skipped),
 * wcls when vocab_size < 0 (llama2.c: shared_classifier = vocab_size > 0).
 * The file must have exactly the implied size. Each layer's slice becomes a
 * GGUF-named tensor, as llama.cpp's convert-llama2c-to-ggml names it; that
 * converter copies wq/wk unpermuted, since llama2.c's RoPE rotates
 * interleaved pairs like GGUF llama. */
#include "io/llama2c.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define L2C_HEADER_BYTES 28u
/* The "ak42" magic of llama2.c's newer export formats (version 1+). */
#define L2C_EXPORT_MAGIC 0x616b3432u

static const char *const l2c_field[7] = {"dim",        "hidden_dim", "n_layers", "n_heads",
                                         "n_kv_heads", "vocab_size", "seq_len"};

/* Float counts of every array in file order; ok=false on overflow. */
typedef struct l2c_layout {
    uint64_t emb, rms_att, wq, wk, wv, wo, rms_ffn, w1, w2, w3, rms_final, freq, wcls;
    uint64_t total_floats, bytes_shared, bytes_unshared;
    bool ok;
} l2c_layout;

static uint64_t prod(l2c_layout *l, uint64_t a, uint64_t b, uint64_t c) {
    uint64_t ab, abc;
    if (!kld_mul_u64(a, b, &ab) || !kld_mul_u64(ab, c, &abc)) {
        l->ok = false;
        return 0;
    }
    return abc;
}

static void compute_layout(const kld_llama2c_config *c, l2c_layout *l) {
    memset(l, 0, sizeof *l);
    l->ok = true;
    uint64_t D = (uint64_t)c->dim, H = (uint64_t)c->hidden_dim, L = (uint64_t)c->n_layers;
    uint64_t V = (uint64_t)c->vocab_size, S = (uint64_t)c->seq_len;
    uint64_t hs = D / (uint64_t)c->n_heads, kv = hs * (uint64_t)c->n_kv_heads;
    l->emb = prod(l, V, D, 1);
    l->rms_att = prod(l, L, D, 1);
    l->wq = prod(l, L, D, D);
    l->wk = prod(l, L, kv, D);
    l->wv = l->wk;
    l->wo = l->wq;
    l->rms_ffn = l->rms_att;
    l->w1 = prod(l, L, H, D);
    l->w2 = l->w1;
    l->w3 = l->w1;
    l->rms_final = D;
    l->freq = prod(l, S, hs / 2, 1); /* each of freq_cis_real and freq_cis_imag */
    l->wcls = l->emb;
    const uint64_t parts[] = {l->emb, l->rms_att, l->wq, l->wk, l->wv, l->wo,
                              l->rms_ffn, l->w1, l->w2, l->w3, l->rms_final, l->freq, l->freq};
    uint64_t t = 0;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        if (!kld_add_u64(t, parts[i], &t)) l->ok = false;
    l->total_floats = t;
    uint64_t b;
    if (!kld_mul_u64(t, 4, &b) || !kld_add_u64(b, L2C_HEADER_BYTES, &l->bytes_shared))
        l->ok = false;
    if (!kld_mul_u64(l->wcls, 4, &b) || !kld_add_u64(l->bytes_shared, b, &l->bytes_unshared))
        l->ok = false;
}

/* Validates the header values; fills cfg with vocab_size made positive. */
static kld_status read_config(const uint8_t *buf, uint64_t size, const char *name,
                              kld_llama2c_config *cfg, kld_error *err) {
    if (size >= 4 && kld_load_u32(buf) == L2C_EXPORT_MAGIC) {
        int32_t version = size >= 8 ? (int32_t)kld_load_u32(buf + 4) : -1;
        return kld_fail(err, KLD_ERR_UNSUPPORTED,
                        "%s: llama2.c export version %" PRId32 " (\"ak42\" header) is not "
                        "supported; only the legacy format with a 7-int32 header is",
                        name, version);
    }
    if (size < L2C_HEADER_BYTES)
        return kld_fail(err, KLD_ERR_FORMAT,
                        "%s: %" PRIu64 " bytes is too small for the llama2.c header (28 bytes)",
                        name, size);
    int32_t h[7];
    for (int i = 0; i < 7; i++) h[i] = (int32_t)kld_load_u32(buf + 4 * i);
    for (int i = 0; i < 7; i++) {
        if (i == 5) continue;
        if (h[i] <= 0)
            return kld_fail(err, KLD_ERR_FORMAT, "%s: llama2.c header: %s is %" PRId32
                            " (must be positive)", name, l2c_field[i], h[i]);
    }
    if (h[5] == 0 || h[5] == INT32_MIN)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: llama2.c header: vocab_size is %" PRId32, name,
                        h[5]);
    if (h[0] % h[3] != 0)
        return kld_fail(err, KLD_ERR_FORMAT,
                        "%s: llama2.c header: dim %" PRId32 " is not a multiple of n_heads %" PRId32,
                        name, h[0], h[3]);
    if (h[4] > h[3] || h[3] % h[4] != 0)
        return kld_fail(err, KLD_ERR_FORMAT,
                        "%s: llama2.c header: n_kv_heads %" PRId32 " does not divide n_heads %" PRId32,
                        name, h[4], h[3]);
    if ((h[0] / h[3]) % 2 != 0)
        return kld_fail(err, KLD_ERR_FORMAT,
                        "%s: llama2.c header: head size %" PRId32 " (dim/n_heads) is odd; RoPE "
                        "rotates pairs",
                        name, h[0] / h[3]);
    cfg->dim = h[0];
    cfg->hidden_dim = h[1];
    cfg->n_layers = h[2];
    cfg->n_heads = h[3];
    cfg->n_kv_heads = h[4];
    cfg->shared_classifier = h[5] > 0;
    cfg->vocab_size = h[5] > 0 ? h[5] : -h[5];
    cfg->seq_len = h[6];
    return KLD_OK;
}

static kld_status check_size(const kld_llama2c_config *c, const l2c_layout *l, uint64_t size,
                             const char *name, kld_error *err) {
    if (!l->ok)
        return kld_fail(err, KLD_ERR_FORMAT,
                        "%s: llama2.c header (dim %" PRId32 ", hidden_dim %" PRId32
                        ", n_layers %" PRId32 ", vocab_size %" PRId32 ", seq_len %" PRId32
                        ") implies a size that overflows",
                        name, c->dim, c->hidden_dim, c->n_layers, c->vocab_size, c->seq_len);
    uint64_t want = c->shared_classifier ? l->bytes_shared : l->bytes_unshared;
    if (size == want) return KLD_OK;
    uint64_t other = c->shared_classifier ? l->bytes_unshared : l->bytes_shared;
    return kld_fail(err, KLD_ERR_FORMAT,
                    "%s: file is %" PRIu64 " bytes, but its llama2.c header (dim %" PRId32
                    ", hidden_dim %" PRId32 ", n_layers %" PRId32 ", n_heads %" PRId32
                    ", n_kv_heads %" PRId32 ", vocab_size %s%" PRId32 ", seq_len %" PRId32
                    ") needs exactly %" PRIu64 "%s",
                    name, size, c->dim, c->hidden_dim, c->n_layers, c->n_heads, c->n_kv_heads,
                    c->shared_classifier ? "" : "-", c->vocab_size, c->seq_len, want,
                    size == other ? (c->shared_classifier
                                         ? " (the size fits an unshared classifier: should "
                                           "vocab_size be negative?)"
                                         : " (the size fits a shared classifier: should "
                                           "vocab_size be positive?)")
                                  : "");
}

bool kld_llama2c_detect(const uint8_t *buf, uint64_t size) {
    kld_llama2c_config c;
    l2c_layout l;
    if (read_config(buf, size, "", &c, NULL) != KLD_OK) return false;
    compute_layout(&c, &l);
    return check_size(&c, &l, size, "", NULL) == KLD_OK;
}

typedef struct tensor_builder {
    kld_llama2c *m;
    const uint8_t *data; /* first weight */
    uint64_t pos;        /* in floats */
    const char *file;
    kld_error *err;
} tensor_builder;

/* Adds tensor `name` (ne0 x ne1, ne1 = 1 for vectors) at float offset pos. */
static kld_status add(tensor_builder *b, const char *name, int64_t ne0, int64_t ne1,
                      uint64_t pos) {
    kld_tensor *t = &b->m->tensors[b->m->n_tensors];
    memset(t, 0, sizeof *t);
    t->name = kld_strdup(name);
    if (!t->name) return kld_fail(b->err, KLD_ERR_NOMEM, "%s: out of memory", b->file);
    b->m->n_tensors++;
    t->type = KLD_TYPE_F32;
    t->n_dims = ne1 > 1 ? 2 : 1;
    t->ne[0] = ne0;
    t->ne[1] = ne1;
    t->ne[2] = t->ne[3] = 1;
    t->data = b->data + pos * 4;
    t->nbytes = (uint64_t)ne0 * (uint64_t)ne1 * 4;
    return KLD_OK;
}

static kld_status build_tensors(kld_llama2c *m, const uint8_t *buf, const l2c_layout *l,
                                const char *file, kld_error *err) {
    const kld_llama2c_config *c = &m->cfg;
    size_t count = 1 + 9 * (size_t)c->n_layers + 1 + (c->shared_classifier ? 0 : 1);
    m->tensors = calloc(count, sizeof *m->tensors);
    if (!m->tensors) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", file);
    tensor_builder b = {m, buf + L2C_HEADER_BYTES, 0, file, err};
    const int64_t D = c->dim, H = c->hidden_dim, V = c->vocab_size;
    const int64_t KV = (int64_t)c->dim / c->n_heads * c->n_kv_heads;
    /* Start of each stacked array (in floats), in file order. */
    uint64_t o_emb = 0, o_att = o_emb + l->emb, o_wq = o_att + l->rms_att, o_wk = o_wq + l->wq,
             o_wv = o_wk + l->wk, o_wo = o_wv + l->wv, o_ffn = o_wo + l->wo,
             o_w1 = o_ffn + l->rms_ffn, o_w2 = o_w1 + l->w1, o_w3 = o_w2 + l->w2,
             o_fin = o_w3 + l->w3, o_cls = o_fin + l->rms_final + 2 * l->freq;
    kld_status s = add(&b, "token_embd.weight", D, V, o_emb);
    char nm[64];
    for (int32_t i = 0; i < c->n_layers && s == KLD_OK; i++) {
        const uint64_t li = (uint64_t)i;
        /* Matrices are row-major [out][in]: ggml ne[0] = in, ne[1] = out. */
        const struct {
            const char *suffix;
            int64_t ne0, ne1;
            uint64_t off;
        } w[9] = {
            {"attn_norm", D, 1, o_att + li * (uint64_t)D},
            {"attn_q", D, D, o_wq + li * (uint64_t)(D * D)},
            {"attn_k", D, KV, o_wk + li * (uint64_t)(KV * D)},
            {"attn_v", D, KV, o_wv + li * (uint64_t)(KV * D)},
            {"attn_output", D, D, o_wo + li * (uint64_t)(D * D)},
            {"ffn_norm", D, 1, o_ffn + li * (uint64_t)D},
            {"ffn_gate", D, H, o_w1 + li * (uint64_t)(H * D)},
            {"ffn_down", H, D, o_w2 + li * (uint64_t)(H * D)},
            {"ffn_up", D, H, o_w3 + li * (uint64_t)(H * D)},
        };
        for (int k = 0; k < 9 && s == KLD_OK; k++) {
            snprintf(nm, sizeof nm, "blk.%" PRId32 ".%s.weight", i, w[k].suffix);
            s = add(&b, nm, w[k].ne0, w[k].ne1, w[k].off);
        }
    }
    if (s == KLD_OK) s = add(&b, "output_norm.weight", D, 1, o_fin);
    if (s == KLD_OK && !c->shared_classifier) s = add(&b, "output.weight", D, V, o_cls);
    return s;
}

kld_status kld_llama2c_parse(const uint8_t *buf, uint64_t size, const char *name,
                             kld_llama2c **out, kld_error *err) {
    *out = NULL;
    kld_llama2c_config cfg;
    kld_status s = read_config(buf, size, name, &cfg, err);
    if (s != KLD_OK) return s;
    l2c_layout l;
    compute_layout(&cfg, &l);
    s = check_size(&cfg, &l, size, name, err);
    if (s != KLD_OK) return s;
    kld_llama2c *m = calloc(1, sizeof *m);
    if (!m) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", name);
    m->cfg = cfg;
    s = build_tensors(m, buf, &l, name, err);
    if (s != KLD_OK) {
        kld_llama2c_close(m);
        return s;
    }
    *out = m;
    return KLD_OK;
}

kld_status kld_llama2c_open(const char *path, kld_llama2c **out, kld_error *err) {
    *out = NULL;
    kld_mapped_file mf;
    kld_status s = kld_map_file(path, &mf, err);
    if (s != KLD_OK) return s;
    s = kld_llama2c_parse(mf.data, mf.size, path, out, err);
    if (s != KLD_OK) {
        kld_unmap_file(&mf);
        return s;
    }
    (*out)->file = mf;
    return KLD_OK;
}

void kld_llama2c_close(kld_llama2c *m) {
    if (!m) return;
    for (size_t i = 0; i < m->n_tensors; i++) free(m->tensors[i].name);
    free(m->tensors);
    kld_unmap_file(&m->file);
    free(m);
}

/* ---- tokenizer.bin ---- */

kld_status kld_llama2c_vocab_parse(const uint8_t *buf, uint64_t size, const char *name,
                                   int32_t n_vocab, kld_llama2c_vocab **out, kld_error *err) {
    *out = NULL;
    if (n_vocab <= 0)
        return kld_fail(err, KLD_ERR_ARG, "%s: n_vocab %" PRId32 " must be positive", name,
                        n_vocab);
    if (size < 4)
        return kld_fail(err, KLD_ERR_FORMAT,
                        "%s: %" PRIu64 " bytes is too small for max_token_length", name, size);
    int32_t max_len = (int32_t)kld_load_u32(buf);
    if (max_len <= 0)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: max_token_length is %" PRId32, name, max_len);
    /* Each token takes at least 8 bytes: reject impossible counts before
     * allocating for them. */
    if ((uint64_t)n_vocab * 8 > size - 4)
        return kld_fail(err, KLD_ERR_FORMAT,
                        "%s: %" PRIu64 " bytes cannot hold %" PRId32 " tokens (truncated?)", name,
                        size, n_vocab);
    kld_llama2c_vocab *v = calloc(1, sizeof *v);
    if (!v) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", name);
    v->n_vocab = n_vocab;
    v->max_token_length = max_len;
    v->pieces = calloc((size_t)n_vocab, sizeof *v->pieces);
    v->lengths = calloc((size_t)n_vocab, sizeof *v->lengths);
    v->scores = calloc((size_t)n_vocab, sizeof *v->scores);
    kld_status s = KLD_OK;
    if (!v->pieces || !v->lengths || !v->scores) {
        s = kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", name);
        goto fail;
    }
    uint64_t pos = 4;
    for (int32_t i = 0; i < n_vocab; i++) {
        if (size - pos < 8) {
            s = kld_fail(err, KLD_ERR_FORMAT, "%s: token %" PRId32 ": truncated at offset %" PRIu64,
                         name, i, pos);
            goto fail;
        }
        float score = kld_load_f32(buf + pos);
        int32_t len = (int32_t)kld_load_u32(buf + pos + 4);
        if (isnan(score)) {
            s = kld_fail(err, KLD_ERR_FORMAT, "%s: token %" PRId32 ": score is NaN", name, i);
            goto fail;
        }
        if (len < 0 || len > max_len) {
            s = kld_fail(err, KLD_ERR_FORMAT,
                         "%s: token %" PRId32 ": length %" PRId32
                         " is outside 0..max_token_length (%" PRId32 ")",
                         name, i, len, max_len);
            goto fail;
        }
        pos += 8;
        if (size - pos < (uint64_t)len) {
            s = kld_fail(err, KLD_ERR_FORMAT,
                         "%s: token %" PRId32 ": %" PRId32 " bytes run past the end of the file",
                         name, i, len);
            goto fail;
        }
        v->pieces[i] = kld_strndup((const char *)buf + pos, (size_t)len);
        if (!v->pieces[i]) {
            s = kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", name);
            goto fail;
        }
        v->lengths[i] = (uint32_t)len;
        v->scores[i] = score;
        pos += (uint64_t)len;
    }
    if (pos != size) {
        s = kld_fail(err, KLD_ERR_MISMATCH,
                     "%s: %" PRIu64 " trailing bytes after %" PRId32
                     " tokens (a tokenizer for a larger vocabulary?)",
                     name, size - pos, n_vocab);
        goto fail;
    }
    *out = v;
    return KLD_OK;
fail:
    kld_llama2c_vocab_free(v);
    return s;
}

kld_status kld_llama2c_vocab_open(const char *path, int32_t n_vocab, kld_llama2c_vocab **out,
                                  kld_error *err) {
    *out = NULL;
    kld_mapped_file mf;
    kld_status s = kld_map_file(path, &mf, err);
    if (s != KLD_OK) return s;
    s = kld_llama2c_vocab_parse(mf.data, mf.size, path, n_vocab, out, err);
    kld_unmap_file(&mf);
    return s;
}

void kld_llama2c_vocab_free(kld_llama2c_vocab *v) {
    if (!v) return;
    if (v->pieces)
        for (int32_t i = 0; i < v->n_vocab; i++) free(v->pieces[i]);
    free(v->pieces);
    free(v->lengths);
    free(v->scores);
    free(v);
}
