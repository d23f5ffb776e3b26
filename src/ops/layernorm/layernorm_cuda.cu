/* LayerNorm on the GPU (see layernorm.h, layernorm_cuda.h). C must be a multiple of 8 (the
 * model checks). One warp owns a row: its sums are warp butterflies, a fixed order. */
#include "ops/layernorm/layernorm_cuda.h"
#include "ops/reduce/reduce_cuda.h"


#define LN_EPS 1e-5f

/* Cache hints of the forward's streams, each read or written once: the loads of a and b skip
 * L1 and mark their L2 lines evict-first (a policy made once a thread), the residual `res`
 * is stored evict-first (.cs: read again only by the next LayerNorm), and `out`, which the
 * next GEMM reads, is stored plainly so it may stay in L2. The bits do not depend on them.
 * The backward takes no such hints: they did not make the model's step faster. */
static __device__ __forceinline__ uint64_t ln_evict_first(void) {
    uint64_t p;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
    return p;
}
static __device__ __forceinline__ dt_bf16x8 ln_ld_once8(const bf16 *p, uint64_t pol) {
    uint4 r;
    asm("ld.global.L1::no_allocate.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;"
        : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
        : "l"(p), "l"(pol));
    return *reinterpret_cast<dt_bf16x8 *>(&r);
}

/* Forward, optionally fused with the residual add res = a + dropout(b); lane holds vectors
 * v = lane + 32 i (i < NV) of its row in registers, so the row is read once. The sums run
 * over i then k in the lane, then a butterfly: the same order for every launch. */
#define LN_FWD_THREADS 64 /* 2 rows a block: on the 124M shape 0.0305 ms back to back, 4 rows 0.0313, 8 rows 0.0330 (H200) */
/* DROP 0: the kernel for p = 0, without the dropout code (58 registers instead of 74 at
 * NV 3: more warps an SM; 0.0302 vs 0.0308 ms back to back without the hints). */
template <int NV, int DROP>
__global__ void __launch_bounds__(LN_FWD_THREADS) layernorm_fwd_kernel(bf16 *out, float *mean, float *rstd, bf16 *res,
                                                            const bf16 *a, const bf16 *b, const float *w,
                                                            const float *bias, int N, int C, dt_dropout d,
                                                            uint32_t purpose, uint32_t layer) {
    int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), lane = threadIdx.x & 31, C8 = C / 8;
    if (row >= N) return;
    size_t base = (size_t)row * C;
    uint64_t pol = ln_evict_first();
    float x[NV][8];
    dt_bf16x8 xa[NV], xb[NV];
#pragma unroll
    for (int i = 0; i < NV; i++) {
        int v = lane + 32 * i;
        if (v < C8) {
            xa[i] = ln_ld_once8(a + base + v * 8, pol);
            if (b) xb[i] = ln_ld_once8(b + base + v * 8, pol);
        }
    }
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < NV; i++) {
        int v = lane + 32 * i;
        if (v >= C8) continue;
        if (b) { /* the residual add, rounded to bf16 as stored; the norm reads the stored value */
            dt_bf16x8 r;
#pragma unroll
            for (int k = 0; k < 8; k++) {
                float y = __bfloat162float(xb[i].v[k]);
                if (DROP && d.p > 0.0f) y *= dt_cu_drop_factor(d, purpose, layer, base + v * 8 + k);
                r.v[k] = __float2bfloat16(__bfloat162float(xa[i].v[k]) + y);
            }
            __stcs(reinterpret_cast<uint4 *>(res + base + v * 8), *reinterpret_cast<const uint4 *>(&r));
            xa[i] = r;
        }
#pragma unroll
        for (int k = 0; k < 8; k++) {
            x[i][k] = __bfloat162float(xa[i].v[k]);
            s += x[i][k];
        }
    }
    float m = dt_warp_sum(s) / (float)C;
    float q = 0.0f;
#pragma unroll
    for (int i = 0; i < NV; i++) {
        if (lane + 32 * i >= C8) continue;
#pragma unroll
        for (int k = 0; k < 8; k++) {
            float dx = x[i][k] - m;
            q += dx * dx;
        }
    }
    float r = rsqrtf(dt_warp_sum(q) / (float)C + LN_EPS);
#pragma unroll
    for (int i = 0; i < NV; i++) {
        int v = lane + 32 * i;
        if (v >= C8) continue;
        const float4 *w4 = reinterpret_cast<const float4 *>(w + v * 8);
        const float4 *b4 = reinterpret_cast<const float4 *>(bias + v * 8);
        float4 w0 = w4[0], w1 = w4[1], b0 = b4[0], b1 = b4[1];
        float wk[8] = {w0.x, w0.y, w0.z, w0.w, w1.x, w1.y, w1.z, w1.w};
        float bk[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
        dt_bf16x8 o;
#pragma unroll
        for (int k = 0; k < 8; k++) o.v[k] = __float2bfloat16((x[i][k] - m) * r * wk[k] + bk[k]);
        dt_st8(out + base + v * 8, o);
    }
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = r;
    }
}

/* The same forward for rows wider than the register kernel holds (C > 8 * 32 * LN_MAX_NV)
 * or weights not 16-byte aligned: the row is read again per pass (from L1). */
__global__ void layernorm_fwd_wide_kernel(bf16 *out, float *mean, float *rstd, bf16 *res, const bf16 *a,
                                     const bf16 *b, const float *w, const float *bias, int N, int C,
                                     dt_dropout d, uint32_t purpose, uint32_t layer) {
    int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= N) return;
    size_t base = (size_t)row * C;
    const bf16 *x = a + base;
    if (b) { /* the residual add, rounded to bf16 as stored; the norm reads the stored value */
        for (int v = lane; v < C / 8; v += 32) {
            dt_bf16x8 xa = dt_ld8(a + base + v * 8), xb = dt_ld8(b + base + v * 8), r;
#pragma unroll
            for (int k = 0; k < 8; k++) {
                float y = __bfloat162float(xb.v[k]);
                if (d.p > 0.0f) y *= dt_cu_drop_factor(d, purpose, layer, base + v * 8 + k);
                r.v[k] = __float2bfloat16(__bfloat162float(xa.v[k]) + y);
            }
            dt_st8(res + base + v * 8, r);
        }
        __syncwarp();
        x = res + base;
    }
    float s = 0.0f;
    for (int v = lane; v < C / 8; v += 32) {
        dt_bf16x8 xv = dt_ld8(x + v * 8);
#pragma unroll
        for (int k = 0; k < 8; k++) s += __bfloat162float(xv.v[k]);
    }
    float m = dt_warp_sum(s) / (float)C;
    float q = 0.0f;
    for (int v = lane; v < C / 8; v += 32) {
        dt_bf16x8 xv = dt_ld8(x + v * 8);
#pragma unroll
        for (int k = 0; k < 8; k++) {
            float dx = __bfloat162float(xv.v[k]) - m;
            q += dx * dx;
        }
    }
    float r = rsqrtf(dt_warp_sum(q) / (float)C + LN_EPS);
    for (int v = lane; v < C / 8; v += 32) {
        dt_bf16x8 xv = dt_ld8(x + v * 8), o;
#pragma unroll
        for (int k = 0; k < 8; k++) {
            int c = v * 8 + k;
            o.v[k] = __float2bfloat16((__bfloat162float(xv.v[k]) - m) * r * w[c] + bias[c]);
        }
        dt_st8(out + base + v * 8, o);
    }
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = r;
    }
}

