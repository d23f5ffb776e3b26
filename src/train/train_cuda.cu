/* The training loop and the bench on one CUDA GPU (see train_cuda.h). The loop follows
 * trainer.c step for step: the same data order, micro-batch RNG keys, schedule, metrics and
 * console lines; model, statistics and optimizer run on the device. */
#include "ops/ops_cuda.h"

#include "model/gpt_cuda.h"
#include "train/train_cuda.h"
extern "C" {
#include "trace/trace.h"
}
#include "trace/digest_cuda.h"
#include "train/train_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define now_ms dt_train_now_ms

/* The run's host state (train_common.h: data, the host model and AdamW state as staging
 * for checkpoints, batch buffers, metrics) and the model on the GPU. Training runs on the
 * GPU only. */
typedef struct gtrainer {
    dt_train_state r;
    dt_gpt_cuda *gpu;
    int fingerprinted;            /* env.json written (after step 1: the GEMMs are pinned) */
} gtrainer;

/* The host state as the CPU loop sets it up (a checkpoint or Hugging Face weights are read
 * before anything is written), then the GPU model made from it: dt_gpt_cuda_create
 * uploads the host parameters (seeded, loaded or imported), AdamW's m and v follow after a
 * --load. t->r.opt.t counts AdamW updates (the bias correction's t): the checkpoint's, or
 * 0 with --no-load-optim, then one more every step (gstep). Then the outputs; env.json
 * waits for step 1, when every GEMM algorithm is pinned. */
static dt_status gsetup(gtrainer *t, const dt_train_config *cfg) {
    memset(t, 0, sizeof *t);
    dt_status st = dt_train_state_open(&t->r, cfg);
    if (st == DT_OK) st = dt_gpt_cuda_create(&t->gpu, t->r.model);
    if (st == DT_OK && cfg->load_dir) st = dt_gpt_cuda_set_opt_state(t->gpu, t->r.opt.m, t->r.opt.v);
    if (st == DT_OK) st = dt_train_state_outputs(&t->r, 0);
    return st;
}

/* Saves the state after `step` steps: parameters and AdamW m, v down into the host
 * staging (t->r.opt.t already counts the updates), then the shared save. env.json
 * describes the GPU run; every GEMM algorithm is pinned by then (a save follows a step of
 * this process). */
static dt_status gsave(gtrainer *t, int64_t step) {
    dt_status st = dt_gpt_cuda_get_params(t->gpu, t->r.model->param_mem);
    if (st == DT_OK) st = dt_gpt_cuda_get_opt_state(t->gpu, t->r.opt.m, t->r.opt.v);
    if (st != DT_OK) return st;
    return dt_train_save(&t->r, step, dt_gpt_cuda_describe(t->gpu));
}

static dt_status gevaluate(gtrainer *t, double *out) {
    dt_dataset_val_reset(t->r.data);
    dt_gpt_cuda_set_mode(t->gpu, 0, 0);
    double sum = 0.0;
    for (int i = 0; i < t->r.cfg->eval_iters; i++) {
        double l = 0.0;
        dt_status st = dt_dataset_next_val(t->r.data, t->r.inputs, t->r.targets);
        if (st == DT_OK) st = dt_gpt_cuda_forward(t->gpu, t->r.inputs, t->r.targets, 0.0f);
        if (st == DT_OK) st = dt_gpt_cuda_loss(t->gpu, &l);
        if (st != DT_OK) return st;
        sum += l;
    }
    *out = sum / t->r.cfg->eval_iters;
    return DT_OK;
}

