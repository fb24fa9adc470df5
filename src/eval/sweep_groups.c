/* sweep_groups.c — the sensitivity sweep's groups, arms, ranking and
 * budget proposal (sweep_groups.h). */
#include "eval/sweep_groups.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static kld_status plan_groups(const kld_sweep_groups_config *s, kld_sweep_groups *g, kld_error *err) {
    const char *model = s->model;
    kld_status st = kld_source_open(model, &g->src, err);
    if (!st) st = kld_hparams_read(g->src, &g->hp, err);
    if (!st) st = kld_quant_view_open(s->base, g->src, &g->hp, &g->base_view, err);
    if (st) return st;
    g->have_view = true;
    if ((st = kld_quant_groups(&g->base_view.plan, s->kind, &g->lo, &g->n, err))) return st;
    if (g->n == 0) return kld_fail(err, KLD_ERR_ARG, "%s: no tensor the policy %s can quantize", model, s->base);
    g->hi = calloc(g->n, sizeof *g->hi);
    if (!g->hi) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < g->n; i++) {
        g->hi[i] = g->lo[i];
        g->hi[i].base_bytes = g->lo[i].keep_bytes;
    }
    if (!s->upgrade) return KLD_OK;
    /* the groups' bytes at the upgrade type: the same groups of that policy's plan */
    kld_quant_view up;
    if ((st = kld_quant_view_open(s->upgrade, g->src, &g->hp, &up, err))) return st;
    kld_quant_group *u = NULL;
    size_t nu = 0;
    st = kld_quant_groups(&up.plan, s->kind, &u, &nu, err);
    for (size_t i = 0; !st && i < g->n; i++) {
        size_t j = 0;
        while (j < nu && strcmp(u[j].selector, g->lo[i].selector)) j++;
        if (j == nu) st = kld_fail(err, KLD_ERR_ARG, "--upgrade %s: group %s has no tensor to raise", s->upgrade, g->lo[i].selector);
        else g->hi[i].base_bytes = u[j].base_bytes;
    }
    free(u);
    kld_quant_view_close(&up);
    return st;
}

static void plan_free(kld_sweep_groups *g) {
    free(g->lo);
    free(g->hi);
    if (g->have_view) kld_quant_view_close(&g->base_view);
    if (g->src) kld_source_close(g->src);
}

/* MODEL@POLICY strings of the arms, owned by an array freed at the end. */
static char *arm_model(const char *model, const char *policy) {
    size_t n = strlen(model) + strlen(policy) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s@%s", model, policy);
    return p;
}

static kld_status build_arms(const kld_sweep_groups_config *s, kld_sweep_groups *g, kld_error *err) {
    size_t cap = g->n + 2;
    g->arms = calloc(cap, sizeof *g->arms);
    g->owned = calloc(2 * cap, sizeof *g->owned);
    if (!g->arms || !g->owned) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    const char *model = s->model;
    char pol[4096];
    g->base = g->all_high = -1;
#define OWN(p) (g->owned[g->n_owned++] = (p))
    g->base = (long)g->n_arms;
    g->arms[g->n_arms++] = (kld_sweep_arm){"all at base", OWN(arm_model(model, s->base)), NULL};
    if (!s->invert && s->upgrade) {
        snprintf(pol, sizeof pol, "%s,*=%s", s->base, s->upgrade);
        g->all_high = (long)g->n_arms;
        g->arms[g->n_arms++] = (kld_sweep_arm){"all raised", OWN(arm_model(model, pol)), NULL};
    }
    for (size_t i = 0; i < g->n; i++) {
        kld_status st = kld_quant_group_policy(s->base, &g->lo[i], s->invert, s->upgrade, pol, sizeof pol, err);
        if (st) return st;
        g->arms[g->n_arms++] = (kld_sweep_arm){g->lo[i].selector, OWN(arm_model(model, pol)), NULL};
    }
#undef OWN
    for (size_t i = 0; i < g->n_owned; i++)
        if (!g->owned[i]) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    return KLD_OK;
}


