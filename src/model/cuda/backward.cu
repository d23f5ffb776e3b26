/* The GPU model's backward, in the CPU model's order (gpt.c): the head, each layer's MLP slot
 * and attention block, the batched weight gradients, the embedding; zero_grad. */
#include "model/cuda/model.cuh"

/* The bf16 gradient entering a dropout site's branch: a masked copy of dres16, or dres16. */
static dt_status through_dropout(dt_gpt_cuda *m, const dt_dropout *hd, uint32_t site, const bf16 **out) {
    *out = m->dres;
    if (!dt_dropout_on(hd)) return DT_OK;
    TRY(gcu_claim(m, m->dproj16));
    size_t n = (size_t)m->B * m->T * m->cfg.channels;
    gcu_rbegin(m, DT_R_DROPOUT);
    OP_BEGIN(DT_PHASE_BWD, "dropout_bwd", -1, IN("dx", m->dres16, BF, BTC));
    dt_cu_dropout_bf16(m->dproj16, m->dres16, n, hd, DT_RNG_DROPOUT_HIDDEN, site, m->s);
    TRY(gcu_inject(m, "dropout_bwd", m->dproj16, n, 2));
    OP_END(OUT("y", m->dproj16, BF, BTC));
    gcu_rend(m, DT_R_DROPOUT);
    *out = m->dproj16;
    return DT_OK;
}

/* out = m->dres + LN backward of dy (acc 0: out = it, for the first LayerNorm of the
 * backward), each element bf16(float(m->dres) + its gradient): the residual gradient is kept
 * in bf16 like the residual stream it belongs to, each addition made in fp32 and rounded
 * once; then m->dres = out. out is m->dres16 (in place, m->dres16 all along) unless the
 * backward keeps every residual gradient (the plan's keep_res: a slot of dres_all, written
 * out of place, the same bits). dw, db += the parameter grads. next_db (the plan's
 * ln_colsum; NULL for LN1 of layer 0): the bias gradient of the linear whose backward reads
 * out next (attproj after LN2, the previous layer's fcproj after LN1 and lnf), += the column
 * sums of out from the same kernel (DT_OP_BIAS_BWD), an output of this event ("colsum_dx");
 * the plan has that linear's bias from DT_CU_BIAS_LN_COLSUM. */
static dt_status t_layernorm_bwd(dt_gpt_cuda *m, int acc, float *dw, float *db, const bf16 *x, const float *w,
                                 const float *mean, const float *rstd, float *next_db, bf16 *out) {
    TRY(gcu_claim(m, out));
    int BT = m->B * m->T, C = m->cfg.channels;
    const bf16 *in = m->dres;
    OP_BEGIN(DT_PHASE_BWD, "layernorm_bwd", DT_OP_LAYERNORM_BWD,
             (IN("dy", m->dc1, BF, BTC), IN("x", x, BF, BTC), IN("w", w, F32, 1, C), IN("mean", mean, F32, BT, 1),
              IN("rstd", rstd, F32, BT, 1), IN("dx", in, BF, acc ? BT : 0, C), IN("dw", dw, F32, 1, C),
              IN("db", db, F32, 1, C), IN("colsum_dx", next_db, F32, 1, next_db ? C : 0)));
    if (acc && out != in)
        dt_cu_layernorm_bwd_from(out, in, dw, db, next_db, gcu_next_part(m), m->dc1, x, w, mean, rstd, BT, C, m->s,
                                 m->fin);
    else if (next_db)
        dt_cu_layernorm_bwd_colsum(out, acc, dw, db, next_db, gcu_next_part(m), m->dc1, x, w, mean, rstd, BT, C, m->s,
                                   m->fin);
    else
        dt_cu_layernorm_bwd(out, acc, dw, db, gcu_next_part(m), m->dc1, x, w, mean, rstd, BT, C, m->s, m->fin);
    if (next_db && h_)
        dt_trace_kernel_info(h_, "colsum_dx: fused column sums of dx, bias_bwd %s", gcu_variant_name(DT_OP_BIAS_BWD));
    m->dres = out;
    TRY(gcu_inject(m, "layernorm_bwd", out, (size_t)BT * C, 2));
    OP_END((OUT("dx", out, BF, BTC), OUT("dw", dw, F32, 1, C), OUT("db", db, F32, 1, C),
            OUT("colsum_dx", next_db, F32, 1, next_db ? C : 0)));
    return DT_OK;
}

