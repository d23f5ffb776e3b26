/* CPU GEMM through OpenBLAS (see gemm.h for the two variants). */
#include "ops/gemm/gemm.h"

#include <cblas.h>
#include <omp.h>

/* One OpenBLAS call. Its OpenMP build runs single-threaded inside an active parallel
 * region (the det slabs, the attention heads) and with its own threads outside one (the
 * fast variant): the same call serves both, the caller's context decides. */
static void blas_call(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                      const float *B, int ldb, float beta, float *C, int ldc) {
    if (M <= 0 || N <= 0) return;
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void dt_gemm_serial(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                    const float *B, int ldb, float beta, float *C, int ldc) {
    blas_call(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void dt_gemm_fast(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                  const float *B, int ldb, float beta, float *C, int ldc) {
    blas_call(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* Slab geometry depends on (M, N) only, never on the thread count. The larger output
 * dimension is cut, so each slab repacks only the smaller operand; slabs grow with the
 * dimension to keep that repacking small next to the slab's arithmetic. */
static int slab_size(int dim) { return dim >= 2048 ? 256 : dim >= 1024 ? 128 : 64; }

void dt_gemm_det(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                 const float *B, int ldb, float beta, float *C, int ldc) {
    if (M <= 0 || N <= 0) return;
    if (M >= 256 && M >= N) {
        int s = slab_size(M), n = (M + s - 1) / s;
        /* Fixed order: each slab's elements are reduced over K by one serial BLAS call. */
#pragma omp parallel for schedule(static)
        for (int i = 0; i < n; i++) {
            int m0 = i * s, m = (M - m0 < s) ? M - m0 : s;
            const float *a = ta ? A + m0 : A + (size_t)m0 * lda;
            dt_gemm_serial(ta, tb, m, N, K, alpha, a, lda, B, ldb, beta, C + (size_t)m0 * ldc, ldc);
        }
    } else if (N >= 256) {
        int s = slab_size(N), n = (N + s - 1) / s;
#pragma omp parallel for schedule(static)
        for (int i = 0; i < n; i++) {
            int n0 = i * s, w = (N - n0 < s) ? N - n0 : s;
            const float *b = tb ? B + (size_t)n0 * ldb : B + n0;
            dt_gemm_serial(ta, tb, M, w, K, alpha, A, lda, b, ldb, beta, C + n0, ldc);
        }
    } else {
        /* Small product: one serial call, made by one thread of an active parallel region so
         * that OpenBLAS stays single-threaded (with one thread, BLAS has one thread too). */
#pragma omp parallel
#pragma omp single
        dt_gemm_serial(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    }
}

void dt_gemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
             const float *B, int ldb, float beta, float *C, int ldc) {
    if (dt_gemm_choose() == DT_GEMM_DET)
        dt_gemm_det(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    else
        dt_gemm_fast(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
