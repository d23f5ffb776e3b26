/* The fused multi-tensor AdamW update on the GPU (adamw_cuda.cu): elementwise,
 * deterministic by nature (adamw.h). Include from .cu files only. */
#ifndef DT_OPS_ADAMW_CUDA_H
#define DT_OPS_ADAMW_CUDA_H

#include "ops/cuda/cuda_common.cuh"

extern "C" {
#include "ops/adamw/adamw.h"
#include "ops/adamw/adamw_plan.h"
}

typedef struct dt_cu_adamw_args {
    float lr, beta1, beta2, eps, bc1, bc2, clip_grad;
    const double *grad_norm;    /* device: the global grad norm before clipping */
    const float *decay;         /* device: weight decay per tensor */
    const dt_cu_chunk *chunks;  /* device: dt_cu_adamw_chunks of the parameter slab */
    int nchunks;
    double *pnorm_part;         /* device, nchunks doubles, or NULL: see dt_cu_adamw */
} dt_cu_adamw_args;
/* One fused launch over every parameter tensor (one block per chunk): the CPU update of
 * adamw_cpu.c per element, then param16 = bf16(param). With a->pnorm_part, block i also
 * writes pnorm_part[i] = the fp64 sum of the squares of chunk i's parameters after the
 * update (each thread adds its elements in the order it visits them, then dt_block_sum's
 * fixed tree): the next step's parameter norm, which so costs no pass of its own and is
 * ready before that step's update (dt_cu_sum_parts adds them). */
void dt_cu_adamw(float *param, bf16 *param16, const float *grad, float *m, float *v,
                 const dt_cu_adamw_args *a, cudaStream_t s);
/* Only a->pnorm_part, of the parameters as they are, without an update: what dt_cu_adamw
 * wrote for the update that made them (the same visiting order, so the same bits). For
 * parameters no update made (the first step). Reads a->chunks and param. */
void dt_cu_adamw_pnorm(const float *param, const dt_cu_adamw_args *a, cudaStream_t s);

#endif
