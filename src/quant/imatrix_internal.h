/* imatrix_internal.h — between the two importance-matrix readers. */
#ifndef KLD_QUANT_IMATRIX_INTERNAL_H
#define KLD_QUANT_IMATRIX_INTERNAL_H

#include "quant/quant.h"

/* The GGUF form (imatrix_gguf.c) into im (zeroed); entries made before an
 * error stay in im for kld_imatrix_free. path names the file in messages. */
kld_status kld_imatrix_parse_gguf(const char *path, const uint8_t *buf, uint64_t size, kld_imatrix *im,
                                  kld_error *err);

#endif
