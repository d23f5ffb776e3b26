/* Flash-attention forward on Hopper's warpgroup MMA (wgmma.mma_async, sm_90a):
 * dt_cu_flash_fwd_wgmma (ops_cuda.h), the model's forward on sm_90. Same shapes and bits as
 * dt_cu_flash_fwd (attention_flash_cuda.cu: head size 64, T % 64 == 0, causal, no dropout;
 * out (B,T,C) bf16, lse (B NH, T) fp32 natural log): tests/gpu/test_gpu_wgmma.cu compares
 * the bytes and times both. This file alone is compiled for sm_90a
 * (Makefile: WGMMA_OBJ); the plain sm_90 target has no wgmma.
 *
 * A block owns M 64-row query blocks (M = 2 when T % 128 == 0, else 1), one consumer
 * warpgroup (4 warps, 128 threads) each. Tiles of 64 rows x 64 channels (bf16, 128 bytes a
 * row, 8 KB) sit in shared memory in the 128-byte swizzle (wgmma_desc.h), filled by cp.async
 * through a 3-stage K/V ring (one barrier a tile), as in the mma.sync kernel. Per key tile a
 * warpgroup issues
 *   S = Q K^T: 4 x wgmma m64n64k16, A = Q and B = K both from shared memory (K-major
 *     descriptors, the start address 32 bytes further each 16-channel step);
 *   online softmax on S in registers (fp32; the accumulator layout of m64n64 is, per warp,
 *     the mma.sync m16n8 layout over 8 column groups, so this is the mma.sync kernel's code);
 *   O += P V: 4 x wgmma m64n64k16 with P (bf16) from registers as A (the accumulator
 *     repacked, same as the mma.sync A fragments) and V from shared memory as B through an
 *     MN-major descriptor (imm-trans-b = 1: V's rows are keys, channels contiguous).
 * Each chain is fenced (wgmma.fence), committed and waited for before its registers are
 * read. cp.async writes shared memory through the generic proxy and wgmma reads it through
 * the async proxy: every thread runs fence.proxy.async after its copies complete and before
 * the barrier that publishes them.
 *
 * Determinism: one warpgroup owns each output row; it walks key tiles 0..its diagonal in
 * order, each product reduces over its k-steps in order inside the tensor core, row maxima
 * and sums merge by xor butterflies (the same bits on the 4 lanes of a row): a fixed order,
 * no atomics. Exponentials are ex2.approx.ftz with the scale 1/sqrt(64) * log2(e) folded. */
#include "ops/ops_cuda.h"
#include "ops/wgmma_cuda.cuh"

#include <stdint.h>

#define WSTAGES 3 /* K/V ring depth */
/* Q (M tiles), then K, V per stage; + 1024 so that the tiles can start 1024-byte aligned
 * (the swizzle atom: wgmma_desc.h). */
#define WSMEM(M) ((size_t)((M) + 2 * WSTAGES) * WTILE + 1024)

/* ---- the kernel (accumulator and register-A layouts: wgmma_cuda.cuh) ------------------ */

/* Online softmax step (the mma.sync kernel's fwd_softmax on the wgmma accumulator): s (raw
 * Q K^T of the thread's rows row, row + 8 x 64 keys) becomes exp2(s sl2 - max sl2); the
 * running max m (raw units), the per-thread partial sums l and o are rescaled by the change
 * of the max. diag: key column c is visible to local row r iff c <= r. Explicit _rn
 * operations: no contraction. */
static __device__ __forceinline__ void wg_softmax(float s[32], float o[32], float m[2], float l[2], int diag, int row,
                                                  int t, float sl2) {
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < 8; n++)
#pragma unroll
        for (int i = 0; i < 4; i++) {
            if (diag && n * 8 + 2 * t + (i & 1) > row + 8 * (i >> 1)) s[4 * n + i] = -INFINITY;
            mx[i >> 1] = fmaxf(mx[i >> 1], s[4 * n + i]);
        }
    float ms[2], corr[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
        float mn = fmaxf(m[r], mx[r]); /* finite: key 0 is visible to every query */
        ms[r] = __fmul_rn(mn, sl2);
        corr[r] = ex2(__fsub_rn(__fmul_rn(m[r], sl2), ms[r])); /* 0 on the first tile (m = -inf) */
        m[r] = mn;
    }
#pragma unroll
    for (int i = 0; i < 32; i++) s[i] = ex2(__fmaf_rn(s[i], sl2, -ms[(i >> 1) & 1]));
#pragma unroll
    for (int r = 0; r < 2; r++) { /* this tile's row sums: pairs, then a tree */
        float ps[4];
#pragma unroll
        for (int q = 0; q < 4; q++)
            ps[q] = __fadd_rn(__fadd_rn(s[8 * q + 2 * r], s[8 * q + 2 * r + 1]),
                              __fadd_rn(s[8 * q + 4 + 2 * r], s[8 * q + 4 + 2 * r + 1]));
        l[r] = __fadd_rn(__fmul_rn(l[r], corr[r]), __fadd_rn(__fadd_rn(ps[0], ps[1]), __fadd_rn(ps[2], ps[3])));
    }
