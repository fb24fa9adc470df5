/* kernels.h — the engine's inner loops behind one dispatch table: the GEMM
 * microkernel, panel packing, the one-row (decode) products, and the
 * exp-based row operations. Each entry has a scalar reference
 * (kernels_ref.c), an AVX2/FMA twin (kernels_avx2.c; the one-row products
 * read straight from the blocks in gemv_direct_avx2.c, the products over
 * repacked weights, which only SIMD sets have, in repacked_avx2.c) and,
 * for the GEMM entries and the repacked one-row products, an AVX-512 twin
 * (kernels_avx512.c, repacked_avx512.c); all return
 * the same bits: they evaluate the same operations (the same fused
 * multiply-adds, and no fused ones where the reference has none) in the
 * same order. Sets differ only in their register tile (mr × nr). */
#ifndef KLD_ENGINE_KERNELS_H
#define KLD_ENGINE_KERNELS_H

#include "common/common.h"

#define KLD_MR 6  /* microkernel rows every set handles (its mr is at least this) */
#define KLD_NR 16 /* microkernel columns every set handles (its nr is at least this) */
#define KLD_MR_MAX 14 /* the largest mr of any set */
#define KLD_NR_MAX 32 /* the largest nr of any set */

/* Weight rows of one one-row call (gemv_f32 and gemv_direct): four groups
 * of 8, four independent fma chains. */
#define KLD_GEMV_ROWS 32

/* y[n] (n < rows <= KLD_GEMV_ROWS) = the fma chain over k < K of a[k] · (row n of a
 * weight type's rows at w, row_bytes apart, widened as to_float does), from
 * y[n] when `load`, else from 0 — gemv_f32's chain, read straight from the
 * blocks. K is a multiple of the type's block size. */
typedef void (*kld_gemv_direct_fn)(const uint8_t *w, uint64_t row_bytes, int rows, int64_t K,
                                   const float *a, float *y, bool load);

/* Weights repacked at load for the SIMD sets (weight_pack.c): panels of
 * KLD_REPACK_ROWS rows one after the other, each read as one sequential
 * stream (no 32 row streams side by side, no transposes). Rows past the
 * matrix are zeros.
 *   f16: column k of a panel is its 32 rows' halves, 64 bytes, k < K.
 *   q4_K: per super-block of 256 columns, four records of 8 rows (rows
 *     8g..8g+7 of the panel), KLD_Q4KX8_BYTES each: d[8] and dmin[8]
 *     (f16), the 6-bit scales sc[8 groups][8 rows] and mins m[8][8] as
 *     bytes, then per column pair (2c, 2c+1), c < 128, 8 bytes: byte r
 *     holds row r's quant of column 2c in its low nibble, of 2c+1 in the
 *     high one. The same bytes as eight q4_K blocks, plus 32 for the
 *     unpacked scales.
 *   q6_K: per super-block, four records of 8 rows, KLD_Q6KX8_BYTES each:
 *     d[8] (f16), the int8 scales sc[16 groups][8 rows], then per column k
 *     < 256, 8 bytes: byte r is row r's quant minus 32 (int8). Signed bytes
 *     instead of 4 + 2 bits: one widening per column, 30 % more bytes. */
#define KLD_REPACK_ROWS 32
#define KLD_Q4KX8_BYTES (32 + 128 + 1024)
#define KLD_Q6KX8_BYTES (16 + 128 + 2048)

/* y[n] (n < rows <= KLD_REPACK_ROWS) = the fma chain over k < K of a[k] ·
 * (row n of the repacked panel, widened as to_float does), from y[n] when
 * `load`, else from 0 (gemv_direct's chain). */
typedef void (*kld_gemv_repacked_fn)(const uint8_t *panel, int rows, int64_t K, const float *a,
                                     float *y, bool load);
