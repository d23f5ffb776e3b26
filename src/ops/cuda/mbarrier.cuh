/* PTX wrappers for mbarriers on sm_90: the proxy fence between generic and async
 * shared-memory accesses, an mbarrier's initialisation, arrivals (with or without expected
 * TMA transfer bytes) and parity wait. One copy for every kernel that uses them: the
 * warpgroup-MMA kernels include it through wgmma_sync.cuh (the GEMM's TMA ring, the
 * attention backward's kernel A). */
#ifndef DT_OPS_MBARRIER_CUH
#define DT_OPS_MBARRIER_CUH

#include <stdint.h>

/* Orders this thread's generic-proxy shared-memory accesses (cp.async writes, stores) with
 * later async-proxy accesses (wgmma operand reads, TMA stores), and the reverse. */
static __device__ __forceinline__ void fence_proxy_async(void) {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
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
/* One arrival that also expects `bytes` of TMA transfers on the barrier's phase. */
static __device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
/* One arrival (release: this thread's earlier memory accesses happen before the phase
 * completes for a waiter). */
static __device__ __forceinline__ void mbar_arrive(uint32_t bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
/* Waits (acquire) until the barrier's phase of parity `parity` has completed (a fresh
 * barrier counts its phase before the first, parity 1, as completed). */
static __device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
    asm volatile("{\n.reg .pred p;\nWAIT:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
                 "@!p bra WAIT;\n}\n" ::"r"(bar),
                 "r"(parity)
                 : "memory");
}

#endif
