/* cmd_cap.c — `kldeval cap`: the capability suite. `kldeval cap -m MODEL
 * [--arm MODEL]` generates and scores the tasks on kldeval's engine;
 * `kldeval cap score` scores a JSON Lines file of responses that something
 * else generated. Both print a text report, and JSON with --json. */
#include "cap/cap.h"
#include "cap/run.h"
#include "cli/args.h"
#include "cli/commands.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: kldeval cap score --task TASK --responses FILE.jsonl [flags]\n"
            "  --task TASK        gsm8k, mmlu, ifeval, humaneval, bfcl_simple_python,\n"
            "                     bfcl_simple_java, bfcl_simple_javascript, bfcl_multiple\n"
            "  --responses FILE   one JSON object per line: the item as the task's data names it\n"
            "                     (GSM8K/MMLU \"index\" = 0-based line / row, IFEval \"key\" or \"prompt\",\n"
            "                     HumanEval \"task_id\", BFCL \"id\") and the text as \"response\"\n"
            "                     (HumanEval: \"completion\")\n"
            "  --data DIR         the capability data (default ../shared/capability)\n"
            "  --json PATH        also write the JSON report (every accuracy a fraction; '-' = stdout)\n"
            "  --jobs N           HumanEval programs run at once, 1 .. 64 (default 2)\n"
            "  --python PATH      HumanEval interpreter (default /usr/bin/python3)\n"
            "  --label NAME       label of the run in the run database\n"
            "  --db PATH          record the run in this run database (default: $KLDEVAL_DB, else\n"
            "                     $XDG_DATA_HOME/kldeval/runs.sqlite, else ~/.local/share/kldeval/runs.sqlite)\n"
            "  --no-db            do not record the run\n"
            "  -q, --quiet        no warnings\n"
            "  -h, --help         this text\n");
}

static void print_acc(const char *label, const json_t *a) {
    printf("%-20s %.4f ± %.4f  (%lld/%lld)\n", label, json_real_value(json_object_get(a, "accuracy")),
           json_real_value(json_object_get(a, "stderr")),
           (long long)json_integer_value(json_object_get(a, "correct")),
           (long long)json_integer_value(json_object_get(a, "n")));
}

static int cap_score(int argc, char **argv) {
    kld_cap_score_opts o = {.jobs = 2};
    const char *json_path = NULL;
    kld_kl_outputs rec = {0};
    static const char *const with_value[] = {"--task", "--responses", "--data", "--json", "--jobs",
                                             "--python", "--label", "--db", NULL};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            o.quiet = true;
            continue;
        }
        if (!strcmp(a, "--no-db")) {
            rec.no_db = true;
            continue;
        }
        if (!kld_arg_in(a, with_value)) {
            fprintf(stderr, "kldeval cap score: unknown flag '%s'\n", a);
            usage(stderr);
            return 2;
        }
        if (!(v = kld_arg_value(argc, argv, &i))) return 2;
        if (!strcmp(a, "--task")) o.task = v;
        else if (!strcmp(a, "--responses")) o.responses = v;
        else if (!strcmp(a, "--data")) o.data_dir = v;
        else if (!strcmp(a, "--json")) json_path = v;
        else if (!strcmp(a, "--python")) o.python = v;
        else if (!strcmp(a, "--label")) rec.label = v;
        else if (!strcmp(a, "--db")) rec.db_path = v;
        else if (!strcmp(a, "--jobs")) {
            int64_t j;
            if (!kld_arg_int(a, v, 1, 64, &j)) return 2;
            o.jobs = (int)j;
        }
    }
    if (!o.task || !o.responses) {
        fprintf(stderr, "kldeval cap score: need --task and --responses\n");
        usage(stderr);
        return 2;
    }
    if (rec.db_path && rec.no_db) {
        fprintf(stderr, "kldeval cap score: give --db or --no-db, not both\n");
        return 2;
    }
    if (json_path && strcmp(json_path, "-")) {
        const char *inputs[] = {o.responses, rec.db_path};
        if (!kld_arg_output("cap score", "--json", json_path, inputs, 2)) return 2;
    }
    json_t *rep = NULL;
    kld_error err = {0};
    double t0 = kld_now_s();
    if (kld_cap_score(&o, &rep, &err) != KLD_OK) {
        fprintf(stderr, "kldeval cap score: %s\n", err.msg);
        return 1;
    }
    bool to_stdout = json_path && !strcmp(json_path, "-");
    if (!to_stdout) {
        printf("task %s: %lld responses from %s\n", o.task,
               (long long)json_integer_value(json_object_get(rep, "n")), o.responses);
        if (json_object_get(rep, "prompt_strict")) {
            print_acc("prompt strict", json_object_get(rep, "prompt_strict"));
            print_acc("instruction strict", json_object_get(rep, "instruction_strict"));
            print_acc("prompt loose", json_object_get(rep, "prompt_loose"));
            print_acc("instruction loose", json_object_get(rep, "instruction_loose"));
        } else {
            json_t *a = json_pack("{s:O, s:O, s:O, s:O}", "accuracy", json_object_get(rep, "accuracy"),
                                  "stderr", json_object_get(rep, "stderr"), "correct",
                                  json_object_get(rep, "correct"), "n", json_object_get(rep, "n"));
            print_acc("accuracy", a);
            json_decref(a);
        }
        if (json_object_get(rep, "network_isolated") && !json_is_true(json_object_get(rep, "network_isolated")))
            printf("note: not root: the programs ran without network/PID/mount namespaces\n");
    }
    int rc = 0;
    if (json_path) {
        int flags = JSON_INDENT(1) | JSON_REAL_PRECISION(17);
        if (to_stdout) {
            if (json_dumpf(rep, stdout, flags) || fputc('\n', stdout) == EOF) rc = 1;
        } else if (json_dump_file(rep, json_path, flags)) {
            fprintf(stderr, "kldeval cap score: --json %s: cannot write\n", json_path);
            rc = 1;
        }
    }
    /* after the report: a database that cannot be written costs nothing */
    kld_record_cap_run("cap score", &rec, "cap-score", rep, false, o.jobs, kld_now_s() - t0);
    json_decref(rep);
    return rc;
}

