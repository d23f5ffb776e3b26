/* GPT model on one CUDA GPU (see gpt_cuda.h): buffers, forward, backward, the optimizer
 * step and the named-range timing. The layer sequence mirrors gpt.c line by line. */
#include "ops/ops_cuda.h"

#include "model/gpt_cuda.h"
extern "C" {
#include "core/determinism.h"
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

struct dt_gpt_cuda {
    dt_gpt_config cfg;
    dt_param_desc params[DT_NUM_PARAM_TENSORS];
    size_t num_params;
    int B, T;
    float hidden_dropout, attn_dropout;
    uint64_t seed;
    uint32_t rng_step;
    int training;
    int flash;          /* attention through attention_flash_cuda.cu */
    cudaStream_t s, fin;  /* main stream; det partial finishes (joined at the end of backward) */
    cudaEvent_t join;
    dt_cu_blas *blas;
    /* parameters, gradients, optimizer state */
    float *param, *grad, *adam_m, *adam_v;
    bf16 *param16;
    dt_cu_chunk *chunks;
    int nchunks;
    float *decay;
    int decay_set;
    float decay_value;
    /* activations (bf16 unless noted) */
    bf16 *encoded, *ln1, *qkv, *atty, *att, *attproj, *res2, *ln2, *fch, *fchg, *fcproj, *res3, *lnf,
        *logits;
    float *ln1_mean, *ln1_rstd, *ln2_mean, *ln2_rstd, *lnf_mean, *lnf_rstd, *losses;
    float *att_lse, *att_D, *att_dq; /* flash: (L,B,NH,T) lse; backward scratch */
    /* backward scratch */
    float *dres, *part;
    size_t part_site;  /* floats per partial site; sites used so far in this backward */
    int nsite, maxsite;
    bf16 *dres16, *dproj16, *dc1, *dqkv, *dfch, *dfchg, *att_scratch;
    double *red_part, *stats; /* stats: [0] loss sum, [1] grad sumsq, [2] param sumsq, [3] grad norm */
    long long *zeros;
    /* batch */
    int *d_in, *d_tg, *d_order, *d_segtok, *d_segstart, nseg;
    int *h_in, *h_tg, *h_count, *h_order, *h_segtok, *h_segstart;
    float loss_scale;
    size_t bytes;
    char desc[16384];
    /* range timing */
    int prof, nev;
    cudaEvent_t ev[MAX_EVENTS];
    int ev_range[MAX_EVENTS];
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
    dt_status st = dt_cu_check(cudaStreamCreateWithFlags(&m->s, cudaStreamNonBlocking), "cudaStreamCreate");
    if (st == DT_OK) st = dt_cu_check(cudaStreamCreateWithFlags(&m->fin, cudaStreamNonBlocking), "cudaStreamCreate");
    if (st == DT_OK) st = dt_cu_check(cudaEventCreateWithFlags(&m->join, cudaEventDisableTiming), "cudaEventCreate");
    if (st != DT_OK) { free(m); return dt_fail_context(st, "--device cuda: no usable GPU"); }
    if ((st = dt_cu_blas_create(&m->blas)) != DT_OK) { dt_gpt_cuda_free(m); return st; }
    size_t n = m->num_params, BT = (size_t)B * T, sc = BT * C, Vp = (size_t)c->padded_vocab;
    size_t att = (size_t)L * B * NH * T * T;
    /* Flash attention by default where the shape allows (2.3x faster than the GEMM
     * formulation on GPT-2 124M: bench/RESULTS.md); DT_ATTENTION=gemm forces the GEMM
     * formulation (the only one with attention dropout or head sizes other than 64). The
     * choice is recorded in env.json. */
    dt_dropout ad = {host->attn_dropout, 0, 0};
    const char *force = getenv("DT_ATTENTION");
    m->flash = dt_cu_flash_supported(C, NH, T, &ad) && !(force && !strcmp(force, "gemm"));
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
        DMALLOC(m->att_D, (size_t)B * NH * T, "scratch");
        DMALLOC(m->att_dq, sc, "scratch");
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
    DMALLOC(m->dres, sc, "scratch");
    {   /* one partial region per det reduction site of a backward (6 per layer + lnf), so
         * each site's finish can run on m->fin while the main stream goes on */
        size_t pc = (size_t)dt_cu_colsum_parts((int)BT) * 4 * C, pl = (size_t)dt_cu_ln_parts((int)BT) * 2 * C;
        m->part_site = pc > pl ? pc : pl;
        m->maxsite = 6 * L + 1;
        DMALLOC(m->part, m->part_site * (size_t)m->maxsite, "scratch");
    }
    DMALLOC(m->dres16, sc, "scratch");
    DMALLOC(m->dproj16, sc, "scratch");
    DMALLOC(m->dc1, sc, "scratch");
    DMALLOC(m->dqkv, 3 * sc, "scratch");
    DMALLOC(m->dfch, 4 * sc, "scratch");
    DMALLOC(m->dfchg, 4 * sc, "scratch");
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
    dt_cu_chunk *hch = (dt_cu_chunk *)malloc(sizeof *hch * nch);
    /* pinned, so the uploads are asynchronous (the buckets are built while the GPU runs) */
    m->h_count = (int *)malloc(sizeof(int) * Vp);
    if (cudaMallocHost((void **)&m->h_in, sizeof(int) * BT) != cudaSuccess) m->h_in = NULL;
    if (cudaMallocHost((void **)&m->h_tg, sizeof(int) * BT) != cudaSuccess) m->h_tg = NULL;
    if (cudaMallocHost((void **)&m->h_order, sizeof(int) * BT) != cudaSuccess) m->h_order = NULL;
    if (cudaMallocHost((void **)&m->h_segtok, sizeof(int) * BT) != cudaSuccess) m->h_segtok = NULL;
    if (cudaMallocHost((void **)&m->h_segstart, sizeof(int) * (BT + 1)) != cudaSuccess) m->h_segstart = NULL;
    if (!hch || !m->h_in || !m->h_tg || !m->h_count || !m->h_order || !m->h_segtok || !m->h_segstart) {
        free(hch);
        dt_gpt_cuda_free(m);
        return dt_fail(DT_ENOMEM, "out of host memory for the GPU model's batch buffers");
    }
    dt_cu_adamw_chunks(offs, nums, DT_NUM_PARAM_TENSORS, DT_CU_ADAMW_CHUNK, hch, nch);
    m->nchunks = (int)nch;
    DMALLOC(m->chunks, nch, "AdamW table");
    DMALLOC(m->decay, DT_NUM_PARAM_TENSORS, "AdamW table");
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
                    m->lnf_mean, m->lnf_rstd, m->losses, m->dres, m->part, m->dres16, m->dproj16,
                    m->dc1, m->dqkv, m->dfch, m->dfchg, m->att_scratch, m->red_part, m->stats,
                    m->zeros, m->d_in, m->d_tg, m->d_order, m->d_segtok, m->d_segstart, m->chunks,
                    m->decay, m->att_lse, m->att_D, m->att_dq};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) cudaFree(bufs[i]);
    for (int i = 0; i < MAX_EVENTS; i++)
        if (m->ev[i]) cudaEventDestroy(m->ev[i]);
    dt_cu_blas_free(m->blas);
    if (m->s) cudaStreamDestroy(m->s);
    if (m->fin) cudaStreamDestroy(m->fin);
    if (m->join) cudaEventDestroy(m->join);
    cudaFreeHost(m->h_in); cudaFreeHost(m->h_tg); cudaFreeHost(m->h_order); cudaFreeHost(m->h_segtok);
    cudaFreeHost(m->h_segstart);
    free(m->h_count);
    free(m);
}

