/* CPU reductions (see reduce.h). */
#include "ops/reduce/reduce.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

void dt_colsum_det(const float *x, int rows, int cols, float *acc) {
    int nchunk = (rows + DT_ROW_CHUNK - 1) / DT_ROW_CHUNK;
    float *part = malloc(sizeof(float) * (size_t)nchunk * (size_t)cols);
    /* Fixed order: chunk k sums rows [32k, 32k+32) in row order... */
#pragma omp parallel for schedule(static)
    for (int k = 0; k < nchunk; k++) {
        float *p = part + (size_t)k * cols;
        memset(p, 0, sizeof(float) * (size_t)cols);
        int r1 = (k + 1) * DT_ROW_CHUNK < rows ? (k + 1) * DT_ROW_CHUNK : rows;
        for (int r = k * DT_ROW_CHUNK; r < r1; r++) {
            const float *xr = x + (size_t)r * cols;
            for (int c = 0; c < cols; c++) p[c] += xr[c];
        }
    }
    /* ... then each column adds the chunk partials in chunk order. */
#pragma omp parallel for schedule(static)
    for (int c = 0; c < cols; c++) {
        float s = 0.0f;
        for (int k = 0; k < nchunk; k++) s += part[(size_t)k * cols + c];
        acc[c] += s;
    }
    free(part);
}

void dt_colsum_fast(const float *x, int rows, int cols, float *acc) {
#pragma omp parallel
    {
        float *p = calloc((size_t)cols, sizeof(float));
#pragma omp for schedule(static) nowait
        for (int r = 0; r < rows; r++) {
            const float *xr = x + (size_t)r * cols;
            for (int c = 0; c < cols; c++) p[c] += xr[c];
        }
        /* Unordered: threads add their partials in the order they arrive. */
        for (int c = 0; c < cols; c++) {
#pragma omp atomic
            acc[c] += p[c];
        }
        free(p);
    }
}

#define CHUNKED_SUM(NAME, TERM)                                                      \
    double NAME(const float *x, size_t n) {                                         \
        size_t nchunk = (n + DT_ELEM_CHUNK - 1) / DT_ELEM_CHUNK;                    \
        double *part = malloc(sizeof(double) * (nchunk ? nchunk : 1));              \
        _Pragma("omp parallel for schedule(static)")                                \
        for (size_t k = 0; k < nchunk; k++) {                                       \
            size_t i1 = (k + 1) * DT_ELEM_CHUNK < n ? (k + 1) * DT_ELEM_CHUNK : n;  \
            double s = 0.0;                                                         \
            for (size_t i = k * DT_ELEM_CHUNK; i < i1; i++) s += TERM;              \
            part[k] = s;                                                            \
        }                                                                           \
        double s = 0.0;                                                             \
        for (size_t k = 0; k < nchunk; k++) s += part[k];                           \
        free(part);                                                                 \
        return s;                                                                   \
    }

/* Fixed order: elements in chunk order within a chunk, chunk partials in chunk order. */
CHUNKED_SUM(dt_sumsq_det, (double)x[i] * (double)x[i])
CHUNKED_SUM(dt_sum_det, (double)x[i])

double dt_sumsq_fast(const float *x, size_t n) {
    double s = 0.0;
    /* Unordered: OpenMP combines the per-thread sums in an unspecified order. */
#pragma omp parallel for schedule(static) reduction(+ : s)
    for (size_t i = 0; i < n; i++) s += (double)x[i] * (double)x[i];
    return s;
}

double dt_sum_fast(const float *x, size_t n) {
    double s = 0.0;
#pragma omp parallel for schedule(static) reduction(+ : s)
    for (size_t i = 0; i < n; i++) s += (double)x[i];
    return s;
}

int64_t dt_count_zeros(const float *x, size_t n) {
    int64_t z = 0;
    /* Integer addition is associative: any order gives the same count. */
#pragma omp parallel for schedule(static) reduction(+ : z)
    for (size_t i = 0; i < n; i++) z += (x[i] == 0.0f);
    return z;
}
