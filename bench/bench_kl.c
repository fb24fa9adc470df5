/* bench_kl.c — the cost of the KLD ruler: a lockstep run of an f16
 * reference against a q4_K_M arm (kld_kl_run), compared with the two
 * forward passes it is made of, measured alone in the same run. The
 * lockstep overhead (scoring, the second set of logits, the switching
 * between models) is lockstep / (ref alone + arm alone) - 1; the target is
 * under 5%. Default shape: TinyLlama-1.1B, 2048 tokens in chunks of 512,
 * 2 threads. Models are synthesized once and cached (minutes at 1.1B).
 *
 * Run: build-bench/bench/bench_kl [--quick] [--reps N] [--tokens N] ...
 *      (--help lists the flags). bench/run drives it. */
#include "common_bench.h"

#include "engine/engine.h"
#include "eval/kl_driver.h"
#include "synth/synth.h"

#include <errno.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define BENCH "bench_kl"

typedef struct bench_opts {
    kld_synth_options shape; /* type is set per arm */
    const char *ref_type, *arm_type;
    long long tokens, window, chunk, threads, reps, warmup; /* window 0: one window of all tokens */
    const char *cache;
    int child_fd; /* >= 0: this process is the lockstep child (see kl_once_child) */
    int argc;
    char **argv;
} bench_opts;

static void usage(FILE *f, const bench_opts *d) {
    fprintf(f,
            "usage: bench_kl [flags]\n\n"
            "Times (a) the reference forward pass alone, (b) the arm alone, (c) the lockstep KLD\n"
            "run of the pair (kld_kl_run), each --reps times, and reports c / (a + b) - 1.\n\n"
            "  --dim N --layers N --heads N --kv-heads N --ff N --vocab N   model shape\n"
            "                      (default %lld, %lld, %lld, %lld, %lld, %d: TinyLlama-1.1B)\n"
            "  --seed N            synthesis seed (default %llu)\n"
            "  --ref-type T        reference weight type (default %s)\n"
            "  --arm-type T        arm weight type (default %s)\n"
            "  --tokens N          tokens of the document (default %lld)\n"
            "  --window N          context window: the tokens are scored in windows of N, each\n"
            "                      from an empty cache (as llama-perplexity's chunks; default:\n"
            "                      one window of all tokens)\n"
            "  --chunk N           prefill chunk (default %lld)\n"
            "  --threads N         threads (default %lld)\n"
            "  --reps N            measured repetitions (default %lld)\n"
            "  --warmup N          unmeasured rounds first (default %lld)\n"
            "  --cache DIR         folder of synthesized models (default $KLD_BENCH_CACHE or %s)\n"
            "  --quick             small shape for a smoke test: dim 256, 2 layers, 4 heads,\n"
            "                      2 kv heads, ff 768, vocab 4096, 256 tokens, chunk 128\n",
            (long long)d->shape.n_embd, (long long)d->shape.n_layer, (long long)d->shape.n_head,
            (long long)d->shape.n_head_kv, (long long)d->shape.n_ff, d->shape.n_vocab,
            (unsigned long long)d->shape.seed, d->ref_type, d->arm_type, d->tokens, d->chunk,
            d->threads, d->reps, d->warmup, d->cache);
}

static void defaults(bench_opts *o) {
    memset(o, 0, sizeof *o);
    kb_shape_tinyllama(&o->shape);
    o->ref_type = "f16";
    o->arm_type = "q4_K_M";
    o->tokens = 2048;
    o->chunk = 512;
    o->threads = 2;
    o->reps = 3;
    o->warmup = 0;
    o->cache = kb_cache_dir();
    o->child_fd = -1;
}

