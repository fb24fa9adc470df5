/* cmd_logits.c — placeholder until its module lands (replaced, not kept). */
#include "cli/commands.h"

#include <stdio.h>

int kld_cmd_logits(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "kldeval logits: not implemented yet\n");
    return 2;
}
