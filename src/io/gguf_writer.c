/* gguf_writer.c — writes GGUF v3: header, metadata, tensor infos, then the
 * data section with every tensor at an aligned offset. */
#include "io/gguf_writer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#define WRITER_ALIGNMENT 32

typedef struct wkv {
    char *key;
    kld_gguf_vtype type;
    kld_gguf_vtype elem_type; /* arrays */
    uint64_t n;               /* array length */
    uint8_t *bytes;           /* serialized value (after the type field) */
    uint64_t nbytes;
} wkv;

typedef struct wtensor {
    char *name;
    uint32_t type;
    int n_dims;
    int64_t ne[KLD_MAX_DIMS];
    const void *data;
    uint64_t nbytes;
} wtensor;

struct kld_gguf_writer {
    wkv *kv;
    size_t n_kv, cap_kv;
    wtensor *t;
    size_t n_t, cap_t;
};

kld_gguf_writer *kld_gguf_writer_create(void) { return calloc(1, sizeof(kld_gguf_writer)); }

void kld_gguf_writer_free(kld_gguf_writer *w) {
    if (!w) return;
    for (size_t i = 0; i < w->n_kv; i++) {
        free(w->kv[i].key);
        free(w->kv[i].bytes);
    }
    for (size_t i = 0; i < w->n_t; i++) free(w->t[i].name);
    free(w->kv);
    free(w->t);
    free(w);
}

/* Finds or appends the entry for key, releasing an older value. */
static wkv *slot(kld_gguf_writer *w, const char *key) {
    for (size_t i = 0; i < w->n_kv; i++)
        if (!strcmp(w->kv[i].key, key)) {
            free(w->kv[i].bytes);
            w->kv[i].bytes = NULL;
            return &w->kv[i];
        }
    if (w->n_kv == w->cap_kv) {
        size_t cap = w->cap_kv ? 2 * w->cap_kv : 32;
        wkv *p = realloc(w->kv, cap * sizeof *p);
        if (!p) return NULL;
        w->kv = p;
        w->cap_kv = cap;
    }
    wkv *e = &w->kv[w->n_kv];
    memset(e, 0, sizeof *e);
    e->key = kld_strdup(key);
    if (!e->key) return NULL;
    w->n_kv++;
    return e;
}

static kld_status set_raw(kld_gguf_writer *w, const char *key, kld_gguf_vtype type,
                          const void *bytes, uint64_t nbytes) {
    wkv *e = slot(w, key);
    if (!e) return KLD_ERR_NOMEM;
    e->type = type;
    e->bytes = malloc(nbytes ? nbytes : 1);
    if (!e->bytes) return KLD_ERR_NOMEM;
    memcpy(e->bytes, bytes, nbytes);
    e->nbytes = nbytes;
    return KLD_OK;
}

kld_status kld_gguf_writer_set_u32(kld_gguf_writer *w, const char *key, uint32_t v) {
    return set_raw(w, key, KLD_GGUF_UINT32, &v, 4);
}
kld_status kld_gguf_writer_set_i32(kld_gguf_writer *w, const char *key, int32_t v) {
    return set_raw(w, key, KLD_GGUF_INT32, &v, 4);
}
kld_status kld_gguf_writer_set_u64(kld_gguf_writer *w, const char *key, uint64_t v) {
    return set_raw(w, key, KLD_GGUF_UINT64, &v, 8);
}
kld_status kld_gguf_writer_set_f32(kld_gguf_writer *w, const char *key, float v) {
    return set_raw(w, key, KLD_GGUF_FLOAT32, &v, 4);
}
kld_status kld_gguf_writer_set_bool(kld_gguf_writer *w, const char *key, bool v) {
    uint8_t b = v ? 1 : 0;
    return set_raw(w, key, KLD_GGUF_BOOL, &b, 1);
}

kld_status kld_gguf_writer_set_str(kld_gguf_writer *w, const char *key, const char *value) {
    uint64_t len = strlen(value);
    uint8_t *buf = malloc(8 + len);
    if (!buf) return KLD_ERR_NOMEM;
    memcpy(buf, &len, 8);
    memcpy(buf + 8, value, len);
    kld_status st = set_raw(w, key, KLD_GGUF_STRING, buf, 8 + len);
    free(buf);
    return st;
}

/* Array payload: uint32 element type, uint64 count, elements. */
static kld_status set_arr(kld_gguf_writer *w, const char *key, kld_gguf_vtype et,
                          const void *elems, uint64_t n, uint64_t elems_bytes) {
    uint8_t *buf = malloc(12 + elems_bytes);
    if (!buf) return KLD_ERR_NOMEM;
    uint32_t t = et;
    memcpy(buf, &t, 4);
    memcpy(buf + 4, &n, 8);
    if (elems_bytes) memcpy(buf + 12, elems, elems_bytes);
    kld_status st = set_raw(w, key, KLD_GGUF_ARRAY, buf, 12 + elems_bytes);
    free(buf);
    return st;
}

