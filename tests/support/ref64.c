/* fp64 reference ops and GPT forward (see ref64.h). */
#include "ref64.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void *xcalloc(size_t n, size_t sz) {
    void *p = calloc(n ? n : 1, sz);
    if (!p) abort();
    return p;
}

void ref64_gemm(int ta, int tb, int M, int N, int K, double alpha, const double *A, int lda,
                const double *B, int ldb, double beta, double *C) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0.0;
            for (int k = 0; k < K; k++) {
                double a = ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k];
                double b = tb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j];
                s += a * b;
            }
            C[(size_t)i * N + j] = alpha * s + beta * C[(size_t)i * N + j];
        }
}

void ref64_encoder_fwd(double *out, const int *inp, const double *wte, const double *wpe,
                       int B, int T, int C) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int c = 0; c < C; c++)
                out[((size_t)b * T + t) * C + c] =
                    wte[(size_t)inp[b * T + t] * C + c] + wpe[(size_t)t * C + c];
}

void ref64_encoder_bwd(double *dwte, double *dwpe, const double *dout, const int *inp, int B,
                       int T, int C) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int c = 0; c < C; c++) {
                double d = dout[((size_t)b * T + t) * C + c];
                dwte[(size_t)inp[b * T + t] * C + c] += d;
                dwpe[(size_t)t * C + c] += d;
            }
}

static void ln_stats(const double *x, int C, double *m, double *r) {
    double s = 0.0, v = 0.0;
    for (int c = 0; c < C; c++) s += x[c];
    *m = s / C;
    for (int c = 0; c < C; c++) v += (x[c] - *m) * (x[c] - *m);
    *r = 1.0 / sqrt(v / C + 1e-5);
}

void ref64_layernorm_fwd(double *out, double *mean, double *rstd, const double *inp,
                         const double *w, const double *b, int N, int C) {
    for (int i = 0; i < N; i++) {
        const double *x = inp + (size_t)i * C;
        double m, r;
        ln_stats(x, C, &m, &r);
        for (int c = 0; c < C; c++) out[(size_t)i * C + c] = (x[c] - m) * r * w[c] + b[c];
        if (mean) mean[i] = m;
        if (rstd) rstd[i] = r;
    }
}

void ref64_layernorm_bwd(double *dinp, double *dw, double *db, const double *dout,
                         const double *inp, const double *w, int N, int C) {
    for (int i = 0; i < N; i++) {
        const double *x = inp + (size_t)i * C, *dy = dout + (size_t)i * C;
        double m, r, a = 0.0, bsum = 0.0;
        ln_stats(x, C, &m, &r);
        /* y = xhat w + b, xhat = (x - m) r: dx = r (g - mean(g) - xhat mean(g xhat)), g = w dy */
        for (int c = 0; c < C; c++) {
            double xh = (x[c] - m) * r, g = w[c] * dy[c];
            a += g;
            bsum += g * xh;
            dw[c] += xh * dy[c];
            db[c] += dy[c];
        }
        a /= C;
        bsum /= C;
        for (int c = 0; c < C; c++) {
            double xh = (x[c] - m) * r;
            dinp[(size_t)i * C + c] += r * (w[c] * dy[c] - a - xh * bsum);
        }
    }
}

void ref64_matmul_fwd(double *out, const double *inp, const double *w, const double *bias,
                      int N, int IC, int OC) {
    for (int i = 0; i < N; i++)
        for (int o = 0; o < OC; o++) {
            double s = bias ? bias[o] : 0.0;
            for (int k = 0; k < IC; k++) s += inp[(size_t)i * IC + k] * w[(size_t)o * IC + k];
            out[(size_t)i * OC + o] = s;
        }
}

void ref64_matmul_bwd(double *dinp, double *dw, double *db, const double *dout,
                      const double *inp, const double *w, int N, int IC, int OC) {
    for (int i = 0; i < N; i++)
        for (int k = 0; k < IC; k++) {
            double s = 0.0;
            for (int o = 0; o < OC; o++) s += dout[(size_t)i * OC + o] * w[(size_t)o * IC + k];
            dinp[(size_t)i * IC + k] = s;
        }
    for (int o = 0; o < OC; o++)
        for (int k = 0; k < IC; k++) {
            double s = 0.0;
            for (int i = 0; i < N; i++) s += dout[(size_t)i * OC + o] * inp[(size_t)i * IC + k];
            dw[(size_t)o * IC + k] += s;
        }
    if (db)
        for (int o = 0; o < OC; o++) {
            double s = 0.0;
            for (int i = 0; i < N; i++) s += dout[(size_t)i * OC + o];
            db[o] += s;
        }
}

