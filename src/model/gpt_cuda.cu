/* GPT model on one CUDA GPU (see gpt_cuda.h): buffers, forward, backward, the optimizer
 * step and the named-range timing. The layer sequence mirrors gpt.c line by line. */
#include "ops/ops_cuda.h"
#include "model/cuda/plan.h"

#include "model/gpt_cuda.h"
#include "trace/trace_cuda.h"
extern "C" {
#include "core/determinism.h"
#include "trace/inject.h"
}

#include <math.h>
#include <nvtx3/nvToolsExt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef DT_NVCC_FLAGS
#define DT_NVCC_FLAGS "unknown"
#endif

#define EMB_SITE 0xffffffffu
#define MAX_EVENTS 4096

/* The CUDA graph slots (see "CUDA graphs" below): a training loop alternates these phases,
 * and with gradient accumulation the first backward after zero_grad (fresh gradients) with
 * the ones adding to them; an eval forward (loss scale 0) runs between training steps.
 * Each keeps its own graph. */
enum { G_ZERO, G_FWD, G_FWD_EVAL, G_BWD_FRESH, G_BWD_ADD, G_SLOTS };

struct dt_gpt_cuda {
    dt_gpt_config cfg;
    dt_param_desc params[DT_NUM_PARAM_TENSORS];
    size_t num_params;
    int B, T;
    float hidden_dropout, attn_dropout;
    uint64_t seed;
    uint32_t rng_step;
    int64_t step;       /* the trainer's step (trace events, --inject-nondeterminism) */
    int training;
    int flash;          /* attention through attention_flash_cuda.cu */
    int flash_wgmma;    /* flash kernels on warpgroup MMA (attention_wgmma*_cuda.cu, sm_90 only) */
    int fuse_gelu;      /* GELU in the fc GEMM's epilogue, its backward in the fcproj input-gradient GEMM */
    int fuse_bgrad;     /* bias gradients from the weight-gradient GEMMs' epilogue */
    /* Linears on our own TMA-fed warpgroup-MMA kernel (dt_cu_gemm_wgmma) instead of
     * cuBLASLt, sm_90 only, calls that do not fit its tiles staying on cuBLASLt:
     * DT_GEMM_OWN=gelu (the default) the two GELU GEMMs (fc forward, fcproj input gradient
     * with dGELU), faster than cuBLASLt's in the step by 0.04-0.1 ms (bench/RESULTS.md,
     * session 8); on: the forward linears with a bias (qkv, attproj, fc with GELU, fcproj),
     * and with DT_GEMM_OWN_BWD=on every input gradient (slower in the step); dgelu: the
     * fcproj input gradient only; off: none (every GEMM on cuBLASLt). */
    int gemm_own, gemm_own_bwd;
    /* DT_GEMM_DOT (default on, with our own GEMM and flash attention): the attproj input
     * gradient on our kernel with the DOT epilogue, which writes the flash backward's LD (both
     * flash backwards take it, so DT_ATTENTION=flash-mma still gives the same bits), so no D
     * kernel runs (linear_bwd tells backward_launches, which tells t_attention_bwd) */
    int gemm_dot;
#define OWN_OFF 0
#define OWN_ON 1
#define OWN_GELU 2
#define OWN_DGELU 3
    int ksplit_off;     /* DT_GEMM_SPLITK=off: no GEMM cuts K into chunks */
    const char *fusion_note; /* the fusions asked for (DT_GEMM_EPILOGUES: off, gelu, bgrad, all) */
    cudaStream_t s, fin;  /* main stream; det partial finishes (joined at the end of backward) */
    cudaEvent_t join;
    /* recorded after the latest launches that copy from the pinned batch buffers (the
     * forward's upload on m->s; the backward's buckets on m->up, which copies them while
     * the backward runs, after the forward: ev_fwd): the host rewrites them once both passed */
    cudaEvent_t ev_batch, ev_buckets, ev_fwd;
    cudaStream_t up;
    /* set by zero_grad: the next backward's weight-gradient GEMMs write their gradients
     * (beta 0) instead of adding to them, so zero_grad clears only the other tensors */
    int grad_fresh;
    /* Weight gradients on a second stream (DT_BWD_OVERLAP, default on): the backward's
     * weight-gradient GEMMs run on wgs, through their own cuBLASLt handle and workspace
     * (blas_w: the same plans, so the same bits), while m->s goes on with the input
     * gradients. A dW GEMM reads its dout buffer after m->s made it (ev_ready); before
     * m->s writes that buffer again it waits for the GEMM's event in reads (claim). */
    int overlap;     /* asked for (create); this backward uses it when m->ov */
    int ov;
    /* DT_DW_BATCH (default on): the qkv and fc (and below fcproj and attproj) weight
     * gradients of every layer in one strided-batched GEMM a kind after the layers, instead
     * of one a layer on wgs beside the next layer's input gradients, which it slows about as
     * much as it runs (the GEMMs fill every SM): batched, the products run at the full rate
     * and the layers' input gradients alone. It keeps each layer's dqkv (dqkv_all, L B T 3C)
     * and dfch (dfch_all, L B T 4C). dw_batch: 0 off, 1 qkv, 2 every kind. dwb_qkv, dwb_fc:
     * this backward batches that kind (asked; qkv: flash attention, no qkv bias gradient
     * from the GEMM; fc: the fc bias gradient not from the weight-gradient GEMM's epilogue),
     * traced or not: the batched GEMM is an op event of its own ("matmul_dw_batched"), and
     * block events leave those gradients out. */
    int dw_batch, dwb_qkv, dwb_fc, dwb_res;
    bf16 *dqkv_all, *dfch_all;
    /* dwb_res: the fcproj and attproj weight gradients batched too (no hidden dropout, the
     * LayerNorm backward's column sums making their bias gradients): every LayerNorm backward
     * writes the residual gradient out of place into its own slot of dres_all (L, 2, B T, C;
     * model/cuda/plan.h's dt_cu_res_slot: slot 2 l + 1 is what layer l's fcproj reads, 2 l its
     * attproj; layer 0's LN1 writes dres16 for the embedding backward) */
    bf16 *dres_all;
    bf16 *dres; /* the backward's residual gradient now: dres16, or a slot of dres_all */
    cudaStream_t wgs;
    dt_cu_blas *blas_w;
    cudaEvent_t ev_ready, ev_wdone, ev_read[DT_CU_READS_MAX];
    dt_cu_reads reads;
    dt_cu_blas *blas;
    /* CUDA graphs of the launch sequences (DT_CUDA_GRAPH, default on; model/cuda/plan.h), one a
     * slot */
    int graphs, ncapture, nreplay, nrelaxed;
    dt_cu_graph_state gstate[G_SLOTS];
    cudaGraphExec_t gexec[G_SLOTS];
    /* parameters, gradients, optimizer state */
    float *param, *grad, *adam_m, *adam_v;
    bf16 *param16;
    dt_cu_chunk *chunks;
    int nchunks;
    double *pn_part; /* AdamW's per-chunk sums of parameter squares (the parameter norm) */
    int pn_valid;    /* pn_part holds the sums of the parameters as they are (the last update wrote them) */
    float *decay;
    int decay_set;
    float decay_value;
    /* activations (bf16 unless noted) */
    bf16 *encoded, *ln1, *qkv, *atty, *att, *attproj, *res2, *ln2, *fch, *fchg, *fcproj, *res3, *lnf,
        *logits;
    float *ln1_mean, *ln1_rstd, *ln2_mean, *ln2_rstd, *lnf_mean, *lnf_rstd, *losses;
    float *att_lse; /* flash: (L,B,NH,T) */
    /* backward scratch */
    float *part;
    size_t part_site;  /* floats per partial site; sites used so far in this backward */
    int csum_sites;    /* consecutive sites of the fused fc bias column sum (linear_bwd) */
    int nsite, maxsite, site_over; /* site_over: more sites were asked for than exist */
    /* this backward: the LayerNorm backwards add the attproj/fcproj bias gradients (the
     * column sums of dres16, fused; hidden dropout off and no BGRAD epilogue), and the bias
     * gradient the latest one added into, which the next linear_bwd must not add again */
    int ln_colsum;
    float *db_summed;
    bf16 *dres16, *dproj16, *dc1, *dqkv, *dfch, *dfchg, *att_scratch;
    double *red_part, *stats; /* stats: [0] loss sum, [1] grad sumsq, [2] param sumsq, [3] grad norm */
    long long *zeros;
    /* batch */
    int *d_in, *d_tg, *d_order, *d_segtok, *d_segstart, nseg;
    int *h_in, *h_tg, *h_count, *h_order, *h_segtok, *h_segstart;
    /* pinned read-back of stats[0..3] and zeros: a copy into pageable memory is staged by
     * the driver, which left the device idle ~40-70 us at the end of every step */
    double *h_stats;
    long long *h_zeros;
    cudaEvent_t ev_stats; /* recorded after the copies into h_stats / h_zeros */
    float loss_scale;
    /* the loss sum of the latest forward, read back with the step's statistics */
    double loss_sum;
    int loss_read;
    size_t bytes;
    char desc[32768];
    /* range timing */
    int prof, nev;
    cudaEvent_t ev[MAX_EVENTS];
    int ev_range[MAX_EVENTS];
    /* tracing: names of the per-layer parameter and gradient tensors */
    char pname[DT_NUM_PARAM_TENSORS][24], gname[DT_NUM_PARAM_TENSORS][24];
};

static const char *range_names[DT_R_COUNT] = {
    "embed_fwd", "layernorm_fwd", "matmul_fwd", "attention_fwd", "gelu_fwd", "head_fwd",
    "crossentropy", "head_bwd", "matmul_bwd", "bias_bwd", "gelu_bwd", "attention_bwd",
    "layernorm_bwd", "dropout", "embed_bwd", "grad_norm", "adamw",
};
const char *dt_gpt_cuda_range_name(int r) { return r >= 0 && r < DT_R_COUNT ? range_names[r] : "?"; }

static void rbegin(dt_gpt_cuda *m, int r) {
    nvtxRangePushA(range_names[r]);
    if (m->prof && m->nev + 2 <= MAX_EVENTS) {
        cudaEventRecord(m->ev[m->nev], m->s);
        m->ev_range[m->nev++] = r;
    }
}
static void rend(dt_gpt_cuda *m, int r) {
    nvtxRangePop();
    if (m->prof && m->nev + 1 <= MAX_EVENTS && m->nev > 0 && m->ev_range[m->nev - 1] == r) {
        cudaEventRecord(m->ev[m->nev], m->s);
        m->ev_range[m->nev++] = -1;
    }
}

void dt_gpt_cuda_profile(dt_gpt_cuda *m, int on) { m->prof = on; }

void dt_gpt_cuda_graph_counts(const dt_gpt_cuda *m, int *captures, int *replays, int *relaxed) {
    *captures = m->ncapture;
    *replays = m->nreplay;
    *relaxed = m->nrelaxed;
}

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

/* Picks the GEMM epilogue fusions and makes their plans for the current branch; a fusion is
 * on when it is asked for and cuBLASLt has an algorithm for every one of its plans.
 *  - GELU (default): GELU (tanh form) in the fc GEMM's epilogue with the pre-activation
 *    stored for the backward, dGELU in the fcproj input-gradient GEMM, instead of
 *    gelu_cuda.cu's kernels; the fc bias gradient is then a column sum of dfch;
 *  - bias gradients (DT_GEMM_EPILOGUES=bgrad or all): the four biased linears' bias
 *    gradients from their weight-gradient GEMMs (BGRAD: a partial per K chunk, added in a
 *    fixed order) instead of column sums of dout (reduce_cuda.cu). Off by default: on the
 *    H200 with cuBLASLt 13.1 the epilogue costs the weight-gradient GEMM more than the
 *    column sum it replaces (docs/cuda.md, "GEMMs").
 * DT_GEMM_EPILOGUES=off|gelu|bgrad|all (default gelu) and DT_GEMM_SPLITK=off (no K chunks in
 * any GEMM; default: dt_cu_gemm_splits) are for comparison runs; env.json records the
 * outcome. Buffers must exist. */
