/* test_tensor_half.c — f16 and bf16 conversions: every half and bfloat16
 * value widened and narrowed back, ties between neighbours rounding to
 * even, the overflow and subnormal boundaries, and random floats against
 * independent oracles (a double-precision nearest search, and the CPU's
 * own F16C instruction when present). Also the f16/bf16 row kernels: the
 * AVX2 widening equals the scalar one for all 65536 bit patterns. */
#include "tensor/types.h"
#include "testlib.h"

#include <immintrin.h>
#include <math.h>
#include <stdlib.h>

static uint32_t bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float from_bits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* Independent slow widening: sign * mant * 2^(exp-25) with ldexp. */
static double f16_value(uint16_t h) {
    int exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
    double v = exp == 0 ? ldexp(mant, -24) : exp == 31 ? (mant ? NAN : INFINITY)
                                                       : ldexp(mant | 0x400, exp - 25);
    return (h & 0x8000) ? -v : v;
}

/* Independent slow narrowing: the nearest finite half by search over the
 * ordered magnitudes (ties to even mantissa; beyond 65520 → inf). */
static uint16_t f16_nearest(float f) {
    double a = fabs((double)f);
    uint16_t sign = (bits(f) >> 16) & 0x8000;
    if (a >= 65520.0) return sign | 0x7C00;
    uint16_t lo = 0, hi = 0x7BFF; /* largest h with value <= a */
    while (lo < hi) {
        uint16_t mid = (uint16_t)((lo + hi + 1) / 2);
        if (f16_value(mid) <= a) lo = mid; else hi = (uint16_t)(mid - 1);
    }
    if (f16_value(lo) == a) return sign | lo;
    double dlo = a - f16_value(lo), dhi = f16_value((uint16_t)(lo + 1)) - a;
    uint16_t r = dlo < dhi ? lo : dhi < dlo ? (uint16_t)(lo + 1) : (lo & 1) ? (uint16_t)(lo + 1) : lo;
    return sign | r;
}

static uint16_t bf16_nearest(float f) {
    uint32_t u = bits(f);
    uint32_t lo = u & 0xFFFF0000u;
    double dlo = fabs((double)f - (double)from_bits(lo));
    double dhi = fabs((double)from_bits(lo + 0x10000u) - (double)f);
    uint32_t r = dlo < dhi ? lo : dhi < dlo ? lo + 0x10000u : ((lo >> 16) & 1) ? lo + 0x10000u : lo;
    return (uint16_t)(r >> 16);
}

__attribute__((target("f16c"))) static uint16_t f16c_narrow(float f) {
    return (uint16_t)_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
}

static uint64_t rng_state = 0x243F6A8885A308D3ull;
static uint32_t rng32(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 11);
}

static void test_f16_all(void) {
    int bad_value = 0, bad_round = 0, bad_nan = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = kld_f16_to_f32((uint16_t)h);
        bool is_nan = ((h & 0x7C00) == 0x7C00) && (h & 0x3FF);
        if (is_nan) {
            /* quiet NaN, sign and payload kept (as VCVTPH2PS) */
            uint32_t want = (h & 0x8000u) << 16 | 0x7FC00000u | (h & 0x3FFu) << 13;
            if (bits(f) != want) bad_nan++;
            if ((kld_f32_to_f16(f) & 0x7FFF) != 0x7E00) bad_nan++;
            continue;
        }
        double want = f16_value((uint16_t)h);
        if ((double)f != want || (signbit(f) != 0) != ((h & 0x8000) != 0)) bad_value++;
        if (kld_f32_to_f16(f) != h) bad_round++;
    }
    CHECK(bad_value == 0, "f16->f32: %d values differ from the slow reference", bad_value);
    CHECK(bad_round == 0, "f16->f32->f16: %d values do not round-trip", bad_round);
    CHECK(bad_nan == 0, "f16 NaN handling: %d failures", bad_nan);
}

