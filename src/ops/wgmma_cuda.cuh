/* Device pieces shared by the warpgroup-MMA (wgmma, sm_90a) attention kernels
 * (attention_wgmma_cuda.cu: the forward; attention_wgmma_bwd_cuda.cu: the backward): PTX
 * wrappers for cp.async, the proxy fence, wgmma m64n64k16 with both operands in shared
 * memory or A from registers, and the copy of a 64 x 64 bf16 tile into the 128-byte swizzle
 * (wgmma_desc.h). Include only from sources built for sm_90a (Makefile: WGMMA_OBJ).
 *
 * Accumulator layout (m64nNk16, f32): warp w of the warpgroup holds rows 16w..16w+15; lane
 * 4g + t holds d[4n + i] at row 16w + g + 8 (i >> 1), column 8n + 2t + (i & 1): per warp,
 * the mma.sync m16n8 accumulator layout over 8 column groups, which is why the mma.sync
 * kernels' elementwise code (attention_flash_cuda.cu) runs unchanged on it.
 * Register A operand (m64n64k16): a[0..3] of warp w, lane 4g + t: rows 16w + g (a[0], a[2])
 * and 16w + g + 8 (a[1], a[3]), k = 2t, 2t + 1 (a[0], a[1]) and 8 + 2t, + 1 (a[2], a[3]): the
 * mma.sync m16n8k16 A fragment, so an accumulator repacks into it without shuffles. */
#ifndef DT_OPS_WGMMA_CUDA_CUH
#define DT_OPS_WGMMA_CUDA_CUH

#include "ops/cuda_common.cuh"
#include "ops/wgmma_desc.h"

#include <stdint.h>

#define WD 64      /* head size */
#define WB 64      /* rows of a query or key tile */
#define WTILE 8192 /* bytes of one 64 x 64 bf16 tile */
#define LOG2E 1.4426950408889634f
#define LN2 0.6931471805599453f

/* Orders this thread's generic-proxy shared-memory accesses (cp.async writes, stores) with
 * later async-proxy accesses (wgmma operand reads), and the reverse. */
static __device__ __forceinline__ void fence_proxy_async(void) {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
static __device__ __forceinline__ void wg_fence(void) { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
static __device__ __forceinline__ void wg_commit(void) {
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
static __device__ __forceinline__ void wg_wait0(void) {
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
}
/* Waits for every committed wgmma group but the latest one. */
static __device__ __forceinline__ void wg_wait1(void) {
    asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
}
/* Keeps the compiler from moving reads or writes of d across this point (the wgmma
 * results are written asynchronously: their readers must stay after the wait). */
static __device__ __forceinline__ void reg_fence(float d[32]) {
#pragma unroll
    for (int i = 0; i < 32; i++) asm volatile("" : "+f"(d[i])::"memory");
}
/* The same for register A operands: an in-flight wgmma still reads them, so they count as
 * used (not free for other values) up to this point, which must follow the wait. */
static __device__ __forceinline__ void reg_fence_a(uint32_t a[4][4]) {
#pragma unroll
    for (int k = 0; k < 4; k++)
#pragma unroll
        for (int i = 0; i < 4; i++) asm volatile("" : "+r"(a[k][i])::"memory");
}
/* 2^x on the MUFU unit, subnormal results flushed to zero. */
static __device__ __forceinline__ float ex2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}
static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&v);
}

#define WG_D32                                                                                                 \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                                  \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define WG_REGS(k)                                                                                             \
    k(d[0]), k(d[1]), k(d[2]), k(d[3]), k(d[4]), k(d[5]), k(d[6]), k(d[7]), k(d[8]), k(d[9]), k(d[10]),       \
        k(d[11]), k(d[12]), k(d[13]), k(d[14]), k(d[15]), k(d[16]), k(d[17]), k(d[18]), k(d[19]), k(d[20]),   \
        k(d[21]), k(d[22]), k(d[23]), k(d[24]), k(d[25]), k(d[26]), k(d[27]), k(d[28]), k(d[29]), k(d[30]),   \
        k(d[31])

/* d (64 x 64 fp32, the warpgroup's accumulator: 32 per thread) = A B (+ d when accumulate
 * is 1) for A (64 x 16) and B (16 x 64) in shared memory, both K-major (descriptors da, db).
 * scale-d is a predicate operand: set from a register. */
static __device__ __forceinline__ void wgmma_ss(float d[32], uint64_t da, uint64_t db, int accumulate) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " WG_D32 ", %32, %33, p, 1, 1, 0, 0;\n}\n"
                 : WG_REGS("+f")
                 : "l"(da), "l"(db), "r"(accumulate));
}
/* d += A B with A (64 x 16 bf16) from registers (a: the m16n8k16 A fragment of the
 * thread's warp rows) and B (16 x 64) in shared memory, MN-major (imm-trans-b = 1). */
static __device__ __forceinline__ void wgmma_rs_t(float d[32], const uint32_t a[4], uint64_t db) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " WG_D32
                 ", {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
                 : WG_REGS("+f")
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
}

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

#endif