/* Returns 0 to run, 1 for --help, 2 on a bad flag. */
static int parse_args(int argc, char **argv, bench_opts *o) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        long long v;
        int64_t *shape_field = NULL;
        long long *field = NULL, lo = 1, hi = 1 << 20;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) return 1;
        if (!strcmp(a, "--quick")) {
            kb_shape_quick(&o->shape);
            o->tokens = 256;
            o->chunk = 128;
            continue;
        }
        if (!strcmp(a, "--dim")) shape_field = &o->shape.n_embd;
        else if (!strcmp(a, "--layers")) shape_field = &o->shape.n_layer;
        else if (!strcmp(a, "--heads")) shape_field = &o->shape.n_head;
        else if (!strcmp(a, "--kv-heads")) shape_field = &o->shape.n_head_kv;
        else if (!strcmp(a, "--ff")) shape_field = &o->shape.n_ff;
        else if (!strcmp(a, "--tokens")) field = &o->tokens, lo = 2;
        else if (!strcmp(a, "--window")) field = &o->window, lo = 2;
        else if (!strcmp(a, "--chunk")) field = &o->chunk;
        else if (!strcmp(a, "--threads")) field = &o->threads, hi = 1024;
        else if (!strcmp(a, "--reps")) field = &o->reps, hi = 1000;
        else if (!strcmp(a, "--warmup")) field = &o->warmup, lo = 0, hi = 100;
        if (shape_field || field) {
            if (!kb_arg_int(argc, argv, &i, lo, hi, &v)) return 2;
            if (shape_field) *shape_field = v;
            else *field = v;
            continue;
        }
        if (!strcmp(a, "--vocab") || !strcmp(a, "--seed")) {
            bool seed = !strcmp(a, "--seed");
            /* ids are drawn from 3..n_vocab-1 (after <unk>, <s>, </s>) */
            if (!kb_arg_int(argc, argv, &i, seed ? 0 : 4, seed ? INT64_MAX : 1 << 24, &v)) return 2;
            if (!seed) o->shape.n_vocab = (int32_t)v;
            else o->shape.seed = (uint64_t)v;
            continue;
        }
        if (!strcmp(a, "--lockstep-child")) { /* internal: kl_once_child's fresh process */
            if (!kb_arg_int(argc, argv, &i, 0, 1 << 20, &v)) return 2;
            o->child_fd = (int)v;
            continue;
        }
        if (!strcmp(a, "--ref-type") || !strcmp(a, "--arm-type") || !strcmp(a, "--cache")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "bench_kl: %s: missing value\n", a);
                return 2;
            }
            const char *val = argv[++i];
            if (!strcmp(a, "--ref-type")) o->ref_type = val;
            else if (!strcmp(a, "--arm-type")) o->arm_type = val;
            else o->cache = val;
            continue;
        }
        fprintf(stderr, "bench_kl: unknown flag '%s' (see --help)\n", a);
        return 2;
    }
    return 0;
}

/* mkdir -p. */
static bool make_dirs(const char *path) {
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) return false;
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST) return false;
            if (!c) break;
            *p = c;
        }
    }
    return true;
}

/* Seeded token ids, BOS first: the timing does not depend on which ids. */
static int write_ids(const bench_opts *o, char *path, size_t path_size, int32_t **ids_out) {
    snprintf(path, path_size, "%s/ids-v%d-n%lld-s%llu.bin", o->cache, o->shape.n_vocab, o->tokens,
             (unsigned long long)o->shape.seed);
    int32_t *ids = malloc((size_t)o->tokens * sizeof *ids);
    if (!ids) return 1;
    kld_rng rng;
    kld_rng_seed(&rng, o->shape.seed ^ 0x1d5u);
    ids[0] = 1;
    for (long long i = 1; i < o->tokens; i++)
        ids[i] = 3 + (int32_t)(kld_rng_next(&rng) % (uint64_t)(o->shape.n_vocab - 3));
    FILE *f = fopen(path, "wb");
    /* int32 little-endian, as kld_corpus_load_ids reads (this is an x86 bench) */
    bool ok = f && fwrite(ids, sizeof *ids, (size_t)o->tokens, f) == (size_t)o->tokens;
    if (f && fclose(f) != 0) ok = false;
    if (!ok) {
        fprintf(stderr, "bench_kl: cannot write %s\n", path);
        free(ids);
        return 1;
    }
    *ids_out = ids;
    return 0;
}

/* One forward pass of all tokens with logits for every row, as the
 * lockstep driver does it (chunks of o->chunk from an empty cache).
 * *open_s is the model-open time, *seconds the evaluation alone. */
