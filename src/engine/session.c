/* session.c — the memory plan and the session's single arena: KV cache,
 * recurrent state, per-chunk activations, RoPE tables and per-thread
 * scratch are carved out of one allocation made at creation, so
 * evaluation never allocates. Only attention layers have a KV cache. */
#include "engine/gemm.h"
#include "engine/internal.h"
#include "engine/lora.h"
#include "engine/kv_scheme.h"
#include "model/rope.h"

#include <inttypes.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>

#define MAX_CTX (INT64_C(1) << 24)
#define ALIGN_FLOATS 16 /* 64 bytes */

/* Overflow-checked accumulation of float counts, each region 64-byte aligned. */
typedef struct sizer {
    uint64_t floats;
    bool overflow;
} sizer;

static uint64_t take(sizer *z, uint64_t a, uint64_t b, uint64_t c) {
    uint64_t n = 0, start = z->floats;
    if (!kld_mul_u64(a, b, &n) || !kld_mul_u64(n, c, &n) ||
        !kld_add_u64(n, ALIGN_FLOATS - 1, &n)) {
        z->overflow = true;
        return start;
    }
    n &= ~(uint64_t)(ALIGN_FLOATS - 1);
    if (!kld_add_u64(z->floats, n, &z->floats)) z->overflow = true;
    return start;
}

/* Positions of a typed cache kept f32 (the kv_start lever). */
static int64_t kv_prefix(const kld_levers *lv, int64_t n_ctx) {
    return lv->kv_start < n_ctx ? lv->kv_start : n_ctx;
}

/* Floats of the scheme rows of a typed layer's K or V (before its f32
 * prefix rows, which start on a float boundary). */
static uint64_t kv_scheme_floats(int64_t n_head_kv, uint32_t type, uint64_t hd, int64_t n_rows,
                                 bool *overflow) {
    uint64_t n = 0;
    if (!kld_mul_u64((uint64_t)n_head_kv * (uint64_t)n_rows, kld_kv_row_bytes(type, (int64_t)hd), &n))
        *overflow = true;
    return n / 4 + (n % 4 != 0);
}

/* True when layer il has a KV cache of its own (an attention layer that
 * does not read an earlier layer's). */
static bool has_cache(const kld_hparams *hp, int64_t il) {
    return kld_hparams_layer_kind(hp, il) == KLD_LAYER_ATTN && kld_hp_has_own_kv(hp, il);
}

/* Floats (64-byte aligned) of one layer's K (v false) or V cache. */
static uint64_t kv_layer_floats(const kld_model *m, const kld_levers *lv, int64_t n_ctx,
                                int64_t ldk, int64_t il, bool v, bool *overflow) {
    const kld_hparams *hp = &m->hp;
    if (!has_cache(hp, il)) return 0;
    const uint32_t type = kld_kv_map_type(v ? &lv->kv_v : &lv->kv_k, il);
    const uint64_t hd = (uint64_t)(v ? kld_hp_head_dim_v(hp, il) : kld_hp_head_dim(hp, il));
    const int64_t nkv = kld_hp_n_head_kv(hp, il);
    uint64_t n = 0;
    if (type == KLD_TYPE_F32) {
        if (!kld_mul_u64((uint64_t)nkv * hd, (uint64_t)(v ? n_ctx : ldk), &n))
            *overflow = true;
    } else {
        const int64_t pre = kv_prefix(lv, n_ctx);
        uint64_t p = 0;
        n = kv_scheme_floats(nkv, type, hd, n_ctx - pre, overflow);
        if (!kld_mul_u64((uint64_t)nkv * hd, (uint64_t)pre, &p) || !kld_add_u64(n, p, &n))
            *overflow = true;
    }
    if (n > UINT64_MAX - ALIGN_FLOATS) *overflow = true;
    return (n + ALIGN_FLOATS - 1) & ~(uint64_t)(ALIGN_FLOATS - 1);
}

/* Bytes one position adds to the cache, all layers (K and V). */
static uint64_t kv_token_bytes(const kld_model *m, const kld_levers *lv) {
    const kld_hparams *hp = &m->hp;
    uint64_t total = 0;
    for (int64_t il = 0; il < hp->n_layer; il++)
        for (int v = 0; v < 2 && has_cache(hp, il); v++) {
            const uint32_t t = kld_kv_map_type(v ? &lv->kv_v : &lv->kv_k, il);
            const int64_t hd = v ? kld_hp_head_dim_v(hp, il) : kld_hp_head_dim(hp, il);
            total += (uint64_t)kld_hp_n_head_kv(hp, il) * kld_kv_row_bytes(t, hd);
        }
    return total;
}

static bool kv_typed(const kld_model *m, const kld_levers *lv) {
    for (int64_t il = 0; il < m->hp.n_layer; il++)
        if (kld_kv_map_type(&lv->kv_k, il) != KLD_TYPE_F32 ||
            kld_kv_map_type(&lv->kv_v, il) != KLD_TYPE_F32)
            return true;
    return false;
}

