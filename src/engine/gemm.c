/* gemm.c — drivers around the microkernel: per-thread panel ranges,
 * k-blocking, dequantization into packed panels, activation tiles
 * (see gemm.h). */
#include "engine/gemm.h"

typedef struct gemm_job {
    const kld_engine_kernels *kr;
    const kld_tensor *W;
    const kld_type_info *ti;
    kld_to_float_fn to_float;  /* W's rows to float32, the kernel chosen at start-up */
    kld_gemv_direct_fn direct; /* the one-row product from W's blocks, or NULL */
    kld_repacked rp;           /* W's repacked copy (data NULL: read W's rows) */
    kld_gemv_repacked_fn gemv_rp;
    kld_pack_repacked_fn pack_rp;
    uint64_t row_bytes;
    int64_t M, N, K;
    const float *A;
    int64_t lda;
    float *C;
    int64_t ldc;
    float *scratch;
    size_t scratch_stride;
} gemm_job;

/* Packs rows [n0, n0+rows) × k-range [kb, kb+kc) of W into one panel of
 * the kernel set's width: block types are dequantized (kc values per row,
 * whole blocks since KC is a multiple of every block size) into tmp, then
 * transposed. */
static void pack_panel(const gemm_job *j, int64_t n0, int rows, int64_t kb, int64_t kc, float *tmp,
                       float *panel) {
    if (j->rp.data) { /* n0 is a multiple of nr, which divides the layout's 32 rows */
        j->pack_rp(j->rp.data + (uint64_t)(n0 / KLD_REPACK_ROWS) * j->rp.panel_bytes, j->K,
                   (int)(n0 % KLD_REPACK_ROWS), j->kr->nr, kb, kc, panel);
        return;
    }
    const uint8_t *base = (const uint8_t *)j->W->data;
    if (j->W->type == KLD_TYPE_F16 && j->kr->pack_panel_f16) {
        j->kr->pack_panel_f16((const uint16_t *)(const void *)(base + (uint64_t)n0 * j->row_bytes) + kb, j->K, rows,
                              kc, panel);
        return;
    }
    if (j->W->type == KLD_TYPE_F32) {
        const float *src = (const float *)(const void *)(base + (uint64_t)n0 * j->row_bytes) + kb;
        j->kr->pack_panel(src, j->K, rows, kc, panel);
        return;
    }
    const uint64_t off = (uint64_t)(kb / j->ti->block_size) * (uint64_t)j->ti->type_size;
    for (int r = 0; r < rows; r++)
        j->to_float(base + (uint64_t)(n0 + r) * j->row_bytes + off, tmp + (int64_t)r * KLD_GEMM_LDA, kc);
    j->kr->pack_panel(tmp, KLD_GEMM_LDA, rows, kc, panel);
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* The file rows W's next block packs — columns [n0, n1) × k-range [kb, kb+kc) — in cache
 * lines numbered 0..: part `part` of `parts` of them is asked for (row-major W only: a
 * repacked copy is read as one sequential stream the prefetchers follow). Why: each row
 * contributes only kc values, too short a stream for the hardware to pick up, and the
 * microkernel's time over the current block hides the memory latency. */
static void prefetch_rows(const gemm_job *j, int64_t n0, int64_t n1, int64_t kb, int64_t kc, int64_t part,
                          int64_t parts) {
    if (j->rp.data || n1 <= n0) return;
    const uint64_t off = (uint64_t)(kb / j->ti->block_size) * (uint64_t)j->ti->type_size;
    const uint64_t bytes = (uint64_t)(kc / j->ti->block_size) * (uint64_t)j->ti->type_size;
    const int64_t lines = (int64_t)((bytes + 63) / 64), total = (n1 - n0) * lines;
    const uint8_t *base = (const uint8_t *)j->W->data + off;
    int64_t i = total * part / parts, r = n0 + i / lines, l = i % lines;
    for (const int64_t end = total * (part + 1) / parts; i < end; i++) {
        __builtin_prefetch(base + (uint64_t)r * j->row_bytes + (uint64_t)l * 64, 0, 2);
        if (++l == lines) l = 0, r++;
    }
}

/* Large M: per group of NC columns and k-block, pack the group's panels
 * (they stay in L2), then for each mr-row tile of activations copy it to a
 * buffer of stride KLD_GEMM_LDA (in L1 for the whole group) and run the
 * microkernel over the group's panels. */
static void gemm_task(void *ctx, int ith, int nth) {
    const gemm_job *j = ctx;
    const int nr = j->kr->nr, mr = j->kr->mr;
    const int64_t n_panels = (j->N + nr - 1) / nr, group = KLD_GEMM_NC / nr;
    int64_t pb, pe;
    kld_split(n_panels, ith, nth, &pb, &pe);
    float *packed = j->scratch + (size_t)ith * j->scratch_stride;
    float *tmp = packed + (size_t)KLD_GEMM_NC * KLD_GEMM_KC;
    float *atile = tmp + (size_t)KLD_NR_MAX * KLD_GEMM_LDA;
    for (int64_t g0 = pb; g0 < pe; g0 += group) {
        const int64_t g1 = min64(g0 + group, pe);
        for (int64_t kb = 0; kb < j->K; kb += KLD_GEMM_KC) {
            const int64_t kc = min64(j->K - kb, KLD_GEMM_KC);
            for (int64_t p = g0; p < g1; p++)
                pack_panel(j, p * nr, (int)min64(j->N - p * nr, nr), kb, kc, tmp,
                           packed + (p - g0) * KLD_GEMM_KC * nr);
            /* the block packed next: this group's next k-block, or the next group's first
             * (none after the thread's last group: then n1 <= n0) */
            const bool last_kb = kb + KLD_GEMM_KC >= j->K;
            const int64_t nb0 = (last_kb ? g1 : g0) * nr, nb1 = min64((last_kb ? min64(g1 + group, pe) : g1) * nr, j->N);
            const int64_t nkb = last_kb ? 0 : kb + KLD_GEMM_KC, nkc = min64(j->K - nkb, KLD_GEMM_KC);
            const int64_t tiles = (j->M + mr - 1) / mr;
            for (int64_t m0 = 0; m0 < j->M; m0 += mr) {
                prefetch_rows(j, nb0, nb1, nkb, nkc, m0 / mr, tiles);
                const int rows = (int)min64(j->M - m0, mr);
                for (int r = 0; r < rows; r++)
                    memcpy(atile + r * KLD_GEMM_LDA, j->A + (m0 + r) * j->lda + kb, sizeof(float) * (size_t)kc);
                /* the next tile's rows are far apart in A (not in cache): ask for
                 * them now, while the group's panels are multiplied */
                for (int64_t r = m0 + mr; r < min64(m0 + 2 * mr, j->M); r++)
                    for (int64_t k = 0; k < kc; k += 16) __builtin_prefetch(j->A + r * j->lda + kb + k, 0, 3);
                for (int64_t p = g0; p < g1; p++)
                    j->kr->ukernel(rows, (int)min64(j->N - p * nr, nr), kc, atile, KLD_GEMM_LDA,
                                   packed + (p - g0) * KLD_GEMM_KC * nr, nr,
                                   j->C + m0 * j->ldc + p * nr, j->ldc, kb > 0);
            }
        }
    }
}

/* Small M (decode): each panel is multiplied right after it is packed, so
 * it never leaves L1; the few activation rows are read in place. */
static void gemm_small_task(void *ctx, int ith, int nth) {
    const gemm_job *j = ctx;
    const int nr = j->kr->nr, mr = j->kr->mr;
    const int64_t n_panels = (j->N + nr - 1) / nr;
    int64_t pb, pe;
    kld_split(n_panels, ith, nth, &pb, &pe);
    float *panel = j->scratch + (size_t)ith * j->scratch_stride;
    float *tmp = panel + (size_t)KLD_GEMM_NC * KLD_GEMM_KC;
    for (int64_t p = pb; p < pe; p++) {
        const int64_t cols = min64(j->N - p * nr, nr);
        for (int64_t kb = 0; kb < j->K; kb += KLD_GEMM_KC) {
            const int64_t kc = min64(j->K - kb, KLD_GEMM_KC);
            pack_panel(j, p * nr, (int)cols, kb, kc, tmp, panel);
            for (int64_t m0 = 0; m0 < j->M; m0 += mr)
                j->kr->ukernel((int)min64(j->M - m0, mr), (int)cols, kc, j->A + m0 * j->lda + kb, j->lda,
                               panel, nr, j->C + m0 * j->ldc + p * nr, j->ldc, kb > 0);
        }
    }
}

/* One activation row on a set with a gemv entry: per panel of gemv_rows
 * weight rows, the set's direct kernel for W's type reads the rows' blocks
 * in place; without one, per k-block of KLD_GEMV_KC (whole rows for K up
 * to it: one sequential read of the panel, which the prefetchers follow),
 * each row is converted to f32 at stride KLD_GEMV_LD (rows missing from
 * the last group of 8 are zeros). */
static void gemv_task(void *ctx, int ith, int nth) {
    const gemm_job *j = ctx;
    const int R = j->kr->gemv_rows;
    const int64_t n_panels = (j->N + R - 1) / R;
    int64_t pb, pe;
    kld_split(n_panels, ith, nth, &pb, &pe);
    float *panel = j->scratch + (size_t)ith * j->scratch_stride;
    const uint8_t *base = (const uint8_t *)j->W->data;
    for (int64_t p = pb; p < pe; p++) {
        const int rows = (int)min64(j->N - p * R, R);
        const uint8_t *w = base + (uint64_t)(p * R) * j->row_bytes;
        float *y = j->C + p * R;
        if (j->rp.data) {
            j->gemv_rp(j->rp.data + (uint64_t)p * j->rp.panel_bytes, rows, j->K, j->A, y, false);
            continue;
        }
        if (j->direct) {
            j->direct(w, j->row_bytes, rows, j->K, j->A, y, false);
            continue;
        }
        for (int64_t kb = 0; kb < j->K; kb += KLD_GEMV_KC) {
            const int64_t kc = min64(j->K - kb, KLD_GEMV_KC);
            const uint64_t off = (uint64_t)(kb / j->ti->block_size) * (uint64_t)j->ti->type_size;
            for (int r = 0; r < rows; r++)
                j->to_float(w + (uint64_t)r * j->row_bytes + off, panel + r * KLD_GEMV_LD, kc);
            for (int r = rows; r % 8; r++) memset(panel + r * KLD_GEMV_LD, 0, sizeof(float) * (size_t)kc);
            j->kr->gemv_f32(panel, rows, kc, j->A + kb, y, kb > 0);
        }
    }
}

void kld_gemm_weights_repacked(kld_pool *pool, const kld_engine_kernels *kr, const kld_tensor *W,
                               kld_repacked rp, int64_t M, const float *A, int64_t lda, float *C,
                               int64_t ldc, float *scratch, size_t scratch_stride) {
    const kld_type_info *ti = kld_type_info_get(W->type);
    gemm_job j = {
        .kr = kr, .W = W, .ti = ti, .to_float = ti ? kld_type_kernels_of(ti)->to_float : NULL, .M = M, .N = W->ne[1], .K = W->ne[0], .A = A, .lda = lda,
        .C = C, .ldc = ldc, .scratch = scratch, .scratch_stride = scratch_stride,
    };
    if (rp.data && kr->gemv_repacked && kr->pack_repacked) {
        j.gemv_rp = kr->gemv_repacked(W->type);
        j.pack_rp = kr->pack_repacked(W->type);
        if (j.gemv_rp && j.pack_rp) j.rp = rp;
    }
    j.row_bytes = (uint64_t)(j.K / ti->block_size) * (uint64_t)ti->type_size;
    if (M <= 0) return;
    const bool gemv = M == 1 && kr->gemv_f32;
    if (gemv && kr->gemv_direct) j.direct = kr->gemv_direct(W->type);
    kld_pool_run(pool, gemv ? gemv_task : M < KLD_GEMM_SMALL_M ? gemm_small_task : gemm_task, &j);
}

void kld_gemm_weights(kld_pool *pool, const kld_engine_kernels *kr, const kld_tensor *W, int64_t M,
                      const float *A, int64_t lda, float *C, int64_t ldc, float *scratch,
                      size_t scratch_stride) {
    kld_gemm_weights_repacked(pool, kr, W, (kld_repacked){0}, M, A, lda, C, ldc, scratch, scratch_stride);
}

void kld_gemm_strided(const kld_engine_kernels *kr, int64_t M, int64_t N, int64_t K,
                      const float *A, int64_t lda, const float *B, int64_t ldb, float *C,
                      int64_t ldc) {
    for (int64_t n0 = 0; n0 < N; n0 += kr->nr) {
        const int nr = (int)min64(N - n0, kr->nr);
        for (int64_t m0 = 0; m0 < M; m0 += kr->mr) {
            const int mr = (int)min64(M - m0, kr->mr);
            kr->ukernel(mr, nr, K, A + m0 * lda, lda, B + n0, ldb, C + m0 * ldc + n0, ldc, false);
        }
    }
}

void kld_gemm_strided_acc(const kld_engine_kernels *kr, int64_t M, int64_t N, int64_t K,
                          const float *A, int64_t lda, const float *B, int64_t ldb, float *C,
                          int64_t ldc) {
    for (int64_t n0 = 0; n0 < N; n0 += kr->nr) {
        const int nr = (int)min64(N - n0, kr->nr);
        for (int64_t m0 = 0; m0 < M; m0 += kr->mr) {
            const int mr = (int)min64(M - m0, kr->mr);
            kr->ukernel(mr, nr, K, A + m0 * lda, lda, B + n0, ldb, C + m0 * ldc + n0, ldc, true);
        }
    }
}
