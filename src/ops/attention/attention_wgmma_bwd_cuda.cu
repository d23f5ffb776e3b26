/* Flash-attention backward on Hopper's warpgroup MMA (wgmma.mma_async, sm_90a):
 * dt_cu_flash_bwd_wgmma (attention_cuda.h), the contract of dt_cu_flash_bwd (attention_flash_cuda.cu:
 * head size 64, T % 64 == 0, causal, no dropout; dqkv (B,T,3C) bf16 overwritten; the fused
 * qkv bias partials) and, by construction, its bits: the same products in the same k order,
 * the same elementwise operations, the same dS scratch and bias partials.
 * tests/gpu/test_gpu_wgmma_bwd.cu compares the bytes and times both. Built for sm_90a only
 * (Makefile: WGMMA_OBJ).
 *
 * The D kernel (lse log2(e), D = rowsum(dO O)) is dt_cu_flash_bwd's (flash_cuda.cuh). Kernel
 * A, by the rule, runs on 128-query tiles with a producer warpgroup:
 * attention_wgmma_bwd_q128_cuda.cu (the same bits). On request (dt_cu_flash_bwd_wgmma_force)
 * it runs on 64-query tiles, here: on wgmma m64n64k16, in the transposed formulation: a
 * block owns M key blocks of 64 (M = 1, 2 blocks an SM; M = 2 where T % 128 == 0), one consumer warpgroup
 * each, and walks the query tiles qb = its first key block .. in order; the M warpgroups
 * share each Q, dO and LD fill (a 4-stage cp.async ring, one barrier a tile, 128-byte
 * swizzled tiles as in the forward). Per query tile a warpgroup issues
 *   S^T = K Q^T   (4 wgmma, A = K, B = Q, both K-major in shared memory),
 *   dP^T = V dO^T (4 wgmma, A = V, B = dO, both K-major),
 * waits for S^T alone, computes P^T = exp2(S^T sl2 - lse2) (zero above the diagonal on the
 * diagonal tile; lse2 is per query, a column of the accumulator), waits for dP^T, computes
 * dS^T = P^T (dP^T - D), stores dS (bf16) for the dQ pass, then issues
 *   dV += P^T dO  (4 wgmma, A = P^T from registers, B = dO MN-major),
 *   dK += dS^T Q  (4 wgmma, A = dS^T from registers, B = Q MN-major)
 * and leaves them in flight: the next tile's wait for S^T (wgmma.wait_group 1 after S^T and
 * dP^T are committed) also waits for them, before P^T and dS^T are overwritten. The fourth
 * ring stage makes that safe: the refill at tile i overwrites tile i - 2's stage, whose
 * products were waited for during tile i - 1, before tile i's barrier.
 * The dQ pass on wgmma: a warpgroup owns a 64-query block and sums dS K over key blocks in
 * order, the dS tiles (already the A fragments) as register operands; dt_cu_flash_bwd's
 * mma.sync dQ pass gives the same bits (dt_cu_flash_bwd_wgmma_force picks it).
 * By the rule kernel A and the dQ pass are launched with programmatic dependent launch
 * (flash_cuda.cuh: each may start before the kernel before it ends, and waits for all of
 * it before reading its output), and the dQ pass takes the head groups last first
 * (dt_flash_bwd_order_rev: the dS tiles kernel A wrote last may still be in L2): the
 * schedule changes, not what any thread computes.
 *
 * Determinism: one warpgroup owns each dK, dV row (kernel A) and each dQ row (the dQ pass)
 * and walks its tiles in order; each product reduces over its k-steps in order inside the
 * tensor core (the order of the mma.sync m16n8k16 chain: the same bits, as the tests show);
 * the bias partials are store_acc_colsum's fixed order; no atomics. */
#include "ops/attention/attention_cuda.h"
#include "ops/reduce/reduce_cuda.h"
#include "ops/attention/flash_wgmma_cuda.cuh"

#include <stdint.h>

#define WGBWD_STAGES 4 /* Q/dO/LD ring of kernel A (see the file comment) */

/* ---- kernel A ------------------------------------------------------------------------------ */