static volatile int g_stop;
static void on_sigint(int sig) {
    (void)sig;
    g_stop = 1;
}

static void run_usage(FILE *f) {
    fprintf(f,
            "usage: kldeval cap -m MODEL [--arm MODEL] [--tasks all|mmlu,gsm8k,ifeval,humaneval,bfcl,hashhop] [flags]\n"
            "       kldeval cap score --task TASK --responses FILE.jsonl   (see kldeval cap score --help)\n"
            "  -m, --model PATH   the reference model\n"
            "  --arm PATH         a second model scored on the same items (paired difference)\n"
            "  --tasks LIST       tasks (default all)\n"
            "  --seed S           HashHop's problem (default 0)\n"
            "  --n N              items per task, 1 .. 100000 (default 10), spread over the task's data\n"
            "  --max-new N        tokens generated per item, 1 .. 65536 (default 128)\n"
            "  --no-chat          raw completion even when the model has a chat template\n"
            "  --data DIR         the capability data (default ../shared/capability)\n"
            "  --json PATH        also write the JSON report (with every response)\n"
            "  --threads N        threads, 1 .. 1024 (default: all cores)\n"
            "  --python PATH      HumanEval interpreter (default /usr/bin/python3)\n"
            "  --label NAME       label of the run in the run database\n"
            "  --db PATH          record the run in this run database (default: $KLDEVAL_DB, else\n"
            "                     $XDG_DATA_HOME/kldeval/runs.sqlite, else ~/.local/share/kldeval/runs.sqlite)\n"
            "  --no-db            do not record the run\n"
            "  --html FILE        write the HTML report of this run (see kldeval report)\n"
            "  -q, --quiet        no progress lines\n"
            "The run is recorded in the run database (mode \"cap\"; see kldeval runs --help).\n");
}

static void print_side(const char *label, const json_t *a) {
    printf("  %-4s %.4f ± %.4f (%lld/%lld)", label, json_real_value(json_object_get(a, "accuracy")),
           json_real_value(json_object_get(a, "stderr")), (long long)json_integer_value(json_object_get(a, "correct")),
           (long long)json_integer_value(json_object_get(a, "n")));
}

