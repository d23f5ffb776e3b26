/* The fused softmax cross-entropy on the GPU (crossentropy_cuda.cu). The math and each
 * path's determinism class are in crossentropy.h. Include from .cu files only. */
#ifndef DT_OPS_CROSSENTROPY_CUDA_H
#define DT_OPS_CROSSENTROPY_CUDA_H

#include "ops/cuda/cuda_common.cuh"

extern "C" {
#include "ops/crossentropy/crossentropy.h"
#include "ops/crossentropy/crossentropy_plan.h"
}

/* One block per row, the row in shared memory: per-thread online (max, sum) over its
 * vocabulary vectors in column order as their copy lands, merged in a fixed tree. losses
 * (N) fp32. When dloss != 0 the logits (bf16, N x Vp) are overwritten with dlogits =
 * (softmax - onehot) * dloss, padded columns 0 (the backward fused into the forward). The
 * mean loss is dt_cu_reduce over losses. */
void dt_cu_crossentropy(float *losses, bf16 *logits, const int *targets, float dloss, int N,
                        int V, int Vp, cudaStream_t s);

#endif
