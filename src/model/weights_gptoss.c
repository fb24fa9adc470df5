/* weights_gptoss.c — gpt-oss's experts from a Hugging Face checkpoint
 * (transformers' GptOssExperts), rebuilt once at load into the tensors
 * llama.cpp's converter (conversion/gpt_oss.py GptOssModel) writes:
 *  - MXFP4 (the released files): mlp.experts.{gate_up,down}_proj_blocks
 *    (uint8 [experts, rows, cols / 32, 16], two e2m1 values a byte, value
 *    2i in byte i's low nibble, 2i + 1 in its high one) and *_scales (uint8
 *    e8m0 [experts, rows, cols / 32]) become ggml MXFP4 blocks (the scale
 *    byte, then 16 bytes holding value j in the low nibble of byte j and
 *    value j + 16 in its high one: the converter's transform_nibble_layout).
 *    Codes and scales are moved, never dequantized: the same bits as the GGUF;
 *  - float (a dequantized checkpoint): gate_up_proj [experts, n_embd, 2·ff]
 *    and down_proj [experts, ff, n_embd] transposed into ggml's rows;
 *  - gate_up_proj's rows (MXFP4) or columns (float) and gate_up_proj_bias
 *    interleave gate (even) and up (odd): split into ffn_gate_exps and
 *    ffn_up_exps (and their biases); down_proj_bias is ffn_down_exps.bias.
 * The rebuilt tensors are owned by the weight table (w->oss_*). */
#include "model/weights.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

enum { OSS_GATE, OSS_UP, OSS_DOWN, OSS_GATE_B, OSS_UP_B, OSS_SLOTS };

static kld_tensor *slot(kld_weights *w, int il, int k) { return &w->oss_derived[(int64_t)il * OSS_SLOTS + k]; }

/* torch order ("[4, 128, 2, 16]") of t's shape */
static const char *torch_shape(const kld_tensor *t, char *buf, size_t cap) {
    size_t o = (size_t)snprintf(buf, cap, "[");
    for (int i = t->n_dims - 1; i >= 0 && o < cap; i--)
        o += (size_t)snprintf(buf + o, cap - o, "%" PRId64 "%s", t->ne[i], i ? ", " : "");
    if (o < cap) snprintf(buf + o, cap - o, "]");
    return buf;
}

static bool shape_is(const kld_tensor *t, int nd, int64_t d0, int64_t d1, int64_t d2, int64_t d3) {
    const int64_t want[4] = {d0, d1, d2, d3};
    if (t->n_dims != nd) return false;
    for (int i = 0; i < nd; i++)
        if (t->ne[i] != want[nd - 1 - i]) return false; /* want is in torch order */
    return true;
}

static const char *dtype_of(const kld_source *src, const kld_tensor *t) {
    const size_t i = (size_t)(t - src->tensors);
    return src->st && t >= src->tensors && i < src->n_tensors ? src->st->tensor_dtype[i] : "?";
}

static kld_status missing(const kld_source *src, const char *name, const char *why, kld_error *err) {
    return kld_fail(err, KLD_ERR_FORMAT, "%s: tensor '%s' is missing (%s)", src->path, name, why);
}

