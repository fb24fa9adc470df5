/* rng.c — xoshiro256** with splitmix64 seeding, plus uniform and gaussian
 * draws: reproducible across machines (no libc rand). */
#include "synth/synth.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void kld_rng_seed(kld_rng *r, uint64_t seed) {
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t kld_rng_next(kld_rng *r) {
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double kld_rng_uniform(kld_rng *r) { return (double)(kld_rng_next(r) >> 11) * 0x1.0p-53; }

double kld_rng_gaussian(kld_rng *r) {
    /* Box–Muller; 1 - u keeps the log argument in (0, 1]. */
    double u = 1.0 - kld_rng_uniform(r), v = kld_rng_uniform(r);
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}
