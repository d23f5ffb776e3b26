/* The warpgroup-MMA flash forward (attention_wgmma_cuda.cu, dt_cu_flash_fwd_wgmma, sm_90a;
 * the model's forward on sm_90) against the mma.sync flash forward (attention_flash_cuda.cu,
 * dt_cu_flash_fwd; the PTX wrappers of both wgmma kernels are wgmma_cuda.cuh, their proxy
 * fence and wgmma group sync wgmma_sync.cuh, the wgmma attention pieces flash_wgmma_cuda.cuh,
 * the online softmax both forwards run flash_cuda.cuh's flash_softmax) on the GPU
 * machine (built by `make cuda` into build/gpu-tests/), in each of its configurations
 * (dt_cu_flash_fwd_wgmma_force: the serial kernel, the pipelined one, the
 * pipelined one with one warpgroup a block, the ping-pong rule). Per shape (B 2 NH 4 T 1024 and B 16 NH 12
 * T 1024: two warpgroups a block, except in "pipelined 64"; B 2 NH 4 T 960: one warpgroup a
 * block in every configuration), random bf16 qkv in [-2, 2):
 *  1. accuracy against dt_cu_flash_fwd on the same inputs, both outputs poisoned (0xff
 *     bytes: NaN) first, so an unwritten element fails: out by ||w - f|| / ||f|| <= 1e-2
 *     and max |w - f| <= 0.0625 (both are bf16 roundings of the same function: their P and
 *     out roundings may differ by an ulp, 2^-7 near |out| = 1, far below 0.0625, while a
 *     wrong tile or mask moves whole rows), lse max |w - f| <= 2e-4 and finite (fp32 sums
 *     of the same fp32 scores in other orders: ~1e-5), and then byte-identical to
 *     dt_cu_flash_fwd's out and lse (the model's promise that the kernel choice does not
 *     change a run's bits; the tolerances above say how far off a failure is). On the small
 *     shapes both are also checked against an fp64 CPU reference of causal softmax attention
 *     on the same bf16 values (out 1e-2 relative L2, lse 2e-4 absolute). Every
 *     configuration, poisoned again, gives the rule's bytes;
 *  2. determinism, per configuration: three replays, each after poisoning out and lse with
 *     another byte and with dt_cu_flash_fwd running on a second stream at the same time
 *     (other blocks on the SMs), byte-identical to the first call's out and lse;
 *  3. timing (not a check): CUDA events, median of 20 after 3 warm-ups, each kernel alone;
 *     TFLOP/s counts the causal half of the two products, 4 B NH T^2 64 / 2 flops.
 * Exits non-zero on any failed check (a CUDA error ends it with status 2). */
#include "ops/ops_cuda.h"

#include "gpu_check.cuh"

#include <math.h>
#include <string.h>
#include <vector>

static const int HS = 64;

/* Causal softmax attention in fp64 on the bf16 values: out (B T, C) and lse (B NH, T). */
static void cpu_attention(const vf &qkv, int B, int NH, int T, std::vector<double> &out, std::vector<double> &lse) {
    int C = NH * HS, C3 = 3 * C;
    out.assign((size_t)B * T * C, 0.0);
    lse.assign((size_t)B * NH * T, 0.0);
    std::vector<double> s(T);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < T; i++) {
                const float *q = &qkv[((size_t)b * T + i) * C3 + h * HS];
                double mx = -INFINITY;
                for (int j = 0; j <= i; j++) {
                    const float *k = &qkv[((size_t)b * T + j) * C3 + C + h * HS];
                    double d = 0;
                    for (int c = 0; c < HS; c++) d += (double)q[c] * k[c];
                    s[j] = d / 8.0; /* 1 / sqrt(64) */
                    mx = s[j] > mx ? s[j] : mx;
                }
                double sum = 0;
                for (int j = 0; j <= i; j++) sum += exp(s[j] - mx);
                double *o = &out[((size_t)b * T + i) * C + h * HS];
                for (int j = 0; j <= i; j++) {
                    const float *v = &qkv[((size_t)b * T + j) * C3 + 2 * C + h * HS];
                    double p = exp(s[j] - mx) / sum;
                    for (int c = 0; c < HS; c++) o[c] += p * v[c];
                }
                lse[((size_t)b * NH + h) * T + i] = mx + log(sum);
            }
}

/* max |a - r| (1e30 when a has a NaN or an infinity). */
static double maxabs(const vf &a, const vf &r) {
    double m = 0;
    for (size_t i = 0; i < a.size(); i++) {
        if (!isfinite(a[i])) return 1e30;
        double d = fabs((double)a[i] - r[i]);
        m = d > m ? d : m;
    }
    return m;
}

/* The configurations of dt_cu_flash_fwd_wgmma (attention_cuda.h); the rule is the last. */
#define NCFG 4
static const int cfg[NCFG] = {DT_CU_WGFWD_SERIAL, DT_CU_WGFWD_PIPE, DT_CU_WGFWD_PIPE_64, DT_CU_WGFWD_PONG};
static const char *const cfg_name[NCFG] = {"serial", "pipelined", "pipelined 64", "ping-pong"};
struct timing { int B, NH, T; double ms_mma, ms_cfg[NCFG]; };
static std::vector<timing> g_times;

