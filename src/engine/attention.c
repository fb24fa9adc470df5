/* attention.c — causal (optionally sliding-window) softmax attention for
 * one chunk, as blocked matrix products: per (head, block of query rows),
 * S = Q·K^T over the visible key range read in place from the transposed
 * K cache, scale / soft-cap / mask, softmax weights in base 2 against the
 * row maximum rounded up to a power of two (kernels: base2_weights), O = P·V as
 * float fma chains over the keys in order, then O / sum. attention=exact
 * takes the row maximum first (and beyond KLD_ATTN_TILE_KEYS keys walks them
 * in blocks as online does: the same bits); attention=online walks key
 * blocks once and rescales, exactly, by powers of two. Masked keys contribute exact zeros
 * and every sum runs over the keys in one fixed order (the softmax's sum in
 * groups of 16 keys at multiples of 16, pairwise within a group, the groups
 * in order: key ranges and blocks start at multiples of 16), so rows do not
 * depend on chunk size or threads. Attention sinks (gpt-oss: one logit per head that
 * attends to nothing) join the maximum and the sum as one more weight. */
#include "engine/gemm.h"
#include "engine/internal.h"
#include "engine/kv_scheme.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

typedef struct attn_job {
    kld_session *s;
    kld_session *const *rows; /* batched decode: one query block per row, its own cache */
    int64_t il, n, pos;
    int64_t n_qblocks;
    bool swa;
    int64_t hd, hdv, nkv; /* layer il's head sizes and KV heads */
} attn_job;

/* Rows [lo, lo + L) of kv head h of a typed K (v false) or V cache into
 * dst[L][hd]: the f32 prefix rows (kv_start) copied, the others dequantized. */
static void load_rows(const kld_kv_layer *c, int64_t n_ctx, bool v, int64_t h, int64_t lo, int64_t L,
                      int64_t hd, float *dst) {
    int64_t n_f = c->n_pre - lo < 0 ? 0 : c->n_pre - lo < L ? c->n_pre - lo : L;
    if (n_f) memcpy(dst, (v ? c->v_pre : c->k_pre) + (h * c->n_pre + lo) * hd, (size_t)(n_f * hd) * sizeof(float));
    if (L > n_f)
        kld_kv_load_rows(v ? c->v_type : c->k_type, kld_kv_scheme_row(c, n_ctx, v, h, lo + n_f),
                         dst + n_f * hd, L - n_f, hd);
}

/* The visible keys [lo, lo + L) of kv head kvh in session cs's cache as
 * K^T (*kt, row stride *ldkt) and V (*v, rows of hdv): read in place from
 * an f32 cache, else dequantized into this thread's aux rows (of j->s). */
static void kv_view(const attn_job *j, const kld_session *cs, int ith, int64_t kvh, int64_t lo,
                    int64_t L, const float **kt, int64_t *ldkt, const float **v) {
    kld_session *s = j->s;
    const int64_t hd = j->hd, hdv = j->hdv;
    const kld_kv_layer *c = &cs->kvl[j->il];
    float *aux = s->attn_aux + (size_t)ith * s->attn_aux_stride;
    float *kbuf = aux, *vbuf = aux + hd * s->ldk; /* vbuf: max(hd, hdv) · ldk floats */
    if (c->k_type == KLD_TYPE_F32) {
        *kt = (const float *)c->k + kvh * hd * cs->ldk + lo;
        *ldkt = cs->ldk;
    } else {
        /* dequantize the rows into vbuf, transpose into kbuf */
        load_rows(c, cs->n_ctx, false, kvh, lo, L, hd, vbuf);
        const int64_t ld = (L + 15) & ~(int64_t)15;
        for (int64_t key = 0; key < L; key++)
            for (int64_t d = 0; d < hd; d++) kbuf[d * ld + key] = vbuf[key * hd + d];
        *kt = kbuf;
        *ldkt = ld;
    }
    if (c->v_type == KLD_TYPE_F32) {
        *v = (const float *)c->v + (kvh * cs->n_ctx + lo) * hdv;
    } else {
        load_rows(c, cs->n_ctx, true, kvh, lo, L, hdv, vbuf);
        *v = vbuf;
    }
}

/* Scale, soft-cap and mask of score row `row` (keys lo..lo+L-1) for the
 * query at position p. */
static void scores_finish(const attn_job *j, float *row, int64_t L, int64_t lo, int64_t p) {
    const kld_hparams *hp = &j->s->model->hp;
    const float scale = (float)hp->attn_scale, cap = (float)hp->attn_softcap;
    j->s->kr->scale(row, L, scale);
    if (cap > 0) j->s->kr->softcap(row, L, cap);
    /* masked: keys after p, and with a sliding window keys at or before
     * p - window — as index ranges of the row, not a test per key */
    const int64_t after = p - lo + 1 < 0 ? 0 : p - lo + 1;
    for (int64_t c = after; c < L; c++) row[c] = -INFINITY;
    if (j->swa) {
        const int64_t before = p - hp->sliding_window - lo + 1; /* keys lo + c with c < before */
        for (int64_t c = 0; c < (before < L ? before : L); c++) row[c] = -INFINITY;
    }
}

