/* test_cli_qa.c — every subcommand used the way a careless or demanding user
 * would: unknown flags and stray arguments, values that a mode ignores,
 * output paths that are folders, sit under a file, or would overwrite an
 * input (a model that is memory-mapped, a model folder's config, the
 * corpus), ids out of range, unreadable corpora, damaged cached demo models.
 * Each case asserts the exit status and a piece of the message, and that
 * no input or partial output is left damaged. Uses the 260K-parameter
 * stories model, so the whole file runs in seconds. */
#include "testlib.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define STORIES KT_SHARED "/models/stories260K"

static const char *kldeval;

/* Runs `kldeval args redirect` with what reaches the pipe (stdout, and
 * stderr with "2>&1") in *out (caller frees); returns the exit status (-1
 * if it did not exit, e.g. a crash). */
static int run_to(const char *args, const char *redirect, char **out) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' %s %s", kldeval, args, redirect);
    return kt_run_capture(cmd, out);
}

static int run(const char *args, char **out) { return run_to(args, "2>&1", out); }

/* kldeval <args> exits with status and prints a message containing want. */
static void expect(const char *args, int status, const char *want) {
    char *out;
    int st = run(args, &out);
    CHECK(st == status && strstr(out, want) != NULL, "kldeval %s: status %d (want %d), output "
          "'%.300s' (want '%s')", args, st, status, out, want);
    free(out);
}

/* Runs `kldeval args` with its standard output on a full disk (/dev/full):
 * the status, and the standard error in *err. */
static int run_stdout_full(const char *args, char **err) {
    return run_to(args, "2>&1 >/dev/full", err);
}

static long file_size(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 ? (long)sb.st_size : -1;
}

static void copy_file(const char *from, const char *to) {
    size_t n;
    char *data = kt_read_file(from, &n);
    kt_write_file(to, data, n);
    free(data);
}

static char scratch[4][1024];

/* A path in the build folder (four rotating buffers). */
static const char *tmp(const char *name) {
    static int k;
    char *p = scratch[k++ % 4];
    snprintf(p, sizeof scratch[0], "%s/qa_%s", kt_build_dir(), name);
    return p;
}

/* Flags that take a value are not allowed to swallow the next argument or
 * to report an unknown flag as one that "needs a value". */
static void test_unknown_flags(void) {
    expect("kl --bogus", 2, "unknown flag '--bogus'");
    expect("kl --ref a --arm b stray", 2, "unknown argument 'stray'");
    expect("synth --bogus", 2, "unknown flag '--bogus'");
    expect("synth -o x.gguf stray", 2, "unknown argument 'stray'");
    expect("demo --dir", 2, "--dir needs a value");
    expect("demo --threads", 2, "--threads needs a value");
}

/* Values that are only checked, or only used, in one mode. */
static void test_kl_flag_values(void) {
    /* checked while parsing, not after both models have been loaded */
    expect("kl --ref /nonexistent.gguf --arm /nonexistent.gguf --corpus-format xml", 2,
           "--corpus-format expects auto, text or jsonl, got 'xml'");
    expect("kl --ref a --arm b --chunks 3", 2, "--chunks applies to --chunking llamacpp");
    expect("kl --ref a --arm b --chunking llamacpp --ctx 3", 2, "needs --ctx >= 4, got 3");
    expect("kl --ref a --arm b --chunking llamacpp --max-docs 2", 2,
           "--max-docs and --max-tokens apply to --chunking doc");
    char *help;
    CHECK(run("kl --help", &help) == 0 && strstr(help, "0 = all") && strstr(help, "1 .. 256"),
          "kl --help gives the 0 = all default and the --topk range");
    free(help);
}

