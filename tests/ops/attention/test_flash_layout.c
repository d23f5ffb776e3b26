/* The index arithmetic of the flash-attention backward kernels (src/ops/flash_layout.h),
 * which attention_flash_cuda.cu and attention_wgmma_bwd_cuda.cu run on the device: checked
 * here on the CPU (CI has no GPU).
 *  - dt_flash_bwd_group: a power of two up to 16 that divides BH;
 *  - dt_flash_bwd_order: a bijection of the grid onto (head, rank) pairs, ranks of a head
 *    in increasing block order, all heads of a group before the next group;
 *    dt_flash_bwd_order_rev the same with the groups last first;
 *  - dt_flash_ds_tile: the lower-triangular (qb, kb <= qb) tiles onto 0 .. tiles - 1;
 *  - the shared memory of the wgmma kernel A in each configuration and of the wgmma dQ
 *    pass: every tile 1024-byte aligned (the 128-byte swizzle atom), nothing overlapping,
 *    and the blocks an SM each is built for within an SM's 228 KB;
 *  - the 128-query kernel A (attention_wgmma_bwd_q128_cuda.cu): its walk gives every
 *    warpgroup the query blocks kb.. nqb - 1 in order, the diagonal one masked (the
 *    64-query kernel's k order: the bit-equality argument), with only the kinds of tile its
 *    dispatch handles where it handles them; its shared memory as above, mbarriers 8-byte
 *    aligned; its setmaxnreg split fits the registers a block is launched with. */
#include "ops/attention/flash_layout.h"

#include <stdlib.h>

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
        /* the reversed group order: a bijection, groups last first, ranks in order inside */
        memset(seen, 0, (size_t)n);
        for (int h = 0; h < BH; h++) last_rank[h] = -1;
        bad = 0, prev_group = BH / grp - 1;
        for (int i = 0; i < n; i++) {
            int h, r;
            dt_flash_bwd_order_rev(i, grp, nblk, BH, &h, &r);
            if (h < 0 || h >= BH || r < 0 || r >= nblk || seen[h * nblk + r]++) { bad++; continue; }
            if (r != last_rank[h] + 1) bad++;
            last_rank[h] = r;
            if (h / grp > prev_group) bad++; /* groups in reverse order */
            prev_group = h / grp;
        }
        CHECKF(bad == 0, "dt_flash_bwd_order_rev BH %d nblk %d: %d blocks out of place", BH, nblk, bad);
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

/* A shared-memory layout's n pieces (offset, length, alignment) against a block's total
 * (which includes 1024 bytes of slack for aligning the base): the number of pieces that are
 * misaligned, run past the end, or overlap an earlier one. */
static int misplaced(const uint32_t *off, const uint32_t *len, const uint32_t *align, int n, uint32_t total) {
    int bad = 0;
    for (int a = 0; a < n; a++) {
        if (off[a] % align[a]) bad++;
        if (off[a] + len[a] + 1024 > total) bad++;
        for (int b = 0; b < a; b++)
            if (off[a] < off[b] + len[b] && off[b] < off[a] + len[a]) bad++;
    }
    return bad;
}

/* Kernel A's configurations: (M warpgroups, stages, blocks an SM it is built for). */
static const int wgbwd_cfg[][3] = {{2, 4, 1}, {1, 4, 2}};

static void test_wgbwd_smem(void) {
    for (size_t k = 0; k < sizeof wgbwd_cfg / sizeof wgbwd_cfg[0]; k++) {
        const int M = wgbwd_cfg[k][0], nst = wgbwd_cfg[k][1], per_sm = wgbwd_cfg[k][2];
        uint32_t off[64], len[64], align[64];
        int n = 0;
        for (int j = 0; j < M; j++) {
            off[n] = dt_wgbwd_k_off(M, j), len[n] = DT_WGBWD_TILE, align[n++] = 1024;
            off[n] = dt_wgbwd_v_off(M, j), len[n] = DT_WGBWD_TILE, align[n++] = 1024;
        }
        for (int st = 0; st < nst; st++) {
            off[n] = dt_wgbwd_q_off(M, st), len[n] = DT_WGBWD_TILE, align[n++] = 1024;
            off[n] = dt_wgbwd_do_off(M, st), len[n] = DT_WGBWD_TILE, align[n++] = 1024;
        }
        for (int st = 0; st < nst; st++) off[n] = dt_wgbwd_ld_off(M, nst, st), len[n] = 512, align[n++] = 16;
        int bad = misplaced(off, len, align, n, dt_wgbwd_smem(M, nst));
        CHECKF(bad == 0, "wgmma kernel A shared memory (M %d, %d stages): %d misplaced pieces", M, nst, bad);
        /* the bias partial reduction reuses the K tiles: 4 warps x 128 floats a warpgroup */
        CHECK((uint32_t)M * 4u * 128u * 4u <= (uint32_t)M * DT_WGBWD_TILE);
        /* the blocks an SM it is built for fit (228 KB, 1 KB of it reserved per block) */
        uint32_t need = (uint32_t)per_sm * (dt_wgbwd_smem(M, nst) + 1024u);
        CHECKF(need <= 228u * 1024u, "wgmma kernel A (M %d, %d stages): %d blocks need %u bytes of an SM", M, nst,
               per_sm, need);
    }
}

