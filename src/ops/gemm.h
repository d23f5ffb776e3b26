/* Matrix product C = alpha * op(A) * op(B) + beta * C, row-major, fp32, through OpenBLAS.
 *
 * Variants (DT_OP_GEMM):
 *  det  — the output is cut into fixed slabs (a function of M and N only), each slab is
 *         one single-threaded BLAS call, slabs run in parallel. Every output element is
 *         computed by the same single-threaded code on the same slab, whatever the thread
 *         count: thread-count independent by construction.
 *  fast — one BLAS call with OpenBLAS's own threading. OpenBLAS may change the reduction
 *         split with its thread count (seen for odd shapes such as 37x513x999), so the
 *         bits can depend on OMP_NUM_THREADS. */
#ifndef DT_OPS_GEMM_H
#define DT_OPS_GEMM_H

#include "ops/op.h"

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
