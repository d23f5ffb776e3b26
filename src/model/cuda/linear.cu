/* The linears of the GPU model: forward (with the fc GEMM's GELU epilogue), the input- and
 * weight-gradient GEMMs of the backward (dGELU, DOT and bias-gradient epilogues) and the
 * batched weight gradients of every layer. */
#include "model/cuda/model.cuh"

/* Whether a GEMM runs on our own kernel: the caller asks for it (want, with --gemm-own gelu)
 * and the call fits its tiles; else cuBLASLt. */
int gcu_own_fits(const dt_gpt_cuda *m, const dt_cu_gemm_args *a, int want) {
    return want && m->ch.gemm_own && dt_cu_gemm_wgmma_fits(a->ta, a->tb, a->M, a->N, a->K, a->lda, a->ldb, a->ldc,
                                                        a->c_f32, a->alpha, a->beta, a->batch, a->epi,
                                                        (const void *)a->A, (const void *)a->B, a->C,
                                                        (const void *)a->bias, a->aux);
}

/* The GEMM on our kernel (own, from own_fits; a->csum finished on m->fin) or cuBLASLt. */
dt_status gcu_run_gemm(dt_gpt_cuda *m, const dt_cu_gemm_args *a, int own) {
    return own ? dt_cu_gemm_wgmma_fin(a, m->s, m->fin) : dt_cu_gemm(m->blas, a, m->s);
}

/* --gemm-own gelu puts the fcproj input gradient (dGELU) on our kernel. */
int gcu_own_dgelu(const dt_gpt_cuda *m) { return m->ch.gemm_own; }

/* Linear layer forward: out (N,OC) = inp (N,IC) W^T + b, W (OC,IC) bf16. */
dt_status gcu_linear_fwd(dt_gpt_cuda *m, bf16 *out, const bf16 *inp, const bf16 *w, const bf16 *b,
                            int N, int IC, int OC) {
    OP_BEGIN(DT_PHASE_FWD, "matmul_fwd", DT_OP_GEMM,
             (IN("x", inp, BF, N, IC), IN("w", w, BF, OC, IC), IN("b", b, BF, 1, b ? OC : 0)));
    dt_cu_gemm_args a = {0, 1, N, OC, IC, inp, IC, 0, w, IC, 0, out, OC, 0, 0, 1.0f, 0.0f, 1, b};
    /* the linears without GELU stay on cuBLASLt (faster there) */
    TRY(gcu_run_gemm(m, &a, 0));
    gcu_gemm_info(m, h_, "y");
    TRY(gcu_inject(m, "matmul_fwd", out, (size_t)N * OC, 2));
    OP_END(OUT("y", out, BF, N, OC));
    return DT_OK;
}

/* The fc linear with its GELU (m->ch.fuse_gelu): pre (N,OC) = inp W^T + b, out = GELU(pre),
 * one GEMM whose epilogue writes both ("matmul_gelu_fwd"; the bits of out differ from
 * linear_fwd + t_gelu_fwd, which applies GELU to the bf16-rounded pre). */
dt_status gcu_linear_gelu_fwd(dt_gpt_cuda *m, bf16 *out, bf16 *pre, const bf16 *inp, const bf16 *w,
                                 const bf16 *b, int N, int IC, int OC) {
    OP_BEGIN(DT_PHASE_FWD, "matmul_gelu_fwd", DT_OP_GEMM,
             (IN("x", inp, BF, N, IC), IN("w", w, BF, OC, IC), IN("b", b, BF, 1, OC)));
    dt_cu_gemm_args a = {0, 1, N, OC, IC, inp, IC, 0, w, IC, 0, out, OC, 0, 0, 1.0f, 0.0f, 1, b,
                         DT_CU_EPI_GELU, pre, NULL, NULL};
    int own = gcu_own_fits(m, &a, 1);
    TRY(gcu_run_gemm(m, &a, own));
    if (!own) gcu_gemm_info(m, h_, "pre, y = gelu(pre)"); /* ours: OP_END reports its launch */
    TRY(gcu_inject(m, "matmul_gelu_fwd", out, (size_t)N * OC, 2));
    OP_END((OUT("pre", pre, BF, N, OC), OUT("y", out, BF, N, OC)));
    return DT_OK;
}

