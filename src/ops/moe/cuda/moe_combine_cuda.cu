/* The MoE combine (un-permute) and its backward, the routing-probability gradient (dprob),
 * on the GPU (moe_cuda.h); the whole MoE forward and backward in launch order.
 *
 * Why the det orders are fixed: the combine is a gather, each token adding its K rows in k
 * order by one thread; dprob's channel tiles each write their own slot and one thread a slot
 * adds the tiles in tile order after the writers (a kernel boundary). The fast branches
 * scatter with atomicAdd: the combine into fp32 accumulators, dprob across channel tiles. */
#include "ops/moe/cuda/moe_cuda.h"

/* ---- combine ---------------------------------------------------------------------------------
 * det: one thread 8 channels of a token, kept rows in k order, fp32, rounded once. */
__global__ void moe_combine_det_kernel(bf16 *out, const bf16 *yp, const int *rowof, const float *topg, dt_moe_dims d) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x, cg = (size_t)d.C / 8;
    if (i >= (size_t)d.N * cg) return;
    int t = (int)(i / cg), c = (int)(i % cg) * 8;
    float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int k = 0; k < d.K; k++) {
        int row = rowof[(size_t)t * d.K + k];
        if (row < 0) continue;
        float g = topg[(size_t)t * d.K + k];
        dt_bf16x8 v = dt_ld8(yp + (size_t)row * d.C + c);
#pragma unroll
        for (int q = 0; q < 8; q++) s[q] += g * __bfloat162float(v.v[q]);
    }
    dt_bf16x8 o;
#pragma unroll
    for (int q = 0; q < 8; q++) o.v[q] = __float2bfloat16(s[q]);
    dt_st8(out + (size_t)t * d.C + c, o);
}
/* fast: one thread 8 channels of a dispatched row adds g yp into its token's accumulators
 * (zeroed before), in whatever order the rows arrive; then each is rounded to bf16. */
__global__ void moe_combine_scatter_kernel(float *acc, const bf16 *yp, const int *src, const float *topg,
                                           const int *meta, dt_moe_dims d) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x, cg = (size_t)d.C / 8;
    int row = (int)(i / cg), c = (int)(i % cg) * 8;
    if (row >= meta[DT_CU_MOE_META_OFFS + d.E]) return;
    int slot = src[row], t = slot / d.K;
    float g = topg[slot];
    dt_bf16x8 v = dt_ld8(yp + (size_t)row * d.C + c);
    float *o = acc + (size_t)t * d.C + c;
