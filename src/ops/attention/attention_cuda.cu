/* Causal self-attention on the GPU (see attention.h, attention_cuda.h), through cuBLASLt batched
 * GEMMs over the B*NH heads and row softmax kernels.
 *
 * Scratch layout (bf16): q, k, v, y/dy, dq, dk, dv: 7 blocks of B*NH*T*HS; then S (B*NH*T*T)
 * holding the scores and, in backward, dS; then, with attention dropout, D (B*NH*T*T) the
 * dropped probabilities.
 *
 * Causal blocking: the T rows are cut into NCH chunks of h = T/NCH (a function of T only);
 * row chunk c needs key columns [0, (c+1)h) only, so every T x T product runs per chunk on
 * that lower staircase (10/16 of the square for 4 chunks) and the softmax kernels write
 * nothing right of it (those entries are never read).
 *
 * Why both branches are deterministic: every output element is produced by exactly one
 * GEMM element (pinned algorithm, no split-K in det mode) or one softmax row owned by one
 * warp (butterfly sums). dQ = dS k is a GEMM, so its sum over keys runs inside one tile in
 * a fixed order: there are no atomics to switch off. */
#include "ops/attention/attention_cuda.h"

#include <math.h>

size_t dt_cu_attention_scratch(int B, int T, int C, int NH, int dropout) {
    size_t BT = (size_t)B * T, S = (size_t)B * NH * T * T;
    return 7 * BT * C + S * (dropout ? 2 : 1);
}

/* qkv (B,T,3,NH,HS) -> q, k, v (B,NH,T,HS); 8 elements a thread. */
__global__ void permute_kernel(bf16 *q, bf16 *k, bf16 *v, const bf16 *qkv, int B, int T, int NH, int HS) {
    size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 8, n = (size_t)B * NH * T * HS;
    if (i >= n) return;
    int d = (int)(i % HS), t = (int)((i / HS) % T), h = (int)((i / HS / T) % NH), b = (int)(i / HS / T / NH);
    int C = NH * HS;
    const bf16 *src = qkv + ((size_t)b * T + t) * 3 * C + h * HS + d;
    dt_st8(q + i, dt_ld8(src));
    dt_st8(k + i, dt_ld8(src + C));
    dt_st8(v + i, dt_ld8(src + 2 * C));
}

/* x (B,T,NH,HS) -> y (B,NH,T,HS). */
__global__ void permute1_kernel(bf16 *y, const bf16 *x, int B, int T, int NH, int HS) {
    size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 8, n = (size_t)B * NH * T * HS;
    if (i >= n) return;
    int d = (int)(i % HS), t = (int)((i / HS) % T), h = (int)((i / HS / T) % NH), b = (int)(i / HS / T / NH);
    dt_st8(y + i, dt_ld8(x + ((size_t)b * T + t) * NH * HS + h * HS + d));
}

/* D = bf16(att * mask), the dropped probabilities, from the stored probabilities. */
__global__ void drop_probs_kernel(bf16 *D, const bf16 *att, size_t n, dt_dropout d, uint32_t layer) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float p = __bfloat162float(att[i]);
    D[i] = __float2bfloat16(p != 0.0f ? p * dt_cu_drop_factor(d, DT_RNG_DROPOUT_ATTN, layer, i) : 0.0f);
}

/* y (B,NH,T,HS) -> out (B,T,NH,HS); with dq/dk/dv it writes dqkv (B,T,3,NH,HS). */
__global__ void unpermute_kernel(bf16 *out, const bf16 *y, const bf16 *y2, const bf16 *y3, int B,
                                 int T, int NH, int HS) {
    size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 8, n = (size_t)B * NH * T * HS;
    if (i >= n) return;
    int d = (int)(i % HS), t = (int)((i / HS) % T), h = (int)((i / HS / T) % NH), b = (int)(i / HS / T / NH);
    int C = NH * HS, parts = y2 ? 3 : 1;
    bf16 *dst = out + ((size_t)b * T + t) * parts * C + h * HS + d;
    dt_st8(dst, dt_ld8(y + i));
    if (y2) {
        dt_st8(dst + C, dt_ld8(y2 + i));
        dt_st8(dst + 2 * C, dt_ld8(y3 + i));
    }
}

/* Row chunks of the causal staircase: 4 when T % 32 == 0 (chunk rows stay 16-byte aligned),
 * else 1. */
static int att_chunks(int T) { return T % 32 == 0 ? 4 : 1; }

/* One warp per row (bh, t): causal softmax of the (already scaled) scores, written as
 * probabilities with zeros above the diagonal up to the end of the row's chunk (h). */
