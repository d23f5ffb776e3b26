/* Shared pieces of the training loops (see train_common.h). */
#include "train/train_common.h"

#include "ckpt/ckpt.h"
#include "ckpt/durable.h"
#include "ckpt/hf_gpt2.h"
#include "core/fingerprint.h"
#include "core/runlock.h"
#include "dist/dp.h"
#include "metrics/compare.h"
#include "trace/trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static dt_status open_data(const dt_train_config *cfg, dt_dataset **out) {
    dt_status st = dt_dataset_open_source(out, cfg->data_path, cfg->synthetic, cfg->gpt.vocab_size, cfg->seed,
                                          cfg->val_fraction, cfg->micro_batch, cfg->seq_length);
    if (st != DT_OK) return dt_fail_context(st, "--data-path");
    if (cfg->eval_interval > 0 && dt_dataset_val_windows(*out) == 0)
        return dt_fail(DT_EINVAL, "--eval-interval %d needs a validation split; set "
                       "--val-fraction > 0 or --eval-interval 0", cfg->eval_interval);
    return DT_OK;
}

static dt_status make_log_dir(const char *dir) {
    if (mkdir(dir, 0755) == 0) return DT_OK;
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return dt_fail(DT_EIO, "--log-dir %s: cannot create the directory", dir);
    return DT_OK;
}

/* The run's initial state, read before anything is written (so a bad input leaves no
 * files behind). accum: global micro-batches a step (every rank's). --init-from-hf: the
 * Hugging Face weights into model->param_mem. --load:
 * dt_ckpt_load verifies the checkpoint against ck (this run's config as checkpoints record
 * it) and restores the parameters, the optimizer state (unless --no-load-optim) and the
 * data cursor; the data's size and the step's counters must agree, and --train-iters must
 * leave steps to do. *start_step: the checkpoint's step, 0 without --load. */
static dt_status start_state(const dt_train_config *cfg, const dt_ckpt_config *ck, int accum, int talk,
                             dt_dataset *data, dt_gpt *model, dt_adamw *opt, int64_t *start_step) {
    *start_step = 0;
    if (cfg->load_dir && cfg->init_from_hf)
        return dt_fail(DT_EINVAL, "--load and --init-from-hf both set: a resumed run takes its weights "
                       "from the checkpoint; drop one of them");
    if (cfg->init_from_hf) {
        dt_status st = dt_hf_gpt2_import(cfg->init_from_hf, &cfg->gpt, model->param_mem);
        return st == DT_OK ? DT_OK : dt_fail_context(st, "--init-from-hf %s", cfg->init_from_hf);
    }
    if (!cfg->load_dir) return DT_OK;
    dt_ckpt_load_opts lo = {!cfg->no_load_optim, !cfg->no_load_rng};
    dt_ckpt_state s;
    dt_status st = dt_ckpt_load(cfg->load_dir, ck, &lo, model, opt, &s);
    if (st != DT_OK) return st;
    if (s.train_windows != dt_dataset_train_windows(data))
        return dt_fail(DT_EMISMATCH, "--load %s: the checkpoint's data has %llu training windows but "
                       "this run's has %llu: the data changed; resume on the same data",
                       cfg->load_dir, (unsigned long long)s.train_windows,
                       (unsigned long long)dt_dataset_train_windows(data));
    int64_t samples, micro;
    if (__builtin_mul_overflow(s.step, (int64_t)cfg->global_batch, &samples) ||
        __builtin_mul_overflow(s.step, (int64_t)accum, &micro) || s.consumed_samples != samples ||
        s.micro_steps != micro)
        return dt_fail(DT_ECORRUPT, "--load %s: consumed samples %lld / dropout micro-steps %lld do not "
                       "follow from step %lld", cfg->load_dir, (long long)s.consumed_samples,
                       (long long)s.micro_steps, (long long)s.step);
    if (s.step >= cfg->train_iters)
        return dt_fail(DT_EINVAL, "--load %s is at step %lld: --train-iters %lld leaves nothing to do; "
                       "raise --train-iters", cfg->load_dir, (long long)s.step, (long long)cfg->train_iters);
    if ((st = dt_dataset_set_cursor(data, s.cursor)) != DT_OK)
        return dt_fail_context(st, "--load %s", cfg->load_dir);
    *start_step = s.step;
    if (talk)
        printf("detrain: resumed from %s at step %lld%s%s\n", cfg->load_dir, (long long)s.step,
               cfg->no_load_optim ? " (fresh optimizer state)" : "",
               cfg->no_load_rng ? " (this run's seed)" : "");
    return DT_OK;
}

