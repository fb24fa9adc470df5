/* diff.c — `kldeval diff` (diff.h): the kl run with both sessions' layer
 * observers installed; the reference's observer keeps the chunk's hidden
 * states, the arm's (which runs second in the lockstep) measures each row
 * against them, and the scored rows are folded into streaming statistics. */
#include "eval/diff.h"

#include "tensor/types.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { M_ERR2, M_REF2, M_ARM2, M_DOT, M_MAXABS, M_COUNT };

/* Mean and population co-moments of one or two streams (Welford). */
typedef struct moments {
    uint64_t n;
    double mx, my, m2x, m2y, cxy;
} moments;

static void moments_add(moments *m, double x, double y) {
    m->n++;
    const double dx = x - m->mx, dy = y - m->my;
    m->mx += dx / (double)m->n;
    m->my += dy / (double)m->n;
    m->m2x += dx * (x - m->mx);
    m->m2y += dy * (y - m->my);
    m->cxy += dx * (y - m->my);
}

/* Standard error of the mean, sqrt(var/(N−1)) with var the population
 * variance (as kl's statistics); NAN below two values. */
static double se_of(const moments *m, double m2) {
    return m->n < 2 ? NAN : sqrt(m2 / (double)m->n / (double)(m->n - 1));
}

typedef struct site_acc {
    moments rel, cos, maxabs; /* x only */
    moments energy;           /* x = ‖r‖², y = ‖a−r‖² */
    double max_abs_max, worst;
    uint64_t worst_window;
    int64_t worst_pos;
} site_acc;

typedef struct diff_state {
    int64_t n_layer, E, chunk;
    float *ref_buf;      /* [n_layer·S][chunk][E] the reference's rows of the chunk */
    double *met;         /* [n_layer·S][chunk][M_COUNT] the arm's rows measured */
    int64_t ref_pos, ref_n, arm_pos, arm_n;
    bool out_of_step;    /* the arm's chunk was not the reference's */
    site_acc *acc;       /* n_layer·S */
    /* per weight matrix (--matrices): the reference's input rows of the chunk, and the
     * errors of the arm's matrix against the reference's, on the arm's and on its input */
    bool matrices;
    kld_model *ref_model, *arm_model;
    struct mat_acc *mat;
    size_t n_mat, cap_mat;
    float *wr, *wa;      /* one dequantized row of each matrix */
    int64_t w_cap;
    bool mat_oom;
    /* the token embedding's lookup (a row per token, no product): its rows' error at the
     * scored positions' tokens, Σ‖E_arm[t] − E_ref[t]‖² and Σ‖E_ref[t]‖² */
    const kld_tensor *emb_ref, *emb_arm;
    double emb_e2, emb_r2;
    uint64_t emb_rows;
    /* the merged 3-D expert tensors (blk.N.ffn_*_exps) of each model, whose slices the
     * routed experts multiply: a slice has no name, its parent has */
    struct parent *par_ref, *par_arm;
    size_t n_par_ref, n_par_arm, cap_par_ref, cap_par_arm;
} diff_state;

typedef struct parent {
    const kld_tensor *t;
    char name[96];
} parent;

typedef struct mat_acc {
    char name[96];
    const kld_tensor *w_ref, *w_arm;
    float *x_ref;        /* [rows][ne0] the reference's input rows of the chunk */
    int64_t x_rows, x_cap;
    double own_e2, own_r2, ref_e2, ref_r2; /* Σ‖y_arm − y_ref‖², Σ‖y_ref‖² per input */
    uint64_t rows;
} mat_acc;

/* The matrix named like W (found, or added when add), else NULL. */
static mat_acc *mat_find(diff_state *d, const char *name, bool add) {
    for (size_t i = 0; i < d->n_mat; i++)
        if (!strcmp(d->mat[i].name, name)) return &d->mat[i];
    if (!add) return NULL;
    if (d->n_mat == d->cap_mat) {
        size_t cap = d->cap_mat ? 2 * d->cap_mat : 64;
        mat_acc *p = realloc(d->mat, cap * sizeof *p);
        if (!p) return NULL;
        d->mat = p;
        d->cap_mat = cap;
    }
    mat_acc *m = &d->mat[d->n_mat++];
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "%s", name);
    return m;
}

/* a·x and b·x in double, in four interleaved partial sums each (lanes i mod 4, added
 * pairwise at the end): independent chains the CPU overlaps, several times faster than one
 * running sum. The same a and b give the same bits for both, so identical weights still
 * give an error of exactly 0. */
