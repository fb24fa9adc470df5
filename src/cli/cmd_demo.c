/* cmd_demo.c — `kldeval demo`: the built-in demonstration. Measures arms of
 * a small real model (stories260K, shipped in data/models/) against its
 * float32 reference on short children's stories (data/demo_stories.txt):
 * weights quantized on load and a quantized KV cache, each with a one-line
 * verdict; writes the full text reports, the HTML report and a run database
 * into one folder. `--synthetic` keeps the older demonstration on a seeded
 * random-weight model (larger, so it exercises the k-quant kernels). */
#include "cli/args.h"
#include "cli/commands.h"
#include "eval/inspect.h"
#include "report/report_inspect.h"
#include "common/data_path.h"
#include "eval/kl_driver.h"
#include "report/report.h"
#include "synth/synth.h"
#include "tensor/types.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define DEMO_MODEL "models/stories260K/model.bin"
#define DEMO_CORPUS "demo_stories.txt"
/* Every story is one window; 512 is the model's training context (the
 * llama2.c header's seq_len), and no story comes near it. */
#define DEMO_CTX 512

/* The verdict on an arm, from its mean KLD(ref‖arm) in nats: the first row
 * whose bound the mean is below. Decades of KLD, one place; --help and
 * docs/commands.md print the same bands. */
static const struct {
    double below;
    const char *verdict;
} verdicts[] = {
    {1e-3, "near-lossless"},
    {1e-2, "small loss"},
    {1e-1, "noticeable loss"},
    {INFINITY, "large loss"},
};

static const char *verdict_of(double kld_mean) {
    size_t n = sizeof verdicts / sizeof verdicts[0];
    for (size_t i = 0; i + 1 < n; i++)
        if (kld_mean < verdicts[i].below) return verdicts[i].verdict;
    return verdicts[n - 1].verdict;
}

static void print_verdicts(FILE *f) {
    size_t n = sizeof verdicts / sizeof verdicts[0];
    for (size_t i = 0; i + 1 < n; i++)
        fprintf(f, "%s< %g %s", i ? ", " : "", verdicts[i].below, verdicts[i].verdict);
    fprintf(f, ", otherwise %s", verdicts[n - 1].verdict);
}

/* The arms. stories260K's ffn_down rows have 172 columns, which no 32-wide
 * block divides, and llama.cpp's q8_0 and q4_0 recipes have no fallback for
 * them (`MODEL@q8_0` alone is refused, naming ffn_down=f16), so the weight
 * arms add that selector, as llama-quantize's k-quant fallback keeps those
 * rows in f16. The heads are 8 wide, too narrow for the 32-wide KV block
 * types (kv=q8_0 and kv=q4_0 are refused), so the KV-cache arms use the
 * rotated scalar quantizer at the same bit widths. */
static const struct demo_arm {
    const char *name;
    const char *policy; /* MODEL@policy against MODEL, or */
    const char *lever;  /* self-flag: one load, the candidate session's levers */
    const char *what;
} arms[] = {
    {"q8_0", "q8_0,ffn_down=f16", NULL, "weights in q8_0 (ffn_down in f16)"},
    {"q4_0", "q4_0,ffn_down=f16", NULL, "weights in q4_0 (ffn_down in f16; the recipe's q8_0 head)"},
    {"kv=rot8", NULL, "kv=rot8", "KV cache in the 8-bit rotated scalar quantizer"},
    {"kv=rot4", NULL, "kv=rot4", "KV cache in the 4-bit rotated scalar quantizer"},
};
#define N_ARMS (sizeof arms / sizeof arms[0])