#define LN_BWD_WARPS DT_CU_LN_WARPS

/* The fused column sum of dinp16 (dt_cu_layernorm_bwd_colsum): none, det (block partials
 * in the third region of `part`), fast (atomicAdd of the block sums into `sum`). */
enum { LN_SUM_NONE = 0, LN_SUM_DET = 1, LN_SUM_FAST = 2 };

/* Four bf16 at p (8-byte aligned) as floats. */
static __device__ __forceinline__ void ln_ld4(const bf16 *p, float f[4]) {
    uint2 u = *reinterpret_cast<const uint2 *>(p);
    float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&u.x));
    float2 hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&u.y));
    f[0] = lo.x; f[1] = lo.y; f[2] = hi.x; f[3] = hi.y;
}

/* The end of both backward kernels, after the barrier: per channel c, the block's sums of
 * the warps' shared rows in warp order. The dweight/dbias rows ([LN_BWD_WARPS][2][C]) store
 * channel c = vec * u + k at k * C / vec + u; the sum rows ([LN_BWD_WARPS][C], sumv) store it
 * the same way when sum_interleaved, at c otherwise. det writes the block partials (dweight,
 * dbias, then the sum at partial rows blockIdx.x, nparts + blockIdx.x, 2 nparts +
 * blockIdx.x; LN_SUM_DET), fast adds them with atomics. */
static __device__ __forceinline__ void ln_bwd_block_finish(const float *sh, const float *ssum, int vec,
                                                           int sum_interleaved, float *dweight, float *dbias,
                                                           float *sum, float *part, int C, int det, int sumv) {
    int nparts = gridDim.x, Cv = C / vec;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float tw = 0.0f, tb = 0.0f, ts = 0.0f;
        int at = (c % vec) * Cv + c / vec;
        for (int k = 0; k < LN_BWD_WARPS; k++) { /* warp order */
            tw += sh[(size_t)k * 2 * C + at];
            tb += sh[(size_t)k * 2 * C + C + at];
        }
        if (det) {
            part[(size_t)blockIdx.x * C + c] = tw;
            part[(size_t)(nparts + blockIdx.x) * C + c] = tb;
        } else {
            atomicAdd(&dweight[c], tw);
            atomicAdd(&dbias[c], tb);
        }
        if (!sumv) continue;
        int sat = sum_interleaved ? at : c;
        for (int k = 0; k < LN_BWD_WARPS; k++) ts += ssum[(size_t)k * C + sat]; /* warp order */
        if (sumv == LN_SUM_DET) part[(size_t)(2 * nparts + blockIdx.x) * C + c] = ts;
        else atomicAdd(&sum[c], ts);
    }
}

/* One row of the backward as loaded: lane holds channels 4u .. 4u+3 for u = lane + 32 i, so
 * every load and store of the warp is one contiguous run (four bf16, 8 bytes, of each). */
template <int NV4> struct ln_bwd_in {
    uint2 x[NV4], g[NV4], d[NV4];
    float m, r;
};
/* Issues all loads of a row at once (inp, dout, the incoming gradient when acc, the row's
 * statistics): one memory round trip a row instead of one for inp/dout and a second for the
 * incoming gradient after the row sums. The kernels read that from dres (dinp16 itself in
 * place, another buffer for dt_cu_layernorm_bwd_from) and write dinp16. Without acc the
 * incoming gradient is zero (bf16 +0: the sums below then have the bits of an accumulation
 * into a zeroed buffer). */
template <int NV4>
static __device__ __forceinline__ void ln_bwd_load(ln_bwd_in<NV4> &t, const bf16 *inp, const bf16 *dout,
                                                   const bf16 *dres, int acc, const float *mean,
                                                   const float *rstd, int row, int C, int lane) {
    size_t base = (size_t)row * C;
#pragma unroll
    for (int i = 0; i < NV4; i++) {
        int u = lane + 32 * i;
        if (u < C / 4) {
            t.x[i] = *reinterpret_cast<const uint2 *>(inp + base + u * 4);
            t.g[i] = *reinterpret_cast<const uint2 *>(dout + base + u * 4);
            t.d[i] = acc ? *reinterpret_cast<const uint2 *>(dres + base + u * 4) : make_uint2(0u, 0u);
        }
    }
    t.m = mean[row];
    t.r = rstd[row];
}
/* The rest of row `row`: its two sums (lane order, then a butterfly), dinp16 = bf16(incoming
 * + the row's gradient, added in fp32), and the row's terms added into this warp's
 * accumulators in row order: dweight/dbias in registers (ACC 0) or in the warp's shared rows
 * sw/sb (ACC 1, float4 u = channels 4u..); with sumv, the bf16 values stored into dinp16 (as
 * floats) into the warp's shared row ss. */
