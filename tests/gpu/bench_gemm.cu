/* The GEMMs of a GPT-2 124M training step (B 16, T 1024, C 768, L 12, Vp 50304, bf16 inputs),
 * timed on the GPU machine (built by `make cuda` into build/gpu-tests/): for each product
 * of the step (forward, input gradients, weight gradients, with the model's default
 * epilogues), the time of the policy's pick in both branches, of every heuristic
 * candidate of the det list (forced), and for the weight gradients of K cut into 1, 2, 4
 * and 8 chunks (gemm_cuda.cu's own split-K) with and without the bias-gradient epilogue;
 * then the epilogue fusions against the separate kernels they replace, and the per-step
 * sums; the det pick with the plan table (gemm_table.c) and without it (the heuristic's).
 * CUDA events, median of 20 runs after 3 warm-ups, one stream, no contention; a fresh
 * cuBLASLt handle (plan cache) per shape.
 * Checks: the forced and policy plans of every shape run (no cuBLASLt error), and the
 * policy picks of the det list are det-eligible (no in-place split-K); the figures
 * themselves are for reading (tests/gpu/test_gpu_ops.cu checks accuracy,
 * tests/gpu/test_gpu_replays.cu determinism). BENCH_GEMM_CANDS=0 skips the candidate lists. */
#include "ops/ops_cuda.h"

#include "gpu_check.cuh"
#include "gemm_shapes.cuh"

extern "C" {
#include "dt_test.h"
}

#include <algorithm>
#include <vector>

static dt_cu_blas *g_h;

/* Median ms of the call, or -1 (message printed) when its plan cannot be made or run. */
static double time_call(const dt_cu_gemm_args *a, char *plan, size_t cap) {
    if (dt_cu_gemm(g_h, a, 0) != DT_OK) { /* makes the plan (outside the timing) */
        snprintf(plan, cap, "no plan: %s", dt_errmsg());
        return -1.0;
    }
    double ms = gpu_median_ms([&] { (void)dt_cu_gemm(g_h, a, 0); });
    dt_cu_gemm_describe_last(g_h, plan, cap);
    return ms;
}

static double tflops(const shape *s, double ms) { return 2.0 * s->M * (double)s->N * s->K / (ms * 1e9); }

/* The policy's pick in one branch with K split by the rule (splits 0) or as given, with the
 * shape's epilogue or (epi >= 0) another. */
static double policy(const shape *s, int det, int splits, int print, int epi = -1) {
    variant(det ? "gemm=det" : "gemm=fast");
    dt_cu_blas_force(g_h, -1, splits);
    dt_cu_gemm_args a = args_of(s);
    if (epi >= 0) a.epi = epi;
    a.dbias = a.epi == DT_CU_EPI_BGRAD ? g_db : NULL;
    a.dbias_part = a.epi == DT_CU_EPI_BGRAD ? g_part : NULL;
    char plan[256];
    double ms = time_call(&a, plan, sizeof plan);
    CHECKF(ms >= 0, "%s %s policy: %s", s->name, det ? "det" : "fast", plan);
    if (det && ms >= 0) CHECKF(!strstr(plan, "scheme=1 "), "%s det pick reduces in place: %s", s->name, plan);
    if (print && ms >= 0)
        printf("  %-4s policy%s   %8.4f ms %6.1f TFLOP/s  %s\n", det ? "det" : "fast",
               splits ? " (forced)" : "", ms, tflops(s, ms), plan);
    return ms;
}

static double g_step_before, g_step_after, g_step_notable;

/* The det pick with the plan table (gemm_table.c) against the heuristic's pick, timed in 6
 * rounds that alternate which goes first (median of 20 each), the median of the rounds of
 * each; prints both and returns the heuristic's (det when the shape has no entry). */
