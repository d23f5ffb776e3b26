/* The CUDA kernels' host-side plans (src/ops/cuda_plan.c, cuda_plan.h): partial counts and
 * grids depend on sizes only; the LayerNorm backward's shared memory and scratch fit (with
 * the fused column sum too); the token buckets are a stable sort; the AdamW chunks cover
 * every parameter exactly once without crossing a tensor; the det GEMM policy never picks an
 * in-place split-K candidate (the policy gemm_cuda.cu applies). Runs on the CPU (CI). */
#include "ops/cuda_plan.h"

#include "dt_test.h"

#include <string.h>

static void test_parts_and_grid(void) {
    CHECK(dt_cu_colsum_parts(1) == 1);
    CHECK(dt_cu_colsum_parts(DT_CU_COLSUM_ROWS) == 1);
    CHECK(dt_cu_colsum_parts(DT_CU_COLSUM_ROWS + 1) == 2);
    CHECK(dt_cu_colsum_parts(16384) == 16384 / DT_CU_COLSUM_ROWS);
    CHECK(dt_cu_ln_parts(16384) == 16384 / DT_CU_LN_ROWS && dt_cu_ln_parts(DT_CU_LN_ROWS + 1) == 2);
    CHECK(dt_cu_ln_parts(16384) == 256); /* one wave of 2 blocks an SM on a 132-SM H200 */
    CHECK(dt_cu_reduce_blocks(0) == 1);
    CHECK(dt_cu_reduce_blocks(1) == 1);
    CHECK(dt_cu_reduce_blocks((size_t)DT_CU_RED_THREADS * 8 + 1) == 2);
    CHECK(dt_cu_reduce_blocks((size_t)1 << 30) == DT_CU_RED_MAX_BLOCKS);
    CHECK(dt_cu_ce_vectors_per_thread(50304, 256) == 25);
    CHECK(dt_cu_ce_vectors_per_thread(2048, 256) == 1);
}

/* The LayerNorm backward's shared memory and partial scratch, with and without the fused
 * column sum: three vectors per warp fit DT_CU_LN_SMEM_MAX up to C = 2133 (the register
 * kernel's C <= 2048 always; the wide kernel falls back to dt_cu_colsum above), and the
 * third partial region holds the fallback's dt_cu_colsum partials. */
static void test_ln_plan(void) {
    CHECK(dt_cu_ln_bwd_smem(768, 0) == 2 * 8 * 768 * sizeof(float));
    CHECK(dt_cu_ln_bwd_smem(768, 1) == 73728);       /* 2 blocks of 256 threads fit an SM */
    CHECK(dt_cu_ln_bwd_smem(2048, 1) == 196608 && dt_cu_ln_bwd_smem(2048, 1) <= DT_CU_LN_SMEM_MAX);
    CHECK(dt_cu_ln_bwd_smem(3200, 0) == DT_CU_LN_SMEM_MAX); /* the wide kernel's widest row */
    /* the full-row kernel of layernorm_cuda.cu (C 256, 512, 768): its warps' vectors, then
     * the weights; two blocks (each with the 1 KB the driver reserves) fit an SM's 228 KB */
    CHECK(dt_cu_ln_bwd_full_smem(768, 1) == 73728 + 768 * sizeof(float));
    CHECK(dt_cu_ln_bwd_full_smem(768, 0) == dt_cu_ln_bwd_smem(768, 0) + 768 * sizeof(float));
    /* which rows take the full-row kernels: C 256, 512, 768 with their vector counts only */
    CHECK(dt_cu_ln_full_rows(256, 1) && dt_cu_ln_full_rows(512, 2) && dt_cu_ln_full_rows(768, 3));
    CHECK(!dt_cu_ln_full_rows(768, 0) && !dt_cu_ln_full_rows(128, 1) && !dt_cu_ln_full_rows(640, 3));
    CHECK(!dt_cu_ln_full_rows(1024, 4) && !dt_cu_ln_full_rows(1536, 6) && !dt_cu_ln_full_rows(768, 4));
    for (int C = 256; C <= 768; C += 256)
        CHECK(2 * (dt_cu_ln_bwd_full_smem(C, 1) + 1024) <= 228 * 1024 &&
              dt_cu_ln_bwd_full_smem(C, 1) <= DT_CU_LN_SMEM_MAX);
    CHECK(dt_cu_ln_colsum_fused(2048, 0) && dt_cu_ln_colsum_fused(768, 1));
    CHECK(dt_cu_ln_colsum_fused(2128, 1) && !dt_cu_ln_colsum_fused(2136, 1));
    CHECK(!dt_cu_ln_colsum_fused(3072, 1));
    CHECK(dt_cu_ln_part_floats(16384, 768, 0) == (size_t)2 * 256 * 768);
    CHECK(dt_cu_ln_part_floats(16384, 768, 1) == (size_t)3 * 256 * 768);
    CHECK(dt_cu_ln_part_floats(65, 64, 1) == (size_t)3 * 2 * 64);
    int rows[] = {1, 31, 32, 33, 64, 65, 1000, 16384};
    for (int i = 0; i < 8; i++) /* the fallback's partials fit the third region */
        CHECK(dt_cu_ln_part_floats(rows[i], 3072, 1) - dt_cu_ln_part_floats(rows[i], 3072, 0) >=
              (size_t)dt_cu_colsum_parts(rows[i]) * 3072);
}

