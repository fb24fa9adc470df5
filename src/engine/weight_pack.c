/* weight_pack.c — weight matrices repacked for the SIMD kernels (the
 * layouts of kernels.h: f16, q4_K and q6_K in panels of 32 rows, each panel one
 * sequential stream whose columns hold 8 rows side by side). A decode step
 * then reads each matrix as one stream instead of 32 row streams side by
 * side, and neither it nor a GEMM panel transposes. The products are the
 * same bits.
 *
 * The copy is made once per model, when its first SIMD session is created
 * (sessions of one model are created from one thread); the f16 matrices
 * only for a session that makes enough passes over them to repay it
 * (session.c), else the GEMM packs their rows as it reads them. A matrix read from
 * the model file gives its mapped pages back afterwards (MADV_DONTNEED on a
 * private read-only file mapping: pages touched again, e.g. by the ref
 * kernel set, are read from the file), so the resident size stays about
 * one copy of the weights. 3-D expert tensors are not repacked. */
#include "engine/internal.h"

#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

typedef struct packed_matrix {
    const kld_tensor *t;
    uint8_t *data;
    uint64_t panel_bytes;
} packed_matrix;

struct kld_model_repacked {
    packed_matrix *m; /* sorted by tensor address */
    size_t n, cap;
    uint64_t bytes;
    bool oom;         /* an allocation failed: the rest stay row-major */
    bool with_f16;    /* the f16 matrices are in (or were tried) */
};

static int64_t n_panels(const kld_tensor *t) { return (t->ne[1] + KLD_REPACK_ROWS - 1) / KLD_REPACK_ROWS; }

/* A repacked panel of KLD_REPACK_ROWS rows: `bytes` per `values` of a row. */
static const struct {
    int64_t values;
    uint64_t bytes;
} panel_unit[KLD_TYPE_COUNT] = {
    [KLD_TYPE_F16] = {1, KLD_REPACK_ROWS * sizeof(uint16_t)},
    [KLD_TYPE_Q4_K] = {256, 4 * KLD_Q4KX8_BYTES},
    [KLD_TYPE_Q6_K] = {256, 4 * KLD_Q6KX8_BYTES},
};

uint64_t kld_repack_panel_bytes(uint32_t type, int64_t K) {
    if (type >= KLD_TYPE_COUNT || !panel_unit[type].values) return 0;
    return (uint64_t)(K / panel_unit[type].values) * panel_unit[type].bytes;
}

typedef struct repack_job {
    kld_repack_fn repack;
    const kld_tensor *t;
    uint64_t row_bytes, panel_bytes;
    uint8_t *dst;
} repack_job;

static void repack_task(void *ctx, int ith, int nth) {
    const repack_job *j = ctx;
    int64_t pb, pe;
    kld_split(n_panels(j->t), ith, nth, &pb, &pe);
    for (int64_t p = pb; p < pe; p++) {
        const uint8_t *row[KLD_REPACK_ROWS];
        for (int r = 0; r < KLD_REPACK_ROWS; r++) {
            const int64_t n = p * KLD_REPACK_ROWS + r;
            row[r] = n < j->t->ne[1] ? (const uint8_t *)j->t->data + (uint64_t)n * j->row_bytes : NULL;
        }
        uint8_t *panel = j->dst + (uint64_t)p * j->panel_bytes;
        j->repack(row, j->t->ne[0], panel);
    }
}

void kld_repack_matrix(kld_pool *pool, const kld_engine_kernels *kr, const kld_tensor *t, uint8_t *dst) {
    const kld_type_info *ti = kld_type_info_get(t->type);
    repack_job j = {kr->repack(t->type), t, (uint64_t)(t->ne[0] / ti->block_size) * ti->type_size,
                    kld_repack_panel_bytes(t->type, t->ne[0]), dst};
    kld_pool_run(pool, repack_task, &j);
}

/* The whole pages inside [p, p + n) are released. */
static void release_pages(const void *p, uint64_t n) {
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t b = ((uintptr_t)p + page - 1) & ~(page - 1), e = ((uintptr_t)p + n) & ~(page - 1);
    if (e > b) (void)madvise((void *)b, e - b, MADV_DONTNEED);
}

typedef struct pack_ctx {
    kld_model *m;
    kld_pool *pool;
    const kld_engine_kernels *kr;
} pack_ctx;

static bool wanted(const kld_model *m, const kld_engine_kernels *kr, const kld_tensor *t) {
    if (!kr->repack || !kld_repack_panel_bytes(t->type, t->ne[0]) || !kr->repack(t->type)) return false;
    if (t->n_dims != 2 || t->ne[1] < 2 || t->ne[0] % kld_type_info_get(t->type)->block_size) return false;
    /* token_embd is only looked up by row unless it is also the output matrix */
    return t != m->w.token_embd || m->w.output == t;
}

