/* sign_test.c — the two-sided sign test (exact binomial), behind runs
 * compare's "where A is closer" and McNemar's exact test of a capability
 * run's flips (the same test on the discordant pairs). */
#include "eval/stats.h"

#include <math.h>

#define EXACT_SIGN_TEST_MAX 1000000u

double kld_sign_test_p(uint64_t plus, uint64_t minus) {
    uint64_t n = plus + minus, k = plus < minus ? plus : minus;
    if (n == 0 || plus == minus) return 1.0;
    double p;
    if (n <= EXACT_SIGN_TEST_MAX) {
        /* P(X <= k), X ~ Binomial(n, 1/2): the terms fall going down from
         * i = k (k < n/2), so sum them relative to the largest, in log space. */
        double dn = (double)n;
        double log_tk = lgamma(dn + 1) - lgamma((double)k + 1) - lgamma(dn - (double)k + 1) - dn * log(2.0);
        double sum = 1.0, term = 1.0;
        for (uint64_t i = k; i > 0; i--) {
            term *= (double)i / (dn - (double)i + 1);
            sum += term;
            if (term < 1e-17 * sum) break;
        }
        p = 2.0 * exp(log_tk + log(sum));
    } else {
        double z = ((double)(plus > minus ? plus - minus : minus - plus) - 1.0) / sqrt((double)n);
        p = erfc(z / sqrt(2.0));
    }
    return p > 1.0 ? 1.0 : p;
}
