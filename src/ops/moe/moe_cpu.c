/* CPU MoE MLP, fp32 (see moe.h for the math and each path's determinism class). */
#include "ops/moe/moe.h"

#include "ops/gelu/gelu.h"
#include "ops/gemm/gemm.h"
#include "ops/gemm/matmul.h"

#include <math.h>
#include <string.h>

int dt_moe_capacity(double factor, int N, int K, int E) {
    if (!(factor > 0.0) || E < 1) return 0;
    double cap = ceil(factor * (double)N * (double)K / (double)E);
    return cap > (double)N ? N : (int)cap; /* an expert takes at most one row per token */
}

dt_status dt_moe_dims_check(const dt_moe_dims *d) {
    if (d->N < 1 || d->C < 1 || d->F < 1)
        return dt_fail(DT_EINVAL, "MoE layer: tokens %d, channels %d, hidden %d must be >= 1", d->N, d->C, d->F);
    if (d->E < 1 || d->E > DT_MOE_MAX_EXPERTS)
        return dt_fail(DT_EINVAL, "MoE layer: %d experts; must be in 1..%d", d->E, DT_MOE_MAX_EXPERTS);
    if (d->K < 1 || d->K > d->E)
        return dt_fail(DT_EINVAL, "MoE layer: top-%d of %d experts; K must be in 1..E", d->K, d->E);
    if (d->cap < 0) return dt_fail(DT_EINVAL, "MoE layer: capacity %d must be >= 0", d->cap);
    if ((int64_t)d->N * d->K > INT32_MAX / 2)
        return dt_fail(DT_EINVAL, "MoE layer: %d tokens x top-%d assignments exceed the int32 routing index",
                       d->N, d->K);
    return DT_OK;
}

dt_moe_sizes dt_moe_sizes_of(const dt_moe_dims *d) {
    size_t N = (size_t)d->N, NK = N * (size_t)d->K, C = (size_t)d->C, F = (size_t)d->F, E = (size_t)d->E;
    dt_moe_sizes s;
    s.act_floats = N * E + NK + 2 * NK * C + 2 * NK * F;
    s.act_ints = 3 * NK + (E + 1) + E;
    s.scratch_floats = 2 * NK * C + 2 * NK * F + NK + N * E;
    return s;
}

void dt_moe_acts_bind(dt_moe_acts *a, float *f, int32_t *i, const dt_moe_dims *d) {
    size_t N = (size_t)d->N, NK = N * (size_t)d->K, C = (size_t)d->C, F = (size_t)d->F, E = (size_t)d->E;
    memset(a, 0, sizeof *a);
    a->route.probs = f; f += N * E;
    a->route.gate = f;  f += NK;
    a->xp = f;          f += NK * C;
    a->h = f;           f += NK * F;
    a->a = f;           f += NK * F;
    a->yp = f;
    a->route.expert = i;  i += NK;
    a->route.row = i;     i += NK;
    a->route.token = i;   i += NK;
    a->route.offsets = i; i += E + 1;
    a->route.counts = i;
}

void dt_moe_scratch_bind(dt_moe_scratch *s, float *f, const dt_moe_dims *d) {
    size_t N = (size_t)d->N, NK = N * (size_t)d->K, C = (size_t)d->C, F = (size_t)d->F;
    s->dyp = f;   f += NK * C;
    s->da = f;    f += NK * F;
    s->dh = f;    f += NK * F;
    s->dxp = f;   f += NK * C;
    s->dgate = f; f += NK;
    s->dz = f;
}

/* ---- forward ----------------------------------------------------------------------- */

/* Each row's softmax belongs to one thread, which sums in expert order: no reduction is
 * shared between threads. */
void dt_moe_router_fwd(float *probs, const float *x, const float *wr, int N, int C, int E) {
    dt_matmul_fwd(probs, x, wr, NULL, N, C, E);
#pragma omp parallel for schedule(static)
    for (int t = 0; t < N; t++) {
        float *p = probs + (size_t)t * E;
        float mx = p[0];
        for (int e = 1; e < E; e++) mx = p[e] > mx ? p[e] : mx;
        float s = 0.0f;
        for (int e = 0; e < E; e++) { p[e] = expf(p[e] - mx); s += p[e]; }
        float inv = 1.0f / s;
        for (int e = 0; e < E; e++) p[e] *= inv;
    }
}

/* K passes per row, each taking the largest unchosen p; scanning experts upwards with a
 * strict `>` keeps the lowest index among equal values: the total order (value desc,
 * index asc). */
