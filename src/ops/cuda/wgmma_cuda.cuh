/* PTX wrappers of warpgroup MMA (wgmma, sm_90a) for kernels with 64-row accumulators (the
 * attention kernels, through attention/flash_wgmma_cuda.cuh): the register fences around
 * asynchronous results and operands, wgmma m64n64k16 with both operands in shared memory or
 * A from registers, wgmma m64n128k16 from shared memory, setmaxnreg, named barriers and the
 * 1024-byte aligned dynamic shared memory the 128-byte swizzle needs (wgmma's fence, commit
 * and waits and the mbarriers: wgmma_sync.cuh, shared with the GEMM of gemm_wgmma_cuda.cu;
 * the descriptors: wgmma_desc.h). Orders and data movement only: each product reduces over
 * its k-steps inside the tensor core. Include only from sources built for sm_90a (Makefile:
 * WGMMA_OBJ).
 *
 * Accumulator layout (m64nNk16, f32; N = 64: 32 registers, N = 128: 64): warp w of the
 * warpgroup holds rows 16w..16w+15; lane 4g + t holds d[4n + i] at row 16w + g + 8 (i >> 1),
 * column 8n + 2t + (i & 1): so columns 64..127 of an N = 128 accumulator are d[32..63] in
 * the layout of an N = 64 one, and per warp,
 * the mma.sync m16n8 accumulator layout over 8 column groups, which is why the mma.sync
 * kernels' elementwise code (attention_flash_cuda.cu) runs unchanged on it.
 * Register A operand (m64n64k16): a[0..3] of warp w, lane 4g + t: rows 16w + g (a[0], a[2])
 * and 16w + g + 8 (a[1], a[3]), k = 2t, 2t + 1 (a[0], a[1]) and 8 + 2t, + 1 (a[2], a[3]): the
 * mma.sync m16n8k16 A fragment, so an accumulator repacks into it without shuffles. */
#ifndef DT_OPS_WGMMA_CUDA_CUH
#define DT_OPS_WGMMA_CUDA_CUH

#include "ops/cuda/cuda_common.cuh"
#include "ops/cuda/wgmma_desc.h"
#include "ops/cuda/wgmma_sync.cuh"

#include <stdint.h>

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

#define WG_D64                                                                                                 \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                                  \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "                         \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "                         \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define WG_REGS64(k)                                                                                           \
    k(d[0]), k(d[1]), k(d[2]), k(d[3]), k(d[4]), k(d[5]), k(d[6]), k(d[7]), k(d[8]), k(d[9]), k(d[10]),        \
        k(d[11]), k(d[12]), k(d[13]), k(d[14]), k(d[15]), k(d[16]), k(d[17]), k(d[18]), k(d[19]), k(d[20]),    \
        k(d[21]), k(d[22]), k(d[23]), k(d[24]), k(d[25]), k(d[26]), k(d[27]), k(d[28]), k(d[29]), k(d[30]),    \
        k(d[31]), k(d[32]), k(d[33]), k(d[34]), k(d[35]), k(d[36]), k(d[37]), k(d[38]), k(d[39]), k(d[40]),    \
        k(d[41]), k(d[42]), k(d[43]), k(d[44]), k(d[45]), k(d[46]), k(d[47]), k(d[48]), k(d[49]), k(d[50]),    \
        k(d[51]), k(d[52]), k(d[53]), k(d[54]), k(d[55]), k(d[56]), k(d[57]), k(d[58]), k(d[59]), k(d[60]),    \
        k(d[61]), k(d[62]), k(d[63])

/* d (64 x 128 fp32: 64 per thread) = A B + d for A (64 x 16) and B (16 x 128) in shared
 * memory, both K-major (a B of 128 rows: 16 groups of 8 rows, SBO apart). */
static __device__ __forceinline__ void wgmma_ss_n128(float d[64], uint64_t da, uint64_t db) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " WG_D64 ", %64, %65, p, 1, 1, 0, 0;\n}\n"
                 : WG_REGS64("+f")
                 : "l"(da), "l"(db), "r"(1));
}
/* d = A B (scale-d 0): the first k-step of a chain. d is an output only, so what it held
 * before is dead to the compiler and its registers are free until here (with "+f" the
 * previous tile's values would stay live across the products in flight before it). */
static __device__ __forceinline__ void wgmma_ss_n128_first(float d[64], uint64_t da, uint64_t db) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " WG_D64 ", %64, %65, p, 1, 1, 0, 0;\n}\n"
                 : WG_REGS64("=f")
                 : "l"(da), "l"(db), "r"(0));
}

/* ---- mbarriers and register reallocation (the producer/consumer kernel A) ---- */

/* (mbar_init, mbar_init_fence, mbar_arrive, mbar_wait: mbarrier.cuh, through wgmma_sync.cuh) */
/* The registers a thread of this warpgroup may use from here on (a multiple of 8, 24..256;
 * the kernel must be launched with a register count from __launch_bounds__): dec gives
 * registers back to the block's pool, inc waits until the pool has them. */
template <int R> static __device__ __forceinline__ void setmaxnreg_dec(void) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R));
}
template <int R> static __device__ __forceinline__ void setmaxnreg_inc(void) {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R));
}
/* A barrier of the nth threads (a multiple of 32) that execute it with this ID (1..15; 0 is
 * __syncthreads'; a compile-time ID, so that ptxas reserves that one barrier alone). */
template <int ID> static __device__ __forceinline__ void named_barrier(int nth) {
    asm volatile("bar.sync %0, %1;\n" ::"n"(ID), "r"(nth) : "memory");
}

/* The dynamic shared memory from its first 1024-byte boundary (the 128-byte swizzle's atom,
 * wgmma_desc.h; the launches ask for 1024 bytes of slack): the generic pointer, and its
 * shared-space address in *sb. (The forward computes it itself: it also uses the slack
 * before the boundary.) */
static __device__ __forceinline__ unsigned char *wg_smem_aligned(uint32_t *sb) {
    extern __shared__ __align__(1024) unsigned char wsm_raw[];
    const uint32_t raw = smem_u32(wsm_raw), pad = (1024u - (raw & 1023u)) & 1023u;
    *sb = raw + pad;
    return wsm_raw + pad;
}

#endif