/* One query tile for one warpgroup (row = 16 warp + g, its first key row in the block).
 * sK, sV: the warpgroup's key block; sQ, sdO: the stage's tiles (shared addresses); LDc: the
 * stage's {lse2, D} pairs; dst: this warp's and lane's uint4 slot of the dS scratch tile.
 * p, ds: the A operands of the previous tile's dV, dK products (in flight on entry), then of
 * this tile's (in flight on return). */
template <bool DIAG>
static __device__ __forceinline__ void wgbwd_tile(float dk[32], float dv[32], float s[32], float dp[32],
                                                  uint32_t p[4][4], uint32_t ds[4][4], uint32_t sK, uint32_t sV,
                                                  uint32_t sQ, uint32_t sdO, const float *LDc, uint4 *dst,
                                                  float sl2, int row, int t) {
    const wg_bwd_descs dsc = wg_bwd_desc(sK, sV, sQ, sdO);
    wg_fence();
#pragma unroll
    for (int k = 0; k < 4; k++) wgmma_ss(s, dsc.Ka + (uint64_t)(2 * k), dsc.Qk + (uint64_t)(2 * k), k > 0);
    wg_commit();
#pragma unroll
    for (int k = 0; k < 4; k++) wgmma_ss(dp, dsc.Va + (uint64_t)(2 * k), dsc.Ok + (uint64_t)(2 * k), k > 0);
    wg_commit();
    wg_wait1(); /* S^T, and the previous tile's dV, dK: p and ds are free */
    reg_fence(s);
    reg_fence_a(p);
    reg_fence_a(ds);
    /* P^T (in s), dS^T (in dp): the mma.sync kernel A's operations (wgmma_cuda.cuh) */
    wg_bwd_p<DIAG>(s, LDc, sl2, row, t);
    flash_pack(p, s);
    reg_fence(s); /* P^T done before the wait: its exponentials overlap dP^T's products */
    reg_fence_a(p);
    wg_wait0(); /* dP^T */
    reg_fence(dp);
    wg_bwd_ds(dp, s, LDc, t);
    flash_pack(ds, dp);
    store_ds_tile(dst, ds);
    wg_fence();
#pragma unroll
    for (int k = 0; k < 4; k++) wgmma_rs_t(dv, p[k], dsc.Om + (uint64_t)(128 * k));
#pragma unroll
    for (int k = 0; k < 4; k++) wgmma_rs_t(dk, ds[k], dsc.Qm + (uint64_t)(128 * k));
    wg_commit();
}

/* Grid (B NH T / (64 M)), 128 M threads, dt_wgbwd_smem(M, WGBWD_STAGES) bytes of dynamic
 * shared memory. Block i: head bh and rank r from dt_flash_bwd_order (rank 0, the most
 * work, first); key blocks kb0 = M r .. kb0 + M - 1, warpgroup wg owns kb = kb0 + wg. dS
 * tiles, dK, dV and the bias partials exactly as flash_bwd_kv_kernel
 * (attention_flash_cuda.cu). 240 (M = 2) or 242 registers, no spills: 2 blocks an SM with
 * M = 1 (8 warps), 1 with M = 2. */
