/* LayerNorm on the GPU (see layernorm.h, ops_cuda.h). C must be a multiple of 8 (the
 * model checks). One warp owns a row: its sums are warp butterflies, a fixed order. */
#include "ops/ops_cuda.h"

#include "ops/cuda_plan.h"

#define LN_EPS 1e-5f

/* Forward, optionally fused with the residual add res = a + dropout(b). */
__global__ void layernorm_fwd_kernel(bf16 *out, float *mean, float *rstd, bf16 *res, const bf16 *a,
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

#define LN_BWD_WARPS 8

/* Backward. Block k owns rows [k*R, (k+1)*R) (R = DT_CU_LN_ROWS); warp w takes rows
 * w, w+8, ... of them in order and accumulates dweight/dbias for its channels in its own
 * shared-memory row; the eight warp rows are then added in warp order. det writes the
 * block partial (summed by dt_cu_parts_finish); fast adds it into dweight/dbias with
 * atomics. */
__global__ void layernorm_bwd_kernel(float *dinp, bf16 *dinp16, float *dweight, float *dbias,
                                     float *part, const bf16 *dout, const bf16 *inp, const float *w,
                                     const float *mean, const float *rstd, int N, int C, int det) {
    /* [LN_BWD_WARPS][2][C], channel c = 8v + k stored at k * C/8 + v: consecutive lanes
     * (consecutive v) hit consecutive banks */
    extern __shared__ float sh[];
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nparts = gridDim.x, C8 = C / 8;
    float *dw = sh + (size_t)warp * 2 * C, *db = dw + C;
    for (int c = lane; c < C; c += 32) dw[c] = db[c] = 0.0f;
    __syncwarp();
    int r0 = blockIdx.x * DT_CU_LN_ROWS, r1 = min(r0 + DT_CU_LN_ROWS, N);
    for (int row = r0 + warp; row < r1; row += LN_BWD_WARPS) {
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
            float4 *dp = reinterpret_cast<float4 *>(dinp + base + v * 8);
            float4 d0 = dp[0], d1 = dp[1];
            float di[8] = {d0.x, d0.y, d0.z, d0.w, d1.x, d1.y, d1.z, d1.w};
#pragma unroll
            for (int k = 0; k < 8; k++) {
                int c = v * 8 + k;
                float g = __bfloat162float(gv.v[k]);
                float n = (__bfloat162float(xv.v[k]) - m) * r, dn = w[c] * g;
                db[k * C8 + v] += g;
                dw[k * C8 + v] += n * g;
                di[k] += (dn - sdn - n * sdnn) * r;
                o.v[k] = __float2bfloat16(di[k]);
            }
            dp[0] = make_float4(di[0], di[1], di[2], di[3]);
            dp[1] = make_float4(di[4], di[5], di[6], di[7]);
            dt_st8(dinp16 + base + v * 8, o);
        }
    }
    __syncthreads();
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float sw = 0.0f, sb = 0.0f;
        int at = (c % 8) * C8 + c / 8;
        for (int k = 0; k < LN_BWD_WARPS; k++) { /* warp order */
            sw += sh[(size_t)k * 2 * C + at];
            sb += sh[(size_t)k * 2 * C + C + at];
        }
        if (det) {
            part[(size_t)blockIdx.x * C + c] = sw;
            part[(size_t)(nparts + blockIdx.x) * C + c] = sb;
        } else {
            atomicAdd(&dweight[c], sw);
            atomicAdd(&dbias[c], sb);
        }
    }
}

void dt_cu_layernorm_fwd(bf16 *out, float *mean, float *rstd, bf16 *res, const bf16 *a,
                         const bf16 *b, const float *weight, const float *bias, int N, int C,
                         const dt_dropout *drop, uint32_t purpose, uint32_t layer,
                         cudaStream_t s) {
    layernorm_fwd_kernel<<<dt_cu_div((size_t)N, 8), 256, 0, s>>>(
        out, mean, rstd, res, a, b, weight, bias, N, C, dt_cu_drop_arg(drop), purpose, layer);
}

void dt_cu_layernorm_bwd(float *dinp, bf16 *dinp16, float *dweight, float *dbias, float *part,
                         const bf16 *dout, const bf16 *inp, const float *weight,
                         const float *mean, const float *rstd, int N, int C, cudaStream_t s,
                         cudaStream_t fs) {
    int det = dt_op_variant(DT_OP_LAYERNORM_BWD) == DT_VARIANT_DET, nparts = dt_cu_ln_parts(N);
    size_t shm = sizeof(float) * 2 * LN_BWD_WARPS * (size_t)C;
    static int attr_set;
    if (!attr_set) {
        cudaFuncSetAttribute(layernorm_bwd_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             200 * 1024);
        attr_set = 1;
    }
    layernorm_bwd_kernel<<<nparts, 32 * LN_BWD_WARPS, shm, s>>>(dinp, dinp16, dweight, dbias, part,
                                                               dout, inp, weight, mean, rstd, N, C, det);
    if (det) {
        dt_cu_fork(s, fs);
        dt_cu_parts_finish(dweight, dbias, part, nparts, C, fs);
    }
}
