/* Optimizer: AdamW with bias correction and decoupled weight decay (not applied to norms
 * and biases), global-norm gradient clipping, warmup + cosine learning-rate schedule.
 *
 * The update's arithmetic, shared with the GPU, is the adamw op family (ops/adamw/adamw.h:
 * elementwise, deterministic by nature); this module owns what sequences it: the state (m,
 * v, laid out like the parameters, owned by dt_adamw), the update count, the clip factor,
 * the learning-rate schedule. The global norms (DT_OP_NORM) are reductions of the reduce
 * family (ops/reduce/reduce.h; dt_reduce_choose): det uses fixed chunks in fixed order, fast
 * an OpenMP reduction. */
#ifndef DT_OPTIM_OPTIM_H
#define DT_OPTIM_OPTIM_H

#include "model/gpt.h"

typedef struct dt_adamw_config {
    float beta1, beta2, eps, weight_decay;
    float clip_grad;   /* 0: no clipping */
} dt_adamw_config;

typedef struct dt_adamw {
    dt_adamw_config cfg;
    size_t n;
    float *m, *v;      /* owned, n floats each */
    int64_t t;         /* number of updates taken */
} dt_adamw;

dt_status dt_adamw_init(dt_adamw *opt, const dt_adamw_config *cfg, size_t n);
void dt_adamw_free(dt_adamw *opt);

/* Statistics of the gradients and parameters, each a full-precision reduction. */
typedef struct dt_grad_stats {
    double grad_norm;   /* L2 norm of all gradients, before clipping */
    double param_norm;  /* L2 norm of all parameters, before the update */
    int64_t num_zeros;  /* gradient elements equal to 0 (padded vocab rows included) */
} dt_grad_stats;
void dt_grad_stats_compute(const dt_gpt *m, dt_grad_stats *s);

/* The statistics' sums over elements [off, off + len) of the slabs (data parallel: one
 * rank's chunk, dist/dp.h): squares of gradients and of parameters (each a DT_OP_NORM
 * reduction over the range) and the zero gradients. */
typedef struct dt_grad_partial {
    double g2, p2;
    int64_t zeros;
} dt_grad_partial;
void dt_grad_stats_partial(const dt_gpt *m, size_t off, size_t len, dt_grad_partial *p);
/* The statistics from the partials of n consecutive ranges covering the slabs, added in
 * range order (one range: exactly dt_grad_stats_compute's values). */
void dt_grad_stats_finish(const dt_grad_partial *parts, int n, dt_grad_stats *s);

/* One AdamW step at learning rate lr, clipping with the given grad_norm: opt->t + 1, then
 * dt_adamw_step_at with that t. */
void dt_adamw_step(dt_adamw *opt, dt_gpt *m, float lr, double grad_norm);
/* The update of step t (1-based, AdamW's bias correction) with opt->cfg; sets opt->t = t. */
void dt_adamw_step_at(dt_adamw *opt, dt_gpt *m, float lr, double grad_norm, int64_t t);
/* dt_adamw_step_at on elements [off, off + len) of the slabs only (ZeRO-1: a rank's shard;
 * m and v are read and written there only): elementwise, so each element gets the bits
 * the whole update gives it. */
void dt_adamw_step_range(dt_adamw *opt, dt_gpt *m, float lr, double grad_norm, int64_t t, size_t off, size_t len);

typedef struct dt_lr_schedule {
    float lr, min_lr;
    int64_t warmup_iters, decay_iters; /* cosine from lr to min_lr over decay_iters */
} dt_lr_schedule;
/* Learning rate for 1-based iteration `it`: linear warmup over warmup_iters (it/warmup*lr),
 * then cosine decay to min_lr at decay_iters, min_lr after. */
float dt_lr_at(const dt_lr_schedule *s, int64_t it);

#endif
