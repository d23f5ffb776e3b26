/* Host-side plan of the MoE family's CUDA kernels (src/ops/moe/cuda/), in plain C so CI
 * tests it on the CPU: the sizes every kernel launches for, the device workspace's layout,
 * the routing map's chunked counting sort (capacity ranks, group offsets, stable positions)
 * as a host function the GPU test compares the kernels with, the tile schedule of the
 * grouped GEMMs over variable-size groups, and the slot layout of the routing-probability
 * gradient (dprob) with the order of its reduction. The math is moe-math (src/ops/moe/moe.h
 * when it lands); shapes: N tokens (B T), C channels, F = 4 C expert hidden width, E
 * experts, K experts a token (top-K).
 *
 * Group sizes are data: the kernels keep them on the device and launch for the worst case
 * (dt_moe_max_rows, dt_moe_max_mtiles), so no step waits for the host and a CUDA graph of
 * the launches stays valid whatever the routing. The functions marked DT_MOE_HD are
 * compiled for the host and for the device: the kernels call the very code CI tests.
 *
 * Every function here depends on the sizes (and the routing of the call) only, never on the
 * GPU, its SM count or timing: a det kernel reduces in the same order on every launch. */
#ifndef DT_OPS_MOE_PLAN_H
#define DT_OPS_MOE_PLAN_H

