/* Shared pieces of the CUDA ops: the bf16 type, error checks, 16-byte vector access and
 * the fixed-order block reductions every deterministic kernel uses.
 *
 * Why the block reductions are deterministic: a warp reduces with a butterfly of
 * __shfl_xor_sync in a fixed lane pattern, and the warps' results are then added by warp 0
 * in warp order. The order of every addition is a function of the thread index only. */
#ifndef DT_OPS_CUDA_COMMON_CUH
#define DT_OPS_CUDA_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The project's headers are C: C linkage for everything they declare. */
extern "C" {
#include "detrain/detrain.h"
#include "core/philox.h"
#include "ops/dropout/dropout.h"
#include "ops/cuda/launch_log.h"
}

/* The grid argument of every launch in src/ops goes through this: it notes the launch in
 * the launch log (launch_log.h; kernel-level tracing) and returns the grid unchanged. */
static inline dim3 dt_cu_noted(dim3 grid, dim3 block, size_t smem, const char *kernel) {
    dt_cu_launch_note(kernel, grid.x, grid.y, grid.z, block.x, block.y, block.z, smem);
    return grid;
}

typedef __nv_bfloat16 bf16;

/* Returns DT_OK, or records "what: CUDA error name (message)" and returns DT_EUNSUPPORTED. */
static inline dt_status dt_cu_check(cudaError_t e, const char *what) {
    if (e == cudaSuccess) return DT_OK;
    return dt_fail(DT_EUNSUPPORTED, "%s: CUDA error %s (%s)", what, cudaGetErrorName(e),
                   cudaGetErrorString(e));
}
#define DT_CU_TRY(call)                                                  \
    do {                                                                 \
        dt_status dt_st_ = dt_cu_check((call), #call);                   \
        if (dt_st_ != DT_OK) return dt_st_;                              \
    } while (0)

/* The current device's compute capability as major * 10 + minor (90: the H100/H200, where
 * the sm_90a kernels run), or -1 when it cannot be read (no usable GPU). */
static inline int dt_cu_device_cc(void) {
    int dev = 0, major = 0, minor = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess)
        return -1;
    return major * 10 + minor;
}

/* Shared-memory address of p; asynchronous 16-byte copies global -> shared (cp.async.cg:
 * through L2 only), their groups and the waits for all but the newest / all groups. */
static __device__ __forceinline__ uint32_t smem_u32(const void *p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}
static __device__ __forceinline__ void cp_async16(void *dst, const void *src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_u32(dst)), "l"(src));
}
static __device__ __forceinline__ void cp_commit(void) { asm volatile("cp.async.commit_group;\n" ::); }
static __device__ __forceinline__ void cp_wait1(void) { asm volatile("cp.async.wait_group 1;\n" ::: "memory"); }
static __device__ __forceinline__ void cp_wait0(void) { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

/* Eight bf16 in one 16-byte word. */
struct __align__(16) dt_bf16x8 { bf16 v[8]; };

static __device__ __forceinline__ dt_bf16x8 dt_ld8(const bf16 *p) {
    return *reinterpret_cast<const dt_bf16x8 *>(p);
}
static __device__ __forceinline__ void dt_st8(bf16 *p, const dt_bf16x8 &x) {
    *reinterpret_cast<dt_bf16x8 *>(p) = x;
}

template <typename T> static __device__ __forceinline__ T dt_warp_sum(T v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
static __device__ __forceinline__ float dt_warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Sum over the block in a fixed order; every thread gets the result. blockDim.x must be a
 * multiple of 32 and at most 1024. `scratch` holds 32 T. */
template <typename T> static __device__ T dt_block_sum(T v, T *scratch) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = dt_warp_sum(v);
    __syncthreads(); /* scratch may still be read by a previous call */
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    if (warp == 0) {
        T s = lane < nw ? scratch[lane] : (T)0;
        s = dt_warp_sum(s);
        if (lane == 0) scratch[0] = s;
    }
    __syncthreads();
    return scratch[0];
}

/* The dropout factor of element i, bit-identical to dt_dropout_factor on the CPU (same
 * Philox word, IEEE division). */
static __device__ __forceinline__ float dt_cu_drop_factor(const dt_dropout &d, uint32_t purpose,
                                                          uint32_t layer, uint64_t i) {
    return dt_rng_uniform(d.seed, purpose, d.step, layer, i) >= d.p ? 1.0f / (1.0f - d.p) : 0.0f;
}
/* A by-value copy of a dropout config for kernels (p = 0 when NULL or off). */
static inline dt_dropout dt_cu_drop_arg(const dt_dropout *d) {
    dt_dropout z = {0.0f, 0, 0};
    return dt_dropout_on(d) ? *d : z;
}

static inline unsigned dt_cu_div(size_t a, size_t b) { return (unsigned)((a + b - 1) / b); }

#endif
