/* cmd_cap.c — `kldeval cap`: the capability suite. `kldeval cap -m MODEL
 * [--arm MODEL]` generates and scores the tasks on kldeval's engine;
 * `kldeval cap score` scores a JSON Lines file of responses that something
 * else generated. Both print a text report, and JSON with --json. */
#include "cap/cap.h"
#include "cap/checkpoint.h"
#include "cap/langdetect.h"
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
            "  --data DIR         the capability data (default: data/capability as shipped,\n"
            "                     found beside the binary, in its source tree or its install prefix)\n"
            "  --json PATH        also write the JSON report (every accuracy a fraction; '-' = stdout)\n"
            "  --jobs N           HumanEval programs run at once, 1 .. 64 (default 2)\n"
            "  --python PATH      HumanEval interpreter (default /usr/bin/python3)\n"
            "  --label NAME       label of the run in the run database\n"
            "  --db PATH          record the run in this run database (default: $KLDEVAL_DB, else\n"
            "                     $XDG_DATA_HOME/kldeval/runs.sqlite, else ~/.local/share/kldeval/runs.sqlite)\n"
            "  --no-db            do not record the run\n"
            "  -q, --quiet        no warnings\n"
            "  -h, --help         this text\n"
            "IFEval's language verifiers read python3-langdetect's profiles from\n"
            "$KLDEVAL_LANGDETECT_DIR, else " KLD_LANGDETECT_DIR ".\n");
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
            "  --gsm8k-mode M     chat (default: zero-shot, the model's chat template unless --no-chat)\n"
            "                     or 8shot (lm-eval-harness \"gsm8k\": 8 \"Question: ...\\nAnswer: ... #### N\"\n"
            "                     exemplars, the first 8 test problems, which are then not scored; raw\n"
            "                     completion, stops at \"Question:\")\n"
            "  --lever L          the arm's levers (same as --arm-lever): NAME=VALUE[,...] as kldeval kl\n"
            "                     takes them (kv=q8_0, act=q8, attention=online, ...); without --arm:\n"
            "                     self-flag, a second session on -m's weights (one weight load)\n"
            "  --ref-lever L      the reference's levers (default: every lever at its reference value)\n"
            "  --arm-lever L      the arm's levers\n"
            "  --shard K/N        run only shard K of N: the items i of each task (each BFCL category)\n"
            "                     with i mod N = K; needs --partial\n"
            "  --shard-mode M     mod (default) or range (the K-th of N contiguous runs of items)\n"
            "  --partial PART     write the shard's items and the hash of the run's defining inputs\n"
            "                     (models' SHA-256, policies, levers, tasks, n, seed, modes, data\n"
            "                     SHA-256) for kldeval merge PART...\n"
            "  --gate EXPR        conditions on the report, e.g. gsm8k.accuracy>=0.4,gsm8k.diff>=-0.05,\n"
            "                     capability_score>=0.3 (TASK.accuracy|ref.accuracy|arm.accuracy|diff,\n"
            "                     capability_score[.ref|.arm|.diff]; OP <= < >= >): each printed PASS/FAIL\n"
            "                     and kept in the JSON and database row; exit status 3 when any fails\n"
            "  --checkpoint FILE  keep every generated response in FILE as it is made (appended and\n"
            "                     fsynced a group of prompts at a time; FILE must not exist)\n"
            "  --resume FILE      go on from a killed run's checkpoint (same arguments): its responses\n"
            "                     are reused, the rest generated and appended; the report equals an\n"
            "                     uninterrupted run's. A checkpoint of other arguments is refused\n"
            "  --data DIR         the capability data (default: data/capability as shipped,\n"
            "                     found beside the binary, in its source tree or its install prefix)\n"
            "  --json PATH        also write the JSON report (with every response)\n"
            "  --threads N        threads, 1 .. 1024 (default: all cores)\n"
            "  --batch B          prompts generated together, 1 .. 64 (default 8, fewer when their KV\n"
            "                     caches would pass 4 GiB): one weight pass per token for all B; the\n"
            "                     responses are bit-identical for every B\n"
            "  --sampler S        the generation tasks' sampler (MMLU is scored from logits): greedy\n"
            "                     (default) or temperature=T,top_k=K,top_p=P,min_p=M,seed=N (keys left\n"
            "                     out: temperature 1, top_k 0 = off, top_p 1 = off, min_p 0 = off, seed 0);\n"
            "                     top-k, top-p, min-p filter in that order at temperature 1, then T;\n"
            "                     temperature=0 is greedy; the same seed gives the same responses on any\n"
            "                     --threads and --batch\n"
            "  --arm-sampler S    the arm's sampler (wins over --sampler); without --arm or arm levers:\n"
            "                     a self-flag arm on -m's weights that differs only in its sampler\n"
            "  --samples N        responses per generated item, 1 .. 65536 (default 1): scores are the\n"
            "                     mean accuracy over samples; HumanEval adds pass@1 and (N >= 10) pass@10\n"
            "  --thinking on|off  pass enable_thinking to the chat template (default: not passed);\n"
            "                     the <think>...</think> block is removed from responses before scoring\n"
            "                     (always: the text after the last </think>)\n"
            "  --thinking-budget N  tokens a thinking block may take, 1 .. 65536; then \"\\n</think>\\n\\n\"\n"
            "                     is forced in (counting against --max-new) and generation goes on\n"
            "  --python PATH      HumanEval interpreter (default /usr/bin/python3)\n"
            "  --label NAME       label of the run in the run database\n"
            "  --db PATH          record the run in this run database (default: $KLDEVAL_DB, else\n"
            "                     $XDG_DATA_HOME/kldeval/runs.sqlite, else ~/.local/share/kldeval/runs.sqlite)\n"
            "  --no-db            do not record the run\n"
            "  --html FILE        write the HTML report of this run (see kldeval report)\n"
            "  -q, --quiet        no progress lines\n"
            "The run is recorded in the run database (mode \"cap\"; see kldeval runs --help).\n"
            "IFEval's language verifiers read python3-langdetect's profiles from\n"
            "$KLDEVAL_LANGDETECT_DIR, else " KLD_LANGDETECT_DIR ".\n");
}