static void usage(FILE *f) {
    fprintf(f, "usage: kldeval demo [--dir DIR] [--threads N] [--synthetic]\n\n"
               "Measures arms of a small real model against its float32 reference. The model is\n"
               "stories260K (a 260K-parameter llama trained on TinyStories; llama2.c checkpoint,\n"
               "MIT, shipped with kldeval), the corpus %s (short children's stories\n"
               "written for kldeval), each story one window (--ctx %d, doc chunking). Each arm\n"
               "is scored as `kldeval kl` scores it:\n",
            DEMO_CORPUS, DEMO_CTX);
    for (size_t i = 0; i < N_ARMS; i++)
        fprintf(f, "  %-8s %s\n", arms[i].name, arms[i].what);
    fprintf(f, "(its ffn_down rows have 172 columns, kept in f16, and its heads are 8 wide, too\n"
               "narrow for kv=q8_0; see docs/commands.md). One line per arm: mean\n"
               "KLD, top-1 agreement, PPL(arm) and a verdict from the mean KLD(ref||arm) in nats:\n  ");
    print_verdicts(f);
    fprintf(f, ".\n"
               "Writes into DIR: report.txt (each arm's full `kl` report), report.html (the HTML\n"
               "report of the runs) and runs.sqlite (the runs; not your default run database:\n"
               "kldeval runs list --db DIR/runs.sqlite). Needs no download: the data files are\n"
               "found beside the binary (<prefix>/share/kldeval once installed) or in the\n"
               "source tree it was built from.\n\n"
               "  --dir DIR      the output folder (default ./kldeval-demo; created if missing)\n"
               "  --threads N    worker threads, 1 .. 1024 (default: all cores)\n"
               "  --synthetic    the older demonstration instead: synthesizes a seeded random-weight\n"
               "                 model in f16 and, from the same seed, in q4_K_M into DIR (reused\n"
               "                 when present; an unreadable cached model is synthesized again)\n"
               "                 and runs `kl --ref f16 --arm q4_K_M` on the built-in corpus (its\n"
               "                 PPL is huge: random weights; it exercises the k-quant kernels on\n"
               "                 a ~30 MB model)\n"
               "  -h, --help     this text\n");
}

/* DIR/name into buf, checked writable before any work; false (printed) otherwise. */
static bool output_path(char *buf, size_t size, const char *dir, const char *name,
                        const char *const *inputs, int n_inputs) {
    if ((size_t)snprintf(buf, size, "%s/%s", dir, name) >= size) {
        fprintf(stderr, "kldeval demo: --dir %s: path too long\n", dir);
        return false;
    }
    return kld_arg_output("demo", "--dir", buf, inputs, n_inputs);
}

/* ---- the synthetic demonstration ---- */

/* Synthesizes the demo model of the given type into path unless a readable
 * one is there already. */
static bool synth_cached(const char *path, const char *type, int threads) {
    kld_error err = {0};
    struct stat sb;
    if (stat(path, &sb) == 0) {
        /* A cached model that does not open (damaged, or left by an older
         * version) is made again rather than failing every later demo. */
        kld_source *cached;
        if (kld_source_open(path, &cached, &err) == KLD_OK) {
            kld_source_close(cached);
            return true;
        }
        fprintf(stderr, "kldeval demo: the cached model is unreadable (%s)\n", err.msg);
    }
    fprintf(stderr, "kldeval demo: synthesizing %s\n", path);
    kld_synth_options o;
    kld_synth_defaults(&o);
    o.type = type;
    o.n_threads = threads;
    /* Written beside and renamed into place, so an interrupted demo never
     * leaves a truncated model that a later run would reuse. */
    char tmp_path[4200];
    snprintf(tmp_path, sizeof tmp_path, "%s.partial", path);
    if (kld_synth_write(&o, tmp_path, &err) != KLD_OK) {
        remove(tmp_path);
        fprintf(stderr, "kldeval demo: %s\n", err.msg);
        return false;
    }
    if (rename(tmp_path, path) != 0) {
        fprintf(stderr, "kldeval demo: cannot rename %s to %s: %s\n", tmp_path, path, strerror(errno));
        remove(tmp_path);
        return false;
    }
    return true;
}

/* Prints what `kldeval inspect path` prints; false when it does not open. */
static bool describe(const char *path) {
    kld_error err = {0};
    kld_inspect in;
    kld_inspect_options opt = {0};
    if (kld_inspect_model(path, &opt, &in, &err) != KLD_OK) {
        fprintf(stderr, "kldeval demo: %s\n", err.msg);
        return false;
    }
    kld_report_inspect_text(stdout, in.facts);
    kld_inspect_free(&in);
    return true;
}

static int demo_synthetic(const char *dir, int threads) {
    char ref_path[4096], arm_path[4096], html[4096], db[4096];
    snprintf(ref_path, sizeof ref_path, "%s/ref-f16.gguf", dir);
    snprintf(arm_path, sizeof arm_path, "%s/arm-q4_K_M.gguf", dir);
    const char *inputs[4] = {ref_path, arm_path};
    if (!output_path(html, sizeof html, dir, "report.html", inputs, 2)) return 2;
    inputs[2] = html;
    if (!output_path(db, sizeof db, dir, "runs.sqlite", inputs, 3)) return 2;
    if (!synth_cached(ref_path, "f16", threads) || !synth_cached(arm_path, "q4_K_M", threads)) return 1;
    printf("== reference model ==\n");
    if (!describe(ref_path)) return 1;
    printf("\n== kldeval kl --ref %s --arm %s (built-in corpus) ==\n", ref_path, arm_path);
    fflush(stdout);
    kld_kl_config c;
    kld_kl_config_defaults(&c);
    c.ref = (kld_arm_spec){.kind = KLD_ARM_MODEL, .path = ref_path};
    c.arm = (kld_arm_spec){.kind = KLD_ARM_MODEL, .path = arm_path};
    c.n_threads = threads;
    kld_kl_outputs out = {.label = "demo --synthetic", .db_path = db, .html_path = html};
    int rc = kld_kl_main(&c, &out);
    if (rc == 0) printf("\nHTML report: %s\nrun database: %s\n", html, db);
    return rc;
}

