/* `detrain ckpt verify DIR`: checks a checkpoint completely (state.json parse and its own
 * digest, every file's size and SHA-256, every tensor's name, dtype, shape and SHA-256) and
 * prints a summary. DIR is an iteration directory or a save directory (its latest
 * checkpoint). Exit: 0 valid, 1 invalid (the message names the problem), 2 usage. */
#include "cli/cli.h"

#include "ckpt/ckpt.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f, "usage: detrain ckpt verify DIR\n"
               "  Verifies a checkpoint (an iter_NNNNNNN directory, or a save directory whose\n"
               "  latest_checkpointed_iteration.txt names one) and prints a summary.\n"
               "  Exit: 0 valid, 1 invalid, 2 usage. To compare two checkpoints: detrain compare A B.\n");
}

int dt_cmd_ckpt(int argc, char **argv) {
    if (argc >= 1 && (!strcmp(argv[0], "--help") || !strcmp(argv[0], "-h"))) { usage(stdout); return 0; }
    if (argc != 2 || strcmp(argv[0], "verify") != 0 || argv[1][0] == '-') { usage(stderr); return 2; }
    if (dt_ckpt_verify(argv[1], stdout) != DT_OK) {
        fprintf(stderr, "detrain ckpt verify: INVALID: %s\n", dt_errmsg());
        return 1;
    }
    return 0;
}
