/* kv_rot.c — the rotated scalar quantizer ("rot<B>"), TurboQuant_mse
 * (Zandieh, Daliri, Hadian, Mirrokni, "TurboQuant: Online Vector
 * Quantization with Near-optimal Distortion Rate", arXiv 2504.19874,
 * Algorithm 1) for each K or V head vector x of n values:
 *
 *   1. y = R·x with a fixed random rotation R. The paper draws R uniformly
 *      from the orthogonal group (QR of a Gaussian matrix); here R is a
 *      randomized Hadamard transform, R = H·D: D a diagonal of ±1 signs
 *      from a fixed seed (splitmix64 of KV_ROT_SEED + i), H the orthonormal
 *      Walsh–Hadamard matrix (H_m/√m), block-diagonal over the binary
 *      decomposition of n when n is not a power of two (80 = 64 + 16).
 *      It is orthogonal, costs n·log n instead of n², needs no storage,
 *      and mixes a vector's energy over its coordinates as the dense
 *      rotation does (exactly the same law for Gaussian inputs).
 *   2. Each coordinate y_j is replaced by the nearest of 2^B levels σ·c_k,
 *      c the Lloyd–Max quantizer of N(0, 1) (the paper's Eq. 4 codebook
 *      for the coordinate law of a rotated unit vector, Beta → N(0, 1/d),
 *      in its large-d limit), σ = ‖x‖/√n. ‖x‖ is stored per vector as
 *      float16 (the paper stores the norm "in floating point"); σ uses
 *      the stored (rounded) norm.
 *   3. Read: ỹ_j = σ·c_code, x̃ = Rᵀ·ỹ = D·H·ỹ, all in float32.
 *
 * Row layout: f16 ‖x‖, then the n codes as one little-endian bit stream:
 * 2 + n·B/8 bytes. Expected error (TurboQuant Theorem 1):
 * E‖x − x̃‖²/‖x‖² ≤ (√3·π/2)·4^-B; Lloyd–Max for N(0,1) gives 0.363,
 * 0.118, 0.0345, 0.0095 for B = 1..4. The QJL residual stage of
 * TurboQuant_prod (unbiased inner products) is not implemented. */
#include "engine/kv_scheme.h"

#include "tensor/kernels.h"
#include "tensor/types.h"

#include <math.h>
#include <pthread.h>

#define KV_ROT_SEED UINT64_C(0x2504198740000000) /* arXiv 2504.19874 */
#define F16_MAX 65504.0f

static float levels[9][256], bounds[9][255];
static pthread_once_t codebook_once = PTHREAD_ONCE_INIT;

static double norm_cdf(double x) { return 0.5 * erfc(-x / M_SQRT2); }
static double norm_pdf(double x) { return exp(-0.5 * x * x) / sqrt(2 * M_PI); }

/* Φ^-1(p) by bisection (the codebook's starting point only). */
static double norm_quantile(double p) {
    double lo = -40, hi = 40;
    for (int i = 0; i < 200; i++) {
        double mid = 0.5 * (lo + hi);
        if (norm_cdf(mid) < p) lo = mid;
        else hi = mid;
    }
    return 0.5 * (lo + hi);
}

/* Lloyd's algorithm on the N(0,1) density, started at the asymptotically
 * optimal point density (∝ φ^(1/3), i.e. N(0, 3): Panter–Dite), kept
 * symmetric, in double; fixed work, so every run gets the same codebook. */
static void lloyd_max(int bits) {
    const int K = 1 << bits;
    double c[256], t[257];
    for (int i = 0; i < K; i++) c[i] = sqrt(3.0) * norm_quantile((i + 0.5) / K);
    for (int it = 0; it < 4000; it++) {
        t[0] = -INFINITY;
        t[K] = INFINITY;
        for (int i = 1; i < K; i++) t[i] = 0.5 * (c[i - 1] + c[i]);
        double delta = 0;
        for (int i = 0; i < K; i++) {
            double mass = norm_cdf(t[i + 1]) - norm_cdf(t[i]);
            double pa = isfinite(t[i]) ? norm_pdf(t[i]) : 0, pb = isfinite(t[i + 1]) ? norm_pdf(t[i + 1]) : 0;
            double v = mass > 0 ? (pa - pb) / mass : c[i];
            delta = fmax(delta, fabs(v - c[i]));
            c[i] = v;
        }
        for (int i = 0; i < K / 2; i++) { /* exact symmetry */
            double m = 0.5 * (c[K - 1 - i] - c[i]);
            c[i] = -m;
            c[K - 1 - i] = m;
        }
        if (delta < 1e-13) break;
    }
    for (int i = 0; i < K; i++) levels[bits][i] = (float)c[i];
    for (int i = 0; i + 1 < K; i++) bounds[bits][i] = 0.5f * (levels[bits][i] + levels[bits][i + 1]);
}

