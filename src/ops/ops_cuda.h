/* The CUDA backend's ops, one launcher per kernel family. The math of each op is stated in
 * its CPU header (encoder.h, layernorm.h, matmul.h, attention.h, gelu.h, crossentropy.h,
 * reduce.h, dropout.h); this header gives the GPU shapes, dtypes and determinism class.
 *
 * Precision: activations and matmul inputs bf16; master weights, gradients, LayerNorm
 * statistics, losses fp32; every reduction accumulates in fp32 (norms in fp64).
 * Branches: each launcher with a det/fast choice reads dt_op_variant() for its op id at the
 * call, exactly as the CPU ops do. Every launcher enqueues on `s` and returns at once;
 * launch errors surface at the next dt_cu_check of cudaGetLastError().
 * Include from .cu files only. */
#ifndef DT_OPS_OPS_CUDA_H
#define DT_OPS_OPS_CUDA_H

#include "ops/cuda_common.cuh"

#include <cublasLt.h>

extern "C" {
#include "ops/cuda_plan.h"
#include "ops/dropout.h"
#include "ops/gemm_table.h"
#include "ops/op.h"
}

/* ---- GEMM (gemm_cuda.cu), DT_OP_GEMM ------------------------------------------------- */
/* One cuBLASLt handle with a fixed workspace and a cache of plans keyed by shape, types,
 * epilogue and branch. Both branches first look the call up in the static plan table
 * (gemm_table.h: configurations chosen offline, det-eligible, checked with
 * cublasLtMatmulAlgoCheck; DT_GEMM_TABLE=off skips it). Otherwise det: the algorithm is the
 * first heuristic result without in-place
 * split-K reduction (CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK; dt_cu_gemm_pick), chosen
 * once per shape without timing and pinned (split-K allowed only with a workspace reduction
 * scheme); fast: the first heuristic result of any scheme. Both branches cut K into
 * dt_cu_gemm_splits() chunks where that rule says so (the weight gradients: K = B*T, small
 * outputs): one strided batch per chunk into an fp32 workspace, then the chunk partials added
 * in chunk order by one thread per output element (deterministic by construction). */
typedef struct dt_cu_blas dt_cu_blas;
#define DT_CU_GEMM_WORKSPACE (32u << 20) /* per GEMM; a handle holds two (dt_cu_blas_graph_relax) */
/* Reads DT_GEMM_TABLE (a bad value is DT_EINVAL) and the device's compute capability. */
dt_status dt_cu_blas_create(dt_cu_blas **out);
void dt_cu_blas_free(dt_cu_blas *h);
/* Appends the chosen algorithms as a JSON array to buf (for env.json): per plan its source
 * ("table", "heuristic", "forced"), its full configuration, and a table_note when a table
 * entry was rejected by cublasLtMatmulAlgoCheck and the heuristic chose instead. */
void dt_cu_blas_describe(const dt_cu_blas *h, char *buf, size_t cap);
/* The table's state as a JSON object: on/off, entries, the cuBLASLt version they were
 * measured with, this device's sm, plans taken from it, entries rejected. */
void dt_cu_blas_table_describe(const dt_cu_blas *h, char *buf, size_t cap);
/* One line on the plan of the latest dt_cu_gemm call: variant, shape, epilogue, algorithm,
 * tile, stages, split-K, reduction scheme and K chunks (kernel-level trace events). */
void dt_cu_gemm_describe_last(const dt_cu_blas *h, char *buf, size_t cap);
/* Benchmarks only (tests/gpu/bench_gemm.cu): plans made after this call take heuristic
 * candidate `cand` (of up to 16; -1: the policy above) and cut K into `splits` chunks (0:
 * the rule; 1: none). Plans made under a force are cached apart from the others. */
void dt_cu_blas_force(dt_cu_blas *h, int cand, int splits);
/* Benchmarks only (tests/gpu/tune_gemm.cu, bench_gemm.cu): plans made after this call take
 * configuration cfg (NULL: back to the table and the policy), validated with
 * cublasLtMatmulAlgoCheck (a configuration that does not fit is an error; in det, one that is
 * not dt_cu_gemm_cfg_det too); dt_cu_blas_use_table switches the table (DT_GEMM_TABLE's
 * value at create); dt_cu_blas_forget drops every cached plan (no GEMM of h may be in flight
 * on the host side: call it between calls). Each setting is part of the plan key. */
