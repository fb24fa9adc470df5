/* kl_sweep.h — `kldeval kl --sweep SPEC [--floor]` (kl_sweep.c). */
#ifndef KLD_CLI_KL_SWEEP_H
#define KLD_CLI_KL_SWEEP_H

#include "cli/commands.h"
#include "eval/kl_driver.h"

typedef struct kld_kl_sweep_opts {
    const char *spec;        /* NAME=V1,V2[×NAME=…], or NULL (--floor alone) */
    bool floor;              /* add the noise=bf16 arm and the paired KLD − floor */
    const char *teacher_dir; /* keep the saved teacher there (NULL: temporary) */
    int32_t teacher_top_k;   /* 0: the whole vocabulary */
    const char *json_path;
} kld_kl_sweep_opts;

/* Runs the sweep the parsed kl configuration describes; the exit status. */
int kld_kl_sweep_main(const kld_kl_config *c, const kld_kl_outputs *o, const kld_kl_sweep_opts *so);

#endif
