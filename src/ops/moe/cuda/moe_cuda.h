/* The mixture-of-experts MLP on the GPU (src/ops/moe/cuda/*.cu): launchers over one layer's
 * workspace (moe_cuda_plan.h's layout). The math is moe-math (the MoE family's header,
 * src/ops/moe/moe.h); the host plan, the tile schedule and the routing map's algorithm are
 * in moe_cuda_plan.h, CPU-tested. Include from .cu files only.
 *
 * Precision: x (the normalised input), the dispatched rows, H, GELU(H), the expert outputs
 * and their gradients bf16; the router weight Wr fp32 (the master weights); W1, W2, b1, b2
 * bf16 (the model's bf16 copy); probabilities, gates, dprob, dz and every gradient of a
 * parameter fp32; every accumulation fp32; the aux loss fp64.
 *
 * Each path's determinism class (det: the launchers' `det` argument; dt_cu_moe_forward and
 * dt_cu_moe_backward take it from the choosers: DT_OP_MOE_COMBINE for the routing map's
 * placement and the combine, DT_OP_MOE_DPROB for dprob, DT_OP_GEMM for the grouped weight
 * gradient):
 *  router_fwd      one warp a token, logits in a fixed lane order, softmax summed in expert
 *                  order, top-K by (value desc, index asc): deterministic in both branches
 *  route           det: chunked counting sort (moe_cuda_plan.h), stable (expert, token, k)
 *                  rows, collision-free writes. fast without capacity: rows claimed with
 *                  atomics per expert (groups are the same sets, their order is not
 *                  stable); fast with capacity: the det placement (the kept set must not
 *                  depend on arrival order)
 *  dispatch        one warp a row copies its token: deterministic by nature
 *  expert GEMMs    our grouped kernel (bf16 tensor cores, fp32 accumulation): one block a
 *                  128 x 128 output tile walks K in order; group sizes read on the device,
 *                  grid for the worst case. Input gradients likewise. Weight gradients:
 *                  det one block a (expert, tile) walks the group's rows in order (no
 *                  atomics); fast DT_CU_MOE_WGRAD_SPLITS row parts added with atomicAdd
 *  bias gradients  per expert column sums, 8 row lanes in a fixed order: both branches
 *  combine         det: each token gathers its K rows in k order; fast: atomicAdd scatter
 *                  into fp32 accumulators, then rounded (with K = 2 two addends into zero
 *                  commute exactly: the race shows from K = 3)
 *  dprob           dg_{t,k} = <dout_t, Yp[row]> over DT_CU_MOE_DPROB_TILE-channel tiles:
 *                  det each tile writes its own slot, one thread a slot adds them in tile
 *                  order after all writers; fast atomicAdd into the slot
 *  router_bwd      dp, the aux term and the softmax backward, one thread a token in
 *                  expert order; dWr += dz^T x as token-chunk partials added in chunk
 *                  order; dx = sum_k dXp (k order) + Wr^T dz (expert order): both branches
 *  aux             P_e as token-chunk partials added in chunk order (fp64), one thread
 *                  forms aux: both branches */
#ifndef DT_OPS_MOE_CUDA_H
#define DT_OPS_MOE_CUDA_H

#include "ops/cuda/cuda_common.cuh"

extern "C" {
#include "ops/gemm/gemm.h"
#include "ops/moe/moe.h"
#include "ops/moe/moe_cuda_plan.h"
}

/* The workspace's buffers, pointers into one device slab laid out by dt_cu_moe_ws_plan. */
typedef struct dt_cu_moe_ws {
    float *probs, *topg, *part, *dg, *dgpart, *dz, *wrpart, *outacc;
    int *tope, *cnt, *kept, *posb, *meta, *rowof, *src;
    bf16 *xp, *h, *a, *yp, *dyp, *dh, *dxp;
    double *aux;
} dt_cu_moe_ws;
void dt_cu_moe_ws_bind(dt_cu_moe_ws *w, void *slab, const dt_cu_moe_ws_layout *l);

/* A layer's parameters (device) and their gradients (fp32, added to). */
typedef struct dt_cu_moe_params {
    const float *wr;          /* (E, C) fp32 */
    const bf16 *w1, *b1;      /* (E, F, C), (E, F) */
    const bf16 *w2, *b2;      /* (E, C, F), (E, C) */
} dt_cu_moe_params;
typedef struct dt_cu_moe_grads {
    float *wr, *w1, *b1, *w2, *b2;
} dt_cu_moe_grads;

/* ---- forward ---------------------------------------------------------------------------- */
/* probs (N,E), tope/topg (N,K) from x (N,C) and Wr. */
void dt_cu_moe_router_fwd(dt_cu_moe_ws *w, const bf16 *x, const float *wr, const dt_moe_dims *d, cudaStream_t s);
/* The routing map from tope: cnt, kept, posb, meta (totals, R_e, offsets, tile starts,
 * dropped), rowof, src. */
