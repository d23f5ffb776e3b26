/* GPU op tests (run on the GPU machine by tests/gpu/run_gpu_tests.sh):
 *  1. accuracy: every CUDA op against the CPU fp32 op on the same bf16-rounded inputs, by
 *     ||gpu - cpu|| / ||cpu|| (the CPU ops are checked against fp64 in tests/kernels).
 *     Tolerances: bf16 outputs 1e-2 (one bf16 rounding is 2^-9 = 2e-3 relative, plus
 *     accumulation order); fp32 outputs of fp32 reductions 1e-4; fp64 sums 1e-9;
 *  2. the whole model against the CPU model on the same weights (loss, every gradient).
 * Bit-exact replays of every op and of the whole model, both branches, under side-stream
 * contention, and the negative controls of the atomic fast paths are in
 * tests/gpu/test_gpu_replays.cu (through the kernel harness's CUDA backend).
 * Sources covered (src/ops/<family>/): gemm_cuda.cu (every entry of gemm_table.c at its shape), encoder_cuda.cu,
 * layernorm_cuda.cu, reduce_cuda.cu and colsum_cuda.cuh, attention_cuda.cu, attention_flash_cuda.cu,
 * crossentropy_cuda.cu, gelu_cuda.cu, dropout_cuda.cu, adamw_cuda.cu, src/ops/cuda/cuda_common.cuh, and
 * the GPU model (src/model/cuda/: model.cuh, create.cu, linear.cu, forward.cu, backward.cu,
 * step.cu, graphs.cu, streams.cu, trace.cu, describe.cu). */
#include "ops/ops_cuda.h"

#include "gpu_check.cuh"
#include "model/gpt_cuda.h"
extern "C" {
#include "core/philox.h"
#include "ops/attention/attention.h"
#include "ops/crossentropy/crossentropy.h"
#include "ops/dropout/dropout.h"
#include "ops/encoder/encoder.h"
#include "ops/gelu/gelu.h"
#include "ops/gemm/gemm.h"
#include "ops/layernorm/layernorm.h"
#include "ops/reduce/reduce.h"
#include "dt_test.h"
}

#include <vector>

static uint32_t g_draw = 1;
/* Fresh random values in [-scale, scale), rounded to bf16 (so CPU and GPU read the same). */
static vf rnd(size_t n, float scale = 1.0f) { return rnd_bf16(7, 250, &g_draw, n, scale); }

static dt_cu_blas *g_blas;

/* Elements of got (bf16 values, as floats) more than one bf16 ulp (8 significant bits, the
 * ulp at the larger magnitude of the two) plus 1e-6 from ref rounded to bf16: what one
 * rounding of an fp32 result that differs from ref in its last fp32 bits gives (the 1e-6:
 * those fp32 differences, for results that cancel to near zero). */
static size_t beyond_one_ulp(const vf &got, const vf &ref) {
    size_t bad = 0;
    for (size_t i = 0; i < got.size(); i++) {
        float r = __bfloat162float(__float2bfloat16(ref[i]));
        int e;
        frexpf(fmaxf(fabsf(r), fabsf(got[i])), &e);
        if (fabsf(got[i] - r) > ldexpf(1.0f, e - 8) + 1e-6f) bad++;
    }
    return bad;
}

/* ---- 1. accuracy ---------------------------------------------------------------------- */

__global__ static void fill_bf16(bf16 *x, size_t n, uint32_t seed, float scale) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = __float2bfloat16((dt_rng_uniform(seed, 251, 0, 0, i) * 2.0f - 1.0f) * scale);
}
static double gelu_d(double x, int erf_form);
static double dgelu_d(double x, int erf_form);
static bf16 *dev_rnd(size_t n, uint32_t seed, float scale) {
    bf16 *d = dev<bf16>(n);
    fill_bf16<<<dt_cu_div(n, 256), 256>>>(d, n, seed, scale);
    return d;
}
/* count values, `stride` elements apart from p, downloaded (as floats). */
static vf gather16(const bf16 *p, size_t stride, int count) {
    std::vector<bf16> h((size_t)count);
    gpu_ok(cudaMemcpy2D(h.data(), sizeof(bf16), p, stride * sizeof(bf16), sizeof(bf16), (size_t)count,
                        cudaMemcpyDeviceToHost), "gather");
    vf v((size_t)count);
    for (int i = 0; i < count; i++) v[i] = __bfloat162float(h[i]);
    return v;
}

/* Every entry of the GEMM plan table (gemm_table.c) for this device, at its full shape with
 * its epilogue: the plan must be the table's (cublasLtMatmulAlgoCheck accepted the entry),
 * and 24 x 24 sampled outputs must match fp64 sums of the same bf16 inputs with the
 * epilogue applied in double (bias; GELU and dGELU in the tanh form), rel. L2 below 1e-2
 * for bf16 outputs and 1e-4 for fp32 outputs (K up to 50304 products in fp32). */
static void test_gemm_table_accuracy(void) {
    cudaDeviceProp prop;
    gpu_ok(cudaGetDeviceProperties(&prop, 0), "device");
    int cc = prop.major * 10 + prop.minor, tested = 0;
    for (int t = 0; t < dt_cu_gemm_table_size(); t++) {
        const dt_cu_gemm_key *k = &dt_cu_gemm_table_at(t)->key;
        if (k->cc != cc) continue;
        const char *e = k->epilogue;
        int bias = !strcmp(e, "bias") || !strcmp(e, "gelu_aux_bias"), gelu = !strncmp(e, "gelu_aux", 8),
            dgelu = !strcmp(e, "dgelu"), M = k->M, N = k->N, K = k->K;
        if (!strcmp(e, "bgrad")) continue; /* its bias gradient needs partial scratch: replays cover it */
        size_t na = (size_t)(k->ta ? K : M) * k->lda, nb = (size_t)(k->tb ? N : K) * k->ldb, nc = (size_t)M * k->ldc;
        bf16 *dA = dev_rnd(na, 100 + t, 1.0f), *dB = dev_rnd(nb, 200 + t, 1.0f), *db = dev_rnd(N, 300 + t, 1.0f);
        bf16 *daux = gelu || dgelu ? dev_rnd(nc, 400 + t, 4.0f) : NULL;
        void *dC = k->c_f32 ? (void *)dev<float>(nc) : (void *)dev<bf16>(nc);
        dt_cu_gemm_args a = {k->ta, k->tb, M, N, K, dA, k->lda, 0, dB, k->ldb, 0, dC, k->ldc, 0, k->c_f32, 1.0f,
                             k->c_f32 ? 1.0f : 0.0f, 1, bias ? db : NULL,
                             gelu ? DT_CU_EPI_GELU : dgelu ? DT_CU_EPI_DGELU : DT_CU_EPI_DEFAULT, daux, NULL, NULL};
        CHECK_OK(dt_cu_gemm(g_blas, &a, 0));
        char plan[512];
        dt_cu_gemm_describe_last(g_blas, plan, sizeof plan);
        CHECKF(strstr(plan, " src=table ") != NULL, "table entry %d: the plan is not the table's: %s", t, plan);
        vf got, want, gaux, waux;
        vf brow = gather16(db, 1, N);
        std::vector<vf> bcols;
        for (int sj = 0; sj < 24; sj++) {
            int j = (int)(((size_t)sj * 104729u + 31u) % (size_t)N);
            bcols.push_back(k->tb ? gather16(dB + (size_t)j * k->ldb, 1, K) : gather16(dB + j, (size_t)k->ldb, K));
        }
        for (int si = 0; si < 24; si++) {
            int i = (int)(((size_t)si * 7919u + 13u) % (size_t)M);
            vf arow = k->ta ? gather16(dA + i, (size_t)k->lda, K) : gather16(dA + (size_t)i * k->lda, 1, K);
            vf crow = k->c_f32 ? down32((float *)dC + (size_t)i * k->ldc, N) : down16((bf16 *)dC + (size_t)i * k->ldc, N);
            vf xrow = daux ? down16(daux + (size_t)i * k->ldc, N) : vf();
            for (int sj = 0; sj < 24; sj++) {
                int j = (int)(((size_t)sj * 104729u + 31u) % (size_t)N);
                const vf &bcol = bcols[(size_t)sj];
                double acc = 0;
                for (int q = 0; q < K; q++) acc += (double)arow[q] * bcol[q];
                if (bias) acc += brow[j];
                if (gelu) { waux.push_back((float)acc); gaux.push_back(xrow[j]); acc = gelu_d(acc, 0); }
                if (dgelu) acc *= dgelu_d(xrow[j], 0);
                want.push_back((float)acc);
                got.push_back(crow[j]);
            }
        }
        CHECK_RELF(got, want, k->c_f32 ? 1e-4 : 1e-2, "table %d: %s%s %dx%dx%d %s", t, k->ta ? "T" : "N",
                   k->tb ? "T" : "N", M, N, K, e);
        if (gelu) CHECK_RELF(gaux, waux, 1e-2, "table %d: aux (pre-activation)", t);
        cudaFree(dA); cudaFree(dB); cudaFree(db); cudaFree(dC); cudaFree(daux);
        tested++;
    }
    fprintf(stderr, "  plan table: %d entries for sm_%d checked\n", tested, cc);
}

static void test_gemm_accuracy(void) {
    const int M = 300, N = 200, K = 136;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (int f32 = 0; f32 < 2; f32++) {
                vf A = rnd((size_t)M * K), B = rnd((size_t)K * N), bias = rnd(N), C((size_t)M * N, 0.0f);
                int lda = ta ? M : K, ldb = tb ? K : N;
                dt_gemm_det(ta, tb, M, N, K, 1.0f, A.data(), lda, B.data(), ldb, 0.0f, C.data(), N);
                int with_bias = !f32;
                if (with_bias)
                    for (int i = 0; i < M; i++)
                        for (int j = 0; j < N; j++) C[(size_t)i * N + j] += bias[j];
                bf16 *dA = up16(A), *dB = up16(B), *db = up16(bias);
                void *dC = f32 ? (void *)dev<float>((size_t)M * N) : (void *)dev<bf16>((size_t)M * N);
                dt_cu_gemm_args a = {ta, tb, M, N, K, dA, lda, 0, dB, ldb, 0, dC, N, 0, f32, 1.0f, 0.0f, 1,
                                     with_bias ? db : NULL};
                CHECK_OK(dt_cu_gemm(g_blas, &a, 0));
                vf got = f32 ? down32((float *)dC, (size_t)M * N) : down16((bf16 *)dC, (size_t)M * N);
                char what[64];
                snprintf(what, sizeof what, "gemm %s%s %s", ta ? "T" : "N", tb ? "T" : "N", f32 ? "f32" : "bf16+bias");
                CHECK_REL(got, C, f32 ? 1e-4 : 1e-2, what);
                cudaFree(dA); cudaFree(dB); cudaFree(db); cudaFree(dC);
            }
}