static void print_side(FILE *f, const char *label, const json_t *a) {
    /* with --samples: correct responses of n_responses */
    const json_t *n = json_object_get(a, "n_responses") ? json_object_get(a, "n_responses") : json_object_get(a, "n");
    fprintf(f, "  %-4s %.4f ± %.4f (%lld/%lld)", label, json_real_value(json_object_get(a, "accuracy")),
           json_real_value(json_object_get(a, "stderr")), (long long)json_integer_value(json_object_get(a, "correct")),
           (long long)json_integer_value(n));
}

/* HumanEval's pass@k with --samples. */
static void print_pass_at_k(FILE *f, const json_t *side) {
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(side, "pass_at_k"), k, v) fprintf(f, " pass@%s %.4f", k, json_real_value(v));
}

/* The lever, GSM8K-mode, scale-out, sampler and thinking flags: 1 taken, 0 bad (reported), -1 not one of them. */
static int parse_cap_extra(const char *a, const char *v, kld_cap_run_opts *o) {
    if (!strcmp(a, "--lever") || !strcmp(a, "--arm-lever") || !strcmp(a, "--ref-lever")) {
        if (!strcmp(a, "--ref-lever")) o->ref_levers = v; /* checked with the models (kld_cap_check_arms) */
        else o->arm_levers = v;
    } else if (!strcmp(a, "--gsm8k-mode")) {
        if (strcmp(v, "chat") && strcmp(v, "8shot"))
            return fprintf(stderr, "kldeval cap: --gsm8k-mode expects chat or 8shot, got '%s'\n", v), 0;
        o->gsm8k_8shot = !strcmp(v, "8shot");
    } else if (!strcmp(a, "--shard")) {
        kld_shard_mode m = o->shard.mode;
        if (!kld_shard_parse(v, &o->shard))
            return fprintf(stderr, "kldeval cap: --shard expects K/N with 0 <= K < N <= 1000000, got '%s'\n", v), 0;
        o->shard.mode = m;
    } else if (!strcmp(a, "--shard-mode")) {
        if (strcmp(v, "mod") && strcmp(v, "range"))
            return fprintf(stderr, "kldeval cap: --shard-mode expects mod or range, got '%s'\n", v), 0;
        o->shard.mode = !strcmp(v, "mod") ? KLD_SHARD_MOD : KLD_SHARD_RANGE;
    } else if (!strcmp(a, "--partial")) {
        o->partial_path = v;
    } else if (!strcmp(a, "--checkpoint") || !strcmp(a, "--resume")) {
        if (o->checkpoint_path)
            return fprintf(stderr, "kldeval cap: give one of --checkpoint and --resume, once\n"), 0;
        o->checkpoint_path = v;
        o->resume = !strcmp(a, "--resume");
    } else if (!strcmp(a, "--sampler") || !strcmp(a, "--arm-sampler")) {
        kld_error e = {0};
        const bool arm = !strcmp(a, "--arm-sampler");
        if (kld_cap_sampler_parse(v, arm ? &o->arm_sampler : &o->sampler, &e) != KLD_OK)
            return fprintf(stderr, "kldeval cap: %s: %s\n", a, e.msg), 0;
        o->has_arm_sampler |= arm;
    } else if (!strcmp(a, "--samples") || !strcmp(a, "--thinking-budget")) {
        int64_t x;
        if (!kld_arg_int(a, v, 1, 65536, &x)) return 0;
        if (!strcmp(a, "--samples")) o->samples = (int)x;
        else o->thinking_budget = (int)x;
    } else if (!strcmp(a, "--thinking")) {
        if (strcmp(v, "on") && strcmp(v, "off"))
            return fprintf(stderr, "kldeval cap: --thinking expects on or off, got '%s'\n", v), 0;
        o->thinking = !strcmp(v, "on") ? KLD_CAP_THINKING_ON : KLD_CAP_THINKING_OFF;
    } else {
        return -1;
    }
    return 1;
}

