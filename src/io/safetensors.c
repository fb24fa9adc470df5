/* safetensors.c — reads one safetensors file (8-byte header length, JSON
 * header, data section) into kld_tensors that view the mapping.
 *
 * Validation follows the reference library (huggingface/safetensors
 * tensor.rs: header length <= 100 MB and inside the file, UTF-8 JSON,
 * offsets contiguous from 0 to the end of the file, dtype x shape equals
 * each byte span, overflow-checked) and adds: the header is one JSON object
 * whose keys are unique (so tensor names are unique), `__metadata__` is an
 * object of strings, each tensor entry has exactly dtype/shape/data_offsets
 * with the right JSON types, and names are valid UTF-8. Sharded sets are in
 * hf_index.c. */
#include "io/safetensors.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct st_dtype {
    const char *name;
    unsigned bits;
    uint32_t type;
} st_dtype;

/* Every dtype of the reference library. Integer and F64 layouts coincide
 * with ggml's I8..I64/F64, so they keep a kld_type id. */
static const st_dtype st_dtypes[] = {
    {"BOOL", 8, KLD_SAFETENSORS_NO_TYPE},     {"U8", 8, KLD_SAFETENSORS_NO_TYPE},
    {"I8", 8, KLD_TYPE_I8},                   {"F8_E5M2", 8, KLD_SAFETENSORS_NO_TYPE},
    {"F8_E4M3", 8, KLD_SAFETENSORS_NO_TYPE},  {"F8_E8M0", 8, KLD_SAFETENSORS_NO_TYPE},
    {"I16", 16, KLD_TYPE_I16},                {"U16", 16, KLD_SAFETENSORS_NO_TYPE},
    {"F16", 16, KLD_TYPE_F16},                {"BF16", 16, KLD_TYPE_BF16},
    {"I32", 32, KLD_TYPE_I32},                {"U32", 32, KLD_SAFETENSORS_NO_TYPE},
    {"F32", 32, KLD_TYPE_F32},                {"F64", 64, KLD_TYPE_F64},
    {"I64", 64, KLD_TYPE_I64},                {"U64", 64, KLD_SAFETENSORS_NO_TYPE},
    {"C64", 64, KLD_SAFETENSORS_NO_TYPE},     {"F4", 4, KLD_SAFETENSORS_NO_TYPE},
    {"F6_E2M3", 6, KLD_SAFETENSORS_NO_TYPE},  {"F6_E3M2", 6, KLD_SAFETENSORS_NO_TYPE},
};

static const st_dtype *find_dtype(const char *s) {
    for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
        if (strcmp(st_dtypes[i].name, s) == 0) return &st_dtypes[i];
    return NULL;
}

unsigned kld_safetensors_dtype_bits(const char *dtype) {
    const st_dtype *d = find_dtype(dtype);
    return d ? d->bits : 0;
}

/* One header entry before the offsets are checked against each other. */
typedef struct st_entry {
    const char *name; /* owned by the JSON tree */
    const st_dtype *dtype;
    int n_dims;
    uint64_t shape[KLD_MAX_DIMS];
    uint64_t begin, end;
    size_t order; /* position in the header, breaks sort ties */
} st_entry;

static int cmp_entry(const void *a, const void *b) {
    const st_entry *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* "[2, 3]" for messages (the shape as written, outermost first). */
static const char *shape_str(const st_entry *e, char *buf, size_t n) {
    size_t pos = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < e->n_dims && pos < n; i++)
        pos += (size_t)snprintf(buf + pos, n - pos, "%s%" PRIu64, i ? ", " : "", e->shape[i]);
    if (pos < n) snprintf(buf + pos, n - pos, "]");
    return buf;
}

static kld_status check_metadata(const json_t *meta, const char *name, kld_error *err) {
    if (!json_is_object(meta))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: __metadata__ is not a JSON object", name);
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)meta, key, v) {
        if (!json_is_string(v))
            return kld_fail(err, KLD_ERR_FORMAT, "%s: __metadata__ '%s' is not a string", name,
                            key);
    }
    return KLD_OK;
}

