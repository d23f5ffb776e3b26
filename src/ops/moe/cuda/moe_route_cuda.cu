/* The MoE router and routing map on the GPU (moe_cuda.h): router logits, softmax and top-K;
 * the routing map's chunked counting sort (moe_cuda_plan.h); dispatch; the aux loss; the router's
 * backward and the un-dispatch of the input gradient.
 *
 * Why the det orders are fixed: every sum below is taken by one thread (or one warp's fixed
 * butterfly) over an index range fixed by the sizes; the routing map's rows come from counts
 * and ballots, integers whose values do not depend on the order threads run. */
#include "ops/moe/cuda/moe_cuda.h"

void dt_cu_moe_ws_bind(dt_cu_moe_ws *w, void *slab, const dt_cu_moe_ws_layout *l) {
    char *b = (char *)slab;
#define AT(T, i) (T *)(b + l->off[i])
    w->probs = AT(float, DT_CU_MOE_WS_PROBS);
    w->tope = AT(int, DT_CU_MOE_WS_TOPE);
    w->topg = AT(float, DT_CU_MOE_WS_TOPG);
    w->cnt = AT(int, DT_CU_MOE_WS_CNT);
    w->kept = AT(int, DT_CU_MOE_WS_KEPT);
    w->posb = AT(int, DT_CU_MOE_WS_POSB);
    w->meta = AT(int, DT_CU_MOE_WS_META);
    w->rowof = AT(int, DT_CU_MOE_WS_ROWOF);
    w->src = AT(int, DT_CU_MOE_WS_SRC);
    w->xp = AT(bf16, DT_CU_MOE_WS_XP);
    w->h = AT(bf16, DT_CU_MOE_WS_H);
    w->a = AT(bf16, DT_CU_MOE_WS_A);
    w->yp = AT(bf16, DT_CU_MOE_WS_YP);
    w->part = AT(float, DT_CU_MOE_WS_PART);
    w->aux = AT(double, DT_CU_MOE_WS_AUX);
    w->dyp = AT(bf16, DT_CU_MOE_WS_DYP);
    w->dh = AT(bf16, DT_CU_MOE_WS_DH);
    w->dxp = AT(bf16, DT_CU_MOE_WS_DXP);
    w->dg = AT(float, DT_CU_MOE_WS_DG);
    w->dgpart = AT(float, DT_CU_MOE_WS_DGPART);
    w->dz = AT(float, DT_CU_MOE_WS_DZ);
    w->wrpart = AT(float, DT_CU_MOE_WS_WRPART);
    w->outacc = AT(float, DT_CU_MOE_WS_OUTACC);
#undef AT
}

/* ---- router: logits, softmax, top-K ----------------------------------------------------------
 * One warp a token: lane l takes the 8-channel groups l, l + 32, ... of each logit in order,
 * the lanes' partials added by the fixed butterfly; lane 0 then takes the softmax (max
 * subtracted, the sum in expert order, IEEE division) and the top-K by repeated selection in
 * expert order with a strict >, so a tie goes to the lower index. */