void dt_moe_topk(int32_t *expert, float *gate, const float *probs, int N, int E, int K) {
#pragma omp parallel for schedule(static)
    for (int t = 0; t < N; t++) {
        const float *p = probs + (size_t)t * E;
        int32_t *ex = expert + (size_t)t * K;
        for (int k = 0; k < K; k++) {
            int best = -1;
            for (int e = 0; e < E; e++) {
                int taken = 0;
                for (int j = 0; j < k && !taken; j++) taken = ex[j] == e;
                if (!taken && (best < 0 || p[e] > p[best])) best = e;
            }
            ex[k] = best;
            gate[(size_t)t * K + k] = p[best];
        }
    }
}

/* One thread, in fixed orders: the capacity ranks by (k, t), then a stable counting sort
 * of the kept assignments by (expert, token) (a token's K experts are distinct, so k never
 * breaks a tie). offsets[1..E] first hold the kept counts, then the prefix sums; during the
 * placement offsets[e] runs as expert e's next free row and is shifted back after. */
void dt_moe_route_plan(dt_moe_route *r, const dt_moe_dims *d) {
    int N = d->N, K = d->K, E = d->E, cap = d->cap;
    int32_t *off = r->offsets;
    memset(r->counts, 0, sizeof(int32_t) * (size_t)E);
    memset(off, 0, sizeof(int32_t) * (size_t)(E + 1));
    int dropped = 0;
    for (int k = 0; k < K; k++)
        for (int t = 0; t < N; t++) {
            size_t i = (size_t)t * K + k;
            int e = r->expert[i];
            r->counts[e]++;
            if (cap > 0 && off[e + 1] >= cap) {
                r->row[i] = -1;
                dropped++;
            } else {
                off[e + 1]++;
                r->row[i] = 0; /* kept; its row is placed below */
            }
        }
    for (int e = 0; e < E; e++) off[e + 1] += off[e];
    for (int t = 0; t < N; t++)
        for (int k = 0; k < K; k++) {
            size_t i = (size_t)t * K + k;
            if (r->row[i] < 0) continue;
            int32_t row = off[r->expert[i]]++;
            r->row[i] = row;
            r->token[row] = t;
        }
    for (int e = E; e > 0; e--) off[e] = off[e - 1];
    off[0] = 0;
    r->rows = off[E];
    r->dropped = dropped;
}

void dt_moe_dispatch(float *xp, const float *x, const int32_t *token, int R, int C) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < R; i++) memcpy(xp + (size_t)i * C, x + (size_t)token[i] * C, sizeof(float) * (size_t)C);
}

/* One linear layer per non-empty group (the gemm family's path); empty groups are skipped. */
void dt_moe_experts_fwd(float *h, float *a, float *yp, const float *xp, const dt_moe_params *p,
                        const int32_t *offsets, const dt_moe_dims *d) {
    size_t C = (size_t)d->C, F = (size_t)d->F;
    for (int e = 0; e < d->E; e++) {
        int n = offsets[e + 1] - offsets[e];
        size_t o = (size_t)offsets[e];
        if (n > 0) dt_matmul_fwd(h + o * F, xp + o * C, p->w1 + (size_t)e * F * C, p->b1 + (size_t)e * F, n, d->C, d->F);
    }
    dt_gelu_fwd(a, h, (size_t)offsets[d->E] * F);
    for (int e = 0; e < d->E; e++) {
        int n = offsets[e + 1] - offsets[e];
        size_t o = (size_t)offsets[e];
        if (n > 0) dt_matmul_fwd(yp + o * C, a + o * F, p->w2 + (size_t)e * C * F, p->b2 + (size_t)e * C, n, d->F, d->C);
    }
}

/* Deterministic: token t's slot is written by t's thread alone, which adds its K rows in
 * k order (index-ordered gather). */
void dt_moe_combine_det(float *out, const float *yp, const int32_t *row, const float *gate, int N, int K,
                        int C, int accumulate) {
#pragma omp parallel for schedule(static)
    for (int t = 0; t < N; t++) {
        float *o = out + (size_t)t * C;
        if (!accumulate) memset(o, 0, sizeof(float) * (size_t)C);
        for (int k = 0; k < K; k++) {
            int32_t r = row[(size_t)t * K + k];
            if (r < 0) continue;
            float g = gate ? gate[(size_t)t * K + k] : 1.0f;
            const float *y = yp + (size_t)r * C;
            for (int c = 0; c < C; c++) o[c] += g * y[c];
        }
    }
}

/* Default: the dispatched rows in parallel, each scattered into its token's slot with
 * atomic adds: a token's K terms land in arrival order. */
void dt_moe_combine_fast(float *out, const float *yp, const int32_t *row, const float *gate,
                         const int32_t *token, const int32_t *offsets, int N, int K, int E, int C,
                         int accumulate) {
    if (!accumulate) memset(out, 0, sizeof(float) * (size_t)N * (size_t)C);
    int R = offsets[E];
#pragma omp parallel for schedule(static)
    for (int i = 0; i < R; i++) {
        int t = token[i], k = 0;
        while (k < K - 1 && row[(size_t)t * K + k] != i) k++;
        float g = gate ? gate[(size_t)t * K + k] : 1.0f;
        const float *y = yp + (size_t)i * C;
        float *o = out + (size_t)t * C;
        for (int c = 0; c < C; c++) {
#pragma omp atomic
            o[c] += g * y[c];
        }
    }
}