static void dot2(const float *a, const float *b, const float *x, int64_t k, double *ya, double *yb) {
    double sa[4] = {0}, sb[4] = {0};
    int64_t i = 0;
    for (; i + 4 <= k; i += 4)
        for (int l = 0; l < 4; l++) {
            sa[l] += (double)a[i + l] * x[i + l];
            sb[l] += (double)b[i + l] * x[i + l];
        }
    for (; i < k; i++) {
        sa[0] += (double)a[i] * x[i];
        sb[0] += (double)b[i] * x[i];
    }
    *ya = (sa[0] + sa[1]) + (sa[2] + sa[3]);
    *yb = (sb[0] + sb[1]) + (sb[2] + sb[3]);
}

/* Row j of a 2-D weight as float32 (the engine's own dequantization). */
static bool weight_row(const kld_tensor *W, int64_t j, float *out) {
    const kld_type_info *ti = kld_type_info_get(W->type);
    const kld_type_kernels *tk = ti ? kld_type_kernels_of(ti) : NULL;
    if (!tk || !tk->to_float || W->ne[0] % ti->block_size) return false;
    const uint64_t row_bytes = (uint64_t)(W->ne[0] / ti->block_size) * (uint64_t)ti->type_size;
    tk->to_float((const uint8_t *)W->data + (uint64_t)j * row_bytes, out, W->ne[0]);
    return true;
}

/* The merged expert tensor of ps a slice W lies in, and the expert's index; NULL: none. */
static const parent *parent_of(const parent *ps, size_t n, const kld_tensor *W, int64_t *expert) {
    for (size_t i = 0; i < n; i++) {
        const kld_tensor *p = ps[i].t;
        const uint8_t *b = p->data, *w = W->data;
        if (w < b || w >= b + p->nbytes || p->ne[0] != W->ne[0] || p->ne[1] != W->ne[1] || p->type != W->type)
            continue;
        const uint64_t slice = p->nbytes / (uint64_t)p->ne[2];
        if ((uint64_t)(w - b) % slice) return NULL;
        *expert = (int64_t)((uint64_t)(w - b) / slice);
        return &ps[i];
    }
    return NULL;
}

static const parent *parent_named(const parent *ps, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(ps[i].name, name)) return &ps[i];
    return NULL;
}

static bool row_buffers(diff_state *d, int64_t k) {
    if (k <= d->w_cap) return true;
    float *a = realloc(d->wa, (size_t)k * sizeof *a), *b = a ? realloc(d->wr, (size_t)k * sizeof *b) : NULL;
    if (a) d->wa = a;
    if (!a || !b) return false;
    d->wr = b;
    d->w_cap = k;
    return true;
}

/* A routed expert's product (a slice of a merged blk.N.ffn_*_exps): its error on the rows this
 * model routed to it, computed at once over both models' slices of that expert (the other
 * model may route other rows to it, or none), pooled under the merged tensor's name over
 * every expert and row. Run by the reference: the error on its input; by the arm: on the
 * arm's own. */
static void observe_expert(diff_state *d, const kld_tensor *W, const float *A, int64_t n, int64_t lda,
                           bool is_ref) {
    int64_t e;
    const parent *p = is_ref ? parent_of(d->par_ref, d->n_par_ref, W, &e)
                             : parent_of(d->par_arm, d->n_par_arm, W, &e);
    if (!p) return;
    const parent *q = is_ref ? parent_named(d->par_arm, d->n_par_arm, p->name)
                             : parent_named(d->par_ref, d->n_par_ref, p->name);
    if (!q || q->t->ne[0] != p->t->ne[0] || q->t->ne[1] != p->t->ne[1] || q->t->ne[2] != p->t->ne[2]) return;
    mat_acc *m = mat_find(d, p->name, is_ref);
    if (!m) {
        if (is_ref) d->mat_oom = true;
        return;
    }
    const kld_tensor *wr = is_ref ? p->t : q->t, *wa = is_ref ? q->t : p->t;
    m->w_ref = wr;
    m->w_arm = wa;
    const int64_t k = W->ne[0], rows_out = W->ne[1];
    if (!row_buffers(d, k)) {
        d->mat_oom = true;
        return;
    }
    double e2 = 0, r2 = 0;
    for (int64_t j = 0; j < rows_out; j++) {
        if (!weight_row(wr, e * rows_out + j, d->wr) || !weight_row(wa, e * rows_out + j, d->wa)) return;
        for (int64_t r = 0; r < n; r++) {
            const float *x = A + r * lda;
            double yr, ya;
            dot2(d->wr, d->wa, x, k, &yr, &ya);
            e2 += (ya - yr) * (ya - yr);
            r2 += yr * yr;
        }
    }
    if (is_ref) {
        m->ref_e2 += e2, m->ref_r2 += r2;
    } else {
        m->own_e2 += e2, m->own_r2 += r2;
        m->rows += (uint64_t)n;
    }
}

