/* Flash-attention forward on Hopper's warpgroup MMA (wgmma.mma_async, sm_90a):
 * dt_cu_flash_fwd_wgmma (attention_cuda.h), the model's forward on sm_90. Same shapes and bits as
 * dt_cu_flash_fwd (attention_flash_cuda.cu: head size 64, T % 64 == 0, causal, no dropout;
 * out (B,T,C) bf16, lse (B NH, T) fp32 natural log): tests/gpu/test_gpu_wgmma.cu compares
 * the bytes and times both. This file alone is compiled for sm_90a
 * (Makefile: WGMMA_OBJ); the plain sm_90 target has no wgmma.
 *
 * A block owns M 64-row query blocks (M = 2 when T % 128 == 0, else 1), one consumer
 * warpgroup (4 warps, 128 threads) each. Tiles of 64 rows x 64 channels (bf16, 128 bytes a
 * row, 8 KB) sit in shared memory in the 128-byte swizzle (wgmma_desc.h), filled by cp.async
 * through a K/V ring (one barrier a tile), as in the mma.sync kernel. Per key tile j a
 * warpgroup computes
 *   S = Q K^T: 4 x wgmma m64n64k16, A = Q and B = K both from shared memory (K-major
 *     descriptors, the start address 32 bytes further each 16-channel step);
 *   online softmax on S in registers (fp32; the accumulator layout of m64n64 is, per warp,
 *     the mma.sync m16n8 layout over 8 column groups, so this is the mma.sync kernel's code);
 *   O += P V: 4 x wgmma m64n64k16 with P (bf16) from registers as A (the accumulator
 *     repacked, same as the mma.sync A fragments) and V from shared memory as B through an
 *     MN-major descriptor (imm-trans-b = 1: V's rows are keys, channels contiguous).
 Three schedules of these steps (flash_fwd_wgmma_kernel's KIND):
 *   serial (wg_tile; the reference schedule the tests compare against): each product
 *     waited for at once;
 *   pipelined (wg_pipe_tile): S_j and then P_{j-1} V_{j-1} issued as two wgmma groups, S_j
 *     waited for alone (wait_group 1), tile j's exponentials computed while P_{j-1} V_{j-1}
 *     runs, then it is waited for, O rescaled and P_j packed;
 *   ping-pong (the rule where T % 128 == 0): the block's first warpgroup pipelined, the
 *     second one phase later (wg_pong_tile): right after each tile's barrier it runs the
 *     softmax of the S it issued before the barrier while the first one's products run, then
 *     issues its next S and P V and leaves them in flight across the barrier while the first
 *     one runs its softmax. The two warpgroups of a block otherwise reach the MUFU and the
 *     tensor cores at the same moments (one barrier a tile), each idling the other unit.
 * tests/gpu/test_gpu_wgmma.cu times the three (ping-pong is the fastest at the 124M shape).
 * All apply the same operations to each row in the same order (O is rescaled by tile j's
 * max after P_{j-1} V_{j-1} has added to it), hence the same bits. Accumulators are fenced
 * (wgmma.fence) before they are issued on and read only after their wait. cp.async writes
 * shared memory through the generic proxy and wgmma reads it through the async proxy: every
 * thread runs fence.proxy.async after its copies complete and before the barrier that
 * publishes them.
 *
 * Determinism: one warpgroup owns each output row; it walks key tiles 0..its diagonal in
 * order, each product reduces over its k-steps in order inside the tensor core, row maxima
 * and sums merge by xor butterflies (the same bits on the 4 lanes of a row): a fixed order,
 * no atomics. Exponentials are ex2.approx.ftz with the scale 1/sqrt(64) * log2(e) folded. */
#include "ops/attention/attention_cuda.h"
#include "ops/attention/flash_wgmma_cuda.cuh"

#include <stdint.h>

/* The kernels (flash_fwd_wgmma_kernel's KIND) and their K/V ring depths (see the kernel). */
#define FK_SERIAL 0
#define FK_PIPE 1
#define FK_PONG 2
#define FSTAGES(KIND) ((KIND) == FK_SERIAL ? 3 : (KIND) == FK_PIPE ? 4 : 5)
/* Q (M tiles), then K, V per stage; + 1024 so that the tiles can start 1024-byte aligned
 * (the swizzle atom: wgmma_desc.h). */
