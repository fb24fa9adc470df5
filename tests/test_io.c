/* test_io.c — good inputs of the io module: every shared model opens through
 * kld_source_open with the right format, tensor count and parameter count
 * (README table); the HF safetensors equal their GGUF twins value for value
 * (rand-llama's q/k through llama.cpp's rotate-half -> interleaved row
 * permutation); llama2.c checkpoints equal llama.cpp's converted f32.gguf
 * byte for byte; a sharded copy of rand-qwen2-hf built here reads back
 * identically; llama2.c tokenizers agree with the GGUF vocab. */
#include "io/io.h"
#include "testlib.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MODELS KT_SHARED "/models"

static kld_source *open_ok(const char *path) {
    kld_source *src = NULL;
    kld_error err = {0};
    kld_status st = kld_source_open(path, &src, &err);
    CHECK(st == KLD_OK, "%s: %s", path, err.msg);
    return st == KLD_OK ? src : NULL;
}

static uint64_t n_params(const kld_source *src) {
    uint64_t n = 0;
    for (size_t i = 0; i < src->n_tensors; i++) n += (uint64_t)kld_tensor_nelements(&src->tensors[i]);
    return n;
}

/* Element i of an F32/F16/BF16 tensor as float. */
static float elem(const kld_tensor *t, int64_t i) {
    const uint8_t *p = t->data;
    switch (t->type) {
    case KLD_TYPE_F32: return kld_load_f32(p + 4 * i);
    case KLD_TYPE_F16: return kld_f16_to_f32(kld_load_u16(p + 2 * i));
    case KLD_TYPE_BF16: return kld_bf16_to_f32(kld_load_u16(p + 2 * i));
    default: return NAN;
    }
}

static bool same_shape(const kld_tensor *a, const kld_tensor *b) {
    return a->ne[0] == b->ne[0] && a->ne[1] == b->ne[1] && a->ne[2] == b->ne[2] &&
           a->ne[3] == b->ne[3];
}

/* "model.layers.3.mlp.up_proj.weight" -> "blk.3.ffn_up.weight" (llama.cpp's
 * tensor map for llama/qwen2). *permuted is set for q/k weights, which the
 * llama converter permutes. */
static bool hf_to_gguf(const char *hf, char *out, size_t n, bool *qk) {
    static const char *const map[][2] = {
        {"input_layernorm.weight", "attn_norm.weight"},
        {"post_attention_layernorm.weight", "ffn_norm.weight"},
        {"self_attn.q_proj.weight", "attn_q.weight"},
        {"self_attn.k_proj.weight", "attn_k.weight"},
        {"self_attn.v_proj.weight", "attn_v.weight"},
        {"self_attn.o_proj.weight", "attn_output.weight"},
        {"self_attn.q_proj.bias", "attn_q.bias"},
        {"self_attn.k_proj.bias", "attn_k.bias"},
        {"self_attn.v_proj.bias", "attn_v.bias"},
        {"mlp.gate_proj.weight", "ffn_gate.weight"},
        {"mlp.up_proj.weight", "ffn_up.weight"},
        {"mlp.down_proj.weight", "ffn_down.weight"},
    };
    *qk = false;
    if (!strcmp(hf, "model.embed_tokens.weight")) return snprintf(out, n, "token_embd.weight") > 0;
    if (!strcmp(hf, "model.norm.weight")) return snprintf(out, n, "output_norm.weight") > 0;
    int layer, used = 0;
    if (sscanf(hf, "model.layers.%d.%n", &layer, &used) != 1 || used == 0) return false;
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(hf + used, map[i][0])) {
            *qk = strstr(map[i][0], "q_proj.weight") || strstr(map[i][0], "k_proj.weight");
            return snprintf(out, n, "blk.%d.%s", layer, map[i][1]) > 0;
        }
    return false;
}

/* Compares every HF tensor with its GGUF twin. With `permute_qk`, GGUF row
 * h*hd + 2i + j of q/k is HF row h*hd + j*hd/2 + i (llama.cpp's permute). */