__global__ void __launch_bounds__(256) moe_router_fwd_kernel(float *probs, int *tope, float *topg, const bf16 *x,
                                                             const float *wr, dt_moe_dims d) {
    __shared__ float z[8][DT_CU_MOE_MAX_EXPERTS];
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int t = blockIdx.x * 8 + warp;
    if (t >= d.N) return;
    const bf16 *xr = x + (size_t)t * d.C;
    for (int e = 0; e < d.E; e++) {
        const float *wrow = wr + (size_t)e * d.C;
        float acc = 0.0f;
        for (int c = lane * 8; c < d.C; c += 256) {
            dt_bf16x8 xv = dt_ld8(xr + c);
            float4 w0 = *reinterpret_cast<const float4 *>(wrow + c), w1 = *reinterpret_cast<const float4 *>(wrow + c + 4);
            float wv[8] = {w0.x, w0.y, w0.z, w0.w, w1.x, w1.y, w1.z, w1.w};
#pragma unroll
            for (int q = 0; q < 8; q++) acc += __bfloat162float(xv.v[q]) * wv[q];
        }
        acc = dt_warp_sum(acc);
        if (lane == 0) z[warp][e] = acc;
    }
    __syncwarp();
    if (lane != 0) return;
    float *zz = z[warp], mx = zz[0], sum = 0.0f;
    for (int e = 1; e < d.E; e++) mx = fmaxf(mx, zz[e]);
    for (int e = 0; e < d.E; e++) {
        zz[e] = expf(zz[e] - mx);
        sum += zz[e];
    }
    for (int e = 0; e < d.E; e++) {
        zz[e] = zz[e] / sum;
        probs[(size_t)t * d.E + e] = zz[e];
    }
    unsigned long long taken = 0;
    for (int k = 0; k < d.K; k++) {
        int best = -1;
        for (int e = 0; e < d.E; e++)
            if (!(taken >> e & 1ull) && (best < 0 || zz[e] > zz[best])) best = e;
        taken |= 1ull << best;
        tope[(size_t)t * d.K + k] = best;
        topg[(size_t)t * d.K + k] = zz[best];
    }
}

void dt_cu_moe_router_fwd(dt_cu_moe_ws *w, const bf16 *x, const float *wr, const dt_moe_dims *d, cudaStream_t s) {
    unsigned g = dt_cu_div((size_t)d->N, 8);
    moe_router_fwd_kernel<<<dt_cu_noted(g, 256, 0, "moe_router_fwd_kernel"), 256, 0, s>>>(w->probs, w->tope, w->topg,
                                                                                        x, wr, *d);
}

/* ---- the routing map (moe_cuda_plan.h: count, scan, place) ----------------------------------------- */
/* 1. count: block b = chunk b, one thread a token; shared integer counters (exact: their
 * values do not depend on the order of the adds). */
__global__ void __launch_bounds__(DT_CU_MOE_ROUTE_CHUNK) moe_route_count_kernel(int *cnt, const int *tope, dt_moe_dims d) {
    __shared__ int c[DT_CU_MOE_MAX_TOPK * DT_CU_MOE_MAX_EXPERTS];
    int KE = d.K * d.E;
    for (int i = threadIdx.x; i < KE; i += blockDim.x) c[i] = 0;
    __syncthreads();
    int t = blockIdx.x * DT_CU_MOE_ROUTE_CHUNK + threadIdx.x;
    if (t < d.N)
        for (int k = 0; k < d.K; k++) atomicAdd(&c[k * d.E + tope[(size_t)t * d.K + k]], 1);
    __syncthreads();
    for (int i = threadIdx.x; i < KE; i += blockDim.x) cnt[(size_t)blockIdx.x * KE + i] = c[i];
}

/* 2. scan, one block: thread (k, e) walks the chunks in order for the capacity ranks; thread
 * 0 forms R_e, offsets, tile starts and the dropped count in expert order; thread e the
 * chunks' first rows. */