/* GELU of x in double: the tanh form (gelu.h, the CPU model's) or the erf form. */
static double gelu_d(double x, int erf_form) {
    if (erf_form) return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}
static double dgelu_d(double x, int erf_form) {
    if (erf_form) return 0.5 * (1.0 + erf(x / sqrt(2.0))) + x * exp(-0.5 * x * x) / sqrt(2.0 * M_PI);
    double th = tanh(0.7978845608028654 * (x + 0.044715 * x * x * x));
    return 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * 0.7978845608028654 * (1.0 + 3.0 * 0.044715 * x * x);
}

/* Which GELU cuBLASLt's epilogues compute: with fp32 outputs and acc = x exactly (K = 8, one
 * nonzero product per element), the GELU_AUX output and the DGELU factor against the
 * tanh form (the CPU model's) and the erf form in double. The two forms differ by 1.5e-4
 * (forward) and 5.8e-4 (derivative) rel. L2 over [-4, 4]: the tanh form must be at least 4x
 * closer, and within 1e-5. */
static void test_gelu_epilogue_form(void) {
    const int M = 16384, N = 8, K = 8;
    vf x = rnd(M, 4.0f), g = rnd(M), xa = rnd((size_t)M * N, 4.0f);
    vf A((size_t)M * K, 0.0f), G((size_t)M * K, 0.0f), B((size_t)K * N, 0.0f);
    for (int i = 0; i < M; i++) { A[(size_t)i * K] = x[i]; G[(size_t)i * K] = g[i]; }
    for (int j = 0; j < N; j++) B[j] = 1.0f;
    bf16 *dA = up16(A), *dG = up16(G), *dB = up16(B);
    float *dC = dev<float>((size_t)M * N), *daux = dev<float>((size_t)M * N), *dxa = up32(xa);
    dt_cu_gemm_args f = {0, 0, M, N, K, dA, K, 0, dB, N, 0, dC, N, 0, 1, 1.0f, 0.0f, 1, NULL, DT_CU_EPI_GELU,
                         daux, NULL, NULL};
    CHECK_OK(dt_cu_gemm(g_blas, &f, 0));
    vf y = down32(dC, (size_t)M * N), pre = down32(daux, (size_t)M * N), want((size_t)M * N);
    vf yt((size_t)M * N), ye((size_t)M * N);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            size_t k = (size_t)i * N + j;
            want[k] = x[i];
            yt[k] = (float)gelu_d(want[k], 0);
            ye[k] = (float)gelu_d(want[k], 1);
        }
    CHECK_REL(pre, want, 1e-7, "GELU_AUX aux = acc (fp32)");
    double et = relerr(y, yt), ee = relerr(y, ye);
    fprintf(stderr, "  cuBLASLt GELU epilogue: rel err vs tanh form %.3g, vs erf form %.3g\n", et, ee);
    CHECKF(et < 1e-5 && et * 4 < ee, "cuBLASLt's GELU is not the tanh form: %.3g vs tanh, %.3g vs erf", et, ee);
    dt_cu_gemm_args d = {0, 0, M, N, K, dG, K, 0, dB, N, 0, dC, N, 0, 1, 1.0f, 0.0f, 1, NULL, DT_CU_EPI_DGELU,
                         dxa, NULL, NULL};
    CHECK_OK(dt_cu_gemm(g_blas, &d, 0));
    vf dx = down32(dC, (size_t)M * N);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            size_t k = (size_t)i * N + j;
            yt[k] = (float)(g[i] * dgelu_d(xa[k], 0));
            ye[k] = (float)(g[i] * dgelu_d(xa[k], 1));
        }
    et = relerr(dx, yt);
    ee = relerr(dx, ye);
    fprintf(stderr, "  cuBLASLt dGELU epilogue: rel err vs tanh form %.3g, vs erf form %.3g\n", et, ee);
    CHECKF(et < 1e-5 && et * 4 < ee, "cuBLASLt's dGELU is not the tanh form: %.3g vs tanh, %.3g vs erf", et, ee);
    cudaFree(dA); cudaFree(dG); cudaFree(dB); cudaFree(dC); cudaFree(daux); cudaFree(dxa);
}

/* The model's fused GEMMs against the CPU ops on the same bf16 inputs: the fc forward with
 * GELU (aux = the pre-activation, bf16), the input gradient with dGELU, and the weight
 * gradient with its bias gradient (fp32 +=) with K whole and in the rule's chunks (8 here)
 * and forced 2 and 4. */
static void test_gemm_epilogues(void) {
    const int M = 512, N = 256, K = 136;
    vf A = rnd((size_t)M * K), B = rnd((size_t)K * N), bias = rnd(N), pre((size_t)M * N, 0.0f);
    dt_gemm_det(0, 0, M, N, K, 1.0f, A.data(), K, B.data(), N, 0.0f, pre.data(), N);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) pre[(size_t)i * N + j] += bias[j];
    vf y((size_t)M * N);
    dt_gelu_fwd(y.data(), pre.data(), y.size());
    bf16 *dA = up16(A), *dB = up16(B), *dbias = up16(bias), *dC = dev<bf16>((size_t)M * N), *daux = dev<bf16>((size_t)M * N);
    for (int br = 0; br < 2; br++) {
        variant(br ? "gemm=fast" : "gemm=det");
        dt_cu_gemm_args f = {0, 0, M, N, K, dA, K, 0, dB, N, 0, dC, N, 0, 0, 1.0f, 0.0f, 1, dbias,
                             DT_CU_EPI_GELU, daux, NULL, NULL};
        CHECK_OK(dt_cu_gemm(g_blas, &f, 0));
        CHECK_RELF(down16(daux, (size_t)M * N), pre, 1e-2, "gemm GELU_AUX_BIAS aux %s", br ? "fast" : "det");
        CHECK_RELF(down16(dC, (size_t)M * N), y, 1e-2, "gemm GELU_AUX_BIAS out %s", br ? "fast" : "det");
        /* dGELU: C = (A B) * gelu'(aux), aux the bf16 pre-activation just stored */
        vf auxr = down16(daux, (size_t)M * N), ab((size_t)M * N, 0.0f), dx((size_t)M * N);
        dt_gemm_det(0, 0, M, N, K, 1.0f, A.data(), K, B.data(), N, 0.0f, ab.data(), N);
        dt_gelu_bwd(dx.data(), auxr.data(), ab.data(), dx.size());
        dt_cu_gemm_args d = {0, 0, M, N, K, dA, K, 0, dB, N, 0, dC, N, 0, 0, 1.0f, 0.0f, 1, NULL, DT_CU_EPI_DGELU,
                             daux, NULL, NULL};
        CHECK_OK(dt_cu_gemm(g_blas, &d, 0));
        CHECK_RELF(down16(dC, (size_t)M * N), dx, 1e-2, "gemm dGELU %s", br ? "fast" : "det");
    }
    /* weight gradient dW (OC, IC) += dout^T x, db += column sums of dout, K = 16384 rows */
    const int OC = 256, IC = 192, R = 16384;
    vf dout = rnd((size_t)R * OC), x = rnd((size_t)R * IC), w0 = rnd((size_t)OC * IC), b0 = rnd(OC);
    vf dw = w0, db = b0;
    dt_gemm_det(1, 0, OC, IC, R, 1.0f, dout.data(), OC, x.data(), IC, 1.0f, dw.data(), IC);
    for (int r = 0; r < R; r++)
        for (int o = 0; o < OC; o++) db[o] += dout[(size_t)r * OC + o];
    CHECKF(dt_cu_gemm_splits(OC, IC, R) == 8, "rule: %d chunks for %dx%dx%d", dt_cu_gemm_splits(OC, IC, R), OC, IC, R);
    bf16 *ddout = up16(dout), *dx16 = up16(x);
    float *part = dev<float>(DT_CU_BGRAD_PART_FLOATS(OC));
    int forced[4] = {0, 1, 2, 4};
    for (int br = 0; br < 2; br++)
        for (int k = 0; k < 4; k++) {
            variant(br ? "gemm=fast" : "gemm=det");
            dt_cu_blas_force(g_blas, -1, forced[k]);
            float *ddw = up32(w0), *ddb = up32(b0);
            dt_cu_gemm_args g = {1, 0, OC, IC, R, ddout, OC, 0, dx16, IC, 0, ddw, IC, 0, 1, 1.0f, 1.0f, 1, NULL,
                                 DT_CU_EPI_BGRAD, NULL, ddb, part};
            CHECK_OK(dt_cu_gemm(g_blas, &g, 0));
            char plan[256];
            dt_cu_gemm_describe_last(g_blas, plan, sizeof plan);
            int want = forced[k] ? forced[k] : 8;
            char chunks[32];
            snprintf(chunks, sizeof chunks, "k_chunks=%d", want);
            CHECKF(strstr(plan, chunks) != NULL, "plan %s, want %s", plan, chunks);
            CHECK_RELF(down32(ddw, (size_t)OC * IC), dw, 1e-4, "gemm dW += (%d K chunks) %s", want, br ? "fast" : "det");
            CHECK_RELF(down32(ddb, OC), db, 1e-5, "gemm db += bias-gradient epilogue (%d K chunks) %s", want,
                       br ? "fast" : "det");
            cudaFree(ddw); cudaFree(ddb);
        }
    dt_cu_blas_force(g_blas, -1, 0);
    dt_op_clear_overrides();
    cudaFree(dA); cudaFree(dB); cudaFree(dbias); cudaFree(dC); cudaFree(daux); cudaFree(ddout); cudaFree(dx16);
    cudaFree(part);
}

