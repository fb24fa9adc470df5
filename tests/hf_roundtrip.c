/* hf_roundtrip.c — see hf_roundtrip.h. */
#include "hf_roundtrip.h"

#include "io/gguf_writer.h"
#include "io/safetensors.h"
#include "quant/quant.h"
#include "st_writer.h"
#include "tensor/types.h"
#include "test_forward_models.h"
#include "testlib.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int64_t hf_rt_key_int(const kld_gguf *g, const char *key, int64_t absent) {
    int64_t v = absent;
    if (!kld_gguf_get_int(g, key, &v)) v = absent;
    return v;
}

double hf_rt_key_num(const kld_gguf *g, const char *key, double absent) {
    double v = absent;
    if (!kld_gguf_get_float(g, key, &v)) v = absent;
    return v;
}

bool hf_rt_same_tensor(const kld_gguf *a, const kld_tensor *y) {
    const kld_tensor *x = kld_gguf_find_tensor(a, y->name);
    return x && x->type == y->type && x->nbytes == y->nbytes && x->n_dims == y->n_dims &&
           !memcmp(x->ne, y->ne, sizeof x->ne) && !memcmp(x->data, y->data, (size_t)y->nbytes);
}

/* Every tensor of b in a (the family's rule), and a holding no other. */
static void check_tensors(const hf_rt_family *f, const char *label, const kld_gguf *a, const kld_gguf *b) {
    uint64_t same = 0, merged = 0;
    for (uint64_t j = 0; j < b->n_tensors; j++) {
        const kld_tensor *y = &b->tensors[j];
        const bool eq = f->tensor_equal ? f->tensor_equal(a, y, &merged, f->ctx) : hf_rt_same_tensor(a, y);
        if (!eq) printf("%s: converted tensor %s differs or is missing\n", label, y->name);
        same += eq;
    }
    printf("%-28s converted: %" PRIu64 " of %" PRIu64 " tensors equal to the GGUF's (%" PRIu64 " written, %" PRIu64
           " merged into another)\n", label, same, b->n_tensors, a->n_tensors, merged);
    CHECK(same == b->n_tensors && a->n_tensors + merged == b->n_tensors,
          "%s: converted tensors (%" PRIu64 ") equal the synthesized GGUF's (%" PRIu64 " of %" PRIu64 ", %" PRIu64
          " merged)", label, a->n_tensors, same, b->n_tensors, merged);
}

static bool has_prefix(const kld_str *k, const char *prefix, size_t lp) {
    return (size_t)k->len > lp && !strncmp(k->ptr, prefix, lp);
}

/* Every key of b under prefix equal in a, and a writing none of its own. */
static void check_keys(const char *label, const kld_gguf *a, const kld_gguf *b, const char *prefix, int min_keys) {
    const size_t lp = strlen(prefix);
    int n_keys = 0, n_same = 0, n_conv = 0;
    for (uint64_t i = 0; i < b->n_kv; i++) {
        if (!has_prefix(&b->kv[i].key, prefix, lp)) continue;
        char key[160];
        snprintf(key, sizeof key, "%.*s", (int)b->kv[i].key.len, b->kv[i].key.ptr);
        n_keys++;
        const bool ok = hf_same_key(a, b, key);
        n_same += ok;
        if (!ok) printf("%s: converted key %s differs\n", label, key);
    }
    for (uint64_t i = 0; i < a->n_kv; i++) {
        if (!has_prefix(&a->kv[i].key, prefix, lp)) continue;
        n_conv++;
        char key[160];
        snprintf(key, sizeof key, "%.*s", (int)a->kv[i].key.len, a->kv[i].key.ptr);
        if (!kld_gguf_find(b, key)) printf("%s: extra key %s\n", label, key);
    }
    printf("%-28s converted: %d of %d %s* keys equal to the GGUF's (%d written)\n", label, n_same, n_keys, prefix,
           n_conv);
    CHECK(n_keys >= min_keys && n_same == n_keys && n_conv == n_keys,
          "%s: converted keys equal the GGUF's (%d of %d, %d written)", label, n_same, n_keys, n_conv);
}