static void observe_mat_ref(void *ctx, const kld_tensor *W, const float *A, int64_t n, int64_t lda) {
    diff_state *d = ctx;
    char name[96];
    if (W->ne[2] != 1) return;
    if (!kld_model_weight_name(d->ref_model, W, name, sizeof name)) {
        observe_expert(d, W, A, n, lda, true); /* an expert's slice has no name of its own */
        return;
    }
    mat_acc *m = mat_find(d, name, true);
    if (!m) { d->mat_oom = true; return; }
    m->w_ref = W;
    const int64_t k = W->ne[0];
    if (n * k > m->x_cap) {
        float *p = realloc(m->x_ref, (size_t)(n * k) * sizeof *p);
        if (!p) { d->mat_oom = true; m->x_rows = 0; return; }
        m->x_ref = p;
        m->x_cap = n * k;
    }
    for (int64_t r = 0; r < n; r++) memcpy(m->x_ref + r * k, A + r * lda, (size_t)k * sizeof(float));
    m->x_rows = n;
}

static void observe_mat_arm(void *ctx, const kld_tensor *W, const float *A, int64_t n, int64_t lda) {
    diff_state *d = ctx;
    char name[96];
    if (W->ne[2] != 1) return;
    if (!kld_model_weight_name(d->arm_model, W, name, sizeof name)) {
        observe_expert(d, W, A, n, lda, false);
        return;
    }
    mat_acc *m = mat_find(d, name, false);
    const int64_t k = W->ne[0], rows_out = W->ne[1];
    if (!m || !m->w_ref || m->x_rows != n || m->w_ref->ne[0] != k || m->w_ref->ne[1] != rows_out)
        return;
    m->w_arm = W;
    if (k > d->w_cap) {
        float *a = realloc(d->wa, (size_t)k * sizeof *a), *b = a ? realloc(d->wr, (size_t)k * sizeof *b) : NULL;
        if (a) d->wa = a;
        if (!a || !b) { d->mat_oom = true; return; }
        d->wr = b;
        d->w_cap = k;
    }
    /* output by output: y_ref = W_ref·x, y_arm = W_arm·x for x the arm's and the reference's rows */
    for (int64_t j = 0; j < rows_out; j++) {
        if (!weight_row(m->w_ref, j, d->wr) || !weight_row(W, j, d->wa)) return;
        for (int64_t r = 0; r < n; r++) {
            const float *xo = A + r * lda, *xr = m->x_ref + r * k;
            double yro, yao, yrr, yar;
            dot2(d->wr, d->wa, xo, k, &yro, &yao);
            dot2(d->wr, d->wa, xr, k, &yrr, &yar);
            m->own_e2 += (yao - yro) * (yao - yro);
            m->own_r2 += yro * yro;
            m->ref_e2 += (yar - yrr) * (yar - yrr);
            m->ref_r2 += yrr * yrr;
        }
    }
    m->rows += (uint64_t)n;
}


static void observe_ref(void *ctx, int64_t il, kld_layer_site site, const float *rows, int64_t n,
                        int64_t ld, int64_t pos) {
    diff_state *d = ctx;
    if (n > d->chunk) { d->out_of_step = true; return; }
    float *dst = d->ref_buf + (size_t)(il * KLD_SITE_COUNT + site) * (size_t)(d->chunk * d->E);
    for (int64_t r = 0; r < n; r++) memcpy(dst + r * d->E, rows + r * ld, (size_t)d->E * sizeof(float));
    d->ref_pos = pos;
    d->ref_n = n;
}

