/* test_cli_levers.c — levers from the command line: self-flag `kl -m MODEL
 * --lever ...` (one weight load: smaller peak RSS than loading the model
 * twice), reference values and the decode path give KLD exactly 0, the
 * plan shows the smaller cache, and bad lever strings or flag combinations
 * fail with messages naming the token and the valid values. */
#include "testlib.h"

#include <jansson.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>

static const char *kldeval;
static char out_path[512];

/* Runs kldeval with args; stdout+stderr go to out_path. */
/* The shell command running kldeval with args, output to out_path. */
static void command(const char *args, char *cmd, size_t cap) {
    snprintf(cmd, cap, "'%s' %s >'%s' 2>&1", kldeval, args, out_path);
}

static int run(const char *args) {
    char cmd[12288];
    command(args, cmd, sizeof cmd);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static bool output_has(const char *a, const char *b) {
    size_t len;
    char *t = kt_read_file(out_path, &len);
    bool ok = strstr(t, a) && (!b || strstr(t, b));
    if (!ok) fprintf(stderr, "output was: %s\n", t);
    free(t);
    return ok;
}

static json_t *run_json(const char *args, const char *json) {
    char full[3072];
    snprintf(full, sizeof full, "%s --json '%s' --quiet", args, json);
    CHECK(run(full) == 0, "exit 0: %s", args);
    json_error_t e;
    return json_load_file(json, 0, &e);
}

#define M KT_SHARED "/models/rand-llama/f16.gguf"
#define IDS "--ids-file " KT_SHARED "/oracle/rand-llama/corpus.tokens --chunking llamacpp --ctx 64 --chunks 2 --chunk 32"

/* Runs kldeval with args; returns the run's own peak RSS in KiB (-1 when
 * it failed), whatever earlier runs held. */
static long run_peak_kb(const char *args) {
    char cmd[12288];
    command(args, cmd, sizeof cmd);
    const pid_t pid = fork();
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    int st;
    struct rusage ru;
    if (pid < 0 || wait4(pid, &st, 0, &ru) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) return -1;
    return ru.ru_maxrss;
}

static void test_self_flag(void) {
    char json[512];
    snprintf(json, sizeof json, "%s/cli_levers.json", kt_build_dir());
    static const char *const zero[] = {"-m " M " --lever kv=f32,act=f32,attention=exact,noise=none " IDS,
                                       "-m " M " --lever kernels=ref " IDS,
                                       "-m " M " --decode --prompt-len 40 " IDS,
                                       "-m " M " --decode " IDS};
    for (size_t i = 0; i < sizeof zero / sizeof zero[0]; i++) {
        char args[1536];
        snprintf(args, sizeof args, "kl %s", zero[i]);
        json_t *j = run_json(args, json);
        CHECK(j != NULL, "JSON of %s", zero[i]);
        if (!j) continue;
        const json_t *cfg = json_object_get(j, "config");
        CHECK(json_number_value(json_object_get(json_object_get(j, "kld"), "mean")) == 0.0 &&
                  json_number_value(json_object_get(j, "top1_agreement")) == 1.0,
              "%s: KLD exactly 0, top-1 exactly 1", zero[i]);
        CHECK(!strcmp(json_string_value(json_object_get(cfg, "mode")), "self-flag"), "mode self-flag");
        CHECK(json_is_true(json_object_get(json_object_get(cfg, "arm"), "shares_weights")),
              "the arm shares the reference's weights");
        /* the shared arm takes the reference's file hash once it is computed */
        const char *rs = json_string_value(json_object_get(json_object_get(cfg, "ref"), "sha256"));
        const char *as = json_string_value(json_object_get(json_object_get(cfg, "arm"), "sha256"));
        CHECK(rs && as && strlen(rs) == 64 && !strcmp(rs, as), "%s: arm sha256 %s is the reference's %s", zero[i],
              as ? as : "null", rs ? rs : "null");
        json_decref(j);
    }
    json_t *j = run_json("kl -m " M " --lever kv=q8_0 " IDS, json);
    if (j) {
        const json_t *arm = json_object_get(json_object_get(j, "config"), "arm");
        double mean = json_number_value(json_object_get(json_object_get(j, "kld"), "mean"));
        CHECK(mean > 1e-6 && mean < 1e-2, "kv=q8_0 self-flag KLD %g is small but not 0", mean);
        CHECK(!strcmp(json_string_value(json_object_get(arm, "levers")), "kv=q8_0"),
              "arm levers recorded: %s", json_string_value(json_object_get(arm, "levers")));
        json_decref(j);
    }
    /* one weight load: peak RSS below a run that loads the model twice */
    const long self_kb = run_peak_kb("kl -m " M " --lever kv=q8_0 --quiet " IDS);
    const long two_kb = run_peak_kb("kl --ref " M " --arm " M " --quiet " IDS);
    CHECK(self_kb > 0 && two_kb > 0, "self-flag and two-model runs");
    printf("peak RSS: self-flag %ld KiB, two loads %ld KiB\n", self_kb, two_kb);
    CHECK(two_kb - self_kb > 15000, "the self-flag run holds one copy of the 19 MB weights (%ld vs "
          "%ld KiB)", self_kb, two_kb);
}

static void test_errors(void) {
    CHECK(run("kl -m " M " --lever kv=q9_0 " IDS) == 2 && output_has("'q9_0'", "q8_0, q4_0"),
          "unknown KV type: exit 2, names the token and the valid values");
    CHECK(run("kl -m " M " --lever speed=fast " IDS) == 2 && output_has("'speed'", "kv, kv_k, kv_v"),
          "unknown lever name");
    CHECK(run("kl -m " M " " IDS) == 2 && output_has("--lever", "kv, kv_k"),
          "self-flag without a candidate setting");
    CHECK(run("kl -m " M " --lever kv=blk:0-7=q8_0,f16 " IDS) == 1 && output_has("blk:0-7", "blk:0-1"),
          "a layer map past the last layer");
    CHECK(run("kl -m " M " --lever act=q8 --prompt-len 4 " IDS) == 2 && output_has("--decode", NULL),
          "--prompt-len without --decode");
    CHECK(run("kl -m " KT_SHARED "/models/stories260K/f32.gguf --lever kv=q4_0 --ids-file "
              KT_SHARED "/oracle/stories260K/corpus.tokens") == 1 && output_has("head size 8", "f16"),
          "a block type the head size cannot take");
    CHECK(run("logits -m " M " --ids 1,2,3 --lever act=q4") == 2 && output_has("'q4'", "f32, bf16, f16, q8"),
          "logits --lever error");
    CHECK(run("generate -m " M " --ids 1,2 -n 2 --lever attention=fast") == 2 &&
              output_has("'fast'", "exact, online"),
          "generate --lever error");
    CHECK(run("inspect " M " --lever kv=q4_0") == 2 && output_has("--plan", NULL),
          "inspect --lever needs --plan");
    CHECK(run("inspect " M " --plan --ctx 2048 --lever kv=q4_0") == 0 &&
              output_has("kv=q4_0, 288 B per token", NULL),
          "inspect --plan shows the q4_0 cache");
    CHECK(run("generate -m " M " --ids 1,2 -n 3 --lever kv=q4_0,act=q8") == 0, "generate with levers");
}

/* `dump --lever` records the canonical levers in manifest.json, in the run
 * database (dumps and llama.cpp base files), in `kl --reference-logits`'s
 * report and JSON config; --resume refuses other levers. */
static void test_dump_levers(void) {
    char dir[512], base[512], json[512], db[512], path[600], args[3072];
    snprintf(dir, sizeof dir, "%s/cli_levers_dump", kt_build_dir());
    snprintf(base, sizeof base, "%s/cli_levers_base.kld", kt_build_dir());
    snprintf(json, sizeof json, "%s/cli_levers_dump.json", kt_build_dir());
    snprintf(db, sizeof db, "%s/cli_levers.sqlite", kt_build_dir());
    snprintf(args, sizeof args, "rm -rf '%s' '%s' '%s'", dir, base, db);
    CHECK(system(args) == 0, "clean %s", dir);
#define DUMP_ARGS "--ids-file " KT_SHARED "/oracle/rand-llama/corpus.tokens --ctx 32 --chunks 2 --top-k 16 --quiet"
    /* spelled out of canonical order: the manifest holds kld_levers_format's form */
    snprintf(args, sizeof args, "dump -m " M " --out '%s' --lever act=q8,kv=blk:1=f16,q8_0 --db '%s' "
             DUMP_ARGS, dir, db);
    CHECK(run(args) == 0 && output_has("levers: kv=blk:1=f16,q8_0,act=q8", NULL), "dump with levers");
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    json_error_t e;
    json_t *man = json_load_file(path, 0, &e);
    const char *lv = json_string_value(json_object_get(man, "levers"));
    CHECK(lv && !strcmp(lv, "kv=blk:1=f16,q8_0,act=q8"), "manifest levers: %s", lv ? lv : "(none)");
    CHECK(json_integer_value(json_object_get(man, "format_version")) == 1, "still format_version 1");
    json_decref(man);
    /* the teacher's levers in the kl report and its JSON config */
    snprintf(args, sizeof args, "kl --reference-logits '%s' --arm " KT_SHARED
             "/models/rand-llama/q8_0.gguf --no-db", dir);
    CHECK(run(args) == 0 && output_has("(levers: kv=blk:1=f16,q8_0,act=q8)", NULL),
          "the text report names the dump's levers");
    snprintf(args, sizeof args, "kl --reference-logits '%s' --arm " KT_SHARED
             "/models/rand-llama/q8_0.gguf --no-db", dir);
    json_t *j = run_json(args, json);
    const json_t *ref = json_object_get(json_object_get(j, "config"), "ref");
    lv = json_string_value(json_object_get(ref, "levers"));
    CHECK(lv && !strcmp(lv, "kv=blk:1=f16,q8_0,act=q8"), "JSON config.ref.levers: %s", lv ? lv : "(none)");
    json_decref(j);
    /* resume: an interrupted dump (manifest.json not yet written, the partial one kept) */
    snprintf(args, sizeof args, "cp '%s/manifest.json' '%s/dump.partial.json' && rm '%s/manifest.json'",
             dir, dir, dir);
    CHECK(system(args) == 0, "make the dump look interrupted");
    snprintf(args, sizeof args, "dump -m " M " --out '%s' --resume --lever kv=q8_0 --no-db " DUMP_ARGS, dir);
    CHECK(run(args) == 1 && output_has("levers: the interrupted dump was made with "
                                       "kv=blk:1=f16,q8_0,act=q8, this run with kv=q8_0", NULL),
          "resume with other levers is refused");
    snprintf(args, sizeof args, "dump -m " M " --out '%s' --resume --no-db " DUMP_ARGS, dir);
    CHECK(run(args) == 1 && output_has("this run with reference", "resume with --lever kv=blk:1=f16,q8_0,act=q8"),
          "resume without the levers is refused");
    snprintf(args, sizeof args, "dump -m " M " --out '%s' --resume --lever kv=q8_0,kv=blk:1=f16,act=q8 "
             "--no-db " DUMP_ARGS, dir);
    CHECK(run(args) == 2 && output_has("sets kv_k a second time", NULL), "a duplicated kv is refused");
    snprintf(args, sizeof args, "dump -m " M " --out '%s' --resume --lever act=q8,kv=q8_0,blk:1=f16 "
             "--no-db " DUMP_ARGS, dir);
    CHECK(run(args) == 0, "resume with the same levers in another spelling");
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    man = json_load_file(path, 0, &e);
    lv = json_string_value(json_object_get(man, "levers"));
    CHECK(lv && !strcmp(lv, "kv=blk:1=f16,q8_0,act=q8"), "resumed manifest levers: %s", lv ? lv : "(none)");
    json_decref(man);
    /* a llama.cpp base file has no manifest: the run's record keeps the levers */
    snprintf(args, sizeof args, "dump -m " M " --format llamacpp --out '%s' --lever noise=bf16 --db '%s' "
             "--ids-file " KT_SHARED "/oracle/rand-llama/corpus.tokens --ctx 32 --chunks 2 --quiet", base, db);
    CHECK(run(args) == 0, "base file with levers");
    snprintf(args, sizeof args, "runs show 2 --db '%s'", db);
    CHECK(run(args) == 0 && output_has("levers noise=bf16", NULL), "the base file's run record "
          "has its levers");
    snprintf(args, sizeof args, "runs show 2 --json --db '%s'", db);
    CHECK(run(args) == 0 && output_has("\"llamacpp-base\"", "\"levers\": \"noise=bf16\""),
          "run 2 is the base file, its report has the levers");
    snprintf(args, sizeof args, "runs show 1 --db '%s'", db);
    CHECK(run(args) == 0 && output_has("levers kv=blk:1=f16,q8_0,act=q8", NULL),
          "the dump's run record has its levers");
#undef DUMP_ARGS
}

/* Flag combinations that make no sense: each names the flags. */
static void test_bad_combinations(void) {
    static const struct {
        const char *args, *names, *also;
    } bad[] = {
        {"kl --reference-logits /nonexistent --arm-logits /nonexistent2 --decode", "--decode",
         "--arm-logits"},
        {"kl --reference-logits /nonexistent --arm-logits /nonexistent2 --lever act=q8", "--lever",
         "--arm-logits"},
        {"kl --reference-logits /nonexistent --arm " M " --ref-lever act=q8", "--ref-lever",
         "--ref/-m"},
        {"kl -m " M " --lever act=q8 --prompt-len 4 " IDS, "--prompt-len", "--decode"},
        {"kl -m " M " --lever attn_block=32 " IDS, "attn_block", "attention=online"},
        {"kl -m " M " --lever act=q8,act=f16 " IDS, "'act=f16'", "f32, bf16, f16, q8"},
        {"kl -m " M " --lever kv= " IDS, "kv: empty value", "q8_0"},
        {"dump -m " M " --out /nonexistent/x --lever kv=blk:0-1=q8_0,blk:1=f16", "overlaps", "blk:0-1"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = run(bad[i].args);
        CHECK(rc == 2 && output_has(bad[i].names, bad[i].also), "%s: exit %d (2), names '%s' and '%s'",
              bad[i].args, rc, bad[i].names, bad[i].also);
    }
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_cli_levers KLDEVAL\n");
        return 2;
    }
    kldeval = argv[1];
    snprintf(out_path, sizeof out_path, "%s/cli_levers.out", kt_build_dir());
    test_errors();
    test_bad_combinations();
    test_dump_levers();
    test_self_flag();
    return kt_finish();
}