__global__ void __launch_bounds__(512) moe_route_scan_kernel(int *kept, int *posb, int *meta, const int *cnt,
                                                             dt_moe_dims d, int nb) {
    __shared__ int tot[DT_CU_MOE_MAX_TOPK * DT_CU_MOE_MAX_EXPERTS], ks[DT_CU_MOE_MAX_TOPK * DT_CU_MOE_MAX_EXPERTS];
    __shared__ int offs[DT_CU_MOE_MAX_EXPERTS + 1];
    int KE = d.K * d.E;
    for (int i = threadIdx.x; i < DT_CU_MOE_META; i += blockDim.x) meta[i] = 0; /* slots past E too */
    for (int i = threadIdx.x; i < KE; i += blockDim.x) {
        int s = 0;
        for (int b = 0; b < nb; b++) s += cnt[(size_t)b * KE + i];
        tot[i] = s;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < KE; i += blockDim.x) {
        int k = i / d.E, e = i % d.E, base = 0, ksum = 0;
        for (int j = 0; j < k; j++) base += tot[j * d.E + e];
        for (int b = 0; b < nb; b++) {
            int c = cnt[(size_t)b * KE + i], room = dt_cu_moe_room(d.cap, d.N) - base;
            int kc = room <= 0 ? 0 : room < c ? room : c;
            kept[(size_t)b * KE + i] = kc;
            ksum += kc;
            base += c;
        }
        ks[i] = ksum;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        int off = 0, tiles = 0, dropped = 0;
        for (int e = 0; e < d.E; e++) {
            int total = 0, R = 0;
            for (int k = 0; k < d.K; k++) {
                total += tot[k * d.E + e];
                R += ks[k * d.E + e];
            }
            meta[DT_CU_MOE_META_TOTAL + e] = total;
            meta[DT_CU_MOE_META_KEPT + e] = R;
            meta[DT_CU_MOE_META_OFFS + e] = off;
            meta[DT_CU_MOE_META_TILES + e] = tiles;
            meta[DT_CU_MOE_META_FILL + e] = 0;
            offs[e] = off;
            off += R;
            tiles += dt_cu_moe_ceil_div(R, DT_CU_MOE_TILE_M);
            dropped += total - R;
        }
        meta[DT_CU_MOE_META_OFFS + d.E] = off;
        meta[DT_CU_MOE_META_TILES + d.E] = tiles;
        meta[DT_CU_MOE_META_DROPPED] = dropped;
    }
    __syncthreads();
    for (int e = threadIdx.x; e < d.E; e += blockDim.x) {
        int at = offs[e];
        for (int b = 0; b < nb; b++) {
            posb[(size_t)b * d.E + e] = at;
            for (int k = 0; k < d.K; k++) at += kept[((size_t)b * d.K + k) * d.E + e];
        }
    }
}

/* 3. place (det): block b = chunk b, thread = token. Ranks within (k, e) and positions
 * within e in token order from warp ballots: lanes below in the warp (popc of the ballot
 * under the lane mask) plus the warps before (their counts in shared memory, added in warp
 * order). */
__global__ void __launch_bounds__(DT_CU_MOE_ROUTE_CHUNK) moe_route_place_kernel(int *rowof, int *src, const int *tope,
                                                                             const int *kept, const int *posb,
                                                                             dt_moe_dims d) {
    enum { W = DT_CU_MOE_ROUTE_CHUNK / 32 };
    __shared__ int wc[W][DT_CU_MOE_MAX_TOPK * DT_CU_MOE_MAX_EXPERTS];
    __shared__ int wk[W][DT_CU_MOE_MAX_EXPERTS];
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, b = blockIdx.x;
    int t = b * DT_CU_MOE_ROUTE_CHUNK + threadIdx.x, valid = t < d.N;
    unsigned lt = (1u << lane) - 1u;
    int ek[DT_CU_MOE_MAX_TOPK], rk[DT_CU_MOE_MAX_TOPK], keep[DT_CU_MOE_MAX_TOPK], pk[DT_CU_MOE_MAX_TOPK];
#pragma unroll
    for (int k = 0; k < DT_CU_MOE_MAX_TOPK; k++) {
        ek[k] = valid && k < d.K ? tope[(size_t)t * d.K + k] : -1;
        rk[k] = 0;
        pk[k] = 0;
    }
    for (int k = 0; k < d.K; k++)
        for (int e = 0; e < d.E; e++) {
            int mine = 0;
#pragma unroll
            for (int j = 0; j < DT_CU_MOE_MAX_TOPK; j++) mine |= j == k && ek[j] == e;
            unsigned m = __ballot_sync(0xffffffffu, mine);
            if (lane == 0) wc[warp][k * d.E + e] = __popc(m);
#pragma unroll
            for (int j = 0; j < DT_CU_MOE_MAX_TOPK; j++)
                if (j == k && ek[j] == e) rk[j] = __popc(m & lt);
        }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < DT_CU_MOE_MAX_TOPK; k++) {
        keep[k] = 0;
        if (ek[k] >= 0) {
            int r = rk[k];
            for (int w = 0; w < warp; w++) r += wc[w][k * d.E + ek[k]];
            keep[k] = r < kept[((size_t)b * d.K + k) * d.E + ek[k]];
        }
    }
    for (int e = 0; e < d.E; e++) {
        int mine = 0;
#pragma unroll
        for (int k = 0; k < DT_CU_MOE_MAX_TOPK; k++) mine |= ek[k] == e && keep[k];
        unsigned m = __ballot_sync(0xffffffffu, mine);
        if (lane == 0) wk[warp][e] = __popc(m);
#pragma unroll
        for (int k = 0; k < DT_CU_MOE_MAX_TOPK; k++)
            if (ek[k] == e) pk[k] = __popc(m & lt);
    }
    __syncthreads();
    if (!valid) return;