static void pack_one(void *ctx, const kld_tensor *t, const char *name) {
    (void)name;
    pack_ctx *c = ctx;
    struct kld_model_repacked *P = c->m->repacked;
    if (P->oom || !wanted(c->m, c->kr, t) || (t->type == KLD_TYPE_F16 && !P->with_f16)) return;
    for (size_t i = 0; i < P->n; i++)
        if (P->m[i].t == t) return; /* bound twice (a shared matrix) */
    if (P->n == P->cap) {
        const size_t cap = P->cap ? 2 * P->cap : 64;
        packed_matrix *nm = realloc(P->m, cap * sizeof *nm);
        if (!nm) {
            P->oom = true;
            return;
        }
        P->m = nm;
        P->cap = cap;
    }
    const uint64_t pbytes = kld_repack_panel_bytes(t->type, t->ne[0]), bytes = (uint64_t)n_panels(t) * pbytes;
    const uint64_t huge = 2u << 20; /* transparent huge pages: fewer TLB misses in the stream */
    void *d = NULL;
    if (posix_memalign(&d, bytes >= huge ? huge : 64, (size_t)bytes) != 0) {
        P->oom = true;
        return;
    }
#ifdef MADV_HUGEPAGE
    if (bytes >= huge) (void)madvise(d, (size_t)bytes, MADV_HUGEPAGE);
#endif
    kld_repack_matrix(c->pool, c->kr, t, d);
    if (kld_source_maps(c->m->src, t->data, t->nbytes)) release_pages(t->data, t->nbytes);
    P->m[P->n++] = (packed_matrix){t, d, pbytes};
    P->bytes += bytes;
}

static int by_address(const void *a, const void *b) {
    const uintptr_t x = (uintptr_t)((const packed_matrix *)a)->t, y = (uintptr_t)((const packed_matrix *)b)->t;
    return x < y ? -1 : x > y;
}

kld_status kld_model_repack(kld_model *m, kld_pool *pool, const kld_engine_kernels *kr, bool with_f16,
                            kld_error *err) {
    if (m->repacked && (m->repacked->with_f16 || !with_f16)) return KLD_OK;
    if (!m->repacked && !(m->repacked = calloc(1, sizeof *m->repacked)))
        return kld_fail(err, KLD_ERR_NOMEM, "%s: out of memory", m->src->path);
    m->repacked->with_f16 = with_f16;
    pack_ctx c = {m, pool, kr};
    kld_model_each_weight(m, pack_one, &c);
    if (m->repacked->n) qsort(m->repacked->m, m->repacked->n, sizeof *m->repacked->m, by_address);
    return KLD_OK;
}

kld_repacked kld_model_repacked(const kld_model *m, const kld_tensor *t) {
    const struct kld_model_repacked *P = m->repacked;
    if (!P || !P->n) return (kld_repacked){0};
    const packed_matrix key = {t, NULL, 0};
    const packed_matrix *hit = bsearch(&key, P->m, P->n, sizeof key, by_address);
    return hit ? (kld_repacked){hit->data, hit->panel_bytes} : (kld_repacked){0};
}

/* Resident bytes of the weights once kld_model_repack has run with kernel
 * set kr: the file's bytes, with each matrix it would repack counted at its
 * repacked size (panels of KLD_REPACK_ROWS rows, unpacked scales) instead —
 * besides the file's bytes for a tied output, whose rows the token lookups
 * keep reading from the file. */
typedef struct resident_ctx {
    const kld_model *m;
    const kld_engine_kernels *kr;
    const kld_tensor **seen;
    size_t n, cap;
    int64_t delta;
    bool oom;
} resident_ctx;

static void count_one(void *ctx, const kld_tensor *t, const char *name) {
    (void)name;
    resident_ctx *c = ctx;
    if (c->oom || !wanted(c->m, c->kr, t)) return;
    for (size_t i = 0; i < c->n; i++)
        if (c->seen[i] == t) return; /* bound twice (a shared matrix) */
    if (c->n == c->cap) {
        const size_t cap = c->cap ? 2 * c->cap : 64;
        const kld_tensor **ns = realloc(c->seen, cap * sizeof *ns);
        if (!ns) {
            c->oom = true; /* then the file's bytes: an underestimate only by the padding */
            return;
        }
        c->seen = ns;
        c->cap = cap;
    }
    c->seen[c->n++] = t;
    /* a tied output's file rows stay mapped: the token lookups read them (and fault around
     * them), so as a run's text touches more tokens they join the repacked copy */
    const bool rows_read = t == c->m->w.token_embd;
    c->delta += (int64_t)((uint64_t)n_panels(t) * kld_repack_panel_bytes(t->type, t->ne[0])) -
                (rows_read ? 0 : (int64_t)t->nbytes);
}

uint64_t kld_model_resident_weight_bytes(const kld_model *m, const kld_engine_kernels *kr) {
    resident_ctx c = {.m = m, .kr = kr};
    if (kr) kld_model_each_weight(m, count_one, &c);
    free(c.seen);
    return (uint64_t)((int64_t)m->weights_bytes + (c.oom ? 0 : c.delta));
}

uint64_t kld_model_repacked_bytes(const kld_model *m) { return m->repacked ? m->repacked->bytes : 0; }

void kld_model_repacked_free(struct kld_model_repacked *P) {
    if (!P) return;
    for (size_t i = 0; i < P->n; i++) free(P->m[i].data);
    free(P->m);
    free(P);
}
