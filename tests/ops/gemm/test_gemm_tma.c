/* The plan of the TMA-fed warpgroup-MMA GEMM (src/ops/gemm_tma_plan.h), which its kernel and
 * launcher (gemm_wgmma_cuda.cu) build on: checked on the CPU (CI has no GPU) against the
 * hardware's limits written out from the PTX ISA and the driver API's tensor-map rules (a
 * box at most 256 elements a side, its inner side at most 128 bytes in the 128-byte swizzle,
 * row strides multiples of 16 bytes, swizzle atoms 1024-byte aligned, 227 KB of shared
 * memory a block, staging included) and against the model's shapes: the persistent order covers every tile
 * once (the dynamic claims in any interleaving, launch after launch on one counter, and the
 * static order), the tile queue's barrier protocol hands every consumer its own tile, and
 * each stage's TMA bytes equal what its full barrier expects. */
#include "ops/gemm/gemm_tma_plan.h"

#include "dt_test.h"

#include <stdlib.h>
#include <string.h>

static void test_ring(void) {
    CHECK(dt_gt_stage_bytes(128, 256) == 16384 + 32768 && dt_gt_stages(DT_GT_COOP256) == 4);
    CHECK(dt_gt_stage_bytes(128, 128) == 16384 + 16384 && dt_gt_stages(DT_GT_COOP128) == 6);
    CHECK(dt_gt_stage_bytes(64, 256) == 8192 + 32768 && dt_gt_stages(DT_GT_PP64) == 4);
    /* the 128 x 128 ping-pong: four staging buffers a warpgroup (dGELU's four aux chunks of
     * a tile), five stages */
    CHECK(DT_GT_NBUF(DT_GT_PP128) == 4 && dt_gt_stages(DT_GT_PP128) == 5);
    CHECK(DT_GT_NBUF(DT_GT_COOP256) == 2 && DT_GT_NBUF(DT_GT_COOP128) == 2 && DT_GT_NBUF(DT_GT_PP64) == 2);
    for (int sch = 1; sch < DT_GT_SCHEDULES; sch++) {
        const int bm = DT_GT_BM(sch), bn = DT_GT_BN(sch);
        /* every stage, and its B tile after the A tile, starts on a swizzle atom */
        CHECK(dt_gt_stage_bytes(bm, bn) % 1024 == 0 && (bm * 128) % 1024 == 0);
        CHECK(dt_gt_smem_bytes(sch) <= DT_GT_SMEM_MAX);
        /* ring + staging + barriers (a full and an empty one a stage, one a consumer warp and
         * staging buffer, one a consumer warpgroup) */
        CHECK(DT_GT_EPI_BYTES(sch) == 2 * DT_GT_NBUF(sch) * 8192 && 8 * DT_GT_NBUF(sch) <= DT_GT_EBARS);
        CHECK(dt_gt_smem_bytes(sch) >= dt_gt_stages(sch) * dt_gt_stage_bytes(bm, bn) + DT_GT_EPI_BYTES(sch) +
                                           16 * dt_gt_stages(sch) + 8 * 8 * DT_GT_NBUF(sch) + 2 * 8 +
                                           (2 * 8 + 4) * DT_GT_TQ + 1023);
        CHECK(dt_gt_stages(sch) >= 4); /* enough stages in flight to cover a load's latency */
        /* the GELU epilogue's two stores a chunk go to different buffers, and a tile's stores
         * end on the last buffer, so the fixed turn (chunk c: buffer c % NBUF, or 2 c % NBUF
         * and the next with GELU) goes on across tiles: a tile's chunks are a multiple of
         * NBUF */
        CHECK(DT_GT_NBUF(sch) >= 2 && DT_GT_NBUF(sch) % 2 == 0);
        CHECK((DT_GT_WM(sch) / 64) * (bn / 64) % DT_GT_NBUF(sch) == 0);
        /* a warp's box starts on a swizzle atom (the 128-byte swizzle repeats every 8 rows) */
        CHECK((DT_GT_EPI_ROWS * 128) % 1024 == 0 && DT_GT_EPI_ROWS * 4 == 64);
    }
}