/* A JSON integer >= 0 (jansson caps integers at INT64_MAX). */
static bool json_u64(const json_t *v, uint64_t *out) {
    if (!json_is_integer(v) || json_integer_value(v) < 0) return false;
    *out = (uint64_t)json_integer_value(v);
    return true;
}

/* Reads {"dtype": s, "shape": [n...], "data_offsets": [b, e]} into e. */
static kld_status read_entry(const char *file, const char *tname, const json_t *obj,
                             st_entry *e, kld_error *err) {
    if (!kld_utf8_valid(tname, strlen(tname)))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: tensor name '%s' is not valid UTF-8", file,
                        tname);
    if (!json_is_object(obj))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: tensor '%s': entry is not a JSON object", file,
                        tname);
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v) {
        if (strcmp(key, "dtype") != 0 && strcmp(key, "shape") != 0 &&
            strcmp(key, "data_offsets") != 0)
            return kld_fail(err, KLD_ERR_FORMAT,
                            "%s: tensor '%s': unexpected field '%s' (only dtype, shape, "
                            "data_offsets are allowed)",
                            file, tname, key);
    }
    const json_t *dt = json_object_get(obj, "dtype");
    const json_t *shape = json_object_get(obj, "shape");
    const json_t *offs = json_object_get(obj, "data_offsets");
    if (!dt || !shape || !offs)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: tensor '%s': missing field '%s'", file, tname,
                        !dt ? "dtype" : !shape ? "shape" : "data_offsets");
    if (!json_is_string(dt))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: tensor '%s': dtype is not a string", file,
                        tname);
    e->dtype = find_dtype(json_string_value(dt));
    if (!e->dtype)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: tensor '%s': unknown dtype '%s'", file, tname,
                        json_string_value(dt));
    if (!json_is_array(shape))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: tensor '%s': shape is not an array", file,
                        tname);
    size_t nd = json_array_size(shape);
    if (nd > KLD_MAX_DIMS)
        return kld_fail(err, KLD_ERR_UNSUPPORTED,
                        "%s: tensor '%s': shape has %zu dims; at most %d are supported", file,
                        tname, nd, KLD_MAX_DIMS);
    e->n_dims = (int)nd;
    for (size_t i = 0; i < nd; i++) {
        if (!json_u64(json_array_get(shape, i), &e->shape[i]))
            return kld_fail(err, KLD_ERR_FORMAT,
                            "%s: tensor '%s': shape[%zu] is not a non-negative integer", file,
                            tname, i);
    }
    if (!json_is_array(offs) || json_array_size(offs) != 2)
        return kld_fail(err, KLD_ERR_FORMAT,
                        "%s: tensor '%s': data_offsets is not an array of two integers", file,
                        tname);
    if (!json_u64(json_array_get(offs, 0), &e->begin) ||
        !json_u64(json_array_get(offs, 1), &e->end))
        return kld_fail(err, KLD_ERR_FORMAT,
                        "%s: tensor '%s': data_offsets are not non-negative integers", file,
                        tname);
    e->name = tname;
    return KLD_OK;
}

/* Checks one entry's span against its dtype x shape and the data size. */
static kld_status check_span(const char *file, const st_entry *e, uint64_t data_size,
                             kld_error *err) {
    char sb[128];
    if (e->end < e->begin)
        return kld_fail(err, KLD_ERR_FORMAT,
                        "%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] end before "
                        "they begin",
                        file, e->name, e->begin, e->end);
    /* Zero dims make the element count 0, but ne[] products of the other
     * dims must still fit int64 for kld_tensor_nelements. */
    uint64_t nel = 1, nonzero = 1;
    for (int i = 0; i < e->n_dims; i++) {
        if (e->shape[i] && (!kld_mul_u64(nonzero, e->shape[i], &nonzero) || nonzero > INT64_MAX))
            return kld_fail(err, KLD_ERR_FORMAT, "%s: tensor '%s': shape %s overflows", file,
                            e->name, shape_str(e, sb, sizeof sb));
        nel *= e->shape[i];
    }
    uint64_t bits;
    if (!kld_mul_u64(nel, e->dtype->bits, &bits))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: tensor '%s': shape %s of %s overflows", file,
                        e->name, shape_str(e, sb, sizeof sb), e->dtype->name);
    if (bits % 8)
        return kld_fail(err, KLD_ERR_FORMAT,
                        "%s: tensor '%s': shape %s of %s is not a whole number of bytes", file,
                        e->name, shape_str(e, sb, sizeof sb), e->dtype->name);
    if (e->end - e->begin != bits / 8)
        return kld_fail(err, KLD_ERR_FORMAT,
                        "%s: tensor '%s': dtype %s x shape %s is %" PRIu64
                        " bytes but data_offsets [%" PRIu64 ", %" PRIu64 "] span %" PRIu64,
                        file, e->name, e->dtype->name, shape_str(e, sb, sizeof sb), bits / 8,
                        e->begin, e->end, e->end - e->begin);
    if (e->end > data_size)
        return kld_fail(err, KLD_ERR_FORMAT,
                        "%s: tensor '%s': data_offsets end %" PRIu64
                        " is past the end of the data section (%" PRIu64 " bytes)",
                        file, e->name, e->end, data_size);
    return KLD_OK;
}

