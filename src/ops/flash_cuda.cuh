/* Pieces shared by the flash-attention backward kernels: the mma.sync ones
 * (attention_flash_cuda.cu) and the warpgroup-MMA kernels A (attention_wgmma_bwd_cuda.cu,
 * attention_wgmma_bwd_q128_cuda.cu), which write the same dS scratch for the same dQ pass
 * and the same rows and bias partials (flash_store_kv); the programmatic dependent launch
 * of the wgmma backward's kernels (pdl_trigger, pdl_wait, dt_cu_launch_pdl).
 *
 * Accumulator of a 16x8 product, lane = 4g + t: c[0], c[1] at row g, columns 2t, 2t+1;
 * c[2], c[3] at row g + 8. A 16 x 64 warp tile is acc[8][4] (8 column groups of 8); a warp's
 * rows of a wgmma m64n64 accumulator d[32] are the same, d[4n + i] = acc[n][i]. */
#ifndef DT_OPS_FLASH_CUDA_CUH
#define DT_OPS_FLASH_CUDA_CUH

#include "ops/cuda_common.cuh"

extern "C" {
#include "ops/flash_layout.h"
}

/* Programmatic dependent launch (sm_90): a kernel launched with dt_cu_launch_pdl may start
 * while the kernel before it on the stream is still running, once every block of that one
 * has called pdl_trigger (or exited); it must call pdl_wait before it reads anything the
 * earlier kernel writes (the wait returns when that kernel has completed and its writes are
 * visible). Both are no-ops in a kernel launched the ordinary way. Only the schedule
 * changes: what every thread computes, and from which values, stays the same. */
static __device__ __forceinline__ void pdl_trigger(void) { asm volatile("griddepcontrol.launch_dependents;\n" ::); }
static __device__ __forceinline__ void pdl_wait(void) { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }

/* Launches kernel k (grid, block, smem bytes, stream s) with programmatic stream
 * serialization on (see pdl_trigger, pdl_wait); where the runtime refuses that launch, the
 * ordinary one (the same results, no overlap), counted in dt_cu_pdl_refused
 * (attention_flash_cuda.cu; test_gpu_wgmma_bwd prints it). */
int dt_cu_pdl_refused(void);
void dt_cu_pdl_refused_add(void);
template <typename... P, typename... A>
static inline void dt_cu_launch_pdl(void (*k)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t s,
                                    A &&...args) {
    cudaLaunchConfig_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = s;
    cfg.attrs = at;
    cfg.numAttrs = 1;
    if (cudaLaunchKernelEx(&cfg, k, args...) == cudaSuccess) return;
    (void)cudaGetLastError();
    dt_cu_pdl_refused_add();
    k<<<grid, block, smem, s>>>(static_cast<A &&>(args)...);
}

/* Writes acc * f (16 x 64 at rows row0.., columns col0..) as bf16 pairs to dst (row stride ld). */
static __device__ __forceinline__ void store_acc(bf16 *dst, size_t ld, const float acc[8][4], float f, int lane) {
    int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int n = 0; n < 8; n++)
#pragma unroll
        for (int h = 0; h < 2; h++)
            *reinterpret_cast<__nv_bfloat162 *>(dst + (size_t)(g + 8 * h) * ld + n * 8 + 2 * t) =
                __floats2bfloat162_rn(acc[n][2 * h] * f, acc[n][2 * h + 1] * f);
}

/* store_acc, and the column sums of the bf16 values it stored over the warp's 16 rows (the
 * values of the written tensor, read back exactly): cs[n][j] for column 8n + 2t + j. Why
 * the order is fixed: a lane adds its rows g and g + 8, then an xor butterfly over g (lanes
 * 4, 8, 16 apart) adds pairs, pairs of pairs, halves; both partners of a step add the same
 * two operands, so every lane of a t ends with the same bits:
 * ((v0 + v1) + (v2 + v3)) + ((v4 + v5) + (v6 + v7)), v_g = x[g] + x[g + 8]. */
