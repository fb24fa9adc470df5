/* sweep_cli.c — the flags, running and recording `kldeval sweep` and
 * `kldeval kl --sweep` share (sweep_cli.h). */
#include "cli/sweep_cli.h"

#include "cli/args.h"
#include "engine/engine.h"
#include "report/report.h"
#include "report/report_sweep.h"
#include "store/dump.h"

#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

static volatile sig_atomic_t stop_requested;

static void on_stop(int sig) {
    (void)sig;
    stop_requested = 1;
}

void kld_sweep_cli_defaults(kld_sweep_cli_common *k) {
    memset(k, 0, sizeof *k);
    kld_dump_config_defaults(&k->teacher);
    k->teacher.top_k = 0; /* the whole vocabulary: exact KLDs */
    k->topk = KLD_TOPK_DEFAULT;
    k->o.bootstrap = -1;
}

static bool parse_chunking(const char *cmd, const char *v, kld_chunking *out) {
    if (!strcmp(v, "stream")) *out = KLD_CHUNKING_STREAM;
    else if (!strcmp(v, "llamacpp")) *out = KLD_CHUNKING_LLAMACPP;
    else {
        fprintf(stderr, "kldeval %s: --chunking expects stream or llamacpp, got '%s' (a saved "
                        "teacher's windows have fixed lengths)\n", cmd, v);
        return false;
    }
    return true;
}

int kld_sweep_cli_flag(const char *cmd, int argc, char **argv, int *i, kld_sweep_cli_common *k) {
    static const char *const valued[] = {"--ref", "-m", "--model", "--teacher", "--teacher-top-k",
                                         "--corpus", "--corpus-format", "--ids-file", "--max-docs",
                                         "--max-tokens", "--chunking", "--ctx", "--chunks", "--chunk",
                                         "--threads", "--topk", "--db", "--html", "--label", "--bootstrap",
                                         "--bootstrap-seed", NULL};
    const char *a = argv[*i], *v;
    kld_dump_config *t = &k->teacher;
    int64_t n;
    if (!strcmp(a, "--quiet")) { k->o.quiet = true; return 1; }
    if (!strcmp(a, "--no-db")) { k->o.no_db = true; return 1; }
    if (!strcmp(a, "--allow-vocab-mismatch")) { t->allow_vocab_mismatch = true; return 1; }
    if (!kld_arg_in(a, valued)) return -1;
    if (!(v = kld_arg_value(argc, argv, i))) return 0;
    if (!strcmp(a, "--ref") || !strcmp(a, "-m") || !strcmp(a, "--model")) t->model_path = v;
    else if (!strcmp(a, "--teacher")) t->out = v;
    else if (!strcmp(a, "--teacher-top-k")) {
        k->teacher_top_k_given = true;
        if (!strcmp(v, "all")) t->top_k = 0;
        else if (!kld_arg_int(a, v, 1, KLD_DUMP_MAX_TOPK, &n)) return 0;
        else t->top_k = (int32_t)n;
    } else if (!strcmp(a, "--corpus")) t->corpus_path = v;
    else if (!strcmp(a, "--corpus-format")) {
        if (strcmp(v, "auto") && strcmp(v, "text") && strcmp(v, "jsonl")) {
            fprintf(stderr, "kldeval %s: --corpus-format expects auto, text or jsonl, got '%s'\n", cmd, v);
            return 0;
        }
        t->corpus_format = v;
    } else if (!strcmp(a, "--ids-file")) t->ids_path = v;
    else if (!strcmp(a, "--chunking")) { if (!parse_chunking(cmd, v, &t->chunking)) return 0; }
    else if (!strcmp(a, "--max-docs")) { if (!kld_arg_int(a, v, 0, INT64_MAX, &t->max_docs)) return 0; }
    else if (!strcmp(a, "--max-tokens")) { if (!kld_arg_int(a, v, 0, INT64_MAX, &t->max_tokens)) return 0; }
    else if (!strcmp(a, "--ctx")) { if (!kld_arg_int(a, v, 2, 1 << 24, &t->ctx)) return 0; }
    else if (!strcmp(a, "--chunks")) { if (!kld_arg_int(a, v, 0, INT64_MAX, &t->max_chunks)) return 0; }
    else if (!strcmp(a, "--chunk")) { if (!kld_arg_int(a, v, 1, 1 << 16, &t->chunk)) return 0; }
    else if (!strcmp(a, "--threads")) { if (!kld_arg_int(a, v, 1, 1024, &n)) return 0; t->n_threads = (int)n; }
    else if (!strcmp(a, "--topk")) { if (!kld_arg_int(a, v, 1, KLD_TOPK_MAX, &n)) return 0; k->topk = (int)n; }
    else if (!strcmp(a, "--db")) k->o.db_path = v;
    else if (!strcmp(a, "--html")) k->o.html_path = v;
    else if (!strcmp(a, "--label")) k->o.label = v;
    else if (!strcmp(a, "--bootstrap")) { if (!kld_arg_int(a, v, 0, 100000, &n)) return 0; k->o.bootstrap = (int)n; }
    else if (!strcmp(a, "--bootstrap-seed")) { if (!kld_arg_u64(a, v, &k->o.bootstrap_seed)) return 0; }
    return 1;
}

