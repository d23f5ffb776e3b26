/* The MoE experts' grouped GEMMs on the GPU (moe_cuda.h): bf16 tensor-core tiles (WMMA
 * 16x16x16, fp32 accumulators) over variable-size groups whose sizes stay on the device
 * (moe_cuda_plan.h's META: offsets and tile starts), launched for the worst case so a CUDA graph
 * of the launches holds for any routing; the per-expert bias column sums; the experts'
 * forward and backward.
 *
 * Why the orders are fixed: a block owns one 128 x 128 output tile and walks K in steps of
 * 32 in order, each step's two 16-deep MMAs in order; which rows a tile holds is a function
 * of the routing only. The det weight gradient is one block an (expert, tile) over the
 * group's rows in order; only the fast one splits the rows and adds the parts with atomics.
 * The column sums: 8 row lanes a column, each over its rows in order, the lanes added in
 * lane order. */
#include "ops/moe/cuda/moe_cuda.h"

#include <mma.h>
#include <type_traits>

using namespace nvcuda;

#define GELU_K 0.7978845608028654f /* sqrt(2/pi), gelu_cuda.cu's constant */

/* GELU and its derivative of a bf16 value, gelu_cuda.cu's formulas. */
static __device__ __forceinline__ float moe_gelu(float x) {
    return 0.5f * x * (1.0f + tanhf(GELU_K * (x + 0.044715f * x * x * x)));
}
static __device__ __forceinline__ float moe_dgelu(float x) {
    float u = GELU_K * (x + 0.044715f * x * x * x), th = tanhf(u), sech2 = 1.0f - th * th;
    return 0.5f * (1.0f + th) + 0.5f * x * sech2 * GELU_K * (1.0f + 3.0f * 0.044715f * x * x);
}

/* 16-byte copy global -> shared that fills zeros when !valid (src-size 0). */
static __device__ __forceinline__ void cp_async16_zfill(void *dst, const void *src, int valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(dst)), "l"(src),
                 "r"(valid ? 16 : 0));
}

enum { TM = DT_CU_MOE_TILE_M, TN = DT_CU_MOE_TILE_N, TK = DT_CU_MOE_TILE_K };
enum { LD_ROW = TK + 8, LD_COL = TM + 8 }; /* padded smem rows: (rows x 32) and (32 x cols) tiles */
enum { STAGE = TM * LD_ROW > TK * LD_COL ? TM * LD_ROW : TK * LD_COL };

/* (128 rows x 32 k) of a row-major matrix (leading dim ld) from row r0, k0 into s[128][40];
 * rows >= rend are zero. 256 threads, 2 vectors each. */
static __device__ __forceinline__ void load_rows(bf16 *s, const bf16 *g, int ld, int r0, int rend, int k0) {
#pragma unroll
    for (int j = 0; j < 2; j++) {
        int i = threadIdx.x + j * 256, r = i >> 2, c = (i & 3) * 8;
        int ok = r0 + r < rend;
        const bf16 *p = g + (size_t)(ok ? r0 + r : 0) * ld + k0 + c;
        cp_async16_zfill(s + r * LD_ROW + c, p, ok);
    }
}
/* (32 k x 128 cols) of a row-major matrix from row k0 (rows >= kend zero), column c0 into
 * s[32][136]. */
static __device__ __forceinline__ void load_kcols(bf16 *s, const bf16 *g, int ld, int k0, int kend, int c0) {
#pragma unroll
    for (int j = 0; j < 2; j++) {
        int i = threadIdx.x + j * 256, r = i >> 4, c = (i & 15) * 8;
        int ok = k0 + r < kend;
        const bf16 *p = g + (size_t)(ok ? k0 + r : 0) * ld + c0 + c;
        cp_async16_zfill(s + r * LD_COL + c, p, ok);
    }
}

enum { GG_FWD, GG_DGRAD, GG_WGRAD };
enum { EPI_GELU, EPI_BIAS, EPI_DGELU, EPI_NONE, EPI_ACC, EPI_ATOMIC };

typedef struct gg_args {
    const bf16 *A, *B;   /* FWD/DGRAD: A the rows (rows, K), B the weights (E, ...); WGRAD: both rows */
    int N, K;            /* FWD/DGRAD: output columns, inner size; WGRAD: N output columns */
    int M;               /* WGRAD: output rows */
    const int *meta;
    int E;
    const bf16 *bias;    /* (E, N) */
    bf16 *out, *out2;    /* (rows, N) */
    const bf16 *aux;     /* DGELU: h (rows, N) */
    float *dw;           /* WGRAD: (E, M, N) */
    int splits;          /* WGRAD: row parts (1: det) */
} gg_args;