static int forward_once(const bench_opts *o, const char *path, const int32_t *ids, double *open_s,
                        double *seconds) {
    kld_error err = {0};
    kld_model *m = NULL;
    kld_session *s = NULL;
    float *logits = NULL;
    int rc = 1;
    double t0 = kb_now();
    if (kld_model_open(path, NULL, &m, &err) != KLD_OK) goto done;
    const long long win = o->window ? o->window : o->tokens, chunk = o->chunk < win ? o->chunk : win;
    /* the eval calls below, declared as the lockstep driver declares them (kld_plan_passes):
     * the same weight layouts, so the same engine path */
    long long passes = 0;
    for (long long w0 = 0; w0 < o->tokens; w0 += win) passes += ((w0 + win < o->tokens ? win : o->tokens - w0) + chunk - 1) / chunk;
    const kld_session_opts so = {.n_ctx = win, .max_chunk = chunk, .n_threads = (int)o->threads, .prefill_passes = passes};
    if (kld_session_create_opts(m, &so, &s, &err) != KLD_OK) goto done;
    *open_s = kb_now() - t0;
    logits = malloc((size_t)o->chunk * (size_t)kld_model_hparams(m)->n_vocab * sizeof *logits);
    if (!logits) {
        snprintf(err.msg, sizeof err.msg, "out of memory for logits");
        goto done;
    }
    t0 = kb_now();
    for (long long w0 = 0; w0 < o->tokens; w0 += win) {
        const long long w1 = w0 + win < o->tokens ? w0 + win : o->tokens;
        kld_session_reset(s);
        for (long long c0 = w0; c0 < w1; c0 += o->chunk) {
            long long n = w1 - c0 < o->chunk ? w1 - c0 : o->chunk;
            if (kld_session_eval(s, ids + c0, n, logits, &err) != KLD_OK) goto done;
        }
    }
    *seconds = kb_now() - t0;
    rc = 0;
done:
    if (rc) fprintf(stderr, "bench_kl: %s: %s\n", path, err.msg);
    free(logits);
    kld_session_free(s);
    kld_model_close(m);
    return rc;
}

typedef struct kl_sample {
    double wall_s, run_s, ref_s, arm_s;
    uint64_t positions;
    double kld_mean;
} kl_sample;

static int kl_once(const bench_opts *o, const char *ref, const char *arm, const char *ids_path,
                   kl_sample *out) {
    kld_kl_config c;
    kld_kl_config_defaults(&c);
    c.ref.kind = KLD_ARM_MODEL;
    c.ref.path = ref;
    c.arm.kind = KLD_ARM_MODEL;
    c.arm.path = arm;
    c.ids_path = ids_path;
    c.ctx = o->window ? o->window : o->tokens;
    c.chunk = o->chunk;
    c.chunking = KLD_CHUNKING_DOC;
    c.n_threads = (int)o->threads;
    kld_kl_result r;
    kld_error err = {0};
    double t0 = kb_now();
    if (kld_kl_run(&c, &r, &err) != KLD_OK) {
        fprintf(stderr, "bench_kl: kld_kl_run: %s\n", err.msg);
        return 1;
    }
    out->wall_s = kb_now() - t0;
    out->run_s = r.elapsed_s;
    out->ref_s = r.ref_seconds;
    out->arm_s = r.arm_seconds;
    kld_stats_running run;
    kld_stats_get_running(r.stats, &run);
    out->positions = run.n_positions;
    out->kld_mean = run.kld_mean;
    kld_kl_result_free(&r);
    return 0;
}

/* kl_once in a fresh process (this program again, --lockstep-child FD): its
 * peak RSS is the run's own, as a user's `kldeval kl` has it. A reset peak
 * in this process would count what the forward passes before it left in
 * the heap, and a forked child inherits all of it. */