/* Softmax weights in base 2 against a power-of-two maximum
 * (kernels_ref.c, base2_weights): the weight of score s against exponent K
 * is 2^(s·log2(e) - K), computed so that its rounding depends on s alone
 * and against another K it differs by an exact power of two. This is what
 * lets the online softmax agree with the exact one to the last bit. K =
 * ceil(max x), so every weight is at most 1 and the largest above 1/2. */

static double pow2_exponent(float max_score) {
    return max_score == -INFINITY ? -INFINITY : ceil((double)max_score * KLD_LOG2E_D);
}

/* The base-2 weight of a sink logit against exponent K (added to the
 * softmax's sum only, last: the sink contributes no value). */
static double sink_weight(const kld_engine_kernels *kr, float sink, double K) {
    float w = sink;
    return kr->base2_weights(&w, 1, K, 0);
}

/* act=q8 with an f16 V and a sink: ggml_soft_max with sinks (the sink
 * joins the maximum and the double sum of expf), float32 probabilities. */
static void softmax_sink(float *row, int64_t n, float sink) {
    float mx = sink;
    for (int64_t c = 0; c < n; c++) mx = row[c] > mx ? row[c] : mx;
    double sum = 0;
    for (int64_t c = 0; c < n; c++) sum += (double)(row[c] = expf(row[c] - mx));
    sum += (double)expf(sink - mx);
    const float inv = (float)(1.0 / sum);
    for (int64_t c = 0; c < n; c++) row[c] *= inv;
}

/* Key blocks of B keys, one pass (attention=online, and attention=exact
 * over long key ranges): per query row a running maximum (as the exponent
 * k) and sum l, the output O so far rescaled by 2^(k_old - k_new) whenever a
 * block raises the maximum (flash-attention style), the block's weights
 * continuing l's one running sum and its P·V continuing O's fma chains,
 * the sink's weight added last, O / l at the end. Every rescaling is by an
 * exact power of two and every sum runs in the one-pass order, so the
 * result is the one-pass (materialized) one bit for bit, while the scores
 * held are B per row, not the whole key range. */
static void online_block(const attn_job *j, int ith, const float *q, int64_t rows, int64_t p0,
                         int64_t lo, int64_t hi, const float *kt, int64_t ldkt, const float *v,
                         float *out, int64_t ldo, const float *sink, int64_t B) {
    kld_session *s = j->s;
    const int64_t hd = j->hd, hdv = j->hdv;
    float *S = s->scratch + (size_t)ith * s->scratch_stride;
    /* running state: the last ONLINE_AUX floats of the aux rows */
    float *aux = s->attn_aux + (size_t)ith * s->attn_aux_stride + s->attn_aux_stride -
                 KLD_ONLINE_AUX_FLOATS(hdv);
    double *l = (double *)(void *)aux, *k = l + KLD_ATTN_QB;
    float *O = (float *)(void *)(k + KLD_ATTN_QB);
    for (int64_t r = 0; r < rows; r++) { /* a sink starts the running maximum */
        k[r] = sink ? pow2_exponent(*sink) : -INFINITY;
        l[r] = 0;
        for (int64_t d = 0; d < hdv; d++) O[r * hdv + d] = 0;
    }
    for (int64_t b0 = lo; b0 < hi; b0 += B) {
        const int64_t nb = hi - b0 < B ? hi - b0 : B;
        kld_gemm_strided(s->kr, rows, nb, hd, q, s->ld_qkv, kt + (b0 - lo), ldkt, S, s->ldk);
        for (int64_t r = 0; r < rows; r++) {
            float *row = S + r * s->ldk;
            scores_finish(j, row, nb, b0, p0 + r);
            const double kb = pow2_exponent(s->kr->max(row, nb));
            if (kb > k[r]) {
                if (k[r] > -INFINITY) { /* exact rescaling of the output and sum so far */
                    const int shift = k[r] - kb < -160 ? -160 : (int)(k[r] - kb);
                    l[r] = ldexp(l[r], shift);
                    for (int64_t d = 0; d < hdv; d++) O[r * hdv + d] = kld_scale_pow2(O[r * hdv + d], shift);
                }
                k[r] = kb;
            }
            l[r] = s->kr->base2_weights(row, nb, k[r], l[r]);
        }
        kld_gemm_strided_acc(s->kr, rows, hdv, nb, S, s->ldk, v + (b0 - lo) * hdv, hdv, O, hdv);
    }
    if (sink)
        for (int64_t r = 0; r < rows; r++) l[r] += sink_weight(s->kr, *sink, k[r]);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t d = 0; d < hdv; d++)
            out[r * ldo + d] = l[r] > 0 ? (float)((double)O[r * hdv + d] / l[r]) : 0.0f;
}

