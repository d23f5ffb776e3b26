/* The CUDA model's plan: what the backward's launches read and write, decided by plain C
 * that CI tests on the CPU (no GPU), so the launch code follows a plan instead of
 * handshakes between ops: who makes each bias gradient and weight gradient of the backward
 * and who writes the flash backward's LD (dt_cu_bwd_plan), the residual-gradient slots of
 * the batched weight gradients, the second stream's pending reads, and when a phase's
 * launches run from a CUDA graph.
 * Functions of the model's shape and of host-side settings only. */
#ifndef DT_MODEL_CUDA_PLAN_H
#define DT_MODEL_CUDA_PLAN_H

#ifdef __cplusplus
extern "C" {
#endif

#include <stddef.h>
#include <stdint.h>

/* ---- the backward's plan ---------------------------------------------------------------
 * Every linear of a layer (qkv, attproj, fc, fcproj) has a bias gradient and a weight
 * gradient; the fastest backward makes several of them inside other ops. The plan, made
 * once at create from the model's choices, names the one op that makes each, the same for
 * every layer, so no op has to tell the next what it already did:
 *   COLSUM          a column sum of dout in the linear's own backward (reduce family)
 *   GEMM_EPILOGUE   the linear's weight-gradient GEMM's bias-gradient epilogue
 *   LN_COLSUM       the LayerNorm backward just before the linear in the backward order,
 *                   whose output is the linear's dout (attproj: LN2 of its layer; fcproj:
 *                   LN1 of the next layer, lnf for the last), adds its column sums
 *   DGELU_EPILOGUE  fc only: the fcproj input-gradient GEMM's dGELU epilogue (our kernel)
 *                   adds the column sums of the dfch it writes
 *   GELU_BWD        fc only: the GELU backward adds the column sums of the dfch it writes
 *   FLASH           qkv only: the flash attention backward sums the dqkv it writes
 * A weight gradient is made by the linear's backward, or (dw_batched) by one strided-batched
 * GEMM of every layer after the layers, which needs each layer's dout kept. */
typedef enum dt_cu_bias_src {
    DT_CU_BIAS_COLSUM, DT_CU_BIAS_GEMM_EPILOGUE, DT_CU_BIAS_LN_COLSUM, DT_CU_BIAS_DGELU_EPILOGUE,
    DT_CU_BIAS_GELU_BWD, DT_CU_BIAS_FLASH, DT_CU_BIAS_SRC_COUNT
} dt_cu_bias_src;
enum { DT_CU_LIN_QKV, DT_CU_LIN_ATTPROJ, DT_CU_LIN_FC, DT_CU_LIN_FCPROJ, DT_CU_LINEARS };

/* The model's choices the plan follows (all fixed at create). */
typedef struct dt_cu_bwd_plan_in {
    int flash;           /* flash attention (its backward can sum the qkv bias gradient) */
    int fuse_gelu;       /* GELU in the fc GEMM's epilogue, dGELU in the fcproj input-gradient GEMM */
    int fuse_bgrad;      /* bias gradients from the weight-gradient GEMMs' epilogue (--gemm-epilogues bgrad) */
    int hidden_dropout;  /* hidden dropout on: the linears after a LayerNorm read a masked copy of its output */
    int dw_batch;        /* --dw-batch on: weight gradients batched after the layers where the plan allows */
    int dgelu_csum;      /* the fcproj dGELU GEMM runs on our kernel, whose column-sum partials fit */
    int dot_ld;          /* the attproj input-gradient GEMM runs on our kernel with the DOT epilogue */
} dt_cu_bwd_plan_in;

typedef struct dt_cu_bwd_plan {
    dt_cu_bias_src bias[DT_CU_LINEARS];
    int dw_batched[DT_CU_LINEARS];
    int ln_colsum;       /* the LayerNorm backwards sum the next linear's bias gradient */
    int keep_res;        /* each LayerNorm backward writes the residual gradient to its own slot */
    int ld_from_dot;     /* the attproj input-gradient GEMM writes the flash backward's LD (no D kernel) */
} dt_cu_bwd_plan;

void dt_cu_bwd_plan_make(const dt_cu_bwd_plan_in *in, dt_cu_bwd_plan *out);
/* 0 when every gradient has exactly one maker that exists in this configuration (a maker
 * the choices do not provide, a bias-gradient epilogue without its GEMM, a batched weight
 * gradient whose dout is not kept, LD from a GEMM without flash attention); else -1 with
 * the reason in why. */
int dt_cu_bwd_plan_check(const dt_cu_bwd_plan_in *in, const dt_cu_bwd_plan *p, char *why, size_t cap);
const char *dt_cu_bias_src_name(dt_cu_bias_src s);

/* ---- residual-gradient slots ----------------------------------------------------------
 * --dw-batch's residual-gradient slots (model/cuda's dres_all: 2 L slots of (B T, C)).
 * Layer l's attproj reads slot dt_cu_res_slot(l, DT_CU_RES_ATTPROJ) = 2 l, its fcproj
 * dt_cu_res_slot(l, DT_CU_RES_FCPROJ) = 2 l + 1, so each kind's L douts are one strided
 * batch: first slot dt_cu_res_slot(0, kind), DT_CU_RES_STRIDE slots apart. The LayerNorm
 * backward before a linear writes the slot that linear reads (dt_cu_res_slot_ln): layer
 * l's LN2 its attproj's, its LN1 layer l - 1's fcproj's (layer 0's: -1, the one buffer the
 * embedding backward reads), lnf (ln DT_CU_RES_LN1 of layer L) layer L - 1's fcproj's. */
enum { DT_CU_RES_ATTPROJ = 0, DT_CU_RES_FCPROJ = 1, DT_CU_RES_STRIDE = 2 };
enum { DT_CU_RES_LN2 = 0, DT_CU_RES_LN1 = 1 };
int dt_cu_res_slot(int l, int kind);
int dt_cu_res_slot_ln(int l, int ln);

/* ---- pending reads of a second stream -------------------------------------------------
 * The GPU model's backward runs the weight-gradient GEMMs on a second stream; each reads a
 * dout buffer that the main stream writes again later (the next layer's gradients). The
 * table holds, per buffer, whether a read on the second stream is still pending and which
 * of DT_CU_READS_MAX events marks its end. The caller records / waits the events. */
#define DT_CU_READS_MAX 6
typedef struct dt_cu_reads {
    const void *buf[DT_CU_READS_MAX];
    int pending[DT_CU_READS_MAX];
} dt_cu_reads;
/* A read of buf was queued: the slot whose event the caller must record now (the buffer's
 * own slot, else a free one), marked pending; -1 when all slots hold other pending
 * buffers (the caller fails: the model's wiring reads more buffers than it should). */
int dt_cu_reads_note(dt_cu_reads *r, const void *buf);
/* The main stream is about to write buf: the slot whose event it must wait for, no longer
 * pending; -1 when no read of buf is pending. */
int dt_cu_reads_claim(dt_cu_reads *r, const void *buf);
/* Every pending read ended (the streams were joined): marks every slot free. */
void dt_cu_reads_clear(dt_cu_reads *r);

/* ---- CUDA graphs of a step's launches -------------------------------------------------
 * The GPU model records a phase's launch sequence (zero_grad, the forward, the backward up
 * to the embedding backward) once as a CUDA graph and replays it each step: one launch
 * instead of hundreds, without the host's pacing or the per-launch gaps between kernels.
 * A replay runs the same kernels with the same arguments on the same buffers, so it gives
 * the eager launches' bits. The signature is a hash of every host-side setting the launch
 * sequence depends on (loss scale, variants, overlap, fresh gradients); a phase is
 * captured on the second consecutive eligible call with one signature (the first one ran
 * eagerly, so cuBLASLt plans and autotuning, which synchronise, happened outside any
 * capture), replayed while the signature stays, re-captured when it changes. Ineligible
 * calls (tracing, profiling, a pending injection, dropout) run eagerly and keep the graph. */
typedef enum dt_cu_graph_act { DT_CU_GRAPH_EAGER = 0, DT_CU_GRAPH_CAPTURE, DT_CU_GRAPH_REPLAY } dt_cu_graph_act;
typedef struct dt_cu_graph_state {
    uint64_t captured, seen; /* the signature of the graph held; of the last eager call */
    int have_captured, have_seen;
} dt_cu_graph_state;
/* What the call with signature sig does; an EAGER answer remembers sig as seen. */
dt_cu_graph_act dt_cu_graph_decide(dt_cu_graph_state *g, int eligible, uint64_t sig);
/* The capture of sig succeeded (the caller holds its graph): replays follow. */
void dt_cu_graph_captured(dt_cu_graph_state *g, uint64_t sig);
/* The graph is gone (failed capture, teardown): the next calls start over. */
void dt_cu_graph_forget(dt_cu_graph_state *g);
/* FNV-1a over n bytes, continuing from h (start with DT_CU_GRAPH_SIG0). */
#define DT_CU_GRAPH_SIG0 0xcbf29ce484222325ull
uint64_t dt_cu_graph_sig(uint64_t h, const void *p, size_t n);

#ifdef __cplusplus
}
#endif

#endif
