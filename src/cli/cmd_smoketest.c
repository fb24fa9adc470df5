/* cmd_smoketest.c — `kldeval smoketest --ref R --arm A`: the quick ship
 * check of the mlx-bun seed, the KL run (built-in corpus unless --corpus)
 * followed by GSM8K-50 on both models, paired. */
#include "cap/cap.h"
#include "cap/run.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "eval/kl_driver.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

static volatile int g_stop;
static void on_sigint(int sig) {
    (void)sig;
    g_stop = 1;
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: kldeval smoketest --ref MODEL --arm MODEL [flags]\n"
            "  the KL run of --arm against --ref, then GSM8K on both (paired)\n"
            "  --corpus FILE      KL corpus (default: the built-in corpus)\n"
            "  --corpus-format F, --ids-file FILE, --chunking MODE, --ctx N, --max-docs N,\n"
            "  --max-tokens N, --chunks N\n"
            "                     the KL part's corpus and windows, as kl takes them (kl --help)\n"
            "  --n N              GSM8K problems, 1 .. 1319 (default 50)\n"
            "  --max-new N        tokens generated per problem (default 256)\n"
            "  --no-chat          raw completion even when the models have chat templates\n"
            "  --data DIR         the capability data (default: data/capability as shipped,\n"
            "                     found beside the binary, in its source tree or its install prefix)\n"
            "  --json PATH        the GSM8K part's JSON report\n"
            "  --threads N        threads, 1 .. 1024 (default: all cores)\n"
            "  --db PATH          the run database (default: $KLDEVAL_DB, else\n"
            "                     $XDG_DATA_HOME/kldeval/runs.sqlite, else ~/.local/share/kldeval/runs.sqlite)\n"
            "  --no-db            do not record the runs\n"
            "  --gate EXPR        conditions on either part's figures, e.g. kld.mean<=2e-3,top1>=0.98,\n"
            "                     gsm8k.diff>=-0.04 (kl's statistics, see kldeval kl --help, and\n"
            "                     gsm8k.accuracy|ref.accuracy|arm.accuracy|diff); each printed PASS/FAIL;\n"
            "                     exit status 3 when any fails\n"
            "Both parts are recorded in the run database, label \"smoketest\": the KL run (mode\n"
            "two-models) and the GSM8K run (mode cap).\n");
}

static int smoketest(int argc, char **argv, kld_gates *kl_gates, kld_gates *cap_gates);

int kld_cmd_smoketest(int argc, char **argv) {
    kld_gates kl_gates = {0}, cap_gates = {0};
    int rc = smoketest(argc, argv, &kl_gates, &cap_gates);
    kld_gates_free(&kl_gates);
    kld_gates_free(&cap_gates);
    return rc;
}