static void test_buckets(void) {
    enum { BT = 4000, Vp = 384 };
    static int inp[BT], count[Vp], order[BT], tok[BT], start[BT + 1];
    for (int i = 0; i < BT; i++) inp[i] = (int)((i * 7919u + (unsigned)(i / 13)) % 97u) * 3; /* repeats */
    int nseg = dt_cu_encoder_buckets(inp, BT, Vp, count, order, tok, start);
    CHECK(nseg > 0 && nseg <= 97);
    CHECK(start[0] == 0 && start[nseg] == BT);
    int seen[BT] = {0}, bad = 0;
    for (int s = 0; s < nseg; s++) {
        if (s > 0 && tok[s] <= tok[s - 1]) bad++;                   /* ids increase */
        if (start[s + 1] <= start[s]) bad++;                         /* non-empty runs */
        for (int j = start[s]; j < start[s + 1]; j++) {
            if (inp[order[j]] != tok[s]) bad++;                      /* right bucket */
            if (j > start[s] && order[j] <= order[j - 1]) bad++;     /* stable: position order */
            seen[order[j]]++;
        }
    }
    for (int i = 0; i < BT; i++) bad += seen[i] != 1;
    CHECKF(bad == 0, "%d bucket violations", bad);
    inp[5] = Vp; /* out of range */
    CHECK(dt_cu_encoder_buckets(inp, BT, Vp, count, order, tok, start) == -1);
}

static void test_adamw_chunks(void) {
    size_t numel[4] = {10, 1, 0, 25}, offs[4] = {0, 10, 11, 11};
    size_t n = dt_cu_adamw_chunks(offs, numel, 4, 8, NULL, 0);
    CHECK(n == 2 + 1 + 0 + 4);
    dt_cu_chunk ch[16];
    CHECK(dt_cu_adamw_chunks(offs, numel, 4, 8, ch, 16) == n);
    int cover[36] = {0}, bad = 0;
    for (size_t k = 0; k < n; k++) {
        if (ch[k].len == 0 || ch[k].len > 8) bad++;
        size_t t = ch[k].tensor;
        if (ch[k].start < offs[t] || ch[k].start + ch[k].len > offs[t] + numel[t]) bad++;
        for (uint32_t j = 0; j < ch[k].len; j++) cover[ch[k].start + j]++;
    }
    for (int i = 0; i < 36; i++) bad += cover[i] != 1;
    CHECKF(bad == 0, "%d chunk violations", bad);
}