kld_status kld_sweep_groups_plan(const kld_sweep_groups_config *c, kld_sweep_groups *g, kld_error *err) {
    memset(g, 0, sizeof *g);
    g->base = g->all_high = -1;
    kld_status st = plan_groups(c, g, err);
    if (!st) st = build_arms(c, g, err);
    if (st) kld_sweep_groups_free(g);
    return st;
}

void kld_sweep_groups_free(kld_sweep_groups *g) {
    for (size_t i = 0; g->owned && i < g->n_owned; i++) free(g->owned[i]);
    free(g->owned);
    free(g->arms);
    plan_free(g);
    memset(g, 0, sizeof *g);
}

size_t kld_sweep_groups_first(const kld_sweep_groups *g) {
    return (size_t)(g->all_high >= 0 ? g->all_high : g->base) + 1;
}

static kld_status group_delta(const kld_sweep_groups_config *s, const kld_sweep_groups *A,
                              const kld_sweep_result *r, size_t arm, kld_sweep_group_result *out,
                              kld_error *err) {
    const kld_sweep_outcome *o = &r->arms[arm];
    kld_status st = KLD_OK;
    if (s->invert) { /* KLD(all base) − KLD(group raised) */
        const kld_sweep_outcome *b = &r->arms[A->base];
        if (!(st = kld_sweep_paired(b->res.stats, o->res.stats, KLD_PAIRED_KLD, &out->d_kld, err)))
            st = kld_sweep_paired(o->res.stats, b->res.stats, KLD_PAIRED_TOP1, &out->d_top1, err);
    } else if (A->all_high >= 0) { /* KLD(group low) − KLD(all raised) */
        const kld_sweep_outcome *h = &r->arms[A->all_high];
        if (!(st = kld_sweep_paired(o->res.stats, h->res.stats, KLD_PAIRED_KLD, &out->d_kld, err)))
            st = kld_sweep_paired(h->res.stats, o->res.stats, KLD_PAIRED_TOP1, &out->d_top1, err);
    } else { /* against the reference itself: KLD 0, top-1 1 */
        out->d_kld = (kld_paired){o->sum.kld.mean, o->sum.kld.se, o->sum.n_positions, 0, 0};
        out->d_top1 = (kld_paired){1.0 - o->sum.top1_agreement, o->sum.top1_se, o->sum.n_positions, 0, 0};
    }
    return st;
}

static int by_delta(const void *x, const void *y) {
    const kld_sweep_group_result *a = x, *b = y;
    if (a->d_kld.mean != b->d_kld.mean) return a->d_kld.mean > b->d_kld.mean ? -1 : 1;
    return a->group < b->group ? -1 : a->group > b->group;
}

kld_status kld_sweep_groups_rank(const kld_sweep_groups_config *c, const kld_sweep_groups *g,
                                 const kld_sweep_result *r, kld_sweep_group_result **out,
                                 size_t *n_out, kld_error *err) {
    *n_out = 0;
    kld_sweep_group_result *gr = calloc(g->n ? g->n : 1, sizeof *gr);
    if (!(*out = gr)) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    size_t first = kld_sweep_groups_first(g), n = 0;
    kld_status st = KLD_OK;
    for (size_t arm = first; !st && arm < r->n_done && n < g->n; arm++, n++) {
        gr[n].group = arm - first;
        gr[n].arm = arm;
        st = group_delta(c, g, r, arm, &gr[n], err);
    }
    qsort(gr, n, sizeof *gr, by_delta);
    *n_out = n;
    return st;
}

