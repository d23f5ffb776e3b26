/* The optimizer (see optim.h): AdamW's state and steps, the gradient statistics and the
 * learning-rate schedule; the update's arithmetic is ops/adamw (adamw_cpu.c). */
#include "optim/optim.h"

#include "ops/adamw/adamw.h"
#include "ops/reduce/reduce.h"

#include <math.h>
#include <stdlib.h>

dt_status dt_adamw_init(dt_adamw *opt, const dt_adamw_config *cfg, size_t n) {
    opt->cfg = *cfg;
    opt->n = n;
    opt->t = 0;
    opt->m = calloc(n, sizeof(float));
    opt->v = calloc(n, sizeof(float));
    if (!opt->m || !opt->v) {
        dt_adamw_free(opt);
        return dt_fail(DT_ENOMEM, "out of memory for optimizer state (%zu floats x 2)", n);
    }
    return DT_OK;
}

void dt_adamw_free(dt_adamw *opt) {
    free(opt->m);
    free(opt->v);
    opt->m = opt->v = NULL;
}

void dt_grad_stats_compute(const dt_gpt *m, dt_grad_stats *s) {
    int det = dt_reduce_choose(DT_OP_NORM) == DT_REDUCE_DET;
    double g2 = det ? dt_sumsq_det(m->grad_mem, m->num_params) : dt_sumsq_fast(m->grad_mem, m->num_params);
    double p2 = det ? dt_sumsq_det(m->param_mem, m->num_params) : dt_sumsq_fast(m->param_mem, m->num_params);
    s->grad_norm = sqrt(g2);
    s->param_norm = sqrt(p2);
    s->num_zeros = dt_count_zeros(m->grad_mem, m->num_params);
}

void dt_adamw_step(dt_adamw *opt, dt_gpt *m, float lr, double grad_norm) {
    dt_adamw_step_at(opt, m, lr, grad_norm, opt->t + 1);
}

void dt_adamw_step_at(dt_adamw *opt, dt_gpt *m, float lr, double grad_norm, int64_t t) {
    const dt_adamw_config *c = &opt->cfg;
    opt->t = t;
    float clip = 1.0f;
    if (c->clip_grad > 0.0f && grad_norm > c->clip_grad)
        clip = (float)(c->clip_grad / (grad_norm + 1e-6));
    float bc1 = 1.0f - powf(c->beta1, (float)opt->t), bc2 = 1.0f - powf(c->beta2, (float)opt->t);
    dt_adamw_hparams h = {.lr = lr, .beta1 = c->beta1, .beta2 = c->beta2, .eps = c->eps,
                          .bc1 = bc1, .bc2 = bc2, .clip = clip};
    for (int i = 0; i < DT_NUM_PARAM_TENSORS; i++) {
        const dt_param_desc *d = &m->params[i];
        h.wd = d->decay ? c->weight_decay : 0.0f;
        dt_adamw_update(m->param_mem + d->offset, m->grad_mem + d->offset, opt->m + d->offset, opt->v + d->offset,
                        d->numel, &h);
    }
}

float dt_lr_at(const dt_lr_schedule *s, int64_t it) {
    if (s->warmup_iters > 0 && it <= s->warmup_iters)
        return s->lr * (float)it / (float)s->warmup_iters;
    if (it >= s->decay_iters) return s->min_lr;
    double span = (double)(s->decay_iters - s->warmup_iters);
    double ratio = span > 0 ? (double)(it - s->warmup_iters) / span : 1.0;
    double coeff = 0.5 * (1.0 + cos(M_PI * ratio));
    return (float)(s->min_lr + coeff * (s->lr - s->min_lr));
}