static void test_encoder_accuracy(void) {
    const int B = 4, T = 64, C = 64, Vp = 128, BT = B * T;
    std::vector<int> inp(BT);
    /* repeats, and one token taking a fifth of the batch: its run is cut into chunks */
    for (int i = 0; i < BT; i++) inp[i] = i % 5 == 0 ? 7 : (int)(dt_rng_u32(3, 250, 1, 0, i) % 40);
    vf wte = rnd((size_t)Vp * C), wpe = rnd((size_t)T * C), dout = rnd((size_t)BT * C);
    vf out((size_t)BT * C);
    dt_encoder_fwd(out.data(), inp.data(), wte.data(), wpe.data(), B, T, C);
    int *din = upi(inp);
    float *dwte_ = up32(wte), *dwpe_ = up32(wpe);
    bf16 *ddout = up16(dout); /* the residual gradient is bf16; rnd's values are bf16-exact */
    bf16 *dout16 = dev<bf16>((size_t)BT * C);
    dt_cu_encoder_fwd(dout16, din, dwte_, dwpe_, B, T, C, NULL, 0, 0, 0);
    CHECK_REL(down16(dout16, (size_t)BT * C), out, 1e-2, "encoder fwd");
    vf gte((size_t)Vp * C, 0.0f), gpe((size_t)T * C, 0.0f);
    dt_encoder_bwd_det(gte.data(), gpe.data(), dout.data(), inp.data(), B, T, C, Vp);
    std::vector<int> cnt(Vp), order(BT), tok(BT), start(BT + 1);
    int nseg = dt_cu_encoder_buckets(inp.data(), BT, Vp, cnt.data(), order.data(), tok.data(), start.data());
    std::vector<int> cs(BT + 1), cd(BT), mt(dt_cu_encoder_max_multi(BT) + 1), ms(dt_cu_encoder_max_multi(BT) + 1);
    int nmulti = 0, nchunk = dt_cu_encoder_chunks(tok.data(), start.data(), nseg, cs.data(), cd.data(), mt.data(),
                                                  ms.data(), &nmulti);
    CHECK(nmulti >= 1 && nchunk > nseg); /* the skewed token's run is several chunks */
    int *dorder = upi(order), *dtok = upi(cs), *dstart = upi(cd), *dmt = upi(mt), *dms = upi(ms);
    float *dpart = dev<float>((size_t)dt_cu_encoder_max_slots(BT) * C);
    const dt_cu_encoder_work w = {dorder, dtok, dstart, dmt, dms, nchunk, nmulti, dpart};
    for (int br = 0; br < 2; br++) {
        variant(br ? "encoder_bwd=fast" : "encoder_bwd=det");
        float *g1 = dev<float>((size_t)Vp * C), *g2 = dev<float>((size_t)T * C);
        dt_cu_encoder_bwd(g1, g2, ddout, din, &w, B, T, C, NULL, 0, 0, 0);
        CHECK_REL(down32(g1, (size_t)Vp * C), gte, 1e-5, br ? "encoder bwd dwte fast" : "encoder bwd dwte det");
        CHECK_REL(down32(g2, (size_t)T * C), gpe, 1e-5, br ? "encoder bwd dwpe fast" : "encoder bwd dwpe det");
        cudaFree(g1); cudaFree(g2);
    }
    dt_op_clear_overrides();
    cudaFree(din); cudaFree(dwte_); cudaFree(dwpe_); cudaFree(ddout); cudaFree(dout16);
    cudaFree(dorder); cudaFree(dtok); cudaFree(dstart); cudaFree(dmt); cudaFree(dms); cudaFree(dpart);
}

static void test_layernorm_accuracy(void) {
    const int N = 1000, C = 768;
    vf a = rnd((size_t)N * C, 2.0f), b = rnd((size_t)N * C), w = rnd(C), bias = rnd(C), dout = rnd((size_t)N * C);
    /* fused residual: x = bf16(a + b) */
    vf x((size_t)N * C);
    for (size_t i = 0; i < x.size(); i++) x[i] = __bfloat162float(__float2bfloat16(a[i] + b[i]));
    vf out((size_t)N * C), mean(N), rstd(N);
    dt_layernorm_fwd(out.data(), mean.data(), rstd.data(), x.data(), w.data(), bias.data(), N, C);
    bf16 *da = up16(a), *db = up16(b), *dres = dev<bf16>((size_t)N * C), *dout16 = dev<bf16>((size_t)N * C);
    float *dw = up32(w), *dbias = up32(bias), *dmean = dev<float>(N), *drstd = dev<float>(N);
    dt_cu_layernorm_fwd(dout16, dmean, drstd, dres, da, db, dw, dbias, N, C, NULL, 0, 0, 0);
    CHECK_REL(down16(dres, (size_t)N * C), x, 1e-7, "residual add (bf16 rounding)");
    CHECK_REL(down16(dout16, (size_t)N * C), out, 1e-2, "layernorm fwd");
    CHECK_REL(down32(drstd, N), rstd, 1e-4, "layernorm rstd");
    vf dinp((size_t)N * C, 0.0f), gw(C, 0.0f), gb(C, 0.0f);
    dt_layernorm_bwd_det(dinp.data(), gw.data(), gb.data(), dout.data(), x.data(), w.data(), mean.data(),
                         rstd.data(), N, C);
    bf16 *dg = up16(dout);
    for (int br = 0; br < 2; br++) {
        variant(br ? "layernorm_bwd=fast" : "layernorm_bwd=det");
        const char *bn = br ? "fast" : "det";
        float *dgw = dev<float>(C), *dgb = dev<float>(C), *part = dev<float>((size_t)2 * dt_cu_ln_parts(N) * C);
        bf16 *ddinp16 = dev<bf16>((size_t)N * C), *zacc = dev<bf16>((size_t)N * C); /* dev: zeroed */
        gpu_ok(cudaMemset(ddinp16, 0xff, sizeof(bf16) * N * C), "memset"); /* acc 0 must not read it */
        dt_cu_layernorm_bwd(ddinp16, 0, dgw, dgb, part, dg, dres, dw, dmean, drstd, N, C, 0, 0);
        vf got16 = down16(ddinp16, (size_t)N * C);
        CHECK_RELF(got16, dinp, 4e-3, "layernorm bwd dinp16 %s", bn);
        CHECKF(beyond_one_ulp(got16, dinp) == 0, "layernorm bwd dinp16 %s: %zu elements beyond one bf16 ulp of the CPU",
               bn, beyond_one_ulp(got16, dinp));
        CHECK_RELF(down32(dgw, C), gw, 1e-3, "layernorm bwd dweight %s", bn);
        CHECK_RELF(down32(dgb, C), gb, 1e-5, "layernorm bwd dbias %s", bn);
        /* acc 1 into a zeroed buffer: the same bits as acc 0 */
        gpu_ok(cudaMemset(dgw, 0, sizeof(float) * C), "memset");
        gpu_ok(cudaMemset(dgb, 0, sizeof(float) * C), "memset");
        dt_cu_layernorm_bwd(zacc, 1, dgw, dgb, part, dg, dres, dw, dmean, drstd, N, C, 0, 0);
        vf z16 = down16(zacc, (size_t)N * C);
        CHECKF(!memcmp(z16.data(), got16.data(), sizeof(float) * z16.size()),
               "layernorm bwd %s: acc 1 into zeros differs from acc 0", bn);
        cudaFree(dgw); cudaFree(dgb); cudaFree(part); cudaFree(ddinp16); cudaFree(zacc);
    }
    dt_op_clear_overrides();
    /* with hidden dropout (p = 0.1: the kernel with the dropout branch; the one above has
     * none): res = bf16(a + b * factor) with the CPU's mask (dropped elements exactly a; kept
     * ones within 1e-3: the GPU may fuse the multiply-add), out against the CPU LayerNorm of
     * that res */
    dt_dropout d = {0.1f, 77, 5};
    vf xd((size_t)N * C), outd((size_t)N * C);
    size_t dropped = 0;
    for (size_t i = 0; i < xd.size(); i++) {
        float f = dt_dropout_factor(&d, DT_RNG_DROPOUT_HIDDEN, 3, i);
        dropped += f == 0.0f;
        xd[i] = __bfloat162float(__float2bfloat16(a[i] + b[i] * f));
    }
    dt_layernorm_fwd(outd.data(), mean.data(), rstd.data(), xd.data(), w.data(), bias.data(), N, C);
    dt_cu_layernorm_fwd(dout16, dmean, drstd, dres, da, db, dw, dbias, N, C, &d, DT_RNG_DROPOUT_HIDDEN, 3, 0);
    vf gres = down16(dres, (size_t)N * C);
    size_t mask_bad = 0;
    for (size_t i = 0; i < xd.size(); i++)
        if (dt_dropout_factor(&d, DT_RNG_DROPOUT_HIDDEN, 3, i) == 0.0f && gres[i] != __bfloat162float(__float2bfloat16(a[i])))
            mask_bad++;
    CHECKF(dropped > 0 && mask_bad == 0, "layernorm fwd + dropout: %zu of %zu dropped elements differ from a", mask_bad,
           dropped);
    CHECK_REL(gres, xd, 1e-3, "residual add + dropout 0.1");
    CHECK_REL(down16(dout16, (size_t)N * C), outd, 1e-2, "layernorm fwd (residual + dropout)");
    CHECK_REL(down32(drstd, N), rstd, 1e-4, "layernorm rstd (residual + dropout)");
    cudaFree(da); cudaFree(db); cudaFree(dres); cudaFree(dout16); cudaFree(dw); cudaFree(dbias);
    cudaFree(dmean); cudaFree(drstd); cudaFree(dg);
}

/* The LayerNorm backward fused with the column sums of the dinp16 it writes (the next
 * linear's bias gradient: dt_cu_layernorm_bwd_colsum) on every kernel path: the register
 * kernel at C 768 (NV4 6, the 124M shape), 1600 (NV4 16) and 64 (half the lanes idle),
 * the wide kernel with the sum fused (C 768, weights not 16-byte aligned) and past
 * dt_cu_colsum_fused (C 3072: dt_cu_colsum after the kernel); N not a multiple of 64 (blocks
 * of unequal row counts) nor, at 300, of the 8-row groups. For each of the four (layernorm_bwd, bias_bwd) branch pairs, from nonzero
 * dinp16 and sum (both accumulate):
 *  - sum against the fp64 column sums of the downloaded dinp16 (the bf16 values as stored)
 *    plus the start, rel 1e-5 (a sum of the fp32 values before rounding is ~1e-3 off here);
 *  - sum against dt_cu_colsum over the same dinp16 from the same start, rel 1e-5 (the same
 *    operands in another order: close, not bitwise);
 *  - dinp16 byte-identical to dt_cu_layernorm_bwd's, and dweight/dbias too when
 *    layernorm_bwd is det; dinp16 against the CPU's fp32 sum (rel 4e-3, and every element
 *    within one bf16 ulp of it), dweight, dbias (1e-3, 1e-5);
 *  - out of place (dt_cu_layernorm_bwd_from, fused and not): dinp16 byte-identical to the
 *    in-place calls', dweight/dbias (layernorm_bwd det) and the sums (bias_bwd det) too, and
 *    the incoming gradient untouched. */
