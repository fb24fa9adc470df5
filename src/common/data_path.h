/* data_path.h — where the files kldeval reads at run time live (the demo's
 * model and stories; other modules' data the same way). In the source tree
 * they sit under data/; `cmake --install` copies data/ to
 * <prefix>/share/kldeval/, so a name relative to data/ is valid in both. */
#ifndef KLD_COMMON_DATA_PATH_H
#define KLD_COMMON_DATA_PATH_H

#include "common/common.h"

/* Finds the data file rel (relative to data/, e.g.
 * "models/stories260K/model.bin") and writes its path into out. Looks, in
 * this order, where an installed copy relocated as a whole keeps it
 * (<folder of the running binary>/../share/kldeval/rel, as laid out by the
 * install rules), in the source tree the binary was built from (a binary in
 * its build tree), and under the install prefix configured at build time (a
 * binary copied elsewhere on its own). The first readable file wins.
 * KLD_ERR_IO names every place looked when none holds it; KLD_ERR_ARG when
 * rel is absolute or climbs out with "..", or when out is too small. */
kld_status kld_data_path(const char *rel, char *out, size_t size, kld_error *err);

#endif