/* The tensor maps of the model's shapes (B 16 T 1024, C 768: M = 16384), as the driver takes
 * them, and the bytes a stage's loads bring against the stage's size. */
static void test_maps(void) {
    dt_gt_map a = dt_gt_map_a(16384, 768, 768, 128), a64 = dt_gt_map_a(16384, 768, 768, 64);
    CHECK(a.dim[0] == 768 && a.dim[1] == 16384 && a.stride == 1536);
    CHECK(a.box[0] == 64 && a.box[1] == 128 && a.box_bytes == 16384);
    CHECK(a64.box[0] == 64 && a64.box[1] == 64 && a64.box_bytes == 8192);
    /* C and aux of the fc layer: a box is a consumer warp's 16 rows of a 64 x 64 chunk; four
     * warps a buffer, two (four) buffers a warpgroup, two warpgroups: the staging bytes */
    dt_gt_map c = dt_gt_map_c(16384, 3072, 3072);
    CHECK(c.dim[0] == 3072 && c.dim[1] == 16384 && c.stride == 6144);
    CHECK(c.box[0] == 64 && c.box[1] == 16 && c.box_bytes == 2048);
    CHECK(4 * 2 * 2 * c.box_bytes == DT_GT_EPI_BYTES(DT_GT_COOP256));
    CHECK(4 * 2 * 4 * c.box_bytes == DT_GT_EPI_BYTES(DT_GT_PP128));
    /* fc forward, NT: W (3072, 768) */
    dt_gt_map b = dt_gt_map_b(1, 3072, 768, 768, 256);
    CHECK(b.dim[0] == 768 && b.dim[1] == 3072 && b.stride == 1536);
    CHECK(b.box[0] == 64 && b.box[1] == 256 && b.box_bytes == 32768);
    CHECK(a.box_bytes + (uint32_t)dt_gt_b_loads(1, 256) * b.box_bytes == (uint32_t)dt_gt_stage_bytes(128, 256));
    /* fcproj input gradient, NN: W (768, 3072) read as (K 768, N 3072) */
    dt_gt_map n = dt_gt_map_b(0, 3072, 768, 3072, 256);
    CHECK(n.dim[0] == 3072 && n.dim[1] == 768 && n.stride == 6144);
    CHECK(n.box[0] == 64 && n.box[1] == 64 && n.box_bytes == 8192); /* the MN-major LBO */
    CHECK(dt_gt_b_loads(0, 256) == 4 && dt_gt_b_loads(0, 128) == 2 && dt_gt_b_loads(1, 128) == 1);
    CHECK(a.box_bytes + (uint32_t)dt_gt_b_loads(0, 256) * n.box_bytes == (uint32_t)dt_gt_stage_bytes(128, 256));
    dt_gt_map n128 = dt_gt_map_b(0, 384, 64, 384, 128), t128 = dt_gt_map_b(1, 384, 64, 64, 128);
    CHECK(a.box_bytes + 2u * n128.box_bytes == (uint32_t)dt_gt_stage_bytes(128, 128));
    CHECK(a.box_bytes + t128.box_bytes == (uint32_t)dt_gt_stage_bytes(128, 128));
    /* ping-pong: a 64-row A tile with the same B tiles */
    CHECK(a64.box_bytes + b.box_bytes == (uint32_t)dt_gt_stage_bytes(64, 256));
    CHECK(a64.box_bytes + 4u * n.box_bytes == (uint32_t)dt_gt_stage_bytes(64, 256));
    /* the hardware's limits on every map above */
    const dt_gt_map all[7] = {a, b, n, n128, t128, c, a64};
    for (int i = 0; i < 7; i++) {
        CHECK(all[i].box[0] * 2 == 128);                     /* inner box = the swizzle span */
        CHECK(all[i].box[1] >= 1 && all[i].box[1] <= 256);   /* box sides */
        CHECK(all[i].stride % 16 == 0 && all[i].stride >= all[i].dim[0] * 2);
        CHECK(all[i].box_bytes == all[i].box[0] * all[i].box[1] * 2);
    }
}