static __device__ __forceinline__ void store_acc_colsum(bf16 *dst, size_t ld, const float acc[8][4], float f,
                                                        int lane, float cs[8][2]) {
    int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int n = 0; n < 8; n++) {
        __nv_bfloat162 lo = __floats2bfloat162_rn(acc[n][0] * f, acc[n][1] * f);
        __nv_bfloat162 hi = __floats2bfloat162_rn(acc[n][2] * f, acc[n][3] * f);
        *reinterpret_cast<__nv_bfloat162 *>(dst + (size_t)g * ld + n * 8 + 2 * t) = lo;
        *reinterpret_cast<__nv_bfloat162 *>(dst + (size_t)(g + 8) * ld + n * 8 + 2 * t) = hi;
        float2 a = __bfloat1622float2(lo), b = __bfloat1622float2(hi);
        cs[n][0] = __fadd_rn(a.x, b.x);
        cs[n][1] = __fadd_rn(a.y, b.y);
    }
#pragma unroll
    for (int m = 4; m < 32; m <<= 1)
#pragma unroll
        for (int n = 0; n < 8; n++)
#pragma unroll
            for (int j = 0; j < 2; j++) cs[n][j] = __fadd_rn(cs[n][j], __shfl_xor_sync(0xffffffffu, cs[n][j], m));
}

/* Lanes 0..3 (g = 0) put a warp's column sums (store_acc_colsum) at red[8n + 2t + j]. */
static __device__ __forceinline__ void put_colsum(float *red, const float cs[8][2], int lane) {
    if (lane >= 4) return;
#pragma unroll
    for (int n = 0; n < 8; n++) {
        red[n * 8 + 2 * lane] = cs[n][0];
        red[n * 8 + 2 * lane + 1] = cs[n][1];
    }
}

/* The end of every kernel A (mma.sync and wgmma): the dK (times scale) and dV rows of the
 * key block kb of head h, batch b, from this warp's 16 x 64 accumulators, into dqkv (B, T,
 * 3C) and, when part is not NULL, their column sums as bias partials: store_acc_colsum per
 * warp, then the 4 warps of the warpgroup added in warp order through red ([warp][128]: dK
 * columns, then dV's; 2 KB of shared memory the warpgroup's threads no longer read), one
 * thread a column. before_red: the barrier (with any fence it needs) after which red may be
 * written; after_red: the one after which it may be read. */
template <typename Bar1, typename Bar2>
static __device__ __forceinline__ void flash_store_kv(bf16 *dqkv, float *part, const float dk[8][4],
                                                      const float dv[8][4], float *red, int b, int T, int kb, int h,
                                                      int C, float scale, Bar1 before_red, Bar2 after_red) {
    const int tid = (int)threadIdx.x, warp = (tid >> 5) & 3, lane = tid & 31, C3 = 3 * C;
    bf16 *out = dqkv + ((size_t)b * T + kb * 64 + warp * 16) * C3 + h * 64; /* 64 rows, head size 64 */
    if (!part) {
        store_acc(out + C, C3, dk, scale, lane);
        store_acc(out + 2 * C, C3, dv, 1.0f, lane);
        return;
    }
    float ck[8][2], cv[8][2];
    store_acc_colsum(out + C, C3, dk, scale, lane, ck);
    store_acc_colsum(out + 2 * C, C3, dv, 1.0f, lane, cv);
    before_red();
    put_colsum(red + warp * 128, ck, lane);
    put_colsum(red + warp * 128 + 64, cv, lane);
    after_red();
    const int c = tid & 127; /* one thread per column of the warpgroup's dK, dV */
    float sum = __fadd_rn(__fadd_rn(__fadd_rn(red[c], red[128 + c]), red[256 + c]), red[384 + c]);
    part[((size_t)b * (T / 64) + kb) * C3 + (c < 64 ? C : 2 * C) + h * 64 + (c & 63)] = sum;
}

