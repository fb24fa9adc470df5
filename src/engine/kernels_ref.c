/* kernels_ref.c — scalar reference kernels and the dispatch choice. The
 * arithmetic here is the specification: one fmaf chain per GEMM output
 * element, a Cody-Waite + polynomial exp, sums kept in 8 interleaved lanes
 * and reduced pairwise, the base-2 softmax weights in double. kernels_avx2.c
 * performs exactly these operations. */
#include "engine/kernels.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>

bool kld_cpu_has_avx2(void);   /* tensor/types.c */
bool kld_cpu_has_avx512(void); /* tensor/types.c */

/* ---- exp ---- */

#define EXP_HI 88.3762626647949f
#define EXP_LO (-87.3365447505531f)
#define LOG2E 1.44269504088896341f
#define LN2_HI 0.693359375f
#define LN2_LO (-2.12194440e-4f)

float kld_expf_ref(float x) {
    float xc = fminf(fmaxf(x, EXP_LO), EXP_HI);
    float n = nearbyintf(xc * LOG2E);
    float r = fmaf(n, -LN2_HI, xc);
    r = fmaf(n, -LN2_LO, r);
    float p = 1.9875691500e-4f;
    p = fmaf(p, r, 1.3981999507e-3f);
    p = fmaf(p, r, 8.3334519073e-3f);
    p = fmaf(p, r, 4.1665795894e-2f);
    p = fmaf(p, r, 1.6666665459e-1f);
    p = fmaf(p, r, 5.0000001201e-1f);
    float z = r * r;
    p = fmaf(p, z, r);
    p = p + 1.0f;
    uint32_t bits = (uint32_t)((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, 4);
    float y = p * scale;
    return x < EXP_LO ? 0.0f : y;
}

/* ---- GEMM microkernel ---- */

static void ukernel_ref(int mr, int nr, int64_t kc, const float *A, int64_t lda, const float *B,
                        int64_t ldb, float *C, int64_t ldc, bool load) {
    for (int m = 0; m < mr; m++) {
        for (int n = 0; n < nr; n++) {
            float acc = load ? C[m * ldc + n] : 0.0f;
            for (int64_t k = 0; k < kc; k++) acc = fmaf(A[m * lda + k], B[k * ldb + n], acc);
            C[m * ldc + n] = acc;
        }
    }
}

static void pack16_ref(const float *src, int64_t ld, int rows, int64_t kc, float *panel) {
    for (int64_t k = 0; k < kc; k++)
        for (int j = 0; j < KLD_NR; j++) panel[k * KLD_NR + j] = j < rows ? src[j * ld + k] : 0.0f;
}

/* ---- row operations ---- */

/* Lane sums reduced as ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)), the order of
 * the AVX2 horizontal reduction. */
static float reduce8(const float l[8]) {
    float a0 = l[0] + l[4], a1 = l[1] + l[5], a2 = l[2] + l[6], a3 = l[3] + l[7];
    float b0 = a0 + a2, b1 = a1 + a3;
    return b0 + b1;
}

static void softmax_ref(float *x, int64_t n) {
    float mx = -INFINITY;
    for (int64_t i = 0; i < n; i++) mx = fmaxf(mx, x[i]);
    float lane[8] = {0};
    for (int64_t i = 0; i < n; i++) {
        x[i] = kld_expf_ref(x[i] - mx);
        lane[i % 8] += x[i];
    }
    float inv = 1.0f / reduce8(lane);
    for (int64_t i = 0; i < n; i++) x[i] *= inv;
}

static void silu_mul_ref(float *g, const float *up, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float x = g[i];
        float e = kld_expf_ref(-x);
        g[i] = x / (1.0f + e) * up[i];
    }
}

/* gelu_tanh(x) = 0.5x(1 + tanh(u)) = x / (1 + exp(-2u)),
 * u = sqrt(2/pi)(x + 0.044715x^3). */
#define GELU_NEG_2K (-1.5957691216057308f)
#define GELU_C 0.044715f

static void gelu_tanh_mul_ref(float *g, const float *up, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float x = g[i];
        float t = x * x;
        t = t * x;
        float inner = fmaf(t, GELU_C, x);
        float e = kld_expf_ref(inner * GELU_NEG_2K);
        g[i] = x / (1.0f + e) * up[i];
    }
}

static void scale_ref(float *x, int64_t n, float s) {
    for (int64_t i = 0; i < n; i++) x[i] *= s;
}

