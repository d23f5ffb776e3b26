/* Kernel A of the flash backward on warpgroup MMA with 128-query tiles (sm_90a):
 * dt_cu_flash_bwd_kv_wgmma_q128 (flash_cuda.cuh), a configuration of dt_cu_flash_bwd_wgmma
 * (attention_wgmma_bwd_cuda.cu): its rule, with M = 2 where T % 128 == 0
 * (DT_CU_WGBWD_A_Q128_K64 forces M = 1). It writes what the 64-query
 * kernel A (flash_bwd_kv_wgmma_kernel) writes, with the same bits: the dK and dV rows of
 * dqkv, the dS scratch tiles and the bias partials of the K and V columns.
 * tests/gpu/test_gpu_wgmma_bwd.cu compares its bytes in both configurations (identical on
 * the H200) and times them: docs/cuda.md.
 *
 * Why: the 64-query kernel's S^T = K Q^T and dP^T = V dO^T are m64n64k16 products with both
 * operands in shared memory, 4 KB read per 32-cycle product: the shared-memory port's whole
 * rate. As m64n128k16 they read 6 KB per 64 cycles (the key operand once for 128 queries).
 *
 * A block: M consumer warpgroups (64 keys each: key blocks kb0 = M r .. kb0 + M - 1, r the
 * rank of dt_flash_bwd_order) and one producer warpgroup. Each consumer copies its own K
 * and V tiles (cp.async) and waits for them once. The producer copies (cp.async), per query
 * tile j, the 128 rows of Q and dO (query blocks kb0 + 2j, kb0 + 2j + 1; the second absent
 * past the end) and their {lse2, D} pairs into stage j % NST; it waits for its own copies,
 * fences them for the tensor cores (fence.proxy.async) and arrives on the stage's "full"
 * mbarrier, and before refilling a stage waits on its "empty" one, on which every consumer
 * thread arrives once its products of that stage are done. The producer keeps 24 registers
 * (setmaxnreg), the consumers take the rest (240 with M = 2, 232 with M = 1; flash_layout.h).
 * No block barrier in the loop: the warpgroups drift apart and one's elementwise work can
 * overlap another's products.
 * Per tile a consumer warpgroup (row = 16 warp + g, its first key row) issues
 *   S^T = K Q^T     (4 wgmma m64n128k16, A = K, B = Q, both K-major; 64 accumulators),
 * waits for the previous tile's dV and dK products (wgmma.wait_group 1: the only older
 * group), releases that tile's stage, issues
 *   dP^T = V dO^T   (4 wgmma m64n128k16),
 * waits for S^T, computes P^T for each 64-query half (wg_bwd_p), waits for dP^T, computes
 * dS^T (wg_bwd_ds), stores each half's dS tile for the dQ pass, then issues
 *   dV += P^T dO    (8 wgmma m64n64k16, A = P^T from registers, B = dO MN-major),
 *   dK += dS^T Q    (8 wgmma m64n64k16, A = dS^T from registers, B = Q MN-major)
 * and leaves them in flight into the next tile. Live registers peak at dK, dV (64), S^T
 * (64) and dP^T (64): dP^T is issued only after the dV, dK products of the previous tile,
 * whose A operands (64) it may then reuse; the first k-step of each chain is an output-only
 * asm (wgmma_ss_n128_first), so the previous tile's values are dead there. A half outside
 * the causal triangle (query block below the key block, or past the end) gets no products
 * and no dS store: the warpgroup of key block kb0 + 1 skips the first half of its first tile,
 * and where nqb - kb0 is odd the last tile has one half (only with M = 1: M = 2 needs T % 128
 * == 0). Its S^T, dP^T columns are still computed (from whatever the stage holds there:
 * each output column reads only its own query row) and ignored.
 *
 * The same bits as the 64-query kernels (and so as the mma.sync one):
 *  - dV[key, c] = sum over queries of P^T dO and dK = sum of dS^T Q: one owner, and the
 *    chain of m64n64k16 products is the same as the 64-query kernel's: k-steps of 16
 *    queries in increasing order from kb on (a tile's 8 k-steps are its two 64-query blocks
 *    in order, skipped halves contribute nothing, as the 64-query kernel never visits them),
 *    the same A values (the bf16 rounding of the same fp32 P^T, dS^T), the same B rows
 *    (dO, Q at 2 KB a k-step through the same MN-major descriptor form), accumulating into
 *    +0 from the first;
 *  - S^T and dP^T elements: the same 4 channel k-steps in order from a zero accumulator, the
 *    same operand values; an N = 128 product computes each output column as an N = 64 one
 *    does (per element, the same k = 16 dot product and accumulate), which is what the GPU
 *    test confirms as it does for m64n64 against mma.sync m16n8;
 *  - P^T, dS^T: the same functions (wgmma_cuda.cuh) on each half, with that half's LD;
 *  - the dS tiles through store_ds_tile into the same scratch slots, the output rows and
 *    the bias partials through every kernel A's epilogue (flash_store_kv, flash_cuda.cuh:
 *    the 4 warps in warp order). No atomics. */
