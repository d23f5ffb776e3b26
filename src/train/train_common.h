/* Pieces of the training loop shared by the CPU loop (trainer.c) and the CUDA loop
 * (train_cuda.cu), so both read their flags, data and logs the same way. */
#ifndef DT_TRAIN_COMMON_H
#define DT_TRAIN_COMMON_H

#include "data/dataset.h"
#include "metrics/metrics.h"
#include "optim/optim.h"
#include "train/trainer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Micro-batches per optimizer step; fails when the global batch is not a multiple. */
dt_status dt_train_accum(const dt_train_config *cfg, int *accum);
/* Opens the training data (B = micro-batch, T = seq length) and checks that eval has a
 * validation split. */
dt_status dt_train_open_data(const dt_train_config *cfg, dt_dataset **out);
/* Creates --log-dir (one level) unless it exists as a directory. */
dt_status dt_train_make_log_dir(const char *dir);
/* Learning rate of 1-based step `step` from the config's schedule. */
float dt_train_lr(const dt_train_config *cfg, int64_t step);
/* 1 when step `step` ends with an eval (every --eval-interval steps and the last step). */
int dt_train_eval_due(const dt_train_config *cfg, int64_t step);
/* Fills the step's metrics from the mean loss, gradient statistics and lr (wall-clock
 * fields and eval are the caller's). */
void dt_train_fill_metrics(dt_step_metrics *sm, const dt_train_config *cfg, int64_t step,
                           double loss, const dt_grad_stats *gs, float lr);
/* Sets the wall-clock fields from the step's start time (now_ms clock). */
void dt_train_finish_metrics(dt_step_metrics *sm, const dt_train_config *cfg, double t0_ms);
/* Monotonic clock in milliseconds. */
double dt_train_now_ms(void);
/* Console line when due (every --log-interval steps, the last step and eval steps);
 * `elapsed` accumulates step times after the run's first step (which warms caches). */
void dt_train_console(const dt_train_config *cfg, const dt_step_metrics *sm, int64_t first_step,
                      double *elapsed);

#ifdef __cplusplus
}
#endif

#endif