static void build_codebooks(void) {
    for (int b = 1; b <= 8; b++) lloyd_max(b);
}

const float *kld_kv_rot_levels(int bits) {
    pthread_once(&codebook_once, build_codebooks);
    return levels[bits];
}

static float sign_of(int64_t i) {
    uint64_t z = KV_ROT_SEED + (uint64_t)i * UINT64_C(0x9E3779B97F4A7C15);
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    z ^= z >> 31;
    return (z >> 63) ? -1.0f : 1.0f;
}

/* In-place orthonormal Walsh–Hadamard transform of each power-of-two block
 * of the binary decomposition of n, largest first. */
static void hadamard_blocks(float *x, int64_t n) {
    int64_t off = 0;
    for (int64_t m = INT64_C(1) << 62; m >= 1; m >>= 1) {
        if (!(n & m)) continue;
        float *b = x + off;
        for (int64_t h = 1; h < m; h <<= 1)
            for (int64_t i = 0; i < m; i += 2 * h)
                for (int64_t j = i; j < i + h; j++) {
                    const float u = b[j], v = b[j + h];
                    b[j] = u + v;
                    b[j + h] = u - v;
                }
        const float s = (float)(1.0 / sqrt((double)m));
        for (int64_t j = 0; j < m; j++) b[j] *= s;
        off += m;
    }
}

void kld_kv_rot_forward(float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] *= sign_of(i);
    hadamard_blocks(x, n);
}

void kld_kv_rot_inverse(float *x, int64_t n) {
    hadamard_blocks(x, n);
    for (int64_t i = 0; i < n; i++) x[i] *= sign_of(i);
}

uint64_t kld_kv_rot_row_bytes(int bits, int64_t n) { return 2 + (uint64_t)n * (uint64_t)bits / 8; }

void kld_kv_rot_store(int bits, const float *x, uint8_t *dst, int64_t n) {
    pthread_once(&codebook_once, build_codebooks);
    float y[KLD_KV_ROT_MAX_DIM];
    double ss = 0;
    for (int64_t i = 0; i < n; i++) {
        y[i] = x[i];
        ss += (double)x[i] * x[i];
    }
    float norm = (float)sqrt(ss);
    if (!(norm <= F16_MAX)) norm = F16_MAX; /* also a NaN norm */
    const uint16_t h = kld_f32_to_f16(norm);
    dst[0] = (uint8_t)h;
    dst[1] = (uint8_t)(h >> 8);
    const float sigma = kld_half_to_float(h) / sqrtf((float)n);
    const float inv = sigma > 0 ? 1.0f / sigma : 0.0f;
    kld_kv_rot_forward(y, n);
    const float *t = bounds[bits];
    const int K = 1 << bits;
    kv_bit_writer w = {dst + 2, 0, 0};
    for (int64_t i = 0; i < n; i++) {
        const float u = y[i] * inv;
        int lo = 0, hi = K - 1; /* the code: how many boundaries lie below u */
        while (lo < hi) {
            const int mid = (lo + hi) / 2;
            if (u > t[mid]) lo = mid + 1;
            else hi = mid;
        }
        kv_bits_put(&w, (uint32_t)lo, bits);
    }
    kv_bits_flush(&w);
}

void kld_kv_rot_load(int bits, const uint8_t *src, float *dst, int64_t n) {
    pthread_once(&codebook_once, build_codebooks);
    const float sigma = kld_half_to_float((uint16_t)(src[0] | src[1] << 8)) / sqrtf((float)n);
    const float *c = levels[bits];
    kv_bit_reader r = {src + 2, 0, 0};
    for (int64_t i = 0; i < n; i++) dst[i] = c[kv_bits_get(&r, bits)] * sigma;
    kld_kv_rot_inverse(dst, n);
}