void dt_cu_blas_force_cfg(dt_cu_blas *h, const dt_cu_gemm_cfg *cfg);
void dt_cu_blas_use_table(dt_cu_blas *h, int on);
void dt_cu_blas_forget(dt_cu_blas *h);
/* CUDA graph capture (the GPU model records a step's launches once and replays them):
 * cuBLASLt zeroes a small region of the GEMM's workspace before many of its kernels, a
 * memset launched in stream order between the previous op and the GEMM, where the device
 * waits for it. A handle has two workspaces that successive GEMMs take in turn. Between
 * dt_cu_blas_capture_begin and dt_cu_blas_graph_relax the handle notes, for each GEMM
 * captured, its workspace and the capture's dependencies before cuBLASLt's launches and
 * after them; relax then makes each memset into a workspace depend on the previous GEMM
 * that used that workspace instead of the op just before it (the region is free from then
 * on, and only this handle's GEMMs, in stream order, touch it), and the GEMM on that op
 * too, so the memset runs off the stream's path, even between two GEMMs back to back.
 * Edges are added before any is removed, so an API failure part way leaves a valid graph
 * (more constrained, never less). Returns the memsets moved, -1 on an API error (relaxed
 * so far, all edges valid); g NULL (the capture failed) just ends the notes. */
void dt_cu_blas_capture_begin(dt_cu_blas *h);
int dt_cu_blas_graph_relax(dt_cu_blas *h, cudaGraph_t g);

/* Epilogues (dt_cu_gemm_args.epi): the enum DT_CU_EPI_* of cuda_plan.h. The pointers they
 * use must keep one alignment per plan (cuBLASLt picks the algorithm for the alignment of
 * the first call's pointers). */
/* Floats of bias-gradient scratch (dbias_part) a DT_CU_EPI_BGRAD call with M rows needs. */
#define DT_CU_BGRAD_PART_FLOATS(M) ((size_t)DT_CU_SPLITK_MAX * (size_t)(M))

/* Row-major C = alpha * op(A) op(B) + beta * C (+ the epilogue), like dt_gemm: A is (M,K),
 * stored (K,M) when ta; B is (K,N), stored (N,K) when tb. A, B bf16; C bf16 or fp32 (c_f32).
 * batch > 1: strided batches (strides in elements). bias: bf16 (N) or NULL.
 * aux (GELU epilogues): C's dtype, (M, N) with row stride ldc.
 * dbias (BGRAD): fp32 (M), added to; dbias_part: DT_CU_BGRAD_PART_FLOATS(M) floats the GEMM
 * writes its bias partials into (one per K chunk); they are added into dbias in chunk order
 * on the finish stream of dt_cu_gemm_fin, and must stay untouched until that stream is
 * joined. BGRAD needs alpha = 1 and batch 1. */
typedef struct dt_cu_gemm_args {
    int ta, tb, M, N, K;
    const bf16 *A; int lda; long long sA;
    const bf16 *B; int ldb; long long sB;
    void *C; int ldc; long long sC;
    int c_f32;
    float alpha, beta;
    int batch;
    const bf16 *bias;
    int epi;
    void *aux;
    float *dbias, *dbias_part;
    /* dt_cu_gemm_wgmma only, with the dGELU epilogue (both NULL otherwise): csum (fp32, N) +=
     * the column sums of C, from the epilogue (C's fp32 values before their bf16 rounding:
     * the gradient the bf16 C stores, less one rounding an element); csum_part:
     * dt_cu_gemm_wgmma_csum_floats(M, N, K) floats (16-byte aligned) of partials, which
     * dt_cu_colsum_finish adds into csum on the finish stream (DT_OP_BIAS_BWD's branch) and
     * which must stay untouched until that stream is joined. */
    float *csum, *csum_part;
    /* dt_cu_gemm_wgmma only, with the DOT epilogue (NULL, 0 otherwise): the flash backward's
     * D from the input gradient of the attention's output projection. C = dO (B T, NH 64),
     * aux = O (the attention output, C's shape and ldc); for every row r = b T + t and head
     * h (columns 64 h .. 64 h + 63), dot_ld receives dt_cu_flash_bwd's LD of row (b NH + h) T
     * + t: lse log2(e) (dot_lse, B NH T floats, the forward's) and D = rowsum(dO O) over the
     * head's channels, dO as stored (bf16), in a fixed order of its own (4 fused
     * multiply-add chains over channels 8 j + 2 t, + 1, j in order, then (S0 + S1) + (S2 +
     * S3); not the D kernel's order, so not its bits). dot_T: T (even; M = B T). */
    float *dot_ld;
    const float *dot_lse;
    int dot_T;
} dt_cu_gemm_args;
dt_status dt_cu_gemm(dt_cu_blas *h, const dt_cu_gemm_args *a, cudaStream_t s);
/* dt_cu_gemm whose bias-gradient finish (DT_CU_EPI_BGRAD) runs on fs, forked from s
 * (fs == s: in line). */
dt_status dt_cu_gemm_fin(dt_cu_blas *h, const dt_cu_gemm_args *a, cudaStream_t s, cudaStream_t fs);
/* Makes (or finds) the plan of a call without running it: DT_OK, or the status of a shape,
 * type or epilogue that cuBLASLt has no algorithm for (the model probes its fusions). */
