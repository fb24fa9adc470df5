/* gguf_writer.h — builds a GGUF v3 file: metadata key/values, then tensor
 * infos, then the aligned data section. Tensor data is referenced, not
 * copied: it must stay valid until kld_gguf_writer_write returns. */
#ifndef KLD_IO_GGUF_WRITER_H
#define KLD_IO_GGUF_WRITER_H

#include "io/gguf.h"

typedef struct kld_gguf_writer kld_gguf_writer;

kld_gguf_writer *kld_gguf_writer_create(void); /* NULL when out of memory */
void kld_gguf_writer_free(kld_gguf_writer *w);

/* Setters copy key and value. A key set twice keeps the last value. */
kld_status kld_gguf_writer_set_str(kld_gguf_writer *w, const char *key, const char *value);
kld_status kld_gguf_writer_set_u32(kld_gguf_writer *w, const char *key, uint32_t value);
kld_status kld_gguf_writer_set_i32(kld_gguf_writer *w, const char *key, int32_t value);
kld_status kld_gguf_writer_set_u64(kld_gguf_writer *w, const char *key, uint64_t value);
kld_status kld_gguf_writer_set_f32(kld_gguf_writer *w, const char *key, float value);
kld_status kld_gguf_writer_set_bool(kld_gguf_writer *w, const char *key, bool value);
/* Arrays: strings (n NUL-terminated), float32, int32. */
kld_status kld_gguf_writer_set_arr_str(kld_gguf_writer *w, const char *key,
                                       const char *const *values, uint64_t n);
kld_status kld_gguf_writer_set_arr_f32(kld_gguf_writer *w, const char *key, const float *values,
                                       uint64_t n);
kld_status kld_gguf_writer_set_arr_i32(kld_gguf_writer *w, const char *key,
                                       const int32_t *values, uint64_t n);

/* Copies a value read by the GGUF reader (any type, nested arrays too). */
kld_status kld_gguf_writer_copy_value(kld_gguf_writer *w, const char *key,
                                      const kld_gguf_value *v);

/* Adds a tensor (ggml dim order); nbytes must match type × shape. */
kld_status kld_gguf_writer_add_tensor(kld_gguf_writer *w, const char *name, uint32_t type,
                                      int n_dims, const int64_t *ne, const void *data,
                                      uint64_t nbytes, kld_error *err);

kld_status kld_gguf_writer_write(const kld_gguf_writer *w, const char *path, kld_error *err);

#endif