/* A small deterministic generator for the interleavings below. */
static uint32_t lcg(uint32_t *x) {
    *x = *x * 1664525u + 1013904223u;
    return *x >> 8;
}

/* One launch's claims (gemm_tma_plan.h, dynamic tiles) in an order drawn from *rng: the
 * grid's producers claim one at a time, a producer picked at random each time (so some
 * start after others took many tiles, as behind another stream's kernels), each stopping at
 * its first claim past the tiles, the last claim putting the counter back. Block b's local
 * tiles go to own[b * tiles ...], their count to n_own[b]; returns 0 when a check failed. */
static int simulate_claims(int *ctr, int tiles, int grid, uint32_t *rng, int *own, int *n_own) {
    int ok = 1, claims = 0, resets = 0, left = grid;
    int *done = calloc((size_t)grid, sizeof(int));
    if (!done) return 0;
    for (int b = 0; b < grid; b++) n_own[b] = 0;
    while (left > 0 && claims <= tiles + grid) { /* a broken reset could hand out tiles for ever */
        int b = (int)(lcg(rng) % (uint32_t)grid);
        while (done[b]) b = (b + 1) % grid;
        const int v = (*ctr)++; /* atomicAdd */
        claims++;
        ok &= resets == 0; /* nothing claims after the reset */
        if (dt_gt_claim_last(v, tiles, grid)) {
            *ctr = 0;
            resets++;
        }
        const int tile = dt_gt_claim_tile(v, tiles);
        if (tile < 0) {
            done[b] = 1;
            left--;
        } else if (n_own[b] < tiles) {
            own[(size_t)b * (size_t)tiles + (size_t)n_own[b]++] = tile;
        } else {
            ok = 0;
        }
    }
    free(done);
    return ok && claims == tiles + grid && resets == 1 && *ctr == 0;
}

/* The consumers' walk of a block's local tiles (gemm_wgmma_cuda.cu): cooperative, one walk
 * over all; ping-pong, warpgroup w takes the local tiles w, w + 2, ... up to the first -1 of
 * the producer's posts (the tiles, then dt_gt_tq_ends(pp) times -1). Marks seen[] and
 * returns 0 when a walk runs past the posts or a tile comes twice. */
static int walk_block(const int *own, int n, int pp, int tiles, unsigned char *seen, int *taken) {
    const int posts = n + dt_gt_tq_ends(pp);
    int ok = 1;
    for (int w = 0; w < (pp ? 2 : 1); w++)
        for (int j = w;; j += pp ? 2 : 1) {
            if (j >= posts) return 0; /* would wait for ever */
            const int tile = j < n ? own[j] : -1;
            if (tile < 0) break;
            ok &= tile < tiles && !seen[tile];
            if (tile < tiles) seen[tile] = 1;
            (*taken)++;
        }
    return ok;
}

/* Each tile is taken exactly once by a persistent grid of one block an SM (here 132, an
 * H200, and a few blocks), in every schedule, by dynamic claims in several interleavings,
 * twice on the same counter (a graph replay: the first launch left it at zero), and in the
 * static order; its corner inside C and on the tile grid, and the tiles claimed first share
 * A's row band (consecutive tiles walk N first). */