static void test_layernorm_colsum(void) {
    const struct { int N, C, misalign; } shapes[] = {{1000, 768, 0}, {300, 1600, 0}, {1000, 64, 0},
                                                     {1000, 768, 1}, {200, 3072, 0}};
    for (const auto &sh : shapes) {
        const int N = sh.N, C = sh.C;
        const size_t nc = (size_t)N * C;
        vf x = rnd(nc, 2.0f), w = rnd(C), bias = rnd(C), dout = rnd(nc), dinp0 = rnd(nc), sum0 = rnd(C);
        vf y(nc), mean(N), rstd(N);
        dt_layernorm_fwd(y.data(), mean.data(), rstd.data(), x.data(), w.data(), bias.data(), N, C);
        vf dinp = dinp0, gw(C, 0.0f), gb(C, 0.0f);
        dt_layernorm_bwd_det(dinp.data(), gw.data(), gb.data(), dout.data(), x.data(), w.data(), mean.data(),
                             rstd.data(), N, C);
        bf16 *dx = up16(x), *dg = up16(dout);
        float *dmean = up32(mean), *drstd = up32(rstd);
        float *wbuf = dev<float>(C + 1), *dw = wbuf + sh.misalign; /* misalign: 4-byte aligned only */
        gpu_ok(cudaMemcpy(dw, w.data(), sizeof(float) * C, cudaMemcpyHostToDevice), "upload");
        float *part = dev<float>(dt_cu_ln_part_floats(N, C, 1));
        float *part2 = dev<float>(dt_cu_ln_part_floats(N, C, 0));
        for (int br = 0; br < 4; br++) {
            int ln_fast = br & 1, sum_fast = br >> 1;
            variant(ln_fast ? "layernorm_bwd=fast" : "layernorm_bwd=det");
            variant(sum_fast ? "bias_bwd=fast" : "bias_bwd=det");
            char what[96];
            snprintf(what, sizeof what, "C %d%s, layernorm_bwd %s, bias_bwd %s", C, sh.misalign ? " (unaligned w)" : "",
                     ln_fast ? "fast" : "det", sum_fast ? "fast" : "det");
            /* fused */
            float *fgw = dev<float>(C), *fgb = dev<float>(C), *fsum = up32(sum0);
            bf16 *fd16 = up16(dinp0); /* rnd's values are bf16-exact */
            dt_cu_layernorm_bwd_colsum(fd16, 1, fgw, fgb, fsum, part, dg, dx, dw, dmean, drstd, N, C, 0, 0);
            /* unfused, the same inputs */
            float *ugw = dev<float>(C), *ugb = dev<float>(C), *csum = up32(sum0);
            bf16 *ud16 = up16(dinp0);
            dt_cu_layernorm_bwd(ud16, 1, ugw, ugb, part2, dg, dx, dw, dmean, drstd, N, C, 0, 0);
            dt_cu_colsum(csum, part2, fd16, N, C, 0, 0); /* after the LN: part2 is free again */
            vf got16 = down16(fd16, nc), gsum = down32(fsum, C);
            std::vector<double> ref(C);
            for (int c = 0; c < C; c++) ref[c] = sum0[c];
            for (int r = 0; r < N; r++)
                for (int c = 0; c < C; c++) ref[c] += got16[(size_t)r * C + c];
            vf reff(ref.begin(), ref.end());
            CHECK_RELF(gsum, reff, 1e-5, "%s: sum vs fp64", what);
            CHECK_RELF(gsum, down32(csum, C), 1e-5, "%s: sum vs dt_cu_colsum", what);
            vf u16 = down16(ud16, nc);
            CHECKF(!memcmp(got16.data(), u16.data(), sizeof(float) * nc), "%s: dinp16 differs from the unfused call's",
                   what);
            vf fw = down32(fgw, C), fb = down32(fgb, C), uw = down32(ugw, C), ub = down32(ugb, C);
            if (!ln_fast) {
                CHECKF(!memcmp(fw.data(), uw.data(), sizeof(float) * C), "%s: dweight differs from the unfused call's",
                       what);
                CHECKF(!memcmp(fb.data(), ub.data(), sizeof(float) * C), "%s: dbias differs from the unfused call's",
                       what);
            }
            CHECK_RELF(got16, dinp, 4e-3, "%s: dinp16", what);
            CHECKF(beyond_one_ulp(got16, dinp) == 0, "%s: dinp16: %zu elements beyond one bf16 ulp of the CPU", what,
                   beyond_one_ulp(got16, dinp));
            CHECK_RELF(fw, gw, 1e-3, "%s: dweight", what);
            CHECK_RELF(fb, gb, 1e-5, "%s: dbias", what);
            /* out of place (dt_cu_layernorm_bwd_from), fused and not, into a buffer of other
             * bytes: the in-place calls' bytes, and the incoming gradient left as it was */
            for (int fz = 0; fz < 2; fz++) {
                float *ogw = dev<float>(C), *ogb = dev<float>(C), *osum = fz ? up32(sum0) : NULL;
                bf16 *rin = up16(dinp0), *od16 = up16(dout); /* dout: any bytes but the result's */
                dt_cu_layernorm_bwd_from(od16, rin, ogw, ogb, osum, fz ? part : part2, dg, dx, dw, dmean, drstd, N, C,
                                         0, 0);
                vf o16 = down16(od16, nc), r16 = down16(rin, nc);
                CHECKF(!memcmp(o16.data(), (fz ? got16 : u16).data(), sizeof(float) * nc),
                       "%s: out-of-place%s dinp16 differs from the in-place call's", what, fz ? " fused" : "");
                CHECKF(!memcmp(r16.data(), dinp0.data(), sizeof(float) * nc),
                       "%s: the out-of-place call%s changed its incoming gradient", what, fz ? " (fused)" : "");
                if (!ln_fast) {
                    vf ow = down32(ogw, C), ob = down32(ogb, C);
                    CHECKF(!memcmp(ow.data(), fw.data(), sizeof(float) * C) &&
                               !memcmp(ob.data(), fb.data(), sizeof(float) * C),
                           "%s: out-of-place%s dweight/dbias differ from the in-place call's", what,
                           fz ? " fused" : "");
                }
                if (fz && !sum_fast) {
                    vf os = down32(osum, C);
                    CHECKF(!memcmp(os.data(), gsum.data(), sizeof(float) * C),
                           "%s: out-of-place column sums differ from the in-place call's", what);
                }
                cudaFree(ogw); cudaFree(ogb); cudaFree(osum); cudaFree(rin); cudaFree(od16);
            }
            cudaFree(fgw); cudaFree(fgb); cudaFree(fsum); cudaFree(fd16);
            cudaFree(ugw); cudaFree(ugb); cudaFree(csum); cudaFree(ud16);
        }
        dt_op_clear_overrides();
        cudaFree(dx); cudaFree(dg); cudaFree(dmean); cudaFree(drstd); cudaFree(wbuf); cudaFree(part); cudaFree(part2);
    }
}

/* The det order of the LayerNorm backward's reductions, byte for byte: dweight, dbias and
 * the fused column sum (dt_cu_layernorm_bwd_colsum, both branches det) from nonzero starts
 * against a host replay of the order layernorm_cuda.h states: nparts = dt_cu_ln_parts(N) blocks,
 * block b's warp w takes rows (b + k nparts) DT_CU_LN_WARPS + w for k = 0, 1, ... in order,
 * accumulating fma(n, g, dw), db + g and sum + float(dinp16) from 0 (n = (x - mean) rstd);
 * the block adds its warps in warp order from 0; dt_cu_parts_finish adds partials ty, ty +
 * 8, ... per ty < 8, then the 8 sums in ty order, into the start. On the register kernel
 * (C 768, accumulators in registers; C 1600, in shared rows; C 64, lanes idle) and the wide
 * kernel (weights 4-byte aligned only), N not a multiple of the block groups. */
static void test_layernorm_det_order(void) {
    const struct { int N, C, misalign; } shapes[] = {{1000, 768, 0}, {300, 1600, 0}, {700, 64, 0}, {333, 768, 1}};
    variant("layernorm_bwd=det");
    variant("bias_bwd=det");
    for (const auto &sh : shapes) {
        const int N = sh.N, C = sh.C, W = DT_CU_LN_WARPS, nparts = dt_cu_ln_parts(N);
        const size_t nc = (size_t)N * C;
        vf x = rnd(nc, 2.0f), w = rnd(C), bias = rnd(C), dout = rnd(nc), dinp0 = rnd(nc), gw0 = rnd(C), gb0 = rnd(C),
           sum0 = rnd(C), y(nc), mean(N), rstd(N);
        dt_layernorm_fwd(y.data(), mean.data(), rstd.data(), x.data(), w.data(), bias.data(), N, C);
        bf16 *dx = up16(x), *dg = up16(dout), *d16 = up16(dinp0);
        float *dmean = up32(mean), *drstd = up32(rstd), *wbuf = dev<float>(C + 1), *dw = wbuf + sh.misalign;
        float *dgw = up32(gw0), *dgb = up32(gb0), *dsum = up32(sum0);
        float *part = dev<float>(dt_cu_ln_part_floats(N, C, 1));
        gpu_ok(cudaMemcpy(dw, w.data(), sizeof(float) * C, cudaMemcpyHostToDevice), "upload");
        dt_cu_layernorm_bwd_colsum(d16, 1, dgw, dgb, dsum, part, dg, dx, dw, dmean, drstd, N, C, 0, 0);
        vf got16 = down16(d16, nc), rw = gw0, rb = gb0, rs = sum0;
        std::vector<float> pw((size_t)nparts * C), pb((size_t)nparts * C), ps((size_t)nparts * C);
        for (int b = 0; b < nparts; b++)
            for (int c = 0; c < C; c++) {
                float tw = 0.0f, tb = 0.0f, ts = 0.0f;
                for (int k = 0; k < W; k++) { /* warp order */
                    float aw = 0.0f, ab = 0.0f, as = 0.0f;
                    for (int row = b * W + k; row < N; row += nparts * W) { /* row order */
                        size_t i = (size_t)row * C + c;
                        float n = (x[i] - mean[row]) * rstd[row];
                        aw = fmaf(n, dout[i], aw);
                        ab += dout[i];
                        as += got16[i];
                    }
                    tw += aw;
                    tb += ab;
                    ts += as;
                }
                pw[(size_t)b * C + c] = tw;
                pb[(size_t)b * C + c] = tb;
                ps[(size_t)b * C + c] = ts;
            }
        for (int c = 0; c < C; c++) { /* dt_cu_parts_finish */
            float t[3] = {0.0f, 0.0f, 0.0f};
            const std::vector<float> *p[3] = {&pw, &pb, &ps};
            for (int j = 0; j < 3; j++)
                for (int ty = 0; ty < 8; ty++) {
                    float s = 0.0f;
                    for (int k = ty; k < nparts; k += 8) s += (*p[j])[(size_t)k * C + c];
                    t[j] += s;
                }
            rw[c] += t[0];
            rb[c] += t[1];
            rs[c] += t[2];
        }
        vf gw = down32(dgw, C), gb = down32(dgb, C), gs = down32(dsum, C);
        CHECKF(!memcmp(gw.data(), rw.data(), sizeof(float) * C), "C %d N %d%s: det dweight differs from the host replay",
               C, N, sh.misalign ? " (wide kernel)" : "");
        CHECKF(!memcmp(gb.data(), rb.data(), sizeof(float) * C), "C %d N %d%s: det dbias differs from the host replay",
               C, N, sh.misalign ? " (wide kernel)" : "");
        CHECKF(!memcmp(gs.data(), rs.data(), sizeof(float) * C), "C %d N %d%s: det sum differs from the host replay",
               C, N, sh.misalign ? " (wide kernel)" : "");
        cudaFree(dx); cudaFree(dg); cudaFree(d16); cudaFree(dmean); cudaFree(drstd); cudaFree(wbuf);
        cudaFree(dgw); cudaFree(dgb); cudaFree(dsum); cudaFree(part);
    }
    dt_op_clear_overrides();
}

