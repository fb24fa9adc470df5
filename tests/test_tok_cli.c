/* test_tok_cli.c — `kldeval tokenize` end to end (the binary's path is
 * argv[1]): --file output equals the reference .ids and .pieces files line
 * for line, --text encodes one string with its newlines, and the flags
 * --count, --json, --no-special, --no-parse-special and bad input behave. */
#include "testlib.h"

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static const char *exe;

/* Runs `exe tokenize ARGS`, returning its stdout (malloc'd) and exit code. */
static char *run(const char *args, int *rc, size_t *n) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' tokenize %s 2>/dev/null", exe, args);
    FILE *p = popen(cmd, "r");
    size_t cap = 1 << 16, len = 0;
    char *out = malloc(cap);
    size_t r;
    while (p && (r = fread(out + len, 1, cap - len, p)) > 0) {
        len += r;
        if (len == cap) out = realloc(out, cap *= 2);
    }
    int st = p ? pclose(p) : -1;
    *rc = st == -1 ? -1 : WEXITSTATUS(st);
    out[len] = '\0';
    if (n) *n = len;
    return out;
}

static void same_as_file(const char *args, const char *ref) {
    int rc;
    size_t n, rn;
    char *out = run(args, &rc, &n);
    char *want = kt_read_file(ref, &rn);
    size_t i = 0;
    while (i < n && i < rn && out[i] == want[i]) i++;
    CHECK(rc == 0 && n == rn && i == n,
          "tokenize %s: exit %d, %zu bytes vs %zu of %s, first difference at byte %zu", args, rc, n,
          rn, ref, i);
    free(out);
    free(want);
}

static void expect_output(const char *args, int want_rc, const char *want) {
    int rc;
    char *out = run(args, &rc, NULL);
    CHECK(rc == want_rc && (!want || strcmp(out, want) == 0),
          "tokenize %s: exit %d, output '%s', want %d '%s'", args, rc, out, want_rc,
          want ? want : "");
    free(out);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_tok_cli PATH_TO_KLDEVAL\n");
        return 2;
    }
    exe = argv[1];
#define T "../shared/tokenizers"
    same_as_file("-m " T "/qwen3/tokenizer.json --file " T "/stress.txt --pieces --json",
                 T "/qwen3/stress.pieces");
    same_as_file("-m " T "/llama2/tokenizer.json --file " T "/stress.txt --pieces --json",
                 T "/llama2/stress.pieces");
    same_as_file("-m " T "/llama3/tokenizer.json --file " T "/stress.txt --ids --threads 2",
                 T "/llama3/stress.ids");
    same_as_file("-m " T "/gpt2/tokenizer.json --file ../shared/corpus/licenses.txt",
                 T "/gpt2/corpus.ids");
    expect_output("-m " T "/llama2/tokenizer.json --text 'Hello world'", 0, "1 15043 3186\n");
    expect_output("-m " T "/llama2/tokenizer.json --text 'Hello world' --no-special --json", 0,
                  "[15043,3186]\n");
    expect_output("-m " T "/llama2/tokenizer.json --text 'Hello world' --count --json", 0, "3\n");
    expect_output("-m " T "/llama2/tokenizer.json --text '<s>Hello</s>'", 0, "1 1 15043 2\n");
    expect_output("-m " T "/llama2/tokenizer.json --text '<s>' --no-parse-special --pieces", 0,
                  "<s> \xE2\x96\x81< s >\n");
    expect_output("-m " T "/llama2/tokenizer.json --text \"$(printf 'a\\nb')\" --pieces", 0,
                  "<s> \xE2\x96\x81"
                  "a <0x0A> b\n");
    expect_output(
        "-m ../shared/models/aidreams260K/tokenizer.bin --text 'Once upon a time,' --no-special", 0,
        "429 491 433 295 429 444 445 265 262 263 342 430 446\n");
    expect_output("-m " T "/llama2/tokenizer.json --text \"$(printf 'a\\377')\"", 1, "");
    expect_output("-m " T "/llama2/tokenizer.json", 2, "");
    expect_output("--text x", 2, "");
    expect_output("-m ../shared/no-such-file --text x", 1, "");
    expect_output("-m " T "/llama2/tokenizer.json --text x --bogus", 2, "");
    expect_output("--help", 0, NULL);
    return kt_finish();
}
