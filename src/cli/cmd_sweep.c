/* cmd_sweep.c — `kldeval sweep`: which tensors deserve more bits. The
 * reference is forwarded once into a saved teacher; then one arm per group
 * of tensors (layers, tensor classes, or both) is scored against it, with
 * only that group at the base policy's types (--invert: only that group
 * raised), ranked by the paired KLD difference; --budget proposes, and
 * measures, a policy that fits a bits-per-weight budget. */
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/sweep_cli.h"
#include "engine/engine.h"
#include "quant/quant.h"
#include "report/report.h"
#include "report/report_sweep.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
"usage: kldeval sweep --ref MODEL --base POLICY [--groups layers|classes|layers×classes]\n"
"                     [--invert] [--upgrade TYPE] [--budget BPW] [flags]\n\n"
"The sensitivity sweep: which tensors deserve more bits? The reference (MODEL at its stored\n"
"precision) is forwarded once into a saved teacher; then one arm per group is quantized on load\n"
"and scored against it: only that group at the base policy's types and everything else at the\n"
"higher precision (--invert: everything at the base but that group). The table ranks the groups\n"
"by the KLD the higher precision saves on them, a paired per-position difference against the\n"
"arm with every group high (plain sweep) or every group at the base (--invert), ± its standard\n"
"error, with Δtop-1 and the bytes the higher precision costs. Cost: one reference pass, one pass\n"
"of the all-base arm, one per group (and one for an --upgrade all-high arm, one for --budget).\n\n"
"  --ref MODEL, -m MODEL  the reference (GGUF, safetensors, HF directory), at its stored types\n"
"  --base POLICY          the low precision: a type or recipe with selectors (kldeval quantize)\n"
"  --groups G             layers (default: blk:i, plus embd and head), classes (attn_q, ...,\n"
"                         ffn_down, embd, head) or layers×classes (also layersxclasses)\n"
"  --invert               each arm keeps only its group high (the rest at the base)\n"
"  --upgrade TYPE         the higher precision: a tensor type (default keep: the stored types)\n"
"  --budget BPW           propose a policy of at most BPW bits per weight: groups raised greedily\n"
"                         by KLD saved per extra byte; the proposal is scored too\n"
"  --teacher DIR          keep the reference's saved teacher in DIR (reused when DIR already holds\n"
"                         a complete dump; default: a temporary directory, removed at the end)\n"
"  --teacher-top-k K|all  ids per teacher record (default all: the whole vocabulary, kept as the\n"
"                         reference's hidden states (dump --hidden) and recomputed: exact\n"
"                         full-vocabulary KLD; K: a smaller teacher, KLD the truncated sum)\n"
SWEEP_WINDOW_HELP
"  --topk K               top-k overlap size (default 10)\n"
"  --json FILE            the sweep as JSON (schema kldeval.sweep/1, see docs/policies.md)\n"
SWEEP_RECORD_HELP
"  -h, --help             this text\n\n"
"Every arm is recorded in the run database with mode \"sweep\"; kldeval report ranks them.\n"
"Ctrl-C stops after the current chunk; the arms completed so far are reported.\n");
}

typedef struct sweep_cli {
    kld_sweep_cli_common k;
    const char *base, *upgrade, *json_path;
    kld_group_kind kind;
    bool invert, has_budget;
    double budget;
} sweep_cli;

static bool parse(int argc, char **argv, sweep_cli *s, int *rc) {
    static const char *const valued[] = {"--base", "--groups", "--upgrade", "--budget", "--json", NULL};
    *rc = 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            *rc = 0;
            return false;
        }
        if (!strcmp(a, "--invert")) { s->invert = true; continue; }
        int c = kld_sweep_cli_flag("sweep", argc, argv, &i, &s->k);
        if (c == 1) continue;
        if (c == 0) return false;
        if (!kld_arg_in(a, valued)) {
            fprintf(stderr, "kldeval sweep: unknown %s '%s' (see --help)\n", a[0] == '-' ? "flag" : "argument", a);
            return false;
        }
        if (!(v = kld_arg_value(argc, argv, &i))) return false;
        if (!strcmp(a, "--base")) s->base = v;
        else if (!strcmp(a, "--upgrade")) s->upgrade = strcmp(v, "keep") ? v : NULL;
        else if (!strcmp(a, "--json")) s->json_path = v;
        else if (!strcmp(a, "--groups")) {
            if (!strcmp(v, "layers")) s->kind = KLD_GROUPS_LAYERS;
            else if (!strcmp(v, "classes")) s->kind = KLD_GROUPS_CLASSES;
            else if (!strcmp(v, "layers×classes") || !strcmp(v, "layersxclasses") ||
                     !strcmp(v, "layers*classes"))
                s->kind = KLD_GROUPS_LAYERS_CLASSES;
            else {
                fprintf(stderr, "kldeval sweep: --groups expects layers, classes or layers×classes, got '%s'\n", v);
                return false;
            }
        } else if (!strcmp(a, "--budget")) {
            char *end;
            s->budget = strtod(v, &end);
            if (*end || !(s->budget > 0) || s->budget > 64) {
                fprintf(stderr, "kldeval sweep: --budget expects bits per weight in (0, 64], got '%s'\n", v);
                return false;
            }
            s->has_budget = true;
        }
    }
    if (!s->k.teacher.model_path || !s->base) {
        fprintf(stderr, "kldeval sweep: --ref MODEL and --base POLICY are required (see --help)\n");
        return false;
    }
    if (strchr(s->k.teacher.model_path, '@')) {
        fprintf(stderr, "kldeval sweep: --ref %s: the reference is the stored model; give the low "
                        "precision with --base\n", s->k.teacher.model_path);
        return false;
    }
    return kld_sweep_cli_check("sweep", &s->k, s->json_path);
}

