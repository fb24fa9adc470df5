/* mapped_file.h — read-only memory mapping of a whole file: every reader
 * hands out tensors as views into such a mapping (zero copy). */
#ifndef KLD_IO_MAPPED_FILE_H
#define KLD_IO_MAPPED_FILE_H

#include "common/common.h"

typedef struct kld_mapped_file {
    char *path;
    const uint8_t *data; /* NULL for an empty file */
    uint64_t size;
} kld_mapped_file;

kld_status kld_map_file(const char *path, kld_mapped_file *out, kld_error *err);
void kld_unmap_file(kld_mapped_file *mf);

/* Reads a whole (small) file into a NUL-terminated heap buffer. */
kld_status kld_read_file(const char *path, uint64_t max_size, char **out, uint64_t *out_size,
                         kld_error *err);

#endif