/* MXFP4 pair base_blocks / base_scales of rows × cols per expert. */
static kld_status mx_pair(const kld_source *src, const char *base, int64_t X, int64_t rows, int64_t cols,
                          const char *what, const kld_tensor **bk, const kld_tensor **sc, kld_error *err) {
    char nb[300], ns[300], s1[64], s2[64];
    snprintf(nb, sizeof nb, "%s_blocks", base);
    snprintf(ns, sizeof ns, "%s_scales", base);
    *bk = kld_source_find(src, nb);
    *sc = kld_source_find(src, ns);
    if (!*bk) return missing(src, nb, "MXFP4 experts: its _scales are there", err);
    if (!*sc) return missing(src, ns, "MXFP4 experts: its _blocks are there", err);
    for (int k = 0; k < 2; k++) {
        const kld_tensor *t = k ? *sc : *bk;
        if (strcmp(dtype_of(src, t), "U8") != 0)
            return kld_fail(err, KLD_ERR_FORMAT, "%s: tensor '%s' has dtype %s, expected U8 (MXFP4 %s)", src->path,
                            t->name, dtype_of(src, t), k ? "e8m0 scales" : "e2m1 pairs");
    }
    const kld_tensor *b = *bk, *s = *sc;
    if (b->n_dims == 4 && s->n_dims == 3 && (b->ne[1] != s->ne[0] || b->ne[2] != s->ne[1] || b->ne[3] != s->ne[2]))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: tensor '%s' has shape %s but '%s' has %s: a block's scale for "
                        "every block", src->path, b->name, torch_shape(b, s1, sizeof s1), s->name,
                        torch_shape(s, s2, sizeof s2));
    if (b->n_dims == 4 && b->ne[2] % 2 != 0 && !strcmp(what, "gate_up"))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: tensor '%s' has %" PRId64 " rows per expert, an odd count: gate "
                        "and up rows alternate", src->path, b->name, b->ne[2]);
    if (cols % 32 != 0)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: tensor '%s': rows of %" PRId64 " values are not whole MXFP4 "
                        "blocks of 32", src->path, b->name, cols);
    if (!shape_is(b, 4, X, rows, cols / 32, 16) || !shape_is(s, 3, X, rows, cols / 32, 0))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: tensors '%s' %s and '%s' %s, expected [%" PRId64 ", %" PRId64
                        ", %" PRId64 ", 16] and [%" PRId64 ", %" PRId64 ", %" PRId64 "] (num_local_experts, %s, "
                        "32-value blocks)", src->path, b->name, torch_shape(b, s1, sizeof s1), s->name,
                        torch_shape(s, s2, sizeof s2), X, rows, cols / 32, X, rows, cols / 32,
                        !strcmp(what, "gate_up") ? "2 · intermediate_size, hidden_size / 32"
                                                 : "hidden_size, intermediate_size / 32");
    return KLD_OK;
}

/* A float tensor name of torch shape [d0, d1(, d2)], or an error saying what it should be. */
static kld_status float_tensor(const kld_source *src, const char *name, int nd, int64_t d0, int64_t d1, int64_t d2,
                               const char *dims, const kld_tensor **out, kld_error *err) {
    char s1[64];
    const kld_tensor *t = *out = kld_source_find(src, name);
    if (!t) return missing(src, name, dims, err);
    const kld_type_info *ti = kld_type_info_get(t->type);
    if (!ti || ti->block_size != 1 || !ti->to_float_ref)
        return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: tensor '%s' has dtype %s, expected a float type", src->path,
                        name, dtype_of(src, t));
    if (nd == 2 && t->n_dims == 2 && d1 % 2 == 0 && t->ne[0] % 2 != 0 && strstr(name, "gate_up"))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: tensor '%s' has %" PRId64 " values per expert, an odd count: "
                        "gate and up alternate", src->path, name, t->ne[0]);
    if (!shape_is(t, nd, d0, d1, d2, 0))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: tensor '%s' has shape %s, expected [%" PRId64 ", %" PRId64 "%s%.0"
                        PRId64 "] (%s)", src->path, name, torch_shape(t, s1, sizeof s1), d0, d1, nd == 3 ? ", " : "",
                        nd == 3 ? d2 : 0, dims);
    return KLD_OK;
}

/* ggml MXFP4 rows out of the HF rows row0, row0 + step, ... (n_out per expert). */
static uint8_t *mx_repack(const kld_tensor *b, const kld_tensor *s, int64_t X, int64_t rows, int64_t nb,
                          int64_t row0, int64_t step, int64_t n_out) {
    uint8_t *dst = malloc((size_t)(X * n_out * nb) * 17 + 1);
    if (!dst) return NULL;
    const uint8_t *B = b->data, *S = s->data;
    uint8_t *o = dst;
    for (int64_t x = 0; x < X; x++)
        for (int64_t r = 0; r < n_out; r++) {
            const int64_t hr = x * rows + row0 + r * step;
            for (int64_t k = 0; k < nb; k++, o += 17) {
                const uint8_t *v = B + (hr * nb + k) * 16;
                o[0] = S[hr * nb + k];
                for (int j = 0; j < 16; j++) { /* value j: byte j / 2, low nibble when j is even */
                    const uint8_t lo = (uint8_t)(j & 1 ? v[j >> 1] >> 4 : v[j >> 1] & 0xF);
                    const uint8_t hi = (uint8_t)(j & 1 ? v[8 + (j >> 1)] >> 4 : v[8 + (j >> 1)] & 0xF);
                    o[1 + j] = (uint8_t)(lo | hi << 4);
                }
            }
        }
    return dst;
}

