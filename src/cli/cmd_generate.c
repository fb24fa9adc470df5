/* cmd_generate.c — placeholder until its module lands (replaced, not kept). */
#include "cli/commands.h"

#include <stdio.h>

int kld_cmd_generate(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "kldeval generate: not implemented yet\n");
    return 2;
}
