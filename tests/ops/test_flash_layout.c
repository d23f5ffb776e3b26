/* The index arithmetic of the flash-attention backward kernels (src/ops/flash_layout.h),
 * which attention_flash_cuda.cu and attention_wgmma_bwd_cuda.cu run on the device: checked
 * here on the CPU (CI has no GPU).
 *  - dt_flash_bwd_group: a power of two up to 16 that divides BH;
 *  - dt_flash_bwd_order: a bijection of the grid onto (head, rank) pairs, ranks of a head
 *    in increasing block order, all heads of a group before the next group;
 *  - dt_flash_ds_tile: the lower-triangular (qb, kb <= qb) tiles onto 0 .. tiles - 1;
 *  - the shared memory of the wgmma kernel A in each configuration and of the wgmma dQ
 *    pass: every tile 1024-byte aligned (the 128-byte swizzle atom), nothing overlapping,
 *    and the blocks an SM each is built for within an SM's 228 KB. */
#include "ops/flash_layout.h"

#include "dt_test.h"

#include <stdlib.h>
#include <string.h>

static void test_group(void) {
    static const int bh[][2] = {{1, 1}, {2, 2}, {3, 1}, {8, 8}, {12, 4}, {48, 16}, {192, 16}, {96, 16}, {40, 8}};
    for (size_t k = 0; k < sizeof bh / sizeof bh[0]; k++)
        CHECKF(dt_flash_bwd_group(bh[k][0]) == bh[k][1], "dt_flash_bwd_group(%d) = %d, want %d", bh[k][0],
               dt_flash_bwd_group(bh[k][0]), bh[k][1]);
}

static void test_order(void) {
    static const int shapes[][2] = {{192, 16}, {192, 8}, {8, 16}, {12, 15}, {3, 7}, {32, 1}}; /* BH, nblk */
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        int BH = shapes[k][0], nblk = shapes[k][1], grp = dt_flash_bwd_group(BH), n = BH * nblk;
        unsigned char *seen = calloc((size_t)n, 1);
        int *last_rank = malloc(sizeof(int) * (size_t)BH);
        for (int h = 0; h < BH; h++) last_rank[h] = -1;
        int bad = 0, prev_group = 0;
        for (int i = 0; i < n; i++) {
            int h, r;
            dt_flash_bwd_order(i, grp, nblk, &h, &r);
            if (h < 0 || h >= BH || r < 0 || r >= nblk || seen[h * nblk + r]++) { bad++; continue; }
            if (r != last_rank[h] + 1) bad++; /* a head's ranks in order */
            last_rank[h] = r;
            if (h / grp < prev_group) bad++; /* groups in order */
            prev_group = h / grp;
        }
        CHECKF(bad == 0, "dt_flash_bwd_order BH %d nblk %d: %d blocks out of place", BH, nblk, bad);
        free(seen);
        free(last_rank);
    }
}

static void test_ds_tiles(void) {
    for (int nqb = 1; nqb <= 64; nqb++) {
        size_t n = dt_flash_ds_tiles(nqb);
        CHECK(n == (size_t)nqb * (size_t)(nqb + 1) / 2);
        unsigned char *seen = calloc(n, 1);
        int bad = 0;
        for (int qb = 0; qb < nqb; qb++)
            for (int kb = 0; kb <= qb; kb++) {
                size_t t = dt_flash_ds_tile(qb, kb);
                if (t >= n || seen[t]++) bad++;
            }
        CHECKF(bad == 0, "dt_flash_ds_tile nqb %d: %d tiles out of range or repeated", nqb, bad);
        free(seen);
    }
    CHECK(dt_flash_ds_tile(15, 15) == 135); /* the last tile of a T = 1024 head */
}

/* Kernel A's configurations: (M warpgroups, stages, blocks an SM it is built for). */
static const int wgbwd_cfg[][3] = {{2, 4, 1}, {1, 4, 2}};

