/* Memory-bound kernels of the GPT-2 124M step (B 16, T 1024, C 768, L 12, Vp 50304, bf16),
 * checked and timed on the GPU machine (built by `make cuda` into build/gpu-tests/):
 *  1. accuracy against the CPU ops on the same bf16-rounded inputs, by ||gpu - cpu|| /
 *     ||cpu||, with the tolerances of tests/gpu/test_gpu_ops.cu (bf16 outputs 1e-2, fp32
 *     reductions 1e-3..1e-5, fp64 sums 1e-9), in both branches, on the register/shared
 *     paths and the wide fallbacks: layernorm_cuda.cu, reduce_cuda.cu + colsum_cuda.cuh,
 *     gelu_cuda.cu (dt_cu_gelu_bwd_colsum also bit-equal to gelu_bwd + colsum),
 *     dt_cu_layernorm_bwd_colsum (dinp16 bit-equal to layernorm_bwd's, its sum against fp64),
 *     crossentropy_cuda.cu, adamw_cuda.cu;
 *  2. determinism: every det path on the full 124M shapes replayed 3 times with a side
 *     stream of busy kernels competing for the SMs: bytes must match;
 *  3. timing: CUDA events, median of 20 runs after 3 warm-ups, per kernel and branch at
 *     the 124M shapes, ms and GB/s (bytes the kernel must move; beside the cross-entropy,
 *     a plain in-place copy of its logits for reference), then the sum per step
 *     (25 LayerNorms each way, 4 bias gradients and 2 GELUs per layer, ...; the fused
 *     layernorm_bwd + colsum row is printed beside, not summed: it replaces 24 layernorm_bwd
 *     + colsum (768) pairs when hidden dropout is off). The det
 *     partial finishes run on the timed stream (the model overlaps them on a second one);
 *  4. the C = 768 LayerNorm backward's two kernels (dt_cu_layernorm_bwd_force: the full-row
 *     kernel, the rule, and the register kernel), det, with and without the fused column
 *     sum: the same bytes of dinp16, dweight, dbias, the sum and the partials, then timed
 *     side by side (interleaved, median);
 *  5. the C = 768 LayerNorm forward (+residual)'s two kernels (dt_cu_layernorm_fwd_force:
 *     the full-row kernel, the rule, and the register kernel): the same bytes of out, mean,
 *     rstd and res, then timed side by side (interleaved, median) with a plain stream of the
 *     same bytes.
 * Exits non-zero on any failed check. BENCH_OPS_SKIP_CHECKS=1 times only (and checks
 * nothing: for before/after figures, never as a test). The same source
 * builds against an older kernel library (for before/after figures): features that library
 * lacks are skipped by their DT_CU_HAVE_* macros. */
#include "ops/ops_cuda.h"

#include "gpu_check.cuh"

extern "C" {
#include "core/philox.h"
#include "ops/crossentropy/crossentropy.h"
#include "ops/gelu/gelu.h"
#include "ops/layernorm/layernorm.h"
#include "ops/reduce/reduce.h"
#include "dt_test.h"
}

#include <algorithm>
#include <vector>

static const int NR = 16384, CH = 768, NL = 12, VV = 50257, VP = 50304;

static uint32_t g_draw = 1;
/* Fresh random values in [-scale, scale), rounded to bf16 (CPU and GPU read the same). */
static vf rnd(size_t n, float scale = 1.0f) { return rnd_bf16(11, 251, &g_draw, n, scale); }
static const char *br_name(int br) { return br ? "fast" : "det"; }

/* ---- 1. accuracy ---------------------------------------------------------------------- */

static void check_layernorm(int N, int C) {
    vf a = rnd((size_t)N * C, 2.0f), b = rnd((size_t)N * C), w = rnd(C), bias = rnd(C), dout = rnd((size_t)N * C);
    vf x((size_t)N * C), out((size_t)N * C), mean(N), rstd(N);
    for (size_t i = 0; i < x.size(); i++) x[i] = __bfloat162float(__float2bfloat16(a[i] + b[i]));
    dt_layernorm_fwd(out.data(), mean.data(), rstd.data(), x.data(), w.data(), bias.data(), N, C);
    bf16 *da = up16(a), *db = up16(b), *dres = dev<bf16>((size_t)N * C), *dout16 = dev<bf16>((size_t)N * C);
    float *dw = up32(w), *dbias = up32(bias), *dmean = dev<float>(N), *drstd = dev<float>(N);
    dt_cu_layernorm_fwd(dout16, dmean, drstd, dres, da, db, dw, dbias, N, C, NULL, 0, 0, 0);
    CHECK_RELF(down16(dres, (size_t)N * C), x, 1e-7, "C %d residual add (bf16 rounding)", C);
    CHECK_RELF(down16(dout16, (size_t)N * C), out, 1e-2, "C %d layernorm fwd", C);
    CHECK_RELF(down32(drstd, N), rstd, 1e-4, "C %d layernorm rstd", C);
    CHECK_RELF(down32(dmean, N), mean, 1e-4, "C %d layernorm mean", C);
    /* without the residual: the GPU's own stored sum as input */
    dt_cu_layernorm_fwd(dout16, dmean, drstd, NULL, dres, NULL, dw, dbias, N, C, NULL, 0, 0, 0);
    CHECK_RELF(down16(dout16, (size_t)N * C), out, 1e-2, "C %d layernorm fwd (no residual)", C);
    vf dinp((size_t)N * C, 0.0f), gw(C, 0.0f), gb(C, 0.0f);
    vf dinp0 = rnd((size_t)N * C); /* dinp16 accumulates: start from a nonzero gradient (bf16-exact) */
    for (size_t i = 0; i < dinp.size(); i++) dinp[i] = dinp0[i];
    dt_layernorm_bwd_det(dinp.data(), gw.data(), gb.data(), dout.data(), x.data(), w.data(), mean.data(),
                         rstd.data(), N, C);
    bf16 *dg = up16(dout);
    for (int br = 0; br < 2; br++) {
        variant(br ? "layernorm_bwd=fast" : "layernorm_bwd=det");
        float *dgw = dev<float>(C), *dgb = dev<float>(C);
        float *part = dev<float>((size_t)2 * dt_cu_ln_parts(N) * C);
        bf16 *ddinp16 = up16(dinp0);
        dt_cu_layernorm_bwd(ddinp16, 1, dgw, dgb, part, dg, dres, dw, dmean, drstd, N, C, 0, 0);
        CHECK_RELF(down16(ddinp16, (size_t)N * C), dinp, 4e-3, "C %d layernorm bwd dinp16 %s", C, br_name(br));
        CHECK_RELF(down32(dgw, C), gw, 1e-3, "C %d layernorm bwd dweight %s", C, br_name(br));
        CHECK_RELF(down32(dgb, C), gb, 1e-5, "C %d layernorm bwd dbias %s", C, br_name(br));
#ifdef DT_CU_HAVE_LAYERNORM_BWD_COLSUM
        { /* fused with the column sums of dinp16 (bias_bwd in the same branch): the same
           * dinp16 bits, and the sum against fp64 sums of those bf16 values */
            variant(br ? "bias_bwd=fast" : "bias_bwd=det");
            float *fgw = dev<float>(C), *fgb = dev<float>(C), *fsum = dev<float>(C);
            float *fpart = dev<float>(dt_cu_ln_part_floats(N, C, 1));
            bf16 *fd16 = up16(dinp0);
            dt_cu_layernorm_bwd_colsum(fd16, 1, fgw, fgb, fsum, fpart, dg, dres, dw, dmean, drstd, N, C, 0, 0);
            vf a16 = down16(fd16, (size_t)N * C), b16 = down16(ddinp16, (size_t)N * C);
            CHECKF(!memcmp(a16.data(), b16.data(), sizeof(float) * a16.size()),
                   "C %d layernorm bwd + colsum %s: dinp16 differs from layernorm bwd's", C, br_name(br));
            std::vector<double> r(C, 0.0);
            for (int i = 0; i < N; i++)
                for (int c = 0; c < C; c++) r[c] += a16[(size_t)i * C + c];
            CHECK_RELF(down32(fsum, C), vf(r.begin(), r.end()), 1e-5, "C %d layernorm bwd + colsum: sum %s", C,
                       br_name(br));
            cudaFree(fgw); cudaFree(fgb); cudaFree(fsum); cudaFree(fpart); cudaFree(fd16);
        }
#endif
        cudaFree(dgw); cudaFree(dgb); cudaFree(part); cudaFree(ddinp16);
    }
    dt_op_clear_overrides();
    cudaFree(da); cudaFree(db); cudaFree(dres); cudaFree(dout16); cudaFree(dw); cudaFree(dbias);
    cudaFree(dmean); cudaFree(drstd); cudaFree(dg);
}