void hf_rt_check(const hf_rt_family *f, const char *label, const char *gguf, const char *hf, const char *out,
                 const int32_t *ids, int n_ids) {
    kld_error err = {0};
    kld_quantize_opts qo = {.n_threads = 2};
    CHECK_OK(kld_quantize_file(hf, out, "keep", &qo, NULL, &err), err);
    kld_gguf *a = NULL, *b = NULL;
    CHECK_OK(kld_gguf_open(out, &a, &err), err);
    CHECK_OK(kld_gguf_open(gguf, &b, &err), err);
    if (!a || !b) {
        kld_gguf_close(a);
        kld_gguf_close(b);
        return;
    }
    check_tensors(f, label, a, b);
    if (f->key_prefix) check_keys(label, a, b, f->key_prefix, f->min_keys);
    if (f->keys) f->keys(label, a, b, f->ctx);
    kld_gguf_close(a);
    kld_gguf_close(b);
    if (!ids) return;
    int64_t nv = 0;
    float *x = tf_engine_logits(hf, ids, n_ids, 16, 2, &nv), *y = tf_engine_logits(out, ids, n_ids, 16, 2, &nv);
    CHECK(x && y && memcmp(x, y, sizeof(float) * (size_t)((int64_t)n_ids * nv)) == 0,
          "%s: HF and its converted GGUF give the same logits bit for bit", label);
    free(x);
    free(y);
}

bool gguf_fuse_gate_up_exps(const char *in, const char *out) {
    kld_error err = {0};
    kld_gguf *g = NULL;
    if (kld_gguf_open(in, &g, &err) != KLD_OK) return false;
    kld_gguf_writer *w = gguf_writer_with_keys(g);
    void *bufs[64];
    int nb = 0, n_fused = 0;
    bool ok = true;
    for (uint64_t i = 0; ok && i < g->n_tensors; i++) {
        const kld_tensor *t = &g->tensors[i];
        int il = 0, used = 0;
        const bool in_layer = sscanf(t->name, "blk.%d.%n", &il, &used) == 1 && used;
        if (in_layer && !strcmp(t->name + used, "ffn_up_exps.weight")) continue; /* written with gate */
        if (in_layer && !strcmp(t->name + used, "ffn_gate_exps.weight") && nb < 64) {
            char un[96], name[96];
            snprintf(un, sizeof un, "blk.%d.ffn_up_exps.weight", il);
            const kld_tensor *u = kld_gguf_find_tensor(g, un);
            if (!u || u->type != t->type || u->nbytes != t->nbytes) {
                ok = false;
                break;
            }
            const uint64_t slice = t->nbytes / (uint64_t)t->ne[2];
            uint8_t *f = malloc((size_t)(2 * t->nbytes));
            for (int64_t e = 0; e < t->ne[2]; e++) { /* each expert's gate rows, then its up rows */
                memcpy(f + 2 * (uint64_t)e * slice, (const uint8_t *)t->data + (uint64_t)e * slice, (size_t)slice);
                memcpy(f + (2 * (uint64_t)e + 1) * slice, (const uint8_t *)u->data + (uint64_t)e * slice,
                       (size_t)slice);
            }
            bufs[nb++] = f;
            const int64_t ne[3] = {t->ne[0], 2 * t->ne[1], t->ne[2]};
            snprintf(name, sizeof name, "blk.%d.ffn_gate_up_exps.weight", il);
            ok = kld_gguf_writer_add_tensor(w, name, t->type, 3, ne, f, 2 * t->nbytes, &err) == KLD_OK;
            n_fused++;
            continue;
        }
        ok = kld_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, t->nbytes, &err) == KLD_OK;
    }
    if (ok) ok = n_fused > 0 && kld_gguf_writer_write(w, out, &err) == KLD_OK;
    if (!ok) fprintf(stderr, "gguf_fuse_gate_up_exps: %s (%d fused)\n", err.msg, n_fused);
    for (int i = 0; i < nb; i++) free(bufs[i]);
    kld_gguf_writer_free(w);
    kld_gguf_close(g);
    return ok;
}

