/* The host-and-device plan of the TMA-fed warpgroup-MMA GEMM (gemm_wgmma_cuda.cu): its
 * block tiles, shared-memory ring, persistent tile order and the 2-D tensor maps its TMA
 * loads read through, as plain integer functions. The kernel and its launcher call the same
 * code that a CPU test (tests/ops/test_gemm_tma.c) checks in CI, where there is no GPU.
 *
 * Shapes: row-major C (M, N) = A (M, K) op(B), A K-contiguous; B stored (N, K) (tb 1: the
 * linears' forward, "NT") or (K, N) (tb 0: their input gradient, "NN"). A tile is bm x bn
 * (a schedule's, below: bm 128 or 64, bn 256 or 128) and walks K in DT_GT_BK steps; every shared tile is rows of
 * 128 bytes (64 bf16) in the 128-byte swizzle, which TMA writes and wgmma reads
 * (wgmma_desc.h). */
#ifndef DT_OPS_GEMM_TMA_PLAN_H
#define DT_OPS_GEMM_TMA_PLAN_H

#include <stdint.h>

#if defined(__CUDACC__)
#define DT_GT_FN static __host__ __device__ __forceinline__
#else
#define DT_GT_FN static inline
#endif

#define DT_GT_BK 64           /* K per stage: one 128-byte swizzled row of bf16 */
#define DT_GT_THREADS 384     /* one producer warpgroup, two consumer warpgroups */
#define DT_GT_SMEM_MAX 232448 /* bytes of dynamic shared memory a block may have (sm_90) */

/* Schedules (the values of dt_cu_gemm_wgmma_force: gemm_cuda.h's DT_CU_GEMM_OWN_* name
 * them). Cooperative: a tile is 128 x bn, both consumer warpgroups work on it (rows 0..63
 * and 64..127) and run its epilogue together, the tensor cores idle meanwhile. Ping-pong:
 * the consumer warpgroups take alternate tiles, so one's epilogue runs while the other's
 * products do; a tile is 64 x 256 (one m64n256k16 a k step: B loaded for every 64 rows) or
 * 128 x 128 (two m64n128k16 a k step, rows 0..63 and 64..127, on the same B: 128 fp32
 * accumulators a thread, as many as a 64 x 256 warpgroup tile). */
#define DT_GT_RULE 0
#define DT_GT_COOP256 1 /* 128 x 256, cooperative */
#define DT_GT_COOP128 2 /* 128 x 128, cooperative */
#define DT_GT_PP64 3    /* 64 x 256, ping-pong */
#define DT_GT_PP128 4   /* 128 x 128, ping-pong */
#define DT_GT_SCHEDULES 5
/* A schedule's tile rows (bm) and columns (bn), whether it is ping-pong, and the rows of a
 * tile that one consumer warpgroup computes (64 or 128: one or two m64 products a k step). */
#define DT_GT_BM(sch) ((sch) == DT_GT_PP64 ? 64 : 128)
#define DT_GT_BN(sch) ((sch) == DT_GT_COOP256 || (sch) == DT_GT_PP64 ? 256 : 128)
#define DT_GT_PP(sch) ((sch) == DT_GT_PP64 || (sch) == DT_GT_PP128)
#define DT_GT_WM(sch) (DT_GT_PP(sch) ? DT_GT_BM(sch) : 64)
/* The epilogue's staging: 64 x 64 bf16 buffers (8 KB) a consumer warpgroup, each warp's
 * DT_GT_EPI_ROWS rows written by the warp and read by its own TMA store (or loaded with
 * dGELU's aux by TMA, then overwritten), so as many stores as buffers can be in flight.
 * The 128 x 128 ping-pong takes four and one stage fewer: dGELU's four aux chunks all load at the tile's start,
 * under the products, and need no L2 prefetch (a prefetch a row, 128 a tile, held up the
 * TMA unit: 0.194 ms instead of 0.157 for the 128 x 128 cooperative dGELU GEMM on the
 * H200); six buffers (four stages) were no faster for GELU's eight stores a tile. */