/* GELU backward of the (rows, cols) fc activation, fused with the fc bias gradient when db
 * is not NULL (db += column sums of dinp, DT_OP_BIAS_BWD, the same bits as the unfused
 * pair), so dinp is not read back for it. */
static dt_status t_gelu_bwd(dt_gpt_cuda *m, bf16 *dinp, float *db, const bf16 *inp, const bf16 *dout, int rows,
                            int cols) {
    TRY(gcu_claim(m, dinp));
    OP_BEGIN(DT_PHASE_BWD, "gelu_bwd", db ? DT_OP_BIAS_BWD : -1,
             (IN("x", inp, BF, rows, cols), IN("dy", dout, BF, rows, cols), IN("db", db, F32, 1, db ? cols : 0)));
    if (db) dt_cu_gelu_bwd_colsum(dinp, db, gcu_next_part(m), inp, dout, rows, cols, m->s, m->fin);
    else dt_cu_gelu_bwd(dinp, inp, dout, (size_t)rows * cols, m->s);
    TRY(gcu_inject(m, "gelu_bwd", dinp, (size_t)rows * cols, 2));
    OP_END((OUT("dx", dinp, BF, rows, cols), OUT("db", db, F32, 1, db ? cols : 0)));
    return DT_OK;
}

/* Layer l's dqkv and dfch: its own slice of dqkv_all (dfch_all) when this backward batches
 * the qkv (fc) weight gradients (--dw-batch on), else the one buffer every layer reuses. */
bf16 *gcu_dqkv_of(const dt_gpt_cuda *m, int l) {
    return m->bp.dw_batched[DT_CU_LIN_QKV] ? m->dqkv_all + (size_t)l * m->B * m->T * 3 * m->cfg.channels : m->dqkv;
}

bf16 *gcu_dfch_of(const dt_gpt_cuda *m, int l) {
    return m->bp.dw_batched[DT_CU_LIN_FC] ? m->dfch_all + (size_t)l * m->B * m->T * 4 * m->cfg.channels : m->dfch;
}

/* Where LayerNorm backward ln (DT_CU_RES_LN2 or _LN1) of layer l writes the residual
 * gradient: its slot of dres_all when the backward keeps them (m->dwb_res; model/cuda/plan.h's
 * dt_cu_res_slot_ln, -1: dres16, for the embedding backward), else dres16 in place. */
bf16 *gcu_dres_slot(const dt_gpt_cuda *m, int k) {
    return m->bp.keep_res && k >= 0 ? m->dres_all + (size_t)k * m->B * m->T * m->cfg.channels : m->dres16;
}

static bf16 *dres_of_ln(const dt_gpt_cuda *m, int l, int ln) { return gcu_dres_slot(m, dt_cu_res_slot_ln(l, ln)); }

/* Attention backward of layer l into gcu_dqkv_of(m, l). db (flash only, else NULL): the qkv bias
 * gradient, += the column sums of dqkv fused into the flash kernels (finished on m->fin);
 * the qkv linear's backward then gets no db. It is this event's input and output.
 * ld_ready: the attproj input-gradient GEMM just wrote the flash backward's LD (its DOT
 * epilogue; linear_bwd's *ld_made), so no D kernel runs. */
