/* The MoE kernels on the GPU (src/ops/moe/cuda/: moe_route_cuda.cu, moe_gemm_cuda.cu,
 * moe_combine_cuda.cu; header moe_cuda.h; host plan moe_cuda_plan.h), run by
 * tests/gpu/run_gpu_tests.sh:
 *  1. replays through the kernel harness's CUDA backend (kernels/harness.h), both branches,
 *     side-stream GEMMs contending: every op det bit-exact x3 at N = 16384 tokens, C = 768,
 *     F = 3072, E = 8, K = 2 with 60% of the tokens sent to one expert (and a capacity case,
 *     one expert taking every token with 7 empty groups, K = 4); the fast branches'
 *     negative controls (routing rows by atomics, combine scatter with K = 4, dprob, grouped
 *     wgrad, each at a size where all the blocks adding into one slot are resident at once)
 *     must differ in some replay; the same fast paths at N = 16384 and the combine with
 *     K = 2 are reported, not failed (two addends into zero commute exactly, so its atomics
 *     cannot disagree);
 *  2. the routing map equals moe_cuda_plan.h's host counting sort exactly (rows, offsets, kept
 *     counts, dropped);
 *  3. accuracy of the whole MoE block, forward and backward, against an fp64 host reference
 *     on the same bf16-rounded inputs and the same top-K choice, by ||gpu - ref|| / ||ref||:
 *     bf16 outputs and gradients through bf16 intermediates 2e-2, probabilities 1e-5
 *     absolute, the aux loss 1e-5 relative; ties in the router go to the lower expert index.
 * The workspace is poisoned with 0xff bytes (NaN, -1) before every run, so a kernel reading
 * something no kernel wrote shows up as NaN or a bad row. */
#include "kernels/harness.h"
#include "kernels/harness_cuda.h"
#include "ops/moe/cuda/moe_cuda.h"

extern "C" {
#include "core/determinism.h"
#include "core/philox.h"
#include "dt_test.h"
}

#include <initializer_list>
#include <vector>

enum { FAST_EXACT, FAST_RACES, FAST_MAY };
enum { DET_REPLAYS = 3, CONTROL_REPLAYS = 20, CONTENTION = 8 };
enum { OP_ROUTER, OP_ROUTE, OP_EXPERTS_FWD, OP_COMBINE, OP_DPROB, OP_WGRAD, OP_BLOCK };
/* routings: through the router from skewed inputs; host-made (share% of the tokens choose
 * expert 0 first); every token's choice k is expert 3 + k (one expert takes every token) */
enum { R_ROUTER, R_HOST_SKEW, R_HOST_ALL };

typedef struct mcase {
    const char *op, *config;
    int kind, N, C, F, E, K;
    float capf;
    int routing, share, fast;
    dt_moe_dims d;
} mcase;

static void *g_ws;        /* the workspace slab, reused by every run (poisoned first) */
static size_t g_ws_bytes;
static dt_cu_moe_ws_layout g_lay;

static void ws_reserve(size_t bytes) {
    if (bytes <= g_ws_bytes) return;
    if (g_ws) cudaFree(g_ws);
    g_ws = NULL;
    if (cudaMalloc(&g_ws, bytes) != cudaSuccess) {
        fprintf(stderr, "test_gpu_moe: cannot allocate a %zu-byte workspace\n", bytes);
        exit(2);
    }
    g_ws_bytes = bytes;
}

static uint32_t hash32(uint32_t x) {
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}
static void host_routing(int *tope, const mcase *c) {
    for (int t = 0; t < c->N; t++) {
        int used[DT_CU_MOE_MAX_EXPERTS] = {0};
        for (int k = 0; k < c->K; k++) {
            int e = c->routing == R_HOST_ALL ? (3 + k) % c->E
                    : k == 0 && (int)(hash32(0x5eedu ^ (uint32_t)t) % 100u) < c->share
                        ? 0
                        : (int)(hash32(0x77u * 31u + (uint32_t)(t * c->K + k)) % (uint32_t)c->E);
            while (used[e]) e = (e + 1) % c->E;
            used[e] = 1;
            tope[t * c->K + k] = e;
        }
    }
}

/* Skewed inputs for the router: x = noise, plus 0.5 v on share% of the tokens; Wr = noise
 * with row 0 = 0.05 v (v a fixed +-1 vector), so those tokens send their first choice to
 * expert 0; every 97th token is all zeros (E equal logits: a tie, broken by index). */
static void router_inputs(float *x, float *wr, int N, int C, int E, int share) {
    for (int c = 0; c < C; c++) {
        float v = hash32(0xabcu + (uint32_t)c) & 1 ? 1.0f : -1.0f;
        for (int e = 0; e < E; e++)
            wr[e * C + c] = e == 0 ? 0.05f * v : 0.02f * (2.0f * (float)dt_kh_uniform(91, (uint64_t)(e * C + c)) - 1.0f);
        for (int t = 0; t < N; t++) {
            float u = 2.0f * (float)dt_kh_uniform(92, (uint64_t)t * C + c) - 1.0f;
            int skew = (int)(hash32(0x5eedu ^ (uint32_t)t) % 100u) < share;
            x[(size_t)t * C + c] = t % 97 == 5 ? 0.0f : dt_kh_from_bf16(dt_kh_to_bf16(u + (skew ? 0.5f * v : 0.0f)));
        }
    }
}

