/* trace-diff: compare two captures and find, per rank, the first op where they diverge
 * (DESIGN §6). Events are aligned by (step, micro-batch, scope, op, occurrence), never by
 * arrival order. Per rank, walking A's own execution order, the first mismatching event is
 * classified:
 *   origin candidate   inputs match, outputs differ: this op (or a producer the trace
 *                      cannot see) produced the first different bits;
 *   downstream         inputs already differ: the origin happened before the capture on
 *                      this rank -> verdict "origin outside the capture" (widen the step
 *                      window or the rank set).
 * Later mismatches are counted (downstream, or "inputs match" = another candidate).
 * Missing events (in one capture only) and order differences (the same events in a
 * different relative order) are reported separately. A cross-rank summary says whether
 * every traced rank names the same origin (the op itself) or only some do (topology,
 * placement, input distribution, reduction order). */
#ifndef DT_TRACE_DIFF_H
#define DT_TRACE_DIFF_H

#include "detrain/detrain.h"

#include <stdint.h>
#include <stdio.h>

#define DT_DIFF_MAX_TENSORS 8   /* differing tensors kept for the first mismatch */
#define DT_DIFF_MAX_ROWS 8      /* differing row indices kept per tensor */
#define DT_DIFF_MAX_LIST 5      /* missing events kept per side */

enum dt_trace_class { DT_CLASS_NONE = 0, DT_CLASS_ORIGIN, DT_CLASS_DOWNSTREAM };
enum dt_trace_verdict {
    DT_VERDICT_IDENTICAL = 0,   /* every aligned event matches, nothing missing/reordered */
    DT_VERDICT_ORIGIN,          /* first mismatch is an origin candidate */
    DT_VERDICT_OUTSIDE,         /* first mismatch is downstream: origin outside capture */
    DT_VERDICT_EVENTS_DIFFER,   /* digests all match, but events are missing or reordered */
    DT_VERDICT_RANK_MISSING     /* the rank file exists in only one capture */
};
enum dt_trace_cross {
    DT_CROSS_IDENTICAL = 0,
    DT_CROSS_SAME_ORIGIN_ALL,   /* every compared rank names the same origin op */
    DT_CROSS_ORIGIN_SOME,       /* only some ranks have an origin, or they name different ops */
    DT_CROSS_OUTSIDE_ALL,       /* no rank has an origin: it is outside the capture */
    DT_CROSS_EVENTS_ONLY        /* no digest mismatch; only missing/reordered events/ranks */
};

typedef struct dt_trace_key {
    int64_t step;
    int32_t micro;
    uint32_t occurrence;
    int phase, level;
    long index;                 /* position in its capture's execution order */
    char scope[256], op[96], variant[16];
} dt_trace_key;

typedef struct dt_trace_tensor_diff {
    int is_output, index;
    char name[64];
    uint64_t digest_a, digest_b;
    int layout_differs;         /* name, dtype or shape differ (or the tensor is missing) */
    char layout_a[96], layout_b[96];  /* "f32[4,8]" */
    int64_t rows, rows_per_chunk;     /* per-row digests (0 if none on both sides) */
    int64_t chunks_differ;
    int64_t first_rows[DT_DIFF_MAX_ROWS]; /* first row of each differing chunk */
    int nfirst_rows;
} dt_trace_tensor_diff;

typedef struct dt_trace_rank_result {
    int rank;
    int in_a, in_b;
    size_t events_a, events_b, aligned;
    size_t mismatches;          /* aligned events whose tensors differ */
    size_t later_downstream;    /* later mismatches whose inputs differ */
    size_t later_enclosing;     /* coarser events around the first mismatch (a module whose
                                 * inputs match and whose outputs contain the origin's) */
    size_t later_inputs_match;  /* other events with matching inputs: another candidate */
    size_t missing_in_b, missing_in_a, order_diffs, path_diffs;
    int verdict;                /* enum dt_trace_verdict */
    int first_class;            /* enum dt_trace_class */
    dt_trace_key first;         /* the first mismatch (index in A) */
    dt_trace_tensor_diff tensors[DT_DIFF_MAX_TENSORS];
    int ntensors, ntensors_total;
    dt_trace_key missing_b[DT_DIFF_MAX_LIST], missing_a[DT_DIFF_MAX_LIST];
    dt_trace_key order_before, order_after; /* A runs before then after; B the reverse */
    dt_trace_key path_first;    /* first event whose variant/kernel info differs */
    char path_a[128], path_b[128];
    int level_a, level_b;
} dt_trace_rank_result;

typedef struct dt_trace_diff_result {
    int nranks;
    dt_trace_rank_result *ranks; /* sorted by rank; owned, dt_trace_diff_free */
    int cross;                   /* enum dt_trace_cross */
    int mismatch;                /* 1 if any difference at all (exit code 1) */
} dt_trace_diff_result;

typedef struct dt_trace_diff_opts {
    const char *a, *b;           /* trace dirs (rank_*.trace) or single files */
    int rank;                    /* -1: all ranks */
    int allow_unclosed;
} dt_trace_diff_opts;

/* Loads, aligns and classifies. DT_OK with *res filled (res->mismatch says whether any
 * difference was found); an error (usage, I/O, malformed or truncated file naming the
 * file and offset) leaves *res empty. */
dt_status dt_trace_diff(const dt_trace_diff_opts *o, dt_trace_diff_result *res);
void dt_trace_diff_free(dt_trace_diff_result *res);

/* Human-readable report / one JSON object. */
void dt_trace_diff_print(const dt_trace_diff_opts *o, const dt_trace_diff_result *res, FILE *out);
void dt_trace_diff_print_json(const dt_trace_diff_opts *o, const dt_trace_diff_result *res, FILE *out);

const char *dt_trace_verdict_name(int verdict);
const char *dt_trace_cross_name(int cross);
/* 1 when two tensors of aligned events differ: name, dtype or shape, digest, or a per-row
 * digest (either NULL counts as different). The test every verdict above uses. */
struct dt_trace_rec_tensor;
int dt_trace_tensor_differs(const struct dt_trace_rec_tensor *a, const struct dt_trace_rec_tensor *b);
/* The cross-rank summary as a sentence with the next step to take (the report's text). */
const char *dt_trace_cross_text(int cross);

#endif
