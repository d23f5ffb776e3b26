/* The MoE block's ops in the model, each traced at op level and offered to
 * --inject-nondeterminism under its name (see traced_ops.h, ops/moe/moe.h):
 *   forward  moe_router_fwd, moe_topk, moe_dispatch, moe_experts_fwd, moe_combine,
 *            moe_aux_loss (no injection: a scalar the loss does not take)
 *   backward moe_dprob (the gate gradient, with dyp), moe_experts_bwd, moe_undispatch,
 *            moe_router_bwd
 * The routing map (experts, gates, rows), the permuted token order and the dispatched rows
 * are order-sensitive: their per-row digests show a permutation that a whole-tensor digest
 * of the same multiset would not. */
#include "model/traced_ops.h"

#include "trace/trace.h"

#define F32(n, p, r, c) {.name = (n), .data = (p), .dtype = DT_DT_F32, .ndim = 2, \
                         .shape = {(int64_t)(r), (int64_t)(c)}}
#define ROWS_F32(n, p, r, c) {.name = (n), .data = (p), .dtype = DT_DT_F32, .ndim = 2, \
                              .shape = {(int64_t)(r), (int64_t)(c)}, .order_sensitive = 1}
#define ROWS_I32(n, p, r, c) {.name = (n), .data = (p), .dtype = DT_DT_I32, .ndim = 2, \
                              .shape = {(int64_t)(r), (int64_t)(c)}, .order_sensitive = 1}
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

void dt_t_moe_fwd(dt_gpt *m, int mi, float *out, const float *x, const dt_moe_params *p) {
    dt_moe_dims d = dt_gpt_moe_dims(m);
    dt_moe_acts *a = &m->moe_acts[mi];
    dt_moe_route *r = &a->route;
    int N = d.N, C = d.C, E = d.E, K = d.K;
    dt_trace_op *h;
    {
        dt_tensor_ref in[] = {F32("x", x, N, C), F32("wr", p->wr, E, C)};
        h = dt_t_begin(DT_PHASE_FWD, "moe_router_fwd", DT_OP_GEMM, in, COUNT(in));
        dt_moe_router_fwd(r->probs, x, p->wr, N, C, E);
        dt_tensor_ref o[] = {F32("probs", r->probs, N, E)};
        dt_t_end(m, h, "moe_router_fwd", r->probs, (size_t)N * E, o, COUNT(o));
    }
    {
        dt_tensor_ref in[] = {F32("probs", r->probs, N, E)};
        h = dt_t_begin(DT_PHASE_FWD, "moe_topk", -1, in, COUNT(in));
        dt_moe_topk(r->expert, r->gate, r->probs, N, E, K);
        dt_tensor_ref o[] = {ROWS_I32("expert", r->expert, N, K), ROWS_F32("gate", r->gate, N, K)};
        dt_t_end(m, h, "moe_topk", r->gate, (size_t)N * K, o, COUNT(o));
    }
    {
        dt_tensor_ref in[] = {ROWS_I32("expert", r->expert, N, K), F32("x", x, N, C)};
        h = dt_t_begin(DT_PHASE_FWD, "moe_dispatch", -1, in, COUNT(in));
        dt_moe_route_plan(r, &d);
        dt_moe_dispatch(a->xp, x, r->token, r->rows, C);
        dt_tensor_ref o[] = {ROWS_I32("row", r->row, N, K), ROWS_I32("token", r->token, r->rows, 1),
                             {.name = "offsets", .data = r->offsets, .dtype = DT_DT_I32, .ndim = 1, .shape = {E + 1}},
                             {.name = "counts", .data = r->counts, .dtype = DT_DT_I32, .ndim = 1, .shape = {E}},
                             ROWS_F32("xp", a->xp, r->rows, C)};
        dt_t_end(m, h, "moe_dispatch", a->xp, (size_t)r->rows * C, o, COUNT(o));
    }
    {
        dt_tensor_ref in[] = {ROWS_F32("xp", a->xp, r->rows, C), F32("w1", p->w1, (int64_t)E * d.F, C),
                              F32("b1", p->b1, E, d.F), F32("w2", p->w2, (int64_t)E * C, d.F), F32("b2", p->b2, E, C)};
        h = dt_t_begin(DT_PHASE_FWD, "moe_experts_fwd", DT_OP_GEMM, in, COUNT(in));
        if (h) dt_trace_kernel_info(h, "grouped gemm, %d groups, %d rows", E, r->rows);
        dt_moe_experts_fwd(a->h, a->a, a->yp, a->xp, p, r->offsets, &d);
        dt_tensor_ref o[] = {ROWS_F32("h", a->h, r->rows, d.F), ROWS_F32("yp", a->yp, r->rows, C)};
        dt_t_end(m, h, "moe_experts_fwd", a->yp, (size_t)r->rows * C, o, COUNT(o));
    }
    {
        dt_tensor_ref in[] = {ROWS_F32("yp", a->yp, r->rows, C), ROWS_F32("gate", r->gate, N, K),
                              ROWS_I32("row", r->row, N, K)};
        h = dt_t_begin(DT_PHASE_FWD, "moe_combine", DT_OP_MOE_COMBINE, in, COUNT(in));
        dt_moe_combine(out, a->yp, r, r->gate, &d, 0);
        dt_tensor_ref o[] = {F32("y", out, N, C)};
        dt_t_end(m, h, "moe_combine", out, (size_t)N * C, o, COUNT(o));
    }
    {
        dt_tensor_ref in[] = {F32("probs", r->probs, N, E),
                              {.name = "counts", .data = r->counts, .dtype = DT_DT_I32, .ndim = 1, .shape = {E}}};
        h = dt_t_begin(DT_PHASE_FWD, "moe_aux_loss", -1, in, COUNT(in));
        double aux = dt_moe_aux_loss(r->probs, r->counts, &d, m->moe_aux_coeff);
        if (h) {
            int64_t dropped = r->dropped;
            dt_tensor_ref o[] = {{.name = "aux", .data = &aux, .dtype = DT_DT_F64, .ndim = 0},
                                 {.name = "dropped", .data = &dropped, .dtype = DT_DT_I64, .ndim = 0}};
            dt_trace_end(h, o, COUNT(o));
        }
        m->moe_aux += aux;
        m->moe_dropped += r->dropped;
    }
}