static dt_kview *add(dt_kset *s, const char *name, dt_kh_dtype dt, dt_kh_role role, std::initializer_list<int64_t> shape) {
    int64_t sh[DT_KH_MAXDIM];
    int nd = 0;
    for (int64_t x : shape) sh[nd++] = x;
    return dt_kv_role(dt_kset_add(s, name, dt, nd, sh, NULL, 0), role);
}
static void fill_bf16(dt_kview *v, uint64_t seed, float scale) { dt_kv_fill(v, seed, -scale, scale); }

static void setup(dt_kset *s, mcase *c) {
    CHECK_OK(dt_cu_moe_dims_make(c->N, c->C, c->F, c->E, c->K, c->capf, &c->d));
    const dt_moe_dims *d = &c->d;
    int64_t N = d->N, C = d->C, F = d->F, E = d->E, K = d->K, R = (int64_t)dt_cu_moe_max_rows(d);
    dt_cu_moe_ws_plan(d, &g_lay);
    ws_reserve(g_lay.total);
    if (c->routing == R_ROUTER || c->kind == OP_ROUTER || c->kind == OP_BLOCK) {
        dt_kview *x = add(s, "x", DT_KH_BF16, DT_KH_IN, {N, C}), *wr = add(s, "wr", DT_KH_F32, DT_KH_IN, {E, C});
        std::vector<float> xf((size_t)(N * C));
        router_inputs(xf.data(), dt_kv_f32(wr), (int)N, (int)C, (int)E, c->share);
        for (size_t i = 0; i < xf.size(); i++) dt_kv_bf16(x)[i] = dt_kh_to_bf16(xf[i]);
    } else {
        host_routing(dt_kv_i32(add(s, "tope", DT_KH_I32, DT_KH_IN, {N, K})), c);
    }
    switch (c->kind) {
    case OP_ROUTER:
        add(s, "probs", DT_KH_F32, DT_KH_OUT, {N, E});
        add(s, "tope_out", DT_KH_I32, DT_KH_OUT, {N, K});
        add(s, "topg", DT_KH_F32, DT_KH_OUT, {N, K});
        break;
    case OP_ROUTE:
        add(s, "rowof", DT_KH_I32, DT_KH_OUT, {N, K});
        add(s, "src", DT_KH_I32, DT_KH_OUT, {R});
        add(s, "meta", DT_KH_I32, DT_KH_OUT, {DT_CU_MOE_META - DT_CU_MOE_MAX_EXPERTS}); /* without the fast counters */
        break;
    case OP_EXPERTS_FWD:
        fill_bf16(add(s, "x", DT_KH_BF16, DT_KH_IN, {N, C}), 11, 1.0f);
        fill_bf16(add(s, "w1", DT_KH_BF16, DT_KH_IN, {E, F, C}), 12, 0.05f);
        fill_bf16(add(s, "b1", DT_KH_BF16, DT_KH_IN, {E, F}), 13, 0.1f);
        fill_bf16(add(s, "w2", DT_KH_BF16, DT_KH_IN, {E, C, F}), 14, 0.03f);
        fill_bf16(add(s, "b2", DT_KH_BF16, DT_KH_IN, {E, C}), 15, 0.1f);
        add(s, "h", DT_KH_BF16, DT_KH_OUT, {R, F});
        add(s, "a", DT_KH_BF16, DT_KH_OUT, {R, F});
        add(s, "yp", DT_KH_BF16, DT_KH_OUT, {R, C});
        break;
    case OP_COMBINE:
    case OP_DPROB:
        dt_kv_fill(add(s, "topg", DT_KH_F32, DT_KH_IN, {N, K}), 16, 0.0, 1.0);
        fill_bf16(add(s, "yp_in", DT_KH_BF16, DT_KH_IN, {R, C}), 17, 1.0f);
        if (c->kind == OP_COMBINE) {
            add(s, "out", DT_KH_BF16, DT_KH_OUT, {N, C});
        } else {
            fill_bf16(add(s, "dout", DT_KH_BF16, DT_KH_IN, {N, C}), 18, 1.0f);
            add(s, "dyp", DT_KH_BF16, DT_KH_OUT, {R, C});
            add(s, "dg", DT_KH_F32, DT_KH_OUT, {N, K});
        }
        break;
    case OP_WGRAD:
        fill_bf16(add(s, "ga", DT_KH_BF16, DT_KH_IN, {R, C}), 19, 1.0f);
        fill_bf16(add(s, "gb", DT_KH_BF16, DT_KH_IN, {R, F}), 20, 1.0f);
        dt_kv_fill(add(s, "dw", DT_KH_F32, DT_KH_IN, {E, C, F}), 21, -1.0, 1.0); /* added to */
        break;
    case OP_BLOCK:
        fill_bf16(add(s, "w1", DT_KH_BF16, DT_KH_IN, {E, F, C}), 12, 0.05f);
        fill_bf16(add(s, "b1", DT_KH_BF16, DT_KH_IN, {E, F}), 13, 0.1f);
        fill_bf16(add(s, "w2", DT_KH_BF16, DT_KH_IN, {E, C, F}), 14, 0.03f);
        fill_bf16(add(s, "b2", DT_KH_BF16, DT_KH_IN, {E, C}), 15, 0.1f);
        fill_bf16(add(s, "dout", DT_KH_BF16, DT_KH_IN, {N, C}), 18, 1.0f);
        add(s, "out", DT_KH_BF16, DT_KH_OUT, {N, C});
        add(s, "dx", DT_KH_BF16, DT_KH_OUT, {N, C});
        add(s, "aux", DT_KH_F64, DT_KH_OUT, {2});
        add(s, "gwr", DT_KH_F32, DT_KH_IN, {E, C}); /* gradients added to zeros */
        add(s, "gw1", DT_KH_F32, DT_KH_IN, {E, F, C});
        add(s, "gb1", DT_KH_F32, DT_KH_IN, {E, F});
        add(s, "gw2", DT_KH_F32, DT_KH_IN, {E, C, F});
        add(s, "gb2", DT_KH_F32, DT_KH_IN, {E, C});
        break;
    }
}