bool kld_sweep_cli_check(const char *cmd, const kld_sweep_cli_common *k, const char *json_path) {
    const kld_dump_config *t = &k->teacher;
    if (t->ids_path && t->corpus_path) {
        fprintf(stderr, "kldeval %s: give --corpus or --ids-file, not both\n", cmd);
        return false;
    }
    if (k->o.db_path && k->o.no_db) {
        fprintf(stderr, "kldeval %s: give --db or --no-db, not both\n", cmd);
        return false;
    }
    const char *files[4] = {t->model_path, t->corpus_path, t->ids_path};
    int n = 3;
    if (json_path) {
        if (!kld_arg_output(cmd, "--json", json_path, files, n)) return false;
        files[n++] = json_path;
    }
    return !k->o.html_path || kld_arg_output(cmd, "--html", k->o.html_path, files, n);
}

static void on_pass(void *user, long arm, size_t n_arms, const char *label) {
    (void)user;
    if (arm < 0) fprintf(stderr, "sweep: reference pass (%s) into the saved teacher\n", label);
    else fprintf(stderr, "sweep: arm %ld/%zu: %s\n", arm + 1, n_arms, label);
}

static void progress(const kld_kl_progress *p, void *user) {
    (void)user;
    kld_progress pr = {p->docs_done, p->docs_total, p->positions_done, p->positions_total,
                       p->elapsed_s, p->kld_mean};
    kld_progress_print(stderr, &pr);
}

void kld_sweep_cli_config(kld_sweep_cli_common *k, kld_sweep_config *c) {
    memset(c, 0, sizeof *c);
    c->teacher = k->teacher;
    c->topk = k->topk;
    c->stop = &stop_requested;
    if (!k->o.quiet) {
        c->on_pass = on_pass;
        if (kld_progress_enabled(stderr)) c->progress = progress;
    }
}

kld_status kld_sweep_cli_run(const kld_sweep_config *c, kld_sweep_result *r, kld_error *err) {
    /* Ctrl-C, a scheduler's SIGTERM or a closed terminal all stop after the
     * current chunk, so that the temporary teacher is removed (kld_sweep_end) */
    static const int sigs[3] = {SIGINT, SIGTERM, SIGHUP};
    struct sigaction sa = {0}, old[3];
    sa.sa_handler = on_stop;
    for (int i = 0; i < 3; i++) sigaction(sigs[i], &sa, &old[i]);
    kld_status st = kld_sweep_run(c, r, err);
    for (int i = 0; i < 3; i++) sigaction(sigs[i], &old[i], NULL);
    if (c->progress) kld_progress_end(stderr);
    return st;
}

void kld_sweep_cli_end(const kld_sweep_config *c, kld_sweep_result *r) {
    (void)c;
    kld_sweep_end(r);
}

static uint64_t positions(const kld_sweep_result *r) {
    return r->n_done ? r->arms[0].sum.n_positions : 0;
}

void kld_sweep_cli_print_head(const kld_sweep_cli_common *k, const kld_sweep_result *r) {
    const kld_dump_config *t = &k->teacher;
    printf("reference %s%s%s: one pass into the saved teacher %s (%s; %s)\n", t->model_path,
           t->levers ? " with " : "", t->levers ? t->levers : "",
           r->teacher_temp ? "(temporary)" : r->teacher_dir,
           t->top_k > 0 ? "top-k ids per position" : "the whole vocabulary",
           r->teacher_reused ? "reused" : "written now");
    if (t->top_k > 0 && r->n_done && r->arms[0].sum.n_truncated)
        printf("teacher top-%d: KLD is the truncated sum over those ids (captured mass %.6f on "
               "average); --teacher-top-k all gives the full-vocabulary KLD\n",
               (int)t->top_k, r->arms[0].sum.mass_mean);
    printf("%llu positions per arm, %zu arm%s scored in %.1f s%s\n", (unsigned long long)positions(r),
           r->n_done, r->n_done == 1 ? "" : "s", r->elapsed_s,
           r->partial ? " — INTERRUPTED: only the arms completed are shown" : "");
}

