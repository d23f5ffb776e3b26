/* Fused softmax cross-entropy on the GPU (see crossentropy.h, crossentropy_cuda.h). */
#include "ops/crossentropy/crossentropy_cuda.h"

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
#define CE_GROUP 4 /* vectors a thread takes per step of the online (max, sum) */
#define CE_SMEM_MAX (200 * 1024)
#define CE_LOG2E 1.4426950408889634f

/* 2^x by the hardware approximation (relative error about 2^-22), subnormal results
 * flushed to 0: a pure function of x, so as deterministic as any fp32 operation. Half the
 * instructions of exp2f; the sums and the dlogits (bf16) do not see the difference. */
static __device__ __forceinline__ float ce_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

/* Waits until at most `pending` of this thread's newest cp.async groups are in flight
 * (wait_group takes an immediate; above 7 it waits for 7, which only waits longer). */
static __device__ __forceinline__ void ce_wait(int pending) {
    switch (pending) {
    case 0: asm volatile("cp.async.wait_group 0;\n" ::: "memory"); break;
    case 1: asm volatile("cp.async.wait_group 1;\n" ::: "memory"); break;
    case 2: asm volatile("cp.async.wait_group 2;\n" ::: "memory"); break;
    case 3: asm volatile("cp.async.wait_group 3;\n" ::: "memory"); break;
    case 4: asm volatile("cp.async.wait_group 4;\n" ::: "memory"); break;
    case 5: asm volatile("cp.async.wait_group 5;\n" ::: "memory"); break;
    case 6: asm volatile("cp.async.wait_group 6;\n" ::: "memory"); break;
    default: asm volatile("cp.async.wait_group 7;\n" ::: "memory"); break;
    }
}

/* Rows that fit shared memory: one block per row, the row read from DRAM once into shared
 * memory. Thread t only ever touches its own vectors t, t + 512, ... (its stripes), so no
 * barrier guards the copy, and the copy is cut into cp.async groups of CE_GROUP stripes:
 *  1. online (max, sum) over the thread's stripes, a group at a time as soon as it has
 *     landed (the later groups still in flight): the group's max, the running sum rescaled
 *     when the max grows, then the group's exp(x - max) added in column order;
 *  2. the block's pair: a warp butterfly (max, then the sums rescaled to the warp max and
 *     added), the warps' pairs through shared memory (the one barrier), and every warp
 *     merges them by the same butterfly, so every thread holds the same bits of lse;
 *  3. dlogits = (exp(x - lse) - onehot) * dloss from the copy, stored over the logits; the
 *     owner of the target's vector writes the loss.
 * The order of every operation is a function of the thread index and the row length.
 * Persistent blocks that refill their copy with the next row during step 3 measured slower
 * (0.865 vs 0.796 ms at 16384 x 50304 on an H200): fresh blocks put a whole row's reads in
 * flight at once. exp(x - a) = 2^(x log2(e) - a log2(e)), one fused multiply-add and one ex2. */
