/* cmd_sweep.c — `kldeval sweep`: which tensors deserve more bits. The
 * flags, the table and the JSON; the groups, their arms, the ranking and
 * the budget's proposal are the library's (eval/sweep_groups.h). */
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/sweep_cli.h"
#include "eval/gate.h"
#include "eval/sweep_groups.h"
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
"  --rank-by kl|diff      kl (default): one KLD arm per group, as above. diff: ONE diff pass\n"
"                         (kldeval diff --matrices) of the all-base arm against the high precision\n"
"                         (MODEL, or MODEL@BASE,*=UP with --upgrade), no arm per group; each group\n"
"                         ranked by the sum over its weight matrices of rel_err_own_input^2 (the\n"
"                         noise-to-signal ratio the base adds at each matrix; docs/policies.md).\n"
"                         Windows as the teacher's; not with --budget, --gate, --teacher,\n"
"                         --teacher-top-k or --bootstrap. A group with no measured matrix is\n"
"                         listed last, unmeasured\n"
"  --json FILE            the sweep as JSON (schema kldeval.sweep/1, see docs/policies.md)\n"
SWEEP_RECORD_HELP
"  --gate EXPR            conditions for CI on the arm the sweep recommends: the --budget proposal,\n"
"                         or without --budget the all-base arm (the --base policy as given): any\n"
"                         statistic of kl --gate (kld.mean<=2e-3,kld.p99.9<=0.05,top1>=0.98,...),\n"
"                         and with --budget paired.kld.mean, paired.kld.p99, paired.kld.p99.9,\n"
"                         paired.top1 (proposal − all-base arm, paired bootstrap; \"@95\" judges the\n"
"                         interval: paired.kld.mean<=0@95 fails only when the proposal is\n"
"                         distinguishably worse). Checked before any model loads; each printed\n"
"                         with its value and PASS/FAIL, kept in --json and the judged arm's\n"
"                         database row; exit status 3 when any fails\n"
"  -h, --help             this text\n\n"
"Every arm is recorded in the run database with mode \"sweep\"; kldeval report ranks them.\n"
"The baseline of the intervals table is the all-base arm: each arm's ΔKLD mean against it on\n"
"the same positions, with its paired bootstrap interval, p-value and a verdict word.\n"
"Ctrl-C stops after the current chunk; the arms completed so far are reported.\n");
}

typedef struct sweep_cli {
    kld_sweep_cli_common k;
    kld_sweep_groups_config g; /* g.model: the teacher's model, set after parsing */
    const char *json_path;
    bool has_budget;
    double budget;
    kld_gates gates, paired_gates; /* --gate: on the judged arm, on it against the all-base arm */
    bool rank_by_diff;             /* --rank-by diff */
} sweep_cli;