#define DT_GT_NBUF(sch) ((sch) == DT_GT_PP128 ? 4 : 2)
#define DT_GT_EPI_BYTES(sch) (2 * DT_GT_NBUF(sch) * 8192)
#define DT_GT_EPI_ROWS 16 /* a warp's rows of a 64-row chunk: the epilogue's TMA box */

/* The schedule a call of N columns and depth K takes: `forced` when it is one (1 ..
 * DT_GT_SCHEDULES - 1) and its tile width divides N, -1 when it does not; the rule
 * (DT_GT_RULE or any other value): 128 x 256 cooperative for deep products (K >= 2048)
 * where N allows, whose epilogue is short beside them and whose tiles read the fewest bytes
 * a flop; else 128 x 128 ping-pong, which overlaps each tile's epilogue with the other
 * warpgroup's products (on the H200 the faster of the two at K = 768, the slower at
 * K = 2304 and 3072). */
DT_GT_FN int dt_gt_schedule(int N, int K, int forced) {
    if (forced <= DT_GT_RULE || forced >= DT_GT_SCHEDULES)
        return K >= 2048 && N % 256 == 0 ? DT_GT_COOP256 : DT_GT_PP128;
    return N % DT_GT_BN(forced) ? -1 : forced;
}

/* Bytes of a stage (a bm-row A tile and a bn-wide B tile) and a schedule's ring depth: as
 * many stages as fit in 224 KB beside its staging, the rest of shared memory being the
 * barriers and the 1024-byte alignment (macros too: the kernel needs them as constants). */
#define DT_GT_STAGE_BYTES(bm, bn) (((bm) + (bn)) * DT_GT_BK * 2)
#define DT_GT_STAGES(sch) ((229376 - DT_GT_EPI_BYTES(sch)) / DT_GT_STAGE_BYTES(DT_GT_BM(sch), DT_GT_BN(sch)))
DT_GT_FN int dt_gt_stage_bytes(int bm, int bn) { return DT_GT_STAGE_BYTES(bm, bn); }
DT_GT_FN int dt_gt_stages(int sch) { return DT_GT_STAGES(sch); }
/* Dynamic shared memory a launch asks for: the ring, the epilogue's staging buffers (the
 * TMA stores read C there; the dGELU epilogue's aux is loaded there), the full and empty
 * barrier of each stage, a barrier of aux loads a consumer warp and staging buffer, one a
 * consumer warpgroup (its ping-pong turn; 8 bytes each), the tile queue (two barriers and
 * a tile index a slot: 20 bytes), and up to 1023 bytes to align the ring to 1024 bytes (the
 * swizzle atom). */
#define DT_GT_EBARS 32 /* barriers of aux loads: DT_GT_NBUF a consumer warp (8 of them) at most */
#define DT_GT_TQ 4    /* slots of the tile queue (below) */
DT_GT_FN int dt_gt_smem_bytes(int sch) {
    return dt_gt_stages(sch) * dt_gt_stage_bytes(DT_GT_BM(sch), DT_GT_BN(sch)) + DT_GT_EPI_BYTES(sch) +
           16 * dt_gt_stages(sch) + 8 * DT_GT_EBARS + 16 + 20 * DT_GT_TQ + 1024;
}

/* The persistent order: tile i (0 .. tiles - 1) has its rows at *m0 and its columns at *n0,
 * the N tiles of one row band consecutive, so the blocks that run at once share their A rows
 * and all read the same B (a weight matrix, a few MB: it stays in L2). Each tile's work is
 * the same whoever runs it. */
DT_GT_FN void dt_gt_tile(int i, int N, int bm, int bn, int *m0, int *n0) {
    const int nt = N / bn;
    *m0 = (i / nt) * bm;
    *n0 = (i % nt) * bn;
}
DT_GT_FN int dt_gt_tiles(int M, int N, int bm, int bn) { return (M / bm) * (N / bn); }
/* Blocks of a launch: one an SM, never more than there are tiles. */
DT_GT_FN int dt_gt_grid(int tiles, int sms) { return tiles < sms ? tiles : sms; }

