/* gguf.h — GGUF v2/v3 reader: metadata key/values of every type (arrays of
 * strings and nested arrays included), tensor infos, aligned data section.
 * The file is mmapped; strings and tensor data are views into it. */
#ifndef KLD_IO_GGUF_H
#define KLD_IO_GGUF_H

#include "io/mapped_file.h"
#include "tensor/tensor.h"

typedef enum kld_gguf_vtype {
    KLD_GGUF_UINT8 = 0,
    KLD_GGUF_INT8 = 1,
    KLD_GGUF_UINT16 = 2,
    KLD_GGUF_INT16 = 3,
    KLD_GGUF_UINT32 = 4,
    KLD_GGUF_INT32 = 5,
    KLD_GGUF_FLOAT32 = 6,
    KLD_GGUF_BOOL = 7,
    KLD_GGUF_STRING = 8,
    KLD_GGUF_ARRAY = 9,
    KLD_GGUF_UINT64 = 10,
    KLD_GGUF_INT64 = 11,
    KLD_GGUF_FLOAT64 = 12,
    KLD_GGUF_VTYPE_COUNT
} kld_gguf_vtype;

/* A string view into the mapping: NOT NUL-terminated. */
typedef struct kld_str {
    const char *ptr;
    uint64_t len;
} kld_str;

typedef struct kld_gguf_value kld_gguf_value;
struct kld_gguf_value {
    kld_gguf_vtype type;
    union {
        uint64_t u;     /* UINT8..UINT64 */
        int64_t i;      /* INT8..INT64 */
        double f;       /* FLOAT32, FLOAT64 */
        bool b;         /* BOOL */
        kld_str s;      /* STRING */
        struct {
            kld_gguf_vtype elem_type;
            uint64_t n;
            const uint8_t *raw;    /* numeric/bool elements: packed little-endian in the file */
            kld_str *strs;         /* STRING elements (n of them) */
            kld_gguf_value *items; /* ARRAY elements: nested arrays (n of them) */
        } arr;
    } v;
};

typedef struct kld_gguf_kv {
    kld_str key;
    kld_gguf_value value;
} kld_gguf_kv;

typedef struct kld_gguf {
    kld_mapped_file file;
    uint32_t version;
    uint64_t n_kv;
    kld_gguf_kv *kv;
    uint64_t n_tensors;
    kld_tensor *tensors;
    uint64_t alignment;    /* general.alignment or 32 */
    uint64_t data_offset;  /* start of the tensor data section */
} kld_gguf;

/* Opens and fully validates a GGUF file (every tensor's byte span lies in
 * the data section, offsets aligned, names unique and valid UTF-8). */
kld_status kld_gguf_open(const char *path, kld_gguf **out, kld_error *err);

/* Parses an in-memory buffer (the fuzzer's entry point); buf must outlive g.
 * `name` is used in messages. */
kld_status kld_gguf_parse(const uint8_t *buf, uint64_t size, const char *name, kld_gguf **out,
                          kld_error *err);
void kld_gguf_close(kld_gguf *g);

const kld_gguf_kv *kld_gguf_find(const kld_gguf *g, const char *key);
const kld_tensor *kld_gguf_find_tensor(const kld_gguf *g, const char *name);

/* Typed lookups: false when the key is absent or has an incompatible type.
 * get_int accepts any integer type (and bool); get_float any number. */
bool kld_gguf_get_int(const kld_gguf *g, const char *key, int64_t *out);
bool kld_gguf_get_float(const kld_gguf *g, const char *key, double *out);
bool kld_gguf_get_bool(const kld_gguf *g, const char *key, bool *out);
bool kld_gguf_get_str(const kld_gguf *g, const char *key, kld_str *out);
/* The array value under key (any element type), or NULL. */
const kld_gguf_value *kld_gguf_get_arr(const kld_gguf *g, const char *key);

/* Element i of a numeric array converted to int64/double (false on a type
 * that is not numeric; i must be < n). */
bool kld_gguf_arr_int(const kld_gguf_value *arr, uint64_t i, int64_t *out);
bool kld_gguf_arr_float(const kld_gguf_value *arr, uint64_t i, double *out);

const char *kld_gguf_vtype_name(kld_gguf_vtype t);

/* True when s equals the NUL-terminated c string. */
bool kld_str_eq(kld_str s, const char *c);

#endif