void hf_rt_fused_gguf(const char *label, const synth_shape *shape) {
    static const uint32_t types[] = {KLD_TYPE_F32, KLD_TYPE_Q8_0};
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        synth_shape s = *shape;
        s.mat_type = types[k];
        char plain[512], fused[512];
        snprintf(plain, sizeof plain, "%s/fused-exps-%s-%zu.gguf", kt_build_dir(), label, k);
        snprintf(fused, sizeof fused, "%s/fused-exps-%s-%zu-fused.gguf", kt_build_dir(), label, k);
        if (!synth_write_gguf(&s, plain) || !gguf_fuse_gate_up_exps(plain, fused)) {
            CHECK(false, "%s: synthesize the fused-experts GGUF", label);
            continue;
        }
        kld_error err = {0};
        kld_gguf *g = NULL;
        CHECK_OK(kld_gguf_open(fused, &g, &err), err);
        CHECK(g && kld_gguf_find_tensor(g, "blk.0.ffn_gate_up_exps.weight") &&
                  !kld_gguf_find_tensor(g, "blk.0.ffn_gate_exps.weight") &&
                  !kld_gguf_find_tensor(g, "blk.0.ffn_up_exps.weight"),
              "%s: the rewritten GGUF holds ffn_gate_up_exps instead of ffn_gate_exps / ffn_up_exps", label);
        kld_gguf_close(g);
        int32_t ids[40];
        tf_make_ids(ids, 40, s.n_vocab, 20261205);
        int64_t nv = 0, nv2 = 0;
        float *a = tf_engine_logits(plain, ids, 40, 16, 2, &nv), *b = tf_engine_logits(fused, ids, 40, 7, 2, &nv2);
        const bool same = a && b && nv == nv2 && !memcmp(a, b, sizeof(float) * (size_t)(40 * nv));
        printf("%-28s ffn_gate_up_exps GGUF (%s) vs ffn_gate_exps + ffn_up_exps: %s\n", label,
               kld_type_info_get(s.mat_type)->name, same ? "logits bit for bit" : "DIFFERENT");
        CHECK(same, "%s (%s): the fused-experts GGUF's logits equal the unfused one's bit for bit", label,
              kld_type_info_get(s.mat_type)->name);
        free(a);
        free(b);
    }
}

void hf_rt_fused_gguf_refused(const char *arch) {
    synth_shape s;
    synth_default(&s, arch);
    s.n_expert = 4;
    s.n_expert_used = 2;
    s.n_ff_exp = 64;
    s.mat_type = KLD_TYPE_F32;
    char plain[512], fused[512];
    snprintf(plain, sizeof plain, "%s/fused-exps-%s.gguf", kt_build_dir(), arch);
    snprintf(fused, sizeof fused, "%s/fused-exps-%s-fused.gguf", kt_build_dir(), arch);
    if (!synth_write_gguf(&s, plain) || !gguf_fuse_gate_up_exps(plain, fused)) {
        CHECK(false, "%s: synthesize the fused-experts GGUF", arch);
        return;
    }
    kld_error err = {0};
    kld_model *m = NULL;
    const kld_status st = kld_model_open(fused, NULL, &m, &err);
    printf("error %-16s %s\n", arch, err.msg);
    CHECK(st == KLD_ERR_UNSUPPORTED && strstr(err.msg, fused) && strstr(err.msg, "blk.0.ffn_gate_up_exps.weight") &&
              strstr(err.msg, "not supported for"),
          "%s: a GGUF with ffn_gate_up_exps is refused naming the file and the tensor: %s", arch, err.msg);
    kld_model_close(m);
}