/* Floats (64-byte aligned) of layer il's recurrent state. */
static uint64_t rec_layer_floats(const kld_hparams *hp, int64_t il) {
    uint64_t n = 0;
    if (kld_hparams_layer_kind(hp, il) == KLD_LAYER_SHORTCONV) n = kld_shortconv_state_floats(hp);
    if (kld_hparams_layer_kind(hp, il) == KLD_LAYER_DELTANET) n = kld_deltanet_state_floats(hp);
    return (n + ALIGN_FLOATS - 1) & ~(uint64_t)(ALIGN_FLOATS - 1);
}

/* Floats of the recurrent blocks' per-chunk activations (the largest kind's). */
static uint64_t rec_act_floats(const kld_hparams *hp, int64_t max_chunk) {
    uint64_t n = 0, k = 0;
    for (int64_t il = 0; il < hp->n_layer; il++) {
        if (kld_hparams_layer_kind(hp, il) == KLD_LAYER_SHORTCONV) k = kld_shortconv_act_floats(hp, max_chunk);
        if (kld_hparams_layer_kind(hp, il) == KLD_LAYER_DELTANET) k = kld_deltanet_act_floats(hp, max_chunk);
        if (k > n) n = k;
    }
    return n;
}

typedef struct layout {
    uint64_t kv, rec, rec_act, ar, aux, x, xn, qkv, attn, tmp, qg, mla, gu, ple, ple_gate, ple_row, rope0, rope1,
        rope_ff, scratch;
    uint64_t moe_probs, moe_ids, moe_w, moe_list, moe_count, moe_sort, moe_x, moe_y, moe_sg, moe_rin, moe_dense;
    uint64_t kv_floats, rec_floats, act_floats, scratch_floats, total_floats;
    size_t scratch_stride, aux_stride;
    int64_t ldk, ld_qkv, ar_ld;
} layout;

