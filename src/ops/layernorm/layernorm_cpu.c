/* CPU LayerNorm (see layernorm.h). */
#include "ops/layernorm/layernorm.h"

#include "ops/reduce/reduce.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void dt_layernorm_fwd(float *out, float *mean, float *rstd, const float *inp,
                      const float *weight, const float *bias, int N, int C) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        const float *x = inp + (size_t)i * C;
        double s = 0.0, v = 0.0;
        for (int c = 0; c < C; c++) s += x[c];
        float m = (float)(s / C);
        for (int c = 0; c < C; c++) v += (double)(x[c] - m) * (double)(x[c] - m);
        float r = (float)(1.0 / sqrt(v / C + 1e-5));
        float *o = out + (size_t)i * C;
        for (int c = 0; c < C; c++) o[c] = (x[c] - m) * r * weight[c] + bias[c];
        mean[i] = m;
        rstd[i] = r;
    }
}

/* Input gradient of one row, and that row's contributions to dweight/dbias in dw/db. */
static void row_bwd(float *dx, float *dw, float *db, const float *dy, const float *x,
                    const float *w, float m, float r, int C) {
    float dnorm_mean = 0.0f, dnorm_norm_mean = 0.0f;
    for (int c = 0; c < C; c++) {
        float n = (x[c] - m) * r, dn = w[c] * dy[c];
        dnorm_mean += dn;
        dnorm_norm_mean += dn * n;
    }
    dnorm_mean /= (float)C;
    dnorm_norm_mean /= (float)C;
    for (int c = 0; c < C; c++) {
        float n = (x[c] - m) * r, dn = w[c] * dy[c];
        db[c] += dy[c];
        dw[c] += n * dy[c];
        dx[c] += (dn - dnorm_mean - n * dnorm_norm_mean) * r;
    }
}

void dt_layernorm_bwd_det(float *dinp, float *dweight, float *dbias, const float *dout,
                          const float *inp, const float *weight, const float *mean,
                          const float *rstd, int N, int C) {
    int nchunk = (N + DT_ROW_CHUNK - 1) / DT_ROW_CHUNK;
    float *part = calloc((size_t)nchunk * 2 * (size_t)C, sizeof(float));
    /* Fixed order: chunk k accumulates its rows in row order into its own partials... */
#pragma omp parallel for schedule(static)
    for (int k = 0; k < nchunk; k++) {
        float *dw = part + (size_t)k * 2 * C, *db = dw + C;
        int r1 = (k + 1) * DT_ROW_CHUNK < N ? (k + 1) * DT_ROW_CHUNK : N;
        for (int i = k * DT_ROW_CHUNK; i < r1; i++)
            row_bwd(dinp + (size_t)i * C, dw, db, dout + (size_t)i * C, inp + (size_t)i * C,
                    weight, mean[i], rstd[i], C);
    }
    /* ... and each channel adds the chunk partials in chunk order. */
#pragma omp parallel for schedule(static)
    for (int c = 0; c < C; c++) {
        float sw = 0.0f, sb = 0.0f;
        for (int k = 0; k < nchunk; k++) {
            sw += part[(size_t)k * 2 * C + c];
            sb += part[(size_t)k * 2 * C + C + c];
        }
        dweight[c] += sw;
        dbias[c] += sb;
    }
    free(part);
}

void dt_layernorm_bwd_fast(float *dinp, float *dweight, float *dbias, const float *dout,
                           const float *inp, const float *weight, const float *mean,
                           const float *rstd, int N, int C) {
#pragma omp parallel
    {
        float *dw = calloc(2 * (size_t)C, sizeof(float)), *db = dw + C;
#pragma omp for schedule(static) nowait
        for (int i = 0; i < N; i++)
            row_bwd(dinp + (size_t)i * C, dw, db, dout + (size_t)i * C, inp + (size_t)i * C,
                    weight, mean[i], rstd[i], C);
        /* Unordered: per-thread partials land in the order threads finish. */
        for (int c = 0; c < C; c++) {
#pragma omp atomic
            dweight[c] += dw[c];
#pragma omp atomic
            dbias[c] += db[c];
        }
        free(dw);
    }
}

void dt_layernorm_bwd(float *dinp, float *dweight, float *dbias, const float *dout,
                      const float *inp, const float *weight, const float *mean,
                      const float *rstd, int N, int C) {
    if (dt_layernorm_choose() == DT_LAYERNORM_DET)
        dt_layernorm_bwd_det(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
    else
        dt_layernorm_bwd_fast(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
}