static dt_status t_attention_bwd(dt_gpt_cuda *m, int l, const dt_dropout *ad, float *db, int ld_ready) {
    bf16 *dqkv = gcu_dqkv_of(m, l);
    TRY(gcu_claim(m, dqkv));
    int B = m->B, T = m->T, C = m->cfg.channels, NH = m->cfg.num_heads, BT = B * T;
    size_t sc = (size_t)BT * C;
    const bf16 *qkv = m->act.qkv + l * sc * 3, *atty = m->act.atty + l * sc;
    const float *lse = m->ch.flash ? m->act.att_lse + (size_t)l * B * NH * T : NULL;
    const bf16 *att = m->ch.flash ? NULL : m->act.att + (size_t)l * B * NH * T * T;
    OP_BEGIN(DT_PHASE_BWD, "attention_bwd", DT_OP_ATTENTION_BWD,
             (IN("dy", m->dc1, BF, BTC), IN("qkv", qkv, BF, BT, 3 * C), IN("y", atty, BF, BTC),
              IN("lse", lse, F32, lse ? (int64_t)B * NH * T : 0, 1), IN("att", att, BF, att ? (int64_t)B * NH * T : 0, T),
              IN("db", db, F32, 1, db ? 3 * C : 0)));
    if (h_) dt_trace_kernel_info(h_, "%s %s B=%d T=%d C=%d NH=%d%s", gcu_attention_name(m),
                                 gcu_variant_name(DT_OP_ATTENTION_BWD), B, T, C, NH,
                                 db ? "; db: column sums of dqkv fused, 64-row block partials added in order" : "");
    if (h_ && ld_ready) dt_trace_kernel_info(h_, "LD (lse, D) from matmul_bwd's DOT epilogue: no D kernel");
    if (m->ch.flash_wgmma && ld_ready)
        dt_cu_flash_bwd_wgmma_ld(dqkv, db, db ? gcu_next_part(m) : NULL, m->att_scratch, m->dc1, qkv, B, T, C, NH,
                                 m->s, m->fin);
    else if (m->ch.flash_wgmma)
        dt_cu_flash_bwd_wgmma(dqkv, db, db ? gcu_next_part(m) : NULL, m->att_scratch, m->dc1, qkv, atty, lse, B, T, C,
                              NH, m->s, m->fin);
    else if (m->ch.flash && ld_ready)
        dt_cu_flash_bwd_ld(dqkv, db, db ? gcu_next_part(m) : NULL, m->att_scratch, m->dc1, qkv, B, T, C, NH, m->s,
                           m->fin);
    else if (m->ch.flash)
        dt_cu_flash_bwd(dqkv, db, db ? gcu_next_part(m) : NULL, m->att_scratch, m->dc1, qkv, atty, lse, B, T, C, NH,
                        m->s, m->fin);
    else
        TRY(dt_cu_attention_bwd(m->blas, dqkv, m->dc1, qkv, att, m->att_scratch, B, T, C, NH, ad,
                                (uint32_t)l, m->s));
    TRY(gcu_inject(m, "attention_bwd", dqkv, sc * 3, 2));
    OP_END((OUT("dqkv", dqkv, BF, BT, 3 * C), OUT("db", db, F32, 1, db ? 3 * C : 0)));
    return DT_OK;
}

static dt_status t_encoder_bwd(dt_gpt_cuda *m, const dt_dropout *hd) {
    int B = m->B, T = m->T, C = m->cfg.channels, Vp = m->cfg.padded_vocab, maxT = m->cfg.max_seq_len;
    /* dwte rows are the order-sensitive buckets: per-row digests name the tokens hit */
    OP_BEGIN(DT_PHASE_BWD, "encoder_bwd", DT_OP_ENCODER_BWD,
             (IN("dout", m->dres16, BF, BTC), IN("tokens", m->d_in, DT_DT_I32, B, T),
              IN_ROWS("dwte", G(DT_P_WTE), F32, Vp, C), IN("dwpe", G(DT_P_WPE), F32, maxT, C)));
    const dt_cu_encoder_work w = {m->d_order, m->d_chunk_start, m->d_chunk_dst, m->d_multi_tok, m->d_multi_slot,
                                  m->nchunk, m->nmulti, m->enc_partial};
    dt_cu_encoder_bwd(G(DT_P_WTE), G(DT_P_WPE), m->dres16, m->d_in, &w, B, T, C, hd, DT_RNG_DROPOUT_HIDDEN, EMB_SITE,
                      m->s);
    TRY(gcu_inject(m, "encoder_bwd", G(DT_P_WTE), (size_t)Vp * C, 4));
    OP_END((OUT_ROWS("dwte", G(DT_P_WTE), F32, Vp, C), OUT("dwpe", G(DT_P_WPE), F32, maxT, C)));
    return DT_OK;
}

#define NEXT_DB(i, l) (m->bp.ln_colsum ? G(i) + (size_t)(l) * m->cfg.channels : NULL) /* bias i of layer l */

/* Layer l's dense MLP backward: fcproj (the dGELU epilogue with the GELU fusion), the GELU
 * backward otherwise, fc, then LN2's backward, adding its input gradient to the residual
 * gradient; each gradient made where the plan says. */