/* The fragment layouts of each mode: A row-major (rows x K) or, for WGRAD, stored (K x M);
 * B stored (N x K) for FWD (W_e^T), (K x N) for DGRAD and WGRAD. */
template <int MODE> struct gg_frags {
    typedef wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16,
                           typename std::conditional<MODE == GG_WGRAD, wmma::col_major, wmma::row_major>::type> fa;
    typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16,
                           typename std::conditional<MODE == GG_FWD, wmma::col_major, wmma::row_major>::type> fb;
};

template <int MODE, int EPI> __global__ void __launch_bounds__(256) moe_gg_kernel(gg_args a) {
    __shared__ __align__(128) bf16 smem[4 * STAGE];
    const int *offs = a.meta + DT_CU_MOE_META_OFFS, *tiles = a.meta + DT_CU_MOE_META_TILES;
    int e, row0, rend, kbeg, kend, m0 = 0, n0;
    if (MODE == GG_WGRAD) {
        int tiles_n = a.N / TN;
        e = blockIdx.y;
        m0 = (blockIdx.x / tiles_n) * TM;
        n0 = (blockIdx.x % tiles_n) * TN;
        int R = offs[e + 1] - offs[e];
        kbeg = offs[e] + dt_cu_moe_split_rows(R, a.splits, blockIdx.z);
        kend = offs[e] + dt_cu_moe_split_rows(R, a.splits, blockIdx.z + 1);
        if (kbeg >= kend) return;
        row0 = 0;
        rend = 0;
    } else {
        e = dt_cu_moe_tile_group(tiles, a.E, blockIdx.x);
        if (e < 0) return;
        row0 = offs[e] + (blockIdx.x - tiles[e]) * TM;
        rend = offs[e + 1];
        n0 = blockIdx.y * TN;
        kbeg = 0;
        kend = a.K;
    }
    const bf16 *W = MODE == GG_FWD ? a.B + (size_t)e * a.N * a.K : MODE == GG_DGRAD ? a.B + (size_t)e * a.K * a.N : a.B;
    int nk = (kend - kbeg + TK - 1) / TK;
    auto load = [&](int st, int kt) {
        int k0 = kbeg + kt * TK;
        bf16 *as = smem + st * STAGE, *bs = smem + (2 + st) * STAGE;
        if (MODE == GG_FWD) {
            load_rows(as, a.A, a.K, row0, rend, k0);
            load_rows(bs, W, a.K, n0, a.N, k0);
        } else if (MODE == GG_DGRAD) {
            load_rows(as, a.A, a.K, row0, rend, k0);
            load_kcols(bs, W, a.N, k0, a.K, n0);
        } else {
            load_kcols(as, a.A, a.M, k0, kend, m0);
            load_kcols(bs, a.B, a.N, k0, kend, n0);
        }
        cp_commit();
    };
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, wm = warp >> 2, wn = warp & 3;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[4][2];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 2; j++) wmma::fill_fragment(acc[i][j], 0.0f);
    load(0, 0);
    for (int kt = 0; kt < nk; kt++) {
        int st = kt & 1;
        if (kt + 1 < nk) {
            load(st ^ 1, kt + 1);
            cp_wait1();
        } else {
            cp_wait0();
        }
        __syncthreads();
        const bf16 *as = smem + st * STAGE, *bs = smem + (2 + st) * STAGE;
#pragma unroll
        for (int kk = 0; kk < TK; kk += 16) {
            typename gg_frags<MODE>::fa fa[4];
            typename gg_frags<MODE>::fb fb[2];
#pragma unroll
            for (int i = 0; i < 4; i++) {
                int r = wm * 64 + i * 16;
                if (MODE == GG_WGRAD) wmma::load_matrix_sync(fa[i], as + kk * LD_COL + r, LD_COL);
                else wmma::load_matrix_sync(fa[i], as + r * LD_ROW + kk, LD_ROW);
            }
#pragma unroll
            for (int j = 0; j < 2; j++) {
                int c = wn * 32 + j * 16;
                if (MODE == GG_FWD) wmma::load_matrix_sync(fb[j], bs + c * LD_ROW + kk, LD_ROW);
                else wmma::load_matrix_sync(fb[j], bs + kk * LD_COL + c, LD_COL);
            }
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 2; j++) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
        }
        __syncthreads();
    }
    /* epilogue: each fragment through the warp's 16 x 16 scratch (the stages are free now);
     * lane l writes row l / 2, columns 8 (l % 2) .. + 7 */
    float *scr = reinterpret_cast<float *>(smem) + warp * 256;
    int er = lane >> 1, ec = (lane & 1) * 8;
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 2; j++) {
            wmma::store_matrix_sync(scr, acc[i][j], 16, wmma::mem_row_major);
            __syncwarp();
            float v[8];
#pragma unroll
            for (int q = 0; q < 8; q++) v[q] = scr[er * 16 + ec + q];
            __syncwarp();
            int col = n0 + wn * 32 + j * 16 + ec;
            if (MODE == GG_WGRAD) {
                int m = m0 + wm * 64 + i * 16 + er;
                float *o = a.dw + ((size_t)e * a.M + m) * a.N + col;
                if (EPI == EPI_ATOMIC) {
#pragma unroll
                    for (int q = 0; q < 8; q++) atomicAdd(o + q, v[q]);
                } else {
                    float4 o0 = *reinterpret_cast<float4 *>(o), o1 = *reinterpret_cast<float4 *>(o + 4);
                    o0.x += v[0], o0.y += v[1], o0.z += v[2], o0.w += v[3];
                    o1.x += v[4], o1.y += v[5], o1.z += v[6], o1.w += v[7];
                    *reinterpret_cast<float4 *>(o) = o0;
                    *reinterpret_cast<float4 *>(o + 4) = o1;
                }
                continue;
            }
            int r = row0 + wm * 64 + i * 16 + er;
            if (r >= rend) continue;
            size_t at = (size_t)r * a.N + col;
            dt_bf16x8 o, o2;
            if (EPI == EPI_GELU || EPI == EPI_BIAS) {
                dt_bf16x8 bv = dt_ld8(a.bias + (size_t)e * a.N + col);
#pragma unroll
                for (int q = 0; q < 8; q++) {
                    o.v[q] = __float2bfloat16(v[q] + __bfloat162float(bv.v[q]));
                    if (EPI == EPI_GELU) o2.v[q] = __float2bfloat16(moe_gelu(__bfloat162float(o.v[q])));
                }
                if (EPI == EPI_GELU) dt_st8(a.out2 + at, o2);
            } else if (EPI == EPI_DGELU) {
                dt_bf16x8 hv = dt_ld8(a.aux + at);
#pragma unroll
                for (int q = 0; q < 8; q++)
                    o.v[q] = __float2bfloat16(__bfloat162float(__float2bfloat16(v[q])) *
                                              moe_dgelu(__bfloat162float(hv.v[q])));
            } else {
#pragma unroll
                for (int q = 0; q < 8; q++) o.v[q] = __float2bfloat16(v[q]);
            }
            dt_st8(a.out + at, o);
        }
}

