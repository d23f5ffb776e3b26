/* Our own GEMM (gemm_wgmma_cuda.cu, dt_cu_gemm_wgmma: TMA loads, warpgroup MMA, persistent
 * blocks; sm_90a; its wgmma group sync from wgmma_sync.cuh, the proxy fence and the TMA
 * ring's mbarriers from mbarrier.cuh: a lost arrival hangs the test, a wait that passes
 * early changes bytes) on the GPU machine (built by `make cuda` into build/gpu-tests/), in each of
 * its schedules: the rule (128 x 128 ping-pong; 128 x 256 cooperative for K >= 2048 where N
 * allows) and, forced, each of 128 x 256 and 128 x 128 cooperative, 64 x 256 and
 * 128 x 128 ping-pong. For each activation GEMM of the GPT-2 124M step (B 16
 * T 1024: M = 16384 rows; the forward's NT shapes with bias, the fc forward with the GELU
 * epilogue, the input gradients' NN shapes, the fcproj input gradient with dGELU), and small
 * shapes of each kind, random bf16 inputs in [-1, 1) (aux pre-activations in [-3, 3)):
 *  1. accuracy against dt_cu_gemm (cuBLASLt, det policy) on the same inputs (every
 *     schedule), outputs poisoned (0xff bytes: NaN) first so an unwritten element fails: C
 *     and the GELU aux by ||w - c|| / ||c|| <= 1e-2 (both are bf16 roundings of fp32 sums of
 *     the same products in other orders, ~2e-3; cuBLASLt's GELU is another tanh, within an
 *     ulp), and the rule on the small shapes (256 x 256 x 192 ...; one-tile and odd tile
 *     counts, so a block's second consumer warpgroup has no tile or one tile fewer) against
 *     fp64 on the CPU, same tolerance; whether each forced schedule gives the rule's bytes
 *     is printed (not a check: the contract is per binary and schedule);
 *     The rule with its tiles in the static order (b, b + grid, ...) instead of claimed from
 *     the launch's counter gives the same bytes (a check: who computes a tile must not
 *     change its bits);
 *  2. determinism: byte-identical to the first call, each replay after poisoning C (and
 *     aux) with another byte: three with a 4096^3 cuBLASLt GEMM running on a second stream;
 *     three launched while another stream's kernel holds half the SMs, or all but 8, for
 *     30 us (its blocks take 120 KB of shared memory, so ours cannot start there until it
 *     ends: the blocks that start late claim fewer tiles); three replays of a CUDA graph
 *     holding the call (its tile counter captured: each launch must leave it at zero); and
 *     two calls at once on two streams (two counters);
 *  3. timing (not a check): CUDA events around each call queued behind a busy wait (GPU
 *     time without the host's launch overhead), every schedule, the rule in the static
 *     order and cuBLASLt one after another in each of 20 rounds after 3 warm-up rounds (so
 *     a drift of clocks or of the L2 state falls on all alike), the median of each, in ms
 *     and TFLOP/s; then "busy": the same for the rule (claims, static order) and cuBLASLt
 *     launched while half the SMs are held for 30 us by another stream's kernel, timed from
 *     the moment all of that kernel's blocks run to the end of the call.
 * The dGELU kinds marked csum (the model's call and three small ones) also ask for the column
 * sums of C (dt_cu_gemm_args.csum, the fc bias gradient; bias_bwd=det, so the finish is the
 * fixed order): against the fp64 reference's column sums (1e-4 of each column's sum of
 * magnitudes, small shapes), against the stored C's (4e-3: the kernel sums before the bf16
 * rounding), in every schedule and with the fast finish too; their bytes in the static order
 * and in every replay of 2. equal the first call's; cuBLASLt is timed with dt_cu_colsum after
 * it, the pair the model would run instead.
 * The DOT epilogue (the attention's D from the attproj input gradient, test_dot): the model's
 * shape (B 16 T 1024 NH 12, K 768) and small ones (odd tile counts, T 128): in every
 * schedule C's bytes equal the DEFAULT epilogue's, and LD's (poisoned first) equal a CPU
 * emulation of the epilogue's order on the stored C (fmaf chains of lane t's channels
 * 8 j + 2 t, + 1, then (S0 + S1) + (S2 + S3); lse log2(e) as a float product); D against
 * fp64 (1e-5 of the row's sum of |dO O|) and against the D kernel (dt_cu_flash_bwd_prep, its
 * own order: within 1e-5 too); the same bytes in the static order, with SMs held and
 * across graph replays; a changed O element changes LD (negative control); and the timing
 * of DEFAULT, DOT and cuBLASLt + the D kernel (the pair it replaces).
 * Also checks that dt_cu_gemm_wgmma refuses a call that does not fit (DT_EINVAL, nothing
 * written), a column sum without dGELU or without its partials, and DOT without its LD
 * arguments (and dt_cu_gemm, cuBLASLt, DOT at all). Exits non-zero on any
 * failed check (a CUDA error ends it with status 2). */
#include "ops/gemm/gemm_tma_plan.h"
#include "ops/ops_cuda.h"
#include "ops/attention/flash_cuda.cuh" /* dt_cu_flash_bwd_prep: the D kernel the DOT epilogue replaces */

#include "gpu_check.cuh"

#include <functional>
#include <math.h>
#include <string.h>
#include <vector>

static dt_cu_blas *g_blas;

static double gelu_d(double x) { return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }
static double gelu_grad_d(double x) {
    double u = 0.7978845608028654 * (x + 0.044715 * x * x * x), th = tanh(u);
    return 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * 0.7978845608028654 * (1.0 + 3.0 * 0.044715 * x * x);
}

/* csum: with dGELU, the fused column sums of C (dt_cu_gemm_args.csum) too */
struct kind { const char *name; int tb, epi, bias, M, N, K, per_step, csum; };

/* The kernel's column sums against those of c (summed in fp64): per column
 * |got - ref| <= tol * sum |c|. The kernel sums C's fp32 values before their bf16 rounding:
 * against the stored C the bound is the roundings' (2^-9 of each element) plus the fp32
 * sum's; against the fp64 reference the fp32 sums' alone. */
#define CSUM_TOL_STORED 4e-3
#define CSUM_TOL_FP64 1e-4
static void check_csum(const std::vector<float> &got, const vf &c, int M, int N, double tol, const char *what) {
    double worst = 0;
    for (int j = 0; j < N; j++) {
        double s = 0, a = 0;
        for (int i = 0; i < M; i++) {
            s += c[(size_t)i * N + j];
            a += fabs(c[(size_t)i * N + j]);
        }
        const double e = fabs((double)got[j] - s) / (a > 0 ? a : 1.0);
        worst = e > worst || e != e ? e : worst;
    }
    CHECKF(worst <= tol, "%s: column sums off by %.3g of sum |c| (tol %.0e)", what, worst, tol);
    fprintf(stderr, "  %-44s column sums %.3g of sum |c| (tol %.0e)\n", what, worst, tol);
}

