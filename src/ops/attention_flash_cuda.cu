/* Fused causal attention on the GPU, flash style (see attention.h, ops_cuda.h): scores
 * never go through device memory. Head size 64, T a multiple of 64, no attention dropout
 * (dt_cu_flash_supported); other shapes use the GEMM formulation (attention_cuda.cu).
 * Tiles of 64 queries x 64 keys in shared memory; each of 4 warps owns 16 rows and runs
 * bf16 tensor-core products (WMMA 16x16x16, fp32 accumulate).
 *
 * Forward: per query block, keys in block order with an online softmax (running max and
 * sum per row, fp32); writes out (bf16) and lse = max + log(sum) (fp32) per row.
 * Backward: D = rowsum(dO * O); kernel A owns a key block and walks the query blocks in
 * order, accumulating dK and dV in registers (one owner per element: fixed order).
 * dQ (DT_OP_ATTENTION_BWD):
 *   det  — kernel B owns a query block and walks the key blocks in order, recomputing the
 *          probabilities: one owner per dQ element, a fixed order, no atomics;
 *   fast — kernel A adds each key block's dQ contribution into an fp32 buffer with
 *          atomicAdd (order of arrival), converted to bf16 afterwards. */
#include "ops/ops_cuda.h"

#include <mma.h>

using namespace nvcuda;

#define FD 64        /* head size */
#define FB 64        /* rows of a query or key tile */
#define LDH 72       /* bf16 row stride in shared memory (bank spread, 32-byte fragments) */
#define LDF 68       /* fp32 row stride */

typedef wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> frag_a;
typedef wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::col_major> frag_at;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> frag_b;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> frag_bt;
typedef wmma::fragment<wmma::accumulator, 16, 16, 16, float> frag_c;

int dt_cu_flash_supported(int C, int NH, int T, const dt_dropout *drop) {
    return C / NH == FD && T % FB == 0 && !dt_dropout_on(drop);
}

/* Loads a 64 x 64 bf16 tile (rows r0.., row stride ld elements) into shared memory. */
static __device__ __forceinline__ void load_tile(bf16 *dst, const bf16 *src, size_t ld) {
    for (int i = threadIdx.x; i < FB * 8; i += blockDim.x) {
        int r = i >> 3, v = i & 7;
        *reinterpret_cast<int4 *>(dst + r * LDH + v * 8) =
            *reinterpret_cast<const int4 *>(src + (size_t)r * ld + v * 8);
    }
}

/* out (16 x 64, ld_out) = A (16 x 64) . B^T where B is (64 x 64) row-major: S = Q K^T. */
static __device__ __forceinline__ void mm_abt(float *out, int ld_out, const bf16 *A, const bf16 *B) {
#pragma unroll
    for (int n = 0; n < 4; n++) {
        frag_c c;
        wmma::fill_fragment(c, 0.0f);
#pragma unroll
        for (int k = 0; k < 4; k++) {
            frag_a a;
            frag_bt b;
            wmma::load_matrix_sync(a, A + k * 16, LDH);
            wmma::load_matrix_sync(b, B + n * 16 * LDH + k * 16, LDH);
            wmma::mma_sync(c, a, b, c);
        }
        wmma::store_matrix_sync(out + n * 16, c, ld_out, wmma::mem_row_major);
    }
}

/* acc[n] (16 x 64 in 4 fragments) += A (16 x 64, row-major) . B (64 x 64, row-major). */
static __device__ __forceinline__ void mm_ab_acc(frag_c acc[4], const bf16 *A, const bf16 *B) {
#pragma unroll
    for (int k = 0; k < 4; k++) {
        frag_a a;
        wmma::load_matrix_sync(a, A + k * 16, LDH);
#pragma unroll
        for (int n = 0; n < 4; n++) {
            frag_b b;
            wmma::load_matrix_sync(b, B + k * 16 * LDH + n * 16, LDH);
            wmma::mma_sync(acc[n], a, b, acc[n]);
        }
    }
}

