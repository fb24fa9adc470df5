/* sweep_grid.c — the arms of a lever sweep (sweep_grid.h). */
#include "eval/sweep_grid.h"

#include "common/common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct axis {
    char name[32];
    char *values[KLD_SWEEP_GRID_MAX_VALUES];
    int n;
} axis;

/* "kv=f16,q8_0" → name kv, values f16 q8_0; a list holding ';' is split on
 * ';' instead, so values may be per-layer maps ("kv=blk:0-1=q8_0,q4_0;q4_0"). */
static kld_status parse_axis(char *text, axis *ax, kld_error *err) {
    char *eq = strchr(text, '=');
    if (!eq || eq == text || (size_t)(eq - text) >= sizeof ax->name)
        return kld_fail(err, KLD_ERR_ARG, "--sweep expects NAME=VALUE,VALUE,... (e.g. kv=f16,q8_0,q4_0), "
                        "got '%s'", text);
    snprintf(ax->name, sizeof ax->name, "%.*s", (int)(eq - text), text);
    const char *sep = strchr(eq + 1, ';') ? ";" : ",";
    char *save = NULL;
    for (char *v = strtok_r(eq + 1, sep, &save); v; v = strtok_r(NULL, sep, &save)) {
        if (ax->n == KLD_SWEEP_GRID_MAX_VALUES)
            return kld_fail(err, KLD_ERR_ARG, "--sweep %s: at most %d values", ax->name,
                            KLD_SWEEP_GRID_MAX_VALUES);
        ax->values[ax->n++] = v;
    }
    if (ax->n == 0) return kld_fail(err, KLD_ERR_ARG, "--sweep %s: no values", ax->name);
    return KLD_OK;
}

/* Splits the grid on "×" (or "*") into axes; the count, or -1. */
static int parse_grid(char *spec, axis *axes, kld_error *err) {
    int n = 0;
    char *p = spec;
    while (p) {
        char *next = strstr(p, "×"), *star = strchr(p, '*');
        size_t skip = strlen("×");
        if (star && (!next || star < next)) next = star, skip = 1;
        if (next) *next = '\0';
        if (n == KLD_SWEEP_GRID_MAX_AXES) {
            kld_fail(err, KLD_ERR_ARG, "--sweep: at most %d axes", KLD_SWEEP_GRID_MAX_AXES);
            return -1;
        }
        if (parse_axis(p, &axes[n++], err)) return -1;
        p = next ? next + skip : NULL;
    }
    return n;
}

static char *own(kld_sweep_grid *g, char *s) {
    if (s) g->owned[g->n_owned++] = s;
    return s;
}

static char *join_levers(const char *base, const char *extra) {
    size_t n = (base ? strlen(base) + 1 : 0) + strlen(extra) + 1;
    char *s = malloc(n);
    if (s) snprintf(s, n, "%s%s%s", base ? base : "", base ? "," : "", extra);
    return s;
}

/* One arm, parsed as every model arm is: a lever that does not parse is
 * named now, not after the teacher's pass. */
static kld_status add_arm(kld_sweep_grid *g, const char *label, const char *model, const char *levers,
                          kld_error *err) {
    kld_arm_spec spec = {.kind = KLD_ARM_MODEL, .path = model, .levers = levers};
    kld_arm_parsed parsed;
    kld_status st = kld_arm_spec_parse(&spec, "arm", &parsed, err);
    if (st) return kld_error_prefix(err, "--sweep"), st;
    g->arms[g->n++] = (kld_sweep_arm){label, model, levers};
    return KLD_OK;
}