/* The timed variants, in a round's order: the forced schedules, the rule in the static
 * order, then cuBLASLt; under a busy GPU, the rule (claims), the rule (static), cuBLASLt. */
enum { T_COOP, T_COOP128, T_PP64, T_PP128, T_STATIC, T_CUBLAS, T_COUNT };
static const char *const t_name[T_COUNT] = {"coop", "coop128", "pp64x256", "pp128", "static", "cublas"};
enum { B_DYN, B_STATIC, B_CUBLAS, B_COUNT };
static const char *const b_name[B_COUNT] = {"busy rule", "busy stat", "busy cubl"};
struct timing { const char *name; int M, N, K, per_step; double ms[T_COUNT], busy[B_COUNT]; };
static std::vector<timing> g_times;
static int g_sms;

/* Keeps stream 0 busy for about us microseconds (the global timer), so that the host has
 * queued a timed call and its closing event before the GPU reaches them: the events then
 * time the GPU's work, not the host's launch overhead. */
__global__ void busy_wait(unsigned us) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); while (t - t0 < 1000ull * us);
}

/* Another stream's kernel that holds an SM a block for us microseconds: each block counts
 * itself in *started when it runs, and takes OCCUPY_SMEM of shared memory, so that no block
 * of ours (over 200 KB) fits beside it on its SM. */
#define OCCUPY_SMEM (120 * 1024)
__global__ void occupy(int *started, unsigned us) {
    if (threadIdx.x == 0) atomicAdd(started, 1);
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); while (t - t0 < 1000ull * us);
}
/* Returns once *started has reached target (all of occupy's blocks of this round run). */
__global__ void wait_started(const int *started, int target) {
    while (*(volatile const int *)started < target) __nanosleep(200);
}
/* Holds `blocks` SMs for us microseconds on stream hold, and makes stream s wait until they
 * are all held (started counts up across rounds: *expected is its next target). */
static void hold_sms(int *started, int *expected, int blocks, unsigned us, cudaStream_t hold, cudaStream_t s) {
    occupy<<<blocks, 32, OCCUPY_SMEM, hold>>>(started, us);
    *expected += blocks;
    wait_started<<<1, 1, 0, s>>>(started, *expected);
    gpu_ok(cudaGetLastError(), "hold_sms launches");
}

/* Median ms of each f[v] (CUDA events on stream 0, after a 50 us busy wait): 3 warm-up
 * rounds, then 20 rounds that each time every variant once, in order. An empty f[v] is
 * skipped (median 0). */
static void median_alt(const std::vector<std::function<void()>> &f, double *out) {
    cudaEvent_t e0, e1;
    gpu_ok(cudaEventCreate(&e0), "cudaEventCreate");
    gpu_ok(cudaEventCreate(&e1), "cudaEventCreate");
    std::vector<std::vector<float>> ms(f.size());
    for (int r = 0; r < 23; r++)
        for (size_t v = 0; v < f.size(); v++) {
            if (!f[v]) continue;
            busy_wait<<<1, 1>>>(50);
            cudaEventRecord(e0, 0);
            f[v]();
            cudaEventRecord(e1, 0);
            gpu_ok(cudaEventSynchronize(e1), "timed call");
            float t = 0;
            cudaEventElapsedTime(&t, e0, e1);
            if (r >= 3) ms[v].push_back(t);
        }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    for (size_t v = 0; v < f.size(); v++) {
        std::sort(ms[v].begin(), ms[v].end());
        out[v] = ms[v].empty() ? 0.0 : (ms[v][9] + ms[v][10]) / 2.0;
    }
}

/* Median ms of each f[v](s1) launched while half the SMs are held for 30 us by a kernel on
 * another stream, from the moment all of its blocks run (an event on s1 after the wait) to
 * the end of the call; 3 warm-up rounds, then 20 that each time every variant once. */
static void median_busy(const std::vector<std::function<void(cudaStream_t)>> &f, double *out) {
    cudaStream_t s1, s2;
    gpu_ok(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking), "stream");
    gpu_ok(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking), "stream");
    cudaEvent_t e0, e1;
    gpu_ok(cudaEventCreate(&e0), "cudaEventCreate");
    gpu_ok(cudaEventCreate(&e1), "cudaEventCreate");
    int *started = dev<int>(1), expected = 0;
    std::vector<std::vector<float>> ms(f.size());
    for (int r = 0; r < 23; r++)
        for (size_t v = 0; v < f.size(); v++) {
            hold_sms(started, &expected, g_sms / 2, 30, s2, s1);
            cudaEventRecord(e0, s1);
            f[v](s1);
            cudaEventRecord(e1, s1);
            gpu_ok(cudaDeviceSynchronize(), "busy timed call");
            float t = 0;
            cudaEventElapsedTime(&t, e0, e1);
            if (r >= 3) ms[v].push_back(t);
        }
    for (size_t v = 0; v < f.size(); v++) {
        std::sort(ms[v].begin(), ms[v].end());
        out[v] = (ms[v][9] + ms[v][10]) / 2.0;
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaFree(started);
    gpu_ok(cudaStreamDestroy(s1), "stream");
    gpu_ok(cudaStreamDestroy(s2), "stream");
}

/* One call of a, captured into a CUDA graph on s and instantiated (its tile counter captured
 * with it: each replay must leave it at zero). A refused call is a failed check; a CUDA
 * error ends the test (gpu_ok). */
static cudaGraphExec_t capture_call(const dt_cu_gemm_args *a, cudaStream_t s) {
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    gpu_ok(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed), "capture");
    dt_status st = dt_cu_gemm_wgmma(a, s);
    gpu_ok(cudaStreamEndCapture(s, &graph), "end capture");
    CHECK_OK(st);
    gpu_ok(cudaGraphInstantiate(&exec, graph, 0), "graph instantiate");
    cudaGraphDestroy(graph);
    return exec;
}

