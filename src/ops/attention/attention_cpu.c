/* CPU causal attention (see attention.h). */
#include "ops/attention/attention.h"

#include "core/philox.h"
#include "ops/gemm/gemm.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define QBLK 64 /* query/key block rows */

/* Dropped probabilities of rows [t0, t1) (keys 0..T-1) into pd (ld T). */
static void dropped_rows(float *pd, const float *P, int bh, int t0, int t1, int T,
                         const dt_dropout *drop, uint32_t layer) {
    for (int t = t0; t < t1; t++)
        for (int j = 0; j < T; j++)
            pd[(size_t)(t - t0) * T + j] = j <= t ? P[(size_t)t * T + j] *
                dt_dropout_factor(drop, DT_RNG_DROPOUT_ATTN, layer, ((size_t)bh * T + t) * T + j) : 0.0f;
}

void dt_attention_fwd(float *out, float *att, const float *qkv, int B, int T, int C, int NH,
                      const dt_dropout *drop, uint32_t layer) {
    int HS = C / NH, C3 = 3 * C, dropping = dt_dropout_on(drop);
    float scale = 1.0f / sqrtf((float)HS);
#pragma omp parallel
    {
    float *pd = dropping ? malloc(sizeof(float) * (size_t)QBLK * T) : NULL;
#pragma omp for schedule(static)
    for (int bh = 0; bh < B * NH; bh++) {
        int b = bh / NH, h = bh % NH;
        const float *Q = qkv + (size_t)b * T * C3 + (size_t)h * HS, *K = Q + C, *V = Q + 2 * C;
        float *P = att + (size_t)bh * T * T, *O = out + (size_t)b * T * C + (size_t)h * HS;
        for (int q0 = 0; q0 < T; q0 += QBLK) {
            int q1 = q0 + QBLK < T ? q0 + QBLK : T;
            /* scores for the rows of this block against keys 0..q1-1 */
            dt_gemm_serial(0, 1, q1 - q0, q1, HS, scale, Q + (size_t)q0 * C3, C3, K, C3, 0.0f,
                           P + (size_t)q0 * T, T);
            for (int t = q0; t < q1; t++) {
                float *p = P + (size_t)t * T, mx = -INFINITY;
                for (int j = 0; j <= t; j++) mx = p[j] > mx ? p[j] : mx;
                float s = 0.0f;
                for (int j = 0; j <= t; j++) { p[j] = expf(p[j] - mx); s += p[j]; }
                float inv = 1.0f / s;
                for (int j = 0; j <= t; j++) p[j] *= inv;
                for (int j = t + 1; j < T; j++) p[j] = 0.0f;
            }
            const float *pp = P + (size_t)q0 * T;
            if (dropping) {
                dropped_rows(pd, P, bh, q0, q1, T, drop, layer);
                pp = pd;
            }
            dt_gemm_serial(0, 0, q1 - q0, HS, q1, 1.0f, pp, T, V, C3, 0.0f, O + (size_t)q0 * C, C);
        }
    }
    free(pd);
    }
}

/* dS = P * (dP - rowsum(P * dP)) * scale for row t, in place over dP, masked beyond t. */
static void softmax_bwd_row(float *dp, const float *p, int t, int T, float scale) {
    float dot = 0.0f;
    /* dp holds the gradient of the dropped probabilities when dropout is on; the caller
     * has already multiplied it by the mask factors. */
    for (int j = 0; j <= t; j++) dot += p[j] * dp[j];
    for (int j = 0; j <= t; j++) dp[j] = p[j] * (dp[j] - dot) * scale;
    for (int j = t + 1; j < T; j++) dp[j] = 0.0f;
}