/* Softmax probabilities P (T,T) of head (b,h), zero above the diagonal. */
static void head_probs(double *P, const double *qkv, int b, int h, int T, int C, int NH) {
    int HS = C / NH;
    double scale = 1.0 / sqrt((double)HS);
    for (int t = 0; t < T; t++) {
        const double *q = qkv + ((size_t)b * T + t) * 3 * C + (size_t)h * HS;
        double mx = -INFINITY, s = 0.0;
        for (int j = 0; j <= t; j++) {
            const double *k = qkv + ((size_t)b * T + j) * 3 * C + C + (size_t)h * HS;
            double d = 0.0;
            for (int i = 0; i < HS; i++) d += q[i] * k[i];
            P[(size_t)t * T + j] = d * scale;
            if (d * scale > mx) mx = d * scale;
        }
        for (int j = 0; j <= t; j++) {
            P[(size_t)t * T + j] = exp(P[(size_t)t * T + j] - mx);
            s += P[(size_t)t * T + j];
        }
        for (int j = 0; j < T; j++) P[(size_t)t * T + j] = j <= t ? P[(size_t)t * T + j] / s : 0.0;
    }
}

void ref64_attention_fwd(double *out, double *att, const double *qkv, const double *keep,
                         int B, int T, int C, int NH) {
    int HS = C / NH;
    double *P = xcalloc((size_t)T * T, sizeof(double));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            head_probs(P, qkv, b, h, T, C, NH);
            if (att) memcpy(att + ((size_t)b * NH + h) * T * T, P, sizeof(double) * (size_t)T * T);
            const double *M = keep ? keep + ((size_t)b * NH + h) * T * T : NULL;
            for (int t = 0; t < T; t++)
                for (int i = 0; i < HS; i++) {
                    double s = 0.0;
                    for (int j = 0; j <= t; j++)
                        s += P[(size_t)t * T + j] * (M ? M[(size_t)t * T + j] : 1.0) * qkv[((size_t)b * T + j) * 3 * C + 2 * C + (size_t)h * HS + i];
                    out[((size_t)b * T + t) * C + (size_t)h * HS + i] = s;
                }
        }
    free(P);
}

void ref64_attention_bwd(double *dqkv, const double *dout, const double *qkv,
                         const double *keep, int B, int T, int C, int NH) {
    int HS = C / NH;
    double scale = 1.0 / sqrt((double)HS);
    double *P = xcalloc((size_t)T * T, sizeof(double)), *dS = xcalloc((size_t)T * T, sizeof(double));
    memset(dqkv, 0, sizeof(double) * (size_t)B * T * 3 * C);
#define QKV(b, t, part, i) qkv[((size_t)(b) * T + (t)) * 3 * C + (size_t)(part) * C + (size_t)h * HS + (i)]
#define DQKV(b, t, part, i) dqkv[((size_t)(b) * T + (t)) * 3 * C + (size_t)(part) * C + (size_t)h * HS + (i)]
#define DOUT(b, t, i) dout[((size_t)(b) * T + (t)) * C + (size_t)h * HS + (i)]
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            head_probs(P, qkv, b, h, T, C, NH);
            const double *M = keep ? keep + ((size_t)b * NH + h) * T * T : NULL;
            for (int t = 0; t < T; t++) {
                /* dP[t,j] = keep[t,j] dO[t] . V[j]; dS = P (dP - sum_j P dP) */
                double dot = 0.0;
                for (int j = 0; j <= t; j++) {
                    double dp = 0.0;
                    for (int i = 0; i < HS; i++) dp += DOUT(b, t, i) * QKV(b, j, 2, i);
                    if (M) dp *= M[(size_t)t * T + j];
                    dS[(size_t)t * T + j] = dp;
                    dot += P[(size_t)t * T + j] * dp;
                }
                for (int j = 0; j <= t; j++)
                    dS[(size_t)t * T + j] = P[(size_t)t * T + j] * (dS[(size_t)t * T + j] - dot);
            }
            for (int t = 0; t < T; t++)
                for (int j = 0; j <= t; j++) {
                    double ds = dS[(size_t)t * T + j] * scale;
                    double p = P[(size_t)t * T + j] * (M ? M[(size_t)t * T + j] : 1.0);
                    for (int i = 0; i < HS; i++) {
                        DQKV(b, t, 0, i) += ds * QKV(b, j, 1, i);
                        DQKV(b, j, 1, i) += ds * QKV(b, t, 0, i);
                        DQKV(b, j, 2, i) += p * DOUT(b, t, i);
                    }
                }
        }
#undef QKV
#undef DQKV
#undef DOUT
    free(P);
    free(dS);
}

#define GELU_K64 0.79788456080286535588 /* sqrt(2/pi) */