static void test_gemm_policy(void) {
    dt_cu_gemm_cand c[4] = {
        {10, 4, 1, 1 << 20, 1},  /* split-K reduced in place: fast only */
        {11, 1, 0, 1u << 30, 1}, /* too much workspace */
        {12, 1, 0, 0, 0},        /* heuristic failed */
        {13, 1, 0, 4096, 1},     /* usable everywhere */
    };
    CHECK(dt_cu_gemm_pick(c, 4, 0, 32u << 20) == 0);
    CHECK(dt_cu_gemm_pick(c, 4, 1, 32u << 20) == 3);
    CHECK(dt_cu_gemm_pick(c, 3, 1, 32u << 20) == -1);
    dt_cu_gemm_cand unnamed = {14, 2, 0, 0, 1}; /* split without a named scheme: not det */
    CHECK(dt_cu_gemm_pick(&unnamed, 1, 1, 32u << 20) == -1);
    CHECK(dt_cu_gemm_pick(&unnamed, 1, 0, 32u << 20) == 0);
    dt_cu_gemm_cand ws[2] = {{15, 8, 2, 1 << 20, 1}, {16, 8, 4, 1 << 20, 1}}; /* workspace schemes */
    CHECK(dt_cu_gemm_pick(ws, 2, 1, 32u << 20) == 0);
    CHECK(dt_cu_gemm_pick(ws + 1, 1, 1, 32u << 20) == 0);
}

/* The split-K rule: chunks double while the output times the chunks stays under the
 * target, the chunks stay deep enough and multiples of 8; a function of the sizes only. */
static void test_gemm_splits(void) {
    /* the GPT-2 124M weight gradients, K = B*T = 16384 */
    CHECK(dt_cu_gemm_splits(768, 768, 16384) == 2);
    CHECK(dt_cu_gemm_splits(2304, 768, 16384) == 1);
    CHECK(dt_cu_gemm_splits(3072, 768, 16384) == 1);
    CHECK(dt_cu_gemm_splits(768, 3072, 16384) == 1);
    CHECK(dt_cu_gemm_splits(50304, 768, 16384) == 1);
    CHECK(dt_cu_gemm_splits(256, 256, 16384) == 8);    /* small output, deep K */
    CHECK(dt_cu_gemm_splits(256, 256, 4096) == 4);     /* chunks at least DT_CU_SPLITK_MIN_CHUNK deep */
    CHECK(dt_cu_gemm_splits(768, 768, 1024) == 1);
    CHECK(dt_cu_gemm_splits(64, 64, 1000004) == 1);     /* K / 2 is not a multiple of 8 */
    CHECK(dt_cu_gemm_splits(64, 64, 1 << 20) == DT_CU_SPLITK_MAX);
    for (int K = 1; K < 70000; K += 97) {
        int S = dt_cu_gemm_splits(128, 128, K);
        CHECKF(S >= 1 && S <= DT_CU_SPLITK_MAX && K % S == 0 && (S == 1 || ((K / S) % 8 == 0 &&
               K / S >= DT_CU_SPLITK_MIN_CHUNK)), "K %d: %d chunks", K, S);
    }
}

/* The launch log: nothing noted while off; notes formatted in order; a take clears; more
 * launches than kept are counted; a small buffer is cut, never overrun. */