static float max_ref(const float *x, int64_t n) {
    float mx = -INFINITY;
    for (int64_t i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    return mx;
}

/* tanh(y) = sign(y)(1 - e)/(1 + e), e = exp(-2|y|). */
static void softcap_ref(float *x, int64_t n, float cap) {
    for (int64_t i = 0; i < n; i++) {
        float y = x[i] / cap;
        float a = fabsf(y);
        float e = kld_expf_ref(-2.0f * a);
        float t = (1.0f - e) / (1.0f + e);
        x[i] = copysignf(t, y) * cap;
    }
}

static double sum_exp_ref(const float *x, int64_t n, float mx) {
    double lane[8] = {0};
    for (int64_t i = 0; i < n; i++) lane[i % 8] += (double)kld_expf_ref(x[i] - mx);
    double a0 = lane[0] + lane[4], a1 = lane[1] + lane[5], a2 = lane[2] + lane[6],
           a3 = lane[3] + lane[7];
    return (a0 + a2) + (a1 + a3);
}

/* ---- base-2 softmax weights ----
 * With x = s·log2(e) (in double) = n + f, n = floor(x), the weight of score
 * s against exponent K is 2^f (a double polynomial of f alone, rounded once
 * to float) times 2^(n-K), an exact scaling. The rounded weights therefore
 * depend on s only, and against another K they differ by an exact power of
 * two: a product chain rescaled by 2^(K_old - K_new) is bit for bit the
 * chain taken against K_new from the start (short of subnormal weights).
 * K must be at least ceil(x) of every score (attention passes the row's,
 * or a larger running one); masked keys (-inf), NaN, and +inf against
 * K = +inf give 0.
 * Every multiply and add below is rounded on its own: this file is built
 * without FMA and in ISO C mode (-std=c17: -ffp-contract=off), and the
 * AVX2 twin uses separate mul/add intrinsics. */
#define LN2_D 0.6931471805599453

float kld_scale_pow2(float x, int j) {
    float a, b = 1.0f;
    uint32_t bits;
    if (j < -126) { /* two steps: x · 2^(j+64) is exact, the last product rounds */
        bits = (uint32_t)(127 - 64) << 23;
        memcpy(&b, &bits, 4);
        j += 64;
    }
    bits = (uint32_t)(j + 127) << 23;
    memcpy(&a, &bits, 4);
    return x * a * b;
}

/* The weight of score s against exponent K: 2^(x-K), x = s·log2(e). */
static float base2_weight(float s, double K) {
    if (s == -INFINITY) return 0.0f;
    const double x = (double)s * KLD_LOG2E_D;
    const double n = floor(x);
    const double j = n - K; /* an integer <= 0 (K >= ceil(x)), -inf or NaN */
    if (!(j >= -160)) return 0.0f; /* past float's subnormals (and +inf - +inf) */
    /* 2^f = e^t, t = f·ln2 in [0, 0.694): Taylor to t^9 (remainder < 1e-8) */
    const double t = (x - n) * LN2_D;
    double p = 1.0 / 362880;
    p = p * t + 1.0 / 40320;
    p = p * t + 1.0 / 5040;
    p = p * t + 1.0 / 720;
    p = p * t + 1.0 / 120;
    p = p * t + 1.0 / 24;
    p = p * t + 1.0 / 6;
    p = p * t + 0.5;
    p = p * t + 1.0;
    p = p * t + 1.0;
    return kld_scale_pow2((float)p, (int)j);
}

/* The sum of 16 weights in double, pairwise: j with j + 8, then + 4, + 2,
 * + 1 (the order kernels_avx2.c's vectors add in). */
static double group16_sum(const float *w) {
    double s8[8], s4[4];
    for (int j = 0; j < 8; j++) s8[j] = (double)w[j] + (double)w[j + 8];
    for (int j = 0; j < 4; j++) s4[j] = s8[j] + s8[j + 4];
    return (s4[0] + s4[2]) + (s4[1] + s4[3]);
}

static double base2_weights_ref(float *x, int64_t n, double K, double sum) {
    for (int64_t i = 0; i < n; i += 16) {
        float w[16];
        for (int c = 0; c < 16; c++) w[c] = i + c < n ? (x[i + c] = base2_weight(x[i + c], K)) : 0.0f;
        sum += group16_sum(w);
    }
    return sum;
}

static const kld_engine_kernels ref_table = {
    "ref", KLD_MR, KLD_NR, ukernel_ref, pack16_ref, pack16_ref, NULL, 0, NULL, softmax_ref, silu_mul_ref, gelu_tanh_mul_ref, softcap_ref,
    scale_ref, max_ref, sum_exp_ref, base2_weights_ref, NULL, NULL, NULL, NULL, /* reads the row-major weights */
};

const kld_engine_kernels *kld_engine_kernels_ref(void) { return &ref_table; }

const kld_engine_kernels *kld_engine_kernels_avx2(void) {
    return kld_cpu_has_avx2() ? &kld_engine_kernels_avx2_table : NULL;
}

/* The AVX-512 set: its GEMM entries and one-row products over repacked
 * q4_K / q6_K (there the conversions and fmas bound decode, and 16 lanes
 * halve them), the softmax weights of attention (base2_weights: at long
 * context as costly as its products), the other AVX2 row operations (a few
 * percent of a forward pass)
 * and the AVX2 one-row products read straight from the blocks (bound by
 * loads and shuffles, not by the fma width). Filled once. */
static pthread_once_t avx512_once = PTHREAD_ONCE_INIT;
static kld_engine_kernels avx512_table;

static void avx512_fill(void) {
    avx512_table = kld_engine_kernels_avx2_table;
    avx512_table.name = "avx512";
    avx512_table.mr = 14;
    avx512_table.nr = 32;
    avx512_table.ukernel = kld_avx512_ukernel;
    avx512_table.pack_panel = kld_avx512_pack32;
    avx512_table.pack_panel_f16 = kld_avx512_pack32_f16;
    avx512_table.gemv_repacked = kld_avx512_gemv_repacked;
    avx512_table.base2_weights = kld_avx512_base2_weights;
}

const kld_engine_kernels *kld_engine_kernels_avx512(void) {
    if (!kld_cpu_has_avx2() || !kld_cpu_has_avx512()) return NULL;
    pthread_once(&avx512_once, avx512_fill);
    return &avx512_table;
}

static pthread_once_t pick_once = PTHREAD_ONCE_INIT;
static const kld_engine_kernels *picked = &ref_table;

/* KLD_KERNELS=ref forces the scalar set, KLD_KERNELS=avx2 caps it at AVX2. */
static void pick(void) {
    const char *env = getenv("KLD_KERNELS");
    if (env && strcmp(env, "ref") == 0) return;
    const kld_engine_kernels *k = env && strcmp(env, "avx2") == 0 ? NULL : kld_engine_kernels_avx512();
    if (!k) k = kld_engine_kernels_avx2();
    if (k) picked = k;
}

const kld_engine_kernels *kld_engine_kernels_get(void) {
    pthread_once(&pick_once, pick);
    return picked;
}
