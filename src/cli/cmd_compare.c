/* `detrain compare A B`: are two runs bitwise identical?
 *
 * A and B are log directories (holding metrics.jsonl and, beside it, env.json) or
 * metrics.jsonl files. When both are checkpoints (an iteration directory holding
 * model.safetensors, or a save directory holding latest_checkpointed_iteration.txt) the
 * checkpoint hook dt_compare_ckpt is used instead. Exit codes: 0 identical, 1 differ,
 * 2 usage or I/O error (including logs that share no step). */
#include "cli/cli.h"
#include "detrain/detrain.h"
#include "metrics/compare.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: detrain compare DIR_A DIR_B\n"
            "  Compares two runs' full-precision metrics (DIR/metrics.jsonl) bit for bit on the\n"
            "  steps both logs hold, ignoring wall-clock fields (step_ms, tok_per_s). DIR may\n"
            "  also be a metrics.jsonl file. Warns when the env.json fingerprints differ in\n"
            "  their \"contract\" fields. Exit: 0 identical, 1 different, 2 usage/IO error.\n");
}

static int is_dir(const char *p) {
    struct stat sb;
    return !stat(p, &sb) && S_ISDIR(sb.st_mode);
}

static int has_file(const char *dir, const char *name) {
    char p[4096];
    struct stat sb;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return !lstat(p, &sb); /* any entry: a special file there is refused by the reader, named */
}

/* A checkpoint: an iteration directory (model.safetensors) or a save directory
 * (latest_checkpointed_iteration.txt). */
static int is_ckpt(const char *p) {
    return is_dir(p) && (has_file(p, "model.safetensors") ||
                         has_file(p, "latest_checkpointed_iteration.txt"));
}

static void warn_fingerprints(const char *env_a, const char *env_b) {
    struct stat sb;
    int ha = !stat(env_a, &sb), hb = !stat(env_b, &sb);
    if (!ha || !hb) {
        fprintf(stderr, "warning: no fingerprint %s: environments not compared\n",
                !ha ? env_a : env_b);
        return;
    }
    char keys[1024];
    int ndiff;
    dt_status st = dt_compare_fingerprints(env_a, env_b, keys, sizeof keys, &ndiff);
    if (st)
        fprintf(stderr, "warning: environments not compared: %s\n", dt_errmsg());
    else if (ndiff)
        fprintf(stderr, "warning: environment fingerprints differ in %d contract field%s: %s; "
                "runs in different environments (or with different binding flags, config.*) are outside the "
                "determinism contract\n",
                ndiff, ndiff == 1 ? "" : "s", keys);
}

int dt_cmd_compare(int argc, char **argv) {
    const char *args[2];
    int nargs = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { usage(stdout); return 0; }
        if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "detrain compare: unknown option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
        if (nargs == 2) { usage(stderr); return 2; }
        args[nargs++] = argv[i];
    }
    if (nargs != 2) { usage(stderr); return 2; }

    if (is_ckpt(args[0]) && is_ckpt(args[1])) {
        int identical = 0;
        dt_status st = dt_compare_ckpt(args[0], args[1], stdout, &identical);
        if (st) { fprintf(stderr, "detrain compare: %s\n", dt_errmsg()); return 2; }
        return identical ? 0 : 1;
    }

    char ma[4096], mb[4096], ea[4096], eb[4096];
    dt_compare_paths(args[0], ma, ea, sizeof ma);
    dt_compare_paths(args[1], mb, eb, sizeof mb);
    warn_fingerprints(ea, eb);
    dt_compare_report r;
    dt_status st = dt_compare_metrics(ma, mb, &r);
    if (st) { fprintf(stderr, "detrain compare: %s\n", dt_errmsg()); return 2; }
    if (r.a_first != r.b_first || r.a_last != r.b_last)
        printf("note: A holds steps %" PRId64 "-%" PRId64 ", B holds steps %" PRId64 "-%" PRId64
               "; compared the shared steps %" PRId64 "-%" PRId64 "\n", r.a_first, r.a_last,
               r.b_first, r.b_last, r.first, r.last);
    if (r.identical) {
        printf("bitwise identical: %" PRId64 " steps (steps %" PRId64 "-%" PRId64 ")\n", r.nsteps,
               r.first, r.last);
        return 0;
    }
    printf("DIFFERENT at step %" PRId64 ", metric %s:\n  A: %s\n  B: %s\n", r.diff_step,
           r.diff_metric, r.a_value, r.b_value);
    if (r.nsteps)
        printf("steps %" PRId64 "-%" PRId64 " before it are bitwise identical (%" PRId64 " steps)\n",
               r.first, r.diff_step - 1, r.nsteps);
    return 1;
}
