/* Index arithmetic of the flash-attention backward kernels (attention_flash_cuda.cu: the
 * mma.sync kernels; attention_wgmma_bwd_cuda.cu: the warpgroup-MMA kernel A), as plain
 * integer functions that the device code and a CPU test (tests/ops/test_flash_layout.c)
 * share, so the orders and the layouts are checked in CI, where there is no GPU.
 *
 * Shapes: nqb = T / 64 blocks of 64 rows per head, BH = B NH heads. */
#ifndef DT_OPS_FLASH_LAYOUT_H
#define DT_OPS_FLASH_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define DT_FLASH_FN static __host__ __device__ __forceinline__
#else
#define DT_FLASH_FN static inline
#endif

/* Heads per group of the backward grids: 16, or the largest power of two below it that
 * divides BH (1 when BH is odd). */
DT_FLASH_FN int dt_flash_bwd_group(int BH) {
    int grp = 1;
    while (grp < 16 && BH % (2 * grp) == 0) grp *= 2;
    return grp;
}

/* The order in which the blocks of a backward grid (nblk blocks per head, BH heads, BH %
 * grp == 0) start: block i takes the heads in groups of grp; inside a group, rank 0 (the
 * blocks with the most work first) of every head of the group, then rank 1, ... The heads
 * of a group share their tiles through L2 while the ranks balance the tail. A bijection of
 * 0 .. BH nblk - 1 onto (head, rank) pairs. */
DT_FLASH_FN void dt_flash_bwd_order(int i, int grp, int nblk, int *bh, int *rank) {
    int gs = grp * nblk, r = i % gs;
    *bh = i / gs * grp + r % grp;
    *rank = r / grp;
}

/* Tiles of a head's dS scratch: one per (query block qb, key block kb <= qb), in
 * lower-triangular order (row qb starts at qb (qb + 1) / 2). */
DT_FLASH_FN size_t dt_flash_ds_tiles(int nqb) { return (size_t)nqb * (size_t)(nqb + 1) / 2; }
DT_FLASH_FN size_t dt_flash_ds_tile(int qb, int kb) { return (size_t)qb * (size_t)(qb + 1) / 2 + (size_t)kb; }

/* Shared memory of the warpgroup-MMA kernel A with M consumer warpgroups (64 keys each) and
 * nst ring stages, byte offsets from the 1024-byte aligned base (the 128-byte swizzle atom):
 * K tiles (M), V tiles (M), then nst stages of a Q tile and a dO tile (8 KB each), then per
 * stage the 64 queries' {lse log2(e), D} pairs (512 bytes). The total includes 1024 bytes of
 * slack for aligning the base. */
#define DT_WGBWD_TILE 8192u
DT_FLASH_FN uint32_t dt_wgbwd_k_off(int M, int j) { (void)M; return (uint32_t)j * DT_WGBWD_TILE; }
DT_FLASH_FN uint32_t dt_wgbwd_v_off(int M, int j) { return (uint32_t)(M + j) * DT_WGBWD_TILE; }
DT_FLASH_FN uint32_t dt_wgbwd_q_off(int M, int st) { return (uint32_t)(2 * M + 2 * st) * DT_WGBWD_TILE; }
DT_FLASH_FN uint32_t dt_wgbwd_do_off(int M, int st) { return (uint32_t)(2 * M + 2 * st + 1) * DT_WGBWD_TILE; }
DT_FLASH_FN uint32_t dt_wgbwd_ld_off(int M, int nst, int st) {
    return (uint32_t)(2 * M + 2 * nst) * DT_WGBWD_TILE + (uint32_t)st * 512u;
}
DT_FLASH_FN uint32_t dt_wgbwd_smem(int M, int nst) { return dt_wgbwd_ld_off(M, nst, nst) + 1024u; }

/* Shared memory of the wgmma dQ pass with M query blocks a block: DT_WGDQ_STAGES stages of
 * a K tile (swizzled) and M dS tiles (the scratch bytes as they are), from the 1024-byte
 * aligned base; the total includes 1024 bytes of slack for aligning the base. */
#define DT_WGDQ_STAGES 4
DT_FLASH_FN uint32_t dt_wgdq_k_off(int M, int st) { return (uint32_t)(st * (1 + M)) * DT_WGBWD_TILE; }
DT_FLASH_FN uint32_t dt_wgdq_ds_off(int M, int st, int j) {
    return dt_wgdq_k_off(M, st) + (uint32_t)(1 + j) * DT_WGBWD_TILE;
}
DT_FLASH_FN uint32_t dt_wgdq_smem(int M) { return dt_wgdq_k_off(M, DT_WGDQ_STAGES) + 1024u; }

#endif
