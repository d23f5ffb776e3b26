/* Host-side plans of the GEMM family's CUDA paths, in plain C so CI tests them: the
 * cuBLASLt algorithm policy of each branch (gemm_cuda.cu), our own split-K rule, the
 * epilogues, and which calls fit the warpgroup-MMA kernel's tiles (gemm_wgmma_cuda.cu; its
 * tile schedule is gemm_tma_plan.h). Functions of the sizes and of the heuristic's answers
 * only, never of timing, so a det GEMM reduces in the same order on every launch. */
#ifndef DT_OPS_GEMM_PLAN_H
#define DT_OPS_GEMM_PLAN_H

#ifdef __cplusplus
extern "C" {
#endif

#include <stddef.h>

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

/* GEMM epilogues (dt_cu_gemm_args.epi in gemm_cuda.h): what happens to acc = alpha op(A)
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
                              * gemm_cuda.h, dt_cu_gemm_args.dot_ld) */
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

#ifdef __cplusplus
}
#endif

#endif
