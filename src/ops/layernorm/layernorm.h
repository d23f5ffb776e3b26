/* LayerNorm over the last dimension, eps = 1e-5.
 * Shapes: inp, out (N,C) with N = B*T rows; weight, bias (C); mean, rstd (N). CPU: fp32.
 * CUDA (layernorm_cuda.h): bf16 rows, fp32 weights and statistics, the forward optionally
 * fused with the residual add, the backward accumulating into a bf16 dinp.
 * Forward and the input gradient work row by row (one warp a row on the GPU, butterfly
 * sums): deterministic by nature.
 * dweight/dbias reduce over N rows; paths (DT_OP_LAYERNORM_BWD), chosen by
 * dt_layernorm_choose:
 *  det, CPU  — fixed chunks of DT_ROW_CHUNK rows, chunk partials added in chunk order.
 *  fast, CPU — per-thread partials merged with `omp atomic` in arrival order.
 *  det, CUDA — dt_cu_ln_parts(N) blocks over a partition of the rows fixed by N, each
 *        block's warps adding their rows in row order and the warps in warp order; the block
 *        partials added by dt_cu_parts_finish in an order fixed by the indices.
 *  fast, CUDA — the same block sums added with atomicAdd (arrival order).
 * The fused column sum of dinp (dt_cu_layernorm_bwd_colsum, a bias gradient) takes the
 * reduce family's path for DT_OP_BIAS_BWD (reduce.h). */
#ifndef DT_OPS_LAYERNORM_H
#define DT_OPS_LAYERNORM_H

#include "ops/op.h"

typedef enum dt_layernorm_path { DT_LAYERNORM_DET = 0, DT_LAYERNORM_FAST = 1 } dt_layernorm_path;
/* The path of dweight/dbias now: det when dt_op_variant(DT_OP_LAYERNORM_BWD) says det
 * (always in deterministic mode), else fast (layernorm_plan.c). */
dt_layernorm_path dt_layernorm_choose(void);

void dt_layernorm_fwd(float *out, float *mean, float *rstd, const float *inp,
                      const float *weight, const float *bias, int N, int C);
/* dinp += gradient; dweight, dbias += their gradients. */
void dt_layernorm_bwd(float *dinp, float *dweight, float *dbias, const float *dout,
                      const float *inp, const float *weight, const float *mean,
                      const float *rstd, int N, int C);
void dt_layernorm_bwd_det(float *dinp, float *dweight, float *dbias, const float *dout,
                          const float *inp, const float *weight, const float *mean,
                          const float *rstd, int N, int C);
void dt_layernorm_bwd_fast(float *dinp, float *dweight, float *dbias, const float *dout,
                           const float *inp, const float *weight, const float *mean,
                           const float *rstd, int N, int C);

#endif
