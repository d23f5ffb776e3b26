/* Dropout-masked copies on the GPU and the dtype conversions that share their kernel
 * (dropout_cuda.cu): elementwise, deterministic by nature (dropout.h). The mask of every
 * kernel that fuses dropout is cuda_common.cuh's dt_cu_drop_factor, the CPU's Philox word.
 * Include from .cu files only. */
#ifndef DT_OPS_DROPOUT_CUDA_H
#define DT_OPS_DROPOUT_CUDA_H

#include "ops/cuda/cuda_common.cuh"

extern "C" {
#include "ops/dropout/dropout.h"
}

/* out = bf16(float(x) * dropout factor) (factor 1 when drop is off), n elements. */
void dt_cu_dropout_bf16(bf16 *out, const bf16 *x, size_t n, const dt_dropout *drop, uint32_t purpose,
                        uint32_t layer, cudaStream_t s);
void dt_cu_f32_to_bf16(bf16 *out, const float *x, size_t n, cudaStream_t s);
void dt_cu_bf16_to_f32(float *out, const bf16 *x, size_t n, cudaStream_t s);

#endif