static double table_vs_heuristic(const shape *s, double det) {
    variant("gemm=det");
    dt_cu_blas_force(g_h, -1, 0);
    dt_cu_gemm_args a = args_of(s);
    char plan[2][256];
    if (time_call(&a, plan[1], sizeof plan[1]) < 0 || !strstr(plan[1], " src=table ")) {
        printf("  no table entry\n");
        dt_op_clear_overrides();
        return det;
    }
    std::vector<double> t[2];
    for (int r = 0; r < 6; r++)
        for (int j = 0; j < 2; j++) {
            int tab = (r + j) % 2 == 0;
            dt_cu_blas_use_table(g_h, tab);
            double ms = time_call(&a, plan[tab], sizeof plan[tab]);
            if (ms > 0) t[tab].push_back(ms);
        }
    dt_cu_blas_use_table(g_h, 1);
    dt_op_clear_overrides();
    CHECKF(t[0].size() == 6 && t[1].size() == 6, "%s: table or heuristic plan failed", s->name);
    if (t[0].size() != 6 || t[1].size() != 6) return det;
    std::sort(t[0].begin(), t[0].end());
    std::sort(t[1].begin(), t[1].end());
    double on = (t[1][2] + t[1][3]) / 2, off = (t[0][2] + t[0][3]) / 2;
    printf("  table     %8.4f ms %6.1f TFLOP/s  %s\n  heuristic %8.4f ms %6.1f TFLOP/s  %s\n  table / heuristic: %.3f "
           "(6 alternating rounds)\n", on, tflops(s, on), plan[1], off, tflops(s, off), plan[0], on / off);
    return off;
}

/* A fresh handle: forced candidates fill the plan cache quickly. */
static void fresh_handle(void) {
    if (g_h) dt_cu_blas_free(g_h);
    g_h = NULL;
    CHECK_OK(dt_cu_blas_create(&g_h));
}

static void bench_shape(const shape *s, int cands) {
    fresh_handle();
    printf("%s: %s%s %dx%dx%d %s%s, %d per step\n", s->name, s->ta ? "T" : "N", s->tb ? "T" : "N", s->M, s->N,
           s->K, s->c_f32 ? "f32 +=" : "bf16", s->bias ? " +bias" : "", s->per_step);
    double det = policy(s, 1, 0, 1), fast = policy(s, 0, 0, 1);
    double notable = table_vs_heuristic(s, det);
    if (notable > 0) g_step_notable += notable * s->per_step;
    /* before this change: K whole in every GEMM */
    double whole = s->c_f32 ? policy(s, 1, 1, 0) : det;
    if (s->c_f32) {
        int epis[2] = {DT_CU_EPI_DEFAULT, DT_CU_EPI_BGRAD};
        for (int e = 0; e < 2; e++) {
            printf("  K chunks, %s:\n", e ? "bias-gradient epilogue" : "no epilogue");
            for (int S = 1; S <= DT_CU_SPLITK_MAX; S *= 2) policy(s, 1, S, 1, epis[e]);
        }
    }
    if (det > 0 && whole > 0) {
        g_step_after += det * s->per_step;
        g_step_before += whole * s->per_step;
    }
    printf("  det / fast: %.3f; det, K whole / det: %.3f\n", det / fast, whole / det);
    for (int br = 1; br >= 2 - cands; br--) {
        variant(br ? "gemm=det" : "gemm=fast");
        int chunks = s->c_f32 ? dt_cu_gemm_splits(s->M, s->N, s->K) : 1;
        for (int i = 0; i < 16; i++) {
            dt_cu_blas_force(g_h, i, chunks);
            dt_cu_gemm_args a = args_of(s);
            char plan[256];
            double ms = time_call(&a, plan, sizeof plan);
            if (ms < 0) {
                if (!strstr(plan, "not usable")) printf("  %-4s cand %2d: %s\n", br ? "det" : "fast", i, plan);
                continue;
            }
            printf("  %-4s cand %2d  %8.4f ms %6.1f TFLOP/s  %.3fx policy  %s\n", br ? "det" : "fast", i, ms,
                   tflops(s, ms), ms / (br ? det : fast), plan);
        }
    }
    dt_cu_blas_force(g_h, -1, 0);
    dt_op_clear_overrides();
}