static void compare_hf_gguf(const char *hf_path, const char *gguf_path, bool permute_qk,
                            int n_head, int n_head_kv) {
    kld_source *hf = open_ok(hf_path), *gg = open_ok(gguf_path);
    if (!hf || !gg) goto done;
    CHECK(hf->n_tensors == gg->n_tensors, "%s: %zu tensors, %s has %zu", hf_path, hf->n_tensors,
          gguf_path, gg->n_tensors);
    for (size_t k = 0; k < hf->n_tensors; k++) {
        const kld_tensor *a = &hf->tensors[k];
        char name[128];
        bool qk;
        CHECK(hf_to_gguf(a->name, name, sizeof name, &qk), "%s: unexpected HF tensor %s",
              hf_path, a->name);
        const kld_tensor *b = kld_source_find(gg, name);
        CHECK(b != NULL, "%s: no %s for %s", gguf_path, name, a->name);
        if (!b) continue;
        CHECK(same_shape(a, b) && a->n_dims == b->n_dims, "%s: shape differs from %s", a->name,
              name);
        if (!same_shape(a, b)) continue;
        int64_t cols = a->ne[0], rows = kld_tensor_nelements(a) / cols;
        int heads = strstr(name, "attn_k") ? n_head_kv : n_head;
        int64_t hd = rows / heads;
        bool permute = permute_qk && qk;
        int64_t bad = 0;
        for (int64_t r = 0; r < rows; r++) {
            int64_t src_row = r;
            if (permute) {
                int64_t h = r / hd, w = r % hd, i = w / 2, j = w % 2;
                src_row = h * hd + j * (hd / 2) + i;
            }
            for (int64_t c = 0; c < cols; c++)
                if (elem(a, src_row * cols + c) != elem(b, r * cols + c)) bad++;
        }
        CHECK(bad == 0, "%s vs %s: %lld values differ%s", a->name, name, (long long)bad,
              permute ? " after the q/k permutation" : "");
    }
done:
    kld_source_close(hf);
    kld_source_close(gg);
}

static void test_hf_dirs(void) {
    kld_source *s = open_ok(MODELS "/rand-llama-hf");
    if (s) {
        CHECK(s->format == KLD_FORMAT_SAFETENSORS, "rand-llama-hf format %s",
              kld_format_name(s->format));
        CHECK(s->n_tensors == 20, "rand-llama-hf: %zu tensors", s->n_tensors);
        CHECK(n_params(s) == 9766144, "rand-llama-hf: %llu params", (unsigned long long)n_params(s));
        CHECK(s->st->n_files == 1 && s->file_bytes == 19534464, "rand-llama-hf: file bytes %llu",
              (unsigned long long)s->file_bytes);
        const json_t *mt = s->hf_config ? json_object_get(s->hf_config, "model_type") : NULL;
        CHECK(mt && !strcmp(json_string_value(mt), "llama"), "rand-llama-hf: config model_type");
        CHECK(s->hf_tokenizer_path && strstr(s->hf_tokenizer_path, "rand-llama-hf/tokenizer.json"),
              "rand-llama-hf: tokenizer path %s", s->hf_tokenizer_path ? s->hf_tokenizer_path : "-");
        CHECK(!strcmp(s->dir, MODELS "/rand-llama-hf"), "dir %s", s->dir);
        const kld_tensor *e = kld_source_find(s, "model.embed_tokens.weight");
        CHECK(e && e->type == KLD_TYPE_F16 && e->n_dims == 2 && e->ne[0] == 256 &&
                  e->ne[1] == 32000 && e->nbytes == 16384000,
              "embed_tokens shape");
        const kld_tensor *d = kld_source_find(s, "model.layers.0.mlp.down_proj.weight");
        CHECK(d && d->ne[0] == 768 && d->ne[1] == 256, "down_proj: HF [256, 768] -> ne {768, 256}");
    }
    kld_source_close(s);

    s = open_ok(MODELS "/rand-qwen2-hf/");
    if (s) {
        CHECK(s->n_tensors == 26, "rand-qwen2-hf: %zu tensors", s->n_tensors);
        CHECK(n_params(s) == 3315328, "rand-qwen2-hf: %llu params", (unsigned long long)n_params(s));
        CHECK(s->hf_tokenizer_path == NULL, "rand-qwen2-hf has no tokenizer.json");
        const json_t *mt = s->hf_config ? json_object_get(s->hf_config, "model_type") : NULL;
        CHECK(mt && !strcmp(json_string_value(mt), "qwen2"), "rand-qwen2-hf: model_type");
        CHECK(!strcmp(s->dir, MODELS "/rand-qwen2-hf"), "trailing slash stripped: %s", s->dir);
    }
    kld_source_close(s);

    /* A bare .safetensors path picks up config.json beside it. */
    s = open_ok(MODELS "/rand-llama-hf/model.safetensors");
    CHECK(s && s->hf_config && s->hf_tokenizer_path, "bare .safetensors: config and tokenizer");
    kld_source_close(s);

    compare_hf_gguf(MODELS "/rand-llama-hf", MODELS "/rand-llama/f16.gguf", true, 4, 2);
    /* Qwen2 uses NeoX RoPE: llama.cpp does not permute its q/k. */
    compare_hf_gguf(MODELS "/rand-qwen2-hf", MODELS "/rand-qwen2/f16.gguf", false, 4, 2);
}