static dt_status probe_fusions(dt_gpt_cuda *m) {
    const char *e = getenv("DT_GEMM_EPILOGUES"), *k = getenv("DT_GEMM_SPLITK");
    if (e && strcmp(e, "off") && strcmp(e, "gelu") && strcmp(e, "bgrad") && strcmp(e, "all"))
        return dt_fail(DT_EINVAL, "DT_GEMM_EPILOGUES='%s': accepted: off, gelu (the default), bgrad, all", e);
    if (k && strcmp(k, "on") && strcmp(k, "off"))
        return dt_fail(DT_EINVAL, "DT_GEMM_SPLITK='%s': accepted: on (the default), off", k);
    m->ksplit_off = k && !strcmp(k, "off");
    if (m->ksplit_off) {
        dt_cu_blas_force(m->blas, -1, 1);
        if (m->blas_w) dt_cu_blas_force(m->blas_w, -1, 1);
    }
    m->fuse_gelu = m->fuse_bgrad = 0;
    m->fusion_note = e ? e : "gelu";
    int want_gelu = !strcmp(m->fusion_note, "gelu") || !strcmp(m->fusion_note, "all");
    int want_bgrad = !strcmp(m->fusion_note, "bgrad") || !strcmp(m->fusion_note, "all");
    int BT = m->B * m->T, C = m->cfg.channels;
    const bf16 *w16 = m->param16;
    const dt_param_desc *pd = m->params;
    if (want_gelu) {
        dt_cu_gemm_args f = {0, 1, BT, 4 * C, C, m->ln2, C, 0, w16 + pd[DT_P_FCW].offset, C, 0, m->fchg, 4 * C, 0,
                             0, 1.0f, 0.0f, 1, w16 + pd[DT_P_FCB].offset, DT_CU_EPI_GELU, m->fch, NULL, NULL};
        dt_cu_gemm_args d = {0, 0, BT, 4 * C, C, m->dres16, C, 0, w16 + pd[DT_P_FCPROJW].offset, 4 * C, 0, m->dfch,
                             4 * C, 0, 0, 1.0f, 0.0f, 1, NULL, DT_CU_EPI_DGELU, m->fch, NULL, NULL};
        m->fuse_gelu = dt_cu_gemm_prepare(m->blas, &f) == DT_OK && dt_cu_gemm_prepare(m->blas, &d) == DT_OK;
    }
    /* (weight, bias, dout, its width, input, its width) of the four biased linears */
    struct { int w, b; const bf16 *dout; int oc; const bf16 *inp; int ic; } lin[4] = {
        {DT_P_QKVW, DT_P_QKVB, m->dqkv, 3 * C, m->ln1, C}, {DT_P_ATTPROJW, DT_P_ATTPROJB, m->dres16, C, m->atty, C},
        {DT_P_FCW, DT_P_FCB, m->dfch, 4 * C, m->ln2, C}, {DT_P_FCPROJW, DT_P_FCPROJB, m->dres16, C, m->fchg, 4 * C}};
    m->fuse_bgrad = want_bgrad;
    for (int i = 0; i < 4 && m->fuse_bgrad; i++) {
        dt_cu_gemm_args g = {1, 0, lin[i].oc, lin[i].ic, BT, lin[i].dout, lin[i].oc, 0, lin[i].inp, lin[i].ic, 0,
                             m->grad + pd[lin[i].w].offset, lin[i].ic, 0, 1, 1.0f, 1.0f, 1, NULL, DT_CU_EPI_BGRAD,
                             NULL, m->grad + pd[lin[i].b].offset, m->part};
        m->fuse_bgrad = dt_cu_gemm_prepare(m->blas, &g) == DT_OK;
    }
    return DT_OK;
}

/* An on/off switch in the environment: unset or "on" is on; any other value is refused,
 * naming the accepted ones and what on (the default) means. */
static dt_status env_switch(const char *name, const char *on_means, int *on) {
    const char *v = getenv(name);
    if (v && strcmp(v, "on") && strcmp(v, "off"))
        return dt_fail(DT_EINVAL, "%s='%s': accepted: on (the default: %s), off", name, v, on_means);
    *on = !(v && !strcmp(v, "off"));
    return DT_OK;
}