#ifdef __cplusplus
extern "C" {
#endif

#include "detrain/detrain.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __CUDACC__
#define DT_MOE_HD __host__ __device__ static inline
#else
#define DT_MOE_HD static inline
#endif

enum {
    DT_MOE_MAX_EXPERTS = 64,   /* E (the router keeps a token's E logits in registers) */
    DT_MOE_MAX_TOPK = 8,       /* K */
    DT_MOE_ROUTE_CHUNK = 256,  /* tokens a routing-map chunk (one block of 8 warps) */
    DT_MOE_TILE_M = 128,       /* rows of a grouped-GEMM tile (and of N, the weights' rows) */
    DT_MOE_TILE_N = 128,       /* columns of a grouped-GEMM tile */
    DT_MOE_TILE_K = 32,        /* the K step of a grouped GEMM */
    DT_MOE_WGRAD_SPLITS = 4,   /* fast weight gradient: row parts of a group added with atomics */
    DT_MOE_DPROB_TILE = 128,   /* channels of one dprob partial (one channel tile) */
    DT_MOE_DPROB_ROWS = 32,    /* dispatched rows of one dprob block */
    DT_MOE_TOKEN_CHUNK = 256,  /* tokens of one partial of the router's weight gradient and of P_e */
};

/* The sizes of one MoE layer's call. cap: the capacity of an expert (assignments kept per
 * expert; N when there is no capacity limit, since a token picks an expert at most once). */
typedef struct dt_moe_dims {
    int N, C, F, E, K;
    int cap;
} dt_moe_dims;

/* The capacity of an expert: capacity factor f > 0: ceil(f N K / E), computed in double as
 * (double)f * N * K / E, at most N; f == 0: N (no dropping). */
int dt_moe_capacity(int N, int K, int E, float f);
/* Fills d; DT_EINVAL naming the bad size: N >= 1; C a multiple of DT_MOE_TILE_N (the
 * grouped GEMMs' tiles; 768 is); F a multiple of DT_MOE_TILE_N; 1 <= E <= DT_MOE_MAX_EXPERTS;
 * 1 <= K <= min(E, DT_MOE_MAX_TOPK); f >= 0; N K and the buffers' element counts within int. */
dt_status dt_moe_dims_make(int N, int C, int F, int E, int K, float capacity_factor, dt_moe_dims *d);

/* Dispatched rows at most: N K, or E cap when capacity drops assignments. */
size_t dt_moe_max_rows(const dt_moe_dims *d);
/* Row tiles of the grouped GEMMs at most: sum over experts of ceil(R_e / DT_MOE_TILE_M) with
 * sum R_e <= max_rows: (max_rows + E (TILE_M - 1)) / TILE_M. The launches' grid. */
int dt_moe_max_mtiles(const dt_moe_dims *d);
/* Chunks of the routing map: ceil(N / DT_MOE_ROUTE_CHUNK). */
int dt_moe_route_chunks(int N);
/* Channel tiles of dprob: C / DT_MOE_DPROB_TILE (C is a multiple of it). */
int dt_moe_dprob_tiles(int C);
/* Partials of the token sums (router weight gradient, P_e): ceil(N / DT_MOE_TOKEN_CHUNK). */
int dt_moe_token_chunks(int N);

/* ---- the device workspace of one MoE layer ------------------------------------------------
 * One slab; each buffer at a 256-byte aligned offset. Forward state the backward reads:
 *   PROBS   f32 (N, E)   softmax of the router logits
 *   TOPE    i32 (N, K)   e_{t,k}, value descending then index ascending
 *   TOPG    f32 (N, K)   g_{t,k} = p_t[e_{t,k}]
 *   CNT     i32 (chunks, K, E)  assignments of chunk b with choice k to expert e
 *   KEPT    i32 (chunks, K, E)  of those, the ones inside the capacity
 *   POSB    i32 (chunks, E)     the first dispatched row of chunk b's kept rows of e
 *   META    i32 (DT_MOE_META)   per-expert totals, offsets, tile starts, dropped count
 *   ROWOF   i32 (N, K)   dispatched row of (t, k), -1 when dropped
 *   SRC     i32 (max_rows) the slot t K + k of each dispatched row
 *   XP      bf16 (max_rows, C)  dispatched inputs
 *   H, A    bf16 (max_rows, F)  expert pre-activation, GELU(H)
 *   YP      bf16 (max_rows, C)  expert outputs
 *   PART    f32 (token chunks, E)  P_e partials; AUX f64 (2): aux, sum_e f_e P_e
 * Backward scratch:
 *   DYP bf16 (max_rows, C), DH bf16 (max_rows, F), DXP bf16 (max_rows, C),
 *   DG f32 (N, K), DGPART f32 (dprob tiles, N, K), DZ f32 (N, E),
 *   WRPART f32 (token chunks, E, C), OUTACC f32 (N, C) (the fast combine's accumulators). */
enum {
    DT_MOE_WS_PROBS, DT_MOE_WS_TOPE, DT_MOE_WS_TOPG, DT_MOE_WS_CNT, DT_MOE_WS_KEPT, DT_MOE_WS_POSB,
    DT_MOE_WS_META, DT_MOE_WS_ROWOF, DT_MOE_WS_SRC, DT_MOE_WS_XP, DT_MOE_WS_H, DT_MOE_WS_A, DT_MOE_WS_YP,
    DT_MOE_WS_PART, DT_MOE_WS_AUX,
    DT_MOE_WS_DYP, DT_MOE_WS_DH, DT_MOE_WS_DXP, DT_MOE_WS_DG, DT_MOE_WS_DGPART, DT_MOE_WS_DZ,
    DT_MOE_WS_WRPART, DT_MOE_WS_OUTACC,
    DT_MOE_WS_COUNT
};
/* META: ints at these offsets (E <= DT_MOE_MAX_EXPERTS). */
enum {
    DT_MOE_META_TOTAL = 0,                                   /* [E] assignments before dropping */
    DT_MOE_META_KEPT = DT_MOE_META_TOTAL + DT_MOE_MAX_EXPERTS,  /* [E] kept (R_e) */
    DT_MOE_META_OFFS = DT_MOE_META_KEPT + DT_MOE_MAX_EXPERTS,   /* [E + 1] group offsets */
    DT_MOE_META_TILES = DT_MOE_META_OFFS + DT_MOE_MAX_EXPERTS + 1, /* [E + 1] first row tile of each group */
    DT_MOE_META_DROPPED = DT_MOE_META_TILES + DT_MOE_MAX_EXPERTS + 1, /* [1] dropped assignments */
    DT_MOE_META_FILL = DT_MOE_META_DROPPED + 1,              /* [E] fast placement's counters */
    DT_MOE_META = DT_MOE_META_FILL + DT_MOE_MAX_EXPERTS
};
typedef struct dt_moe_ws_layout {
    size_t off[DT_MOE_WS_COUNT];   /* bytes from the slab's start */
    size_t bytes[DT_MOE_WS_COUNT]; /* bytes of each buffer */
    size_t total;                  /* the slab's bytes */
} dt_moe_ws_layout;
void dt_moe_ws_plan(const dt_moe_dims *d, dt_moe_ws_layout *l);
const char *dt_moe_ws_name(int buf);

/* ---- the routing map ----------------------------------------------------------------------
 * Capacity rank of assignment (t, k) to e: its index among e's assignments in (k, t) order.
 * Kept when rank < cap. Dispatch order: the kept assignments sorted by (expert, token, k);
 * since a token picks an expert once, within a group that is token order.
 * The chunked counting sort the kernels run, step by step (dt_moe_route_host does the same
 * on the host, in the same steps):
 *  1. count: chunk b (tokens b CHUNK .. + CHUNK) counts CNT[b][k][e];
 *  2. scan (one block): base(k, e, b) = sum_{k' < k} total(k', e) + sum_{b' < b} CNT[b'][k][e]
 *     (the rank of the chunk's first such assignment); KEPT[b][k][e] = clamp(cap - base, 0,
 *     CNT[b][k][e]) (ranks within a chunk follow token order, so a chunk keeps its first
 *     ones); R_e = sum KEPT over b and k, offsets the exclusive scan of R_e in expert order,
 *     tile starts the scan of ceil(R_e / TILE_M); POSB[b][e] = offs[e] + sum_{b' < b} sum_k
 *     KEPT[b'][k][e];
 *  3. place: in chunk b, the j-th kept (t, k) of e in (k, t) order within its k (j < KEPT)
 *     is kept; kept tokens of e in token order take rows POSB[b][e], POSB[b][e] + 1, ...
 * Every row is written by one thread at an index fixed by the routing alone: collision-free,
 * stable, deterministic by construction. */
/* Host version. tope (N, K) experts in [0, E); outputs as the workspace's buffers: cnt,
 * kept (chunks K E), posb (chunks E), meta (DT_MOE_META), rowof (N K), src (max_rows; only
 * the first offs[E] written). Returns the number of dispatched rows, -1 on an expert id out
 * of range or a token naming one expert twice. */
int dt_moe_route_host(const int *tope, const dt_moe_dims *d, int *cnt, int *kept, int *posb, int *meta,
                      int *rowof, int *src);

/* ---- tile schedule of the grouped GEMMs ---------------------------------------------------
 * The forward and input-gradient GEMMs cut each group into row tiles of DT_MOE_TILE_M
 * (the last one partial; an empty group has none); tiles are numbered group after group,
 * group e's first tile tiles[e] (META_TILES, tiles[E] the total). A launch has
 * dt_moe_max_mtiles blocks along x; block x finds its group with dt_moe_tile_group and
 * exits when x >= tiles[E]. A tile never straddles two groups. */
DT_MOE_HD int dt_moe_ceil_div(int a, int b) { return (a + b - 1) / b; }
/* The group of tile `tile`: the e with tiles[e] <= tile < tiles[e + 1] (the last such e
 * when groups before it are empty: empty groups own no tile), -1 when tile >= tiles[E].
 * Binary search over the E + 1 non-decreasing starts. */
DT_MOE_HD int dt_moe_tile_group(const int *tiles, int E, int tile) {
    if (tile < 0 || tile >= tiles[E]) return -1;
    int lo = 0, hi = E - 1; /* the largest e with tiles[e] <= tile */
    while (lo < hi) {
        int mid = (lo + hi + 1) >> 1;
        if (tiles[mid] <= tile) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}
/* The weight gradient's blocks: for each expert, (M / TILE_M) x (N / TILE_N) output tiles;
 * det: one block a tile walks the group's rows in order (no split, no atomics); fast: the
 * rows cut into DT_MOE_WGRAD_SPLITS parts by dt_moe_split_rows, each part's partial added
 * into the gradient with atomics. Part p of R rows: [p R / S, (p + 1) R / S). */
DT_MOE_HD int dt_moe_split_rows(int R, int S, int p) { return (int)(((long long)R * p) / S); }

/* ---- dprob slots ---------------------------------------------------------------------------
 * dg_{t,k} = <dout_t, Yp[row(t, k)]>: the dprob blocks cut the channels into
 * dt_moe_dprob_tiles(C) tiles; tile j's block writes its partial of slot s = t K + k to
 * DGPART[dt_moe_dprob_slot(j, s, N K)] (one writer a slot: det), and after all writers
 * one thread a slot adds the tiles' partials in tile order j = 0, 1, ... (dropped slots:
 * 0). fast: every tile atomically adds its partial into DG[s]. */
DT_MOE_HD size_t dt_moe_dprob_slot(int tile, int slot, int NK) { return (size_t)tile * (size_t)NK + (size_t)slot; }

#ifdef __cplusplus
}
#endif

#endif
