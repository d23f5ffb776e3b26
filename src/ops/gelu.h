/* GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), and the
 * residual add. Elementwise: deterministic by nature. */
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
