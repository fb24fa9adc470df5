/* gguf.c — GGUF v2/v3 reader (little-endian). Parses the header, every
 * metadata key/value (nested arrays included), the tensor infos and the
 * aligned data section, validating each field against the file's size
 * before it is used. Strings and tensor data stay views into the buffer. */
#include "io/gguf.h"

#include <stdio.h>
#include <stdlib.h>

#define GGUF_MAGIC "GGUF"
#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_ARRAY_DEPTH 8   /* nested arrays deeper than this are refused */
#define GGUF_MAX_NAME 4096       /* tensor names and keys longer than this are refused */

typedef struct reader {
    const uint8_t *buf;
    uint64_t size;
    uint64_t pos;
    const char *name; /* file name for messages */
    kld_error *err;
} reader;

static const char *vtype_names[KLD_GGUF_VTYPE_COUNT] = {
    "uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
    "bool",  "string", "array", "uint64", "int64", "float64"};

const char *kld_gguf_vtype_name(kld_gguf_vtype t) {
    return (unsigned)t < KLD_GGUF_VTYPE_COUNT ? vtype_names[t] : "unknown";
}

/* Bytes of one element of a fixed-size type; 0 for string/array. */
static uint64_t vtype_size(kld_gguf_vtype t) {
    switch (t) {
    case KLD_GGUF_UINT8: case KLD_GGUF_INT8: case KLD_GGUF_BOOL: return 1;
    case KLD_GGUF_UINT16: case KLD_GGUF_INT16: return 2;
    case KLD_GGUF_UINT32: case KLD_GGUF_INT32: case KLD_GGUF_FLOAT32: return 4;
    case KLD_GGUF_UINT64: case KLD_GGUF_INT64: case KLD_GGUF_FLOAT64: return 8;
    default: return 0;
    }
}

static kld_status need(reader *r, uint64_t n, const char *what) {
    if (r->size - r->pos < n)
        return kld_fail(r->err, KLD_ERR_FORMAT,
                        "%s: truncated: %s needs %llu bytes at offset %llu but the file has %llu",
                        r->name, what, (unsigned long long)n, (unsigned long long)r->pos,
                        (unsigned long long)r->size);
    return KLD_OK;
}

static kld_status read_u32(reader *r, uint32_t *v, const char *what) {
    kld_status st = need(r, 4, what);
    if (st) return st;
    *v = kld_load_u32(r->buf + r->pos);
    r->pos += 4;
    return KLD_OK;
}

static kld_status read_u64(reader *r, uint64_t *v, const char *what) {
    kld_status st = need(r, 8, what);
    if (st) return st;
    *v = kld_load_u64(r->buf + r->pos);
    r->pos += 8;
    return KLD_OK;
}

/* A GGUF string: uint64 length, then bytes. `utf8` requires valid UTF-8. */
static kld_status read_str(reader *r, kld_str *s, const char *what, bool utf8) {
    uint64_t len;
    kld_status st = read_u64(r, &len, what);
    if (st) return st;
    if ((st = need(r, len, what))) return st;
    s->ptr = (const char *)r->buf + r->pos;
    s->len = len;
    if (utf8 && !kld_utf8_valid(s->ptr, len))
        return kld_fail(r->err, KLD_ERR_FORMAT, "%s: %s at offset %llu is not valid UTF-8",
                        r->name, what, (unsigned long long)(r->pos - 8));
    r->pos += len;
    return KLD_OK;
}

static void free_value(kld_gguf_value *v) {
    if (v->type != KLD_GGUF_ARRAY) return;
    free(v->v.arr.strs);
    if (v->v.arr.items) {
        for (uint64_t i = 0; i < v->v.arr.n; i++) free_value(&v->v.arr.items[i]);
        free(v->v.arr.items);
    }
}

static kld_status read_value(reader *r, kld_gguf_vtype type, kld_gguf_value *v, int depth,
                             const char *key);

