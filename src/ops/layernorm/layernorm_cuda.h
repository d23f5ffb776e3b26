/* LayerNorm on the GPU (layernorm_cuda.cu). The math and each path's determinism class are
 * in layernorm.h; this header gives the launchers and the GPU dtypes. Include from .cu files
 * only. */
#ifndef DT_OPS_LAYERNORM_CUDA_H
#define DT_OPS_LAYERNORM_CUDA_H

#include "ops/cuda/cuda_common.cuh"

extern "C" {
#include "ops/dropout/dropout.h"
#include "ops/layernorm/layernorm.h"
#include "ops/layernorm/layernorm_plan.h"
}

/* Optional fused residual: when `b` is not NULL, res = a + dropout(b) is written (bf16) and
 * normalised; else a is normalised. out bf16, mean/rstd fp32 (N). weight/bias fp32 (C). */
void dt_cu_layernorm_fwd(bf16 *out, float *mean, float *rstd, bf16 *res, const bf16 *a,
                         const bf16 *b, const float *weight, const float *bias, int N, int C,
                         const dt_dropout *drop, uint32_t purpose, uint32_t layer,
                         cudaStream_t s);
/* dinp16 (bf16, N x C) += input gradient: each element becomes bf16(float(dinp16) + its
 * gradient), the sum in fp32 and one rounding (acc 0: dinp16 is only written, as if it held
 * zeros: the bits of an accumulation into a zeroed buffer); dweight/dbias (fp32, C) += their
 * gradients. part: dt_cu_ln_part_floats(N, C, 0) floats
 * (2 * dt_cu_ln_parts(N) * C).
 * Rows are taken in groups of DT_CU_LN_WARPS: block b of nparts = dt_cu_ln_parts(N) takes
 * groups b, b + nparts, ... (row w of each to its warp w, in order), a partition fixed by N.
 * det: each block writes its partials; dt_cu_parts_finish adds them in a fixed order, on
 *      stream fs (forked from s with dt_cu_fork when fs != s, so the finish overlaps the
 *      next work; `part` must then stay untouched until fs is joined). fast: each block
 *      atomically adds its partials. */
void dt_cu_layernorm_bwd(bf16 *dinp16, int acc, float *dweight, float *dbias, float *part,
                         const bf16 *dout, const bf16 *inp, const float *weight,
                         const float *mean, const float *rstd, int N, int C, cudaStream_t s,
                         cudaStream_t fs);
/* Benchmarks only (tests/gpu/bench_ops.cu): later backward calls run DT_CU_LN_BWD_RULE (the
 * full-row kernel where C is 256, 512 or 768 with 16-byte aligned weights, else the register
 * or wide kernel) or DT_CU_LN_BWD_GENERAL (the register kernel wherever it applies): the
 * same bits either way (the same partition, orders and float operations). */
#define DT_CU_HAVE_LN_BWD_FORCE 1
enum { DT_CU_LN_BWD_RULE = 0, DT_CU_LN_BWD_GENERAL };
void dt_cu_layernorm_bwd_force(int kernel);
/* Benchmarks only: later forward calls run DT_CU_LN_FWD_RULE (the full-row kernel where C is
 * 256, 512 or 768 with 16-byte aligned weights and bias and no dropout, else the register or
 * wide kernel) or DT_CU_LN_FWD_GENERAL (the register kernel wherever it applies): the same
 * bits either way. */
#define DT_CU_HAVE_LN_FWD_FORCE 1
enum { DT_CU_LN_FWD_RULE = 0, DT_CU_LN_FWD_GENERAL };
void dt_cu_layernorm_fwd_force(int kernel);
/* dt_cu_layernorm_bwd fused with the bias gradient of the linear whose backward reads
 * dinp16 as its dout: sum (fp32, C) += the column sums of dinp16 (the bf16 values as stored,
 * added as floats: what dt_cu_colsum of dinp16 computes, in another order), so dinp16 is not
 * read back for it. Branch of the sum: DT_OP_BIAS_BWD (dweight/dbias keep
 * DT_OP_LAYERNORM_BWD). det: a third block partial (the same rows as dweight/dbias), each
 * block's warps added in warp order, finished by dt_cu_parts_finish on fs; fast: each block atomically adds
 * its sums. part: dt_cu_ln_part_floats(N, C, 1) floats. The wide kernel past
 * dt_cu_ln_colsum_fused runs dt_cu_colsum over dinp16 after the kernel instead.
 * dinp16, dweight and dbias get the same bits as from dt_cu_layernorm_bwd. */
#define DT_CU_HAVE_LAYERNORM_BWD_COLSUM 1
void dt_cu_layernorm_bwd_colsum(bf16 *dinp16, int acc, float *dweight, float *dbias, float *sum,
                                float *part, const bf16 *dout, const bf16 *inp, const float *weight,
                                const float *mean, const float *rstd, int N, int C, cudaStream_t s,
                                cudaStream_t fs);
/* dt_cu_layernorm_bwd (sum NULL) or dt_cu_layernorm_bwd_colsum with acc 1, out of place: the
 * incoming gradient is read from dres and dinp16 = bf16(float(dres) + its gradient) written
 * (dres and dinp16 the same buffer, or buffers that do not overlap); the same bits as the
 * in-place call on a copy of dres. For a backward that keeps each residual gradient (the
 * batched weight gradients of gpt_cuda.cu). */
#define DT_CU_HAVE_LAYERNORM_BWD_FROM 1
void dt_cu_layernorm_bwd_from(bf16 *dinp16, const bf16 *dres, float *dweight, float *dbias, float *sum,
                              float *part, const bf16 *dout, const bf16 *inp, const float *weight,
                              const float *mean, const float *rstd, int N, int C, cudaStream_t s,
                              cudaStream_t fs);

#endif