static dt_status dense_mlp_bwd(dt_gpt_cuda *m, int l, const dt_dropout *hd) {
    const dt_cu_bwd_plan *bp = &m->bp;
    int BT = m->B * m->T, C = m->cfg.channels;
    size_t sc = (size_t)BT * C, lC = (size_t)l * C;
    const bf16 *dproj = NULL;
    TRY(through_dropout(m, hd, 2u * (uint32_t)l + 1u, &dproj));
    const bf16 *fch = m->act.fch + l * sc * 4;
    gcu_rbegin(m, DT_R_MATMUL_BWD);
    float *fcb = G(DT_P_FCB) + lC * 4;
    float *fcprojw = bp->dw_batched[DT_CU_LIN_FCPROJ] ? NULL : G(DT_P_FCPROJW) + lC * 4 * C;
    float *fcw = bp->dw_batched[DT_CU_LIN_FC] ? NULL : G(DT_P_FCW) + lC * 4 * C;
    dt_cu_bias_src fcsrc = bp->bias[DT_CU_LIN_FC];
    if (m->ch.fuse_gelu) { /* dfch straight from the fcproj GEMM (dGELU epilogue) */
        const gcu_lin_bwd fcproj = {gcu_dfch_of(m, l), fcprojw, G(DT_P_FCPROJB) + lC, bp->bias[DT_CU_LIN_FCPROJ], dproj,
                                    m->act.fchg + l * sc * 4, P16(DT_P_FCPROJW) + lC * 4 * C, BT, 4 * C, C, fch,
                                    fcsrc == DT_CU_BIAS_DGELU_EPILOGUE ? fcb : NULL, -1};
        TRY(gcu_linear_bwd(m, &fcproj));
        const gcu_lin_bwd fc = {m->dc1, fcw, fcb, fcsrc, gcu_dfch_of(m, l), m->act.ln2 + l * sc,
                                P16(DT_P_FCW) + lC * 4 * C, BT, C, 4 * C, NULL, NULL, -1};
        TRY(gcu_linear_bwd(m, &fc));
        gcu_rend(m, DT_R_MATMUL_BWD);
    } else {
        const gcu_lin_bwd fcproj = {m->dfchg, fcprojw, G(DT_P_FCPROJB) + lC, bp->bias[DT_CU_LIN_FCPROJ], dproj,
                                    m->act.fchg + l * sc * 4, P16(DT_P_FCPROJW) + lC * 4 * C, BT, 4 * C, C, NULL, NULL,
                                    -1};
        TRY(gcu_linear_bwd(m, &fcproj));
        gcu_rend(m, DT_R_MATMUL_BWD);
        gcu_rbegin(m, DT_R_GELU_BWD);
        TRY(t_gelu_bwd(m, gcu_dfch_of(m, l), fcsrc == DT_CU_BIAS_GELU_BWD ? fcb : NULL, fch, m->dfchg, BT, 4 * C));
        gcu_rend(m, DT_R_GELU_BWD);
        gcu_rbegin(m, DT_R_MATMUL_BWD);
        const gcu_lin_bwd fc = {m->dc1, fcw, fcsrc == DT_CU_BIAS_GELU_BWD ? NULL : fcb, fcsrc, gcu_dfch_of(m, l),
                                m->act.ln2 + l * sc, P16(DT_P_FCW) + lC * 4 * C, BT, C, 4 * C, NULL, NULL, -1};
        TRY(gcu_linear_bwd(m, &fc));
        gcu_rend(m, DT_R_MATMUL_BWD);
    }
    gcu_rbegin(m, DT_R_LN_BWD);
    TRY(t_layernorm_bwd(m, 1, G(DT_P_LN2W) + lC, G(DT_P_LN2B) + lC, m->act.res2 + l * sc, P(DT_P_LN2W) + lC,
                        m->act.ln2_mean + (size_t)l * BT, m->act.ln2_rstd + (size_t)l * BT, NEXT_DB(DT_P_ATTPROJB, l),
                        dres_of_ln(m, l, DT_CU_RES_LN2)));
    gcu_rend(m, DT_R_LN_BWD);
    return DT_OK;
}

static dt_status mlp_bwd(dt_gpt_cuda *m, int l, const dt_dropout *hd) {
    switch (dt_gpt_mlp_kind(&m->cfg, l)) {
    case DT_BLOCK_MLP_DENSE: return dense_mlp_bwd(m, l, hd);
    default: return dt_fail(DT_EUNSUPPORTED, "layer %d: the GPU model has no %s block", l,
                            dt_block_kind_name(dt_gpt_mlp_kind(&m->cfg, l)));
    }
}

