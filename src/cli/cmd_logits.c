/* cmd_logits.c — `kldeval logits`: run the forward pass over token ids and
 * print the top logits per position and/or write all of them as float32
 * little-endian [n_ids][n_vocab] (row t = logits after ids[0..t], the
 * layout of ../shared/oracle). */
#include "cli/args.h"
#include "eval/arm.h"
#include "cli/commands.h"
#include "engine/engine.h"
#include "tokenizer/tokenizer.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: kldeval logits -m MODEL (--ids 1,2,3 | --ids-file seq.i32) [flags]\n"
            "  -m, --model PATH   GGUF file, safetensors file/folder, or llama2.c model.bin\n"
            "  --ids LIST         comma-separated token ids\n"
            "  --ids-file PATH    int32 little-endian token ids\n"
            "  --out PATH         write float32 LE logits [n_ids][n_vocab] (removed again if\n"
            "                     the run fails; may not be the model)\n"
            "  --top K            print the K largest logits of every row, 0 .. 64\n"
            "                     (default 5 without --out, 0 with it)\n"
            "  --chunk N          prefill chunk size, 1 .. 1048576 (default: min(n_ids, 512))\n"
            "  --threads N        threads, 1 .. 1024 (default: all cores)\n"
            "  --lever L          session levers NAME=VALUE[,...] (see kldeval kl --help), e.g.\n"
            "                     kv=q8_0 (quantized KV cache), act=q8 (llama.cpp's rounding)\n"
            "  -h, --help         this text\n");
}

static bool read_ids_file(const char *path, kld_tok_ids *out) {
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "kldeval logits: --ids-file %s is a folder\n", path);
        return false;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "kldeval logits: cannot open %s: %s\n", path, strerror(errno));
        return false;
    }
    uint8_t b[4];
    bool ok = true;
    while (ok && fread(b, 1, 4, f) == 4) {
        if (out->n == out->cap) {
            size_t cap = out->cap ? out->cap * 2 : 256;
            int32_t *ids = realloc(out->ids, cap * sizeof *ids);
            if (!ids) ok = false;
            else {
                out->ids = ids;
                out->cap = cap;
            }
        }
        if (ok) out->ids[out->n++] = (int32_t)kld_load_u32(b);
    }
    long rest = ftell(f);
    if (ferror(f)) {
        fprintf(stderr, "kldeval logits: cannot read %s: %s\n", path, strerror(errno));
        ok = false;
    }
    fclose(f);
    if (ok && rest % 4 != 0) {
        fprintf(stderr, "kldeval logits: %s: size %ld is not a multiple of 4\n", path, rest);
        return false;
    }
    if (ok && out->n == 0) fprintf(stderr, "kldeval logits: %s holds no ids\n", path);
    return ok && out->n > 0;
}

/* Removes a partly written --out file; only regular files (never a device
 * such as /dev/null given as the output). */
static void remove_partial(const char *path) {
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) remove(path);
}

/* Prints the k largest entries of one row (k small: selection by scans). */
static void print_top(const kld_tokenizer *tok, const float *row, int64_t nv, int64_t k) {
    int64_t chosen[64];
    if (k > 64) k = 64;
    for (int64_t j = 0; j < k; j++) {
        int64_t best = -1;
        for (int64_t i = 0; i < nv; i++) {
            bool used = false;
            for (int64_t u = 0; u < j; u++) used |= chosen[u] == i;
            if (!used && (best < 0 || row[i] > row[best])) best = i;
        }
        chosen[j] = best;
        size_t len = 0;
        const char *piece = tok ? kld_tok_piece(tok, (int32_t)best, &len) : NULL;
        if (piece) printf("  %" PRId64 " %.5f '%.*s'", best, (double)row[best], (int)len, piece);
        else printf("  %" PRId64 " %.5f", best, (double)row[best]);
    }
    printf("\n");
}