void dt_gpt_cuda_set_mode(dt_gpt_cuda *m, int training, uint32_t rng_step) {
    m->training = training;
    m->rng_step = rng_step;
}

dt_status dt_gpt_cuda_sync(dt_gpt_cuda *m) {
    DT_CU_TRY(cudaGetLastError());
    DT_CU_TRY(cudaStreamSynchronize(m->s));
    return DT_OK;
}

size_t dt_gpt_cuda_bytes(const dt_gpt_cuda *m) { return m->bytes; }

/* The partial region of the next det reduction site of this backward. */
static float *next_part(dt_gpt_cuda *m) {
    int k = m->nsite < m->maxsite ? m->nsite++ : m->maxsite - 1;
    return m->part + (size_t)k * m->part_site;
}

static dt_dropout hidden_drop(const dt_gpt_cuda *m) {
    dt_dropout d = {m->training ? m->hidden_dropout : 0.0f, m->seed, m->rng_step};
    return d;
}
static dt_dropout attn_drop(const dt_gpt_cuda *m) {
    dt_dropout d = {m->training ? m->attn_dropout : 0.0f, m->seed, m->rng_step};
    return d;
}

/* Linear layer forward: out (N,OC) = inp (N,IC) W^T + b, W (OC,IC) bf16. */
static dt_status linear_fwd(dt_gpt_cuda *m, bf16 *out, const bf16 *inp, const bf16 *w, const bf16 *b,
                            int N, int IC, int OC) {
    dt_cu_gemm_args a = {0, 1, N, OC, IC, inp, IC, 0, w, IC, 0, out, OC, 0, 0, 1.0f, 0.0f, 1, b};
    return dt_cu_gemm(m->blas, &a, m->s);
}