static kld_status read_array(reader *r, kld_gguf_value *v, int depth, const char *key) {
    if (depth >= GGUF_MAX_ARRAY_DEPTH)
        return kld_fail(r->err, KLD_ERR_FORMAT, "%s: key '%s': arrays nested deeper than %d",
                        r->name, key, GGUF_MAX_ARRAY_DEPTH);
    uint32_t et;
    uint64_t n;
    kld_status st = read_u32(r, &et, "array element type");
    if (st) return st;
    if (et >= KLD_GGUF_VTYPE_COUNT)
        return kld_fail(r->err, KLD_ERR_FORMAT, "%s: key '%s': unknown array element type %u",
                        r->name, key, et);
    if ((st = read_u64(r, &n, "array length"))) return st;
    v->v.arr.elem_type = (kld_gguf_vtype)et;
    uint64_t esize = vtype_size((kld_gguf_vtype)et);
    /* Every element takes at least 1 byte (strings and arrays at least 8),
     * so a count the remaining bytes cannot hold is refused before any
     * allocation sized by it. */
    uint64_t min_bytes, remaining = r->size - r->pos;
    if (!kld_mul_u64(n, esize ? esize : 8, &min_bytes) || min_bytes > remaining)
        return kld_fail(r->err, KLD_ERR_FORMAT,
                        "%s: key '%s': array of %llu %s elements does not fit in the %llu bytes "
                        "left in the file",
                        r->name, key, (unsigned long long)n, kld_gguf_vtype_name(et),
                        (unsigned long long)remaining);
    v->v.arr.n = n;
    if (esize) {
        v->v.arr.raw = r->buf + r->pos;
        if (et == KLD_GGUF_BOOL)
            for (uint64_t i = 0; i < n; i++)
                if (r->buf[r->pos + i] > 1)
                    return kld_fail(r->err, KLD_ERR_FORMAT,
                                    "%s: key '%s': bool element %llu has value %u", r->name, key,
                                    (unsigned long long)i, r->buf[r->pos + i]);
        r->pos += min_bytes;
        return KLD_OK;
    }
    if (n == 0) return KLD_OK;
    if (et == KLD_GGUF_STRING) {
        v->v.arr.strs = malloc(n * sizeof *v->v.arr.strs);
        if (!v->v.arr.strs) return kld_fail(r->err, KLD_ERR_NOMEM, "%s: out of memory", r->name);
        for (uint64_t i = 0; i < n; i++)
            if ((st = read_str(r, &v->v.arr.strs[i], "array string", false))) {
                kld_error_prefix(r->err, "key '%s' element %llu", key, (unsigned long long)i);
                return st;
            }
        return KLD_OK;
    }
    v->v.arr.items = calloc(n, sizeof *v->v.arr.items);
    if (!v->v.arr.items) return kld_fail(r->err, KLD_ERR_NOMEM, "%s: out of memory", r->name);
    for (uint64_t i = 0; i < n; i++)
        if ((st = read_value(r, KLD_GGUF_ARRAY, &v->v.arr.items[i], depth + 1, key))) return st;
    return KLD_OK;
}

static kld_status read_value(reader *r, kld_gguf_vtype type, kld_gguf_value *v, int depth,
                             const char *key) {
    v->type = type;
    uint64_t sz = vtype_size(type);
    if (type == KLD_GGUF_STRING) return read_str(r, &v->v.s, "string value", false);
    if (type == KLD_GGUF_ARRAY) return read_array(r, v, depth, key);
    kld_status st = need(r, sz, "value");
    if (st) return st;
    const uint8_t *p = r->buf + r->pos;
    switch (type) {
    case KLD_GGUF_UINT8: v->v.u = p[0]; break;
    case KLD_GGUF_INT8: v->v.i = (int8_t)p[0]; break;
    case KLD_GGUF_UINT16: v->v.u = kld_load_u16(p); break;
    case KLD_GGUF_INT16: v->v.i = (int16_t)kld_load_u16(p); break;
    case KLD_GGUF_UINT32: v->v.u = kld_load_u32(p); break;
    case KLD_GGUF_INT32: v->v.i = (int32_t)kld_load_u32(p); break;
    case KLD_GGUF_UINT64: v->v.u = kld_load_u64(p); break;
    case KLD_GGUF_INT64: v->v.i = (int64_t)kld_load_u64(p); break;
    case KLD_GGUF_FLOAT32: v->v.f = kld_load_f32(p); break;
    case KLD_GGUF_FLOAT64: v->v.f = kld_load_f64(p); break;
    case KLD_GGUF_BOOL:
        if (p[0] > 1)
            return kld_fail(r->err, KLD_ERR_FORMAT, "%s: key '%s': bool has value %u", r->name,
                            key, p[0]);
        v->v.b = p[0] != 0;
        break;
    default:
        return kld_fail(r->err, KLD_ERR_FORMAT, "%s: key '%s': unknown value type %u", r->name,
                        key, (unsigned)type);
    }
    r->pos += sz;
    return KLD_OK;
}