#define VF(s, n) dt_kv_f32(dt_kset_get(s, n))
#define VI(s, n) dt_kv_i32(dt_kset_get(s, n))
#define VH(s, n) ((bf16 *)dt_kv_bf16(dt_kset_get(s, n)))
static void d2d(void *dst, const void *src, size_t bytes) { cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, 0); }

#define ROWOF_UNSET 0x7f7f7f7f /* the bytes 0x7f: no row index or -1 */
__global__ void rowof_out(int *out, const int *rowof, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = rowof[i] == ROWOF_UNSET ? -1 : rowof[i] + 1;
}

static void run(dt_kset *s, const void *ctx, dt_kh_backend be) {
    (void)be;
    const mcase *c = (const mcase *)ctx;
    const dt_moe_dims *d = &c->d;
    int det = dt_det();
    size_t N = (size_t)d->N, C = (size_t)d->C, F = (size_t)d->F, E = (size_t)d->E, K = (size_t)d->K;
    size_t R = dt_cu_moe_max_rows(d);
    dt_cu_moe_ws w;
    dt_cu_moe_ws_bind(&w, g_ws, &g_lay);
    cudaMemsetAsync(g_ws, 0xff, g_lay.total, 0);
    cudaMemsetAsync(w.src, 0, sizeof(int) * R, 0); /* rows past the kept ones stay 0 */
    if (dt_kset_get(s, "tope")) d2d(w.tope, VI(s, "tope"), sizeof(int) * N * K);
    if (dt_kset_get(s, "wr") && c->kind != OP_BLOCK) dt_cu_moe_router_fwd(&w, VH(s, "x"), VF(s, "wr"), d, 0);
    switch (c->kind) {
    case OP_ROUTER:
        d2d(VF(s, "probs"), w.probs, sizeof(float) * N * E);
        d2d(VI(s, "tope_out"), w.tope, sizeof(int) * N * K);
        d2d(VF(s, "topg"), w.topg, sizeof(float) * N * K);
        return;
    case OP_ROUTE:
        /* a dropped assignment's rowof is -1, the harness's poison: the workspace's rowof
         * starts at ROWOF_UNSET instead and the output holds rowof + 1 (dropped 0), so an
         * element the kernels never wrote still reads as poison */
        cudaMemsetAsync(w.rowof, 0x7f, sizeof(int) * N * K, 0);
        dt_cu_moe_route(&w, d, det, 0);
        rowof_out<<<(unsigned)((N * K + 255) / 256), 256>>>(VI(s, "rowof"), w.rowof, N * K);
        d2d(VI(s, "src"), w.src, sizeof(int) * R);
        d2d(VI(s, "meta"), w.meta, sizeof(int) * (DT_CU_MOE_META - DT_CU_MOE_MAX_EXPERTS));
        return;
    case OP_BLOCK: {
        dt_cu_moe_params p = {VF(s, "wr"), VH(s, "w1"), VH(s, "b1"), VH(s, "w2"), VH(s, "b2")};
        dt_cu_moe_grads g = {VF(s, "gwr"), VF(s, "gw1"), VF(s, "gb1"), VF(s, "gw2"), VF(s, "gb2")};
        dt_cu_moe_forward(VH(s, "out"), &w, VH(s, "x"), &p, 0.01f, d, 0);
        dt_cu_moe_backward(VH(s, "dx"), &w, VH(s, "dout"), VH(s, "x"), &p, &g, 0.01f, d, 0);
        d2d(dt_kv_f64(dt_kset_get(s, "aux")), w.aux, 2 * sizeof(double));
        return;
    }
    default:
        break;
    }
    /* the ops below read a det routing map: they test their own branch, not the route's */
    dt_cu_moe_route(&w, d, 1, 0);
    switch (c->kind) {
    case OP_EXPERTS_FWD: {
        dt_cu_moe_params p = {NULL, VH(s, "w1"), VH(s, "b1"), VH(s, "w2"), VH(s, "b2")};
        dt_cu_moe_dispatch(&w, VH(s, "x"), d, 0);
        dt_cu_moe_experts_fwd(&w, &p, d, 0);
        d2d(VH(s, "h"), w.h, 2 * R * F);
        d2d(VH(s, "a"), w.a, 2 * R * F);
        d2d(VH(s, "yp"), w.yp, 2 * R * C);
        break;
    }
    case OP_COMBINE:
    case OP_DPROB:
        d2d(w.topg, VF(s, "topg"), sizeof(float) * N * K);
        d2d(w.yp, VH(s, "yp_in"), 2 * R * C);
        if (c->kind == OP_COMBINE) {
            dt_cu_moe_combine_fwd(VH(s, "out"), &w, d, det, 0);
        } else {
            dt_cu_moe_combine_bwd(&w, VH(s, "dout"), d, det, 0);
            d2d(VH(s, "dyp"), w.dyp, 2 * R * C);
            d2d(VF(s, "dg"), w.dg, sizeof(float) * N * K);
        }
        break;
    case OP_WGRAD:
        dt_cu_moe_gg_wgrad(VF(s, "dw"), VH(s, "ga"), VH(s, "gb"), (int)C, (int)F, &w, d, det, 0);
        break;
    }
}