/* Bytes of tensor name of st, or NULL. */
static const kld_tensor *st_tensor(const kld_safetensors *st, const char *fmt, int il, int e, const char *kind) {
    char name[160];
    snprintf(name, sizeof name, fmt, il, e, kind);
    return kld_safetensors_find(st, name);
}

/* Copies the checkpoint in to out: the experts fused (fuse), plus an F32 [1, 1] tensor extra (not
 * NULL). */
static bool copy_checkpoint(const char *in, const char *out, bool fuse, const char *extra) {
    char path[700];
    snprintf(path, sizeof path, "%s/model.safetensors", in);
    kld_error err = {0};
    kld_safetensors *st = NULL;
    if (kld_safetensors_open(path, &st, &err) != KLD_OK) {
        fprintf(stderr, "hf_rt_fuse_experts: %s\n", err.msg);
        return false;
    }
    static const char per[] = "model.layers.%d.mlp.experts.%d.%s_proj.weight";
    st_writer w;
    st_init(&w);
    int n_fused = 0;
    for (size_t i = 0; i < st->n_tensors; i++) {
        const kld_tensor *t = &st->tensors[i];
        int il = -1, e = -1, used = 0;
        char kind[8] = "";
        if (fuse && sscanf(t->name, "model.layers.%d.mlp.experts.%d.%7[a-z]_proj.weight%n", &il, &e, kind, &used) == 3 &&
            !t->name[used]) {
            if (e != 0 || strcmp(kind, "gate")) continue; /* the layer's experts: written at expert 0's gate */
            int X = 0;
            while (st_tensor(st, per, il, X, "gate")) X++;
            const kld_tensor *g0 = t, *d0 = st_tensor(st, per, il, 0, "down");
            if (!d0) break;
            const uint64_t gb = g0->nbytes, db = d0->nbytes;
            uint8_t *gu = malloc((size_t)(2 * gb * (uint64_t)X)), *dn = malloc((size_t)(db * (uint64_t)X));
            bool ok = true;
            for (int x = 0; x < X; x++) { /* each expert's gate rows, then its up rows */
                const kld_tensor *g = st_tensor(st, per, il, x, "gate"), *u = st_tensor(st, per, il, x, "up"),
                                 *d = st_tensor(st, per, il, x, "down");
                ok = ok && g && u && d && g->nbytes == gb && u->nbytes == gb && d->nbytes == db;
                if (!ok) break;
                memcpy(gu + 2 * (uint64_t)x * gb, g->data, (size_t)gb);
                memcpy(gu + (2 * (uint64_t)x + 1) * gb, u->data, (size_t)gb);
                memcpy(dn + (uint64_t)x * db, d->data, (size_t)db);
            }
            if (!ok) {
                free(gu), free(dn);
                break;
            }
            char name[160];
            const int64_t dg[3] = {X, 2 * g0->ne[1], g0->ne[0]}, dd[3] = {X, d0->ne[1], d0->ne[0]};
            snprintf(name, sizeof name, "model.layers.%d.mlp.experts.gate_up_proj", il);
            st_put(&w, name, st->tensor_dtype[i], 3, dg, gu, (size_t)(2 * gb * (uint64_t)X));
            snprintf(name, sizeof name, "model.layers.%d.mlp.experts.down_proj", il);
            st_put(&w, name, st->tensor_dtype[i], 3, dd, dn, (size_t)(db * (uint64_t)X));
            n_fused++;
            continue;
        }
        int64_t dims[4] = {0};
        for (int k = 0; k < (int)t->n_dims; k++) dims[k] = t->ne[(int)t->n_dims - 1 - k];
        void *copy = malloc(t->nbytes ? (size_t)t->nbytes : 1);
        memcpy(copy, t->data, (size_t)t->nbytes);
        st_put(&w, t->name, st->tensor_dtype[i], (int)t->n_dims, dims, copy, (size_t)t->nbytes);
    }
    kld_safetensors_close(st);
    if (extra) {
        const int64_t d[2] = {1, 1};
        float *one = malloc(sizeof *one);
        *one = 1.0f;
        st_put_f32(&w, extra, 2, d, one);
    }
    bool ok = (n_fused > 0 || !fuse) && st_write(&w, out);
    snprintf(path, sizeof path, "%s/config.json", in);
    size_t n = 0;
    char *cfg = kt_read_file(path, &n);
    snprintf(path, sizeof path, "%s/config.json", out);
    kt_write_file(path, cfg, n);
    free(cfg);
    if (!ok) fprintf(stderr, "copy_checkpoint: %d layers fused\n", n_fused);
    return ok;
}