static void observe_arm(void *ctx, int64_t il, kld_layer_site site, const float *rows, int64_t n,
                        int64_t ld, int64_t pos) {
    diff_state *d = ctx;
    if (pos != d->ref_pos || n != d->ref_n) { d->out_of_step = true; return; }
    const size_t k = (size_t)(il * KLD_SITE_COUNT + site);
    const float *ref = d->ref_buf + k * (size_t)(d->chunk * d->E);
    double *met = d->met + k * (size_t)(d->chunk * M_COUNT);
    for (int64_t r = 0; r < n; r++) {
        const float *a = rows + r * ld, *x = ref + r * d->E;
        double e2 = 0, r2 = 0, a2 = 0, dot = 0, mx = 0;
        for (int64_t i = 0; i < d->E; i++) {
            const double av = a[i], rv = x[i], e = av - rv;
            e2 += e * e;
            r2 += rv * rv;
            a2 += av * av;
            dot += av * rv;
            if (fabs(e) > mx) mx = fabs(e);
        }
        double *m = met + r * M_COUNT;
        m[M_ERR2] = e2, m[M_REF2] = r2, m[M_ARM2] = a2, m[M_DOT] = dot, m[M_MAXABS] = mx;
    }
    d->arm_pos = pos;
    d->arm_n = n;
}

/* One scored position's metrics into a site's statistics. Identical rows
 * give exactly 0 (the cosine is not recomputed from rounded norms). */
static void fold(site_acc *s, const double *m, uint64_t wi, int64_t pos) {
    const double e2 = m[M_ERR2], r2 = m[M_REF2], a2 = m[M_ARM2];
    const double rel = e2 == 0 ? 0 : r2 > 0 ? sqrt(e2 / r2) : INFINITY;
    double cosd = 0;
    if (e2 != 0) {
        cosd = r2 > 0 && a2 > 0 ? 1.0 - m[M_DOT] / (sqrt(r2) * sqrt(a2)) : 1.0;
        cosd = cosd < 0 ? 0 : cosd > 2 ? 2 : cosd;
    }
    moments_add(&s->rel, rel, 0);
    moments_add(&s->cos, cosd, 0);
    moments_add(&s->maxabs, m[M_MAXABS], 0);
    moments_add(&s->energy, r2, e2);
    if (m[M_MAXABS] > s->max_abs_max) s->max_abs_max = m[M_MAXABS];
    if (s->rel.n == 1 || rel > s->worst) {
        s->worst = rel;
        s->worst_window = wi;
        s->worst_pos = pos;
    }
}

/* The embedding rows of the tokens at positions row0..row0+n-1 of w, the arm's against the
 * reference's (the lookup has one input, the token: own and reference input are the same). */
static bool emb_rows(diff_state *d, const kld_window *w, int64_t row0, int64_t n) {
    const int64_t k = d->emb_ref->ne[0];
    if (k > d->w_cap) {
        float *a = realloc(d->wa, (size_t)k * sizeof *a), *b = a ? realloc(d->wr, (size_t)k * sizeof *b) : NULL;
        if (a) d->wa = a;
        if (!a || !b) return false;
        d->wr = b;
        d->w_cap = k;
    }
    for (int64_t p = row0; p < row0 + n; p++) {
        const int32_t t = p == 0 && w->first_token >= 0 ? w->first_token : w->tokens[p];
        if (t < 0 || t >= d->emb_ref->ne[1]) continue;
        if (!weight_row(d->emb_ref, t, d->wr) || !weight_row(d->emb_arm, t, d->wa)) return false;
        for (int64_t i = 0; i < k; i++) {
            const double e = (double)d->wa[i] - (double)d->wr[i];
            d->emb_e2 += e * e;
            d->emb_r2 += (double)d->wr[i] * d->wr[i];
        }
        d->emb_rows++;
    }
    return true;
}

typedef struct emb_find {
    const kld_tensor *t;
} emb_find;

static void find_embd(void *ctx, const kld_tensor *t, const char *name) {
    emb_find *f = ctx;
    if (!strcmp(name, "token_embd.weight")) f->t = t;
}

typedef struct parent_list {
    diff_state *d;
    bool ref;
} parent_list;

/* The merged expert tensors: 3-D weights whose slices the routed experts multiply. */
static void add_parent(void *ctx, const kld_tensor *t, const char *name) {
    parent_list *l = ctx;
    diff_state *d = l->d;
    if (t->ne[2] < 2 || t->ne[3] != 1 || !strstr(name, "_exps.")) return;
    parent **ps = l->ref ? &d->par_ref : &d->par_arm;
    size_t *n = l->ref ? &d->n_par_ref : &d->n_par_arm, *cap = l->ref ? &d->cap_par_ref : &d->cap_par_arm;
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 16;
        parent *p = realloc(*ps, c * sizeof *p);
        if (!p) { d->mat_oom = true; return; }
        *ps = p;
        *cap = c;
    }
    (*ps)[*n].t = t;
    snprintf((*ps)[*n].name, sizeof (*ps)[*n].name, "%s", name);
    (*n)++;
}

