/* The reduce family's CUDA plans (src/ops/reduce/reduce_plan.c, reduce_plan.h): the column
 * sums' partial counts and the whole-buffer sum's grid depend on sizes only. Runs on the CPU
 * (CI). */
#include "ops/reduce/reduce_plan.h"

#include "dt_test.h"

static void test_parts_and_grid(void) {
    CHECK(dt_cu_colsum_parts(1) == 1);
    CHECK(dt_cu_colsum_parts(DT_CU_COLSUM_ROWS) == 1);
    CHECK(dt_cu_colsum_parts(DT_CU_COLSUM_ROWS + 1) == 2);
    CHECK(dt_cu_colsum_parts(16384) == 16384 / DT_CU_COLSUM_ROWS);
    CHECK(dt_cu_reduce_blocks(0) == 1);
    CHECK(dt_cu_reduce_blocks(1) == 1);
    CHECK(dt_cu_reduce_blocks((size_t)DT_CU_RED_THREADS * 8 + 1) == 2);
    CHECK(dt_cu_reduce_blocks((size_t)1 << 30) == DT_CU_RED_MAX_BLOCKS);
}

int main(void) {
    RUN(test_parts_and_grid);
    return dt_test_report();
}