/* ---- forward ---------------------------------------------------------------------------- */

#define FWD_SMEM (3 * FB * LDH * 2 + 4 * 16 * LDF * 4 * 2 + 4 * 16 * LDH * 2)

__global__ void __launch_bounds__(128) flash_fwd_kernel(bf16 *out, float *lse, const bf16 *qkv, int T,
                                                        int NH, float scale) {
    extern __shared__ __align__(128) unsigned char smem[];
    bf16 *Q = (bf16 *)smem, *K = Q + FB * LDH, *V = K + FB * LDH;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    float *S = (float *)(V + FB * LDH) + warp * 16 * LDF;
    float *O = (float *)(V + FB * LDH) + 4 * 16 * LDF + warp * 16 * LDF;
    bf16 *P = (bf16 *)((float *)(V + FB * LDH) + 8 * 16 * LDF) + warp * 16 * LDH;
    int bh = blockIdx.y, b = bh / NH, h = bh % NH, nqb = T / FB, qb = nqb - 1 - blockIdx.x;
    int C = NH * FD, C3 = 3 * C;
    const bf16 *base = qkv + (size_t)b * T * C3 + h * FD;
    load_tile(Q, base + (size_t)qb * FB * C3, C3);
    int r = lane >> 1, half = lane & 1, qt = qb * FB + warp * 16 + r;
    for (int j = 0; j < 32; j++) O[r * LDF + half * 32 + j] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    for (int kb = 0; kb <= qb; kb++) {
        __syncthreads(); /* the previous tiles are no longer read */
        load_tile(K, base + C + (size_t)kb * FB * C3, C3);
        load_tile(V, base + 2 * C + (size_t)kb * FB * C3, C3);
        __syncthreads();
        mm_abt(S, LDF, Q + warp * 16 * LDH, K);
        __syncwarp();
        /* online softmax: lanes 2r and 2r+1 own row r, 32 columns each */
        float *srow = S + r * LDF + half * 32;
        float mx = -INFINITY;
        for (int j = 0; j < 32; j++) {
            int key = kb * FB + half * 32 + j;
            float s = key <= qt ? srow[j] * scale : -INFINITY;
            srow[j] = s;
            mx = fmaxf(mx, s);
        }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        float mn = fmaxf(m, mx);
        float corr = m == -INFINITY ? 0.0f : expf(m - mn);
        float sum = 0.0f;
        bf16 *prow = P + r * LDH + half * 32;
        float *orow = O + r * LDF + half * 32;
        for (int j = 0; j < 32; j++) {
            float p = srow[j] == -INFINITY ? 0.0f : expf(srow[j] - mn);
            prow[j] = __float2bfloat16(p);
            sum += p;
            orow[j] *= corr;
        }
        sum += __shfl_xor_sync(0xffffffffu, sum, 1); /* a + b: the same bits on both lanes */
        l = l * corr + sum;
        m = mn;
        __syncwarp();
        frag_c acc[4];
#pragma unroll
        for (int n = 0; n < 4; n++) wmma::load_matrix_sync(acc[n], O + n * 16, LDF, wmma::mem_row_major);
        mm_ab_acc(acc, P, V);
#pragma unroll
        for (int n = 0; n < 4; n++) wmma::store_matrix_sync(O + n * 16, acc[n], LDF, wmma::mem_row_major);
        __syncwarp();
    }
    float inv = 1.0f / l;
    bf16 *o = out + ((size_t)b * T + qt) * C + h * FD + half * 32;
    for (int j = 0; j < 32; j += 8) {
        dt_bf16x8 v;
#pragma unroll
        for (int k = 0; k < 8; k++) v.v[k] = __float2bfloat16(O[r * LDF + half * 32 + j + k] * inv);
        dt_st8(o + j, v);
    }
    if (!half) lse[(size_t)bh * T + qt] = m + logf(l);
}

