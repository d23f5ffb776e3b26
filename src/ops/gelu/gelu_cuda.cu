/* GELU on the GPU (see gelu.h, gelu_cuda.h): forward and backward, the CPU formulas of
 * gelu_cpu.c in fp32. Deterministic by nature: every output element is written by one
 * thread from its own inputs. The one reduction here, the GELU backward fused with the bias
 * gradient (dt_cu_gelu_bwd_colsum), follows colsum_cuda.cuh's order and finish
 * (DT_OP_BIAS_BWD). */
#include "ops/gelu/gelu_cuda.h"
#include "ops/reduce/reduce_cuda.h"

#include "ops/reduce/colsum_cuda.cuh"

#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */

__global__ void gelu_fwd_kernel(bf16 *out, const bf16 *inp, size_t n) {
    size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 8;
    if (i >= n) return;
    dt_bf16x8 xv = dt_ld8(inp + i), o;
#pragma unroll
    for (int k = 0; k < 8; k++) {
        float x = __bfloat162float(xv.v[k]);
        o.v[k] = __float2bfloat16(0.5f * x * (1.0f + tanhf(GELU_K * (x + 0.044715f * x * x * x))));
    }
    dt_st8(out + i, o);
}

/* dinp = gelu'(x) * dout for 8 elements, rounded to bf16 as stored. */
static __device__ __forceinline__ dt_bf16x8 gelu_bwd8(const dt_bf16x8 &xv, const dt_bf16x8 &gv) {
    dt_bf16x8 o;
#pragma unroll
    for (int k = 0; k < 8; k++) {
        float x = __bfloat162float(xv.v[k]), u = GELU_K * (x + 0.044715f * x * x * x);
        float th = tanhf(u), sech2 = 1.0f - th * th;
        float g = 0.5f * (1.0f + th) + 0.5f * x * sech2 * GELU_K * (1.0f + 3.0f * 0.044715f * x * x);
        o.v[k] = __float2bfloat16(g * __bfloat162float(gv.v[k]));
    }
    return o;
}

__global__ void gelu_bwd_kernel(bf16 *dinp, const bf16 *inp, const bf16 *dout, size_t n) {
    size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 8;
    if (i >= n) return;
    dt_st8(dinp + i, gelu_bwd8(dt_ld8(inp + i), dt_ld8(dout + i)));
}

/* GELU backward fused with the column sums of its output (the bias gradient of the layer
 * whose output fed the GELU): row chunk p = blockIdx.y, the layout and order of
 * colsum_cuda.cuh, summing the stored bf16 values (the bits of gelu_bwd + colsum). */
#define GELU_COLSUM_BATCH 2
struct gelu_rows { /* one row vector of the input and of the incoming gradient, as loaded */
    dt_bf16x8 x, g;
};
__global__ void __launch_bounds__(256) gelu_bwd_colsum_kernel(bf16 *dinp, float *part, const bf16 *inp,
                                                              const bf16 *dout, int rows, int cols) {
    __shared__ float sh[DT_CU_COLSUM_LANES][8 * 33];
    int c = (blockIdx.x * 32 + threadIdx.x) * 8, p = blockIdx.y;
    int r0 = p * DT_CU_COLSUM_ROWS + threadIdx.y;
    float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    if (c < cols)
        dt_cu_colsum_rows<GELU_COLSUM_BATCH>(
            s, r0, rows,
            [&](int r) { return gelu_rows{dt_ld8(inp + (size_t)r * cols + c), dt_ld8(dout + (size_t)r * cols + c)}; },
            [&](const gelu_rows &v, int r) {
                dt_bf16x8 o = gelu_bwd8(v.x, v.g);
                dt_st8(dinp + (size_t)r * cols + c, o);
                return o;
            });
    dt_cu_colsum_block_end(part, sh, s, cols, p);
}

/* n must be a multiple of 8 for the vector kernels (the model's sizes are). */
void dt_cu_gelu_fwd(bf16 *out, const bf16 *inp, size_t n, cudaStream_t s) {
    gelu_fwd_kernel<<<dt_cu_noted(dt_cu_div(n / 8, 256), 256, 0, "gelu_fwd_kernel"), 256, 0, s>>>(out, inp, n);
}
void dt_cu_gelu_bwd(bf16 *dinp, const bf16 *inp, const bf16 *dout, size_t n, cudaStream_t s) {
    gelu_bwd_kernel<<<dt_cu_noted(dt_cu_div(n / 8, 256), 256, 0, "gelu_bwd_kernel"), 256, 0, s>>>(dinp, inp, dout, n);
}
void dt_cu_gelu_bwd_colsum(bf16 *dinp, float *acc, float *part, const bf16 *inp, const bf16 *dout,
                           int rows, int cols, cudaStream_t s, cudaStream_t fs) {
    int nparts = dt_cu_colsum_parts(rows);
    dim3 g(dt_cu_div((size_t)cols / 8, 32), (unsigned)nparts), b(32, DT_CU_COLSUM_LANES);
    gelu_bwd_colsum_kernel<<<dt_cu_noted(g, b, 0, "gelu_bwd_colsum_kernel"), b, 0, s>>>(dinp, part, inp, dout, rows, cols);
    dt_cu_colsum_finish(acc, part, nparts, cols, s, fs);
}
