/* The LayerNorm family's chooser (layernorm.h) and the host-side plans of its CUDA kernels
 * (layernorm_plan.h). Plain C, single-threaded. */
#include "ops/layernorm/layernorm_plan.h"

#include "ops/layernorm/layernorm.h"

dt_layernorm_path dt_layernorm_choose(void) {
    return dt_op_variant(DT_OP_LAYERNORM_BWD) == DT_VARIANT_DET ? DT_LAYERNORM_DET : DT_LAYERNORM_FAST;
}

int dt_cu_ln_parts(int rows) { return (rows + DT_CU_LN_ROWS - 1) / DT_CU_LN_ROWS; }

size_t dt_cu_ln_bwd_smem(int C, int colsum) {
    return sizeof(float) * (size_t)(2 + (colsum != 0)) * DT_CU_LN_WARPS * (size_t)C;
}

size_t dt_cu_ln_bwd_full_smem(int C, int colsum) { return dt_cu_ln_bwd_smem(C, colsum) + sizeof(float) * (size_t)C; }

int dt_cu_ln_full_rows(int C, int nv) { return nv >= 1 && nv <= 3 && C == 256 * nv; }

int dt_cu_ln_colsum_fused(int C, int wide) { return !wide || dt_cu_ln_bwd_smem(C, 1) <= DT_CU_LN_SMEM_MAX; }

size_t dt_cu_ln_part_floats(int rows, int C, int colsum) {
    return (size_t)(2 + (colsum != 0)) * (size_t)dt_cu_ln_parts(rows) * (size_t)C;
}