template <int NV4, int ACC>
static __device__ __forceinline__ void ln_bwd_row(const ln_bwd_in<NV4> &t, int row, float (&dw)[NV4][4],
                                                  float (&db)[NV4][4], float4 *sw, float4 *sb, float4 *ss,
                                                  int sumv, bf16 *dinp16, const float4 *w4, int C, int lane) {
    int C4 = C / 4;
    size_t base = (size_t)row * C;
    float m = t.m, r = t.r, sdn = 0.0f, sdnn = 0.0f;
#pragma unroll
    for (int i = 0; i < NV4; i++) {
        int u = lane + 32 * i;
        if (u >= C4) continue;
        float x[4], g[4];
        ln_ld4(reinterpret_cast<const bf16 *>(&t.x[i]), x);
        ln_ld4(reinterpret_cast<const bf16 *>(&t.g[i]), g);
        float4 wv = w4[u];
        float wk[4] = {wv.x, wv.y, wv.z, wv.w};
#pragma unroll
        for (int k = 0; k < 4; k++) {
            float n = (x[k] - m) * r, dn = wk[k] * g[k];
            sdn += dn;
            sdnn += dn * n;
        }
    }
    sdn = dt_warp_sum(sdn) / (float)C;
    sdnn = dt_warp_sum(sdnn) / (float)C;
#pragma unroll
    for (int i = 0; i < NV4; i++) {
        int u = lane + 32 * i;
        if (u >= C4) continue;
        float x[4], g[4], n[4], di[4];
        ln_ld4(reinterpret_cast<const bf16 *>(&t.x[i]), x);
        ln_ld4(reinterpret_cast<const bf16 *>(&t.g[i]), g);
        ln_ld4(reinterpret_cast<const bf16 *>(&t.d[i]), di);
        float4 wv = w4[u];
        float wk[4] = {wv.x, wv.y, wv.z, wv.w};
#pragma unroll
        for (int k = 0; k < 4; k++) {
            n[k] = (x[k] - m) * r;
            float dn = wk[k] * g[k];
            di[k] += (dn - sdn - n[k] * sdnn) * r;
        }
        if (ACC == 0) {
#pragma unroll
            for (int k = 0; k < 4; k++) {
                db[i][k] += g[k];
                dw[i][k] = __fmaf_rn(n[k], g[k], dw[i][k]);
            }
        } else {
            float4 a = sw[u], b = sb[u];
            a.x = __fmaf_rn(n[0], g[0], a.x);
            a.y = __fmaf_rn(n[1], g[1], a.y);
            a.z = __fmaf_rn(n[2], g[2], a.z);
            a.w = __fmaf_rn(n[3], g[3], a.w);
            b.x += g[0];
            b.y += g[1];
            b.z += g[2];
            b.w += g[3];
            sw[u] = a;
            sb[u] = b;
        }
        __nv_bfloat162 lo = __floats2bfloat162_rn(di[0], di[1]), hi = __floats2bfloat162_rn(di[2], di[3]);
        uint2 o;
        o.x = *reinterpret_cast<uint32_t *>(&lo);
        o.y = *reinterpret_cast<uint32_t *>(&hi);
        *reinterpret_cast<uint2 *>(dinp16 + base + u * 4) = o;
        if (sumv) { /* the values as stored: the column sums of dinp16 */
            float2 fl = __bfloat1622float2(lo), fh = __bfloat1622float2(hi);
            float4 s = ss[u];
            s.x += fl.x;
            s.y += fl.y;
            s.z += fh.x;
            s.w += fh.y;
            ss[u] = s;
        }
    }
}

/* Backward. nparts = gridDim.x = dt_cu_ln_parts(N) blocks of LN_BWD_WARPS warps; the rows
 * come in groups of LN_BWD_WARPS, block b takes groups b, b + nparts, b + 2 nparts, ... and
 * its warp w row w of each, in order: the blocks in flight work on neighbouring rows (one
 * sweep over the buffers instead of nparts separate streams: 1-2% faster at C = 768), and the
 * partition is a function of N alone. A warp holds one row in registers (all its loads
 * issued at once, ln_bwd_load) and accumulates dweight/dbias for its channels in row order,
 * in registers (ACC 0) or in its shared rows (ACC 1, for widths whose registers would
 * spill); the eight warp sums are then added in warp order through shared memory. det
 * writes the block partial (summed by dt_cu_parts_finish); fast adds it into dweight/dbias
 * with atomics.
 * With `sumv` (LN_SUM_*), each warp also adds the bf16 values it stores into dinp16 (as
 * floats) into its own shared row, in the same row order, and the eight rows are added in
 * warp order: the column sums of dinp16, a third partial vector.
 * Shared memory: [LN_BWD_WARPS][2][C] (dweight, dbias: channel order, read and written as
 * float4 at u, conflict-free 16-byte accesses), then (sumv) [LN_BWD_WARPS][C] the same way. */
