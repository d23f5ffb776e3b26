/* The GPU model's internals (gpt_cuda.h is its interface), shared by the files of
 * src/model/cuda/, one per responsibility:
 *   create.cu    buffers, the choices made once at create (the plan), free
 *   linear.cu    the linears' forward and backward GEMMs (cuBLASLt or our own kernel)
 *   forward.cu   the forward's launches and its traced op calls, the loss read-back
 *   backward.cu  the backward's launches and its traced op calls, zero_grad
 *   step.cu      gradient statistics and the AdamW update, state up- and download
 *   graphs.cu    CUDA graph capture and replay of each phase's launches
 *   streams.cu   the side streams' ordering (claims, joins) and the partial regions
 *   trace.cu     trace hooks, fault injection, named-range timing
 *   describe.cu  the device description for env.json
 * Include from those files only. */
#ifndef DT_MODEL_CUDA_MODEL_CUH
#define DT_MODEL_CUDA_MODEL_CUH

#include "ops/ops_cuda.h"
#include "model/cuda/plan.h"

#include "model/blocks.h"
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
/* backward.cu: layer l's dqkv and dfch (its own slice when its weight gradient is batched,
 * else the buffer every layer reuses) and residual-gradient slot k (dres16 when the plan
 * keeps no slots, or for k < 0) */
bf16 *gcu_dqkv_of(const dt_gpt_cuda *m, int l);
bf16 *gcu_dfch_of(const dt_gpt_cuda *m, int l);
bf16 *gcu_dres_slot(const dt_gpt_cuda *m, int k);

#endif

#define EMB_SITE 0xffffffffu
#define MAX_EVENTS 4096

/* The CUDA graph slots (see "CUDA graphs" below): a training loop alternates these phases,
 * and with gradient accumulation the first backward after zero_grad (fresh gradients) with
 * the ones adding to them; an eval forward (loss scale 0) runs between training steps.
 * Each keeps its own graph. */
enum { G_ZERO, G_FWD, G_FWD_EVAL, G_BWD_FRESH, G_BWD_ADD, G_SLOTS };

/* The choices made once at create (the flags, what the device and the shape allow). */
typedef struct gcu_choices {
    int flash;          /* attention through attention_flash_cuda.cu */
    int flash_wgmma;    /* flash kernels on warpgroup MMA (attention_wgmma*_cuda.cu, sm_90 only) */
    int fuse_gelu;      /* GELU in the fc GEMM's epilogue, its backward in the fcproj input-gradient GEMM */
    int fuse_bgrad;     /* bias gradients from the weight-gradient GEMMs' epilogue */
    const char *fusion_note; /* the fusions asked for (--gemm-epilogues: off, gelu, bgrad, all) */
    /* --gemm-own gelu: the two GELU GEMMs (fc forward, fcproj input gradient with dGELU) on
     * our own TMA-fed warpgroup-MMA kernel (dt_cu_gemm_wgmma, sm_90 only) instead of
     * cuBLASLt, calls that do not fit its tiles staying on cuBLASLt; off: every GEMM on
     * cuBLASLt. */
    int gemm_own;
    /* --gemm-dot on (with our own GEMM and flash attention): the attproj input gradient on
     * our kernel with the DOT epilogue, which writes the flash backward's LD (both flash
     * backwards take it, so --attention-impl flash-mma still gives the same bits); where
     * every layer's GEMM takes it, the plan's ld_from_dot */
    int gemm_dot;
    /* --bwd-overlap on: the backward's weight-gradient GEMMs run on a second stream (wgs),
     * through their own cuBLASLt handle and workspace (blas_w: the same plans, so the same
     * bits), while m->s goes on with the input gradients; a backward uses it (m->ov) unless
     * profiled or traced per module */
    int overlap;
    int graphs;         /* --cuda-graphs on: each phase replayed from a CUDA graph */
    int dw_batch;       /* --dw-batch on: 2 (the plan decides which kinds), off: 0 */
} gcu_choices;