static void test_shape(int B, int NH, int T, int cpu_ref, int timed) {
    const int C = NH * HS;
    const size_t nqkv = (size_t)B * T * 3 * C, nout = (size_t)B * T * C, nlse = (size_t)B * NH * T;
    uint32_t draw = 0;
    bf16 *qkv = NULL;
    vf hq = rnd_bf16(0x57474d4du, (uint32_t)(B * 100000 + NH * 10000 + T), &draw, nqkv, 2.0f);
    qkv = up16(hq);
    bf16 *of = dev<bf16>(nout), *ow = dev<bf16>(nout), *oc = dev<bf16>(nout);
    float *lf = dev<float>(nlse), *lw = dev<float>(nlse), *lc = dev<float>(nlse);

    /* 1. accuracy */
    gpu_ok(cudaMemset(of, 0xff, nout * sizeof(bf16)), "poison");
    gpu_ok(cudaMemset(lf, 0xff, nlse * sizeof(float)), "poison");
    gpu_ok(cudaMemset(ow, 0xff, nout * sizeof(bf16)), "poison");
    gpu_ok(cudaMemset(lw, 0xff, nlse * sizeof(float)), "poison");
    dt_cu_flash_fwd(of, lf, qkv, B, T, C, NH, 0);
    gpu_ok(cudaGetLastError(), "dt_cu_flash_fwd launch");
    dt_cu_flash_fwd_wgmma(ow, lw, qkv, B, T, C, NH, 0);
    gpu_ok(cudaGetLastError(), "dt_cu_flash_fwd_wgmma launch");
    gpu_ok(cudaDeviceSynchronize(), "dt_cu_flash_fwd_wgmma");
    vf outf = down16(of, nout), outw = down16(ow, nout), lsef = down32(lf, nlse), lsew = down32(lw, nlse);
    CHECK_RELF(outw, outf, 1e-2, "out wgmma vs mma.sync B%d NH%d T%d", B, NH, T);
    double dmax = maxabs(outw, outf), lmax = maxabs(lsew, lsef);
    CHECKF(dmax <= 0.0625, "out wgmma vs mma.sync B%d NH%d T%d: max abs %.3g > 0.0625", B, NH, T, dmax);
    CHECKF(lmax <= 2e-4, "lse wgmma vs mma.sync B%d NH%d T%d: max abs %.3g > 2e-4", B, NH, T, lmax);
    fprintf(stderr, "  B%d NH%d T%d: out max abs %.3g, lse max abs %.3g\n", B, NH, T, dmax, lmax);
    /* The model runs the wgmma forward on sm_90 and the mma.sync forward elsewhere (or with
     * --attention-impl flash-mma) and promises the same bits either way: the same products in
     * the same k order, the same softmax code. */
    CHECKF(bytes_of(ow, nout * sizeof(bf16)) == bytes_of(of, nout * sizeof(bf16)),
           "out wgmma vs mma.sync B%d NH%d T%d: the bytes differ", B, NH, T);
    CHECKF(bytes_of(lw, nlse * sizeof(float)) == bytes_of(lf, nlse * sizeof(float)),
           "lse wgmma vs mma.sync B%d NH%d T%d: the bytes differ", B, NH, T);
    /* every configuration: the rule's bytes (the first call above ran the rule) */
    std::vector<unsigned char> o0 = bytes_of(ow, nout * sizeof(bf16)), l0 = bytes_of(lw, nlse * sizeof(float));
    for (int v = 0; v < NCFG; v++) {
        gpu_ok(cudaMemset(oc, 0xff, nout * sizeof(bf16)), "poison");
        gpu_ok(cudaMemset(lc, 0xff, nlse * sizeof(float)), "poison");
        dt_cu_flash_fwd_wgmma_force(cfg[v]);
        dt_cu_flash_fwd_wgmma(oc, lc, qkv, B, T, C, NH, 0);
        dt_cu_flash_fwd_wgmma_force(DT_CU_WGFWD_RULE);
        gpu_ok(cudaGetLastError(), "dt_cu_flash_fwd_wgmma configuration launch");
        CHECKF(bytes_of(oc, nout * sizeof(bf16)) == o0, "out B%d NH%d T%d %s: the bytes differ from the rule's", B, NH,
               T, cfg_name[v]);
        CHECKF(bytes_of(lc, nlse * sizeof(float)) == l0, "lse B%d NH%d T%d %s: the bytes differ from the rule's", B, NH,
               T, cfg_name[v]);
    }
    if (cpu_ref) {
        std::vector<double> ro, rl;
        cpu_attention(hq, B, NH, T, ro, rl);
        vf rof(ro.begin(), ro.end()), rlf(rl.begin(), rl.end());
        CHECK_RELF(outw, rof, 1e-2, "out wgmma vs fp64 B%d NH%d T%d", B, NH, T);
        CHECK_RELF(outf, rof, 1e-2, "out mma.sync vs fp64 B%d NH%d T%d", B, NH, T);
        double lw64 = maxabs(lsew, rlf), lf64 = maxabs(lsef, rlf);
        CHECKF(lw64 <= 2e-4, "lse wgmma vs fp64 B%d NH%d T%d: max abs %.3g > 2e-4", B, NH, T, lw64);
        CHECKF(lf64 <= 2e-4, "lse mma.sync vs fp64 B%d NH%d T%d: max abs %.3g > 2e-4", B, NH, T, lf64);
        fprintf(stderr, "  B%d NH%d T%d: lse max abs vs fp64: wgmma %.3g, mma.sync %.3g\n", B, NH, T, lw64, lf64);
    }

    /* 2. determinism: replays under a concurrent forward on another stream */
    cudaStream_t s1, s2;
    gpu_ok(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking), "stream");
    gpu_ok(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking), "stream");
    static const int poison[3] = {0x5a, 0xa5, 0x00};
    for (int v = 0; v < NCFG; v++) {
        dt_cu_flash_fwd_wgmma_force(cfg[v]);
        for (int r = 0; r < 3; r++) {
            gpu_ok(cudaMemset(ow, poison[r], nout * sizeof(bf16)), "poison");
            gpu_ok(cudaMemset(lw, poison[r], nlse * sizeof(float)), "poison");
            gpu_ok(cudaDeviceSynchronize(), "poison");
            dt_cu_flash_fwd(oc, lc, qkv, B, T, C, NH, s2);
            dt_cu_flash_fwd_wgmma(ow, lw, qkv, B, T, C, NH, s1);
            gpu_ok(cudaGetLastError(), "replay launch");
            std::vector<unsigned char> o1 = bytes_of(ow, nout * sizeof(bf16)), l1 = bytes_of(lw, nlse * sizeof(float));
            CHECKF(o1 == o0, "B%d NH%d T%d %s replay %d: out differs from the first call", B, NH, T, cfg_name[v],
                   r + 1);
            CHECKF(l1 == l0, "B%d NH%d T%d %s replay %d: lse differs from the first call", B, NH, T, cfg_name[v],
                   r + 1);
        }
    }
    dt_cu_flash_fwd_wgmma_force(DT_CU_WGFWD_RULE);
    gpu_ok(cudaStreamDestroy(s1), "stream");
    gpu_ok(cudaStreamDestroy(s2), "stream");

    /* 3. timing */
    if (timed) {
        timing tm = {B, NH, T, 0, {0, 0, 0, 0}};
        tm.ms_mma = gpu_median_ms([&] { dt_cu_flash_fwd(of, lf, qkv, B, T, C, NH, 0); });
        for (int v = 0; v < NCFG; v++) {
            dt_cu_flash_fwd_wgmma_force(cfg[v]);
            tm.ms_cfg[v] = gpu_median_ms([&] { dt_cu_flash_fwd_wgmma(ow, lw, qkv, B, T, C, NH, 0); });
        }
        dt_cu_flash_fwd_wgmma_force(DT_CU_WGFWD_RULE);
        gpu_ok(cudaGetLastError(), "timed launches");
        g_times.push_back(tm);
    }
    cudaFree(qkv);
    cudaFree(of);
    cudaFree(ow);
    cudaFree(oc);
    cudaFree(lf);
    cudaFree(lw);
    cudaFree(lc);
}