/* After a --load, with this run's env.json already in log_dir: a warning on stderr when
 * the checkpoint's env.json "contract" differs (a resumed run in another environment is
 * outside the determinism contract; `detrain compare` says the same). Silent otherwise. */
static void warn_environment(const char *load_dir, const char *log_dir) {
    char it[4096], a[4200], b[4200], keys[1024];
    int ndiff = 0;
    if (dt_ckpt_resolve(load_dir, it, sizeof it) != DT_OK) return;
    snprintf(a, sizeof a, "%s/%s", it, DT_CKPT_ENV_NAME);
    snprintf(b, sizeof b, "%s/env.json", log_dir);
    if (dt_compare_fingerprints(a, b, keys, sizeof keys, &ndiff) == DT_OK && ndiff)
        fprintf(stderr, "detrain: warning: the checkpoint was saved in another environment (contract "
                "fields differ: %s); a resumed run is bitwise identical only in the same environment\n",
                keys);
}

/* --save: creates the directory (one level, durably) before training, so a bad path fails
 * before the first step rather than at the first save. */
static dt_status make_save_dir(const dt_train_config *cfg) {
    dt_status st = cfg->save_dir ? dt_durable_mkdir(cfg->save_dir) : DT_OK;
    return st == DT_OK ? DT_OK
                       : dt_fail_context(st, "--save %s (its parent directory must exist)", cfg->save_dir);
}

int dt_train_save_due(const dt_train_config *cfg, int64_t step) {
    return cfg->save_dir &&
           ((cfg->save_interval > 0 && step % cfg->save_interval == 0) || step == cfg->train_iters);
}

dt_status dt_train_save(const dt_train_state *r, int64_t step, const char *env_extra) {
    const dt_train_config *cfg = r->cfg;
    dt_ckpt_state s = {
        .step = step,
        .consumed_samples = step * (int64_t)cfg->global_batch,
        .consumed_tokens = step * (int64_t)cfg->global_batch * cfg->seq_length,
        .cursor = dt_dataset_get_cursor(r->data),
        .train_windows = dt_dataset_train_windows(r->data),
        .seed = cfg->seed,
        .micro_steps = step * (int64_t)r->accum * r->size,
    };
    return dt_ckpt_save_env(cfg->save_dir, r->model, &r->opt, &s, &r->ck, env_extra);
}

/* env.json's "config" (core/fingerprint.h): every env.json of the run records its flags. */
static dt_status record_config(const dt_train_config *cfg) {
    size_t cap = 1 << 17;
    char *bind = malloc(cap), *run = malloc(cap);
    dt_status st = bind && run ? DT_OK : dt_fail(DT_ENOMEM, "out of memory for the run's config");
    if (st == DT_OK) {
        dt_train_config_json(cfg, 1, bind, cap);
        dt_train_config_json(cfg, 0, run, cap);
        st = dt_fingerprint_set_config(bind, run);
    }
    free(bind);
    free(run);
    return st;
}