static bool parse(int argc, char **argv, sweep_cli *s, int *rc) {
    static const char *const valued[] = {"--base", "--groups", "--upgrade", "--budget", "--json", "--gate",
                                         "--rank-by", NULL};
    *rc = 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            *rc = 0;
            return false;
        }
        if (!strcmp(a, "--invert")) { s->g.invert = true; continue; }
        int c = kld_sweep_cli_flag("sweep", argc, argv, &i, &s->k);
        if (c == 1) continue;
        if (c == 0) return false;
        if (!kld_arg_in(a, valued)) {
            fprintf(stderr, "kldeval sweep: unknown %s '%s' (see --help)\n", a[0] == '-' ? "flag" : "argument", a);
            return false;
        }
        if (!(v = kld_arg_value(argc, argv, &i))) return false;
        if (!strcmp(a, "--base")) s->g.base = v;
        else if (!strcmp(a, "--upgrade")) s->g.upgrade = strcmp(v, "keep") ? v : NULL;
        else if (!strcmp(a, "--json")) s->json_path = v;
        else if (!strcmp(a, "--rank-by")) {
            if (strcmp(v, "kl") && strcmp(v, "diff")) {
                fprintf(stderr, "kldeval sweep: --rank-by expects kl or diff, got '%s'\n", v);
                return false;
            }
            s->rank_by_diff = !strcmp(v, "diff");
        } else if (!strcmp(a, "--gate")) {
            kld_error e = {0};
            kld_gates_free(&s->gates);
            kld_gates_free(&s->paired_gates);
            if (kld_gates_parse_with_paired(v, &s->gates, &s->paired_gates, &e) != KLD_OK) {
                fprintf(stderr, "kldeval sweep: %s\n", e.msg);
                return false;
            }
        } else if (!strcmp(a, "--groups")) {
            if (!strcmp(v, "layers")) s->g.kind = KLD_GROUPS_LAYERS;
            else if (!strcmp(v, "classes")) s->g.kind = KLD_GROUPS_CLASSES;
            else if (!strcmp(v, "layers×classes") || !strcmp(v, "layersxclasses") ||
                     !strcmp(v, "layers*classes"))
                s->g.kind = KLD_GROUPS_LAYERS_CLASSES;
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
    if (!s->k.teacher.model_path || !s->g.base) {
        fprintf(stderr, "kldeval sweep: --ref MODEL and --base POLICY are required (see --help)\n");
        return false;
    }
    if (s->paired_gates.n && !s->has_budget) {
        fprintf(stderr, "kldeval sweep: --gate %s: paired gates compare the --budget proposal with the "
                        "all-base arm; give --budget BPW\n", s->paired_gates.g[0].text);
        return false;
    }
    if (s->paired_gates.n && s->k.o.bootstrap == 0) {
        fprintf(stderr, "kldeval sweep: --gate %s needs the paired bootstrap: not with --bootstrap 0\n",
                s->paired_gates.g[0].text);
        return false;
    }
    if (s->rank_by_diff) {
        /* one diff pass: no teacher, no arm per group to propose from, gate or resample */
        const char *bad = s->has_budget ? "--budget" : s->gates.n || s->paired_gates.n ? "--gate"
                          : s->k.teacher.out ? "--teacher" : s->k.teacher_top_k_given ? "--teacher-top-k"
                          : s->k.o.bootstrap >= 0 ? "--bootstrap" : NULL;
        if (bad) {
            fprintf(stderr, "kldeval sweep: %s does not apply with --rank-by diff (one diff pass, no "
                            "KLD arm per group)\n", bad);
            return false;
        }
    }
    if (strchr(s->k.teacher.model_path, '@')) {
        fprintf(stderr, "kldeval sweep: --ref %s: the reference is the stored model; give the low "
                        "precision with --base\n", s->k.teacher.model_path);
        return false;
    }
    return kld_sweep_cli_check("sweep", &s->k, s->json_path);
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

static json_t *sweep_json(const sweep_cli *s, const kld_sweep_groups *g, const kld_sweep_result *r,
                          const kld_sweep_group_result *gr, size_t n_gr, json_t *proposal,
                          const kld_sweep_ci *ci) {
    json_t *arms = json_array(), *ranked = json_array();
    for (size_t i = 0; i < r->n_done; i++) {
        json_t *a = kld_sweep_cli_arm_json(&r->arms[i], arm_bpw(&r->arms[i]));
        if (ci && g->base >= 0 && (size_t)g->base < r->n_done)
            kld_sweep_cli_arm_json_ci(a, &ci[i], r->arms[g->base].label);
        json_array_append_new(arms, a);
    }
    for (size_t i = 0; i < n_gr; i++) {
        const kld_quant_group *q = &g->lo[gr[i].group];
        json_array_append_new(ranked, json_pack("{s:i,s:s,s:i,s:I,s:I,s:o,s:o}", "rank", (int)i + 1,
                                                "group", q->selector, "n_tensors", q->n_tensors,
                                                "low_bytes", (json_int_t)q->base_bytes, "high_bytes",
                                                (json_int_t)g->hi[gr[i].group].base_bytes, "d_kld",
                                                paired_json(&gr[i].d_kld), "top1_gained", paired_json(&gr[i].d_top1)));
    }
    json_t *o = kld_sweep_cli_json_head("kldeval.sweep/1", &s->k, r);
    json_object_set_new(o, "rank_by", json_string("kl"));
    json_object_set_new(o, "base", json_string(s->g.base));
    json_object_set_new(o, "upgrade", json_string(s->g.upgrade ? s->g.upgrade : "keep"));
    json_object_set_new(o, "groups", json_string(s->g.kind == KLD_GROUPS_LAYERS ? "layers"
                                                 : s->g.kind == KLD_GROUPS_CLASSES ? "classes"
                                                                                 : "layers×classes"));
    json_object_set_new(o, "invert", json_boolean(s->g.invert));
    json_object_set_new(o, "arms", arms);
    json_object_set_new(o, "ranked", ranked);
    json_object_set_new(o, "proposal", proposal ? proposal : json_null());
    return o;
}

/* --budget: the proposal, printed; its JSON. */
static kld_status propose(const sweep_cli *s, const kld_sweep_groups *g, kld_sweep_result *r,
                          const kld_sweep_group_result *gr, size_t n_gr, const kld_sweep_config *sc,
                          json_t **out, kld_error *err) {
    *out = NULL;
    kld_sweep_proposal p;
    kld_status st = kld_sweep_groups_propose(&s->g, g, gr, n_gr, s->budget, sc, r, &p, err);
    if (st || !p.arm) return st;
    printf("\nproposal for --budget %.4g bpw (%zu group%s raised to %s): %.4f bpw\n  %s\n", s->budget,
           p.n_raised, p.n_raised == 1 ? "" : "s", s->g.upgrade ? s->g.upgrade : "the stored types", p.bpw,
           p.policy);
    printf("  KLD %.6f ± %.6f against the all-base arm's %.6f (paired difference %+.6f ± %.6f)\n",
           p.arm->sum.kld.mean, p.arm->sum.kld.se, p.base->sum.kld.mean, p.d_kld_vs_base.mean,
           p.d_kld_vs_base.se);
    *out = json_pack("{s:f,s:s,s:f,s:I,s:f,s:f,s:o}", "budget_bpw", s->budget, "policy", p.policy, "bpw",
                     p.bpw, "groups_raised", (json_int_t)p.n_raised, "kld_mean", p.arm->sum.kld.mean,
                     "kld_stderr", p.arm->sum.kld.se, "d_kld_vs_base", paired_json(&p.d_kld_vs_base));
    return KLD_OK;
}

static int report(const sweep_cli *s, const kld_sweep_groups *g, kld_sweep_result *r,
                  const kld_sweep_config *sc) {
    kld_error err = {0};
    size_t n_gr = 0;
    kld_sweep_group_result *gr = NULL;
    kld_status st = kld_sweep_groups_rank(&s->g, g, r, &gr, &n_gr, &err);
    size_t first_group = kld_sweep_groups_first(g);
    kld_sweep_cli_print_head(&s->k, r);
    printf("base %s, raised to %s, groups %s%s\n\n", s->g.base, s->g.upgrade ? s->g.upgrade : "the stored types",
           s->g.kind == KLD_GROUPS_LAYERS ? "layers" : s->g.kind == KLD_GROUPS_CLASSES ? "classes" : "layers×classes",
           s->g.invert ? ", inverted (each arm raises only its group)" : " (each arm lowers only its group)");
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
        st = propose(s, g, r, gr, n_gr, sc, &proposal, &err);
    /* the intervals and the paired comparisons with the all-base arm, the proposal's included */
    kld_sweep_ci *ci = NULL;
    if (!st) st = kld_sweep_cli_intervals(&s->k, r, g->base, &ci, &err);
    if (!st) kld_sweep_cli_print_intervals(r, ci, g->base);
    /* the gates judge the proposal (the last arm), else the all-base arm */
    json_t *gates = NULL, *doc = NULL;
    bool pass = true, judged = false;
    const bool have_proposal = proposal != NULL;
    const long gated = have_proposal ? (long)r->n_done - 1 : g->base;
    if (!st && (s->gates.n || s->paired_gates.n)) {
        if (r->partial || (s->has_budget && !have_proposal) || gated < 0 || (size_t)gated >= r->n_done) {
            printf("%-30s: not judged (the sweep was stopped before the %s was scored)\n", "gate",
                   s->has_budget ? "proposal" : "all-base arm");
        } else {
            printf("\ngates on %s%s:\n", r->arms[gated].label, have_proposal ? " (the --budget proposal)" : "");
            gates = kld_sweep_cli_judge(&s->k, &r->arms[gated], &ci[gated], &s->gates, &s->paired_gates, &pass);
            if (!gates) st = kld_fail(&err, KLD_ERR_NOMEM, "out of memory");
            else kld_gates_print(stdout, gates), judged = true;
        }
    }
    int rc = st ? 1 : 0;
    if (st) fprintf(stderr, "kldeval sweep: %s\n", err.msg);
    doc = sweep_json(s, g, r, gr, n_gr, proposal, ci);
    if (gates) json_object_set(doc, "gates", gates);
    if (s->json_path && json_dump_file(doc, s->json_path, JSON_INDENT(1) | JSON_REAL_PRECISION(17))) {
        fprintf(stderr, "kldeval sweep: --json %s: cannot write\n", s->json_path);
        rc = 1;
    }
    json_decref(doc);
    json_t **per_arm = gates ? calloc(r->n_done, sizeof *per_arm) : NULL;
    if (per_arm && gated >= 0 && (size_t)gated < r->n_done) per_arm[gated] = gates;
    if (!kld_sweep_cli_record("sweep", &s->k, r, ci, per_arm) && !rc) rc = 1;
    free(per_arm);
    json_decref(gates);
    free(ci);
    if (!rc && judged && !pass) rc = KLD_EXIT_GATE_FAILED;
    free(gr);
    return rc ? rc : r->partial ? 130 : 0;
}

/* ---- --rank-by diff ---- */

static volatile sig_atomic_t diff_stop;

static void on_diff_stop(int sig) {
    (void)sig;
    diff_stop = 1;
}

static void diff_progress(const kld_kl_progress *p, void *user) {
    (void)user;
    kld_progress pr = {p->docs_done, p->docs_total, p->positions_done, p->positions_total,
                       p->elapsed_s, p->kld_mean};
    kld_progress_print(stderr, &pr);
}

static const char *groups_name(kld_group_kind k) {
    return k == KLD_GROUPS_LAYERS ? "layers" : k == KLD_GROUPS_CLASSES ? "classes" : "layers×classes";
}

/* The ranking's rows as JSON: rank, group, sizes, the score (null: unmeasured). */
static json_t *diff_ranked_json(const kld_sweep_groups *g, const kld_sweep_diff_row *rows) {
    json_t *ranked = json_array();
    for (size_t i = 0; i < g->n; i++) {
        const kld_quant_group *q = &g->lo[rows[i].group];
        json_array_append_new(ranked, json_pack("{s:i,s:s,s:i,s:I,s:I,s:o,s:I}", "rank", (int)i + 1,
                                                "group", q->selector, "n_tensors", q->n_tensors,
                                                "low_bytes", (json_int_t)q->base_bytes, "high_bytes",
                                                (json_int_t)g->hi[rows[i].group].base_bytes, "diff_score",
                                                isnan(rows[i].score) ? json_null() : json_real(rows[i].score),
                                                "n_matrices", (json_int_t)rows[i].n_matrices));
    }
    return ranked;
}

/* One diff pass (eval/diff.h, --matrices) of the all-base arm against the high precision,
 * the groups ranked by its matrix errors; the same table, JSON and run-database row (mode
 * sweep, the diff table kept under "diff") as the KLD sweep's, marked rank_by diff. */
static int run_rank_by_diff(const sweep_cli *s, const kld_sweep_groups *g) {
    kld_error err = {0};
    char *ref = NULL, *arm = NULL;
    if (kld_sweep_groups_diff_models(&s->g, &ref, &arm, &err)) {
        fprintf(stderr, "kldeval sweep: %s\n", err.msg);
        return 1;
    }
    const kld_dump_config *t = &s->k.teacher;
    kld_kl_config c;
    kld_kl_config_defaults(&c);
    c.ref = (kld_arm_spec){.kind = KLD_ARM_MODEL, .path = ref, .levers = t->levers};
    c.arm = (kld_arm_spec){.kind = KLD_ARM_MODEL, .path = arm, .levers = t->levers};
    c.corpus_path = t->corpus_path;
    c.corpus_format = t->corpus_format;
    c.ids_path = t->ids_path;
    c.max_docs = t->max_docs;
    c.max_tokens = t->max_tokens;
    c.ctx = t->ctx;
    c.chunk = t->chunk;
    c.max_chunks = t->max_chunks;
    /* the windows a saved teacher of the same flags would hold */
    c.chunking = t->chunking == KLD_CHUNKING_DEFAULT ? KLD_CHUNKING_STREAM : t->chunking;
    c.n_threads = t->n_threads;
    c.topk = s->k.topk;
    c.allow_vocab_mismatch = t->allow_vocab_mismatch;
    c.stop = &diff_stop;
    if (!s->k.o.quiet) {
        fprintf(stderr, "sweep: one diff pass, %s against %s\n", arm, ref);
        if (kld_progress_enabled(stderr)) c.progress = diff_progress;
    }
    struct sigaction sa = {0}, old;
    sa.sa_handler = on_diff_stop;
    sigaction(SIGINT, &sa, &old);
    kld_diff_result d;
    kld_status st = kld_diff_run(&c, true, &d, &err);
    sigaction(SIGINT, &old, NULL);
    if (c.progress) kld_progress_end(stderr);
    if (st) {
        fprintf(stderr, "kldeval sweep: %s\n", err.msg);
        free(ref), free(arm);
        return 1;
    }
    kld_sweep_outcome base = {"all at base", arm, NULL, d.kl, {0}};
    kld_sweep_diff_row *rows = NULL;
    int rc = 0;
    if (kld_stats_finalize(d.kl.stats, &base.sum, &err) || kld_sweep_groups_rank_diff(&s->g, g, &d, &rows, &err)) {
        fprintf(stderr, "kldeval sweep: %s\n", err.msg);
        rc = 1;
    }
    if (!rc) {
        printf("reference %s: one diff pass against the all-base arm %s (--rank-by diff: no arm per "
               "group)\n", ref, arm);
        printf("%llu positions, %.1f s%s\n", (unsigned long long)base.sum.n_positions, d.kl.elapsed_s,
               d.kl.partial ? " — INTERRUPTED: the errors of the positions compared so far" : "");
        printf("base %s, raised to %s, groups %s\n\n", s->g.base, s->g.upgrade ? s->g.upgrade : "the stored types",
               groups_name(s->g.kind));
        const json_t *b = json_object_get(json_object_get(d.kl.config, "arm"), "bits_per_weight");
        kld_sweep_row row = {base.label, &base.sum, false, 0, 0, 0, 0, NAN,
                             json_is_number(b) ? json_number_value(b) : NAN};
        kld_sweep_table tab = {NULL, NULL, NULL, NULL, true};
        kld_report_sweep_table(stdout, &tab, &row, 1);
        printf("\ngroups ranked by the matrix error of the all-base arm (sum over the group's matrices of\n"
               "rel_err_own_input^2, the base's noise-to-signal ratio where each matrix stands):\n");
        printf("%4s %-24s %14s %9s %12s\n", "rank", "group", "score", "matrices", "+bytes");
        for (size_t i = 0; i < g->n; i++) {
            const size_t k = rows[i].group;
            char score[32];
            if (isnan(rows[i].score)) snprintf(score, sizeof score, "%s", "unmeasured");
            else snprintf(score, sizeof score, "%.6e", rows[i].score);
            printf("%4zu %-24s %14s %9zu %12lld\n", i + 1, g->lo[k].selector, score, rows[i].n_matrices,
                   (long long)(g->hi[k].base_bytes - g->lo[k].base_bytes));
        }
    }
    json_t *dj = rc ? NULL : kld_diff_json(&d, &base.sum);
    json_t *ranked = rc ? NULL : diff_ranked_json(g, rows);
    if (!rc && (!dj || !ranked)) {
        fprintf(stderr, "kldeval sweep: out of memory\n");
        rc = 1;
    }
    if (!rc && s->json_path) {
        json_t *arms = json_array();
        json_array_append_new(arms, kld_sweep_cli_arm_json(&base, json_number_value(json_object_get(
                                                                      json_object_get(d.kl.config, "arm"),
                                                                      "bits_per_weight"))));
        json_t *o = json_pack("{s:s,s:s,s:s,s:s?,s:s,s:s,s:s,s:s,s:I,s:f,s:b}", "schema", "kldeval.sweep/1",
                              "version", kld_version(), "reference", t->model_path, "reference_levers",
                              t->levers, "rank_by", "diff", "diff_score", KLD_SWEEP_DIFF_SCORE, "diff_ref",
                              ref, "diff_arm", arm, "n_positions", (json_int_t)base.sum.n_positions,
                              "elapsed_s", d.kl.elapsed_s, "partial", d.kl.partial);
        json_object_set_new(o, "base", json_string(s->g.base));
        json_object_set_new(o, "upgrade", json_string(s->g.upgrade ? s->g.upgrade : "keep"));
        json_object_set_new(o, "groups", json_string(groups_name(s->g.kind)));
        json_object_set_new(o, "invert", json_boolean(s->g.invert));
        json_object_set_new(o, "arms", arms);
        json_object_set(o, "ranked", ranked);
        json_object_set_new(o, "proposal", json_null());
        json_object_set(o, "diff", dj);
        if (json_dump_file(o, s->json_path, JSON_INDENT(1) | JSON_REAL_PRECISION(17))) {
            fprintf(stderr, "kldeval sweep: --json %s: cannot write\n", s->json_path);
            rc = 1;
        }
        json_decref(o);
    }
    if (!rc) {
        /* the run database: the pass's kl run as the all-base arm's row, mode sweep */
        const char *prefix = s->k.o.label ? s->k.o.label : "sweep";
        char label[512];
        snprintf(label, sizeof label, "%s: %s", prefix, base.label);
        kld_report_run run = {ref, arm, d.kl.corpus_label, label, d.kl.config, d.kl.elapsed_s,
                              d.kl.ref_seconds, d.kl.arm_seconds, d.kl.ref_tokens, d.kl.arm_tokens,
                              d.kl.partial};
        json_t *report = kld_report_json(&base.sum, &run);
        json_t *cfg = report ? json_object_get(report, "config") : NULL;
        if (cfg)
            json_object_set_new(cfg, "sweep", json_pack("{s:s,s:s,s:s,s:s,s:s}", "command", "sweep", "arm",
                                                        base.label, "reference", t->model_path, "rank_by",
                                                        "diff", "diff_score", KLD_SWEEP_DIFF_SCORE));
        if (report) {
            json_object_set(report, "diff", dj);
            json_object_set(report, "ranked", ranked);
        }
        kld_kl_outputs o = s->k.o;
        o.label = label;
        double rate = d.kl.elapsed_s > 0 ? (double)d.kl.arm_tokens / d.kl.elapsed_s : NAN;
        if (!report || !kld_record_run("sweep", &o, "sweep", report, &base.sum, d.kl.stats, d.kl.partial,
                                       d.kl.elapsed_s, rate))
            rc = 1;
        json_decref(report);
    }
    json_decref(dj);
    json_decref(ranked);
    free(rows);
    const bool partial = d.kl.partial;
    kld_diff_result_free(&d);
    free(ref), free(arm);
    return rc ? rc : partial ? 130 : 0;
}

int kld_cmd_sweep(int argc, char **argv) {
    sweep_cli s = {0};
    kld_sweep_cli_defaults(&s.k);
    s.g.kind = KLD_GROUPS_LAYERS;
    int rc;
    if (!parse(argc, argv, &s, &rc)) {
        kld_gates_free(&s.gates);
        kld_gates_free(&s.paired_gates);
        return rc;
    }
    s.g.model = s.k.teacher.model_path;
    kld_kernels_init();
    kld_error err = {0};
    kld_sweep_groups g;
    if (kld_sweep_groups_plan(&s.g, &g, &err) != KLD_OK) {
        fprintf(stderr, "kldeval sweep: %s\n", err.msg);
        kld_gates_free(&s.gates);
        kld_gates_free(&s.paired_gates);
        return 1;
    }
    if (s.rank_by_diff) {
        rc = run_rank_by_diff(&s, &g);
        kld_sweep_groups_free(&g);
        return rc;
    }
    kld_sweep_config sc;
    kld_sweep_result r;
    kld_sweep_cli_config(&s.k, &sc);
    sc.arms = g.arms;
    sc.n_arms = g.n_arms;
    rc = 1;
    if (kld_sweep_cli_run(&sc, &r, &err) != KLD_OK) fprintf(stderr, "kldeval sweep: %s\n", err.msg);
    else rc = report(&s, &g, &r, &sc);
    kld_sweep_cli_end(&sc, &r);
    kld_sweep_groups_free(&g);
    kld_gates_free(&s.gates);
    kld_gates_free(&s.paired_gates);
    return rc;
}
