/* The GPU model's buffers and the choices made once at create: the GEMM epilogue fusions,
 * the attention kernels, the side streams, the batched weight gradients; free. */
#include "model/cuda/model.cuh"

static dt_status dmalloc(dt_gpt_cuda *m, void **p, size_t bytes, const char *what) {
    if (cudaMalloc(p, bytes) != cudaSuccess)
        return dt_fail(DT_ENOMEM, "cudaMalloc of %zu bytes for %s failed (%zu allocated so far): "
                       "reduce --micro-batch-size or --seq-length", bytes, what, m->bytes);
    m->bytes += bytes;
    return DT_OK;
}

#define DMALLOC(ptr, n, what)                                                          \
    do {                                                                               \
        dt_status st_ = dmalloc(m, (void **)&(ptr), sizeof(*(ptr)) * (size_t)(n), what); \
        if (st_ != DT_OK) { dt_gpt_cuda_free(m); return st_; }                         \
    } while (0)

/* Picks the GEMM epilogue fusions (--gemm-epilogues) and makes their plans for the current
 * branch; a fusion is on when it is asked for and cuBLASLt has an algorithm for every one of
 * its plans.
 *  - GELU (default): GELU (tanh form) in the fc GEMM's epilogue with the pre-activation
 *    stored for the backward, dGELU in the fcproj input-gradient GEMM, instead of
 *    gelu_cuda.cu's kernels; the fc bias gradient is then a column sum of dfch;
 *  - bias gradients (--gemm-epilogues bgrad or all): the four biased linears' bias
 *    gradients from their weight-gradient GEMMs (BGRAD: a partial per K chunk, added in a
 *    fixed order) instead of column sums of dout (reduce_cuda.cu). Off by default: on the
 *    H200 with cuBLASLt 13.1 the epilogue costs the weight-gradient GEMM more than the
 *    column sum it replaces (docs/cuda.md, "GEMMs").
 * env.json records the outcome. Buffers must exist. */
static dt_status probe_fusions(dt_gpt_cuda *m, int epilogues) {
    static const char *names[] = {"off", "gelu", "bgrad", "all"};
    m->ch.fuse_gelu = m->ch.fuse_bgrad = 0;
    m->ch.fusion_note = names[epilogues];
    int want_gelu = epilogues == DT_EPI_GELU || epilogues == DT_EPI_ALL;
    int want_bgrad = epilogues == DT_EPI_BGRAD || epilogues == DT_EPI_ALL;
    int BT = m->B * m->T, C = m->cfg.channels;
    const bf16 *w16 = m->param16;
    const dt_param_desc *pd = m->params;
    if (want_gelu) {
        dt_cu_gemm_args f = {0, 1, BT, 4 * C, C, m->act.ln2, C, 0, w16 + pd[DT_P_FCW].offset, C, 0, m->act.fchg, 4 * C, 0,
                             0, 1.0f, 0.0f, 1, w16 + pd[DT_P_FCB].offset, DT_CU_EPI_GELU, m->act.fch, NULL, NULL};
        dt_cu_gemm_args d = {0, 0, BT, 4 * C, C, m->dres16, C, 0, w16 + pd[DT_P_FCPROJW].offset, 4 * C, 0, m->dfch,
                             4 * C, 0, 0, 1.0f, 0.0f, 1, NULL, DT_CU_EPI_DGELU, m->act.fch, NULL, NULL};
        m->ch.fuse_gelu = dt_cu_gemm_prepare(m->blas, &f) == DT_OK && dt_cu_gemm_prepare(m->blas, &d) == DT_OK;
    }
    /* (weight, bias, dout, its width, input, its width) of the four biased linears */
    struct { int w, b; const bf16 *dout; int oc; const bf16 *inp; int ic; } lin[4] = {
        {DT_P_QKVW, DT_P_QKVB, m->dqkv, 3 * C, m->act.ln1, C}, {DT_P_ATTPROJW, DT_P_ATTPROJB, m->dres16, C, m->act.atty, C},
        {DT_P_FCW, DT_P_FCB, m->dfch, 4 * C, m->act.ln2, C}, {DT_P_FCPROJW, DT_P_FCPROJB, m->dres16, C, m->act.fchg, 4 * C}};
    m->ch.fuse_bgrad = want_bgrad;
    for (int i = 0; i < 4 && m->ch.fuse_bgrad; i++) {
        dt_cu_gemm_args g = {1, 0, lin[i].oc, lin[i].ic, BT, lin[i].dout, lin[i].oc, 0, lin[i].inp, lin[i].ic, 0,
                             m->grad + pd[lin[i].w].offset, lin[i].ic, 0, 1, 1.0f, 1.0f, 1, NULL, DT_CU_EPI_BGRAD,
                             NULL, m->grad + pd[lin[i].b].offset, m->part};
        m->ch.fuse_bgrad = dt_cu_gemm_prepare(m->blas, &g) == DT_OK;
    }
    return DT_OK;
}

