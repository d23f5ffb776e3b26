/* The CPU backend (backend.h): the fp32 model of model/gpt.c, trained in the host model
 * itself, with AdamW in the host optimizer state (nothing to copy for checkpoints). Every
 * op runs its det or fast branch from ops/op.h; deterministic results are independent of
 * the thread count.
 *
 * Data parallel (dist/dp.h) over the communicator's N ranks: the gradient hook all-reduces
 * the gradient slab (dt_comm_allreduce: rank-ordered in deterministic mode), and the
 * statistics are the chunked ones of dt_dp_grad_stats. With --use-distributed-optimizer
 * (ZeRO-1) the hook reduce-scatters instead: rank r holds the reduced gradient of its
 * chunk only (dt_comm_chunk with DT_COMM_ALIGN), computes that chunk's statistics, updates
 * its chunk of the parameters with its chunk of m and v, and the parameters are all-gathered;
 * m and v outside a rank's chunk are stale until sync_state gathers them for a checkpoint.
 * Each element's update is elementwise and the statistics add the same chunk partials in
 * the same order, so ZeRO-1 gives the bits of the all-reduce path. The host views stay
 * full-size on every rank (they are the checkpoint's staging and its load target). */
#include "backend/backend.h"

#include "dist/dp.h"
#include "ops/op.h"
#include "ops/reduce/reduce.h"
#include "trace/inject.h"

#include <stdlib.h>
#include <string.h>

typedef struct cpu_backend {
    dt_backend base;
    float loss_scale;               /* of the last forward, for its backward */
    double micro_loss[DT_BACKEND_MAX_MICRO];
    double micro_aux[DT_BACKEND_MAX_MICRO];     /* the MoE aux loss of each micro-batch */
    int64_t micro_dropped[DT_BACKEND_MAX_MICRO]; /* and its dropped assignments */
    int nmicro;
    int sharded;                    /* ZeRO-1 over more than one rank */
    size_t shard_off, shard_len;    /* this rank's chunk of the slabs */
} cpu_backend;

static cpu_backend *cpu(dt_backend *b) { return (cpu_backend *)b; }

static void cpu_destroy(dt_backend *b) { free(b); }

static void cpu_zero_grad(dt_backend *b) { dt_gpt_zero_grad(b->host); }

static dt_status cpu_forward(dt_backend *b, const int *in, const int *tg, const dt_fwd_args *a) {
    cpu_backend *c = cpu(b);
    dt_gpt *m = b->host;
    if (a->micro < 0 || a->micro >= a->nmicro || a->nmicro > DT_BACKEND_MAX_MICRO)
        return dt_fail(DT_EINVAL, "micro-batch %d of %d (at most %d a step)", a->micro, a->nmicro,
                       DT_BACKEND_MAX_MICRO);
    m->training = 1;
    m->rng_step = a->rng_step;
    m->step = a->step;
    c->loss_scale = a->loss_scale;
    c->nmicro = a->nmicro;
    dt_status st = dt_gpt_forward(m, in, tg, &c->micro_loss[a->micro]);
    c->micro_aux[a->micro] = m->moe_aux;
    c->micro_dropped[a->micro] = m->moe_dropped;
    return st;
}

static void cpu_moe_metrics(dt_backend *b, double *aux_loss, int64_t *dropped) {
    cpu_backend *c = cpu(b);
    double sum = 0.0;
    int64_t n = 0;
    for (int i = 0; i < c->nmicro; i++) { /* micro-batches in order */
        sum += c->micro_aux[i];
        n += c->micro_dropped[i];
    }
    *aux_loss = c->nmicro ? sum / c->nmicro : 0.0;
    *dropped = n;
}

static dt_status cpu_backward(dt_backend *b) {
    dt_gpt_backward(b->host, cpu(b)->loss_scale);
    return DT_OK;
}

static dt_status cpu_eval_loss(dt_backend *b, const int *in, const int *tg, double *loss) {
    b->host->training = 0;
    return dt_gpt_forward(b->host, in, tg, loss);
}