#define FSMEM(M, KIND) ((size_t)((M) + 2 * FSTAGES(KIND)) * WTILE + 1024)

/* ---- the kernel (accumulator and register-A layouts: wgmma_cuda.cuh) ------------------ */

/* The descriptors of a tile. K-major K (and Q): SBO 1024 (8 rows of 128 bytes), LBO unused
 * (1); MN-major V: SBO 1024 (8 key rows), LBO a whole tile (the next 64 channels, which
 * m64n64 never reads). A 16-wide k-step is +32 bytes (+2 encoded) along K-major rows, +16
 * rows = 2048 bytes (+128) of V. */
static __device__ __forceinline__ uint64_t desc_k(uint32_t a) { return dt_wgmma_desc(a, 16, 1024, DT_WGMMA_SWIZZLE_128B); }
static __device__ __forceinline__ uint64_t desc_v(uint32_t a) {
    return dt_wgmma_desc(a, WTILE, 1024, DT_WGMMA_SWIZZLE_128B);
}
/* Issues S = Q K^T (4 k-steps, scale-d 0 on the first: s is not read) and O += P V, without
 * the fence, commit or wait. */
static __device__ __forceinline__ void wg_mma_s(float s[32], uint64_t dq, uint64_t dk) {
#pragma unroll
    for (int k = 0; k < 4; k++) wgmma_ss(s, dq + (uint64_t)(2 * k), dk + (uint64_t)(2 * k), k > 0);
}
static __device__ __forceinline__ void wg_mma_pv(float o[32], const uint32_t p[4][4], uint64_t dv) {
#pragma unroll
    for (int k = 0; k < 4; k++) wgmma_rs_t(o, p[k], dv + (uint64_t)(128 * k));
}

/* One key tile (K at sK, V at sK + WTILE, shared addresses) for the warpgroup whose Q
 * descriptor is dq (k-step 0), each product waited for at once (the serial kernel). */
template <bool DIAG>
static __device__ __forceinline__ void wg_tile(float o[32], float m[2], float l[2], uint64_t dq, uint32_t sK, int row,
                                               int t, float sl2) {
    float s[32];
#pragma unroll
    for (int i = 0; i < 32; i++) s[i] = 0.0f; /* not read (scale-d 0 on the first step): defined for the compiler */
    reg_fence(s);
    wg_fence();
    wg_mma_s(s, dq, desc_k(sK));
    wg_commit();
    wg_wait0();
    reg_fence(s);
    float corr[2];
    flash_softmax<false>(s, m, l, corr, DIAG, row, t, sl2);
    flash_rescale(o, corr);
    uint32_t p[4][4];
    flash_pack(p, s);
    reg_fence(o);
    wg_fence();
    wg_mma_pv(o, p, desc_v(sK + WTILE));
    wg_commit();
    wg_wait0();
    reg_fence(o);
}

/* One key tile of the pipelined kernel: issues S = Q K^T of this tile (K at sK) and, when PV,
 * O += P V of the previous tile (its P in p, V at sVp) behind it; waits for S alone and runs
 * the softmax on it while P V is still on the tensor cores, then waits for P V, rescales o
 * and packs this tile's P into p. Per row, the same operations in the same order as wg_tile:
 * o is rescaled by tile j's change of the max after tile j - 1's P V has added to it. */
template <bool DIAG, bool PV>
static __device__ __forceinline__ void wg_pipe_tile(float s[32], float o[32], uint32_t p[4][4], float m[2], float l[2],
                                                    uint64_t dq, uint32_t sK, uint32_t sVp, uint32_t anchor, int row,
                                                    int t, float sl2) {
    wg_fence();
    wg_mma_s(s, dq, desc_k(sK)); /* s holds the previous tile's dead exponentials: not read */
    wg_commit();
    if (PV) {
        wg_mma_pv(o, p, desc_v(sVp));
        wg_commit();
        wg_wait1(); /* S; P V may still run */
    } else {
        wg_wait0();
    }
    reg_fence(s);
    float corr[2];
    flash_softmax<true>(s, m, l, corr, DIAG, row, t, sl2);
    /* The exponentials before the wait, so that they overlap P V. ptxas (CUDA 13.0) hoists
     * wgmma.wait_group over register-only work (it moved this wait up to the row maxima,
     * before every exponential); it keeps it after a shared-memory store, so the row sums,
     * which depend on every exponential, are stored (never read) to this thread's anchor. */
    if (PV) {
        asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(anchor), "f"(l[0]), "f"(l[1]) : "memory");
        wg_wait0();
    }
    reg_fence(o);
    reg_fence_a(p); /* read by P V up to the wait: not reused before it */
    flash_rescale(o, corr);
    flash_pack(p, s);
}

