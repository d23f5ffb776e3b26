/* The CUDA model's plan: what the backward's launches read and write, decided by plain C
 * that CI tests on the CPU (no GPU), so the launch code follows a plan instead of
 * handshakes between ops: the residual-gradient slots of the batched weight gradients, the
 * second stream's pending reads, and when a phase's launches run from a CUDA graph.
 * Functions of the model's shape and of host-side settings only. */
#ifndef DT_MODEL_CUDA_PLAN_H
#define DT_MODEL_CUDA_PLAN_H

#ifdef __cplusplus
extern "C" {
#endif

#include <stddef.h>
#include <stdint.h>

/* ---- residual-gradient slots ----------------------------------------------------------
 * DT_DW_BATCH's residual-gradient slots (gpt_cuda.cu's dres_all: 2 L slots of (B T, C)).
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