static void check_colsum(int rows, int cols) {
    vf x = rnd((size_t)rows * cols), ref(cols, 0.0f);
    dt_colsum_det(x.data(), rows, cols, ref.data());
    bf16 *dx = up16(x);
    float *part = dev<float>((size_t)dt_cu_colsum_parts(rows) * cols);
    for (int br = 0; br < 2; br++) {
        variant(br ? "bias_bwd=fast" : "bias_bwd=det");
        float *acc = dev<float>(cols);
        dt_cu_colsum(acc, part, dx, rows, cols, 0, 0);
        CHECK_RELF(down32(acc, cols), ref, 1e-5, "colsum %dx%d %s", rows, cols, br_name(br));
        cudaFree(acc);
    }
    dt_op_clear_overrides();
    cudaFree(dx); cudaFree(part);
}

static void check_gelu(int rows, int cols) {
    size_t n = (size_t)rows * cols;
    vf x = rnd(n, 4.0f), g = rnd(n), y(n), dx(n);
    dt_gelu_fwd(y.data(), x.data(), n);
    dt_gelu_bwd(dx.data(), x.data(), g.data(), n);
    bf16 *dxx = up16(x), *dg = up16(g), *dy = dev<bf16>(n), *ddx = dev<bf16>(n);
    dt_cu_gelu_fwd(dy, dxx, n, 0);
    dt_cu_gelu_bwd(ddx, dxx, dg, n, 0);
    CHECK_RELF(down16(dy, n), y, 1e-2, "gelu fwd");
    CHECK_RELF(down16(ddx, n), dx, 1e-2, "gelu bwd");
#ifdef DT_CU_HAVE_GELU_BWD_COLSUM
    vf gpu = down16(ddx, n), ref(cols, 0.0f);
    dt_colsum_det(gpu.data(), rows, cols, ref.data()); /* the sum of the stored bf16 values */
    bf16 *ddx2 = dev<bf16>(n);
    float *part = dev<float>((size_t)dt_cu_colsum_parts(rows) * cols);
    for (int br = 0; br < 2; br++) {
        variant(br ? "bias_bwd=fast" : "bias_bwd=det");
        float *acc = dev<float>(cols), *acc2 = dev<float>(cols);
        dt_cu_gelu_bwd_colsum(ddx2, acc, part, dxx, dg, rows, cols, 0, 0);
        vf got = down16(ddx2, n);
        CHECK(memcmp(got.data(), gpu.data(), sizeof(float) * n) == 0);
        CHECK_RELF(down32(acc, cols), ref, 1e-5, "gelu bwd + colsum %dx%d %s", rows, cols, br_name(br));
        if (!br) { /* det: the bits of gelu_bwd followed by colsum */
            dt_cu_colsum(acc2, part, ddx, rows, cols, 0, 0);
            vf a1 = down32(acc, cols), a2 = down32(acc2, cols);
            CHECKF(memcmp(a1.data(), a2.data(), sizeof(float) * cols) == 0, "fused det colsum != gelu_bwd + colsum");
        }
        cudaFree(acc); cudaFree(acc2);
    }
    dt_op_clear_overrides();
    cudaFree(ddx2); cudaFree(part);
#endif
    cudaFree(dxx); cudaFree(dg); cudaFree(dy); cudaFree(ddx);
}