static kld_status plan_layout(const kld_model *m, int64_t n_ctx, int64_t max_chunk, int n_threads,
                              const kld_levers *lv, layout *L, kld_error *err) {
    const kld_hparams *hp = &m->hp;
    kld_status st = kld_levers_check_layout(lv, m, err);
    if (st != KLD_OK) return st;
    if (n_ctx < 1 || n_ctx > MAX_CTX)
        return kld_fail(err, KLD_ERR_ARG, "context size %" PRId64 " is out of range [1, %" PRId64 "]",
                        n_ctx, MAX_CTX);
    if (max_chunk < 1 || max_chunk > n_ctx)
        return kld_fail(err, KLD_ERR_ARG, "chunk size %" PRId64 " is out of range [1, n_ctx = %"
                        PRId64 "]", max_chunk, n_ctx);
    if (n_threads < 1) return kld_fail(err, KLD_ERR_ARG, "thread count %d must be >= 1", n_threads);
    memset(L, 0, sizeof *L);
    const uint64_t C = (uint64_t)max_chunk, E = (uint64_t)hp->n_embd;
    /* the widest layer's sizes (Gemma 4's layers differ) */
    const uint64_t hd = (uint64_t)kld_hp_max_head_dim(hp), hdv = hd;
    const int64_t attn_out = kld_hp_max_attn_out(hp);
    L->ldk = (n_ctx + 15) & ~(int64_t)15;
    L->ld_qkv = kld_hp_max_qkv(hp);
    sizer z = {0, false};
    L->kv = 0;
    for (int64_t il = 0; il < hp->n_layer; il++)
        for (int v = 0; v < 2; v++)
            take(&z, kv_layer_floats(m, lv, n_ctx, L->ldk, il, v, &z.overflow), 1, 1);
    L->kv_floats = z.floats;
    L->rec = z.floats;
    for (int64_t il = 0; il < hp->n_layer; il++) take(&z, rec_layer_floats(hp, il), 1, 1);
    L->rec_floats = z.floats - L->rec;
    L->rec_act = take(&z, rec_act_floats(hp, max_chunk), 1, 1);
    L->x = take(&z, C, E, 1);
    L->xn = take(&z, C, E, 1);
    L->qkv = take(&z, C, (uint64_t)L->ld_qkv, 1);
    L->attn = take(&z, C, (uint64_t)attn_out, 1);
    L->tmp = take(&z, C, E, 1);
    /* gated attention: attn_q's [q; gate] rows, the gates kept for the output */
    L->qg = hp->sw.attn_out_gate ? take(&z, C, 2 * (uint64_t)(hp->n_head * hp->head_dim), 1) : 0;
    /* MLA: the q_a rows, [latent kv; k_pe] rows and attn_kv_b's [k_nope; v] rows */
    L->mla = hp->sw.mla ? take(&z, C, kld_mla_row_floats(hp), 1) : 0;
    /* the widest FFN: dense, one routed expert or the shared expert */
    int64_t ff = kld_hp_max_n_ff(hp) > hp->n_ff_exp ? kld_hp_max_n_ff(hp) : hp->n_ff_exp;
    if (hp->n_ff_shexp > ff) ff = hp->n_ff_shexp;
    L->gu = take(&z, C, 2 * (uint64_t)ff, 1);
    if (kld_hparams_is_moe(hp)) { /* int32 regions are counted in 4-byte floats */
        const uint64_t X = (uint64_t)hp->n_expert, K = (uint64_t)hp->n_expert_used;
        L->moe_probs = take(&z, C, X, 1);
        L->moe_ids = take(&z, C, K, 1);
        L->moe_w = take(&z, C, K, 1);
        L->moe_list = take(&z, C, K, 1);
        L->moe_count = take(&z, X + 1, 1, 1);
        L->moe_sort = take(&z, (uint64_t)n_threads, X, 1);
        L->moe_x = take(&z, C, E, 1);
        L->moe_y = take(&z, C, K, E);
        L->moe_sg = take(&z, C, 1, 1);
        if (hp->sw.moe_beside_dense) {
            L->moe_rin = take(&z, C, E, 1);
            L->moe_dense = take(&z, C, E, 1);
        }
    }
    /* per-layer embeddings: every layer's inputs of the chunk, and one layer's gated rows */
    const uint64_t P = (uint64_t)hp->n_embd_per_layer;
    L->ple = P ? take(&z, C, P, (uint64_t)hp->n_layer) : 0;
    L->ple_gate = P ? take(&z, C, P, 1) : 0;
    L->ple_row = P ? take(&z, P, (uint64_t)hp->n_layer, 1) : 0; /* one token's per_layer_token_embd row */
    L->rope0 = take(&z, C, (uint64_t)hp->n_rot, 1);
    L->rope1 = take(&z, C, (uint64_t)kld_hp_max_n_rot(hp), 1);
    L->rope_ff = take(&z, (uint64_t)hp->n_rot / 2, 1, 1);
    int64_t kin = hp->n_embd > ff ? hp->n_embd : ff;
    if (hp->n_lora_q > kin) kin = hp->n_lora_q; /* MLA: attn_q_b's and attn_kv_b's inputs */
    if (hp->n_lora_kv > kin) kin = hp->n_lora_kv;
    if (attn_out > kin) kin = attn_out;
    if (hp->dn_n_v_heads * hp->dn_head_v > kin) kin = hp->dn_n_v_heads * hp->dn_head_v; /* ssm_out's input */
    L->ar_ld = lv->act == KLD_ACT_F32 ? 0 : (kin + 15) & ~(int64_t)15;
    L->ar = take(&z, C, (uint64_t)L->ar_ld, 1);
    L->act_floats = z.floats - L->kv_floats - L->rec_floats;
    uint64_t attn_rows = 0;
    if (!kld_mul_u64(KLD_ATTN_QB, (uint64_t)L->ldk, &attn_rows)) z.overflow = true;
    /* Widest weight row: the small-M (decode) path holds 16 whole rows. */
    int64_t kmax = hp->n_embd > ff ? hp->n_embd : ff;
    if (hp->n_lora_q > kmax) kmax = hp->n_lora_q;
    if (hp->n_lora_kv > kmax) kmax = hp->n_lora_kv;
    if (attn_out > kmax) kmax = attn_out;
    uint64_t stride = attn_rows > KLD_GEMM_SCRATCH_FLOATS ? attn_rows : KLD_GEMM_SCRATCH_FLOATS;
    if (kld_gemm_small_scratch_floats(kmax) > stride) stride = kld_gemm_small_scratch_floats(kmax);
    stride = (stride + ALIGN_FLOATS - 1) & ~(uint64_t)(ALIGN_FLOATS - 1);
    L->scratch_stride = (size_t)stride;
    L->scratch = take(&z, (uint64_t)n_threads, stride, 1);
    /* Attention's own per-thread rows: dequantized K^T and V of the visible
     * keys (typed caches), the online softmax's running output and sums. */
    uint64_t aux = 0;
    if (kv_typed(m, lv)) aux += (hd + (hd > hdv ? hd : hdv)) * (uint64_t)L->ldk;
    aux += KLD_ONLINE_AUX_FLOATS(hdv); /* online, and exact over long key ranges */
    aux = (aux + ALIGN_FLOATS - 1) & ~(uint64_t)(ALIGN_FLOATS - 1);
    L->aux_stride = (size_t)aux;
    L->aux = take(&z, (uint64_t)n_threads, aux, 1);
    L->scratch_floats = z.floats - L->scratch;
    L->total_floats = z.floats;
    if (z.overflow || z.floats > UINT64_MAX / sizeof(float) || z.floats * sizeof(float) > SIZE_MAX)
        return kld_fail(err, KLD_ERR_ARG, "%s: memory plan for n_ctx %" PRId64 ", chunk %" PRId64
                        " overflows", m->src->path, n_ctx, max_chunk);
    return KLD_OK;
}