dt_status dt_cu_gemm_prepare(dt_cu_blas *h, const dt_cu_gemm_args *a);
/* Benchmarks only: the cuBLASLt objects of a call's plan (made if needed), for enumerating
 * algorithms against the very descriptors dt_cu_gemm runs with. Owned by h: valid until
 * dt_cu_blas_forget or dt_cu_blas_free. */
typedef struct dt_cu_gemm_lt {
    cublasLtHandle_t lt;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, c; /* cuBLASLt's operands: a is our B, b our A (column-major) */
    cudaDataType ctype;             /* C and D */
    dt_cu_gemm_cfg cfg;             /* the plan's configuration */
    const char *source;             /* "table", "heuristic", "forced" */
    const char *epilogue;           /* its name in env.json and in gemm_table.h's key */
    int k_chunks;                   /* our K chunks (gemm_table.h's key) */
} dt_cu_gemm_lt;
dt_status dt_cu_gemm_lt_of(dt_cu_blas *h, const dt_cu_gemm_args *a, dt_cu_gemm_lt *out);
/* Benchmarks only: whether configuration cfg fits the call's plan (cublasLtMatmulAlgoCheck
 * against its descriptors): DT_OK and the workspace it needs, or DT_EUNSUPPORTED. */
dt_status dt_cu_gemm_check_cfg(dt_cu_blas *h, const dt_cu_gemm_args *a, const dt_cu_gemm_cfg *cfg, size_t *ws);
/* Reads an algorithm's configuration back (every settable attribute of cuBLASLt's algo
 * config) into c. */
void dt_cu_gemm_cfg_read(const cublasLtMatmulAlgo_t *algo, dt_cu_gemm_cfg *c);
/* The same GEMM on our own kernel (gemm_wgmma_cuda.cu, sm_90a only: TMA loads, warpgroup
 * MMA, persistent blocks; 128 x 128 tiles in ping-pong, 128 x 256 cooperative for K >= 2048
 * where N allows: gemm_tma_plan.h's dt_gt_schedule): for
 * calls that dt_cu_gemm_wgmma_fits (cuda_plan.h; else DT_EINVAL, nothing launched),
 * epilogues DEFAULT (bias), GELU and DGELU with dt_cu_gemm's meaning, and DOT (its own:
 * dt_cu_gemm_args.dot_ld); the GELU math is
 * gelu_cuda.cu's formula with the hardware tanh, so the bits differ from cuBLASLt's
 * epilogues within bf16 roundings. One block owns each output tile (blocks claim tiles from
 * a counter of a pool in device memory, which each launch leaves at zero: at most 256 calls
 * in flight at once, launched from one host thread, which hands the counters out in turn
 * with a plain increment) and walks K in order: deterministic, no workspace. DT_EUNSUPPORTED when the driver has no tensor-map encoder;
 * on a GPU other than sm_90 the launch fails (no kernel image), reported by the next
 * cudaGetLastError. */
dt_status dt_cu_gemm_wgmma(const dt_cu_gemm_args *a, cudaStream_t s);
/* dt_cu_gemm_wgmma whose column-sum finish (a->csum) runs on fs, forked from s (fs == s: in
 * line). The partials are per warp (32 rows a row of partials for the 128 x 128 ping-pong,
 * 16 for the cooperative schedules), each the sum of its rows in order and then across the
 * warp's lanes in a fixed tree (gemm_tma_plan.h, dt_gt_csum_*): the same bits on every
 * launch for a schedule, whichever block takes a tile. DT_EINVAL for csum without dGELU or
 * without an aligned csum_part. */
dt_status dt_cu_gemm_wgmma_fin(const dt_cu_gemm_args *a, cudaStream_t s, cudaStream_t fs);
/* Floats of csum_part a call of this shape needs (the schedule it takes, as forced). */
size_t dt_cu_gemm_wgmma_csum_floats(int M, int N, int K);
/* Benchmarks only: the schedule dt_cu_gemm_wgmma's later calls take (DT_CU_GEMM_OWN_RULE:
 * the rule above). A 256-wide one forced on an N that is not a multiple of 256 is refused
 * (DT_EINVAL). */
enum {
    DT_CU_GEMM_OWN_RULE = 0,
    DT_CU_GEMM_OWN_COOP256,    /* 128 x 256 tiles, both consumer warpgroups on each */
    DT_CU_GEMM_OWN_COOP128,    /* 128 x 128 tiles, both consumer warpgroups on each */
    DT_CU_GEMM_OWN_PINGPONG256, /* 64 x 256 tiles, the consumer warpgroups on alternate ones */
    DT_CU_GEMM_OWN_PINGPONG128, /* 128 x 128 tiles, the consumer warpgroups on alternate ones */
    DT_CU_GEMM_OWN_COUNT
};
void dt_cu_gemm_wgmma_force(int schedule);
/* Benchmarks only: on != 0, later calls take their tiles in the fixed order b, b + grid, ...
 * (gemm_tma_plan.h) instead of claiming them from the launch's counter; 0: back to claims. */
