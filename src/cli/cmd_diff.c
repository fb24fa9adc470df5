/* cmd_diff.c — `kldeval diff`: where in the network an arm's drift enters.
 * Parses flags (the arms and corpus/window flags as `kl` takes them), runs
 * the diff (eval/diff.h) and prints the per-layer table and --json. */
#include "cli/args.h"
#include "cli/commands.h"
#include "eval/diff.h"
#include "report/report.h"
#include "tensor/types.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static volatile sig_atomic_t stop_requested;

static void on_sigint(int sig) {
    (void)sig;
    stop_requested = 1;
}

static void usage(FILE *f) {
    fprintf(f,
"usage: kldeval diff --ref MODEL --arm MODEL [flags]\n"
"       kldeval diff -m MODEL --lever NAME=VALUE[,...] [flags]   (self-flag: one weight load)\n\n"
"Where the drift enters: both arms read the same tokens in lockstep, as in `kldeval kl`, and at\n"
"every layer the arm's hidden states are compared with the reference's at three sites: the\n"
"mixer's output (attention, or a short-conv / DeltaNet block), the MLP's output (a mixture of\n"
"experts: the experts' combined output) and the residual stream after the layer. Per layer and\n"
"site: relative Frobenius error ||a-r||/||r||, cosine distance 1-cos, max|a-r| (means over the\n"
"scored positions ± standard error, and the worst position), and SQNR 10·log10(sum ||r||^2 /\n"
"sum ||a-r||^2) in dB (+inf when nothing differs). The last row is the run's KLD as `kl` gives\n"
"it. Both models must share architecture, n_layer and n_embd; saved teachers, candidate dumps\n"
"and llama.cpp base files hold no hidden layers and are refused. See docs/diff.md.\n\n"
"arms\n"
"  --ref MODEL            the reference model (MODEL, MODEL@POLICY, MODEL[@POLICY]+ADAPTER[:SCALE])\n"
"  --arm MODEL            the candidate model (the same forms)\n"
"  -m, --model MODEL      the reference model (same as --ref); without --arm the candidate is a\n"
"                         second session over the same weights with the --lever settings\n"
"  --lever L              the candidate's levers (same as --arm-lever), NAME=VALUE[,...] as in\n"
"                         `kldeval kl --help` (kv=..., act=..., noise=..., lora=...)\n"
"  --ref-lever L          the reference's levers (default: every lever at its reference value)\n"
"  --arm-lever L          the arm's levers\n\n"
"corpus and windows (as `kldeval kl`)\n"
"  --corpus FILE          text (one document per line) or JSONL; default: the built-in corpus\n"
"  --corpus-format F      auto (default), text, jsonl\n"
"  --ids-file FILE        pre-tokenized int32 little-endian ids instead of text\n"
"  --max-docs N           at most N documents (doc chunking; default 0 = all)\n"
"  --max-tokens N         at most N tokens per document (doc chunking; default 0 = all)\n"
"  --chunking MODE        doc (default), llamacpp or stream: the windows and scored positions\n"
"                         of `kldeval kl`\n"
"  --ctx N                window length in tokens, 2 .. 16777216 (default 512)\n"
"  --chunks N             llamacpp or stream chunking: at most N windows (default 0 = all)\n"
"  --chunk N              prefill chunk in tokens, 1 .. 65536 (default 128); memory holds the\n"
"                         reference's hidden states of one chunk: n_layer × 3 × chunk × n_embd\n"
"                         floats\n"
"  --threads N            worker threads, 1 .. 1024 (default: all cores)\n\n"
"  --matrices             also per weight matrix: ||W_arm·x − W_ref·x|| / ||W_ref·x|| pooled over\n"
"                         every row it multiplied, with x the arm's own input and the reference's\n"
"                         (four extra products per matrix in double: slow on large models;\n"
"                         a MoE layer's routed experts pooled per ffn_*_exps tensor over the\n"
"                         rows routed to them; an untied token embedding is listed with its\n"
"                         looked-up rows' relative error)\n\n"
"output\n"
"  --json FILE            the table as JSON (schema kldeval.diff/1, docs/diff.md); checked\n"
"                         before the run, may not be an input\n"
"  --db PATH              record the run in this run database (mode diff; the kl report with the\n"
"                         diff table under \"diff\"; default: $KLDEVAL_DB, else\n"
"                         $XDG_DATA_HOME/kldeval/runs.sqlite, else ~/.local/share/kldeval/runs.sqlite)\n"
"  --no-db                do not record the run\n"
"  --label NAME           the run's label in the database\n"
"  --quiet                no progress line\n"
"  -h, --help             this text\n\n"
"The statistics do not depend on --chunk or --threads; identical arms give every error exactly 0\n"
"and SQNR +inf (JSON null with sqnr_inf true). Ctrl-C stops after the current chunk and reports\n"
"the positions compared so far, marked partial.\n");
}

static void progress(const kld_kl_progress *p, void *user) {
    (void)user;
    kld_progress pr = {p->docs_done, p->docs_total, p->positions_done, p->positions_total,
                       p->elapsed_s, p->kld_mean};
    kld_progress_print(stderr, &pr);
}

typedef struct diff_flags {
    const char *ref, *arm, *ref_levers, *arm_levers, *json_path;
    bool quiet, matrices;
    kld_kl_outputs o; /* the run database: db_path, no_db, label */
} diff_flags;

