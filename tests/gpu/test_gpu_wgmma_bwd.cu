/* The flash backward on warpgroup MMA (attention_wgmma_bwd_cuda.cu, dt_cu_flash_bwd_wgmma,
 * sm_90a; kernel A on 128-query tiles in attention_wgmma_bwd_q128_cuda.cu; shared pieces in
 * wgmma_cuda.cuh, flash_wgmma_cuda.cuh, flash_cuda.cuh and flash_layout.h; the 128-query kernel A's producer and
 * consumers meet on mbarriers through mbarrier.cuh's wrappers, which it shares with the own
 * GEMM: a lost arrival hangs the test, a wait that passes early changes bytes
 * in 1. or 3.) against the
 * mma.sync flash backward (attention_flash_cuda.cu, dt_cu_flash_bwd) on the GPU machine
 * (built by `make cuda` into build/gpu-tests/). Per shape (B 2 NH 4 T 1024 and B 16 NH 12
 * T 1024: every configuration; B 2 NH 4 T 960: an odd count of 64-row blocks, where kernel A
 * (either tile) and the wgmma dQ pass run one (consumer) warpgroup a block whatever is asked;
 * with one consumer warpgroup the 128-query kernel A meets every kind of tile on each shape:
 * the diagonal block first, alone or with a full half, and a half tile at the end of an
 * odd count of query blocks), random bf16 qkv in
 * [-2, 2) and dout in [-1, 1), out and lse from dt_cu_flash_fwd:
 *  1. against dt_cu_flash_bwd on the same inputs, with dqkv (and a guard after it), the
 *     scratch and the bias partials poisoned (0xff bytes: NaN) before each call, so an
 *     unwritten element fails: dqkv by ||w - f|| / ||f|| <= 1e-2 and max |w - f| <= 2^-6
 *     max |f| (if the bits differ, both are bf16 roundings of one fp32 computation summed in
 *     other orders: a few ulps, 2^-8 relative, on some elements; a wrong tile, mask or k-step
 *     moves whole rows by O(max |f|)); then byte-identical dqkv and qkv bias gradient (the
 *     promise that the kernel choice does not change a run's bits: the same products in the
 *     same k order and the same elementwise code); the tolerances say how far off a
 *     failure is. Every configuration (kernel A with 64 or 128 keys a block or on 128-query
 *     tiles, the mma.sync or the wgmma dQ pass) gives the same bytes; the guard after dqkv
 *     keeps its bytes;
 *  2. on the small shapes, dQ, dK and dV of both kernels against an fp64 CPU backward of
 *     causal softmax attention on the same bf16 values, relative L2 <= 2e-2 each (bf16 P,
 *     dS and dO operands, 2^-9 relative each, in sums over up to 1024 keys or queries:
 *     ~5e-3 measured on the mma.sync kernel, bench_attention's flash vs GEMM bound is 3e-2),
 *     and the bias gradient against the fp64 column sums of the dqkv it wrote, relative to
 *     |start| + sum |x| <= 1e-5 (fp32 chains of ~40 adds; a 64-row block left out is ~1e-2);
 *  3. determinism: three replays, each after poisoning dqkv, the scratch and the partials
 *     with another byte and with dt_cu_flash_bwd running on a second stream at the same time
 *     (its own buffers: other blocks on the SMs), byte-identical dqkv and bias gradient;
 *  4. timing (not a check): CUDA events, median of 20 after 3 warm-ups, each call alone on
 *     stream 0: both backwards with the fused bias sums (the model's call), the wgmma one
 *     without them and in each configuration, and the shared D kernel and mma.sync dQ pass
 *     alone (kernel A's time is the rest). TFLOP/s counts 5 products of the causal half,
 *     5 * 2 B NH T^2 64 / 2 flops.
 * Exits non-zero on any failed check (a CUDA error ends it with status 2).
 * Two other modes, at the GPT-2 shape only: DT_WGBWD_BENCH=n times the launch schedules of
 * the wgmma dQ pass (the rule, plain launches, programmatic dependent launch with and
 * without the D kernel) in n interleaved rounds, one call each, and prints the median, 10th
 * percentile and mean of each (so that a difference of 1% stands out of the machine's
 * drift); DT_WGBWD_PROFILE=1 calls the rule and the plain-launch form once each, for a
 * profiler (ncu -k regex:flash_bwd_dq_wgmma). */