/* Linear layer backward: dinp (bf16) = dout W; dW (fp32) += dout^T inp; db += colsum(dout). */
static dt_status linear_bwd(dt_gpt_cuda *m, bf16 *dinp, float *dw, float *db, const bf16 *dout,
                            const bf16 *inp, const bf16 *w, int N, int IC, int OC) {
    dt_cu_gemm_args a = {0, 0, N, IC, OC, dout, OC, 0, w, IC, 0, dinp, IC, 0, 0, 1.0f, 0.0f, 1, NULL};
    dt_status st = dt_cu_gemm(m->blas, &a, m->s);
    if (st != DT_OK) return st;
    dt_cu_gemm_args g = {1, 0, OC, IC, N, dout, OC, 0, inp, IC, 0, dw, IC, 0, 1, 1.0f, 1.0f, 1, NULL};
    if ((st = dt_cu_gemm(m->blas, &g, m->s)) != DT_OK) return st;
    if (db) {
        rend(m, DT_R_MATMUL_BWD);
        rbegin(m, DT_R_BIAS_BWD);
        dt_cu_colsum(db, next_part(m), dout, N, OC, m->s, m->fin);
        rend(m, DT_R_BIAS_BWD);
        rbegin(m, DT_R_MATMUL_BWD);
    }
    return DT_OK;
}

#define P(i) (m->param + m->params[i].offset)
#define P16(i) (m->param16 + m->params[i].offset)
#define G(i) (m->grad + m->params[i].offset)
#define TRY(x) do { dt_status st_ = (x); if (st_ != DT_OK) return st_; } while (0)

