/* kernels_avx512.c — AVX-512 GEMM kernels: a 14×32 register-blocked
 * microkernel (28 zmm accumulators, two B vectors, one broadcast) and the
 * 32-column panel packing (16×16 transposes). Each output element is still
 * one fma chain over k in order, the reference's arithmetic, so results
 * equal kernels_ref.c bit for bit (tests/test_kernels_avx512.c compares
 * them). The row operations of the AVX-512 set are the AVX2 ones (see
 * kernels_ref.c, which assembles the table). */
#include "engine/gemm.h"
#include "engine/kernels.h"

#include <immintrin.h>
#include <math.h>

#define MR 14
#define NR 32

/* Accumulators are named variables so that they stay in registers. PACKED:
 * A rows KLD_GEMM_LDA apart and B rows NR apart (compile-time strides: one
 * pointer, constant displacements), B zero-padded to NR columns. */
static inline __attribute__((always_inline)) void
ukernel_tpl(const int M, const bool full, const bool packed, int nr, int64_t kc, const float *A,
            int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc, bool load) {
    if (packed) {
        lda = KLD_GEMM_LDA;
        ldb = NR;
    }
    const __mmask16 k0 = full ? (__mmask16)0xFFFF : (__mmask16)(nr >= 16 ? 0xFFFF : (1u << nr) - 1);
    const __mmask16 k1 = full ? (__mmask16)0xFFFF
                              : (__mmask16)(nr <= 16 ? 0 : nr >= 32 ? 0xFFFF : (1u << (nr - 16)) - 1);
    __m512 c00 = _mm512_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
           c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00, c60 = c00, c61 = c00,
           c70 = c00, c71 = c00, c80 = c00, c81 = c00, c90 = c00, c91 = c00, ca0 = c00, ca1 = c00,
           cb0 = c00, cb1 = c00, cc0 = c00, cc1 = c00, cd0 = c00, cd1 = c00;
#define LOADC(m, x0, x1)                                                    \
    if (M > m && load) {                                                    \
        x0 = full ? _mm512_loadu_ps(C + m * ldc)                            \
                  : _mm512_maskz_loadu_ps(k0, C + m * ldc);                 \
        x1 = full ? _mm512_loadu_ps(C + m * ldc + 16)                       \
                  : _mm512_maskz_loadu_ps(k1, C + m * ldc + 16);            \
    }
    LOADC(0, c00, c01) LOADC(1, c10, c11) LOADC(2, c20, c21) LOADC(3, c30, c31)
    LOADC(4, c40, c41) LOADC(5, c50, c51) LOADC(6, c60, c61) LOADC(7, c70, c71)
    LOADC(8, c80, c81) LOADC(9, c90, c91) LOADC(10, ca0, ca1) LOADC(11, cb0, cb1)
    LOADC(12, cc0, cc1) LOADC(13, cd0, cd1)
#undef LOADC
#pragma GCC unroll 4
    for (int64_t k = 0; k < kc; k++) {
        const __m512 b0 = packed || full ? _mm512_loadu_ps(B) : _mm512_maskz_loadu_ps(k0, B);
        const __m512 b1 = packed || full ? _mm512_loadu_ps(B + 16) : _mm512_maskz_loadu_ps(k1, B + 16);
        B += ldb;
        __m512 a;
#define STEP(m, x0, x1)                          \
    if (M > m) {                                 \
        a = _mm512_set1_ps(A[m * lda + k]);      \
        x0 = _mm512_fmadd_ps(a, b0, x0);         \
        x1 = _mm512_fmadd_ps(a, b1, x1);         \
    }
        STEP(0, c00, c01) STEP(1, c10, c11) STEP(2, c20, c21) STEP(3, c30, c31)
        STEP(4, c40, c41) STEP(5, c50, c51) STEP(6, c60, c61) STEP(7, c70, c71)
        STEP(8, c80, c81) STEP(9, c90, c91) STEP(10, ca0, ca1) STEP(11, cb0, cb1)
        STEP(12, cc0, cc1) STEP(13, cd0, cd1)
#undef STEP
    }
#define STOREC(m, x0, x1)                                          \
    if (M > m) {                                                   \
        if (full) {                                                \
            _mm512_storeu_ps(C + m * ldc, x0);                     \
            _mm512_storeu_ps(C + m * ldc + 16, x1);                \
        } else {                                                   \
            _mm512_mask_storeu_ps(C + m * ldc, k0, x0);            \
            _mm512_mask_storeu_ps(C + m * ldc + 16, k1, x1);       \
        }                                                          \
    }
    STOREC(0, c00, c01) STOREC(1, c10, c11) STOREC(2, c20, c21) STOREC(3, c30, c31)
    STOREC(4, c40, c41) STOREC(5, c50, c51) STOREC(6, c60, c61) STOREC(7, c70, c71)
    STOREC(8, c80, c81) STOREC(9, c90, c91) STOREC(10, ca0, ca1) STOREC(11, cb0, cb1)
    STOREC(12, cc0, cc1) STOREC(13, cd0, cd1)
#undef STOREC
}

typedef void (*uk_fn)(int, int64_t, const float *, int64_t, const float *, int64_t, float *,
                      int64_t, bool);

