/* The CUDA backend (backend.h): the bf16 GPU model of model/gpt_cuda.h, with fp32 master
 * weights and AdamW state on the device. The host views (parameters, AdamW m and v) are
 * uploaded at create and written back by sync_state. */
#include "ops/ops_cuda.h"

#include "backend/backend.h"
#include "model/gpt_cuda.h"
#include "trace/digest_cuda.h"

#include <stdlib.h>
#include <string.h>

#define TRY(x) do { dt_status st_ = (x); if (st_ != DT_OK) return st_; } while (0)

typedef struct cuda_backend {
    dt_backend base;
    dt_gpt_cuda *m;
    int micro, nmicro;                     /* of the last forward */
    double micro_loss[DT_BACKEND_MAX_MICRO];
} cuda_backend;

static cuda_backend *cu(dt_backend *b) { return (cuda_backend *)b; }

static void cuda_destroy(dt_backend *b) {
    dt_cu_digest_release();
    dt_gpt_cuda_free(cu(b)->m);
    free(b);
}

static void cuda_zero_grad(dt_backend *b) { dt_gpt_cuda_zero_grad(cu(b)->m); }

static dt_status cuda_forward(dt_backend *b, const int *in, const int *tg, const dt_fwd_args *a) {
    cuda_backend *c = cu(b);
    if (a->micro < 0 || a->micro >= a->nmicro || a->nmicro > DT_BACKEND_MAX_MICRO)
        return dt_fail(DT_EINVAL, "micro-batch %d of %d (at most %d a step)", a->micro, a->nmicro,
                       DT_BACKEND_MAX_MICRO);
    c->micro = a->micro;
    c->nmicro = a->nmicro;
    dt_gpt_cuda_set_step(c->m, a->step);
    dt_gpt_cuda_set_mode(c->m, 1, a->rng_step);
    return dt_gpt_cuda_forward(c->m, in, tg, a->loss_scale);
}

/* With several micro-batches each one's loss is read once its backward is queued (the
 * next forward overwrites it on the device); a single one is read with the step's
 * statistics, so the host never waits for the backward alone. */
static dt_status cuda_backward(dt_backend *b) {
    cuda_backend *c = cu(b);
    dt_status st = dt_gpt_cuda_backward(c->m);
    if (st == DT_OK && c->nmicro > 1) st = dt_gpt_cuda_loss(c->m, &c->micro_loss[c->micro]);
    return st;
}

static dt_status cuda_eval_loss(dt_backend *b, const int *in, const int *tg, double *loss) {
    cuda_backend *c = cu(b);
    dt_gpt_cuda_set_mode(c->m, 0, 0);
    dt_status st = dt_gpt_cuda_forward(c->m, in, tg, 0.0f);
    return st == DT_OK ? dt_gpt_cuda_loss(c->m, loss) : st;
}

/* The gradient slab summed over the ranks through b->comm (the NCCL engine); one rank has
 * the sum already and makes no call. */
static dt_status cuda_reduce_grads(dt_backend *b) { return dt_gpt_cuda_reduce_grads(cu(b)->m, b->comm); }

static dt_status cuda_step(dt_backend *b, const dt_step_args *a, dt_grad_stats *gs, double *micro_losses) {
    cuda_backend *c = cu(b);
    dt_status st = dt_gpt_cuda_step(c->m, &a->adamw, a->lr, a->t, gs);
    if (st == DT_OK && c->nmicro == 1) st = dt_gpt_cuda_loss(c->m, &c->micro_loss[0]);
    if (st == DT_OK) memcpy(micro_losses, c->micro_loss, sizeof(double) * (size_t)c->nmicro);
    return st;
}

static dt_status cuda_trace_metrics(dt_backend *b, const dt_tensor_ref *values, int n) {
    return dt_gpt_cuda_trace_metrics(cu(b)->m, values, n);
}

static dt_status cuda_sync_state(dt_backend *b) {
    cuda_backend *c = cu(b);
    dt_status st = dt_gpt_cuda_get_params(c->m, b->host->param_mem);
    return st == DT_OK ? dt_gpt_cuda_get_opt_state(c->m, b->opt->m, b->opt->v) : st;
}

static const char *cuda_describe(dt_backend *b) { return dt_gpt_cuda_describe(cu(b)->m); }

static const char *cuda_inject_ops(dt_backend *b) {
    (void)b;
    return "adamw,attention_bwd,attention_fwd,crossentropy,crossentropy_mean,dropout_bwd,encoder_bwd,encoder_fwd,"
           "gelu_bwd,gelu_fwd,layernorm_bwd,layernorm_fwd,matmul_bwd,matmul_dgelu_bwd,matmul_fwd,matmul_gelu_fwd,"
           "residual_layernorm_fwd";
}

static void cuda_profile(dt_backend *b, int on) { dt_gpt_cuda_profile(cu(b)->m, on); }