static void test_reduce_accuracy(void) {
    const int rows = 5000, cols = 2304;
    vf x = rnd((size_t)rows * cols), ref(cols, 0.0f);
    dt_colsum_det(x.data(), rows, cols, ref.data());
    bf16 *dx = up16(x);
    float *part = dev<float>((size_t)dt_cu_colsum_parts(rows) * cols);
    for (int br = 0; br < 2; br++) {
        variant(br ? "bias_bwd=fast" : "bias_bwd=det");
        float *acc = dev<float>(cols);
        dt_cu_colsum(acc, part, dx, rows, cols, 0, 0);
        CHECK_REL(down32(acc, cols), ref, 1e-5, br ? "colsum fast" : "colsum det");
        cudaFree(acc);
    }
    dt_op_clear_overrides();
    size_t n = 10000003;
    vf y = rnd(n);
    for (size_t i = 0; i < n; i += 97) y[i] = 0.0f;
    double ref2 = dt_sumsq_det(y.data(), n);
    int64_t z = dt_count_zeros(y.data(), n);
    float *dy = up32(y);
    double *out = dev<double>(1), *rp = dev<double>(2 * DT_CU_RED_MAX_BLOCKS);
    long long *dz = dev<long long>(1);
    for (int det = 0; det < 2; det++) {
        dt_cu_reduce(out, dz, rp, dy, n, 1, det, 0);
        double got = 0;
        long long gz = 0;
        cudaMemcpy(&got, out, sizeof got, cudaMemcpyDeviceToHost);
        cudaMemcpy(&gz, dz, sizeof gz, cudaMemcpyDeviceToHost);
        CHECKF(fabs(got - ref2) / ref2 < 1e-9, "sumsq %s: %.17g vs %.17g", det ? "det" : "fast", got, ref2);
        CHECKF(gz == z, "zeros %s: %lld vs %lld", det ? "det" : "fast", gz, (long long)z);
    }
    cudaFree(dx); cudaFree(part); cudaFree(dy); cudaFree(out); cudaFree(rp); cudaFree(dz);
}

static void test_attention_accuracy(void) {
    const int B = 2, T = 128, C = 128, NH = 4, BT = B * T;
    for (int dropping = 0; dropping < 2; dropping++) {
        dt_dropout drop = {dropping ? 0.1f : 0.0f, 77, 5};
        vf qkv = rnd((size_t)BT * 3 * C), dout = rnd((size_t)BT * C);
        vf out((size_t)BT * C), att((size_t)B * NH * T * T), dqkv((size_t)BT * 3 * C);
        dt_attention_fwd(out.data(), att.data(), qkv.data(), B, T, C, NH, &drop, 3);
        dt_attention_bwd_det(dqkv.data(), dout.data(), qkv.data(), att.data(), B, T, C, NH, &drop, 3);
        bf16 *dqkv_in = up16(qkv), *dout16 = dev<bf16>((size_t)BT * C), *datt = dev<bf16>(att.size());
        bf16 *scr = dev<bf16>(dt_cu_attention_scratch(B, T, C, NH, dropping));
        bf16 *dg = up16(dout), *dq = dev<bf16>((size_t)BT * 3 * C);
        CHECK_OK(dt_cu_attention_fwd(g_blas, dout16, datt, dqkv_in, scr, B, T, C, NH, &drop, 3, 0));
        CHECK_REL(down16(datt, att.size()), att, 1e-2, dropping ? "attention probs (dropout)" : "attention probs");
        CHECK_REL(down16(dout16, (size_t)BT * C), out, 2e-2, dropping ? "attention fwd (dropout)" : "attention fwd");
        CHECK_OK(dt_cu_attention_bwd(g_blas, dq, dg, dqkv_in, datt, scr, B, T, C, NH, &drop, 3, 0));
        CHECK_REL(down16(dq, (size_t)BT * 3 * C), dqkv, 3e-2, dropping ? "attention bwd (dropout)" : "attention bwd");
        cudaFree(dqkv_in); cudaFree(dout16); cudaFree(datt); cudaFree(scr); cudaFree(dg); cudaFree(dq);
    }
}

/* The fused qkv bias sums of dt_cu_flash_bwd in their stated order (attention_flash_cuda.cu,
 * flash_cuda.cuh, attention_cuda.h), in fp32 on the host from the bf16 dqkv x (BT x C3) the kernels stored: per
 * 64-row block p and column, warp w's rows 64p + 16w.. as ((v0 + v1) + (v2 + v3)) + ((v4 +
 * v5) + (v6 + v7)), v_g = x[16w + g] + x[16w + g + 8], then the 4 warps in order; then
 * dt_cu_parts_finish: lane ty of 8 adds partials ty, ty + 8, ... in order from 0, the 8
 * lane sums are added in order from 0, and the total is added onto acc0. */
static vf flash_bias_emulated(const vf &x, const vf &acc0, int BT, int C3) {
    int np = BT / 64;
    vf part((size_t)np * C3), out(C3);
    for (int p = 0; p < np; p++)
        for (int c = 0; c < C3; c++) {
            float blk = 0.0f;
            for (int w = 0; w < 4; w++) {
                const float *r = &x[((size_t)p * 64 + w * 16) * C3 + c];
                float v[8];
                for (int g = 0; g < 8; g++) v[g] = r[(size_t)g * C3] + r[(size_t)(g + 8) * C3];
                float ws = ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
                blk = w == 0 ? ws : blk + ws;
            }
            part[(size_t)p * C3 + c] = blk;
        }
    for (int c = 0; c < C3; c++) {
        float t = 0.0f;
        for (int ty = 0; ty < 8; ty++) {
            float s = 0.0f;
            for (int k = ty; k < np; k += 8) s += part[(size_t)k * C3 + c];
            t += s;
        }
        out[c] = acc0[c] + t;
    }
    return out;
}

/* Columns c where |got[c] - ref[c]| > tol (abs[c]) (NaN counts); *worst: the largest
 * |got - ref| / abs over all columns. */
static size_t count_off(const vf &got, const std::vector<double> &ref, const std::vector<double> &abs_, double tol,
                        double *worst) {
    size_t bad = 0;
    *worst = 0;
    for (size_t c = 0; c < got.size(); c++) {
        double r = fabs((double)got[c] - ref[c]) / (abs_[c] > 0 ? abs_[c] : 1e-300);
        if (!(r <= tol)) bad++;
        if (!(r <= *worst)) *worst = r == r ? r : 1e30;
    }
    return bad;
}

/* Flash attention against the CPU on three shapes: 4 key blocks, 16 (the GPT-2 T, every
 * lower-triangular dS tile index of the det dQ pass up to 135), and 3 (T % 128 != 0: the
 * dQ pass's last block pair has one query block). Backward from the GPU's own forward
 * output (rounded as the model stores it), both branches, each of dQ, dK, dV within
 * tolerance. The det backward is run twice with the scratch poisoned differently (NaN
 * bytes, zeros): byte-identical dqkv means every scratch value it reads was written by the
 * same call (a dS tile index off by one would read the poison); a guard after dqkv must
 * keep its bytes (a CTA past the last head would write there).
 * The fused qkv bias gradient (dbias += column sums of the dqkv just stored, from a
 * nonzero start) in each run: bit for bit the stated order (flash_bias_emulated, on the
 * downloaded dqkv: so the sums are of the rounded bf16 values, every partial written once);
 * within 1e-5 of the fp64 column sums, relative to |start| + sum |x| (fp32 chains of at
 * most ~20 adds here: 20 x 2^-24 = 1.2e-6; one 64-row block left out would be ~1e-2); within
 * 2e-5 of dt_cu_colsum on the same dqkv (its own order, same bound); the same bits in
 * the fast branches (attention_bwd and bias_bwd fast) and with the partials poisoned with
 * zeros instead of NaN; no write past the partials; and dqkv with the same bits when no
 * sums are asked for (dbias NULL). */