#include "ops/ops_cuda.h"
#include "ops/attention/flash_cuda.cuh"

#include "gpu_check.cuh"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <vector>

static const int HS = 64;

/* The backward of causal softmax attention (scale 1/8) in fp64 on the bf16 values of qkv
 * (B T, 3C) and dout (B T, C): dqkv (B T, 3C). P from the fp64 scores, D = sum_j P dP. */
static void cpu_attention_bwd(const vf &qkv, const vf &dout, int B, int NH, int T, std::vector<double> &dqkv) {
    const int C = NH * HS, C3 = 3 * C;
    dqkv.assign((size_t)B * T * C3, 0.0);
    std::vector<double> p(T), dp(T);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < T; i++) {
                const float *q = &qkv[((size_t)b * T + i) * C3 + h * HS];
                const float *go = &dout[((size_t)b * T + i) * C + h * HS];
                double mx = -INFINITY;
                for (int j = 0; j <= i; j++) {
                    const float *k = &qkv[((size_t)b * T + j) * C3 + C + h * HS];
                    const float *v = &qkv[((size_t)b * T + j) * C3 + 2 * C + h * HS];
                    double d = 0, e = 0;
                    for (int c = 0; c < HS; c++) {
                        d += (double)q[c] * k[c];
                        e += (double)go[c] * v[c];
                    }
                    p[j] = d / 8.0;
                    dp[j] = e;
                    mx = p[j] > mx ? p[j] : mx;
                }
                double sum = 0, D = 0;
                for (int j = 0; j <= i; j++) sum += (p[j] = exp(p[j] - mx));
                for (int j = 0; j <= i; j++) D += (p[j] /= sum) * dp[j];
                double *dq = &dqkv[((size_t)b * T + i) * C3 + h * HS];
                for (int j = 0; j <= i; j++) {
                    const float *k = &qkv[((size_t)b * T + j) * C3 + C + h * HS];
                    double ds = p[j] * (dp[j] - D) / 8.0;
                    double *dk = &dqkv[((size_t)b * T + j) * C3 + C + h * HS];
                    double *dv = dk + C;
                    for (int c = 0; c < HS; c++) {
                        dq[c] += ds * k[c];
                        dk[c] += ds * q[c];
                        dv[c] += p[j] * go[c];
                    }
                }
            }
}

/* ||a - r|| / ||r|| over the columns [c0, c0 + w) of every row of (rows x C3) buffers. */
static double rel_cols(const vf &a, const std::vector<double> &r, int C3, int c0, int w) {
    double num = 0, den = 0;
    for (size_t row = 0; row < a.size() / C3; row++)
        for (int c = c0; c < c0 + w; c++) {
            size_t i = row * C3 + c;
            if (!isfinite(a[i])) return 1e30;
            num += (a[i] - r[i]) * (a[i] - r[i]);
            den += r[i] * r[i];
        }
    return sqrt(num / (den > 0 ? den : 1e-300));
}

/* max |a - r| (1e30 when a has a NaN or an infinity); *rmax: max |r|. */
static double maxabs(const vf &a, const vf &r, double *rmax) {
    double m = 0;
    *rmax = 0;
    for (size_t i = 0; i < a.size(); i++) {
        if (!isfinite(a[i])) return 1e30;
        double d = fabs((double)a[i] - r[i]);
        m = d > m ? d : m;
        *rmax = fabs((double)r[i]) > *rmax ? fabs((double)r[i]) : *rmax;
    }
    return m;
}

