/* Placeholder until this subcommand lands. */
#include "cli/cli.h"

#include <stdio.h>

int dt_cmd_compare(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "detrain: 'compare' is not built yet\n");
    return 2;
}