static dt_status cpu_reduce_grads(dt_backend *b) {
    dt_gpt *m = b->host;
    if (cpu(b)->sharded) return dt_comm_reduce_scatter(b->comm, m->grad_mem, m->num_params, DT_COMM_F32, NULL);
    return dt_comm_allreduce(b->comm, m->grad_mem, m->num_params, DT_COMM_F32, NULL);
}

static dt_tensor_ref slab(const char *name, const float *p, size_t n) {
    dt_tensor_ref r = {.name = name, .data = p, .dtype = DT_DT_F32, .ndim = 1, .shape = {(int64_t)n}};
    return r;
}

/* The statistics (a semantic event "grad_stats"), then AdamW (event "adamw", and the
 * injection point of that name). */
static dt_status cpu_step(dt_backend *b, const dt_step_args *a, dt_grad_stats *gs, double *micro_losses) {
    cpu_backend *c = cpu(b);
    dt_gpt *mdl = b->host;
    dt_tensor_ref grads = slab("grads", mdl->grad_mem, mdl->num_params);
    dt_tensor_ref params = slab("params", mdl->param_mem, mdl->num_params);
    dt_trace_op *h = NULL;
    if (dt_trace_on(DT_TRACE_SEMANTIC)) {
        dt_tensor_ref in[] = {grads, params};
        h = dt_trace_begin(DT_TRACE_SEMANTIC, DT_PHASE_OPT, "grad_stats",
                           dt_reduce_choose(DT_OP_NORM) == DT_REDUCE_DET ? "det" : "fast", in, 2);
    }
    dt_status st = dt_dp_grad_stats(b->comm, mdl, c->sharded, gs);
    if (st != DT_OK) return st;
    if (h) {
        dt_tensor_ref out[] = {{.name = "grad_norm", .data = &gs->grad_norm, .dtype = DT_DT_F64},
                               {.name = "param_norm", .data = &gs->param_norm, .dtype = DT_DT_F64},
                               {.name = "num_zeros", .data = &gs->num_zeros, .dtype = DT_DT_I64}};
        dt_trace_end(h, out, 3);
    }
    dt_adamw *opt = b->opt;
    opt->cfg = a->adamw;
    dt_tensor_ref mstate = slab("adam_m", opt->m, mdl->num_params);
    dt_tensor_ref vstate = slab("adam_v", opt->v, mdl->num_params);
    h = NULL;
    if (dt_trace_on(DT_TRACE_SEMANTIC)) {
        dt_tensor_ref in[] = {params, grads, mstate, vstate};
        h = dt_trace_begin(DT_TRACE_SEMANTIC, DT_PHASE_OPT, "adamw", NULL, in, 4);
    }
    if (c->sharded) {
        dt_adamw_step_range(opt, mdl, a->lr, gs->grad_norm, a->t, c->shard_off, c->shard_len);
        if ((st = dt_comm_allgather(b->comm, mdl->param_mem, mdl->num_params, DT_COMM_F32, NULL)) != DT_OK) return st;
    } else {
        dt_adamw_step_at(opt, mdl, a->lr, gs->grad_norm, a->t);
    }
    if (dt_inject_should("adamw", mdl->step)) dt_inject_flip_all(mdl->param_mem, mdl->num_params);
    if (h) {
        dt_tensor_ref out[] = {params, mstate, vstate};
        dt_trace_end(h, out, 3);
    }
    memcpy(micro_losses, c->micro_loss, sizeof(double) * (size_t)c->nmicro);
    return DT_OK;
}

static dt_status cpu_trace_metrics(dt_backend *b, const dt_tensor_ref *values, int n) {
    if (!dt_trace_on(DT_TRACE_METRICS)) return DT_OK;
    const dt_gpt *m = b->host;
    /* the metrics derive from this step's gradients and parameters */
    dt_tensor_ref from[] = {slab("grads", m->grad_mem, m->num_params), slab("params", m->param_mem, m->num_params)};
    dt_trace_event(DT_TRACE_METRICS, DT_PHASE_OTHER, "step_metrics", NULL, from, 2, values, n);
    return DT_OK;
}

/* Trains in the host views; with ZeRO-1 each rank's chunk of m and v is gathered into
 * every rank's full views (a collective: every rank calls it before a save). */