static void test_ggufs(void) {
    static const struct {
        const char *path;
        size_t n_tensors;
        uint64_t params; /* 0: not in the README */
    } ggufs[] = {
        {MODELS "/rand-llama/f16.gguf", 20, 9766144},
        {MODELS "/rand-llama/q8_0.gguf", 20, 9766144},
        {MODELS "/rand-llama/q4_0.gguf", 20, 9766144},
        {MODELS "/rand-llama/q4_K_M.gguf", 20, 9766144},
        {MODELS "/rand-qwen2/f16.gguf", 26, 3315328},
        {MODELS "/rand-qwen2/q8_0.gguf", 26, 3315328},
        {MODELS "/phi3/f16.gguf", 15, 0},
        {MODELS "/gemma2/f16.gguf", 24, 0},
        /* The 260K GGUFs carry an explicit copy of the embeddings as output. */
        {MODELS "/stories260K/f32.gguf", 48, 260032 + 512 * 64},
        {MODELS "/stories260K/f16.gguf", 48, 260032 + 512 * 64},
        {MODELS "/stories260K/q8_0.gguf", 48, 260032 + 512 * 64},
        {MODELS "/aidreams260K/f32.gguf", 39, 230976 + 512 * 64},
        {MODELS "/aidreams260K/f16.gguf", 39, 230976 + 512 * 64},
        {MODELS "/aidreams260K/q8_0.gguf", 39, 230976 + 512 * 64},
    };
    for (size_t i = 0; i < sizeof ggufs / sizeof ggufs[0]; i++) {
        kld_source *s = open_ok(ggufs[i].path);
        if (!s) continue;
        CHECK(s->format == KLD_FORMAT_GGUF && s->version == 3, "%s: format %s v%u", ggufs[i].path,
              kld_format_name(s->format), s->version);
        CHECK(s->n_tensors == ggufs[i].n_tensors, "%s: %zu tensors, want %zu", ggufs[i].path,
              s->n_tensors, ggufs[i].n_tensors);
        CHECK(!ggufs[i].params || n_params(s) == ggufs[i].params, "%s: %llu params, want %llu",
              ggufs[i].path, (unsigned long long)n_params(s), (unsigned long long)ggufs[i].params);
        CHECK(s->hf_config == NULL && s->st == NULL && s->l2c == NULL, "%s: stray handles",
              ggufs[i].path);
        kld_source_close(s);
    }
}

/* Every llama2.c tensor equals llama.cpp's converted f32.gguf tensor. */
static void compare_l2c_gguf(const kld_source *l2c, const char *gguf_path) {
    kld_source *gg = open_ok(gguf_path);
    if (!gg) return;
    for (size_t i = 0; i < l2c->n_tensors; i++) {
        const kld_tensor *a = &l2c->tensors[i];
        const kld_tensor *b = kld_source_find(gg, a->name);
        CHECK(b != NULL, "%s: no %s", gguf_path, a->name);
        if (!b) continue;
        CHECK(a->type == KLD_TYPE_F32 && b->type == KLD_TYPE_F32 && a->n_dims == b->n_dims &&
                  same_shape(a, b) && a->nbytes == b->nbytes,
              "%s: type/shape differ from the GGUF", a->name);
        CHECK(a->nbytes == b->nbytes && memcmp(a->data, b->data, a->nbytes) == 0,
              "%s: data differs from the GGUF", a->name);
    }
    /* The converter writes the shared classifier out as output.weight. */
    const kld_tensor *out = kld_source_find(gg, "output.weight");
    const kld_tensor *emb = kld_source_find(l2c, "token_embd.weight");
    CHECK(out && emb && out->nbytes == emb->nbytes && !memcmp(out->data, emb->data, emb->nbytes),
          "%s: output.weight is not the shared embedding", gguf_path);
    CHECK(kld_source_find(l2c, "output.weight") == NULL, "shared classifier has no output.weight");
    kld_source_close(gg);
}

