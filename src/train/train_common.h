/* Pieces of the training loop shared by the CPU loop (trainer.c) and the CUDA loop
 * (train_cuda.cu), so both read their flags, data, logs and checkpoints the same way.
 *
 * Checkpoints go through a host model and a host AdamW state (dt_train_state): the CPU loop
 * trains in them; the CUDA loop uses them as staging, so both backends write and read the
 * same checkpoint files. */
#ifndef DT_TRAIN_COMMON_H
#define DT_TRAIN_COMMON_H

#ifdef __cplusplus
extern "C" {
#endif

#include "ckpt/ckpt.h"
#include "data/dataset.h"
#include "metrics/metrics.h"
#include "optim/optim.h"
#include "train/trainer.h"

/* The host side of a training run, set up the same way by both loops: the data, a host
 * model and AdamW state (the CPU loop trains in them; the CUDA loop uploads them after
 * dt_train_state_open and downloads into them before dt_train_save), the batch buffers, the
 * metrics log and the checkpoint config. */
typedef struct dt_train_state {
    const dt_train_config *cfg;
    dt_dataset *data;
    dt_gpt *model;
    dt_adamw opt;
    dt_metrics *metrics;
    int *inputs, *targets;        /* one micro-batch */
    int accum;                    /* micro-batches per step */
    int64_t start_step;           /* steps already taken (a resumed run: the checkpoint's) */
    dt_ckpt_config ck;            /* the config as checkpoints record it */
    struct dt_runlock *lock;      /* --save and --log-dir locks (core/runlock.h) */
} dt_train_state;

/* Everything read before anything is written, so a bad input leaves no files behind: the
 * micro-batch count (the global batch must be a multiple), the refusal of an old trace
 * file (dt_trace_precheck), the data (eval needs a validation split), the seeded host
 * model and AdamW state, then the initial state: --init-from-hf loads Hugging Face
 * weights; --load verifies the checkpoint against this run's config and restores the
 * parameters, the optimizer state (unless --no-load-optim) and the data cursor, checks
 * that the data's size and the step's counters agree and that --train-iters leaves steps
 * to do, and sets start_step. On failure call dt_train_state_close. */
dt_status dt_train_state_open(dt_train_state *r, const dt_train_config *cfg);
/* The run's outputs: first the refusal of a --save directory holding another run's
 * checkpoints (dt_ckpt_save_dir_check) and the locks on --save and --log-dir for the
 * run's lifetime (core/runlock.h; released by dt_train_state_close); then --log-dir (with
 * env.json now when write_env, else the caller writes it with dt_train_write_env), --save's
 * directory (created durably, so a bad path fails before the first step), the batch
 * buffers and the metrics log (appended to on resume). */
dt_status dt_train_state_outputs(dt_train_state *r, int write_env);
/* env.json in --log-dir (env_extra: NULL on the CPU; the device description on the GPU),
 * then, after a --load, a warning on stderr when the checkpoint was saved in another
 * environment (its "contract" differs: outside the determinism contract, as `detrain
 * compare` says). No-op without --log-dir. */
dt_status dt_train_write_env(const dt_train_state *r, const char *env_extra);
/* Closes the metrics log and frees the run; returns st, or the close's error when st is
 * DT_OK. */
dt_status dt_train_state_close(dt_train_state *r, dt_status st);
/* 1 when --save is set and step `step` ends with a save (every --save-interval steps and
 * the last step). */
int dt_train_save_due(const dt_train_config *cfg, int64_t step);
/* Saves the state after `step` steps under --save: r's model parameters and AdamW state
 * (m, v, t), the data cursor and the counters that follow from the step. env_extra: NULL
 * on the CPU; the device description on the GPU (dt_ckpt_save_env). */
dt_status dt_train_save(const dt_train_state *r, int64_t step, const char *env_extra);
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