static void check_crossentropy(int N, int V, int Vp) {
    vf logits = rnd((size_t)N * Vp, 4.0f);
    std::vector<int> tg(N);
    for (int i = 0; i < N; i++) tg[i] = (int)(dt_rng_u32(5, 251, 2, 0, i) % V);
    tg[0] = V - 1; /* the last real column, in the partly padded vector */
    vf losses(N), lse(N);
    dt_crossentropy_fwd(losses.data(), lse.data(), logits.data(), tg.data(), N, V, Vp);
    vf dl = logits;
    dt_crossentropy_bwd(dl.data(), lse.data(), tg.data(), 0.5f, N, V, Vp);
    bf16 *dlog = up16(logits);
    int *dtg = dev<int>(N);
    gpu_ok(cudaMemcpy(dtg, tg.data(), sizeof(int) * N, cudaMemcpyHostToDevice), "upload");
    float *dloss = dev<float>(N);
    dt_cu_crossentropy(dloss, dlog, dtg, 0.5f, N, V, Vp, 0);
    CHECK_RELF(down32(dloss, N), losses, 1e-5, "crossentropy losses V %d Vp %d", V, Vp);
    CHECK_RELF(down16(dlog, (size_t)N * Vp), dl, 1e-2, "crossentropy dlogits V %d Vp %d", V, Vp);
    vf got = down16(dlog, (size_t)N * Vp);
    size_t pad = 0;
    for (int i = 0; i < N; i++)
        for (int c = V; c < Vp; c++) pad += got[(size_t)i * Vp + c] != 0.0f;
    CHECKF(pad == 0, "%zu padded dlogits are not 0", pad);
    cudaFree(dlog); cudaFree(dtg); cudaFree(dloss);
}

/* AdamW against adamw_cpu.c's per-element expression in fp32 on the CPU; chunks of both
 * kinds (float4 and element-wise); the fused parameter norm (pnorm_part, dt_cu_sum_parts)
 * against the fp64 sum of the new parameters' squares, and dt_cu_adamw_pnorm's bytes (of
 * the updated parameters) against the fused ones. */
static void check_adamw(void) {
    const size_t n = 3 * 65536 + 4 * 1000 + 7;
    vf p = rnd(n), g = rnd(n, 0.1f), m = rnd(n, 0.01f), v(n);
    vf vr = rnd(n, 1e-3f);
    for (size_t i = 0; i < n; i++) v[i] = vr[i] * vr[i];
    size_t offs[3] = {0, 2 * 65536 + 4 * 1000, 2 * 65536 + 4 * 1000 + 65537};
    size_t nums[3] = {offs[1], 65537, n - offs[2]};
    size_t nch = dt_cu_adamw_chunks(offs, nums, 3, DT_CU_ADAMW_CHUNK, NULL, 0);
    std::vector<dt_cu_chunk> ch(nch);
    dt_cu_adamw_chunks(offs, nums, 3, DT_CU_ADAMW_CHUNK, ch.data(), nch);
    float wd[3] = {0.1f, 0.0f, 0.1f};
    dt_cu_adamw_args a;
    a.lr = 6e-4f; a.beta1 = 0.9f; a.beta2 = 0.95f; a.eps = 1e-8f;
    a.bc1 = 1.0f - powf(0.9f, 3.0f); a.bc2 = 1.0f - powf(0.95f, 3.0f); a.clip_grad = 1.0f;
    double gn = 2.5; /* > clip: the clip factor is applied */
    float clip = (float)(1.0 / (gn + 1e-6));
    vf pr = p, mr = m, vrr = v;
    for (int t = 0; t < 3; t++)
        for (size_t k = offs[t]; k < offs[t] + nums[t]; k++) {
            float gk = g[k] * clip;
            mr[k] = a.beta1 * mr[k] + (1.0f - a.beta1) * gk;
            vrr[k] = a.beta2 * vrr[k] + (1.0f - a.beta2) * gk * gk;
            float mhat = mr[k] / a.bc1, vhat = vrr[k] / a.bc2;
            pr[k] -= a.lr * (mhat / (sqrtf(vhat) + a.eps) + wd[t] * pr[k]);
        }
    float *dp = up32(p), *dg = up32(g), *dm = up32(m), *dv = up32(v), *dwd = up32(vf(wd, wd + 3));
    double *dgn = dev<double>(1);
    gpu_ok(cudaMemcpy(dgn, &gn, sizeof gn, cudaMemcpyHostToDevice), "upload");
    dt_cu_chunk *dch = dev<dt_cu_chunk>(nch);
    gpu_ok(cudaMemcpy(dch, ch.data(), sizeof(dt_cu_chunk) * nch, cudaMemcpyHostToDevice), "upload");
    bf16 *dp16 = dev<bf16>(n);
    double *dpn = dev<double>(nch), *dpsum = dev<double>(1), *dpn0 = dev<double>(nch);
    a.grad_norm = dgn; a.decay = dwd; a.chunks = dch; a.nchunks = (int)nch; a.pnorm_part = dpn;
    dt_cu_adamw(dp, dp16, dg, dm, dv, &a, 0);
    a.pnorm_part = dpn0;
    dt_cu_adamw_pnorm(dp, &a, 0);
    CHECKF(bytes_of(dpn0, nch * sizeof(double)) == bytes_of(dpn, nch * sizeof(double)),
           "adamw: dt_cu_adamw_pnorm's chunk sums of the updated parameters differ in their bytes from the "
           "update's");
    dt_cu_sum_parts(dpsum, dpn, (int)nch, 0);
    gpu_ok(cudaGetLastError(), "adamw launch");
    double psum = 0.0, pref = 0.0;
    gpu_ok(cudaMemcpy(&psum, dpsum, sizeof psum, cudaMemcpyDeviceToHost), "download");
    vf gp = down32(dp, n);
    for (size_t i = 0; i < n; i++) pref += (double)gp[i] * (double)gp[i];
    CHECKF(fabs(psum - pref) <= 1e-12 * pref, "adamw parameter sum of squares %.17g, fp64 reference %.17g", psum,
           pref);
    CHECK_RELF(gp, pr, 1e-6, "adamw params");
    CHECK_RELF(down32(dm, n), mr, 1e-6, "adamw m");
    CHECK_RELF(down32(dv, n), vrr, 1e-6, "adamw v");
    vf g16 = down16(dp16, n);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += g16[i] != __bfloat162float(__float2bfloat16(gp[i]));
    CHECKF(bad == 0, "%zu bf16 parameter copies differ from bf16(param)", bad);
    cudaFree(dp); cudaFree(dg); cudaFree(dm); cudaFree(dv); cudaFree(dwd); cudaFree(dgn); cudaFree(dch);
    cudaFree(dp16); cudaFree(dpn); cudaFree(dpsum); cudaFree(dpn0);
}