/* The weight gradient of a linear, dw (OC, IC) fp32 = dout^T (OC x N) inp (N x IC), added to
 * dw unless zero_grad asked for fresh gradients (beta 0): linear_bwd's call, and each layer's
 * of the batched one (--dw-batch on). */
dt_cu_gemm_args gcu_dw_gemm(const dt_gpt_cuda *m, const bf16 *dout, const bf16 *inp, float *dw, int N, int IC,
                               int OC) {
    dt_cu_gemm_args g = {1, 0, OC, IC, N, dout, OC, 0, inp, IC, 0, dw, IC, 0, 1, 1.0f, m->grad_fresh ? 0.0f : 1.0f,
                         1, NULL};
    return g;
}

/* The input-gradient GEMM of a's backward: dinp (N, IC) = dout (N, OC) W (OC, IC), with the
 * dGELU epilogue when gelu_pre is set. */
dt_cu_gemm_args gcu_dx_gemm(const gcu_lin_bwd *a) {
    dt_cu_gemm_args g = {0, 0, a->N, a->IC, a->OC, a->dout, a->OC, 0, a->w, a->IC, 0, a->dinp, a->IC, 0, 0, 1.0f,
                         0.0f, 1, NULL, a->gelu_pre ? DT_CU_EPI_DGELU : DT_CU_EPI_DEFAULT, (void *)a->gelu_pre, NULL,
                         NULL, NULL, NULL};
    return g;
}

/* The same GEMM with the DOT epilogue of layer l (attproj: inp is layer l's attention
 * output): it also writes the flash backward's LD (lse log2(e) and D = rowsum(dinp O) per
 * head and row) into the attention scratch. */
static dt_cu_gemm_args dot_gemm(const dt_gpt_cuda *m, const gcu_lin_bwd *a, int l) {
    dt_cu_gemm_args d = gcu_dx_gemm(a);
    d.epi = DT_CU_EPI_DOT;
    d.aux = (void *)a->inp;
    d.dot_ld = dt_cu_flash_scratch_ld(m->att_scratch);
    d.dot_lse = m->act.att_lse + (size_t)l * m->B * m->cfg.num_heads * m->T;
    d.dot_T = m->T;
    return d;
}

/* Whether a's input gradient can run with the DOT epilogue (our kernel takes the call). */
int gcu_dot_fits(const dt_gpt_cuda *m, const gcu_lin_bwd *a) {
    dt_cu_gemm_args d = dot_gemm(m, a, 0);
    return gcu_own_fits(m, &d, 1);
}

/* Whether a's dGELU input gradient runs on our kernel with its column sums in the epilogue
 * (the partials fit the regions made for them). */
int gcu_dgelu_csum_fits(const dt_gpt_cuda *m, const gcu_lin_bwd *a) {
    dt_cu_gemm_args g = gcu_dx_gemm(a);
    return a->gelu_pre && gcu_own_fits(m, &g, gcu_own_dgelu(m)) &&
           dt_cu_gemm_wgmma_csum_floats(a->N, a->IC, a->OC) <= (size_t)m->csum_sites * m->part_site;
}

/* A linear's backward (model.cuh's gcu_lin_bwd), as the plan (m->bp) decided: its trace
 * event "matmul_bwd" ("matmul_dgelu_bwd" with the dGELU epilogue) holds every tensor it
 * reads and writes; a bias gradient another op made (LN_COLSUM, DGELU_EPILOGUE) is its
 * input and output, digested after joining m->fin where that op's finish ran. The fc bias
 * gradient the dGELU epilogue sums (fc_db, DT_OP_BIAS_BWD) is an output ("colsum_dx"), the
 * DOT epilogue's LD too ("ld"). The weight gradient and the bias column sum read only dout:
 * on m->wgs when overlapping, beside the main stream's input-gradient GEMMs. */
