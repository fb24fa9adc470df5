/* pyrandom.h — CPython's random.Random (Mersenne Twister MT19937) for the
 * few methods langdetect draws from, so that a C port reproduces a Python
 * run seeded with an integer: seed(n), random(), getrandbits(k <= 32),
 * _randbelow(n) (what choice() indexes with) and gauss() with its cached
 * second value. Semantics of CPython 3.11 (Modules/_randommodule.c,
 * Lib/random.py). */
#ifndef KLD_CAP_PYRANDOM_H
#define KLD_CAP_PYRANDOM_H

#include <stdbool.h>
#include <stdint.h>

typedef struct py_random {
    uint32_t mt[624];
    int index;
    bool has_gauss_next;
    double gauss_next;
} py_random;

/* random.seed(seed) for a non-negative integer below 2**32. */
void py_random_seed(py_random *r, uint32_t seed);
uint32_t py_random_uint32(py_random *r);
/* random(): a double in [0, 1) with 53 random bits. */
double py_random_random(py_random *r);
/* getrandbits(k), 0 <= k <= 32. */
uint32_t py_random_getrandbits(py_random *r, int k);
/* _randbelow(n) for 0 < n < 2**32: getrandbits(n.bit_length()) until < n. */
uint32_t py_random_below(py_random *r, uint32_t n);
/* gauss(mu, sigma): Box-Muller, two normals per pair of draws, the second
 * kept for the next call (seed() forgets it). */
double py_random_gauss(py_random *r, double mu, double sigma);

#endif