static void kv_desc(const kld_model *m, const kld_levers *lv, char *buf, size_t size) {
    if (!kv_typed(m, lv)) {
        snprintf(buf, size, "f32");
        return;
    }
    kld_levers only_kv;
    kld_levers_default(&only_kv);
    only_kv.kv_k = lv->kv_k;
    only_kv.kv_v = lv->kv_v;
    only_kv.kv_start = lv->kv_start;
    kld_levers_format(&only_kv, buf, size);
}

/* The kernel set a session with levers lv runs (and repacks the weights for). */
static const kld_engine_kernels *lever_kernels(const kld_levers *lv) {
    return lv->kernels == KLD_KERNELS_REF    ? kld_engine_kernels_ref()
           : lv->kernels == KLD_KERNELS_SIMD ? kld_engine_kernels_avx2()
                                             : kld_engine_kernels_get();
}

static void fill_plan(const kld_model *m, int64_t n_ctx, int64_t max_chunk, int n_threads,
                      const kld_levers *lv, const layout *L, kld_mem_plan *p) {
    memset(p, 0, sizeof *p);
    p->n_ctx = n_ctx;
    p->max_chunk = max_chunk;
    p->n_threads = n_threads;
    /* as resident once the session's kernel set has repacked its matrices */
    p->weights_bytes = kld_model_resident_weight_bytes(m, lever_kernels(lv));
    p->model_bytes = m->vec_bytes;
    p->kv_bytes = L->kv_floats * sizeof(float);
    p->kv_token_bytes = kv_token_bytes(m, lv);
    p->recurrent_bytes = L->rec_floats * sizeof(float);
    kv_desc(m, lv, p->kv_desc, sizeof p->kv_desc);
    p->act_bytes = L->act_floats * sizeof(float);
    p->scratch_bytes = L->scratch_floats * sizeof(float);
    p->arena_bytes = L->total_floats * sizeof(float);
    uint64_t lb = 0;
    if (kld_mul_u64((uint64_t)max_chunk, (uint64_t)m->hp.n_vocab, &lb) && kld_mul_u64(lb, 4, &lb))
        p->logits_bytes = lb;
    else
        p->logits_bytes = UINT64_MAX;
    /* Measured on x86-64 Linux: `kldeval --help` is 9.3 MiB resident, and a
     * 32,000-token vocabulary's tables about 2.6 MiB (82 bytes a token);
     * both bounded with room (16 MiB, 256 bytes a token). */
    p->runtime_bytes = (UINT64_C(16) << 20) + UINT64_C(256) * (uint64_t)m->hp.n_vocab;
    const uint64_t parts[] = {p->weights_bytes, p->model_bytes, p->arena_bytes, p->logits_bytes, p->runtime_bytes};
    p->total_bytes = 0;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        p->total_bytes = parts[i] > UINT64_MAX - p->total_bytes ? UINT64_MAX : p->total_bytes + parts[i];
}

kld_status kld_mem_plan_compute_levers(const kld_model *m, int64_t n_ctx, int64_t max_chunk,
                                       int n_threads, const kld_levers *levers,
                                       kld_mem_plan *plan, kld_error *err) {
    kld_levers ref;
    kld_levers_default(&ref);
    if (!levers) levers = &ref;
    if (n_threads <= 0) n_threads = kld_default_threads();
    layout L;
    kld_status s = plan_layout(m, n_ctx, max_chunk, n_threads, levers, &L, err);
    if (s != KLD_OK) return s;
    fill_plan(m, n_ctx, max_chunk, n_threads, levers, &L, plan);
    return KLD_OK;
}

kld_status kld_mem_plan_compute(const kld_model *m, int64_t n_ctx, int64_t max_chunk,
                                int n_threads, kld_mem_plan *plan, kld_error *err) {
    return kld_mem_plan_compute_levers(m, n_ctx, max_chunk, n_threads, NULL, plan, err);
}