#pragma unroll
    for (int k = 0; k < DT_CU_MOE_MAX_TOPK; k++) {
        if (k >= d.K) break;
        size_t slot = (size_t)t * d.K + k;
        if (!keep[k]) {
            rowof[slot] = -1;
            continue;
        }
        int row = posb[(size_t)b * d.E + ek[k]] + pk[k];
        for (int w = 0; w < warp; w++) row += wk[w][ek[k]];
        rowof[slot] = row;
        src[row] = (int)slot;
    }
}

/* 3'. place (fast, no capacity: every assignment kept): each claims the next row of its
 * expert's group with an atomic counter. The group holds the same rows as det's, in the
 * order the threads arrived. */
__global__ void moe_route_place_fast_kernel(int *rowof, int *src, int *meta, const int *tope, dt_moe_dims d) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= d.N * d.K) return;
    int e = tope[i];
    int row = meta[DT_CU_MOE_META_OFFS + e] + atomicAdd(&meta[DT_CU_MOE_META_FILL + e], 1);
    rowof[i] = row;
    src[row] = i;
}

void dt_cu_moe_route(dt_cu_moe_ws *w, const dt_moe_dims *d, int det, cudaStream_t s) {
    int nb = dt_cu_moe_route_chunks(d->N);
    moe_route_count_kernel<<<dt_cu_noted(nb, DT_CU_MOE_ROUTE_CHUNK, 0, "moe_route_count_kernel"), DT_CU_MOE_ROUTE_CHUNK, 0,
                             s>>>(w->cnt, w->tope, *d);
    moe_route_scan_kernel<<<dt_cu_noted(1, 512, 0, "moe_route_scan_kernel"), 512, 0, s>>>(w->kept, w->posb, w->meta,
                                                                                        w->cnt, *d, nb);
    if (!det && dt_cu_moe_room(d->cap, d->N) >= d->N) {
        unsigned g = dt_cu_div((size_t)d->N * d->K, 256);
        moe_route_place_fast_kernel<<<dt_cu_noted(g, 256, 0, "moe_route_place_fast_kernel"), 256, 0, s>>>(
            w->rowof, w->src, w->meta, w->tope, *d);
        return;
    }
    moe_route_place_kernel<<<dt_cu_noted(nb, DT_CU_MOE_ROUTE_CHUNK, 0, "moe_route_place_kernel"), DT_CU_MOE_ROUTE_CHUNK, 0,
                             s>>>(w->rowof, w->src, w->tope, w->kept, w->posb, *d);
}

/* ---- dispatch: one warp a row, 16-byte copies ------------------------------------------------- */
__global__ void __launch_bounds__(256) moe_dispatch_kernel(bf16 *xp, const bf16 *x, const int *src, const int *meta,
                                                           dt_moe_dims d) {
    int row = blockIdx.x * 8 + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= meta[DT_CU_MOE_META_OFFS + d.E]) return;
    const bf16 *xr = x + (size_t)(src[row] / d.K) * d.C;
    bf16 *o = xp + (size_t)row * d.C;
    for (int c = lane * 8; c < d.C; c += 256) dt_st8(o + c, dt_ld8(xr + c));
}

