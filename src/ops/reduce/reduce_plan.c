/* The reduce family's chooser (reduce.h) and the host-side plans of its CUDA kernels
 * (reduce_plan.h). Plain C, single-threaded. */
#include "ops/reduce/reduce_plan.h"

#include "ops/reduce/reduce.h"

dt_reduce_path dt_reduce_choose(dt_op_id op) {
    return dt_op_variant(op) == DT_VARIANT_DET ? DT_REDUCE_DET : DT_REDUCE_FAST;
}

int dt_cu_colsum_parts(int rows) { return (rows + DT_CU_COLSUM_ROWS - 1) / DT_CU_COLSUM_ROWS; }

int dt_cu_reduce_blocks(size_t n) {
    size_t per_block = (size_t)DT_CU_RED_THREADS * 8;
    size_t b = (n + per_block - 1) / per_block;
    if (b < 1) b = 1;
    if (b > DT_CU_RED_MAX_BLOCKS) b = DT_CU_RED_MAX_BLOCKS;
    return (int)b;
}