/* The buffers of one backward call. */
struct bwd_bufs {
    bf16 *dqkv; /* nq elements, then nq guard elements */
    float *dbias, *part;
    unsigned char *scr;
    size_t nq, nscr, npart;
    int C3;
};
static bwd_bufs bufs_new(int B, int T, int NH) {
    bwd_bufs u;
    const int C = NH * HS;
    u.C3 = 3 * C;
    u.nq = (size_t)B * T * u.C3;
    u.nscr = dt_cu_flash_bwd_scratch(B, T, C, NH);
    u.npart = (size_t)dt_cu_flash_bias_parts(B, T) * u.C3;
    u.dqkv = dev<bf16>(2 * u.nq);
    u.dbias = dev<float>((size_t)u.C3);
    u.part = dev<float>(u.npart);
    u.scr = dev<unsigned char>(u.nscr);
    return u;
}
static void bufs_free(bwd_bufs &u) {
    cudaFree(u.dqkv);
    cudaFree(u.dbias);
    cudaFree(u.part);
    cudaFree(u.scr);
}
/* Poisons everything the call writes or reads back (byte x), the guard with 0x5a, the bias
 * gradient to the start b0 (on the host: up to the caller's sync). */
static void bufs_poison(bwd_bufs &u, int x, const vf &b0, cudaStream_t s) {
    gpu_ok(cudaMemsetAsync(u.dqkv, x, u.nq * sizeof(bf16), s), "poison");
    gpu_ok(cudaMemsetAsync(u.dqkv + u.nq, 0x5a, u.nq * sizeof(bf16), s), "poison");
    gpu_ok(cudaMemsetAsync(u.scr, x, u.nscr, s), "poison");
    gpu_ok(cudaMemsetAsync(u.part, x, u.npart * sizeof(float), s), "poison");
    gpu_ok(cudaMemcpyAsync(u.dbias, b0.data(), b0.size() * sizeof(float), cudaMemcpyHostToDevice, s), "bias start");
    gpu_ok(cudaStreamSynchronize(s), "poison");
}

/* The configurations of dt_cu_flash_bwd_wgmma (attention_cuda.h, dt_cu_flash_bwd_wgmma_force):
 * kernel A with one warpgroup (64 keys) or two (128 keys) a block, the dQ pass on mma.sync
 * or wgmma (the rule is the fourth); then kernel A on 128-query tiles
 * (attention_wgmma_bwd_q128_cuda.cu) with two consumer warpgroups a block (one where T %
 * 128 != 0) or one. */
#define NCFG 10
static const int cfg_a[NCFG] = {DT_CU_WGBWD_A_64,   DT_CU_WGBWD_A_128,      DT_CU_WGBWD_A_128,  DT_CU_WGBWD_A_64,
                                DT_CU_WGBWD_A_Q128, DT_CU_WGBWD_A_Q128_K64, DT_CU_WGBWD_A_Q128, DT_CU_WGBWD_A_Q128,
                                DT_CU_WGBWD_A_Q128_K64, DT_CU_WGBWD_A_64};
static const int cfg_dq[NCFG] = {DT_CU_WGBWD_DQ_MMA,         DT_CU_WGBWD_DQ_MMA,           DT_CU_WGBWD_DQ_WGMMA,
                                 DT_CU_WGBWD_DQ_WGMMA,       DT_CU_WGBWD_DQ_WGMMA,         DT_CU_WGBWD_DQ_WGMMA,
                                 DT_CU_WGBWD_DQ_WGMMA_PDL,   DT_CU_WGBWD_DQ_WGMMA_PDL_D,   DT_CU_WGBWD_DQ_WGMMA_PDL_REV,
                                 DT_CU_WGBWD_DQ_WGMMA_PDL_REV};
static const char *const cfg_name[NCFG] = {"A 64, dQ mma.sync",    "A 128, dQ mma.sync",  "A 128, dQ wgmma",
                                           "A 64, dQ wgmma",       "A q128, dQ wgmma",    "A q128 k64, dQ wgmma",
                                           "A q128, dQ pdl",       "A q128, D+dQ pdl",    "A q128 k64, dQ pdl rev",
                                           "A 64, dQ pdl rev"};