void dt_attention_bwd_det(float *dqkv, const float *dout, const float *qkv, const float *att,
                          int B, int T, int C, int NH, const dt_dropout *drop, uint32_t layer) {
    int HS = C / NH, C3 = 3 * C, dropping = dt_dropout_on(drop);
    float scale = 1.0f / sqrtf((float)HS);
#pragma omp parallel
    {
        float *dS = malloc(sizeof(float) * (size_t)T * T);
        float *Pd = dropping ? malloc(sizeof(float) * (size_t)T * T) : NULL;
        /* Fixed order: one task owns head (b,h) and every dQ/dK/dV row of it; each row is
         * reduced by one serial GEMM. */
#pragma omp for schedule(static)
        for (int bh = 0; bh < B * NH; bh++) {
            int b = bh / NH, h = bh % NH;
            size_t base = (size_t)b * T * C3 + (size_t)h * HS;
            const float *Q = qkv + base, *K = Q + C, *V = Q + 2 * C;
            float *dQ = dqkv + base, *dK = dQ + C, *dV = dQ + 2 * C;
            const float *P = att + (size_t)bh * T * T;
            const float *dO = dout + (size_t)b * T * C + (size_t)h * HS;
            const float *Pv = P; /* the probabilities that multiplied V */
            if (dropping) {
                dropped_rows(Pd, P, bh, 0, T, T, drop, layer);
                Pv = Pd;
            }
            for (int q0 = 0; q0 < T; q0 += QBLK) {
                int q1 = q0 + QBLK < T ? q0 + QBLK : T;
                dt_gemm_serial(0, 1, q1 - q0, q1, HS, 1.0f, dO + (size_t)q0 * C, C, V, C3, 0.0f,
                               dS + (size_t)q0 * T, T);
                for (int t = q0; t < q1; t++) {
                    if (dropping)
                        for (int j = 0; j <= t; j++)
                            dS[(size_t)t * T + j] *= dt_dropout_factor(drop, DT_RNG_DROPOUT_ATTN, layer,
                                                                       ((size_t)bh * T + t) * T + j);
                    softmax_bwd_row(dS + (size_t)t * T, P + (size_t)t * T, t, T, scale);
                }
                dt_gemm_serial(0, 0, q1 - q0, HS, q1, 1.0f, dS + (size_t)q0 * T, T, K, C3, 0.0f,
                               dQ + (size_t)q0 * C3, C3);
            }
            for (int k0 = 0; k0 < T; k0 += QBLK) {
                int k1 = k0 + QBLK < T ? k0 + QBLK : T;
                /* keys k0..k1-1 are seen by queries k0..T-1 only */
                dt_gemm_serial(1, 0, k1 - k0, HS, T - k0, 1.0f, dS + (size_t)k0 * T + k0, T,
                               Q + (size_t)k0 * C3, C3, 0.0f, dK + (size_t)k0 * C3, C3);
                dt_gemm_serial(1, 0, k1 - k0, HS, T - k0, 1.0f, Pv + (size_t)k0 * T + k0, T,
                               dO + (size_t)k0 * C, C, 0.0f, dV + (size_t)k0 * C3, C3);
            }
        }
        free(dS);
        free(Pd);
    }
}

