/* The GPU model's forward: the batch upload, the embedding, each layer's attention block and
 * MLP slot, the head and the fused cross-entropy; the loss read-back. */
#include "model/cuda/model.cuh"

static dt_status t_encoder_fwd(dt_gpt_cuda *m, const dt_dropout *hd) {
    int B = m->B, T = m->T, C = m->cfg.channels;
    OP_BEGIN(DT_PHASE_FWD, "encoder_fwd", -1,
             (IN("tokens", m->d_in, DT_DT_I32, B, T), IN("wte", P(DT_P_WTE), F32, m->cfg.padded_vocab, C),
              IN("wpe", P(DT_P_WPE), F32, m->cfg.max_seq_len, C)));
    dt_cu_encoder_fwd(m->act.encoded, m->d_in, P(DT_P_WTE), P(DT_P_WPE), B, T, C, hd, DT_RNG_DROPOUT_HIDDEN,
                      EMB_SITE, m->s);
    TRY(gcu_inject(m, "encoder_fwd", m->act.encoded, (size_t)B * T * C, 2));
    OP_END(OUT("y", m->act.encoded, BF, BTC));
    return DT_OK;
}

/* out = LN(x) (res NULL, branch NULL), or res = x + dropout(branch), out = LN(res): the
 * residual add of a block fused with the next LayerNorm ("residual_layernorm_fwd"). */
static dt_status t_layernorm_fwd(dt_gpt_cuda *m, bf16 *out, float *mean, float *rstd, bf16 *res, const bf16 *x,
                                 const bf16 *branch, const float *w, const float *b, const dt_dropout *hd,
                                 uint32_t site) {
    int BT = m->B * m->T, C = m->cfg.channels;
    const char *op = res ? "residual_layernorm_fwd" : "layernorm_fwd";
    OP_BEGIN(DT_PHASE_FWD, op, -1,
             (IN("x", x, BF, BTC), IN("branch", branch, BF, BT, branch ? C : 0), IN("w", w, F32, 1, C),
              IN("b", b, F32, 1, C)));
    dt_cu_layernorm_fwd(out, mean, rstd, res, x, branch, w, b, BT, C, res ? hd : NULL,
                        DT_RNG_DROPOUT_HIDDEN, site, m->s);
    TRY(gcu_inject(m, op, out, (size_t)BT * C, 2));
    OP_END((OUT("residual", res, BF, BT, res ? C : 0), OUT("y", out, BF, BTC), OUT("mean", mean, F32, BT, 1),
            OUT("rstd", rstd, F32, BT, 1)));
    return DT_OK;
}

/* The attention kernels in use, as named in env.json and the kernel-level trace. */
const char *gcu_attention_name(const dt_gpt_cuda *m) {
    return m->ch.flash_wgmma ? "flash (wgmma)" : m->ch.flash ? "flash" : "gemm";
}

static dt_status t_attention_fwd(dt_gpt_cuda *m, bf16 *atty, bf16 *att, float *lse, const bf16 *qkv,
                                 const dt_dropout *ad, int l) {
    int B = m->B, T = m->T, C = m->cfg.channels, NH = m->cfg.num_heads;
    OP_BEGIN(DT_PHASE_FWD, "attention_fwd", -1, IN("qkv", qkv, BF, (int64_t)B * T, 3 * C));
    if (h_) dt_trace_kernel_info(h_, "%s B=%d T=%d C=%d NH=%d", gcu_attention_name(m), B, T, C, NH);
    if (m->ch.flash_wgmma)
        dt_cu_flash_fwd_wgmma(atty, lse, qkv, B, T, C, NH, m->s);
    else if (m->ch.flash)
        dt_cu_flash_fwd(atty, lse, qkv, B, T, C, NH, m->s);
    else
        TRY(dt_cu_attention_fwd(m->blas, atty, att, qkv, m->att_scratch, B, T, C, NH, ad, (uint32_t)l, m->s));
    TRY(gcu_inject(m, "attention_fwd", atty, (size_t)B * T * C, 2));
    OP_END((OUT("y", atty, BF, BTC), OUT("lse", lse, F32, lse ? (int64_t)B * NH * T : 0, 1),
            OUT("att", att, BF, att ? (int64_t)B * NH * T : 0, T)));
    return DT_OK;
}

static dt_status t_gelu_fwd(dt_gpt_cuda *m, bf16 *out, const bf16 *inp, size_t n) {
    int64_t BT = (int64_t)m->B * m->T;
    OP_BEGIN(DT_PHASE_FWD, "gelu_fwd", -1, IN("x", inp, BF, BT, (int64_t)n / BT));
    dt_cu_gelu_fwd(out, inp, n, m->s);
    TRY(gcu_inject(m, "gelu_fwd", out, n, 2));
    OP_END(OUT("y", out, BF, BT, (int64_t)n / BT));
    return DT_OK;
}