static dt_status gstep(gtrainer *t, int64_t step, dt_step_metrics *sm) {
    const dt_train_config *cfg = t->r.cfg;
    double t0 = now_ms(), loss_sum = 0.0;
    dt_gpt_cuda_zero_grad(t->gpu);
    dt_gpt_cuda_set_step(t->gpu, step);
    for (int micro = 0; micro < t->r.accum; micro++) {
        double l = 0.0;
        dt_gpt_cuda_set_mode(t->gpu, 1, (uint32_t)((step - 1) * t->r.accum + micro));
        dt_trace_set_step(step, micro);
        dt_status st = dt_dataset_next_train(t->r.data, t->r.inputs, t->r.targets);
        if (st == DT_OK) st = dt_gpt_cuda_forward(t->gpu, t->r.inputs, t->r.targets, 1.0f / (float)t->r.accum);
        if (st == DT_OK) st = dt_gpt_cuda_backward(t->gpu);
        if (st == DT_OK) st = dt_gpt_cuda_loss(t->gpu, &l);
        if (st != DT_OK) return st;
        loss_sum += l; /* micro-batches in order */
    }
    float lr = dt_train_lr(cfg, step);
    dt_adamw_config ac = {cfg->beta1, cfg->beta2, cfg->eps, cfg->weight_decay, cfg->clip_grad};
    dt_grad_stats gs;
    dt_trace_set_step(step, -1); /* step-level work: statistics and the optimizer */
    dt_status st = dt_gpt_cuda_step(t->gpu, &ac, lr, ++t->r.opt.t, &gs);
    if (st != DT_OK) return st;
    dt_train_fill_metrics(sm, cfg, step, loss_sum / t->r.accum, &gs, lr);
    if (dt_train_eval_due(cfg, step)) {
        if ((st = gevaluate(t, &sm->eval_loss)) != DT_OK) return st;
        sm->has_eval = 1;
    }
    dt_tensor_ref mt[3];
    memset(mt, 0, sizeof mt);
    mt[0].name = "loss"; mt[0].data = &sm->loss; mt[0].dtype = DT_DT_F64;
    mt[1].name = "grad_norm"; mt[1].data = &sm->grad_norm; mt[1].dtype = DT_DT_F64;
    mt[2].name = "param_norm"; mt[2].data = &sm->param_norm; mt[2].dtype = DT_DT_F64;
    if ((st = dt_gpt_cuda_trace_metrics(t->gpu, mt, 3)) != DT_OK) return st;
    dt_train_finish_metrics(sm, cfg, t0);
    return DT_OK;
}

dt_status dt_train_run_cuda(const dt_train_config *cfg) {
    gtrainer t;
    dt_status st = gsetup(&t, cfg);
    dt_trace_config tc = cfg->trace;
    tc.digest = DT_TRACE_DIGEST_TREE; /* device tensors: the chunk tree of digest_cuda.h */
    if (st == DT_OK) st = dt_trace_open(&tc, 0);
    if (st == DT_OK && !cfg->quiet)
        printf("detrain: %s | %zu parameters | %s mode | cuda | data: %s\n", cfg->model,
               t.r.model->num_params, cfg->deterministic ? "deterministic" : "default",
               dt_dataset_describe(t.r.data));
    double elapsed = 0.0;
    for (int64_t step = t.r.start_step + 1; st == DT_OK && step <= cfg->train_iters; step++) {
        dt_step_metrics sm;
        if ((st = gstep(&t, step, &sm)) != DT_OK) break;
        /* env.json once the GEMM algorithms of every shape are pinned (after the first step) */
        if (!t.fingerprinted) {
            if ((st = dt_train_write_env(&t.r, dt_gpt_cuda_describe(t.gpu))) != DT_OK) break;
            t.fingerprinted = 1;
        }
        if (t.r.metrics && (st = dt_metrics_log(t.r.metrics, &sm)) != DT_OK) break;
        if (dt_train_save_due(cfg, step) && (st = gsave(&t, step)) != DT_OK) break;
        dt_train_console(cfg, &sm, t.r.start_step + 1, &elapsed);
    }
    dt_status tst = dt_trace_close();
    if (st == DT_OK) st = tst;
    dt_cu_digest_release();
    dt_gpt_cuda_free(t.gpu);
    return dt_train_state_close(&t.r, st);
}