dt_status dt_gpt_cuda_create(dt_gpt_cuda **out, const dt_gpt *host) {
    *out = NULL;
    const dt_gpt_config *c = &host->cfg;
    int B = host->B, T = host->T, C = c->channels, NH = c->num_heads, L = c->num_layers;
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
    m->hidden_dropout = host->hidden_dropout;
    m->attn_dropout = host->attn_dropout;
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
    if ((st = env_switch("DT_BWD_OVERLAP", "weight gradients on a second stream", &m->overlap)) != DT_OK ||
        (st = env_switch("DT_GEMM_DOT", "the attention backward's D from the attproj input-gradient GEMM's epilogue",
                         &m->gemm_dot)) != DT_OK ||
        (st = env_switch("DT_CUDA_GRAPH", "each step's launches replayed from CUDA graphs", &m->graphs)) != DT_OK) {
        dt_gpt_cuda_free(m);
        return st;
    }
    const char *own = getenv("DT_GEMM_OWN");
    if (own && strcmp(own, "on") && strcmp(own, "off") && strcmp(own, "gelu") && strcmp(own, "dgelu")) {
        dt_gpt_cuda_free(m);
        return dt_fail(DT_EINVAL, "DT_GEMM_OWN='%s': accepted: gelu (the default: the fc forward and fcproj input "
                       "gradient on our own kernel, sm_90 only), off (every GEMM on cuBLASLt), on (the forward "
                       "linears with a bias), dgelu (the fcproj input gradient only)", own);
    }
    m->gemm_own = !own ? OWN_GELU : !strcmp(own, "on") ? OWN_ON : !strcmp(own, "gelu") ? OWN_GELU
                : !strcmp(own, "dgelu") ? OWN_DGELU : OWN_OFF;
    const char *dwb = getenv("DT_DW_BATCH");
    if (dwb && strcmp(dwb, "on") && strcmp(dwb, "qkv") && strcmp(dwb, "off")) {
        dt_gpt_cuda_free(m);
        return dt_fail(DT_EINVAL, "DT_DW_BATCH='%s': accepted: on (the default: the qkv, fc, fcproj and attproj weight "
                       "gradients of every layer in one batched GEMM a kind after the layers), qkv (the qkv ones "
                       "only), off (one GEMM a layer: less memory)", dwb);
    }
    m->dw_batch = dwb && !strcmp(dwb, "off") ? 0 : dwb && !strcmp(dwb, "qkv") ? 1 : 2;
    const char *own_bwd = getenv("DT_GEMM_OWN_BWD");
    if (own_bwd && strcmp(own_bwd, "on") && strcmp(own_bwd, "off")) {
        dt_gpt_cuda_free(m);
        return dt_fail(DT_EINVAL, "DT_GEMM_OWN_BWD='%s': accepted: off (the default), on (with DT_GEMM_OWN=on, "
                       "every input gradient on our own kernel too)", own_bwd);
    }
    if (m->overlap) {
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
    /* Flash attention by default where the shape allows (2.3x faster than the GEMM
     * formulation on GPT-2 124M: bench/RESULTS.md); DT_ATTENTION=gemm forces the GEMM
     * formulation (the only one with attention dropout or head sizes other than 64). On an
     * sm_90 GPU the flash forward and backward run on warpgroup MMA (16% and 20% faster on
     * the H200), which give the mma.sync kernels' bits (tests/gpu/test_gpu_wgmma.cu and
     * test_gpu_wgmma_bwd.cu compare the bytes), so the choice does not change a run's
     * results; DT_ATTENTION=flash-mma keeps the mma.sync kernels. The choice is recorded in
     * env.json. */
    dt_dropout ad = {host->attn_dropout, 0, 0};
    const char *force = getenv("DT_ATTENTION");
    if (force && strcmp(force, "flash") && strcmp(force, "flash-mma") && strcmp(force, "gemm")) {
        dt_gpt_cuda_free(m);
        return dt_fail(DT_EINVAL, "DT_ATTENTION='%s': accepted: flash (the default where the shape allows), "
                       "flash-mma (flash without the sm_90 warpgroup-MMA kernels), gemm", force);
    }
    dt_attention_path ap = dt_attention_choose(B, T, C, NH, &ad, dt_cu_device_cc(),
                                               !force || !strcmp(force, "flash") ? DT_ATTENTION_FLASH_WGMMA
                                               : !strcmp(force, "flash-mma")     ? DT_ATTENTION_FLASH
                                                                                 : DT_ATTENTION_GEMM);
    m->flash = ap != DT_ATTENTION_GEMM;
    m->flash_wgmma = ap == DT_ATTENTION_FLASH_WGMMA;
    if (dt_cu_device_cc() != 90) m->gemm_own = OWN_OFF;
    m->gemm_own_bwd = m->gemm_own == OWN_ON && own_bwd && !strcmp(own_bwd, "on");
    m->gemm_dot = m->gemm_dot && m->gemm_own != OWN_OFF && m->flash; /* gemm_own: sm_90 only */
    DMALLOC(m->param, n, "parameters");
    DMALLOC(m->grad, n, "gradients");
    DMALLOC(m->adam_m, n, "AdamW m");
    DMALLOC(m->adam_v, n, "AdamW v");
    DMALLOC(m->param16, n, "bf16 parameters");
    DMALLOC(m->encoded, sc, "activations");
    DMALLOC(m->ln1, L * sc, "activations");
    DMALLOC(m->qkv, 3 * L * sc, "activations");
    DMALLOC(m->atty, L * sc, "activations");
    if (m->flash) {
        DMALLOC(m->att_lse, (size_t)L * B * NH * T, "attention statistics");
        /* the backward's scratch (dS tiles of one layer), bytes counted in bf16 */
        DMALLOC(m->att_scratch, dt_cu_flash_bwd_scratch(B, T, C, NH) / sizeof(bf16), "scratch");
    } else {
        DMALLOC(m->att, att, "attention probabilities");
        DMALLOC(m->att_scratch, dt_cu_attention_scratch(B, T, C, NH, host->attn_dropout > 0.0f), "scratch");
    }
    DMALLOC(m->attproj, L * sc, "activations");
    DMALLOC(m->res2, L * sc, "activations");
    DMALLOC(m->ln2, L * sc, "activations");
    DMALLOC(m->fch, 4 * L * sc, "activations");
    DMALLOC(m->fchg, 4 * L * sc, "activations");
    DMALLOC(m->fcproj, L * sc, "activations");
    DMALLOC(m->res3, L * sc, "activations");
    DMALLOC(m->lnf, sc, "activations");
    DMALLOC(m->logits, BT * Vp, "logits");
    DMALLOC(m->ln1_mean, L * BT, "statistics");
    DMALLOC(m->ln1_rstd, L * BT, "statistics");
    DMALLOC(m->ln2_mean, L * BT, "statistics");
    DMALLOC(m->ln2_rstd, L * BT, "statistics");
    DMALLOC(m->lnf_mean, BT, "statistics");
    DMALLOC(m->lnf_rstd, BT, "statistics");
    DMALLOC(m->losses, BT, "losses");
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
    if (m->dw_batch && m->flash)
        DMALLOC(m->dqkv_all, 3 * sc * (size_t)L, "every layer's dqkv (DT_DW_BATCH: =off saves it)");
    DMALLOC(m->dfch, 4 * sc, "scratch");
    if ((st = probe_fusions(m)) != DT_OK) { dt_gpt_cuda_free(m); return st; }
    if (!m->fuse_gelu) DMALLOC(m->dfchg, 4 * sc, "scratch"); /* the GEMM's dGELU input, unfused only */
    if (m->dw_batch == 2 && !m->fuse_bgrad)
        DMALLOC(m->dfch_all, 4 * sc * (size_t)L, "every layer's dfch (DT_DW_BATCH: =off saves it)");
    if (m->dw_batch == 2 && !m->fuse_bgrad && m->hidden_dropout == 0.0f)
        DMALLOC(m->dres_all, 2 * sc * (size_t)L, "every layer's residual gradient (DT_DW_BATCH: =off saves it)");
    DMALLOC(m->red_part, 2 * DT_CU_RED_MAX_BLOCKS, "scratch");
    DMALLOC(m->stats, 8, "scratch");
    DMALLOC(m->zeros, 1, "scratch");
    DMALLOC(m->d_in, BT, "batch");
    DMALLOC(m->d_tg, BT, "batch");
    DMALLOC(m->d_order, BT, "batch");
    DMALLOC(m->d_segtok, BT, "batch");
    DMALLOC(m->d_segstart, BT + 1, "batch");
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
    if (cudaMallocHost((void **)&m->h_stats, sizeof(double) * 4 + sizeof(long long)) != cudaSuccess) m->h_stats = NULL;
    m->h_zeros = m->h_stats ? (long long *)(m->h_stats + 4) : NULL;
    if (!hch || !m->h_in || !m->h_tg || !m->h_count || !m->h_order || !m->h_segtok || !m->h_segstart || !m->h_stats) {
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
    dt_cu_f32_to_bf16(m->param16, m->param, n, m->s);
    if ((st = dt_gpt_cuda_sync(m)) != DT_OK) { dt_gpt_cuda_free(m); return st; }
    *out = m;
    return DT_OK;
}

void dt_gpt_cuda_free(dt_gpt_cuda *m) {
    if (!m) return;
    void *bufs[] = {m->param, m->grad, m->adam_m, m->adam_v, m->param16, m->encoded, m->ln1, m->qkv,
                    m->atty, m->att, m->attproj, m->res2, m->ln2, m->fch, m->fchg, m->fcproj, m->res3,
                    m->lnf, m->logits, m->ln1_mean, m->ln1_rstd, m->ln2_mean, m->ln2_rstd,
                    m->lnf_mean, m->lnf_rstd, m->losses, m->part, m->dres16, m->dproj16,
                    m->dc1, m->dqkv, m->dqkv_all, m->dfch_all, m->dres_all, m->dfch, m->dfchg, m->att_scratch,
                    m->red_part, m->stats, m->zeros, m->d_in, m->d_tg, m->d_order, m->d_segtok, m->d_segstart,
                    m->chunks,
                    m->decay, m->att_lse, m->pn_part};
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

/* The partial region of the next det reduction site of this backward. Past the last one
 * the last region is handed out again (two finishes could then race on it) and the
 * backward fails at its end: maxsite must cover every site a layer can use. */
static float *next_parts(dt_gpt_cuda *m, int n) {
    if (m->nsite + n > m->maxsite) m->site_over = 1;
    int k = m->nsite + n <= m->maxsite ? m->nsite : m->maxsite - n;
    m->nsite += n;
    return m->part + (size_t)k * m->part_site;
}
static float *next_part(dt_gpt_cuda *m) { return next_parts(m, 1); }

static dt_dropout hidden_drop(const dt_gpt_cuda *m) {
    dt_dropout d = {m->training ? m->hidden_dropout : 0.0f, m->seed, m->rng_step};
    return d;
}
static dt_dropout attn_drop(const dt_gpt_cuda *m) {
    dt_dropout d = {m->training ? m->attn_dropout : 0.0f, m->seed, m->rng_step};
    return d;
}

/* ---- tracing (DESIGN §6) --------------------------------------------------------------
 * Each op call below is an op-level trace event when --trace-level op (or kernel) is on,
 * with the same op names as the CPU model where the op is the same (matmul_fwd,
 * layernorm_bwd, ...) and its own where the GPU fuses ops (residual_layernorm_fwd,
 * crossentropy, matmul_gelu_fwd, matmul_dgelu_bwd). Tensors are digested on the device (trace/trace_cuda.h) after joining the
 * side stream m->fin, where the det partial finishes of parameter gradients run, so no
 * digest reads a buffer before its producer finished. Each op also offers its primary
 * output to --inject-nondeterminism. With tracing off a site costs one compare.
 *
 * OP_BEGIN(phase, op, variant op id or -1, adds...) opens the event; the adds are
 * IN(name, ptr, dtype, rows, cols) / IN_ROWS(...) (order-sensitive) separated by commas
 * (BTC stands for the rows and columns of a (B*T, C) activation).
 * OP_END(adds...) digests the outputs (OUT / OUT_ROWS) and writes the event. */
#define IN(name, p, dt, ...) dt_gtrace_add(&ts_, name, p, dt, __VA_ARGS__) /* ...: rows, cols */
#define IN_ROWS(name, p, dt, ...) dt_gtrace_add_rows(&ts_, name, p, dt, __VA_ARGS__)
#define OUT IN
#define OUT_ROWS IN_ROWS
#define OP_BEGIN(phase, op, vid, ...)                                                        \
    dt_trace_op *h_ = NULL;                                                                  \
    if (dt_trace_on(DT_TRACE_OP)) {                                                          \
        dt_gtrace_set ts_;                                                                   \
        gset_init(&ts_);                                                                     \
        __VA_ARGS__;                                                                         \
        TRY(join_fin(m));                                                                    \
        TRY(dt_gtrace_begin(&h_, DT_TRACE_OP, phase, op, variant_name(vid), &ts_, m->s));    \
        dt_cu_launch_take(NULL, 0); /* the launch log holds this op's launches only */       \
    }
#define OP_END(...)                                                                          \
    if (h_) {                                                                                \
        launch_info(h_);                                                                     \
        dt_gtrace_set ts_;                                                                   \
        gset_init(&ts_);                                                                     \
        __VA_ARGS__;                                                                         \
        TRY(join_fin(m));                                                                    \
        TRY(dt_gtrace_end(h_, &ts_, m->s));                                                  \
    }
#define BF DT_DT_BF16
#define F32 DT_DT_F32
#define TRY(x) do { dt_status st_ = (x); if (st_ != DT_OK) return st_; } while (0)

static void gset_init(dt_gtrace_set *s) { s->n = s->overflow = s->nrows_used = 0; }

static const char *variant_name(int op) {
    if (op < 0) return NULL; /* one path, deterministic by nature */
    return dt_op_variant((dt_op_id)op) == DT_VARIANT_DET ? "det" : "fast";
}

/* Makes m->s wait for the work queued on m->fin so far. */
static dt_status join_fin(dt_gpt_cuda *m) {
    TRY(dt_cu_check(cudaEventRecord(m->join, m->fin), "cudaEventRecord"));
    return dt_cu_check(cudaStreamWaitEvent(m->s, m->join, 0), "cudaStreamWaitEvent");
}

/* m->s is about to write buf: wait for the weight-gradient GEMM that still reads it. */
static dt_status claim(dt_gpt_cuda *m, const void *buf) {
    int k = dt_cu_reads_claim(&m->reads, buf);
    return k < 0 ? DT_OK : dt_cu_check(cudaStreamWaitEvent(m->s, m->ev_read[k], 0), "cudaStreamWaitEvent");
}

/* The weight-gradient GEMM (and bias column sum) just queued on m->wgs reads buf: record
 * when it is done. */
static dt_status note_read(dt_gpt_cuda *m, const void *buf) {
    int k = dt_cu_reads_note(&m->reads, buf);
    if (k < 0)
        return dt_fail(DT_ESTATE, "backward overlap: more than %d buffers read by pending weight-gradient "
                       "GEMMs", DT_CU_READS_MAX);
    return dt_cu_check(cudaEventRecord(m->ev_read[k], m->wgs), "cudaEventRecord");
}

/* Makes m->s wait for everything queued on m->wgs (before the embedding backward, which
 * adds into wte's gradient; every later use of the gradients comes after it). */
static dt_status join_wgs(dt_gpt_cuda *m) {
    if (!m->ov) return DT_OK;
    dt_cu_reads_clear(&m->reads);
    TRY(dt_cu_check(cudaEventRecord(m->ev_wdone, m->wgs), "cudaEventRecord"));
    return dt_cu_check(cudaStreamWaitEvent(m->s, m->ev_wdone, 0), "cudaStreamWaitEvent");
}

/* --inject-nondeterminism: flips the lowest bit of n elements at p after `op`. */
static dt_status inject(dt_gpt_cuda *m, const char *op, void *p, size_t n, int esize) {
    return dt_gtrace_inject(op, m->step, p, n, esize, m->s);
}

/* ---- CUDA graphs (model/cuda/plan.h, "CUDA graphs of a step's launches") --------------
 * A step's launch sequence is the same every step: hundreds of kernels, memsets and copies
 * whose arguments are buffers fixed at create and settings fixed per signature. Launched
 * one by one they leave the device idle between them (the host's pacing at the start of a
 * step, a few microseconds a launch after); recorded once as a graph and replayed they do
 * not. The batch enters through copies from the pinned h_in/h_tg, which a replay reads
 * afresh. Calls that must run host code per op (trace events, profiled ranges, a pending
 * injection) or whose kernels take per-step arguments (dropout's step) launch eagerly. */
static const char *graph_names[G_SLOTS] = {"zero_grad (graph)", "forward (graph)", "eval forward (graph)",
                                           "backward (graph)", "accumulating backward (graph)"};

static int graph_eligible(const dt_gpt_cuda *m) {
    dt_dropout hd = hidden_drop(m), ad = attn_drop(m);
    return m->graphs && !m->prof && !dt_trace_on(DT_TRACE_MODULE) && !dt_inject_pending() && !dt_dropout_on(&hd) &&
           !dt_dropout_on(&ad);
}

/* Every host-side setting phase g's launch sequence depends on. */
static uint64_t graph_sig(const dt_gpt_cuda *m, int g) {
    struct {
        int g, training, ov, dwb, ln_colsum, grad_fresh;
        float loss_scale;
        unsigned char variant[DT_OP_COUNT];
    } k;
    memset(&k, 0, sizeof k);
    k.g = g;
    if (g != G_ZERO) {
        k.training = m->training;
        k.loss_scale = m->loss_scale;
        if (g == G_BWD_FRESH || g == G_BWD_ADD) { /* set by the backward before its launches */
            k.ov = m->ov;
            k.dwb = m->dwb_qkv | m->dwb_fc << 1 | m->dwb_res << 2;
            k.ln_colsum = m->ln_colsum;
            k.grad_fresh = m->grad_fresh;
        }
        for (int i = 0; i < DT_OP_COUNT; i++) k.variant[i] = (unsigned char)dt_op_variant((dt_op_id)i);
    }
    return dt_cu_graph_sig(DT_CU_GRAPH_SIG0, &k, sizeof k);
}

/* Runs phase g's launches (fn): eagerly, recorded into a graph that is then launched, or
 * as a replay of the graph held (dt_cu_graph_decide). When a capture fails (an API call the
 * capture refused: a bug to report), nothing was launched; graphs are dropped for the
 * model's life with a note on stderr and the launches run eagerly, which gives the same
 * bits (a graph changes how the kernels are launched, not what they compute). */
static void graphs_off(dt_gpt_cuda *m, int g, const char *why) {
    fprintf(stderr, "detrain: recording the %s launches as a CUDA graph failed (%s); running every step's "
            "launches one by one from now on (same results; set DT_CUDA_GRAPH=off to skip the attempt, and "
            "please report this)\n", graph_names[g], why);
    (void)cudaGetLastError();
    for (int i = 0; i < G_SLOTS; i++) {
        if (m->gexec[i]) cudaGraphExecDestroy(m->gexec[i]);
        m->gexec[i] = NULL;
        dt_cu_graph_forget(&m->gstate[i]);
    }
    m->graphs = 0;
    dt_cu_reads_clear(&m->reads); /* events noted in the abandoned capture */
}

static dt_status run_phase(dt_gpt_cuda *m, int g, dt_status (*fn)(dt_gpt_cuda *)) {
    uint64_t sig = graph_sig(m, g);
    dt_cu_graph_act act = dt_cu_graph_decide(&m->gstate[g], graph_eligible(m), sig);
    if (act == DT_CU_GRAPH_EAGER) return fn(m);
    if (act == DT_CU_GRAPH_REPLAY) {
        nvtxRangePushA(graph_names[g]);
        cudaError_t e = cudaGraphLaunch(m->gexec[g], m->s);
        nvtxRangePop();
        m->nreplay++;
        return dt_cu_check(e, "cudaGraphLaunch");
    }
    cudaError_t e = cudaStreamBeginCapture(m->s, cudaStreamCaptureModeRelaxed);
    if (e != cudaSuccess) {
        graphs_off(m, g, cudaGetErrorString(e));
        return fn(m);
    }
    dt_cu_blas_capture_begin(m->blas);
    if (m->blas_w) dt_cu_blas_capture_begin(m->blas_w);
    dt_status st = fn(m);
    cudaGraph_t graph = NULL;
    e = cudaStreamEndCapture(m->s, &graph);
    /* cuBLASLt's workspace memsets off the stream's path (ops_cuda.h) */
    cudaGraph_t ok = st == DT_OK && e == cudaSuccess ? graph : NULL;
    int moved = dt_cu_blas_graph_relax(m->blas, ok), moved_w = m->blas_w ? dt_cu_blas_graph_relax(m->blas_w, ok) : 0;
    if (ok && getenv("DT_CUDA_GRAPH_VERBOSE"))
        fprintf(stderr, "detrain: %s recorded; cuBLASLt workspace memsets moved off the path: %d + %d%s\n",
                graph_names[g], moved, moved_w, moved < 0 || moved_w < 0 ? " (an API error stopped the move)" : "");
    m->nrelaxed += (moved > 0 ? moved : 0) + (moved_w > 0 ? moved_w : 0);
    cudaGraphExec_t exec = NULL;
    if (st == DT_OK && e == cudaSuccess) e = cudaGraphInstantiate(&exec, graph, 0);
    if (graph) cudaGraphDestroy(graph);
    if (st == DT_OK && e == cudaSuccess) {
        if (m->gexec[g]) cudaGraphExecDestroy(m->gexec[g]);
        m->gexec[g] = exec;
        dt_cu_graph_captured(&m->gstate[g], sig);
        m->ncapture++;
        return dt_cu_check(cudaGraphLaunch(exec, m->s), "cudaGraphLaunch");
    }
    graphs_off(m, g, e != cudaSuccess ? cudaGetErrorString(e) : dt_errmsg());
    return fn(m);
}

/* Kernel-level detail of the op's own kernels: every launch noted since OP_BEGIN (name,
 * grid, block, shared memory; the launch log of ops/cuda/launch_log.h). */
static void launch_info(dt_trace_op *h) {
    if (!dt_trace_on(DT_TRACE_KERNEL)) return;
    char buf[1024];
    if (dt_cu_launch_take(buf, sizeof buf) > 0) dt_trace_kernel_info(h, "%s", buf);
}

/* Whether a GEMM runs on our own kernel: the caller's DT_GEMM_OWN mode asks for it (want)
 * and the call fits its tiles; else cuBLASLt. */
static int own_fits(const dt_gpt_cuda *m, const dt_cu_gemm_args *a, int want) {
    return want && m->gemm_own && dt_cu_gemm_wgmma_fits(a->ta, a->tb, a->M, a->N, a->K, a->lda, a->ldb, a->ldc,
                                                        a->c_f32, a->alpha, a->beta, a->batch, a->epi,
                                                        (const void *)a->A, (const void *)a->B, a->C,
                                                        (const void *)a->bias, a->aux);
}
/* The GEMM on our kernel (own, from own_fits; a->csum finished on m->fin) or cuBLASLt. */
static dt_status run_gemm(dt_gpt_cuda *m, const dt_cu_gemm_args *a, int own) {
    return own ? dt_cu_gemm_wgmma_fin(a, m->s, m->fin) : dt_cu_gemm(m->blas, a, m->s);
}
/* DT_GEMM_OWN puts the fcproj input gradient (dGELU) on our kernel. */
static int own_dgelu(const dt_gpt_cuda *m) {
    return m->gemm_own == OWN_GELU || m->gemm_own == OWN_DGELU || m->gemm_own_bwd;
}

/* Kernel-level detail of the GEMM just queued (algorithm, tile, split-K). */
static void gemm_info(dt_gpt_cuda *m, dt_trace_op *h, const char *what) {
    if (!h || !dt_trace_on(DT_TRACE_KERNEL)) return;
    char buf[400];
    dt_cu_gemm_describe_last(m->blas, buf, sizeof buf);
    dt_trace_kernel_info(h, "%s: %s", what, buf);
}

/* Module-level event of block l: its input (the residual stream or its gradient) and the
 * layer's parameters, plus its gradients in the backward (as the CPU model's block events).
 * With m->ln_colsum, block l's LN1 backward also adds into layer l-1's fcproj bias gradient:
 * that tensor is one of block l's backward gradients too ("dfcprojb.prev"). */
static void layer_tensors(dt_gpt_cuda *m, dt_gtrace_set *s, int l, int grads) {
    for (int i = DT_P_LN1W; i <= DT_P_FCPROJB; i++) {
        /* a weight gradient made after the layers (DT_DW_BATCH) belongs to that op's event */
        if (grads && ((i == DT_P_QKVW && m->dwb_qkv) || (i == DT_P_FCW && m->dwb_fc) ||
                      ((i == DT_P_FCPROJW || i == DT_P_ATTPROJW) && m->dwb_res)))
            continue;
        const dt_param_desc *d = &m->params[i];
        size_t per_layer = d->numel / (size_t)d->shape[0];
        int64_t rows = d->ndim == 3 ? d->shape[1] : 1, cols = d->ndim == 3 ? d->shape[2] : d->shape[1];
        const float *base = grads ? m->grad : m->param;
        dt_gtrace_add(s, grads ? m->gname[i] : m->pname[i], base + d->offset + (size_t)l * per_layer,
                      DT_DT_F32, rows, cols);
    }
    if (grads && m->ln_colsum && l > 0)
        dt_gtrace_add(s, "dfcprojb.prev", m->grad + m->params[DT_P_FCPROJB].offset + (size_t)(l - 1) * m->cfg.channels,
                      DT_DT_F32, 1, m->cfg.channels);
}

static dt_status block_begin(dt_gpt_cuda *m, dt_trace_op **h, int phase, int l, const void *x, int xdtype) {
    char scope[32];
    snprintf(scope, sizeof scope, "h.%d", l);
    dt_trace_scope_push(scope);
    *h = NULL;
    if (!dt_trace_on(DT_TRACE_MODULE)) return DT_OK;
    dt_gtrace_set s;
    gset_init(&s);
    dt_gtrace_add(&s, "x", x, xdtype, (int64_t)m->B * m->T, m->cfg.channels);
    layer_tensors(m, &s, l, 0);
    if (phase == DT_PHASE_BWD) layer_tensors(m, &s, l, 1);
    TRY(join_fin(m));
    return dt_gtrace_begin(h, DT_TRACE_MODULE, phase, phase == DT_PHASE_FWD ? "block_fwd" : "block_bwd",
                           NULL, &s, m->s);
}

static dt_status block_end(dt_gpt_cuda *m, dt_trace_op *h, int phase, int l, const void *y, int ydtype) {
    dt_status st = DT_OK;
    if (h) {
        dt_gtrace_set s;
        gset_init(&s);
        dt_gtrace_add(&s, phase == DT_PHASE_FWD ? "y" : "dx", y, ydtype, (int64_t)m->B * m->T, m->cfg.channels);
        if (phase == DT_PHASE_BWD) layer_tensors(m, &s, l, 1);
        st = join_fin(m);
        if (st == DT_OK) st = dt_gtrace_end(h, &s, m->s);
    }
    dt_trace_scope_pop();
    return st;
}

/* Linear layer forward: out (N,OC) = inp (N,IC) W^T + b, W (OC,IC) bf16. */
static dt_status linear_fwd(dt_gpt_cuda *m, bf16 *out, const bf16 *inp, const bf16 *w, const bf16 *b,
                            int N, int IC, int OC) {
    OP_BEGIN(DT_PHASE_FWD, "matmul_fwd", DT_OP_GEMM,
             (IN("x", inp, BF, N, IC), IN("w", w, BF, OC, IC), IN("b", b, BF, 1, b ? OC : 0)));
    dt_cu_gemm_args a = {0, 1, N, OC, IC, inp, IC, 0, w, IC, 0, out, OC, 0, 0, 1.0f, 0.0f, 1, b};
    /* the head (no bias) stays on cuBLASLt (faster there: bench/RESULTS.md) */
    int own = own_fits(m, &a, b && m->gemm_own == OWN_ON);
    TRY(run_gemm(m, &a, own));
    if (!own) gemm_info(m, h_, "y");
    TRY(inject(m, "matmul_fwd", out, (size_t)N * OC, 2));
    OP_END(OUT("y", out, BF, N, OC));
    return DT_OK;
}

/* The fc linear with its GELU (m->fuse_gelu): pre (N,OC) = inp W^T + b, out = GELU(pre),
 * one GEMM whose epilogue writes both ("matmul_gelu_fwd"; the bits of out differ from
 * linear_fwd + t_gelu_fwd, which applies GELU to the bf16-rounded pre). */
static dt_status linear_gelu_fwd(dt_gpt_cuda *m, bf16 *out, bf16 *pre, const bf16 *inp, const bf16 *w,
                                 const bf16 *b, int N, int IC, int OC) {
    OP_BEGIN(DT_PHASE_FWD, "matmul_gelu_fwd", DT_OP_GEMM,
             (IN("x", inp, BF, N, IC), IN("w", w, BF, OC, IC), IN("b", b, BF, 1, OC)));
    dt_cu_gemm_args a = {0, 1, N, OC, IC, inp, IC, 0, w, IC, 0, out, OC, 0, 0, 1.0f, 0.0f, 1, b,
                         DT_CU_EPI_GELU, pre, NULL, NULL};
    int own = own_fits(m, &a, m->gemm_own == OWN_ON || m->gemm_own == OWN_GELU);
    TRY(run_gemm(m, &a, own));
    if (!own) gemm_info(m, h_, "pre, y = gelu(pre)"); /* ours: OP_END reports its launch */
    TRY(inject(m, "matmul_gelu_fwd", out, (size_t)N * OC, 2));
    OP_END((OUT("pre", pre, BF, N, OC), OUT("y", out, BF, N, OC)));
    return DT_OK;
}

/* The weight gradient of a linear, dw (OC, IC) fp32 = dout^T (OC x N) inp (N x IC), added to
 * dw unless zero_grad asked for fresh gradients (beta 0): linear_bwd's call, and each layer's
 * of the batched one (DT_DW_BATCH). */
static dt_cu_gemm_args dw_gemm(const dt_gpt_cuda *m, const bf16 *dout, const bf16 *inp, float *dw, int N, int IC,
                               int OC) {
    dt_cu_gemm_args g = {1, 0, OC, IC, N, dout, OC, 0, inp, IC, 0, dw, IC, 0, 1, 1.0f, m->grad_fresh ? 0.0f : 1.0f,
                         1, NULL};
    return g;
}
/* When overlapping: what m->s has queued (the dout a weight gradient reads) comes before
 * what m->wgs queues next. */
static dt_status wgs_after_main(dt_gpt_cuda *m) {
    if (!m->ov) return DT_OK;
    TRY(dt_cu_check(cudaEventRecord(m->ev_ready, m->s), "cudaEventRecord"));
    return dt_cu_check(cudaStreamWaitEvent(m->wgs, m->ev_ready, 0), "cudaStreamWaitEvent");
}

/* Linear layer backward: dinp (bf16) = dout W; dW (fp32) += dout^T inp; db += colsum(dout).
 * With gelu_pre (the GELU's pre-activation that made inp, m->fuse_gelu), dinp is the
 * gradient before that GELU: dinp = (dout W) * GELU'(gelu_pre), from the GEMM's epilogue
 * ("matmul_dgelu_bwd"). With m->fuse_bgrad, db comes from the dW GEMM's epilogue. When db is
 * m->db_summed, the op that wrote dout already added its column sums into db (the
 * LayerNorm backward's fused sum, or this function's below, finished on m->fin): db is left
 * alone, and the event's db (input and output, digested after joining m->fin) is that
 * finished gradient. dx_db (with gelu_pre, or NULL): the bias gradient of the linear whose
 * backward reads dinp next (fc's); when the dGELU GEMM runs on our kernel, its epilogue adds
 * the column sums of dinp into it (DT_OP_BIAS_BWD, an output of this event, "colsum_dx")
 * and it becomes m->db_summed, so dinp is not read back for it. dot_l (attproj's, else -1):
 * the layer whose attention output inp is; with m->gemm_dot, where the GEMM fits our
 * kernel, its DOT epilogue also writes the flash backward's LD (lse log2(e) and D = rowsum(dinp
 * O) per head and row) into the attention scratch, an output of this event ("ld"), and
 * *ld_made (with dot_l >= 0) says whether it did: then the attention backward that follows
 * runs no D kernel. dw NULL: the caller makes the weight gradient (batched over the layers
 * with DT_DW_BATCH); dinp is made here, and db where asked (summed already, or a column sum:
 * never the bias-gradient epilogue, m->fuse_bgrad). */
static dt_status linear_bwd(dt_gpt_cuda *m, bf16 *dinp, float *dw, float *db, const bf16 *dout,
                            const bf16 *inp, const bf16 *w, int N, int IC, int OC, const bf16 *gelu_pre,
                            float *dx_db, int dot_l, int *ld_made) {
    if (!dw && db && m->fuse_bgrad)
        return dt_fail(DT_ESTATE, "linear_bwd: a bias gradient from the weight-gradient GEMM's epilogue without "
                       "that GEMM");
    const char *op = gelu_pre ? "matmul_dgelu_bwd" : "matmul_bwd";
    dt_cu_gemm_args a = {0, 0, N, IC, OC, dout, OC, 0, w, IC, 0, dinp, IC, 0, 0, 1.0f, 0.0f, 1, NULL,
                         gelu_pre ? DT_CU_EPI_DGELU : DT_CU_EPI_DEFAULT, (void *)gelu_pre, NULL, NULL, NULL, NULL};
    const int B = m->B, T = m->T, NH = m->cfg.num_heads;
    float *ld = NULL; /* the DOT epilogue's LD, where it runs */
    if (dot_l >= 0 && m->gemm_dot) {
        dt_cu_gemm_args d = a;
        d.epi = DT_CU_EPI_DOT;
        d.aux = (void *)inp;
        d.dot_ld = dt_cu_flash_scratch_ld(m->att_scratch);
        d.dot_lse = m->att_lse + (size_t)dot_l * B * NH * T;
        d.dot_T = T;
        if (own_fits(m, &d, 1)) {
            a = d;
            ld = d.dot_ld;
        }
    }
    /* the input gradients on our kernel with DT_GEMM_OWN_BWD=on, dGELU's with =gelu, =dgelu,
     * attproj's with its DOT epilogue */
    const int own = ld || own_fits(m, &a, m->gemm_own_bwd || (gelu_pre && own_dgelu(m)));
    float *csum = NULL; /* dx_db from the dGELU epilogue, where its partials fit their sites */
    if (gelu_pre && own && dt_cu_gemm_wgmma_csum_floats(N, IC, OC) <= (size_t)m->csum_sites * m->part_site)
        csum = dx_db;
    OP_BEGIN(DT_PHASE_BWD, op, DT_OP_GEMM,
             (IN("dy", dout, BF, N, OC), IN("x", inp, BF, N, IC), IN("w", w, BF, OC, IC),
              IN("pre", gelu_pre, BF, N, gelu_pre ? IC : 0), IN("dw", dw, F32, OC, dw ? IC : 0),
              IN("db", db, F32, 1, db ? OC : 0), IN("colsum_dx", csum, F32, 1, csum ? IC : 0),
              IN("lse", a.dot_lse, F32, ld ? (int64_t)B * NH * T : 0, 1)));
    if (csum) {
        a.csum = csum;
        a.csum_part = next_parts(m, m->csum_sites);
    }
    int summed = db && db == m->db_summed;
    if (summed) m->db_summed = NULL;
    const int bgrad = db && !summed && m->fuse_bgrad;
    if (dw) TRY(wgs_after_main(m)); /* dout is ready: the weight gradient may start on m->wgs */
    TRY(claim(m, dinp));
    TRY(run_gemm(m, &a, own));
    if (!own) gemm_info(m, h_, gelu_pre ? "dx = (dy w) gelu'(pre)" : "dx");
    if (csum && h_)
        dt_trace_kernel_info(h_, "colsum_dx: fused column sums of dx (dGELU epilogue), bias_bwd %s",
                             variant_name(DT_OP_BIAS_BWD));
    if (ld && h_) dt_trace_kernel_info(h_, "ld: the flash backward's D = rowsum(dx o) per head (DOT epilogue)");
    if (ld_made) *ld_made = ld != NULL;
    dt_cu_gemm_args g = dw_gemm(m, dout, inp, dw, N, IC, OC);
    if (bgrad) {
        g.epi = DT_CU_EPI_BGRAD;
        g.dbias = db;
        g.dbias_part = next_part(m);
    }
    /* the weight gradient and the bias column sum, which read only dout: on m->wgs when
     * overlapping, where the (memory-bound) column sum runs beside the main stream's
     * (compute-bound) input-gradient GEMMs; a column sum without the GEMM (dw NULL) on m->s */
    cudaStream_t ws = m->ov && dw ? m->wgs : m->s;
    if (dw) {
        TRY(dt_cu_gemm_fin(m->ov ? m->blas_w : m->blas, &g, ws, m->fin));
        gemm_info(m, h_, bgrad ? "dw, db (bias-gradient epilogue, chunk partials added in order)" : "dw");
    }
    if (summed && h_) dt_trace_kernel_info(h_, "db: the column sums of dy, added by layernorm_bwd (fused)");
    if (db && !bgrad && !summed) {
        rend(m, DT_R_MATMUL_BWD);
        rbegin(m, DT_R_BIAS_BWD);
        dt_cu_colsum(db, next_part(m), dout, N, OC, ws, m->fin);
        rend(m, DT_R_BIAS_BWD);
        rbegin(m, DT_R_MATMUL_BWD);
        if (h_) dt_trace_kernel_info(h_, "db: colsum %s rows=%d cols=%d", variant_name(DT_OP_BIAS_BWD), N, OC);
    }
    if (m->ov && dw) TRY(note_read(m, dout)); /* after both readers */
    if (csum) m->db_summed = csum;
    TRY(inject(m, op, dinp, (size_t)N * IC, 2));
    OP_END((OUT("dx", dinp, BF, N, IC), OUT("dw", dw, F32, OC, dw ? IC : 0), OUT("db", db, F32, 1, db ? OC : 0),
            OUT("colsum_dx", csum, F32, 1, csum ? IC : 0), OUT("ld", ld, F32, ld ? (int64_t)B * NH * T : 0, 2)));
    return DT_OK;
}

#define P(i) (m->param + m->params[i].offset)
#define P16(i) (m->param16 + m->params[i].offset)
#define G(i) (m->grad + m->params[i].offset)
/* ---- traced op calls of the forward and backward -------------------------------------- */

#define BTC ((int64_t)m->B * m->T), m->cfg.channels

static dt_status t_encoder_fwd(dt_gpt_cuda *m, const dt_dropout *hd) {
    int B = m->B, T = m->T, C = m->cfg.channels;
    OP_BEGIN(DT_PHASE_FWD, "encoder_fwd", -1,
             (IN("tokens", m->d_in, DT_DT_I32, B, T), IN("wte", P(DT_P_WTE), F32, m->cfg.padded_vocab, C),
              IN("wpe", P(DT_P_WPE), F32, m->cfg.max_seq_len, C)));
    dt_cu_encoder_fwd(m->encoded, m->d_in, P(DT_P_WTE), P(DT_P_WPE), B, T, C, hd, DT_RNG_DROPOUT_HIDDEN,
                      EMB_SITE, m->s);
    TRY(inject(m, "encoder_fwd", m->encoded, (size_t)B * T * C, 2));
    OP_END(OUT("y", m->encoded, BF, BTC));
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
    TRY(inject(m, op, out, (size_t)BT * C, 2));
    OP_END((OUT("residual", res, BF, BT, res ? C : 0), OUT("y", out, BF, BTC), OUT("mean", mean, F32, BT, 1),
            OUT("rstd", rstd, F32, BT, 1)));
    return DT_OK;
}

/* The attention kernels in use, as named in env.json and the kernel-level trace. */
static const char *attention_name(const dt_gpt_cuda *m) {
    return m->flash_wgmma ? "flash (wgmma)" : m->flash ? "flash" : "gemm";
}

static dt_status t_attention_fwd(dt_gpt_cuda *m, bf16 *atty, bf16 *att, float *lse, const bf16 *qkv,
                                 const dt_dropout *ad, int l) {
    int B = m->B, T = m->T, C = m->cfg.channels, NH = m->cfg.num_heads;
    OP_BEGIN(DT_PHASE_FWD, "attention_fwd", -1, IN("qkv", qkv, BF, (int64_t)B * T, 3 * C));
    if (h_) dt_trace_kernel_info(h_, "%s B=%d T=%d C=%d NH=%d", attention_name(m), B, T, C, NH);
    if (m->flash_wgmma)
        dt_cu_flash_fwd_wgmma(atty, lse, qkv, B, T, C, NH, m->s);
    else if (m->flash)
        dt_cu_flash_fwd(atty, lse, qkv, B, T, C, NH, m->s);
    else
        TRY(dt_cu_attention_fwd(m->blas, atty, att, qkv, m->att_scratch, B, T, C, NH, ad, (uint32_t)l, m->s));
    TRY(inject(m, "attention_fwd", atty, (size_t)B * T * C, 2));
    OP_END((OUT("y", atty, BF, BTC), OUT("lse", lse, F32, lse ? (int64_t)B * NH * T : 0, 1),
            OUT("att", att, BF, att ? (int64_t)B * NH * T : 0, T)));
    return DT_OK;
}

static dt_status t_gelu_fwd(dt_gpt_cuda *m, bf16 *out, const bf16 *inp, size_t n) {
    int64_t BT = (int64_t)m->B * m->T;
    OP_BEGIN(DT_PHASE_FWD, "gelu_fwd", -1, IN("x", inp, BF, BT, (int64_t)n / BT));
    dt_cu_gelu_fwd(out, inp, n, m->s);
    TRY(inject(m, "gelu_fwd", out, n, 2));
    OP_END(OUT("y", out, BF, BT, (int64_t)n / BT));
    return DT_OK;
}

/* Fused softmax cross-entropy (its backward too when loss_scale != 0: the logits buffer
 * then holds dlogits), then the mean-loss reduction into stats[0]. */
static dt_status t_crossentropy(dt_gpt_cuda *m, float loss_scale) {
    int BT = m->B * m->T, V = m->cfg.vocab_size, Vp = m->cfg.padded_vocab;
    {
        OP_BEGIN(DT_PHASE_FWD, "crossentropy", -1,
                 (IN("logits", m->logits, BF, BT, Vp), IN("targets", m->d_tg, DT_DT_I32, m->B, m->T)));
        dt_cu_crossentropy(m->losses, m->logits, m->d_tg, loss_scale / (float)BT, BT, V, Vp, m->s);
        if (loss_scale != 0.0f) TRY(inject(m, "crossentropy", m->logits, (size_t)BT * Vp, 2));
        else TRY(inject(m, "crossentropy", m->losses, (size_t)BT, 4));
        OP_END((OUT("losses", m->losses, F32, BT, 1),
                OUT("dlogits", m->logits, BF, BT, loss_scale != 0.0f ? Vp : 0)));
    }
    OP_BEGIN(DT_PHASE_FWD, "crossentropy_mean", DT_OP_CROSSENTROPY, IN("losses", m->losses, F32, BT, 1));
    dt_cu_reduce(m->stats, NULL, m->red_part, m->losses, (size_t)BT, 0,
                 dt_crossentropy_choose() == DT_REDUCE_DET, m->s);
    TRY(inject(m, "crossentropy_mean", m->stats, 1, 8));
    OP_END(OUT("loss_sum", m->stats, DT_DT_F64, 1, 1));
    return DT_OK;
}

/* The forward's launches, from the batch's upload (h_in, h_tg) to the loss sum. */
static dt_status forward_launches(dt_gpt_cuda *m) {
    const dt_gpt_config *c = &m->cfg;
    int B = m->B, T = m->T, C = c->channels, NH = c->num_heads, L = c->num_layers;
    int Vp = c->padded_vocab, BT = B * T;
    cudaStream_t s = m->s;
    TRY(dt_cu_check(cudaMemcpyAsync(m->d_in, m->h_in, sizeof(int) * BT, cudaMemcpyHostToDevice, s), "upload"));
    TRY(dt_cu_check(cudaMemcpyAsync(m->d_tg, m->h_tg, sizeof(int) * BT, cudaMemcpyHostToDevice, s), "upload"));
    float loss_scale = m->loss_scale;
    size_t sc = (size_t)BT * C, TT = (size_t)T * T;
    dt_dropout hd = hidden_drop(m), ad = attn_drop(m);
    dt_trace_scope_push("embed");
    rbegin(m, DT_R_EMBED_FWD);
    TRY(t_encoder_fwd(m, &hd));
    rend(m, DT_R_EMBED_FWD);
    dt_trace_scope_pop();
    rbegin(m, DT_R_LN_FWD);
    TRY(t_layernorm_fwd(m, m->ln1, m->ln1_mean, m->ln1_rstd, NULL, m->encoded, NULL, P(DT_P_LN1W),
                        P(DT_P_LN1B), NULL, 0));
    rend(m, DT_R_LN_FWD);
    for (int l = 0; l < L; l++) {
        const bf16 *res = l == 0 ? m->encoded : m->res3 + (size_t)(l - 1) * sc;
        bf16 *ln1 = m->ln1 + l * sc, *qkv = m->qkv + l * sc * 3, *atty = m->atty + l * sc;
        bf16 *att = m->att ? m->att + (size_t)l * B * NH * TT : NULL, *attproj = m->attproj + l * sc;
        bf16 *res2 = m->res2 + l * sc, *ln2 = m->ln2 + l * sc, *fch = m->fch + l * sc * 4;
        bf16 *fchg = m->fchg + l * sc * 4, *fcproj = m->fcproj + l * sc, *res3 = m->res3 + l * sc;
        size_t lC = (size_t)l * C;
        dt_trace_op *blk = NULL;
        TRY(block_begin(m, &blk, DT_PHASE_FWD, l, res, DT_DT_BF16));
        rbegin(m, DT_R_MATMUL_FWD);
        TRY(linear_fwd(m, qkv, ln1, P16(DT_P_QKVW) + lC * 3 * C, P16(DT_P_QKVB) + lC * 3, BT, C, 3 * C));
        rend(m, DT_R_MATMUL_FWD);
        rbegin(m, DT_R_ATTN_FWD);
        TRY(t_attention_fwd(m, atty, att, m->flash ? m->att_lse + (size_t)l * B * NH * T : NULL, qkv, &ad, l));
        rend(m, DT_R_ATTN_FWD);
        rbegin(m, DT_R_MATMUL_FWD);
        TRY(linear_fwd(m, attproj, atty, P16(DT_P_ATTPROJW) + lC * C, P16(DT_P_ATTPROJB) + lC, BT, C, C));
        rend(m, DT_R_MATMUL_FWD);
        rbegin(m, DT_R_LN_FWD); /* res2 = res + dropout(attproj), ln2 = LN(res2) */
        TRY(t_layernorm_fwd(m, ln2, m->ln2_mean + (size_t)l * BT, m->ln2_rstd + (size_t)l * BT, res2, res,
                            attproj, P(DT_P_LN2W) + lC, P(DT_P_LN2B) + lC, &hd, 2u * (uint32_t)l));
        rend(m, DT_R_LN_FWD);
        rbegin(m, DT_R_MATMUL_FWD);
        if (m->fuse_gelu) {
            TRY(linear_gelu_fwd(m, fchg, fch, ln2, P16(DT_P_FCW) + lC * 4 * C, P16(DT_P_FCB) + lC * 4, BT, C, 4 * C));
            rend(m, DT_R_MATMUL_FWD);
        } else {
            TRY(linear_fwd(m, fch, ln2, P16(DT_P_FCW) + lC * 4 * C, P16(DT_P_FCB) + lC * 4, BT, C, 4 * C));
            rend(m, DT_R_MATMUL_FWD);
            rbegin(m, DT_R_GELU_FWD);
            TRY(t_gelu_fwd(m, fchg, fch, sc * 4));
            rend(m, DT_R_GELU_FWD);
        }
        rbegin(m, DT_R_MATMUL_FWD);
        TRY(linear_fwd(m, fcproj, fchg, P16(DT_P_FCPROJW) + lC * 4 * C, P16(DT_P_FCPROJB) + lC, BT, 4 * C, C));
        rend(m, DT_R_MATMUL_FWD);
        /* res3 = res2 + dropout(fcproj), normalised by the next layer's ln1 or by lnf */
        int last = l == L - 1;
        rbegin(m, DT_R_LN_FWD);
        TRY(t_layernorm_fwd(m, last ? m->lnf : m->ln1 + (l + 1) * sc,
                            last ? m->lnf_mean : m->ln1_mean + (size_t)(l + 1) * BT,
                            last ? m->lnf_rstd : m->ln1_rstd + (size_t)(l + 1) * BT, res3, res2, fcproj,
                            last ? P(DT_P_LNFW) : P(DT_P_LN1W) + lC + C,
                            last ? P(DT_P_LNFB) : P(DT_P_LN1B) + lC + C, &hd, 2u * (uint32_t)l + 1u));
        rend(m, DT_R_LN_FWD);
        TRY(block_end(m, blk, DT_PHASE_FWD, l, res3, DT_DT_BF16));
    }
    dt_trace_scope_push("head");
    rbegin(m, DT_R_HEAD_FWD);
    TRY(linear_fwd(m, m->logits, m->lnf, P16(DT_P_WTE), NULL, BT, C, Vp));
    rend(m, DT_R_HEAD_FWD);
    rbegin(m, DT_R_CROSSENTROPY);
    TRY(t_crossentropy(m, loss_scale));
    rend(m, DT_R_CROSSENTROPY);
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
    m->nseg = 0; /* the det embedding buckets are built in backward, while the forward runs */
    TRY(run_phase(m, loss_scale != 0.0f ? G_FWD : G_FWD_EVAL, forward_launches));
    return dt_cu_check(cudaEventRecord(m->ev_batch, m->s), "cudaEventRecord");
}

/* Queues the copies of stats[0..3] and zeros into the pinned h_stats / h_zeros, then
 * ev_stats; wait_stats waits for that event only (work queued after it goes on). */
static dt_status queue_stats(dt_gpt_cuda *m) {
    TRY(dt_cu_check(cudaMemcpyAsync(m->h_stats, m->stats, sizeof(double) * 4, cudaMemcpyDeviceToHost, m->s),
                    "stats"));
    TRY(dt_cu_check(cudaMemcpyAsync(m->h_zeros, m->zeros, sizeof(long long), cudaMemcpyDeviceToHost, m->s),
                    "stats"));
    return dt_cu_check(cudaEventRecord(m->ev_stats, m->s), "cudaEventRecord");
}

static dt_status wait_stats(dt_gpt_cuda *m) {
    DT_CU_TRY(cudaGetLastError());
    return dt_cu_check(cudaEventSynchronize(m->ev_stats), "cudaEventSynchronize");
}

static dt_status read_stats(dt_gpt_cuda *m) {
    TRY(queue_stats(m));
    return wait_stats(m);
}

dt_status dt_gpt_cuda_loss(dt_gpt_cuda *m, double *loss) {
    if (!m->loss_read) { /* no step since the forward: read it now */
        TRY(read_stats(m));
        m->loss_sum = m->h_stats[0];
        m->loss_read = 1;
    }
    *loss = m->loss_sum / ((double)m->B * m->T);
    return DT_OK;
}

/* The bf16 gradient entering a dropout site's branch: a masked copy of dres16, or dres16. */
static dt_status through_dropout(dt_gpt_cuda *m, const dt_dropout *hd, uint32_t site, const bf16 **out) {
    *out = m->dres;
    if (!dt_dropout_on(hd)) return DT_OK;
    TRY(claim(m, m->dproj16));
    size_t n = (size_t)m->B * m->T * m->cfg.channels;
    rbegin(m, DT_R_DROPOUT);
    OP_BEGIN(DT_PHASE_BWD, "dropout_bwd", -1, IN("dx", m->dres16, BF, BTC));
    dt_cu_dropout_bf16(m->dproj16, m->dres16, n, hd, DT_RNG_DROPOUT_HIDDEN, site, m->s);
    TRY(inject(m, "dropout_bwd", m->dproj16, n, 2));
    OP_END(OUT("y", m->dproj16, BF, BTC));
    rend(m, DT_R_DROPOUT);
    *out = m->dproj16;
    return DT_OK;
}

/* out = m->dres + LN backward of dy (acc 0: out = it, for the first LayerNorm of the
 * backward), each element bf16(float(m->dres) + its gradient): the residual gradient is kept
 * in bf16 like the residual stream it belongs to, each addition made in fp32 and rounded
 * once; then m->dres = out. out is m->dres16 (in place, m->dres16 all along) unless the
 * backward keeps every residual gradient (m->dwb_res: a slot of dres_all, written out of
 * place, the same bits). dw, db += the parameter grads. next_db (m->ln_colsum; NULL for LN1
 * of layer 0): the bias gradient of the linear whose backward reads out next (attproj after
 * LN2, the previous layer's fcproj after LN1 and lnf), += the column sums of out from the
 * same kernel (DT_OP_BIAS_BWD), an output of this event ("colsum_dx"); that linear_bwd then
 * skips its column sum (m->db_summed). */
static dt_status t_layernorm_bwd(dt_gpt_cuda *m, int acc, float *dw, float *db, const bf16 *x, const float *w,
                                 const float *mean, const float *rstd, float *next_db, bf16 *out) {
    TRY(claim(m, out));
    int BT = m->B * m->T, C = m->cfg.channels;
    const bf16 *in = m->dres;
    OP_BEGIN(DT_PHASE_BWD, "layernorm_bwd", DT_OP_LAYERNORM_BWD,
             (IN("dy", m->dc1, BF, BTC), IN("x", x, BF, BTC), IN("w", w, F32, 1, C), IN("mean", mean, F32, BT, 1),
              IN("rstd", rstd, F32, BT, 1), IN("dx", in, BF, acc ? BT : 0, C), IN("dw", dw, F32, 1, C),
              IN("db", db, F32, 1, C), IN("colsum_dx", next_db, F32, 1, next_db ? C : 0)));
    if (acc && out != in)
        dt_cu_layernorm_bwd_from(out, in, dw, db, next_db, next_part(m), m->dc1, x, w, mean, rstd, BT, C, m->s,
                                 m->fin);
    else if (next_db)
        dt_cu_layernorm_bwd_colsum(out, acc, dw, db, next_db, next_part(m), m->dc1, x, w, mean, rstd, BT, C, m->s,
                                   m->fin);
    else
        dt_cu_layernorm_bwd(out, acc, dw, db, next_part(m), m->dc1, x, w, mean, rstd, BT, C, m->s, m->fin);
    if (next_db && h_)
        dt_trace_kernel_info(h_, "colsum_dx: fused column sums of dx, bias_bwd %s", variant_name(DT_OP_BIAS_BWD));
    m->db_summed = next_db;
    m->dres = out;
    TRY(inject(m, "layernorm_bwd", out, (size_t)BT * C, 2));
    OP_END((OUT("dx", out, BF, BTC), OUT("dw", dw, F32, 1, C), OUT("db", db, F32, 1, C),
            OUT("colsum_dx", next_db, F32, 1, next_db ? C : 0)));
    return DT_OK;
}

/* GELU backward of the (rows, cols) fc activation, fused with the fc bias gradient when db
 * is not NULL (db += column sums of dinp, DT_OP_BIAS_BWD, the same bits as the unfused
 * pair), so dinp is not read back for it. */
static dt_status t_gelu_bwd(dt_gpt_cuda *m, bf16 *dinp, float *db, const bf16 *inp, const bf16 *dout, int rows,
                            int cols) {
    TRY(claim(m, dinp));
    OP_BEGIN(DT_PHASE_BWD, "gelu_bwd", db ? DT_OP_BIAS_BWD : -1,
             (IN("x", inp, BF, rows, cols), IN("dy", dout, BF, rows, cols), IN("db", db, F32, 1, db ? cols : 0)));
    if (db) dt_cu_gelu_bwd_colsum(dinp, db, next_part(m), inp, dout, rows, cols, m->s, m->fin);
    else dt_cu_gelu_bwd(dinp, inp, dout, (size_t)rows * cols, m->s);
    TRY(inject(m, "gelu_bwd", dinp, (size_t)rows * cols, 2));
    OP_END((OUT("dx", dinp, BF, rows, cols), OUT("db", db, F32, 1, db ? cols : 0)));
    return DT_OK;
}

/* Layer l's dqkv and dfch: its own slice of dqkv_all (dfch_all) when this backward batches
 * the qkv (fc) weight gradients (DT_DW_BATCH), else the one buffer every layer reuses. */
static bf16 *dqkv_of(const dt_gpt_cuda *m, int l) {
    return m->dwb_qkv ? m->dqkv_all + (size_t)l * m->B * m->T * 3 * m->cfg.channels : m->dqkv;
}
static bf16 *dfch_of(const dt_gpt_cuda *m, int l) {
    return m->dwb_fc ? m->dfch_all + (size_t)l * m->B * m->T * 4 * m->cfg.channels : m->dfch;
}
/* Where LayerNorm backward ln (DT_CU_RES_LN2 or _LN1) of layer l writes the residual
 * gradient: its slot of dres_all when the backward keeps them (m->dwb_res; model/cuda/plan.h's
 * dt_cu_res_slot_ln, -1: dres16, for the embedding backward), else dres16 in place. */
static bf16 *dres_slot(const dt_gpt_cuda *m, int k) {
    return m->dwb_res && k >= 0 ? m->dres_all + (size_t)k * m->B * m->T * m->cfg.channels : m->dres16;
}
static bf16 *dres_of_ln(const dt_gpt_cuda *m, int l, int ln) { return dres_slot(m, dt_cu_res_slot_ln(l, ln)); }

/* Attention backward of layer l into dqkv_of(m, l). db (flash only, else NULL): the qkv bias
 * gradient, += the column sums of dqkv fused into the flash kernels (finished on m->fin);
 * the qkv linear's backward then gets no db. It is this event's input and output.
 * ld_ready: the attproj input-gradient GEMM just wrote the flash backward's LD (its DOT
 * epilogue; linear_bwd's *ld_made), so no D kernel runs. */
static dt_status t_attention_bwd(dt_gpt_cuda *m, int l, const dt_dropout *ad, float *db, int ld_ready) {
    bf16 *dqkv = dqkv_of(m, l);
    TRY(claim(m, dqkv));
    int B = m->B, T = m->T, C = m->cfg.channels, NH = m->cfg.num_heads, BT = B * T;
    size_t sc = (size_t)BT * C;
    const bf16 *qkv = m->qkv + l * sc * 3, *atty = m->atty + l * sc;
    const float *lse = m->flash ? m->att_lse + (size_t)l * B * NH * T : NULL;
    const bf16 *att = m->flash ? NULL : m->att + (size_t)l * B * NH * T * T;
    OP_BEGIN(DT_PHASE_BWD, "attention_bwd", DT_OP_ATTENTION_BWD,
             (IN("dy", m->dc1, BF, BTC), IN("qkv", qkv, BF, BT, 3 * C), IN("y", atty, BF, BTC),
              IN("lse", lse, F32, lse ? (int64_t)B * NH * T : 0, 1), IN("att", att, BF, att ? (int64_t)B * NH * T : 0, T),
              IN("db", db, F32, 1, db ? 3 * C : 0)));
    if (h_) dt_trace_kernel_info(h_, "%s %s B=%d T=%d C=%d NH=%d%s", attention_name(m),
                                 variant_name(DT_OP_ATTENTION_BWD), B, T, C, NH,
                                 db ? "; db: column sums of dqkv fused, 64-row block partials added in order" : "");
    if (h_ && ld_ready) dt_trace_kernel_info(h_, "LD (lse, D) from matmul_bwd's DOT epilogue: no D kernel");
    if (m->flash_wgmma && ld_ready)
        dt_cu_flash_bwd_wgmma_ld(dqkv, db, db ? next_part(m) : NULL, m->att_scratch, m->dc1, qkv, B, T, C, NH,
                                 m->s, m->fin);
    else if (m->flash_wgmma)
        dt_cu_flash_bwd_wgmma(dqkv, db, db ? next_part(m) : NULL, m->att_scratch, m->dc1, qkv, atty, lse, B, T, C,
                              NH, m->s, m->fin);
    else if (m->flash && ld_ready)
        dt_cu_flash_bwd_ld(dqkv, db, db ? next_part(m) : NULL, m->att_scratch, m->dc1, qkv, B, T, C, NH, m->s,
                           m->fin);
    else if (m->flash)
        dt_cu_flash_bwd(dqkv, db, db ? next_part(m) : NULL, m->att_scratch, m->dc1, qkv, atty, lse, B, T, C, NH,
                        m->s, m->fin);
    else
        TRY(dt_cu_attention_bwd(m->blas, dqkv, m->dc1, qkv, att, m->att_scratch, B, T, C, NH, ad,
                                (uint32_t)l, m->s));
    TRY(inject(m, "attention_bwd", dqkv, sc * 3, 2));
    OP_END((OUT("dqkv", dqkv, BF, BT, 3 * C), OUT("db", db, F32, 1, db ? 3 * C : 0)));
    return DT_OK;
}

static dt_status t_encoder_bwd(dt_gpt_cuda *m, const dt_dropout *hd) {
    int B = m->B, T = m->T, C = m->cfg.channels, Vp = m->cfg.padded_vocab, maxT = m->cfg.max_seq_len;
    /* dwte rows are the order-sensitive buckets: per-row digests name the tokens hit */
    OP_BEGIN(DT_PHASE_BWD, "encoder_bwd", DT_OP_ENCODER_BWD,
             (IN("dout", m->dres16, BF, BTC), IN("tokens", m->d_in, DT_DT_I32, B, T),
              IN_ROWS("dwte", G(DT_P_WTE), F32, Vp, C), IN("dwpe", G(DT_P_WPE), F32, maxT, C)));
    dt_cu_encoder_bwd(G(DT_P_WTE), G(DT_P_WPE), m->dres16, m->d_in, m->d_order, m->d_segtok, m->d_segstart,
                      m->nseg, B, T, C, hd, DT_RNG_DROPOUT_HIDDEN, EMB_SITE, m->s);
    TRY(inject(m, "encoder_bwd", G(DT_P_WTE), (size_t)Vp * C, 4));
    OP_END((OUT_ROWS("dwte", G(DT_P_WTE), F32, Vp, C), OUT("dwpe", G(DT_P_WPE), F32, maxT, C)));
    return DT_OK;
}

/* DT_DW_BATCH: dW_l (OC, IC) = dout_l^T inp_l for every layer l in one strided-batched GEMM
 * (dout_all: the layers' (B T, OC), sdout elements apart; inp_all their (B T, IC) one after
 * another; dw the weights' gradient, (OC, IC) a layer), each layer's linear_bwd's call
 * (dw_gemm) batched: the same operands, alpha, beta; cuBLASLt's pinned plan for the batched
 * shape, no split of K in place; whether its bytes equal the single calls' depends on that
 * plan (bench_dw_batch compares them). On m->wgs when overlapping: the caller forks it
 * after m->s wrote the last layer's dout (layer 0's), once for every kind. */
static dt_status dw_batched(dt_gpt_cuda *m, const bf16 *dout_all, long long sdout, const bf16 *inp_all, float *dw,
                           int IC, int OC) {
    const int BT = m->B * m->T, L = m->cfg.num_layers;
    /* dy: the span the batch reads (with the residual slots every other (B T, C) block
     * belongs to the other kind: read, not used) */
    OP_BEGIN(DT_PHASE_BWD, "matmul_dw_batched", DT_OP_GEMM,
             (IN("dy", dout_all, BF, (int64_t)(L - 1) * (sdout / OC) + BT, OC),
              IN("x", inp_all, BF, (int64_t)L * BT, IC),
              IN("dw", dw, F32, (int64_t)L * OC, IC)));
    dt_cu_gemm_args g = dw_gemm(m, dout_all, inp_all, dw, BT, IC, OC);
    g.batch = L;
    g.sA = sdout;
    g.sB = (long long)BT * IC;
    g.sC = (long long)OC * IC;
    TRY(dt_cu_gemm(m->ov ? m->blas_w : m->blas, &g, m->ov ? m->wgs : m->s));
    gemm_info(m, h_, "dw of every layer (one strided-batched GEMM)"); /* traced: one stream, m->blas */
    OP_END(OUT("dw", dw, F32, (int64_t)L * OC, IC));
    return DT_OK;
}

/* The backward's launches up to the embedding backward (whose launch depends on the
 * batch's buckets), ending with the side streams joined. */
static dt_status backward_launches(dt_gpt_cuda *m) {
    const dt_gpt_config *c = &m->cfg;
    int B = m->B, T = m->T, C = c->channels, L = c->num_layers;
    int Vp = c->padded_vocab, BT = B * T;
    size_t sc = (size_t)BT * C;
    dt_dropout hd = hidden_drop(m), ad = attn_drop(m);
    m->nsite = 0;
    m->site_over = 0;
    m->db_summed = NULL;
#define NEXT_DB(i, l) (m->ln_colsum ? G(i) + (size_t)(l) * C : NULL) /* bias i of layer l */
    dt_trace_scope_push("head");
    rbegin(m, DT_R_HEAD_BWD); /* logits = lnf wte^T; the logits hold dlogits */
    TRY(linear_bwd(m, m->dc1, G(DT_P_WTE), NULL, m->logits, m->lnf, P16(DT_P_WTE), BT, C, Vp, NULL, NULL, -1, NULL));
    rend(m, DT_R_HEAD_BWD);
    rbegin(m, DT_R_LN_BWD);
    m->dres = m->dres16;
    TRY(t_layernorm_bwd(m, 0, G(DT_P_LNFW), G(DT_P_LNFB), m->res3 + (size_t)(L - 1) * sc, P(DT_P_LNFW),
                        m->lnf_mean, m->lnf_rstd, NEXT_DB(DT_P_FCPROJB, L - 1), dres_of_ln(m, L, DT_CU_RES_LN1)));
    rend(m, DT_R_LN_BWD);
    dt_trace_scope_pop();
    for (int l = L - 1; l >= 0; l--) {
        const bf16 *res = l == 0 ? m->encoded : m->res3 + (size_t)(l - 1) * sc;
        size_t lC = (size_t)l * C;
        dt_trace_op *blk = NULL;
        TRY(block_begin(m, &blk, DT_PHASE_BWD, l, m->dres, DT_DT_BF16));
        const bf16 *dproj = NULL;
        TRY(through_dropout(m, &hd, 2u * (uint32_t)l + 1u, &dproj));
        const bf16 *fch = m->fch + l * sc * 4;
        rbegin(m, DT_R_MATMUL_BWD);
        if (m->fuse_gelu) { /* dfch straight from the GEMM; the fc bias gradient from its epilogue
                             * (our kernel) or with the fc weights' */
            float *fcb = m->fuse_bgrad ? NULL : G(DT_P_FCB) + lC * 4;
            TRY(linear_bwd(m, dfch_of(m, l), m->dwb_res ? NULL : G(DT_P_FCPROJW) + lC * 4 * C, G(DT_P_FCPROJB) + lC,
                           dproj, m->fchg + l * sc * 4, P16(DT_P_FCPROJW) + lC * 4 * C, BT, 4 * C, C, fch, fcb, -1,
                           NULL));
            TRY(linear_bwd(m, m->dc1, m->dwb_fc ? NULL : G(DT_P_FCW) + lC * 4 * C, G(DT_P_FCB) + lC * 4, dfch_of(m, l),
                           m->ln2 + l * sc, P16(DT_P_FCW) + lC * 4 * C, BT, C, 4 * C, NULL, NULL, -1, NULL));
            rend(m, DT_R_MATMUL_BWD);
        } else {
            TRY(linear_bwd(m, m->dfchg, m->dwb_res ? NULL : G(DT_P_FCPROJW) + lC * 4 * C, G(DT_P_FCPROJB) + lC, dproj,
                           m->fchg + l * sc * 4, P16(DT_P_FCPROJW) + lC * 4 * C, BT, 4 * C, C, NULL, NULL, -1, NULL));
            rend(m, DT_R_MATMUL_BWD);
            rbegin(m, DT_R_GELU_BWD);
            /* the fc bias gradient: from the fc weight-gradient GEMM, or fused into the GELU backward */
            float *fcb = G(DT_P_FCB) + lC * 4;
            TRY(t_gelu_bwd(m, dfch_of(m, l), m->fuse_bgrad ? NULL : fcb, fch, m->dfchg, BT, 4 * C));
            rend(m, DT_R_GELU_BWD);
            rbegin(m, DT_R_MATMUL_BWD);
            TRY(linear_bwd(m, m->dc1, m->dwb_fc ? NULL : G(DT_P_FCW) + lC * 4 * C, m->fuse_bgrad ? fcb : NULL,
                           dfch_of(m, l), m->ln2 + l * sc, P16(DT_P_FCW) + lC * 4 * C, BT, C, 4 * C, NULL, NULL, -1,
                           NULL));
            rend(m, DT_R_MATMUL_BWD);
        }
        rbegin(m, DT_R_LN_BWD);
        TRY(t_layernorm_bwd(m, 1, G(DT_P_LN2W) + lC, G(DT_P_LN2B) + lC, m->res2 + l * sc, P(DT_P_LN2W) + lC,
                            m->ln2_mean + (size_t)l * BT, m->ln2_rstd + (size_t)l * BT, NEXT_DB(DT_P_ATTPROJB, l),
                            dres_of_ln(m, l, DT_CU_RES_LN2)));
        rend(m, DT_R_LN_BWD);
        TRY(through_dropout(m, &hd, 2u * (uint32_t)l, &dproj));
        rbegin(m, DT_R_MATMUL_BWD);
        int ld_made = 0; /* LD from the attproj GEMM's DOT epilogue, for the attention backward */
        TRY(linear_bwd(m, m->dc1, m->dwb_res ? NULL : G(DT_P_ATTPROJW) + lC * C, G(DT_P_ATTPROJB) + lC, dproj,
                       m->atty + l * sc, P16(DT_P_ATTPROJW) + lC * C, BT, C, C, NULL, NULL, l, &ld_made));
        rend(m, DT_R_MATMUL_BWD);
        /* the qkv bias gradient: fused into the flash backward (it sums the dqkv it stores;
         * no colsum or GEMM epilogue re-reads dqkv), else the qkv linear's */
        float *qkvb = G(DT_P_QKVB) + lC * 3;
        rbegin(m, DT_R_ATTN_BWD);
        TRY(t_attention_bwd(m, l, &ad, m->flash ? qkvb : NULL, ld_made));
        rend(m, DT_R_ATTN_BWD);
        rbegin(m, DT_R_MATMUL_BWD);
        TRY(linear_bwd(m, m->dc1, m->dwb_qkv ? NULL : G(DT_P_QKVW) + lC * 3 * C, m->flash ? NULL : qkvb, dqkv_of(m, l),
                       m->ln1 + l * sc, P16(DT_P_QKVW) + lC * 3 * C, BT, C, 3 * C, NULL, NULL, -1, NULL));
        rend(m, DT_R_MATMUL_BWD);
        rbegin(m, DT_R_LN_BWD);
        TRY(t_layernorm_bwd(m, 1, G(DT_P_LN1W) + lC, G(DT_P_LN1B) + lC, res, P(DT_P_LN1W) + lC,
                            m->ln1_mean + (size_t)l * BT, m->ln1_rstd + (size_t)l * BT,
                            l > 0 ? NEXT_DB(DT_P_FCPROJB, l - 1) : NULL, dres_of_ln(m, l, DT_CU_RES_LN1)));
        rend(m, DT_R_LN_BWD);
        TRY(block_end(m, blk, DT_PHASE_BWD, l, m->dres, DT_DT_BF16));
    }
#undef NEXT_DB
    /* every layer's weight gradients of a batched kind: one strided-batched GEMM a kind
     * (DT_DW_BATCH) */
    if (m->dwb_qkv || m->dwb_fc || m->dwb_res) {
        const long long s1 = (long long)BT * C;
        rbegin(m, DT_R_MATMUL_BWD);
        TRY(wgs_after_main(m)); /* every layer's douts are made: the batched GEMMs follow on m->wgs */
        if (m->dwb_qkv) TRY(dw_batched(m, m->dqkv_all, 3 * s1, m->ln1, G(DT_P_QKVW), C, 3 * C));
        if (m->dwb_fc) TRY(dw_batched(m, m->dfch_all, 4 * s1, m->ln2, G(DT_P_FCW), C, 4 * C));
        if (m->dwb_res) { /* a kind's slots: its first, DT_CU_RES_STRIDE apart */
            TRY(dw_batched(m, dres_slot(m, dt_cu_res_slot(0, DT_CU_RES_FCPROJ)), DT_CU_RES_STRIDE * s1, m->fchg,
                           G(DT_P_FCPROJW), 4 * C, C));
            TRY(dw_batched(m, dres_slot(m, dt_cu_res_slot(0, DT_CU_RES_ATTPROJ)), DT_CU_RES_STRIDE * s1, m->atty,
                           G(DT_P_ATTPROJW), C, C));
        }
        rend(m, DT_R_MATMUL_BWD);
    }
    /* the encoder backward adds into wte's gradient, which the head's weight-gradient GEMM
     * (tied weights) wrote on m->wgs; a graph's capture ends with every stream joined */
    TRY(join_wgs(m));
    TRY(join_fin(m));
    return dt_cu_check(cudaGetLastError(), "backward launch");
}

dt_status dt_gpt_cuda_backward(dt_gpt_cuda *m) {
    if (m->loss_scale == 0.0f)
        return dt_fail(DT_ESTATE, "dt_gpt_cuda_backward: the last forward had loss_scale 0 (eval)");
    int BT = m->B * m->T, Vp = m->cfg.padded_vocab;
    cudaStream_t s = m->s;
    dt_dropout hd = hidden_drop(m);
    /* weight gradients on m->wgs, except in profiled steps (the leaderboard times each range
     * alone on m->s) and when tracing digests gradients per module or op */
    m->ov = m->overlap && !m->prof && !dt_trace_on(DT_TRACE_MODULE);
    m->dwb_qkv = m->dw_batch && m->dqkv_all; /* traced or not: tracing never changes the launches' math */
    m->dwb_fc = m->dw_batch == 2 && m->dfch_all;
    /* with hidden dropout the linears read a masked copy of dres16 (through_dropout); with
     * BGRAD the weight-gradient GEMMs make every bias gradient */
    m->ln_colsum = !dt_dropout_on(&hd) && !m->fuse_bgrad;
    /* fcproj's and attproj's dout is then the residual gradient itself, and their bias
     * gradients the LayerNorm backward's column sums */
    m->dwb_res = m->dw_batch == 2 && m->dres_all && m->ln_colsum;
    int det_buckets = dt_encoder_choose() == DT_ENCODER_DET;
    if (det_buckets) {
        /* on the host while the device runs the forward, then copied on m->up while it runs
         * the backward (after the forward: the previous embedding backward read the device
         * buffers before it) */
        m->nseg = dt_cu_encoder_buckets(m->h_in, BT, Vp, m->h_count, m->h_order, m->h_segtok, m->h_segstart);
        if (m->nseg <= 0) return dt_fail(DT_EINVAL, "encoder backward: token outside [0, %d)", Vp);
        cudaStream_t u = m->up;
        TRY(dt_cu_check(cudaEventRecord(m->ev_fwd, s), "cudaEventRecord"));
        TRY(dt_cu_check(cudaStreamWaitEvent(u, m->ev_fwd, 0), "cudaStreamWaitEvent"));
        TRY(dt_cu_check(cudaMemcpyAsync(m->d_order, m->h_order, sizeof(int) * BT, cudaMemcpyHostToDevice, u), "upload"));
        TRY(dt_cu_check(cudaMemcpyAsync(m->d_segtok, m->h_segtok, sizeof(int) * m->nseg, cudaMemcpyHostToDevice, u), "upload"));
        TRY(dt_cu_check(cudaMemcpyAsync(m->d_segstart, m->h_segstart, sizeof(int) * (m->nseg + 1),
                                        cudaMemcpyHostToDevice, u), "upload"));
        TRY(dt_cu_check(cudaEventRecord(m->ev_buckets, u), "cudaEventRecord"));
    }
    TRY(run_phase(m, m->grad_fresh ? G_BWD_FRESH : G_BWD_ADD, backward_launches));
    if (det_buckets) TRY(dt_cu_check(cudaStreamWaitEvent(s, m->ev_buckets, 0), "cudaStreamWaitEvent"));
    dt_trace_scope_push("embed");
    rbegin(m, DT_R_EMBED_BWD);
    TRY(t_encoder_bwd(m, &hd));
    rend(m, DT_R_EMBED_BWD);
    dt_trace_scope_pop();
    if (m->site_over)
        return dt_fail(DT_ESTATE, "dt_gpt_cuda_backward: more det reduction sites than the %d "
                       "partial regions made at create (raise maxsite in dt_gpt_cuda_create)", m->maxsite);
    if (m->db_summed) /* a fused bias gradient no linear_bwd claimed: the wiring above is wrong */
        return dt_fail(DT_ESTATE, "dt_gpt_cuda_backward: a LayerNorm backward summed a bias gradient "
                       "that no linear backward used");
    m->grad_fresh = 0; /* a further backward (gradient accumulation) adds */
    /* join: the det partial finishes on m->fin complete before anything reads gradients or
     * reuses their partial regions */
    TRY(join_fin(m));
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
    (void)run_phase(m, G_ZERO, zero_launches);
    m->grad_fresh = 1;
}

__global__ void sqrt_kernel(double *x) { x[3] = sqrt(x[1]); }

/* The whole gradient and parameter slabs as trace inputs (semantic and metrics events). */
static void state_tensors(dt_gpt_cuda *m, dt_gtrace_set *s, int opt) {
    int64_t n = (int64_t)m->num_params;
    dt_gtrace_add(s, "params", m->param, DT_DT_F32, 1, n);
    dt_gtrace_add(s, "grads", m->grad, DT_DT_F32, 1, n);
    if (opt) {
        dt_gtrace_add(s, "adam_m", m->adam_m, DT_DT_F32, 1, n);
        dt_gtrace_add(s, "adam_v", m->adam_v, DT_DT_F32, 1, n);
    }
}

dt_status dt_gpt_cuda_step(dt_gpt_cuda *m, const dt_adamw_config *c, float lr, int64_t t,
                           dt_grad_stats *stats) {
    int det = dt_reduce_choose(DT_OP_NORM) == DT_REDUCE_DET;
    dt_trace_op *h = NULL;
    if (dt_trace_on(DT_TRACE_SEMANTIC)) {
        dt_gtrace_set in;
        gset_init(&in);
        state_tensors(m, &in, 0);
        TRY(dt_gtrace_begin(&h, DT_TRACE_SEMANTIC, DT_PHASE_OPT, "grad_stats", variant_name(DT_OP_NORM), &in, m->s));
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
    rbegin(m, DT_R_NORM);
    dt_cu_reduce(m->stats + 1, m->zeros, m->red_part, m->grad, m->num_params, 1, det, m->s);
    sqrt_kernel<<<1, 1, 0, m->s>>>(m->stats);
    if (!m->pn_valid) dt_cu_adamw_pnorm(m->param, &a, m->s);
    dt_cu_sum_parts(m->stats + 2, m->pn_part, m->nchunks, m->s);
    rend(m, DT_R_NORM);
    TRY(queue_stats(m)); /* before the update: the host waits for the statistics only */
    const double *hs = m->h_stats;
    if (h) { /* the statistics are the event's outputs */
        TRY(wait_stats(m));
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
        gset_init(&in);
        state_tensors(m, &in, 1);
        TRY(dt_gtrace_begin(&h, DT_TRACE_SEMANTIC, DT_PHASE_OPT, "adamw", NULL, &in, m->s));
    }
    rbegin(m, DT_R_ADAMW);
    dt_cu_adamw(m->param, m->param16, m->grad, m->adam_m, m->adam_v, &a, m->s);
    m->pn_valid = 1;
    rend(m, DT_R_ADAMW);
    int fired = dt_inject_fired();
    TRY(inject(m, "adamw", m->param, m->num_params, 4));
    if (dt_inject_fired() != fired) m->pn_valid = 0; /* a parameter changed after the update summed it */
    if (h) {
        dt_gtrace_set out;
        gset_init(&out);
        int64_t n = (int64_t)m->num_params;
        dt_gtrace_add(&out, "params", m->param, DT_DT_F32, 1, n);
        dt_gtrace_add(&out, "adam_m", m->adam_m, DT_DT_F32, 1, n);
        dt_gtrace_add(&out, "adam_v", m->adam_v, DT_DT_F32, 1, n);
        TRY(dt_gtrace_end(h, &out, m->s));
    }
    /* the statistics, while the update runs: the caller's next launches queue behind it */
    TRY(wait_stats(m));
    m->loss_sum = hs[0]; /* stats[0] is the forward's loss sum: dt_gpt_cuda_loss need not wait again */
    m->loss_read = 1;
    stats->grad_norm = sqrt(hs[1]);
    stats->param_norm = sqrt(hs[2]);
    stats->num_zeros = *m->h_zeros;
    return DT_OK;
}

dt_status dt_gpt_cuda_trace_metrics(dt_gpt_cuda *m, const dt_tensor_ref *values, int n) {
    if (!dt_trace_on(DT_TRACE_METRICS)) return DT_OK;
    dt_gtrace_set in;
    gset_init(&in);
    state_tensors(m, &in, 0);
    TRY(dt_gtrace_digest(&in, m->s));
    dt_trace_event(DT_TRACE_METRICS, DT_PHASE_OTHER, "step_metrics", NULL, in.r, in.n, values, n);
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

const char *dt_gpt_cuda_describe(dt_gpt_cuda *m) {
    cudaDeviceProp p;
    int dev = 0, drv = 0, rt = 0;
    cudaGetDevice(&dev);
    memset(&p, 0, sizeof p);
    cudaGetDeviceProperties(&p, dev);
    cudaDriverGetVersion(&drv);
    cudaRuntimeGetVersion(&rt);
    char algos[16000], algos_w[8000] = "[]", table[256];
    dt_cu_blas_describe(m->blas, algos, sizeof algos);
    if (m->blas_w) dt_cu_blas_describe(m->blas_w, algos_w, sizeof algos_w);
    dt_cu_blas_table_describe(m->blas, table, sizeof table);
    snprintf(m->desc, sizeof m->desc,
             "{\"device\":\"cuda\",\"attention\":\"%s\",\"gemm_epilogues\":{\"gelu\":%s,\"bias_grad\":%s,"
             "\"asked\":\"%s\"},\"gemm_k_chunks\":\"%s\",\"layernorm_bias_colsum\":\"%s\",\"gpu\":\"%s\","
             "\"sm\":\"%d.%d\",\"sms\":%d,\"driver\":%d,"
             "\"runtime\":%d,\"cublaslt\":%zu,\"nvcc_flags\":\"%s\",\"gemm_workspace\":%u,"
             "\"gemm_table\":%s,\"gemm_algos\":%s,\"bwd_overlap\":\"%s\",\"gemm_algos_weight_stream\":%s,"
             "\"cuda_graphs\":\"%s\",\"gemm_own\":\"%s\",\"fc_bias_grad\":\"%s\",\"attention_d\":\"%s\","
             "\"dw_batch\":\"%s\"}",
             attention_name(m), m->fuse_gelu ? "true" : "false", m->fuse_bgrad ? "true" : "false",
             m->fusion_note, m->ksplit_off ? "off (DT_GEMM_SPLITK=off)" : "dt_cu_gemm_splits",
             m->fuse_bgrad ? "off (bias gradients from the GEMM epilogue)"
             : m->hidden_dropout > 0.0f ? "off while training (hidden dropout)" : "attproj, fcproj", p.name, p.major,
             p.minor, p.multiProcessorCount, drv, rt, cublasLtGetVersion(), DT_NVCC_FLAGS, DT_CU_GEMM_WORKSPACE,
             table, algos, m->overlap ? "weight gradients on a second stream (DT_BWD_OVERLAP=on)" : "off", algos_w,
             m->graphs ? "on: zero_grad, forward and backward replayed from CUDA graphs (DT_CUDA_GRAPH=on)" : "off",
             m->gemm_own == OWN_GELU && m->fuse_gelu
                 ? "gelu: fc forward and fcproj input gradient on gemm_wgmma_cuda.cu where their shapes fit its tiles, "
                   "else cuBLASLt (DT_GEMM_OWN=gelu)"
             : m->gemm_own == OWN_DGELU && m->fuse_gelu
                 ? "dgelu: fcproj input gradient on gemm_wgmma_cuda.cu where its shape fits, else cuBLASLt "
                   "(DT_GEMM_OWN=dgelu)"
             : m->gemm_own == OWN_ON
                 ? (m->gemm_own_bwd ? "on: forward linears and input gradients on gemm_wgmma_cuda.cu where their "
                                      "shapes fit, else cuBLASLt (DT_GEMM_OWN=on, DT_GEMM_OWN_BWD=on)"
                                    : "on: forward linears with a bias on gemm_wgmma_cuda.cu where their shapes "
                                      "fit, else cuBLASLt (DT_GEMM_OWN=on)")
                 : "off",
             m->fuse_bgrad ? "the fc weight-gradient GEMM's epilogue"
             : !m->fuse_gelu ? "the GELU backward's column sums"
             : m->csum_sites > 0 && own_dgelu(m)
                 ? "the fcproj dGELU GEMM's epilogue (gemm_wgmma_cuda.cu) where its shape fits, else a column sum "
                   "of dfch"
                 : "a column sum of dfch",
             m->gemm_dot ? "the attproj input-gradient GEMM's DOT epilogue (gemm_wgmma_cuda.cu) where its shape fits, "
                           "else the D kernel (DT_GEMM_DOT=on)"
             : m->flash ? "the D kernel"
                        : "none (GEMM attention)",
             !m->dw_batch ? "off (DT_DW_BATCH=off: one weight-gradient GEMM a layer)"
             : m->dqkv_all && m->dfch_all && m->dres_all
                 ? "qkv, fc, fcproj, attproj: every layer's weight gradients in one batched GEMM a kind after the "
                   "layers (DT_DW_BATCH=on, the default; fcproj and attproj where the bias gradients come from the "
                   "LayerNorm backward's column sums)"
             : m->dqkv_all && m->dfch_all ? "qkv, fc: every layer's qkv and fc weight gradients in one batched GEMM "
                                            "a kind after the layers (DT_DW_BATCH=on, the default; fcproj and "
                                            "attproj not with hidden dropout)"
             : m->dqkv_all ? "qkv: every layer's qkv weight gradient in one batched GEMM after the layers"
             : m->dfch_all ? "fc: every layer's fc weight gradient in one batched GEMM after the layers (qkv's "
                             "needs flash attention)"
                           : "off: DT_DW_BATCH needs flash attention (qkv) or the fc bias gradient from a column "
                             "sum (fc)");
    return m->desc;
}