#include "ops/attention/attention_cuda.h"
#include "ops/attention/flash_wgmma_cuda.cuh"

#include <stdint.h>

/* The A operands of a tile's two halves: fences for all 8 k-steps. */
static __device__ __forceinline__ void reg_fence_a8(uint32_t a[8][4]) {
    reg_fence_a(a);
    reg_fence_a(a + 4);
}

/* A half's kind (DT_WGQ_*) as a type, to pick a wgq_tile instantiation from a lambda. */
template <int K> struct wgq_kind { static constexpr int value = K; };

/* Waits for every product in flight (the last tile's dV, dK): p, ds free, dk, dv final. */
static __device__ __forceinline__ void wgq_drain(float dk[32], float dv[32], uint32_t p[8][4], uint32_t ds[8][4]) {
    wg_wait0();
    reg_fence(dk);
    reg_fence(dv);
    reg_fence_a8(p);
    reg_fence_a8(ds);
}

/* One 128-query tile for one consumer warpgroup; H0, H1: what its two 64-query halves are
 * to the warpgroup's key block (DT_WGQ_*; flash_layout.h), never both SKIP. sK, sV: the
 * warpgroup's key block; sQ, sdO: the stage's 128-row tiles (shared addresses); LDc: the
 * stage's {lse2, D} pairs (the second half's at LDc + 128); dst0, dst1: this warp's and
 * lane's uint4 slot in the dS scratch tile of each half (used where not SKIP); release: the
 * "empty" mbarrier of the previous tile's stage, 0 on the first tile. p, ds: the A operands
 * of the previous tile's dV, dK products (in flight on entry), then of this tile's (in
 * flight on return). */
