/* The backend seam: one interface that the training loop (train/loop.c) drives and that
 * each backend implements (cpu_backend.c: the fp32 CPU model; cuda_backend.cu: the bf16
 * GPU model). The loop calls nothing else of a model.
 *
 * A step, as the loop runs it:
 *     zero_grad
 *     for each micro-batch: forward (training, its dropout key and loss scale), backward
 *     reduce_grads    the gradient hook: the data-parallel reduction through the run's
 *                     communicator (dist/comm.h; nothing to do with one rank). A backend
 *                     may start it inside the last backward and finish it here.
 *     step            gradient statistics (grad norm, param norm, num-zeros), then one
 *                     AdamW update clipped with that grad norm; returns the statistics and
 *                     the step's micro-batch losses (so a backend may read them back once,
 *                     while its update runs)
 * and eval_loss between steps. The host model (model/gpt.h, parameters only) and the host
 * AdamW state (optim/optim.h) are the backend's views for checkpoints and Hugging Face
 * export: create takes its initial state from them; sync_state writes its current state
 * back into them (the CPU backend trains in them, so it has nothing to copy).
 *
 * Errors are values; a backend never exits. Tracing: a backend writes the op, module and
 * semantic events of its own work (trace/trace.h) and the metrics event (trace_metrics). */
#ifndef DT_BACKEND_BACKEND_H
#define DT_BACKEND_BACKEND_H

#ifdef __cplusplus
extern "C" {
#endif

#include "config/train_config.h"
#include "dist/comm.h"
#include "model/gpt.h"
#include "optim/optim.h"
#include "trace/trace.h"

typedef struct dt_backend dt_backend;

/* One micro-batch's forward. */
typedef struct dt_fwd_args {
    uint32_t rng_step;   /* the global micro-batch counter: dropout masks are keyed by it */
    int64_t step;        /* the optimizer step, 1-based (trace events, --inject-nondeterminism) */
    float loss_scale;    /* the backward gives the gradient of loss * loss_scale */
    int micro, nmicro;   /* this micro-batch of the step's nmicro (<= DT_BACKEND_MAX_MICRO) */
} dt_fwd_args;

enum { DT_BACKEND_MAX_MICRO = 4096 };
/* The loop's data parallel (dist/dp.h): rng_step is the global micro-batch index
 * (step-1) A N + micro N + rank, loss_scale 1/(A N), with A = nmicro micro-batches a rank. */

typedef struct dt_step_args {
    dt_adamw_config adamw;
    float lr;
    int64_t t;           /* the update's count, 1-based (AdamW's bias correction) */
} dt_step_args;

/* Named ranges of a step, timed while profiling is on (the bench's leaderboard). */
enum { DT_BACKEND_MAX_RANGES = 32 };

typedef struct dt_backend_ops {
    const char *name;                /* "cpu", "cuda" */
    const char *trace_digest;        /* how its trace events digest tensors (trace.h) */
    void (*destroy)(dt_backend *b);
    /* Starts the step's gradients afresh. */
    void (*zero_grad)(dt_backend *b);
    /* Token ids (B, T) are checked against the vocabulary (DT_EINVAL naming the position). */
    dt_status (*forward)(dt_backend *b, const int *inputs, const int *targets, const dt_fwd_args *a);
    /* Adds the gradient of the last forward's loss * loss_scale. */
    dt_status (*backward)(dt_backend *b);
    /* The mean loss of one batch with dropout off and no gradient. */
    dt_status (*eval_loss)(dt_backend *b, const int *inputs, const int *targets, double *loss);
    dt_status (*reduce_grads)(dt_backend *b);
    /* micro_losses: the mean loss of each of this rank's micro-batches of the step, in
     * order (the loop combines the ranks' in global micro-batch order, dist/dp.h). The
     * statistics are of the reduced gradients, the same on every rank. */
    dt_status (*step)(dt_backend *b, const dt_step_args *a, dt_grad_stats *stats, double *micro_losses);
    /* The metrics-level trace event "step_metrics": host values derived from this step's
     * gradients and parameters (their digests are its inputs). */
    dt_status (*trace_metrics)(dt_backend *b, const dt_tensor_ref *values, int n);
    /* Parameters and AdamW m, v into the host views given at create. */
    dt_status (*sync_state)(dt_backend *b);
    /* The device description env.json records under "run" (a JSON object text; NULL on the
     * CPU). Complete once a step ran (the GPU's GEMM algorithms are pinned then). */
    const char *(*describe)(dt_backend *b);
    /* The op names --inject-nondeterminism can name on this backend, comma-separated. */
    const char *(*inject_ops)(dt_backend *b);
    /* Profiling for the bench: ranges recorded while on; range_ms adds each range's
     * milliseconds since the last call into ms (waits for the device). */
    void (*profile)(dt_backend *b, int on);
    int (*ranges)(dt_backend *b, const char **names, int cap);
    dt_status (*range_ms)(dt_backend *b, double *ms);
    /* Device memory in use and held by the model, in bytes (0 on the CPU). */
    void (*memory)(dt_backend *b, double *in_use, double *model);
    /* The measured bf16 matrix peak in TFLOP/s (0: not measured on this backend). */
    dt_status (*peak_tflops)(dt_backend *b, double *tflops);
    /* The MoE metrics of the last step (after step): the aux loss summed over the MoE
     * layers, the mean over the micro-batches in order; the dropped assignments summed over
     * layers and micro-batches. NULL on a backend without MoE layers. */
    void (*moe_metrics)(dt_backend *b, double *aux_loss, int64_t *dropped);
} dt_backend_ops;

struct dt_backend {
    const dt_backend_ops *ops;
    const dt_train_config *cfg;
    dt_comm *comm;
    dt_gpt *host;                    /* the parameters' host view (the caller's) */
    dt_adamw *opt;                   /* the AdamW state's host view (the caller's) */
};

/* Creates the backend cfg->device names for cfg's model and batch on `comm`'s layout, its
 * state taken from host (parameters, seeded, loaded or imported) and opt (m, v; t is the
 * loop's). host and opt stay the caller's and must outlive the backend; the CPU backend
 * adds its gradient and activation buffers to host (dt_gpt_alloc_train) and trains in it.
 * A GPU backend in a build without CUDA fails with DT_EUNSUPPORTED naming the binary. */
dt_status dt_backend_create(dt_backend **out, const dt_train_config *cfg, dt_comm *comm, dt_gpt *host,
                            dt_adamw *opt);
void dt_backend_free(dt_backend *b);

/* The implementations (backend_create picks one). */
dt_status dt_backend_cpu_create(dt_backend **out, const dt_train_config *cfg, dt_comm *comm, dt_gpt *host,
                                dt_adamw *opt);
dt_status dt_backend_cuda_create(dt_backend **out, const dt_train_config *cfg, dt_comm *comm, dt_gpt *host,
                                 dt_adamw *opt);

#ifdef __cplusplus
}
#endif

#endif