/* Fused softmax cross-entropy (its backward too when loss_scale != 0: the logits buffer
 * then holds dlogits), then the mean-loss reduction into stats[0]. */
static dt_status t_crossentropy(dt_gpt_cuda *m, float loss_scale) {
    int BT = m->B * m->T, V = m->cfg.vocab_size, Vp = m->cfg.padded_vocab;
    {
        OP_BEGIN(DT_PHASE_FWD, "crossentropy", -1,
                 (IN("logits", m->act.logits, BF, BT, Vp), IN("targets", m->d_tg, DT_DT_I32, m->B, m->T)));
        dt_cu_crossentropy(m->act.losses, m->act.logits, m->d_tg, loss_scale / (float)BT, BT, V, Vp, m->s);
        if (loss_scale != 0.0f) TRY(gcu_inject(m, "crossentropy", m->act.logits, (size_t)BT * Vp, 2));
        else TRY(gcu_inject(m, "crossentropy", m->act.losses, (size_t)BT, 4));
        OP_END((OUT("losses", m->act.losses, F32, BT, 1),
                OUT("dlogits", m->act.logits, BF, BT, loss_scale != 0.0f ? Vp : 0)));
    }
    OP_BEGIN(DT_PHASE_FWD, "crossentropy_mean", DT_OP_CROSSENTROPY, IN("losses", m->act.losses, F32, BT, 1));
    dt_cu_reduce(m->stats, NULL, m->red_part, m->act.losses, (size_t)BT, 0,
                 dt_crossentropy_choose() == DT_REDUCE_DET, m->s);
    TRY(gcu_inject(m, "crossentropy_mean", m->stats, 1, 8));
    OP_END(OUT("loss_sum", m->stats, DT_DT_F64, 1, 1));
    return DT_OK;
}

/* Layer l's attention block from its LayerNorm'd input (ln1, made by the block before):
 * qkv, attention, attproj, then res2 = res + dropout(attproj) fused with ln2 = LN2(res2),
 * the MLP slot's input. */
static dt_status attention_fwd(dt_gpt_cuda *m, int l, const bf16 *res, const dt_dropout *hd, const dt_dropout *ad) {
    int B = m->B, T = m->T, C = m->cfg.channels, NH = m->cfg.num_heads, BT = B * T;
    size_t sc = (size_t)BT * C, TT = (size_t)T * T, lC = (size_t)l * C;
    bf16 *ln1 = m->act.ln1 + l * sc, *qkv = m->act.qkv + l * sc * 3, *atty = m->act.atty + l * sc;
    bf16 *att = m->act.att ? m->act.att + (size_t)l * B * NH * TT : NULL, *attproj = m->act.attproj + l * sc;
    gcu_rbegin(m, DT_R_MATMUL_FWD);
    TRY(gcu_linear_fwd(m, qkv, ln1, P16(DT_P_QKVW) + lC * 3 * C, P16(DT_P_QKVB) + lC * 3, BT, C, 3 * C));
    gcu_rend(m, DT_R_MATMUL_FWD);
    gcu_rbegin(m, DT_R_ATTN_FWD);
    TRY(t_attention_fwd(m, atty, att, m->ch.flash ? m->act.att_lse + (size_t)l * B * NH * T : NULL, qkv, ad, l));
    gcu_rend(m, DT_R_ATTN_FWD);
    gcu_rbegin(m, DT_R_MATMUL_FWD);
    TRY(gcu_linear_fwd(m, attproj, atty, P16(DT_P_ATTPROJW) + lC * C, P16(DT_P_ATTPROJB) + lC, BT, C, C));
    gcu_rend(m, DT_R_MATMUL_FWD);
    gcu_rbegin(m, DT_R_LN_FWD); /* res2 = res + dropout(attproj), ln2 = LN(res2) */
    TRY(t_layernorm_fwd(m, m->act.ln2 + l * sc, m->act.ln2_mean + (size_t)l * BT, m->act.ln2_rstd + (size_t)l * BT,
                        m->act.res2 + l * sc, res, attproj, P(DT_P_LN2W) + lC, P(DT_P_LN2B) + lC, hd, 2u * (uint32_t)l));
    gcu_rend(m, DT_R_LN_FWD);
    return DT_OK;
}

/* Layer l's dense MLP from ln2: fc with its GELU (fused in the GEMM's epilogue, or a GELU
 * kernel after it), fcproj, then res3 = res2 + dropout(fcproj) fused with the next
 * block's LayerNorm (the next layer's ln1, or lnf after the last layer). */