/* The backward's plan with our kernel's epilogues where every layer's GEMM fits them: the
 * fcproj dGELU GEMM's column sums (the fc bias gradient) and the attproj GEMM's DOT
 * epilogue (the flash backward's LD), each on only when asked for (--gemm-own, --gemm-dot)
 * and taken by every layer's call, built as the backward builds it. */
static dt_status plan_backward(dt_gpt_cuda *m, const dt_cu_bwd_plan_in *base) {
    dt_cu_bwd_plan_in in = *base;
    int L = m->cfg.num_layers, C = m->cfg.channels, BT = m->B * m->T;
    size_t sc = (size_t)BT * C;
    in.dgelu_csum = m->ch.fuse_gelu && !m->ch.fuse_bgrad && m->ch.gemm_own;
    in.dot_ld = m->ch.gemm_dot;
    for (int l = 0; l < L; l++) {
        size_t lC = (size_t)l * C;
        /* the douts the backward hands them: a masked copy with hidden dropout, else the
         * residual gradient (its slot when the plan keeps them) */
        const bf16 *fc_dout = in.hidden_dropout ? m->dproj16 : gcu_dres_slot(m, dt_cu_res_slot(l, DT_CU_RES_FCPROJ));
        const bf16 *att_dout = in.hidden_dropout ? m->dproj16 : gcu_dres_slot(m, dt_cu_res_slot(l, DT_CU_RES_ATTPROJ));
        const gcu_lin_bwd fcproj = {gcu_dfch_of(m, l), NULL, NULL, DT_CU_BIAS_COLSUM, fc_dout, m->act.fchg + l * sc * 4,
                                    m->param16 + m->params[DT_P_FCPROJW].offset + lC * 4 * C, BT, 4 * C, C,
                                    m->act.fch + l * sc * 4, NULL, -1};
        const gcu_lin_bwd attproj = {m->dc1, NULL, NULL, DT_CU_BIAS_COLSUM, att_dout, m->act.atty + l * sc,
                                     m->param16 + m->params[DT_P_ATTPROJW].offset + lC * C, BT, C, C, NULL, NULL, -1};
        if (in.dgelu_csum && !gcu_dgelu_csum_fits(m, &fcproj)) in.dgelu_csum = 0;
        if (in.dot_ld && !gcu_dot_fits(m, &attproj)) in.dot_ld = 0;
    }
    dt_cu_bwd_plan_make(&in, &m->bp);
    char why[256];
    if (dt_cu_bwd_plan_check(&in, &m->bp, why, sizeof why) != 0)
        return dt_fail(DT_ESTATE, "--device cuda: the backward's plan is inconsistent: %s", why);
    return DT_OK;
}

