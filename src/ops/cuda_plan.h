/* Host-side plans of the CUDA kernels, in plain C so CI (no GPU) tests them: how work is
 * cut into blocks and partials, how a GEMM algorithm is picked, how the embedding backward
 * buckets tokens, how the fused AdamW walks the parameter slab.
 *
 * Every plan is a function of the problem sizes only — never of the GPU model, its SM
 * count or the timing of a run — so a deterministic kernel reduces in the same order on
 * every launch and on every H200. */
#ifndef DT_OPS_CUDA_PLAN_H
#define DT_OPS_CUDA_PLAN_H

#ifdef __cplusplus
extern "C" {
#endif

#include "detrain/detrain.h"

#include <stddef.h>
#include <stdint.h>

/* Rows per partial of the column sums (bias gradients) and of LayerNorm dweight/dbias. The
 * LayerNorm backward takes its rows in interleaved groups (ops_cuda.h), DT_CU_LN_ROWS a block
 * on average: 64 makes 256 blocks at N = 16384, one wave of 2 blocks an SM on an H200,
 * measured 5-7% faster than 32 rows (2 waves) and 14% faster than 128 (half the slots idle). */
#define DT_CU_COLSUM_ROWS 64
#define DT_CU_LN_ROWS 64
/* Elements one thread of the det whole-buffer reduction handles per grid pass. */
#define DT_CU_RED_THREADS 256
#define DT_CU_RED_MAX_BLOCKS 1024
/* Elements per chunk of the multi-tensor AdamW launch. */
#define DT_CU_ADAMW_CHUNK 65536

/* Number of row partials for a column sum over `rows` rows: ceil(rows / DT_CU_COLSUM_ROWS). */
int dt_cu_colsum_parts(int rows);
/* Number of LayerNorm backward partials (= blocks): ceil(rows / DT_CU_LN_ROWS). */
int dt_cu_ln_parts(int rows);
/* The LayerNorm backward's blocks: DT_CU_LN_WARPS warps, each accumulating per-channel
 * vectors in its own shared row: dweight and dbias, plus the column sums of dinp16 when the
 * sum is fused (dt_cu_layernorm_bwd_colsum). Dynamic shared memory is capped at
 * DT_CU_LN_SMEM_MAX bytes (the opt-in limit set on every backward kernel). */
#define DT_CU_LN_WARPS 8
#define DT_CU_LN_SMEM_MAX (200u * 1024u)
/* Bytes of dynamic shared memory of one backward block for C channels: (2 + colsum)
 * vectors of C floats per warp. */
size_t dt_cu_ln_bwd_smem(int C, int colsum);
/* The same for the full-row kernel (layernorm_cuda.cu: C = 256, 512, 768): the C weights
 * after the warps' vectors. */
size_t dt_cu_ln_bwd_full_smem(int C, int colsum);
/* Whether the full-row LayerNorm kernels (forward and backward) take rows of C channels held
 * as nv 8-channel vectors a lane (layernorm_cuda.cu's ln_nv; 0: not 16-byte aligned): whole
 * rows, C = 256 nv, and nv <= 3 (the backward keeps its accumulators in registers up to
 * there): C 256, 512, 768. 1 or 0. */
int dt_cu_ln_full_rows(int C, int nv);

/* DT_DW_BATCH's residual-gradient slots (gpt_cuda.cu's dres_all: 2 L slots of (B T, C)).
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
/* Whether the fused column sum runs inside the backward kernel: always in the register
 * kernel (C <= 2048, 16-byte aligned weights); in the wide kernel (wide != 0) while the
 * three vectors fit DT_CU_LN_SMEM_MAX (C <= 2133); otherwise the launcher sums dinp16 with
 * dt_cu_colsum after the kernel (same operands, another order). */
int dt_cu_ln_colsum_fused(int C, int wide);
/* Floats of partial scratch a LayerNorm backward over `rows` rows of C channels needs:
 * 2 (dweight, dbias) or 3 (with the fused column sum) vectors per block. The third
 * region also holds the dt_cu_colsum partials of the unfused fallback (fewer chunks). */
size_t dt_cu_ln_part_floats(int rows, int C, int colsum);

/* Blocks of the whole-buffer reduction of n elements: enough for one pass of
 * DT_CU_RED_THREADS-thread blocks with 8 elements per thread, at most DT_CU_RED_MAX_BLOCKS,
 * at least 1. Depends on n only. */
int dt_cu_reduce_blocks(size_t n);

/* Stable counting sort of token ids for the deterministic embedding backward.
 * inp: BT ids in [0, Vp). Outputs: order[BT] positions sorted by id, ties in position
 * order; seg_tok[nseg] the distinct ids in increasing order; seg_start[nseg + 1] the start
 * of each id's run in order (seg_start[nseg] = BT). count: Vp ints of scratch.
 * Returns nseg, or -1 if an id is outside [0, Vp). */
int dt_cu_encoder_buckets(const int *inp, int BT, int Vp, int *count, int *order, int *seg_tok,
                          int *seg_start);

/* One chunk of the multi-tensor AdamW launch: elements [start, start + len) of the slab,
 * all in tensor `tensor`. */
typedef struct dt_cu_chunk {
    uint32_t tensor;
    uint32_t len;
    uint64_t start;
} dt_cu_chunk;
/* Cuts tensors (given by offsets[i], numel[i], i < ntensors, in slab order) into chunks of
 * at most chunk elements, never crossing a tensor boundary. Writes up to cap chunks;
 * returns the number needed (call with cap 0 to size). */
size_t dt_cu_adamw_chunks(const size_t *offsets, const size_t *numel, int ntensors,
                          size_t chunk, dt_cu_chunk *out, size_t cap);

/* One cuBLASLt heuristic result, as the algorithm picker sees it. */
typedef struct dt_cu_gemm_cand {
    int algo_id;
    int split_k;            /* CUBLASLT_ALGO_CONFIG_SPLITK_NUM (1: none) */
    int reduction_scheme;   /* CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME (0: none) */
    size_t workspace;       /* bytes the algorithm needs */
    int ok;                 /* heuristic state was success */
} dt_cu_gemm_cand;
/* cuBLASLt reduction schemes (cublasLtReductionScheme_t values): in-place adds split-K
 * partials into the output buffer; compute-type and output-type schemes store the partials
 * in the workspace and add them in a separate step, in a fixed order. */
#define DT_CU_SCHEME_INPLACE 1
#define DT_CU_SCHEMES_DET 6 /* compute type | output type */
/* The picker's policy. det: the first usable candidate (heuristic order, no timing) that
 * does not split K, or splits K with a workspace reduction scheme (DT_CU_SCHEMES_DET) —
 * never the in-place scheme — so partial results are never merged in an order the
 * library may vary; fast: the first usable candidate.
 * A candidate is usable when ok and workspace <= ws_limit. Returns its index, or -1. */
int dt_cu_gemm_pick(const dt_cu_gemm_cand *c, int n, int det, size_t ws_limit);

/* Own split-K of a GEMM (gemm_cuda.cu): K cut into S equal chunks, each a strided batch of
 * one cuBLASLt call into an fp32 workspace, the partials then added in chunk order. The
 * rule: S doubles from 1 while the output (M*N elements) times S stays below
 * DT_CU_SPLITK_TARGET, the chunks stay at least DT_CU_SPLITK_MIN_CHUNK deep and multiples of
 * 8 (16-byte aligned chunk starts), and S <= DT_CU_SPLITK_MAX. The target is small on
 * purpose: on the H200 the det heuristic already splits K of the GPT-2 124M weight gradients
 * with a workspace scheme (split_k 2-3); our chunks measured within +-7% of it at S = 2 and
 * slower at S >= 4 for outputs of 1.7M+ elements (docs/cuda.md, "GEMMs"), so they are for
 * small outputs with deep K (768x768: S = 2). */
#define DT_CU_SPLITK_MAX 8
#define DT_CU_SPLITK_MIN_CHUNK 1024
#define DT_CU_SPLITK_TARGET (1u << 20)
/* S for an M x N x K product (1: no split). A function of the sizes only. */
int dt_cu_gemm_splits(int M, int N, int K);

/* Columns (of 8 bf16 each) that one thread of the fused cross-entropy visits for a row of
 * Vp columns with `threads` threads: ceil(Vp / (8 * threads)). Vp must be a multiple of 8. */
int dt_cu_ce_vectors_per_thread(int Vp, int threads);

/* ---- launch log (kernel-level tracing) -------------------------------------------------
 * While on, every CUDA launcher of src/ops notes each launch (kernel name, grid, block,
 * dynamic shared memory: cuda_common.cuh's dt_cu_noted wraps the grid argument); the GPU
 * model takes the notes of one op as text for its kernel-level trace event. Off (the
 * default) a note costs one compare. One host thread (the one driving the model). */
void dt_cu_launch_log(int on);
void dt_cu_launch_note(const char *kernel, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                       unsigned by, unsigned bz, size_t smem);
/* Writes the notes since the last take as "name<<<(gx,gy,gz),(bx,by,bz),smem>>>" joined by
 * "; " into buf (cut to cap - 1 bytes; "+N more" when more launches were noted than kept),
 * clears them and returns how many launches were noted. buf may be NULL (just clears). */
int dt_cu_launch_take(char *buf, size_t cap);

/* GEMM epilogues (dt_cu_gemm_args.epi in ops_cuda.h): what happens to acc = alpha op(A)
 * op(B) + beta C (fp32) before C is stored. */
enum {
    DT_CU_EPI_DEFAULT = 0,   /* C = acc (+ bias[n] on every row when bias is not NULL) */
    DT_CU_EPI_GELU,          /* aux = acc (+ bias[n] when bias is not NULL); C = GELU(aux), the
                              * tanh form of gelu.h, of the fp32 value (aux is stored rounded) */
    DT_CU_EPI_DGELU,         /* C = acc * GELU'(aux), aux the forward's pre-activation */
    DT_CU_EPI_BGRAD,         /* C as DEFAULT, and dbias[i] += sum over k of op(A)[i][k]: the
                              * bias gradient of a weight-gradient GEMM (A = dout^T) */
    DT_CU_EPI_DOT,           /* C as DEFAULT (no bias), and per 64-column head of each row the
                              * flash backward's D = rowsum(C * aux) (dt_cu_gemm_wgmma only:
                              * ops_cuda.h, dt_cu_gemm_args.dot_ld) */
    DT_CU_EPI_COUNT
};

/* ---- the warpgroup-MMA GEMM (gemm_wgmma_cuda.cu) -----------------------------------
 * Whether a dt_cu_gemm call fits dt_cu_gemm_wgmma's tiles (128 rows x 128 or 256 columns,
 * K in steps of 64; gemm_tma_plan.h): A not transposed
 * (ta 0), bf16 C, alpha 1, beta 0, one batch, epilogue DEFAULT (bias or not), GELU,
 * DGELU or DOT (no bias), M and N multiples of 128, K a positive multiple of 64, leading dimensions
 * multiples of 8 (16-byte rows) and every pointer 16-byte aligned. 1 or 0. */
int dt_cu_gemm_wgmma_fits(int ta, int tb, int M, int N, int K, int lda, int ldb, int ldc, int c_f32, float alpha,
                          float beta, int batch, int epi, const void *A, const void *B, const void *C,
                          const void *bias, const void *aux);

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