template <int NV4, int ACC, int MINB>
__global__ void __launch_bounds__(32 * LN_BWD_WARPS, MINB)
layernorm_bwd_kernel(bf16 *dinp16, const bf16 *dres, int acc, float *dweight, float *dbias, float *sum, float *part,
                     const bf16 *dout, const bf16 *inp, const float *w, const float *mean,
                     const float *rstd, int N, int C, int det, int sumv) {
    extern __shared__ float4 sh4[];
    float *sh = reinterpret_cast<float *>(sh4);
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, C4 = C / 4;
    float dw[NV4][4], db[NV4][4];
#pragma unroll
    for (int i = 0; i < NV4; i++)
#pragma unroll
        for (int k = 0; k < 4; k++) dw[i][k] = db[i][k] = 0.0f;
    float4 *sw = sh4 + (size_t)warp * 2 * C4, *sb = sw + C4; /* this warp's rows; lane-owned */
    float *ssum = sh + (size_t)LN_BWD_WARPS * 2 * C;
    float4 *ss = reinterpret_cast<float4 *>(ssum + (size_t)warp * C);
    for (int u = lane; u < C4; u += 32) {
        if (ACC) sw[u] = sb[u] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (sumv) ss[u] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
    const float4 *w4 = reinterpret_cast<const float4 *>(w);
    int row = blockIdx.x * LN_BWD_WARPS + warp, step = gridDim.x * LN_BWD_WARPS;
    ln_bwd_in<NV4> cur;
    if (row < N) ln_bwd_load(cur, inp, dout, dres, acc, mean, rstd, row, C, lane);
    for (; row < N; row += step) {
        int next = row + step;
        ln_bwd_row<NV4, ACC>(cur, row, dw, db, sw, sb, ss, sumv, dinp16, w4, C, lane);
        if (next >= N) break;
        ln_bwd_load(cur, inp, dout, dres, acc, mean, rstd, next, C, lane);
    }
    if (ACC == 0)
#pragma unroll
        for (int i = 0; i < NV4; i++) {
            int u = lane + 32 * i;
            if (u < C4) {
                sw[u] = make_float4(dw[i][0], dw[i][1], dw[i][2], dw[i][3]);
                sb[u] = make_float4(db[i][0], db[i][1], db[i][2], db[i][3]);
            }
        }
    __syncthreads();
    ln_bwd_block_finish(sh, ssum, 1, 0, dweight, dbias, sum, part, C, det, sumv);
}

/* The same backward for C > 8 * 32 * LN_MAX_NV or weights not 16-byte aligned: the warps
 * accumulate dweight/dbias (and the column sums of dinp16 with sumv) in their shared rows
 * element by element (same order). */
__global__ void layernorm_bwd_wide_kernel(bf16 *dinp16, const bf16 *dres, int acc, float *dweight, float *dbias,
                                          float *sum, float *part, const bf16 *dout, const bf16 *inp, const float *w,
                                          const float *mean, const float *rstd, int N, int C, int det,
                                          int sumv) {
    /* [LN_BWD_WARPS][2][C] then (sumv) [LN_BWD_WARPS][C], channel c = 8v + k stored at
     * k * C/8 + v: consecutive lanes (consecutive v) hit consecutive banks */
    extern __shared__ float sh[];
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, C8 = C / 8;
    float *dw = sh + (size_t)warp * 2 * C, *db = dw + C;
    float *ssum = sh + (size_t)LN_BWD_WARPS * 2 * C, *ds = ssum + (size_t)warp * C;
    for (int c = lane; c < C; c += 32) {
        dw[c] = db[c] = 0.0f;
        if (sumv) ds[c] = 0.0f;
    }
    __syncwarp();
    for (int row = blockIdx.x * LN_BWD_WARPS + warp; row < N; row += gridDim.x * LN_BWD_WARPS) {
        size_t base = (size_t)row * C;
        float m = mean[row], r = rstd[row], sdn = 0.0f, sdnn = 0.0f;
        for (int v = lane; v < C / 8; v += 32) {
            dt_bf16x8 xv = dt_ld8(inp + base + v * 8), gv = dt_ld8(dout + base + v * 8);
#pragma unroll
            for (int k = 0; k < 8; k++) {
                int c = v * 8 + k;
                float n = (__bfloat162float(xv.v[k]) - m) * r, dn = w[c] * __bfloat162float(gv.v[k]);
                sdn += dn;
                sdnn += dn * n;
            }
        }
        sdn = dt_warp_sum(sdn) / (float)C;
        sdnn = dt_warp_sum(sdnn) / (float)C;
        for (int v = lane; v < C / 8; v += 32) {
            dt_bf16x8 xv = dt_ld8(inp + base + v * 8), gv = dt_ld8(dout + base + v * 8), o;
            float di[8];
            if (acc) {
                dt_bf16x8 dv = dt_ld8(dres + base + v * 8);
#pragma unroll
                for (int k = 0; k < 8; k++) di[k] = __bfloat162float(dv.v[k]);
            } else {
#pragma unroll
                for (int k = 0; k < 8; k++) di[k] = 0.0f;
            }
#pragma unroll
            for (int k = 0; k < 8; k++) {
                int c = v * 8 + k;
                float g = __bfloat162float(gv.v[k]);
                float n = (__bfloat162float(xv.v[k]) - m) * r, dn = w[c] * g;
                db[k * C8 + v] += g;
                dw[k * C8 + v] = __fmaf_rn(n, g, dw[k * C8 + v]);
                di[k] += (dn - sdn - n * sdnn) * r;
                o.v[k] = __float2bfloat16(di[k]);
                if (sumv) ds[k * C8 + v] += __bfloat162float(o.v[k]); /* the value as stored */
            }
            dt_st8(dinp16 + base + v * 8, o);
        }
    }
    __syncthreads();
    ln_bwd_block_finish(sh, ssum, 8, 1, dweight, dbias, sum, part, C, det, sumv);
}

/* Register vectors per lane for C channels: the smallest instantiated NV >= C / 256, or 0
 * when C is wider than LN_MAX_NV * 256 (then the wide kernels run). */
#define LN_MAX_NV 8
static int ln_nv(int C) {
    int need = (C / 8 + 31) / 32;
    static const int nvs[] = {1, 2, 3, 4, 6, 8};
    for (int i = 0; i < 6; i++)
        if (nvs[i] >= need) return nvs[i];
    return 0;
}
static int aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

/* ---- The forward for full rows (C = 256 nv, nv <= 3: the 124M shape's 768; no dropout) -
 * The register kernel's (layernorm_fwd_kernel<NV, 0>) rows, sums in the same order and the
 * float operations it compiles to (its SASS, nvcc 13.0 sm_90), spelled with _rn intrinsics,
 * so the same bits of out, mean, rstd and res (bench_ops compares the bytes with the register
 * kernel's, DT_CU_LN_FWD_GENERAL):
 *   res = bf16(a + b); s = 0 + x ... (lane: i then k), m = warp_sum(s) / C;
 *   q = fma(x - m, x - m, q) from 0, r = rsqrt(warp_sum(q) / C + eps);
 *   out = bf16(fma((x - m) r, w, bias)).
 * What differs: the lane's weights and bias (48 floats at C = 768) load right after its
 * row's loads, so they arrive during the reductions instead of after them; whole rows (no
 * per-vector bound checks); the row kept as packed bf16 words (unpacked exactly by shifts:
 * the compiler otherwise split every bf16 into its own register and spilled). bench_ops
 * times it against the general kernel at the 124M shape. */
static int g_ln_fwd_general; /* dt_cu_layernorm_fwd_force(DT_CU_LN_FWD_GENERAL) */
void dt_cu_layernorm_fwd_force(int kernel) { g_ln_fwd_general = kernel == DT_CU_LN_FWD_GENERAL; }

/* bf16 pairs packed in a word as floats (exact), and two floats rounded (nearest) into one */
static __device__ __forceinline__ float lnf_lo(uint32_t u) { return __uint_as_float(u << 16); }
static __device__ __forceinline__ float lnf_hi(uint32_t u) { return __uint_as_float(u & 0xffff0000u); }
static __device__ __forceinline__ float lnf_f(const uint4 &x, int k) {
    const uint32_t u = k < 2 ? x.x : k < 4 ? x.y : k < 6 ? x.z : x.w;
    return k & 1 ? lnf_hi(u) : lnf_lo(u);
}
static __device__ __forceinline__ uint32_t lnf_pack(float lo, float hi) {
    __nv_bfloat162 t = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t *>(&t);
}
/* One warp a row, LN_FWD_THREADS / 32 rows a block (the register kernel's grid). */
template <int NV>
__global__ void __launch_bounds__(LN_FWD_THREADS, 8)
layernorm_fwd_full_kernel(bf16 *out, float *mean, float *rstd, bf16 *res, const bf16 *a, const bf16 *b,
                          const float *w, const float *bias, int N) {
    const int C = 256 * NV, lane = threadIdx.x & 31;
    const int row = blockIdx.x * (LN_FWD_THREADS / 32) + (threadIdx.x >> 5);
    if (row >= N) return;
    const uint64_t pol = ln_evict_first();
    const size_t base = (size_t)row * C;
    uint4 xa[NV], xb[NV];
#pragma unroll
    for (int i = 0; i < NV; i++) {
        const int v = lane + 32 * i;
        dt_bf16x8 t = ln_ld_once8(a + base + v * 8, pol);
        xa[i] = *reinterpret_cast<uint4 *>(&t);
        if (b) {
            t = ln_ld_once8(b + base + v * 8, pol);
            xb[i] = *reinterpret_cast<uint4 *>(&t);
        }
    }
    float wk[NV][8], bk[NV][8];
#pragma unroll
    for (int i = 0; i < NV; i++) {
        const int v = lane + 32 * i;
        const float4 *w4 = reinterpret_cast<const float4 *>(w + v * 8);
        const float4 *b4 = reinterpret_cast<const float4 *>(bias + v * 8);
        const float4 w0 = w4[0], w1 = w4[1], b0 = b4[0], b1 = b4[1];
        wk[i][0] = w0.x; wk[i][1] = w0.y; wk[i][2] = w0.z; wk[i][3] = w0.w;
        wk[i][4] = w1.x; wk[i][5] = w1.y; wk[i][6] = w1.z; wk[i][7] = w1.w;
        bk[i][0] = b0.x; bk[i][1] = b0.y; bk[i][2] = b0.z; bk[i][3] = b0.w;
        bk[i][4] = b1.x; bk[i][5] = b1.y; bk[i][6] = b1.z; bk[i][7] = b1.w;
    }
    uint4 x[NV];
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < NV; i++) {
        const int v = lane + 32 * i;
        if (b) { /* the residual add, rounded to bf16 as stored; the norm reads the stored value */
            const uint4 p = xa[i], q = xb[i];
            x[i].x = lnf_pack(__fadd_rn(lnf_lo(p.x), lnf_lo(q.x)), __fadd_rn(lnf_hi(p.x), lnf_hi(q.x)));
            x[i].y = lnf_pack(__fadd_rn(lnf_lo(p.y), lnf_lo(q.y)), __fadd_rn(lnf_hi(p.y), lnf_hi(q.y)));
            x[i].z = lnf_pack(__fadd_rn(lnf_lo(p.z), lnf_lo(q.z)), __fadd_rn(lnf_hi(p.z), lnf_hi(q.z)));
            x[i].w = lnf_pack(__fadd_rn(lnf_lo(p.w), lnf_lo(q.w)), __fadd_rn(lnf_hi(p.w), lnf_hi(q.w)));
            __stcs(reinterpret_cast<uint4 *>(res + base + v * 8), x[i]);
        } else {
            x[i] = xa[i];
        }
#pragma unroll
        for (int k = 0; k < 8; k++) s = __fadd_rn(s, lnf_f(x[i], k));
    }
    const float m = __fdiv_rn(dt_warp_sum(s), (float)C);
    float q = 0.0f;
#pragma unroll
    for (int i = 0; i < NV; i++)
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const float dx = __fsub_rn(lnf_f(x[i], k), m);
            q = __fmaf_rn(dx, dx, q);
        }
    const float r = rsqrtf(__fadd_rn(__fdiv_rn(dt_warp_sum(q), (float)C), LN_EPS));