#pragma unroll
    for (int q = 0; q < 8; q++) atomicAdd(o + q, g * __bfloat162float(v.v[q]));
}
__global__ void moe_round_kernel(bf16 *out, const float *acc, size_t n) {
    size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 8;
    if (i >= n) return;
    float4 a0 = *reinterpret_cast<const float4 *>(acc + i), a1 = *reinterpret_cast<const float4 *>(acc + i + 4);
    float v[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
    dt_bf16x8 o;
#pragma unroll
    for (int q = 0; q < 8; q++) o.v[q] = __float2bfloat16(v[q]);
    dt_st8(out + i, o);
}

void dt_cu_moe_combine_fwd(bf16 *out, dt_cu_moe_ws *w, const dt_moe_dims *d, int det, cudaStream_t s) {
    size_t n = (size_t)d->N * d->C;
    if (det) {
        moe_combine_det_kernel<<<dt_cu_noted(dt_cu_div(n / 8, 256), 256, 0, "moe_combine_det_kernel"), 256, 0, s>>>(
            out, w->yp, w->rowof, w->topg, *d);
        return;
    }
    cudaMemsetAsync(w->outacc, 0, sizeof(float) * n, s);
    size_t m = dt_cu_moe_max_rows(d) * (size_t)d->C / 8;
    moe_combine_scatter_kernel<<<dt_cu_noted(dt_cu_div(m, 256), 256, 0, "moe_combine_scatter_kernel"), 256, 0, s>>>(
        w->outacc, w->yp, w->src, w->topg, w->meta, *d);
    moe_round_kernel<<<dt_cu_noted(dt_cu_div(n / 8, 256), 256, 0, "moe_round_kernel"), 256, 0, s>>>(out, w->outacc, n);
}

/* ---- combine backward and dprob ----------------------------------------------------------------
 * Block (DT_CU_MOE_DPROB_ROWS rows, channel tile j): warp w takes rows 4 w .. 4 w + 3; lane l
 * channels j TILE + 4 l .. + 3. dyp = bf16(g dout); the tile's partial of <dout_t, yp[row]>
 * is the lane's 4 products in order, then the warp's butterfly. det: written to its own slot
 * (dt_cu_moe_dprob_slot); fast: atomicAdd into dg. */
template <int DET>
__global__ void __launch_bounds__(256) moe_dprob_kernel(bf16 *dyp, float *dgpart, float *dg, const bf16 *dout,
                                                        const bf16 *yp, const int *src, const float *topg,
                                                        const int *meta, dt_moe_dims d) {
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, j = blockIdx.y;
    int nrows = meta[DT_CU_MOE_META_OFFS + d.E], NK = d.N * d.K;
    int c = j * DT_CU_MOE_DPROB_TILE + lane * 4;
#pragma unroll
    for (int r = 0; r < DT_CU_MOE_DPROB_ROWS / 8; r++) {
        int row = blockIdx.x * DT_CU_MOE_DPROB_ROWS + warp * (DT_CU_MOE_DPROB_ROWS / 8) + r;
        if (row >= nrows) return; /* warp-uniform */
        int slot = src[row], t = slot / d.K;
        float g = topg[slot];
        const bf16 *dp = dout + (size_t)t * d.C + c, *yr = yp + (size_t)row * d.C + c;
        __nv_bfloat162 d01 = *reinterpret_cast<const __nv_bfloat162 *>(dp),
                       d23 = *reinterpret_cast<const __nv_bfloat162 *>(dp + 2);
        __nv_bfloat162 y01 = *reinterpret_cast<const __nv_bfloat162 *>(yr),
                       y23 = *reinterpret_cast<const __nv_bfloat162 *>(yr + 2);
        float dv[4] = {__low2float(d01), __high2float(d01), __low2float(d23), __high2float(d23)};
        float yv[4] = {__low2float(y01), __high2float(y01), __low2float(y23), __high2float(y23)};
        float p = 0.0f;
#pragma unroll
        for (int q = 0; q < 4; q++) p += dv[q] * yv[q];
        bf16 *o = dyp + (size_t)row * d.C + c;
        *reinterpret_cast<__nv_bfloat162 *>(o) = __floats2bfloat162_rn(g * dv[0], g * dv[1]);
        *reinterpret_cast<__nv_bfloat162 *>(o + 2) = __floats2bfloat162_rn(g * dv[2], g * dv[3]);
        p = dt_warp_sum(p);
        if (lane == 0) {
            if (DET) dgpart[dt_cu_moe_dprob_slot(j, slot, NK)] = p;
            else atomicAdd(&dg[slot], p);
        }
    }
}
/* det: one thread a slot adds the tiles' partials in tile order (0 for a dropped slot). */
__global__ void moe_dprob_reduce_kernel(float *dg, const float *dgpart, const int *rowof, dt_moe_dims d, int ntile) {
    int s = blockIdx.x * blockDim.x + threadIdx.x, NK = d.N * d.K;
    if (s >= NK) return;
    float v = 0.0f;
    if (rowof[s] >= 0)
        for (int j = 0; j < ntile; j++) v += dgpart[dt_cu_moe_dprob_slot(j, s, NK)];
    dg[s] = v;
}

void dt_cu_moe_combine_bwd(dt_cu_moe_ws *w, const bf16 *dout, const dt_moe_dims *d, int det, cudaStream_t s) {
    int ntile = dt_cu_moe_dprob_tiles(d->C);
    dim3 g(dt_cu_div(dt_cu_moe_max_rows(d), DT_CU_MOE_DPROB_ROWS), (unsigned)ntile);
    if (det) {
        moe_dprob_kernel<1><<<dt_cu_noted(g, 256, 0, "moe_dprob_det_kernel"), 256, 0, s>>>(
            w->dyp, w->dgpart, w->dg, dout, w->yp, w->src, w->topg, w->meta, *d);
        int NK = d->N * d->K;
        moe_dprob_reduce_kernel<<<dt_cu_noted(dt_cu_div((size_t)NK, 256), 256, 0, "moe_dprob_reduce_kernel"), 256, 0,
                                  s>>>(w->dg, w->dgpart, w->rowof, *d, ntile);
        return;
    }
    cudaMemsetAsync(w->dg, 0, sizeof(float) * (size_t)d->N * d->K, s);
    moe_dprob_kernel<0><<<dt_cu_noted(g, 256, 0, "moe_dprob_fast_kernel"), 256, 0, s>>>(
        w->dyp, w->dgpart, w->dg, dout, w->yp, w->src, w->topg, w->meta, *d);
}

/* ---- the whole layer ----------------------------------------------------------------------------
 * The branches from the family's chooser (moe.h): the routing map's placement and the
 * combine by DT_OP_MOE_COMBINE, dprob by DT_OP_MOE_DPROB, the grouped weight gradient by the
 * gemm family's DT_OP_GEMM (it is a GEMM); in deterministic mode every one is det. */
static int moe_det(dt_op_id op) { return dt_moe_choose(op) == DT_MOE_DET; }

void dt_cu_moe_forward(bf16 *out, dt_cu_moe_ws *w, const bf16 *x, const dt_cu_moe_params *p, float coeff,
                       const dt_moe_dims *d, cudaStream_t s) {
    int det = moe_det(DT_OP_MOE_COMBINE);
    dt_cu_moe_router_fwd(w, x, p->wr, d, s);
    dt_cu_moe_route(w, d, det, s);
    dt_cu_moe_dispatch(w, x, d, s);
    dt_cu_moe_experts_fwd(w, p, d, s);
    dt_cu_moe_combine_fwd(out, w, d, det, s);
    dt_cu_moe_aux_fwd(w, coeff, d, s);
}

void dt_cu_moe_backward(bf16 *dx, dt_cu_moe_ws *w, const bf16 *dout, const bf16 *x, const dt_cu_moe_params *p,
                        const dt_cu_moe_grads *g, float aux_coeff, const dt_moe_dims *d, cudaStream_t s) {
    dt_cu_moe_combine_bwd(w, dout, d, moe_det(DT_OP_MOE_DPROB), s);
    dt_cu_moe_experts_bwd(w, p, g, d, dt_gemm_choose() == DT_GEMM_DET, s);
    dt_cu_moe_router_bwd(dx, g->wr, w, x, p->wr, aux_coeff, d, s);
}