void dt_moe_combine(float *out, const float *yp, const dt_moe_route *r, const float *gate, const dt_moe_dims *d,
                    int accumulate) {
    if (dt_moe_choose(DT_OP_MOE_COMBINE) == DT_MOE_DET)
        dt_moe_combine_det(out, yp, r->row, gate, d->N, d->K, d->C, accumulate);
    else
        dt_moe_combine_fast(out, yp, r->row, gate, r->token, r->offsets, d->N, d->K, d->E, d->C, accumulate);
}

/* One thread, tokens in index order for each expert, in double: a fixed order. */
double dt_moe_aux_loss(const float *probs, const int32_t *counts, const dt_moe_dims *d, float coeff) {
    double P[DT_MOE_MAX_EXPERTS] = {0};
    int N = d->N, E = d->E;
    for (int t = 0; t < N; t++)
        for (int e = 0; e < E; e++) P[e] += (double)probs[(size_t)t * E + e];
    double s = 0.0, NK = (double)N * (double)d->K;
    for (int e = 0; e < E; e++) s += ((double)counts[e] / NK) * (P[e] / (double)N);
    return (double)coeff * (double)E * s;
}

/* ---- backward ---------------------------------------------------------------------- */

void dt_moe_combine_bwd(float *dyp, const float *dout, const dt_moe_route *r, const dt_moe_dims *d) {
    int N = d->N, K = d->K, C = d->C;
#pragma omp parallel for schedule(static)
    for (int t = 0; t < N; t++)
        for (int k = 0; k < K; k++) {
            int32_t row = r->row[(size_t)t * K + k];
            if (row < 0) continue;
            float g = r->gate[(size_t)t * K + k];
            const float *go = dout + (size_t)t * C;
            float *dy = dyp + (size_t)row * C;
            for (int c = 0; c < C; c++) dy[c] = g * go[c];
        }
}

/* Deterministic: slot (t,k) is written once, by one dot product in channel order. */
void dt_moe_dprob_det(float *dgate, const float *dout, const float *yp, const int32_t *row, int N, int K, int C) {
#pragma omp parallel for schedule(static)
    for (int t = 0; t < N; t++)
        for (int k = 0; k < K; k++) {
            int32_t r = row[(size_t)t * K + k];
            float s = 0.0f;
            if (r >= 0) {
                const float *go = dout + (size_t)t * C, *y = yp + (size_t)r * C;
                for (int c = 0; c < C; c++) s += go[c] * y[c];
            }
            dgate[(size_t)t * K + k] = s;
        }
}

/* Default: DT_MOE_DPROB_CHUNK-channel partial dots in parallel, added to the slot with
 * atomics: the partials of one slot land in arrival order. */
void dt_moe_dprob_fast(float *dgate, const float *dout, const float *yp, const int32_t *row, int N, int K, int C) {
    int nch = (C + DT_MOE_DPROB_CHUNK - 1) / DT_MOE_DPROB_CHUNK;
    int64_t slots = (int64_t)N * K, work = slots * nch;
    memset(dgate, 0, sizeof(float) * (size_t)slots);
#pragma omp parallel for schedule(static)
    for (int64_t w = 0; w < work; w++) {
        int64_t slot = w % slots;
        int ch = (int)(w / slots);
        int32_t r = row[slot];
        if (r < 0) continue;
        int t = (int)(slot / K), c0 = ch * DT_MOE_DPROB_CHUNK;
        int c1 = c0 + DT_MOE_DPROB_CHUNK < C ? c0 + DT_MOE_DPROB_CHUNK : C;
        const float *go = dout + (size_t)t * C, *y = yp + (size_t)r * C;
        float s = 0.0f;
        for (int c = c0; c < c1; c++) s += go[c] * y[c];
#pragma omp atomic
        dgate[slot] += s;
    }
}

void dt_moe_dprob(float *dgate, const float *dout, const float *yp, const dt_moe_route *r, const dt_moe_dims *d) {
    if (dt_moe_choose(DT_OP_MOE_DPROB) == DT_MOE_DET) dt_moe_dprob_det(dgate, dout, yp, r->row, d->N, d->K, d->C);
    else dt_moe_dprob_fast(dgate, dout, yp, r->row, d->N, d->K, d->C);
}

/* Per non-empty group, the linear layers' backward (dt_matmul_bwd: the gemm family for
 * the input and weight gradients, the reduce family for the bias's column sum), each over
 * that group's rows only: expert e's weight gradient has no other writer. */