static kld_status on_rows(void *user, const kld_window *w, size_t wi, const kld_rows *ref,
                          const kld_rows *arm, kld_error *err) {
    (void)arm;
    diff_state *d = user;
    if (d->out_of_step || d->arm_n != d->ref_n || d->arm_pos != d->ref_pos)
        return kld_fail(err, KLD_ERR_MISMATCH, "diff: the arms' chunks are out of step (reference "
                        "positions %lld+%lld, arm %lld+%lld)", (long long)d->ref_pos,
                        (long long)d->ref_n, (long long)d->arm_pos, (long long)d->arm_n);
    const int64_t r0 = ref->row0 - d->arm_pos;
    if (r0 < 0 || r0 + ref->n > d->arm_n)
        return kld_fail(err, KLD_ERR_MISMATCH, "diff: scored rows %lld..%lld outside the chunk at %lld+%lld",
                        (long long)ref->row0, (long long)(ref->row0 + ref->n), (long long)d->arm_pos,
                        (long long)d->arm_n);
    if (d->emb_ref && d->emb_arm && !emb_rows(d, w, ref->row0, ref->n))
        return kld_fail(err, KLD_ERR_NOMEM, "diff: the token embedding's rows cannot be read");
    const size_t n_sites = (size_t)(d->n_layer * KLD_SITE_COUNT);
    for (size_t k = 0; k < n_sites; k++) {
        const double *met = d->met + k * (size_t)(d->chunk * M_COUNT);
        for (int64_t r = 0; r < ref->n; r++)
            fold(&d->acc[k], met + (r0 + r) * M_COUNT, wi, ref->row0 + r);
    }
    return KLD_OK;
}

static kld_status on_prepared(void *user, kld_arm *ref, kld_arm *arm, kld_error *err) {
    diff_state *d = user;
    kld_session *sr = kld_arm_model_session(ref), *sa = kld_arm_model_session(arm);
    if (!sr || !sa)
        return kld_fail(err, KLD_ERR_ARG, "diff: %s: not a model arm (diff reads hidden states)",
                        sr ? arm->path : ref->path);
    const kld_hparams *hr = kld_model_hparams(ref->model), *ha = kld_model_hparams(arm->model);
    if (strcmp(hr->arch, ha->arch) || hr->n_layer != ha->n_layer || hr->n_embd != ha->n_embd)
        return kld_fail(err, KLD_ERR_MISMATCH,
                        "diff: the models differ in architecture: %s is %s (n_layer %lld, n_embd "
                        "%lld), %s is %s (n_layer %lld, n_embd %lld); diff compares hidden states "
                        "layer by layer", ref->path, hr->arch, (long long)hr->n_layer,
                        (long long)hr->n_embd, arm->path, ha->arch, (long long)ha->n_layer,
                        (long long)ha->n_embd);
    d->n_layer = hr->n_layer;
    d->E = hr->n_embd;
    d->chunk = kld_session_plan(sr)->max_chunk;
    const size_t n_sites = (size_t)(d->n_layer * KLD_SITE_COUNT);
    d->ref_buf = malloc(n_sites * (size_t)(d->chunk * d->E) * sizeof(float));
    d->met = malloc(n_sites * (size_t)(d->chunk * M_COUNT) * sizeof(double));
    d->acc = calloc(n_sites, sizeof *d->acc);
    if (!d->ref_buf || !d->met || !d->acc)
        return kld_fail(err, KLD_ERR_NOMEM, "diff: out of memory for %zu sites × %lld rows × %lld "
                        "values", n_sites, (long long)d->chunk, (long long)d->E);
    d->ref_pos = d->arm_pos = -1;
    kld_session_observe_layers(sr, observe_ref, d);
    kld_session_observe_layers(sa, observe_arm, d);
    if (d->matrices) {
        d->ref_model = ref->model;
        d->arm_model = arm->model;
        kld_session_observe(sr, observe_mat_ref, d);
        kld_session_observe(sa, observe_mat_arm, d);
        parent_list pr = {d, true}, pa = {d, false};
        kld_model_each_weight(ref->model, add_parent, &pr);
        kld_model_each_weight(arm->model, add_parent, &pa);
        if (d->mat_oom) return kld_fail(err, KLD_ERR_NOMEM, "diff: out of memory");
        emb_find er = {NULL}, ea = {NULL};
        kld_model_each_weight(ref->model, find_embd, &er);
        kld_model_each_weight(arm->model, find_embd, &ea);
        if (er.t && ea.t && er.t->ne[2] == 1 && ea.t->ne[2] == 1 && er.t->ne[0] == ea.t->ne[0] &&
            er.t->ne[1] == ea.t->ne[1]) {
            d->emb_ref = er.t;
            d->emb_arm = ea.t;
        }
    }
    return KLD_OK;
}