static void test_launch_log(void) {
    char buf[512];
    dt_cu_launch_take(NULL, 0);
    dt_cu_launch_note("ignored", 1, 1, 1, 32, 1, 1, 0);
    CHECK(dt_cu_launch_take(buf, sizeof buf) == 0 && buf[0] == 0);
    dt_cu_launch_log(1);
    dt_cu_launch_note("ln_fwd", 4096, 1, 1, 128, 1, 1, 0);
    dt_cu_launch_note("finish", 24, 2, 1, 256, 1, 1, 8192);
    CHECK(dt_cu_launch_take(buf, sizeof buf) == 2);
    CHECKF(!strcmp(buf, "ln_fwd<<<(4096,1,1),(128,1,1),0>>>; finish<<<(24,2,1),(256,1,1),8192>>>"), "%s", buf);
    CHECK(dt_cu_launch_take(buf, sizeof buf) == 0 && buf[0] == 0);
    for (int i = 0; i < 40; i++) dt_cu_launch_note("k", (unsigned)i, 1, 1, 1, 1, 1, 0);
    char big[4096];
    CHECK(dt_cu_launch_take(big, sizeof big) == 40);
    CHECKF(strstr(big, "; +8 more") != NULL, "%s", big);
    for (int i = 0; i < 40; i++) dt_cu_launch_note("kernel_name", (unsigned)i, 1, 1, 1, 1, 1, 0);
    char small[50];
    memset(small, 'x', sizeof small);
    CHECK(dt_cu_launch_take(small, 40) == 40);
    CHECK(strlen(small) < 40 && small[45] == 'x');
    dt_cu_launch_log(0);
}

/* DT_DW_BATCH's residual-gradient slots, in the backward's order: lnf, then for l = L - 1
 * down to 0 fcproj reads, LN2 writes, attproj reads, LN1 writes. Each linear reads the slot
 * the LayerNorm backward just before it wrote; every slot of the 2 L is written once, so
 * each still holds its layer's dout when the batched GEMMs read them after the layers; a
 * kind's slots are its first plus l strides; layer 0's LN1 writes the embedding's buffer. */
static void test_res_slots(void) {
    for (int L = 1; L <= 5; L++) {
        int written[16] = {0}, last = dt_cu_res_slot_ln(L, DT_CU_RES_LN1); /* lnf */
        CHECK(last == dt_cu_res_slot(L - 1, DT_CU_RES_FCPROJ));
        written[last]++;
        for (int l = L - 1; l >= 0; l--) {
            CHECK(dt_cu_res_slot(l, DT_CU_RES_FCPROJ) == last);
            last = dt_cu_res_slot_ln(l, DT_CU_RES_LN2);
            CHECK(last >= 0 && last < 2 * L);
            if (last >= 0 && last < 16) written[last]++;
            CHECK(dt_cu_res_slot(l, DT_CU_RES_ATTPROJ) == last);
            last = dt_cu_res_slot_ln(l, DT_CU_RES_LN1);
            CHECK(l > 0 ? last >= 0 && last < 2 * L : last == -1);
            if (last >= 0 && last < 16) written[last]++;
            for (int kind = DT_CU_RES_ATTPROJ; kind <= DT_CU_RES_FCPROJ; kind++)
                CHECK(dt_cu_res_slot(l, kind) == dt_cu_res_slot(0, kind) + l * DT_CU_RES_STRIDE);
        }
        for (int k = 0; k < 2 * L; k++) CHECKF(written[k] == 1, "L %d: slot %d written %d times", L, k, written[k]);
    }
}

