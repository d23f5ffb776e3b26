/* Placeholder until this subcommand lands. */
#include "cli/cli.h"

#include <stdio.h>

int dt_cmd_gate(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "detrain: 'gate' is not built yet\n");
    return 2;
}