void dt_cu_gemm_wgmma_static(int on);

/* ---- embedding (encoder_cuda.cu), DT_OP_ENCODER_BWD ---------------------------------- */
/* out (B,T,C) bf16 = wte[inp] + wpe[t], wte/wpe fp32; with hidden dropout on the sum. */
void dt_cu_encoder_fwd(bf16 *out, const int *inp, const float *wte, const float *wpe, int B, int T,
                       int C, const dt_dropout *drop, uint32_t purpose, uint32_t layer,
                       cudaStream_t s);
/* dwte (Vp,C), dwpe (maxT,C) fp32 += gradient of dout (B,T,C) bf16, multiplied by the
 * dropout mask of (drop, purpose, layer) when drop is on.
 * det: buckets from dt_cu_encoder_buckets (device copies: order, seg_tok, seg_start with
 *      nseg segments): one owner per (token, channel) sums its positions in position order;
 *      one owner per (t, channel) sums over b in order.
 * fast: one atomicAdd per (b, t, channel) into both tables. */
void dt_cu_encoder_bwd(float *dwte, float *dwpe, const bf16 *dout, const int *inp,
                       const int *order, const int *seg_tok, const int *seg_start, int nseg,
                       int B, int T, int C, const dt_dropout *drop, uint32_t purpose,
                       uint32_t layer, cudaStream_t s);

/* ---- LayerNorm (layernorm_cuda.cu), DT_OP_LAYERNORM_BWD ------------------------------ */
/* Optional fused residual: when `b` is not NULL, res = a + dropout(b) is written (bf16) and
 * normalised; else a is normalised. out bf16, mean/rstd fp32 (N). weight/bias fp32 (C). */
void dt_cu_layernorm_fwd(bf16 *out, float *mean, float *rstd, bf16 *res, const bf16 *a,
                         const bf16 *b, const float *weight, const float *bias, int N, int C,
                         const dt_dropout *drop, uint32_t purpose, uint32_t layer,
                         cudaStream_t s);
/* dinp16 (bf16, N x C) += input gradient: each element becomes bf16(float(dinp16) + its
 * gradient), the sum in fp32 and one rounding (acc 0: dinp16 is only written, as if it held
 * zeros: the bits of an accumulation into a zeroed buffer); dweight/dbias (fp32, C) += their
 * gradients. part: dt_cu_ln_part_floats(N, C, 0) floats
 * (2 * dt_cu_ln_parts(N) * C).
 * Rows are taken in groups of DT_CU_LN_WARPS: block b of nparts = dt_cu_ln_parts(N) takes
 * groups b, b + nparts, ... (row w of each to its warp w, in order), a partition fixed by N.
 * det: each block writes its partials; dt_cu_parts_finish adds them in a fixed order, on
 *      stream fs (forked from s with dt_cu_fork when fs != s, so the finish overlaps the
 *      next work; `part` must then stay untouched until fs is joined). fast: each block
 *      atomically adds its partials. */
void dt_cu_layernorm_bwd(bf16 *dinp16, int acc, float *dweight, float *dbias, float *part,
                         const bf16 *dout, const bf16 *inp, const float *weight,
                         const float *mean, const float *rstd, int N, int C, cudaStream_t s,
                         cudaStream_t fs);
/* Benchmarks only (tests/gpu/bench_ops.cu): later backward calls run DT_CU_LN_BWD_RULE (the
 * full-row kernel where C is 256, 512 or 768 with 16-byte aligned weights, else the register
 * or wide kernel) or DT_CU_LN_BWD_GENERAL (the register kernel wherever it applies): the
 * same bits either way (the same partition, orders and float operations). */
#define DT_CU_HAVE_LN_BWD_FORCE 1
enum { DT_CU_LN_BWD_RULE = 0, DT_CU_LN_BWD_GENERAL };
void dt_cu_layernorm_bwd_force(int kernel);
/* Benchmarks only: later forward calls run DT_CU_LN_FWD_RULE (the full-row kernel where C is
 * 256, 512 or 768 with 16-byte aligned weights and bias and no dropout, else the register or
 * wide kernel) or DT_CU_LN_FWD_GENERAL (the register kernel wherever it applies): the same
 * bits either way. */
