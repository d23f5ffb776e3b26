/* The GPU model's trace hooks (DESIGN §6: module and op events, digests on the device,
 * fault injection) and its named-range timing (the bench's leaderboard). */
#include "model/cuda/model.cuh"

static const char *range_names[DT_R_COUNT] = {
    "embed_fwd", "layernorm_fwd", "matmul_fwd", "attention_fwd", "gelu_fwd", "head_fwd",
    "crossentropy", "head_bwd", "matmul_bwd", "bias_bwd", "gelu_bwd", "attention_bwd",
    "layernorm_bwd", "dropout", "embed_bwd", "grad_norm", "adamw",
};

const char *dt_gpt_cuda_range_name(int r) { return r >= 0 && r < DT_R_COUNT ? range_names[r] : "?"; }

void gcu_rbegin(dt_gpt_cuda *m, int r) {
    nvtxRangePushA(range_names[r]);
    if (m->prof && m->nev + 2 <= MAX_EVENTS) {
        cudaEventRecord(m->ev[m->nev], m->s);
        m->ev_range[m->nev++] = r;
    }
}

void gcu_rend(dt_gpt_cuda *m, int r) {
    nvtxRangePop();
    if (m->prof && m->nev + 1 <= MAX_EVENTS && m->nev > 0 && m->ev_range[m->nev - 1] == r) {
        cudaEventRecord(m->ev[m->nev], m->s);
        m->ev_range[m->nev++] = -1;
    }
}

void dt_gpt_cuda_profile(dt_gpt_cuda *m, int on) { m->prof = on; }

dt_status dt_gpt_cuda_range_ms(dt_gpt_cuda *m, double ms[DT_R_COUNT]) {
    DT_CU_TRY(cudaStreamSynchronize(m->s));
    for (int i = 0; i + 1 < m->nev; i++) {
        if (m->ev_range[i] < 0 || m->ev_range[i + 1] != -1) continue;
        float t = 0.0f;
        DT_CU_TRY(cudaEventElapsedTime(&t, m->ev[i], m->ev[i + 1]));
        ms[m->ev_range[i]] += t;
    }
    m->nev = 0;
    return DT_OK;
}

void gcu_gset_init(dt_gtrace_set *s) { s->n = s->overflow = s->nrows_used = 0; }

const char *gcu_variant_name(int op) {
    if (op < 0) return NULL; /* one path, deterministic by nature */
    return dt_op_variant((dt_op_id)op) == DT_VARIANT_DET ? "det" : "fast";
}

/* --inject-nondeterminism: flips the lowest bit of n elements at p after `op`. */
dt_status gcu_inject(dt_gpt_cuda *m, const char *op, void *p, size_t n, int esize) {
    return dt_gtrace_inject(op, m->step, p, n, esize, m->s);
}

/* Kernel-level detail of the op's own kernels: every launch noted since OP_BEGIN (name,
 * grid, block, shared memory; the launch log of ops/cuda/launch_log.h). */
void gcu_launch_info(dt_trace_op *h) {
    if (!dt_trace_on(DT_TRACE_KERNEL)) return;
    char buf[1024];
    if (dt_cu_launch_take(buf, sizeof buf) > 0) dt_trace_kernel_info(h, "%s", buf);
}

/* Kernel-level detail of the GEMM just queued (algorithm, tile, split-K). */
void gcu_gemm_info(dt_gpt_cuda *m, dt_trace_op *h, const char *what) {
    if (!h || !dt_trace_on(DT_TRACE_KERNEL)) return;
    char buf[400];
    dt_cu_gemm_describe_last(m->blas, buf, sizeof buf);
    dt_trace_kernel_info(h, "%s: %s", what, buf);
}

/* Module-level event of block l: its input (the residual stream or its gradient) and the
 * layer's parameters, plus its gradients in the backward (as the CPU model's block events).
 * With the plan's ln_colsum, block l's LN1 backward also adds into layer l-1's fcproj bias gradient:
 * that tensor is one of block l's backward gradients too ("dfcprojb.prev"). */