static void test_order(void) {
    static const int shapes[][3] = {{16384, 3072, DT_GT_COOP256}, {16384, 768, DT_GT_COOP256},
                                    {16384, 2304, DT_GT_COOP256}, {256, 384, DT_GT_COOP128},
                                    {16384, 3072, DT_GT_PP64},    {384, 512, DT_GT_PP64},
                                    {16384, 3072, DT_GT_PP128},   {16384, 768, DT_GT_PP128},
                                    {16384, 2304, DT_GT_PP128},   {128, 128, DT_GT_PP128},
                                    {384, 384, DT_GT_PP128},      {16384, 50304, DT_GT_PP128}};
    static const int sms[] = {132, 7, 1};
    uint32_t rng = 12345u;
    for (int sh = 0; sh < (int)(sizeof shapes / sizeof shapes[0]); sh++)
        for (int g = 0; g < 3; g++) {
            const int M = shapes[sh][0], N = shapes[sh][1], sch = shapes[sh][2], pp = DT_GT_PP(sch);
            const int bm = DT_GT_BM(sch), bn = DT_GT_BN(sch);
            const int tiles = dt_gt_tiles(M, N, bm, bn), grid = dt_gt_grid(tiles, sms[g]);
            CHECK(tiles == (M / bm) * (N / bn));
            CHECK(grid == (tiles < sms[g] ? tiles : sms[g]));
            int *own = malloc((size_t)grid * (size_t)tiles * sizeof(int)), *n_own = malloc((size_t)grid * sizeof(int));
            unsigned char *seen = malloc((size_t)tiles);
            if (!own || !n_own || !seen) {
                CHECK(0);
                free(own), free(n_own), free(seen);
                return;
            }
            int ctr = 0;
            /* runs 0..2: dynamic, on one counter, launch after launch; 3: the static order */
            for (int run = 0; run < 4; run++) {
                int ok = 1, taken = 0;
                if (run < 3) {
                    ok &= simulate_claims(&ctr, tiles, grid, &rng, own, n_own);
                } else {
                    for (int b = 0; b < grid; b++) {
                        n_own[b] = 0;
                        for (int j = 0; dt_gt_static_tile(b, j, grid, tiles) >= 0; j++)
                            own[(size_t)b * (size_t)tiles + (size_t)n_own[b]++] = dt_gt_static_tile(b, j, grid, tiles);
                        ok &= dt_gt_static_tile(b, n_own[b], grid, tiles) == -1;
                    }
                }
                memset(seen, 0, (size_t)tiles);
                for (int b = 0; b < grid; b++) {
                    ok &= walk_block(own + (size_t)b * (size_t)tiles, n_own[b], pp, tiles, seen, &taken);
                    for (int j = 0; j < n_own[b]; j++) {
                        int m0 = -1, n0 = -1;
                        dt_gt_tile(own[(size_t)b * (size_t)tiles + (size_t)j], N, bm, bn, &m0, &n0);
                        ok &= m0 >= 0 && m0 + bm <= M && m0 % bm == 0 && n0 >= 0 && n0 + bn <= N && n0 % bn == 0;
                    }
                }
                CHECKF(ok && taken == tiles, "shape %dx%d tile %dx%d grid %d run %d: every tile once", M, N, bm, bn,
                       grid, run);
            }
            free(own);
            free(n_own);
            free(seen);
        }
    /* no claim is a tile once past them, nor a negative one */
    CHECK(dt_gt_claim_tile(0, 5) == 0 && dt_gt_claim_tile(4, 5) == 4 && dt_gt_claim_tile(5, 5) == -1);
    CHECK(dt_gt_claim_tile(-1, 5) == -1);
    CHECK(dt_gt_claim_last(5 + 3 - 1, 5, 3) && !dt_gt_claim_last(5, 5, 3));
    CHECK(dt_gt_static_tile(3, 2, 132, 1536) == 3 + 264 && dt_gt_static_tile(131, 11, 132, 1536) == -1);
    int m0, n0;
    dt_gt_tile(11, 3072, 128, 256, &m0, &n0);
    CHECK(m0 == 0 && n0 == 11 * 256);
    dt_gt_tile(12, 3072, 128, 256, &m0, &n0);
    CHECK(m0 == 128 && n0 == 0);
    dt_gt_tile(12, 3072, 64, 256, &m0, &n0);
    CHECK(m0 == 64 && n0 == 0);
    CHECK(dt_gt_grid(1536, 132) == 132 && dt_gt_grid(6, 132) == 6);
}