/* Output files are checked before the run and never replace an input. */
static void test_kl_outputs(void) {
    char args[4096];
    const char *ref = tmp("ref.gguf"), *arm = tmp("arm.gguf");
    copy_file(STORIES "/f32.gguf", ref);
    copy_file(STORIES "/q8_0.gguf", arm);
    const long arm_size = file_size(arm);
    snprintf(args, sizeof args, "kl --ref '%s' --arm '%s' --quiet --json '%s'", ref, arm, arm);
    expect(args, 2, "is the same file as");
    CHECK(file_size(arm) == arm_size, "the arm model is intact (%ld bytes, was %ld)", file_size(arm),
          arm_size);

    const char *json = tmp("same.json");
    remove(json);
    snprintf(args, sizeof args, "kl --ref '%s' --arm '%s' --json '%s' --pin '%s'", ref, arm, json,
             json);
    expect(args, 2, "--pin");
    snprintf(args, sizeof args, "kl --ref '%s' --arm '%s' --json '%s' --per-position '%s/./qa_same.json'",
             ref, arm, json, kt_build_dir()); /* the same file, spelled differently */
    expect(args, 2, "is the same file as");

    /* a file the model folder is read from (config.json beside the weights) */
    const char *dir = tmp("hf");
    mkdir(dir, 0777);
    char config[1100], weights[1100];
    snprintf(config, sizeof config, "%s/config.json", dir);
    snprintf(weights, sizeof weights, "%s/model.safetensors", dir);
    kt_write_file(config, "{}", 2);
    kt_write_file(weights, "x", 1);
    snprintf(args, sizeof args, "kl --ref '%s' --arm '%s' --json '%s'", dir, dir, config);
    expect(args, 2, "is read from");
    CHECK(file_size(config) == 2, "config.json is intact");

    /* a folder that does not exist, a path under a file, a folder */
    snprintf(args, sizeof args, "kl --ref '%s' --arm '%s' --json /nonexistent-qa/x.json", ref, arm);
    expect(args, 2, "folder /nonexistent-qa");
    snprintf(args, sizeof args, "kl --ref '%s' --arm '%s' --pin '%s/x'", ref, arm, ref);
    expect(args, 2, "is not a folder");
    snprintf(args, sizeof args, "kl --ref '%s' --arm '%s' --per-position '%s'", ref, arm, dir);
    expect(args, 2, "is a folder");
}

static void test_kl_corpora(void) {
    char args[4096];
    const char *bad = tmp("bad_utf8.txt"), *empty = tmp("empty.i32");
    kt_write_file(bad, "fine\n\xff not UTF-8\n", 17);
    kt_write_file(empty, "", 0);
    snprintf(args, sizeof args, "kl --ref %s/f32.gguf --arm %s/f32.gguf --quiet --corpus '%s'",
             STORIES, STORIES, bad);
    expect(args, 1, "line 2 is not valid UTF-8");
    snprintf(args, sizeof args, "kl --ref %s/f32.gguf --arm %s/f32.gguf --quiet --ids-file '%s'",
             STORIES, STORIES, empty);
    expect(args, 1, "empty file (no ids)");
}

static void test_logits(void) {
    char args[4096];
    const char *model = tmp("logits_model.gguf"), *out = tmp("logits.f32");
    copy_file(STORIES "/f32.gguf", model);
    const long size = file_size(model);
    /* used to truncate the mapped model and die of SIGBUS */
    snprintf(args, sizeof args, "logits -m '%s' --ids 1,2 --out '%s'", model, model);
    expect(args, 2, "is the same file as");
    CHECK(file_size(model) == size, "the model is intact (%ld bytes, was %ld)", file_size(model), size);

    /* an id past the first chunk: named by its position in --ids, no --out left behind */
    remove(out);
    snprintf(args, sizeof args,
             "logits -m '%s' --ids 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,9999 "
             "--chunk 4 --out '%s'", model, out);
    expect(args, 1, "id 9999 at position 20 is outside the vocabulary [0, 512)");
    CHECK(file_size(out) == -1, "no partial --out file (%ld bytes)", file_size(out));

    snprintf(args, sizeof args, "logits -m '%s' --ids-file '%s'", model, kt_build_dir());
    expect(args, 2, "is a folder");
    snprintf(args, sizeof args, "logits -m '%s' --ids-file /nonexistent-qa.i32", model);
    expect(args, 2, "No such file");
    snprintf(args, sizeof args, "logits -m '%s' --ids 1,", model);
    expect(args, 2, "trailing comma");
    snprintf(args, sizeof args, "logits -m '%s' --ids 1,2 --out /nonexistent-qa/l.f32", model);
    expect(args, 2, "folder /nonexistent-qa");
    snprintf(args, sizeof args, "generate -m '%s' --ids 1,9999 -n 2", model);
    expect(args, 1, "id 9999 at position 1 is outside the vocabulary");
}

