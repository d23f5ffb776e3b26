/* The MoE family's CUDA plan (src/ops/moe/moe_cuda_plan.c, moe_cuda_plan.h), on the CPU (CI): the
 * chunked counting sort of the routing map against its definition (capacity ranks in (k, t)
 * order, dispatch sorted by (expert, token, k)), with skewed routings, empty experts, one
 * expert taking every token, capacity on and off; the grouped GEMMs' tile schedule; the
 * workspace layout; the sizes' validation. */
#include "ops/moe/moe_cuda_plan.h"

#include "dt_test.h"

#include <stdint.h>

static uint32_t hash32(uint32_t x) {
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

/* Routing kinds: uniform, skewed (share_pct of the tokens pick expert 0 first), or every
 * token's choice k is expert k (one expert takes every token at k = 0; the rest empty). */
enum { R_UNIFORM, R_SKEWED, R_ALL_ONE };
static void make_routing(int *tope, int N, int E, int K, int kind, int share_pct, uint32_t seed) {
    for (int t = 0; t < N; t++) {
        int used[DT_CU_MOE_MAX_EXPERTS] = {0};
        for (int k = 0; k < K; k++) {
            int e;
            if (kind == R_ALL_ONE) e = k;
            else if (kind == R_SKEWED && k == 0 && (int)(hash32(seed ^ (uint32_t)t) % 100u) < share_pct) e = 0;
            else e = (int)(hash32(seed * 31u + (uint32_t)(t * K + k)) % (uint32_t)E);
            while (used[e]) e = (e + 1) % E;
            used[e] = 1;
            tope[t * K + k] = e;
        }
    }
}

/* The definition, directly: ranks by (k, t) per expert, kept if rank < cap, rows in
 * (expert, token, k) order. Returns the rows. */
static int route_naive(const int *tope, const dt_moe_dims *d, int *rowof, int *src, int *R, int *total) {
    int N = d->N, E = d->E, K = d->K, rows = 0, cap = dt_cu_moe_room(d->cap, d->N);
    static int keep[1 << 20];
    for (int e = 0; e < E; e++) {
        int rank = 0;
        R[e] = 0;
        for (int k = 0; k < K; k++)
            for (int t = 0; t < N; t++)
                if (tope[t * K + k] == e) {
                    keep[t * K + k] = rank < cap;
                    R[e] += rank < cap;
                    rank++;
                }
        total[e] = rank;
    }
    for (int e = 0; e < E; e++)
        for (int t = 0; t < N; t++)
            for (int k = 0; k < K; k++)
                if (tope[t * K + k] == e) {
                    if (keep[t * K + k]) {
                        rowof[t * K + k] = rows;
                        src[rows++] = t * K + k;
                    } else {
                        rowof[t * K + k] = -1;
                    }
                }
    return rows;
}

static void check_route(int N, int E, int K, float f, int kind, int share, const char *what) {
    dt_moe_dims d;
    CHECK_OK(dt_cu_moe_dims_make(N, 768, 3072, E, K, f, &d));
    int nb = dt_cu_moe_route_chunks(N);
    size_t maxr = dt_cu_moe_max_rows(&d);
    int *tope = malloc(sizeof(int) * N * K), *cnt = malloc(sizeof(int) * nb * K * E),
        *kept = malloc(sizeof(int) * nb * K * E), *posb = malloc(sizeof(int) * nb * E),
        *rowof = malloc(sizeof(int) * N * K), *src = malloc(sizeof(int) * maxr),
        *rowof2 = malloc(sizeof(int) * N * K), *src2 = malloc(sizeof(int) * N * K);
    int meta[DT_CU_MOE_META], R[DT_CU_MOE_MAX_EXPERTS], total[DT_CU_MOE_MAX_EXPERTS];
    make_routing(tope, N, E, K, kind, share, (uint32_t)(N * 7 + E));
    int rows = dt_cu_moe_route_host(tope, &d, cnt, kept, posb, meta, rowof, src);
    int rows2 = route_naive(tope, &d, rowof2, src2, R, total);
    CHECKF(rows == rows2, "%s: %d rows, the definition %d", what, rows, rows2);
    CHECKF((size_t)rows <= maxr, "%s: %d rows > max_rows %zu", what, rows, maxr);
    int bad = 0, dropped = 0;
    for (int i = 0; i < N * K; i++) bad += rowof[i] != rowof2[i];
    for (int i = 0; i < rows && i < rows2; i++) bad += src[i] != src2[i];
    CHECKF(bad == 0, "%s: %d rows differ from the definition", what, bad);
    int tiles = 0;
    for (int e = 0; e < E; e++) {
        bad += meta[DT_CU_MOE_META_TOTAL + e] != total[e] || meta[DT_CU_MOE_META_KEPT + e] != R[e];
        bad += meta[DT_CU_MOE_META_OFFS + e + 1] - meta[DT_CU_MOE_META_OFFS + e] != R[e];
        bad += meta[DT_CU_MOE_META_TILES + e] != tiles;
        tiles += dt_cu_moe_ceil_div(R[e], DT_CU_MOE_TILE_M);
        dropped += total[e] - R[e];
    }
    CHECKF(bad == 0 && meta[DT_CU_MOE_META_TILES + E] == tiles && meta[DT_CU_MOE_META_OFFS + E] == rows,
           "%s: expert totals, offsets or tile starts wrong (%d)", what, bad);
    CHECKF(meta[DT_CU_MOE_META_DROPPED] == dropped, "%s: dropped %d, want %d", what, meta[DT_CU_MOE_META_DROPPED], dropped);
    CHECKF(tiles <= dt_cu_moe_max_mtiles(&d), "%s: %d tiles > the launch's %d", what, tiles, dt_cu_moe_max_mtiles(&d));
    if (f == 0.0f) CHECKF(dropped == 0, "%s: dropped %d without capacity", what, dropped);
    /* every tile maps back to its group, its rows inside the group */
    for (int x = 0; x < dt_cu_moe_max_mtiles(&d); x++) {
        int e = dt_cu_moe_tile_group(meta + DT_CU_MOE_META_TILES, E, x);
        if (x >= tiles) {
            bad += e != -1;
            continue;
        }
        int row0 = meta[DT_CU_MOE_META_OFFS + e] + (x - meta[DT_CU_MOE_META_TILES + e]) * DT_CU_MOE_TILE_M;
        bad += e < 0 || R[e] == 0 || row0 >= meta[DT_CU_MOE_META_OFFS + e + 1];
    }
    CHECKF(bad == 0, "%s: tile schedule wrong (%d)", what, bad);
    fprintf(stderr, "  %s: N=%d E=%d K=%d f=%g cap=%d rows=%d dropped=%d tiles=%d\n", what, N, E, K, (double)f,
            d.cap, rows, dropped, tiles);
    free(tope), free(cnt), free(kept), free(posb), free(rowof), free(src), free(rowof2), free(src2);
}

static void test_routing(void) {
    check_route(16384, 8, 2, 0.0f, R_UNIFORM, 0, "uniform");
    check_route(16384, 8, 2, 0.0f, R_SKEWED, 60, "60% to expert 0");
    check_route(16384, 8, 2, 1.0f, R_SKEWED, 60, "60% to expert 0, capacity 1.0 (drops)");
    check_route(16384, 8, 2, 1.25f, R_SKEWED, 90, "90% to expert 0, capacity 1.25");
    check_route(4000, 8, 1, 0.0f, R_ALL_ONE, 0, "K=1, every token to expert 0, 7 empty groups, N not a chunk multiple");
    check_route(4000, 8, 2, 0.0f, R_ALL_ONE, 0, "K=2, every token to experts 0 and 1");
    check_route(4000, 8, 2, 0.5f, R_ALL_ONE, 0, "K=2, all to 0 and 1, capacity 0.5");
    check_route(1000, 64, 8, 0.0f, R_SKEWED, 50, "E=64 K=8");
    check_route(1, 4, 4, 0.0f, R_UNIFORM, 0, "one token, K=E");
    check_route(300, 8, 4, 0.01f, R_UNIFORM, 0, "capacity 1 row an expert");
}

static void test_bad_routing(void) {
    dt_moe_dims d;
    CHECK_OK(dt_cu_moe_dims_make(4, 128, 512, 4, 2, 0.0f, &d));
    int tope[8] = {0, 1, 2, 3, 1, 1, 0, 2}, cnt[16], kept[16], posb[4], meta[DT_CU_MOE_META], rowof[8], src[8];
    CHECK(dt_cu_moe_route_host(tope, &d, cnt, kept, posb, meta, rowof, src) == -1); /* token 2 names 1 twice */
    tope[5] = 4;
    CHECK(dt_cu_moe_route_host(tope, &d, cnt, kept, posb, meta, rowof, src) == -1); /* out of range */
}

static void test_tile_group(void) {
    /* groups of 0, 300, 0, 0, 128, 1 rows: 3, 1, 1 tiles */
    int tiles[7] = {0, 0, 3, 3, 3, 4, 5};
    int want[6] = {1, 1, 1, 4, 5, -1};
    for (int x = 0; x < 6; x++) CHECKF(dt_cu_moe_tile_group(tiles, 6, x) == want[x], "tile %d", x);
    CHECK(dt_cu_moe_tile_group(tiles, 6, -1) == -1);
    int none[3] = {0, 0, 0};
    CHECK(dt_cu_moe_tile_group(none, 2, 0) == -1); /* every group empty: no tile */
    /* the fast weight gradient's row parts cover each group once */
    int bad = 0;
    for (int R = 0; R < 300; R++) {
        int prev = 0;
        for (int p = 0; p < DT_CU_MOE_WGRAD_SPLITS; p++) {
            int a = dt_cu_moe_split_rows(R, DT_CU_MOE_WGRAD_SPLITS, p), b = dt_cu_moe_split_rows(R, DT_CU_MOE_WGRAD_SPLITS, p + 1);
            bad += a != prev || b < a;
            prev = b;
        }
        bad += prev != R;
    }
    CHECKF(bad == 0, "%d row-part violations", bad);
    /* dprob slots: distinct for distinct (tile, slot) */
    CHECK(dt_cu_moe_dprob_slot(0, 5, 100) == 5 && dt_cu_moe_dprob_slot(2, 5, 100) == 205);
}

static void test_dims(void) {
    dt_moe_dims d;
    CHECK_OK(dt_cu_moe_dims_make(16384, 768, 3072, 8, 2, 0.0f, &d));
    CHECK(d.cap == 0 && dt_cu_moe_room(d.cap, d.N) == 16384 && dt_cu_moe_max_rows(&d) == 32768);
    CHECK_OK(dt_cu_moe_dims_make(16384, 768, 3072, 8, 2, 1.0f, &d));
    CHECK(d.cap == 4096 && dt_cu_moe_max_rows(&d) == 32768); /* ceil(1.0 * 16384 * 2 / 8) */
    CHECK_OK(dt_cu_moe_dims_make(16384, 768, 3072, 8, 2, 0.5f, &d));
    CHECK(d.cap == 2048 && dt_cu_moe_max_rows(&d) == 16384);
    CHECK_OK(dt_cu_moe_dims_make(10, 128, 512, 3, 2, 1.0f, &d));
    CHECK(d.cap == 7 && dt_cu_moe_max_rows(&d) == 20);  /* ceil(20 / 3), 3 experts of 7 */
    CHECK_OK(dt_cu_moe_dims_make(10, 128, 512, 3, 2, 100.0f, &d));
    CHECK(dt_cu_moe_room(d.cap, d.N) == 10);            /* at most N */
    CHECK(dt_cu_moe_dims_make(16, 100, 512, 4, 2, 0, &d) == DT_EINVAL);
    CHECK(strstr(dt_errmsg(), "C=100") != NULL);
    CHECK(dt_cu_moe_dims_make(16, 128, 500, 4, 2, 0, &d) == DT_EINVAL);
    CHECK(dt_cu_moe_dims_make(16, 128, 512, 0, 1, 0, &d) == DT_EINVAL);
    CHECK(dt_cu_moe_dims_make(16, 128, 512, 65, 2, 0, &d) == DT_EINVAL);
    CHECK(dt_cu_moe_dims_make(16, 128, 512, 4, 5, 0, &d) == DT_EINVAL);
    CHECK(strstr(dt_errmsg(), "top-5") != NULL);
    CHECK(dt_cu_moe_dims_make(16, 128, 512, 4, 0, 0, &d) == DT_EINVAL);
    CHECK(dt_cu_moe_dims_make(16, 128, 512, 4, 2, -1.0f, &d) == DT_EINVAL);
    CHECK(dt_cu_moe_dims_make(0, 128, 512, 4, 2, 0, &d) == DT_EINVAL);
    CHECK(dt_cu_moe_dims_make(1 << 29, 128, 512, 8, 8, 0, &d) == DT_EINVAL);
}

static void test_ws(void) {
    dt_moe_dims d;
    CHECK_OK(dt_cu_moe_dims_make(16384, 768, 3072, 8, 2, 0.0f, &d));
    dt_cu_moe_ws_layout l;
    dt_cu_moe_ws_plan(&d, &l);
    int bad = 0;
    for (int i = 0; i < DT_CU_MOE_WS_COUNT; i++) {
        bad += l.off[i] % 256 != 0 || l.bytes[i] == 0;
        if (i + 1 < DT_CU_MOE_WS_COUNT) bad += l.off[i] + l.bytes[i] > l.off[i + 1];
        bad += strcmp(dt_cu_moe_ws_name(i), "?") == 0;
    }
    bad += l.off[DT_CU_MOE_WS_COUNT - 1] + l.bytes[DT_CU_MOE_WS_COUNT - 1] > l.total;
    CHECKF(bad == 0, "workspace layout: %d violations", bad);
    CHECK(l.bytes[DT_CU_MOE_WS_H] == (size_t)32768 * 3072 * 2);
    CHECK(l.bytes[DT_CU_MOE_WS_DGPART] == (size_t)6 * 16384 * 2 * 4);
    CHECK(strcmp(dt_cu_moe_ws_name(DT_CU_MOE_WS_COUNT), "?") == 0);
}

int main(void) {
    RUN(test_routing);
    RUN(test_bad_routing);
    RUN(test_tile_group);
    RUN(test_dims);
    RUN(test_ws);
    return dt_test_report();
}
