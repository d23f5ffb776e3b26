/* GELU on the GPU (gelu_cuda.cu): elementwise, deterministic by nature (gelu.h); the
 * backward fused with the bias gradient of the layer that fed it follows the reduce family's
 * column-sum order and finish. Include from .cu files only. */
#ifndef DT_OPS_GELU_CUDA_H
#define DT_OPS_GELU_CUDA_H

#include "ops/cuda/cuda_common.cuh"

extern "C" {
#include "ops/gelu/gelu.h"
}

void dt_cu_gelu_fwd(bf16 *out, const bf16 *inp, size_t n, cudaStream_t s);
void dt_cu_gelu_bwd(bf16 *dinp, const bf16 *inp, const bf16 *dout, size_t n, cudaStream_t s);
/* dt_cu_gelu_bwd over a (rows, cols) buffer fused with dt_cu_colsum(acc, part, dinp, rows,
 * cols, s, fs) (DT_OP_BIAS_BWD, same partials, same order, same bits): the bias gradient of
 * the layer that fed the GELU without reading dinp back. cols % 8 == 0. */
#define DT_CU_HAVE_GELU_BWD_COLSUM 1
void dt_cu_gelu_bwd_colsum(bf16 *dinp, float *acc, float *part, const bf16 *inp, const bf16 *dout,
                           int rows, int cols, cudaStream_t s, cudaStream_t fs);

#endif