/* tokenizer.bin vs the GGUF vocab the converter copied from it: same
 * scores; same pieces with ' ' written as U+2581 (ids 0-2 are renamed). */
static void compare_vocab(const char *tok_path, const char *gguf_path) {
    kld_llama2c_vocab *v = NULL;
    kld_error err = {0};
    kld_status st = kld_llama2c_vocab_open(tok_path, 512, &v, &err);
    CHECK_OK(st, err);
    kld_source *gg = open_ok(gguf_path);
    if (st != KLD_OK || !gg) goto done;
    const kld_gguf_value *toks = kld_gguf_get_arr(gg->gguf, "tokenizer.ggml.tokens");
    const kld_gguf_value *scores = kld_gguf_get_arr(gg->gguf, "tokenizer.ggml.scores");
    CHECK(toks && scores && toks->v.arr.n == 512 && scores->v.arr.n == 512, "%s: vocab arrays",
          gguf_path);
    if (!toks || !scores || toks->v.arr.n != 512 || scores->v.arr.n != 512) goto done;
    int bad_score = 0, bad_piece = 0;
    for (int i = 0; i < 512; i++) {
        double sc;
        if (!kld_gguf_arr_float(scores, (uint64_t)i, &sc) || (float)sc != v->scores[i]) bad_score++;
        if (i < 3) continue;
        char want[64];
        size_t n = 0;
        for (uint32_t k = 0; k < v->lengths[i] && n + 4 < sizeof want; k++) {
            if (v->pieces[i][k] == ' ') {
                memcpy(want + n, "\xe2\x96\x81", 3);
                n += 3;
            } else {
                want[n++] = v->pieces[i][k];
            }
        }
        kld_str got = toks->v.arr.strs[i];
        if (got.len != n || memcmp(got.ptr, want, n) != 0) bad_piece++;
    }
    CHECK(bad_score == 0 && bad_piece == 0, "%s: %d scores and %d pieces differ from %s", tok_path,
          bad_score, bad_piece, gguf_path);
    CHECK(v->max_token_length >= 1 && v->lengths[3] == 6 && !memcmp(v->pieces[3], "<0x00>", 6),
          "%s: piece 3 is <0x00>", tok_path);
done:
    kld_llama2c_vocab_free(v);
    kld_source_close(gg);
}

static void test_llama2c(void) {
    static const struct {
        const char *path, *gguf, *tok;
        kld_llama2c_config cfg;
        size_t n_tensors;
        uint64_t params;
    } models[] = {
        {MODELS "/stories260K", MODELS "/stories260K/f32.gguf", MODELS "/stories260K/tokenizer.bin",
         {64, 172, 5, 8, 4, 512, 512, true}, 47, 260032},
        {MODELS "/aidreams260K/model.bin", MODELS "/aidreams260K/f32.gguf",
         MODELS "/aidreams260K/tokenizer.bin", {64, 172, 4, 4, 4, 512, 128, true}, 38, 230976},
    };
    for (size_t m = 0; m < 2; m++) {
        kld_source *s = open_ok(models[m].path);
        if (!s) continue;
        const kld_llama2c_config *c = &s->l2c->cfg, *w = &models[m].cfg;
        CHECK(s->format == KLD_FORMAT_LLAMA2C, "%s: format", models[m].path);
        CHECK(c->dim == w->dim && c->hidden_dim == w->hidden_dim && c->n_layers == w->n_layers &&
                  c->n_heads == w->n_heads && c->n_kv_heads == w->n_kv_heads &&
                  c->vocab_size == w->vocab_size && c->seq_len == w->seq_len &&
                  c->shared_classifier == w->shared_classifier,
              "%s: header", models[m].path);
        CHECK(s->n_tensors == models[m].n_tensors, "%s: %zu tensors", models[m].path, s->n_tensors);
        CHECK(n_params(s) == models[m].params, "%s: %llu params", models[m].path,
              (unsigned long long)n_params(s));
        CHECK(s->l2c_tokenizer_path && !strcmp(s->l2c_tokenizer_path, models[m].tok),
              "%s: tokenizer path %s", models[m].path,
              s->l2c_tokenizer_path ? s->l2c_tokenizer_path : "-");
        compare_l2c_gguf(s, models[m].gguf);
        kld_source_close(s);
        compare_vocab(models[m].tok, models[m].gguf);
    }

    /* An unshared classifier: output.weight is the file's last vocab x dim floats. */
    kld_source *s = open_ok("tests/bad/ok_tiny_unshared.bin");
    if (s) {
        const kld_tensor *o = kld_source_find(s, "output.weight");
        CHECK(s->n_tensors == 12 && o && o->ne[0] == 8 && o->ne[1] == 4, "unshared: output.weight");
        CHECK(o && (const uint8_t *)o->data + o->nbytes == s->l2c->file.data + s->l2c->file.size,
              "unshared: output.weight ends the file");
        const kld_tensor *k = kld_source_find(s, "blk.0.attn_k.weight");
        CHECK(k && k->ne[0] == 8 && k->ne[1] == 4, "GQA: attn_k is dim x kv_dim");
        CHECK(!s->l2c->cfg.shared_classifier && s->l2c->cfg.vocab_size == 4, "unshared: cfg");
    }
    kld_source_close(s);
    s = open_ok("tests/bad/ok_tiny_noext.l2c");
    CHECK(s && s->format == KLD_FORMAT_LLAMA2C && s->n_tensors == 11, "llama2.c detected by header");
    kld_source_close(s);
}

