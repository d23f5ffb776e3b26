/* The training loop: data, model, optimizer, schedule, eval, metrics, console,
 * checkpoints (save every N steps and at the end; strict load for a bitwise resume).
 *
 * dt_train_run owns everything it creates and frees it before returning. The caller
 * (cli/cmd_train.c) parses flags into dt_train_config and applies deterministic mode
 * before calling it. */
#ifndef DT_TRAIN_TRAINER_H
#define DT_TRAIN_TRAINER_H

#include "detrain/detrain.h"
#include "model/gpt.h"
#include "trace/trace.h"

#include <stdint.h>

typedef struct dt_train_config {
    const char *model;            /* preset name */
    dt_gpt_config gpt;            /* resolved sizes (preset + explicit flags) */
    int seq_length;               /* T */
    int micro_batch;              /* B */
    int global_batch;             /* samples per step; multiple of micro_batch */
    int64_t train_iters;
    float lr, min_lr;
    int64_t warmup_iters, decay_iters;
    float weight_decay, clip_grad, beta1, beta2, eps;
    float hidden_dropout, attn_dropout;
    uint64_t seed;
    int deterministic;
    int device;                   /* --device: 0 cpu, 1 cuda (train_cuda.h) */
    const char *data_path;        /* NULL: built-in corpus */
    float val_fraction;
    const char *save_dir;         /* --save: NULL no checkpoints (ckpt/ckpt.h) */
    int64_t save_interval;        /* save every N steps (0: only at the end) */
    const char *load_dir;         /* --load: resume from a save or iteration directory */
    int no_load_optim, no_load_rng;
    int save_overwrite;           /* --save-overwrite: save over another run's checkpoints */
    const char *init_from_hf;     /* --init-from-hf: start from HF GPT-2 weights */
    const char *log_dir;          /* NULL: no files */
    int log_interval, eval_interval, eval_iters;
    int quiet;                    /* no console lines */
    dt_trace_config trace;        /* --trace-level/-steps/-ranks/-dir */
} dt_train_config;

dt_status dt_train_run(const dt_train_config *cfg);

/* The config as a checkpoint records it (ckpt/ckpt.h): what binds the trajectory and what
 * does not. Free with dt_ckpt_config_free. Defined in ckpt/ckpt_config.c. */
struct dt_ckpt_config;
void dt_train_ckpt_config(const dt_train_config *cfg, struct dt_ckpt_config *out);

#endif
