/* Full-precision metrics log of a training run.
 *
 * A log directory holds:
 *   metrics.jsonl                      one JSON object per step, every float written as
 *                                      %.17g decimal AND as its exact bits
 *                                      ("loss":2.5,"loss_hex":"0x4004000000000000");
 *                                      NaN/Inf decimals are the strings "nan"/"inf"/"-inf"
 *   events.out.tfevents.<t>.<host>...  the same metrics for TensorBoard (tfevents.h):
 *                                      float32 for the dashboard plus an exact f64 copy
 * The _hex fields are what `detrain compare` reads; console output is rounded and never
 * used to compare.
 *
 * Line keys, in order: step, loss(+_hex), eval_loss(+_hex, only on steps with an eval),
 * grad_norm, param_norm (+_hex), num_zeros (integer), lr(+_hex), consumed_samples,
 * consumed_tokens (integers), then each aux loss by name (+_hex), then the wall-clock
 * fields step_ms, tok_per_s (+_hex), and on the first line a resumed run writes (opts.resume)
 * the resume marker "resumed":true: that step is the first one computed after loading a
 * checkpoint. compare ignores the wall-clock fields and the marker, nothing else.
 *
 * Resumed runs. The simplest layout is a new log directory per run: compare then compares
 * the steps both logs hold. A resumed run may also reuse the directory: open it with
 * opts.resume = 1 and lines are appended (a TensorBoard file is added beside the old one).
 * The reading rule (dt_metrics_read) is: a line whose step is not greater than the
 * previous line's starts a resumed segment and discards every earlier entry with a step
 * >= its own. So the log reads as the run that continued: steps a crashed run logged past
 * its last checkpoint are replaced by the resumed run's. TensorBoard applies the same rule
 * ("purge orphaned data") after the restart marker a resumed run writes. */
#ifndef DT_METRICS_METRICS_H
#define DT_METRICS_METRICS_H

#include "core/json_read.h"
#include "detrain/detrain.h"

#include <stddef.h>
#include <stdint.h>

enum { DT_METRICS_MAX_AUX = 8 };

typedef struct dt_step_metrics {
    int64_t step;              /* 1-based iteration */
    double loss;               /* mean train loss of the step (all micro-batches) */
    int has_eval;
    double eval_loss;
    double grad_norm, param_norm;
    int64_t num_zeros;         /* number of zero entries in the gradients */
    double lr;
    int64_t consumed_samples, consumed_tokens;
    int n_aux;                 /* aux losses (e.g. MoE load balancing), 0..DT_METRICS_MAX_AUX */
    struct { const char *name; double value; } aux[DT_METRICS_MAX_AUX]; /* name: [a-z0-9_]+ */
    double step_ms, tok_per_s; /* wall clock: the only fields compare ignores */
    double comm_ms;            /* wall clock in the step's collectives (dist/comm.h; not logged) */
} dt_step_metrics;

typedef struct dt_metrics dt_metrics;

typedef struct dt_metrics_opts {
    int resume;    /* 0: a fresh run; an existing non-empty metrics.jsonl is refused.
                      1: a resumed run; lines are appended to an existing metrics.jsonl
                      (an incomplete last line left by a crash is cut off first), the first
                      line carries "resumed":true, and the new event file starts with a
                      restart marker at the first logged step so TensorBoard drops the old
                      file's steps from there on. */
    int tfevents;  /* 1: also write a TensorBoard event file */
} dt_metrics_opts;

/* Opens the log in log_dir, creating the directory (one level) if needed. opts NULL means
 * {resume = 0, tfevents = 1}. Free with dt_metrics_close. */
dt_status dt_metrics_open(dt_metrics **out, const char *log_dir, const dt_metrics_opts *opts);
/* Appends one step to metrics.jsonl (flushed to the OS) and to the event file. Steps must
 * increase within one open log; aux names must be [a-z0-9_]+ and not clash with the fixed
 * keys. */
dt_status dt_metrics_log(dt_metrics *m, const dt_step_metrics *s);
/* Path of the TensorBoard file, or NULL when tfevents is off. */
const char *dt_metrics_tfevents_path(const dt_metrics *m);
/* Flushes and fsyncs both files and frees m (NULL is fine). */
dt_status dt_metrics_close(dt_metrics *m);

/* Megatron-style progress line, e.g.
 * "iteration 7/100 | consumed samples: 56 | elapsed time per iteration (ms): 123.4 |
 *  learning rate: 6.000000E-04 | loss: 4.123457E+00 | grad norm: 1.234 | tokens/s: 4567 |
 *  ETA: 00:01:23" (one line; " | eval loss: X" follows loss on eval steps). The time per
 * iteration shown is s->step_ms; ETA is (train_iters - step) * elapsed_ms_avg (pass the
 * average over recent steps). Rounded for people: never compared. */
void dt_metrics_console_line(char *buf, size_t n, const dt_step_metrics *s, int64_t train_iters,
                             double elapsed_ms_avg);

/* ---- reading ---- */

typedef struct dt_metrics_series {
    size_t n;
    int64_t *steps;          /* strictly increasing after the resume rule above */
    dt_json_value **lines;   /* lines[i] is the parsed object of steps[i] */
} dt_metrics_series;

/* Reads a metrics.jsonl file, applying the resume rule. Fails (DT_ECORRUPT, naming the
 * path and line) on a malformed line, a missing or non-positive step, a "*_hex" field that
 * is not "0x" and 16 hex digits (naming the field), or an incomplete last line. Free with
 * dt_metrics_series_free. */
dt_status dt_metrics_read(const char *path, dt_metrics_series *out);
void dt_metrics_series_free(dt_metrics_series *s);

#endif