dt_status dt_train_state_open(dt_train_state *r, const dt_train_config *cfg, const dt_comm *comm) {
    memset(r, 0, sizeof *r);
    r->cfg = cfg;
    r->rank = dt_comm_rank(comm);
    r->size = dt_comm_size(comm);
    dt_status st = record_config(cfg);
    if (st == DT_OK) st = dt_dp_accum(cfg->global_batch, cfg->micro_batch, r->size, &r->accum);
    if (st != DT_OK) return st;
    /* an old trace stops the run before any log or checkpoint is created */
    if ((st = dt_trace_precheck(&cfg->trace, 0)) != DT_OK) return st;
    dt_train_ckpt_config(cfg, &r->ck);
    /* the number of ranks binds a deterministic trajectory (the gradient sum and the
     * statistics add per-rank partials); in default mode a resume may change it, since the
     * checkpoint holds the whole state and the global data position */
    dt_ckpt_config_int(&r->ck, "data_parallel_size", "mpirun -np", r->size, cfg->deterministic);
    if ((st = open_data(cfg, &r->data)) != DT_OK) return st;
    /* the parameters only: a backend adds what it trains with (backend.h) */
    if ((st = dt_gpt_create_params(&r->model, &cfg->gpt, cfg->seed)) != DT_OK) return st;
    dt_adamw_config ac = {cfg->beta1, cfg->beta2, cfg->eps, cfg->weight_decay, cfg->clip_grad};
    if ((st = dt_adamw_init(&r->opt, &ac, r->model->num_params)) != DT_OK) return st;
    /* a checkpoint or Hugging Face weights replace the seeded init */
    return start_state(cfg, &r->ck, r->accum * r->size, !cfg->quiet && r->rank == 0, r->data, r->model, &r->opt,
                       &r->start_step);
}

/* Rank r > 0 of several writes its env.json into <log-dir>/rank_NNN/ (rank 0's is
 * <log-dir>/env.json, as a single process's). */
static void rank_dir(const dt_train_state *r, char *out, size_t cap) {
    if (r->rank == 0) snprintf(out, cap, "%s", r->cfg->log_dir);
    else snprintf(out, cap, "%s/rank_%03d", r->cfg->log_dir, r->rank);
}

dt_status dt_train_state_outputs(dt_train_state *r) {
    const dt_train_config *cfg = r->cfg;
    dt_status st;
    size_t bt = (size_t)cfg->micro_batch * cfg->seq_length;
    r->inputs = malloc(sizeof(int) * bt);
    r->targets = malloc(sizeof(int) * bt);
    if (!r->inputs || !r->targets) return dt_fail(DT_ENOMEM, "out of memory for the batch");
    if (r->rank != 0) {
        /* the others write their own env.json only */
        char dir[4200];
        rank_dir(r, dir, sizeof dir);
        if (cfg->log_dir && ((st = make_log_dir(cfg->log_dir)) != DT_OK || (st = make_log_dir(dir)) != DT_OK)) return st;
        return DT_OK;
    }
    if ((st = dt_ckpt_save_dir_check(cfg->save_dir, cfg->load_dir, cfg->save_overwrite)) != DT_OK) return st;
    if ((st = dt_runlock_acquire(&r->lock, (const char *[]){cfg->save_dir, cfg->log_dir},
                                 (const char *[]){"--save", "--log-dir"}, 2)) != DT_OK) return st;
    if (cfg->log_dir && (st = make_log_dir(cfg->log_dir)) != DT_OK) return st;
    if ((st = make_save_dir(cfg)) != DT_OK) return st;
    if (cfg->log_dir) {
        /* a resumed run appends to an existing log (metrics.h: the resume rule) */
        dt_metrics_opts mo = {cfg->load_dir != NULL, 1};
        if ((st = dt_metrics_open(&r->metrics, cfg->log_dir, &mo)) != DT_OK) return st;
    }
    return DT_OK;
}

dt_status dt_train_write_env(const dt_train_state *r, const char *env_extra, int warn) {
    const dt_train_config *cfg = r->cfg;
    if (!cfg->log_dir) return DT_OK;
    char dir[4200];
    rank_dir(r, dir, sizeof dir);
    dt_status st = dt_fingerprint_write(dir, env_extra);
    if (st == DT_OK && warn && cfg->load_dir && r->rank == 0) warn_environment(cfg->load_dir, cfg->log_dir);
    return st;
}

dt_status dt_train_state_close(dt_train_state *r, dt_status st) {
    if (r->metrics) {
        dt_status cst = dt_metrics_close(r->metrics);
        if (st == DT_OK) st = cst;
    }
    dt_dataset_free(r->data);
    dt_gpt_free(r->model);
    dt_adamw_free(&r->opt);
    free(r->inputs);
    free(r->targets);
    dt_ckpt_config_free(&r->ck);
    dt_runlock_release(r->lock);
    memset(r, 0, sizeof *r);
    return st;
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
