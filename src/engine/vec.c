/* vec.c — vector helpers exported to the statistics code. */
#include "engine/engine.h"
#include "engine/kernels.h"

#include <math.h>

double kld_logsumexp(const float *x, int64_t n) {
    if (n <= 0) return -INFINITY;
    float mx = -INFINITY;
    for (int64_t i = 0; i < n; i++) mx = fmaxf(mx, x[i]);
    if (!isfinite(mx)) return mx;
    return (double)mx + log(kld_engine_kernels_get()->sum_exp(x, n, mx));
}
