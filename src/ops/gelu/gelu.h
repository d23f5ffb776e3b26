/* GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), and the
 * residual add. Shapes: n elements (CPU fp32; GPU bf16, gelu_cuda.h).
 * One path, deterministic by nature (no chooser): every output element is written by one
 * thread from its own inputs, no reduction. The GPU's backward fused with a bias gradient
 * (dt_cu_gelu_bwd_colsum) takes the reduce family's path for DT_OP_BIAS_BWD (reduce.h). */
#ifndef DT_OPS_GELU_H
#define DT_OPS_GELU_H

#include <stddef.h>

/* tanh in float within 3 ulp, from plain float arithmetic (no libm): the same bits with
 * any C library, and the GELU loops vectorise. */
float dt_tanhf(float u);
void dt_gelu_fwd(float *out, const float *inp, size_t n);
/* dinp = dout * gelu'(inp) (overwritten). */
void dt_gelu_bwd(float *dinp, const float *inp, const float *dout, size_t n);
/* out = a + b. */
void dt_residual_fwd(float *out, const float *a, const float *b, size_t n);
/* da += dout; db += dout. */
void dt_residual_bwd(float *da, float *db, const float *dout, size_t n);

#endif