/* The tile queue's mbarrier protocol (gemm_wgmma_cuda.cu), run on a model of the hardware's
 * parity waits: a barrier counts completed phases c, and a wait for parity p passes when
 * c % 2 != p (a fresh barrier's phase "-1" counts as completed). The producer posts local
 * tile j (and the ends) in slot j % DT_GT_TQ after waiting on the slot's empty barrier for
 * parity (j / TQ) % 2 ^ 1; each consumer warp (8 cooperative, 4 a warpgroup in ping-pong)
 * waits on the full barrier for parity (j / TQ) % 2, reads, and arrives on the empty one.
 * Under random interleavings every read must see post j itself (a wait passing on an older
 * or newer phase would read another tile), and every actor must finish (no deadlock). */
static void test_tile_queue(void) {
    uint32_t rng = 777u;
    for (int pp = 0; pp < 2; pp++)
        for (int n = 0; n < 9; n++)
            for (int trial = 0; trial < 40; trial++) {
                enum { WARPS = 8 };
                const int posts = n + dt_gt_tq_ends(pp), readers = pp ? 4 : 8;
                int full_c[DT_GT_TQ] = {0}, empty_c[DT_GT_TQ] = {0}, pending[DT_GT_TQ] = {0};
                int val[DT_GT_TQ], which[DT_GT_TQ];
                int pj = 0, wj[WARPS], wdone[WARPS], ok = 1, steps = 0;
                for (int w = 0; w < WARPS; w++) {
                    wj[w] = pp ? w / 4 : 0; /* warps 0-3: warpgroup 0, 4-7: warpgroup 1 */
                    wdone[w] = 0;
                }
                for (;;) {
                    int runnable[WARPS + 1], nr = 0;
                    if (pj < posts && (empty_c[pj % DT_GT_TQ] & 1) != (((pj / DT_GT_TQ) & 1) ^ 1)) runnable[nr++] = -1;
                    for (int w = 0; w < WARPS; w++)
                        if (!wdone[w] && (full_c[wj[w] % DT_GT_TQ] & 1) != ((wj[w] / DT_GT_TQ) & 1)) runnable[nr++] = w;
                    if (nr == 0) break;
                    const int a = runnable[lcg(&rng) % (uint32_t)nr];
                    steps++;
                    if (a < 0) { /* the producer posts entry pj: tile 100 + pj, or -1 past the tiles */
                        val[pj % DT_GT_TQ] = pj < n ? 100 + pj : -1;
                        which[pj % DT_GT_TQ] = pj;
                        full_c[pj % DT_GT_TQ]++;
                        pj++;
                    } else {
                        const int j = wj[a], slot = j % DT_GT_TQ;
                        ok &= which[slot] == j && val[slot] == (j < n ? 100 + j : -1);
                        if (++pending[slot] == readers) {
                            pending[slot] = 0;
                            empty_c[slot]++;
                        }
                        if (val[slot] < 0) wdone[a] = 1;
                        else wj[a] += pp ? 2 : 1;
                    }
                }
                int all = pj == posts;
                for (int w = 0; w < WARPS; w++) all &= wdone[w];
                CHECKF(ok && all, "tile queue, %s, %d tiles, trial %d: reads %s, finished %s (%d steps)",
                       pp ? "ping-pong" : "cooperative", n, trial, ok ? "right" : "WRONG", all ? "yes" : "NO", steps);
            }
}

/* Each schedule's geometry and the rule: the 128 x 128 ping-pong for every N (a multiple of
 * 128) at K < 2048 (the model's K = 768 GEMMs: qkv, attproj, fc forward, the fcproj input
 * gradient, attproj's), and where N is no multiple of 256; 128 x 256 cooperative for
 * K >= 2048 where N allows (fcproj forward, the fc and qkv input gradients); a forced
 * schedule is taken where its tile width divides N, refused (-1) where it does not. */
