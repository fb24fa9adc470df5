/* kl_pair.c — `kldeval kl --ref R --arm A --arm B`: each arm scored
 * against the reference in lockstep (the same windows, so the same tokens
 * and positions), both reports, then the paired comparison A − B that
 * `runs compare` prints (the paired block bootstrap over windows and its
 * verdict), gates on arm A and on the pair, one JSON, two database rows. */
#include "cli/kl_pair.h"

#include "eval/bootstrap.h"
#include "eval/gate.h"
#include "report/report.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static volatile sig_atomic_t stop_requested;

static void on_sigint(int sig) {
    (void)sig;
    stop_requested = 1;
}

static void progress(const kld_kl_progress *p, void *user) {
    (void)user;
    kld_progress pr = {p->docs_done, p->docs_total, p->positions_done, p->positions_total,
                       p->elapsed_s, p->kld_mean};
    kld_progress_print(stderr, &pr);
}

/* Whether an arm's model file is there, before anything runs (the second
 * arm's absence must not cost the first arm's pass): the path itself, or
 * its model part before the policy (MODEL@POLICY) or adapter (+ADAPTER). */
static bool model_there(const char *path) {
    struct stat sb;
    if (stat(path, &sb) == 0) return true;
    char base[4096];
    const size_t first = strcspn(path, "@+");
    const char *last_at = strrchr(path, '@');
    const size_t cut[2] = {first, last_at ? (size_t)(last_at - path) : 0};
    for (int i = 0; i < 2; i++) {
        if (!cut[i] || cut[i] >= sizeof base || !path[cut[i]]) continue;
        memcpy(base, path, cut[i]);
        base[cut[i]] = '\0';
        if (stat(base, &sb) == 0) return true;
    }
    return false;
}

typedef struct side {
    kld_kl_result res;
    kld_summary sum;
    kld_bootstrap boot;
    json_t *report;
    bool ran;
} side;

/* One arm's run, its summary, its report (text on stdout, JSON kept) and
 * its intervals. */
static kld_status run_side(kld_kl_config *c, const kld_kl_outputs *o, const char *name, side *s, kld_error *err) {
    memset(s, 0, sizeof *s);
    c->stop = &stop_requested;
    c->progress = !o->quiet && kld_progress_enabled(stderr) ? progress : NULL;
    kld_status st = kld_kl_run(c, &s->res, err);
    if (c->progress) kld_progress_end(stderr);
    if (st) return st;
    s->ran = true;
    if (s->res.partial) return KLD_OK;
    if ((st = kld_stats_finalize(s->res.stats, &s->sum, err))) return st;
    char label[4200];
    snprintf(label, sizeof label, "%s: %s", name, s->res.arm_label);
    kld_report_run run = {s->res.ref_label, s->res.arm_label, s->res.corpus_label, label, s->res.config,
                          s->res.elapsed_s, s->res.ref_seconds, s->res.arm_seconds, s->res.ref_tokens,
                          s->res.arm_tokens, false};
    printf("====== %s: %s ======\n", name, s->res.arm_label);
    if ((st = kld_report_text(stdout, &s->sum, &run, err))) return st;
    s->report = kld_report_json(&s->sum, &run);
    if (!s->report) return kld_fail(err, KLD_ERR_NOMEM, "out of memory");
    const int reps = o->bootstrap < 0 ? KLD_BOOTSTRAP_DEFAULT : o->bootstrap;
    kld_record_source src;
    kld_stats_source(s->res.stats, &src);
    if ((st = kld_bootstrap_report(s->report, &src, reps, o->bootstrap_seed, &s->boot, err))) return st;
    if (s->boot.replicates) kld_report_bootstrap_text(stdout, &s->boot, &s->sum);
    if ((st = kld_strata_report(s->report, &src, reps, o->bootstrap_seed, err))) return st;
    kld_strata_report_text(stdout, s->report);
    printf("\n");
    return KLD_OK;
}

