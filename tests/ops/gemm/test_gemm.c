/* GEMM: accuracy of both variants against an fp64 reference (rel. error < 1e-5 of the
 * row's |a||b| scale), and the det variant byte-identical across thread counts 1..4 on
 * shapes that exercise every slab path, including odd ones where OpenBLAS's own
 * threading changes the bits. */
#include "core/determinism.h"
#include "ops/gemm/gemm.h"
#include "dt_test.h"

#include <omp.h>
#include <cblas.h>

static void fill(float *x, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)((seed >> 8) & 0xffff) / 65536.0f - 0.5f;
    }
}

static void set_threads(int n) { omp_set_num_threads(n); openblas_set_num_threads(n); }

static void ref(int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B,
                int ldb, double *C) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int k = 0; k < K; k++) {
                double a = ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k];
                double b = tb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j];
                s += a * b;
            }
            C[(size_t)i * N + j] = s;
        }
}

static const int shapes[][3] = {{37, 513, 999}, {300, 40, 70}, {1100, 96, 64}, {20, 300, 33},
                                {64, 64, 64}, {256, 256, 2048}};

static void test_accuracy_and_thread_independence(void) {
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int tr = 0; tr < 4; tr++) {
            int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2], ta = tr & 1, tb = tr >> 1;
            int lda = ta ? M : K, ldb = tb ? K : N;
            float *A = malloc(sizeof(float) * (size_t)M * K), *B = malloc(sizeof(float) * (size_t)K * N);
            float *C0 = malloc(sizeof(float) * (size_t)M * N), *C = malloc(sizeof(float) * (size_t)M * N);
            double *R = malloc(sizeof(double) * (size_t)M * N);
            fill(A, (size_t)M * K, 1u + (unsigned)s);
            fill(B, (size_t)K * N, 7u + (unsigned)s);
            ref(ta, tb, M, N, K, A, lda, B, ldb, R);
            for (int t = 1; t <= 4; t++) {
                set_threads(t);
                float *out = t == 1 ? C0 : C;
                fill(out, (size_t)M * N, 3u); /* beta = 0.5 mixes in the old contents */
                dt_gemm_det(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, 0.5f, out, N);
                if (t > 1)
                    CHECKF(memcmp(C0, C, sizeof(float) * (size_t)M * N) == 0,
                           "det gemm %dx%dx%d ta=%d tb=%d differs between 1 and %d threads", M, N, K, ta, tb, t);
                fill(C, (size_t)M * N, 3u);
                dt_gemm_fast(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, 0.5f, C, N);
                float *init = malloc(sizeof(float) * (size_t)M * N);
                fill(init, (size_t)M * N, 3u);
                double maxerr = 0, maxerr_fast = 0;
                for (size_t i = 0; i < (size_t)M * N; i++) {
                    double want = R[i] + 0.5 * init[i];
                    double e1 = fabs(out[i] - want), e2 = fabs(C[i] - want);
                    if (e1 > maxerr) maxerr = e1;
                    if (e2 > maxerr_fast) maxerr_fast = e2;
                }
                free(init);
                /* fp32 accumulation over K terms of magnitude <= 0.25: bound ~ K * 2^-24 * 0.25 * 4 */
                double tol = (double)K * 6e-8 + 1e-6;
                CHECKF(maxerr < tol, "det err %g tol %g", maxerr, tol);
                CHECKF(maxerr_fast < tol, "fast err %g tol %g", maxerr_fast, tol);
            }
            free(A); free(B); free(C0); free(C); free(R);
        }
}

int main(void) {
    RUN(test_accuracy_and_thread_independence);
    return dt_test_report();
}
