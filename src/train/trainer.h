/* The training loop: data, model, optimizer, schedule, eval, metrics, console,
 * checkpoints (save every N steps and at the end; strict load for a bitwise resume).
 *
 * dt_train_run owns everything it creates and frees it before returning. The caller
 * (cli/cmd_train.c) parses and resolves the flags (config/train_config.h) and applies
 * deterministic mode before calling it. */
#ifndef DT_TRAIN_TRAINER_H
#define DT_TRAIN_TRAINER_H

#include "config/train_config.h"
#include "detrain/detrain.h"

#include <stdint.h>

dt_status dt_train_run(const dt_train_config *cfg);

#endif