bool hf_rt_fuse_experts(const char *in, const char *out) {
    return copy_checkpoint(in, out, true, NULL);
}

void hf_rt_scale_refused(const char *label, const char *hf, const char *tensor, const char *why) {
    char dir[700], out[720], file[760];
    snprintf(dir, sizeof dir, "%s-scale", hf);
    snprintf(out, sizeof out, "%s-scale.gguf", hf);
    snprintf(file, sizeof file, "%s/model.safetensors", dir);
    mkdir(dir, 0755);
    if (!copy_checkpoint(hf, dir, false, tensor)) {
        CHECK(false, "%s: write the checkpoint with %s", label, tensor);
        return;
    }
    kld_error err = {0};
    kld_model *m = NULL;
    kld_status st = kld_model_open(dir, NULL, &m, &err);
    printf("error %-16s %s\n", label, err.msg);
    CHECK(st == KLD_ERR_UNSUPPORTED && strstr(err.msg, file) && strstr(err.msg, tensor) && strstr(err.msg, why) &&
              strstr(err.msg, "does not apply"),
          "%s: a checkpoint with %s is refused naming the file, the tensor and '%s': %s", label, tensor, why, err.msg);
    kld_model_close(m);
    err = (kld_error){0};
    kld_quantize_opts qo = {.n_threads = 2};
    st = kld_quantize_file(dir, out, "keep", &qo, NULL, &err);
    CHECK(st == KLD_ERR_UNSUPPORTED && strstr(err.msg, file) && strstr(err.msg, tensor),
          "%s: quantize refuses it too, naming the file and the tensor: %s", label, err.msg);
}

static bool same_str(const kld_str *x, const kld_str *y) {
    return x->len == y->len && !memcmp(x->ptr, y->ptr, (size_t)x->len);
}

/* x holds y's value: scalars, strings, arrays of numbers (bytes) or strings. */
static bool same_value(const kld_gguf_kv *x, const kld_gguf_kv *y) {
    if (!x || x->value.type != y->value.type) return false;
    const kld_gguf_value *u = &x->value, *v = &y->value;
    if (u->type == KLD_GGUF_STRING) return same_str(&u->v.s, &v->v.s);
    if (u->type == KLD_GGUF_BOOL) return u->v.b == v->v.b;
    if (u->type != KLD_GGUF_ARRAY) return u->v.u == v->v.u; /* the 8 bytes of the number as read */
    if (u->v.arr.elem_type != v->v.arr.elem_type || u->v.arr.n != v->v.arr.n) return false;
    for (uint64_t k = 0; u->v.arr.elem_type == KLD_GGUF_STRING && k < u->v.arr.n; k++)
        if (!same_str(&u->v.arr.strs[k], &v->v.arr.strs[k])) return false;
    if (u->v.arr.elem_type == KLD_GGUF_STRING || u->v.arr.elem_type == KLD_GGUF_ARRAY) return true;
    int64_t i = 0, j = 0;
    double f = 0, g = 0;
    for (uint64_t k = 0; k < u->v.arr.n; k++)
        if (kld_gguf_arr_int(u, k, &i) && kld_gguf_arr_int(v, k, &j) ? i != j
            : !(kld_gguf_arr_float(u, k, &f) && kld_gguf_arr_float(v, k, &g) && f == g))
            return false;
    return true;
}