void dt_cu_moe_gg(int kind, bf16 *out, bf16 *out2, const bf16 *aux, const bf16 *A, const bf16 *W, const bf16 *bias,
                  int N, int K, const dt_cu_moe_ws *w, const dt_moe_dims *d, cudaStream_t s) {
    gg_args a;
    memset(&a, 0, sizeof a);
    a.A = A;
    a.B = W;
    a.N = N;
    a.K = K;
    a.meta = w->meta;
    a.E = d->E;
    a.bias = bias;
    a.out = out;
    a.out2 = out2;
    a.aux = aux;
    dim3 g((unsigned)dt_cu_moe_max_mtiles(d), (unsigned)(N / TN));
    switch (kind) {
    case DT_CU_MOE_GG_FWD_GELU:
        moe_gg_kernel<GG_FWD, EPI_GELU><<<dt_cu_noted(g, 256, 0, "moe_gg_fwd_gelu"), 256, 0, s>>>(a);
        break;
    case DT_CU_MOE_GG_FWD:
        moe_gg_kernel<GG_FWD, EPI_BIAS><<<dt_cu_noted(g, 256, 0, "moe_gg_fwd_bias"), 256, 0, s>>>(a);
        break;
    case DT_CU_MOE_GG_DGRAD_DGELU:
        moe_gg_kernel<GG_DGRAD, EPI_DGELU><<<dt_cu_noted(g, 256, 0, "moe_gg_dgrad_dgelu"), 256, 0, s>>>(a);
        break;
    default:
        moe_gg_kernel<GG_DGRAD, EPI_NONE><<<dt_cu_noted(g, 256, 0, "moe_gg_dgrad"), 256, 0, s>>>(a);
        break;
    }
}

