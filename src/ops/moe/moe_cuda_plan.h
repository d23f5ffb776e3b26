/* Host-side plan of the MoE family's CUDA kernels (src/ops/moe/cuda/), in plain C so CI
 * tests it on the CPU: the sizes every kernel launches for, the device workspace's layout,
 * the routing map's chunked counting sort (capacity ranks, group offsets, stable positions)
 * as a host function the GPU test compares the kernels with, the tile schedule of the
 * grouped GEMMs over variable-size groups, and the slot layout of the routing-probability
 * gradient (dprob) with the order of its reduction. The math and the shape letters are
 * src/ops/moe/moe.h's: N tokens (B T), C channels, F = 4 C expert hidden width, E
 * experts, K experts a token (top-K).
 *
 * Group sizes are data: the kernels keep them on the device and launch for the worst case
 * (dt_cu_moe_max_rows, dt_cu_moe_max_mtiles), so no step waits for the host and a CUDA graph of
 * the launches stays valid whatever the routing. The functions marked DT_CU_MOE_HD are
 * compiled for the host and for the device: the kernels call the very code CI tests.
 *
 * Every function here depends on the sizes (and the routing of the call) only, never on the
 * GPU, its SM count or timing: a det kernel reduces in the same order on every launch. */
#ifndef DT_OPS_MOE_CUDA_PLAN_H
#define DT_OPS_MOE_CUDA_PLAN_H