template <int H0, int H1>
static __device__ __forceinline__ void wgq_tile(float dk[32], float dv[32], float s[64], float dp[64],
                                                uint32_t p[8][4], uint32_t ds[8][4], uint32_t sK, uint32_t sV,
                                                uint32_t sQ, uint32_t sdO, const float *LDc, uint4 *dst0,
                                                uint4 *dst1, uint32_t release, float sl2, int row, int t) {
    /* wg_bwd_desc's descriptors; here Q and dO have 128 rows (16 groups of 8, the two 64-row
     * tiles back to back): K-major they are m64n128 B operands, MN-major their k-steps 4..7
     * are the second tile. */
    const wg_bwd_descs dsc = wg_bwd_desc(sK, sV, sQ, sdO);
    wg_fence();
    wgmma_ss_n128_first(s, dsc.Ka, dsc.Qk);
#pragma unroll
    for (int k = 1; k < 4; k++) wgmma_ss_n128(s, dsc.Ka + (uint64_t)(2 * k), dsc.Qk + (uint64_t)(2 * k));
    wg_commit();
    wg_wait1(); /* the previous tile's dV, dK: p, ds and that tile's stage are free */
    reg_fence_a8(p);
    reg_fence_a8(ds);
    if (release) {
        /* this thread's async-proxy reads (waited for) before the producer's refill, as the
         * 64-query kernel's fence at the top of each tile */
        fence_proxy_async();
        mbar_arrive(release);
    }
    wg_fence();
    wgmma_ss_n128_first(dp, dsc.Va, dsc.Ok);
#pragma unroll
    for (int k = 1; k < 4; k++) wgmma_ss_n128(dp, dsc.Va + (uint64_t)(2 * k), dsc.Ok + (uint64_t)(2 * k));
    wg_commit();
    wg_wait1(); /* S^T */
    reg_fence(s);
    reg_fence(s + 32);
    if (H0 != DT_WGQ_SKIP) wg_bwd_p<H0 == DT_WGQ_DIAG>(s, LDc, sl2, row, t);
    if (H1 != DT_WGQ_SKIP) wg_bwd_p<H1 == DT_WGQ_DIAG>(s + 32, LDc + 128, sl2, row, t);
    reg_fence(s); /* P^T before the wait in the source, to overlap dP^T's products; ptxas */
    reg_fence(s + 32); /* (13.0) still hoists the wait above most exponentials (docs/cuda.md) */
    wg_wait0(); /* dP^T */
    reg_fence(dp);
    reg_fence(dp + 32);
    /* P^T packed after dS^T (the same values): 32 fewer live registers at the peak */
    if (H0 != DT_WGQ_SKIP) {
        wg_bwd_ds(dp, s, LDc, t);
        flash_pack(p, s);
        flash_pack(ds, dp);
        store_ds_tile(dst0, ds);
    }
    if (H1 != DT_WGQ_SKIP) {
        wg_bwd_ds(dp + 32, s + 32, LDc + 128, t);
        flash_pack(p + 4, s + 32);
        flash_pack(ds + 4, dp + 32);
        store_ds_tile(dst1, ds + 4);
    }
    wg_fence();
#pragma unroll
    for (int k = 0; k < 8; k++)
        if ((k < 4 ? H0 : H1) != DT_WGQ_SKIP) wgmma_rs_t(dv, p[k], dsc.Om + (uint64_t)(128 * k));
#pragma unroll
    for (int k = 0; k < 8; k++)
        if ((k < 4 ? H0 : H1) != DT_WGQ_SKIP) wgmma_rs_t(dk, ds[k], dsc.Qm + (uint64_t)(128 * k));
    wg_commit();
    /* a skipped half's operands were not rewritten: redefine them (no product reads them),
     * or the next tile's fences would keep the old values live through its peak */
#pragma unroll
    for (int k = 0; k < 8; k++)
#pragma unroll
        for (int i = 0; i < 4; i++)
            if ((k < 4 ? H0 : H1) == DT_WGQ_SKIP) p[k][i] = ds[k][i] = 0u;
}

/* Grid (B NH T / (64 M)), 128 (M + 1) threads (warpgroups 0..M-1 consume, warpgroup M
 * produces), dt_wgq_smem(M, NST) bytes of dynamic shared memory; M = 2 needs T % 128 == 0.
 * Block i: head bh and rank r from dt_flash_bwd_order (nqb / M blocks a head, rank 0 first);
 * consumer wg owns key block kb = M r + wg. dS tiles, dK, dV and the bias partials exactly
 * as flash_bwd_kv_wgmma_kernel (attention_wgmma_bwd_cuda.cu). One block an SM with M = 2
 * (3 warpgroups), two with M = 1 (2 each): 168 or 128 registers at launch. */