kld_status kld_diff_check(const kld_kl_config *c, kld_error *err) {
    kld_status st = kld_kl_check(c, err);
    if (st) return st;
    if (c->ref.kind != KLD_ARM_MODEL)
        return kld_fail(err, KLD_ERR_ARG, "diff: the reference %s is %s: it holds no hidden layers; "
                        "diff needs a model (--ref)", c->ref.path ? c->ref.path : "",
                        kld_arm_kind_desc(c->ref.kind));
    if (c->arm.kind != KLD_ARM_MODEL && c->arm.kind != KLD_ARM_SELF)
        return kld_fail(err, KLD_ERR_ARG, "diff: the arm %s is %s: it holds no hidden layers; "
                        "diff needs a model (--arm) or a self-flag lever (-m M --lever ...)",
                        c->arm.path ? c->arm.path : "", kld_arm_kind_desc(c->arm.kind));
    if (c->arm.decode)
        return kld_fail(err, KLD_ERR_ARG, "diff: --decode is not supported (the layers are "
                        "compared chunk by chunk on the prefill path)");
    if (c->shard.n || c->checkpoint)
        return kld_fail(err, KLD_ERR_ARG, "diff: --shard, --checkpoint and --resume do not apply");
    return KLD_OK;
}

static void finish_site(const site_acc *s, int64_t il, kld_layer_site site, kld_diff_site *o) {
    *o = (kld_diff_site){.layer = il, .site = site, .n = s->rel.n};
    o->rel_frob = s->rel.mx, o->rel_frob_se = se_of(&s->rel, s->rel.m2x);
    o->cosine = s->cos.mx, o->cosine_se = se_of(&s->cos, s->cos.m2x);
    o->max_abs = s->maxabs.mx, o->max_abs_se = se_of(&s->maxabs, s->maxabs.m2x);
    o->max_abs_max = s->max_abs_max;
    o->worst_rel_frob = s->worst, o->worst_window = s->worst_window, o->worst_pos = s->worst_pos;
    const moments *e = &s->energy;
    if (e->my == 0) {
        o->sqnr_inf = true;
        o->sqnr_db = INFINITY;
        o->sqnr_db_se = 0;
        return;
    }
    o->sqnr_db = 10.0 * log10(e->mx / e->my);
    if (e->n < 2) {
        o->sqnr_db_se = NAN;
        return;
    }
    /* delta method for 10·log10(mean X / mean Y) */
    const double n1 = (double)e->n * (double)(e->n - 1);
    const double v = e->m2x / n1 / (e->mx * e->mx) + e->m2y / n1 / (e->my * e->my) -
                     2.0 * e->cxy / n1 / (e->mx * e->my);
    o->sqnr_db_se = 10.0 / log(10.0) * sqrt(v > 0 ? v : 0);
}

