/* Mixture-of-experts MLP (issue 23): router, top-k routing with optional capacity dropping,
 * dispatch into expert-contiguous order, grouped expert FFNs, combine, the auxiliary
 * load-balancing loss, and every backward. CPU fp32 here (moe_cpu.c); the CUDA kernels
 * (moe/cuda/) implement the same math and the same routing record.
 *
 * Shape letters: N tokens (B*T), C channels, F = 4C expert hidden width, E experts, K the
 * router's top-k (1 <= K <= E), R <= N*K the kept (dispatched) assignments.
 *
 * Parameters of one MoE layer (model/gpt.h, tensors DT_P_MOE_*, leading dimension the MoE
 * layer index): wr (E,C) router, no bias; w1 (E,F,C), b1 (E,F); w2 (E,C,F), b2 (E,C).
 * Weights are [out, in] as in the dense MLP.
 *
 * Forward, per token t with input x_t (C):
 *  1. z_t = wr x_t (E logits, a GEMM of the gemm family).
 *  2. p_t = softmax(z_t): max-subtracted, the sum in expert index order, fp32.
 *  3. top-K in a total order: p descending, then expert index ascending on ties.
 *     expert[t,k] = e_{t,k}; gate[t,k] = p_t[e_{t,k}] (not renormalised).
 *  4. capacity cap = ceil(f N K / E) for --moe-expert-capacity-factor f > 0 (0: none).
 *     The assignments to expert e are ranked by (k, t) ascending; rank >= cap is dropped
 *     (row[t,k] = -1, counted in `dropped`).
 *  5. dispatch: kept assignments sorted stably by (expert, token, k) into xp (R,C);
 *     offsets[e] is the first row of expert e, offsets[E] = R; groups may be empty.
 *  6. per expert group: h = xp w1_e^T + b1_e; a = GELU(h) (tanh form, ops/gelu);
 *     yp = a w2_e^T + b2_e.
 *  7. combine: out_t = sum over kept k, in k order, of gate[t,k] * yp[row[t,k]].
 *  aux = coeff * E * sum_e f_e P_e with f_e = counts[e] / (N K) (counts before dropping,
 *  a constant: no gradient) and P_e = (1/N) sum_t p_t[e].
 *
 * Backward, given dout (N,C) and daux = dL/daux (the loss scale):
 *  dyp[row[t,k]] = gate[t,k] dout_t; dgate[t,k] = <dout_t, yp[row[t,k]]> (0 if dropped);
 *  per group: da = dyp w2_e; dw2_e += dyp^T a; db2_e += colsum dyp; dh = da * GELU'(h);
 *  dw1_e += dh^T xp; db1_e += colsum dh; dxp = dh w1_e;
 *  dx_t = sum over kept k, in k order, of dxp[row[t,k]]  (un-dispatch);
 *  dp_t[e] = sum_k [e == e_{t,k}] dgate[t,k] + daux coeff E f_e / N;
 *  dz_t = p_t * (dp_t - <dp_t, p_t>) (the dot in expert order);
 *  dwr += dz^T x; dx += dz wr.
 *
 * Paths and determinism classes (CPU):
 *  router logits, expert GEMMs, dwr, dx, dw1, dw2 — the gemm family (DT_OP_GEMM,
 *        dt_gemm_choose): det slabs, thread-count independent; fast OpenBLAS threading.
 *        A group's weight gradient is one GEMM over that group's rows in row order; groups
 *        are separate tensors' slices, so no two writers meet (no atomics in either path).
 *  db1, db2 — the reduce family's column sums (DT_OP_BIAS_BWD) over each group's rows.
 *  softmax, top-k, routing plan, dispatch, softmax backward, aux loss — one path each,
 *        deterministic by nature: every output has one writer that reads its inputs in a
 *        fixed order (the routing plan is a stable counting sort on one thread; the aux
 *        sums run in token order in double). No race exists on the CPU, so no default
 *        variant is offered.
 *  combine and un-dispatch (DT_OP_MOE_COMBINE, dt_moe_choose):
 *   det  — each token gathers its K rows and adds them in k order (index-ordered).
 *   fast — the dispatched rows are scattered in parallel, each add an OpenMP atomic into
 *          the token's slot: the order of a token's K terms is the
 *          arrival order. (Forward with K <= 2 happens to be order-free: 0 + a + b and
 *          0 + b + a round alike; accumulating into dx, or K >= 3, is not.)
 *  dprob, the gate gradient (DT_OP_MOE_DPROB, dt_moe_choose):
 *   det  — one dot product per (t,k), channels in index order, written to its own slot.
 *   fast — each (t,k) dot is cut into DT_MOE_DPROB_CHUNK-channel partials computed in
 *          parallel, each added to the slot with an OpenMP atomic: arrival order.
 *
 * Buffers: the caller owns every buffer (the model keeps them in its slabs);
 * dt_moe_sizes says how many floats and int32s a layer's forward record and the backward
 * scratch take. */