/* MMLU's subjects / BFCL's categories, indented under their task. */
static void print_groups(FILE *f, const json_t *groups) {
    const char *k;
    json_t *g;
    json_object_foreach((json_t *)groups, k, g) {
        fprintf(f, "  %-36s", k);
        print_side(f, "ref", json_object_get(g, "ref"));
        if (json_object_get(g, "arm")) {
            print_side(f, "arm", json_object_get(g, "arm"));
            fprintf(f, "  diff %+.4f", json_real_value(json_object_get(json_object_get(g, "paired"), "diff")));
        }
        fprintf(f, "\n");
    }
}

/* The text report of a `cap` run (or a merge of its shards). */
void kld_cap_print_report(FILE *f, const json_t *rep) {
    const json_t *cfg = json_object_get(rep, "config");
    fprintf(f, "capability run: ref %s%s%s, n %lld per task, max %lld new tokens\n",
            json_string_value(json_object_get(rep, "ref")), json_object_get(rep, "arm") ? ", arm " : "",
            json_string_value(json_object_get(rep, "arm")) ? json_string_value(json_object_get(rep, "arm")) : "",
            (long long)json_integer_value(json_object_get(rep, "n")),
            (long long)json_integer_value(json_object_get(rep, "max_new")));
    /* which sampler produced each side's scores (older reports: greedy) */
    const char *rs = json_string_value(json_object_get(json_object_get(cfg, "ref"), "sampler"));
    const char *as = json_string_value(json_object_get(json_object_get(cfg, "arm"), "sampler"));
    const json_int_t ns = json_integer_value(json_object_get(cfg, "samples"));
    const char *th = json_string_value(json_object_get(cfg, "thinking"));
    const json_int_t tb = json_integer_value(json_object_get(cfg, "thinking_budget"));
    fprintf(f, "sampler: ref %s", rs ? rs : "greedy");
    if (json_is_object(json_object_get(cfg, "arm"))) fprintf(f, ", arm %s", as ? as : "greedy");
    fprintf(f, "; %lld sample%s per item; thinking %s", (long long)(ns > 1 ? ns : 1), ns > 1 ? "s" : "",
            th ? th : "default");
    if (tb > 0) fprintf(f, ", budget %lld tokens", (long long)tb);
    fprintf(f, "\n");
    fprintf(f, "levers: ref %s", json_string_value(json_object_get(json_object_get(cfg, "ref"), "levers")));
    if (json_is_object(json_object_get(cfg, "arm")))
        fprintf(f, ", arm %s%s", json_string_value(json_object_get(json_object_get(cfg, "arm"), "levers")),
                json_is_true(json_object_get(json_object_get(cfg, "arm"), "shares_weights"))
                    ? " (self-flag: the reference's weights)" : "");
    const char *gm = json_string_value(json_object_get(cfg, "gsm8k_mode"));
    fprintf(f, "; GSM8K %s\n", gm && !strcmp(gm, "8shot") ? "8-shot completion" : "zero-shot");
    const char *k;
    json_t *t;
    json_object_foreach(json_object_get(rep, "tasks"), k, t) {
        fprintf(f, "%-10s", k);
        print_side(f, "ref", json_object_get(t, "ref"));
        print_pass_at_k(f, json_object_get(t, "ref"));
        if (json_object_get(t, "arm")) {
            print_side(f, "arm", json_object_get(t, "arm"));
            print_pass_at_k(f, json_object_get(t, "arm"));
            json_t *p = json_object_get(t, "paired");
            /* flips: items the arm gets right and the reference wrong, and the other way */
            fprintf(f, "  diff %+.4f ± %.4f (flips wrong→right %lld, right→wrong %lld", json_real_value(json_object_get(p, "diff")),
                    json_real_value(json_object_get(p, "stderr")), (long long)json_integer_value(json_object_get(p, "arm_only_right")),
                    (long long)json_integer_value(json_object_get(p, "ref_only_right")));
            const json_t *mp = json_object_get(p, "mcnemar_p"); /* absent in reports of older versions */
            if (mp) fprintf(f, "; McNemar p = %.3g", json_real_value(mp));
            fprintf(f, ")");
        }
        fprintf(f, "\n");
        if (json_object_get(t, "subjects")) print_groups(f, json_object_get(t, "subjects"));
        if (json_object_get(t, "categories")) print_groups(f, json_object_get(t, "categories"));
    }
    json_t *cs = json_object_get(rep, "capability_score");
    fprintf(f, "Capability_Score (unweighted mean): ref %.4f", json_real_value(json_object_get(cs, "ref")));
    if (json_object_get(cs, "arm"))
        fprintf(f, ", arm %.4f, diff %+.4f", json_real_value(json_object_get(cs, "arm")), json_real_value(json_object_get(cs, "diff")));
    fprintf(f, "%s\n", json_is_true(json_object_get(rep, "interrupted")) ? " (interrupted: items done so far)" : "");
}