/* Appends the validated entries (sorted by offset) as tensors of st. */
static kld_status append_tensors(kld_safetensors *st, const st_entry *ents, size_t n,
                                 const uint8_t *data, uint32_t file_idx, const char *file,
                                 kld_error *err) {
    size_t total = st->n_tensors + n;
    kld_tensor *t = realloc(st->tensors, (total ? total : 1) * sizeof *t);
    if (!t) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", file);
    st->tensors = t;
    const char **dt = realloc(st->tensor_dtype, (total ? total : 1) * sizeof *dt);
    if (!dt) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", file);
    st->tensor_dtype = dt;
    uint32_t *tf = realloc(st->tensor_file, (total ? total : 1) * sizeof *tf);
    if (!tf) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", file);
    st->tensor_file = tf;
    for (size_t i = 0; i < n; i++) {
        const st_entry *e = &ents[i];
        kld_tensor *d = &st->tensors[st->n_tensors];
        memset(d, 0, sizeof *d);
        d->name = kld_strdup(e->name);
        if (!d->name) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", file);
        d->type = e->dtype->type;
        d->n_dims = e->n_dims;
        for (int k = 0; k < KLD_MAX_DIMS; k++) d->ne[k] = 1;
        /* safetensors shapes are outermost-first; ggml's ne[0] is the row. */
        for (int k = 0; k < e->n_dims; k++) d->ne[k] = (int64_t)e->shape[e->n_dims - 1 - k];
        d->data = data ? data + e->begin : NULL;
        d->nbytes = e->end - e->begin;
        st->tensor_dtype[st->n_tensors] = e->dtype->name;
        st->tensor_file[st->n_tensors] = file_idx;
        st->n_tensors++;
    }
    return KLD_OK;
}