/* Activations of one forward (bf16 unless noted), kept for the backward. */
typedef struct gcu_acts {
    bf16 *encoded, *ln1, *qkv, *atty, *att, *attproj, *res2, *ln2, *fch, *fchg, *fcproj, *res3, *lnf, *logits;
    float *ln1_mean, *ln1_rstd, *ln2_mean, *ln2_rstd, *lnf_mean, *lnf_rstd, *losses;
    float *att_lse; /* flash: (L,B,NH,T) */
} gcu_acts;

struct dt_gpt_cuda {
    dt_gpt_config cfg;
    dt_param_desc params[DT_NUM_PARAM_TENSORS];
    size_t num_params;
    int B, T;
    float hidden_dropout, attn_dropout;
    uint64_t seed;
    /* set per call */
    uint32_t rng_step;
    int64_t step;       /* the trainer's step (trace events, --inject-nondeterminism) */
    int training;
    float loss_scale;
    /* set by zero_grad: the next backward's weight-gradient GEMMs write their gradients
     * (beta 0) instead of adding to them, so zero_grad clears only the other tensors */
    int grad_fresh;
    int ov;             /* this backward's weight gradients on wgs (choices.overlap) */
    /* decided at create */
    gcu_choices ch;
    dt_cu_bwd_plan bp;  /* who makes each gradient of the backward (plan.h) */
    /* streams, events, handles */
    cudaStream_t s, fin;  /* main stream; det partial finishes (joined at the end of backward) */
    cudaEvent_t join;
    /* recorded after the latest launches that copy from the pinned batch buffers (the
     * forward's upload on m->s; the backward's buckets on m->up, which copies them while
     * the backward runs, after the forward: ev_fwd): the host rewrites them once both passed */
    cudaEvent_t ev_batch, ev_buckets, ev_fwd;
    cudaStream_t up;
    /* the weight-gradient stream: a dW GEMM reads its dout buffer after m->s made it
     * (ev_ready); before m->s writes that buffer again it waits for the GEMM's event in
     * reads (claim) */
    cudaStream_t wgs;
    dt_cu_blas *blas, *blas_w;
    cudaEvent_t ev_ready, ev_wdone, ev_read[DT_CU_READS_MAX];
    dt_cu_reads reads;
    /* CUDA graphs of the launch sequences (model/cuda/plan.h), one a slot */
    int ncapture, nreplay, nrelaxed;
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
    gcu_acts act;
    /* backward scratch */
    float *part;
    size_t part_site;  /* floats per partial site */
    int csum_sites;    /* consecutive sites of the fused fc bias column sum (linear_bwd) */
    int nsite, maxsite, site_over; /* sites used in this backward; site_over: more were asked for than exist */
    bf16 *dres16, *dproj16, *dc1, *dqkv, *dfch, *dfchg, *att_scratch;
    /* the plan's batched weight gradients keep every layer's dqkv (L B T 3C), dfch (L B T 4C)
     * and residual gradients (dres_all: L, 2, B T, C; plan.h's dt_cu_res_slot: slot 2 l + 1
     * is what layer l's fcproj reads, 2 l its attproj; layer 0's LN1 writes dres16 for the
     * embedding backward) */
    bf16 *dqkv_all, *dfch_all, *dres_all;
    bf16 *dres; /* the backward's residual gradient now: dres16, or a slot of dres_all */
    double *red_part, *stats; /* stats: [0] loss sum, [1] grad sumsq, [2] param sumsq, [3] grad norm */
    long long *zeros;
    /* batch */
    int *d_in, *d_tg;
    /* the det embedding backward's work (encoder_plan.h): the token buckets (host) and
     * their chunks (host, then device) */
    int *h_count, *h_order, *h_segtok, *h_segstart, *h_chunk_start, *h_chunk_dst, *h_multi_tok, *h_multi_slot;
    int *d_order, *d_chunk_start, *d_chunk_dst, *d_multi_tok, *d_multi_slot, nchunk, nmulti;
    float *enc_partial;
    int *h_in, *h_tg;
    /* pinned read-back of stats[0..3] and zeros: a copy into pageable memory is staged by
     * the driver, which left the device idle ~40-70 us at the end of every step */
    double *h_stats;
    long long *h_zeros;
    cudaEvent_t ev_stats; /* recorded after the copies into h_stats / h_zeros */
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

/* Dropout of the hidden state and of the attention probabilities: active while training,
 * masks keyed by (seed, rng_step, layer, element). */
static inline dt_dropout gcu_hidden_drop(const dt_gpt_cuda *m) {
    dt_dropout d = {m->training ? m->hidden_dropout : 0.0f, m->seed, m->rng_step};
    return d;
}
static inline dt_dropout gcu_attn_drop(const dt_gpt_cuda *m) {
    dt_dropout d = {m->training ? m->attn_dropout : 0.0f, m->seed, m->rng_step};
    return d;
}

/* ---- tracing (DESIGN §6) --------------------------------------------------------------
 * Each op call below is an op-level trace event when --trace-level op (or kernel) is on,
 * with the same op names as the CPU model where the op is the same (matmul_fwd,
 * layernorm_bwd, ...) and its own where the GPU fuses ops (residual_layernorm_fwd,
 * crossentropy, matmul_gelu_fwd, matmul_dgelu_bwd). Tensors are digested on the device
 * (trace/trace_cuda.h) after joining the side stream m->fin, where the det partial finishes of parameter gradients run, so no
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
        gcu_gset_init(&ts_);                                                                 \
        __VA_ARGS__;                                                                         \
        TRY(gcu_join_fin(m));                                                                \
        TRY(dt_gtrace_begin(&h_, DT_TRACE_OP, phase, op, gcu_variant_name(vid), &ts_, m->s)); \
        dt_cu_launch_take(NULL, 0); /* the launch log holds this op's launches only */       \
    }