json_t *kld_sweep_cli_json_head(const char *schema, const kld_sweep_cli_common *k,
                                const kld_sweep_result *r) {
    const kld_dump_config *t = &k->teacher;
    return json_pack("{s:s,s:s,s:s,s:s?,s:{s:s?,s:i,s:b,s:b},s:I,s:f,s:b}", "schema", schema,
                     "version", kld_version(), "reference", t->model_path, "reference_levers",
                     t->levers, "teacher", "dir", r->teacher_temp ? NULL : r->teacher_dir, "top_k",
                     (int)t->top_k, "reused", r->teacher_reused, "temporary", r->teacher_temp,
                     "n_positions", (json_int_t)positions(r), "elapsed_s", r->elapsed_s, "partial",
                     r->partial);
}

json_t *kld_sweep_cli_arm_json(const kld_sweep_outcome *o, double bpw) {
    const kld_summary *s = &o->sum;
    json_t *a = json_pack("{s:s,s:s,s:s?,s:{s:f,s:f,s:f,s:f},s:f,s:f}", "label", o->label, "model",
                          o->model, "levers", o->levers, "kld", "mean", s->kld.mean, "stderr",
                          s->kld.se, "median", s->kld.median, "p99", s->kld.pct[8], "top1_agreement",
                          s->top1_agreement, "top1_agreement_stderr", s->top1_se);
    json_object_set_new(a, "bits_per_weight", isfinite(bpw) ? json_real(bpw) : json_null());
    if (s->n_truncated)
        json_object_set_new(a, "truncated", json_pack("{s:f,s:f}", "mass_mean", s->mass_mean,
                                                      "kld_bound_mean", s->kld_bound.mean));
    return a;
}

kld_status kld_sweep_cli_intervals(const kld_sweep_cli_common *k, const kld_sweep_result *r, long baseline,
                                   kld_sweep_ci **out, kld_error *err) {
    *out = calloc(r->n_done ? r->n_done : 1, sizeof **out);
    if (!*out) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    const int reps = k->o.bootstrap < 0 ? KLD_BOOTSTRAP_DEFAULT : k->o.bootstrap;
    kld_status st = KLD_OK;
    for (size_t i = 0; !st && reps > 0 && i < r->n_done; i++) {
        kld_record_source src;
        kld_stats_source(r->arms[i].res.stats, &src);
        st = kld_bootstrap_report(NULL, &src, reps, k->o.bootstrap_seed, &(*out)[i].boot, err);
        if (!st && baseline >= 0 && (size_t)baseline < r->n_done && (long)i != baseline) {
            st = kld_bootstrap_paired_stats(r->arms[i].res.stats, r->arms[baseline].res.stats, reps,
                                            k->o.bootstrap_seed, &(*out)[i].vs, err);
            if (st == KLD_ERR_ARG && strstr(err->msg, "nothing to resample"))
                st = KLD_OK, memset(&(*out)[i].vs, 0, sizeof (*out)[i].vs); /* one window: nothing to resample */
        }
    }
    if (st) free(*out), *out = NULL;
    return st;
}

/* "better" / "worse" than the baseline, "n.d.", "same" (ΔKLD exactly 0). */
static const char *vs_word(const kld_paired_bootstrap *b) { return kld_paired_verdict_word(b, "better", "worse"); }

void kld_sweep_cli_arm_json_ci(json_t *arm, const kld_sweep_ci *ci, const char *baseline) {
    if (ci->boot.replicates) kld_bootstrap_json(&ci->boot, arm);
    if (ci->vs.replicates) {
        char verdict[512];
        kld_paired_verdict(&ci->vs, "this arm", "the baseline", verdict, sizeof verdict);
        json_object_set_new(arm, "vs_baseline", json_pack("{s:s, s:o, s:s, s:s}", "baseline", baseline, "paired",
                                                          kld_paired_bootstrap_json(&ci->vs), "verdict", vs_word(&ci->vs),
                                                          "verdict_line", verdict));
    }
}

