/* pyrandom.c — MT19937 seeded the way CPython seeds it from an integer
 * (init_by_array over the integer's 32-bit words, [0] for zero) and the
 * random.Random methods langdetect uses; see pyrandom.h. */
#include "cap/pyrandom.h"

#include <math.h>

enum { MT_N = 624, MT_M = 397 };

static void init_genrand(py_random *r, uint32_t s) {
    r->mt[0] = s;
    for (uint32_t i = 1; i < MT_N; i++)
        r->mt[i] = 1812433253u * (r->mt[i - 1] ^ (r->mt[i - 1] >> 30)) + i;
    r->index = MT_N;
}

/* The reference MT19937 init_by_array, as CPython calls it. */
static void init_by_array(py_random *r, const uint32_t *key, uint32_t key_len) {
    uint32_t *mt = r->mt;
    init_genrand(r, 19650218u);
    uint32_t i = 1, j = 0;
    for (uint32_t k = MT_N > key_len ? MT_N : key_len; k; k--) {
        mt[i] = (mt[i] ^ ((mt[i - 1] ^ (mt[i - 1] >> 30)) * 1664525u)) + key[j] + j;
        i++, j++;
        if (i >= MT_N) mt[0] = mt[MT_N - 1], i = 1;
        if (j >= key_len) j = 0;
    }
    for (uint32_t k = MT_N - 1; k; k--) {
        mt[i] = (mt[i] ^ ((mt[i - 1] ^ (mt[i - 1] >> 30)) * 1566083941u)) - i;
        i++;
        if (i >= MT_N) mt[0] = mt[MT_N - 1], i = 1;
    }
    mt[0] = 0x80000000u; /* non-zero initial state */
}

void py_random_seed(py_random *r, uint32_t seed) {
    init_by_array(r, &seed, 1);
    r->has_gauss_next = false;
    r->gauss_next = 0.0;
}

static void regenerate(py_random *r) {
    uint32_t *mt = r->mt;
    for (int k = 0; k < MT_N; k++) {
        uint32_t y = (mt[k] & 0x80000000u) | (mt[(k + 1) % MT_N] & 0x7fffffffu);
        mt[k] = mt[(k + MT_M) % MT_N] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
    }
    r->index = 0;
}

uint32_t py_random_uint32(py_random *r) {
    if (r->index >= MT_N) regenerate(r);
    uint32_t y = r->mt[r->index++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

double py_random_random(py_random *r) {
    uint32_t a = py_random_uint32(r) >> 5, b = py_random_uint32(r) >> 6;
    return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0);
}

uint32_t py_random_getrandbits(py_random *r, int k) {
    if (k <= 0) return 0;
    return py_random_uint32(r) >> (32 - k);
}

uint32_t py_random_below(py_random *r, uint32_t n) {
    int k = 0;
    while (k < 32 && (n >> k)) k++;
    uint32_t v = py_random_getrandbits(r, k);
    while (v >= n) v = py_random_getrandbits(r, k);
    return v;
}

double py_random_gauss(py_random *r, double mu, double sigma) {
    double z;
    if (r->has_gauss_next) {
        z = r->gauss_next;
        r->has_gauss_next = false;
    } else {
        const double two_pi = 2.0 * 3.14159265358979323846;
        double x2pi = py_random_random(r) * two_pi;
        double g2rad = sqrt(-2.0 * log(1.0 - py_random_random(r)));
        z = cos(x2pi) * g2rad;
        r->gauss_next = sin(x2pi) * g2rad;
        r->has_gauss_next = true;
    }
    return mu + z * sigma;
}
