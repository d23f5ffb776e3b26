/* The MoE family's CUDA plan (moe_cuda_plan.h): sizes, the workspace layout and the host version
 * of the routing map's chunked counting sort. Plain C, single-threaded. */
#include "ops/moe/moe_cuda_plan.h"

#include <limits.h>
#include <math.h>
#include <string.h>

dt_status dt_cu_moe_dims_make(int N, int C, int F, int E, int K, float capacity_factor, dt_moe_dims *d) {
    memset(d, 0, sizeof *d);
    if (!(capacity_factor >= 0.0f))
        return dt_fail(DT_EINVAL, "MoE: --moe-expert-capacity-factor %g must be >= 0 (0: no dropping)",
                       (double)capacity_factor);
    d->N = N;
    d->C = C;
    d->F = F;
    d->E = E;
    d->K = K;
    d->cap = dt_moe_capacity((double)capacity_factor, N, K, E);
    dt_status st = dt_moe_dims_check(d);
    if (st != DT_OK) return st;
    if (C < DT_CU_MOE_TILE_N || C % DT_CU_MOE_TILE_N)
        return dt_fail(DT_EINVAL, "MoE on CUDA: channels C=%d must be a multiple of %d (the grouped GEMMs' tiles); "
                       "choose a width such as 768", C, DT_CU_MOE_TILE_N);
    if (F < DT_CU_MOE_TILE_N || F % DT_CU_MOE_TILE_N)
        return dt_fail(DT_EINVAL, "MoE on CUDA: expert hidden width F=%d must be a multiple of %d", F, DT_CU_MOE_TILE_N);
    if (E < 1 || E > DT_CU_MOE_MAX_EXPERTS)
        return dt_fail(DT_EINVAL, "MoE on CUDA: --num-experts %d outside 1..%d", E, DT_CU_MOE_MAX_EXPERTS);
    if (K < 1 || K > E || K > DT_CU_MOE_MAX_TOPK)
        return dt_fail(DT_EINVAL, "MoE on CUDA: --moe-router-topk %d outside 1..%d (at most E=%d and %d)", K,
                       E < DT_CU_MOE_MAX_TOPK ? E : DT_CU_MOE_MAX_TOPK, E, DT_CU_MOE_MAX_TOPK);
    /* the largest buffers index (rows, F) in size_t; the routing's slot indices t K + k and
     * the row counts are int */
    if ((long long)N * K > INT_MAX / 2)
        return dt_fail(DT_EINVAL, "MoE on CUDA: N K = %lld assignments exceeds the kernels' int indices; "
                       "use a smaller batch", (long long)N * K);
    return DT_OK;
}

size_t dt_cu_moe_max_rows(const dt_moe_dims *d) {
    size_t all = (size_t)d->N * (size_t)d->K, capped = (size_t)d->E * (size_t)dt_cu_moe_room(d->cap, d->N);
    return capped < all ? capped : all;
}

int dt_cu_moe_max_mtiles(const dt_moe_dims *d) {
    return (int)((dt_cu_moe_max_rows(d) + (size_t)d->E * (DT_CU_MOE_TILE_M - 1)) / DT_CU_MOE_TILE_M);
}

int dt_cu_moe_route_chunks(int N) { return dt_cu_moe_ceil_div(N, DT_CU_MOE_ROUTE_CHUNK); }
int dt_cu_moe_dprob_tiles(int C) { return C / DT_CU_MOE_DPROB_TILE; }
int dt_cu_moe_token_chunks(int N) { return dt_cu_moe_ceil_div(N, DT_CU_MOE_TOKEN_CHUNK); }

static const char *ws_names[DT_CU_MOE_WS_COUNT] = {
    "probs", "tope", "topg", "cnt", "kept", "posb", "meta", "rowof", "src", "xp", "h", "a", "yp", "part", "aux",
    "dyp", "dh", "dxp", "dg", "dgpart", "dz", "wrpart", "outacc",
};
const char *dt_cu_moe_ws_name(int buf) { return buf >= 0 && buf < DT_CU_MOE_WS_COUNT ? ws_names[buf] : "?"; }