#pragma unroll
    for (int i = 0; i < 32; i++) o[i] = __fmul_rn(o[i], corr[(i >> 1) & 1]);
}

/* One key tile (K at sK, V at sK + WTILE, shared addresses) for the warpgroup whose Q
 * descriptor is dq (k-step 0). */
static __device__ __forceinline__ void wg_tile(float o[32], float m[2], float l[2], uint64_t dq, uint32_t sK, int diag,
                                               int row, int t, float sl2) {
    /* K-major: SBO 1024 (8 rows of 128 bytes), LBO unused (1); MN-major V: SBO 1024 (8 key
     * rows), LBO a whole tile (the next 64 channels, which m64n64 never reads). A 16-wide
     * k-step is +32 bytes (+2 encoded) along K-major rows, +16 rows = 2048 bytes (+128) of V. */
    const uint64_t dk = dt_wgmma_desc(sK, 16, 1024, DT_WGMMA_SWIZZLE_128B);
    const uint64_t dv = dt_wgmma_desc(sK + WTILE, WTILE, 1024, DT_WGMMA_SWIZZLE_128B);
    float s[32];
#pragma unroll
    for (int i = 0; i < 32; i++) s[i] = 0.0f; /* not read (scale-d 0 on the first step): defined for the compiler */
    reg_fence(s);
    wg_fence();
#pragma unroll
    for (int k = 0; k < 4; k++) wgmma_ss(s, dq + (uint64_t)(2 * k), dk + (uint64_t)(2 * k), k > 0);
    wg_commit();
    wg_wait0();
    reg_fence(s);
    wg_softmax(s, o, m, l, diag, row, t, sl2);
    uint32_t p[4][4]; /* P as bf16 A fragments, p[k] for keys 16k..16k+15 */
#pragma unroll
    for (int k = 0; k < 4; k++) {
        p[k][0] = pack(s[8 * k], s[8 * k + 1]);     /* row g, keys 16k + 2t, +1 */
        p[k][1] = pack(s[8 * k + 2], s[8 * k + 3]); /* row g + 8 */
        p[k][2] = pack(s[8 * k + 4], s[8 * k + 5]); /* row g, keys 16k + 8 + 2t, +1 */
        p[k][3] = pack(s[8 * k + 6], s[8 * k + 7]); /* row g + 8 */
    }
    reg_fence(o);
    wg_fence();
#pragma unroll
    for (int k = 0; k < 4; k++) wgmma_rs_t(o, p[k], dv + (uint64_t)(128 * k));
    wg_commit();
    wg_wait0();
    reg_fence(o);
}

/* Grid (B NH T / (64 M)), 128 M threads, WSMEM(M) bytes of dynamic shared memory. Block i
 * owns head bh = i % (B NH) and query rows 64 j0 .. 64 (j0 + M) - 1, the heavy (late)
 * query blocks of every head first; warpgroup wg owns query block j0 + wg. */