/* ---- backward ----------------------------------------------------------------------------- */

/* D[bh, t] = sum_d dO[t, d] O[t, d] (one warp per row, butterfly sum). */
__global__ void flash_dot_kernel(float *D, const bf16 *dout, const bf16 *out, int B, int T, int NH) {
    int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= B * NH * T) return;
    int t = row % T, bh = row / T, b = bh / NH, h = bh % NH, C = NH * FD;
    size_t off = ((size_t)b * T + t) * C + h * FD + lane * 2;
    float s = __bfloat162float(dout[off]) * __bfloat162float(out[off]) +
              __bfloat162float(dout[off + 1]) * __bfloat162float(out[off + 1]);
    s = dt_warp_sum(s);
    if (lane == 0) D[row] = s;
}

#define BWDA_SMEM (4 * FB * LDH * 2 + 2 * FB * 4 + 4 * (2 * 16 * LDF * 4 + 2 * 16 * LDH * 2))

/* Kernel A: a key block; dK, dV in registers; fast: atomic dQ into dq (fp32, B,T,C). */
__global__ void __launch_bounds__(128) flash_bwd_kv_kernel(bf16 *dqkv, float *dq, const bf16 *qkv,
                                                           const bf16 *dout, const float *lse,
                                                           const float *D, int T, int NH, float scale) {
    extern __shared__ __align__(128) unsigned char smem[];
    bf16 *K = (bf16 *)smem, *V = K + FB * LDH, *Q = V + FB * LDH, *dO = Q + FB * LDH;
    float *Ls = (float *)(dO + FB * LDH), *Ds = Ls + FB;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    float *wbase = Ds + FB + warp * (2 * 16 * LDF + 16 * LDH); /* per-warp region, in floats */
    float *ST = wbase, *dPT = ST + 16 * LDF;
    bf16 *PT = (bf16 *)(dPT + 16 * LDF), *dST = PT + 16 * LDH;
    int bh = blockIdx.y, b = bh / NH, h = bh % NH, nqb = T / FB, kb = blockIdx.x;
    int C = NH * FD, C3 = 3 * C;
    const bf16 *base = qkv + (size_t)b * T * C3 + h * FD;
    load_tile(K, base + C + (size_t)kb * FB * C3, C3);
    load_tile(V, base + 2 * C + (size_t)kb * FB * C3, C3);
    frag_c dk[4], dv[4];
#pragma unroll
    for (int n = 0; n < 4; n++) {
        wmma::fill_fragment(dk[n], 0.0f);
        wmma::fill_fragment(dv[n], 0.0f);
    }
    int r = lane >> 1, half = lane & 1, key = kb * FB + warp * 16 + r;
    for (int qb = kb; qb < nqb; qb++) {
        __syncthreads();
        load_tile(Q, base + (size_t)qb * FB * C3, C3);
        load_tile(dO, dout + ((size_t)b * T + (size_t)qb * FB) * C + h * FD, C);
        if (threadIdx.x < FB) {
            Ls[threadIdx.x] = lse[(size_t)bh * T + qb * FB + threadIdx.x];
            Ds[threadIdx.x] = D[(size_t)bh * T + qb * FB + threadIdx.x];
        }
        __syncthreads();
        mm_abt(ST, LDF, K + warp * 16 * LDH, Q);   /* S^T: keys x queries */
        mm_abt(dPT, LDF, V + warp * 16 * LDH, dO); /* dP^T = V dO^T */
        __syncwarp();
        for (int j = 0; j < 32; j++) {
            int c = half * 32 + j, q = qb * FB + c;
            float p = q >= key ? expf(ST[r * LDF + c] * scale - Ls[c]) : 0.0f;
            PT[r * LDH + c] = __float2bfloat16(p);
            dST[r * LDH + c] = __float2bfloat16(p * (dPT[r * LDF + c] - Ds[c]));
        }
        __syncwarp();
        mm_ab_acc(dv, PT, dO);
        mm_ab_acc(dk, dST, Q);
        if (dq) { /* fast: this key block's dQ share, dS (queries x 16 keys) . K_w, added atomically */
            for (int mt = 0; mt < 4; mt++) {
#pragma unroll
                for (int n = 0; n < 4; n++) {
                    frag_c c;
                    wmma::fill_fragment(c, 0.0f);
                    frag_at a;
                    frag_b bb;
                    wmma::load_matrix_sync(a, dST + mt * 16, LDH);
                    wmma::load_matrix_sync(bb, K + warp * 16 * LDH + n * 16, LDH);
                    wmma::mma_sync(c, a, bb, c);
                    wmma::store_matrix_sync(ST + n * 16, c, LDF, wmma::mem_row_major);
                }
                __syncwarp();
                for (int j = 0; j < 32; j++) {
                    int c = half * 32 + j, q = qb * FB + mt * 16 + r;
                    atomicAdd(&dq[((size_t)b * T + q) * C + h * FD + c], ST[r * LDF + c] * scale);
                }
                __syncwarp();
            }
        }
    }
    /* write dK (scaled) and dV through the per-warp fp32 buffer */
    for (int which = 0; which < 2; which++) {
#pragma unroll
        for (int n = 0; n < 4; n++)
            wmma::store_matrix_sync(ST + n * 16, which ? dv[n] : dk[n], LDF, wmma::mem_row_major);
        __syncwarp();
        float f = which ? 1.0f : scale;
        bf16 *dst = dqkv + ((size_t)b * T + key) * C3 + (which ? 2 * C : C) + h * FD + half * 32;
        for (int j = 0; j < 32; j += 8) {
            dt_bf16x8 v;
#pragma unroll
            for (int k = 0; k < 8; k++) v.v[k] = __float2bfloat16(ST[r * LDF + half * 32 + j + k] * f);
            dt_st8(dst + j, v);
        }
        __syncwarp();
    }
}