static void test_flash_accuracy(void) {
    const int shapes[][4] = {{2, 256, 128, 2}, {1, 1024, 128, 2}, {2, 192, 128, 2}}; /* B T C NH */
    for (const auto &sh : shapes) {
        const int B = sh[0], T = sh[1], C = sh[2], NH = sh[3], BT = B * T, C3 = 3 * C;
        CHECK(dt_cu_flash_supported(C, NH, T, NULL));
        vf qkv = rnd((size_t)BT * 3 * C, 2.0f), dout = rnd((size_t)BT * C);
        vf out((size_t)BT * C), att((size_t)B * NH * T * T), dqkv((size_t)BT * 3 * C);
        dt_attention_fwd(out.data(), att.data(), qkv.data(), B, T, C, NH, NULL, 0);
        bf16 *dq_in = up16(qkv), *dout16 = dev<bf16>((size_t)BT * C), *dg = up16(dout);
        float *lse = dev<float>((size_t)B * NH * T);
        size_t nscr = dt_cu_flash_bwd_scratch(B, T, C, NH);
        unsigned char *scr = dev<unsigned char>(nscr);
        dt_cu_flash_fwd(dout16, lse, dq_in, B, T, C, NH, 0);
        vf gout = down16(dout16, (size_t)BT * C);
        CHECK_RELF(gout, out, 1e-2, "flash attention fwd T=%d", T);
        dt_attention_bwd_det(dqkv.data(), dout.data(), qkv.data(), att.data(), B, T, C, NH, NULL, 0);
        const int np = dt_cu_flash_bias_parts(B, T);
        CHECKF(np == BT / 64, "dt_cu_flash_bias_parts(%d, %d) = %d, want %d", B, T, np, BT / 64);
        size_t npf = (size_t)np * C3;
        float *part = dev<float>(2 * npf), *cpart = dev<float>((size_t)dt_cu_colsum_parts(BT) * C3);
        vf b0 = rnd(C3); /* the bias gradient before: the sums are added onto it */
        std::vector<bf16> det_bytes;
        vf det_bias;
        for (int br = 0; br < 4; br++) { /* det (scratch NaN), fast, det (scratch zeros), det without sums */
            const char *bn = br == 1 ? "fast" : "det";
            variant(br == 1 ? "attention_bwd=fast" : "attention_bwd=det");
            variant(br == 1 ? "bias_bwd=fast" : "bias_bwd=det");
            size_t nq = (size_t)BT * 3 * C;
            bf16 *dq = dev<bf16>(2 * nq);
            cudaMemset(dq + nq, 0x5a, sizeof(bf16) * nq);
            cudaMemset(scr, br == 2 ? 0x00 : 0xff, nscr);
            cudaMemset(part, br == 2 ? 0x00 : 0xff, sizeof(float) * npf);
            cudaMemset(part + npf, 0x5a, sizeof(float) * npf);
            float *db = br == 3 ? NULL : up32(b0);
            dt_cu_flash_bwd(dq, db, br == 3 ? NULL : part, scr, dg, dq_in, dout16, lse, B, T, C, NH, 0, 0);
            std::vector<bf16> raw(2 * nq);
            gpu_ok(cudaDeviceSynchronize(), "flash bwd");
            cudaMemcpy(raw.data(), dq, sizeof(bf16) * raw.size(), cudaMemcpyDeviceToHost);
            size_t touched = 0;
            for (size_t i = nq; i < 2 * nq; i++) touched += reinterpret_cast<const uint16_t *>(raw.data())[i] != 0x5a5a;
            CHECKF(touched == 0, "flash bwd T=%d: %zu guard values after dqkv overwritten", T, touched);
            raw.resize(nq);
            vf got(raw.size());
            for (size_t i = 0; i < raw.size(); i++) got[i] = __bfloat162float(raw[i]);
            if (db) {
                vf gb = down32(db, C3), guard = down32(part + npf, npf);
                size_t gt = 0;
                for (float x : guard) gt += memcmp(&x, "\x5a\x5a\x5a\x5a", 4) != 0;
                CHECKF(gt == 0, "flash bwd T=%d: %zu guard values after the bias partials overwritten", T, gt);
                vf em = flash_bias_emulated(got, b0, BT, C3);
                size_t bad = 0;
                int first = -1;
                for (int c = 0; c < C3; c++)
                    if (memcmp(&gb[c], &em[c], sizeof(float))) { bad++; if (first < 0) first = c; }
                CHECKF(bad == 0, "flash bwd %s T=%d: %zu of %d bias sums differ from the stated order (column %d: %a, want %a)",
                       bn, T, bad, C3, first, first < 0 ? 0.0 : (double)gb[first], first < 0 ? 0.0 : (double)em[first]);
                std::vector<double> ref(C3), mag(C3);
                for (int c = 0; c < C3; c++) {
                    double sum = 0, sa = 0;
                    for (int r = 0; r < BT; r++) {
                        sum += got[(size_t)r * C3 + c];
                        sa += fabs((double)got[(size_t)r * C3 + c]);
                    }
                    ref[c] = (double)b0[c] + sum;
                    mag[c] = fabs((double)b0[c]) + sa;
                }
                double worst = 0;
                bad = count_off(gb, ref, mag, 1e-5, &worst);
                CHECKF(bad == 0, "flash bwd %s T=%d: %zu bias sums off the fp64 sums (worst %.3g, tol 1e-5)", bn, T, bad, worst);
                fprintf(stderr, "  flash bwd %s T=%d fused bias vs fp64: worst %.3g (tol 1e-5 of |start| + sum |x|)\n", bn, T, worst);
                float *acc = up32(b0);
                dt_cu_colsum(acc, cpart, dq, BT, C3, 0, 0);
                vf gc = down32(acc, C3);
                std::vector<double> cs(gc.begin(), gc.end());
                bad = count_off(gb, cs, mag, 2e-5, &worst);
                CHECKF(bad == 0, "flash bwd %s T=%d: %zu fused bias sums off dt_cu_colsum's (worst %.3g, tol 2e-5)", bn, T, bad, worst);
                fprintf(stderr, "  flash bwd %s T=%d fused bias vs dt_cu_colsum: worst %.3g (tol 2e-5)\n", bn, T, worst);
                cudaFree(acc);
                cudaFree(db);
                if (br == 0) det_bias = gb;
                else
                    CHECKF(!memcmp(gb.data(), det_bias.data(), sizeof(float) * C3),
                           "flash bwd %s T=%d: bias sums differ from the first det run's (scratch %s)", bn, T,
                           br == 2 ? "zeros" : "NaN");
            }
            cudaFree(dq);
            if (br >= 2) {
                CHECKF(!memcmp(raw.data(), det_bytes.data(), sizeof(bf16) * raw.size()), "flash bwd det T=%d: %s", T,
                       br == 2 ? "dqkv depends on the scratch's prior contents" : "dqkv differs without the bias sums");
                continue;
            }
            if (br == 0) det_bytes = raw;
            for (int pt = 0; pt < 3; pt++) {
                vf a, r;
                for (int t = 0; t < BT; t++)
                    for (int c = 0; c < C; c++) {
                        a.push_back(got[(size_t)t * 3 * C + pt * C + c]);
                        r.push_back(dqkv[(size_t)t * 3 * C + pt * C + c]);
                    }
                CHECK_RELF(a, r, 3e-2, "flash bwd %s %s T=%d", pt == 0 ? "dQ" : pt == 1 ? "dK" : "dV", bn, T);
            }
        }
        dt_op_clear_overrides();
        cudaFree(dq_in); cudaFree(dout16); cudaFree(dg); cudaFree(lse); cudaFree(scr); cudaFree(part); cudaFree(cpart);
    }
}

/* lse[bh, t] = log sum_{s <= t} exp(q_t . k_s / sqrt(64)) in fp64, from the (bf16-valued)
 * inputs; qkv is (B, T, 3C), head size 64. */
static std::vector<double> lse_ref(const vf &qkv, int B, int T, int C, int NH) {
    std::vector<double> r;
    for (int bh = 0; bh < B * NH; bh++)
        for (int t = 0; t < T; t++) {
            const float *q = &qkv[((size_t)(bh / NH) * T + t) * 3 * C + (bh % NH) * 64];
            std::vector<double> sc(t + 1);
            double mx = -INFINITY, sum = 0;
            for (int k = 0; k <= t; k++) {
                const float *kk = &qkv[((size_t)(bh / NH) * T + k) * 3 * C + C + (bh % NH) * 64];
                double d = 0;
                for (int c = 0; c < 64; c++) d += (double)q[c] * kk[c];
                sc[k] = d / 8.0;
                mx = sc[k] > mx ? sc[k] : mx;
            }
            for (int k = 0; k <= t; k++) sum += exp(sc[k] - mx);
            r.push_back(mx + log(sum));
        }
    return r;
}

/* The flash forward's two tilings (128 query rows a block when T % 128 == 0, else 64; the
 * 128-row block skips its last key tile in its first half and masks the diagonal in each
 * half): out against the CPU (rel 1e-2), lse against fp64 (abs 2e-4: fp32 sums of
 * at most T terms <= 1 and a 2^-22 exp2, on lse of a few units), outputs poisoned with NaN
 * first; and the same bits from either tiling: with B = 1 the first 192 rows of T = 256
 * (128-row blocks) are the rows of T = 192 (64-row blocks), out and lse byte-identical. */
static void test_flash_fwd_tilings(void) {
    const int C = 128, NH = 2;
    const int Ts[3] = {64, 192, 256};
    for (int ti = 0; ti < 3; ti++) {
        const int B = 2, T = Ts[ti], BT = B * T;
        CHECK(dt_cu_flash_supported(C, NH, T, NULL));
        vf qkv = rnd((size_t)BT * 3 * C, 2.0f), out((size_t)BT * C), att((size_t)B * NH * T * T);
        dt_attention_fwd(out.data(), att.data(), qkv.data(), B, T, C, NH, NULL, 0);
        bf16 *dq = up16(qkv), *dout = dev<bf16>((size_t)BT * C);
        float *lse = dev<float>((size_t)B * NH * T);
        gpu_ok(cudaMemset(dout, 0xff, sizeof(bf16) * BT * C), "poison");
        gpu_ok(cudaMemset(lse, 0xff, sizeof(float) * B * NH * T), "poison");
        dt_cu_flash_fwd(dout, lse, dq, B, T, C, NH, 0);
        char what[64];
        snprintf(what, sizeof what, "flash fwd T=%d out", T);
        CHECK_REL(down16(dout, (size_t)BT * C), out, 1e-2, what);
        vf gl = down32(lse, (size_t)B * NH * T);
        std::vector<double> rl = lse_ref(qkv, B, T, C, NH);
        double worst = 0;
        for (size_t i = 0; i < rl.size(); i++) {
            double d = fabs((double)gl[i] - rl[i]);
            if (!(d <= worst)) worst = d == d ? d : 1e30; /* NaN never passes */
        }
        CHECKF(worst < 2e-4, "flash fwd T=%d lse: max abs err %.3g vs fp64 (tol 2e-4)", T, worst);
        cudaFree(dq); cudaFree(dout); cudaFree(lse);
    }
    /* tilings agree bit for bit */
    vf qkv = rnd((size_t)256 * 3 * C, 2.0f);
    std::vector<unsigned char> ob[2], lb[2];
    const int Tp[2] = {192, 256};
    for (int k = 0; k < 2; k++) {
        bf16 *dq = up16(vf(qkv.begin(), qkv.begin() + (size_t)Tp[k] * 3 * C)), *dout = dev<bf16>((size_t)Tp[k] * C);
        float *lse = dev<float>((size_t)NH * Tp[k]);
        dt_cu_flash_fwd(dout, lse, dq, 1, Tp[k], C, NH, 0);
        gpu_ok(cudaDeviceSynchronize(), "flash fwd");
        ob[k].resize(sizeof(bf16) * 192 * C);
        gpu_ok(cudaMemcpy(ob[k].data(), dout, ob[k].size(), cudaMemcpyDeviceToHost), "download");
        lb[k].resize(sizeof(float) * NH * 192);
        for (int h = 0; h < NH; h++)
            gpu_ok(cudaMemcpy(&lb[k][sizeof(float) * h * 192], lse + (size_t)h * Tp[k], sizeof(float) * 192,
                              cudaMemcpyDeviceToHost), "download");
        cudaFree(dq); cudaFree(dout); cudaFree(lse);
    }
    CHECKF(ob[0] == ob[1], "flash fwd: out of T=192 (64-row blocks) differs from rows 0..191 of T=256 (128-row blocks)");
    CHECKF(lb[0] == lb[1], "flash fwd: lse of T=192 (64-row blocks) differs from rows 0..191 of T=256 (128-row blocks)");
}