#define CASE(op, cfg, kind, N, C, F, E, K, capf, routing, share, fast) \
    {op, cfg, kind, N, C, F, E, K, capf, routing, share, fast, {0, 0, 0, 0, 0, 0}}
static mcase cases[] = {
    CASE("moe_router", "N=16384 C=768 E=8 K=2, 60% skewed to expert 0, ties", OP_ROUTER, 16384, 768, 3072, 8, 2, 0.0f,
         R_ROUTER, 60, FAST_EXACT),
    CASE("moe_route", "N=16384 E=8 K=2, 60% to expert 0 (fast: rows by atomics)", OP_ROUTE, 16384, 768, 3072, 8, 2,
         0.0f, R_HOST_SKEW, 60, FAST_RACES),
    CASE("moe_route", "N=16384 E=8 K=2, 60% to expert 0, capacity 1.0 (drops; fast = det placement)", OP_ROUTE, 16384,
         768, 3072, 8, 2, 1.0f, R_HOST_SKEW, 60, FAST_EXACT),
    CASE("moe_experts_fwd", "dispatch + grouped GEMMs N=16384 C=768 F=3072 E=8 K=2, 60% to expert 0", OP_EXPERTS_FWD,
         16384, 768, 3072, 8, 2, 0.0f, R_HOST_SKEW, 60, FAST_EXACT),
    CASE("moe_experts_fwd", "K=1, every token to expert 3, 7 empty groups, N=4000", OP_EXPERTS_FWD, 4000, 768, 3072, 8,
         1, 0.0f, R_HOST_ALL, 0, FAST_EXACT),
    CASE("moe_combine", "N=16384 C=768 E=8 K=2, 60% to expert 0 (fast: 2 addends commute)", OP_COMBINE, 16384, 768,
         3072, 8, 2, 0.0f, R_HOST_SKEW, 60, FAST_MAY),
    /* At N = 16384 the adders of one slot sit thousands of blocks apart in the grid (a
     * token's rows in different expert groups; dprob's channel tiles and wgrad's row parts
     * along the grid's outer dimension), so they run in launch order and the fast paths
     * came out reproducible on the H200: reported, not failed. The negative controls below
     * are sized so that every block adding into one slot is resident at once. */
    CASE("moe_combine", "N=16384 C=768 E=8 K=4, 60% to expert 0 (fast: atomic scatter)", OP_COMBINE, 16384, 768, 3072,
         8, 4, 0.0f, R_HOST_SKEW, 60, FAST_MAY),
    CASE("moe_combine", "N=1024 C=768 E=8 K=4, 60% to expert 0 (fast: atomic scatter, every row resident)", OP_COMBINE,
         1024, 768, 3072, 8, 4, 0.0f, R_HOST_SKEW, 60, FAST_RACES),
    CASE("moe_dprob", "N=16384 C=768 E=8 K=2, 6 channel tiles a slot", OP_DPROB, 16384, 768, 3072, 8, 2, 0.0f,
         R_HOST_SKEW, 60, FAST_MAY),
    CASE("moe_dprob", "N=2048 C=2048 E=8 K=2, 16 channel tiles a slot, every block resident", OP_DPROB, 2048, 2048,
         8192, 8, 2, 0.0f, R_HOST_SKEW, 60, FAST_RACES),
    CASE("moe_wgrad", "dW2 (8, 768, 3072) += dYp^T A, N=16384 K=2, 60% to expert 0", OP_WGRAD, 16384, 768, 3072, 8, 2,
         0.0f, R_HOST_SKEW, 60, FAST_MAY),
    CASE("moe_wgrad", "dW2 (4, 256, 1024) += dYp^T A, N=4096 K=2, 60% to expert 0, every block resident", OP_WGRAD,
         4096, 256, 1024, 4, 2, 0.0f, R_HOST_SKEW, 60, FAST_RACES),
    CASE("moe_wgrad", "K=1, every token to expert 3, 7 empty groups", OP_WGRAD, 4000, 768, 3072, 8, 1, 0.0f, R_HOST_ALL,
         0, FAST_RACES),
    CASE("moe_block", "forward + backward N=16384 C=768 F=3072 E=8 K=2, router skewed 60%", OP_BLOCK, 16384, 768, 3072,
         8, 2, 0.0f, R_ROUTER, 60, FAST_MAY),
    CASE("moe_block", "forward + backward N=8192 C=768 E=8 K=2, capacity 1.0 (drops)", OP_BLOCK, 8192, 768, 3072, 8, 2,
         1.0f, R_ROUTER, 60, FAST_MAY),
};