struct timing { int B, NH, T; double mma, wg, cfg[NCFG], wg_nobias, prep, dq; };
static std::vector<timing> g_times;
static int g_profile; /* DT_WGBWD_PROFILE set: test_shape calls the dQ schedules once each */
static int g_bench;   /* DT_WGBWD_BENCH=n: test_shape times the dQ schedules, n rounds */

/* The launch schedules of the wgmma dQ pass that DT_WGBWD_BENCH and DT_WGBWD_PROFILE run
 * (kernel A on 128-query tiles); the first is the rule. */
#define NSCHED 5
static const int sched_dq[NSCHED] = {DT_CU_WGBWD_DQ_RULE, DT_CU_WGBWD_DQ_WGMMA, DT_CU_WGBWD_DQ_WGMMA_PDL,
                                     DT_CU_WGBWD_DQ_WGMMA_PDL_D, DT_CU_WGBWD_DQ_WGMMA};
static const char *const sched_name[NSCHED] = {"the rule (A, dQ pdl, rev)", "plain launches",
                                               "A, dQ pdl", "D, A, dQ pdl", "plain launches, again"};

/* g_bench rounds of one call of each schedule (CUDA events around each call, alone on
 * stream 0): their median, 10th percentile and mean; or, with g_profile, one call each. */
static void time_schedules(bwd_bufs &w, const bf16 *dout, const bf16 *qkv, const bf16 *out, const float *lse, int B,
                           int T, int C, int NH) {
    std::vector<std::vector<float>> ms(NSCHED);
    cudaEvent_t e0, e1;
    gpu_ok(cudaEventCreate(&e0), "cudaEventCreate");
    gpu_ok(cudaEventCreate(&e1), "cudaEventCreate");
    const int rounds = g_profile ? 1 : g_bench + 5;
    for (int r = 0; r < rounds; r++)
        for (int v = 0; v < NSCHED; v++) {
            dt_cu_flash_bwd_wgmma_force(DT_CU_WGBWD_A_Q128, sched_dq[v]);
            cudaEventRecord(e0, 0);
            dt_cu_flash_bwd_wgmma(w.dqkv, w.dbias, w.part, w.scr, dout, qkv, out, lse, B, T, C, NH, 0, 0);
            cudaEventRecord(e1, 0);
            gpu_ok(cudaEventSynchronize(e1), "timed call");
            float t = 0;
            cudaEventElapsedTime(&t, e0, e1);
            if (r >= 5) ms[v].push_back(t);
        }
    dt_cu_flash_bwd_wgmma_force(0, 0);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaError_t e = cudaDeviceSynchronize();
    CHECKF(e == cudaSuccess, "timed calls: %s", cudaGetErrorString(e));
    if (g_profile) return;
    printf("B%d NH%d T%d, kernel A q128, %d interleaved rounds (ms): median, 10th percentile, mean\n", B, NH, T,
           g_bench);
    for (int v = 0; v < NSCHED; v++) {
        std::vector<float> x = ms[v];
        std::sort(x.begin(), x.end());
        double mean = 0;
        for (float t : x) mean += t;
        printf("  %-26s %.4f %.4f %.4f\n", sched_name[v], x[x.size() / 2], x[x.size() / 10], mean / (double)x.size());
    }
}