static dt_status cpu_sync_state(dt_backend *b) {
    if (!cpu(b)->sharded) return DT_OK;
    dt_status st = dt_comm_allgather(b->comm, b->opt->m, b->opt->n, DT_COMM_F32, NULL);
    return st == DT_OK ? dt_comm_allgather(b->comm, b->opt->v, b->opt->n, DT_COMM_F32, NULL) : st;
}

static const char *cpu_describe(dt_backend *b) {
    (void)b;
    return NULL;
}

static const char *cpu_inject_ops(dt_backend *b) {
    (void)b;
    return "adamw,attention_bwd,attention_fwd,crossentropy_bwd,crossentropy_fwd,crossentropy_mean,dropout_bwd,"
           "dropout_fwd,encoder_bwd,encoder_fwd,gelu_bwd,gelu_fwd,layernorm_bwd,layernorm_fwd,matmul_bwd,"
           "matmul_fwd,moe_combine,moe_dispatch,moe_dprob,moe_experts_bwd,moe_experts_fwd,moe_router_bwd,"
           "moe_router_fwd,moe_topk,moe_undispatch,residual_fwd";
}

static void cpu_profile(dt_backend *b, int on) { (void)b; (void)on; }
static int cpu_ranges(dt_backend *b, const char **names, int cap) {
    (void)b; (void)names; (void)cap;
    return 0;
}
static dt_status cpu_range_ms(dt_backend *b, double *ms) {
    (void)b; (void)ms;
    return DT_OK;
}
static void cpu_memory(dt_backend *b, double *in_use, double *model) {
    (void)b;
    *in_use = *model = 0.0;
}
static dt_status cpu_peak(dt_backend *b, double *tflops) {
    (void)b;
    *tflops = 0.0;
    return DT_OK;
}

static const dt_backend_ops cpu_ops = {
    "cpu", NULL, cpu_destroy, cpu_zero_grad, cpu_forward, cpu_backward, cpu_eval_loss, cpu_reduce_grads,
    cpu_step, cpu_trace_metrics, cpu_sync_state, cpu_describe, cpu_inject_ops, cpu_profile, cpu_ranges,
    cpu_range_ms, cpu_memory, cpu_peak, cpu_moe_metrics,
};

dt_status dt_backend_cpu_create(dt_backend **out, const dt_train_config *cfg, dt_comm *comm, dt_gpt *host,
                                dt_adamw *opt) {
    *out = NULL;
    dt_status st = dt_gpt_alloc_train(host, cfg->micro_batch, cfg->seq_length);
    if (st != DT_OK) return st;
    host->hidden_dropout = cfg->hidden_dropout;
    host->attn_dropout = cfg->attn_dropout;
    host->moe_aux_coeff = cfg->moe_aux_coeff;
    host->moe_capacity_factor = cfg->moe_capacity_factor;
    cpu_backend *c = calloc(1, sizeof *c);
    if (!c) return dt_fail(DT_ENOMEM, "out of memory for the CPU backend");
    c->base = (dt_backend){&cpu_ops, cfg, comm, host, opt};
    c->sharded = cfg->distributed_optimizer && dt_comm_size(comm) > 1;
    dt_comm_chunk(host->num_params, dt_comm_size(comm), dt_comm_rank(comm), DT_COMM_ALIGN, &c->shard_off,
                  &c->shard_len);
    *out = &c->base;
    return DT_OK;
}

dt_status dt_backend_create(dt_backend **out, const dt_train_config *cfg, dt_comm *comm, dt_gpt *host,
                            dt_adamw *opt) {
    if (cfg->device && cfg->gpt.num_experts > 0) {
        *out = NULL;
        return dt_fail(DT_EUNSUPPORTED, "--num-experts %d: the CUDA backend has no MoE layers yet; train the MoE "
                       "model with --device cpu", cfg->gpt.num_experts);
    }
    return cfg->device ? dt_backend_cuda_create(out, cfg, comm, host, opt)
                       : dt_backend_cpu_create(out, cfg, comm, host, opt);
}

void dt_backend_free(dt_backend *b) {
    if (b) b->ops->destroy(b);
}
