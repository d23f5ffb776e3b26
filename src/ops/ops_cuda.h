/* Every launcher of the CUDA backend, for the callers that use many families (the GPU model,
 * the training loop, the GPU tests): one header per family (ops/<family>/<family>_cuda.h)
 * gives its launchers, shapes and dtypes; the math and each path's determinism class are in
 * the family's CPU header (<family>.h), with the family's chooser of the path.
 *
 * Precision: activations and matmul inputs bf16; master weights, gradients, LayerNorm
 * statistics, losses fp32; every reduction accumulates in fp32 (norms in fp64).
 * Branches: every det/fast choice goes through the family's chooser (dt_<family>_choose),
 * which reads dt_op_variant() for the op, exactly as the CPU ops do. Every launcher enqueues
 * on `s` and returns at once; launch errors surface at the next dt_cu_check of
 * cudaGetLastError(). Include from .cu files only. */
#ifndef DT_OPS_OPS_CUDA_H
#define DT_OPS_OPS_CUDA_H

#include "ops/adamw/adamw_cuda.h"
#include "ops/attention/attention_cuda.h"
#include "ops/crossentropy/crossentropy_cuda.h"
#include "ops/dropout/dropout_cuda.h"
#include "ops/encoder/encoder_cuda.h"
#include "ops/gelu/gelu_cuda.h"
#include "ops/gemm/gemm_cuda.h"
#include "ops/layernorm/layernorm_cuda.h"
#include "ops/reduce/reduce_cuda.h"

extern "C" {
#include "ops/op.h"
}

#endif