#ifndef DT_OPS_MOE_H
#define DT_OPS_MOE_H

#include "detrain/detrain.h"
#include "ops/op.h"

#include <stddef.h>
#include <stdint.h>

#define DT_MOE_DPROB_CHUNK 64
#define DT_MOE_MAX_EXPERTS 1024

typedef struct dt_moe_dims {
    int N, C, F, E, K;
    int cap; /* per-expert capacity, 0 = no dropping (dt_moe_capacity) */
} dt_moe_dims;

/* ceil(factor * N * K / E) computed in double, or 0 when factor == 0. */
int dt_moe_capacity(double factor, int N, int K, int E);
/* Checks the dims (N, C, F >= 1, 1 <= E <= DT_MOE_MAX_EXPERTS, 1 <= K <= E, cap >= 0, N*K
 * fits the int32 routing index). The ops assume checked dims. */
dt_status dt_moe_dims_check(const dt_moe_dims *d);

typedef enum dt_moe_path { DT_MOE_DET = 0, DT_MOE_FAST = 1 } dt_moe_path;
/* The path of DT_OP_MOE_COMBINE or DT_OP_MOE_DPROB now: det when dt_op_variant says det
 * (always in deterministic mode), else fast (moe_plan.c). */
dt_moe_path dt_moe_choose(dt_op_id op);

/* The routing record of one forward, kept for backward. */
typedef struct dt_moe_route {
    float *probs;     /* (N,E) p */
    int32_t *expert;  /* (N,K) e_{t,k} */
    float *gate;      /* (N,K) g_{t,k} */
    int32_t *row;     /* (N,K) dispatched row of (t,k), -1 if dropped */
    int32_t *token;   /* (N*K) token of each dispatched row; the first R are used */
    int32_t *offsets; /* (E+1) */
    int32_t *counts;  /* (E) assignments to each expert before dropping */
    int rows;         /* R */
    int dropped;      /* N*K - R */
} dt_moe_route;

/* A layer's forward record: the routing and the expert activations. */
typedef struct dt_moe_acts {
    dt_moe_route route;
    float *xp;        /* (N*K, C) dispatched inputs, first R rows used */
    float *h, *a;     /* (N*K, F) pre- and post-GELU */
    float *yp;        /* (N*K, C) expert outputs */
} dt_moe_acts;

/* Backward scratch (any layer's backward may reuse the same). */
typedef struct dt_moe_scratch {
    float *dyp;       /* (N*K, C) */
    float *da, *dh;   /* (N*K, F) */
    float *dxp;       /* (N*K, C) */
    float *dgate;     /* (N,K) */
    float *dz;        /* (N,E) */
} dt_moe_scratch;

typedef struct dt_moe_params { const float *wr, *w1, *b1, *w2, *b2; } dt_moe_params;
typedef struct dt_moe_grads { float *wr, *w1, *b1, *w2, *b2; } dt_moe_grads;

typedef struct dt_moe_sizes {
    size_t act_floats, act_ints; /* one dt_moe_acts */
    size_t scratch_floats;       /* one dt_moe_scratch */
} dt_moe_sizes;
dt_moe_sizes dt_moe_sizes_of(const dt_moe_dims *d);
/* Points a record / the scratch at caller memory of dt_moe_sizes_of's sizes. */
void dt_moe_acts_bind(dt_moe_acts *a, float *floats, int32_t *ints, const dt_moe_dims *d);
void dt_moe_scratch_bind(dt_moe_scratch *s, float *floats, const dt_moe_dims *d);

/* ---- the ops, forward ---------------------------------------------------------------- */

