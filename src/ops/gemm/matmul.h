/* Linear layer: out (N,OC) = inp (N,IC) @ weight^T + bias, weight stored (OC,IC) [out, in].
 * GEMMs go through gemm.h (DT_OP_GEMM, dt_gemm_choose). The bias gradient reduces dout over
 * N rows with dt_colsum_det / dt_colsum_fast (reduce.h), the path dt_reduce_choose gives
 * for DT_OP_BIAS_BWD. */
#ifndef DT_OPS_MATMUL_H
#define DT_OPS_MATMUL_H

#include "ops/op.h"

/* bias may be NULL. */
void dt_matmul_fwd(float *out, const float *inp, const float *weight, const float *bias,
                   int N, int IC, int OC);
/* dinp = dout @ weight (overwritten); dweight += dout^T @ inp; dbias += colsum(dout) (if dbias). */
void dt_matmul_bwd(float *dinp, float *dweight, float *dbias, const float *dout,
                   const float *inp, const float *weight, int N, int IC, int OC);
/* dbias += column sums of dout (N,OC), branch by DT_OP_BIAS_BWD. */
void dt_bias_bwd(float *dbias, const float *dout, int N, int OC);

#endif