/* out[(k - kb)*nr + j] = row col0 + j of the repacked panel (K columns) at
 * column k, widened as to_float does, for kb <= k < kb + kc and j < nr (nr
 * a multiple of 8, col0 + nr <= KLD_REPACK_ROWS; kb and kc multiples of
 * the type's block size). */
typedef void (*kld_pack_repacked_fn)(const uint8_t *panel, int64_t K, int col0, int nr, int64_t kb,
                                     int64_t kc, float *out);

/* Writes one panel of the layout from its rows (row[r] the start of row r's
 * blocks, NULL for rows past the matrix; K columns). */
typedef void (*kld_repack_fn)(const uint8_t *const *row, int64_t K, uint8_t *panel);

typedef struct kld_engine_kernels {
    const char *name;
    int mr, nr; /* register tile: the ukernel's largest mr and nr; pack_panel's width */
    /* C[m][n] (m < mr <= this->mr, n < nr <= this->nr) =
     *   fma-chain over k = 0..kc-1 of A[m*lda + k] * B[k*ldb + n],
     * starting from C[m][n] when `load`, else from 0. Only the first nr
     * columns of B are read. */
    void (*ukernel)(int mr, int nr, int64_t kc, const float *A, int64_t lda, const float *B,
                    int64_t ldb, float *C, int64_t ldc, bool load);
    /* panel[k*16 + j] = src[j*ld + k] for j < rows (<= 16), 0 for rows <= j < 16. */
    void (*pack16)(const float *src, int64_t ld, int rows, int64_t kc, float *panel);
    /* panel[k*nr + j] = src[j*ld + k] for j < rows (<= nr), 0 for rows <= j < nr,
     * with nr = this->nr (the weight GEMM's panel). */
    void (*pack_panel)(const float *src, int64_t ld, int rows, int64_t kc, float *panel);
    /* One activation row (decode), or NULL (then the ukernel does it):
     * y[n] (n < rows <= gemv_rows) = the fma chain over k < kc (<=
     * KLD_GEMV_KC) of a[k] · w[n*KLD_GEMV_LD + k] from y[n] when `load`,
     * else from 0 — the ukernel's chain for mr = 1. The stride is a
     * constant so that every row is one register plus an offset. */
    void (*gemv_f32)(const float *w, int rows, int64_t kc, const float *a, float *y, bool load);
    /* Weight rows one gemv call handles (a multiple of 8; 0 without a gemv
     * entry): more rows than nr give more independent fma chains. */
    int gemv_rows;
    /* The one-row product straight from rows of a weight type, or NULL for
     * types (and sets) without one (then gemv_f32 runs on converted rows). */
    kld_gemv_direct_fn (*gemv_direct)(uint32_t type); /* only with gemv_rows = KLD_GEMV_ROWS */
    /* In place: x = exp(x - max) / sum (entries of -inf become 0). */
    void (*softmax)(float *x, int64_t n);
    /* In place on gate: g = act(g) * up. */
    void (*silu_mul)(float *g, const float *up, int64_t n);
    void (*gelu_tanh_mul)(float *g, const float *up, int64_t n);
    /* In place: x = cap * tanh(x / cap). */
    void (*softcap)(float *x, int64_t n, float cap);
    /* In place: x = x * s (attention's score scale: one float multiply each). */
    void (*scale)(float *x, int64_t n, float s);
    /* The largest of x[0..n) (-inf for none; NaNs never win). */
    float (*max)(const float *x, int64_t n);
    /* sum_i exp(x[i] - mx), each exp in float, summed in 8 double lanes. */
    double (*sum_exp)(const float *x, int64_t n, float mx);
    /* In place: x[i] = its base-2 softmax weight 2^(x[i]·log2(e) - K)
     * against the integer exponent K (kernels_ref.c: the exact arithmetic;
     * -inf gives 0); returns sum plus the weights, added in double: each
     * group of 16 from x[0] pairwise (j with j + 8, then + 4, + 2, + 1), the
     * groups in index order (so a sum over key blocks of multiples of 16
     * can continue one running sum: the online softmax then adds exactly as
     * the exact one does). */
    double (*base2_weights)(float *x, int64_t n, double K, double sum);
    /* The one-row product and the GEMM panel over weights repacked at load
     * (weight_pack.c, the layouts below), for the types the set has them
     * for, else NULL (and always NULL in the ref set, which reads the rows). */
    kld_gemv_repacked_fn (*gemv_repacked)(uint32_t type);
    kld_pack_repacked_fn (*pack_repacked)(uint32_t type);
    kld_repack_fn (*repack)(uint32_t type); /* writes the layout (NULL where the two above are) */
    /* pack_panel from f16 values (widened exactly: the same panel as pack_panel of their
     * float32 values), or NULL (then rows are converted first). */
    void (*pack_panel_f16)(const uint16_t *src, int64_t ld, int rows, int64_t kc, float *panel);
} kld_engine_kernels;