template <int M>
__global__ void __launch_bounds__(128 * M, M == 1 ? 2 : 1)
    flash_bwd_kv_wgmma_kernel(bf16 *dqkv, bf16 *dS, float *part, const bf16 *qkv, const bf16 *dout,
                              const float *LD, int T, int NH, float scale, int grp) {
    uint32_t sb;
    unsigned char *sm = wg_smem_aligned(&sb);
    const int tid = (int)threadIdx.x, wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31, g = lane >> 2,
              t = lane & 3;
    const int nqb = T / WB;
    int bh, rank;
    dt_flash_bwd_order((int)blockIdx.x, grp, nqb / M, &bh, &rank);
    const int b = bh / NH, h = bh % NH, C = NH * WD, C3 = 3 * C, kb0 = rank * M, kb = kb0 + wg, nit = nqb - kb0;
    const int row = warp * 16 + g;
    const float sl2 = scale * LOG2E;
    const bf16 *base = qkv + (size_t)b * T * C3 + h * WD;
    const bf16 *dbase = dout + (size_t)b * T * C + h * WD;
    const float *ldbase = LD + (size_t)bh * 2 * T;
    auto load = [&](int st, int qb) { /* stage st <- query block qb: Q, dO and 128 floats of LD */
        wg_cp_tile<128 * M>(sm + dt_wgbwd_q_off(M, st), base + (size_t)qb * WB * C3, C3);
        wg_cp_tile<128 * M>(sm + dt_wgbwd_do_off(M, st), dbase + (size_t)qb * WB * C, C);
        if (tid < 32) cp_async16(sm + dt_wgbwd_ld_off(M, WGBWD_STAGES, st) + tid * 16, ldbase + qb * 2 * WB + tid * 4);
    };
#pragma unroll
    for (int j = 0; j < M; j++) {
        wg_cp_tile<128 * M>(sm + dt_wgbwd_k_off(M, j), base + C + (size_t)(kb0 + j) * WB * C3, C3);
        wg_cp_tile<128 * M>(sm + dt_wgbwd_v_off(M, j), base + 2 * C + (size_t)(kb0 + j) * WB * C3, C3);
    }
    load(0, kb0);
    cp_commit();
    if (nit > 1) load(1, kb0 + 1);
    cp_commit();
    float dk[32], dv[32], s[32], dp[32];
    uint32_t p[4][4], ds[4][4];
#pragma unroll
    for (int i = 0; i < 32; i++) dk[i] = dv[i] = s[i] = dp[i] = 0.0f; /* s, dp: defined for the compiler */
#pragma unroll
    for (int k = 0; k < 4; k++)
#pragma unroll
        for (int i = 0; i < 4; i++) p[k][i] = ds[k][i] = 0u;
    const uint32_t sK = sb + dt_wgbwd_k_off(M, wg), sV = sb + dt_wgbwd_v_off(M, wg);
    /* this warp's 16-byte slot in the dS tiles of key block kb */
    uint4 *dsg = reinterpret_cast<uint4 *>(dS + (size_t)bh * dt_flash_ds_tiles(nqb) * (WB * WB)) + warp * 32 + lane;
    for (int i = 0; i < nit; i++) {
        /* one barrier a tile: after it, tile i has landed for every thread (and is ordered
         * before the tensor cores' reads), and every warpgroup has waited for the products
         * of tile i - 2, whose stage the loads for tile i + 2 reuse */
        cp_wait1();
        fence_proxy_async();
        __syncthreads();
        if (i + 2 < nit) load((i + 2) % WGBWD_STAGES, kb0 + i + 2);
        cp_commit();
        const int qb = kb0 + i, st = i % WGBWD_STAGES;
        const uint32_t sQ = sb + dt_wgbwd_q_off(M, st), sdO = sb + dt_wgbwd_do_off(M, st);
        const float *LDc = reinterpret_cast<const float *>(sm + dt_wgbwd_ld_off(M, WGBWD_STAGES, st));
        uint4 *dst = dsg + dt_flash_ds_tile(qb, kb) * (WB * WB / 8);
        if (qb == kb) wgbwd_tile<true>(dk, dv, s, dp, p, ds, sK, sV, sQ, sdO, LDc, dst, sl2, row, t);
        else if (qb > kb) wgbwd_tile<false>(dk, dv, s, dp, p, ds, sK, sV, sQ, sdO, LDc, dst, sl2, row, t);
    }
    wg_wait0();
    reg_fence(dk);
    reg_fence(dv);
    reg_fence_a(p);
    reg_fence_a(ds);
    cp_wait0();
    /* red over the K tiles, read by the tensor cores, all waited for: the proxy fence orders
     * those reads before these writes */
    flash_store_kv(dqkv, part, reinterpret_cast<const float(*)[4]>(dk), reinterpret_cast<const float(*)[4]>(dv),
                   reinterpret_cast<float *>(sm) + wg * 512, b, T, kb, h, C, scale,
                   [] { fence_proxy_async(); __syncthreads(); }, [] { __syncthreads(); });
}

/* ---- the dQ pass on wgmma ----------------------------------------------------------------- */