static void test_kind(const kind &k, int timed) {
    const int M = k.M, N = k.N, K = k.K;
    uint32_t draw = 0;
    vf ha = rnd_bf16(0x47454d4du, (uint32_t)(M + N + K + k.epi), &draw, (size_t)M * K, 1.0f);
    vf hb = rnd_bf16(0x47454d4du, (uint32_t)(M + N + K + k.epi), &draw, (size_t)K * N, 1.0f);
    vf hbias = rnd_bf16(0x47454d4du, (uint32_t)(M + N + K + k.epi), &draw, (size_t)N, 1.0f);
    vf hpre = rnd_bf16(0x47454d4du, (uint32_t)(M + N + K + k.epi), &draw, (size_t)M * N, 3.0f);
    bf16 *A = up16(ha), *B = up16(hb), *bias = k.bias ? up16(hbias) : NULL;
    bf16 *Cw = dev<bf16>((size_t)M * N), *Cc = dev<bf16>((size_t)M * N);
    bf16 *auxw = k.epi == DT_CU_EPI_DGELU ? up16(hpre) : dev<bf16>((size_t)M * N);
    bf16 *auxc = k.epi == DT_CU_EPI_DGELU ? auxw : dev<bf16>((size_t)M * N);
    const size_t cb = (size_t)M * N * sizeof(bf16);
    /* B is (K, N) row-major for NN and (N, K) for NT: the same random values either way */
    dt_cu_gemm_args aw = {0, k.tb, M, N, K, A, K, 0, B, k.tb ? K : N, 0, Cw, N, 0, 0, 1.0f, 0.0f, 1, bias, k.epi,
                          auxw, NULL, NULL};
    dt_cu_gemm_args ac = aw;
    ac.C = Cc;
    ac.aux = auxc;
    int gelu = k.epi == DT_CU_EPI_GELU;
    /* the column sums (+= into csum, zeroed before each call): room for any schedule's partials */
    const size_t pf = (size_t)(M / 16) * N, sb = (size_t)N * sizeof(float);
    float *csw = k.csum ? dev<float>(N) : NULL, *csc = k.csum ? dev<float>(N) : NULL;
    float *pw = k.csum ? dev<float>(pf) : NULL, *pc = k.csum ? dev<float>(pf) : NULL;
    aw.csum = csw;
    aw.csum_part = pw;
    auto csum0 = [&](float *p) { if (p) gpu_ok(cudaMemset(p, 0, sb), "csum zero"); };
    auto csum_bytes = [&](float *p) { return p ? bytes_of(p, sb) : std::vector<unsigned char>(); };
    auto csum_vals = [&](float *p) {
        std::vector<float> h((size_t)N);
        gpu_ok(cudaMemcpy(h.data(), p, sb, cudaMemcpyDeviceToHost), "csum down");
        return h;
    };

    /* 1. accuracy */
    gpu_ok(cudaMemset(Cw, 0xff, cb), "poison");
    gpu_ok(cudaMemset(Cc, 0xff, cb), "poison");
    if (gelu) {
        gpu_ok(cudaMemset(auxw, 0xff, cb), "poison");
        gpu_ok(cudaMemset(auxc, 0xff, cb), "poison");
    }
    csum0(csw);
    CHECK_OK(dt_cu_gemm_wgmma(&aw, 0));
    gpu_ok(cudaGetLastError(), "dt_cu_gemm_wgmma launch");
    CHECK_OK(dt_cu_gemm(g_blas, &ac, 0));
    vf cw = down16(Cw, (size_t)M * N), cc = down16(Cc, (size_t)M * N);
    std::vector<unsigned char> rule_s = csum_bytes(csw);
    if (k.csum) {
        check_csum(csum_vals(csw), cw, M, N, CSUM_TOL_STORED, k.name);
        /* the default branch's finish (atomics): the same sums within rounding */
        variant("bias_bwd=fast");
        csum0(csw);
        CHECK_OK(dt_cu_gemm_wgmma(&aw, 0));
        variant("bias_bwd=det");
        check_csum(csum_vals(csw), cw, M, N, CSUM_TOL_STORED, "  ... the fast finish");
    }
    CHECK_RELF(cw, cc, 1e-2, "%s %dx%dx%d C vs cuBLASLt", k.name, M, N, K);
    if (gelu) {
        vf xw = down16(auxw, (size_t)M * N), xc = down16(auxc, (size_t)M * N);
        CHECK_RELF(xw, xc, 1e-2, "%s %dx%dx%d aux vs cuBLASLt", k.name, M, N, K);
    }
    /* the other schedules, into the same buffers (checked, then overwritten) */
    std::vector<unsigned char> rule_c = bytes_of(Cw, cb), rule_x = gelu ? bytes_of(auxw, cb) : std::vector<unsigned char>();
    static const int other[4] = {DT_CU_GEMM_OWN_COOP256, DT_CU_GEMM_OWN_COOP128, DT_CU_GEMM_OWN_PINGPONG256,
                                 DT_CU_GEMM_OWN_PINGPONG128};
    static const char *other_name[4] = {"128 x 256 cooperative", "128 x 128 cooperative", "64 x 256 ping-pong",
                                        "128 x 128 ping-pong"};
    for (int o = 0; o < 4; o++) {
        if ((other[o] == DT_CU_GEMM_OWN_COOP256 || other[o] == DT_CU_GEMM_OWN_PINGPONG256) && N % 256) continue;
        dt_cu_gemm_wgmma_force(other[o]);
        gpu_ok(cudaMemset(Cw, 0xff, cb), "poison");
        if (gelu) gpu_ok(cudaMemset(auxw, 0xff, cb), "poison");
        csum0(csw);
        CHECK(dt_cu_gemm_wgmma_csum_floats(M, N, K) <= pf);
        CHECK_OK(dt_cu_gemm_wgmma(&aw, 0));
        gpu_ok(cudaGetLastError(), "dt_cu_gemm_wgmma launch (another schedule)");
        CHECK_RELF(down16(Cw, (size_t)M * N), cc, 1e-2, "%s %dx%dx%d C vs cuBLASLt, %s", k.name, M, N, K,
                   other_name[o]);
        if (k.csum) check_csum(csum_vals(csw), down16(Cw, (size_t)M * N), M, N, CSUM_TOL_STORED, other_name[o]);
        if (gelu)
            CHECK_RELF(down16(auxw, (size_t)M * N), down16(auxc, (size_t)M * N), 1e-2,
                       "%s %dx%dx%d aux vs cuBLASLt, %s", k.name, M, N, K, other_name[o]);
        fprintf(stderr, "  %s %dx%dx%d: %s C bytes %s the rule's\n", k.name, M, N, K, other_name[o],
                bytes_of(Cw, cb) == rule_c ? "equal" : "differ from");
        dt_cu_gemm_wgmma_force(DT_CU_GEMM_OWN_RULE);
    }
    /* the rule with its tiles in the static order: the same bytes as claimed tiles */
    gpu_ok(cudaMemset(Cw, 0xff, cb), "poison");
    if (gelu) gpu_ok(cudaMemset(auxw, 0xff, cb), "poison");
    csum0(csw);
    dt_cu_gemm_wgmma_static(1);
    CHECK_OK(dt_cu_gemm_wgmma(&aw, 0));
    dt_cu_gemm_wgmma_static(0);
    gpu_ok(cudaGetLastError(), "dt_cu_gemm_wgmma launch (static order)");
    CHECKF(bytes_of(Cw, cb) == rule_c, "%s %dx%dx%d: C in the static order differs from claimed tiles", k.name, M, N, K);
    if (k.csum)
        CHECKF(csum_bytes(csw) == rule_s, "%s %dx%dx%d: column sums in the static order differ from claimed tiles",
               k.name, M, N, K);
    if (gelu)
        CHECKF(bytes_of(auxw, cb) == rule_x, "%s %dx%dx%d: aux in the static order differs from claimed tiles", k.name,
               M, N, K);
    csum0(csw);
    CHECK_OK(dt_cu_gemm_wgmma(&aw, 0)); /* the rule's bytes back for the replays */
    if ((size_t)M * N * K <= (size_t)1 << 24) { /* fp64 on the CPU */
        vf ref((size_t)M * N), refx((size_t)M * N);
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                double s = 0;
                for (int q = 0; q < K; q++)
                    s += (double)ha[(size_t)i * K + q] * (k.tb ? hb[(size_t)j * K + q] : hb[(size_t)q * N + j]);
                if (k.bias && k.epi != DT_CU_EPI_DGELU) s += hbias[j];
                refx[(size_t)i * N + j] = (float)s;
                if (gelu) s = gelu_d(s);
                if (k.epi == DT_CU_EPI_DGELU) s *= gelu_grad_d(hpre[(size_t)i * N + j]);
                ref[(size_t)i * N + j] = (float)s;
            }
        CHECK_RELF(cw, ref, 1e-2, "%s %dx%dx%d C vs fp64", k.name, M, N, K);
        if (k.csum) check_csum(csum_vals(csw), ref, M, N, CSUM_TOL_FP64, "  ... column sums vs fp64");
        if (gelu) CHECK_RELF(down16(auxw, (size_t)M * N), refx, 1e-2, "%s %dx%dx%d aux vs fp64", k.name, M, N, K);
    }

    /* 2. determinism under a concurrent GEMM on another stream */
    std::vector<unsigned char> c0 = bytes_of(Cw, cb), x0 = gelu ? bytes_of(auxw, cb) : std::vector<unsigned char>();
    const int S = 4096;
    bf16 *sa = dev<bf16>((size_t)S * S), *sbm = dev<bf16>((size_t)S * S), *sc = dev<bf16>((size_t)S * S);
    dt_cu_gemm_args side = {0, 0, S, S, S, sa, S, 0, sbm, S, 0, sc, S, 0, 0, 1.0f, 0.0f, 1, NULL, DT_CU_EPI_DEFAULT,
                            NULL, NULL, NULL};
    cudaStream_t s1, s2;
    gpu_ok(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking), "stream");
    gpu_ok(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking), "stream");
    dt_cu_blas *side_blas = NULL;
    CHECK_OK(dt_cu_blas_create(&side_blas));
    static const int poison[3] = {0x5a, 0xa5, 0x00};
    for (int r = 0; r < 3 && side_blas; r++) {
        gpu_ok(cudaMemset(Cw, poison[r], cb), "poison");
        if (gelu) gpu_ok(cudaMemset(auxw, poison[r], cb), "poison");
        csum0(csw);
        gpu_ok(cudaDeviceSynchronize(), "poison");
        CHECK_OK(dt_cu_gemm(side_blas, &side, s2));
        CHECK_OK(dt_cu_gemm_wgmma(&aw, s1));
        gpu_ok(cudaGetLastError(), "replay launch");
        CHECKF(bytes_of(Cw, cb) == c0, "%s replay %d: C differs from the first call", k.name, r + 1);
        if (k.csum) CHECKF(csum_bytes(csw) == rule_s, "%s replay %d: column sums differ", k.name, r + 1);
        if (gelu) CHECKF(bytes_of(auxw, cb) == x0, "%s replay %d: aux differs from the first call", k.name, r + 1);
    }
    dt_cu_blas_free(side_blas);
    cudaFree(sa);
    cudaFree(sbm);
    cudaFree(sc);
    /* ... while another stream's kernel holds half the SMs, then all but 8, for 30 us */
    int *started = dev<int>(1), expected = 0;
    gpu_ok(cudaFuncSetAttribute(occupy, cudaFuncAttributeMaxDynamicSharedMemorySize, OCCUPY_SMEM), "occupy smem");
    static const int poison2[3] = {0x3c, 0xc3, 0x7f};
    for (int r = 0; r < 3; r++) {
        gpu_ok(cudaMemset(Cw, poison2[r], cb), "poison");
        if (gelu) gpu_ok(cudaMemset(auxw, poison2[r], cb), "poison");
        csum0(csw);
        gpu_ok(cudaDeviceSynchronize(), "poison");
        hold_sms(started, &expected, r == 2 ? g_sms - 8 : g_sms / 2, 30, s2, s1);
        CHECK_OK(dt_cu_gemm_wgmma(&aw, s1));
        gpu_ok(cudaGetLastError(), "replay launch (SMs held)");
        CHECKF(bytes_of(Cw, cb) == c0, "%s replay %d with %d SMs held: C differs from the first call", k.name, r + 1,
               r == 2 ? g_sms - 8 : g_sms / 2);
        if (k.csum) CHECKF(csum_bytes(csw) == rule_s, "%s replay %d with SMs held: column sums differ", k.name, r + 1);
        if (gelu) CHECKF(bytes_of(auxw, cb) == x0, "%s replay %d with SMs held: aux differs", k.name, r + 1);
    }
    cudaFree(started);
    /* ... replayed from a CUDA graph (the launch's counter is captured with it) */
    cudaGraphExec_t exec = capture_call(&aw, s1);
    for (int r = 0; r < 3; r++) {
        gpu_ok(cudaMemset(Cw, poison[r], cb), "poison");
        if (gelu) gpu_ok(cudaMemset(auxw, poison[r], cb), "poison");
        csum0(csw);
        gpu_ok(cudaDeviceSynchronize(), "poison");
        gpu_ok(cudaGraphLaunch(exec, s1), "graph launch");
        CHECKF(bytes_of(Cw, cb) == c0, "%s graph replay %d: C differs from the first call", k.name, r + 1);
        if (k.csum) CHECKF(csum_bytes(csw) == rule_s, "%s graph replay %d: column sums differ", k.name, r + 1);
        if (gelu) CHECKF(bytes_of(auxw, cb) == x0, "%s graph replay %d: aux differs", k.name, r + 1);
    }
    cudaGraphExecDestroy(exec);
    /* ... two calls at once on two streams, into two outputs (aux: its own for GELU, the
     * shared input for dGELU) */
    gpu_ok(cudaMemset(Cw, 0x5a, cb), "poison");
    gpu_ok(cudaMemset(Cc, 0xa5, cb), "poison");
    gpu_ok(cudaDeviceSynchronize(), "poison");
    dt_cu_gemm_args a2 = aw;
    a2.C = Cc;
    a2.aux = auxc;
    a2.csum = csc;
    a2.csum_part = pc;
    csum0(csw);
    csum0(csc);
    gpu_ok(cudaDeviceSynchronize(), "csum zero");
    CHECK_OK(dt_cu_gemm_wgmma(&aw, s1));
    CHECK_OK(dt_cu_gemm_wgmma(&a2, s2));
    gpu_ok(cudaGetLastError(), "two streams");
    CHECKF(bytes_of(Cw, cb) == c0 && bytes_of(Cc, cb) == c0, "%s: two calls at once: C differs", k.name);
    if (k.csum)
        CHECKF(csum_bytes(csw) == rule_s && csum_bytes(csc) == rule_s, "%s: two calls at once: column sums differ",
               k.name);
    if (gelu) CHECKF(bytes_of(auxw, cb) == x0 && bytes_of(auxc, cb) == x0, "%s: two calls at once: aux differs", k.name);
    gpu_ok(cudaStreamDestroy(s1), "stream");
    gpu_ok(cudaStreamDestroy(s2), "stream");

    /* 3. timing */
    if (timed) {
        timing tm = {k.name, M, N, K, k.per_step, {0}, {0}};
        static const int sch[T_STATIC] = {0, DT_CU_GEMM_OWN_COOP128, DT_CU_GEMM_OWN_PINGPONG256,
                                          DT_CU_GEMM_OWN_PINGPONG128};
        std::vector<std::function<void()>> f(T_COUNT);
        for (int v = 0; v < T_STATIC; v++) {
            /* coop: the rule before the ping-pong, 128 x 256 where N allows, else 128 x 128 */
            const int forced = v == T_COOP ? (N % 256 ? DT_CU_GEMM_OWN_COOP128 : DT_CU_GEMM_OWN_COOP256) : sch[v];
            if (forced == DT_CU_GEMM_OWN_PINGPONG256 && N % 256) continue;
            f[v] = [&aw, forced] {
                dt_cu_gemm_wgmma_force(forced);
                dt_cu_gemm_wgmma(&aw, 0);
            };
        }
        f[T_STATIC] = [&aw] {
            dt_cu_gemm_wgmma_force(DT_CU_GEMM_OWN_RULE);
            dt_cu_gemm_wgmma_static(1);
            dt_cu_gemm_wgmma(&aw, 0);
            dt_cu_gemm_wgmma_static(0);
        };
        /* with csum, cuBLASLt's GEMM is followed by the column sum the model would run instead */
        float *cs_cub = csc, *part_cub = pc;
        f[T_CUBLAS] = [&ac, &k, cs_cub, part_cub, M, N] {
            dt_cu_gemm(g_blas, &ac, 0);
            if (k.csum) dt_cu_colsum(cs_cub, part_cub, (const bf16 *)ac.C, M, N, 0, 0);
        };
        median_alt(f, tm.ms);
        dt_cu_gemm_wgmma_force(DT_CU_GEMM_OWN_RULE);
        std::vector<std::function<void(cudaStream_t)>> fb(B_COUNT);
        fb[B_DYN] = [&aw](cudaStream_t st) { dt_cu_gemm_wgmma(&aw, st); };
        fb[B_STATIC] = [&aw](cudaStream_t st) {
            dt_cu_gemm_wgmma_static(1);
            dt_cu_gemm_wgmma(&aw, st);
            dt_cu_gemm_wgmma_static(0);
        };
        fb[B_CUBLAS] = [&ac, &k, cs_cub, part_cub, M, N](cudaStream_t st) {
            dt_cu_gemm(g_blas, &ac, st);
            if (k.csum) dt_cu_colsum(cs_cub, part_cub, (const bf16 *)ac.C, M, N, st, st);
        };
        median_busy(fb, tm.busy);
        gpu_ok(cudaGetLastError(), "timed launches");
        g_times.push_back(tm);
    }
    cudaFree(A);
    cudaFree(B);
    cudaFree(bias);
    cudaFree(Cw);
    cudaFree(Cc);
    cudaFree(auxw);
    if (auxc != auxw) cudaFree(auxc);
    cudaFree(csw);
    cudaFree(csc);
    cudaFree(pw);
    cudaFree(pc);
}