template <int M, int NST>
__global__ void __launch_bounds__(128 * (M + 1), M == 1 ? 2 : 1)
    flash_bwd_kv_wgmma_q128_kernel(bf16 *dqkv, bf16 *dS, float *part, const bf16 *qkv, const bf16 *dout,
                                   const float *LD, int T, int NH, float scale, int grp) {
    uint32_t sb;
    unsigned char *sm = wg_smem_aligned(&sb);
    const int tid = (int)threadIdx.x, wg = tid >> 7;
    const int nqb = T / WB;
    /* Launched with dt_cu_launch_pdl this block may start before the D kernel ends: it waits
     * for it (LD), then lets the dQ pass launch (its blocks take the SMs this grid leaves in
     * its tail and wait there for all of it). */
    pdl_wait();
    pdl_trigger();
    int bh, rank;
    dt_flash_bwd_order((int)blockIdx.x, grp, nqb / M, &bh, &rank);
    const int b = bh / NH, h = bh % NH, C = NH * WD, C3 = 3 * C, kb0 = rank * M, n = dt_wgq_tiles(nqb, kb0);
    const bf16 *base = qkv + (size_t)b * T * C3 + h * WD;
    const float *ldbase = LD + (size_t)bh * 2 * T;
    if (tid == 0) {
        for (int st = 0; st < NST; st++) {
            mbar_init(sb + dt_wgq_full_off(M, NST, st), 128);      /* the producer's threads */
            mbar_init(sb + dt_wgq_empty_off(M, NST, st), 128 * M); /* the consumers' */
        }
        mbar_init_fence();
    }
    __syncthreads();

    if (wg == M) { /* ---- the producer ---- */
        setmaxnreg_dec<DT_WGQ_PRODUCER_REGS>();
        const int pt = tid - 128 * M;
        const bf16 *dbase = dout + (size_t)b * T * C + h * WD;
        /* a 64-row tile is 512 16-byte chunks: this thread copies chunk pt & 7 of rows
         * pt / 8 + 16 u, u < 4, to so + 2048 u (row & 7, so the swizzle, is the same for
         * all); a stage's 128 Q (dO) rows are one such array (the two tiles back to back),
         * u < 8. Lean on registers (24 here): one row pointer, advanced a tile at a time. */
        const uint32_t so = dt_wgmma_sw128((uint32_t)pt >> 3, (uint32_t)pt & 7u);
        auto rows = [&](unsigned char *dst, const bf16 *src, int ld, int nu) {
#pragma unroll 1
            for (int u = 0; u < nu; u++) cp_async16(dst + so + u * 2048, src + (size_t)u * 16 * ld);
        };
        const size_t r0 = (size_t)kb0 * WB + (size_t)(pt >> 3); /* this thread's first row */
        const bf16 *qp = base + r0 * C3 + (pt & 7) * 8, *op = dbase + r0 * C + (pt & 7) * 8;
        const float *lp = ldbase + kb0 * 2 * WB + pt * 4;
        /* Tile j - 1's "full" arrival waits until tile j's copies are issued (its landing
         * overlaps them), except where the refill of tile j's stage waits for the release
         * of tile j - NST, which the consumers give as they start tile j - NST + 1: with 2
         * stages that is tile j - 1 itself, so it is announced first (else a deadlock). */
        int pending = 0; /* tile j - 1 copied and not yet announced */
        for (int j = 0; j < n; j++) {
            const int st = j % NST, nu = kb0 + 2 * j + 1 < nqb ? 8 : 4; /* rows / 16 */
            if (j >= NST) {
                if (NST == 2 && pending) {
                    cp_wait0();
                    fence_proxy_async();
                    mbar_arrive(sb + dt_wgq_full_off(M, NST, (j - 1) % NST));
                    pending = 0;
                }
                mbar_wait(sb + dt_wgq_empty_off(M, NST, st), (uint32_t)(j / NST - 1) & 1u);
            }
            rows(sm + dt_wgq_q_off(M, st), qp, C3, nu);
            rows(sm + dt_wgq_do_off(M, st), op, C, nu);
            if (pt < 8 * nu) cp_async16(sm + dt_wgq_ld_off(M, NST, st) + pt * 16, lp);
            cp_commit();
            qp += (size_t)2 * WB * C3;
            op += (size_t)2 * WB * C;
            lp += 4 * WB;
            if (pending) { /* tile j - 1 has landed for this thread */
                cp_wait1();
                fence_proxy_async();
                mbar_arrive(sb + dt_wgq_full_off(M, NST, (j - 1) % NST));
            }
            pending = 1;
        }
        cp_wait0();
        fence_proxy_async();
        mbar_arrive(sb + dt_wgq_full_off(M, NST, (n - 1) % NST));
        return;
    }

    /* ---- the consumers ---- */
    { /* the warpgroup's K and V tiles, copied by its own threads and waited for below */
        const bf16 *kp = base + C + (size_t)(kb0 + wg) * WB * C3;
        wg_cp_tile_by<128>(sm + dt_wgq_k_off(M, wg), kp, C3, tid & 127);
        wg_cp_tile_by<128>(sm + dt_wgq_v_off(M, wg), kp + C, C3, tid & 127);
        cp_commit();
    }
    setmaxnreg_inc<DT_WGQ_CONSUMER_REGS(M)>();
    const int warp = (tid >> 5) & 3, lane = tid & 31, g = lane >> 2, t = lane & 3, kb = kb0 + wg;
    const int row = warp * 16 + g;
    const float sl2 = scale * LOG2E;
    float dk[32], dv[32], s[64], dp[64];
    uint32_t p[8][4], ds[8][4];
#pragma unroll
    for (int i = 0; i < 32; i++) dk[i] = dv[i] = 0.0f;
    reg_fence(dk); /* the zeros written before any product is in flight (no serialized wgmma) */
    reg_fence(dv);
#pragma unroll
    for (int k = 0; k < 8; k++)
#pragma unroll
        for (int i = 0; i < 4; i++) p[k][i] = ds[k][i] = 0u;
    const uint32_t sK = sb + dt_wgq_k_off(M, wg), sV = sb + dt_wgq_v_off(M, wg);
    cp_wait0(); /* K, V landed for this thread: fenced for the tensor cores, then for all */
    fence_proxy_async();
    named_barrier<1>(128 * M);
    /* this warp's 16-byte slot in the dS tiles of key block kb */
    uint4 *dsg = reinterpret_cast<uint4 *>(dS + (size_t)bh * dt_flash_ds_tiles(nqb) * (WB * WB)) + warp * 32 + lane;
    /* one tile: its stage and dS slots; the halves' kinds H0, H1 (DT_WGQ_*) */
    auto tile = [&](auto h0, auto h1, int j) {
        const int st = j % NST, qb = kb0 + 2 * j;
        mbar_wait(sb + dt_wgq_full_off(M, NST, st), (uint32_t)(j / NST) & 1u);
        const uint32_t sQ = sb + dt_wgq_q_off(M, st), sdO = sb + dt_wgq_do_off(M, st);
        const uint32_t rel = j > 0 ? sb + dt_wgq_empty_off(M, NST, (j - 1) % NST) : 0u;
        const float *LDc = reinterpret_cast<const float *>(sm + dt_wgq_ld_off(M, NST, st));
        uint4 *d0 = dsg + dt_flash_ds_tile(qb, kb) * (WB * WB / 8), *d1 = dsg + dt_flash_ds_tile(qb + 1, kb) * (WB * WB / 8);
        wgq_tile<decltype(h0)::value, decltype(h1)::value>(dk, dv, s, dp, p, ds, sK, sV, sQ, sdO, LDc, d0, d1, rel,
                                                             sl2, row, t);
    };
    using SKIP = wgq_kind<DT_WGQ_SKIP>;
    using DIAG = wgq_kind<DT_WGQ_DIAG>;
    using FULL = wgq_kind<DT_WGQ_FULL>;
    /* The kinds of halves a tile can have (tests/ops/test_flash_layout.c): the first tile
     * (DIAG, FULL), (SKIP, DIAG) (M = 2, key block kb0 + 1) or (DIAG, SKIP) (M = 1,
     * nqb - kb == 1); then (FULL, FULL); with M = 1 and nqb - kb odd, (FULL, SKIP) last.
     * Only (FULL, FULL) runs in the loop, and the others are drained (wgmma.wait_group 0)
     * before and after it: with two kinds of tile in one loop, each leaving products in
     * flight into the next, ptxas (13.0) serializes every wgmma of the kernel (C7512). */
    const int last = dt_wgq_loop_end(nqb, kb0, kb);
    if (dt_wgq_half(kb0 + 1, kb, nqb) == DT_WGQ_FULL) {
        tile(DIAG(), FULL(), 0);
        wgq_drain(dk, dv, p, ds);
    } else if (M == 2) {
        tile(SKIP(), DIAG(), 0);
        wgq_drain(dk, dv, p, ds);
    } else {
        tile(DIAG(), SKIP(), 0);
        wgq_drain(dk, dv, p, ds);
    }
    for (int j = 1; j < last; j++) tile(FULL(), FULL(), j);
    wgq_drain(dk, dv, p, ds);
    if (M == 1 && last < n) {
        tile(FULL(), SKIP(), n - 1);
        wgq_drain(dk, dv, p, ds);
    }
    /* red over the K tiles (see flash_bwd_kv_wgmma_kernel); a barrier of the consumers only
     * (the producer has left) */
    flash_store_kv(dqkv, part, reinterpret_cast<const float(*)[4]>(dk), reinterpret_cast<const float(*)[4]>(dv),
                   reinterpret_cast<float *>(sm) + wg * 512, b, T, kb, h, C, scale,
                   [] { fence_proxy_async(); named_barrier<1>(128 * M); }, [] { named_barrier<1>(128 * M); });
}