#define OP_END(...)                                                                          \
    if (h_) {                                                                                \
        gcu_launch_info(h_);                                                                 \
        dt_gtrace_set ts_;                                                                   \
        gcu_gset_init(&ts_);                                                                 \
        __VA_ARGS__;                                                                         \
        TRY(gcu_join_fin(m));                                                                \
        TRY(dt_gtrace_end(h_, &ts_, m->s));                                                  \
    }
#define BF DT_DT_BF16
#define F32 DT_DT_F32
#define TRY(x) do { dt_status st_ = (x); if (st_ != DT_OK) return st_; } while (0)

#define P(i) (m->param + m->params[i].offset)
#define P16(i) (m->param16 + m->params[i].offset)
#define G(i) (m->grad + m->params[i].offset)
#define BTC ((int64_t)m->B * m->T), m->cfg.channels

/* One linear's backward (linear.cu): dinp = dout W (times GELU'(gelu_pre) with the dGELU
 * epilogue); dw += dout^T inp unless batched (NULL); db as the plan's `bias` says: COLSUM and
 * GEMM_EPILOGUE here, LN_COLSUM and DGELU_EPILOGUE already made (db is then this event's
 * input and output only), FLASH and GELU_BWD belong to another op (db NULL). */
typedef struct gcu_lin_bwd {
    bf16 *dinp;
    float *dw, *db;
    dt_cu_bias_src bias;
    const bf16 *dout, *inp, *w;
    int N, IC, OC;
    const bf16 *gelu_pre; /* fcproj with the GELU fusion: the fc pre-activation */
    float *fc_db;         /* fcproj, with fc's bias from the dGELU epilogue: the bias it sums into */
    int dot_layer;        /* attproj, with LD from the DOT epilogue: its layer; else -1 */
} gcu_lin_bwd;