static void check_reduce(void) {
    size_t n = 10000003;
    vf y = rnd(n + 1);
    for (size_t i = 0; i < n + 1; i += 97) y[i] = 0.0f;
    float *dy = up32(y);
    double *out = dev<double>(1), *rp = dev<double>(2 * DT_CU_RED_MAX_BLOCKS);
    long long *dz = dev<long long>(1);
    for (int off = 0; off < 2; off++) { /* off 1: not 16-byte aligned (the scalar path) */
        double ref = dt_sumsq_det(y.data() + off, n);
        int64_t z = dt_count_zeros(y.data() + off, n);
        for (int det = 0; det < 2; det++) {
            dt_cu_reduce(out, dz, rp, dy + off, n, 1, det, 0);
            double got = 0;
            long long gz = 0;
            gpu_ok(cudaMemcpy(&got, out, sizeof got, cudaMemcpyDeviceToHost), "download");
            gpu_ok(cudaMemcpy(&gz, dz, sizeof gz, cudaMemcpyDeviceToHost), "download");
            CHECKF(fabs(got - ref) / ref < 1e-9, "sumsq %s off %d: %.17g vs %.17g", det ? "det" : "fast", off, got, ref);
            CHECKF(gz == z, "zeros %s off %d: %lld vs %lld", det ? "det" : "fast", off, gz, (long long)z);
        }
    }
    cudaFree(dy); cudaFree(out); cudaFree(rp); cudaFree(dz);
}

static void test_accuracy(void) {
    check_layernorm(1000, 768);  /* the register kernels, NV 3 */
    check_layernorm(300, 1600);  /* NV 8 (GPT-2 XL) */
    check_layernorm(64, 3072);   /* the wide kernels (C > 2048; the backward holds C <= 3200) */
    check_colsum(5000, 2304);    /* a partial last chunk */
    check_colsum(1000, 776);     /* a partial block of columns */
    check_gelu(1000, 3072);
    check_gelu(300, 776);
    check_crossentropy(64, 1000, 1024);
    check_crossentropy(48, VV, VP);       /* the 124M vocabulary */
    check_crossentropy(4, 120000, 120000); /* wider than shared memory */
    check_adamw();
    check_reduce();
}

/* ---- 2. det replays at the 124M shapes -------------------------------------------------- */

/* Busy work on a side stream (reads a large buffer), so replays share the SMs with it. */
__global__ void busy_kernel(float *x, size_t n, int reps) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
    for (int r = 0; r < reps; r++) v = v * 0.999f + 0.001f;
    x[i] = v;
}
static cudaStream_t g_side, g_fin;
static float *g_busy;
static void contend(void) {
    for (int i = 0; i < 4; i++) busy_kernel<<<(1 << 24) / 256, 256, 0, g_side>>>(g_busy, 1 << 24, 64);
}

/* The 124M-shaped buffers every replay and timing uses. */
struct bufs {
    bf16 *a, *b, *res, *out16, *dout16, *dinp16, *x3, *g3, *d3, *logits, *logits0;
    float *w, *bias, *mean, *rstd, *gw, *gb, *acc, *part, *losses;
    int *tg;
    float *p, *grad, *m, *v, *decay;
    bf16 *p16;
    double *gn, *red_out, *red_part, *pn_out;
    long long *zeros;
    dt_cu_chunk *chunks;
    int nchunks;
    size_t np;
    dt_cu_adamw_args aa;
};
static bufs g;

template <typename T> static void grab(std::vector<unsigned char> *out, const T *d, size_t n) {
    size_t o = out->size();
    out->resize(o + sizeof(T) * n);
    gpu_ok(cudaDeviceSynchronize(), "sync");
    gpu_ok(cudaMemcpy(out->data() + o, d, sizeof(T) * n, cudaMemcpyDeviceToHost), "download");
}
typedef void (*op_fn)(void);
/* The ops as the model calls them (fs = g_fin for the det finishes in replays). */
static cudaStream_t g_fs;
static void op_ln_fwd(void) {
    dt_cu_layernorm_fwd(g.out16, g.mean, g.rstd, g.res, g.a, g.b, g.w, g.bias, NR, CH, NULL, 0, 0, 0);
}
static void op_ln_bwd(void) {
    dt_cu_layernorm_bwd(g.dinp16, 1, g.gw, g.gb, g.part, g.dout16, g.res, g.w, g.mean, g.rstd, NR, CH, 0, g_fs);
}
#ifdef DT_CU_HAVE_LAYERNORM_BWD_COLSUM
static void op_ln_bwd_colsum(void) {
    dt_cu_layernorm_bwd_colsum(g.dinp16, 1, g.gw, g.gb, g.acc, g.part, g.dout16, g.res, g.w, g.mean, g.rstd, NR,
                               CH, 0, g_fs);
}
#endif
static int g_cols = 768;
static void op_colsum(void) { dt_cu_colsum(g.acc, g.part, g.g3, NR, g_cols, 0, g_fs); }
static void op_gelu_fwd(void) { dt_cu_gelu_fwd(g.d3, g.x3, (size_t)NR * 4 * CH, 0); }
static void op_gelu_bwd(void) { dt_cu_gelu_bwd(g.d3, g.x3, g.g3, (size_t)NR * 4 * CH, 0); }
#ifdef DT_CU_HAVE_GELU_BWD_COLSUM
static void op_gelu_bwd_colsum(void) { dt_cu_gelu_bwd_colsum(g.d3, g.acc, g.part, g.x3, g.g3, NR, 4 * CH, 0, g_fs); }
#endif
static void op_ce(void) { dt_cu_crossentropy(g.losses, g.logits, g.tg, 1.0f / NR, NR, VV, VP, 0); }
/* A reference beside the cross-entropy: every 16-byte word of the logits read and written
 * back in place (sign bits flipped), the bytes the fused kernel must move, by a plain
 * grid-stride loop (no compute; not the device's ceiling: the fused kernel beats it). */