static void test_small(void) { test_shape(2, 4, 1024, 1, 1); }
static void test_gpt2(void) { test_shape(16, 12, 1024, 0, 1); }
static void test_small_64row(void) { test_shape(2, 4, 960, 1, 0); }

int main(void) {
    if (!gpu_is_sm90("test_gpu_wgmma")) return 1;
    RUN(test_small);
    RUN(test_gpt2);
    RUN(test_small_64row);
    cudaError_t e = cudaDeviceSynchronize();
    CHECKF(e == cudaSuccess, "CUDA error at the end: %s", cudaGetErrorString(e));
    printf("%-18s %-14s %10s %8s %10s\n", "shape", "kernel", "ms", "TF/s", "vs serial");
    for (size_t i = 0; i < g_times.size(); i++) {
        const timing &t = g_times[i];
        double flop = 4.0 * t.B * t.NH * (double)t.T * t.T * HS / 2.0;
        char sh[32];
        snprintf(sh, sizeof sh, "B%d NH%d T%d", t.B, t.NH, t.T);
        printf("%-18s %-14s %10.4f %8.1f %10.3f\n", sh, "mma.sync", t.ms_mma, flop / (t.ms_mma * 1e9),
               t.ms_mma / t.ms_cfg[0]);
        for (int v = 0; v < NCFG; v++)
            printf("%-18s %-14s %10.4f %8.1f %10.3f\n", sh, cfg_name[v], t.ms_cfg[v], flop / (t.ms_cfg[v] * 1e9),
                   t.ms_cfg[v] / t.ms_cfg[0]);
    }
    return dt_test_report();
}