dt_status gcu_linear_bwd(dt_gpt_cuda *m, const gcu_lin_bwd *la) {
    float *dw = la->dw, *db = la->db;
    const int N = la->N, IC = la->IC, OC = la->OC;
    const int summed = db && (la->bias == DT_CU_BIAS_LN_COLSUM || la->bias == DT_CU_BIAS_DGELU_EPILOGUE);
    const int bgrad = db && la->bias == DT_CU_BIAS_GEMM_EPILOGUE;
    if (bgrad && !dw)
        return dt_fail(DT_ESTATE, "linear_bwd: a bias gradient from the weight-gradient GEMM's epilogue without "
                       "that GEMM (the plan is inconsistent)");
    const char *op = la->gelu_pre ? "matmul_dgelu_bwd" : "matmul_bwd";
    dt_cu_gemm_args a = gcu_dx_gemm(la);
    const int B = m->B, T = m->T, NH = m->cfg.num_heads;
    float *ld = NULL; /* the DOT epilogue's LD, where the plan has it */
    if (la->dot_layer >= 0) {
        dt_cu_gemm_args d = dot_gemm(m, la, la->dot_layer);
        if (!gcu_own_fits(m, &d, 1))
            return dt_fail(DT_ESTATE, "linear_bwd: the plan's DOT epilogue does not fit layer %d's GEMM", la->dot_layer);
        a = d;
        ld = d.dot_ld;
    }
    /* dGELU's input gradient on our kernel with --gemm-own gelu, attproj's with its DOT epilogue */
    const int own = ld || gcu_own_fits(m, &a, la->gelu_pre && gcu_own_dgelu(m));
    float *csum = la->fc_db; /* fc's bias gradient from the dGELU epilogue */
    if (csum && !gcu_dgelu_csum_fits(m, la))
        return dt_fail(DT_ESTATE, "linear_bwd: the plan's dGELU column sums do not fit this GEMM");
    const bf16 *dout = la->dout, *inp = la->inp, *w = la->w, *gelu_pre = la->gelu_pre;
    bf16 *dinp = la->dinp;
    OP_BEGIN(DT_PHASE_BWD, op, DT_OP_GEMM,
             (IN("dy", dout, BF, N, OC), IN("x", inp, BF, N, IC), IN("w", w, BF, OC, IC),
              IN("pre", gelu_pre, BF, N, gelu_pre ? IC : 0), IN("dw", dw, F32, OC, dw ? IC : 0),
              IN("db", db, F32, 1, db ? OC : 0), IN("colsum_dx", csum, F32, 1, csum ? IC : 0),
              IN("lse", a.dot_lse, F32, ld ? (int64_t)B * NH * T : 0, 1)));
    if (csum) {
        a.csum = csum;
        a.csum_part = gcu_next_parts(m, m->csum_sites);
    }
    if (dw) TRY(gcu_wgs_after_main(m)); /* dout is ready: the weight gradient may start on m->wgs */
    TRY(gcu_claim(m, dinp));
    TRY(gcu_run_gemm(m, &a, own));
    if (!own) gcu_gemm_info(m, h_, gelu_pre ? "dx = (dy w) gelu'(pre)" : "dx");
    if (csum && h_)
        dt_trace_kernel_info(h_, "colsum_dx: fused column sums of dx (dGELU epilogue), bias_bwd %s",
                             gcu_variant_name(DT_OP_BIAS_BWD));
    if (ld && h_) dt_trace_kernel_info(h_, "ld: the flash backward's D = rowsum(dx o) per head (DOT epilogue)");
    dt_cu_gemm_args g = gcu_dw_gemm(m, dout, inp, dw, N, IC, OC);
    if (bgrad) {
        g.epi = DT_CU_EPI_BGRAD;
        g.dbias = db;
        g.dbias_part = gcu_next_part(m);
    }
    /* a column sum without the GEMM (dw batched) runs on m->s */
    cudaStream_t ws = m->ov && dw ? m->wgs : m->s;
    if (dw) {
        TRY(dt_cu_gemm_fin(m->ov ? m->blas_w : m->blas, &g, ws, m->fin));
        gcu_gemm_info(m, h_, bgrad ? "dw, db (bias-gradient epilogue, chunk partials added in order)" : "dw");
    }
    if (summed && h_) dt_trace_kernel_info(h_, "db: made by %s (the plan)", dt_cu_bias_src_name(la->bias));
    if (db && la->bias == DT_CU_BIAS_COLSUM) {
        gcu_rend(m, DT_R_MATMUL_BWD);
        gcu_rbegin(m, DT_R_BIAS_BWD);
        dt_cu_colsum(db, gcu_next_part(m), dout, N, OC, ws, m->fin);
        gcu_rend(m, DT_R_BIAS_BWD);
        gcu_rbegin(m, DT_R_MATMUL_BWD);
        if (h_) dt_trace_kernel_info(h_, "db: colsum %s rows=%d cols=%d", gcu_variant_name(DT_OP_BIAS_BWD), N, OC);
    }
    if (m->ov && dw) TRY(gcu_note_read(m, dout)); /* after both readers */
    TRY(gcu_inject(m, op, dinp, (size_t)N * IC, 2));
    OP_END((OUT("dx", dinp, BF, N, IC), OUT("dw", dw, F32, OC, dw ? IC : 0), OUT("db", db, F32, 1, db ? OC : 0),
            OUT("colsum_dx", csum, F32, 1, csum ? IC : 0), OUT("ld", ld, F32, ld ? (int64_t)B * NH * T : 0, 2)));
    return DT_OK;
}

