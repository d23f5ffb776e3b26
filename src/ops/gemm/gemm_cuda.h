/* GEMMs on the GPU: cuBLASLt with pinned plans (gemm_cuda.cu) and our own warpgroup-MMA
 * kernel (gemm_wgmma_cuda.cu). The math and each path's determinism class are in gemm.h;
 * this header gives the launchers, the GPU dtypes and the plan cache. Include from .cu files
 * only. */
#ifndef DT_OPS_GEMM_CUDA_H
#define DT_OPS_GEMM_CUDA_H

#include "ops/cuda/cuda_common.cuh"

#include <cublasLt.h>

extern "C" {
#include "ops/gemm/gemm.h"
#include "ops/gemm/gemm_plan.h"
#include "ops/gemm/gemm_table.h"
}

/* One cuBLASLt handle with a fixed workspace and a cache of plans keyed by shape, types,
 * epilogue and branch. Both branches first look the call up in the static plan table
 * (gemm_table.h: configurations chosen offline, det-eligible, checked with
 * cublasLtMatmulAlgoCheck; benchmarks can switch it off, dt_cu_blas_use_table). Otherwise det: the algorithm is the
 * first heuristic result without in-place
 * split-K reduction (CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK; dt_cu_gemm_pick), chosen
 * once per shape without timing and pinned (split-K allowed only with a workspace reduction
 * scheme); fast: the first heuristic result of any scheme. Both branches cut K into
 * dt_cu_gemm_splits() chunks where that rule says so (the weight gradients: K = B*T, small
 * outputs): one strided batch per chunk into an fp32 workspace, then the chunk partials added
 * in chunk order by one thread per output element (deterministic by construction). */
typedef struct dt_cu_blas dt_cu_blas;
#define DT_CU_GEMM_WORKSPACE (32u << 20) /* per GEMM; a handle holds two (dt_cu_blas_graph_relax) */
/* Reads the device's compute capability; the plan table is on. */
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
 * not dt_cu_gemm_cfg_det too); dt_cu_blas_use_table switches the table (on at create); dt_cu_blas_forget drops every cached plan (no GEMM of h may be in flight
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

/* Epilogues (dt_cu_gemm_args.epi): the enum DT_CU_EPI_* of gemm_plan.h. The pointers they
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
 * calls that dt_cu_gemm_wgmma_fits (gemm_plan.h; else DT_EINVAL, nothing launched),
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

#endif