#define BWDQ_SMEM (4 * FB * LDH * 2 + 2 * FB * 4 + 4 * (2 * 16 * LDF * 4 + 16 * LDH * 2))

/* Kernel B (det): a query block; key blocks in order; dQ in registers. */
__global__ void __launch_bounds__(128) flash_bwd_q_kernel(bf16 *dqkv, const bf16 *qkv, const bf16 *dout,
                                                          const float *lse, const float *D, int T, int NH,
                                                          float scale) {
    extern __shared__ __align__(128) unsigned char smem[];
    bf16 *Q = (bf16 *)smem, *dO = Q + FB * LDH, *K = dO + FB * LDH, *V = K + FB * LDH;
    float *Ls = (float *)(V + FB * LDH), *Ds = Ls + FB;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    float *S = Ds + FB + warp * (2 * 16 * LDF + 16 * LDH / 2), *dP = S + 16 * LDF;
    bf16 *dS = (bf16 *)(dP + 16 * LDF);
    int bh = blockIdx.y, b = bh / NH, h = bh % NH, nqb = T / FB, qb = nqb - 1 - blockIdx.x;
    int C = NH * FD, C3 = 3 * C;
    const bf16 *base = qkv + (size_t)b * T * C3 + h * FD;
    load_tile(Q, base + (size_t)qb * FB * C3, C3);
    load_tile(dO, dout + ((size_t)b * T + (size_t)qb * FB) * C + h * FD, C);
    if (threadIdx.x < FB) {
        Ls[threadIdx.x] = lse[(size_t)bh * T + qb * FB + threadIdx.x];
        Ds[threadIdx.x] = D[(size_t)bh * T + qb * FB + threadIdx.x];
    }
    frag_c dq[4];
#pragma unroll
    for (int n = 0; n < 4; n++) wmma::fill_fragment(dq[n], 0.0f);
    int r = lane >> 1, half = lane & 1, lr = warp * 16 + r, q = qb * FB + lr;
    for (int kb = 0; kb <= qb; kb++) {
        __syncthreads();
        load_tile(K, base + C + (size_t)kb * FB * C3, C3);
        load_tile(V, base + 2 * C + (size_t)kb * FB * C3, C3);
        __syncthreads();
        mm_abt(S, LDF, Q + warp * 16 * LDH, K);
        mm_abt(dP, LDF, dO + warp * 16 * LDH, V);
        __syncwarp();
        for (int j = 0; j < 32; j++) {
            int c = half * 32 + j, key = kb * FB + c;
            float p = key <= q ? expf(S[r * LDF + c] * scale - Ls[lr]) : 0.0f;
            dS[r * LDH + c] = __float2bfloat16(p * (dP[r * LDF + c] - Ds[lr]));
        }
        __syncwarp();
        mm_ab_acc(dq, dS, K);
    }
#pragma unroll
    for (int n = 0; n < 4; n++) wmma::store_matrix_sync(S + n * 16, dq[n], LDF, wmma::mem_row_major);
    __syncwarp();
    bf16 *dst = dqkv + ((size_t)b * T + q) * C3 + h * FD + half * 32;
    for (int j = 0; j < 32; j += 8) {
        dt_bf16x8 v;
#pragma unroll
        for (int k = 0; k < 8; k++) v.v[k] = __float2bfloat16(S[r * LDF + half * 32 + j + k] * scale);
        dt_st8(dst + j, v);
    }
}