static dt_status dense_mlp_fwd(dt_gpt_cuda *m, int l, const dt_dropout *hd) {
    int BT = m->B * m->T, C = m->cfg.channels, L = m->cfg.num_layers;
    size_t sc = (size_t)BT * C, lC = (size_t)l * C;
    bf16 *res2 = m->act.res2 + l * sc, *ln2 = m->act.ln2 + l * sc, *fch = m->act.fch + l * sc * 4;
    bf16 *fchg = m->act.fchg + l * sc * 4, *fcproj = m->act.fcproj + l * sc, *res3 = m->act.res3 + l * sc;
    gcu_rbegin(m, DT_R_MATMUL_FWD);
    if (m->ch.fuse_gelu) {
        TRY(gcu_linear_gelu_fwd(m, fchg, fch, ln2, P16(DT_P_FCW) + lC * 4 * C, P16(DT_P_FCB) + lC * 4, BT, C, 4 * C));
        gcu_rend(m, DT_R_MATMUL_FWD);
    } else {
        TRY(gcu_linear_fwd(m, fch, ln2, P16(DT_P_FCW) + lC * 4 * C, P16(DT_P_FCB) + lC * 4, BT, C, 4 * C));
        gcu_rend(m, DT_R_MATMUL_FWD);
        gcu_rbegin(m, DT_R_GELU_FWD);
        TRY(t_gelu_fwd(m, fchg, fch, sc * 4));
        gcu_rend(m, DT_R_GELU_FWD);
    }
    gcu_rbegin(m, DT_R_MATMUL_FWD);
    TRY(gcu_linear_fwd(m, fcproj, fchg, P16(DT_P_FCPROJW) + lC * 4 * C, P16(DT_P_FCPROJB) + lC, BT, 4 * C, C));
    gcu_rend(m, DT_R_MATMUL_FWD);
    int last = l == L - 1;
    gcu_rbegin(m, DT_R_LN_FWD);
    TRY(t_layernorm_fwd(m, last ? m->act.lnf : m->act.ln1 + (l + 1) * sc,
                        last ? m->act.lnf_mean : m->act.ln1_mean + (size_t)(l + 1) * BT,
                        last ? m->act.lnf_rstd : m->act.ln1_rstd + (size_t)(l + 1) * BT, res3, res2, fcproj,
                        last ? P(DT_P_LNFW) : P(DT_P_LN1W) + lC + C, last ? P(DT_P_LNFB) : P(DT_P_LN1B) + lC + C, hd,
                        2u * (uint32_t)l + 1u));
    gcu_rend(m, DT_R_LN_FWD);
    return DT_OK;
}

/* Layer l's MLP slot: the block its kind names (model/blocks.h). */
static dt_status mlp_fwd(dt_gpt_cuda *m, int l, const dt_dropout *hd) {
    switch (dt_gpt_mlp_kind(&m->cfg, l)) {
    case DT_BLOCK_MLP_DENSE: return dense_mlp_fwd(m, l, hd);
    default: return dt_fail(DT_EUNSUPPORTED, "layer %d: the GPU model has no %s block", l,
                            dt_block_kind_name(dt_gpt_mlp_kind(&m->cfg, l)));
    }
}