bool kld_str_eq(kld_str s, const char *c) {
    size_t n = strlen(c);
    return s.len == n && memcmp(s.ptr, c, n) == 0;
}

static bool str_eq_str(kld_str a, kld_str b) {
    return a.len == b.len && memcmp(a.ptr, b.ptr, a.len) == 0;
}

/* Printable copy of a key for messages (truncated, NUL-terminated). */
static const char *key_text(kld_str s, char *buf, size_t n) {
    size_t len = s.len < n - 1 ? (size_t)s.len : n - 1;
    memcpy(buf, s.ptr, len);
    buf[len] = '\0';
    return buf;
}

/* FNV-1a over a key, for the duplicate check. */
static uint64_t hash_str(kld_str s) {
    uint64_t h = 1469598103934665603ull;
    for (uint64_t i = 0; i < s.len; i++) h = (h ^ (uint8_t)s.ptr[i]) * 1099511628211ull;
    return h;
}

/* Returns the index of a duplicate among strs[0..n) or -1 (open addressing). */
static kld_status find_duplicate(const kld_str *const *strs, uint64_t n, int64_t *dup,
                                 kld_error *err, const char *name) {
    *dup = -1;
    if (n < 2) return KLD_OK;
    uint64_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    int64_t *slots = malloc(cap * sizeof *slots);
    if (!slots) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", name);
    for (uint64_t i = 0; i < cap; i++) slots[i] = -1;
    for (uint64_t i = 0; i < n && *dup < 0; i++) {
        uint64_t h = hash_str(*strs[i]) & (cap - 1);
        while (slots[h] >= 0) {
            if (str_eq_str(*strs[slots[h]], *strs[i])) {
                *dup = (int64_t)i;
                break;
            }
            h = (h + 1) & (cap - 1);
        }
        if (*dup < 0) slots[h] = (int64_t)i;
    }
    free(slots);
    return KLD_OK;
}

static kld_status read_kvs(reader *r, kld_gguf *g) {
    char kb[128];
    kld_status st;
    for (uint64_t i = 0; i < g->n_kv; i++) {
        kld_gguf_kv *kv = &g->kv[i];
        if ((st = read_str(r, &kv->key, "metadata key", true))) {
            kld_error_prefix(r->err, "metadata entry %llu", (unsigned long long)i);
            return st;
        }
        if (kv->key.len == 0 || kv->key.len > GGUF_MAX_NAME)
            return kld_fail(r->err, KLD_ERR_FORMAT, "%s: metadata entry %llu: key length %llu",
                            r->name, (unsigned long long)i, (unsigned long long)kv->key.len);
        key_text(kv->key, kb, sizeof kb);
        uint32_t type;
        if ((st = read_u32(r, &type, "value type"))) return st;
        if (type >= KLD_GGUF_VTYPE_COUNT)
            return kld_fail(r->err, KLD_ERR_FORMAT, "%s: key '%s': unknown value type %u",
                            r->name, kb, type);
        if ((st = read_value(r, (kld_gguf_vtype)type, &kv->value, 0, kb))) return st;
    }
    const kld_str **keys = malloc((g->n_kv ? g->n_kv : 1) * sizeof *keys);
    if (!keys) return kld_fail(r->err, KLD_ERR_NOMEM, "%s: out of memory", r->name);
    for (uint64_t i = 0; i < g->n_kv; i++) keys[i] = &g->kv[i].key;
    int64_t dup;
    st = find_duplicate(keys, g->n_kv, &dup, r->err, r->name);
    free(keys);
    if (st) return st;
    if (dup >= 0)
        return kld_fail(r->err, KLD_ERR_FORMAT, "%s: duplicate metadata key '%s'", r->name,
                        key_text(g->kv[dup].key, kb, sizeof kb));
    return KLD_OK;
}