void kld_mem_plan_print(const kld_mem_plan *p, FILE *f) {
    char b[32];
    fprintf(f, "memory plan (n_ctx %" PRId64 ", chunk %" PRId64 ", %d threads)\n", p->n_ctx,
            p->max_chunk, p->n_threads);
    fprintf(f, "  weights               %s (" KLD_REPACKED_TYPES " matrices at their repacked size, the rest mmapped)\n",
            kld_format_bytes(p->weights_bytes, b, sizeof b));
    fprintf(f, "  norms/biases (f32)    %s\n", kld_format_bytes(p->model_bytes, b, sizeof b));
    char t[32];
    fprintf(f, "  KV cache (%s)%*s%s (%s per token)\n", p->kv_desc,
            (int)(strlen(p->kv_desc) < 12 ? 12 - strlen(p->kv_desc) : 1), "",
            kld_format_bytes(p->kv_bytes, b, sizeof b),
            kld_format_bytes(p->kv_token_bytes, t, sizeof t));
    if (p->recurrent_bytes)
        fprintf(f, "  recurrent state       %s (f32, fixed per sequence)\n",
                kld_format_bytes(p->recurrent_bytes, b, sizeof b));
    fprintf(f, "  activations           %s\n", kld_format_bytes(p->act_bytes, b, sizeof b));
    fprintf(f, "  per-thread scratch    %s\n", kld_format_bytes(p->scratch_bytes, b, sizeof b));
    fprintf(f, "  session arena total   %s\n", kld_format_bytes(p->arena_bytes, b, sizeof b));
    fprintf(f, "  logits per chunk      %s (caller's buffer)\n",
            kld_format_bytes(p->logits_bytes, b, sizeof b));
    fprintf(f, "  program, tokenizer    %s\n", kld_format_bytes(p->runtime_bytes, b, sizeof b));
    fprintf(f, "  total                 %s (the peak resident size, at most)\n",
            kld_format_bytes(p->total_bytes, b, sizeof b));
}

/* The model's adapter and the lora= lever's, with their side-product
 * scratch (allocated here, so the forward pass still never allocates). */
static kld_status attach_lora(kld_session *s, kld_error *err) {
    const kld_model *m = s->model;
    if (m->lora) s->lora[s->n_lora++] = m->lora;
    if (s->lv.lora_path[0]) {
        kld_status st = kld_lora_open(m, s->lv.lora_path, s->lv.lora_scale, &s->lora_own, err);
        if (st) {
            kld_error_prefix(err, "lever lora");
            return st;
        }
        s->lora[s->n_lora++] = s->lora_own;
    }
    if (!s->n_lora) return KLD_OK;
    const uint64_t n = kld_lora_scratch_floats(s->lora, s->n_lora, s->max_chunk);
    s->lora_buf = aligned_alloc(64, ((size_t)n * sizeof(float) + 63) & ~(size_t)63);
    if (!s->lora_buf) return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory for LoRA", m->src->path);
    return KLD_OK;
}

/* Below this many prefill passes a session reads its f16 matrices row-major. Measured in a
 * Zen 5 VM (2 threads, TinyLlama-1.1B shape, f16): the repacked copy costs about 3.4 s to make
 * (1.5 s a GiB, most of it the kernel zeroing fresh pages) and saves about 7 % of a 512-token
 * pass (0.25 s): it repays itself after 12 to 14 passes, whatever the model's size (both
 * scale with its bytes). */
#define KLD_F16_REPACK_MIN_PASSES 12