/* The fusions against what they replace, per layer, det branch, K chunks by the rule. */
static void bench_fusions(void) {
    fresh_handle();
    variant("gemm=det");
    variant("bias_bwd=det");
    dt_cu_blas_force(g_h, -1, 0);
    int ok = 1;
    size_t n = (size_t)BT * 4 * C;
    shape fc = {"fc fwd", 0, 0, 1, BT, 4 * C, C, 0, 1, 0}, fcg = fc;
    fcg.epi = DT_CU_EPI_GELU;
    dt_cu_gemm_args a = args_of(&fc), ag = args_of(&fcg);
    bf16 *gl = g_y + n; /* the GELU output, after g_y's first part */
    double t0 = gpu_median_ms([&] { ok &= dt_cu_gemm(g_h, &a, 0) == DT_OK; });
    double tg = gpu_median_ms([&] { dt_cu_gelu_fwd(gl, g_y, n, 0); });
    double t1 = gpu_median_ms([&] { ok &= dt_cu_gemm(g_h, &ag, 0) == DT_OK; });
    printf("fc forward: GEMM+bias %.4f ms + gelu_fwd %.4f ms = %.4f ms; GELU_AUX_BIAS epilogue %.4f ms "
           "(%+.4f ms a layer)\n", t0, tg, t0 + tg, t1, t1 - t0 - tg);
    /* fcproj input gradient and the GELU backward; the fc bias gradient from the GELU
     * backward's column sums or from the fc weight-gradient GEMM */
    shape dx = {"fcproj dx", 0, 0, 0, BT, 4 * C, C, 0, 0, 0}, dxg = dx;
    dxg.epi = DT_CU_EPI_DGELU;
    shape dwf = {"fc dW", 0, 1, 0, 4 * C, C, BT, 1, 0, 0}, dwb = dwf;
    dwb.epi = DT_CU_EPI_BGRAD;
    dt_cu_gemm_args x0 = args_of(&dx), x1 = args_of(&dxg), w0 = args_of(&dwf), w1 = args_of(&dwb);
    bf16 *dfch = gl;
    x1.C = dfch;
    w0.A = dfch;
    w1.A = dfch;
    t0 = gpu_median_ms([&] { ok &= dt_cu_gemm(g_h, &x0, 0) == DT_OK; });
    double tb = gpu_median_ms([&] { dt_cu_gelu_bwd(dfch, g_aux, g_y, n, 0); });
    double tbc = gpu_median_ms([&] { dt_cu_gelu_bwd_colsum(dfch, g_db, g_part, g_aux, g_y, BT, 4 * C, 0, 0); });
    t1 = gpu_median_ms([&] { ok &= dt_cu_gemm(g_h, &x1, 0) == DT_OK; });
    double tw0 = gpu_median_ms([&] { ok &= dt_cu_gemm(g_h, &w0, 0) == DT_OK; });
    double tw1 = gpu_median_ms([&] { ok &= dt_cu_gemm(g_h, &w1, 0) == DT_OK; });
    printf("fcproj dx: GEMM %.4f ms + gelu_bwd %.4f ms (with the fc bias colsum %.4f ms); dGELU epilogue %.4f ms "
           "(%+.4f ms a layer against GEMM + gelu_bwd)\n", t0, tb, tbc, t1, t1 - t0 - tb);
    printf("fc dW: %.4f ms, with the bias-gradient epilogue %.4f ms (%+.4f ms; the colsum in gelu_bwd costs "
           "%.4f ms)\n", tw0, tw1, tw1 - tw0, tbc - tb);
    /* the other three biases: column sums of dout, or the weight-gradient GEMM's epilogue */
    int oc[3] = {3 * C, C, C}, ic[3] = {C, C, 4 * C};
    const char *nm[3] = {"qkv", "attproj", "fcproj"};
    for (int i = 0; i < 3; i++) {
        shape p = {nm[i], 0, 1, 0, oc[i], ic[i], BT, 1, 0, 0}, q = p;
        q.epi = DT_CU_EPI_BGRAD;
        dt_cu_gemm_args g0 = args_of(&p), g1 = args_of(&q);
        t0 = gpu_median_ms([&] { ok &= dt_cu_gemm(g_h, &g0, 0) == DT_OK; });
        double tc = gpu_median_ms([&] { dt_cu_colsum(g_db, g_part, g_x, BT, oc[i], 0, 0); });
        t1 = gpu_median_ms([&] { ok &= dt_cu_gemm(g_h, &g1, 0) == DT_OK; });
        printf("%s dW %.4f ms + colsum %.4f ms = %.4f ms; with the bias-gradient epilogue %.4f ms (%+.4f ms)\n",
               nm[i], t0, tc, t0 + tc, t1, t1 - t0 - tc);
    }
    CHECKF(ok, "a fused GEMM failed: %s", dt_errmsg());
    dt_op_clear_overrides();
}

