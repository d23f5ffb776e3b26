/* Helpers shared by the GPU tests and benchmarks (tests/gpu/*.cu): device buffers from host vectors and back, bf16-rounded random inputs
 * (the CPU reference reads the same values), the relative-L2 check against a CPU result,
 * and the event-timed median of a call. Header-only: each test binary
 * includes it once. A CUDA error here ends the test with exit status 2. */
#ifndef DT_TESTS_GPU_CHECK_CUH
#define DT_TESTS_GPU_CHECK_CUH

#include "ops/cuda/cuda_common.cuh"

extern "C" {
#include "core/philox.h"
#include "ops/op.h"
#include "dt_test.h"
}

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <algorithm>
#include <vector>

typedef std::vector<float> vf;

static void gpu_ok(cudaError_t e, const char *what) {
    if (e != cudaSuccess) { fprintf(stderr, "gpu test: %s: %s\n", what, cudaGetErrorString(e)); exit(2); }
}
/* n zeroed device elements (at least one, so an empty tensor still has an address). */
template <typename T> static T *dev(size_t n) {
    T *p = NULL;
    gpu_ok(cudaMalloc(&p, sizeof(T) * (n ? n : 1)), "cudaMalloc");
    gpu_ok(cudaMemset(p, 0, sizeof(T) * (n ? n : 1)), "cudaMemset");
    return p;
}
/* Fresh random values in [-scale, scale), rounded to bf16, from the Philox stream
 * (key, purpose); *draw numbers the draws so each call gets new values. */
static vf rnd_bf16(uint64_t key, uint32_t purpose, uint32_t *draw, size_t n, float scale) {
    vf v(n);
    uint32_t d = (*draw)++;
    for (size_t i = 0; i < n; i++)
        v[i] = __bfloat162float(__float2bfloat16((dt_rng_uniform(key, purpose, d, 0, i) * 2.0f - 1.0f) * scale));
    return v;
}
static bf16 *up16(const vf &v) {
    std::vector<bf16> h(v.size());
    for (size_t i = 0; i < v.size(); i++) h[i] = __float2bfloat16(v[i]);
    bf16 *d = dev<bf16>(v.size());
    gpu_ok(cudaMemcpy(d, h.data(), sizeof(bf16) * v.size(), cudaMemcpyHostToDevice), "upload");
    return d;
}
static float *up32(const vf &v) {
    float *d = dev<float>(v.size());
    gpu_ok(cudaMemcpy(d, v.data(), sizeof(float) * v.size(), cudaMemcpyHostToDevice), "upload");
    return d;
}
static int *upi(const std::vector<int> &v) {
    int *d = dev<int>(v.size());
    gpu_ok(cudaMemcpy(d, v.data(), sizeof(int) * v.size(), cudaMemcpyHostToDevice), "upload");
    return d;
}
/* Waits for the device, then copies back (as floats). */
static vf down16(const bf16 *d, size_t n) {
    std::vector<bf16> h(n);
    gpu_ok(cudaDeviceSynchronize(), "sync");
    gpu_ok(cudaMemcpy(h.data(), d, sizeof(bf16) * n, cudaMemcpyDeviceToHost), "download");
    vf v(n);
    for (size_t i = 0; i < n; i++) v[i] = __bfloat162float(h[i]);
    return v;
}
static vf down32(const float *d, size_t n) {
    vf v(n);
    gpu_ok(cudaDeviceSynchronize(), "sync");
    gpu_ok(cudaMemcpy(v.data(), d, sizeof(float) * n, cudaMemcpyDeviceToHost), "download");
    return v;
}
/* The n bytes at device address d, after the device is idle (byte comparisons). */
static std::vector<unsigned char> bytes_of(const void *d, size_t n) {
    std::vector<unsigned char> h(n);
    gpu_ok(cudaDeviceSynchronize(), "sync");
    gpu_ok(cudaMemcpy(h.data(), d, n, cudaMemcpyDeviceToHost), "download");
    return h;
}
/* 1 when device 0 is an sm_90 GPU (the warpgroup-MMA kernels are built for sm_90a alone);
 * else 0, after saying why under the test's name. */