/* The backward's table of buffers a second stream still reads (dt_cu_reads_*). */
static void test_pending_reads(void) {
    dt_cu_reads r;
    memset(&r, 0, sizeof r);
    int a, b, c, bufs[DT_CU_READS_MAX + 1];
    CHECK(dt_cu_reads_claim(&r, &a) == -1); /* nothing pending: no wait */
    int ka = dt_cu_reads_note(&r, &a);
    CHECK(ka >= 0 && ka < DT_CU_READS_MAX);
    CHECK(dt_cu_reads_note(&r, &a) == ka); /* a second read of a keeps its slot (later event) */
    int kb = dt_cu_reads_note(&r, &b);
    CHECK(kb >= 0 && kb != ka);
    CHECK(dt_cu_reads_claim(&r, &c) == -1); /* c was never read */
    CHECK(dt_cu_reads_claim(&r, &a) == ka); /* the write of a waits for a's event ... */
    CHECK(dt_cu_reads_claim(&r, &a) == -1); /* ... once */
    CHECK(dt_cu_reads_claim(&r, &b) == kb);
    /* the table fills: DT_CU_READS_MAX distinct pending buffers fit, one more does not */
    memset(&r, 0, sizeof r);
    int seen[DT_CU_READS_MAX] = {0};
    for (int i = 0; i < DT_CU_READS_MAX; i++) {
        int k = dt_cu_reads_note(&r, &bufs[i]);
        CHECK(k >= 0 && k < DT_CU_READS_MAX && !seen[k]);
        if (k >= 0 && k < DT_CU_READS_MAX) seen[k] = 1;
    }
    CHECK(dt_cu_reads_note(&r, &bufs[DT_CU_READS_MAX]) == -1);
    CHECK(dt_cu_reads_note(&r, &bufs[2]) >= 0); /* a pending one still re-notes */
    int k3 = dt_cu_reads_claim(&r, &bufs[3]);
    CHECK(k3 >= 0);
    CHECK(dt_cu_reads_note(&r, &bufs[DT_CU_READS_MAX]) == k3); /* the freed slot is reused */
    dt_cu_reads_clear(&r);
    for (int i = 0; i <= DT_CU_READS_MAX; i++) CHECK(dt_cu_reads_claim(&r, &bufs[i]) == -1);
}

/* When a phase runs eagerly, is captured into a CUDA graph, or replays it (dt_cu_graph_*). */
static void test_graph_decide(void) {
    dt_cu_graph_state g;
    memset(&g, 0, sizeof g);
    uint64_t a = dt_cu_graph_sig(DT_CU_GRAPH_SIG0, "a", 1), b = dt_cu_graph_sig(DT_CU_GRAPH_SIG0, "b", 1);
    CHECK(a != b && a != DT_CU_GRAPH_SIG0);
    CHECK(dt_cu_graph_sig(DT_CU_GRAPH_SIG0, "a", 1) == a); /* a function of the bytes only */
    CHECK(dt_cu_graph_decide(&g, 1, a) == DT_CU_GRAPH_EAGER);   /* first call: plans made eagerly */
    CHECK(dt_cu_graph_decide(&g, 1, a) == DT_CU_GRAPH_CAPTURE); /* second identical call */
    dt_cu_graph_captured(&g, a);
    CHECK(dt_cu_graph_decide(&g, 1, a) == DT_CU_GRAPH_REPLAY);
    CHECK(dt_cu_graph_decide(&g, 1, a) == DT_CU_GRAPH_REPLAY);
    /* an ineligible call (tracing, profiling) runs eagerly and keeps the graph */
    CHECK(dt_cu_graph_decide(&g, 0, a) == DT_CU_GRAPH_EAGER);
    CHECK(dt_cu_graph_decide(&g, 1, a) == DT_CU_GRAPH_REPLAY);
    /* a new signature: eager once, then a new capture; the old graph is not replayed */
    CHECK(dt_cu_graph_decide(&g, 1, b) == DT_CU_GRAPH_EAGER);
    CHECK(dt_cu_graph_decide(&g, 1, a) == DT_CU_GRAPH_REPLAY); /* a's graph is still held */
    CHECK(dt_cu_graph_decide(&g, 1, b) == DT_CU_GRAPH_EAGER);  /* b's streak was broken by a */
    CHECK(dt_cu_graph_decide(&g, 1, b) == DT_CU_GRAPH_CAPTURE);
    dt_cu_graph_captured(&g, b);
    CHECK(dt_cu_graph_decide(&g, 1, b) == DT_CU_GRAPH_REPLAY);
    CHECK(dt_cu_graph_decide(&g, 1, a) == DT_CU_GRAPH_EAGER); /* one graph a phase: a's is gone */
    /* an ineligible call between two identical ones breaks the streak */
    CHECK(dt_cu_graph_decide(&g, 0, a) == DT_CU_GRAPH_EAGER);
    CHECK(dt_cu_graph_decide(&g, 1, a) == DT_CU_GRAPH_EAGER);
    CHECK(dt_cu_graph_decide(&g, 1, a) == DT_CU_GRAPH_CAPTURE);
    /* a failed capture forgets everything: eager, then capture again */
    dt_cu_graph_forget(&g);
    CHECK(dt_cu_graph_decide(&g, 1, a) == DT_CU_GRAPH_EAGER);
    CHECK(dt_cu_graph_decide(&g, 1, a) == DT_CU_GRAPH_CAPTURE);
}