kld_status kld_safetensors_parse_into(kld_safetensors *st, const uint8_t *buf, uint64_t size,
                             const char *name, uint32_t file_idx, kld_error *err) {
    if (size < 8)
        return kld_fail(err, KLD_ERR_FORMAT,
                        "%s: %" PRIu64 " bytes is too small for the 8-byte header length", name,
                        size);
    uint64_t hlen = kld_load_u64(buf);
    if (hlen > KLD_SAFETENSORS_MAX_HEADER)
        return kld_fail(err, KLD_ERR_FORMAT,
                        "%s: header length %" PRIu64 " exceeds the 100 MB limit", name, hlen);
    if (hlen > size - 8)
        return kld_fail(err, KLD_ERR_FORMAT,
                        "%s: header length %" PRIu64 " runs past the end of the file (%" PRIu64
                        " bytes)",
                        name, hlen, size);
    const char *hdr = (const char *)buf + 8;
    if (hlen == 0 || hdr[0] != '{')
        return kld_fail(err, KLD_ERR_FORMAT, "%s: header does not start with '{'", name);
    if (!kld_utf8_valid(hdr, (size_t)hlen))
        return kld_fail(err, KLD_ERR_FORMAT, "%s: header is not valid UTF-8", name);

    json_error_t jerr;
    json_t *root = json_loadb(hdr, (size_t)hlen, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return kld_fail(err, KLD_ERR_FORMAT, "%s: header JSON: %s (line %d, column %d)", name,
                        jerr.text, jerr.line, jerr.column);
    kld_status status = KLD_OK;
    st_entry *ents = NULL;
    if (!json_is_object(root)) { /* cannot happen after '{', kept for clarity */
        status = kld_fail(err, KLD_ERR_FORMAT, "%s: header is not a JSON object", name);
        goto done;
    }
    size_t cap = json_object_size(root), n = 0;
    ents = calloc(cap ? cap : 1, sizeof *ents);
    if (!ents) {
        status = kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", name);
        goto done;
    }
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) {
        if (strcmp(key, "__metadata__") == 0) {
            status = check_metadata(val, name, err);
        } else {
            ents[n].order = n;
            status = read_entry(name, key, val, &ents[n], err);
            n++;
        }
        if (status != KLD_OK) goto done;
    }
    uint64_t data_size = size - 8 - hlen;
    for (size_t i = 0; i < n; i++) {
        status = check_span(name, &ents[i], data_size, err);
        if (status != KLD_OK) goto done;
    }
    /* The reference sorts by offsets, then requires each tensor to start
     * where the previous one ended: no gaps, no overlaps. */
    qsort(ents, n, sizeof *ents, cmp_entry);
    uint64_t pos = 0;
    for (size_t i = 0; i < n; i++) {
        if (ents[i].begin < pos) {
            status = kld_fail(err, KLD_ERR_FORMAT,
                              "%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64
                              "] overlap tensor '%s'",
                              name, ents[i].name, ents[i].begin, ents[i].end, ents[i - 1].name);
            goto done;
        }
        if (ents[i].begin > pos) {
            status = kld_fail(err, KLD_ERR_FORMAT,
                              "%s: tensor '%s': gap of %" PRIu64
                              " unused bytes before its data_offsets [%" PRIu64 ", %" PRIu64 "]",
                              name, ents[i].name, ents[i].begin - pos, ents[i].begin,
                              ents[i].end);
            goto done;
        }
        pos = ents[i].end;
    }
    if (pos != data_size) {
        status = kld_fail(err, KLD_ERR_FORMAT,
                          "%s: %" PRIu64 " trailing bytes after the last tensor's data", name,
                          data_size - pos);
        goto done;
    }
    status = append_tensors(st, ents, n, buf + 8 + hlen, file_idx, name, err);
done:
    free(ents);
    json_decref(root);
    return status;
}

kld_status kld_safetensors_parse(const uint8_t *buf, uint64_t size, const char *name,
                                 kld_safetensors **out, kld_error *err) {
    *out = NULL;
    kld_safetensors *st = calloc(1, sizeof(kld_safetensors));
    if (!st) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", name);
    kld_status s = kld_safetensors_parse_into(st, buf, size, name, 0, err);
    if (s != KLD_OK) {
        kld_safetensors_close(st);
        return s;
    }
    *out = st;
    return KLD_OK;
}

kld_status kld_safetensors_open(const char *path, kld_safetensors **out, kld_error *err) {
    *out = NULL;
    kld_safetensors *st = calloc(1, sizeof(kld_safetensors));
    if (!st) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", path);
    st->files = calloc(1, sizeof *st->files);
    if (!st->files) {
        free(st);
        return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", path);
    }
    kld_status s = kld_map_file(path, &st->files[0], err);
    if (s == KLD_OK) {
        st->n_files = 1;
        s = kld_safetensors_parse_into(st, st->files[0].data, st->files[0].size, path, 0, err);
    }
    if (s != KLD_OK) {
        kld_safetensors_close(st);
        return s;
    }
    *out = st;
    return KLD_OK;
}

void kld_safetensors_close(kld_safetensors *st) {
    if (!st) return;
    for (size_t i = 0; i < st->n_tensors; i++) free(st->tensors[i].name);
    free(st->tensors);
    free(st->tensor_dtype);
    free(st->tensor_file);
    for (size_t i = 0; i < st->n_files; i++) kld_unmap_file(&st->files[i]);
    free(st->files);
    free(st);
}

const kld_tensor *kld_safetensors_find(const kld_safetensors *st, const char *name) {
    for (size_t i = 0; i < st->n_tensors; i++)
        if (strcmp(st->tensors[i].name, name) == 0) return &st->tensors[i];
    return NULL;
}
