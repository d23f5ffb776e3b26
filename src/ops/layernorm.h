/* LayerNorm over the last dimension, eps = 1e-5.
 * Shapes: inp, out (N,C) with N = B*T rows; weight, bias (C); mean, rstd (N).
 * Forward and the input gradient work row by row: deterministic by nature.
 * dweight/dbias (DT_OP_LAYERNORM_BWD) reduce over N rows:
 *  det  — fixed chunks of DT_ROW_CHUNK rows, chunk partials added in chunk order.
 *  fast — per-thread partials merged with atomics in arrival order. */
#ifndef DT_OPS_LAYERNORM_H
#define DT_OPS_LAYERNORM_H

#include "ops/op.h"

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