void dt_cu_moe_route(dt_cu_moe_ws *w, const dt_moe_dims *d, int det, cudaStream_t s);
/* xp[row] = x[src[row] / K] for the dispatched rows. */
void dt_cu_moe_dispatch(dt_cu_moe_ws *w, const bf16 *x, const dt_moe_dims *d, cudaStream_t s);
/* h = xp W1_e^T + b1_e, a = GELU(h) (tanh form, of h as stored), yp = a W2_e^T + b2_e. */
void dt_cu_moe_experts_fwd(dt_cu_moe_ws *w, const dt_cu_moe_params *p, const dt_moe_dims *d, cudaStream_t s);
/* out (N,C) bf16 = sum over kept k in k order of g_{t,k} yp[row(t,k)] (0 for a token whose
 * every assignment was dropped). */
void dt_cu_moe_combine_fwd(bf16 *out, dt_cu_moe_ws *w, const dt_moe_dims *d, int det, cudaStream_t s);
/* aux[0] = coeff E sum_e f_e P_e, aux[1] = sum_e f_e P_e (fp64), f_e = total_e / (N K),
 * P_e = mean over tokens of p_t[e]. */
void dt_cu_moe_aux_fwd(dt_cu_moe_ws *w, float coeff, const dt_moe_dims *d, cudaStream_t s);
/* The whole forward in that order: router, route, dispatch, experts, combine, aux. */
void dt_cu_moe_forward(bf16 *out, dt_cu_moe_ws *w, const bf16 *x, const dt_cu_moe_params *p, float coeff,
                       const dt_moe_dims *d, cudaStream_t s);

/* ---- backward ----------------------------------------------------------------------------- */
/* dyp[row] = g dout_t; dg (N,K) = <dout_t, yp[row]> (0 for dropped slots). */
void dt_cu_moe_combine_bwd(dt_cu_moe_ws *w, const bf16 *dout, const dt_moe_dims *d, int det, cudaStream_t s);
/* From dyp: dh = (dyp W2_e) GELU'(h), dxp = dh W1_e; g->w2 += dyp^T a, g->b2 += colsum
 * dyp, g->w1 += dh^T xp, g->b1 += colsum dh (per expert group). */
void dt_cu_moe_experts_bwd(dt_cu_moe_ws *w, const dt_cu_moe_params *p, const dt_cu_moe_grads *g,
                           const dt_moe_dims *d, int det, cudaStream_t s);
/* dz (N,E) = softmax backward of dp = routed dg + aux_coeff E f_e / N; g_wr += dz^T x;
 * dx (N,C) bf16 = sum_k dxp[row(t,k)] + Wr^T dz_t. aux_coeff: the aux loss's coefficient
 * times the backward's loss scale. */
void dt_cu_moe_router_bwd(bf16 *dx, float *g_wr, dt_cu_moe_ws *w, const bf16 *x, const float *wr, float aux_coeff,
                          const dt_moe_dims *d, cudaStream_t s);
/* The whole backward: combine_bwd, experts_bwd, router_bwd. */
void dt_cu_moe_backward(bf16 *dx, dt_cu_moe_ws *w, const bf16 *dout, const bf16 *x, const dt_cu_moe_params *p,
                        const dt_cu_moe_grads *g, float aux_coeff, const dt_moe_dims *d, cudaStream_t s);

/* ---- the grouped GEMMs, one at a time (tests, benchmarks) --------------------------------- */
enum { DT_CU_MOE_GG_FWD_GELU, DT_CU_MOE_GG_FWD, DT_CU_MOE_GG_DGRAD_DGELU, DT_CU_MOE_GG_DGRAD };
/* Forward-shaped (rows x K) (K x N per expert): FWD(_GELU): out = A W_e^T (+ bias_e), W (E, N, K)
 * (with _GELU: out = h, out2 = GELU(h)); DGRAD(_DGELU): out = A W_e, W (E, K, N) (with
 * _DGELU: out = bf16(A W_e) GELU'(aux)). Rows and groups from w->meta. */
void dt_cu_moe_gg(int kind, bf16 *out, bf16 *out2, const bf16 *aux, const bf16 *A, const bf16 *W, const bf16 *bias,
                  int N, int K, const dt_cu_moe_ws *w, const dt_moe_dims *d, cudaStream_t s);
/* dw (E, M, N) += A_rows^T B_rows per group (A (rows, M), B (rows, N)). */
void dt_cu_moe_gg_wgrad(float *dw, const bf16 *A, const bf16 *B, int M, int N, const dt_cu_moe_ws *w,
                        const dt_moe_dims *d, int det, cudaStream_t s);
/* db (E, cols) += the column sums of each group's rows of x (rows, cols). */
void dt_cu_moe_group_colsum(float *db, const bf16 *x, int cols, const dt_cu_moe_ws *w, const dt_moe_dims *d,
                            cudaStream_t s);

#endif
