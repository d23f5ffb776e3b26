/* Our GEMM's epilogues at the fc shape of GPT-2 124M (M 16384, N 3072, K 768), side by side:
 * the forward (B stored (N, K)) plain, with the bias, with the bias and GELU (two outputs),
 * and the input gradient (B stored (K, N)) plain, with dGELU, with dGELU and the column sums.
 * What the epilogues cost over the products is the difference to the plain calls.
 * Timing: gpu_median_rotated_ms (the variants in a rotated order each round, CUDA events,
 * median of 41 rounds after 5 warm-up ones). BENCH_EPI_ONCE=1: one call of each variant
 * and no timing (a profiler's run: ncu -k regex:gemm_tma_kernel).
 * Checks (bytes): the GELU call's aux (the pre-activation) is the bias call's C, and the
 * dGELU call's C is the same with and without the column sums; every call returns DT_OK. */
#include "ops/ops_cuda.h"

#include "gpu_check.cuh"

extern "C" {
#include "dt_test.h"
}

#include <vector>

enum { FWD_PLAIN, FWD_BIAS, FWD_GELU, BWD_PLAIN, BWD_DGELU, BWD_DGELU_CSUM, NVAR };
static const char *names[NVAR] = {"fwd plain", "fwd + bias", "fwd + bias + GELU (2 outputs)", "dx plain",
                                  "dx + dGELU", "dx + dGELU + column sums"};

int main(void) {
    if (!gpu_is_sm90("bench_gemm_epi")) return 1;
    const int M = 16384, N = 3072, K = 768;
    const size_t mn = (size_t)M * N;
    uint32_t draw = 0;
    bf16 *A = up16(rnd_bf16(0x45504930u, 1, &draw, (size_t)M * K, 1.0f));
    bf16 *B = up16(rnd_bf16(0x45504930u, 1, &draw, (size_t)K * N, 0.05f));
    bf16 *bias = up16(rnd_bf16(0x45504930u, 1, &draw, (size_t)N, 0.5f));
    bf16 *pre = up16(rnd_bf16(0x45504930u, 1, &draw, mn, 3.0f)); /* dGELU's aux */
    bf16 *C = dev<bf16>(mn), *X = dev<bf16>(mn);
    float *csum = dev<float>(N), *part = dev<float>(dt_cu_gemm_wgmma_csum_floats(M, N, K));
    variant("bias_bwd=det");

    std::vector<dt_cu_gemm_args> a(NVAR);
    for (int v = 0; v < NVAR; v++) {
        const int bwd = v >= BWD_PLAIN;
        dt_cu_gemm_args g = {0, !bwd, M, N, K, A, K, 0, B, bwd ? N : K, 0, C, N, 0, 0, 1.0f, 0.0f, 1, NULL,
                             DT_CU_EPI_DEFAULT, NULL, NULL, NULL};
        if (v == FWD_BIAS || v == FWD_GELU) g.bias = bias;
        if (v == FWD_GELU) { g.epi = DT_CU_EPI_GELU; g.aux = X; }
        if (v == BWD_DGELU || v == BWD_DGELU_CSUM) { g.epi = DT_CU_EPI_DGELU; g.aux = pre; }
        if (v == BWD_DGELU_CSUM) { g.csum = csum; g.csum_part = part; }
        a[(size_t)v] = g;
    }
    auto run = [&](int v) { CHECK_OK(dt_cu_gemm_wgmma(&a[(size_t)v], 0)); };

    /* the bytes: GELU's aux against the bias call's C; dGELU's C with and without sums */
    run(FWD_BIAS);
    std::vector<unsigned char> biased = bytes_of(C, mn * 2);
    run(FWD_GELU);
    CHECKF(bytes_of(X, mn * 2) == biased, "the GELU call's pre-activation differs from the bias call's C");
    run(BWD_DGELU);
    std::vector<unsigned char> dg = bytes_of(C, mn * 2);
    run(BWD_DGELU_CSUM);
    CHECKF(bytes_of(C, mn * 2) == dg, "dGELU's C differs with the column sums");
    gpu_ok(cudaDeviceSynchronize(), "calls");

    const char *once = getenv("BENCH_EPI_ONCE");
    if (once && strcmp(once, "1") == 0) {
        for (int v = 0; v < NVAR; v++) run(v);
        gpu_ok(cudaDeviceSynchronize(), "profiled calls");
    } else {
        std::vector<double> ms = gpu_median_rotated_ms(NVAR, run, 5, 41);
        const double flop = 2.0 * M * (double)N * K;
        printf("bench_gemm_epi: M %d N %d K %d, median of 41 rotated rounds (ms, TFLOP/s, over plain)\n", M, N, K);
        for (int v = 0; v < NVAR; v++) {
            const double base = ms[(size_t)(v >= BWD_PLAIN ? BWD_PLAIN : FWD_PLAIN)];
            printf("  %-30s %8.4f ms %6.1f TFLOP/s  %+8.4f ms\n", names[v], ms[(size_t)v], flop / (ms[(size_t)v] * 1e9),
                   ms[(size_t)v] - base);
        }
    }
    return dt_test_report();
}