static void test_schedule(void) {
    CHECK(DT_GT_BM(DT_GT_COOP256) == 128 && DT_GT_BN(DT_GT_COOP256) == 256 && !DT_GT_PP(DT_GT_COOP256) &&
          DT_GT_WM(DT_GT_COOP256) == 64);
    CHECK(DT_GT_BM(DT_GT_COOP128) == 128 && DT_GT_BN(DT_GT_COOP128) == 128 && !DT_GT_PP(DT_GT_COOP128) &&
          DT_GT_WM(DT_GT_COOP128) == 64);
    CHECK(DT_GT_BM(DT_GT_PP64) == 64 && DT_GT_BN(DT_GT_PP64) == 256 && DT_GT_PP(DT_GT_PP64) &&
          DT_GT_WM(DT_GT_PP64) == 64);
    CHECK(DT_GT_BM(DT_GT_PP128) == 128 && DT_GT_BN(DT_GT_PP128) == 128 && DT_GT_PP(DT_GT_PP128) &&
          DT_GT_WM(DT_GT_PP128) == 128);
    /* a consumer warpgroup's accumulators: WM x BN fp32 over 128 threads, at most 128 each
     * (the 232 registers a consumer thread has) */
    for (int sch = 1; sch < DT_GT_SCHEDULES; sch++) CHECK(DT_GT_WM(sch) * DT_GT_BN(sch) / 128 <= 128);
    /* the model's activation GEMMs (C 768): N, K, the rule's schedule */
    static const int model[8][3] = {{2304, 768, DT_GT_PP128},  {768, 768, DT_GT_PP128},
                                    {3072, 768, DT_GT_PP128},  {768, 3072, DT_GT_COOP256},
                                    {3072, 768, DT_GT_PP128},  {768, 3072, DT_GT_COOP256},
                                    {768, 768, DT_GT_PP128},   {768, 2304, DT_GT_COOP256}};
    for (int i = 0; i < 8; i++) CHECK(dt_gt_schedule(model[i][0], model[i][1], DT_GT_RULE) == model[i][2]);
    CHECK(dt_gt_schedule(384, 4096, DT_GT_RULE) == DT_GT_PP128); /* N no multiple of 256 */
    CHECK(dt_gt_schedule(512, 2047, DT_GT_RULE) == DT_GT_PP128 && dt_gt_schedule(512, 2048, DT_GT_RULE) == DT_GT_COOP256);
    static const int ns[] = {768, 2304, 3072, 128, 384, 50304};
    for (int i = 0; i < 6; i++) {
        CHECK(dt_gt_schedule(ns[i], 768, DT_GT_SCHEDULES) == DT_GT_PP128); /* out of range: the rule */
        CHECK(dt_gt_schedule(ns[i], 768, -1) == DT_GT_PP128);
        CHECK(dt_gt_schedule(ns[i], 3072, DT_GT_COOP128) == DT_GT_COOP128);
        CHECK(dt_gt_schedule(ns[i], 3072, DT_GT_PP128) == DT_GT_PP128);
        CHECK(dt_gt_schedule(ns[i], 768, DT_GT_COOP256) == (ns[i] % 256 ? -1 : DT_GT_COOP256));
        CHECK(dt_gt_schedule(ns[i], 768, DT_GT_PP64) == (ns[i] % 256 ? -1 : DT_GT_PP64));
    }
}

/* The dGELU epilogue's column sums (dt_gt_csum_*): a warp's 32 threads run the kernel's three
 * halving steps (keep, send and add as csum_halve does) on values tagged with their column
 * and lane; every lane must end with, for each k, the sum over the eight g of its t's values
 * at column dt_gt_csum_col, each lane's once; and the partial rows of a call must be its
 * warps', each once. */
