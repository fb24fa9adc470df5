/* cmd_inspect.c — `kldeval inspect PATH[@POLICY][+ADAPTER[:SCALE]]`: what a
 * model file holds (and what a policy and a LoRA adapter make of it). */
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/inspect_facts.h"
#include "engine/engine.h"
#include "quant/quant.h"
#include "store/dump.h"

#include <sys/stat.h>

#include <stdlib.h>
#include <string.h>

/* A dump directory (kldeval dump, or another engine writing docs/dump-format.md). */
static bool is_dump_dir(const char *path) {
    char m[4200];
    struct stat sb;
    snprintf(m, sizeof m, "%s/manifest.json", path);
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode) && stat(m, &sb) == 0;
}

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
        const char *key;
        json_t *v;
        json_object_foreach(o, key, v) {
            char *t = json_is_string(v) ? NULL : json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
            printf("%-34s: %s\n", key, t ? t : json_string_value(v));
            free(t);
        }
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
            "                 (mmapped; " KLD_REPACKED_TYPES " repacked by the SIMD kernels),\n"
            "                 KV cache, activations, scratch, logits buffer;\n"
            "                 the exit status is 1 when the plan cannot be made\n"
            "  --lever L      session levers for --plan, e.g. kv=q4_0 (see kldeval kl --help)\n"
            "  --ctx N        context length for --plan (default: the model's training context)\n"
            "  --chunk N      prefill chunk for --plan (default: 512, or the context if smaller)\n"
            "  --threads N    threads the --plan is made for (default: all cores; inspecting\n"
            "                 itself is single-threaded)\n"
            "  -h, --help     this text\n");
}

/* The policy's result: types, bytes, bits per weight, fallbacks. */
static json_t *policy_json(const char *policy, const kld_quant_plan *p) {
    json_t *types = json_object(), *fallbacks = json_array();
    for (size_t i = 0; i < p->n; i++) {
        const kld_quant_item *it = &p->items[i];
        char b[16];
        const char *tn = kld_type_name(it->dst_type, b);
        json_t *c = json_object_get(types, tn);
        json_object_set_new(types, tn, json_integer(c ? json_integer_value(c) + 1 : 1));
        if (it->fallback) {
            char w[16];
            json_array_append_new(fallbacks, json_pack("{s:s,s:I,s:s,s:s}", "tensor", it->name,
                                                       "columns", (json_int_t)it->t->ne[0],
                                                       "wanted", kld_type_name(it->wanted_type, w),
                                                       "type", tn));
        }
    }
    return json_pack("{s:s,s:f,s:I,s:I,s:i,s:o,s:o}", "policy", policy, "bits_per_weight",
                     kld_quant_plan_bpw(p), "bytes", (json_int_t)p->dst_bytes, "stored_bytes",
                     (json_int_t)p->src_bytes, "requantized", p->n_requant, "types", types,
                     "fallbacks", fallbacks);
}

/* The adapter bound to the base model (without the policy: the policy
 * keeps every shape, so binding checks the same), or NULL with err set. */
static json_t *adapter_json(const char *model_path, const char *adapter, kld_error *err) {
    kld_model *m = NULL;
    if (kld_model_open(model_path, NULL, &m, err) != KLD_OK) return NULL;
    json_t *j = NULL;
    kld_adapter_facts af;
    if (kld_model_attach_adapter(m, adapter, err) == KLD_OK && kld_model_adapter_facts(m, &af))
        j = inspect_adapter_json(&af);
    kld_model_close(m);
    return j;
}

