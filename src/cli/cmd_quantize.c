/* cmd_quantize.c — `kldeval quantize IN[+ADAPTER[:SCALE]] OUT POLICY
 * [--imatrix F]`: writes a GGUF with the policy's types (llama-quantize's
 * recipes by default), a LoRA adapter merged first when one is given. */
#include "cli/args.h"
#include "cli/commands.h"
#include "engine/engine.h"
#include "quant/quant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: kldeval quantize IN[+ADAPTER[:SCALE]] OUT POLICY [flags]\n\n"
            "IN is a GGUF model or a Hugging Face checkpoint (model_type llama, mistral,\n"
            "mixtral, qwen2, qwen3, phi3, gemma, gemma2, gemma3, qwen2_moe, qwen3_moe, olmoe,\n"
            "lfm2, qwen3_next: converted as convert_hf_to_gguf.py does); OUT the GGUF to write\n"
            "(atomically). IN+ADAPTER[:SCALE] merges a LoRA adapter (llama.cpp GGUF adapter or\n"
            "PEFT folder) first: each weight it targets becomes W + SCALE*(alpha/r)*B*A,\n"
            "summed in double from the dequantized weight, then quantized by POLICY (keep:\n"
            "requantized to its stored type); kldeval.lora.* metadata records the merge.\n"
            "POLICY is BASE[,SELECTOR=TYPE]...[,imatrix=FILE]:\n"
            "BASE a llama-quantize recipe (%s),\n"
            "a type or keep; SELECTOR head/output, embd/token_embd, blk:A-B, a class\n"
            "(attn_q, attn_k, attn_v, attn_qkv, attn_output, ffn_gate, ffn_up, ffn_down),\n"
            "blk:A-B.CLASS or a glob on the tensor name; later selectors win, also over a\n"
            "recipe's refusal of rows its type cannot hold (llama.cpp has no fallback for\n"
            "q8_0 on 172 columns: q8_0,ffn_down=f16 stores those in f16; the refusal names\n"
            "the selectors that would); a selector matching no weight matrix of the model\n"
            "is an error. A class is the dense tensor only: select experts with a glob\n"
            "('blk.*.ffn_up_exps.weight'). Example:\n"
            "  kldeval quantize f16.gguf out.gguf q4_K_M,head=f16,blk:0-1=q8_0\n\n"
            "  --imatrix FILE   importance matrix (llama-imatrix's GGUF or legacy .dat)\n"
            "  --threads N      threads, 1 .. 1024 (default: all cores)\n"
            "  -q, --quiet      no per-tensor lines and no progress (notes on what a\n"
            "                   conversion leaves out still go to stderr)\n"
            "  -h, --help       this text\n",
            kld_recipe_names());
}

static void progress(void *ctx, size_t done, size_t total, const char *name) {
    (void)ctx;
    fprintf(stderr, "\rquantize: %zu/%zu tensors  %-40.40s", done, total, name);
    if (done == total) fprintf(stderr, "\n");
}

int kld_cmd_quantize(int argc, char **argv) {
    const char *pos[3] = {NULL, NULL, NULL};
    int n_pos = 0;
    /* notes (what a conversion leaves out) on stderr: --quiet does not hide them */
    kld_quantize_opts o = {.log = stdout, .notes = stderr, .progress = progress};
    static const char *const with_value[] = {"--imatrix", "--threads", NULL};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            o.log = NULL;
            o.progress = NULL;
        } else if (kld_arg_in(a, with_value)) {
            const char *v = kld_arg_value(argc, argv, &i);
            if (!v) return 2;
            if (!strcmp(a, "--imatrix")) o.imatrix_path = v;
            else {
                int64_t n;
                if (!kld_arg_int(a, v, 1, 1024, &n)) return 2;
                o.n_threads = (int)n;
            }
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "kldeval quantize: unknown flag '%s'\n", a);
            usage(stderr);
            return 2;
        } else if (n_pos < 3) {
            pos[n_pos++] = a;
        } else {
            fprintf(stderr, "kldeval quantize: unexpected argument '%s'\n", a);
            return 2;
        }
    }
    if (n_pos != 3) {
        usage(stderr);
        return 2;
    }
    kld_error err = {0};
    char *base = NULL;
    const char *adapter = NULL;
    kld_status split = kld_model_split_adapter(pos[0], &base, &adapter, &err);
    if (split != KLD_OK) { /* a missing adapter fails as a missing IN does */
        fprintf(stderr, "kldeval quantize: %s\n", err.msg);
        return split == KLD_ERR_ARG ? 2 : 1;
    }
    const char *inputs[] = {pos[0], o.imatrix_path, base, adapter};
    const bool out_ok = kld_arg_output("quantize", "OUT", pos[1], inputs, 4);
    free(base);
    if (!out_ok) return 2;
    kld_quant_plan summary;
    kld_status s = kld_quantize_merged(pos[0], pos[1], pos[2], &o, &summary, &err);
    if (s) {
        fprintf(stderr, "kldeval quantize: %s\n", err.msg);
        return 1;
    }
    if (o.log)
        fprintf(o.log, "wrote %s: %llu bytes of tensors (%llu stored), %d fallback(s)\n", pos[1],
                (unsigned long long)summary.dst_bytes, (unsigned long long)summary.src_bytes,
                summary.n_fallback);
    return 0;
}