static int cap_run_gated(int argc, char **argv, kld_gates *gates);

static int cap_run(int argc, char **argv) {
    kld_gates gates = {0};
    int rc = cap_run_gated(argc, argv, &gates);
    kld_gates_free(&gates);
    return rc;
}

/* gates: --gate's conditions (owned by the caller, freed on every path) */
static int cap_run_gated(int argc, char **argv, kld_gates *gates) {
    kld_cap_run_opts o = {.tasks = "all", .n = 10, .max_new = 128, .stop = &g_stop};
    const char *json_path = NULL;
    kld_kl_outputs rec = {0};
    static const char *const with_value[] = {"-m", "--model", "--arm", "--tasks", "--n", "--max-new", "--data",
                                             "--json", "--threads", "--python", "--seed", "--label", "--db",
                                             "--html", "--lever", "--ref-lever", "--arm-lever", "--gsm8k-mode",
                                             "--shard", "--shard-mode", "--partial", "--batch", "--sampler",
                                             "--arm-sampler", "--samples", "--thinking", "--thinking-budget",
                                             "--checkpoint", "--resume", "--gate", NULL};
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
        int extra = parse_cap_extra(a, v, &o);
        if (extra == 0) return 2;
        if (extra == 1) continue;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) o.ref_path = v;
        else if (!strcmp(a, "--arm")) o.arm_path = v;
        else if (!strcmp(a, "--tasks")) o.tasks = v;
        else if (!strcmp(a, "--data")) o.data_dir = v;
        else if (!strcmp(a, "--json")) json_path = v;
        else if (!strcmp(a, "--gate")) {
            kld_error e = {0};
            kld_gates_free(gates);
            if (kld_gates_parse_cap(v, gates, &e) != KLD_OK) {
                fprintf(stderr, "kldeval cap: %s\n", e.msg);
                return 2;
            }
        }
        else if (!strcmp(a, "--python")) o.python = v;
        else if (!strcmp(a, "--label")) rec.label = v;
        else if (!strcmp(a, "--db")) rec.db_path = v;
        else if (!strcmp(a, "--html")) rec.html_path = v;
        else if (!strcmp(a, "--n")) { if (!kld_arg_int(a, v, 1, 100000, &x)) return 2; o.n = (int)x; }
        else if (!strcmp(a, "--max-new")) { if (!kld_arg_int(a, v, 1, 65536, &x)) return 2; o.max_new = (int)x; }
        else if (!strcmp(a, "--threads")) { if (!kld_arg_int(a, v, 1, 1024, &x)) return 2; o.threads = (int)x; }
        else if (!strcmp(a, "--batch")) { if (!kld_arg_int(a, v, 1, 64, &x)) return 2; o.batch = (int)x; }
        else if (!strcmp(a, "--seed")) { if (!kld_arg_u64(a, v, &u)) return 2; o.seed = u; }
    }
    rec.gates = *gates; /* borrowed */
    if (!o.ref_path) {
        fprintf(stderr, "kldeval cap: need -m MODEL (or `kldeval cap score`)\n");
        run_usage(stderr);
        return 2;
    }
    if (rec.db_path && rec.no_db) {
        fprintf(stderr, "kldeval cap: give --db or --no-db, not both\n");
        return 2;
    }
    kld_error check = {0}; /* the arms' levers now, not after the models have loaded */
    if (kld_cap_check_arms(&o, &check) != KLD_OK) {
        fprintf(stderr, "kldeval cap: %s\n", check.msg);
        return 2;
    }
    if (o.shard.n && !o.partial_path) {
        fprintf(stderr, "kldeval cap: --shard needs --partial PART (the shard's items, for kldeval merge)\n");
        return 2;
    }
    const char *inputs[5] = {o.ref_path, o.arm_path, rec.db_path};
    if (json_path && !kld_arg_output("cap", "--json", json_path, inputs, 3)) return 2;
    inputs[3] = json_path;
    if (rec.html_path && !kld_arg_output("cap", "--html", rec.html_path, inputs, 4)) return 2;
    inputs[4] = rec.html_path;
    if (o.partial_path && !kld_arg_output("cap", "--partial", o.partial_path, inputs, 5)) return 2;
    if (o.checkpoint_path && kld_cap_ckpt_check(o.checkpoint_path, o.resume, &check) != KLD_OK) {
        fprintf(stderr, "kldeval cap: %s %s\n", o.resume ? "--resume" : "--checkpoint", check.msg);
        return 2;
    }
    if (o.checkpoint_path && !o.resume && !kld_arg_output("cap", "--checkpoint", o.checkpoint_path, inputs, 5))
        return 2;
    signal(SIGINT, on_sigint);
    json_t *rep = NULL;
    kld_error err = {0};
    double t0 = kld_now_s();
    if (kld_cap_run(&o, &rep, &err) != KLD_OK) {
        fprintf(stderr, "kldeval cap: %s\n", err.msg);
        return 1;
    }
    kld_cap_print_report(stdout, rep);
    bool gates_pass = true;
    if (kld_gates_judge(&rec.gates, rep, json_is_true(json_object_get(rep, "interrupted")), stdout, &gates_pass))
        gates_pass = false;
    if (o.shard.n)
        printf("shard %u/%u (%s): this shard's items only; wrote %s\n", o.shard.k, o.shard.n,
               kld_shard_mode_name(o.shard.mode), o.partial_path);
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
    return rc ? rc : gates_pass ? 0 : KLD_EXIT_GATE_FAILED;
}

int kld_cmd_cap(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "score")) return cap_score(argc - 1, argv + 1);
    return cap_run(argc, argv);
}