template <int M>
__global__ void __launch_bounds__(128 * M, M == 1 ? 3 : 2)
    flash_fwd_wgmma_kernel(bf16 *out, float *lse, const bf16 *qkv, int T, int NH, float sl2) {
    extern __shared__ __align__(1024) unsigned char wsm_raw[];
    const uint32_t raw = smem_u32(wsm_raw), pad = (1024u - (raw & 1023u)) & 1023u;
    unsigned char *sm = wsm_raw + pad; /* Q tiles, then stage i: K at 2 i WTILE, V after it */
    const uint32_t sQ = raw + pad, sKV = sQ + M * WTILE;
    const int tid = (int)threadIdx.x, wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31, g = lane >> 2,
              t = lane & 3;
    const int nqb = T / (M * WB), BH = (int)gridDim.x / nqb, bh = (int)blockIdx.x % BH, b = bh / NH, h = bh % NH;
    const int j0 = (nqb - 1 - (int)blockIdx.x / BH) * M, nk = j0 + M, jq = j0 + wg; /* key tiles 0..nk-1 */
    const int C = NH * WD, C3 = 3 * C, row = warp * 16 + g;
    const bf16 *base = qkv + (size_t)b * T * C3 + h * WD;
#pragma unroll
    for (int j = 0; j < M; j++) wg_cp_tile<128 * M>(sm + j * WTILE, base + (size_t)(j0 + j) * WB * C3, C3);
    wg_cp_tile<128 * M>(sm + M * WTILE, base + C, C3);
    wg_cp_tile<128 * M>(sm + M * WTILE + WTILE, base + 2 * C, C3);
    cp_commit();
    if (nk > 1) {
        wg_cp_tile<128 * M>(sm + (M + 2) * WTILE, base + C + (size_t)WB * C3, C3);
        wg_cp_tile<128 * M>(sm + (M + 3) * WTILE, base + 2 * C + (size_t)WB * C3, C3);
    }
    cp_commit();
    const uint64_t dq = dt_wgmma_desc(sQ + wg * WTILE, 16, 1024, DT_WGMMA_SWIZZLE_128B);
    float o[32], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
#pragma unroll
    for (int i = 0; i < 32; i++) o[i] = 0.0f;
    int st = 0; /* stage of tile kt */
    for (int kt = 0; kt < nk; kt++) {
        cp_wait1();          /* this thread's copies of tile kt (and of Q) are done */
        fence_proxy_async(); /* ... and ordered before the tensor cores' reads */
        __syncthreads();     /* everyone's are; both warpgroups are done with tile kt - 1 */
        if (kt + 2 < nk) {
            unsigned char *d = sm + M * WTILE + (st == 0 ? 2 : st - 1) * 2 * WTILE;
            wg_cp_tile<128 * M>(d, base + C + (size_t)(kt + 2) * WB * C3, C3);
            wg_cp_tile<128 * M>(d + WTILE, base + 2 * C + (size_t)(kt + 2) * WB * C3, C3);
        }
        cp_commit(); /* possibly empty: one group per tile keeps the wait count fixed */
        const uint32_t sK = sKV + (uint32_t)(st * 2 * WTILE);
        if (kt < jq) wg_tile(o, m, l, dq, sK, 0, row, t, sl2); /* diag constant: the mask only on */
        else if (kt == jq) wg_tile(o, m, l, dq, sK, 1, row, t, sl2); /* the diagonal tile */
        st = st == WSTAGES - 1 ? 0 : st + 1;
    }
    cp_wait0();
    /* Row sums by xor butterfly (the same bits on the 4 lanes of a row); the bf16 rows go to
     * the warp's own rows of its warpgroup's Q tile (read only by that warpgroup's finished
     * wgmma), swizzled so that the 8 rows of a store hit distinct banks, then to out in
     * 16-byte pieces, a whole 128-byte row per quarter warp. */
    fence_proxy_async();
    unsigned char *qt = sm + wg * WTILE;
#pragma unroll
    for (int hf = 0; hf < 2; hf++) {
        float lr = l[hf];
        lr = __fadd_rn(lr, __shfl_xor_sync(0xffffffffu, lr, 1));
        lr = __fadd_rn(lr, __shfl_xor_sync(0xffffffffu, lr, 2));
        float inv = __frcp_rn(lr);
        int rr = row + 8 * hf;
#pragma unroll
        for (int n = 0; n < 8; n++)
            *reinterpret_cast<__nv_bfloat162 *>(qt + dt_wgmma_sw128((uint32_t)rr, (uint32_t)n) + 4 * t) =
                __floats2bfloat162_rn(__fmul_rn(o[4 * n + 2 * hf], inv), __fmul_rn(o[4 * n + 2 * hf + 1], inv));
        if (t == 0)
            lse[(size_t)bh * T + jq * WB + rr] = __fmul_rn(__fadd_rn(__fmul_rn(m[hf], sl2), log2f(lr)), LN2);
    }
    __syncwarp();
#pragma unroll
    for (int u = 0; u < 4; u++) {
        int c = lane + 32 * u, rr = warp * 16 + (c >> 3), v = c & 7;
        *reinterpret_cast<uint4 *>(out + ((size_t)b * T + jq * WB + rr) * C + h * WD + v * 8) =
            *reinterpret_cast<const uint4 *>(qt + dt_wgmma_sw128((uint32_t)rr, (uint32_t)v));
    }
}

/* The kernels need more than 48 KB of shared memory: raised once. */
static int wgmma_attrs_set;

void dt_cu_flash_fwd_wgmma(bf16 *out, float *lse, const bf16 *qkv, int B, int T, int C, int NH, cudaStream_t s) {
    if (!wgmma_attrs_set) {
        cudaFuncSetAttribute(flash_fwd_wgmma_kernel<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)WSMEM(1));
        cudaFuncSetAttribute(flash_fwd_wgmma_kernel<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)WSMEM(2));
        wgmma_attrs_set = 1;
    }
    float sl2 = LOG2E / sqrtf((float)WD);
    if (T % (2 * WB) == 0) {
        unsigned g = (unsigned)(B * NH * (T / (2 * WB)));
        flash_fwd_wgmma_kernel<2><<<dt_cu_noted(g, 256, WSMEM(2), "flash_fwd_wgmma_kernel<2>"), 256, WSMEM(2), s>>>(
            out, lse, qkv, T, NH, sl2);
    } else {
        unsigned g = (unsigned)(B * NH * (T / WB));
        flash_fwd_wgmma_kernel<1><<<dt_cu_noted(g, 128, WSMEM(1), "flash_fwd_wgmma_kernel<1>"), 128, WSMEM(1), s>>>(
            out, lse, qkv, T, NH, sl2);
    }
    (void)C;
}
