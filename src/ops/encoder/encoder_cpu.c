/* CPU embedding forward and backward (see encoder.h). */
#include "ops/encoder/encoder.h"

#include <stdlib.h>
#include <string.h>

void dt_encoder_fwd(float *out, const int *inp, const float *wte, const float *wpe, int B,
                    int T, int C) {
#pragma omp parallel for schedule(static)
    for (int bt = 0; bt < B * T; bt++) {
        const float *we = wte + (size_t)inp[bt] * C, *pe = wpe + (size_t)(bt % T) * C;
        float *o = out + (size_t)bt * C;
        for (int c = 0; c < C; c++) o[c] = we[c] + pe[c];
    }
}

void dt_encoder_bwd_det(float *dwte, float *dwpe, const float *dout, const int *inp, int B,
                        int T, int C, int Vp) {
    int BT = B * T;
    /* Stable counting sort of positions by token id: start[v]..start[v+1] lists the
     * positions of token v in increasing (b,t) order. */
    int *start = calloc((size_t)Vp + 1, sizeof(int)), *pos = malloc(sizeof(int) * (size_t)BT);
    for (int i = 0; i < BT; i++) start[inp[i] + 1]++;
    for (int v = 0; v < Vp; v++) start[v + 1] += start[v];
    int *fill = malloc(sizeof(int) * (size_t)Vp);
    memcpy(fill, start, sizeof(int) * (size_t)Vp);
    for (int i = 0; i < BT; i++) pos[fill[inp[i]]++] = i;
    /* Fixed order: token v is owned by one iteration, which adds its rows in (b,t) order. */
#pragma omp parallel for schedule(static)
    for (int v = 0; v < Vp; v++) {
        if (start[v] == start[v + 1]) continue;
        float *dw = dwte + (size_t)v * C;
        for (int j = start[v]; j < start[v + 1]; j++) {
            const float *d = dout + (size_t)pos[j] * C;
            for (int c = 0; c < C; c++) dw[c] += d[c];
        }
    }
    /* Fixed order: position t is owned by one iteration, which adds over b in order. */
#pragma omp parallel for schedule(static)
    for (int t = 0; t < T; t++) {
        float *dp = dwpe + (size_t)t * C;
        for (int b = 0; b < B; b++) {
            const float *d = dout + ((size_t)b * T + t) * C;
            for (int c = 0; c < C; c++) dp[c] += d[c];
        }
    }
    free(start);
    free(pos);
    free(fill);
}

void dt_encoder_bwd_fast(float *dwte, float *dwpe, const float *dout, const int *inp, int B,
                         int T, int C, int Vp) {
    (void)Vp;
    /* Unordered: rows of the same token (and the same position) race through atomics. */
#pragma omp parallel for schedule(dynamic, 4)
    for (int bt = 0; bt < B * T; bt++) {
        const float *d = dout + (size_t)bt * C;
        float *dw = dwte + (size_t)inp[bt] * C, *dp = dwpe + (size_t)(bt % T) * C;
        for (int c = 0; c < C; c++) {
#pragma omp atomic
            dw[c] += d[c];
#pragma omp atomic
            dp[c] += d[c];
        }
    }
}

void dt_encoder_bwd(float *dwte, float *dwpe, const float *dout, const int *inp, int B, int T,
                    int C, int Vp) {
    if (dt_encoder_choose() == DT_ENCODER_DET)
        dt_encoder_bwd_det(dwte, dwpe, dout, inp, B, T, C, Vp);
    else
        dt_encoder_bwd_fast(dwte, dwpe, dout, inp, B, T, C, Vp);
}
