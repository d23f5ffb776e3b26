/* Benchmark of the MoE kernels (src/ops/moe/cuda/), not a test: bench/gpu_moe.sh runs it.
 * One MoE layer at GPT-2-small width (C = 768, F = 3072), E experts, top-K, N = B T tokens
 * (default 16 x 1024), the router skewed so that SHARE% of the tokens (default 60) send
 * their first choice to expert 0. Prints per range (router, route, dispatch, grouped GEMMs
 * forward, combine, aux, dprob, grouped GEMMs backward, router backward) the median ms of
 * the det and the fast branch, the block's forward + backward and its determinism tax, and
 * the grouped GEMMs' TFLOP/s. Arguments: [N] [E] [K] [SHARE] [capacity factor]. */
#include "gpu_check.cuh"
#include "ops/moe/cuda/moe_cuda.h"

static dt_moe_dims g_d;
static dt_cu_moe_ws g_w;
static dt_cu_moe_params g_p;
static dt_cu_moe_grads g_g;
static bf16 *g_x, *g_out, *g_dout, *g_dx;

int main(int argc, char **argv) {
    int N = argc > 1 ? atoi(argv[1]) : 16384, E = argc > 2 ? atoi(argv[2]) : 8, K = argc > 3 ? atoi(argv[3]) : 2;
    int share = argc > 4 ? atoi(argv[4]) : 60;
    float capf = argc > 5 ? (float)atof(argv[5]) : 0.0f;
    int C = 768, F = 3072;
    if (dt_cu_moe_dims_make(N, C, F, E, K, capf, &g_d) != DT_OK) {
        fprintf(stderr, "bench_moe: %s\n", dt_errmsg());
        return 1;
    }
    dt_cu_moe_ws_layout lay;
    dt_cu_moe_ws_plan(&g_d, &lay);
    void *slab = dev<char>(lay.total);
    dt_cu_moe_ws_bind(&g_w, slab, &lay);
    /* inputs: x noise + 0.5 v on share% of the tokens, Wr row 0 = 0.05 v: skewed routing */
    uint32_t draw = 1;
    vf x = rnd_bf16(3, 250, &draw, (size_t)N * C, 1.0f), wr = rnd_bf16(3, 250, &draw, (size_t)E * C, 0.02f);
    for (int c = 0; c < C; c++) {
        float v = (c * 2654435761u >> 7) & 1 ? 1.0f : -1.0f;
        wr[c] = 0.05f * v;
        for (int t = 0; t < N; t++)
            if ((int)((t * 2246822519u >> 9) % 100u) < share)
                x[(size_t)t * C + c] = __bfloat162float(__float2bfloat16(x[(size_t)t * C + c] + 0.5f * v));
    }
    g_x = up16(x);
    g_p.wr = up32(wr);
    g_p.w1 = up16(rnd_bf16(3, 250, &draw, (size_t)E * F * C, 0.05f));
    g_p.b1 = up16(rnd_bf16(3, 250, &draw, (size_t)E * F, 0.1f));
    g_p.w2 = up16(rnd_bf16(3, 250, &draw, (size_t)E * C * F, 0.03f));
    g_p.b2 = up16(rnd_bf16(3, 250, &draw, (size_t)E * C, 0.1f));
    g_dout = up16(rnd_bf16(3, 250, &draw, (size_t)N * C, 1.0f));
    g_out = dev<bf16>((size_t)N * C);
    g_dx = dev<bf16>((size_t)N * C);
    g_g.wr = dev<float>((size_t)E * C);
    g_g.w1 = dev<float>((size_t)E * F * C);
    g_g.b1 = dev<float>((size_t)E * F);
    g_g.w2 = dev<float>((size_t)E * C * F);
    g_g.b2 = dev<float>((size_t)E * C);
    const dt_moe_dims *d = &g_d;
    /* one forward to fill the routing and the activations every range below reads */
    dt_cu_moe_forward(g_out, &g_w, g_x, &g_p, 0.01f, d, 0);
    std::vector<int> meta(DT_CU_MOE_META);
    gpu_ok(cudaDeviceSynchronize(), "forward");
    cudaMemcpy(meta.data(), g_w.meta, sizeof(int) * meta.size(), cudaMemcpyDeviceToHost);
    int rows = meta[DT_CU_MOE_META_OFFS + E];
    printf("bench_moe: N=%d C=%d F=%d E=%d K=%d capacity %g: %d rows, expert 0 takes %d (%.1f%%), %d dropped\n", N,
           C, F, E, K, (double)capf, rows, meta[DT_CU_MOE_META_KEPT], 100.0 * meta[DT_CU_MOE_META_KEPT] / rows,
           meta[DT_CU_MOE_META_DROPPED]);
    struct range {
        const char *name;
        void (*fn)(int det);
    } ranges[] = {
        {"router (logits, softmax, top-K)", [](int) { dt_cu_moe_router_fwd(&g_w, g_x, g_p.wr, &g_d, 0); }},
        {"route (counting sort / atomics)", [](int det) { dt_cu_moe_route(&g_w, &g_d, det, 0); }},
        {"dispatch (gather rows)", [](int) { dt_cu_moe_dispatch(&g_w, g_x, &g_d, 0); }},
        {"grouped GEMMs forward", [](int) { dt_cu_moe_experts_fwd(&g_w, &g_p, &g_d, 0); }},
        {"combine", [](int det) { dt_cu_moe_combine_fwd(g_out, &g_w, &g_d, det, 0); }},
        {"aux loss", [](int) { dt_cu_moe_aux_fwd(&g_w, 0.01f, &g_d, 0); }},
        {"dprob + combine backward", [](int det) { dt_cu_moe_combine_bwd(&g_w, g_dout, &g_d, det, 0); }},
        {"grouped GEMMs backward (dgrad, wgrad, bias)",
         [](int det) { dt_cu_moe_experts_bwd(&g_w, &g_p, &g_g, &g_d, det, 0); }},
        {"router backward + un-dispatch",
         [](int) { dt_cu_moe_router_bwd(g_dx, g_g.wr, &g_w, g_x, g_p.wr, 0.01f, &g_d, 0); }},
    };
    double tot[2] = {0, 0}, gemm_ms[2] = {0, 0};
    int ri = 0;
    printf("%-46s %10s %10s %8s\n", "range", "det ms", "fast ms", "tax %");
    for (auto &r : ranges) {
        double ms[2];
        for (int det = 1; det >= 0; det--) {
            auto f = r.fn;
            ms[det] = gpu_median_ms([&]() { f(det); });
            tot[det] += ms[det];
        }
        printf("%-46s %10.4f %10.4f %8.2f\n", r.name, ms[1], ms[0], 100.0 * (ms[1] / ms[0] - 1.0));
        if (ri == 3) gemm_ms[0] = ms[1];
        if (ri == 7) gemm_ms[1] = ms[1];
        ri++;
    }
    printf("%-46s %10.4f %10.4f %8.2f\n", "sum of ranges", tot[1], tot[0], 100.0 * (tot[1] / tot[0] - 1.0));
    double blk[2];
    for (int det = 1; det >= 0; det--) {
        blk[det] = gpu_median_ms([&]() {
            dt_cu_moe_router_fwd(&g_w, g_x, g_p.wr, &g_d, 0);
            dt_cu_moe_route(&g_w, &g_d, det, 0);
            dt_cu_moe_dispatch(&g_w, g_x, &g_d, 0);
            dt_cu_moe_experts_fwd(&g_w, &g_p, &g_d, 0);
            dt_cu_moe_combine_fwd(g_out, &g_w, &g_d, det, 0);
            dt_cu_moe_aux_fwd(&g_w, 0.01f, &g_d, 0);
            dt_cu_moe_combine_bwd(&g_w, g_dout, &g_d, det, 0);
            dt_cu_moe_experts_bwd(&g_w, &g_p, &g_g, &g_d, det, 0);
            dt_cu_moe_router_bwd(g_dx, g_g.wr, &g_w, g_x, g_p.wr, 0.01f, &g_d, 0);
        });
    }
    printf("%-46s %10.4f %10.4f %8.2f\n", "MoE block forward + backward", blk[1], blk[0],
           100.0 * (blk[1] / blk[0] - 1.0));
    double gflop_f = 2.0 * 2.0 * rows * (double)C * F / 1e9;
    printf("grouped GEMMs (det): forward %.1f GFLOP at %.1f TFLOP/s, backward %.1f GFLOP at %.1f TFLOP/s\n", gflop_f,
           gflop_f / gemm_ms[0], 2 * gflop_f, 2 * gflop_f / gemm_ms[1]);
    gpu_ok(cudaDeviceSynchronize(), "end");
    return 0;
}