/* probs (N,E) = softmax(x (N,C) wr^T) per row. */
void dt_moe_router_fwd(float *probs, const float *x, const float *wr, int N, int C, int E);
/* expert, gate (N,K): the top K of each row of probs in the total order (value desc, index asc). */
void dt_moe_topk(int32_t *expert, float *gate, const float *probs, int N, int E, int K);
/* From r->expert: counts, the capacity drop, row, token, offsets, rows, dropped. */
void dt_moe_route_plan(dt_moe_route *r, const dt_moe_dims *d);
/* xp[i] = x[token[i]] for i < R. */
void dt_moe_dispatch(float *xp, const float *x, const int32_t *token, int R, int C);
/* The grouped expert FFN over the R dispatched rows (h, a, yp as in step 6). */
void dt_moe_experts_fwd(float *h, float *a, float *yp, const float *xp, const dt_moe_params *p,
                        const int32_t *offsets, const dt_moe_dims *d);
/* out_t (=, or += when accumulate) sum over kept k in k order of gate[t,k] yp[row[t,k]];
 * gate NULL means every gate is 1 (the un-dispatch of backward). */
void dt_moe_combine_det(float *out, const float *yp, const int32_t *row, const float *gate, int N, int K,
                        int C, int accumulate);
void dt_moe_combine_fast(float *out, const float *yp, const int32_t *row, const float *gate,
                         const int32_t *token, const int32_t *offsets, int N, int K, int E, int C,
                         int accumulate);
/* Dispatches on dt_moe_choose(DT_OP_MOE_COMBINE). */
void dt_moe_combine(float *out, const float *yp, const dt_moe_route *r, const float *gate, const dt_moe_dims *d,
                    int accumulate);
/* coeff * E * sum_e (counts[e] / (N K)) * (1/N) sum_t probs[t,e]. */
double dt_moe_aux_loss(const float *probs, const int32_t *counts, const dt_moe_dims *d, float coeff);

/* ---- the ops, backward --------------------------------------------------------------- */

/* dyp[row[t,k]] = gate[t,k] * dout_t for kept (t,k). */
void dt_moe_combine_bwd(float *dyp, const float *dout, const dt_moe_route *r, const dt_moe_dims *d);
/* dgate[t,k] = <dout_t, yp[row[t,k]]>, 0 for dropped (t,k). */
void dt_moe_dprob_det(float *dgate, const float *dout, const float *yp, const int32_t *row, int N, int K, int C);
void dt_moe_dprob_fast(float *dgate, const float *dout, const float *yp, const int32_t *row, int N, int K, int C);
void dt_moe_dprob(float *dgate, const float *dout, const float *yp, const dt_moe_route *r, const dt_moe_dims *d);
/* The grouped FFN backward: dxp (R,C) overwritten; dw1, db1, dw2, db2 accumulate; da, dh
 * scratch (R,F). */
void dt_moe_experts_bwd(float *dxp, float *da, float *dh, const dt_moe_grads *g, const float *dyp,
                        const float *xp, const float *h, const float *a, const dt_moe_params *p,
                        const int32_t *offsets, const dt_moe_dims *d);
/* dz (N,E) = softmax backward of dp, with dp_t[e] = sum_k [e == expert[t,k]] dgate[t,k]
 * + daux coeff E counts[e] / (N K N). */
void dt_moe_router_dz(float *dz, const float *dgate, const dt_moe_route *r, const dt_moe_dims *d, float coeff,
                      float daux);
/* dwr += dz^T x; dx += dz wr. */
void dt_moe_router_bwd(float *dx, float *dwr, const float *dz, const float *x, const float *wr, const dt_moe_dims *d);

/* ---- the whole block ----------------------------------------------------------------- */

/* out (N,C) = the MoE MLP of x (N,C); fills the record a; *aux = the layer's aux loss. */
void dt_moe_block_fwd(float *out, double *aux, dt_moe_acts *a, const float *x, const dt_moe_params *p,
                      const dt_moe_dims *d, float coeff);
/* dx (N,C) overwritten with the gradient of the block's input; g accumulates; daux is
 * dL/daux (the loss scale). */
void dt_moe_block_bwd(float *dx, const dt_moe_grads *g, const dt_moe_scratch *s, const dt_moe_acts *a,
                      const float *x, const float *dout, const dt_moe_params *p, const dt_moe_dims *d,
                      float coeff, float daux);

#endif