static void test_synth_inspect_tokenize(void) {
    char args[4096];
    snprintf(args, sizeof args, "synth -o '%s' --vocab 1", tmp("never.gguf"));
    expect(args, 1, "n_vocab 1 is out of range [512, 1000000]");
    snprintf(args, sizeof args, "synth -o '%s' --dim 16", tmp("never.gguf"));
    expect(args, 1, "n_embd 16 is out of range");
    /* the default plan chunk (512) used to exceed this model's context (128) */
    expect("inspect " STORIES "/f32.gguf --plan", 0, "chunk 128");
    expect("inspect " STORIES "/f32.gguf --plan --chunk 1000", 1, "memory plan: chunk size 1000");
    expect("inspect " STORIES "/f32.gguf --ctx 64", 2, "only apply with --plan");
    snprintf(args, sizeof args, "tokenize -m %s/f32.gguf --file '%s'", STORIES, kt_build_dir());
    expect(args, 1, "Is a directory");
}

/* A report lost to a failed write is an error, never exit status 0. */
static void test_stdout_full(void) {
    static const char *const cmds[] = {
        "inspect " STORIES "/f32.gguf", "logits -m " STORIES "/f32.gguf --ids 1,2",
        "generate -m " STORIES "/f32.gguf -p Once -n 3", "tokenize -m " STORIES "/f32.gguf --text hi",
        "kl --help"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        char *err;
        int st = run_stdout_full(cmds[i], &err);
        CHECK(st == 1 && strstr(err, "cannot write the standard output"),
              "kldeval %s >/dev/full: status %d, stderr '%.200s'", cmds[i], st, err);
        free(err);
    }
}

/* Every flag a parser accepts is in its --help. */
static void test_help(void) {
    static const struct { const char *cmd; const char *flags[24]; } h[] = {
        {"demo", {"--dir", "--threads", "--synthetic", "--help"}},
        {"inspect", {"--tensors", "--meta", "--json", "--plan", "--ctx", "--chunk", "--threads", "--help"}},
        {"synth", {"--out", "--arch", "--dim", "--layers", "--heads", "--kv-heads", "--ff", "--ctx",
                   "--vocab", "--seed", "--type", "--name", "--threads", "--help"}},
        {"logits", {"--model", "--ids", "--ids-file", "--out", "--top", "--chunk", "--threads", "--help"}},
        {"generate", {"--model", "--prompt", "--ids", "-n", "--ignore-eos", "--print-ids", "--threads",
                      "--help"}},
        {"tokenize", {"--model", "--text", "--file", "--ids", "--pieces", "--count", "--json",
                      "--no-special", "--no-parse-special", "--threads", "--help"}},
        {"kl", {"--ref", "--arm", "--corpus", "--corpus-format", "--ids-file", "--max-docs",
                "--max-tokens", "--allow-vocab-mismatch", "--chunking", "--ctx", "--chunks", "--chunk",
                "--topk", "--threads", "--json", "--pin", "--label", "--per-position", "--quiet", "--help"}},
    };
    for (size_t i = 0; i < sizeof h / sizeof h[0]; i++) {
        char args[64], *out;
        snprintf(args, sizeof args, "%s --help", h[i].cmd);
        int st = run(args, &out);
        CHECK(st == 0, "%s --help exits 0", h[i].cmd);
        for (int f = 0; h[i].flags[f]; f++)
            CHECK(strstr(out, h[i].flags[f]) != NULL, "%s --help documents %s", h[i].cmd, h[i].flags[f]);
        free(out);
    }
}

/* A cached demo model that was cut short (an interrupted first run) is
 * synthesized again instead of failing every later demo. */
static void test_demo_damaged_cache(void) {
    char dir[1100], arm[1200], args[4096];
    snprintf(dir, sizeof dir, "%s", tmp("demo"));
    mkdir(dir, 0777);
    snprintf(arm, sizeof arm, "%s/arm-q4_K_M.gguf", dir);
    kt_write_file(arm, "GGUF", 4);
    snprintf(args, sizeof args, "demo --synthetic --dir '%s' --threads 2", dir);
    expect(args, 0, "the cached model is unreadable");
    CHECK(file_size(arm) > 1000000, "the arm was synthesized again (%ld bytes)", file_size(arm));
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    kldeval = argv[1];
    test_unknown_flags();
    test_kl_flag_values();
    test_kl_outputs();
    test_kl_corpora();
    test_logits();
    test_synth_inspect_tokenize();
    test_stdout_full();
    test_help();
    test_demo_damaged_cache();
    return kt_finish();
}