/* ---- bench ------------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The bf16 matrix peak: an 8192^3 product through cuBLASLt (bf16 in, fp32 accumulate, bf16
 * out) on random data, median of 10 after 3 warm-ups. */
static dt_status measure_peak(double *tflops) {
    const int n = 8192;
    dt_cu_blas *h = NULL;
    bf16 *a = NULL, *b = NULL, *c = NULL;
    float *tmp = NULL;
    dt_status st = dt_cu_blas_create(&h);
    size_t nn = (size_t)n * n;
    if (st == DT_OK) st = dt_cu_check(cudaMalloc(&a, nn * 2), "peak");
    if (st == DT_OK) st = dt_cu_check(cudaMalloc(&b, nn * 2), "peak");
    if (st == DT_OK) st = dt_cu_check(cudaMalloc(&c, nn * 2), "peak");
    if (st == DT_OK) st = dt_cu_check(cudaMalloc(&tmp, nn * 4), "peak");
    float *hbuf = (float *)malloc(nn * 4);
    if (st == DT_OK && !hbuf) st = dt_fail(DT_ENOMEM, "peak: host buffer");
    for (int which = 0; which < 2 && st == DT_OK; which++) {
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < nn; i++)
            hbuf[i] = dt_rng_uniform(99, 200, (uint32_t)which, 0, i) - 0.5f;
        st = dt_cu_check(cudaMemcpy(tmp, hbuf, nn * 4, cudaMemcpyHostToDevice), "peak");
        dt_cu_f32_to_bf16(which ? b : a, tmp, nn, 0);
    }
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    double t[10];
    for (int i = 0; i < 13 && st == DT_OK; i++) {
        dt_cu_gemm_args g = {0, 1, n, n, n, a, n, 0, b, n, 0, c, n, 0, 0, 1.0f, 0.0f, 1, NULL};
        cudaEventRecord(e0, 0);
        st = dt_cu_gemm(h, &g, 0);
        cudaEventRecord(e1, 0);
        cudaEventSynchronize(e1);
        float ms = 0;
        cudaEventElapsedTime(&ms, e0, e1);
        if (i >= 3) t[i - 3] = ms;
    }
    if (st == DT_OK) *tflops = 2.0 * n * (double)n * n / (median(t, 10) * 1e-3) / 1e12;
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    free(hbuf);
    cudaFree(a); cudaFree(b); cudaFree(c); cudaFree(tmp);
    dt_cu_blas_free(h);
    return st;
}

