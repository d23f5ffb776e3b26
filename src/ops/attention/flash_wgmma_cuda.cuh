/* The warpgroup-MMA (wgmma, sm_90a) attention kernels' own pieces (attention_wgmma_cuda.cu:
 * the forward; attention_wgmma_bwd_cuda.cu and attention_wgmma_bwd_q128_cuda.cu: the
 * backward): the tile constants, the copy of a 64 x 64 bf16 tile into the 128-byte swizzle
 * (wgmma_desc.h), the backward's elementwise steps on one 64-query half of an accumulator
 * (P^T, dS^T), which both kernel A sources call so that their elementwise operations are the
 * same code, and kernel A's operand descriptors. The PTX wrappers are ops/cuda/wgmma_cuda.cuh;
 * the elementwise math shared with the mma.sync kernels is flash_cuda.cuh. Include only from
 * sources built for sm_90a (Makefile: WGMMA_OBJ). */
#ifndef DT_OPS_FLASH_WGMMA_CUDA_CUH
#define DT_OPS_FLASH_WGMMA_CUDA_CUH

#include "ops/attention/flash_cuda.cuh"
#include "ops/cuda/wgmma_cuda.cuh"

#include <stdint.h>

#define WD 64      /* head size */
#define WB 64      /* rows of a query or key tile */
#define WTILE 8192 /* bytes of one 64 x 64 bf16 tile */
#define LOG2E 1.4426950408889634f
#define LN2 0.6931471805599453f

/* cp.async of a 64-row tile (source rows ld elements apart) by NTH threads into the
 * swizzled layout at dst (1024-byte aligned). */
template <int NTH>
static __device__ __forceinline__ void wg_cp_tile(unsigned char *dst, const bf16 *src, size_t ld) {
#pragma unroll
    for (int u = 0; u < WB * 8 / NTH; u++) {
        int i = (int)threadIdx.x + u * NTH, r = i >> 3, c = i & 7;
        cp_async16(dst + dt_wgmma_sw128((uint32_t)r, (uint32_t)c), src + (size_t)r * ld + c * 8);
    }
}

/* wg_cp_tile by NTH threads numbered ti = 0..NTH - 1 (not threadIdx.x: a producer warpgroup
 * that is not the block's first). */
template <int NTH>
static __device__ __forceinline__ void wg_cp_tile_by(unsigned char *dst, const bf16 *src, size_t ld, int ti) {
#pragma unroll
    for (int u = 0; u < WB * 8 / NTH; u++) {
        int i = ti + u * NTH, r = i >> 3, c = i & 7;
        cp_async16(dst + dt_wgmma_sw128((uint32_t)r, (uint32_t)c), src + (size_t)r * ld + c * 8);
    }
}

/* ---- the flash backward's elementwise steps on one 64-query half (kernel A) ----
 * s, dp: 32 accumulators of one 64-query half of S^T, dP^T (a warpgroup's 64 keys x 64
 * queries: all of an m64n64 accumulator, or d[0..31] / d[32..63] of an m64n128 one);
 * LDc: those queries' {lse2, D} pairs ({lse2(2j), lse2(2j + 1), D(2j), D(2j + 1)}, 128
 * floats); row = 16 warp + g (the thread's first key row), t = lane & 3. The elements are
 * flash_cuda.cuh's flash_bwd_p and flash_bwd_ds, which the mma.sync kernel A
 * (attention_flash_cuda.cu, kv_tile) calls too: that is what makes every wgmma
 * configuration give its bits. The A-fragment packing of a half is flash_pack. */

/* P^T = exp2(S^T sl2 - lse2) in place: one fused multiply-add, ex2.approx.ftz; when DIAG
 * (the half is the key block's own query block) keys above the query (key row > query
 * column) are 0. */
template <bool DIAG>
static __device__ __forceinline__ void wg_bwd_p(float s[32], const float *LDc, float sl2, int row, int t) {
#pragma unroll
    for (int n = 0; n < 8; n++) {
        const float2 l2 = *reinterpret_cast<const float2 *>(LDc + (n * 4 + t) * 4); /* queries 8n + 2t, + 1 */
#pragma unroll
        for (int i = 0; i < 4; i++) {
            float v = flash_bwd_p(s[4 * n + i], sl2, (i & 1) ? l2.y : l2.x);
            if (DIAG && n * 8 + 2 * t + (i & 1) < row + 8 * (i >> 1)) v = 0.0f;
            s[4 * n + i] = v;
        }
    }
}
/* dS^T = P^T (dP^T - D) in place in dp (p: P^T from wg_bwd_p). */
static __device__ __forceinline__ void wg_bwd_ds(float dp[32], const float p[32], const float *LDc, int t) {
#pragma unroll
    for (int n = 0; n < 8; n++) {
        const float2 dd = *reinterpret_cast<const float2 *>(LDc + (n * 4 + t) * 4 + 2);
#pragma unroll
        for (int i = 0; i < 4; i++)
            dp[4 * n + i] = flash_bwd_ds(p[4 * n + i], dp[4 * n + i], (i & 1) ? dd.y : dd.x);
    }
}

/* The shared-memory operand descriptors of a kernel-A tile (both kernels A): K-major K, V
 * (the A operands of S^T, dP^T) and Q, dO (their B operands), SBO 1024 (8 rows of 128
 * bytes), +2 encoded (32 bytes) a 16-channel step; MN-major Q, dO (the B operands of dK,
 * dV), SBO 1024 (8 query rows), LBO a tile, +128 encoded (16 rows) a k-step. */
struct wg_bwd_descs {
    uint64_t Ka, Va, Qk, Ok, Qm, Om;
};
static __device__ __forceinline__ wg_bwd_descs wg_bwd_desc(uint32_t sK, uint32_t sV, uint32_t sQ, uint32_t sdO) {
    wg_bwd_descs d;
    d.Ka = dt_wgmma_desc(sK, 16, 1024, DT_WGMMA_SWIZZLE_128B);
    d.Va = dt_wgmma_desc(sV, 16, 1024, DT_WGMMA_SWIZZLE_128B);
    d.Qk = dt_wgmma_desc(sQ, 16, 1024, DT_WGMMA_SWIZZLE_128B);
    d.Ok = dt_wgmma_desc(sdO, 16, 1024, DT_WGMMA_SWIZZLE_128B);
    d.Qm = dt_wgmma_desc(sQ, WTILE, 1024, DT_WGMMA_SWIZZLE_128B);
    d.Om = dt_wgmma_desc(sdO, WTILE, 1024, DT_WGMMA_SWIZZLE_128B);
    return d;
}

#endif