__global__ void __launch_bounds__(CE_ROW_THREADS, 2)
crossentropy_kernel(float *losses, bf16 *logits, const int *targets, float dloss, int V, int Vp) {
    extern __shared__ __align__(16) unsigned char ce_sh[];
    __shared__ float red_m[CE_ROW_THREADS / 32], red_s[CE_ROW_THREADS / 32];
    const bf16 *sx = reinterpret_cast<const bf16 *>(ce_sh);
    const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
    const int nvec = Vp / 8, I = (nvec + CE_ROW_THREADS - 1) / CE_ROW_THREADS, ng = (I + CE_GROUP - 1) / CE_GROUP;
    bf16 *x = logits + (size_t)blockIdx.x * Vp;
    for (int i = 0; i < I; i++) {
        const int v = t + i * CE_ROW_THREADS;
        if (v < nvec) cp_async16(ce_sh + v * 16, x + v * 8);
        if (i % CE_GROUP == CE_GROUP - 1 || i == I - 1) cp_commit();
    }
    const int tgt = targets[blockIdx.x];
    float m = -INFINITY, s = 0.0f;
    for (int g = 0; g < ng; g++) {
        ce_wait(ng - 1 - g);
        float xf[CE_GROUP * 8];
        const int v0 = t + g * CE_GROUP * CE_ROW_THREADS;
        if ((v0 + (CE_GROUP - 1) * CE_ROW_THREADS) * 8 + 8 <= V) { /* every column real */
#pragma unroll
            for (int j = 0; j < CE_GROUP; j++) {
                dt_bf16x8 xv = dt_ld8(sx + (v0 + j * CE_ROW_THREADS) * 8);
#pragma unroll
                for (int k = 0; k < 8; k++) xf[j * 8 + k] = __bfloat162float(xv.v[k]);
            }
        } else { /* past the row or padding: -inf, which adds exactly 0 */
#pragma unroll
            for (int j = 0; j < CE_GROUP; j++) {
                const int v = v0 + j * CE_ROW_THREADS;
                dt_bf16x8 xv;
                if (v < nvec) xv = dt_ld8(sx + v * 8);
#pragma unroll
                for (int k = 0; k < 8; k++)
                    xf[j * 8 + k] = v < nvec && v * 8 + k < V ? __bfloat162float(xv.v[k]) : -INFINITY;
            }
        }
        float gm = xf[0];
#pragma unroll
        for (int e = 1; e < CE_GROUP * 8; e++) gm = fmaxf(gm, xf[e]);
        if (gm > m) { /* from -inf: s is 0 and 2^-inf is 0 */
            s *= ce_exp2((m - gm) * CE_LOG2E);
            m = gm;
        }
        if (m != -INFINITY) {
            const float ml = m * CE_LOG2E;
#pragma unroll
            for (int e = 0; e < CE_GROUP * 8; e++) s += ce_exp2(fmaf(xf[e], CE_LOG2E, -ml));
        }
    }
    const float wm = dt_warp_max(m);
    s = dt_warp_sum(m == -INFINITY ? 0.0f : s * ce_exp2((m - wm) * CE_LOG2E));
    if (lane == 0) {
        red_m[warp] = wm;
        red_s[warp] = s;
    }
    __syncthreads();
    const float bm = lane < CE_ROW_THREADS / 32 ? red_m[lane] : -INFINITY;
    const float bs = lane < CE_ROW_THREADS / 32 ? red_s[lane] : 0.0f;
    const float M = dt_warp_max(bm);
    const float lse = M + logf(dt_warp_sum(bm == -INFINITY ? 0.0f : bs * ce_exp2((bm - M) * CE_LOG2E)));
    const float ll = lse * CE_LOG2E;
    const int tv = tgt >> 3;
    for (int i = 0; i < I; i++) {
        const int v = t + i * CE_ROW_THREADS;
        if (v >= nvec) break;
        dt_bf16x8 xv = dt_ld8(sx + v * 8), o;
        if (v * 8 + 8 <= V && v != tv) {
            if (dloss == 0.0f) continue;
#pragma unroll
            for (int k = 0; k < 8; k += 2) {
                float a = ce_exp2(fmaf(__bfloat162float(xv.v[k]), CE_LOG2E, -ll)) * dloss;
                float b = ce_exp2(fmaf(__bfloat162float(xv.v[k + 1]), CE_LOG2E, -ll)) * dloss;
                *reinterpret_cast<__nv_bfloat162 *>(&o.v[k]) = __floats2bfloat162_rn(a, b);
            }
        } else { /* the target's vector or one holding padding */
#pragma unroll
            for (int k = 0; k < 8; k++) {
                const int c = v * 8 + k;
                const float xk = __bfloat162float(xv.v[k]);
                float gk = 0.0f;
                if (c < V) gk = ce_exp2(fmaf(xk, CE_LOG2E, -ll)) * dloss;
                if (c == tgt) {
                    gk -= dloss;
                    losses[blockIdx.x] = lse - xk;
                }
                o.v[k] = __float2bfloat16(gk);
            }
            if (dloss == 0.0f) continue;
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
    if (N <= 0) return;
    crossentropy_kernel<<<dt_cu_noted(N, CE_ROW_THREADS, shm, "crossentropy_kernel"), CE_ROW_THREADS, shm, s>>>(losses, logits, targets, dloss, V, Vp);
}
