/* Reductions whose order matters: column sums over rows (bias / norm-weight gradients) and
 * whole-buffer sums (global norms, mean loss).
 *
 * det  — rows (elements) are cut into fixed chunks of DT_ROW_CHUNK rows (DT_ELEM_CHUNK
 *        elements); each chunk is summed in index order, then the chunk partials are summed
 *        in chunk order. The chunking depends on the sizes only, never on the thread count.
 * fast — each thread sums its share and adds it to the result with an atomic; the order of
 *        the atomic adds is the order threads finish, so bits can change between runs. */
#ifndef DT_OPS_REDUCE_H
#define DT_OPS_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#define DT_ROW_CHUNK 32
#define DT_ELEM_CHUNK 16384

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