/* 0: parsed; else the exit code (0 after --help is returned as -1). */
static int parse(int argc, char **argv, kld_kl_config *c, diff_flags *f) {
    static const char *const valued[] = {
        "--ref", "--arm", "-m", "--model", "--lever", "--arm-lever", "--ref-lever", "--corpus",
        "--corpus-format", "--ids-file", "--max-docs", "--max-tokens", "--chunking", "--ctx",
        "--chunks", "--chunk", "--threads", "--json", "--db", "--label", NULL};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int64_t n;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return -1;
        }
        if (!strcmp(a, "--quiet")) { f->quiet = true; continue; }
        if (!strcmp(a, "--no-db")) { f->o.no_db = true; continue; }
        if (!strcmp(a, "--matrices")) { f->matrices = true; continue; }
        if (!kld_arg_in(a, valued)) {
            fprintf(stderr, "kldeval diff: unknown %s '%s' (see --help)\n",
                    a[0] == '-' ? "flag" : "argument", a);
            return 2;
        }
        if (!(v = kld_arg_value(argc, argv, &i))) return 2;
        if (!strcmp(a, "--ref") || !strcmp(a, "-m") || !strcmp(a, "--model")) f->ref = v;
        else if (!strcmp(a, "--arm")) f->arm = v;
        else if (!strcmp(a, "--lever") || !strcmp(a, "--arm-lever")) f->arm_levers = v;
        else if (!strcmp(a, "--ref-lever")) f->ref_levers = v;
        else if (!strcmp(a, "--corpus")) c->corpus_path = v;
        else if (!strcmp(a, "--json")) f->json_path = v;
        else if (!strcmp(a, "--db")) f->o.db_path = v;
        else if (!strcmp(a, "--label")) f->o.label = v;
        else if (!strcmp(a, "--chunk")) { if (!kld_arg_int(a, v, 1, 1 << 16, &c->chunk)) return 2; }
        else if (!strcmp(a, "--threads")) {
            if (!kld_arg_int(a, v, 1, 1024, &n)) return 2;
            c->n_threads = (int)n;
        } else if (!kld_arg_kl_window(a, v, c)) return 2;
    }
    if (!f->ref) {
        fprintf(stderr, "kldeval diff: give the reference model (--ref or -m; see --help)\n");
        return 2;
    }
    c->ref = (kld_arm_spec){.kind = KLD_ARM_MODEL, .path = f->ref, .levers = f->ref_levers};
    c->arm = (kld_arm_spec){.kind = f->arm ? KLD_ARM_MODEL : KLD_ARM_SELF, .path = f->arm,
                            .levers = f->arm_levers};
    kld_error err = {0};
    const char *what[1] = {"--json"}, *paths[1] = {f->json_path};
    if (kld_diff_check(c, &err) || kld_kl_check_outputs(c, what, paths, 1, &err)) {
        fprintf(stderr, "kldeval diff: %s\n", err.msg);
        return 2;
    }
    if (f->o.db_path && f->o.no_db) {
        fprintf(stderr, "kldeval diff: give --db or --no-db, not both\n");
        return 2;
    }
    return kld_record_check("diff", &f->o) ? 0 : 2;
}

int kld_cmd_diff(int argc, char **argv) {
    kld_kl_config c;
    kld_kl_config_defaults(&c);
    diff_flags f = {0};
    int rc = parse(argc, argv, &c, &f);
    if (rc) return rc < 0 ? 0 : rc;
    kld_kernels_init();
    c.stop = &stop_requested;
    if (!f.quiet && kld_progress_enabled(stderr)) c.progress = progress;
    struct sigaction sa = {0}, old;
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, &old);
    kld_diff_result res;
    kld_error err = {0};
    kld_status st = kld_diff_run(&c, f.matrices, &res, &err);
    sigaction(SIGINT, &old, NULL);
    if (c.progress) kld_progress_end(stderr);
    if (st) {
        fprintf(stderr, "kldeval diff: %s\n", err.msg);
        return 1;
    }
    kld_summary sum;
    if (kld_stats_finalize(res.kl.stats, &sum, &err) != KLD_OK) {
        fprintf(stderr, "kldeval diff: %s\n", err.msg);
        kld_diff_result_free(&res);
        return 1;
    }
    kld_diff_print(stdout, &res, &sum);
    json_t *j = kld_diff_json(&res, &sum);
    if (!j) {
        fprintf(stderr, "kldeval diff: out of memory\n");
        rc = 1;
    } else if (f.json_path && kld_report_json_dump(f.json_path, j, &err) != KLD_OK) {
        fprintf(stderr, "kldeval diff: %s\n", err.msg);
        rc = 1;
    }
    /* the run database: the kl run's row (its statistics and positions), mode diff, with the
     * diff table kept in the report under "diff" */
    const kld_kl_result *kl = &res.kl;
    kld_report_run run = {kl->ref_label, kl->arm_label, kl->corpus_label, f.o.label, kl->config,
                          kl->elapsed_s, kl->ref_seconds, kl->arm_seconds, kl->ref_tokens,
                          kl->arm_tokens, kl->partial};
    json_t *report = j ? kld_report_json(&sum, &run) : NULL;
    if (report) json_object_set(report, "diff", j);
    double rate = kl->elapsed_s > 0 ? (double)kl->arm_tokens / kl->elapsed_s : NAN;
    if (report && !kld_record_run("diff", &f.o, "diff", report, &sum, kl->stats, kl->partial,
                                  kl->elapsed_s, rate) && !rc)
        rc = 1;
    json_decref(report);
    json_decref(j);
    bool partial = res.kl.partial;
    kld_diff_result_free(&res);
    return rc ? rc : partial ? 130 : 0;
}