void dt_moe_experts_bwd(float *dxp, float *da, float *dh, const dt_moe_grads *g, const float *dyp,
                        const float *xp, const float *h, const float *a, const dt_moe_params *p,
                        const int32_t *offsets, const dt_moe_dims *d) {
    size_t C = (size_t)d->C, F = (size_t)d->F;
    for (int e = 0; e < d->E; e++) {
        int n = offsets[e + 1] - offsets[e];
        size_t o = (size_t)offsets[e];
        if (n > 0)
            dt_matmul_bwd(da + o * F, g->w2 + (size_t)e * C * F, g->b2 + (size_t)e * C, dyp + o * C, a + o * F,
                          p->w2 + (size_t)e * C * F, n, d->F, d->C);
    }
    dt_gelu_bwd(dh, h, da, (size_t)offsets[d->E] * F);
    for (int e = 0; e < d->E; e++) {
        int n = offsets[e + 1] - offsets[e];
        size_t o = (size_t)offsets[e];
        if (n > 0)
            dt_matmul_bwd(dxp + o * C, g->w1 + (size_t)e * F * C, g->b1 + (size_t)e * F, dh + o * F, xp + o * C,
                          p->w1 + (size_t)e * F * C, n, d->C, d->F);
    }
}

/* Row t of dz belongs to t's thread: dp starts from the aux term, gains the K gate
 * gradients (one per expert: a token's experts are distinct), and <dp, p> sums in expert
 * order. */
void dt_moe_router_dz(float *dz, const float *dgate, const dt_moe_route *r, const dt_moe_dims *d, float coeff,
                      float daux) {
    int N = d->N, K = d->K, E = d->E;
    float aux[DT_MOE_MAX_EXPERTS];
    double NKN = (double)N * (double)K * (double)N;
    for (int e = 0; e < E; e++) aux[e] = (float)((double)daux * (double)coeff * (double)E * (double)r->counts[e] / NKN);
#pragma omp parallel for schedule(static)
    for (int t = 0; t < N; t++) {
        float *dp = dz + (size_t)t * E;
        const float *p = r->probs + (size_t)t * E;
        for (int e = 0; e < E; e++) dp[e] = aux[e];
        for (int k = 0; k < K; k++) dp[r->expert[(size_t)t * K + k]] += dgate[(size_t)t * K + k];
        float dot = 0.0f;
        for (int e = 0; e < E; e++) dot += dp[e] * p[e];
        for (int e = 0; e < E; e++) dp[e] = p[e] * (dp[e] - dot);
    }
}

void dt_moe_router_bwd(float *dx, float *dwr, const float *dz, const float *x, const float *wr, const dt_moe_dims *d) {
    dt_gemm(0, 0, d->N, d->C, d->E, 1.0f, dz, d->E, wr, d->C, 1.0f, dx, d->C);
    dt_gemm(1, 0, d->E, d->C, d->N, 1.0f, dz, d->E, x, d->C, 1.0f, dwr, d->C);
}

/* ---- the block --------------------------------------------------------------------- */

void dt_moe_block_fwd(float *out, double *aux, dt_moe_acts *a, const float *x, const dt_moe_params *p,
                      const dt_moe_dims *d, float coeff) {
    dt_moe_route *r = &a->route;
    dt_moe_router_fwd(r->probs, x, p->wr, d->N, d->C, d->E);
    dt_moe_topk(r->expert, r->gate, r->probs, d->N, d->E, d->K);
    dt_moe_route_plan(r, d);
    dt_moe_dispatch(a->xp, x, r->token, r->rows, d->C);
    dt_moe_experts_fwd(a->h, a->a, a->yp, a->xp, p, r->offsets, d);
    dt_moe_combine(out, a->yp, r, r->gate, d, 0);
    *aux = dt_moe_aux_loss(r->probs, r->counts, d, coeff);
}

void dt_moe_block_bwd(float *dx, const dt_moe_grads *g, const dt_moe_scratch *s, const dt_moe_acts *a,
                      const float *x, const float *dout, const dt_moe_params *p, const dt_moe_dims *d,
                      float coeff, float daux) {
    const dt_moe_route *r = &a->route;
    dt_moe_combine_bwd(s->dyp, dout, r, d);
    dt_moe_dprob(s->dgate, dout, a->yp, r, d);
    dt_moe_experts_bwd(s->dxp, s->da, s->dh, g, s->dyp, a->xp, a->h, a->a, p, r->offsets, d);
    dt_moe_combine(dx, s->dxp, r, NULL, d, 0);
    dt_moe_router_dz(s->dz, s->dgate, r, d, coeff, daux);
    dt_moe_router_bwd(dx, g->wr, s->dz, x, p->wr, d);
}