/* Layer l's attention block backward: attproj (writing the flash backward's LD with the
 * plan's ld_from_dot), attention, qkv, then LN1's backward (res: the block's input). */
static dt_status attention_bwd(dt_gpt_cuda *m, int l, const bf16 *res, const dt_dropout *hd, const dt_dropout *ad) {
    const dt_cu_bwd_plan *bp = &m->bp;
    int BT = m->B * m->T, C = m->cfg.channels;
    size_t sc = (size_t)BT * C, lC = (size_t)l * C;
    const bf16 *dproj = NULL;
    TRY(through_dropout(m, hd, 2u * (uint32_t)l, &dproj));
    gcu_rbegin(m, DT_R_MATMUL_BWD);
    /* with the plan's ld_from_dot, the attproj GEMM writes the flash backward's LD */
    const gcu_lin_bwd attproj = {m->dc1, bp->dw_batched[DT_CU_LIN_ATTPROJ] ? NULL : G(DT_P_ATTPROJW) + lC * C,
                                 G(DT_P_ATTPROJB) + lC, bp->bias[DT_CU_LIN_ATTPROJ], dproj, m->act.atty + l * sc,
                                 P16(DT_P_ATTPROJW) + lC * C, BT, C, C, NULL, NULL, bp->ld_from_dot ? l : -1};
    TRY(gcu_linear_bwd(m, &attproj));
    gcu_rend(m, DT_R_MATMUL_BWD);
    /* the qkv bias gradient: fused into the flash backward (it sums the dqkv it stores;
     * no colsum or GEMM epilogue re-reads dqkv), else the qkv linear's */
    float *qkvb = G(DT_P_QKVB) + lC * 3;
    int qkv_flash = bp->bias[DT_CU_LIN_QKV] == DT_CU_BIAS_FLASH;
    gcu_rbegin(m, DT_R_ATTN_BWD);
    TRY(t_attention_bwd(m, l, ad, qkv_flash ? qkvb : NULL, bp->ld_from_dot));
    gcu_rend(m, DT_R_ATTN_BWD);
    gcu_rbegin(m, DT_R_MATMUL_BWD);
    const gcu_lin_bwd qkv = {m->dc1, bp->dw_batched[DT_CU_LIN_QKV] ? NULL : G(DT_P_QKVW) + lC * 3 * C,
                             qkv_flash ? NULL : qkvb, bp->bias[DT_CU_LIN_QKV], gcu_dqkv_of(m, l), m->act.ln1 + l * sc,
                             P16(DT_P_QKVW) + lC * 3 * C, BT, C, 3 * C, NULL, NULL, -1};
    TRY(gcu_linear_bwd(m, &qkv));
    gcu_rend(m, DT_R_MATMUL_BWD);
    gcu_rbegin(m, DT_R_LN_BWD);
    TRY(t_layernorm_bwd(m, 1, G(DT_P_LN1W) + lC, G(DT_P_LN1B) + lC, res, P(DT_P_LN1W) + lC,
                        m->act.ln1_mean + (size_t)l * BT, m->act.ln1_rstd + (size_t)l * BT,
                        l > 0 ? NEXT_DB(DT_P_FCPROJB, l - 1) : NULL, dres_of_ln(m, l, DT_CU_RES_LN1)));
    gcu_rend(m, DT_R_LN_BWD);
    return DT_OK;
}

/* The backward's launches up to the embedding backward (whose launch depends on the
 * batch's buckets), ending with the side streams joined. */