void dt_cu_moe_dispatch(dt_cu_moe_ws *w, const bf16 *x, const dt_moe_dims *d, cudaStream_t s) {
    unsigned g = dt_cu_div(dt_cu_moe_max_rows(d), 8);
    moe_dispatch_kernel<<<dt_cu_noted(g, 256, 0, "moe_dispatch_kernel"), 256, 0, s>>>(w->xp, x, w->src, w->meta, *d);
}

/* ---- aux loss ----------------------------------------------------------------------------------
 * P_e partials: block = a chunk of DT_CU_MOE_TOKEN_CHUNK tokens, thread e sums them in token
 * order; then one thread adds the chunks in order (fp64) and forms aux. */
__global__ void moe_aux_part_kernel(float *part, const float *probs, dt_moe_dims d) {
    int e = threadIdx.x, c = blockIdx.x;
    if (e >= d.E) return;
    int t0 = c * DT_CU_MOE_TOKEN_CHUNK, t1 = min(t0 + DT_CU_MOE_TOKEN_CHUNK, d.N);
    float s = 0.0f;
    for (int t = t0; t < t1; t++) s += probs[(size_t)t * d.E + e];
    part[(size_t)c * d.E + e] = s;
}
__global__ void moe_aux_finish_kernel(double *aux, const float *part, const int *meta, float coeff, dt_moe_dims d,
                                      int nchunk) {
    double fp = 0.0;
    for (int e = 0; e < d.E; e++) {
        double P = 0.0;
        for (int c = 0; c < nchunk; c++) P += (double)part[(size_t)c * d.E + e];
        fp += ((double)meta[DT_CU_MOE_META_TOTAL + e] / ((double)d.N * d.K)) * (P / d.N);
    }
    aux[0] = (double)coeff * d.E * fp;
    aux[1] = fp;
}

void dt_cu_moe_aux_fwd(dt_cu_moe_ws *w, float coeff, const dt_moe_dims *d, cudaStream_t s) {
    int nc = dt_cu_moe_token_chunks(d->N);
    moe_aux_part_kernel<<<dt_cu_noted(nc, 64, 0, "moe_aux_part_kernel"), 64, 0, s>>>(w->part, w->probs, *d);
    moe_aux_finish_kernel<<<dt_cu_noted(1, 1, 0, "moe_aux_finish_kernel"), 1, 0, s>>>(w->aux, w->part, w->meta, coeff,
                                                                                    *d, nc);
}

/* ---- router backward ----------------------------------------------------------------------------
 * dz: one thread a token. dp_t[e] = dg of the k that chose e (dropped: 0) + aux_coeff E f_e
 * / N; s = sum_e dp p in expert order; dz = p (dp - s). */
__global__ void moe_router_bwd_kernel(float *dz, const float *probs, const int *tope, const float *dg, const int *meta,
                                      float aux_coeff, dt_moe_dims d) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= d.N) return;
    int ek[DT_CU_MOE_MAX_TOPK];
    float gk[DT_CU_MOE_MAX_TOPK];
#pragma unroll
    for (int k = 0; k < DT_CU_MOE_MAX_TOPK; k++) {
        ek[k] = k < d.K ? tope[(size_t)t * d.K + k] : -1;
        gk[k] = k < d.K ? dg[(size_t)t * d.K + k] : 0.0f;
    }
    const float *p = probs + (size_t)t * d.E;
    float inv = 1.0f / ((float)d.N * (float)d.K);
    float s = 0.0f;
    for (int e = 0; e < d.E; e++) {
        float dp = aux_coeff * (float)d.E * ((float)meta[DT_CU_MOE_META_TOTAL + e] * inv) / (float)d.N;
#pragma unroll
        for (int k = 0; k < DT_CU_MOE_MAX_TOPK; k++)
            if (ek[k] == e) dp += gk[k];
        s += dp * p[e];
    }
    for (int e = 0; e < d.E; e++) {
        float dp = aux_coeff * (float)d.E * ((float)meta[DT_CU_MOE_META_TOTAL + e] * inv) / (float)d.N;
#pragma unroll
        for (int k = 0; k < DT_CU_MOE_MAX_TOPK; k++)
            if (ek[k] == e) dp += gk[k];
        dz[(size_t)t * d.E + e] = p[e] * (dp - s);
    }
}

