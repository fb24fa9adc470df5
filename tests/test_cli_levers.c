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
static int run(const char *args) {
    char cmd[12288];
    snprintf(cmd, sizeof cmd, "'%s' %s >'%s' 2>&1", kldeval, args, out_path);
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

static long max_rss_children_kb(void) {
    struct rusage ru;
    getrusage(RUSAGE_CHILDREN, &ru);
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
    long before = max_rss_children_kb();
    (void)before;
    CHECK(run("kl -m " M " --lever kv=q8_0 --quiet " IDS) == 0, "self-flag run");
    long self_kb = max_rss_children_kb();
    CHECK(run("kl --ref " M " --arm " M " --quiet " IDS) == 0, "two-model run");
    long two_kb = max_rss_children_kb();
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

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_cli_levers KLDEVAL\n");
        return 2;
    }
    kldeval = argv[1];
    snprintf(out_path, sizeof out_path, "%s/cli_levers.out", kt_build_dir());
    test_errors();
    test_self_flag();
    return kt_finish();
}