#define UK(M, FULL, PACKED)                                                                   \
    static void uk_##M##_##FULL##_##PACKED(int nr, int64_t kc, const float *A, int64_t lda,   \
                                           const float *B, int64_t ldb, float *C, int64_t ldc, \
                                           bool load) {                                       \
        ukernel_tpl(M, FULL, PACKED, nr, kc, A, lda, B, ldb, C, ldc, load);                   \
    }
#define UK_ALL(FULL, PACKED)                                                                     \
    UK(1, FULL, PACKED) UK(2, FULL, PACKED) UK(3, FULL, PACKED) UK(4, FULL, PACKED)              \
    UK(5, FULL, PACKED) UK(6, FULL, PACKED) UK(7, FULL, PACKED) UK(8, FULL, PACKED)              \
    UK(9, FULL, PACKED) UK(10, FULL, PACKED) UK(11, FULL, PACKED) UK(12, FULL, PACKED)           \
    UK(13, FULL, PACKED) UK(14, FULL, PACKED)                                                    \
    static const uk_fn uk_##FULL##_##PACKED[MR + 1] = {                                          \
        NULL,                  uk_1_##FULL##_##PACKED,  uk_2_##FULL##_##PACKED,                  \
        uk_3_##FULL##_##PACKED,  uk_4_##FULL##_##PACKED,  uk_5_##FULL##_##PACKED,                \
        uk_6_##FULL##_##PACKED,  uk_7_##FULL##_##PACKED,  uk_8_##FULL##_##PACKED,                \
        uk_9_##FULL##_##PACKED,  uk_10_##FULL##_##PACKED, uk_11_##FULL##_##PACKED,               \
        uk_12_##FULL##_##PACKED, uk_13_##FULL##_##PACKED, uk_14_##FULL##_##PACKED};
UK_ALL(1, 1)
UK_ALL(0, 1)
UK_ALL(1, 0)
UK_ALL(0, 0)
#undef UK_ALL
#undef UK

void kld_avx512_ukernel(int mr, int nr, int64_t kc, const float *A, int64_t lda, const float *B,
                        int64_t ldb, float *C, int64_t ldc, bool load) {
    const bool full = nr == NR, packed = lda == KLD_GEMM_LDA && ldb == NR;
    const uk_fn *t = packed ? (full ? uk_1_1 : uk_0_1) : (full ? uk_1_0 : uk_0_0);
    t[mr](nr, kc, A, lda, B, ldb, C, ldc, load);
}

/* ---- packing ---- */

/* In-register 16×16 transpose: r[i] = row i on entry, column i on exit. */
static inline __attribute__((always_inline)) void transpose16(__m512 r[16]) {
    __m512 t[16];
#pragma GCC unroll 16
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    /* t[2i], t[2i+1]: rows 2i, 2i+1 interleaved (pairs of columns 4L+{0,1} and 4L+{2,3}). */
#pragma GCC unroll 16
    for (int g = 0; g < 4; g++) {
        r[4 * g + 0] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], _MM_SHUFFLE(1, 0, 1, 0));
        r[4 * g + 1] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], _MM_SHUFFLE(3, 2, 3, 2));
        r[4 * g + 2] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], _MM_SHUFFLE(1, 0, 1, 0));
        r[4 * g + 3] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    /* r[4g + j], 128-bit lane L: rows 4g..4g+3 at column 4L + j. */
#pragma GCC unroll 16
    for (int j = 0; j < 4; j++) {
        __m512 w0 = _mm512_shuffle_f32x4(r[j], r[4 + j], 0x88);
        __m512 w1 = _mm512_shuffle_f32x4(r[j], r[4 + j], 0xDD);
        __m512 w2 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0x88);
        __m512 w3 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0xDD);
        t[j] = _mm512_shuffle_f32x4(w0, w2, 0x88);      /* column j */
        t[8 + j] = _mm512_shuffle_f32x4(w0, w2, 0xDD);  /* column 8 + j */
        t[4 + j] = _mm512_shuffle_f32x4(w1, w3, 0x88);  /* column 4 + j */
        t[12 + j] = _mm512_shuffle_f32x4(w1, w3, 0xDD); /* column 12 + j */
    }
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) r[i] = t[i];
}

/* panel[k*32 + j] = src[j*ld + k] for j < rows (<= 32), 0 for rows <= j < 32. */
void kld_avx512_pack32(const float *src, int64_t ld, int rows, int64_t kc, float *panel) {
    int64_t k = 0;
    for (; k + 16 <= kc; k += 16) {
        for (int half = 0; half < 2; half++) {
            __m512 r[16];
#pragma GCC unroll 16
            for (int i = 0; i < 16; i++)
                r[i] = half * 16 + i < rows ? _mm512_loadu_ps(src + (int64_t)(half * 16 + i) * ld + k)
                                            : _mm512_setzero_ps();
            transpose16(r);
#pragma GCC unroll 16
            for (int i = 0; i < 16; i++) _mm512_storeu_ps(panel + (k + i) * NR + half * 16, r[i]);
        }
    }
    for (; k < kc; k++)
        for (int j = 0; j < NR; j++) panel[k * NR + j] = j < rows ? src[j * ld + k] : 0.0f;
}