dt_status dt_bench_cuda(const dt_bench_opts *o, dt_bench_result *r) {
    memset(r, 0, sizeof *r);
    dt_gpt_config cfg;
    dt_status st = dt_gpt_preset(o->model, &cfg);
    if (st == DT_OK) st = dt_gpt_config_finish(&cfg);
    if (st != DT_OK) return st;
    if ((st = measure_peak(&r->peak_tflops)) != DT_OK) return st;
    dt_gpt *host = NULL;
    dt_gpt_cuda *m = NULL;
    if ((st = dt_gpt_create(&host, &cfg, o->B, o->T, o->seed)) != DT_OK) return st;
    st = dt_gpt_cuda_create(&m, host);
    size_t BT = (size_t)o->B * o->T;
    /* a fixed random token stream, one window a step, made before the timed loop (a data
     * loader's work, which training overlaps with the device's) */
    int nsteps = o->warmup + o->steps + o->profile_steps;
    int *tok = (int *)malloc(sizeof(int) * (BT + 1) * (size_t)nsteps);
    if (st == DT_OK && !tok) st = dt_fail(DT_ENOMEM, "bench batch");
    for (int step = 1; step <= nsteps && tok; step++)
        for (size_t i = 0; i <= BT; i++)
            tok[(size_t)(step - 1) * (BT + 1) + i] =
                (int)(dt_rng_u32(o->seed, 201, (uint32_t)step, 0, i) % (uint32_t)cfg.vocab_size);
    double *ms = (double *)calloc((size_t)nsteps + 1, sizeof(double));
    double *rms = (double *)calloc((size_t)DT_R_COUNT * (o->profile_steps + 1), sizeof(double));
    dt_adamw_config ac = {0.9f, 0.95f, 1e-8f, 0.1f, 1.0f};
    /* Host clock, end to end: a step's interval runs from the previous step's statistics
     * read-back to its own, so it holds everything the device and the host do for one step
     * in a training loop, the previous update the step's launches queued behind included
     * (dt_gpt_cuda_step returns once the statistics are back, before its update ends). */
    double t0 = now_ms();
    for (int step = 1; step <= nsteps && st == DT_OK; step++) {
        const int *in = tok + (size_t)(step - 1) * (BT + 1);
        int prof = step > o->warmup + o->steps;
        dt_gpt_cuda_profile(m, prof);
        dt_gpt_cuda_set_mode(m, 1, (uint32_t)step);
        dt_gpt_cuda_zero_grad(m);
        st = dt_gpt_cuda_forward(m, in, in + 1, 1.0f);
        if (st == DT_OK) st = dt_gpt_cuda_backward(m);
        dt_grad_stats gs;
        if (st == DT_OK) st = dt_gpt_cuda_step(m, &ac, 3e-4f, step, &gs);
        double loss = 0.0;
        if (st == DT_OK) st = dt_gpt_cuda_loss(m, &loss);
        double t1 = now_ms();
        ms[step - 1] = t1 - t0;
        t0 = t1;
        if (step == 1) r->loss_first = loss;
        r->loss_last = loss;
        if (prof && st == DT_OK) {
            double acc[DT_R_COUNT] = {0};
            st = dt_gpt_cuda_range_ms(m, acc);
            int k = step - o->warmup - o->steps - 1;
            for (int i = 0; i < DT_R_COUNT; i++) rms[(size_t)i * o->profile_steps + k] = acc[i];
        }
    }
    if (st == DT_OK) {
        double *timed = ms + o->warmup;
        r->step_ms_min = 1e30;
        for (int i = 0; i < o->steps; i++) {
            if (timed[i] < r->step_ms_min) r->step_ms_min = timed[i];
            if (timed[i] > r->step_ms_max) r->step_ms_max = timed[i];
        }
        r->step_ms_median = median(timed, o->steps);
        r->tok_per_s = (double)BT / (r->step_ms_median * 1e-3);
        /* model FLOPs per step: 6 N per token for the parameter GEMMs (N counts the tied
         * embedding once, as the output head) + 12 L C T per token for attention scores and
         * values, forward and backward, without discounting the causal mask */
        double N = (double)host->num_params - (double)cfg.max_seq_len * cfg.channels;
        r->model_flops = 6.0 * N * (double)BT + 12.0 * cfg.num_layers * (double)cfg.channels * o->T * (double)BT;
        r->mfu = r->model_flops / (r->step_ms_median * 1e-3) / (r->peak_tflops * 1e12);
        size_t freeb = 0, totalb = 0;
        cudaMemGetInfo(&freeb, &totalb);
        r->peak_mem_gib = (double)(totalb - freeb) / (1 << 30);
        r->model_mem_gib = (double)dt_gpt_cuda_bytes(m) / (1 << 30);
        r->nranges = DT_R_COUNT;
        for (int i = 0; i < DT_R_COUNT; i++) {
            r->range_name[i] = dt_gpt_cuda_range_name(i);
            r->range_ms[i] = o->profile_steps > 0 ? median(rms + (size_t)i * o->profile_steps, o->profile_steps) : 0.0;
        }
        cudaDeviceProp p;
        cudaGetDeviceProperties(&p, 0);
        snprintf(r->device, sizeof r->device, "%s (%d SMs)", p.name, p.multiProcessorCount);
    }
    free(ms);
    free(rms);
    free(tok);
    dt_gpt_cuda_free(m);
    dt_gpt_free(host);
    return st;
}
