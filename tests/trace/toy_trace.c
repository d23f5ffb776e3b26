/* Toy traced loop for trace-diff tests (see toy_trace.h). */
#include "toy_trace.h"

#include "trace/inject.h"
#include "trace/trace.h"

#include <stdio.h>
#include <string.h>

void toy_defaults(toy_opts *o) {
    memset(o, 0, sizeof *o);
    o->nranks = 2;
    o->nsteps = 5;
    o->inject_step = -1;
    o->permute_step = -1;
    o->skip_layernorm_step = -1;
    o->extra_event_step = -1;
    o->swap_aux_step = -1;
}

#define N (TOY_R * TOY_C)

static dt_tensor_ref T(const char *name, const float *p) {
    dt_tensor_ref t = {.name = name, .data = p, .dtype = DT_DT_F32, .ndim = 2, .shape = {TOY_R, TOY_C}};
    return t;
}

static void maybe_inject(const toy_opts *o, int rank, const char *op, int step, float *out) {
    if (o->inject_op && (o->inject_ranks >> rank & 1u) && dt_inject_should(op, step))
        dt_inject_flip_lsb(out, N);
}

static void aux(const char *op, const float *x, float *out, float k) {
    for (int i = 0; i < N; i++) out[i] = x[i] * k;
    dt_tensor_ref in = T("x", x), o = T("a", out);
    dt_trace_event(DT_TRACE_OP, DT_PHASE_FWD, op, "det", &in, 1, &o, 1);
}

int toy_run(const char *dir, const toy_opts *o) {
    for (int rank = 0; rank < o->nranks; rank++) {
        dt_trace_config cfg = {o->level ? o->level : DT_TRACE_OP, dir, o->steps, NULL, o->digest};
        if (dt_trace_open(&cfg, rank) != DT_OK) return 1;
        dt_inject inj = {0};
        if (o->inject_op) {
            inj.enabled = 1;
            snprintf(inj.op, sizeof inj.op, "%s", o->inject_op);
            inj.step = o->inject_step;
        }
        dt_inject_set(&inj);
        float w[N], x[N], h[N], h2[N], y[N], p[N], g[N], a1[N], a2[N];
        for (int i = 0; i < N; i++) w[i] = 0.25f * (float)(i % 5) - 0.5f;
        for (int step = 0; step < o->nsteps; step++) {
            dt_trace_set_step(step, 0);
            for (int i = 0; i < N; i++) x[i] = (float)((i * 7 + step * 3 + rank) % 11) * 0.1f;

            dt_trace_scope_push("emb");
            for (int i = 0; i < N; i++) h[i] = x[i] + w[i];
            maybe_inject(o, rank, "embed", step, h);
            dt_tensor_ref ein[2] = {T("x", x), T("w", w)}, eout = T("h", h);
            dt_trace_event(DT_TRACE_OP, DT_PHASE_FWD, "embed", "det", ein, 2, &eout, 1);
            dt_trace_scope_pop();

            dt_trace_scope_push("h.0");
            dt_tensor_ref bin[2] = {T("h", h), T("w", w)};
            dt_trace_op *block = dt_trace_begin(DT_TRACE_MODULE, DT_PHASE_FWD, "block", NULL, bin, 2);
            for (int i = 0; i < N; i++) h2[i] = h[i] * 0.5f + 1.0f;
            maybe_inject(o, rank, "layernorm", step, h2);
            if (step != o->skip_layernorm_step) {
                dt_tensor_ref lin = T("h", h), lout = T("h2", h2);
                dt_trace_event(DT_TRACE_OP, DT_PHASE_FWD, "layernorm", "det", &lin, 1, &lout, 1);
            }
            if (step == o->swap_aux_step) { aux("aux_b", x, a2, 3.0f); aux("aux_a", x, a1, 2.0f); }
            else { aux("aux_a", x, a1, 2.0f); aux("aux_b", x, a2, 3.0f); }

            dt_trace_scope_push("mlp");
            for (int i = 0; i < N; i++) y[i] = h2[i] * w[i] + 0.125f;
            maybe_inject(o, rank, "matmul", step, y);
            dt_tensor_ref min[2] = {T("h2", h2), T("w", w)}, mout = T("y", y);
            dt_trace_event(DT_TRACE_OP, DT_PHASE_FWD, "matmul", "det", min, 2, &mout, 1);
            dt_trace_scope_pop();

            dt_trace_scope_push("moe");
            /* Fixed permutation of rows r -> (3r+1) mod R; the bug swaps rows 2 and 5. */
            for (int r = 0; r < TOY_R; r++) {
                int dst = (3 * r + 1) % TOY_R;
                if (step == o->permute_step) dst = dst == 2 ? 5 : dst == 5 ? 2 : dst;
                memcpy(&p[dst * TOY_C], &y[r * TOY_C], TOY_C * sizeof(float));
            }
            maybe_inject(o, rank, "router", step, p);
            dt_tensor_ref rin = T("y", y), rout = T("p", p);
            rout.order_sensitive = 1;
            dt_trace_event(DT_TRACE_OP, DT_PHASE_FWD, "router", "det", &rin, 1, &rout, 1);
            dt_trace_scope_pop();
            dt_tensor_ref bout = T("p", p);
            dt_trace_end(block, &bout, 1);
            dt_trace_scope_pop();

            if (step == o->extra_event_step) {
                dt_tensor_ref xin = T("x", x);
                dt_trace_event(DT_TRACE_OP, DT_PHASE_OTHER, "extra_probe", NULL, &xin, 1, NULL, 0);
            }
            for (int i = 0; i < N; i++) g[i] = p[i] * 0.5f;
            maybe_inject(o, rank, "loss_bwd", step, g);
            dt_tensor_ref lbin = T("p", p), lbout = T("g", g);
            dt_trace_event(DT_TRACE_OP, DT_PHASE_BWD, "loss_bwd", "det", &lbin, 1, &lbout, 1);

            dt_tensor_ref gin = T("g", g);
            dt_trace_op *ar = dt_trace_begin(DT_TRACE_SEMANTIC, DT_PHASE_COMM, "allreduce", "det", &gin, 1);
            maybe_inject(o, rank, "allreduce", step, g);
            dt_trace_end(ar, &gin, 1);

            dt_tensor_ref oin[2] = {T("w", w), T("g", g)};
            dt_trace_op *opt = dt_trace_begin(DT_TRACE_SEMANTIC, DT_PHASE_OPT, "adamw", "det", oin, 2);
            /* Scaling by a power of two is exact: a one-ulp change in g survives into w, so the
             * next step sees it (a real optimizer can absorb such a change). */
            for (int i = 0; i < N; i++) w[i] = g[i] * 0.5f;
            maybe_inject(o, rank, "adamw", step, w);
            dt_tensor_ref oout = T("w", w);
            dt_trace_end(opt, &oout, 1);
        }
        dt_inject_set(NULL);
        if (dt_trace_close() != DT_OK) return 1;
    }
    return 0;
}