static const kind kinds[] = {
    {"qkv fwd NT+bias", 1, DT_CU_EPI_DEFAULT, 1, 16384, 2304, 768, 12},
    {"attproj fwd NT+bias", 1, DT_CU_EPI_DEFAULT, 1, 16384, 768, 768, 12},
    {"fc fwd NT+bias+GELU", 1, DT_CU_EPI_GELU, 1, 16384, 3072, 768, 12},
    {"fcproj fwd NT+bias", 1, DT_CU_EPI_DEFAULT, 1, 16384, 768, 3072, 12},
    {"fcproj dx NN+dGELU", 0, DT_CU_EPI_DGELU, 0, 16384, 3072, 768, 0},
    /* the model's call: with the fc bias gradient (cuBLASLt timed with dt_cu_colsum after it) */
    {"fcproj dx +dGELU+colsum", 0, DT_CU_EPI_DGELU, 0, 16384, 3072, 768, 12, 1},
    {"fc dx NN", 0, DT_CU_EPI_DEFAULT, 0, 16384, 768, 3072, 12},
    {"attproj dx NN", 0, DT_CU_EPI_DEFAULT, 0, 16384, 768, 768, 12},
    {"qkv dx NN", 0, DT_CU_EPI_DEFAULT, 0, 16384, 768, 2304, 12},
    /* not the model's, timed to take the fc forward apart: its products with a one-output
     * epilogue, and its two outputs with next to no products (K 64) */
    {"fc fwd, no GELU", 1, DT_CU_EPI_DEFAULT, 1, 16384, 3072, 768, 0},
    {"fc fwd, K 64", 1, DT_CU_EPI_GELU, 1, 16384, 3072, 64, 0},
};

