/* The data behind a report: each run's metric series read by the metrics reader (the resume
 * rule applied), unpacked into one column of exact values per metric, the runs' resume
 * points and fingerprints, and the verdict of each run against the first (the reference)
 * from compare.
 *
 * Nothing here parses metrics.jsonl itself: the series come from dt_metrics_read and the
 * verdicts from dt_compare_series, so a report and `detrain compare` read the same bits and
 * fail on the same bad input with the same messages. */
#ifndef DT_REPORT_RUNS_H
#define DT_REPORT_RUNS_H

#include "core/json_read.h"
#include "detrain/detrain.h"
#include "metrics/compare.h"
#include "metrics/metrics.h"

#include <stdint.h>

enum { DT_RPT_MAX_METRICS = 32, DT_RPT_MAX_RESUMES = 64 };

enum dt_rpt_kind {
    DT_RPT_FLOAT = 1,   /* a double, from its NAME_hex field */
    DT_RPT_INT          /* an integer field (num_zeros, consumed_samples, ...) */
};

typedef struct dt_rpt_metric {
    char name[80];
    int kind;           /* enum dt_rpt_kind */
    int trajectory;     /* drawn as a trajectory (floats and num_zeros; not the counters) */
} dt_rpt_metric;

/* One metric of one run, indexed like the run's steps. */
typedef struct dt_rpt_col {
    uint64_t *bits;     /* FLOAT: the double's bits; INT: the int64 value */
    unsigned char *has; /* 1 where that step's line holds the metric */
} dt_rpt_col;

typedef struct dt_rpt_run {
    const char *arg;                /* as given on the command line */
    char label[4];                  /* "A", "B", ... */
    char metrics_path[4096], env_path[4096];
    size_t n;                       /* steps */
    int64_t *steps;                 /* strictly increasing (owned) */
    dt_rpt_col col[DT_RPT_MAX_METRICS];
    int nresumes;                   /* first steps after a checkpoint, up to DT_RPT_MAX_RESUMES */
    int64_t resumes[DT_RPT_MAX_RESUMES];
    int resume_from_start;          /* resumes[0] is the log's first step > 1, which has no
                                       marker (a log written before the marker existed) */
    dt_json_value *env;             /* env.json, NULL when it could not be read */
    char env_note[512];             /* why env is NULL */
} dt_rpt_run;

typedef struct dt_rpt_pair {
    int a, b;                       /* run indices: a is 0 (the reference), b = 1, 2, ... */
    dt_compare_report cmp;          /* dt_compare_series of the two runs */
    int env_ok;                     /* fingerprints compared */
    char env_note[600];             /* why not */
    int ncontract, ninfo;           /* fields that differ */
    char contract[1024], info[1024];/* their names, "a, b, c" */
} dt_rpt_pair;

typedef struct dt_rpt_data {
    int nruns;
    dt_rpt_run *runs;
    int nmetrics, metrics_dropped;  /* metrics beyond DT_RPT_MAX_METRICS are not drawn */
    dt_rpt_metric metrics[DT_RPT_MAX_METRICS];
    int order[DT_RPT_MAX_METRICS];  /* drawing order: loss, eval_loss, aux losses, grad_norm,
                                       param_norm, num_zeros, lr, counters */
    int npairs;
    dt_rpt_pair *pairs;             /* (0, 1), (0, 2), ...: nruns - 1 of them */
    int64_t first_step, last_step;  /* over all runs */
} dt_rpt_data;

/* Reads every run (a log directory or a metrics.jsonl file, as `compare` takes them),
 * compares each with the first and unpacks the columns. The parsed lines are freed before it
 * returns. On error (a run that cannot be read, a torn line, two logs that share no step:
 * compare's errors) *d is freed and the message names the input. */
dt_status dt_rpt_load(const char *const *args, int nargs, dt_rpt_data *d);
void dt_rpt_free(dt_rpt_data *d);

/* The value of column c at index i as a double (FLOAT: from its bits; INT: converted). */
double dt_rpt_value(const dt_rpt_metric *m, const dt_rpt_col *c, size_t i);
/* A string field of env.json ("contract" or "info" section), or NULL. */
const char *dt_rpt_env_field(const dt_rpt_run *r, const char *section, const char *key);

#endif
