/* The GPU model's step: gradient statistics (grad norm, param norm, num-zeros) and the
 * AdamW update; the parameters and optimizer state up and down. */
#include "model/cuda/model.cuh"

__global__ void sqrt_kernel(double *x) { x[3] = sqrt(x[1]); }

dt_status dt_gpt_cuda_step(dt_gpt_cuda *m, const dt_adamw_config *c, float lr, int64_t t,
                           dt_grad_stats *stats) {
    int det = dt_reduce_choose(DT_OP_NORM) == DT_REDUCE_DET;
    dt_trace_op *h = NULL;
    if (dt_trace_on(DT_TRACE_SEMANTIC)) {
        dt_gtrace_set in;
        gcu_gset_init(&in);
        gcu_state_tensors(m, &in, 0);
        TRY(dt_gtrace_begin(&h, DT_TRACE_SEMANTIC, DT_PHASE_OPT, "grad_stats", gcu_variant_name(DT_OP_NORM), &in, m->s));
    }
    /* The parameter norm: the chunk sums the last update wrote of the parameters it made
     * (no pass of its own), or, for parameters no update made (the first step), the same
     * kernel without the update: the same bits either way. So every statistic is ready
     * before the update runs, and the host reads them back without waiting for it. */
    dt_cu_adamw_args a; /* the chunk table and pn_part serve the norm-only kernel and the update */
    memset(&a, 0, sizeof a);
    a.chunks = m->chunks;
    a.nchunks = m->nchunks;
    a.pnorm_part = m->pn_part; /* the update writes the next step's parameter norm */
    gcu_rbegin(m, DT_R_NORM);
    dt_cu_reduce(m->stats + 1, m->zeros, m->red_part, m->grad, m->num_params, 1, det, m->s);
    sqrt_kernel<<<1, 1, 0, m->s>>>(m->stats);
    if (!m->pn_valid) dt_cu_adamw_pnorm(m->param, &a, m->s);
    dt_cu_sum_parts(m->stats + 2, m->pn_part, m->nchunks, m->s);
    gcu_rend(m, DT_R_NORM);
    TRY(gcu_queue_stats(m)); /* before the update: the host waits for the statistics only */
    const double *hs = m->h_stats;
    if (h) { /* the statistics are the event's outputs */
        TRY(gcu_wait_stats(m));
        double gn = sqrt(hs[1]), pn = sqrt(hs[2]);
        int64_t nz = *m->h_zeros;
        dt_tensor_ref out[3];
        memset(out, 0, sizeof out);
        out[0].name = "grad_norm"; out[0].data = &gn; out[0].dtype = DT_DT_F64;
        out[1].name = "param_norm"; out[1].data = &pn; out[1].dtype = DT_DT_F64;
        out[2].name = "num_zeros"; out[2].data = &nz; out[2].dtype = DT_DT_I64;
        dt_trace_end(h, out, 3);
        h = NULL;
    }
    a.lr = lr;
    a.beta1 = c->beta1;
    a.beta2 = c->beta2;
    a.eps = c->eps;
    a.bc1 = 1.0f - powf(c->beta1, (float)t); /* as optim/optim.c */
    a.bc2 = 1.0f - powf(c->beta2, (float)t);
    a.clip_grad = c->clip_grad;
    a.grad_norm = m->stats + 3;
    /* weight decay per tensor: 0 where the tensor does not decay */
    if (!m->decay_set || m->decay_value != c->weight_decay) { /* a blocking upload, once */
        float wd[DT_NUM_PARAM_TENSORS];
        for (int i = 0; i < DT_NUM_PARAM_TENSORS; i++) wd[i] = m->params[i].decay ? c->weight_decay : 0.0f;
        TRY(dt_cu_check(cudaMemcpyAsync(m->decay, wd, sizeof wd, cudaMemcpyHostToDevice, m->s), "upload"));
        TRY(dt_cu_check(cudaStreamSynchronize(m->s), "cudaStreamSynchronize"));
        m->decay_set = 1;
        m->decay_value = c->weight_decay;
    }
    a.decay = m->decay;
    if (dt_trace_on(DT_TRACE_SEMANTIC)) {
        dt_gtrace_set in;
        gcu_gset_init(&in);
        gcu_state_tensors(m, &in, 1);
        TRY(dt_gtrace_begin(&h, DT_TRACE_SEMANTIC, DT_PHASE_OPT, "adamw", NULL, &in, m->s));
    }
    gcu_rbegin(m, DT_R_ADAMW);
    dt_cu_adamw(m->param, m->param16, m->grad, m->adam_m, m->adam_v, &a, m->s);
    m->pn_valid = 1;
    gcu_rend(m, DT_R_ADAMW);
    int fired = dt_inject_fired();
    TRY(gcu_inject(m, "adamw", m->param, m->num_params, 4));
    if (dt_inject_fired() != fired) m->pn_valid = 0; /* a parameter changed after the update summed it */
    if (h) {
        dt_gtrace_set out;
        gcu_gset_init(&out);
        int64_t n = (int64_t)m->num_params;
        dt_gtrace_add(&out, "params", m->param, DT_DT_F32, 1, n);
        dt_gtrace_add(&out, "adam_m", m->adam_m, DT_DT_F32, 1, n);
        dt_gtrace_add(&out, "adam_v", m->adam_v, DT_DT_F32, 1, n);
        TRY(dt_gtrace_end(h, &out, m->s));
    }
    /* the statistics, while the update runs: the caller's next launches queue behind it */
    TRY(gcu_wait_stats(m));
    m->loss_sum = hs[0]; /* stats[0] is the forward's loss sum: dt_gpt_cuda_loss need not wait again */
    m->loss_read = 1;
    stats->grad_norm = sqrt(hs[1]);
    stats->param_norm = sqrt(hs[2]);
    stats->num_zeros = *m->h_zeros;
    return DT_OK;
}

