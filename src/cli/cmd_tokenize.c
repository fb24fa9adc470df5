/* cmd_tokenize.c — placeholder until its module lands (replaced, not kept). */
#include "cli/commands.h"

#include <stdio.h>

int kld_cmd_tokenize(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "kldeval tokenize: not implemented yet\n");
    return 2;
}