#define DT_CU_HAVE_LN_FWD_FORCE 1
enum { DT_CU_LN_FWD_RULE = 0, DT_CU_LN_FWD_GENERAL };
void dt_cu_layernorm_fwd_force(int kernel);
/* dt_cu_layernorm_bwd fused with the bias gradient of the linear whose backward reads
 * dinp16 as its dout: sum (fp32, C) += the column sums of dinp16 (the bf16 values as stored,
 * added as floats: what dt_cu_colsum of dinp16 computes, in another order), so dinp16 is not
 * read back for it. Branch of the sum: DT_OP_BIAS_BWD (dweight/dbias keep
 * DT_OP_LAYERNORM_BWD). det: a third block partial (the same rows as dweight/dbias), each
 * block's warps added in warp order, finished by dt_cu_parts_finish on fs; fast: each block atomically adds
 * its sums. part: dt_cu_ln_part_floats(N, C, 1) floats. The wide kernel past
 * dt_cu_ln_colsum_fused runs dt_cu_colsum over dinp16 after the kernel instead.
 * dinp16, dweight and dbias get the same bits as from dt_cu_layernorm_bwd. */
#define DT_CU_HAVE_LAYERNORM_BWD_COLSUM 1
void dt_cu_layernorm_bwd_colsum(bf16 *dinp16, int acc, float *dweight, float *dbias, float *sum,
                                float *part, const bf16 *dout, const bf16 *inp, const float *weight,
                                const float *mean, const float *rstd, int N, int C, cudaStream_t s,
                                cudaStream_t fs);
/* dt_cu_layernorm_bwd (sum NULL) or dt_cu_layernorm_bwd_colsum with acc 1, out of place: the
 * incoming gradient is read from dres and dinp16 = bf16(float(dres) + its gradient) written
 * (dres and dinp16 the same buffer, or buffers that do not overlap); the same bits as the
 * in-place call on a copy of dres. For a backward that keeps each residual gradient (the
 * batched weight gradients of gpt_cuda.cu). */
#define DT_CU_HAVE_LAYERNORM_BWD_FROM 1
void dt_cu_layernorm_bwd_from(bf16 *dinp16, const bf16 *dres, float *dweight, float *dbias, float *sum,
                              float *part, const bf16 *dout, const bf16 *inp, const float *weight,
                              const float *mean, const float *rstd, int N, int C, cudaStream_t s,
                              cudaStream_t fs);

/* ---- bias gradient / column sums (reduce_cuda.cu), DT_OP_BIAS_BWD -------------------- */
/* acc (fp32, cols) += column sums of x (bf16, rows x cols), cols % 8 == 0. part: dt_cu_colsum_parts(rows)
 * * cols floats. Both branches: row-chunk partials (DT_CU_COLSUM_ROWS rows each, a fixed
 * order inside), then dt_cu_colsum_finish on fs (forked from s with dt_cu_fork when fs != s;
 * `part` must then stay untouched until fs is joined). */
void dt_cu_colsum(float *acc, float *part, const bf16 *x, int rows, int cols, cudaStream_t s,
                  cudaStream_t fs);
/* Forks fs from s and adds the nparts chunk partials into acc on fs. det: dt_cu_parts_finish
 * (fixed order); fast: 16 group sums per column added with atomics (arrival order). */
void dt_cu_colsum_finish(float *acc, const float *part, int nparts, int cols, cudaStream_t s,
                         cudaStream_t fs);
/* Makes fs wait for the work enqueued on s so far (no-op when fs == s). */
void dt_cu_fork(cudaStream_t s, cudaStream_t fs);

/* det finish of block partials: acc[c] += sum over k of part[k*cols + c] (and acc2 from the
 * second half part[(nparts + k)*cols + c] when acc2 is not NULL). Per column, thread ty of
 * 8 adds partials ty, ty+8, ... in order, then the 8 sums are added in ty order: the order
 * is fixed by the indices. */
void dt_cu_parts_finish(float *acc, float *acc2, const float *part, int nparts, int cols,
                        cudaStream_t s);

/* ---- whole-buffer reductions (reduce_cuda.cu), DT_OP_NORM / DT_OP_CROSSENTROPY ------- */
/* out[0] = sum of x[i] (square = 0) or x[i]^2 (square = 1) in fp64; zeros (if not NULL)
 * = number of x[i] == 0. part: 2 * DT_CU_RED_MAX_BLOCKS doubles of scratch.
 * det: dt_cu_reduce_blocks(n) blocks, fixed element-to-thread assignment, fixed-order
 * block trees, one block adds the partials in block order.
 * fast: blocks as many as the device keeps busy, partials added with atomics. */
void dt_cu_reduce(double *out, long long *zeros, double *part, const float *x, size_t n,
                  int square, int det, cudaStream_t s);
/* out[0] = part[0] + ... + part[nparts - 1] in fp64, in dt_cu_reduce's fixed order (one
 * block; thread t adds partials t, t + 1024, ..., then the block tree). */
