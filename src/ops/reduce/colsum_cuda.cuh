/* The column-sum block shared by the bias-gradient kernels (reduce_cuda.cu: dt_cu_colsum;
 * gelu_cuda.cu: dt_cu_gelu_bwd_colsum): one block of (32, DT_CU_COLSUM_LANES) threads owns
 * DT_CU_COLSUM_ROWS rows (chunk p) of 256 columns.
 *
 * Why the order is fixed: thread (tx, ty) adds rows r0 + ty, r0 + ty + LANES, ... of columns
 * 8 tx .. 8 tx + 7 in row order; the LANES row sums of a column are then added in ty order
 * by one thread, which writes that chunk partial. Every addition is placed by the thread
 * and block indices alone, and both kernels add the same bf16 values in the same order, so
 * the fused GELU backward gives the bits of dt_cu_gelu_bwd followed by dt_cu_colsum. The
 * partials are then added by dt_cu_colsum_finish: in a fixed order (det) or with atomics
 * (fast). Both branches write partials: atomics straight from these blocks (one per chunk
 * and column) were measured slower than the det path. */
#ifndef DT_OPS_COLSUM_CUDA_CUH
#define DT_OPS_COLSUM_CUDA_CUH

#include "ops/cuda/cuda_common.cuh"

extern "C" {
#include "ops/reduce/reduce_plan.h"
}

#define DT_CU_COLSUM_LANES 8 /* = 8 columns per vector: the block end relies on it */
/* Row vectors a thread loads before adding them (memory-level parallelism). */
#define DT_CU_COLSUM_BATCH 8

/* Adds the 8 values of v into s (column order within the vector). */
static __device__ __forceinline__ void dt_cu_colsum_add8(float s[8], const dt_bf16x8 &v) {
#pragma unroll
    for (int k = 0; k < 8; k++) s[k] += __bfloat162float(v.v[k]);
}

/* The rows of chunk p that thread (tx, ty) adds, in row order: r0 = p DT_CU_COLSUM_ROWS + ty,
 * then every DT_CU_COLSUM_LANES-th row of the chunk below `rows`. The loads of BATCH rows are
 * issued (load(r) returns row r's loaded data) before their values are made and added
 * (value(loaded, r) returns the bf16 row vector to add; it may also store it), so the batch
 * size moves memory-level parallelism, never the order of the adds: every kernel that sums
 * columns this way adds the same values in the same order. */
template <int BATCH, typename Load, typename Value>
static __device__ __forceinline__ void dt_cu_colsum_rows(float s[8], int r0, int rows, Load load, Value value) {
#pragma unroll
    for (int i = 0; i < DT_CU_COLSUM_ROWS / DT_CU_COLSUM_LANES; i += BATCH) {
        decltype(load(0)) v[BATCH];
#pragma unroll
        for (int j = 0; j < BATCH; j++) {
            int r = r0 + (i + j) * DT_CU_COLSUM_LANES;
            if (r < rows) v[j] = load(r);
        }
#pragma unroll
        for (int j = 0; j < BATCH; j++) {
            int r = r0 + (i + j) * DT_CU_COLSUM_LANES;
            if (r < rows) dt_cu_colsum_add8(s, value(v[j], r));
        }
    }
}

/* The block's end: the LANES row sums of each column added in ty order, then written as
 * chunk p's partial. s holds this thread's sums of columns c .. c + 7 (zeros when
 * c >= cols). */
static __device__ __forceinline__ void dt_cu_colsum_block_end(float *part, float (*sh)[8 * 33],
                                                              const float s[8], int cols, int p) {
    int tx = threadIdx.x, ty = threadIdx.y;
#pragma unroll
    for (int k = 0; k < 8; k++) sh[ty][k * 33 + tx] = s[k]; /* conflict-free */
    __syncthreads();
    /* warp ty sums the column 8 lane + ty of the block: vector lane, element ty */
    int c = (blockIdx.x * 32 + tx) * 8 + ty;
    if (c >= cols) return;
    float t = 0.0f;
#pragma unroll
    for (int l = 0; l < DT_CU_COLSUM_LANES; l++) t += sh[l][ty * 33 + tx];
    part[(size_t)p * cols + c] = t;
}

#endif
