/* Shared-memory matrix descriptors of Hopper's warpgroup MMA (wgmma.mma_async, sm_90a) and
 * the 128-byte swizzle they read, as plain integer functions: the device code
 * (attention_wgmma_cuda.cu) and a CPU test (tests/ops/test_wgmma_desc.c) call the same
 * code, so the bit patterns are checked in CI, where there is no GPU.
 *
 * The 64-bit descriptor (PTX ISA, "Matrix Descriptor Format" of the asynchronous
 * warpgroup-level matrix instructions):
 *   bits  0..13  matrix start address in shared memory, (address & 0x3FFFF) >> 4
 *   bits 16..29  leading dimension byte offset (LBO) >> 4
 *   bits 32..45  stride dimension byte offset (SBO) >> 4
 *   bits 49..51  matrix base offset (0 when every swizzle atom starts 1024-byte aligned)
 *   bits 62..63  swizzle mode: 0 none, 1 128-byte, 2 64-byte, 3 32-byte
 *   other bits   0
 * What LBO and SBO mean depends on the major-ness (PTX ISA, canonical layouts, in units of
 * T = 128 bits = 8 bf16, written as (shape) : (stride) pairs):
 *   K-major, 128B swizzle:  ((8,m),(T,2k)) : ((8T,SBO),(1,T))
 *     rows of 128 bytes (64 bf16 along K); SBO = the step from 8 rows (M or N) to the next
 *     8; LBO is not used (the ISA says "assumed 1": we encode 1).
 *   MN-major, 128B swizzle: ((T,8,m),(8,k)) : ((1,T,LBO),(8T,SBO))
 *     rows of 128 bytes (64 bf16 along M or N) one K index apart; SBO = the step from 8 K
 *     rows to the next 8; LBO = the step from 64 M/N elements to the next 64 (not used
 *     when the operand is 64 wide, as in m64n64: encoded anyway).
 * The 128B swizzle moves the 16-byte chunk of byte address a: bits
 * 4..6 are xor-ed with bits 7..9, so in a 1024-byte aligned atom of 8 rows x 128 bytes,
 * chunk c of row r sits at r * 128 + ((c ^ (r % 8)) * 16). The hardware applies it to the
 * address it computes, which is why a K step inside the 128-byte row is a plain +32 bytes
 * on the start address (16 bf16) and why every atom must be 1024-byte aligned. */
#ifndef DT_OPS_WGMMA_DESC_H
#define DT_OPS_WGMMA_DESC_H

#include <stdint.h>

#if defined(__CUDACC__)
#define DT_WGMMA_FN static __host__ __device__ __forceinline__
#else
#define DT_WGMMA_FN static inline
#endif

enum {
    DT_WGMMA_SWIZZLE_NONE = 0,
    DT_WGMMA_SWIZZLE_128B = 1,
    DT_WGMMA_SWIZZLE_64B = 2,
    DT_WGMMA_SWIZZLE_32B = 3
};

/* The descriptor of an operand at shared address `addr` (bytes, 16-byte aligned) with
 * leading and stride byte offsets lbo, sbo (multiples of 16, below 2^18) and swizzle mode
 * swz (DT_WGMMA_SWIZZLE_*). Base offset 0. Bits outside each field are dropped. */
DT_WGMMA_FN uint64_t dt_wgmma_desc(uint32_t addr, uint32_t lbo, uint32_t sbo, uint32_t swz) {
    return (uint64_t)((addr & 0x3FFFFu) >> 4) | ((uint64_t)((lbo >> 4) & 0x3FFFu) << 16) |
           ((uint64_t)((sbo >> 4) & 0x3FFFu) << 32) | ((uint64_t)(swz & 3u) << 62);
}

/* Byte offset, from a 1024-byte aligned tile of 128-byte rows in the 128B swizzle, of the
 * 16-byte chunk c (0..7) of row r. */
DT_WGMMA_FN uint32_t dt_wgmma_sw128(uint32_t r, uint32_t c) {
    return r * 128u + ((c ^ (r & 7u)) << 4);
}

#endif