dt_status dt_gpt_cuda_reduce_grads(dt_gpt_cuda *m, dt_comm *comm) {
    if (dt_comm_size(comm) == 1) return DT_OK; /* one rank holds the sum: the single-process bits and time */
    if (!comm->ops->device)
        return dt_fail(DT_EINVAL, "--device cuda with %d ranks: the %s communicator moves host memory; the GPU "
                       "gradients need the NCCL engine (--dist-engine nccl)", dt_comm_size(comm), comm->ops->engine);
    dt_trace_op *h = NULL;
    int64_t n = (int64_t)m->num_params;
    if (dt_trace_on(DT_TRACE_SEMANTIC)) {
        dt_gtrace_set in;
        gcu_gset_init(&in);
        dt_gtrace_add(&in, "grads", m->grad, DT_DT_F32, 1, n);
        TRY(dt_gtrace_begin(&h, DT_TRACE_SEMANTIC, DT_PHASE_COMM, "grad_reduce",
                            dt_comm_reduce_mode() == DT_REDUCE_RANK_ORDERED ? "rank_ordered" : "library", &in, m->s));
    }
    TRY(dt_comm_allreduce(comm, m->grad, m->num_params, DT_COMM_F32, m->s));
    if (h) {
        dt_gtrace_set out;
        gcu_gset_init(&out);
        dt_gtrace_add(&out, "grads", m->grad, DT_DT_F32, 1, n);
        TRY(dt_gtrace_end(h, &out, m->s));
    }
    return DT_OK;
}

dt_status dt_gpt_cuda_get_params(dt_gpt_cuda *m, float *dst) {
    TRY(dt_gpt_cuda_sync(m));
    return dt_cu_check(cudaMemcpy(dst, m->param, sizeof(float) * m->num_params, cudaMemcpyDeviceToHost), "download");
}

dt_status dt_gpt_cuda_get_grads(dt_gpt_cuda *m, float *dst) {
    TRY(dt_gpt_cuda_sync(m));
    return dt_cu_check(cudaMemcpy(dst, m->grad, sizeof(float) * m->num_params, cudaMemcpyDeviceToHost), "download");
}

dt_status dt_gpt_cuda_get_opt_state(dt_gpt_cuda *m, float *mstate, float *vstate) {
    TRY(dt_gpt_cuda_sync(m));
    TRY(dt_cu_check(cudaMemcpy(mstate, m->adam_m, sizeof(float) * m->num_params, cudaMemcpyDeviceToHost), "download"));
    return dt_cu_check(cudaMemcpy(vstate, m->adam_v, sizeof(float) * m->num_params, cudaMemcpyDeviceToHost), "download");
}

/* Uploads run on the model's stream (a pageable cudaMemcpy may return before the copy
 * lands, while the stream's next kernel must see it), then wait for it. */
dt_status dt_gpt_cuda_set_opt_state(dt_gpt_cuda *m, const float *mstate, const float *vstate) {
    TRY(dt_gpt_cuda_sync(m));
    TRY(dt_cu_check(cudaMemcpyAsync(m->adam_m, mstate, sizeof(float) * m->num_params, cudaMemcpyHostToDevice, m->s),
                    "upload AdamW m"));
    TRY(dt_cu_check(cudaMemcpyAsync(m->adam_v, vstate, sizeof(float) * m->num_params, cudaMemcpyHostToDevice, m->s),
                    "upload AdamW v"));
    return dt_gpt_cuda_sync(m);
}
