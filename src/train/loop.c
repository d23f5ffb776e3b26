/* The training loop (see loop.h and trainer.h). */
#include "train/loop.h"

#include "data/dataset.h"
#include "dist/comm_factory.h"
#include "dist/dp.h"
#include "train/train_common.h"
#include "train/trainer.h"
#include "trace/inject.h"

#include <math.h>
#include <stdlib.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

/* ---- run control: signals, exit interval and duration --------------------------------
 * The handler only records the signal; the loop looks after each step, saves and stops.
 * It then restores the default action, so a second signal stops the process at once. */
static volatile sig_atomic_t g_signal;

static void on_signal(int sig) {
    g_signal = sig;
    signal(sig, SIG_DFL);
}

static const int exit_signals[] = {SIGTERM, SIGINT, SIGUSR1};

static void handle_signals(int on) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on ? on_signal : SIG_DFL;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof exit_signals / sizeof exit_signals[0]; i++) sigaction(exit_signals[i], &sa, NULL);
    g_signal = 0;
}

static const char *signal_name(int sig) {
    return sig == SIGTERM ? "SIGTERM" : sig == SIGINT ? "SIGINT" : sig == SIGUSR1 ? "SIGUSR1" : "a signal";
}

/* Why the run stops after `step` before --train-iters, as a code the ranks agree on
 * (dt_dp_agree): a signal's number, STOP_INTERVAL, STOP_DURATION (read on rank 0's clock
 * only), 0 to go on. */
enum { STOP_INTERVAL = 1000, STOP_DURATION = 1001 };

static int stop_code(const dt_train_config *cfg, int rank, int64_t step, double started_ms) {
    if (g_signal) return g_signal;
    if (cfg->exit_interval > 0 && step % cfg->exit_interval == 0 && step < cfg->train_iters) return STOP_INTERVAL;
    if (rank == 0 && cfg->exit_minutes > 0 && step < cfg->train_iters &&
        dt_train_now_ms() - started_ms >= (double)cfg->exit_minutes * 60e3)
        return STOP_DURATION;
    return 0;
}

static const char *stop_text(const dt_train_config *cfg, int code, char *buf, size_t cap) {
    if (!code) return NULL;
    if (code == STOP_INTERVAL) snprintf(buf, cap, "--exit-interval %lld", (long long)cfg->exit_interval);
    else if (code == STOP_DURATION) snprintf(buf, cap, "--exit-duration-in-mins %g", (double)cfg->exit_minutes);
    else snprintf(buf, cap, "%s", signal_name(code));
    return buf;
}

/* --check-for-nan-in-loss-and-grad: the step's metric that is not finite. */
static dt_status check_finite(const dt_step_metrics *sm) {
    const struct { const char *name; double v; int on; } m[] = {
        {"loss", sm->loss, 1}, {"grad_norm", sm->grad_norm, 1}, {"eval_loss", sm->eval_loss, sm->has_eval}};
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
        if (m[i].on && !isfinite(m[i].v)) {
            uint64_t bits;
            memcpy(&bits, &m[i].v, sizeof bits);
            return dt_fail(DT_ECORRUPT, "step %lld: %s is %g (0x%016llx), not finite; the run stops here and "
                           "saves nothing of this step (lower --lr, check the data, or resume from the last "
                           "checkpoint)", (long long)sm->step, m[i].name, m[i].v, (unsigned long long)bits);
        }
    return DT_OK;
}

typedef struct run {
    dt_train_state r;          /* data, host views, batch buffers, metrics, checkpoint config */
    dt_comm *comm;
    dt_backend *b;
    dt_inject inj;             /* --inject-nondeterminism, parsed */
    const char *env_written;   /* the device description env.json holds ("" none yet) */
    const dt_loop_hooks *hooks;
} run;

/* Mean validation loss over eval_iters batches: rank r evaluates the batches i with
 * i % N == r (every rank reads every batch, to keep the validation order), and the losses
 * are added in batch order (dt_dp_mean_eval). */
static dt_status evaluate(run *t, double *out) {
    int n = t->r.cfg->eval_iters, size = dt_comm_size(t->comm), rank = dt_comm_rank(t->comm);
    double *losses = calloc((size_t)n, sizeof *losses);
    if (!losses) return dt_fail(DT_ENOMEM, "out of memory for %d eval losses", n);
    dt_dataset_val_reset(t->r.data);
    dt_status st = DT_OK;
    for (int i = 0; i < n && st == DT_OK; i++) {
        st = dt_dataset_next_val(t->r.data, t->r.inputs, t->r.targets);
        if (st == DT_OK && i % size == rank) st = t->b->ops->eval_loss(t->b, t->r.inputs, t->r.targets, &losses[i]);
    }
    if (st == DT_OK) st = dt_dp_mean_eval(t->comm, losses, n, out);
    free(losses);
    return st;
}

