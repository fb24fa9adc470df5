/* main.c — `kldeval <command> [flags]`: dispatches to one cmd_*.c. */
#include "cli/commands.h"
#include "kld.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command;

static const command commands[] = {
    {"demo", kld_cmd_demo, "the built-in demonstration (no arguments needed)"},
    {"inspect", kld_cmd_inspect, "describe a model file: format, shapes, types, tokenizer"},
    {"synth", kld_cmd_synth, "write a seeded random-weight GGUF model"},
    {"logits", kld_cmd_logits, "run the forward pass over token ids and print/write logits"},
    {"generate", kld_cmd_generate, "greedy generation from a prompt"},
    {"tokenize", kld_cmd_tokenize, "text to token ids (or pieces, or counts)"},
    {"kl", kld_cmd_kl, "teacher-forced KL divergence of an arm against a reference"},
    {"diff", kld_cmd_diff, "where the drift enters: per-layer error of an arm's hidden states against the reference"},
    {"sweep", kld_cmd_sweep, "sensitivity sweep: which tensors deserve more bits (and a policy for a budget)"},
    {"quantize", kld_cmd_quantize, "write a GGUF at another precision (llama-quantize's recipes, policies)"},
    {"imatrix", kld_cmd_imatrix, "importance matrix of a model over a corpus (llama-imatrix's format)"},
    {"dump", kld_cmd_dump, "save a model's distributions: a teacher, a candidate or a llama.cpp base file"},
    {"runs", kld_cmd_runs, "the run database: list, show, rm, export, compare recorded runs"},
    {"report", kld_cmd_report, "the HTML report of recorded runs (one self-contained file)"},
    {"merge", kld_cmd_merge, "merge the shard partials of one kl run into its exact report"},
    {"smoketest", kld_cmd_smoketest, "the quick ship check: the KL run + GSM8K-50 of an arm against a reference"},
    {"serve", kld_cmd_serve, "serve an arm over HTTP (OpenAI completions: lm-evaluation-harness, clients)"},
    {"cap", kld_cmd_cap, "capability tasks (MMLU, GSM8K, IFEval, HumanEval, BFCL): run on models, or score responses (cap score)"},
};

static void usage(FILE *f) {
    fprintf(f, "kldeval %s — how much did the model change?\n\n"
               "usage: kldeval <command> [flags]   (kldeval <command> --help for its flags)\n\n"
               "commands:\n",
            kld_version());
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
}

/* A report that could not be written (a full disk, a closed pipe) must
 * not end in exit status 0: every command's output is checked here. */
static int finish(int rc) {
    errno = 0;
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "kldeval: cannot write the standard output: %s\n",
                errno ? strerror(errno) : "write error");
        return rc ? rc : 1;
    }
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
        !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return finish(argc < 2 ? 2 : 0);
    }
    if (!strcmp(argv[1], "--version")) {
        printf("kldeval %s\n", kld_version());
        return finish(0);
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return finish(commands[i].run(argc - 1, argv + 1));
    fprintf(stderr, "kldeval: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
