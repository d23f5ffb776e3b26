/* CPU fused cross-entropy (see crossentropy.h). */
#include "ops/crossentropy/crossentropy.h"

#include "ops/reduce/reduce.h"

#include <math.h>

void dt_crossentropy_fwd(float *losses, float *lse, const float *logits, const int *targets,
                         int N, int V, int Vp) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        const float *x = logits + (size_t)i * Vp;
        double m = -INFINITY, s = 0.0;
        for (int c0 = 0; c0 < V; c0 += DT_CE_CHUNK) {
            int c1 = c0 + DT_CE_CHUNK < V ? c0 + DT_CE_CHUNK : V;
            double cm = -INFINITY, cs = 0.0;
            for (int c = c0; c < c1; c++) cm = x[c] > cm ? x[c] : cm;
            for (int c = c0; c < c1; c++) cs += exp((double)x[c] - cm);
            /* merge chunk into the running pair, in chunk order */
            double nm = cm > m ? cm : m;
            s = s * exp(m - nm) + cs * exp(cm - nm);
            m = nm;
        }
        double l = m + log(s);
        lse[i] = (float)l;
        losses[i] = (float)(l - (double)x[targets[i]]);
    }
}

double dt_crossentropy_mean(const float *losses, int N) {
    double s = dt_crossentropy_choose() == DT_REDUCE_DET ? dt_sum_det(losses, (size_t)N)
                                                     : dt_sum_fast(losses, (size_t)N);
    return s / N;
}

void dt_crossentropy_bwd(float *logits, const float *lse, const int *targets, float dloss,
                         int N, int V, int Vp) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        float *x = logits + (size_t)i * Vp, l = lse[i];
        for (int c = 0; c < V; c++) x[c] = expf(x[c] - l) * dloss;
        x[targets[i]] -= dloss;
        for (int c = V; c < Vp; c++) x[c] = 0.0f;
    }
}