/* Which block takes which tile. Dynamic (the kernel's way): a block's producer claims its
 * next tile shortly before it loads it (its first at the start, each next one with the
 * load DT_GT_CLAIM_AHEAD stages before the current tile's last), from a counter in global
 * memory that every block of the launch adds 1 to (atomicAdd returns the claim v, 0, 1,
 * 2, ...): so a block that
 * started late, behind another stream's kernels still holding its SM, takes fewer tiles
 * instead of ending the launch late with its fixed share. Static (benchmarks only): block
 * b takes b, b + grid, b + 2 grid, ... Claim v is tile v, or no tile (-1) once v >= tiles:
 * each producer stops at its first such claim, so a launch makes exactly tiles + grid claims
 * and the one that returns tiles + grid - 1 is its last; that producer puts the counter back
 * to 0, ready for the next launch that uses it (in stream order, or the next replay of a
 * CUDA graph that holds the launch), with no host write. Either way the tiles a block takes
 * are its local tiles 0, 1, 2, ...; in ping-pong, consumer warpgroup w takes local tiles w,
 * w + 2, ... Which block computes a tile never changes its bits (see the kernel). */
#define DT_GT_CLAIM_AHEAD 4
DT_GT_FN int dt_gt_claim_tile(int v, int tiles) { return v >= 0 && v < tiles ? v : -1; }
DT_GT_FN int dt_gt_claim_last(int v, int tiles, int grid) { return v == tiles + grid - 1; }
DT_GT_FN int dt_gt_static_tile(int b, int local, int grid, int tiles) {
    return dt_gt_claim_tile(b + local * grid, tiles);
}
/* The counters: a pool in device memory, one a launch taken in turn (launch n: counter
 * n % DT_GT_COUNTERS), each on its own 128-byte line. A counter is reused only
 * DT_GT_COUNTERS launches later, so launches on other streams may overlap as long as fewer
 * than that many of them are in flight at once. */
#define DT_GT_COUNTERS 256
#define DT_GT_COUNTER_STRIDE 32 /* ints: 128 bytes */

/* The tile queue in shared memory, from the producer (which claims the tiles) to the
 * consumers: DT_GT_TQ slots, local tile j in slot j % DT_GT_TQ, each slot a tile index
 * (-1: none left) with a "full" mbarrier (the producer's arrival, phase j / DT_GT_TQ) and an
 * "empty" one (one arrival a consumer warp that reads it). After its last tile the producer
 * posts -1 once for each consumer walk (cooperative 1: both warpgroups read every slot;
 * ping-pong 2: one for each warpgroup, which read alternate slots). */
DT_GT_FN int dt_gt_tq_ends(int pp) { return pp ? 2 : 1; }

/* A 2-D tensor map's parameters as cuTensorMapEncodeTiled takes them (bf16 elements,
 * innermost dimension first): the global extent dim, the byte stride of dimension 1, the
 * box copied per load, and the box's bytes. */
typedef struct dt_gt_map {
    uint64_t dim[2];
    uint64_t stride; /* bytes from one row to the next */
    uint32_t box[2];
    uint32_t box_bytes;
} dt_gt_map;

/* A: (M, K) with leading dimension lda; a load is 64 k x bm rows at (k0, m0). */
DT_GT_FN dt_gt_map dt_gt_map_a(int M, int K, int lda, int bm) {
    dt_gt_map m;
    m.dim[0] = (uint64_t)K;
    m.dim[1] = (uint64_t)M;
    m.stride = (uint64_t)lda * 2u;
    m.box[0] = DT_GT_BK;
    m.box[1] = (uint32_t)bm;
    m.box_bytes = (uint32_t)(DT_GT_BK * bm * 2);
    return m;
}
/* B: tb 1, stored (N, K): a load is 64 k x bn rows at (k0, n0), K-major for wgmma; tb 0,
 * stored (K, N): bn / 64 loads of 64 n x 64 k rows at (n0 + 64 j, k0), MN-major, each
 * 8 KB, placed one after another (the descriptor's LBO). */