/* ---- the demonstration on stories260K ---- */

typedef struct arm_run {
    char arm_path[4200], arm_label[4200], label[64];
    kld_kl_result res;
    kld_summary sum;
    json_t *report;
    bool have_res;
} arm_run;

/* Scores one arm; its full text report goes to txt. */
static bool run_arm(const struct demo_arm *a, const char *model, const char *corpus, int threads,
                    FILE *txt, arm_run *r) {
    kld_kl_config c;
    kld_kl_config_defaults(&c);
    c.ref = (kld_arm_spec){.kind = KLD_ARM_MODEL, .path = model};
    c.corpus_path = corpus;
    c.ctx = DEMO_CTX;
    c.n_threads = threads;
    if (a->policy) {
        snprintf(r->arm_path, sizeof r->arm_path, "%s@%s", model, a->policy);
        snprintf(r->arm_label, sizeof r->arm_label, "%s", r->arm_path);
        c.arm = (kld_arm_spec){.kind = KLD_ARM_MODEL, .path = r->arm_path};
    } else {
        snprintf(r->arm_label, sizeof r->arm_label, "%s [%s]", model, a->lever);
        c.arm = (kld_arm_spec){.kind = KLD_ARM_SELF, .levers = a->lever};
    }
    kld_error err = {0};
    if (kld_kl_run(&c, &r->res, &err) != KLD_OK) {
        fprintf(stderr, "kldeval demo: arm %s: %s\n", a->name, err.msg);
        return false;
    }
    r->have_res = true;
    if (kld_stats_finalize(r->res.stats, &r->sum, &err) != KLD_OK) {
        fprintf(stderr, "kldeval demo: arm %s: %s\n", a->name, err.msg);
        return false;
    }
    snprintf(r->label, sizeof r->label, "demo %s", a->name);
    kld_report_run run = {model, r->arm_label, corpus, r->label, r->res.config, r->res.elapsed_s,
                          r->res.ref_seconds, r->res.arm_seconds, r->res.ref_tokens,
                          r->res.arm_tokens, r->res.partial};
    fprintf(txt, "%s====== arm %s: %s ======\n", ftell(txt) > 0 ? "\n\n" : "", a->name, a->what);
    if (kld_report_text(txt, &r->sum, &run, &err) != KLD_OK) {
        fprintf(stderr, "kldeval demo: %s\n", err.msg);
        return false;
    }
    if (!(r->report = kld_report_json(&r->sum, &run))) {
        fprintf(stderr, "kldeval demo: out of memory\n");
        return false;
    }
    return true;
}

/* The size the arm changes: bits per weight, or the KV cache's bytes per token. */
static void arm_size(const struct demo_arm *a, const json_t *config, char *buf, size_t size) {
    const json_t *arm = json_object_get(config, "arm"), *ref = json_object_get(config, "ref");
    if (a->policy)
        snprintf(buf, size, "%.2f bits per weight (float32: 32)",
                 json_number_value(json_object_get(arm, "bits_per_weight")));
    else
        snprintf(buf, size, "%lld KV-cache bytes per token (float32: %lld)",
                 (long long)json_integer_value(json_object_get(arm, "kv_bytes_per_token")),
                 (long long)json_integer_value(json_object_get(ref, "kv_bytes_per_token")));
}

static void print_results(const arm_run *runs, const char *corpus) {
    const kld_summary *s0 = &runs[0].sum;
    printf("\n== %zu arms, each against the float32 reference ==\n", N_ARMS);
    printf("corpus    %s: %llu stories, %llu positions (%llu predicted tokens), --ctx %d\n", corpus,
           (unsigned long long)s0->n_docs_scored, (unsigned long long)s0->n_positions,
           (unsigned long long)s0->n_tokens, DEMO_CTX);
    printf("PPL(ref)  %.4f ± %.4f\n\n", s0->ppl_ref, s0->ppl_ref_se);
    for (size_t i = 0; i < N_ARMS; i++) {
        char size[128];
        arm_size(&arms[i], runs[i].res.config, size, sizeof size);
        printf("%-8s  %s; %s\n", arms[i].name, arms[i].what, size);
    }
    printf("\n");
    for (size_t i = 0; i < N_ARMS; i++) {
        const kld_summary *s = &runs[i].sum;
        printf("%-8s: KLD %.3e ± %.1e, top-1 %.1f %%, PPL %.4f: %s\n", arms[i].name, s->kld.mean,
               s->kld.se, 100 * s->top1_agreement, s->ppl_arm, verdict_of(s->kld.mean));
    }
    printf("\nverdict by mean KLD(ref||arm) in nats: ");
    print_verdicts(stdout);
    printf("\n");
}