static int cuda_ranges(dt_backend *b, const char **names, int cap) {
    (void)b;
    for (int i = 0; i < DT_R_COUNT && i < cap; i++) names[i] = dt_gpt_cuda_range_name(i);
    return DT_R_COUNT < cap ? DT_R_COUNT : cap;
}

static dt_status cuda_range_ms(dt_backend *b, double *ms) { return dt_gpt_cuda_range_ms(cu(b)->m, ms); }

static void cuda_memory(dt_backend *b, double *in_use, double *model) {
    size_t freeb = 0, totalb = 0;
    cudaMemGetInfo(&freeb, &totalb);
    *in_use = (double)(totalb - freeb);
    *model = (double)dt_gpt_cuda_bytes(cu(b)->m);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The bf16 matrix peak: an 8192^3 product through cuBLASLt (bf16 in, fp32 accumulate, bf16
 * out) on random data, median of 10 after 3 warm-ups. */
static dt_status cuda_peak(dt_backend *b, double *tflops) {
    (void)b;
    const int n = 8192;
    dt_cu_blas *h = NULL;
    bf16 *x = NULL, *y = NULL, *z = NULL;
    float *tmp = NULL;
    size_t nn = (size_t)n * n;
    dt_status st = dt_cu_blas_create(&h);
    if (st == DT_OK) st = dt_cu_check(cudaMalloc(&x, nn * 2), "peak");
    if (st == DT_OK) st = dt_cu_check(cudaMalloc(&y, nn * 2), "peak");
    if (st == DT_OK) st = dt_cu_check(cudaMalloc(&z, nn * 2), "peak");
    if (st == DT_OK) st = dt_cu_check(cudaMalloc(&tmp, nn * 4), "peak");
    float *hbuf = (float *)malloc(nn * 4);
    if (st == DT_OK && !hbuf) st = dt_fail(DT_ENOMEM, "peak: host buffer");
    for (int which = 0; which < 2 && st == DT_OK; which++) {
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < nn; i++) hbuf[i] = dt_rng_uniform(99, 200, (uint32_t)which, 0, i) - 0.5f;
        st = dt_cu_check(cudaMemcpy(tmp, hbuf, nn * 4, cudaMemcpyHostToDevice), "peak");
        dt_cu_f32_to_bf16(which ? y : x, tmp, nn, 0);
    }
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    double t[10];
    for (int i = 0; i < 13 && st == DT_OK; i++) {
        dt_cu_gemm_args g = {0, 1, n, n, n, x, n, 0, y, n, 0, z, n, 0, 0, 1.0f, 0.0f, 1, NULL};
        cudaEventRecord(e0, 0);
        st = dt_cu_gemm(h, &g, 0);
        cudaEventRecord(e1, 0);
        cudaEventSynchronize(e1);
        float ms = 0;
        cudaEventElapsedTime(&ms, e0, e1);
        if (i >= 3) t[i - 3] = ms;
    }
    if (st == DT_OK) {
        qsort(t, 10, sizeof t[0], cmp_double);
        *tflops = 2.0 * n * (double)n * n / (0.5 * (t[4] + t[5]) * 1e-3) / 1e12;
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    free(hbuf);
    cudaFree(x); cudaFree(y); cudaFree(z); cudaFree(tmp);
    dt_cu_blas_free(h);
    return st;
}

static const dt_backend_ops cuda_ops = {
    "cuda", DT_TRACE_DIGEST_TREE, cuda_destroy, cuda_zero_grad, cuda_forward, cuda_backward, cuda_eval_loss,
    cuda_reduce_grads, cuda_step, cuda_trace_metrics, cuda_sync_state, cuda_describe, cuda_inject_ops,
    cuda_profile, cuda_ranges, cuda_range_ms, cuda_memory, cuda_peak,
};

extern "C" dt_status dt_backend_cuda_create(dt_backend **out, const dt_train_config *cfg, dt_comm *comm,
                                            dt_gpt *host, dt_adamw *opt) {
    *out = NULL;
    cuda_backend *c = (cuda_backend *)calloc(1, sizeof *c);
    if (!c) return dt_fail(DT_ENOMEM, "out of memory for the CUDA backend");
    c->base.ops = &cuda_ops;
    c->base.cfg = cfg;
    c->base.comm = comm;
    c->base.host = host;
    c->base.opt = opt;
    dt_gpt_cuda_spec spec = {cfg->micro_batch, cfg->seq_length, cfg->hidden_dropout, cfg->attn_dropout, cfg->cuda};
    dt_status st = dt_gpt_cuda_create(&c->m, host, &spec);
    /* a resumed run's m and v (zero otherwise, as the device's start) */
    if (st == DT_OK && cfg->load_dir) st = dt_gpt_cuda_set_opt_state(c->m, opt->m, opt->v);
    if (st != DT_OK) {
        dt_gpt_cuda_free(c->m);
        free(c);
        return st;
    }
    *out = &c->base;
    return DT_OK;
}