/* Writes the listed tensors of st as one safetensors file. */
static void write_shard(const char *path, const kld_safetensors *st, size_t from, size_t to) {
    json_t *h = json_object();
    uint64_t pos = 0;
    for (size_t i = from; i < to; i++) {
        const kld_tensor *t = &st->tensors[i];
        json_t *shape = json_array();
        for (int d = t->n_dims - 1; d >= 0; d--) json_array_append_new(shape, json_integer(t->ne[d]));
        json_t *e = json_object();
        json_object_set_new(e, "dtype", json_string(st->tensor_dtype[i]));
        json_object_set_new(e, "shape", shape);
        json_object_set_new(e, "data_offsets",
                            json_pack("[II]", (json_int_t)pos, (json_int_t)(pos + t->nbytes)));
        json_object_set_new(h, t->name, e);
        pos += t->nbytes;
    }
    char *text = json_dumps(h, JSON_COMPACT);
    size_t hlen = strlen(text), padded = (hlen + 7) / 8 * 8;
    size_t total = 8 + padded + (size_t)pos;
    uint8_t *buf = malloc(total);
    uint64_t le = padded;
    memcpy(buf, &le, 8);
    memcpy(buf + 8, text, hlen);
    memset(buf + 8 + hlen, ' ', padded - hlen);
    uint8_t *p = buf + 8 + padded;
    for (size_t i = from; i < to; i++) {
        memcpy(p, st->tensors[i].data, st->tensors[i].nbytes);
        p += st->tensors[i].nbytes;
    }
    kt_write_file(path, buf, total);
    free(buf);
    free(text);
    json_decref(h);
}

