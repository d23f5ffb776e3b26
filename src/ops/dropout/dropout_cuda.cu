/* Dropout-masked copies on the GPU and the dtype conversions that share their kernel (see
 * dropout.h, dropout_cuda.h). Deterministic by nature: every output element is written by
 * one thread from its own input, the mask its Philox word (dt_cu_drop_factor). */
#include "ops/dropout/dropout_cuda.h"

static __device__ __forceinline__ float as_float(float v) { return v; }
static __device__ __forceinline__ float as_float(bf16 v) { return __bfloat162float(v); }

/* out = bf16(x * dropout factor): x bf16 (dt_cu_dropout_bf16), or fp32 without dropout
 * (dt_cu_f32_to_bf16) */
template <typename T>
__global__ void to_bf16_dropout_kernel(bf16 *out, const T *x, size_t n, dt_dropout d, uint32_t purpose,
                                       uint32_t layer) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = as_float(x[i]);
    if (d.p > 0.0f) v *= dt_cu_drop_factor(d, purpose, layer, i);
    out[i] = __float2bfloat16(v);
}

__global__ void bf16_to_f32_kernel(float *out, const bf16 *x, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = __bfloat162float(x[i]);
}

void dt_cu_dropout_bf16(bf16 *out, const bf16 *x, size_t n, const dt_dropout *drop, uint32_t purpose,
                        uint32_t layer, cudaStream_t s) {
    to_bf16_dropout_kernel<<<dt_cu_noted(dt_cu_div(n, 256), 256, 0, "to_bf16_dropout_kernel"), 256, 0, s>>>(
        out, x, n, dt_cu_drop_arg(drop), purpose, layer);
}
void dt_cu_f32_to_bf16(bf16 *out, const float *x, size_t n, cudaStream_t s) {
    to_bf16_dropout_kernel<<<dt_cu_noted(dt_cu_div(n, 256), 256, 0, "to_bf16_dropout_kernel"), 256, 0, s>>>(out, x, n, dt_cu_drop_arg(NULL), 0, 0);
}
void dt_cu_bf16_to_f32(float *out, const bf16 *x, size_t n, cudaStream_t s) {
    bf16_to_f32_kernel<<<dt_cu_noted(dt_cu_div(n, 256), 256, 0, "bf16_to_f32_kernel"), 256, 0, s>>>(out, x, n);
}
