/* `detrain trace-diff A B [--json] [--rank R] [--allow-unclosed]`: find the first op where
 * two traced runs diverge (src/trace/diff.h). Exit 0 no mismatch, 1 mismatch found,
 * 2 usage error or a malformed / truncated trace file. */
#include "cli/cli.h"
#include "trace/diff.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: detrain trace-diff A B [--json] [--rank R] [--allow-unclosed]\n"
            "  A, B              trace dirs (--trace-dir of two runs) or single rank files\n"
            "  --json            one JSON object instead of the table\n"
            "  --rank R          compare rank R only\n"
            "  --allow-unclosed  accept files without their END record (a run that died)\n"
            "exit: 0 no mismatch, 1 mismatch found, 2 usage error or malformed trace\n");
}

int dt_cmd_trace_diff(int argc, char **argv) {
    dt_trace_diff_opts o = {NULL, NULL, -1, 0};
    int json = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); return 0; }
        if (!strcmp(a, "--json")) { json = 1; continue; }
        if (!strcmp(a, "--allow-unclosed")) { o.allow_unclosed = 1; continue; }
        if (!strcmp(a, "--rank")) {
            char *end;
            errno = 0;
            long r = i + 1 < argc ? strtol(argv[i + 1], &end, 10) : -1;
            if (i + 1 >= argc || errno || *end || end == argv[i + 1] || r < 0 || r > 100000000) {
                fprintf(stderr, "detrain trace-diff: --rank needs a non-negative integer\n");
                return 2;
            }
            o.rank = (int)r;
            i++;
            continue;
        }
        if (a[0] == '-' && a[1]) {
            fprintf(stderr, "detrain trace-diff: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        }
        if (!o.a) o.a = a;
        else if (!o.b) o.b = a;
        else { fprintf(stderr, "detrain trace-diff: too many arguments ('%s')\n", a); usage(stderr); return 2; }
    }
    if (!o.a || !o.b) { usage(stderr); return 2; }
    dt_trace_diff_result res;
    dt_status st = dt_trace_diff(&o, &res);
    if (st) {
        fprintf(stderr, "detrain trace-diff: %s: %s\n", dt_status_name(st), dt_errmsg());
        return 2;
    }
    if (json) dt_trace_diff_print_json(&o, &res, stdout);
    else dt_trace_diff_print(&o, &res, stdout);
    int rc = res.mismatch ? 1 : 0;
    dt_trace_diff_free(&res);
    return rc;
}
