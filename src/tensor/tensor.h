/* tensor.h — the one internal tensor record, whatever file it came from:
 * a named, typed view into a mapping. Shapes use ggml order: ne[0] is the
 * contiguous (row) length, ne[1] the number of rows, and so on. */
#ifndef KLD_TENSOR_TENSOR_H
#define KLD_TENSOR_TENSOR_H

#include "tensor/types.h"

#define KLD_MAX_DIMS 4

typedef struct kld_tensor {
    char *name;          /* NUL-terminated, owned by the source */
    uint32_t type;       /* kld_type id */
    int n_dims;
    int64_t ne[KLD_MAX_DIMS]; /* unused dims are 1 */
    const void *data;    /* view into the mapping */
    uint64_t nbytes;
} kld_tensor;

static inline int64_t kld_tensor_nelements(const kld_tensor *t) {
    return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}

#endif