/* The fused cross-entropy of N rows against the CPU op on the same bf16 logits (losses
 * 1e-5, dlogits 1e-2, padded columns exactly 0). Targets include column 0, the last real
 * column V - 1 and the first column of its (partly padded) vector. Then, by bytes: dloss = 0
 * gives the same losses and leaves the logits alone, and the first 48 rows of the run equal
 * a run of those 48 rows alone (a row's bits depend on its own logits only). */
static void check_crossentropy(int N, int V, int Vp) {
    vf logits = rnd((size_t)N * Vp, 4.0f);
    std::vector<int> tg(N);
    for (int i = 0; i < N; i++) tg[i] = (int)(dt_rng_u32(5, 250, 2, 0, i) % V);
    tg[0] = V - 1;
    if (N > 1) tg[1] = 0;
    if (N > 2) tg[2] = (V - 1) & ~7;
    vf losses(N), lse(N);
    dt_crossentropy_fwd(losses.data(), lse.data(), logits.data(), tg.data(), N, V, Vp);
    vf dl = logits;
    dt_crossentropy_bwd(dl.data(), lse.data(), tg.data(), 0.5f, N, V, Vp);
    bf16 *dlog = up16(logits), *dfwd = up16(logits);
    int *dtg = upi(tg);
    float *dloss = dev<float>(N), *dloss0 = dev<float>(N);
    dt_cu_crossentropy(dloss, dlog, dtg, 0.5f, N, V, Vp, 0);
    dt_cu_crossentropy(dloss0, dfwd, dtg, 0.0f, N, V, Vp, 0);
    vf got = down16(dlog, (size_t)N * Vp);
    CHECK_RELF(down32(dloss, N), losses, 1e-5, "crossentropy losses N %d V %d Vp %d", N, V, Vp);
    CHECK_RELF(got, dl, 1e-2, "crossentropy dlogits N %d V %d Vp %d", N, V, Vp);
    size_t pad = 0;
    for (int i = 0; i < N; i++)
        for (int c = V; c < Vp; c++) pad += got[(size_t)i * Vp + c] != 0.0f;
    CHECKF(pad == 0, "crossentropy V %d Vp %d: %zu padded dlogits are not 0", V, Vp, pad);
    CHECKF(bytes_of(dloss0, sizeof(float) * N) == bytes_of(dloss, sizeof(float) * N),
           "crossentropy V %d Vp %d: the losses with dloss 0 differ from those with dloss 0.5", V, Vp);
    vf kept = down16(dfwd, (size_t)N * Vp);
    CHECKF(memcmp(kept.data(), logits.data(), sizeof(float) * kept.size()) == 0,
           "crossentropy V %d Vp %d: dloss 0 changed the logits", V, Vp);
    if (N > 48) {
        const int n = 48;
        bf16 *plog = up16(vf(logits.begin(), logits.begin() + (size_t)n * Vp));
        float *ploss = dev<float>(n);
        dt_cu_crossentropy(ploss, plog, dtg, 0.5f, n, V, Vp, 0);
        CHECKF(bytes_of(plog, sizeof(bf16) * n * Vp) == bytes_of(dlog, sizeof(bf16) * n * Vp) &&
                   bytes_of(ploss, sizeof(float) * n) == bytes_of(dloss, sizeof(float) * n),
               "crossentropy V %d Vp %d: rows 0..47 of %d rows differ from the same rows alone", V, Vp, N);
        cudaFree(plog); cudaFree(ploss);
    }
    cudaFree(dlog); cudaFree(dfwd); cudaFree(dtg); cudaFree(dloss); cudaFree(dloss0);
}

static void test_crossentropy_accuracy(void) {
    check_crossentropy(64, 1000, 1024);      /* 2 stripes: one copy group */
    check_crossentropy(1000, 4101, 4160);    /* V % 8 = 5 and 7 all-padding vectors */
    check_crossentropy(600, 8, 8);           /* one vector a row, one busy thread */
    check_crossentropy(600, 50257, 50304);   /* GPT-2's vocabulary: 13 stripes, 4 copy groups */
    check_crossentropy(3, 100000, 100000);   /* the widest row that fits shared memory (7 copy groups) */
    check_crossentropy(3, 120000, 120000);   /* wider: the two-read kernel */
}

static void test_elementwise(void) {
    size_t n = 1 << 20;
    vf x = rnd(n, 4.0f), g = rnd(n), y(n), dx(n);
    dt_gelu_fwd(y.data(), x.data(), n);
    dt_gelu_bwd(dx.data(), x.data(), g.data(), n);
    bf16 *dxx = up16(x), *dg = up16(g), *dy = dev<bf16>(n), *ddx = dev<bf16>(n);
    dt_cu_gelu_fwd(dy, dxx, n, 0);
    dt_cu_gelu_bwd(ddx, dxx, dg, n, 0);
    CHECK_REL(down16(dy, n), y, 1e-2, "gelu fwd");
    CHECK_REL(down16(ddx, n), dx, 1e-2, "gelu bwd");
    /* dropout masks: the same kept/dropped pattern and factor as the CPU, element by element */
    dt_dropout d = {0.25f, 1234, 17};
    vf ones(n, 1.0f);
    bf16 *d1 = up16(ones);
    dt_cu_dropout_bf16(dy, d1, n, &d, DT_RNG_DROPOUT_HIDDEN, 9, 0);
    vf got = down16(dy, n);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        float f = dt_dropout_factor(&d, DT_RNG_DROPOUT_HIDDEN, 9, i);
        bad += got[i] != __bfloat162float(__float2bfloat16(f));
    }
    CHECKF(bad == 0, "%zu dropout factors differ from the CPU masks", bad);
    /* the bf16 entry (the residual gradient's dropout sites): bf16(g * factor) element by
     * element, g the bf16 values of dg */
    dt_cu_dropout_bf16(dy, dg, n, &d, DT_RNG_DROPOUT_HIDDEN, 9, 0);
    got = down16(dy, n);
    bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += got[i] != __bfloat162float(__float2bfloat16(g[i] * dt_dropout_factor(&d, DT_RNG_DROPOUT_HIDDEN, 9, i)));
    CHECKF(bad == 0, "bf16 dropout: %zu elements differ from bf16(g * the CPU mask's factor)", bad);
    cudaFree(dxx); cudaFree(dg); cudaFree(dy); cudaFree(ddx); cudaFree(d1);
}

/* ---- 2. the model ------------------------------------------------------------------------ */

static void model_grads(dt_gpt_cuda *g, const int *in, const int *tg, vf *grads, double *loss) {
    dt_gpt_cuda_zero_grad(g);
    dt_gpt_cuda_set_mode(g, 1, 3);
    CHECK_OK(dt_gpt_cuda_forward(g, in, tg, 1.0f));
    CHECK_OK(dt_gpt_cuda_backward(g));
    CHECK_OK(dt_gpt_cuda_loss(g, loss));
    CHECK_OK(dt_gpt_cuda_get_grads(g, grads->data()));
}

/* nh 4: head size 32, GEMM attention; nh 2: head size 64, flash attention. epi: the GEMM
 * epilogue fusions asked for (--gemm-epilogues; NULL: the default, GELU), which env.json
 * must show on. Without bgrad the attproj/fcproj bias gradients come from the LayerNorm
 * backwards' fused column sums (checked against the CPU model's like every gradient). */
static void test_model_nh(int nh, const char *epi) {
    dt_gpt_config cfg = {128, 512, 0, 2, nh, 128};
    fprintf(stderr, "  model with %d heads (%s attention), GEMM epilogues %s\n", nh, nh == 2 ? "flash" : "GEMM",
            epi ? epi : "default");
    CHECK_OK(dt_gpt_config_finish(&cfg));
    const int B = 4, T = 128, BT = B * T;
    dt_gpt *h = NULL;
    dt_gpt_cuda_spec spec = {B, T, 0.0f, 0.0f, dt_cuda_options_default()};
    spec.opt.attention = nh == 2 ? DT_ATTN_FLASH : DT_ATTN_AUTO;
    if (epi) spec.opt.epilogues = !strcmp(epi, "off") ? DT_EPI_OFF : !strcmp(epi, "bgrad") ? DT_EPI_BGRAD
                                : !strcmp(epi, "all") ? DT_EPI_ALL : DT_EPI_GELU;
    CHECK_OK(dt_gpt_create(&h, &cfg, B, T, 42));
    if (!h) return;
    /* bf16-representable weights so both models start from the same numbers */
    for (size_t i = 0; i < h->num_params; i++)
        h->param_mem[i] = __bfloat162float(__float2bfloat16(h->param_mem[i]));
    std::vector<int> in(BT), tg(BT);
    for (int i = 0; i < BT; i++) {
        in[i] = (int)(dt_rng_u32(9, 250, 4, 0, i) % cfg.vocab_size);
        tg[i] = (int)(dt_rng_u32(9, 250, 5, 0, i) % cfg.vocab_size);
    }
    double lcpu = 0;
    h->training = 1;
    h->rng_step = 3;
    dt_gpt_zero_grad(h);
    CHECK_OK(dt_gpt_forward(h, in.data(), tg.data(), &lcpu));
    dt_gpt_backward(h, 1.0f);
    dt_gpt_cuda *g = NULL;
    CHECK_OK(dt_gpt_cuda_create(&g, h, &spec));
    if (!g) { dt_gpt_free(h); return; }
    const char *mode = epi ? epi : "gelu";
    int gelu = !strcmp(mode, "gelu") || !strcmp(mode, "all"), bgrad = !strcmp(mode, "bgrad") || !strcmp(mode, "all");
    char want[96];
    snprintf(want, sizeof want, "\"gemm_epilogues\":{\"gelu\":%s,\"bias_grad\":%s", gelu ? "true" : "false",
             bgrad ? "true" : "false");
    CHECKF(strstr(dt_gpt_cuda_describe(g), want) != NULL, "fusions: want %s in %s", want, dt_gpt_cuda_describe(g));
    /* the attproj and fcproj bias gradients from the LayerNorm backwards (no hidden dropout
     * here), unless the weight-gradient GEMMs make them */
    snprintf(want, sizeof want, "\"layernorm_bias_colsum\":\"%s\"",
             bgrad ? "off (bias gradients from the GEMM epilogue)" : "attproj, fcproj");
    CHECKF(strstr(dt_gpt_cuda_describe(g), want) != NULL, "want %s in %s", want, dt_gpt_cuda_describe(g));
    CHECKF(strstr(dt_gpt_cuda_describe(g), nh == 2 ? "\"attention\":\"flash" : "\"attention\":\"gemm\"") != NULL,
           "attention path: %s", dt_gpt_cuda_describe(g));
    vf grads(h->num_params);
    double lgpu = 0;
    model_grads(g, in.data(), tg.data(), &grads, &lgpu);
    CHECKF(fabs(lgpu - lcpu) / lcpu < 5e-3, "model loss gpu %.6f cpu %.6f", lgpu, lcpu);
    fprintf(stderr, "  model loss: gpu %.6f cpu %.6f\n", lgpu, lcpu);
    for (int i = 0; i < DT_NUM_PARAM_TENSORS; i++) {
        const dt_param_desc *d = &h->params[i];
        vf a(grads.begin() + d->offset, grads.begin() + d->offset + d->numel);
        vf r(h->grad_mem + d->offset, h->grad_mem + d->offset + d->numel);
        char what[64];
        snprintf(what, sizeof what, "model grad %s", d->name);
        CHECK_REL(a, r, 5e-2, what);
    }
    /* zero_grad starts the next gradients afresh: in det branches (the fast ones add with
     * atomics in any order) the same batch twice gives the same bytes (the weight matrices'
     * gradients are written, not added to, by the first backward after zero_grad; every
     * other tensor is cleared) */
    for (int op = 0; op < DT_OP_COUNT; op++) {
        char spec[64];
        snprintf(spec, sizeof spec, "%s=det", dt_op_name((dt_op_id)op));
        variant(spec);
    }
    vf first(h->num_params), again(h->num_params);
    double l1 = 0, l2 = 0;
    model_grads(g, in.data(), tg.data(), &first, &l1);
    model_grads(g, in.data(), tg.data(), &again, &l2);
    dt_op_clear_overrides();
    int same = !memcmp(again.data(), first.data(), sizeof(float) * h->num_params);
    for (int i = 0; i < DT_NUM_PARAM_TENSORS && !same; i++) {
        const dt_param_desc *d = &h->params[i];
        if (memcmp(again.data() + d->offset, first.data() + d->offset, sizeof(float) * d->numel))
            fprintf(stderr, "  second backward after zero_grad: %s differs\n", d->name);
    }
    CHECKF(same, "a second zero_grad + forward + backward on the same batch changed the gradients");
    CHECK_REL(again, grads, 5e-2, "model grads, det branches vs default");
    dt_gpt_cuda_free(g);
    dt_gpt_free(h);
}