static int g_det_ok, g_controls, g_controls_ok;

static void run_case(mcase *c) {
    dt_kset in;
    memset(&in, 0, sizeof in);
    setup(&in, c);
    dt_kh_opts o;
    memset(&o, 0, sizeof o);
    o.replays = DET_REPLAYS;
    o.det = 1;
    o.backend = DT_KH_CUDA;
    o.contention = CONTENTION;
    dt_kh_result r;
    int before = dt_test_failed;
    int same = dt_kh_replay(c->op, c->config, run, c, &in, &o, &r, NULL);
    CHECKF(same, "%s [%s] det: %d of %d replays differ, %d outputs left unwritten", c->op, c->config,
           r.differing_replays, r.replays, r.unwritten);
    g_det_ok += dt_test_failed == before;
    char fast[160];
    o.det = 0;
    o.quiet = c->fast != FAST_EXACT;
    if (c->fast == FAST_RACES) {
        o.replays = CONTROL_REPLAYS;
        o.stop_at_first_diff = 1;
    }
    int fsame = dt_kh_replay(c->op, c->config, run, c, &in, &o, &r, NULL);
    CHECKF(r.unwritten == 0, "%s [%s] fast: %d outputs left unwritten", c->op, c->config, r.unwritten);
    if (c->fast == FAST_EXACT) {
        CHECKF(fsame, "%s [%s] fast: %d of %d replays differ", c->op, c->config, r.differing_replays, r.replays);
        snprintf(fast, sizeof fast, "fast bit-exact x%d", r.replays);
    } else if (c->fast == FAST_RACES) {
        g_controls++;
        g_controls_ok += r.differing_replays > 0;
        CHECKF(r.differing_replays > 0, "%s [%s] fast: negative control saw no difference in %d replays", c->op,
               c->config, r.replays);
        snprintf(fast, sizeof fast, r.differing_replays ? "fast differs at replay %d (negative control ok)"
                                                        : "fast identical in %d replays (negative control FAILED)",
                 r.differing_replays ? r.replays - 1 : r.replays);
    } else {
        snprintf(fast, sizeof fast, "fast %s (%d of %d replays differ; may race, not failed)",
                 r.differing_replays ? "differs" : "bit-exact", r.differing_replays, r.replays);
    }
    fprintf(stderr, "%s cuda %s [%s]: det bit-exact x%d; %s\n", dt_test_failed == before ? "ok  " : "FAIL", c->op,
            c->config, DET_REPLAYS, fast);
    dt_kset_free(&in);
}

static void test_replays(void) {
    const char *only = getenv("DT_GPU_CASES"); /* substring of op names to run (debugging) */
    int n = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (only && !strstr(cases[i].op, only)) continue;
        run_case(&cases[i]);
        n++;
    }
    fprintf(stderr, "moe replays: %d cases, det bit-exact %d/%d, negative controls differed %d/%d\n", n, g_det_ok, n,
            g_controls_ok, g_controls);
}