static void layer_tensors(dt_gpt_cuda *m, dt_gtrace_set *s, int l, int grads) {
    for (int i = DT_P_LN1W; i <= DT_P_FCPROJB; i++) {
        /* a weight gradient made after the layers (--dw-batch on) belongs to that op's event */
        if (grads && ((i == DT_P_QKVW && m->bp.dw_batched[DT_CU_LIN_QKV]) ||
                      (i == DT_P_FCW && m->bp.dw_batched[DT_CU_LIN_FC]) ||
                      ((i == DT_P_FCPROJW || i == DT_P_ATTPROJW) && m->bp.keep_res)))
            continue;
        const dt_param_desc *d = &m->params[i];
        size_t per_layer = d->numel / (size_t)d->shape[0];
        int64_t rows = d->ndim == 3 ? d->shape[1] : 1, cols = d->ndim == 3 ? d->shape[2] : d->shape[1];
        const float *base = grads ? m->grad : m->param;
        dt_gtrace_add(s, grads ? m->gname[i] : m->pname[i], base + d->offset + (size_t)l * per_layer,
                      DT_DT_F32, rows, cols);
    }
    if (grads && m->bp.ln_colsum && l > 0)
        dt_gtrace_add(s, "dfcprojb.prev", m->grad + m->params[DT_P_FCPROJB].offset + (size_t)(l - 1) * m->cfg.channels,
                      DT_DT_F32, 1, m->cfg.channels);
}

dt_status gcu_block_begin(dt_gpt_cuda *m, dt_trace_op **h, int phase, int l, const void *x, int xdtype) {
    char scope[32];
    snprintf(scope, sizeof scope, "h.%d", l);
    dt_trace_scope_push(scope);
    *h = NULL;
    if (!dt_trace_on(DT_TRACE_MODULE)) return DT_OK;
    dt_gtrace_set s;
    gcu_gset_init(&s);
    dt_gtrace_add(&s, "x", x, xdtype, (int64_t)m->B * m->T, m->cfg.channels);
    layer_tensors(m, &s, l, 0);
    if (phase == DT_PHASE_BWD) layer_tensors(m, &s, l, 1);
    TRY(gcu_join_fin(m));
    return dt_gtrace_begin(h, DT_TRACE_MODULE, phase, phase == DT_PHASE_FWD ? "block_fwd" : "block_bwd",
                           NULL, &s, m->s);
}

dt_status gcu_block_end(dt_gpt_cuda *m, dt_trace_op *h, int phase, int l, const void *y, int ydtype) {
    dt_status st = DT_OK;
    if (h) {
        dt_gtrace_set s;
        gcu_gset_init(&s);
        dt_gtrace_add(&s, phase == DT_PHASE_FWD ? "y" : "dx", y, ydtype, (int64_t)m->B * m->T, m->cfg.channels);
        if (phase == DT_PHASE_BWD) layer_tensors(m, &s, l, 1);
        st = gcu_join_fin(m);
        if (st == DT_OK) st = dt_gtrace_end(h, &s, m->s);
    }
    dt_trace_scope_pop();
    return st;
}

/* The whole gradient and parameter slabs as trace inputs (semantic and metrics events). */
void gcu_state_tensors(dt_gpt_cuda *m, dt_gtrace_set *s, int opt) {
    int64_t n = (int64_t)m->num_params;
    dt_gtrace_add(s, "params", m->param, DT_DT_F32, 1, n);
    dt_gtrace_add(s, "grads", m->grad, DT_DT_F32, 1, n);
    if (opt) {
        dt_gtrace_add(s, "adam_m", m->adam_m, DT_DT_F32, 1, n);
        dt_gtrace_add(s, "adam_v", m->adam_v, DT_DT_F32, 1, n);
    }
}

dt_status dt_gpt_cuda_trace_metrics(dt_gpt_cuda *m, const dt_tensor_ref *values, int n) {
    if (!dt_trace_on(DT_TRACE_METRICS)) return DT_OK;
    dt_gtrace_set in;
    gcu_gset_init(&in);
    gcu_state_tensors(m, &in, 0);
    TRY(dt_gtrace_digest(&in, m->s));
    dt_trace_event(DT_TRACE_METRICS, DT_PHASE_OTHER, "step_metrics", NULL, in.r, in.n, values, n);
    return DT_OK;
}