void dt_attention_bwd_keyblocks(float *dqkv, const float *dout, const float *qkv,
                                const float *att, const float *out, int B, int T, int C, int NH,
                                const dt_dropout *drop, uint32_t layer) {
    int HS = C / NH, C3 = 3 * C, nkb = (T + QBLK - 1) / QBLK, dropping = dt_dropout_on(drop);
    float scale = 1.0f / sqrtf((float)HS);
    float *D = malloc(sizeof(float) * (size_t)B * NH * T);
    /* D[q] = rowsum(P * dP)[q] = dO[q] . O[q] (also with dropout: O = dropout(P) V) */
#pragma omp parallel for schedule(static)
    for (int r = 0; r < B * NH * T; r++) {
        int bh = r / T, t = r % T, b = bh / NH, h = bh % NH;
        const float *o = out + ((size_t)b * T + t) * C + (size_t)h * HS;
        const float *d = dout + ((size_t)b * T + t) * C + (size_t)h * HS;
        float s = 0.0f;
        for (int i = 0; i < HS; i++) s += o[i] * d[i];
        D[r] = s;
    }
    /* dQ is accumulated across key blocks: clear it first. */
#pragma omp parallel for schedule(static)
    for (int bt = 0; bt < B * T; bt++) memset(dqkv + (size_t)bt * C3, 0, sizeof(float) * (size_t)C);
#pragma omp parallel
    {
        float *dS = malloc(sizeof(float) * (size_t)T * QBLK), *dq = malloc(sizeof(float) * (size_t)T * HS);
        float *pd = dropping ? malloc(sizeof(float) * (size_t)T * QBLK) : NULL;
#pragma omp for schedule(dynamic, 1)
        for (int task = 0; task < B * NH * nkb; task++) {
            int bh = task / nkb, kb = task % nkb, b = bh / NH, h = bh % NH;
            int k0 = kb * QBLK, k1 = k0 + QBLK < T ? k0 + QBLK : T, kw = k1 - k0, nq = T - k0;
            size_t base = (size_t)b * T * C3 + (size_t)h * HS;
            const float *Q = qkv + base, *K = Q + C, *V = Q + 2 * C;
            float *dQ = dqkv + base, *dK = dQ + C, *dV = dQ + 2 * C;
            const float *P = att + (size_t)bh * T * T;
            const float *dO = dout + (size_t)b * T * C + (size_t)h * HS;
            /* dP block: queries k0..T-1 against keys k0..k1-1 */
            dt_gemm_serial(0, 1, nq, kw, HS, 1.0f, dO + (size_t)k0 * C, C, V + (size_t)k0 * C3, C3,
                           0.0f, dS, kw);
            for (int i = 0; i < nq; i++) {
                int t = k0 + i;
                const float *p = P + (size_t)t * T + k0;
                float *ds = dS + (size_t)i * kw, dd = D[(size_t)bh * T + t];
                for (int j = 0; j < kw; j++) {
                    float f = dropping ? dt_dropout_factor(drop, DT_RNG_DROPOUT_ATTN, layer,
                                                           ((size_t)bh * T + t) * T + k0 + j) : 1.0f;
                    if (dropping) pd[(size_t)i * kw + j] = (k0 + j <= t) ? p[j] * f : 0.0f;
                    ds[j] = (k0 + j <= t) ? p[j] * (ds[j] * f - dd) * scale : 0.0f;
                }
            }
            if (dropping)
                dt_gemm_serial(1, 0, kw, HS, nq, 1.0f, pd, kw, dO + (size_t)k0 * C, C, 0.0f,
                               dV + (size_t)k0 * C3, C3);
            else
                dt_gemm_serial(1, 0, kw, HS, nq, 1.0f, P + (size_t)k0 * T + k0, T, dO + (size_t)k0 * C,
                               C, 0.0f, dV + (size_t)k0 * C3, C3);
            dt_gemm_serial(1, 0, kw, HS, nq, 1.0f, dS, kw, Q + (size_t)k0 * C3, C3, 0.0f,
                           dK + (size_t)k0 * C3, C3);
            dt_gemm_serial(0, 0, nq, HS, kw, 1.0f, dS, kw, K + (size_t)k0 * C3, C3, 0.0f, dq, HS);
            /* Unordered: key blocks add into the same dQ rows in the order they finish. */
            for (int i = 0; i < nq; i++)
                for (int j = 0; j < HS; j++) {
#pragma omp atomic
                    dQ[(size_t)(k0 + i) * C3 + j] += dq[(size_t)i * HS + j];
                }
        }
        free(dS);
        free(dq);
        free(pd);
    }
    free(D);
}

void dt_attention_bwd_fast(float *dqkv, const float *dout, const float *qkv, const float *att,
                           const float *out, int B, int T, int C, int NH,
                           const dt_dropout *drop, uint32_t layer) {
    if (dt_attention_fast_cpu(B, NH) == DT_ATTENTION_KEYBLOCKS)
        dt_attention_bwd_keyblocks(dqkv, dout, qkv, att, out, B, T, C, NH, drop, layer);
    else
        dt_attention_bwd_det(dqkv, dout, qkv, att, B, T, C, NH, drop, layer);
}

void dt_attention_bwd(float *dqkv, const float *dout, const float *qkv, const float *att,
                      const float *out, int B, int T, int C, int NH,
                      const dt_dropout *drop, uint32_t layer) {
    if (dt_attention_choose(B, T, C, NH, drop, DT_ATTENTION_ON_CPU, DT_ATTENTION_HEADS) == DT_ATTENTION_KEYBLOCKS)
        dt_attention_bwd_keyblocks(dqkv, dout, qkv, att, out, B, T, C, NH, drop, layer);
    else
        dt_attention_bwd_det(dqkv, dout, qkv, att, B, T, C, NH, drop, layer);
}
