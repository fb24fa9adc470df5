/* score_models.c — scores an arm against a reference with libkldeval and
 * prints the JSON report `kldeval kl --json` writes for the same run.
 *
 *   cc score_models.c $(pkg-config --cflags --libs kldeval) -o score_models
 *   ./score_models f16.gguf q4_K_M.gguf [corpus.txt]
 *
 * An arm can be any model path kldeval reads, "f16.gguf@q4_K_M" (quantized
 * on load) or "base.gguf+adapter.gguf" (a LoRA adapter). */
#include <kld.h>

#include <stdio.h>

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s REF ARM [CORPUS]\n", argv[0]);
        return 2;
    }
    kld_kl_config c;
    kld_kl_config_defaults(&c);
    c.ref = (kld_arm_spec){.kind = KLD_ARM_MODEL, .path = argv[1]};
    c.arm = (kld_arm_spec){.kind = KLD_ARM_MODEL, .path = argv[2]};
    c.corpus_path = argc > 3 ? argv[3] : NULL; /* NULL: the built-in corpus */

    kld_error err = {0};
    kld_result *r = NULL;
    if (kld_kl_evaluate(&c, &r, &err) != KLD_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    kld_summary s;
    if (kld_result_summary(r, &s, &err) == KLD_OK)
        fprintf(stderr, "%llu positions: mean KLD %.6e ± %.6e nats, top-1 agreement %.4f\n",
                (unsigned long long)s.n_positions, s.kld.mean, s.kld.se, s.top1_agreement);
    char *json = kld_result_json(r, &err);
    if (json) puts(json);
    else fprintf(stderr, "%s\n", err.msg);
    kld_free(json);
    kld_result_free(r);
    return json ? 0 : 1;
}