void dt_cu_moe_gg_wgrad(float *dw, const bf16 *A, const bf16 *B, int M, int N, const dt_cu_moe_ws *w,
                        const dt_moe_dims *d, int det, cudaStream_t s) {
    gg_args a;
    memset(&a, 0, sizeof a);
    a.A = A;
    a.B = B;
    a.M = M;
    a.N = N;
    a.meta = w->meta;
    a.E = d->E;
    a.dw = dw;
    a.splits = det ? 1 : DT_CU_MOE_WGRAD_SPLITS;
    dim3 g((unsigned)((M / TM) * (N / TN)), (unsigned)d->E, (unsigned)a.splits);
    if (det) moe_gg_kernel<GG_WGRAD, EPI_ACC><<<dt_cu_noted(g, 256, 0, "moe_gg_wgrad_det"), 256, 0, s>>>(a);
    else moe_gg_kernel<GG_WGRAD, EPI_ATOMIC><<<dt_cu_noted(g, 256, 0, "moe_gg_wgrad_fast"), 256, 0, s>>>(a);
}

/* db[e][col] += sum of group e's rows of x: block (32 columns, expert); 8 row lanes, each
 * over rows offs[e] + lane, + 8, ... in order; the lanes added in lane order. */
__global__ void __launch_bounds__(256) moe_group_colsum_kernel(float *db, const bf16 *x, int cols, const int *meta) {
    __shared__ float sh[8][33];
    int e = blockIdx.y, col = blockIdx.x * 32 + threadIdx.x, lane = threadIdx.y;
    int r0 = meta[DT_CU_MOE_META_OFFS + e], r1 = meta[DT_CU_MOE_META_OFFS + e + 1];
    float s = 0.0f;
    if (col < cols)
        for (int r = r0 + lane; r < r1; r += 8) s += __bfloat162float(x[(size_t)r * cols + col]);
    sh[lane][threadIdx.x] = s;
    __syncthreads();
    if (lane != 0 || col >= cols || r0 == r1) return;
    float t = sh[0][threadIdx.x];
    for (int j = 1; j < 8; j++) t += sh[j][threadIdx.x];
    db[(size_t)e * cols + col] += t;
}

void dt_cu_moe_group_colsum(float *db, const bf16 *x, int cols, const dt_cu_moe_ws *w, const dt_moe_dims *d,
                            cudaStream_t s) {
    dim3 g(dt_cu_div((size_t)cols, 32), (unsigned)d->E), b(32, 8);
    moe_group_colsum_kernel<<<dt_cu_noted(g, b, 0, "moe_group_colsum_kernel"), b, 0, s>>>(db, x, cols, w->meta);
}

void dt_cu_moe_experts_fwd(dt_cu_moe_ws *w, const dt_cu_moe_params *p, const dt_moe_dims *d, cudaStream_t s) {
    dt_cu_moe_gg(DT_CU_MOE_GG_FWD_GELU, w->h, w->a, NULL, w->xp, p->w1, p->b1, d->F, d->C, w, d, s);
    dt_cu_moe_gg(DT_CU_MOE_GG_FWD, w->yp, NULL, NULL, w->a, p->w2, p->b2, d->C, d->F, w, d, s);
}

void dt_cu_moe_experts_bwd(dt_cu_moe_ws *w, const dt_cu_moe_params *p, const dt_cu_moe_grads *g,
                           const dt_moe_dims *d, int det, cudaStream_t s) {
    /* dh = (dyp W2_e) GELU'(h): W2 (E, C, F) is (K = C) x (N = F) */
    dt_cu_moe_gg(DT_CU_MOE_GG_DGRAD_DGELU, w->dh, NULL, w->h, w->dyp, p->w2, NULL, d->F, d->C, w, d, s);
    dt_cu_moe_gg_wgrad(g->w2, w->dyp, w->a, d->C, d->F, w, d, det, s);
    dt_cu_moe_group_colsum(g->b2, w->dyp, d->C, w, d, s);
    dt_cu_moe_gg_wgrad(g->w1, w->dh, w->xp, d->F, d->C, w, d, det, s);
    dt_cu_moe_group_colsum(g->b1, w->dh, d->F, w, d, s);
    /* dxp = dh W1_e: W1 (E, F, C) is (K = F) x (N = C) */
    dt_cu_moe_gg(DT_CU_MOE_GG_DGRAD, w->dxp, NULL, NULL, w->dh, p->w1, NULL, d->C, d->F, w, d, s);
}