static void test_f16_ties(void) {
    /* midpoint between every pair of neighbouring finite halves (exact in
     * float: 12 significant bits) must go to the even one; one float ulp
     * either side must go to the nearer one */
    int bad = 0;
    for (uint32_t h = 0; h < 0x7BFF; h++) { /* the pair 0x7BFF/inf: below */
        uint16_t lo = (uint16_t)h, hi = (uint16_t)(h + 1);
        double m = (f16_value(lo) + f16_value(hi)) / 2;
        float mf = (float)m;
        if ((double)mf != m) { bad++; continue; }
        uint16_t even = (lo & 1) ? hi : lo;
        for (int s = 0; s < 2; s++) {
            uint16_t sign = s ? 0x8000 : 0;
            float v = s ? -mf : mf;
            if (kld_f32_to_f16(v) != (sign | even)) bad++;
            float below = nextafterf(mf, 0.0f), above = nextafterf(mf, INFINITY);
            if (kld_f32_to_f16(s ? -below : below) != (sign | lo)) bad++;
            if (kld_f32_to_f16(s ? -above : above) != (sign | hi)) bad++;
        }
    }
    CHECK(bad == 0, "f16 ties/neighbours: %d failures", bad);
    CHECK(kld_f32_to_f16(65504.0f) == 0x7BFF, "max half");
    CHECK(kld_f32_to_f16(65519.996f) == 0x7BFF, "just below the overflow tie");
    CHECK(kld_f32_to_f16(65520.0f) == 0x7C00, "65520 ties to inf (even)");
    CHECK(kld_f32_to_f16(1e10f) == 0x7C00 && kld_f32_to_f16(-INFINITY) == 0xFC00, "overflow to inf");
    CHECK(kld_f32_to_f16(ldexpf(1, -25)) == 0x0000, "2^-25 ties to zero");
    CHECK(kld_f32_to_f16(nextafterf(ldexpf(1, -25), 1)) == 0x0001, "just above 2^-25 -> min subnormal");
    CHECK(kld_f32_to_f16(ldexpf(3, -25)) == 0x0002, "1.5 * 2^-24 ties to even 2");
    CHECK(kld_f32_to_f16(-0.0f) == 0x8000 && kld_f32_to_f16(1e-30f) == 0, "signed zero / underflow");
    CHECK(kld_f32_to_f16(nextafterf(ldexpf(1, -14), 0)) == 0x0400, "rounds up into the normals");
}

static void test_f16_random(void) {
    bool hw = kld_cpu_has_avx2(); /* implies F16C */
    int bad_ref = 0, bad_hw = 0;
    const int n = 300000;
    for (int i = 0; i < n; i++) {
        uint32_t u = rng32();
        /* concentrate on the interesting exponent range (2^-28 .. 2^17) */
        if (i & 1) u = (u & 0x807FFFFFu) | (uint32_t)(99 + (rng32() % 46)) << 23;
        float f = from_bits(u);
        if (isnan(f)) continue;
        uint16_t got = kld_f32_to_f16(f);
        if (got != f16_nearest(f)) bad_ref++;
        if (hw && got != f16c_narrow(f)) bad_hw++;
    }
    CHECK(bad_ref == 0, "f32->f16 on random floats: %d differ from the slow nearest search", bad_ref);
    if (hw) CHECK(bad_hw == 0, "f32->f16 on random floats: %d differ from F16C", bad_hw);
    else printf("F16C comparison SKIPPED (no F16C)\n");
}

