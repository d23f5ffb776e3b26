/* Pieces of the training loop shared by the CPU loop (trainer.c) and the CUDA loop
 * (train_cuda.cu), so both read their flags, data, logs and checkpoints the same way.
 *
 * Checkpoints go through a host model and a host AdamW state: the CPU loop trains in them;
 * the CUDA loop uses them as staging (it uploads after dt_train_start_state and downloads
 * before dt_train_save), so both backends write and read the same checkpoint files. */
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
/* The run's initial state, read before anything is written (so a bad input leaves no
 * files behind). --init-from-hf: the Hugging Face weights into model->param_mem. --load:
 * dt_ckpt_load verifies the checkpoint against ck (this run's config as checkpoints record
 * it, dt_train_ckpt_config) and restores the parameters, the optimizer state (unless
 * --no-load-optim) and the data cursor; the data's size and the step's counters must
 * agree, and --train-iters must leave steps to do. *start_step: the checkpoint's step, 0
 * without --load. On failure model, opt and data may be partly restored: the caller frees
 * them. */
dt_status dt_train_start_state(const dt_train_config *cfg, const struct dt_ckpt_config *ck, int accum,
                               dt_dataset *data, dt_gpt *model, dt_adamw *opt, int64_t *start_step);
/* After a --load, with this run's env.json already in log_dir: a warning on stderr when
 * the checkpoint's env.json "contract" differs (a resumed run in another environment is
 * outside the determinism contract; `detrain compare` says the same). Silent otherwise. */
void dt_train_warn_environment(const char *load_dir, const char *log_dir);
/* --save: creates the directory (one level, durably) before training, so a bad path fails
 * before the first step rather than at the first save. DT_OK without --save. */
dt_status dt_train_make_save_dir(const dt_train_config *cfg);
/* 1 when --save is set and step `step` ends with a save (every --save-interval steps and
 * the last step). */
int dt_train_save_due(const dt_train_config *cfg, int64_t step);
/* Saves the state after `step` steps under --save: model parameters, opt (m, v, t), the
 * data cursor and the counters that follow from the step. env_extra: NULL on the CPU; the
 * device description on the GPU (dt_ckpt_save_env). */
dt_status dt_train_save(const dt_train_config *cfg, const struct dt_ckpt_config *ck, int accum,
                        const dt_dataset *data, const dt_gpt *model, const dt_adamw *opt, int64_t step,
                        const char *env_extra);
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