/* The groups with their bytes at the base (lo) and at the upgrade (hi). */
typedef struct group_plan {
    kld_source *src;
    kld_hparams hp;
    kld_quant_view base_view;
    kld_quant_group *lo, *hi;
    size_t n;
    bool have_view;
} group_plan;

static kld_status plan_groups(const sweep_cli *s, group_plan *g, kld_error *err) {
    const char *model = s->k.teacher.model_path;
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

static void plan_free(group_plan *g) {
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

typedef struct sweep_arms {
    kld_sweep_arm *a;
    char **owned;
    size_t n, n_owned;
    long base, all_high; /* indices of the all-base and all-high arms (-1: none) */
} sweep_arms;

static kld_status build_arms(const sweep_cli *s, const group_plan *g, sweep_arms *A, kld_error *err) {
    size_t cap = g->n + 2;
    A->a = calloc(cap, sizeof *A->a);
    A->owned = calloc(2 * cap, sizeof *A->owned);
    if (!A->a || !A->owned) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    const char *model = s->k.teacher.model_path;
    char pol[4096];
    A->base = A->all_high = -1;
#define OWN(p) (A->owned[A->n_owned++] = (p))
    A->base = (long)A->n;
    A->a[A->n++] = (kld_sweep_arm){"all at base", OWN(arm_model(model, s->base)), NULL};
    if (!s->invert && s->upgrade) {
        snprintf(pol, sizeof pol, "%s,*=%s", s->base, s->upgrade);
        A->all_high = (long)A->n;
        A->a[A->n++] = (kld_sweep_arm){"all raised", OWN(arm_model(model, pol)), NULL};
    }
    for (size_t i = 0; i < g->n; i++) {
        kld_status st = kld_quant_group_policy(s->base, &g->lo[i], s->invert, s->upgrade, pol, sizeof pol, err);
        if (st) return st;
        A->a[A->n++] = (kld_sweep_arm){g->lo[i].selector, OWN(arm_model(model, pol)), NULL};
    }
#undef OWN
    for (size_t i = 0; i < A->n_owned; i++)
        if (!A->owned[i]) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    return KLD_OK;
}

static void arms_free(sweep_arms *A) {
    for (size_t i = 0; A->owned && i < A->n_owned; i++) free(A->owned[i]);
    free(A->owned);
    free(A->a);
}

/* One group's row, both deltas in one sense, what the higher precision of
 * the group buys: ΔKLD saved > 0 and top-1 gained > 0 mean the group
 * deserves it. */
typedef struct group_result {
    size_t group, arm;
    kld_paired d_kld, d_top1;
} group_result;

static kld_status group_delta(const sweep_cli *s, const sweep_arms *A, const kld_sweep_result *r,
                              size_t arm, group_result *out, kld_error *err) {
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
    const group_result *a = x, *b = y;
    if (a->d_kld.mean != b->d_kld.mean) return a->d_kld.mean > b->d_kld.mean ? -1 : 1;
    return a->group < b->group ? -1 : a->group > b->group;
}

static double arm_bpw(const kld_sweep_outcome *o) {
    const json_t *b = json_object_get(json_object_get(o->res.config, "arm"), "bits_per_weight");
    return json_is_number(b) ? json_number_value(b) : NAN;
}

static void print_arm_rows(const kld_sweep_result *r, size_t from, size_t to) {
    kld_sweep_row rows[8];
    size_t n = 0;
    for (size_t i = from; i < to && n < 8; i++)
        rows[n++] = (kld_sweep_row){r->arms[i].label, &r->arms[i].sum, false, 0, 0, 0, 0, NAN,
                                    arm_bpw(&r->arms[i])};
    kld_sweep_table t = {NULL, NULL, NULL, NULL, true};
    kld_report_sweep_table(stdout, &t, rows, n);
}

static json_t *paired_json(const kld_paired *p) {
    return json_pack("{s:f,s:f,s:I,s:I,s:I}", "mean", p->mean, "stderr", p->se, "n", (json_int_t)p->n,
                     "a_lower", (json_int_t)p->a_lower, "b_lower", (json_int_t)p->b_lower);
}

static json_t *sweep_json(const sweep_cli *s, const group_plan *g, const kld_sweep_result *r,
                          const group_result *gr, size_t n_gr, json_t *proposal) {
    json_t *arms = json_array(), *ranked = json_array();
    for (size_t i = 0; i < r->n_done; i++)
        json_array_append_new(arms, kld_sweep_cli_arm_json(&r->arms[i], arm_bpw(&r->arms[i])));
    for (size_t i = 0; i < n_gr; i++) {
        const kld_quant_group *q = &g->lo[gr[i].group];
        json_array_append_new(ranked, json_pack("{s:i,s:s,s:i,s:I,s:I,s:o,s:o}", "rank", (int)i + 1,
                                                "group", q->selector, "n_tensors", q->n_tensors,
                                                "low_bytes", (json_int_t)q->base_bytes, "high_bytes",
                                                (json_int_t)g->hi[gr[i].group].base_bytes, "d_kld",
                                                paired_json(&gr[i].d_kld), "top1_gained", paired_json(&gr[i].d_top1)));
    }
    json_t *o = kld_sweep_cli_json_head("kldeval.sweep/1", &s->k, r);
    json_object_set_new(o, "base", json_string(s->base));
    json_object_set_new(o, "upgrade", json_string(s->upgrade ? s->upgrade : "keep"));
    json_object_set_new(o, "groups", json_string(s->kind == KLD_GROUPS_LAYERS ? "layers"
                                                 : s->kind == KLD_GROUPS_CLASSES ? "classes"
                                                                                 : "layers×classes"));
    json_object_set_new(o, "invert", json_boolean(s->invert));
    json_object_set_new(o, "arms", arms);
    json_object_set_new(o, "ranked", ranked);
    json_object_set_new(o, "proposal", proposal ? proposal : json_null());
    return o;
}

/* --budget: the proposed policy, checked against the model's real plan and
 * scored as one more arm. */
static kld_status propose(const sweep_cli *s, const group_plan *g, const sweep_arms *A,
                          kld_sweep_result *r, const group_result *gr, size_t n_gr,
                          const kld_sweep_config *sc, json_t **out, kld_error *err) {
    *out = NULL;
    kld_budget_item *items = calloc(g->n, sizeof *items);
    if (!items) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    uint64_t grouped = 0;
    for (size_t i = 0; i < n_gr; i++) {
        size_t k = gr[i].group;
        items[k] = (kld_budget_item){g->lo[k].selector, g->lo[k].base_bytes, g->hi[k].base_bytes,
                                     gr[i].d_kld.mean};
    }
    for (size_t k = 0; k < g->n; k++) grouped += g->lo[k].base_bytes;
    const kld_quant_plan *bp = &g->base_view.plan;
    char policy[8192];
    double bpw = 0;
    size_t n_raised = 0;
    kld_status st = kld_quant_budget(s->base, s->upgrade, items, g->n, bp->dst_bytes - grouped,
                                     bp->n_params, s->budget, policy, sizeof policy, &bpw, &n_raised, err);
    free(items);
    if (st) return st;
    kld_quant_view v;
    if ((st = kld_quant_view_open(policy, g->src, &g->hp, &v, err))) return st;
    double real_bpw = kld_quant_plan_bpw(&v.plan);
    kld_quant_view_close(&v);
    char *model = arm_model(s->k.teacher.model_path, policy);
    if (!model) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    kld_sweep_arm arm = {"proposal", model, NULL};
    st = kld_sweep_add(sc, r, &arm, 1, err);
    free(model);
    if (st || r->partial) return st;
    const kld_sweep_outcome *p = &r->arms[r->n_done - 1], *b = &r->arms[A->base];
    kld_paired d;
    if ((st = kld_sweep_paired(p->res.stats, b->res.stats, KLD_PAIRED_KLD, &d, err))) return st;
    printf("\nproposal for --budget %.4g bpw (%zu group%s raised to %s): %.4f bpw\n  %s\n", s->budget,
           n_raised, n_raised == 1 ? "" : "s", s->upgrade ? s->upgrade : "the stored types", real_bpw, policy);
    printf("  KLD %.6f ± %.6f against the all-base arm's %.6f (paired difference %+.6f ± %.6f)\n",
           p->sum.kld.mean, p->sum.kld.se, b->sum.kld.mean, d.mean, d.se);
    *out = json_pack("{s:f,s:s,s:f,s:I,s:f,s:f,s:o}", "budget_bpw", s->budget, "policy", policy, "bpw",
                     real_bpw, "groups_raised", (json_int_t)n_raised, "kld_mean", p->sum.kld.mean,
                     "kld_stderr", p->sum.kld.se, "d_kld_vs_base", paired_json(&d));
    return KLD_OK;
}

static int report(const sweep_cli *s, const group_plan *g, const sweep_arms *A, kld_sweep_result *r,
                  const kld_sweep_config *sc) {
    kld_error err = {0};
    size_t n_gr = 0;
    group_result *gr = calloc(g->n, sizeof *gr);
    if (!gr) return 1;
    kld_status st = KLD_OK;
    size_t first_group = (size_t)(A->all_high >= 0 ? A->all_high : A->base) + 1;
    for (size_t arm = first_group; !st && arm < r->n_done; arm++) {
        memset(&gr[n_gr], 0, sizeof gr[n_gr]);
        gr[n_gr].group = arm - first_group;
        gr[n_gr].arm = arm;
        st = group_delta(s, A, r, arm, &gr[n_gr], &err);
        n_gr++;
    }
    qsort(gr, n_gr, sizeof *gr, by_delta);
    kld_sweep_cli_print_head(&s->k, r);
    printf("base %s, raised to %s, groups %s%s\n\n", s->base, s->upgrade ? s->upgrade : "the stored types",
           s->kind == KLD_GROUPS_LAYERS ? "layers" : s->kind == KLD_GROUPS_CLASSES ? "classes" : "layers×classes",
           s->invert ? ", inverted (each arm raises only its group)" : " (each arm lowers only its group)");
    print_arm_rows(r, 0, first_group < r->n_done ? first_group : r->n_done);
    kld_sweep_row *rows = calloc(n_gr ? n_gr : 1, sizeof *rows);
    for (size_t i = 0; rows && i < n_gr; i++) {
        const kld_sweep_outcome *o = &r->arms[gr[i].arm];
        rows[i] = (kld_sweep_row){o->label, &o->sum, true, gr[i].d_kld.mean, gr[i].d_kld.se,
                                  gr[i].d_top1.mean, gr[i].d_top1.se,
                                  (double)(g->hi[gr[i].group].base_bytes - g->lo[gr[i].group].base_bytes), NAN};
    }
    kld_sweep_table t = {"\ngroups ranked by the KLD the higher precision saves (paired per position):",
                         "ΔKLD saved ± stderr", "top-1 gained", "+bytes", false};
    if (rows && n_gr) kld_report_sweep_table(stdout, &t, rows, n_gr);
    free(rows);
    json_t *proposal = NULL;
    if (!st && s->has_budget && !r->partial && n_gr == g->n)
        st = propose(s, g, A, r, gr, n_gr, sc, &proposal, &err);
    int rc = st ? 1 : 0;
    if (st) fprintf(stderr, "kldeval sweep: %s\n", err.msg);
    json_t *doc = sweep_json(s, g, r, gr, n_gr, proposal);
    if (s->json_path && json_dump_file(doc, s->json_path, JSON_INDENT(1) | JSON_REAL_PRECISION(17))) {
        fprintf(stderr, "kldeval sweep: --json %s: cannot write\n", s->json_path);
        rc = 1;
    }
    json_decref(doc);
    if (!kld_sweep_cli_record("sweep", &s->k, r) && !rc) rc = 1;
    free(gr);
    return rc ? rc : r->partial ? 130 : 0;
}

int kld_cmd_sweep(int argc, char **argv) {
    sweep_cli s = {0};
    kld_sweep_cli_defaults(&s.k);
    s.kind = KLD_GROUPS_LAYERS;
    int rc;
    if (!parse(argc, argv, &s, &rc)) return rc;
    kld_kernels_init();
    kld_error err = {0};
    group_plan g = {0};
    sweep_arms A = {0};
    kld_status st = plan_groups(&s, &g, &err);
    if (!st) st = build_arms(&s, &g, &A, &err);
    if (st) {
        fprintf(stderr, "kldeval sweep: %s\n", err.msg);
        arms_free(&A);
        plan_free(&g);
        return 1;
    }
    kld_sweep_config sc;
    kld_sweep_result r;
    kld_sweep_cli_config(&s.k, &sc);
    sc.arms = A.a;
    sc.n_arms = A.n;
    st = kld_sweep_cli_run(&sc, &r, &err);
    rc = 1;
    if (st) fprintf(stderr, "kldeval sweep: %s\n", err.msg);
    else rc = report(&s, &g, &A, &r, &sc);
    kld_sweep_cli_end(&sc, &r);
    arms_free(&A);
    plan_free(&g);
    return rc;
}
