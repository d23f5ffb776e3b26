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

/* Rows too wide for shared memory (Vp > CE_SMEM_MAX / 2): one block per row, read twice.
 * Thread t visits its vectors t, t + CE_THREADS, ... in column order (online max/sum); the
 * pairs are merged by a warp butterfly and then by warp 0 in warp order: the order of every
 * operation is fixed by the thread index. */
__global__ void crossentropy_wide_kernel(float *losses, bf16 *logits, const int *targets, float dloss,
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

#define CE_ROW_THREADS 512
#define CE_SMEM_MAX (200 * 1024)
#define CE_LOG2E 1.4426950408889634f

static __device__ __forceinline__ void ce_cp_async16(void *dst, const void *src) {
    unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src));
}

/* 2^x by the hardware approximation (relative error about 2^-22), subnormal results
 * flushed to 0: a pure function of x, so as deterministic as any fp32 operation. Half the
 * instructions of exp2f; the sums and the dlogits (bf16) do not see the difference. */
static __device__ __forceinline__ float ce_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

/* One block per row, the row read from DRAM once: copied into shared memory (cp.async, every
 * vector in flight at once), then three passes over the copy: the max, the sum of
 * exp(x - max), and dlogits written over the logits. Thread t visits vectors t, t + 512, ...
 * in column order; the sums are added by dt_block_sum's fixed tree (the max is exact in any
 * order): every operation's order is fixed by the thread index.
 * exp(x - a) = 2^(x log2(e) - a log2(e)), one fused multiply-add and one ex2. */
__global__ void __launch_bounds__(CE_ROW_THREADS, 2)
crossentropy_kernel(float *losses, bf16 *logits, const int *targets, float dloss, int V, int Vp) {
    extern __shared__ __align__(16) unsigned char ce_sh[];
    __shared__ float red[32];
    const bf16 *row = reinterpret_cast<const bf16 *>(ce_sh);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nvec = Vp / 8;
    bf16 *x = logits + (size_t)blockIdx.x * Vp;
    for (int v = threadIdx.x; v < nvec; v += CE_ROW_THREADS) ce_cp_async16(ce_sh + v * 16, x + v * 8);
    asm volatile("cp.async.commit_group;\n" ::);
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
    __syncthreads();
    float m = -INFINITY;
    for (int v = threadIdx.x; v < nvec; v += CE_ROW_THREADS) {
        dt_bf16x8 xv = dt_ld8(row + v * 8);
#pragma unroll
        for (int k = 0; k < 8; k++)
            if (v * 8 + k < V) m = fmaxf(m, __bfloat162float(xv.v[k]));
    }
    m = dt_warp_max(m);
    if (lane == 0) red[warp] = m;
    __syncthreads();
    float M = red[0];
    for (int w = 1; w < CE_ROW_THREADS / 32; w++) M = fmaxf(M, red[w]);
    float s = 0.0f, ml = M * CE_LOG2E;
    for (int v = threadIdx.x; v < nvec; v += CE_ROW_THREADS) {
        dt_bf16x8 xv = dt_ld8(row + v * 8);
        if (v * 8 + 8 <= V) { /* every vector but the one holding the padding */
#pragma unroll
            for (int k = 0; k < 8; k++) s += ce_exp2(fmaf(__bfloat162float(xv.v[k]), CE_LOG2E, -ml));
        } else {
#pragma unroll
            for (int k = 0; k < 8; k++)
                if (v * 8 + k < V) s += ce_exp2(fmaf(__bfloat162float(xv.v[k]), CE_LOG2E, -ml));
        }
    }
    float lse = M + logf(dt_block_sum(s, red)); /* its first barrier orders the reads of M */
    int tgt = targets[blockIdx.x];
    if (threadIdx.x == 0) losses[blockIdx.x] = lse - __bfloat162float(row[tgt]);
    if (dloss == 0.0f) return;
    float ll = lse * CE_LOG2E;
    for (int v = threadIdx.x; v < nvec; v += CE_ROW_THREADS) {
        dt_bf16x8 xv = dt_ld8(row + v * 8), o;
#pragma unroll
        for (int k = 0; k < 8; k++) {
            int c = v * 8 + k;
            float g = 0.0f;
            if (c < V) {
                g = ce_exp2(fmaf(__bfloat162float(xv.v[k]), CE_LOG2E, -ll)) * dloss;
                if (c == tgt) g -= dloss;
            }
            o.v[k] = __float2bfloat16(g);
        }
        dt_st8(x + v * 8, o);
    }
}

void dt_cu_crossentropy(float *losses, bf16 *logits, const int *targets, float dloss, int N,
                        int V, int Vp, cudaStream_t s) {
    size_t shm = sizeof(bf16) * (size_t)Vp;
    if (shm > CE_SMEM_MAX) {
        crossentropy_wide_kernel<<<dt_cu_noted(N, CE_THREADS, 0, "crossentropy_wide_kernel"), CE_THREADS, 0, s>>>(losses, logits, targets, dloss, V, Vp);
        return;
    }
    static int attr_set;
    if (!attr_set) {
        cudaFuncSetAttribute(crossentropy_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, CE_SMEM_MAX);
        attr_set = 1;
    }
    crossentropy_kernel<<<dt_cu_noted(N, CE_ROW_THREADS, shm, "crossentropy_kernel"), CE_ROW_THREADS, shm, s>>>(losses, logits, targets, dloss, V, Vp);
}
