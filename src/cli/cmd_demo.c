/* cmd_demo.c — placeholder until its module lands (replaced, not kept). */
#include "cli/commands.h"

#include <stdio.h>

int kld_cmd_demo(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "kldeval demo: not implemented yet\n");
    return 2;
}
