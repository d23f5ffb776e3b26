/* The one training loop (loop.c): every backend (backend/backend.h), every command that
 * trains (`detrain train`, and `detrain bench`, which is this loop with timers and
 * profiling through the hooks below).
 *
 * Per step: the micro-batches' forward and backward, the gradient hook (data-parallel
 * reduction), the step (statistics and AdamW), metrics, eval, checkpoints, console. The
 * loop owns the run's state (train_common.h) and frees everything it made before it
 * returns. */
#ifndef DT_TRAIN_LOOP_H
#define DT_TRAIN_LOOP_H

#ifdef __cplusplus
extern "C" {
#endif

#include "backend/backend.h"
#include "metrics/metrics.h"

struct dt_train_state;

/* What a caller (the bench) adds to the loop; each may be NULL. A hook's error stops the
 * run with that error. */
typedef struct dt_loop_hooks {
    void *ctx;
    /* Once, after the backend exists and before the first step. */
    dt_status (*started)(void *ctx, dt_backend *b, const struct dt_train_state *r);
    /* Before step `step` starts (the bench switches profiling here). */
    dt_status (*before_step)(void *ctx, dt_backend *b, int64_t step);
    /* After step sm->step ended (its metrics complete). */
    dt_status (*after_step)(void *ctx, dt_backend *b, const dt_step_metrics *sm);
    /* Once, after the last step, before the backend is freed. */
    dt_status (*finished)(void *ctx, dt_backend *b);
    /* Every training micro-batch's input tokens (n = B T) as the loop read them. */
    void (*batch)(void *ctx, const int *inputs, int n);
} dt_loop_hooks;

/* Trains cfg (parsed, resolved, deterministic mode applied) on one process. */
dt_status dt_train_loop(const dt_train_config *cfg, const dt_loop_hooks *hooks);

#ifdef __cplusplus
}
#endif

#endif