/* The 128-query kernel A's configurations: (M consumer warpgroups, stages). */
static const int wgq_cfg[][2] = {{2, DT_WGQ_STAGES_M2}, {1, DT_WGQ_STAGES_M1}};

/* Its walk: for every head length (M = 2: even nqb only), block and warpgroup, the halves
 * that get products are the query blocks kb, kb + 1, .., nqb - 1 in this order (each once,
 * the first DIAG, the others FULL); tile 0 is one of the kinds the prologue handles for that
 * M, tiles 1 .. dt_wgq_loop_end - 1 are (FULL, FULL), and a tile after the loop is the
 * last one, (FULL, SKIP), with M = 1 only. */
static void test_wgq_walk(void) {
    for (size_t k = 0; k < sizeof wgq_cfg / sizeof wgq_cfg[0]; k++) {
        const int M = wgq_cfg[k][0];
        for (int nqb = 1; nqb <= 40; nqb++) {
            if (nqb % M) continue;
            int bad = 0;
            for (int r = 0; r < nqb / M; r++) {
                const int kb0 = M * r, n = dt_wgq_tiles(nqb, kb0);
                for (int kb = kb0; kb < kb0 + M; kb++) {
                    int next = kb, end = dt_wgq_loop_end(nqb, kb0, kb);
                    if (end < 1 || end > n || (end < n && (M != 1 || end != n - 1))) bad++;
                    for (int j = 0; j < n; j++) {
                        int h[2];
                        for (int hh = 0; hh < 2; hh++) {
                            const int qb = kb0 + 2 * j + hh;
                            h[hh] = dt_wgq_half(qb, kb, nqb);
                            if (h[hh] == DT_WGQ_SKIP) continue;
                            if (qb != next++) bad++; /* the 64-query kernel's order */
                            if ((h[hh] == DT_WGQ_DIAG) != (qb == kb)) bad++;
                        }
                        if (j == 0) { /* the prologue: (DIAG, FULL); M = 2 (SKIP, DIAG); M = 1 (DIAG, SKIP) */
                            int ok = (h[0] == DT_WGQ_DIAG && h[1] == DT_WGQ_FULL) ||
                                     (M == 2 && h[0] == DT_WGQ_SKIP && h[1] == DT_WGQ_DIAG) ||
                                     (M == 1 && h[0] == DT_WGQ_DIAG && h[1] == DT_WGQ_SKIP);
                            if (!ok) bad++;
                        } else if (j < end) { /* the loop */
                            if (h[0] != DT_WGQ_FULL || h[1] != DT_WGQ_FULL) bad++;
                        } else if (M != 1 || h[0] != DT_WGQ_FULL || h[1] != DT_WGQ_SKIP) {
                            bad++; /* the tail */
                        }
                    }
                    if (next != nqb) bad++; /* every query block from kb on */
                }
            }
            CHECKF(bad == 0, "128-query kernel A walk (M %d, nqb %d): %d tiles out of place", M, nqb, bad);
        }
    }
}

static void test_wgq_smem(void) {
    for (size_t k = 0; k < sizeof wgq_cfg / sizeof wgq_cfg[0]; k++) {
        const int M = wgq_cfg[k][0], nst = wgq_cfg[k][1], per_sm = dt_wgq_per_sm(M);
        uint32_t off[64], len[64], align[64];
        int n = 0;
        for (int j = 0; j < M; j++) {
            off[n] = dt_wgq_k_off(M, j), len[n] = DT_WGBWD_TILE, align[n++] = 1024;
            off[n] = dt_wgq_v_off(M, j), len[n] = DT_WGBWD_TILE, align[n++] = 1024;
        }
        for (int st = 0; st < nst; st++) {
            off[n] = dt_wgq_q_off(M, st), len[n] = 2 * DT_WGBWD_TILE, align[n++] = 1024;
            off[n] = dt_wgq_do_off(M, st), len[n] = 2 * DT_WGBWD_TILE, align[n++] = 1024;
            off[n] = dt_wgq_ld_off(M, nst, st), len[n] = 1024, align[n++] = 16;
            off[n] = dt_wgq_full_off(M, nst, st), len[n] = 8, align[n++] = 8;
            off[n] = dt_wgq_empty_off(M, nst, st), len[n] = 8, align[n++] = 8;
        }
        int bad = misplaced(off, len, align, n, dt_wgq_smem(M, nst));
        CHECKF(bad == 0, "128-query kernel A shared memory (M %d, %d stages): %d misplaced pieces", M, nst, bad);
        /* the bias partial reduction reuses the K tiles: 4 warps x 128 floats a warpgroup */
        CHECK((uint32_t)M * 4u * 128u * 4u <= (uint32_t)M * DT_WGBWD_TILE);
        uint32_t need = (uint32_t)per_sm * (dt_wgq_smem(M, nst) + 1024u);
        CHECKF(need <= 228u * 1024u, "128-query kernel A (M %d, %d stages): %d blocks need %u bytes of an SM", M, nst,
               per_sm, need);
        /* registers: the split fits the block's launch count (else setmaxnreg.inc never
         * returns), each count a multiple of 8 in 24..256 (setmaxnreg's operand) */
        const int launch = dt_wgq_launch_regs(M), prod = DT_WGQ_PRODUCER_REGS, cons = DT_WGQ_CONSUMER_REGS(M);
        CHECKF(prod + M * cons <= (M + 1) * launch, "128-query kernel A (M %d): %d + %d x %d registers > %d x %d", M,
               prod, M, cons, M + 1, launch);
        CHECK(prod % 8 == 0 && cons % 8 == 0 && prod >= 24 && cons <= 256 && prod <= launch && cons >= launch);
        CHECK(per_sm * 128 * (M + 1) * launch <= 65536);
    }
}