static void attn_task(void *ctx, int ith, int nth) {
    const attn_job *j = ctx;
    kld_session *s = j->s;
    const kld_hparams *hp = &s->model->hp;
    const kld_engine_kernels *kr = s->kr;
    const int64_t hd = j->hd, hdv = j->hdv, nkv = j->nkv;
    const int64_t group = hp->n_head / nkv;
    const int64_t ldo = hp->n_head * hdv;
    const int64_t window = hp->sliding_window;
    float *S = s->scratch + (size_t)ith * s->scratch_stride;
    const int64_t n_tasks = hp->n_head * j->n_qblocks;
    /* Round-robin over (head, query block): causal blocks grow with the
     * row index, so interleaving balances the threads. */
    for (int64_t t = ith; t < n_tasks; t += nth) {
        const int64_t h = t % hp->n_head, qb = t / hp->n_head;
        const int64_t kvh = h / group;
        /* batched decode: block qb is row qb alone, exactly as that
         * session's own one-token step computes it */
        const int64_t i0 = j->rows ? qb : qb * KLD_ATTN_QB;
        const int64_t i1 = j->rows ? qb + 1 : i0 + KLD_ATTN_QB < j->n ? i0 + KLD_ATTN_QB : j->n;
        const int64_t rows = i1 - i0;
        const kld_session *cs = j->rows ? j->rows[qb] : s;
        const int64_t p_first = j->rows ? cs->pos : j->pos + i0, hi = p_first + rows;
        int64_t lo = 0;
        if (j->swa && p_first - window + 1 > 0) lo = p_first - window + 1;
        lo &= ~(int64_t)15;
        const int64_t L = hi - lo;
        const float *q = s->qkv + i0 * s->ld_qkv + h * hd;
        const float *kt, *v;
        int64_t ldkt;
        kv_view(j, cs, ith, kvh, lo, L, &kt, &ldkt, &v);
        float *out = s->attn + i0 * ldo + h * hdv;
        const float *sink = s->model->lv[j->il].sinks ? s->model->lv[j->il].sinks + h : NULL;
        /* act=q8, f16 V: llama.cpp's KQ·V product takes float32 softmax
         * probabilities rounded to f16 (of the whole row: not in blocks) */
        const bool f16_probs = s->lv.act == KLD_ACT_Q8 && cs->kvl[j->il].v_type == KLD_TYPE_F16;
        if (s->lv.attention == KLD_ATTN_ONLINE) {
            online_block(j, ith, q, rows, p_first, lo, hi, kt, ldkt, v, out, ldo, sink, s->lv.attn_block);
            continue;
        }
        if (!f16_probs && L > KLD_ATTN_TILE_KEYS) { /* the same bits, the scores in cache */
            online_block(j, ith, q, rows, p_first, lo, hi, kt, ldkt, v, out, ldo, sink, KLD_ATTN_TILE_BLOCK);
            continue;
        }
        kld_gemm_strided(kr, rows, L, hd, q, s->ld_qkv, kt, ldkt, S, s->ldk);
        double l[KLD_ATTN_QB];
        for (int64_t r = 0; r < rows; r++) {
            float *row = S + r * s->ldk;
            scores_finish(j, row, L, lo, p_first + r);
            if (f16_probs) {
                if (sink) softmax_sink(row, L, *sink);
                else kr->softmax(row, L);
                kld_act_round_vec(KLD_ACT_Q8, KLD_TYPE_F16, row, row, L);
                continue;
            }
            float mx = kr->max(row, L);
            if (sink && *sink > mx) mx = *sink;
            const double K = pow2_exponent(mx);
            l[r] = kr->base2_weights(row, L, K, 0) + (sink ? sink_weight(kr, *sink, K) : 0);
        }
        kld_gemm_strided(kr, rows, hdv, L, S, s->ldk, v, hdv, out, ldo);
        if (!f16_probs) /* the normalisation last, as the online softmax can only do it */
            for (int64_t r = 0; r < rows; r++)
                for (int64_t d = 0; d < hdv; d++)
                    out[r * ldo + d] = l[r] > 0 ? (float)((double)out[r * ldo + d] / l[r]) : 0.0f;
    }
}

void kld_attention(kld_session *s, kld_session *const *rows, int64_t il, int64_t n, int64_t pos) {
    attn_job j = {
        .s = s, .rows = rows, .il = il, .n = n, .pos = pos,
        .n_qblocks = rows ? n : (n + KLD_ATTN_QB - 1) / KLD_ATTN_QB,
        .swa = kld_hparams_layer_swa(&s->model->hp, il),
        .hd = kld_hp_head_dim(&s->model->hp, il),
        .hdv = kld_hp_head_dim_v(&s->model->hp, il),
        .nkv = kld_hp_n_head_kv(&s->model->hp, il),
    };
    kld_pool_run(s->pool, attn_task, &j);
}
