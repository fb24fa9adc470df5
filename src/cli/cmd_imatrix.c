/* cmd_imatrix.c — `kldeval imatrix -m MODEL --corpus FILE --ctx N
 * [--chunks N] -o FILE`: llama-imatrix's importance matrix (its file
 * format), from the corpus read as llama-imatrix reads -f (the whole file,
 * one final '\n' dropped, BOS added, special tokens not parsed), or a JSONL
 * corpus read as kl and dump read it (text and chat "messages" lines, each
 * document tokenized on its own, concatenated). */
#include "cli/args.h"
#include "eval/arm.h"
#include "cli/commands.h"
#include "engine/engine.h"
#include "eval/plan.h"
#include "quant/quant.h"
#include "tokenizer/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f, "usage: kldeval imatrix -m MODEL (--corpus FILE | --ids-file FILE) --ctx N "
               "[--corpus-format F] [--chunks N] [--llamacpp | --lever L] -o FILE\n\n"
               "  -m, --model PATH   the model (MODEL@POLICY too)\n"
               "  --corpus FILE      text, tokenized whole as llama-imatrix -f does\n"
               "  --corpus-format F  auto (default: .jsonl names are JSONL), text (the file whole), or\n"
               "                     jsonl: {\"text\": …} and {\"messages\": [{role, content}…]} lines (the\n"
               "                     latter rendered with the model's chat template), as kl and dump read them\n"
               "  --ids-file FILE    int32 little-endian token ids instead (BOS included)\n"
               "  --ctx N            window length, 16 .. 1048576 (llama-imatrix -c)\n"
               "  --chunks N         at most N windows (default: all; llama-imatrix --chunks)\n"
               "  -o, --out FILE     the imatrix to write (llama-imatrix's format)\n"
               "  --llamacpp         llama.cpp's numerics: the levers kv=f16,act=q8 (llama-imatrix's\n"
               "                     f16 KV cache; matmul inputs rounded as ggml-cpu rounds them);\n"
               "                     its imatrix then matches llama-imatrix's more closely\n"
               "  --lever L          session levers NAME=VALUE[,...] (see kldeval kl --help); the\n"
               "                     sums are of each matmul's input before act= rounding\n"
               "  --threads N        threads, 1 .. 1024 (default: all cores)\n"
               "  -q, --quiet        no progress line\n");
}

static void progress(void *ctx, int64_t done, int64_t total) {
    (void)ctx;
    fprintf(stderr, "\rimatrix: %lld/%lld windows", (long long)done, (long long)total);
    if (done == total) fprintf(stderr, "\n");
}