static kld_status session_create(kld_model *m, int64_t n_ctx, int64_t max_chunk, kld_pool *pool,
                                 bool own_pool, const kld_levers *levers, bool head_only,
                                 int64_t prefill_passes, kld_session **out, kld_error *err) {
    *out = NULL;
    kld_levers ref;
    kld_levers_default(&ref);
    if (!levers) levers = &ref;
    layout L;
    kld_status st = plan_layout(m, n_ctx, max_chunk, kld_pool_size(pool), levers, &L, err);
    if (st != KLD_OK) {
        if (own_pool) kld_pool_free(pool);
        return st;
    }
    kld_session *s = calloc(1, sizeof *s);
    void *arena = NULL;
    kld_kv_layer *kvl = calloc((size_t)m->hp.n_layer, sizeof *kvl);
    kld_rec_layer *recl = calloc((size_t)m->hp.n_layer, sizeof *recl);
    if (s && kvl && recl) arena = aligned_alloc(64, (size_t)L.total_floats * sizeof(float));
    if (!s || !arena || !kvl || !recl) {
        free(s);
        free(kvl);
        free(recl);
        if (own_pool) kld_pool_free(pool);
        char b[32];
        return kld_fail(err, KLD_ERR_NOMEM, "%s: cannot allocate the session arena (%s)",
                        m->src->path, kld_format_bytes(L.total_floats * sizeof(float), b, sizeof b));
    }
    s->model = m;
    s->lv = *levers;
    s->kvl = kvl;
    s->pool = pool;
    s->own_pool = own_pool;
    s->kr = lever_kernels(levers);
    s->n_ctx = n_ctx;
    s->max_chunk = max_chunk;
    s->ldk = L.ldk;
    s->ld_qkv = L.ld_qkv;
    s->arena = arena;
    float *a = arena;
    uint64_t off = L.kv;
    bool ovf = false;
    for (int64_t il = 0; il < m->hp.n_layer; il++) {
        kld_kv_layer *k = &kvl[il];
        const int64_t src = kld_hp_kv_source(&m->hp, il);
        if (src != il) { /* Gemma 4's shared KV: the earlier layer's cache itself (src < il) */
            *k = kvl[src];
            continue;
        }
        const int64_t hd = kld_hp_head_dim(&m->hp, il), hdv = kld_hp_head_dim_v(&m->hp, il);
        const int64_t nkv = kld_hp_n_head_kv(&m->hp, il);
        k->k_type = kld_kv_map_type(&levers->kv_k, il);
        k->v_type = kld_kv_map_type(&levers->kv_v, il);
        k->k_row = kld_kv_row_bytes(k->k_type, hd);
        k->v_row = kld_kv_row_bytes(k->v_type, hdv);
        k->n_pre = kv_prefix(levers, n_ctx);
        const int64_t nq = n_ctx - k->n_pre;
        k->k = a + off;
        if (k->k_type != KLD_TYPE_F32)
            k->k_pre = a + off + kv_scheme_floats(nkv, k->k_type, (uint64_t)hd, nq, &ovf);
        off += kv_layer_floats(m, levers, n_ctx, L.ldk, il, false, &ovf);
        k->v = a + off;
        if (k->v_type != KLD_TYPE_F32)
            k->v_pre = a + off + kv_scheme_floats(nkv, k->v_type, (uint64_t)hdv, nq, &ovf);
        off += kv_layer_floats(m, levers, n_ctx, L.ldk, il, true, &ovf);
    }
    s->recl = recl;
    s->rec_state = a + L.rec;
    s->rec_state_floats = L.rec_floats;
    s->rec_act = a + L.rec_act;
    off = L.rec;
    for (int64_t il = 0; il < m->hp.n_layer; il++) {
        const uint64_t nf = rec_layer_floats(&m->hp, il);
        if (nf) recl[il].conv = a + off;
        if (nf && kld_hparams_layer_kind(&m->hp, il) == KLD_LAYER_DELTANET)
            recl[il].ssm = recl[il].conv + kld_deltanet_conv_floats(&m->hp);
        off += nf;
    }
    memset(s->rec_state, 0, (size_t)L.rec_floats * sizeof(float));
    s->ar = a + L.ar;
    s->ar_ld = L.ar_ld;
    s->attn_aux = a + L.aux;
    s->attn_aux_stride = L.aux_stride;
    s->x = a + L.x;
    s->xn = a + L.xn;
    s->qkv = a + L.qkv;
    s->attn = a + L.attn;
    s->tmp = a + L.tmp;
    s->qg = m->hp.sw.attn_out_gate ? a + L.qg : NULL;
    s->mla = m->hp.sw.mla ? a + L.mla : NULL;
    s->gu = a + L.gu;
    s->ple = m->hp.n_embd_per_layer ? a + L.ple : NULL;
    s->ple_gate = m->hp.n_embd_per_layer ? a + L.ple_gate : NULL;
    s->ple_row = m->hp.n_embd_per_layer ? a + L.ple_row : NULL;
    if (kld_hparams_is_moe(&m->hp)) {
        s->moe_probs = a + L.moe_probs;
        s->moe_ids = (int32_t *)(void *)(a + L.moe_ids);
        s->moe_w = a + L.moe_w;
        s->moe_list = (int32_t *)(void *)(a + L.moe_list);
        s->moe_count = (int32_t *)(void *)(a + L.moe_count);
        s->moe_sort = (int32_t *)(void *)(a + L.moe_sort);
        s->moe_x = a + L.moe_x;
        s->moe_y = a + L.moe_y;
        s->moe_sg = a + L.moe_sg;
        s->moe_rin = m->hp.sw.moe_beside_dense ? a + L.moe_rin : NULL;
        s->moe_dense = m->hp.sw.moe_beside_dense ? a + L.moe_dense : NULL;
    }
    s->rope_cs[0] = a + L.rope0;
    s->rope_cs[1] = a + L.rope1;
    s->rope_ff = a + L.rope_ff;
    s->scratch = a + L.scratch;
    s->scratch_stride = L.scratch_stride;
    fill_plan(m, n_ctx, max_chunk, kld_pool_size(pool), levers, &L, &s->plan);
    /* Touch the KV cache now so the plan's memory is really committed
     * and later positions never read uninitialised floats. */
    memset(a + L.kv, 0, (size_t)L.kv_floats * sizeof(float));
    st = kld_rope_factors(m->src, &m->hp, &m->w, n_ctx, s->rope_ff, err);
    if (st == KLD_OK) st = attach_lora(s, err);
    /* a head-only session reads the head row-major: the same bits, and no
     * other matrix of the model is ever read */
    s->head_only = head_only;
    const bool with_f16 = prefill_passes <= 0 || prefill_passes >= KLD_F16_REPACK_MIN_PASSES;
    if (st == KLD_OK && s->kr->repack && !head_only) st = kld_model_repack(m, pool, s->kr, with_f16, err);
    if (st != KLD_OK) {
        kld_session_free(s);
        return st;
    }
    *out = s;
    return KLD_OK;
}