static int demo_stories(const char *dir, int threads) {
    char model[4096], corpus[4096], txt_path[4096], html[4096], db[4096];
    kld_error err = {0};
    if (kld_data_path(DEMO_MODEL, model, sizeof model, &err) != KLD_OK ||
        kld_data_path(DEMO_CORPUS, corpus, sizeof corpus, &err) != KLD_OK) {
        fprintf(stderr, "kldeval demo: %s\n", err.msg);
        return 1;
    }
    const char *inputs[5] = {model, corpus};
    if (!output_path(txt_path, sizeof txt_path, dir, "report.txt", inputs, 2)) return 2;
    inputs[2] = txt_path;
    if (!output_path(html, sizeof html, dir, "report.html", inputs, 3)) return 2;
    inputs[3] = html;
    if (!output_path(db, sizeof db, dir, "runs.sqlite", inputs, 4)) return 2;

    printf("== the reference: stories260K, trained on TinyStories ==\n");
    if (!describe(model)) return 1;
    fflush(stdout);
    FILE *txt = fopen(txt_path, "w");
    if (!txt) {
        fprintf(stderr, "kldeval demo: cannot write %s: %s\n", txt_path, strerror(errno));
        return 1;
    }
    arm_run *runs = calloc(N_ARMS, sizeof *runs);
    bool ok = runs != NULL;
    if (!ok) fprintf(stderr, "kldeval demo: out of memory\n");
    for (size_t i = 0; ok && i < N_ARMS; i++) {
        fprintf(stderr, "kldeval demo: scoring arm %s (%s)\n", arms[i].name, arms[i].what);
        ok = run_arm(&arms[i], model, corpus, threads, txt, &runs[i]);
    }
    if (fclose(txt) != 0 && ok) {
        fprintf(stderr, "kldeval demo: cannot write %s: %s\n", txt_path, strerror(errno));
        ok = false;
    }
    if (ok) {
        print_results(runs, corpus);
        kld_record_item items[N_ARMS];
        for (size_t i = 0; i < N_ARMS; i++) {
            const arm_run *r = &runs[i];
            double rate = r->res.elapsed_s > 0 ? (double)r->res.arm_tokens / r->res.elapsed_s : NAN;
            items[i] = (kld_record_item){.label = r->label, .mode = r->res.mode, .report = r->report,
                                         .sum = &r->sum, .stats = r->res.stats,
                                         .wall_s = r->res.elapsed_s, .tokens_per_s = rate};
        }
        kld_kl_outputs out = {.db_path = db, .html_path = html};
        ok = kld_record_runs("demo", &out, items, N_ARMS);
        if (ok)
            printf("\nfull reports: %s\nHTML report:  %s\nrun database: %s (kldeval runs list --db %s)\n",
                   txt_path, html, db, db);
    }
    for (size_t i = 0; runs && i < N_ARMS; i++) {
        json_decref(runs[i].report);
        if (runs[i].have_res) kld_kl_result_free(&runs[i].res);
    }
    free(runs);
    return ok ? 0 : 1;
}

int kld_cmd_demo(int argc, char **argv) {
    const char *dir = "kldeval-demo";
    int threads = 0;
    bool synthetic = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--dir")) {
            if (!(dir = kld_arg_value(argc, argv, &i))) return 2;
        } else if (!strcmp(argv[i], "--threads")) {
            const char *v = kld_arg_value(argc, argv, &i);
            int64_t n;
            if (!v || !kld_arg_int("--threads", v, 1, 1024, &n)) return 2;
            threads = (int)n;
        } else if (!strcmp(argv[i], "--synthetic")) {
            synthetic = true;
        } else {
            fprintf(stderr, "kldeval demo: unknown %s '%s' (see --help)\n",
                    argv[i][0] == '-' ? "flag" : "argument", argv[i]);
            return 2;
        }
    }
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "kldeval demo: cannot create %s: %s\n", dir, strerror(errno));
        return 1;
    }
    kld_kernels_init();
    return synthetic ? demo_synthetic(dir, threads) : demo_stories(dir, threads);
}