kld_status kld_diff_run(const kld_kl_config *c, bool matrices, kld_diff_result *out,
                        kld_error *err) {
    memset(out, 0, sizeof *out);
    kld_status st = kld_diff_check(c, err);
    if (st) return st;
    diff_state d = {.matrices = matrices};
    kld_kl_hooks h = {on_prepared, on_rows, &d};
    st = kld_kl_run_hooked(c, &h, &out->kl, err);
    if (!st) {
        out->n_layer = d.n_layer;
        out->n_embd = d.E;
        out->n_sites = (size_t)(d.n_layer * KLD_SITE_COUNT);
        out->sites = calloc(out->n_sites ? out->n_sites : 1, sizeof *out->sites);
        if (!out->sites) st = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
        out->worst_layer = -1;
        double worst = INFINITY;
        for (size_t k = 0; !st && k < out->n_sites; k++) {
            finish_site(&d.acc[k], (int64_t)(k / KLD_SITE_COUNT), (kld_layer_site)(k % KLD_SITE_COUNT),
                        &out->sites[k]);
            const kld_diff_site *s = &out->sites[k];
            /* where drift enters: the sublayer output with the lowest SQNR */
            if (s->site != KLD_SITE_RESID && !s->sqnr_inf && s->sqnr_db < worst) {
                worst = s->sqnr_db;
                out->worst_layer = s->layer;
            }
        }
        if (!st && d.mat_oom) st = kld_fail(err, KLD_ERR_NOMEM, "diff: out of memory for the matrices' inputs");
        if (!st && !(out->matrices = calloc(d.n_mat + 1, sizeof *out->matrices)))
            st = kld_fail(err, KLD_ERR_NOMEM, "out of memory");
        for (size_t i = 0; !st && i < d.n_mat; i++) {
            const mat_acc *m = &d.mat[i];
            if (!m->w_arm) continue; /* never run by the arm (or shapes differ) */
            kld_diff_matrix *o = &out->matrices[out->n_matrices++];
            snprintf(o->name, sizeof o->name, "%s", m->name);
            o->rows = m->rows;
            o->rel_err_own_input = m->own_e2 == 0 ? 0 : m->own_r2 > 0 ? sqrt(m->own_e2 / m->own_r2) : INFINITY;
            o->rel_err_ref_input = m->ref_e2 == 0 ? 0 : m->ref_r2 > 0 ? sqrt(m->ref_e2 / m->ref_r2) : INFINITY;
        }
        /* the embedding's lookup, unless it is measured as a product already (a tied head) */
        if (!st && d.emb_rows && !mat_find(&d, "token_embd.weight", false)) {
            kld_diff_matrix *o = &out->matrices[out->n_matrices++];
            snprintf(o->name, sizeof o->name, "token_embd.weight");
            o->rows = d.emb_rows;
            o->rel_err_own_input = o->rel_err_ref_input =
                d.emb_e2 == 0 ? 0 : d.emb_r2 > 0 ? sqrt(d.emb_e2 / d.emb_r2) : INFINITY;
        }
        out->matrices_measured = matrices;
        if (st) kld_diff_result_free(out);
    }
    for (size_t i = 0; i < d.n_mat; i++) free(d.mat[i].x_ref);
    free(d.mat);
    free(d.par_ref);
    free(d.par_arm);
    free(d.wr);
    free(d.wa);
    free(d.ref_buf);
    free(d.met);
    free(d.acc);
    return st;
}

void kld_diff_result_free(kld_diff_result *r) {
    kld_kl_result_free(&r->kl);
    free(r->sites);
    free(r->matrices);
    r->matrices = NULL;
    r->n_matrices = 0;
    r->sites = NULL;
    r->n_sites = 0;
}

/* ---- the report ---- */

static json_t *num(double x) { return isfinite(x) ? json_real(x) : json_null(); }

json_t *kld_diff_json(const kld_diff_result *r, const kld_summary *sum) {
    json_t *o = json_object();
    json_object_set_new(o, "schema", json_string("kldeval.diff/1"));
    json_object_set_new(o, "version", json_string(kld_version()));
    json_object_set_new(o, "ref", json_string(r->kl.ref_label));
    json_object_set_new(o, "arm", json_string(r->kl.arm_label));
    json_object_set_new(o, "corpus", json_string(r->kl.corpus_label));
    json_object_set_new(o, "config", json_deep_copy(r->kl.config));
    json_object_set_new(o, "partial", json_boolean(r->kl.partial));
    json_object_set_new(o, "n_layer", json_integer(r->n_layer));
    json_object_set_new(o, "n_embd", json_integer(r->n_embd));
    json_object_set_new(o, "n_positions", json_integer((json_int_t)sum->n_positions));
    json_object_set_new(o, "worst_layer", r->worst_layer >= 0 ? json_integer(r->worst_layer) : json_null());
    json_t *layers = json_array();
    for (size_t k = 0; k < r->n_sites; k++) {
        const kld_diff_site *s = &r->sites[k];
        json_t *e = json_object();
        json_object_set_new(e, "layer", json_integer(s->layer));
        json_object_set_new(e, "site", json_string(kld_layer_site_name(s->site)));
        json_object_set_new(e, "n", json_integer((json_int_t)s->n));
        json_object_set_new(e, "rel_frob", num(s->rel_frob));
        json_object_set_new(e, "rel_frob_stderr", num(s->rel_frob_se));
        json_object_set_new(e, "cosine", num(s->cosine));
        json_object_set_new(e, "cosine_stderr", num(s->cosine_se));
        json_object_set_new(e, "sqnr_db", num(s->sqnr_db));
        json_object_set_new(e, "sqnr_db_stderr", num(s->sqnr_db_se));
        json_object_set_new(e, "sqnr_inf", json_boolean(s->sqnr_inf));
        json_object_set_new(e, "max_abs", num(s->max_abs));
        json_object_set_new(e, "max_abs_stderr", num(s->max_abs_se));
        json_object_set_new(e, "max_abs_max", num(s->max_abs_max));
        json_object_set_new(e, "worst", json_pack("{s:o,s:I,s:I}", "rel_frob", num(s->worst_rel_frob),
                                                  "window", (json_int_t)s->worst_window, "pos",
                                                  (json_int_t)s->worst_pos));
        json_array_append_new(layers, e);
    }
    json_object_set_new(o, "layers", layers);
    if (r->matrices_measured) {
        json_t *mats = json_array();
        for (size_t i = 0; i < r->n_matrices; i++) {
            const kld_diff_matrix *m = &r->matrices[i];
            json_array_append_new(mats, json_pack("{s:s,s:o,s:o,s:I}", "name", m->name,
                                                  "rel_err_own_input", num(m->rel_err_own_input),
                                                  "rel_err_ref_input", num(m->rel_err_ref_input),
                                                  "rows", (json_int_t)m->rows));
        }
        json_object_set_new(o, "matrices", mats);
    }
    json_object_set_new(o, "logits", json_pack("{s:o,s:o,s:o,s:o}", "kld_mean", num(sum->kld.mean),
                                               "kld_stderr", num(sum->kld.se), "top1_agreement",
                                               num(sum->top1_agreement), "top1_agreement_stderr",
                                               num(sum->top1_se)));
    return o;
}