kld_status kld_session_create(kld_model *m, int64_t n_ctx, int64_t max_chunk, int n_threads,
                              kld_session **out, kld_error *err) {
    kld_pool *pool = kld_pool_create(n_threads);
    if (!pool) return kld_fail(err, KLD_ERR_NOMEM, "cannot start %d threads", n_threads);
    return session_create(m, n_ctx, max_chunk, pool, true, NULL, false, 0, out, err);
}

kld_status kld_session_create_shared(kld_model *m, int64_t n_ctx, int64_t max_chunk,
                                     kld_pool *pool, kld_session **out, kld_error *err) {
    if (!pool) return kld_fail(err, KLD_ERR_ARG, "kld_session_create_shared: pool is NULL");
    return session_create(m, n_ctx, max_chunk, pool, false, NULL, false, 0, out, err);
}

kld_status kld_session_create_opts(kld_model *m, const kld_session_opts *o, kld_session **out,
                                   kld_error *err) {
    kld_pool *pool = o->pool;
    if (!pool && !(pool = kld_pool_create(o->n_threads)))
        return kld_fail(err, KLD_ERR_NOMEM, "cannot start %d threads", o->n_threads);
    return session_create(m, o->n_ctx, o->max_chunk, pool, !o->pool, o->levers, o->head_only,
                          o->prefill_passes, out, err);
}

const kld_levers *kld_session_levers(const kld_session *s) { return &s->lv; }

void kld_session_observe_layers(kld_session *s, kld_layer_observer fn, void *ctx) {
    s->layer_observe = fn;
    s->layer_observe_ctx = ctx;
}

const char *kld_layer_site_name(kld_layer_site site) {
    static const char *const names[KLD_SITE_COUNT] = {"mixer", "ffn", "resid"};
    return site >= 0 && site < KLD_SITE_COUNT ? names[site] : "?";
}

const void *kld_session_kv_row(const kld_session *s, int64_t il, bool v, int64_t h, int64_t p,
                               uint64_t *bytes) {
    const kld_kv_layer *k = &s->kvl[il];
    const uint32_t type = v ? k->v_type : k->k_type;
    const int64_t hd = v ? kld_hp_head_dim_v(&s->model->hp, il) : kld_hp_head_dim(&s->model->hp, il);
    *bytes = v ? k->v_row : k->k_row;
    if (type == KLD_TYPE_F32) {
        if (!v) return NULL;
        return (const float *)k->v + (h * s->n_ctx + p) * hd;
    }
    if (p < k->n_pre) {
        *bytes = (uint64_t)hd * sizeof(float);
        return (v ? k->v_pre : k->k_pre) + (h * k->n_pre + p) * hd;
    }
    return kld_kv_scheme_row(k, s->n_ctx, v, h, p);
}

void kld_session_free(kld_session *s) {
    if (!s) return;
    if (s->own_pool) kld_pool_free(s->pool);
    free(s->arena);
    free(s->kvl);
    free(s->lora_buf);
    kld_lora_free(s->lora_own);
    free(s->recl);
    free(s);
}

/* The KV cache is overwritten position by position; the recurrent state
 * is read before it is written, so it starts from zero again. */
void kld_session_reset(kld_session *s) {
    s->pos = 0;
    memset(s->rec_state, 0, (size_t)s->rec_state_floats * sizeof(float));
}
void kld_session_use_kernels(kld_session *s, const kld_engine_kernels *kr) { s->kr = kr; }
int64_t kld_session_pos(const kld_session *s) { return s->pos; }
const kld_mem_plan *kld_session_plan(const kld_session *s) { return &s->plan; }

kld_status kld_session_eval_rows(kld_session *s, const int32_t *tokens, int64_t n,
                                 int64_t first_row, float *logits, kld_error *err) {
    const kld_hparams *hp = &s->model->hp;
    if (n < 1 || n > s->max_chunk)
        return kld_fail(err, KLD_ERR_ARG, "chunk of %" PRId64 " tokens: must be 1..%" PRId64, n,
                        s->max_chunk);
    if (s->pos + n > s->n_ctx)
        return kld_fail(err, KLD_ERR_ARG, "context full: %" PRId64 " + %" PRId64
                        " tokens exceed n_ctx = %" PRId64, s->pos, n, s->n_ctx);
    if (logits && (first_row < 0 || first_row > n))
        return kld_fail(err, KLD_ERR_ARG, "first logits row %" PRId64 " is outside 0..%" PRId64,
                        first_row, n);
    for (int64_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= hp->n_vocab)
            return kld_fail(err, KLD_ERR_ARG, "token %" PRId64 " of the chunk: id %" PRId32
                            " is outside the vocabulary [0, %" PRId64 ")", i, tokens[i], hp->n_vocab);
    if (s->head_only)
        return kld_fail(err, KLD_ERR_ARG, "a head-only session applies the output head only");
    kld_forward(s, NULL, tokens, n, logits || s->hidden_out ? first_row : n, logits);
    s->pos += n;
    return KLD_OK;
}

