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

void dt_grad_stats_partial(const dt_gpt *m, size_t off, size_t len, dt_grad_partial *p) {
    int det = dt_reduce_choose(DT_OP_NORM) == DT_REDUCE_DET;
    const float *g = m->grad_mem + off, *w = m->param_mem + off;
    p->g2 = det ? dt_sumsq_det(g, len) : dt_sumsq_fast(g, len);
    p->p2 = det ? dt_sumsq_det(w, len) : dt_sumsq_fast(w, len);
    p->zeros = dt_count_zeros(g, len);
}

void dt_grad_stats_finish(const dt_grad_partial *parts, int n, dt_grad_stats *s) {
    /* fixed order: the ranges' partials in range order */
    double g2 = parts[0].g2, p2 = parts[0].p2;
    int64_t z = parts[0].zeros;
    for (int j = 1; j < n; j++) {
        g2 += parts[j].g2;
        p2 += parts[j].p2;
        z += parts[j].zeros;
    }
    s->grad_norm = sqrt(g2);
    s->param_norm = sqrt(p2);
    s->num_zeros = z;
}

void dt_grad_stats_compute(const dt_gpt *m, dt_grad_stats *s) {
    dt_grad_partial p;
    dt_grad_stats_partial(m, 0, m->num_params, &p);
    dt_grad_stats_finish(&p, 1, s);
}

void dt_adamw_step(dt_adamw *opt, dt_gpt *m, float lr, double grad_norm) {
    dt_adamw_step_at(opt, m, lr, grad_norm, opt->t + 1);
}

void dt_adamw_step_at(dt_adamw *opt, dt_gpt *m, float lr, double grad_norm, int64_t t) {
    dt_adamw_step_range(opt, m, lr, grad_norm, t, 0, m->num_params);
}

void dt_adamw_step_range(dt_adamw *opt, dt_gpt *m, float lr, double grad_norm, int64_t t, size_t off, size_t len) {
    const dt_adamw_config *c = &opt->cfg;
    opt->t = t;
    float clip = 1.0f;
    if (c->clip_grad > 0.0f && grad_norm > c->clip_grad)
        clip = (float)(c->clip_grad / (grad_norm + 1e-6));
    float bc1 = 1.0f - powf(c->beta1, (float)opt->t), bc2 = 1.0f - powf(c->beta2, (float)opt->t);
    dt_adamw_hparams h = {.lr = lr, .beta1 = c->beta1, .beta2 = c->beta2, .eps = c->eps,
                          .bc1 = bc1, .bc2 = bc2, .clip = clip};
    size_t end = off + len;
    for (int i = 0; i < DT_NUM_PARAM_TENSORS; i++) {
        const dt_param_desc *d = &m->params[i];
        /* the part of tensor i inside [off, end) */
        size_t lo = d->offset > off ? d->offset : off, hi = d->offset + d->numel < end ? d->offset + d->numel : end;
        if (lo >= hi) continue;
        h.wd = d->decay ? c->weight_decay : 0.0f;
        dt_adamw_update(m->param_mem + lo, m->grad_mem + lo, opt->m + lo, opt->v + lo, hi - lo, &h);
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