/* One step: this rank's micro-batches of the global batch (dist/dp.h: rank r's micro-batch
 * m is global micro-batch k = (step-1) A N + m N + r; the data loader skips the other
 * ranks' windows, so its cursor stays the global one), then the gradient hook, the step,
 * and the metrics reduced across the ranks in a fixed order. */
static dt_status train_step(run *t, int64_t step, dt_step_metrics *sm) {
    const dt_train_config *cfg = t->r.cfg;
    dt_backend *b = t->b;
    double t0 = dt_train_now_ms();
    int accum = t->r.accum, size = dt_comm_size(t->comm), rank = dt_comm_rank(t->comm);
    float scale = 1.0f / (float)(accum * size);
    double comm0 = dt_comm_time_ms(t->comm);
    b->ops->zero_grad(b);
    for (int micro = 0; micro < accum; micro++) {
        /* dropout masks are keyed by the global micro-batch index */
        dt_fwd_args fa = {(uint32_t)dt_dp_micro_index(step, micro, accum, size, rank), step, scale, micro, accum};
        dt_trace_set_step(step, micro);
        dt_status st = dt_dp_next_micro(t->r.data, cfg->micro_batch, rank, size, t->r.inputs, t->r.targets);
        if (st == DT_OK && t->hooks->batch) t->hooks->batch(t->hooks->ctx, t->r.inputs, cfg->micro_batch * cfg->seq_length);
        if (st == DT_OK) st = b->ops->forward(b, t->r.inputs, t->r.targets, &fa);
        if (st == DT_OK) st = b->ops->backward(b);
        if (st != DT_OK) return st;
    }
    dt_trace_set_step(step, -1); /* step-level work: the gradient reduction, statistics, optimizer */
    dt_status st = b->ops->reduce_grads(b);
    if (st != DT_OK) return st;
    dt_step_args sa = {{cfg->beta1, cfg->beta2, cfg->eps, cfg->weight_decay, cfg->clip_grad},
                       dt_train_lr(cfg, step), ++t->r.opt.t};
    dt_grad_stats gs;
    double losses[DT_BACKEND_MAX_MICRO];
    if ((st = b->ops->step(b, &sa, &gs, losses)) != DT_OK) return st;
    double loss;
    if ((st = dt_dp_mean_loss(t->comm, losses, accum, &loss)) != DT_OK) return st;
    dt_train_fill_metrics(sm, cfg, step, loss, &gs, sa.lr);
    if (cfg->gpt.num_experts > 0 && b->ops->moe_metrics) {
        double aux;
        int64_t dropped;
        b->ops->moe_metrics(b, &aux, &dropped);
        if ((st = dt_dp_mean_and_total(t->comm, aux, dropped, &aux, &dropped)) != DT_OK) return st;
        sm->aux[sm->n_aux].name = "moe_aux_loss";
        sm->aux[sm->n_aux++].value = aux;
        sm->aux[sm->n_aux].name = "moe_dropped_tokens";
        sm->aux[sm->n_aux++].value = (double)dropped;
    }
    if (dt_train_eval_due(cfg, step)) {
        if ((st = evaluate(t, &sm->eval_loss)) != DT_OK) return st;
        sm->has_eval = 1;
    }
    dt_tensor_ref mt[] = {{.name = "loss", .data = &sm->loss, .dtype = DT_DT_F64},
                          {.name = "grad_norm", .data = &sm->grad_norm, .dtype = DT_DT_F64},
                          {.name = "param_norm", .data = &sm->param_norm, .dtype = DT_DT_F64}};
    if ((st = b->ops->trace_metrics(b, mt, 3)) != DT_OK) return st;
    dt_train_finish_metrics(sm, cfg, t0);
    sm->comm_ms = dt_comm_time_ms(t->comm) - comm0;
    return DT_OK;
}

/* env.json with the backend's device description: a backend without one (the CPU) writes
 * it before the first step; a device backend's is complete once a step ran (the GPU's GEMM
 * algorithms are pinned then), so it writes after the first step, and again if the
 * description changes. The warning about a checkpoint from another environment compares
 * that first complete env.json. */
static dt_status write_env(run *t, int after_step) {
    const char *d = t->b->ops->describe(t->b);
    if (d && !after_step) return DT_OK;
    if (t->env_written && !strcmp(t->env_written, d ? d : "")) return DT_OK;
    dt_status st = dt_train_write_env(&t->r, d, !t->env_written);
    t->env_written = d ? d : "";
    return st;
}