/* The dQ pass of attention_flash_cuda.cu (flash_bwd_dq_kernel: same blocks, order, sums and
 * bias partials, the same bits) on wgmma: warpgroup wg owns query block qb = q0 + wg and
 * accumulates dS[qb, kb] K[kb] over key blocks kb = 0..qb in order, 4 wgmma a tile with the
 * dS tile as the register A operand (the scratch holds the A fragments: 16 bytes a lane
 * and k-step) and the K tile as the MN-major B operand. M = 2 needs nqb even. The dS tiles
 * come through plain cp.async: with the L2 evict-first hint of the mma.sync pass, ptxas
 * (CUDA 13.0, sm_90a) emitted an LDGSTS form whose uniform registers were never written,
 * and the kernel died with an illegal instruction on the H200. 78 (M = 2) or 92 registers,
 * dt_wgdq_smem(M) bytes of shared memory (flash_layout.h: 99 KB or 65 KB; 2 or 3 blocks an SM).
 * rev: the head groups last first (dt_flash_bwd_order_rev), else first first. Launched with
 * dt_cu_launch_pdl it may start while kernel A runs: it waits for all of it (pdl_wait)
 * before its first load. */
template <int M>
__global__ void __launch_bounds__(128 * M, 2)
    flash_bwd_dq_wgmma_kernel(bf16 *dqkv, float *part, const bf16 *dS, const bf16 *qkv, int T, int NH, float scale,
                              int grp, int rev) {
    uint32_t sb;
    unsigned char *sm = wg_smem_aligned(&sb); /* stage st: K at (1 + M) st tiles, then the M dS tiles */
    pdl_wait();
    const int tid = (int)threadIdx.x, wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31;
    const int nqb = T / WB, nblk = nqb / M;
    int bh, rank;
    if (rev) dt_flash_bwd_order_rev((int)blockIdx.x, grp, nblk, (int)gridDim.x / nblk, &bh, &rank);
    else dt_flash_bwd_order((int)blockIdx.x, grp, nblk, &bh, &rank);
    const int q0 = M * (nblk - 1 - rank), qb = q0 + wg, last = q0 + M - 1;
    const int b = bh / NH, h = bh % NH, C = NH * WD, C3 = 3 * C;
    const bf16 *kbase = qkv + (size_t)b * T * C3 + C + h * WD;
    const bf16 *sbase = dS + (size_t)bh * dt_flash_ds_tiles(nqb) * (WB * WB);
    auto load = [&](int st, int kb) { /* stage st <- key block kb: K and the dS tiles of q0.. */
        unsigned char *d = sm + dt_wgdq_k_off(M, st);
        wg_cp_tile<128 * M>(d, kbase + (size_t)kb * WB * C3, C3);
#pragma unroll
        for (int j = 0; j < M; j++) {
            if (kb > q0 + j) continue;
            const bf16 *src = sbase + dt_flash_ds_tile(q0 + j, kb) * (WB * WB);
#pragma unroll
            for (int u = 0; u < WTILE / 16 / (128 * M); u++) {
                int i = tid + u * 128 * M;
                cp_async16(sm + dt_wgdq_ds_off(M, st, j) + i * 16, src + i * 8);
            }
        }
    };
    load(0, 0);
    cp_commit();
    if (last > 0) load(1, 1);
    cp_commit();
    float acc[32];
#pragma unroll
    for (int i = 0; i < 32; i++) acc[i] = 0.0f;
    for (int kb = 0; kb <= last; kb++) {
        const int st = kb % DT_WGDQ_STAGES;
        cp_wait1();
        fence_proxy_async();
        __syncthreads(); /* one barrier a tile; a stage is refilled 2 tiles after its use */
        if (kb + 2 <= last) load((kb + 2) % DT_WGDQ_STAGES, kb + 2);
        cp_commit();
        if (kb <= qb) {
            const uint4 *a4 = reinterpret_cast<const uint4 *>(sm + dt_wgdq_ds_off(M, st, wg)) + warp * 128 + lane;
            uint32_t a[4][4];
#pragma unroll
            for (int k = 0; k < 4; k++) { /* keys 16k.. */
                uint4 v = a4[k * 32];
                a[k][0] = v.x;
                a[k][1] = v.y;
                a[k][2] = v.z;
                a[k][3] = v.w;
            }
            const uint64_t dk = dt_wgmma_desc(sb + dt_wgdq_k_off(M, st), WTILE, 1024, DT_WGMMA_SWIZZLE_128B);
            wg_fence();
#pragma unroll
            for (int k = 0; k < 4; k++) wgmma_rs_t(acc, a[k], dk + (uint64_t)(128 * k));
            wg_commit();
            wg_wait0();
            reg_fence(acc);
        }
    }
    cp_wait0();
    bf16 *dst = dqkv + ((size_t)b * T + qb * WB + warp * 16) * C3 + h * WD;
    const float(*acc2)[4] = reinterpret_cast<const float(*)[4]>(acc);
    if (!part) {
        store_acc(dst, C3, acc2, scale, lane);
        return;
    }
    float cq[8][2];
    store_acc_colsum(dst, C3, acc2, scale, lane, cq);
    float *red = reinterpret_cast<float *>(sm); /* [wg][warp][64], over stage 0 (waited for) */
    fence_proxy_async();
    __syncthreads();
    put_colsum(red + (wg * 4 + warp) * 64, cq, lane);
    __syncthreads();
    if ((tid & 127) < 64) {
        const int c = tid & 63;
        const float *r = red + wg * 256 + c;
        part[((size_t)b * nqb + qb) * C3 + h * WD + c] = __fadd_rn(__fadd_rn(__fadd_rn(r[0], r[64]), r[128]), r[192]);
    }
}