static void test_small(void) { /* each layout and epilogue against fp64 */
    static const kind s[] = {
        {"small NT", 1, DT_CU_EPI_DEFAULT, 0, 256, 256, 192, 0},
        {"small NT+bias", 1, DT_CU_EPI_DEFAULT, 1, 256, 256, 192, 0},
        {"small NT+bias+GELU", 1, DT_CU_EPI_GELU, 1, 256, 256, 192, 0},
        {"small NN", 0, DT_CU_EPI_DEFAULT, 0, 256, 384, 64, 0},
        {"small NT+bias+GELU N384", 1, DT_CU_EPI_GELU, 1, 256, 384, 128, 0},
        {"small NN+dGELU N128", 0, DT_CU_EPI_DGELU, 0, 128, 128, 320, 0},
        {"small NN+dGELU N512", 0, DT_CU_EPI_DGELU, 0, 384, 512, 64, 0},
        {"small NN+dGELU", 0, DT_CU_EPI_DGELU, 0, 256, 256, 192, 0},
        {"small NN+dGELU+colsum N128", 0, DT_CU_EPI_DGELU, 0, 128, 128, 320, 0, 1},
        {"small NN+dGELU+colsum N512", 0, DT_CU_EPI_DGELU, 0, 384, 512, 64, 0, 1},
        {"small NT+dGELU+colsum", 1, DT_CU_EPI_DGELU, 0, 256, 256, 192, 0, 1},
        {"small NT+bias 3 tiles", 1, DT_CU_EPI_DEFAULT, 1, 384, 128, 128, 0},
        {"small NT+bias+GELU 1 tile", 1, DT_CU_EPI_GELU, 1, 128, 128, 192, 0},
    };
    for (size_t i = 0; i < sizeof s / sizeof s[0]; i++) test_kind(s[i], 0);
}

