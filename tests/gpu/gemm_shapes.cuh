/* The GEMM benchmarks' common ground (bench_gemm.cu, tune_gemm.cu): the GPT-2 124M sizes,
 * the scratch operands every timed call reads and writes, their random fill, and the
 * dt_cu_gemm_args of a shape of the step with the model's leading dimensions. */
#ifndef DT_TESTS_GPU_GEMM_SHAPES_CUH
#define DT_TESTS_GPU_GEMM_SHAPES_CUH

#include "ops/ops_cuda.h"

#include <string.h>
#include <algorithm>

static const int BT = 16384, C = 768, L = 12, VP = 50304;

/* Operands (allocated by the including program): A g_x, B g_w, bf16 output g_y, fp32
 * output g_dw (accumulated), bias g_bias, GELU aux g_aux, BGRAD outputs g_db / g_part. */
static bf16 *g_x, *g_y, *g_w, *g_bias, *g_aux;
static float *g_dw, *g_db, *g_part;

__global__ static void fill(bf16 *x, size_t n, uint32_t seed) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = __float2bfloat16(dt_rng_uniform(seed, 1, 0, 0, i) - 0.5f);
}

/* Allocates and fills the operands (sized for the largest shape: the head's) and returns
 * the element counts of g_x (nx) and g_dw (nw). Include after gpu_check.cuh (gpu_ok). */
static void gemm_operands(size_t *nx_out, size_t *nw_out) {
    size_t nx = (size_t)BT * VP, nw = (size_t)VP * C, ny = (size_t)BT * VP;
    gpu_ok(cudaMalloc(&g_x, nx * 2), "x");
    gpu_ok(cudaMalloc(&g_w, std::max(nw, (size_t)BT * 4 * C) * 2), "w");
    gpu_ok(cudaMalloc(&g_y, ny * 2), "y");
    gpu_ok(cudaMalloc(&g_aux, (size_t)BT * 4 * C * 2), "aux");
    gpu_ok(cudaMalloc(&g_bias, (size_t)VP * 2), "bias");
    gpu_ok(cudaMalloc(&g_dw, nw * 4), "dw");
    gpu_ok(cudaMalloc(&g_db, (size_t)VP * 4), "db");
    gpu_ok(cudaMalloc(&g_part, (size_t)dt_cu_colsum_parts(BT) * 4 * C * 4), "part");
    fill<<<dt_cu_div(nx, 256), 256>>>(g_x, nx, 1);
    fill<<<dt_cu_div(nw, 256), 256>>>(g_w, nw, 2);
    fill<<<dt_cu_div((size_t)BT * 4 * C, 256), 256>>>(g_aux, (size_t)BT * 4 * C, 3);
    fill<<<dt_cu_div(VP, 256), 256>>>(g_bias, VP, 4);
    fill<<<dt_cu_div(ny, 256), 256>>>(g_y, ny, 5);
    gpu_ok(cudaMemset(g_dw, 0, nw * 4), "memset");
    gpu_ok(cudaMemset(g_db, 0, (size_t)VP * 4), "memset");
    *nx_out = nx;
    *nw_out = nw;
}

typedef struct shape {
    const char *name;
    int per_step; /* calls per training step */
    int ta, tb, M, N, K, c_f32, bias, epi;
} shape;

/* Operands from the scratch buffers: A, B row-major with their natural leading dimensions
 * (the model's), outputs bf16 (g_y) or fp32 accumulated (g_dw, beta 1). */
static dt_cu_gemm_args args_of(const shape *s) {
    dt_cu_gemm_args a;
    memset(&a, 0, sizeof a);
    a.ta = s->ta; a.tb = s->tb; a.M = s->M; a.N = s->N; a.K = s->K;
    a.A = g_x; a.lda = s->ta ? s->M : s->K;
    a.B = g_w; a.ldb = s->tb ? s->K : s->N;
    a.C = s->c_f32 ? (void *)g_dw : (void *)g_y; a.ldc = s->N;
    a.c_f32 = s->c_f32; a.alpha = 1.0f; a.beta = s->c_f32 ? 1.0f : 0.0f; a.batch = 1;
    a.bias = s->bias ? g_bias : NULL;
    a.epi = s->epi;
    a.aux = g_aux;
    if (s->epi == DT_CU_EPI_BGRAD) { a.dbias = g_db; a.dbias_part = g_part; }
    return a;
}

#endif