/* LD's places (dt_flash_ld_at): the D kernel and the DOT epilogue of gemm_wgmma_cuda.cu
 * write them, kernel A reads a float4 a pair of rows {lse 2j, lse 2j + 1, D 2j, D 2j + 1}:
 * every row of every head gets its own lse and D floats, which tile the buffer exactly, in
 * that pattern. */
static void test_ld_at(void) {
    const int Ts[3] = {64, 960, 1024};
    for (int k = 0; k < 3; k++) {
        const int T = Ts[k], BH = 6;
        const size_t n = (size_t)2 * BH * T;
        unsigned char *used = (unsigned char *)calloc(n, 1);
        int bad = 0;
        for (int bh = 0; bh < BH; bh++)
            for (int t = 0; t < T; t++) {
                const size_t at = dt_flash_ld_at(bh, t, T), pair = ((size_t)bh * T + (size_t)(t & ~1)) * 2;
                /* the row form (the DOT epilogue's, T even) names the same place */
                if (at != pair + (size_t)(t & 1) || at + 2 >= n || at != dt_flash_ld_at_row((size_t)bh * T + t)) {
                    bad++;
                    continue;
                }
                used[at]++;
                used[at + 2]++;
            }
        for (size_t i = 0; i < n; i++) bad += used[i] != 1;
        CHECKF(bad == 0, "LD places at T %d: %d wrong", T, bad);
        free(used);
    }
    /* a negative control: the layout of one float2 a row (lse, D) would put D where kernel
     * A reads the odd row's lse */
    CHECK(dt_flash_ld_at(0, 0, 64) + 1 == dt_flash_ld_at(0, 1, 64));
    /* the row form needs T even: with T odd, head 1's row 0 is an odd row index */
    CHECK(dt_flash_ld_at(1, 0, 63) != dt_flash_ld_at_row(63));
}

/* The wgmma dQ pass: tiles 1024-byte aligned, disjoint, 2 (M = 2) or 3 (M = 1) blocks an SM. */
static void test_wgdq_smem(void) {
    for (int M = 1; M <= 2; M++) {
        int n = 0;
        uint32_t off[64], len[64], align[64];
        for (int st = 0; st < DT_WGDQ_STAGES; st++) {
            off[n] = dt_wgdq_k_off(M, st), len[n] = DT_WGBWD_TILE, align[n++] = 1024;
            for (int j = 0; j < M; j++) off[n] = dt_wgdq_ds_off(M, st, j), len[n] = DT_WGBWD_TILE, align[n++] = 1024;
        }
        int bad = misplaced(off, len, align, n, dt_wgdq_smem(M));
        CHECKF(bad == 0, "wgmma dQ pass shared memory (M %d): %d misplaced tiles", M, bad);
        uint32_t need = (uint32_t)(M == 1 ? 3 : 2) * (dt_wgdq_smem(M) + 1024u);
        CHECKF(need <= 228u * 1024u, "wgmma dQ pass (M %d): %u bytes of an SM", M, need);
        /* the bias partial reduction reuses stage 0: 4 warps x 64 floats a warpgroup */
        CHECK((uint32_t)M * 4u * 64u * 4u <= dt_wgdq_ds_off(M, 1, 0));
    }
}

int main(void) {
    RUN(test_group);
    RUN(test_ld_at);
    RUN(test_order);
    RUN(test_ds_tiles);
    RUN(test_wgbwd_smem);
    RUN(test_wgdq_smem);
    RUN(test_wgq_walk);
    RUN(test_wgq_smem);
    return dt_test_report();
}