/* ---- launcher ---------------------------------------------------------------------------- */

static int wgbwd_attrs_set;
static int wgbwd_force_a;  /* benchmarks only (dt_cu_flash_bwd_wgmma_force): 0 = the rule */
static int wgbwd_force_dq; /* benchmarks only: 0 = the rule */

void dt_cu_flash_bwd_wgmma_force(int kernel_a, int dq) {
    wgbwd_force_a = kernel_a;
    wgbwd_force_dq = dq;
}

/* The rule (bench: tests/gpu/test_gpu_wgmma_bwd.cu, docs/cuda.md): kernel A on 128-query
 * tiles (two consumer warpgroups and a producer a block where T % 128 == 0, else one consumer
 * and 2 blocks an SM; 5% faster than the 64-query kernel at GPT-2 124M on the H200), the
 * wgmma dQ pass with the head groups last first, kernel A and the dQ pass launched with
 * programmatic dependent launch (DT_CU_WGBWD_DQ_WGMMA_PDL_REV: 0.2698 ms a layer against
 * 0.2756 for the plain launches at B 16 NH 12 T 1024 on the H200, 400 interleaved calls). */
/* Both entry points; ld_given: LD is in the scratch already (out, lse unused), and kernel A
 * is launched the ordinary way. In the model the GEMM that wrote LD is followed by a wait on
 * the weight-gradient stream (dqkv's pending read), and a kernel launched with programmatic
 * dependent launch right after such a wait fails the graph capture (cudaErrorLossyQuery):
 * hence the ordinary launch there. */