void dt_cu_moe_ws_plan(const dt_moe_dims *d, dt_cu_moe_ws_layout *l) {
    size_t N = (size_t)d->N, C = (size_t)d->C, F = (size_t)d->F, E = (size_t)d->E, K = (size_t)d->K;
    size_t R = dt_cu_moe_max_rows(d), nb = (size_t)dt_cu_moe_route_chunks(d->N), nt = (size_t)dt_cu_moe_token_chunks(d->N);
    size_t b[DT_CU_MOE_WS_COUNT];
    b[DT_CU_MOE_WS_PROBS] = 4 * N * E;
    b[DT_CU_MOE_WS_TOPE] = 4 * N * K;
    b[DT_CU_MOE_WS_TOPG] = 4 * N * K;
    b[DT_CU_MOE_WS_CNT] = 4 * nb * K * E;
    b[DT_CU_MOE_WS_KEPT] = 4 * nb * K * E;
    b[DT_CU_MOE_WS_POSB] = 4 * nb * E;
    b[DT_CU_MOE_WS_META] = 4 * (size_t)DT_CU_MOE_META;
    b[DT_CU_MOE_WS_ROWOF] = 4 * N * K;
    b[DT_CU_MOE_WS_SRC] = 4 * R;
    b[DT_CU_MOE_WS_XP] = 2 * R * C;
    b[DT_CU_MOE_WS_H] = 2 * R * F;
    b[DT_CU_MOE_WS_A] = 2 * R * F;
    b[DT_CU_MOE_WS_YP] = 2 * R * C;
    b[DT_CU_MOE_WS_PART] = 4 * nt * E;
    b[DT_CU_MOE_WS_AUX] = 8 * 2;
    b[DT_CU_MOE_WS_DYP] = 2 * R * C;
    b[DT_CU_MOE_WS_DH] = 2 * R * F;
    b[DT_CU_MOE_WS_DXP] = 2 * R * C;
    b[DT_CU_MOE_WS_DG] = 4 * N * K;
    b[DT_CU_MOE_WS_DGPART] = 4 * (size_t)dt_cu_moe_dprob_tiles(d->C) * N * K;
    b[DT_CU_MOE_WS_DZ] = 4 * N * E;
    b[DT_CU_MOE_WS_WRPART] = 4 * nt * E * C;
    b[DT_CU_MOE_WS_OUTACC] = 4 * N * C;
    size_t at = 0;
    for (int i = 0; i < DT_CU_MOE_WS_COUNT; i++) {
        l->off[i] = at;
        l->bytes[i] = b[i];
        at += (b[i] + 255) / 256 * 256;
    }
    l->total = at;
}

int dt_cu_moe_route_host(const int *tope, const dt_moe_dims *d, int *cnt, int *kept, int *posb, int *meta,
                      int *rowof, int *src) {
    int N = d->N, E = d->E, K = d->K, nb = dt_cu_moe_route_chunks(N);
    memset(meta, 0, sizeof(int) * DT_CU_MOE_META);
    for (int t = 0; t < N; t++)
        for (int k = 0; k < K; k++) {
            int e = tope[t * K + k];
            if (e < 0 || e >= E) return -1;
            for (int j = 0; j < k; j++)
                if (tope[t * K + j] == e) return -1;
        }
    /* 1. count per chunk */
    memset(cnt, 0, sizeof(int) * (size_t)nb * K * E);
    for (int t = 0; t < N; t++)
        for (int k = 0; k < K; k++) cnt[((t / DT_CU_MOE_ROUTE_CHUNK) * K + k) * E + tope[t * K + k]]++;
    /* 2. scan: ranks in (k, t) order, kept counts, offsets, tile starts, chunk positions */
    int *total = meta + DT_CU_MOE_META_TOTAL, *R = meta + DT_CU_MOE_META_KEPT, *offs = meta + DT_CU_MOE_META_OFFS,
        *tiles = meta + DT_CU_MOE_META_TILES;
    for (int e = 0; e < E; e++) {
        int base = 0; /* rank of the next (k, t) assignment to e */
        for (int k = 0; k < K; k++)
            for (int b = 0; b < nb; b++) {
                int c = cnt[(b * K + k) * E + e], room = dt_cu_moe_room(d->cap, d->N) - base;
                int kc = room <= 0 ? 0 : room < c ? room : c;
                kept[(b * K + k) * E + e] = kc;
                R[e] += kc;
                base += c;
            }
        total[e] = base;
        meta[DT_CU_MOE_META_DROPPED] += base - R[e];
    }
    offs[0] = 0;
    tiles[0] = 0;
    for (int e = 0; e < E; e++) {
        offs[e + 1] = offs[e] + R[e];
        tiles[e + 1] = tiles[e] + dt_cu_moe_ceil_div(R[e], DT_CU_MOE_TILE_M);
    }
    for (int e = 0; e < E; e++) {
        int at = offs[e];
        for (int b = 0; b < nb; b++) {
            posb[b * E + e] = at;
            for (int k = 0; k < K; k++) at += kept[(b * K + k) * E + e];
        }
    }
    /* 3. place: chunk by chunk, ranks within (k, e) and positions within e in token order */
    for (int b = 0; b < nb; b++) {
        int t0 = b * DT_CU_MOE_ROUTE_CHUNK, t1 = t0 + DT_CU_MOE_ROUTE_CHUNK < N ? t0 + DT_CU_MOE_ROUTE_CHUNK : N;
        int seen[DT_CU_MOE_MAX_TOPK][DT_CU_MOE_MAX_EXPERTS], fill[DT_CU_MOE_MAX_EXPERTS];
        memset(seen, 0, sizeof seen);
        memset(fill, 0, sizeof fill);
        for (int t = t0; t < t1; t++)
            for (int k = 0; k < K; k++) {
                int e = tope[t * K + k], j = seen[k][e]++;
                if (j < kept[(b * K + k) * E + e]) {
                    int row = posb[b * E + e] + fill[e]++;
                    rowof[t * K + k] = row;
                    src[row] = t * K + k;
                } else {
                    rowof[t * K + k] = -1;
                }
            }
    }
    return offs[E];
}