int kld_cmd_inspect(int argc, char **argv) {
    inspect_options opt = {0};
    bool as_json = false;
    const char *path = NULL;
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
            if (!(opt.levers = kld_arg_value(argc, argv, &i))) return 2;
            kld_levers l;
            kld_levers_default(&l);
            kld_error e = {0};
            if (kld_levers_parse(opt.levers, &l, &e) != KLD_OK) {
                fprintf(stderr, "kldeval inspect: --lever: %s\n", e.msg);
                return 2;
            }
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
    if (!opt.plan && opt.levers) {
        fprintf(stderr, "kldeval inspect: --lever only applies with --plan\n");
        return 2;
    }
    if (!opt.plan && (opt.ctx || opt.chunk)) {
        fprintf(stderr, "kldeval inspect: --ctx and --chunk only apply with --plan\n");
        return 2;
    }
    kld_kernels_init();
    opt.path = path;
    kld_source *src;
    kld_error err = {0};
    /* MODEL[@POLICY]+ADAPTER[:SCALE]: the facts below are the left part's */
    const char *full = path, *adapter = NULL;
    char *left = NULL;
    if (kld_model_split_adapter(path, &left, &adapter, &err) != KLD_OK) {
        fprintf(stderr, "kldeval inspect: %s\n", err.msg);
        return 1;
    }
    if (left) path = left;
    /* MODEL@POLICY (the engine's rule): the source is the part before '@' */
    struct stat sb;
    const char *at = strrchr(path, '@');
    char base[4096];
    const char *src_path = path;
    if (at && at[1] && stat(path, &sb) != 0 && (size_t)(at - path) < sizeof base) {
        snprintf(base, sizeof base, "%.*s", (int)(at - path), path);
        if (stat(base, &sb) == 0) src_path = base;
    }
    if (is_dump_dir(src_path)) {
        free(left);
        return inspect_dump(src_path, as_json);
    }
    if (kld_source_open(src_path, &src, &err) != KLD_OK) {
        fprintf(stderr, "kldeval inspect: %s\n", err.msg);
        free(left);
        return 1;
    }
    json_t *adapter_facts = NULL;
    if (adapter && !(adapter_facts = adapter_json(src_path, adapter, &err))) {
        kld_error_prefix(&err, "%s", full); /* as MODEL+ADAPTER's errors read in kl */
        fprintf(stderr, "kldeval inspect: %s\n", err.msg);
        kld_source_close(src);
        free(left);
        return 1;
    }
    /* the policy's plan, without quantizing anything */
    const char *policy = src_path != path ? at + 1 : NULL;
    const kld_quant_plan *qplan = NULL;
    kld_quant_view view = {0};
    kld_hparams hp;
    if (policy) {
        if (kld_hparams_read(src, &hp, &err) != KLD_OK ||
            kld_quant_view_open(policy, src, &hp, &view, &err) != KLD_OK) {
            fprintf(stderr, "kldeval inspect: %s@%s: %s\n", src_path, policy, err.msg);
            kld_source_close(src);
            json_decref(adapter_facts);
            free(left);
            return 1;
        }
        qplan = &view.plan;
    }
    json_t *facts = inspect_facts(src, &opt);
    /* a plan that was asked for and cannot be made is an error (a bad
     * --ctx/--chunk, an architecture the engine cannot run) */
    const json_t *plan_error = json_object_get(json_object_get(facts, "plan"), "error");
    if (plan_error) fprintf(stderr, "kldeval inspect: memory plan: %s\n", json_string_value(plan_error));
    const int rc = plan_error ? 1 : 0;
    if (qplan) json_object_set_new(facts, "policy", policy_json(policy, qplan));
    if (adapter_facts) json_object_set_new(facts, "adapter", adapter_facts);
    if (as_json) {
        json_dumpf(facts, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
        fputc('\n', stdout);
    } else {
        inspect_print_text(stdout, facts);
        if (qplan) {
            printf("policy         %s (what MODEL@POLICY quantizes on load, and quantize writes)\n",
                   policy);
            kld_quant_plan_print(qplan, stdout);
        }
        if (adapter_facts) inspect_print_adapter(stdout, adapter_facts);
    }
    json_decref(facts);
    if (qplan) kld_quant_view_close(&view);
    kld_source_close(src);
    free(left);
    return rc;
}
