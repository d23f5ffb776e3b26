/* The GPT model on one CUDA GPU: the CPU model's math (gpt.h) with bf16 activations and
 * matmul inputs, fp32 master weights, gradients and optimizer state, fp32 (norms fp64)
 * reductions. Every op goes through the CUDA launchers of src/ops (ops_cuda.h), which pick
 * det or fast branches exactly like the CPU ops.
 *
 * Ownership: dt_gpt_cuda_create allocates every device buffer (a few slabs) and the
 * cuBLASLt handle; dt_gpt_cuda_free releases them. The host model given to create is only
 * read (config, sizes, initial parameters, dropout settings) and stays the caller's.
 * Plain C interface (the trainer and the bench call it). */
#ifndef DT_MODEL_GPT_CUDA_H
#define DT_MODEL_GPT_CUDA_H

#ifdef __cplusplus
extern "C" {
#endif

#include "config/train_config.h"
#include "dist/comm.h"
#include "model/gpt.h"
#include "optim/optim.h"
#include "trace/trace.h"

typedef struct dt_gpt_cuda dt_gpt_cuda;

/* What the GPU model is made for besides the model config: the batch shape, the dropout
 * rates and the CUDA choices (the --device cuda flags of config/train_flags.def). */
typedef struct dt_gpt_cuda_spec {
    int B, T;
    float hidden_dropout, attn_dropout;
    dt_cuda_options opt;
} dt_gpt_cuda_spec;

/* A new GPU model of host's config with host's parameters (a parameters-only model, see
 * dt_gpt_create_params, will do) for spec. Requires C % 8 == 0 and HS % 8 == 0
 * (DT_EUNSUPPORTED naming the size otherwise). */
dt_status dt_gpt_cuda_create(dt_gpt_cuda **out, const dt_gpt *host, const dt_gpt_cuda_spec *spec);
void dt_gpt_cuda_free(dt_gpt_cuda *m);

/* Dropout is active while training; masks keyed by rng_step (the global micro-batch). */
void dt_gpt_cuda_set_mode(dt_gpt_cuda *m, int training, uint32_t rng_step);

/* The trainer's 1-based step: trace events and --inject-nondeterminism OP@STEP use it. */
void dt_gpt_cuda_set_step(dt_gpt_cuda *m, int64_t step);

/* Forward on host inputs/targets (B,T) (ids checked against V like dt_gpt_forward). When
 * loss_scale != 0 the backward of the cross-entropy is fused in (gradient of
 * loss * loss_scale) and dt_gpt_cuda_backward may follow. Asynchronous. */
dt_status dt_gpt_cuda_forward(dt_gpt_cuda *m, const int *inputs, const int *targets,
                              float loss_scale);
/* Mean loss of the last forward (waits for it). */
dt_status dt_gpt_cuda_loss(dt_gpt_cuda *m, double *loss);
/* Adds the gradients of the last forward into the gradient slab (the first backward after
 * dt_gpt_cuda_zero_grad writes the weight matrices' gradients instead). Asynchronous. */
dt_status dt_gpt_cuda_backward(dt_gpt_cuda *m);
/* Starts the gradients afresh: clears every tensor's gradient except the weight matrices'
 * (wte and the linears' weights), which the next backward's weight-gradient GEMMs write
 * whole (beta 0) instead of adding to: the values of clearing the whole slab (a sum that is
 * exactly zero may keep its sign), without writing and then reading 99% of it. Asynchronous. */
void dt_gpt_cuda_zero_grad(dt_gpt_cuda *m);

/* The data-parallel gradient reduction: the fp32 gradient slab summed over comm's ranks
 * in place on the model's stream (dt_comm_allreduce: rank-ordered in deterministic mode),
 * after the step's last backward; returns once it is done. One rank: nothing to do, no
 * call. The comm must move device memory (the NCCL engine). */
dt_status dt_gpt_cuda_reduce_grads(dt_gpt_cuda *m, dt_comm *comm);

/* Grad norm / param norm / num-zeros (DT_OP_NORM), then one AdamW update (step t >= 1,
 * clipping with the grad norm on the device), then the statistics are read back. */
dt_status dt_gpt_cuda_step(dt_gpt_cuda *m, const dt_adamw_config *c, float lr, int64_t t,
                           dt_grad_stats *stats);

/* Tracing (DESIGN §6): with --trace-level op the forward and backward write one event per
 * op, with module at least one per block, with semantic the step's grad_stats and adamw
 * events; every device tensor is digested on the GPU (trace/trace_cuda.h). This writes the
 * metrics-level "step_metrics" event: `values` (host scalars: loss, norms) derived from
 * the gradients and parameters, whose device digests are its inputs. No-op when the
 * metrics level is not captured now. */
dt_status dt_gpt_cuda_trace_metrics(dt_gpt_cuda *m, const dt_tensor_ref *values, int n);

/* Device-to-host copies of the fp32 slabs (num_params floats each); wait for the stream. */
dt_status dt_gpt_cuda_get_params(dt_gpt_cuda *m, float *dst);
dt_status dt_gpt_cuda_get_grads(dt_gpt_cuda *m, float *dst);
dt_status dt_gpt_cuda_get_opt_state(dt_gpt_cuda *m, float *mstate, float *vstate);
dt_status dt_gpt_cuda_sync(dt_gpt_cuda *m);
/* Host-to-device copy of AdamW's m and v (num_params floats each; a checkpoint's, staged
 * in a host AdamW state); waits for the stream. The parameters need no such call:
 * dt_gpt_cuda_create uploads the host model's, whatever filled them. The AdamW update
 * count is not device state: dt_gpt_cuda_step takes it as t. */
dt_status dt_gpt_cuda_set_opt_state(dt_gpt_cuda *m, const float *mstate, const float *vstate);

/* Device description for env.json: GPU name, SMs, driver/runtime/cuBLASLt versions, the
 * nvcc flags and every pinned GEMM algorithm. A JSON object text owned by the model. */
const char *dt_gpt_cuda_describe(dt_gpt_cuda *m);
/* Bytes of device memory the model allocated. */
size_t dt_gpt_cuda_bytes(const dt_gpt_cuda *m);

/* Named ranges (per op family and phase), timed with CUDA events while profiling is on and
 * marked with NVTX ranges of the same names always. */
enum {
    DT_R_EMBED_FWD, DT_R_LN_FWD, DT_R_MATMUL_FWD, DT_R_ATTN_FWD, DT_R_GELU_FWD, DT_R_HEAD_FWD,
    DT_R_CROSSENTROPY, DT_R_HEAD_BWD, DT_R_MATMUL_BWD, DT_R_BIAS_BWD, DT_R_GELU_BWD,
    DT_R_ATTN_BWD, DT_R_LN_BWD, DT_R_DROPOUT, DT_R_EMBED_BWD, DT_R_NORM, DT_R_ADAMW,
    DT_R_COUNT
};
const char *dt_gpt_cuda_range_name(int r);
/* Starts recording range events (on) / stops (off). */
void dt_gpt_cuda_profile(dt_gpt_cuda *m, int on);
/* How many phase launches (zero_grad, forward, backward) so far were recorded into a CUDA
 * graph, how many replayed one, and how many cuBLASLt workspace memsets the recordings moved
 * off the stream's path (--cuda-graphs; gpt_cuda.cu "CUDA graphs"). */
void dt_gpt_cuda_graph_counts(const dt_gpt_cuda *m, int *captures, int *replays, int *relaxed);
/* Adds the milliseconds of each range recorded since the last call into ms[DT_R_COUNT]
 * (waits for the stream) and clears the record. */
dt_status dt_gpt_cuda_range_ms(dt_gpt_cuda *m, double ms[DT_R_COUNT]);

#ifdef __cplusplus
}
#endif

#endif