/* --dw-batch on: dW_l (OC, IC) = dout_l^T inp_l for every layer l in one strided-batched GEMM
 * (dout_all: the layers' (B T, OC), sdout elements apart; inp_all their (B T, IC) one after
 * another; dw the weights' gradient, (OC, IC) a layer), each layer's linear_bwd's call
 * (dw_gemm) batched: the same operands, alpha, beta; cuBLASLt's pinned plan for the batched
 * shape, no split of K in place; whether its bytes equal the single calls' depends on that
 * plan (bench_dw_batch compares them). On m->wgs when overlapping: the caller forks it
 * after m->s wrote the last layer's dout (layer 0's), once for every kind. */
dt_status gcu_dw_batched(dt_gpt_cuda *m, const bf16 *dout_all, long long sdout, const bf16 *inp_all, float *dw,
                           int IC, int OC) {
    const int BT = m->B * m->T, L = m->cfg.num_layers;
    /* dy: the span the batch reads (with the residual slots every other (B T, C) block
     * belongs to the other kind: read, not used) */
    OP_BEGIN(DT_PHASE_BWD, "matmul_dw_batched", DT_OP_GEMM,
             (IN("dy", dout_all, BF, (int64_t)(L - 1) * (sdout / OC) + BT, OC),
              IN("x", inp_all, BF, (int64_t)L * BT, IC),
              IN("dw", dw, F32, (int64_t)L * OC, IC)));
    dt_cu_gemm_args g = gcu_dw_gemm(m, dout_all, inp_all, dw, BT, IC, OC);
    g.batch = L;
    g.sA = sdout;
    g.sB = (long long)BT * IC;
    g.sC = (long long)OC * IC;
    TRY(dt_cu_gemm(m->ov ? m->blas_w : m->blas, &g, m->ov ? m->wgs : m->s));
    gcu_gemm_info(m, h_, "dw of every layer (one strided-batched GEMM)"); /* traced: one stream, m->blas */
    OP_END(OUT("dw", dw, F32, (int64_t)L * OC, IC));
    return DT_OK;
}
