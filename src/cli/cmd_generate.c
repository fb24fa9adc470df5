/* cmd_generate.c — `kldeval generate`: greedy decoding. The prompt (text
 * through the model's tokenizer, or --ids) is prefilled in chunks, then
 * each step feeds the argmax token back through the decode path. */
#include "cli/args.h"
#include "eval/arm.h"
#include "cli/commands.h"
#include "engine/engine.h"
#include "tokenizer/tokenizer.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: kldeval generate -m MODEL (-p TEXT | --ids 1,2,3) [-n N] [flags]\n"
            "  -m, --model PATH   GGUF file, safetensors file/folder, or llama2.c model.bin\n"
            "  -p, --prompt TEXT  prompt text (BOS etc. added as the tokenizer says)\n"
            "  --ids LIST         prompt as comma-separated token ids instead of text\n"
            "  -n N               tokens to generate, 0 .. 1048576 (default 32)\n"
            "  --ignore-eos       keep going after the end-of-sequence token\n"
            "  --print-ids        print the generated ids instead of text\n"
            "  --threads N        threads, 1 .. 1024 (default: all cores)\n"
            "  --lever L          session levers NAME=VALUE[,...] (see kldeval kl --help)\n"
            "  -h, --help         this text\n");
}

static int32_t argmax(const float *x, int64_t n) {
    int64_t b = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return (int32_t)b;
}

/* Prints the bytes of decode(ids) past *printed (the decoded prompt and
 * earlier steps), so pieces that merge with their neighbours print right. */
static void print_new_text(const kld_tokenizer *tok, const kld_tok_ids *ids, size_t *printed) {
    char *text = NULL;
    size_t len = 0;
    kld_error err = {0};
    if (kld_tok_decode(tok, ids->ids, ids->n, KLD_TOK_SKIP_SPECIAL, &text, &len, &err) != KLD_OK)
        return;
    if (len > *printed) {
        fwrite(text + *printed, 1, len - *printed, stdout);
        fflush(stdout);
        *printed = len;
    }
    free(text);
}

int kld_cmd_generate(int argc, char **argv) {
    const char *model_path = NULL, *prompt = NULL, *ids_list = NULL;
    int64_t n_gen = 32, threads = 0;
    const char *levers_text = NULL;
    bool ignore_eos = false, print_ids = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) { if (!(model_path = kld_arg_value(argc, argv, &i))) return 2; }
        else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) { if (!(prompt = kld_arg_value(argc, argv, &i))) return 2; }
        else if (!strcmp(a, "--ids")) { if (!(ids_list = kld_arg_value(argc, argv, &i))) return 2; }
        else if (!strcmp(a, "-n")) {
            if (!(v = kld_arg_value(argc, argv, &i)) || !kld_arg_int(a, v, 0, 1 << 20, &n_gen)) return 2;
        } else if (!strcmp(a, "--lever")) {
            if (!(v = kld_arg_value(argc, argv, &i)) || !kld_arg_levers(&levers_text, v)) return 2;
        } else if (!strcmp(a, "--threads")) {
            if (!(v = kld_arg_value(argc, argv, &i)) || !kld_arg_int(a, v, 1, 1024, &threads)) return 2;
        } else if (!strcmp(a, "--ignore-eos")) ignore_eos = true;
        else if (!strcmp(a, "--print-ids")) print_ids = true;
        else {
            fprintf(stderr, "kldeval generate: unknown flag '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!model_path || (!prompt == !ids_list)) {
        fprintf(stderr, "kldeval generate: need -m MODEL and exactly one of -p / --ids\n");
        usage(stderr);
        return 2;
    }
    kld_arm_parsed spec;
    if (!kld_arg_model_spec("generate", model_path, levers_text, &spec)) return 2;
    kld_error err = {0};
    kld_model *model = NULL;
    kld_session *s = NULL;
    kld_tokenizer *tok = NULL;
    kld_tok_ids ids = {0};
    float *logits = NULL;
    int rc = 1;
    kld_status st = kld_arm_spec_open_model(&spec, &model, &err);
    if (st != KLD_OK) goto done;
    /* The tokenizer is needed for -p, and for printing text. */
    if (prompt || !print_ids) {
        st = kld_tok_open_source(kld_model_source(model), &tok, &err);
        if (st != KLD_OK && prompt) goto done;
        if (st != KLD_OK) {
            fprintf(stderr, "kldeval generate: no tokenizer (%s): printing ids\n", err.msg);
            print_ids = true;
            st = KLD_OK;
        }
    }
    if (prompt) st = kld_tok_encode(tok, prompt, strlen(prompt), KLD_TOK_ADD_SPECIAL, &ids, &err);
    else if (!kld_arg_ids("generate", ids_list, &ids)) {
        rc = 2;
        goto done;
    }
    if (st != KLD_OK) goto done;
    if (ids.n == 0) {
        fprintf(stderr, "kldeval generate: the prompt encodes to no tokens\n");
        goto done;
    }
    const int64_t n_prompt = (int64_t)ids.n, n_ctx = n_prompt + n_gen;
    const int64_t chunk = n_prompt < 512 ? n_prompt : 512;
    const int64_t nv = kld_model_hparams(model)->n_vocab;
    for (int64_t i = 0; i < n_prompt; i++)
        if (ids.ids[i] >= nv) { /* the engine would name the offset within a chunk */
            fprintf(stderr, "kldeval generate: --ids: id %" PRId32 " at position %" PRId64
                    " is outside the vocabulary [0, %" PRId64 ") of %s\n",
                    ids.ids[i], i, nv, model_path);
            goto done;
        }
    kld_session_opts so = {n_ctx, chunk, (int)threads, NULL, &spec.levers, false, 0};
    st = kld_session_create_opts(model, &so, &s, &err);
    if (st != KLD_OK) goto done;
    logits = malloc((size_t)nv * sizeof(float));
    if (!logits) {
        fprintf(stderr, "kldeval generate: out of memory\n");
        goto done;
    }
    /* Prefill: only the last row's logits are needed. */
    for (int64_t i = 0; i < n_prompt; i += chunk) {
        const int64_t c = n_prompt - i < chunk ? n_prompt - i : chunk;
        const bool last = i + c == n_prompt;
        st = kld_session_eval_rows(s, ids.ids + i, c, c - 1, last ? logits : NULL, &err);
        if (st != KLD_OK) goto done;
    }
    size_t printed = 0;
    if (!print_ids) print_new_text(tok, &ids, &printed);
    const int32_t eos = tok ? kld_tok_eos(tok) : -1;
    for (int64_t g = 0; g < n_gen; g++) {
        const int32_t next = argmax(logits, nv);
        if (!kld_tok_ids_append(&ids, &next, 1)) {
            fprintf(stderr, "kldeval generate: out of memory\n");
            goto done;
        }
        if (print_ids) printf("%s%" PRId32, g ? "," : "", next);
        else print_new_text(tok, &ids, &printed);
        if (next == eos && !ignore_eos) break;
        if (g + 1 < n_gen && (st = kld_session_decode(s, next, logits, &err)) != KLD_OK) goto done;
    }
    printf("\n");
    rc = 0;
done:
    if (st != KLD_OK) fprintf(stderr, "kldeval generate: %s\n", err.msg);
    free(logits);
    kld_tok_ids_free(&ids);
    kld_tok_free(tok);
    kld_session_free(s);
    kld_model_close(model);
    return rc;
}