__global__ void softmax_fwd_kernel(bf16 *att, const bf16 *S, int rows, int T, int h) {
    int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= rows) return;
    int t = row % T, lim = min(T, (t / h + 1) * h);
    const bf16 *x = S + (size_t)row * T;
    float m = -INFINITY;
    for (int j = lane; j <= t; j += 32) m = fmaxf(m, __bfloat162float(x[j]));
    m = dt_warp_max(m);
    float s = 0.0f;
    for (int j = lane; j <= t; j += 32) s += expf(__bfloat162float(x[j]) - m);
    float inv = 1.0f / dt_warp_sum(s);
    bf16 *o = att + (size_t)row * T;
    for (int j = lane; j < lim; j += 32) {
        float p = j <= t ? expf(__bfloat162float(x[j]) - m) * inv : 0.0f;
        o[j] = __float2bfloat16(p);
    }
}

/* One warp per row: dS = P * (dP - sum(P * dP)), dP = dD * mask when dropout is on. In place
 * on dS (which holds dD on entry). */
__global__ void softmax_bwd_kernel(bf16 *dS, const bf16 *att, int rows, int T, int h, dt_dropout d,
                                   uint32_t layer) {
    int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= rows) return;
    int t = row % T, lim = min(T, (t / h + 1) * h);
    bf16 *g = dS + (size_t)row * T;
    const bf16 *p = att + (size_t)row * T;
    float dot = 0.0f;
    for (int j = lane; j <= t; j += 32) {
        float dp = __bfloat162float(g[j]);
        if (d.p > 0.0f) dp *= dt_cu_drop_factor(d, DT_RNG_DROPOUT_ATTN, layer, (size_t)row * T + j);
        dot += __bfloat162float(p[j]) * dp;
    }
    dot = dt_warp_sum(dot);
    for (int j = lane; j < lim; j += 32) {
        float r = 0.0f;
        if (j <= t) {
            float dp = __bfloat162float(g[j]);
            if (d.p > 0.0f) dp *= dt_cu_drop_factor(d, DT_RNG_DROPOUT_ATTN, layer, (size_t)row * T + j);
            r = __bfloat162float(p[j]) * (dp - dot);
        }
        g[j] = __float2bfloat16(r);
    }
}

/* Batched row-major GEMM over the B*NH heads. */
static dt_status bgemm(dt_cu_blas *h, int ta, int tb, int M, int N, int K, const bf16 *A, int lda,
                       long long sA, const bf16 *B, int ldb, long long sB, bf16 *C, int ldc,
                       long long sC, float alpha, int batch, cudaStream_t s) {
    dt_cu_gemm_args a = {ta, tb, M, N, K, A, lda, sA, B, ldb, sB, C, ldc, sC, 0, alpha, 0.0f, batch, NULL};
    return dt_cu_gemm(h, &a, s);
}

dt_status dt_cu_attention_fwd(dt_cu_blas *h, bf16 *out, bf16 *att, const bf16 *qkv, bf16 *scratch,
                              int B, int T, int C, int NH, const dt_dropout *drop,
                              uint32_t layer, cudaStream_t s) {
    int HS = C / NH, BH = B * NH;
    size_t blk = (size_t)B * T * C, TT = (size_t)T * T;
    bf16 *q = scratch, *k = q + blk, *v = k + blk, *y = v + blk, *S = scratch + 7 * blk;
    bf16 *D = dt_dropout_on(drop) ? S + (size_t)BH * TT : NULL;
    permute_kernel<<<dt_cu_noted(dt_cu_div(blk / 8, 256), 256, 0, "permute_kernel"), 256, 0, s>>>(q, k, v, qkv, B, T, NH, HS);
    dt_status st;
    float scale = 1.0f / sqrtf((float)HS);
    int nch = att_chunks(T), ch = T / nch;
    long long sh = (long long)T * HS;
    /* S[c] (rows of chunk c, keys [0, (c+1)h)) = q[c] k^T */
    for (int c = 0; c < nch; c++)
        if ((st = bgemm(h, 0, 1, ch, (c + 1) * ch, HS, q + (size_t)c * ch * HS, HS, sh, k, HS, sh,
                        S + (size_t)c * ch * T, T, (long long)TT, scale, BH, s)) != DT_OK) return st;
    softmax_fwd_kernel<<<dt_cu_noted(dt_cu_div((size_t)BH * T, 8), 256, 0, "softmax_fwd_kernel"), 256, 0, s>>>(att, S, BH * T, T, ch);
    if (D)
        drop_probs_kernel<<<dt_cu_noted(dt_cu_div((size_t)BH * TT, 256), 256, 0, "drop_probs_kernel"), 256, 0, s>>>(D, att, (size_t)BH * TT,
                                                                         dt_cu_drop_arg(drop), layer);
    /* y[c] = P[c, keys [0, (c+1)h)] v[0, (c+1)h) */
    const bf16 *P = D ? D : att;
    for (int c = 0; c < nch; c++)
        if ((st = bgemm(h, 0, 0, ch, HS, (c + 1) * ch, P + (size_t)c * ch * T, T, (long long)TT, v, HS, sh,
                        y + (size_t)c * ch * HS, HS, sh, 1.0f, BH, s)) != DT_OK) return st;
    unpermute_kernel<<<dt_cu_noted(dt_cu_div(blk / 8, 256), 256, 0, "unpermute_kernel"), 256, 0, s>>>(out, y, NULL, NULL, B, T, NH, HS);
    return DT_OK;
}

