/* Fused multi-tensor AdamW on the GPU (see optim.h, ops_cuda.h): one launch over every
 * parameter tensor, one block per chunk of dt_cu_adamw_chunks. The per-element update is
 * the CPU's (optim/adamw.c), then the bf16 copy the GEMMs read is refreshed. Elementwise:
 * deterministic by nature. The clip factor is computed on the device from the device grad
 * norm, with the CPU's formula, so the step needs no host round trip. */
#include "ops/ops_cuda.h"

__global__ void adamw_kernel(float *param, bf16 *param16, const float *grad, float *m, float *v,
                             dt_cu_adamw_args a) {
    dt_cu_chunk ch = a.chunks[blockIdx.x];
    double gn = *a.grad_norm;
    float clip = 1.0f;
    if (a.clip_grad > 0.0f && gn > a.clip_grad) clip = (float)(a.clip_grad / (gn + 1e-6));
    float wd = a.decay[ch.tensor];
    for (uint32_t j = threadIdx.x; j < ch.len; j += blockDim.x) {
        size_t k = ch.start + j;
        float gk = grad[k] * clip;
        float mk = a.beta1 * m[k] + (1.0f - a.beta1) * gk;
        float vk = a.beta2 * v[k] + (1.0f - a.beta2) * gk * gk;
        float mhat = mk / a.bc1, vhat = vk / a.bc2;
        float p = param[k];
        p -= a.lr * (mhat / (sqrtf(vhat) + a.eps) + wd * p);
        m[k] = mk;
        v[k] = vk;
        param[k] = p;
        param16[k] = __float2bfloat16(p);
    }
}

void dt_cu_adamw(float *param, bf16 *param16, const float *grad, float *m, float *v,
                 const dt_cu_adamw_args *a, cudaStream_t s) {
    adamw_kernel<<<a->nchunks, 512, 0, s>>>(param, param16, grad, m, v, *a);
}
