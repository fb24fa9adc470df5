/* sweep_grid.h — the arms of a lever sweep (`kl --sweep NAME=V1,V2[×NAME=…]
 * [--floor]`): ExLlamaV3's cache-quantization sweep and noise floor. Each
 * value (or grid point) is one arm on the arm's model with the arm's levers
 * and NAME=V added; --floor adds the reference with noise=bf16. Every arm is
 * parsed as an arm spec when the grid is built, before any pass runs. */
#ifndef KLD_EVAL_SWEEP_GRID_H
#define KLD_EVAL_SWEEP_GRID_H

#include "eval/kl_driver.h"
#include "eval/sweep.h"

typedef struct kld_sweep_grid {
    kld_sweep_arm *arms; /* n arms, strings owned by the grid */
    size_t n;
    long floor;          /* index of the floor arm, or -1 */
    char **owned;
    size_t n_owned;
} kld_sweep_grid;

#define KLD_SWEEP_GRID_MAX_AXES 3
#define KLD_SWEEP_GRID_MAX_VALUES 64
#define KLD_SWEEP_GRID_MAX_ARMS 256

/* spec: NAME=V1,V2,…[×NAME=…] ("*" for "×"; values holding ',' are split
 * on ';'), or NULL for --floor alone (the run's own arm beside the floor).
 * ref and arm: the kl run's (the arm a model, or a self arm of ref). */
kld_status kld_sweep_grid_build(const char *spec, bool floor, const kld_arm_spec *ref,
                                const kld_arm_spec *arm, kld_sweep_grid *out, kld_error *err);
void kld_sweep_grid_free(kld_sweep_grid *g);

/* The saved teacher a kl sweep forwards its reference into: the kl run's
 * reference, corpus and windows; out (NULL: temporary) and top_k (0: the
 * whole vocabulary). */
void kld_sweep_teacher_of_kl(const kld_kl_config *c, const char *out, int32_t top_k, kld_dump_config *t);

#endif
