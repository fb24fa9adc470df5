/* convert.h — checked whole-tensor conversion on top of the type table:
 * the entry points loaders and the model synthesizer use, with errors that
 * name the tensor and its type. */
#ifndef KLD_TENSOR_CONVERT_H
#define KLD_TENSOR_CONVERT_H

#include "tensor/tensor.h"

/* OK when tensors of this type can be dequantized; otherwise an
 * UNSUPPORTED error naming `what` (the tensor) and the type. */
kld_status kld_type_check_to_float(uint32_t type_id, const char *what, kld_error *err);

/* OK when rows of this type can be quantized (kld_quantize_rows). */
kld_status kld_type_check_quantize(uint32_t type_id, const char *what, kld_error *err);

/* Dequantizes the whole tensor t into dst (dst_count floats, at least
 * kld_tensor_nelements(t)) with the kernels chosen at start-up. Fails when
 * the type is unsupported, the row length is not a multiple of the block
 * size, t->nbytes disagrees with the shape, or dst is too small. */
kld_status kld_tensor_to_f32(const kld_tensor *t, float *dst, uint64_t dst_count, kld_error *err);

/* Dequantizes n_rows rows of n_per_row values of type_id (rows contiguous). */
kld_status kld_dequantize_rows(uint32_t type_id, const void *src, int64_t n_rows, int64_t n_per_row,
                               float *dst, const char *what, kld_error *err);

/* Quantizes n_rows rows of n_per_row floats into dst (dst_size bytes) with
 * llama.cpp's reference quantizer for type_id; rows are quantized one by one
 * as ggml_quantize_chunk does. */
kld_status kld_quantize_rows(uint32_t type_id, const float *src, int64_t n_rows, int64_t n_per_row,
                             void *dst, uint64_t dst_size, const char *what, kld_error *err);

#endif