__global__ static void copy_inplace_kernel(uint4 *p, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint4 a = p[i];
        a.x ^= 0x80008000u;
        p[i] = a;
    }
}
static void op_ce_floor(void) {
    int sms = 1;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    copy_inplace_kernel<<<sms * 8, 256>>>(reinterpret_cast<uint4 *>(g.logits), (size_t)NR * VP / 8);
}
/* AdamW as the model runs it: with the parameter norm's chunk sums, then their sum */
static void op_adamw(void) {
    dt_cu_adamw(g.p, g.p16, g.grad, g.m, g.v, &g.aa, 0);
    dt_cu_sum_parts(g.pn_out, g.aa.pnorm_part, g.aa.nchunks, 0);
}
static int g_red_det = 1;
static void op_norm(void) { dt_cu_reduce(g.red_out, g.zeros, g.red_part, g.grad, g.np, 1, g_red_det, 0); }

/* Runs reset + op + grab `reps` times under contention; 1 when every replay matched. */
static int replays_equal(void (*reset)(void), op_fn op, void (*take)(std::vector<unsigned char> *)) {
    std::vector<unsigned char> first, cur;
    int same = 1;
    for (int r = 0; r < 3; r++) {
        reset();
        gpu_ok(cudaDeviceSynchronize(), "sync");
        contend();
        op();
        gpu_ok(cudaStreamSynchronize(g_fin), "sync");
        cur.clear();
        take(r ? &cur : &first);
        if (r && (cur.size() != first.size() || memcmp(cur.data(), first.data(), cur.size()))) same = 0;
    }
    return same;
}
static void reset_ln(void) {
    cudaMemset(g.dinp16, 0, sizeof(bf16) * NR * CH);
    cudaMemset(g.gw, 0, sizeof(float) * CH);
    cudaMemset(g.gb, 0, sizeof(float) * CH);
}
static void reset_acc(void) { cudaMemset(g.acc, 0, sizeof(float) * 4 * CH); }
static void reset_ce(void) { cudaMemcpy(g.logits, g.logits0, sizeof(bf16) * NR * VP, cudaMemcpyDeviceToDevice); }
static void reset_none(void) {}
static void reset_adamw(void) {
    /* p, m, v from their saved copies in d3/x3 is overkill: re-derive from fixed values */
    cudaMemset(g.m, 0, sizeof(float) * g.np);
    cudaMemset(g.v, 0, sizeof(float) * g.np);
    cudaMemcpy(g.p, g.grad, sizeof(float) * g.np, cudaMemcpyDeviceToDevice);
}
static void take_ln_fwd(std::vector<unsigned char> *o) {
    grab(o, g.out16, (size_t)NR * CH); grab(o, g.res, (size_t)NR * CH); grab(o, g.mean, NR); grab(o, g.rstd, NR);
}
static void take_ln_bwd(std::vector<unsigned char> *o) {
    grab(o, g.gw, CH); grab(o, g.gb, CH); grab(o, g.dinp16, (size_t)NR * CH);
}
static void take_acc(std::vector<unsigned char> *o) { grab(o, g.acc, g_cols); }
#ifdef DT_CU_HAVE_LAYERNORM_BWD_COLSUM
static void reset_ln_sum(void) { reset_ln(); reset_acc(); }
static void take_ln_sum(std::vector<unsigned char> *o) { take_ln_bwd(o); grab(o, g.acc, CH); }
#endif
#ifdef DT_CU_HAVE_GELU_BWD_COLSUM
static void take_gelu(std::vector<unsigned char> *o) { grab(o, g.acc, 4 * CH); grab(o, g.d3, (size_t)NR * 4 * CH); }
#endif
static void take_ce(std::vector<unsigned char> *o) { grab(o, g.losses, NR); grab(o, g.logits, (size_t)NR * VP); }
static void take_adamw(std::vector<unsigned char> *o) {
    grab(o, g.p, g.np); grab(o, g.m, g.np); grab(o, g.v, g.np); grab(o, g.p16, g.np); grab(o, g.pn_out, 1);
}
static void take_norm(std::vector<unsigned char> *o) { grab(o, g.red_out, 1); grab(o, g.zeros, 1); }

static void test_replays(void) {
    g_fs = g_fin;
    variant("layernorm_bwd=det");
    variant("bias_bwd=det");
    CHECKF(replays_equal(reset_none, op_ln_fwd, take_ln_fwd), "layernorm fwd replays differ");
    CHECKF(replays_equal(reset_ln, op_ln_bwd, take_ln_bwd), "layernorm bwd det replays differ");
#ifdef DT_CU_HAVE_LAYERNORM_BWD_COLSUM
    CHECKF(replays_equal(reset_ln_sum, op_ln_bwd_colsum, take_ln_sum), "layernorm bwd + colsum det replays differ");
#endif
    int shapes[4] = {3 * CH, CH, 4 * CH, CH};
    for (int i = 0; i < 3; i++) {
        g_cols = shapes[i];
        CHECKF(replays_equal(reset_acc, op_colsum, take_acc), "colsum det %d cols replays differ", g_cols);
    }
#ifdef DT_CU_HAVE_GELU_BWD_COLSUM
    CHECKF(replays_equal(reset_acc, op_gelu_bwd_colsum, take_gelu), "gelu bwd + colsum det replays differ");
#endif
    CHECKF(replays_equal(reset_ce, op_ce, take_ce), "crossentropy replays differ");
    CHECKF(replays_equal(reset_adamw, op_adamw, take_adamw), "adamw replays differ");
    g_red_det = 1;
    CHECKF(replays_equal(reset_none, op_norm, take_norm), "grad norm det replays differ");
    dt_op_clear_overrides();
    g_fs = 0;
}

/* ---- 3. timing --------------------------------------------------------------------------- */

static double g_step[2];
/* Times op in the current branch, prints ms and GB/s, adds count x ms to the step sum. */
static void row(const char *name, const char *br, op_fn op, void (*reset)(void), double bytes, double count,
                int which) {
    float t = (float)gpu_median_ms(op, reset);
    printf("%-28s %-5s %9.4f ms %8.0f GB/s   x%-4g = %7.3f ms/step\n", name, br, t, bytes / (t * 1e-3) / 1e9,
           count, count * t);
    if (which & 1) g_step[0] += count * t;
    if (which & 2) g_step[1] += count * t;
}

