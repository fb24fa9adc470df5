/* convert.c — checked whole-tensor dequantization and row quantization:
 * validates type, shape and buffer sizes once, then runs the row kernels
 * from the type table. */
#include "tensor/convert.h"

#include <inttypes.h>

kld_status kld_type_check_to_float(uint32_t type_id, const char *what, kld_error *err) {
    char nb[16];
    const kld_type_info *t = kld_type_info_get(type_id);
    if (!t)
        return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: unknown tensor type %s", what,
                        kld_type_name(type_id, nb));
    if (!t->to_float_ref)
        return kld_fail(err, KLD_ERR_UNSUPPORTED,
                        "%s: tensor type %s (id %" PRIu32 ") cannot be dequantized by kldeval",
                        what, t->name, type_id);
    return KLD_OK;
}

kld_status kld_type_check_quantize(uint32_t type_id, const char *what, kld_error *err) {
    char nb[16];
    const kld_type_info *t = kld_type_info_get(type_id);
    if (!t)
        return kld_fail(err, KLD_ERR_UNSUPPORTED, "%s: unknown tensor type %s", what,
                        kld_type_name(type_id, nb));
    if (!t->quantize_row)
        return kld_fail(err, KLD_ERR_UNSUPPORTED,
                        "%s: kldeval has no quantizer for type %s (id %" PRIu32 ")", what, t->name,
                        type_id);
    return KLD_OK;
}

/* Checks shape and returns the row size in bytes. */
static kld_status rows_geometry(uint32_t type_id, int64_t n_rows, int64_t n_per_row,
                                uint64_t *row_bytes, uint64_t *total_bytes, const char *what,
                                kld_error *err) {
    if (n_rows < 0 || n_per_row < 0)
        return kld_fail(err, KLD_ERR_ARG, "%s: negative shape (%" PRId64 " rows of %" PRId64 ")",
                        what, n_rows, n_per_row);
    kld_status st = kld_type_row_bytes(type_id, (uint64_t)n_per_row, row_bytes, what, err);
    if (st != KLD_OK) return st;
    if (!kld_mul_u64(*row_bytes, (uint64_t)n_rows, total_bytes))
        return kld_fail(err, KLD_ERR_ARG, "%s: %" PRId64 " rows of %" PRIu64 " bytes overflow 64 bits",
                        what, n_rows, *row_bytes);
    return KLD_OK;
}

kld_status kld_dequantize_rows(uint32_t type_id, const void *src, int64_t n_rows, int64_t n_per_row,
                               float *dst, const char *what, kld_error *err) {
    kld_status st = kld_type_check_to_float(type_id, what, err);
    if (st != KLD_OK) return st;
    uint64_t row_bytes, total;
    st = rows_geometry(type_id, n_rows, n_per_row, &row_bytes, &total, what, err);
    if (st != KLD_OK) return st;
    const kld_type_info *t = kld_type_info_get(type_id);
    const uint8_t *p = src;
    for (int64_t r = 0; r < n_rows; r++)
        kld_type_kernels_of(t)->to_float(p + (uint64_t)r * row_bytes, dst + r * n_per_row, n_per_row);
    return KLD_OK;
}

kld_status kld_tensor_to_f32(const kld_tensor *t, float *dst, uint64_t dst_count, kld_error *err) {
    char nb[16];
    const char *tname = kld_type_name(t->type, nb);
    kld_status st = kld_type_check_to_float(t->type, t->name, err);
    if (st != KLD_OK) return st;
    uint64_t nbytes;
    st = kld_type_tensor_bytes(t->type, t->n_dims, t->ne, &nbytes, t->name, err);
    if (st != KLD_OK) return st;
    if (nbytes != t->nbytes)
        return kld_fail(err, KLD_ERR_FORMAT,
                        "%s: %s tensor holds %" PRIu64 " bytes, its shape needs %" PRIu64, t->name,
                        tname, t->nbytes, nbytes);
    uint64_t count = 1;
    for (int i = 0; i < t->n_dims; i++) {
        if (!kld_mul_u64(count, (uint64_t)t->ne[i], &count))
            return kld_fail(err, KLD_ERR_FORMAT, "%s: element count overflows 64 bits", t->name);
    }
    if (count > dst_count)
        return kld_fail(err, KLD_ERR_ARG, "%s: %" PRIu64 " values do not fit a buffer of %" PRIu64,
                        t->name, count, dst_count);
    int64_t n_per_row = t->ne[0];
    int64_t n_rows = n_per_row ? (int64_t)(count / (uint64_t)n_per_row) : 0;
    return kld_dequantize_rows(t->type, t->data, n_rows, n_per_row, dst, t->name, err);
}

kld_status kld_quantize_rows(uint32_t type_id, const float *src, int64_t n_rows, int64_t n_per_row,
                             void *dst, uint64_t dst_size, const char *what, kld_error *err) {
    kld_status st = kld_type_check_quantize(type_id, what, err);
    if (st != KLD_OK) return st;
    uint64_t row_bytes, total;
    st = rows_geometry(type_id, n_rows, n_per_row, &row_bytes, &total, what, err);
    if (st != KLD_OK) return st;
    if (total > dst_size)
        return kld_fail(err, KLD_ERR_ARG, "%s: %" PRIu64 " quantized bytes do not fit a buffer of %" PRIu64,
                        what, total, dst_size);
    const kld_type_info *t = kld_type_info_get(type_id);
    uint8_t *p = dst;
    for (int64_t r = 0; r < n_rows; r++)
        t->quantize_row(src + r * n_per_row, p + (uint64_t)r * row_bytes, n_per_row);
    return KLD_OK;
}
