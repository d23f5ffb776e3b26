/* The training loop: data, model, optimizer, schedule, eval, metrics, console.
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
    const char *data_path;        /* NULL: built-in corpus */
    float val_fraction;
    const char *log_dir;          /* NULL: no files */
    int log_interval, eval_interval, eval_iters;
    int quiet;                    /* no console lines */
    dt_trace_config trace;        /* --trace-level/-steps/-ranks/-dir */
} dt_train_config;

dt_status dt_train_run(const dt_train_config *cfg);

#endif
