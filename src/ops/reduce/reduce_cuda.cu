/* Column sums (bias gradients) and whole-buffer sums (norms, mean loss) on the GPU
 * (see reduce.h, reduce_cuda.h). */
#include "ops/reduce/reduce_cuda.h"

#include "ops/reduce/colsum_cuda.cuh"

/* Column sums of one row chunk p = blockIdx.y; the order is colsum_cuda.cuh's. Each thread
 * loads DT_CU_COLSUM_BATCH row vectors before adding them in row order. */
__global__ void __launch_bounds__(256) colsum_part_kernel(float *part, const bf16 *x, int rows,
                                                          int cols) {
    __shared__ float sh[DT_CU_COLSUM_LANES][8 * 33];
    int c = (blockIdx.x * 32 + threadIdx.x) * 8, p = blockIdx.y;
    int r0 = p * DT_CU_COLSUM_ROWS + threadIdx.y;
    float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    if (c < cols)
        dt_cu_colsum_rows<DT_CU_COLSUM_BATCH>(
            s, r0, rows, [&](int r) { return dt_ld8(x + (size_t)r * cols + c); },
            [](const dt_bf16x8 &v, int) { return v; });
    dt_cu_colsum_block_end(part, sh, s, cols, p);
}

/* det finish (see dt_cu_parts_finish): block (32, 8), blockIdx.y picks acc or acc2. */
__global__ void parts_finish_kernel(float *acc, float *acc2, const float *part, int nparts, int cols) {
    __shared__ float sh[8][33];
    int tx = threadIdx.x, ty = threadIdx.y, c = blockIdx.x * 32 + tx;
    const float *p = part + (size_t)blockIdx.y * nparts * cols;
    float s = 0.0f;
    if (c < cols)
        for (int k = ty; k < nparts; k += 8) s += p[(size_t)k * cols + c];
    sh[ty][tx] = s;
    __syncthreads();
    if (ty == 0 && c < cols) {
        float t = 0.0f;
        for (int k = 0; k < 8; k++) t += sh[k][tx];
        float *a = blockIdx.y ? acc2 : acc;
        a[c] += t;
    }
}

/* fast finish: block (32, 8) of group g = blockIdx.y (of PARTS_GROUPS) sums partials
 * g, g + PARTS_GROUPS, ... of its 32 columns and adds the sum with one atomic per column:
 * PARTS_GROUPS atomics per column from different blocks, in arrival order. */
#define PARTS_GROUPS 16
__global__ void parts_atomic_kernel(float *acc, const float *part, int nparts, int cols) {
    __shared__ float sh[8][33];
    int tx = threadIdx.x, ty = threadIdx.y, c = blockIdx.x * 32 + tx;
    float s = 0.0f;
    if (c < cols)
        for (int k = blockIdx.y + PARTS_GROUPS * ty; k < nparts; k += 8 * PARTS_GROUPS)
            s += part[(size_t)k * cols + c];
    sh[ty][tx] = s;
    __syncthreads();
    if (ty == 0 && c < cols) {
        float t = 0.0f;
        for (int k = 0; k < 8; k++) t += sh[k][tx];
        atomicAdd(&acc[c], t);
    }
}

void dt_cu_parts_finish(float *acc, float *acc2, const float *part, int nparts, int cols,
                        cudaStream_t s) {
    dim3 g(dt_cu_div((size_t)cols, 32), acc2 ? 2 : 1), b(32, 8);
    parts_finish_kernel<<<dt_cu_noted(g, b, 0, "parts_finish_kernel"), b, 0, s>>>(acc, acc2, part, nparts, cols);
}

void dt_cu_colsum_finish(float *acc, const float *part, int nparts, int cols, cudaStream_t s,
                         cudaStream_t fs) {
    dt_cu_fork(s, fs);
    if (dt_reduce_choose(DT_OP_BIAS_BWD) == DT_REDUCE_DET) {
        dt_cu_parts_finish(acc, NULL, part, nparts, cols, fs);
    } else {
        dim3 g(dt_cu_div((size_t)cols, 32), PARTS_GROUPS), b(32, 8);
        parts_atomic_kernel<<<dt_cu_noted(g, b, 0, "parts_atomic_kernel"), b, 0, fs>>>(acc, part, nparts, cols);
    }
}

void dt_cu_fork(cudaStream_t s, cudaStream_t fs) {
    static cudaEvent_t ev;
    if (fs == s) return;
    if (!ev) cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    cudaEventRecord(ev, s);
    cudaStreamWaitEvent(fs, ev, 0);
}