static int gpu_is_sm90(const char *test) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
        fprintf(stderr, "%s: no CUDA device\n", test);
        return 0;
    }
    cudaDeviceProp prop;
    gpu_ok(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    fprintf(stderr, "%s: %s (sm_%d%d)\n", test, prop.name, prop.major, prop.minor);
    if (prop.major != 9 || prop.minor != 0) {
        fprintf(stderr, "%s: the wgmma kernels are built for sm_90a only; this GPU cannot run them\n", test);
        return 0;
    }
    return 1;
}
/* ||a - ref|| / ||ref|| in double; a NaN anywhere never passes. */
static double relerr(const vf &a, const vf &ref) {
    double num = 0, den = 0;
    for (size_t i = 0; i < a.size(); i++) {
        if (a[i] != a[i]) return 1e30;
        double d = (double)a[i] - ref[i];
        num += d * d;
        den += (double)ref[i] * ref[i];
    }
    return sqrt(num / (den > 0 ? den : 1e-300));
}
/* The check (a macro, so a failure names the caller's line), printing every figure. */
#define CHECK_REL(a, ref, tol, what) do { double e_ = relerr(a, ref); const char *w_ = (what); \
    CHECKF(e_ < (tol), "%s: rel err %.3g >= %.3g", w_, e_, (double)(tol)); \
    fprintf(stderr, "  %-44s rel err %.3g (tol %.0e)\n", w_, e_, (double)(tol)); } while (0)
/* The same with a printf-style name. */
#define CHECK_RELF(a, ref, tol, ...) do { char wf_[96]; snprintf(wf_, sizeof wf_, __VA_ARGS__); \
    CHECK_REL(a, ref, tol, wf_); } while (0)
/* Forces a branch ("name=det|fast"); a bad spec ends the test. */
static void variant(const char *spec) {
    if (dt_op_override(spec) != DT_OK) { fprintf(stderr, "override %s: %s\n", spec, dt_errmsg()); exit(2); }
}

/* Median ms of f() on stream 0 (CUDA events) over 20 calls after 3 warm-up calls; reset(),
 * when given, runs before each call outside the timed span. The median of an even count is
 * the mean of the middle two. */
template <typename F> static double gpu_median_ms(F f, void (*reset)(void) = NULL) {
    cudaEvent_t e0, e1;
    gpu_ok(cudaEventCreate(&e0), "cudaEventCreate");
    gpu_ok(cudaEventCreate(&e1), "cudaEventCreate");
    std::vector<float> ms;
    for (int r = 0; r < 23; r++) {
        if (reset) reset();
        cudaEventRecord(e0, 0);
        f();
        cudaEventRecord(e1, 0);
        gpu_ok(cudaEventSynchronize(e1), "timed call");
        float t = 0;
        cudaEventElapsedTime(&t, e0, e1);
        if (r >= 3) ms.push_back(t);
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    std::sort(ms.begin(), ms.end());
    return (ms[9] + ms[10]) / 2.0;
}

/* Side by side: nv variants, each round calling run(v) once for every v (the order rotated
 * each round), CUDA events on stream 0 around each call; warm rounds, then reps timed ones.
 * The median ms of each variant (the upper middle of an even count). */
template <typename F> static std::vector<double> gpu_median_rotated_ms(int nv, F run, int warm, int reps) {
    cudaEvent_t e0, e1;
    gpu_ok(cudaEventCreate(&e0), "cudaEventCreate");
    gpu_ok(cudaEventCreate(&e1), "cudaEventCreate");
    std::vector<std::vector<float> > ms((size_t)nv);
    for (int rep = 0; rep < warm + reps; rep++)
        for (int j = 0; j < nv; j++) {
            const int v = (rep + j) % nv;
            cudaEventRecord(e0, 0);
            run(v);
            cudaEventRecord(e1, 0);
            gpu_ok(cudaEventSynchronize(e1), "timed call");
            float t = 0;
            cudaEventElapsedTime(&t, e0, e1);
            if (rep >= warm) ms[(size_t)v].push_back(t);
        }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    std::vector<double> med((size_t)nv);
    for (int v = 0; v < nv; v++) {
        std::sort(ms[(size_t)v].begin(), ms[(size_t)v].end());
        med[(size_t)v] = ms[(size_t)v][ms[(size_t)v].size() / 2];
    }
    return med;
}

#endif
