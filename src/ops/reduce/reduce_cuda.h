/* Column sums (bias gradients) and whole-buffer sums (norms, mean loss) on the GPU
 * (reduce_cuda.cu). The math and each path's determinism class are in reduce.h; this header
 * gives the launchers and the GPU dtypes. Include from .cu files only. */
#ifndef DT_OPS_REDUCE_CUDA_H
#define DT_OPS_REDUCE_CUDA_H

#include "ops/cuda/cuda_common.cuh"

extern "C" {
#include "ops/reduce/reduce.h"
#include "ops/reduce/reduce_plan.h"
}

/* ---- bias gradient / column sums, DT_OP_BIAS_BWD ------------------------------------ */
/* acc (fp32, cols) += column sums of x (bf16, rows x cols), cols % 8 == 0. part: dt_cu_colsum_parts(rows)
 * * cols floats. Both branches: row-chunk partials (DT_CU_COLSUM_ROWS rows each, a fixed
 * order inside), then dt_cu_colsum_finish on fs (forked from s with dt_cu_fork when fs != s;
 * `part` must then stay untouched until fs is joined). */
void dt_cu_colsum(float *acc, float *part, const bf16 *x, int rows, int cols, cudaStream_t s,
                  cudaStream_t fs);
/* Forks fs from s and adds the nparts chunk partials into acc on fs. det: dt_cu_parts_finish
 * (fixed order); fast: 16 group sums per column added with atomics (arrival order). */
void dt_cu_colsum_finish(float *acc, const float *part, int nparts, int cols, cudaStream_t s,
                         cudaStream_t fs);
/* Makes fs wait for the work enqueued on s so far (no-op when fs == s). */
void dt_cu_fork(cudaStream_t s, cudaStream_t fs);

/* det finish of block partials: acc[c] += sum over k of part[k*cols + c] (and acc2 from the
 * second half part[(nparts + k)*cols + c] when acc2 is not NULL). Per column, thread ty of
 * 8 adds partials ty, ty+8, ... in order, then the 8 sums are added in ty order: the order
 * is fixed by the indices. */
void dt_cu_parts_finish(float *acc, float *acc2, const float *part, int nparts, int cols,
                        cudaStream_t s);

/* ---- whole-buffer sums, DT_OP_NORM / DT_OP_CROSSENTROPY ----------------------------- */
/* out[0] = sum of x[i] (square = 0) or x[i]^2 (square = 1) in fp64; zeros (if not NULL)
 * = number of x[i] == 0. part: 2 * DT_CU_RED_MAX_BLOCKS doubles of scratch.
 * det: dt_cu_reduce_blocks(n) blocks, fixed element-to-thread assignment, fixed-order
 * block trees, one block adds the partials in block order.
 * fast: blocks as many as the device keeps busy, partials added with atomics.
 * det is the caller's dt_reduce_choose(op) == DT_REDUCE_DET for the op whose sum this is
 * (DT_OP_NORM for the norms; the mean loss asks dt_crossentropy_choose). */
void dt_cu_reduce(double *out, long long *zeros, double *part, const float *x, size_t n,
                  int square, int det, cudaStream_t s);
/* out[0] = part[0] + ... + part[nparts - 1] in fp64, in dt_cu_reduce's fixed order (one
 * block; thread t adds partials t, t + 1024, ..., then the block tree). */
void dt_cu_sum_parts(double *out, const double *part, int nparts, cudaStream_t s);

#endif