void dt_cu_sum_parts(double *out, const double *part, int nparts, cudaStream_t s);

/* ---- attention (attention_cuda.cu), DT_OP_ATTENTION_BWD ----------------------------- */
/* Scratch the attention needs for B, T, C, NH (bf16 elements): see dt_cu_attention_scratch. */
size_t dt_cu_attention_scratch(int B, int T, int C, int NH, int dropout);
/* out (B,T,C) bf16; att (B,NH,T,T) bf16 probabilities before dropout (saved for backward).
 * Through cuBLASLt batched GEMMs (q k^T, att v) and a row softmax owned by one warp. */
dt_status dt_cu_attention_fwd(dt_cu_blas *h, bf16 *out, bf16 *att, const bf16 *qkv, bf16 *scratch,
                              int B, int T, int C, int NH, const dt_dropout *drop,
                              uint32_t layer, cudaStream_t s);
/* dqkv (B,T,3C) bf16 overwritten. Every output element is one GEMM output element or one
 * row-owned softmax element: no atomics in either branch (the two branches coincide;
 * dQ is the GEMM dS k, reduced over keys inside one GEMM tile in a fixed order). */
dt_status dt_cu_attention_bwd(dt_cu_blas *h, bf16 *dqkv, const bf16 *dout, const bf16 *qkv,
                              const bf16 *att, bf16 *scratch, int B, int T, int C, int NH,
                              const dt_dropout *drop, uint32_t layer, cudaStream_t s);

/* Flash-style attention (attention_flash_cuda.cu), used when dt_cu_flash_supported: head
 * size 64, T % 64 == 0, no attention dropout. lse (B,NH,T) fp32 saved for backward.
 * Backward: both branches of DT_OP_ATTENTION_BWD run the same kernels (they coincide): each
 * tile's dS (bf16) goes to the scratch and a dQ pass sums dS K over key blocks in order
 * (one owner per element, no atomics). scratch: dt_cu_flash_bwd_scratch bytes (about 214 MB
 * at B 16, NH 12, T 1024), contents on entry irrelevant. dqkv (B,T,3C) overwritten.
 * Fused bias gradient (the qkv linear's, which would otherwise be dt_cu_colsum of dqkv):
 * when dbias (fp32, 3C) is not NULL, dbias += the column sums of dqkv as stored (bf16
 * values, fp32 sums). The kernels write one partial per 64-row block and column into part
 * (dt_cu_flash_bias_parts(B, T) * 3C floats, required with dbias, contents on entry
 * irrelevant; row b T/64 + j for rows 64 j.. of batch b): rows g and g + 8 of a warp's 16,
 * an xor butterfly over g, then the block's 4 warps in order; dt_cu_parts_finish adds the
 * partials in its fixed order on fs (forked from s with dt_cu_fork when fs != s; `part`
 * must then stay untouched until fs is joined). Deterministic in both branches of
 * DT_OP_BIAS_BWD (one fixed order, no atomics). dbias NULL: part unused, no sums; dqkv has
 * the same bits either way. */
int dt_cu_flash_supported(int C, int NH, int T, const dt_dropout *drop);
void dt_cu_flash_fwd(bf16 *out, float *lse, const bf16 *qkv, int B, int T, int C, int NH, cudaStream_t s);
size_t dt_cu_flash_bwd_scratch(int B, int T, int C, int NH);
/* Rows of bias partials of dt_cu_flash_bwd: B T / 64 (each 3C floats). */
int dt_cu_flash_bias_parts(int B, int T);
void dt_cu_flash_bwd(bf16 *dqkv, float *dbias, float *part, void *scratch, const bf16 *dout, const bf16 *qkv,
                     const bf16 *out, const float *lse, int B, int T, int C, int NH, cudaStream_t s,
                     cudaStream_t fs);
/* dt_cu_flash_bwd with LD already in the scratch (dt_cu_flash_scratch_ld), from the output
 * projection's input-gradient GEMM with the DOT epilogue: no D kernel; out and lse are not
 * read. */
void dt_cu_flash_bwd_ld(bf16 *dqkv, float *dbias, float *part, void *scratch, const bf16 *dout, const bf16 *qkv,
                        int B, int T, int C, int NH, cudaStream_t s, cudaStream_t fs);
/* The flash forward on warpgroup MMA (attention_wgmma_cuda.cu, built for sm_90a only; the
 * model's forward on sm_90 GPUs): same contract as dt_cu_flash_fwd (dt_cu_flash_supported
 * shapes; out (B,T,C) bf16, lse (B,NH,T) fp32 natural log, causal; one owner per output
 * row walking key tiles in order: deterministic) and the same bits as dt_cu_flash_fwd (the
 * same products in the same k order and the same softmax code; tests/gpu/test_gpu_wgmma.cu
 * compares the bytes and times the configurations below: 0.0829 ms a layer at B 16 NH 12
 * T 1024 on an H200, against 0.0898 for session 4's serial kernel and 0.1066 for
 * dt_cu_flash_fwd). On a GPU other than sm_90 the launch fails (no kernel image), reported
 * by the next cudaGetLastError. */