static int wgq_attrs_set;

/* One launch of kernel A with M consumer warpgroups and NST stages over nb blocks: a
 * programmatic dependent launch (pdl) or an ordinary one. */
template <int M, int NST>
static void wgq_launch(unsigned nb, int pdl, cudaStream_t s, const char *name, bf16 *dqkv, bf16 *dS, float *part,
                       const bf16 *qkv, const bf16 *dout, const float *LD, int T, int NH, float scale, int grp) {
    const size_t sm = dt_wgq_smem(M, NST);
    const dim3 g = dt_cu_noted(nb, 128 * (M + 1), sm, name);
    if (pdl)
        dt_cu_launch_pdl(flash_bwd_kv_wgmma_q128_kernel<M, NST>, g, 128 * (M + 1), sm, s, dqkv, dS, part, qkv, dout,
                         LD, T, NH, scale, grp);
    else
        flash_bwd_kv_wgmma_q128_kernel<M, NST><<<g, 128 * (M + 1), sm, s>>>(dqkv, dS, part, qkv, dout, LD, T, NH,
                                                                           scale, grp);
}

void dt_cu_flash_bwd_kv_wgmma_q128(bf16 *dqkv, bf16 *dS, float *part, const bf16 *qkv, const bf16 *dout,
                                   const float *LD, int B, int T, int NH, int M, int pdl, cudaStream_t s) {
    if (!wgq_attrs_set) {
        cudaFuncSetAttribute(flash_bwd_kv_wgmma_q128_kernel<2, DT_WGQ_STAGES_M2>,
                             cudaFuncAttributeMaxDynamicSharedMemorySize, (int)dt_wgq_smem(2, DT_WGQ_STAGES_M2));
        cudaFuncSetAttribute(flash_bwd_kv_wgmma_q128_kernel<1, DT_WGQ_STAGES_M1>,
                             cudaFuncAttributeMaxDynamicSharedMemorySize, (int)dt_wgq_smem(1, DT_WGQ_STAGES_M1));
        wgq_attrs_set = 1;
    }
    const float scale = 1.0f / sqrtf((float)WD);
    const int BH = B * NH, nqb = T / WB, grp = dt_flash_bwd_group(BH);
    if (M == 2 && nqb % 2 == 0)
        wgq_launch<2, DT_WGQ_STAGES_M2>((unsigned)(BH * (nqb / 2)), pdl, s, "flash_bwd_kv_wgmma_q128_kernel<2>", dqkv,
                                        dS, part, qkv, dout, LD, T, NH, scale, grp);
    else
        wgq_launch<1, DT_WGQ_STAGES_M1>((unsigned)(BH * nqb), pdl, s, "flash_bwd_kv_wgmma_q128_kernel<1>", dqkv, dS,
                                        part, qkv, dout, LD, T, NH, scale, grp);
}