kld_status kld_sweep_groups_propose(const kld_sweep_groups_config *s, const kld_sweep_groups *g,
                                    const kld_sweep_group_result *gr, size_t n_gr, double budget,
                                    const kld_sweep_config *sc, kld_sweep_result *r,
                                    kld_sweep_proposal *out, kld_error *err) {
    memset(out, 0, sizeof *out);
    kld_budget_item *items = calloc(g->n ? g->n : 1, sizeof *items);
    if (!items) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    uint64_t grouped = 0;
    for (size_t i = 0; i < n_gr; i++) {
        size_t k = gr[i].group;
        items[k] = (kld_budget_item){g->lo[k].selector, g->lo[k].base_bytes, g->hi[k].base_bytes,
                                     gr[i].d_kld.mean};
    }
    for (size_t k = 0; k < g->n; k++) grouped += g->lo[k].base_bytes;
    const kld_quant_plan *bp = &g->base_view.plan;
    double bpw = 0;
    kld_status st = kld_quant_budget(s->base, s->upgrade, items, g->n, bp->dst_bytes - grouped,
                                     bp->n_params, budget, out->policy, sizeof out->policy, &bpw,
                                     &out->n_raised, err);
    free(items);
    if (st) return st;
    kld_quant_view v;
    if ((st = kld_quant_view_open(out->policy, g->src, &g->hp, &v, err))) return st;
    out->bpw = kld_quant_plan_bpw(&v.plan);
    kld_quant_view_close(&v);
    char *model = arm_model(s->model, out->policy);
    if (!model) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    kld_sweep_arm arm = {"proposal", model, NULL};
    st = kld_sweep_add(sc, r, &arm, 1, err);
    free(model);
    if (st || r->partial) return st;
    out->arm = &r->arms[r->n_done - 1];
    out->base = &r->arms[g->base];
    return kld_sweep_paired(out->arm->res.stats, out->base->res.stats, KLD_PAIRED_KLD, &out->d_kld_vs_base, err);
}

kld_status kld_sweep_groups_diff_models(const kld_sweep_groups_config *c, char **ref, char **arm,
                                        kld_error *err) {
    char pol[4096];
    *ref = *arm = NULL;
    if (c->upgrade && snprintf(pol, sizeof pol, "%s,*=%s", c->base, c->upgrade) >= (int)sizeof pol)
        return kld_fail(err, KLD_ERR_ARG, "--base %s: the policy is too long", c->base);
    *ref = c->upgrade ? arm_model(c->model, pol) : strdup(c->model);
    *arm = arm_model(c->model, c->base);
    if (!*ref || !*arm) {
        free(*ref), free(*arm);
        *ref = *arm = NULL;
        return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    }
    return KLD_OK;
}

static int by_score(const void *x, const void *y) {
    const kld_sweep_diff_row *a = x, *b = y;
    const bool ma = !isnan(a->score), mb = !isnan(b->score);
    if (ma != mb) return ma ? -1 : 1;
    if (ma && a->score != b->score) return a->score > b->score ? -1 : 1;
    return a->group < b->group ? -1 : a->group > b->group;
}

kld_status kld_sweep_groups_rank_diff(const kld_sweep_groups_config *c, const kld_sweep_groups *g,
                                      const kld_diff_result *d, kld_sweep_diff_row **out,
                                      kld_error *err) {
    kld_sweep_diff_row *rows = calloc(g->n ? g->n : 1, sizeof *rows);
    if (!(*out = rows)) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    for (size_t k = 0; k < g->n; k++) rows[k] = (kld_sweep_diff_row){k, NAN, 0};
    const kld_quant_plan *plan = &g->base_view.plan;
    /* in the pass's matrix order, so that the sums are those a reader of its JSON gets */
    for (size_t m = 0; m < d->n_matrices; m++) {
        const kld_diff_matrix *dm = &d->matrices[m];
        size_t i = 0;
        while (i < plan->n && strcmp(plan->items[i].name, dm->name)) i++;
        if (i == plan->n || !plan->items[i].eligible) continue; /* in no group */
        char sel[64];
        kld_quant_item_group(plan, i, c->kind, sel, sizeof sel);
        size_t k = 0;
        while (k < g->n && strcmp(g->lo[k].selector, sel)) k++;
        if (k == g->n) continue;
        const double e = dm->rel_err_own_input;
        rows[k].score = (rows[k].n_matrices ? rows[k].score : 0.0) + e * e;
        rows[k].n_matrices++;
    }
    qsort(rows, g->n, sizeof *rows, by_score);
    return KLD_OK;
}