static dt_status backward_launches(dt_gpt_cuda *m) {
    const dt_gpt_config *c = &m->cfg;
    int B = m->B, T = m->T, C = c->channels, L = c->num_layers;
    int Vp = c->padded_vocab, BT = B * T;
    size_t sc = (size_t)BT * C;
    dt_dropout hd = gcu_hidden_drop(m), ad = gcu_attn_drop(m);
    const dt_cu_bwd_plan *bp = &m->bp;
    m->nsite = 0;
    m->site_over = 0;
    dt_trace_scope_push("head");
    gcu_rbegin(m, DT_R_HEAD_BWD); /* logits = lnf wte^T; the logits hold dlogits */
    const gcu_lin_bwd head = {m->dc1, G(DT_P_WTE), NULL, DT_CU_BIAS_COLSUM, m->act.logits, m->act.lnf, P16(DT_P_WTE),
                              BT, C, Vp, NULL, NULL, -1};
    TRY(gcu_linear_bwd(m, &head));
    gcu_rend(m, DT_R_HEAD_BWD);
    gcu_rbegin(m, DT_R_LN_BWD);
    m->dres = m->dres16;
    TRY(t_layernorm_bwd(m, 0, G(DT_P_LNFW), G(DT_P_LNFB), m->act.res3 + (size_t)(L - 1) * sc, P(DT_P_LNFW),
                        m->act.lnf_mean, m->act.lnf_rstd, NEXT_DB(DT_P_FCPROJB, L - 1), dres_of_ln(m, L, DT_CU_RES_LN1)));
    gcu_rend(m, DT_R_LN_BWD);
    dt_trace_scope_pop();
    for (int l = L - 1; l >= 0; l--) {
        const bf16 *res = l == 0 ? m->act.encoded : m->act.res3 + (size_t)(l - 1) * sc;
        dt_trace_op *blk = NULL;
        TRY(gcu_block_begin(m, &blk, DT_PHASE_BWD, l, m->dres, DT_DT_BF16));
        TRY(mlp_bwd(m, l, &hd));
        TRY(attention_bwd(m, l, res, &hd, &ad));
        TRY(gcu_block_end(m, blk, DT_PHASE_BWD, l, m->dres, DT_DT_BF16));
    }
#undef NEXT_DB
    /* every layer's weight gradients of a batched kind: one strided-batched GEMM a kind
     * (--dw-batch on) */
    if (bp->dw_batched[DT_CU_LIN_QKV] || bp->dw_batched[DT_CU_LIN_FC] || bp->keep_res) {
        const long long s1 = (long long)BT * C;
        gcu_rbegin(m, DT_R_MATMUL_BWD);
        TRY(gcu_wgs_after_main(m)); /* every layer's douts are made: the batched GEMMs follow on m->wgs */
        if (bp->dw_batched[DT_CU_LIN_QKV]) TRY(gcu_dw_batched(m, m->dqkv_all, 3 * s1, m->act.ln1, G(DT_P_QKVW), C, 3 * C));
        if (bp->dw_batched[DT_CU_LIN_FC]) TRY(gcu_dw_batched(m, m->dfch_all, 4 * s1, m->act.ln2, G(DT_P_FCW), C, 4 * C));
        if (bp->keep_res) { /* a kind's slots: its first, DT_CU_RES_STRIDE apart */
            TRY(gcu_dw_batched(m, gcu_dres_slot(m, dt_cu_res_slot(0, DT_CU_RES_FCPROJ)), DT_CU_RES_STRIDE * s1, m->act.fchg,
                           G(DT_P_FCPROJW), 4 * C, C));
            TRY(gcu_dw_batched(m, gcu_dres_slot(m, dt_cu_res_slot(0, DT_CU_RES_ATTPROJ)), DT_CU_RES_STRIDE * s1, m->act.atty,
                           G(DT_P_ATTPROJW), C, C));
        }
        gcu_rend(m, DT_R_MATMUL_BWD);
    }
    /* the encoder backward adds into wte's gradient, which the head's weight-gradient GEMM
     * (tied weights) wrote on m->wgs; a graph's capture ends with every stream joined */
    TRY(gcu_join_wgs(m));
    TRY(gcu_join_fin(m));
    return dt_cu_check(cudaGetLastError(), "backward launch");
}