/* in [X][n_in][cols] (torch) → out [X][n_out][n_in]: out[x][j][i] = in[x][i][col0 + j·step]. */
static uint8_t *transpose_pick(const kld_tensor *t, int64_t X, int64_t n_in, int64_t cols, int64_t col0,
                               int64_t step, int64_t n_out) {
    const size_t es = kld_type_info_get(t->type)->type_size;
    uint8_t *dst = malloc((size_t)(X * n_out * n_in) * es + 1);
    if (!dst) return NULL;
    const uint8_t *in = t->data;
    for (int64_t x = 0; x < X; x++)
        for (int64_t j = 0; j < n_out; j++)
            for (int64_t i = 0; i < n_in; i++)
                memcpy(dst + (size_t)((x * n_out + j) * n_in + i) * es,
                       in + (size_t)((x * n_in + i) * cols + col0 + j * step) * es, es);
    return dst;
}

static void put(kld_weights *w, int il, int k, const kld_tensor *from, uint32_t type, int nd, int64_t ne0,
                int64_t ne1, int64_t ne2, uint8_t *data, uint64_t nbytes) {
    kld_tensor *t = slot(w, il, k);
    *t = *from; /* named as the checkpoint tensor it comes from (the source owns the name) */
    t->type = type;
    t->n_dims = nd;
    t->ne[0] = ne0;
    t->ne[1] = ne1;
    t->ne[2] = ne2;
    t->ne[3] = 1;
    t->data = data;
    t->nbytes = nbytes;
    w->oss_owned[(int64_t)il * OSS_SLOTS + k] = data;
}