#pragma unroll
    for (int i = 0; i < NV; i++) {
        const int v = lane + 32 * i;
        float y[8];
#pragma unroll
        for (int k = 0; k < 8; k++) y[k] = __fmaf_rn(__fmul_rn(__fsub_rn(lnf_f(x[i], k), m), r), wk[i][k], bk[i][k]);
        *reinterpret_cast<uint4 *>(out + base + v * 8) =
            make_uint4(lnf_pack(y[0], y[1]), lnf_pack(y[2], y[3]), lnf_pack(y[4], y[5]), lnf_pack(y[6], y[7]));
    }
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = r;
    }
}

void dt_cu_layernorm_fwd(bf16 *out, float *mean, float *rstd, bf16 *res, const bf16 *a,
                         const bf16 *b, const float *weight, const float *bias, int N, int C,
                         const dt_dropout *drop, uint32_t purpose, uint32_t layer,
                         cudaStream_t s) {
    dt_dropout d = dt_cu_drop_arg(drop);
    unsigned g = dt_cu_div((size_t)N, LN_FWD_THREADS / 32);
    int nv = aligned16(weight) && aligned16(bias) ? ln_nv(C) : 0;
    if (dt_cu_ln_full_rows(C, nv) && !(d.p > 0.0f) && !g_ln_fwd_general) { /* full rows, no dropout */
#define LN_FWD_FULL(NV)                                                                                          \
    layernorm_fwd_full_kernel<NV><<<dt_cu_noted(g, LN_FWD_THREADS, 0, "layernorm_fwd_full_kernel"), LN_FWD_THREADS, \
                                    0, s>>>(out, mean, rstd, res, a, b, weight, bias, N)
        if (nv == 1) LN_FWD_FULL(1);
        else if (nv == 2) LN_FWD_FULL(2);
        else LN_FWD_FULL(3);
#undef LN_FWD_FULL
        return;
    }
#define LN_FWD_GO(NV, DROP)                                                                                      \
    layernorm_fwd_kernel<NV, DROP><<<dt_cu_noted(g, LN_FWD_THREADS, 0, "layernorm_fwd_kernel"), LN_FWD_THREADS, 0, s>>>( \
        out, mean, rstd, res, a, b, weight, bias, N, C, d, purpose, layer)
#define LN_FWD(NV)                                                                                               \
    do {                                                                                                         \
        if (d.p > 0.0f) LN_FWD_GO(NV, 1);                                                                        \
        else LN_FWD_GO(NV, 0);                                                                                   \
    } while (0)
    switch (nv) {
    case 1: LN_FWD(1); break;
    case 2: LN_FWD(2); break;
    case 3: LN_FWD(3); break;
    case 4: LN_FWD(4); break;
    case 6: LN_FWD(6); break;
    case 8: LN_FWD(8); break;
    default:
        layernorm_fwd_wide_kernel<<<dt_cu_noted(dt_cu_div((size_t)N, 8), 256, 0, "layernorm_fwd_wide_kernel"), 256, 0, s>>>(out, mean, rstd, res, a, b, weight, bias, N, C, d,
                                                   purpose, layer);
    }
#undef LN_FWD
#undef LN_FWD_GO
}

