/* Fault injection for testing the tracing workflow (issue 5, DESIGN §6):
 * `--inject-nondeterminism OP@STEP` perturbs one named op at one step, so a traced run and
 * its injected twin differ at exactly that op and trace-diff must name it as the origin.
 * Deterministic mode refuses the flag unless --debug-allow-injection is also given
 * (src/core/determinism.c). The op dispatcher asks dt_inject_should(op, step) after it
 * ran an op and, on 1, perturbs the op's output with dt_inject_flip_lsb. */
#ifndef DT_TRACE_INJECT_H
#define DT_TRACE_INJECT_H

#include "detrain/detrain.h"

#include <stddef.h>
#include <stdint.h>

typedef struct dt_inject {
    int enabled;
    char op[96];     /* exact op name as the dispatcher reports it ("layernorm_bwd") */
    int64_t step;
} dt_inject;

/* Parses "OP@STEP": OP non-empty (no '@', no spaces, < 96 chars), STEP a non-negative
 * decimal integer. */
dt_status dt_inject_parse(const char *spec, dt_inject *out);
/* Installs the process-wide injection (NULL or !enabled: none) and re-arms it. */
void dt_inject_set(const dt_inject *cfg);
/* 1 exactly once per process: on the first call whose op and step match the installed
 * injection (the first occurrence of OP in step STEP, i.e. micro-batch 0); 0 otherwise.
 * Cheap when no injection is installed. */
int dt_inject_should(const char *op, int64_t step);
/* 1 once the injection has fired. */
int dt_inject_fired(void);
/* 1 while an injection is installed and has not fired yet (the GPU model then launches
 * every op itself instead of replaying a recorded graph, so the op can be perturbed). */
int dt_inject_pending(void);

/* Flips the lowest mantissa bit of one element: the first element of largest magnitude
 * (a change there is least likely to be absorbed downstream). Returns its index, or
 * (size_t)-1 when n == 0. Deterministic: the same buffer gets the same flip. */
size_t dt_inject_flip_lsb(float *x, size_t n);
/* Flips the lowest mantissa bit of every element: the perturbation the trainer injects.
 * One flipped bit in one gradient element can be absorbed by a later rounding (the fault
 * then never reaches the metrics); flipping all of them cannot be. */
void dt_inject_flip_all(float *x, size_t n);

#endif
