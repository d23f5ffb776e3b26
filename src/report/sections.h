/* The sections of the report page; report.c loads the inputs and puts the page together.
 * A section that reads its own input (trace, bench) loads it before anything is written,
 * so a bad file fails the report instead of leaving half a page. */
#ifndef DT_REPORT_SECTIONS_H
#define DT_REPORT_SECTIONS_H

#include "report/runs.h"

#include <stdio.h>

/* Colour of run i (A, B, ...) and of the k-th metric of a difference panel. */
const char *dt_rpt_run_color(int i);
const char *dt_rpt_metric_color(int k);
/* A short line sample in run i's stroke (solid for A, dashed for the others), inline SVG. */
void dt_rpt_run_swatch(FILE *f, int i);

/* Full-precision difference of each run against A: one panel per pair (section_plots.c). */
void dt_rpt_write_differences(FILE *f, const dt_rpt_data *d);
/* Trajectories: one panel per metric, every run overlaid, resume points marked. */
void dt_rpt_write_trajectories(FILE *f, const dt_rpt_data *d);

/* --trace-diff (section_trace.c): dt_trace_diff of the two captures plus the aligned event
 * of each rank's first mismatch, read back from both rank files. */
typedef struct dt_rpt_trace dt_rpt_trace;
dt_status dt_rpt_trace_load(const char *a, const char *b, dt_rpt_trace **out);
int dt_rpt_trace_mismatch(const dt_rpt_trace *t);
void dt_rpt_trace_write(FILE *f, const dt_rpt_trace *t);
void dt_rpt_trace_free(dt_rpt_trace *t);

/* --bench (section_bench.c): the JSON `detrain bench --json FILE` writes. */
typedef struct dt_rpt_bench dt_rpt_bench;
dt_status dt_rpt_bench_load(const char *path, dt_rpt_bench **out);
void dt_rpt_bench_write(FILE *f, const dt_rpt_bench *b);
void dt_rpt_bench_free(dt_rpt_bench *b);

#endif
