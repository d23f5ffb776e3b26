/* Fused softmax cross-entropy on the GPU (see crossentropy.h, ops_cuda.h). */
#include "ops/ops_cuda.h"

#include <math.h>

#define CE_THREADS 256

/* Merges two online-softmax pairs (m, s). Symmetric in its arguments (max and + commute),
 * so both lanes of a butterfly step compute the same bits. */
static __device__ __forceinline__ void ce_merge(float &m, float &s, float m2, float s2) {
    float nm = fmaxf(m, m2);
    if (nm == -INFINITY) return; /* both empty */
    s = s * expf(m - nm) + s2 * expf(m2 - nm);
    m = nm;
}

/* One block per row. Thread t visits its vectors t, t + CE_THREADS, ... in column order
 * (online max/sum); the pairs are merged by a warp butterfly and then by warp 0 in warp
 * order: the order of every operation is fixed by the thread index. */
__global__ void crossentropy_kernel(float *losses, bf16 *logits, const int *targets, float dloss,
                                    int V, int Vp) {
    __shared__ float sm[32], ss[32], s_lse;
    int row = blockIdx.x, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    bf16 *x = logits + (size_t)row * Vp;
    float m = -INFINITY, s = 0.0f;
    for (int v = threadIdx.x; v < Vp / 8; v += CE_THREADS) {
        dt_bf16x8 xv = dt_ld8(x + v * 8);
#pragma unroll
        for (int k = 0; k < 8; k++) {
            if (v * 8 + k >= V) break;
            float xi = __bfloat162float(xv.v[k]);
            if (xi > m) {
                s = s * expf(m - xi) + 1.0f;
                m = xi;
            } else {
                s += expf(xi - m);
            }
        }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
        ce_merge(m, s, m2, s2);
    }
    if (lane == 0) {
        sm[warp] = m;
        ss[warp] = s;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        float M = sm[0], S = ss[0];
        for (int w = 1; w < CE_THREADS / 32; w++) ce_merge(M, S, sm[w], ss[w]);
        float lse = M + logf(S);
        s_lse = lse;
        losses[row] = lse - __bfloat162float(x[targets[row]]);
    }
    __syncthreads();
    if (dloss == 0.0f) return;
    float lse = s_lse;
    int tgt = targets[row];
    for (int v = threadIdx.x; v < Vp / 8; v += CE_THREADS) {
        dt_bf16x8 xv = dt_ld8(x + v * 8), o;
#pragma unroll
        for (int k = 0; k < 8; k++) {
            int c = v * 8 + k;
            float g = 0.0f;
            if (c < V) {
                g = expf(__bfloat162float(xv.v[k]) - lse) * dloss;
                if (c == tgt) g -= dloss;
            }
            o.v[k] = __float2bfloat16(g);
        }
        dt_st8(x + v * 8, o);
    }
}

void dt_cu_crossentropy(float *losses, bf16 *logits, const int *targets, float dloss, int N,
                        int V, int Vp, cudaStream_t s) {
    crossentropy_kernel<<<N, CE_THREADS, 0, s>>>(losses, logits, targets, dloss, V, Vp);
}