/* The gates are the caller's (freed on every path). */
static int smoketest(int argc, char **argv, kld_gates *kl_gates, kld_gates *cap_gates) {
    const char *ref = NULL, *arm = NULL, *corpus = NULL, *json_path = NULL, *db_path = NULL;
    kld_cap_run_opts o = {.tasks = "gsm8k", .n = 50, .max_new = 256, .stop = &g_stop, .quiet = true};
    bool no_db = false;
    static const char *const with_value[] = {"--ref", "--arm", "--corpus", "--n", "--max-new", "--data",
                                             "--json", "--threads", "--db", "--corpus-format",
                                             "--ids-file", "--chunking", "--ctx", "--max-docs",
                                             "--max-tokens", "--chunks", "--gate", NULL};
    kld_kl_config c;
    kld_kl_config_defaults(&c);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        int64_t x;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) return usage(stdout), 0;
        if (!strcmp(a, "--no-chat")) { o.no_chat = true; continue; }
        if (!strcmp(a, "--no-db")) { no_db = true; continue; }
        if (!kld_arg_in(a, with_value)) {
            fprintf(stderr, "kldeval smoketest: unknown flag '%s'\n", a);
            usage(stderr);
            return 2;
        }
        if (!(v = kld_arg_value(argc, argv, &i))) return 2;
        if (!strcmp(a, "--ref")) ref = v;
        else if (!strcmp(a, "--arm")) arm = v;
        else if (!strcmp(a, "--corpus")) corpus = v;
        else if (!strcmp(a, "--data")) o.data_dir = v;
        else if (!strcmp(a, "--json")) json_path = v;
        else if (!strcmp(a, "--db")) db_path = v;
        else if (!strcmp(a, "--gate")) { /* kl's statistics to the KL part, the rest to GSM8K's */
            kld_error e = {0};
            kld_gates_free(kl_gates), kld_gates_free(cap_gates);
            if (kld_gates_parse_split(v, kl_gates, cap_gates, &e) != KLD_OK) {
                fprintf(stderr, "kldeval smoketest: %s\n", e.msg);
                return 2;
            }
        }
        else if (!strcmp(a, "--n")) { if (!kld_arg_int(a, v, 1, 1319, &x)) return 2; o.n = (int)x; }
        else if (!strcmp(a, "--max-new")) { if (!kld_arg_int(a, v, 1, 65536, &x)) return 2; o.max_new = (int)x; }
        else if (!strcmp(a, "--threads")) { if (!kld_arg_int(a, v, 1, 1024, &x)) return 2; o.threads = (int)x; }
        else if (!kld_arg_kl_window(a, v, &c)) return 2; /* the corpus and window flags kl takes */
    }
    if (!ref || !arm) {
        fprintf(stderr, "kldeval smoketest: need --ref and --arm\n");
        usage(stderr);
        return 2;
    }
    if (db_path && no_db) {
        fprintf(stderr, "kldeval smoketest: give --db or --no-db, not both\n");
        return 2;
    }
    if (json_path) {
        const char *inputs[] = {ref, arm, corpus, db_path};
        if (!kld_arg_output("smoketest", "--json", json_path, inputs, 4)) return 2;
    }
    c.ref = (kld_arm_spec){.kind = KLD_ARM_MODEL, .path = ref};
    c.arm = (kld_arm_spec){.kind = KLD_ARM_MODEL, .path = arm};
    c.corpus_path = corpus;
    c.n_threads = o.threads;
    /* both parts' rules and data before either loads a model */
    kld_error cerr = {0};
    char data[4096];
    if (kld_kl_check(&c, &cerr) || kld_cap_data_dir(o.data_dir, data, sizeof data, &cerr) ||
        kld_cap_data_check(data, o.tasks, &cerr)) {
        fprintf(stderr, "kldeval smoketest: %s\n", cerr.msg);
        return 2;
    }
    o.data_dir = data;
    printf("== KL: kldeval kl --ref %s --arm %s ==\n", ref, arm);
    fflush(stdout);
    kld_kl_outputs out = {.label = "smoketest", .no_db = no_db, .db_path = db_path, .gates = *kl_gates,
                          .bootstrap = -1};
    int rc = kld_kl_main(&c, &out);
    bool gates_failed = rc == KLD_EXIT_GATE_FAILED; /* the GSM8K part still runs */
    if (rc != 0 && !gates_failed) return rc;
    rc = 0;
    out.gates = (kld_gates){0};
    printf("\n== GSM8K-%d (greedy, paired) ==\n", o.n);
    fflush(stdout);
    o.ref_path = ref;
    o.arm_path = arm;
    signal(SIGINT, on_sigint);
    json_t *rep = NULL;
    kld_error err = {0};
    double t0 = kld_now_s();
    if (kld_cap_run(&o, &rep, &err) != KLD_OK) {
        fprintf(stderr, "kldeval smoketest: %s\n", err.msg);
        return 1;
    }
    json_t *t = json_object_get(json_object_get(rep, "tasks"), "gsm8k");
    json_t *r = json_object_get(t, "ref"), *a = json_object_get(t, "arm"), *p = json_object_get(t, "paired");
    printf("gsm8k  ref %.4f ± %.4f (%lld/%lld)  arm %.4f ± %.4f (%lld/%lld)  diff %+.4f ± %.4f "
           "(arm only %lld, ref only %lld)%s\n",
           json_real_value(json_object_get(r, "accuracy")), json_real_value(json_object_get(r, "stderr")),
           (long long)json_integer_value(json_object_get(r, "correct")), (long long)json_integer_value(json_object_get(r, "n")),
           json_real_value(json_object_get(a, "accuracy")), json_real_value(json_object_get(a, "stderr")),
           (long long)json_integer_value(json_object_get(a, "correct")), (long long)json_integer_value(json_object_get(a, "n")),
           json_real_value(json_object_get(p, "diff")), json_real_value(json_object_get(p, "stderr")),
           (long long)json_integer_value(json_object_get(p, "arm_only_right")),
           (long long)json_integer_value(json_object_get(p, "ref_only_right")),
           json_is_true(json_object_get(rep, "interrupted")) ? " (interrupted)" : "");
    bool pass = true;
    if (kld_gates_judge(cap_gates, rep, json_is_true(json_object_get(rep, "interrupted")), stdout, &pass)) pass = false;
    gates_failed |= !pass;
    if (json_path && json_dump_file(rep, json_path, JSON_INDENT(1) | JSON_REAL_PRECISION(17))) {
        fprintf(stderr, "kldeval smoketest: --json %s: cannot write\n", json_path);
        rc = 1;
    }
    kld_record_cap_run("smoketest", &out, "cap", rep, json_is_true(json_object_get(rep, "interrupted")),
                       o.threads > 0 ? o.threads : kld_default_threads(), kld_now_s() - t0);
    json_decref(rep);
    return rc ? rc : gates_failed ? KLD_EXIT_GATE_FAILED : 0;
}
