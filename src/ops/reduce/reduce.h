/* Reductions whose order matters: column sums over rows (bias / norm-weight gradients) and
 * whole-buffer sums (global norms, mean loss).
 *
 * Math: colsum acc[c] += sum_r x[r*cols + c] over a (rows, cols) row-major buffer; sumsq
 * sum_i x[i]^2 and sum sum_i x[i] over n elements, in double; count_zeros the number of
 * x[i] == 0. The CUDA kernels (reduce_cuda.h) take bf16 rows for the column sums and fp32
 * for the whole-buffer sums, accumulating in fp32 and fp64.
 *
 * Paths, chosen by dt_reduce_choose for the op whose reduction it is (DT_OP_BIAS_BWD: the
 * bias gradients' column sums, DT_OP_NORM: the global grad and param norms,
 * DT_OP_CROSSENTROPY: the mean loss, through dt_crossentropy_choose):
 *  det, CPU  — rows (elements) are cut into fixed chunks of DT_ROW_CHUNK rows (DT_ELEM_CHUNK
 *        elements); each chunk is summed in index order, then the chunk partials in chunk
 *        order. The chunking depends on the sizes only, never on the thread count.
 *  fast, CPU — each thread sums its share and adds it to the result with an atomic (or an
 *        OpenMP reduction clause): the order threads finish, so bits can change between runs.
 *  det, CUDA — column sums: DT_CU_COLSUM_ROWS-row chunk partials (colsum_cuda.cuh's fixed
 *        order), added by dt_cu_parts_finish in an order fixed by the indices; whole
 *        buffers: dt_cu_reduce_blocks(n) blocks, a fixed element-to-thread assignment and
 *        fixed block trees, the block partials added in block order by one block.
 *  fast, CUDA — the same chunk partials added with atomics (16 group sums a column); whole
 *        buffers: as many blocks as keep the device busy, partials added with double
 *        atomics: arrival order.
 * count_zeros is an integer count: exact in any order, one path. */
#ifndef DT_OPS_REDUCE_H
#define DT_OPS_REDUCE_H

#include "ops/op.h"

#include <stddef.h>
#include <stdint.h>

#define DT_ROW_CHUNK 32
#define DT_ELEM_CHUNK 16384

typedef enum dt_reduce_path { DT_REDUCE_DET = 0, DT_REDUCE_FAST = 1 } dt_reduce_path;
/* The path of a reduction made for op `op`: det when dt_op_variant(op) says det (always in
 * deterministic mode), else fast. Every caller of either backend asks here (reduce_plan.c). */
dt_reduce_path dt_reduce_choose(dt_op_id op);

/* acc[c] += sum_r x[r*cols + c]. */
void dt_colsum_det(const float *x, int rows, int cols, float *acc);
void dt_colsum_fast(const float *x, int rows, int cols, float *acc);

/* sum_i x[i]^2 in double. */
double dt_sumsq_det(const float *x, size_t n);
double dt_sumsq_fast(const float *x, size_t n);
/* sum_i x[i] in double. */
double dt_sum_det(const float *x, size_t n);
double dt_sum_fast(const float *x, size_t n);
/* Number of elements equal to zero (integer: exact in any order). */
int64_t dt_count_zeros(const float *x, size_t n);

#endif