static kld_status read_alignment(reader *r, kld_gguf *g) {
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    const kld_gguf_kv *kv = kld_gguf_find(g, "general.alignment");
    if (!kv) return KLD_OK;
    if (kv->value.type != KLD_GGUF_UINT32)
        return kld_fail(r->err, KLD_ERR_FORMAT, "%s: general.alignment has type %s, expected uint32",
                        r->name, kld_gguf_vtype_name(kv->value.type));
    uint64_t a = kv->value.v.u;
    if (a == 0 || (a & (a - 1)) != 0)
        return kld_fail(r->err, KLD_ERR_FORMAT,
                        "%s: general.alignment is %llu, expected a power of two", r->name,
                        (unsigned long long)a);
    g->alignment = a;
    return KLD_OK;
}

static kld_status read_tensor_infos(reader *r, kld_gguf *g, uint64_t *offsets) {
    kld_status st;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        kld_tensor *t = &g->tensors[i];
        kld_str name;
        if ((st = read_str(r, &name, "tensor name", true))) {
            kld_error_prefix(r->err, "tensor info %llu", (unsigned long long)i);
            return st;
        }
        if (name.len == 0 || name.len > GGUF_MAX_NAME)
            return kld_fail(r->err, KLD_ERR_FORMAT, "%s: tensor info %llu: name length %llu",
                            r->name, (unsigned long long)i, (unsigned long long)name.len);
        if (memchr(name.ptr, '\0', name.len))
            return kld_fail(r->err, KLD_ERR_FORMAT, "%s: tensor info %llu: name contains NUL",
                            r->name, (unsigned long long)i);
        t->name = kld_strndup(name.ptr, name.len);
        if (!t->name) return kld_fail(r->err, KLD_ERR_NOMEM, "%s: out of memory", r->name);
        uint32_t n_dims;
        if ((st = read_u32(r, &n_dims, "tensor n_dims"))) goto fail_named;
        if (n_dims < 1 || n_dims > KLD_MAX_DIMS)
            return kld_fail(r->err, KLD_ERR_FORMAT, "%s: tensor '%s': n_dims is %u (1..%d allowed)",
                            r->name, t->name, n_dims, KLD_MAX_DIMS);
        t->n_dims = (int)n_dims;
        for (int d = 0; d < KLD_MAX_DIMS; d++) t->ne[d] = 1;
        for (uint32_t d = 0; d < n_dims; d++) {
            uint64_t ne;
            if ((st = read_u64(r, &ne, "tensor dimension"))) goto fail_named;
            if (ne > (uint64_t)INT64_MAX)
                return kld_fail(r->err, KLD_ERR_FORMAT, "%s: tensor '%s': dimension %u is %llu",
                                r->name, t->name, d, (unsigned long long)ne);
            t->ne[d] = (int64_t)ne;
        }
        /* The element count must fit in int64 even when a zero dimension
         * makes the byte size 0 (kld_tensor_nelements multiplies them all). */
        uint64_t count = 1;
        for (int d = 0; d < KLD_MAX_DIMS; d++)
            if (t->ne[d] != 0 && (!kld_mul_u64(count, (uint64_t)t->ne[d], &count) || count > (uint64_t)INT64_MAX))
                return kld_fail(r->err, KLD_ERR_FORMAT,
                                "%s: tensor '%s': shape [%lld, %lld, %lld, %lld] has more than 2^63 "
                                "elements",
                                r->name, t->name, (long long)t->ne[0], (long long)t->ne[1],
                                (long long)t->ne[2], (long long)t->ne[3]);
        if ((st = read_u32(r, &t->type, "tensor type"))) goto fail_named;
        if ((st = read_u64(r, &offsets[i], "tensor offset"))) goto fail_named;
        char what[GGUF_MAX_NAME + 64];
        snprintf(what, sizeof what, "%s: tensor '%s'", r->name, t->name);
        if ((st = kld_type_tensor_bytes(t->type, t->n_dims, t->ne, &t->nbytes, what, r->err)))
            return st;
        continue;
    fail_named:
        kld_error_prefix(r->err, "tensor '%s'", t->name);
        return st;
    }
    const kld_str **names = malloc((g->n_tensors ? g->n_tensors : 1) * sizeof *names);
    kld_str *views = malloc((g->n_tensors ? g->n_tensors : 1) * sizeof *views);
    if (!names || !views) {
        free(names);
        free(views);
        return kld_fail(r->err, KLD_ERR_NOMEM, "%s: out of memory", r->name);
    }
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        views[i].ptr = g->tensors[i].name;
        views[i].len = strlen(g->tensors[i].name);
        names[i] = &views[i];
    }
    int64_t dup;
    st = find_duplicate(names, g->n_tensors, &dup, r->err, r->name);
    free(names);
    free(views);
    if (st) return st;
    if (dup >= 0)
        return kld_fail(r->err, KLD_ERR_FORMAT, "%s: duplicate tensor name '%s'", r->name,
                        g->tensors[dup].name);
    return KLD_OK;
}