/* Transposes an 8 x 8 bf16 matrix held as one register per lane (lane 4g + t: row g,
 * columns 2t, 2t + 1). */
static __device__ __forceinline__ uint32_t movtrans(uint32_t x) {
    uint32_t y;
    asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(y) : "r"(x));
    return y;
}

/* The dS scratch tile of a warp: w holds dS^T for keys 16w.. x the tile's 64 queries as
 * packed pairs in A-fragment order (a[k]: queries 16k..16k+15, the register A operand
 * layout of wgmma_cuda.cuh and the mma.sync one); its transposed 8 x 8 blocks are the dQ
 * pass's A fragments for (query group m, key group w), stored at dst[m * 128] (dst: the
 * tile's uint4 slot of warp w and this lane, [m][w][lane] x 8 bf16). */
static __device__ __forceinline__ void store_ds_tile(uint4 *dst, const uint32_t a[4][4]) {
#pragma unroll
    for (int m = 0; m < 4; m++)
        dst[m * 128] = make_uint4(movtrans(a[m][0]), movtrans(a[m][2]), movtrans(a[m][1]), movtrans(a[m][3]));
}

/* An L2 policy for data read once (the dS tiles): evicted first, so that they do not push
 * out the K tiles that 16 query blocks share. */
static __device__ __forceinline__ uint64_t l2_evict_first(void) {
    uint64_t p;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(p));
    return p;
}
static __device__ __forceinline__ void cp_async16_hint(void *dst, const void *src, uint64_t pol) {
    asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;\n" ::"r"(
                     (uint32_t)__cvta_generic_to_shared(dst)),
                 "l"(src), "l"(pol));
}

/* ---- the host side shared with attention_wgmma_bwd_cuda.cu (attention_flash_cuda.cu) ---- */
/* The scratch of dt_cu_flash_bwd: LD (B NH T 2 floats, 256-byte aligned end), then the dS
 * tiles (bf16, B NH dt_flash_ds_tiles(T / 64) tiles of 64 x 64). */
/* (dt_cu_flash_scratch_ld, LD's place: ops_cuda.h) */
bf16 *dt_cu_flash_scratch_ds(void *scratch, int B, int T, int NH);
/* The D kernel: LD <- {lse log2(e), D = rowsum(dO * O)} per pair of rows (see the file).
 * pdl: launched with dt_cu_launch_pdl. */
void dt_cu_flash_bwd_prep(float *LD, const bf16 *dout, const bf16 *out, const float *lse, int B, int T, int NH,
                          int pdl, cudaStream_t s);
/* The dQ pass over a dS scratch written in the layout above; part: dt_cu_flash_bwd's bias
 * partials of the dQ columns (NULL: none). Grid order from dt_flash_bwd_order with group
 * dt_flash_bwd_group(B NH). */
void dt_cu_flash_bwd_dq(bf16 *dqkv, float *part, const bf16 *dS, const bf16 *qkv, int B, int T, int NH,
                        cudaStream_t s);
/* Kernel A on 128-query tiles (attention_wgmma_bwd_q128_cuda.cu, sm_90a: a configuration of
 * dt_cu_flash_bwd_wgmma): dK, dV rows of dqkv, the dS scratch and, when part is not NULL,
 * the K and V columns' bias partials, from LD (the D kernel's) and the inputs; the bits of
 * the 64-query kernel A. M = 2 (two consumer warpgroups, 128 keys a block; needs T % 128
 * == 0, else M = 1 runs) or 1. Grid order from dt_flash_bwd_order with group
 * dt_flash_bwd_group(B NH). pdl: launched with dt_cu_launch_pdl (it may start while the D
 * kernel before it runs; it waits for it before anything else), else the ordinary way. */
void dt_cu_flash_bwd_kv_wgmma_q128(bf16 *dqkv, bf16 *dS, float *part, const bf16 *qkv, const bf16 *dout,
                                   const float *LD, int B, int T, int NH, int M, int pdl, cudaStream_t s);

#endif