static void bench(void) {
    double nc = (double)NR * CH, e2 = 2.0;
    printf("\nkernel                       branch        time     bandwidth   per step\n");
    for (int br = 0; br < 2; br++) {
        const char *b = br_name(br);
        int wh = br ? 2 : 1;
        variant(br ? "layernorm_bwd=fast" : "layernorm_bwd=det");
        variant(br ? "bias_bwd=fast" : "bias_bwd=det");
        g_red_det = !br;
        row("layernorm_fwd (+residual)", b, op_ln_fwd, NULL, nc * e2 * 4 + NR * 8.0, 24, wh);
        row("layernorm_bwd", b, op_ln_bwd, NULL, nc * 4 * e2 + NR * 8.0, 25, wh);
#ifdef DT_CU_HAVE_LAYERNORM_BWD_COLSUM
        /* 24 of the 25 (not LN1 of layer 0) replace a layernorm_bwd + colsum (768) pair */
        row("layernorm_bwd + colsum (fused)", b, op_ln_bwd_colsum, NULL, nc * 4 * e2 + NR * 8.0, 24, 0);
#endif
        int shapes[4] = {3 * CH, CH, 4 * CH, CH};
        const char *sn[4] = {"colsum qkv (2304)", "colsum proj (768)", "colsum fc (3072)", "colsum fcproj (768)"};
        for (int i = 0; i < 4; i++) {
            g_cols = shapes[i];
            row(sn[i], b, op_colsum, NULL, (double)NR * shapes[i] * e2, NL, wh);
        }
        row("gelu_fwd", b, op_gelu_fwd, NULL, nc * 4 * e2 * 2, NL, wh);
        row("gelu_bwd", b, op_gelu_bwd, NULL, nc * 4 * e2 * 3, NL, 0);
#ifdef DT_CU_HAVE_GELU_BWD_COLSUM
        row("gelu_bwd + colsum fc (fused)", b, op_gelu_bwd_colsum, NULL, nc * 4 * e2 * 3, NL, 0);
#endif
        row("crossentropy", b, op_ce, NULL, (double)NR * VP * e2 * 2, 1, wh);
        row("  in-place copy, same bytes", b, op_ce_floor, NULL, (double)NR * VP * e2 * 2, 1, 0);
        row("adamw", b, op_adamw, NULL, (double)g.np * 30, 1, wh);
        row("norm (sumsq + zeros)", b, op_norm, NULL, (double)g.np * 4, 2, wh);
        gpu_ok(cudaDeviceSynchronize(), "bench");
    }
    dt_op_clear_overrides();
    printf("sum per step (gelu_bwd and its colsum fc, layernorm_bwd + colsum not included): det %.3f ms, fast %.3f ms\n", g_step[0],
           g_step[1]);
}

/* ---- 4. The LayerNorm backward's two kernels --------------------------------------- */
#ifdef DT_CU_HAVE_LN_BWD_FORCE
/* The C = 768, N = 16384 LayerNorm backward, det branch, without and with the fused column
 * sum, on the full-row kernel (the rule) and the register kernel (DT_CU_LN_BWD_GENERAL).
 * Bits: each runs once from the same start (dinp16 a fixed random gradient, dweight, dbias,
 * the sum and the partials zeroed): the bytes of dinp16, dweight, dbias, the sum and the
 * partials must be equal (a FAIL line and a failed check if not). Time: both interleaved,
 * the order swapped each round, 5 warm-up rounds, then the median of LNK_REPS calls each
 * (CUDA events around the call: the kernel and its det finishes). */
#define LNK_REPS 41
static const char *const lnk_name[2] = {"full rows (rule)", "register kernel"};
static int g_lnk_fused;
static float *g_lnk_part;
static void op_lnk(void) {
    if (g_lnk_fused)
        dt_cu_layernorm_bwd_colsum(g.dinp16, 1, g.gw, g.gb, g.acc, g_lnk_part, g.dout16, g.res, g.w, g.mean, g.rstd,
                                   NR, CH, 0, 0);
    else
        dt_cu_layernorm_bwd(g.dinp16, 1, g.gw, g.gb, g_lnk_part, g.dout16, g.res, g.w, g.mean, g.rstd, NR, CH, 0, 0);
}
/* One run of kernel k from the start d0: the bytes of dinp16, then of the sums and partials. */
static void lnk_run(int k, const bf16 *d0, std::vector<unsigned char> *d16, std::vector<unsigned char> *sums,
                    size_t part_floats) {
    gpu_ok(cudaMemcpy(g.dinp16, d0, sizeof(bf16) * NR * CH, cudaMemcpyDeviceToDevice), "copy");
    gpu_ok(cudaMemset(g.gw, 0, sizeof(float) * CH), "zero");
    gpu_ok(cudaMemset(g.gb, 0, sizeof(float) * CH), "zero");
    gpu_ok(cudaMemset(g.acc, 0, sizeof(float) * CH), "zero");
    gpu_ok(cudaMemset(g_lnk_part, 0, sizeof(float) * part_floats), "zero");
    dt_cu_layernorm_bwd_force(k ? DT_CU_LN_BWD_GENERAL : DT_CU_LN_BWD_RULE);
    op_lnk();
    dt_cu_layernorm_bwd_force(DT_CU_LN_BWD_RULE);
    gpu_ok(cudaGetLastError(), "layernorm_bwd launch");
    d16->clear();
    sums->clear();
    grab(d16, g.dinp16, (size_t)NR * CH);
    grab(sums, g.gw, CH);
    grab(sums, g.gb, CH);
    if (g_lnk_fused) grab(sums, g.acc, CH);
    grab(sums, g_lnk_part, part_floats);
}
static size_t bytes_differ(const std::vector<unsigned char> &a, const std::vector<unsigned char> &b) {
    if (a.size() != b.size()) return a.size() > b.size() ? a.size() : b.size();
    size_t n = 0;
    for (size_t i = 0; i < a.size(); i++) n += a[i] != b[i];
    return n;
}
static void bench_ln_kernels(void) {
    const size_t part_floats = dt_cu_ln_part_floats(NR, CH, 1);
    g_lnk_part = dev<float>(part_floats);
    bf16 *d0 = up16(rnd((size_t)NR * CH));
    variant("layernorm_bwd=det");
    variant("bias_bwd=det");
    const double nc = (double)NR * CH;
    printf("\nlayernorm_bwd C %d N %d, its two kernels, det (interleaved, median of %d calls)\n", CH, NR, LNK_REPS);
    printf("kernel             colsum       time   bandwidth  vs rule  bits\n");
    for (int fused = 0; fused < 2; fused++) {
        g_lnk_fused = fused;
        const char *fn = fused ? "fused" : "no";
        std::vector<unsigned char> a16, asum, b16, bsum;
        lnk_run(0, d0, &a16, &asum, part_floats);
        lnk_run(1, d0, &b16, &bsum, part_floats);
        const size_t bad16 = bytes_differ(a16, b16), badsum = bytes_differ(asum, bsum);
        if (bad16) printf("FAIL layernorm_bwd (colsum %s): dinp16 differs between the kernels in %zu bytes\n", fn, bad16);
        if (badsum)
            printf("FAIL layernorm_bwd (colsum %s): dweight/dbias/sum/partials differ between the kernels in %zu "
                   "bytes\n", fn, badsum);
        CHECKF(!bad16 && !badsum, "layernorm_bwd (colsum %s): the full-row and register kernels' bytes differ", fn);
        const std::vector<double> ms = gpu_median_rotated_ms(
            2,
            [](int k) {
                dt_cu_layernorm_bwd_force(k ? DT_CU_LN_BWD_GENERAL : DT_CU_LN_BWD_RULE);
                op_lnk();
            },
            5, LNK_REPS);
        dt_cu_layernorm_bwd_force(DT_CU_LN_BWD_RULE);
        double t0 = 0;
        for (int k = 0; k < 2; k++) {
            const double t = ms[k];
            if (!k) t0 = t;
            printf("%-18s %-6s %9.4f ms %6.0f GB/s  %6.3f  %s\n", lnk_name[k], fn, t,
                   (nc * 4 * 2.0 + NR * 8.0) / (t * 1e-3) / 1e9, t / t0,
                   k ? (bad16 || badsum ? "DIFFER" : "the rule's bytes") : "reference");
        }
    }
    dt_op_clear_overrides();
    cudaFree(g_lnk_part);
    cudaFree(d0);
    g_lnk_part = NULL;
}
#endif