int kld_cmd_logits(int argc, char **argv) {
    const char *model_path = NULL, *ids_list = NULL, *ids_file = NULL, *out_path = NULL;
    int64_t top = -1, chunk = 0, threads = 0;
    const char *levers_text = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) { if (!(model_path = kld_arg_value(argc, argv, &i))) return 2; }
        else if (!strcmp(a, "--ids")) { if (!(ids_list = kld_arg_value(argc, argv, &i))) return 2; }
        else if (!strcmp(a, "--ids-file")) { if (!(ids_file = kld_arg_value(argc, argv, &i))) return 2; }
        else if (!strcmp(a, "--out")) { if (!(out_path = kld_arg_value(argc, argv, &i))) return 2; }
        else if (!strcmp(a, "--top")) {
            if (!(v = kld_arg_value(argc, argv, &i)) || !kld_arg_int(a, v, 0, 64, &top)) return 2;
        } else if (!strcmp(a, "--chunk")) {
            if (!(v = kld_arg_value(argc, argv, &i)) || !kld_arg_int(a, v, 1, 1 << 20, &chunk)) return 2;
        } else if (!strcmp(a, "--lever")) {
            if (!(v = kld_arg_value(argc, argv, &i)) || !kld_arg_levers(&levers_text, v)) return 2;
        } else if (!strcmp(a, "--threads")) {
            if (!(v = kld_arg_value(argc, argv, &i)) || !kld_arg_int(a, v, 1, 1024, &threads)) return 2;
        } else {
            fprintf(stderr, "kldeval logits: unknown flag '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!model_path || (!ids_list == !ids_file)) {
        fprintf(stderr, "kldeval logits: need -m MODEL and exactly one of --ids / --ids-file\n");
        usage(stderr);
        return 2;
    }
    kld_arm_parsed spec;
    if (!kld_arg_model_spec("logits", model_path, levers_text, &spec)) return 2;
    kld_tok_ids ids = {0};
    if (ids_list ? !kld_arg_ids("logits", ids_list, &ids) : !read_ids_file(ids_file, &ids)) {
        kld_tok_ids_free(&ids);
        return 2;
    }
    const char *const inputs[] = {model_path, ids_file};
    if (out_path && !kld_arg_output("logits", "--out", out_path, inputs, 2)) {
        kld_tok_ids_free(&ids);
        return 2;
    }
    if (top < 0) top = out_path ? 0 : 5;
    const int64_t n = (int64_t)ids.n;
    if (chunk == 0) chunk = n < 512 ? n : 512;
    if (chunk > n) chunk = n;

    kld_error err = {0};
    kld_model *model = NULL;
    kld_session *s = NULL;
    kld_tokenizer *tok = NULL;
    float *logits = NULL;
    FILE *out = NULL;
    int rc = 1;
    kld_status st = kld_arm_spec_open_model(&spec, &model, &err);
    kld_session_opts so = {n, chunk, (int)threads, NULL, &spec.levers, false, 0};
    if (st == KLD_OK) st = kld_session_create_opts(model, &so, &s, &err);
    if (st != KLD_OK) goto done;
    const int64_t nv = kld_model_hparams(model)->n_vocab;
    /* Checked up front: the engine would name the offset within a chunk,
     * and only after earlier chunks had been written to --out. */
    for (int64_t i = 0; i < n; i++)
        if (ids.ids[i] < 0 || ids.ids[i] >= nv) {
            fprintf(stderr, "kldeval logits: %s: id %" PRId32 " at position %" PRId64
                    " is outside the vocabulary [0, %" PRId64 ") of %s\n",
                    ids_file ? ids_file : "--ids", ids.ids[i], i, nv, model_path);
            goto done;
        }
    if (top > 0 && kld_tok_open_source(kld_model_source(model), &tok, &err) != KLD_OK) tok = NULL;
    logits = malloc((size_t)(chunk * nv) * sizeof(float));
    if (!logits) {
        fprintf(stderr, "kldeval logits: out of memory\n");
        goto done;
    }
    if (out_path && !(out = fopen(out_path, "wb"))) {
        fprintf(stderr, "kldeval logits: cannot create %s: %s\n", out_path, strerror(errno));
        goto done;
    }
    for (int64_t i = 0; i < n; i += chunk) {
        const int64_t c = n - i < chunk ? n - i : chunk;
        if ((st = kld_session_eval(s, ids.ids + i, c, logits, &err)) != KLD_OK) goto done;
        /* float32 little-endian: the host order on every supported CPU */
        if (out && fwrite(logits, sizeof(float), (size_t)(c * nv), out) != (size_t)(c * nv)) {
            fprintf(stderr, "kldeval logits: write to %s failed: %s\n", out_path, strerror(errno));
            goto done;
        }
        for (int64_t r = 0; top > 0 && r < c; r++) {
            printf("%" PRId64 " id %" PRId32 ":", i + r, ids.ids[i + r]);
            print_top(tok, logits + r * nv, nv, top);
        }
    }
    if (out) {
        FILE *f = out;
        out = NULL;
        if (fclose(f) != 0) {
            fprintf(stderr, "kldeval logits: write to %s failed: %s\n", out_path, strerror(errno));
            remove_partial(out_path);
            goto done;
        }
    }
    rc = 0;
done:
    if (st != KLD_OK) fprintf(stderr, "kldeval logits: %s\n", err.msg);
    if (out) {
        /* a failed run leaves no truncated logits file behind */
        fclose(out);
        remove_partial(out_path);
    }
    free(logits);
    kld_tok_free(tok);
    kld_session_free(s);
    kld_model_close(model);
    kld_tok_ids_free(&ids);
    return rc;
}