/* The last P V of a warpgroup in the pipelined kernel (V at sV). */
static __device__ __forceinline__ void wg_pipe_last(float o[32], uint32_t p[4][4], uint32_t sV) {
    reg_fence(o);
    wg_fence();
    wg_mma_pv(o, p, desc_v(sV));
    wg_commit();
    wg_wait0();
    reg_fence(o);
    reg_fence_a(p);
}

/* One key tile of the second warpgroup of the ping-pong kernel: waits for the products it
 * issued in the previous tile (S of that tile, in s, and the P V before it), runs the softmax
 * of that tile (its K at sK's predecessor: only its V, at sVp, is read here), rescales o,
 * packs P and issues S of this tile (K at sK) and that P V, and leaves them in flight. Per
 * row the operations of wg_tile in the same order, one tile later. */
static __device__ __forceinline__ void wg_pong_tile(float s[32], float o[32], uint32_t p[4][4], float m[2], float l[2],
                                                    uint64_t dq, uint32_t sK, uint32_t sVp, int row, int t, float sl2) {
    wg_wait0();
    reg_fence(s);
    reg_fence(o);
    reg_fence_a(p);
    float corr[2];
    flash_softmax<true>(s, m, l, corr, false, row, t, sl2);
    flash_rescale(o, corr);
    flash_pack(p, s);
    reg_fence(s);
    reg_fence(o);
    wg_fence();
    wg_mma_s(s, dq, desc_k(sK));
    wg_mma_pv(o, p, desc_v(sVp));
    wg_commit();
}

/* Grid (B NH T / (64 M)), 128 M threads, FSMEM(M, KIND) bytes of dynamic shared memory.
 * Block i owns head bh = i % (B NH) and query rows 64 j0 .. 64 (j0 + M) - 1, the heavy (late)
 * query blocks of every head first; warpgroup wg owns query block j0 + wg. KIND:
 *   FK_SERIAL: wg_tile, 3 stages (the refill after tile kt's barrier takes tile kt - 1's
 *     stage, which every warpgroup finished with before that barrier);
 *   FK_PIPE: wg_pipe_tile, 4 stages: the refill after tile kt's barrier overwrites tile
 *     kt - 2's stage, whose P V every warpgroup waited for during tile kt - 1 (tile kt - 1's
 *     V is still read during tile kt);
 *   FK_PONG (M = 2): warpgroup 0 as FK_PIPE, warpgroup 1 one phase later (wg_pong_tile: its
 *     softmax while warpgroup 0's products run, its products in flight across the barrier,
 *     while warpgroup 0 runs its softmax), 5 stages: tile j's V is read up to warpgroup 1's
 *     wait in tile j + 2, so the refill after tile kt's barrier takes tile kt - 3's stage.
 * ptxas (CUDA 13.0): 128 registers (M = 2: ping-pong, serial; pipelined 126), 142 (M = 1
 * pipelined), 162 (M = 1 serial), no spills, no serialized wgmma; FSMEM 97 KB (ping-pong),
 * 81 KB (M = 2 pipelined), 73 KB (M = 1 pipelined): 2 blocks (8 warps) or 3 (M = 1) an SM. */