dt_status dt_cu_attention_bwd(dt_cu_blas *h, bf16 *dqkv, const bf16 *dout, const bf16 *qkv,
                              const bf16 *att, bf16 *scratch, int B, int T, int C, int NH,
                              const dt_dropout *drop, uint32_t layer, cudaStream_t s) {
    int HS = C / NH, BH = B * NH;
    size_t blk = (size_t)B * T * C, TT = (size_t)T * T;
    long long sh = (long long)T * HS;
    bf16 *q = scratch, *k = q + blk, *v = k + blk, *dy = v + blk, *dq = dy + blk, *dk = dq + blk,
         *dv = dk + blk, *dS = scratch + 7 * blk;
    int dropping = dt_dropout_on(drop);
    bf16 *D = dropping ? dS + (size_t)BH * TT : NULL;
    dt_dropout d = dt_cu_drop_arg(drop);
    permute_kernel<<<dt_cu_noted(dt_cu_div(blk / 8, 256), 256, 0, "permute_kernel"), 256, 0, s>>>(q, k, v, qkv, B, T, NH, HS);
    /* dy (B,NH,T,HS) from dout (B,T,C): the same permutation as q */
    permute1_kernel<<<dt_cu_noted(dt_cu_div(blk / 8, 256), 256, 0, "permute1_kernel"), 256, 0, s>>>(dy, dout, B, T, NH, HS);
    dt_status st;
    if (D) /* the dropped probabilities again, for dV */
        drop_probs_kernel<<<dt_cu_noted(dt_cu_div((size_t)BH * TT, 256), 256, 0, "drop_probs_kernel"), 256, 0, s>>>(D, att, (size_t)BH * TT, d, layer);
    int nch = att_chunks(T), ch = T / nch;
    const bf16 *P = D ? D : att;
    for (int c = 0; c < nch; c++) {
        size_t r0 = (size_t)c * ch;
        /* dD[c] = dy[c] v^T over keys [0, (c+1)h) */
        if ((st = bgemm(h, 0, 1, ch, (c + 1) * ch, HS, dy + r0 * HS, HS, sh, v, HS, sh, dS + r0 * T, T,
                        (long long)TT, 1.0f, BH, s)) != DT_OK) return st;
        /* dV[key chunk c] = P[rows [ch*c, T), keys of chunk c]^T dy[rows [ch*c, T)] */
        if ((st = bgemm(h, 1, 0, ch, HS, T - (int)r0, P + r0 * T + r0, T, (long long)TT, dy + r0 * HS, HS, sh,
                        dv + r0 * HS, HS, sh, 1.0f, BH, s)) != DT_OK) return st;
    }
    softmax_bwd_kernel<<<dt_cu_noted(dt_cu_div((size_t)BH * T, 8), 256, 0, "softmax_bwd_kernel"), 256, 0, s>>>(dS, att, BH * T, T, ch, d, layer);
    float scale = 1.0f / sqrtf((float)HS);
    for (int c = 0; c < nch; c++) {
        size_t r0 = (size_t)c * ch;
        /* dQ[c] = dS[c, keys [0, (c+1)h)] k * scale */
        if ((st = bgemm(h, 0, 0, ch, HS, (c + 1) * ch, dS + r0 * T, T, (long long)TT, k, HS, sh,
                        dq + r0 * HS, HS, sh, scale, BH, s)) != DT_OK) return st;
        /* dK[key chunk c] = dS[rows [ch*c, T), keys of chunk c]^T q[rows [ch*c, T)] * scale */
        if ((st = bgemm(h, 1, 0, ch, HS, T - (int)r0, dS + r0 * T + r0, T, (long long)TT, q + r0 * HS, HS, sh,
                        dk + r0 * HS, HS, sh, scale, BH, s)) != DT_OK) return st;
    }
    unpermute_kernel<<<dt_cu_noted(dt_cu_div(blk / 8, 256), 256, 0, "unpermute_kernel"), 256, 0, s>>>(dqkv, dq, dk, dv, B, T, NH, HS);
    return DT_OK;
}
