/* Matrix product C = alpha * op(A) * op(B) + beta * C, row-major.
 * CPU: fp32 through OpenBLAS (gemm_cpu.c). CUDA: bf16 operands, bf16 or fp32 C, fp32
 * accumulation, through cuBLASLt (gemm_cuda.cu) or our warpgroup-MMA kernel
 * (gemm_wgmma_cuda.cu); launchers and epilogues in gemm_cuda.h, plans in gemm_plan.h.
 *
 * Paths (DT_OP_GEMM), chosen by dt_gemm_choose:
 *  det, CPU  — the output is cut into fixed slabs (a function of M and N only), each slab is
 *         one single-threaded BLAS call, slabs run in parallel. Every output element is
 *         computed by the same single-threaded code on the same slab, whatever the thread
 *         count: thread-count independent by construction.
 *  fast, CPU — one BLAS call with OpenBLAS's own threading. OpenBLAS may change the
 *         reduction split with its thread count (seen for odd shapes such as 37x513x999),
 *         so the bits can depend on OMP_NUM_THREADS.
 *  det, CUDA — the static plan table's configuration, else the first heuristic result that
 *         does not reduce split-K partials in place (dt_cu_gemm_pick), chosen once per shape
 *         without timing and pinned: the library never merges partials in an order it may
 *         vary. Our K chunks (dt_cu_gemm_splits) are added in chunk order.
 *  fast, CUDA — the table, else the first heuristic result of any reduction scheme (an
 *         in-place split-K may add partials in any order).
 *  our kernel (CUDA, both branches) — one block owns each output tile and walks K in order:
 *         deterministic by construction; which calls take it is the GPU model's setting. */
#ifndef DT_OPS_GEMM_H
#define DT_OPS_GEMM_H

#include "ops/op.h"

typedef enum dt_gemm_path { DT_GEMM_DET = 0, DT_GEMM_FAST = 1 } dt_gemm_path;
/* The path of every GEMM now: det when dt_op_variant(DT_OP_GEMM) says det (always in
 * deterministic mode), else fast (gemm_plan.c). The shape does not change the path. */
dt_gemm_path dt_gemm_choose(void);

/* ta/tb: 0 = as stored, 1 = transposed. A is (M,K) or stored (K,M) when ta; B is (K,N) or
 * stored (N,K) when tb. lda/ldb/ldc are row strides of the stored matrices. */
void dt_gemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
             const float *B, int ldb, float beta, float *C, int ldc);
void dt_gemm_det(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                 const float *B, int ldb, float beta, float *C, int ldc);
void dt_gemm_fast(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                  const float *B, int ldb, float beta, float *C, int ldc);
/* Single-threaded product for use inside a caller's own parallel region. */
void dt_gemm_serial(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                    const float *B, int ldb, float beta, float *C, int ldc);

#endif