template <int M, int KIND>
__global__ void __launch_bounds__(128 * M, M == 1 ? 3 : 2)
    flash_fwd_wgmma_kernel(bf16 *out, float *lse, const bf16 *qkv, int T, int NH, float sl2) {
    constexpr int S = FSTAGES(KIND);
    static_assert(KIND != FK_PONG || M == 2, "the ping-pong kernel pairs two warpgroups");
    extern __shared__ __align__(1024) unsigned char wsm_raw[];
    const uint32_t raw = smem_u32(wsm_raw), pad = (1024u - (raw & 1023u)) & 1023u;
    unsigned char *sm = wsm_raw + pad; /* Q tiles, then stage i: K at 2 i WTILE, V after it */
    const uint32_t sQ = raw + pad, sKV = sQ + M * WTILE;
    /* FK_PONG: wg through a shuffle, so that ptxas knows it is the same on every lane of a
     * warp and the branches on it are no divergent paths, where it serializes every wgmma of
     * the kernel when one is left in flight (C7518) */
    const int tid = (int)threadIdx.x, wg = KIND == FK_PONG ? __shfl_sync(0xffffffffu, tid >> 7, 0) : tid >> 7,
              warp = (tid >> 5) & 3, lane = tid & 31, g = lane >> 2, t = lane & 3;
    const int nqb = T / (M * WB), BH = (int)gridDim.x / nqb, bh = (int)blockIdx.x % BH, b = bh / NH, h = bh % NH;
    const int j0 = (nqb - 1 - (int)blockIdx.x / BH) * M, nk = j0 + M, jq = j0 + wg; /* key tiles 0..nk-1 */
    const int C = NH * WD, C3 = 3 * C, row = warp * 16 + g;
    const bf16 *base = qkv + (size_t)b * T * C3 + h * WD;
    auto load = [&](int st, int kt) { /* stage st <- key tile kt: K, V */
        unsigned char *d = sm + M * WTILE + st * 2 * WTILE;
        wg_cp_tile<128 * M>(d, base + C + (size_t)kt * WB * C3, C3);
        wg_cp_tile<128 * M>(d + WTILE, base + 2 * C + (size_t)kt * WB * C3, C3);
    };
#pragma unroll
    for (int j = 0; j < M; j++) wg_cp_tile<128 * M>(sm + j * WTILE, base + (size_t)(j0 + j) * WB * C3, C3);
    load(0, 0);
    cp_commit();
    if (nk > 1) load(1, 1);
    cp_commit();
    const uint64_t dq = desc_k(sQ + wg * WTILE);
    /* wg_pipe_tile's anchors, 8 bytes a lane (the warps share them: the values are never
     * read), in the allocation's 1024 bytes beyond the tiles: before them (pad) or after. */
    const uint32_t anchor = (pad >= 256 ? raw : sQ + (M + 2 * S) * WTILE) + 8 * lane;
    float o[32], s[32], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
    uint32_t p[4][4];
#pragma unroll
    for (int i = 0; i < 32; i++) o[i] = s[i] = 0.0f; /* s: defined for the compiler (PIPE) */
#pragma unroll
    for (int k = 0; k < 4; k++)
#pragma unroll
        for (int i = 0; i < 4; i++) p[k][i] = 0u;
    /* One barrier a tile: after it tile kt has landed for every thread (and is ordered before
     * the tensor cores' reads) and every warpgroup is done with the stage refilled. The
     * ping-pong kernel's warpgroups run it from two loops: barrier.sync without .aligned. */
    auto top = [&](int kt, int st) {
        cp_wait1();          /* this thread's copies of tile kt (and of Q) are done */
        fence_proxy_async(); /* ... and ordered before the tensor cores' reads */
        if (KIND == FK_PONG) asm volatile("barrier.sync 0;\n" ::: "memory");
        else __syncthreads();
        if (kt + 2 < nk) load(st + 2 < S ? st + 2 : st + 2 - S, kt + 2);
        cp_commit(); /* possibly empty: one group per tile keeps the wait count fixed */
    };
    const auto stage = [&](int st) { return sKV + (uint32_t)(st * 2 * WTILE); }; /* K; V at + WTILE */
    int st = 0; /* stage of tile kt */
    if (KIND == FK_PONG && wg == 1) { /* its own loop: its products stay in flight across it */
        for (int kt = 0; kt < nk; kt++) {
            top(kt, st);
            const uint32_t sK = stage(st), sVp = stage(st == 0 ? S - 1 : st - 1) + WTILE;
            if (kt == 0) {
                wg_fence();
                wg_mma_s(s, dq, desc_k(sK));
                wg_commit();
            } else {
                wg_pong_tile(s, o, p, m, l, dq, sK, sVp, row, t, sl2); /* tile kt - 1 < jq */
            }
            st = st == S - 1 ? 0 : st + 1;
        }
        wg_wait0(); /* the diagonal tile, the last */
        reg_fence(s);
        reg_fence(o);
        reg_fence_a(p);
        float corr[2];
        flash_softmax<true>(s, m, l, corr, true, row, t, sl2);
        flash_rescale(o, corr);
        flash_pack(p, s);
        wg_pipe_last(o, p, stage(st == 0 ? S - 1 : st - 1) + WTILE);
    } else {
        for (int kt = 0; kt < nk; kt++) {
            top(kt, st);
            const uint32_t sK = stage(st), sVp = stage(st == 0 ? S - 1 : st - 1) + WTILE;
            if (KIND == FK_SERIAL) {
                if (kt < jq) wg_tile<false>(o, m, l, dq, sK, row, t, sl2); /* the mask only on */
                else if (kt == jq) wg_tile<true>(o, m, l, dq, sK, row, t, sl2); /* the diagonal tile */
            } else if (kt == 0) {
                if (jq == 0) wg_pipe_tile<true, false>(s, o, p, m, l, dq, sK, sVp, anchor, row, t, sl2);
                else wg_pipe_tile<false, false>(s, o, p, m, l, dq, sK, sVp, anchor, row, t, sl2);
            } else if (kt < jq) {
                wg_pipe_tile<false, true>(s, o, p, m, l, dq, sK, sVp, anchor, row, t, sl2);
            } else if (kt == jq) {
                wg_pipe_tile<true, true>(s, o, p, m, l, dq, sK, sVp, anchor, row, t, sl2);
            } else if (kt == jq + 1) {
                wg_pipe_last(o, p, sVp);
            }
            st = st == S - 1 ? 0 : st + 1;
        }
        if (KIND != FK_SERIAL && jq == nk - 1) wg_pipe_last(o, p, stage(st == 0 ? S - 1 : st - 1) + WTILE);
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

/* ---- launcher ---------------------------------------------------------------------------- */

static int wgfwd_force; /* benchmarks only (dt_cu_flash_fwd_wgmma_force): 0 = the rule */

void dt_cu_flash_fwd_wgmma_force(int kernel) { wgfwd_force = kernel; }

template <int M, int KIND>
static void launch(bf16 *out, float *lse, const bf16 *qkv, int B, int T, int NH, float sl2, cudaStream_t s,
                   const char *name) {
    static int attr_set; /* more than 48 KB of shared memory: raised once per kernel */
    const size_t smem = FSMEM(M, KIND);
    if (!attr_set) {
        cudaFuncSetAttribute(flash_fwd_wgmma_kernel<M, KIND>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        attr_set = 1;
    }
    const unsigned g = (unsigned)(B * NH * (T / (M * WB)));
    flash_fwd_wgmma_kernel<M, KIND><<<dt_cu_noted(g, 128 * M, smem, name), 128 * M, smem, s>>>(out, lse, qkv, T, NH,
                                                                                              sl2);
}

/* The rule (timed in tests/gpu/test_gpu_wgmma.cu): the ping-pong kernel where T % 128 == 0
 * (2 blocks, 8 warps an SM), else the pipelined one with one warpgroup a block. */
void dt_cu_flash_fwd_wgmma(bf16 *out, float *lse, const bf16 *qkv, int B, int T, int C, int NH, cudaStream_t s) {
    const float sl2 = LOG2E / sqrtf((float)WD);
    const int two = T % (2 * WB) == 0;
    switch (wgfwd_force) {
    case DT_CU_WGFWD_SERIAL:
        if (two) launch<2, FK_SERIAL>(out, lse, qkv, B, T, NH, sl2, s, "flash_fwd_wgmma_kernel<2, serial>");
        else launch<1, FK_SERIAL>(out, lse, qkv, B, T, NH, sl2, s, "flash_fwd_wgmma_kernel<1, serial>");
        break;
    case DT_CU_WGFWD_PIPE:
        if (two) launch<2, FK_PIPE>(out, lse, qkv, B, T, NH, sl2, s, "flash_fwd_wgmma_kernel<2, pipe>");
        else launch<1, FK_PIPE>(out, lse, qkv, B, T, NH, sl2, s, "flash_fwd_wgmma_kernel<1, pipe>");
        break;
    case DT_CU_WGFWD_PIPE_64:
        launch<1, FK_PIPE>(out, lse, qkv, B, T, NH, sl2, s, "flash_fwd_wgmma_kernel<1, pipe>");
        break;
    default:
        if (two) launch<2, FK_PONG>(out, lse, qkv, B, T, NH, sl2, s, "flash_fwd_wgmma_kernel<2, pong>");
        else launch<1, FK_PIPE>(out, lse, qkv, B, T, NH, sl2, s, "flash_fwd_wgmma_kernel<1, pipe>");
    }
    (void)C;
}