/* ---- accuracy against fp64 --------------------------------------------------------------------- */
template <typename T> static T *dput(const std::vector<T> &h) {
    T *p = NULL;
    if (cudaMalloc(&p, sizeof(T) * (h.size() ? h.size() : 1)) != cudaSuccess) exit(2);
    cudaMemcpy(p, h.data(), sizeof(T) * h.size(), cudaMemcpyHostToDevice);
    return p;
}
template <typename T> static std::vector<T> dget(const T *p, size_t n) {
    std::vector<T> h(n);
    cudaDeviceSynchronize();
    cudaMemcpy(h.data(), p, sizeof(T) * n, cudaMemcpyDeviceToHost);
    return h;
}
static std::vector<float> f_of(const std::vector<uint16_t> &h) {
    std::vector<float> v(h.size());
    for (size_t i = 0; i < h.size(); i++) v[i] = dt_kh_from_bf16(h[i]);
    return v;
}
static std::vector<uint16_t> rnd16(size_t n, uint64_t seed, float scale) {
    std::vector<uint16_t> v(n);
    for (size_t i = 0; i < n; i++) v[i] = dt_kh_to_bf16((float)((2.0 * dt_kh_uniform(seed, i) - 1.0) * scale));
    return v;
}
static double rel(const std::vector<float> &a, const std::vector<double> &ref) {
    double num = 0, den = 0;
    for (size_t i = 0; i < a.size(); i++) {
        if (a[i] != a[i]) return 1e30;
        num += ((double)a[i] - ref[i]) * ((double)a[i] - ref[i]);
        den += ref[i] * ref[i];
    }
    return sqrt(num / (den > 0 ? den : 1e-300));
}
#define CHECK_REL(a, ref, tol, what) do { double e_ = rel(a, ref); \
    CHECKF(e_ < (tol), "%s: rel err %.3g >= %.3g", what, e_, (double)(tol)); \
    fprintf(stderr, "  %-40s rel err %.3g (tol %.0e)\n", what, e_, (double)(tol)); } while (0)

static double gelu64(double x) { return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }
static double dgelu64(double x) {
    double u = 0.7978845608028654 * (x + 0.044715 * x * x * x), th = tanh(u);
    return 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * 0.7978845608028654 * (1.0 + 3.0 * 0.044715 * x * x);
}