dt_status dt_gpt_cuda_forward(dt_gpt_cuda *m, const int *inputs, const int *targets, float loss_scale) {
    const dt_gpt_config *c = &m->cfg;
    int B = m->B, T = m->T, C = c->channels, NH = c->num_heads, L = c->num_layers;
    int V = c->vocab_size, Vp = c->padded_vocab, BT = B * T;
    for (int i = 0; i < BT; i++)
        if (inputs[i] < 0 || inputs[i] >= V || targets[i] < 0 || targets[i] >= V)
            return dt_fail(DT_EINVAL, "token at batch position %d (input %d, target %d) is "
                           "outside the vocabulary [0, %d): check --vocab-size against the data",
                           i, inputs[i], targets[i], V);
    cudaStream_t s = m->s;
    /* the previous step may still read the batch buffers */
    TRY(dt_cu_check(cudaStreamSynchronize(s), "cudaStreamSynchronize"));
    memcpy(m->h_in, inputs, sizeof(int) * BT);
    memcpy(m->h_tg, targets, sizeof(int) * BT);
    TRY(dt_cu_check(cudaMemcpyAsync(m->d_in, m->h_in, sizeof(int) * BT, cudaMemcpyHostToDevice, s), "upload"));
    TRY(dt_cu_check(cudaMemcpyAsync(m->d_tg, m->h_tg, sizeof(int) * BT, cudaMemcpyHostToDevice, s), "upload"));
    m->loss_scale = loss_scale;
    m->nseg = 0; /* the det embedding buckets are built in backward, while the forward runs */
    size_t sc = (size_t)BT * C, TT = (size_t)T * T;
    dt_dropout hd = hidden_drop(m), ad = attn_drop(m);
    rbegin(m, DT_R_EMBED_FWD);
    dt_cu_encoder_fwd(m->encoded, m->d_in, P(DT_P_WTE), P(DT_P_WPE), B, T, C, &hd, DT_RNG_DROPOUT_HIDDEN,
                      EMB_SITE, s);
    rend(m, DT_R_EMBED_FWD);
    rbegin(m, DT_R_LN_FWD);
    dt_cu_layernorm_fwd(m->ln1, m->ln1_mean, m->ln1_rstd, NULL, m->encoded, NULL, P(DT_P_LN1W),
                        P(DT_P_LN1B), BT, C, NULL, 0, 0, s);
    rend(m, DT_R_LN_FWD);
    for (int l = 0; l < L; l++) {
        const bf16 *res = l == 0 ? m->encoded : m->res3 + (size_t)(l - 1) * sc;
        bf16 *ln1 = m->ln1 + l * sc, *qkv = m->qkv + l * sc * 3, *atty = m->atty + l * sc;
        bf16 *att = m->att ? m->att + (size_t)l * B * NH * TT : NULL, *attproj = m->attproj + l * sc;
        bf16 *res2 = m->res2 + l * sc, *ln2 = m->ln2 + l * sc, *fch = m->fch + l * sc * 4;
        bf16 *fchg = m->fchg + l * sc * 4, *fcproj = m->fcproj + l * sc, *res3 = m->res3 + l * sc;
        size_t lC = (size_t)l * C;
        rbegin(m, DT_R_MATMUL_FWD);
        TRY(linear_fwd(m, qkv, ln1, P16(DT_P_QKVW) + lC * 3 * C, P16(DT_P_QKVB) + lC * 3, BT, C, 3 * C));
        rend(m, DT_R_MATMUL_FWD);
        rbegin(m, DT_R_ATTN_FWD);
        if (m->flash)
            dt_cu_flash_fwd(atty, m->att_lse + (size_t)l * B * NH * T, qkv, B, T, C, NH, s);
        else
            TRY(dt_cu_attention_fwd(m->blas, atty, att, qkv, m->att_scratch, B, T, C, NH, &ad, (uint32_t)l, s));
        rend(m, DT_R_ATTN_FWD);
        rbegin(m, DT_R_MATMUL_FWD);
        TRY(linear_fwd(m, attproj, atty, P16(DT_P_ATTPROJW) + lC * C, P16(DT_P_ATTPROJB) + lC, BT, C, C));
        rend(m, DT_R_MATMUL_FWD);
        rbegin(m, DT_R_LN_FWD); /* res2 = res + dropout(attproj), ln2 = LN(res2) */
        dt_cu_layernorm_fwd(ln2, m->ln2_mean + (size_t)l * BT, m->ln2_rstd + (size_t)l * BT, res2, res,
                            attproj, P(DT_P_LN2W) + lC, P(DT_P_LN2B) + lC, BT, C, &hd,
                            DT_RNG_DROPOUT_HIDDEN, 2u * (uint32_t)l, s);
        rend(m, DT_R_LN_FWD);
        rbegin(m, DT_R_MATMUL_FWD);
        TRY(linear_fwd(m, fch, ln2, P16(DT_P_FCW) + lC * 4 * C, P16(DT_P_FCB) + lC * 4, BT, C, 4 * C));
        rend(m, DT_R_MATMUL_FWD);
        rbegin(m, DT_R_GELU_FWD);
        dt_cu_gelu_fwd(fchg, fch, sc * 4, s);
        rend(m, DT_R_GELU_FWD);
        rbegin(m, DT_R_MATMUL_FWD);
        TRY(linear_fwd(m, fcproj, fchg, P16(DT_P_FCPROJW) + lC * 4 * C, P16(DT_P_FCPROJB) + lC, BT, 4 * C, C));
        rend(m, DT_R_MATMUL_FWD);
        /* res3 = res2 + dropout(fcproj), normalised by the next layer's ln1 or by lnf */
        int last = l == L - 1;
        rbegin(m, DT_R_LN_FWD);
        dt_cu_layernorm_fwd(last ? m->lnf : m->ln1 + (l + 1) * sc,
                            last ? m->lnf_mean : m->ln1_mean + (size_t)(l + 1) * BT,
                            last ? m->lnf_rstd : m->ln1_rstd + (size_t)(l + 1) * BT, res3, res2, fcproj,
                            last ? P(DT_P_LNFW) : P(DT_P_LN1W) + lC + C,
                            last ? P(DT_P_LNFB) : P(DT_P_LN1B) + lC + C, BT, C, &hd,
                            DT_RNG_DROPOUT_HIDDEN, 2u * (uint32_t)l + 1u, s);
        rend(m, DT_R_LN_FWD);
    }
    rbegin(m, DT_R_HEAD_FWD);
    TRY(linear_fwd(m, m->logits, m->lnf, P16(DT_P_WTE), NULL, BT, C, Vp));
    rend(m, DT_R_HEAD_FWD);
    rbegin(m, DT_R_CROSSENTROPY);
    dt_cu_crossentropy(m->losses, m->logits, m->d_tg, loss_scale / (float)BT, BT, V, Vp, s);
    dt_cu_reduce(m->stats, NULL, m->red_part, m->losses, (size_t)BT, 0,
                 dt_op_variant(DT_OP_CROSSENTROPY) == DT_VARIANT_DET, s);
    rend(m, DT_R_CROSSENTROPY);
    return dt_cu_check(cudaGetLastError(), "forward launch");
}