void dt_cu_flash_fwd_wgmma(bf16 *out, float *lse, const bf16 *qkv, int B, int T, int C, int NH, cudaStream_t s);
/* Benchmarks only (tests/gpu/test_gpu_wgmma.cu): later calls of dt_cu_flash_fwd_wgmma run
 * configuration kernel (0: the rule). The bits do not depend on it (tested). */
enum {
    DT_CU_WGFWD_RULE = 0,
    DT_CU_WGFWD_SERIAL, /* each product waited for at once (session 4's kernel), two
                         * warpgroups a block where T % 128 == 0 */
    DT_CU_WGFWD_PIPE,   /* S of a tile overlaps P V of the one before, two warpgroups a block
                         * where T % 128 == 0 */
    DT_CU_WGFWD_PIPE_64, /* the pipelined kernel with one warpgroup a block, 3 blocks an SM */
    DT_CU_WGFWD_PONG     /* where T % 128 == 0 the second warpgroup a phase after the first
                          * (its softmax while the first one's products run); else
                          * DT_CU_WGFWD_PIPE: the rule */
};
void dt_cu_flash_fwd_wgmma_force(int kernel);
/* The flash backward on warpgroup MMA (attention_wgmma_bwd_cuda.cu, built for sm_90a only;
 * the model's backward on sm_90 GPUs): kernel A (dK, dV, the dS scratch) and the dQ pass on wgmma,
 * the D kernel shared. The contract of dt_cu_flash_bwd (same arguments, scratch, bias
 * partials and finish; deterministic: one owner per output element, fixed orders, no
 * atomics) and the same bits (the same products in the same k order, the same elementwise
 * code; tests/gpu/test_gpu_wgmma_bwd.cu compares the bytes). 0.270 ms against 0.352 at
 * B 16 NH 12 T 1024 on an H200 (docs/cuda.md). Kernel A and the dQ pass are launched with
 * programmatic dependent launch on s (they may start before the kernel before them ends).
 * On a GPU other than sm_90 the launch fails (no kernel image), reported by the next
 * cudaGetLastError. */
void dt_cu_flash_bwd_wgmma(bf16 *dqkv, float *dbias, float *part, void *scratch, const bf16 *dout, const bf16 *qkv,
                           const bf16 *out, const float *lse, int B, int T, int C, int NH, cudaStream_t s,
                           cudaStream_t fs);
/* dt_cu_flash_bwd_wgmma with LD already in the scratch (at dt_cu_flash_scratch_ld): written
 * by the output projection's input-gradient GEMM with the DOT epilogue (dt_cu_gemm_args.dot_ld),
 * so no D kernel runs and out, lse are not read. Kernel A is launched the ordinary way (the
 * dQ pass after it still with programmatic dependent launch). */
void dt_cu_flash_bwd_wgmma_ld(bf16 *dqkv, float *dbias, float *part, void *scratch, const bf16 *dout,
                              const bf16 *qkv, int B, int T, int C, int NH, cudaStream_t s, cudaStream_t fs);
/* Where LD (B NH T / 2 float4: per pair of rows {lse log2(e) of both, D of both}) lies in a
 * flash backward scratch (its first bytes). */
float *dt_cu_flash_scratch_ld(void *scratch);
/* Benchmarks only (tests/gpu/test_gpu_wgmma_bwd.cu): later calls of dt_cu_flash_bwd_wgmma
 * run kernel A in configuration kernel_a and the dQ pass dq (0 for either: the rule). The
 * bits do not depend on either (tested). */
