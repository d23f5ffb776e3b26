/* The layers' weight-gradient GEMMs of a GPT-2 124M step (B 16, T 1024, C 768, L 12) one
 * layer at a time, as the backward launches them now, against one strided-batched call over
 * the 12 layers (the same operands laid out layer after layer, as the model keeps its
 * activations and gradients). Small outputs over a deep K (768 x 768 ... 3072 x 768, K
 * 16384) fill few tiles, so a call leaves SMs idle in its last wave; twelve layers in one
 * call fill the waves. Built by `make cuda` into build/gpu-tests/.
 * For each shape, det policy: the ms of the 12 single calls back to back and of the one
 * batched call (CUDA events, median of 20 after 3 warm-ups), both plans, and whether the
 * batched call's outputs are byte-identical to the single calls' (fresh outputs, beta 0).
 * Checks: every plan runs; the figures and the byte comparison are for reading. */
#include "ops/ops_cuda.h"

#include "gpu_check.cuh"
#include "gemm_shapes.cuh" /* the 124M sizes and the operands' random fill */

extern "C" {
#include "dt_test.h"
}

#include <vector>

int main(void) {
    cudaDeviceProp prop;
    gpu_ok(cudaGetDeviceProperties(&prop, 0), "device");
    printf("bench_dw_batch on %s (%d SMs), cuBLASLt %d\n", prop.name, prop.multiProcessorCount,
           (int)cublasLtGetVersion());
    struct { const char *name; int OC, IC; } sh[] = {
        {"qkv dW", 3 * C, C}, {"attproj dW", C, C}, {"fc dW", 4 * C, C}, {"fcproj dW", C, 4 * C}};
    size_t na = (size_t)L * BT * 4 * C, nw = (size_t)L * 4 * C * C;
    bf16 *dout = NULL, *inp = NULL;
    float *dw1 = NULL, *dwb = NULL;
    gpu_ok(cudaMalloc(&dout, na * 2), "dout");
    gpu_ok(cudaMalloc(&inp, na * 2), "inp");
    gpu_ok(cudaMalloc(&dw1, nw * 4), "dw");
    gpu_ok(cudaMalloc(&dwb, nw * 4), "dw");
    fill<<<dt_cu_div(na, 256), 256>>>(dout, na, 1);
    fill<<<dt_cu_div(na, 256), 256>>>(inp, na, 2);
    dt_cu_blas *h = NULL;
    CHECK_OK(dt_cu_blas_create(&h));
    variant("gemm=det");
    double sum1 = 0, sumb = 0;
    for (const auto &s : sh) {
        /* layer l: dW_l (OC, IC) = dout_l^T (OC x BT) inp_l (BT x IC), as linear_bwd */
        long long sA = (long long)BT * s.OC, sB = (long long)BT * s.IC, sC = (long long)s.OC * s.IC;
        auto one = [&](int l, float beta) {
            dt_cu_gemm_args g = {1, 0, s.OC, s.IC, BT, dout + l * sA, s.OC, 0, inp + l * sB, s.IC, 0,
                                 dw1 + l * sC, s.IC, 0, 1, 1.0f, beta, 1, NULL};
            return dt_cu_gemm(h, &g, 0);
        };
        dt_cu_gemm_args gb = {1, 0, s.OC, s.IC, BT, dout, s.OC, sA, inp, s.IC, sB, dwb, s.IC, sC, 1, 1.0f, 0.0f, L, NULL};
        char p1[256] = "", pb[256] = "";
        dt_status st1 = one(0, 0.0f);
        if (st1 == DT_OK) dt_cu_gemm_describe_last(h, p1, sizeof p1);
        dt_status stb = dt_cu_gemm(h, &gb, 0);
        if (stb == DT_OK) dt_cu_gemm_describe_last(h, pb, sizeof pb);
        CHECKF(st1 == DT_OK && stb == DT_OK, "%s: plan failed: %s", s.name, dt_errmsg());
        if (st1 != DT_OK || stb != DT_OK) continue;
        for (int l = 0; l < L; l++) (void)one(l, 0.0f);
        gpu_ok(cudaDeviceSynchronize(), "sync");
        std::vector<float> a((size_t)L * sC), b((size_t)L * sC);
        gpu_ok(cudaMemcpy(a.data(), dw1, sizeof(float) * a.size(), cudaMemcpyDeviceToHost), "down");
        gpu_ok(cudaMemcpy(b.data(), dwb, sizeof(float) * b.size(), cudaMemcpyDeviceToHost), "down");
        int same = !memcmp(a.data(), b.data(), sizeof(float) * a.size());
        double m1 = gpu_median_ms([&] { for (int l = 0; l < L; l++) (void)one(l, 0.0f); });
        double mb = gpu_median_ms([&] { (void)dt_cu_gemm(h, &gb, 0); });
        double fl = 2.0 * L * s.OC * (double)s.IC * BT;
        printf("%-11s 12 single %8.4f ms (%5.1f TFLOP/s)  batched %8.4f ms (%5.1f TFLOP/s)  %.3fx  bytes %s\n"
               "    single:  %s\n    batched: %s\n",
               s.name, m1, fl / (m1 * 1e9), mb, fl / (mb * 1e9), mb / m1, same ? "equal" : "DIFFER", p1, pb);
        sum1 += m1;
        sumb += mb;
        fflush(stdout);
    }
    printf("the four, a step: single %.3f ms, batched %.3f ms (%.3f ms less)\n", sum1, sumb, sum1 - sumb);
    dt_op_clear_overrides();
    dt_cu_blas_free(h);
    cudaFree(dout); cudaFree(inp); cudaFree(dw1); cudaFree(dwb);
    cudaError_t e = cudaDeviceSynchronize();
    CHECKF(e == cudaSuccess, "CUDA error at the end: %s", cudaGetErrorString(e));
    return dt_test_report();
}