int main(void) {
    cudaDeviceProp prop;
    gpu_ok(cudaGetDeviceProperties(&prop, 0), "device");
    int lt = (int)cublasLtGetVersion();
    printf("bench_gemm on %s (%d SMs), cuBLASLt %d\n", prop.name, prop.multiProcessorCount, lt);
    size_t nx = 0, nw = 0;
    gemm_operands(&nx, &nw);
    const char *c = getenv("BENCH_GEMM_CANDS"); /* 0: none, 1: det list (default), 2: det and fast */
    int cands = c ? atoi(c) : 1;
    shape shapes[] = {
        {"qkv fwd", L, 0, 1, BT, 3 * C, C, 0, 1, 0},
        {"attproj fwd", L, 0, 1, BT, C, C, 0, 1, 0},
        {"fc fwd (GELU epilogue)", L, 0, 1, BT, 4 * C, C, 0, 1, DT_CU_EPI_GELU},
        {"fcproj fwd", L, 0, 1, BT, C, 4 * C, 0, 1, 0},
        {"head fwd", 1, 0, 1, BT, VP, C, 0, 0, 0},
        {"head dx", 1, 0, 0, BT, C, VP, 0, 0, 0},
        {"fcproj dx (dGELU epilogue)", L, 0, 0, BT, 4 * C, C, 0, 0, DT_CU_EPI_DGELU},
        {"fc dx", L, 0, 0, BT, C, 4 * C, 0, 0, 0},
        {"attproj dx", L, 0, 0, BT, C, C, 0, 0, 0},
        {"qkv dx", L, 0, 0, BT, C, 3 * C, 0, 0, 0},
        {"head dW", 1, 1, 0, VP, C, BT, 1, 0, 0},
        {"fcproj dW", L, 1, 0, C, 4 * C, BT, 1, 0, 0},
        {"fc dW", L, 1, 0, 4 * C, C, BT, 1, 0, 0},
        {"attproj dW", L, 1, 0, C, C, BT, 1, 0, 0},
        {"qkv dW", L, 1, 0, 3 * C, C, BT, 1, 0, 0},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        bench_shape(&shapes[i], cands);
        fflush(stdout);
    }
    printf("per step (the model's default epilogues), det policy: %.3f ms with the K chunks of dt_cu_gemm_splits, "
           "%.3f ms with K whole, %.3f ms without the plan table\n", g_step_after, g_step_before, g_step_notable);
    bench_fusions();
    dt_cu_blas_free(g_h);
    cudaError_t e = cudaDeviceSynchronize();
    CHECKF(e == cudaSuccess, "CUDA error at the end: %s", cudaGetErrorString(e));
    return dt_test_report();
}