void ref64_gelu_fwd(double *out, const double *inp, size_t n) {
    for (size_t i = 0; i < n; i++) {
        double x = inp[i];
        out[i] = 0.5 * x * (1.0 + tanh(GELU_K64 * (x + 0.044715 * x * x * x)));
    }
}

void ref64_gelu_bwd(double *dinp, const double *inp, const double *dout, size_t n) {
    for (size_t i = 0; i < n; i++) {
        double x = inp[i], u = GELU_K64 * (x + 0.044715 * x * x * x), th = tanh(u);
        double du = GELU_K64 * (1.0 + 3.0 * 0.044715 * x * x);
        dinp[i] = dout[i] * (0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * du);
    }
}

void ref64_crossentropy_fwd(double *losses, double *lse, const double *logits,
                            const int *targets, int N, int V, int Vp) {
    for (int i = 0; i < N; i++) {
        const double *x = logits + (size_t)i * Vp;
        double mx = -INFINITY, s = 0.0;
        for (int c = 0; c < V; c++) if (x[c] > mx) mx = x[c];
        for (int c = 0; c < V; c++) s += exp(x[c] - mx);
        double l = mx + log(s);
        if (lse) lse[i] = l;
        losses[i] = l - x[targets[i]];
    }
}

void ref64_crossentropy_bwd(double *dlogits, const double *logits, const int *targets,
                            double dloss, int N, int V, int Vp) {
    double *lse = xcalloc((size_t)N, sizeof(double)), *loss = xcalloc((size_t)N, sizeof(double));
    ref64_crossentropy_fwd(loss, lse, logits, targets, N, V, Vp);
    for (int i = 0; i < N; i++) {
        for (int c = 0; c < Vp; c++)
            dlogits[(size_t)i * Vp + c] = c < V ? exp(logits[(size_t)i * Vp + c] - lse[i]) * dloss : 0.0;
        dlogits[(size_t)i * Vp + targets[i]] -= dloss;
    }
    free(lse);
    free(loss);
}

/* One MoE layer (ops/moe/moe.h) per token, without a dispatch buffer: out (N,C); returns
 * the layer's aux loss. The capacity rank of (t,k) is the count of assignments to its
 * expert that precede it in (k, t) order. */
static double ref64_moe_fwd(double *out, const double *x, const double *wr, const double *w1, const double *b1,
                            const double *w2, const double *b2, int N, int C, int E, int K, int cap,
                            double coeff) {
    int F = 4 * C;
    double *p = xcalloc((size_t)N * E, sizeof(double)), *h = xcalloc((size_t)F, sizeof(double));
    int *ex = xcalloc((size_t)N * K, sizeof(int)), *count = xcalloc((size_t)E, sizeof(int));
    int *seen = xcalloc((size_t)E, sizeof(int));
    for (int t = 0; t < N; t++) {
        double *pt = p + (size_t)t * E, mx = -INFINITY, s = 0.0;
        for (int e = 0; e < E; e++) {
            double z = 0.0;
            for (int c = 0; c < C; c++) z += wr[(size_t)e * C + c] * x[(size_t)t * C + c];
            pt[e] = z;
            if (z > mx) mx = z;
        }
        for (int e = 0; e < E; e++) s += (pt[e] = exp(pt[e] - mx));
        for (int e = 0; e < E; e++) pt[e] /= s;
        for (int e = 0; e < E; e++) { /* rank in (p desc, index asc) */
            int rank = 0;
            for (int j = 0; j < E; j++) rank += pt[j] > pt[e] || (pt[j] == pt[e] && j < e);
            if (rank < K) ex[(size_t)t * K + rank] = e;
        }
    }
    for (size_t i = 0; i < (size_t)N * K; i++) count[ex[i]]++;
    memset(out, 0, sizeof(double) * (size_t)N * C);
    for (int k = 0; k < K; k++)
        for (int t = 0; t < N; t++) {
            int e = ex[(size_t)t * K + k];
            if (cap > 0 && seen[e]++ >= cap) continue; /* dropped */
            const double *xt = x + (size_t)t * C;
            for (int f = 0; f < F; f++) {
                double a = b1[(size_t)e * F + f];
                for (int c = 0; c < C; c++) a += w1[((size_t)e * F + f) * C + c] * xt[c];
                h[f] = a;
            }
            ref64_gelu_fwd(h, h, (size_t)F);
            double g = p[(size_t)t * E + e];
            for (int c = 0; c < C; c++) {
                double y = b2[(size_t)e * C + c];
                for (int f = 0; f < F; f++) y += w2[((size_t)e * C + c) * F + f] * h[f];
                out[(size_t)t * C + c] += g * y;
            }
        }
    double aux = 0.0;
    for (int e = 0; e < E; e++) {
        double P = 0.0;
        for (int t = 0; t < N; t++) P += p[(size_t)t * E + e];
        aux += ((double)count[e] / ((double)N * K)) * (P / N);
    }
    free(p); free(h); free(ex); free(count); free(seen);
    return coeff * E * aux;
}