static void print_num(FILE *f, double x, double se) {
    if (isinf(x)) fprintf(f, " %21s", "+inf");
    else if (isnan(se)) fprintf(f, " %10.3e %10s", x, "");
    else fprintf(f, " %10.3e±%-9.2e", x, se);
}

void kld_diff_print(FILE *f, const kld_diff_result *r, const kld_summary *sum) {
    fprintf(f, "kldeval diff%s\n", r->kl.partial ? " (PARTIAL: stopped early)" : "");
    fprintf(f, "%-12s: %s\n%-12s: %s\n%-12s: %s\n", "reference", r->kl.ref_label, "arm",
            r->kl.arm_label, "corpus", r->kl.corpus_label);
    fprintf(f, "%-12s: %llu scored, %lld layers, n_embd %lld\n\n", "positions",
            (unsigned long long)sum->n_positions, (long long)r->n_layer, (long long)r->n_embd);
    fprintf(f, "%5s %-6s %21s %21s %21s %21s %10s\n", "layer", "site", "rel_frob ± se",
            "1-cos ± se", "SQNR dB ± se", "max|a-r| ± se", "max");
    for (size_t k = 0; k < r->n_sites; k++) {
        const kld_diff_site *s = &r->sites[k];
        fprintf(f, "%5lld %-6s", (long long)s->layer, kld_layer_site_name(s->site));
        print_num(f, s->rel_frob, s->rel_frob_se);
        print_num(f, s->cosine, s->cosine_se);
        if (s->sqnr_inf) fprintf(f, " %21s", "+inf");
        else fprintf(f, " %10.2f±%-9.2f", s->sqnr_db, s->sqnr_db_se);
        print_num(f, s->max_abs, s->max_abs_se);
        fprintf(f, " %10.3e", s->max_abs_max);
        if (s->layer == r->worst_layer && s->site != KLD_SITE_RESID && !s->sqnr_inf) {
            const kld_diff_site *m = &r->sites[s->layer * KLD_SITE_COUNT];
            const kld_diff_site *fn = m + 1;
            const kld_diff_site *w = m->sqnr_inf ? fn : fn->sqnr_inf ? m
                                     : m->sqnr_db <= fn->sqnr_db ? m : fn;
            if (w == s) fprintf(f, "  <- worst");
        }
        fputc('\n', f);
    }
    fprintf(f, "%5s %-6s KLD %.6e ± %.2e, top-1 agreement %.6f (the kl run's figures)\n", "out",
            "logits", sum->kld.mean, sum->kld.se, sum->top1_agreement);
    if (r->matrices_measured) {
        fprintf(f, "\n%-32s %18s %18s\n", "matrix", "err on arm input", "err on ref input");
        for (size_t i = 0; i < r->n_matrices; i++)
            fprintf(f, "%-32s %18.6e %18.6e\n", r->matrices[i].name, r->matrices[i].rel_err_own_input,
                    r->matrices[i].rel_err_ref_input);
    }
    if (r->worst_layer >= 0) {
        fprintf(f, "\nworst layer: %lld (the lowest sublayer-output SQNR)\n", (long long)r->worst_layer);
    } else {
        fprintf(f, "\nworst layer: none (every sublayer output identical)\n");
    }
}