/* DOT: B sequences of T rows, NH heads (N = 64 NH), K; timed when timed. */
static void dot_case(int Bn, int T, int NH, int K, int timed) {
    const int M = Bn * T, N = 64 * NH;
    const size_t cb = (size_t)M * N * sizeof(bf16), nld = (size_t)2 * M * NH, lb = nld * sizeof(float);
    uint32_t draw = 0;
    vf ha = rnd_bf16(0x444f54u, (uint32_t)(M + N + K), &draw, (size_t)M * K, 1.0f);
    vf hb = rnd_bf16(0x444f54u, (uint32_t)(M + N + K), &draw, (size_t)K * N, 1.0f);
    vf ho = rnd_bf16(0x444f54u, (uint32_t)(M + N + K), &draw, (size_t)M * N, 1.0f);
    vf hl = rnd_bf16(0x444f54u, (uint32_t)(M + N + K), &draw, (size_t)Bn * NH * T, 4.0f); /* lse values */
    bf16 *A = up16(ha), *Bm = up16(hb), *O = up16(ho), *Cd = dev<bf16>((size_t)M * N), *Cr = dev<bf16>((size_t)M * N);
    float *lse = up32(hl), *ld = dev<float>(nld), *ldr = dev<float>(nld);
    dt_cu_gemm_args def = {0, 0, M, N, K, A, K, 0, Bm, N, 0, Cr, N, 0, 0, 1.0f, 0.0f, 1, NULL, DT_CU_EPI_DEFAULT,
                           NULL, NULL, NULL};
    dt_cu_gemm_args dot = def;
    dot.C = Cd;
    dot.epi = DT_CU_EPI_DOT;
    dot.aux = O;
    dot.dot_ld = ld;
    dot.dot_lse = lse;
    dot.dot_T = T;
    char nm[64];
    snprintf(nm, sizeof nm, "DOT B%d T%d NH%d K%d", Bn, T, NH, K);
    /* the reference pair: DEFAULT's C, then the D kernel on it (its own order) */
    auto ref = [&] {
        gpu_ok(cudaMemset(Cr, 0xff, cb), "poison");
        gpu_ok(cudaMemset(ldr, 0xff, lb), "poison");
        CHECK_OK(dt_cu_gemm_wgmma(&def, 0));
        dt_cu_flash_bwd_prep(ldr, Cr, O, lse, Bn, T, NH, 0, 0);
        gpu_ok(cudaGetLastError(), "reference launches");
    };
    auto run = [&](cudaStream_t st) {
        gpu_ok(cudaMemset(Cd, 0xff, cb), "poison");
        gpu_ok(cudaMemset(ld, 0xff, lb), "poison");
        gpu_ok(cudaDeviceSynchronize(), "poison");
        CHECK_OK(dt_cu_gemm_wgmma(&dot, st));
        gpu_ok(cudaGetLastError(), "DOT launch");
        gpu_ok(cudaDeviceSynchronize(), "DOT");
    };
    static const int sch[5] = {DT_CU_GEMM_OWN_RULE, DT_CU_GEMM_OWN_COOP256, DT_CU_GEMM_OWN_COOP128,
                               DT_CU_GEMM_OWN_PINGPONG256, DT_CU_GEMM_OWN_PINGPONG128};
    /* LD as the epilogue makes it, emulated on the CPU from the stored C (fmaf: one rounding) */
    auto emulate = [&](const vf &c) {
        vf e(nld);
        for (int b = 0; b < Bn; b++)
            for (int h = 0; h < NH; h++)
                for (int t = 0; t < T; t++) {
                    const size_t r = (size_t)b * T + t, at = dt_flash_ld_at(b * NH + h, t, T);
                    float S[4];
                    for (int q = 0; q < 4; q++) {
                        S[q] = 0.0f;
                        for (int j = 0; j < 8; j++)
                            for (int k = 0; k < 2; k++) {
                                const size_t x = r * N + 64 * h + 8 * j + 2 * q + k;
                                S[q] = fmaf(c[x], ho[x], S[q]);
                            }
                    }
                    e[at + 2] = (S[0] + S[1]) + (S[2] + S[3]);
                    e[at] = hl[((size_t)b * NH + h) * T + t] * 1.4426950408889634f;
                }
        return e;
    };
    std::vector<unsigned char> c0, l0;
    for (int o = 0; o < 5; o++) {
        if ((sch[o] == DT_CU_GEMM_OWN_COOP256 || sch[o] == DT_CU_GEMM_OWN_PINGPONG256) && N % 256) continue;
        dt_cu_gemm_wgmma_force(sch[o]);
        ref();
        run(0);
        std::vector<unsigned char> c = bytes_of(Cd, cb), l = bytes_of(ld, lb);
        CHECKF(c == bytes_of(Cr, cb), "%s schedule %d: C differs from the DEFAULT epilogue's", nm, sch[o]);
        const vf e = emulate(down16(Cd, (size_t)M * N));
        CHECKF(!memcmp(l.data(), e.data(), lb), "%s schedule %d: LD differs from the CPU emulation of its order", nm,
               sch[o]);
        CHECK_RELF(down32(ld, nld), down32(ldr, nld), 1e-5, "%s schedule %d: LD vs the D kernel's", nm, sch[o]);
        if (o == 0) {
            c0 = c;
            l0 = l;
        }
    }
    dt_cu_gemm_wgmma_force(DT_CU_GEMM_OWN_RULE);
    /* D against fp64 (dO as stored), lse log2(e) exactly (the emulation's float product) */
    {
        ref();
        run(0);
        vf c = down16(Cd, (size_t)M * N), got = down32(ld, nld);
        double worst = 0;
        int lse_bad = 0;
        for (int b = 0; b < Bn; b++)
            for (int h = 0; h < NH; h++)
                for (int t = 0; t < T; t++) {
                    const size_t r = (size_t)b * T + t, at = dt_flash_ld_at(b * NH + h, t, T);
                    double sd = 0, sa = 0;
                    for (int j = 0; j < 64; j++) {
                        const double p = (double)c[r * N + 64 * h + j] * ho[r * N + 64 * h + j];
                        sd += p;
                        sa += fabs(p);
                    }
                    const double e = fabs(got[at + 2] - sd) / (sa > 0 ? sa : 1.0);
                    worst = e > worst || e != e ? e : worst;
                    const float l2 = hl[((size_t)b * NH + h) * T + t] * 1.4426950408889634f;
                    lse_bad += memcmp(&l2, &got[at], sizeof l2) != 0;
                }
        CHECKF(worst <= 1e-5, "%s: D off by %.3g of sum |dO O| (tol 1e-5)", nm, worst);
        CHECKF(lse_bad == 0, "%s: %d lse log2(e) values differ from the float product", nm, lse_bad);
        fprintf(stderr, "  %-30s D vs fp64 %.3g of sum |dO O|\n", nm, worst);
    }
    /* the static order, SMs held, graph replays: the first call's bytes */
    dt_cu_gemm_wgmma_static(1);
    run(0);
    dt_cu_gemm_wgmma_static(0);
    CHECKF(bytes_of(Cd, cb) == c0 && bytes_of(ld, lb) == l0, "%s: the static order changes C or LD", nm);
    cudaStream_t s1, s2;
    gpu_ok(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking), "stream");
    gpu_ok(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking), "stream");
    int *started = dev<int>(1), expected = 0;
    gpu_ok(cudaFuncSetAttribute(occupy, cudaFuncAttributeMaxDynamicSharedMemorySize, OCCUPY_SMEM), "occupy smem");
    for (int r = 0; r < 2; r++) {
        gpu_ok(cudaMemset(Cd, 0x5a, cb), "poison");
        gpu_ok(cudaMemset(ld, 0xa5, lb), "poison");
        gpu_ok(cudaDeviceSynchronize(), "poison");
        hold_sms(started, &expected, r ? g_sms - 8 : g_sms / 2, 30, s2, s1);
        CHECK_OK(dt_cu_gemm_wgmma(&dot, s1));
        gpu_ok(cudaDeviceSynchronize(), "DOT with SMs held");
        CHECKF(bytes_of(Cd, cb) == c0 && bytes_of(ld, lb) == l0, "%s: SMs held (round %d) change C or LD", nm, r + 1);
    }
    cudaFree(started);
    cudaGraphExec_t exec = capture_call(&dot, s1);
    for (int r = 0; r < 2; r++) {
        gpu_ok(cudaMemset(ld, r ? 0x00 : 0x3c, lb), "poison");
        gpu_ok(cudaDeviceSynchronize(), "poison");
        gpu_ok(cudaGraphLaunch(exec, s1), "graph launch");
        gpu_ok(cudaDeviceSynchronize(), "graph");
        CHECKF(bytes_of(Cd, cb) == c0 && bytes_of(ld, lb) == l0, "%s: graph replay %d changes C or LD", nm, r + 1);
    }
    cudaGraphExecDestroy(exec);
    gpu_ok(cudaStreamDestroy(s1), "stream");
    gpu_ok(cudaStreamDestroy(s2), "stream");
    /* negative control: one O element changed (its row's D of its head changes) */
    {
        vf o2 = ho;
        const size_t at = (size_t)(M / 2 + 3) * N + 64 * (NH - 1) + 5;
        o2[at] = o2[at] == 0.5f ? -0.5f : 0.5f;
        bf16 *O2 = up16(o2);
        dt_cu_gemm_args d2 = dot;
        d2.aux = O2;
        gpu_ok(cudaMemset(ld, 0xff, lb), "poison");
        CHECK_OK(dt_cu_gemm_wgmma(&d2, 0));
        gpu_ok(cudaDeviceSynchronize(), "DOT (changed O)");
        CHECKF(bytes_of(ld, lb) != l0, "%s: a changed O element left LD's bytes unchanged", nm);
        cudaFree(O2);
    }
    if (timed) {
        double ms[3];
        std::vector<std::function<void()>> f(3);
        f[0] = [&] { dt_cu_gemm_wgmma(&def, 0); };
        f[1] = [&] { dt_cu_gemm_wgmma(&dot, 0); };
        dt_cu_gemm_args cub = def;
        f[2] = [&, cub] {
            dt_cu_gemm(g_blas, &cub, 0);
            dt_cu_flash_bwd_prep(ldr, Cr, O, lse, Bn, T, NH, 0, 0);
        };
        median_alt(f, ms);
        gpu_ok(cudaGetLastError(), "timed launches");
        printf("%s: ms a call (median of 20): ours DEFAULT %.4f, ours DOT %.4f, cuBLASLt + D kernel %.4f; D kernel "
               "alone ",
               nm, ms[0], ms[1], ms[2]);
        std::vector<std::function<void()>> g(1);
        g[0] = [&] { dt_cu_flash_bwd_prep(ldr, Cr, O, lse, Bn, T, NH, 0, 0); };
        median_alt(g, ms);
        printf("%.4f\n", ms[0]);
    }
    cudaFree(A);
    cudaFree(Bm);
    cudaFree(O);
    cudaFree(Cd);
    cudaFree(Cr);
    cudaFree(lse);
    cudaFree(ld);
    cudaFree(ldr);
}