#ifdef __cplusplus
extern "C" {
#endif

#include "detrain/detrain.h"
#include "ops/moe/moe.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __CUDACC__
#define DT_CU_MOE_HD __host__ __device__ static inline
#else
#define DT_CU_MOE_HD static inline
#endif

enum {
    DT_CU_MOE_MAX_EXPERTS = 64,   /* E (the router's per-warp logits, the routing map's shared counters) */
    DT_CU_MOE_MAX_TOPK = 8,       /* K */
    DT_CU_MOE_ROUTE_CHUNK = 256,  /* tokens a routing-map chunk (one block of 8 warps) */
    DT_CU_MOE_TILE_M = 128,       /* rows of a grouped-GEMM tile (and of N, the weights' rows) */
    DT_CU_MOE_TILE_N = 128,       /* columns of a grouped-GEMM tile */
    DT_CU_MOE_TILE_K = 32,        /* the K step of a grouped GEMM */
    DT_CU_MOE_WGRAD_SPLITS = 4,   /* fast weight gradient: row parts of a group added with atomics */
    DT_CU_MOE_DPROB_TILE = 128,   /* channels of one dprob partial (one channel tile) */
    DT_CU_MOE_DPROB_ROWS = 32,    /* dispatched rows of one dprob block */
    DT_CU_MOE_TOKEN_CHUNK = 256,  /* tokens of one partial of the router's weight gradient and of P_e */
};

/* The sizes of one MoE layer's call: moe.h's dt_moe_dims (cap 0: no capacity limit). The
 * kernels rank against dt_cu_moe_room: the capacity, or N when there is none (a token picks
 * an expert at most once, so N never drops). */
DT_CU_MOE_HD int dt_cu_moe_room(int cap, int N) { return cap > 0 && cap < N ? cap : N; }
/* Fills d with cap = dt_moe_capacity(capacity_factor, N, K, E) and checks it
 * (dt_moe_dims_check), then what the CUDA kernels need; DT_EINVAL naming the bad size: C a
 * multiple of DT_CU_MOE_TILE_N (the grouped GEMMs' tiles; 768 is); F a multiple of
 * DT_CU_MOE_TILE_N; E <= DT_CU_MOE_MAX_EXPERTS; K <= DT_CU_MOE_MAX_TOPK; factor >= 0. */
dt_status dt_cu_moe_dims_make(int N, int C, int F, int E, int K, float capacity_factor, dt_moe_dims *d);

/* Dispatched rows at most: N K, or E cap when capacity drops assignments. */
size_t dt_cu_moe_max_rows(const dt_moe_dims *d);
/* Row tiles of the grouped GEMMs at most: sum over experts of ceil(R_e / DT_CU_MOE_TILE_M) with
 * sum R_e <= max_rows: (max_rows + E (TILE_M - 1)) / TILE_M. The launches' grid. */
int dt_cu_moe_max_mtiles(const dt_moe_dims *d);
/* Chunks of the routing map: ceil(N / DT_CU_MOE_ROUTE_CHUNK). */
int dt_cu_moe_route_chunks(int N);
/* Channel tiles of dprob: C / DT_CU_MOE_DPROB_TILE (C is a multiple of it). */
int dt_cu_moe_dprob_tiles(int C);
/* Partials of the token sums (router weight gradient, P_e): ceil(N / DT_CU_MOE_TOKEN_CHUNK). */
int dt_cu_moe_token_chunks(int N);

/* ---- the device workspace of one MoE layer ------------------------------------------------
 * One slab; each buffer at a 256-byte aligned offset. Forward state the backward reads:
 *   PROBS   f32 (N, E)   softmax of the router logits
 *   TOPE    i32 (N, K)   e_{t,k}, value descending then index ascending
 *   TOPG    f32 (N, K)   g_{t,k} = p_t[e_{t,k}]
 *   CNT     i32 (chunks, K, E)  assignments of chunk b with choice k to expert e
 *   KEPT    i32 (chunks, K, E)  of those, the ones inside the capacity
 *   POSB    i32 (chunks, E)     the first dispatched row of chunk b's kept rows of e
 *   META    i32 (DT_CU_MOE_META)   per-expert totals, offsets, tile starts, dropped count
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
    DT_CU_MOE_WS_PROBS, DT_CU_MOE_WS_TOPE, DT_CU_MOE_WS_TOPG, DT_CU_MOE_WS_CNT, DT_CU_MOE_WS_KEPT, DT_CU_MOE_WS_POSB,
    DT_CU_MOE_WS_META, DT_CU_MOE_WS_ROWOF, DT_CU_MOE_WS_SRC, DT_CU_MOE_WS_XP, DT_CU_MOE_WS_H, DT_CU_MOE_WS_A, DT_CU_MOE_WS_YP,
    DT_CU_MOE_WS_PART, DT_CU_MOE_WS_AUX,
    DT_CU_MOE_WS_DYP, DT_CU_MOE_WS_DH, DT_CU_MOE_WS_DXP, DT_CU_MOE_WS_DG, DT_CU_MOE_WS_DGPART, DT_CU_MOE_WS_DZ,
    DT_CU_MOE_WS_WRPART, DT_CU_MOE_WS_OUTACC,
    DT_CU_MOE_WS_COUNT
};
/* META: ints at these offsets (E <= DT_CU_MOE_MAX_EXPERTS). */
enum {
    DT_CU_MOE_META_TOTAL = 0,                                   /* [E] assignments before dropping */
    DT_CU_MOE_META_KEPT = DT_CU_MOE_META_TOTAL + DT_CU_MOE_MAX_EXPERTS,  /* [E] kept (R_e) */
    DT_CU_MOE_META_OFFS = DT_CU_MOE_META_KEPT + DT_CU_MOE_MAX_EXPERTS,   /* [E + 1] group offsets */
    DT_CU_MOE_META_TILES = DT_CU_MOE_META_OFFS + DT_CU_MOE_MAX_EXPERTS + 1, /* [E + 1] first row tile of each group */
    DT_CU_MOE_META_DROPPED = DT_CU_MOE_META_TILES + DT_CU_MOE_MAX_EXPERTS + 1, /* [1] dropped assignments */
    DT_CU_MOE_META_FILL = DT_CU_MOE_META_DROPPED + 1,              /* [E] fast placement's counters */
    DT_CU_MOE_META = DT_CU_MOE_META_FILL + DT_CU_MOE_MAX_EXPERTS
};
typedef struct dt_cu_moe_ws_layout {
    size_t off[DT_CU_MOE_WS_COUNT];   /* bytes from the slab's start */
    size_t bytes[DT_CU_MOE_WS_COUNT]; /* bytes of each buffer */
    size_t total;                  /* the slab's bytes */
} dt_cu_moe_ws_layout;
void dt_cu_moe_ws_plan(const dt_moe_dims *d, dt_cu_moe_ws_layout *l);
const char *dt_cu_moe_ws_name(int buf);

/* ---- the routing map ----------------------------------------------------------------------
 * Capacity rank of assignment (t, k) to e: its index among e's assignments in (k, t) order.
 * Kept when rank < cap. Dispatch order: the kept assignments sorted by (expert, token, k);
 * since a token picks an expert once, within a group that is token order.
 * The chunked counting sort the kernels run, step by step (dt_cu_moe_route_host does the same
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
 * kept (chunks K E), posb (chunks E), meta (DT_CU_MOE_META), rowof (N K), src (max_rows; only
 * the first offs[E] written). Returns the number of dispatched rows, -1 on an expert id out
 * of range or a token naming one expert twice. */
int dt_cu_moe_route_host(const int *tope, const dt_moe_dims *d, int *cnt, int *kept, int *posb, int *meta,
                      int *rowof, int *src);

/* ---- tile schedule of the grouped GEMMs ---------------------------------------------------
 * The forward and input-gradient GEMMs cut each group into row tiles of DT_CU_MOE_TILE_M
 * (the last one partial; an empty group has none); tiles are numbered group after group,
 * group e's first tile tiles[e] (META_TILES, tiles[E] the total). A launch has
 * dt_cu_moe_max_mtiles blocks along x; block x finds its group with dt_cu_moe_tile_group and
 * exits when x >= tiles[E]. A tile never straddles two groups. */
DT_CU_MOE_HD int dt_cu_moe_ceil_div(int a, int b) { return (a + b - 1) / b; }
/* The group of tile `tile`: the e with tiles[e] <= tile < tiles[e + 1] (the last such e
 * when groups before it are empty: empty groups own no tile), -1 when tile >= tiles[E].
 * Binary search over the E + 1 non-decreasing starts. */
DT_CU_MOE_HD int dt_cu_moe_tile_group(const int *tiles, int E, int tile) {
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
 * rows cut into DT_CU_MOE_WGRAD_SPLITS parts by dt_cu_moe_split_rows, each part's partial added
 * into the gradient with atomics. Part p of R rows: [p R / S, (p + 1) R / S). */
DT_CU_MOE_HD int dt_cu_moe_split_rows(int R, int S, int p) { return (int)(((long long)R * p) / S); }

/* ---- dprob slots ---------------------------------------------------------------------------
 * dg_{t,k} = <dout_t, Yp[row(t, k)]>: the dprob blocks cut the channels into
 * dt_cu_moe_dprob_tiles(C) tiles; tile j's block writes its partial of slot s = t K + k to
 * DGPART[dt_cu_moe_dprob_slot(j, s, N K)] (one writer a slot: det), and after all writers
 * one thread a slot adds the tiles' partials in tile order j = 0, 1, ... (dropped slots:
 * 0). fast: every tile atomically adds its partial into DG[s]. */
DT_CU_MOE_HD size_t dt_cu_moe_dprob_slot(int tile, int slot, int NK) { return (size_t)tile * (size_t)NK + (size_t)slot; }

#ifdef __cplusplus
}
#endif

#endif
