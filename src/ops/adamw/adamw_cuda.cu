/* Fused multi-tensor AdamW on the GPU (see adamw.h, adamw_cuda.h): one launch over every
 * parameter tensor, one block per chunk of dt_cu_adamw_chunks. The per-element update is
 * the CPU's (adamw_cpu.c), then the bf16 copy the GEMMs read is refreshed. Elementwise:
 * deterministic by nature. The clip factor is computed on the device from the device grad
 * norm, with the CPU's formula, so the step needs no host round trip. On request each block
 * also sums the squares of its chunk's parameters as it writes them: the parameter norm of
 * the next step's statistics, without a pass of its own and ready before that step's
 * update runs. */
#include "ops/adamw/adamw_cuda.h"

/* The update of one element (adamw_cpu.c's expression order). */
static __device__ __forceinline__ float adamw_one(float &p, float g, float &m, float &v,
                                                  const dt_cu_adamw_args &a, float clip, float wd) {
    float gk = g * clip;
    m = a.beta1 * m + (1.0f - a.beta1) * gk;
    v = a.beta2 * v + (1.0f - a.beta2) * gk * gk;
    float mhat = m / a.bc1, vhat = v / a.bc2;
    p -= a.lr * (mhat / (sqrtf(vhat) + a.eps) + wd * p);
    return p;
}

/* The block's sum of its threads' sq into a.pnorm_part[block] (when asked for). */
static __device__ __forceinline__ void adamw_pnorm(const dt_cu_adamw_args &a, double sq) {
    __shared__ double sd[32];
    if (!a.pnorm_part) return;
    sq = dt_block_sum(sq, sd);
    if (threadIdx.x == 0) a.pnorm_part[blockIdx.x] = sq;
}

#define ADAMW_THREADS 512
#define ADAMW_UNROLL 2

/* One block per chunk. Chunks whose start and length are multiples of 4 (every tensor of
 * the GPT models) go by float4, ADAMW_UNROLL vectors loaded before any is updated; others
 * element by element. One writer per element either way. With a.pnorm_part a thread adds
 * the squares of the parameters it writes in its visiting order (vectors j, j +
 * ADAMW_THREADS, ..., each vector's elements in order), and the block its threads in
 * dt_block_sum's tree: a fixed order. UPDATE = 0 only sums the parameters as they are
 * (dt_cu_adamw_pnorm): the same visiting order, so the same bits as the update that wrote
 * them. */
template <int UPDATE>
__global__ void __launch_bounds__(ADAMW_THREADS)
adamw_kernel(float *__restrict__ param, bf16 *__restrict__ param16, const float *__restrict__ grad,
             float *__restrict__ m, float *__restrict__ v, dt_cu_adamw_args a) {
    dt_cu_chunk ch = a.chunks[blockIdx.x];
    float clip = 1.0f, wd = 0.0f;
    if (UPDATE) {
        double gn = *a.grad_norm;
        if (a.clip_grad > 0.0f && gn > a.clip_grad) clip = (float)(a.clip_grad / (gn + 1e-6));
        wd = a.decay[ch.tensor];
    }
    double sq = 0.0; /* this thread's sum of p^2 (a.pnorm_part), of the new p with UPDATE */
    if ((ch.start | ch.len) & 3u) {
        for (uint32_t j = threadIdx.x; j < ch.len; j += blockDim.x) {
            size_t k = ch.start + j;
            float p = param[k];
            if (UPDATE) {
                float mk = m[k], vk = v[k];
                param16[k] = __float2bfloat16(adamw_one(p, grad[k], mk, vk, a, clip, wd));
                m[k] = mk;
                v[k] = vk;
                param[k] = p;
            }
            sq += (double)p * (double)p;
        }
        adamw_pnorm(a, sq);
        return;
    }
    float4 *p4 = reinterpret_cast<float4 *>(param + ch.start), *m4 = reinterpret_cast<float4 *>(m + ch.start);
    float4 *v4 = reinterpret_cast<float4 *>(v + ch.start);
    const float4 *g4 = reinterpret_cast<const float4 *>(grad + ch.start);
    uint2 *h4 = reinterpret_cast<uint2 *>(param16 + ch.start);
    uint32_t n4 = ch.len / 4;
    for (uint32_t j0 = threadIdx.x; j0 < n4; j0 += ADAMW_THREADS * ADAMW_UNROLL) {
        float4 P[ADAMW_UNROLL], G[ADAMW_UNROLL], Mv[ADAMW_UNROLL], Vv[ADAMW_UNROLL];
#pragma unroll
        for (int u = 0; u < ADAMW_UNROLL; u++) {
            uint32_t j = j0 + u * ADAMW_THREADS;
            if (j < n4) {
                P[u] = p4[j];
                if (UPDATE) {
                    G[u] = g4[j];
                    Mv[u] = m4[j];
                    Vv[u] = v4[j];
                }
            }
        }
#pragma unroll
        for (int u = 0; u < ADAMW_UNROLL; u++) {
            uint32_t j = j0 + u * ADAMW_THREADS;
            if (j >= n4) continue;
            if (UPDATE) {
                adamw_one(P[u].x, G[u].x, Mv[u].x, Vv[u].x, a, clip, wd);
                adamw_one(P[u].y, G[u].y, Mv[u].y, Vv[u].y, a, clip, wd);
                adamw_one(P[u].z, G[u].z, Mv[u].z, Vv[u].z, a, clip, wd);
                adamw_one(P[u].w, G[u].w, Mv[u].w, Vv[u].w, a, clip, wd);
                p4[j] = P[u];
                m4[j] = Mv[u];
                v4[j] = Vv[u];
                __nv_bfloat162 lo = __floats2bfloat162_rn(P[u].x, P[u].y), hi = __floats2bfloat162_rn(P[u].z, P[u].w);
                uint2 h;
                h.x = *reinterpret_cast<uint32_t *>(&lo);
                h.y = *reinterpret_cast<uint32_t *>(&hi);
                h4[j] = h;
            }
            sq += (double)P[u].x * (double)P[u].x;
            sq += (double)P[u].y * (double)P[u].y;
            sq += (double)P[u].z * (double)P[u].z;
            sq += (double)P[u].w * (double)P[u].w;
        }
    }
    adamw_pnorm(a, sq);
}

void dt_cu_adamw(float *param, bf16 *param16, const float *grad, float *m, float *v,
                 const dt_cu_adamw_args *a, cudaStream_t s) {
    adamw_kernel<1><<<dt_cu_noted(a->nchunks, ADAMW_THREADS, 0, "adamw_kernel"), ADAMW_THREADS, 0, s>>>(param, param16, grad, m, v, *a);
}

void dt_cu_adamw_pnorm(const float *param, const dt_cu_adamw_args *a, cudaStream_t s) {
    adamw_kernel<0><<<dt_cu_noted(a->nchunks, ADAMW_THREADS, 0, "adamw_kernel<0>"), ADAMW_THREADS, 0, s>>>(
        (float *)param, NULL, NULL, NULL, NULL, *a);
}