static kld_status build(const axis *axes, int n_axes, bool floor, const kld_arm_spec *ref,
                        const kld_arm_spec *arm, kld_sweep_grid *g, kld_error *err) {
    const char *model = arm->kind == KLD_ARM_MODEL ? arm->path : ref->path;
    int idx[KLD_SWEEP_GRID_MAX_AXES] = {0};
    size_t total = 1;
    for (int k = 0; k < n_axes; k++) total *= (size_t)axes[k].n;
    if (total > KLD_SWEEP_GRID_MAX_ARMS)
        return kld_fail(err, KLD_ERR_ARG, "--sweep: %zu arms (at most %d)", total, KLD_SWEEP_GRID_MAX_ARMS);
    size_t cap = (n_axes ? total : 1) + 1;
    g->arms = calloc(cap, sizeof *g->arms);
    g->owned = calloc(2 * cap, sizeof *g->owned);
    if (!g->arms || !g->owned) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    kld_status st = KLD_OK;
    for (size_t t = 0; !st && n_axes > 0 && t < total; t++) {
        char point[1024] = "";
        size_t w = 0;
        for (int k = 0; k < n_axes && w < sizeof point; k++)
            w += (size_t)snprintf(point + w, sizeof point - w, "%s%s=%s", k ? "," : "", axes[k].name,
                                  axes[k].values[idx[k]]);
        if (w >= sizeof point) return kld_fail(err, KLD_ERR_ARG, "--sweep: a grid point longer than %zu bytes",
                                               sizeof point - 1);
        char *label = own(g, kld_strdup(point)), *levers = own(g, join_levers(arm->levers, point));
        if (!label || !levers) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
        st = add_arm(g, label, model, levers, err);
        for (int k = n_axes - 1; k >= 0; k--) { /* the last axis varies fastest */
            if (++idx[k] < axes[k].n) break;
            idx[k] = 0;
        }
    }
    if (!st && n_axes == 0) /* --floor alone: the run's own arm beside the floor */
        st = add_arm(g, arm->levers ? arm->levers : "arm", model, arm->levers, err);
    if (!st && floor) {
        char *lv = own(g, join_levers(ref->levers, "noise=bf16"));
        if (!lv) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
        g->floor = (long)g->n;
        st = add_arm(g, "floor (noise=bf16)", ref->path, lv, err);
    }
    return st;
}

kld_status kld_sweep_grid_build(const char *spec, bool floor, const kld_arm_spec *ref,
                                const kld_arm_spec *arm, kld_sweep_grid *out, kld_error *err) {
    memset(out, 0, sizeof *out);
    out->floor = -1;
    axis axes[KLD_SWEEP_GRID_MAX_AXES];
    memset(axes, 0, sizeof axes);
    char *text = spec ? kld_strdup(spec) : NULL;
    if (spec && !text) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    int n_axes = text ? parse_grid(text, axes, err) : 0;
    kld_status st = n_axes < 0 ? KLD_ERR_ARG : build(axes, n_axes, floor, ref, arm, out, err);
    free(text); /* the labels and levers were copied */
    if (st) kld_sweep_grid_free(out);
    return st;
}

void kld_sweep_grid_free(kld_sweep_grid *g) {
    for (size_t i = 0; g->owned && i < g->n_owned; i++) free(g->owned[i]);
    free(g->owned);
    free(g->arms);
    memset(g, 0, sizeof *g);
    g->floor = -1;
}

void kld_sweep_teacher_of_kl(const kld_kl_config *c, const char *out, int32_t top_k, kld_dump_config *t) {
    kld_dump_config_defaults(t);
    t->model_path = c->ref.path;
    t->levers = c->ref.levers;
    t->corpus_path = c->corpus_path;
    t->corpus_format = c->corpus_format;
    t->ids_path = c->ids_path;
    t->max_docs = c->max_docs;
    t->max_tokens = c->max_tokens;
    t->max_chunks = c->max_chunks;
    t->ctx = c->ctx;
    t->chunk = c->chunk;
    t->chunking = c->chunking;
    t->n_threads = c->n_threads;
    t->allow_vocab_mismatch = c->allow_vocab_mismatch;
    t->out = out;
    t->top_k = top_k;
}