void dt_cu_colsum(float *acc, float *part, const bf16 *x, int rows, int cols, cudaStream_t s,
                  cudaStream_t fs) {
    int nparts = dt_cu_colsum_parts(rows);
    dim3 g(dt_cu_div((size_t)cols / 8, 32), (unsigned)nparts), b(32, DT_CU_COLSUM_LANES);
    colsum_part_kernel<<<dt_cu_noted(g, b, 0, "colsum_part_kernel"), b, 0, s>>>(part, x, rows, cols);
    dt_cu_colsum_finish(acc, part, nparts, cols, s, fs);
}

/* Each thread visits the float4 vectors g, g + stride, ... in order (g its global index;
 * the four elements of a vector in order), then the scalar tail elements 4 n4 + g, ...; in
 * fp64; the block adds its threads in the fixed tree of dt_block_sum. vec: x is 16-byte
 * aligned (else every element goes the scalar way); a function of the buffer, not of timing. */
__global__ void reduce_part_kernel(double *out, long long *zeros, double *part, long long *zpart,
                                   const float *x, size_t n, int square, int det, int vec) {
    __shared__ double sd[32];
    __shared__ long long sz[32];
    size_t stride = (size_t)gridDim.x * blockDim.x, g = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t n4 = vec ? n / 4 : 0;
    double acc = 0.0;
    long long z = 0;
    const float4 *x4 = reinterpret_cast<const float4 *>(x);
#pragma unroll 4
    for (size_t i = g; i < n4; i += stride) {
        float4 q = x4[i];
        float e[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
        for (int k = 0; k < 4; k++) {
            acc += square ? (double)e[k] * (double)e[k] : (double)e[k];
            z += e[k] == 0.0f;
        }
    }
    for (size_t i = 4 * n4 + g; i < n; i += stride) {
        float v = x[i];
        acc += square ? (double)v * (double)v : (double)v;
        z += v == 0.0f;
    }
    acc = dt_block_sum(acc, sd);
    z = dt_block_sum(z, sz);
    if (threadIdx.x == 0) {
        if (det) {
            part[blockIdx.x] = acc;
            zpart[blockIdx.x] = z;
        } else {
            atomicAdd(out, acc);
            if (zeros) atomicAdd((unsigned long long *)zeros, (unsigned long long)z);
        }
    }
}

/* det: one block adds the block partials; thread t takes partials t, t + 1024, ...; zpart
 * may be NULL (no zero count) */
__global__ void reduce_finish_kernel(double *out, long long *zeros, const double *part,
                                     const long long *zpart, int nparts) {
    __shared__ double sd[32];
    __shared__ long long sz[32];
    double acc = 0.0;
    long long z = 0;
    for (int k = threadIdx.x; k < nparts; k += blockDim.x) {
        acc += part[k];
        if (zpart) z += zpart[k];
    }
    acc = dt_block_sum(acc, sd);
    z = dt_block_sum(z, sz);
    if (threadIdx.x == 0) {
        out[0] = acc;
        if (zeros) zeros[0] = z;
    }
}

void dt_cu_reduce(double *out, long long *zeros, double *part, const float *x, size_t n,
                  int square, int det, cudaStream_t s) {
    int vec = ((uintptr_t)x & 15u) == 0;
    if (det) {
        int nb = dt_cu_reduce_blocks(n);
        long long *zpart = (long long *)(part + DT_CU_RED_MAX_BLOCKS);
        reduce_part_kernel<<<dt_cu_noted(nb, DT_CU_RED_THREADS, 0, "reduce_part_kernel"), DT_CU_RED_THREADS, 0, s>>>(out, zeros, part, zpart, x, n, square, 1, vec);
        reduce_finish_kernel<<<dt_cu_noted(1, 1024, 0, "reduce_finish_kernel"), 1024, 0, s>>>(out, zeros, part, zpart, nb);
    } else {
        static int nsm;
        if (!nsm) {
            int dev = 0;
            cudaGetDevice(&dev);
            cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, dev);
            if (nsm < 1) nsm = 1;
        }
        cudaMemsetAsync(out, 0, sizeof(double), s);
        if (zeros) cudaMemsetAsync(zeros, 0, sizeof(long long), s);
        reduce_part_kernel<<<dt_cu_noted(nsm * 8, DT_CU_RED_THREADS, 0, "reduce_part_kernel"), DT_CU_RED_THREADS, 0, s>>>(out, zeros, NULL, NULL, x, n, square, 0, vec);
    }
}

void dt_cu_sum_parts(double *out, const double *part, int nparts, cudaStream_t s) {
    reduce_finish_kernel<<<dt_cu_noted(1, 1024, 0, "reduce_finish_kernel"), 1024, 0, s>>>(out, NULL, part, NULL, nparts);
}
