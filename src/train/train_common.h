/* The host side of a training run (loop.c): data, the host views of the parameters and
 * the AdamW state, batch buffers, the metrics log, checkpoints, the schedule, console lines.
 *
 * Checkpoints go through the host views (dt_train_state.model: parameters only, and .opt):
 * the CPU backend trains in them; a device backend copies its state into them
 * (backend.h's sync_state) before a save, so every backend writes and reads the same
 * checkpoint files. */
#ifndef DT_TRAIN_COMMON_H
#define DT_TRAIN_COMMON_H

#ifdef __cplusplus
extern "C" {
#endif

#include "ckpt/ckpt.h"
#include "data/dataset.h"
#include "dist/comm.h"
#include "metrics/metrics.h"
#include "optim/optim.h"
#include "train/trainer.h"

/* The host side of a training run: the data, the host views (the parameters and the AdamW
 * state; a backend starts from them), the batch buffers, the metrics log and the checkpoint
 * config. */
typedef struct dt_train_state {
    const dt_train_config *cfg;
    dt_dataset *data;
    dt_gpt *model;
    dt_adamw opt;
    dt_metrics *metrics;
    int *inputs, *targets;        /* one micro-batch */
    int accum;                    /* micro-batches per step on each rank (A) */
    int rank, size;               /* this process's data-parallel rank of size (dist/dp.h) */
    int64_t start_step;           /* steps already taken (a resumed run: the checkpoint's) */
    dt_ckpt_config ck;            /* the config as checkpoints record it */
    struct dt_runlock *lock;      /* --save and --log-dir locks (core/runlock.h) */
} dt_train_state;

/* Everything read before anything is written, so a bad input leaves no files behind: the
 * micro-batch count of each of comm's ranks (the global batch must be a multiple of the
 * micro-batch times the ranks, dist/dp.h), the refusal of an old trace
 * file (dt_trace_precheck), the data (eval needs a validation split), the seeded
 * parameters (no gradients or activations: the backend adds its own) and AdamW state, then
 * the initial state: --init-from-hf loads Hugging Face
 * weights; --load verifies the checkpoint against this run's config and restores the
 * parameters, the optimizer state (unless --no-load-optim) and the data cursor, checks
 * that the data's size and the step's counters agree and that --train-iters leaves steps
 * to do, and sets start_step. On failure call dt_train_state_close. */
dt_status dt_train_state_open(dt_train_state *r, const dt_train_config *cfg, const dt_comm *comm);
/* The run's outputs. Ranks other than 0 (of several) only create --log-dir and their own
 * <log-dir>/rank_NNN/ (their env.json; dt_train_write_env) and the batch buffers; rank 0
 * writes the run's: first the refusal of a --save directory holding another run's
 * checkpoints (dt_ckpt_save_dir_check) and the locks on --save and --log-dir for the
 * run's lifetime (core/runlock.h; released by dt_train_state_close); then --log-dir, --save's
 * directory (created durably, so a bad path fails before the first step), the batch
 * buffers and the metrics log (appended to on resume). env.json follows with
 * dt_train_write_env. */
dt_status dt_train_state_outputs(dt_train_state *r);
/* env.json in --log-dir (rank r > 0 of several: in <log-dir>/rank_NNN/; env_extra: the
 * backend's device description, or NULL), then, on rank 0, with
 * warn after a --load, a warning on stderr when the checkpoint was saved in another
 * environment (its "contract" differs: outside the determinism contract, as `detrain
 * compare` says). No-op without --log-dir. */
dt_status dt_train_write_env(const dt_train_state *r, const char *env_extra, int warn);
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