static void test_sharded(void) {
    kld_source *orig = open_ok(MODELS "/rand-qwen2-hf");
    if (!orig) return;
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/io_sharded", kt_build_dir());
    mkdir(dir, 0755);
    const kld_safetensors *st = orig->st;
    size_t half = st->n_tensors / 2;
    /* Shard 2 first in the weight_map so shard order follows the map. */
    snprintf(path, sizeof path, "%s/model-00001-of-00002.safetensors", dir);
    write_shard(path, st, 0, half);
    snprintf(path, sizeof path, "%s/model-00002-of-00002.safetensors", dir);
    write_shard(path, st, half, st->n_tensors);
    json_t *wm = json_object();
    for (size_t i = st->n_tensors; i-- > 0;)
        json_object_set_new(wm, st->tensors[i].name,
                            json_string(i < half ? "model-00001-of-00002.safetensors"
                                                 : "model-00002-of-00002.safetensors"));
    json_t *index = json_pack("{s:{s:I},s:o}", "metadata", "total_size", (json_int_t)0,
                              "weight_map", wm);
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    CHECK(json_dump_file(index, path, JSON_INDENT(2)) == 0, "write %s", path);
    json_decref(index);
    snprintf(path, sizeof path, "%s/config.json", dir);
    CHECK(json_dump_file(orig->hf_config, path, 0) == 0, "write %s", path);

    for (int via_index = 0; via_index < 2; via_index++) {
        if (via_index) snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
        kld_source *s = open_ok(via_index ? path : dir);
        if (!s) continue;
        CHECK(s->format == KLD_FORMAT_SAFETENSORS && s->st->n_files == 2, "sharded: %zu files",
              s->st ? s->st->n_files : 0);
        CHECK(strstr(s->st->files[0].path, "model-00002-of-00002"), "shards in weight_map order");
        CHECK(s->n_tensors == st->n_tensors, "sharded: %zu tensors", s->n_tensors);
        CHECK(s->file_bytes == s->st->files[0].size + s->st->files[1].size, "sharded: file_bytes");
        CHECK(s->hf_config && json_equal(s->hf_config, orig->hf_config), "sharded: config.json");
        size_t same = 0;
        for (size_t i = 0; i < st->n_tensors; i++) {
            const kld_tensor *a = &st->tensors[i], *b = kld_source_find(s, a->name);
            if (b && b->type == a->type && b->n_dims == a->n_dims && same_shape(a, b) &&
                b->nbytes == a->nbytes && !memcmp(a->data, b->data, a->nbytes))
                same++;
        }
        CHECK(same == st->n_tensors, "sharded: %zu of %zu tensors identical", same, st->n_tensors);
        kld_source_close(s);
    }
    kld_source_close(orig);
}

static void test_safetensors_details(void) {
    size_t size;
    char *buf = kt_read_file("tests/bad/ok_all_dtypes.safetensors", &size);
    kld_safetensors *st = NULL;
    kld_error err = {0};
    kld_status s = kld_safetensors_parse((const uint8_t *)buf, size, "all_dtypes", &st, &err);
    CHECK_OK(s, err);
    if (s == KLD_OK) {
        static const struct {
            const char *name, *dtype;
            uint32_t type;
            int n_dims;
            uint64_t nbytes;
        } want[] = {
            {"b", "BOOL", KLD_SAFETENSORS_NO_TYPE, 1, 2},
            {"u8", "U8", KLD_SAFETENSORS_NO_TYPE, 1, 2},
            {"f8", "F8_E4M3", KLD_SAFETENSORS_NO_TYPE, 1, 2},
            {"i64", "I64", KLD_TYPE_I64, 1, 8},
            {"bf", "BF16", KLD_TYPE_BF16, 1, 2},
            {"f4", "F4", KLD_SAFETENSORS_NO_TYPE, 1, 2},
            {"scalar", "F32", KLD_TYPE_F32, 0, 4},
            {"empty", "F32", KLD_TYPE_F32, 2, 0},
            {"quad", "F16", KLD_TYPE_F16, 4, 2},
        };
        CHECK(st->n_tensors == 9 && st->n_files == 0, "all_dtypes: %zu tensors", st->n_tensors);
        for (size_t i = 0; i < 9 && i < st->n_tensors; i++) {
            const kld_tensor *t = &st->tensors[i];
            CHECK(!strcmp(t->name, want[i].name) && !strcmp(st->tensor_dtype[i], want[i].dtype) &&
                      t->type == want[i].type && t->n_dims == want[i].n_dims &&
                      t->nbytes == want[i].nbytes,
                  "all_dtypes: tensor %zu is %s %s", i, t->name, st->tensor_dtype[i]);
        }
        const kld_tensor *e = kld_safetensors_find(st, "empty");
        CHECK(e && e->ne[0] == 3 && e->ne[1] == 0 && kld_tensor_nelements(e) == 0,
              "shape [0, 3] -> ne {3, 0}");
        CHECK(kld_safetensors_dtype_bits("F6_E2M3") == 6 && kld_safetensors_dtype_bits("X") == 0,
              "dtype bits");
    }
    kld_safetensors_close(st);
    free(buf);

    kld_source *src = NULL;
    s = kld_source_open("tests/bad/no-such-model", &src, &err);
    CHECK(s == KLD_ERR_IO && strstr(err.msg, "no-such-model"), "missing path: %s", err.msg);
}

int main(void) {
    test_hf_dirs();
    test_ggufs();
    test_llama2c();
    test_sharded();
    test_safetensors_details();
    return kt_finish();
}
