/* The LayerNorm backward's CUDA plans (src/ops/layernorm/layernorm_plan.c,
 * layernorm_plan.h): the partial count depends on sizes only; the shared memory and scratch
 * fit, with the fused column sum too (whose fallback's partials are the reduce family's,
 * reduce_plan.h). Runs on the CPU (CI). */
#include "ops/layernorm/layernorm_plan.h"
#include "ops/reduce/reduce_plan.h"

#include "dt_test.h"

static void test_ln_parts(void) {
    CHECK(dt_cu_ln_parts(16384) == 16384 / DT_CU_LN_ROWS && dt_cu_ln_parts(DT_CU_LN_ROWS + 1) == 2);
    CHECK(dt_cu_ln_parts(16384) == 256); /* one wave of 2 blocks an SM on a 132-SM H200 */
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

int main(void) {
    RUN(test_ln_parts);
    RUN(test_ln_plan);
    return dt_test_report();
}
