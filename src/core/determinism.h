/* Deterministic mode (DESIGN §2).
 *
 * dt_determinism_apply() runs first in main, before OpenMP, OpenBLAS, cuBLAS, NCCL or MPI
 * is touched through detrain, and does three things in order:
 *   1. validates the configuration: a set flag that has no deterministic path is rejected
 *      with an error naming the flag (never silently switched off);
 *   2. validates the environment: a set variable must hold an accepted value
 *      ("NAME='value' is not a deterministic setting; accepted: ..."), an unset one gets
 *      its canonical default (setenv without overwrite);
 *   3. switches the process into deterministic mode (dt_det() returns 1).
 * It is idempotent: a second call with the same request changes nothing. It refuses when a
 * library was initialised through detrain before it ran (dt_runtime_mark). There is no
 * compile-time switch that removes any of this. */
#ifndef DT_CORE_DETERMINISM_H
#define DT_CORE_DETERMINISM_H

#include "detrain/detrain.h"

/* One command-line flag the user set, as the CLI saw it. */
typedef struct dt_flag_use {
    const char *name;   /* "--op-variant" */
    const char *value;  /* "gemm=fast", or "" for a switch */
} dt_flag_use;

typedef struct dt_det_request {
    int enabled;                /* --deterministic-mode */
    const dt_flag_use *flags;   /* every flag set on the command line */
    int nflags;
} dt_det_request;

dt_status dt_determinism_apply(const dt_det_request *req);

/* 1 once deterministic mode is on. Every op reads this (via dt_op_variant) to pick its
 * branch. */
int dt_det(void);

/* A flag rule: a flag (optionally only with a value containing `value_has`) that has no
 * deterministic path. The table is exported for docs and tests. */
typedef struct dt_det_flag_rule {
    const char *flag;
    const char *value_has;  /* NULL: any value */
    const char *why;
    const char *instead;
    const char *waived_by;  /* a flag that, when also set, allows this one; NULL: none */
} dt_det_flag_rule;
const dt_det_flag_rule *dt_det_flag_rules(int *n);

/* An environment rule: the accepted values and the canonical default. */
typedef struct dt_det_env_rule {
    const char *name;
    const char *accepted;        /* human-readable list, used in the error message */
    int (*valid)(const char *value);
    const char *(*canonical)(void); /* default when unset; NULL: stays unset (recorded as such) */
} dt_det_env_rule;
const dt_det_env_rule *dt_det_env_rules(int *n);

/* Libraries detrain initialises; each init site calls dt_runtime_mark() first. */
enum { DT_LIB_OPENMP = 1, DT_LIB_BLAS = 2, DT_LIB_CUDA = 4, DT_LIB_CUBLAS = 8,
       DT_LIB_NCCL = 16, DT_LIB_MPI = 32 };
void dt_runtime_mark(int lib);
int dt_runtime_marked(void);

/* Initialises OpenMP and OpenBLAS threading from the (validated) environment:
 * OMP_NUM_THREADS threads, dynamic adjustment off. Call after dt_determinism_apply. */
dt_status dt_runtime_init(void);
int dt_num_threads(void);

/* Test-only: returns the process to the state before any apply (mode off, libs unmarked).
 * Environment variables that apply filled are left as they are. */
void dt_determinism_reset_for_tests(void);

#endif