dt_status dt_gpt_cuda_create(dt_gpt_cuda **out, const dt_gpt *host, const dt_gpt_cuda_spec *spec) {
    *out = NULL;
    const dt_gpt_config *c = &host->cfg;
    const dt_cuda_options *opt = &spec->opt;
    int B = spec->B, T = spec->T, C = c->channels, NH = c->num_heads, L = c->num_layers;
    if (B < 1 || T < 1 || T > c->max_seq_len)
        return dt_fail(DT_EINVAL, "--device cuda: micro-batch %d and sequence length %d (at most %d)", B, T,
                       c->max_seq_len);
    if (C % 8 || (C / NH) % 8)
        return dt_fail(DT_EUNSUPPORTED, "--device cuda needs --hidden-size (%d) and the head size "
                       "(%d) to be multiples of 8", C, C / NH);
    dt_runtime_mark(DT_LIB_CUDA);
    dt_gpt_cuda *m = (dt_gpt_cuda *)calloc(1, sizeof *m);
    if (!m) return dt_fail(DT_ENOMEM, "out of memory for the GPU model");
    m->cfg = *c;
    memcpy(m->params, host->params, sizeof m->params);
    m->num_params = host->num_params;
    m->B = B;
    m->T = T;
    m->hidden_dropout = spec->hidden_dropout;
    m->attn_dropout = spec->attn_dropout;
    m->seed = host->seed;
    for (int i = 0; i < DT_NUM_PARAM_TENSORS; i++) {
        snprintf(m->pname[i], sizeof m->pname[i], "%s", m->params[i].name);
        snprintf(m->gname[i], sizeof m->gname[i], "d%s", m->params[i].name);
    }
    dt_status st = dt_cu_check(cudaStreamCreateWithFlags(&m->s, cudaStreamNonBlocking), "cudaStreamCreate");
    if (st == DT_OK) st = dt_cu_check(cudaStreamCreateWithFlags(&m->fin, cudaStreamNonBlocking), "cudaStreamCreate");
    if (st == DT_OK) st = dt_cu_check(cudaEventCreateWithFlags(&m->join, cudaEventDisableTiming), "cudaEventCreate");
    if (st == DT_OK) st = dt_cu_check(cudaEventCreateWithFlags(&m->ev_batch, cudaEventDisableTiming), "cudaEventCreate");
    if (st == DT_OK) st = dt_cu_check(cudaEventCreateWithFlags(&m->ev_buckets, cudaEventDisableTiming), "cudaEventCreate");
    if (st == DT_OK) st = dt_cu_check(cudaEventCreateWithFlags(&m->ev_fwd, cudaEventDisableTiming), "cudaEventCreate");
    if (st == DT_OK) st = dt_cu_check(cudaStreamCreateWithFlags(&m->up, cudaStreamNonBlocking), "cudaStreamCreate");
    if (st == DT_OK) st = dt_cu_check(cudaEventCreateWithFlags(&m->ev_stats, cudaEventDisableTiming), "cudaEventCreate");
    if (st != DT_OK) { free(m); return dt_fail_context(st, "--device cuda: no usable GPU"); }
    if ((st = dt_cu_blas_create(&m->blas)) != DT_OK) { dt_gpt_cuda_free(m); return st; }
    m->ch.overlap = opt->bwd_overlap;
    m->ch.gemm_dot = opt->gemm_dot;
    m->ch.graphs = opt->graphs;
    m->ch.gemm_own = opt->gemm_own;
    m->ch.dw_batch = opt->dw_batch ? 2 : 0;
    if (m->ch.overlap) {
        st = dt_cu_check(cudaStreamCreateWithFlags(&m->wgs, cudaStreamNonBlocking), "cudaStreamCreate");
        if (st == DT_OK) st = dt_cu_check(cudaEventCreateWithFlags(&m->ev_ready, cudaEventDisableTiming), "cudaEventCreate");
        if (st == DT_OK) st = dt_cu_check(cudaEventCreateWithFlags(&m->ev_wdone, cudaEventDisableTiming), "cudaEventCreate");
        for (int i = 0; i < DT_CU_READS_MAX && st == DT_OK; i++)
            st = dt_cu_check(cudaEventCreateWithFlags(&m->ev_read[i], cudaEventDisableTiming), "cudaEventCreate");
        if (st == DT_OK) st = dt_cu_blas_create(&m->blas_w);
        if (st != DT_OK) { dt_gpt_cuda_free(m); return st; }
    }
    size_t n = m->num_params, BT = (size_t)B * T, sc = BT * C, Vp = (size_t)c->padded_vocab;
    size_t att = (size_t)L * B * NH * T * T;
    /* --attention-impl auto: flash attention where the shape allows (faster than the GEMM
     * formulation, the only one with attention dropout or head sizes other than 64), on an
     * sm_90 GPU on warpgroup MMA, which gives the mma.sync kernels' bits
     * (tests/gpu/test_gpu_wgmma.cu and test_gpu_wgmma_bwd.cu compare the bytes); flash
     * asks for flash attention and refuses a shape it cannot take; flash-mma keeps the
     * mma.sync kernels; gemm the GEMM formulation. The choice is recorded in env.json. */
    dt_dropout ad = {spec->attn_dropout, 0, 0};
    int flash_ok = dt_cu_flash_supported(C, NH, T, &ad);
    if (!flash_ok && (opt->attention == DT_ATTN_FLASH || opt->attention == DT_ATTN_FLASH_MMA)) {
        dt_gpt_cuda_free(m);
        return dt_fail(DT_EUNSUPPORTED, "--attention-impl %s: flash attention does not take this shape (head size "
                       "%d, T %d%s); use auto or gemm", opt->attention == DT_ATTN_FLASH ? "flash" : "flash-mma",
                       C / NH, T, spec->attn_dropout > 0.0f ? ", attention dropout" : "");
    }
    dt_attention_path ap = dt_attention_choose(B, T, C, NH, &ad, dt_cu_device_cc(),
                                               opt->attention == DT_ATTN_GEMM        ? DT_ATTENTION_GEMM
                                               : opt->attention == DT_ATTN_FLASH_MMA ? DT_ATTENTION_FLASH
                                                                                     : DT_ATTENTION_FLASH_WGMMA);
    m->ch.flash = ap != DT_ATTENTION_GEMM;
    m->ch.flash_wgmma = ap == DT_ATTENTION_FLASH_WGMMA;
    if (dt_cu_device_cc() != 90) m->ch.gemm_own = 0;
    m->ch.gemm_dot = m->ch.gemm_dot && m->ch.gemm_own && m->ch.flash; /* gemm_own: sm_90 only */
    DMALLOC(m->param, n, "parameters");
    DMALLOC(m->grad, n, "gradients");
    DMALLOC(m->adam_m, n, "AdamW m");
    DMALLOC(m->adam_v, n, "AdamW v");
    DMALLOC(m->param16, n, "bf16 parameters");
    DMALLOC(m->act.encoded, sc, "activations");
    DMALLOC(m->act.ln1, L * sc, "activations");
    DMALLOC(m->act.qkv, 3 * L * sc, "activations");
    DMALLOC(m->act.atty, L * sc, "activations");
    if (m->ch.flash) {
        DMALLOC(m->act.att_lse, (size_t)L * B * NH * T, "attention statistics");
        /* the backward's scratch (dS tiles of one layer), bytes counted in bf16 */
        DMALLOC(m->att_scratch, dt_cu_flash_bwd_scratch(B, T, C, NH) / sizeof(bf16), "scratch");
    } else {
        DMALLOC(m->act.att, att, "attention probabilities");
        DMALLOC(m->att_scratch, dt_cu_attention_scratch(B, T, C, NH, host->attn_dropout > 0.0f), "scratch");
    }
    DMALLOC(m->act.attproj, L * sc, "activations");
    DMALLOC(m->act.res2, L * sc, "activations");
    DMALLOC(m->act.ln2, L * sc, "activations");
    DMALLOC(m->act.fch, 4 * L * sc, "activations");
    DMALLOC(m->act.fchg, 4 * L * sc, "activations");
    DMALLOC(m->act.fcproj, L * sc, "activations");
    DMALLOC(m->act.res3, L * sc, "activations");
    DMALLOC(m->act.lnf, sc, "activations");
    DMALLOC(m->act.logits, BT * Vp, "logits");
    DMALLOC(m->act.ln1_mean, L * BT, "statistics");
    DMALLOC(m->act.ln1_rstd, L * BT, "statistics");
    DMALLOC(m->act.ln2_mean, L * BT, "statistics");
    DMALLOC(m->act.ln2_rstd, L * BT, "statistics");
    DMALLOC(m->act.lnf_mean, BT, "statistics");
    DMALLOC(m->act.lnf_rstd, BT, "statistics");
    DMALLOC(m->act.losses, BT, "losses");
    {   /* one partial region per det reduction site of a backward (6 per layer + lnf), so
         * each site's finish can run on m->fin while the main stream goes on; a LayerNorm
         * site holds three vectors per block (dweight, dbias, the fused column sum) */
        size_t pc = (size_t)dt_cu_colsum_parts((int)BT) * 4 * C, pl = dt_cu_ln_part_floats((int)BT, C, 1);
        m->part_site = pc > pl ? pc : pl;
        if (m->part_site < DT_CU_BGRAD_PART_FLOATS(4 * C)) m->part_site = DT_CU_BGRAD_PART_FLOATS(4 * C);
        size_t pa = (size_t)dt_cu_flash_bias_parts(B, T) * 3 * C; /* the flash backward's qkv bias sums */
        if (m->part_site < pa) m->part_site = pa;
        m->part_site = (m->part_site + 63) / 64 * 64; /* 256-byte aligned regions */
        /* the fcproj dGELU GEMM's column-sum partials (our kernel, fused fc bias gradient)
         * take csum_sites consecutive regions */
        size_t pg = dt_cu_gemm_wgmma_csum_floats((int)BT, 4 * C, C);
        m->csum_sites = (int)((pg + m->part_site - 1) / m->part_site);
        m->maxsite = (6 + m->csum_sites) * L + 1;
        DMALLOC(m->part, m->part_site * (size_t)m->maxsite, "scratch");
    }
    DMALLOC(m->dres16, sc, "scratch");
    DMALLOC(m->dproj16, sc, "scratch");
    DMALLOC(m->dc1, sc, "scratch");
    DMALLOC(m->dqkv, 3 * sc, "scratch");
    DMALLOC(m->dfch, 4 * sc, "scratch");
    if ((st = probe_fusions(m, opt->epilogues)) != DT_OK) { dt_gpt_cuda_free(m); return st; }
    /* the backward's plan (plan.h), first for the buffers it keeps; where the epilogues of
     * our own kernel fit is known once every buffer exists (plan_backward, below) */
    dt_cu_bwd_plan_in pin = {m->ch.flash, m->ch.fuse_gelu, m->ch.fuse_bgrad, spec->hidden_dropout > 0.0f, m->ch.dw_batch != 0, 0, 0};
    dt_cu_bwd_plan_make(&pin, &m->bp);
    if (m->bp.dw_batched[DT_CU_LIN_QKV])
        DMALLOC(m->dqkv_all, 3 * sc * (size_t)L, "every layer's dqkv (--dw-batch off saves it)");
    if (!m->ch.fuse_gelu) DMALLOC(m->dfchg, 4 * sc, "scratch"); /* the GEMM's dGELU input, unfused only */
    if (m->bp.dw_batched[DT_CU_LIN_FC])
        DMALLOC(m->dfch_all, 4 * sc * (size_t)L, "every layer's dfch (--dw-batch off saves it)");
    if (m->bp.keep_res)
        DMALLOC(m->dres_all, 2 * sc * (size_t)L, "every layer's residual gradient (--dw-batch off saves it)");
    DMALLOC(m->red_part, 2 * DT_CU_RED_MAX_BLOCKS, "scratch");
    DMALLOC(m->stats, 8, "scratch");
    DMALLOC(m->zeros, 1, "scratch");
    DMALLOC(m->d_in, BT, "batch");
    DMALLOC(m->d_tg, BT, "batch");
    DMALLOC(m->d_order, BT, "batch");
    DMALLOC(m->d_chunk_start, BT + 1, "batch");
    DMALLOC(m->d_chunk_dst, BT, "batch");
    DMALLOC(m->d_multi_tok, dt_cu_encoder_max_multi((int)BT) + 1, "batch");
    DMALLOC(m->d_multi_slot, dt_cu_encoder_max_multi((int)BT) + 1, "batch");
    DMALLOC(m->enc_partial, (size_t)dt_cu_encoder_max_slots((int)BT) * C, "scratch");
    /* the multi-tensor AdamW table */
    size_t offs[DT_NUM_PARAM_TENSORS], nums[DT_NUM_PARAM_TENSORS];
    float decay[DT_NUM_PARAM_TENSORS];
    for (int i = 0; i < DT_NUM_PARAM_TENSORS; i++) {
        offs[i] = m->params[i].offset;
        nums[i] = m->params[i].numel;
        decay[i] = (float)m->params[i].decay;
    }
    size_t nch = dt_cu_adamw_chunks(offs, nums, DT_NUM_PARAM_TENSORS, DT_CU_ADAMW_CHUNK, NULL, 0);
    m->nchunks = (int)nch;
    DMALLOC(m->chunks, nch, "AdamW table"); /* before the host buffers below: a failure leaks none */
    DMALLOC(m->pn_part, nch, "scratch");
    DMALLOC(m->decay, DT_NUM_PARAM_TENSORS, "AdamW table");
    dt_cu_chunk *hch = (dt_cu_chunk *)malloc(sizeof *hch * nch);
    /* pinned, so the uploads are asynchronous (the buckets are built while the GPU runs) */
    m->h_count = (int *)malloc(sizeof(int) * Vp);
    if (cudaMallocHost((void **)&m->h_in, sizeof(int) * BT) != cudaSuccess) m->h_in = NULL;
    if (cudaMallocHost((void **)&m->h_tg, sizeof(int) * BT) != cudaSuccess) m->h_tg = NULL;
    if (cudaMallocHost((void **)&m->h_order, sizeof(int) * BT) != cudaSuccess) m->h_order = NULL;
    if (cudaMallocHost((void **)&m->h_segtok, sizeof(int) * BT) != cudaSuccess) m->h_segtok = NULL;
    if (cudaMallocHost((void **)&m->h_segstart, sizeof(int) * (BT + 1)) != cudaSuccess) m->h_segstart = NULL;
    size_t nmax = (size_t)dt_cu_encoder_max_multi((int)BT) + 1;
    if (cudaMallocHost((void **)&m->h_chunk_start, sizeof(int) * (BT + 1)) != cudaSuccess) m->h_chunk_start = NULL;
    if (cudaMallocHost((void **)&m->h_chunk_dst, sizeof(int) * BT) != cudaSuccess) m->h_chunk_dst = NULL;
    if (cudaMallocHost((void **)&m->h_multi_tok, sizeof(int) * nmax) != cudaSuccess) m->h_multi_tok = NULL;
    if (cudaMallocHost((void **)&m->h_multi_slot, sizeof(int) * nmax) != cudaSuccess) m->h_multi_slot = NULL;
    if (cudaMallocHost((void **)&m->h_stats, sizeof(double) * 4 + sizeof(long long)) != cudaSuccess) m->h_stats = NULL;
    m->h_zeros = m->h_stats ? (long long *)(m->h_stats + 4) : NULL;
    if (!hch || !m->h_in || !m->h_tg || !m->h_count || !m->h_order || !m->h_segtok || !m->h_segstart || !m->h_stats ||
        !m->h_chunk_start || !m->h_chunk_dst || !m->h_multi_tok || !m->h_multi_slot) {
        free(hch);
        dt_gpt_cuda_free(m);
        return dt_fail(DT_ENOMEM, "out of host memory for the GPU model's batch buffers");
    }
    dt_cu_adamw_chunks(offs, nums, DT_NUM_PARAM_TENSORS, DT_CU_ADAMW_CHUNK, hch, nch);
    st = dt_cu_check(cudaMemcpy(m->chunks, hch, sizeof *hch * nch, cudaMemcpyHostToDevice), "upload");
    free(hch);
    if (st == DT_OK) st = dt_cu_check(cudaMemcpy(m->decay, decay, sizeof decay, cudaMemcpyHostToDevice), "upload");
    if (st == DT_OK) st = dt_cu_check(cudaMemcpy(m->param, host->param_mem, sizeof(float) * n,
                                                 cudaMemcpyHostToDevice), "upload parameters");
    if (st == DT_OK) st = dt_cu_check(cudaMemset(m->adam_m, 0, sizeof(float) * n), "cudaMemset");
    if (st == DT_OK) st = dt_cu_check(cudaMemset(m->adam_v, 0, sizeof(float) * n), "cudaMemset");
    if (st == DT_OK) st = dt_cu_check(cudaMemset(m->grad, 0, sizeof(float) * n), "cudaMemset");
    for (int i = 0; i < MAX_EVENTS && st == DT_OK; i++)
        st = dt_cu_check(cudaEventCreate(&m->ev[i]), "cudaEventCreate");
    if (st != DT_OK) { dt_gpt_cuda_free(m); return st; }
    if ((st = plan_backward(m, &pin)) != DT_OK) { dt_gpt_cuda_free(m); return st; }
    dt_cu_f32_to_bf16(m->param16, m->param, n, m->s);
    if ((st = dt_gpt_cuda_sync(m)) != DT_OK) { dt_gpt_cuda_free(m); return st; }
    *out = m;
    return DT_OK;
}

