/* cmd_synth.c — `kldeval synth`: write a seeded random-weight GGUF model. */
#include "cli/args.h"
#include "cli/commands.h"
#include "synth/synth.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *f) {
    kld_synth_options d;
    kld_synth_defaults(&d);
    fprintf(f,
            "usage: kldeval synth -o OUT.gguf [flags]\n\n"
            "Writes a llama-architecture GGUF with seeded random weights and a SentencePiece-BPE\n"
            "vocabulary learned from the built-in corpus. The same flags and seed always give\n"
            "the same file. Nothing is downloaded.\n\n"
            "  -o, --out FILE     output path (required)\n"
            "  --arch NAME        architecture (default %s; only llama so far)\n"
            "  --dim N            n_embd (default %lld)\n"
            "  --layers N         n_layer (default %lld)\n"
            "  --heads N          n_head (default %lld)\n"
            "  --kv-heads N       n_head_kv (default %lld)\n"
            "  --ff N             feed-forward width n_ff (default %lld)\n"
            "  --ctx N            context length written to the metadata (default %lld)\n"
            "  --vocab N          vocabulary size target (default %d; the corpus may give fewer)\n"
            "  --seed N           random seed (default %llu)\n"
            "  --type T           weight type: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1,\n"
            "                     q2_K..q6_K, iq4_nl, iq4_xs, or q4_K_M (llama.cpp's mix)\n"
            "                     (default %s; row lengths must be multiples of the block size)\n"
            "  --name NAME        general.name (default %s)\n"
            "  --threads N        quantization threads (default: all cores; the file is the same)\n"
            "  -h, --help         this text\n",
            d.arch, (long long)d.n_embd, (long long)d.n_layer, (long long)d.n_head,
            (long long)d.n_head_kv, (long long)d.n_ff, (long long)d.n_ctx, d.n_vocab,
            (unsigned long long)d.seed, d.type, d.name);
}

int kld_cmd_synth(int argc, char **argv) {
    kld_synth_options o;
    kld_synth_defaults(&o);
    const char *out = NULL;
    static const char *const valued[] = {"-o", "--out", "--arch", "--type", "--name", "--seed",
                                         "--dim", "--layers", "--heads", "--kv-heads", "--ff",
                                         "--ctx", "--vocab", "--threads", NULL};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int64_t n;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (!kld_arg_in(a, valued)) {
            fprintf(stderr, "kldeval synth: unknown %s '%s' (see --help)\n",
                    a[0] == '-' ? "flag" : "argument", a);
            return 2;
        }
        if (!(v = kld_arg_value(argc, argv, &i))) return 2;
        if (!strcmp(a, "-o") || !strcmp(a, "--out")) out = v;
        else if (!strcmp(a, "--arch")) o.arch = v;
        else if (!strcmp(a, "--type")) o.type = v;
        else if (!strcmp(a, "--name")) o.name = v;
        else if (!strcmp(a, "--seed")) { if (!kld_arg_u64(a, v, &o.seed)) return 2; }
        else if (!strcmp(a, "--dim")) { if (!kld_arg_int(a, v, 1, 1 << 16, &o.n_embd)) return 2; }
        else if (!strcmp(a, "--layers")) { if (!kld_arg_int(a, v, 1, 1024, &o.n_layer)) return 2; }
        else if (!strcmp(a, "--heads")) { if (!kld_arg_int(a, v, 1, 1024, &o.n_head)) return 2; }
        else if (!strcmp(a, "--kv-heads")) { if (!kld_arg_int(a, v, 1, 1024, &o.n_head_kv)) return 2; }
        else if (!strcmp(a, "--ff")) { if (!kld_arg_int(a, v, 1, 1 << 20, &o.n_ff)) return 2; }
        else if (!strcmp(a, "--threads")) {
            if (!kld_arg_int(a, v, 1, 1024, &n)) return 2;
            o.n_threads = (int)n;
        } else if (!strcmp(a, "--ctx")) { if (!kld_arg_int(a, v, 1, 1 << 24, &o.n_ctx)) return 2; }
        else if (!strcmp(a, "--vocab")) {
            if (!kld_arg_int(a, v, 1, 1 << 24, &n)) return 2;
            o.n_vocab = (int32_t)n;
        }
    }
    if (!out) {
        fprintf(stderr, "kldeval synth: -o OUT.gguf is required (see --help)\n");
        return 2;
    }
    kld_error err = {0};
    if (kld_synth_write(&o, out, &err) != KLD_OK) {
        fprintf(stderr, "kldeval synth: %s\n", err.msg);
        return 1;
    }
    fprintf(stderr, "kldeval synth: wrote %s\n", out);
    return 0;
}