double ref64_gpt_loss(const dt_gpt_config *cfg, const double *params, const int *inputs,
                      const int *targets, int B, int T) {
    return ref64_gpt_objective(cfg, params, inputs, targets, B, T, 0.0, 0.0, NULL);
}

double ref64_gpt_objective(const dt_gpt_config *cfg, const double *params, const int *inputs, const int *targets,
                           int B, int T, double coeff, double cap_factor, double *aux_out) {
    dt_param_desc d[DT_NUM_PARAM_TENSORS];
    dt_gpt_param_table(cfg, d);
    int C = cfg->channels, NH = cfg->num_heads, L = cfg->num_layers, V = cfg->vocab_size;
    int Vp = cfg->padded_vocab, BT = B * T;
    size_t sc = (size_t)BT * C;
#define W(i) (params + d[i].offset)
    double *res = xcalloc(sc, sizeof(double)), *ln = xcalloc(sc, sizeof(double));
    double *qkv = xcalloc(3 * sc, sizeof(double)), *y = xcalloc(sc, sizeof(double));
    double *proj = xcalloc(sc, sizeof(double)), *fc = xcalloc(4 * sc, sizeof(double));
    double *fcg = xcalloc(4 * sc, sizeof(double));
    double *logits = xcalloc((size_t)BT * Vp, sizeof(double)), *losses = xcalloc((size_t)BT, sizeof(double));
    ref64_encoder_fwd(res, inputs, W(DT_P_WTE), W(DT_P_WPE), B, T, C);
    double aux = 0.0;
    int E = cfg->num_experts, K = cfg->moe_topk, cap = 0;
    if (cap_factor > 0 && E > 0) {
        cap = (int)ceil(cap_factor * BT * K / E);
        if (cap > BT) cap = BT;
    }
    for (int l = 0; l < L; l++) {
        size_t lC = (size_t)l * C, mC = (size_t)dt_gpt_mlp_index(cfg, l) * C;
        ref64_layernorm_fwd(ln, NULL, NULL, res, W(DT_P_LN1W) + lC, W(DT_P_LN1B) + lC, BT, C);
        ref64_matmul_fwd(qkv, ln, W(DT_P_QKVW) + lC * 3 * C, W(DT_P_QKVB) + lC * 3, BT, C, 3 * C);
        ref64_attention_fwd(y, NULL, qkv, NULL, B, T, C, NH);
        ref64_matmul_fwd(proj, y, W(DT_P_ATTPROJW) + lC * C, W(DT_P_ATTPROJB) + lC, BT, C, C);
        for (size_t i = 0; i < sc; i++) res[i] += proj[i];
        ref64_layernorm_fwd(ln, NULL, NULL, res, W(DT_P_LN2W) + lC, W(DT_P_LN2B) + lC, BT, C);
        if (dt_gpt_is_moe(cfg, l)) {
            size_t eC = (size_t)E * mC; /* the MoE layer's slice: index * E * C */
            aux += ref64_moe_fwd(proj, ln, W(DT_P_MOE_WR) + eC, W(DT_P_MOE_W1) + eC * 4 * C, W(DT_P_MOE_B1) + eC * 4,
                                 W(DT_P_MOE_W2) + eC * 4 * C, W(DT_P_MOE_B2) + eC, BT, C, E, K, cap, coeff);
        } else {
            ref64_matmul_fwd(fc, ln, W(DT_P_FCW) + mC * 4 * C, W(DT_P_FCB) + mC * 4, BT, C, 4 * C);
            ref64_gelu_fwd(fcg, fc, 4 * sc);
            ref64_matmul_fwd(proj, fcg, W(DT_P_FCPROJW) + mC * 4 * C, W(DT_P_FCPROJB) + mC, BT, 4 * C, C);
        }
        for (size_t i = 0; i < sc; i++) res[i] += proj[i];
    }
    ref64_layernorm_fwd(ln, NULL, NULL, res, W(DT_P_LNFW), W(DT_P_LNFB), BT, C);
    ref64_matmul_fwd(logits, ln, W(DT_P_WTE), NULL, BT, C, Vp);
    ref64_crossentropy_fwd(losses, NULL, logits, targets, BT, V, Vp);
#undef W
    double s = 0.0;
    for (int i = 0; i < BT; i++) s += losses[i];
    free(res); free(ln); free(qkv); free(y); free(proj); free(fc); free(fcg); free(logits); free(losses);
    if (aux_out) *aux_out = aux;
    return s / BT + aux;
}