/* The forward's launches, from the batch's upload (h_in, h_tg) to the loss sum. */
static dt_status forward_launches(dt_gpt_cuda *m) {
    const dt_gpt_config *c = &m->cfg;
    int B = m->B, T = m->T, C = c->channels, L = c->num_layers;
    int Vp = c->padded_vocab, BT = B * T;
    cudaStream_t s = m->s;
    TRY(dt_cu_check(cudaMemcpyAsync(m->d_in, m->h_in, sizeof(int) * BT, cudaMemcpyHostToDevice, s), "upload"));
    TRY(dt_cu_check(cudaMemcpyAsync(m->d_tg, m->h_tg, sizeof(int) * BT, cudaMemcpyHostToDevice, s), "upload"));
    size_t sc = (size_t)BT * C;
    dt_dropout hd = gcu_hidden_drop(m), ad = gcu_attn_drop(m);
    dt_trace_scope_push("embed");
    gcu_rbegin(m, DT_R_EMBED_FWD);
    TRY(t_encoder_fwd(m, &hd));
    gcu_rend(m, DT_R_EMBED_FWD);
    dt_trace_scope_pop();
    gcu_rbegin(m, DT_R_LN_FWD);
    TRY(t_layernorm_fwd(m, m->act.ln1, m->act.ln1_mean, m->act.ln1_rstd, NULL, m->act.encoded, NULL, P(DT_P_LN1W),
                        P(DT_P_LN1B), NULL, 0));
    gcu_rend(m, DT_R_LN_FWD);
    for (int l = 0; l < L; l++) {
        const bf16 *res = l == 0 ? m->act.encoded : m->act.res3 + (size_t)(l - 1) * sc;
        dt_trace_op *blk = NULL;
        TRY(gcu_block_begin(m, &blk, DT_PHASE_FWD, l, res, DT_DT_BF16));
        TRY(attention_fwd(m, l, res, &hd, &ad));
        TRY(mlp_fwd(m, l, &hd));
        TRY(gcu_block_end(m, blk, DT_PHASE_FWD, l, m->act.res3 + (size_t)l * sc, DT_DT_BF16));
    }
    dt_trace_scope_push("head");
    gcu_rbegin(m, DT_R_HEAD_FWD);
    TRY(gcu_linear_fwd(m, m->act.logits, m->act.lnf, P16(DT_P_WTE), NULL, BT, C, Vp));
    gcu_rend(m, DT_R_HEAD_FWD);
    gcu_rbegin(m, DT_R_CROSSENTROPY);
    TRY(t_crossentropy(m, m->loss_scale));
    gcu_rend(m, DT_R_CROSSENTROPY);
    dt_trace_scope_pop();
    return dt_cu_check(cudaGetLastError(), "forward launch");
}

dt_status dt_gpt_cuda_forward(dt_gpt_cuda *m, const int *inputs, const int *targets, float loss_scale) {
    int V = m->cfg.vocab_size, BT = m->B * m->T;
    for (int i = 0; i < BT; i++)
        if (inputs[i] < 0 || inputs[i] >= V || targets[i] < 0 || targets[i] >= V)
            return dt_fail(DT_EINVAL, "token at batch position %d (input %d, target %d) is "
                           "outside the vocabulary [0, %d): check --vocab-size against the data",
                           i, inputs[i], targets[i], V);
    /* the previous step may still copy from the batch buffers (an event, not the stream:
     * zero_grad's clears may be queued behind it, and the device runs them meanwhile) */
    TRY(dt_cu_check(cudaEventSynchronize(m->ev_batch), "cudaEventSynchronize"));
    TRY(dt_cu_check(cudaEventSynchronize(m->ev_buckets), "cudaEventSynchronize"));
    memcpy(m->h_in, inputs, sizeof(int) * BT);
    memcpy(m->h_tg, targets, sizeof(int) * BT);
    m->loss_scale = loss_scale;
    m->loss_read = 0;
    dt_cu_launch_log(dt_trace_on(DT_TRACE_KERNEL)); /* launches noted only for kernel-level events */
    m->nchunk = m->nmulti = 0; /* the det embedding buckets are built in backward, while the forward runs */
    TRY(gcu_run_phase(m, loss_scale != 0.0f ? G_FWD : G_FWD_EVAL, forward_launches));
    return dt_cu_check(cudaEventRecord(m->ev_batch, m->s), "cudaEventRecord");
}

/* Queues the copies of stats[0..3] and zeros into the pinned h_stats / h_zeros, then
 * ev_stats; wait_stats waits for that event only (work queued after it goes on). */
dt_status gcu_queue_stats(dt_gpt_cuda *m) {
    TRY(dt_cu_check(cudaMemcpyAsync(m->h_stats, m->stats, sizeof(double) * 4, cudaMemcpyDeviceToHost, m->s),
                    "stats"));
    TRY(dt_cu_check(cudaMemcpyAsync(m->h_zeros, m->zeros, sizeof(long long), cudaMemcpyDeviceToHost, m->s),
                    "stats"));
    return dt_cu_check(cudaEventRecord(m->ev_stats, m->s), "cudaEventRecord");
}

dt_status gcu_wait_stats(dt_gpt_cuda *m) {
    DT_CU_TRY(cudaGetLastError());
    return dt_cu_check(cudaEventSynchronize(m->ev_stats), "cudaEventSynchronize");
}

dt_status gcu_read_stats(dt_gpt_cuda *m) {
    TRY(gcu_queue_stats(m));
    return gcu_wait_stats(m);
}

dt_status dt_gpt_cuda_loss(dt_gpt_cuda *m, double *loss) {
    if (!m->loss_read) { /* no step since the forward: read it now */
        TRY(gcu_read_stats(m));
        m->loss_sum = m->h_stats[0];
        m->loss_read = 1;
    }
    *loss = m->loss_sum / ((double)m->B * m->T);
    return DT_OK;
}