static void test_shape(int B, int NH, int T, int cpu_ref, int timed) {
    const int C = NH * HS, C3 = 3 * C, BT = B * T;
    const size_t nqkv = (size_t)BT * C3, nout = (size_t)BT * C, nlse = (size_t)B * NH * T;
    uint32_t draw = 0;
    const uint32_t purpose = (uint32_t)(B * 100000 + NH * 10000 + T);
    vf hq = rnd_bf16(0x57474257u, purpose, &draw, nqkv, 2.0f), hd = rnd_bf16(0x57474257u, purpose, &draw, nout, 1.0f);
    vf b0 = rnd_bf16(0x57474257u, purpose, &draw, (size_t)C3, 1.0f); /* the bias gradient before the call */
    bf16 *qkv = up16(hq), *dout = up16(hd), *out = dev<bf16>(nout);
    float *lse = dev<float>(nlse);
    dt_cu_flash_fwd(out, lse, qkv, B, T, C, NH, 0);
    gpu_ok(cudaGetLastError(), "dt_cu_flash_fwd launch");
    bwd_bufs f = bufs_new(B, T, NH), w = bufs_new(B, T, NH);
    auto free_all = [&] {
        bufs_free(f);
        bufs_free(w);
        cudaFree(qkv);
        cudaFree(dout);
        cudaFree(out);
        cudaFree(lse);
    };
    if (g_bench || g_profile) {
        time_schedules(w, dout, qkv, out, lse, B, T, C, NH);
        free_all();
        return;
    }

    /* 1. against dt_cu_flash_bwd */
    bufs_poison(f, 0xff, b0, 0);
    bufs_poison(w, 0xff, b0, 0);
    dt_cu_flash_bwd(f.dqkv, f.dbias, f.part, f.scr, dout, qkv, out, lse, B, T, C, NH, 0, 0);
    gpu_ok(cudaGetLastError(), "dt_cu_flash_bwd launch");
    dt_cu_flash_bwd_wgmma(w.dqkv, w.dbias, w.part, w.scr, dout, qkv, out, lse, B, T, C, NH, 0, 0);
    gpu_ok(cudaGetLastError(), "dt_cu_flash_bwd_wgmma launch");
    gpu_ok(cudaDeviceSynchronize(), "dt_cu_flash_bwd_wgmma");
    vf gf = down16(f.dqkv, nqkv), gw = down16(w.dqkv, nqkv);
    CHECK_RELF(gw, gf, 1e-2, "dqkv wgmma vs mma.sync B%d NH%d T%d", B, NH, T);
    double fmax = 0, dmax = maxabs(gw, gf, &fmax);
    CHECKF(dmax <= fmax / 64, "dqkv wgmma vs mma.sync B%d NH%d T%d: max abs %.3g > max |f| / 64 = %.3g", B, NH, T,
           dmax, fmax / 64);
    fprintf(stderr, "  B%d NH%d T%d: dqkv max abs %.3g (max |f| %.3g)\n", B, NH, T, dmax, fmax);
    std::vector<unsigned char> q0 = bytes_of(w.dqkv, nqkv * sizeof(bf16)), b0w = bytes_of(w.dbias, C3 * sizeof(float));
    size_t ndiff = 0;
    {
        std::vector<unsigned char> qf = bytes_of(f.dqkv, nqkv * sizeof(bf16));
        const uint16_t *x = reinterpret_cast<const uint16_t *>(q0.data()), *y = reinterpret_cast<const uint16_t *>(qf.data());
        for (size_t i = 0; i < nqkv; i++) ndiff += x[i] != y[i];
    }
    CHECKF(ndiff == 0, "dqkv wgmma vs mma.sync B%d NH%d T%d: %zu of %zu values differ in their bytes", B, NH, T, ndiff,
           nqkv);
    vf bf = down32(f.dbias, C3), bw = down32(w.dbias, C3);
    CHECK_RELF(bw, bf, 1e-5, "qkv bias grad wgmma vs mma.sync B%d NH%d T%d", B, NH, T);
    CHECKF(!memcmp(bw.data(), bf.data(), C3 * sizeof(float)),
           "qkv bias grad wgmma vs mma.sync B%d NH%d T%d: the bytes differ", B, NH, T);
    {
        std::vector<unsigned char> guard = bytes_of(w.dqkv + nqkv, nqkv * sizeof(bf16));
        size_t touched = 0;
        for (unsigned char c : guard) touched += c != 0x5a;
        CHECKF(touched == 0, "B%d NH%d T%d: %zu guard bytes after dqkv overwritten", B, NH, T, touched);
    }
    /* every configuration: the same bytes */
    for (int v = 0; v < NCFG; v++) {
        bufs_poison(w, 0xff, b0, 0);
        dt_cu_flash_bwd_wgmma_force(cfg_a[v], cfg_dq[v]);
        dt_cu_flash_bwd_wgmma(w.dqkv, w.dbias, w.part, w.scr, dout, qkv, out, lse, B, T, C, NH, 0, 0);
        dt_cu_flash_bwd_wgmma_force(0, 0);
        gpu_ok(cudaGetLastError(), "dt_cu_flash_bwd_wgmma configuration launch");
        vf gv = down16(w.dqkv, nqkv);
        double vmax = 0, dv = maxabs(gv, gf, &vmax);
        fprintf(stderr, "  B%d NH%d T%d %s: dqkv rel err %.3g, max abs %.3g vs mma.sync\n", B, NH, T, cfg_name[v],
                relerr(gv, gf), dv);
        CHECKF(bytes_of(w.dqkv, nqkv * sizeof(bf16)) == q0, "B%d NH%d T%d %s: dqkv's bytes differ", B, NH, T,
               cfg_name[v]);
        CHECKF(bytes_of(w.dbias, C3 * sizeof(float)) == b0w, "B%d NH%d T%d %s: the bias bytes differ", B, NH, T,
               cfg_name[v]);
    }

    /* the entry points that take LD as given (the GEMM's DOT epilogue writes it in the model):
     * with the D kernel's LD left in the scratch by the call before, the same bytes; a
     * poisoned LD (negative control) changes them */
    for (int mma = 0; mma < 2; mma++) {
        bwd_bufs &u = mma ? f : w;
        std::vector<unsigned char> ld = bytes_of(u.scr, (size_t)2 * B * NH * T * sizeof(float));
        bufs_poison(u, 0xff, b0, 0);
        gpu_ok(cudaMemcpy(u.scr, ld.data(), ld.size(), cudaMemcpyHostToDevice), "LD back");
        if (mma) dt_cu_flash_bwd_ld(u.dqkv, u.dbias, u.part, u.scr, dout, qkv, B, T, C, NH, 0, 0);
        else dt_cu_flash_bwd_wgmma_ld(u.dqkv, u.dbias, u.part, u.scr, dout, qkv, B, T, C, NH, 0, 0);
        gpu_ok(cudaDeviceSynchronize(), "the _ld entry points");
        CHECKF(bytes_of(u.dqkv, nqkv * sizeof(bf16)) == q0 && bytes_of(u.dbias, C3 * sizeof(float)) == b0w,
               "B%d NH%d T%d: %s with LD given: the bytes differ", B, NH, T,
               mma ? "dt_cu_flash_bwd_ld" : "dt_cu_flash_bwd_wgmma_ld");
        bufs_poison(u, 0xff, b0, 0);
        gpu_ok(cudaMemset(u.scr, 0, ld.size() / 2), "LD zeroed");
        if (mma) dt_cu_flash_bwd_ld(u.dqkv, u.dbias, u.part, u.scr, dout, qkv, B, T, C, NH, 0, 0);
        else dt_cu_flash_bwd_wgmma_ld(u.dqkv, u.dbias, u.part, u.scr, dout, qkv, B, T, C, NH, 0, 0);
        gpu_ok(cudaDeviceSynchronize(), "the _ld entry points (zeroed LD)");
        CHECKF(bytes_of(u.dqkv, nqkv * sizeof(bf16)) != q0, "B%d NH%d T%d: %s ignored a zeroed LD", B, NH, T,
               mma ? "dt_cu_flash_bwd_ld" : "dt_cu_flash_bwd_wgmma_ld");
    }

    /* 2. against fp64 */
    if (cpu_ref) {
        std::vector<double> ref;
        cpu_attention_bwd(hq, hd, B, NH, T, ref);
        static const char *const part[3] = {"dQ", "dK", "dV"};
        for (int k = 0; k < 3; k++) {
            double ew = rel_cols(gw, ref, C3, k * C, C), ef = rel_cols(gf, ref, C3, k * C, C);
            CHECKF(ew <= 2e-2, "%s wgmma vs fp64 B%d NH%d T%d: rel err %.3g > 2e-2", part[k], B, NH, T, ew);
            CHECKF(ef <= 2e-2, "%s mma.sync vs fp64 B%d NH%d T%d: rel err %.3g > 2e-2", part[k], B, NH, T, ef);
            fprintf(stderr, "  B%d NH%d T%d %s vs fp64: wgmma %.3g, mma.sync %.3g (tol 2e-2)\n", B, NH, T, part[k], ew,
                    ef);
        }
        double worst = 0;
        size_t bad = 0;
        for (int c = 0; c < C3; c++) {
            double sum = b0[c], mag = fabs((double)b0[c]);
            for (int r = 0; r < BT; r++) {
                sum += gw[(size_t)r * C3 + c];
                mag += fabs((double)gw[(size_t)r * C3 + c]);
            }
            double e = fabs((double)bw[c] - sum) / (mag > 0 ? mag : 1e-300);
            if (!(e <= 1e-5)) bad++;
            if (!(e <= worst)) worst = e == e ? e : 1e30;
        }
        CHECKF(bad == 0, "B%d NH%d T%d: %zu bias sums off the fp64 sums of dqkv (worst %.3g, tol 1e-5)", B, NH, T, bad,
               worst);
        fprintf(stderr, "  B%d NH%d T%d bias vs fp64 column sums: worst %.3g (tol 1e-5 of |start| + sum |x|)\n", B, NH, T,
                worst);
    }

    /* 3. determinism: replays under a concurrent mma.sync backward on another stream */
    cudaStream_t s1, s2;
    gpu_ok(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking), "stream");
    gpu_ok(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking), "stream");
    static const int poison[3] = {0x5a, 0xa5, 0x00};
    for (int r = 0; r < 3; r++) {
        bufs_poison(w, poison[r], b0, s1);
        dt_cu_flash_bwd(f.dqkv, f.dbias, f.part, f.scr, dout, qkv, out, lse, B, T, C, NH, s2, s2);
        dt_cu_flash_bwd_wgmma(w.dqkv, w.dbias, w.part, w.scr, dout, qkv, out, lse, B, T, C, NH, s1, s1);
        gpu_ok(cudaGetLastError(), "replay launch");
        CHECKF(bytes_of(w.dqkv, nqkv * sizeof(bf16)) == q0, "B%d NH%d T%d replay %d: dqkv differs from the first call",
               B, NH, T, r + 1);
        CHECKF(bytes_of(w.dbias, C3 * sizeof(float)) == b0w,
               "B%d NH%d T%d replay %d: the bias gradient differs from the first call", B, NH, T, r + 1);
    }
    gpu_ok(cudaStreamDestroy(s1), "stream");
    gpu_ok(cudaStreamDestroy(s2), "stream");

    /* 4. timing */
    if (timed) {
        timing tm;
        tm.B = B, tm.NH = NH, tm.T = T;
        tm.mma = gpu_median_ms([&] { dt_cu_flash_bwd(f.dqkv, f.dbias, f.part, f.scr, dout, qkv, out, lse, B, T, C, NH, 0, 0); });
        tm.wg = gpu_median_ms([&] { dt_cu_flash_bwd_wgmma(w.dqkv, w.dbias, w.part, w.scr, dout, qkv, out, lse, B, T, C, NH, 0, 0); });
        tm.wg_nobias = gpu_median_ms([&] { dt_cu_flash_bwd_wgmma(w.dqkv, NULL, NULL, w.scr, dout, qkv, out, lse, B, T, C, NH, 0, 0); });
        for (int v = 0; v < NCFG; v++) {
            dt_cu_flash_bwd_wgmma_force(cfg_a[v], cfg_dq[v]);
            tm.cfg[v] = gpu_median_ms([&] { dt_cu_flash_bwd_wgmma(w.dqkv, w.dbias, w.part, w.scr, dout, qkv, out, lse, B, T, C, NH, 0, 0); });
        }
        dt_cu_flash_bwd_wgmma_force(0, 0);
        tm.prep = gpu_median_ms([&] { dt_cu_flash_bwd_prep(dt_cu_flash_scratch_ld(w.scr), dout, out, lse, B, T, NH, 0, 0); });
        tm.dq = gpu_median_ms([&] {
            dt_cu_flash_bwd_dq(w.dqkv, w.part, dt_cu_flash_scratch_ds(w.scr, B, T, NH), qkv, B, T, NH, 0);
        });
        gpu_ok(cudaGetLastError(), "timed launches");
        g_times.push_back(tm);
    }
    free_all();
}