DT_GT_FN dt_gt_map dt_gt_map_b(int tb, int N, int K, int ldb, int bn) {
    dt_gt_map m;
    m.dim[0] = (uint64_t)(tb ? K : N);
    m.dim[1] = (uint64_t)(tb ? N : K);
    m.stride = (uint64_t)ldb * 2u;
    m.box[0] = 64;
    m.box[1] = (uint32_t)(tb ? bn : DT_GT_BK);
    m.box_bytes = m.box[0] * m.box[1] * 2u;
    return m;
}
/* C and aux (M, N) with leading dimension ldc: the epilogue stores (and, for dGELU and DOT,
 * loads) 64 columns x DT_GT_EPI_ROWS rows at (n, m), a consumer warp's rows of one 64 x 64
 * chunk. */
DT_GT_FN dt_gt_map dt_gt_map_c(int M, int N, int ldc) {
    dt_gt_map m;
    m.dim[0] = (uint64_t)N;
    m.dim[1] = (uint64_t)M;
    m.stride = (uint64_t)ldc * 2u;
    m.box[0] = 64;
    m.box[1] = DT_GT_EPI_ROWS;
    m.box_bytes = 64 * DT_GT_EPI_ROWS * 2;
    return m;
}
/* TMA loads of B a stage takes. */
DT_GT_FN int dt_gt_b_loads(int tb, int bn) { return tb ? 1 : bn / 64; }

/* The dGELU epilogue's column sums of C (the fc bias gradient, summed from the fp32 values
 * before their bf16 rounding), written as partials that a fixed-order finish adds up.
 * A consumer thread (warp w of its warpgroup, lane = 4 g + t) holds, of each 64 x 64 chunk,
 * rows 16 w + g and 16 w + g + 8 at columns 8 j + 2 t + b (j < 8, b < 2); over its
 * warpgroup's WM rows it adds them into nv = 16 bn / 64 column sums, value i = 16 ch + 2 j + b
 * for chunk column ch, in row order (chunk rows in order, row g before row g + 8).
 * The warp then adds across g in three halving steps (lane masks 16, 8, 4, g's bits 2, 1, 0):
 * at step s (0, 1, 2) with h = nv >> (s + 1) values left of the thread's first 2h, a lane with
 * its mask bit set keeps values h .. 2h - 1 and sends 0 .. h - 1, the other the reverse;
 * value i becomes kept[i] + received[i] (dt_gt_csum_keep). Each lane ends with nv / 8
 * sums over the warp's rows: value k at column dt_gt_csum_col(bn, g, t, k) of the tile. A
 * warp's sums are partial dt_gt_csum_part(sch, mrow, w) (mrow: the warpgroup's first row),
 * one row of N floats of the partials; a call writes dt_gt_csum_parts(sch, M) of them. */
#define DT_GT_CSUM_VALUES(bn) ((bn) / 4) /* nv (a macro too: the kernel sizes an array with it) */
DT_GT_FN int dt_gt_csum_values(int bn) { return DT_GT_CSUM_VALUES(bn); }
DT_GT_FN int dt_gt_csum_keep(int lane, int step, int i, int h) { return ((lane >> (4 - step)) & 1) ? i + h : i; }
DT_GT_FN int dt_gt_csum_col(int bn, int g, int t, int k) { return (bn / 8) * g + 8 * (k >> 1) + 2 * t + (k & 1); }
DT_GT_FN int dt_gt_csum_parts(int sch, int M) { return M / (DT_GT_WM(sch) / 4); }
DT_GT_FN int dt_gt_csum_part(int sch, int mrow, int warp) { return mrow / (DT_GT_WM(sch) / 4) + warp; }

#endif
