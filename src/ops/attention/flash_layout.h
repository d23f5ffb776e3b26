/* Index arithmetic of the flash-attention backward kernels (attention_flash_cuda.cu: the
 * mma.sync kernels; attention_wgmma_bwd_cuda.cu and attention_wgmma_bwd_q128_cuda.cu: the
 * warpgroup-MMA kernels), as plain
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

/* LD (the backward's per-row statistics, B NH T / 2 float4): the float where row t of head
 * bh = b NH + h keeps lse log2(e); its D is 2 floats on. A pair of rows 2j, 2j + 1 shares a
 * float4 {lse of both, D of both}. Used by the D kernel and the GEMM's DOT epilogue
 * (gemm_wgmma_cuda.cu), which must fill the same places. */
/* LD's lse entries hold lse times this (a float product, the same constant for every writer) */
#define DT_FLASH_LD_LOG2E 1.4426950408889634f
DT_FLASH_FN size_t dt_flash_ld_at(int bh, int t, int T) {
    const size_t row = (size_t)bh * (size_t)T + (size_t)t;
    return (row - (size_t)(t & 1)) * 2 + (size_t)(t & 1);
}
/* The same place from the row's index bh T + t in (B NH, T) order alone, for an even T (then
 * t and the row share their parity). */
DT_FLASH_FN size_t dt_flash_ld_at_row(size_t row) { return (row - (row & 1)) * 2 + (row & 1); }

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

/* dt_flash_bwd_order with the head groups taken last first (ranks inside a group as
 * before): the dQ pass can start on the groups whose dS tiles kernel A wrote last, which
 * may still be in L2. Also a bijection. */
DT_FLASH_FN void dt_flash_bwd_order_rev(int i, int grp, int nblk, int BH, int *bh, int *rank) {
    int gs = grp * nblk;
    dt_flash_bwd_order((BH / grp - 1 - i / gs) * gs + i % gs, grp, nblk, bh, rank);
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

/* The 128-query-tile kernel A (attention_wgmma_bwd_q128_cuda.cu) with M consumer
 * warpgroups (64 keys each) and nst stages: a block's key blocks kb0 = M r .. kb0 + M - 1
 * walk the query tiles j = 0, 1, .. of query blocks kb0 + 2j and kb0 + 2j + 1 (the second
 * one absent past the end: nqb - kb0 odd), so a block has dt_wgq_tiles(nqb, kb0) tiles. */
DT_FLASH_FN int dt_wgq_tiles(int nqb, int kb0) { return (nqb - kb0 + 1) / 2; }
/* What a 64-query half of tile j (query block qb = kb0 + 2j + h) is to the warpgroup that
 * owns key block kb: absent or wholly above the diagonal (no products), the diagonal block
 * (masked), or wholly below it. */
enum { DT_WGQ_SKIP = 0, DT_WGQ_DIAG = 1, DT_WGQ_FULL = 2 };
DT_FLASH_FN int dt_wgq_half(int qb, int kb, int nqb) {
    return qb >= nqb || qb < kb ? DT_WGQ_SKIP : qb == kb ? DT_WGQ_DIAG : DT_WGQ_FULL;
}
/* Its shared memory, byte offsets from the 1024-byte aligned base: K tiles (M), V tiles
 * (M), then per stage a Q tile and a dO tile of 128 rows (two 64-row swizzled tiles each,
 * 16 KB: an m64n128 B operand K-major, SBO 1024, and an MN-major one of 8 k-steps, 2 KB
 * apart), then per stage the 128 queries' {lse log2(e), D} pairs (1 KB), then the 2 nst
 * mbarriers (8 bytes each: the stages' "full", then their "empty"). The total includes
 * 1024 bytes of slack for aligning the base. */
DT_FLASH_FN uint32_t dt_wgq_k_off(int M, int j) { (void)M; return (uint32_t)j * DT_WGBWD_TILE; }
DT_FLASH_FN uint32_t dt_wgq_v_off(int M, int j) { return (uint32_t)(M + j) * DT_WGBWD_TILE; }
DT_FLASH_FN uint32_t dt_wgq_q_off(int M, int st) { return (uint32_t)(2 * M + 4 * st) * DT_WGBWD_TILE; }
DT_FLASH_FN uint32_t dt_wgq_do_off(int M, int st) { return (uint32_t)(2 * M + 4 * st + 2) * DT_WGBWD_TILE; }
DT_FLASH_FN uint32_t dt_wgq_ld_off(int M, int nst, int st) {
    return (uint32_t)(2 * M + 4 * nst) * DT_WGBWD_TILE + (uint32_t)st * 1024u;
}
DT_FLASH_FN uint32_t dt_wgq_full_off(int M, int nst, int st) { return dt_wgq_ld_off(M, nst, nst) + (uint32_t)st * 8u; }
DT_FLASH_FN uint32_t dt_wgq_empty_off(int M, int nst, int st) {
    return dt_wgq_ld_off(M, nst, nst) + (uint32_t)(nst + st) * 8u;
}
DT_FLASH_FN uint32_t dt_wgq_smem(int M, int nst) { return dt_wgq_empty_off(M, nst, nst) + 1024u; }
/* Its configurations: M = 2 with 4 stages, one block an SM; M = 1 with 2 stages, two blocks
 * an SM (a third stage would not fit twice). */
#define DT_WGQ_STAGES_M2 4
#define DT_WGQ_STAGES_M1 2
/* Its registers a thread: launched with __launch_bounds__(128 (M + 1), blocks an SM), so
 * ptxas gives every thread dt_wgq_launch_regs (65536 over the SM's threads, down to a
 * multiple of 8); then setmaxnreg moves them: the producer warpgroup down to
 * DT_WGQ_PRODUCER_REGS, the consumers up to DT_WGQ_CONSUMER_REGS(M). The increase waits
 * until the block's pool holds the registers, so the split must fit in what the block was
 * given, or the consumers wait forever (tests/ops/test_flash_layout.c). */
#define DT_WGQ_PRODUCER_REGS 24
#define DT_WGQ_CONSUMER_REGS(M) ((M) == 2 ? 240 : 232)
DT_FLASH_FN int dt_wgq_per_sm(int M) { return M == 2 ? 1 : 2; }
DT_FLASH_FN int dt_wgq_launch_regs(int M) { return 65536 / (128 * (M + 1) * dt_wgq_per_sm(M)) / 8 * 8; }
/* The end of a warpgroup's loop over its tiles (key block kb, the block's first kb0): tile
 * 0 runs before the loop (its first half is the diagonal block or, for kb = kb0 + 1,
 * skipped), tiles 1 .. end - 1 in it (both halves below the diagonal), and where end <
 * dt_wgq_tiles the last tile after it (M = 1: one half past the end of the head). */
DT_FLASH_FN int dt_wgq_loop_end(int nqb, int kb0, int kb) {
    int n = dt_wgq_tiles(nqb, kb0);
    return n > 1 && dt_wgq_half(kb0 + 2 * (n - 1) + 1, kb, nqb) == DT_WGQ_SKIP ? n - 1 : n;
}

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
