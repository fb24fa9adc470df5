/* kl_pair.h — `kldeval kl --ref R --arm A --arm B`: two arms against one
 * reference on the same tokens, and their paired comparison (kl_pair.c). */
#ifndef KLD_CLI_KL_PAIR_H
#define KLD_CLI_KL_PAIR_H

#include "cli/commands.h"
#include "eval/kl_driver.h"

/* a and b: the same configuration but the arm (both checked by
 * kld_kl_check); paired: the --gate conditions on the paired comparison
 * (o->gates judge arm A). Runs both, prints both reports, the paired
 * bootstrap of A − B and the verdict, writes --json, records both runs;
 * the exit status (3 when a gate fails). */
int kld_kl_pair_main(kld_kl_config *a, kld_kl_config *b, const kld_kl_outputs *o, const kld_gates *paired);

#endif