json_t *kld_sweep_cli_judge(const kld_sweep_cli_common *k, const kld_sweep_outcome *o, const kld_sweep_ci *ci,
                            const kld_gates *gates, const kld_gates *paired, bool *pass) {
    kld_report_run run = {k->teacher.model_path, o->model, "", o->label, o->res.config, 0, 0, 0, 0, 0, false};
    json_t *rep = kld_report_json(&o->sum, &run);
    if (rep && ci->boot.replicates) kld_bootstrap_json(&ci->boot, rep);
    json_t *pj = ci->vs.replicates ? kld_paired_bootstrap_json(&ci->vs) : NULL;
    const kld_gates none = {0};
    json_t *v = rep ? kld_gates_eval_with_paired(gates, rep, paired ? paired : &none, pj, pass) : NULL;
    json_decref(rep);
    json_decref(pj);
    return v;
}

void kld_sweep_cli_print_intervals(const kld_sweep_result *r, const kld_sweep_ci *ci, long baseline) {
    size_t n = r->n_done;
    kld_sweep_ci_row *rows = calloc(n ? n : 1, sizeof *rows);
    if (!rows) return;
    bool any = false;
    for (size_t i = 0; i < n; i++) {
        rows[i] = (kld_sweep_ci_row){r->arms[i].label, &r->arms[i].sum, &ci[i].boot, &ci[i].vs,
                                     (long)i == baseline ? "baseline" : ci[i].vs.replicates ? vs_word(&ci[i].vs) : "-"};
        any = any || ci[i].boot.replicates;
    }
    if (any)
        kld_report_sweep_intervals(stdout, rows, n,
                                   baseline >= 0 && (size_t)baseline < n ? r->arms[baseline].label : NULL);
    free(rows);
}

bool kld_sweep_cli_record(const char *cmd, const kld_sweep_cli_common *k, const kld_sweep_result *r,
                          const kld_sweep_ci *ci, json_t *const *gates) {
    size_t n = r->n_done;
    kld_record_item *items = calloc(n ? n : 1, sizeof *items);
    json_t **reports = calloc(n ? n : 1, sizeof *reports);
    char **labels = calloc(n ? n : 1, sizeof *labels);
    bool ok = items && reports && labels;
    for (size_t i = 0; ok && i < n; i++) {
        const kld_sweep_outcome *o = &r->arms[i];
        const char *prefix = k->o.label ? k->o.label : "sweep";
        size_t len = strlen(prefix) + strlen(o->label) + 3;
        if (!(labels[i] = malloc(len))) { ok = false; break; }
        snprintf(labels[i], len, "%s: %s", prefix, o->label);
        const json_t *teacher = json_object_get(r->teacher.report, "config");
        const char *corpus = json_string_value(json_object_get(json_object_get(teacher, "corpus"), "name"));
        kld_report_run run = {k->teacher.model_path, o->model, corpus ? corpus : r->teacher_dir, labels[i],
                              o->res.config, o->res.elapsed_s, o->res.ref_seconds, o->res.arm_seconds,
                              o->res.ref_tokens, o->res.arm_tokens, false};
        reports[i] = kld_report_json(&o->sum, &run);
        if (ci && reports[i] && ci[i].boot.replicates) kld_bootstrap_json(&ci[i].boot, reports[i]);
        if (ci && reports[i] && ci[i].vs.replicates)
            json_object_set_new(reports[i], "paired", kld_paired_bootstrap_json(&ci[i].vs));
        if (gates && gates[i] && reports[i]) json_object_set(reports[i], "gates", gates[i]);
        json_t *cfg = json_object_get(reports[i], "config");
        if (cfg && teacher) {
            /* the reference is the model the teacher was made from, and the
             * corpus the teacher's, not the (temporary) teacher directory */
            json_object_set(cfg, "ref", json_object_get(teacher, "ref"));
            json_object_set(cfg, "corpus", json_object_get(teacher, "corpus"));
            json_object_set(cfg, "windows", json_object_get(teacher, "windows"));
        }
        if (cfg)
            json_object_set_new(cfg, "sweep", json_pack("{s:s,s:s,s:s?,s:s}", "command", cmd, "arm",
                                                        o->label, "levers", o->levers, "reference",
                                                        k->teacher.model_path));
        double rate = o->res.elapsed_s > 0 ? (double)o->res.arm_tokens / o->res.elapsed_s : NAN;
        items[i] = (kld_record_item){labels[i], "sweep", reports[i], &o->sum, o->res.stats, NULL, false,
                                     o->res.elapsed_s, rate, 0};
    }
    if (ok) {
        kld_kl_outputs o = k->o;
        o.label = NULL;
        ok = kld_record_runs(cmd, &o, items, n);
    }
    for (size_t i = 0; i < n; i++) {
        if (reports) json_decref(reports[i]);
        if (labels) free(labels[i]);
    }
    free(items);
    free(reports);
    free(labels);
    return ok;
}