dt_status dt_gpt_cuda_backward(dt_gpt_cuda *m) {
    if (m->loss_scale == 0.0f)
        return dt_fail(DT_ESTATE, "dt_gpt_cuda_backward: the last forward had loss_scale 0 (eval)");
    int BT = m->B * m->T, Vp = m->cfg.padded_vocab;
    cudaStream_t s = m->s;
    dt_dropout hd = gcu_hidden_drop(m);
    /* weight gradients on m->wgs, except in profiled steps (the leaderboard times each range
     * alone on m->s) and when tracing digests gradients per module or op */
    m->ov = m->ch.overlap && !m->prof && !dt_trace_on(DT_TRACE_MODULE);
    int det_buckets = dt_encoder_choose() == DT_ENCODER_DET;
    if (det_buckets) {
        /* on the host while the device runs the forward, then copied on m->up while it runs
         * the backward (after the forward: the previous embedding backward read the device
         * buffers before it) */
        int nseg = dt_cu_encoder_buckets(m->h_in, BT, Vp, m->h_count, m->h_order, m->h_segtok, m->h_segstart);
        if (nseg <= 0) return dt_fail(DT_EINVAL, "encoder backward: token outside [0, %d)", Vp);
        m->nchunk = dt_cu_encoder_chunks(m->h_segtok, m->h_segstart, nseg, m->h_chunk_start, m->h_chunk_dst,
                                         m->h_multi_tok, m->h_multi_slot, &m->nmulti);
        cudaStream_t u = m->up;
        TRY(dt_cu_check(cudaEventRecord(m->ev_fwd, s), "cudaEventRecord"));
        TRY(dt_cu_check(cudaStreamWaitEvent(u, m->ev_fwd, 0), "cudaStreamWaitEvent"));
        TRY(dt_cu_check(cudaMemcpyAsync(m->d_order, m->h_order, sizeof(int) * BT, cudaMemcpyHostToDevice, u), "upload"));
        TRY(dt_cu_check(cudaMemcpyAsync(m->d_chunk_start, m->h_chunk_start, sizeof(int) * (m->nchunk + 1),
                                        cudaMemcpyHostToDevice, u), "upload"));
        TRY(dt_cu_check(cudaMemcpyAsync(m->d_chunk_dst, m->h_chunk_dst, sizeof(int) * m->nchunk, cudaMemcpyHostToDevice,
                                        u), "upload"));
        TRY(dt_cu_check(cudaMemcpyAsync(m->d_multi_tok, m->h_multi_tok, sizeof(int) * m->nmulti,
                                        cudaMemcpyHostToDevice, u), "upload"));
        TRY(dt_cu_check(cudaMemcpyAsync(m->d_multi_slot, m->h_multi_slot, sizeof(int) * (m->nmulti + 1),
                                        cudaMemcpyHostToDevice, u), "upload"));
        TRY(dt_cu_check(cudaEventRecord(m->ev_buckets, u), "cudaEventRecord"));
    }
    TRY(gcu_run_phase(m, m->grad_fresh ? G_BWD_FRESH : G_BWD_ADD, backward_launches));
    if (det_buckets) TRY(dt_cu_check(cudaStreamWaitEvent(s, m->ev_buckets, 0), "cudaStreamWaitEvent"));
    dt_trace_scope_push("embed");
    gcu_rbegin(m, DT_R_EMBED_BWD);
    TRY(t_encoder_bwd(m, &hd));
    gcu_rend(m, DT_R_EMBED_BWD);
    dt_trace_scope_pop();
    if (m->site_over)
        return dt_fail(DT_ESTATE, "dt_gpt_cuda_backward: more det reduction sites than the %d "
                       "partial regions made at create (raise maxsite in dt_gpt_cuda_create)", m->maxsite);
    m->grad_fresh = 0; /* a further backward (gradient accumulation) adds */
    /* join: the det partial finishes on m->fin complete before anything reads gradients or
     * reuses their partial regions */
    TRY(gcu_join_fin(m));
    return dt_cu_check(cudaGetLastError(), "backward launch");
}

/* The tensors whose whole gradient one weight-gradient GEMM of the backward makes: wte (the
 * head's; the embedding backward adds to it afterwards) and the four linears' weights. */
static int gemm_made(int i) {
    return i == DT_P_WTE || i == DT_P_QKVW || i == DT_P_ATTPROJW || i == DT_P_FCW || i == DT_P_FCPROJW;
}

static dt_status zero_launches(dt_gpt_cuda *m) {
    /* the weight matrices (99% of the slab) are not cleared: the next backward's GEMMs write
     * them with beta 0, which never reads the old values (they may even be NaN) */
    for (int i = 0; i < DT_NUM_PARAM_TENSORS; i++)
        if (!gemm_made(i))
            TRY(dt_cu_check(cudaMemsetAsync(m->grad + m->params[i].offset, 0, sizeof(float) * m->params[i].numel,
                                            m->s), "cudaMemsetAsync"));
    return DT_OK;
}

void dt_gpt_cuda_zero_grad(dt_gpt_cuda *m) {
    /* a failed launch surfaces at the forward's next error check, as a kernel's would */
    (void)gcu_run_phase(m, G_ZERO, zero_launches);
    m->grad_fresh = 1;
}
