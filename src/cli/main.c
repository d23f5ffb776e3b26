/* detrain: one binary, several subcommands. */
#include "cli/cli.h"
#include "core/fingerprint.h"

#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    int (*run)(int, char **);
    const char *what;
} commands[] = {
    {"train", dt_cmd_train, "train a GPT model (see `detrain train --help`)"},
    {"compare", dt_cmd_compare, "compare two runs' metrics (or checkpoints) bitwise"},
    {"data", dt_cmd_data, "make and inspect token shards (`data tokenize --bytes FILE`)"},
    {"trace-diff", dt_cmd_trace_diff, "find the first op where two traced runs diverge"},
    {"report", dt_cmd_report, "the evidence of a set of runs as one HTML page (`report RUN... --out F`)"},
    {"ckpt", dt_cmd_ckpt, "verify a checkpoint (`ckpt verify DIR`)"},
    {"bench", dt_cmd_bench, "default vs deterministic mode, side by side"},
    {"gate", dt_cmd_gate, "kernel determinism gate over a git diff (`gate --base-ref REF`)"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: detrain <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-11s %s\n", commands[i].name, commands[i].what);
    fprintf(f, "\n  detrain --version   the git revision this binary was built from\n");
}

int main(int argc, char **argv) {
    if (argc == 2 && !strcmp(argv[1], "--version")) {
#ifdef DT_CUDA
        printf("detrain %s (CUDA build)\n", dt_build_rev());
#else
        printf("detrain %s\n", dt_build_rev());
#endif
        return 0;
    }
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].run(argc - 2, argv + 2);
    fprintf(stderr, "detrain: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