static void accuracy(int N, int C, int F, int E, int K, float capf, int share, const char *what) {
    fprintf(stderr, " accuracy: %s\n", what);
    dt_moe_dims d;
    CHECK_OK(dt_cu_moe_dims_make(N, C, F, E, K, capf, &d));
    dt_cu_moe_ws_layout lay;
    dt_cu_moe_ws_plan(&d, &lay);
    ws_reserve(lay.total);
    dt_cu_moe_ws w;
    dt_cu_moe_ws_bind(&w, g_ws, &lay);
    cudaMemset(g_ws, 0xff, lay.total);
    std::vector<float> xf((size_t)N * C), wr((size_t)E * C);
    router_inputs(xf.data(), wr.data(), N, C, E, share);
    std::vector<uint16_t> x16(xf.size());
    for (size_t i = 0; i < xf.size(); i++) x16[i] = dt_kh_to_bf16(xf[i]);
    std::vector<uint16_t> w1 = rnd16((size_t)E * F * C, 12, 0.05f), b1 = rnd16((size_t)E * F, 13, 0.1f),
                          w2 = rnd16((size_t)E * C * F, 14, 0.03f), b2 = rnd16((size_t)E * C, 15, 0.1f),
                          dout = rnd16((size_t)N * C, 18, 1.0f);
    float *dwr = dput(wr);
    uint16_t *dx16 = dput(x16), *dw1 = dput(w1), *db1 = dput(b1), *dw2 = dput(w2), *db2 = dput(b2), *ddout = dput(dout);
    std::vector<float> z0;
    float *gwr = dput(std::vector<float>((size_t)E * C)), *gw1 = dput(std::vector<float>((size_t)E * F * C)),
          *gb1 = dput(std::vector<float>((size_t)E * F)), *gw2 = dput(std::vector<float>((size_t)E * C * F)),
          *gb2 = dput(std::vector<float>((size_t)E * C));
    uint16_t *out = dput(std::vector<uint16_t>((size_t)N * C)), *dx = dput(std::vector<uint16_t>((size_t)N * C));
    const float coeff = 0.01f;
    dt_cu_moe_params p = {dwr, (bf16 *)dw1, (bf16 *)db1, (bf16 *)dw2, (bf16 *)db2};
    dt_cu_moe_grads g = {gwr, gw1, gb1, gw2, gb2};
    dt_cu_moe_forward((bf16 *)out, &w, (bf16 *)dx16, &p, coeff, &d, 0);
    dt_cu_moe_backward((bf16 *)dx, &w, (bf16 *)ddout, (bf16 *)dx16, &p, &g, coeff, &d, 0);
    cudaError_t ce = cudaDeviceSynchronize();
    CHECKF(ce == cudaSuccess, "%s: CUDA error %s", what, cudaGetErrorString(ce));
    std::vector<float> probs = dget(w.probs, (size_t)N * E), topg = dget(w.topg, (size_t)N * K);
    std::vector<int> tope = dget(w.tope, (size_t)N * K), rowof = dget(w.rowof, (size_t)N * K),
                     meta = dget(w.meta, (size_t)DT_CU_MOE_META);
    std::vector<double> aux = dget(w.aux, 2);

    /* the router in fp64; top-K agrees except where two probabilities are within 1e-6 */
    std::vector<double> pr((size_t)N * E);
    int topk_bad = 0, ties = 0;
    for (int t = 0; t < N; t++) {
        double z[DT_CU_MOE_MAX_EXPERTS], mx = -1e300, sum = 0;
        for (int e = 0; e < E; e++) {
            double s = 0;
            for (int c = 0; c < C; c++) s += (double)xf[(size_t)t * C + c] * wr[(size_t)e * C + c];
            z[e] = s;
            mx = s > mx ? s : mx;
        }
        for (int e = 0; e < E; e++) sum += exp(z[e] - mx);
        for (int e = 0; e < E; e++) pr[(size_t)t * E + e] = exp(z[e] - mx) / sum;
        unsigned long long taken = 0;
        for (int k = 0; k < K; k++) {
            int best = -1;
            for (int e = 0; e < E; e++)
                if (!(taken >> e & 1) && (best < 0 || pr[(size_t)t * E + e] > pr[(size_t)t * E + best])) best = e;
            taken |= 1ull << best;
            int ge = tope[(size_t)t * K + k];
            if (ge != best && fabs(pr[(size_t)t * E + ge] - pr[(size_t)t * E + best]) > 1e-6) topk_bad++;
        }
        if (t % 97 == 5) { /* a zero row: every logit 0, the top-K is 0, 1, ... */
            ties++;
            for (int k = 0; k < K; k++) topk_bad += tope[(size_t)t * K + k] != k;
        }
    }
    CHECKF(topk_bad == 0, "%s: %d top-K choices disagree with fp64 (beyond 1e-6 ties)", what, topk_bad);
    double pmax = 0;
    for (size_t i = 0; i < pr.size(); i++) pmax = fmax(pmax, fabs(probs[i] - pr[i]));
    CHECKF(pmax < 1e-5, "%s: probabilities max abs err %.3g", what, pmax);
    fprintf(stderr, "  router: top-K as fp64 (%d tie rows by index), probs max abs err %.3g\n", ties, pmax);

    /* the routing map is the host plan's, exactly */
    int nb = dt_cu_moe_route_chunks(N);
    std::vector<int> cnt((size_t)nb * K * E), kept((size_t)nb * K * E), posb((size_t)nb * E), hmeta(DT_CU_MOE_META),
        hrowof((size_t)N * K), hsrc(dt_cu_moe_max_rows(&d));
    int rows = dt_cu_moe_route_host(tope.data(), &d, cnt.data(), kept.data(), posb.data(), hmeta.data(), hrowof.data(),
                                 hsrc.data());
    std::vector<int> src = dget(w.src, (size_t)(rows > 0 ? rows : 1));
    int map_bad = rows != meta[DT_CU_MOE_META_OFFS + E];
    for (int i = 0; i < N * K; i++) map_bad += rowof[i] != hrowof[i];
    for (int i = 0; i < rows; i++) map_bad += src[i] != hsrc[i];
    for (int i = 0; i < DT_CU_MOE_META_FILL; i++) map_bad += meta[i] != hmeta[i];
    CHECKF(map_bad == 0, "%s: routing map differs from moe_cuda_plan.h's host sort in %d places", what, map_bad);
    fprintf(stderr, "  routing map = host counting sort: %d rows, %d dropped, expert 0 takes %d\n", rows,
            meta[DT_CU_MOE_META_DROPPED], meta[DT_CU_MOE_META_KEPT]);

    /* the experts, combine, aux and the backward in fp64 (gates: the fp64 probabilities) */
    std::vector<float> fw1 = f_of(w1), fb1 = f_of(b1), fw2 = f_of(w2), fb2 = f_of(b2), fdo = f_of(dout);
    std::vector<double> rout((size_t)N * C, 0.0), rdx((size_t)N * C, 0.0), rgw1(fw1.size(), 0.0), rgb1(fb1.size(), 0.0),
        rgw2(fw2.size(), 0.0), rgb2(fb2.size(), 0.0), rgwr(wr.size(), 0.0), dg((size_t)N * K, 0.0);
    std::vector<double> h(F), a(F), y(C), dy(C), dh(F);
    for (int t = 0; t < N; t++)
        for (int k = 0; k < K; k++) {
            if (rowof[(size_t)t * K + k] < 0) continue;
            int e = tope[(size_t)t * K + k];
            double gt = pr[(size_t)t * E + e];
            const float *xr = &xf[(size_t)t * C];
            for (int f = 0; f < F; f++) {
                double s = fb1[(size_t)e * F + f];
                for (int c = 0; c < C; c++) s += (double)fw1[((size_t)e * F + f) * C + c] * xr[c];
                h[f] = s;
                a[f] = gelu64(s);
            }
            double dgs = 0;
            for (int c = 0; c < C; c++) {
                double s = fb2[(size_t)e * C + c];
                for (int f = 0; f < F; f++) s += (double)fw2[((size_t)e * C + c) * F + f] * a[f];
                y[c] = s;
                rout[(size_t)t * C + c] += gt * s;
                dy[c] = gt * fdo[(size_t)t * C + c];
                dgs += (double)fdo[(size_t)t * C + c] * s;
            }
            dg[(size_t)t * K + k] = dgs;
            for (int f = 0; f < F; f++) {
                double s = 0;
                for (int c = 0; c < C; c++) s += dy[c] * fw2[((size_t)e * C + c) * F + f];
                dh[f] = s * dgelu64(h[f]);
            }
            for (int c = 0; c < C; c++) {
                rgb2[(size_t)e * C + c] += dy[c];
                for (int f = 0; f < F; f++) rgw2[((size_t)e * C + c) * F + f] += dy[c] * a[f];
            }
            for (int f = 0; f < F; f++) {
                rgb1[(size_t)e * F + f] += dh[f];
                for (int c = 0; c < C; c++) rgw1[((size_t)e * F + f) * C + c] += dh[f] * xr[c];
            }
            for (int c = 0; c < C; c++) {
                double s = 0;
                for (int f = 0; f < F; f++) s += dh[f] * fw1[((size_t)e * F + f) * C + c];
                rdx[(size_t)t * C + c] += s;
            }
        }
    double fP = 0;
    std::vector<double> fe(E);
    for (int e = 0; e < E; e++) {
        double P = 0;
        for (int t = 0; t < N; t++) P += pr[(size_t)t * E + e];
        fe[e] = (double)meta[DT_CU_MOE_META_TOTAL + e] / ((double)N * K);
        fP += fe[e] * P / N;
    }
    double raux = (double)coeff * E * fP;
    for (int t = 0; t < N; t++) {
        double dp[DT_CU_MOE_MAX_EXPERTS], s = 0;
        for (int e = 0; e < E; e++) dp[e] = (double)coeff * E * fe[e] / N;
        for (int k = 0; k < K; k++) dp[tope[(size_t)t * K + k]] += dg[(size_t)t * K + k];
        for (int e = 0; e < E; e++) s += dp[e] * pr[(size_t)t * E + e];
        for (int e = 0; e < E; e++) {
            double dz = pr[(size_t)t * E + e] * (dp[e] - s);
            for (int c = 0; c < C; c++) {
                rgwr[(size_t)e * C + c] += dz * xf[(size_t)t * C + c];
                rdx[(size_t)t * C + c] += dz * wr[(size_t)e * C + c];
            }
        }
    }
    CHECKF(fabs(aux[0] - raux) <= 1e-5 * fabs(raux), "%s: aux %.9g, fp64 %.9g", what, aux[0], raux);
    fprintf(stderr, "  aux loss %.9g (fp64 %.9g)\n", aux[0], raux);
    CHECK_REL(f_of(dget((uint16_t *)out, (size_t)N * C)), rout, 2e-2, "out");
    CHECK_REL(f_of(dget((uint16_t *)dx, (size_t)N * C)), rdx, 2e-2, "dx");
    CHECK_REL(dget(gw1, fw1.size()), rgw1, 2e-2, "dW1");
    CHECK_REL(dget(gb1, fb1.size()), rgb1, 2e-2, "db1");
    CHECK_REL(dget(gw2, fw2.size()), rgw2, 2e-2, "dW2");
    CHECK_REL(dget(gb2, fb2.size()), rgb2, 2e-2, "db2");
    CHECK_REL(dget(gwr, wr.size()), rgwr, 2e-2, "dWr");
    (void)z0;
    cudaFree(dwr), cudaFree(dx16), cudaFree(dw1), cudaFree(db1), cudaFree(dw2), cudaFree(db2), cudaFree(ddout);
    cudaFree(gwr), cudaFree(gw1), cudaFree(gb1), cudaFree(gw2), cudaFree(gb2), cudaFree(out), cudaFree(dx);
}

static void test_accuracy(void) {
    const char *only = getenv("DT_GPU_CASES");
    if (only && !strstr("moe_accuracy", only)) return;
    dt_kh_set_mode(1); /* the det branches (the fast ones differ only in order) */
    accuracy(1024, 256, 1024, 8, 2, 0.0f, 60, "N=1024 C=256 F=1024 E=8 K=2, 60% to expert 0");
    accuracy(1024, 256, 1024, 8, 2, 1.0f, 60, "the same with capacity 1.0 (drops)");
    accuracy(1000, 128, 512, 4, 1, 0.0f, 100, "K=1, every token to expert 0 (3 empty groups), N=1000");
}

int main(void) {
    dt_status st = dt_kh_cuda_init();
    if (st != DT_OK) {
        fprintf(stderr, "test_gpu_moe: %s\n", dt_errmsg());
        return 1;
    }
    RUN(test_accuracy);
    RUN(test_replays);
    cudaError_t e = cudaDeviceSynchronize();
    CHECKF(e == cudaSuccess, "CUDA error at the end: %s", cudaGetErrorString(e));
    if (g_ws) cudaFree(g_ws);
    dt_kh_cuda_shutdown();
    return dt_test_report();
}