int kld_kl_pair_main(kld_kl_config *a, kld_kl_config *b, const kld_kl_outputs *o, const kld_gates *paired) {
    const kld_kl_config *cs[2] = {a, b};
    for (int i = 0; i < 2; i++)
        if (!model_there(cs[i]->arm.path)) {
            fprintf(stderr, "kldeval kl: arm %c: %s: no such file or folder\n", "AB"[i], cs[i]->arm.path);
            return 1;
        }
    struct sigaction sa = {0}, old;
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, &old);
    kld_error err = {0};
    side A, B;
    memset(&B, 0, sizeof B);
    kld_status st = run_side(a, o, "arm A", &A, &err);
    if (!st && !A.res.partial) st = run_side(b, o, "arm B", &B, &err);
    sigaction(SIGINT, &old, NULL);
    int rc = st ? 1 : 0;
    const bool stopped = !st && (A.res.partial || (B.ran && B.res.partial));
    if (st) fprintf(stderr, "kldeval kl: %s\n", err.msg);
    if (stopped) fprintf(stderr, "kldeval kl: stopped: no paired comparison, nothing recorded\n");

    /* the pair: A − B on the same positions */
    kld_paired_bootstrap pb;
    memset(&pb, 0, sizeof pb);
    json_t *pj = NULL, *gates = NULL, *doc = NULL;
    bool pass = true;
    if (!rc && !stopped) {
        const int reps = o->bootstrap < 0 ? KLD_BOOTSTRAP_DEFAULT : o->bootstrap;
        st = reps > 0 ? kld_bootstrap_paired_stats(A.res.stats, B.res.stats, reps, o->bootstrap_seed, &pb, &err)
                      : KLD_OK;
        if (st == KLD_ERR_ARG && strstr(err.msg, "nothing to resample")) st = KLD_OK, memset(&pb, 0, sizeof pb);
        if (st) {
            fprintf(stderr, "kldeval kl: the two arms cannot be paired: %s\n", err.msg);
            rc = 1;
        }
    }
    if (!rc && !stopped) {
        printf("====== arm A − arm B: paired over %llu positions (the same tokens) ======\n",
               (unsigned long long)A.sum.n_positions);
        printf("%-30s: %s\n%-30s: %s\n", "arm A", A.res.arm_label, "arm B", B.res.arm_label);
        char verdict[512];
        if (pb.replicates) {
            kld_report_paired_text(stdout, &pb);
            if (pb.n_blocks < 10)
                printf("note: only %zu windows to resample: the intervals and the verdict are rough\n",
                       pb.n_blocks);
            kld_paired_verdict(&pb, "arm A", "arm B", verdict, sizeof verdict);
        } else {
            snprintf(verdict, sizeof verdict, "no verdict (%s)",
                     o->bootstrap == 0 ? "--bootstrap 0" : "fewer than 2 windows");
        }
        printf("  %-28s %s\n", "verdict", verdict);
        pj = pb.replicates ? kld_paired_bootstrap_json(&pb) : json_object();
        if (pj) json_object_set_new(pj, "verdict", json_string(verdict));
        if (o->gates.n || paired->n) {
            gates = pj ? kld_gates_eval_with_paired(&o->gates, A.report, paired, pb.replicates ? pj : NULL, &pass)
                       : NULL;
            if (!gates) {
                fprintf(stderr, "kldeval kl: out of memory\n");
                rc = 1;
            } else {
                printf("gates (statistics: arm A's; paired: A − B):\n");
                kld_gates_print(stdout, gates);
            }
        }
        doc = json_pack("{s:s, s:O, s:O, s:O}", "schema", "kldeval.kl-pair/1", "a", A.report, "b", B.report,
                        "paired", pj ? pj : json_null());
        if (doc && gates) json_object_set(doc, "gates", gates);
        if (!doc) rc = 1, fprintf(stderr, "kldeval kl: out of memory\n");
        if (!rc && o->json_path && kld_report_json_dump(o->json_path, doc, &err) != KLD_OK) {
            fprintf(stderr, "kldeval kl: %s\n", err.msg);
            rc = 1;
        }
        /* both runs in the database (arm A's row keeps the pair and the gates) */
        if (A.report && pj) json_object_set(A.report, "paired", pj);
        if (A.report && gates) json_object_set(A.report, "gates", gates);
        char la[512], lb[512];
        if (o->label) snprintf(la, sizeof la, "%s (arm A)", o->label), snprintf(lb, sizeof lb, "%s (arm B)", o->label);
        const side *sides[2] = {&A, &B};
        kld_record_item items[2];
        for (int i = 0; i < 2; i++) {
            const side *s = sides[i];
            double rate = s->res.elapsed_s > 0 ? (double)s->res.arm_tokens / s->res.elapsed_s : NAN;
            items[i] = (kld_record_item){o->label ? (i ? lb : la) : NULL, s->res.mode, s->report, &s->sum,
                                         s->res.stats, NULL, false, s->res.elapsed_s, rate, 0};
        }
        kld_kl_outputs ro = *o;
        ro.label = NULL;
        if (!kld_record_runs("kl", &ro, items, 2) && !rc) rc = 1;
    }
    json_decref(doc);
    json_decref(gates);
    json_decref(pj);
    json_decref(A.report);
    json_decref(B.report);
    if (A.ran) kld_kl_result_free(&A.res);
    if (B.ran) kld_kl_result_free(&B.res);
    return rc ? rc : stopped ? 130 : pass ? 0 : KLD_EXIT_GATE_FAILED;
}