/* One launch of the register backward kernel (the shared-memory opt-in set once per
 * instantiation: up to DT_CU_LN_SMEM_MAX, the largest carveout so MINB blocks fit). */
template <int NV4, int ACC, int MINB>
static void ln_bwd_go(unsigned nparts, size_t shm, cudaStream_t s, bf16 *dinp16, const bf16 *dres, int acc,
                      float *dweight, float *dbias, float *sum, float *part, const bf16 *dout, const bf16 *inp,
                      const float *w, const float *mean, const float *rstd, int N, int C, int det, int sumv) {
    static int attr;
    if (!attr) {
        const void *k = (const void *)layernorm_bwd_kernel<NV4, ACC, MINB>;
        cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)DT_CU_LN_SMEM_MAX);
        cudaFuncSetAttribute(k, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared);
        attr = 1;
    }
    unsigned nt = 32 * LN_BWD_WARPS;
    layernorm_bwd_kernel<NV4, ACC, MINB><<<dt_cu_noted(nparts, nt, shm, "layernorm_bwd_kernel"), nt, shm, s>>>(
        dinp16, dres, acc, dweight, dbias, sum, part, dout, inp, w, mean, rstd, N, C, det, sumv);
}
/* The register kernel's variant per width. Registers hold the row (inp, dout, dinp16: 6 NV4
 * registers) and, up to NV4 = LN_BWD_REG_ACC, the dweight/dbias accumulators (8 NV4): at
 * most 128 registers at NV4 = 6 (C = 768), 2 blocks an SM. Measured on the 124M shape (H200)
 * when the incoming gradient was fp32 (8 NV4 registers of row): the accumulators in shared
 * rows as fast (within 1%); 3 blocks an SM (80 registers, shared accumulators) 2-4% slower;
 * prefetching the next row 1-2% slower. */
#define LN_BWD_REG_ACC 6
static_assert(2 * 3 <= LN_BWD_REG_ACC, "dt_cu_ln_full_rows (nv <= 3): the full-row backward keeps its accumulators in "
                                       "registers");

/* ---- The backward for full rows (C = 256 nv, nv <= 3: the 124M shape's 768) ----------
 * The register kernel's rows, partition, per-warp row order and warp order, so the same
 * bits (dinp16 and the dweight/dbias and column-sum partials: bench_ops compares the bytes
 * with the register kernel's, DT_CU_LN_BWD_GENERAL), and faster at the 124M shape (bench_ops
 * times both). The register kernel was not limited by its rows' loads in flight (two attempts
 * at more of them were no faster) but by its weights: each w4[u] load sat behind its own
 * u < C4 branch, twelve dependent trips a row, and with the largest shared-memory carveout
 * (28 KB of L1) the row stream evicted them, so each was an L2 trip. Here the weights are
 * copied into shared memory once a block, rows are whole (no bound per vector), the
 * carveout is what two blocks need, and the rows stream past L1 (inp and dout loaded with
 * L1::no_allocate and L2 evict-first, the incoming dinp16 with L1::no_allocate: the
 * forward's hints).
 * The float operations per element are those
 * the register kernel compiles to (its SASS, nvcc 13.0 sm_90), spelled with _rn intrinsics
 * so ptxas cannot contract them otherwise:
 *   pass 1   dn = w g, n = (x - m) r, sdn += dn, sdnn = fma(dn, n, sdnn) (lane order, then
 *            dt_warp_sum, then / C correctly rounded);
 *   pass 2   t = fma(w, g, -sdn), t = fma(-n, sdnn, t), di = fma(t, r, di); db += g,
 *            dw = fma(n, g, dw); dinp16 = bf16(di); sum += float(dinp16). */
static int g_ln_bwd_general; /* dt_cu_layernorm_bwd_force(DT_CU_LN_BWD_GENERAL) */
void dt_cu_layernorm_bwd_force(int kernel) { g_ln_bwd_general = kernel == DT_CU_LN_BWD_GENERAL; }

/* The carveout (percent of the SM's shared memory) for `blocks` blocks of `shm` bytes each. */
static int ln_carve_percent(int blocks, size_t shm) {
    static int smem_sm, reserved;
    if (!smem_sm) {
        int dev = 0;
        cudaGetDevice(&dev);
        cudaDeviceGetAttribute(&smem_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev);
        cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock, dev);
        if (smem_sm <= 0) smem_sm = 228 * 1024;
    }
    size_t need = (size_t)blocks * (shm + (size_t)reserved);
    int pct = (int)((need * 100 + (size_t)smem_sm - 1) / (size_t)smem_sm);
    return pct < 100 ? pct : 100;
}

/* Eight bytes at p, past L1: with the L2 policy pol (evict_first), else plainly. */
static __device__ __forceinline__ uint2 lnf_ld(const bf16 *p, uint64_t pol, int evict_first) {
    uint2 r;
    if (evict_first)
        asm("ld.global.L1::no_allocate.L2::cache_hint.v2.u32 {%0,%1}, [%2], %3;"
            : "=r"(r.x), "=r"(r.y)
            : "l"(p), "l"(pol));
    else
        asm("ld.global.L1::no_allocate.v2.u32 {%0,%1}, [%2];" : "=r"(r.x), "=r"(r.y) : "l"(p));
    return r;
}
/* ln_bwd_load for a full row (C = 128 NV4). */
template <int NV4>
static __device__ __forceinline__ void lnf_load(ln_bwd_in<NV4> &t, const bf16 *inp, const bf16 *dout,
                                                const bf16 *dres, int acc, const float *mean, const float *rstd,
                                                int row, int lane, uint64_t pol) {
    const size_t base = (size_t)row * (128 * NV4);
#pragma unroll
    for (int i = 0; i < NV4; i++) {
        int u = lane + 32 * i;
        t.x[i] = lnf_ld(inp + base + u * 4, pol, 1);
        t.g[i] = lnf_ld(dout + base + u * 4, pol, 1);
        t.d[i] = acc ? lnf_ld(dres + base + u * 4, pol, 0) : make_uint2(0u, 0u);
    }
    t.m = mean[row];
    t.r = rstd[row];
}
/* ln_bwd_row for a full row (the operations of the section comment); ws: the weights in
 * shared memory; ss: this warp's shared column-sum row (SUMV). */