static void test_dot(void) {
    dot_case(2, 128, 2, 192, 0);  /* 2 tiles of 128 x 128: one a consumer warpgroup */
    dot_case(3, 128, 4, 64, 0);   /* 3 x 2 tiles, N 256 (the 256-wide schedules too) */
    dot_case(16, 1024, 12, 768, 1); /* the model's attproj input gradient */
}

static void test_model_shapes(void) {
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) test_kind(kinds[i], 1);
}

static void test_refuses(void) { /* a shape off the tiles: refused, nothing launched */
    bf16 *A = dev<bf16>(200 * 64), *B = dev<bf16>(64 * 128), *C = dev<bf16>(200 * 128);
    gpu_ok(cudaMemset(C, 0x11, 200 * 128 * sizeof(bf16)), "fill");
    dt_cu_gemm_args a = {0, 0, 200, 128, 64, A, 64, 0, B, 128, 0, C, 128, 0, 0, 1.0f, 0.0f, 1, NULL,
                         DT_CU_EPI_DEFAULT, NULL, NULL, NULL};
    CHECK(dt_cu_gemm_wgmma(&a, 0) == DT_EINVAL);
    CHECK(strstr(dt_errmsg(), "200x128x64") != NULL);
    std::vector<unsigned char> c = bytes_of(C, 200 * 128 * sizeof(bf16));
    int untouched = 1;
    for (size_t i = 0; i < c.size(); i++) untouched &= c[i] == 0x11;
    CHECK(untouched);
    /* a column sum asked of an epilogue other than dGELU, or without its partials: refused */
    float *cs = dev<float>(128), *part = dev<float>(128 * 8);
    dt_cu_gemm_args b = {0, 0, 128, 128, 64, A, 64, 0, B, 128, 0, C, 128, 0, 0, 1.0f, 0.0f, 1, NULL,
                         DT_CU_EPI_DEFAULT, NULL, NULL, NULL, cs, part};
    CHECK(dt_cu_gemm_wgmma(&b, 0) == DT_EINVAL && strstr(dt_errmsg(), "dGELU") != NULL);
    b.epi = DT_CU_EPI_DGELU;
    b.aux = C;
    b.csum_part = NULL;
    CHECK(dt_cu_gemm_wgmma(&b, 0) == DT_EINVAL && strstr(dt_errmsg(), "csum_part NULL") != NULL);
    /* DOT without its LD arguments, or with an odd T: refused; on cuBLASLt: unsupported */
    dt_cu_gemm_args d = {0, 0, 128, 128, 64, A, 64, 0, B, 128, 0, C, 128, 0, 0, 1.0f, 0.0f, 1, NULL, DT_CU_EPI_DOT,
                         C, NULL, NULL};
    CHECK(dt_cu_gemm_wgmma(&d, 0) == DT_EINVAL && strstr(dt_errmsg(), "dot_ld NULL") != NULL);
    d.dot_ld = cs;
    d.dot_lse = cs;
    d.dot_T = 63;
    CHECK(dt_cu_gemm_wgmma(&d, 0) == DT_EINVAL && strstr(dt_errmsg(), "dot_T 63") != NULL);
    d.dot_T = 64;
    CHECK(dt_cu_gemm(g_blas, &d, 0) == DT_EUNSUPPORTED);
    d.epi = DT_CU_EPI_DEFAULT;
    d.aux = NULL;
    CHECK(dt_cu_gemm_wgmma(&d, 0) == DT_EINVAL && strstr(dt_errmsg(), "take no dot_ld") != NULL);
    c = bytes_of(C, 200 * 128 * sizeof(bf16));
    untouched = 1;
    for (size_t i = 0; i < c.size(); i++) untouched &= c[i] == 0x11;
    CHECK(untouched);
    cudaFree(cs);
    cudaFree(part);
    cudaFree(A);
    cudaFree(B);
    cudaFree(C);
}

