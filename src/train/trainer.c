/* The training loop (see trainer.h). */
#include "train/trainer.h"
#include "train/train_common.h"
#include "train/train_cuda.h"

#include "data/dataset.h"
#include "metrics/metrics.h"
#include "optim/optim.h"
#include "ops/op.h"
#include "trace/inject.h"
#include "trace/trace.h"

#include <stdio.h>
#include <string.h>

/* The CPU loop trains in the run's host model and AdamW state. */
typedef dt_train_state trainer;

/* Mean validation loss over eval_iters batches, summed in batch order. */
static dt_status evaluate(trainer *t, double *out) {
    dt_dataset_val_reset(t->data);
    t->model->training = 0;
    double sum = 0.0;
    for (int i = 0; i < t->cfg->eval_iters; i++) {
        double l;
        dt_status st = dt_dataset_next_val(t->data, t->inputs, t->targets);
        if (st == DT_OK) st = dt_gpt_forward(t->model, t->inputs, t->targets, &l);
        if (st != DT_OK) return st;
        sum += l;
    }
    *out = sum / t->cfg->eval_iters;
    return DT_OK;
}

static dt_status train_step(trainer *t, int64_t step, dt_step_metrics *sm) {
    const dt_train_config *cfg = t->cfg;
    double t0 = dt_train_now_ms(), loss_sum = 0.0;
    dt_gpt_zero_grad(t->model);
    t->model->training = 1;
    for (int micro = 0; micro < t->accum; micro++) {
        double l;
        /* dropout masks are keyed by the global micro-batch index */
        t->model->rng_step = (uint32_t)((step - 1) * t->accum + micro);
        t->model->step = step;
        dt_trace_set_step(step, micro);
        dt_status st = dt_dataset_next_train(t->data, t->inputs, t->targets);
        if (st == DT_OK) st = dt_gpt_forward(t->model, t->inputs, t->targets, &l);
        if (st != DT_OK) return st;
        loss_sum += l; /* micro-batches in order */
        dt_gpt_backward(t->model, 1.0f / (float)t->accum);
    }
    dt_trace_set_step(step, -1); /* step-level work: statistics and the optimizer */
    dt_gpt *mdl = t->model;
    dt_grad_stats gs;
    dt_tensor_ref grads = {.name = "grads", .data = mdl->grad_mem, .dtype = DT_DT_F32, .ndim = 1,
                           .shape = {(int64_t)mdl->num_params}};
    dt_tensor_ref params = {.name = "params", .data = mdl->param_mem, .dtype = DT_DT_F32, .ndim = 1,
                            .shape = {(int64_t)mdl->num_params}};
    dt_trace_op *h = NULL;
    if (dt_trace_on(DT_TRACE_SEMANTIC)) {
        dt_tensor_ref in[] = {grads, params};
        h = dt_trace_begin(DT_TRACE_SEMANTIC, DT_PHASE_OPT, "grad_stats",
                           dt_op_variant(DT_OP_NORM) == DT_VARIANT_DET ? "det" : "fast", in, 2);
    }
    dt_grad_stats_compute(mdl, &gs);
    if (h) {
        dt_tensor_ref out[] = {{.name = "grad_norm", .data = &gs.grad_norm, .dtype = DT_DT_F64},
                               {.name = "param_norm", .data = &gs.param_norm, .dtype = DT_DT_F64},
                               {.name = "num_zeros", .data = &gs.num_zeros, .dtype = DT_DT_I64}};
        dt_trace_end(h, out, 3);
    }
    float lr = dt_train_lr(cfg, step);
    h = NULL;
    dt_tensor_ref mstate = {.name = "adam_m", .data = t->opt.m, .dtype = DT_DT_F32, .ndim = 1,
                            .shape = {(int64_t)mdl->num_params}};
    dt_tensor_ref vstate = {.name = "adam_v", .data = t->opt.v, .dtype = DT_DT_F32, .ndim = 1,
                            .shape = {(int64_t)mdl->num_params}};
    if (dt_trace_on(DT_TRACE_SEMANTIC)) {
        dt_tensor_ref in[] = {params, grads, mstate, vstate};
        h = dt_trace_begin(DT_TRACE_SEMANTIC, DT_PHASE_OPT, "adamw", NULL, in, 4);
    }
    dt_adamw_step(&t->opt, mdl, lr, gs.grad_norm);
    if (dt_inject_should("adamw", step)) dt_inject_flip_all(mdl->param_mem, mdl->num_params);
    if (h) {
        dt_tensor_ref out[] = {params, mstate, vstate};
        dt_trace_end(h, out, 3);
    }
    dt_train_fill_metrics(sm, cfg, step, loss_sum / t->accum, &gs, lr);
    if (dt_train_eval_due(cfg, step)) {
        dt_status st = evaluate(t, &sm->eval_loss);
        if (st != DT_OK) return st;
        sm->has_eval = 1;
    }
    if (dt_trace_on(DT_TRACE_METRICS)) {
        dt_tensor_ref mt[] = {{.name = "loss", .data = &sm->loss, .dtype = DT_DT_F64},
                              {.name = "grad_norm", .data = &sm->grad_norm, .dtype = DT_DT_F64},
                              {.name = "param_norm", .data = &sm->param_norm, .dtype = DT_DT_F64}};
        /* the metrics derive from this step's gradients and parameters */
        dt_tensor_ref from[] = {grads, params};
        dt_trace_event(DT_TRACE_METRICS, DT_PHASE_OTHER, "step_metrics", NULL, from, 2, mt, 3);
    }
    dt_train_finish_metrics(sm, cfg, t0);
    return DT_OK;
}

dt_status dt_train_run(const dt_train_config *cfg) {
    if (cfg->device) return dt_train_run_cuda(cfg); /* train/train_cuda.cu */
    trainer t;
    dt_status st = dt_train_state_open(&t, cfg);
    if (st == DT_OK) st = dt_train_state_outputs(&t, 1);
    if (st == DT_OK) st = dt_trace_open(&cfg->trace, 0);
    if (st == DT_OK && !cfg->quiet)
        printf("detrain: %s | %zu parameters | %s mode | data: %s\n", cfg->model,
               t.model->num_params, cfg->deterministic ? "deterministic" : "default",
               dt_dataset_describe(t.data));
    double elapsed = 0.0;
    for (int64_t step = t.start_step + 1; st == DT_OK && step <= cfg->train_iters; step++) {
        dt_step_metrics sm;
        if ((st = train_step(&t, step, &sm)) != DT_OK) break;
        if (t.metrics && (st = dt_metrics_log(t.metrics, &sm)) != DT_OK) break;
        if (dt_train_save_due(cfg, step) && (st = dt_train_save(&t, step, NULL)) != DT_OK) break;
        dt_train_console(cfg, &sm, t.start_step + 1, &elapsed);
    }
    dt_status tst = dt_trace_close();
    if (st == DT_OK) st = tst;
    return dt_train_state_close(&t, st);
}