dt_status dt_gpt_cuda_loss(dt_gpt_cuda *m, double *loss) {
    double sum = 0.0;
    TRY(dt_cu_check(cudaMemcpyAsync(&sum, m->stats, sizeof sum, cudaMemcpyDeviceToHost, m->s), "loss"));
    TRY(dt_gpt_cuda_sync(m));
    *loss = sum / ((double)m->B * m->T);
    return DT_OK;
}

/* The bf16 gradient entering a dropout site's branch: a masked copy of dres, or dres16. */
static const bf16 *through_dropout(dt_gpt_cuda *m, const dt_dropout *hd, uint32_t site) {
    if (!dt_dropout_on(hd)) return m->dres16;
    rbegin(m, DT_R_DROPOUT);
    dt_cu_to_bf16_dropout(m->dproj16, m->dres, (size_t)m->B * m->T * m->cfg.channels, hd,
                          DT_RNG_DROPOUT_HIDDEN, site, m->s);
    rend(m, DT_R_DROPOUT);
    return m->dproj16;
}

dt_status dt_gpt_cuda_backward(dt_gpt_cuda *m) {
    if (m->loss_scale == 0.0f)
        return dt_fail(DT_ESTATE, "dt_gpt_cuda_backward: the last forward had loss_scale 0 (eval)");
    const dt_gpt_config *c = &m->cfg;
    int B = m->B, T = m->T, C = c->channels, NH = c->num_heads, L = c->num_layers;
    int Vp = c->padded_vocab, BT = B * T;
    cudaStream_t s = m->s;
    size_t sc = (size_t)BT * C, TT = (size_t)T * T;
    dt_dropout hd = hidden_drop(m), ad = attn_drop(m);
    m->nsite = 0;
    if (dt_op_variant(DT_OP_ENCODER_BWD) == DT_VARIANT_DET) {
        m->nseg = dt_cu_encoder_buckets(m->h_in, BT, Vp, m->h_count, m->h_order, m->h_segtok, m->h_segstart);
        if (m->nseg <= 0) return dt_fail(DT_EINVAL, "encoder backward: token outside [0, %d)", Vp);
        TRY(dt_cu_check(cudaMemcpyAsync(m->d_order, m->h_order, sizeof(int) * BT, cudaMemcpyHostToDevice, s), "upload"));
        TRY(dt_cu_check(cudaMemcpyAsync(m->d_segtok, m->h_segtok, sizeof(int) * m->nseg, cudaMemcpyHostToDevice, s), "upload"));
        TRY(dt_cu_check(cudaMemcpyAsync(m->d_segstart, m->h_segstart, sizeof(int) * (m->nseg + 1),
                                        cudaMemcpyHostToDevice, s), "upload"));
    }
    rbegin(m, DT_R_HEAD_BWD); /* logits = lnf wte^T; the logits hold dlogits */
    TRY(linear_bwd(m, m->dc1, G(DT_P_WTE), NULL, m->logits, m->lnf, P16(DT_P_WTE), BT, C, Vp));
    rend(m, DT_R_HEAD_BWD);
    rbegin(m, DT_R_LN_BWD);
    TRY(dt_cu_check(cudaMemsetAsync(m->dres, 0, sizeof(float) * sc, s), "cudaMemsetAsync"));
    dt_cu_layernorm_bwd(m->dres, m->dres16, G(DT_P_LNFW), G(DT_P_LNFB), next_part(m), m->dc1,
                        m->res3 + (size_t)(L - 1) * sc, P(DT_P_LNFW), m->lnf_mean, m->lnf_rstd, BT, C, s, m->fin);
    rend(m, DT_R_LN_BWD);
    for (int l = L - 1; l >= 0; l--) {
        const bf16 *res = l == 0 ? m->encoded : m->res3 + (size_t)(l - 1) * sc;
        size_t lC = (size_t)l * C;
        const bf16 *dproj = through_dropout(m, &hd, 2u * (uint32_t)l + 1u);
        rbegin(m, DT_R_MATMUL_BWD);
        TRY(linear_bwd(m, m->dfchg, G(DT_P_FCPROJW) + lC * 4 * C, G(DT_P_FCPROJB) + lC, dproj,
                       m->fchg + l * sc * 4, P16(DT_P_FCPROJW) + lC * 4 * C, BT, 4 * C, C));
        rend(m, DT_R_MATMUL_BWD);
        rbegin(m, DT_R_GELU_BWD);
        dt_cu_gelu_bwd(m->dfch, m->fch + l * sc * 4, m->dfchg, sc * 4, s);
        rend(m, DT_R_GELU_BWD);
        rbegin(m, DT_R_MATMUL_BWD);
        TRY(linear_bwd(m, m->dc1, G(DT_P_FCW) + lC * 4 * C, G(DT_P_FCB) + lC * 4, m->dfch,
                       m->ln2 + l * sc, P16(DT_P_FCW) + lC * 4 * C, BT, C, 4 * C));
        rend(m, DT_R_MATMUL_BWD);
        rbegin(m, DT_R_LN_BWD);
        dt_cu_layernorm_bwd(m->dres, m->dres16, G(DT_P_LN2W) + lC, G(DT_P_LN2B) + lC, next_part(m), m->dc1,
                            m->res2 + l * sc, P(DT_P_LN2W) + lC, m->ln2_mean + (size_t)l * BT,
                            m->ln2_rstd + (size_t)l * BT, BT, C, s, m->fin);
        rend(m, DT_R_LN_BWD);
        dproj = through_dropout(m, &hd, 2u * (uint32_t)l);
        rbegin(m, DT_R_MATMUL_BWD);
        TRY(linear_bwd(m, m->dc1, G(DT_P_ATTPROJW) + lC * C, G(DT_P_ATTPROJB) + lC, dproj,
                       m->atty + l * sc, P16(DT_P_ATTPROJW) + lC * C, BT, C, C));
        rend(m, DT_R_MATMUL_BWD);
        rbegin(m, DT_R_ATTN_BWD);
        if (m->flash)
            dt_cu_flash_bwd(m->dqkv, m->att_dq, m->att_D, m->dc1, m->qkv + l * sc * 3, m->atty + l * sc,
                            m->att_lse + (size_t)l * B * NH * T, B, T, C, NH, s);
        else
            TRY(dt_cu_attention_bwd(m->blas, m->dqkv, m->dc1, m->qkv + l * sc * 3,
                                    m->att + (size_t)l * B * NH * TT, m->att_scratch, B, T, C, NH, &ad,
                                    (uint32_t)l, s));
        rend(m, DT_R_ATTN_BWD);
        rbegin(m, DT_R_MATMUL_BWD);
        TRY(linear_bwd(m, m->dc1, G(DT_P_QKVW) + lC * 3 * C, G(DT_P_QKVB) + lC * 3, m->dqkv,
                       m->ln1 + l * sc, P16(DT_P_QKVW) + lC * 3 * C, BT, C, 3 * C));
        rend(m, DT_R_MATMUL_BWD);
        rbegin(m, DT_R_LN_BWD);
        dt_cu_layernorm_bwd(m->dres, m->dres16, G(DT_P_LN1W) + lC, G(DT_P_LN1B) + lC, next_part(m), m->dc1,
                            res, P(DT_P_LN1W) + lC, m->ln1_mean + (size_t)l * BT,
                            m->ln1_rstd + (size_t)l * BT, BT, C, s, m->fin);
        rend(m, DT_R_LN_BWD);
    }
    rbegin(m, DT_R_EMBED_BWD);
    dt_cu_encoder_bwd(G(DT_P_WTE), G(DT_P_WPE), m->dres, m->d_in, m->d_order, m->d_segtok, m->d_segstart,
                      m->nseg, B, T, C, &hd, DT_RNG_DROPOUT_HIDDEN, EMB_SITE, s);
    rend(m, DT_R_EMBED_BWD);
    /* join: the det partial finishes on m->fin complete before anything reads gradients or
     * reuses their partial regions */
    TRY(dt_cu_check(cudaEventRecord(m->join, m->fin), "cudaEventRecord"));
    TRY(dt_cu_check(cudaStreamWaitEvent(m->s, m->join, 0), "cudaStreamWaitEvent"));
    return dt_cu_check(cudaGetLastError(), "backward launch");
}

