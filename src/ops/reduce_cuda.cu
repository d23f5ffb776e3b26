/* Column sums (bias gradients) and whole-buffer sums (norms, mean loss) on the GPU
 * (see reduce.h, ops_cuda.h). */
#include "ops/ops_cuda.h"

#include "ops/cuda_plan.h"

/* Column sums of one row chunk: thread j adds rows r0..r1 of columns 8j..8j+7 in row order
 * (16-byte loads; cols % 8 == 0). */
__global__ void colsum_part_kernel(float *acc, float *part, const bf16 *x, int rows, int cols,
                                   int det) {
    int c = (blockIdx.x * blockDim.x + threadIdx.x) * 8, p = blockIdx.y;
    if (c >= cols) return;
    int r0 = p * DT_CU_COLSUM_ROWS, r1 = min(r0 + DT_CU_COLSUM_ROWS, rows);
    float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int r = r0; r < r1; r++) {
        dt_bf16x8 v = dt_ld8(x + (size_t)r * cols + c);
#pragma unroll
        for (int k = 0; k < 8; k++) s[k] += __bfloat162float(v.v[k]);
    }
#pragma unroll
    for (int k = 0; k < 8; k++) {
        if (det) part[(size_t)p * cols + c + k] = s[k];
        else atomicAdd(&acc[c + k], s[k]); /* fast: partials land in arrival order */
    }
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

void dt_cu_parts_finish(float *acc, float *acc2, const float *part, int nparts, int cols,
                        cudaStream_t s) {
    dim3 g(dt_cu_div((size_t)cols, 32), acc2 ? 2 : 1), b(32, 8);
    parts_finish_kernel<<<g, b, 0, s>>>(acc, acc2, part, nparts, cols);
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
    int det = dt_op_variant(DT_OP_BIAS_BWD) == DT_VARIANT_DET, nparts = dt_cu_colsum_parts(rows);
    dim3 g(dt_cu_div((size_t)cols / 8, 64), (unsigned)nparts);
    colsum_part_kernel<<<g, 64, 0, s>>>(acc, part, x, rows, cols, det);
    if (det) {
        dt_cu_fork(s, fs);
        dt_cu_parts_finish(acc, NULL, part, nparts, cols, fs);
    }
}

/* Each thread visits elements g, g + stride, ... in order (g its global index), in fp64;
 * the block adds its threads in the fixed tree of dt_block_sum. */
__global__ void reduce_part_kernel(double *out, long long *zeros, double *part, long long *zpart,
                                   const float *x, size_t n, int square, int det) {
    __shared__ double sd[32];
    __shared__ long long sz[32];
    size_t stride = (size_t)gridDim.x * blockDim.x;
    double acc = 0.0;
    long long z = 0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
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

/* det: one block adds the block partials; thread t takes partials t, t + 1024, ... */
__global__ void reduce_finish_kernel(double *out, long long *zeros, const double *part,
                                     const long long *zpart, int nparts) {
    __shared__ double sd[32];
    __shared__ long long sz[32];
    double acc = 0.0;
    long long z = 0;
    for (int k = threadIdx.x; k < nparts; k += blockDim.x) {
        acc += part[k];
        z += zpart[k];
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
    if (det) {
        int nb = dt_cu_reduce_blocks(n);
        long long *zpart = (long long *)(part + DT_CU_RED_MAX_BLOCKS);
        reduce_part_kernel<<<nb, DT_CU_RED_THREADS, 0, s>>>(out, zeros, part, zpart, x, n, square, 1);
        reduce_finish_kernel<<<1, 1024, 0, s>>>(out, zeros, part, zpart, nb);
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
        reduce_part_kernel<<<nsm * 8, DT_CU_RED_THREADS, 0, s>>>(out, zeros, NULL, NULL, x, n, square, 0);
    }
}
