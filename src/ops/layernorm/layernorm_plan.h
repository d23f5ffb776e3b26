/* Host-side plans of the LayerNorm backward's CUDA kernels (layernorm_cuda.cu), in plain C
 * so CI tests them: how many block partials it writes, its shared memory and scratch with and
 * without the fused column sum, and which widths take the full-row kernels. Functions of the
 * sizes only (never of the GPU, its SM count or timing), so a det kernel reduces in the same
 * order on every launch and every H200. */
#ifndef DT_OPS_LAYERNORM_PLAN_H
#define DT_OPS_LAYERNORM_PLAN_H

#ifdef __cplusplus
extern "C" {
#endif

#include <stddef.h>

/* Rows per partial of LayerNorm dweight/dbias. The backward takes its rows in interleaved
 * groups (layernorm_cuda.h), DT_CU_LN_ROWS a block on average: 64 makes 256 blocks at
 * N = 16384, one wave of 2 blocks an SM on an H200, measured 5-7% faster than 32 rows (2
 * waves) and 14% faster than 128 (half the slots idle). */
#define DT_CU_LN_ROWS 64

/* Number of LayerNorm backward partials (= blocks): ceil(rows / DT_CU_LN_ROWS). */
int dt_cu_ln_parts(int rows);
/* The LayerNorm backward's blocks: DT_CU_LN_WARPS warps, each accumulating per-channel
 * vectors in its own shared row: dweight and dbias, plus the column sums of dinp16 when the
 * sum is fused (dt_cu_layernorm_bwd_colsum). Dynamic shared memory is capped at
 * DT_CU_LN_SMEM_MAX bytes (the opt-in limit set on every backward kernel). */
#define DT_CU_LN_WARPS 8
#define DT_CU_LN_SMEM_MAX (200u * 1024u)
/* Bytes of dynamic shared memory of one backward block for C channels: (2 + colsum)
 * vectors of C floats per warp. */
size_t dt_cu_ln_bwd_smem(int C, int colsum);
/* The same for the full-row kernel (layernorm_cuda.cu: C = 256, 512, 768): the C weights
 * after the warps' vectors. */
size_t dt_cu_ln_bwd_full_smem(int C, int colsum);
/* Whether the full-row LayerNorm kernels (forward and backward) take rows of C channels held
 * as nv 8-channel vectors a lane (layernorm_cuda.cu's ln_nv; 0: not 16-byte aligned): whole
 * rows, C = 256 nv, and nv <= 3 (the backward keeps its accumulators in registers up to
 * there): C 256, 512, 768. 1 or 0. */
int dt_cu_ln_full_rows(int C, int nv);
/* Whether the fused column sum runs inside the backward kernel: always in the register
 * kernel (C <= 2048, 16-byte aligned weights); in the wide kernel (wide != 0) while the
 * three vectors fit DT_CU_LN_SMEM_MAX (C <= 2133); otherwise the launcher sums dinp16 with
 * dt_cu_colsum after the kernel (same operands, another order). */
int dt_cu_ln_colsum_fused(int C, int wide);
/* Floats of partial scratch a LayerNorm backward over `rows` rows of C channels needs:
 * 2 (dweight, dbias) or 3 (with the fused column sum) vectors per block. The third
 * region also holds the dt_cu_colsum partials of the unfused fallback (fewer chunks). */
size_t dt_cu_ln_part_floats(int rows, int C, int colsum);

#ifdef __cplusplus
}
#endif

#endif