static void test_model(void) {
    test_model_nh(4, NULL);
    test_model_nh(2, NULL);
    test_model_nh(2, "all");   /* GELU and bias-gradient epilogues */
    test_model_nh(2, "bgrad");
    test_model_nh(4, "off");   /* the separate GELU and column-sum kernels */
}

/* CUDA graphs (--cuda-graphs): a model that records its launches once and replays them
 * gives, step by step, the bytes of one that launches every op itself: the losses, the
 * statistics, and at the end the parameters and AdamW moments, in both branches, across an
 * eval forward between training steps (another signature: launched eagerly while the
 * training graphs stay held) and a batch that changes every step (read afresh from the
 * pinned buffers by each replay). The graph model must have replayed. */
static void test_model_graphs(void) {
    dt_gpt_config cfg = {128, 512, 0, 2, 2, 128};
    CHECK_OK(dt_gpt_config_finish(&cfg));
    const int B = 4, T = 128, BT = B * T, steps = 6;
    dt_gpt *h = NULL;
    CHECK_OK(dt_gpt_create(&h, &cfg, B, T, 42));
    if (!h) return;
    dt_adamw_config ac = {0.9f, 0.95f, 1e-8f, 0.1f, 1.0f};
    for (int det = 0; det <= 1; det++) {
        for (int op = 0; op < DT_OP_COUNT && det; op++) {
            char spec[64];
            snprintf(spec, sizeof spec, "%s=det", dt_op_name((dt_op_id)op));
            variant(spec);
        }
        std::vector<double> rec[2];
        vf par[2], mom[2], vel[2];
        int captures[2] = {0, 0}, replays[2] = {0, 0}, relaxed[2] = {0, 0};
        for (int k = 0; k < 2; k++) {
            dt_gpt_cuda_spec spec = {B, T, 0.0f, 0.0f, dt_cuda_options_default()};
            spec.opt.graphs = k == 0;
            dt_gpt_cuda *g = NULL;
            CHECK_OK(dt_gpt_cuda_create(&g, h, &spec));
            if (!g) break;
            CHECKF(strstr(dt_gpt_cuda_describe(g), k == 0 ? "\"cuda_graphs\":\"on" : "\"cuda_graphs\":\"off\""),
                   "cuda_graphs not as set: %s", dt_gpt_cuda_describe(g));
            std::vector<int> in(BT), tg(BT);
            for (int step = 1; step <= steps; step++) {
                for (int i = 0; i < BT; i++) {
                    in[i] = (int)(dt_rng_u32(9, 251, (uint32_t)step, 0, i) % cfg.vocab_size);
                    tg[i] = (int)(dt_rng_u32(9, 251, (uint32_t)step, 1, i) % cfg.vocab_size);
                }
                dt_grad_stats gs;
                double loss = 0;
                double pn_host = -1.0; /* step 4: the parameter norm from the parameters before it */
                if (step == 4) {
                    vf before(h->num_params);
                    CHECK_OK(dt_gpt_cuda_get_params(g, before.data()));
                    pn_host = 0.0;
                    for (size_t i = 0; i < h->num_params; i++) pn_host += (double)before[i] * (double)before[i];
                    pn_host = sqrt(pn_host);
                }
                dt_gpt_cuda_zero_grad(g);
                dt_gpt_cuda_set_mode(g, 1, (uint32_t)step);
                CHECK_OK(dt_gpt_cuda_forward(g, in.data(), tg.data(), 1.0f));
                CHECK_OK(dt_gpt_cuda_backward(g));
                CHECK_OK(dt_gpt_cuda_step(g, &ac, 1e-3f, step, &gs));
                CHECK_OK(dt_gpt_cuda_loss(g, &loss));
                rec[k].push_back(loss);
                rec[k].push_back(gs.grad_norm);
                rec[k].push_back(gs.param_norm);
                /* the step reports the norm of the parameters it started from (summed by the
                 * previous update as it wrote them): fp64 sums in another order agree to ~1e-15 */
                if (pn_host >= 0.0)
                    CHECKF(fabs(gs.param_norm - pn_host) <= 1e-12 * pn_host,
                           "k %d: step 4 parameter norm %.17g, fp64 norm of the parameters before it %.17g", k,
                           gs.param_norm, pn_host);
                if (step == 3) { /* an eval forward between training steps */
                    dt_gpt_cuda_set_mode(g, 0, (uint32_t)step);
                    CHECK_OK(dt_gpt_cuda_forward(g, tg.data(), in.data(), 0.0f));
                    CHECK_OK(dt_gpt_cuda_loss(g, &loss));
                    rec[k].push_back(loss);
                }
            }
            par[k].resize(h->num_params);
            mom[k].resize(h->num_params);
            vel[k].resize(h->num_params);
            CHECK_OK(dt_gpt_cuda_get_params(g, par[k].data()));
            CHECK_OK(dt_gpt_cuda_get_opt_state(g, mom[k].data(), vel[k].data()));
            dt_gpt_cuda_graph_counts(g, &captures[k], &replays[k], &relaxed[k]);
            dt_gpt_cuda_free(g);
        }
        const char *br = det ? "det" : "fast";
        fprintf(stderr, "  %s: graphs recorded %d, replayed %d, cuBLASLt memsets moved off the path %d\n", br,
                captures[0], replays[0], relaxed[0]);
        /* zero_grad, forward and backward: eager at step 1, recorded at 2, replayed from 3 */
        CHECKF(captures[0] == 3 && replays[0] == 3 * (steps - 2), "%s: graphs recorded %d, replayed %d (want 3, %d)",
               br, captures[0], replays[0], 3 * (steps - 2));
        CHECKF(captures[1] == 0 && replays[1] == 0, "%s: --cuda-graphs off recorded %d, replayed %d graphs", br,
               captures[1], replays[1]);
        if (!det) { /* the fast branch adds with atomics: only the recording must be equivalent */
            CHECK_REL(par[0], par[1], 1e-2, "fast branch: parameters, graphs vs launches");
            continue;
        }
        CHECKF(rec[0].size() == rec[1].size() && !memcmp(rec[0].data(), rec[1].data(), sizeof(double) * rec[0].size()),
               "det: losses / norms differ between graph replays and launches");
        for (size_t i = 0; i < rec[0].size() && i < rec[1].size(); i++)
            if (memcmp(&rec[0][i], &rec[1][i], sizeof(double)))
                fprintf(stderr, "  record %zu: graphs %.17g, launches %.17g\n", i, rec[0][i], rec[1][i]);
        CHECKF(!memcmp(par[0].data(), par[1].data(), sizeof(float) * h->num_params),
               "det: parameters differ between graph replays and launches");
        CHECKF(!memcmp(mom[0].data(), mom[1].data(), sizeof(float) * h->num_params) &&
                   !memcmp(vel[0].data(), vel[1].data(), sizeof(float) * h->num_params),
               "det: AdamW moments differ between graph replays and launches");
    }
    dt_op_clear_overrides();
    dt_gpt_free(h);
}

/* DT_GPU_OPS=substring runs only the tests whose function name holds it (debugging). */
#define RUN_SEL(t) do { const char *o_ = getenv("DT_GPU_OPS"); if (!o_ || strstr(#t, o_)) RUN(t); } while (0)

int main(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
        fprintf(stderr, "test_gpu_ops: no CUDA device\n");
        return 1;
    }
    CHECK_OK(dt_cu_blas_create(&g_blas));
    RUN_SEL(test_gemm_accuracy);
    RUN_SEL(test_gemm_table_accuracy);
    RUN_SEL(test_gelu_epilogue_form);
    RUN_SEL(test_gemm_epilogues);
    RUN_SEL(test_encoder_accuracy);
    RUN_SEL(test_layernorm_accuracy);
    RUN_SEL(test_layernorm_colsum);
    RUN_SEL(test_layernorm_det_order);
    RUN_SEL(test_reduce_accuracy);
    RUN_SEL(test_attention_accuracy);
    RUN_SEL(test_flash_accuracy);
    RUN_SEL(test_flash_fwd_tilings);
    RUN_SEL(test_crossentropy_accuracy);
    RUN_SEL(test_elementwise);
    RUN_SEL(test_model);
    RUN_SEL(test_model_graphs);
    cudaError_t e = cudaDeviceSynchronize();
    CHECKF(e == cudaSuccess, "CUDA error at the end: %s", cudaGetErrorString(e));
    return dt_test_report();
}