/* ---- 5. The LayerNorm forward's two kernels ---------------------------------------- */
#ifdef DT_CU_HAVE_LN_FWD_FORCE
/* The C = 768, N = 16384 LayerNorm forward with the residual add (a, b given, no dropout)
 * on the full-row kernel (the rule) and the register kernel (dt_cu_layernorm_fwd_force).
 * Bits: each runs once onto outputs filled with 0xff: the bytes of out, mean, rstd and res
 * must be equal (a FAIL line and a failed check if not). Time: both interleaved,
 * the order rotated each round, 5 warm-up rounds, then the median of LNK_REPS calls each;
 * beside them a plain grid-stride stream of the same bytes (a, b read, res, out written). */
#define LNF_NV 2
static const char *const lnf_name[LNF_NV] = {"full rows (rule)", "register kernel"};
static void lnf_force(int k) { dt_cu_layernorm_fwd_force(k ? DT_CU_LN_FWD_GENERAL : DT_CU_LN_FWD_RULE); }
__global__ static void lnf_stream_kernel(const uint4 *a, const uint4 *b, uint4 *res, uint4 *out, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint4 x = a[i], y = b[i];
        x.x ^= y.x; x.y ^= y.y; x.z ^= y.z; x.w ^= y.w;
        res[i] = x;
        x.x ^= 0x80008000u;
        out[i] = x;
    }
}
static void op_lnf_stream(void) {
    int sms = 1;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    lnf_stream_kernel<<<sms * 8, 256>>>(reinterpret_cast<const uint4 *>(g.a), reinterpret_cast<const uint4 *>(g.b),
                                        reinterpret_cast<uint4 *>(g.res), reinterpret_cast<uint4 *>(g.out16),
                                        (size_t)NR * CH / 8);
}
static void lnf_run(int k, std::vector<unsigned char> *o) {
    gpu_ok(cudaMemset(g.out16, 0xff, sizeof(bf16) * NR * CH), "fill");
    gpu_ok(cudaMemset(g.res, 0xff, sizeof(bf16) * NR * CH), "fill");
    gpu_ok(cudaMemset(g.mean, 0xff, sizeof(float) * NR), "fill");
    gpu_ok(cudaMemset(g.rstd, 0xff, sizeof(float) * NR), "fill");
    lnf_force(k);
    op_ln_fwd();
    lnf_force(0);
    gpu_ok(cudaGetLastError(), "layernorm_fwd launch");
    o->clear();
    grab(o, g.out16, (size_t)NR * CH);
    grab(o, g.mean, NR);
    grab(o, g.rstd, NR);
    grab(o, g.res, (size_t)NR * CH);
}
static void bench_ln_fwd_kernels(void) {
    const double nc = (double)NR * CH, bytes = nc * 2.0 * 4 + NR * 8.0;
    printf("\nlayernorm_fwd (+residual) C %d N %d, its two kernels (interleaved, median of %d calls)\n", CH, NR,
           LNK_REPS);
    printf("kernel                time   bandwidth  vs rule  bits\n");
    std::vector<unsigned char> ref, cur;
    int bad[LNF_NV] = {0};
    lnf_run(0, &ref);
    for (int k = 1; k < LNF_NV; k++) {
        lnf_run(k, &cur);
        const size_t n = bytes_differ(ref, cur);
        bad[k] = n != 0;
        if (n) printf("FAIL layernorm_fwd %s: out/mean/rstd/res differ from the rule's in %zu bytes\n",
                      lnf_name[k], n);
        CHECKF(!n, "layernorm_fwd: the %s's bytes differ from the rule's", lnf_name[k]);
    }
    const int nk = LNF_NV + 1; /* the last: the stream */
    const std::vector<double> ms = gpu_median_rotated_ms(
        nk,
        [](int k) {
            if (k < LNF_NV) {
                lnf_force(k);
                op_ln_fwd();
            } else {
                op_lnf_stream();
            }
        },
        5, LNK_REPS);
    lnf_force(0);
    double t0 = 0;
    for (int k = 0; k < nk; k++) {
        const double t = ms[k];
        if (!k) t0 = t;
        printf("%-20s %9.4f ms %6.0f GB/s  %6.3f  %s\n", k < LNF_NV ? lnf_name[k] : "stream, same bytes", t,
               bytes / (t * 1e-3) / 1e9, t / t0,
               k == LNF_NV ? "-" : !k ? "reference" : bad[k] ? "DIFFER" : "the rule's bytes");
    }
    op_ln_fwd(); /* the rule's outputs back in place */
    gpu_ok(cudaDeviceSynchronize(), "layernorm_fwd kernels");
}
#endif

