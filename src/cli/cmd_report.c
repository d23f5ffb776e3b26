/* `detrain report RUN... [--trace-diff A B] [--bench FILE.json] --out report.html`: the
 * determinism evidence of a set of runs as one self-contained HTML page (src/report/report.h).
 * RUN is what `compare` takes (a log directory or a metrics.jsonl file); the first is the
 * reference every other run is compared with. Exit codes as `compare`'s: 0 every run is
 * identical to the first over their shared steps (and the traces match), 1 a difference
 * (the page is written), 2 usage or input error (nothing is written). */
#include "cli/cli.h"
#include "report/report.h"

#include <stdio.h>
#include <string.h>

enum { MAX_RUNS = 26 };

static void usage(FILE *f) {
    fprintf(f,
            "usage: detrain report RUN... [--trace-diff DIR_A DIR_B] [--bench FILE.json] --out report.html\n"
            "  Writes one self-contained HTML page: each run's verdict against the first (as `compare`),\n"
            "  the full-precision difference |a-b| of every metric per step, the trajectories (resumed\n"
            "  runs marked), and with --trace-diff the first mismatch per rank, with --bench the\n"
            "  default-vs-deterministic leaderboard. RUN: a log directory or a metrics.jsonl file.\n"
            "  Exit: 0 identical, 1 a difference (page written), 2 usage/IO error (nothing written).\n");
}

int dt_cmd_report(int argc, char **argv) {
    const char *runs[MAX_RUNS];
    dt_report_opts o = {runs, 0, NULL, NULL, NULL, NULL, stdout};
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); return 0; }
        if (!strcmp(a, "--out") || !strcmp(a, "--bench")) {
            if (i + 1 >= argc) { fprintf(stderr, "detrain report: %s needs a file\n", a); return 2; }
            *(!strcmp(a, "--out") ? &o.out : &o.bench) = argv[++i];
            continue;
        }
        if (!strcmp(a, "--trace-diff")) {
            if (i + 2 >= argc) { fprintf(stderr, "detrain report: --trace-diff needs two trace directories\n"); return 2; }
            o.trace_a = argv[++i];
            o.trace_b = argv[++i];
            continue;
        }
        if (a[0] == '-' && a[1]) {
            fprintf(stderr, "detrain report: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        }
        if (o.nruns == MAX_RUNS) { fprintf(stderr, "detrain report: at most %d runs\n", MAX_RUNS); return 2; }
        runs[o.nruns++] = a;
    }
    if (o.nruns == 0 || !o.out) { usage(stderr); return 2; }
    dt_report_result r;
    if (dt_report_write(&o, &r) != DT_OK) {
        fprintf(stderr, "detrain report: %s\n", dt_errmsg());
        return 2;
    }
    printf("wrote %s: %d run%s, %d of %d compared with A differ%s\n", o.out, o.nruns, o.nruns == 1 ? "" : "s",
           r.ndiffer, r.npairs, r.trace_mismatch ? "; the traces differ" : "");
    return r.ndiffer || r.trace_mismatch ? 1 : 0;
}
