/* Placeholder until this subcommand lands. */
#include "cli/cli.h"

#include <stdio.h>

int dt_cmd_ckpt(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "detrain: 'ckpt' is not built yet\n");
    return 2;
}