/* fast: dqkv's Q part = bf16(dq). */
__global__ void flash_dq_store_kernel(bf16 *dqkv, const float *dq, int B, int T, int C) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)B * T * C) return;
    size_t bt = i / C, c = i % C;
    dqkv[bt * 3 * C + c] = __float2bfloat16(dq[i]);
}

static int attrs_set;
static void set_attrs(void) {
    if (attrs_set) return;
    cudaFuncSetAttribute(flash_fwd_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, FWD_SMEM);
    cudaFuncSetAttribute(flash_bwd_kv_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, BWDA_SMEM);
    cudaFuncSetAttribute(flash_bwd_q_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, BWDQ_SMEM);
    attrs_set = 1;
}

void dt_cu_flash_fwd(bf16 *out, float *lse, const bf16 *qkv, int B, int T, int C, int NH, cudaStream_t s) {
    set_attrs();
    dim3 g((unsigned)(T / FB), (unsigned)(B * NH));
    flash_fwd_kernel<<<g, 128, FWD_SMEM, s>>>(out, lse, qkv, T, NH, 1.0f / sqrtf((float)FD));
    (void)C;
}

void dt_cu_flash_bwd(bf16 *dqkv, float *dq, float *D, const bf16 *dout, const bf16 *qkv, const bf16 *out,
                     const float *lse, int B, int T, int C, int NH, cudaStream_t s) {
    set_attrs();
    float scale = 1.0f / sqrtf((float)FD);
    int det = dt_op_variant(DT_OP_ATTENTION_BWD) == DT_VARIANT_DET;
    flash_dot_kernel<<<dt_cu_div((size_t)B * NH * T, 8), 256, 0, s>>>(D, dout, out, B, T, NH);
    dim3 g((unsigned)(T / FB), (unsigned)(B * NH));
    if (!det) cudaMemsetAsync(dq, 0, sizeof(float) * (size_t)B * T * C, s);
    flash_bwd_kv_kernel<<<g, 128, BWDA_SMEM, s>>>(dqkv, det ? NULL : dq, qkv, dout, lse, D, T, NH, scale);
    if (det)
        flash_bwd_q_kernel<<<g, 128, BWDQ_SMEM, s>>>(dqkv, qkv, dout, lse, D, T, NH, scale);
    else
        flash_dq_store_kernel<<<dt_cu_div((size_t)B * T * C, 256), 256, 0, s>>>(dqkv, dq, B, T, C);
}