/* dWr partials: block (channel group of 128, token chunk c): thread channel sums the chunk's
 * tokens in order for each expert; then one thread a (e, channel) adds the chunks in order. */
__global__ void __launch_bounds__(128) moe_wr_part_kernel(float *part, const float *dz, const bf16 *x, dt_moe_dims d) {
    int ch = blockIdx.x * 128 + threadIdx.x, c = blockIdx.y;
    int t0 = c * DT_CU_MOE_TOKEN_CHUNK, t1 = min(t0 + DT_CU_MOE_TOKEN_CHUNK, d.N);
    if (ch >= d.C) return;
    for (int e = 0; e < d.E; e++) {
        float s = 0.0f;
        for (int t = t0; t < t1; t++) s += dz[(size_t)t * d.E + e] * __bfloat162float(x[(size_t)t * d.C + ch]);
        part[((size_t)c * d.E + e) * d.C + ch] = s;
    }
}
__global__ void moe_wr_finish_kernel(float *g_wr, const float *part, dt_moe_dims d, int nchunk) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= d.E * d.C) return;
    float s = 0.0f;
    for (int c = 0; c < nchunk; c++) s += part[(size_t)c * d.E * d.C + i];
    g_wr[i] += s;
}

/* dx: one thread 8 channels of a token: the kept rows' dxp in k order, then Wr^T dz in expert
 * order, in fp32, rounded once. */
__global__ void moe_undispatch_kernel(bf16 *dx, const bf16 *dxp, const int *rowof, const float *dz, const float *wr,
                                      dt_moe_dims d) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x, cg = (size_t)d.C / 8;
    if (i >= (size_t)d.N * cg) return;
    int t = (int)(i / cg), c = (int)(i % cg) * 8;
    float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int k = 0; k < d.K; k++) {
        int row = rowof[(size_t)t * d.K + k];
        if (row < 0) continue;
        dt_bf16x8 v = dt_ld8(dxp + (size_t)row * d.C + c);
#pragma unroll
        for (int q = 0; q < 8; q++) s[q] += __bfloat162float(v.v[q]);
    }
    for (int e = 0; e < d.E; e++) {
        float z = dz[(size_t)t * d.E + e];
        const float *wrow = wr + (size_t)e * d.C + c;
#pragma unroll
        for (int q = 0; q < 8; q++) s[q] += wrow[q] * z;
    }
    dt_bf16x8 o;
#pragma unroll
    for (int q = 0; q < 8; q++) o.v[q] = __float2bfloat16(s[q]);
    dt_st8(dx + (size_t)t * d.C + c, o);
}

void dt_cu_moe_router_bwd(bf16 *dx, float *g_wr, dt_cu_moe_ws *w, const bf16 *x, const float *wr, float aux_coeff,
                          const dt_moe_dims *d, cudaStream_t s) {
    moe_router_bwd_kernel<<<dt_cu_noted(dt_cu_div((size_t)d->N, 256), 256, 0, "moe_router_bwd_kernel"), 256, 0, s>>>(
        w->dz, w->probs, w->tope, w->dg, w->meta, aux_coeff, *d);
    int nc = dt_cu_moe_token_chunks(d->N);
    dim3 g(dt_cu_div((size_t)d->C, 128), (unsigned)nc);
    moe_wr_part_kernel<<<dt_cu_noted(g, 128, 0, "moe_wr_part_kernel"), 128, 0, s>>>(w->wrpart, w->dz, x, *d);
    moe_wr_finish_kernel<<<dt_cu_noted(dt_cu_div((size_t)d->E * d->C, 256), 256, 0, "moe_wr_finish_kernel"), 256, 0,
                           s>>>(g_wr, w->wrpart, *d, nc);
    size_t n = (size_t)d->N * d->C / 8;
    moe_undispatch_kernel<<<dt_cu_noted(dt_cu_div(n, 256), 256, 0, "moe_undispatch_kernel"), 256, 0, s>>>(
        dx, w->dxp, w->rowof, w->dz, wr, *d);
}
