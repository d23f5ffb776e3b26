/* CPU linear layer (see matmul.h). */
#include "ops/gemm/matmul.h"

#include "ops/gemm/gemm.h"
#include "ops/reduce/reduce.h"

void dt_matmul_fwd(float *out, const float *inp, const float *weight, const float *bias,
                   int N, int IC, int OC) {
    if (bias) {
#pragma omp parallel for schedule(static)
        for (int i = 0; i < N; i++)
            for (int o = 0; o < OC; o++) out[(size_t)i * OC + o] = bias[o];
    }
    dt_gemm(0, 1, N, OC, IC, 1.0f, inp, IC, weight, IC, bias ? 1.0f : 0.0f, out, OC);
}

void dt_bias_bwd(float *dbias, const float *dout, int N, int OC) {
    if (dt_reduce_choose(DT_OP_BIAS_BWD) == DT_REDUCE_DET) dt_colsum_det(dout, N, OC, dbias);
    else dt_colsum_fast(dout, N, OC, dbias);
}

void dt_matmul_bwd(float *dinp, float *dweight, float *dbias, const float *dout,
                   const float *inp, const float *weight, int N, int IC, int OC) {
    dt_gemm(0, 0, N, IC, OC, 1.0f, dout, OC, weight, IC, 0.0f, dinp, IC);
    dt_gemm(1, 0, OC, IC, N, 1.0f, dout, OC, inp, IC, 1.0f, dweight, IC);
    if (dbias) dt_bias_bwd(dbias, dout, N, OC);
}