/* Every tensor of b in a with the same bytes, every key of b in a with the same value, and no more. */
static void same_files(const char *label, const char *pa, const char *pb) {
    kld_error err = {0};
    kld_gguf *a = NULL, *b = NULL;
    CHECK_OK(kld_gguf_open(pa, &a, &err), err);
    CHECK_OK(kld_gguf_open(pb, &b, &err), err);
    if (a && b) {
        uint64_t same = 0;
        for (uint64_t j = 0; j < b->n_tensors; j++) same += hf_rt_same_tensor(a, &b->tensors[j]);
        int keys = 0;
        for (uint64_t i = 0; i < b->n_kv; i++) {
            char key[160];
            snprintf(key, sizeof key, "%.*s", (int)b->kv[i].key.len, b->kv[i].key.ptr);
            const bool ok = same_value(kld_gguf_find(a, key), &b->kv[i]);
            if (!ok) printf("%s: key %s differs\n", label, key);
            keys += ok;
        }
        printf("%-28s converted fused vs per-expert checkpoint: %" PRIu64 " of %" PRIu64 " tensors, %d of %" PRIu64
               " keys\n", label, same, b->n_tensors, keys, b->n_kv);
        CHECK(same == b->n_tensors && a->n_tensors == b->n_tensors && keys == (int)b->n_kv && a->n_kv == b->n_kv,
              "%s: the fused checkpoint converts to the per-expert one's tensors (%" PRIu64 " of %" PRIu64
              ") and keys (%d of %" PRIu64 ")", label, same, b->n_tensors, keys, b->n_kv);
    }
    kld_gguf_close(a);
    kld_gguf_close(b);
}

void hf_rt_fused_hf(const char *label, const char *hf, const int32_t *ids, int n_ids) {
    /* under the same folder name (general.name is the converter's, from the folder's) */
    char fused[1400], parent[700], out_a[720], out_b[720];
    const char *base = strrchr(hf, '/');
    snprintf(parent, sizeof parent, "%s-fused-experts", hf);
    snprintf(fused, sizeof fused, "%s/%s", parent, base ? base + 1 : hf);
    snprintf(out_a, sizeof out_a, "%s-fused-experts.gguf", hf);
    snprintf(out_b, sizeof out_b, "%s-per-expert.gguf", hf);
    mkdir(parent, 0755);
    mkdir(fused, 0755);
    if (!hf_rt_fuse_experts(hf, fused)) {
        CHECK(false, "%s: write the fused-experts checkpoint", label);
        return;
    }
    int64_t nv = 0, nv2 = 0;
    float *x = tf_engine_logits(hf, ids, n_ids, 16, 2, &nv), *y = tf_engine_logits(fused, ids, n_ids, 7, 2, &nv2);
    const bool same = x && y && nv == nv2 && !memcmp(x, y, sizeof(float) * (size_t)((int64_t)n_ids * nv));
    printf("%-28s transformers 5 fused experts vs one tensor per expert: %s\n", label,
           same ? "logits bit for bit" : "DIFFERENT");
    CHECK(same, "%s: the fused-experts checkpoint's logits equal the per-expert one's bit for bit", label);
    free(x);
    free(y);
    kld_error err = {0};
    kld_quantize_opts qo = {.n_threads = 2};
    CHECK_OK(kld_quantize_file(fused, out_a, "keep", &qo, NULL, &err), err);
    CHECK_OK(kld_quantize_file(hf, out_b, "keep", &qo, NULL, &err), err);
    same_files(label, out_a, out_b);
}
