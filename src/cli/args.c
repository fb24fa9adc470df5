/* args.c — flag parsing shared by the subcommands: integers, id lists,
 * flag values; the pre-flight check of output paths is the library's
 * (eval/outputs.h). */
#include "cli/args.h"
#include "common/common.h"
#include "engine/engine.h"
#include "eval/arm.h"
#include "eval/outputs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool kld_arg_int(const char *flag, const char *value, int64_t lo, int64_t hi, int64_t *out) {
    char *end;
    errno = 0;
    long long v = strtoll(value, &end, 10);
    if (errno || end == value || *end || v < lo || v > hi) {
        fprintf(stderr, "kldeval: %s expects an integer in [%lld, %lld], got '%s'\n", flag,
                (long long)lo, (long long)hi, value);
        return false;
    }
    *out = v;
    return true;
}

bool kld_arg_u64(const char *flag, const char *value, uint64_t *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(value, &end, 10);
    if (errno || end == value || *end || value[0] == '-') {
        fprintf(stderr, "kldeval: %s expects a non-negative integer, got '%s'\n", flag, value);
        return false;
    }
    *out = v;
    return true;
}

const char *kld_arg_value(int argc, char **argv, int *i) {
    if (*i + 1 >= argc) {
        fprintf(stderr, "kldeval: %s needs a value\n", argv[*i]);
        return NULL;
    }
    return argv[++*i];
}

bool kld_arg_ids(const char *cmd, const char *list, kld_tok_ids *out) {
    for (const char *p = list; *p;) {
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (errno || end == p || v < 0 || v > INT32_MAX || (*end && *end != ',')) {
            fprintf(stderr, "kldeval %s: --ids: bad id list at '%s'\n", cmd, p);
            return false;
        }
        if (*end == ',' && end[1] == '\0') {
            fprintf(stderr, "kldeval %s: --ids: trailing comma in '%s'\n", cmd, list);
            return false;
        }
        int32_t id = (int32_t)v;
        if (!kld_tok_ids_append(out, &id, 1)) {
            fprintf(stderr, "kldeval %s: out of memory\n", cmd);
            return false;
        }
        p = *end ? end + 1 : end;
    }
    if (out->n == 0) fprintf(stderr, "kldeval %s: --ids: empty list\n", cmd);
    return out->n > 0;
}

bool kld_arg_in(const char *name, const char *const *list) {
    for (; *list; list++)
        if (!strcmp(name, *list)) return true;
    return false;
}

bool kld_arg_output(const char *cmd, const char *flag, const char *path,
                    const char *const *inputs, int n_inputs) {
    kld_error err = {0};
    if (kld_output_check(flag, path, inputs, n_inputs, &err) == KLD_OK) return true;
    fprintf(stderr, "kldeval %s: %s\n", cmd, err.msg);
    return false;
}

bool kld_arg_model_spec(const char *cmd, const char *path, const char *levers, kld_arm_parsed *out) {
    kld_arm_spec spec = {.kind = KLD_ARM_MODEL, .path = path, .levers = levers};
    kld_error err = {0};
    if (kld_arm_spec_parse(&spec, "model", out, &err) == KLD_OK) return true;
    fprintf(stderr, "kldeval %s: %s\n", cmd, err.msg);
    return false;
}

bool kld_arg_levers(const char **acc, const char *v) {
    if (!*acc) {
        *acc = v;
        return true;
    }
    /* lives as long as the command: flags are parsed once */
    size_t n = strlen(*acc) + strlen(v) + 2;
    char *joined = malloc(n);
    if (!joined) return false;
    snprintf(joined, n, "%s,%s", *acc, v);
    *acc = joined;
    return true;
}

bool kld_arg_kl_window_flag(const char *a, const char *v, kld_kl_config *c, bool *other) {
    *other = false;
    if (!strcmp(a, "--corpus-format")) c->corpus_format = v;
    else if (!strcmp(a, "--ids-file")) c->ids_path = v;
    else if (!strcmp(a, "--chunking")) {
        if (!strcmp(v, "doc")) c->chunking = KLD_CHUNKING_DOC;
        else if (!strcmp(v, "llamacpp")) c->chunking = KLD_CHUNKING_LLAMACPP;
        else if (!strcmp(v, "stream")) c->chunking = KLD_CHUNKING_STREAM;
        else {
            fprintf(stderr, "kldeval: --chunking expects doc, llamacpp or stream, got '%s'\n", v);
            return false;
        }
    } else if (!strcmp(a, "--ctx")) return kld_arg_int(a, v, 2, 1 << 24, &c->ctx);
    else if (!strcmp(a, "--max-docs")) return kld_arg_int(a, v, 0, INT64_MAX, &c->max_docs);
    else if (!strcmp(a, "--max-tokens")) return kld_arg_int(a, v, 0, INT64_MAX, &c->max_tokens);
    else if (!strcmp(a, "--chunks")) return kld_arg_int(a, v, 0, INT64_MAX, &c->max_chunks);
    else {
        *other = true;
        return false;
    }
    return true;
}

bool kld_arg_kl_window(const char *a, const char *v, kld_kl_config *c) {
    bool other;
    if (kld_arg_kl_window_flag(a, v, c, &other)) return true;
    if (other) fprintf(stderr, "kldeval: unknown flag '%s'\n", a);
    return false;
}
