/* PTX wrappers shared by every warpgroup-MMA kernel (sm_90a: the attention kernels through
 * wgmma_cuda.cuh, the GEMM of gemm_wgmma_cuda.cu): the proxy fence between generic and async
 * (TMA, wgmma) shared-memory accesses, the wgmma group fence, commit and waits, and an
 * mbarrier's initialisation and its fence. Include only from sources built for sm_90a
 * (Makefile: WGMMA_OBJ). */
#ifndef DT_OPS_WGMMA_SYNC_CUH
#define DT_OPS_WGMMA_SYNC_CUH

#include <stdint.h>

/* Orders this thread's generic-proxy shared-memory accesses (cp.async writes, stores) with
 * later async-proxy accesses (wgmma operand reads, TMA stores), and the reverse. */
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

/* bar: the shared address of an 8-byte aligned mbarrier; a phase completes after count
 * arrivals. Initialised by one thread, then fenced (mbar_init_fence) and published by a
 * block barrier. */
static __device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
static __device__ __forceinline__ void mbar_init_fence(void) {
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

#endif