static int kl_once_child(const bench_opts *o, kl_sample *out, uint64_t *peak) {
    int fd[2];
    if (pipe(fd) != 0) return 1;
    char fdarg[16];
    snprintf(fdarg, sizeof fdarg, "%d", fd[1]);
    char **args = calloc((size_t)o->argc + 3, sizeof *args);
    if (!args) return 1;
    for (int i = 0; i < o->argc; i++) args[i] = o->argv[i];
    args[o->argc] = "--lockstep-child";
    args[o->argc + 1] = fdarg;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) {
        close(fd[0]);
        execv("/proc/self/exe", args);
        _exit(127);
    }
    free(args);
    close(fd[1]);
    ssize_t got = read(fd[0], out, sizeof *out);
    close(fd[0]);
    int st = 0;
    struct rusage ru;
    if (wait4(pid, &st, 0, &ru) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0 || got != (ssize_t)sizeof *out)
        return 1;
    *peak = (uint64_t)ru.ru_maxrss * 1024;
    return 0;
}

static json_t *shape_json(const bench_opts *o) {
    const kld_synth_options *s = &o->shape;
    return json_pack("{s:I,s:I,s:I,s:I,s:I,s:i,s:s,s:s,s:I,s:I,s:I,s:I}", "n_embd", (json_int_t)s->n_embd,
                     "n_layer", (json_int_t)s->n_layer, "n_head", (json_int_t)s->n_head, "n_head_kv",
                     (json_int_t)s->n_head_kv, "n_ff", (json_int_t)s->n_ff, "n_vocab", s->n_vocab,
                     "ref_type", o->ref_type, "arm_type", o->arm_type, "tokens",
                     (json_int_t)o->tokens, "window", (json_int_t)(o->window ? o->window : o->tokens),
                     "chunk", (json_int_t)o->chunk, "threads",
                     (json_int_t)o->threads);
}

/* Emits one record with the shape, the peak RSS and any extra members. */
static void emit(const bench_opts *o, const char *name, const char *unit, const char *better,
                 const double *x, int n, uint64_t rss, bool rss_exact, json_t *extra) {
    kb_summary s = kb_summarize(x, n);
    json_t *e = extra ? extra : json_object();
    json_object_set_new(e, "shape", shape_json(o));
    if (rss) {
        json_object_set_new(e, "peak_rss_bytes", json_integer((json_int_t)rss));
        /* false: the kernel's peak could not be reset, so it covers earlier phases too */
        json_object_set_new(e, "peak_rss_per_phase", json_boolean(rss_exact));
    }
    kb_emit(BENCH, name, unit, better, &s, e);
}