template <int NV4, int SUMV>
static __device__ __forceinline__ void lnf_row(const ln_bwd_in<NV4> &t, int row, float (&dw)[NV4][4],
                                               float (&db)[NV4][4], const float4 *ws, float4 *ss, bf16 *dinp16,
                                               int lane) {
    const int C = 128 * NV4;
    const size_t base = (size_t)row * C;
    float m = t.m, r = t.r, sdn = 0.0f, sdnn = 0.0f;
#pragma unroll
    for (int i = 0; i < NV4; i++) {
        int u = lane + 32 * i;
        float x[4], g[4];
        ln_ld4(reinterpret_cast<const bf16 *>(&t.x[i]), x);
        ln_ld4(reinterpret_cast<const bf16 *>(&t.g[i]), g);
        float4 wv = ws[u];
        float wk[4] = {wv.x, wv.y, wv.z, wv.w};
#pragma unroll
        for (int k = 0; k < 4; k++) {
            float dn = __fmul_rn(wk[k], g[k]), n = __fmul_rn(__fsub_rn(x[k], m), r);
            sdn = __fadd_rn(sdn, dn);
            sdnn = __fmaf_rn(dn, n, sdnn);
        }
    }
    sdn = __fdiv_rn(dt_warp_sum(sdn), (float)C);
    sdnn = __fdiv_rn(dt_warp_sum(sdnn), (float)C);
#pragma unroll
    for (int i = 0; i < NV4; i++) {
        int u = lane + 32 * i;
        float x[4], g[4], di[4];
        ln_ld4(reinterpret_cast<const bf16 *>(&t.x[i]), x);
        ln_ld4(reinterpret_cast<const bf16 *>(&t.g[i]), g);
        ln_ld4(reinterpret_cast<const bf16 *>(&t.d[i]), di);
        float4 wv = ws[u];
        float wk[4] = {wv.x, wv.y, wv.z, wv.w};
#pragma unroll
        for (int k = 0; k < 4; k++) {
            float n = __fmul_rn(__fsub_rn(x[k], m), r);
            float e = __fmaf_rn(wk[k], g[k], -sdn);
            e = __fmaf_rn(-n, sdnn, e);
            di[k] = __fmaf_rn(e, r, di[k]);
            db[i][k] = __fadd_rn(db[i][k], g[k]);
            dw[i][k] = __fmaf_rn(n, g[k], dw[i][k]);
        }
        __nv_bfloat162 lo = __floats2bfloat162_rn(di[0], di[1]), hi = __floats2bfloat162_rn(di[2], di[3]);
        uint2 o;
        o.x = *reinterpret_cast<uint32_t *>(&lo);
        o.y = *reinterpret_cast<uint32_t *>(&hi);
        *reinterpret_cast<uint2 *>(dinp16 + base + u * 4) = o;
        if (SUMV) { /* the values as stored */
            float2 fl = __bfloat1622float2(lo), fh = __bfloat1622float2(hi);
            float4 s = ss[u];
            s.x = __fadd_rn(s.x, fl.x);
            s.y = __fadd_rn(s.y, fl.y);
            s.z = __fadd_rn(s.z, fh.x);
            s.w = __fadd_rn(s.w, fh.y);
            ss[u] = s;
        }
    }
}
/* Full rows: LN_BWD_WARPS warps a block, 2 blocks an SM, the register kernel's partition
 * (block b of nparts = gridDim.x takes the groups of LN_BWD_WARPS rows b, b + nparts, ...,
 * warp w row w of each) and finish. Shared memory: [LN_BWD_WARPS][2][C] dweight/dbias rows
 * (written after the loop), then (SUMV) [LN_BWD_WARPS][C] column-sum rows, then the C
 * weights (dt_cu_ln_bwd_full_smem). */
template <int NV4, int SUMV>
__global__ void __launch_bounds__(32 * LN_BWD_WARPS, 2)
layernorm_bwd_full_kernel(bf16 *dinp16, const bf16 *dres, int acc, float *dweight, float *dbias, float *sum,
                          float *part, const bf16 *dout, const bf16 *inp, const float *w, const float *mean,
                          const float *rstd, int N, int det, int sumdet) {
    const int C = 128 * NV4, C4 = 32 * NV4;
    extern __shared__ float4 sh4[];
    float *sh = reinterpret_cast<float *>(sh4);
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    float *ssum = sh + (size_t)LN_BWD_WARPS * 2 * C;
    float4 *ss = reinterpret_cast<float4 *>(ssum + (size_t)warp * C);
    float4 *ws = reinterpret_cast<float4 *>(ssum + (SUMV ? (size_t)LN_BWD_WARPS * C : 0));
    const float4 *w4 = reinterpret_cast<const float4 *>(w);
    for (int u = threadIdx.x; u < C4; u += 32 * LN_BWD_WARPS) ws[u] = w4[u];
    if (SUMV)
#pragma unroll
        for (int i = 0; i < NV4; i++) ss[lane + 32 * i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    float dw[NV4][4], db[NV4][4];
#pragma unroll
    for (int i = 0; i < NV4; i++)
#pragma unroll
        for (int k = 0; k < 4; k++) dw[i][k] = db[i][k] = 0.0f;
    const uint64_t pol = ln_evict_first();
    int row = blockIdx.x * LN_BWD_WARPS + warp, step = gridDim.x * LN_BWD_WARPS;
    ln_bwd_in<NV4> cur;
    if (row < N) lnf_load<NV4>(cur, inp, dout, dres, acc, mean, rstd, row, lane, pol);
    __syncthreads(); /* the weights */
    for (; row < N; row += step) {
        int next = row + step;
        lnf_row<NV4, SUMV>(cur, row, dw, db, ws, ss, dinp16, lane);
        if (next >= N) break;
        lnf_load<NV4>(cur, inp, dout, dres, acc, mean, rstd, next, lane, pol);
    }
    float4 *sw = sh4 + (size_t)warp * 2 * C4, *sb = sw + C4;
#pragma unroll
    for (int i = 0; i < NV4; i++) {
        int u = lane + 32 * i;
        sw[u] = make_float4(dw[i][0], dw[i][1], dw[i][2], dw[i][3]);
        sb[u] = make_float4(db[i][0], db[i][1], db[i][2], db[i][3]);
    }
    __syncthreads();
    ln_bwd_block_finish(sh, ssum, 1, 0, dweight, dbias, sum, part, C, det,
                        SUMV ? (sumdet ? LN_SUM_DET : LN_SUM_FAST) : LN_SUM_NONE);
}

template <int NV4, int SUMV>
static void ln_bwd_full_go(unsigned nparts, cudaStream_t s, bf16 *dinp16, const bf16 *dres, int acc,
                           float *dweight, float *dbias, float *sum, float *part, const bf16 *dout, const bf16 *inp,
                           const float *w, const float *mean, const float *rstd, int N, int det, int sumdet) {
    const size_t shm = dt_cu_ln_bwd_full_smem(128 * NV4, SUMV);
    static int attr;
    if (!attr) {
        const void *k = (const void *)layernorm_bwd_full_kernel<NV4, SUMV>;
        cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)shm);
        cudaFuncSetAttribute(k, cudaFuncAttributePreferredSharedMemoryCarveout, ln_carve_percent(2, shm));
        attr = 1;
    }
    unsigned nt = 32 * LN_BWD_WARPS;
    layernorm_bwd_full_kernel<NV4, SUMV><<<dt_cu_noted(nparts, nt, shm, "layernorm_bwd_full_kernel"), nt, shm, s>>>(
        dinp16, dres, acc, dweight, dbias, sum, part, dout, inp, w, mean, rstd, N, det, sumdet);
}

