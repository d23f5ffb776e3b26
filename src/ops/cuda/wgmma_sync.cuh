/* PTX wrappers shared by every warpgroup-MMA kernel (sm_90a: the attention kernels through
 * wgmma_cuda.cuh, the GEMM of gemm_wgmma_cuda.cu): the wgmma group fence, commit and waits,
 * and (mbarrier.cuh) the proxy fence and the mbarrier operations. Include only from sources
 * built for sm_90a (Makefile: WGMMA_OBJ). */
#ifndef DT_OPS_WGMMA_SYNC_CUH
#define DT_OPS_WGMMA_SYNC_CUH

#include "ops/cuda/mbarrier.cuh"

#include <stdint.h>

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

#endif