static bool read_all(const char *path, char **buf, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    size_t cap = 1 << 16, n = 0, got;
    char *b = malloc(cap);
    while (b && (got = fread(b + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            char *nb = realloc(b, cap *= 2);
            if (!nb) free(b);
            b = nb;
        }
    }
    bool ok = b && !ferror(f);
    fclose(f);
    if (!ok) {
        free(b);
        return false;
    }
    *buf = b;
    *len = n;
    return true;
}

int kld_cmd_imatrix(int argc, char **argv) {
    const char *model_path = NULL, *corpus = NULL, *ids_file = NULL, *out = NULL, *format = "auto";
    int64_t ctx = 0, chunks = 0, threads = 0;
    bool quiet = false;
    const char *levers_text = NULL;
    static const char *const with_value[] = {"-m", "--model", "--corpus", "--ids-file", "--ctx",
                                             "--chunks", "-o", "--out", "--threads", "--lever",
                                             "--corpus-format", NULL};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            quiet = true;
        } else if (!strcmp(a, "--llamacpp")) {
            if (!kld_arg_levers(&levers_text, KLD_IMATRIX_LLAMACPP_LEVERS)) return 2;
        } else if (kld_arg_in(a, with_value)) {
            const char *v = kld_arg_value(argc, argv, &i);
            if (!v) return 2;
            if (!strcmp(a, "-m") || !strcmp(a, "--model")) model_path = v;
            else if (!strcmp(a, "--corpus")) corpus = v;
            else if (!strcmp(a, "--ids-file")) ids_file = v;
            else if (!strcmp(a, "--corpus-format")) {
                if (strcmp(v, "auto") && strcmp(v, "text") && strcmp(v, "jsonl")) {
                    fprintf(stderr, "kldeval imatrix: --corpus-format expects auto, text or jsonl, got '%s'\n", v);
                    return 2;
                }
                format = v;
            }
            else if (!strcmp(a, "--lever")) { if (!kld_arg_levers(&levers_text, v)) return 2; }
            else if (!strcmp(a, "-o") || !strcmp(a, "--out")) out = v;
            else if (!strcmp(a, "--ctx")) { if (!kld_arg_int(a, v, 16, 1 << 20, &ctx)) return 2; }
            else if (!strcmp(a, "--chunks")) { if (!kld_arg_int(a, v, 1, 1 << 30, &chunks)) return 2; }
            else if (!kld_arg_int(a, v, 1, 1024, &threads)) return 2;
        } else {
            fprintf(stderr, "kldeval imatrix: unknown argument '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!model_path || !out || !ctx || !!corpus == !!ids_file) {
        usage(stderr);
        return 2;
    }
    kld_arm_parsed spec;
    if (!kld_arg_model_spec("imatrix", model_path, levers_text, &spec)) return 2;
    const char *inputs[] = {model_path, corpus, ids_file};
    if (!kld_arg_output("imatrix", "-o", out, inputs, 3)) return 2;
    kld_kernels_init();
    kld_error err = {0};
    kld_model *m = NULL;
    kld_tokenizer *tok = NULL;
    kld_tok_ids ids = {0};
    kld_imatrix *im = NULL;
    char *text = NULL;
    size_t len = 0;
    kld_corpus *jc = NULL;
    size_t cn = corpus ? strlen(corpus) : 0;
    bool jsonl = corpus && (!strcmp(format, "jsonl") ||
                            (!strcmp(format, "auto") && cn >= 6 && !strcmp(corpus + cn - 6, ".jsonl")));
    kld_status st = kld_arm_spec_open_model(&spec, &m, &err);
    if (!st && jsonl) {
        st = kld_corpus_load_text(corpus, "jsonl", &jc, &err);
        if (!st) st = kld_tok_open_source(kld_model_source(m), &tok, &err);
        if (!st) st = kld_corpus_chat_with(jc, false, kld_model_source(m), tok, &err);
        if (!st) st = kld_corpus_encode(jc, tok, &ids, &err);
        if (!st && !quiet)
            fprintf(stderr, "imatrix: %s: %zu documents (%zu text, %zu messages), %zu tokens\n", corpus,
                    jc->n_docs, jc->n_text_docs, jc->n_chat_docs, ids.n);
    } else if (!st && corpus) {
        if (!read_all(corpus, &text, &len)) {
            fprintf(stderr, "kldeval imatrix: cannot read %s\n", corpus);
            kld_model_close(m);
            return 1;
        }
        if (len && text[len - 1] == '\n') len--;
        st = kld_tok_open_source(kld_model_source(m), &tok, &err);
        if (!st) st = kld_tok_encode(tok, text, len, KLD_TOK_ADD_SPECIAL, &ids, &err);
    } else if (!st) {
        size_t n;
        if (!read_all(ids_file, &text, &n) || n % 4 || n == 0) {
            fprintf(stderr, "kldeval imatrix: %s is not a non-empty int32 file\n", ids_file);
            kld_model_close(m);
            free(text);
            return 1;
        }
        if (!kld_tok_ids_append(&ids, (const int32_t *)(const void *)text, n / 4))
            st = kld_fail(&err, KLD_ERR_NOMEM, "out of memory");
        if (!st) st = kld_tok_open_source(kld_model_source(m), &tok, &err);
    }
    if (!st) {
        int32_t bos = kld_tok_adds_bos(tok) ? kld_tok_bos(tok) : -1;
        st = kld_imatrix_collect(m, ids.ids, (int64_t)ids.n, ctx, chunks, bos, (int)threads,
                                 &spec.levers, corpus ? corpus : ids_file, quiet ? NULL : progress, NULL, &im,
                                 &err);
    }
    if (!st) st = kld_imatrix_write(im, out, &err);
    if (!st && !quiet)
        fprintf(stderr, "imatrix: %zu entries over %d windows of %lld tokens written to %s\n",
                im->n, im->chunks, (long long)ctx, out);
    if (st) fprintf(stderr, "kldeval imatrix: %s\n", err.msg);
    kld_imatrix_free(im);
    kld_corpus_free(jc);
    kld_tok_ids_free(&ids);
    kld_tok_free(tok);
    free(text);
    kld_model_close(m);
    return st ? 1 : 0;
}
