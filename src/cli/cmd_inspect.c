/* cmd_inspect.c — `kldeval inspect PATH[@POLICY][+ADAPTER[:SCALE]]`: what a
 * model file holds (and what a policy and a LoRA adapter make of it); the
 * facts are the library's (eval/inspect.h), the text the report's. */
#include "cli/args.h"
#include "cli/commands.h"
#include "eval/arm.h"
#include "eval/inspect.h"
#include "report/report_inspect.h"
#include "store/dump.h"

#include <stdlib.h>
#include <string.h>

static int inspect_dump(const char *dir, bool as_json) {
    kld_dump *d = NULL;
    kld_error err = {0};
    if (kld_dump_open(dir, 0, &d, &err) != KLD_OK) {
        fprintf(stderr, "kldeval inspect: %s\n", err.msg);
        return 1;
    }
    json_t *o = kld_dump_describe(d);
    kld_dump_close(d);
    if (!o) return 1;
    if (as_json) {
        char *t = json_dumps(o, JSON_INDENT(2));
        if (t) puts(t);
        free(t);
    } else {
        kld_report_inspect_dump(stdout, o);
    }
    json_decref(o);
    return 0;
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: kldeval inspect PATH[@POLICY][+ADAPTER[:SCALE]] [flags]\n\n"
            "PATH is a .gguf file, a .safetensors file, a Hugging Face model directory\n"
            "(config.json + model.safetensors or model.safetensors.index.json) or a llama2.c\n"
            "checkpoint (model.bin, or a directory holding model.bin + tokenizer.bin), or a\n"
            "dump directory (kldeval dump: its format, model, windows, what it stores, the\n"
            "head of a hidden-state dump and the bytes a position costs).\n"
            "Prints the format and version, architecture and hyper-parameters, parameter count,\n"
            "bytes and bits per weight, a histogram of tensor types and a tokenizer summary.\n"
            "PATH@POLICY adds the policy's plan (types, bytes; nothing quantized).\n"
            "PATH[@POLICY]+ADAPTER[:SCALE] adds a LoRA adapter's facts (GGUF adapter or PEFT\n"
            "folder): its files, form, rank, alpha, scale SCALE*alpha/r, the base weights it\n"
            "targets by class and its size; a bad adapter is an error, as in kl.\n\n"
            "  --tensors      also print the tensor table (name, type, shape, bytes)\n"
            "  --meta         also print every metadata key (GGUF) / config.json / llama2.c header\n"
            "  --json         print everything as one JSON object instead of text\n"
            "  --plan         also print the engine's memory plan for one session: weights\n"
            "                 (" KLD_REPACKED_TYPES " at their size once the SIMD kernels have\n"
            "                 repacked them, the rest mmapped), KV cache, activations,\n"
            "                 scratch, logits buffer, program and tokenizer, and their total:\n"
            "                 the session's peak resident size, at most (a kl run holds two\n"
            "                 models: the sum of their totals, plus its per-position records);\n"
            "                 the exit status is 1 when the plan cannot be made\n"
            "  --lever L      session levers for --plan, e.g. kv=q4_0 (see kldeval kl --help)\n"
            "  --ctx N        context length for --plan (default: the model's training context)\n"
            "  --chunk N      prefill chunk for --plan (default: 512, or the context if smaller)\n"
            "  --threads N    threads the --plan is made for (default: all cores; inspecting\n"
            "                 itself is single-threaded)\n"
            "  -h, --help     this text\n");
}

int kld_cmd_inspect(int argc, char **argv) {
    kld_inspect_options opt = {0};
    bool as_json = false;
    const char *path = NULL, *levers = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--tensors")) opt.tensors = true;
        else if (!strcmp(a, "--meta")) opt.meta = true;
        else if (!strcmp(a, "--json")) as_json = true;
        else if (!strcmp(a, "--plan")) opt.plan = true;
        else if (!strcmp(a, "--lever")) {
            const char *v = kld_arg_value(argc, argv, &i);
            if (!v || !kld_arg_levers(&levers, v)) return 2;
        }
        else if (!strcmp(a, "--ctx") || !strcmp(a, "--chunk") || !strcmp(a, "--threads")) {
            const char *v = kld_arg_value(argc, argv, &i);
            int64_t n;
            if (!v || !kld_arg_int(a, v, 1, 1 << 24, &n)) return 2;
            if (!strcmp(a, "--ctx")) opt.ctx = n;
            else if (!strcmp(a, "--chunk")) opt.chunk = n;
            else opt.threads = (int)n;
        }
        else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "kldeval inspect: unknown flag '%s' (see --help)\n", a);
            return 2;
        } else if (path) {
            fprintf(stderr, "kldeval inspect: one PATH only ('%s' and '%s')\n", path, a);
            return 2;
        } else path = a;
    }
    if (!path) {
        usage(stderr);
        return 2;
    }
    if (!opt.plan && levers) {
        fprintf(stderr, "kldeval inspect: --lever only applies with --plan\n");
        return 2;
    }
    if (!opt.plan && (opt.ctx || opt.chunk)) {
        fprintf(stderr, "kldeval inspect: --ctx and --chunk only apply with --plan\n");
        return 2;
    }
    if (kld_inspect_is_dump(path)) return inspect_dump(path, as_json);
    kld_arm_parsed spec; /* the levers, parsed as every arm's are */
    if (levers && !kld_arg_model_spec("inspect", path, levers, &spec)) return 2;
    if (levers) opt.levers = &spec.levers;
    kld_kernels_init();
    kld_inspect in;
    kld_error err = {0};
    if (kld_inspect_model(path, &opt, &in, &err) != KLD_OK) {
        fprintf(stderr, "kldeval inspect: %s\n", err.msg);
        return 1;
    }
    /* a plan that was asked for and cannot be made is an error (a bad
     * --ctx/--chunk, an architecture the engine cannot run) */
    const json_t *plan_error = json_object_get(json_object_get(in.facts, "plan"), "error");
    if (plan_error) fprintf(stderr, "kldeval inspect: memory plan: %s\n", json_string_value(plan_error));
    const int rc = plan_error ? 1 : 0;
    if (as_json) {
        json_dumpf(in.facts, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
        fputc('\n', stdout);
    } else {
        kld_report_inspect_text(stdout, in.facts);
        if (in.policy) {
            printf("policy         %s (what MODEL@POLICY quantizes on load, and quantize writes)\n",
                   in.policy);
            kld_quant_plan_print(&in.view.plan, stdout);
        }
        const json_t *adapter = json_object_get(in.facts, "adapter");
        if (adapter) kld_report_inspect_adapter(stdout, adapter);
    }
    kld_inspect_free(&in);
    return rc;
}