void dt_gpt_cuda_zero_grad(dt_gpt_cuda *m) {
    cudaMemsetAsync(m->grad, 0, sizeof(float) * m->num_params, m->s);
}

__global__ void sqrt_kernel(double *x) { x[3] = sqrt(x[1]); }

dt_status dt_gpt_cuda_step(dt_gpt_cuda *m, const dt_adamw_config *c, float lr, int64_t t,
                           dt_grad_stats *stats) {
    int det = dt_op_variant(DT_OP_NORM) == DT_VARIANT_DET;
    rbegin(m, DT_R_NORM);
    dt_cu_reduce(m->stats + 1, m->zeros, m->red_part, m->grad, m->num_params, 1, det, m->s);
    dt_cu_reduce(m->stats + 2, NULL, m->red_part, m->param, m->num_params, 1, det, m->s);
    sqrt_kernel<<<1, 1, 0, m->s>>>(m->stats);
    rend(m, DT_R_NORM);
    dt_cu_adamw_args a;
    a.lr = lr;
    a.beta1 = c->beta1;
    a.beta2 = c->beta2;
    a.eps = c->eps;
    a.bc1 = 1.0f - powf(c->beta1, (float)t); /* as optim/adamw.c */
    a.bc2 = 1.0f - powf(c->beta2, (float)t);
    a.clip_grad = c->clip_grad;
    a.grad_norm = m->stats + 3;
    a.decay = NULL;
    a.chunks = m->chunks;
    a.nchunks = m->nchunks;
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
    rbegin(m, DT_R_ADAMW);
    dt_cu_adamw(m->param, m->param16, m->grad, m->adam_m, m->adam_v, &a, m->s);
    rend(m, DT_R_ADAMW);
    double h[4];
    long long z = 0;
    TRY(dt_cu_check(cudaMemcpyAsync(h, m->stats, sizeof h, cudaMemcpyDeviceToHost, m->s), "stats"));
    TRY(dt_cu_check(cudaMemcpyAsync(&z, m->zeros, sizeof z, cudaMemcpyDeviceToHost, m->s), "stats"));
    TRY(dt_gpt_cuda_sync(m));
    stats->grad_norm = sqrt(h[1]);
    stats->param_norm = sqrt(h[2]);
    stats->num_zeros = z;
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

const char *dt_gpt_cuda_describe(dt_gpt_cuda *m) {
    cudaDeviceProp p;
    int dev = 0, drv = 0, rt = 0;
    cudaGetDevice(&dev);
    memset(&p, 0, sizeof p);
    cudaGetDeviceProperties(&p, dev);
    cudaDriverGetVersion(&drv);
    cudaRuntimeGetVersion(&rt);
    char algos[12000];
    dt_cu_blas_describe(m->blas, algos, sizeof algos);
    snprintf(m->desc, sizeof m->desc,
             "{\"device\":\"cuda\",\"attention\":\"%s\",\"gpu\":\"%s\",\"sm\":\"%d.%d\",\"sms\":%d,\"driver\":%d,"
             "\"runtime\":%d,\"cublaslt\":%zu,\"nvcc_flags\":\"%s\",\"gemm_workspace\":%u,"
             "\"gemm_algos\":%s}",
             m->flash ? "flash" : "gemm", p.name, p.major, p.minor, p.multiProcessorCount, drv, rt, cublasLtGetVersion(),
             DT_NVCC_FLAGS, DT_CU_GEMM_WORKSPACE, algos);
    return m->desc;
}