static void test_colsum(void) {
    static const int bns[2] = {128, 256};
    for (int b = 0; b < 2; b++) {
        const int bn = bns[b], nv = dt_gt_csum_values(bn);
        CHECK(nv == DT_GT_CSUM_VALUES(bn) && nv == 16 * (bn / 64) && nv % 8 == 0);
        double v[32][64], w[32][64];
        for (int lane = 0; lane < 32; lane++)
            for (int i = 0; i < nv; i++) {
                const int col = 64 * (i / 16) + 8 * ((i % 16) / 2) + 2 * (lane & 3) + (i & 1); /* chunk ch, j, b */
                v[lane][i] = (double)(col + 1) * 256.0 + (double)(1 << (lane >> 2));
            }
        for (int step = 0, h = nv / 2; step < 3; step++, h /= 2) {
            for (int lane = 0; lane < 32; lane++) {
                const int partner = lane ^ (16 >> step);
                for (int i = 0; i < h; i++) {
                    const int hi = dt_gt_csum_keep(lane, step, i, h) != i, phi = dt_gt_csum_keep(partner, step, i, h) != i;
                    CHECK(hi != phi); /* partners keep opposite halves */
                    const double keep = hi ? v[lane][i + h] : v[lane][i], recv = phi ? v[partner][i] : v[partner][i + h];
                    w[lane][i] = keep + recv;
                }
            }
            for (int lane = 0; lane < 32; lane++)
                for (int i = 0; i < h; i++) v[lane][i] = w[lane][i];
        }
        int seen[256] = {0}, ok = 1;
        for (int lane = 0; lane < 32; lane++)
            for (int k = 0; k < nv / 8; k++) {
                const int col = dt_gt_csum_col(bn, lane >> 2, lane & 3, k);
                ok &= col >= 0 && col < bn && (col & 1) == (k & 1);
                if (col < 0 || col >= bn) continue;
                seen[col]++;
                ok &= v[lane][k] == 8.0 * (double)(col + 1) * 256.0 + 255.0; /* its column, all eight g once */
                if (k % 2 == 0) ok &= dt_gt_csum_col(bn, lane >> 2, lane & 3, k + 1) == col + 1; /* float2 pairs */
            }
        for (int c = 0; c < bn; c++) ok &= seen[c] == 1;
        CHECKF(ok, "bn %d: the halving steps and dt_gt_csum_col disagree", bn);
    }
    /* partial rows: warp w of the warpgroup whose first row is mrow, over the model's M */
    static const int schs[4] = {DT_GT_COOP256, DT_GT_COOP128, DT_GT_PP64, DT_GT_PP128};
    for (int q = 0; q < 4; q++) {
        const int sch = schs[q], M = 16384, parts = dt_gt_csum_parts(sch, M);
        CHECK(parts == M / 16 / (DT_GT_WM(sch) / 64));
        unsigned char *hit = (unsigned char *)calloc((size_t)parts, 1);
        int ok = hit != NULL;
        for (int m0 = 0; ok && m0 < M; m0 += DT_GT_BM(sch))
            for (int cw = 0; cw < (DT_GT_PP(sch) ? 1 : 2); cw++)
                for (int w = 0; w < 4; w++) {
                    const int p = dt_gt_csum_part(sch, m0 + cw * DT_GT_WM(sch), w);
                    ok &= p >= 0 && p < parts;
                    if (p >= 0 && p < parts) hit[p]++;
                }
        for (int p = 0; ok && p < parts; p++) ok &= hit[p] == 1;
        CHECKF(ok, "schedule %d: partial rows not one a warp", sch);
        free(hit);
    }
    CHECK(dt_gt_csum_parts(DT_GT_PP128, 16384) == 512); /* the model's fc bias: 512 x 3072 floats */
}

int main(void) {
    RUN(test_colsum);
    RUN(test_ring);
    RUN(test_schedule);
    RUN(test_maps);
    RUN(test_order);
    RUN(test_tile_queue);
    return dt_test_report();
}