kld_status kld_weights_gptoss_hf(const kld_source *src, const kld_hparams *hp, int il, kld_moe_weights *M,
                                 kld_weights *w, kld_error *err) {
    const int64_t X = hp->n_expert, E = hp->n_embd, F = hp->n_ff_exp;
    if (!w->oss_derived) {
        w->oss_derived = calloc((size_t)w->n_layer * OSS_SLOTS, sizeof *w->oss_derived);
        w->oss_owned = calloc((size_t)w->n_layer * OSS_SLOTS, sizeof *w->oss_owned);
        if (!w->oss_derived || !w->oss_owned) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", src->path);
    }
    char base[200], gu[256], dn[256], n[300];
    snprintf(base, sizeof base, "%smodel.layers.%d.mlp.experts.",
             kld_source_find(src, "language_model.model.embed_tokens.weight") ? "language_model." : "", il);
    snprintf(gu, sizeof gu, "%sgate_up_proj", base);
    snprintf(dn, sizeof dn, "%sdown_proj", base);
    snprintf(n, sizeof n, "%s_blocks", gu);
    char n2[300];
    snprintf(n2, sizeof n2, "%s_scales", gu);
    const bool mx = kld_source_find(src, n) || kld_source_find(src, n2);
    kld_status s;
    uint8_t *g = NULL, *u = NULL, *d = NULL;
    const kld_tensor *gb = NULL, *gs = NULL, *db = NULL, *ds = NULL;
    if (mx) {
        const int64_t nbe = E / 32, nbf = F / 32;
        if ((s = mx_pair(src, gu, X, 2 * F, E, "gate_up", &gb, &gs, err)) ||
            (s = mx_pair(src, dn, X, E, F, "down", &db, &ds, err)))
            return s;
        g = mx_repack(gb, gs, X, 2 * F, nbe, 0, 2, F);
        u = mx_repack(gb, gs, X, 2 * F, nbe, 1, 2, F);
        d = mx_repack(db, ds, X, E, nbf, 0, 1, E);
        if (g && u && d) {
            const uint64_t row_e = (uint64_t)nbe * 17, row_f = (uint64_t)nbf * 17;
            put(w, il, OSS_GATE, gb, KLD_TYPE_MXFP4, 3, E, F, X, g, row_e * (uint64_t)(F * X));
            put(w, il, OSS_UP, gb, KLD_TYPE_MXFP4, 3, E, F, X, u, row_e * (uint64_t)(F * X));
            put(w, il, OSS_DOWN, db, KLD_TYPE_MXFP4, 3, F, E, X, d, row_f * (uint64_t)(E * X));
        }
    } else {
        const kld_tensor *tg = NULL, *td = NULL;
        if ((s = float_tensor(src, gu, 3, X, E, 2 * F, "num_local_experts, hidden_size, 2 · intermediate_size: "
                              "gate and up alternating; or MXFP4 gate_up_proj_blocks / _scales", &tg, err)) ||
            (s = float_tensor(src, dn, 3, X, F, E, "num_local_experts, intermediate_size, hidden_size", &td, err)))
            return s;
        const uint64_t es = kld_type_info_get(tg->type)->type_size, esd = kld_type_info_get(td->type)->type_size;
        g = transpose_pick(tg, X, E, 2 * F, 0, 2, F);
        u = transpose_pick(tg, X, E, 2 * F, 1, 2, F);
        d = transpose_pick(td, X, F, E, 0, 1, E);
        if (g && u && d) {
            put(w, il, OSS_GATE, tg, tg->type, 3, E, F, X, g, es * (uint64_t)(E * F * X));
            put(w, il, OSS_UP, tg, tg->type, 3, E, F, X, u, es * (uint64_t)(E * F * X));
            put(w, il, OSS_DOWN, td, td->type, 3, F, E, X, d, esd * (uint64_t)(F * E * X));
        }
    }
    if (!g || !u || !d) {
        free(g), free(u), free(d);
        return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory rebuilding layer %d's experts", src->path, il);
    }
    const kld_tensor *bgu = NULL, *bd = NULL;
    snprintf(n, sizeof n, "%s_bias", gu);
    snprintf(n2, sizeof n2, "%s_bias", dn);
    if ((s = float_tensor(src, n, 2, X, 2 * F, 0, "num_local_experts, 2 · intermediate_size: gate and up "
                          "alternating", &bgu, err)) ||
        (s = float_tensor(src, n2, 2, X, E, 0, "num_local_experts, hidden_size", &bd, err)))
        return s;
    uint8_t *bgate = transpose_pick(bgu, X, 1, 2 * F, 0, 2, F), *bup = transpose_pick(bgu, X, 1, 2 * F, 1, 2, F);
    if (!bgate || !bup) {
        free(bgate), free(bup);
        return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", src->path);
    }
    const uint64_t eb = kld_type_info_get(bgu->type)->type_size * (uint64_t)(F * X);
    put(w, il, OSS_GATE_B, bgu, bgu->type, 2, F, X, 1, bgate, eb);
    put(w, il, OSS_UP_B, bgu, bgu->type, 2, F, X, 1, bup, eb);
    M->gate_exps = slot(w, il, OSS_GATE);
    M->up_exps = slot(w, il, OSS_UP);
    M->down_exps = slot(w, il, OSS_DOWN);
    M->gate_exps_b = slot(w, il, OSS_GATE_B);
    M->up_exps_b = slot(w, il, OSS_UP_B);
    M->down_exps_b = bd; /* [experts, n_embd]: ggml's {n_embd, experts} as stored */
    return KLD_OK;
}

void *kld_weights_gptoss_take(kld_weights *w, const kld_tensor *t) {
    if (!w->oss_derived || t < w->oss_derived || t >= w->oss_derived + w->n_layer * OSS_SLOTS) return NULL;
    void **o = &w->oss_owned[t - w->oss_derived];
    void *p = *o;
    *o = NULL;
    return p;
}

void kld_weights_gptoss_free(kld_weights *w) {
    for (int64_t i = 0; w->oss_owned && i < w->n_layer * OSS_SLOTS; i++) free(w->oss_owned[i]);
    free(w->oss_owned);
    free(w->oss_derived);
    w->oss_owned = NULL;
    w->oss_derived = NULL;
}