static void test_small(void) { test_shape(2, 4, 1024, 1, 1); }
static void test_gpt2(void) { test_shape(16, 12, 1024, 0, 1); }
static void test_small_64key(void) { test_shape(2, 4, 960, 1, 0); }
/* The fewest query blocks: one (only the diagonal half of one tile), two (one block of the
 * two-consumer form, the second warpgroup's first half skipped) and three (the one-consumer
 * form ending on a half tile). */
static void test_few_blocks(void) {
    test_shape(1, 2, 64, 1, 0);
    test_shape(1, 2, 128, 1, 0);
    test_shape(3, 1, 192, 1, 0);
}

int main(void) {
    if (!gpu_is_sm90("test_gpu_wgmma_bwd")) return 1;
    if (getenv("DT_WGBWD_BENCH") || getenv("DT_WGBWD_PROFILE")) {
        g_bench = getenv("DT_WGBWD_BENCH") ? atoi(getenv("DT_WGBWD_BENCH")) : 0;
        g_bench = g_bench > 0 ? g_bench : 100;
        g_profile = getenv("DT_WGBWD_PROFILE") != NULL;
        RUN(test_gpt2);
        printf("launches with programmatic dependent launch refused (ordinary launch instead): %d\n",
               dt_cu_pdl_refused());
        return dt_test_report();
    }
    RUN(test_small);
    RUN(test_gpt2);
    RUN(test_small_64key);
    RUN(test_few_blocks);
    cudaError_t e = cudaDeviceSynchronize();
    CHECKF(e == cudaSuccess, "CUDA error at the end: %s", cudaGetErrorString(e));
    printf("launches with programmatic dependent launch refused (ordinary launch instead): %d\n",
           dt_cu_pdl_refused());
    /* wgmma: the rule, with and without the fused bias sums; then each configuration; D and
     * dQ mma: the D kernel and the mma.sync dQ pass alone; A = "A 64, dQ mma.sync" minus
     * both (kernel A with the bias finish); A q128, A q128k64: A plus the difference of that
     * configuration and "A 64, dQ wgmma" (the same dQ pass) */
    printf("%-16s %8s %8s %8s", "shape (ms)", "mma.sync", "wgmma", "no bias");
    for (int v = 0; v < NCFG; v++) printf(" %20s", cfg_name[v]);
    printf(" %8s %8s %8s %8s %8s %8s\n", "D", "dQ mma", "A", "A q128", "A q128k64", "TF/s");
    for (size_t i = 0; i < g_times.size(); i++) {
        const timing &t = g_times[i];
        double flop = 5.0 * 2.0 * t.B * t.NH * (double)t.T * t.T * HS / 2.0;
        char sh[32];
        snprintf(sh, sizeof sh, "B%d NH%d T%d", t.B, t.NH, t.T);
        printf("%-16s %8.4f %8.4f %8.4f", sh, t.mma, t.wg, t.wg_nobias);
        for (int v = 0; v < NCFG; v++) printf(" %20.4f", t.cfg[v]);
        const double a64 = t.cfg[0] - t.prep - t.dq;
        printf(" %8.4f %8.4f %8.4f %8.4f %8.4f %8.1f\n", t.prep, t.dq, a64, a64 + t.cfg[4] - t.cfg[3],
               a64 + t.cfg[5] - t.cfg[3], flop / (t.wg * 1e9));
    }
    return dt_test_report();
}