static int cap_run(int argc, char **argv) {
    kld_cap_run_opts o = {.tasks = "all", .n = 10, .max_new = 128, .stop = &g_stop};
    const char *json_path = NULL;
    kld_kl_outputs rec = {0};
    static const char *const with_value[] = {"-m", "--model", "--arm", "--tasks", "--n", "--max-new", "--data",
                                             "--json", "--threads", "--python", "--seed", "--label", "--db",
                                             "--html", NULL};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        int64_t x;
        uint64_t u;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) return run_usage(stdout), 0;
        if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) { o.quiet = true; continue; }
        if (!strcmp(a, "--no-chat")) { o.no_chat = true; continue; }
        if (!strcmp(a, "--no-db")) { rec.no_db = true; continue; }
        if (!kld_arg_in(a, with_value)) {
            fprintf(stderr, "kldeval cap: unknown flag '%s'\n", a);
            run_usage(stderr);
            return 2;
        }
        if (!(v = kld_arg_value(argc, argv, &i))) return 2;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) o.ref_path = v;
        else if (!strcmp(a, "--arm")) o.arm_path = v;
        else if (!strcmp(a, "--tasks")) o.tasks = v;
        else if (!strcmp(a, "--data")) o.data_dir = v;
        else if (!strcmp(a, "--json")) json_path = v;
        else if (!strcmp(a, "--python")) o.python = v;
        else if (!strcmp(a, "--label")) rec.label = v;
        else if (!strcmp(a, "--db")) rec.db_path = v;
        else if (!strcmp(a, "--html")) rec.html_path = v;
        else if (!strcmp(a, "--n")) { if (!kld_arg_int(a, v, 1, 100000, &x)) return 2; o.n = (int)x; }
        else if (!strcmp(a, "--max-new")) { if (!kld_arg_int(a, v, 1, 65536, &x)) return 2; o.max_new = (int)x; }
        else if (!strcmp(a, "--threads")) { if (!kld_arg_int(a, v, 1, 1024, &x)) return 2; o.threads = (int)x; }
        else if (!strcmp(a, "--seed")) { if (!kld_arg_u64(a, v, &u)) return 2; o.seed = u; }
    }
    if (!o.ref_path) {
        fprintf(stderr, "kldeval cap: need -m MODEL (or `kldeval cap score`)\n");
        run_usage(stderr);
        return 2;
    }
    if (rec.db_path && rec.no_db) {
        fprintf(stderr, "kldeval cap: give --db or --no-db, not both\n");
        return 2;
    }
    const char *inputs[4] = {o.ref_path, o.arm_path, rec.db_path};
    if (json_path && !kld_arg_output("cap", "--json", json_path, inputs, 3)) return 2;
    inputs[3] = json_path;
    if (rec.html_path && !kld_arg_output("cap", "--html", rec.html_path, inputs, 4)) return 2;
    signal(SIGINT, on_sigint);
    json_t *rep = NULL;
    kld_error err = {0};
    double t0 = kld_now_s();
    if (kld_cap_run(&o, &rep, &err) != KLD_OK) {
        fprintf(stderr, "kldeval cap: %s\n", err.msg);
        return 1;
    }
    printf("capability run: ref %s%s%s, n %d per task, greedy, max %d new tokens\n", o.ref_path,
           o.arm_path ? ", arm " : "", o.arm_path ? o.arm_path : "", o.n, o.max_new);
    const char *k;
    json_t *t;
    json_object_foreach(json_object_get(rep, "tasks"), k, t) {
        printf("%-10s", k);
        print_side("ref", json_object_get(t, "ref"));
        if (json_object_get(t, "arm")) {
            print_side("arm", json_object_get(t, "arm"));
            json_t *p = json_object_get(t, "paired");
            printf("  diff %+.4f ± %.4f (arm only %lld, ref only %lld)", json_real_value(json_object_get(p, "diff")),
                   json_real_value(json_object_get(p, "stderr")), (long long)json_integer_value(json_object_get(p, "arm_only_right")),
                   (long long)json_integer_value(json_object_get(p, "ref_only_right")));
        }
        printf("\n");
    }
    json_t *cs = json_object_get(rep, "capability_score");
    printf("Capability_Score (unweighted mean): ref %.4f", json_real_value(json_object_get(cs, "ref")));
    if (json_object_get(cs, "arm"))
        printf(", arm %.4f, diff %+.4f", json_real_value(json_object_get(cs, "arm")), json_real_value(json_object_get(cs, "diff")));
    printf("%s\n", json_is_true(json_object_get(rep, "interrupted")) ? " (interrupted: items done so far)" : "");
    int rc = 0;
    if (json_path && json_dump_file(rep, json_path, JSON_INDENT(1) | JSON_REAL_PRECISION(17))) {
        fprintf(stderr, "kldeval cap: --json %s: cannot write\n", json_path);
        rc = 1;
    }
    /* after the report: a database that cannot be written costs nothing */
    if (!kld_record_cap_run("cap", &rec, "cap", rep, json_is_true(json_object_get(rep, "interrupted")),
                            o.threads > 0 ? o.threads : kld_default_threads(), kld_now_s() - t0))
        rc = 1;
    json_decref(rep);
    return rc;
}

int kld_cmd_cap(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "score")) return cap_score(argc - 1, argv + 1);
    return cap_run(argc, argv);
}