int main(int argc, char **argv) {
    bench_opts o;
    defaults(&o);
    int pr = parse_args(argc, argv, &o);
    if (pr == 1) {
        bench_opts d;
        defaults(&d);
        usage(stdout, &d);
        return 0;
    }
    if (pr) return 2;
    o.argc = argc;
    o.argv = argv;
    if (o.tokens > o.shape.n_ctx) o.shape.n_ctx = o.tokens;
    if (!make_dirs(o.cache)) {
        fprintf(stderr, "bench_kl: cannot create %s: %s\n", o.cache, strerror(errno));
        return 1;
    }
    char ref[4096], arm[4096], ids_path[4096];
    int32_t *ids = NULL;
    if (kb_cached_model("bench_kl", o.cache, &o.shape, o.ref_type, ref, sizeof ref) ||
        kb_cached_model("bench_kl", o.cache, &o.shape, o.arm_type, arm, sizeof arm) ||
        write_ids(&o, ids_path, sizeof ids_path, &ids))
        return 1;
    if (o.child_fd >= 0) { /* the lockstep child: one run, its sample to the parent */
        kl_sample k = {0};
        int rc = kl_once(&o, ref, arm, ids_path, &k);
        if (!rc && write(o.child_fd, &k, sizeof k) != (ssize_t)sizeof k) rc = 1;
        free(ids);
        return rc;
    }

    int reps = (int)o.reps;
    double *a = calloc((size_t)reps, sizeof *a), *b = calloc((size_t)reps, sizeof *b);
    double *a_open = calloc((size_t)reps, sizeof *a), *b_open = calloc((size_t)reps, sizeof *a);
    kl_sample *c = calloc((size_t)reps, sizeof *c);
    double *tmp = calloc((size_t)reps, sizeof *tmp);
    if (!a || !b || !a_open || !b_open || !c || !tmp) return 1;
    uint64_t rss_a = 0, rss_b = 0, rss_c = 0;
    bool rss_exact = true;

    fprintf(stderr, "bench_kl: %lld tokens in windows of %lld, chunk %lld, %lld threads, %d reps (+%lld warm-up)\n",
            o.tokens, o.window ? o.window : o.tokens, o.chunk, o.threads, reps, o.warmup);
    /* a, b and c interleaved per round, so drift in the machine's load hits all three alike */
    for (int r = -(int)o.warmup; r < reps; r++) {
        double oa, ob, ta, tb;
        kl_sample kc;
        rss_exact &= kb_peak_rss_reset();
        if (forward_once(&o, ref, ids, &oa, &ta)) return 1;
        uint64_t ra = kb_peak_rss_bytes();
        rss_exact &= kb_peak_rss_reset();
        if (forward_once(&o, arm, ids, &ob, &tb)) return 1;
        uint64_t rb = kb_peak_rss_bytes();
        uint64_t rc = 0;
        if (kl_once_child(&o, &kc, &rc)) return 1;
        fprintf(stderr, "bench_kl: round %d%s: ref %.3f s, arm %.3f s, lockstep %.3f s (wall %.3f s)\n",
                r + 1, r < 0 ? " (warm-up)" : "", ta, tb, kc.run_s, kc.wall_s);
        if (r < 0) continue;
        a[r] = ta, b[r] = tb, a_open[r] = oa, b_open[r] = ob, c[r] = kc;
        if (ra > rss_a) rss_a = ra;
        if (rb > rss_b) rss_b = rb;
        if (rc > rss_c) rss_c = rc;
    }

    /* records */
    double tok = (double)o.tokens;
    emit(&o, "ref_forward", "s", "lower", a, reps, rss_a, rss_exact,
         json_pack("{s:s,s:f}", "what", "reference alone: all tokens, logits for every row",
                   "tok_per_s", tok / kb_summarize(a, reps).median));
    emit(&o, "arm_forward", "s", "lower", b, reps, rss_b, rss_exact,
         json_pack("{s:s,s:f}", "what", "arm alone: all tokens, logits for every row",
                   "tok_per_s", tok / kb_summarize(b, reps).median));
    for (int r = 0; r < reps; r++) tmp[r] = a[r] + b[r];
    emit(&o, "sum_forward", "s", "lower", tmp, reps, 0, rss_exact,
         json_pack("{s:s}", "what", "ref alone + arm alone, per round"));
    for (int r = 0; r < reps; r++) tmp[r] = c[r].run_s;
    kb_summary sc = kb_summarize(tmp, reps);
    emit(&o, "lockstep", "s", "lower", tmp, reps, rss_c, rss_exact,
         json_pack("{s:s,s:I,s:f,s:{s:s,s:s}}", "what",
                   "kld_kl_run scoring loop (elapsed_s: both arms + scoring)", "positions",
                   (json_int_t)c[0].positions, "kld_mean", c[0].kld_mean, "models", "ref", ref,
                   "arm", arm));
    for (int r = 0; r < reps; r++) tmp[r] = (double)c[r].positions / c[r].run_s;
    kb_summary spos = kb_summarize(tmp, reps);
    emit(&o, "lockstep_positions_per_s", "positions/s", "higher", tmp, reps, 0, rss_exact, NULL);
    for (int r = 0; r < reps; r++) tmp[r] = c[r].wall_s;
    kb_summary swall = kb_summarize(tmp, reps);
    emit(&o, "lockstep_wall", "s", "lower", tmp, reps, 0, rss_exact,
         json_pack("{s:s}", "what", "whole kld_kl_run call: open both models, hash files, plan, run"));
    for (int r = 0; r < reps; r++) tmp[r] = c[r].ref_s;
    kb_summary sin_ref = kb_summarize(tmp, reps);
    emit(&o, "lockstep_ref_eval", "s", "lower", tmp, reps, 0, rss_exact,
         json_pack("{s:s}", "what", "inside the lockstep: the reference's eval calls"));
    for (int r = 0; r < reps; r++) tmp[r] = c[r].arm_s;
    kb_summary sin_arm = kb_summarize(tmp, reps);
    emit(&o, "lockstep_arm_eval", "s", "lower", tmp, reps, 0, rss_exact,
         json_pack("{s:s}", "what", "inside the lockstep: the arm's eval calls"));
    for (int r = 0; r < reps; r++) tmp[r] = c[r].run_s - c[r].ref_s - c[r].arm_s;
    kb_summary sscore = kb_summarize(tmp, reps);
    emit(&o, "lockstep_scoring", "s", "lower", tmp, reps, 0, rss_exact,
         json_pack("{s:s}", "what", "lockstep time outside the two arms' eval calls (KLD statistics, bookkeeping)"));
    for (int r = 0; r < reps; r++) tmp[r] = c[r].run_s / (a[r] + b[r]) - 1;
    kb_summary sov = kb_summarize(tmp, reps);
    kb_summary sa = kb_summarize(a, reps), sb = kb_summarize(b, reps);
    double overhead = sc.median / (sa.median + sb.median) - 1;
    emit(&o, "lockstep_overhead", "ratio", "lower", tmp, reps, 0, rss_exact,
         json_pack("{s:s,s:f,s:f}", "what", "lockstep / (ref alone + arm alone) - 1, per round",
                   "of_medians", overhead, "target", 0.05));

    /* table */
    printf("\nbench_kl: %s vs %s, n_embd %lld, %lld layers, %lld/%lld heads, ff %lld, vocab %d;\n"
           "          %lld tokens in windows of %lld, chunk %lld, %lld threads, %d reps\n",
           o.ref_type, o.arm_type, (long long)o.shape.n_embd, (long long)o.shape.n_layer,
           (long long)o.shape.n_head, (long long)o.shape.n_head_kv, (long long)o.shape.n_ff,
           o.shape.n_vocab, o.tokens, o.window ? o.window : o.tokens, o.chunk, o.threads, reps);
    printf("%-28s %10s %8s %10s %10s\n", "measurement", "median", "spread", "tok/s", "peak RSS");
    char mem[32];
    snprintf(mem, sizeof mem, "%.0f MiB", (double)rss_a / 1048576.0);
    printf("%-28s %9.3fs %7.1f%% %10.1f %10s\n", "(a) ref alone", sa.median, 100 * sa.spread,
           tok / sa.median, mem);
    snprintf(mem, sizeof mem, "%.0f MiB", (double)rss_b / 1048576.0);
    printf("%-28s %9.3fs %7.1f%% %10.1f %10s\n", "(b) arm alone", sb.median, 100 * sb.spread,
           tok / sb.median, mem);
    snprintf(mem, sizeof mem, "%.0f MiB", (double)rss_c / 1048576.0);
    printf("%-28s %9.3fs %7.1f%% %10.1f %10s\n", "(c) lockstep (scoring loop)", sc.median,
           100 * sc.spread, tok / sc.median, mem);
    printf("%-28s %9.3fs %7.1f%%\n", "    of which ref eval", sin_ref.median, 100 * sin_ref.spread);
    printf("%-28s %9.3fs %7.1f%%\n", "    of which arm eval", sin_arm.median, 100 * sin_arm.spread);
    printf("%-28s %9.3fs %7.1f%%\n", "    of which the rest", sscore.median, 100 * sscore.spread);
    printf("%-28s %9.3fs %7.1f%%\n", "    whole call (open+hash)", swall.median, 100 * swall.spread);
    printf("positions scored per second: %.1f (spread %.1f%%), %llu positions\n", spos.median,
           100 * spos.spread, (unsigned long long)c[0].positions);
    printf("lockstep overhead c/(a+b)-1: %+.1f%% of medians; per round median %+.1f%% "
           "[%+.1f%%, %+.1f%%] -> %s the 5%% target\n",
           100 * overhead, 100 * sov.median, 100 * sov.min, 100 * sov.max,
           overhead < 0.05 ? "within" : "OVER");
    if (!rss_exact) printf("(peak RSS could not be reset between phases: figures are cumulative)\n");
    printf("open (not timed above): ref %.3f s, arm %.3f s (median)\n",
           kb_summarize(a_open, reps).median, kb_summarize(b_open, reps).median);

    free(a), free(b), free(a_open), free(b_open), free(c), free(tmp), free(ids);
    return 0;
}