int main(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
        fprintf(stderr, "test_gpu_gemm_wgmma: no CUDA device\n");
        return 1;
    }
    cudaDeviceProp prop;
    gpu_ok(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    fprintf(stderr, "test_gpu_gemm_wgmma: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
    g_sms = prop.multiProcessorCount;
    if (prop.major != 9 || prop.minor != 0) {
        fprintf(stderr, "test_gpu_gemm_wgmma: the wgmma kernels are built for sm_90a only; this GPU cannot run them\n");
        return 1;
    }
    variant("gemm=det");
    variant("bias_bwd=det"); /* the column sums' finish: the fixed order (byte checks) */
    if (dt_cu_blas_create(&g_blas) != DT_OK) {
        fprintf(stderr, "test_gpu_gemm_wgmma: %s\n", dt_errmsg());
        return 1;
    }
    RUN(test_refuses);
    RUN(test_small);
    RUN(test_dot);
    RUN(test_model_shapes);
    cudaError_t e = cudaDeviceSynchronize();
    CHECKF(e == cudaSuccess, "CUDA error at the end: %s", cudaGetErrorString(e));
    printf("%-22s %-16s", "GEMM", "M x N x K");
    for (int v = 0; v < T_COUNT; v++) printf(" %9s", t_name[v]);
    printf(" %8s %9s %8s %8s %5s %12s", "pp128 TF", "cublas TF", "pp/cubl", "pp/coop", "rule", "rule dlt ms");
    for (int v = 0; v < B_COUNT; v++) printf(" %9s", b_name[v]);
    printf("\n");
    double tot = 0;
    for (size_t i = 0; i < g_times.size(); i++) {
        const timing &t = g_times[i];
        double fl = 2.0 * t.M * t.N * (double)t.K;
        char sh[40];
        snprintf(sh, sizeof sh, "%dx%dx%d", t.M, t.N, t.K);
        const int rule = dt_gt_schedule(t.N, t.K, DT_GT_RULE) == DT_GT_PP128 ? T_PP128 : T_COOP;
        double dlt = (t.ms[rule] - t.ms[T_CUBLAS]) * t.per_step;
        tot += dlt;
        printf("%-22s %-16s", t.name, sh);
        for (int v = 0; v < T_COUNT; v++) printf(" %9.4f", t.ms[v]);
        printf(" %8.1f %9.1f %8.3f %8.3f %5s %12.3f", fl / (t.ms[T_PP128] * 1e9), fl / (t.ms[T_CUBLAS] * 1e9),
               t.ms[T_PP128] / t.ms[T_CUBLAS], t.ms[T_PP128] / t.ms[T_COOP], rule == T_PP128 ? "pp128" : "coop",
               dlt);
        for (int v = 0; v < B_COUNT; v++) printf(" %9.4f", t.busy[v]);
        printf("\n");
    }
    printf("per step, all of the above on ours (the rule) instead of cuBLASLt: %+.3f ms\n", tot);
    dt_cu_blas_free(g_blas);
    return dt_test_report();
}
