/* The harness's CUDA backend (see harness_cuda.h): device buffers for replays and
 * side-stream GEMM contention. The replay loop itself is harness.c's (plain C, tested in
 * CI); this file only fills its dt_kh_device hooks with the CUDA runtime.
 *
 * Why the contention is real: the side stream is created non-blocking, so its GEMMs do not
 * wait for the legacy default stream the ops run on, and they are queued just before the
 * op is launched: the two compete for SMs, and the op's blocks start in a different order
 * and at different times than when the GPU is idle. The side GEMMs use their own cuBLASLt
 * handle, so they never share the op's GEMM workspace. */
#include "harness.h"
#include "harness_cuda.h"

#include "ops/ops_cuda.h"

#include <stdio.h>
#include <stdlib.h>

static cudaStream_t g_side;
static dt_cu_blas *g_side_blas;
static bf16 *g_a, *g_b, *g_c;

/* A device error makes every later result meaningless: stop the test binary with it. */
static void cu_or_die(cudaError_t e, const char *what) {
    if (e == cudaSuccess) return;
    fprintf(stderr, "harness (cuda): %s: %s (%s)\n", what, cudaGetErrorName(e), cudaGetErrorString(e));
    abort();
}

static void *cu_alloc(size_t bytes) {
    void *p = NULL;
    cu_or_die(cudaMalloc(&p, bytes ? bytes : 16), "cudaMalloc of a replay buffer");
    return p;
}
static void cu_release(void *p) { cu_or_die(cudaFree(p), "cudaFree of a replay buffer"); }
static void cu_upload(void *dst, const void *src, size_t bytes) {
    cu_or_die(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "upload");
}
static void cu_download(void *dst, const void *src, size_t bytes) {
    cu_or_die(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "download");
}
static void cu_contend(int units) {
    const int n = DT_KH_CUDA_SIDE_N;
    for (int i = 0; i < units; i++) {
        dt_cu_gemm_args a = {0, 1, n, n, n, g_a, n, 0, g_b, n, 0, g_c, n, 0, 0, 1.0f, 0.0f, 1, NULL};
        if (dt_cu_gemm(g_side_blas, &a, g_side) != DT_OK) {
            fprintf(stderr, "harness (cuda): side-stream GEMM: %s\n", dt_errmsg());
            abort();
        }
    }
}
static void cu_finish(void) {
    cu_or_die(cudaGetLastError(), "a launch of the op under test");
    cu_or_die(cudaDeviceSynchronize(), "the op under test or the side stream");
}

static const dt_kh_device g_cuda = {cu_alloc, cu_release, cu_upload, cu_download, cu_contend,
                                    cu_finish};

/* Fills the side GEMMs' operands with small bf16 values (their results are never read). */
__global__ static void side_fill(bf16 *x, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = __float2bfloat16((float)((i * 2654435761u) % 1000u) * 1e-3f - 0.5f);
}

dt_status dt_kh_cuda_init(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1)
        return dt_fail(DT_EUNSUPPORTED, "the CUDA harness backend needs a CUDA device; none is visible");
    size_t e = (size_t)DT_KH_CUDA_SIDE_N * DT_KH_CUDA_SIDE_N;
    DT_CU_TRY(cudaStreamCreateWithFlags(&g_side, cudaStreamNonBlocking));
    DT_CU_TRY(cudaMalloc(&g_a, sizeof(bf16) * e));
    DT_CU_TRY(cudaMalloc(&g_b, sizeof(bf16) * e));
    DT_CU_TRY(cudaMalloc(&g_c, sizeof(bf16) * e));
    side_fill<<<dt_cu_div(e, 256), 256>>>(g_a, e);
    side_fill<<<dt_cu_div(e, 256), 256>>>(g_b, e);
    DT_CU_TRY(cudaDeviceSynchronize());
    dt_status st = dt_cu_blas_create(&g_side_blas);
    if (st != DT_OK) return st;
    dt_kh_register_device(DT_KH_CUDA, &g_cuda);
    return DT_OK;
}

void dt_kh_cuda_shutdown(void) {
    dt_kh_register_device(DT_KH_CUDA, NULL);
    cudaDeviceSynchronize();
    if (g_side_blas) dt_cu_blas_free(g_side_blas);
    cudaFree(g_a);
    cudaFree(g_b);
    cudaFree(g_c);
    if (g_side) cudaStreamDestroy(g_side);
    g_side_blas = NULL;
    g_a = g_b = g_c = NULL;
    g_side = NULL;
}