void dt_t_moe_bwd(const dt_gpt *m, int mi, float *dx, const dt_moe_grads *g, const float *dout, const float *x,
                  const dt_moe_params *p, float daux) {
    dt_moe_dims d = dt_gpt_moe_dims(m);
    const dt_moe_acts *a = &m->moe_acts[mi];
    const dt_moe_route *r = &a->route;
    const dt_moe_scratch *s = &m->moe_scratch;
    int N = d.N, C = d.C, E = d.E, K = d.K, F = d.F, R = r->rows;
    dt_trace_op *h;
    {
        dt_tensor_ref in[] = {F32("dy", dout, N, C), ROWS_F32("yp", a->yp, R, C), ROWS_F32("gate", r->gate, N, K),
                              ROWS_I32("row", r->row, N, K)};
        h = dt_t_begin(DT_PHASE_BWD, "moe_dprob", DT_OP_MOE_DPROB, in, COUNT(in));
        dt_moe_combine_bwd(s->dyp, dout, r, &d);
        dt_moe_dprob(s->dgate, dout, a->yp, r, &d);
        dt_tensor_ref o[] = {ROWS_F32("dyp", s->dyp, R, C), ROWS_F32("dgate", s->dgate, N, K)};
        dt_t_end(m, h, "moe_dprob", s->dgate, (size_t)N * K, o, COUNT(o));
    }
    {
        dt_tensor_ref in[] = {ROWS_F32("dyp", s->dyp, R, C), ROWS_F32("xp", a->xp, R, C), ROWS_F32("h", a->h, R, F),
                              F32("dw1", g->w1, (int64_t)E * F, C), F32("db1", g->b1, E, F),
                              F32("dw2", g->w2, (int64_t)E * C, F), F32("db2", g->b2, E, C)};
        h = dt_t_begin(DT_PHASE_BWD, "moe_experts_bwd", DT_OP_GEMM, in, COUNT(in));
        if (h) dt_trace_kernel_info(h, "grouped gemm bwd, %d groups, %d rows, bias %s", E, R,
                                    dt_op_variant(DT_OP_BIAS_BWD) == DT_VARIANT_DET ? "det" : "fast");
        dt_moe_experts_bwd(s->dxp, s->da, s->dh, g, s->dyp, a->xp, a->h, a->a, p, r->offsets, &d);
        dt_tensor_ref o[] = {ROWS_F32("dxp", s->dxp, R, C), F32("dw1", g->w1, (int64_t)E * F, C),
                             F32("db1", g->b1, E, F), F32("dw2", g->w2, (int64_t)E * C, F), F32("db2", g->b2, E, C)};
        dt_t_end(m, h, "moe_experts_bwd", s->dxp, (size_t)R * C, o, COUNT(o));
    }
    {
        dt_tensor_ref in[] = {ROWS_F32("dxp", s->dxp, R, C), ROWS_I32("row", r->row, N, K)};
        h = dt_t_begin(DT_PHASE_BWD, "moe_undispatch", DT_OP_MOE_COMBINE, in, COUNT(in));
        dt_moe_combine(dx, s->dxp, r, NULL, &d, 0);
        dt_tensor_ref o[] = {F32("dx", dx, N, C)};
        dt_t_end(m, h, "moe_undispatch", dx, (size_t)N * C, o, COUNT(o));
    }
    {
        dt_tensor_ref in[] = {ROWS_F32("dgate", s->dgate, N, K), F32("probs", r->probs, N, E), F32("x", x, N, C),
                              F32("wr", p->wr, E, C), F32("dx", dx, N, C), F32("dwr", g->wr, E, C)};
        h = dt_t_begin(DT_PHASE_BWD, "moe_router_bwd", DT_OP_GEMM, in, COUNT(in));
        dt_moe_router_dz(s->dz, s->dgate, r, &d, m->moe_aux_coeff, daux);
        dt_moe_router_bwd(dx, g->wr, s->dz, x, p->wr, &d);
        dt_tensor_ref o[] = {F32("dx", dx, N, C), F32("dwr", g->wr, E, C), F32("dz", s->dz, N, E)};
        dt_t_end(m, h, "moe_router_bwd", dx, (size_t)N * C, o, COUNT(o));
    }
}