kld_status kld_gguf_writer_set_arr_f32(kld_gguf_writer *w, const char *key, const float *v,
                                       uint64_t n) {
    return set_arr(w, key, KLD_GGUF_FLOAT32, v, n, 4 * n);
}
kld_status kld_gguf_writer_set_arr_i32(kld_gguf_writer *w, const char *key, const int32_t *v,
                                       uint64_t n) {
    return set_arr(w, key, KLD_GGUF_INT32, v, n, 4 * n);
}

kld_status kld_gguf_writer_set_arr_str(kld_gguf_writer *w, const char *key,
                                       const char *const *values, uint64_t n) {
    uint64_t total = 0;
    for (uint64_t i = 0; i < n; i++) total += 8 + strlen(values[i]);
    uint8_t *buf = malloc(total ? total : 1);
    if (!buf) return KLD_ERR_NOMEM;
    uint64_t pos = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t len = strlen(values[i]);
        memcpy(buf + pos, &len, 8);
        memcpy(buf + pos + 8, values[i], len);
        pos += 8 + len;
    }
    kld_status st = set_arr(w, key, KLD_GGUF_STRING, buf, n, total);
    free(buf);
    return st;
}

/* A growable byte buffer for serializing copied values. */
typedef struct bbuf {
    uint8_t *p;
    uint64_t n, cap;
    bool oom;
} bbuf;

static void bput(bbuf *b, const void *src, uint64_t n) {
    if (b->oom || n == 0) return;
    if (b->n + n > b->cap) {
        uint64_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n) cap *= 2;
        uint8_t *np = realloc(b->p, (size_t)cap);
        if (!np) {
            b->oom = true;
            return;
        }
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->n, src, (size_t)n);
    b->n += n;
}

static uint64_t scalar_size(kld_gguf_vtype t) {
    switch (t) {
    case KLD_GGUF_UINT8: case KLD_GGUF_INT8: case KLD_GGUF_BOOL: return 1;
    case KLD_GGUF_UINT16: case KLD_GGUF_INT16: return 2;
    case KLD_GGUF_UINT32: case KLD_GGUF_INT32: case KLD_GGUF_FLOAT32: return 4;
    case KLD_GGUF_UINT64: case KLD_GGUF_INT64: case KLD_GGUF_FLOAT64: return 8;
    default: return 0;
    }
}

/* The value's bytes as they follow its type field in a GGUF file. */
static void serialize(bbuf *b, const kld_gguf_value *v) {
    uint8_t tmp[8];
    switch (v->type) {
    case KLD_GGUF_STRING:
        bput(b, &v->v.s.len, 8);
        bput(b, v->v.s.ptr, v->v.s.len);
        return;
    case KLD_GGUF_ARRAY: {
        uint32_t et = v->v.arr.elem_type;
        uint64_t n = v->v.arr.n, es = scalar_size(v->v.arr.elem_type);
        bput(b, &et, 4);
        bput(b, &n, 8);
        if (es) bput(b, v->v.arr.raw, n * es);
        else if (v->v.arr.elem_type == KLD_GGUF_STRING)
            for (uint64_t i = 0; i < n; i++) {
                bput(b, &v->v.arr.strs[i].len, 8);
                bput(b, v->v.arr.strs[i].ptr, v->v.arr.strs[i].len);
            }
        else
            for (uint64_t i = 0; i < n; i++) serialize(b, &v->v.arr.items[i]);
        return;
    }
    case KLD_GGUF_FLOAT32: {
        float f = (float)v->v.f;
        bput(b, &f, 4);
        return;
    }
    case KLD_GGUF_FLOAT64: bput(b, &v->v.f, 8); return;
    case KLD_GGUF_BOOL: tmp[0] = v->v.b ? 1 : 0; bput(b, tmp, 1); return;
    case KLD_GGUF_INT8: case KLD_GGUF_INT16: case KLD_GGUF_INT32: case KLD_GGUF_INT64:
        memcpy(tmp, &v->v.i, 8); /* little-endian: the low bytes come first */
        bput(b, tmp, scalar_size(v->type));
        return;
    default:
        memcpy(tmp, &v->v.u, 8);
        bput(b, tmp, scalar_size(v->type));
        return;
    }
}

kld_status kld_gguf_writer_copy_value(kld_gguf_writer *w, const char *key,
                                      const kld_gguf_value *v) {
    bbuf b = {0};
    serialize(&b, v);
    kld_status st = b.oom ? KLD_ERR_NOMEM : set_raw(w, key, v->type, b.p ? b.p : (uint8_t *)"", b.n);
    free(b.p);
    return st;
}