void dt_gpt_cuda_free(dt_gpt_cuda *m) {
    if (!m) return;
    void *bufs[] = {m->param, m->grad, m->adam_m, m->adam_v, m->param16, m->act.encoded, m->act.ln1, m->act.qkv,
                    m->act.atty, m->act.att, m->act.attproj, m->act.res2, m->act.ln2, m->act.fch, m->act.fchg, m->act.fcproj, m->act.res3,
                    m->act.lnf, m->act.logits, m->act.ln1_mean, m->act.ln1_rstd, m->act.ln2_mean, m->act.ln2_rstd,
                    m->act.lnf_mean, m->act.lnf_rstd, m->act.losses, m->part, m->dres16, m->dproj16,
                    m->dc1, m->dqkv, m->dqkv_all, m->dfch_all, m->dres_all, m->dfch, m->dfchg, m->att_scratch,
                    m->red_part, m->stats, m->zeros, m->d_in, m->d_tg, m->d_order, m->d_chunk_start, m->d_chunk_dst,
                    m->d_multi_tok, m->d_multi_slot, m->enc_partial,
                    m->chunks,
                    m->decay, m->act.att_lse, m->pn_part};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) cudaFree(bufs[i]);
    for (int i = 0; i < G_SLOTS; i++)
        if (m->gexec[i]) cudaGraphExecDestroy(m->gexec[i]);
    for (int i = 0; i < MAX_EVENTS; i++)
        if (m->ev[i]) cudaEventDestroy(m->ev[i]);
    dt_cu_blas_free(m->blas);
    dt_cu_blas_free(m->blas_w);
    for (int i = 0; i < DT_CU_READS_MAX; i++)
        if (m->ev_read[i]) cudaEventDestroy(m->ev_read[i]);
    if (m->ev_ready) cudaEventDestroy(m->ev_ready);
    if (m->ev_wdone) cudaEventDestroy(m->ev_wdone);
    if (m->wgs) cudaStreamDestroy(m->wgs);
    if (m->s) cudaStreamDestroy(m->s);
    if (m->fin) cudaStreamDestroy(m->fin);
    if (m->join) cudaEventDestroy(m->join);
    if (m->ev_batch) cudaEventDestroy(m->ev_batch);
    if (m->ev_buckets) cudaEventDestroy(m->ev_buckets);
    if (m->ev_fwd) cudaEventDestroy(m->ev_fwd);
    if (m->up) cudaStreamDestroy(m->up);
    if (m->ev_stats) cudaEventDestroy(m->ev_stats);
    cudaFreeHost(m->h_in); cudaFreeHost(m->h_tg); cudaFreeHost(m->h_order); cudaFreeHost(m->h_segtok);
    cudaFreeHost(m->h_segstart);
    cudaFreeHost(m->h_chunk_start); cudaFreeHost(m->h_chunk_dst); cudaFreeHost(m->h_multi_tok);
    cudaFreeHost(m->h_multi_slot);
    cudaFreeHost(m->h_stats);
    free(m->h_count);
    free(m);
}

void dt_gpt_cuda_set_mode(dt_gpt_cuda *m, int training, uint32_t rng_step) {
    m->training = training;
    m->rng_step = rng_step;
}

void dt_gpt_cuda_set_step(dt_gpt_cuda *m, int64_t step) { m->step = step; }

dt_status dt_gpt_cuda_sync(dt_gpt_cuda *m) {
    DT_CU_TRY(cudaGetLastError());
    DT_CU_TRY(cudaStreamSynchronize(m->s));
    return DT_OK;
}

size_t dt_gpt_cuda_bytes(const dt_gpt_cuda *m) { return m->bytes; }
