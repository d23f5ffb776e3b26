/* The GEMM family's CUDA plans (src/ops/gemm/gemm_plan.c, gemm_plan.h): the det policy
 * never picks an in-place split-K candidate (the policy gemm_cuda.cu applies); our split-K
 * rule is a function of the sizes only; which calls the warpgroup-MMA kernel takes. Runs on
 * the CPU (CI). */
#include "ops/gemm/gemm_plan.h"

#include "dt_test.h"

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
    RUN(test_gemm_policy);
    RUN(test_gemm_splits);
    RUN(test_gemm_wgmma_fits);
    return dt_test_report();
}