/* --inject-nondeterminism must name an op of this backend and a step this run takes. */
static dt_status check_injection(run *t) {
    const dt_train_config *cfg = t->r.cfg;
    if (!cfg->inject) return DT_OK;
    dt_status st = dt_inject_parse(cfg->inject, &t->inj);
    if (st != DT_OK) return dt_fail_context(st, "--inject-nondeterminism");
    const dt_inject inj = t->inj;
    const char *known = t->b->ops->inject_ops(t->b);
    size_t n = strlen(inj.op);
    int found = 0;
    for (const char *p = known; p && *p && !found; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
        found = !strncmp(p, inj.op, n) && (p[n] == ',' || p[n] == 0);
    if (!found)
        return dt_fail(DT_EINVAL, "--inject-nondeterminism %s: the %s backend has no op '%s'; its ops: %s",
                       cfg->inject, t->b->ops->name, inj.op, known);
    if (inj.step <= t->r.start_step)
        return dt_fail(DT_EINVAL, "--inject-nondeterminism %s: step %lld is before this run's first step %lld "
                       "(it resumes at step %lld)", cfg->inject, (long long)inj.step,
                       (long long)t->r.start_step + 1, (long long)t->r.start_step);
    return DT_OK;
}

/* --trace-steps must select a step this run takes (a resumed run starts later), and
 * --trace-ranks a rank it has. */
static dt_status check_trace(const run *t) {
    const dt_train_config *cfg = t->r.cfg;
    dt_range_list l;
    dt_status st;
    if (cfg->trace_steps) {
        if ((st = dt_range_list_parse(cfg->trace_steps, "--trace-steps", &l)) != DT_OK) return st;
        if (!dt_range_list_meets(&l, t->r.start_step + 1, cfg->train_iters))
            return dt_fail(DT_EINVAL, "--trace-steps %s selects no step of this run (steps %lld-%lld): nothing "
                           "would be traced", cfg->trace_steps, (long long)t->r.start_step + 1,
                           (long long)cfg->train_iters);
    }
    if (cfg->trace_ranks) {
        if ((st = dt_range_list_parse(cfg->trace_ranks, "--trace-ranks", &l)) != DT_OK) return st;
        if (!dt_range_list_meets(&l, 0, dt_comm_size(t->comm) - 1))
            return dt_fail(DT_EINVAL, "--trace-ranks %s selects no rank of this run (ranks 0-%d): nothing would "
                           "be traced", cfg->trace_ranks, dt_comm_size(t->comm) - 1);
    }
    return DT_OK;
}

static dt_status open_run(run *t, const dt_train_config *cfg) {
    dt_status st = dt_comm_create(&t->comm, cfg);
    if (st == DT_OK) st = dt_comm_record_env(t->comm, cfg);
    if (st == DT_OK) st = dt_train_state_open(&t->r, cfg, t->comm);
    /* the CUDA MoE layers' data parallel is not tested (one GPU here): refused until it is */
    if (st == DT_OK && cfg->device && cfg->gpt.num_experts > 0 && dt_comm_size(t->comm) > 1)
        st = dt_fail(DT_EUNSUPPORTED, "--num-experts %d with %d data-parallel ranks on --device cuda: not in this "
                     "build yet; launch one process (the CPU trains MoE data-parallel)", cfg->gpt.num_experts,
                     dt_comm_size(t->comm));
    if (st == DT_OK && cfg->distributed_optimizer && cfg->device)
        st = dt_fail(DT_EUNSUPPORTED, "--use-distributed-optimizer is not implemented on --device cuda yet; "
                     "drop it (or train on the CPU)");
    if (st == DT_OK) st = dt_backend_create(&t->b, cfg, t->comm, t->r.model, &t->r.opt);
    if (st == DT_OK) st = check_injection(t);
    if (st == DT_OK) st = check_trace(t);
    if (st == DT_OK) st = dt_train_state_outputs(&t->r);
    if (st == DT_OK) st = write_env(t, 0);
    dt_trace_config tc = cfg->trace;
    tc.digest = t->b ? t->b->ops->trace_digest : NULL;
    if (st == DT_OK) st = dt_trace_open(&tc, dt_comm_rank(t->comm));
    return st;
}

/* A checkpoint of `step`, a collective: every rank brings its state into the host views
 * (ZeRO-1 gathers the optimizer shards), rank 0 writes the checkpoint (ckpt.h: atomic, so
 * a failed save leaves the previous one), and rank 0's result is broadcast so that every
 * rank goes on, or stops, with it. */
static dt_status save(run *t, int64_t step) {
    dt_status st = t->b->ops->sync_state(t->b);
    if (st != DT_OK || dt_comm_size(t->comm) == 1) return st == DT_OK ? dt_train_save(&t->r, step, t->b->ops->describe(t->b)) : st;
    int rank0 = dt_comm_rank(t->comm) == 0;
    if (rank0) st = dt_train_save(&t->r, step, t->b->ops->describe(t->b));
    int32_t code = (int32_t)st;
    dt_status bst = dt_comm_broadcast(t->comm, &code, sizeof code, 0, NULL);
    if (rank0) return st != DT_OK ? st : bst;
    if (bst != DT_OK) return bst;
    if (code != DT_OK)
        return dt_fail((dt_status)code, "rank 0 could not save the checkpoint of step %lld (its message is on rank "
                       "0's output); every rank stops", (long long)step);
    return DT_OK;
}

dt_status dt_train_loop(const dt_train_config *cfg, const dt_loop_hooks *hooks) {
    run t;
    memset(&t, 0, sizeof t);
    dt_loop_hooks none = {0};
    const dt_loop_hooks *h = hooks ? hooks : &none;
    t.hooks = h;
    dt_status st = open_run(&t, cfg);
    /* rank 0 writes the console, the metrics and the checkpoints */
    int rank = t.comm ? dt_comm_rank(t.comm) : 0, talk = !cfg->quiet && rank == 0;
    if (st == DT_OK && talk) {
        char dp[64] = "";
        if (dt_comm_size(t.comm) > 1)
            snprintf(dp, sizeof dp, " | %d data-parallel ranks (%s)%s", dt_comm_size(t.comm), t.comm->ops->engine,
                     cfg->distributed_optimizer ? ", ZeRO-1" : "");
        printf("detrain: %s | %zu parameters | %s mode%s%s | data: %s\n", cfg->model, t.r.model->num_params,
               cfg->deterministic ? "deterministic" : "default", cfg->device ? " | cuda" : "", dp,
               dt_dataset_describe(t.r.data));
    }
    if (st == DT_OK && h->started) st = h->started(h->ctx, t.b, &t.r);
    double elapsed = 0.0, started = dt_train_now_ms();
    const char *stopped = NULL;
    char why[96];
    handle_signals(cfg->exit_signal);
    for (int64_t step = t.r.start_step + 1; st == DT_OK && !stopped && step <= cfg->train_iters; step++) {
        dt_step_metrics sm;
        if (h->before_step && (st = h->before_step(h->ctx, t.b, step)) != DT_OK) break;
        if ((st = train_step(&t, step, &sm)) != DT_OK) break;
        if (cfg->check_nonfinite && (st = check_finite(&sm)) != DT_OK) break;
        if ((st = write_env(&t, 1)) != DT_OK) break;
        if (t.r.metrics && (st = dt_metrics_log(t.r.metrics, &sm)) != DT_OK) break;
        int code;
        if ((st = dt_dp_agree(t.comm, stop_code(cfg, rank, step, started), &code)) != DT_OK) break;
        stopped = stop_text(cfg, code, why, sizeof why);
        if (dt_train_save_due(cfg, step) || (stopped && cfg->save_dir))
            if ((st = save(&t, step)) != DT_OK) break;
        if (rank == 0) dt_train_console(cfg, &sm, t.r.start_step + 1, &elapsed);
        if (h->after_step && (st = h->after_step(h->ctx, t.b, &sm)) != DT_OK) break;
        if (st == DT_OK && stopped && rank == 0)
            printf("detrain: stopped after step %lld of %lld by %s; %s\n", (long long)step,
                   (long long)cfg->train_iters, stopped, cfg->save_dir ? "saved a checkpoint of that step: resume with "
                   "--load" : "nothing saved (no --save)");
    }
    handle_signals(0);
    if (st == DT_OK && !stopped && cfg->inject && !dt_inject_fired())
        st = dt_fail(DT_ESTATE, "--inject-nondeterminism %s never fired: op '%s' did not run at that step on the %s "
                     "backend (an op of a path this run does not take never runs: dropout at rate 0, the "
                     "GEMM attention's ops under flash attention, ...)", cfg->inject, t.inj.op, t.b->ops->name);
    if (st == DT_OK && h->finished) st = h->finished(h->ctx, t.b);
    dt_status tst = dt_trace_close();
    if (st == DT_OK) st = tst;
    dt_backend_free(t.b);
    dt_comm_free(t.comm);
    return dt_train_state_close(&t.r, st);
}

dt_status dt_train_run(const dt_train_config *cfg) { return dt_train_loop(cfg, NULL); }