/* Two tensors may not share bytes: sort by offset, compare neighbours. */
static kld_status check_overlaps(reader *r, kld_gguf *g, const uint64_t *offsets) {
    uint64_t n = g->n_tensors;
    uint64_t *order = malloc(n * sizeof *order);
    if (!order) return kld_fail(r->err, KLD_ERR_NOMEM, "%s: out of memory", r->name);
    for (uint64_t i = 0; i < n; i++) order[i] = i;
    /* bottom-up merge sort of the indices by offset (stable, no globals) */
    uint64_t *tmp = malloc(n * sizeof *tmp);
    if (!tmp) {
        free(order);
        return kld_fail(r->err, KLD_ERR_NOMEM, "%s: out of memory", r->name);
    }
    for (uint64_t width = 1; width < n; width *= 2) {
        for (uint64_t lo = 0; lo < n; lo += 2 * width) {
            uint64_t mid = lo + width < n ? lo + width : n, hi = lo + 2 * width < n ? lo + 2 * width : n;
            uint64_t a = lo, b = mid, k = lo;
            while (a < mid && b < hi) tmp[k++] = offsets[order[a]] <= offsets[order[b]] ? order[a++] : order[b++];
            while (a < mid) tmp[k++] = order[a++];
            while (b < hi) tmp[k++] = order[b++];
        }
        memcpy(order, tmp, n * sizeof *order);
    }
    free(tmp);
    kld_status st = KLD_OK;
    for (uint64_t k = 1; k < n && !st; k++) {
        const kld_tensor *p = &g->tensors[order[k - 1]], *t = &g->tensors[order[k]];
        if (offsets[order[k - 1]] + p->nbytes > offsets[order[k]] && t->nbytes > 0 && p->nbytes > 0)
            st = kld_fail(r->err, KLD_ERR_FORMAT,
                          "%s: tensors '%s' (data offset %llu, %llu bytes) and '%s' (offset %llu) "
                          "overlap",
                          r->name, p->name, (unsigned long long)offsets[order[k - 1]],
                          (unsigned long long)p->nbytes, t->name, (unsigned long long)offsets[order[k]]);
    }
    free(order);
    return st;
}

static kld_status place_tensors(reader *r, kld_gguf *g, const uint64_t *offsets) {
    uint64_t pad = (g->alignment - r->pos % g->alignment) % g->alignment;
    g->data_offset = r->pos + pad;
    if (g->n_tensors == 0) return KLD_OK;
    if (g->data_offset > r->size)
        return kld_fail(r->err, KLD_ERR_FORMAT,
                        "%s: truncated: the data section would start at offset %llu but the file "
                        "has %llu bytes",
                        r->name, (unsigned long long)g->data_offset, (unsigned long long)r->size);
    uint64_t data_size = r->size - g->data_offset;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        kld_tensor *t = &g->tensors[i];
        uint64_t end;
        if (offsets[i] % g->alignment != 0)
            return kld_fail(r->err, KLD_ERR_FORMAT,
                            "%s: tensor '%s': data offset %llu is not a multiple of the alignment "
                            "%llu",
                            r->name, t->name, (unsigned long long)offsets[i],
                            (unsigned long long)g->alignment);
        if (!kld_add_u64(offsets[i], t->nbytes, &end) || end > data_size)
            return kld_fail(r->err, KLD_ERR_FORMAT,
                            "%s: tensor '%s': data [%llu, +%llu) runs past the end of the data "
                            "section (%llu bytes)",
                            r->name, t->name, (unsigned long long)offsets[i],
                            (unsigned long long)t->nbytes, (unsigned long long)data_size);
        t->data = r->buf + g->data_offset + offsets[i];
    }
    return check_overlaps(r, g, offsets);
}

