/* st_writer.c — see st_writer.h. */
#include "st_writer.h"

#include "tensor/types.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void st_init(st_writer *w) {
    memset(w, 0, sizeof *w);
    w->header = json_object();
}

void st_put(st_writer *w, const char *name, const char *dtype, int nd, const int64_t *dims, void *p, size_t bytes) {
    if (w->n == w->cap) {
        w->cap = w->cap ? 2 * w->cap : 64;
        w->data = realloc(w->data, sizeof *w->data * (size_t)w->cap);
        w->bytes = realloc(w->bytes, sizeof *w->bytes * (size_t)w->cap);
    }
    json_t *shape = json_array();
    for (int i = 0; i < nd; i++) json_array_append_new(shape, json_integer(dims[i]));
    json_t *e = json_object();
    json_object_set_new(e, "dtype", json_string(dtype));
    json_object_set_new(e, "shape", shape);
    json_object_set_new(e, "data_offsets", json_pack("[I, I]", (json_int_t)w->off, (json_int_t)(w->off + bytes)));
    json_object_set_new(w->header, name, e);
    w->data[w->n] = p;
    w->bytes[w->n++] = bytes;
    w->off += bytes;
}

void st_put_f32(st_writer *w, const char *name, int nd, const int64_t *dims, float *f) {
    size_t n = 1;
    for (int i = 0; i < nd; i++) n *= (size_t)dims[i];
    st_put(w, name, "F32", nd, dims, f, n * sizeof(float));
}

bool st_write(st_writer *w, const char *dir) {
    char *hdr = json_dumps(w->header, JSON_COMPACT);
    json_decref(w->header);
    const size_t hl = strlen(hdr), pad = (8 - hl % 8) % 8; /* the data start 8-aligned */
    char path[600];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    FILE *f = fopen(path, "wb");
    bool ok = f != NULL;
    const uint64_t hl64 = hl + pad;
    if (ok) ok = fwrite(&hl64, 8, 1, f) == 1 && fwrite(hdr, 1, hl, f) == hl && fwrite("        ", 1, pad, f) == pad;
    for (int i = 0; ok && i < w->n; i++) ok = fwrite(w->data[i], 1, w->bytes[i], f) == w->bytes[i];
    if (f && fclose(f) != 0) ok = false;
    for (int i = 0; i < w->n; i++) free(w->data[i]);
    free(w->data), free(w->bytes), free(hdr);
    memset(w, 0, sizeof *w);
    return ok;
}

float *st_floats(const kld_tensor *t, int64_t from, int64_t n) {
    const int64_t all_n = kld_tensor_nelements(t);
    float *all = malloc(sizeof(float) * (size_t)all_n);
    kld_type_info_get(t->type)->to_float_ref(t->data, all, all_n);
    if (from == 0 && n == all_n) return all;
    float *f = malloc(sizeof(float) * (size_t)n);
    memcpy(f, all + from, sizeof(float) * (size_t)n);
    free(all);
    return f;
}

bool st_put_moe_tensor(st_writer *w, const kld_tensor *t, int layer, const st_moe_names *names, const char *drop) {
    char name[200] = "";
    int il = -1, used = 0;
    if (!strcmp(t->name, "token_embd.weight")) snprintf(name, sizeof name, "model.embed_tokens.weight");
    else if (!strcmp(t->name, "output_norm.weight")) snprintf(name, sizeof name, "model.norm.weight");
    else if (!strcmp(t->name, "output.weight")) snprintf(name, sizeof name, "lm_head.weight");
    else if (sscanf(t->name, "blk.%d.%n", &il, &used) == 1 && used) {
        const char *r = t->name + used, *dot = strrchr(r, '.');
        char rest[96];
        snprintf(rest, sizeof rest, "%.*s", (int)(dot - r), r);
        if (layer >= 0) il = layer;
        if (!strcmp(rest, "exp_probs_b"))
            snprintf(name, sizeof name, "model.layers.%d.mlp.gate.e_score_correction_bias", il);
        for (size_t k = 0; !name[0] && k < names->n; k++)
            if (!strcmp(rest, names->map[k][0]))
                snprintf(name, sizeof name, "model.layers.%d.%s%s", il, names->map[k][1], dot);
        if (!name[0] && t->n_dims == 3) { /* ffn_{gate,up,down}_exps: one tensor per expert */
            const char *proj = !strcmp(rest, "ffn_gate_exps") ? "gate_proj"
                               : !strcmp(rest, "ffn_up_exps") ? "up_proj" : "down_proj";
            const int64_t per = t->ne[0] * t->ne[1], d2[2] = {t->ne[1], t->ne[0]};
            for (int64_t e = 0; e < t->ne[2]; e++) {
                snprintf(name, sizeof name, "model.layers.%d.mlp.experts.%d.%s.weight", il, (int)e, proj);
                if (!drop || strcmp(drop, name)) st_put_f32(w, name, 2, d2, st_floats(t, e * per, per));
            }
            return true;
        }
    }
    if (!name[0]) {
        fprintf(stderr, "%s HF copy: no HF name for %s\n", names->family, t->name);
        return false;
    }
    if (drop && !strcmp(drop, name)) return true;
    const int64_t d2[2] = {t->ne[1], t->ne[0]}, d1[1] = {t->ne[0]};
    st_put_f32(w, name, t->n_dims == 1 ? 1 : 2, t->n_dims == 1 ? d1 : d2, st_floats(t, 0, kld_tensor_nelements(t)));
    return true;
}

bool hf_config_write(json_t *c, const hf_edit *ed, const char *dir) {
    for (int i = 0; ed && ed[i].key; i++) {
        if (!ed[i].json) {
            json_object_del(c, ed[i].key);
            continue;
        }
        json_error_t je;
        json_t *v = json_loads(ed[i].json, JSON_DECODE_ANY, &je);
        if (v) json_object_set_new(c, ed[i].key, v);
    }
    char path[600];
    snprintf(path, sizeof path, "%s/config.json", dir);
    const bool ok = json_dump_file(c, path, JSON_INDENT(1) | JSON_REAL_PRECISION(17)) == 0;
    json_decref(c);
    return ok;
}

bool hf_same_key(const kld_gguf *a, const kld_gguf *b, const char *key) {
    const kld_gguf_kv *x = kld_gguf_find(a, key), *y = kld_gguf_find(b, key);
    if (!x || !y) return !x && !y;
    int64_t i = 0, j = 0;
    double f = 0, g = 0;
    if (kld_gguf_get_int(a, key, &i) && kld_gguf_get_int(b, key, &j)) return i == j;
    if (kld_gguf_get_float(a, key, &f) && kld_gguf_get_float(b, key, &g)) return f == g;
    const kld_gguf_value *u = kld_gguf_get_arr(a, key), *v = kld_gguf_get_arr(b, key);
    if (!u || !v || u->v.arr.n != v->v.arr.n) return false;
    for (uint64_t n = 0; n < u->v.arr.n; n++)
        if (!kld_gguf_arr_int(u, n, &i) || !kld_gguf_arr_int(v, n, &j) || i != j) return false;
    return true;
}

kld_gguf_writer *gguf_writer_with_keys(const kld_gguf *g) {
    kld_gguf_writer *w = kld_gguf_writer_create();
    for (uint64_t i = 0; w && i < g->n_kv; i++) {
        char key[256];
        snprintf(key, sizeof key, "%.*s", (int)g->kv[i].key.len, g->kv[i].key.ptr);
        kld_gguf_writer_copy_value(w, key, &g->kv[i].value);
    }
    return w;
}
