/* iq_grids.h — the lattice tables of llama.cpp's i-quants (generated into
 * iq1_grids.c, iq2_grids.c, iq3_grids.c by tools/gen_iq_grids.py from ggml-common.h). Entry i packs a
 * group of grid values, value j in byte j of the little-endian word, so
 * a row kernel reads an entry's bytes in place (x86 and every target
 * kldeval builds for are little-endian). */
#ifndef KLD_TENSOR_IQ_GRIDS_H
#define KLD_TENSOR_IQ_GRIDS_H

#include <stdint.h>

extern const uint64_t kld_iq2xxs_grid[256]; /* 8 values of {8, 25, 43} */
extern const uint64_t kld_iq2xs_grid[512];  /* 8 values of {8, 25, 43} */
extern const uint64_t kld_iq2s_grid[1024];  /* 8 values of {8, 25, 43} */
extern const uint32_t kld_iq3xxs_grid[256]; /* 4 values of {4, 12, ..., 52, 62} */
extern const uint32_t kld_iq3s_grid[512];   /* 4 values of {1, 3, ..., 15} */
extern const uint64_t kld_iq1s_grid[2048];  /* 8 int8 values of {-1, 0, 1} (iq1_s, iq1_m) */

#endif