/* The backward launch of both entry points; sum NULL: no column sum. */
static void ln_bwd(bf16 *dinp16, const bf16 *dres, int acc, float *dweight, float *dbias, float *sum, float *part,
                   const bf16 *dout, const bf16 *inp, const float *weight, const float *mean,
                   const float *rstd, int N, int C, cudaStream_t s, cudaStream_t fs) {
    int det = dt_layernorm_choose() == DT_LAYERNORM_DET, nparts = dt_cu_ln_parts(N);
    static int attr_set;
    if (!attr_set) { /* up to C = 3200 (the wide kernel, two vectors) */
        cudaFuncSetAttribute((const void *)layernorm_bwd_wide_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)DT_CU_LN_SMEM_MAX);
        attr_set = 1;
    }
    unsigned nt = 32 * LN_BWD_WARPS;
    int nv = aligned16(weight) ? ln_nv(C) : 0; /* in 8-channel vectors; the kernel counts 4 */
    /* the column sum in the kernel where its shared rows fit, else dt_cu_colsum after it */
    int fused = sum && dt_cu_ln_colsum_fused(C, nv == 0);
    int sumv = !fused ? LN_SUM_NONE : dt_reduce_choose(DT_OP_BIAS_BWD) == DT_REDUCE_DET ? LN_SUM_DET : LN_SUM_FAST;
    size_t shm = dt_cu_ln_bwd_smem(C, fused);
    float *sum_part = part + (size_t)2 * nparts * C;
    /* full rows up to the register accumulators' width (C 256, 512, 768): the full-row kernel,
     * the same bits (unless the benchmark switch asks for the register kernel) */
    const int full = dt_cu_ln_full_rows(C, nv) && !g_ln_bwd_general;
#define LN_FULL(NV)                                                                                              \
    (fused ? ln_bwd_full_go<2 * NV, 1>(nparts, s, dinp16, dres, acc, dweight, dbias, sum, part, dout, inp, weight,  \
                                       mean, rstd, N, det, sumv == LN_SUM_DET)                                    \
           : ln_bwd_full_go<2 * NV, 0>(nparts, s, dinp16, dres, acc, dweight, dbias, sum, part, dout, inp, weight,  \
                                       mean, rstd, N, det, 0))
#define LN_BWD(NV)                                                                                               \
    ln_bwd_go<2 * NV, (2 * NV > LN_BWD_REG_ACC), (2 * NV <= LN_BWD_REG_ACC ? 2 : 1)>(                                \
        nparts, shm, s, dinp16, dres, acc, dweight, dbias, sum, part, dout, inp, weight, mean, rstd, N, C, det, sumv)
    if (full && nv == 1) LN_FULL(1);
    else if (full && nv == 2) LN_FULL(2);
    else if (full && nv == 3) LN_FULL(3);
    else switch (nv) {
    case 1: LN_BWD(1); break;
    case 2: LN_BWD(2); break;
    case 3: LN_BWD(3); break;
    case 4: LN_BWD(4); break;
    case 6: LN_BWD(6); break;
    case 8: LN_BWD(8); break;
    default:
        layernorm_bwd_wide_kernel<<<dt_cu_noted(nparts, nt, shm, "layernorm_bwd_wide_kernel"), nt, shm, s>>>(
            dinp16, dres, acc, dweight, dbias, sum, part, dout, inp, weight, mean, rstd, N, C, det, sumv);
    }
#undef LN_BWD
#undef LN_FULL
    if (det || sumv == LN_SUM_DET) dt_cu_fork(s, fs);
    if (det) dt_cu_parts_finish(dweight, dbias, part, nparts, C, fs);
    if (sumv == LN_SUM_DET) dt_cu_parts_finish(sum, NULL, sum_part, nparts, C, fs);
    if (sum && !fused) dt_cu_colsum(sum, sum_part, dinp16, N, C, s, fs); /* wide, C > 2133 */
}

void dt_cu_layernorm_bwd(bf16 *dinp16, int acc, float *dweight, float *dbias, float *part,
                         const bf16 *dout, const bf16 *inp, const float *weight,
                         const float *mean, const float *rstd, int N, int C, cudaStream_t s,
                         cudaStream_t fs) {
    ln_bwd(dinp16, dinp16, acc, dweight, dbias, NULL, part, dout, inp, weight, mean, rstd, N, C, s, fs);
}

void dt_cu_layernorm_bwd_colsum(bf16 *dinp16, int acc, float *dweight, float *dbias, float *sum,
                                float *part, const bf16 *dout, const bf16 *inp, const float *weight,
                                const float *mean, const float *rstd, int N, int C, cudaStream_t s,
                                cudaStream_t fs) {
    ln_bwd(dinp16, dinp16, acc, dweight, dbias, sum, part, dout, inp, weight, mean, rstd, N, C, s, fs);
}

void dt_cu_layernorm_bwd_from(bf16 *dinp16, const bf16 *dres, float *dweight, float *dbias, float *sum,
                              float *part, const bf16 *dout, const bf16 *inp, const float *weight,
                              const float *mean, const float *rstd, int N, int C, cudaStream_t s,
                              cudaStream_t fs) {
    ln_bwd(dinp16, dres, 1, dweight, dbias, sum, part, dout, inp, weight, mean, rstd, N, C, s, fs);
}