kld_status kld_gguf_parse(const uint8_t *buf, uint64_t size, const char *name, kld_gguf **out,
                          kld_error *err) {
    *out = NULL;
    reader r = {buf, size, 0, name, err};
    kld_status st;
    if (size < 4 || memcmp(buf, GGUF_MAGIC, 4) != 0)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: not a GGUF file (bad magic)", name);
    r.pos = 4;
    uint32_t version;
    if ((st = read_u32(&r, &version, "version"))) return st;
    if (version == 0x03000000u || version == 0x02000000u)
        return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: big-endian GGUF is not supported", name);
    if (version != 2 && version != 3)
        return kld_fail(err, KLD_ERR_UNSUPPORTED,
                        "%s: GGUF version %u is not supported (only 2 and 3)", name, version);
    kld_gguf *g = calloc(1, sizeof *g);
    if (!g) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", name);
    g->version = version;
    uint64_t *offsets = NULL;
    if ((st = read_u64(&r, &g->n_tensors, "tensor count"))) goto fail;
    if ((st = read_u64(&r, &g->n_kv, "metadata count"))) goto fail;
    /* A key/value takes at least 12 bytes, a tensor info at least 32. */
    if (g->n_kv > (size - r.pos) / 12) {
        st = kld_fail(err, KLD_ERR_FORMAT, "%s: metadata count %llu is impossible for a %llu-byte file",
                      name, (unsigned long long)g->n_kv, (unsigned long long)size);
        goto fail;
    }
    if (g->n_tensors > (size - r.pos) / 32) {
        st = kld_fail(err, KLD_ERR_FORMAT, "%s: tensor count %llu is impossible for a %llu-byte file",
                      name, (unsigned long long)g->n_tensors, (unsigned long long)size);
        goto fail;
    }
    g->kv = calloc(g->n_kv ? g->n_kv : 1, sizeof *g->kv);
    g->tensors = calloc(g->n_tensors ? g->n_tensors : 1, sizeof *g->tensors);
    offsets = calloc(g->n_tensors ? g->n_tensors : 1, sizeof *offsets);
    if (!g->kv || !g->tensors || !offsets) {
        st = kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", name);
        goto fail;
    }
    if ((st = read_kvs(&r, g))) goto fail;
    if ((st = read_alignment(&r, g))) goto fail;
    if ((st = read_tensor_infos(&r, g, offsets))) goto fail;
    if ((st = place_tensors(&r, g, offsets))) goto fail;
    free(offsets);
    *out = g;
    return KLD_OK;
fail:
    free(offsets);
    kld_gguf_close(g);
    return st;
}

kld_status kld_gguf_open(const char *path, kld_gguf **out, kld_error *err) {
    *out = NULL;
    kld_mapped_file mf;
    kld_status st = kld_map_file(path, &mf, err);
    if (st) return st;
    static const uint8_t empty[1];
    st = kld_gguf_parse(mf.data ? mf.data : empty, mf.size, path, out, err);
    if (st) {
        kld_unmap_file(&mf);
        return st;
    }
    (*out)->file = mf;
    return KLD_OK;
}

void kld_gguf_close(kld_gguf *g) {
    if (!g) return;
    if (g->kv)
        for (uint64_t i = 0; i < g->n_kv; i++) free_value(&g->kv[i].value);
    if (g->tensors)
        for (uint64_t i = 0; i < g->n_tensors; i++) free(g->tensors[i].name);
    free(g->kv);
    free(g->tensors);
    kld_unmap_file(&g->file);
    free(g);
}

const kld_gguf_kv *kld_gguf_find(const kld_gguf *g, const char *key) {
    for (uint64_t i = 0; i < g->n_kv; i++)
        if (kld_str_eq(g->kv[i].key, key)) return &g->kv[i];
    return NULL;
}

const kld_tensor *kld_gguf_find_tensor(const kld_gguf *g, const char *name) {
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (!strcmp(g->tensors[i].name, name)) return &g->tensors[i];
    return NULL;
}