kld_status kld_gguf_writer_add_tensor(kld_gguf_writer *w, const char *name, uint32_t type,
                                      int n_dims, const int64_t *ne, const void *data,
                                      uint64_t nbytes, kld_error *err) {
    if (n_dims < 1 || n_dims > KLD_MAX_DIMS)
        return kld_fail(err, KLD_ERR_ARG, "tensor '%s': n_dims %d", name, n_dims);
    uint64_t expect;
    kld_status st = kld_type_tensor_bytes(type, n_dims, ne, &expect, name, err);
    if (st) return st;
    if (expect != nbytes)
        return kld_fail(err, KLD_ERR_ARG, "tensor '%s': %llu bytes given, shape needs %llu", name,
                        (unsigned long long)nbytes, (unsigned long long)expect);
    if (w->n_t == w->cap_t) {
        size_t cap = w->cap_t ? 2 * w->cap_t : 64;
        wtensor *p = realloc(w->t, cap * sizeof *p);
        if (!p) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
        w->t = p;
        w->cap_t = cap;
    }
    wtensor *t = &w->t[w->n_t];
    memset(t, 0, sizeof *t);
    t->name = kld_strdup(name);
    if (!t->name) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    t->type = type;
    t->n_dims = n_dims;
    for (int d = 0; d < KLD_MAX_DIMS; d++) t->ne[d] = d < n_dims ? ne[d] : 1;
    t->data = data;
    t->nbytes = nbytes;
    w->n_t++;
    return KLD_OK;
}

static uint64_t align_up(uint64_t x) { return (x + WRITER_ALIGNMENT - 1) / WRITER_ALIGNMENT * WRITER_ALIGNMENT; }

static bool put(FILE *f, const void *p, size_t n) { return n == 0 || fwrite(p, 1, n, f) == n; }

static bool pad_to(FILE *f, uint64_t *pos, uint64_t target) {
    static const uint8_t zeros[WRITER_ALIGNMENT];
    while (*pos < target) {
        uint64_t n = target - *pos < WRITER_ALIGNMENT ? target - *pos : WRITER_ALIGNMENT;
        if (!put(f, zeros, (size_t)n)) return false;
        *pos += n;
    }
    return true;
}

kld_status kld_gguf_writer_write(const kld_gguf_writer *w, const char *path, kld_error *err) {
    FILE *f = fopen(path, "wb");
    if (!f) return kld_fail(err, KLD_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    bool ok = true;
    uint64_t pos = 0;
    uint32_t version = 3;
    uint64_t n_t = w->n_t, n_kv = w->n_kv;
    ok = ok && put(f, "GGUF", 4) && put(f, &version, 4) && put(f, &n_t, 8) && put(f, &n_kv, 8);
    pos += 24;
    for (size_t i = 0; ok && i < w->n_kv; i++) {
        const wkv *e = &w->kv[i];
        uint64_t klen = strlen(e->key);
        uint32_t type = e->type;
        ok = put(f, &klen, 8) && put(f, e->key, (size_t)klen) && put(f, &type, 4) &&
             put(f, e->bytes, (size_t)e->nbytes);
        pos += 12 + klen + e->nbytes;
    }
    uint64_t offset = 0;
    for (size_t i = 0; ok && i < w->n_t; i++) {
        const wtensor *t = &w->t[i];
        uint64_t nlen = strlen(t->name);
        uint32_t nd = (uint32_t)t->n_dims;
        ok = put(f, &nlen, 8) && put(f, t->name, (size_t)nlen) && put(f, &nd, 4);
        for (int d = 0; ok && d < t->n_dims; d++) {
            uint64_t ne = (uint64_t)t->ne[d];
            ok = put(f, &ne, 8);
        }
        ok = ok && put(f, &t->type, 4) && put(f, &offset, 8);
        pos += 8 + nlen + 4 + 8 * (uint64_t)t->n_dims + 12;
        offset = align_up(offset + t->nbytes);
    }
    if (ok && w->n_t > 0) {
        uint64_t data_start = align_up(pos);
        ok = pad_to(f, &pos, data_start);
        for (size_t i = 0; ok && i < w->n_t; i++) {
            ok = put(f, w->t[i].data, (size_t)w->t[i].nbytes);
            pos += w->t[i].nbytes;
            /* the last tensor is padded too, as ggml's writer does */
            ok = ok && pad_to(f, &pos, data_start + align_up(pos - data_start));
        }
    }
    if (fclose(f) != 0) ok = false;
    if (!ok) {
        int e = errno;
        remove(path); /* never leave a truncated model behind */
        return kld_fail(err, KLD_ERR_IO, "%s: write failed: %s", path, strerror(e));
    }
    return KLD_OK;
}