/* graphs.cu: runs phase g's launches (fn) eagerly, recorded into a graph, or replayed */
dt_status gcu_run_phase(dt_gpt_cuda *m, int g, dt_status (*fn)(dt_gpt_cuda *));

/* trace.cu */
void gcu_rbegin(dt_gpt_cuda *m, int r);
void gcu_rend(dt_gpt_cuda *m, int r);
void gcu_gset_init(dt_gtrace_set *s);
const char *gcu_variant_name(int op);
dt_status gcu_inject(dt_gpt_cuda *m, const char *op, void *p, size_t n, int esize);
void gcu_launch_info(dt_trace_op *h);
void gcu_gemm_info(dt_gpt_cuda *m, dt_trace_op *h, const char *what);
dt_status gcu_block_begin(dt_gpt_cuda *m, dt_trace_op **h, int phase, int l, const void *x, int xdtype);
dt_status gcu_block_end(dt_gpt_cuda *m, dt_trace_op *h, int phase, int l, const void *y, int ydtype);
void gcu_state_tensors(dt_gpt_cuda *m, dt_gtrace_set *s, int opt);

/* streams.cu */
dt_status gcu_join_fin(dt_gpt_cuda *m);
dt_status gcu_claim(dt_gpt_cuda *m, const void *buf);
dt_status gcu_note_read(dt_gpt_cuda *m, const void *buf);
dt_status gcu_join_wgs(dt_gpt_cuda *m);
dt_status gcu_wgs_after_main(dt_gpt_cuda *m);
float *gcu_next_parts(dt_gpt_cuda *m, int n);
float *gcu_next_part(dt_gpt_cuda *m);

/* linear.cu */
int gcu_own_fits(const dt_gpt_cuda *m, const dt_cu_gemm_args *a, int want);
dt_status gcu_run_gemm(dt_gpt_cuda *m, const dt_cu_gemm_args *a, int own);
int gcu_own_dgelu(const dt_gpt_cuda *m);
dt_status gcu_linear_fwd(dt_gpt_cuda *m, bf16 *out, const bf16 *inp, const bf16 *w, const bf16 *b, int N, int IC, int OC);
dt_status gcu_linear_gelu_fwd(dt_gpt_cuda *m, bf16 *out, bf16 *pre, const bf16 *inp, const bf16 *w, const bf16 *b, int N, int IC, int OC);
dt_cu_gemm_args gcu_dw_gemm(const dt_gpt_cuda *m, const bf16 *dout, const bf16 *inp, float *dw, int N, int IC, int OC);
dt_status gcu_linear_bwd(dt_gpt_cuda *m, const gcu_lin_bwd *a);
dt_cu_gemm_args gcu_dx_gemm(const gcu_lin_bwd *a);
int gcu_dot_fits(const dt_gpt_cuda *m, const gcu_lin_bwd *a);
int gcu_dgelu_csum_fits(const dt_gpt_cuda *m, const gcu_lin_bwd *a);
dt_status gcu_dw_batched(dt_gpt_cuda *m, const bf16 *dout_all, long long sdout, const bf16 *inp_all, float *dw, int IC, int OC);

/* forward.cu */
const char *gcu_attention_name(const dt_gpt_cuda *m);
dt_status gcu_queue_stats(dt_gpt_cuda *m);
dt_status gcu_wait_stats(dt_gpt_cuda *m);
dt_status gcu_read_stats(dt_gpt_cuda *m);

/* backward.cu: layer l's dqkv and dfch (its own slice when its weight gradient is batched,
 * else the buffer every layer reuses) and residual-gradient slot k (dres16 when the plan
 * keeps no slots, or for k < 0) */
bf16 *gcu_dqkv_of(const dt_gpt_cuda *m, int l);
bf16 *gcu_dfch_of(const dt_gpt_cuda *m, int l);
bf16 *gcu_dres_slot(const dt_gpt_cuda *m, int k);

#endif
