/* Host-side plans of the reduce family's CUDA kernels (reduce_cuda.cu, colsum_cuda.cuh), in
 * plain C so CI tests them: how many row partials a column sum writes and how many blocks a
 * whole-buffer sum takes. Functions of the sizes only (never of the GPU, its SM count or
 * timing), so a det kernel reduces in the same order on every launch and every H200. */
#ifndef DT_OPS_REDUCE_PLAN_H
#define DT_OPS_REDUCE_PLAN_H

#ifdef __cplusplus
extern "C" {
#endif

#include <stddef.h>

/* Rows per partial of the column sums (bias gradients). */
#define DT_CU_COLSUM_ROWS 64
/* Elements one thread of the det whole-buffer reduction handles per grid pass. */
#define DT_CU_RED_THREADS 256
#define DT_CU_RED_MAX_BLOCKS 1024

/* Number of row partials for a column sum over `rows` rows: ceil(rows / DT_CU_COLSUM_ROWS). */
int dt_cu_colsum_parts(int rows);
/* Blocks of the whole-buffer reduction of n elements: enough for one pass of
 * DT_CU_RED_THREADS-thread blocks with 8 elements per thread, at most DT_CU_RED_MAX_BLOCKS,
 * at least 1. Depends on n only. */
int dt_cu_reduce_blocks(size_t n);

#ifdef __cplusplus
}
#endif

#endif