enum {
    DT_CU_WGBWD_A_RULE = 0,
    DT_CU_WGBWD_A_128, /* two warpgroups (128 keys) a block sharing each Q/dO fill, 1 block an
                        * SM (where T % 128 == 0) */
    DT_CU_WGBWD_A_64,  /* one warpgroup (64 keys) a block, 2 blocks an SM */
    DT_CU_WGBWD_A_Q128, /* 128-query tiles (attention_wgmma_bwd_q128_cuda.cu): two consumer
                         * warpgroups (128 keys) and a producer a block, 1 block an SM (where
                         * T % 128 == 0, else as DT_CU_WGBWD_A_Q128_K64): the rule */
    DT_CU_WGBWD_A_Q128_K64 /* 128-query tiles, one consumer warpgroup (64 keys) and a producer
                            * a block, 2 blocks an SM */
};
enum {
    DT_CU_WGBWD_DQ_RULE = 0,
    DT_CU_WGBWD_DQ_MMA,         /* dt_cu_flash_bwd's mma.sync dQ pass */
    DT_CU_WGBWD_DQ_WGMMA,       /* the dQ pass on wgmma, every kernel launched the ordinary way */
    DT_CU_WGBWD_DQ_WGMMA_PDL,   /* the same with kernel A and the dQ pass launched with
                                 * programmatic dependent launch (each may start while the
                                 * kernel before it ends, and waits for it before reading) */
    DT_CU_WGBWD_DQ_WGMMA_PDL_D, /* DT_CU_WGBWD_DQ_WGMMA_PDL and the D kernel launched that way */
    DT_CU_WGBWD_DQ_WGMMA_PDL_REV /* DT_CU_WGBWD_DQ_WGMMA_PDL with the dQ pass taking the head
                                  * groups last first (dt_flash_bwd_order_rev): the rule */
};
void dt_cu_flash_bwd_wgmma_force(int kernel_a, int dq);

/* ---- cross-entropy (crossentropy_cuda.cu), DT_OP_CROSSENTROPY ------------------------ */
/* One block per row, the row in shared memory: per-thread online (max, sum) over its
 * vocabulary vectors in column order as their copy lands, merged in a fixed tree. losses
 * (N) fp32. When dloss != 0 the logits (bf16, N x Vp) are overwritten with dlogits =
 * (softmax - onehot) * dloss, padded columns 0 (the backward fused into the forward). The
 * mean loss is dt_cu_reduce over losses. */
void dt_cu_crossentropy(float *losses, bf16 *logits, const int *targets, float dloss, int N,
                        int V, int Vp, cudaStream_t s);

/* ---- elementwise (gelu_cuda.cu): deterministic by nature ---------------------------- */
void dt_cu_gelu_fwd(bf16 *out, const bf16 *inp, size_t n, cudaStream_t s);
void dt_cu_gelu_bwd(bf16 *dinp, const bf16 *inp, const bf16 *dout, size_t n, cudaStream_t s);
/* dt_cu_gelu_bwd over a (rows, cols) buffer fused with dt_cu_colsum(acc, part, dinp, rows,
 * cols, s, fs) (DT_OP_BIAS_BWD, same partials, same order, same bits): the bias gradient of
 * the layer that fed the GELU without reading dinp back. cols % 8 == 0. */
#define DT_CU_HAVE_GELU_BWD_COLSUM 1
void dt_cu_gelu_bwd_colsum(bf16 *dinp, float *acc, float *part, const bf16 *inp, const bf16 *dout,
                           int rows, int cols, cudaStream_t s, cudaStream_t fs);
/* out = bf16(float(x) * dropout factor) (factor 1 when drop is off), n elements. */
void dt_cu_dropout_bf16(bf16 *out, const bf16 *x, size_t n, const dt_dropout *drop, uint32_t purpose,
                        uint32_t layer, cudaStream_t s);
void dt_cu_f32_to_bf16(bf16 *out, const float *x, size_t n, cudaStream_t s);
void dt_cu_bf16_to_f32(float *out, const bf16 *x, size_t n, cudaStream_t s);

/* ---- AdamW (optim/adamw_cuda.cu): elementwise, deterministic by nature --------------- */
typedef struct dt_cu_adamw_args {
    float lr, beta1, beta2, eps, bc1, bc2, clip_grad;
    const double *grad_norm;    /* device: the global grad norm before clipping */
    const float *decay;         /* device: weight decay per tensor */
    const dt_cu_chunk *chunks;  /* device: dt_cu_adamw_chunks of the parameter slab */
    int nchunks;
    double *pnorm_part;         /* device, nchunks doubles, or NULL: see dt_cu_adamw */
} dt_cu_adamw_args;
/* One fused launch over every parameter tensor (one block per chunk): the CPU update of
 * optim/adamw.c per element, then param16 = bf16(param). With a->pnorm_part, block i also
 * writes pnorm_part[i] = the fp64 sum of the squares of chunk i's parameters after the
 * update (each thread adds its elements in the order it visits them, then dt_block_sum's
 * fixed tree): the next step's parameter norm, which so costs no pass of its own and is
 * ready before that step's update (dt_cu_sum_parts adds them). */
void dt_cu_adamw(float *param, bf16 *param16, const float *grad, float *m, float *v,
                 const dt_cu_adamw_args *a, cudaStream_t s);
/* Only a->pnorm_part, of the parameters as they are, without an update: what dt_cu_adamw
 * wrote for the update that made them (the same visiting order, so the same bits). For
 * parameters no update made (the first step). Reads a->chunks and param. */
void dt_cu_adamw_pnorm(const float *param, const dt_cu_adamw_args *a, cudaStream_t s);

#endif
