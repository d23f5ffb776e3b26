/* Shared pieces of the training loops (see train_common.h). */
#include "train/train_common.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

dt_status dt_train_accum(const dt_train_config *cfg, int *accum) {
    if (cfg->global_batch % cfg->micro_batch)
        return dt_fail(DT_EINVAL, "--global-batch-size %d is not a multiple of --micro-batch-size %d",
                       cfg->global_batch, cfg->micro_batch);
    *accum = cfg->global_batch / cfg->micro_batch;
    return DT_OK;
}

dt_status dt_train_open_data(const dt_train_config *cfg, dt_dataset **out) {
    dt_status st = dt_dataset_open(out, cfg->data_path, cfg->gpt.vocab_size, cfg->seed,
                                   cfg->val_fraction, cfg->micro_batch, cfg->seq_length);
    if (st != DT_OK) return dt_fail_context(st, "--data-path");
    if (cfg->eval_interval > 0 && dt_dataset_val_windows(*out) == 0)
        return dt_fail(DT_EINVAL, "--eval-interval %d needs a validation split; set "
                       "--val-fraction > 0 or --eval-interval 0", cfg->eval_interval);
    return DT_OK;
}

dt_status dt_train_make_log_dir(const char *dir) {
    if (mkdir(dir, 0755) == 0) return DT_OK;
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return dt_fail(DT_EIO, "--log-dir %s: cannot create the directory", dir);
    return DT_OK;
}

float dt_train_lr(const dt_train_config *cfg, int64_t step) {
    dt_lr_schedule sched = {cfg->lr, cfg->min_lr, cfg->warmup_iters, cfg->decay_iters};
    return dt_lr_at(&sched, step);
}

int dt_train_eval_due(const dt_train_config *cfg, int64_t step) {
    return cfg->eval_interval > 0 && (step % cfg->eval_interval == 0 || step == cfg->train_iters);
}

void dt_train_fill_metrics(dt_step_metrics *sm, const dt_train_config *cfg, int64_t step,
                           double loss, const dt_grad_stats *gs, float lr) {
    memset(sm, 0, sizeof *sm);
    sm->step = step;
    sm->loss = loss;
    sm->grad_norm = gs->grad_norm;
    sm->param_norm = gs->param_norm;
    sm->num_zeros = gs->num_zeros;
    sm->lr = lr;
    sm->consumed_samples = step * (int64_t)cfg->global_batch;
    sm->consumed_tokens = sm->consumed_samples * cfg->seq_length;
}

double dt_train_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

void dt_train_finish_metrics(dt_step_metrics *sm, const dt_train_config *cfg, double t0_ms) {
    sm->step_ms = dt_train_now_ms() - t0_ms;
    sm->tok_per_s = (double)cfg->global_batch * cfg->seq_length / (sm->step_ms / 1e3);
}

void dt_train_console(const dt_train_config *cfg, const dt_step_metrics *sm, int64_t first_step,
                      double *elapsed) {
    if (sm->step > first_step) *elapsed += sm->step_ms;
    if (cfg->quiet || !(sm->step % cfg->log_interval == 0 || sm->step == cfg->train_iters || sm->has_eval))
        return;
    char line[512];
    double avg = sm->step > first_step ? *elapsed / (double)(sm->step - first_step) : sm->step_ms;
    dt_metrics_console_line(line, sizeof line, sm, cfg->train_iters, avg);
    printf("%s\n", line);
    fflush(stdout);
}
