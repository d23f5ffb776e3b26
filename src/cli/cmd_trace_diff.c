/* Placeholder until this subcommand lands. */
#include "cli/cli.h"

#include <stdio.h>

int dt_cmd_trace_diff(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "detrain: 'trace_diff' is not built yet\n");
    return 2;
}