static void setup(void) {
    size_t nc = (size_t)NR * CH;
    g.a = up16(rnd(nc, 2.0f)); g.b = up16(rnd(nc)); g.res = dev<bf16>(nc); g.out16 = dev<bf16>(nc);
    g.dout16 = up16(rnd(nc)); g.dinp16 = dev<bf16>(nc);
    g.x3 = up16(rnd(4 * nc, 4.0f)); g.g3 = up16(rnd(4 * nc)); g.d3 = dev<bf16>(4 * nc);
    g.w = up32(rnd(CH)); g.bias = up32(rnd(CH)); g.mean = dev<float>(NR); g.rstd = dev<float>(NR);
    g.gw = dev<float>(CH); g.gb = dev<float>(CH); g.acc = dev<float>(4 * CH);
    /* three LayerNorm vectors: dweight, dbias and the fused column sum */
    size_t pc = (size_t)dt_cu_colsum_parts(NR) * 4 * CH, pl = (size_t)dt_cu_ln_parts(NR) * 3 * CH;
    g.part = dev<float>(pc > pl ? pc : pl);
    /* logits: random bf16 in [-8, 8) made on the device from the Philox words */
    g.logits0 = dev<bf16>((size_t)NR * VP);
    g.logits = dev<bf16>((size_t)NR * VP);
    {
        size_t rows = 1024, n = rows * VP;
        vf chunk = rnd(n, 8.0f);
        bf16 *d = up16(chunk);
        for (int k = 0; k < NR / (int)rows; k++)
            gpu_ok(cudaMemcpy(g.logits0 + (size_t)k * n, d, sizeof(bf16) * n, cudaMemcpyDeviceToDevice), "copy");
        cudaFree(d);
    }
    reset_ce();
    std::vector<int> tg(NR);
    for (int i = 0; i < NR; i++) tg[i] = (int)(dt_rng_u32(5, 251, 3, 0, i) % VV);
    g.tg = dev<int>(NR);
    gpu_ok(cudaMemcpy(g.tg, tg.data(), sizeof(int) * NR, cudaMemcpyHostToDevice), "upload");
    g.losses = dev<float>(NR);
    /* the 124M parameter tensors in the model's order */
    const size_t L = NL, C = CH;
    size_t nums[16] = {(size_t)VP * C, 1024 * C, L * C, L * C, L * 3 * C * C, L * 3 * C, L * C * C, L * C,
                       L * C, L * C, L * 4 * C * C, L * 4 * C, L * 4 * C * C, L * C, C, C};
    size_t offs[16], o = 0;
    float wd[16];
    for (int i = 0; i < 16; i++) {
        offs[i] = o;
        o += nums[i];
        wd[i] = (i == 0 || i == 4 || i == 6 || i == 10 || i == 12) ? 0.1f : 0.0f;
    }
    g.np = o;
    g.p = dev<float>(o); g.grad = dev<float>(o); g.m = dev<float>(o); g.v = dev<float>(o); g.p16 = dev<bf16>(o);
    {
        vf chunk = rnd(1 << 22, 0.02f);
        float *d = up32(chunk);
        for (size_t k = 0; k < o; k += chunk.size())
            gpu_ok(cudaMemcpy(g.grad + k, d, sizeof(float) * std::min(chunk.size(), o - k), cudaMemcpyDeviceToDevice), "copy");
        cudaFree(d);
    }
    reset_adamw();
    size_t nch = dt_cu_adamw_chunks(offs, nums, 16, DT_CU_ADAMW_CHUNK, NULL, 0);
    std::vector<dt_cu_chunk> ch(nch);
    dt_cu_adamw_chunks(offs, nums, 16, DT_CU_ADAMW_CHUNK, ch.data(), nch);
    g.chunks = dev<dt_cu_chunk>(nch);
    gpu_ok(cudaMemcpy(g.chunks, ch.data(), sizeof(dt_cu_chunk) * nch, cudaMemcpyHostToDevice), "upload");
    g.decay = up32(vf(wd, wd + 16));
    g.gn = dev<double>(1);
    double gn = 0.5;
    gpu_ok(cudaMemcpy(g.gn, &gn, sizeof gn, cudaMemcpyHostToDevice), "upload");
    dt_cu_adamw_args &a = g.aa;
    a.lr = 6e-4f; a.beta1 = 0.9f; a.beta2 = 0.95f; a.eps = 1e-8f; a.bc1 = 0.1f; a.bc2 = 0.05f;
    a.clip_grad = 1.0f; a.grad_norm = g.gn; a.decay = g.decay; a.chunks = g.chunks; a.nchunks = (int)nch;
    a.pnorm_part = dev<double>(nch);
    g.pn_out = dev<double>(1);
    g.red_out = dev<double>(1); g.red_part = dev<double>(2 * DT_CU_RED_MAX_BLOCKS); g.zeros = dev<long long>(1);
    g_busy = dev<float>(1 << 24);
    gpu_ok(cudaStreamCreateWithFlags(&g_side, cudaStreamNonBlocking), "stream");
    gpu_ok(cudaStreamCreateWithFlags(&g_fin, cudaStreamNonBlocking), "stream");
    /* the model's forward statistics for the backward */
    op_ln_fwd();
    gpu_ok(cudaDeviceSynchronize(), "setup");
}

int main(void) {
    cudaDeviceProp prop;
    gpu_ok(cudaGetDeviceProperties(&prop, 0), "device");
    printf("bench_ops on %s (%d SMs)\n", prop.name, prop.multiProcessorCount);
    const char *skip = getenv("BENCH_OPS_SKIP_CHECKS");
    int checks = !(skip && *skip == '1');
    if (checks) RUN(test_accuracy);
    setup();
    if (checks) RUN(test_replays);
    bench();
#ifdef DT_CU_HAVE_LN_BWD_FORCE
    bench_ln_kernels();
#endif
#ifdef DT_CU_HAVE_LN_FWD_FORCE
    bench_ln_fwd_kernels();
#endif
    fflush(stdout);
    if (!checks) {
        fprintf(stderr, "checks skipped (BENCH_OPS_SKIP_CHECKS=1): timing only\n");
        return 0;
    }
    return dt_test_report();
}