/* Which GEMM calls the warpgroup-MMA kernel (gemm_wgmma_cuda.cu) takes (dt_cu_gemm_wgmma_fits). */
static void test_gemm_wgmma_fits(void) {
    static _Alignas(16) unsigned char buf[64];
    const void *p = buf, *odd = buf + 8, *b4 = buf + 4;
    /* the model's activation GEMMs: forward NT with bias, GELU; input gradient NN, dGELU */
    CHECK(dt_cu_gemm_wgmma_fits(0, 1, 16384, 2304, 768, 768, 768, 2304, 0, 1.0f, 0.0f, 1, DT_CU_EPI_DEFAULT, p, p, p,
                                p, NULL));
    CHECK(dt_cu_gemm_wgmma_fits(0, 1, 16384, 3072, 768, 768, 768, 3072, 0, 1.0f, 0.0f, 1, DT_CU_EPI_GELU, p, p, p, p,
                                p));
    CHECK(dt_cu_gemm_wgmma_fits(0, 0, 16384, 3072, 768, 768, 3072, 3072, 0, 1.0f, 0.0f, 1, DT_CU_EPI_DGELU, p, p, p,
                                NULL, p));
    CHECK(dt_cu_gemm_wgmma_fits(0, 0, 16384, 768, 3072, 3072, 768, 768, 0, 1.0f, 0.0f, 1, DT_CU_EPI_DEFAULT, p, p, p,
                                NULL, NULL));
    CHECK(dt_cu_gemm_wgmma_fits(0, 1, 128, 128, 64, 64, 64, 128, 0, 1.0f, 0.0f, 1, DT_CU_EPI_DEFAULT, p, p, p, p,
                                NULL));
    CHECK(!dt_cu_gemm_wgmma_fits(0, 1, 128, 128, 64, 64, 64, 128, 0, 1.0f, 0.0f, 1, DT_CU_EPI_DEFAULT, p, p, p, b4,
                                 NULL)); /* the bias is read in 16-byte pieces */
    /* off the tiles or the kernel's contract: each refused */
    CHECK(!dt_cu_gemm_wgmma_fits(0, 1, 16320, 2304, 768, 768, 768, 2304, 0, 1.0f, 0.0f, 1, 0, p, p, p, NULL, NULL));
    CHECK(!dt_cu_gemm_wgmma_fits(0, 1, 16384, 2300, 768, 768, 768, 2304, 0, 1.0f, 0.0f, 1, 0, p, p, p, NULL, NULL));
    CHECK(!dt_cu_gemm_wgmma_fits(0, 1, 16384, 2304, 760, 768, 768, 2304, 0, 1.0f, 0.0f, 1, 0, p, p, p, NULL, NULL));
    CHECK(!dt_cu_gemm_wgmma_fits(1, 0, 768, 768, 16384, 768, 768, 768, 0, 1.0f, 0.0f, 1, 0, p, p, p, NULL, NULL));
    CHECK(!dt_cu_gemm_wgmma_fits(0, 0, 16384, 768, 768, 768, 768, 768, 1, 1.0f, 0.0f, 1, 0, p, p, p, NULL, NULL));
    CHECK(!dt_cu_gemm_wgmma_fits(0, 0, 16384, 768, 768, 768, 768, 768, 0, 2.0f, 0.0f, 1, 0, p, p, p, NULL, NULL));
    CHECK(!dt_cu_gemm_wgmma_fits(0, 0, 16384, 768, 768, 768, 768, 768, 0, 1.0f, 1.0f, 1, 0, p, p, p, NULL, NULL));
    CHECK(!dt_cu_gemm_wgmma_fits(0, 0, 1024, 1024, 64, 64, 1024, 1024, 0, 1.0f, 0.0f, 48, 0, p, p, p, NULL, NULL));
    CHECK(!dt_cu_gemm_wgmma_fits(0, 0, 16384, 768, 768, 768, 768, 768, 0, 1.0f, 0.0f, 1, DT_CU_EPI_BGRAD, p, p, p,
                                 NULL, NULL));
    CHECK(!dt_cu_gemm_wgmma_fits(0, 0, 16384, 768, 768, 768, 768, 768, 0, 1.0f, 0.0f, 1, 0, odd, p, p, NULL, NULL));
    CHECK(!dt_cu_gemm_wgmma_fits(0, 0, 16384, 768, 768, 768, 768, 768, 0, 1.0f, 0.0f, 1, 0, p, p, odd, NULL, NULL));
    CHECK(!dt_cu_gemm_wgmma_fits(0, 0, 16384, 768, 768, 772, 768, 768, 0, 1.0f, 0.0f, 1, 0, p, p, p, NULL, NULL));
    CHECK(!dt_cu_gemm_wgmma_fits(0, 0, 16384, 768, 768, 768, 640, 768, 0, 1.0f, 0.0f, 1, 0, p, p, p, NULL, NULL));
    CHECK(!dt_cu_gemm_wgmma_fits(0, 1, 16384, 3072, 768, 768, 768, 3072, 0, 1.0f, 0.0f, 1, DT_CU_EPI_GELU, p, p, p,
                                 p, NULL)); /* GELU without its aux output */
    CHECK(!dt_cu_gemm_wgmma_fits(0, 0, 16384, 3072, 768, 768, 3072, 3072, 0, 1.0f, 0.0f, 1, DT_CU_EPI_DGELU, p, p, p,
                                 p, p)); /* dGELU takes no bias */
    CHECK(!dt_cu_gemm_wgmma_fits(0, 0, 16384, 768, 768, 768, 768, 768, 0, 1.0f, 0.0f, 1, 0, NULL, p, p, NULL, NULL));
    /* DOT (the attention's D from the attproj input gradient): needs O as aux, takes no bias */
    CHECK(dt_cu_gemm_wgmma_fits(0, 0, 16384, 768, 768, 768, 768, 768, 0, 1.0f, 0.0f, 1, DT_CU_EPI_DOT, p, p, p, NULL,
                                p));
    CHECK(!dt_cu_gemm_wgmma_fits(0, 0, 16384, 768, 768, 768, 768, 768, 0, 1.0f, 0.0f, 1, DT_CU_EPI_DOT, p, p, p, NULL,
                                 NULL));
    CHECK(!dt_cu_gemm_wgmma_fits(0, 0, 16384, 768, 768, 768, 768, 768, 0, 1.0f, 0.0f, 1, DT_CU_EPI_DOT, p, p, p, p,
                                 p));
    CHECK(!dt_cu_gemm_wgmma_fits(0, 0, 16384, 768, 768, 768, 768, 768, 0, 1.0f, 0.0f, 1, DT_CU_EPI_DOT, p, p, p, NULL,
                                 odd));
}

int main(void) {
    RUN(test_parts_and_grid);
    RUN(test_ln_plan);
    RUN(test_buckets);
    RUN(test_adamw_chunks);
    RUN(test_gemm_policy);
    RUN(test_gemm_splits);
    RUN(test_launch_log);
    RUN(test_pending_reads);
    RUN(test_res_slots);
    RUN(test_graph_decide);
    RUN(test_gemm_wgmma_fits);
    return dt_test_report();
}
