/* cmd_demo.c — `kldeval demo`: the built-in demonstration. Synthesizes the
 * default random-weight model in f16 (the reference) and, from the same
 * seed, a q4_K_M arm of it (cached in a folder), describes the reference
 * and measures the arm's KL divergence on the built-in corpus. */
#include "cli/args.h"
#include "cli/commands.h"
#include "eval/kl_driver.h"
#include "cli/inspect_facts.h"
#include "synth/synth.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static void usage(FILE *f) {
    fprintf(f, "usage: kldeval demo [--dir DIR]\n\n"
               "Synthesizes the built-in model (seeded random weights, vocabulary learned from the\n"
               "built-in corpus) in f16 and, from the same seed, in q4_K_M into DIR (default\n"
               "./kldeval-demo; reused when present), describes the reference and runs\n"
               "`kldeval kl --ref f16 --arm q4_K_M` on the built-in corpus. Needs no download.\n\n"
               "  --dir DIR      where the demo models are written (an unreadable cached\n"
               "                 model is synthesized again)\n"
               "  --threads N    threads for the KL run, 1 .. 1024 (default: all cores)\n"
               "  -h, --help     this text\n");
}

int kld_cmd_demo(int argc, char **argv) {
    const char *dir = "kldeval-demo";
    int threads = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--dir")) {
            if (!(dir = kld_arg_value(argc, argv, &i))) return 2;
        } else if (!strcmp(argv[i], "--threads")) {
            const char *v = kld_arg_value(argc, argv, &i);
            int64_t n;
            if (!v || !kld_arg_int("--threads", v, 1, 1024, &n)) return 2;
            threads = (int)n;
        } else {
            fprintf(stderr, "kldeval demo: unknown flag '%s' (see --help)\n", argv[i]);
            return 2;
        }
    }
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "kldeval demo: cannot create %s: %s\n", dir, strerror(errno));
        return 1;
    }
    char ref_path[4096], arm_path[4096];
    snprintf(ref_path, sizeof ref_path, "%s/ref-f16.gguf", dir);
    snprintf(arm_path, sizeof arm_path, "%s/arm-q4_K_M.gguf", dir);
    kld_synth_options o;
    kld_synth_defaults(&o);
    kld_error err = {0};
    struct stat sb;
    const char *paths[2] = {ref_path, arm_path}, *types[2] = {"f16", "q4_K_M"};
    for (int i = 0; i < 2; i++) {
        if (stat(paths[i], &sb) == 0) {
            /* A cached model that does not open (damaged, or left by an older
             * version) is made again rather than failing every later demo. */
            kld_source *cached;
            if (kld_source_open(paths[i], &cached, &err) == KLD_OK) {
                kld_source_close(cached);
                continue;
            }
            fprintf(stderr, "kldeval demo: the cached model is unreadable (%s)\n", err.msg);
        }
        fprintf(stderr, "kldeval demo: synthesizing %s\n", paths[i]);
        o.type = types[i];
        o.n_threads = threads;
        /* Written beside and renamed into place, so an interrupted demo
         * never leaves a truncated model that a later run would reuse. */
        char tmp_path[4200];
        snprintf(tmp_path, sizeof tmp_path, "%s.partial", paths[i]);
        if (kld_synth_write(&o, tmp_path, &err) != KLD_OK) {
            remove(tmp_path);
            fprintf(stderr, "kldeval demo: %s\n", err.msg);
            return 1;
        }
        if (rename(tmp_path, paths[i]) != 0) {
            fprintf(stderr, "kldeval demo: cannot rename %s to %s: %s\n", tmp_path, paths[i],
                    strerror(errno));
            remove(tmp_path);
            return 1;
        }
    }
    kld_source *src;
    if (kld_source_open(ref_path, &src, &err) != KLD_OK) {
        fprintf(stderr, "kldeval demo: %s\n", err.msg);
        return 1;
    }
    inspect_options opt = {0};
    json_t *facts = inspect_facts(src, &opt);
    printf("== reference model ==\n");
    inspect_print_text(stdout, facts);
    json_decref(facts);
    kld_source_close(src);
    printf("\n== kldeval kl --ref %s --arm %s (built-in corpus) ==\n", ref_path, arm_path);
    fflush(stdout);
    kld_kl_config c;
    kld_kl_config_defaults(&c);
    c.ref = (kld_arm_spec){.kind = KLD_ARM_MODEL, .path = ref_path};
    c.arm = (kld_arm_spec){.kind = KLD_ARM_MODEL, .path = arm_path};
    c.n_threads = threads;
    kld_kl_outputs out = {.label = "demo"};
    return kld_kl_main(&c, &out);
}