static void test_bf16(void) {
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = kld_bf16_to_f32((uint16_t)h);
        if (bits(f) != h << 16) bad++;
        bool is_nan = ((h & 0x7F80) == 0x7F80) && (h & 0x7F);
        uint16_t back = kld_f32_to_bf16(f);
        if (is_nan ? back != (h | 0x40) : back != h) bad++;
    }
    CHECK(bad == 0, "bf16 widening/round trip: %d failures", bad);
    int bad_ties = 0, bad_rand = 0;
    for (int i = 0; i < 200000; i++) {
        uint32_t u = rng32();
        if ((u & 0x7F800000u) == 0x7F800000u) continue; /* inf/NaN */
        if ((u & 0x7FFF0000u) == 0x7F7F0000u) continue; /* may round to inf: checked below */
        uint32_t tie = (u & 0xFFFF0000u) | 0x8000u;
        if ((tie & 0x7FFF0000u) == 0x7F7F0000u) continue; /* would round to inf */
        uint16_t want = (uint16_t)((tie >> 16) + ((tie >> 16) & 1));
        if (kld_f32_to_bf16(from_bits(tie)) != want) bad_ties++;
        if (kld_f32_to_bf16(from_bits(u)) != bf16_nearest(from_bits(u))) bad_rand++;
    }
    CHECK(bad_ties == 0, "bf16 ties to even: %d failures", bad_ties);
    CHECK(bad_rand == 0, "bf16 random: %d differ from the nearest search", bad_rand);
    CHECK(kld_f32_to_bf16(from_bits(0x00000001)) == 0x0000, "bf16 tiny subnormal rounds to 0 (kept, not flushed)");
    CHECK(kld_f32_to_bf16(from_bits(0x00018000)) == 0x0002, "bf16 subnormal tie to even");
    CHECK(kld_f32_to_bf16(from_bits(0x7F7FFFFF)) == 0x7F80, "FLT_MAX rounds to bf16 inf");
}

static void test_rows(void) {
    /* row kernels over every bit pattern: f16 AVX2 (VCVTPH2PS) == scalar,
     * bf16 likewise; quantize_row(F16) of the widened values gives the
     * patterns back (NaNs excepted) */
    const kld_type_info *f16 = kld_type_info_get(KLD_TYPE_F16);
    const kld_type_info *bf16 = kld_type_info_get(KLD_TYPE_BF16);
    uint16_t *all = malloc(65536 * 2 + 2), *back = malloc(65536 * 2);
    float *a = malloc(65536 * 4), *b = malloc(65536 * 4);
    for (uint32_t h = 0; h < 65536; h++) all[h] = (uint16_t)h;
    f16->to_float_ref(all, a, 65536);
    f16->quantize_row(a, back, 65536);
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        bool is_nan = ((h & 0x7C00) == 0x7C00) && (h & 0x3FF);
        if (!is_nan && back[h] != h) bad++;
    }
    CHECK(bad == 0, "f16 row round trip: %d failures", bad);
    if (kld_cpu_has_avx2()) {
        /* n = 65535 from an odd byte address exercises the unaligned body and the scalar tail */
        uint8_t *odd = (uint8_t *)malloc(65536 * 2 + 1);
        memcpy(odd + 1, all, 65536 * 2);
        f16->to_float_avx2(odd + 1, b, 65535);
        bad = 0;
        for (uint32_t h = 0; h < 65535; h++) bad += bits(a[h]) != bits(b[h]);
        CHECK(bad == 0, "f16 AVX2 widening differs from scalar on %d patterns", bad);
        bf16->to_float_ref(all, a, 65536);
        bf16->to_float_avx2(odd + 1, b, 65535);
        bad = 0;
        for (uint32_t h = 0; h < 65535; h++) bad += bits(a[h]) != bits(b[h]);
        CHECK(bad == 0, "bf16 AVX2 widening differs from scalar on %d patterns", bad);
        free(odd);
    } else {
        printf("f16/bf16 AVX2 row comparison SKIPPED (this CPU lacks AVX2/F16C)\n");
    }
    free(all);
    free(back);
    free(a);
    free(b);
}

int main(void) {
    test_f16_all();
    test_f16_ties();
    test_f16_random();
    test_bf16();
    test_rows();
    return kt_finish();
}
