/* `detrain report`: the determinism evidence of a set of runs as one self-contained HTML
 * page (inline SVG and CSS, no script, no network, no other file: it opens from disk).
 *
 * The page shows, for runs A (the reference), B, C, ...:
 *   - a verdict for each run against A, from dt_compare_series (metrics/compare.h): bitwise
 *     identical / identical over the shared steps / first mismatch at step k (metric) with
 *     both values in hex and decimal, and the env.json fields that differ ("contract" fields
 *     flagged as outside the determinism contract);
 *   - the full-precision difference |a - b| of every metric at every shared step, computed
 *     from the exact bits, on a log axis with exact zero drawn on its own baseline and the
 *     first mismatch marked;
 *   - the trajectories (loss, eval and aux losses, grad norm, param norm, num_zeros, lr),
 *     all runs overlaid, each resumed run's first step after a checkpoint marked;
 *   - with a trace pair, trace-diff's per-rank first mismatch, its class and the aligned
 *     event with every input and output digest of both captures;
 *   - with a bench JSON (`detrain bench --json`), the default vs deterministic leaderboard.
 *
 * Verdicts read every step's bits; only the pictures are downsampled (svg.h), so a 100k-step
 * run draws in about a second. Bad input fails with the same errors as `compare` and
 * `trace-diff`, and nothing is written. */
#ifndef DT_REPORT_REPORT_H
#define DT_REPORT_REPORT_H

#include "detrain/detrain.h"

#include <stdio.h>

typedef struct dt_report_opts {
    const char *const *runs;      /* log directories or metrics.jsonl files; runs[0] is A */
    int nruns;                    /* 1..26 */
    const char *trace_a, *trace_b;/* --trace-diff: two trace dirs (or rank files), or NULL */
    const char *bench;            /* --bench: the JSON `detrain bench --json` wrote, or NULL */
    const char *out;              /* the HTML file: written as out.tmp, then renamed */
    FILE *log;                    /* one verdict line per pair once written, or NULL */
} dt_report_opts;

typedef struct dt_report_result {
    int npairs;                   /* runs compared against A (nruns - 1) */
    int ndiffer;                  /* of them, those with a first mismatch (compare: exit 1) */
    int trace_mismatch;           /* the trace pair differs (trace-diff: exit 1) */
} dt_report_result;

/* Reads every input, then writes the page. DT_OK with *res filled; an error (naming the
 * input) leaves no file at o->out. */
dt_status dt_report_write(const dt_report_opts *o, dt_report_result *res);

#endif