static bool value_int(const kld_gguf_value *v, int64_t *out) {
    switch (v->type) {
    case KLD_GGUF_UINT8: case KLD_GGUF_UINT16: case KLD_GGUF_UINT32: case KLD_GGUF_UINT64:
        if (v->v.u > (uint64_t)INT64_MAX) return false;
        *out = (int64_t)v->v.u;
        return true;
    case KLD_GGUF_INT8: case KLD_GGUF_INT16: case KLD_GGUF_INT32: case KLD_GGUF_INT64:
        *out = v->v.i;
        return true;
    case KLD_GGUF_BOOL: *out = v->v.b; return true;
    default: return false;
    }
}

bool kld_gguf_get_int(const kld_gguf *g, const char *key, int64_t *out) {
    const kld_gguf_kv *kv = kld_gguf_find(g, key);
    return kv && value_int(&kv->value, out);
}

bool kld_gguf_get_float(const kld_gguf *g, const char *key, double *out) {
    const kld_gguf_kv *kv = kld_gguf_find(g, key);
    if (!kv) return false;
    if (kv->value.type == KLD_GGUF_FLOAT32 || kv->value.type == KLD_GGUF_FLOAT64) {
        *out = kv->value.v.f;
        return true;
    }
    int64_t i;
    if (kv->value.type == KLD_GGUF_BOOL || !value_int(&kv->value, &i)) return false;
    *out = (double)i;
    return true;
}

bool kld_gguf_get_bool(const kld_gguf *g, const char *key, bool *out) {
    const kld_gguf_kv *kv = kld_gguf_find(g, key);
    if (!kv || kv->value.type != KLD_GGUF_BOOL) return false;
    *out = kv->value.v.b;
    return true;
}

bool kld_gguf_get_str(const kld_gguf *g, const char *key, kld_str *out) {
    const kld_gguf_kv *kv = kld_gguf_find(g, key);
    if (!kv || kv->value.type != KLD_GGUF_STRING) return false;
    *out = kv->value.v.s;
    return true;
}

const kld_gguf_value *kld_gguf_get_arr(const kld_gguf *g, const char *key) {
    const kld_gguf_kv *kv = kld_gguf_find(g, key);
    return kv && kv->value.type == KLD_GGUF_ARRAY ? &kv->value : NULL;
}

bool kld_gguf_arr_int(const kld_gguf_value *arr, uint64_t i, int64_t *out) {
    if (arr->type != KLD_GGUF_ARRAY || i >= arr->v.arr.n || !arr->v.arr.raw) return false;
    kld_gguf_vtype t = arr->v.arr.elem_type;
    if (t == KLD_GGUF_FLOAT32 || t == KLD_GGUF_FLOAT64) return false;
    const uint8_t *p = arr->v.arr.raw + i * vtype_size(t);
    kld_gguf_value v = {.type = t};
    switch (t) {
    case KLD_GGUF_UINT8: v.v.u = p[0]; break;
    case KLD_GGUF_INT8: v.v.i = (int8_t)p[0]; break;
    case KLD_GGUF_BOOL: v.v.b = p[0] != 0; break;
    case KLD_GGUF_UINT16: v.v.u = kld_load_u16(p); break;
    case KLD_GGUF_INT16: v.v.i = (int16_t)kld_load_u16(p); break;
    case KLD_GGUF_UINT32: v.v.u = kld_load_u32(p); break;
    case KLD_GGUF_INT32: v.v.i = (int32_t)kld_load_u32(p); break;
    case KLD_GGUF_UINT64: v.v.u = kld_load_u64(p); break;
    case KLD_GGUF_INT64: v.v.i = (int64_t)kld_load_u64(p); break;
    default: return false;
    }
    return value_int(&v, out);
}

bool kld_gguf_arr_float(const kld_gguf_value *arr, uint64_t i, double *out) {
    if (arr->type != KLD_GGUF_ARRAY || i >= arr->v.arr.n || !arr->v.arr.raw) return false;
    kld_gguf_vtype t = arr->v.arr.elem_type;
    if (t == KLD_GGUF_FLOAT32) {
        *out = kld_load_f32(arr->v.arr.raw + 4 * i);
        return true;
    }
    if (t == KLD_GGUF_FLOAT64) {
        *out = kld_load_f64(arr->v.arr.raw + 8 * i);
        return true;
    }
    int64_t v;
    if (t == KLD_GGUF_BOOL || !kld_gguf_arr_int(arr, i, &v)) return false;
    *out = (double)v;
    return true;
}