static void bwd_wgmma(bf16 *dqkv, float *dbias, float *part, void *scratch, const bf16 *dout, const bf16 *qkv,
                      const bf16 *out, const float *lse, int ld_given, int B, int T, int C, int NH, cudaStream_t s,
                      cudaStream_t fs) {
    if (!wgbwd_attrs_set) {
        cudaFuncSetAttribute(flash_bwd_kv_wgmma_kernel<2>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)dt_wgbwd_smem(2, WGBWD_STAGES));
        cudaFuncSetAttribute(flash_bwd_kv_wgmma_kernel<1>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)dt_wgbwd_smem(1, WGBWD_STAGES));
        cudaFuncSetAttribute(flash_bwd_dq_wgmma_kernel<1>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)dt_wgdq_smem(1));
        cudaFuncSetAttribute(flash_bwd_dq_wgmma_kernel<2>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)dt_wgdq_smem(2));
        wgbwd_attrs_set = 1;
    }
    const float scale = 1.0f / sqrtf((float)WD);
    float *LD = dt_cu_flash_scratch_ld(scratch);
    bf16 *dS = dt_cu_flash_scratch_ds(scratch, B, T, NH);
    const int BH = B * NH, nqb = T / WB, grp = dt_flash_bwd_group(BH);
    const int dq = wgbwd_force_dq == DT_CU_WGBWD_DQ_RULE ? DT_CU_WGBWD_DQ_WGMMA_PDL_REV : wgbwd_force_dq;
    const int pdl_d = dq == DT_CU_WGBWD_DQ_WGMMA_PDL_D;
    const int pdl = pdl_d || dq == DT_CU_WGBWD_DQ_WGMMA_PDL || dq == DT_CU_WGBWD_DQ_WGMMA_PDL_REV;
    const int rev = dq == DT_CU_WGBWD_DQ_WGMMA_PDL_REV;
    float *bp = dbias ? part : NULL;
    if (!ld_given) dt_cu_flash_bwd_prep(LD, dout, out, lse, B, T, NH, pdl_d, s);
    const int M = wgbwd_force_a == DT_CU_WGBWD_A_128 && nqb % 2 == 0 ? 2 : 1;
    const unsigned n = (unsigned)(BH * (nqb / M));
    const size_t sm = dt_wgbwd_smem(M, WGBWD_STAGES);
    if (wgbwd_force_a == DT_CU_WGBWD_A_RULE || wgbwd_force_a == DT_CU_WGBWD_A_Q128 ||
        wgbwd_force_a == DT_CU_WGBWD_A_Q128_K64)
        dt_cu_flash_bwd_kv_wgmma_q128(dqkv, dS, bp, qkv, dout, LD, B, T, NH,
                                      wgbwd_force_a == DT_CU_WGBWD_A_Q128_K64 ? 1 : 2, pdl && !ld_given, s);
    else if (M == 2)
        flash_bwd_kv_wgmma_kernel<2><<<dt_cu_noted(n, 256, sm, "flash_bwd_kv_wgmma_kernel<2>"), 256, sm, s>>>(
            dqkv, dS, bp, qkv, dout, LD, T, NH, scale, grp);
    else
        flash_bwd_kv_wgmma_kernel<1><<<dt_cu_noted(n, 128, sm, "flash_bwd_kv_wgmma_kernel<1>"), 128, sm, s>>>(
            dqkv, dS, bp, qkv, dout, LD, T, NH, scale, grp);
    if (dq == DT_CU_WGBWD_DQ_MMA) {
        dt_cu_flash_bwd_dq(dqkv, bp, dS, qkv, B, T, NH, s);
    } else { /* two query blocks a block where nqb is even, else one */
        const int Mq = nqb % 2 == 0 ? 2 : 1;
        void (*k)(bf16 *, float *, const bf16 *, const bf16 *, int, int, float, int, int) =
            Mq == 2 ? flash_bwd_dq_wgmma_kernel<2> : flash_bwd_dq_wgmma_kernel<1>;
        const size_t smq = dt_wgdq_smem(Mq);
        const dim3 g = dt_cu_noted((unsigned)(BH * (nqb / Mq)), (unsigned)(128 * Mq), smq,
                                   Mq == 2 ? "flash_bwd_dq_wgmma_kernel<2>" : "flash_bwd_dq_wgmma_kernel<1>");
        if (pdl)
            dt_cu_launch_pdl(k, g, (unsigned)(128 * Mq), smq, s, dqkv, bp, (const bf16 *)dS, qkv, T, NH, scale, grp,
                             rev);
        else
            k<<<g, 128 * Mq, smq, s>>>(dqkv, bp, dS, qkv, T, NH, scale, grp, rev);
    }
    if (dbias) { /* every (64-row block, column) partial was written once: by kernel A (K, V) or the dQ pass */
        dt_cu_fork(s, fs);
        dt_cu_parts_finish(dbias, NULL, part, dt_cu_flash_bias_parts(B, T), 3 * C, fs);
    }
}

void dt_cu_flash_bwd_wgmma(bf16 *dqkv, float *dbias, float *part, void *scratch, const bf16 *dout, const bf16 *qkv,
                           const bf16 *out, const float *lse, int B, int T, int C, int NH, cudaStream_t s,
                           cudaStream_t fs) {
    bwd_wgmma(dqkv, dbias, part, scratch, dout, qkv, out, lse, 0, B, T, C, NH, s, fs);
}

void dt_cu_flash_bwd_wgmma_ld(bf16 *dqkv, float *dbias, float *part, void *scratch, const bf16 *dout,
                              const bf16 *qkv, int B, int T, int C, int NH, cudaStream_t s, cudaStream_t fs) {
    bwd_wgmma(dqkv, dbias, part, scratch, dout, qkv, NULL, NULL, 1, B, T, C, NH, s, fs);
}