static void test_wgbwd_smem(void) {
    for (size_t k = 0; k < sizeof wgbwd_cfg / sizeof wgbwd_cfg[0]; k++) {
        const int M = wgbwd_cfg[k][0], nst = wgbwd_cfg[k][1], per_sm = wgbwd_cfg[k][2];
        uint32_t off[64], len[64];
        int n = 0;
        for (int j = 0; j < M; j++) {
            off[n] = dt_wgbwd_k_off(M, j), len[n++] = DT_WGBWD_TILE;
            off[n] = dt_wgbwd_v_off(M, j), len[n++] = DT_WGBWD_TILE;
        }
        for (int st = 0; st < nst; st++) {
            off[n] = dt_wgbwd_q_off(M, st), len[n++] = DT_WGBWD_TILE;
            off[n] = dt_wgbwd_do_off(M, st), len[n++] = DT_WGBWD_TILE;
        }
        int tiles = n;
        for (int st = 0; st < nst; st++) off[n] = dt_wgbwd_ld_off(M, nst, st), len[n++] = 512;
        int bad = 0;
        for (int a = 0; a < n; a++) {
            if (a < tiles && off[a] % 1024) bad++;
            if (off[a] % 16) bad++;
            if (off[a] + len[a] + 1024 > dt_wgbwd_smem(M, nst)) bad++; /* + the alignment slack */
            for (int b = 0; b < a; b++)
                if (off[a] < off[b] + len[b] && off[b] < off[a] + len[a]) bad++;
        }
        CHECKF(bad == 0, "wgmma kernel A shared memory (M %d, %d stages): %d misplaced pieces", M, nst, bad);
        /* the bias partial reduction reuses the K tiles: 4 warps x 128 floats a warpgroup */
        CHECK((uint32_t)M * 4u * 128u * 4u <= (uint32_t)M * DT_WGBWD_TILE);
        /* the blocks an SM it is built for fit (228 KB, 1 KB of it reserved per block) */
        uint32_t need = (uint32_t)per_sm * (dt_wgbwd_smem(M, nst) + 1024u);
        CHECKF(need <= 228u * 1024u, "wgmma kernel A (M %d, %d stages): %d blocks need %u bytes of an SM", M, nst,
               per_sm, need);
    }
}

/* The wgmma dQ pass: tiles 1024-byte aligned, disjoint, 2 (M = 2) or 3 (M = 1) blocks an SM. */
static void test_wgdq_smem(void) {
    for (int M = 1; M <= 2; M++) {
        int bad = 0, n = 0;
        uint32_t off[64];
        for (int st = 0; st < DT_WGDQ_STAGES; st++) {
            off[n++] = dt_wgdq_k_off(M, st);
            for (int j = 0; j < M; j++) off[n++] = dt_wgdq_ds_off(M, st, j);
        }
        for (int a = 0; a < n; a++) {
            if (off[a] % 1024 || off[a] + DT_WGBWD_TILE + 1024 > dt_wgdq_smem(M)) bad++;
            for (int b = 0; b < a; b++)
                if (off[a] < off[b] + DT_WGBWD_TILE && off[b] < off[a] + DT_WGBWD_TILE) bad++;
        }
        CHECKF(bad == 0, "wgmma dQ pass shared memory (M %d): %d misplaced tiles", M, bad);
        uint32_t need = (uint32_t)(M == 1 ? 3 : 2) * (dt_wgdq_smem(M) + 1024u);
        CHECKF(need <= 228u * 1024u, "wgmma dQ pass (M %d): %u bytes of an SM", M, need);
        /* the bias partial reduction reuses stage 0: 4 warps x 64 floats a warpgroup */
        CHECK((uint32_t)M * 4u * 64u * 4u <= dt_wgdq_ds_off(M, 1, 0));
    }
}

int main(void) {
    RUN(test_group);
    RUN(test_order);
    RUN(test_ds_tiles);
    RUN(test_wgbwd_smem);
    RUN(test_wgdq_smem);
    return dt_test_report();
}