kld_status kld_session_eval_hidden(kld_session *s, const int32_t *tokens, int64_t n,
                                   int64_t first_row, float *hidden, float *logits, kld_error *err) {
    s->hidden_out = hidden;
    kld_status st = kld_session_eval_rows(s, tokens, n, first_row, logits, err);
    s->hidden_out = NULL;
    return st;
}

kld_status kld_session_head(kld_session *s, const float *hidden, int64_t n, float *logits,
                            kld_error *err) {
    const kld_hparams *hp = &s->model->hp;
    for (int64_t r0 = 0; r0 < n; r0 += s->max_chunk) {
        int64_t c = n - r0 < s->max_chunk ? n - r0 : s->max_chunk;
        const float *h = hidden + r0 * hp->n_embd;
        for (int64_t i = 0; i < c * hp->n_embd; i++)
            if (!isfinite(h[i]))
                return kld_fail(err, KLD_ERR_FORMAT, "hidden state row %lld, element %lld is %g",
                                (long long)(r0 + i / hp->n_embd), (long long)(i % hp->n_embd),
                                (double)h[i]);
        kld_forward_head(s, h, c, logits + r0 * hp->n_vocab);
    }
    return KLD_OK;
}

kld_status kld_session_eval(kld_session *s, const int32_t *tokens, int64_t n, float *logits,
                            kld_error *err) {
    return kld_session_eval_rows(s, tokens, n, 0, logits, err);
}

kld_status kld_session_decode(kld_session *s, int32_t token, float *logits, kld_error *err) {
    return kld_session_eval_rows(s, &token, 1, 0, logits, err);
}

kld_pool *kld_session_pool(const kld_session *s) { return s->pool; }

/* Whether b can share a batched step with a: the same weights, pool,
 * kernels, arena layout (n_ctx, chunk) and levers, so that every row is
 * computed exactly as its own session would. */
static bool batch_compatible(const kld_session *a, const kld_session *b) {
    char la[512], lb[512];
    kld_levers_format(&a->lv, la, sizeof la);
    kld_levers_format(&b->lv, lb, sizeof lb);
    return a->model == b->model && a->pool == b->pool && a->kr == b->kr && a->n_ctx == b->n_ctx &&
           a->max_chunk == b->max_chunk && !strcmp(la, lb);
}

kld_status kld_session_decode_batch(kld_session *const *ss, int64_t n, const int32_t *tokens,
                                    float *logits, kld_error *err) {
    if (n < 1 || !ss || !ss[0])
        return kld_fail(err, KLD_ERR_ARG, "batched decode of %" PRId64 " sessions: need at least 1", n);
    kld_session *s = ss[0];
    const kld_hparams *hp = &s->model->hp;
    if (n > s->max_chunk)
        return kld_fail(err, KLD_ERR_ARG, "batched decode of %" PRId64 " sessions: at most the chunk size %" PRId64,
                        n, s->max_chunk);
    for (int64_t r = 0; r < n; r++) {
        if (!ss[r] || !batch_compatible(s, ss[r]))
            return kld_fail(err, KLD_ERR_ARG, "batched decode: session %" PRId64 " differs from session 0 "
                            "(model, pool, kernels, n_ctx, chunk and levers must match)", r);
        for (int64_t q = 0; q < r; q++)
            if (ss[q] == ss[r])
                return kld_fail(err, KLD_ERR_ARG, "batched decode: sessions %" PRId64 " and %" PRId64
                                " are the same session", q, r);
        if (ss[r]->pos + 1 > ss[r]->n_ctx)
            return kld_fail(err, KLD_ERR_ARG, "batched decode: session %" PRId64 "'s context is full (n_ctx = %" PRId64 ")",
                            r, ss[r]->n_ctx);
        if (tokens[r] < 0 || tokens[r] >= hp->n_vocab)
            return kld_fail(err, KLD_ERR_ARG, "batched decode: token of session %" PRId64 ": id %" PRId32
                            " is outside the vocabulary [0, %" PRId64 ")", r, tokens[r], hp->n_vocab);
    }
    /* a recurrent layer's state belongs to one session: such models step
     * each session on its own (the same bits, without the shared products) */
    bool recurrent = false;
    for (int64_t il = 0; il < hp->n_layer; il++) recurrent |= kld_hparams_layer_kind(hp, il) != KLD_LAYER_ATTN;
    if (recurrent && n > 1) {
        kld_status st = KLD_OK;
        for (int64_t r = 0; r < n && !st; r++)
            st = kld_session_decode(ss[r], tokens[r], logits ? logits + r * hp->n_vocab : NULL, err);
        return st;
    }
    /* one row alone is the ordinary step (the M = 1 products) */
    kld_forward(s, n > 1 ? ss : NULL, tokens, n, logits ? 0 : n, logits);
    for (int64_t r = 0; r < n; r++) ss[r]->pos++;
    return KLD_OK;
}