_Static_assert(KLD_REPACK_ROWS == KLD_GEMV_ROWS && KLD_REPACK_ROWS % KLD_NR_MAX == 0,
               "a repacked panel is one gemv call and a whole number of GEMM panels");

/* The one-row product's k-block (a multiple of every block size) and row
 * stride: rows 64 bytes apart modulo 4 KiB, so that the rows read side by
 * side do not evict each other from L1. */
#define KLD_GEMV_KC 2048
#define KLD_GEMV_LD (KLD_GEMV_KC + 16)

/* The set chosen once for this CPU (KLD_KERNELS=ref forces the scalar set). */
const kld_engine_kernels *kld_engine_kernels_get(void);
const kld_engine_kernels *kld_engine_kernels_ref(void);
/* The AVX2 set, or NULL when the CPU lacks AVX2/FMA/F16C. */
const kld_engine_kernels *kld_engine_kernels_avx2(void);
extern const kld_engine_kernels kld_engine_kernels_avx2_table;
/* The AVX-512 set (F/BW/VL/DQ: 14×32 GEMM tile, AVX2 row operations), or
 * NULL when the CPU or the OS lacks AVX-512. */
const kld_engine_kernels *kld_engine_kernels_avx512(void);

/* gemv_direct_avx2.c: the AVX2 set's gemv_direct (f16, q4_K, q6_K). */
kld_gemv_direct_fn kld_avx2_gemv_direct(uint32_t type);
kld_gemv_repacked_fn kld_avx2_gemv_repacked(uint32_t type);
kld_pack_repacked_fn kld_avx2_pack_repacked(uint32_t type);
kld_repack_fn kld_avx2_repack(uint32_t type);

/* kernels_avx512.c: the AVX-512 GEMM entries (mr 14, nr 32). */
void kld_avx512_ukernel(int mr, int nr, int64_t kc, const float *A, int64_t lda, const float *B,
                        int64_t ldb, float *C, int64_t ldc, bool load);
void kld_avx512_pack32(const float *src, int64_t ld, int rows, int64_t kc, float *panel);
void kld_avx512_pack32_f16(const uint16_t *src, int64_t ld, int rows, int64_t kc, float *panel);
/* The AVX-512 base2_weights (kernels_avx512.c). */
double kld_avx512_base2_weights(float *x, int64_t n, double K, double sum);
/* repacked_avx512.c: the one-row product over repacked q4_K and q6_K (16
 * rows per vector), the AVX2 one for the other types. */
kld_gemv_repacked_fn kld_avx512_gemv_repacked(uint32_t type);

/* Scalar exp with the kernels' exact arithmetic (for code outside the table). */
float kld_expf_ref(float x);
/* log2(e) in double: base2_weights' x = s·log2(e), and attention's K =
 * ceil(max x) must use the same constant. */
#define KLD_LOG2E_D 1.4426950408889634
/* x · 2^j for j in [-160, 0]: exact while the result is a normal float,
 * rounded once below that (the scaling base2_weights applies). */
float kld_scale_pow2(float x, int j);

#endif
